//! Native histograms in the engine: the annotation texts upstream attaches to histogram evaluation
//! (`util/annotations`), the histogram cases of the range functions ([`range_window`]: `histogramRate`,
//! `instantValue`, the `*_over_time` family, `changes`/`resets`, with the histograms' start timestamps
//! where upstream uses them), of anchored and smoothed ranges
//! ([`extended_histogram_rate`], [`smoothed_histogram`]), the Kahan-compensated sums and means shared by
//! `sum`/`avg` and `sum_over_time`/`avg_over_time` ([`HistKahan`]), the counter-reset hints upstream's
//! `HistogramStatsIterator` derives below `histogram_count`/`_sum`/`_avg` ([`histogram_stats_selectors`],
//! [`derive_stats_hints`]), and [`math`], the one seam through which the engine reaches histogram
//! arithmetic.
//!
//! # Key decision: one seam for histogram arithmetic
//! Addition, subtraction, scaling, `Compact`, `DetectReset`, `Equals`, `CopyToSchema`, `TrimBuckets`,
//! quantiles and fractions live in `tessera_model::histogram_float` and `histogram_quantile` (mirroring upstream
//! `model/histogram` and `promql/quantile.go`), not here. The engine reaches them through [`math`],
//! whose functions are named after upstream's methods and map the model's errors onto the two cases
//! the engine treats differently (incompatible schemas, anything else).

use super::eval::{HPoint, QueryCtx};
use super::functions::{Window, is_st_reset, st_overlap_warning, st_overlaps};
use std::sync::Arc;
use tessera_model::histogram::CounterResetHint;
use tessera_model::{FloatHistogram, Sample};

/// The histogram arithmetic the engine uses: thin wrappers over `tessera_model::histogram_float`
/// (upstream `model/histogram`) and `tessera_model::histogram_quantile` (upstream `promql/quantile.go`),
/// mapping their errors onto what the engine needs to tell apart.
pub mod math {
    use tessera_model::FloatHistogram;
    use tessera_model::histogram_float::HistogramError;

    /// Why an operation gave no histogram.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum HistOpError {
        /// Upstream `ErrHistogramsIncompatibleSchema` (exponential with custom buckets).
        IncompatibleSchema,
        /// Any other error (an invalid layout upstream would panic on).
        Incompatible,
    }

    fn map_err(e: HistogramError) -> HistOpError {
        if e == HistogramError::IncompatibleSchema { HistOpError::IncompatibleSchema } else { HistOpError::Incompatible }
    }

    /// What an addition or subtraction reports beside its result (upstream's extra return values).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct OpInfo {
        /// A counter reset met a not-counter-reset (upstream `counterResetCollision`).
        pub counter_reset_collision: bool,
        /// Custom bounds were reconciled (upstream `nhcbBoundsReconciled`).
        pub nhcb_bounds_reconciled: bool,
    }

    /// Upstream `FloatHistogram.Mul`: every count and the sum times `f`.
    pub fn mul(h: &mut FloatHistogram, f: f64) -> Result<(), HistOpError> {
        h.mul(f);
        Ok(())
    }

    /// Upstream `FloatHistogram.Div`.
    pub fn div(h: &mut FloatHistogram, f: f64) -> Result<(), HistOpError> {
        h.div(f);
        Ok(())
    }

    /// Upstream `FloatHistogram.Add`: `h += other`.
    pub fn add(h: &mut FloatHistogram, other: &FloatHistogram) -> Result<OpInfo, HistOpError> {
        let (c, r) = h.add(other).map_err(map_err)?;
        Ok(OpInfo { counter_reset_collision: c, nhcb_bounds_reconciled: r })
    }

    /// Upstream `FloatHistogram.Sub`: `h -= other`.
    pub fn sub(h: &mut FloatHistogram, other: &FloatHistogram) -> Result<OpInfo, HistOpError> {
        let (c, r) = h.sub(other).map_err(map_err)?;
        Ok(OpInfo { counter_reset_collision: c, nhcb_bounds_reconciled: r })
    }

    /// Upstream `FloatHistogram.KahanAdd`: `h += other` with the compensation histogram `c`; returns
    /// the new compensation.
    pub fn kahan_add(
        h: &mut FloatHistogram,
        other: &FloatHistogram,
        c: Option<FloatHistogram>,
    ) -> Result<(FloatHistogram, OpInfo), HistOpError> {
        let (c, col, r) = h.kahan_add(other, c).map_err(map_err)?;
        Ok((c, OpInfo { counter_reset_collision: col, nhcb_bounds_reconciled: r }))
    }

    /// Upstream `FloatHistogram.HasOverflow`.
    pub fn has_overflow(h: &FloatHistogram) -> bool {
        h.has_overflow()
    }

    /// Upstream `FloatHistogram.DetectReset`: whether `cur` is a counter reset after `prev`.
    pub fn detect_reset(cur: &FloatHistogram, prev: &FloatHistogram) -> Option<bool> {
        Some(cur.detect_reset(prev))
    }

    /// Upstream `FloatHistogram.Equals`.
    pub fn equals(a: &FloatHistogram, b: &FloatHistogram) -> Option<bool> {
        Some(a.equals(b))
    }

    /// Upstream `FloatHistogram.CopyToSchema`: a copy reduced to the lower `schema`.
    pub fn copy_to_schema(h: &FloatHistogram, schema: i32) -> Result<FloatHistogram, HistOpError> {
        h.copy_to_schema(schema).map_err(map_err)
    }

    /// Upstream `histogramVariance` (behind `histogram_stdvar`; `histogram_stddev` is its root).
    pub fn stdvar(h: &FloatHistogram) -> Option<f64> {
        Some(tessera_model::histogram_quantile::histogram_stdvar(h))
    }

    /// Upstream `FloatHistogram.String()` (the value label `count_values` writes for a histogram).
    pub fn to_string(h: &FloatHistogram) -> Option<String> {
        Some(h.to_string())
    }

    /// Upstream `FloatHistogram.TrimBuckets` (the `</` and `>/` operators): `upper` trims observations
    /// above `rhs`, otherwise those below.
    pub fn trim_buckets(h: &mut FloatHistogram, rhs: f64, upper: bool) {
        h.trim_buckets(rhs, upper);
    }

    /// Upstream `FloatHistogram.Compact(0)`.
    pub fn compact(h: &mut FloatHistogram) -> Result<(), HistOpError> {
        h.compact(0);
        Ok(())
    }
}

