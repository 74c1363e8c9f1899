//! Native-histogram validation and arithmetic, mirroring Prometheus 3.14's `model/histogram`
//! (`histogram.go`, `float_histogram.go`, `generic.go`) operation for operation, down to the
//! order of floating-point operations, Kahan compensation and Go's own `math.Log2`/`Exp2`/`Ldexp`
//! (ported here, because libm rounds some results differently). The quantile/fraction/variance
//! estimates PromQL computes from one histogram are in [`crate::histogram_quantile`].
//!
//! # API (stable; the PromQL engine builds on it)
//!
//! Validation
//! - [`Histogram::validate`], [`FloatHistogram::validate`]: upstream `Validate()`.
//! - [`HistogramError`]: every error of upstream's package; `Display` is upstream's `err.Error()`
//!   text, wrapping prefixes (`positive side: `, `custom buckets: `) included.
//!
//! Arithmetic on [`FloatHistogram`] (in place, like upstream; the PromQL engine clones first)
//! - [`add`](FloatHistogram::add), [`sub`](FloatHistogram::sub) →
//!   `Result<(counter_reset_collision, nhcb_bounds_reconciled), HistogramError>`: schema reduced to
//!   the lower resolution, zero thresholds widened, NHCBs with different bounds mapped onto the
//!   intersection of the bounds; mixing NHCB and exponential is [`HistogramError::IncompatibleSchema`].
//! - [`kahan_add`](FloatHistogram::kahan_add) with [`new_compensation_histogram`](FloatHistogram::new_compensation_histogram)
//!   and [`kahan_compact`](FloatHistogram::kahan_compact): upstream `KahanAdd`.
//! - [`mul`](FloatHistogram::mul), [`div`](FloatHistogram::div) (division by zero drops the buckets
//!   and leaves ±Inf/NaN in count, sum and zero count), [`trim_buckets`](FloatHistogram::trim_buckets)
//!   (`</`, `>/`).
//! - [`compact`](FloatHistogram::compact), [`copy_to_schema`](FloatHistogram::copy_to_schema),
//!   [`reduce_resolution`](FloatHistogram::reduce_resolution), [`detect_reset`](FloatHistogram::detect_reset),
//!   [`equals`](FloatHistogram::equals), [`has_overflow`](FloatHistogram::has_overflow),
//!   [`size`](FloatHistogram::size), [`zero_bucket`](FloatHistogram::zero_bucket), `Display`
//!   (upstream `String()`, e.g. `{count:4, sum:6, (0.5,1]:1, (1,2]:2}`) and
//!   [`test_expression`](FloatHistogram::test_expression) (upstream `TestExpression()`, the
//!   promqltest notation `{{count:4 sum:6 buckets:[1 2]}}`).
//! - [`Histogram::compact`], [`Histogram::reduce_resolution`] for integer histograms.
//!
//! Buckets
//! - [`Bucket`] (bounds, inclusiveness, count, index) and the iterators
//!   [`positive_bucket_iter`](FloatHistogram::positive_bucket_iter),
//!   [`negative_bucket_iter`](FloatHistogram::negative_bucket_iter), their `_reverse_` forms, and
//!   [`all_bucket_iter`](FloatHistogram::all_bucket_iter) /
//!   [`all_reverse_bucket_iter`](FloatHistogram::all_reverse_bucket_iter).
//! - [`exponential_bound`], [`bucket_bound`], [`kahan_inc`], [`kahan_dec`], [`is_exponential_schema`],
//!   [`is_valid_schema`].
//!
//! # Where this differs from upstream
//!
//! Nothing here panics, on any input. Where upstream panics on misuse (`CopyToSchema` to a higher
//! schema or from an NHCB) the Rust function returns [`HistogramError::Unsupported`] with the text
//! of upstream's panic. Before `add`/`sub`/`kahan_add` touch anything, both histograms' schemas
//! must be valid and their spans must agree with their buckets (upstream would panic or compute
//! garbage): otherwise an error, `self` unchanged. A NaN zero threshold ends the
//! zero-bucket reconciliation (upstream loops forever). Custom bounds beyond the last one are
//! +Inf. Upstream distinguishes a `nil` `CustomValues` from an empty one in `Validate`; a `Vec`
//! cannot, so only a non-empty `custom_values` on an exponential histogram is rejected.
//!
//! Upstream quirks that are mirrored on purpose, so that results match (each is documented at its
//! function): `Compact` with `max_empty > 0` misplaces the empty buckets it inserts when more than
//! two spans merge in a row; `DetectReset` looks only at the previous bucket at hand once the
//! current buckets run out; `HistogramQuantile` interpolates in the last bucket when the sum is NaN;
//! a copy to another schema loses the counter-reset hint.
//!
//! # Example
//!
//! ```
//! use tessera_model::histogram::{FloatHistogram, Span};
//!
//! let a = FloatHistogram {
//!     count: 2.0,
//!     sum: 3.0,
//!     positive_spans: vec![Span::new(0, 2)],
//!     positive_buckets: vec![1.0, 1.0],
//!     ..FloatHistogram::default()
//! };
//! // `a + a`, as the PromQL `+` operator does it: on a copy, then compacted.
//! let mut sum = a.clone();
//! let (counter_reset_collision, nhcb_bounds_reconciled) = sum.add(&a).expect("both exponential");
//! sum.compact(0);
//! assert!(!counter_reset_collision && !nhcb_bounds_reconciled);
//! assert_eq!(sum.to_string(), "{count:4, sum:6, (0.5,1]:2, (1,2]:2}");
//!
//! // `sum(...)` over many histograms, Kahan-compensated as upstream's aggregation does it.
//! let mut total = a.clone();
//! let mut comp = None;
//! for _ in 0..3 {
//!     let (c, _, _) = total.kahan_add(&a, comp.take()).expect("both exponential");
//!     comp = Some(c);
//! }
//! if let Some(c) = comp {
//!     total.add(&c).expect("same layout");
//! }
//! assert_eq!(total.compact(0).count, 8.0);
//! ```
//!
//! # How this is tested
//!
//! Upstream's table tests (histogram_float/upstream_tests.rs), a proptest that random invalid
//! histograms never panic, and a differential test against Prometheus' Go code
//! (tests/histogram_oracle.rs with the generator in tests/histogram_oracle_gen/): about 1.2
//! million cases over seven seeds, all bit-identical to upstream where upstream does not panic.

