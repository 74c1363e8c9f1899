//! Open decimal float chunks: `ChunkEncoding::DecimalOpen` (0x45, Tessera's own), the head's open chunk
//! for a series whose values are exact short decimals (what scrapes mostly send: see [`crate::decimal`]).
//! Appendable one sample at a time like XOR, but it stores each value as the difference of its decimal
//! integer from the previous one's, in a few bits: in 16-sample chunks, headers included, a centisecond
//! CPU counter takes 2.8 bytes a sample where XOR takes 6.3, a 2-decimal gauge 2.5 against 6.6, byte and
//! packet counters 2.3–2.4 against 2.8–3.0 (`cargo bench -p tessera-encoding --bench decimal --
//! decimal_open`), so a head holds its series' newest samples in a smaller buffer. A closing chunk is
//! re-encoded as a [`crate::decimal`] chunk (smaller still, but not appendable); this encoding lives in
//! the head's memory only, and remote read converts it to XOR like the others.
//!
//! ```text
//! u16 BE count n │ u8 k │ varint t0 │ uvarint zigzag(m₀) << 1 | 1 if a stale marker │
//! bit stream (MSB first, the last byte zero-padded):
//!   sample i ≥ 1:    time code of (tᵢ - tᵢ₋₁) - (tᵢ₋₁ - tᵢ₋₂)  (t₀ - t₋₁ taken as 0):
//!                      0 '0' │ [-63, 64] '10' + 7 bits │ [-8191, 8192] '110' + 14 │
//!                      [-524287, 524288] '1110' + 20 │ else '1111' + 64   (two's complement)
//!                    value code of z = zigzag(mᵢ - mᵢ₋₁)
//! value code:        '0'  z = 0
//!                    '10' + w bits b: z = b << s, in the current window (s, w)
//!                    '11' + 6 bits s + 6 bits w (64 written as 0) + w bits b: z = b << s, and (s, w)
//!                         is the window from here on (none before the first; s + w ≤ 64)
//!                    '11' + twelve ones: a stale marker (Prometheus' staleness NaN), whose integer is
//!                         its predecessor's (0 for a leading one); the window stays
//! ```
//! The window is the bits a chunk's differences use: a counter's increments keep to a few low bits (a
//! CPU counter's centiseconds ~11, packets ~7), a byte counter's pages above twelve zero bits, so most
//! samples take `2 + w` bits. The appender widens the window to take a difference that does not fit
//! (down to its lowest bit, up to the higher of the two tops unless the window's is 10 bits above the
//! difference's), and narrows it when a difference would fit in 10 bits fewer.
//! A value reads back as `m as f64 / 10^k` (`m as f64` for `k = 0`), the correctly rounded division
//! [`crate::decimal`] uses, and the appender takes a value only when it reads back **bit for bit** so
//! (the same test: `k ≤ 15`, `|m| ≤ 2^53`; NaN, infinities and `-0.0` never qualify). A value that needs
//! a larger `k` than the chunk's re-encodes the chunk at that `k` (the integers scaled, the values the
//! same); one that is no such decimal is refused, and the head carries on in XOR. The count header is
//! XOR's (a reader that is handed the bytes with a smaller count stops there).

use crate::bstream::{BitReader, BitWriter};
use crate::decimal::{MAX_K, MAX_M, integer_at, pow10, value};
use crate::error::ChunkError;
use crate::varint;
use tessera_model::{STALE_NAN, Sample, is_stale_nan};

/// Bytes before the first timestamp: the sample count (u16, big endian) and the exponent `k`.
pub const DECIMAL_OPEN_HEADER_BYTES: usize = 3;

/// The stale marker's code: '11' and twelve ones (a window of shift 63 and width 63, which no
/// difference has).
const STALE_CODE: u64 = (1 << 14) - 1;
/// A window that wastes this many bits above a difference's highest is narrowed (a new window costs 12
/// bits, paid back by the next sample).
const NARROW_BITS: u32 = 10;

