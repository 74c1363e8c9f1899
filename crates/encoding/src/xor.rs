//! Prometheus' XOR float chunk (`chunkenc.EncXOR`), byte for byte.
//!
//! Layout (mirrors `tsdb/chunkenc/xor.go`, `xorAppender.Append` / `xorIterator.Next`):
//! ```text
//! ┌──────────────────┬───────────────┬──────────────┬──────────────────┬──────────────────────────────┐
//! │ count: u16 (BE)  │ t0: varint    │ v0: 64 bits  │ t1-t0: uvarint   │ v1: xor │ then per sample:    │
//! │                  │ (zig-zag)     │ (raw f64)    │                  │         │ dod bucket, v: xor  │
//! └──────────────────┴───────────────┴──────────────┴──────────────────┴──────────────────────────────┘
//! delta of delta (dod = (tₙ-tₙ₋₁) - (tₙ₋₁-tₙ₋₂)):
//!   0                          '0'
//!   in [-8191, 8192]           '10'   + 14 bits two's complement
//!   in [-65535, 65536]         '110'  + 17 bits
//!   in [-524287, 524288]       '1110' + 20 bits
//!   otherwise                  '1111' + 64 bits
//! value (x = bits(vₙ) ^ bits(vₙ₋₁)):
//!   x == 0                                   '0'
//!   fits the previous leading/trailing window '10' + (64-lead-trail) bits of x>>trail
//!   otherwise                                 '11' + lead (5 bits, capped at 31) + sigbits (6 bits,
//!                                             64 written as 0) + sigbits bits of x>>trail
//! ```
//! Bits are MSB first ([`crate::bstream`]); the last byte is zero-padded.
//!
//! [`XorEncoder`] owns its chunk bytes and keeps them complete after every append (the header count is
//! rewritten in place), so [`XorEncoder::bytes`] can be handed out at any time. [`XorIter`] decodes without
//! allocating; [`decode_xor_into`] is the bulk path PromQL and the compactor use.
//!
//! Key decision: the decoder treats its input as untrusted. Every read is bounds-checked through
//! [`BitReader`], which reports running out of data instead of panicking, and the loop is bounded by the
//! header's sample count, so a corrupt chunk ends in a [`ChunkError`], never a panic or a hang.

use crate::bstream::{BitReader, BitWriter};
use crate::error::ChunkError;
use crate::varint;
use tessera_model::Sample;

/// Bytes of the sample-count header.
pub const XOR_HEADER_BYTES: usize = 2;
/// Most bytes one appended sample adds to the stream (the first: a 10-byte varint time and 8 value bytes;
/// later ones at most 68 bits of time and 77 of value), with room to spare: the encoder makes sure this
/// much is free before appending, so it grows its buffer in its own steps.
pub const SAMPLE_BYTES_MAX: usize = 24;

/// Sentinel for "no leading/trailing window chosen yet" (Prometheus uses 0xff too).
pub(crate) const NO_WINDOW: u8 = 0xff;

/// Appends float samples to one XOR chunk, given the chunk's last sample by its holder: the encoder's
/// state but the last sample's time and value (16 bytes), for a holder that keeps those anyway (a head
/// series keeps its last sample to judge the next one, and holds one open chunk). [`XorEncoder`] is this
/// with the last sample kept inside. See the module docs for the format.
#[derive(Debug, Clone)]
pub struct XorAppender {
    /// Complete chunk bytes: header then bit stream, last byte zero-padded.
    buf: Vec<u8>,
    /// Unused low bits in the last byte of `buf`.
    free_bits: u32,
    num: u16,
    t_delta: u64,
    leading: u8,
    trailing: u8,
}

impl Default for XorAppender {
    fn default() -> Self {
        Self::new()
    }
}

impl XorAppender {
    /// An empty chunk (2 header bytes saying 0 samples).
    pub fn new() -> Self {
        Self::with_capacity(128)
    }

    /// An empty chunk whose buffer can hold `bytes` bytes before growing (the header included).
    pub fn with_capacity(bytes: usize) -> Self {
        let mut buf = Vec::with_capacity(bytes.max(XOR_HEADER_BYTES));
        buf.extend_from_slice(&[0, 0]);
        Self { buf, free_bits: 0, num: 0, t_delta: 0, leading: NO_WINDOW, trailing: 0 }
    }

    /// Number of samples appended (what the header says).
    #[inline]
    pub fn num_samples(&self) -> u16 {
        self.num
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

    /// Bits used, header included (the last byte's zero padding excluded).
    #[inline]
    pub fn bit_len(&self) -> usize {
        self.buf.len() * 8 - self.free_bits as usize
    }

    /// The first sample's timestamp, read from the chunk's header (not kept in a field: the head holds
    /// one encoder per series and knows its chunk's start anyway).
    pub fn first_t(&self) -> Option<i64> {
        if self.num == 0 {
            return None;
        }
        varint::read_varint(&self.buf[XOR_HEADER_BYTES..]).ok().map(|(t, _)| t)
    }

    /// The timestamp of the sample before the last one (`last_t`, the holder's), when there are two.
    pub fn prev_t(&self, last_t: i64) -> Option<i64> {
        (self.num >= 2).then(|| last_t.wrapping_sub(self.t_delta as i64))
    }

    /// Heap bytes held (the buffer's capacity), for memory accounting.
    #[inline]
    pub fn size_bytes(&self) -> usize {
        self.buf.capacity()
    }

    /// Empties the chunk, keeping a buffer of about its size (an eighth and [`SAMPLE_BYTES_MAX`] more) for
    /// the next chunk: the head reuses one encoder per series, and a series' chunks are mostly of one size.
    pub fn clear_fitted(&mut self) {
        let fit = self.buf.len() + self.buf.len() / 8 + SAMPLE_BYTES_MAX;
        if self.buf.capacity() > fit {
            self.buf.shrink_to(fit);
        }
        self.clear();
    }

    /// Empties the chunk, keeping the buffer's capacity for reuse.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.buf.extend_from_slice(&[0, 0]);
        self.free_bits = 0;
        self.num = 0;
        self.t_delta = 0;
        self.leading = NO_WINDOW;
        self.trailing = 0;
    }

