//! Small binary helpers shared by the block files: big-endian integers, (zig-zag) varints, CRC32C, and a
//! bounds-checked decoder whose every failure is an [`Error::Corruption`] naming the file and the absolute
//! byte offset. Nothing here panics on any input: every read goes through `get`.

use crate::Error;

/// Appends `v` as an unsigned LEB128 varint.
pub(crate) fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Appends `v` zig-zag encoded as an unsigned varint (small magnitudes of either sign stay short).
pub(crate) fn put_varint(out: &mut Vec<u8>, v: i64) {
    put_uvarint(out, ((v << 1) ^ (v >> 63)) as u64);
}

pub(crate) fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// A cursor over `buf`, whose first byte sits at `base` in `file`. Errors carry the absolute offset of the
/// read that failed.
pub(crate) struct Dec<'a, 'f> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
    file: &'f str,
}

impl<'a, 'f> Dec<'a, 'f> {
    pub(crate) fn new(buf: &'a [u8], base: u64, file: &'f str) -> Self {
        Self { buf, pos: 0, base, file }
    }

    /// Absolute offset (in the file) of the next byte to read.
    pub(crate) fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    pub(crate) fn pos(&self) -> usize {
        self.pos
    }

    pub(crate) fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    pub(crate) fn err(&self, reason: impl Into<String>) -> Error {
        Error::corruption(self.file, self.offset(), reason)
    }

    pub(crate) fn bytes(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if n > self.remaining() {
            return Err(self.err(format!("need {n} bytes, {} left", self.remaining())));
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    pub(crate) fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.bytes(1)?[0])
    }

    pub(crate) fn u32(&mut self) -> Result<u32, Error> {
        let b = self.bytes(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn u64(&mut self) -> Result<u64, Error> {
        let b = self.bytes(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    pub(crate) fn uvarint(&mut self) -> Result<u64, Error> {
        let start = self.pos;
        let mut v: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&b) = self.buf.get(self.pos) else {
                self.pos = start;
                return Err(self.err("truncated varint"));
            };
            self.pos += 1;
            if shift == 63 && b > 1 {
                self.pos = start;
                return Err(self.err("varint overflows 64 bits"));
            }
            v |= u64::from(b & 0x7f) << shift;
            if b < 0x80 {
                return Ok(v);
            }
            shift += 7;
            if shift > 63 {
                self.pos = start;
                return Err(self.err("varint overflows 64 bits"));
            }
        }
    }

    pub(crate) fn varint(&mut self) -> Result<i64, Error> {
        let u = self.uvarint()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }

    /// A varint that must fit a `usize` no larger than what is left (a length prefix).
    pub(crate) fn len_prefix(&mut self) -> Result<usize, Error> {
        let at = self.offset();
        let n = self.uvarint()?;
        if n > self.remaining() as u64 {
            return Err(Error::corruption(self.file, at, format!("length {n} exceeds the {} bytes left", self.remaining())));
        }
        Ok(n as usize)
    }

    /// A length-prefixed UTF-8 string.
    pub(crate) fn str(&mut self) -> Result<&'a str, Error> {
        let n = self.len_prefix()?;
        let at = self.offset();
        let b = self.bytes(n)?;
        std::str::from_utf8(b).map_err(|_| Error::corruption(self.file, at, "string is not valid UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_garbage() {
        let vals = [0i64, 1, -1, 63, -64, 64, i64::MAX, i64::MIN, 1 << 40];
        let mut buf = Vec::new();
        for v in vals {
            put_varint(&mut buf, v);
            put_uvarint(&mut buf, v as u64);
        }
        let mut d = Dec::new(&buf, 0, "x");
        for v in vals {
            assert_eq!(d.varint().expect("valid"), v);
            assert_eq!(d.uvarint().expect("valid"), v as u64);
        }
        assert!(d.is_empty());
        let bad = [0xffu8; 11];
        assert!(Dec::new(&bad, 0, "x").uvarint().is_err());
        assert!(Dec::new(&[0x80], 0, "x").uvarint().is_err());
        let e = Dec::new(&[1, 2], 100, "f").u32().expect_err("short");
        assert!(matches!(e, Error::Corruption { offset: 100, .. }), "{e}");
    }
}
