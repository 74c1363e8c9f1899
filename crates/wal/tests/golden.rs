//! Frozen on-disk bytes: a change here is a format change and needs a version bump (docs/format/wal.md).

use tessera_wal::{read_all, segment_file_name, FsyncPolicy, Wal, WalError, WalOptions};

/// Segment `00000000` after logging `b"abc"` and an empty record.
const GOLDEN_SEGMENT: &str = concat!(
    "5457414c01000000", // "TWAL", version 1, reserved
    "03000000",         // len = 3
    "b73f4b36",         // crc32c("abc") = 0x364b3fb7
    "ee3e6cbf",         // header crc: crc32c of the 8 bytes before
    "616263",           // "abc"
    "00000000",         // len = 0
    "00000000",         // crc32c("") = 0
    "8ab2288c",         // header crc
);

#[test]
fn segment_bytes_are_frozen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(dir.path(), WalOptions { segment_bytes: 1 << 20, fsync: FsyncPolicy::Never }).expect("open");
    w.log(b"abc").expect("log");
    w.log(b"").expect("log");
    w.close().expect("close");
    let bytes = std::fs::read(dir.path().join(segment_file_name(0))).expect("read");
    assert_eq!(hex(&bytes), GOLDEN_SEGMENT);
    // The header checksums are what the format says they are.
    assert_eq!(hex(&crc32c::crc32c(&[3, 0, 0, 0, 0xb7, 0x3f, 0x4b, 0x36]).to_le_bytes()), "ee3e6cbf");
    assert_eq!(hex(&crc32c::crc32c(&[0; 8]).to_le_bytes()), "8ab2288c");
    let want = GOLDEN_SEGMENT;

    // And a reader of this crate version reads the frozen bytes.
    let dir2 = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir2.path().join(segment_file_name(0)), unhex(want)).expect("write");
    let mut got = Vec::new();
    read_all::<WalError>(dir2.path(), |r| {
        got.push(r.to_vec());
        Ok(())
    })
    .expect("replay");
    assert_eq!(got, vec![b"abc".to_vec(), Vec::new()]);
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex")).collect()
}
