//! Crash and damage recovery: torn tails, flipped bytes, repair, and poisoning through the fault fs.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use tessera_wal::fault::FaultFs;
use tessera_wal::{
    read_all, repair, segment_file_name, CorruptionKind, FsyncPolicy, Wal, WalError, WalOptions, WalReader,
    RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES,
};

fn opts(segment_bytes: u64) -> WalOptions {
    WalOptions { segment_bytes, fsync: FsyncPolicy::Never }
}

fn rec(i: usize) -> Vec<u8> {
    format!("record-{i:04}-{}", "x".repeat(i % 17)).into_bytes()
}

fn replay(dir: &Path) -> Result<Vec<Vec<u8>>, WalError> {
    let mut out = Vec::new();
    read_all::<WalError>(dir, |r| {
        out.push(r.to_vec());
        Ok(())
    })?;
    Ok(out)
}

/// Writes `n` records into a WAL with one segment (large segments), returns the segment path.
fn write_single_segment(dir: &Path, n: usize) -> std::path::PathBuf {
    let mut w = Wal::open(dir, opts(1 << 20)).expect("open");
    for i in 0..n {
        w.log(&rec(i)).expect("log");
    }
    w.close().expect("close");
    dir.join(segment_file_name(0))
}

/// Byte offset where record `i` starts in a segment written by `write_single_segment`.
fn offset_of(i: usize) -> u64 {
    SEGMENT_HEADER_BYTES + (0..i).map(|j| (RECORD_HEADER_BYTES + rec(j).len()) as u64).sum::<u64>()
}

fn flip_byte(path: &Path, at: u64) {
    let mut b = std::fs::read(path).expect("read");
    b[at as usize] ^= 0x40;
    std::fs::write(path, b).expect("write");
}

#[test]
fn torn_tail_mid_record_is_truncated_and_earlier_records_survive() {
    for cut in [1, RECORD_HEADER_BYTES as u64 - 1, RECORD_HEADER_BYTES as u64, RECORD_HEADER_BYTES as u64 + 3] {
        let dir = tempfile::tempdir().expect("tempdir");
        let seg = write_single_segment(dir.path(), 20);
        let at = offset_of(19);
        OpenOptions::new().write(true).open(&seg).expect("open").set_len(at + cut).expect("truncate");
        let got = replay(dir.path()).expect("torn tail is not an error");
        assert_eq!(got, (0..19).map(rec).collect::<Vec<_>>(), "cut {cut}");
        assert_eq!(std::fs::metadata(&seg).expect("meta").len(), at, "file truncated to last good record");
        // The WAL keeps working: reopen, append, replay.
        let mut w = Wal::open(dir.path(), opts(1 << 20)).expect("reopen");
        w.log(b"after-crash").expect("log");
        w.close().expect("close");
        let got = replay(dir.path()).expect("replay");
        assert_eq!(got.len(), 20);
        assert_eq!(got[19], b"after-crash");
    }
}

#[test]
fn zero_filled_tail_is_truncated() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seg = write_single_segment(dir.path(), 10);
    let len = std::fs::metadata(&seg).expect("meta").len();
    OpenOptions::new().append(true).open(&seg).expect("open").write_all(&[0u8; 5000]).expect("zeros");
    assert_eq!(replay(dir.path()).expect("replay"), (0..10).map(rec).collect::<Vec<_>>());
    assert_eq!(std::fs::metadata(&seg).expect("meta").len(), len);
}

#[test]
fn last_record_with_zeroed_payload_page_is_a_torn_tail() {
    // A crash can extend the file but leave a hole: header present, payload zeros, ends at EOF.
    let dir = tempfile::tempdir().expect("tempdir");
    let seg = write_single_segment(dir.path(), 10);
    let mut b = std::fs::read(&seg).expect("read");
    let at = offset_of(9) as usize + RECORD_HEADER_BYTES;
    b[at..].fill(0);
    std::fs::write(&seg, b).expect("write");
    assert_eq!(replay(dir.path()).expect("replay"), (0..9).map(rec).collect::<Vec<_>>());
    assert_eq!(std::fs::metadata(&seg).expect("meta").len(), offset_of(9));
}

