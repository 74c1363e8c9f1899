//! Bit streams: MSB-first bit writer appending to a caller's `Vec<u8>`, and a bit reader over `&[u8]`.
//!
//! Bit order is Prometheus' (`tsdb/chunkenc/bstream.go`): within a byte the first bit written is the most
//! significant one, and a multi-bit value is written most significant bit first. A partially filled last
//! byte is kept zero-padded in the vector at all times, so `buf` always holds a complete, readable stream
//! (the XOR chunk hands out its bytes after every append without a flush step).
//!
//! - [`BitWriter`] borrows the vector for the duration of one batch of writes; the number of free bits in
//!   the last byte is the only state that must survive between batches ([`BitWriter::resume`],
//!   [`BitWriter::free_bits`]).
//! - [`BitReader`] keeps up to 64 bits in a left-aligned register and refills it with one unaligned 8-byte
//!   big-endian load when the data allows, byte by byte near the end. Reads past the end return `None`
//!   (never panic), so decoders of untrusted bytes turn them into a typed "truncated" error.

/// Appends bits to a `Vec<u8>` (see the module docs for the bit order).
#[derive(Debug)]
pub struct BitWriter<'a> {
    buf: &'a mut Vec<u8>,
    /// Unused low-order bits of the last byte of `buf` (0..=7); 0 means the next bit starts a new byte.
    free: u32,
}

impl<'a> BitWriter<'a> {
    /// Starts writing at the next byte boundary after whatever `buf` already holds.
    #[inline]
    pub fn new(buf: &'a mut Vec<u8>) -> Self {
        Self { buf, free: 0 }
    }

    /// Continues a stream whose last byte still has `free_bits` (0..=7) unused low-order bits, which must
    /// be zero. `free_bits` is what [`BitWriter::free_bits`] returned at the end of the previous batch.
    #[inline]
    pub fn resume(buf: &'a mut Vec<u8>, free_bits: u32) -> Self {
        debug_assert!(free_bits < 8);
        // With an empty buffer there is no partial byte to continue.
        let free = if buf.is_empty() { 0 } else { free_bits & 7 };
        Self { buf, free }
    }

    /// Unused bits left in the last byte (0..=7); keep it to [`BitWriter::resume`] later.
    #[inline]
    pub fn free_bits(&self) -> u32 {
        self.free
    }

    /// Total bits written to the underlying buffer (including bytes that were there before).
    #[inline]
    pub fn bit_len(&self) -> usize {
        self.buf.len() * 8 - self.free as usize
    }

    /// Writes one bit (`true` = 1).
    #[inline]
    pub fn write_bit(&mut self, bit: bool) {
        if self.free == 0 {
            self.buf.push(0);
            self.free = 8;
        }
        self.free -= 1;
        if bit {
            let last = self.buf.last_mut().expect("a byte was pushed above or is partially filled");
            *last |= 1 << self.free;
        }
    }

    /// Writes the low `n` bits of `v` (0 <= n <= 64), most significant first. Higher bits of `v` are ignored.
    #[inline]
    pub fn write_bits(&mut self, v: u64, n: u32) {
        debug_assert!(n <= 64);
        if n == 0 {
            return;
        }
        // Clear the bits above n so they cannot leak into the stream.
        let mut v = v & (u64::MAX >> (64 - n));
        let mut n = n;
        if self.free > 0 {
            let last = self.buf.last_mut().expect("free > 0 implies a partial last byte");
            if n <= self.free {
                self.free -= n;
                *last |= (v << self.free) as u8;
                return;
            }
            n -= self.free;
            *last |= (v >> n) as u8;
            v &= u64::MAX >> (64 - n);
            self.free = 0;
        }
        // Byte aligned now, 1 <= n <= 64: emit the bits top-aligned, as many bytes as they touch.
        let nbytes = n.div_ceil(8);
        let top = v << (64 - n);
        self.buf.extend_from_slice(&top.to_be_bytes()[..nbytes as usize]);
        self.free = nbytes * 8 - n;
    }

    /// Writes a whole byte (at any bit alignment).
    #[inline]
    pub fn write_byte(&mut self, b: u8) {
        self.write_bits(u64::from(b), 8);
    }

