//! The result cache: range queries keep their per-step results, and a later query with the same key
//! evaluates only the steps it does not find (DESIGN.md, "Result cache").
//!
//! A range query's step `s` is an instant evaluation at `s`; its answer depends only on the expression,
//! `s` and the samples in a window `[s - before, s + after]` that the expression fixes (lookback, ranges,
//! offsets, subqueries: [`dependency_window`]). So steps can be kept one by one and spliced with freshly
//! evaluated ones, and the cache knows exactly which steps a change to stored samples touches.
//!
//! **The cache never changes an answer:**
//! - A step is kept only when its whole window lies before the *freshness horizon* (`now - freshness`,
//!   [`CacheOptions::freshness_ms`]): the in-order stream at "now" never touches kept steps.
//! - Everything else that reaches older times — out-of-order and late writes, new series arriving with old
//!   timestamps, backfill, deletions, retention — is recorded by the storage in its
//!   [`ChangeLog`](tessera_model::ChangeLog) as a time range, and every kept step whose window meets it is
//!   dropped before the next look-up. A query that evaluated steps while such a change landed keeps none
//!   of the steps the change touches (the log's protocol, see [`tessera_model::changes`]).
//! - What cannot be split by step is never cached: `@` modifiers, `start()`/`end()`/`range()`/`step()`
//!   (their values depend on the request's bounds), non-constant durations, `info()` (it reads
//!   `target_info` on its own), and delayed `__name__` removal (its duplicate check spans all steps).
//!
//! The key is everything else that decides an answer: the storage (its change log), the expression as
//! printed (so spacing does not matter), the step, the phase `start mod step`, the lookback delta and the
//! engine's semantic flags. Memory is bounded ([`CacheOptions::max_bytes`]): least recently used entries
//! go first. Annotations (warnings, infos) are kept with the steps of the evaluation that raised them and
//! returned with any of those steps.
//!
//! Known difference: `--query.max-samples` applies to what is evaluated, so a query answered partly from
//! the cache can succeed where the same query evaluated whole would have hit the limit.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tessera_model::{ChangeLog, FloatHistogram, Labels, Queryable};

use crate::engine::{Engine, EngineError, MatrixSeries, QueryOptions, QueryResult, QueryStats, Value};
use crate::parser::{AtModifier, Expr, ValueType};

/// Settings of a [`ResultCache`].
#[derive(Debug, Clone, Copy)]
pub struct CacheOptions {
    /// Most bytes the kept results may take (estimated); 0 disables the cache.
    pub max_bytes: usize,
    /// Steps whose window reaches into the last `freshness_ms` before now are never kept.
    pub freshness_ms: i64,
}

impl Default for CacheOptions {
    fn default() -> Self {
        // One minute, as Cortex's query-frontend (`-frontend.max-cache-freshness`): later writes that reach
        // kept steps invalidate them, so the horizon only spares the cache the churn of the newest steps.
        CacheOptions { max_bytes: 128 << 20, freshness_ms: 60 * 1000 }
    }
}

/// What the cache did for one query (shown by `trace=1`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CacheReport {
    /// Steps of the request.
    pub steps: usize,
    /// Steps answered from the cache.
    pub hits: usize,
    /// Steps evaluated.
    pub evaluated: usize,
    /// Evaluations run (contiguous runs of missing steps).
    pub runs: usize,
    /// Evaluated steps kept for later queries.
    pub stored: usize,
    /// Why the cache was not used, when it was not.
    pub bypass: Option<String>,
}

impl CacheReport {
    fn bypassed(steps: usize, why: impl Into<String>) -> Self {
        CacheReport { steps, evaluated: steps, runs: 1, bypass: Some(why.into()), ..Default::default() }
    }

