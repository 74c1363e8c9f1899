// Explore: every metric name with its metadata (type, help, unit) and series count; a metric opens its
// label names and values; a click on a value builds a query and opens it on the query page.
import { apiGet, el, fmtInt } from './api.js';

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
            el('td', {}, el('a', { href: queryLink(name), onclick: (ev) => ev.stopPropagation() }, name)),
            el('td', {}, md.type || ''),
            el('td', { class: 'num' }, counts.has(name) ? fmtInt(counts.get(name)) : ''),
            el('td', { class: 'help' }, md.help || ''));
        }))
    );
  };
  filter.addEventListener('input', draw);
  draw();

  async function showMetric(name, md) {
    detail.replaceChildren(el('h3', {}, name), 'Loading…');
    try {
      const labels = (await apiGet('/api/v1/labels', { 'match[]': name })).data.filter((l) => l !== '__name__');
      const values = await Promise.all(labels.map((l) => apiGet(`/api/v1/label/${encodeURIComponent(l)}/values`, { 'match[]': name, limit: 200 })));
      detail.replaceChildren(
        el('h3', {}, name, ' ', el('a', { class: 'button', href: queryLink(name) }, 'Query')),
        el('div', { class: 'meta' }, md.type ? `type: ${md.type}` : 'no metadata', md.unit ? ` · unit: ${md.unit}` : '',
          counts.has(name) ? ` · ${fmtInt(counts.get(name))} series in the head` : ''),
        md.help ? el('p', { class: 'help' }, md.help) : null,
        el('table', { class: 'data labels' },
          el('tr', {}, el('th', {}, 'label'), el('th', {}, 'values')),
          labels.map((l, i) =>
            el('tr', {}, el('td', {}, l), el('td', {},
              values[i].data.map((v) => el('a', { class: 'chip', href: queryLink(`${name}{${l}=${JSON.stringify(v)}}`) }, v)),
              values[i].warnings?.length ? el('span', { class: 'more' }, ' …') : null))))
      );
    } catch (e) {
      detail.replaceChildren(el('div', { class: 'alert error' }, e.message));
    }
  }
}
