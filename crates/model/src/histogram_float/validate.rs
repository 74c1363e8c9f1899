//! Upstream's `Validate()` for both histogram types, and the span/bucket checks behind it.

use super::*;

/// Mirrors upstream `checkHistogramSpans` (model/histogram/generic.go).
pub(super) fn check_spans(spans: &[Span], num_buckets: usize) -> Result<(), HistogramError> {
    let mut need = 0u64;
    for (n, s) in spans.iter().enumerate() {
        if n > 0 && s.offset < 0 {
            return Err(HistogramError::SpanNegativeOffset {
                context: ErrorContext::None,
                span: n + 1,
                offset: s.offset,
            });
        }
        need += u64::from(s.length);
    }
    if need != num_buckets as u64 {
        return Err(HistogramError::SpansBucketsMismatch {
            context: ErrorContext::None,
            spans_need: need,
            have: num_buckets,
        });
    }
    Ok(())
}

/// Mirrors upstream `checkHistogramBuckets` for delta-encoded integer buckets: returns the sum of
/// the absolute counts (wrapping like Go's `uint64`).
pub(super) fn check_int_buckets(buckets: &[i64]) -> Result<u64, HistogramError> {
    let mut last = 0i64;
    let mut total = 0u64;
    for (i, d) in buckets.iter().enumerate() {
        let c = last.wrapping_add(*d);
        if c < 0 {
            return Err(HistogramError::NegativeBucketCount {
                context: ErrorContext::None,
                bucket: i + 1,
                count: CountValue::Int(c),
            });
        }
        last = c;
        total = total.wrapping_add(c as u64);
    }
    Ok(total)
}

/// Mirrors upstream `checkHistogramBuckets` for absolute float buckets.
pub(super) fn check_float_buckets(buckets: &[f64]) -> Result<(), HistogramError> {
    for (i, c) in buckets.iter().enumerate() {
        if *c < 0.0 {
            return Err(HistogramError::NegativeBucketCount {
                context: ErrorContext::None,
                bucket: i + 1,
                count: CountValue::Float(*c),
            });
        }
    }
    Ok(())
}

/// Mirrors upstream `checkHistogramCustomBounds` (model/histogram/generic.go); errors carry the
/// `custom buckets: ` context.
pub(super) fn check_custom_bounds(bounds: &[f64], spans: &[Span], num_buckets: usize) -> Result<(), HistogramError> {
    let mut prev = f64::NEG_INFINITY;
    for (i, &curr) in bounds.iter().enumerate() {
        if curr.is_nan() {
            return Err(HistogramError::CustomBucketsNaN);
        }
        if i > 0 && curr <= prev {
            return Err(HistogramError::CustomBucketsInvalid {
                previous: prev,
                current: curr,
            });
        }
        prev = curr;
    }
    if prev == f64::INFINITY {
        return Err(HistogramError::CustomBucketsInfinite);
    }
    let mut need = 0u64;
    let mut total_span_length = 0i64;
    for (n, s) in spans.iter().enumerate() {
        if s.offset < 0 {
            return Err(HistogramError::SpanNegativeOffset {
                context: ErrorContext::CustomBuckets,
                span: n + 1,
                offset: s.offset,
            });
        }
        need += u64::from(s.length);
        total_span_length += i64::from(s.length) + i64::from(s.offset);
    }
    if need != num_buckets as u64 {
        return Err(HistogramError::SpansBucketsMismatch {
            context: ErrorContext::CustomBuckets,
            spans_need: need,
            have: num_buckets,
        });
    }
    if (bounds.len() as i64 + 1) < total_span_length {
        return Err(HistogramError::CustomBucketsMismatch {
            bounds: bounds.len(),
            total_span_length,
        });
    }
    Ok(())
}

