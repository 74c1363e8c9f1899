//! Native histogram samples, as Prometheus' `model/histogram` represents them (`Histogram`,
//! `FloatHistogram`, `Span`, `CounterResetHint`), so codecs, storage and PromQL share one shape.
//!
//! A histogram's buckets are sparse: `spans` say which bucket indexes are present (each span skips
//! `offset` indexes after the previous span's last bucket — for the first span, after index 0 — then
//! covers `length` consecutive ones), and the bucket vectors hold one count per present index, in order.
//! Integer histograms store each bucket as the delta to the previous bucket's count (the first one
//! absolute), float histograms store absolute counts: both exactly as upstream, so Prometheus' chunk
//! bytes and remote-write messages map onto these types field by field.
//!
//! Schema −53 (NHCB, "native histograms with custom buckets") keeps its upper bucket bounds in
//! `custom_values` (ascending, +Inf implicit); exponential schemas leave `custom_values` empty.
//! These are plain data: validation and arithmetic belong to the code that needs them.

/// Schema of native histograms with custom bucket bounds (upstream `CustomBucketsSchema`).
pub const CUSTOM_BUCKETS_SCHEMA: i32 = -53;
/// Smallest and largest exponential schemas Prometheus accepts (`ExponentialSchemaMin`/`Max`).
pub const EXPONENTIAL_SCHEMA_MIN: i32 = -4;
pub const EXPONENTIAL_SCHEMA_MAX: i32 = 8;
/// Exponential schemas reserved for the future, which readers must still accept
/// (`ExponentialSchemaMinReserved`/`MaxReserved`).
pub const EXPONENTIAL_SCHEMA_MIN_RESERVED: i32 = -9;
pub const EXPONENTIAL_SCHEMA_MAX_RESERVED: i32 = 52;

/// Whether `schema` is NHCB (upstream `IsCustomBucketsSchema`).
pub fn is_custom_buckets_schema(schema: i32) -> bool {
    schema == CUSTOM_BUCKETS_SCHEMA
}

/// Whether a reader must accept `schema` (upstream `IsKnownSchema`): NHCB or −9..=52.
pub fn is_known_schema(schema: i32) -> bool {
    is_custom_buckets_schema(schema) || (EXPONENTIAL_SCHEMA_MIN_RESERVED..=EXPONENTIAL_SCHEMA_MAX_RESERVED).contains(&schema)
}

/// Whether two NHCB bound lists are the same (upstream `CustomBucketBoundsMatch`: `==` per bound, so a
/// NaN bound never matches).
pub fn custom_bucket_bounds_match(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

/// A run of present buckets (upstream `histogram.Span`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Span {
    /// Gap to the previous span (for the first span: the index of its first bucket).
    pub offset: i32,
    /// Number of consecutive buckets.
    pub length: u32,
}

impl Span {
    pub const fn new(offset: i32, length: u32) -> Self {
        Self { offset, length }
    }
}

/// Total number of buckets the spans describe.
pub fn span_bucket_count(spans: &[Span]) -> u64 {
    spans.iter().map(|s| u64::from(s.length)).sum()
}

/// What the writer knows about counter resets (upstream `histogram.CounterResetHint`, same numbers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum CounterResetHint {
    /// Nothing known: readers compare with the previous sample.
    #[default]
    Unknown = 0,
    /// A counter reset happened at this sample.
    CounterReset = 1,
    /// No counter reset since the previous sample.
    NotCounterReset = 2,
    /// A gauge histogram: counter resets do not apply.
    Gauge = 3,
}

impl CounterResetHint {
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            0 => Some(Self::Unknown),
            1 => Some(Self::CounterReset),
            2 => Some(Self::NotCounterReset),
            3 => Some(Self::Gauge),
            _ => None,
        }
    }
}