    /// Appends one sample after the chunk's last one, `(last_t, last_bits)` (its time and value bits as
    /// appended; ignored while the chunk is empty). The caller guarantees `t` is greater than `last_t`
    /// (the format itself survives any order, but readers rely on it).
    ///
    /// # Panics
    /// If the chunk already holds `u16::MAX` samples ([`XorAppender::is_full`]); callers cut chunks long
    /// before that (Prometheus at 120 samples).
    #[inline]
    pub fn append(&mut self, last_t: i64, last_bits: u64, t: i64, v: f64) {
        assert!(self.num < u16::MAX, "XOR chunk full: the sample count header is a u16");
        if self.buf.capacity() - self.buf.len() < SAMPLE_BYTES_MAX {
            self.grow();
        }
        let v_bits = v.to_bits();
        match self.num {
            0 => {
                // The header is 2 whole bytes, so the stream is byte aligned here.
                varint::put_varint(&mut self.buf, t);
                self.buf.extend_from_slice(&v_bits.to_be_bytes());
                self.free_bits = 0;
                self.t_delta = 0;
            }
            1 => {
                // Still byte aligned: the first sample is whole bytes.
                let t_delta = t.wrapping_sub(last_t) as u64;
                varint::put_uvarint(&mut self.buf, t_delta);
                self.free_bits = 0;
                self.t_delta = t_delta;
                let mut w = BitWriter::resume(&mut self.buf, 0);
                write_value(&mut w, &mut self.leading, &mut self.trailing, last_bits, v_bits);
                self.free_bits = w.free_bits();
            }
            _ => {
                let t_delta = t.wrapping_sub(last_t) as u64;
                let dod = t_delta.wrapping_sub(self.t_delta) as i64;
                let mut w = BitWriter::resume(&mut self.buf, self.free_bits);
                write_dod(&mut w, dod);
                write_value(&mut w, &mut self.leading, &mut self.trailing, last_bits, v_bits);
                self.free_bits = w.free_bits();
                self.t_delta = t_delta;
            }
        }
        self.num += 1;
        self.buf[..XOR_HEADER_BYTES].copy_from_slice(&self.num.to_be_bytes());
    }

    /// Room for at least one more sample, growing the buffer by an eighth (at least 32 bytes) instead of
    /// doubling it: a head holds one open chunk per series, and doubling left up to half of every
    /// series' buffer unused.
    #[cold]
    fn grow(&mut self) {
        self.buf.reserve_exact((self.buf.len() / 8).max(32).max(SAMPLE_BYTES_MAX));
    }
}

/// Appends float samples to one XOR chunk: an [`XorAppender`] that keeps the last sample itself. See
/// the module docs for the format.
#[derive(Debug, Clone)]
pub struct XorEncoder {
    a: XorAppender,
    t: i64,
    v_bits: u64,
}

impl Default for XorEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl XorEncoder {
    /// An empty chunk (2 header bytes saying 0 samples).
    pub fn new() -> Self {
        Self::with_capacity(128)
    }

    /// An empty chunk whose buffer can hold `bytes` bytes before growing (the header included).
    pub fn with_capacity(bytes: usize) -> Self {
        Self { a: XorAppender::with_capacity(bytes), t: 0, v_bits: 0 }
    }

    /// Number of samples appended (what the header says).
    #[inline]
    pub fn num_samples(&self) -> u16 {
        self.a.num
    }

    /// True when no more samples fit (the header count is a u16).
    #[inline]
    pub fn is_full(&self) -> bool {
        self.a.is_full()
    }

