//! Downsampling buckets (`ChunkEncoding::Buckets`, Tessera's own): per series and per bucket of a tier's
//! resolution `R`, what exact PromQL answers need, not only a last value.
//!
//! # Buckets and windows
//! PromQL windows are left-open and right-closed: `rate(x[1h])` at `t` sees the samples in `(t-1h, t]`.
//! Blocks are the other way round (`[mint, maxt)`). So that a tier segment can be computed from the raw
//! data of one block range alone *and* windows that fall on bucket boundaries are unions of whole
//! records, bucket `k` keeps two aggregates: [`Bucket::edge`], the sample at exactly `k·R` (at most one,
//! a series has one sample per timestamp), and [`Bucket::body`], the samples in `(k·R, (k+1)·R)`. The
//! window `(a·R, b·R]` is then exactly `body_a, edge_{a+1}, body_{a+1}, …, body_{b-1}, edge_b`, folded
//! in time order with [`Agg::merge`].
//!
//! # What an aggregate keeps
//! Over the float samples of its span, stale markers excluded (PromQL's range vectors drop them): count,
//! sum, min, max, first and last sample, the one before the last (for `irate`/`idelta`), the counter
//! correction (the sum of the values before each drop, what `rate` adds back), the number of drops
//! (`resets`) and of value changes (`changes`); and whether the span's last raw sample, stale markers
//! included, was a stale marker (what an instant selector's lookback needs).
//!
//! # Bytes
//! `uvarint R`, `uvarint n`, `varint k0`, then a bit stream per bucket: the bucket index as a delta of
//! delta, each aggregate's presence and staleness bits, its count as a delta from the previous count,
//! in-bucket time offsets as deltas of the previous bucket's offsets, and every float column XOR'ed with
//! the same column of the previous bucket (Gorilla's value coding, shared with the XOR chunk). Regular
//! scrapes cost a bit per offset; constant series a bit per column. Decoding is bounded by `n` and checks
//! every field; bad bytes are a [`ChunkError`], never a panic.

use crate::bstream::{BitReader, BitWriter};
use crate::varint::{put_uvarint, put_varint, read_uvarint, read_varint};
use crate::xor::{read_dod_bits, read_value_bits, write_dod, write_value};
use crate::ChunkError;
use tessera_model::{is_stale_nan, Sample};

/// Most buckets one chunk may announce (a decoder refuses more before allocating).
pub const MAX_BUCKETS_PER_CHUNK: u64 = 1 << 20;

/// An aggregate of a run of samples, in time order (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Agg {
    /// Float samples (stale markers excluded).
    pub count: u32,
    pub sum: f64,
    pub min: f64,
    pub max: f64,
    pub first_t: i64,
    pub first_v: f64,
    pub last_t: i64,
    pub last_v: f64,
    /// The sample before the last (meaningful when `count >= 2`).
    pub penult_t: i64,
    pub penult_v: f64,
    /// Sum of the values just before each drop (`v[i] < v[i-1]`): what a counter's increase adds back.
    pub corr: f64,
    pub resets: u32,
    pub changes: u32,
    /// Any raw sample at all, stale markers included.
    pub raw: bool,
    /// The last raw sample was a stale marker.
    pub tail_stale: bool,
}

/// Upstream `funcChanges`' test: NaN to NaN is no change.
#[inline]
fn changed(prev: f64, cur: f64) -> bool {
    !(cur == prev || (cur.is_nan() && prev.is_nan()))
}

