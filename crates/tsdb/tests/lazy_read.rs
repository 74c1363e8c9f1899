//! The lazy querier against concurrent head cuts, compaction and ingest: every sample written before a
//! stream starts comes back exactly once, series stay label-sorted, and nothing appears twice.

mod common;

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;

use common::*;
use tessera_model::{Labels, MatchOp, Queryable, Sample, SelectHints};
use tessera_tsdb::Db;

const STEP: i64 = 10;
/// Base data: `[0, BASE_END)` for every series, written before any stream starts.
const BASE_END: i64 = 3000;

fn labels_of(i: usize) -> Labels {
    Labels::from_pairs([
        ("__name__", "m".to_string()),
        ("i", format!("{i:04}")),
        ("parity", if i.is_multiple_of(2) { "even" } else { "odd" }.to_string()),
    ])
}

fn value(i: usize, t: i64) -> f64 {
    i as f64 * 1e6 + t as f64
}

fn write(db: &Db, series: std::ops::Range<usize>, from: i64, to: i64) {
    let mut app = db.appender();
    for i in series {
        let s: Vec<Sample> = (from / STEP..to / STEP).map(|k| Sample::new(k * STEP, value(i, k * STEP))).collect();
        app.add(labels_of(i), &s);
    }
    let rep = app.commit().expect("commit");
    assert!(rep.rejected.is_empty(), "{:?}", rep.rejected);
}

/// Consumes a stream, calling `between` after every `every`-th series, and checks it: label-sorted with
/// no label set twice, each series' samples strictly increasing in time with the generator's values, and
/// the base range complete. Returns the number of series.
fn check_stream(db: &Arc<Db>, n_base: usize, every: usize, mut between: impl FnMut(usize)) -> usize {
    let q = db.querier(0, i64::MAX / 4).expect("querier");
    let set = q.select(&[m(MatchOp::Regex, "__name__", "m")], &SelectHints::default()).expect("select");
    let mut prev: Option<Labels> = None;
    let mut n: usize = 0;
    let mut base_seen = 0;
    for s in set {
        let s = s.expect("series");
        if let Some(p) = &prev {
            assert!(*p < s.labels, "not strictly label-sorted: {p} then {}", s.labels);
        }
        let i: usize = s.labels.get("i").parse().expect("num");
        let mut v = Vec::new();
        for w in s.chunks.windows(2) {
            assert!(w[0].maxt_ms < w[1].mint_ms, "chunks overlap for {}", s.labels);
        }
        for c in &s.chunks {
            tessera_encoding::decode_chunk_range_into(c, 0, i64::MAX / 4, &mut v).expect("decodes");
        }
        for w in v.windows(2) {
            assert!(w[0].t < w[1].t, "series {}: sample at {} twice or out of order", s.labels, w[1].t);
        }
        for x in &v {
            assert_eq!(x.v, value(i, x.t), "series {} at {}", s.labels, x.t);
        }
        if i < n_base {
            let in_base = v.iter().filter(|x| x.t < BASE_END).count() as i64;
            assert_eq!(in_base, BASE_END / STEP, "series {}: base samples missing", s.labels);
            base_seen += 1;
        }
        prev = Some(s.labels);
        n += 1;
        if n.is_multiple_of(every) {
            between(n);
        }
    }
    assert_eq!(base_seen, n_base, "a base series vanished");
    n
}

#[test]
fn head_cut_and_compaction_during_a_stream_lose_and_duplicate_nothing() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(2)).expect("open");
    // Some data in blocks, the rest in the head.
    write(&db, 0..120, 0, 1500);
    db.flush().expect("flush");
    write(&db, 0..120, 1500, BASE_END);
    let mut cuts = 0;
    let n = check_stream(&db, 120, 25, |_| {
        // Newer data and a cut of the whole head (moves [1500, BASE_END) into new blocks), then compaction.
        let from = BASE_END + cuts * 100;
        write(&db, 0..120, from, from + 100);
        db.flush().expect("flush");
        db.compact().expect("compact");
        cuts += 1;
    });
    assert_eq!(n, 120);
    assert!(cuts >= 4);
}

