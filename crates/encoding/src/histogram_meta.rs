//! What the two native-histogram chunks share (upstream `tsdb/chunkenc/histogram_meta.go`): the
//! 3-byte header with its counter-reset bits, the layout block at the start of the first sample
//! (zero threshold, schema, spans, NHCB bounds), and the bucket-layout arithmetic the appenders use to
//! decide whether a sample fits the chunk's layout and how to widen one or the other.
//!
//! Layout block:
//! ```text
//! zero threshold: 1 byte  (0 → 0.0; 1..=254 → 2^(b-244); 255 → 64 raw bits follow)
//! schema:         varbit int
//! positive spans: varbit uint count, then per span: length varbit uint, offset varbit int
//! negative spans: same
//! NHCB only:      varbit uint count, then per bound: varbit uint round(b·1000)+1 when b·1000 is a whole
//!                 number in [0, 33554430], else varbit 0 and 64 raw bits
//! ```

use crate::bstream::{BitReader, BitWriter};
use crate::varbit::{put_varbit_int, put_varbit_uint, read_varbit_int, read_varbit_uint};
use tessera_model::histogram::{Span, is_custom_buckets_schema};

/// Bytes of the histogram chunk header: a big-endian u16 sample count, then a flags byte whose top two
/// bits are the [`CounterResetHeader`].
pub const HISTOGRAM_HEADER_BYTES: usize = 3;
const FLAGS_POS: usize = 2;
const HEADER_MASK: u8 = 0b1100_0000;

/// The counter-reset bits of a histogram chunk's flags byte (upstream `CounterResetHeader`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u8)]
pub enum CounterResetHeader {
    /// Nothing known about the first sample relative to the previous chunk.
    #[default]
    Unknown = 0x00,
    /// The first sample is known not to be a counter reset.
    NotCounterReset = 0x40,
    /// The chunk was cut because of a counter reset.
    CounterReset = 0x80,
    /// A gauge histogram chunk.
    Gauge = 0xC0,
}

impl CounterResetHeader {
    /// The header bits of a chunk's flags byte (the low six bits are ignored).
    pub fn from_flags(flags: u8) -> Self {
        match flags & HEADER_MASK {
            0x40 => Self::NotCounterReset,
            0x80 => Self::CounterReset,
            0xC0 => Self::Gauge,
            _ => Self::Unknown,
        }
    }

    /// The header of a chunk's bytes (`Unknown` for bytes too short to have one).
    pub fn of_chunk(data: &[u8]) -> Self {
        data.get(FLAGS_POS).map_or(Self::Unknown, |&f| Self::from_flags(f))
    }
}

/// Sets the header bits of `buf`'s flags byte, keeping the other bits (upstream `setCounterResetHeader`).
pub(crate) fn set_header(buf: &mut [u8], h: CounterResetHeader) {
    buf[FLAGS_POS] = (buf[FLAGS_POS] & !HEADER_MASK) | h as u8;
}

pub(crate) fn set_num_samples(buf: &mut [u8], n: u16) {
    buf[..2].copy_from_slice(&n.to_be_bytes());
}

pub(crate) fn num_samples(buf: &[u8]) -> u16 {
    u16::from_be_bytes([buf[0], buf[1]])
}

/// Writes the layout block (upstream `writeHistogramChunkLayout`).
pub(crate) fn write_layout(
    w: &mut BitWriter<'_>,
    schema: i32,
    zero_threshold: f64,
    pos: &[Span],
    neg: &[Span],
    custom_values: &[f64],
) {
    put_zero_threshold(w, zero_threshold);
    put_varbit_int(w, i64::from(schema));
    put_spans(w, pos);
    put_spans(w, neg);
    if is_custom_buckets_schema(schema) {
        put_varbit_uint(w, custom_values.len() as u64);
        for &b in custom_values {
            put_custom_bound(w, b);
        }
    }
}

