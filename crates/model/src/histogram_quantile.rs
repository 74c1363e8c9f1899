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
use crate::histogram_float::{Bucket, go_exp2, go_log2, kahan_inc};

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
    let mut bucket = Bucket {
        lower: 0.0,
        upper: 0.0,
        lower_inclusive: false,
        upper_inclusive: false,
        count: 0.0,
        index: 0,
    };
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::{CUSTOM_BUCKETS_SCHEMA, CounterResetHint, Span};

    #[test]
    fn quantile_edge_cases() {
        let h = FloatHistogram {
            count: 4.0,
            sum: 6.0,
            positive_spans: vec![Span::new(0, 3)],
            positive_buckets: vec![1.0, 2.0, 1.0],
            ..FloatHistogram::default()
        };
        assert_eq!(histogram_quantile(-0.1, &h), f64::NEG_INFINITY);
        assert_eq!(histogram_quantile(1.1, &h), f64::INFINITY);
        assert!(histogram_quantile(f64::NAN, &h).is_nan());
        assert!(histogram_quantile(0.5, &FloatHistogram::default()).is_nan());
        // q >= 0.5 counts from the top: rank 2 from above is half-way (log scale) into (1,2].
        assert_eq!(histogram_quantile(0.5, &h), go_exp2(0.5));
        // Half-way into (0.5,1] on a log scale: sqrt(0.5).
        assert_eq!(histogram_quantile(0.125, &h), go_exp2(-0.5));
        // NHCB: linear interpolation, the +Inf bucket answers its lower bound.
        let nhcb = FloatHistogram {
            schema: CUSTOM_BUCKETS_SCHEMA,
            count: 10.0,
            sum: 30.0,
            positive_spans: vec![Span::new(0, 3)],
            positive_buckets: vec![0.0, 5.0, 5.0],
            custom_values: vec![1.0, 3.0],
            ..FloatHistogram::default()
        };
        assert_eq!(histogram_quantile(0.25, &nhcb), 2.0);
        assert_eq!(histogram_quantile(0.9, &nhcb), 3.0);
        assert_eq!(histogram_fraction(1.0, 2.0, &nhcb), 0.25);
        assert_eq!(histogram_fraction(5.0, 2.0, &nhcb), 0.0);
        assert!(histogram_fraction(f64::NAN, 2.0, &nhcb).is_nan());
        assert_eq!(histogram_fraction(f64::NEG_INFINITY, f64::INFINITY, &nhcb), 1.0);
    }

    #[test]
    fn nan_observations_are_reported() {
        // 5 observations in buckets, count 6: one NaN observation.
        let h = FloatHistogram {
            count: 6.0,
            sum: f64::NAN,
            positive_spans: vec![Span::new(0, 2)],
            positive_buckets: vec![2.0, 3.0],
            counter_reset_hint: CounterResetHint::Gauge,
            ..FloatHistogram::default()
        };
        assert_eq!(
            histogram_quantile_annotated(0.2, &h).1,
            Some(HistogramInfo::QuantileNaNSkew)
        );
        let (v, info) = histogram_quantile_annotated(0.99, &h);
        assert!(v.is_nan());
        assert_eq!(info, Some(HistogramInfo::QuantileNaNResult));
        let (v, info) = histogram_fraction_annotated(f64::NEG_INFINITY, f64::INFINITY, &h);
        assert_eq!((v, info), (5.0 / 6.0, Some(HistogramInfo::FractionNaNs)));
    }

    /// Results of upstream's `HistogramQuantile`, `HistogramFraction` and `histogramVariance`,
    /// computed by Prometheus 3.14's Go code for random histograms (a selection from the
    /// differential test of tests/histogram_oracle.rs, same format: floats as bit patterns, a
    /// histogram as `hint;schema;zt;zc;count;sum;pos spans;neg spans;pos buckets;neg buckets;bounds`).
    const UPSTREAM_VECTORS: &str = "\
quantile 0000000000000000 0;-53;0000000000000000;0000000000000000;4002aaaaaaaaaaab;c050492492492492;0:2,3:1;-;0000000000000000,0000000000000000,3fd5555555555555;-;3fe0000000000000,3ff0000000000000,4000000000000000,4034000000000000,4059000000000000 => 4059000000000000 -
quantile bfe0000000000000 0;-53;0000000000000000;0000000000000000;4002aaaaaaaaaaab;c050492492492492;0:2,3:1;-;0000000000000000,0000000000000000,3fd5555555555555;-;3fe0000000000000,3ff0000000000000,4000000000000000,4034000000000000,4059000000000000 => fff0000000000000 -
quantile 7ff8000000000001 0;-53;0000000000000000;0000000000000000;4002aaaaaaaaaaab;c050492492492492;0:2,3:1;-;0000000000000000,0000000000000000,3fd5555555555555;-;3fe0000000000000,3ff0000000000000,4000000000000000,4034000000000000,4059000000000000 => 7ff8000000000001 -
fraction 3f40624dd2f1a9fc 4049000000000000 0;-53;0000000000000000;0000000000000000;4002aaaaaaaaaaab;c050492492492492;0:2,3:1;-;0000000000000000,0000000000000000,3fd5555555555555;-;3fe0000000000000,3ff0000000000000,4000000000000000,4034000000000000,4059000000000000 => 0000000000000000 -
variance 0;-53;0000000000000000;0000000000000000;4002aaaaaaaaaaab;c050492492492492;0:2,3:1;-;0000000000000000,0000000000000000,3fd5555555555555;-;3fe0000000000000,3ff0000000000000,4000000000000000,4034000000000000,4059000000000000 => 7ff0000000000000
quantile 0000000000000000 0;2;3fe0000000000000;3fd5555555555555;408f537777777777;4049c92492492492;1:4;-;0000000000000000,3fb999999999999a,3ff0000000000000,408f400000000000;-;- => 0000000000000000 -
quantile 3f847ae147ae147b 0;2;3fe0000000000000;3fd5555555555555;408f537777777777;4049c92492492492;1:4;-;0000000000000000,3fb999999999999a,3ff0000000000000,408f400000000000;-;- => 3ffaf2e2dec91da0 -
quantile bfe0000000000000 0;2;3fe0000000000000;3fd5555555555555;408f537777777777;4049c92492492492;1:4;-;0000000000000000,3fb999999999999a,3ff0000000000000,408f400000000000;-;- => fff0000000000000 -
quantile 7ff8000000000001 0;2;3fe0000000000000;3fd5555555555555;408f537777777777;4049c92492492492;1:4;-;0000000000000000,3fb999999999999a,3ff0000000000000,408f400000000000;-;- => 7ff8000000000001 -
fraction bff0000000000000 3ff0000000000000 0;2;3fe0000000000000;3fd5555555555555;408f537777777777;4049c92492492492;1:4;-;0000000000000000,3fb999999999999a,3ff0000000000000,408f400000000000;-;- => 3f35cad486ab6d58 -
fraction 3ff0000000000000 c008000000000000 0;2;3fe0000000000000;3fd5555555555555;408f537777777777;4049c92492492492;1:4;-;0000000000000000,3fb999999999999a,3ff0000000000000,408f400000000000;-;- => 0000000000000000 -
fraction 7ff8000000000001 4010000000000000 0;2;3fe0000000000000;3fd5555555555555;408f537777777777;4049c92492492492;1:4;-;0000000000000000,3fb999999999999a,3ff0000000000000,408f400000000000;-;- => 7ff8000000000001 -
variance 0;2;3fe0000000000000;3fd5555555555555;408f537777777777;4049c92492492492;1:4;-;0000000000000000,3fb999999999999a,3ff0000000000000,408f400000000000;-;- => 400960a31b6c5684
quantile 0000000000000000 3;-2;3fe0000000000000;3fd0000000000000;402b5e60f04c756b;c039492492492492;3:1,0:4,3:4;-3:3,2:2;3fd0000000000000,0000000000000000,4000000000000000,3fb999999999999a,0000000000000000,0000000000000000,0000000000000000,400c000000000000,401c000000000000;0000000000000000,3f50624dd2f1a9fc,0000000000000000,3fd0000000000000,3fd5555555555555;- => c0b0000000000000 -
quantile 3fd0000000000000 3;-2;3fe0000000000000;3fd0000000000000;402b5e60f04c756b;c039492492492492;3:1,0:4,3:4;-3:3,2:2;3fd0000000000000,0000000000000000,4000000000000000,3fb999999999999a,0000000000000000,0000000000000000,0000000000000000,400c000000000000,401c000000000000;0000000000000000,3f50624dd2f1a9fc,0000000000000000,3fd0000000000000,3fd5555555555555;- => 42f34cf20c980882 -
quantile 7ff8000000000001 3;-2;3fe0000000000000;3fd0000000000000;402b5e60f04c756b;c039492492492492;3:1,0:4,3:4;-3:3,2:2;3fd0000000000000,0000000000000000,4000000000000000,3fb999999999999a,0000000000000000,0000000000000000,0000000000000000,400c000000000000,401c000000000000;0000000000000000,3f50624dd2f1a9fc,0000000000000000,3fd0000000000000,3fd5555555555555;- => 7ff8000000000001 -
fraction c008000000000000 0000000000000000 3;-2;3fe0000000000000;3fd0000000000000;402b5e60f04c756b;c039492492492492;3:1,0:4,3:4;-3:3,2:2;3fd0000000000000,0000000000000000,4000000000000000,3fb999999999999a,0000000000000000,0000000000000000,0000000000000000,400c000000000000,401c000000000000;0000000000000000,3f50624dd2f1a9fc,0000000000000000,3fd0000000000000,3fd5555555555555;- => 3f82db7073701a0b -
fraction 3ff0000000000000 3ff0000000000000 3;-2;3fe0000000000000;3fd0000000000000;402b5e60f04c756b;c039492492492492;3:1,0:4,3:4;-3:3,2:2;3fd0000000000000,0000000000000000,4000000000000000,3fb999999999999a,0000000000000000,0000000000000000,0000000000000000,400c000000000000,401c000000000000;0000000000000000,3f50624dd2f1a9fc,0000000000000000,3fd0000000000000,3fd5555555555555;- => 0000000000000000 -
fraction 7ff8000000000001 3ffb333333333333 3;-2;3fe0000000000000;3fd0000000000000;402b5e60f04c756b;c039492492492492;3:1,0:4,3:4;-3:3,2:2;3fd0000000000000,0000000000000000,4000000000000000,3fb999999999999a,0000000000000000,0000000000000000,0000000000000000,400c000000000000,401c000000000000;0000000000000000,3f50624dd2f1a9fc,0000000000000000,3fd0000000000000,3fd5555555555555;- => 7ff8000000000001 -
variance 3;-2;3fe0000000000000;3fd0000000000000;402b5e60f04c756b;c039492492492492;3:1,0:4,3:4;-3:3,2:2;3fd0000000000000,0000000000000000,4000000000000000,3fb999999999999a,0000000000000000,0000000000000000,0000000000000000,400c000000000000,401c000000000000;0000000000000000,3f50624dd2f1a9fc,0000000000000000,3fd0000000000000,3fd5555555555555;- => 46a066ab85e6f826
fraction 3fd3333333333333 3ffb333333333333 1;-53;0000000000000000;0000000000000000;3fe2bb0cf87d9c54;c05f5b6db6db6db7;0:1,3:2,1:3;-;0000000000000000,3f50624dd2f1a9fc,3f50624dd2f1a9fc,3fd0000000000000,3fd5555555555555,0000000000000000;-;c014000000000000,bff0000000000000,0000000000000000,3ff0000000000000,4000000000000000,4014000000000000,4024000000000000,4034000000000000,4059000000000000 => 3f5397f79a4cbde0 -
quantile 3ff0000000000000 2;0;3f70000000000000;400c000000000000;4010000000000000;c05a649249249249;-;-2:4;-;0000000000000000,3fd0000000000000,0000000000000000,3fd0000000000000;- => 0000000000000000 -
quantile 0000000000000000 0;-53;0000000000000000;0000000000000000;0000000000000000;7ff8000000000001;-;-;-;-;c014000000000000,bff0000000000000,3fe0000000000000,3ff0000000000000,4014000000000000 => 7ff8000000000001 -
quantile bfe0000000000000 0;-53;0000000000000000;0000000000000000;0000000000000000;7ff8000000000001;-;-;-;-;c014000000000000,bff0000000000000,3fe0000000000000,3ff0000000000000,4014000000000000 => fff0000000000000 -
quantile 3ff8000000000000 0;-53;0000000000000000;0000000000000000;0000000000000000;7ff8000000000001;-;-;-;-;c014000000000000,bff0000000000000,3fe0000000000000,3ff0000000000000,4014000000000000 => 7ff0000000000000 -
fraction fff0000000000000 3f40624dd2f1a9fc 0;-53;0000000000000000;0000000000000000;0000000000000000;7ff8000000000001;-;-;-;-;c014000000000000,bff0000000000000,3fe0000000000000,3ff0000000000000,4014000000000000 => 7ff8000000000001 -
variance 0;-53;0000000000000000;0000000000000000;0000000000000000;7ff8000000000001;-;-;-;-;c014000000000000,bff0000000000000,3fe0000000000000,3ff0000000000000,4014000000000000 => fff8000000000000
quantile 0000000000000000 2;2;0000000000000000;3ff0000000000000;40c82283b645a1cb;7ff8000000000001;-5:3,0:3,0:3;-;3ff0000000000000,4000000000000000,40c81cd6c8b43958,3fd0000000000000,401c000000000000,3fb999999999999a,0000000000000000,3f50624dd2f1a9fc,0000000000000000;-;- => fff8000000000000 -
quantile 3f847ae147ae147b 2;2;0000000000000000;3ff0000000000000;40c82283b645a1cb;7ff8000000000001;-5:3,0:3,0:3;-;3ff0000000000000,4000000000000000,40c81cd6c8b43958,3fd0000000000000,401c000000000000,3fb999999999999a,0000000000000000,3f50624dd2f1a9fc,0000000000000000;-;- => 7ff0000000000000 -
quantile bfe0000000000000 2;2;0000000000000000;3ff0000000000000;40c82283b645a1cb;7ff8000000000001;-5:3,0:3,0:3;-;3ff0000000000000,4000000000000000,40c81cd6c8b43958,3fd0000000000000,401c000000000000,3fb999999999999a,0000000000000000,3f50624dd2f1a9fc,0000000000000000;-;- => fff0000000000000 -
fraction bf1a36e2eb1c432d bff0000000000000 2;2;0000000000000000;3ff0000000000000;40c82283b645a1cb;7ff8000000000001;-5:3,0:3,0:3;-;3ff0000000000000,4000000000000000,40c81cd6c8b43958,3fd0000000000000,401c000000000000,3fb999999999999a,0000000000000000,3f50624dd2f1a9fc,0000000000000000;-;- => 0000000000000000 -
fraction 0000000000000000 7ff8000000000001 2;2;0000000000000000;3ff0000000000000;40c82283b645a1cb;7ff8000000000001;-5:3,0:3,0:3;-;3ff0000000000000,4000000000000000,40c81cd6c8b43958,3fd0000000000000,401c000000000000,3fb999999999999a,0000000000000000,3f50624dd2f1a9fc,0000000000000000;-;- => 7ff8000000000001 -
fraction 3f40624dd2f1a9fc 4010000000000000 2;2;0000000000000000;3ff0000000000000;40c82283b645a1cb;7ff8000000000001;-5:3,0:3,0:3;-;3ff0000000000000,4000000000000000,40c81cd6c8b43958,3fd0000000000000,401c000000000000,3fb999999999999a,0000000000000000,3f50624dd2f1a9fc,0000000000000000;-;- => 3fefff5649661259 -
variance 2;2;0000000000000000;3ff0000000000000;40c82283b645a1cb;7ff8000000000001;-5:3,0:3,0:3;-;3ff0000000000000,4000000000000000,40c81cd6c8b43958,3fd0000000000000,401c000000000000,3fb999999999999a,0000000000000000,3f50624dd2f1a9fc,0000000000000000;-;- => 7ff8000000000001
fraction 7ff8000000000001 3ff0000000000000 3;-53;0000000000000000;0000000000000000;400e000000000000;405f524924924925;1:1,2:2;-;0000000000000000,400c000000000000,3fd0000000000000;-;c014000000000000,0000000000000000,3fe0000000000000,4000000000000000,4014000000000000,4024000000000000,4059000000000000 => 7ff8000000000001 -
fraction 4049000000000000 7ff0000000000000 1;-53;0000000000000000;0000000000000000;40d81cd6c8b43958;7ff8000000000001;0:2,2:1;-;40c81cd6c8b43958,0000000000000000,40c81cd6c8b43958;-;c014000000000000,bff0000000000000,3fe0000000000000,3ff0000000000000,4004000000000000,4014000000000000 => 0000000000000000 -
fraction 3f40624dd2f1a9fc 3ffb333333333333 1;-53;0000000000000000;0000000000000000;40d81cd6c8b43958;7ff8000000000001;0:2,2:1;-;40c81cd6c8b43958,0000000000000000,40c81cd6c8b43958;-;c014000000000000,bff0000000000000,3fe0000000000000,3ff0000000000000,4004000000000000,4014000000000000 => 3fcdddddddddddde -
quantile 0000000000000000 1;-53;0000000000000000;0000000000000000;40c81d8395810625;7ff8000000000001;0:1,1:4;-;40c81cd6c8b43958,3fd0000000000000,3fb999999999999a,3ff0000000000000,0000000000000000;-;0000000000000000,3fe0000000000000,4000000000000000,4004000000000000,4014000000000000 => 0000000000000000 -
quantile 0000000000000000 0;1;0000000000000000;401c000000000000;401d555555555555;7ff8000000000001;-1:2;-3:1;0000000000000000,0000000000000000;3fd5555555555555;- => fff8000000000000 -
quantile 3f847ae147ae147b 0;1;0000000000000000;401c000000000000;401d555555555555;7ff8000000000001;-1:2;-3:1;0000000000000000,0000000000000000;3fd5555555555555;- => 7ff0000000000000 -
quantile bfe0000000000000 0;1;0000000000000000;401c000000000000;401d555555555555;7ff8000000000001;-1:2;-3:1;0000000000000000,0000000000000000;3fd5555555555555;- => fff0000000000000 -
fraction 7ff8000000000001 4010000000000000 0;1;0000000000000000;401c000000000000;401d555555555555;7ff8000000000001;-1:2;-3:1;0000000000000000,0000000000000000;3fd5555555555555;- => 7ff8000000000001 -
fraction 3ffb333333333333 4010000000000000 0;1;0000000000000000;401c000000000000;401d555555555555;7ff8000000000001;-1:2;-3:1;0000000000000000,0000000000000000;3fd5555555555555;- => 0000000000000000 -
fraction bf1a36e2eb1c432d 4049000000000000 0;1;0000000000000000;401c000000000000;401d555555555555;7ff8000000000001;-1:2;-3:1;0000000000000000,0000000000000000;3fd5555555555555;- => 3fee8ba2e8ba2e8c -
variance 0;1;0000000000000000;401c000000000000;401d555555555555;7ff8000000000001;-1:2;-3:1;0000000000000000,0000000000000000;3fd5555555555555;- => 7ff8000000000001
variance 2;-53;0000000000000000;0000000000000000;0000000000000000;c060db6db6db6db7;1:1;-;0000000000000000;-;3fe0000000000000,3ff0000000000000,4004000000000000 => fff8000000000000
quantile 3ff0000000000000 2;-53;0000000000000000;0000000000000000;408f400000000000;c0599b6db6db6db7;0:3;-;0000000000000000,408f400000000000,0000000000000000;-;bff0000000000000,0000000000000000,4059000000000000 => 0000000000000000 -
quantile 0000000000000000 1;2;3ff0000000000000;3fd5555555555555;40ca122c1e098ead;7ff8000000000001;0:1,3:0;1:2,2:1,3:0;3fd5555555555555;0000000000000000,40c81cd6c8b43958,408f400000000000;- => 3ff0000000000000 QuantileNaNSkew
quantile 3ff0000000000000 1;2;3ff0000000000000;3fd5555555555555;40ca122c1e098ead;7ff8000000000001;0:1,3:0;1:2,2:1,3:0;3fd5555555555555;0000000000000000,40c81cd6c8b43958,408f400000000000;- => 7ff8000000000001 QuantileNaNResult
fraction bff0000000000000 3ff0000000000000 1;2;3ff0000000000000;3fd5555555555555;40ca122c1e098ead;7ff8000000000001;0:1,3:0;1:2,2:1,3:0;3fd5555555555555;0000000000000000,40c81cd6c8b43958,408f400000000000;- => 3efa2f56e5e3147c FractionNaNs
fraction 3ffb333333333333 4010000000000000 1;2;3ff0000000000000;3fd5555555555555;40ca122c1e098ead;7ff8000000000001;0:1,3:0;1:2,2:1,3:0;3fd5555555555555;0000000000000000,40c81cd6c8b43958,408f400000000000;- => 0000000000000000 FractionNaNs
variance 1;0;0000000000000000;0000000000000000;0000000000000000;c0366db6db6db6db;-;-5:0;-;-;- => fff8000000000000
quantile 0000000000000000 0;1;0000000000000000;3ff0000000000000;3ff0000000000000;7ff8000000000001;-;-6:0;-;-;- => 0000000000000000 -
quantile 3ff0000000000000 2;2;3fe0000000000000;3fd0000000000000;40c81fb6c8b43958;7ff8000000000001;-;5:0,1:4,0:0;-;4000000000000000,0000000000000000,40c81cd6c8b43958,400c000000000000;- => 0000000000000000 -
variance 3;0;3ff8000000000000;0000000000000000;3ff0000000000000;405976db6db6db6e;-;-;-;-;- => 0000000000000000
quantile 3f847ae147ae147b 3;-53;0000000000000000;0000000000000000;408fb4ced916872b;7ff8000000000001;0:4,1:3;-;3fb999999999999a,0000000000000000,4000000000000000,408f400000000000,3f50624dd2f1a9fc,400c000000000000,401c000000000000;-;c014000000000000,0000000000000000,3fe0000000000000,4004000000000000,4014000000000000,4024000000000000,4034000000000000 => 7ff0000000000000 QuantileNaNSkew
fraction bf1a36e2eb1c432d 3fd3333333333333 3;-53;0000000000000000;0000000000000000;408fb4ced916872b;7ff8000000000001;0:4,1:3;-;3fb999999999999a,0000000000000000,4000000000000000,408f400000000000,3f50624dd2f1a9fc,400c000000000000,401c000000000000;-;c014000000000000,0000000000000000,3fe0000000000000,4004000000000000,4014000000000000,4024000000000000,4034000000000000 => 3f5360bbaec473a1 FractionNaNs
fraction c008000000000000 0000000000000000 2;-53;0000000000000000;0000000000000000;40c82190624dd2f2;7ff8000000000001;0:6;-;3fb999999999999a,3fb999999999999a,0000000000000000,3fd0000000000000,401c000000000000,40c81cd6c8b43958;-;c014000000000000,3fe0000000000000,3ff0000000000000,4034000000000000,4059000000000000 => 0000000000000000 FractionNaNs
quantile 0000000000000000 3;0;0000000000000000;401c000000000000;40258083126e978e;7ff8000000000001;-;6:1,0:4;-;3fd0000000000000,0000000000000000,3f50624dd2f1a9fc,0000000000000000,400c000000000000;- => 0000000000000000 QuantileNaNSkew
quantile 0000000000000000 2;-53;0000000000000000;0000000000000000;40c81e0e60f04c75;7ff8000000000001;0:3,1:4;-;0000000000000000,3fd5555555555555,3fb999999999999a,0000000000000000,3f50624dd2f1a9fc,3ff0000000000000,40c81cd6c8b43958;-;c014000000000000,0000000000000000,3fe0000000000000,3ff0000000000000,4000000000000000,4014000000000000,4059000000000000 => fff8000000000000 QuantileNaNSkew
quantile 3fd0000000000000 2;-53;0000000000000000;0000000000000000;4004000000000000;7ff8000000000001;1:2,1:1;-;3fd0000000000000,3fd0000000000000,0000000000000000;-;c014000000000000,bff0000000000000,0000000000000000,3ff0000000000000,4004000000000000,4014000000000000,4059000000000000 => 7ff8000000000001 QuantileNaNResult
quantile 0000000000000000 3;7;3fe0000000000000;400c000000000000;40c82278ead65b7b;7ff8000000000001;-4:0,1:0;-5:1,1:1,3:4;-;401c000000000000,3fb999999999999a,0000000000000000,40c81cd6c8b43958,3fd5555555555555,3fd5555555555555;- => bfe0000000000000 QuantileNaNSkew
";

    fn fl(s: &str) -> f64 {
        f64::from_bits(u64::from_str_radix(s, 16).unwrap_or_default())
    }

    fn fls(s: &str) -> Vec<f64> {
        if s == "-" {
            Vec::new()
        } else {
            s.split(',').map(fl).collect()
        }
    }

    fn parse_h(s: &str) -> FloatHistogram {
        let f: Vec<&str> = s.split(';').collect();
        let spans = |s: &str| -> Vec<Span> {
            if s == "-" {
                return Vec::new();
            }
            s.split(',')
                .filter_map(|x| x.split_once(':'))
                .map(|(o, l)| Span::new(o.parse().unwrap_or_default(), l.parse().unwrap_or_default()))
                .collect()
        };
        FloatHistogram {
            counter_reset_hint: f[0]
                .parse()
                .ok()
                .and_then(CounterResetHint::from_u8)
                .unwrap_or_default(),
            schema: f[1].parse().unwrap_or_default(),
            zero_threshold: fl(f[2]),
            zero_count: fl(f[3]),
            count: fl(f[4]),
            sum: fl(f[5]),
            positive_spans: spans(f[6]),
            negative_spans: spans(f[7]),
            positive_buckets: fls(f[8]),
            negative_buckets: fls(f[9]),
            custom_values: fls(f[10]),
        }
    }

    #[test]
    fn upstream_vectors() {
        let mut n = 0;
        for line in UPSTREAM_VECTORS.lines() {
            let Some((lhs, want)) = line.split_once(" => ") else {
                continue;
            };
            let args: Vec<&str> = lhs.split(' ').collect();
            let (v, info) = match args[0] {
                "quantile" => histogram_quantile_annotated(fl(args[1]), &parse_h(args[2])),
                "fraction" => histogram_fraction_annotated(fl(args[1]), fl(args[2]), &parse_h(args[3])),
                "variance" => (histogram_variance(&parse_h(args[1])), None),
                op => panic!("unknown op {op}"),
            };
            let mut want = want.split(' ');
            let want_v = fl(want.next().unwrap_or_default());
            assert!(
                v.to_bits() == want_v.to_bits() || (v.is_nan() && want_v.is_nan()),
                "{line}: got {v}"
            );
            if let Some(want_info) = want.next() {
                assert_eq!(info.map_or("-".into(), |i| format!("{i:?}")), want_info, "{line}");
            }
            n += 1;
        }
        assert_eq!(n, 62);
    }
}