    /// The report as a JSON object.
    pub fn write_json(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(
            out,
            r#"{{"steps":{},"hits":{},"evaluated":{},"runs":{},"stored":{}"#,
            self.steps, self.hits, self.evaluated, self.runs, self.stored
        );
        if let Some(b) = &self.bypass {
            out.push_str(r#","bypass":"#);
            out.push_str(&serde_json::to_string(b).unwrap_or_else(|_| "\"\"".into()));
        }
        out.push('}');
    }
}

/// The cache's metrics, as `prometheus-client` families (registered by [`CacheMetrics::register`]).
#[derive(Debug, Default)]
pub struct CacheMetrics {
    /// Steps answered from the cache.
    pub hit_steps: Counter,
    /// Steps of cacheable queries that had to be evaluated.
    pub miss_steps: Counter,
    /// Range queries that could not use the cache (uncacheable expression, cache disabled).
    pub bypassed_queries: Counter,
    /// Kept steps dropped because stored samples in their window changed.
    pub invalidated_steps: Counter,
    /// Entries evicted to stay within the size bound.
    pub evicted_entries: Counter,
    /// Estimated bytes held.
    pub bytes: Gauge,
    /// Entries (distinct query keys) held.
    pub entries: Gauge,
}

impl CacheMetrics {
    /// Registers every family under `tessera_query_results_cache_` (the crate ends each help text with a
    /// period).
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        let r = registry.sub_registry_with_prefix("tessera_query_results_cache");
        r.register("hit_steps", "Range-query steps answered from the result cache", self.hit_steps.clone());
        r.register("miss_steps", "Range-query steps the result cache did not hold and that were evaluated", self.miss_steps.clone());
        r.register("bypassed_queries", "Range queries that could not use the result cache", self.bypassed_queries.clone());
        r.register("invalidated_steps", "Cached steps dropped because samples in their window changed", self.invalidated_steps.clone());
        r.register("evicted_entries", "Cache entries evicted to stay within the size bound", self.evicted_entries.clone());
        r.register("bytes", "Estimated bytes held by the result cache", self.bytes.clone());
        r.register("entries", "Query keys held by the result cache", self.entries.clone());
    }
}

/// Where a step's value may come from: samples at `[s - before, s + after]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub before: i64,
    pub after: i64,
}

impl Window {
    fn union(self, o: Window) -> Window {
        Window { before: self.before.max(o.before), after: self.after.max(o.after) }
    }
}

