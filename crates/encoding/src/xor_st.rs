//! Float chunk with per-sample start timestamps: `ChunkEncoding::XorSt` (0x41, Tessera's own).
//!
//! Prometheus 3.14 gives samples an optional start timestamp ("ST", ms, 0 = unset): the time a cumulative
//! counter started counting (process start), or for OTel delta samples the end of the previous interval.
//! This chunk stores them next to the XOR-coded samples, in one bit stream so the chunk is complete and
//! decodable after every append, as XOR chunks are.
//!
//! ```text
//! count: u16 BE │ t0: zig-zag varint (bytes) │ v0: 64 bits │ ST code of sample 0
//!               │ then per sample n >= 1: dod (XOR buckets) │ value (XOR '0'/'10'/'11' codes) │ ST code
//! ```
//! The timestamp and value codes are XOR's ([`crate::xor`]), except that sample 1's timestamp is a
//! delta of delta against a delta of 0 (so it is bucket coded, not a byte-aligned uvarint).
//!
//! ST code: the decoder keeps a *rule* (initially `Zero`) and the previous sample's `t` and `st`
//! (initially both 0). The rules predict the sample's ST:
//!
//! | rule | id | prediction | typical source |
//! |------|----|------------|----------------|
//! | `Zero` | 0 | 0 | no ST |
//! | `SameSt` | 1 | previous st | cumulative counter (st = process start) |
//! | `PrevT` | 2 | previous t | OTel delta (st = end of the previous interval) |
//! | `SameOffset` | 3 | t - (previous t - previous st) | st = t - constant |
//!
//! ```text
//! '0'                         st = the current rule's prediction
//! '10' + rule (2 bits)        the rule becomes `rule`; st = its prediction
//! '11' + uvarint bytes        explicit: zig-zag(t - st) (wrapping), 8 bits per varint byte;
//!                             the rule is unchanged
//! ```
//! So a steady pattern costs one bit per sample, on top of XOR; a chunk of a cumulative counter pays
//! once for its first ST (explicit) and 4 bits to switch to `SameSt`.
//!
//! The encoder tries the current rule, then the others in id order, then the explicit form. All
//! arithmetic wraps, so every i64 `t`/`st` pair round-trips. Like XOR, the decoder treats bytes as
//! untrusted: bounded by the header's count, every read checked, errors typed. The bulk decoder
//! ([`decode_xor_st_range_into`]) runs an unchecked-length loop while enough bytes remain, as XOR's
//! does, and is property-tested to agree with the checked iterator ([`XorStIter`]) on damaged input.

use crate::bstream::{BitReader, BitWriter};
use crate::error::ChunkError;
use crate::varint;
use crate::xor::{
    DOD_BITS, NO_WINDOW, XOR_HEADER_BYTES, load57, read_at, read_dod_bits, read_value_bits, write_dod, write_value,
};
use tessera_model::Sample;

/// Longest explicit-ST varint (a u64 takes at most 10 bytes).
const MAX_VARINT_BYTES: usize = 10;

/// ST prediction state shared by encoder and decoder.
#[derive(Debug, Clone, Copy, Default)]
struct StState {
    rule: u8,
    prev_t: i64,
    prev_st: i64,
}

impl StState {
    #[inline(always)]
    fn predict(&self, rule: u8, t: i64) -> i64 {
        match rule {
            0 => 0,
            1 => self.prev_st,
            2 => self.prev_t,
            _ => t.wrapping_sub(self.prev_t.wrapping_sub(self.prev_st)),
        }
    }

    #[inline(always)]
    fn write(&mut self, w: &mut BitWriter<'_>, t: i64, st: i64) {
        if self.predict(self.rule, t) == st {
            w.write_bit(false);
        } else if let Some(r) = (0..4u8).find(|&r| r != self.rule && self.predict(r, t) == st) {
            w.write_bits(0b10 << 2 | u64::from(r), 4);
            self.rule = r;
        } else {
            w.write_bits(0b11, 2);
            // The uvarint written byte by byte (no allocation on this path).
            let mut x = varint::zigzag_encode(t.wrapping_sub(st));
            while x >= 0x80 {
                w.write_bits((x & 0x7f) | 0x80, 8);
                x >>= 7;
            }
            w.write_bits(x, 8);
        }
        self.prev_t = t;
        self.prev_st = st;
    }
}