fn put_spans(w: &mut BitWriter<'_>, spans: &[Span]) {
    put_varbit_uint(w, spans.len() as u64);
    for s in spans {
        put_varbit_uint(w, u64::from(s.length));
        put_varbit_int(w, i64::from(s.offset));
    }
}

/// The layout block as read back.
#[derive(Debug, Clone, Default)]
pub(crate) struct Layout {
    pub schema: i32,
    pub zero_threshold: f64,
    pub pos: Vec<Span>,
    pub neg: Vec<Span>,
    pub custom_values: Vec<f64>,
}

/// Why a layout block could not be read.
#[derive(Debug, Clone, Copy)]
pub(crate) enum LayoutError {
    Truncated,
    Corrupt(&'static str),
}

/// Reads the layout block (upstream `readHistogramChunkLayout`). Counts are checked against the bits
/// left before anything is allocated, so corrupt counts cannot make it allocate more than the chunk's size.
pub(crate) fn read_layout(r: &mut BitReader<'_>) -> Result<Layout, LayoutError> {
    use LayoutError::*;
    let zero_threshold = match r.read_byte().ok_or(Truncated)? {
        0 => 0.0,
        255 => f64::from_bits(r.read_bits(64).ok_or(Truncated)?),
        // ldexp(0.5, b-243) = 2^(b-244), always a normal double for b in 1..=254.
        b => f64::from_bits(((i64::from(b) - 244 + 1023) as u64) << 52),
    };
    let schema = read_varbit_int(r).ok_or(Truncated)?;
    let schema = i32::try_from(schema).map_err(|_| Corrupt("histogram schema out of range"))?;
    let pos = read_spans(r)?;
    let neg = read_spans(r)?;
    let mut custom_values = Vec::new();
    if is_custom_buckets_schema(schema) {
        let n = read_varbit_uint(r).ok_or(Truncated)?;
        // Every bound takes at least one bit.
        if n > r.remaining_bits() as u64 {
            return Err(Truncated);
        }
        custom_values.reserve(n as usize);
        for _ in 0..n {
            custom_values.push(read_custom_bound(r).ok_or(Truncated)?);
        }
    }
    Ok(Layout { schema, zero_threshold, pos, neg, custom_values })
}

fn read_spans(r: &mut BitReader<'_>) -> Result<Vec<Span>, LayoutError> {
    let n = read_varbit_uint(r).ok_or(LayoutError::Truncated)?;
    // Every span takes at least two bits.
    if n > r.remaining_bits() as u64 / 2 {
        return Err(LayoutError::Truncated);
    }
    let mut spans = Vec::with_capacity(n as usize);
    for _ in 0..n {
        let length = read_varbit_uint(r).ok_or(LayoutError::Truncated)?;
        let offset = read_varbit_int(r).ok_or(LayoutError::Truncated)?;
        // Upstream truncates with uint32()/int32(); we refuse instead of silently wrapping.
        let length = u32::try_from(length).map_err(|_| LayoutError::Corrupt("histogram span length out of range"))?;
        let offset = i32::try_from(offset).map_err(|_| LayoutError::Corrupt("histogram span offset out of range"))?;
        spans.push(Span { offset, length });
    }
    Ok(spans)
}

/// Upstream `putZeroThreshold`: a power of two between 2^-243 and 2^10 fits one byte.
fn put_zero_threshold(w: &mut BitWriter<'_>, threshold: f64) {
    if threshold == 0.0 {
        w.write_byte(0);
        return;
    }
    let bits = threshold.to_bits();
    let biased = ((bits >> 52) & 0x7ff) as i64;
    // frexp(x) = (0.5, e) exactly when x is a positive normal power of two, with e = biased - 1022.
    let exp = biased - 1022;
    let power_of_two = bits >> 63 == 0 && bits & ((1 << 52) - 1) == 0 && (1..0x7ff).contains(&biased);
    if power_of_two && (-242..=11).contains(&exp) {
        w.write_byte((exp + 243) as u8);
    } else {
        w.write_byte(255);
        w.write_bits(bits, 64);
    }
}

/// Upstream `isWholeWhenMultiplied` (the caller has checked `0 <= f*1000 <= 33554430`).
fn is_whole_when_multiplied(f: f64) -> bool {
    let i = (f * 1000.0).round() as u64;
    i as f64 / 1000.0 == f
}

/// Upstream `putCustomBound`.
fn put_custom_bound(w: &mut BitWriter<'_>, f: f64) {
    let tf = f * 1000.0;
    // NaN fails the range check here and `isWholeWhenMultiplied` upstream: raw bits either way.
    if !(0.0..=33_554_430.0).contains(&tf) || !is_whole_when_multiplied(f) {
        w.write_bit(false);
        w.write_bits(f.to_bits(), 64);
        return;
    }
    put_varbit_uint(w, tf.round() as u64 + 1);
}

/// Upstream `readCustomBound`.
fn read_custom_bound(r: &mut BitReader<'_>) -> Option<f64> {
    match read_varbit_uint(r)? {
        0 => Some(f64::from_bits(r.read_bits(64)?)),
        b => Some((b - 1) as f64 / 1000.0),
    }
}

/// Walks the absolute bucket indexes the spans describe (upstream `bucketIterator`).
struct BucketIter<'a> {
    spans: &'a [Span],
    span: usize,
    bucket: i64,
    idx: i64,
}