    /// The complete chunk bytes, count header included; valid after every append.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        &self.a.buf
    }

    /// Bits used, header included (the last byte's zero padding excluded).
    #[inline]
    pub fn bit_len(&self) -> usize {
        self.a.bit_len()
    }

    /// Gives up the chunk bytes (e.g. to freeze them into a `bytes::Bytes`).
    pub fn into_bytes(self) -> Vec<u8> {
        self.a.buf
    }

    /// The first sample's timestamp, read from the chunk's header.
    pub fn first_t(&self) -> Option<i64> {
        self.a.first_t()
    }

    pub fn last_t(&self) -> Option<i64> {
        (self.a.num > 0).then_some(self.t)
    }

    /// The timestamp of the sample before the last one (from the last delta), when there are two.
    pub fn prev_t(&self) -> Option<i64> {
        self.a.prev_t(self.t)
    }

    pub fn last_v(&self) -> Option<f64> {
        (self.a.num > 0).then_some(f64::from_bits(self.v_bits))
    }

    /// Heap bytes held (the buffer's capacity), for memory accounting.
    #[inline]
    pub fn size_bytes(&self) -> usize {
        self.a.size_bytes()
    }

    /// Drops excess buffer capacity (for chunks that will not grow any more).
    pub fn shrink_to_fit(&mut self) {
        self.a.buf.shrink_to_fit();
    }

    /// [`XorAppender::clear_fitted`].
    pub fn clear_fitted(&mut self) {
        self.a.clear_fitted();
        self.t = 0;
        self.v_bits = 0;
    }

    /// Empties the chunk, keeping the buffer's capacity for reuse.
    pub fn clear(&mut self) {
        self.a.clear();
        self.t = 0;
        self.v_bits = 0;
    }

    /// Appends one sample. The caller guarantees `t` is greater than the previous sample's timestamp
    /// (the format itself survives any order, but readers rely on it).
    ///
    /// # Panics
    /// If the chunk already holds `u16::MAX` samples ([`XorEncoder::is_full`]); callers cut chunks long
    /// before that (Prometheus at 120 samples).
    #[inline]
    pub fn append(&mut self, t: i64, v: f64) {
        self.a.append(self.t, self.v_bits, t, v);
        self.t = t;
        self.v_bits = v.to_bits();
    }

    /// Reopens an existing XOR chunk to append more samples (WAL replay, out-of-order merging).
    ///
    /// The state is rebuilt by decoding every sample, like Prometheus' `XORChunk.Appender`, except that a
    /// chunk whose value deltas were all zero so far keeps "no window chosen" (Prometheus would resume with
    /// a 0/0 window): reopen-then-append therefore gives exactly the bytes of appending everything at once.
    /// Bytes after the last sample's bits (padding, garbage) are dropped.
    pub fn from_bytes(data: &[u8]) -> Result<Self, ChunkError> {
        let mut it = XorIter::new(data);
        for r in it.by_ref() {
            r?;
        }
        let mut enc = Self::with_capacity(data.len().max(128));
        if it.num_read == 0 {
            return Ok(enc);
        }
        let bit_len = it.bit_end();
        let byte_len = bit_len.div_ceil(8);
        let a = &mut enc.a;
        a.buf.clear();
        a.buf.extend_from_slice(&data[..byte_len]);
        a.free_bits = (byte_len * 8 - bit_len) as u32;
        if a.free_bits > 0 {
            let last = a.buf.last_mut().expect("byte_len >= 2");
            *last &= !((1u8 << a.free_bits) - 1);
        }
        a.num = it.num_read;
        a.t_delta = it.t_delta;
        if it.window_seen {
            a.leading = (64 - it.trailing - it.sig) as u8;
            a.trailing = it.trailing as u8;
        }
        enc.t = it.t;
        enc.v_bits = it.v_bits;
        Ok(enc)
    }
}

/// True when `x` fits the `nbits` bucket: Prometheus' `bitRange`, the asymmetric range
/// `[-(2^(nbits-1) - 1), 2^(nbits-1)]`.
#[inline(always)]
fn bit_range(x: i64, nbits: u32) -> bool {
    let half = 1i64 << (nbits - 1);
    -(half - 1) <= x && x <= half
}

/// Writes a delta of delta with its bucket prefix (`xorAppender.Append`).
#[inline(always)]
pub(crate) fn write_dod(w: &mut BitWriter<'_>, dod: i64) {
    let d = dod as u64;
    if dod == 0 {
        w.write_bit(false);
    } else if bit_range(dod, 14) {
        w.write_bits(0b10 << 14 | (d & 0x3fff), 16);
    } else if bit_range(dod, 17) {
        w.write_bits(0b110 << 17 | (d & 0x1_ffff), 20);
    } else if bit_range(dod, 20) {
        w.write_bits(0b1110 << 20 | (d & 0xf_ffff), 24);
    } else {
        w.write_bits(0b1111, 4);
        w.write_bits(d, 64);
    }
}

/// Writes a value as its XOR with the previous one (`xorAppender.writeVDelta`).
#[inline(always)]
pub(crate) fn write_value(w: &mut BitWriter<'_>, leading_st: &mut u8, trailing_st: &mut u8, prev: u64, cur: u64) {
    let delta = prev ^ cur;
    if delta == 0 {
        w.write_bit(false);
        return;
    }
    // Capped so it fits the 5-bit field; the extra zero bits are then part of the significant bits.
    let leading = delta.leading_zeros().min(31);
    let trailing = delta.trailing_zeros();
    let (pl, pt) = (u32::from(*leading_st), u32::from(*trailing_st));
    if *leading_st != NO_WINDOW && leading >= pl && trailing >= pt {
        // Control '10' then the bits inside the previous window.
        let sig = 64 - pl - pt;
        let payload = delta >> pt;
        if sig <= 62 {
            w.write_bits(0b10 << sig | payload, sig + 2);
        } else {
            w.write_bits(0b10, 2);
            w.write_bits(payload, sig);
        }
    } else {
        *leading_st = leading as u8;
        *trailing_st = trailing as u8;
        let sig = 64 - leading - trailing;
        // '11', 5 bits of leading, 6 bits of sigbits (64 wraps to 0, which can never mean 0 bits).
        let head = 0b11 << 11 | u64::from(leading) << 6 | u64::from(sig & 63);
        let payload = delta >> trailing;
        if sig <= 51 {
            w.write_bits(head << sig | payload, sig + 13);
        } else {
            w.write_bits(head, 13);
            w.write_bits(payload, sig);
        }
    }
}

