//! A failed WAL write or fsync poisons the shard: the commit that hit it fails with `Error::Poisoned`
//! (not acknowledged, not visible), later writes fail fast with it, reads keep working, and a reopen
//! (which replays and repairs the log) brings the database back.

mod common;

use std::sync::Arc;

use common::*;
use tessera_model::{labels, Sample};
use tessera_tsdb::{Db, FsyncPolicy, Options};
use tessera_wal::fault::FaultFs;

fn write(db: &Arc<Db>, t: i64) -> Result<tessera_tsdb::CommitReport, tessera_tsdb::Error> {
    let mut app = db.appender();
    app.add(labels!("__name__" => "p"), &[Sample::new(t, t as f64)]);
    app.commit()
}

fn count(db: &Arc<Db>) -> usize {
    query(db, &[eq("__name__", "p")], 0, i64::MAX / 2).first().map(|(_, s)| s.len()).unwrap_or(0)
}

#[test]
fn failed_wal_write_poisons_and_reopen_recovers() {
    let dir = tempfile::tempdir().expect("tmp");
    let fs = FaultFs::new();
    let db = Db::open_with_wal_fs(dir.path(), opts(1), Some(Arc::new(fs.clone()))).expect("open");
    write(&db, 1).expect("first write");
    fs.fail_next_write(5);
    let e = write(&db, 2).expect_err("write must fail");
    assert!(e.is_poisoned(), "{e}");
    let e = write(&db, 3).expect_err("poisoned shard refuses writes");
    assert!(e.is_poisoned(), "{e}");
    assert!(db.is_poisoned());
    assert_eq!(count(&db), 1, "the failed batch is not visible; reads work");
    drop(db);
    let db = Db::open(dir.path(), opts(1)).expect("reopen repairs the torn record");
    assert_eq!(count(&db), 1);
    write(&db, 4).expect("writes again after reopen");
    assert_eq!(count(&db), 2);
}

#[test]
fn failed_fsync_poisons() {
    let dir = tempfile::tempdir().expect("tmp");
    let fs = FaultFs::new();
    let o = Options { fsync: FsyncPolicy::Always, ..opts(1) };
    let db = Db::open_with_wal_fs(dir.path(), o, Some(Arc::new(fs.clone()))).expect("open");
    write(&db, 1).expect("first write");
    fs.fail_syncs_from_now();
    assert!(write(&db, 2).expect_err("fsync fails").is_poisoned());
    assert!(write(&db, 3).expect_err("fail fast").is_poisoned());
}
