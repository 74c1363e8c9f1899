// The query page: panels, each with an editor, a table, a graph and an explain view. The state of every
// panel lives in the URL in Prometheus' own parameters (`g0.expr`, `g0.tab`, `g0.range_input`,
// `g0.end_input`, `g0.moment_input`, `g0.step_input`, `g0.stacked`), so links shared from a
// Prometheus open here, and links from here open in a Prometheus.
import { apiGet, apiPost, el, formatMetric, parseDuration, formatDuration, parseTime, formatTime, fmtInt } from './api.js';
import { createEditor } from './editor.js';
import { drawGraph } from './graph.js';
import { renderPlan } from './explain.js';

const TABS = ['table', 'graph', 'explain'];

/** Reads the panels from URL parameters (Prometheus 2's `g0.tab=0|1` and 3's names alike). */
export function panelsFromParams(params) {
  const panels = [];
  for (let i = 0; i < 64; i++) {
    const p = (k) => params.get(`g${i}.${k}`);
    if (p('expr') === null && p('tab') === null && p('range_input') === null) {
      if (i > 0) break;
      continue;
    }
    let tab = p('tab');
    if (tab === '0') tab = 'graph';
    else if (tab === '1') tab = 'table';
    if (!TABS.includes(tab)) tab = 'table';
    panels.push({
      expr: p('expr') || '',
      tab,
      rangeMs: parseDuration(p('range_input')) || 3600e3,
      endMs: parseTime(p('end_input')),
      momentMs: parseTime(p('moment_input')),
      // Prometheus 2's `step_input` (seconds); Prometheus 3's `res_type=fixed|custom` with `res_step`.
      stepMs: parseDuration(p('step_input') || (p('res_type') === 'auto' ? null : p('res_step'))) || null,
      stacked: p('stacked') === '1' || p('display_mode') === 'stacked',
      explainRange: p('explain_range') === '1',
    });
  }
  if (panels.length === 0) panels.push(newPanel());
  return panels;
}

export function newPanel(expr = '') {
  return { expr, tab: 'table', rangeMs: 3600e3, endMs: null, momentMs: null, stepMs: null, stacked: false, explainRange: false };
}

/** Writes the panels back as URL parameters. */
export function panelsToParams(panels) {
  const q = new URLSearchParams();
  panels.forEach((p, i) => {
    q.set(`g${i}.expr`, p.expr);
    // `0` (graph) and `1` (table) are what both Prometheus 2 and 3 read; `explain` is ours.
    q.set(`g${i}.tab`, p.tab === 'graph' ? '0' : p.tab === 'table' ? '1' : p.tab);
    q.set(`g${i}.range_input`, formatDuration(p.rangeMs));
    if (p.endMs !== null) q.set(`g${i}.end_input`, formatTime(p.endMs));
    if (p.momentMs !== null) q.set(`g${i}.moment_input`, formatTime(p.momentMs));
    if (p.stepMs) q.set(`g${i}.step_input`, String(p.stepMs / 1000));
    if (p.stacked) q.set(`g${i}.stacked`, '1');
    if (p.explainRange) q.set(`g${i}.explain_range`, '1');
  });
  return q;
}

/** Prometheus' UI default resolution: range / 250, at least 1 s. */
export function autoStepMs(rangeMs) {
  return Math.max(Math.floor(rangeMs / 250 / 1000), 1) * 1000;
}

export function renderQueryPage(root) {
  const panels = panelsFromParams(new URLSearchParams(location.search));
  const list = el('div', { class: 'panels' });
  // The URL follows the panels, at most every 300 ms (browsers throttle bursts of history updates).
  let timer = null;
  const sync = () => {
    clearTimeout(timer);
    timer = setTimeout(() => history.replaceState(null, '', `${location.pathname}?${panelsToParams(panels)}`), 300);
  };
  const add = (state, run) => {
    const node = renderPanel(state, {
      onChange: sync,
      onRemove: () => {
        const i = panels.indexOf(state);
        if (i >= 0) panels.splice(i, 1);
        node.remove();
        sync();
      },
    });
    list.append(node);
    if (run && state.expr) node.run();
  };
  panels.forEach((p) => add(p, true));
  root.replaceChildren(
    list,
    el('button', {
      class: 'add-panel',
      id: 'add-panel',
      onclick: () => {
        const p = newPanel();
        panels.push(p);
        add(p, false);
        sync();
      },
    }, 'Add panel')
  );
  sync();
}