/// Appends `(t, st, v)` samples to one XorSt chunk. See the module docs for the format.
#[derive(Debug, Clone)]
pub struct XorStEncoder {
    buf: Vec<u8>,
    free_bits: u32,
    num: u16,
    first_t: i64,
    t: i64,
    v_bits: u64,
    t_delta: u64,
    leading: u8,
    trailing: u8,
    st: StState,
}

impl Default for XorStEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl XorStEncoder {
    /// An empty chunk (2 header bytes saying 0 samples).
    pub fn new() -> Self {
        Self::with_capacity(128)
    }

    /// An empty chunk whose buffer can hold `bytes` bytes before growing.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(bytes.max(XOR_HEADER_BYTES));
        buf.extend_from_slice(&[0, 0]);
        Self {
            buf,
            free_bits: 0,
            num: 0,
            first_t: 0,
            t: 0,
            v_bits: 0,
            t_delta: 0,
            leading: NO_WINDOW,
            trailing: 0,
            st: StState::default(),
        }
    }

    /// Number of samples appended.
    #[inline]
    pub fn num_samples(&self) -> usize {
        usize::from(self.num)
    }

    /// True when no more samples fit (the header count is a u16).
    #[inline]
    pub fn is_full(&self) -> bool {
        self.num == u16::MAX
    }

    /// The complete chunk bytes, count header included; valid after every append.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// Gives up the chunk bytes.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    pub fn first_t(&self) -> Option<i64> {
        (self.num > 0).then_some(self.first_t)
    }

    pub fn last_t(&self) -> Option<i64> {
        (self.num > 0).then_some(self.t)
    }

    /// Heap bytes held (the buffer's capacity), for memory accounting.
    #[inline]
    pub fn size_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// Drops excess buffer capacity.
    pub fn shrink_to_fit(&mut self) {
        self.buf.shrink_to_fit();
    }

    /// Empties the chunk, keeping the buffer's capacity for reuse.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.buf.extend_from_slice(&[0, 0]);
        self.free_bits = 0;
        self.num = 0;
        self.first_t = 0;
        self.t = 0;
        self.v_bits = 0;
        self.t_delta = 0;
        self.leading = NO_WINDOW;
        self.trailing = 0;
        self.st = StState::default();
    }

    /// Appends one sample; `st` is its start timestamp (0 = unset). The caller guarantees `t` is greater
    /// than the previous sample's (the format survives any order, but readers rely on it).
    ///
    /// # Panics
    /// If the chunk already holds `u16::MAX` samples ([`XorStEncoder::is_full`]).
    #[inline]
    pub fn append(&mut self, t: i64, st: i64, v: f64) {
        assert!(self.num < u16::MAX, "XorSt chunk full: the sample count header is a u16");
        let v_bits = v.to_bits();
        if self.num == 0 {
            // The header is 2 whole bytes: byte aligned.
            varint::put_varint(&mut self.buf, t);
            self.buf.extend_from_slice(&v_bits.to_be_bytes());
            let mut w = BitWriter::resume(&mut self.buf, 0);
            self.st.write(&mut w, t, st);
            self.free_bits = w.free_bits();
            self.first_t = t;
            self.t_delta = 0;
        } else {
            let t_delta = t.wrapping_sub(self.t) as u64;
            let dod = t_delta.wrapping_sub(self.t_delta) as i64;
            let mut w = BitWriter::resume(&mut self.buf, self.free_bits);
            write_dod(&mut w, dod);
            write_value(&mut w, &mut self.leading, &mut self.trailing, self.v_bits, v_bits);
            self.st.write(&mut w, t, st);
            self.free_bits = w.free_bits();
            self.t_delta = t_delta;
        }
        self.t = t;
        self.v_bits = v_bits;
        self.num += 1;
        self.buf[..XOR_HEADER_BYTES].copy_from_slice(&self.num.to_be_bytes());
    }

    /// Reopens an existing XorSt chunk to append more samples. The encoding is deterministic, so this
    /// decodes the samples and appends them again: the result has exactly the bytes of appending
    /// everything at once (trailing garbage is dropped).
    pub fn from_bytes(data: &[u8]) -> Result<Self, ChunkError> {
        let mut enc = Self::with_capacity(data.len().max(128));
        for r in XorStIter::new(data) {
            let (t, st, v) = r?;
            enc.append(t, st, v);
        }
        Ok(enc)
    }
}