impl Agg {
    /// Adds the next sample (in time order). Stale markers only mark the tail.
    #[inline]
    pub fn push(&mut self, t: i64, v: f64) {
        self.raw = true;
        if is_stale_nan(v) {
            self.tail_stale = true;
            return;
        }
        self.tail_stale = false;
        if self.count == 0 {
            *self = Agg { count: 1, sum: v, min: v, max: v, first_t: t, first_v: v, last_t: t, last_v: v, raw: true, ..Agg::default() };
            return;
        }
        let prev = self.last_v;
        if v < prev {
            self.corr += prev;
            self.resets += 1;
        }
        if changed(prev, v) {
            self.changes += 1;
        }
        self.count += 1;
        self.sum += v;
        // Upstream `min_over_time`/`max_over_time`: a NaN is replaced by any number that follows.
        if v < self.min || self.min.is_nan() {
            self.min = v;
        }
        if v > self.max || self.max.is_nan() {
            self.max = v;
        }
        self.penult_t = self.last_t;
        self.penult_v = self.last_v;
        self.last_t = t;
        self.last_v = v;
    }

    /// Appends `next`, which follows `self` in time.
    #[inline]
    pub fn merge(&mut self, next: &Agg) {
        if !next.raw {
            return;
        }
        self.raw = true;
        self.tail_stale = next.tail_stale;
        if next.count == 0 {
            return;
        }
        if self.count == 0 {
            let (raw, tail) = (self.raw, self.tail_stale);
            *self = *next;
            self.raw = raw;
            self.tail_stale = tail;
            return;
        }
        let prev = self.last_v;
        let mut corr = self.corr + next.corr;
        let mut resets = self.resets + next.resets;
        if next.first_v < prev {
            corr += prev;
            resets += 1;
        }
        self.corr = corr;
        self.resets = resets;
        self.changes += next.changes + u32::from(changed(prev, next.first_v));
        self.sum += next.sum;
        if next.min < self.min || self.min.is_nan() {
            self.min = next.min;
        }
        if next.max > self.max || self.max.is_nan() {
            self.max = next.max;
        }
        if next.count >= 2 {
            self.penult_t = next.penult_t;
            self.penult_v = next.penult_v;
        } else {
            self.penult_t = self.last_t;
            self.penult_v = self.last_v;
        }
        self.count = self.count.saturating_add(next.count);
        self.last_t = next.last_t;
        self.last_v = next.last_v;
    }
}

/// Bucket `k` of a series at resolution `R` (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Bucket {
    pub k: i64,
    /// The sample at exactly `k·R`, if any.
    pub edge: Agg,
    /// The samples in `(k·R, (k+1)·R)`.
    pub body: Agg,
}

/// `floor(t / r)` for any sign.
#[inline]
pub fn bucket_of(t: i64, r: i64) -> i64 {
    t.div_euclid(r)
}

/// Buckets of time-sorted samples (stale markers included) at resolution `r_ms`, appended to `out`
/// in bucket order. Buckets without any raw sample are left out.
pub fn bucketize(samples: &[Sample], r_ms: i64, out: &mut Vec<Bucket>) {
    assert!(r_ms > 0, "bucket resolution must be positive");
    for s in samples {
        let k = bucket_of(s.t, r_ms);
        if out.last().is_none_or(|b| b.k != k) {
            out.push(Bucket { k, ..Bucket::default() });
        }
        let b = out.last_mut().expect("pushed");
        if s.t == k * r_ms {
            b.edge.push(s.t, s.v);
        } else {
            b.body.push(s.t, s.v);
        }
    }
}

/// One float column's XOR state.
#[derive(Default, Clone, Copy)]
struct Col {
    prev: u64,
    leading: u8,
    trailing: u8,
}

impl Col {
    fn new() -> Self {
        // Same "no window yet" sentinel as the XOR chunk.
        Col { prev: 0, leading: 0xff, trailing: 0 }
    }
}

/// Per-aggregate coding state (previous values of every column).
#[derive(Clone, Copy)]
struct AggState {
    count: i64,
    first_off: i64,
    last_off: i64,
    penult_off: i64,
    resets: i64,
    changes: i64,
    first_v: Col,
    last_v: Col,
    penult_v: Col,
    sum: Col,
    min: Col,
    max: Col,
    corr: Col,
}