/// Upstream `NewMixedFloatsHistogramsWarning`.
pub fn mixed_floats_histograms_warning(metric: &str) -> String {
    format!("PromQL warning: encountered a mix of histograms and floats for metric name {}", go_q(metric))
}

/// Upstream `NewMixedFloatsHistogramsAggWarning`.
pub fn mixed_floats_histograms_agg_warning() -> String {
    "PromQL warning: encountered a mix of histograms and floats for aggregation".into()
}

/// Upstream `NewHistogramIgnoredInMixedRangeInfo`.
pub fn ignored_in_mixed_range_info(metric: &str) -> String {
    format!(
        "PromQL info: ignored histograms in a range containing both floats and histograms for metric name {}",
        go_q(metric)
    )
}

/// Upstream `NewHistogramIgnoredInAggregationInfo`.
pub fn ignored_in_aggregation_info(aggregation: &str) -> String {
    format!("PromQL info: ignored histogram in {aggregation} aggregation")
}

/// Upstream `NewNativeHistogramNotCounterWarning`.
pub fn not_counter_warning(metric: &str) -> String {
    format!("PromQL warning: this native histogram metric is not a counter: {}", go_q(metric))
}

/// Upstream `NewNativeHistogramNotGaugeWarning`.
pub fn not_gauge_warning(metric: &str) -> String {
    format!("PromQL warning: this native histogram metric is not a gauge: {}", go_q(metric))
}

/// Upstream `NewMixedExponentialCustomHistogramsWarning`.
pub fn mixed_exponential_custom_warning(metric: &str) -> String {
    format!(
        "PromQL warning: vector contains a mix of histograms with exponential and custom buckets schemas for metric name {}",
        go_q(metric)
    )
}

/// Upstream `NewIncompatibleTypesInBinOpInfo`.
pub fn incompatible_types_in_binop_info(lhs: &str, op: &str, rhs: &str) -> String {
    format!("PromQL info: incompatible sample types encountered for binary operator {}: {lhs} {op} {rhs}", go_q(op))
}

/// Upstream `NewIncompatibleBucketLayoutInBinOpWarning`.
pub fn incompatible_bucket_layout_in_binop_warning(op: &str) -> String {
    format!("PromQL warning: incompatible bucket layout encountered for binary operator {op}")
}

/// Upstream `NewHistogramCounterResetCollisionWarning` (`operation`: addition, subtraction, aggregation).
pub fn counter_reset_collision_warning(operation: &str) -> String {
    format!("PromQL warning: conflicting counter resets during histogram {operation}")
}

/// Upstream `NewMismatchedCustomBucketsHistogramsInfo`.
pub fn mismatched_custom_buckets_info(operation: &str) -> String {
    format!("PromQL info: mismatched custom buckets were reconciled during {operation}")
}

fn go_q(s: &str) -> String {
    tessera_model::labels::go_quote(s)
}

/// What a range function yields for one window of a series that holds histograms.
pub enum HOut {
    None,
    F(f64),
    H(Arc<FloatHistogram>),
}