/// A native histogram with integer counts (upstream `histogram.Histogram`). Buckets are deltas:
/// `positive_buckets[0]` is the first bucket's count, each later entry the change from the previous bucket.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Histogram {
    pub counter_reset_hint: CounterResetHint,
    pub schema: i32,
    pub zero_threshold: f64,
    pub zero_count: u64,
    pub count: u64,
    pub sum: f64,
    pub positive_spans: Vec<Span>,
    pub negative_spans: Vec<Span>,
    pub positive_buckets: Vec<i64>,
    pub negative_buckets: Vec<i64>,
    /// NHCB upper bounds (schema −53 only), ascending, +Inf implicit.
    pub custom_values: Vec<f64>,
}

/// A native histogram with float counts (upstream `histogram.FloatHistogram`): buckets hold absolute counts.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FloatHistogram {
    pub counter_reset_hint: CounterResetHint,
    pub schema: i32,
    pub zero_threshold: f64,
    pub zero_count: f64,
    pub count: f64,
    pub sum: f64,
    pub positive_spans: Vec<Span>,
    pub negative_spans: Vec<Span>,
    pub positive_buckets: Vec<f64>,
    pub negative_buckets: Vec<f64>,
    /// NHCB upper bounds (schema −53 only), ascending, +Inf implicit.
    pub custom_values: Vec<f64>,
}

impl Histogram {
    /// The stale marker: every field zero or empty and `sum` the stale NaN, as upstream writes it.
    pub fn stale() -> Self {
        Self { sum: crate::STALE_NAN, ..Self::default() }
    }

    /// Whether this sample is a stale marker (its sum is the stale NaN).
    pub fn is_stale(&self) -> bool {
        crate::is_stale_nan(self.sum)
    }

    /// The same histogram with float counts (upstream `Histogram.ToFloat`): deltas become absolute counts.
    pub fn to_float(&self) -> FloatHistogram {
        let absolute = |deltas: &[i64]| {
            let mut cur = 0i64;
            deltas
                .iter()
                .map(|d| {
                    cur = cur.wrapping_add(*d);
                    cur as f64
                })
                .collect()
        };
        FloatHistogram {
            counter_reset_hint: self.counter_reset_hint,
            schema: self.schema,
            zero_threshold: self.zero_threshold,
            zero_count: self.zero_count as f64,
            count: self.count as f64,
            sum: self.sum,
            positive_spans: self.positive_spans.clone(),
            negative_spans: self.negative_spans.clone(),
            positive_buckets: absolute(&self.positive_buckets),
            negative_buckets: absolute(&self.negative_buckets),
            custom_values: self.custom_values.clone(),
        }
    }
}

impl FloatHistogram {
    /// The stale marker: every field zero or empty and `sum` the stale NaN, as upstream writes it.
    pub fn stale() -> Self {
        Self { sum: crate::STALE_NAN, ..Self::default() }
    }

    /// Whether this sample is a stale marker (its sum is the stale NaN).
    pub fn is_stale(&self) -> bool {
        crate::is_stale_nan(self.sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_schemas_include_reserved_and_nhcb() {
        assert!(is_known_schema(-53) && is_known_schema(-9) && is_known_schema(52));
        assert!(!is_known_schema(-10) && !is_known_schema(53) && !is_known_schema(-52));
    }

    #[test]
    fn to_float_accumulates_deltas() {
        let h = Histogram {
            count: 6,
            positive_spans: vec![Span::new(0, 3)],
            positive_buckets: vec![1, 1, 1],
            ..Histogram::default()
        };
        assert_eq!(h.to_float().positive_buckets, vec![1.0, 2.0, 3.0]);
        assert!(Histogram::stale().is_stale() && !h.is_stale());
    }

    #[test]
    fn nan_bounds_never_match() {
        assert!(custom_bucket_bounds_match(&[1.0, 2.0], &[1.0, 2.0]));
        assert!(!custom_bucket_bounds_match(&[f64::NAN], &[f64::NAN]));
        assert!(!custom_bucket_bounds_match(&[1.0], &[1.0, 2.0]));
    }
}
