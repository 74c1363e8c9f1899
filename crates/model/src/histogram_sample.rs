//! A native-histogram sample as it is written and stored: a timestamp and an integer or float
//! histogram ([`HistogramValue`]), the unit remote write decodes, the appender takes, the WAL logs and
//! the head appends to its histogram chunks.

use crate::histogram::{CounterResetHint, FloatHistogram, Histogram, Span};

/// An integer or a float native histogram (upstream stores them in two chunk encodings).
#[derive(Debug, Clone, PartialEq)]
pub enum HistogramValue {
    Int(Histogram),
    Float(FloatHistogram),
}

/// One histogram sample of a series.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramSample {
    pub t: i64,
    pub h: HistogramValue,
    /// Start timestamp (remote write 2.0's `start_timestamp`, ms; 0 = unset).
    pub st: i64,
}

impl HistogramSample {
    pub fn new(t: i64, h: HistogramValue) -> Self {
        Self { t, h, st: 0 }
    }

    /// A sample with a start timestamp.
    pub fn with_st(t: i64, st: i64, h: HistogramValue) -> Self {
        Self { t, h, st }
    }
}

impl HistogramValue {
    /// Whether this is a stale marker (its sum is the stale NaN).
    pub fn is_stale(&self) -> bool {
        match self {
            HistogramValue::Int(h) => h.is_stale(),
            HistogramValue::Float(h) => h.is_stale(),
        }
    }

    pub fn is_float(&self) -> bool {
        matches!(self, HistogramValue::Float(_))
    }

    pub fn counter_reset_hint(&self) -> CounterResetHint {
        match self {
            HistogramValue::Int(h) => h.counter_reset_hint,
            HistogramValue::Float(h) => h.counter_reset_hint,
        }
    }

    /// The histogram with float counts (an integer one converted, upstream `Histogram.ToFloat`).
    pub fn to_float(&self) -> FloatHistogram {
        match self {
            HistogramValue::Int(h) => h.to_float(),
            HistogramValue::Float(h) => h.clone(),
        }
    }

    /// A 64-bit fingerprint of everything upstream's `Equals` compares (schema, zero threshold and
    /// count, count, sum bits, spans, buckets, custom bounds; not the counter-reset hint), so storage
    /// can tell an exact duplicate (accepted and dropped, as upstream does for federation) from another
    /// value at the same timestamp without keeping the last histogram. Integer and float histograms never
    /// share a fingerprint.
    pub fn fingerprint(&self) -> u64 {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let spans = |h: &mut xxhash_rust::xxh3::Xxh3, s: &[Span]| {
            h.update(&(s.len() as u64).to_le_bytes());
            for sp in s {
                h.update(&sp.offset.to_le_bytes());
                h.update(&sp.length.to_le_bytes());
            }
        };
        match self {
            HistogramValue::Int(x) => {
                h.update(&[1]);
                h.update(&x.schema.to_le_bytes());
                h.update(&x.zero_threshold.to_bits().to_le_bytes());
                h.update(&x.zero_count.to_le_bytes());
                h.update(&x.count.to_le_bytes());
                h.update(&x.sum.to_bits().to_le_bytes());
                spans(&mut h, &x.positive_spans);
                spans(&mut h, &x.negative_spans);
                for b in x.positive_buckets.iter().chain([i64::MIN].iter()).chain(&x.negative_buckets) {
                    h.update(&b.to_le_bytes());
                }
                for c in &x.custom_values {
                    h.update(&c.to_bits().to_le_bytes());
                }
            }
            HistogramValue::Float(x) => {
                h.update(&[2]);
                h.update(&x.schema.to_le_bytes());
                h.update(&x.zero_threshold.to_bits().to_le_bytes());
                h.update(&x.zero_count.to_bits().to_le_bytes());
                h.update(&x.count.to_bits().to_le_bytes());
                h.update(&x.sum.to_bits().to_le_bytes());
                spans(&mut h, &x.positive_spans);
                spans(&mut h, &x.negative_spans);
                for b in x.positive_buckets.iter().chain([f64::NAN].iter()).chain(&x.negative_buckets) {
                    h.update(&b.to_bits().to_le_bytes());
                }
                for c in &x.custom_values {
                    h.update(&c.to_bits().to_le_bytes());
                }
            }
        }
        h.digest()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_tells_values_apart_but_not_hints() {
        let a = Histogram {
            count: 3,
            sum: 2.5,
            positive_spans: vec![Span::new(0, 2)],
            positive_buckets: vec![1, 1],
            ..Histogram::default()
        };
        let mut b = a.clone();
        b.counter_reset_hint = CounterResetHint::NotCounterReset;
        assert_eq!(HistogramValue::Int(a.clone()).fingerprint(), HistogramValue::Int(b.clone()).fingerprint());
        b.positive_buckets = vec![2, 0];
        assert_ne!(HistogramValue::Int(a.clone()).fingerprint(), HistogramValue::Int(b).fingerprint());
        // Moving a bucket from the positive to the negative side changes the fingerprint.
        let mut c = a.clone();
        c.negative_spans = vec![Span::new(0, 1)];
        c.negative_buckets = vec![1];
        c.positive_spans = vec![Span::new(0, 1)];
        c.positive_buckets = vec![1];
        assert_ne!(HistogramValue::Int(a.clone()).fingerprint(), HistogramValue::Int(c).fingerprint());
        assert_ne!(HistogramValue::Int(a.clone()).fingerprint(), HistogramValue::Float(a.to_float()).fingerprint());
    }
}
