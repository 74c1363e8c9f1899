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
//!   [`CacheOptions::freshness_ms`], by default `now`): samples stamped after a kept step's window never
//!   touch it.
//! - Everything that reaches older times — late writes (a sender behind "now"), out-of-order writes, new
//!   series arriving with old timestamps, backfill, deletions, retention — is recorded by the storage in its
//!   [`ChangeLog`](tessera_model::ChangeLog) as a time range, and every kept step whose window meets it is
//!   dropped before the next look-up. A query that evaluated steps while such a change landed keeps none
//!   of the steps the change touches (the log's protocol, see [`tessera_model::changes`]).
//! - What cannot be split by step is never cached: `@` modifiers, `start()`/`end()`/`range()`/`step()`
//!   (their values depend on the request's bounds), non-constant durations, `info()` (it reads
//!   `target_info` on its own), and delayed `__name__` removal (its duplicate check spans all steps).
//!
//! The key is everything else that decides an answer: the storage (its change log), the expression as
//! printed (so spacing does not matter), the step, the phase `start mod step`, the lookback delta and the
//! engine's semantic flags. Memory is bounded ([`CacheOptions::max_bytes`]): one entry may take half of it
//! (its steps before the request's start go first), and least recently used entries go first. Kept points
//! are held per series in time order, with each point's text when the owner supplies a
//! [`PointRenderer`], frozen into shared parts as it grows, so that a repeat hands the parts over instead
//! of formatting values again (and copies neither them nor the points: the answer carries the text).
//! Annotations
//! (warnings, infos) are kept with the steps of the evaluation that raised them and returned with any of
//! those steps.
//!
//! Known difference: `--query.max-samples` applies to what is evaluated, so a query answered partly from
//! the cache can succeed where the same query evaluated whole would have hit the limit.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use parking_lot::Mutex;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use tessera_model::{ChangeLog, FloatHistogram, Labels, Queryable};

use crate::engine::{merge_unique, Engine, EngineError, MatrixSeries, QueryOptions, QueryResult, Rendered, Spliced, Value};
use crate::parser::{AtModifier, Expr, ValueType};

/// Writes one float point `(t, v)` as its owner will hand it to a client (the HTTP API: a JSON matrix
/// point with its separator). With one, the cache keeps each kept point's text and answers a series
/// with it ([`MatrixSeries::rendered`]: the kept parts shared), so a repeat formats only its new points. The cache
/// concatenates the texts of a series' points in time order, adding nothing between them.
pub type PointRenderer = fn(&mut Vec<u8>, i64, f64);

/// Settings of a [`ResultCache`].
#[derive(Debug, Clone, Copy)]
pub struct CacheOptions {
    /// Most bytes the kept results may take (estimated); 0 disables the cache.
    pub max_bytes: usize,
    /// Steps whose window reaches into the last `freshness_ms` before now are never kept.
    pub freshness_ms: i64,
    /// How float points are rendered for clients, if kept rendered (see [`PointRenderer`]).
    pub render: Option<PointRenderer>,
}

impl Default for CacheOptions {
    fn default() -> Self {
        // No horizon beyond "now". Cortex's query-frontend keeps nothing of the last minute
        // (`-frontend.max-cache-freshness`) and VictoriaMetrics nothing of the last five
        // (`-search.cacheTimestampOffset`) because they cannot tell when a late write lands; here late
        // writes that reach kept steps invalidate them (the change log), so a horizon would only spare
        // the cache steps it will soon drop, and without one a refresh within the same step — or a
        // second viewer of the dashboard — evaluates nothing.
        CacheOptions { max_bytes: 128 << 20, freshness_ms: 0, render: None }
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
    /// Steps reaching back past the chosen source's data may read other tiers (`engine::tier::past_raw`):
    /// the storage has a raw horizon and the request lets the planner choose (`raw=1` and `tier=` read
    /// one source only).
    past_raw: bool,
}

/// Annotations raised by the evaluation that produced some kept steps.
#[derive(Debug, Default, PartialEq)]
struct Notes {
    warnings: Vec<String>,
    infos: Vec<String>,
}

/// Bytes a kept step costs besides its points (its map node and notes).
const STEP_BYTES: usize = 64;
/// Bytes a kept float point costs besides its rendered text (time, value, text end).
const POINT_BYTES: usize = 24;

/// Rendered text is frozen into shared parts of about this many bytes (a look-up hands them to the
/// answer without copying them; the part still growing is copied).
#[cfg(not(test))]
const TEXT_PART: usize = 4096;
#[cfg(test)]
const TEXT_PART: usize = 64;

/// One series' kept points of an entry, in time order, each at a kept step (the entry's `steps`), so a
/// look-up answers a series with one contiguous range of them — and, with a renderer, with the parts
/// of its text that hold that range.
#[derive(Debug, Default, Clone)]
struct Kept {
    /// Points before `first` are dropped (the front is removed lazily; see [`Kept::remove`]).
    first: usize,
    /// Times and values, as answers hold them (without a renderer a look-up copies a range in one piece).
    pts: Vec<(i64, f64)>,
    /// With a renderer: every point's text as the renderer wrote it, concatenated in time order, held
    /// as frozen parts (never changed once made: look-ups share them) and the `tail` still growing. A
    /// point's text lies inside one part or the tail. `part_ends[p]` is where part `p` ends and
    /// `ends[i]` where point `i`'s text ends, both counted over the whole text. All empty without a
    /// renderer.
    parts: Vec<Bytes>,
    part_ends: Vec<usize>,
    tail: Vec<u8>,
    ends: Vec<usize>,
    /// Histogram points in time order (not rendered).
    hists: Vec<(i64, Arc<FloatHistogram>)>,
}

impl Kept {
    /// The live points with `lo <= t <= hi`, as an index range. A dashboard's refresh asks for nearly all
    /// of a series' points, so the bounds are searched from the ends outward (a few cache lines each)
    /// rather than by bisecting the whole run (a cache miss a probe, over every series of the answer).
    fn span(&self, lo: i64, hi: i64) -> (usize, usize) {
        let live = &self.pts[self.first..];
        let a = gallop_front(live, |p| p.0 < lo);
        let b = live.len() - gallop_back(&live[a..], |p| p.0 > hi);
        (self.first + a, self.first + b)
    }

