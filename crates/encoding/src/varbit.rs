//! Prometheus' variable bit-width integers (`tsdb/chunkenc/varbit.go`), used by the native-histogram
//! chunks: a unary prefix of 1s (ended by a 0, at most 8 bits) picks the payload width.
//!
//! ```text
//! prefix     payload  signed range (putVarbitInt)          unsigned range (putVarbitUint)
//! 0          —        0                                    0
//! 10         3        [-3, 4]                              [0, 7]
//! 110        6        [-31, 32]                            [0, 63]
//! 1110       9        [-255, 256]                          [0, 511]
//! 11110      12       [-2047, 2048]                        [0, 4095]
//! 111110     18       [-131071, 131072]                    [0, 262143]
//! 1111110    25       [-16777215, 16777216]                [0, 33554431]
//! 11111110   56       [-(2^55-1), 2^55]                    [0, 2^56-1]
//! 11111111   64       everything else                      everything else
//! ```
//! Signed payloads are two's complement in their width; a payload above 2^(w-1) is negative.

use crate::bstream::{BitReader, BitWriter};

/// Payload widths, indexed by the number of leading 1s of the prefix (0..=8).
const WIDTHS: [u32; 9] = [0, 3, 6, 9, 12, 18, 25, 56, 64];

/// Prometheus' `bitRange`: `[-(2^(n-1) - 1), 2^(n-1)]`.
#[inline]
fn bit_range(x: i64, nbits: u32) -> bool {
    let half = 1i64 << (nbits - 1);
    -(half - 1) <= x && x <= half
}

/// Writes `v` (upstream `putVarbitInt`).
pub(crate) fn put_varbit_int(w: &mut BitWriter<'_>, v: i64) {
    if v == 0 {
        w.write_bit(false);
        return;
    }
    let ones = match WIDTHS[1..8].iter().position(|&n| bit_range(v, n)) {
        Some(i) => i as u32 + 1,
        None => 8,
    };
    write_prefixed(w, ones, v as u64);
}

/// Writes `v` (upstream `putVarbitUint`).
pub(crate) fn put_varbit_uint(w: &mut BitWriter<'_>, v: u64) {
    if v == 0 {
        w.write_bit(false);
        return;
    }
    let ones = match WIDTHS[1..8].iter().position(|&n| 64 - v.leading_zeros() <= n) {
        Some(i) => i as u32 + 1,
        None => 8,
    };
    write_prefixed(w, ones, v);
}

#[inline]
fn write_prefixed(w: &mut BitWriter<'_>, ones: u32, payload: u64) {
    // `ones` 1s, then a 0 unless the prefix is the full 8 bits.
    let (prefix, plen) = if ones == 8 { (0xff, 8) } else { (((1u64 << ones) - 1) << 1, ones + 1) };
    w.write_bits(prefix, plen);
    w.write_bits(payload, WIDTHS[ones as usize]);
}

/// Reads the prefix and raw payload; `None` when the bits run out.
#[inline]
fn read_prefixed(r: &mut BitReader<'_>) -> Option<(u32, u64)> {
    let mut ones = 0;
    while ones < 8 {
        if !r.read_bit()? {
            break;
        }
        ones += 1;
    }
    let width = WIDTHS[ones as usize];
    Some((width, r.read_bits(width)?))
}

/// Reads a value written by [`put_varbit_int`] (upstream `readVarbitInt`).
pub(crate) fn read_varbit_int(r: &mut BitReader<'_>) -> Option<i64> {
    let (width, mut bits) = read_prefixed(r)?;
    if width > 0 && width < 64 && bits > 1 << (width - 1) {
        bits = bits.wrapping_sub(1 << width);
    }
    Some(bits as i64)
}

/// Reads a value written by [`put_varbit_uint`] (upstream `readVarbitUint`).
pub(crate) fn read_varbit_uint(r: &mut BitReader<'_>) -> Option<u64> {
    read_prefixed(r).map(|(_, bits)| bits)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_every_width_boundary() {
        let mut ints = vec![0i64, 1, -1, i64::MIN, i64::MAX];
        let mut uints = vec![0u64, 1, u64::MAX];
        for n in [3u32, 6, 9, 12, 18, 25, 56] {
            let half = 1i64 << (n - 1);
            ints.extend([half, half + 1, -(half - 1), -half]);
            uints.extend([(1u64 << n) - 1, 1u64 << n]);
        }
        let mut buf = Vec::new();
        let mut w = BitWriter::new(&mut buf);
        for &v in &ints {
            put_varbit_int(&mut w, v);
        }
        for &v in &uints {
            put_varbit_uint(&mut w, v);
        }
        let mut r = BitReader::new(&buf);
        for &v in &ints {
            assert_eq!(read_varbit_int(&mut r), Some(v));
        }
        for &v in &uints {
            assert_eq!(read_varbit_uint(&mut r), Some(v));
        }
    }

    #[test]
    fn widths_match_upstream_comments() {
        // 4 fits '10' + 3 bits (5 bits), -4 needs '110' + 6 bits (9 bits).
        for (v, bits) in [(4i64, 5usize), (-3, 5), (-4, 9), (32, 9), (2048, 17), (1 << 55, 64), ((1 << 55) + 1, 72)] {
            let mut buf = Vec::new();
            let mut w = BitWriter::new(&mut buf);
            put_varbit_int(&mut w, v);
            assert_eq!(w.bit_len(), bits, "{v}");
        }
    }

    #[test]
    fn truncated_is_none() {
        let mut r = BitReader::new(&[0b1100_0000]);
        assert_eq!(read_varbit_int(&mut r), None);
    }
}
