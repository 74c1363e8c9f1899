//! Frame-of-reference bit packing of integer streams, used by Decimal chunks' packed layouts and by block
//! indexes' postings lists.
//!
//! A stream of `count` integers (the count is known to the reader from elsewhere) is cut into frames of
//! [`FRAME`] values, the last one shorter. Each frame is written as
//!
//! ```text
//! varint base (the frame's smallest value) │ u8 width w (0..=64) │ ceil(len·w / 8) bytes
//! ```
//!
//! where every value is stored as `value − base` (wrapping, as an unsigned 64-bit number) in `w` bits,
//! least significant bit first, value after value, the last byte zero-padded. `w` is the fewest bits that
//! hold the frame's largest `value − base`, so a frame of equal values costs only its base and width.
//!
//! Random increments of a counter (`U(a, b)` per scrape) take `log2(b − a)` bits each this way, where
//! varints take whole bytes of 7 bits plus the sign.

use crate::dense::corrupt;
use crate::error::ChunkError;
use crate::varint;

/// Values per frame.
pub const FRAME: usize = 128;

/// Appends `xs` packed in frames.
pub fn pack_into(xs: &[i64], out: &mut Vec<u8>) {
    for f in xs.chunks(FRAME) {
        let base = f.iter().copied().min().expect("chunks are non-empty");
        let span = f.iter().map(|&x| x.wrapping_sub(base) as u64).max().expect("chunks are non-empty");
        let w = 64 - span.leading_zeros();
        varint::put_varint(out, base);
        out.push(w as u8);
        if w == 0 {
            continue;
        }
        let mut acc: u128 = 0;
        let mut have = 0u32;
        for &x in f {
            acc |= u128::from(x.wrapping_sub(base) as u64) << have;
            have += w;
            while have >= 8 {
                out.push(acc as u8);
                acc >>= 8;
                have -= 8;
            }
        }
        if have > 0 {
            out.push(acc as u8);
        }
    }
}

/// Reads a packed stream of a known number of values, one frame at a time.
pub struct Unpacker<'a> {
    rest: &'a [u8],
    /// Values not yet unpacked into `buf`.
    left: usize,
    buf: [i64; FRAME],
    pos: usize,
    len: usize,
    /// Offset of `rest`'s end inside the chunk (errors name chunk offsets).
    end: usize,
}

impl<'a> Unpacker<'a> {
    /// A reader of `count` values packed in `data`, which ends at chunk offset `end`.
    pub fn new(data: &'a [u8], count: usize, end: usize) -> Self {
        Unpacker { rest: data, left: count, buf: [0; FRAME], pos: 0, len: 0, end }
    }

    /// The next value.
    #[inline]
    pub fn next_value(&mut self) -> Result<i64, ChunkError> {
        if self.pos == self.len {
            self.refill()?;
        }
        let v = self.buf[self.pos];
        self.pos += 1;
        Ok(v)
    }

    /// Consumes the next `k` values and gives their sum and the sum of their running sums (wrapping): what
    /// a reader skipping `k` differences (or differences of differences) needs to move its state on.
    pub fn skip_sums(&mut self, mut k: usize) -> Result<(i64, i64), ChunkError> {
        let (mut sum, mut sums) = (0i64, 0i64);
        while k > 0 {
            if self.pos == self.len {
                self.refill()?;
            }
            let take = k.min(self.len - self.pos);
            for &x in &self.buf[self.pos..self.pos + take] {
                sum = sum.wrapping_add(x);
                sums = sums.wrapping_add(sum);
            }
            self.pos += take;
            k -= take;
        }
        Ok((sum, sums))
    }

    /// The values unpacked and not yet consumed, after unpacking the next frame if none are (`Truncated`
    /// when no frame is left): what a reader that takes many values at once reads, then [`consume`]s.
    ///
    /// [`consume`]: Unpacker::consume
    #[inline]
    pub fn buffered(&mut self) -> Result<&[i64], ChunkError> {
        if self.pos == self.len {
            self.refill()?;
        }
        Ok(&self.buf[self.pos..self.len])
    }

    /// Consumes `k` of the [`buffered`](Unpacker::buffered) values (at most as many as it gave).
    #[inline]
    pub fn consume(&mut self, k: usize) {
        self.pos = (self.pos + k).min(self.len);
    }

    /// Whether every frame was read and no byte is left over.
    pub fn is_done(&self) -> bool {
        self.left == 0 && self.pos == self.len && self.rest.is_empty()
    }

