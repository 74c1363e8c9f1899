// Tessera's web UI: one page, routed on the path. `/graph` is Prometheus' old address of the query
// page: its links (`/graph?g0.expr=…`) open the query page with their panels.
import 'uplot/dist/uPlot.min.css';
import './style.css';
import { el, apiGet, currentStore, setStore } from './api.js';
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
  storeSelector(nav);
  await page.render(main);
  window.__tesseraReady = performance.now();
}

/** Where the server has stores (or union stores) beside `default`, a selector in the navigation bar:
 * every page then reads the chosen store, through its `/store/<name>/` API. */
async function storeSelector(nav) {
  let stores;
  try {
    stores = (await apiGet('/api/v1/status/stores', {}, { global: true })).data;
  } catch {
    return;
  }
  const current = currentStore();
  // A credential that cannot read the chosen store (or `default`) but can read exactly one: that one.
  if (!stores.some((s) => s.name === current) && stores.length === 1) {
    setStore(stores[0].name);
    location.reload();
    return;
  }
  if (stores.length < 2 && stores.every((s) => s.name === current)) return;
  const sel = el('select', { id: 'store', title: 'The store every page reads' },
    stores.map((s) => el('option', { value: s.name }, s.kind === 'union' ? `${s.name} (union)` : s.name)));
  if (!stores.some((s) => s.name === current)) sel.append(el('option', { value: current }, `${current} (unknown)`));
  sel.value = current;
  sel.addEventListener('change', () => {
    setStore(sel.value);
    location.reload();
  });
  nav.append(el('span', { class: 'store-select' }, 'store ', sel));
}

route();
