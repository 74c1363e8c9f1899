// Tessera's web UI: one page, routed on the path. `/graph` is Prometheus' old address of the query
// page: its links (`/graph?g0.expr=…`) open the query page with their panels.
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { el } from './api.js';
import { renderQueryPage } from './query.js';
import { renderExplorePage } from './explore.js';
import { renderCardinalityPage } from './cardinality.js';
import { renderStatusPage } from './status.js';

const PAGES = [
  { path: '/query', title: 'Query', render: renderQueryPage },
  { path: '/explore', title: 'Explore', render: renderExplorePage },
  { path: '/cardinality', title: 'Cardinality', render: renderCardinalityPage },
  { path: '/status', title: 'Status', render: renderStatusPage },
];
const ALIASES = { '/': '/query', '/graph': '/query', '/tsdb-status': '/cardinality', '/flags': '/status' };

async function route() {
  let path = location.pathname.replace(/\/+$/, '') || '/';
  if (ALIASES[path]) {
    path = ALIASES[path];
    history.replaceState(null, '', path + location.search);
  }
  const page = PAGES.find((p) => p.path === path) || PAGES[0];
  document.title = `${page.title} — Tessera`;
  const nav = el('nav', {},
    el('a', { class: 'brand', href: '/query' }, 'Tessera'),
    PAGES.map((p) => el('a', { href: p.path, class: p === page ? 'active' : '' }, p.title)));
  const main = el('main', { id: 'page', 'data-page': page.path.slice(1) });
  document.body.replaceChildren(nav, main);
  await page.render(main);
  window.__tesseraReady = performance.now();
}

route();
