//! Go's `math.Max` and `math.Min`, which Prometheus uses where Rust's `f64::max`/`f64::min` would answer
//! differently: an infinity wins over NaN (`math.Max(+Inf, NaN)` is `+Inf`, `math.Min(-Inf, NaN)` is
//! `-Inf`), any other NaN wins over a number, and `math.Max(-0, 0)` is `0`, `math.Min(-0, 0)` is `-0`
//! whatever the order. Rust's versions ignore NaN and leave the sign of an equal zero unspecified.
//! Also Go's `time.Duration.Seconds`, which is not always `ms / 1000.0` to the last bit.

/// Go's `math.Max`.
pub fn go_max(x: f64, y: f64) -> f64 {
    if x == f64::INFINITY || y == f64::INFINITY {
        f64::INFINITY
    } else if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && x == y {
        if x.is_sign_negative() { y } else { x }
    } else if x > y {
        x
    } else {
        y
    }
}

/// Go's `math.Min`.
pub fn go_min(x: f64, y: f64) -> f64 {
    if x == f64::NEG_INFINITY || y == f64::NEG_INFINITY {
        f64::NEG_INFINITY
    } else if x.is_nan() || y.is_nan() {
        f64::NAN
    } else if x == 0.0 && x == y {
        if x.is_sign_negative() { x } else { y }
    } else if x < y {
        x
    } else {
        y
    }
}

/// Go's `time.Duration.Seconds` of a duration in milliseconds: whole seconds plus the remainder's
/// nanoseconds / 1e9, each rounded on its own (`31577ms` is `31.576999999999998`, not `31.577`).
pub fn go_duration_secs(ms: i64) -> f64 {
    (ms / 1000) as f64 + ((ms % 1000) * 1_000_000) as f64 / 1e9
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn infinities_win_over_nan_and_nan_over_numbers() {
        let (inf, nan) = (f64::INFINITY, f64::NAN);
        assert_eq!(go_max(inf, nan), inf);
        assert_eq!(go_max(nan, inf), inf);
        assert_eq!(go_min(-inf, nan), -inf);
        assert_eq!(go_min(nan, -inf), -inf);
        assert!(go_max(-inf, nan).is_nan());
        assert!(go_min(inf, nan).is_nan());
        assert!(go_max(1.0, nan).is_nan());
        assert!(go_min(nan, 1.0).is_nan());
        assert_eq!(go_max(1.0, 2.0), 2.0);
        assert_eq!(go_min(1.0, 2.0), 1.0);
    }

    #[test]
    fn duration_seconds_as_go() {
        assert_eq!(go_duration_secs(31_577), 31.576999999999998);
        assert_eq!(go_duration_secs(60_000), 60.0);
        assert_eq!(go_duration_secs(-1_500), -1.5);
    }

    #[test]
    fn signed_zeros_as_go() {
        for (a, b) in [(0.0, -0.0), (-0.0, 0.0)] {
            assert!(go_max(a, b).is_sign_positive());
            assert!(go_min(a, b).is_sign_negative());
        }
        assert!(go_max(-0.0, -0.0).is_sign_negative());
    }
}