impl AggState {
    fn new() -> Self {
        AggState {
            count: 0,
            first_off: 0,
            last_off: 0,
            penult_off: 0,
            resets: 0,
            changes: 0,
            first_v: Col::new(),
            last_v: Col::new(),
            penult_v: Col::new(),
            sum: Col::new(),
            min: Col::new(),
            max: Col::new(),
            corr: Col::new(),
        }
    }
}

fn put_f(w: &mut BitWriter<'_>, c: &mut Col, v: f64) {
    let bits = v.to_bits();
    write_value(w, &mut c.leading, &mut c.trailing, c.prev, bits);
    c.prev = bits;
}

fn put_i(w: &mut BitWriter<'_>, prev: &mut i64, v: i64) {
    write_dod(w, v.wrapping_sub(*prev));
    *prev = v;
}

fn encode_agg(w: &mut BitWriter<'_>, st: &mut AggState, a: &Agg, base: i64) {
    w.write_bit(a.raw);
    if !a.raw {
        return;
    }
    w.write_bit(a.tail_stale);
    put_i(w, &mut st.count, i64::from(a.count));
    if a.count == 0 {
        return;
    }
    put_i(w, &mut st.first_off, a.first_t - base);
    put_f(w, &mut st.first_v, a.first_v);
    if a.count == 1 {
        return;
    }
    put_i(w, &mut st.last_off, a.last_t - base);
    put_f(w, &mut st.last_v, a.last_v);
    put_f(w, &mut st.sum, a.sum);
    let min_first = a.min.to_bits() == a.first_v.to_bits();
    let max_last = a.max.to_bits() == a.last_v.to_bits();
    w.write_bit(min_first);
    if !min_first {
        put_f(w, &mut st.min, a.min);
    }
    w.write_bit(max_last);
    if !max_last {
        put_f(w, &mut st.max, a.max);
    }
    put_i(w, &mut st.resets, i64::from(a.resets));
    if a.resets > 0 {
        put_f(w, &mut st.corr, a.corr);
    }
    put_i(w, &mut st.changes, i64::from(a.changes));
    if a.count > 2 {
        put_i(w, &mut st.penult_off, a.penult_t - base);
        put_f(w, &mut st.penult_v, a.penult_v);
    }
}

/// Encodes buckets of one series (ascending, distinct `k`) at resolution `r_ms`.
pub fn encode_buckets(r_ms: i64, buckets: &[Bucket]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + buckets.len() * 16);
    put_uvarint(&mut out, r_ms as u64);
    put_uvarint(&mut out, buckets.len() as u64);
    put_varint(&mut out, buckets.first().map_or(0, |b| b.k));
    let mut w = BitWriter::new(&mut out);
    let (mut edge, mut body) = (AggState::new(), AggState::new());
    let mut prev_k = buckets.first().map_or(0, |b| b.k - 1);
    for b in buckets {
        write_dod(&mut w, b.k.wrapping_sub(prev_k).wrapping_sub(1));
        prev_k = b.k;
        let base = b.k.wrapping_mul(r_ms);
        encode_agg(&mut w, &mut edge, &b.edge, base);
        encode_agg(&mut w, &mut body, &b.body, base);
    }
    out
}

/// The resolution and bucket count a bucket chunk's header announces, without decoding.
pub fn buckets_header(data: &[u8]) -> Result<(i64, u64), ChunkError> {
    let (r, rest) = read_uvarint(data).map_err(|_| ChunkError::Truncated { offset: 0 })?;
    let (n, _) = read_uvarint(rest).map_err(|_| ChunkError::Truncated { offset: data.len() - rest.len() })?;
    if r == 0 || r > i64::MAX as u64 {
        return Err(ChunkError::Corrupt { offset: 0, reason: "bucket resolution out of range" });
    }
    Ok((r as i64, n))
}

struct Rd<'a> {
    br: BitReader<'a>,
    start: usize,
}

