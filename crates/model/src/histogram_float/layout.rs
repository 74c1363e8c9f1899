//! Span and bucket algorithms shared by the operations (upstream generic.go and the helpers of
//! float_histogram.go): resolution reduction, compaction, bucket addition, NHCB bound mapping.

use super::*;

/// Bucket values the generic algorithms work on: `f64` (absolute counts) and `i64` (deltas, with
/// Go's wrapping arithmetic).
pub(super) trait BucketValue: Copy + PartialEq + Default + fmt::Debug {
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
pub(super) fn reduce_resolution_generic<T: BucketValue>(
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
            return Err(HistogramError::SpanNegativeOffset {
                context: ErrorContext::None,
                span: n + 1,
                offset: span.offset,
            });
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
pub(super) fn kahan_reduce_resolution(
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

/// The most buckets compaction builds when merging spans: 2^20, twice what the widest valid
/// exponential layout needs (schema 8 spans about 537,000 bucket indexes from the smallest to the
/// largest float). Beyond that it stops merging (the spans stay apart, no count is lost) rather
/// than allocate what upstream would try to.
pub(super) const MAX_MERGED_BUCKETS: i64 = 1 << 20;

/// Mirrors upstream `compactBuckets` (model/histogram/generic.go): cuts empty buckets at the
/// edges of spans, splits spans at runs of more than `max_empty` empty buckets, merges spans at
/// most `max_empty` apart. `comp` (Kahan compensation buckets, float only) moves in lockstep; a
/// bucket only counts as empty if its compensation is zero, too.
///
/// On layouts where upstream would panic (spans asking for more buckets than there are, negative
/// offsets when merging, compensation buckets of another length) compaction stops where it is.
pub(super) fn compact_generic<T: BucketValue>(
    buckets: &mut Vec<T>,
    mut comp: Option<&mut Vec<f64>>,
    spans: &mut Vec<Span>,
    max_empty: usize,
    delta: bool,
) {
    if comp.as_ref().is_some_and(|c| c.len() != buckets.len()) {
        // Upstream panics.
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
    // Go's `int`: a `max_empty` beyond i64::MAX is as good as i64::MAX.
    let max_empty_i64 = i64::try_from(max_empty).unwrap_or(i64::MAX);
    if nothing_to_do
        && spans
            .iter()
            .any(|s| i64::from(s.offset) <= max_empty_i64 || s.length == 0)
    {
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
        cur = if delta {
            cur.plus(buckets[i_bucket])
        } else {
            buckets[i_bucket]
        };
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

    // Merge spans whose gap is at most max_empty, inserting empty buckets. Where upstream would
    // index out of range (spans needing more buckets than there are, negative offsets), stop.
    let Some(first) = spans.first() else { return };
    let mut i_bucket = first.length as usize;
    if i_bucket > buckets.len() {
        return;
    }
    if delta {
        cur = T::default();
        for &b in &buckets[..i_bucket] {
            cur = cur.plus(b);
        }
    }
    let mut i_span = 1usize;
    while i_span < spans.len() {
        if i64::from(spans[i_span].offset) > max_empty_i64 {
            let l = spans[i_span].length as usize;
            if delta {
                let Some(run) = buckets.get(i_bucket..i_bucket + l) else {
                    return;
                };
                for &b in run {
                    cur = cur.plus(b);
                }
            }
            i_bucket += l;
            i_span += 1;
            continue;
        }
        // Merge the span into the previous one, inserting `offset` empty buckets. With a negative
        // offset (an invalid layout) this follows Go's slice semantics as upstream's code has them,
        // stopping where that code would panic.
        let offset = i64::from(spans[i_span].offset);
        let (len, ib) = (buckets.len() as i64, i_bucket as i64);
        let new_len = len + offset;
        if new_len < 0 || ib > len || ib + offset < 0 || ib + offset >= new_len || (delta && ib >= new_len) {
            return;
        }
        if new_len > MAX_MERGED_BUCKETS {
            // Not upstream, which would try to allocate them: only reachable with a huge
            // `max_empty` and huge gaps.
            return;
        }
        let (new_len, dst) = (new_len as usize, (ib + offset) as usize);
        spans[i_span - 1].length = spans[i_span - 1]
            .length
            .wrapping_add(offset as u32)
            .wrapping_add(spans[i_span].length);
        spans.remove(i_span);
        let widen = |old: &[T]| -> Vec<T> {
            let mut new = vec![T::default(); new_len];
            let head = i_bucket.min(new_len);
            new[..head].copy_from_slice(&old[..head]);
            new[dst..].copy_from_slice(&old[i_bucket..]);
            new
        };
        let mut new = widen(buckets);
        if delta {
            new[i_bucket] = T::default().minus(cur);
            new[dst] = new[dst].plus(cur);
        }
        *buckets = new;
        if let Some(c) = comp.as_deref_mut() {
            let mut new_c = vec![0.0; new_len];
            let head = i_bucket.min(new_len);
            new_c[..head].copy_from_slice(&c[..head]);
            new_c[dst..].copy_from_slice(&c[i_bucket..]);
            *c = new_c;
        }
        i_bucket = dst;
        cur = buckets[i_bucket];
    }
}

/// Mirrors upstream `addBuckets` and `kahanAddBuckets` (model/histogram/float_histogram.go): adds
/// (or, with `negative`, subtracts) buckets B into buckets A, inserting buckets and spans into A as
/// needed. Buckets of B whose upper bound is at most `threshold` (exponential schemas only) are
/// ignored. With `comp_a` the addition is Kahan-compensated (`comp_b` being B's compensation).
/// Callers guarantee consistent layouts with non-decreasing indexes.
#[allow(clippy::too_many_arguments)]
pub(super) fn add_buckets(
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
                if lower_than_threshold
                    && is_exponential_schema(schema)
                    && exponential_bound(index_b, schema) <= threshold
                {
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
                    let Some(span) = spans_a.get(i_span as usize) else {
                        break 'bucket;
                    };
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
pub(super) fn intersect_custom_bounds(a: &[f64], b: &[f64]) -> Vec<f64> {
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
pub(super) fn add_custom_buckets_with_mismatches(
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
pub(super) fn spans_match(s1: &[Span], s2: &[Span]) -> bool {
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
pub(super) fn float_buckets_match(a: &[f64], b: &[f64]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.to_bits() == y.to_bits())
}

/// The layout checks done before arithmetic (not upstream, which trusts its input and may panic):
/// spans agree with buckets, no negative offset after the first span (for NHCB: none at all), and
/// bucket indexes stay within `i32`.
pub(super) fn check_layout(spans: &[Span], n: usize, nhcb: bool, context: ErrorContext) -> Result<(), HistogramError> {
    if nhcb && let Some((i, s)) = spans.iter().enumerate().find(|(_, s)| s.offset < 0) {
        return Err(HistogramError::SpanNegativeOffset {
            context,
            span: i + 1,
            offset: s.offset,
        });
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

pub(super) fn check_histogram_layout(h: &FloatHistogram) -> Result<(), HistogramError> {
    if !is_valid_schema(h.schema) {
        return Err(HistogramError::InvalidSchema(h.schema));
    }
    let nhcb = h.uses_custom_buckets();
    check_layout(
        &h.positive_spans,
        h.positive_buckets.len(),
        nhcb,
        ErrorContext::Positive,
    )?;
    check_layout(
        &h.negative_spans,
        h.negative_buckets.len(),
        nhcb,
        ErrorContext::Negative,
    )
}