/// Decodes a XorSt chunk sample by sample without allocating: yields `Ok((t, st, v))`, or one `Err`
/// and then `None` when the bytes are corrupt.
#[derive(Debug, Clone)]
pub struct XorStIter<'a> {
    data: &'a [u8],
    br: BitReader<'a>,
    /// Byte offset of `br`'s start in `data`, for error offsets.
    br_base: usize,
    num_total: u16,
    num_read: u16,
    t: i64,
    v_bits: u64,
    t_delta: u64,
    trailing: u32,
    sig: u32,
    st: StState,
    failed: bool,
}

impl<'a> XorStIter<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        let num_total = data.get(..XOR_HEADER_BYTES).map_or(0, |h| u16::from_be_bytes([h[0], h[1]]));
        Self {
            data,
            br: BitReader::new(&[]),
            br_base: 0,
            num_total,
            num_read: 0,
            t: 0,
            v_bits: 0,
            t_delta: 0,
            trailing: 0,
            sig: 64,
            st: StState::default(),
            // A missing header is reported by the first `next`.
            failed: false,
        }
    }

    /// The sample count the header announces (0 if there is no header).
    pub fn num_samples(&self) -> u16 {
        self.num_total
    }

    #[inline]
    fn truncated(&self) -> ChunkError {
        ChunkError::Truncated { offset: self.br_base + self.br.bit_position() / 8 }
    }

    #[cold]
    fn read_first(&mut self) -> Result<(), ChunkError> {
        let rest = &self.data[XOR_HEADER_BYTES..];
        let (t, rest) = varint::read_varint(rest).map_err(|e| match e {
            varint::VarintError::Overflow => {
                ChunkError::Corrupt { offset: XOR_HEADER_BYTES, reason: "first timestamp varint overflows 64 bits" }
            }
            _ => ChunkError::Truncated { offset: self.data.len() },
        })?;
        let Some(v) = rest.get(..8) else {
            return Err(ChunkError::Truncated { offset: self.data.len() });
        };
        self.t = t;
        self.v_bits = u64::from_be_bytes(v.try_into().expect("8 bytes"));
        self.br_base = self.data.len() - rest.len() + 8;
        self.br = BitReader::new(&self.data[self.br_base..]);
        Ok(())
    }

    #[inline(always)]
    fn read_dod(&mut self) -> Result<(), ChunkError> {
        read_dod_bits(&mut self.br, &mut self.t_delta).ok_or_else(|| self.truncated())?;
        self.t = self.t.wrapping_add(self.t_delta as i64);
        Ok(())
    }

    #[inline(always)]
    fn read_value(&mut self) -> Result<(), ChunkError> {
        read_value_bits(&mut self.br, &mut self.v_bits, &mut self.trailing, &mut self.sig)
            .map(|_| ())
            .map_err(|e| e.at(self.br_base + self.br.bit_position() / 8))
    }

    /// Reads one ST code (see the module docs) and returns the sample's ST.
    #[inline(always)]
    fn read_st(&mut self) -> Result<i64, ChunkError> {
        let t = self.t;
        let st = if !self.br.read_bit().ok_or_else(|| self.truncated())? {
            self.st.predict(self.st.rule, t)
        } else if !self.br.read_bit().ok_or_else(|| self.truncated())? {
            let r = self.br.read_bits(2).ok_or_else(|| self.truncated())? as u8;
            self.st.rule = r;
            self.st.predict(r, t)
        } else {
            // Explicit: a uvarint, one byte per 8 bits, at most 10 bytes.
            let mut x = 0u64;
            let mut shift = 0u32;
            let mut done = false;
            for i in 0..MAX_VARINT_BYTES {
                let b = self.br.read_byte().ok_or_else(|| self.truncated())?;
                if i == MAX_VARINT_BYTES - 1 && b > 1 {
                    break;
                }
                x |= u64::from(b & 0x7f) << shift;
                shift += 7;
                if b < 0x80 {
                    done = true;
                    break;
                }
            }
            if !done {
                return Err(ChunkError::Corrupt {
                    offset: self.br_base + self.br.bit_position() / 8,
                    reason: "explicit start timestamp varint overflows 64 bits",
                });
            }
            t.wrapping_sub(varint::zigzag_decode(x))
        };
        self.st.prev_t = t;
        self.st.prev_st = st;
        Ok(st)
    }

    #[inline(always)]
    fn advance(&mut self) -> Result<i64, ChunkError> {
        if self.num_read == 0 {
            self.read_first()?;
        } else {
            self.read_dod()?;
            self.read_value()?;
        }
        self.read_st()
    }
}

