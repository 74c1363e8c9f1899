//! Aggregations (upstream `evaluator.rangeEvalAgg`, `aggregation`, `aggregationK`, `aggregationCountValues`)
//! and the classic-histogram functions that group by labels (`histogram_quantile`, `histogram_fraction`).
//!
//! Plan split: [`AggAcc`] is the per-group, per-step partial state of the decomposable aggregations
//! (sum, count, min, max, avg, group, stddev, stdvar) with `add` (feed a sample) and `merge` (combine two
//! partials) and `finish`. `op by (...) (selector)` and `op by (...) (f(selector[range]))` (a range
//! function of one argument over a selector with a fixed metric name) run `add` inside each shard and
//! `merge` after, for the operators whose merged result is upstream's (`plan::is_decomposable`: sum, count,
//! min, max, group), over floats and native histograms alike (a histogram sum gives way to central
//! evaluation only where the histograms of a group differ in layout, see `plan::is_decomposable`); the fold
//! holds groups × steps, never series × steps. avg, stddev and stdvar fold the series in label order,
//! as upstream, so that the floats match to the last bit. Group ids are computed once per series, so
//! the per-step loops index flat arrays. `EngineOptions::aggregation_pushdown` turns the pushdown off.

use super::EngineError;
use super::eval::{Grid, HistCol, QueryCtx, Series, Val, eval_scalar, eval_vector, merge_same_labels};
use std::sync::Arc;
use tessera_model::FloatHistogram;
use tessera_model::histogram_quantile::{HistogramInfo, histogram_fraction_annotated, histogram_quantile_annotated};
use super::functions::{fmt_g, kahan_inc, quantile};
use super::plan::Pushdown;
use crate::parser::{AggregateExpr, AggregateOp, Call, Expr};
use std::collections::HashMap;
use tessera_model::{Labels, LabelsBuilder};

/// Partial aggregation state of one group at one step: 32 bytes, as a dashboard's aggregation holds
/// groups × steps of them (it was 80, one field per use; the fields now serve each operation as below).
///
/// - sum: `sum` and its Kahan compensation `c`;
/// - avg: the same, and once the sum overflows (`incremental`), `sum` holds the running mean instead;
/// - min, max: `sum` holds the minimum or maximum;
/// - stddev, stdvar: `sum` holds Welford's running mean and `c` the sum of squared deviations.
#[derive(Debug, Clone, Copy, Default)]
pub struct AggAcc {
    pub count: f64,
    pub sum: f64,
    pub c: f64,
    pub incremental: bool,
}

impl AggAcc {
    #[inline]
    pub fn add(&mut self, op: AggregateOp, v: f64) {
        self.count += 1.0;
        match op {
            AggregateOp::Sum => {
                // Upstream `aggregation` for SUM: the first sample starts the sum, the rest are added with
                // Kahan-Neumaier compensation (`kahansum.Inc`).
                if self.count == 1.0 {
                    self.sum = v;
                    self.c = 0.0;
                } else {
                    (self.sum, self.c) = kahan_inc(v, self.sum, self.c);
                }
            }
            AggregateOp::Avg => {
                // Upstream `aggregation` for AVG: Kahan sum, incremental mean once the sum overflows.
                if self.count == 1.0 {
                    self.sum = v;
                    self.c = 0.0;
                    return;
                }
                if !self.incremental {
                    let (ns, nc) = kahan_inc(v, self.sum, self.c);
                    if !ns.is_infinite() {
                        self.sum = ns;
                        self.c = nc;
                        return;
                    }
                    self.incremental = true;
                    // The mean takes the sum's place.
                    self.sum /= self.count - 1.0;
                    self.c /= self.count - 1.0;
                }
                let q = (self.count - 1.0) / self.count;
                (self.sum, self.c) = kahan_inc(v / self.count, q * self.sum, q * self.c);
            }
            AggregateOp::Min if self.count == 1.0 || v < self.sum || self.sum.is_nan() => self.sum = v,
            AggregateOp::Max if self.count == 1.0 || v > self.sum || self.sum.is_nan() => self.sum = v,
            AggregateOp::Stddev | AggregateOp::Stdvar => {
                // Upstream `aggregation` for STDVAR/STDDEV: plain Welford; the first sample sets the mean
                // and a NaN or infinite first sample makes the variance NaN (upstream uses no Kahan
                // compensation here, unlike `stdvar_over_time`).
                if self.count == 1.0 {
                    self.sum = v;
                    self.c = if v.is_finite() { 0.0 } else { f64::NAN };
                    return;
                }
                let delta = v - self.sum;
                self.sum += delta / self.count;
                self.c += delta * (v - self.sum);
            }
            _ => {}
        }
    }

    /// [`Self::add`] of one series' values over a row of steps (`accs[i]` takes `vals[i]` where present).
    /// `sum` (the rows that dashboards' `sum by` folds) adds inline, [`kahan_inc`] with the first value's
    /// start as selects, so that the compiler keeps the row's independent steps in flight; the other
    /// operations call [`Self::add`] a value.
    #[inline]
    pub fn add_row(op: AggregateOp, accs: &mut [AggAcc], vals: &[Option<f64>]) {
        if op != AggregateOp::Sum {
            for (acc, x) in accs.iter_mut().zip(vals) {
                if let Some(x) = x {
                    acc.add(op, *x);
                }
            }
            return;
        }
        for (acc, x) in accs.iter_mut().zip(vals) {
            if let Some(v) = *x {
                // Upstream `aggregation` for SUM: the first sample starts the sum; the rest go through
                // `kahansum.Inc`.
                let first = acc.count == 0.0;
                acc.count += 1.0;
                let (t, c) = kahan_inc(v, acc.sum, acc.c);
                acc.sum = if first { v } else { t };
                acc.c = if first { 0.0 } else { c };
            }
        }
    }

    /// Combines two partials of the same group and step (the merge stage of pushdown).
    pub fn merge(&mut self, op: AggregateOp, o: &AggAcc) {
        if o.count == 0.0 {
            return;
        }
        if self.count == 0.0 {
            *self = *o;
            return;
        }
        match op {
            AggregateOp::Sum => {
                (self.sum, self.c) = kahan_inc(o.sum, self.sum, self.c);
                self.c += o.c;
            }
            AggregateOp::Min if o.sum < self.sum || self.sum.is_nan() => self.sum = o.sum,
            AggregateOp::Max if o.sum > self.sum || self.sum.is_nan() => self.sum = o.sum,
            AggregateOp::Avg => {
                // While neither side overflowed, merge the compensated sums (keeps Kahan's precision);
                // otherwise the weighted mean of the two partial means, in incremental-mean form.
                if !self.incremental && !o.incremental {
                    let (ns, nc) = kahan_inc(o.sum, self.sum, self.c);
                    if !ns.is_infinite() {
                        self.sum = ns;
                        self.c = nc + o.c;
                        self.count += o.count;
                        return;
                    }
                }
                let (a, b) = (self.finish(op), o.finish(op));
                let n = self.count + o.count;
                self.sum = a * (self.count / n) + b * (o.count / n);
                self.c = 0.0;
                self.incremental = true;
                self.count = n;
                return;
            }
            AggregateOp::Stddev | AggregateOp::Stdvar => {
                // Chan et al.'s pairwise combination of two Welford states.
                let n = self.count + o.count;
                let d = o.sum - self.sum;
                self.c = self.c + o.c + d * d * self.count * o.count / n;
                self.sum += d * o.count / n;
                self.count = n;
                return;
            }
            _ => {}
        }
        self.count += o.count;
    }

    pub fn finish(&self, op: AggregateOp) -> f64 {
        match op {
            // Upstream adds the compensation unconditionally (it is 0 once the sum is infinite).
            AggregateOp::Sum => self.sum + self.c,
            AggregateOp::Avg => {
                if self.incremental {
                    self.sum + self.c
                } else {
                    self.sum / self.count + self.c / self.count
                }
            }
            AggregateOp::Count => self.count,
            AggregateOp::Group => 1.0,
            AggregateOp::Min => self.sum,
            AggregateOp::Max => self.sum,
            AggregateOp::Stdvar => self.c / self.count,
            AggregateOp::Stddev => (self.c / self.count).sqrt(),
            _ => f64::NAN,
        }
    }
}

/// The group labels of a series (upstream `generateGroupingKey` + the labels `aggregation` outputs).
fn group_labels(l: &Labels, a: &AggregateExpr) -> Labels {
    if a.without {
        let mut names = a.grouping.clone();
        names.push("__name__".into());
        l.drop_names(&names)
    } else {
        l.keep(&a.grouping)
    }
}