function renderPanel(state, { onChange, onRemove }) {
  let controller = null;
  let chart = null;
  const dropChart = () => {
    chart?.destroy();
    chart = null;
  };
  const result = el('div', { class: 'result' });
  const statsLine = el('div', { class: 'stats' });
  const notes = el('div', { class: 'notes' });
  const editorBox = el('div', { class: 'editor' });
  const run = () => execute();
  const editor = createEditor(editorBox, {
    doc: state.expr,
    onRun: run,
    onChange: (v) => {
      state.expr = v;
      onChange();
    },
  });

  const tabButtons = TABS.map((t) =>
    el('button', { class: `tab ${state.tab === t ? 'active' : ''}`, 'data-tab': t, onclick: () => selectTab(t) }, t[0].toUpperCase() + t.slice(1))
  );
  const selectTab = (t) => {
    state.tab = t;
    tabButtons.forEach((b) => b.classList.toggle('active', b.dataset.tab === t));
    controls.replaceChildren(controlsFor(t));
    onChange();
    if (state.expr.trim()) execute();
    else result.replaceChildren();
  };

  // Controls of each tab.
  const momentInput = el('input', { class: 'time', placeholder: 'Evaluation time, UTC (now)', title: 'YYYY-MM-DD hh:mm:ss (UTC) or Unix seconds', value: state.momentMs === null ? '' : formatTime(state.momentMs) });
  momentInput.addEventListener('change', () => {
    state.momentMs = parseTime(momentInput.value);
    onChange();
    execute();
  });
  const rangeInput = el('input', { class: 'range', value: formatDuration(state.rangeMs), title: 'Range (e.g. 1h, 30m, 2d)' });
  const endInput = el('input', { class: 'time', placeholder: 'End time, UTC (now)', title: 'YYYY-MM-DD hh:mm:ss (UTC) or Unix seconds', value: state.endMs === null ? '' : formatTime(state.endMs) });
  const stepInput = el('input', { class: 'step', placeholder: 'Res. (s)', value: state.stepMs ? String(state.stepMs / 1000) : '', title: 'Resolution in seconds (empty: automatic)' });
  const stackedBox = el('input', { type: 'checkbox', checked: state.stacked });
  const applyRange = () => {
    const r = parseDuration(rangeInput.value);
    if (r) state.rangeMs = r;
    rangeInput.value = formatDuration(state.rangeMs);
    state.endMs = parseTime(endInput.value);
    state.stepMs = stepInput.value ? parseDuration(stepInput.value) : null;
    state.stacked = stackedBox.checked;
    onChange();
    execute();
  };
  [rangeInput, endInput, stepInput].forEach((i) => i.addEventListener('change', applyRange));
  stackedBox.addEventListener('change', applyRange);
  const zoom = (factor) => () => {
    state.rangeMs = Math.max(1000, Math.round(state.rangeMs * factor));
    rangeInput.value = formatDuration(state.rangeMs);
    applyRange();
  };
  const explainMode = el('select', {}, el('option', { value: 'instant' }, 'instant query'), el('option', { value: 'range' }, "range query (the graph's range)"));
  explainMode.value = state.explainRange ? 'range' : 'instant';
  explainMode.addEventListener('change', () => {
    state.explainRange = explainMode.value === 'range';
    onChange();
    execute();
  });
  const controlsFor = (t) => {
    if (t === 'table') return el('span', {}, momentInput);
    if (t === 'graph')
      return el('span', {},
        el('button', { onclick: zoom(0.5), title: 'Shrink the range' }, '−'), rangeInput, el('button', { onclick: zoom(2), title: 'Grow the range' }, '+'),
        endInput, stepInput, el('label', {}, stackedBox, ' stacked'));
    return el('span', {}, 'Explain as ', explainMode, ' — the plan with what each node cost and where it ran');
  };
  const controls = el('div', { class: 'controls' }, controlsFor(state.tab));

  const node = el('div', { class: 'panel' },
    el('div', { class: 'panel-head' }, editorBox,
      el('button', { class: 'execute', onclick: run }, 'Execute'),
      el('button', { class: 'remove', title: 'Remove panel', onclick: () => { controller?.abort(); dropChart(); onRemove(); } }, '×')),
    el('div', { class: 'tabs' }, tabButtons, controls),
    notes, result, statsLine);

  async function execute() {
    const expr = editor.value.trim();
    state.expr = editor.value;
    onChange();
    if (!expr) return;
    controller?.abort();
    controller = new AbortController();
    const signal = controller.signal;
    const tab = state.tab;
    notes.replaceChildren();
    statsLine.replaceChildren();
    dropChart();
    result.replaceChildren(el('div', { class: 'loading' }, 'Loading…'));
    result.dataset.state = 'loading';
    const t0 = performance.now();
    const endMs = state.endMs ?? Date.now();
    const stepMs = state.stepMs || autoStepMs(state.rangeMs);
    const startMs = endMs - state.rangeMs;
    const rangeParams = { query: expr, start: startMs / 1000, end: endMs / 1000, step: stepMs / 1000, stats: 'all' };
    try {
      let json;
      if (tab === 'graph') {
        json = await apiPost('/api/v1/query_range', rangeParams, { signal });
      } else if (tab === 'explain') {
        json = state.explainRange
          ? await apiPost('/api/v1/query_range', { ...rangeParams, trace: 1, nocache: 1 }, { signal })
          : await apiPost('/api/v1/query', { query: expr, time: (state.momentMs ?? Date.now()) / 1000, stats: 'all', trace: 1 }, { signal });
      } else {
        json = await apiPost('/api/v1/query', { query: expr, time: (state.momentMs ?? Date.now()) / 1000, stats: 'all' }, { signal });
      }
      const ms = performance.now() - t0;
      for (const w of json.warnings || []) notes.append(el('div', { class: 'alert warning' }, el('b', {}, 'Warning: '), w));
      for (const w of json.infos || []) notes.append(el('div', { class: 'alert info' }, el('b', {}, 'Info: '), w));
      const data = json.data;
      if (tab === 'graph') {
        if (data.resultType !== 'matrix') {
          result.replaceChildren(el('div', { class: 'alert info' }, `The graph needs a range query result; this expression gives a ${data.resultType}.`));
        } else if (data.result.length === 0) {
          result.replaceChildren(el('div', { class: 'empty' }, 'Empty query result'));
        } else {
          result.replaceChildren();
          chart = drawGraph(result, data.result, {
            startS: startMs / 1000, endS: endMs / 1000, stepS: stepMs / 1000, stacked: state.stacked,
            onZoom: (a, b) => {
              state.rangeMs = Math.max(1000, b - a);
              state.endMs = b;
              rangeInput.value = formatDuration(state.rangeMs);
              endInput.value = formatTime(b);
              onChange();
              execute();
            },
          });
        }
      } else if (tab === 'explain') {
        result.replaceChildren(renderPlan(json.trace));
      } else {
        result.replaceChildren(renderTable(data));
      }
      result.dataset.state = 'done';
      const s = data.stats?.samples;
      statsLine.replaceChildren(
        `Load time: ${Math.round(ms)} ms`,
        tab === 'graph' ? ` · Resolution: ${stepMs / 1000} s` : '',
        ` · Result series: ${Array.isArray(data.result) ? fmtInt(data.result.length) : 1}`,
        s ? ` · Samples: ${fmtInt(s.totalQueryableSamples)} queried, peak ${fmtInt(s.peakSamples)}` : ''
      );
    } catch (e) {
      if (e.name === 'AbortError') return;
      result.dataset.state = 'error';
      result.replaceChildren(el('div', { class: 'alert error' }, el('b', {}, 'Error: '), e.message));
    }
  }
  node.run = execute;
  return node;
}

