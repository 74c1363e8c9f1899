// Status: build information, runtime information (start time, WAL replay, retention, data directory
// size…) and every flag's effective value, from Prometheus' status endpoints.
import { apiGet, el, fmtInt, fmtBytes } from './api.js';

export async function renderStatusPage(root) {
  root.replaceChildren(el('h2', {}, 'Status'), 'Loading…');
  try {
    const [b, r, f] = await Promise.all([apiGet('/api/v1/status/buildinfo'), apiGet('/api/v1/status/runtimeinfo'), apiGet('/api/v1/status/flags')]);
    let stores = null;
    try {
      stores = (await apiGet('/api/v1/status/stores', {}, { global: true })).data;
    } catch {
      // Older servers, or no right to list them: the section is left out.
    }
    root.replaceChildren(
      el('h2', {}, 'Status'),
      stores ? storesTable(stores) : null,
      table('Build information', 'build-info', b.data),
      table('Runtime information', 'runtime-info', { ...r.data, uptime: uptime(r.data.startTime) }),
      table('Flags', 'flags', f.data)
    );
  } catch (e) {
    root.replaceChildren(el('h2', {}, 'Status'), el('div', { class: 'alert error' }, e.message));
  }
}

function table(title, id, obj) {
  return el('div', { class: 'card', id },
    el('h3', {}, title),
    el('table', { class: 'data kv' }, Object.entries(obj).map(([k, v]) =>
      el('tr', {}, el('th', {}, k), el('td', {}, typeof v === 'object' ? JSON.stringify(v) : String(v))))));
}

/** Stores and union stores, with their limits and what each holds. */
function storesTable(stores) {
  const lim = (l) => [
    l.ingestionRate ? `${fmtInt(l.ingestionRate)} samples/s (burst ${fmtInt(l.ingestionBurst || l.ingestionRate)})` : 'no ingestion limit',
    l.queryMaxSamples ? `query samples ≤ ${fmtInt(l.queryMaxSamples)}` : '',
    l.queryMaxConcurrency ? `≤ ${l.queryMaxConcurrency} queries at once` : '',
  ].filter(Boolean).join(' · ');
  const use = (s) => {
    if (s.kind === 'union') return `union of ${s.members.map((m) => m.name + (Object.keys(m.externalLabels).length ? ` ${JSON.stringify(m.externalLabels)}` : '')).join(', ')}`;
    const u = s.usage;
    if (!u) return 'not open yet';
    return `${fmtInt(u.headSeries)} head series, ${fmtInt(u.headSamples)} head samples · ${fmtInt(u.blocks)} blocks, ${fmtBytes(u.blockBytes)} · WAL ${fmtBytes(u.walBytes)}` +
      (u.tierBlocks ? ` · tiers ${fmtInt(u.tierBlocks)} blocks, ${fmtBytes(u.tierBytes)}` : '') +
      (u.openSeconds !== null && u.openSeconds !== undefined ? ` · opened (WAL replayed) in ${u.openSeconds.toFixed(2)} s` : '');
  };
  return el('div', { class: 'card', id: 'stores' },
    el('h3', {}, 'Stores'),
    el('table', { class: 'data' },
      el('tr', {}, el('th', {}, 'store'), el('th', {}, 'ready'), el('th', {}, 'holds'), el('th', {}, 'limits')),
      stores.map((s) => el('tr', {}, el('td', {}, s.name), el('td', {}, s.ready ? 'yes' : 'no'), el('td', {}, use(s)), el('td', {}, lim(s.limits))))));
}

function uptime(start) {
  const s = Math.max(0, Math.floor((Date.now() - Date.parse(start)) / 1000));
  const d = Math.floor(s / 86400);
  const h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60);
  return `${d ? `${d}d ` : ''}${h}h ${m}m ${s % 60}s`;
}