    fn hist_span(&self, lo: i64, hi: i64) -> (usize, usize) {
        (self.hists.partition_point(|p| p.0 < lo), self.hists.partition_point(|p| p.0 <= hi))
    }

    /// Where point `i`'s text starts.
    fn text_at(&self, i: usize) -> usize {
        if i == 0 || self.ends.is_empty() { 0 } else { self.ends[i - 1] }
    }

    /// Where the tail starts in the whole text.
    fn tail_start(&self) -> usize {
        self.part_ends.last().copied().unwrap_or(0)
    }

    /// Point `i`'s text.
    fn point_text(&self, i: usize) -> &[u8] {
        let (a, b) = (self.text_at(i), self.ends[i]);
        let p = self.part_ends.partition_point(|e| *e <= a);
        match self.parts.get(p) {
            Some(part) => {
                let base = self.part_ends[p] - part.len();
                &part[a - base..b - base]
            }
            None => {
                let base = self.tail_start();
                &self.tail[a - base..b - base]
            }
        }
    }

    /// Adds the text in `[a, b)` (whole points) to `out`: the frozen parts shared, the tail copied.
    fn text_into(&self, a: usize, b: usize, out: &mut TextOut) {
        if a >= b {
            return;
        }
        let mut p = self.part_ends.partition_point(|e| *e <= a);
        while p < self.parts.len() {
            let (pe, part) = (self.part_ends[p], &self.parts[p]);
            let ps = pe - part.len();
            if ps >= b {
                return;
            }
            out.share(part.slice(a.max(ps) - ps..b.min(pe) - ps));
            p += 1;
        }
        let base = self.tail_start();
        if b > base {
            out.cur.extend_from_slice(&self.tail[a.max(base) - base..b - base]);
        }
    }

    fn is_empty(&self) -> bool {
        self.first == self.pts.len() && self.hists.is_empty()
    }

    /// Adds points at steps not kept before (so at times it does not hold), rendering each with
    /// `render`; returns the bytes added.
    fn insert(&mut self, pts: &[(i64, f64)], hs: &[(i64, Arc<FloatHistogram>)], render: Option<PointRenderer>) -> usize {
        let mut added = pts.len() * POINT_BYTES + hs.iter().map(|(_, h)| 16 + h.size()).sum::<usize>();
        if !pts.is_empty() {
            let live_text = self.text_at(self.pts.len()) - self.text_at(self.first);
            if self.pts.last().is_some_and(|&(last, _)| last > pts[0].0) {
                // Into the middle (a hole filled, or an older range asked later): the live points and
                // the new ones merged anew, the live points' text copied.
                let hists = std::mem::take(&mut self.hists);
                let old = std::mem::replace(self, Kept { hists, ..Kept::default() });
                let (mut i, mut j) = (old.first, 0);
                while i < old.pts.len() || j < pts.len() {
                    if j == pts.len() || (i < old.pts.len() && old.pts[i].0 < pts[j].0) {
                        self.push(old.pts[i].0, old.pts[i].1, old.text_of(i));
                        i += 1;
                    } else {
                        self.push(pts[j].0, pts[j].1, render.map(Text::Render));
                        j += 1;
                    }
                }
            } else {
                for &(t, v) in pts {
                    self.push(t, v, render.map(Text::Render));
                }
            }
            added += self.text_at(self.pts.len()) - self.text_at(self.first) - live_text;
        }
        if !hs.is_empty() {
            self.hists.extend_from_slice(hs);
            self.hists.sort_by_key(|p| p.0);
        }
        added
    }

