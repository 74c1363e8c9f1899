//! The PromQL evaluation engine.
//!
//! Entry points: [`Engine::instant`] and [`Engine::range`] (and their `_expr` forms taking a parsed
//! [`Expr`]). Both evaluate an expression over a grid of steps (an instant query is a range query with one
//! step) and return a [`QueryResult`]: the [`Value`] plus the warnings and infos Prometheus attaches.
//!
//! # Key decision: column-wise evaluation
//! Every node of the syntax tree evaluates to values for **all steps at once** ([`eval::Val`]): a scalar is
//! one `f64` per step, an instant vector is a list of series each holding one `Option<f64>` per step. A
//! selector decodes each series once over the whole query range and computes every step in one pass over
//! its samples with moving indices (lookback, staleness, range windows); functions then work on columns.
//! Group keys of aggregations and match signatures of binary operators are computed once per *series*,
//! never per step, so the hot loops do no hashing.
//!
//! Per-series stages (selectors, range functions) run per shard in parallel (rayon over
//! [`Querier::select_shard`]); decomposable aggregations of a selector or of a range function over one
//! run their partial stage (accumulators per group, see [`aggregate`]) inside the shards too, floats and
//! native histograms alike, and only the partials meet in the final merge.
//!
//! Semantics follow Prometheus' `promql/engine.go` and `promql/functions.go`; the upstream function a
//! piece mirrors is named next to it. Conformance: every eval of Prometheus 3.14's promqltest scripts
//! passes (2195 of 2195; `promqltest-known-failures.txt` lists none).
//!
//! Start timestamps ([`EngineOptions::use_start_timestamps`], upstream `UseStartTimestamps`): when on,
//! rate/irate/increase/resets over a matrix selector decode the start-timestamp columns next to the
//! samples — XorSt chunks' for floats, HistogramSt/FloatHistogramSt chunks' for histograms, handed
//! around as [`eval::StartTimestamps`] like upstream's `StartTimestamps{Floats, Histograms}` — and use
//! them for counter resets, for the left edge of a window and for the overlap warning (upstream
//! `extrapolatedRate` and `histogramRate`, `instantValue`, `funcResets`, which reads them over an
//! `anchored` window as well); `start_timestamp(selector)` returns the start timestamp of the float or
//! histogram sample the lookback picks. Only those paths ever decode a column; everything else reads
//! XOR chunks as before and ST histogram chunks through their plain prefix.
//!
//! Native histograms: a step of a series holds a float or a histogram. [`eval::Series`] keeps its float
//! column as before and gets a histogram column (`Option<Arc<FloatHistogram>>` per step) only when the
//! series has a histogram, so float-only queries run the same loops as before; range vectors hold
//! histogram samples beside float samples ([`eval::HPoint`]), as upstream's `Series.Floats` and
//! `Series.Histograms`. Selectors decode Histogram/FloatHistogram chunks and their ST variants (integer
//! histograms through `to_float`), with upstream's lookback and histogram stale markers. The histogram cases of functions,
//! operators and aggregations live beside their float cases and name the upstream function they mirror;
//! histogram arithmetic is reached only through [`hist::math`]. A histogram counts as
//! `FloatHistogram.Size() / 16` samples for the max-samples limit, as upstream counts it.
//! The max-samples limit counts samples held at once, the way upstream's `evaluator.currentSamples` does
//! (a node's inputs and output while it runs, one window of one series inside a range function, the input
//! vector of an aggregation even when it is folded inside the shards); see [`eval::eval`].
//!
//! Modules: [`eval`] (tree walk, selectors, subqueries, result shaping), [`functions`] (range kernels and
//! instant functions, `info()`, anchored/smoothed), [`binop`] (operators and vector matching),
//! [`aggregate`] (aggregations with a partial/merge split, classic-histogram functions), [`hist`]
//! (histogram annotations, the histogram cases of range functions, the arithmetic seam).

pub mod aggregate;
pub mod binop;
pub mod eval;
pub mod functions;
pub mod hist;
pub mod plan;
pub mod tier;

use crate::parser::Expr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tessera_model::{FloatHistogram, Labels, Queryable};