/** The table view of an instant query's result. */
export function renderTable(data) {
  const { resultType, result } = data;
  if (resultType === 'scalar' || resultType === 'string') {
    return el('table', { class: 'data' }, el('tr', {}, el('td', { class: 'labels' }, resultType), el('td', { class: 'value' }, result[1])));
  }
  if (result.length === 0) return el('div', { class: 'empty' }, 'Empty query result');
  const shown = result.slice(0, 10000);
  const rows = shown.map((s) => {
    let value;
    if (resultType === 'vector') {
      value = s.histogram ? renderHistogram(s.histogram[1]) : s.value[1];
    } else {
      const pts = (s.values || []).map(([t, v]) => `${v} @${t}`);
      const hs = (s.histograms || []).map(([t, h]) => `{count: ${h.count}, sum: ${h.sum}} @${t}`);
      value = el('div', { class: 'points' }, [...pts, ...hs].map((x) => el('div', {}, x)));
    }
    return el('tr', {}, el('td', { class: 'labels' }, formatMetric(s.metric)), el('td', { class: 'value' }, value));
  });
  const out = el('div', {}, el('table', { class: 'data' }, rows));
  if (result.length > shown.length) out.prepend(el('div', { class: 'alert warning' }, `Showing the first ${shown.length} of ${result.length} series.`));
  return out;
}

function renderHistogram(h) {
  // Prometheus' boundary rules: 0 (a,b], 1 [a,b), 2 (a,b), 3 [a,b].
  const buckets = (h.buckets || []).map(([rule, lo, hi, c]) => {
    const open = rule === 0 || rule === 2 ? '(' : '[';
    const close = rule === 0 || rule === 3 ? ']' : ')';
    return el('tr', {}, el('td', {}, `${open}${lo}, ${hi}${close}`), el('td', {}, c));
  });
  return el('details', { class: 'histogram' },
    el('summary', {}, `count: ${h.count}, sum: ${h.sum}, ${buckets.length} buckets`),
    el('table', {}, el('tr', {}, el('th', {}, 'bucket'), el('th', {}, 'count')), buckets));
}