    /// Point `i`'s text as a [`Text`] to push elsewhere (none without a renderer).
    fn text_of(&self, i: usize) -> Option<Text<'_>> {
        (!self.ends.is_empty()).then(|| Text::Kept(self.point_text(i)))
    }

    /// Appends a point with its text, if any. The tail is frozen into a part once it reaches
    /// [`TEXT_PART`] bytes (copied into an exact allocation: the tail's spare capacity is not kept).
    fn push(&mut self, t: i64, v: f64, text: Option<Text<'_>>) {
        self.pts.push((t, v));
        if let Some(text) = text {
            match text {
                Text::Kept(kept) => self.tail.extend_from_slice(kept),
                Text::Render(r) => r(&mut self.tail, t, v),
            }
            let end = self.tail_start() + self.tail.len();
            self.ends.push(end);
            if self.tail.len() >= TEXT_PART {
                self.parts.push(Bytes::copy_from_slice(&self.tail));
                self.part_ends.push(end);
                self.tail = Vec::new();
            }
        }
    }

    /// Drops the points with `lo <= t <= hi`; returns the bytes freed. Dropping from the front only
    /// moves `first` until half the points are dropped ones.
    fn remove(&mut self, lo: i64, hi: i64) -> usize {
        let (a, b) = self.span(lo, hi);
        let (ha, hb) = self.hist_span(lo, hi);
        let mut freed = self.hists[ha..hb].iter().map(|(_, h)| 16 + h.size()).sum::<usize>();
        self.hists.drain(ha..hb);
        if a == b {
            return freed;
        }
        let (ta, tb) = (self.text_at(a), self.text_at(b));
        freed += (b - a) * POINT_BYTES + (tb - ta);
        if a == self.first {
            self.first = b;
            self.forget_front_by_half();
            return freed;
        }
        if b == self.pts.len() {
            // The newest points (what late writes touch): cut off, the text's parts after the cut
            // dropped and the one it falls in becoming the tail again.
            self.pts.truncate(a);
            if !self.ends.is_empty() {
                self.ends.truncate(a);
                let p = self.part_ends.partition_point(|e| *e <= ta);
                if p < self.parts.len() {
                    let ps = self.part_ends[p] - self.parts[p].len();
                    self.tail = self.parts[p][..ta - ps].to_vec();
                    self.parts.truncate(p);
                    self.part_ends.truncate(p);
                } else {
                    let base = self.tail_start();
                    self.tail.truncate(ta - base);
                }
            }
            self.forget_front_by_half();
            return freed;
        }
        self.rebuild((a, b));
        freed
    }

    /// Forgets the dropped front once it is half of the points.
    fn forget_front_by_half(&mut self) {
        if self.first * 2 > self.pts.len() {
            self.rebuild((0, 0));
        }
    }

    /// Keeps the live points outside `drop` (an index range) and forgets the rest, the text of those
    /// kept copied anew.
    fn rebuild(&mut self, drop: (usize, usize)) {
        let hists = std::mem::take(&mut self.hists);
        let old = std::mem::replace(self, Kept { hists, ..Kept::default() });
        self.pts.reserve(old.pts.len() - old.first - (drop.1 - drop.0).min(old.pts.len() - old.first));
        for i in (old.first..old.pts.len()).filter(|i| *i < drop.0 || *i >= drop.1) {
            self.push(old.pts[i].0, old.pts[i].1, old.text_of(i));
        }
    }
}

/// Where a pushed point's text comes from: kept text copied, or the renderer.
#[derive(Clone, Copy)]
enum Text<'a> {
    Kept(&'a [u8]),
    Render(PointRenderer),
}

/// A look-up's text for one series: shared parts, and the bytes copied or rendered since the last.
#[derive(Default)]
struct TextOut {
    parts: Vec<Bytes>,
    cur: Vec<u8>,
}

impl TextOut {
    /// Appends a shared piece (a short one is copied: a part per point would cost more than its bytes).
    fn share(&mut self, b: Bytes) {
        if b.len() < TEXT_PART / 16 {
            self.cur.extend_from_slice(&b);
            return;
        }
        if !self.cur.is_empty() {
            self.parts.push(Bytes::from(std::mem::take(&mut self.cur)));
        }
        self.parts.push(b);
    }

