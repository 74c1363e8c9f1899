//! Native-histogram validation and arithmetic, mirroring Prometheus 3.14's `model/histogram`
//! (`histogram.go`, `float_histogram.go`, `generic.go`) operation for operation.
//!
//! # API
//!
//! - [`HistogramError`]: every error upstream's histogram package returns, with [`Display`](std::fmt::Display)
//!   text identical to upstream's (wrapping prefixes such as `positive side: ` included).
//! - [`Histogram::validate`], [`FloatHistogram::validate`]: upstream's `Validate()`.
//!
//! Where upstream panics on misuse (for example `CopyToSchema` to a higher schema) or on an
//! inconsistent histogram (spans that ask for more buckets than exist), these functions return a
//! [`HistogramError`] or a documented defined value instead: nothing here panics on any input.
//!
//! Upstream distinguishes a `nil` `CustomValues` slice from an empty one in `Validate` (an
//! exponential histogram with a non-nil empty slice is rejected); a `Vec` cannot, so here only a
//! non-empty `custom_values` on an exponential histogram is rejected.

use std::fmt;

use crate::gofloat::format_g;
use crate::histogram::{
    is_custom_buckets_schema, FloatHistogram, Histogram, Span, CUSTOM_BUCKETS_SCHEMA, EXPONENTIAL_SCHEMA_MAX,
    EXPONENTIAL_SCHEMA_MAX_RESERVED, EXPONENTIAL_SCHEMA_MIN, EXPONENTIAL_SCHEMA_MIN_RESERVED,
};

/// Whether `schema` is a standard exponential schema, −4..=8 (upstream `IsExponentialSchema`).
pub fn is_exponential_schema(schema: i32) -> bool {
    (EXPONENTIAL_SCHEMA_MIN..=EXPONENTIAL_SCHEMA_MAX).contains(&schema)
}

/// Whether `schema` is valid for arithmetic: NHCB or −4..=8 (upstream `IsValidSchema`).
pub fn is_valid_schema(schema: i32) -> bool {
    is_custom_buckets_schema(schema) || is_exponential_schema(schema)
}

/// Which part of a histogram an error was found in; rendered as upstream's wrapping prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorContext {
    /// No prefix (errors from `ReduceResolution`).
    None,
    /// `positive side: `.
    Positive,
    /// `negative side: `.
    Negative,
    /// `custom buckets: ` (NHCB bound and span checks).
    CustomBuckets,
}

impl ErrorContext {
    fn prefix(self) -> &'static str {
        match self {
            ErrorContext::None => "",
            ErrorContext::Positive => "positive side: ",
            ErrorContext::Negative => "negative side: ",
            ErrorContext::CustomBuckets => "custom buckets: ",
        }
    }
}

/// A bucket count as it appears in an error message: integer histograms print an `int64`, float
/// histograms a `float64` (Go's `%v` of each).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CountValue {
    /// A count of an integer histogram (after delta decoding).
    Int(i64),
    /// A count of a float histogram.
    Float(f64),
}

impl fmt::Display for CountValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CountValue::Int(v) => write!(f, "{v}"),
            CountValue::Float(v) => f.write_str(&format_g(*v)),
        }
    }
}

/// Go's `%f` (six decimals, `+Inf`/`-Inf`/`NaN` for the specials).
fn go_percent_f(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{v:.6}")
    }
}

const MSG_COUNT_NOT_BIG_ENOUGH: &str =
    "histogram's observation count should be at least the number of observations found in the buckets";
const MSG_COUNT_MISMATCH: &str =
    "histogram's observation count should equal the number of observations found in the buckets (in absence of NaN)";
const MSG_NEGATIVE_COUNT: &str = "histogram's observation count is negative";
const MSG_NEGATIVE_BUCKET_COUNT: &str = "histogram has a bucket whose observation count is negative";
const MSG_SPAN_NEGATIVE_OFFSET: &str = "histogram has a span whose offset is negative";
const MSG_SPANS_BUCKETS_MISMATCH: &str = "histogram spans specify different number of buckets than provided";
const MSG_CUSTOM_BUCKETS_MISMATCH: &str = "histogram custom bounds are too few";
const MSG_CUSTOM_BUCKETS_INVALID: &str = "histogram custom bounds must be in strictly increasing order";
const MSG_CUSTOM_BUCKETS_INFINITE: &str = "histogram custom bounds must be finite";

