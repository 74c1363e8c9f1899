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
    custom_bucket_bounds_match, is_custom_buckets_schema, CounterResetHint, FloatHistogram, Histogram, Span, CUSTOM_BUCKETS_SCHEMA, EXPONENTIAL_SCHEMA_MAX,
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
            E::BucketIndexOutOfRange { context } => {
                write!(f, "{}spans reach bucket indexes beyond the 32-bit range", context.prefix())
            }
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

// ---------------------------------------------------------------------------------------------
// Numeric helpers.
// ---------------------------------------------------------------------------------------------

/// One step of Kahan–Neumaier summation: adds `inc` to `sum` with compensation `c`, returning the
/// new sum and compensation. An infinite sum resets the compensation.
///
/// Mirrors upstream `kahansum.Inc` (util/kahansum/kahansum.go).
pub fn kahan_inc(inc: f64, sum: f64, c: f64) -> (f64, f64) {
    let t = sum + inc;
    let c = if t.is_infinite() {
        0.0
    } else if sum.abs() >= inc.abs() {
        c + ((sum - t) + inc)
    } else {
        c + ((inc - t) + sum)
    };
    (t, c)
}

/// `kahan_inc(-dec, sum, c)`. Mirrors upstream `kahansum.Dec`.
pub fn kahan_dec(dec: f64, sum: f64, c: f64) -> (f64, f64) {
    kahan_inc(-dec, sum, c)
}

/// `frac × 2^exp` with a single rounding. Mirrors Go's `math.Ldexp`, which upstream uses for bucket
/// bounds (including its handling of subnormal results).
fn ldexp(frac: f64, exp: i64) -> f64 {
    if frac == 0.0 || !frac.is_finite() {
        return frac;
    }
    // Normalise a subnormal `frac`.
    let (frac, e0) = if frac.abs() < f64::MIN_POSITIVE { (frac * (1u64 << 52) as f64, -52i64) } else { (frac, 0) };
    let bits = frac.to_bits();
    let exp = exp.saturating_add(e0).saturating_add(((bits >> 52) & 0x7ff) as i64 - 1023);
    if exp < -1075 {
        return 0.0f64.copysign(frac);
    }
    if exp > 1023 {
        return if frac < 0.0 { f64::NEG_INFINITY } else { f64::INFINITY };
    }
    let (exp, m) = if exp < -1022 { (exp + 53, 1.0 / (1u64 << 53) as f64) } else { (exp, 1.0) };
    let bits = (bits & !(0x7ffu64 << 52)) | (((exp + 1023) as u64) << 52);
    m * f64::from_bits(bits)
}
/// Go's `math.Frexp`: `x = frac × 2^exp` with `frac` in [0.5, 1).
fn go_frexp(x: f64) -> (f64, i64) {
    if x == 0.0 || !x.is_finite() {
        return (x, 0);
    }
    let (x, e0) = if x.abs() < f64::MIN_POSITIVE { (x * (1u64 << 52) as f64, -52i64) } else { (x, 0) };
    let bits = x.to_bits();
    let exp = e0 + ((bits >> 52) & 0x7ff) as i64 - 1022;
    let frac = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (frac, exp)
}

/// Go's `math.Log` (the FreeBSD algorithm of its pure-Go and amd64 versions), so that results
/// match upstream bit for bit rather than whatever the platform's libm rounds to.
// The constants are spelled as upstream spells them (and round to the same floats).
#[allow(clippy::excessive_precision)]
fn go_log(x: f64) -> f64 {
    const LN2_HI: f64 = 6.93147180369123816490e-01;
    const LN2_LO: f64 = 1.90821492927058770002e-10;
    const L1: f64 = 6.666666666666735130e-01;
    const L2: f64 = 3.999999999940941908e-01;
    const L3: f64 = 2.857142874366239149e-01;
    const L4: f64 = 2.222219843214978396e-01;
    const L5: f64 = 1.818357216161805012e-01;
    const L6: f64 = 1.531383769920937332e-01;
    const L7: f64 = 1.479819860511658591e-01;
    if x.is_nan() || x == f64::INFINITY {
        return x;
    }
    if x < 0.0 {
        return f64::NAN;
    }
    if x == 0.0 {
        return f64::NEG_INFINITY;
    }
    let (mut f1, mut ki) = go_frexp(x);
    if f1 < std::f64::consts::FRAC_1_SQRT_2 {
        f1 *= 2.0;
        ki -= 1;
    }
    let f = f1 - 1.0;
    let k = ki as f64;
    let s = f / (2.0 + f);
    let s2 = s * s;
    let s4 = s2 * s2;
    let t1 = s2 * (L1 + s4 * (L3 + s4 * (L5 + s4 * L7)));
    let t2 = s4 * (L2 + s4 * (L4 + s4 * L6));
    let r = t1 + t2;
    let hfsq = 0.5 * f * f;
    k * LN2_HI - ((hfsq - (s * (hfsq + r) + k * LN2_LO)) - f)
}

/// Go's `math.Log2` (exact for powers of two), as upstream's interpolations use it.
pub(crate) fn go_log2(x: f64) -> f64 {
    let (frac, exp) = go_frexp(x);
    if frac == 0.5 {
        return (exp - 1) as f64;
    }
    go_log(frac) * std::f64::consts::LOG2_E + exp as f64
}

/// Go's `math.Exp2` (its pure-Go version, which amd64 uses), as upstream's interpolations use it.
// The constants are spelled as upstream spells them (and round to the same floats).
#[allow(clippy::excessive_precision)]
pub(crate) fn go_exp2(x: f64) -> f64 {
    const LN2_HI: f64 = 6.93147180369123816490e-01;
    const LN2_LO: f64 = 1.90821492927058770002e-10;
    const P1: f64 = 1.66666666666666657415e-01;
    const P2: f64 = -2.77777777770155933842e-03;
    const P3: f64 = 6.61375632143793436117e-05;
    const P4: f64 = -1.65339022054652515390e-06;
    const P5: f64 = 4.13813679705723846039e-08;
    if x.is_nan() {
        return x;
    }
    if x > 1.0239999999999999e+03 {
        return f64::INFINITY;
    }
    if x < -1.0740e+03 {
        return 0.0;
    }
    let k: i64 = if x > 0.0 {
        (x + 0.5) as i64
    } else if x < 0.0 {
        (x - 0.5) as i64
    } else {
        0
    };
    let t = x - k as f64;
    let hi = t * LN2_HI;
    let lo = -t * LN2_LO;
    let r = hi - lo;
    let tt = r * r;
    let c = r - tt * (P1 + tt * (P2 + tt * (P3 + tt * (P4 + tt * P5))));
    let y = 1.0 - ((lo - (r * c) / (2.0 - c)) - hi);
    ldexp(y, k)
}