/// The smallest decimal exponent at which `v` reads back bit for bit, or `None` (NaN, infinities, `-0.0`,
/// more than 15 decimals or a 54-bit integer).
pub fn decimal_exponent_of(v: f64) -> Option<u8> {
    if !v.is_finite() || (v == 0.0 && v.is_sign_negative()) {
        return None;
    }
    (0..=MAX_K).find(|&k| integer_at(v, k, pow10(k)).is_some())
}

/// Appends float samples to one open decimal chunk, given the chunk's last sample by its holder (as
/// [`crate::XorAppender`]: a head series keeps its last sample anyway). 32 bytes. See the module docs for
/// the format.
#[derive(Debug, Clone)]
pub struct DecimalAppender {
    /// Complete chunk bytes: header, first time, bit stream (last byte zero-padded). The header is the
    /// sample count and the exponent (not kept twice: 32 bytes fit a head series' open-chunk slot).
    buf: Vec<u8>,
    /// The last two samples' time difference (a chunk's samples are within one block range of the head,
    /// so a difference above `u32::MAX` ms, 49 days, is refused rather than stored).
    t_delta: u32,
    /// Unused low bits in the last byte of `buf`.
    free_bits: u8,
    /// The value window: shift and width (0 before the first difference that needs one).
    shift: u8,
    width: u8,
}

