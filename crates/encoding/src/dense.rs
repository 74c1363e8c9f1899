//! A denser codec for cold (compacted) float chunks: `ChunkEncoding::Dense` (0x40, Tessera's own).
//!
//! XOR spends bits on leading/trailing-zero windows that random-looking values never reuse well (~8.2
//! bytes/point for uniform doubles). Here values are split instead:
//! - the top 12 bits (sign and exponent) are a symbol, Huffman-coded with a per-chunk canonical code
//!   (measurements like uniform [0,100) use a handful of exponents: ~2.2 bits instead of 12);
//! - the 52 mantissa bits are stored raw, minus the trailing zeros every value in the chunk shares.
//!
//! Timestamps are delta-of-delta, stored as runs: `(number of zero dods, next non-zero dod)` pairs, so a
//! regular scrape costs a few bytes per chunk whatever its length.
//!
//! ```text
//! u8 version (2) │ uvarint n │ varint t0 │ [n>=2: varint t1-t0] │ uvarint ts_len │ ts_len bytes of
//! (uvarint zero-run, varint dod)… │ u8 shift │ uvarint nsym │ nsym × u16 BE (symbol<<4 | code length)
//! │ uvarint code_bytes │ code stream: per value, the Huffman code of bits>>52 (code_bytes bytes)
//! │ mantissa stream: per value, (52-shift) bits of mantissa>>shift
//! ```
//! Both streams are MSB-first and zero-padded to a byte. Version 1 (written before 2026-11-26, still
//! read) has no `code_bytes` and one stream instead of the two: per value, its code then its mantissa.
//! Keeping them apart lets a decoder find each mantissa at `i · (52-shift)` without waiting for the codes
//! before it, so only the short codes form a chain of look-ups (B1's values decode ~30 % faster:
//! `cargo bench -p tessera-encoding --bench dense`); the sizes are the same but for a byte or two.
//! The code is canonical (codes assigned in (length, symbol) order), at most [`MAX_CODE_LEN`] bits so the
//! decoder needs one table look-up per value. A single-symbol chunk uses 0-bit codes.
//!
//! Key decision: [`encode_dense`] only returns a chunk when it is smaller than XOR for the same samples,
//! so compaction can call it blindly and keep XOR otherwise. The chunk is not Prometheus-compatible:
//! remote read must re-encode it as XOR before it leaves.

use crate::error::ChunkError;
use crate::varint;
use crate::xor::encode_xor;
use tessera_model::Sample;

/// Format version byte of the chunks written: 2, codes and mantissas in two streams.
const VERSION: u8 = 2;
/// Version 1 (blocks written before 2026-11-26): each value's code and mantissa interleaved in one
/// stream. Still read.
const VERSION_INTERLEAVED: u8 = 1;
/// Longest Huffman code; the decode table has `1 << MAX_CODE_LEN` entries.
pub const MAX_CODE_LEN: u32 = 12;
/// Most samples one dense chunk may hold; bounds what a corrupt count can make a decoder produce.
pub const MAX_DENSE_SAMPLES: usize = 1 << 20;
const MANTISSA_BITS: u32 = 52;
const MANTISSA_MASK: u64 = (1 << MANTISSA_BITS) - 1;

/// Encodes `samples` densely, or `None` when that is not smaller than XOR (or there are no samples, or
/// more than [`MAX_DENSE_SAMPLES`]). Timestamps should be strictly increasing; any sequence round-trips.
pub fn encode_dense(samples: &[Sample]) -> Option<Vec<u8>> {
    if samples.is_empty() || samples.len() > MAX_DENSE_SAMPLES {
        return None;
    }
    let dense = encode_dense_always(samples);
    // XOR's size for the same samples, cut into chunks its u16 count can hold.
    let mut xor_len = 0usize;
    for part in samples.chunks(usize::from(u16::MAX)) {
        xor_len += encode_xor(part).len();
        if xor_len > dense.len() {
            return Some(dense);
        }
    }
    None
}

/// Encodes densely whatever the size (tests and size comparisons). Panics on more than
/// [`MAX_DENSE_SAMPLES`] samples. Callers encoding many chunks reuse a [`DenseEncoder`] instead.
pub fn encode_dense_always(samples: &[Sample]) -> Vec<u8> {
    let mut out = Vec::with_capacity(32 + samples.len() * 7);
    DenseEncoder::new().encode_into(samples, &mut out);
    out
}

/// The sample count a dense chunk's header claims (`None` when the header is unreadable or the count is
/// above [`MAX_DENSE_SAMPLES`]); a block's `num_samples` statistic is summed from it.
pub fn dense_sample_count(data: &[u8]) -> Option<u64> {
    header_sample_count(data, VERSION, MAX_DENSE_SAMPLES).or_else(|| header_sample_count(data, VERSION_INTERLEAVED, MAX_DENSE_SAMPLES))
}