    fn finish(mut self, points: usize) -> Rendered {
        if !self.cur.is_empty() {
            self.parts.push(Bytes::from(self.cur));
        }
        Rendered { parts: self.parts, points }
    }
}

#[derive(Debug)]
struct SeriesKept {
    labels: Labels,
    /// Shared with look-ups in flight, which copy out of it after the cache's lock is released.
    kept: Arc<Kept>,
}

#[derive(Debug)]
struct Entry {
    window: Window,
    series: Vec<SeriesKept>,
    index: HashMap<Labels, u32>,
    /// The kept steps (a kept step where no series has a point is known to be empty), each with the
    /// notes of the evaluation that produced it.
    steps: BTreeMap<i64, Option<Arc<Notes>>>,
    bytes: usize,
    last_used: u64,
    /// The finest downsampling tier kept steps were read from where the key's own choice is raw data or
    /// a coarser tier (`engine::tier::past_raw`), so that an answer from kept steps names it too.
    tier_read: Option<i64>,
}

impl Entry {
    fn series_id(&mut self, l: &Labels) -> u32 {
        if let Some(&i) = self.index.get(l) {
            return i;
        }
        let i = self.series.len() as u32;
        self.bytes += label_bytes(l);
        self.series.push(SeriesKept { labels: l.clone(), kept: Arc::default() });
        self.index.insert(l.clone(), i);
        i
    }

    /// Drops the kept steps in `[lo, hi]` and their points; returns how many steps.
    fn drop_steps(&mut self, lo: i64, hi: i64) -> usize {
        if lo > hi {
            return 0;
        }
        let doomed: Vec<i64> = self.steps.range(lo..=hi).map(|(t, _)| *t).collect();
        if doomed.is_empty() {
            return 0;
        }
        for t in &doomed {
            self.steps.remove(t);
        }
        self.bytes -= (doomed.len() * STEP_BYTES).min(self.bytes);
        for s in &mut self.series {
            let (a, b) = s.kept.span(lo, hi);
            let (ha, hb) = s.kept.hist_span(lo, hi);
            if a < b || ha < hb {
                let freed = Arc::make_mut(&mut s.kept).remove(lo, hi);
                self.bytes -= freed.min(self.bytes);
            }
        }
        doomed.len()
    }