#[test]
fn concurrent_ingest_and_cuts_while_streams_are_consumed() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(2)).expect("open");
    write(&db, 0..80, 0, 1000);
    db.flush().expect("flush");
    write(&db, 0..80, 1000, BASE_END);
    let stop = Arc::new(AtomicBool::new(false));
    let progress = Arc::new(AtomicU32::new(0));
    let writer = {
        let (db, stop, progress) = (db.clone(), stop.clone(), progress.clone());
        std::thread::spawn(move || {
            let mut t = BASE_END;
            let mut rounds = 0u32;
            while !stop.load(Ordering::Relaxed) && rounds < 400 {
                // Existing series continue; new series (ref order ≠ label order) appear.
                write(&db, 0..80, t, t + 50);
                write(&db, 200 + rounds as usize..201 + rounds as usize, t, t + 50);
                t += 50;
                if rounds.is_multiple_of(3) {
                    db.flush().expect("flush");
                }
                if rounds.is_multiple_of(7) {
                    db.compact().expect("compact");
                }
                rounds += 1;
                progress.store(rounds, Ordering::Relaxed);
            }
            rounds
        })
    };
    // Stream while the writer works: at least 6 streams and until it has done 30 rounds.
    let mut streams = 0;
    while streams < 6 || (progress.load(Ordering::Relaxed) < 30 && !writer.is_finished()) {
        check_stream(&db, 80, 1, |_| std::thread::yield_now());
        streams += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let rounds = writer.join().expect("writer");
    assert!(rounds >= 30, "{rounds} writer rounds");
    // Everything written is there exactly once at the end.
    let got = query(&db, &[eq("__name__", "m")], 0, i64::MAX / 4);
    assert_eq!(got.len(), 80 + rounds as usize);
}

#[test]
fn head_series_come_out_in_label_order_not_creation_order() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(1)).expect("open");
    // Created in descending label order: head refs ascend while labels descend.
    for i in (0..50).rev() {
        write(&db, i..i + 1, 0, 100);
    }
    let got = query(&db, &[eq("__name__", "m")], 0, 1000);
    let labels: Vec<Labels> = got.iter().map(|(l, _)| l.clone()).collect();
    let mut sorted = labels.clone();
    sorted.sort();
    assert_eq!(labels, sorted);
    assert_eq!(labels.len(), 50);
    // Label values and names with matchers go through the same stream.
    let q = db.querier(0, 1000).expect("querier");
    let vals = q.label_values("parity", &[eq("i", "0007")]).expect("values");
    assert_eq!(vals, vec!["odd"]);
    let names = q.label_names(&[eq("parity", "even")]).expect("names");
    assert_eq!(names, vec!["__name__", "i", "parity"]);
    assert!(q.label_values("i", &[eq("i", "9999")]).expect("values").is_empty());
}

#[test]
fn a_deletion_during_a_stream_applies_to_the_series_read_after_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(1)).expect("open");
    write(&db, 0..10, 0, 1500);
    db.flush().expect("flush");
    write(&db, 0..10, 1500, BASE_END);
    let q = db.querier(0, BASE_END).expect("querier");
    let mut set = q.select(&[eq("__name__", "m")], &SelectHints::default()).expect("select");
    let first = set.next().expect("one").expect("ok");
    assert_eq!(first.labels.get("i"), "0000");
    // Deletes a range that spans a block and the head.
    db.delete(1000, 1990, &[eq("__name__", "m")]).expect("delete");
    let mut n = 1;
    for s in set {
        let s = s.expect("ok");
        let mut v = Vec::new();
        for c in &s.chunks {
            tessera_encoding::decode_chunk_range_into(c, 0, BASE_END, &mut v).expect("decodes");
        }
        assert!(v.iter().all(|x| x.t < 1000 || x.t > 1990), "series {}: deleted samples returned", s.labels);
        assert_eq!(v.len() as i64, BASE_END / STEP - 100, "series {}", s.labels);
        n += 1;
    }
    assert_eq!(n, 10);
}