impl Iterator for XorStIter<'_> {
    type Item = Result<(i64, i64, f64), ChunkError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if self.data.len() < XOR_HEADER_BYTES {
            self.failed = true;
            return Some(Err(ChunkError::Truncated { offset: self.data.len() }));
        }
        if self.num_read == self.num_total {
            return None;
        }
        match self.advance() {
            Ok(st) => {
                self.num_read += 1;
                Some(Ok((self.t, st, f64::from_bits(self.v_bits))))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(usize::from(self.num_total - self.num_read) + 1))
    }
}

/// Encodes samples and their start timestamps (0 = unset) into one XorSt chunk. Timestamps must be
/// strictly increasing.
///
/// # Panics
/// If `samples.len() != sts.len()`, or with more than `u16::MAX` samples.
pub fn encode_xor_st(samples: &[Sample], sts: &[i64]) -> Vec<u8> {
    assert_eq!(samples.len(), sts.len(), "encode_xor_st: one start timestamp per sample");
    let mut enc = XorStEncoder::with_capacity(XOR_HEADER_BYTES + 16 + samples.len() * 10);
    for (s, &st) in samples.iter().zip(sts) {
        enc.append(s.t, st, s.v);
    }
    enc.into_bytes()
}

/// Decodes a XorSt chunk, appending the samples with `mint_ms <= t <= maxt_ms` (inclusive) to `out` and
/// their start timestamps to `sts` (same positions); stops at the first sample after `maxt_ms`. On error
/// both vectors are restored to their lengths before the call.
pub fn decode_xor_st_range_into(
    data: &[u8],
    mint_ms: i64,
    maxt_ms: i64,
    out: &mut Vec<Sample>,
    sts: &mut Vec<i64>,
) -> Result<(), ChunkError> {
    let (before, before_st) = (out.len(), sts.len());
    let mut it = XorStIter::new(data);
    let n = usize::from(it.num_samples());
    out.reserve(n);
    sts.reserve(n);
    let res = decode_with(&mut it, mint_ms, maxt_ms, |t, st, v| {
        out.push(Sample { t, v });
        sts.push(st);
    });
    if res.is_err() {
        out.truncate(before);
        sts.truncate(before_st);
    }
    res
}

/// [`decode_xor_st_range_into`] without the start timestamps (what `decode_chunk_range_into` needs).
pub fn decode_xor_st_samples_range_into(
    data: &[u8],
    mint_ms: i64,
    maxt_ms: i64,
    out: &mut Vec<Sample>,
) -> Result<(), ChunkError> {
    let before = out.len();
    let mut it = XorStIter::new(data);
    out.reserve(usize::from(it.num_samples()));
    let res = decode_with(&mut it, mint_ms, maxt_ms, |t, _, v| out.push(Sample { t, v }));
    if res.is_err() {
        out.truncate(before);
    }
    res
}

