//! Float samples and the stale marker.

/// The bit pattern Prometheus writes for a stale marker (`value.StaleNaN`). Any other NaN is an ordinary
/// (if odd) value; only this exact payload means "this series ended".
pub const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// The stale marker as an `f64` (compare with [`is_stale_nan`], never with `==`).
pub const STALE_NAN: f64 = f64::from_bits(STALE_NAN_BITS);

/// True when `v` carries the stale-marker payload exactly (mirrors Prometheus' `value.IsStaleNaN`).
#[inline]
pub fn is_stale_nan(v: f64) -> bool {
    v.to_bits() == STALE_NAN_BITS
}

/// One float sample: a millisecond timestamp and a value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    pub t: i64,
    pub v: f64,
}

impl Sample {
    pub const fn new(t: i64, v: f64) -> Self {
        Self { t, v }
    }

    /// Bitwise equality (NaN payloads included), the notion of "same sample" storage uses for duplicates.
    #[inline]
    pub fn bits_eq(&self, other: &Sample) -> bool {
        self.t == other.t && self.v.to_bits() == other.v.to_bits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_nan_is_recognised_only_with_its_payload() {
        assert!(is_stale_nan(STALE_NAN));
        assert!(STALE_NAN.is_nan());
        assert!(!is_stale_nan(f64::NAN));
        assert!(!is_stale_nan(1.0));
    }
}