/// A hash of a series' group labels, computed without building them (upstream `generateGroupingKey`).
fn group_hash(l: &Labels, a: &AggregateExpr) -> u64 {
    // One-shot xxh3 over the grouping pairs (the streaming hasher's setup and small updates cost more than
    // the rest of a series' fold); the same value the streaming digest of these bytes gives.
    tessera_model::labels::hash_pairs_iter(
        l.iter()
            .filter(|lb| {
                if a.without {
                    lb.name != "__name__" && !a.grouping.iter().any(|g| g == lb.name)
                } else {
                    a.grouping.iter().any(|g| g == lb.name)
                }
            })
            .map(|lb| (lb.name, lb.value)),
    )
}

/// Assigns each series a dense group id; returns ids and each group's labels, in first-seen order.
/// Group labels are built once per group, not per series.
fn groups(v: &[Series], a: &AggregateExpr) -> (Vec<usize>, Vec<Labels>) {
    let mut idx: HashMap<u64, usize> = HashMap::new();
    let mut labels = Vec::new();
    let ids = v
        .iter()
        .map(|s| {
            *idx.entry(group_hash(&s.labels, a)).or_insert_with(|| {
                labels.push(group_labels(&s.labels, a));
                labels.len() - 1
            })
        })
        .collect();
    (ids, labels)
}

pub fn eval_aggregate(ctx: &QueryCtx<'_>, a: &AggregateExpr, grid: &Grid) -> Result<Val, EngineError> {
    let n = grid.n;
    let op = a.op;
    let param: Option<Vec<f64>> = match (&a.param, op) {
        (Some(p), AggregateOp::CountValues) => {
            let _ = p;
            None
        }
        (Some(p), _) => Some(eval_scalar(ctx, p, grid)?),
        _ => None,
    };
    // The planner decided whether the partial stage runs in the shards (see [`super::plan`]).
    // From a downsampling tier the inputs are buckets, folded centrally (see [`super::tier`]).
    if ctx.tier_ms.is_none()
        && let Some(how) = ctx.plan.pushdown(a)
    {
        let pushed = match (how, a.expr.unwrap_parens()) {
            (Pushdown::Selector, Expr::VectorSelector(vs)) => pushed_down(ctx, a, vs, grid)?,
            (Pushdown::RangeFunction, Expr::Call(c)) => pushed_down_range(ctx, a, c, grid)?,
            (Pushdown::OrderedRangeFunction, Expr::Call(c)) => ordered_range(ctx, a, c, grid)?,
            (Pushdown::OrderedSelector, Expr::VectorSelector(vs)) => ordered_selector(ctx, a, vs, grid)?,
            _ => None,
        };
        if let Some(v) = pushed {
            return Ok(v);
        }
        super::eval::trace_fallback_agg(ctx, a);
    }
    let v = eval_vector(ctx, &a.expr, grid)?;
    match op {
        AggregateOp::Topk | AggregateOp::Bottomk | AggregateOp::Limitk | AggregateOp::LimitRatio => {
            return aggregate_k(ctx, a, v, param.unwrap_or_default(), n);
        }
        AggregateOp::CountValues => return count_values(ctx, a, v, grid),
        AggregateOp::Quantile => {
            ignore_histograms(ctx, &v, "quantile");
            let q = param.unwrap_or_default();
            if let Some(bad) = q.iter().find(|q| q.is_nan() || **q < 0.0 || **q > 1.0) {
                ctx.warn(format!("PromQL warning: quantile value should be between 0 and 1, got {}", fmt_g(*bad)));
            }
            let (ids, gl) = groups(&v, a);
            let mut out: Vec<Series> =
                gl.into_iter().map(|labels| Series { hists: None, labels, vals: vec![None; n], drop_name: false }).collect();
            let mut buf: Vec<Vec<f64>> = vec![Vec::new(); out.len()];
            for (i, &qi) in q.iter().enumerate().take(n) {
                if i % 1024 == 0 {
                    ctx.check()?;
                }
                for b in buf.iter_mut() {
                    b.clear();
                }
                for (s, &g) in v.iter().zip(&ids) {
                    if let Some(x) = s.vals[i] {
                        buf[g].push(x);
                    }
                }
                for (g, b) in buf.iter_mut().enumerate() {
                    if !b.is_empty() {
                        out[g].vals[i] = Some(quantile(qi, b));
                    }
                }
            }
            out.retain(|s| s.vals.iter().any(|x| x.is_some()));
            return Ok(Val::Vector(out));
        }
        _ => {}
    }
    let (ids, gl) = groups(&v, a);
    let ng = gl.len();
    // accs[g * n + i]: the partial state of group g at step i.
    let mut accs = vec![AggAcc::default(); ng * n];
    for (s, &g) in v.iter().zip(&ids) {
        AggAcc::add_row(op, &mut accs[g * n..(g + 1) * n], &s.vals);
    }
    // Histograms (upstream `aggregation`): counted by count and group, summed by sum and avg, ignored
    // with an info by the others. Only allocated when the input holds any.
    let mut haccs: Vec<HistAcc> = Vec::new();
    if v.iter().any(|s| s.hists.is_some()) {
        match op {
            AggregateOp::Count | AggregateOp::Group => {
                for (s, &g) in v.iter().zip(&ids) {
                    let row = &mut accs[g * n..(g + 1) * n];
                    for (i, acc) in row.iter_mut().enumerate() {
                        if s.hist(i).is_some() {
                            acc.add(op, 0.0);
                        }
                    }
                }
            }
            AggregateOp::Sum | AggregateOp::Avg => {
                haccs = vec![HistAcc::default(); ng * n];
                for (s, &g) in v.iter().zip(&ids) {
                    let Some(hs) = &s.hists else { continue };
                    for (i, h) in hs.iter().enumerate() {
                        if let Some(h) = h {
                            haccs[g * n + i].add(ctx, h, s.labels.metric_name(), op == AggregateOp::Avg);
                        }
                    }
                }
            }
            AggregateOp::Min => ignore_histograms(ctx, &v, "min"),
            AggregateOp::Max => ignore_histograms(ctx, &v, "max"),
            AggregateOp::Stddev => ignore_histograms(ctx, &v, "stddev"),
            AggregateOp::Stdvar => ignore_histograms(ctx, &v, "stdvar"),
            _ => {}
        }
    }
    // Delayed name removal: a group keeps `__name__` (by (__name__)) but inherits the members' flag.
    let mut gdrop = vec![false; ng];
    for (s, &g) in v.iter().zip(&ids) {
        gdrop[g] |= s.drop_name;
    }
    let out: Vec<Series> = gl
        .into_iter()
        .enumerate()
        .filter_map(|(g, labels)| {
            let hs = (!haccs.is_empty()).then(|| &haccs[g * n..(g + 1) * n]);
            finish_group(ctx, op, labels, &accs[g * n..(g + 1) * n], hs, gdrop[g])
        })
        .collect();
    Ok(Val::Vector(out))
}

/// One group's output series from its per-step partial states (floats, and the histogram side of sum
/// and avg when the input held histograms), shared by the central and the pushed-down paths.
fn finish_group(
    ctx: &QueryCtx<'_>,
    op: AggregateOp,
    labels: Labels,
    accs: &[AggAcc],
    haccs: Option<&[HistAcc]>,
    drop: bool,
) -> Option<Series> {
    let mut vals: Vec<Option<f64>> = accs.iter().map(|acc| (acc.count > 0.0).then(|| acc.finish(op))).collect();
    let drop_name = drop && labels.has("__name__");
    let mut hists = None;
    if let Some(haccs) = haccs {
        let mut col: HistCol = vec![None; accs.len()];
        for (i, h) in haccs.iter().enumerate() {
            if h.count == 0 {
                continue;
            }
            if vals[i].is_some() {
                // Upstream: a group with floats and histograms yields nothing at that step.
                ctx.warn(super::hist::mixed_floats_histograms_agg_warning());
                vals[i] = None;
                continue;
            }
            col[i] = h.finish(ctx);
        }
        hists = Some(col);
    }
    let mut s = Series { hists, labels, vals, drop_name };
    s.tidy();
    s.any_value().then_some(s)
}

/// Upstream's info for an aggregation that ignores histograms (`NewHistogramIgnoredInAggregationInfo`),
/// when the input holds any.
fn ignore_histograms(ctx: &QueryCtx<'_>, v: &[Series], op: &str) {
    if v.iter().any(|s| s.hists.as_ref().is_some_and(|h| h.iter().any(|h| h.is_some()))) {
        ctx.info(super::hist::ignored_in_aggregation_info(op));
    }
}

/// The histogram side of a sum or avg group at one step (upstream `groupedAggregation`'s
/// `histogramValue`, `histogramKahanC`, `histogramMean`, the hints seen, `incompatibleHistograms`).
#[derive(Debug, Clone, Default)]
struct HistAcc {
    k: Option<super::hist::HistKahan>,
    count: usize,
}