    #[cold]
    fn refill(&mut self) -> Result<(), ChunkError> {
        if self.left == 0 {
            return Err(ChunkError::Truncated { offset: self.end });
        }
        let at = self.end - self.rest.len();
        let (base, r) = varint::read_varint(self.rest).map_err(|e| crate::dense::varint_err(e, at, self.end))?;
        let (&w, r) = r.split_first().ok_or(ChunkError::Truncated { offset: self.end })?;
        if w > 64 {
            return Err(corrupt(self.end - r.len() - 1, "packed width above 64"));
        }
        let len = self.left.min(FRAME);
        let nbytes = (len * w as usize).div_ceil(8);
        if r.len() < nbytes {
            return Err(ChunkError::Truncated { offset: self.end });
        }
        // The frame's bytes and those after it in the stream: whole 16-byte loads may reach past the
        // frame (the mask drops those bits), which spares a padded copy for all but the last values.
        unpack_frame(base, u32::from(w), r, &mut self.buf[..len]);
        self.rest = &r[nbytes..];
        self.left -= len;
        self.pos = 0;
        self.len = len;
        Ok(())
    }
}

/// Unpacks `out.len()` values of width `w` from the start of `data`, which holds at least their
/// `ceil(len·w / 8)` bytes and may go on (bits past the values are never used).
fn unpack_frame(base: i64, w: u32, data: &[u8], out: &mut [i64]) {
    if w == 0 {
        out.fill(base);
        return;
    }
    // Widths up to 56 bits: eight values at a time, unrolled for the width (see `unpack_eights`), as
    // far as the data reaches past them; the rest value by value below.
    let done = with_width(w, base, data, out);
    unpack_tail(base, w, data, done, out);
}

/// Eight values of `W` bits take exactly `W` bytes, so each group of eight starts on a byte and each of
/// its values sits at a byte offset and shift known when this is compiled: per value one unaligned
/// 8-byte load, a shift and a mask (a value of at most 56 bits, shifted by at most 7, lies within the 8
/// bytes). A group is unpacked here when the data holds its `W` bytes and the 8 past them that the
/// last load may touch; returns how many values were unpacked (a multiple of eight).
#[inline(always)]
fn unpack_eights<const W: usize>(base: i64, data: &[u8], out: &mut [i64]) -> usize {
    let mask = (1u64 << W) - 1;
    let groups = (out.len() / 8).min(data.len().saturating_sub(8) / W);
    for (g, o) in out[..groups * 8].chunks_exact_mut(8).enumerate() {
        let b = &data[g * W..g * W + W + 8];
        for (j, v) in o.iter_mut().enumerate() {
            let (at, shift) = (j * W / 8, j * W % 8);
            let word = u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"));
            *v = base.wrapping_add(((word >> shift) & mask) as i64);
        }
    }
    groups * 8
}

/// [`unpack_eights`] for the width `w` (1..=56), or nothing (0) for wider values.
fn with_width(w: u32, base: i64, data: &[u8], out: &mut [i64]) -> usize {
    macro_rules! widths {
        ($($n:literal)*) => {
            match w {
                $($n => unpack_eights::<$n>(base, data, out),)*
                _ => 0,
            }
        };
    }
    widths!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28
            29 30 31 32 33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56)
}