impl Rd<'_> {
    fn err(&self) -> ChunkError {
        ChunkError::Truncated { offset: self.start + self.br.bit_position() / 8 }
    }
    fn corrupt(&self, reason: &'static str) -> ChunkError {
        ChunkError::Corrupt { offset: self.start + self.br.bit_position() / 8, reason }
    }
    fn bit(&mut self) -> Result<bool, ChunkError> {
        self.br.read_bit().ok_or_else(|| self.err())
    }
    fn i(&mut self, prev: &mut i64) -> Result<i64, ChunkError> {
        let mut d = 0u64;
        read_dod_bits(&mut self.br, &mut d).ok_or_else(|| self.err())?;
        *prev = prev.wrapping_add(d as i64);
        Ok(*prev)
    }
    fn f(&mut self, c: &mut Col) -> Result<f64, ChunkError> {
        let (mut trailing, mut sig) = (u32::from(c.trailing), 64 - u32::from(c.leading.min(64)) - u32::from(c.trailing));
        if c.leading == 0xff {
            // No window yet: the first value always opens one.
            sig = 0;
            trailing = 0;
        }
        let pos = self.start + self.br.bit_position() / 8;
        let mut bits = c.prev;
        let opened = read_value_bits(&mut self.br, &mut bits, &mut trailing, &mut sig).map_err(|e| e.at(pos))?;
        if c.leading == 0xff && !opened && bits != c.prev {
            return Err(self.corrupt("bucket column reuses a window it never opened"));
        }
        if opened {
            c.trailing = trailing as u8;
            c.leading = (64 - sig - trailing) as u8;
        }
        c.prev = bits;
        Ok(f64::from_bits(bits))
    }
    fn count(&mut self, prev: &mut i64) -> Result<u32, ChunkError> {
        let v = self.i(prev)?;
        u32::try_from(v).map_err(|_| self.corrupt("bucket count out of range"))
    }
    fn off(&mut self, prev: &mut i64, r: i64, body: bool) -> Result<i64, ChunkError> {
        let v = self.i(prev)?;
        let ok = if body { v > 0 && v < r } else { v == 0 };
        if !ok {
            return Err(self.corrupt("sample time outside its bucket"));
        }
        Ok(v)
    }
}

fn decode_agg(rd: &mut Rd<'_>, st: &mut AggState, base: i64, r: i64, body: bool) -> Result<Agg, ChunkError> {
    let mut a = Agg { raw: rd.bit()?, ..Agg::default() };
    if !a.raw {
        return Ok(a);
    }
    a.tail_stale = rd.bit()?;
    a.count = rd.count(&mut st.count)?;
    if a.count == 0 {
        return Ok(a);
    }
    if !body && a.count != 1 {
        return Err(rd.corrupt("more than one sample on a bucket edge"));
    }
    a.first_t = base + rd.off(&mut st.first_off, r, body)?;
    a.first_v = rd.f(&mut st.first_v)?;
    if a.count == 1 {
        (a.last_t, a.last_v, a.sum, a.min, a.max) = (a.first_t, a.first_v, a.first_v, a.first_v, a.first_v);
        return Ok(a);
    }
    a.last_t = base + rd.off(&mut st.last_off, r, body)?;
    a.last_v = rd.f(&mut st.last_v)?;
    a.sum = rd.f(&mut st.sum)?;
    a.min = if rd.bit()? { a.first_v } else { rd.f(&mut st.min)? };
    a.max = if rd.bit()? { a.last_v } else { rd.f(&mut st.max)? };
    a.resets = rd.count(&mut st.resets)?;
    if a.resets > 0 {
        a.corr = rd.f(&mut st.corr)?;
    }
    a.changes = rd.count(&mut st.changes)?;
    if a.count > 2 {
        a.penult_t = base + rd.off(&mut st.penult_off, r, body)?;
        a.penult_v = rd.f(&mut st.penult_v)?;
    } else {
        (a.penult_t, a.penult_v) = (a.first_t, a.first_v);
    }
    if a.first_t > a.last_t || a.penult_t > a.last_t || a.penult_t < a.first_t {
        return Err(rd.corrupt("bucket sample times out of order"));
    }
    Ok(a)
}