/// Bucket bounds in [0.5, 1) for schemas 0..=8: the same precomputed constants as upstream's
/// `exponentialBounds` (model/histogram/generic.go), so bounds are bit-identical.
const EXPONENTIAL_BOUNDS: [&[f64]; 9] = [
    // Schema 0.
    &[
        0.5,
    ],
    // Schema 1.
    &[
        0.5, 0.7071067811865475,
    ],
    // Schema 2.
    &[
        0.5, 0.5946035575013605, 0.7071067811865475, 0.8408964152537144,
    ],
    // Schema 3.
    &[
        0.5, 0.5452538663326288, 0.5946035575013605, 0.6484197773255048,
        0.7071067811865475, 0.7711054127039704, 0.8408964152537144, 0.9170040432046711,
    ],
    // Schema 4.
    &[
        0.5, 0.5221368912137069, 0.5452538663326288, 0.5693943173783458,
        0.5946035575013605, 0.620928906036742, 0.6484197773255048, 0.6771277734684463,
        0.7071067811865475, 0.7384130729697496, 0.7711054127039704, 0.805245165974627,
        0.8408964152537144, 0.8781260801866495, 0.9170040432046711, 0.9576032806985735,
    ],
    // Schema 5.
    &[
        0.5, 0.5109485743270583, 0.5221368912137069, 0.5335702003384117,
        0.5452538663326288, 0.5571933712979462, 0.5693943173783458, 0.5818624293887887,
        0.5946035575013605, 0.6076236799902344, 0.620928906036742, 0.6345254785958666,
        0.6484197773255048, 0.6626183215798706, 0.6771277734684463, 0.6919549409819159,
        0.7071067811865475, 0.7225904034885232, 0.7384130729697496, 0.7545822137967112,
        0.7711054127039704, 0.7879904225539431, 0.805245165974627, 0.8228777390769823,
        0.8408964152537144, 0.8593096490612387, 0.8781260801866495, 0.8973545375015533,
        0.9170040432046711, 0.9370838170551498, 0.9576032806985735, 0.9785720620876999,
    ],
    // Schema 6.
    &[
        0.5, 0.5054446430258502, 0.5109485743270583, 0.5165124395106142,
        0.5221368912137069, 0.5278225891802786, 0.5335702003384117, 0.5393803988785598,
        0.5452538663326288, 0.5511912916539204, 0.5571933712979462, 0.5632608093041209,
        0.5693943173783458, 0.5755946149764913, 0.5818624293887887, 0.5881984958251406,
        0.5946035575013605, 0.6010783657263515, 0.6076236799902344, 0.6142402680534349,
        0.620928906036742, 0.6276903785123455, 0.6345254785958666, 0.6414350080393891,
        0.6484197773255048, 0.6554806057623822, 0.6626183215798706, 0.6698337620266515,
        0.6771277734684463, 0.6845012114872953, 0.6919549409819159, 0.6994898362691555,
        0.7071067811865475, 0.7148066691959849, 0.7225904034885232, 0.7304588970903234,
        0.7384130729697496, 0.7464538641456323, 0.7545822137967112, 0.762799075372269,
        0.7711054127039704, 0.7795022001189185, 0.7879904225539431, 0.7965710756711334,
        0.805245165974627, 0.8140137109286738, 0.8228777390769823, 0.8318382901633681,
        0.8408964152537144, 0.8500531768592616, 0.8593096490612387, 0.8686669176368529,
        0.8781260801866495, 0.8876882462632604, 0.8973545375015533, 0.9071260877501991,
        0.9170040432046711, 0.9269895625416926, 0.9370838170551498, 0.9472879907934827,
        0.9576032806985735, 0.9680308967461471, 0.9785720620876999, 0.9892280131939752,
    ],
    // Schema 7.
    &[
        0.5, 0.5027149505564014, 0.5054446430258502, 0.5081891574554764,
        0.5109485743270583, 0.5137229745593818, 0.5165124395106142, 0.5193170509806894,
        0.5221368912137069, 0.5249720429003435, 0.5278225891802786, 0.5306886136446309,
        0.5335702003384117, 0.5364674337629877, 0.5393803988785598, 0.5423091811066545,
        0.5452538663326288, 0.5482145409081883, 0.5511912916539204, 0.5541842058618393,
        0.5571933712979462, 0.5602188762048033, 0.5632608093041209, 0.5663192597993595,
        0.5693943173783458, 0.572486072215902, 0.5755946149764913, 0.5787200368168754,
        0.5818624293887887, 0.585021884841625, 0.5881984958251406, 0.5913923554921704,
        0.5946035575013605, 0.5978321960199137, 0.6010783657263515, 0.6043421618132907,
        0.6076236799902344, 0.6109230164863786, 0.6142402680534349, 0.6175755319684665,
        0.620928906036742, 0.6243004885946023, 0.6276903785123455, 0.6310986751971253,
        0.6345254785958666, 0.637970889198196, 0.6414350080393891, 0.6449179367033329,
        0.6484197773255048, 0.6519406325959679, 0.6554806057623822, 0.659039800633032,
        0.6626183215798706, 0.6662162735415805, 0.6698337620266515, 0.6734708931164728,
        0.6771277734684463, 0.6808045103191123, 0.6845012114872953, 0.688217985377265,
        0.6919549409819159, 0.6957121878859629, 0.6994898362691555, 0.7032879969095076,
        0.7071067811865475, 0.7109463010845827, 0.7148066691959849, 0.718687998724491,
        0.7225904034885232, 0.7265139979245261, 0.7304588970903234, 0.7344252166684908,
        0.7384130729697496, 0.7424225829363761, 0.7464538641456323, 0.7505070348132126,
        0.7545822137967112, 0.7586795205991071, 0.762799075372269, 0.7669409989204777,
        0.7711054127039704, 0.7752924388424999, 0.7795022001189185, 0.7837348199827764,
        0.7879904225539431, 0.7922691326262467, 0.7965710756711334, 0.8008963778413465,
        0.805245165974627, 0.8096175675974316, 0.8140137109286738, 0.8184337248834821,
        0.8228777390769823, 0.8273458838280969, 0.8318382901633681, 0.8363550898207981,
        0.8408964152537144, 0.8454623996346523, 0.8500531768592616, 0.8546688815502312,
        0.8593096490612387, 0.8639756154809185, 0.8686669176368529, 0.8733836930995842,
        0.8781260801866495, 0.8828942179666361, 0.8876882462632604, 0.8925083056594671,
        0.8973545375015533, 0.9022270839033115, 0.9071260877501991, 0.9120516927035263,
        0.9170040432046711, 0.9219832844793128, 0.9269895625416926, 0.9320230241988943,
        0.9370838170551498, 0.9421720895161669, 0.9472879907934827, 0.9524316709088368,
        0.9576032806985735, 0.9628029718180622, 0.9680308967461471, 0.9732872087896164,
        0.9785720620876999, 0.9838856116165875, 0.9892280131939752, 0.9945994234836328,
    ],
    // Schema 8.
    &[
        0.5, 0.5013556375251013, 0.5027149505564014, 0.5040779490592088,
        0.5054446430258502, 0.5068150424757447, 0.5081891574554764, 0.509566998038869,
        0.5109485743270583, 0.5123338964485679, 0.5137229745593818, 0.5151158188430205,
        0.5165124395106142, 0.5179128468009786, 0.5193170509806894, 0.520725062344158,
        0.5221368912137069, 0.5235525479396449, 0.5249720429003435, 0.526395386502313,
        0.5278225891802786, 0.5292536613972564, 0.5306886136446309, 0.5321274564422321,
        0.5335702003384117, 0.5350168559101208, 0.5364674337629877, 0.5379219445313954,
        0.5393803988785598, 0.5408428074966075, 0.5423091811066545, 0.5437795304588847,
        0.5452538663326288, 0.5467321995364429, 0.5482145409081883, 0.549700901315111,
        0.5511912916539204, 0.5526857228508706, 0.5541842058618393, 0.5556867516724088,
        0.5571933712979462, 0.5587040757836845, 0.5602188762048033, 0.5617377836665098,
        0.5632608093041209, 0.564787964283144, 0.5663192597993595, 0.5678547070789026,
        0.5693943173783458, 0.5709381019847808, 0.572486072215902, 0.5740382394200894,
        0.5755946149764913, 0.5771552102951081, 0.5787200368168754, 0.5802891060137493,
        0.5818624293887887, 0.5834400184762408, 0.585021884841625, 0.5866080400818185,
        0.5881984958251406, 0.5897932637314379, 0.5913923554921704, 0.5929957828304968,
        0.5946035575013605, 0.5962156912915756, 0.5978321960199137, 0.5994530835371903,
        0.6010783657263515, 0.6027080545025619, 0.6043421618132907, 0.6059806996384005,
        0.6076236799902344, 0.6092711149137041, 0.6109230164863786, 0.6125793968185725,
        0.6142402680534349, 0.6159056423670379, 0.6175755319684665, 0.6192499490999082,
        0.620928906036742, 0.622612415087629, 0.6243004885946023, 0.6259931389331581,
        0.6276903785123455, 0.6293922197748583, 0.6310986751971253, 0.6328097572894031,
        0.6345254785958666, 0.6362458516947014, 0.637970889198196, 0.6397006037528346,
        0.6414350080393891, 0.6431741147730128, 0.6449179367033329, 0.6466664866145447,
        0.6484197773255048, 0.6501778216898253, 0.6519406325959679, 0.6537082229673385,
        0.6554806057623822, 0.6572577939746774, 0.659039800633032, 0.6608266388015788,
        0.6626183215798706, 0.6644148621029772, 0.6662162735415805, 0.6680225691020727,
        0.6698337620266515, 0.6716498655934177, 0.6734708931164728, 0.6752968579460171,
        0.6771277734684463, 0.6789636531064505, 0.6808045103191123, 0.6826503586020058,
        0.6845012114872953, 0.6863570825438342, 0.688217985377265, 0.690083933630119,
        0.6919549409819159, 0.6938310211492645, 0.6957121878859629, 0.6975984549830999,
        0.6994898362691555, 0.7013863456101023, 0.7032879969095076, 0.7051948041086352,
        0.7071067811865475, 0.7090239421602076, 0.7109463010845827, 0.7128738720527471,
        0.7148066691959849, 0.7167447066838943, 0.718687998724491, 0.7206365595643126,
        0.7225904034885232, 0.7245495448210174, 0.7265139979245261, 0.7284837772007218,
        0.7304588970903234, 0.7324393720732029, 0.7344252166684908, 0.7364164454346837,
        0.7384130729697496, 0.7404151139112358, 0.7424225829363761, 0.7444354947621984,
        0.7464538641456323, 0.7484777058836176, 0.7505070348132126, 0.7525418658117031,
        0.7545822137967112, 0.7566280937263048, 0.7586795205991071, 0.7607365094544071,
        0.762799075372269, 0.7648672334736434, 0.7669409989204777, 0.7690203869158282,
        0.7711054127039704, 0.7731960915705107, 0.7752924388424999, 0.7773944698885442,
        0.7795022001189185, 0.7816156449856788, 0.7837348199827764, 0.7858597406461707,
        0.7879904225539431, 0.7901268813264122, 0.7922691326262467, 0.7944171921585818,
        0.7965710756711334, 0.7987307989543135, 0.8008963778413465, 0.8030678282083853,
        0.805245165974627, 0.8074284071024302, 0.8096175675974316, 0.8118126635086642,
        0.8140137109286738, 0.8162207259936375, 0.8184337248834821, 0.820652723822003,
        0.8228777390769823, 0.8251087869603088, 0.8273458838280969, 0.8295890460808079,
        0.8318382901633681, 0.8340936325652911, 0.8363550898207981, 0.8386226785089391,
        0.8408964152537144, 0.8431763167241966, 0.8454623996346523, 0.8477546807446661,
        0.8500531768592616, 0.8523579048290255, 0.8546688815502312, 0.8569861239649629,
        0.8593096490612387, 0.8616394738731368, 0.8639756154809185, 0.8663180910111553,
        0.8686669176368529, 0.871022112577578, 0.8733836930995842, 0.8757516765159389,
        0.8781260801866495, 0.8805069215187917, 0.8828942179666361, 0.8852879870317771,
        0.8876882462632604, 0.890095013257712, 0.8925083056594671, 0.8949281411607002,
        0.8973545375015533, 0.8997875124702672, 0.9022270839033115, 0.9046732696855155,
        0.9071260877501991, 0.909585556079304, 0.9120516927035263, 0.9145245157024483,
        0.9170040432046711, 0.9194902933879467, 0.9219832844793128, 0.9244830347552253,
        0.9269895625416926, 0.92950288621441, 0.9320230241988943, 0.9345499949706191,
        0.9370838170551498, 0.93962450902828, 0.9421720895161669, 0.9447265771954693,
        0.9472879907934827, 0.9498563490882775, 0.9524316709088368, 0.9550139751351947,
        0.9576032806985735, 0.9601996065815236, 0.9628029718180622, 0.9654133954938133,
        0.9680308967461471, 0.9706554947643201, 0.9732872087896164, 0.9759260581154889,
        0.9785720620876999, 0.9812252401044634, 0.9838856116165875, 0.9865531961276168,
        0.9892280131939752, 0.9919100824251095, 0.9945994234836328, 0.9972960560854698,
    ],
];

/// The upper bound of bucket `idx` in exponential schema `schema` (upstream `getBoundExponential`,
/// model/histogram/generic.go). The last finite bucket ends at `f64::MAX`, as upstream.
///
/// Schemas above 8 have no table upstream (it would panic); here they get `2^(idx·2^-schema)`, a
/// defined value for hostile input only.
pub fn exponential_bound(idx: i32, schema: i32) -> f64 {
    if schema < 0 {
        let shift = -i64::from(schema);
        let exp = if shift >= 64 { 0 } else { i64::from(idx).wrapping_shl(shift as u32) };
        if exp == 1024 {
            return f64::MAX;
        }
        return ldexp(1.0, exp);
    }
    let Some(table) = usize::try_from(schema).ok().and_then(|s| EXPONENTIAL_BOUNDS.get(s)) else {
        return (f64::from(idx) * (-f64::from(schema)).exp2()).exp2();
    };
    let frac_idx = (idx & ((1i32 << schema) - 1)) as usize;
    let frac = table.get(frac_idx).copied().unwrap_or(0.5);
    let exp = (i64::from(idx) >> schema) + 1;
    if frac == 0.5 && exp == 1025 {
        return f64::MAX;
    }
    ldexp(frac, exp)
}

/// The upper bound of bucket `idx` (upstream `getBound`): for NHCB the custom bound, −Inf below
/// index 0 and +Inf from index `custom_values.len()` on (upstream panics beyond those two).
pub fn bucket_bound(idx: i32, schema: i32, custom_values: &[f64]) -> f64 {
    if is_custom_buckets_schema(schema) {
        if idx < 0 {
            return f64::NEG_INFINITY;
        }
        return custom_values.get(idx as usize).copied().unwrap_or(f64::INFINITY);
    }
    exponential_bound(idx, schema)
}

/// The bucket index in `target_schema` that bucket `idx` of `origin_schema` falls into (upstream
/// `targetIdx`), with Go's `int32` wrapping and shift semantics.
fn target_idx(idx: i32, origin_schema: i32, target_schema: i32) -> i32 {
    let x = idx.wrapping_sub(1);
    let shift = i64::from(origin_schema) - i64::from(target_schema);
    let shifted = if shift <= 0 {
        x
    } else if shift >= 32 {
        if x < 0 { -1 } else { 0 }
    } else {
        x >> shift
    };
    shifted.wrapping_add(1)
}

/// A bucket with its bounds (upstream `Bucket[float64]`). For exponential schemas a bound is
/// inclusive on the side away from zero; NHCB buckets are `(lower, upper]`, the first one `[-Inf, upper]`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Bucket {
    /// Lower bound.
    pub lower: f64,
    /// Upper bound.
    pub upper: f64,
    /// Whether `lower` belongs to the bucket.
    pub lower_inclusive: bool,
    /// Whether `upper` belongs to the bucket.
    pub upper_inclusive: bool,
    /// Observations in the bucket.
    pub count: f64,
    /// Index within the schema (irrelevant for the zero bucket, which has 0).
    pub index: i32,
}

impl fmt::Display for Bucket {
    /// Mirrors upstream `Bucket.String`: `[lower,upper]:count` with `(`/`)` for exclusive bounds.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}{},{}{}:{}",
            if self.lower_inclusive { '[' } else { '(' },
            format_g(self.lower),
            format_g(self.upper),
            if self.upper_inclusive { ']' } else { ')' },
            format_g(self.count)
        )
    }
}

impl Bucket {
    /// The fraction (0..=1) of the bucket's width at or below `v`, for `lower < v < upper` with
    /// finite bounds: linear interpolation if `linear` (NHCB and zero bucket), else on a log2 scale
    /// (negative buckets mirrored).
    ///
    /// Mirrors upstream `Bucket.FractionBelow` (model/histogram/generic.go).
    pub fn fraction_below(&self, v: f64, linear: bool) -> f64 {
        if linear {
            return (v - self.lower) / (self.upper - self.lower);
        }
        let log_lower = go_log2(self.lower.abs());
        let log_upper = go_log2(self.upper.abs());
        let log_v = go_log2(v.abs());
        if v > 0.0 {
            return (log_v - log_lower) / (log_upper - log_lower);
        }
        1.0 - ((log_v - log_upper) / (log_lower - log_upper))
    }
}

/// Builds the bucket at `idx` (upstream `baseBucketIterator.at`).
fn make_bucket(idx: i32, count: f64, schema: i32, positive: bool, custom_values: &[f64]) -> Bucket {
    let (lower, upper) = if positive {
        (bucket_bound(idx.wrapping_sub(1), schema, custom_values), bucket_bound(idx, schema, custom_values))
    } else {
        (-bucket_bound(idx, schema, custom_values), -bucket_bound(idx.wrapping_sub(1), schema, custom_values))
    };
    let (lower_inclusive, upper_inclusive) =
        if is_custom_buckets_schema(schema) { (idx == 0, true) } else { (lower < 0.0, upper > 0.0) };
    Bucket { lower, upper, lower_inclusive, upper_inclusive, count, index: idx }
}

// ---------------------------------------------------------------------------------------------
// Bucket iterators.
// ---------------------------------------------------------------------------------------------

/// Iterates the positive buckets in ascending or the negative buckets in descending order of
/// their absolute value, optionally merged into a lower-resolution schema and skipping buckets
/// whose absolute upper bound is at most a start value (upstream `floatBucketIterator`).
/// Stops early, without panicking, where spans and buckets disagree.
#[derive(Debug, Clone)]
pub struct FloatBucketIter<'a> {
    schema: i32,
    target_schema: i32,
    spans: &'a [Span],
    buckets: &'a [f64],
    custom_values: &'a [f64],
    positive: bool,
    spans_idx: usize,
    idx_in_span: u32,
    buckets_idx: usize,
    curr_count: f64,
    curr_idx: i32,
    orig_idx: i32,
    absolute_start_value: f64,
    bound_reached_start_value: bool,
}

