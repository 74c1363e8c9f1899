// Cardinality: /api/v1/status/tsdb drawn — the head's figures, then the top metrics by series, label
// names by distinct values and by memory, and label pairs by series, each with a bar for its share.
import { apiGet, el, fmtInt, fmtBytes, currentStore, selector } from './api.js';

export async function renderCardinalityPage(root) {
  const limitSel = el('select', {}, [10, 20, 50, 100].map((n) => el('option', { value: n }, `top ${n}`)));
  const body = el('div', {}, 'Loading…');
  root.replaceChildren(el('h2', {}, 'Cardinality ', limitSel), body);
  const load = async () => {
    try {
      const { data } = await apiGet('/api/v1/status/tsdb', { limit: limitSel.value });
      const h = data.headStats;
      body.replaceChildren(
        el('table', { class: 'data head-stats' },
          el('tr', {}, el('th', {}, 'head series'), el('th', {}, 'chunks'), el('th', {}, 'label pairs'), el('th', {}, 'min time'), el('th', {}, 'max time')),
          el('tr', {}, el('td', { class: 'num', id: 'head-series' }, fmtInt(h.numSeries)), el('td', { class: 'num' }, fmtInt(h.chunkCount)),
            el('td', { class: 'num' }, fmtInt(h.numLabelPairs)), el('td', {}, fmtT(h.minTime)), el('td', {}, fmtT(h.maxTime)))),
        section('Top metrics by series', 'metrics-by-series', data.seriesCountByMetricName, fmtInt, (n) => `/query?${new URLSearchParams({ 'g0.expr': selector(n), 'g0.tab': '1' })}`),
        section('Label names by distinct values', 'labels-by-values', data.labelValueCountByLabelName, fmtInt),
        section('Label names by memory (bytes of values)', 'labels-by-memory', data.memoryInBytesByLabelName, fmtBytes),
        section('Label pairs by series', 'pairs-by-series', data.seriesCountByLabelValuePair, fmtInt),
        await churn()
      );
    } catch (e) {
      body.replaceChildren(el('div', { class: 'alert error' }, e.message));
    }
  };
  limitSel.addEventListener('change', load);
  await load();
}

function fmtT(ms) {
  return ms > 0 && ms < 1e15 ? new Date(ms).toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z') : '—';
}

function section(title, id, rows, fmt, link) {
  const max = Math.max(1, ...rows.map((r) => r.value));
  return el('div', { class: 'card', id },
    el('h3', {}, title),
    el('table', { class: 'data bars' }, rows.map((r) =>
      el('tr', {},
        el('td', { class: 'name' }, link ? el('a', { href: link(r.name) }, r.name) : r.name),
        el('td', { class: 'num' }, fmt(r.value)),
        el('td', { class: 'barcell' }, el('span', { class: 'bar', style: { width: `${(100 * r.value) / max}%` } }))))));
}

/** Series churn from the server's own counters in /metrics (created and removed head series). */
async function churn() {
  try {
    const text = await (await fetch('/metrics', { credentials: 'same-origin' })).text();
    // The default store's series are unlabelled, another store's carry `store="<name>"`.
    const store = currentStore();
    const escape = (x) => x.replace(/[.*+?^$()|[\]{}\\]/g, (c) => `\\${c}`);
    const sel = store === 'default' ? '' : escape(`{store=${JSON.stringify(store)}}`);
    const pick = (name) => {
      const m = new RegExp(`^${name}${sel} ([0-9.e+]+)$`, 'm').exec(text);
      return m ? parseFloat(m[1]) : null;
    };
    const created = pick('tessera_tsdb_series_created_total');
    const removed = pick('tessera_tsdb_series_removed_total');
    if (created === null && removed === null) return null;
    return el('div', { class: 'card', id: 'churn' }, el('h3', {}, 'Churn since start'),
      el('div', {}, `series created: ${fmtInt(created ?? 0)} · series removed: ${fmtInt(removed ?? 0)}`));
  } catch {
    return null;
  }
}