impl HistAcc {
    fn add(&mut self, ctx: &QueryCtx<'_>, h: &FloatHistogram, metric: &str, avg: bool) {
        use super::hist::math::HistOpError;
        self.count += 1;
        let Some(k) = &mut self.k else {
            self.k = Some(super::hist::HistKahan::new(h, avg));
            return;
        };
        if k.err.is_some() {
            return;
        }
        let reconciled = k.reconciled;
        k.add(h);
        if k.reconciled && !reconciled {
            ctx.info(super::hist::mismatched_custom_buckets_info("aggregation"));
        }
        // Upstream `handleAggregationError`.
        match k.err {
            Some(HistOpError::IncompatibleSchema) => ctx.warn(super::hist::mixed_exponential_custom_warning(metric)),
            Some(HistOpError::Incompatible) => ctx.warn(super::hist::incompatible_bucket_layout_in_binop_warning("aggregation")),
            None => {}
        }
    }

    /// [`HistAcc::add`] for a sum folded inside a shard: no annotation, and `false` (give up) where
    /// the merged partials could differ from upstream's sum in label order or where the central path
    /// would annotate (a histogram whose layout differs from the sum's, an error).
    fn add_pushed(&mut self, h: &FloatHistogram) -> bool {
        self.count += 1;
        let Some(k) = &mut self.k else {
            self.k = Some(super::hist::HistKahan::new(h, false));
            return true;
        };
        if !k.layout_matches(h) {
            return false;
        }
        k.add(h);
        k.err.is_none() && !k.reconciled
    }

    /// Combines two shards' partial sums of one group and step; `false`: give up (see
    /// [`super::hist::HistKahan::merge_sum`]).
    fn merge(&mut self, o: &HistAcc) -> bool {
        if o.count == 0 {
            return true;
        }
        if self.count == 0 {
            *self = o.clone();
            return true;
        }
        self.count += o.count;
        match (&mut self.k, &o.k) {
            (Some(a), Some(b)) => a.merge_sum(b),
            _ => true,
        }
    }

    fn finish(&self, ctx: &QueryCtx<'_>) -> Option<Arc<FloatHistogram>> {
        let k = self.k.clone()?;
        if k.counter_reset && k.not_counter_reset {
            ctx.warn(super::hist::counter_reset_collision_warning("aggregation"));
        }
        let mut h = k.finish()?;
        super::hist::math::compact(&mut h).ok()?;
        Some(Arc::new(h))
    }
}

/// One group of a shard's partial aggregation.
#[derive(Clone)]
struct PGroup {
    hash: u64,
    labels: Labels,
    accs: Vec<AggAcc>,
    /// The histogram side of a sum, allocated when the group first meets a histogram.
    hists: Option<Vec<HistAcc>>,
    /// Delayed name removal: some member's name is to be dropped.
    drop: bool,
}

/// One shard's partial aggregation: group hash → dense index, then per group its labels and one
/// accumulator per step. Holds groups × steps values, never series × steps.
#[derive(Default)]
struct Partial {
    idx: HashMap<u64, usize>,
    groups: Vec<PGroup>,
    /// A histogram met min or max (upstream's info).
    ignored_hist: bool,
}

impl Partial {
    /// Folds one series' values into its group; `false`: give up (see [`HistAcc::add_pushed`]).
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        a: &AggregateExpr,
        labels: &Labels,
        drop: bool,
        vals: &[Option<f64>],
        hists: Option<&[Option<Arc<FloatHistogram>>]>,
    ) -> bool {
        let op = a.op;
        let n = vals.len();
        let h = group_hash(labels, a);
        let gi = *self.idx.entry(h).or_insert_with(|| {
            self.groups.push(PGroup {
                hash: h,
                labels: group_labels(labels, a),
                accs: vec![AggAcc::default(); n],
                hists: None,
                drop: false,
            });
            self.groups.len() - 1
        });
        let g = &mut self.groups[gi];
        g.drop |= drop;
        AggAcc::add_row(op, &mut g.accs, vals);
        let Some(hs) = hists else { return true };
        match op {
            AggregateOp::Count | AggregateOp::Group => {
                for (acc, h) in g.accs.iter_mut().zip(hs) {
                    if h.is_some() {
                        acc.add(op, 0.0);
                    }
                }
            }
            AggregateOp::Sum => {
                let row = g.hists.get_or_insert_with(|| vec![HistAcc::default(); n]);
                for (acc, h) in row.iter_mut().zip(hs) {
                    if let Some(h) = h
                        && !acc.add_pushed(h)
                    {
                        return false;
                    }
                }
            }
            _ => self.ignored_hist |= hs.iter().any(|h| h.is_some()),
        }
        true
    }
}

/// The merge stage: combines the shards' partials group by group (shards in order) and finishes each
/// group as the central path does. `None`: a histogram sum cannot be merged exactly (evaluate centrally).
fn merge_partials(ctx: &QueryCtx<'_>, op: AggregateOp, partials: Vec<Partial>) -> Option<Val> {
    let mut idx: HashMap<u64, usize> = HashMap::new();
    let mut merged: Vec<PGroup> = Vec::new();
    let mut ignored_hist = false;
    for p in partials {
        ignored_hist |= p.ignored_hist;
        for g in p.groups {
            let Some(&m) = idx.get(&g.hash) else {
                idx.insert(g.hash, merged.len());
                merged.push(g);
                continue;
            };
            let into = &mut merged[m];
            into.drop |= g.drop;
            for (x, y) in into.accs.iter_mut().zip(&g.accs) {
                x.merge(op, y);
            }
            match (&mut into.hists, g.hists) {
                (Some(xs), Some(ys)) => {
                    for (x, y) in xs.iter_mut().zip(&ys) {
                        if !x.merge(y) {
                            return None;
                        }
                    }
                }
                (into_h @ None, Some(ys)) => *into_h = Some(ys),
                _ => {}
            }
        }
    }
    match op {
        AggregateOp::Min if ignored_hist => ctx.info(super::hist::ignored_in_aggregation_info("min")),
        AggregateOp::Max if ignored_hist => ctx.info(super::hist::ignored_in_aggregation_info("max")),
        _ => {}
    }
    let out = merged.into_iter().filter_map(|g| finish_group(ctx, op, g.labels, &g.accs, g.hists.as_deref(), g.drop)).collect();
    Some(Val::Vector(out))
}

/// What an instant selector's steps read (as [`super::eval::eval_vector_selector`] reads it): each
/// step's effective time, the lookback, the time range selected and the hints.
struct SelectorRange {
    eff: Vec<i64>,
    lb: i64,
    mint: i64,
    maxt: i64,
    hints: tessera_model::SelectHints,
}

impl SelectorRange {
    fn of(ctx: &QueryCtx<'_>, vs: &crate::parser::VectorSelector, grid: &Grid) -> Self {
        let eff = super::eval::effective_times_pub(ctx, vs.at, vs.original_offset_ms, grid);
        let lb = ctx.lookback_ms;
        let (lo, hi) = (eff.iter().copied().min().unwrap_or(0), eff.iter().copied().max().unwrap_or(0));
        let hints = tessera_model::SelectHints { step_ms: grid.step, ..Default::default() };
        SelectorRange { eff, lb, mint: lo.saturating_sub(lb) + 1, maxt: hi, hints }
    }
}

/// The earliest of a selector's evaluation times: each step needs only the latest sample at or before it
/// ([`super::eval::Decode::latest_from`]).
fn first_time(eff: &[i64]) -> Option<i64> {
    eff.iter().copied().min()
}

/// `op by (...) (selector)` with the first stage pushed into the shards: each shard decodes its series
/// and folds them straight into per-group accumulators (no per-series result is materialised); the merge
/// stage combines the shards' partials with [`AggAcc::merge`] and [`HistAcc::merge`].
fn pushed_down(
    ctx: &QueryCtx<'_>,
    a: &AggregateExpr,
    vs: &crate::parser::VectorSelector,
    grid: &Grid,
) -> Result<Option<Val>, EngineError> {
    let n = grid.n;
    let SelectorRange { eff, lb, mint, maxt, hints } = SelectorRange::of(ctx, vs, grid);
    let fold = |p: &mut Partial, labels: &Labels, samples: &[tessera_model::Sample], _: &[i64], hs: &[super::eval::HPoint]| {
        // What `eval_vector_selector` computes for the series, folded at once.
        let mut vals = vec![None; n];
        if hs.is_empty() {
            if !super::eval::lookback_values(samples, &eff, lb, false, &mut vals) {
                return Some(0);
            }
            let held = vals.iter().filter(|v| v.is_some()).count();
            ctx.count_queryable(held);
            return p.add(a, labels, false, &vals, None).then_some(held);
        }
        let mut hvals: HistCol = vec![None; n];
        if !super::eval::lookback_mixed(samples, hs, &eff, lb, false, &mut vals, &mut hvals) {
            return Some(0);
        }
        let held = vals.iter().filter(|v| v.is_some()).count()
            + hvals.iter().flatten().map(|h| super::eval::hist_size(h)).sum::<usize>();
        ctx.count_queryable(held);
        p.add(a, labels, false, &vals, Some(&hvals)).then_some(held)
    };
    let base = ctx.held_samples();
    let dec = super::eval::Decode { latest_from: first_time(&eff), ..Default::default() };
    let partials = super::eval::select_fold(ctx, vs, mint, maxt, hints, dec, None, Partial::default, fold)?;
    Ok(merged_or_release(ctx, a.op, partials, base))
}