/// The timestamps of `samples` (at least one) as dense chunks (and decimal ones) store them:
/// `varint t0 │ [n>=2: varint t1-t0] │ uvarint ts_len │ ts_len bytes of (uvarint zero-run, varint dod)…`,
/// the runs built in `ts` (scratch).
pub(crate) fn put_time_runs(samples: &[Sample], out: &mut Vec<u8>, ts: &mut Vec<u8>) {
    varint::put_varint(out, samples[0].t);
    ts.clear();
    if samples.len() >= 2 {
        let mut delta = samples[1].t.wrapping_sub(samples[0].t);
        varint::put_varint(out, delta);
        let mut run = 0u64;
        for w in samples[1..].windows(2) {
            let d = w[1].t.wrapping_sub(w[0].t);
            let dod = d.wrapping_sub(delta);
            delta = d;
            if dod == 0 {
                run += 1;
            } else {
                varint::put_uvarint(ts, run);
                varint::put_varint(ts, dod);
                run = 0;
            }
        }
        if run > 0 {
            varint::put_uvarint(ts, run);
        }
    }
    varint::put_uvarint(out, ts.len() as u64);
    out.extend_from_slice(ts);
}

/// A dense encoder with scratch tables kept between chunks. The per-symbol tables have 4,096 entries;
/// allocating and zeroing them for every chunk cost more than encoding a 120-sample chunk itself, so an
/// encoder resets only the entries a chunk used.
pub struct DenseEncoder {
    /// Frequency per 12-bit symbol (sign and exponent); all zero between chunks.
    freq: Vec<u64>,
    /// (code, length) per symbol, valid for the current chunk's symbols only.
    code_of: Vec<(u64, u32)>,
    ts: Vec<u8>,
}

impl Default for DenseEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl DenseEncoder {
    pub fn new() -> Self {
        DenseEncoder { freq: vec![0; 1 << 12], code_of: vec![(0, 0); 1 << 12], ts: Vec::new() }
    }

    /// Appends the dense encoding of `samples` to `out`. Panics on more than [`MAX_DENSE_SAMPLES`] samples.
    pub fn encode_into(&mut self, samples: &[Sample], out: &mut Vec<u8>) {
        assert!(samples.len() <= MAX_DENSE_SAMPLES, "too many samples for one dense chunk");
        let n = samples.len();
        out.push(VERSION);
        varint::put_uvarint(out, n as u64);
        if n == 0 {
            return;
        }
        put_time_runs(samples, out, &mut self.ts);

        // Values: symbol frequencies and the shared trailing zeros of the mantissas.
        // The symbols seen are listed as they first appear, so no pass over all 4,096 entries is needed.
        let freq = &mut self.freq;
        let mut seen: Vec<u16> = Vec::with_capacity(16);
        let mut all_mant = 0u64;
        for s in samples {
            let b = s.v.to_bits();
            let sym = (b >> MANTISSA_BITS) as usize;
            if freq[sym] == 0 {
                seen.push(sym as u16);
            }
            freq[sym] += 1;
            all_mant |= b & MANTISSA_MASK;
        }
        let shift = all_mant.trailing_zeros().min(MANTISSA_BITS);
        out.push(shift as u8);
        seen.sort_unstable();
        let syms: Vec<(u16, u64)> = seen
            .iter()
            .map(|&sym| {
                let f = std::mem::take(&mut freq[usize::from(sym)]); // zero again for the next chunk
                (sym, f)
            })
            .collect();
        let lens = huffman_lengths(&syms);
        varint::put_uvarint(out, syms.len() as u64);
        for (&(sym, _), &len) in syms.iter().zip(&lens) {
            out.extend_from_slice(&(sym << 4 | u16::from(len)).to_be_bytes());
        }
        let codes = canonical_codes(&syms.iter().map(|s| s.0).collect::<Vec<_>>(), &lens);
        let code_of = &mut self.code_of;
        for (i, &(sym, _)) in syms.iter().enumerate() {
            code_of[usize::from(sym)] = (codes[i], u32::from(lens[i]));
        }
        let mant_bits = MANTISSA_BITS - shift;
        // The code stream after its length in bytes, then every mantissa; each stream MSB-first and
        // zero-padded to a byte.
        let code_bits: u64 = syms.iter().zip(&lens).map(|(&(_, f), &l)| f * u64::from(l)).sum();
        varint::put_uvarint(out, code_bits.div_ceil(8));
        out.reserve((code_bits + n as u64 * u64::from(mant_bits)).div_ceil(8) as usize + 16);
        let mut w = BitSink::default();
        for s in samples {
            let (code, len) = code_of[(s.v.to_bits() >> MANTISSA_BITS) as usize];
            w.put(code, len, out);
        }
        w.flush(out);
        for s in samples {
            w.put((s.v.to_bits() & MANTISSA_MASK) >> shift, mant_bits, out);
        }
        w.flush(out);
    }
}

/// An MSB-first bit writer through a 128-bit accumulator that emits whole 64-bit words (the same
/// stream `BitWriter` writes; the value loops are the encoder's hot path).
#[derive(Default)]
struct BitSink {
    acc: u128,
    nbits: u32,
}

impl BitSink {
    /// Appends the low `w` (<= 64) bits of `v`.
    #[inline(always)]
    fn put(&mut self, v: u64, w: u32, out: &mut Vec<u8>) {
        if w == 0 {
            return;
        }
        // At most 64 bits, added below the `nbits` (< 64) pending ones.
        self.acc |= u128::from(v) << (128 - self.nbits - w);
        self.nbits += w;
        if self.nbits >= 64 {
            out.extend_from_slice(&((self.acc >> 64) as u64).to_be_bytes());
            self.acc <<= 64;
            self.nbits -= 64;
        }
    }

    /// Writes the pending bits, zero-padded to a byte, and starts a new stream.
    fn flush(&mut self, out: &mut Vec<u8>) {
        let tail = ((self.acc >> 64) as u64).to_be_bytes();
        out.extend_from_slice(&tail[..self.nbits.div_ceil(8) as usize]);
        *self = BitSink::default();
    }
}

