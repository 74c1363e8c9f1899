//! Closed head chunks live in memory-mapped files (`<shard>/chunks_head/`): queries read them back exactly,
//! the files are only a place to keep bytes (a restart rebuilds them from the WAL, whatever an earlier
//! process left there), and head cuts delete the segments whose chunks all went into blocks.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use tessera_model::{Labels, Sample};
use tessera_tsdb::{Db, Options};

fn series(i: usize) -> Labels {
    Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string())])
}

/// Twenty series, 2,000 scrapes 10 s apart from `t0` (about 5.5 h): counters with two decimals, gauges of
/// random-looking doubles, and a series that stops halfway.
fn fill(db: &Arc<Db>, t0: i64) -> Vec<(Labels, Vec<Sample>)> {
    let mut want: Vec<(Labels, Vec<Sample>)> = (0..20).map(|i| (series(i), Vec::new())).collect();
    let mut x = 7u64;
    for k in 0..2000i64 {
        let t = t0 + k * 10_000;
        let mut app = db.appender();
        for (i, (l, v)) in want.iter_mut().enumerate() {
            if i == 19 && k >= 1000 {
                continue;
            }
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let val = if i % 2 == 0 { (k * (i as i64 + 3) * 100 + (x >> 60) as i64) as f64 / 100.0 } else { (x >> 11) as f64 / 9e15 };
            let s = Sample::new(t, val);
            app.add(l.clone(), &[s]);
            v.push(s);
        }
        let r = app.commit().expect("commit");
        assert!(r.rejected.is_empty(), "{r:?}");
    }
    want.sort_by(|a, b| a.0.cmp(&b.0));
    want
}

fn chunk_dirs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("data dir")
        .map(|e| e.expect("entry").path().join("chunks_head"))
        .filter(|p| p.is_dir())
        .collect();
    v.sort();
    v
}

/// (files, bytes) in every shard's `chunks_head`.
fn chunk_files(dir: &Path) -> (usize, u64) {
    let (mut n, mut bytes) = (0, 0);
    for d in chunk_dirs(dir) {
        for e in std::fs::read_dir(d).expect("chunks_head") {
            n += 1;
            bytes += e.expect("entry").metadata().expect("metadata").len();
        }
    }
    (n, bytes)
}

fn bits_of(v: &[(Labels, Vec<Sample>)]) -> Vec<(Labels, Vec<(i64, u64)>)> {
    v.iter().map(|(l, s)| (l.clone(), bits(s))).collect()
}

#[test]
fn closed_head_chunks_are_read_from_their_files_and_rebuilt_from_the_wal() {
    let dir = tempfile::tempdir().expect("tmp");
    // A block range longer than the data: everything stays in the head.
    // Small chunk files, so that there are many.
    let o = Options { block_range_ms: 24 * 3600 * 1000, head_chunk_segment_bytes: 8192, ..opts(2) };
    let db = Db::open(dir.path(), o.clone()).expect("open");
    let want = fill(&db, 0);
    let got = query(&db, &[eq("__name__", "m")], i64::MIN / 2, i64::MAX / 2);
    assert_eq!(bits_of(&got), bits_of(&want));
    let st = db.stats();
    assert_eq!(st.blocks, 0, "{st:?}");
    let (files, bytes) = chunk_files(dir.path());
    assert_eq!(chunk_dirs(dir.path()).len(), 2, "one per shard");
    assert!(files >= 20 && bytes > 100_000, "{files} files, {bytes} bytes");
    assert_eq!((st.head_chunk_file_bytes, st.head_chunk_memory_bytes), (bytes, 0), "{st:?}");
    // A window inside closed chunks, and one across the open ones.
    for (a, b) in [(3_333_000, 4_444_000), (19_000_000, 19_990_000)] {
        let w: Vec<(Labels, Vec<Sample>)> =
            want.iter().map(|(l, s)| (l.clone(), s.iter().filter(|x| x.t >= a && x.t <= b).copied().collect::<Vec<_>>())).filter(|(_, s)| !s.is_empty()).collect();
        assert_eq!(bits_of(&query(&db, &[eq("__name__", "m")], a, b)), bits_of(&w), "[{a}, {b}]");
    }
    drop(db);
    assert_eq!(chunk_files(dir.path()).0, 0, "a closed database deletes its chunk files");

    // What an earlier process left in chunks_head is never read: garbage there changes nothing.
    for d in chunk_dirs(dir.path()) {
        for k in 1..4 {
            std::fs::write(d.join(format!("{k:08}")), vec![0xA5u8; 100_000]).expect("garbage");
        }
    }
    let db = Db::open(dir.path(), o).expect("reopen");
    assert_eq!(bits_of(&query(&db, &[eq("__name__", "m")], i64::MIN / 2, i64::MAX / 2)), bits_of(&want));
    assert_eq!(db.stats().head_chunk_file_bytes, chunk_files(dir.path()).1, "the garbage is gone, the chunks rewritten");

    // Cutting the head into blocks deletes the segments of the chunks that went.
    db.flush().expect("flush");
    let st = db.stats();
    assert_eq!(st.head_samples, 0, "{st:?}");
    let (files, _) = chunk_files(dir.path());
    assert!(files <= 2, "at most the segment being written per shard: {files}");
    assert_eq!(bits_of(&query(&db, &[eq("__name__", "m")], i64::MIN / 2, i64::MAX / 2)), bits_of(&want));
}

#[test]
fn regular_cuts_free_chunk_segments_while_data_streams_in() {
    // 1 h blocks and 5.5 h of data: the head is cut as the samples arrive, and the chunk files follow it.
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), Options { block_range_ms: 3600 * 1000, head_chunk_segment_bytes: 4096, ..opts(1) }).expect("open");
    let want = fill(&db, 0);
    let st = db.stats();
    assert!(st.blocks >= 3, "{st:?}");
    // The head holds at most 1.5 block ranges of chunks (about 100 KB here): the files of the earlier
    // hours are gone, the merges' garbage with them.
    let (files, bytes) = chunk_files(dir.path());
    assert!(files <= 8 && bytes * 4 < st.disk_bytes, "{files} files, {bytes} bytes: {st:?}");
    assert_eq!(bits_of(&query(&db, &[eq("__name__", "m")], i64::MIN / 2, i64::MAX / 2)), bits_of(&want));
    assert_eq!(st.head_chunk_file_bytes, chunk_files(dir.path()).1);
    assert_eq!(st.head_chunk_memory_bytes, 0);
}
