//! Estimates PromQL computes from a single native histogram: `histogram_quantile`,
//! `histogram_fraction` and the variance behind `histogram_stddev`/`histogram_stdvar`, mirroring
//! Prometheus 3.14's `promql/quantile.go` and `promql/functions.go`.
//!
//! # API
//!
//! - [`histogram_quantile`] / [`histogram_quantile_annotated`]: upstream `HistogramQuantile`.
//! - [`histogram_fraction`] / [`histogram_fraction_annotated`]: upstream `HistogramFraction`.
//! - [`histogram_variance`], [`histogram_stddev`], [`histogram_stdvar`]: the per-histogram
//!   computation of upstream `histogramVariance`.
//!
//! The `_annotated` variants also say which info annotation upstream would attach
//! ([`HistogramInfo`]); the engine adds the metric name and position when it turns it into one.
//! None of these functions panic, on any histogram.

use crate::histogram::FloatHistogram;
use crate::histogram_float::{go_exp2, go_log2, kahan_inc, Bucket};

/// An info-level annotation upstream attaches to a histogram estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistogramInfo {
    /// `NewNativeHistogramQuantileNaNResultInfo`: the quantile falls above all buckets because of
    /// NaN observations; the result is NaN.
    QuantileNaNResult,
    /// `NewNativeHistogramQuantileNaNSkewInfo`: NaN observations may skew the quantile upwards.
    QuantileNaNSkew,
    /// `NewNativeHistogramFractionNaNsInfo`: NaN observations are in no bucket, so the fraction
    /// of all observations may be below 1.
    FractionNaNs,
}

/// The `q` quantile of the observations in `h`; see [`histogram_quantile_annotated`].
///
/// Mirrors upstream `HistogramQuantile` (promql/quantile.go).
pub fn histogram_quantile(q: f64, h: &FloatHistogram) -> f64 {
    histogram_quantile_annotated(q, h).0
}

/// The `q` quantile of the observations in `h`, interpolated within its bucket: linearly for NHCB
/// buckets and the zero bucket, on a log2 scale for exponential buckets. `q < 0` gives −Inf,
/// `q > 1` +Inf, a NaN `q` or an empty histogram NaN. Also returns the info annotation upstream
/// would add (NaN observations).
///
/// Mirrors upstream `HistogramQuantile` (promql/quantile.go).
pub fn histogram_quantile_annotated(q: f64, h: &FloatHistogram) -> (f64, Option<HistogramInfo>) {
    if q < 0.0 {
        return (f64::NEG_INFINITY, None);
    }
    if q > 1.0 {
        return (f64::INFINITY, None);
    }
    if h.count == 0.0 || q.is_nan() {
        return (f64::NAN, None);
    }
    let mut info = None;
    let forward = h.sum.is_nan() || q < 0.5;
    let (mut it, mut rank) = if forward {
        (h.all_bucket_iter(), q * h.count)
    } else {
        (h.all_reverse_bucket_iter(), (1.0 - q) * h.count)
    };
    let mut bucket =
        Bucket { lower: 0.0, upper: 0.0, lower_inclusive: false, upper_inclusive: false, count: 0.0, index: 0 };
    let mut count = 0.0;
    for b in it.by_ref() {
        bucket = b;
        if b.count == 0.0 {
            continue;
        }
        count += b.count;
        if count >= rank {
            break;
        }
    }
    let nhcb = h.uses_custom_buckets();
    if !nhcb && bucket.lower < 0.0 && bucket.upper > 0.0 {
        if h.negative_buckets.is_empty() && !h.positive_buckets.is_empty() {
            // In the zero bucket with only positive buckets: 0 is the lower bound.
            bucket.lower = 0.0;
        } else if h.positive_buckets.is_empty() && !h.negative_buckets.is_empty() {
            // In the zero bucket with only negative buckets: 0 is the upper bound.
            bucket.upper = 0.0;
        }
    } else if nhcb {
        if bucket.lower == f64::NEG_INFINITY {
            if bucket.upper <= 0.0 {
                return (bucket.upper, info);
            }
            bucket.lower = 0.0;
        } else if bucket.upper == f64::INFINITY {
            return (bucket.lower, info);
        }
    }
    if count > h.count {
        count = h.count;
    }
    if count < rank {
        if h.sum.is_nan() {
            return (f64::NAN, Some(HistogramInfo::QuantileNaNResult));
        }
        return (bucket.upper, info);
    }
    if forward {
        rank -= count - bucket.count;
    } else {
        rank = count - rank;
    }
    if h.sum.is_nan() {
        // Upstream reuses its `bucket` variable in this loop, so the interpolation below happens in
        // the last bucket iterated, not in the one the rank fell into. Mirrored as it is.
        for b in it {
            bucket = b;
            count += b.count;
        }
        if count < h.count {
            info = Some(HistogramInfo::QuantileNaNSkew);
        }
    }
    let fraction = rank / bucket.count;
    if nhcb || (bucket.lower <= 0.0 && bucket.upper >= 0.0) {
        return (bucket.lower + (bucket.upper - bucket.lower) * fraction, info);
    }
    let log_lower = go_log2(bucket.lower.abs());
    let log_upper = go_log2(bucket.upper.abs());
    if bucket.lower > 0.0 {
        return (go_exp2(log_lower + (log_upper - log_lower) * fraction), info);
    }
    (-go_exp2(log_upper + (log_lower - log_upper) * (1.0 - fraction)), info)
}

