//! WAL damage: a torn tail (crash mid-write) is truncated silently; a flipped byte inside a record is
//! detected (CRC), reported with file and offset, the log is repaired there, and the database opens with
//! everything before the damage and keeps accepting writes.

mod common;

use std::sync::atomic::Ordering::Relaxed;

use common::*;
use tessera_model::{labels, Sample};
use tessera_tsdb::Db;

fn write_batches(dir: &std::path::Path, n: i64) {
    let db = Db::open(dir, opts(1)).expect("open");
    for b in 0..n {
        let mut app = db.appender();
        let s: Vec<Sample> = (0..10).map(|j| Sample::new(b * 10 + j, (b * 10 + j) as f64)).collect();
        app.add(labels!("__name__" => "w"), &s);
        app.commit().expect("commit");
    }
    db.close().expect("close");
}

fn segments(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let wal = dir.join("shard-000").join("wal");
    let mut v: Vec<_> = std::fs::read_dir(&wal)
        .expect("wal dir")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file() && std::fs::metadata(p).map(|m| m.len() > 8).unwrap_or(false))
        .collect();
    v.sort();
    v
}

fn count(db: &std::sync::Arc<Db>) -> usize {
    query(db, &[eq("__name__", "w")], 0, i64::MAX / 2).first().map(|(_, s)| s.len()).unwrap_or(0)
}

#[test]
fn torn_tail_is_truncated_and_db_keeps_working() {
    let dir = tempfile::tempdir().expect("tmp");
    write_batches(dir.path(), 20);
    let seg = segments(dir.path()).pop().expect("a segment");
    let len = std::fs::metadata(&seg).expect("meta").len();
    let f = std::fs::OpenOptions::new().write(true).open(&seg).expect("open seg");
    f.set_len(len - 7).expect("truncate"); // cut into the last record
    drop(f);
    let db = Db::open(dir.path(), opts(1)).expect("opens despite torn tail");
    assert_eq!(count(&db), 190, "all but the torn last batch");
    assert_eq!(db.metrics().wal_corruptions.load(Relaxed), 0, "a torn tail is not corruption");
    let mut app = db.appender();
    app.add(labels!("__name__" => "w"), &[Sample::new(1000, 1.0)]);
    app.commit().expect("writes again");
    drop(db);
    let db = Db::open(dir.path(), opts(1)).expect("reopen");
    assert_eq!(count(&db), 191);
}

#[test]
fn flipped_byte_is_detected_repaired_and_earlier_data_kept() {
    let dir = tempfile::tempdir().expect("tmp");
    write_batches(dir.path(), 20);
    let seg = segments(dir.path()).pop().expect("a segment");
    let mut data = std::fs::read(&seg).expect("read seg");
    let mid = data.len() / 2;
    data[mid] ^= 0x40;
    std::fs::write(&seg, &data).expect("write seg");
    let db = Db::open(dir.path(), opts(1)).expect("opens despite corruption");
    assert_eq!(db.metrics().wal_corruptions.load(Relaxed), 1, "corruption reported");
    let n = count(&db);
    assert!(n > 0 && n < 200 && n.is_multiple_of(10), "a prefix of whole batches survives: {n}");
    let mut app = db.appender();
    app.add(labels!("__name__" => "w"), &[Sample::new(1000, 1.0)]);
    app.commit().expect("writes again");
    drop(db);
    let db = Db::open(dir.path(), opts(1)).expect("reopen after repair");
    assert_eq!(db.metrics().wal_corruptions.load(Relaxed), 0, "repaired log is clean");
    assert_eq!(count(&db), n + 1);
}

/// A flipped byte inside a *checkpoint*: the checkpoint is cut at the damage, and the segments written
/// after the checkpoint are still replayed (they were not yet read when the damage was found).
#[test]
fn corrupt_checkpoint_keeps_the_segments_after_it() {
    let dir = tempfile::tempdir().expect("tmp");
    write_batches(dir.path(), 20);
    // Fold every record written so far into a checkpoint, as a head truncation would, and drop the segments.
    let wal = dir.path().join("shard-000").join("wal");
    let mut records = Vec::new();
    let mut reader = tessera_wal::WalReader::open(&wal).expect("reader");
    while let Some(r) = reader.next_record().expect("clean wal") {
        records.push(r.to_vec());
    }
    let segs = segments(dir.path());
    let last: u64 = segs
        .iter()
        .filter_map(|p| p.file_name()?.to_str()?.parse().ok())
        .max()
        .expect("numbered segment");
    let cp = tessera_wal::write_checkpoint(&wal, last + 1, records.into_iter()).expect("checkpoint");
    for s in &segs {
        std::fs::remove_file(s).expect("drop folded segment");
    }
    // Newer data lands in segments after the checkpoint.
    {
        let db = Db::open(dir.path(), opts(1)).expect("open on checkpoint");
        assert_eq!(count(&db), 200, "checkpoint replays");
        for b in 0..5 {
            let mut app = db.appender();
            let s: Vec<Sample> = (0..10).map(|j| Sample::new(10_000 + b * 10 + j, 1.0)).collect();
            app.add(labels!("__name__" => "w"), &s);
            app.commit().expect("commit");
        }
        db.close().expect("close");
    }
    let cp_seg = std::fs::read_dir(&cp)
        .expect("checkpoint dir")
        .flatten()
        .map(|e| e.path())
        .find(|p| std::fs::metadata(p).map(|m| m.len() > 64).unwrap_or(false))
        .expect("checkpoint segment");
    let mut data = std::fs::read(&cp_seg).expect("read checkpoint");
    let mid = data.len() / 2;
    data[mid] ^= 0x40;
    std::fs::write(&cp_seg, &data).expect("write checkpoint");

    let db = Db::open(dir.path(), opts(1)).expect("opens despite a corrupt checkpoint");
    assert!(db.metrics().wal_corruptions.load(Relaxed) >= 1, "corruption reported");
    let got = query(&db, &[eq("__name__", "w")], 0, i64::MAX / 2);
    let samples = &got.first().expect("series survives").1;
    let newer = samples.iter().filter(|s| s.t >= 10_000).count();
    assert_eq!(newer, 50, "every sample written after the checkpoint survives");
    let older = samples.len() - newer;
    assert!(older <= 200 && older.is_multiple_of(10), "only whole checkpointed batches survive: {older}");
}