impl<'a> FloatBucketIter<'a> {
    /// Upstream `FloatHistogram.floatBucketIterator`. `target_schema` must not exceed the
    /// histogram's schema and must be NHCB exactly when the histogram is; otherwise (upstream
    /// panics) the iterator uses the histogram's own schema.
    fn new(h: &'a FloatHistogram, positive: bool, absolute_start_value: f64, target_schema: i32) -> Self {
        let target_schema = if is_custom_buckets_schema(h.schema) != is_custom_buckets_schema(target_schema)
            || target_schema > h.schema
        {
            h.schema
        } else {
            target_schema
        };
        let (spans, buckets, custom_values): (&[Span], &[f64], &[f64]) = if positive {
            (&h.positive_spans, &h.positive_buckets, &h.custom_values)
        } else {
            (&h.negative_spans, &h.negative_buckets, &[])
        };
        Self {
            schema: h.schema,
            target_schema,
            spans,
            buckets,
            custom_values,
            positive,
            spans_idx: 0,
            idx_in_span: 0,
            buckets_idx: 0,
            curr_count: 0.0,
            curr_idx: 0,
            orig_idx: 0,
            absolute_start_value,
            bound_reached_start_value: absolute_start_value == 0.0,
        }
    }

    /// Upstream `floatBucketIterator.Next` (the recursion for skipped buckets is a loop here).
    fn advance(&mut self) -> bool {
        loop {
            if !self.advance_once() {
                return false;
            }
            if !self.bound_reached_start_value
                && is_exponential_schema(self.target_schema)
                && exponential_bound(self.curr_idx, self.target_schema) <= self.absolute_start_value
            {
                continue;
            }
            self.bound_reached_start_value = true;
            return true;
        }
    }

    fn advance_once(&mut self) -> bool {
        let Some(&first) = self.spans.get(self.spans_idx) else {
            return false;
        };
        let mut span = first;
        if self.schema == self.target_schema {
            if self.buckets_idx == 0 {
                self.curr_idx = span.offset;
            } else {
                self.curr_idx = self.curr_idx.wrapping_add(1);
            }
            if self.buckets_idx >= self.buckets.len() {
                return false;
            }
            while self.idx_in_span >= span.length {
                self.idx_in_span = 0;
                self.spans_idx += 1;
                let Some(&s) = self.spans.get(self.spans_idx) else {
                    return false;
                };
                span = s;
                self.curr_idx = self.curr_idx.wrapping_add(span.offset);
            }
            self.curr_count = self.buckets[self.buckets_idx];
            self.idx_in_span += 1;
            self.buckets_idx += 1;
            return true;
        }
        let (mut orig_idx, mut spans_idx, mut idx_in_span) = (self.orig_idx, self.spans_idx, self.idx_in_span);
        let mut first_pass = true;
        self.curr_count = 0.0;
        loop {
            if self.buckets_idx == 0 {
                orig_idx = span.offset;
            } else {
                orig_idx = orig_idx.wrapping_add(1);
            }
            if self.buckets_idx >= self.buckets.len() {
                if first_pass {
                    return false;
                }
                break;
            }
            let mut exhausted = false;
            while idx_in_span >= span.length {
                idx_in_span = 0;
                spans_idx += 1;
                match self.spans.get(spans_idx) {
                    Some(&s) => {
                        span = s;
                        orig_idx = orig_idx.wrapping_add(span.offset);
                    }
                    None => {
                        exhausted = true;
                        break;
                    }
                }
            }
            if exhausted {
                if first_pass {
                    return false;
                }
                break;
            }
            let curr = target_idx(orig_idx, self.schema, self.target_schema);
            if first_pass {
                self.curr_idx = curr;
                first_pass = false;
            } else if curr != self.curr_idx {
                break;
            }
            self.curr_count += self.buckets[self.buckets_idx];
            idx_in_span += 1;
            self.buckets_idx += 1;
            self.orig_idx = orig_idx;
            self.spans_idx = spans_idx;
            self.idx_in_span = idx_in_span;
        }
        true
    }

    fn at(&self) -> Bucket {
        make_bucket(self.curr_idx, self.curr_count, self.target_schema, self.positive, self.custom_values)
    }
}

impl Iterator for FloatBucketIter<'_> {
    type Item = Bucket;
    fn next(&mut self) -> Option<Bucket> {
        self.advance().then(|| self.at())
    }
}

/// Iterates the positive buckets in descending or the negative buckets in ascending order of their
/// absolute value (upstream `reverseFloatBucketIterator`).
#[derive(Debug, Clone)]
pub struct ReverseFloatBucketIter<'a> {
    schema: i32,
    spans: &'a [Span],
    buckets: &'a [f64],
    custom_values: &'a [f64],
    positive: bool,
    spans_idx: isize,
    idx_in_span: i64,
    buckets_idx: isize,
    curr_count: f64,
    curr_idx: i32,
}

impl<'a> ReverseFloatBucketIter<'a> {
    /// Upstream `newReverseFloatBucketIterator`.
    fn new(spans: &'a [Span], buckets: &'a [f64], schema: i32, positive: bool, custom_values: &'a [f64]) -> Self {
        let spans_idx = spans.len() as isize - 1;
        let idx_in_span = spans.last().map_or(0, |s| i64::from(s.length as i32) - 1);
        let curr_idx = spans.iter().fold(0i32, |acc, s| acc.wrapping_add(s.offset).wrapping_add(s.length as i32));
        Self {
            schema,
            spans,
            buckets,
            custom_values,
            positive,
            spans_idx,
            idx_in_span,
            buckets_idx: buckets.len() as isize - 1,
            curr_count: 0.0,
            curr_idx,
        }
    }

    fn advance(&mut self) -> bool {
        self.curr_idx = self.curr_idx.wrapping_sub(1);
        if self.buckets_idx < 0 {
            return false;
        }
        while self.idx_in_span < 0 {
            self.spans_idx -= 1;
            if self.spans_idx < 0 {
                return false;
            }
            let Some(s) = self.spans.get(self.spans_idx as usize) else {
                return false;
            };
            self.idx_in_span = i64::from(s.length as i32) - 1;
            let next_offset = self.spans.get(self.spans_idx as usize + 1).map_or(0, |s| s.offset);
            self.curr_idx = self.curr_idx.wrapping_sub(next_offset);
        }
        let Some(&c) = self.buckets.get(self.buckets_idx as usize) else {
            return false;
        };
        self.curr_count = c;
        self.buckets_idx -= 1;
        self.idx_in_span -= 1;
        true
    }
}

impl Iterator for ReverseFloatBucketIter<'_> {
    type Item = Bucket;
    fn next(&mut self) -> Option<Bucket> {
        self.advance()
            .then(|| make_bucket(self.curr_idx, self.curr_count, self.schema, self.positive, self.custom_values))
    }
}

/// Iterates negative, zero (if populated) and positive buckets in ascending order, or all of them in
/// descending order, clamping bounds that overlap the zero bucket to the zero threshold (upstream
/// `allFloatBucketIterator`).
#[derive(Debug, Clone)]
pub struct AllFloatBucketIter<'a> {
    h: &'a FloatHistogram,
    left: ReverseFloatBucketIter<'a>,
    right: FloatBucketIter<'a>,
    state: i8,
}

