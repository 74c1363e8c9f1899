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
//! u8 version (1) │ uvarint n │ varint t0 │ [n>=2: varint t1-t0] │ uvarint ts_len │ ts_len bytes of
//! (uvarint zero-run, varint dod)… │ u8 shift │ uvarint nsym │ nsym × u16 BE (symbol<<4 | code length)
//! │ bit stream: per value, Huffman code of bits>>52 then (52-shift) bits of mantissa>>shift
//! ```
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

/// Format version byte.
const VERSION: u8 = 1;
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
    header_sample_count(data, VERSION, MAX_DENSE_SAMPLES)
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
        let total_bits: u64 = syms.iter().zip(&lens).map(|(&(_, f), &l)| f * u64::from(l)).sum::<u64>()
            + n as u64 * u64::from(mant_bits);
        out.reserve(total_bits.div_ceil(8) as usize + 8);
        // The same MSB-first, zero-padded stream `BitWriter` writes, through a 128-bit accumulator that
        // emits whole 64-bit words: the value loop is the encoder's hot path.
        let mut acc: u128 = 0;
        let mut nbits: u32 = 0;
        for s in samples {
            let b = s.v.to_bits();
            let (code, len) = code_of[(b >> MANTISSA_BITS) as usize];
            let mant = (b & MANTISSA_MASK) >> shift;
            // len <= 12 and mant_bits <= 52: at most 64 bits, added below the `nbits` (< 64) pending ones.
            let w = len + mant_bits;
            if w > 0 {
                let v = u128::from(code << mant_bits | mant);
                acc |= v << (128 - nbits - w);
                nbits += w;
                if nbits >= 64 {
                    out.extend_from_slice(&((acc >> 64) as u64).to_be_bytes());
                    acc <<= 64;
                    nbits -= 64;
                }
            }
        }
        let tail = ((acc >> 64) as u64).to_be_bytes();
        out.extend_from_slice(&tail[..nbits.div_ceil(8) as usize]);
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
    res
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

fn decode_inner(data: &[u8], mint_ms: i64, maxt_ms: i64, out: &mut Vec<Sample>) -> Result<(), ChunkError> {
    let off = |rest: &[u8]| data.len() - rest.len();
    let vi = |e, at| varint_err(e, at, data.len());
    let Some(TimesHeader { n, t0, d0, ts, rest }) =
        read_times_header(data, VERSION, MAX_DENSE_SAMPLES, "unknown dense chunk version", "sample count above the dense chunk limit")?
    else {
        return Ok(());
    };
    let mut ts = ts;
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
    if nsym == 1 {
        if lens[0] != 0 {
            return Err(corrupt(table_at, "a lone symbol must have a 0-bit code"));
        }
    } else {
        if lens.iter().any(|&l| l == 0 || u32::from(l) > MAX_CODE_LEN) {
            return Err(corrupt(table_at, "Huffman code length out of range"));
        }
        let kraft: u64 = lens.iter().map(|&l| 1u64 << (MAX_CODE_LEN - u32::from(l))).sum();
        if kraft > 1 << MAX_CODE_LEN {
            return Err(corrupt(table_at, "Huffman code lengths over-subscribed"));
        }
    }
    // Decode table: `1 << max_len` entries of (symbol << 8 | length); length 0 marks an unused code.
    let mut table = vec![0u32; 1 << max_len];
    if nsym == 1 {
        table[0] = u32::from(syms[0]) << 8;
    } else {
        let codes = canonical_codes(&syms, &lens);
        for i in 0..syms.len() {
            let l = u32::from(lens[i]);
            let lo = (codes[i] << (max_len - l)) as usize;
            let hi = ((codes[i] + 1) << (max_len - l)) as usize;
            table[lo..hi].fill(u32::from(syms[i]) << 8 | l);
        }
    }
    let mant_bits = MANTISSA_BITS - u32::from(shift);
    let values_at = off(rest);
    let vals = rest;
    let total_bits = vals.len() * 8;
    // Bit position in `vals`. A value takes at most 64 bits (code <= 12, mantissa <= 52), so each is cut
    // out of one 64-bit window loaded at its position: one unaligned 16-byte load, no refill logic.
    let mut br = 0usize;

    out.reserve(n.min(data.len() * 8));
    // One value: its Huffman-coded symbol, then its mantissa bits.
    let value = |pos: &mut usize| -> Result<f64, ChunkError> {
        let byte = *pos / 8;
        let x = match vals.get(byte..byte + 16) {
            Some(w) => u128::from_be_bytes(w.try_into().expect("16 bytes")),
            None => {
                // The last bytes: zero-padded (reading past the end is caught below).
                let mut buf = [0u8; 16];
                let tail = vals.get(byte..).unwrap_or(&[]);
                buf[..tail.len()].copy_from_slice(tail);
                u128::from_be_bytes(buf)
            }
        };
        let window = ((x << (*pos % 8)) >> 64) as u64;
        let (sym, l) = if max_len == 0 {
            (table[0] >> 8, 0)
        } else {
            let e = table[(window >> (64 - max_len)) as usize];
            let l = e & 0xff;
            if l == 0 {
                return Err(corrupt(values_at + byte, "unused Huffman code"));
            }
            (e >> 8, l)
        };
        let mant = if mant_bits == 0 { 0 } else { (window << l) >> (64 - mant_bits) };
        let end = *pos + (l + mant_bits) as usize;
        if end > total_bits {
            return Err(ChunkError::Truncated { offset: values_at + byte });
        }
        *pos = end;
        Ok(f64::from_bits(u64::from(sym) << MANTISSA_BITS | mant << shift))
    };
    // Every value is read (so truncation is found) up to the first sample past `maxt_ms`.
    let mut t = t0;
    let v = value(&mut br)?;
    if t > maxt_ms {
        return Ok(());
    }
    if t >= mint_ms {
        out.push(Sample { t, v });
    }
    let mut delta = d0;
    let mut i = 1;
    if n >= 2 {
        t = t.wrapping_add(delta);
        let v = value(&mut br)?;
        if t > maxt_ms {
            return Ok(());
        }
        if t >= mint_ms {
            out.push(Sample { t, v });
        }
        i = 2;
    }
    // The rest come as runs of zero delta-of-deltas (the common case, decoded in a tight loop), each
    // followed by one non-zero delta-of-delta.
    while i < n {
        let (run, rest_ts) = varint::read_uvarint(ts).map_err(|e| vi(e, ts_end - ts.len()))?;
        ts = rest_ts;
        let k = run.min((n - i) as u64) as usize;
        for _ in 0..k {
            t = t.wrapping_add(delta);
            let v = value(&mut br)?;
            if t > maxt_ms {
                return Ok(());
            }
            if t >= mint_ms {
                out.push(Sample { t, v });
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
        let v = value(&mut br)?;
        if t > maxt_ms {
            return Ok(());
        }
        if t >= mint_ms {
            out.push(Sample { t, v });
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
}
