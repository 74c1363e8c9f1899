//! The evaluator: walks the syntax tree once, each node producing its values for every step of the query
//! (see the module essay of [`super`]). Mirrors upstream `evaluator.eval` in `promql/engine.go`.

use super::{EngineError, EngineOptions, MatrixSeries, QueryResult, Value, VectorSample, functions};
use crate::parser::{AtModifier, Expr, SubqueryExpr, UnaryOp, VectorSelector};
use parking_lot::Mutex;
use rayon::prelude::*;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use std::sync::Arc;
use tessera_model::histogram::CounterResetHint;
use tessera_model::{FloatHistogram, Labels, Queryable, STALE_NAN, Sample, SelectHints, is_stale_nan};

/// Everything one query's evaluation shares.
pub struct QueryCtx<'a> {
    pub queryable: &'a dyn Queryable,
    pub opts: &'a EngineOptions,
    pub lookback_ms: i64,
    /// The outer query's start and end (what `@ start()` and `@ end()` mean).
    pub query_start_ms: i64,
    pub query_end_ms: i64,
    pub cancel: super::CancelToken,
    pub deadline: Instant,
    pub annotations: Mutex<Annotations>,
    /// Samples currently held, for the max-samples limit (upstream `evaluator.currentSamples`): the
    /// outputs of the nodes whose parent is still being evaluated. See [`eval`] and [`select_map_st`].
    pub samples: AtomicUsize,
    /// Value slots held right now, present or not (see [`QueryCtx::check_slots`]), released like
    /// `samples`.
    pub slots: AtomicUsize,
    /// For `stats`: see [`super::QueryStats`].
    pub stats: StatsCounters,
    /// The selectors whose histograms get counter-reset hints re-derived as upstream's
    /// `HistogramStatsIterator` gives them (see [`super::hist::histogram_stats_selectors`]), by address.
    pub stats_selectors: std::collections::HashSet<usize>,
    /// Where each node runs (see [`super::plan`]).
    pub plan: &'a super::plan::Plan,
    /// Per-node records, with `trace=1`.
    pub trace: Option<Mutex<super::plan::Trace>>,
    /// The downsampling tier the query reads (resolution, ms), `None` for raw data (see [`super::tier`]).
    pub tier_ms: Option<i64>,
}

/// What a loop over series has done since it last read the clock (see [`QueryCtx::check_series`]);
/// [`SeriesChecks::due`] makes the first series of a loop read it.
#[derive(Debug, Default)]
pub struct SeriesChecks {
    series: u32,
    work: usize,
}

impl SeriesChecks {
    /// Series between two reads of the clock.
    const SERIES: u32 = 16;
    /// Samples and steps of work after which the clock is read sooner.
    const WORK: usize = 1 << 14;
    /// Due at the next check.
    pub fn due() -> Self {
        Self { series: Self::SERIES - 1, work: 0 }
    }
    /// Counts a series and `work` (samples and steps); whether the clock is due now (then starts over).
    fn tick(&mut self, work: usize) -> bool {
        self.series += 1;
        self.work = self.work.saturating_add(work);
        let due = self.series >= Self::SERIES || self.work >= Self::WORK;
        if due {
            *self = Self::default();
        }
        due
    }
}

/// The counters behind [`super::QueryStats`], updated from the parallel shard loops.
#[derive(Debug, Default)]
pub struct StatsCounters {
    pub total_queryable: AtomicUsize,
    pub read: AtomicUsize,
    pub peak: AtomicUsize,
    /// Series handed over by storage, and their chunks (for the trace).
    pub series: AtomicUsize,
    pub chunks: AtomicUsize,
}

/// Warnings and infos, deduplicated, in the order first seen.
#[derive(Debug, Default)]
pub struct Annotations {
    pub warnings: Vec<String>,
    pub infos: Vec<String>,
}

impl QueryCtx<'_> {
    pub fn warn(&self, msg: String) {
        let mut a = self.annotations.lock();
        if !a.warnings.contains(&msg) {
            a.warnings.push(msg);
        }
    }
    pub fn info(&self, msg: String) {
        let mut a = self.annotations.lock();
        if !a.infos.contains(&msg) {
            a.infos.push(msg);
        }
    }
    /// Checked in loops: cancellation and timeout.
    pub fn check(&self) -> Result<(), EngineError> {
        if self.cancel.is_canceled() {
            return Err(EngineError::Canceled("query execution".into()));
        }
        if Instant::now() > self.deadline {
            return Err(EngineError::Timeout("query execution".into()));
        }
        Ok(())
    }
    /// [`Self::check`] for a loop over series: the cancel flag at every series, the clock (a vDSO call:
    /// ~2% of the CPU of an instant selector over 6,000 head series) once [`SeriesChecks`] has counted
    /// 16 series or 16,384 samples and steps of work since it last read it.
    #[inline]
    pub fn check_series(&self, c: &mut SeriesChecks, work: usize) -> Result<(), EngineError> {
        if self.cancel.is_canceled() {
            return Err(EngineError::Canceled("query execution".into()));
        }
        if c.tick(work) && Instant::now() > self.deadline {
            return Err(EngineError::Timeout("query execution".into()));
        }
        Ok(())
    }
    /// Accounts `n` more samples held in memory; fails past the limit.
    pub fn add_samples(&self, n: usize) -> Result<(), EngineError> {
        let now = self.samples.fetch_add(n, Ordering::Relaxed) + n;
        self.check_samples(now)
    }
    /// Samples held right now.
    pub fn held_samples(&self) -> usize {
        self.samples.load(Ordering::Relaxed)
    }
    /// Fails when `total` samples would be held at once (upstream `ErrTooManySamples`).
    pub fn check_samples(&self, total: usize) -> Result<(), EngineError> {
        if total > self.opts.max_samples {
            return Err(EngineError::TooManySamples("query execution".into()));
        }
        self.stats.peak.fetch_max(total, Ordering::Relaxed);
        Ok(())
    }
    /// Fails when `total` value slots would be held at once. Tessera's vectors keep a slot for every
    /// step of every series, present or not, where upstream keeps only the present points that the
    /// sample limit counts; a sparse series over a fine grid (a subquery `[1h:1ms]` of series that
    /// stopped long ago) would hold gigabytes below that limit. So the slots are bounded too, at twice
    /// the sample limit (16 bytes a slot: 1.6 GB at the default 50 M).
    pub fn check_slots(&self, total: usize) -> Result<(), EngineError> {
        if total > self.opts.max_samples.saturating_mul(2) {
            return Err(EngineError::TooManySamples("query execution".into()));
        }
        Ok(())
    }
    /// Counts `n` samples a selector hands to evaluation (upstream `TotalSamples`: a point picked by
    /// the lookback, or every sample of a window).
    pub fn count_queryable(&self, n: usize) {
        self.stats.total_queryable.fetch_add(n, Ordering::Relaxed);
    }
}

/// How many samples a value holds, as upstream counts them (one per step for a scalar, one per present
/// step for a vector series, every sample of a range vector).
pub trait Held {
    fn held(&self) -> usize;
    /// The value slots it occupies in memory: an instant-vector series has one per step, present or
    /// not (see [`QueryCtx::check_slots`]).
    fn slots(&self) -> usize {
        self.held()
    }
}

impl Held for Series {
    fn held(&self) -> usize {
        let floats = self.vals.iter().filter(|v| v.is_some()).count();
        match &self.hists {
            None => floats,
            Some(h) => floats + h.iter().flatten().map(|h| hist_size(h)).sum::<usize>(),
        }
    }
    fn slots(&self) -> usize {
        self.vals.len()
    }
}

impl Held for RangeSeries {
    fn held(&self) -> usize {
        self.samples.len() + self.hists.iter().map(|p| hist_size(&p.h)).sum::<usize>()
    }
}

/// How many samples a histogram counts as for the max-samples limit: its size in bytes over 16, as
/// upstream's `Matrix.TotalSamples`/`evaluator` count it (`FloatHistogram.Size() / 16`: a 168-byte struct
/// plus 8 bytes per span, bucket and custom bound).
pub fn hist_size(h: &FloatHistogram) -> usize {
    let n = h.positive_spans.len()
        + h.negative_spans.len()
        + h.positive_buckets.len()
        + h.negative_buckets.len()
        + h.custom_values.len();
    (168 + 8 * n) / 16
}

impl Held for Val {
    fn held(&self) -> usize {
        match self {
            Val::Scalar(s) => s.len(),
            Val::Str(_) => 0,
            Val::Vector(v) => v.iter().map(Held::held).sum(),
            Val::Matrix(m) => m.iter().map(Held::held).sum(),
        }
    }
    fn slots(&self) -> usize {
        match self {
            Val::Vector(v) => v.iter().map(Held::slots).sum(),
            _ => self.held(),
        }
    }
}

/// The steps a node is evaluated at: `start + i*step` for `i in 0..n`.
#[derive(Debug, Clone, Copy)]
pub struct Grid {
    pub start: i64,
    pub step: i64,
    pub n: usize,
}

impl Grid {
    pub fn new(start: i64, end: i64, step: i64) -> Self {
        if step <= 0 || end <= start {
            return Grid { start, step: step.max(1), n: 1 };
        }
        Grid { start, step, n: ((end - start) / step) as usize + 1 }
    }
    #[inline]
    pub fn t(&self, i: usize) -> i64 {
        self.start + i as i64 * self.step
    }
    pub fn end(&self) -> i64 {
        self.t(self.n - 1)
    }
}

/// A histogram sample of a range vector (upstream `HPoint`).
#[derive(Debug, Clone)]
pub struct HPoint {
    pub t: i64,
    pub h: Arc<FloatHistogram>,
}

/// Start timestamps aligned with one series' float and histogram samples (upstream `StartTimestamps`
/// with its `Floats` and `Histograms`): each slice holds one start timestamp per sample (0: unknown),
/// or is empty when no chunk of that kind carries them or they were not asked for.
#[derive(Debug, Clone, Copy, Default)]
pub struct StartTimestamps<'a> {
    pub floats: &'a [i64],
    pub histograms: &'a [i64],
}

/// A histogram value column: one optional histogram per step.
pub type HistCol = Vec<Option<Arc<FloatHistogram>>>;

/// One instant-vector series: a value per step (`None`: no sample at that step).
///
/// A step holds a float (`vals[i]`) or a histogram (`hists[i]`), never both. The histogram column is
/// allocated only for a series that has a histogram at some step, so float-only queries keep their
/// one-`Option<f64>`-per-step layout and every float loop stays as it was.
#[derive(Debug, Clone)]
pub struct Series {
    pub labels: Labels,
    pub vals: Vec<Option<f64>>,
    /// Histogram values per step (`None` when the series has none at all).
    pub hists: Option<HistCol>,
    /// Delayed `__name__` removal: drop the name when the result leaves the engine (upstream `DropName`).
    pub drop_name: bool,
}

impl Series {
    /// A float-only series.
    pub fn floats(labels: Labels, vals: Vec<Option<f64>>, drop_name: bool) -> Self {
        Series { labels, vals, hists: None, drop_name }
    }
    /// The histogram at step `i`, if any.
    #[inline]
    pub fn hist(&self, i: usize) -> Option<&Arc<FloatHistogram>> {
        self.hists.as_ref().and_then(|h| h.get(i)).and_then(|h| h.as_ref())
    }
    /// Whether any step holds a value (float or histogram).
    pub fn any_value(&self) -> bool {
        self.vals.iter().any(|v| v.is_some()) || self.hists.as_ref().is_some_and(|h| h.iter().any(|h| h.is_some()))
    }
    /// Whether step `i` holds a value (float or histogram).
    #[inline]
    pub fn has(&self, i: usize) -> bool {
        self.vals[i].is_some() || self.hist(i).is_some()
    }
    /// Drops the histogram column when it holds nothing.
    pub fn tidy(&mut self) {
        if self.hists.as_ref().is_some_and(|h| h.iter().all(|h| h.is_none())) {
            self.hists = None;
        }
    }
}

/// A range-vector series: raw samples (stale markers removed), floats and histograms apart as upstream's
/// `Series.Floats` and `Series.Histograms`.
#[derive(Debug, Clone)]
pub struct RangeSeries {
    pub labels: Labels,
    pub samples: Vec<Sample>,
    pub hists: Vec<HPoint>,
    pub drop_name: bool,
}

/// A node's value over all steps.
#[derive(Debug, Clone)]
pub enum Val {
    Scalar(Vec<f64>),
    Str(String),
    Vector(Vec<Series>),
    /// Only as the top-level result of an instant query (`foo[5m]`): samples of the single step's window.
    Matrix(Vec<RangeSeries>),
}