impl Iterator for AllFloatBucketIter<'_> {
    type Item = Bucket;
    fn next(&mut self) -> Option<Bucket> {
        let zt = self.h.zero_threshold;
        loop {
            match self.state {
                -1 => {
                    if let Some(mut b) = self.left.next() {
                        if b.upper < 0.0 && b.upper > -zt {
                            b.upper = -zt;
                        } else if b.lower > 0.0 && b.lower < zt {
                            b.lower = zt;
                        }
                        return Some(b);
                    }
                    self.state = 0;
                }
                0 => {
                    self.state = 1;
                    if self.h.zero_count > 0.0 {
                        return Some(self.h.zero_bucket());
                    }
                }
                1 => {
                    if let Some(mut b) = self.right.next() {
                        if b.lower > 0.0 && b.lower < zt {
                            b.lower = zt;
                        } else if b.upper < 0.0 && b.upper > -zt {
                            b.upper = -zt;
                        }
                        return Some(b);
                    }
                    self.state = 42;
                    return None;
                }
                _ => return None,
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Generic span/bucket algorithms (upstream generic.go), for absolute f64 and delta i64 buckets.
// ---------------------------------------------------------------------------------------------

/// Bucket values the generic algorithms work on: `f64` (absolute counts) and `i64` (deltas, with
/// Go's wrapping arithmetic).
trait BucketValue: Copy + PartialEq + Default + fmt::Debug {
    fn plus(self, o: Self) -> Self;
    fn minus(self, o: Self) -> Self;
    fn is_zero(self) -> bool;
}

impl BucketValue for f64 {
    fn plus(self, o: Self) -> Self {
        self + o
    }
    fn minus(self, o: Self) -> Self {
        self - o
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
}

impl BucketValue for i64 {
    fn plus(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
    fn minus(self, o: Self) -> Self {
        self.wrapping_sub(o)
    }
    fn is_zero(self) -> bool {
        self == 0
    }
}

/// Mirrors upstream `reduceResolution` (model/histogram/generic.go): merges buckets of
/// `origin_schema` into the lower-resolution `target_schema`. `delta` says whether the buckets are
/// deltas (integer histograms).
fn reduce_resolution_generic<T: BucketValue>(
    spans: &[Span],
    buckets: &[T],
    origin_schema: i32,
    target_schema: i32,
    delta: bool,
) -> Result<(Vec<Span>, Vec<T>), HistogramError> {
    let mut t_spans: Vec<Span> = Vec::new();
    let mut t_buckets: Vec<T> = Vec::new();
    let mut bucket_idx = 0i32;
    let mut count_idx = 0usize;
    let mut last_bucket_count = T::default();
    let mut last_target_idx = 0i32;
    let mut last_target_count = T::default();
    for (n, span) in spans.iter().enumerate() {
        if n > 0 && span.offset < 0 {
            return Err(HistogramError::SpanNegativeOffset { context: ErrorContext::None, span: n + 1, offset: span.offset });
        }
        bucket_idx = bucket_idx.wrapping_add(span.offset);
        for _ in 0..span.length {
            let Some(&b) = buckets.get(count_idx) else {
                return Err(HistogramError::SpansNeedMoreBuckets { have: buckets.len() });
            };
            let t = target_idx(bucket_idx, origin_schema, target_schema);
            if t_spans.is_empty() {
                t_spans.push(Span::new(t, 1));
                t_buckets.push(b);
                last_target_idx = t;
                last_bucket_count = b;
                last_target_count = b;
            } else if last_target_idx == t {
                if let Some(last) = t_buckets.last_mut() {
                    if delta {
                        last_bucket_count = last_bucket_count.plus(b);
                        *last = last.plus(last_bucket_count);
                        last_target_count = last_target_count.plus(last_bucket_count);
                    } else {
                        *last = last.plus(b);
                    }
                }
            } else if last_target_idx.wrapping_add(1) <= t {
                if last_target_idx.wrapping_add(1) == t {
                    if let Some(s) = t_spans.last_mut() {
                        s.length = s.length.wrapping_add(1);
                    }
                } else {
                    t_spans.push(Span::new(t.wrapping_sub(last_target_idx).wrapping_sub(1), 1));
                }
                last_target_idx = t;
                if delta {
                    last_bucket_count = last_bucket_count.plus(b);
                    t_buckets.push(last_bucket_count.minus(last_target_count));
                    last_target_count = last_bucket_count;
                } else {
                    t_buckets.push(b);
                }
            }
            // A target index below the last one (only possible after index wrap-around) matches
            // none of upstream's cases: the bucket is dropped, as upstream does.
            bucket_idx = bucket_idx.wrapping_add(1);
            count_idx += 1;
        }
    }
    if count_idx != buckets.len() {
        return Err(HistogramError::SpansBucketsMismatch {
            context: ErrorContext::None,
            spans_need: count_idx as u64,
            have: buckets.len(),
        });
    }
    Ok((t_spans, t_buckets))
}

/// Mirrors upstream `kahanReduceResolution` (model/histogram/float_histogram.go): like
/// [`reduce_resolution_generic`] for float buckets, merging with Kahan summation and carrying the
/// compensation buckets along. Callers guarantee consistent spans and buckets.
fn kahan_reduce_resolution(
    spans: &[Span],
    buckets: &[f64],
    comp: &[f64],
    origin_schema: i32,
    target_schema: i32,
) -> (Vec<Span>, Vec<f64>, Vec<f64>) {
    let mut t_spans: Vec<Span> = Vec::new();
    let mut t_buckets: Vec<f64> = Vec::new();
    let mut t_comp: Vec<f64> = Vec::new();
    let mut bucket_idx = 0i32;
    let mut count_idx = 0usize;
    let mut last_target_idx = 0i32;
    for span in spans {
        bucket_idx = bucket_idx.wrapping_add(span.offset);
        for _ in 0..span.length {
            let (Some(&b), Some(&c)) = (buckets.get(count_idx), comp.get(count_idx)) else {
                return (t_spans, t_buckets, t_comp);
            };
            let t = target_idx(bucket_idx, origin_schema, target_schema);
            if t_spans.is_empty() {
                t_spans.push(Span::new(t, 1));
                t_buckets.push(b);
                t_comp.push(c);
                last_target_idx = t;
            } else if last_target_idx == t {
                if let (Some(lb), Some(lc)) = (t_buckets.last_mut(), t_comp.last_mut()) {
                    (*lb, *lc) = kahan_inc(b, *lb, *lc);
                    (*lb, *lc) = kahan_inc(c, *lb, *lc);
                }
            } else if last_target_idx.wrapping_add(1) <= t {
                if last_target_idx.wrapping_add(1) == t {
                    if let Some(s) = t_spans.last_mut() {
                        s.length = s.length.wrapping_add(1);
                    }
                } else {
                    t_spans.push(Span::new(t.wrapping_sub(last_target_idx).wrapping_sub(1), 1));
                }
                last_target_idx = t;
                t_buckets.push(b);
                t_comp.push(c);
            }
            bucket_idx = bucket_idx.wrapping_add(1);
            count_idx += 1;
        }
    }
    (t_spans, t_buckets, t_comp)
}

/// Whether `compact_generic` can run on this layout without upstream's out-of-range accesses: the
/// spans describe exactly `n` buckets and no span after the first has a negative offset.
fn layout_consistent(spans: &[Span], n: usize) -> bool {
    check_spans(spans, n).is_ok()
}

/// Mirrors upstream `compactBuckets` (model/histogram/generic.go): cuts empty buckets at the
/// edges of spans, splits spans at runs of more than `max_empty` empty buckets, merges spans at
/// most `max_empty` apart. `comp` (Kahan compensation buckets, float only) moves in lockstep; a
/// bucket only counts as empty if its compensation is zero, too.
///
/// A layout whose spans disagree with its buckets (or with a negative offset after the first
/// span) is returned unchanged, where upstream may panic.
fn compact_generic<T: BucketValue>(
    buckets: &mut Vec<T>,
    mut comp: Option<&mut Vec<f64>>,
    spans: &mut Vec<Span>,
    max_empty: usize,
    delta: bool,
) {
    if !layout_consistent(spans, buckets.len()) || comp.as_ref().is_some_and(|c| c.len() != buckets.len()) {
        return;
    }
    // Fast path: no empty bucket, no span offset ≤ max_empty and no empty span.
    let mut nothing_to_do = true;
    let mut cur = T::default();
    for &b in buckets.iter() {
        cur = if delta { cur.plus(b) } else { b };
        if cur.is_zero() {
            nothing_to_do = false;
            break;
        }
    }
    if nothing_to_do && spans.iter().any(|s| (s.offset as i64) <= max_empty as i64 || s.length == 0) {
        nothing_to_do = false;
    }
    if nothing_to_do {
        return;
    }

    // Merge spans with zero offset.
    if spans.len() > 1 {
        let mut merged: Vec<Span> = Vec::with_capacity(spans.len());
        for (i, s) in spans.iter().enumerate() {
            match merged.last_mut() {
                Some(last) if i > 0 && s.offset == 0 => last.length = last.length.wrapping_add(s.length),
                _ => merged.push(*s),
            }
        }
        *spans = merged;
    }
    // Merge zero-length spans into the next one's offset.
    let mut kept: Vec<Span> = Vec::with_capacity(spans.len());
    let mut carry = 0i32;
    for s in spans.iter() {
        if s.length == 0 {
            carry = carry.wrapping_add(s.offset);
            continue;
        }
        kept.push(Span::new(s.offset.wrapping_add(carry), s.length));
        carry = 0;
    }
    *spans = kept;
    if spans.is_empty() {
        buckets.clear();
        if let Some(c) = comp.as_deref_mut() {
            c.clear();
        }
        return;
    }

    let mut i_bucket = 0usize;
    let mut i_span = 0usize;
    let mut pos_in_span = 0u32;
    cur = T::default();
    while i_bucket < buckets.len() && i_span < spans.len() {
        cur = if delta { cur.plus(buckets[i_bucket]) } else { buckets[i_bucket] };
        // Number of empty buckets starting here (within the current span).
        let n_empty = {
            let mut i = 0usize;
            let mut abs = cur;
            let mut c = comp.as_deref().map_or(0.0, |c| c[i_bucket]);
            while (i as u64 + u64::from(pos_in_span)) < u64::from(spans[i_span].length) && abs.is_zero() && c == 0.0 {
                i += 1;
                if i + i_bucket >= buckets.len() {
                    break;
                }
                abs = buckets[i + i_bucket];
                if let Some(cv) = comp.as_deref() {
                    c = cv[i + i_bucket];
                }
            }
            i
        };
        if n_empty > 0 {
            let remaining = u64::from(spans[i_span].length - pos_in_span);
            if pos_in_span > 0 && (n_empty as u64) < remaining && n_empty <= max_empty {
                // Few enough empty buckets in the middle of a span: keep them.
                i_bucket += n_empty;
                if delta {
                    cur = T::default();
                }
                pos_in_span += n_empty as u32;
                continue;
            }
            // Cut the empty buckets out.
            if delta && i_bucket + n_empty < buckets.len() {
                cur = T::default().minus(buckets[i_bucket]);
                buckets[i_bucket + n_empty] = buckets[i_bucket + n_empty].plus(buckets[i_bucket]);
            }
            let end = (i_bucket + n_empty).min(buckets.len());
            buckets.drain(i_bucket..end);
            if let Some(c) = comp.as_deref_mut() {
                c.drain(i_bucket..end.min(c.len()));
            }
            if pos_in_span == 0 {
                if n_empty as u64 == u64::from(spans[i_span].length) {
                    // The whole span is empty.
                    let offset = spans[i_span].offset;
                    spans.remove(i_span);
                    if let Some(next) = spans.get_mut(i_span) {
                        next.offset = next.offset.wrapping_add(offset).wrapping_add(n_empty as i32);
                    }
                    continue;
                }
                spans[i_span].length -= n_empty as u32;
                spans[i_span].offset = spans[i_span].offset.wrapping_add(n_empty as i32);
                continue;
            }
            // In the middle or at the end of the span: split it.
            let new_span = Span::new(n_empty as i32, spans[i_span].length - pos_in_span - n_empty as u32);
            spans[i_span].length = pos_in_span;
            i_span += 1;
            pos_in_span = 0;
            if new_span.length == 0 {
                if let Some(next) = spans.get_mut(i_span) {
                    next.offset = next.offset.wrapping_add(n_empty as i32);
                }
                continue;
            }
            spans.insert(i_span, new_span);
            continue;
        }
        i_bucket += 1;
        pos_in_span += 1;
        if pos_in_span >= spans[i_span].length {
            pos_in_span = 0;
            i_span += 1;
        }
    }
    if max_empty == 0 || buckets.is_empty() {
        return;
    }

    // Merge spans whose gap is at most max_empty, inserting empty buckets.
    let mut i_bucket = spans[0].length as usize;
    if delta {
        cur = T::default();
        for &b in &buckets[..i_bucket.min(buckets.len())] {
            cur = cur.plus(b);
        }
    }
    let mut i_span = 1usize;
    while i_span < spans.len() {
        if (spans[i_span].offset as i64) > max_empty as i64 {
            let l = spans[i_span].length as usize;
            if delta {
                let end = (i_bucket + l).min(buckets.len());
                for &b in &buckets[i_bucket.min(end)..end] {
                    cur = cur.plus(b);
                }
            }
            i_bucket += l;
            i_span += 1;
            continue;
        }
        let offset = spans[i_span].offset.max(0) as usize;
        spans[i_span - 1].length = spans[i_span - 1].length.wrapping_add(offset as u32).wrapping_add(spans[i_span].length);
        spans.remove(i_span);
        let at = i_bucket.min(buckets.len());
        buckets.splice(at..at, std::iter::repeat_n(T::default(), offset));
        if delta && offset > 0 {
            buckets[at] = T::default().minus(cur);
            if let Some(b) = buckets.get_mut(at + offset) {
                *b = b.plus(cur);
            }
        }
        if let Some(c) = comp.as_deref_mut() {
            let at = at.min(c.len());
            c.splice(at..at, std::iter::repeat_n(0.0, offset));
        }
        i_bucket += offset;
        if let Some(&b) = buckets.get(i_bucket) {
            cur = b;
        }
    }
}

/// Mirrors upstream `addBuckets` and `kahanAddBuckets` (model/histogram/float_histogram.go): adds
/// (or, with `negative`, subtracts) buckets B into buckets A, inserting buckets and spans into A as
/// needed. Buckets of B whose upper bound is at most `threshold` (exponential schemas only) are
/// ignored. With `comp_a` the addition is Kahan-compensated (`comp_b` being B's compensation).
/// Callers guarantee consistent layouts with non-decreasing indexes.
#[allow(clippy::too_many_arguments)]
fn add_buckets(
    schema: i32,
    threshold: f64,
    negative: bool,
    spans_a: &mut Vec<Span>,
    buckets_a: &mut Vec<f64>,
    mut comp_a: Option<&mut Vec<f64>>,
    spans_b: &[Span],
    buckets_b: &[f64],
    comp_b: Option<&[f64]>,
) {
    let mut i_span: isize = -1;
    let mut i_bucket: usize = 0;
    let mut i_in_span: i32 = 0;
    let mut index_a: i32 = 0;
    let mut index_b: i32 = 0;
    let mut b_idx: usize = 0;
    let mut comp_bucket_b = 0.0f64;
    let mut lower_than_threshold = true;

    // Adds `v` (and its compensation `cv`) into bucket `i` of A.
    let add_into = |buckets_a: &mut Vec<f64>, comp_a: &mut Option<&mut Vec<f64>>, i: usize, v: f64, cv: f64| {
        let Some(a) = buckets_a.get_mut(i) else { return };
        match comp_a.as_deref_mut().and_then(|c| c.get_mut(i)) {
            Some(c) => {
                (*a, *c) = kahan_inc(v, *a, *c);
                if cv != 0.0 {
                    (*a, *c) = kahan_inc(cv, *a, *c);
                }
            }
            None => *a += v,
        }
    };
    let insert_at = |buckets_a: &mut Vec<f64>, comp_a: &mut Option<&mut Vec<f64>>, i: usize, v: f64, cv: f64| {
        let i = i.min(buckets_a.len());
        buckets_a.insert(i, v);
        if let Some(c) = comp_a.as_deref_mut() {
            c.insert(i.min(c.len()), cv);
        }
    };

    for span_b in spans_b {
        index_b = index_b.wrapping_add(span_b.offset);
        for _ in 0..span_b.length {
            'bucket: {
                if lower_than_threshold && is_exponential_schema(schema) && exponential_bound(index_b, schema) <= threshold {
                    break 'bucket;
                }
                lower_than_threshold = false;
                let Some(&b) = buckets_b.get(b_idx) else { break 'bucket };
                let mut bucket_b = b;
                if let Some(cb) = comp_b.and_then(|c| c.get(b_idx)) {
                    comp_bucket_b = *cb;
                }
                if negative {
                    bucket_b *= -1.0;
                    comp_bucket_b *= -1.0;
                }
                if i_span == -1 {
                    if spans_a.first().is_none_or(|s| s.offset > index_b) {
                        // Add the bucket before all others.
                        insert_at(buckets_a, &mut comp_a, 0, bucket_b, comp_bucket_b);
                        if let Some(first) = spans_a.first_mut()
                            && first.offset == index_b.wrapping_add(1)
                        {
                            first.length = first.length.wrapping_add(1);
                            first.offset = first.offset.wrapping_sub(1);
                            break 'bucket;
                        }
                        spans_a.insert(0, Span::new(index_b, 1));
                        if let Some(second) = spans_a.get_mut(1) {
                            // The formerly first span's absolute offset becomes relative.
                            second.offset = second.offset.wrapping_sub(index_b.wrapping_add(1));
                        }
                        break 'bucket;
                    } else if spans_a[0].offset == index_b {
                        add_into(buckets_a, &mut comp_a, 0, bucket_b, comp_bucket_b);
                        break 'bucket;
                    }
                    i_span = 0;
                    i_bucket = 0;
                    i_in_span = 0;
                    index_a = spans_a[0].offset;
                }
                let mut delta = index_b.wrapping_sub(index_a);
                loop {
                    let Some(span) = spans_a.get(i_span as usize) else { break 'bucket };
                    let remaining = (span.length as i32).wrapping_sub(i_in_span);
                    if delta < remaining {
                        // The bucket is in the current span.
                        i_bucket = i_bucket.wrapping_add_signed(delta as isize);
                        i_in_span = i_in_span.wrapping_add(delta);
                        add_into(buckets_a, &mut comp_a, i_bucket, bucket_b, comp_bucket_b);
                        break 'bucket;
                    }
                    delta = delta.wrapping_sub(remaining);
                    i_bucket = i_bucket.wrapping_add_signed(remaining as isize);
                    i_span += 1;
                    let next = spans_a.get(i_span as usize).copied();
                    if next.is_none_or(|n| delta < n.offset) {
                        // The bucket is in the gap behind the previous span (or after all spans).
                        insert_at(buckets_a, &mut comp_a, i_bucket, bucket_b, comp_bucket_b);
                        if delta == 0 {
                            // Directly after the previous span: extend it.
                            if let Some(n) = spans_a.get_mut(i_span as usize) {
                                n.offset = n.offset.wrapping_sub(1);
                            }
                            i_span -= 1;
                            if let Some(p) = spans_a.get_mut(i_span as usize) {
                                i_in_span = p.length as i32;
                                p.length = p.length.wrapping_add(1);
                            }
                        } else if next.is_some_and(|n| delta == n.offset.wrapping_sub(1)) {
                            // Directly before the next span: extend it.
                            i_in_span = 0;
                            if let Some(n) = spans_a.get_mut(i_span as usize) {
                                n.offset = n.offset.wrapping_sub(1);
                                n.length = n.length.wrapping_add(1);
                            }
                        } else {
                            // A new span in between.
                            i_in_span = 0;
                            if let Some(n) = spans_a.get_mut(i_span as usize) {
                                n.offset = n.offset.wrapping_sub(delta.wrapping_add(1));
                            }
                            let at = (i_span as usize).min(spans_a.len());
                            spans_a.insert(at, Span::new(delta, 1));
                        }
                        break 'bucket;
                    }
                    // Try the start of the next span.
                    delta = delta.wrapping_sub(next.map_or(0, |n| n.offset));
                    i_in_span = 0;
                }
            }
            index_a = index_b;
            index_b = index_b.wrapping_add(1);
            b_idx += 1;
        }
    }
}

/// Mirrors upstream `intersectCustomBucketBounds` (model/histogram/float_histogram.go): the bounds
/// present in both ascending lists.
fn intersect_custom_bounds(a: &[f64], b: &[f64]) -> Vec<f64> {
    let (mut i, mut j) = (0, 0);
    let mut out = Vec::new();
    while i < a.len() && j < b.len() {
        if a[i] == b[j] {
            out.push(a[i]);
            i += 1;
            j += 1;
        } else if a[i] < b[j] {
            i += 1;
        } else {
            j += 1;
        }
    }
    out
}

/// Mirrors upstream `addCustomBucketsWithMismatches` (model/histogram/float_histogram.go): maps the
/// NHCB buckets of A and B onto the `intersected` bounds (each bucket goes to the first intersected
/// bound at or above its own upper bound, else to +Inf), adding or subtracting B, with Kahan
/// summation and A's compensation `comp_a` if given. Returns spans, buckets and compensation,
/// dropping buckets that end up exactly zero.
#[allow(clippy::too_many_arguments)]
fn add_custom_buckets_with_mismatches(
    negative: bool,
    spans_a: &[Span],
    buckets_a: &[f64],
    bounds_a: &[f64],
    spans_b: &[Span],
    buckets_b: &[f64],
    bounds_b: &[f64],
    comp_a: Option<&[f64]>,
    intersected: &[f64],
) -> (Vec<Span>, Vec<f64>, Vec<f64>) {
    let n = intersected.len() + 1;
    let mut target = vec![0.0f64; n];
    let mut c_target = vec![0.0f64; n];
    let mut map = |spans: &[Span], buckets: &[f64], bounds: &[f64], negative: bool, comp: Option<&[f64]>| {
        let mut src_idx: i64 = 0;
        let mut bucket_idx = 0usize;
        let mut inter_idx = 0usize;
        for span in spans {
            src_idx += i64::from(span.offset);
            for _ in 0..span.length {
                if bucket_idx >= buckets.len() {
                    // Upstream keeps counting through spans without buckets; nothing more to map.
                    return;
                }
                let value = buckets[bucket_idx];
                let mut t = n - 1;
                if let Some(&src_bound) = usize::try_from(src_idx).ok().and_then(|i| bounds.get(i)) {
                    while inter_idx < intersected.len() {
                        if intersected[inter_idx] >= src_bound {
                            t = inter_idx;
                            break;
                        }
                        inter_idx += 1;
                    }
                }
                if negative {
                    (target[t], c_target[t]) = kahan_dec(value, target[t], c_target[t]);
                } else {
                    (target[t], c_target[t]) = kahan_inc(value, target[t], c_target[t]);
                    if let Some(&cv) = comp.and_then(|c| c.get(bucket_idx)) {
                        (target[t], c_target[t]) = kahan_inc(cv, target[t], c_target[t]);
                    }
                }
                src_idx += 1;
                bucket_idx += 1;
            }
        }
    };
    map(spans_a, buckets_a, bounds_a, false, comp_a);
    map(spans_b, buckets_b, bounds_b, negative, None);

    let mut spans: Vec<Span> = Vec::new();
    let mut buckets = Vec::new();
    let mut comp = Vec::new();
    let mut last_idx: i32 = -1;
    for (i, (&v, &c)) in target.iter().zip(&c_target).enumerate() {
        if v == 0.0 && c == 0.0 {
            continue;
        }
        buckets.push(v);
        comp.push(c);
        let idx = i as i32;
        match spans.last_mut() {
            Some(s) if idx == last_idx + 1 => s.length += 1,
            Some(_) => spans.push(Span::new(idx - last_idx - 1, 1)),
            None => spans.push(Span::new(idx, 1)),
        }
        last_idx = idx;
    }
    (spans, buckets, comp)
}

/// Mirrors upstream `spansMatch` (model/histogram/histogram.go): whether two span lists describe
/// the same buckets once zero-length spans are folded into the next span.
fn spans_match(s1: &[Span], s2: &[Span]) -> bool {
    if s1.is_empty() && s2.is_empty() {
        return true;
    }
    let all_empty = |s: &[Span]| s.iter().all(|x| x.length == 0);
    // Folds the zero-length spans starting at `*i` into the next non-empty one.
    let take = |s: &[Span], i: &mut usize| -> Span {
        let mut cur = s[*i];
        *i += 1;
        if cur.length == 0 {
            while *i < s.len() && s[*i].length == 0 {
                cur.offset = cur.offset.wrapping_add(s[*i].offset);
                *i += 1;
            }
            if *i < s.len() {
                cur.offset = cur.offset.wrapping_add(s[*i].offset);
                cur.length = s[*i].length;
                *i += 1;
            }
        }
        cur
    };
    let (mut i1, mut i2) = (0, 0);
    loop {
        if i1 >= s1.len() {
            return all_empty(&s2[i2..]);
        }
        if i2 >= s2.len() {
            return all_empty(&s1[i1..]);
        }
        let a = take(s1, &mut i1);
        let b = take(s2, &mut i2);
        if a.length == 0 && b.length == 0 {
            return true;
        }
        if a.offset != b.offset || a.length != b.length {
            return false;
        }
    }
}

/// Mirrors upstream `floatBucketsMatch`: bucket values compared by bit pattern.
fn float_buckets_match(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The layout checks done before arithmetic (not upstream, which trusts its input and may panic):
/// spans agree with buckets, no negative offset after the first span (for NHCB: none at all), and
/// bucket indexes stay within `i32`.
fn check_layout(spans: &[Span], n: usize, nhcb: bool, context: ErrorContext) -> Result<(), HistogramError> {
    if nhcb && let Some((i, s)) = spans.iter().enumerate().find(|(_, s)| s.offset < 0) {
        return Err(HistogramError::SpanNegativeOffset { context, span: i + 1, offset: s.offset });
    }
    check_spans(spans, n).map_err(|e| e.with_context(context))?;
    let mut end = 0i64;
    for s in spans {
        end += i64::from(s.offset) + i64::from(s.length);
    }
    if end >= i64::from(i32::MAX) - 1 {
        return Err(HistogramError::BucketIndexOutOfRange { context });
    }
    Ok(())
}

fn check_histogram_layout(h: &FloatHistogram) -> Result<(), HistogramError> {
    if !is_valid_schema(h.schema) {
        return Err(HistogramError::InvalidSchema(h.schema));
    }
    let nhcb = h.uses_custom_buckets();
    check_layout(&h.positive_spans, h.positive_buckets.len(), nhcb, ErrorContext::Positive)?;
    check_layout(&h.negative_spans, h.negative_buckets.len(), nhcb, ErrorContext::Negative)
}

// ---------------------------------------------------------------------------------------------
// FloatHistogram operations.
// ---------------------------------------------------------------------------------------------

impl FloatHistogram {
    /// The zero bucket `[-zero_threshold, zero_threshold]` (upstream `ZeroBucket`, which panics
    /// for NHCB; here an NHCB gets its (normally zero) fields as they are).
    pub fn zero_bucket(&self) -> Bucket {
        Bucket {
            lower: -self.zero_threshold,
            upper: self.zero_threshold,
            lower_inclusive: true,
            upper_inclusive: true,
            count: self.zero_count,
            index: 0,
        }
    }

    /// Positive buckets in ascending order (upstream `PositiveBucketIterator`).
    pub fn positive_bucket_iter(&self) -> FloatBucketIter<'_> {
        FloatBucketIter::new(self, true, 0.0, self.schema)
    }

    /// Negative buckets in descending order, i.e. starting next to the zero bucket (upstream
    /// `NegativeBucketIterator`).
    pub fn negative_bucket_iter(&self) -> FloatBucketIter<'_> {
        FloatBucketIter::new(self, false, 0.0, self.schema)
    }

    /// Positive buckets in descending order (upstream `PositiveReverseBucketIterator`).
    pub fn positive_reverse_bucket_iter(&self) -> ReverseFloatBucketIter<'_> {
        ReverseFloatBucketIter::new(&self.positive_spans, &self.positive_buckets, self.schema, true, &self.custom_values)
    }

    /// Negative buckets in ascending order, i.e. starting at the lowest (upstream
    /// `NegativeReverseBucketIterator`).
    pub fn negative_reverse_bucket_iter(&self) -> ReverseFloatBucketIter<'_> {
        ReverseFloatBucketIter::new(&self.negative_spans, &self.negative_buckets, self.schema, false, &[])
    }

    /// All buckets in ascending order: negative, zero (if its count is above 0), positive
    /// (upstream `AllBucketIterator`). Bounds overlapping the zero bucket are clamped to it.
    pub fn all_bucket_iter(&self) -> AllFloatBucketIter<'_> {
        AllFloatBucketIter {
            h: self,
            left: ReverseFloatBucketIter::new(&self.negative_spans, &self.negative_buckets, self.schema, false, &[]),
            right: FloatBucketIter::new(self, true, 0.0, self.schema),
            state: -1,
        }
    }

    /// All buckets in descending order (upstream `AllReverseBucketIterator`).
    pub fn all_reverse_bucket_iter(&self) -> AllFloatBucketIter<'_> {
        AllFloatBucketIter {
            h: self,
            left: ReverseFloatBucketIter::new(&self.positive_spans, &self.positive_buckets, self.schema, true, &self.custom_values),
            right: FloatBucketIter::new(self, false, 0.0, self.schema),
            state: -1,
        }
    }

    /// A deep copy in the lower (or equal) `target_schema`, buckets merged accordingly. Like
    /// upstream, a copy to another schema has an unknown counter-reset hint and no custom values.
    /// Errors where upstream panics: NHCB source or target (other than an identical schema), a
    /// higher target schema, or spans inconsistent with buckets.
    ///
    /// Mirrors upstream `FloatHistogram.CopyToSchema` (model/histogram/float_histogram.go).
    pub fn copy_to_schema(&self, target_schema: i32) -> Result<FloatHistogram, HistogramError> {
        if target_schema == self.schema {
            return Ok(self.clone());
        }
        if self.uses_custom_buckets() {
            return Err(HistogramError::Unsupported(format!(
                "cannot reduce resolution to {target_schema} when there are custom buckets"
            )));
        }
        if is_custom_buckets_schema(target_schema) {
            return Err(HistogramError::Unsupported("cannot reduce resolution to custom buckets schema".into()));
        }
        if target_schema > self.schema {
            return Err(HistogramError::Unsupported(format!(
                "cannot copy from schema {} to {target_schema}",
                self.schema
            )));
        }
        let (positive_spans, positive_buckets) =
            reduce_resolution_generic(&self.positive_spans, &self.positive_buckets, self.schema, target_schema, false)?;
        let (negative_spans, negative_buckets) =
            reduce_resolution_generic(&self.negative_spans, &self.negative_buckets, self.schema, target_schema, false)?;
        Ok(FloatHistogram {
            counter_reset_hint: CounterResetHint::Unknown,
            schema: target_schema,
            zero_threshold: self.zero_threshold,
            zero_count: self.zero_count,
            count: self.count,
            sum: self.sum,
            positive_spans,
            negative_spans,
            positive_buckets,
            negative_buckets,
            custom_values: Vec::new(),
        })
    }

    /// Reduces the resolution in place to the lower `target_schema`. Errors (histogram unchanged)
    /// for NHCB, a target that is not lower, negative span offsets after the first span, or spans
    /// inconsistent with buckets, with upstream's texts.
    ///
    /// Mirrors upstream `FloatHistogram.ReduceResolution` (model/histogram/float_histogram.go).
    pub fn reduce_resolution(&mut self, target_schema: i32) -> Result<(), HistogramError> {
        if self.uses_custom_buckets() {
            return Err(HistogramError::Unsupported("cannot reduce resolution when there are custom buckets".into()));
        }
        if is_custom_buckets_schema(target_schema) {
            return Err(HistogramError::Unsupported("cannot reduce resolution to custom buckets schema".into()));
        }
        if target_schema >= self.schema {
            return Err(HistogramError::Unsupported(format!(
                "cannot reduce resolution from schema {} to {target_schema}",
                self.schema
            )));
        }
        let (ps, pb) =
            reduce_resolution_generic(&self.positive_spans, &self.positive_buckets, self.schema, target_schema, false)?;
        let (ns, nb) =
            reduce_resolution_generic(&self.negative_spans, &self.negative_buckets, self.schema, target_schema, false)?;
        (self.positive_spans, self.positive_buckets, self.negative_spans, self.negative_buckets) = (ps, pb, ns, nb);
        self.schema = target_schema;
        Ok(())
    }

    /// Scales counts, zero count, count and sum by `factor`; a negative factor makes the histogram
    /// a gauge. Returns `self` for chaining.
    ///
    /// Mirrors upstream `FloatHistogram.Mul` (model/histogram/float_histogram.go).
    pub fn mul(&mut self, factor: f64) -> &mut Self {
        self.zero_count *= factor;
        self.count *= factor;
        self.sum *= factor;
        self.positive_buckets.iter_mut().for_each(|b| *b *= factor);
        self.negative_buckets.iter_mut().for_each(|b| *b *= factor);
        if factor < 0.0 {
            self.counter_reset_hint = CounterResetHint::Gauge;
        }
        self
    }

    /// Divides like [`mul`](Self::mul) multiplies. Division by zero divides zero count, count and
    /// sum (giving ±Inf or NaN) and removes all buckets, leaving the counter-reset hint alone; a
    /// negative divisor makes the histogram a gauge.
    ///
    /// Mirrors upstream `FloatHistogram.Div` (model/histogram/float_histogram.go).
    pub fn div(&mut self, scalar: f64) -> &mut Self {
        self.zero_count /= scalar;
        self.count /= scalar;
        self.sum /= scalar;
        if scalar == 0.0 {
            self.positive_buckets.clear();
            self.negative_buckets.clear();
            self.positive_spans.clear();
            self.negative_spans.clear();
            return self;
        }
        self.positive_buckets.iter_mut().for_each(|b| *b /= scalar);
        self.negative_buckets.iter_mut().for_each(|b| *b /= scalar);
        if scalar < 0.0 {
            self.counter_reset_hint = CounterResetHint::Gauge;
        }
        self
    }

    /// Mirrors upstream `checkSchemaAndBounds`.
    fn check_schema_and_bounds(&self, other: &FloatHistogram) -> Result<(), HistogramError> {
        if self.uses_custom_buckets() != other.uses_custom_buckets() {
            return Err(HistogramError::IncompatibleSchema);
        }
        Ok(())
    }

    /// Mirrors upstream `adjustCounterReset`: returns whether the hints collided (one
    /// `CounterReset`, the other `NotCounterReset`), in which case the hint becomes unknown.
    fn adjust_counter_reset(&mut self, other: &FloatHistogram) -> bool {
        use CounterResetHint as H;
        let (mine, theirs) = (self.counter_reset_hint, other.counter_reset_hint);
        if theirs == mine || mine == H::Gauge {
            false
        } else if theirs == H::Gauge {
            self.counter_reset_hint = H::Gauge;
            false
        } else if mine == H::Unknown {
            false
        } else if theirs == H::Unknown {
            self.counter_reset_hint = H::Unknown;
            false
        } else {
            self.counter_reset_hint = H::Unknown;
            true
        }
    }

    /// Mirrors upstream `zeroCountForLargerThreshold`: the zero count (and Kahan compensation,
    /// starting from `c`'s zero count) this histogram would have with the larger threshold, and that
    /// threshold, moved up to the upper bound of a populated bucket it falls into. (Like upstream,
    /// the compensation is not reset when a negative bucket forces a restart.)
    fn zero_count_for_larger_threshold(&self, larger: f64, c: Option<&FloatHistogram>) -> (f64, f64, f64) {
        let mut c_zero = c.map_or(0.0, |c| c.zero_count);
        if larger == self.zero_threshold {
            return (self.zero_count, larger, c_zero);
        }
        if larger < self.zero_threshold {
            // Upstream panics; a smaller threshold changes nothing.
            return (self.zero_count, self.zero_threshold, c_zero);
        }
        let mut larger = larger;
        'outer: loop {
            let mut h_zero = self.zero_count;
            for (i, b) in self.positive_bucket_iter().enumerate() {
                if b.lower >= larger {
                    break;
                }
                (h_zero, c_zero) = kahan_inc(b.count, h_zero, c_zero);
                if let Some(&cv) = c.and_then(|c| c.positive_buckets.get(i)) {
                    (h_zero, c_zero) = kahan_inc(cv, h_zero, c_zero);
                }
                if b.upper > larger {
                    if b.count != 0.0 {
                        larger = b.upper;
                    }
                    break;
                }
            }
            for (i, b) in self.negative_bucket_iter().enumerate() {
                if b.upper <= -larger {
                    break;
                }
                (h_zero, c_zero) = kahan_inc(b.count, h_zero, c_zero);
                if let Some(&cv) = c.and_then(|c| c.negative_buckets.get(i)) {
                    (h_zero, c_zero) = kahan_inc(cv, h_zero, c_zero);
                }
                if b.lower < -larger {
                    if b.count != 0.0 {
                        larger = -b.lower;
                        continue 'outer;
                    }
                    break;
                }
            }
            return (h_zero, larger, c_zero);
        }
    }

    /// Mirrors upstream `trimBucketsInZeroBucket`: zeroes the buckets inside the zero bucket (and
    /// their compensation) and compacts.
    fn trim_buckets_in_zero_bucket(&mut self, mut c: Option<&mut FloatHistogram>) {
        let zt = self.zero_threshold;
        let n_pos = self.positive_bucket_iter().take_while(|b| b.lower < zt).count();
        let n_neg = self.negative_bucket_iter().take_while(|b| b.upper > -zt).count();
        for i in 0..n_pos {
            if let Some(b) = self.positive_buckets.get_mut(i) {
                *b = 0.0;
            }
            if let Some(cb) = c.as_deref_mut().and_then(|c| c.positive_buckets.get_mut(i)) {
                *cb = 0.0;
            }
        }
        for i in 0..n_neg {
            if let Some(b) = self.negative_buckets.get_mut(i) {
                *b = 0.0;
            }
            if let Some(cb) = c.as_deref_mut().and_then(|c| c.negative_buckets.get_mut(i)) {
                *cb = 0.0;
            }
        }
        match c {
            Some(c) => self.kahan_compact(0, c),
            None => {
                self.compact(0);
            }
        }
    }

    /// Mirrors upstream `reconcileZeroBuckets`: widens this histogram's zero bucket (and `other`'s,
    /// virtually) until both share a threshold not inside a populated bucket of either; returns
    /// the zero count `other` would have, and its Kahan compensation. A NaN threshold on either
    /// side stops the reconciliation (upstream loops forever).
    fn reconcile_zero_buckets(&mut self, other: &FloatHistogram, mut c: Option<&mut FloatHistogram>) -> (f64, f64) {
        let mut other_zero_count = other.zero_count;
        let mut other_threshold = other.zero_threshold;
        let mut other_c_zero = 0.0;
        while other_threshold != self.zero_threshold {
            if other_threshold.is_nan() || self.zero_threshold.is_nan() {
                break;
            }
            if self.zero_threshold > other_threshold {
                (other_zero_count, other_threshold, other_c_zero) =
                    other.zero_count_for_larger_threshold(self.zero_threshold, None);
            }
            if other_threshold > self.zero_threshold {
                let (zc, zt, czc) = self.zero_count_for_larger_threshold(other_threshold, c.as_deref());
                self.zero_count = zc;
                self.zero_threshold = zt;
                if let Some(c) = c.as_deref_mut() {
                    c.zero_count = czc;
                }
                self.trim_buckets_in_zero_bucket(c.as_deref_mut());
            }
        }
        (other_zero_count, other_c_zero)
    }

    /// Adds `other` into this histogram: counts, sum and buckets; buckets missing here are
    /// inserted. Zero thresholds are reconciled and the result has the lower of both schemas; the
    /// result may hold empty buckets or adjacent spans (call [`compact`](Self::compact)). NHCBs
    /// with differing bounds are mapped onto the intersection of their bounds.
    ///
    /// Returns `(counter_reset_collision, nhcb_bounds_reconciled)`: the first is true if one hint
    /// was `CounterReset` and the other `NotCounterReset` (the hint becomes unknown), the second if
    /// the custom bounds differed. Errors, leaving `self` unchanged, if exactly one side is NHCB
    /// ([`HistogramError::IncompatibleSchema`]), or (not upstream, which would panic) if a schema
    /// is invalid or spans disagree with buckets.
    ///
    /// Mirrors upstream `FloatHistogram.Add` (model/histogram/float_histogram.go).
    pub fn add(&mut self, other: &FloatHistogram) -> Result<(bool, bool), HistogramError> {
        self.add_or_sub(other, false)
    }

    /// Subtracts `other` like [`add`](Self::add) adds it, with the same counter-reset handling
    /// (the PromQL `-` operator sets the result's hint to gauge itself).
    ///
    /// Mirrors upstream `FloatHistogram.Sub` (model/histogram/float_histogram.go).
    pub fn sub(&mut self, other: &FloatHistogram) -> Result<(bool, bool), HistogramError> {
        self.add_or_sub(other, true)
    }

    fn add_or_sub(&mut self, other: &FloatHistogram, negative: bool) -> Result<(bool, bool), HistogramError> {
        self.check_schema_and_bounds(other)?;
        check_histogram_layout(self)?;
        check_histogram_layout(other)?;
        let collision = self.adjust_counter_reset(other);
        if !self.uses_custom_buckets() {
            let (other_zero_count, _) = self.reconcile_zero_buckets(other, None);
            if negative {
                self.zero_count -= other_zero_count;
            } else {
                self.zero_count += other_zero_count;
            }
        }
        if negative {
            self.count -= other.count;
            self.sum -= other.sum;
        } else {
            self.count += other.count;
            self.sum += other.sum;
        }

        if self.uses_custom_buckets() {
            if custom_bucket_bounds_match(&self.custom_values, &other.custom_values) {
                add_buckets(
                    self.schema,
                    self.zero_threshold,
                    negative,
                    &mut self.positive_spans,
                    &mut self.positive_buckets,
                    None,
                    &other.positive_spans,
                    &other.positive_buckets,
                    None,
                );
                return Ok((collision, false));
            }
            let intersected = intersect_custom_bounds(&self.custom_values, &other.custom_values);
            let (spans, buckets, _) = add_custom_buckets_with_mismatches(
                negative,
                &self.positive_spans,
                &self.positive_buckets,
                &self.custom_values,
                &other.positive_spans,
                &other.positive_buckets,
                &other.custom_values,
                None,
                &intersected,
            );
            self.positive_spans = spans;
            self.positive_buckets = buckets;
            self.custom_values = intersected;
            return Ok((collision, true));
        }

        let mut reduced_other = None;
        if other.schema < self.schema {
            // Layouts were checked above, so reducing cannot fail; keep the histogram as it is if it did.
            if let (Ok((ps, pb)), Ok((ns, nb))) = (
                reduce_resolution_generic(&self.positive_spans, &self.positive_buckets, self.schema, other.schema, false),
                reduce_resolution_generic(&self.negative_spans, &self.negative_buckets, self.schema, other.schema, false),
            ) {
                (self.positive_spans, self.positive_buckets, self.negative_spans, self.negative_buckets) = (ps, pb, ns, nb);
                self.schema = other.schema;
            }
        } else if other.schema > self.schema
            && let (Ok(p), Ok(n)) = (
                reduce_resolution_generic(&other.positive_spans, &other.positive_buckets, other.schema, self.schema, false),
                reduce_resolution_generic(&other.negative_spans, &other.negative_buckets, other.schema, self.schema, false),
            )
        {
            reduced_other = Some((p, n));
        }
        let (o_ps, o_pb, o_ns, o_nb): (&[Span], &[f64], &[Span], &[f64]) = match &reduced_other {
            Some(((ps, pb), (ns, nb))) => (ps, pb, ns, nb),
            None => (&other.positive_spans, &other.positive_buckets, &other.negative_spans, &other.negative_buckets),
        };
        let (schema, zt) = (self.schema, self.zero_threshold);
        add_buckets(schema, zt, negative, &mut self.positive_spans, &mut self.positive_buckets, None, o_ps, o_pb, None);
        add_buckets(schema, zt, negative, &mut self.negative_spans, &mut self.negative_buckets, None, o_ns, o_nb, None);
        Ok((collision, false))
    }

    /// A compensation histogram for [`kahan_add`](Self::kahan_add): this histogram's schema, zero
    /// threshold, custom values, spans and hint, with all counts zero.
    ///
    /// Mirrors upstream `FloatHistogram.newCompensationHistogram` (model/histogram/float_histogram.go).
    pub fn new_compensation_histogram(&self) -> FloatHistogram {
        FloatHistogram {
            counter_reset_hint: self.counter_reset_hint,
            schema: self.schema,
            zero_threshold: self.zero_threshold,
            custom_values: self.custom_values.clone(),
            positive_buckets: vec![0.0; self.positive_buckets.len()],
            positive_spans: self.positive_spans.clone(),
            negative_spans: self.negative_spans.clone(),
            negative_buckets: if self.uses_custom_buckets() { Vec::new() } else { vec![0.0; self.negative_buckets.len()] },
            ..FloatHistogram::default()
        }
    }

    /// Adds `other` like [`add`](Self::add), with Kahan summation: `c` holds the compensation terms
    /// (pass `None` on the first call; a fresh one is made from this histogram's layout after the
    /// counter-reset adjustment, as upstream). Returns the updated compensation histogram, which
    /// shares this histogram's layout, and `(counter_reset_collision, nhcb_bounds_reconciled)`.
    /// The final value is `self` plus the returned compensation (add it with [`add`](Self::add)).
    ///
    /// Errors as `add`, and also if `c`'s bucket vectors do not match this histogram's.
    ///
    /// Mirrors upstream `FloatHistogram.KahanAdd` (model/histogram/float_histogram.go).
    pub fn kahan_add(
        &mut self,
        other: &FloatHistogram,
        c: Option<FloatHistogram>,
    ) -> Result<(FloatHistogram, bool, bool), HistogramError> {
        self.check_schema_and_bounds(other)?;
        check_histogram_layout(self)?;
        check_histogram_layout(other)?;
        if let Some(c) = &c
            && (c.positive_buckets.len() != self.positive_buckets.len()
                || (!self.uses_custom_buckets() && c.negative_buckets.len() != self.negative_buckets.len()))
        {
            return Err(HistogramError::Unsupported("compensation histogram layout does not match the histogram's".into()));
        }
        let collision = self.adjust_counter_reset(other);
        let mut c = c.unwrap_or_else(|| self.new_compensation_histogram());
        if !self.uses_custom_buckets() {
            let (ozc, oczc) = self.reconcile_zero_buckets(other, Some(&mut c));
            (self.zero_count, c.zero_count) = kahan_inc(ozc, self.zero_count, c.zero_count);
            (self.zero_count, c.zero_count) = kahan_inc(oczc, self.zero_count, c.zero_count);
        }
        (self.count, c.count) = kahan_inc(other.count, self.count, c.count);
        (self.sum, c.sum) = kahan_inc(other.sum, self.sum, c.sum);

        if self.uses_custom_buckets() {
            let mut reconciled = false;
            if custom_bucket_bounds_match(&self.custom_values, &other.custom_values) {
                add_buckets(
                    self.schema,
                    self.zero_threshold,
                    false,
                    &mut self.positive_spans,
                    &mut self.positive_buckets,
                    Some(&mut c.positive_buckets),
                    &other.positive_spans,
                    &other.positive_buckets,
                    None,
                );
            } else {
                reconciled = true;
                let intersected = intersect_custom_bounds(&self.custom_values, &other.custom_values);
                let (spans, buckets, comp) = add_custom_buckets_with_mismatches(
                    false,
                    &self.positive_spans,
                    &self.positive_buckets,
                    &self.custom_values,
                    &other.positive_spans,
                    &other.positive_buckets,
                    &other.custom_values,
                    Some(&c.positive_buckets),
                    &intersected,
                );
                self.positive_spans = spans;
                self.positive_buckets = buckets;
                c.positive_buckets = comp;
                c.custom_values = intersected.clone();
                self.custom_values = intersected;
            }
            c.positive_spans = self.positive_spans.clone();
            return Ok((c, collision, reconciled));
        }

        let mut other_pos: (Vec<Span>, Vec<f64>, Option<Vec<f64>>) = (Vec::new(), Vec::new(), None);
        let mut other_neg: (Vec<Span>, Vec<f64>, Option<Vec<f64>>) = (Vec::new(), Vec::new(), None);
        let mut other_reduced = false;
        if other.schema < self.schema {
            let (ps, pb, pc) =
                kahan_reduce_resolution(&self.positive_spans, &self.positive_buckets, &c.positive_buckets, self.schema, other.schema);
            let (ns, nb, nc) =
                kahan_reduce_resolution(&self.negative_spans, &self.negative_buckets, &c.negative_buckets, self.schema, other.schema);
            (self.positive_spans, self.positive_buckets, c.positive_buckets) = (ps, pb, pc);
            (self.negative_spans, self.negative_buckets, c.negative_buckets) = (ns, nb, nc);
            self.schema = other.schema;
        } else if other.schema > self.schema {
            other_reduced = true;
            other_pos = (other.positive_spans.clone(), other.positive_buckets.clone(), None);
            other_neg = (other.negative_spans.clone(), other.negative_buckets.clone(), None);
            if !other.positive_buckets.is_empty() {
                let zeros = vec![0.0; other.positive_buckets.len()];
                let (s, b, cb) =
                    kahan_reduce_resolution(&other.positive_spans, &other.positive_buckets, &zeros, other.schema, self.schema);
                other_pos = (s, b, Some(cb));
            }
            if !other.negative_buckets.is_empty() {
                let zeros = vec![0.0; other.negative_buckets.len()];
                let (s, b, cb) =
                    kahan_reduce_resolution(&other.negative_spans, &other.negative_buckets, &zeros, other.schema, self.schema);
                other_neg = (s, b, Some(cb));
            }
        }
        type Side<'a> = (&'a [Span], &'a [f64], Option<&'a [f64]>);
        let ((o_ps, o_pb, o_pc), (o_ns, o_nb, o_nc)): (Side<'_>, Side<'_>) = if other_reduced {
            ((&other_pos.0, &other_pos.1, other_pos.2.as_deref()), (&other_neg.0, &other_neg.1, other_neg.2.as_deref()))
        } else {
            ((&other.positive_spans, &other.positive_buckets, None), (&other.negative_spans, &other.negative_buckets, None))
        };
        let (schema, zt) = (self.schema, self.zero_threshold);
        add_buckets(
            schema,
            zt,
            false,
            &mut self.positive_spans,
            &mut self.positive_buckets,
            Some(&mut c.positive_buckets),
            o_ps,
            o_pb,
            o_pc,
        );
        add_buckets(
            schema,
            zt,
            false,
            &mut self.negative_spans,
            &mut self.negative_buckets,
            Some(&mut c.negative_buckets),
            o_ns,
            o_nb,
            o_nc,
        );
        c.schema = self.schema;
        c.zero_threshold = self.zero_threshold;
        c.positive_spans = self.positive_spans.clone();
        c.negative_spans = self.negative_spans.clone();
        Ok((c, collision, false))
    }

    /// Exact equality as data: schema, zero threshold, counts and sum by bit pattern, custom
    /// bounds (NHCB only), and the same buckets (spans may differ by zero-length spans).
    ///
    /// Mirrors upstream `FloatHistogram.Equals` (model/histogram/float_histogram.go).
    pub fn equals(&self, other: &FloatHistogram) -> bool {
        if self.schema != other.schema
            || self.count.to_bits() != other.count.to_bits()
            || self.sum.to_bits() != other.sum.to_bits()
        {
            return false;
        }
        if self.uses_custom_buckets() && !custom_bucket_bounds_match(&self.custom_values, &other.custom_values) {
            return false;
        }
        if self.zero_threshold != other.zero_threshold || self.zero_count.to_bits() != other.zero_count.to_bits() {
            return false;
        }
        spans_match(&self.negative_spans, &other.negative_spans)
            && float_buckets_match(&self.negative_buckets, &other.negative_buckets)
            && spans_match(&self.positive_spans, &other.positive_spans)
            && float_buckets_match(&self.positive_buckets, &other.positive_buckets)
    }

    /// Memory size in bytes as upstream's Go struct would take (upstream `FloatHistogram.Size`).
    pub fn size(&self) -> usize {
        168 + 8
            * (self.positive_spans.len()
                + self.negative_spans.len()
                + self.positive_buckets.len()
                + self.negative_buckets.len()
                + self.custom_values.len())
    }

    /// Whether any count, the sum or a custom bound is infinite (upstream `HasOverflow`).
    pub fn has_overflow(&self) -> bool {
        [self.zero_count, self.count, self.sum]
            .iter()
            .chain(&self.positive_buckets)
            .chain(&self.negative_buckets)
            .chain(&self.custom_values)
            .any(|v| v.is_infinite())
    }

    /// Removes empty buckets at the edges of spans, splits spans at runs of more than `max_empty`
    /// empty buckets and merges spans at most `max_empty` apart, in place. Returns `self`.
    ///
    /// Mirrors upstream `FloatHistogram.Compact` (model/histogram/float_histogram.go), including,
    /// for `max_empty > 0`, its placement of inserted empty buckets when more than two spans merge
    /// in a row (it does not step past the span merged before, so the empty buckets land before
    /// that span's buckets instead of after them). Layouts whose spans disagree with their buckets
    /// are left as they are.
    pub fn compact(&mut self, max_empty: usize) -> &mut Self {
        compact_generic(&mut self.positive_buckets, None, &mut self.positive_spans, max_empty, false);
        compact_generic(&mut self.negative_buckets, None, &mut self.negative_spans, max_empty, false);
        self
    }

    /// Compacts this histogram and the compensation histogram `c` in lockstep (upstream
    /// `kahanCompact`).
    pub fn kahan_compact(&mut self, max_empty: usize, c: &mut FloatHistogram) {
        compact_generic(&mut self.positive_buckets, Some(&mut c.positive_buckets), &mut self.positive_spans, max_empty, false);
        compact_generic(&mut self.negative_buckets, Some(&mut c.negative_buckets), &mut self.negative_spans, max_empty, false);
    }

    /// Whether this histogram, compared with the `previous` one, shows a counter reset: true for a
    /// `CounterReset` hint, false for `NotCounterReset`; otherwise true if the count or any bucket
    /// (after reconciling schema, zero threshold and NHCB bounds) went down, or the resolution went
    /// up or the zero threshold down.
    ///
    /// Mirrors upstream `FloatHistogram.DetectReset` (model/histogram/float_histogram.go).
    pub fn detect_reset(&self, previous: &FloatHistogram) -> bool {
        match self.counter_reset_hint {
            CounterResetHint::CounterReset => return true,
            CounterResetHint::NotCounterReset => return false,
            _ => {}
        }
        if self.count < previous.count {
            return true;
        }
        if self.uses_custom_buckets() {
            if !previous.uses_custom_buckets() {
                return true;
            }
            if !custom_bucket_bounds_match(&self.custom_values, &previous.custom_values) {
                return self.detect_reset_with_mismatched_custom_bounds(previous);
            }
        }
        if self.schema > previous.schema {
            return true;
        }
        if self.zero_threshold < previous.zero_threshold {
            return true;
        }
        let (prev_zero_count, new_threshold, _) = previous.zero_count_for_larger_threshold(self.zero_threshold, None);
        if new_threshold != self.zero_threshold {
            return true;
        }
        if self.zero_count < prev_zero_count {
            return true;
        }
        if previous.uses_custom_buckets() != self.uses_custom_buckets() {
            // Cannot be merged into one schema (upstream panics here).
            return true;
        }
        let curr = FloatBucketIter::new(self, true, self.zero_threshold, self.schema);
        let prev = FloatBucketIter::new(previous, true, self.zero_threshold, self.schema);
        if detect_reset_buckets(curr, prev) {
            return true;
        }
        let curr = FloatBucketIter::new(self, false, self.zero_threshold, self.schema);
        let prev = FloatBucketIter::new(previous, false, self.zero_threshold, self.schema);
        detect_reset_buckets(curr, prev)
    }

    /// Mirrors upstream `detectResetWithMismatchedCustomBounds`: compares the NHCBs on the
    /// intersection of their bounds, bucket sums rolled up to each common bound.
    fn detect_reset_with_mismatched_custom_bounds(&self, previous: &FloatHistogram) -> bool {
        struct Rollup<'a> {
            it: FloatBucketIter<'a>,
            started: bool,
            has_more: bool,
            bucket: Option<Bucket>,
        }
        impl Rollup<'_> {
            /// Sum of the buckets with upper bound ≤ `bound` not yet consumed.
            fn sum_to(&mut self, bound: f64) -> f64 {
                if self.started && !self.has_more {
                    return 0.0;
                }
                if !self.started {
                    self.started = true;
                    self.bucket = self.it.next();
                }
                let mut sum = 0.0;
                loop {
                    match self.bucket {
                        None => {
                            self.has_more = false;
                            return sum;
                        }
                        Some(b) if b.upper <= bound => {
                            sum += b.count;
                            self.bucket = self.it.next();
                        }
                        Some(_) => {
                            self.has_more = true;
                            return sum;
                        }
                    }
                }
            }
        }
        let curr_bounds = &self.custom_values;
        let prev_bounds = &previous.custom_values;
        let mut curr = Rollup { it: FloatBucketIter::new(self, true, 0.0, self.schema), started: false, has_more: false, bucket: None };
        let mut prev =
            Rollup { it: FloatBucketIter::new(previous, true, 0.0, previous.schema), started: false, has_more: false, bucket: None };
        let (mut ci, mut pi) = (0usize, 0usize);
        while ci <= curr_bounds.len() && pi <= prev_bounds.len() {
            let cb = curr_bounds.get(ci).copied().unwrap_or(f64::INFINITY);
            let pb = prev_bounds.get(pi).copied().unwrap_or(f64::INFINITY);
            if cb == pb {
                let cs = curr.sum_to(cb);
                let ps = prev.sum_to(cb);
                if cs < ps {
                    return true;
                }
                ci += 1;
                pi += 1;
            } else if cb < pb {
                ci += 1;
            } else {
                pi += 1;
            }
        }
        false
    }
}

