//! [`HistogramError`]: upstream's histogram errors with their exact texts.

use super::*;

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
pub(super) fn go_percent_f(v: f64) -> String {
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
    /// Not upstream (which would panic or wrap around): spans reach bucket indexes beyond `i32`.
    BucketIndexOutOfRange {
        /// Positive or negative side.
        context: ErrorContext,
    },
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
                write!(
                    f,
                    "zero bucket has observation count of {}: {MSG_NEGATIVE_BUCKET_COUNT}",
                    format_g(*count)
                )
            }
            E::SpanNegativeOffset { context, span, offset } => {
                write!(
                    f,
                    "{}span number {span} with offset {offset}: {MSG_SPAN_NEGATIVE_OFFSET}",
                    context.prefix()
                )
            }
            E::SpansBucketsMismatch {
                context,
                spans_need,
                have,
            } => write!(
                f,
                "{}spans need {spans_need} buckets, have {have} buckets: {MSG_SPANS_BUCKETS_MISMATCH}",
                context.prefix()
            ),
            E::SpansNeedMoreBuckets { have } => {
                write!(
                    f,
                    "have {have} buckets but spans need more: {MSG_SPANS_BUCKETS_MISMATCH}"
                )
            }
            E::CustomBucketsMismatch {
                bounds,
                total_span_length,
            } => write!(
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
                write!(
                    f,
                    "custom buckets: last +Inf bound must not be explicitly defined: {MSG_CUSTOM_BUCKETS_INFINITE}"
                )
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
            E::BucketIndexOutOfRange { context } => {
                write!(
                    f,
                    "{}spans reach bucket indexes beyond the 32-bit range",
                    context.prefix()
                )
            }
            E::Unsupported(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for HistogramError {}

impl HistogramError {
    pub(super) fn with_context(self, context: ErrorContext) -> Self {
        match self {
            HistogramError::NegativeBucketCount { bucket, count, .. } => {
                HistogramError::NegativeBucketCount { context, bucket, count }
            }
            HistogramError::SpanNegativeOffset { span, offset, .. } => {
                HistogramError::SpanNegativeOffset { context, span, offset }
            }
            HistogramError::SpansBucketsMismatch { spans_need, have, .. } => HistogramError::SpansBucketsMismatch {
                context,
                spans_need,
                have,
            },
            other => other,
        }
    }
}