/// Huffman code lengths (parallel to `syms`), limited to [`MAX_CODE_LEN`] by flattening the frequencies
/// until the tree is shallow enough. One symbol gets length 0.
fn huffman_lengths(syms: &[(u16, u64)]) -> Vec<u8> {
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;
    let n = syms.len();
    if n <= 1 {
        return vec![0; n];
    }
    let mut freqs: Vec<u64> = syms.iter().map(|s| s.1.max(1)).collect();
    loop {
        let mut parent = vec![usize::MAX; 2 * n - 1];
        let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
            freqs.iter().enumerate().map(|(i, &f)| Reverse((f, i))).collect();
        let mut next = n;
        while heap.len() > 1 {
            let Reverse((fa, a)) = heap.pop().expect("len > 1");
            let Reverse((fb, b)) = heap.pop().expect("len > 1");
            parent[a] = next;
            parent[b] = next;
            heap.push(Reverse((fa + fb, next)));
            next += 1;
        }
        let mut lens = vec![0u8; n];
        let mut max = 0;
        for (i, len) in lens.iter_mut().enumerate() {
            let mut d = 0u32;
            let mut p = i;
            while parent[p] != usize::MAX {
                p = parent[p];
                d += 1;
            }
            *len = d as u8;
            max = max.max(d);
        }
        if max <= MAX_CODE_LEN {
            return lens;
        }
        // Too deep: flatten and retry. All-ones frequencies give a balanced tree of depth
        // ceil(log2(n)) <= 12 for n <= 4096 symbols, so this terminates.
        for f in &mut freqs {
            *f = f.div_ceil(2);
        }
    }
}

/// Canonical codes for symbols with the given lengths: assigned in (length, symbol) order.
fn canonical_codes(syms: &[u16], lens: &[u8]) -> Vec<u64> {
    let mut order: Vec<usize> = (0..syms.len()).collect();
    order.sort_by_key(|&i| (lens[i], syms[i]));
    let mut codes = vec![0u64; syms.len()];
    let mut code = 0u64;
    let mut prev_len = 0u8;
    for (k, &i) in order.iter().enumerate() {
        if k > 0 {
            code += 1;
        }
        code <<= lens[i] - prev_len;
        prev_len = lens[i];
        codes[i] = code;
    }
    codes
}

/// Decodes every sample of a dense chunk, appending to `out`; on error `out` is left as it was.
pub fn decode_dense_into(data: &[u8], out: &mut Vec<Sample>) -> Result<(), ChunkError> {
    decode_dense_range_into(data, i64::MIN, i64::MAX, out)
}

pub(crate) fn corrupt(offset: usize, reason: &'static str) -> ChunkError {
    ChunkError::Corrupt { offset, reason }
}

/// Decodes a dense chunk, appending the samples with `mint_ms <= t <= maxt_ms`; on error `out` is left as
/// it was.
pub fn decode_dense_range_into(
    data: &[u8],
    mint_ms: i64,
    maxt_ms: i64,
    out: &mut Vec<Sample>,
) -> Result<(), ChunkError> {
    let before = out.len();
    let res = decode_inner(data, mint_ms, maxt_ms, out);
    if res.is_err() {
        out.truncate(before);
    }
    res.map(|_| ())
}

/// The start that dense and decimal chunks share, read by [`read_times_header`]: the sample count, the
/// first timestamp and delta, the run-length timestamp section, and the bytes after it.
pub(crate) struct TimesHeader<'a> {
    pub n: usize,
    pub t0: i64,
    pub d0: i64,
    pub ts: &'a [u8],
    pub rest: &'a [u8],
}

/// A varint error at `at` of a chunk of `len` bytes: overflow is damage, anything else truncation.
pub(crate) fn varint_err(e: varint::VarintError, at: usize, len: usize) -> ChunkError {
    match e {
        varint::VarintError::Overflow => corrupt(at, "varint overflows 64 bits"),
        _ => ChunkError::Truncated { offset: len },
    }
}

/// Reads `u8 version │ uvarint n │ times` (see [`put_time_runs`]) as dense and decimal chunks start;
/// `None` for a chunk of no samples. `bad_version` and `too_many` are the codec's error reasons.
pub(crate) fn read_times_header<'a>(
    data: &'a [u8],
    version: u8,
    max_samples: usize,
    bad_version: &'static str,
    too_many: &'static str,
) -> Result<Option<TimesHeader<'a>>, ChunkError> {
    let off = |rest: &[u8]| data.len() - rest.len();
    let vi = |e, at| varint_err(e, at, data.len());
    let (&v, rest) = data.split_first().ok_or(ChunkError::Truncated { offset: 0 })?;
    if v != version {
        return Err(corrupt(0, bad_version));
    }
    let (n, rest) = varint::read_uvarint(rest).map_err(|e| vi(e, 1))?;
    if n > max_samples as u64 {
        return Err(corrupt(1, too_many));
    }
    let n = n as usize;
    if n == 0 {
        return Ok(None);
    }
    let (t0, rest) = varint::read_varint(rest).map_err(|e| vi(e, off(rest)))?;
    let (d0, rest) = if n >= 2 { varint::read_varint(rest).map_err(|e| vi(e, off(rest)))? } else { (0, rest) };
    let (ts_len, rest) = varint::read_uvarint(rest).map_err(|e| vi(e, off(rest)))?;
    if ts_len > rest.len() as u64 {
        return Err(ChunkError::Truncated { offset: data.len() });
    }
    let (ts, rest) = rest.split_at(ts_len as usize);
    Ok(Some(TimesHeader { n, t0, d0, ts, rest }))
}