use std::fmt;

use crate::gofloat::format_g;
use crate::histogram::{
    CUSTOM_BUCKETS_SCHEMA, CounterResetHint, EXPONENTIAL_SCHEMA_MAX, EXPONENTIAL_SCHEMA_MAX_RESERVED,
    EXPONENTIAL_SCHEMA_MIN, EXPONENTIAL_SCHEMA_MIN_RESERVED, FloatHistogram, Histogram, Span,
    custom_bucket_bounds_match, is_custom_buckets_schema,
};

mod bounds;
mod error;
mod gomath;
mod iter;
mod layout;
mod trim;
mod validate;

pub use bounds::{Bucket, bucket_bound, exponential_bound};
pub use error::{CountValue, ErrorContext, HistogramError};
pub(crate) use gomath::{go_exp2, go_log2};
pub use gomath::{kahan_dec, kahan_inc};
pub use iter::{AllFloatBucketIter, FloatBucketIter, ReverseFloatBucketIter};

use bounds::*;
use gomath::*;
use iter::*;
use layout::*;
use trim::*;
use validate::*;

/// Whether `schema` is a standard exponential schema, −4..=8 (upstream `IsExponentialSchema`).
pub fn is_exponential_schema(schema: i32) -> bool {
    (EXPONENTIAL_SCHEMA_MIN..=EXPONENTIAL_SCHEMA_MAX).contains(&schema)
}