    /// Writes bytes (at any bit alignment).
    pub fn write_bytes(&mut self, bytes: &[u8]) {
        if self.free == 0 {
            self.buf.extend_from_slice(bytes);
        } else {
            for &b in bytes {
                self.write_byte(b);
            }
        }
    }
}

/// Reads bits MSB-first from a byte slice. Reading past the end yields `None`.
#[derive(Debug, Clone)]
pub struct BitReader<'a> {
    data: &'a [u8],
    /// Index of the next byte of `data` not yet accounted for in `valid`.
    next_byte: usize,
    /// Buffered bits, left-aligned. Bits below the `valid` ones are either zero or the stream's next bits
    /// (the fast refill loads whole words), so OR-ing later loads into it is always consistent.
    acc: u64,
    /// Number of buffered bits at the top of `acc` (0..=64).
    valid: u32,
}

impl<'a> BitReader<'a> {
    #[inline]
    pub fn new(data: &'a [u8]) -> Self {
        Self { data, next_byte: 0, acc: 0, valid: 0 }
    }

    /// Bits consumed so far.
    #[inline]
    pub fn bit_position(&self) -> usize {
        self.next_byte * 8 - self.valid as usize
    }

    /// Bits not yet consumed.
    #[inline]
    pub fn remaining_bits(&self) -> usize {
        self.data.len() * 8 - self.bit_position()
    }

