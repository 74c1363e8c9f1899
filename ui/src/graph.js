// The graph view: uPlot (a small, fast time-series chart) over a range query's matrix.
import uPlot from 'uplot';
import { formatMetric, el } from './api.js';

/** The most series drawn at once; the rest are listed as left out (Prometheus' UI slows to a crawl
 * long before this, uPlot does not, but a legend of thousands helps nobody). */
export const MAX_SERIES = 1000;

const PALETTE = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];

/** Prometheus' value strings as numbers: `+Inf`, `-Inf` and `NaN` are not JavaScript's spellings. */
export function parseValue(s) {
  if (s === '+Inf' || s === 'Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (s === 'NaN') return NaN;
  return parseFloat(s);
}

/** Turns a matrix into uPlot's columns: `data` is one shared x axis of step timestamps (seconds) and one
 * column per series with `null` where it has no point at a step or its value is not finite (a chart
 * cannot place those); `raw` is each series' own values, NaN and ±Inf included and unstacked, for the
 * legend. Histogram samples are drawn by their count, as a float view of them. */
export function toColumns(matrix, startS, endS, stepS, stacked) {
  const n = Math.max(0, Math.round((endS - startS) / stepS) + 1);
  const xs = new Float64Array(n);
  for (let i = 0; i < n; i++) xs[i] = startS + i * stepS;
  const cols = [];
  const raw = [];
  for (const s of matrix.slice(0, MAX_SERIES)) {
    const r = new Array(n).fill(null);
    for (const [t, v] of s.values || []) {
      const i = Math.round((t - startS) / stepS);
      if (i >= 0 && i < n) r[i] = parseValue(v);
    }
    for (const [t, h] of s.histograms || []) {
      const i = Math.round((t - startS) / stepS);
      if (i >= 0 && i < n) r[i] = parseValue(h.count);
    }
    raw.push(r);
    cols.push(r.map((v) => (v !== null && Number.isFinite(v) ? v : null)));
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
  return { data: [Array.from(xs), ...cols], raw };
}

/** Draws `matrix` into `parent`. `onZoom(startMs, endMs)` fires after a drag selection. */
export function drawGraph(parent, matrix, { startS, endS, stepS, stacked, onZoom }) {
  parent.replaceChildren();
  const { data, raw } = toColumns(matrix, startS, endS, stepS, stacked);
  const series = [{ label: 'time (UTC)' }];
  matrix.slice(0, MAX_SERIES).forEach((s, i) => {
    const color = PALETTE[i % PALETTE.length];
    series.push({
      label: formatMetric(s.metric),
      stroke: color,
      width: 1.25,
      fill: stacked ? color + '55' : undefined,
      spanGaps: false,
      points: { show: false },
      // The legend shows the series' own value at the cursor (stacked or not, NaN and ±Inf as such).
      value: (u, v, si, idx) => {
        const x = idx === null || idx === undefined ? null : raw[si - 1][idx];
        return x === null ? '--' : fmtLegend(x);
      },
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
    // Times in UTC, as the time inputs and Prometheus' links have them.
    tzDate: (ts) => uPlot.tzDate(new Date(ts * 1e3), 'Etc/UTC'),
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
  // The caller disposes of the chart before drawing the next (uPlot holds window listeners and the data).
  return {
    plot,
    destroy() {
      ro.disconnect();
      plot.destroy();
    },
  };
}

function fmtLegend(v) {
  if (Number.isNaN(v)) return 'NaN';
  if (v === Infinity) return '+Inf';
  if (v === -Infinity) return '-Inf';
  return String(v);
}

function fmtAxis(v) {
  if (v === null) return '';
  const a = Math.abs(v);
  if (a >= 1e12 || (a > 0 && a < 1e-3)) return v.toExponential(2);
  for (const [d, s] of [[1e9, 'G'], [1e6, 'M'], [1e3, 'k']]) if (a >= d) return +(v / d).toFixed(2) + s;
  return String(+v.toFixed(4));
}