#[test]
fn wal_open_repairs_torn_tail_of_last_segment_before_starting_a_new_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seg = write_single_segment(dir.path(), 5);
    let len = std::fs::metadata(&seg).expect("meta").len();
    OpenOptions::new().write(true).open(&seg).expect("open").set_len(len - 2).expect("truncate");
    // No replay first: the writer must still not leave a torn record in a non-final segment.
    let mut w = Wal::open(dir.path(), opts(1 << 20)).expect("open");
    w.log(b"new").expect("log");
    w.close().expect("close");
    let mut want: Vec<Vec<u8>> = (0..4).map(rec).collect();
    want.push(b"new".to_vec());
    assert_eq!(replay(dir.path()).expect("replay"), want);
}

#[test]
fn flipped_byte_in_middle_record_is_reported_with_file_and_offset_then_repaired() {
    for (what, delta, kind) in [
        ("payload", RECORD_HEADER_BYTES as u64 + 2, CorruptionKind::PayloadChecksum),
        ("length", 0, CorruptionKind::HeaderChecksum),
        ("header crc", 9, CorruptionKind::HeaderChecksum),
    ] {
        let dir = tempfile::tempdir().expect("tempdir");
        let seg = write_single_segment(dir.path(), 30);
        let at = offset_of(12);
        flip_byte(&seg, at + delta);
        let err = replay(dir.path()).expect_err("corruption must be reported");
        let c = err.as_corruption().expect("a Corruption").clone();
        assert_eq!(c.path, seg, "{what}");
        assert_eq!(c.offset, at, "{what}");
        assert_eq!(c.segment, 0);
        assert_eq!(c.kind, kind, "{what}");
        let msg = err.to_string();
        assert!(msg.contains(&seg.display().to_string()) && msg.contains(&at.to_string()), "{msg}");

        // The reader returned every record before the damage.
        let mut r = WalReader::open(dir.path()).expect("reader");
        let mut n = 0;
        while let Ok(Some(_)) = r.next_record() {
            n += 1;
        }
        assert_eq!(n, 12);
        assert_eq!(r.next_record().expect("finished reader"), None);

        repair(dir.path(), &c).expect("repair");
        assert_eq!(replay(dir.path()).expect("replay after repair"), (0..12).map(rec).collect::<Vec<_>>());
        let mut w = Wal::open(dir.path(), opts(1 << 20)).expect("open after repair");
        w.log(b"works").expect("log");
        w.close().expect("close");
        assert_eq!(replay(dir.path()).expect("replay").last().map(Vec::as_slice), Some(&b"works"[..]));
    }
}

#[test]
fn corruption_in_an_earlier_segment_deletes_later_segments_on_repair() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(dir.path(), opts(200)).expect("open");
    for i in 0..40 {
        w.log(&rec(i)).expect("log");
    }
    let (_, last) = w.segment_range();
    w.close().expect("close");
    assert!(last >= 4);
    let seg1 = dir.path().join(segment_file_name(1));
    // A torn-looking end in a non-final segment is corruption, not a torn tail.
    let len = std::fs::metadata(&seg1).expect("meta").len();
    OpenOptions::new().write(true).open(&seg1).expect("open").set_len(len - 1).expect("truncate");
    let err = replay(dir.path()).expect_err("corruption");
    let c = err.as_corruption().expect("corruption").clone();
    assert_eq!((c.segment, c.kind), (1, CorruptionKind::Truncated));
    let before: usize = {
        let mut r = WalReader::open(dir.path()).expect("reader");
        let mut n = 0;
        while let Ok(Some(_)) = r.next_record() {
            n += 1;
        }
        n
    };
    repair(dir.path(), &c).expect("repair");
    assert!(!dir.path().join(segment_file_name(2)).exists());
    assert_eq!(replay(dir.path()).expect("replay").len(), before);
}

#[test]
fn missing_segment_is_reported_as_gap() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(dir.path(), opts(200)).expect("open");
    for i in 0..40 {
        w.log(&rec(i)).expect("log");
    }
    w.close().expect("close");
    std::fs::remove_file(dir.path().join(segment_file_name(2))).expect("rm");
    let err = replay(dir.path()).expect_err("gap");
    let c = err.as_corruption().expect("corruption").clone();
    assert_eq!((c.segment, c.kind, c.offset), (3, CorruptionKind::SegmentGap, 0));
    repair(dir.path(), &c).expect("repair");
    replay(dir.path()).expect("replay after repair");
}