/// `op by (...) (f(selector[range]))` with the first stage pushed into the shards: each series' output
/// of the range function (computed exactly as [`super::functions::eval_call`] computes it, annotations
/// included) is folded into the shard's partial as soon as it exists; then merged as [`pushed_down`].
fn pushed_down_range(ctx: &QueryCtx<'_>, a: &AggregateExpr, c: &Call, grid: &Grid) -> Result<Option<Val>, EngineError> {
    let delayed = ctx.opts.delayed_name_removal;
    let add = |p: &mut Partial, s: Series| -> bool {
        // Dropping the name drops these too; series differing only there would collide centrally.
        if s.labels.has("__type__") || s.labels.has("__unit__") {
            return false;
        }
        let (labels, drop) = as_grouped(a, delayed, s.labels, s.drop_name);
        p.add(a, &labels, drop, &s.vals, s.hists.as_deref())
    };
    let fold = super::functions::RangeFold { init: &Partial::default, add: &add };
    let base = ctx.held_samples();
    let partials = super::functions::fold_range_function(ctx, c, grid, &fold)?;
    Ok(merged_or_release(ctx, a.op, partials, base))
}

/// A function's output series as its aggregation groups it: without delayed name removal the
/// function's node drops the name (and type and unit, whose series the callers leave to the central
/// path) before the aggregation sees the series (`drop_names_now`); with it, the group inherits the
/// flag. A group's hash and labels leave `__name__` out unless it is a `by` label
/// ([`group_hash`], [`group_labels`]), so then the labels are passed as they are: rebuilding every
/// series' labels without the name (a copy of each name and value) was a tenth of a fresh
/// `sum by (instance) (rate(...))` over the head.
fn as_grouped(a: &AggregateExpr, delayed: bool, labels: Labels, drop_name: bool) -> (Labels, bool) {
    if delayed {
        (labels, drop_name)
    } else if !drop_name || a.without || !a.grouping.iter().any(|g| g == "__name__") {
        (labels, false)
    } else {
        (super::eval::final_labels(labels, drop_name), false)
    }
}

/// `avg|stddev|stdvar (f(selector[range]))`: the range function runs per series inside the shards and
/// each series' output is folded here, in the label order of all shards together, the order in which
/// the central path (and upstream) folds the materialised vector — so the answer is the central
/// path's to the bit while no more than a few series' values are held at once (groups x steps, not
/// series x steps). Histograms, and the type-and-unit labels whose removal could merge series, are
/// left to the central path (`None`).
fn ordered_range(ctx: &QueryCtx<'_>, a: &AggregateExpr, c: &Call, grid: &Grid) -> Result<Option<Val>, EngineError> {
    let delayed = ctx.opts.delayed_name_removal;
    let mut g = OrderedGroups::new(a, grid.n);
    let base = ctx.held_samples();
    let ok = super::functions::stream_range_function(ctx, c, grid, &mut |s: Series| {
        if s.hists.is_some() || s.labels.has("__type__") || s.labels.has("__unit__") {
            return false;
        }
        let (labels, drop) = as_grouped(a, delayed, s.labels, s.drop_name);
        g.add(&labels, drop, &s.vals);
        true
    })?;
    Ok(g.finish(ctx, ok, base))
}

/// `avg|stddev|stdvar (selector)` folded as [`ordered_range`] folds: each series' lookback values,
/// computed in the shards exactly as [`super::eval::eval_vector_selector`] computes them, folded here in
/// label order. A series with histograms gives up (central path).
fn ordered_selector(
    ctx: &QueryCtx<'_>,
    a: &AggregateExpr,
    vs: &crate::parser::VectorSelector,
    grid: &Grid,
) -> Result<Option<Val>, EngineError> {
    let n = grid.n;
    let SelectorRange { eff, lb, mint, maxt, hints } = SelectorRange::of(ctx, vs, grid);
    let f = |labels: &Labels, samples: &[tessera_model::Sample], _: &[i64], hs: &[super::eval::HPoint]| {
        if !hs.is_empty() {
            return None;
        }
        let mut vals = vec![None; n];
        if !super::eval::lookback_values(samples, &eff, lb, false, &mut vals) {
            return Some((0, None));
        }
        let held = vals.iter().filter(|v| v.is_some()).count();
        ctx.count_queryable(held);
        Some((held, Some((labels.clone(), vals))))
    };
    let mut g = OrderedGroups::new(a, n);
    let base = ctx.held_samples();
    let dec = super::eval::Decode { latest_from: first_time(&eff), ..Default::default() };
    let ok = super::eval::select_ordered(ctx, vs, mint, maxt, hints, dec, None, n, f, |(labels, vals)| {
        g.add(&labels, false, &vals);
        true
    })?;
    Ok(g.finish(ctx, ok, base))
}

/// The groups of an ordered fold: accumulators per group and step, filled series by series in the order
/// the central path would see them, finished as the central path finishes them.
///
/// A group's steps are a slice of their own (one vector of all groups' steps grew by copying as groups
/// appeared: 54 MB for `avg by (instance, mode)` over 944 groups and 720 steps when [`AggAcc`] took 80
/// bytes, 22 MB at its 32 now).
struct OrderedGroups<'a> {
    a: &'a AggregateExpr,
    n: usize,
    idx: HashMap<u64, usize>,
    labels: Vec<Labels>,
    accs: Vec<Box<[AggAcc]>>,
    drop: Vec<bool>,
}

impl<'a> OrderedGroups<'a> {
    fn new(a: &'a AggregateExpr, n: usize) -> Self {
        OrderedGroups { a, n, idx: HashMap::new(), labels: Vec::new(), accs: Vec::new(), drop: Vec::new() }
    }

    fn add(&mut self, labels: &Labels, drop: bool, vals: &[Option<f64>]) {
        let (a, n) = (self.a, self.n);
        let (gl, accs, gdrop) = (&mut self.labels, &mut self.accs, &mut self.drop);
        let g = *self.idx.entry(group_hash(labels, a)).or_insert_with(|| {
            gl.push(group_labels(labels, a));
            accs.push(vec![AggAcc::default(); n].into_boxed_slice());
            gdrop.push(false);
            gl.len() - 1
        });
        self.drop[g] |= drop;
        AggAcc::add_row(a.op, &mut self.accs[g], vals);
    }

    /// The result, or `None` (releasing the samples the fold counted) when the fold gave up.
    fn finish(self, ctx: &QueryCtx<'_>, ok: bool, base: usize) -> Option<Val> {
        if !ok {
            ctx.samples.store(base, std::sync::atomic::Ordering::Relaxed);
            return None;
        }
        let op = self.a.op;
        let out = self
            .labels
            .into_iter()
            .zip(self.accs)
            .zip(self.drop)
            .filter_map(|((labels, accs), drop)| finish_group(ctx, op, labels, &accs, None, drop))
            .collect();
        Some(Val::Vector(out))
    }
}

/// The merged result, or `None` with the samples the fold counted released (the central path that
/// follows counts them again).
fn merged_or_release(ctx: &QueryCtx<'_>, op: AggregateOp, partials: Option<Vec<Partial>>, base: usize) -> Option<Val> {
    let r = partials.and_then(|p| merge_partials(ctx, op, p));
    if r.is_none() {
        ctx.samples.store(base, std::sync::atomic::Ordering::Relaxed);
    }
    r
}

