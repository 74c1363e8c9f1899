// The explain view: the plan Tessera evaluated (`trace=1`), each node with what it cost — wall time,
// series touched and returned, chunks and samples decoded — where it ran (inside the shards, or in the
// merge above them), what the result cache answered and which downsampling tier the answer came from.
import { el, fmtInt } from './api.js';

export function renderPlan(trace) {
  if (!trace) return el('div', { class: 'alert warning' }, 'The server returned no trace.');
  const head = el('div', { class: 'trace-summary' },
    el('span', {}, `Total: ${trace.duration_ms.toFixed(3)} ms`),
    el('span', {}, `Data: ${trace.tier ? `downsampling tier ${trace.tier}` : 'raw samples'}`));
  if (trace.cache) head.append(el('span', {}, `Result cache: ${describeCache(trace.cache)}`));
  const out = el('div', { class: 'explain' }, head);
  if (!trace.plan) {
    out.append(el('div', { class: 'alert info' }, 'Nothing was evaluated: every step came from the result cache.'));
    return out;
  }
  const total = Math.max(trace.plan.duration_ms || 0, 1e-6);
  out.append(el('ul', { class: 'plan' }, renderNode(trace.plan, total)));
  return out;
}

function describeCache(c) {
  if (c.bypass) return `bypassed (${c.bypass})`;
  const parts = [];
  for (const [k, v] of Object.entries(c)) parts.push(`${k.replace(/_/g, ' ')}: ${typeof v === 'number' ? fmtInt(v) : v}`);
  return parts.join(', ');
}

function renderNode(n, total) {
  const evaluated = n.duration_ms !== undefined;
  const share = evaluated ? Math.min(100, (100 * n.duration_ms) / total) : 0;
  const figures = evaluated
    ? el('div', { class: 'figures' },
        el('span', { class: 'bar', style: { width: `${Math.max(share, 0.5)}%` } }),
        el('span', {}, `${n.duration_ms.toFixed(3)} ms`),
        el('span', {}, `series out ${fmtInt(n.series_out)}`),
        el('span', {}, `touched ${fmtInt(n.series_touched)}`),
        el('span', {}, `chunks ${fmtInt(n.chunks)}`),
        el('span', {}, `samples ${fmtInt(n.samples_decoded)}`))
    : el('div', { class: 'figures' }, el('span', {}, n.placement === 'fused into parent'
        ? 'runs inside its parent, in the same pass over each series: its cost is counted there'
        : 'not evaluated'));
  return el('li', { class: 'plan-node' },
    el('div', { class: 'node-head' },
      el('span', { class: 'op' }, n.op),
      el('span', { class: `placement ${n.placement.replace(/[^a-z]/gi, '-')}` }, n.placement),
      el('code', { class: 'expr' }, n.expr)),
    figures,
    n.children && n.children.length ? el('ul', {}, n.children.map((c) => renderNode(c, total))) : null);
}