impl Histogram {
    /// Checks spans against buckets, bucket counts against negatives, the fields that the schema
    /// forbids, and that `count` equals the sum of all buckets (at least that sum if `sum` is NaN,
    /// since NaN observations land in no bucket).
    ///
    /// Mirrors upstream `Histogram.Validate` (model/histogram/histogram.go).
    pub fn validate(&self) -> Result<(), HistogramError> {
        let mut n_count = 0u64;
        if is_custom_buckets_schema(self.schema) {
            check_custom_bounds(&self.custom_values, &self.positive_spans, self.positive_buckets.len())?;
            if self.zero_count != 0 {
                return Err(HistogramError::CustomBucketsZeroCount);
            }
            if self.zero_threshold != 0.0 {
                return Err(HistogramError::CustomBucketsZeroThreshold);
            }
            if !self.negative_spans.is_empty() {
                return Err(HistogramError::CustomBucketsNegativeSpans);
            }
            if !self.negative_buckets.is_empty() {
                return Err(HistogramError::CustomBucketsNegativeBuckets);
            }
        } else if is_exponential_schema(self.schema) {
            check_spans(&self.positive_spans, self.positive_buckets.len())
                .map_err(|e| e.with_context(ErrorContext::Positive))?;
            check_spans(&self.negative_spans, self.negative_buckets.len())
                .map_err(|e| e.with_context(ErrorContext::Negative))?;
            n_count = check_int_buckets(&self.negative_buckets).map_err(|e| e.with_context(ErrorContext::Negative))?;
            if !self.custom_values.is_empty() {
                return Err(HistogramError::ExpSchemaCustomBounds);
            }
        } else {
            return Err(HistogramError::InvalidSchema(self.schema));
        }
        let p_count = check_int_buckets(&self.positive_buckets).map_err(|e| e.with_context(ErrorContext::Positive))?;
        let in_buckets = n_count.wrapping_add(p_count).wrapping_add(self.zero_count);
        if self.sum.is_nan() {
            if in_buckets > self.count {
                return Err(HistogramError::CountNotBigEnough {
                    in_buckets,
                    count: self.count,
                });
            }
        } else if in_buckets != self.count {
            return Err(HistogramError::CountMismatch {
                in_buckets,
                count: self.count,
            });
        }
        Ok(())
    }
}

impl FloatHistogram {
    /// Whether this histogram uses custom bucket bounds (upstream `UsesCustomBuckets`).
    pub fn uses_custom_buckets(&self) -> bool {
        is_custom_buckets_schema(self.schema)
    }

    /// Checks spans against buckets, counts against negatives and the fields that the schema
    /// forbids. Unlike the integer version it does not compare `count` with the buckets' sum
    /// (float rounding would give false positives).
    ///
    /// Mirrors upstream `FloatHistogram.Validate` (model/histogram/float_histogram.go).
    pub fn validate(&self) -> Result<(), HistogramError> {
        if is_custom_buckets_schema(self.schema) {
            check_custom_bounds(&self.custom_values, &self.positive_spans, self.positive_buckets.len())?;
            if self.zero_count != 0.0 {
                return Err(HistogramError::CustomBucketsZeroCount);
            }
            if self.zero_threshold != 0.0 {
                return Err(HistogramError::CustomBucketsZeroThreshold);
            }
            if !self.negative_spans.is_empty() {
                return Err(HistogramError::CustomBucketsNegativeSpans);
            }
            if !self.negative_buckets.is_empty() {
                return Err(HistogramError::CustomBucketsNegativeBuckets);
            }
        } else if is_exponential_schema(self.schema) {
            check_spans(&self.positive_spans, self.positive_buckets.len())
                .map_err(|e| e.with_context(ErrorContext::Positive))?;
            check_spans(&self.negative_spans, self.negative_buckets.len())
                .map_err(|e| e.with_context(ErrorContext::Negative))?;
            check_float_buckets(&self.negative_buckets).map_err(|e| e.with_context(ErrorContext::Negative))?;
            if self.zero_count < 0.0 {
                return Err(HistogramError::NegativeZeroCount { count: self.zero_count });
            }
            if !self.custom_values.is_empty() {
                return Err(HistogramError::ExpSchemaCustomBounds);
            }
        } else {
            return Err(HistogramError::InvalidSchema(self.schema));
        }
        if self.count < 0.0 {
            return Err(HistogramError::NegativeCount { count: self.count });
        }
        check_float_buckets(&self.positive_buckets).map_err(|e| e.with_context(ErrorContext::Positive))
    }
}