/// Unpacks `out[from..]` (values of width `w` from bit `from · w` of `data` on) value by value.
fn unpack_tail(base: i64, w: u32, data: &[u8], from: usize, out: &mut [i64]) {
    let mask = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
    let value = |window: &[u8], bit: usize| {
        let word = u128::from_le_bytes(window[..16].try_into().expect("16 bytes"));
        base.wrapping_add(((word >> (bit & 7)) as u64 & mask) as i64)
    };
    // Each value is one unaligned 16-byte load from `data` while 16 bytes remain there…
    let mut bit = from * w as usize;
    let mut k = from;
    while k < out.len() && (bit >> 3) + 16 <= data.len() {
        out[k] = value(&data[bit >> 3..], bit);
        bit += w as usize;
        k += 1;
    }
    // …and the last few read a zero-padded copy of the fewer than 16 bytes left.
    if k < out.len() {
        let at = bit >> 3;
        let mut pad = [0u8; 32];
        pad[..data.len() - at].copy_from_slice(&data[at..]);
        let mut b = bit & 7;
        while k < out.len() {
            out[k] = value(&pad[b >> 3..], b);
            b += w as usize;
            k += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn round_trip(xs: &[i64]) -> Vec<u8> {
        let mut b = Vec::new();
        pack_into(xs, &mut b);
        let mut u = Unpacker::new(&b, xs.len(), b.len());
        for (i, &x) in xs.iter().enumerate() {
            assert_eq!(u.next_value().expect("decodes"), x, "value {i}");
        }
        assert!(u.is_done());
        b
    }

    #[test]
    fn golden_bytes() {
        // base 5 (zz 10), width 2 (spans 0..=3), values 0,3,1,2 → 0b10_01_11_00.
        assert_eq!(round_trip(&[5, 8, 6, 7]), vec![10, 2, 0b1001_1100]);
        // Equal values: base and width 0, no payload.
        assert_eq!(round_trip(&[-3; 10]), vec![5, 0]);
        // Two frames: the second starts its own base.
        let xs: Vec<i64> = (0..FRAME as i64 + 1).map(|i| if i < FRAME as i64 { 1 } else { 100 }).collect();
        assert_eq!(round_trip(&xs), vec![2, 0, 0xc8, 0x01, 0]);
    }

    #[test]
    fn every_width_unpacks_with_and_without_bytes_after_the_frame() {
        // Per width, frames of lengths around the groups of eight, holding 0 and the widest value (so
        // that frames of four values or more take exactly that width); the stream alone (the last
        // frame has no bytes after it) and followed by a frame of all-ones bits (which must not leak
        // into the values).
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        for w in 0..=64u32 {
            for len in [1usize, 7, 8, 9, 15, 16, 17, 63, 64, 100, 127, 128, 129, 300] {
                let xs: Vec<i64> = (0..len)
                    .map(|i| {
                        rng ^= rng << 13;
                        rng ^= rng >> 7;
                        rng ^= rng << 17;
                        let span = if w == 64 { u64::MAX } else { (1u64 << w) - 1 };
                        let v = match i % 5 {
                            1 => 0,
                            3 => span,
                            _ => rng & span,
                        };
                        (v as i64).wrapping_add(-12345)
                    })
                    .collect();
                let mut b = Vec::new();
                pack_into(&xs, &mut b);
                let mut trailing = b.clone();
                pack_into(&[0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1, 0, -1], &mut trailing);
                for data in [&b, &trailing] {
                    let mut u = Unpacker::new(data, xs.len(), data.len());
                    for (i, &x) in xs.iter().enumerate() {
                        assert_eq!(u.next_value().expect("decodes"), x, "width {w}, length {len}, value {i}");
                    }
                }
            }
        }
    }

    #[test]
    fn extremes_round_trip() {
        round_trip(&[i64::MIN, i64::MAX, 0, -1, 1]);
        round_trip(&[i64::MAX; 3]);
        round_trip(&[]);
        let b = round_trip(&[i64::MIN, i64::MAX]);
        assert_eq!(b[b.len() - 17], 64, "width 64 for the full span");
    }

    #[test]
    fn truncation_and_bad_widths_are_errors() {
        let xs: Vec<i64> = (0..300).map(|i| i * 7919 % 1000).collect();
        let mut b = Vec::new();
        pack_into(&xs, &mut b);
        for cut in 0..b.len() {
            let mut u = Unpacker::new(&b[..cut], xs.len(), cut);
            assert!((0..xs.len()).map(|_| u.next_value()).any(|r| r.is_err()), "cut at {cut}");
        }
        let mut bad = b.clone();
        bad[1] = 65;
        assert!(Unpacker::new(&bad, xs.len(), bad.len()).next_value().is_err());
        // More values asked for than packed.
        let mut u = Unpacker::new(&b, xs.len(), b.len());
        for _ in 0..xs.len() {
            u.next_value().expect("decodes");
        }
        assert!(u.next_value().is_err());
    }

    proptest! {
        #[test]
        fn random_streams_round_trip(xs in proptest::collection::vec(any::<i64>(), 0..600), small in proptest::collection::vec(-300i64..300, 0..600)) {
            round_trip(&xs);
            let b = round_trip(&small);
            // Never more than a varint's worth per value plus a frame header.
            prop_assert!(b.len() <= small.len() * 2 + small.len().div_ceil(FRAME) * 3);
        }

        /// Skips (whole frames summed from their bits, frames entered part way) and single reads in any
        /// mix give the values' sums and the values a plain read gives.
        #[test]
        fn skips_sum_what_they_pass_and_reads_go_on_after_them(
            xs in proptest::collection::vec(any::<i64>(), 1..700),
            small in proptest::collection::vec(-70i64..70, 1..700),
            ops in proptest::collection::vec((0usize..300, 0usize..3), 1..12),
        ) {
            for xs in [&xs, &small] {
                let mut b = Vec::new();
                pack_into(xs, &mut b);
                let mut u = Unpacker::new(&b, xs.len(), b.len());
                let mut i = 0;
                for &(k, reads) in &ops {
                    let k = k.min(xs.len() - i);
                    let (sum, sums) = u.skip_sums(k).expect("skips");
                    let (mut s, mut ss) = (0i64, 0i64);
                    for &x in &xs[i..i + k] {
                        s = s.wrapping_add(x);
                        ss = ss.wrapping_add(s);
                    }
                    prop_assert_eq!((sum, sums), (s, ss), "skip {} at {}", k, i);
                    i += k;
                    for _ in 0..reads.min(xs.len() - i) {
                        prop_assert_eq!(u.next_value().expect("reads"), xs[i], "value {}", i);
                        i += 1;
                    }
                }
                let (rest, _) = u.skip_sums(xs.len() - i).expect("the rest");
                prop_assert_eq!(rest, xs[i..].iter().fold(0i64, |a, x| a.wrapping_add(*x)));
                prop_assert!(u.is_done());
                prop_assert!(u.skip_sums(1).is_err() || xs.is_empty());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300), n in 0usize..1000, k in 0usize..400) {
            let mut u = Unpacker::new(&bytes, n, bytes.len());
            let _ = u.skip_sums(k.min(n));
            for _ in 0..n {
                if u.next_value().is_err() {
                    break;
                }
            }
        }
    }
}
