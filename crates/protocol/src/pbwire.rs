//! A zero-copy protobuf wire reader for the hot decode paths.
//!
//! prost materialises every nested message (a `Vec<u8>` per label name and value, a `Vec` per series),
//! which made remote-write decoding cost ~25 allocations per sample; this reader walks the buffer and
//! hands out borrowed slices instead, so the decoder allocates only what it keeps. It follows the
//! protobuf encoding rules prost follows (any field order, unknown fields skipped, groups skipped,
//! packed or unpacked repeated scalars, at most 10-byte varints, nesting depth bounded) and is checked
//! against prost by a differential proptest.

/// Why a buffer is not valid protobuf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct WireError(pub String);

pub(crate) const WT_VARINT: u8 = 0;
pub(crate) const WT_FIXED64: u8 = 1;
pub(crate) const WT_LEN: u8 = 2;
const WT_START_GROUP: u8 = 3;
const WT_END_GROUP: u8 = 4;
pub(crate) const WT_FIXED32: u8 = 5;

/// prost's recursion limit.
const MAX_DEPTH: u32 = 100;

#[derive(Debug, Clone, Copy)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    #[inline]
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.pos >= self.buf.len()
    }

    #[cold]
    #[inline(never)]
    fn err(&self, what: &str) -> WireError {
        WireError(format!("{what} at offset {}", self.pos))
    }

    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64, WireError> {
        let mut v: u64 = 0;
        for i in 0..10 {
            let Some(&b) = self.buf.get(self.pos) else {
                return Err(self.err("truncated varint"));
            };
            self.pos += 1;
            if i == 9 && b > 1 {
                return Err(self.err("invalid varint"));
            }
            v |= ((b & 0x7f) as u64) << (7 * i);
            if b < 0x80 {
                return Ok(v);
            }
        }
        Err(self.err("invalid varint"))
    }

    /// The next field key: (tag, wire type).
    #[inline]
    pub(crate) fn key(&mut self) -> Result<(u32, u8), WireError> {
        let k = self.varint()?;
        if k > u32::MAX as u64 {
            return Err(self.err("invalid key"));
        }
        let wt = (k & 7) as u8;
        let tag = (k >> 3) as u32;
        if tag == 0 {
            return Err(self.err("invalid tag 0"));
        }
        if wt > 5 {
            return Err(self.err(&format!("invalid wire type {wt}")));
        }
        Ok((tag, wt))
    }

    #[inline]
    pub(crate) fn fixed64(&mut self) -> Result<u64, WireError> {
        let b = self.buf.get(self.pos..self.pos + 8).ok_or_else(|| self.err("truncated fixed64"))?;
        self.pos += 8;
        Ok(u64::from_le_bytes(b.try_into().expect("8 bytes")))
    }

    #[inline]
    pub(crate) fn bytes(&mut self) -> Result<&'a [u8], WireError> {
        let n = self.varint()?;
        let rest = self.buf.len() - self.pos;
        if n > rest as u64 {
            return Err(self.err(&format!("length {n} exceeds the {rest} remaining bytes")));
        }
        let b = &self.buf[self.pos..self.pos + n as usize];
        self.pos += n as usize;
        Ok(b)
    }

    /// Skips a field's value of wire type `wt` (whose key was just read with `tag`).
    pub(crate) fn skip(&mut self, tag: u32, wt: u8) -> Result<(), WireError> {
        self.skip_depth(tag, wt, 0)
    }

    fn skip_depth(&mut self, tag: u32, wt: u8, depth: u32) -> Result<(), WireError> {
        match wt {
            WT_VARINT => {
                self.varint()?;
            }
            WT_FIXED64 => {
                self.fixed64()?;
            }
            WT_LEN => {
                self.bytes()?;
            }
            WT_FIXED32 => {
                if self.buf.len() - self.pos < 4 {
                    return Err(self.err("truncated fixed32"));
                }
                self.pos += 4;
            }
            WT_START_GROUP => {
                if depth >= MAX_DEPTH {
                    return Err(self.err("recursion limit reached"));
                }
                loop {
                    if self.is_empty() {
                        return Err(self.err("unterminated group"));
                    }
                    let (t, w) = self.key()?;
                    if w == WT_END_GROUP {
                        if t != tag {
                            return Err(self.err("unexpected end group tag"));
                        }
                        return Ok(());
                    }
                    self.skip_depth(t, w, depth + 1)?;
                }
            }
            _ => return Err(self.err("unexpected end group")),
        }
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn wt_err(&self, tag: u32, got: u8, want: u8) -> WireError {
        self.err(&format!("invalid wire type {got} for field {tag} (expected {want})"))
    }

    /// Checks that wire type `got` is `want` for field `tag`.
    #[inline]
    pub(crate) fn expect_wt(&self, tag: u32, got: u8, want: u8) -> Result<(), WireError> {
        if got == want {
            Ok(())
        } else {
            Err(self.wt_err(tag, got, want))
        }
    }

    /// Walks a whole message generically (keys, lengths, groups).
    #[cfg(test)]
    pub(crate) fn check_message(buf: &'a [u8], depth: u32) -> Result<(), WireError> {
        if depth > MAX_DEPTH {
            return Err(WireError("recursion limit reached".into()));
        }
        let mut r = Reader::new(buf);
        while !r.is_empty() {
            let (t, w) = r.key()?;
            r.skip_depth(t, w, depth)?;
        }
        Ok(())
    }
}

/// Reads a repeated uint32 field occurrence (packed or not), appending to `out`. prost truncates
/// varints to 32 bits for uint32 fields; so do we.
pub(crate) fn read_u32s(r: &mut Reader<'_>, tag: u32, wt: u8, out: &mut Vec<u32>) -> Result<(), WireError> {
    match wt {
        WT_VARINT => out.push(r.varint()? as u32),
        WT_LEN => {
            let mut p = Reader::new(r.bytes()?);
            while !p.is_empty() {
                out.push(p.varint()? as u32);
            }
        }
        _ => r.expect_wt(tag, wt, WT_VARINT)?,
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_and_limits() {
        assert_eq!(Reader::new(&[0x96, 0x01]).varint(), Ok(150));
        assert!(Reader::new(&[0x80]).varint().is_err());
        assert!(Reader::new(&[0xff; 11]).varint().is_err());
        assert_eq!(Reader::new(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]).varint(), Ok(u64::MAX));
        assert!(Reader::new(&[0x05, 1, 2]).bytes().is_err());
        // A group: start tag 1, a varint field 2, end tag 1.
        let mut r = Reader::new(&[0x0b, 0x10, 0x01, 0x0c]);
        let (t, w) = r.key().expect("key");
        r.skip(t, w).expect("group skipped");
        assert!(r.is_empty());
        assert!(Reader::check_message(&[0x0b, 0x10, 0x01, 0x14], 0).is_err(), "mismatched end group");
    }
}