/// The sample count of a chunk that starts with `u8 version │ uvarint n` (`None` when unreadable or
/// above `max_samples`), read without decoding.
pub(crate) fn header_sample_count(data: &[u8], version: u8, max_samples: usize) -> Option<u64> {
    let (&v, rest) = data.split_first()?;
    if v != version {
        return None;
    }
    let (n, _) = varint::read_uvarint(rest).ok()?;
    (n <= max_samples as u64).then_some(n)
}

/// Decodes a dense chunk's samples with `mint_ms <= t <= maxt_ms` into the start of `dst` and returns
/// how many were written, for a reader that has laid out one slice per chunk of a series' buffer (from
/// [`dense_sample_count`]) and decodes the chunks in parallel straight into them, without a copy. A
/// chunk with more samples in range than `dst` holds is an error (nothing about `dst` is promised then);
/// `dst` past the count returned is left as it was. The symbol table also tells whether every value is
/// finite, which spares a reader the scan for stale markers.
pub fn decode_dense_range_into_slice(
    data: &[u8],
    mint_ms: i64,
    maxt_ms: i64,
    dst: &mut [Sample],
) -> Result<SliceDecoded, ChunkError> {
    let mut sink = SliceSink { dst, len: 0 };
    let finite = decode_inner(data, mint_ms, maxt_ms, &mut sink)?;
    Ok(SliceDecoded { len: sink.len, finite })
}

/// What [`decode_dense_range_into_slice`] wrote.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceDecoded {
    /// Samples written at the start of the slice.
    pub len: usize,
    /// Known without looking at the samples: every value is finite (so none is a NaN, and none a stale
    /// marker). `false` says nothing.
    pub finite: bool,
}

/// A sign/exponent symbol's exponent bits all ones: the value is a NaN or an infinity.
const EXP_ALL_ONES: u16 = 0x7ff;

/// Where decoded samples go: the end of a vector, or the next place in a slice laid out beforehand.
trait Sink {
    fn len(&self) -> usize;
    /// Room for `n` more samples (a hint).
    fn reserve(&mut self, n: usize);
    fn push(&mut self, s: Sample) -> Result<(), ChunkError>;
    /// Appends the `k` samples of `run` (exactly `k`): the run loop, with one capacity or bounds check
    /// for the run instead of one per sample. (An iterator, not a closure called `k` times: the vector's
    /// `extend` of a `(0..k).map(..)` keeps the decoder's state in registers; a closure passed down
    /// reloaded it through two pointers per sample, 13% slower.)
    fn extend_run(&mut self, k: usize, run: impl Iterator<Item = Sample>) -> Result<(), ChunkError>;
    fn truncate(&mut self, len: usize);
}

impl Sink for Vec<Sample> {
    fn len(&self) -> usize {
        Vec::len(self)
    }

    fn reserve(&mut self, n: usize) {
        Vec::reserve(self, n);
    }

    #[inline(always)]
    fn push(&mut self, s: Sample) -> Result<(), ChunkError> {
        Vec::push(self, s);
        Ok(())
    }

    #[inline(always)]
    fn extend_run(&mut self, _: usize, run: impl Iterator<Item = Sample>) -> Result<(), ChunkError> {
        self.extend(run);
        Ok(())
    }

    fn truncate(&mut self, len: usize) {
        Vec::truncate(self, len);
    }
}

/// A slice being filled from its start; `len` samples written so far.
struct SliceSink<'a> {
    dst: &'a mut [Sample],
    len: usize,
}

impl SliceSink<'_> {
    fn full(&self) -> ChunkError {
        corrupt(1, "more samples in range than the space laid out for them")
    }
}

impl Sink for SliceSink<'_> {
    fn len(&self) -> usize {
        self.len
    }

    fn reserve(&mut self, _: usize) {}

    #[inline(always)]
    fn push(&mut self, s: Sample) -> Result<(), ChunkError> {
        let Some(d) = self.dst.get_mut(self.len) else { return Err(self.full()) };
        *d = s;
        self.len += 1;
        Ok(())
    }

    #[inline(always)]
    fn extend_run(&mut self, k: usize, run: impl Iterator<Item = Sample>) -> Result<(), ChunkError> {
        let end = self.len.checked_add(k).filter(|&e| e <= self.dst.len()).ok_or_else(|| self.full())?;
        for (d, s) in self.dst[self.len..end].iter_mut().zip(run) {
            *d = s;
        }
        self.len = end;
        Ok(())
    }

    fn truncate(&mut self, len: usize) {
        self.len = self.len.min(len);
    }
}

