// Talking to Tessera's Prometheus-compatible HTTP API. Every request is relative to the page's origin,
// so the UI works wherever the binary serves it, behind TLS and basic auth alike (the browser sends the
// credentials it was given for the page).

/** Error carrying the API's `errorType` and `error`, as Prometheus' UI shows them. */
export class ApiError extends Error {
  constructor(message, type, status) {
    super(message);
    this.type = type;
    this.status = status;
  }
}

/** The store the UI reads (chosen in the navigation bar; `default` unless one was chosen), as the
 * `/store/<name>` prefix its API requests carry. */
export function currentStore() {
  try {
    return localStorage.getItem('tessera.store') || 'default';
  } catch {
    return 'default';
  }
}

export function setStore(name) {
  try {
    if (!name || name === 'default') localStorage.removeItem('tessera.store');
    else localStorage.setItem('tessera.store', name);
  } catch {
    // Private windows may refuse storage: the default store it is.
  }
}

/** `/store/<name>` for a chosen store, '' for the default one. */
export function storePrefix() {
  const s = currentStore();
  return s === 'default' ? '' : `/store/${encodeURIComponent(s)}`;
}

/** GET `path` with `params` (an object; arrays repeat the key) from the chosen store, returns the
 * parsed envelope. */
export async function apiGet(path, params = {}, { signal, global = false } = {}) {
  const qs = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    if (Array.isArray(v)) v.forEach((x) => qs.append(k, x));
    else qs.append(k, String(v));
  }
  // `global`: a server-wide endpoint, asked without the store prefix.
  const prefix = global ? '' : storePrefix();
  const url = qs.toString() ? `${prefix}${path}?${qs}` : `${prefix}${path}`;
  return request(url, { method: 'GET', signal });
}

/** POST a form (long queries do not fit a URL). */
export async function apiPost(path, params = {}, { signal } = {}) {
  const body = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v === undefined || v === null || v === '') continue;
    body.append(k, String(v));
  }
  return request(`${storePrefix()}${path}`, {
    method: 'POST',
    body,
    headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
    signal,
  });
}

async function request(url, init) {
  let resp;
  try {
    resp = await fetch(url, { ...init, credentials: 'same-origin' });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(`cannot reach the server: ${e.message}`, 'network', 0);
  }
  const text = await resp.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    throw new ApiError(`${resp.status} ${resp.statusText}: ${text.slice(0, 500)}`, 'http', resp.status);
  }
  if (json.status !== 'success') {
    throw new ApiError(json.error || `${resp.status} ${resp.statusText}`, json.errorType || 'error', resp.status);
  }
  return json;
}

/** `name="value"` pairs of a metric, `__name__` first, in Prometheus' display form. */
export function formatMetric(metric) {
  const name = metric.__name__ || '';
  const pairs = Object.keys(metric)
    .filter((k) => k !== '__name__')
    .sort()
    .map((k) => `${k}=${JSON.stringify(metric[k])}`);
  return pairs.length || !name ? `${name}{${pairs.join(', ')}}` : name;
}

/** Parses Prometheus durations (`1h30m`, `90s`, `2d`, `500ms`) to milliseconds; null if invalid. */
export function parseDuration(s) {
  if (!s) return null;
  s = String(s).trim();
  if (/^\d+(\.\d+)?$/.test(s)) return Math.round(parseFloat(s) * 1000);
  const re = /(\d+)(ms|y|w|d|h|m|s)/g;
  const unit = { ms: 1, s: 1000, m: 60e3, h: 3600e3, d: 86400e3, w: 604800e3, y: 31536000e3 };
  let total = 0;
  let consumed = 0;
  let m;
  while ((m = re.exec(s)) !== null) {
    if (m.index !== consumed) return null;
    total += parseInt(m[1], 10) * unit[m[2]];
    consumed = re.lastIndex;
  }
  return consumed === s.length && total > 0 ? total : null;
}

/** A label or metric name as PromQL reads it: bare when it is a classic name, quoted (UTF-8 names,
 * Prometheus 3) otherwise. */
export function promqlName(n) {
  return /^[a-zA-Z_][a-zA-Z0-9_]*$/.test(n) ? n : JSON.stringify(n);
}

/** The selector of `metric` (and optionally one `label="value"`), valid PromQL whatever the names and
 * values hold: classic names bare, others quoted; values as JSON strings, whose escapes PromQL shares. */
export function selector(metric, label, value) {
  const classic = /^[a-zA-Z_:][a-zA-Z0-9_:]*$/.test(metric);
  const m = [];
  if (!classic) m.push(JSON.stringify(metric));
  if (label !== undefined) m.push(`${promqlName(label)}=${JSON.stringify(value)}`);
  if (classic) return m.length ? `${metric}{${m.join(', ')}}` : metric;
  return `{${m.join(', ')}}`;
}

/** Milliseconds as a Prometheus duration (`1h30m`). */
export function formatDuration(ms) {
  if (ms < 1 || !Number.isFinite(ms)) return '0s';
  const parts = [];
  const units = [['y', 31536000e3], ['w', 604800e3], ['d', 86400e3], ['h', 3600e3], ['m', 60e3], ['s', 1e3], ['ms', 1]];
  for (const [u, n] of units) {
    if (ms >= n) {
      const k = Math.floor(ms / n);
      parts.push(`${k}${u}`);
      ms -= k * n;
    }
  }
  return parts.join('');
}

/** A time as typed in the UI or found in a shared link: `2024-01-02 03:04:05` (UTC, as Prometheus'
 * links), ISO 8601, or Unix seconds. Returns ms or null. */
export function parseTime(s) {
  if (s === undefined || s === null || s === '') return null;
  s = String(s).trim();
  if (/^-?\d+(\.\d+)?$/.test(s)) return Math.round(parseFloat(s) * 1000);
  const m = /^(\d{4})-(\d{2})-(\d{2})[ T](\d{2}):(\d{2})(?::(\d{2})(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$/.exec(s);
  if (m) {
    const iso = `${m[1]}-${m[2]}-${m[3]}T${m[4]}:${m[5]}:${m[6] || '00'}${m[7] || ''}${m[8] || 'Z'}`;
    const t = Date.parse(iso);
    return Number.isNaN(t) ? null : t;
  }
  const t = Date.parse(s);
  return Number.isNaN(t) ? null : t;
}

/** ms → `2024-01-02 03:04:05` (UTC), the form Prometheus' links carry. */
export function formatTime(ms) {
  const d = new Date(ms);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getUTCFullYear()}-${p(d.getUTCMonth() + 1)}-${p(d.getUTCDate())} ${p(d.getUTCHours())}:${p(d.getUTCMinutes())}:${p(d.getUTCSeconds())}`;
}

/** Creates an element: `el('div', {class: 'x', onclick: f}, child, 'text', …)`. */
export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on') && typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.className = v;
    else if (k === 'style' && typeof v === 'object') Object.assign(e.style, v);
    else if (v === true) e.setAttribute(k, '');
    else e.setAttribute(k, String(v));
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

/** Large counts with thin separators (1 234 567). */
export function fmtInt(n) {
  return Number(n).toLocaleString('en-US');
}

/** Bytes in IEC units. */
export function fmtBytes(n) {
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  n = Number(n);
  while (n >= 1024 && i < u.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i ? n.toFixed(1) : n} ${u[i]}`;
}