impl DecimalAppender {
    /// An empty chunk whose buffer holds `bytes` bytes before it grows.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(bytes.max(DECIMAL_OPEN_HEADER_BYTES));
        buf.extend_from_slice(&[0, 0, 0]);
        Self { buf, t_delta: 0, free_bits: 0, shift: 0, width: 0 }
    }

    /// Number of samples appended (what the header says).
    #[inline]
    pub fn num_samples(&self) -> u16 {
        u16::from_be_bytes([self.buf[0], self.buf[1]])
    }

    /// The complete chunk bytes; valid after every append.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The chunk's decimal exponent.
    #[inline]
    pub fn exponent(&self) -> u8 {
        self.buf[2]
    }

    /// Heap bytes held (the buffer's capacity), for memory accounting.
    #[inline]
    pub fn size_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// The first sample's timestamp, read from the chunk.
    pub fn first_t(&self) -> Option<i64> {
        if self.num_samples() == 0 {
            return None;
        }
        varint::read_varint(&self.buf[DECIMAL_OPEN_HEADER_BYTES..]).ok().map(|(t, _)| t)
    }

    /// The timestamp of the sample before the last one (`last_t`, the holder's), when there are two.
    pub fn prev_t(&self, last_t: i64) -> Option<i64> {
        (self.num_samples() >= 2).then(|| last_t.wrapping_sub(i64::from(self.t_delta)))
    }

    /// Empties the chunk; a buffer grown past `capacity` bytes is cut back to it.
    pub fn clear_to(&mut self, capacity: usize) {
        self.buf.clear();
        if self.buf.capacity() > capacity {
            self.buf.shrink_to(capacity.max(DECIMAL_OPEN_HEADER_BYTES));
        }
        self.buf.extend_from_slice(&[0, 0, 0]);
        self.t_delta = 0;
        self.free_bits = 0;
        self.shift = 0;
        self.width = 0;
    }

    /// Appends `(t, v)` after the chunk's last sample `(last_t, last_bits)` (its time and value bits as
    /// appended; ignored while the chunk is empty) and returns true, or returns false and leaves the chunk
    /// as it was when `v` is not an exact short decimal (a stale marker is), when `t - last_t` is not in
    /// `1..=u32::MAX`, when the chunk is full (`u16::MAX` samples) or when `last_bits` is a stale marker
    /// and the chunk's last sample is not. A value needing a larger exponent re-encodes the chunk at it
    /// first. `(last_t, last_bits)` must be the chunk's last sample (as for [`crate::XorAppender`]).
    pub fn append(&mut self, last_t: i64, last_bits: u64, t: i64, v: f64) -> bool {
        if self.num_samples() == u16::MAX {
            return false;
        }
        let stale = is_stale_nan(v);
        if self.num_samples() == 0 {
            let (k, m) = if stale {
                (0, None)
            } else {
                let Some(k) = decimal_exponent_of(v) else { return false };
                (k, integer_at(v, k, pow10(k)))
            };
            self.buf[2] = k;
            self.push(None, t, m);
            return true;
        }
        let Ok(delta) = u32::try_from(t.wrapping_sub(last_t)) else { return false };
        if delta == 0 {
            return false;
        }
        let Some(mut m_prev) = self.last_integer(last_bits) else { return false };
        let m = if stale {
            None
        } else {
            match integer_at(v, self.exponent(), pow10(self.exponent())) {
                Some(m) => Some(m),
                None => {
                    // The next exponent at which it is one, as the Decimal encoder searches (so that a
                    // closing chunk always makes a Decimal chunk).
                    let Some(k) = (self.exponent() + 1..=MAX_K).find(|&k| integer_at(v, k, pow10(k)).is_some()) else { return false };
                    // The last sample's integer at `k` comes back from the re-encoding.
                    let Some(m_last) = self.rescale(k) else { return false };
                    m_prev = m_last;
                    integer_at(v, k, pow10(k))
                }
            }
        };
        self.push(Some((delta, m_prev)), t, m);
        true
    }

    /// The chunk's last sample's integer: `last_bits`' at the chunk's exponent, or for a stale marker the
    /// last integer written, read back from the chunk (a series resuming after staleness: rare). The
    /// value was checked when it was appended (or re-encoded) at this exponent, so rounding it again
    /// finds the same integer without the check's division (the holder vouches that it is the chunk's
    /// last sample, as for XOR; the head asserts it in debug builds).
    fn last_integer(&self, last_bits: u64) -> Option<i64> {
        let v = f64::from_bits(last_bits);
        if !is_stale_nan(v) {
            let k = self.exponent();
            let m = if k == 0 { v } else { (v * pow10(k)).round() };
            return (m.is_finite() && m.abs() <= MAX_M).then_some(m as i64);
        }
        let mut last = None;
        for_each_integer(&self.buf, |_, m| last = Some(m)).ok()?;
        // A holder whose last sample is not the chunk's is refused.
        last.filter(|&(_, stale)| stale).map(|(m, _)| m)
    }

    /// Re-encodes the chunk at exponent `k` (larger than its own), every value's integer found again at
    /// `k` as the Decimal encoder finds it, and returns the last sample's integer (a stale marker's is its
    /// predecessor's). `None` (the chunk unchanged) when some value is no integer there.
    #[cold]
    fn rescale(&mut self, k: u8) -> Option<i64> {
        let mut samples: Vec<(i64, i64, bool)> = Vec::with_capacity(usize::from(self.num_samples()));
        let k_old = self.exponent();
        let (p_old, p) = (pow10(k_old), pow10(k));
        let (mut fits, mut m_last) = (true, 0i64);
        if for_each_integer(&self.buf, |t, (m, stale)| {
            if !stale {
                match integer_at(value(m, k_old, p_old), k, p) {
                    Some(m) => m_last = m,
                    None => fits = false,
                }
            }
            samples.push((t, m_last, stale));
        })
        .is_err()
            || !fits
        {
            return None;
        }
        let cap = self.buf.capacity();
        self.clear_to(cap);
        self.buf[2] = k;
        let mut prev: Option<(i64, i64)> = None;
        for (t, m, stale) in samples {
            self.push(prev.map(|(pt, pm)| ((t - pt) as u32, pm)), t, (!stale).then_some(m));
            prev = Some((t, m));
        }
        Some(m_last)
    }

    /// Writes one sample: `prev` = (time since the last sample, the last integer) unless it is the first,
    /// `m` = its integer or `None` for a stale marker.
    fn push(&mut self, prev: Option<(u32, i64)>, t: i64, m: Option<i64>) {
        let Some((delta, m_prev)) = prev else {
            // The first sample: whole bytes, its value outside the window (differences fill that).
            let v0 = m.map_or(1, |m| varint::zigzag_encode(m) << 1);
            let bytes = varint::varint_len(t) + varint::uvarint_len(v0);
            if self.buf.capacity() - self.buf.len() < bytes {
                self.buf.reserve_exact(bytes);
            }
            varint::put_varint(&mut self.buf, t);
            varint::put_uvarint(&mut self.buf, v0);
            self.free_bits = 0;
            self.buf[..2].copy_from_slice(&1u16.to_be_bytes());
            return;
        };
        let code = match m {
            None => ValueCode::Stale,
            Some(m) => ValueCode::of(varint::zigzag_encode(m.wrapping_sub(m_prev)), self.shift, self.width),
        };
        // Exactly the room this sample takes, so that a buffer sized for a chunk's bytes never grows.
        let bits = dod_bits(i64::from(delta) - i64::from(self.t_delta)) + code.bits(self.width);
        let bytes = (bits.saturating_sub(u32::from(self.free_bits)) as usize).div_ceil(8);
        if self.buf.capacity() - self.buf.len() < bytes {
            self.buf.reserve_exact(bytes.max(self.buf.len() / 8));
        }
        #[cfg(debug_assertions)]
        let len_before = self.buf.len();
        let mut w = BitWriter::resume(&mut self.buf, u32::from(self.free_bits));
        write_dod(&mut w, i64::from(delta) - i64::from(self.t_delta));
        self.t_delta = delta;
        match code {
            ValueCode::Zero => w.write_bit(false),
            ValueCode::Stale => w.write_bits(STALE_CODE, 14),
            ValueCode::Fit(b) => {
                w.write_bits(0b10, 2);
                w.write_bits(b, u32::from(self.width));
            }
            ValueCode::New { shift, width, b } => {
                w.write_bits(0b11 << 12 | u64::from(shift) << 6 | u64::from(width & 63), 14);
                w.write_bits(b, u32::from(width));
                (self.shift, self.width) = (shift, width);
            }
        }
        self.free_bits = w.free_bits() as u8;
        #[cfg(debug_assertions)]
        debug_assert_eq!(self.buf.len() - len_before, bytes, "the room reserved is what the sample took");
        let n = self.num_samples() + 1;
        self.buf[..2].copy_from_slice(&n.to_be_bytes());
    }
}