/// Engine settings (upstream `EngineOpts`).
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// How far back an instant selector looks for the latest sample (default 5m).
    pub lookback_delta_ms: i64,
    /// Upper bound on samples held in memory at once by one query (upstream `--query.max-samples`,
    /// counted as upstream counts them).
    pub max_samples: usize,
    /// Query timeout.
    pub timeout: Duration,
    /// Allow experimental functions (upstream `promql-experimental-functions`).
    pub enable_experimental: bool,
    /// Default step of subqueries written without one (`[5m:]`), ms.
    pub no_step_subquery_interval_ms: i64,
    /// Delayed `__name__` removal (upstream `EnableDelayedNameRemoval`, feature flag
    /// `promql-delayed-name-removal`, default off): when on, functions and operators only mark series
    /// whose name goes and the name is removed when the result leaves the engine (so `sum by (__name__)`
    /// over `rate()` still sees it); when off, it is removed at once by the node that drops it.
    pub delayed_name_removal: bool,
    /// Use samples' start timestamps (upstream `UseStartTimestamps`, feature flag `use-start-timestamps`),
    /// of floats and native histograms alike: rate/irate/increase/resets over a matrix selector treat a
    /// start-timestamp reset as a counter reset and a start time inside the window as an increase from
    /// zero, and `start_timestamp()` returns them. Off (upstream's default), no start-timestamp column is
    /// ever decoded.
    pub use_start_timestamps: bool,
    /// Run the partial stage of decomposable aggregations (`sum`, `count`, `min`, `max`, `group` over a
    /// selector or a range function of one) inside the shards (see [`aggregate`]). Off, every
    /// aggregation runs over the materialised vector: the same answers, for comparisons and benchmarks.
    pub aggregation_pushdown: bool,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            lookback_delta_ms: 5 * 60 * 1000,
            max_samples: 50_000_000,
            timeout: Duration::from_secs(120),
            enable_experimental: true,
            no_step_subquery_interval_ms: 60_000,
            delayed_name_removal: false,
            use_start_timestamps: false,
            aggregation_pushdown: true,
        }
    }
}

/// Errors a query can end with. The HTTP layer maps them to Prometheus' error types.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// The query does not parse or is invalid (`bad_data`, 400).
    #[error("{0}")]
    BadData(String),
    /// Evaluation failed (`execution`, 422).
    #[error("{0}")]
    Execution(String),
    #[error("query timed out in {0}")]
    Timeout(String),
    #[error("query was canceled in {0}")]
    Canceled(String),
    #[error("query processing would load too many samples into memory in {0}")]
    TooManySamples(String),
    #[error("{0}")]
    Storage(String),
}

/// A query's value, in Prometheus' result types.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    Scalar { t_ms: i64, v: f64 },
    String { t_ms: i64, v: String },
    Vector(Vec<VectorSample>),
    Matrix(Vec<MatrixSeries>),
}

/// One sample of an instant vector: a float (`v`) or, when `h` is set, a native histogram (then `v`
/// is 0 and meaningless, as upstream's `Sample.F` beside `H`).
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSample {
    pub labels: Labels,
    pub t_ms: i64,
    pub v: f64,
    pub h: Option<Arc<FloatHistogram>>,
}

/// One series of a matrix: its float points and its histogram points, each sorted by time (upstream
/// `Series.Floats` and `Series.Histograms`).
#[derive(Debug, Clone)]
pub struct MatrixSeries {
    pub labels: Labels,
    pub points: Vec<(i64, f64)>,
    pub histograms: Vec<(i64, Arc<FloatHistogram>)>,
    /// The float points as the result cache's renderer writes them (see
    /// [`crate::cache::PointRenderer`]), when the series came through a cache that keeps them rendered:
    /// `points` is then empty (the text is what the answer's writer needs, and copying both cost more
    /// than the rest of a repeat).
    pub rendered: Option<Rendered>,
}

impl MatrixSeries {
    /// How many float points the series has (in `points`, or in its rendered text).
    pub fn float_count(&self) -> usize {
        self.rendered.as_ref().map_or(self.points.len(), |r| r.points)
    }
}

/// A series' float points as text: the concatenation of `parts`, which the result cache shares with the
/// answer where it kept them (no copy).
#[derive(Debug, Clone, Default)]
pub struct Rendered {
    pub parts: Vec<bytes::Bytes>,
    /// How many points the text holds.
    pub points: usize,
}