/// Mirrors upstream `detectReset` (model/histogram/float_histogram.go): walks both bucket
/// iterators in index order; a populated previous bucket missing now, or a current bucket lower
/// than the previous one, is a reset.
fn detect_reset_buckets(mut curr_it: FloatBucketIter<'_>, mut prev_it: FloatBucketIter<'_>) -> bool {
    if !prev_it.advance() {
        return false;
    }
    let mut prev = (prev_it.curr_count, prev_it.curr_idx);
    // All remaining previous buckets must be empty.
    let rest_empty = |prev: (f64, i32), prev_it: &mut FloatBucketIter<'_>| -> bool {
        let mut p = prev;
        loop {
            if p.0 != 0.0 {
                return true;
            }
            if !prev_it.advance() {
                return false;
            }
            p = (prev_it.curr_count, prev_it.curr_idx);
        }
    };
    if !curr_it.advance() {
        return rest_empty(prev, &mut prev_it);
    }
    let mut curr = (curr_it.curr_count, curr_it.curr_idx);
    loop {
        while curr.1 < prev.1 {
            if !curr_it.advance() {
                return rest_empty(prev, &mut prev_it);
            }
            curr = (curr_it.curr_count, curr_it.curr_idx);
        }
        if curr.1 > prev.1 {
            if prev.0 != 0.0 {
                return true;
            }
        } else if curr.0 < prev.0 {
            return true;
        }
        if !prev_it.advance() {
            return false;
        }
        prev = (prev_it.curr_count, prev_it.curr_idx);
    }
}