/// The fraction of observations in `h` between `lower` and `upper`; see
/// [`histogram_fraction_annotated`].
///
/// Mirrors upstream `HistogramFraction` (promql/quantile.go).
pub fn histogram_fraction(lower: f64, upper: f64, h: &FloatHistogram) -> f64 {
    histogram_fraction_annotated(lower, upper, h).0
}

/// The estimated fraction of observations in `h` between `lower` and `upper`, interpolating like
/// [`histogram_quantile`] where a bound falls inside a bucket. NaN for an empty histogram or a NaN
/// bound, 0 if `lower >= upper`. Also returns [`HistogramInfo::FractionNaNs`] if the sum is NaN
/// and the buckets hold fewer observations than the count.
///
/// Mirrors upstream `HistogramFraction` (promql/quantile.go).
pub fn histogram_fraction_annotated(lower: f64, upper: f64, h: &FloatHistogram) -> (f64, Option<HistogramInfo>) {
    if h.count == 0.0 || lower.is_nan() || upper.is_nan() {
        return (f64::NAN, None);
    }
    if lower >= upper {
        return (0.0, None);
    }
    let nhcb = h.uses_custom_buckets();
    let (mut count, mut rank, mut lower_rank, mut upper_rank) = (0.0, 0.0, 0.0, 0.0);
    let (mut lower_set, mut upper_set) = (false, false);
    let mut info = None;
    let mut it = h.all_bucket_iter();
    for mut b in it.by_ref() {
        count += b.count;
        let mut zero_bucket = false;
        if b.lower <= 0.0 && b.upper >= 0.0 {
            zero_bucket = true;
            if h.negative_buckets.is_empty() && !h.positive_buckets.is_empty() {
                b.lower = 0.0;
            } else if h.positive_buckets.is_empty() && !h.negative_buckets.is_empty() {
                b.upper = 0.0;
            }
        }
        let interpolate = |v: f64| -> f64 {
            if nhcb || zero_bucket {
                // No interpolation within a bucket reaching down to −Inf: its whole count counts.
                if b.lower == f64::NEG_INFINITY {
                    return b.count;
                }
                rank + b.count * b.fraction_below(v, true)
            } else {
                rank + b.count * b.fraction_below(v, false)
            }
        };
        if !lower_set && b.lower >= lower {
            lower_rank = rank;
            lower_set = true;
        }
        if !upper_set && b.lower >= upper {
            upper_rank = rank;
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        if !lower_set && b.lower < lower && b.upper > lower {
            lower_rank = interpolate(lower);
            lower_set = true;
        }
        if !upper_set && b.lower < upper && b.upper > upper {
            upper_rank = interpolate(upper);
            upper_set = true;
        }
        if lower_set && upper_set {
            break;
        }
        rank += b.count;
    }
    if h.sum.is_nan() {
        for b in it {
            count += b.count;
        }
        if count < h.count {
            info = Some(HistogramInfo::FractionNaNs);
        }
    } else {
        count = h.count;
    }
    if !lower_set || lower_rank > count {
        lower_rank = count;
    }
    if !upper_set || upper_rank > count {
        upper_rank = count;
    }
    ((upper_rank - lower_rank) / h.count, info)
}

/// The estimated variance of the observations in `h`: every populated bucket contributes its
/// count at a representative value (arithmetic mean of the bounds for NHCB, 0 for the zero
/// bucket, geometric mean otherwise), summed with Kahan compensation, divided by the count.
///
/// Mirrors the per-histogram function of upstream `histogramVariance` (promql/functions.go).
pub fn histogram_variance(h: &FloatHistogram) -> f64 {
    let mean = h.sum / h.count;
    let (mut variance, mut c) = (0.0, 0.0);
    for b in h.all_bucket_iter() {
        if b.count == 0.0 {
            continue;
        }
        let val = if h.uses_custom_buckets() {
            (b.upper + b.lower) / 2.0
        } else if b.lower <= 0.0 && b.upper >= 0.0 {
            0.0
        } else {
            let v = (b.upper * b.lower).sqrt();
            if b.upper < 0.0 { -v } else { v }
        };
        let delta = val - mean;
        (variance, c) = kahan_inc(b.count * delta * delta, variance, c);
    }
    variance += c;
    variance / h.count
}

/// `histogram_stdvar` of one histogram: [`histogram_variance`].
pub fn histogram_stdvar(h: &FloatHistogram) -> f64 {
    histogram_variance(h)
}

/// `histogram_stddev` of one histogram: the square root of [`histogram_variance`].
pub fn histogram_stddev(h: &FloatHistogram) -> f64 {
    histogram_variance(h).sqrt()
}