/// How one value is written (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ValueCode {
    Zero,
    Stale,
    /// In the current window: `z >> shift`.
    Fit(u64),
    /// A new window and `z >> shift`.
    New { shift: u8, width: u8, b: u64 },
}

impl ValueCode {
    /// The code for `z` given the window `(shift, width)`: in it when it fits and is not 10 bits too
    /// wide, else a new window (see below).
    #[inline]
    fn of(z: u64, shift: u8, width: u8) -> ValueCode {
        if z == 0 {
            return ValueCode::Zero;
        }
        let (lo, hi) = (z.trailing_zeros(), 64 - z.leading_zeros());
        let (s, w) = (u32::from(shift), u32::from(width));
        if lo >= s && hi <= s + w {
            if w < hi - s + NARROW_BITS {
                return ValueCode::Fit(z >> s);
            }
            // Too wide: narrowed to the bits up to z's highest.
            return ValueCode::New { shift, width: (hi - s) as u8, b: z >> s };
        }
        // Down to z's lowest bit (a counter's odd increment puts the window at bit 0 for good), up to the
        // higher of z's and the window's top, unless the window's is 10 bits above z's.
        let s2 = if w == 0 { lo } else { lo.min(s) };
        let hi2 = if w == 0 || s + w < hi + NARROW_BITS { hi.max(s + w) } else { hi };
        ValueCode::New { shift: s2 as u8, width: (hi2 - s2) as u8, b: z >> s2 }
    }

    /// Bits the code takes with the current window width.
    #[inline]
    fn bits(self, width: u8) -> u32 {
        match self {
            ValueCode::Zero => 1,
            ValueCode::Stale => 14,
            ValueCode::Fit(_) => 2 + u32::from(width),
            ValueCode::New { width, .. } => 14 + u32::from(width),
        }
    }
}

/// Bits of a time code.
#[inline]
fn dod_bits(dod: i64) -> u32 {
    match dod_bucket(dod) {
        0 => 1,
        1 => 2 + 7,
        2 => 3 + 14,
        3 => 4 + 20,
        _ => 4 + 64,
    }
}