impl<'a> BucketIter<'a> {
    fn new(spans: &'a [Span]) -> Self {
        let idx = -1 + spans.first().map_or(0, |s| i64::from(s.offset));
        Self { spans, span: 0, bucket: -1, idx }
    }
}

impl Iterator for BucketIter<'_> {
    type Item = i64;
    fn next(&mut self) -> Option<i64> {
        if self.span >= self.spans.len() {
            return None;
        }
        if self.bucket < i64::from(self.spans[self.span].length) - 1 {
            self.bucket += 1;
            self.idx += 1;
            return Some(self.idx);
        }
        while self.span + 1 < self.spans.len() {
            self.span += 1;
            self.idx += i64::from(self.spans[self.span].offset) + 1;
            self.bucket = 0;
            if self.spans[self.span].length == 0 {
                self.idx -= 1;
                continue;
            }
            return Some(self.idx);
        }
        None
    }
}

/// Buckets to insert (upstream `Insert`): `num` new buckets before the existing bucket at `pos`, the
/// first of them with absolute index `bucket_idx`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Insert {
    pub pos: usize,
    pub num: usize,
    pub bucket_idx: i64,
}

/// Appends a bucket index to a span list being built (the `addBucket` closures upstream).
fn add_bucket(spans: &mut Vec<Span>, last: &mut i64, b: i64) {
    let mut offset = b - *last - 1;
    match spans.last_mut() {
        Some(s) if offset == 0 => s.length += 1,
        _ => {
            if spans.is_empty() {
                offset += 1;
            }
            spans.push(Span { offset: offset as i32, length: 1 });
        }
    }
    *last = b;
}