/// Bucket payload sizes indexed by the number of leading 1s of the dod prefix (0..=4).
pub(crate) const DOD_BITS: [u32; 5] = [0, 14, 17, 20, 64];

/// Why a bit-stream read of an XOR sample failed; the caller knows the byte offset.
#[derive(Debug, Clone, Copy)]
pub(crate) enum BitsError {
    Truncated,
    /// A window header whose leading zeros plus significant bits exceed 64.
    BadWindow,
}

impl BitsError {
    pub(crate) fn at(self, offset: usize) -> ChunkError {
        match self {
            BitsError::Truncated => ChunkError::Truncated { offset },
            BitsError::BadWindow => {
                ChunkError::Corrupt { offset, reason: "xor leading zeros plus significant bits exceed 64" }
            }
        }
    }
}

/// Reads one delta-of-delta code into `t_delta` (upstream `xorIterator.Next`); `None` when the stream
/// ends early. Shared by [`XorIter`] and the XorSt iterator, whose streams code `t` the same way.
#[inline(always)]
pub(crate) fn read_dod_bits(br: &mut BitReader<'_>, t_delta: &mut u64) -> Option<()> {
    let prefix = br.peek_bits(4) as u32;
    // Number of leading 1s in the 4-bit prefix (0..=4): the bucket.
    let ones = (!(prefix << 28)).leading_zeros();
    if ones == 0 {
        br.skip_bits(1)?;
    } else {
        br.skip_bits((ones + 1).min(4))?;
        let sz = DOD_BITS[ones as usize];
        let mut bits = br.read_bits(sz)?;
        if sz < 64 && bits > 1 << (sz - 1) {
            // Negative values come back as large unsigned ones.
            bits = bits.wrapping_sub(1 << sz);
        }
        *t_delta = t_delta.wrapping_add(bits);
    }
    Some(())
}

/// Reads one XOR'ed value into `v_bits` (upstream `xorIterator.readValue`), updating the window; returns
/// whether a new window header ('11') was read.
#[inline(always)]
pub(crate) fn read_value_bits(
    br: &mut BitReader<'_>,
    v_bits: &mut u64,
    trailing: &mut u32,
    sig: &mut u32,
) -> Result<bool, BitsError> {
    let control = br.peek_bits(2);
    if control < 0b10 {
        br.skip_bits(1).ok_or(BitsError::Truncated)?;
        return Ok(false);
    }
    let new_window = control == 0b11;
    if new_window {
        let head = br.read_bits(13).ok_or(BitsError::Truncated)?;
        let leading = ((head >> 6) & 31) as u32;
        let mut s = (head & 63) as u32;
        if s == 0 {
            s = 64;
        }
        if leading + s > 64 {
            return Err(BitsError::BadWindow);
        }
        *trailing = 64 - leading - s;
        *sig = s;
    } else {
        br.skip_bits(2).ok_or(BitsError::Truncated)?;
    }
    let bits = br.read_bits(*sig).ok_or(BitsError::Truncated)?;
    *v_bits ^= bits << *trailing;
    Ok(new_window)
}

/// Decodes an XOR chunk sample by sample, without allocating (`xorIterator`).
///
/// Yields `Ok((t, v))` for each sample, or one `Err` and then `None` if the bytes are corrupt. Reusable
/// across chunks with [`XorIter::reset`].
#[derive(Debug, Clone)]
pub struct XorIter<'a> {
    data: &'a [u8],
    /// Bit stream after the first two samples' byte-aligned fields (valid once `num_read >= 2`, or
    /// positioned at the second sample's xor once `num_read` is being advanced past 1).
    br: BitReader<'a>,
    /// Byte offset in `data` at which `br` starts, for error offsets.
    br_base: usize,
    /// Byte offset of the next byte-aligned field while `num_read < 2`.
    pos: usize,
    num_total: u16,
    num_read: u16,
    t: i64,
    v_bits: u64,
    t_delta: u64,
    trailing: u32,
    /// Significant bits of the current window; Prometheus' reader starts from a 0/0 window (64 bits).
    sig: u32,
    /// Whether a '11' window header has been read (only `from_bytes` cares).
    window_seen: bool,
    /// Set after the first error: the iterator is fused.
    failed: bool,
    /// Error to report on the first `next` (header missing).
    pending: Option<ChunkError>,
}

