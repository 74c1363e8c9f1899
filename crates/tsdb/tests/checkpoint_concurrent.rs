//! A head cut checkpoints the WAL while commits go on: the writer lock (which every commit takes) is held
//! only to start a new segment and to delete the old ones. Whatever commits acknowledged meanwhile — new
//! series included, whose records may land on either side of the checkpoint — must be there after a
//! restart, from the blocks, the checkpoint and the segments after it.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use common::*;
use tessera_model::{Labels, Sample};
use tessera_tsdb::{Db, Options};

fn series(i: usize) -> Labels {
    Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string())])
}

fn checkpoints(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for shard in std::fs::read_dir(dir).expect("data dir") {
        let wal = shard.expect("entry").path().join("wal");
        let Ok(entries) = std::fs::read_dir(&wal) else { continue };
        n += entries.filter(|e| e.as_ref().is_ok_and(|e| e.file_name().to_string_lossy().starts_with("checkpoint."))).count();
    }
    n
}

#[test]
fn commits_during_cuts_and_checkpoints_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = Options { wal_segment_bytes: 4 << 10, ..opts(2) };
    let db = Arc::new(Db::open(dir.path(), o.clone()).expect("open"));
    let stop = Arc::new(AtomicBool::new(false));
    // Cuts (each followed by a checkpoint once old segments hold only data in blocks) as fast as they come.
    let cutter = {
        let (db, stop) = (db.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                db.compact().expect("compact");
                rounds += 1;
            }
            rounds
        })
    };
    // 3,000 commits 10 ms apart in data time (a cut is due every 150 or so with 1 s blocks); a new series
    // every 25 commits, each series written from then on.
    let mut want: Vec<(Labels, Vec<Sample>)> = Vec::new();
    let mut max_checkpoints = 0;
    for b in 0..3000i64 {
        if b % 25 == 0 {
            want.push((series(want.len()), Vec::new()));
        }
        let mut app = db.appender();
        for (i, (l, v)) in want.iter_mut().enumerate() {
            let s = Sample::new(b * 10, (b * 100 + i as i64) as f64);
            app.add(l.clone(), &[s]);
            v.push(s);
        }
        let r = app.commit().expect("commit");
        assert!(r.rejected.is_empty(), "{r:?}");
        if b % 100 == 0 {
            max_checkpoints = max_checkpoints.max(checkpoints(dir.path()));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = cutter.join().expect("cutter");
    assert!(rounds > 0);
    let st = db.stats();
    assert!(st.blocks > 0 && st.head_min_t >= 25_000, "the head was cut again and again: {st:?}");
    assert!(max_checkpoints > 0 || checkpoints(dir.path()) > 0, "no checkpoint was ever written");
    drop(db);
    want.sort_by(|a, b| a.0.cmp(&b.0));
    let db = Arc::new(Db::open(dir.path(), o).expect("reopen"));
    let got = query(&db, &[eq("__name__", "m")], i64::MIN / 4, i64::MAX / 4);
    assert_eq!(got.len(), want.len());
    for ((gl, gv), (wl, wv)) in got.iter().zip(&want) {
        assert_eq!(gl, wl);
        let (g, w) = (bits(gv), bits(wv));
        let first_diff = g.iter().zip(&w).position(|(a, b)| a != b);
        assert!(g.len() == w.len() && first_diff.is_none(), "{gl}: {} samples, {} written, first difference at {first_diff:?}", g.len(), w.len());
    }
}

/// With the background thread on, commits leave head cuts to it (a cut inline would make the request
/// that triggered it wait for the whole block write): the head is still cut, without another commit.
#[test]
fn the_background_thread_cuts_what_commits_leave() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Arc::new(Db::open(dir.path(), Options { background: true, ..opts(2) }).expect("open"));
    let mut app = db.appender();
    for i in 0..10 {
        let s: Vec<Sample> = (0..400).map(|k| Sample::new(k * 10, k as f64)).collect();
        app.add(series(i), &s);
    }
    assert!(app.commit().expect("commit").rejected.is_empty());
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    // Every shard's head cut (the oldest data left is past the first block), blocks written.
    while db.stats().head_min_t < 1000 {
        assert!(std::time::Instant::now() < deadline, "not cut within 20 s: {:?}", db.stats());
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(db.stats().blocks >= 2, "{:?}", db.stats());
}