impl Rendered {
    /// The text's length in bytes.
    pub fn len(&self) -> usize {
        self.parts.iter().map(|p| p.len()).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.parts.iter().all(|p| p.is_empty())
    }

    /// The parts without the text's first byte (the renderer writes a separator before every point,
    /// which an answer drops before its first): shared, not copied.
    pub fn after_first_byte(&self) -> impl Iterator<Item = bytes::Bytes> + '_ {
        let mut first = true;
        self.parts.iter().map(move |part| {
            let skip = usize::from(first && !part.is_empty());
            first &= part.is_empty();
            part.slice(skip..)
        })
    }

    /// The text in one piece.
    pub fn to_vec(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(self.len());
        for p in &self.parts {
            v.extend_from_slice(p);
        }
        v
    }
}

impl PartialEq for MatrixSeries {
    /// Labels, points and histograms; a rendered series' text stands for its points (two rendered
    /// series compare their texts; a rendered one never equals one with points as values).
    fn eq(&self, o: &Self) -> bool {
        let floats = match (&self.rendered, &o.rendered) {
            (None, None) => true,
            (Some(a), Some(b)) => a.points == b.points && a.to_vec() == b.to_vec(),
            _ => self.float_count() == 0 && o.float_count() == 0,
        };
        floats && self.labels == o.labels && self.points == o.points && self.histograms == o.histograms
    }
}

/// A value with the annotations Prometheus attaches to it.
#[derive(Debug, Clone, PartialEq)]
pub struct QueryResult {
    pub value: Value,
    pub warnings: Vec<String>,
    pub infos: Vec<String>,
    pub stats: QueryStats,
    /// The plan with per-node figures, when [`QueryOptions::trace`] asked for it.
    pub trace: Option<plan::TraceNode>,
    /// The downsampling tier the answer was computed from (resolution, ms); `None`: raw data.
    pub tier_ms: Option<i64>,
}

/// The `samples` part of upstream's query statistics (`stats=all`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryStats {
    /// Samples selectors handed to evaluation: one per series and step picked by the lookback, every
    /// sample of each step's window for a range (upstream `TotalSamples`).
    pub total_queryable_samples: u64,
    /// Samples decoded from storage.
    pub samples_read: u64,
    /// The most samples held at once (upstream `PeakSamples`, what `--query.max-samples` limits).
    pub peak_samples: u64,
}

/// A cancellation flag: set it (e.g. when the HTTP client goes away) and the query stops at its next check.
#[derive(Debug, Clone, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }
    pub fn is_canceled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// Per-query overrides.
#[derive(Debug, Clone, Default)]
pub struct QueryOptions {
    /// Overrides [`EngineOptions::lookback_delta_ms`] when set (the API's `lookback_delta`).
    pub lookback_delta_ms: Option<i64>,
    pub cancel: CancelToken,
    pub timeout: Option<Duration>,
    /// Record per-node time, series, chunks and samples and return them with the plan
    /// ([`QueryResult::trace`], the API's `trace=1`).
    pub trace: bool,
    /// Raw data, a named downsampling tier, or the planner's choice (see [`tier`]).
    pub tier: tier::TierRequest,
}

/// The PromQL engine. Cheap to share; holds only settings.
#[derive(Debug, Clone, Default)]
pub struct Engine {
    pub opts: EngineOptions,
}

impl Engine {
    pub fn new(opts: EngineOptions) -> Self {
        Self { opts }
    }

    /// The lookback delta a query uses: its own (the API's `lookback_delta`) when positive, else the
    /// engine's.
    pub fn lookback_ms(&self, qo: &QueryOptions) -> i64 {
        qo.lookback_delta_ms.filter(|l| *l > 0).unwrap_or(self.opts.lookback_delta_ms)
    }

    /// Parses `query` and evaluates it at `t_ms`.
    pub fn instant(&self, q: &dyn Queryable, query: &str, t_ms: i64) -> Result<QueryResult, EngineError> {
        let expr = parse(query)?;
        self.instant_expr(q, &expr, t_ms, &QueryOptions::default())
    }

