//! The byte format (normative description with diagrams: `docs/format/wal.md`).
//!
//! ```text
//! segment  := segment_header record*
//! segment_header (8 bytes) := "TWAL" version:u8(=1) reserved:[u8;3](=0)
//! record (12 + len bytes)  := len:u32le payload_crc:u32le header_crc:u32le payload:[u8; len]
//!   payload_crc = crc32c(payload)
//!   header_crc  = crc32c(bytes 0..8 of the record header)
//! ```

/// First four bytes of every segment file.
pub const SEGMENT_MAGIC: [u8; 4] = *b"TWAL";
/// Current segment format version (byte 4 of the segment header).
pub const SEGMENT_VERSION: u8 = 1;
/// Size of the segment header.
pub const SEGMENT_HEADER_BYTES: u64 = 8;
/// Size of a record's frame header.
pub const RECORD_HEADER_BYTES: usize = 12;
/// Largest record payload (the length field is a u32).
pub const MAX_RECORD_BYTES: usize = u32::MAX as usize;

pub(crate) const CHECKPOINT_PREFIX: &str = "checkpoint.";
pub(crate) const TMP_SUFFIX: &str = ".tmp";

/// The 8-byte segment header.
pub(crate) fn segment_header() -> [u8; SEGMENT_HEADER_BYTES as usize] {
    let mut h = [0u8; SEGMENT_HEADER_BYTES as usize];
    h[..4].copy_from_slice(&SEGMENT_MAGIC);
    h[4] = SEGMENT_VERSION;
    h
}

pub(crate) fn segment_header_ok(h: &[u8]) -> bool {
    h.len() == SEGMENT_HEADER_BYTES as usize && h[..4] == SEGMENT_MAGIC && h[4] == SEGMENT_VERSION && h[5..8] == [0, 0, 0]
}

/// Appends the frame header and payload of one record to `buf`.
pub(crate) fn encode_record(buf: &mut Vec<u8>, payload: &[u8]) {
    debug_assert!(payload.len() <= MAX_RECORD_BYTES);
    let mut h = [0u8; RECORD_HEADER_BYTES];
    h[0..4].copy_from_slice(&(payload.len() as u32).to_le_bytes());
    h[4..8].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    let hcrc = crc32c::crc32c(&h[0..8]);
    h[8..12].copy_from_slice(&hcrc.to_le_bytes());
    buf.extend_from_slice(&h);
    buf.extend_from_slice(payload);
}

/// A decoded record header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RecordHeader {
    pub len: u32,
    pub payload_crc: u32,
}

/// Decodes a record header; `None` if its own checksum does not match.
pub(crate) fn decode_record_header(h: &[u8; RECORD_HEADER_BYTES]) -> Option<RecordHeader> {
    let len = u32::from_le_bytes([h[0], h[1], h[2], h[3]]);
    let payload_crc = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
    let hcrc = u32::from_le_bytes([h[8], h[9], h[10], h[11]]);
    (crc32c::crc32c(&h[0..8]) == hcrc).then_some(RecordHeader { len, payload_crc })
}

/// File name of segment `index`: 8 zero-padded decimal digits (more digits past 99,999,999).
pub fn segment_file_name(index: u64) -> String {
    format!("{index:08}")
}

/// Directory name of the checkpoint covering segments `< upto_segment`.
pub fn checkpoint_dir_name(upto_segment: u64) -> String {
    format!("{CHECKPOINT_PREFIX}{upto_segment:08}")
}

/// Parses a segment file name (all decimal digits, at least 8).
pub(crate) fn parse_segment_name(name: &str) -> Option<u64> {
    if name.len() < 8 || !name.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

/// Parses a finished checkpoint dir name (`checkpoint.NNNNNNNN`, no `.tmp`).
pub(crate) fn parse_checkpoint_name(name: &str) -> Option<u64> {
    parse_segment_name(name.strip_prefix(CHECKPOINT_PREFIX)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn golden_record_bytes() {
        let mut buf = vec![0xEE];
        encode_record(&mut buf, b"abc");
        assert_eq!(buf.len(), 1 + RECORD_HEADER_BYTES + 3);
        assert_eq!(&buf[1..5], &[3, 0, 0, 0]);
        // CRC32C("abc") = 0x364B3FB7 (RFC 3720 style check value).
        assert_eq!(&buf[5..9], &0x364B_3FB7u32.to_le_bytes());
        let h: [u8; RECORD_HEADER_BYTES] = buf[1..13].try_into().expect("12 bytes");
        let d = decode_record_header(&h).expect("valid header");
        assert_eq!(d.len, 3);
        assert_eq!(&buf[13..], b"abc");
        // An all-zero header must never decode (a zero-filled tail is not a record).
        assert!(decode_record_header(&[0; RECORD_HEADER_BYTES]).is_none());
    }

    #[test]
    fn names() {
        assert_eq!(segment_file_name(7), "00000007");
        assert_eq!(parse_segment_name("00000007"), Some(7));
        assert_eq!(parse_segment_name("123456789"), Some(123_456_789));
        assert_eq!(parse_segment_name("0000007"), None);
        assert_eq!(parse_segment_name("0000000a"), None);
        assert_eq!(parse_checkpoint_name("checkpoint.00000012"), Some(12));
        assert_eq!(parse_checkpoint_name("checkpoint.00000012.tmp"), None);
        assert_eq!(checkpoint_dir_name(12), "checkpoint.00000012");
    }
}