/// topk, bottomk, limitk, limit_ratio (upstream `aggregationK`): output keeps the input series' labels.
fn aggregate_k(
    ctx: &QueryCtx<'_>,
    a: &AggregateExpr,
    v: Vec<Series>,
    param: Vec<f64>,
    n: usize,
) -> Result<Val, EngineError> {
    let op = a.op;
    // Upstream `rangeEvalAgg` checks the parameter over all steps first, with `fParams`' Min and Max,
    // which follow Go's `math.Min`/`math.Max`: an infinity wins over NaN, NaN over any number.
    let any_nan = param.iter().any(|p| p.is_nan());
    let go_extreme = |inf: f64, pick: fn(f64, f64) -> f64| {
        if param.contains(&inf) {
            inf
        } else if any_nan {
            f64::NAN
        } else {
            param.iter().copied().fold(-inf, pick)
        }
    };
    let (p_min, p_max) = (go_extreme(f64::NEG_INFINITY, f64::min), go_extreme(f64::INFINITY, f64::max));
    if op == AggregateOp::LimitRatio {
        if p_max == 0.0 && p_min == 0.0 {
            return Ok(Val::Vector(vec![]));
        }
        if any_nan {
            return Err(EngineError::Execution("Ratio value is NaN".into()));
        }
        if p_max > 1.0 {
            ctx.warn(format!("PromQL warning: ratio value should be between -1 and 1, got {}, capping to 1", fmt_g(p_max)));
        }
        if p_min < -1.0 {
            ctx.warn(format!("PromQL warning: ratio value should be between -1 and 1, got {}, capping to -1", fmt_g(p_min)));
        }
    } else {
        // Upstream's bounds: `minInt64` and the largest float64 below 2^63 (`maxInt64`).
        if p_max < 1.0 {
            return Ok(Val::Vector(vec![]));
        }
        if any_nan {
            return Err(EngineError::Execution("Parameter value is NaN".into()));
        }
        if p_min <= -9_223_372_036_854_775_808.0 {
            return Err(EngineError::Execution(format!("Scalar value {} underflows int64", fmt_g(p_min))));
        }
        if p_max >= 9_223_372_036_854_774_784.0 {
            return Err(EngineError::Execution(format!("Scalar value {} overflows int64", fmt_g(p_max))));
        }
    }
    let (ids, gl) = groups(&v, a);
    let mut keep: Vec<Vec<Option<f64>>> = vec![vec![None; n]; v.len()];
    // Upstream `aggregationK`: topk and bottomk ignore histograms with an info; limitk and limit_ratio
    // keep them like floats (their value plays no part).
    let with_hists = matches!(op, AggregateOp::Limitk | AggregateOp::LimitRatio) && v.iter().any(|s| s.hists.is_some());
    match op {
        AggregateOp::Topk => ignore_histograms(ctx, &v, "topk"),
        AggregateOp::Bottomk => ignore_histograms(ctx, &v, "bottomk"),
        _ => {}
    }
    // For instant queries the output order matters: per group, the selected series in rank order.
    let mut order: Vec<(usize, usize, usize)> = Vec::new();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); gl.len()];
    for (k, &g) in ids.iter().enumerate() {
        members[g].push(k);
    }
    let mut cand: Vec<(usize, f64)> = Vec::new();
    for i in 0..n {
        if i % 1024 == 0 {
            ctx.check()?;
        }
        let p = param[i];
        for (g, mem) in members.iter().enumerate() {
            cand.clear();
            if with_hists {
                // A histogram step is a candidate too; its value slot stays empty.
                cand.extend(mem.iter().filter(|&&k| v[k].has(i)).map(|&k| (k, v[k].vals[i].unwrap_or(f64::NAN))));
            } else {
                cand.extend(mem.iter().filter_map(|&k| v[k].vals[i].map(|x| (k, x))));
            }
            if cand.is_empty() {
                continue;
            }
            match op {
                AggregateOp::Topk | AggregateOp::Bottomk => {
                    let k = if p >= cand.len() as f64 { cand.len() } else if p < 1.0 { 0 } else { p as usize };
                    if k == 0 {
                        continue;
                    }
                    let kept = go_heap_k(&cand, k, op == AggregateOp::Topk);
                    for (rank, &(s, x)) in kept.iter().enumerate() {
                        keep[s][i] = Some(x);
                        if i == 0 {
                            order.push((g, rank, s));
                        }
                    }
                }
                AggregateOp::Limitk => {
                    let k = if p >= cand.len() as f64 { cand.len() } else if p < 1.0 { 0 } else { p as usize };
                    for (rank, &(s, x)) in cand.iter().take(k).enumerate() {
                        keep[s][i] = Some(x);
                        if i == 0 {
                            order.push((g, rank, s));
                        }
                    }
                }
                _ => {
                    let r = p.clamp(-1.0, 1.0);
                    for (rank, &(s, x)) in cand.iter().enumerate() {
                        let off = ratio_offset(&v[s].labels);
                        if (r >= 0.0 && off < r) || (r < 0.0 && off >= 1.0 + r) {
                            keep[s][i] = Some(x);
                            if i == 0 {
                                order.push((g, rank, s));
                            }
                        }
                    }
                }
            }
        }
    }
    let mut out: Vec<Option<Series>> = v
        .into_iter()
        .zip(keep)
        .map(|(s, kept)| {
            if with_hists {
                // `kept` marks the chosen steps; each keeps its own float or histogram.
                let vals: Vec<Option<f64>> =
                    kept.iter().zip(&s.vals).map(|(k, x)| if k.is_some() { *x } else { None }).collect();
                let hists = s.hists.as_ref().map(|hs| {
                    hs.iter().zip(&kept).map(|(h, k)| if k.is_some() { h.clone() } else { None }).collect()
                });
                let mut o = Series { vals, hists, ..s };
                o.tidy();
                return o.any_value().then_some(o);
            }
            kept.iter().any(|x| x.is_some()).then_some(Series { vals: kept, hists: None, ..s })
        })
        .collect();
    if n == 1 {
        order.sort_by_key(|&(g, r, _)| (g, r));
        Ok(Val::Vector(order.into_iter().filter_map(|(_, _, s)| out[s].take()).collect()))
    } else {
        Ok(Val::Vector(out.into_iter().flatten().collect()))
    }
}

/// Upstream `aggregationK` for topk (`top`) and bottomk over one group at one step: `cand` in input
/// order, `1 <= k <= cand.len()`. The members kept among equal values, and their order, are those of
/// upstream's Go `container/heap` (a `vectorByValueHeap`, or `vectorByReverseValueHeap` for bottomk):
/// the first k are pushed, then a later sample replaces the heap's root only when strictly better (or
/// the root is NaN and it is not), and the heap is finally put in rank order by `sort.Sort(sort.Reverse
/// (heap))`. Go's `sort.Sort` is an insertion sort up to 12 elements, which is mirrored; beyond that
/// it is pdqsort, and ties among more than 12 kept samples may be listed in another order here.
fn go_heap_k(cand: &[(usize, f64)], k: usize, top: bool) -> Vec<(usize, f64)> {
    // The heap's `Less`: NaN sorts first (the weakest), then by value.
    let less = |a: f64, b: f64| a.is_nan() || if top { a < b } else { a > b };
    let up = |h: &mut Vec<(usize, f64)>, mut j: usize| {
        while j > 0 {
            let i = (j - 1) / 2;
            if !less(h[j].1, h[i].1) {
                break;
            }
            h.swap(i, j);
            j = i;
        }
    };
    let mut h: Vec<(usize, f64)> = Vec::with_capacity(k);
    for &c in cand {
        if h.len() < k {
            h.push(c);
            let j = h.len() - 1;
            up(&mut h, j);
            continue;
        }
        let root = h[0].1;
        let better = if top { root < c.1 } else { root > c.1 };
        if better || (root.is_nan() && !c.1.is_nan()) {
            h[0] = c;
            if k > 1 {
                // `heap.Fix(h, 0)`: sift down (the root cannot move up).
                let mut i = 0;
                loop {
                    let j1 = 2 * i + 1;
                    if j1 >= h.len() {
                        break;
                    }
                    let j2 = j1 + 1;
                    let j = if j2 < h.len() && less(h[j2].1, h[j1].1) { j2 } else { j1 };
                    if !less(h[j].1, h[i].1) {
                        break;
                    }
                    h.swap(i, j);
                    i = j;
                }
            }
        }
    }
    if h.len() <= 12 {
        // Go's `insertionSort` with the reversed `Less`.
        for i in 1..h.len() {
            let mut j = i;
            while j > 0 && less(h[j - 1].1, h[j].1) {
                h.swap(j, j - 1);
                j -= 1;
            }
        }
    } else {
        // Best first, NaN last: a total order (the heap's `Less` is not one when NaNs meet).
        h.sort_by(|a, b| match (a.1.is_nan(), b.1.is_nan()) {
            (true, true) => std::cmp::Ordering::Equal,
            (true, false) => std::cmp::Ordering::Greater,
            (false, true) => std::cmp::Ordering::Less,
            _ if top => b.1.partial_cmp(&a.1).unwrap_or(std::cmp::Ordering::Equal),
            _ => a.1.partial_cmp(&b.1).unwrap_or(std::cmp::Ordering::Equal),
        });
    }
    h
}

/// Upstream `HashRatioSampler.SampleOffset`: the series' position in [0, 1] from `Labels.Hash` of
/// Prometheus' default (stringlabels) build, xxhash64 over its flat encoding: each name and value
/// preceded by its length, one byte below 255, else 0xff and three bytes little-endian
/// (upstream `encodeSize`). The same series are then kept as upstream keeps.
fn ratio_offset(l: &Labels) -> f64 {
    fn put(b: &mut Vec<u8>, s: &str) {
        let n = s.len();
        if n < 255 {
            b.push(n as u8);
        } else {
            b.extend_from_slice(&[0xff, n as u8, (n >> 8) as u8, (n >> 16) as u8]);
        }
        b.extend_from_slice(s.as_bytes());
    }
    let mut b = Vec::with_capacity(128);
    for x in l {
        put(&mut b, x.name);
        put(&mut b, x.value);
    }
    xxhash_rust::xxh64::xxh64(&b, 0) as f64 / u64::MAX as f64
}

