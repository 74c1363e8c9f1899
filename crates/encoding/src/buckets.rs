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
//! A version byte (2), `uvarint R`, `uvarint n`, `varint k0`, the byte length of each of the 13 columns
//! ([`col`]), then the columns, each its own bit stream, so that a reader decodes only what its function
//! needs (`rate` reads times, first and last values and the counter correction; `avg_over_time` sums and
//! counts): the shape (bucket index steps as a delta of delta; per aggregate its presence and staleness
//! bits and count, as a delta from the previous count), the body's first/last/penultimate sample times as
//! deltas of the previous bucket's offsets, the edge value and the body's first/last/penultimate values,
//! sum, min (a bit "is the first value" else the value), max (likewise with the last), resets with the
//! counter correction, changes. Float columns are XOR'ed with the same column's previous value (Gorilla's
//! value coding, shared with the XOR chunk). Regular scrapes cost a bit per offset; constant series a bit
//! per column. Decoding is bounded by `n` and checks every field it reads; bad bytes are a
//! [`ChunkError`], never a panic.

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
#[derive(Clone, Copy)]
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

/// Format version, the chunk's first byte.
const VERSION: u8 = 2;

/// The columns of a bucket chunk, each its own bit stream (see the module docs). A reader asks for the
/// ones it needs ([`Cols`]); [`SHAPE`](col::SHAPE) is always read.
pub mod col {
    /// Bucket index steps, and per aggregate its presence, staleness and count.
    pub const SHAPE: u16 = 1 << 0;
    /// The body's first, last and penultimate sample times.
    pub const T_FIRST: u16 = 1 << 1;
    pub const T_LAST: u16 = 1 << 2;
    pub const T_PENULT: u16 = 1 << 3;
    /// The edge sample's value.
    pub const V_EDGE: u16 = 1 << 4;
    /// The body's first, last and penultimate values.
    pub const V_FIRST: u16 = 1 << 5;
    pub const V_LAST: u16 = 1 << 6;
    pub const V_PENULT: u16 = 1 << 7;
    pub const SUM: u16 = 1 << 8;
    pub const MIN: u16 = 1 << 9;
    pub const MAX: u16 = 1 << 10;
    /// Resets and the counter correction.
    pub const RESETS: u16 = 1 << 11;
    pub const CHANGES: u16 = 1 << 12;
    pub const COUNT: usize = 13;
    pub const ALL: u16 = (1 << COUNT) - 1;
    /// What every reader of values needs: single-sample aggregates are their first value.
    pub const BASE: u16 = SHAPE | V_EDGE | V_FIRST;
}

/// A set of [`col`] flags.
pub type Cols = u16;

struct Enc {
    bufs: Vec<Vec<u8>>,
    free: [u32; col::COUNT],
}

impl Enc {
    fn w(&mut self, c: usize) -> BitWriter<'_> {
        BitWriter::resume(&mut self.bufs[c], self.free[c])
    }
    fn bit(&mut self, c: usize, b: bool) {
        let mut w = self.w(c);
        w.write_bit(b);
        self.free[c] = w.free_bits();
    }
    fn i(&mut self, c: usize, prev: &mut i64, v: i64) {
        let mut w = self.w(c);
        write_dod(&mut w, v.wrapping_sub(*prev));
        self.free[c] = w.free_bits();
        *prev = v;
    }
    fn f(&mut self, c: usize, st: &mut Col, v: f64) {
        let bits = v.to_bits();
        let mut w = self.w(c);
        write_value(&mut w, &mut st.leading, &mut st.trailing, st.prev, bits);
        self.free[c] = w.free_bits();
        st.prev = bits;
    }
}

const fn ix(flag: u16) -> usize {
    flag.trailing_zeros() as usize
}