#[test]
fn bad_segment_header_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seg = write_single_segment(dir.path(), 3);
    flip_byte(&seg, 1);
    let err = replay(dir.path()).expect_err("bad header");
    let c = err.as_corruption().expect("corruption").clone();
    assert_eq!((c.kind, c.offset), (CorruptionKind::BadSegmentHeader, 0));
    repair(dir.path(), &c).expect("repair");
    assert_eq!(replay(dir.path()).expect("replay"), Vec::<Vec<u8>>::new());
}

#[test]
fn failed_write_poisons_and_torn_write_is_recovered() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let mut w = Wal::open_with_fs(Arc::new(fs.clone()), dir.path(), opts(1 << 20)).expect("open");
    w.log(b"first").expect("log");
    fs.fail_next_write(RECORD_HEADER_BYTES + 3); // header + part of the payload reaches the file
    let err = w.log(b"second-record").expect_err("injected failure");
    assert!(matches!(err, WalError::Io { .. }), "{err}");
    assert!(w.is_poisoned());
    // Everything after the failure refuses to pretend.
    assert!(matches!(w.log(b"third"), Err(WalError::Poisoned)));
    assert!(matches!(w.log_many(&[b"x"]), Err(WalError::Poisoned)));
    assert!(matches!(w.sync(), Err(WalError::Poisoned)));
    assert!(matches!(w.next_segment(), Err(WalError::Poisoned)));
    assert!(matches!(w.close(), Err(WalError::Poisoned)));
    // Replay truncates the torn record; the WAL is usable again.
    assert_eq!(replay(dir.path()).expect("replay"), vec![b"first".to_vec()]);
    let mut w = Wal::open(dir.path(), opts(1 << 20)).expect("reopen");
    w.log(b"again").expect("log");
    w.close().expect("close");
    assert_eq!(replay(dir.path()).expect("replay"), vec![b"first".to_vec(), b"again".to_vec()]);
}

#[test]
fn failed_fsync_poisons() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let o = WalOptions { segment_bytes: 1 << 20, fsync: FsyncPolicy::Always };
    let mut w = Wal::open_with_fs(Arc::new(fs.clone()), dir.path(), o).expect("open");
    w.log(b"synced").expect("log");
    let s0 = fs.syncs();
    w.log(b"synced-2").expect("log");
    assert_eq!(fs.syncs(), s0 + 1, "Always policy fsyncs on each log");
    fs.fail_syncs_from_now();
    assert!(matches!(w.log(b"not-synced"), Err(WalError::Io { .. })));
    assert!(w.is_poisoned());
    assert!(matches!(w.log(b"later"), Err(WalError::Poisoned)));
    // The record was written (just not durable); replay sees it, as it would after a process crash.
    drop(w);
    assert_eq!(replay(dir.path()).expect("replay"), vec![b"synced".to_vec(), b"synced-2".to_vec(), b"not-synced".to_vec()]);
}

#[test]
fn failed_segment_creation_on_rotation_poisons() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let mut w = Wal::open_with_fs(Arc::new(fs.clone()), dir.path(), opts(128)).expect("open");
    w.log(&[1u8; 60]).expect("log");
    fs.plan().fail_create = true;
    assert!(matches!(w.log(&[2u8; 60]), Err(WalError::Io { .. })));
    assert!(matches!(w.log(&[3u8; 1]), Err(WalError::Poisoned)));
    drop(w);
    assert_eq!(replay(dir.path()).expect("replay"), vec![vec![1u8; 60]]);
}

#[test]
fn interval_policy_fsyncs_only_when_due() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    let o = WalOptions { segment_bytes: 1 << 20, fsync: FsyncPolicy::Interval(std::time::Duration::from_millis(200)) };
    let mut w = Wal::open_with_fs(Arc::new(fs.clone()), dir.path(), o).expect("open");
    let s0 = fs.syncs();
    for _ in 0..100 {
        w.log(b"fast").expect("log");
    }
    // 100 tiny writes take far less than 200 ms even on a loaded machine; allow one due fsync anyway.
    let s1 = fs.syncs();
    assert!(s1 - s0 <= 1, "no fsync per write under Interval ({} fsyncs)", s1 - s0);
    w.log(b"more").expect("log");
    std::thread::sleep(std::time::Duration::from_millis(250));
    let s2 = fs.syncs();
    w.sync_if_due().expect("sync_if_due");
    assert_eq!(fs.syncs(), s2 + 1, "a due interval fsyncs");
    w.sync_if_due().expect("nothing to sync");
    assert_eq!(fs.syncs(), s2 + 1, "no fsync when nothing was written since");
    std::thread::sleep(std::time::Duration::from_millis(250));
    w.log(b"due").expect("log");
    assert_eq!(fs.syncs(), s2 + 2, "log() fsyncs when the interval has elapsed");
    w.close().expect("close");
}

