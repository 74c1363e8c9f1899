//! Writer/reader round trips: many records over several segments, reopen and append, checkpoints.

use std::path::Path;
use tessera_wal::{
    last_checkpoint, read_all, segment_file_name, write_checkpoint, FsyncPolicy, Wal, WalError, WalOptions, WalReader,
};

fn opts(segment_bytes: u64) -> WalOptions {
    WalOptions { segment_bytes, fsync: FsyncPolicy::Never }
}

/// Deterministic record `i`: varied lengths (including empty) and contents.
fn record(i: usize) -> Vec<u8> {
    let len = (i * 37) % 300;
    (0..len).map(|j| (i * 31 + j * 7) as u8).collect()
}

fn read_dir_records(dir: &Path) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    read_all::<WalError>(dir, |r| {
        out.push(r.to_vec());
        Ok(())
    })
    .expect("replay");
    out
}

#[test]
fn many_records_round_trip_across_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(dir.path(), opts(1024)).expect("open");
    let want: Vec<Vec<u8>> = (0..500).map(record).collect();
    for (i, r) in want.iter().enumerate() {
        if i % 3 == 0 {
            w.log(r).expect("log");
        }
    }
    // Interleave log() and log_many() in order.
    let mut all = Vec::new();
    {
        let mut w2 = Vec::new();
        for (i, r) in want.iter().enumerate() {
            if i % 3 == 0 {
                w2.push(r.clone());
            }
        }
        all.extend(w2);
    }
    let rest: Vec<&[u8]> = want.iter().enumerate().filter(|(i, _)| i % 3 != 0).map(|(_, r)| r.as_slice()).collect();
    w.log_many(&rest).expect("log_many");
    all.extend(rest.iter().map(|r| r.to_vec()));
    let (first, last) = w.segment_range();
    assert_eq!(first, 0);
    assert!(last >= 10, "expected many segments, got {last}");
    let on_disk: u64 =
        (first..=last).map(|s| std::fs::metadata(dir.path().join(segment_file_name(s))).expect("seg").len()).sum();
    assert_eq!(w.size_bytes(), on_disk);
    for s in first..=last {
        let len = std::fs::metadata(dir.path().join(segment_file_name(s))).expect("seg").len();
        assert!(len <= 1024, "segment {s} has {len} bytes");
    }
    w.close().expect("close");
    assert_eq!(read_dir_records(dir.path()), all);

    // WalReader positions are increasing and name the segment.
    let mut r = WalReader::open(dir.path()).expect("reader");
    let mut prev = (0, 0);
    let mut n = 0;
    while r.next_record().expect("next").is_some() {
        assert!(r.position() > prev || n == 0);
        prev = r.position();
        n += 1;
    }
    assert_eq!(n, all.len());
}

#[test]
fn record_larger_than_segment_gets_its_own_segment() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(dir.path(), opts(256)).expect("open");
    w.log(b"small").expect("log");
    let big = vec![0xAB; 1000];
    w.log(&big).expect("log big");
    w.log(b"after").expect("log");
    assert_eq!(w.segment_range(), (0, 2));
    w.close().expect("close");
    assert_eq!(read_dir_records(dir.path()), vec![b"small".to_vec(), big, b"after".to_vec()]);
}

#[test]
fn reopen_appends_after_existing_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(dir.path(), opts(4096)).expect("open");
    w.log(b"one").expect("log");
    w.close().expect("close");
    let mut w = Wal::open(dir.path(), opts(4096)).expect("reopen");
    assert_eq!(w.segment_range(), (0, 1));
    w.log(b"two").expect("log");
    drop(w); // without close: data is write(2)-ten already
    assert_eq!(read_dir_records(dir.path()), vec![b"one".to_vec(), b"two".to_vec()]);
}

#[test]
fn checkpoint_then_truncate_replays_checkpoint_then_newer_segments() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut w = Wal::open(dir.path(), opts(4096)).expect("open");
    for i in 0..10u8 {
        w.log(&[b'a', i]).expect("log");
    }
    let n = w.next_segment().expect("next_segment");
    w.log(b"new-1").expect("log");
    // The tsdb keeps only what it still needs from segments < n.
    let cp = write_checkpoint(dir.path(), n, vec![b"kept-1".to_vec(), b"kept-2".to_vec()].into_iter())
        .expect("checkpoint");
    assert_eq!(last_checkpoint(dir.path()).expect("last"), Some((cp.clone(), n)));
    // Before truncation, replay already skips the segments the checkpoint covers.
    w.log(b"new-2").expect("log");
    let want = vec![b"kept-1".to_vec(), b"kept-2".to_vec(), b"new-1".to_vec(), b"new-2".to_vec()];
    assert_eq!(read_dir_records(dir.path()), want);
    w.truncate_before(n).expect("truncate");
    assert_eq!(w.segment_range(), (n, n));
    assert!(!dir.path().join(segment_file_name(0)).exists());
    w.close().expect("close");
    assert_eq!(read_dir_records(dir.path()), want);

    // A second checkpoint replaces the first; reopening never writes below the checkpoint index.
    let mut w = Wal::open(dir.path(), opts(4096)).expect("reopen");
    let n2 = w.next_segment().expect("next");
    let cp2 = write_checkpoint(dir.path(), n2, vec![b"kept-3".to_vec()].into_iter()).expect("checkpoint 2");
    w.truncate_before(n2).expect("truncate");
    w.log(b"newest").expect("log");
    w.close().expect("close");
    assert!(!cp.exists(), "old checkpoint removed");
    assert_eq!(last_checkpoint(dir.path()).expect("last"), Some((cp2, n2)));
    assert_eq!(read_dir_records(dir.path()), vec![b"kept-3".to_vec(), b"newest".to_vec()]);

    // All segments gone but the checkpoint: a new writer starts at the checkpoint's index, not 0.
    let names: Vec<_> = std::fs::read_dir(dir.path()).expect("ls").map(|e| e.expect("e").path()).collect();
    for p in names {
        if p.is_file() {
            std::fs::remove_file(p).expect("rm");
        }
    }
    let mut w = Wal::open(dir.path(), opts(4096)).expect("reopen");
    assert_eq!(w.segment_range(), (n2, n2));
    w.log(b"x").expect("log");
    w.close().expect("close");
    assert_eq!(read_dir_records(dir.path()), vec![b"kept-3".to_vec(), b"x".to_vec()]);
}

#[test]
fn stale_tmp_checkpoint_is_ignored_and_replaced() {
    let dir = tempfile::tempdir().expect("tempdir");
    let tmp = dir.path().join("checkpoint.00000003.tmp");
    std::fs::create_dir_all(&tmp).expect("mkdir");
    std::fs::write(tmp.join("00000000"), b"garbage").expect("write");
    assert_eq!(last_checkpoint(dir.path()).expect("last"), None);
    write_checkpoint(dir.path(), 3, std::iter::once(b"r".to_vec())).expect("checkpoint");
    assert!(!tmp.exists());
    assert_eq!(read_dir_records(dir.path()), vec![b"r".to_vec()]);
}

#[test]
fn invalid_options_are_rejected() {
    let dir = tempfile::tempdir().expect("tempdir");
    assert!(matches!(Wal::open(dir.path(), opts(10)), Err(WalError::InvalidOptions(_))));
    let o = WalOptions { segment_bytes: 1 << 20, fsync: FsyncPolicy::Interval(std::time::Duration::ZERO) };
    assert!(matches!(Wal::open(dir.path(), o), Err(WalError::InvalidOptions(_))));
    assert_eq!(WalOptions::default().fsync, FsyncPolicy::Interval(std::time::Duration::from_secs(1)));
}