/// Every error of upstream's `model/histogram` package (the `ErrHistogram…` sentinels with the
/// context upstream wraps them in). `Display` gives exactly upstream's `err.Error()` text.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum HistogramError {
    /// `ErrHistogramCountNotBigEnough`: an integer histogram with a NaN sum counts fewer
    /// observations than its buckets hold.
    CountNotBigEnough {
        /// Sum of the zero bucket and all buckets.
        in_buckets: u64,
        /// The `count` field.
        count: u64,
    },
    /// `ErrHistogramCountMismatch`: an integer histogram without NaN sum whose count differs from
    /// the sum of its buckets.
    CountMismatch {
        /// Sum of the zero bucket and all buckets.
        in_buckets: u64,
        /// The `count` field.
        count: u64,
    },
    /// `ErrHistogramNegativeCount`: a float histogram's `count` is negative.
    NegativeCount {
        /// The `count` field.
        count: f64,
    },
    /// `ErrHistogramNegativeBucketCount` for a regular bucket.
    NegativeBucketCount {
        /// Positive or negative side.
        context: ErrorContext,
        /// 1-based position of the bucket in its bucket vector.
        bucket: usize,
        /// The (absolute) count found.
        count: CountValue,
    },
    /// `ErrHistogramNegativeBucketCount` for the zero bucket of a float histogram.
    NegativeZeroCount {
        /// The zero count.
        count: f64,
    },
    /// `ErrHistogramSpanNegativeOffset`: a span other than the first (for NHCB: any span) has a
    /// negative offset.
    SpanNegativeOffset {
        /// Where the span was found.
        context: ErrorContext,
        /// 1-based span number.
        span: usize,
        /// Its offset.
        offset: i32,
    },
    /// `ErrHistogramSpansBucketsMismatch`: the spans describe a different number of buckets than
    /// the bucket vector holds.
    SpansBucketsMismatch {
        /// Where the mismatch was found.
        context: ErrorContext,
        /// Buckets the spans describe.
        spans_need: u64,
        /// Buckets present.
        have: usize,
    },
    /// `ErrHistogramSpansBucketsMismatch` as `reduceResolution` reports it when the spans ask for
    /// more buckets than there are (`have %d buckets but spans need more`).
    SpansNeedMoreBuckets {
        /// Buckets present.
        have: usize,
    },
    /// `ErrHistogramCustomBucketsMismatch`: NHCB spans reach beyond the custom bounds (+Inf).
    CustomBucketsMismatch {
        /// Number of custom bounds.
        bounds: usize,
        /// Sum of all span offsets and lengths.
        total_span_length: i64,
    },
    /// `ErrHistogramCustomBucketsInvalid`: custom bounds not strictly increasing.
    CustomBucketsInvalid {
        /// The earlier bound.
        previous: f64,
        /// The bound not above it.
        current: f64,
    },
    /// `ErrHistogramCustomBucketsInfinite`: the last custom bound is +Inf.
    CustomBucketsInfinite,
    /// `ErrHistogramCustomBucketsNaN`: a custom bound is NaN.
    CustomBucketsNaN,
    /// `ErrHistogramsIncompatibleSchema`: an operation mixing NHCB and exponential histograms.
    IncompatibleSchema,
    /// `ErrHistogramCustomBucketsZeroCount`.
    CustomBucketsZeroCount,
    /// `ErrHistogramCustomBucketsZeroThresh`.
    CustomBucketsZeroThreshold,
    /// `ErrHistogramCustomBucketsNegSpans`.
    CustomBucketsNegativeSpans,
    /// `ErrHistogramCustomBucketsNegBuckets`.
    CustomBucketsNegativeBuckets,
    /// `ErrHistogramExpSchemaCustomBounds`: an exponential histogram carries custom bounds.
    ExpSchemaCustomBounds,
    /// `InvalidSchemaError`: the schema is neither −4..=8 nor −53.
    InvalidSchema(i32),
    /// `UnknownSchemaError`: the schema is neither −9..=52 nor −53.
    UnknownSchema(i32),
    /// Misuse that upstream answers with a plain error or a panic (reducing the resolution of an
    /// NHCB, or to a higher schema, …); the text is upstream's.
    Unsupported(String),
}

