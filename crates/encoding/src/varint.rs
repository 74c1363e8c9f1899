//! Go-compatible variable-length integers (`encoding/binary`: `PutUvarint`, `PutVarint`, `Uvarint`,
//! `Varint`).
//!
//! Unsigned values are little-endian base-128 groups, 7 bits per byte with the high bit meaning "more";
//! signed values are zig-zag mapped first (`0,-1,1,-2,… → 0,1,2,3,…`). At most 10 bytes; like Go's
//! `binary.Uvarint` we reject an 11th byte and a 10th byte above 1 as overflow. Non-minimal encodings
//! (e.g. `0x80 0x00`) are accepted, as Go accepts them.
//!
//! Writers append to a caller's `Vec<u8>`; readers take a slice and return the value with the unread tail.

/// Maximum encoded length of a 64-bit varint.
pub const MAX_VARINT_LEN64: usize = 10;

/// Why a varint could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum VarintError {
    /// The slice ended before the last byte of the varint (one without the continuation bit).
    #[error("varint truncated after {read} bytes")]
    Truncated { read: usize },
    /// The value does not fit in 64 bits.
    #[error("varint overflows 64 bits")]
    Overflow,
}

/// Appends `v` as a uvarint (Go's `binary.PutUvarint`).
#[inline]
pub fn put_uvarint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends `v` zig-zag encoded as a varint (Go's `binary.PutVarint`).
#[inline]
pub fn put_varint(buf: &mut Vec<u8>, v: i64) {
    put_uvarint(buf, zigzag_encode(v));
}

/// Encoded length of `v` as a uvarint (1..=10).
#[inline]
pub fn uvarint_len(v: u64) -> usize {
    // Each byte carries 7 bits; 0 still takes one byte.
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Encoded length of `v` as a zig-zag varint.
#[inline]
pub fn varint_len(v: i64) -> usize {
    uvarint_len(zigzag_encode(v))
}

#[inline]
pub fn zigzag_encode(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

#[inline]
pub fn zigzag_decode(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Reads a uvarint from the front of `data`, returning it and the unread tail (Go's `binary.Uvarint`).
#[inline]
pub fn read_uvarint(data: &[u8]) -> Result<(u64, &[u8]), VarintError> {
    let mut x: u64 = 0;
    let mut shift = 0u32;
    for (i, &b) in data.iter().enumerate() {
        if i == MAX_VARINT_LEN64 {
            return Err(VarintError::Overflow);
        }
        if b < 0x80 {
            if i == MAX_VARINT_LEN64 - 1 && b > 1 {
                return Err(VarintError::Overflow);
            }
            return Ok((x | u64::from(b) << shift, &data[i + 1..]));
        }
        x |= u64::from(b & 0x7f) << shift;
        shift += 7;
    }
    Err(VarintError::Truncated { read: data.len().min(MAX_VARINT_LEN64) })
}

/// Reads a zig-zag varint from the front of `data`, returning it and the unread tail (Go's `binary.Varint`).
#[inline]
pub fn read_varint(data: &[u8]) -> Result<(i64, &[u8]), VarintError> {
    let (u, rest) = read_uvarint(data)?;
    Ok((zigzag_decode(u), rest))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn golden_bytes_match_go() {
        // Values and encodings as Go's encoding/binary produces them.
        let cases: &[(u64, &[u8])] = &[
            (0, &[0x00]),
            (1, &[0x01]),
            (127, &[0x7f]),
            (128, &[0x80, 0x01]),
            (300, &[0xac, 0x02]),
            (u64::MAX, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]),
        ];
        for &(v, want) in cases {
            let mut buf = vec![0xEE];
            put_uvarint(&mut buf, v);
            assert_eq!(&buf[1..], want, "{v}");
            assert_eq!(uvarint_len(v), want.len());
            assert_eq!(read_uvarint(&buf[1..]), Ok((v, &[][..])));
        }
        let signed: &[(i64, &[u8])] = &[(0, &[0x00]), (-1, &[0x01]), (1, &[0x02]), (-64, &[0x7f]), (64, &[0x80, 0x01])];
        for &(v, want) in signed {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            assert_eq!(buf, want, "{v}");
            assert_eq!(varint_len(v), want.len());
        }
        // Prometheus' first timestamp in the vectors: 1700000000000.
        let mut buf = Vec::new();
        put_varint(&mut buf, 1_700_000_000_000);
        assert_eq!(buf, [0x80, 0xa0, 0xab, 0xfe, 0xf9, 0x62]);
    }

    #[test]
    fn returns_the_unread_tail() {
        let mut buf = Vec::new();
        put_uvarint(&mut buf, 300);
        put_varint(&mut buf, -3);
        buf.push(0xAA);
        let (a, rest) = read_uvarint(&buf).expect("valid");
        let (b, rest) = read_varint(rest).expect("valid");
        assert_eq!((a, b, rest), (300, -3, &[0xAA][..]));
    }

    #[test]
    fn errors_are_typed() {
        assert_eq!(read_uvarint(&[]), Err(VarintError::Truncated { read: 0 }));
        assert_eq!(read_uvarint(&[0x80, 0x80]), Err(VarintError::Truncated { read: 2 }));
        assert_eq!(
            read_uvarint(&[0xff; 9].iter().copied().chain([0x02]).collect::<Vec<_>>()),
            Err(VarintError::Overflow)
        );
        assert_eq!(read_uvarint(&[0x80; 11]), Err(VarintError::Overflow));
        // Non-minimal but in range: accepted like Go.
        assert_eq!(read_uvarint(&[0x80, 0x00]), Ok((0, &[][..])));
    }

    proptest! {
        #[test]
        fn uvarint_round_trips(v in any::<u64>(), prefix in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut buf = prefix.clone();
            put_uvarint(&mut buf, v);
            prop_assert_eq!(buf.len() - prefix.len(), uvarint_len(v));
            prop_assert_eq!(read_uvarint(&buf[prefix.len()..]), Ok((v, &[][..])));
        }

        #[test]
        fn varint_round_trips(v in any::<i64>()) {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            prop_assert_eq!(read_varint(&buf), Ok((v, &[][..])));
        }

        #[test]
        fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = read_uvarint(&data);
            let _ = read_varint(&data);
        }
    }
}