/// Decodes a bucket chunk, appending its buckets to `out`; returns its resolution.
pub fn decode_buckets_into(data: &[u8], out: &mut Vec<Bucket>) -> Result<i64, ChunkError> {
    let (r, rest) = read_uvarint(data).map_err(|_| ChunkError::Truncated { offset: 0 })?;
    let (n, rest) = read_uvarint(rest).map_err(|_| ChunkError::Truncated { offset: data.len() - rest.len() })?;
    let (k0, rest) = read_varint(rest).map_err(|_| ChunkError::Truncated { offset: data.len() - rest.len() })?;
    if r == 0 || r > (1 << 40) {
        return Err(ChunkError::Corrupt { offset: 0, reason: "bucket resolution out of range" });
    }
    if n > MAX_BUCKETS_PER_CHUNK {
        return Err(ChunkError::Corrupt { offset: 0, reason: "too many buckets in one chunk" });
    }
    let r = r as i64;
    // Every bucket takes at least 3 bits: a chunk announcing more than its bytes can hold is corrupt.
    if n.saturating_mul(3) > rest.len() as u64 * 8 {
        return Err(ChunkError::Truncated { offset: data.len() });
    }
    let start = data.len() - rest.len();
    let mut rd = Rd { br: BitReader::new(rest), start };
    let (mut edge, mut body) = (AggState::new(), AggState::new());
    let mut k = k0.checked_sub(1).ok_or(ChunkError::Corrupt { offset: start, reason: "bucket index out of range" })?;
    out.reserve(n as usize);
    let lim = i64::MAX / r - 1;
    for _ in 0..n {
        let mut dk = 0i64;
        rd.i(&mut dk)?;
        k = k.checked_add(dk).and_then(|k| k.checked_add(1)).ok_or_else(|| rd.corrupt("bucket index out of range"))?;
        if k.abs() > lim || dk < 0 {
            return Err(rd.corrupt("bucket index out of range"));
        }
        let base = k * r;
        let e = decode_agg(&mut rd, &mut edge, base, r, false)?;
        let b = decode_agg(&mut rd, &mut body, base, r, true)?;
        out.push(Bucket { k, edge: e, body: b });
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_model::STALE_NAN;

    fn agg_of(s: &[Sample]) -> Agg {
        let mut a = Agg::default();
        for x in s {
            a.push(x.t, x.v);
        }
        a
    }

    fn same(a: &Agg, b: &Agg) -> bool {
        let f = |x: f64, y: f64| x.to_bits() == y.to_bits() || (x - y).abs() <= 1e-9 * x.abs().max(y.abs());
        a.count == b.count
            && a.raw == b.raw
            && a.tail_stale == b.tail_stale
            && (a.count == 0
                || (a.first_t == b.first_t
                    && a.last_t == b.last_t
                    && f(a.first_v, b.first_v)
                    && f(a.last_v, b.last_v)
                    && f(a.sum, b.sum)
                    && f(a.min, b.min)
                    && f(a.max, b.max)
                    && a.resets == b.resets
                    && a.changes == b.changes
                    && f(a.corr, b.corr)
                    && (a.count < 2 || (a.penult_t == b.penult_t && f(a.penult_v, b.penult_v)))))
    }

    fn series() -> impl Strategy<Value = Vec<Sample>> {
        proptest::collection::vec((1i64..5000, prop_oneof![8 => -50i32..50, 1 => Just(i32::MIN), 1 => Just(i32::MAX)]), 0..200)
            .prop_map(|v| {
                let mut t = -3000;
                v.into_iter()
                    .map(|(dt, x)| {
                        t += dt;
                        let v = match x {
                            i32::MIN => STALE_NAN,
                            i32::MAX => f64::NAN,
                            x => f64::from(x) / 4.0,
                        };
                        Sample { t, v }
                    })
                    .collect()
            })
    }

    proptest! {
        /// Merging the buckets of any split equals aggregating the samples in one pass, and the bytes
        /// round-trip.
        #[test]
        fn buckets_fold_to_the_one_pass_aggregate_and_round_trip(s in series(), r in prop_oneof![Just(1000i64), Just(7000), Just(60_000)]) {
            let mut bs = Vec::new();
            bucketize(&s, r, &mut bs);
            let mut all = Agg::default();
            for b in &bs {
                all.merge(&b.edge);
                all.merge(&b.body);
            }
            prop_assert!(same(&all, &agg_of(&s)), "{all:?} vs {:?}", agg_of(&s));
            let bytes = encode_buckets(r, &bs);
            let mut back = Vec::new();
            prop_assert_eq!(decode_buckets_into(&bytes, &mut back).expect("decodes"), r);
            prop_assert_eq!(back.len(), bs.len());
            for (a, b) in back.iter().zip(&bs) {
                prop_assert_eq!(a.k, b.k);
                prop_assert!(a.edge.bitwise_eq(&b.edge), "{:?} vs {:?}", a.edge, b.edge);
                prop_assert!(a.body.bitwise_eq(&b.body), "{:?} vs {:?}", a.body, b.body);
            }
        }

        /// Any bytes: an error or buckets, never a panic.
        #[test]
        fn decoding_arbitrary_bytes_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut out = Vec::new();
            let _ = decode_buckets_into(&data, &mut out);
        }

        /// A valid chunk with one byte flipped or cut: an error or buckets, never a panic.
        #[test]
        fn damaged_chunks_never_panic(s in series(), at in any::<usize>(), x in 1u8..=255, cut in any::<bool>()) {
            let mut bs = Vec::new();
            bucketize(&s, 1000, &mut bs);
            let mut bytes = encode_buckets(1000, &bs);
            if !bytes.is_empty() {
                let i = at % bytes.len();
                if cut { bytes.truncate(i) } else { bytes[i] ^= x }
            }
            let mut out = Vec::new();
            let _ = decode_buckets_into(&bytes, &mut out);
        }
    }

    impl Agg {
        fn bitwise_eq(&self, o: &Agg) -> bool {
            let b = |x: f64, y: f64| x.to_bits() == y.to_bits();
            self.count == o.count
                && self.raw == o.raw
                && self.tail_stale == o.tail_stale
                && (self.count == 0
                    || (self.first_t == o.first_t
                        && self.last_t == o.last_t
                        && b(self.first_v, o.first_v)
                        && b(self.last_v, o.last_v)
                        && b(self.sum, o.sum)
                        && b(self.min, o.min)
                        && b(self.max, o.max)
                        && self.resets == o.resets
                        && self.changes == o.changes
                        && (self.resets == 0 || b(self.corr, o.corr))
                        && (self.count < 2 || (self.penult_t == o.penult_t && b(self.penult_v, o.penult_v)))))
        }
    }

    #[test]
    fn edges_and_bodies_split_on_bucket_boundaries() {
        let s: Vec<Sample> = [(0, 1.0), (500, 2.0), (1000, 3.0), (1999, 1.0), (3000, STALE_NAN)]
            .iter()
            .map(|&(t, v)| Sample { t, v })
            .collect();
        let mut bs = Vec::new();
        bucketize(&s, 1000, &mut bs);
        assert_eq!(bs.iter().map(|b| b.k).collect::<Vec<_>>(), [0, 1, 3]);
        assert_eq!((bs[0].edge.count, bs[0].body.count), (1, 1));
        assert_eq!((bs[1].edge.count, bs[1].body.count, bs[1].body.resets), (1, 1, 0));
        assert!(bs[2].edge.raw && bs[2].edge.tail_stale && bs[2].edge.count == 0 && !bs[2].body.raw);
        let mut w = bs[1].edge;
        w.merge(&bs[1].body);
        assert_eq!((w.resets, w.corr, w.changes), (1, 3.0, 1));
    }
}