/// For gauge histograms: the union of both layouts, with the inserts that widen `a` (forward) and `b`
/// (backward) to it (upstream `expandSpansBothWays`).
pub(crate) fn expand_spans_both_ways(a: &[Span], b: &[Span]) -> (Vec<Insert>, Vec<Insert>, Vec<Span>) {
    let (mut ai, mut bi) = (BucketIter::new(a), BucketIter::new(b));
    let (mut f_inserts, mut b_inserts, mut merged) = (Vec::new(), Vec::new(), Vec::new());
    let mut last = 0i64;
    let (mut f_inter, mut b_inter) = (Insert::default(), Insert::default());
    let (mut av, mut bv) = (ai.next(), bi.next());
    loop {
        match (av, bv) {
            (Some(x), Some(y)) if x == y => {
                if f_inter.num > 0 {
                    f_inserts.push(f_inter);
                    f_inter.num = 0;
                }
                if b_inter.num > 0 {
                    b_inserts.push(b_inter);
                    b_inter.num = 0;
                }
                add_bucket(&mut merged, &mut last, x);
                av = ai.next();
                bv = bi.next();
                f_inter.pos += 1;
                b_inter.pos += 1;
            }
            (Some(x), Some(_y)) if x < _y => {
                b_inter.num += 1;
                if f_inter.num > 0 {
                    f_inserts.push(f_inter);
                    f_inter.num = 0;
                }
                add_bucket(&mut merged, &mut last, x);
                f_inter.pos += 1;
                av = ai.next();
            }
            (Some(_), Some(y)) => {
                f_inter.num += 1;
                if b_inter.num > 0 {
                    b_inserts.push(b_inter);
                    b_inter.num = 0;
                }
                add_bucket(&mut merged, &mut last, y);
                b_inter.pos += 1;
                bv = bi.next();
            }
            (Some(x), None) => {
                b_inter.num += 1;
                add_bucket(&mut merged, &mut last, x);
                av = ai.next();
            }
            (None, Some(y)) => {
                f_inter.num += 1;
                add_bucket(&mut merged, &mut last, y);
                bv = bi.next();
            }
            (None, None) => {
                if f_inter.num > 0 {
                    f_inserts.push(f_inter);
                }
                if b_inter.num > 0 {
                    b_inserts.push(b_inter);
                }
                return (f_inserts, b_inserts, merged);
            }
        }
    }
}

/// Bucket counts the layout code handles alike: integer deltas and float absolute counts.
pub(crate) trait BucketValue: Copy + PartialOrd + Default {
    fn plus(self, o: Self) -> Self;
    fn negated(self) -> Self;
}

impl BucketValue for i64 {
    fn plus(self, o: Self) -> Self {
        self.wrapping_add(o)
    }
    fn negated(self) -> Self {
        self.wrapping_neg()
    }
}

impl BucketValue for f64 {
    fn plus(self, o: Self) -> Self {
        self + o
    }
    fn negated(self) -> Self {
        -self
    }
}