/// Evaluates `expr` as a query over `[start, end]` every `step` (0: instant query).
pub fn run(ctx: &QueryCtx<'_>, expr: &Expr, start: i64, end: i64, step: i64) -> Result<QueryResult, EngineError> {
    let grid = Grid::new(start, end, step);
    let val = match expr.unwrap_parens() {
        Expr::MatrixSelector(_) | Expr::Subquery(_) if step == 0 => {
            let ra = eval_range_arg(ctx, expr, &grid)?;
            let e = ra.eff[0];
            Val::Matrix(
                ra.series
                    .into_iter()
                    .map(|s| {
                        let samples: Vec<Sample> =
                            s.samples.into_iter().filter(|p| p.t > e - ra.range_ms && p.t <= e).collect();
                        let hists: Vec<HPoint> =
                            s.hists.into_iter().filter(|p| p.t > e - ra.range_ms && p.t <= e).collect();
                        RangeSeries { labels: s.labels, samples, hists, drop_name: s.drop_name }
                    })
                    .filter(|s| !s.samples.is_empty() || !s.hists.is_empty())
                    .collect(),
            )
        }
        _ => eval(ctx, expr, &grid)?,
    };
    let value = to_value(val, &grid, step == 0)?;
    let a = std::mem::take(&mut *ctx.annotations.lock());
    let stats = super::QueryStats {
        total_queryable_samples: ctx.stats.total_queryable.load(Ordering::Relaxed) as u64,
        samples_read: ctx.stats.read.load(Ordering::Relaxed) as u64,
        peak_samples: ctx.stats.peak.load(Ordering::Relaxed) as u64,
    };
    Ok(QueryResult { value, warnings: a.warnings, infos: a.infos, stats, trace: None, tier_ms: None })
}

/// Applies delayed `__name__` removal; the type-and-unit metadata labels go with the name.
pub fn final_labels(l: Labels, drop: bool) -> Labels {
    if drop { l.drop_names(&["__name__", "__type__", "__unit__"]) } else { l }
}

pub const DUP_LABELSET: &str = "vector cannot contain metrics with the same labelset";

fn to_value(v: Val, grid: &Grid, instant: bool) -> Result<Value, EngineError> {
    Ok(match v {
        Val::Scalar(s) => {
            if instant {
                Value::Scalar { t_ms: grid.start, v: s[0] }
            } else {
                Value::Matrix(vec![MatrixSeries {
                    labels: Labels::empty(),
                    points: s.iter().enumerate().map(|(i, v)| (grid.t(i), *v)).collect(),
                    histograms: Vec::new(),
                    rendered: None,
                }])
            }
        }
        Val::Str(s) => Value::String { t_ms: grid.start, v: s },
        Val::Matrix(m) => {
            let mut out: Vec<MatrixSeries> = m
                .into_iter()
                .map(|s| MatrixSeries {
                    labels: final_labels(s.labels, s.drop_name),
                    points: s.samples.iter().map(|p| (p.t, p.v)).collect(),
                    histograms: s.hists.into_iter().map(|p| (p.t, p.h)).collect(),
                    rendered: None,
                })
                .collect();
            check_unique(out.iter().map(|s| &s.labels))?;
            out.sort_by(|a, b| a.labels.cmp(&b.labels));
            Value::Matrix(out)
        }
        Val::Vector(vs) => {
            if instant {
                let out: Vec<VectorSample> = vs
                    .into_iter()
                    .filter_map(|s| {
                        let h = s.hist(0).cloned();
                        if s.vals[0].is_none() && h.is_none() {
                            return None;
                        }
                        let v = s.vals[0].unwrap_or(0.0);
                        Some(VectorSample { labels: final_labels(s.labels, s.drop_name), t_ms: grid.start, v, h })
                    })
                    .collect();
                check_unique(out.iter().map(|s| &s.labels))?;
                Value::Vector(out)
            } else {
                let merged = merge_same_labels(
                    vs.into_iter().map(|s| Series { labels: final_labels(s.labels, s.drop_name), ..s }).collect(),
                )?;
                let mut out: Vec<MatrixSeries> = merged
                    .into_iter()
                    .filter_map(|s| {
                        let points: Vec<(i64, f64)> =
                            s.vals.iter().enumerate().filter_map(|(i, v)| v.map(|v| (grid.t(i), v))).collect();
                        let histograms: Vec<(i64, Arc<FloatHistogram>)> = match s.hists {
                            None => Vec::new(),
                            Some(hs) => {
                                hs.into_iter().enumerate().filter_map(|(i, h)| h.map(|h| (grid.t(i), h))).collect()
                            }
                        };
                        (!points.is_empty() || !histograms.is_empty()).then_some(MatrixSeries {
                            labels: s.labels,
                            points,
                            histograms,
                            rendered: None,
                        })
                    })
                    .collect();
                out.sort_by(|a, b| a.labels.cmp(&b.labels));
                Value::Matrix(out)
            }
        }
    })
}

fn check_unique<'a>(it: impl Iterator<Item = &'a Labels>) -> Result<(), EngineError> {
    let mut seen = std::collections::HashSet::new();
    for l in it {
        if !seen.insert(l) {
            return Err(EngineError::Execution(DUP_LABELSET.into()));
        }
    }
    Ok(())
}

/// Merges series with identical labels whose steps do not overlap (a label-changing function can turn
/// two series into one across steps); overlapping steps are upstream's duplicate-labelset error.
pub fn merge_same_labels(vs: Vec<Series>) -> Result<Vec<Series>, EngineError> {
    let mut idx: HashMap<Labels, usize> = HashMap::with_capacity(vs.len());
    let mut out: Vec<Series> = Vec::with_capacity(vs.len());
    for s in vs {
        if let Some(&i) = idx.get(&s.labels) {
            let o: &mut Series = &mut out[i];
            for j in 0..o.vals.len() {
                if s.has(j) {
                    if o.has(j) {
                        return Err(EngineError::Execution(DUP_LABELSET.into()));
                    }
                    o.vals[j] = s.vals[j];
                    if let Some(h) = s.hist(j) {
                        let n = o.vals.len();
                        o.hists.get_or_insert_with(|| vec![None; n])[j] = Some(h.clone());
                    }
                }
            }
        } else {
            idx.insert(s.labels.clone(), out.len());
            out.push(s);
        }
    }
    Ok(out)
}

/// Evaluates a node over `grid`.
///
/// Max-samples accounting mirrors upstream's `evaluator.currentSamples`: while a node runs, the outputs
/// of its already evaluated children are held (they are in [`QueryCtx::samples`]); its own output is
/// checked on top of them, and when it is done the children's outputs are released and only its output
/// stays held. Parentheses and unary operators are transparent (upstream evaluates them in place).
///
/// Without delayed name removal ([`EngineOptions::delayed_name_removal`] off, upstream's default), a node
/// that drops the metric name drops it (and `__type__`/`__unit__`) from its output right away, so its
/// parent sees the series without it (`drop_names_now`).
pub fn eval(ctx: &QueryCtx<'_>, expr: &Expr, grid: &Grid) -> Result<Val, EngineError> {
    if ctx.trace.is_some() && !matches!(expr, Expr::Paren(_)) {
        return eval_traced(ctx, expr, grid);
    }
    eval_untraced(ctx, expr, grid)
}

/// [`eval`] with the node's figures added to the trace (inclusive of its children's).
fn eval_traced(ctx: &QueryCtx<'_>, expr: &Expr, grid: &Grid) -> Result<Val, EngineError> {
    let load = |c: &AtomicUsize| c.load(Ordering::Relaxed) as u64;
    let (series0, chunks0, read0) = (load(&ctx.stats.series), load(&ctx.stats.chunks), load(&ctx.stats.read));
    let t0 = Instant::now();
    let v = eval_untraced(ctx, expr, grid)?;
    let duration = t0.elapsed();
    let series_out = match &v {
        Val::Vector(vs) => vs.len() as u64,
        Val::Matrix(ms) => ms.len() as u64,
        Val::Scalar(_) | Val::Str(_) => 1,
    };
    if let Some(t) = &ctx.trace {
        let mut t = t.lock();
        let r = t.records.entry(expr as *const Expr as usize).or_default();
        r.calls += 1;
        r.duration += duration;
        r.series_out += series_out;
        r.series_touched += load(&ctx.stats.series) - series0;
        r.chunks += load(&ctx.stats.chunks) - chunks0;
        r.samples_decoded += load(&ctx.stats.read) - read0;
    }
    Ok(v)
}

/// Notes in the trace that a pushed-down aggregation was evaluated centrally after all.
pub fn trace_fallback_agg(ctx: &QueryCtx<'_>, a: &crate::parser::AggregateExpr) {
    if let Some(t) = &ctx.trace {
        t.lock().fallbacks.insert(a as *const crate::parser::AggregateExpr as usize);
    }
}

fn eval_untraced(ctx: &QueryCtx<'_>, expr: &Expr, grid: &Grid) -> Result<Val, EngineError> {
    match expr {
        Expr::Paren(_) => eval_node(ctx, expr, grid),
        Expr::Unary(_) => drop_names_now(ctx, expr, eval_node(ctx, expr, grid)?),
        _ => {
            let base = ctx.held_samples();
            let slots_base = ctx.slots.load(Ordering::Relaxed);
            let v = drop_names_now(ctx, expr, eval_node(ctx, expr, grid)?)?;
            let out = v.held();
            ctx.check_samples(ctx.held_samples() + out)?;
            ctx.samples.store(base + out, Ordering::Relaxed);
            let out_slots = v.slots();
            ctx.check_slots(ctx.slots.load(Ordering::Relaxed) + out_slots)?;
            ctx.slots.store(slots_base + out_slots, Ordering::Relaxed);
            Ok(v)
        }
    }
}

/// Immediate `__name__` removal (upstream with `EnableDelayedNameRemoval` off: the `DropReserved` calls
/// where a function or operator sets `DropName`). Series that end up with the same labels are merged
/// when their steps do not overlap and are the duplicate-labelset error when they do; the output of a
/// function over a range vector may not contain the same labels twice at all (upstream checks
/// `ContainsSameLabelset` on that matrix).
fn drop_names_now(ctx: &QueryCtx<'_>, expr: &Expr, v: Val) -> Result<Val, EngineError> {
    if ctx.opts.delayed_name_removal {
        return Ok(v);
    }
    let Val::Vector(mut vs) = v else { return Ok(v) };
    if !vs.iter().any(|s| s.drop_name) {
        return Ok(Val::Vector(vs));
    }
    for s in &mut vs {
        if s.drop_name {
            s.labels = final_labels(std::mem::take(&mut s.labels), true);
            s.drop_name = false;
        }
    }
    let over_range = matches!(expr, Expr::Call(c) if c.args.iter().any(|a| matches!(a.unwrap_parens(), Expr::MatrixSelector(_) | Expr::Subquery(_))));
    if over_range {
        check_unique(vs.iter().map(|s| &s.labels))?;
        return Ok(Val::Vector(vs));
    }
    Ok(Val::Vector(merge_same_labels(vs)?))
}

fn eval_node(ctx: &QueryCtx<'_>, expr: &Expr, grid: &Grid) -> Result<Val, EngineError> {
    ctx.check()?;
    match expr {
        Expr::NumberLiteral(n) => Ok(Val::Scalar(vec![n.val; grid.n])),
        Expr::StringLiteral(s) => Ok(Val::Str(s.val.clone())),
        Expr::Paren(p) => eval(ctx, &p.expr, grid),
        Expr::Unary(u) => {
            let v = eval(ctx, &u.expr, grid)?;
            if u.op == UnaryOp::Pos {
                return Ok(v);
            }
            Ok(match v {
                Val::Scalar(s) => Val::Scalar(s.into_iter().map(|x| -x).collect()),
                Val::Vector(mut vs) => {
                    for s in &mut vs {
                        for x in s.vals.iter_mut().flatten() {
                            *x = -*x;
                        }
                        // Upstream negates a histogram with `Mul(-1)`.
                        if let Some(hs) = &mut s.hists {
                            for h in hs.iter_mut() {
                                if let Some(x) = h {
                                    let mut neg = (**x).clone();
                                    *h = super::hist::math::mul(&mut neg, -1.0).ok().map(|_| Arc::new(neg));
                                }
                            }
                        }
                        s.tidy();
                        s.drop_name = true;
                    }
                    vs.retain(|s| s.any_value());
                    Val::Vector(vs)
                }
                other => other,
            })
        }
        Expr::VectorSelector(vs) => Ok(Val::Vector(eval_vector_selector(ctx, vs, grid, false)?)),
        Expr::MatrixSelector(_) | Expr::Subquery(_) => Err(EngineError::Execution(
            "range vector cannot be evaluated here (only as a function argument or an instant query)".into(),
        )),
        Expr::Call(c) => functions::eval_call(ctx, c, grid),
        Expr::Aggregate(a) => super::aggregate::eval_aggregate(ctx, a, grid),
        Expr::Binary(b) => super::binop::eval_binary(ctx, b, grid),
    }
}

/// Evaluates to a scalar column (function and aggregation parameters).
pub fn eval_scalar(ctx: &QueryCtx<'_>, expr: &Expr, grid: &Grid) -> Result<Vec<f64>, EngineError> {
    match eval(ctx, expr, grid)? {
        Val::Scalar(s) => Ok(s),
        _ => Err(EngineError::Execution("expected scalar".into())),
    }
}

pub fn eval_vector(ctx: &QueryCtx<'_>, expr: &Expr, grid: &Grid) -> Result<Vec<Series>, EngineError> {
    match eval(ctx, expr, grid)? {
        Val::Vector(v) => Ok(v),
        Val::Scalar(_) => Err(EngineError::Execution("expected instant vector, got scalar".into())),
        _ => Err(EngineError::Execution("expected instant vector".into())),
    }
}

/// The time a selector or subquery with modifiers looks at for the step at `t` (upstream: the `@` value,
/// else the step time, minus the offset).
fn effective_times(ctx: &QueryCtx<'_>, at: Option<AtModifier>, offset_ms: i64, grid: &Grid) -> Vec<i64> {
    let at_ms = at.map(|a| match a {
        AtModifier::Timestamp(t) => t,
        AtModifier::Start => ctx.query_start_ms,
        AtModifier::End => ctx.query_end_ms,
    });
    // Saturating: `@` and `offset` are the client's (`@ 9.2e15 offset -1s`).
    (0..grid.n).map(|i| at_ms.unwrap_or_else(|| grid.t(i)).saturating_sub(offset_ms)).collect()
}

