//! Open decimal float chunks: `ChunkEncoding::DecimalOpen` (0x45, Tessera's own), the head's open chunk
//! for a series whose values are exact short decimals (what scrapes mostly send: see [`crate::decimal`]).
//! Appendable one sample at a time like XOR, but it stores each value as the difference of its decimal
//! integer from the previous one's, in a few bits: a noisy CPU counter takes ~2 bytes a sample where XOR
//! takes ~6, so a head holds the same samples of every series in a third of the RAM. A closing chunk is
//! re-encoded as a [`crate::decimal`] chunk (smaller still, but not appendable); this encoding lives in
//! the head's memory only, and remote read converts it to XOR like the others.
//!
//! ```text
//! u16 BE count n │ u8 k │ varint t0 │ bit stream (MSB first, the last byte zero-padded):
//!   sample 0:        value code of zigzag(m₀)
//!   sample i ≥ 1:    time code of (tᵢ - tᵢ₋₁) - (tᵢ₋₁ - tᵢ₋₂)  (t₀ - t₋₁ taken as 0), XOR's buckets:
//!                      0 '0' │ [-8191, 8192] '10' + 14 bits │ [-65535, 65536] '110' + 17 │
//!                      [-524287, 524288] '1110' + 20 │ else '1111' + 64
//!                    value code of zigzag(mᵢ - mᵢ₋₁)
//! value code:        '0' 0 │ '10' + 6 bits │ '110' + 13 │ '1110' + 20 │ '11110' + 32 │ '111110' + 64 │
//!                    '111111' a stale marker (Prometheus' staleness NaN), whose integer is its
//!                    predecessor's (0 for a leading one)
//! ```
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
use crate::xor::{read_dod_bits, write_dod};
use tessera_model::{STALE_NAN, Sample, is_stale_nan};

/// Bytes before the first timestamp: the sample count (u16, big endian) and the exponent `k`.
pub const DECIMAL_OPEN_HEADER_BYTES: usize = 3;

/// Payload bits of the value codes '0', '10', '110', '1110', '11110', '111110'.
const VALUE_BITS: [u32; 6] = [0, 6, 13, 20, 32, 64];
/// The stale marker's code: six ones.
const STALE_CODE: u64 = 0b11_1111;

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
    /// Complete chunk bytes: header, first time, bit stream (last byte zero-padded).
    buf: Vec<u8>,
    /// The last two samples' time difference (a chunk's samples are within one block range of the head,
    /// so a difference above `u32::MAX` ms, 49 days, is refused rather than stored).
    t_delta: u32,
    num: u16,
    k: u8,
    /// Unused low bits in the last byte of `buf`.
    free_bits: u8,
}