/// Whether layout `b` (with absolute counts `b_counts`) can join a chunk of layout `a` (absolute counts
/// `a_counts`) without a counter reset, and if so the inserts that widen `a` to take `b`'s new buckets
/// (forward) and `b` to keep `a`'s empty buckets it lacks (backward). Upstream
/// `expandIntSpansAndBuckets` / `expandFloatSpansAndBuckets`: a counter reset is a bucket whose count
/// drops, or a populated bucket of `a` missing from `b`.
pub(crate) fn expand_spans_and_buckets<T: BucketValue>(
    a: &[Span],
    b: &[Span],
    a_counts: &[T],
    b_counts: &[T],
) -> Option<(Vec<Insert>, Vec<Insert>)> {
    let (mut ai, mut bi) = (BucketIter::new(a), BucketIter::new(b));
    let (mut a_inserts, mut b_inserts) = (Vec::new(), Vec::new());
    let (mut a_inter, mut b_inter) = (Insert::default(), Insert::default());
    let (mut a_idx, mut b_idx) = (ai.next(), bi.next());
    let (mut a_pos, mut b_pos) = (0usize, 0usize);
    let count = |v: &[T], i: usize| v.get(i).copied().unwrap_or_default();

    fn add_insert(inserts: &mut Vec<Insert>, ins: &mut Insert, other_idx: i64) {
        if ins.num == 0 {
            ins.bucket_idx = other_idx;
        } else if ins.bucket_idx + ins.num as i64 != other_idx {
            inserts.push(*ins);
            ins.num = 0;
            ins.bucket_idx = other_idx;
        }
        ins.num += 1;
    }

    loop {
        match (a_idx, b_idx) {
            (Some(x), Some(y)) if x == y => {
                if count(a_counts, a_pos) > count(b_counts, b_pos) {
                    return None;
                }
                // advanceA, advanceB
                if a_inter.num > 0 {
                    a_inserts.push(a_inter);
                    a_inter.num = 0;
                }
                a_idx = ai.next();
                a_inter.pos += 1;
                a_pos += 1;
                if b_inter.num > 0 {
                    b_inserts.push(b_inter);
                    b_inter.num = 0;
                }
                b_idx = bi.next();
                b_inter.pos += 1;
                b_pos += 1;
            }
            (Some(x), y) if y.is_none_or(|y| x < y) => {
                // b misses a bucket of a: fine only if it is empty.
                if count(a_counts, a_pos) != T::default() {
                    return None;
                }
                add_insert(&mut b_inserts, &mut b_inter, x);
                if a_inter.num > 0 {
                    a_inserts.push(a_inter);
                    a_inter.num = 0;
                }
                a_idx = ai.next();
                a_inter.pos += 1;
                a_pos += 1;
            }
            (_, Some(y)) => {
                // a misses a bucket of b: widen a.
                add_insert(&mut a_inserts, &mut a_inter, y);
                if b_inter.num > 0 {
                    b_inserts.push(b_inter);
                    b_inter.num = 0;
                }
                b_idx = bi.next();
                b_inter.pos += 1;
                b_pos += 1;
            }
            // Both ran out ((Some, None) is taken by the guarded arm above).
            _ => {
                if a_inter.num > 0 {
                    a_inserts.push(a_inter);
                }
                if b_inter.num > 0 {
                    b_inserts.push(b_inter);
                }
                return Some((a_inserts, b_inserts));
            }
        }
    }
}

/// `input` with zero buckets inserted where `inserts` say (upstream `insert`). With `deltas` the values
/// are deltas between buckets, so the first inserted bucket of a run takes the delta back to zero and
/// the next existing bucket takes the delta from zero.
pub(crate) fn insert_buckets<T: BucketValue>(input: &[T], inserts: &[Insert], deltas: bool) -> Vec<T> {
    let zero = T::default();
    let mut out = Vec::with_capacity(input.len() + inserts.iter().map(|i| i.num).sum::<usize>());
    let mut v = zero;
    let mut ii = 0;
    for (i, &d) in input.iter().enumerate() {
        if ii >= inserts.len() || i != inserts[ii].pos {
            out.push(d);
            v = v.plus(d);
            continue;
        }
        let mut first = true;
        while ii < inserts.len() && i == inserts[ii].pos {
            if deltas && first {
                out.push(v.negated());
                first = false;
            } else {
                out.push(zero);
            }
            out.extend(std::iter::repeat_n(zero, inserts[ii].num.saturating_sub(1)));
            ii += 1;
        }
        out.push(if deltas { d.plus(v) } else { d });
        v = v.plus(d);
    }
    // Inserts after the last existing bucket.
    while ii < inserts.len() {
        out.push(if deltas { v.negated() } else { zero });
        out.extend(std::iter::repeat_n(zero, inserts[ii].num.saturating_sub(1)));
        ii += 1;
        v = zero;
    }
    out
}