/// Calls `push(t, st, v)` for every sample with `mint_ms <= t <= maxt_ms`, stopping after `maxt_ms`.
#[inline(always)]
fn decode_with(
    it: &mut XorStIter<'_>,
    mint_ms: i64,
    maxt_ms: i64,
    mut push: impl FnMut(i64, i64, f64),
) -> Result<(), ChunkError> {
    let mut visit = |t: i64, st: i64, v: f64| {
        if t > maxt_ms {
            return true;
        }
        if t >= mint_ms {
            push(t, st, v);
        }
        false
    };
    // The first sample's byte-aligned fields: the iterator's cold path.
    match it.next() {
        None => return Ok(()),
        Some(r) => {
            let (t, st, v) = r?;
            if visit(t, st, v) {
                return Ok(());
            }
        }
    }
    if fast_loop(it, &mut visit)? {
        return Ok(());
    }
    // The last samples, close to the end of the data: bounds-checked reads.
    for r in it {
        let (t, st, v) = r?;
        if visit(t, st, v) {
            break;
        }
    }
    Ok(())
}

/// Decodes samples while at least `FAST_MARGIN` bytes remain, with unchecked-length word loads and the
/// state in locals (as `crate::xor`'s fast loop). `visit` returns true to stop (a sample after the
/// range); then this returns `Ok(true)`. Leaves `it` after the last sample decoded, ready for the
/// iterator's checked path.
#[inline(always)]
fn fast_loop(it: &mut XorStIter<'_>, visit: &mut impl FnMut(i64, i64, f64) -> bool) -> Result<bool, ChunkError> {
    // One sample takes at most 4+64 dod + 2+11+64 value + 2+80 ST bits = 227 bits (29 bytes); loads
    // reach 16 bytes past a bit position.
    const FAST_MARGIN: usize = 48;
    let body = &it.data[it.br_base..];
    if body.len() < FAST_MARGIN {
        return Ok(false);
    }
    let limit = body.len() - FAST_MARGIN;
    let mut pos = it.br.bit_position();
    let (mut t, mut t_delta, mut v_bits, mut trailing, mut sig) = (it.t, it.t_delta, it.v_bits, it.trailing, it.sig);
    let mut st_state = it.st;
    let mut num_read = it.num_read;
    let mut done = false;
    let mut corrupt: Option<&'static str> = None;
    while num_read < it.num_total && (pos >> 3) <= limit {
        // Delta of delta.
        let w = load57(body, pos);
        let ones = (!w).leading_zeros().min(4);
        if ones < 4 {
            let hdr = ones + 1;
            let sz = DOD_BITS[ones as usize];
            let mut bits = ((w << hdr) >> 1) >> (63 - sz);
            let half = (1u64 << sz) >> 1;
            bits = bits.wrapping_sub(u64::from(bits > half) << sz);
            t_delta = t_delta.wrapping_add(bits);
            pos += (hdr + sz) as usize;
        } else {
            t_delta = t_delta.wrapping_add(read_at(body, pos + 4, 64));
            pos += 68;
        }
        t = t.wrapping_add(t_delta as i64);

        // Value.
        let w = load57(body, pos);
        if w >> 63 == 0 {
            pos += 1;
        } else {
            if (w >> 62) & 1 == 1 {
                let leading = ((w >> 57) & 31) as u32;
                let s = ((w >> 51) & 63) as u32;
                let s = s + (u32::from(s == 0) << 6);
                if leading + s > 64 {
                    corrupt = Some("xor leading zeros plus significant bits exceed 64");
                    break;
                }
                sig = s;
                trailing = 64 - leading - s;
                pos += 13;
            } else {
                pos += 2;
            }
            let payload = if sig <= 57 { load57(body, pos) >> (64 - sig) } else { read_at(body, pos, sig) };
            v_bits ^= payload << trailing;
            pos += sig as usize;
        }

        // Start timestamp.
        let w = load57(body, pos);
        let st = if w >> 63 == 0 {
            pos += 1;
            st_state.predict(st_state.rule, t)
        } else if (w >> 62) & 1 == 0 {
            let r = ((w >> 60) & 3) as u8;
            st_state.rule = r;
            pos += 4;
            st_state.predict(r, t)
        } else {
            pos += 2;
            let mut x = 0u64;
            let mut ok = false;
            for i in 0..MAX_VARINT_BYTES as u32 {
                let b = load57(body, pos) >> 56;
                pos += 8;
                if i == MAX_VARINT_BYTES as u32 - 1 && b > 1 {
                    break;
                }
                x |= (b & 0x7f) << (7 * i);
                if b < 0x80 {
                    ok = true;
                    break;
                }
            }
            if !ok {
                corrupt = Some("explicit start timestamp varint overflows 64 bits");
                break;
            }
            t.wrapping_sub(varint::zigzag_decode(x))
        };
        st_state.prev_t = t;
        st_state.prev_st = st;
        num_read += 1;
        if visit(t, st, f64::from_bits(v_bits)) {
            done = true;
            break;
        }
    }
    // Hand the state back so the checked path (or an error report) continues from here.
    let byte = (pos >> 3).min(body.len());
    it.br = BitReader::new(&body[byte..]);
    if byte < body.len() {
        it.br.skip_bits((pos & 7) as u32).expect("pos is inside body");
    }
    it.br_base += byte;
    (it.t, it.t_delta, it.v_bits, it.trailing, it.sig) = (t, t_delta, v_bits, trailing, sig);
    it.st = st_state;
    it.num_read = num_read;
    if let Some(reason) = corrupt {
        it.failed = true;
        return Err(ChunkError::Corrupt { offset: it.br_base, reason });
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(data: &[u8]) -> Result<Vec<(i64, i64, u64)>, ChunkError> {
        XorStIter::new(data).map(|r| r.map(|(t, st, v)| (t, st, v.to_bits()))).collect()
    }

    #[test]
    fn empty_chunk_is_just_the_header() {
        let enc = XorStEncoder::new();
        assert_eq!(enc.bytes(), &[0, 0]);
        assert_eq!(decode(enc.bytes()), Ok(vec![]));
        assert_eq!(decode(&[]), Err(ChunkError::Truncated { offset: 0 }));
    }

    #[test]
    fn each_rule_is_chosen_and_then_costs_one_bit() {
        // Samples 0..2 set the rule up; from sample 3 each must cost exactly dod '0' + value '0' + st '0'.
        for st_of in [
            (|_t: i64, _p: i64| 0i64) as fn(i64, i64) -> i64,
            |_t, _p| 1_000,
            |_t, p| p,
            |t, _p| t - 7,
        ] {
            let mut enc = XorStEncoder::new();
            let mut prev = 0;
            let mut bits = Vec::new();
            for i in 1..20i64 {
                let t = i * 15_000;
                enc.append(t, st_of(t, prev), 1.0);
                prev = t;
                bits.push(enc.bytes().len() * 8 - enc.free_bits as usize);
            }
            for w in bits[3..].windows(2) {
                assert_eq!(w[1] - w[0], 3);
            }
            let got = decode(enc.bytes()).expect("valid");
            let mut prev = 0;
            for (t, st, _) in got {
                assert_eq!(st, st_of(t, prev));
                prev = t;
            }
        }
    }

    #[test]
    fn extreme_values_round_trip() {
        let samples = [
            Sample::new(i64::MIN, 1.0),
            Sample::new(-5, f64::NAN),
            Sample::new(0, tessera_model::STALE_NAN),
            Sample::new(i64::MAX, -0.0),
        ];
        let sts = [i64::MAX, i64::MIN, -1, 0];
        let bytes = encode_xor_st(&samples, &sts);
        let got = decode(&bytes).expect("valid");
        let want: Vec<_> = samples.iter().zip(sts).map(|(s, st)| (s.t, st, s.v.to_bits())).collect();
        assert_eq!(got, want);
        let reopened = XorStEncoder::from_bytes(&bytes).expect("valid");
        assert_eq!(reopened.bytes(), &bytes[..]);
    }

    #[test]
    fn overlong_explicit_varint_is_corrupt() {
        let mut buf = vec![0, 1];
        varint::put_varint(&mut buf, 5);
        buf.extend_from_slice(&1f64.to_bits().to_be_bytes());
        let mut w = BitWriter::resume(&mut buf, 0);
        w.write_bits(0b11, 2);
        w.write_bytes(&[0xff; 11]);
        assert!(matches!(decode(&buf), Err(ChunkError::Corrupt { .. })));
    }
}