impl<'a> XorIter<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        let mut it = Self {
            data: &[],
            br: BitReader::new(&[]),
            br_base: 0,
            pos: XOR_HEADER_BYTES,
            num_total: 0,
            num_read: 0,
            t: 0,
            v_bits: 0,
            t_delta: 0,
            trailing: 0,
            sig: 64,
            window_seen: false,
            failed: false,
            pending: None,
        };
        it.reset(data);
        it
    }

    /// Restarts on another chunk's bytes, keeping nothing from the previous one.
    pub fn reset(&mut self, data: &'a [u8]) {
        self.data = data;
        self.br = BitReader::new(&[]);
        self.br_base = 0;
        self.pos = XOR_HEADER_BYTES;
        self.num_read = 0;
        self.t = 0;
        self.v_bits = 0;
        self.t_delta = 0;
        self.trailing = 0;
        self.sig = 64;
        self.window_seen = false;
        self.failed = false;
        match data.get(..XOR_HEADER_BYTES) {
            Some(h) => {
                self.num_total = u16::from_be_bytes([h[0], h[1]]);
                self.pending = None;
            }
            None => {
                self.num_total = 0;
                self.pending = Some(ChunkError::Truncated { offset: data.len() });
            }
        }
    }

    /// The sample count the header announces (0 if there is no header).
    pub fn num_samples(&self) -> u16 {
        self.num_total
    }

    /// The sample the last successful `next`/`seek` returned.
    pub fn at(&self) -> Option<(i64, f64)> {
        (self.num_read > 0 && !self.failed).then(|| (self.t, f64::from_bits(self.v_bits)))
    }

    /// Advances to the first sample with timestamp `>= t` and returns it. If the current sample (from a
    /// previous `next`/`seek`) already qualifies it is returned again, as Prometheus' `Seek` does.
    /// `None` when no sample qualifies.
    pub fn seek(&mut self, t: i64) -> Option<Result<(i64, f64), ChunkError>> {
        if let Some(cur) = self.at()
            && cur.0 >= t
        {
            return Some(Ok(cur));
        }
        loop {
            match self.next()? {
                Ok(s) if s.0 < t => continue,
                r => return Some(r),
            }
        }
    }

    /// Bit offset in `data` just after the last sample read.
    fn bit_end(&self) -> usize {
        if self.num_read >= 2 { self.br_base * 8 + self.br.bit_position() } else { self.pos * 8 }
    }

    #[inline]
    fn truncated(&self) -> ChunkError {
        ChunkError::Truncated { offset: self.br_base + self.br.bit_position() / 8 }
    }

    #[cold]
    fn read_first(&mut self) -> Result<(), ChunkError> {
        let start = self.pos;
        let rest = &self.data[start..];
        let (t, rest) = varint::read_varint(rest).map_err(|e| match e {
            varint::VarintError::Overflow => {
                ChunkError::Corrupt { offset: start, reason: "first timestamp varint overflows 64 bits" }
            }
            _ => ChunkError::Truncated { offset: self.data.len() },
        })?;
        let Some(v) = rest.get(..8) else {
            return Err(ChunkError::Truncated { offset: self.data.len() });
        };
        self.t = t;
        self.v_bits = u64::from_be_bytes(v.try_into().expect("8 bytes"));
        self.pos = self.data.len() - rest.len() + 8;
        Ok(())
    }

    #[cold]
    fn read_second(&mut self) -> Result<(), ChunkError> {
        let start = self.pos;
        let (t_delta, rest) = varint::read_uvarint(&self.data[start..]).map_err(|e| match e {
            varint::VarintError::Overflow => {
                ChunkError::Corrupt { offset: start, reason: "second timestamp delta overflows 64 bits" }
            }
            _ => ChunkError::Truncated { offset: self.data.len() },
        })?;
        self.t_delta = t_delta;
        self.t = self.t.wrapping_add(t_delta as i64);
        self.br_base = self.data.len() - rest.len();
        self.pos = self.br_base;
        self.br = BitReader::new(rest);
        self.read_value()
    }

    /// Reads a delta-of-delta (`xorIterator.Next`).
    #[inline(always)]
    fn read_dod(&mut self) -> Result<(), ChunkError> {
        read_dod_bits(&mut self.br, &mut self.t_delta).ok_or_else(|| self.truncated())?;
        self.t = self.t.wrapping_add(self.t_delta as i64);
        Ok(())
    }

    /// Reads an XOR'ed value (`xorIterator.readValue`).
    #[inline(always)]
    fn read_value(&mut self) -> Result<(), ChunkError> {
        match read_value_bits(&mut self.br, &mut self.v_bits, &mut self.trailing, &mut self.sig) {
            Ok(new_window) => {
                self.window_seen |= new_window;
                Ok(())
            }
            Err(e) => Err(e.at(self.br_base + self.br.bit_position() / 8)),
        }
    }

    #[inline(always)]
    fn advance(&mut self) -> Result<(), ChunkError> {
        match self.num_read {
            0 => self.read_first(),
            1 => self.read_second(),
            _ => {
                self.read_dod()?;
                self.read_value()
            }
        }
    }
}

impl Iterator for XorIter<'_> {
    type Item = Result<(i64, f64), ChunkError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.num_read == self.num_total || self.failed {
            if let Some(e) = self.pending.take() {
                self.failed = true;
                return Some(Err(e));
            }
            return None;
        }
        match self.advance() {
            Ok(()) => {
                self.num_read += 1;
                Some(Ok((self.t, f64::from_bits(self.v_bits))))
            }
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = usize::from(self.num_total - self.num_read);
        (0, Some(left + usize::from(self.pending.is_some())))
    }
}

/// Decodes every sample of an XOR chunk, appending to `out`. On error `out` is restored to its length
/// before the call.
pub fn decode_xor_into(data: &[u8], out: &mut Vec<Sample>) -> Result<(), ChunkError> {
    decode_xor_range_into(data, i64::MIN, i64::MAX, out)
}