/// Whether `x` fits `n` bits of two's complement the way the time codes take them: [-(2^(n-1) - 1),
/// 2^(n-1)] (the most negative value reads back as the most positive).
#[inline]
fn fits(x: i64, n: u32) -> bool {
    let half = 1i64 << (n - 1);
    -(half - 1) <= x && x <= half
}

#[inline]
fn dod_bucket(dod: i64) -> u8 {
    if dod == 0 {
        0
    } else if fits(dod, 7) {
        1
    } else if fits(dod, 14) {
        2
    } else if fits(dod, 20) {
        3
    } else {
        4
    }
}

/// Writes a time code (see the module docs).
#[inline]
fn write_dod(w: &mut BitWriter<'_>, dod: i64) {
    let d = dod as u64;
    match dod_bucket(dod) {
        0 => w.write_bit(false),
        1 => w.write_bits(0b10 << 7 | (d & 0x7f), 9),
        2 => w.write_bits(0b110 << 14 | (d & 0x3fff), 17),
        3 => w.write_bits(0b1110 << 20 | (d & 0xf_ffff), 24),
        _ => {
            w.write_bits(0b1111, 4);
            w.write_bits(d, 64);
        }
    }
}

/// Reads a time code into `t_delta`.
#[inline]
fn read_dod(br: &mut BitReader<'_>, t_delta: &mut u64) -> Option<()> {
    let ones = (!(br.peek_bits(4) << 60)).leading_zeros();
    br.skip_bits((ones + 1).min(4))?;
    let size = [0, 7, 14, 20, 64][ones as usize];
    if size == 0 {
        return Some(());
    }
    let mut bits = br.read_bits(size)?;
    if size < 64 && bits > 1 << (size - 1) {
        bits = bits.wrapping_sub(1 << size);
    }
    *t_delta = t_delta.wrapping_add(bits);
    Some(())
}

/// Walks an open decimal chunk: `f(t, (m, stale))` for every sample the header counts, in order. Checks
/// everything (the count, the exponent, every read, `|m| ≤ 2^53`): corrupt bytes give an error, never a
/// panic; samples before the damage may have been visited.
fn for_each_integer(data: &[u8], mut f: impl FnMut(i64, (i64, bool))) -> Result<u8, ChunkError> {
    let Some(h) = data.get(..DECIMAL_OPEN_HEADER_BYTES) else {
        return if data.len() >= 2 && data[..2] == [0, 0] { Ok(0) } else { Err(ChunkError::Truncated { offset: data.len() }) };
    };
    let n = u16::from_be_bytes([h[0], h[1]]);
    let k = h[2];
    if k > MAX_K {
        return Err(crate::dense::corrupt(2, "decimal exponent above 15"));
    }
    if n == 0 {
        return Ok(k);
    }
    let (t0, rest) = varint::read_varint(&data[DECIMAL_OPEN_HEADER_BYTES..])
        .map_err(|_| ChunkError::Truncated { offset: DECIMAL_OPEN_HEADER_BYTES })?;
    let (v0, rest) = varint::read_uvarint(rest).map_err(|_| ChunkError::Truncated { offset: data.len() - rest.len() })?;
    let base = data.len() - rest.len();
    let (mut t, mut t_delta, mut m) = (t0, 0u64, varint::zigzag_decode(v0 >> 1));
    if m.unsigned_abs() > MAX_M as u64 {
        return Err(crate::dense::corrupt(base - 1, "decimal integer above 2^53"));
    }
    f(t, (m, v0 & 1 == 1));
    let mut br = BitReader::new(rest);
    let at = |br: &BitReader<'_>| base + br.bit_position() / 8;
    let (mut shift, mut width) = (0u32, 0u32);
    let truncated = |br: &BitReader<'_>| ChunkError::Truncated { offset: at(br) };
    for _ in 1..n {
        read_dod(&mut br, &mut t_delta).ok_or_else(|| truncated(&br))?;
        t = t.wrapping_add(t_delta as i64);
        let mut stale = false;
        let code = br.peek_bits(2);
        let z = if code < 0b10 {
            br.skip_bits(1).ok_or_else(|| truncated(&br))?;
            0
        } else {
            br.skip_bits(2).ok_or_else(|| truncated(&br))?;
            if code == 0b11 {
                let sw = br.read_bits(12).ok_or_else(|| truncated(&br))? as u32;
                if sw == 0xfff {
                    stale = true;
                } else {
                    (shift, width) = (sw >> 6, if sw & 63 == 0 { 64 } else { sw & 63 });
                    if shift + width > 64 {
                        return Err(crate::dense::corrupt(at(&br), "value window past 64 bits"));
                    }
                }
            }
            if stale { 0 } else { br.read_bits(width).ok_or_else(|| truncated(&br))? << shift }
        };
        if !stale {
            m = m.wrapping_add(varint::zigzag_decode(z));
            if m.unsigned_abs() > MAX_M as u64 {
                return Err(crate::dense::corrupt(at(&br), "decimal integer above 2^53"));
            }
        }
        f(t, (m, stale));
    }
    Ok(k)
}