    /// Drops the kept steps whose window meets `[min_t, max_t]`; returns how many.
    fn invalidate(&mut self, min_t: i64, max_t: i64) -> usize {
        let lo = min_t.saturating_sub(self.window.after);
        let hi = max_t.saturating_add(self.window.before);
        self.drop_steps(lo, hi)
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
        let mut window = match dependency_window(expr, lookback_ms) {
            Ok(w) => w.unwrap_or(Window { before: 0, after: 0 }),
            Err(why) => return bypass(format!("not cacheable: {why}")),
        };
        // A step read from a tier reads whole buckets: from the one holding its window's start, or the
        // one before when the window fits inside a bucket (`tier::bucket_window`), so up to two
        // resolutions (of the coarsest tier the step may read) before the window.
        let past_raw = qo.tier == crate::engine::tier::TierRequest::Auto && q.raw_horizon().is_some();
        let widen = if past_raw { q.tiers().iter().map(|t| t.resolution_ms).max().unwrap_or(0) } else { tier_ms.unwrap_or(0) }.saturating_mul(2);
        window.before = window.before.saturating_add(widen);
        let storage = log.id();
        let key = Key {
            storage,
            expr: expr.to_string(),
            step_ms,
            phase_ms: start_ms.rem_euclid(step_ms),
            lookback_ms,
            flags: (engine.opts.enable_experimental, engine.opts.use_start_timestamps, engine.opts.no_step_subquery_interval_ms),
            tier_ms,
            past_raw,
        };
        // The newest step that may be kept: its window ends before the horizon.
        let horizon = now_ms.saturating_sub(self.opts.freshness_ms);
        let keep_through = horizon.saturating_sub(1).saturating_sub(window.after);
        let may_keep = start_ms <= keep_through;
        let seq0 = if may_keep {
            // Watch up to the newest step this request may keep (not the horizon): writes a little
            // behind "now" but after that step's window are not recorded, nor do they drop anything.
            let last = keep_through.min(end_ms);
            let newest = start_ms + (last - start_ms) / step_ms * step_ms;
            log.watch(newest.saturating_add(window.after));
            Some(log.seq())
        } else {
            None
        };

        // Look up what is kept: the steps, and per series the range of its kept points in the request
        // (shared, copied out after the lock is released).
        let mut hit_steps: Vec<i64> = Vec::new();
        let mut notes: Vec<Arc<Notes>> = Vec::new();
        let mut found: Vec<Found> = Vec::new();
        let mut kept_tier: Option<i64> = None;
        {
            let mut g = self.inner.lock();
            self.sync(&mut g, log, storage);
            g.tick += 1;
            let tick = g.tick;
            if let Some(e) = g.entries.get_mut(&key) {
                e.last_used = tick;
                kept_tier = e.tier_read;
                for (t, n) in e.steps.range(start_ms..=end_ms) {
                    hit_steps.push(*t);
                    if let Some(n) = n
                        && !notes.iter().any(|x| Arc::ptr_eq(x, n))
                    {
                        notes.push(n.clone());
                    }
                }
                if !hit_steps.is_empty() {
                    for s in &e.series {
                        let span = s.kept.span(start_ms, end_ms);
                        let hspan = s.kept.hist_span(start_ms, end_ms);
                        if span.0 < span.1 || hspan.0 < hspan.1 {
                            found.push(Found { labels: s.labels.clone(), kept: s.kept.clone(), span, hspan });
                        }
                    }
                }
            }
        }

        // The missing steps, as contiguous runs.
        let mut runs: Vec<(i64, i64)> = Vec::new();
        let mut hit = hit_steps.iter().copied().peekable();
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
        // Kept points inside an evaluated run are not used (only when the runs were merged into one).
        let mut skip: Option<(i64, i64)> = None;
        if runs.len() > MAX_RUNS {
            let (first, last) = (runs[0].0, runs[runs.len() - 1].1);
            runs = vec![(first, last)];
            hit_steps.retain(|t| *t < first || *t > last);
            skip = Some((first, last));
        }
        let hits = hit_steps.len();
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

        // Splice: kept points and evaluated runs, one series per label set, points in time order. The
        // kept steps' annotations come first, then the evaluated runs' (runs are in time order, so their
        // points stay in order).
        let mut sp = Spliced::default();
        for n in &notes {
            merge_unique(&mut sp.warnings, &n.warnings);
            merge_unique(&mut sp.infos, &n.infos);
        }
        sp.add_all(&results);
        let Spliced { series: fresh, at: fresh_at, warnings, infos, stats, trace } = sp;
        let render = self.opts.render;
        let mut out: Vec<MatrixSeries> = Vec::with_capacity(found.len() + fresh.len());
        let mut used = vec![false; fresh.len()];
        for f in &found {
            let new = fresh_at.get(&f.labels).map(|&i| {
                used[i] = true;
                &fresh[i]
            });
            out.push(splice_series(f, new, skip, render));
        }
        for (i, s) in fresh.into_iter().enumerate() {
            if !used[i] {
                let mut s = s;
                if let Some(r) = render {
                    let mut text = Vec::with_capacity(s.points.len() * 32);
                    for &(t, v) in &s.points {
                        r(&mut text, t, v);
                    }
                    let points = std::mem::take(&mut s.points).len();
                    s.rendered = Some(Rendered { parts: vec![Bytes::from(text)], points });
                }
                out.push(s);
            }
        }
        out.retain(|s| s.float_count() > 0 || !s.histograms.is_empty());
        out.sort_by(|a, b| a.labels.cmp(&b.labels));

        // Keep what is final — after the splice let go of the kept points it read, so that adding to
        // them copies nothing (a series' points still shared are copied before they change).
        drop(found);
        let mut stored = 0;
        if let Some(seq0) = seq0 {
            stored = self.store(&key, window, log, storage, seq0, start_ms, keep_through, &runs, &results);
        }
        let report = CacheReport { steps: nsteps, hits, evaluated, runs: runs.len(), stored, bypass: None };
        // A run reaching past the raw data names the tier it read (`engine::tier::past_raw`): the finest,
        // of the runs evaluated now and of the kept steps used.
        let kept_tier = if hits > 0 { kept_tier } else { None };
        let tier_ms = tier_ms.or_else(|| results.iter().filter_map(|r| r.tier_ms).chain(kept_tier).min());
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
        start_ms: i64,
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
            tier_read: None,
        });
        e.last_used = tick;
        e.tier_read = results.iter().filter_map(|r| r.tier_ms).chain(e.tier_read).min();
        let mut stored = 0;
        for (&(first, last), r) in runs.iter().zip(results) {
            let Value::Matrix(m) = &r.value else { continue };
            // This run's steps to keep (every step of the run is known, empty ones included).
            let mut keep: Vec<i64> = Vec::new();
            let mut t = first;
            while t <= last && t <= keep_through {
                if !touched(t) && !e.steps.contains_key(&t) {
                    keep.push(t);
                }
                t += key.step_ms;
            }
            if keep.is_empty() {
                continue;
            }
            let notes = (!r.warnings.is_empty() || !r.infos.is_empty())
                .then(|| Arc::new(Notes { warnings: r.warnings.clone(), infos: r.infos.clone() }));
            for &t in &keep {
                e.steps.insert(t, notes.clone());
            }
            e.bytes += keep.len() * STEP_BYTES;
            stored += keep.len();
            for s in m {
                let pts = at_steps(&s.points, &keep);
                let hs = at_steps(&s.histograms, &keep);
                if pts.is_empty() && hs.is_empty() {
                    continue;
                }
                let id = e.series_id(&s.labels) as usize;
                let added = Arc::make_mut(&mut e.series[id].kept).insert(&pts, &hs, self.opts.render);
                e.bytes += added;
            }
        }
        // One entry may use at most half the cache. Steps before this request's start go first (a
        // dashboard's window has moved past them), oldest first, an eighth of the steps at most at a
        // time; only a request that alone is over the bound drops its own oldest steps (dropping those
        // while older ones stay would have every repeat evaluate them again).
        while e.bytes > self.opts.max_bytes / 2 && !e.steps.is_empty() {
            let n = e.steps.len();
            let before = e.steps.range(..start_ms).count();
            let k = if before > 0 { (before - 1).min(n / 8) } else { (n / 8).min(n - 1) };
            let (Some(&lo), Some(&cut)) = (e.steps.keys().next(), e.steps.keys().nth(k)) else { break };
            e.drop_steps(lo, cut);
        }
        // Series without kept points left are forgotten.
        let mut freed = 0;
        e.series.retain(|s| {
            let keep = !s.kept.is_empty();
            if !keep {
                freed += label_bytes(&s.labels);
            }
            keep
        });
        e.bytes -= freed.min(e.bytes);
        if e.series.len() < e.index.len() {
            e.index = e.series.iter().enumerate().map(|(i, s)| (s.labels.clone(), i as u32)).collect();
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

/// Bytes a series' labels cost an entry.
fn label_bytes(l: &Labels) -> usize {
    96 + l.iter().map(|x| 48 + x.name.len() + x.value.len()).sum::<usize>()
}

/// A series found by a look-up: its kept points in the request (index ranges into `kept`).
struct Found {
    labels: Labels,
    kept: Arc<Kept>,
    span: (usize, usize),
    hspan: (usize, usize),
}

/// How many leading elements of `xs` satisfy `pred` (true for a prefix, then false: a partition point),
/// found by doubling a bound from the front, then bisecting below it: O(log k) probes near the front for
/// an answer `k`, rather than bisecting all of `xs`.
fn gallop_front<T>(xs: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let mut hi = 1;
    while hi <= xs.len() && pred(&xs[hi - 1]) {
        hi *= 2;
    }
    // The answer lies in [hi/2, min(hi, len)]: `xs[..hi/2]` all satisfy `pred`.
    let lo = hi / 2;
    let end = hi.min(xs.len());
    lo + xs[lo..end].partition_point(&pred)
}

/// How many trailing elements of `xs` satisfy `pred` (false for a prefix, then true), searched from the
/// back as [`gallop_front`] searches from the front.
fn gallop_back<T>(xs: &[T], pred: impl Fn(&T) -> bool) -> usize {
    let n = xs.len();
    let mut hi = 1;
    while hi <= n && pred(&xs[n - hi]) {
        hi *= 2;
    }
    let lo = hi / 2;
    let end = hi.min(n);
    // Elements n-end .. n-lo hold the boundary: false then true.
    let part = &xs[n - end..n - lo];
    lo + (part.len() - part.partition_point(|x| !pred(x)))
}

/// The points of `pts` (in time order) at the steps `keep` (in order).
fn at_steps<T: Clone>(pts: &[(i64, T)], keep: &[i64]) -> Vec<(i64, T)> {
    let mut out = Vec::with_capacity(pts.len().min(keep.len()));
    let mut k = 0;
    for p in pts {
        while k < keep.len() && keep[k] < p.0 {
            k += 1;
        }
        if k == keep.len() {
            break;
        }
        if keep[k] == p.0 {
            out.push(p.clone());
        }
    }
    out
}

/// One series of the answer: its kept points (less those in `skip`, the merged run) and its evaluated
/// ones `new`, in time order; with a renderer, only as text (kept points' frozen parts shared, the rest
/// copied, evaluated ones rendered).
fn splice_series(f: &Found, new: Option<&MatrixSeries>, skip: Option<(i64, i64)>, render: Option<PointRenderer>) -> MatrixSeries {
    let k = &*f.kept;
    let (a, b) = f.span;
    let ranges = match skip {
        Some((lo, hi)) => {
            let (sa, sb) = k.span(lo, hi);
            [(a, sa.clamp(a, b)), (sb.clamp(a, b), b)]
        }
        None => [(a, b), (b, b)],
    };
    let fresh: &[(i64, f64)] = new.map_or(&[], |s| &s.points);
    // With a renderer the answer carries only the text (the kept parts shared); else the points.
    let mut points: Vec<(i64, f64)> = Vec::with_capacity(if render.is_some() { 0 } else { b - a + fresh.len() });
    let mut text = TextOut::default();
    // (Every evaluated point goes out; the kept ones counted as they go.)
    let emit_fresh = |p: (i64, f64), points: &mut Vec<(i64, f64)>, text: &mut TextOut| match render {
        Some(r) => r(&mut text.cur, p.0, p.1),
        None => points.push(p),
    };
    let mut fi = 0;
    let mut kept_n = 0;
    for (ra, rb) in ranges {
        let mut i = ra;
        while i < rb {
            while fi < fresh.len() && fresh[fi].0 < k.pts[i].0 {
                emit_fresh(fresh[fi], &mut points, &mut text);
                fi += 1;
            }
            let j = match fresh.get(fi) {
                Some(p) => i + k.pts[i..rb].partition_point(|q| q.0 < p.0),
                None => rb,
            };
            if j == i {
                // An evaluated point at a kept one's time (cannot happen: runs are the steps not kept);
                // the evaluated one wins.
                i += 1;
                continue;
            }
            match render {
                Some(_) => k.text_into(k.text_at(i), k.text_at(j), &mut text),
                None => points.extend_from_slice(&k.pts[i..j]),
            }
            kept_n += j - i;
            i = j;
        }
    }
    for &p in &fresh[fi..] {
        emit_fresh(p, &mut points, &mut text);
    }
    let rendered = render.map(|_| text.finish(fresh.len() + kept_n));
    let (ha, hb) = f.hspan;
    let mut histograms: Vec<(i64, Arc<FloatHistogram>)> =
        k.hists[ha..hb].iter().filter(|p| skip.is_none_or(|(lo, hi)| p.0 < lo || p.0 > hi)).cloned().collect();
    if let Some(s) = new
        && !s.histograms.is_empty()
    {
        histograms.extend(s.histograms.iter().cloned());
        histograms.sort_by_key(|p| p.0);
    }
    MatrixSeries { labels: f.labels.clone(), points, histograms, rendered }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn render(out: &mut Vec<u8>, t: i64, v: f64) {
        out.extend_from_slice(format!("|{t}:{v}").as_bytes());
    }

    fn text_of(points: &[(i64, f64)]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(t, v) in points {
            render(&mut out, t, v);
        }
        out
    }

    proptest::proptest! {
        /// The searches from the ends find what bisection finds, for any bounds (inverted ones give an
        /// empty range) and any number of dropped front points.
        #[test]
        fn spans_from_the_ends_are_the_partition_points(
            gaps in proptest::collection::vec(1i64..50, 0..300),
            first in 0usize..300,
            lo in -10i64..8000,
            len in -100i64..8000,
        ) {
            let mut t = 0i64;
            let pts: Vec<(i64, f64)> = gaps.iter().map(|g| { t += g; (t, 0.0) }).collect();
            let k = Kept { first: first.min(pts.len()), pts, ..Kept::default() };
            let hi = lo + len;
            let live = &k.pts[k.first..];
            let (a, b) = (k.first + live.partition_point(|p| p.0 < lo), k.first + live.partition_point(|p| p.0 <= hi));
            let (x, y) = k.span(lo, hi);
            if a < b {
                proptest::prop_assert_eq!((x, y), (a, b));
            } else {
                proptest::prop_assert!(x == y && (x == a || hi < lo), "{:?} vs {:?}", (x, y), (a, b));
            }
            proptest::prop_assert_eq!(gallop_front(live, |p| p.0 < lo), live.partition_point(|p| p.0 < lo));
            proptest::prop_assert_eq!(gallop_back(live, |p| p.0 > hi), live.len() - live.partition_point(|p| p.0 <= hi));
        }
    }

    /// A series' live points as (time, value) and the text of exactly those.
    fn live(k: &Kept) -> (Vec<(i64, f64)>, Vec<u8>) {
        let pts: Vec<(i64, f64)> = k.pts[k.first..].to_vec();
        let mut out = TextOut::default();
        k.text_into(k.text_at(k.first), k.text_at(k.pts.len()), &mut out);
        (pts, out.finish(0).to_vec())
    }

    /// Random inserts (appends, holes filled, older ranges) and removals (front, middle, back) keep a
    /// series' points equal to a plain map's, their text equal to the points rendered, and the byte
    /// count equal to what the points hold.
    #[test]
    fn kept_points_and_their_text_follow_inserts_and_removals() {
        let mut x = 42u64;
        let mut next = |n: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        for _ in 0..200 {
            let mut k = Kept::default();
            let mut model: BTreeMap<i64, f64> = BTreeMap::new();
            let mut bytes = 0usize;
            for _ in 0..60 {
                if next(3) > 0 {
                    // Insert the steps of a random span that are not held yet.
                    let lo = next(200) as i64;
                    let hi = lo + next(40) as i64;
                    let mut pts: Vec<(i64, f64)> = Vec::new();
                    for t in lo..=hi {
                        if !model.contains_key(&t) && next(5) > 0 {
                            pts.push((t, (t * 7 + next(1000) as i64) as f64 / 8.0));
                        }
                    }
                    bytes += k.insert(&pts, &[], Some(render));
                    model.extend(pts.iter().copied());
                } else {
                    // From the front, the middle, or up to the back.
                    let (lo, hi) = match next(3) {
                        0 => {
                            let lo = model.keys().next().copied().unwrap_or(0);
                            (lo, lo + next(30) as i64)
                        }
                        1 => {
                            let lo = next(240) as i64;
                            (lo, lo + next(30) as i64)
                        }
                        _ => (model.keys().next_back().copied().unwrap_or(0) - next(30) as i64, i64::MAX),
                    };
                    bytes -= k.remove(lo, hi);
                    model.retain(|t, _| *t < lo || *t > hi);
                }
                let want: Vec<(i64, f64)> = model.iter().map(|(t, v)| (*t, *v)).collect();
                let (pts, text) = live(&k);
                assert_eq!(pts, want);
                assert_eq!(String::from_utf8_lossy(&text), String::from_utf8_lossy(&text_of(&want)));
                let held = want.len() * POINT_BYTES + text_of(&want).len();
                assert_eq!(bytes, held, "bytes counted");
                assert!(k.first * 2 <= k.pts.len().max(1), "the dropped front is forgotten by half");
            }
        }
    }

    /// A look-up's series: kept points less those in the merged run, evaluated ones in between, all in
    /// time order, the text that of the points.
    #[test]
    fn splicing_puts_evaluated_points_between_kept_ones_and_skips_the_merged_run() {
        let mut k = Kept::default();
        let kept: Vec<(i64, f64)> = (0..20).filter(|t| t % 5 != 4).map(|t| (t, t as f64)).collect();
        k.insert(&kept, &[], Some(render));
        let k = Arc::new(k);
        let labels = Labels::from_pairs([("a", "b".to_string())]);
        let fresh = |pts: Vec<(i64, f64)>| MatrixSeries { labels: labels.clone(), points: pts, histograms: Vec::new(), rendered: None };
        // Runs at the steps not kept (4, 9, 14, 19), then a merged run over 6..=12 where the series
        // is now absent at 8.
        type Points = Vec<(i64, f64)>;
        type Case = (Option<(i64, i64)>, Points, Points);
        let cases: Vec<Case> = vec![
            (None, vec![(4, -4.0), (9, -9.0), (19, -19.0)], {
                let mut w = kept.clone();
                w.extend([(4, -4.0), (9, -9.0), (19, -19.0)]);
                w.sort_by_key(|p| p.0);
                w
            }),
            (Some((6, 12)), vec![(6, -6.0), (7, -7.0), (9, -9.0), (10, -10.0), (11, -11.0), (12, -12.0)], {
                let mut w: Vec<(i64, f64)> = kept.iter().copied().filter(|p| p.0 < 6 || p.0 > 12).collect();
                w.extend([(6, -6.0), (7, -7.0), (9, -9.0), (10, -10.0), (11, -11.0), (12, -12.0)]);
                w.sort_by_key(|p| p.0);
                w
            }),
            (None, vec![], kept.clone()),
        ];
        for (skip, new, want) in cases {
            let f = Found { labels: labels.clone(), kept: k.clone(), span: k.span(0, 100), hspan: (0, 0) };
            // With a renderer, only the text (kept parts shared, the rest copied), all of it.
            let s = splice_series(&f, Some(&fresh(new.clone())), skip, Some(render));
            assert!(s.points.is_empty(), "skip {skip:?}");
            let r = s.rendered.expect("rendered");
            assert_eq!(String::from_utf8_lossy(&r.to_vec()), String::from_utf8_lossy(&text_of(&want)), "skip {skip:?}");
            assert_eq!(r.points, want.len(), "skip {skip:?}");
            assert!(r.parts.len() > 1, "the kept text (over {TEXT_PART} bytes) is shared in parts");
            // Without one, the points.
            let s = splice_series(&f, Some(&fresh(new)), skip, None);
            assert_eq!(s.points, want, "skip {skip:?}");
            assert!(s.rendered.is_none());
        }
    }
}