/// [`effective_times`] for sibling modules.
pub fn effective_times_pub(ctx: &QueryCtx<'_>, at: Option<AtModifier>, offset_ms: i64, grid: &Grid) -> Vec<i64> {
    effective_times(ctx, at, offset_ms, grid)
}

/// Selects the series of `vs` in `[mint, maxt]` in every shard in parallel, decodes each once, and maps it
/// with `f` (which sees the samples sorted by time, stale markers included). `f` returning `None` drops it.
/// `window`: for a range selector, the windows' ends and length (see [`select_map_st`]).
/// `slots_each`: the value slots `f` allocates for a series (the steps of an instant-vector output, 0
/// for a range vector's samples), reserved before `f` runs (see [`QueryCtx::check_slots`]).
#[allow(clippy::too_many_arguments)]
pub fn select_map<T: Send + Held>(
    ctx: &QueryCtx<'_>,
    vs: &VectorSelector,
    mint: i64,
    maxt: i64,
    hints: SelectHints,
    window: Option<(&[i64], i64)>,
    slots_each: usize,
    f: impl Fn(&Labels, &[Sample]) -> Option<T> + Sync,
) -> Result<Vec<T>, EngineError> {
    select_map_st(ctx, vs, mint, maxt, hints, Decode::default(), window, slots_each, |l, s, _, _| f(l, s))
}

/// [`select_map`] whose `f` also sees the series' histogram samples (sorted by time, stale markers
/// included; empty for a float-only series).
#[allow(clippy::too_many_arguments)]
pub fn select_map_h<T: Send + Held>(
    ctx: &QueryCtx<'_>,
    vs: &VectorSelector,
    mint: i64,
    maxt: i64,
    hints: SelectHints,
    window: Option<(&[i64], i64)>,
    slots_each: usize,
    f: impl Fn(&Labels, &[Sample], &[HPoint]) -> Option<T> + Sync,
) -> Result<Vec<T>, EngineError> {
    select_map_st(ctx, vs, mint, maxt, hints, Decode::default(), window, slots_each, |l, s, _, h| f(l, s, h))
}

/// What a selection hands its consumer besides each series' float samples, and in what form.
#[derive(Clone, Copy, Debug, Default)]
pub struct Decode {
    /// The start-timestamp columns (see [`select_map_st`]).
    pub want_st: bool,
    /// Float stale markers removed first (with their start timestamps), as range functions want them
    /// (upstream's `matrixIterSlice` skips them). A long series decoded chunk-parallel comes with the
    /// answer to "are there any" (see [`decode_floats_parallel`], mostly without a scan); other series
    /// are scanned ([`has_stale`]) before anything is moved.
    pub drop_stale: bool,
    /// `Some(lo)`: the consumer needs, at each of its times (all at or after `lo`), only the latest
    /// sample at or before it (an instant selector: upstream `vectorSelectorSingle` seeks to each step),
    /// so the samples before the latest one at or before `lo` are not needed, nor are the chunks that
    /// hold only such samples. Chunks are sorted and do not overlap (the read contract): decoding starts
    /// at the newest chunk that begins at or before `lo` (for an instant query, the newest chunk
    /// overlapping the window), with a fallback to the whole series (see [`decode_latest`]). Not for a
    /// selector whose histograms' reset hints are derived from the sample before (`histogram_count`
    /// and kin).
    pub latest_from: Option<i64>,
}