/// Encodes buckets of one series (ascending, distinct `k`) at resolution `r_ms`.
pub fn encode_buckets(r_ms: i64, buckets: &[Bucket]) -> Vec<u8> {
    let mut e = Enc { bufs: vec![Vec::new(); col::COUNT], free: [0; col::COUNT] };
    let mut cols = [Col::new(); col::COUNT];
    let (mut count, mut t_first, mut t_last, mut t_penult, mut resets, mut changes) = (0i64, 0i64, 0i64, 0i64, 0i64, 0i64);
    let mut prev_k = buckets.first().map_or(0, |b| b.k - 1);
    for b in buckets {
        let s = ix(col::SHAPE);
        let mut dk = 0;
        e.i(s, &mut dk, b.k.wrapping_sub(prev_k).wrapping_sub(1));
        prev_k = b.k;
        let base = b.k.wrapping_mul(r_ms);
        let (ed, bd) = (&b.edge, &b.body);
        e.bit(s, ed.raw);
        if ed.raw {
            e.bit(s, ed.tail_stale);
            e.bit(s, ed.count > 0);
            if ed.count > 0 {
                e.f(ix(col::V_EDGE), &mut cols[ix(col::V_EDGE)], ed.first_v);
            }
        }
        e.bit(s, bd.raw);
        if !bd.raw {
            continue;
        }
        e.bit(s, bd.tail_stale);
        e.i(s, &mut count, i64::from(bd.count));
        if bd.count == 0 {
            continue;
        }
        e.i(ix(col::T_FIRST), &mut t_first, bd.first_t - base);
        e.f(ix(col::V_FIRST), &mut cols[ix(col::V_FIRST)], bd.first_v);
        if bd.count == 1 {
            continue;
        }
        e.i(ix(col::T_LAST), &mut t_last, bd.last_t - base);
        e.f(ix(col::V_LAST), &mut cols[ix(col::V_LAST)], bd.last_v);
        e.f(ix(col::SUM), &mut cols[ix(col::SUM)], bd.sum);
        let min_first = bd.min.to_bits() == bd.first_v.to_bits();
        e.bit(ix(col::MIN), min_first);
        if !min_first {
            e.f(ix(col::MIN), &mut cols[ix(col::MIN)], bd.min);
        }
        let max_last = bd.max.to_bits() == bd.last_v.to_bits();
        e.bit(ix(col::MAX), max_last);
        if !max_last {
            e.f(ix(col::MAX), &mut cols[ix(col::MAX)], bd.max);
        }
        e.i(ix(col::RESETS), &mut resets, i64::from(bd.resets));
        if bd.resets > 0 {
            e.f(ix(col::RESETS), &mut cols[ix(col::RESETS)], bd.corr);
        }
        e.i(ix(col::CHANGES), &mut changes, i64::from(bd.changes));
        if bd.count > 2 {
            e.i(ix(col::T_PENULT), &mut t_penult, bd.penult_t - base);
            e.f(ix(col::V_PENULT), &mut cols[ix(col::V_PENULT)], bd.penult_v);
        }
    }
    let mut out = Vec::with_capacity(32 + e.bufs.iter().map(Vec::len).sum::<usize>());
    out.push(VERSION);
    put_uvarint(&mut out, r_ms as u64);
    put_uvarint(&mut out, buckets.len() as u64);
    put_varint(&mut out, buckets.first().map_or(0, |b| b.k));
    for b in &e.bufs {
        put_uvarint(&mut out, b.len() as u64);
    }
    for b in &e.bufs {
        out.extend_from_slice(b);
    }
    out
}

/// The resolution and bucket count a bucket chunk's header announces, without decoding.
pub fn buckets_header(data: &[u8]) -> Result<(i64, u64), ChunkError> {
    let h = Header::read(data)?;
    Ok((h.r, h.n))
}

