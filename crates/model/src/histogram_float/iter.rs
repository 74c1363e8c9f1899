//! The bucket iterators (upstream `floatBucketIterator`, `reverseFloatBucketIterator`,
//! `allFloatBucketIterator`) and the bucket-by-bucket reset detection that walks them.

use super::*;

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
    pub(super) fn new(h: &'a FloatHistogram, positive: bool, absolute_start_value: f64, target_schema: i32) -> Self {
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
        make_bucket(
            self.curr_idx,
            self.curr_count,
            self.target_schema,
            self.positive,
            self.custom_values,
        )
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
    pub(super) fn new(
        spans: &'a [Span],
        buckets: &'a [f64],
        schema: i32,
        positive: bool,
        custom_values: &'a [f64],
    ) -> Self {
        let spans_idx = spans.len() as isize - 1;
        let idx_in_span = spans.last().map_or(0, |s| i64::from(s.length as i32) - 1);
        let curr_idx = spans
            .iter()
            .fold(0i32, |acc, s| acc.wrapping_add(s.offset).wrapping_add(s.length as i32));
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
        self.advance().then(|| {
            make_bucket(
                self.curr_idx,
                self.curr_count,
                self.schema,
                self.positive,
                self.custom_values,
            )
        })
    }
}

/// Iterates negative, zero (if populated) and positive buckets in ascending order, or all of them in
/// descending order, clamping bounds that overlap the zero bucket to the zero threshold (upstream
/// `allFloatBucketIterator`).
#[derive(Debug, Clone)]
pub struct AllFloatBucketIter<'a> {
    pub(super) h: &'a FloatHistogram,
    pub(super) left: ReverseFloatBucketIter<'a>,
    pub(super) right: FloatBucketIter<'a>,
    pub(super) state: i8,
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

/// Mirrors upstream `detectReset` (model/histogram/float_histogram.go): walks both bucket
/// iterators in index order; a populated previous bucket missing now, or a current bucket lower
/// than the previous one, is a reset. (When the current buckets run out, upstream looks only at
/// the previous bucket at hand, not at the ones after it; so does this.)
pub(super) fn detect_reset_buckets(mut curr_it: FloatBucketIter<'_>, mut prev_it: FloatBucketIter<'_>) -> bool {
    if !prev_it.advance() {
        return false;
    }
    let mut prev = (prev_it.curr_count, prev_it.curr_idx);
    // Where the current buckets run out, upstream means to check that all remaining previous
    // buckets are empty, but it never advances the bucket it looks at: only the previous bucket
    // at hand decides. Mirrored as it is.
    if !curr_it.advance() {
        return prev.0 != 0.0;
    }
    let mut curr = (curr_it.curr_count, curr_it.curr_idx);
    loop {
        while curr.1 < prev.1 {
            if !curr_it.advance() {
                return prev.0 != 0.0;
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