/// Decodes an XOR chunk, appending the samples with `mint_ms <= t <= maxt_ms` (inclusive) to `out`; stops
/// at the first sample after `maxt_ms`. On error `out` is restored to its length before the call.
pub fn decode_xor_range_into(data: &[u8], mint_ms: i64, maxt_ms: i64, out: &mut Vec<Sample>) -> Result<(), ChunkError> {
    let before = out.len();
    if let Some(h) = data.get(..XOR_HEADER_BYTES) {
        out.reserve(usize::from(u16::from_be_bytes([h[0], h[1]])));
    }
    let res = for_each_xor_sample(data, mint_ms, maxt_ms, |t, v| out.push(Sample { t, v }));
    if res.is_err() {
        out.truncate(before);
    }
    res.map(|_| ())
}

/// Calls `f(t, v)` for each sample of an XOR chunk with `mint_ms <= t <= maxt_ms`, in order, and returns
/// how many it visited; stops at the first sample after `maxt_ms`. The same fast path as
/// [`decode_xor_into`] without materialising samples (aggregations such as `sum`/`avg` over a range).
/// On error, samples before the corrupt point may already have been visited.
#[inline]
pub fn for_each_xor_sample(
    data: &[u8],
    mint_ms: i64,
    maxt_ms: i64,
    mut f: impl FnMut(i64, f64),
) -> Result<usize, ChunkError> {
    let mut visited = 0usize;
    let mut visit = |t: i64, v: f64| {
        f(t, v);
        visited += 1;
    };
    let mut it = XorIter::new(data);
    // The first two samples are byte-aligned fields: the iterator's cold paths read them.
    while it.num_read < 2 {
        let Some(r) = it.next() else { return Ok(visited) };
        let (t, v) = r?;
        if t > maxt_ms {
            return Ok(visited);
        }
        if t >= mint_ms {
            visit(t, v);
        }
    }
    if fast_loop(&mut it, mint_ms, maxt_ms, &mut visit)? {
        return Ok(visited);
    }
    // The last few samples, close to the end of the data: bounds-checked reads.
    for r in it.by_ref() {
        let (t, v) = r?;
        if t > maxt_ms {
            break;
        }
        if t >= mint_ms {
            visit(t, v);
        }
    }
    Ok(visited)
}

/// Loads 64 bits starting at bit `pos` of `body`, of which the top 57 are always the stream's next bits.
/// The caller guarantees `pos / 8 + 8 <= body.len()`.
#[inline(always)]
pub(crate) fn load57(body: &[u8], pos: usize) -> u64 {
    let b = pos >> 3;
    let w = u64::from_be_bytes(body[b..b + 8].try_into().expect("slice of length 8"));
    w << (pos & 7)
}

/// Reads `n` (1..=64) bits at bit `pos` without branching on `n`; the caller guarantees
/// `pos / 8 + 16 <= body.len()`.
#[inline(always)]
pub(crate) fn read_at(body: &[u8], pos: usize, n: u32) -> u64 {
    let b = pos >> 3;
    let w = u128::from_be_bytes(body[b..b + 16].try_into().expect("slice of length 16"));
    ((w << (pos & 7)) >> (128 - n)) as u64
}

/// One sample takes at most 4+64 + 2+11+64 = 145 bits; from a sample's first bit, loads reach less than
/// 32 bytes further.
const FAST_MARGIN: usize = 32;

/// The decoder's state in [`xor_loop`] (locals while it runs).
#[derive(Clone, Copy)]
struct LoopState {
    /// Bit position in the loop's `body`.
    pos: usize,
    t: i64,
    t_delta: u64,
    v_bits: u64,
    trailing: u32,
    sig: u32,
    window_seen: bool,
    num_read: u16,
}

/// Why [`xor_loop`] stopped.
#[derive(Clone, Copy, PartialEq, Eq)]
enum LoopEnd {
    /// Fewer than `FAST_MARGIN` bytes left after `pos` (or, in a tail, the data's end reached).
    Margin,
    /// Every sample read.
    Total,
    /// A sample after `maxt_ms` (decoding is finished).
    Done,
    /// A window header saying more than 64 bits.
    Corrupt,
}