/// Decodes into `out`; `Ok(true)` when the chunk's symbol table shows that no value can be a NaN or an
/// infinity (no sign/exponent symbol with the exponent all ones), so no stale marker either.
fn decode_inner(data: &[u8], mint_ms: i64, maxt_ms: i64, out: &mut impl Sink) -> Result<bool, ChunkError> {
    let off = |rest: &[u8]| data.len() - rest.len();
    let vi = |e, at| varint_err(e, at, data.len());
    let version = match data.first() {
        Some(&v @ (VERSION_INTERLEAVED | VERSION)) => v,
        _ => VERSION,
    };
    let Some(TimesHeader { n, t0, d0, ts, rest }) =
        read_times_header(data, version, MAX_DENSE_SAMPLES, "unknown dense chunk version", "sample count above the dense chunk limit")?
    else {
        return Ok(true);
    };
    // Where the timestamp section ends, so errors inside it can name their offset.
    let ts_end = off(rest);
    let (&shift, rest) = rest.split_first().ok_or(ChunkError::Truncated { offset: data.len() })?;
    if u32::from(shift) > MANTISSA_BITS {
        return Err(corrupt(off(rest) - 1, "mantissa shift above 52"));
    }
    let (nsym, mut rest) = varint::read_uvarint(rest).map_err(|e| vi(e, off(rest)))?;
    if nsym == 0 || nsym > 1 << 12 {
        return Err(corrupt(off(rest), "symbol count out of range"));
    }
    let table_at = off(rest);
    let mut syms = Vec::with_capacity(nsym as usize);
    let mut lens = Vec::with_capacity(nsym as usize);
    for _ in 0..nsym {
        let Some(pair) = rest.get(..2) else { return Err(ChunkError::Truncated { offset: data.len() }) };
        let x = u16::from_be_bytes([pair[0], pair[1]]);
        syms.push(x >> 4);
        lens.push((x & 15) as u8);
        rest = &rest[2..];
    }
    // Validate the code: lengths 1..=12 (0 only for a lone symbol) and the Kraft sum at most 1.
    let max_len = u32::from(*lens.iter().max().expect("nsym >= 1"));
    let kraft: u64 = lens.iter().map(|&l| 1u64 << (MAX_CODE_LEN - u32::from(l).min(MAX_CODE_LEN))).sum();
    if nsym == 1 {
        if lens[0] != 0 {
            return Err(corrupt(table_at, "a lone symbol must have a 0-bit code"));
        }
    } else {
        if lens.iter().any(|&l| l == 0 || u32::from(l) > MAX_CODE_LEN) {
            return Err(corrupt(table_at, "Huffman code length out of range"));
        }
        if kraft > 1 << MAX_CODE_LEN {
            return Err(corrupt(table_at, "Huffman code lengths over-subscribed"));
        }
    }
    let mant_bits = MANTISSA_BITS - u32::from(shift);
    // Version 2: the code stream after its length in bytes, then the mantissas (their length follows
    // from `n`).
    let streams = if version == VERSION {
        let (len, r) = varint::read_uvarint(rest).map_err(|e| vi(e, off(rest)))?;
        if len > r.len() as u64 {
            return Err(ChunkError::Truncated { offset: data.len() });
        }
        let (codes, mants) = r.split_at(len as usize);
        if (mants.len() as u64) < (n as u64 * u64::from(mant_bits)).div_ceil(8) {
            return Err(ChunkError::Truncated { offset: data.len() });
        }
        Some((codes, off(codes), mants))
    } else {
        None
    };
    // Decode table: `1 << max_len` entries of (symbol << 16 | USED | length); an entry without USED is a
    // code no symbol has. A complete code (Kraft sum exactly 1, or a lone symbol) fills every entry, so
    // the table (kept per thread: a fresh one cost a 16 KiB allocation and clear per chunk) is cleared
    // only for an incomplete one.
    TABLE.with_borrow_mut(|table| {
        let table = &mut table[..1 << max_len];
        if nsym == 1 {
            table[0] = u32::from(syms[0]) << 16 | USED;
        } else {
            if kraft != 1 << MAX_CODE_LEN {
                table.fill(0);
            }
            let codes = canonical_codes(&syms, &lens);
            for i in 0..syms.len() {
                let l = u32::from(lens[i]);
                let lo = (codes[i] << (max_len - l)) as usize;
                let hi = ((codes[i] + 1) << (max_len - l)) as usize;
                table[lo..hi].fill(u32::from(syms[i]) << 16 | USED | l);
            }
        }
        let code = Code { table, max_len, mant_bits, shift: u32::from(shift) };
        let times = Times { n, t0, d0, ts, ts_end, len: data.len() };
        match streams {
            Some((codes, codes_at, mants)) => {
                let mut v = Split { code: &code, codes: CodeReader { bytes: codes, at: codes_at, buf: 0, avail: 0, next_byte: 0 }, mants, at: 0 };
                decode_samples(&times, mint_ms, maxt_ms, out, &mut v)?;
                if v.codes.used_bits() > codes.len() * 8 {
                    return Err(ChunkError::Truncated { offset: codes_at + codes.len() });
                }
                Ok(())
            }
            None => {
                let mut v = Interleaved { code: &code, vals: rest, values_at: off(rest), pos: 0 };
                decode_samples(&times, mint_ms, maxt_ms, out, &mut v)
            }
        }
    })?;
    Ok(syms.iter().all(|&s| s & EXP_ALL_ONES != EXP_ALL_ONES))
}

/// A code stream read through a 64-bit buffer: a refill every ~50 bits, so each code costs a shift and
/// a table look-up.
#[derive(Clone)]
struct CodeReader<'a> {
    bytes: &'a [u8],
    /// Where the stream starts in the chunk (for error offsets).
    at: usize,
    /// Code bits, MSB first; the top `avail` are the stream's next ones (and the bits below them too,
    /// up to the last load's end: a refill ORs the same bytes in again).
    buf: u64,
    avail: u32,
    /// The next byte to load (the bits consumed are `next_byte · 8 − avail`).
    next_byte: usize,
}

