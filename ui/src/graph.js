// The graph view: uPlot (a small, fast time-series chart) over a range query's matrix.
import uPlot from 'uplot';
import { formatMetric, el } from './api.js';

/** The most series drawn at once; the rest are listed as left out (Prometheus' UI slows to a crawl
 * long before this, uPlot does not, but a legend of thousands helps nobody). */
export const MAX_SERIES = 1000;

const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

/** Turns a matrix into uPlot's columns: one shared x axis of step timestamps (seconds), one column of
 * values per series with `null` where a series has no point at a step. Histogram samples are drawn by
 * their count, as a float view of them. */
export function toColumns(matrix, startS, endS, stepS, stacked) {
  const n = Math.max(0, Math.round((endS - startS) / stepS) + 1);
  const xs = new Float64Array(n);
  for (let i = 0; i < n; i++) xs[i] = startS + i * stepS;
  const cols = [];
  for (const s of matrix.slice(0, MAX_SERIES)) {
    const col = new Array(n).fill(null);
    for (const [t, v] of s.values || []) {
      const i = Math.round((t - startS) / stepS);
      if (i >= 0 && i < n) col[i] = parseFloat(v);
    }
    for (const [t, h] of s.histograms || []) {
      const i = Math.round((t - startS) / stepS);
      if (i >= 0 && i < n) col[i] = parseFloat(h.count);
    }
    cols.push(col);
  }
  if (stacked) {
    // Each column becomes the running sum of those before it (absent points count as 0 within a
    // stack but stay absent where the series itself has no point).
    const acc = new Array(n).fill(0);
    for (const col of cols) {
      for (let i = 0; i < n; i++) {
        if (col[i] !== null && Number.isFinite(col[i])) {
          acc[i] += col[i];
          col[i] = acc[i];
        }
      }
    }
  }
  return [Array.from(xs), ...cols];
}

/** Draws `matrix` into `parent`. `onZoom(startMs, endMs)` fires after a drag selection. */
export function drawGraph(parent, matrix, { startS, endS, stepS, stacked, onZoom }) {
  parent.replaceChildren();
  const data = toColumns(matrix, startS, endS, stepS, stacked);
  const series = [{ label: 'time' }];
  matrix.slice(0, MAX_SERIES).forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    series.push({
      label: formatMetric(s.metric),
      stroke: color,
      width: 1.25,
      fill: stacked ? color + '55' : undefined,
      spanGaps: false,
      points: { show: false },
    });
  });
  const box = el('div', { class: 'graph-canvas' });
  parent.append(box);
  if (matrix.length > MAX_SERIES) {
    parent.append(el('div', { class: 'alert warning' }, `Showing the first ${MAX_SERIES} of ${matrix.length} series.`));
  }
  const width = Math.max(300, parent.clientWidth || 900);
  const opts = {
    width,
    height: 360,
    series,
    scales: { x: { time: true, min: startS, max: endS } },
    axes: [{}, { size: 70, values: (u, vals) => vals.map(fmtAxis) }],
    cursor: { drag: { x: true, y: false, setScale: false } },
    legend: { show: true, live: true },
    hooks: {
      setSelect: [
        (u) => {
          if (u.select.width < 3) return;
          const a = u.posToVal(u.select.left, 'x');
          const b = u.posToVal(u.select.left + u.select.width, 'x');
          u.setSelect({ left: 0, width: 0, top: 0, height: 0 }, false);
          if (onZoom && b > a) onZoom(Math.round(a * 1000), Math.round(b * 1000));
        },
      ],
    },
  };
  const plot = new uPlot(opts, data, box);
  const ro = new ResizeObserver(() => {
    const w = parent.clientWidth;
    if (w > 0 && Math.abs(w - plot.width) > 4) plot.setSize({ width: w, height: 360 });
  });
  ro.observe(parent);
  return plot;
}

function fmtAxis(v) {
  if (v === null) return '';
  const a = Math.abs(v);
  if (a >= 1e12 || (a > 0 && a < 1e-3)) return v.toExponential(2);
  for (const [d, s] of [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']]) if (a >= d) return +(v / d).toFixed(2) + s;
  return String(+v.toFixed(4));
}