struct Header<'a> {
    r: i64,
    n: u64,
    k0: i64,
    cols: [(&'a [u8], usize); col::COUNT],
}

impl<'a> Header<'a> {
    fn read(data: &'a [u8]) -> Result<Header<'a>, ChunkError> {
        let trunc = |rest: &[u8]| ChunkError::Truncated { offset: data.len() - rest.len() };
        match data.first() {
            Some(&VERSION) => {}
            Some(_) => return Err(ChunkError::Corrupt { offset: 0, reason: "unsupported bucket chunk version" }),
            None => return Err(ChunkError::Truncated { offset: 0 }),
        }
        let rest = &data[1..];
        let (r, rest) = read_uvarint(rest).map_err(|_| trunc(rest))?;
        let (n, rest) = read_uvarint(rest).map_err(|_| trunc(rest))?;
        let (k0, mut rest) = read_varint(rest).map_err(|_| trunc(rest))?;
        if r == 0 || r > (1 << 40) {
            return Err(ChunkError::Corrupt { offset: 1, reason: "bucket resolution out of range" });
        }
        if n > MAX_BUCKETS_PER_CHUNK {
            return Err(ChunkError::Corrupt { offset: 1, reason: "too many buckets in one chunk" });
        }
        let mut lens = [0usize; col::COUNT];
        for l in &mut lens {
            let (v, r2) = read_uvarint(rest).map_err(|_| trunc(rest))?;
            *l = usize::try_from(v).map_err(|_| trunc(rest))?;
            rest = r2;
        }
        let mut cols: [(&[u8], usize); col::COUNT] = [(&[], 0); col::COUNT];
        for (c, &l) in cols.iter_mut().zip(&lens) {
            if l > rest.len() {
                return Err(trunc(rest));
            }
            *c = (&rest[..l], data.len() - rest.len());
            rest = &rest[l..];
        }
        // The shape column takes at least 3 bits a bucket: more buckets than it can hold is damage.
        if n.saturating_mul(3) > cols[0].0.len() as u64 * 8 {
            return Err(ChunkError::Truncated { offset: cols[0].1 + cols[0].0.len() });
        }
        Ok(Header { r: r as i64, n, k0, cols })
    }
}

struct Rd<'a> {
    br: BitReader<'a>,
    start: usize,
}

impl<'a> Rd<'a> {
    fn new((data, start): (&'a [u8], usize)) -> Self {
        Rd { br: BitReader::new(data), start }
    }
    fn err(&self) -> ChunkError {
        ChunkError::Truncated { offset: self.start + self.br.bit_position() / 8 }
    }
    fn corrupt(&self, reason: &'static str) -> ChunkError {
        ChunkError::Corrupt { offset: self.start + self.br.bit_position() / 8, reason }
    }
    #[inline]
    fn bit(&mut self) -> Result<bool, ChunkError> {
        self.br.read_bit().ok_or_else(|| self.err())
    }
    #[inline]
    fn i(&mut self, prev: &mut i64) -> Result<i64, ChunkError> {
        let mut d = 0u64;
        read_dod_bits(&mut self.br, &mut d).ok_or_else(|| self.err())?;
        *prev = prev.wrapping_add(d as i64);
        Ok(*prev)
    }
    #[inline]
    fn f(&mut self, c: &mut Col) -> Result<f64, ChunkError> {
        let (mut trailing, mut sig) = if c.leading == 0xff {
            // No window yet: the first value always opens one.
            (0, 0)
        } else {
            (u32::from(c.trailing), 64 - u32::from(c.leading) - u32::from(c.trailing))
        };
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
    fn off(&mut self, prev: &mut i64, r: i64) -> Result<i64, ChunkError> {
        let v = self.i(prev)?;
        if v <= 0 || v >= r {
            return Err(self.corrupt("sample time outside its bucket"));
        }
        Ok(v)
    }
}

/// Decodes a bucket chunk, every column, appending its buckets to `out`; returns its resolution.
pub fn decode_buckets_into(data: &[u8], out: &mut Vec<Bucket>) -> Result<i64, ChunkError> {
    decode_bucket_cols_into(data, col::ALL, out)
}

/// Decodes the columns `cols` of a bucket chunk (plus the shape), appending its buckets to `out`;
/// fields of columns not asked for are left at their defaults, except that single-sample aggregates
/// always get every value from their one sample when its column is read. On error `out` is left as it
/// was. Returns the resolution.
pub fn decode_bucket_cols_into(data: &[u8], cols: Cols, out: &mut Vec<Bucket>) -> Result<i64, ChunkError> {
    let h = Header::read(data)?;
    let from = out.len();
    // "min is the first value" and "max is the last value" need those values.
    let mut cols = cols | col::SHAPE;
    if cols & col::MIN != 0 {
        cols |= col::V_FIRST;
    }
    if cols & col::MAX != 0 {
        cols |= col::V_LAST;
    }
    let res = decode_cols(&h, cols, out, from);
    if res.is_err() {
        out.truncate(from);
    }
    res.map(|()| h.r)
}

fn decode_cols(h: &Header<'_>, cols: Cols, out: &mut Vec<Bucket>, from: usize) -> Result<(), ChunkError> {
    let r = h.r;
    let lim = i64::MAX / r - 1;
    out.reserve(h.n as usize);
    // The shape.
    let mut rd = Rd::new(h.cols[0]);
    let mut k = h.k0.checked_sub(1).ok_or_else(|| rd.corrupt("bucket index out of range"))?;
    let mut count = 0i64;
    for _ in 0..h.n {
        let mut dk = 0i64;
        rd.i(&mut dk)?;
        k = k.checked_add(dk).and_then(|k| k.checked_add(1)).ok_or_else(|| rd.corrupt("bucket index out of range"))?;
        if k.abs() > lim || dk < 0 {
            return Err(rd.corrupt("bucket index out of range"));
        }
        let mut b = Bucket { k, ..Bucket::default() };
        if rd.bit()? {
            b.edge.raw = true;
            b.edge.tail_stale = rd.bit()?;
            if rd.bit()? {
                let t = k * r;
                b.edge.count = 1;
                (b.edge.first_t, b.edge.last_t, b.edge.penult_t) = (t, t, t);
            }
        }
        if rd.bit()? {
            b.body.raw = true;
            b.body.tail_stale = rd.bit()?;
            b.body.count = rd.count(&mut count)?;
        }
        out.push(b);
    }
    let bs = &mut out[from..];
    let want = |c: u16| cols & c != 0;
    if want(col::V_EDGE) {
        let (mut rd, mut st) = (Rd::new(h.cols[ix(col::V_EDGE)]), Col::new());
        for b in bs.iter_mut().filter(|b| b.edge.count > 0) {
            let v = rd.f(&mut st)?;
            let e = &mut b.edge;
            (e.first_v, e.last_v, e.penult_v, e.sum, e.min, e.max) = (v, v, v, v, v, v);
        }
    }
    let times = [(col::T_FIRST, 1u32), (col::T_LAST, 2), (col::T_PENULT, 3)];
    for (c, min_count) in times {
        if !want(c) {
            continue;
        }
        let (mut rd, mut prev) = (Rd::new(h.cols[ix(c)]), 0i64);
        for b in bs.iter_mut().filter(|b| b.body.count >= min_count) {
            let t = b.k * r + rd.off(&mut prev, r)?;
            match c {
                col::T_FIRST => {
                    b.body.first_t = t;
                    if b.body.count <= 2 {
                        b.body.penult_t = t;
                    }
                    if b.body.count == 1 {
                        b.body.last_t = t;
                    }
                }
                col::T_LAST => b.body.last_t = t,
                _ => b.body.penult_t = t,
            }
        }
    }
    let values = [(col::V_FIRST, 1u32), (col::V_LAST, 2), (col::V_PENULT, 3), (col::SUM, 2)];
    for (c, min_count) in values {
        if !want(c) {
            continue;
        }
        let (mut rd, mut st) = (Rd::new(h.cols[ix(c)]), Col::new());
        for b in bs.iter_mut().filter(|b| b.body.count >= min_count) {
            let v = rd.f(&mut st)?;
            let a = &mut b.body;
            match c {
                col::V_FIRST => {
                    a.first_v = v;
                    if a.count <= 2 {
                        a.penult_v = v;
                    }
                    if a.count == 1 {
                        (a.last_v, a.sum, a.min, a.max) = (v, v, v, v);
                    }
                }
                col::V_LAST => a.last_v = v,
                col::V_PENULT => a.penult_v = v,
                _ => a.sum = v,
            }
        }
    }
    for (c, is_min) in [(col::MIN, true), (col::MAX, false)] {
        if !want(c) {
            continue;
        }
        let (mut rd, mut st) = (Rd::new(h.cols[ix(c)]), Col::new());
        for b in bs.iter_mut().filter(|b| b.body.count >= 2) {
            let same = rd.bit()?;
            let v = if same {
                // The first or last value: read from its column if asked, else unknown here.
                if is_min { b.body.first_v } else { b.body.last_v }
            } else {
                rd.f(&mut st)?
            };
            if is_min {
                b.body.min = v;
            } else {
                b.body.max = v;
            }
        }
    }
    if want(col::RESETS) {
        let (mut rd, mut st, mut prev) = (Rd::new(h.cols[ix(col::RESETS)]), Col::new(), 0i64);
        for b in bs.iter_mut().filter(|b| b.body.count >= 2) {
            b.body.resets = rd.count(&mut prev)?;
            if b.body.resets > 0 {
                b.body.corr = rd.f(&mut st)?;
            }
        }
    }
    if want(col::CHANGES) {
        let (mut rd, mut prev) = (Rd::new(h.cols[ix(col::CHANGES)]), 0i64);
        for b in bs.iter_mut().filter(|b| b.body.count >= 2) {
            b.body.changes = rd.count(&mut prev)?;
        }
    }
    if want(col::T_FIRST) && want(col::T_LAST) && want(col::T_PENULT) {
        for b in bs.iter() {
            let a = &b.body;
            if a.count >= 2 && (a.first_t > a.last_t || a.penult_t > a.last_t || a.penult_t < a.first_t) {
                return Err(ChunkError::Corrupt { offset: h.cols[ix(col::T_FIRST)].1, reason: "bucket sample times out of order" });
            }
        }
    }
    Ok(())
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

        /// Decoding some columns gives those columns' fields exactly as decoding all of them does.
        #[test]
        fn decoding_some_columns_gives_their_fields(s in series(), mask in any::<u16>()) {
            let mut bs = Vec::new();
            bucketize(&s, 1000, &mut bs);
            let bytes = encode_buckets(1000, &bs);
            let (mut all, mut some) = (Vec::new(), Vec::new());
            decode_buckets_into(&bytes, &mut all).expect("decodes");
            decode_bucket_cols_into(&bytes, mask & col::ALL, &mut some).expect("decodes");
            prop_assert_eq!(all.len(), some.len());
            let m = mask | col::SHAPE;
            let has = |c: u16| m & c != 0;
            let b = |x: f64, y: f64| x.to_bits() == y.to_bits();
            for (x, y) in all.iter().zip(&some) {
                prop_assert_eq!(x.k, y.k);
                for (p, q) in [(&x.edge, &y.edge), (&x.body, &y.body)] {
                    prop_assert_eq!((p.count, p.raw, p.tail_stale), (q.count, q.raw, q.tail_stale));
                    if p.count == 0 {
                        continue;
                    }
                    let edge = std::ptr::eq(p, &x.edge);
                    if (edge && has(col::V_EDGE)) || (!edge && has(col::V_FIRST)) {
                        prop_assert!(b(p.first_v, q.first_v));
                    }
                    if edge || has(col::T_FIRST) {
                        prop_assert_eq!(p.first_t, q.first_t);
                    }
                    if p.count >= 2 {
                        if has(col::T_LAST) { prop_assert_eq!(p.last_t, q.last_t); }
                        if has(col::V_LAST) { prop_assert!(b(p.last_v, q.last_v)); }
                        if has(col::SUM) { prop_assert!(b(p.sum, q.sum)); }
                        if has(col::MIN) { prop_assert!(b(p.min, q.min)); }
                        if has(col::MAX) { prop_assert!(b(p.max, q.max)); }
                        if has(col::RESETS) { prop_assert_eq!(p.resets, q.resets); prop_assert!(b(p.corr, q.corr) || p.resets == 0); }
                        if has(col::CHANGES) { prop_assert_eq!(p.changes, q.changes); }
                    }
                    if p.count >= 3 && has(col::T_PENULT) && has(col::V_PENULT) {
                        prop_assert_eq!(p.penult_t, q.penult_t);
                        prop_assert!(b(p.penult_v, q.penult_v));
                    }
                }
            }
        }

        /// Any bytes: an error or buckets, never a panic.
        #[test]
        fn decoding_arbitrary_bytes_never_panics(data in proptest::collection::vec(any::<u8>(), 0..300)) {
            let mut out = Vec::new();
            let _ = decode_buckets_into(&data, &mut out);
            // With a valid header in front too, so the columns themselves are exercised.
            let mut d = vec![2u8, 0xe8, 0x07, 40, 0];
            d.extend_from_slice(&data);
            let _ = decode_buckets_into(&d, &mut out);
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