impl fmt::Display for FloatHistogram {
    /// Mirrors upstream `FloatHistogram.String`: `{count:…, sum:…, <buckets>}` listing the
    /// populated buckets from the lowest to the highest, the zero bucket if populated.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{count:{}, sum:{}", format_g(self.count), format_g(self.sum))?;
        let negatives: Vec<Bucket> = self.negative_bucket_iter().filter(|b| b.count != 0.0).collect();
        for b in negatives.iter().rev() {
            write!(f, ", {b}")?;
        }
        if self.zero_count != 0.0 {
            write!(f, ", {}", self.zero_bucket())?;
        }
        for b in self.positive_bucket_iter().filter(|b| b.count != 0.0) {
            write!(f, ", {b}")?;
        }
        f.write_str("}")
    }
}

impl Histogram {
    /// Integer-histogram compaction (upstream `Histogram.Compact`, which works like
    /// [`FloatHistogram::compact`] on delta-encoded buckets).
    pub fn compact(&mut self, max_empty: usize) -> &mut Self {
        compact_generic(&mut self.positive_buckets, None, &mut self.positive_spans, max_empty, true);
        compact_generic(&mut self.negative_buckets, None, &mut self.negative_spans, max_empty, true);
        self
    }

    /// Reduces the resolution in place (upstream `Histogram.ReduceResolution`); errors as
    /// [`FloatHistogram::reduce_resolution`].
    pub fn reduce_resolution(&mut self, target_schema: i32) -> Result<(), HistogramError> {
        if is_custom_buckets_schema(self.schema) {
            return Err(HistogramError::Unsupported("cannot reduce resolution when there are custom buckets".into()));
        }
        if is_custom_buckets_schema(target_schema) {
            return Err(HistogramError::Unsupported("cannot reduce resolution to custom buckets schema".into()));
        }
        if target_schema >= self.schema {
            return Err(HistogramError::Unsupported(format!(
                "cannot reduce resolution from schema {} to {target_schema}",
                self.schema
            )));
        }
        let (ps, pb) =
            reduce_resolution_generic(&self.positive_spans, &self.positive_buckets, self.schema, target_schema, true)?;
        let (ns, nb) =
            reduce_resolution_generic(&self.negative_spans, &self.negative_buckets, self.schema, target_schema, true)?;
        (self.positive_spans, self.positive_buckets, self.negative_spans, self.negative_buckets) = (ps, pb, ns, nb);
        self.schema = target_schema;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    
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

#[cfg(test)]
mod hostile {
    //! Random, mostly invalid histograms through every operation: nothing may panic or hang.

    use super::*;
    use crate::histogram_quantile::{histogram_fraction, histogram_quantile, histogram_variance};
    use proptest::prelude::*;

    fn cases(default: u32) -> u32 {
        std::env::var("TESSERA_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
    }

    fn any_f64() -> impl Strategy<Value = f64> {
        prop_oneof![
            4 => prop::sample::select(vec![0.0, -0.0, 1.0, 2.5, 0.001, 1e300, -1.0, 3.0, 0.5]),
            1 => prop::sample::select(vec![f64::NAN, f64::INFINITY, f64::NEG_INFINITY, f64::MAX, f64::MIN_POSITIVE]),
            1 => any::<f64>(),
        ]
    }

    fn any_span() -> impl Strategy<Value = Span> {
        let offset = prop_oneof![
            6 => -4i32..6,
            1 => prop::sample::select(vec![i32::MIN, i32::MAX, i32::MAX - 1, -1_000_000, 1_000_000]),
        ];
        let length = prop_oneof![8 => 0u32..5, 1 => prop::sample::select(vec![u32::MAX, 1 << 31, 1000])];
        (offset, length).prop_map(|(o, l)| Span::new(o, l))
    }

    fn any_schema() -> impl Strategy<Value = i32> {
        prop_oneof![
            3 => -4i32..=8,
            2 => Just(CUSTOM_BUCKETS_SCHEMA),
            1 => prop::sample::select(vec![-10, -9, 9, 20, 52, 53, 64, -64, i32::MIN, i32::MAX, -54, -52]),
        ]
    }

    prop_compose! {
        fn any_hist()(
            hint in 0u8..4,
            schema in any_schema(),
            zero_threshold in any_f64(),
            zero_count in any_f64(),
            count in any_f64(),
            sum in any_f64(),
            positive_spans in prop::collection::vec(any_span(), 0..4),
            negative_spans in prop::collection::vec(any_span(), 0..3),
            positive_buckets in prop::collection::vec(any_f64(), 0..9),
            negative_buckets in prop::collection::vec(any_f64(), 0..6),
            custom_values in prop::collection::vec(any_f64(), 0..5),
        ) -> FloatHistogram {
            FloatHistogram {
                counter_reset_hint: CounterResetHint::from_u8(hint).unwrap_or_default(),
                schema, zero_threshold, zero_count, count, sum,
                positive_spans, negative_spans, positive_buckets, negative_buckets, custom_values,
            }
        }
    }

    // Consistent layouts (so the arithmetic runs through, rather than stopping at the layout
    // check) with hostile values.
    prop_compose! {
        fn consistent_hist()(mut h in any_hist(), lens in prop::collection::vec(0u32..4, 0..4), nlens in prop::collection::vec(0u32..3, 0..3)) -> FloatHistogram {
            h.positive_spans = lens.iter().enumerate().map(|(i, &l)| Span::new(if i == 0 { -3 } else { i as i32 % 3 }, l)).collect();
            h.positive_buckets.resize(lens.iter().sum::<u32>() as usize, 1.0);
            h.negative_spans = nlens.iter().enumerate().map(|(i, &l)| Span::new(if i == 0 { 1 } else { 2 }, l)).collect();
            h.negative_buckets.resize(nlens.iter().sum::<u32>() as usize, 0.0);
            if h.schema < -4 && h.schema != CUSTOM_BUCKETS_SCHEMA || h.schema > 8 {
                h.schema = h.schema.rem_euclid(13) - 4;
            }
            if h.uses_custom_buckets() && let Some(s) = h.positive_spans.first_mut() {
                s.offset = 0;
            }
            h
        }
    }

    fn exercise(a: &FloatHistogram, b: &FloatHistogram) {
        let _ = a.validate();
        let _ = a.to_string();
        let _ = a.equals(b);
        let _ = a.detect_reset(b);
        let _ = a.has_overflow();
        let _ = a.size();
        let _ = a.all_bucket_iter().count() + a.all_reverse_bucket_iter().count();
        let _ = a.positive_bucket_iter().chain(a.negative_bucket_iter()).count();
        let _ = a.positive_reverse_bucket_iter().chain(a.negative_reverse_bucket_iter()).count();
        for q in [0.0, 0.3, 0.5, 0.99, 1.0, f64::NAN] {
            let _ = histogram_quantile(q, a);
        }
        let _ = histogram_fraction(-1.0, 2.0, a) + histogram_fraction(f64::NEG_INFINITY, 0.0, a);
        let _ = histogram_variance(a);
        let mut x = a.clone();
        let _ = x.add(b);
        x.compact(0);
        let mut x = a.clone();
        let _ = x.sub(b);
        x.compact(2);
        let mut x = a.clone();
        if let Ok((c, _, _)) = x.kahan_add(b, None) {
            let _ = x.kahan_add(b, Some(c.clone()));
            let _ = x.clone().add(&c);
        }
        let _ = a.clone().kahan_add(b, Some(b.clone()));
        for s in [-4, 0, 3, 8, CUSTOM_BUCKETS_SCHEMA, 100] {
            let _ = a.copy_to_schema(s);
            let _ = a.clone().reduce_resolution(s);
        }
        a.clone().mul(-2.0).div(0.0);
        a.clone().div(f64::NAN).compact(1);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: cases(400), failure_persistence: None, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_histograms_never_panic(a in any_hist(), b in any_hist()) {
            exercise(&a, &b);
        }

        #[test]
        fn consistent_layouts_with_hostile_values_never_panic(a in consistent_hist(), b in consistent_hist()) {
            exercise(&a, &b);
        }

        #[test]
        fn integer_histograms_never_panic(
            a in any_hist(),
            deltas in prop::collection::vec(prop_oneof![3 => -3i64..4, 1 => any::<i64>()], 0..9),
            n in 0usize..3,
        ) {
            let mut h = Histogram {
                schema: a.schema,
                zero_threshold: a.zero_threshold,
                zero_count: 3,
                count: deltas.len() as u64,
                sum: a.sum,
                positive_spans: a.positive_spans.clone(),
                negative_spans: a.negative_spans.clone(),
                positive_buckets: deltas.clone(),
                negative_buckets: deltas.iter().rev().copied().collect(),
                custom_values: a.custom_values.clone(),
                ..Histogram::default()
            };
            let _ = h.validate();
            let _ = h.clone().reduce_resolution(-4);
            h.compact(n);
        }
    }
}