impl fmt::Display for HistogramError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use HistogramError as E;
        match self {
            E::CountNotBigEnough { in_buckets, count } => write!(
                f,
                "{in_buckets} observations found in buckets, but the Count field is {count}: {MSG_COUNT_NOT_BIG_ENOUGH}"
            ),
            E::CountMismatch { in_buckets, count } => write!(
                f,
                "{in_buckets} observations found in buckets, but the Count field is {count}: {MSG_COUNT_MISMATCH}"
            ),
            // Upstream's format string has the two spaces.
            E::NegativeCount { count } => {
                write!(f, "observation count is  {}: {MSG_NEGATIVE_COUNT}", format_g(*count))
            }
            E::NegativeBucketCount { context, bucket, count } => write!(
                f,
                "{}bucket number {bucket} has observation count of {count}: {MSG_NEGATIVE_BUCKET_COUNT}",
                context.prefix()
            ),
            E::NegativeZeroCount { count } => {
                write!(f, "zero bucket has observation count of {}: {MSG_NEGATIVE_BUCKET_COUNT}", format_g(*count))
            }
            E::SpanNegativeOffset { context, span, offset } => {
                write!(f, "{}span number {span} with offset {offset}: {MSG_SPAN_NEGATIVE_OFFSET}", context.prefix())
            }
            E::SpansBucketsMismatch { context, spans_need, have } => write!(
                f,
                "{}spans need {spans_need} buckets, have {have} buckets: {MSG_SPANS_BUCKETS_MISMATCH}",
                context.prefix()
            ),
            E::SpansNeedMoreBuckets { have } => {
                write!(f, "have {have} buckets but spans need more: {MSG_SPANS_BUCKETS_MISMATCH}")
            }
            E::CustomBucketsMismatch { bounds, total_span_length } => write!(
                f,
                "custom buckets: only {bounds} custom bounds defined which is insufficient to cover total span length of {total_span_length}: {MSG_CUSTOM_BUCKETS_MISMATCH}"
            ),
            E::CustomBucketsInvalid { previous, current } => write!(
                f,
                "custom buckets: previous bound is {} and current is {}: {MSG_CUSTOM_BUCKETS_INVALID}",
                go_percent_f(*previous),
                go_percent_f(*current)
            ),
            E::CustomBucketsInfinite => {
                write!(f, "custom buckets: last +Inf bound must not be explicitly defined: {MSG_CUSTOM_BUCKETS_INFINITE}")
            }
            E::CustomBucketsNaN => f.write_str("custom buckets: histogram custom bounds must not be NaN"),
            E::IncompatibleSchema => f.write_str(
                "cannot apply this operation on histograms with a mix of exponential and custom bucket schemas",
            ),
            E::CustomBucketsZeroCount => f.write_str("custom buckets: must have zero count of 0"),
            E::CustomBucketsZeroThreshold => f.write_str("custom buckets: must have zero threshold of 0"),
            E::CustomBucketsNegativeSpans => f.write_str("custom buckets: must not have negative spans"),
            E::CustomBucketsNegativeBuckets => f.write_str("custom buckets: must not have negative buckets"),
            E::ExpSchemaCustomBounds => f.write_str("histogram with exponential schema must not have custom bounds"),
            E::InvalidSchema(s) => write!(
                f,
                "histogram has an invalid schema, which must be between {EXPONENTIAL_SCHEMA_MIN} and {EXPONENTIAL_SCHEMA_MAX} for exponential buckets, or {CUSTOM_BUCKETS_SCHEMA} for custom buckets, got schema {s}"
            ),
            E::UnknownSchema(s) => write!(
                f,
                "histogram has an unknown schema, which must be between {EXPONENTIAL_SCHEMA_MIN_RESERVED} and {EXPONENTIAL_SCHEMA_MAX_RESERVED} for exponential buckets, or {CUSTOM_BUCKETS_SCHEMA} for custom buckets, got schema {s}"
            ),
            E::Unsupported(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for HistogramError {}

impl HistogramError {
    fn with_context(self, context: ErrorContext) -> Self {
        match self {
            HistogramError::NegativeBucketCount { bucket, count, .. } => {
                HistogramError::NegativeBucketCount { context, bucket, count }
            }
            HistogramError::SpanNegativeOffset { span, offset, .. } => {
                HistogramError::SpanNegativeOffset { context, span, offset }
            }
            HistogramError::SpansBucketsMismatch { spans_need, have, .. } => {
                HistogramError::SpansBucketsMismatch { context, spans_need, have }
            }
            other => other,
        }
    }
}

/// Mirrors upstream `checkHistogramSpans` (model/histogram/generic.go).
fn check_spans(spans: &[Span], num_buckets: usize) -> Result<(), HistogramError> {
    let mut need = 0u64;
    for (n, s) in spans.iter().enumerate() {
        if n > 0 && s.offset < 0 {
            return Err(HistogramError::SpanNegativeOffset { context: ErrorContext::None, span: n + 1, offset: s.offset });
        }
        need += u64::from(s.length);
    }
    if need != num_buckets as u64 {
        return Err(HistogramError::SpansBucketsMismatch { context: ErrorContext::None, spans_need: need, have: num_buckets });
    }
    Ok(())
}

/// Mirrors upstream `checkHistogramBuckets` for delta-encoded integer buckets: returns the sum of
/// the absolute counts (wrapping like Go's `uint64`).
fn check_int_buckets(buckets: &[i64]) -> Result<u64, HistogramError> {
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
fn check_float_buckets(buckets: &[f64]) -> Result<(), HistogramError> {
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
fn check_custom_bounds(bounds: &[f64], spans: &[Span], num_buckets: usize) -> Result<(), HistogramError> {
    let mut prev = f64::NEG_INFINITY;
    for (i, &curr) in bounds.iter().enumerate() {
        if curr.is_nan() {
            return Err(HistogramError::CustomBucketsNaN);
        }
        if i > 0 && curr <= prev {
            return Err(HistogramError::CustomBucketsInvalid { previous: prev, current: curr });
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
        return Err(HistogramError::CustomBucketsMismatch { bounds: bounds.len(), total_span_length });
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
                return Err(HistogramError::CountNotBigEnough { in_buckets, count: self.count });
            }
        } else if in_buckets != self.count {
            return Err(HistogramError::CountMismatch { in_buckets, count: self.count });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histogram::CounterResetHint;

    fn sp(v: &[(i32, u32)]) -> Vec<Span> {
        v.iter().map(|&(o, l)| Span::new(o, l)).collect()
    }

    /// Upstream's `Histogram.ToFloat`, which (unlike `to_float`) drops the fields NHCB does not use.
    fn to_float_like_upstream(h: &Histogram) -> FloatHistogram {
        let mut fh = h.to_float();
        if is_custom_buckets_schema(h.schema) {
            fh.zero_threshold = 0.0;
            fh.zero_count = 0.0;
            fh.negative_spans.clear();
            fh.negative_buckets.clear();
        } else {
            fh.custom_values.clear();
        }
        fh
    }

    /// Translation of upstream `TestHistogramValidation` (model/histogram/histogram_test.go).
    #[test]
    fn histogram_validation_table() {
        let nan = f64::NAN;
        let inf = f64::INFINITY;
        let h = |schema: i32| Histogram { schema, ..Histogram::default() };
        // (name, histogram, expected error text or "", skip the float version)
        let cases: Vec<(&str, Histogram, &str, bool)> = vec![
            (
                "valid histogram",
                Histogram {
                    count: 12,
                    zero_count: 2,
                    zero_threshold: 0.001,
                    sum: 19.4,
                    schema: 1,
                    positive_spans: sp(&[(0, 2), (1, 2)]),
                    positive_buckets: vec![1, 1, -1, 0],
                    negative_spans: sp(&[(0, 2), (1, 2)]),
                    negative_buckets: vec![1, 1, -1, 0],
                    ..h(1)
                },
                "",
                false,
            ),
            (
                "NaN observations, count above buckets",
                Histogram { zero_count: 2, count: 4, sum: nan, positive_spans: sp(&[(0, 1)]), positive_buckets: vec![1], ..h(0) },
                "",
                false,
            ),
            (
                "no NaN, count above buckets",
                Histogram { zero_count: 2, count: 4, sum: 333.0, positive_spans: sp(&[(0, 1)]), positive_buckets: vec![1], ..h(0) },
                "3 observations found in buckets, but the Count field is 4: histogram's observation count should equal the number of observations found in the buckets (in absence of NaN)",
                true,
            ),
            (
                "too few negative buckets",
                Histogram { negative_spans: sp(&[(0, 1)]), ..h(0) },
                "negative side: spans need 1 buckets, have 0 buckets: histogram spans specify different number of buckets than provided",
                false,
            ),
            (
                "too few positive buckets",
                Histogram { positive_spans: sp(&[(0, 1)]), ..h(0) },
                "positive side: spans need 1 buckets, have 0 buckets: histogram spans specify different number of buckets than provided",
                false,
            ),
            (
                "too many negative buckets",
                Histogram { negative_spans: sp(&[(0, 1)]), negative_buckets: vec![1, 2], ..h(0) },
                "negative side: spans need 1 buckets, have 2 buckets: histogram spans specify different number of buckets than provided",
                false,
            ),
            (
                "too many positive buckets",
                Histogram { positive_spans: sp(&[(0, 1)]), positive_buckets: vec![1, 2], ..h(0) },
                "positive side: spans need 1 buckets, have 2 buckets: histogram spans specify different number of buckets than provided",
                false,
            ),
            (
                "negative span negative offset",
                Histogram { negative_spans: sp(&[(-1, 1), (-1, 1)]), negative_buckets: vec![1, 2], ..h(0) },
                "negative side: span number 2 with offset -1: histogram has a span whose offset is negative",
                false,
            ),
            (
                "positive span negative offset",
                Histogram { positive_spans: sp(&[(-1, 1), (-1, 1)]), positive_buckets: vec![1, 2], ..h(0) },
                "positive side: span number 2 with offset -1: histogram has a span whose offset is negative",
                false,
            ),
            (
                "negative bucket negative count",
                Histogram { negative_spans: sp(&[(-1, 1)]), negative_buckets: vec![-1], ..h(0) },
                "negative side: bucket number 1 has observation count of -1: histogram has a bucket whose observation count is negative",
                false,
            ),
            (
                "positive bucket negative count",
                Histogram { positive_spans: sp(&[(-1, 1)]), positive_buckets: vec![-1], ..h(0) },
                "positive side: bucket number 1 has observation count of -1: histogram has a bucket whose observation count is negative",
                false,
            ),
            (
                "count lower than buckets",
                Histogram {
                    negative_spans: sp(&[(-1, 1)]),
                    positive_spans: sp(&[(-1, 1)]),
                    negative_buckets: vec![1],
                    positive_buckets: vec![1],
                    ..h(0)
                },
                "2 observations found in buckets, but the Count field is 0: histogram's observation count should equal the number of observations found in the buckets (in absence of NaN)",
                true,
            ),
            (
                "zero bucket not counted",
                Histogram {
                    count: 2,
                    zero_count: 1,
                    negative_spans: sp(&[(-1, 1)]),
                    positive_spans: sp(&[(-1, 1)]),
                    negative_buckets: vec![1],
                    positive_buckets: vec![1],
                    ..h(0)
                },
                "3 observations found in buckets, but the Count field is 2: histogram's observation count should equal the number of observations found in the buckets (in absence of NaN)",
                true,
            ),
            (
                "exponential histogram with custom buckets schema",
                Histogram {
                    count: 12,
                    zero_count: 2,
                    zero_threshold: 0.001,
                    sum: 19.4,
                    positive_spans: sp(&[(0, 2), (1, 2)]),
                    positive_buckets: vec![1, 1, -1, 0],
                    negative_spans: sp(&[(0, 2), (1, 2)]),
                    negative_buckets: vec![1, 1, -1, 0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "custom buckets: only 0 custom bounds defined which is insufficient to cover total span length of 5: histogram custom bounds are too few",
                false,
            ),
            (
                "custom buckets histogram with exponential schema",
                Histogram {
                    count: 5,
                    sum: 19.4,
                    positive_spans: sp(&[(0, 2), (1, 2)]),
                    positive_buckets: vec![1, 1, -1, 0],
                    custom_values: vec![1.0, 2.0, 3.0, 4.0],
                    ..h(0)
                },
                "histogram with exponential schema must not have custom bounds",
                true,
            ),
            (
                "custom buckets histogram with zero/negative buckets",
                Histogram {
                    count: 12,
                    zero_count: 2,
                    zero_threshold: 0.001,
                    sum: 19.4,
                    positive_spans: sp(&[(0, 2), (1, 2)]),
                    positive_buckets: vec![1, 1, -1, 0],
                    negative_spans: sp(&[(0, 2), (1, 2)]),
                    negative_buckets: vec![1, 1, -1, 0],
                    custom_values: vec![1.0, 2.0, 3.0, 4.0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "custom buckets: must have zero count of 0",
                true,
            ),
            (
                "custom buckets negative offset in first span",
                Histogram {
                    count: 5,
                    sum: 19.4,
                    positive_spans: sp(&[(-1, 2), (1, 2)]),
                    positive_buckets: vec![1, 1, -1, 0],
                    custom_values: vec![1.0, 2.0, 3.0, 4.0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "custom buckets: span number 1 with offset -1: histogram has a span whose offset is negative",
                false,
            ),
            (
                "custom buckets negative offset in subsequent span",
                Histogram {
                    count: 5,
                    sum: 19.4,
                    positive_spans: sp(&[(0, 2), (-1, 2)]),
                    positive_buckets: vec![1, 1, -1, 0],
                    custom_values: vec![1.0, 2.0, 3.0, 4.0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "custom buckets: span number 2 with offset -1: histogram has a span whose offset is negative",
                false,
            ),
            (
                "custom buckets non-matching bucket counts",
                Histogram {
                    count: 5,
                    sum: 19.4,
                    positive_spans: sp(&[(0, 2), (1, 2)]),
                    positive_buckets: vec![1, 1, -1],
                    custom_values: vec![1.0, 2.0, 3.0, 4.0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "custom buckets: spans need 4 buckets, have 3 buckets: histogram spans specify different number of buckets than provided",
                false,
            ),
            (
                "custom buckets too few bounds",
                Histogram {
                    count: 5,
                    sum: 19.4,
                    positive_spans: sp(&[(0, 2), (1, 2)]),
                    positive_buckets: vec![1, 1, -1, 0],
                    custom_values: vec![1.0, 2.0, 3.0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "custom buckets: only 3 custom bounds defined which is insufficient to cover total span length of 5: histogram custom bounds are too few",
                false,
            ),
            (
                "valid custom buckets histogram",
                Histogram {
                    count: 5,
                    sum: 19.4,
                    positive_spans: sp(&[(0, 2), (1, 2)]),
                    positive_buckets: vec![1, 1, -1, 0],
                    custom_values: vec![1.0, 2.0, 3.0, 4.0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "",
                false,
            ),
            (
                "valid custom buckets histogram with extra bounds",
                Histogram {
                    count: 5,
                    sum: 19.4,
                    positive_spans: sp(&[(0, 2), (1, 2)]),
                    positive_buckets: vec![1, 1, -1, 0],
                    custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "",
                false,
            ),
            (
                "non-increasing bound",
                Histogram { custom_values: vec![0.0, 0.0], ..h(CUSTOM_BUCKETS_SCHEMA) },
                "custom buckets: previous bound is 0.000000 and current is 0.000000: histogram custom bounds must be in strictly increasing order",
                false,
            ),
            (
                "explicit +Inf bound",
                Histogram { custom_values: vec![1.0, inf], ..h(CUSTOM_BUCKETS_SCHEMA) },
                "custom buckets: last +Inf bound must not be explicitly defined: histogram custom bounds must be finite",
                false,
            ),
            (
                "explicit -Inf bound is fine",
                Histogram { custom_values: vec![-inf, 1.0], ..h(CUSTOM_BUCKETS_SCHEMA) },
                "",
                false,
            ),
            (
                "NaN bound",
                Histogram { custom_values: vec![1.0, nan, 3.0], ..h(CUSTOM_BUCKETS_SCHEMA) },
                "custom buckets: histogram custom bounds must not be NaN",
                false,
            ),
            (
                "schema too high",
                h(10),
                "histogram has an invalid schema, which must be between -4 and 8 for exponential buckets, or -53 for custom buckets, got schema 10",
                false,
            ),
            (
                "schema too low",
                h(-10),
                "histogram has an invalid schema, which must be between -4 and 8 for exponential buckets, or -53 for custom buckets, got schema -10",
                false,
            ),
        ];
        for (name, h, want, skip_float) in cases {
            let got = h.validate().err().map(|e| e.to_string()).unwrap_or_default();
            assert_eq!(got, want, "{name} (int)");
            if skip_float {
                continue;
            }
            let got = to_float_like_upstream(&h).validate().err().map(|e| e.to_string()).unwrap_or_default();
            assert_eq!(got, want, "{name} (float)");
        }
    }

    fn err_text(fh: &FloatHistogram) -> String {
        fh.validate().err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn float_validation_specific_errors() {
        let fh = FloatHistogram { zero_count: -0.5, ..FloatHistogram::default() };
        assert_eq!(
            err_text(&fh),
            "zero bucket has observation count of -0.5: histogram has a bucket whose observation count is negative"
        );
        let fh = FloatHistogram { count: -2.5, ..FloatHistogram::default() };
        assert_eq!(err_text(&fh), "observation count is  -2.5: histogram's observation count is negative");
        let fh = FloatHistogram {
            count: 3.0,
            positive_spans: sp(&[(0, 2)]),
            positive_buckets: vec![1.0, -1e-7],
            counter_reset_hint: CounterResetHint::Gauge,
            ..FloatHistogram::default()
        };
        assert_eq!(
            err_text(&fh),
            "positive side: bucket number 2 has observation count of -1e-07: histogram has a bucket whose observation count is negative"
        );
        // Reserved schemas are known but not valid.
        assert_eq!(FloatHistogram { schema: 9, ..FloatHistogram::default() }.validate(), Err(HistogramError::InvalidSchema(9)));
        assert!(HistogramError::UnknownSchema(60).to_string().ends_with("between -9 and 52 for exponential buckets, or -53 for custom buckets, got schema 60"));
        // NaN counts pass, as upstream (NaN < 0 is false).
        let fh = FloatHistogram { count: f64::NAN, zero_count: f64::NAN, ..FloatHistogram::default() };
        assert!(fh.validate().is_ok());
    }

    #[test]
    fn int_validation_wraps_instead_of_overflowing() {
        let h = Histogram {
            count: 0,
            positive_spans: sp(&[(0, 3)]),
            positive_buckets: vec![i64::MAX, 0, 0],
            ..Histogram::default()
        };
        assert!(h.validate().is_err());
        let h = Histogram { positive_spans: sp(&[(0, u32::MAX), (0, u32::MAX)]), ..Histogram::default() };
        assert!(h.validate().is_err());
    }
}
