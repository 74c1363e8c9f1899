// Status: build information, runtime information (start time, WAL replay, retention, data directory
// size…) and every flag's effective value, from Prometheus' status endpoints.
import { apiGet, el } from './api.js';

export async function renderStatusPage(root) {
  root.replaceChildren(el('h2', {}, 'Status'), 'Loading…');
  try {
    const [b, r, f] = await Promise.all([apiGet('/api/v1/status/buildinfo'), apiGet('/api/v1/status/runtimeinfo'), apiGet('/api/v1/status/flags')]);
    root.replaceChildren(
      el('h2', {}, 'Status'),
      table('Build information', 'build-info', b.data),
      table('Runtime information', 'runtime-info', r.data),
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