/// Go's `strconv.FormatFloat(f, 'f', -1, 64)`.
pub fn fmt_float_f(f: f64) -> String {
    tessera_model::gofloat::format_f(f)
}

fn count_values(ctx: &QueryCtx<'_>, a: &AggregateExpr, v: Vec<Series>, grid: &Grid) -> Result<Val, EngineError> {
    let label = match a.param.as_deref().map(|p| p.unwrap_parens()) {
        Some(Expr::StringLiteral(sl)) => {
            if let Some(raw) = &sl.raw {
                return Err(EngineError::Execution(format!("invalid label name {}", crate::parser::go_quote_bytes(raw))));
            }
            sl.val.clone()
        }
        Some(p) => match super::eval::eval(ctx, p, grid)? {
            Val::Str(s) => s,
            _ => return Err(EngineError::Execution("count_values: expected string parameter".into())),
        },
        None => return Err(EngineError::Execution("count_values: missing parameter".into())),
    };
    if label.is_empty() {
        return Err(EngineError::Execution(format!("invalid label name {}", tessera_model::labels::go_quote(&label))));
    }
    let n = grid.n;
    let (ids, gl) = groups(&v, a);
    let mut out: Vec<Series> = Vec::new();
    // Output series are keyed by their labels: overwriting a grouping label with the value label merges
    // groups (upstream does the same).
    // Keyed by group and value: a float's bits, or a histogram's text.
    let mut idx: HashMap<(usize, Result<u64, String>), usize> = HashMap::new();
    let mut by_labels: HashMap<Labels, usize> = HashMap::new();
    for i in 0..n {
        if i % 1024 == 0 {
            ctx.check()?;
        }
        for (s, &g) in v.iter().zip(&ids) {
            // Upstream `aggregationCountValues`: a histogram counts under its `String()`.
            let hs = s.hist(i).and_then(|h| super::hist::math::to_string(h));
            let x = match (s.vals[i], &hs) {
                (Some(x), _) => x,
                (None, Some(_)) => 0.0,
                (None, None) => continue,
            };
            let key = match &hs {
                Some(t) => (g, Err(t.clone())),
                None => (g, Ok(if x.is_nan() { f64::NAN.to_bits() } else { x.to_bits() })),
            };
            // Each distinct value is an output series of `n` steps: their number is bounded by the
            // sample limit before one more is allocated (a range query over many distinct values).
            if !idx.contains_key(&key) && (out.len() + 1).saturating_mul(n) > ctx.opts.max_samples {
                return Err(EngineError::TooManySamples("query execution".into()));
            }
            let o = *idx.entry(key).or_insert_with(|| {
                let mut b = LabelsBuilder::from_labels(&gl[g]);
                // Upstream `aggregationCountValues` sets the value label on the series, then groups:
                // `without` can drop it again (its own list, or `__name__`); `by` always keeps it.
                if !a.without || (label != "__name__" && !a.grouping.contains(&label)) {
                    b.set(label.clone(), hs.clone().unwrap_or_else(|| fmt_float_f(x)));
                }
                let l = b.build();
                *by_labels.entry(l.clone()).or_insert_with(|| {
                    out.push(Series { hists: None, labels: l, vals: vec![None; n], drop_name: false });
                    out.len() - 1
                })
            });
            let c = out[o].vals[i].get_or_insert(0.0);
            *c += 1.0;
        }
    }
    Ok(Val::Vector(out))
}

/// One classic-histogram bucket.
#[derive(Debug, Clone, Copy)]
struct Bucket {
    upper: f64,
    count: f64,
}

/// Go's `strconv.ParseFloat` for `le` values.
fn parse_le(s: &str) -> Option<f64> {
    let t = s.trim();
    match t.to_ascii_lowercase().as_str() {
        "+inf" | "inf" | "infinity" | "+infinity" => return Some(f64::INFINITY),
        "-inf" | "-infinity" => return Some(f64::NEG_INFINITY),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    if t.is_empty() || t.bytes().any(|c| c.is_ascii_alphabetic() && c != b'e' && c != b'E') {
        return None;
    }
    t.parse().ok()
}

/// Sorts by upper bound and merges equal bounds (upstream `coalesceBuckets`).
fn coalesce(b: &mut Vec<Bucket>) {
    b.sort_by(|x, y| x.upper.partial_cmp(&y.upper).unwrap_or(std::cmp::Ordering::Equal));
    let mut out: Vec<Bucket> = Vec::with_capacity(b.len());
    for x in b.iter() {
        match out.last_mut() {
            Some(l) if l.upper == x.upper => l.count += x.count,
            _ => out.push(*x),
        }
    }
    *b = out;
}

/// Upstream `ensureMonotonicAndIgnoreSmallDeltas`; returns whether monotonicity had to be forced.
fn ensure_monotonic(b: &mut [Bucket]) -> bool {
    let mut forced = false;
    let mut prev = b[0].count;
    for x in b.iter_mut().skip(1) {
        let cur = x.count;
        if cur == prev {
            continue;
        }
        let diff = (prev - cur).abs();
        let sum = prev.abs() + cur.abs();
        if diff / sum.min(f64::MAX) < 1e-12 {
            x.count = prev;
            continue;
        }
        if cur < prev {
            x.count = prev;
            forced = true;
            continue;
        }
        prev = cur;
    }
    forced
}

/// Upstream `BucketQuantile`: (value, forced monotonicity).
fn bucket_quantile(q: f64, mut b: Vec<Bucket>) -> (f64, bool) {
    if q.is_nan() {
        return (f64::NAN, false);
    }
    if q < 0.0 {
        return (f64::NEG_INFINITY, false);
    }
    if q > 1.0 {
        return (f64::INFINITY, false);
    }
    b.sort_by(|x, y| x.upper.partial_cmp(&y.upper).unwrap_or(std::cmp::Ordering::Equal));
    if b.last().map(|x| x.upper) != Some(f64::INFINITY) {
        return (f64::NAN, false);
    }
    coalesce(&mut b);
    let forced = ensure_monotonic(&mut b);
    if b.len() < 2 {
        return (f64::NAN, forced);
    }
    let obs = b[b.len() - 1].count;
    if obs == 0.0 || obs.is_nan() {
        return (f64::NAN, forced);
    }
    let mut rank = q * obs;
    let last = b.len() - 1;
    let idx = b[..last].iter().position(|x| x.count >= rank).unwrap_or(last);
    if idx == last {
        return (b[last - 1].upper, forced);
    }
    if idx == 0 && b[0].upper <= 0.0 {
        return (b[0].upper, forced);
    }
    let mut start = 0.0;
    let end = b[idx].upper;
    let mut count = b[idx].count;
    if idx > 0 {
        start = b[idx - 1].upper;
        count -= b[idx - 1].count;
        rank -= b[idx - 1].count;
    }
    (start + (end - start) * (rank / count), forced)
}

/// Upstream `BucketFraction` for classic buckets.
fn bucket_fraction(lower: f64, upper: f64, mut b: Vec<Bucket>) -> f64 {
    b.sort_by(|x, y| x.upper.partial_cmp(&y.upper).unwrap_or(std::cmp::Ordering::Equal));
    if b.last().map(|x| x.upper) != Some(f64::INFINITY) {
        return f64::NAN;
    }
    coalesce(&mut b);
    ensure_monotonic(&mut b);
    let count = b[b.len() - 1].count;
    if count == 0.0 || lower.is_nan() || upper.is_nan() {
        return f64::NAN;
    }
    if lower >= upper {
        return 0.0;
    }
    let rank_at = |x: f64| -> f64 {
        if x == f64::NEG_INFINITY {
            return 0.0;
        }
        let mut prev_upper = f64::NEG_INFINITY;
        let mut prev_count = 0.0;
        for bk in &b {
            if x <= bk.upper {
                if x == bk.upper {
                    return bk.count;
                }
                // Interpolate inside the bucket; the first bucket starts at 0 if its bound is positive.
                let lo = if prev_upper == f64::NEG_INFINITY {
                    // An infinitely wide first bucket contributes nothing (no interpolation).
                    if bk.upper > 0.0 { 0.0 } else { return bk.count }
                } else {
                    prev_upper
                };
                if bk.upper.is_infinite() {
                    return prev_count;
                }
                if x <= lo {
                    return prev_count;
                }
                return prev_count + (bk.count - prev_count) * (x - lo) / (bk.upper - lo);
            }
            prev_upper = bk.upper;
            prev_count = bk.count;
        }
        count
    };
    (rank_at(upper) - rank_at(lower)) / count
}

const MONOTONICITY_INFO: &str = "PromQL info: input to histogram_quantile needed to be fixed for monotonicity (see https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile)";

/// Upstream `maybeAddMetricName`: the metric name is appended when there is one. Without delayed name
/// removal upstream passes none for these classic-histogram annotations (the name is already gone).
fn with_metric_name(ctx: &QueryCtx<'_>, msg: String, name: &str) -> String {
    if name.is_empty() || !ctx.opts.delayed_name_removal {
        msg
    } else {
        format!("{msg} for metric name {}", tessera_model::labels::go_quote(name))
    }
}

/// Upstream `EvalNodeHelper.resetHistograms` and the two loops of `funcHistogramQuantile` /
/// `funcHistogramFraction`: float samples are classic buckets, grouped by their labels without `le`,
/// and `f` runs per group and step; histogram samples go to `native` one by one. A native histogram
/// whose labels are a classic group's at a step where that group has buckets is a mix: both are
/// dropped there with a warning.
fn per_histogram(
    ctx: &QueryCtx<'_>,
    v: Vec<Series>,
    n: usize,
    mut f: impl FnMut(usize, Vec<Bucket>, &Labels) -> Option<f64>,
    mut native: impl FnMut(usize, &FloatHistogram, &Labels) -> f64,
) -> Vec<Series> {
    let mut idx: HashMap<Labels, usize> = HashMap::new();
    let mut glabels: Vec<Labels> = Vec::new();
    let mut members: Vec<Vec<(usize, f64)>> = Vec::new();
    // Series holding histograms, by their labels, and the steps where a mix dropped them.
    let mut natives: HashMap<&Labels, usize> = HashMap::new();
    for (k, s) in v.iter().enumerate() {
        if s.hists.is_some() {
            natives.insert(&s.labels, k);
        }
    }
    let mut dropped: Vec<(usize, usize)> = Vec::new();
    for (k, s) in v.iter().enumerate() {
        if s.hists.is_some() && s.vals.iter().all(|x| x.is_none()) {
            continue;
        }
        let le = s.labels.get("le");
        let Some(ub) = parse_le(le).filter(|_| s.labels.has("le")) else {
            let msg = format!("PromQL warning: bucket label \"le\" is missing or has a malformed value of \"{le}\"");
            ctx.warn(with_metric_name(ctx, msg, s.labels.metric_name()));
            continue;
        };
        let g = s.labels.drop_names(&["le"]);
        let gi = *idx.entry(g.clone()).or_insert_with(|| {
            glabels.push(g);
            members.push(Vec::new());
            glabels.len() - 1
        });
        members[gi].push((k, ub));
    }
    let mut out = Vec::new();
    for (gi, labels) in glabels.into_iter().enumerate() {
        let mut vals = vec![None; n];
        for (i, val) in vals.iter_mut().enumerate() {
            let b: Vec<Bucket> =
                members[gi].iter().filter_map(|&(k, ub)| v[k].vals[i].map(|c| Bucket { upper: ub, count: c })).collect();
            if b.is_empty() {
                continue;
            }
            if let Some(&k) = natives.get(&labels)
                && v[k].hist(i).is_some()
            {
                let msg = "PromQL warning: vector contains a mix of classic and native histograms".to_string();
                ctx.warn(with_metric_name(ctx, msg, labels.metric_name()));
                dropped.push((k, i));
                continue;
            }
            *val = f(i, b, &labels);
        }
        if vals.iter().any(|x| x.is_some()) {
            out.push(Series { hists: None, labels, vals, drop_name: true });
        }
    }
    for s in &v {
        let Some(hs) = &s.hists else { continue };
        let k = natives.get(&s.labels).copied();
        let vals: Vec<Option<f64>> = hs
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let h = h.as_ref()?;
                if k.is_some_and(|k| dropped.contains(&(k, i))) {
                    return None;
                }
                Some(native(i, h, &s.labels))
            })
            .collect();
        if vals.iter().any(|x| x.is_some()) {
            out.push(Series { hists: None, labels: s.labels.clone(), vals, drop_name: true });
        }
    }
    merge_same_labels(out).unwrap_or_default()
}