impl DecimalAppender {
    /// An empty chunk whose buffer holds `bytes` bytes before it grows.
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(bytes.max(DECIMAL_OPEN_HEADER_BYTES));
        buf.extend_from_slice(&[0, 0, 0]);
        Self { buf, t_delta: 0, num: 0, k: 0, free_bits: 0 }
    }

    /// Number of samples appended (what the header says).
    #[inline]
    pub fn num_samples(&self) -> u16 {
        self.num
    }

    /// The complete chunk bytes; valid after every append.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    /// The chunk's decimal exponent.
    #[inline]
    pub fn exponent(&self) -> u8 {
        self.k
    }

    /// Heap bytes held (the buffer's capacity), for memory accounting.
    #[inline]
    pub fn size_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// The first sample's timestamp, read from the chunk.
    pub fn first_t(&self) -> Option<i64> {
        if self.num == 0 {
            return None;
        }
        varint::read_varint(&self.buf[DECIMAL_OPEN_HEADER_BYTES..]).ok().map(|(t, _)| t)
    }

    /// The timestamp of the sample before the last one (`last_t`, the holder's), when there are two.
    pub fn prev_t(&self, last_t: i64) -> Option<i64> {
        (self.num >= 2).then(|| last_t.wrapping_sub(i64::from(self.t_delta)))
    }

    /// Empties the chunk; a buffer grown past `capacity` bytes is cut back to it.
    pub fn clear_to(&mut self, capacity: usize) {
        self.buf.clear();
        if self.buf.capacity() > capacity {
            self.buf.shrink_to(capacity.max(DECIMAL_OPEN_HEADER_BYTES));
        }
        self.buf.extend_from_slice(&[0, 0, 0]);
        self.t_delta = 0;
        self.num = 0;
        self.k = 0;
        self.free_bits = 0;
    }

    /// Appends `(t, v)` after the chunk's last sample `(last_t, last_bits)` (its time and value bits as
    /// appended; ignored while the chunk is empty) and returns true, or returns false and leaves the chunk
    /// as it was when `v` is not an exact short decimal (a stale marker is), when `t - last_t` is not in
    /// `1..=u32::MAX`, when the chunk is full (`u16::MAX` samples) or when `(last_t, last_bits)` is not
    /// the chunk's last sample. A value needing a larger exponent re-encodes the chunk at it first.
    pub fn append(&mut self, last_t: i64, last_bits: u64, t: i64, v: f64) -> bool {
        if self.num == u16::MAX {
            return false;
        }
        let stale = is_stale_nan(v);
        if self.num == 0 {
            let (k, m) = if stale {
                (0, None)
            } else {
                let Some(k) = decimal_exponent_of(v) else { return false };
                (k, integer_at(v, k, pow10(k)))
            };
            self.k = k;
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
            match integer_at(v, self.k, pow10(self.k)) {
                Some(m) => Some(m),
                None => {
                    // The next exponent at which it is one, as the Decimal encoder searches (so that a
                    // closing chunk always makes a Decimal chunk).
                    let Some(k) = (self.k + 1..=MAX_K).find(|&k| integer_at(v, k, pow10(k)).is_some()) else { return false };
                    if !self.rescale(k) {
                        return false;
                    }
                    m_prev = match self.last_integer(last_bits) {
                        Some(m) => m,
                        None => return false,
                    };
                    integer_at(v, k, pow10(k))
                }
            }
        };
        self.push(Some((delta, m_prev)), t, m);
        true
    }

    /// The chunk's last sample's integer: `last_bits`' at the chunk's exponent, or for a stale marker the
    /// last integer written, read back from the chunk (a series resuming after staleness: rare).
    fn last_integer(&self, last_bits: u64) -> Option<i64> {
        let v = f64::from_bits(last_bits);
        if !is_stale_nan(v) {
            return integer_at(v, self.k, pow10(self.k));
        }
        let mut last = None;
        for_each_integer(&self.buf, |_, m| last = Some(m)).ok()?;
        // A holder whose last sample is not the chunk's is refused.
        last.filter(|&(_, stale)| stale).map(|(m, _)| m)
    }

    /// Re-encodes the chunk at exponent `k` (larger than its own), every value's integer found again at
    /// `k` as the Decimal encoder finds it. False (the chunk unchanged) when some value is no integer
    /// there.
    #[cold]
    fn rescale(&mut self, k: u8) -> bool {
        let mut samples: Vec<(i64, i64, bool)> = Vec::with_capacity(usize::from(self.num));
        let (p_old, p) = (pow10(self.k), pow10(k));
        let (k_old, mut fits, mut m_last) = (self.k, true, 0i64);
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
            return false;
        }
        let cap = self.buf.capacity();
        self.clear_to(cap);
        self.k = k;
        self.buf[2] = k;
        let mut prev: Option<(i64, i64)> = None;
        for (t, m, stale) in samples {
            self.push(prev.map(|(pt, pm)| ((t - pt) as u32, pm)), t, (!stale).then_some(m));
            prev = Some((t, m));
        }
        true
    }

    /// Writes one sample: `prev` = (time since the last sample, the last integer) unless it is the first,
    /// `m` = its integer or `None` for a stale marker.
    fn push(&mut self, prev: Option<(u32, i64)>, t: i64, m: Option<i64>) {
        let m_prev = prev.map_or(0, |(_, m)| m);
        // Exactly the room this sample takes, so that a buffer sized for a chunk's bytes never grows.
        let z = m.map(|m| varint::zigzag_encode(m.wrapping_sub(m_prev)));
        let bits = match prev {
            None => 0,
            Some((delta, _)) => dod_bits(i64::from(delta) - i64::from(self.t_delta)),
        } + z.map_or(6, value_code_bits);
        let bytes = match prev {
            None => varint::varint_len(t) + (bits as usize).div_ceil(8),
            Some(_) => (bits.saturating_sub(u32::from(self.free_bits)) as usize).div_ceil(8),
        };
        if self.buf.capacity() - self.buf.len() < bytes {
            self.buf.reserve_exact(bytes.max(self.buf.len() / 8));
        }
        #[cfg(debug_assertions)]
        let len_before = self.buf.len();
        if prev.is_none() {
            varint::put_varint(&mut self.buf, t);
            self.free_bits = 0;
        }
        let mut w = BitWriter::resume(&mut self.buf, u32::from(self.free_bits));
        if let Some((delta, _)) = prev {
            write_dod(&mut w, i64::from(delta) - i64::from(self.t_delta));
            self.t_delta = delta;
        }
        match z {
            None => w.write_bits(STALE_CODE, 6),
            Some(z) => write_value_code(&mut w, z),
        }
        self.free_bits = w.free_bits() as u8;
        #[cfg(debug_assertions)]
        debug_assert_eq!(self.buf.len() - len_before, bytes, "the room reserved is what the sample took");
        self.num += 1;
        self.buf[..2].copy_from_slice(&self.num.to_be_bytes());
    }
}