    /// The unread bytes when the reader sits on a byte boundary, else `None`.
    pub fn aligned_tail(&self) -> Option<&'a [u8]> {
        let pos = self.bit_position();
        pos.is_multiple_of(8).then(|| &self.data[pos / 8..])
    }

    /// Tops `acc` up to at least 57 valid bits, or with everything left when the data ends first.
    #[inline(always)]
    fn refill(&mut self) {
        if let Some(word) = self.data.get(self.next_byte..self.next_byte + 8) {
            let w = u64::from_be_bytes(word.try_into().expect("slice of length 8"));
            if self.valid < 64 {
                self.acc |= w >> self.valid;
            }
            let bytes = (64 - self.valid) / 8;
            self.next_byte += bytes as usize;
            self.valid += bytes * 8;
        } else {
            while self.valid <= 56 && self.next_byte < self.data.len() {
                self.acc |= u64::from(self.data[self.next_byte]) << (56 - self.valid);
                self.next_byte += 1;
                self.valid += 8;
            }
        }
    }

    /// Reads one bit.
    #[inline(always)]
    pub fn read_bit(&mut self) -> Option<bool> {
        if self.valid == 0 {
            self.refill();
            if self.valid == 0 {
                return None;
            }
        }
        let bit = self.acc >> 63 != 0;
        self.acc <<= 1;
        self.valid -= 1;
        Some(bit)
    }

    /// Returns the next `n` bits (1..=56) without consuming them, zero-filled past the end of the data.
    #[inline(always)]
    pub fn peek_bits(&mut self, n: u32) -> u64 {
        debug_assert!((1..=56).contains(&n));
        if self.valid < n {
            self.refill();
        }
        self.acc >> (64 - n)
    }

    /// Consumes `n` bits (0..=56) previously seen with [`BitReader::peek_bits`]; `None` if fewer remain.
    #[inline(always)]
    pub fn skip_bits(&mut self, n: u32) -> Option<()> {
        debug_assert!(n <= 56);
        if self.valid < n {
            self.refill();
            if self.valid < n {
                return None;
            }
        }
        self.acc <<= n;
        self.valid -= n;
        Some(())
    }

    /// Reads `n` bits (0..=64) as the low bits of the result.
    #[inline(always)]
    pub fn read_bits(&mut self, n: u32) -> Option<u64> {
        if n <= 56 {
            self.read_bits_small(n)
        } else if n <= 64 {
            let hi = self.read_bits_small(n - 32)?;
            let lo = self.read_bits_small(32)?;
            Some(hi << 32 | lo)
        } else {
            None
        }
    }

    #[inline(always)]
    fn read_bits_small(&mut self, n: u32) -> Option<u64> {
        if n == 0 {
            return Some(0);
        }
        if self.valid < n {
            self.refill();
            if self.valid < n {
                return None;
            }
        }
        let v = self.acc >> (64 - n);
        self.acc <<= n;
        self.valid -= n;
        Some(v)
    }

    /// Reads 8 bits (at any alignment).
    #[inline]
    pub fn read_byte(&mut self) -> Option<u8> {
        self.read_bits_small(8).map(|v| v as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_msb_first_and_pads_with_zeros() {
        let mut buf = Vec::new();
        let mut w = BitWriter::new(&mut buf);
        w.write_bit(true);
        w.write_bits(0b01, 2);
        assert_eq!(w.free_bits(), 5);
        assert_eq!(buf, vec![0b1010_0000]);
    }

    #[test]
    fn appends_after_existing_bytes_in_callers_buffer() {
        let mut buf = vec![0xAB, 0xCD];
        let mut w = BitWriter::new(&mut buf);
        w.write_bits(0xF, 4);
        w.write_bits(0x1234, 16);
        let free = w.free_bits();
        assert_eq!(free, 4);
        assert_eq!(buf, vec![0xAB, 0xCD, 0xF1, 0x23, 0x40]);
        // Resume later and fill the partial byte.
        let mut w = BitWriter::resume(&mut buf, free);
        w.write_bits(0x5, 4);
        assert_eq!(w.free_bits(), 0);
        assert_eq!(buf, vec![0xAB, 0xCD, 0xF1, 0x23, 0x45]);
        let mut r = BitReader::new(&buf[2..]);
        assert_eq!(r.read_bits(4), Some(0xF));
        assert_eq!(r.read_bits(16), Some(0x1234));
        assert_eq!(r.read_bits(4), Some(0x5));
        assert_eq!(r.read_bit(), None);
    }

    #[test]
    fn high_bits_of_value_are_ignored() {
        let mut buf = Vec::new();
        let mut w = BitWriter::new(&mut buf);
        w.write_bit(false);
        w.write_bits(u64::MAX, 3);
        w.write_bits(u64::MAX, 0);
        assert_eq!(buf, vec![0b0111_0000]);
    }

    #[test]
    fn round_trips_mixed_widths() {
        let widths: Vec<u32> = (0..=64).chain((0..=64).rev()).chain([1, 63, 7, 64, 9, 57]).collect();
        let mut buf = vec![7u8];
        let mut w = BitWriter::new(&mut buf);
        let vals: Vec<u64> = widths
            .iter()
            .enumerate()
            .map(|(i, &n)| {
                let v = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0xDEAD_BEEF;
                if n == 0 { 0 } else { v & (u64::MAX >> (64 - n)) }
            })
            .collect();
        for (&v, &n) in vals.iter().zip(&widths) {
            w.write_bits(v, n);
        }
        let total: u32 = widths.iter().sum();
        assert_eq!(w.bit_len(), 8 + total as usize);
        let mut r = BitReader::new(&buf[1..]);
        for (&v, &n) in vals.iter().zip(&widths) {
            assert_eq!(r.read_bits(n), Some(v), "width {n}");
        }
        assert_eq!(r.bit_position(), total as usize);
        assert!(r.remaining_bits() < 8);
    }

    #[test]
    fn reading_past_the_end_is_none() {
        let data = [0xFFu8; 3];
        let mut r = BitReader::new(&data);
        assert_eq!(r.read_bits(20), Some(0xFFFFF));
        assert_eq!(r.read_bits(5), None);
        assert_eq!(r.read_bits(4), Some(0xF));
        assert_eq!(r.read_bit(), None);
        assert_eq!(r.read_bits(65), None);
        let mut r = BitReader::new(&[]);
        assert_eq!(r.read_bits(64), None);
        assert_eq!(r.peek_bits(4), 0);
        assert_eq!(r.skip_bits(1), None);
    }

    #[test]
    fn write_bytes_unaligned() {
        let mut buf = Vec::new();
        let mut w = BitWriter::new(&mut buf);
        w.write_bit(true);
        w.write_bytes(&[0xFF, 0x00]);
        assert_eq!(buf, vec![0xFF, 0x80, 0x00]);
        let mut r = BitReader::new(&buf);
        assert_eq!(r.read_bit(), Some(true));
        assert_eq!(r.aligned_tail(), None);
        assert_eq!(r.read_byte(), Some(0xFF));
        assert_eq!(r.read_byte(), Some(0x00));
    }
}