    /// Parses `query` and evaluates it at every step of `[start_ms, end_ms]`.
    pub fn range(
        &self,
        q: &dyn Queryable,
        query: &str,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
    ) -> Result<QueryResult, EngineError> {
        let expr = parse(query)?;
        self.range_expr(q, &expr, start_ms, end_ms, step_ms, &QueryOptions::default())
    }

    pub fn instant_expr(
        &self,
        q: &dyn Queryable,
        expr: &Expr,
        t_ms: i64,
        qo: &QueryOptions,
    ) -> Result<QueryResult, EngineError> {
        self.exec(q, expr, t_ms, t_ms, 0, qo)
    }

    pub fn range_expr(
        &self,
        q: &dyn Queryable,
        expr: &Expr,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
        qo: &QueryOptions,
    ) -> Result<QueryResult, EngineError> {
        if step_ms <= 0 {
            return Err(EngineError::BadData(
                "zero or negative query resolution step widths are not accepted. Try a positive integer".into(),
            ));
        }
        if end_ms < start_ms {
            return Err(EngineError::BadData("end timestamp must not be before start time".into()));
        }
        let t = expr.value_type();
        if t != crate::parser::ValueType::Scalar && t != crate::parser::ValueType::Vector {
            return Err(EngineError::BadData(format!(
                "invalid expression type \"{}\" for range query, must be Scalar or instant Vector",
                t.documented()
            )));
        }
        self.exec(q, expr, start_ms, end_ms, step_ms, qo)
    }

    fn exec(
        &self,
        q: &dyn Queryable,
        expr: &Expr,
        start_ms: i64,
        end_ms: i64,
        step_ms: i64,
        qo: &QueryOptions,
    ) -> Result<QueryResult, EngineError> {
        if !self.opts.enable_experimental {
            check_experimental(expr)?;
        }
        if step_ms > 0 && qo.tier == tier::TierRequest::Auto {
            let chosen = tier::choose(q, qo.tier, step_ms)?;
            if let Some(runs) = tier::past_raw(q, chosen, expr, start_ms, end_ms, step_ms, self.lookback_ms(qo)) {
                return self.exec_past_raw(q, expr, step_ms, qo, chosen, &runs);
            }
        }
        let mut expr = expr.clone();
        crate::parser::fold_query_context_functions(&mut expr, start_ms, end_ms, step_ms);
        let range_ms = if step_ms == 0 { 0 } else { end_ms - start_ms };
        crate::parser::resolve_durations(&mut expr, step_ms, range_ms).map_err(EngineError::BadData)?;
        let plan = plan::plan_for(&expr, &self.opts, qo.trace);
        let deadline = Instant::now() + qo.timeout.unwrap_or(self.opts.timeout);
        let ctx = eval::QueryCtx {
            queryable: q,
            opts: &self.opts,
            lookback_ms: self.lookback_ms(qo),
            query_start_ms: start_ms,
            query_end_ms: end_ms,
            cancel: qo.cancel.clone(),
            deadline,
            annotations: Default::default(),
            samples: Default::default(),
            slots: Default::default(),
            stats: Default::default(),
            stats_selectors: hist::histogram_stats_selectors(&expr),
            plan: &plan,
            trace: qo.trace.then(Default::default),
            tier_ms: tier::choose(q, qo.tier, step_ms)?,
        };
        let mut res = eval::run(&ctx, &expr, start_ms, end_ms, step_ms)?;
        if let Some(t) = &ctx.trace {
            res.trace = Some(plan.explain(&t.lock()));
        }
        res.tier_ms = ctx.tier_ms;
        Ok(res)
    }
}