/// The window of samples a step of `expr` reads, or why its steps cannot be cached one by one.
/// Mirrors the ranges upstream's `FindMinMaxTime`/`getTimeRangesForSelector` compute for a whole query,
/// per step: a selector reads `(s - offset - lookback, s - offset]`, a range `[r]` reads
/// `(s - offset - r, s - offset]`, a subquery evaluates its inner expression over `(s - offset - r, s -
/// offset]`. `None` inside `Ok`: the expression reads no samples at all.
pub fn dependency_window(expr: &Expr, lookback_ms: i64) -> Result<Option<Window>, String> {
    fn sat(a: i64, b: i64) -> i64 {
        a.saturating_add(b)
    }
    fn vs_window(
        vs: &crate::parser::VectorSelector,
        range_ms: i64,
        lookback_ms: i64,
    ) -> Result<Option<Window>, String> {
        if vs.at.is_some() {
            return Err("@ modifier".into());
        }
        if vs.offset_expr.is_some() {
            return Err("non-constant offset".into());
        }
        let o = vs.original_offset_ms;
        let mut w = Window { before: sat(o, range_ms), after: o.saturating_neg() };
        if vs.anchored || vs.smoothed {
            // Extended range selectors look at samples just outside the range, up to the lookback.
            w = Window { before: sat(w.before, lookback_ms), after: sat(w.after, lookback_ms) };
        }
        Ok(Some(w))
    }
    fn join(a: Option<Window>, b: Option<Window>) -> Option<Window> {
        match (a, b) {
            (Some(a), Some(b)) => Some(a.union(b)),
            (a, None) => a,
            (None, b) => b,
        }
    }
    match expr {
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => Ok(None),
        Expr::VectorSelector(vs) => vs_window(vs, lookback_ms, lookback_ms),
        Expr::MatrixSelector(ms) => {
            if ms.range_expr.is_some() {
                return Err("non-constant range".into());
            }
            vs_window(&ms.vs, ms.range_ms, lookback_ms)
        }
        Expr::Subquery(sq) => {
            if matches!(sq.at, Some(AtModifier::Timestamp(_) | AtModifier::Start | AtModifier::End)) {
                return Err("@ modifier".into());
            }
            if sq.range_expr.is_some() || sq.step_expr.is_some() || sq.offset_expr.is_some() {
                return Err("non-constant subquery duration".into());
            }
            let o = sq.original_offset_ms;
            Ok(dependency_window(&sq.expr, lookback_ms)?.map(|w| Window {
                before: sat(sat(o, sq.range_ms), w.before),
                after: sat(w.after, o.saturating_neg()),
            }))
        }
        Expr::Call(c) => {
            if matches!(c.func.name, "start" | "end" | "range" | "step") {
                return Err(format!("{}()", c.func.name));
            }
            if c.func.name == "info" {
                return Err("info()".into());
            }
            let mut w = None;
            for a in &c.args {
                w = join(w, dependency_window(a, lookback_ms)?);
            }
            Ok(w)
        }
        Expr::Aggregate(a) => {
            let w = dependency_window(&a.expr, lookback_ms)?;
            match &a.param {
                Some(p) => Ok(join(w, dependency_window(p, lookback_ms)?)),
                None => Ok(w),
            }
        }
        Expr::Binary(b) => Ok(join(dependency_window(&b.lhs, lookback_ms)?, dependency_window(&b.rhs, lookback_ms)?)),
        Expr::Unary(u) => dependency_window(&u.expr, lookback_ms),
        Expr::Paren(p) => dependency_window(&p.expr, lookback_ms),
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    /// The storage's change log (its id): one cache may serve several storages.
    storage: u64,
    expr: String,
    step_ms: i64,
    phase_ms: i64,
    lookback_ms: i64,
    /// Engine flags that change answers.
    flags: (bool, bool, i64),
    /// The downsampling tier the answer comes from (a function of the request, the step and the
    /// configuration only; see `engine::tier::choose`).
    tier_ms: Option<i64>,
}

/// Annotations raised by the evaluation that produced some kept steps.
#[derive(Debug, Default, PartialEq)]
struct Notes {
    warnings: Vec<String>,
    infos: Vec<String>,
}

#[derive(Debug, Default)]
struct Step {
    floats: Vec<(u32, f64)>,
    hists: Vec<(u32, Arc<FloatHistogram>)>,
    notes: Option<Arc<Notes>>,
}

impl Step {
    fn bytes(&self) -> usize {
        64 + self.floats.len() * 16 + self.hists.iter().map(|(_, h)| 16 + h.size()).sum::<usize>()
    }
}

#[derive(Debug)]
struct Entry {
    window: Window,
    series: Vec<Labels>,
    index: HashMap<Labels, u32>,
    steps: BTreeMap<i64, Step>,
    bytes: usize,
    last_used: u64,
}

impl Entry {
    fn series_id(&mut self, l: &Labels) -> u32 {
        if let Some(&i) = self.index.get(l) {
            return i;
        }
        let i = self.series.len() as u32;
        self.bytes += 96 + l.iter().map(|x| 48 + x.name.len() + x.value.len()).sum::<usize>();
        self.series.push(l.clone());
        self.index.insert(l.clone(), i);
        i
    }

    /// Drops the kept steps whose window meets `[min_t, max_t]`; returns how many.
    fn invalidate(&mut self, min_t: i64, max_t: i64) -> usize {
        let lo = min_t.saturating_sub(self.window.after);
        let hi = max_t.saturating_add(self.window.before);
        if lo > hi {
            return 0;
        }
        let doomed: Vec<i64> = self.steps.range(lo..=hi).map(|(t, _)| *t).collect();
        for t in &doomed {
            if let Some(s) = self.steps.remove(t) {
                self.bytes -= s.bytes();
            }
        }
        doomed.len()
    }
}

#[derive(Debug, Default)]
struct Inner {
    entries: HashMap<Key, Entry>,
    bytes: usize,
    tick: u64,
    /// Per storage (change-log id): the newest change already applied to the entries.
    applied: HashMap<u64, u64>,
}

/// A range-query result cache (see the module documentation). Cheap to share behind an `Arc`.
#[derive(Debug)]
pub struct ResultCache {
    opts: CacheOptions,
    inner: Mutex<Inner>,
    pub metrics: CacheMetrics,
}

/// A kept step as a look-up copies it out: its time, float and histogram values by series id.
type FoundStep = (i64, Vec<(u32, f64)>, Vec<(u32, Arc<FloatHistogram>)>);

/// At most this many separate evaluations per query; beyond, one run covers every missing step.
const MAX_RUNS: usize = 8;

impl ResultCache {
    pub fn new(opts: CacheOptions) -> Self {
        ResultCache { opts, inner: Mutex::default(), metrics: CacheMetrics::default() }
    }

    /// Evaluates `expr` as a range query like [`Engine::range_expr`], answering from and filling the
    /// cache where it can. `now_ms` is the wall clock (the freshness horizon counts from it).
    #[allow(clippy::too_many_arguments)]
    pub fn range(
        &self,
        engine: &Engine,
        q: &dyn Queryable,
        expr: &Expr,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
        qo: &QueryOptions,
        now_ms: i64,
    ) -> Result<(QueryResult, CacheReport), EngineError> {
        let t = expr.value_type();
        let valid = step_ms > 0 && end_ms >= start_ms && matches!(t, ValueType::Scalar | ValueType::Vector);
        let nsteps = if valid { ((end_ms - start_ms) / step_ms) as usize + 1 } else { 0 };
        let bypass = |why: String| -> Result<(QueryResult, CacheReport), EngineError> {
            self.metrics.bypassed_queries.inc_by(1);
            let r = engine.range_expr(q, expr, start_ms, end_ms, step_ms, qo)?;
            Ok((r, CacheReport::bypassed(nsteps, why)))
        };
        if !valid {
            return bypass("invalid request".into());
        }
        if self.opts.max_bytes == 0 {
            return bypass("cache disabled".into());
        }
        let Some(log) = q.changes() else {
            return bypass("storage does not report changes".into());
        };
        if engine.opts.delayed_name_removal {
            return bypass("delayed name removal".into());
        }
        let lookback_ms = engine.lookback_ms(qo);
        let tier_ms = crate::engine::tier::choose(q, qo.tier, step_ms)?;
        let window = match dependency_window(expr, lookback_ms) {
            Ok(w) => w.unwrap_or(Window { before: 0, after: 0 }),
            Err(why) => return bypass(format!("not cacheable: {why}")),
        };
        let storage = log.id();
        let key = Key {
            storage,
            expr: expr.to_string(),
            step_ms,
            phase_ms: start_ms.rem_euclid(step_ms),
            lookback_ms,
            flags: (engine.opts.enable_experimental, engine.opts.use_start_timestamps, engine.opts.no_step_subquery_interval_ms),
            tier_ms,
        };
        // The newest step that may be kept: its window ends before the horizon.
        let horizon = now_ms.saturating_sub(self.opts.freshness_ms);
        let keep_through = horizon.saturating_sub(1).saturating_sub(window.after);
        let may_keep = start_ms <= keep_through;
        let seq0 = if may_keep {
            log.watch(keep_through.saturating_add(window.after));
            Some(log.seq())
        } else {
            None
        };

        // Look up what is kept.
        let mut found: Vec<FoundStep> = Vec::new();
        let mut notes: Vec<Arc<Notes>> = Vec::new();
        // The entry's series, which the found steps' ids index.
        let mut cached_series: Vec<Labels> = Vec::new();
        {
            let mut g = self.inner.lock();
            self.sync(&mut g, log, storage);
            g.tick += 1;
            let tick = g.tick;
            if let Some(e) = g.entries.get_mut(&key) {
                e.last_used = tick;
                if e.steps.range(start_ms..=end_ms).next().is_some() {
                    cached_series = e.series.clone();
                }
                for (t, s) in e.steps.range(start_ms..=end_ms) {
                    found.push((*t, s.floats.clone(), s.hists.clone()));
                    if let Some(n) = &s.notes
                        && !notes.iter().any(|x| Arc::ptr_eq(x, n))
                    {
                        notes.push(n.clone());
                    }
                }
            }
        }

        // The missing steps, as contiguous runs.
        let mut runs: Vec<(i64, i64)> = Vec::new();
        let mut hit = found.iter().map(|f| f.0).peekable();
        for i in 0..nsteps {
            let t = start_ms + i as i64 * step_ms;
            while hit.peek().is_some_and(|h| *h < t) {
                hit.next();
            }
            if hit.peek() == Some(&t) {
                continue;
            }
            match runs.last_mut() {
                Some((_, e)) if *e + step_ms == t => *e = t,
                _ => runs.push((t, t)),
            }
        }
        if runs.len() > MAX_RUNS {
            let (first, last) = (runs[0].0, runs[runs.len() - 1].1);
            runs = vec![(first, last)];
            found.retain(|f| f.0 < first || f.0 > last);
        }
        let hits = found.len();
        let evaluated: usize = runs.iter().map(|(s, e)| ((e - s) / step_ms) as usize + 1).sum();
        self.metrics.hit_steps.inc_by(hits as u64);
        self.metrics.miss_steps.inc_by(evaluated as u64);

        // Evaluate the runs within the query's one timeout.
        let started = Instant::now();
        let timeout = qo.timeout.unwrap_or(engine.opts.timeout);
        let mut results: Vec<QueryResult> = Vec::with_capacity(runs.len());
        for (s, e) in &runs {
            let left = timeout.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
            let o = QueryOptions { timeout: Some(left), ..qo.clone() };
            results.push(engine.range_expr(q, expr, *s, *e, step_ms, &o)?);
        }

        // Keep what is final.
        let mut stored = 0;
        if let Some(seq0) = seq0 {
            stored = self.store(&key, window, log, storage, seq0, keep_through, &runs, &results);
        }

        // Splice: cached steps and evaluated runs, one series per label set, points in time order.
        let mut out: Vec<MatrixSeries> = Vec::new();
        let mut at: HashMap<Labels, usize> = HashMap::new();
        let mut slot = |l: &Labels, out: &mut Vec<MatrixSeries>| -> usize {
            *at.entry(l.clone()).or_insert_with(|| {
                out.push(MatrixSeries { labels: l.clone(), points: Vec::new(), histograms: Vec::new() });
                out.len() - 1
            })
        };
        // Cached series by id: each label set is hashed once, not once per point.
        let mut by_id: Vec<usize> = vec![usize::MAX; cached_series.len()];
        let mut slot_of = |id: u32, out: &mut Vec<MatrixSeries>| -> usize {
            let i = id as usize;
            if by_id[i] == usize::MAX {
                by_id[i] = slot(&cached_series[i], out);
            }
            by_id[i]
        };
        for (t, fl, hs) in found {
            for (id, v) in fl {
                let i = slot_of(id, &mut out);
                out[i].points.push((t, v));
            }
            for (id, h) in hs {
                let i = slot_of(id, &mut out);
                out[i].histograms.push((t, h));
            }
        }
        let mut stats = QueryStats::default();
        let mut warnings: Vec<String> = Vec::new();
        let mut infos: Vec<String> = Vec::new();
        let mut trace = None;
        for n in &notes {
            merge_unique(&mut warnings, &n.warnings);
            merge_unique(&mut infos, &n.infos);
        }
        for r in results {
            stats.total_queryable_samples += r.stats.total_queryable_samples;
            stats.samples_read += r.stats.samples_read;
            stats.peak_samples = stats.peak_samples.max(r.stats.peak_samples);
            merge_unique(&mut warnings, &r.warnings);
            merge_unique(&mut infos, &r.infos);
            if trace.is_none() {
                trace = r.trace;
            }
            if let Value::Matrix(m) = r.value {
                for s in m {
                    let i = slot(&s.labels, &mut out);
                    out[i].points.extend(s.points);
                    out[i].histograms.extend(s.histograms);
                }
            }
        }
        for s in &mut out {
            s.points.sort_by_key(|p| p.0);
            s.histograms.sort_by_key(|p| p.0);
        }
        out.sort_by(|a, b| a.labels.cmp(&b.labels));
        let report = CacheReport { steps: nsteps, hits, evaluated, runs: runs.len(), stored, bypass: None };
        Ok((QueryResult { value: Value::Matrix(out), warnings, infos, stats, trace, tier_ms }, report))
    }

    /// Applies the changes the storage recorded since the last look (drops every entry of it when the
    /// log lost some).
    fn sync(&self, g: &mut Inner, log: &ChangeLog, storage: u64) {
        let applied = g.applied.get(&storage).copied().unwrap_or(0);
        match log.since(applied) {
            Ok(changes) => {
                let Some(last) = changes.last().map(|c| c.seq) else { return };
                let mut dropped = 0;
                for c in &changes {
                    for (k, e) in g.entries.iter_mut() {
                        if k.storage == storage {
                            dropped += e.invalidate(c.min_t, c.max_t);
                        }
                    }
                }
                self.metrics.invalidated_steps.inc_by(dropped as u64);
                g.applied.insert(storage, last);
            }
            Err(tessera_model::changes::Lost) => {
                let mut dropped = 0;
                g.entries.retain(|k, e| {
                    if k.storage == storage {
                        dropped += e.steps.len();
                        false
                    } else {
                        true
                    }
                });
                self.metrics.invalidated_steps.inc_by(dropped as u64);
                g.applied.insert(storage, log.seq());
            }
        }
        self.recount(g);
    }

    /// Keeps the evaluated steps up to `keep_through` that no change since `seq0` touches.
    #[allow(clippy::too_many_arguments)]
    fn store(
        &self,
        key: &Key,
        window: Window,
        log: &ChangeLog,
        storage: u64,
        seq0: u64,
        keep_through: i64,
        runs: &[(i64, i64)],
        results: &[QueryResult],
    ) -> usize {
        let mut g = self.inner.lock();
        self.sync(&mut g, log, storage);
        // Read after the sync, under the cache's lock: every change up to what the sync applied is here
        // (a change recorded between an earlier read and the sync would be applied to the old steps only,
        // and these steps would be kept stale); later ones are applied to them at the next sync.
        let Ok(changes) = log.since(seq0) else { return 0 };
        let touched = |t: i64| {
            changes.iter().any(|c| t.saturating_add(window.after) >= c.min_t && t.saturating_sub(window.before) <= c.max_t)
        };
        g.tick += 1;
        let tick = g.tick;
        let e = g.entries.entry(key.clone()).or_insert_with(|| Entry {
            window,
            series: Vec::new(),
            index: HashMap::new(),
            steps: BTreeMap::new(),
            bytes: 256 + key.expr.len(),
            last_used: tick,
        });
        e.last_used = tick;
        let mut stored = 0;
        for (&(first, last), r) in runs.iter().zip(results) {
            let Value::Matrix(m) = &r.value else { continue };
            let notes = (!r.warnings.is_empty() || !r.infos.is_empty())
                .then(|| Arc::new(Notes { warnings: r.warnings.clone(), infos: r.infos.clone() }));
            // Gather this run's steps (every step of the run is known, empty ones included).
            let mut steps: BTreeMap<i64, Step> = BTreeMap::new();
            for s in m {
                let id = e.series_id(&s.labels);
                for (t, v) in &s.points {
                    steps.entry(*t).or_default().floats.push((id, *v));
                }
                for (t, h) in &s.histograms {
                    steps.entry(*t).or_default().hists.push((id, h.clone()));
                }
            }
            let mut t = first;
            while t <= last && t <= keep_through {
                if !touched(t) && !e.steps.contains_key(&t) {
                    let mut st = steps.remove(&t).unwrap_or_default();
                    st.notes = notes.clone();
                    e.bytes += st.bytes();
                    e.steps.insert(t, st);
                    stored += 1;
                }
                t += key.step_ms;
            }
        }
        // One entry may use at most a quarter of the cache: its oldest steps go first.
        while e.bytes > self.opts.max_bytes / 4 {
            match e.steps.pop_first() {
                Some((_, s)) => e.bytes -= s.bytes(),
                None => break,
            }
        }
        self.recount(&mut g);
        self.evict(&mut g);
        stored
    }

    fn recount(&self, g: &mut Inner) {
        g.entries.retain(|_, e| !e.steps.is_empty());
        g.bytes = g.entries.values().map(|e| e.bytes).sum();
        self.metrics.bytes.set(g.bytes as i64);
        self.metrics.entries.set(g.entries.len() as i64);
    }

    fn evict(&self, g: &mut Inner) {
        while g.bytes > self.opts.max_bytes {
            let Some(k) = g.entries.iter().min_by_key(|(_, e)| e.last_used).map(|(k, _)| k.clone()) else { break };
            if let Some(e) = g.entries.remove(&k) {
                g.bytes -= e.bytes;
                self.metrics.evicted_entries.inc_by(1);
            }
        }
        self.metrics.bytes.set(g.bytes as i64);
        self.metrics.entries.set(g.entries.len() as i64);
    }
}

fn merge_unique(into: &mut Vec<String>, from: &[String]) {
    for s in from {
        if !into.contains(s) {
            into.push(s.clone());
        }
    }
}