/// `spans` widened by the buckets `inserts` add (upstream `adjustForInserts`).
pub(crate) fn adjust_for_inserts(spans: &[Span], inserts: &[Insert]) -> Vec<Span> {
    if inserts.is_empty() {
        return spans.to_vec();
    }
    let mut merged = Vec::new();
    let mut last = 0i64;
    let mut i = 0;
    let (mut insert_idx, mut insert_num) = (inserts[0].bucket_idx, inserts[0].num);
    let consume = |i: &mut usize, insert_idx: &mut i64, insert_num: &mut usize| {
        *insert_num -= 1;
        if *insert_num == 0 {
            *i += 1;
            if let Some(ins) = inserts.get(*i) {
                *insert_idx = ins.bucket_idx;
                *insert_num = ins.num;
            }
        } else {
            *insert_idx += 1;
        }
    };
    let mut it = BucketIter::new(spans);
    let mut bucket = it.next();
    while let Some(b) = bucket {
        if i < inserts.len() && insert_idx < b {
            add_bucket(&mut merged, &mut last, insert_idx);
            consume(&mut i, &mut insert_idx, &mut insert_num);
        } else {
            add_bucket(&mut merged, &mut last, b);
            bucket = it.next();
        }
    }
    while i < inserts.len() {
        add_bucket(&mut merged, &mut last, insert_idx);
        consume(&mut i, &mut insert_idx, &mut insert_num);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_threshold_byte_forms() {
        for (zt, len) in [(0.0, 1usize), (2f64.powi(-128), 1), (0.001, 9), (1024.0, 1), (4096.0, 9), (-0.5, 9)] {
            let mut buf = Vec::new();
            let mut w = BitWriter::new(&mut buf);
            write_layout(&mut w, 0, zt, &[], &[], &[]);
            let mut r = BitReader::new(&buf);
            let l = read_layout(&mut r).expect("layout");
            assert_eq!(l.zero_threshold.to_bits(), f64::to_bits(zt), "{zt}");
            assert_eq!(buf.len(), len + 1, "{zt}");
        }
    }

    #[test]
    fn custom_bounds_round_trip() {
        let cv = [0.005, 0.1, 1.0, 2.5, 33554.43, 1e10, -1.0, 0.0001, f64::INFINITY];
        let mut buf = Vec::new();
        let mut w = BitWriter::new(&mut buf);
        write_layout(&mut w, -53, 0.0, &[Span::new(0, 2)], &[], &cv);
        let l = read_layout(&mut BitReader::new(&buf)).expect("layout");
        assert_eq!(l.custom_values.iter().map(|f| f.to_bits()).collect::<Vec<_>>(), cv.map(f64::to_bits));
    }

    #[test]
    fn int_expansion_finds_new_and_missing_empty_buckets() {
        // a: indexes 0,1 ; b: indexes 0,1,2 → forward insert of index 2 at pos 2.
        let a = [Span::new(0, 2)];
        let b = [Span::new(0, 3)];
        let (f, back) = expand_spans_and_buckets::<i64>(&a, &b, &[1, 2], &[1, 2, 3]).expect("appendable");
        assert_eq!(f, vec![Insert { pos: 2, num: 1, bucket_idx: 2 }]);
        assert!(back.is_empty());
        // A populated bucket vanishing is a reset; an empty one is a backward insert.
        assert!(expand_spans_and_buckets::<i64>(&b, &a, &[1, 2, 3], &[1, 2]).is_none());
        let (f, back) = expand_spans_and_buckets::<i64>(&b, &a, &[1, 2, 0], &[1, 2]).expect("appendable");
        assert!(f.is_empty());
        assert_eq!(back, vec![Insert { pos: 2, num: 1, bucket_idx: 2 }]);
        assert_eq!(adjust_for_inserts(&a, &back), vec![Span::new(0, 3)]);
    }

    #[test]
    fn insert_keeps_deltas_consistent() {
        // Absolute [2, 5] at indexes 0 and 3; insert two empty buckets before pos 1.
        let ins = [Insert { pos: 1, num: 2, bucket_idx: 1 }];
        assert_eq!(insert_buckets::<i64>(&[2, 3], &ins, true), vec![2, -2, 0, 5]);
        assert_eq!(insert_buckets::<f64>(&[2.0, 5.0], &ins, false), vec![2.0, 0.0, 0.0, 5.0]);
        let tail = [Insert { pos: 2, num: 1, bucket_idx: 9 }];
        assert_eq!(insert_buckets::<i64>(&[2, 3], &tail, true), vec![2, 3, -5]);
    }
}
