//! The per-bucket arithmetic of upstream `TrimBuckets` (`</`, `>/`).

use super::*;

/// Mirrors upstream `handleInfinityBuckets` (model/histogram/float_histogram.go): what survives of
/// a bucket with an infinite bound, and the value its observations count at.
pub(super) fn trim_infinity_bucket(is_upper_trim: bool, b: &Bucket, rhs: f64) -> (f64, f64) {
    let zero_if_inf = |x: f64| if x.is_infinite() { 0.0 } else { x };
    if b.lower == f64::NEG_INFINITY {
        if is_upper_trim {
            if rhs >= b.upper {
                return (b.count, 0.0);
            }
            if rhs > 0.0 && b.upper > 0.0 && b.upper != f64::INFINITY {
                // Only possible for NHCB: treat the lower bound as 0, interpolate linearly.
                return (b.count * rhs / b.upper, rhs / 2.0);
            }
            if b.upper <= 0.0 {
                return (b.count, rhs);
            }
            return (0.0, zero_if_inf(b.upper));
        }
        if rhs <= b.lower {
            return (b.count, 0.0);
        }
        if rhs >= 0.0 && b.upper > rhs && b.upper != f64::INFINITY {
            return (b.count * (1.0 - rhs / b.upper), (rhs + b.upper) / 2.0);
        }
        return (0.0, zero_if_inf(b.upper));
    }
    // The upper bound is +Inf (upstream panics if neither bound is infinite; callers make sure).
    if is_upper_trim {
        return (0.0, zero_if_inf(b.lower));
    }
    if rhs >= b.lower {
        return (b.count, rhs);
    }
    (0.0, zero_if_inf(b.lower))
}

/// Mirrors upstream `computeSplit`: the part of the bucket's count at or below `rhs`.
pub(super) fn trim_split(b: &Bucket, rhs: f64, linear: bool) -> f64 {
    if rhs <= b.lower {
        return 0.0;
    }
    if rhs >= b.upper {
        return b.count;
    }
    b.count * b.fraction_below(rhs, linear)
}

/// Mirrors upstream `computeZeroBucketTrim`: the kept count of the zero bucket and its midpoint.
pub(super) fn trim_zero_bucket(
    zero: &Bucket,
    rhs: f64,
    has_negative: bool,
    has_positive: bool,
    is_upper_trim: bool,
) -> (f64, f64) {
    let (mut lower, mut upper) = (zero.lower, zero.upper);
    if has_negative && !has_positive {
        upper = 0.0;
    }
    if has_positive && !has_negative {
        lower = 0.0;
    }
    let (fraction, midpoint) = if is_upper_trim {
        if rhs <= lower {
            return (0.0, 0.0);
        }
        if rhs >= upper {
            return (zero.count, (lower + upper) / 2.0);
        }
        ((rhs - lower) / (upper - lower), (lower + rhs) / 2.0)
    } else {
        if rhs <= lower {
            return (zero.count, (lower + upper) / 2.0);
        }
        if rhs >= upper {
            return (0.0, 0.0);
        }
        ((upper - rhs) / (upper - lower), (rhs + upper) / 2.0)
    };
    (zero.count * fraction, midpoint)
}

/// Mirrors upstream `computeBucketTrim`: the kept count of a bucket containing `rhs`, and the
/// midpoint of its surviving part.
pub(super) fn trim_bucket(b: &Bucket, rhs: f64, is_upper_trim: bool, positive: bool, nhcb: bool) -> (f64, f64) {
    if b.lower == f64::NEG_INFINITY || b.upper == f64::INFINITY {
        return trim_infinity_bucket(is_upper_trim, b, rhs);
    }
    let under = trim_split(b, rhs, nhcb);
    if is_upper_trim {
        return (under, trim_midpoint(b.lower, rhs, positive, nhcb));
    }
    (b.count - under, trim_midpoint(rhs, b.upper, positive, nhcb))
}

/// Mirrors upstream `computeMidpoint`: arithmetic mean for linear buckets, signed geometric mean
/// for exponential ones, with the infinite cases as upstream.
pub(super) fn trim_midpoint(lower: f64, upper: f64, positive: bool, linear: bool) -> f64 {
    if lower.is_infinite() {
        if upper.is_infinite() {
            return 0.0;
        }
        if upper > 0.0 {
            return upper / 2.0;
        }
        return upper;
    } else if upper.is_infinite() {
        return lower;
    }
    if linear {
        return (lower + upper) / 2.0;
    }
    let geo_mean = (lower * upper).abs().sqrt();
    if positive { geo_mean } else { -geo_mean }
}