impl CodeReader<'_> {
    /// The next code's table entry. Past the stream's end the loads read zeros;
    /// [`CodeReader::used_bits`] tells. An unused entry (no USED bit) has length 0 and consumes nothing.
    #[inline(always)]
    fn entry(&mut self, code: &Code<'_>) -> u32 {
        if self.avail < code.max_len {
            // Top up to at least 56 bits: whole bytes, loaded as one 64-bit word below the bits held.
            self.buf |= load_be_u64(self.bytes, self.next_byte) >> self.avail;
            let bytes = (63 - self.avail) / 8;
            self.next_byte += bytes as usize;
            self.avail += bytes * 8;
        }
        let e = code.entry(self.buf);
        let l = e & 0xff;
        self.buf <<= l;
        self.avail -= l;
        e
    }

    fn used_bits(&self) -> usize {
        self.next_byte * 8 - self.avail as usize
    }
}

/// Marks a used entry of the decode table.
const USED: u32 = 1 << 8;

thread_local! {
    /// The decode table, reused from chunk to chunk.
    static TABLE: std::cell::RefCell<Vec<u32>> = std::cell::RefCell::new(vec![0; 1 << MAX_CODE_LEN]);
}

/// A chunk's value code: the canonical Huffman decode table and the mantissa width.
struct Code<'a> {
    table: &'a [u32],
    max_len: u32,
    mant_bits: u32,
    shift: u32,
}

impl Code<'_> {
    /// The table entry for the code at the top of `window`. The shift is split in two so that a lone
    /// symbol's 0-bit code needs no special case (a shift by 64 would overflow); so is the mantissa's.
    #[inline(always)]
    fn entry(&self, window: u64) -> u32 {
        self.table[((window >> 1) >> (63 - self.max_len)) as usize]
    }

    #[inline(always)]
    fn value(&self, entry: u32, mant: u64) -> f64 {
        f64::from_bits(u64::from(entry >> 16) << MANTISSA_BITS | mant << self.shift)
    }
}

/// The big-endian 64 bits at byte `at` of `b`, zero-padded past its end.
#[inline(always)]
fn load_be_u64(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 8) {
        Some(w) => u64::from_be_bytes(w.try_into().expect("8 bytes")),
        None => {
            let mut buf = [0u8; 8];
            let tail = b.get(at..).unwrap_or(&[]);
            buf[..tail.len()].copy_from_slice(tail);
            u64::from_be_bytes(buf)
        }
    }
}

/// Version 1's values: each value's code and mantissa one after the other in one bit stream.
#[derive(Clone)]
struct Interleaved<'a> {
    code: &'a Code<'a>,
    vals: &'a [u8],
    values_at: usize,
    pos: usize,
}

/// A chunk's values in order.
trait Values {
    fn next(&mut self) -> Result<f64, ChunkError>;

    /// Whether [`Values::next_unchecked`] is there (version 2).
    const UNCHECKED: bool = false;

    /// The next value and whether its code was a used one, for a run decoded with one check at its end.
    fn next_unchecked(&mut self) -> (f64, bool) {
        unreachable!("only where UNCHECKED")
    }
}

impl Values for Interleaved<'_> {
    /// A value takes at most 64 bits (code <= 12, mantissa <= 52), so each is cut out of one 64-bit window
    /// loaded at its position: one 16-byte load, zero-padded at the end (reading past the end is caught
    /// by the length check). Each value's position depends on the previous one's code: a chain of loads.
    #[inline(always)]
    fn next(&mut self) -> Result<f64, ChunkError> {
        let byte = self.pos / 8;
        let x = (u128::from(load_be_u64(self.vals, byte)) << 64) | u128::from(load_be_u64(self.vals, byte + 8));
        let window = ((x << (self.pos % 8)) >> 64) as u64;
        let e = self.code.entry(window);
        if e & USED == 0 {
            return Err(corrupt(self.values_at + byte, "unused Huffman code"));
        }
        let l = e & 0xff;
        let mant = ((window << l) >> 1) >> (63 - self.code.mant_bits);
        let end = self.pos + (l + self.code.mant_bits) as usize;
        if end > self.vals.len() * 8 {
            return Err(ChunkError::Truncated { offset: self.values_at + byte });
        }
        self.pos = end;
        Ok(self.code.value(e, mant))
    }
}

/// Version 2's values: the codes from their own stream, where each code's position depends only on the
/// previous codes (a short chain: a shift and a table look-up), and the fixed-width mantissas, value
/// `i`'s bits starting at `i · width` (read independently of every other value).
#[derive(Clone)]
struct Split<'a> {
    code: &'a Code<'a>,
    codes: CodeReader<'a>,
    mants: &'a [u8],
    /// The next mantissa's bit position.
    at: usize,
}

impl Values for Split<'_> {
    const UNCHECKED: bool = true;

    #[inline(always)]
    fn next_unchecked(&mut self) -> (f64, bool) {
        let e = self.codes.entry(self.code);
        let w = self.code.mant_bits;
        let m = load_be_u64(self.mants, self.at / 8) << (self.at % 8);
        self.at += w as usize;
        (self.code.value(e, (m >> 1) >> (63 - w)), e & USED != 0)
    }

    #[inline(always)]
    fn next(&mut self) -> Result<f64, ChunkError> {
        let e = self.codes.entry(self.code);
        if e & USED == 0 {
            return Err(corrupt(self.codes.at + self.codes.used_bits() / 8, "unused Huffman code"));
        }
        let w = self.code.mant_bits;
        let m = load_be_u64(self.mants, self.at / 8) << (self.at % 8);
        self.at += w as usize;
        Ok(self.code.value(e, (m >> 1) >> (63 - w)))
    }
}