/// The value code's bucket for `z`: 0 for zero, else the first whose payload holds it.
#[inline]
fn value_bucket(z: u64) -> usize {
    if z == 0 {
        return 0;
    }
    VALUE_BITS[1..].iter().position(|&b| b == 64 || z < 1u64 << b).expect("the last bucket holds 64 bits") + 1
}

/// Bits of `z`'s value code.
#[inline]
fn value_code_bits(z: u64) -> u32 {
    let b = value_bucket(z);
    if b == 0 { 1 } else { b as u32 + 1 + VALUE_BITS[b] }
}

/// Bits of a time code (XOR's buckets, [`write_dod`]).
#[inline]
fn dod_bits(dod: i64) -> u32 {
    let fits = |n: u32| -(1i64 << (n - 1)) < dod && dod <= 1i64 << (n - 1);
    if dod == 0 {
        1
    } else if fits(14) {
        16
    } else if fits(17) {
        20
    } else if fits(20) {
        24
    } else {
        68
    }
}

#[inline]
fn write_value_code(w: &mut BitWriter<'_>, z: u64) {
    let bucket = value_bucket(z);
    if bucket == 0 {
        w.write_bit(false);
        return;
    }
    let ones = bucket as u32;
    // `ones` ones then a zero ('10', '110', …), except the 64-bit bucket's '111110' which is that too.
    w.write_bits((1u64 << (ones + 1)) - 2, ones + 1);
    w.write_bits(z, VALUE_BITS[bucket]);
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
    let base = data.len() - rest.len();
    let mut br = BitReader::new(rest);
    let at = |br: &BitReader<'_>| base + br.bit_position() / 8;
    let (mut t, mut t_delta, mut m) = (t0, 0u64, 0i64);
    for i in 0..n {
        if i > 0 {
            read_dod_bits(&mut br, &mut t_delta).ok_or_else(|| ChunkError::Truncated { offset: at(&br) })?;
            t = t.wrapping_add(t_delta as i64);
        }
        let code = br.peek_bits(6);
        let ones = (!(code << 58)).leading_zeros();
        let stale = ones == 6;
        if stale {
            br.skip_bits(6).ok_or_else(|| ChunkError::Truncated { offset: at(&br) })?;
        } else {
            br.skip_bits(ones + 1).ok_or_else(|| ChunkError::Truncated { offset: at(&br) })?;
            let z = br.read_bits(VALUE_BITS[ones as usize]).ok_or_else(|| ChunkError::Truncated { offset: at(&br) })?;
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
        // n = 4, k = 2 (1.75 rescaled the chunk from k = 1), t0 = 1000 (zigzag varint d0 0f), then bits:
        // m0 = 150, zigzag 300: '110' + 13 bits  1100000100101100
        // dod 10000: '110' + 17 bits             11000010011100010000
        // +25, zigzag 50: '10' + 6 bits          10110010
        // dod 0 '0', stale '111111'              0111111
        // dod 0 '0', +0 '0'                      00 (then zero padding)
        assert_eq!(a.bytes(), [0x00, 0x04, 0x02, 0xd0, 0x0f, 0xc1, 0x2c, 0xc2, 0x71, 0x0b, 0x27, 0xe0].as_slice(), "{:02x?}", a.bytes());
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
