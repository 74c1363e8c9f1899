//! CRC32-Castagnoli, the checksum Prometheus uses for chunks, index sections, WAL records and remote-read
//! frames. A thin wrapper over the `crc32c` crate (hardware-accelerated where the CPU allows) so every
//! Tessera crate computes it the same way.

/// CRC32C of `data`.
#[inline]
pub fn crc32c(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

/// Extends a running CRC32C (`crc` from a previous call, 0 to start) with `data`, so that
/// `crc32c_append(crc32c(a), b) == crc32c(a ++ b)`.
#[inline]
pub fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    crc32c::crc32c_append(crc, data)
}

/// CRC32C of `data` as 4 big-endian bytes, the way Prometheus stores it on disk and on the wire.
#[inline]
pub fn crc32c_be_bytes(data: &[u8]) -> [u8; 4] {
    crc32c(data).to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_answer_and_append() {
        // The standard CRC-32C check value.
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        assert_eq!(crc32c_append(crc32c(b"1234"), b"56789"), 0xE306_9283);
        assert_eq!(crc32c_be_bytes(b"123456789"), [0xE3, 0x06, 0x92, 0x83]);
        assert_eq!(crc32c(b""), 0);
    }
}
