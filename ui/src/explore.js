// Explore: every metric name with its metadata (type, help, unit) and series count; a metric opens its
// label names and values; a click on a value builds a query and opens it on the query page.
import { apiGet, el, fmtInt, selector } from './api.js';

function queryLink(expr) {
  return `/query?${new URLSearchParams({ 'g0.expr': expr, 'g0.tab': 'table' })}`;
}

export async function renderExplorePage(root) {
  const filter = el('input', { class: 'filter', placeholder: 'Filter metric names', autofocus: true });
  const list = el('div', { class: 'metric-list' }, 'Loading…');
  const detail = el('div', { class: 'metric-detail' });
  root.replaceChildren(el('h2', {}, 'Explore metrics'), filter, el('div', { class: 'explore' }, list, detail));
  let names, metadata, counts;
  try {
    const [n, m, c] = await Promise.all([
      apiGet('/api/v1/label/__name__/values'),
      apiGet('/api/v1/metadata'),
      apiGet('/api/v1/status/tsdb', { limit: 10000 }),
    ]);
    names = n.data;
    metadata = m.data;
    counts = new Map(c.data.seriesCountByMetricName.map((s) => [s.name, s.value]));
  } catch (e) {
    list.replaceChildren(el('div', { class: 'alert error' }, e.message));
    return;
  }
  const draw = () => {
    const f = filter.value.toLowerCase();
    const shown = names.filter((n) => n.toLowerCase().includes(f));
    list.replaceChildren(
      el('div', { class: 'count' }, `${fmtInt(shown.length)} of ${fmtInt(names.length)} metrics`),
      el('table', { class: 'data metrics' },
        el('tr', {}, el('th', {}, 'metric'), el('th', {}, 'type'), el('th', {}, 'head series'), el('th', {}, 'help')),
        shown.slice(0, 2000).map((name) => {
          const md = (metadata[name] || [])[0] || {};
          return el('tr', { class: 'metric-row', 'data-metric': name, onclick: () => showMetric(name, md) },
            el('td', {}, el('a', { href: queryLink(selector(name)), onclick: (ev) => ev.stopPropagation() }, name)),
            el('td', {}, md.type || ''),
            el('td', { class: 'num' }, counts.has(name) ? fmtInt(counts.get(name)) : ''),
            el('td', { class: 'help' }, md.help || ''));
        }))
    );
  };
  filter.addEventListener('input', draw);
  draw();

  // Only the newest click's answer is drawn, however the responses arrive.
  let shown = 0;
  async function showMetric(name, md) {
    const mine = ++shown;
    detail.replaceChildren(el('h3', {}, name), 'Loading…');
    const match = selector(name);
    try {
      const labels = (await apiGet('/api/v1/labels', { 'match[]': match })).data.filter((l) => l !== '__name__');
      // Label names are `U__`-escaped in the path where they are not classic names, as Prometheus 3.
      const values = await Promise.all(labels.map((l) => apiGet(`/api/v1/label/${encodeURIComponent(escapeLabelName(l))}/values`, { 'match[]': match, limit: 200 })));
      if (mine !== shown) return;
      detail.replaceChildren(
        el('h3', {}, name, ' ', el('a', { class: 'button', href: queryLink(match) }, 'Query')),
        el('div', { class: 'meta' }, md.type ? `type: ${md.type}` : 'no metadata', md.unit ? ` · unit: ${md.unit}` : '',
          counts.has(name) ? ` · ${fmtInt(counts.get(name))} series in the head` : ''),
        md.help ? el('p', { class: 'help' }, md.help) : null,
        el('table', { class: 'data labels' },
          el('tr', {}, el('th', {}, 'label'), el('th', {}, 'values')),
          labels.map((l, i) =>
            el('tr', {}, el('td', {}, l), el('td', {},
              values[i].data.map((v) => el('a', { class: 'chip', href: queryLink(selector(name, l, v)) }, v)),
              values[i].warnings?.length ? el('span', { class: 'more' }, ' …') : null))))
      );
    } catch (e) {
      if (mine === shown) detail.replaceChildren(el('div', { class: 'alert error' }, e.message));
    }
  }
}

/** Prometheus 3's `U__` escaping of a label name in a URL path (`model.EscapeName`, values escaping):
 * classic names as they are; others `U__` then each character kept if `[a-zA-Z0-9]`, `_` doubled, any
 * other as `_<hex code point>_`. */
export function escapeLabelName(n) {
  if (/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(n)) return n;
  let out = 'U__';
  for (const ch of n) {
    if (/[a-zA-Z0-9]/.test(ch)) out += ch;
    else if (ch === '_') out += '__';
    else out += `_${ch.codePointAt(0).toString(16)}_`;
  }
  return out;
}