/// Upstream's info for a native histogram estimate (`NewNativeHistogramQuantileNaNResultInfo`,
/// `...NaNSkewInfo`, `NewNativeHistogramFractionNaNsInfo`), with the metric name as upstream adds it.
fn histogram_info(ctx: &QueryCtx<'_>, info: Option<HistogramInfo>, labels: &Labels) {
    let Some(info) = info else { return };
    let msg = match info {
        HistogramInfo::QuantileNaNResult => "PromQL info: input to histogram_quantile has NaN observations, result is NaN",
        HistogramInfo::QuantileNaNSkew => "PromQL info: input to histogram_quantile has NaN observations, result is skewed higher",
        HistogramInfo::FractionNaNs => {
            "PromQL info: input to histogram_fraction has NaN observations, which are excluded from all fractions"
        }
    };
    let name = if ctx.opts.delayed_name_removal { labels.metric_name() } else { "" };
    if name.is_empty() {
        ctx.info(msg.to_string());
    } else {
        ctx.info(format!("{msg} for metric name {}", tessera_model::labels::go_quote(name)));
    }
}

pub fn histogram_quantile(ctx: &QueryCtx<'_>, c: &Call, grid: &Grid) -> Result<Val, EngineError> {
    let q = eval_scalar(ctx, &c.args[0], grid)?;
    let v = eval_vector(ctx, &c.args[1], grid)?;
    if let Some(bad) = q.iter().find(|q| q.is_nan() || **q < 0.0 || **q > 1.0) {
        ctx.warn(format!("PromQL warning: quantile value should be between 0 and 1, got {}", fmt_g(*bad)));
    }
    let out = per_histogram(
        ctx,
        v,
        grid.n,
        |i, b, labels| {
            let (r, forced) = bucket_quantile(q[i], b);
            if forced {
                ctx.info(with_metric_name(ctx, MONOTONICITY_INFO.into(), labels.metric_name()));
            }
            Some(r)
        },
        |i, h, labels| {
            let (r, info) = histogram_quantile_annotated(q[i], h);
            histogram_info(ctx, info, labels);
            r
        },
    );
    Ok(Val::Vector(out))
}

pub fn histogram_fraction(ctx: &QueryCtx<'_>, c: &Call, grid: &Grid) -> Result<Val, EngineError> {
    let lo = eval_scalar(ctx, &c.args[0], grid)?;
    let hi = eval_scalar(ctx, &c.args[1], grid)?;
    let v = eval_vector(ctx, &c.args[2], grid)?;
    let out = per_histogram(
        ctx,
        v,
        grid.n,
        |i, b, _| Some(bucket_fraction(lo[i], hi[i], b)),
        |i, h, labels| {
            let (r, info) = histogram_fraction_annotated(lo[i], hi[i], h);
            histogram_info(ctx, info, labels);
            r
        },
    );
    Ok(Val::Vector(out))
}

/// Labels values of `histogram_quantiles`' quantile label: integers keep a `.0` (`0.0`, `1.0`).
fn fmt_quantile_label(q: f64) -> String {
    if q.is_finite() && q.fract() == 0.0 && q.abs() < 1e21 { format!("{q:.1}") } else { fmt_float_f(q) }
}

/// `histogram_quantiles(v, "label", q1, q2, ...)` (experimental): one output series per quantile, told
/// apart by `label`.
pub fn histogram_quantiles(ctx: &QueryCtx<'_>, c: &Call, grid: &Grid) -> Result<Val, EngineError> {
    let v = eval_vector(ctx, &c.args[0], grid)?;
    let label = match super::eval::eval(ctx, &c.args[1], grid)? {
        Val::Str(s) => s,
        _ => return Err(EngineError::Execution("histogram_quantiles: expected string label".into())),
    };
    let mut qs = Vec::new();
    for a in &c.args[2..] {
        qs.push(eval_scalar(ctx, a, grid)?);
    }
    for q in &qs {
        if let Some(bad) = q.iter().find(|q| q.is_nan() || **q < 0.0 || **q > 1.0) {
            ctx.warn(format!("PromQL warning: quantile value should be between 0 and 1, got {}", fmt_g(*bad)));
        }
    }
    let mut out = Vec::new();
    for q in &qs {
        let res = per_histogram(
            ctx,
            v.clone(),
            grid.n,
            |i, b, labels| {
                let (r, forced) = bucket_quantile(q[i], b);
                if forced {
                    ctx.info(with_metric_name(ctx, MONOTONICITY_INFO.into(), labels.metric_name()));
                }
                Some(r)
            },
            |i, h, labels| {
                let (r, info) = histogram_quantile_annotated(q[i], h);
                histogram_info(ctx, info, labels);
                r
            },
        );
        for mut s in res {
            let mut b = LabelsBuilder::from_labels(&s.labels);
            b.set(label.clone(), fmt_quantile_label(q[0]));
            s.labels = b.build();
            out.push(s);
        }
    }
    Ok(Val::Vector(super::eval::merge_same_labels(out)?))
}

#[cfg(test)]
mod agg_acc_tests {
    use super::*;
    use proptest::prelude::*;