/// Range functions over a window holding histograms (upstream `funcXxx` in `functions.go`, which see a
/// window's `Floats` and `Histograms` apart). `f`/`h`: the window's float and histogram samples; `hsts`
/// the histograms' start timestamps (upstream `StartTimestamps.Histograms`: aligned with `h`, or empty);
/// `win` the float window as the float kernels see it (with the floats' start timestamps); `k` the float
/// kernel.
#[allow(clippy::too_many_arguments)]
pub fn range_window(
    ctx: &QueryCtx<'_>,
    name: &str,
    metric: &str,
    f: &[Sample],
    h: &[HPoint],
    hsts: &[i64],
    win: &Window<'_>,
    k: fn(&Window<'_>) -> Option<f64>,
) -> HOut {
    let fk = |w: &Window<'_>| k(w).map_or(HOut::None, HOut::F);
    if h.is_empty() {
        return fk(win);
    }
    match name {
        // Upstream `funcCountOverTime`, `funcPresentOverTime`.
        "count_over_time" => HOut::F((f.len() + h.len()) as f64),
        "present_over_time" => HOut::F(1.0),
        // Upstream `funcLastOverTime`: the later of the last float and the last histogram.
        "last_over_time" => match f.last() {
            Some(p) if h[h.len() - 1].t < p.t => HOut::F(p.v),
            _ => HOut::H(h[h.len() - 1].h.clone()),
        },
        // Upstream `funcFirstOverTime`.
        "first_over_time" => match f.first() {
            Some(p) if p.t < h[0].t => HOut::F(p.v),
            _ => HOut::H(h[0].h.clone()),
        },
        // Upstream `funcTsOfLastOverTime`, `funcTsOfFirstOverTime`.
        "ts_of_last_over_time" => {
            let tf = f.last().map_or(0, |p| p.t);
            HOut::F(tf.max(h[h.len() - 1].t) as f64 / 1000.0)
        }
        "ts_of_first_over_time" => {
            let tf = f.first().map_or(i64::MAX, |p| p.t);
            HOut::F(tf.min(h[0].t) as f64 / 1000.0)
        }
        // Upstream `compareOverTime`, `funcQuantileOverTime`, `varianceOverTime`, `funcMadOverTime`:
        // floats only, histograms ignored with an info when there are floats.
        "min_over_time" | "max_over_time" | "ts_of_min_over_time" | "ts_of_max_over_time" | "quantile_over_time"
        | "stddev_over_time" | "stdvar_over_time" | "mad_over_time" => {
            if f.is_empty() {
                return HOut::None;
            }
            ctx.info(ignored_in_mixed_range_info(metric));
            fk(win)
        }
        // Upstream `funcDeriv`, `funcPredictLinear`, `funcDoubleExponentialSmoothing`: two floats needed.
        "deriv" | "predict_linear" | "double_exponential_smoothing" => {
            if f.len() < 2 {
                if f.len() == 1 {
                    ctx.info(ignored_in_mixed_range_info(metric));
                }
                return HOut::None;
            }
            ctx.info(ignored_in_mixed_range_info(metric));
            fk(win)
        }
        // Upstream `extrapolatedRate`, `funcSumOverTime`, `funcAvgOverTime`: a mix is dropped with a warning.
        "rate" | "increase" | "delta" | "sum_over_time" | "avg_over_time" => {
            if !f.is_empty() {
                ctx.warn(mixed_floats_histograms_warning(metric));
                return HOut::None;
            }
            match name {
                "rate" | "increase" | "delta" => {
                    histogram_extrapolated_rate(ctx, metric, h, hsts, win, name != "delta", name == "rate")
                }
                "sum_over_time" => sum_over_time(ctx, metric, h, false),
                _ => sum_over_time(ctx, metric, h, true),
            }
        }
        "irate" | "idelta" => instant_value(ctx, metric, f, h, hsts, name == "irate", win, k),
        "changes" | "resets" => changes_or_resets(f, win.sts, h, hsts, name == "resets"),
        _ => HOut::None,
    }
}

/// Upstream `extrapolatedRate` for a window of histograms (with `histogramRate`). `sts`: the
/// histograms' start timestamps (aligned with `h`, or empty). For a counter whose first sample's start
/// time lies inside the window, the increase is taken from a zero histogram at that start time instead
/// of extrapolating to the left, which also gives a single sample a rate.
fn histogram_extrapolated_rate(
    ctx: &QueryCtx<'_>,
    metric: &str,
    h: &[HPoint],
    sts: &[i64],
    win: &Window<'_>,
    is_counter: bool,
    is_rate: bool,
) -> HOut {
    if h.is_empty() {
        return HOut::None;
    }
    let n1 = h.len() - 1;
    let mut result = None;
    if n1 > 0 {
        match histogram_rate(ctx, metric, h, sts, is_counter) {
            Some(r) => result = Some(r),
            // The histograms are not compatible with each other.
            None => return HOut::None,
        }
    }
    let (first_t, last_t) = (h[0].t, h[n1].t);
    if is_counter && !sts.is_empty() && sts[0] != 0 && sts[0] > win.range_start && sts[0] < first_t {
        // A zero sample at the first sample's start time (the range start is exclusive).
        let sampled = (last_t - sts[0]) as f64 / 1000.0;
        let avg = if n1 > 0 { (last_t - first_t) as f64 / 1000.0 / n1 as f64 } else { 0.0 };
        let result = match result {
            None => (*h[0].h).clone(),
            Some(mut r) => {
                if !add_or_sub_annotated(ctx, &mut r, &h[0].h, false, metric) {
                    return HOut::None;
                }
                r
            }
        };
        return scale_rate(result, 0.0, sampled, avg, last_t, win, is_rate);
    }
    match result {
        // A single sample without a usable start time has no rate.
        None => HOut::None,
        Some(r) => extrapolate_histogram(r, first_t, h[0].h.count, last_t, n1, win, is_counter, is_rate),
    }
}

/// The extrapolating tail of upstream `extrapolatedRate` for histograms: `result` (last minus first,
/// resets corrected) of `n1 + 1 >= 2` samples from `first_t` (whose count is `first_count`) to `last_t`,
/// extended towards the window's edges and, for `rate`, divided by its length.
#[allow(clippy::too_many_arguments)]
pub fn extrapolate_histogram(
    result: FloatHistogram,
    first_t: i64,
    first_count: f64,
    last_t: i64,
    n1: usize,
    win: &Window<'_>,
    is_counter: bool,
    is_rate: bool,
) -> HOut {
    let mut to_start = (first_t - win.range_start) as f64 / 1000.0;
    let sampled = (last_t - first_t) as f64 / 1000.0;
    let avg = sampled / n1 as f64;
    if to_start >= avg * 1.1 {
        to_start = avg / 2.0;
    }
    if is_counter && result.count > 0.0 && first_count >= 0.0 {
        let to_zero = sampled * (first_count / result.count);
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    scale_rate(result, to_start, sampled, avg, last_t, win, is_rate)
}

/// Scales an increase over `sampled` seconds to the window: `to_start` seconds before, up to half an
/// interval (or the distance to the window's end) after, per second for `rate`.
fn scale_rate(mut result: FloatHistogram, to_start: f64, sampled: f64, avg: f64, last_t: i64, win: &Window<'_>, is_rate: bool) -> HOut {
    let mut to_end = (win.range_end - last_t) as f64 / 1000.0;
    if to_end >= avg * 1.1 {
        to_end = avg / 2.0;
    }
    let mut factor = if sampled != 0.0 { (sampled + to_start + to_end) / sampled } else { 1.0 };
    if is_rate {
        factor /= win.range_ms as f64 / 1000.0;
    }
    if math::mul(&mut result, factor).is_err() {
        return HOut::None;
    }
    HOut::H(Arc::new(result))
}

/// Upstream `histogramRate`: last minus first, plus every value lost at a counter reset; `None` (with
/// the annotation upstream adds) when the histograms cannot be combined. For a counter, a start-timestamp
/// reset (`sts` aligned with `points`, or empty) counts like a detected reset, and a start time
/// overlapping the previous sample is warned about.
fn histogram_rate(ctx: &QueryCtx<'_>, metric: &str, points: &[HPoint], sts: &[i64], is_counter: bool) -> Option<FloatHistogram> {
    let st_reset = |i: usize| i < sts.len() && is_st_reset(sts[i - 1], points[i - 1].t, sts[i], points[i].t);
    let first = &points[0].h;
    let last = &points[points.len() - 1].h;
    if is_counter && (first.counter_reset_hint == CounterResetHint::Gauge || last.counter_reset_hint == CounterResetHint::Gauge) {
        ctx.warn(not_counter_warning(metric));
    }
    let mut prev: Arc<FloatHistogram> = first.clone();
    let mut custom = first.schema == tessera_model::histogram::CUSTOM_BUCKETS_SCHEMA;
    if is_counter {
        let second = &points[1].h;
        // Start timestamps first, as upstream checks them (`||` short-circuits `DetectReset`).
        if st_reset(1) || math::detect_reset(second, &prev)? {
            prev = Arc::new(FloatHistogram {
                schema: second.schema,
                custom_values: second.custom_values.clone(),
                ..FloatHistogram::default()
            });
            custom = second.schema == tessera_model::histogram::CUSTOM_BUCKETS_SCHEMA;
        }
    }
    let is_custom = |h: &FloatHistogram| h.schema == tessera_model::histogram::CUSTOM_BUCKETS_SCHEMA;
    if is_custom(last) != custom {
        ctx.warn(mixed_exponential_custom_warning(metric));
        return None;
    }
    let mut min_schema = last.schema.min(prev.schema);
    for p in &points[1..points.len() - 1] {
        if !is_counter {
            continue;
        }
        if p.h.counter_reset_hint == CounterResetHint::Gauge {
            ctx.warn(not_counter_warning(metric));
        }
        min_schema = min_schema.min(p.h.schema);
        if is_custom(&p.h) != custom {
            ctx.warn(mixed_exponential_custom_warning(metric));
            return None;
        }
    }
    let mut h = if last.schema > min_schema { math::copy_to_schema(last, min_schema).ok()? } else { (**last).clone() };
    match math::sub(&mut h, &prev) {
        Err(math::HistOpError::IncompatibleSchema) => {
            ctx.warn(mixed_exponential_custom_warning(metric));
            return None;
        }
        Err(_) => {}
        Ok(i) => {
            if i.nhcb_bounds_reconciled {
                ctx.info(mismatched_custom_buckets_info("subtraction"));
            }
        }
    }
    if is_counter {
        // `prev` is the first sample, or the empty histogram standing in for it after a reset.
        let mut overlap_warned = false;
        for (i, cur) in points.iter().enumerate().skip(1) {
            if !overlap_warned && i < sts.len() && st_overlaps(sts[i - 1], points[i - 1].t, sts[i]) {
                ctx.warn(st_overlap_warning(metric));
                overlap_warned = true;
            }
            let cur = &cur.h;
            let p = prev;
            prev = cur.clone();
            if st_reset(i) || math::detect_reset(cur, &p)? {
                match math::add(&mut h, &p) {
                    Err(math::HistOpError::IncompatibleSchema) => {
                        ctx.warn(mixed_exponential_custom_warning(metric));
                        return None;
                    }
                                Err(_) => {}
                    Ok(i) => {
                        if i.nhcb_bounds_reconciled {
                            ctx.info(mismatched_custom_buckets_info("addition"));
                        }
                    }
                }
            }
        }
    } else if first.counter_reset_hint != CounterResetHint::Gauge || last.counter_reset_hint != CounterResetHint::Gauge {
        ctx.warn(not_gauge_warning(metric));
    }
    h.counter_reset_hint = CounterResetHint::Gauge;
    math::compact(&mut h).ok()?;
    Some(h)
}

/// [`histogram_rate`] from a window's aggregate (a downsampling tier's buckets) rather than its
/// samples, for windows whose histograms all share one schema, zero threshold and custom bounds (so
/// upstream's schema reduction and bound reconciliation do nothing): `last - first + corr`, or
/// `last + corr` when the second sample is a reset (upstream then replaces the first sample by an empty
/// histogram); `middle_gauge`: a sample other than the first and last has a gauge hint. The same
/// warnings as upstream.
#[allow(clippy::too_many_arguments)]
pub fn histogram_rate_agg(
    ctx: &QueryCtx<'_>,
    metric: &str,
    first: &FloatHistogram,
    second_reset: bool,
    last: &FloatHistogram,
    corr: Option<&FloatHistogram>,
    middle_gauge: bool,
    is_counter: bool,
) -> Option<FloatHistogram> {
    let gauge = |h: &FloatHistogram| h.counter_reset_hint == CounterResetHint::Gauge;
    if is_counter && (gauge(first) || gauge(last)) {
        ctx.warn(not_counter_warning(metric));
    }
    if is_counter && middle_gauge {
        ctx.warn(not_counter_warning(metric));
    }
    let mut h = last.clone();
    if !(is_counter && second_reset) {
        math::sub(&mut h, first).ok()?;
    } else {
        let empty = FloatHistogram { schema: first.schema, custom_values: first.custom_values.clone(), ..FloatHistogram::default() };
        math::sub(&mut h, &empty).ok()?;
    }
    if is_counter {
        if let Some(c) = corr {
            math::add(&mut h, c).ok()?;
        }
    } else if !gauge(first) || !gauge(last) {
        ctx.warn(not_gauge_warning(metric));
    }
    h.counter_reset_hint = CounterResetHint::Gauge;
    math::compact(&mut h).ok()?;
    Some(h)
}

/// A Kahan-compensated sum or mean of histograms, as upstream computes it in `funcSumOverTime`,
/// `funcAvgOverTime` and `aggregation` (SUM, AVG): `KahanAdd` into a running sum; for a mean, once
/// the sum overflows, an incremental mean from then on. Tracks the counter-reset hints seen and
/// whether custom bounds were reconciled, for the annotations.
#[derive(Debug, Clone)]
pub struct HistKahan {
    sum: FloatHistogram,
    c: Option<FloatHistogram>,
    mean: Option<FloatHistogram>,
    pub count: f64,
    avg: bool,
    pub counter_reset: bool,
    pub not_counter_reset: bool,
    pub reconciled: bool,
    /// The first error of an addition (upstream then stops: `incompatibleHistograms`).
    pub err: Option<math::HistOpError>,
}

impl HistKahan {
    pub fn new(first: &FloatHistogram, avg: bool) -> Self {
        let mut k = HistKahan {
            sum: first.clone(),
            c: None,
            mean: None,
            count: 1.0,
            avg,
            counter_reset: false,
            not_counter_reset: false,
            reconciled: false,
            err: None,
        };
        k.track(first);
        k
    }

    fn track(&mut self, h: &FloatHistogram) {
        match h.counter_reset_hint {
            CounterResetHint::CounterReset => self.counter_reset = true,
            CounterResetHint::NotCounterReset => self.not_counter_reset = true,
            _ => {}
        }
    }

    pub fn add(&mut self, h: &FloatHistogram) {
        if self.err.is_some() {
            return;
        }
        self.track(h);
        self.count += 1.0;
        let count = self.count;
        if !self.avg {
            // A sum never switches to a mean: add in place (no copy of the running sum per addition).
            // `KahanAdd` checks everything that can fail before it changes the sum.
            match math::kahan_add(&mut self.sum, h, self.c.take()) {
                Err(e) => self.err = Some(e),
                Ok((c, info)) => {
                    self.reconciled |= info.nhcb_bounds_reconciled;
                    self.c = Some(c);
                }
            }
            return;
        }
        if self.mean.is_none() {
            let mut sum = self.sum.clone();
            match math::kahan_add(&mut sum, h, self.c.clone()) {
                Err(e) => {
                    self.err = Some(e);
                    return;
                }
                Ok((c, info)) => {
                    self.reconciled |= info.nhcb_bounds_reconciled;
                    if !self.avg || !math::has_overflow(&sum) {
                        self.sum = sum;
                        self.c = Some(c);
                        return;
                    }
                }
            }
            // The sum overflowed: switch to an incremental mean.
            let mut mean = self.sum.clone();
            let _ = math::div(&mut mean, count - 1.0);
            if let Some(c) = &mut self.c {
                let _ = math::div(c, count - 1.0);
            }
            self.mean = Some(mean);
        }
        let q = (count - 1.0) / count;
        if let Some(c) = &mut self.c {
            let _ = math::mul(c, q);
        }
        let mut to_add = h.clone();
        let _ = math::div(&mut to_add, count);
        if let Some(mean) = &mut self.mean {
            let _ = math::mul(mean, q);
            match math::kahan_add(mean, &to_add, self.c.take()) {
                Ok((c, info)) => {
                    self.reconciled |= info.nhcb_bounds_reconciled;
                    self.c = Some(c);
                }
                Err(e) => self.err = Some(e),
            }
        }
    }

    /// Whether `h` has this sum's bucket layout parameters: the same schema, zero threshold and custom
    /// bounds. Only then is the Kahan sum independent of the order histograms are added in (up to the
    /// rounding of the compensation, as for floats): a lower schema reduces the running sum's buckets
    /// with plain additions, a wider zero bucket absorbs buckets, mismatched custom bounds are reconciled
    /// (with an info) and exponential with custom buckets is an error (with a warning naming the series
    /// added at that moment), all of which depend on the order. See [`HistKahan::merge_sum`].
    pub fn layout_matches(&self, h: &FloatHistogram) -> bool {
        self.sum.schema == h.schema
            && self.sum.zero_threshold.to_bits() == h.zero_threshold.to_bits()
            && self.sum.custom_values == h.custom_values
    }

    /// Adds another sum's partial (the merge stage of `sum` pushed into the shards) the way
    /// `AggAcc::merge` merges float Kahan sums: the other sum enters with `KahanAdd` against this
    /// compensation, and the other compensation is added to the result's. Only for sums (not means)
    /// with matching layouts ([`HistKahan::layout_matches`]); returns `false` (and leaves an unusable
    /// state) when that does not hold or the addition fails, and the caller evaluates centrally.
    pub fn merge_sum(&mut self, o: &HistKahan) -> bool {
        if self.avg || o.avg || self.mean.is_some() || o.mean.is_some() || self.err.is_some() || o.err.is_some() {
            return false;
        }
        if !self.layout_matches(&o.sum) {
            return false;
        }
        self.counter_reset |= o.counter_reset;
        self.not_counter_reset |= o.not_counter_reset;
        self.count += o.count;
        let (mut c, info) = match math::kahan_add(&mut self.sum, &o.sum, self.c.take()) {
            Ok(r) => r,
            Err(e) => {
                self.err = Some(e);
                return false;
            }
        };
        if info.nhcb_bounds_reconciled {
            return false;
        }
        if let Some(oc) = &o.c
            && math::add(&mut c, oc).is_err()
        {
            return false;
        }
        // The compensation must keep the sum's layout for the next `KahanAdd`.
        if c.positive_buckets.len() != self.sum.positive_buckets.len()
            || c.negative_buckets.len() != self.sum.negative_buckets.len()
        {
            return false;
        }
        self.c = Some(c);
        true
    }

    /// The sum or mean, compensation added; `None` after an error.
    pub fn finish(self) -> Option<FloatHistogram> {
        if self.err.is_some() {
            return None;
        }
        if let Some(mut mean) = self.mean {
            if let Some(c) = &self.c {
                let _ = math::add(&mut mean, c);
            }
            return Some(mean);
        }
        let mut sum = self.sum;
        if self.avg {
            let _ = math::div(&mut sum, self.count);
        }
        if let Some(mut c) = self.c {
            if self.avg {
                let _ = math::div(&mut c, self.count);
            }
            let _ = math::add(&mut sum, &c);
        }
        Some(sum)
    }
}

/// Upstream `funcSumOverTime` / `funcAvgOverTime` over histograms only.
fn sum_over_time(ctx: &QueryCtx<'_>, metric: &str, h: &[HPoint], avg: bool) -> HOut {
    let mut k = HistKahan::new(&h[0].h, avg);
    for p in &h[1..] {
        k.add(&p.h);
    }
    if k.counter_reset && k.not_counter_reset {
        ctx.warn(counter_reset_collision_warning("aggregation"));
    }
    if k.reconciled {
        ctx.info(mismatched_custom_buckets_info("aggregation"));
    }
    if k.err == Some(math::HistOpError::IncompatibleSchema) {
        ctx.warn(mixed_exponential_custom_warning(metric));
    }
    k.finish().map_or(HOut::None, |s| HOut::H(Arc::new(s)))
}

/// Upstream `instantValue` (irate, idelta) over a window holding histograms: the last two samples of
/// either kind.
#[allow(clippy::too_many_arguments)]
pub(crate) fn instant_value(
    ctx: &QueryCtx<'_>,
    metric: &str,
    f: &[Sample],
    h: &[HPoint],
    hsts: &[i64],
    is_rate: bool,
    win: &Window<'_>,
    k: fn(&Window<'_>) -> Option<f64>,
) -> HOut {
    if f.len() + h.len() < 2 {
        return HOut::None;
    }
    let h1 = &h[h.len() - 1];
    // The two newest samples, oldest first (upstream keeps a float before a histogram of the same time).
    let mut all: Vec<(i64, bool)> = f.iter().rev().take(2).map(|p| (p.t, false)).collect();
    all.extend(h.iter().rev().take(2).map(|p| (p.t, true)));
    all.sort_by_key(|x| x.0);
    let n = all.len();
    match (all[n - 2].1, all[n - 1].1) {
        (false, false) => k(win).map_or(HOut::None, HOut::F),
        (true, true) => {
            let h0 = &h[h.len() - 2];
            let dt = h1.t - h0.t;
            if dt == 0 {
                return HOut::None;
            }
            if is_rate && (h1.h.counter_reset_hint == CounterResetHint::Gauge || h0.h.counter_reset_hint == CounterResetHint::Gauge) {
                ctx.warn(not_counter_warning(metric));
            }
            if !is_rate && (h1.h.counter_reset_hint != CounterResetHint::Gauge || h0.h.counter_reset_hint != CounterResetHint::Gauge) {
                ctx.warn(not_gauge_warning(metric));
            }
            let mut r = (*h1.h).clone();
            // A start-timestamp reset between the two counts like a detected one (checked first).
            let n = h.len();
            let st_reset = n <= hsts.len() && is_st_reset(hsts[n - 2], h0.t, hsts[n - 1], h1.t);
            let reset = st_reset || {
                let Some(r) = math::detect_reset(&h1.h, &h0.h) else { return HOut::None };
                r
            };
            if !is_rate || !reset {
                match math::sub(&mut r, &h0.h) {
                    Err(math::HistOpError::IncompatibleSchema) => {
                        ctx.warn(mixed_exponential_custom_warning(metric));
                        return HOut::None;
                    }
                    Err(_) => {}
                    Ok(i) => {
                        if i.nhcb_bounds_reconciled {
                            ctx.info(mismatched_custom_buckets_info("subtraction"));
                        }
                    }
                }
            }
            r.counter_reset_hint = CounterResetHint::Gauge;
            if math::compact(&mut r).is_err() {
                return HOut::None;
            }
            if is_rate && math::div(&mut r, dt as f64 / 1000.0).is_err() {
                return HOut::None;
            }
            HOut::H(Arc::new(r))
        }
        _ => {
            ctx.warn(mixed_floats_histograms_warning(metric));
            HOut::None
        }
    }
}

/// Upstream `funcChanges` / `funcResets` over floats and histograms merged by time: a switch between a
/// float and a histogram counts; two histograms compare with `Equals` / `DetectReset`. For `resets`, a
/// start-timestamp reset between two samples of one kind counts too (`fsts`/`hsts` aligned with `f`/`h`,
/// or empty).
fn changes_or_resets(f: &[Sample], fsts: &[i64], h: &[HPoint], hsts: &[i64], resets: bool) -> HOut {
    enum S<'a> {
        F(f64),
        H(&'a FloatHistogram),
    }
    let (mut i, mut j) = (0usize, 0usize);
    // The previous sample with its time and start time.
    let mut prev: Option<(S<'_>, i64, i64)> = None;
    let mut n = 0usize;
    while i < f.len() || j < h.len() {
        let (cur, t, st) = if j >= h.len() || (i < f.len() && f[i].t < h[j].t) {
            i += 1;
            (S::F(f[i - 1].v), f[i - 1].t, fsts.get(i - 1).copied().unwrap_or(0))
        } else {
            j += 1;
            (S::H(&h[j - 1].h), h[j - 1].t, hsts.get(j - 1).copied().unwrap_or(0))
        };
        if let Some((p, pt, pst)) = &prev {
            let st_reset = || resets && is_st_reset(*pst, *pt, st, t);
            let hit = match (p, &cur) {
                (S::F(a), S::F(b)) => {
                    if resets {
                        b < a || st_reset()
                    } else {
                        a != b && !(a.is_nan() && b.is_nan())
                    }
                }
                (S::H(a), S::H(b)) => {
                    if st_reset() {
                        true
                    } else {
                        let r = if resets { math::detect_reset(b, a) } else { math::equals(b, a).map(|e| !e) };
                        match r {
                            Some(r) => r,
                            None => return HOut::None,
                        }
                    }
                }
                _ => true,
            };
            if hit {
                n += 1;
            }
        }
        prev = Some((cur, t, st));
    }
    HOut::F(n as f64)
}

/// Upstream `interpolateHistograms`: the histogram at `t` between `(t1, h1)` and `(t2, h2)`, linearly;
/// for a counter with a reset between them, `h2` scaled by the fraction (the counter restarted at 0).
pub fn interpolate_histograms(
    ctx: &QueryCtx<'_>,
    h1: &FloatHistogram,
    t1: i64,
    h2: &FloatHistogram,
    t2: i64,
    t: i64,
    is_counter: bool,
) -> Result<FloatHistogram, math::HistOpError> {
    if t == t1 {
        return Ok(h1.clone());
    }
    if t == t2 {
        return Ok(h2.clone());
    }
    let fraction = (t - t1) as f64 / (t2 - t1) as f64;
    let mut r = h2.clone();
    if is_counter && math::detect_reset(h2, h1) == Some(true) {
        math::mul(&mut r, fraction)?;
        return Ok(r);
    }
    if math::sub(&mut r, h1)?.nhcb_bounds_reconciled {
        ctx.info(mismatched_custom_buckets_info("subtraction"));
    }
    math::mul(&mut r, fraction)?;
    if math::add(&mut r, h1)?.nhcb_bounds_reconciled {
        ctx.info(mismatched_custom_buckets_info("addition"));
    }
    Ok(r)
}

/// Upstream `annosFromInterpolationError`.
fn interpolation_error(ctx: &QueryCtx<'_>, e: math::HistOpError, metric: &str) {
    if e == math::HistOpError::IncompatibleSchema {
        ctx.warn(mixed_exponential_custom_warning(metric));
    }
}

/// Upstream `addHistogramWithAnnotations` / `subHistogramWithAnnotations`.
fn add_or_sub_annotated(ctx: &QueryCtx<'_>, base: &mut FloatHistogram, other: &FloatHistogram, sub: bool, metric: &str) -> bool {
    let r = if sub { math::sub(base, other) } else { math::add(base, other) };
    match r {
        Ok(i) => {
            if i.nhcb_bounds_reconciled {
                ctx.info(mismatched_custom_buckets_info(if sub { "subtraction" } else { "addition" }));
            }
            true
        }
        Err(e) => {
            interpolation_error(ctx, e, metric);
            false
        }
    }
}

/// Go's `sort.Search(n, f)`.
fn go_search(n: usize, f: impl Fn(usize) -> bool) -> usize {
    let (mut i, mut j) = (0, n);
    while i < j {
        let m = (i + j) / 2;
        if !f(m) {
            i = m + 1;
        } else {
            j = m;
        }
    }
    i
}

/// Upstream `extendedHistogramRate`: rate/increase/delta of histograms over an anchored or smoothed
/// window `(start, end]` (`h` also holds the samples the selector loaded around it).
#[allow(clippy::too_many_arguments)]
pub fn extended_histogram_rate(
    ctx: &QueryCtx<'_>,
    metric: &str,
    h: &[HPoint],
    start: i64,
    end: i64,
    range_ms: i64,
    smoothed: bool,
    is_counter: bool,
    is_rate: bool,
) -> Option<FloatHistogram> {
    let mut last = h.len().checked_sub(1)?;
    let first = go_search(last, |i| h[i].t > start).saturating_sub(1);
    if smoothed {
        last = go_search(last, |i| h[i].t >= end);
    }
    if h[last].t <= start || (smoothed && h[first].t > end) {
        return None;
    }
    // Upstream `validateHistogramRange`.
    let custom = h[first].h.uses_custom_buckets();
    for p in &h[first..=last] {
        if p.h.uses_custom_buckets() != custom {
            ctx.warn(mixed_exponential_custom_warning(metric));
            return None;
        }
        if is_counter && p.h.counter_reset_hint == CounterResetHint::Gauge {
            ctx.warn(not_counter_warning(metric));
        }
    }
    // Upstream `pickOrInterpolateLeftHistogram` / `...RightHistogram`.
    let left = if smoothed && h[first].t < start {
        interpolate_histograms(ctx, &h[first].h, h[first].t, &h[first + 1].h, h[first + 1].t, start, is_counter)
    } else {
        Ok((*h[first].h).clone())
    };
    let left = left.map_err(|e| interpolation_error(ctx, e, metric)).ok()?;
    let right = if smoothed && last > 0 && h[last].t > end {
        interpolate_histograms(ctx, &h[last - 1].h, h[last - 1].t, &h[last].h, h[last].t, end, is_counter)
    } else {
        Ok((*h[last].h).clone())
    };
    let right = right.map_err(|e| interpolation_error(ctx, e, metric)).ok()?;
    if !is_counter && (left.counter_reset_hint != CounterResetHint::Gauge || right.counter_reset_hint != CounterResetHint::Gauge) {
        ctx.warn(not_gauge_warning(metric));
    }
    let mut result = right.clone();
    if !add_or_sub_annotated(ctx, &mut result, &left, true, metric) {
        return None;
    }
    if is_counter {
        // Upstream `correctForCounterResetsHistogram`.
        let mut lo = first + 1;
        let mut prev: &FloatHistogram = &left;
        if smoothed && h[first].t < start && math::detect_reset(&h[first + 1].h, &h[first].h) == Some(true) {
            prev = &h[first + 1].h;
            lo += 1;
        }
        let hi = last; // exclusive end of the inner samples (upstream `last := lastSampleIndex - 1`)
        if lo <= hi {
            let mut correction: Option<FloatHistogram> = None;
            let mut add_correction = |c: &FloatHistogram| -> bool {
                match &mut correction {
                    None => {
                        correction = Some(c.clone());
                        true
                    }
                    Some(x) => add_or_sub_annotated(ctx, x, c, false, metric),
                }
            };
            for p in &h[lo..hi] {
                if math::detect_reset(&p.h, prev) == Some(true) && !add_correction(prev) {
                    return None;
                }
                prev = &p.h;
            }
            if math::detect_reset(&right, prev) == Some(true) && !add_correction(prev) {
                return None;
            }
            if let Some(c) = correction
                && !add_or_sub_annotated(ctx, &mut result, &c, false, metric)
            {
                return None;
            }
        }
    }
    if is_rate {
        math::div(&mut result, range_ms as f64 / 1000.0).ok()?;
    }
    result.counter_reset_hint = CounterResetHint::Gauge;
    math::compact(&mut result).ok()?;
    Some(result)
}

/// Upstream `pickFirstSampleIndices` for anchored `changes`/`resets`: where the walk starts in the
/// float and histogram samples (the last sample at or before the range start, of either kind), or
/// `None` when nothing lies inside the range.
pub fn pick_first_sample_indices(f: &[Sample], h: &[HPoint], start: i64) -> Option<(usize, usize)> {
    let lf = go_search(f.len(), |i| f[i].t > start) as isize - 1;
    let lh = go_search(h.len(), |i| h[i].t > start) as isize - 1;
    if lf + 1 >= f.len() as isize && lh + 1 >= h.len() as isize {
        return None;
    }
    Some(match (lf < 0, lh < 0) {
        (true, true) => (0, 0),
        (_, true) => (lf as usize, (lh + 1) as usize),
        (false, false) if f[lf as usize].t >= h[lh as usize].t => (lf as usize, (lh + 1) as usize),
        _ => ((lf + 1) as usize, lh as usize),
    })
}

/// `changes`/`resets` over a window of floats and histograms from the picked first samples, with their
/// start timestamps (`fsts`/`hsts` aligned with `f`/`h`, or empty; upstream `funcResets` reads them
/// for anchored windows too).
pub fn changes_or_resets_from(f: &[Sample], fsts: &[i64], h: &[HPoint], hsts: &[i64], resets: bool) -> Option<f64> {
    match changes_or_resets(f, fsts, h, hsts, resets) {
        HOut::F(v) => Some(v),
        _ => None,
    }
}

/// Upstream `smoothSeries` for histograms: the value at `t` from the samples around it (within the
/// lookback on both sides): the sample at `t`, an interpolation between its neighbours, or the one
/// before it carried forward (hint unknown); nothing without an earlier sample.
pub fn smoothed_histogram(ctx: &QueryCtx<'_>, metric: &str, h: &[HPoint], t: i64) -> Option<FloatHistogram> {
    let i = go_search(h.len(), |i| h[i].t >= t);
    if i < h.len() && h[i].t == t {
        return Some((*h[i].h).clone());
    }
    if i > 0 && i < h.len() {
        let (prev, next) = (&h[i - 1], &h[i]);
        if prev.h.uses_custom_buckets() != next.h.uses_custom_buckets() {
            ctx.warn(mixed_exponential_custom_warning(metric));
            return None;
        }
        let is_counter = prev.h.counter_reset_hint != CounterResetHint::Gauge || next.h.counter_reset_hint != CounterResetHint::Gauge;
        return interpolate_histograms(ctx, &prev.h, prev.t, &next.h, next.t, t, is_counter)
            .map_err(|e| interpolation_error(ctx, e, metric))
            .ok();
    }
    if i > 0 {
        let mut c = (*h[i - 1].h).clone();
        c.counter_reset_hint = CounterResetHint::Unknown;
        return Some(c);
    }
    None
}

/// Upstream `detectHistogramStatsDecoding`: the selectors (by address) that sit below
/// `histogram_count`, `histogram_sum` or `histogram_avg` with no subquery, `histogram_quantile(s)`,
/// `histogram_fraction` or trim operator anywhere above them. Upstream reads those through its
/// `HistogramStatsIterator`, which changes the counter-reset hints the query sees
/// ([`derive_stats_hints`]); the engine mirrors that, not the bucket skipping.
pub fn histogram_stats_selectors(expr: &crate::parser::Expr) -> std::collections::HashSet<usize> {
    use crate::parser::{BinaryOp, Expr};
    fn walk(e: &Expr, under_fn: bool, blocked: bool, out: &mut std::collections::HashSet<usize>) {
        match e {
            Expr::VectorSelector(vs) => {
                if under_fn && !blocked {
                    out.insert(vs as *const crate::parser::VectorSelector as usize);
                }
            }
            Expr::MatrixSelector(ms) => {
                if under_fn && !blocked {
                    out.insert(&ms.vs as *const crate::parser::VectorSelector as usize);
                }
            }
            Expr::Subquery(s) => walk(&s.expr, under_fn, true, out),
            Expr::Call(c) => {
                let (f, b) = match c.func.name {
                    "histogram_count" | "histogram_sum" | "histogram_avg" => (true, blocked),
                    "histogram_quantile" | "histogram_quantiles" | "histogram_fraction" => (under_fn, true),
                    _ => (under_fn, blocked),
                };
                c.args.iter().for_each(|a| walk(a, f, b, out));
            }
            Expr::Aggregate(a) => {
                walk(&a.expr, under_fn, blocked, out);
                if let Some(p) = &a.param {
                    walk(p, under_fn, blocked, out);
                }
            }
            Expr::Binary(b) => {
                let blocked = blocked || matches!(b.op, BinaryOp::TrimUpper | BinaryOp::TrimLower);
                walk(&b.lhs, under_fn, blocked, out);
                walk(&b.rhs, under_fn, blocked, out);
            }
            Expr::Unary(u) => walk(&u.expr, under_fn, blocked, out),
            Expr::Paren(p) => walk(&p.expr, under_fn, blocked, out),
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) => {}
        }
    }
    let mut out = std::collections::HashSet::new();
    walk(expr, false, false, &mut out);
    out
}

/// The counter-reset hints upstream's `HistogramStatsIterator` hands out (`getResetHint`): a sample's
/// own hint unless it is unknown; otherwise, compared with the previous sample read (stale markers
/// skipped), `CounterReset` or `NotCounterReset`; the first sample keeps an unknown hint.
pub fn derive_stats_hints(h: &mut [HPoint]) {
    let mut last: Option<Arc<FloatHistogram>> = None;
    for p in h.iter_mut() {
        if p.h.is_stale() {
            continue;
        }
        if p.h.counter_reset_hint == CounterResetHint::Unknown
            && let Some(prev) = &last
        {
            let hint = if p.h.detect_reset(prev) { CounterResetHint::CounterReset } else { CounterResetHint::NotCounterReset };
            let mut c = (*p.h).clone();
            c.counter_reset_hint = hint;
            p.h = Arc::new(c);
        }
        last = Some(p.h.clone());
    }
}