impl Engine {
    /// A range query reaching back past its chosen source's data: its runs of steps (see
    /// [`tier::past_raw`]) each from its tier or from raw data, within the query's one timeout, spliced
    /// series by series. The answer names the chosen tier, or with raw data chosen the finest tier it
    /// read; `trace` is the first run's.
    fn exec_past_raw(
        &self,
        q: &dyn Queryable,
        expr: &Expr,
        step_ms: i64,
        qo: &QueryOptions,
        chosen: Option<i64>,
        runs: &[(i64, i64, Option<i64>)],
    ) -> Result<QueryResult, EngineError> {
        let started = Instant::now();
        let timeout = qo.timeout.unwrap_or(self.opts.timeout);
        let mut parts: Vec<QueryResult> = Vec::with_capacity(runs.len());
        for &(first, last, src) in runs {
            let left = timeout.saturating_sub(started.elapsed()).max(Duration::from_millis(1));
            let tier = src.map_or(tier::TierRequest::Raw, tier::TierRequest::Resolution);
            let o = QueryOptions { tier, timeout: Some(left), ..qo.clone() };
            parts.push(self.exec(q, expr, first, last, step_ms, &o)?);
        }
        if parts.is_empty() {
            return Err(EngineError::Execution("a range query without steps".into()));
        }
        if !parts.iter().all(|p| matches!(p.value, Value::Matrix(_))) {
            return Err(EngineError::Execution("a range query's parts are not matrices".into()));
        }
        let mut sp = Spliced::default();
        sp.add_all(&parts);
        let mut series = sp.series;
        series.sort_by(|a, b| a.labels.cmp(&b.labels));
        let tier_ms = chosen.or_else(|| runs.iter().filter_map(|r| r.2).min());
        Ok(QueryResult { value: Value::Matrix(series), warnings: sp.warnings, infos: sp.infos, stats: sp.stats, trace: sp.trace, tier_ms })
    }
}

/// Answers of runs of a range query's steps, in time order, put together: one series per label set
/// (points in time order), annotations without repeats, statistics summed (peak: the largest), the first
/// trace. What `Engine::exec_past_raw` and the result cache's splice share.
#[derive(Default)]
pub(crate) struct Spliced {
    pub(crate) series: Vec<MatrixSeries>,
    /// Where each label set is in `series`.
    pub(crate) at: std::collections::HashMap<Labels, usize>,
    pub(crate) warnings: Vec<String>,
    pub(crate) infos: Vec<String>,
    pub(crate) stats: QueryStats,
    pub(crate) trace: Option<plan::TraceNode>,
}

impl Spliced {
    /// Adds `results` (later runs after earlier ones); values other than matrices add no series.
    pub(crate) fn add_all(&mut self, results: &[QueryResult]) {
        for r in results {
            self.stats.total_queryable_samples += r.stats.total_queryable_samples;
            self.stats.samples_read += r.stats.samples_read;
            self.stats.peak_samples = self.stats.peak_samples.max(r.stats.peak_samples);
            merge_unique(&mut self.warnings, &r.warnings);
            merge_unique(&mut self.infos, &r.infos);
            if self.trace.is_none() {
                self.trace = r.trace.clone();
            }
            if let Value::Matrix(m) = &r.value {
                for s in m {
                    match self.at.get(&s.labels) {
                        Some(&i) => {
                            self.series[i].points.extend_from_slice(&s.points);
                            self.series[i].histograms.extend_from_slice(&s.histograms);
                        }
                        None => {
                            self.at.insert(s.labels.clone(), self.series.len());
                            self.series.push(s.clone());
                        }
                    }
                }
            }
        }
    }
}

/// Appends the strings of `from` that `into` lacks, in order.
pub(crate) fn merge_unique(into: &mut Vec<String>, from: &[String]) {
    for s in from {
        if !into.contains(s) {
            into.push(s.clone());
        }
    }
}

/// Rejects experimental functions and aggregators when they are disabled (upstream parser errors).
fn check_experimental(expr: &Expr) -> Result<(), EngineError> {
    let mut err = None;
    expr.walk(&mut |e| match e {
        Expr::Call(c) if c.func.experimental && err.is_none() => {
            err = Some(EngineError::BadData(format!("function {:?} is not enabled", c.func.name)));
        }
        Expr::Aggregate(a) if a.op.is_experimental() && err.is_none() => {
            err = Some(EngineError::BadData(
                "limitk() and limit_ratio() are experimental and must be enabled with --enable-feature=promql-experimental-functions"
                    .into(),
            ));
        }
        _ => {}
    });
    err.map_or(Ok(()), Err)
}

/// Parses a query into an expression, mapping errors to [`EngineError::BadData`].
pub fn parse(query: &str) -> Result<Expr, EngineError> {
    crate::parser::parse(query).map_err(|e| EngineError::BadData(e.to_string()))
}