#[test]
fn corrupt_checkpoint_is_reported_as_such_and_repairable() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(dir.path(), opts(1 << 20)).expect("open");
    w.log(b"old").expect("log");
    let n = w.next_segment().expect("next");
    w.log(b"new").expect("log");
    w.close().expect("close");
    let cp = tessera_wal::write_checkpoint(dir.path(), n, (0..5).map(rec)).expect("checkpoint");
    let cp_seg = cp.join(segment_file_name(0));
    // Damage record 3 of the checkpoint; a torn-looking end of a checkpoint is corruption too.
    flip_byte(&cp_seg, offset_of(3) + RECORD_HEADER_BYTES as u64);
    let err = replay(dir.path()).expect_err("corruption");
    let c = err.as_corruption().expect("corruption").clone();
    assert!(c.in_checkpoint());
    assert_eq!((c.path.clone(), c.offset), (cp_seg.clone(), offset_of(3)));
    repair(dir.path(), &c).expect("repair");
    let mut want: Vec<Vec<u8>> = (0..3).map(rec).collect();
    want.push(b"new".to_vec());
    assert_eq!(replay(dir.path()).expect("replay"), want);

    let len = std::fs::metadata(&cp_seg).expect("meta").len();
    OpenOptions::new().write(true).open(&cp_seg).expect("open").set_len(len - 1).expect("truncate");
    let c = replay(dir.path()).expect_err("truncated checkpoint").as_corruption().expect("corruption").clone();
    assert_eq!((c.kind, c.offset), (CorruptionKind::Truncated, offset_of(2)));
    assert!(!WalReader::from_segment(dir.path(), n).expect("reader").segments().is_empty());
}

#[test]
fn from_segment_starts_at_the_given_segment_and_reports_positions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(dir.path(), opts(1 << 20)).expect("open");
    w.log(b"s0").expect("log");
    w.next_segment().expect("next");
    w.log(b"s1-a").expect("log");
    w.log(b"s1-b").expect("log");
    w.close().expect("close");
    let mut r = WalReader::from_segment(dir.path(), 1).expect("reader");
    assert_eq!(r.next_record().expect("next"), Some(&b"s1-a"[..]));
    assert_eq!(r.position(), (1, SEGMENT_HEADER_BYTES));
    assert_eq!(r.next_record().expect("next"), Some(&b"s1-b"[..]));
    assert_eq!(r.position(), (1, SEGMENT_HEADER_BYTES + RECORD_HEADER_BYTES as u64 + 4));
    assert_eq!(r.next_record().expect("end"), None);
    assert_eq!(r.next_record().expect("still end"), None);
}

#[test]
fn checkpoint_files_are_fsynced_before_they_become_visible() {
    let dir = tempfile::tempdir().expect("tempdir");
    let fs = FaultFs::new();
    fs.fail_syncs_from_now();
    let err = tessera_wal::write_checkpoint_with_fs(Arc::new(fs.clone()), dir.path(), 4, (0..3).map(rec))
        .expect_err("a failed fsync must fail the checkpoint");
    assert!(matches!(err, WalError::Io { .. }), "{err}");
    assert_eq!(tessera_wal::last_checkpoint(dir.path()).expect("last"), None, "no checkpoint became visible");
}

#[test]
fn empty_last_segment_is_reused_and_empty_middle_segment_is_corruption() {
    let dir = tempfile::tempdir().expect("tempdir");
    let seg0 = write_single_segment(dir.path(), 3);
    // A crash right after creating segment 1, before its header.
    std::fs::write(dir.path().join(segment_file_name(1)), b"").expect("create");
    let mut w = Wal::open(dir.path(), opts(1 << 20)).expect("open");
    assert_eq!(w.segment_range(), (0, 1), "the empty segment's index is reused");
    w.log(b"next").expect("log");
    w.close().expect("close");
    assert_eq!(replay(dir.path()).expect("replay").len(), 4);

    // An empty segment that is not the last one means lost records.
    std::fs::write(&seg0, b"").expect("empty seg0");
    let c = replay(dir.path()).expect_err("corruption").as_corruption().expect("corruption").clone();
    assert_eq!((c.segment, c.offset, c.kind), (0, 0, CorruptionKind::Truncated));
}