/// A chunk's timestamps: `t0`, `d0` and the run-length section `ts` (ending at byte `ts_end` of a
/// chunk of `len` bytes).
struct Times<'a> {
    n: usize,
    t0: i64,
    d0: i64,
    ts: &'a [u8],
    ts_end: usize,
    len: usize,
}

/// Appends the samples with `mint_ms <= t <= maxt_ms`, their values from `value` in order; every value
/// is read up to the first sample past `maxt_ms`.
#[inline(always)]
fn decode_samples<V: Values + Clone, S: Sink>(
    times: &Times<'_>,
    mint_ms: i64,
    maxt_ms: i64,
    out: &mut S,
    values: &mut V,
) -> Result<(), ChunkError> {
    let Times { n, t0, d0, mut ts, ts_end, len } = *times;
    let vi = |e, at| varint_err(e, at, len);
    out.reserve(n.min(len * 8));
    // The next value, for the sample at `t`: kept when in range; `Ok(false)` once past `maxt_ms` (every
    // value is read up to there, so truncation is found).
    let take = |values: &mut V, t: i64, out: &mut S| -> Result<bool, ChunkError> {
        let v = values.next()?;
        if t > maxt_ms {
            return Ok(false);
        }
        if t >= mint_ms {
            out.push(Sample { t, v })?;
        }
        Ok(true)
    };
    let mut t = t0;
    if !take(values, t, out)? {
        return Ok(());
    }
    let mut delta = d0;
    let mut i = 1;
    if n >= 2 {
        t = t.wrapping_add(delta);
        if !take(values, t, out)? {
            return Ok(());
        }
        i = 2;
    }
    // The rest come as runs of zero delta-of-deltas (the common case, decoded in a tight loop), each
    // followed by one non-zero delta-of-delta.
    while i < n {
        let (run, rest_ts) = varint::read_uvarint(ts).map_err(|e| vi(e, ts_end - ts.len()))?;
        ts = rest_ts;
        let k = run.min((n - i) as u64) as usize;
        // A run wholly in range (increasing, no overflow): no per-sample range test, the samples
        // written by one `extend` of known length (no per-sample capacity check), and the codes checked
        // once at the run's end. A run with a bad code is decoded again the checked way below, which
        // reports the error and its offset.
        let last = i64::try_from(k).ok().and_then(|k| delta.checked_mul(k)).and_then(|d| t.checked_add(d));
        let mut done = false;
        if V::UNCHECKED
            && delta >= 0
            && t.checked_add(delta).is_some_and(|f| f >= mint_ms)
            && last.is_some_and(|l| l <= maxt_ms)
        {
            let (saved, mark, t_run) = (values.clone(), out.len(), t);
            let mut ok = true;
            let run = (0..k).map(|_| {
                t += delta;
                let (v, good) = values.next_unchecked();
                ok &= good;
                Sample { t, v }
            });
            out.extend_run(k, run)?;
            done = ok;
            if !ok {
                out.truncate(mark);
                *values = saved;
                t = t_run;
            }
        }
        if !done {
            for _ in 0..k {
                t = t.wrapping_add(delta);
                if !take(values, t, out)? {
                    return Ok(());
                }
            }
        }
        i += k;
        if i >= n {
            break;
        }
        let (dod, rest_ts) = varint::read_varint(ts).map_err(|e| vi(e, ts_end - ts.len()))?;
        ts = rest_ts;
        delta = delta.wrapping_add(dod);
        t = t.wrapping_add(delta);
        if !take(values, t, out)? {
            return Ok(());
        }
        i += 1;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_codes_are_prefix_free_and_ordered() {
        let syms = [5u16, 9, 1, 7];
        let lens = [2u8, 1, 3, 3];
        let codes = canonical_codes(&syms, &lens);
        // Order (len, sym): 9/1 → 0, 5/2 → 10, 1/3 → 110, 7/3 → 111.
        assert_eq!(codes, vec![0b10, 0b0, 0b110, 0b111]);
    }

    #[test]
    fn huffman_lengths_are_limited() {
        // Fibonacci-like frequencies make a maximally deep tree without limiting.
        let mut f = (1u64, 1u64);
        let syms: Vec<(u16, u64)> = (0..40u16)
            .map(|s| {
                let r = (s, f.0);
                f = (f.1, f.0 + f.1);
                r
            })
            .collect();
        let lens = huffman_lengths(&syms);
        assert!(lens.iter().all(|&l| (1..=MAX_CODE_LEN as u8).contains(&l)));
        let kraft: f64 = lens.iter().map(|&l| 0.5f64.powi(i32::from(l))).sum();
        assert!(kraft <= 1.0 + 1e-12);
    }

    #[test]
    fn single_value_and_empty() {
        let s = [Sample::new(7, 1.5)];
        let bytes = encode_dense_always(&s);
        let mut out = Vec::new();
        decode_dense_into(&bytes, &mut out).expect("decodes");
        assert_eq!(out, s.to_vec());
        let empty = encode_dense_always(&[]);
        decode_dense_into(&empty, &mut out).expect("decodes");
        assert_eq!(out.len(), 1);
        assert_eq!(encode_dense(&[]), None);
    }

    /// 20 samples with a delta-of-delta change, a stale marker, infinity, -0.0, tiny and huge values,
    /// and a constant 5-sample chunk.
    fn golden_samples() -> (Vec<Sample>, Vec<Sample>) {
        let vals = [
            0.5, 1.25, 100.0, -3.0, 42.125, 7.0, f64::from_bits(0x7ff0000000000002), f64::INFINITY, 99.99, 0.001,
            1e300, -0.0, 63.9, 64.1, 12.0, 3.5, 2.25, 1.0, 8.75, 33.3,
        ];
        let a = vals
            .iter()
            .enumerate()
            .map(|(i, &v)| Sample::new(1000 + 15 * i as i64 + if i >= 7 { 3 } else { 0 } + if i >= 12 { 40 } else { 0 }, v))
            .collect();
        let b = (0..5).map(|i| Sample::new(i * 10, 4.0)).collect();
        (a, b)
    }

    fn bits(s: &[Sample]) -> Vec<(i64, u64)> {
        s.iter().map(|s| (s.t, s.v.to_bits())).collect()
    }

    /// Version 1 chunks (codes and mantissas interleaved), as the encoder wrote them before version 2
    /// (bytes from commit 59b7e2c's `encode_dense_always`): blocks on disk hold them, so they must
    /// decode for good, whole and by range.
    #[test]
    fn version_1_chunks_still_decode() {
        let (a, b) = golden_samples();
        let v1_a = hex::decode(
            "0114d00f1e09050600050350004f06000c3f543fe43ff4400440144023404340537e347ff38004c00490000000000000a4\
             00000000000052000000000001f0000000000000544000000000033000000000000180000000000013000000000000051\
             feb851eb851f00c49ba5e353f9afc8791000eb39c00000000000007fcccccccccccd003333333333308000000000000bc0\
             00000000000b2000000000000a00000000000000300000000000042999999999998",
        )
        .expect("hex");
        let v1_b = hex::decode("01050014010334014010").expect("hex");
        for (bytes, want) in [(&v1_a, &a), (&v1_b, &b)] {
            assert_eq!(bytes[0], VERSION_INTERLEAVED);
            let mut out = Vec::new();
            decode_dense_into(bytes, &mut out).expect("decodes");
            assert_eq!(bits(&out), bits(want));
            assert_eq!(dense_sample_count(bytes), Some(want.len() as u64));
            out.clear();
            decode_dense_range_into(bytes, want[2].t, want[3].t, &mut out).expect("decodes");
            assert_eq!(bits(&out), bits(&want[2..4]));
            // Truncated anywhere: an error, never a panic.
            for cut in 0..bytes.len() {
                assert!(decode_dense_into(&bytes[..cut], &mut Vec::new()).is_err(), "cut at {cut}");
            }
        }
    }

    /// Version 2's bytes for the same samples, pinned: a change to the format must be deliberate (and
    /// get a new version byte).
    #[test]
    fn version_2_bytes_are_pinned() {
        let (a, b) = golden_samples();
        let got_a = encode_dense_always(&a);
        let got_b = encode_dense_always(&b);
        assert_eq!(hex::encode(&got_a), GOLDEN_V2_A);
        assert_eq!(hex::encode(&got_b), GOLDEN_V2_B);
        for (bytes, want) in [(&got_a, &a), (&got_b, &b)] {
            let mut out = Vec::new();
            decode_dense_into(bytes, &mut out).expect("decodes");
            assert_eq!(bits(&out), bits(want));
        }
    }

    /// A code no symbol has (the code here is incomplete: `11` is unused) inside a run: the fast run
    /// path reports the same error, at the same offset, as the checked one (found by review: it said 0).
    #[test]
    fn an_unused_code_is_the_same_error_on_both_paths() {
        // n=5 at 0,10,…,40; symbols 1.0 (code 0) and 2.0 (code 10); codes 0 0 11 …; no mantissa bits.
        let bytes = [2u8, 5, 0, 0x14, 1, 3, 0x34, 2, 0x3f, 0xf1, 0x40, 0x02, 1, 0x30];
        let whole = decode_dense_into(&bytes, &mut Vec::new()).expect_err("unused code");
        let ranged = decode_dense_range_into(&bytes, 25, i64::MAX, &mut Vec::new()).expect_err("unused code");
        assert_eq!(whole, ranged);
        assert_eq!(whole, ChunkError::Corrupt { offset: 13, reason: "unused Huffman code" });
        // A range ending before it still reads the first value past its end (as version 1 does).
        assert_eq!(decode_dense_range_into(&bytes, 0, 10, &mut Vec::new()), Err(whole));
    }

    const GOLDEN_V2_A: &str = concat!(
        "0214d00f1e09050600050350004f06000c3f543fe43ff4400440144023404340537e347ff38004c004099a5e71b51bc5",
        "0bba0400000000000004000000000000900000000000080000000000005100000000000c000000000000000000000000",
        "200000000000008ff5c28f5c28f0624dd2f1a9fc7e43c8800759c0000000000000ff3333333333300666666666668000",
        "000000000c0000000000002000000000000000000000000018000000000000a66666666666",
    );
    const GOLDEN_V2_B: &str = "0205001401033401401000";
}