/// The sample count an open decimal chunk's header claims.
pub fn decimal_open_sample_count(data: &[u8]) -> Option<u64> {
    data.get(..2).map(|h| u64::from(u16::from_be_bytes([h[0], h[1]])))
}

/// Decodes the samples with `mint_ms <= t <= maxt_ms` of an open decimal chunk, appending them to `out`;
/// on error `out` is left as it was.
pub fn decode_decimal_open_range_into(data: &[u8], mint_ms: i64, maxt_ms: i64, out: &mut Vec<Sample>) -> Result<(), ChunkError> {
    let before = out.len();
    let k = data.get(2).copied().unwrap_or(0).min(MAX_K);
    let p = pow10(k);
    if let Some(n) = decimal_open_sample_count(data) {
        out.reserve(n as usize);
    }
    let r = for_each_integer(data, |t, (m, stale)| {
        if t >= mint_ms && t <= maxt_ms {
            out.push(Sample { t, v: if stale { STALE_NAN } else { value(m, k, p) } });
        }
    });
    if r.is_err() {
        out.truncate(before);
    }
    r.map(|_| ())
}

/// Decodes every sample of an open decimal chunk.
pub fn decode_decimal_open_into(data: &[u8], out: &mut Vec<Sample>) -> Result<(), ChunkError> {
    decode_decimal_open_range_into(data, i64::MIN, i64::MAX, out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn append_all(samples: &[Sample]) -> Option<DecimalAppender> {
        let mut a = DecimalAppender::with_capacity(8);
        let (mut lt, mut lb) = (i64::MIN, 0u64);
        for s in samples {
            if !a.append(lt, lb, s.t, s.v) {
                return None;
            }
            (lt, lb) = (s.t, s.v.to_bits());
        }
        Some(a)
    }

    fn decoded(data: &[u8]) -> Vec<Sample> {
        let mut out = Vec::new();
        decode_decimal_open_into(data, &mut out).expect("decodes");
        out
    }

    fn bits(s: &[Sample]) -> Vec<(i64, u64)> {
        s.iter().map(|s| (s.t, s.v.to_bits())).collect()
    }

    #[test]
    fn golden_bytes_of_a_counter_with_a_stale_marker() {
        let s = [
            Sample { t: 1000, v: 1.5 },
            Sample { t: 11_000, v: 1.75 },
            Sample { t: 21_000, v: STALE_NAN },
            Sample { t: 31_000, v: 1.75 },
        ];
        let a = append_all(&s).expect("decimals");
        assert_eq!(a.exponent(), 2);
        // n = 4, k = 2 (1.75 rescaled the chunk from k = 1), t0 = 1000 (zigzag varint d0 0f), m0 = 150
        // (zigzag 300, shifted: 600 = uvarint d8 04), then bits:
        // dod 10000: '1110' + 20 bits                                    1110 00000010011100010000
        // +25, z = 50 = 25 << 1: a new window (shift 1, width 5)         11 000001 000101 11001
        // dod 0, a stale marker                                          0 11111111111111
        // dod 0, +0                                                      0 0 (then zero padding)
        assert_eq!(
            a.bytes(),
            [0x00, 0x04, 0x02, 0xd0, 0x0f, 0xd8, 0x04, 0xe0, 0x27, 0x10, 0xc1, 0x17, 0x2f, 0xff, 0xc0].as_slice(),
            "{:02x?}",
            a.bytes()
        );
        assert_eq!(bits(&decoded(a.bytes())), bits(&s));
    }

    #[test]
    fn a_value_with_more_decimals_rescales_the_chunk_and_others_are_refused() {
        let s = [Sample { t: 1, v: 3.0 }, Sample { t: 2, v: 0.5 }, Sample { t: 3, v: 0.25 }, Sample { t: 4, v: 7.0 }];
        let a = append_all(&s).expect("decimals");
        assert_eq!(a.exponent(), 2);
        assert_eq!(bits(&decoded(a.bytes())), bits(&s));
        let mut b = a.clone();
        for v in [f64::NAN, f64::INFINITY, -0.0, 0.1 + 0.2, 1e300] {
            assert!(!b.append(4, 7f64.to_bits(), 5, v), "{v}");
            assert_eq!(b.bytes(), a.bytes());
        }
        // A gap above u32::MAX ms, a time not after the last, a last sample not the chunk's: refused.
        assert!(!b.append(4, 7f64.to_bits(), 4 + (1 << 32), 1.0));
        assert!(!b.append(4, 7f64.to_bits(), 4, 1.0));
        assert!(!b.append(4, STALE_NAN.to_bits(), 5, 1.0));
        assert_eq!(b.bytes(), a.bytes());
        // A rescale that would pass 2^53 is refused too.
        let mut c = append_all(&[Sample { t: 1, v: 9_000_000_000_000_000.0 }]).expect("integer");
        assert!(!c.append(1, 9_000_000_000_000_000f64.to_bits(), 2, 0.5));
        assert_eq!(c.num_samples(), 1);
    }

    #[test]
    fn the_appender_is_32_bytes() {
        // A head series holds one in its open-chunk slot beside XOR's 40-byte appender.
        assert!(std::mem::size_of::<DecimalAppender>() <= 32, "{}", std::mem::size_of::<DecimalAppender>());
    }

    #[test]
    fn windows_fit_counters_widen_for_what_does_not_fit_and_narrow_after_a_spike() {
        // A CPU counter's centiseconds: increments 300..900, z 600..1800 (11 bits): 2 + 11 bits a value.
        let c = |z: u64| ValueCode::of(z, 0, 11);
        assert_eq!(c(1500), ValueCode::Fit(1500));
        assert_eq!(c(0), ValueCode::Zero);
        // Bytes in 4 KiB pages: z = 8192 j keeps 13 low zero bits.
        assert_eq!(ValueCode::of(8192 * 37, 13, 6), ValueCode::Fit(37));
        // Not fitting: widened to hold both.
        assert_eq!(ValueCode::of(8192 * 37 + 2, 13, 6), ValueCode::New { shift: 1, width: 18, b: (8192 * 37 + 2) >> 1 });
        assert_eq!(ValueCode::of(1 << 20, 0, 11), ValueCode::New { shift: 0, width: 21, b: 1 << 20 });
        // A spike widened the window to 40 bits: the next small difference narrows it.
        assert_eq!(ValueCode::of(1500, 0, 40), ValueCode::New { shift: 0, width: 11, b: 1500 });
        // Far above a small window: up to it.
        assert_eq!(ValueCode::of(1 << 40, 0, 11), ValueCode::New { shift: 0, width: 41, b: 1 << 40 });
        // Below a window far above: the window's top comes down to the difference's.
        assert_eq!(ValueCode::of(3, 2, 40), ValueCode::New { shift: 0, width: 2, b: 3 });
        // The stale code is no window a difference gets.
        assert_eq!(ValueCode::of(1 << 63, 0, 0), ValueCode::New { shift: 63, width: 1, b: 1 });
        assert_eq!(ValueCode::of(u64::MAX, 0, 0), ValueCode::New { shift: 0, width: 64, b: u64::MAX });
    }

    #[test]
    fn prev_and_first_times_and_a_shorter_count_stop_the_reader() {
        let s: Vec<Sample> = (0..10).map(|i| Sample { t: 5_000 + i * 10_000 + (i % 3), v: i as f64 * 0.01 }).collect();
        let a = append_all(&s).expect("decimals");
        assert_eq!(a.first_t(), Some(5_000));
        assert_eq!(a.prev_t(s[9].t), Some(s[8].t));
        let mut b = a.bytes().to_vec();
        b[..2].copy_from_slice(&9u16.to_be_bytes());
        assert_eq!(bits(&decoded(&b)), bits(&s[..9]));
        let mut out = Vec::new();
        decode_decimal_open_range_into(a.bytes(), s[2].t, s[4].t, &mut out).expect("decodes");
        assert_eq!(bits(&out), bits(&s[2..=4]));
    }

    #[test]
    fn corrupt_bytes_are_errors_not_panics() {
        let s: Vec<Sample> = (0..30).map(|i| Sample { t: i * 1000, v: (i * i) as f64 }).collect();
        let a = append_all(&s).expect("decimals");
        for cut in 0..a.bytes().len() {
            let mut out = vec![Sample { t: 0, v: 0.0 }];
            let r = decode_decimal_open_into(&a.bytes()[..cut], &mut out);
            assert!(r.is_err(), "cut {cut}");
            assert_eq!(out.len(), 1, "cut {cut}: out left as it was");
        }
        let mut bad = a.bytes().to_vec();
        bad[2] = 16;
        assert!(decode_decimal_open_into(&bad, &mut Vec::new()).is_err());
    }

    fn value_strategy() -> impl Strategy<Value = f64> {
        prop_oneof![
            4 => (0i64..1_000_000, 0u32..4).prop_map(|(m, k)| m as f64 / 10f64.powi(k as i32)),
            1 => (-(1i64 << 53)..=(1i64 << 53)).prop_map(|m| m as f64),
            1 => Just(STALE_NAN),
            1 => any::<f64>(),
            1 => (0i64..1000, 0u32..16).prop_map(|(m, k)| m as f64 / 10f64.powi(k as i32)),
        ]
    }

    proptest! {
        #[test]
        fn what_is_appended_reads_back_bit_for_bit(
            steps in proptest::collection::vec((1i64..100_000, value_strategy()), 1..150),
        ) {
            let mut a = DecimalAppender::with_capacity(40);
            let mut kept: Vec<Sample> = Vec::new();
            let (mut lt, mut lb) = (i64::MIN, 0u64);
            let mut t = 1_795_449_600_000i64;
            for (dt, v) in steps {
                t += dt;
                let before = a.bytes().to_vec();
                if a.append(lt, lb, t, v) {
                    kept.push(Sample { t, v });
                    (lt, lb) = (t, v.to_bits());
                } else {
                    // Refused exactly when the samples with it would not make a Decimal chunk either (no
                    // exact short decimal, or an integer past 2^53 at the exponent they need); never a stale
                    // marker. The chunk is as it was.
                    prop_assert!(!is_stale_nan(v), "{}", v);
                    let mut with = kept.clone();
                    with.push(Sample { t, v });
                    prop_assert!(crate::encode_decimal(&with).is_none(), "{}", v);
                    prop_assert_eq!(a.bytes(), &before[..]);
                }
                prop_assert_eq!(bits(&decoded(a.bytes())), bits(&kept));
                prop_assert_eq!(usize::from(a.num_samples()), kept.len());
            }
            // What a closing chunk becomes: a Decimal chunk of the same samples.
            if !kept.is_empty() {
                let d = crate::encode_decimal(&kept).expect("every open decimal chunk is a Decimal chunk");
                let mut back = Vec::new();
                crate::decode_decimal_into(&d, &mut back).expect("decodes");
                prop_assert_eq!(bits(&back), bits(&kept));
            }
        }

        #[test]
        fn any_bytes_decode_or_fail_without_panic(data in proptest::collection::vec(any::<u8>(), 0..200)) {
            let mut out = Vec::new();
            let _ = decode_decimal_open_into(&data, &mut out);
        }
    }
}