/// [`select_map`] that can also decode the start-timestamp columns: with `dec.want_st`, `f` gets one start
/// timestamp per float sample and one per histogram sample (0: unknown), each slice empty when the
/// series has none of that kind in the range; without it the columns are never decoded and both slices
/// are always empty (the hot path stays a plain XOR or histogram decode).
///
/// Max samples, as upstream counts them: the outputs produced so far ([`Held`]) are held, and a range
/// selector (`window` = the steps' window ends and the range) holds one series' largest window while it
/// is evaluated (upstream `matrixIterSlice` keeps one window of one series), not everything decoded.
#[allow(clippy::too_many_arguments)]
pub fn select_map_st<T: Send + Held>(
    ctx: &QueryCtx<'_>,
    vs: &VectorSelector,
    mint: i64,
    maxt: i64,
    hints: SelectHints,
    dec: Decode,
    window: Option<(&[i64], i64)>,
    slots_each: usize,
    f: impl Fn(&Labels, &[Sample], StartTimestamps<'_>, &[HPoint]) -> Option<T> + Sync,
) -> Result<Vec<T>, EngineError> {
    Ok(select_map_runs(ctx, vs, mint, maxt, hints, dec, window, slots_each, f)?.into_iter().flatten().collect())
}

/// Merges runs each sorted by `labels` (disjoint, as shards' series are) into one sorted vector, pairwise:
/// [`select_map_runs`]' outputs, when they carry their series' labels unchanged, in label order without
/// sorting them again (a sort scans each run before merging: twice the label comparisons).
pub(crate) fn merge_runs<T>(mut runs: Vec<Vec<T>>, labels: impl Fn(&T) -> &Labels) -> Vec<T> {
    runs.retain(|r| !r.is_empty());
    debug_assert!(runs.iter().all(|r| r.windows(2).all(|w| labels(&w[0]) < labels(&w[1]))), "a shard's series out of label order");
    while runs.len() > 1 {
        let mut next = Vec::with_capacity(runs.len().div_ceil(2));
        let mut it = runs.into_iter();
        while let Some(a) = it.next() {
            let Some(b) = it.next() else {
                next.push(a);
                break;
            };
            let mut out = Vec::with_capacity(a.len() + b.len());
            let (mut a, mut b) = (a.into_iter().peekable(), b.into_iter().peekable());
            while let (Some(x), Some(y)) = (a.peek(), b.peek()) {
                // Ties (none between shards) keep `a` first, as a stable sort would.
                let from_b = labels(y) < labels(x);
                out.extend(if from_b { b.next() } else { a.next() });
            }
            out.extend(a);
            out.extend(b);
            next.push(out);
        }
        runs = next;
    }
    runs.pop().unwrap_or_default()
}

/// The per-shard work of [`select_map_st`]: each shard's outputs, in the shard's series order (label
/// order, as `Querier::select_shard` gives them; see [`merge_runs`]).
#[allow(clippy::too_many_arguments)]
pub(crate) fn select_map_runs<T: Send + Held>(
    ctx: &QueryCtx<'_>,
    vs: &VectorSelector,
    mint: i64,
    maxt: i64,
    hints: SelectHints,
    dec: Decode,
    window: Option<(&[i64], i64)>,
    slots_each: usize,
    f: impl Fn(&Labels, &[Sample], StartTimestamps<'_>, &[HPoint]) -> Option<T> + Sync,
) -> Result<Vec<Vec<T>>, EngineError> {
    let q = ctx.queryable.querier(mint, maxt).map_err(|e| EngineError::Storage(e.to_string()))?;
    let shards = q.shard_count();
    let stats_hints = ctx.stats_selectors.contains(&(vs as *const VectorSelector as usize));
    let base = ctx.held_samples();
    let slots_base = ctx.slots.load(Ordering::Relaxed);
    // Series without a sample in range are skipped below: the storage need not decode to find them.
    let hints = SelectHints { unchecked_range: true, ..hints };
    // Outputs of this selection so far, over all shards.
    let kept = AtomicUsize::new(0);
    let kept_slots = AtomicUsize::new(0);
    let per_shard: Vec<Result<Vec<T>, EngineError>> = (0..shards)
        .into_par_iter()
        .map(|shard| {
            let set = q.select_shard(shard, &vs.matchers, &hints).map_err(|e| EngineError::Storage(e.to_string()))?;
            let mut pooled = PooledSamples::take();
            let buf = &mut pooled.0;
            let mut sts: Vec<i64> = Vec::new();
            let mut hbuf: Vec<HPoint> = Vec::new();
            let mut hsts: Vec<i64> = Vec::new();
            let mut out = Vec::new();
            let mut checks = SeriesChecks::due();
            for s in set {
                // The previous series' samples and steps: one series can take long over a long or fine grid.
                ctx.check_series(&mut checks, buf.len() + slots_each)?;
                let s = s.map_err(|e| EngineError::Storage(e.to_string()))?;
                let bufs = DecodeBufs { samples: buf, sts: &mut sts, hists: &mut hbuf, hsts: &mut hsts };
                // A histogram-statistics selector derives each sample's reset hint from the one before
                // (see `derive_stats_hints`), which an older chunk may hold: decoded whole.
                let stale = if let Some(from) = dec.latest_from.filter(|_| !dec.want_st && !stats_hints) {
                    decode_latest(&s.chunks, mint, maxt, from, decode_limit(ctx), bufs)?
                } else {
                    decode_series_st(&s.chunks, mint, maxt, dec.want_st, decode_limit(ctx), bufs)?
                };
                if buf.is_empty() && hbuf.is_empty() {
                    // No sample in range: not there (see `SelectHints::unchecked_range`).
                    continue;
                }
                ctx.stats.read.fetch_add(buf.len() + hbuf.len(), Ordering::Relaxed);
                if ctx.trace.is_some() {
                    ctx.stats.series.fetch_add(1, Ordering::Relaxed);
                    ctx.stats.chunks.fetch_add(s.chunks.len(), Ordering::Relaxed);
                }
                if !hbuf.is_empty() && stats_hints {
                    super::hist::derive_stats_hints(&mut hbuf);
                }
                let held = base + kept.load(Ordering::Relaxed);
                if let Some((eff, range)) = window {
                    // A window never holds more than the series has; only look closer near the limit.
                    if hbuf.is_empty() {
                        if held + buf.len() > ctx.opts.max_samples {
                            ctx.check_samples(held + max_window(buf, eff, range))?;
                        }
                    } else {
                        ctx.check_samples(held + max_window_mixed(buf, &hbuf, eff, range))?;
                    }
                }
                // Reserve the slots `f` is about to allocate, so no shard allocates past the bound.
                ctx.check_slots(slots_base + kept_slots.fetch_add(slots_each, Ordering::Relaxed) + slots_each)?;
                if dec.drop_stale {
                    remove_stale(buf, &mut sts, stale);
                }
                match f(&s.labels, buf, StartTimestamps { floats: &sts, histograms: &hsts }, &hbuf) {
                    Some(r) => {
                        let n = r.held();
                        ctx.check_samples(base + kept.fetch_add(n, Ordering::Relaxed) + n)?;
                        // A range vector's samples are counted once they exist.
                        let extra = r.slots().saturating_sub(slots_each);
                        ctx.check_slots(slots_base + kept_slots.fetch_add(extra, Ordering::Relaxed) + extra)?;
                        out.push(r);
                    }
                    None => {
                        kept_slots.fetch_sub(slots_each, Ordering::Relaxed);
                    }
                }
            }
            Ok(out)
        })
        .collect();
    per_shard.into_iter().collect()
}

/// The most non-stale samples any step's window `(eff - range, eff]` holds.
fn max_window(samples: &[Sample], eff: &[i64], range: i64) -> usize {
    let clean: Vec<Sample>;
    let s = if samples.iter().any(|s| is_stale_nan(s.v)) {
        clean = samples.iter().copied().filter(|s| !is_stale_nan(s.v)).collect();
        &clean[..]
    } else {
        samples
    };
    let mut m = 0;
    for_each_window_idx(s, eff, range, |lo, hi, _| m = m.max(hi - lo));
    m
}

/// [`max_window`] for a series with histograms: per step, the window's floats plus its histograms'
/// sizes ([`hist_size`], as upstream counts them), the most of any step.
fn max_window_mixed(samples: &[Sample], hists: &[HPoint], eff: &[i64], range: i64) -> usize {
    let floats: Vec<Sample> = samples.iter().copied().filter(|s| !is_stale_nan(s.v)).collect();
    let hs: Vec<&HPoint> = hists.iter().filter(|p| !p.h.is_stale()).collect();
    // Prefix sums of the histograms' sizes.
    let mut prefix = Vec::with_capacity(hs.len() + 1);
    prefix.push(0usize);
    for p in &hs {
        prefix.push(prefix[prefix.len() - 1] + hist_size(&p.h));
    }
    let mut fw = vec![0usize; eff.len()];
    for_each_window_idx(&floats, eff, range, |lo, hi, i| fw[i] = hi - lo);
    let mut m = 0;
    for_each_window_idx_by(hs.len(), |j| hs[j].t, eff, range, |lo, hi, i| m = m.max(fw[i] + prefix[hi] - prefix[lo]));
    m
}

/// How many samples one series' decode buffer may hold: the sample limit, but never below 1 Mi samples
/// (16 MiB), since an instant selector's buffer is not held as output (upstream walks it without
/// holding it) and a small limit must not refuse a lookback window.
fn decode_limit(ctx: &QueryCtx<'_>) -> usize {
    ctx.opts.max_samples.max(1 << 20)
}

/// Decodes a series' samples in `[mint, maxt]` into `buf`, replacing what it held (and its start
/// timestamps into `sts`: left empty when every one is 0, so that consumers can tell "no start
/// timestamps" by an empty slice), chunk by chunk, failing as soon as more than `limit` samples are buffered: a range selector over a long range
/// (`m[10000d]`) holds at most the query's sample limit (plus one chunk) before it is refused.
#[allow(clippy::too_many_arguments)]
fn decode_series(
    chunks: &[tessera_model::ChunkRef],
    mint: i64,
    maxt: i64,
    want_st: bool,
    limit: usize,
    buf: &mut Vec<Sample>,
    sts: &mut Vec<i64>,
    hbuf: &mut Vec<HPoint>,
) -> Result<Option<bool>, EngineError> {
    let mut hsts = Vec::new();
    decode_series_st(chunks, mint, maxt, want_st, limit, DecodeBufs { samples: buf, sts, hists: hbuf, hsts: &mut hsts })
}

/// The buffers [`decode_series_st`] fills: float samples and their start timestamps, histogram samples
/// and theirs.
struct DecodeBufs<'a> {
    samples: &'a mut Vec<Sample>,
    sts: &'a mut Vec<i64>,
    hists: &'a mut Vec<HPoint>,
    hsts: &'a mut Vec<i64>,
}

/// [`decode_series`] that also decodes the start timestamps of histogram samples: with `want_st`,
/// `hsts` gets them aligned with the histogram samples when some chunk is a HistogramSt or
/// FloatHistogramSt one (and is left empty when every one is 0), as `sts` gets the float samples'
/// (upstream `matrixIterSlice` appends `AtST()` for either kind). Without `want_st` the ST chunks are
/// read through their plain prefix and the columns are never decoded.
///
/// `Some(stale)` when the decoding found out whether the float samples hold a stale marker (the
/// chunk-parallel path always does: from Dense symbol tables, or a scan of each other chunk while in
/// cache), `None` when it did not look (the sequential path).
fn decode_series_st(
    chunks: &[tessera_model::ChunkRef],
    mint: i64,
    maxt: i64,
    want_st: bool,
    limit: usize,
    bufs: DecodeBufs<'_>,
) -> Result<Option<bool>, EngineError> {
    let DecodeBufs { samples: buf, sts, hists: hbuf, hsts } = bufs;
    sts.clear();
    hbuf.clear();
    hsts.clear();
    if !want_st && chunks.len() >= PAR_MIN_CHUNKS && nested_parallelism() {
        let live: Vec<&tessera_model::ChunkRef> =
            chunks.iter().filter(|c| c.maxt_ms >= mint && c.mint_ms <= maxt).collect();
        if live.len() >= PAR_MIN_CHUNKS
            && live.iter().all(|c| !c.encoding.is_histogram())
            && let Some(stale) = decode_floats_parallel(&live, mint, maxt, limit, buf)?
        {
            return Ok(Some(stale));
        }
    }
    buf.clear();
    let with_st = want_st && chunks.iter().any(|c| c.encoding == tessera_model::ChunkEncoding::XorSt);
    let with_hst = want_st && chunks.iter().any(|c| is_histogram_st(c.encoding));
    for c in chunks {
        if c.encoding.is_histogram() {
            decode_histogram_chunk(c, mint, maxt, hbuf, with_hst.then_some(&mut *hsts))?;
            if buf.len() + hbuf.len() > limit {
                return Err(EngineError::TooManySamples("query execution".into()));
            }
            continue;
        }
        if with_st {
            decode_chunk_st(c, mint, maxt, buf, sts)?;
        } else {
            tessera_encoding::decode_chunk_range_into(c, mint, maxt, buf)
                .map_err(|e| EngineError::Storage(e.to_string()))?;
        }
        if buf.len() > limit {
            return Err(EngineError::TooManySamples("query execution".into()));
        }
    }
    if with_st && sts.iter().all(|t| *t == 0) {
        sts.clear();
    }
    if with_hst && hsts.iter().all(|t| *t == 0) {
        hsts.clear();
    }
    Ok(None)
}

/// [`decode_series_st`] for a consumer that needs, at times at or after `from`, only the latest sample
/// at or before each ([`Decode::latest_from`]): the chunks overlapping `[mint, maxt]` from the newest one
/// that begins at or before `from`. At an instant query's time the window often spans a closed chunk and
/// the newest one, whose last sample is all that counts; a dashboard's newest steps likewise. The whole
/// series is decoded as before ([`decode_series_st`]) when that chunk is the first overlapping one, when
/// 16 or more chunks remain from it, or when the first sample read comes after `from` (a chunk whose
/// bounds are wider than its samples, or a window with no sample in the newest chunks): older chunks
/// might then hold the one needed. Otherwise older chunks are not read: a corrupt one is not reported
/// and the decoded-sample statistics count only what was read (upstream's seek skips them likewise),
/// and the decode limit applies to the chunks read.
fn decode_latest(
    chunks: &[tessera_model::ChunkRef],
    mint: i64,
    maxt: i64,
    from: i64,
    limit: usize,
    bufs: DecodeBufs<'_>,
) -> Result<Option<bool>, EngineError> {
    let live = |c: &tessera_model::ChunkRef| c.maxt_ms >= mint && c.mint_ms <= maxt;
    let first = chunks.iter().position(live);
    let start = chunks.iter().rposition(|c| live(c) && c.mint_ms <= from);
    let start = match (first, start) {
        (Some(f), Some(s)) if s > f && chunks[s..].iter().filter(|c| live(c)).count() < PAR_MIN_CHUNKS => s,
        _ => return decode_series_st(chunks, mint, maxt, false, limit, bufs),
    };
    let DecodeBufs { samples: buf, sts, hists: hbuf, hsts } = bufs;
    // Fewer than 16 chunks overlap the range from `start`: the plain loop (never chunk-parallel).
    let stale = decode_series_st(&chunks[start..], mint, maxt, false, limit, DecodeBufs { samples: buf, sts, hists: hbuf, hsts })?;
    let first = buf.first().map(|s| s.t).into_iter().chain(hbuf.first().map(|p| p.t)).min();
    if first.is_none_or(|t| t > from) {
        return decode_series_st(chunks, mint, maxt, false, limit, DecodeBufs { samples: buf, sts, hists: hbuf, hsts });
    }
    Ok(stale)
}

/// Removes the float stale markers from `buf` and the aligned `sts` (empty `sts` stays empty), in
/// place; `known`: whether there are any, when the decoding found out (see [`decode_series_st`]).
fn remove_stale(buf: &mut Vec<Sample>, sts: &mut Vec<i64>, known: Option<bool>) {
    if !known.unwrap_or_else(|| has_stale(buf)) {
        return;
    }
    if sts.is_empty() {
        buf.retain(|s| !is_stale_nan(s.v));
        return;
    }
    let mut k = 0;
    for i in 0..buf.len() {
        if !is_stale_nan(buf[i].v) {
            buf[k] = buf[i];
            sts[k] = sts[i];
            k += 1;
        }
    }
    buf.truncate(k);
    sts.truncate(k);
}

/// A series with at least this many float chunks in range is decoded chunk-parallel.
const PAR_MIN_CHUNKS: usize = 16;
/// Work below the shard for one big series (B1's average over 1 M points of one series, a long range
/// over a few series): its float chunks are decoded on rayon's pool, in parallel, each straight into its
/// own slice of the series' buffer, so that both cores work even when one series is all there is. The
/// same samples as the sequential loop (a test holds them equal), and the same limit.
///
/// The slices are laid out from the chunks' sample counts: a chunk wholly inside `[mint, maxt]` yields
/// exactly the count its header claims, and the few that are not wholly inside (a window's first and
/// last) are decoded first, on their own. Should a chunk yield another count (a corrupt one), or the
/// counts claimed exceed `limit`, `None` is returned (the buffer cleared, or not yet touched): the caller
/// clears it and decodes the series the plain way, which reports what it finds as it always did. On an
/// `Err` the buffer's contents are unspecified. Otherwise `Some`: whether the samples hold a stale marker. Each Dense chunk is then decoded straight into its slice, any other through
/// a per-thread scratch buffer and a copy: two parallel steps in all (the buffer's growth and the
/// decoding), no allocation per chunk. (Decoding into a fresh vector per chunk and appending them in
/// order on one thread, as first written, spent half of B1's query in the allocator, page faults and
/// the copy; the scratch copy, ~10% of its CPU.)
fn decode_floats_parallel(
    live: &[&tessera_model::ChunkRef],
    mint: i64,
    maxt: i64,
    limit: usize,
    buf: &mut Vec<Sample>,
) -> Result<Option<bool>, EngineError> {
    use rayon::prelude::*;
    let storage = |e: tessera_encoding::ChunkError| EngineError::Storage(e.to_string());
    let mut sizes = Vec::with_capacity(live.len());
    let mut edges: Vec<Option<Vec<Sample>>> = Vec::with_capacity(live.len());
    let mut total = 0usize;
    for c in live {
        let claimed = (c.mint_ms >= mint && c.maxt_ms <= maxt).then(|| tessera_encoding::chunk_sample_count(c)).flatten();
        let n = match claimed {
            Some(n) => {
                edges.push(None);
                n
            }
            None => {
                let mut v = Vec::new();
                tessera_encoding::decode_chunk_range_into(c, mint, maxt, &mut v).map_err(storage)?;
                let n = v.len();
                edges.push(Some(v));
                n
            }
        };
        sizes.push(n);
        // Over the limit as the headers claim it: the plain loop decides (it decodes chunk by chunk and
        // stops at the limit), so nothing is allocated for counts no chunk has shown yet.
        match total.checked_add(n).filter(|&t| t <= limit) {
            Some(t) => total = t,
            None => return Ok(None),
        }
    }
    // Whatever `buf` holds is overwritten, not cleared first: a pooled buffer keeps its length from the
    // last series (see [`PooledSamples`]), so the space already written is not zeroed again. Beyond it,
    // grown on the pool: an indexed `par_extend` writes straight into the new space, and the first touch
    // of fresh pages is shared by both cores.
    if buf.len() >= total {
        buf.truncate(total);
    } else {
        let more = total - buf.len();
        buf.par_extend(rayon::iter::repeat_n(Sample { t: 0, v: 0.0 }, more));
    }
    let mut rest = &mut buf[..];
    let mut dsts = Vec::with_capacity(live.len());
    for &n in &sizes {
        let (d, r) = std::mem::take(&mut rest).split_at_mut(n);
        dsts.push(d);
        rest = r;
    }
    // Each chunk also tells whether it holds a stale marker, looked for while its samples are in cache
    // (or known from a Dense chunk's symbol table without looking).
    let res = dsts.into_par_iter().zip(live.par_iter().zip(edges.par_iter())).map(|(d, (c, edge))| {
        if let Some(v) = edge {
            d.copy_from_slice(v);
            return Ok(scan_stale(v));
        }
        // Dense chunks (the blocks' default) straight into their slice, the others through a scratch.
        // Any surprise (an error, another count) leaves it to the plain loop, which reports it.
        match tessera_encoding::decode_chunk_range_into_slice(c, mint, maxt, d) {
            Ok(Some(r)) if r.len == d.len() => return Ok(!r.finite && scan_stale(d)),
            Ok(Some(_)) | Err(_) => return Err(None),
            Ok(None) => {}
        }
        DECODE_SCRATCH.with_borrow_mut(|scratch| {
            scratch.clear();
            tessera_encoding::decode_chunk_range_into(c, mint, maxt, scratch).map_err(|e| Some(storage(e)))?;
            if scratch.len() != d.len() {
                return Err(None);
            }
            d.copy_from_slice(scratch);
            let stale = scan_stale(scratch);
            if scratch.capacity() > 1 << 16 {
                // A huge chunk (up to 2^20 samples): not kept for every later chunk.
                *scratch = Vec::new();
            }
            Ok(stale)
        })
    });
    match res.try_reduce(|| false, |a, b| Ok(a || b)) {
        Ok(stale) => Ok(Some(stale)),
        Err(e) => {
            buf.clear();
            e.map_or(Ok(None), Err)
        }
    }
}

/// Most samples a pooled decode buffer keeps room for (32 MiB): a bigger one is freed after its query.
const MAX_POOLED_SAMPLES: usize = 1 << 21;

/// A shard's series buffer, taken from its thread's pool and given back when dropped, so that the next
/// query's series decode into memory already mapped. A fresh 16 MB buffer per query cost B1's one-series
/// query ~1.6 ms in page faults, 20% of it; a pool thread keeps at most one buffer, of at most
/// [`MAX_POOLED_SAMPLES`] samples. It keeps its length too (its samples are stale, never read: every
/// decode replaces them), so that the parallel decode overwrites what is there instead of zeroing it
/// again (~0.25 ms of B1's query).
struct PooledSamples(Vec<Sample>);

impl PooledSamples {
    fn take() -> Self {
        PooledSamples(SAMPLE_POOL.with_borrow_mut(std::mem::take))
    }
}

impl Drop for PooledSamples {
    fn drop(&mut self) {
        let b = std::mem::take(&mut self.0);
        if b.capacity() <= MAX_POOLED_SAMPLES {
            // A nested take on this thread (rayon runs other shards' work while waiting) may have
            // given one back already: keep the larger.
            SAMPLE_POOL.with_borrow_mut(|p| {
                if p.capacity() < b.capacity() {
                    *p = b;
                }
            });
        }
    }
}

thread_local! {
    static SAMPLE_POOL: std::cell::RefCell<Vec<Sample>> = const { std::cell::RefCell::new(Vec::new()) };
    /// One chunk's samples on their way into [`decode_floats_parallel`]'s buffer.
    static DECODE_SCRATCH: std::cell::RefCell<Vec<Sample>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Whether a chunk encoding carries the start timestamps of histogram samples.
fn is_histogram_st(e: tessera_model::ChunkEncoding) -> bool {
    matches!(e, tessera_model::ChunkEncoding::HistogramSt | tessera_model::ChunkEncoding::FloatHistogramSt)
}

/// Appends a histogram chunk's samples in `[mint, maxt]` to `out` as float histograms (integer ones
/// converted with `to_float`, as upstream's iterators hand them to PromQL via `AtFloatHistogram`). A stale
/// marker stays in (its sum is the stale NaN); the readers drop it.
///
/// With `sts` (kept aligned with `out`), the start timestamps of the appended samples go there: an
/// ST chunk's column, 0 for a plain chunk. Without it, an ST chunk is read through its leading plain
/// chunk and its column is never touched.
fn decode_histogram_chunk(
    c: &tessera_model::ChunkRef,
    mint: i64,
    maxt: i64,
    out: &mut Vec<HPoint>,
    sts: Option<&mut Vec<i64>>,
) -> Result<(), EngineError> {
    if mint > maxt || c.maxt_ms < mint || c.mint_ms > maxt {
        return Ok(());
    }
    let err = |e: tessera_encoding::ChunkError| EngineError::Storage(e.to_string());
    if let Some(sts) = sts {
        debug_assert_eq!(sts.len(), out.len(), "start timestamps aligned with the histogram samples");
        if is_histogram_st(c.encoding) {
            let mut col = Vec::new();
            let in_range = |t: i64| t >= mint && t <= maxt;
            if c.encoding == tessera_model::ChunkEncoding::HistogramSt {
                let mut v = Vec::new();
                tessera_encoding::decode_histogram_st_into(&c.data, &mut v, &mut col).map_err(err)?;
                for ((t, h), st) in v.into_iter().zip(col).filter(|((t, _), _)| in_range(*t)) {
                    out.push(HPoint { t, h: Arc::new(h.to_float()) });
                    sts.push(st);
                }
            } else {
                let mut v = Vec::new();
                tessera_encoding::decode_float_histogram_st_into(&c.data, &mut v, &mut col).map_err(err)?;
                for ((t, h), st) in v.into_iter().zip(col).filter(|((t, _), _)| in_range(*t)) {
                    out.push(HPoint { t, h: Arc::new(h) });
                    sts.push(st);
                }
            }
            return Ok(());
        }
        decode_histogram_chunk(c, mint, maxt, out, None)?;
        sts.resize(out.len(), 0);
        return Ok(());
    }
    // Without start timestamps, ST histogram chunks are read through their leading plain chunk.
    let plain = tessera_encoding::prometheus_histogram_chunk(c).map_err(err)?;
    let c = plain.as_ref().unwrap_or(c);
    if c.encoding == tessera_model::ChunkEncoding::Histogram {
        let mut it = tessera_encoding::HistogramIter::new(&c.data);
        while let Some((t, h)) = it.next_histogram().map_err(err)? {
            if t > maxt {
                break;
            }
            if t >= mint {
                out.push(HPoint { t, h: Arc::new(h.to_float()) });
            }
        }
    } else {
        let mut it = tessera_encoding::FloatHistogramIter::new(&c.data);
        while let Some((t, h)) = it.next_histogram().map_err(err)? {
            if t > maxt {
                break;
            }
            if t >= mint {
                out.push(HPoint { t, h: Arc::new(h) });
            }
        }
    }
    Ok(())
}

/// One chunk with its start-timestamp column (0 for encodings without one).
fn decode_chunk_st(
    c: &tessera_model::ChunkRef,
    mint: i64,
    maxt: i64,
    buf: &mut Vec<Sample>,
    sts: &mut Vec<i64>,
) -> Result<(), EngineError> {
    tessera_encoding::decode_chunk_range_st_into(c, mint, maxt, buf, sts).map_err(|e| EngineError::Storage(e.to_string()))
}

/// Stale markers removed from the histogram samples `hists` and the aligned `sts` (empty `sts` stays
/// empty).
pub fn drop_stale_histograms(hists: &[HPoint], sts: &[i64]) -> (Vec<HPoint>, Vec<i64>) {
    let mut out = Vec::with_capacity(hists.len());
    let mut out_st = Vec::with_capacity(sts.len());
    for (i, p) in hists.iter().enumerate() {
        if !p.h.is_stale() {
            out.push(p.clone());
            if !sts.is_empty() {
                out_st.push(sts[i]);
            }
        }
    }
    (out, out_st)
}

/// An instant vector selector: for each step, the latest sample in `(t - lookback, t]` unless it is a stale
/// marker (upstream `vectorSelectorSingle`). With `timestamps`, the value is the sample's timestamp in
/// seconds (what `timestamp(selector)` returns).
pub fn eval_vector_selector(
    ctx: &QueryCtx<'_>,
    vs: &VectorSelector,
    grid: &Grid,
    timestamps: bool,
) -> Result<Vec<Series>, EngineError> {
    let eff = effective_times(ctx, vs.at, vs.original_offset_ms, grid);
    let lb = ctx.lookback_ms;
    let (lo, hi) = (eff.iter().copied().min().unwrap_or(0), eff.iter().copied().max().unwrap_or(0));
    let hints = SelectHints { step_ms: grid.step, ..Default::default() };
    let n = grid.n;
    if vs.smoothed {
        return eval_smoothed_selector(ctx, vs, &eff, lb, hints, n);
    }
    if let Some(r) = ctx.tier_ms
        && let Some(v) = super::tier::vector_selector(ctx, r, vs, grid, timestamps)?
    {
        return Ok(v);
    }
    // Each step needs only the latest sample at or before it.
    let dec = Decode { latest_from: Some(lo), ..Decode::default() };
    let runs = select_map_runs(ctx, vs, lo.saturating_sub(lb) + 1, hi, hints, dec, None, n, |labels, samples, _, hs| {
        let mut vals = vec![None; n];
        if hs.is_empty() {
            let any = lookback_values(samples, &eff, lb, timestamps, &mut vals);
            if any {
                ctx.count_queryable(vals.iter().filter(|v| v.is_some()).count());
            }
            return any.then(|| Series { labels: labels.clone(), vals, hists: None, drop_name: false });
        }
        let mut hvals: HistCol = vec![None; n];
        let any = lookback_mixed(samples, hs, &eff, lb, timestamps, &mut vals, &mut hvals);
        if !any {
            return None;
        }
        ctx.count_queryable(
            vals.iter().filter(|v| v.is_some()).count() + hvals.iter().flatten().map(|h| hist_size(h)).sum::<usize>(),
        );
        let mut s = Series { labels: labels.clone(), vals, hists: Some(hvals), drop_name: false };
        s.tidy();
        Some(s)
    })?;
    // In the storage's label order, as upstream's series sets.
    Ok(merge_runs(runs, |s: &Series| &s.labels))
}

/// `start_timestamp(selector)` with start timestamps on (upstream `rangeEvalTimestampFunctionOverVectorSelector`
/// with `propagateSTs`, then `funcStartTimestamp`): per step, the start timestamp in seconds of the sample
/// the lookback picks, float or histogram (`vectorSelectorSingle` returns `AtST()` for either; 0 when
/// that sample has none).
pub fn eval_start_timestamp_selector(
    ctx: &QueryCtx<'_>,
    vs: &VectorSelector,
    grid: &Grid,
) -> Result<Vec<Series>, EngineError> {
    let eff = effective_times(ctx, vs.at, vs.original_offset_ms, grid);
    let lb = ctx.lookback_ms;
    let (lo, hi) = (eff.iter().copied().min().unwrap_or(0), eff.iter().copied().max().unwrap_or(0));
    let hints = SelectHints { step_ms: grid.step, ..Default::default() };
    let n = grid.n;
    let runs = select_map_runs(ctx, vs, lo.saturating_sub(lb) + 1, hi, hints, Decode { want_st: true, ..Decode::default() }, None, n, |labels, samples, sts, hs| {
        let mut vals = vec![None; n];
        let secs = |sts: &[i64], j: usize| Some(sts.get(j).copied().unwrap_or(0) as f64 / 1000.0);
        let any = if hs.is_empty() {
            for_each_lookback(samples, &eff, lb, |i, j| vals[i] = secs(sts.floats, j))
        } else {
            for_each_lookback_mixed(samples, hs, &eff, lb, |i, picked| {
                vals[i] = match picked {
                    Picked::Float(j) => secs(sts.floats, j),
                    Picked::Histogram(k) => secs(sts.histograms, k),
                }
            })
        };
        any.then(|| Series { hists: None, labels: labels.clone(), vals, drop_name: true })
    })?;
    Ok(merge_runs(runs, |s: &Series| &s.labels))
}

/// `metric smoothed`: the value at each step interpolated between the samples around it (within the
/// lookback delta on both sides), or the nearer one when only one side has a sample.
fn eval_smoothed_selector(
    ctx: &QueryCtx<'_>,
    vs: &VectorSelector,
    eff: &[i64],
    lb: i64,
    hints: SelectHints,
    n: usize,
) -> Result<Vec<Series>, EngineError> {
    let (lo, hi) = (eff.iter().copied().min().unwrap_or(0), eff.iter().copied().max().unwrap_or(0));
    let mut out = select_map_h(ctx, vs, lo.saturating_sub(lb) + 1, hi.saturating_add(lb), hints, None, n, |labels, samples, hs| {
        let samples: Vec<Sample> = samples.iter().copied().filter(|s| !is_stale_nan(s.v)).collect();
        if !hs.is_empty() {
            return smoothed_with_histograms(ctx, labels, &samples, hs, eff, lb);
        }
        let mut vals = vec![None; n];
        let mut any = false;
        for (i, &e) in eff.iter().enumerate() {
            let j = samples.partition_point(|s| s.t <= e);
            let before = (j > 0).then(|| samples[j - 1]).filter(|s| s.t > e - lb);
            let after = samples.get(j).copied().filter(|s| s.t <= e + lb);
            let v = match (before, after) {
                (Some(b), _) if b.t == e => Some(b.v),
                (Some(b), Some(a)) => Some(b.v + (a.v - b.v) * (e - b.t) as f64 / (a.t - b.t) as f64),
                (Some(b), None) => Some(b.v),
                (None, Some(a)) => Some(a.v),
                (None, None) => None,
            };
            if v.is_some() {
                vals[i] = v;
                any = true;
            }
        }
        any.then(|| Series { hists: None, labels: labels.clone(), vals, drop_name: false })
    })?;
    out.sort_by(|a, b| a.labels.cmp(&b.labels));
    Ok(out)
}

/// [`eval_smoothed_selector`] for a series holding histograms (upstream `smoothSeries`): per step, the
/// samples within the lookback on both sides; a mix of floats and histograms there is dropped with a
/// warning, histograms are picked or interpolated by [`super::hist::smoothed_histogram`].
fn smoothed_with_histograms(
    ctx: &QueryCtx<'_>,
    labels: &Labels,
    samples: &[Sample],
    hs: &[HPoint],
    eff: &[i64],
    lb: i64,
) -> Option<Series> {
    let n = eff.len();
    let hs: Vec<HPoint> = hs.iter().filter(|p| !p.h.is_stale()).cloned().collect();
    let metric = labels.metric_name();
    let mut vals: Vec<Option<f64>> = vec![None; n];
    let mut hv: HistCol = vec![None; n];
    for (i, &e) in eff.iter().enumerate() {
        let f0 = samples.partition_point(|s| s.t <= e - lb);
        let f1 = samples.partition_point(|s| s.t <= e + lb);
        let h0 = hs.partition_point(|p| p.t <= e - lb);
        let h1 = hs.partition_point(|p| p.t <= e + lb);
        let (f, h) = (&samples[f0..f1], &hs[h0..h1]);
        match (f.is_empty(), h.is_empty()) {
            (true, true) => {}
            (false, false) => ctx.warn(super::hist::mixed_floats_histograms_warning(metric)),
            (true, false) => hv[i] = super::hist::smoothed_histogram(ctx, metric, h, e).map(Arc::new),
            (false, true) => {
                // Upstream `smoothSeries` for floats: the sample at `e`, an interpolation, or the one
                // before carried forward.
                let j = f.partition_point(|s| s.t < e);
                vals[i] = if j < f.len() && f[j].t == e {
                    Some(f[j].v)
                } else if j > 0 && j < f.len() {
                    let (p, q) = (f[j - 1], f[j]);
                    Some(p.v + (q.v - p.v) * (e - p.t) as f64 / (q.t - p.t) as f64)
                } else if j > 0 {
                    Some(f[j - 1].v)
                } else {
                    None
                };
            }
        }
    }
    let mut s = Series { labels: labels.clone(), vals, hists: Some(hv), drop_name: false };
    s.tidy();
    s.any_value().then_some(s)
}

/// Fills `vals[i]` with the latest sample in `(eff[i] - lb, eff[i]]` unless it is a stale marker, one
/// forward pass over `samples` for all steps (upstream `vectorSelectorSingle` per step). Returns whether
/// any step has a value.
pub fn lookback_values(samples: &[Sample], eff: &[i64], lb: i64, timestamps: bool, vals: &mut [Option<f64>]) -> bool {
    for_each_lookback(samples, eff, lb, |i, j| {
        let s = samples[j];
        vals[i] = Some(if timestamps { s.t as f64 / 1000.0 } else { s.v });
    })
}

/// [`lookback_values`] for a series that has histogram samples too (upstream `vectorSelectorSingle` over
/// a chunk iterator that yields either): per step, the latest sample of either kind in
/// `(eff[i] - lb, eff[i]]`, unless it is a stale marker (a float stale NaN or a histogram whose sum is
/// one). With `timestamps`, a histogram step yields its timestamp as a float *and* keeps its histogram,
/// so that the caller can tell what the sample was (`timestamp()` drops the histograms, `info()` refuses
/// histogram info samples).
pub fn lookback_mixed(
    samples: &[Sample],
    hists: &[HPoint],
    eff: &[i64],
    lb: i64,
    timestamps: bool,
    vals: &mut [Option<f64>],
    hvals: &mut [Option<Arc<FloatHistogram>>],
) -> bool {
    for_each_lookback_mixed(samples, hists, eff, lb, |i, picked| match picked {
        Picked::Float(j) => {
            let f = samples[j];
            vals[i] = Some(if timestamps { f.t as f64 / 1000.0 } else { f.v });
        }
        Picked::Histogram(k) => {
            let h = &hists[k];
            if timestamps {
                vals[i] = Some(h.t as f64 / 1000.0);
            }
            hvals[i] = Some(h.h.clone());
        }
    })
}

/// The sample a step's lookback picked in a series holding floats and histograms: an index into one
/// or the other.
#[derive(Debug, Clone, Copy)]
enum Picked {
    Float(usize),
    Histogram(usize),
}

/// [`for_each_lookback`] over floats and histograms (upstream `vectorSelectorSingle` over an iterator
/// yielding either): calls `f(i, picked)` for each step `i` whose latest sample of either kind in
/// `(eff[i] - lb, eff[i]]` is not a stale marker. Returns whether any step had one.
fn for_each_lookback_mixed(
    samples: &[Sample],
    hists: &[HPoint],
    eff: &[i64],
    lb: i64,
    mut f: impl FnMut(usize, Picked),
) -> bool {
    let (mut j, mut k) = (0usize, 0usize);
    let mut any = false;
    for (i, &e) in eff.iter().enumerate() {
        if i > 0 && e < eff[i - 1] {
            j = 0;
            k = 0;
        }
        while j < samples.len() && samples[j].t <= e {
            j += 1;
        }
        while k < hists.len() && hists[k].t <= e {
            k += 1;
        }
        let fl = (j > 0).then(|| samples[j - 1]);
        let h = (k > 0).then(|| &hists[k - 1]);
        // The newer of the two; a float wins a tie (a series never has both at one time).
        let float_newer = match (fl, h) {
            (Some(fl), h) => h.is_none_or(|h| h.t < fl.t),
            _ => false,
        };
        match (fl, h) {
            (Some(s), _) if float_newer && s.t > e - lb && !is_stale_nan(s.v) => {
                f(i, Picked::Float(j - 1));
                any = true;
            }
            (_, Some(p)) if !float_newer && p.t > e - lb && !p.h.is_stale() => {
                f(i, Picked::Histogram(k - 1));
                any = true;
            }
            _ => {}
        }
    }
    any
}

/// Calls `f(i, j)` for each step `i` whose latest sample in `(eff[i] - lb, eff[i]]` is `samples[j]` and
/// not a stale marker, in one forward pass over `samples` (restarting where `eff` goes back in time).
/// Returns whether any step had one.
#[inline]
fn for_each_lookback(samples: &[Sample], eff: &[i64], lb: i64, mut f: impl FnMut(usize, usize)) -> bool {
    let mut j = 0usize;
    let mut any = false;
    for (i, &e) in eff.iter().enumerate() {
        if i > 0 && e < eff[i - 1] {
            j = 0;
        }
        while j < samples.len() && samples[j].t <= e {
            j += 1;
        }
        if j == 0 {
            continue;
        }
        let s = samples[j - 1];
        if s.t > e - lb && !is_stale_nan(s.v) {
            f(i, j - 1);
            any = true;
        }
    }
    any
}

/// Like [`select_map_st`], but folds each shard's series into one per-shard state (the partial stage of
/// an aggregation pushed down to the shards); returns the states, one per shard, in shard order. `f`
/// sees the series' float samples (stale markers included unless `dec.drop_stale`), their start
/// timestamps (with `dec.want_st`, as [`select_map_st`]) and its histogram samples (stale markers
/// included), and returns how many samples the series would hold as
/// the instant vector its node produces (upstream materialises that vector before aggregating, so the
/// limit counts those samples even though they are not kept here), or `None` to give up: the fold then
/// stops in every shard and `Ok(None)` tells the caller to evaluate centrally instead (a histogram
/// layout whose merged partials would not be upstream's bit for bit, a label set the central path
/// would refuse). `window`: for a range function, the windows' ends and length (checked as
/// [`select_map_st`] checks them).
#[allow(clippy::too_many_arguments)]
pub fn select_fold<S: Send>(
    ctx: &QueryCtx<'_>,
    vs: &VectorSelector,
    mint: i64,
    maxt: i64,
    hints: SelectHints,
    dec: Decode,
    window: Option<(&[i64], i64)>,
    init: impl Fn() -> S + Sync,
    f: impl Fn(&mut S, &Labels, &[Sample], &[i64], &[HPoint]) -> Option<usize> + Sync,
) -> Result<Option<Vec<S>>, EngineError> {
    let q = ctx.queryable.querier(mint, maxt).map_err(|e| EngineError::Storage(e.to_string()))?;
    let run = ShardRun::new(ctx, vs, mint, maxt, &hints, dec, window);
    let states: Vec<S> = (0..q.shard_count())
        .into_par_iter()
        .map(|shard| {
            let mut state = init();
            run.shard(&*q, shard, |labels, samples, sts, hs| {
                let n = f(&mut state, labels, samples, sts, hs)?;
                Some((n, ()))
            })?;
            Ok(state)
        })
        .collect::<Result<_, EngineError>>()?;
    Ok(run.finish().then_some(states))
}

/// Values per item up to which [`select_ordered`] collects on the engine's pool instead of streaming.
const IN_POOL_VALUES: usize = 4;

/// Like [`select_fold`], but each series' item (what `f` makes of it, with the samples it counts as
/// held) goes to `consume` on the calling thread **in the label order of all shards together**: the
/// shards run on threads of their own, each sending its label-sorted items through a small bounded
/// channel, and the caller merges them. An aggregation whose result depends on the order of its inputs
/// (avg, stddev, stdvar: upstream folds the vector in label order) can so fold exactly as the central
/// path does while the per-series work stays parallel and no series' values outlive their fold.
/// Dedicated threads, not rayon's: a pool worker blocked on a full channel while the one the merge
/// waits for is not scheduled would deadlock. `f` or `consume` returning `None`/`false` gives up (the
/// caller then evaluates centrally): `Ok(false)`. With at most [`IN_POOL_VALUES`] values an item, the
/// items are collected per shard on the engine's pool and merged instead (see below).
#[allow(clippy::too_many_arguments)]
pub fn select_ordered<T: Send>(
    ctx: &QueryCtx<'_>,
    vs: &VectorSelector,
    mint: i64,
    maxt: i64,
    hints: SelectHints,
    dec: Decode,
    window: Option<(&[i64], i64)>,
    per_item: usize,
    f: impl Fn(&Labels, &[Sample], &[i64], &[HPoint]) -> Option<(usize, Option<T>)> + Sync,
    mut consume: impl FnMut(T) -> bool,
) -> Result<bool, EngineError> {
    let q = ctx.queryable.querier(mint, maxt).map_err(|e| EngineError::Storage(e.to_string()))?;
    let run = ShardRun::new(ctx, vs, mint, maxt, &hints, dec, window);
    let shards = q.shard_count();
    let q = &*q;
    if per_item <= IN_POOL_VALUES {
        // A value or a few per series (an instant query, a refresh's newest steps): the shards' items
        // are collected on the engine's pool and merged here. They hold no more than the sample limit
        // counted anyway (it counts every item produced, streamed or not), and two threads started
        // per query cost more than such a fold's work (`avg(node_load1)` over 100 series: 1.28 ms of
        // CPU against 0.73 for `sum`, which folds in the shards).
        let per_shard: Vec<Result<Vec<(Labels, T)>, EngineError>> = (0..shards)
            .into_par_iter()
            .map(|shard| {
                let mut items = Vec::new();
                run.shard(q, shard, |labels, samples, sts, hs| {
                    let (n, item) = f(labels, samples, sts, hs)?;
                    if let Some(item) = item {
                        items.push((labels.clone(), item));
                    }
                    Some((n, ()))
                })?;
                Ok(items)
            })
            .collect();
        let mut runs = Vec::with_capacity(shards);
        for r in per_shard {
            runs.push(r?);
        }
        if !run.gave_up.load(Ordering::Relaxed) {
            for (_, item) in merge_runs(runs, |x: &(Labels, T)| &x.0) {
                if !consume(item) {
                    run.give_up();
                    break;
                }
            }
        }
        return Ok(run.finish());
    }
    let (run_ref, f_ref) = (&run, &f);
    // Items travel in batches: one channel operation (and at most one wake-up of the merge) per batch,
    // not per series. An item holds `per_item` values (one per step), so the fewer, the more items a
    // batch takes: a dashboard refresh's one or two new steps over 12,000 series woke the merge ~400
    // times (thread switches were a fifth of its cost), now a few times. About 4,096 values a batch.
    let batch_items = (4096 / per_item.max(1)).clamp(32, 2048);
    let results: Vec<Result<(), EngineError>> = std::thread::scope(|scope| {
        let mut rxs = Vec::with_capacity(shards);
        let mut handles = Vec::with_capacity(shards);
        for shard in 0..shards {
            let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<(Labels, T)>>(4);
            rxs.push(rx);
            handles.push(scope.spawn(move || {
                let mut batch = Vec::with_capacity(batch_items);
                let r = run_ref.shard(q, shard, |labels, samples, sts, hs| {
                    let (n, item) = f_ref(labels, samples, sts, hs)?;
                    if let Some(item) = item {
                        batch.push((labels.clone(), item));
                        if batch.len() == batch_items {
                            // The merge went away (it gave up or failed): stop.
                            tx.send(std::mem::replace(&mut batch, Vec::with_capacity(batch_items))).ok()?;
                        }
                    }
                    Some((n, ()))
                });
                if !batch.is_empty() {
                    let _ = tx.send(batch);
                }
                r
            }));
        }
        // The k-way merge: the smallest head of the shards' label-sorted streams goes next.
        let mut streams: Vec<std::iter::Peekable<std::vec::IntoIter<(Labels, T)>>> =
            rxs.iter().map(|rx| rx.recv().unwrap_or_default().into_iter().peekable()).collect();
        let mut last: Option<Labels> = None;
        loop {
            let next = streams
                .iter_mut()
                .enumerate()
                .filter_map(|(i, st)| st.peek().map(|(l, _)| (i, l)))
                .min_by(|a, b| a.1.cmp(b.1))
                .map(|(i, _)| i);
            let Some(i) = next else { break };
            let (labels, item) = streams[i].next().expect("chosen head");
            // Each shard's series come sorted by their labels; should one ever not, the merged order
            // would not be the central path's: give up rather than answer differently.
            if last.as_ref().is_some_and(|l| *l > labels) || !consume(item) {
                run.give_up();
                break;
            }
            last = Some(labels);
            if streams[i].peek().is_none()
                && let Ok(b) = rxs[i].recv()
            {
                streams[i] = b.into_iter().peekable();
            }
        }
        // Unblock producers still sending, then wait for them.
        drop(streams);
        drop(rxs);
        handles.into_iter().map(|h| h.join().unwrap_or_else(|p| std::panic::resume_unwind(p))).collect()
    });
    for r in results {
        r?;
    }
    Ok(run.finish())
}

/// What the shard loops of [`select_fold`] and [`select_ordered`] share: the selection's settings and
/// the sample accounting across shards.
struct ShardRun<'c, 'q> {
    ctx: &'c QueryCtx<'q>,
    vs: &'c VectorSelector,
    mint: i64,
    maxt: i64,
    /// The caller's hints, with [`SelectHints::unchecked_range`]: [`ShardRun::shard`] skips the series
    /// without a sample in range itself.
    hints: SelectHints,
    dec: Decode,
    window: Option<(&'c [i64], i64)>,
    stats_hints: bool,
    base: usize,
    kept: AtomicUsize,
    gave_up: std::sync::atomic::AtomicBool,
}

impl<'c, 'q> ShardRun<'c, 'q> {
    fn new(
        ctx: &'c QueryCtx<'q>,
        vs: &'c VectorSelector,
        mint: i64,
        maxt: i64,
        hints: &'c SelectHints,
        dec: Decode,
        window: Option<(&'c [i64], i64)>,
    ) -> Self {
        ShardRun {
            ctx,
            vs,
            mint,
            maxt,
            hints: SelectHints { unchecked_range: true, ..hints.clone() },
            dec,
            window,
            stats_hints: ctx.stats_selectors.contains(&(vs as *const VectorSelector as usize)),
            base: ctx.held_samples(),
            kept: AtomicUsize::new(0),
            gave_up: std::sync::atomic::AtomicBool::new(false),
        }
    }

    fn give_up(&self) {
        self.gave_up.store(true, Ordering::Relaxed);
    }

    /// `true` if the run went through; after a give-up, releases the samples it counted.
    fn finish(&self) -> bool {
        if self.gave_up.load(Ordering::Relaxed) {
            self.ctx.samples.store(self.base, Ordering::Relaxed);
            return false;
        }
        true
    }

    /// Decodes one shard's series in label order and hands each to `f`, which returns the samples the
    /// series counts as held, or `None` to give up.
    fn shard(
        &self,
        q: &dyn tessera_model::Querier,
        shard: usize,
        mut f: impl FnMut(&Labels, &[Sample], &[i64], &[HPoint]) -> Option<(usize, ())>,
    ) -> Result<(), EngineError> {
        let ctx = self.ctx;
        let set = q.select_shard(shard, &self.vs.matchers, &self.hints).map_err(|e| EngineError::Storage(e.to_string()))?;
        let mut pooled = PooledSamples::take();
        let buf = &mut pooled.0;
        let mut sts: Vec<i64> = Vec::new();
        let mut hbuf: Vec<HPoint> = Vec::new();
        let mut checks = SeriesChecks::due();
        for s in set {
            // The previous series' samples (and a window's worth of steps): one series can take long over
            // a long or fine grid.
            ctx.check_series(&mut checks, buf.len() + self.window.map_or(1, |(eff, _)| eff.len()))?;
            if self.gave_up.load(Ordering::Relaxed) {
                return Ok(());
            }
            let s = s.map_err(|e| EngineError::Storage(e.to_string()))?;
            let stale = if let Some(from) = self.dec.latest_from.filter(|_| !self.dec.want_st && !self.stats_hints) {
                let bufs = DecodeBufs { samples: buf, sts: &mut sts, hists: &mut hbuf, hsts: &mut Vec::new() };
                decode_latest(&s.chunks, self.mint, self.maxt, from, decode_limit(ctx), bufs)?
            } else {
                decode_series(&s.chunks, self.mint, self.maxt, self.dec.want_st, decode_limit(ctx), buf, &mut sts, &mut hbuf)?
            };
            if buf.is_empty() && hbuf.is_empty() {
                // No sample in range (the storage was told it need not check, see `SelectHints::
                // unchecked_range`): the series is not there, as it would not have been yielded.
                continue;
            }
            ctx.stats.read.fetch_add(buf.len() + hbuf.len(), Ordering::Relaxed);
            if ctx.trace.is_some() {
                ctx.stats.series.fetch_add(1, Ordering::Relaxed);
                ctx.stats.chunks.fetch_add(s.chunks.len(), Ordering::Relaxed);
            }
            if !hbuf.is_empty() && self.stats_hints {
                super::hist::derive_stats_hints(&mut hbuf);
            }
            if let Some((eff, range)) = self.window {
                let held = self.base + self.kept.load(Ordering::Relaxed);
                if hbuf.is_empty() {
                    if held + buf.len() > ctx.opts.max_samples {
                        ctx.check_samples(held + max_window(buf, eff, range))?;
                    }
                } else {
                    ctx.check_samples(held + max_window_mixed(buf, &hbuf, eff, range))?;
                }
            }
            if self.dec.drop_stale {
                remove_stale(buf, &mut sts, stale);
            }
            let Some((n, ())) = f(&s.labels, buf, &sts, &hbuf) else {
                self.give_up();
                return Ok(());
            };
            ctx.check_samples(self.base + self.kept.fetch_add(n, Ordering::Relaxed) + n)?;
        }
        Ok(())
    }
}

/// A range-vector argument: its series' samples and, per step, the end of the window `(eff - range, eff]`.
pub struct RangeArg {
    pub series: Vec<RangeSeries>,
    pub range_ms: i64,
    /// Per step: the window's (inclusive) end.
    pub eff: Vec<i64>,
    /// The selector's metric name, for annotations.
    pub is_subquery: bool,
}

/// Evaluates a matrix selector or subquery to raw samples covering every step's window.
pub fn eval_range_arg(ctx: &QueryCtx<'_>, expr: &Expr, grid: &Grid) -> Result<RangeArg, EngineError> {
    match expr.unwrap_parens() {
        Expr::MatrixSelector(ms) => {
            let vs = &ms.vs;
            let eff = effective_times(ctx, vs.at, vs.original_offset_ms, grid);
            let range = ms.range_ms;
            let (lo, hi) = (eff.iter().copied().min().unwrap_or(0), eff.iter().copied().max().unwrap_or(0));
            let hints = SelectHints { range_ms: range, step_ms: grid.step, ..Default::default() };
            let series = select_map_h(ctx, vs, lo.saturating_sub(range) + 1, hi, hints, None, 0, |labels, samples, hs| {
                let samples: Vec<Sample> = samples.iter().copied().filter(|s| !is_stale_nan(s.v)).collect();
                let hists: Vec<HPoint> = hs.iter().filter(|p| !p.h.is_stale()).cloned().collect();
                (!samples.is_empty() || !hists.is_empty()).then(|| RangeSeries {
                    labels: labels.clone(),
                    samples,
                    hists,
                    drop_name: false,
                })
            })?;
            let mut series = series;
            series.sort_by(|a, b| a.labels.cmp(&b.labels));
            Ok(RangeArg { series, range_ms: range, eff, is_subquery: false })
        }
        Expr::Subquery(sq) => eval_subquery(ctx, sq, grid),
        _ => Err(EngineError::Execution("expected range vector".into())),
    }
}

/// Upstream `evaluator.eval` for `*parser.SubqueryExpr`: the inner expression is evaluated on its own step
/// grid aligned to multiples of the subquery step, then windows are cut per outer step.
fn eval_subquery(ctx: &QueryCtx<'_>, sq: &SubqueryExpr, grid: &Grid) -> Result<RangeArg, EngineError> {
    let eff = effective_times(ctx, sq.at, sq.original_offset_ms, grid);
    let (lo, hi) = (eff.iter().copied().min().unwrap_or(0), eff.iter().copied().max().unwrap_or(0));
    let step = if sq.step_ms > 0 { sq.step_ms } else { ctx.opts.no_step_subquery_interval_ms };
    let range = sq.range_ms;
    // The first step-aligned timestamp after `lo - range` (Go's truncating division).
    let base = lo.saturating_sub(range);
    let mut start = step * (base / step);
    if start <= base {
        start = start.saturating_add(step);
    }
    if start > hi {
        return Ok(RangeArg { series: vec![], range_ms: range, eff, is_subquery: true });
    }
    // Every step of the inner grid is a column of every series it yields: a grid with more steps
    // than the query may hold samples is refused before anything is allocated
    // (`count_over_time(vector(1)[10000d:1ms])` would be 8.6e11 steps).
    let steps = ((hi as i128 - start as i128) / step as i128 + 1) as u128;
    if steps > ctx.opts.max_samples.saturating_sub(ctx.held_samples()) as u128 {
        return Err(EngineError::TooManySamples("query execution".into()));
    }
    ctx.check()?;
    let inner = Grid::new(start, hi, step);
    let v = eval(ctx, &sq.expr, &inner)?;
    let series = match v {
        Val::Scalar(s) => vec![RangeSeries {
            labels: Labels::empty(),
            samples: s.iter().enumerate().map(|(i, v)| Sample::new(inner.t(i), *v)).collect(),
            hists: Vec::new(),
            drop_name: false,
        }],
        Val::Vector(vs) => vs
            .into_iter()
            .filter_map(|s| {
                let samples: Vec<Sample> =
                    s.vals.iter().enumerate().filter_map(|(i, v)| v.map(|v| Sample::new(inner.t(i), v))).collect();
                // Upstream `evaluator.evalSubquery`: explicit (not-)counter-reset hints become unknown,
                // since the subquery may skip or repeat the sample they describe.
                let hists: Vec<HPoint> = match s.hists {
                    None => Vec::new(),
                    Some(hs) => hs
                        .into_iter()
                        .enumerate()
                        .filter_map(|(i, h)| {
                            let h = h?;
                            let h = match h.counter_reset_hint {
                                CounterResetHint::CounterReset | CounterResetHint::NotCounterReset => {
                                    Arc::new(FloatHistogram { counter_reset_hint: CounterResetHint::Unknown, ..(*h).clone() })
                                }
                                _ => h,
                            };
                            Some(HPoint { t: inner.t(i), h })
                        })
                        .collect(),
                };
                (!samples.is_empty() || !hists.is_empty()).then_some(RangeSeries {
                    labels: s.labels,
                    samples,
                    hists,
                    drop_name: s.drop_name,
                })
            })
            .collect(),
        _ => return Err(EngineError::Execution("subquery of a non-vector".into())),
    };
    Ok(RangeArg { series, range_ms: range, eff, is_subquery: true })
}

/// Calls `f(window, i)` for each step `i` with the series' samples in `(eff[i] - range, eff[i]]`, moving two
/// indices forward (windows only move forward), so the series is walked once for all steps.
#[inline]
pub fn for_each_window(samples: &[Sample], eff: &[i64], range: i64, mut f: impl FnMut(&[Sample], usize)) {
    for_each_window_idx(samples, eff, range, |lo, hi, i| f(&samples[lo..hi], i));
}

/// [`for_each_window`] handing out the window as indices `lo..hi` (to slice aligned columns too).
#[inline]
pub fn for_each_window_idx(samples: &[Sample], eff: &[i64], range: i64, f: impl FnMut(usize, usize, usize)) {
    for_each_window_idx_by(samples.len(), |j| samples[j].t, eff, range, f);
}

/// [`for_each_window_idx`] over any time-sorted sequence of `len` items whose times `t(j)` gives.
#[inline]
pub fn for_each_window_idx_by(
    len: usize,
    t: impl Fn(usize) -> i64,
    eff: &[i64],
    range: i64,
    mut f: impl FnMut(usize, usize, usize),
) {
    let (mut lo, mut hi) = (0usize, 0usize);
    for (i, &e) in eff.iter().enumerate() {
        if i == 0 || e < eff[i - 1] {
            // The first window (or one after the times went back) may lie anywhere, a million samples
            // in for B1's: gallop to it. Later ones move by a sample or two: walk.
            hi = first_after(0, len, &t, e);
            lo = if hi > 0 { first_after(0, hi, &t, e - range) } else { 0 };
        } else {
            while hi < len && t(hi) <= e {
                hi += 1;
            }
            while lo < hi && t(lo) <= e - range {
                lo += 1;
            }
        }
        f(lo, hi, i);
    }
}

/// The first index in `from..len` whose time is above `bound` (`len` if none), the times being sorted
/// (as every series' samples are; on unsorted times it may answer another index than a walk would):
/// a few steps one by one, then galloping and a binary search, so a window over a million samples (B1's)
/// is found in ~20 probes instead of a million.
#[inline(never)]
fn first_after(from: usize, len: usize, t: &impl Fn(usize) -> i64, bound: i64) -> usize {
    let mut lo = from;
    for _ in 0..8 {
        if lo >= len || t(lo) > bound {
            return lo;
        }
        lo += 1;
    }
    // Every index below `lo` has a time <= bound; find an `hi` with a time above it (or `len`).
    let mut step = 1usize;
    let mut hi = loop {
        let probe = lo.saturating_add(step);
        if probe >= len {
            break len;
        }
        if t(probe) > bound {
            break probe;
        }
        lo = probe + 1;
        step = step.saturating_mul(2);
    };
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if t(mid) <= bound {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// Whether work below the shard may go to rayon's pool: only from one of its own workers, which take
/// part in what they wait for. A thread outside the pool (the ordered merge's shard threads, whose
/// caller, a pool worker, is blocked on their channel) would wait on workers that may all be blocked so:
/// with two of them and two such queries, for good.
pub fn nested_parallelism() -> bool {
    rayon::current_thread_index().is_some() && rayon::current_num_threads() > 1
}

/// Whether `samples` hold a stale marker. Blocks of 64 are tested without an early exit so that the
/// compiler vectorises the comparison; a series of a million samples or more (B1's window) is scanned on
/// both cores.
fn has_stale(samples: &[Sample]) -> bool {
    if samples.len() >= 1 << 17 && nested_parallelism() {
        use rayon::prelude::*;
        samples.par_chunks(1 << 15).any(scan_stale)
    } else {
        scan_stale(samples)
    }
}

/// [`has_stale`] on this thread.
fn scan_stale(samples: &[Sample]) -> bool {
    samples.chunks(64).any(|c| c.iter().fold(false, |any, s| any | is_stale_nan(s.v)))
}

/// Not a sample value the engine produces; used where a stale marker must be written.
pub const STALE: f64 = STALE_NAN;

#[cfg(test)]
mod parallel_decode_tests {
    use super::*;
    use bytes::Bytes;
    use tessera_model::{ChunkEncoding, ChunkRef};

    fn chunk(samples: &[Sample], dense: bool) -> ChunkRef {
        let (encoding, data) = if dense {
            (ChunkEncoding::Dense, tessera_encoding::encode_dense_always(samples))
        } else {
            (ChunkEncoding::Xor, tessera_encoding::encode_xor(samples))
        };
        ChunkRef {
            mint_ms: samples[0].t,
            maxt_ms: samples[samples.len() - 1].t,
            encoding,
            data: Bytes::from(data),
        }
    }

    fn sequential(chunks: &[ChunkRef], mint: i64, maxt: i64) -> Vec<Sample> {
        let mut out = Vec::new();
        for c in chunks {
            tessera_encoding::decode_chunk_range_into(c, mint, maxt, &mut out).expect("decodes");
        }
        out
    }

    #[test]
    fn chunk_parallel_decoding_equals_the_sequential_loop() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("pool");
        let mut x = 11u64;
        let mut rnd = |n: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % n.max(1)
        };
        let mut told = [0; 2];
        for _ in 0..90 {
            let nchunks = 10 + rnd(60) as usize;
            let mut t = rnd(1000) as i64;
            let mut chunks = Vec::new();
            // Some series carry stale markers, other NaNs or infinities, now and then; a series' chunks
            // are all Dense, all XOR or mixed.
            let odd = rnd(3);
            let kinds = rnd(3);
            for _ in 0..nchunks {
                let n = 1 + rnd(3000) as usize;
                let samples: Vec<Sample> = (0..n)
                    .map(|_| {
                        t += 1 + rnd(3) as i64;
                        let v = match (odd, rnd(5_000)) {
                            (1, 0) => STALE,
                            (2, 0) => f64::NAN,
                            (2, 1) => f64::NEG_INFINITY,
                            _ => rnd(1_000_000) as f64 / 7.0,
                        };
                        Sample::new(t, v)
                    })
                    .collect();
                chunks.push(chunk(&samples, kinds == 0 || (kinds == 2 && rnd(2) == 0)));
            }
            let (lo, hi) = (rnd(t as u64) as i64, t - rnd(t as u64 / 4 + 1) as i64);
            let want = sequential(&chunks, lo, hi);
            // Junk of another length in the buffer, as a pooled one holds.
            let mut got = vec![Sample::new(-1, 0.0); rnd(2) as usize * rnd(200_000) as usize];
            let (mut sts, mut h) = (Vec::new(), Vec::new());
            let stale = pool.install(|| decode_series(&chunks, lo, hi, false, usize::MAX, &mut got, &mut sts, &mut h)).expect("decodes");
            assert_eq!(got.len(), want.len());
            assert!(got.iter().zip(&want).all(|(a, b)| a.t == b.t && a.v.to_bits() == b.v.to_bits()));
            // When the decoding says whether there is a stale marker, it is right.
            if let Some(stale) = stale {
                assert_eq!(stale, want.iter().any(|s| is_stale_nan(s.v)));
                told[usize::from(stale)] += 1;
            }
            // The limit holds in the parallel path too.
            if want.len() > 10 {
                let r = pool.install(|| decode_series(&chunks, lo, hi, false, want.len() - 1, &mut got, &mut sts, &mut h));
                assert!(matches!(r, Err(EngineError::TooManySamples(_))), "{r:?}");
            }
        }
        assert!(told[0] > 5 && told[1] > 5, "both answers seen: {told:?}");
    }

    /// A selector that decodes only from the newest chunk beginning at or before its first evaluation
    /// time picks, at every step, what a full decode picks: random chunk layouts (gaps inside and between
    /// chunks, so that chunks overlapping the range may hold no sample in it), stale markers, one to four
    /// evaluation times, random lookbacks; and it reads less than the full decode in many of them.
    #[test]
    fn decoding_from_the_latest_chunk_gives_the_full_decodes_picks() {
        let mut x = 5u64;
        let mut rnd = |n: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % n.max(1)
        };
        let bits = |v: &[Sample]| v.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>();
        let mut shorter = 0;
        for _ in 0..3000 {
            let mut t = rnd(100) as i64;
            let chunks: Vec<ChunkRef> = (0..1 + rnd(5))
                .map(|_| {
                    t += rnd(3) as i64 * rnd(400) as i64;
                    let samples: Vec<Sample> = (0..1 + rnd(40))
                        .map(|_| {
                            t += 1 + if rnd(6) == 0 { rnd(200) as i64 } else { rnd(10) as i64 };
                            Sample::new(t, if rnd(8) == 0 { STALE } else { rnd(1000) as f64 })
                        })
                        .collect();
                    chunk(&samples, rnd(2) == 0)
                })
                .collect();
            // Now and then a chunk's start bound lies before its first sample (still after the chunk
            // before it): the read contract allows bounds wider than the samples.
            let mut chunks = chunks;
            for i in 1..chunks.len() {
                if rnd(4) == 0 {
                    let floor = chunks[i - 1].maxt_ms + 1;
                    chunks[i].mint_ms = (chunks[i].mint_ms - rnd(300) as i64).max(floor);
                }
            }
            let lo = rnd(t as u64 + 100) as i64;
            let eff: Vec<i64> = (0..1 + rnd(4)).map(|k| lo + k as i64 * rnd(60) as i64).collect();
            let hi = *eff.iter().max().expect("steps");
            let lb = 1 + rnd(300) as i64;
            let (mint, maxt) = (lo - lb + 1, hi);
            let full = sequential(&chunks, mint, maxt);
            let mut want = vec![None; eff.len()];
            lookback_values(&full, &eff, lb, false, &mut want);
            let (mut buf, mut sts, mut h, mut hsts) = (vec![Sample::new(-1, 0.0); 3], Vec::new(), Vec::new(), Vec::new());
            let bufs = DecodeBufs { samples: &mut buf, sts: &mut sts, hists: &mut h, hsts: &mut hsts };
            decode_latest(&chunks, mint, maxt, lo, usize::MAX, bufs).expect("decodes");
            assert!(bits(&full).ends_with(&bits(&buf)), "a suffix of the full decode");
            let mut got = vec![None; eff.len()];
            lookback_values(&buf, &eff, lb, false, &mut got);
            let b = |v: &[Option<f64>]| v.iter().map(|x| x.map(f64::to_bits)).collect::<Vec<_>>();
            assert_eq!(b(&got), b(&want), "steps {eff:?}, lookback {lb}");
            shorter += usize::from(buf.len() < full.len());
        }
        assert!(shorter > 100, "older chunks skipped {shorter} times");
    }

    /// Stale markers are removed in place, with their start timestamps; `known` spares the scan.
    #[test]
    fn remove_stale_keeps_the_rest_in_order() {
        let s = |t: i64, v: f64| Sample::new(t, v);
        let mut buf = vec![s(1, 1.0), s(2, STALE), s(3, f64::NAN), s(4, STALE), s(5, 5.0)];
        let mut sts = vec![10, 20, 30, 40, 50];
        remove_stale(&mut buf, &mut sts, None);
        assert_eq!(buf.iter().map(|s| s.t).collect::<Vec<_>>(), [1, 3, 5]);
        assert_eq!(sts, [10, 30, 50]);
        let mut buf = vec![s(1, STALE), s(2, 2.0)];
        let mut none: Vec<i64> = Vec::new();
        remove_stale(&mut buf, &mut none, Some(true));
        assert_eq!(buf.len(), 1);
        assert!(none.is_empty());
        // Told there is none: nothing is looked at.
        let mut buf = vec![s(1, STALE)];
        remove_stale(&mut buf, &mut none, Some(false));
        assert_eq!(buf.len(), 1);
    }

    /// Work below the shard goes to the pool only from a pool worker: a thread outside it (the ordered
    /// merge's shard threads) decodes on its own, so it never waits on workers that may be blocked.
    #[test]
    fn only_pool_workers_split_work_below_the_shard() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("pool");
        assert!(pool.install(nested_parallelism));
        assert!(!std::thread::spawn(nested_parallelism).join().expect("thread"));
        let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().expect("pool");
        assert!(!one.install(nested_parallelism));
    }

    /// A chunk whose index bounds say it lies inside the range but whose data holds a sample past it
    /// (a damaged index, or bounds read apart from the bytes) yields fewer samples than its header
    /// claims: the parallel layout is dropped and the series decoded the plain way, with the same answer.
    #[test]
    fn a_chunk_yielding_other_than_its_count_falls_back_to_the_plain_loop() {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("pool");
        let mut chunks: Vec<ChunkRef> = (0..20)
            .map(|k| {
                let samples: Vec<Sample> = (0..100).map(|i| Sample::new(k * 1000 + i * 10, (k * 100 + i) as f64)).collect();
                chunk(&samples, k % 2 == 0)
            })
            .collect();
        // The last chunk's bounds claim it ends at 19,500; its data runs to 19,990.
        chunks[19].maxt_ms = 19_500;
        let (lo, hi) = (0, 19_700);
        let want = sequential(&chunks, lo, hi);
        assert_eq!(want.len(), 19 * 100 + 71);
        let (mut got, mut sts, mut h) = (Vec::new(), Vec::new(), Vec::new());
        pool.install(|| decode_series(&chunks, lo, hi, false, usize::MAX, &mut got, &mut sts, &mut h)).expect("decodes");
        assert_eq!(got, want);
        // A chunk that does not decode at all is an error, as in the plain loop.
        chunks[7].data = Bytes::from_static(&[2, 0x80]);
        let r = pool.install(|| decode_series(&chunks, lo, hi, false, usize::MAX, &mut got, &mut sts, &mut h));
        assert!(matches!(r, Err(EngineError::Storage(_))), "{r:?}");
    }
}

#[cfg(test)]
mod window_tests {
    use super::*;
    use proptest::prelude::*;

    /// The walk as it was before galloping: both edges moved one sample at a time.
    fn linear_windows(samples: &[Sample], eff: &[i64], range: i64) -> Vec<(usize, usize, usize)> {
        let (mut lo, mut hi, mut out) = (0usize, 0usize, Vec::new());
        for (i, &e) in eff.iter().enumerate() {
            if i > 0 && e < eff[i - 1] {
                lo = 0;
                hi = 0;
            }
            while hi < samples.len() && samples[hi].t <= e {
                hi += 1;
            }
            while lo < hi && samples[lo].t <= e - range {
                lo += 1;
            }
            out.push((lo, hi, i));
        }
        out
    }

    proptest! {
        /// Galloping finds the same windows as the linear walk: sorted times with repeats, long runs
        /// (so the gallop and the binary search both run), evaluation times that go back (a reset), and
        /// ranges from 1 ms to beyond the data.
        #[test]
        fn galloping_windows_equal_the_linear_walk(
            gaps in proptest::collection::vec(prop_oneof![Just(0i64), 1i64..3, 1i64..1000], 0..3000),
            eff in proptest::collection::vec(-100i64..400_000, 1..40),
            range in prop_oneof![1i64..50, 1i64..1_000_000],
        ) {
            let mut t = -50;
            let samples: Vec<Sample> = gaps.iter().map(|g| { t += g; Sample::new(t, 0.0) }).collect();
            let mut got = Vec::new();
            for_each_window_idx(&samples, &eff, range, |lo, hi, i| got.push((lo, hi, i)));
            prop_assert_eq!(got, linear_windows(&samples, &eff, range));
        }
    }

    #[test]
    fn has_stale_finds_a_marker_anywhere() {
        for n in [0usize, 1, 63, 64, 65, 1000, (1 << 17) + 5] {
            let mut v: Vec<Sample> = (0..n as i64).map(|t| Sample::new(t, t as f64)).collect();
            assert!(!has_stale(&v), "{n} samples");
            for at in [0, n / 2, n.saturating_sub(1)] {
                if at < n {
                    let keep = v[at];
                    v[at].v = STALE_NAN;
                    assert!(has_stale(&v), "{n} samples, marker at {at}");
                    v[at] = keep;
                }
            }
            // A NaN that is not the stale marker is not one.
            if n > 0 {
                v[0].v = f64::NAN;
                assert!(!has_stale(&v));
            }
        }
    }

    #[test]
    fn first_after_edges() {
        let t = |j: usize| [1i64, 2, 2, 2, 5, 9, 9, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21][j];
        for from in 0..=17 {
            for bound in -1..=22 {
                let want = (from..17).find(|&j| t(j) > bound).unwrap_or(17);
                assert_eq!(first_after(from, 17, &t, bound), want, "from {from} bound {bound}");
            }
        }
        assert_eq!(first_after(5, 5, &t, 100), 5);
    }

    proptest! {
        /// Merging shards' label-sorted runs gives what sorting their concatenation gives: any number of
        /// runs (empty ones too), series that share long prefixes and differ in any pair.
        #[test]
        fn merged_runs_equal_the_sorted_concatenation(
            sets in proptest::collection::vec((0u8..4, 0u16..300, 0u8..3), 0..200),
            shards in 1usize..6,
        ) {
            let mut all: Vec<Labels> = sets
                .iter()
                .map(|&(a, b, c)| {
                    let host = format!("host-{b:04}");
                    tessera_model::labels!("__name__" => "node_cpu_seconds_total", "cpu" => &a.to_string(), "instance" => &host, "mode" => ["idle", "user", "system"][usize::from(c)])
                })
                .collect();
            all.sort();
            all.dedup();
            let mut runs: Vec<Vec<Labels>> = vec![Vec::new(); shards];
            for (i, l) in all.iter().enumerate() {
                runs[(i * 7 + l.len()) % shards].push(l.clone());
            }
            let merged = merge_runs(runs, |l: &Labels| l);
            prop_assert_eq!(merged, all);
        }
    }
}

#[cfg(test)]
mod check_tests {
    use super::SeriesChecks;

    /// The clock is read at a loop's first series, then every 16th series, or sooner after much work.
    #[test]
    fn series_checks_read_the_clock_every_16_series_or_16k_of_work() {
        let mut c = SeriesChecks::due();
        assert!(c.tick(0), "the first series reads the clock");
        let due: Vec<bool> = (0..32).map(|_| c.tick(10)).collect();
        assert_eq!(due.iter().filter(|&&d| d).count(), 2);
        assert!(due[15] && due[31], "{due:?}");
        assert!(!c.tick(1 << 13) && c.tick(1 << 13), "16 K samples or steps make it due");
        assert!(c.tick(usize::MAX) && !c.tick(0), "a huge series is one check, then it starts over");
    }
}