    /// The accumulator as it was before its fields were overlaid (80 bytes, one field per use): the reference.
    #[derive(Debug, Clone, Copy, Default)]
    struct RefAcc {
        count: f64,
        sum: f64,
        c: f64,
        /// avg: incremental mean after a sum overflow.
        mean: f64,
        incremental: bool,
        min: f64,
        max: f64,
        /// stddev/stdvar: Welford's running mean and sum of squared deviations (upstream uses no Kahan
        /// compensation here, unlike `stdvar_over_time`).
        m: f64,
        aux: f64,
    }

    impl RefAcc {
        #[inline]
        fn add(&mut self, op: AggregateOp, v: f64) {
            self.count += 1.0;
            match op {
                AggregateOp::Sum => {
                    // Upstream `aggregation` for SUM: the first sample starts the sum, the rest are added with
                    // Kahan-Neumaier compensation (`kahansum.Inc`).
                    if self.count == 1.0 {
                        self.sum = v;
                        self.c = 0.0;
                    } else {
                        (self.sum, self.c) = kahan_inc(v, self.sum, self.c);
                    }
                }
                AggregateOp::Avg => {
                    // Upstream `aggregation` for AVG: Kahan sum, incremental mean once the sum overflows.
                    if self.count == 1.0 {
                        self.sum = v;
                        self.c = 0.0;
                        return;
                    }
                    if !self.incremental {
                        let (ns, nc) = kahan_inc(v, self.sum, self.c);
                        if !ns.is_infinite() {
                            self.sum = ns;
                            self.c = nc;
                            return;
                        }
                        self.incremental = true;
                        self.mean = self.sum / (self.count - 1.0);
                        self.c /= self.count - 1.0;
                    }
                    let q = (self.count - 1.0) / self.count;
                    (self.mean, self.c) = kahan_inc(v / self.count, q * self.mean, q * self.c);
                }
                AggregateOp::Min if self.count == 1.0 || v < self.min || self.min.is_nan() => self.min = v,
                AggregateOp::Max if self.count == 1.0 || v > self.max || self.max.is_nan() => self.max = v,
                AggregateOp::Stddev | AggregateOp::Stdvar => {
                    // Upstream `aggregation` for STDVAR/STDDEV: plain Welford; the first sample sets the mean
                    // and a NaN or infinite first sample makes the variance NaN.
                    if self.count == 1.0 {
                        self.m = v;
                        self.aux = if v.is_finite() { 0.0 } else { f64::NAN };
                        return;
                    }
                    let delta = v - self.m;
                    self.m += delta / self.count;
                    self.aux += delta * (v - self.m);
                }
                _ => {}
            }
        }

        /// Combines two partials of the same group and step (the merge stage of pushdown).
        fn merge(&mut self, op: AggregateOp, o: &RefAcc) {
            if o.count == 0.0 {
                return;
            }
            if self.count == 0.0 {
                *self = *o;
                return;
            }
            match op {
                AggregateOp::Sum => {
                    (self.sum, self.c) = kahan_inc(o.sum, self.sum, self.c);
                    self.c += o.c;
                }
                AggregateOp::Min if o.min < self.min || self.min.is_nan() => self.min = o.min,
                AggregateOp::Max if o.max > self.max || self.max.is_nan() => self.max = o.max,
                AggregateOp::Avg => {
                    // While neither side overflowed, merge the compensated sums (keeps Kahan's precision);
                    // otherwise the weighted mean of the two partial means, in incremental-mean form.
                    if !self.incremental && !o.incremental {
                        let (ns, nc) = kahan_inc(o.sum, self.sum, self.c);
                        if !ns.is_infinite() {
                            self.sum = ns;
                            self.c = nc + o.c;
                            self.count += o.count;
                            return;
                        }
                    }
                    let (a, b) = (self.finish(op), o.finish(op));
                    let n = self.count + o.count;
                    self.mean = a * (self.count / n) + b * (o.count / n);
                    self.c = 0.0;
                    self.incremental = true;
                    self.count = n;
                    return;
                }
                AggregateOp::Stddev | AggregateOp::Stdvar => {
                    // Chan et al.'s pairwise combination of two Welford states.
                    let n = self.count + o.count;
                    let d = o.m - self.m;
                    self.aux = self.aux + o.aux + d * d * self.count * o.count / n;
                    self.m += d * o.count / n;
                    self.count = n;
                    return;
                }
                _ => {}
            }
            self.count += o.count;
        }

        fn finish(&self, op: AggregateOp) -> f64 {
            match op {
                // Upstream adds the compensation unconditionally (it is 0 once the sum is infinite).
                AggregateOp::Sum => self.sum + self.c,
                AggregateOp::Avg => {
                    if self.incremental {
                        self.mean + self.c
                    } else {
                        self.sum / self.count + self.c / self.count
                    }
                }
                AggregateOp::Count => self.count,
                AggregateOp::Group => 1.0,
                AggregateOp::Min => self.min,
                AggregateOp::Max => self.max,
                AggregateOp::Stdvar => self.aux / self.count,
                AggregateOp::Stddev => (self.aux / self.count).sqrt(),
                _ => f64::NAN,
            }
        }
    }

    fn values() -> impl Strategy<Value = f64> {
        prop_oneof![
            -1e6..1e6f64,
            Just(f64::MAX),
            Just(-f64::MAX),
            Just(f64::MAX / 3.0),
            Just(f64::INFINITY),
            Just(f64::NEG_INFINITY),
            Just(f64::NAN),
            Just(0.0),
            Just(-0.0),
            Just(1e-300),
            any::<f64>(),
        ]
    }

    const OPS: [AggregateOp; 7] =
        [AggregateOp::Sum, AggregateOp::Avg, AggregateOp::Min, AggregateOp::Max, AggregateOp::Count, AggregateOp::Stddev, AggregateOp::Stdvar];

    fn same(x: f64, y: f64) -> bool {
        x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan())
    }

    proptest! {
        /// A row added at once ends in the same state, to the bit, as its values added one by one: every
        /// operation, gaps (`None`) included, several series into one row.
        #[test]
        fn a_row_adds_as_its_values_do(rows in proptest::collection::vec(proptest::collection::vec(proptest::option::of(values()), 12), 1..6)) {
            for op in OPS {
                let mut by_row = vec![AggAcc::default(); 12];
                let mut by_value = vec![AggAcc::default(); 12];
                for r in &rows {
                    AggAcc::add_row(op, &mut by_row, r);
                    for (acc, x) in by_value.iter_mut().zip(r) {
                        if let Some(x) = x {
                            acc.add(op, *x);
                        }
                    }
                }
                for (a, b) in by_row.iter().zip(&by_value) {
                    prop_assert_eq!(a.count, b.count);
                    prop_assert!(same(a.sum, b.sum) && same(a.c, b.c), "{:?} {:?} {:?} {:?}", op, rows, a, b);
                    prop_assert!(same(a.finish(op), b.finish(op)));
                }
            }
        }

        /// The overlaid accumulator finishes to the same bits as the one-field-per-use one after the
        /// same additions and merges, overflows into the incremental mean and non-finite values included.
        #[test]
        fn overlaid_fields_answer_as_before(vs in proptest::collection::vec(values(), 1..40), ws in proptest::collection::vec(values(), 0..20)) {
            for op in OPS {
                let (mut new, mut old) = (AggAcc::default(), RefAcc::default());
                for &v in &vs {
                    new.add(op, v);
                    old.add(op, v);
                    prop_assert!(same(new.finish(op), old.finish(op)), "{op:?} add {vs:?}");
                }
                // A second partial merged in (the merge stage of pushdown), both ways round.
                let (mut new2, mut old2) = (AggAcc::default(), RefAcc::default());
                for &w in &ws {
                    new2.add(op, w);
                    old2.add(op, w);
                }
                let (mut a, mut b) = (new, old);
                a.merge(op, &new2);
                b.merge(op, &old2);
                prop_assert!(same(a.finish(op), b.finish(op)), "{op:?} merge {vs:?} {ws:?}");
                new2.merge(op, &new);
                old2.merge(op, &old);
                prop_assert!(same(new2.finish(op), old2.finish(op)), "{op:?} merge {ws:?} {vs:?}");
            }
        }
    }

    #[test]
    fn an_overflowing_avg_switches_to_the_incremental_mean_as_before() {
        let (mut new, mut old) = (AggAcc::default(), RefAcc::default());
        for v in [f64::MAX, f64::MAX, 1.0, -f64::MAX] {
            new.add(AggregateOp::Avg, v);
            old.add(AggregateOp::Avg, v);
        }
        assert!(new.incremental && old.incremental);
        assert_eq!(new.finish(AggregateOp::Avg).to_bits(), old.finish(AggregateOp::Avg).to_bits());
        assert!(new.finish(AggregateOp::Avg).is_finite());
        assert!(std::mem::size_of::<AggAcc>() <= 32, "{}", std::mem::size_of::<AggAcc>());
    }
}