/// The decoding loop, with unchecked-length word loads and the state in locals (registers): decodes
/// while the position is at most `limit` bytes into `body` (which must extend `FAST_MARGIN` bytes past
/// it). With `TAIL`, `body` is a zero-padded copy of the chunk's last bytes, of which `end_bits` are
/// data: a sample that would end past them, or look corrupt, is left undecoded (the state is the one
/// before it) for the checked path to read, so truncated data fails exactly as it does there.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // scalars, so that they stay in registers
fn xor_loop<const TAIL: bool>(
    body: &[u8],
    limit: usize,
    end_bits: usize,
    st: &mut LoopState,
    num_total: u16,
    mint_ms: i64,
    maxt_ms: i64,
    visit: &mut impl FnMut(i64, f64),
) -> LoopEnd {
    let LoopState { mut pos, mut t, mut t_delta, mut v_bits, mut trailing, mut sig, mut window_seen, mut num_read } = *st;
    let mut end = LoopEnd::Margin;
    loop {
        if num_read >= num_total {
            end = LoopEnd::Total;
            break;
        }
        if (pos >> 3) > limit {
            break;
        }
        let before = (pos, t, t_delta, v_bits, trailing, sig, window_seen);
        // Delta of delta: the prefix's leading 1s (capped at 4) give the bucket. Branch-free for the
        // 0/14/17/20-bit buckets, as jittered scrapes mix them unpredictably.
        let w = load57(body, pos);
        let ones = (!w).leading_zeros().min(4);
        if ones < 4 {
            let hdr = ones + (ones < 4) as u32;
            let sz = DOD_BITS[ones as usize];
            // `>> 1 >> (63 - sz)` is `>> (64 - sz)` that also works for sz == 0.
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

        // Value. Branch-free variants measured ~30% slower on random data: with branches the CPU predicts
        // the next bit position and starts the next load early; without, every load waits on `pos`.
        let w = load57(body, pos);
        let mut corrupt = false;
        if w >> 63 == 0 {
            pos += 1;
        } else {
            if (w >> 62) & 1 == 1 {
                let leading = ((w >> 57) & 31) as u32;
                let s = ((w >> 51) & 63) as u32;
                let s = s + (u32::from(s == 0) << 6);
                if leading + s > 64 {
                    corrupt = true;
                } else {
                    sig = s;
                    trailing = 64 - leading - s;
                    window_seen = true;
                    pos += 13;
                }
            } else {
                pos += 2;
            }
            if !corrupt {
                let payload = if sig <= 57 { load57(body, pos) >> (64 - sig) } else { read_at(body, pos, sig) };
                v_bits ^= payload << trailing;
                pos += sig as usize;
            }
        }
        if TAIL && (corrupt || pos > end_bits) {
            // Past the data, or corrupt: the checked path reads this sample and reports it.
            (pos, t, t_delta, v_bits, trailing, sig, window_seen) = before;
            break;
        }
        if corrupt {
            end = LoopEnd::Corrupt;
            break;
        }
        num_read += 1;
        if t > maxt_ms {
            end = LoopEnd::Done;
            break;
        }
        if t >= mint_ms {
            visit(t, f64::from_bits(v_bits));
        }
    }
    *st = LoopState { pos, t, t_delta, v_bits, trailing, sig, window_seen, num_read };
    end
}

/// Decodes samples with [`xor_loop`]: over the chunk itself while at least `FAST_MARGIN` bytes remain,
/// then over a zero-padded copy of its last bytes (a head chunk of ~150 bytes has its newest ~25
/// samples there, which are what a query at "now" reads; the checked iterator was ~3× slower). Leaves
/// `it` positioned after the last sample it decoded, ready for the iterator's checked path. Returns
/// `Ok(true)` when decoding is finished (a sample after `maxt_ms`).
#[inline(always)]
fn fast_loop(
    it: &mut XorIter<'_>,
    mint_ms: i64,
    maxt_ms: i64,
    visit: &mut impl FnMut(i64, f64),
) -> Result<bool, ChunkError> {
    let body = &it.data[it.br_base..];
    let mut st = LoopState {
        pos: it.br.bit_position(),
        t: it.t,
        t_delta: it.t_delta,
        v_bits: it.v_bits,
        trailing: it.trailing,
        sig: it.sig,
        window_seen: it.window_seen,
        num_read: it.num_read,
    };
    let mut end = LoopEnd::Margin;
    if body.len() >= FAST_MARGIN {
        end = xor_loop::<false>(body, body.len() - FAST_MARGIN, usize::MAX, &mut st, it.num_total, mint_ms, maxt_ms, visit);
    }
    if end == LoopEnd::Margin && (st.pos >> 3) < body.len() {
        let from = st.pos >> 3;
        let rest = &body[from..];
        debug_assert!(rest.len() <= FAST_MARGIN);
        let mut pad = [0u8; 3 * FAST_MARGIN];
        pad[..rest.len()].copy_from_slice(rest);
        let mut tail = LoopState { pos: st.pos & 7, ..st };
        end = xor_loop::<true>(&pad, FAST_MARGIN, rest.len() * 8, &mut tail, it.num_total, mint_ms, maxt_ms, visit);
        st = LoopState { pos: from * 8 + tail.pos, ..tail };
    }
    // Hand the state back so the checked path (or an error report) continues from here.
    let pos = st.pos;
    it.br = BitReader::new(&body[pos >> 3..]);
    it.br.skip_bits((pos & 7) as u32).expect("pos is inside body");
    it.br_base += pos >> 3;
    (it.t, it.t_delta, it.v_bits) = (st.t, st.t_delta, st.v_bits);
    (it.trailing, it.sig, it.window_seen) = (st.trailing, st.sig, st.window_seen);
    it.num_read = st.num_read;
    if end == LoopEnd::Corrupt {
        return Err(ChunkError::Corrupt {
            offset: it.br_base,
            reason: "xor leading zeros plus significant bits exceed 64",
        });
    }
    Ok(end == LoopEnd::Done)
}

/// Encodes samples into one XOR chunk. Timestamps must be strictly increasing.
///
/// # Panics
/// With more than `u16::MAX` samples (one chunk cannot count them).
pub fn encode_xor(samples: &[Sample]) -> Vec<u8> {
    let mut enc = XorEncoder::with_capacity(XOR_HEADER_BYTES + 16 + samples.len() * 9);
    for s in samples {
        enc.append(s.t, s.v);
    }
    enc.into_bytes()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_buffer_grows_by_an_eighth_and_is_fitted_for_the_next_chunk() {
        // Worst-case samples (random times and values), then a counter: the buffer never holds more than
        // an eighth and a few dozen bytes above what the chunk uses (doubling would hold up to twice), and
        // a fitted clear keeps about one chunk's worth.
        let mut e = super::XorEncoder::new();
        let mut x = 0x1234_5678_9abc_def0u64;
        for i in 0..2000i64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let t = if i == 0 { i64::MIN + 1 } else { i * 1_000_003 + (x >> 40) as i64 };
            e.append(t, f64::from_bits(x));
            let (len, cap) = (e.bytes().len(), e.size_bytes());
            assert!(cap <= (len + len / 8 + 32).max(128) + super::SAMPLE_BYTES_MAX, "sample {i}: {len} bytes in {cap}");
        }
        let mut back = Vec::new();
        super::decode_xor_into(e.bytes(), &mut back).expect("decodes");
        assert_eq!(back.len(), 2000);
        for (len, n) in [(e.bytes().len(), 0), (0, 120)] {
            for t in 0..n {
                e.append(t * 10_000, (t * 3) as f64);
            }
            let len = if n > 0 { e.bytes().len() } else { len };
            e.clear_fitted();
            assert!(e.size_bytes() <= len + len / 8 + super::SAMPLE_BYTES_MAX, "{} for {len}", e.size_bytes());
            assert_eq!(e.bytes(), [0, 0]);
        }
    }


    use super::*;

    fn decode(data: &[u8]) -> Result<Vec<(i64, u64)>, ChunkError> {
        XorIter::new(data).map(|r| r.map(|(t, v)| (t, v.to_bits()))).collect()
    }

    #[test]
    fn empty_chunk_is_just_the_header() {
        let enc = XorEncoder::new();
        assert_eq!(enc.bytes(), &[0, 0]);
        assert_eq!(enc.first_t(), None);
        assert_eq!(decode(enc.bytes()), Ok(vec![]));
    }

    #[test]
    fn dod_bucket_boundaries_round_trip() {
        // Exercise both edges of every bucket, including Prometheus' asymmetric +2^(n-1).
        let mut dods = vec![0i64];
        for n in [14u32, 17, 20] {
            let h = 1i64 << (n - 1);
            dods.extend([h, h + 1, -(h - 1), -h]);
        }
        dods.extend([i64::MAX / 4, i64::MIN / 4]);
        let mut t = 0i64;
        let mut delta = 10_000_000i64;
        let mut samples = vec![Sample::new(t, 1.0)];
        t += delta;
        samples.push(Sample::new(t, 2.0));
        for d in dods {
            delta += d;
            t = t.wrapping_add(delta);
            samples.push(Sample::new(t, 3.0));
            delta -= d; // back to a sane delta to keep timestamps in range
            t = t.wrapping_add(delta);
            samples.push(Sample::new(t, 4.0));
        }
        let bytes = encode_xor(&samples);
        let got = decode(&bytes).expect("valid");
        let want: Vec<(i64, u64)> = samples.iter().map(|s| (s.t, s.v.to_bits())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn short_inputs_are_errors() {
        assert_eq!(decode(&[]), Err(ChunkError::Truncated { offset: 0 }));
        assert_eq!(decode(&[0]), Err(ChunkError::Truncated { offset: 1 }));
        assert!(matches!(decode(&[0, 1, 0x80]), Err(ChunkError::Truncated { .. })));
        assert!(matches!(decode(&[0, 1, 2, 0, 0]), Err(ChunkError::Truncated { .. })));
    }

    #[test]
    fn impossible_window_is_corrupt() {
        let mut enc = XorEncoder::new();
        enc.append(0, 1.0);
        enc.append(1, 2.0);
        let mut bytes = enc.bytes().to_vec();
        // Sample 1's value starts right after t0 varint (1 byte), v0 (8 bytes), delta uvarint (1 byte):
        // write '11' + leading 31 + sigbits 63 => 31 + 63 > 64.
        let at = 2 + 1 + 8 + 1;
        let head: u64 = 0b11 << 11 | 31 << 6 | 63;
        bytes.truncate(at);
        let mut w = BitWriter::new(&mut bytes);
        w.write_bits(head, 13);
        w.write_bits(0, 63);
        assert!(matches!(decode(&bytes), Err(ChunkError::Corrupt { .. })));
    }

    #[test]
    fn seek_finds_first_at_or_after() {
        let samples: Vec<Sample> = (0..10).map(|i| Sample::new(i * 10, i as f64)).collect();
        let bytes = encode_xor(&samples);
        let mut it = XorIter::new(&bytes);
        assert_eq!(it.seek(25).map(|r| r.expect("ok").0), Some(30));
        // Already there: returned again.
        assert_eq!(it.seek(30).map(|r| r.expect("ok").0), Some(30));
        assert_eq!(it.next().map(|r| r.expect("ok").0), Some(40));
        assert_eq!(it.seek(1000), None);
        it.reset(&bytes);
        assert_eq!(it.seek(i64::MIN).map(|r| r.expect("ok").0), Some(0));
    }

    #[test]
    fn range_decode_filters_inclusively() {
        let samples: Vec<Sample> = (0..10).map(|i| Sample::new(i * 10, i as f64)).collect();
        let bytes = encode_xor(&samples);
        let mut out = vec![Sample::new(-1, 0.0)];
        decode_xor_range_into(&bytes, 20, 50, &mut out).expect("valid");
        let ts: Vec<i64> = out.iter().map(|s| s.t).collect();
        assert_eq!(ts, vec![-1, 20, 30, 40, 50]);
        // A corrupt chunk leaves `out` untouched.
        let mut out = vec![Sample::new(-1, 0.0)];
        assert!(decode_xor_into(&bytes[..bytes.len() - 3], &mut out).is_err());
        assert_eq!(out.len(), 1);
    }
}