/// Whether `schema` is valid for arithmetic: NHCB or −4..=8 (upstream `IsValidSchema`).
pub fn is_valid_schema(schema: i32) -> bool {
    is_custom_buckets_schema(schema) || is_exponential_schema(schema)
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
        ReverseFloatBucketIter::new(
            &self.positive_spans,
            &self.positive_buckets,
            self.schema,
            true,
            &self.custom_values,
        )
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
            left: ReverseFloatBucketIter::new(
                &self.positive_spans,
                &self.positive_buckets,
                self.schema,
                true,
                &self.custom_values,
            ),
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
            return Ok(self.upstream_copy());
        }
        if self.uses_custom_buckets() {
            return Err(HistogramError::Unsupported(format!(
                "cannot reduce resolution to {target_schema} when there are custom buckets"
            )));
        }
        if is_custom_buckets_schema(target_schema) {
            return Err(HistogramError::Unsupported(
                "cannot reduce resolution to custom buckets schema".into(),
            ));
        }
        if target_schema > self.schema {
            return Err(HistogramError::Unsupported(format!(
                "cannot copy from schema {} to {target_schema}",
                self.schema
            )));
        }
        let (positive_spans, positive_buckets) = reduce_resolution_generic(
            &self.positive_spans,
            &self.positive_buckets,
            self.schema,
            target_schema,
            false,
        )?;
        let (negative_spans, negative_buckets) = reduce_resolution_generic(
            &self.negative_spans,
            &self.negative_buckets,
            self.schema,
            target_schema,
            false,
        )?;
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

    /// A deep copy as upstream's `FloatHistogram.Copy` makes it: an NHCB loses its zero-bucket
    /// and negative fields, an exponential histogram its custom values (all unused there).
    fn upstream_copy(&self) -> FloatHistogram {
        let mut c = self.clone();
        if c.uses_custom_buckets() {
            c.zero_threshold = 0.0;
            c.zero_count = 0.0;
            c.negative_spans.clear();
            c.negative_buckets.clear();
        } else {
            c.custom_values.clear();
        }
        c
    }

    /// Reduces the resolution in place to the lower `target_schema`. Errors (histogram unchanged)
    /// for NHCB, a target that is not lower, negative span offsets after the first span, or spans
    /// inconsistent with buckets, with upstream's texts.
    ///
    /// Mirrors upstream `FloatHistogram.ReduceResolution` (model/histogram/float_histogram.go).
    pub fn reduce_resolution(&mut self, target_schema: i32) -> Result<(), HistogramError> {
        if self.uses_custom_buckets() {
            return Err(HistogramError::Unsupported(
                "cannot reduce resolution when there are custom buckets".into(),
            ));
        }
        if is_custom_buckets_schema(target_schema) {
            return Err(HistogramError::Unsupported(
                "cannot reduce resolution to custom buckets schema".into(),
            ));
        }
        if target_schema >= self.schema {
            return Err(HistogramError::Unsupported(format!(
                "cannot reduce resolution from schema {} to {target_schema}",
                self.schema
            )));
        }
        let (ps, pb) = reduce_resolution_generic(
            &self.positive_spans,
            &self.positive_buckets,
            self.schema,
            target_schema,
            false,
        )?;
        let (ns, nb) = reduce_resolution_generic(
            &self.negative_spans,
            &self.negative_buckets,
            self.schema,
            target_schema,
            false,
        )?;
        (
            self.positive_spans,
            self.positive_buckets,
            self.negative_spans,
            self.negative_buckets,
        ) = (ps, pb, ns, nb);
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
                reduce_resolution_generic(
                    &self.positive_spans,
                    &self.positive_buckets,
                    self.schema,
                    other.schema,
                    false,
                ),
                reduce_resolution_generic(
                    &self.negative_spans,
                    &self.negative_buckets,
                    self.schema,
                    other.schema,
                    false,
                ),
            ) {
                (
                    self.positive_spans,
                    self.positive_buckets,
                    self.negative_spans,
                    self.negative_buckets,
                ) = (ps, pb, ns, nb);
                self.schema = other.schema;
            }
        } else if other.schema > self.schema
            && let (Ok(p), Ok(n)) = (
                reduce_resolution_generic(
                    &other.positive_spans,
                    &other.positive_buckets,
                    other.schema,
                    self.schema,
                    false,
                ),
                reduce_resolution_generic(
                    &other.negative_spans,
                    &other.negative_buckets,
                    other.schema,
                    self.schema,
                    false,
                ),
            )
        {
            reduced_other = Some((p, n));
        }
        let (o_ps, o_pb, o_ns, o_nb): (&[Span], &[f64], &[Span], &[f64]) = match &reduced_other {
            Some(((ps, pb), (ns, nb))) => (ps, pb, ns, nb),
            None => (
                &other.positive_spans,
                &other.positive_buckets,
                &other.negative_spans,
                &other.negative_buckets,
            ),
        };
        let (schema, zt) = (self.schema, self.zero_threshold);
        add_buckets(
            schema,
            zt,
            negative,
            &mut self.positive_spans,
            &mut self.positive_buckets,
            None,
            o_ps,
            o_pb,
            None,
        );
        add_buckets(
            schema,
            zt,
            negative,
            &mut self.negative_spans,
            &mut self.negative_buckets,
            None,
            o_ns,
            o_nb,
            None,
        );
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
            negative_buckets: if self.uses_custom_buckets() {
                Vec::new()
            } else {
                vec![0.0; self.negative_buckets.len()]
            },
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
            return Err(HistogramError::Unsupported(
                "compensation histogram layout does not match the histogram's".into(),
            ));
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
            let (ps, pb, pc) = kahan_reduce_resolution(
                &self.positive_spans,
                &self.positive_buckets,
                &c.positive_buckets,
                self.schema,
                other.schema,
            );
            let (ns, nb, nc) = kahan_reduce_resolution(
                &self.negative_spans,
                &self.negative_buckets,
                &c.negative_buckets,
                self.schema,
                other.schema,
            );
            (self.positive_spans, self.positive_buckets, c.positive_buckets) = (ps, pb, pc);
            (self.negative_spans, self.negative_buckets, c.negative_buckets) = (ns, nb, nc);
            self.schema = other.schema;
        } else if other.schema > self.schema {
            other_reduced = true;
            other_pos = (other.positive_spans.clone(), other.positive_buckets.clone(), None);
            other_neg = (other.negative_spans.clone(), other.negative_buckets.clone(), None);
            if !other.positive_buckets.is_empty() {
                let zeros = vec![0.0; other.positive_buckets.len()];
                let (s, b, cb) = kahan_reduce_resolution(
                    &other.positive_spans,
                    &other.positive_buckets,
                    &zeros,
                    other.schema,
                    self.schema,
                );
                other_pos = (s, b, Some(cb));
            }
            if !other.negative_buckets.is_empty() {
                let zeros = vec![0.0; other.negative_buckets.len()];
                let (s, b, cb) = kahan_reduce_resolution(
                    &other.negative_spans,
                    &other.negative_buckets,
                    &zeros,
                    other.schema,
                    self.schema,
                );
                other_neg = (s, b, Some(cb));
            }
        }
        type Side<'a> = (&'a [Span], &'a [f64], Option<&'a [f64]>);
        let ((o_ps, o_pb, o_pc), (o_ns, o_nb, o_nc)): (Side<'_>, Side<'_>) = if other_reduced {
            (
                (&other_pos.0, &other_pos.1, other_pos.2.as_deref()),
                (&other_neg.0, &other_neg.1, other_neg.2.as_deref()),
            )
        } else {
            (
                (&other.positive_spans, &other.positive_buckets, None),
                (&other.negative_spans, &other.negative_buckets, None),
            )
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

    /// Trims the histogram at `rhs` in place for the PromQL trim operators: with `is_upper_trim`
    /// (`</`) observations above `rhs` are removed, otherwise (`>/`) those below. A bucket containing
    /// `rhs` keeps the interpolated part (linearly for NHCB and the zero bucket, on a log scale for
    /// exponential buckets); buckets with an infinite bound are kept or dropped whole as upstream
    /// decides. If anything was trimmed, count and sum are recomputed from the kept buckets (each at
    /// its midpoint) and the histogram is compacted. Returns `self`.
    ///
    /// Mirrors upstream `FloatHistogram.TrimBuckets` (model/histogram/float_histogram.go).
    pub fn trim_buckets(&mut self, rhs: f64, is_upper_trim: bool) -> &mut Self {
        let nhcb = self.uses_custom_buckets();
        let (mut updated_count, mut updated_sum) = (0.0, 0.0);
        let mut trimmed = false;
        let (mut has_positive, mut has_negative) = (false, false);
        for positive in [true, false] {
            let found: Vec<(usize, Bucket)> = if positive {
                self.positive_bucket_iter().enumerate().collect()
            } else {
                self.negative_bucket_iter().enumerate().collect()
            };
            for (i, b) in found {
                if b.count == 0.0 {
                    continue;
                }
                if positive {
                    has_positive = true;
                } else {
                    has_negative = true;
                }
                let (keep_all, partial) = if is_upper_trim {
                    (b.upper <= rhs, b.lower < rhs)
                } else {
                    (b.lower >= rhs, b.upper > rhs)
                };
                let slot = if positive {
                    self.positive_buckets.get_mut(i)
                } else {
                    self.negative_buckets.get_mut(i)
                };
                if keep_all {
                    updated_count += b.count;
                    updated_sum += trim_midpoint(b.lower, b.upper, positive, nhcb) * b.count;
                } else if partial {
                    let (keep, midpoint) = trim_bucket(&b, rhs, is_upper_trim, positive, nhcb);
                    updated_count += keep;
                    updated_sum += midpoint * keep;
                    if let Some(slot) = slot
                        && *slot != keep
                    {
                        *slot = keep;
                        trimmed = true;
                    }
                } else {
                    if let Some(slot) = slot {
                        *slot = 0.0;
                    }
                    trimmed = true;
                }
            }
        }
        if self.zero_count > 0.0 {
            let (keep, midpoint) =
                trim_zero_bucket(&self.zero_bucket(), rhs, has_negative, has_positive, is_upper_trim);
            if self.zero_count != keep {
                self.zero_count = keep;
                trimmed = true;
            }
            updated_sum += midpoint * keep;
            updated_count += keep;
        }
        if trimmed {
            self.count = updated_count;
            self.sum = updated_sum;
            self.compact(0);
        }
        self
    }

    /// The histogram in the promqltest series notation, e.g.
    /// `{{schema:1 count:4 sum:6 z_bucket:1 z_bucket_w:0.001 buckets:[1 0 2]}}`, as promqltest
    /// prints expected and actual histograms: compacted into one span per side, fields that are
    /// zero left out.
    ///
    /// Mirrors upstream `FloatHistogram.TestExpression` (model/histogram/float_histogram.go).
    /// Upstream panics if more than one span remains on a side (only possible for invalid
    /// layouts); here every span's offset is written. A layout whose gaps would need more than
    /// 2^20 explicit empty buckets is written with `Display` instead (upstream would print them all).
    pub fn test_expression(&self) -> String {
        const MAX_GAP_BUCKETS: i64 = MAX_MERGED_BUCKETS;
        let mut m = self.upstream_copy();
        // The gaps left after compacting with max_empty 0 are what merging everything fills with
        // empty buckets. (The merge itself must run on the uncompacted copy: upstream's placement
        // of the empty buckets depends on the spans it starts from.)
        let mut probe = m.clone();
        probe.compact(0);
        let gaps = |spans: &[Span]| spans.iter().skip(1).map(|s| i64::from(s.offset).max(0)).sum::<i64>();
        if gaps(&probe.positive_spans) > MAX_GAP_BUCKETS || gaps(&probe.negative_spans) > MAX_GAP_BUCKETS {
            return self.to_string();
        }
        m.compact(usize::MAX);
        let mut res: Vec<String> = Vec::new();
        if m.schema != 0 {
            res.push(format!("schema:{}", m.schema));
        }
        if m.count != 0.0 {
            res.push(format!("count:{}", format_g(m.count)));
        }
        if m.sum != 0.0 {
            res.push(format!("sum:{}", format_g(m.sum)));
        }
        if m.zero_count != 0.0 {
            res.push(format!("z_bucket:{}", format_g(m.zero_count)));
        }
        if m.zero_threshold != 0.0 {
            res.push(format!("z_bucket_w:{}", format_g(m.zero_threshold)));
        }
        if m.uses_custom_buckets() {
            let bounds: Vec<String> = m.custom_values.iter().map(|v| format_g(*v)).collect();
            res.push(format!("custom_values:[{}]", bounds.join(" ")));
        }
        match m.counter_reset_hint {
            CounterResetHint::Unknown => {}
            CounterResetHint::CounterReset => res.push("counter_reset_hint:reset".into()),
            CounterResetHint::NotCounterReset => res.push("counter_reset_hint:not_reset".into()),
            CounterResetHint::Gauge => res.push("counter_reset_hint:gauge".into()),
        }
        for (buckets_key, offset_key, buckets, spans) in [
            ("buckets", "offset", &m.positive_buckets, &m.positive_spans),
            ("n_buckets", "n_offset", &m.negative_buckets, &m.negative_spans),
        ] {
            for s in spans.iter().filter(|s| s.offset != 0) {
                res.push(format!("{offset_key}:{}", s.offset));
            }
            if !buckets.is_empty() {
                let b: Vec<String> = buckets.iter().map(|v| format_g(*v)).collect();
                res.push(format!("{buckets_key}:[{}]", b.join(" ")));
            }
        }
        format!("{{{{{}}}}}", res.join(" "))
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
    /// empty buckets and merges spans at most `max_empty` apart, in place. Returns `self`. (A
    /// large `max_empty` materialises the gaps it merges as buckets; merging stops short of 2^20
    /// buckets, more than any valid layout has.)
    ///
    /// Mirrors upstream `FloatHistogram.Compact` (model/histogram/float_histogram.go), including,
    /// for `max_empty > 0`, its placement of inserted empty buckets when more than two spans merge
    /// in a row (it does not step past the span merged before, so the empty buckets land before
    /// that span's buckets instead of after them). Where upstream would panic on an inconsistent
    /// layout, compaction stops early instead.
    pub fn compact(&mut self, max_empty: usize) -> &mut Self {
        compact_generic(
            &mut self.positive_buckets,
            None,
            &mut self.positive_spans,
            max_empty,
            false,
        );
        compact_generic(
            &mut self.negative_buckets,
            None,
            &mut self.negative_spans,
            max_empty,
            false,
        );
        self
    }

    /// Compacts this histogram and the compensation histogram `c` in lockstep (upstream
    /// `kahanCompact`).
    pub fn kahan_compact(&mut self, max_empty: usize, c: &mut FloatHistogram) {
        compact_generic(
            &mut self.positive_buckets,
            Some(&mut c.positive_buckets),
            &mut self.positive_spans,
            max_empty,
            false,
        );
        compact_generic(
            &mut self.negative_buckets,
            Some(&mut c.negative_buckets),
            &mut self.negative_spans,
            max_empty,
            false,
        );
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
        let mut curr = Rollup {
            it: FloatBucketIter::new(self, true, 0.0, self.schema),
            started: false,
            has_more: false,
            bucket: None,
        };
        let mut prev = Rollup {
            it: FloatBucketIter::new(previous, true, 0.0, previous.schema),
            started: false,
            has_more: false,
            bucket: None,
        };
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
        compact_generic(
            &mut self.positive_buckets,
            None,
            &mut self.positive_spans,
            max_empty,
            true,
        );
        compact_generic(
            &mut self.negative_buckets,
            None,
            &mut self.negative_spans,
            max_empty,
            true,
        );
        self
    }

    /// Reduces the resolution in place (upstream `Histogram.ReduceResolution`); errors as
    /// [`FloatHistogram::reduce_resolution`].
    pub fn reduce_resolution(&mut self, target_schema: i32) -> Result<(), HistogramError> {
        if is_custom_buckets_schema(self.schema) {
            return Err(HistogramError::Unsupported(
                "cannot reduce resolution when there are custom buckets".into(),
            ));
        }
        if is_custom_buckets_schema(target_schema) {
            return Err(HistogramError::Unsupported(
                "cannot reduce resolution to custom buckets schema".into(),
            ));
        }
        if target_schema >= self.schema {
            return Err(HistogramError::Unsupported(format!(
                "cannot reduce resolution from schema {} to {target_schema}",
                self.schema
            )));
        }
        let (ps, pb) = reduce_resolution_generic(
            &self.positive_spans,
            &self.positive_buckets,
            self.schema,
            target_schema,
            true,
        )?;
        let (ns, nb) = reduce_resolution_generic(
            &self.negative_spans,
            &self.negative_buckets,
            self.schema,
            target_schema,
            true,
        )?;
        (
            self.positive_spans,
            self.positive_buckets,
            self.negative_spans,
            self.negative_buckets,
        ) = (ps, pb, ns, nb);
        self.schema = target_schema;
        Ok(())
    }
}

#[cfg(test)]
mod upstream_tests;

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
        let h = |schema: i32| Histogram {
            schema,
            ..Histogram::default()
        };
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
                Histogram {
                    zero_count: 2,
                    count: 4,
                    sum: nan,
                    positive_spans: sp(&[(0, 1)]),
                    positive_buckets: vec![1],
                    ..h(0)
                },
                "",
                false,
            ),
            (
                "no NaN, count above buckets",
                Histogram {
                    zero_count: 2,
                    count: 4,
                    sum: 333.0,
                    positive_spans: sp(&[(0, 1)]),
                    positive_buckets: vec![1],
                    ..h(0)
                },
                "3 observations found in buckets, but the Count field is 4: histogram's observation count should equal the number of observations found in the buckets (in absence of NaN)",
                true,
            ),
            (
                "too few negative buckets",
                Histogram {
                    negative_spans: sp(&[(0, 1)]),
                    ..h(0)
                },
                "negative side: spans need 1 buckets, have 0 buckets: histogram spans specify different number of buckets than provided",
                false,
            ),
            (
                "too few positive buckets",
                Histogram {
                    positive_spans: sp(&[(0, 1)]),
                    ..h(0)
                },
                "positive side: spans need 1 buckets, have 0 buckets: histogram spans specify different number of buckets than provided",
                false,
            ),
            (
                "too many negative buckets",
                Histogram {
                    negative_spans: sp(&[(0, 1)]),
                    negative_buckets: vec![1, 2],
                    ..h(0)
                },
                "negative side: spans need 1 buckets, have 2 buckets: histogram spans specify different number of buckets than provided",
                false,
            ),
            (
                "too many positive buckets",
                Histogram {
                    positive_spans: sp(&[(0, 1)]),
                    positive_buckets: vec![1, 2],
                    ..h(0)
                },
                "positive side: spans need 1 buckets, have 2 buckets: histogram spans specify different number of buckets than provided",
                false,
            ),
            (
                "negative span negative offset",
                Histogram {
                    negative_spans: sp(&[(-1, 1), (-1, 1)]),
                    negative_buckets: vec![1, 2],
                    ..h(0)
                },
                "negative side: span number 2 with offset -1: histogram has a span whose offset is negative",
                false,
            ),
            (
                "positive span negative offset",
                Histogram {
                    positive_spans: sp(&[(-1, 1), (-1, 1)]),
                    positive_buckets: vec![1, 2],
                    ..h(0)
                },
                "positive side: span number 2 with offset -1: histogram has a span whose offset is negative",
                false,
            ),
            (
                "negative bucket negative count",
                Histogram {
                    negative_spans: sp(&[(-1, 1)]),
                    negative_buckets: vec![-1],
                    ..h(0)
                },
                "negative side: bucket number 1 has observation count of -1: histogram has a bucket whose observation count is negative",
                false,
            ),
            (
                "positive bucket negative count",
                Histogram {
                    positive_spans: sp(&[(-1, 1)]),
                    positive_buckets: vec![-1],
                    ..h(0)
                },
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
                Histogram {
                    custom_values: vec![0.0, 0.0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "custom buckets: previous bound is 0.000000 and current is 0.000000: histogram custom bounds must be in strictly increasing order",
                false,
            ),
            (
                "explicit +Inf bound",
                Histogram {
                    custom_values: vec![1.0, inf],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "custom buckets: last +Inf bound must not be explicitly defined: histogram custom bounds must be finite",
                false,
            ),
            (
                "explicit -Inf bound is fine",
                Histogram {
                    custom_values: vec![-inf, 1.0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
                "",
                false,
            ),
            (
                "NaN bound",
                Histogram {
                    custom_values: vec![1.0, nan, 3.0],
                    ..h(CUSTOM_BUCKETS_SCHEMA)
                },
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
            let got = to_float_like_upstream(&h)
                .validate()
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert_eq!(got, want, "{name} (float)");
        }
    }

    fn err_text(fh: &FloatHistogram) -> String {
        fh.validate().err().map(|e| e.to_string()).unwrap_or_default()
    }

    #[test]
    fn float_validation_specific_errors() {
        let fh = FloatHistogram {
            zero_count: -0.5,
            ..FloatHistogram::default()
        };
        assert_eq!(
            err_text(&fh),
            "zero bucket has observation count of -0.5: histogram has a bucket whose observation count is negative"
        );
        let fh = FloatHistogram {
            count: -2.5,
            ..FloatHistogram::default()
        };
        assert_eq!(
            err_text(&fh),
            "observation count is  -2.5: histogram's observation count is negative"
        );
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
        assert_eq!(
            FloatHistogram {
                schema: 9,
                ..FloatHistogram::default()
            }
            .validate(),
            Err(HistogramError::InvalidSchema(9))
        );
        assert!(
            HistogramError::UnknownSchema(60)
                .to_string()
                .ends_with("between -9 and 52 for exponential buckets, or -53 for custom buckets, got schema 60")
        );
        // NaN counts pass, as upstream (NaN < 0 is false).
        let fh = FloatHistogram {
            count: f64::NAN,
            zero_count: f64::NAN,
            ..FloatHistogram::default()
        };
        assert!(fh.validate().is_ok());
    }

    /// Upstream `TestGetBoundExponential` (model/histogram/generic_test.go).
    #[test]
    fn exponential_bounds_like_upstream() {
        let cases = [
            (-1, -1, 0.25),
            (0, -1, 1.0),
            (1, -1, 4.0),
            (512, -1, f64::MAX),
            (513, -1, f64::INFINITY),
            (-1, 0, 0.5),
            (0, 0, 1.0),
            (1, 0, 2.0),
            (1024, 0, f64::MAX),
            (1025, 0, f64::INFINITY),
            (-1, 2, 0.8408964152537144),
            (0, 2, 1.0),
            (1, 2, 1.189207115002721),
            (4096, 2, f64::MAX),
            (4097, 2, f64::INFINITY),
        ];
        for (idx, schema, want) in cases {
            assert_eq!(exponential_bound(idx, schema), want, "idx {idx} schema {schema}");
        }
        // Subnormal bounds round once, as Go's Ldexp does.
        assert_eq!(exponential_bound(-1074, 0), f64::from_bits(1));
        assert_eq!(exponential_bound(-1076, 0), 0.0);
        // NHCB bounds, total outside the defined range.
        assert_eq!(bucket_bound(-1, CUSTOM_BUCKETS_SCHEMA, &[1.0]), f64::NEG_INFINITY);
        assert_eq!(bucket_bound(0, CUSTOM_BUCKETS_SCHEMA, &[1.0]), 1.0);
        assert_eq!(bucket_bound(1, CUSTOM_BUCKETS_SCHEMA, &[1.0]), f64::INFINITY);
        assert_eq!(bucket_bound(7, CUSTOM_BUCKETS_SCHEMA, &[1.0]), f64::INFINITY);
    }

    /// Upstream `TestBucketFractionBelow` (model/histogram/generic_test.go).
    #[test]
    fn fraction_below_like_upstream() {
        let b = |lower: f64, upper: f64| Bucket {
            lower,
            upper,
            lower_inclusive: false,
            upper_inclusive: true,
            count: 100.0,
            index: 0,
        };
        let cases = [
            (b(0.0, 10.0), 5.0, true, 0.5),
            (b(2.0, 6.0), 3.0, true, 0.25),
            (b(-10.0, -5.0), -6.0, true, 0.8),
            (b(2.0, 8.0), 4.0, false, 0.5),
            (b(1.0, 16.0), 2.0, false, 0.25),
            (b(-8.0, -2.0), -4.0, false, 0.5),
            (b(-4.0, -2.0), -3.0, false, 0.4150374992788438),
        ];
        for (bucket, v, linear, want) in cases {
            let got = bucket.fraction_below(v, linear);
            assert!((got - want).abs() < 1e-12, "{bucket:?} at {v}: {got} != {want}");
        }
    }

    /// Go's `math.Log2`/`math.Exp2` differ from libm's in the last bit for some inputs; these
    /// values are what Go's functions return.
    #[test]
    fn go_log2_and_exp2_match_go() {
        assert_eq!(go_log2(8.0), 3.0);
        assert_eq!(go_log2(0.5), -1.0);
        assert_eq!(go_log2(3.0).to_bits(), 0x3ff95c01a39fbd69);
        assert_eq!(go_exp2(0.5).to_bits(), 0x3ff6a09e667f3bcc);
        assert_eq!(go_exp2(-1.25).to_bits(), 0x3fdae89f995ad3ae);
        assert!(go_log2(-1.0).is_nan() && go_log2(0.0) == f64::NEG_INFINITY);
        assert_eq!(go_exp2(2000.0), f64::INFINITY);
        assert_eq!(go_exp2(-2000.0), 0.0);
    }

    /// Expected strings as upstream's `TestExpression` writes them for these histograms.
    #[test]
    fn test_expression_like_upstream() {
        let h = FloatHistogram {
            counter_reset_hint: CounterResetHint::NotCounterReset,
            zero_threshold: 0.00390625,
            zero_count: 3.5,
            count: 4.0,
            sum: -105.57142857142857,
            negative_spans: vec![Span::new(-2, 4)],
            negative_buckets: vec![0.0, 0.25, 0.0, 0.25],
            ..FloatHistogram::default()
        };
        assert_eq!(
            h.test_expression(),
            "{{count:4 sum:-105.57142857142857 z_bucket:3.5 z_bucket_w:0.00390625 counter_reset_hint:not_reset n_offset:-1 n_buckets:[0.25 0 0.25]}}"
        );
        let h = FloatHistogram {
            schema: CUSTOM_BUCKETS_SCHEMA,
            sum: f64::NAN,
            custom_values: vec![-5.0, -1.0, 0.5, 1.0, 5.0],
            ..FloatHistogram::default()
        };
        assert_eq!(
            h.test_expression(),
            "{{schema:-53 sum:NaN custom_values:[-5 -1 0.5 1 5]}}"
        );
        let h = FloatHistogram {
            count: 3.6,
            sum: -67.14285714285714,
            zero_threshold: 0.00390625,
            positive_spans: vec![Span::new(6, 0)],
            negative_spans: vec![Span::new(6, 4)],
            negative_buckets: vec![0.1, 3.5, 0.0, 0.0],
            ..FloatHistogram::default()
        };
        assert_eq!(
            h.test_expression(),
            "{{count:3.6 sum:-67.14285714285714 z_bucket_w:0.00390625 n_offset:6 n_buckets:[0.1 3.5]}}"
        );
        // Spans merge into one, gaps written as empty buckets.
        let h = FloatHistogram {
            count: 3.0,
            positive_spans: vec![Span::new(-1, 1), Span::new(2, 2)],
            positive_buckets: vec![1.0, 1.0, 1.0],
            ..FloatHistogram::default()
        };
        assert_eq!(h.test_expression(), "{{count:3 offset:-1 buckets:[1 0 0 1 1]}}");
        // A hostile gap is not materialised.
        let h = FloatHistogram {
            positive_spans: vec![Span::new(0, 1), Span::new(i32::MAX - 5, 1)],
            positive_buckets: vec![1.0, 1.0],
            ..FloatHistogram::default()
        };
        assert!(h.test_expression().starts_with("{count:0, sum:0"));
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
        let h = Histogram {
            positive_spans: sp(&[(0, u32::MAX), (0, u32::MAX)]),
            ..Histogram::default()
        };
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
        std::env::var("TESSERA_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
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
        let _ = a
            .positive_reverse_bucket_iter()
            .chain(a.negative_reverse_bucket_iter())
            .count();
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
        let _ = a.test_expression();
        for rhs in [f64::NEG_INFINITY, -1.0, 0.0, 0.7, 1e300, f64::NAN] {
            a.clone().trim_buckets(rhs, true);
            a.clone().trim_buckets(rhs, false);
        }
        a.clone().kahan_compact(2, &mut b.clone());
        a.clone().kahan_compact(0, &mut a.new_compensation_histogram());
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
