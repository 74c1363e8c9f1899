//! Behaviour of the embedded API: round trips, Prometheus' append rules, head vs blocks, matchers,
//! deletion, retention, reopen.

mod common;

use common::*;
use tessera_model::{labels, MatchOp, Queryable, Sample, SelectHints, STALE_NAN};
use tessera_tsdb::{Db, Error, Options, RejectReason};

fn series(i: usize) -> tessera_model::Labels {
    tessera_model::Labels::from_pairs([
        ("__name__", "m".to_string()),
        ("i", i.to_string()),
        ("parity", if i.is_multiple_of(2) { "even" } else { "odd" }.to_string()),
    ])
}

#[test]
fn write_read_round_trip_across_shards() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(3)).expect("open");
    let mut app = db.appender();
    for i in 0..20 {
        let s: Vec<Sample> = (0..300).map(|t| Sample::new(t, (i * 1000 + t as usize) as f64)).collect();
        app.add(series(i), &s);
    }
    let rep = app.commit().expect("commit");
    assert_eq!(rep.samples_written, 6000);
    assert_eq!(rep.series_created, 20);
    assert!(rep.rejected.is_empty());
    let got = query(&db, &[eq("__name__", "m")], 0, 299);
    assert_eq!(got.len(), 20);
    let mut sorted = got.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>();
    sorted.sort();
    assert_eq!(sorted, got.iter().map(|(l, _)| l.clone()).collect::<Vec<_>>(), "label-sorted");
    for (l, s) in &got {
        let i: usize = l.get("i").parse().expect("num");
        assert_eq!(s.len(), 300);
        assert_eq!(s[7], Sample::new(7, (i * 1000 + 7) as f64));
    }
    // Range restriction.
    let got = query(&db, &[eq("i", "3")], 100, 109);
    assert_eq!(got[0].1.len(), 10);
    let st = db.stats();
    assert_eq!(st.head_series, 20);
    assert_eq!(st.head_samples, 6000);
}

#[test]
fn rejections_follow_prometheus_and_rest_of_batch_is_written() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(1)).expect("open");
    let l = labels!("__name__" => "x");
    let mut app = db.appender();
    app.add(l.clone(), &[Sample::new(10, 1.0), Sample::new(20, 2.0)]);
    app.commit().expect("commit");
    let mut app = db.appender();
    app.add(l.clone(), &[
        Sample::new(20, 2.0), // exact duplicate: silently ok
        Sample::new(20, 3.0), // duplicate timestamp, other value
        Sample::new(15, 3.0), // out of order
        Sample::new(14, 3.0), // out of order
        Sample::new(30, 4.0), // fine
    ]);
    app.add(labels!("__name__" => "y"), &[Sample::new(25, 1.0)]);
    let rep = app.commit().expect("commit");
    assert_eq!(rep.samples_written, 3);
    assert_eq!(rep.rejected.len(), 2);
    assert_eq!((rep.rejected[0].batch_index, rep.rejected[0].reason, rep.rejected[0].count), (0, RejectReason::OutOfOrder, 2));
    assert_eq!(rep.rejected[0].first_t_ms, 15);
    assert_eq!((rep.rejected[1].reason, rep.rejected[1].count), (RejectReason::DuplicateTimestamp, 1));
    assert_eq!(RejectReason::DuplicateTimestamp.as_str(), "duplicate sample for timestamp");
    let got = query(&db, &[eq("__name__", "x")], 0, 100);
    assert_eq!(bits(&got[0].1), bits(&[Sample::new(10, 1.0), Sample::new(20, 2.0), Sample::new(30, 4.0)]));
    // Out of bounds: older than head max − range/2 for a fresh series (range 1000 → 500).
    // (The bound is taken from the head as the commit starts, like Prometheus' appender.)
    let mut app = db.appender();
    app.add(labels!("__name__" => "x"), &[Sample::new(5000, 1.0)]);
    app.commit().expect("commit");
    let mut app = db.appender();
    app.add(labels!("__name__" => "q"), &[Sample::new(6000, 1.0)]);
    app.add(labels!("__name__" => "z"), &[Sample::new(4000, 1.0), Sample::new(4600, 1.0)]);
    let rep = app.commit().expect("commit");
    assert_eq!(rep.rejected.len(), 1, "{rep:?}");
    assert_eq!((rep.rejected[0].batch_index, rep.rejected[0].reason, rep.rejected[0].count), (1, RejectReason::OutOfBounds, 1));
    let mut text = String::new();
    db.metrics().encode_text(&mut text);
    assert!(text.contains("tessera_tsdb_samples_rejected_total{reason=\"out_of_order\"} 2"), "{text}");
    assert!(text.contains("# TYPE tessera_tsdb_samples_appended_total counter"));
}

#[test]
fn out_of_order_window_accepts_and_merges() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = Options { ooo_window_ms: 300, ..opts(1) };
    let db = Db::open(dir.path(), o.clone()).expect("open");
    let l = labels!("__name__" => "x");
    let mut app = db.appender();
    app.add(l.clone(), &[Sample::new(100, 1.0), Sample::new(200, 2.0), Sample::new(400, 4.0)]);
    app.commit().expect("commit");
    let mut app = db.appender();
    app.add(l.clone(), &[Sample::new(300, 3.0), Sample::new(150, 1.5), Sample::new(50, 0.5), Sample::new(200, 9.0)]);
    let rep = app.commit().expect("commit");
    // 300 and 150 in the window (≥ 400 − 300); 50 too old; 200 collides with an in-order sample: accepted
    // into the OOO buffer but the in-order value wins when merged.
    assert_eq!(rep.rejected.len(), 1);
    assert_eq!((rep.rejected[0].reason, rep.rejected[0].count), (RejectReason::TooOld, 1));
    let want = [Sample::new(100, 1.0), Sample::new(150, 1.5), Sample::new(200, 2.0), Sample::new(300, 3.0), Sample::new(400, 4.0)];
    assert_eq!(bits(&query(&db, &[eq("__name__", "x")], 0, 1000)[0].1), bits(&want));
    // The merge survives a restart (WAL replay) and a flush into a block.
    drop(db);
    let db = Db::open(dir.path(), o).expect("reopen");
    assert_eq!(bits(&query(&db, &[eq("__name__", "x")], 0, 1000)[0].1), bits(&want));
    db.flush().expect("flush");
    assert_eq!(db.stats().head_samples, 0);
    assert_eq!(bits(&query(&db, &[eq("__name__", "x")], 0, 1000)[0].1), bits(&want));
}

#[test]
fn stale_markers_and_nan_payloads_survive_bit_exact() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = opts(1);
    let db = Db::open(dir.path(), o.clone()).expect("open");
    let l = labels!("__name__" => "x");
    let odd_nan = f64::from_bits(0x7ff8_0000_dead_beef);
    let want = [Sample::new(1, 1.0), Sample::new(2, STALE_NAN), Sample::new(3, odd_nan), Sample::new(4, -0.0)];
    let mut app = db.appender();
    app.add(l.clone(), &want);
    app.commit().expect("commit");
    assert_eq!(bits(&query(&db, &[eq("__name__", "x")], 0, 10)[0].1), bits(&want));
    drop(db);
    let db = Db::open(dir.path(), o).expect("reopen");
    assert_eq!(bits(&query(&db, &[eq("__name__", "x")], 0, 10)[0].1), bits(&want));
    db.flush().expect("flush");
    assert_eq!(bits(&query(&db, &[eq("__name__", "x")], 0, 10)[0].1), bits(&want));
}

/// Writes a few block ranges of data for 12 series with gaps, so heads and blocks both hold data.
fn fill(db: &std::sync::Arc<Db>, upto: i64) {
    for t0 in (0..upto).step_by(250) {
        let mut app = db.appender();
        for i in 0..12 {
            if (i + t0 as usize / 250).is_multiple_of(5) {
                continue; // a gap
            }
            let s: Vec<Sample> = (t0..t0 + 250).step_by(10).map(|t| Sample::new(t, (t * i as i64) as f64 / 7.0)).collect();
            app.add(series(i), &s);
        }
        let r = app.commit().expect("commit");
        assert!(r.rejected.is_empty(), "{r:?}");
    }
}

fn all_queries() -> Vec<Vec<tessera_model::Matcher>> {
    vec![
        vec![eq("__name__", "m")],
        vec![eq("parity", "odd")],
        vec![m(MatchOp::Regex, "i", "1.*|3")],
        vec![eq("__name__", "m"), m(MatchOp::NotEqual, "i", "2")],
        vec![eq("__name__", "m"), m(MatchOp::NotRegex, "parity", "ev.*")],
        vec![eq("__name__", "m"), eq("nope", "")],
        vec![eq("nope", "x")],
    ]
}

#[test]
fn head_and_blocks_answer_identically() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), Options { block_range_ms: 100_000, ..opts(2) }).expect("open");
    fill(&db, 3000);
    let ranges = [(0, 2999), (0, 10), (555, 1777), (2990, 5000), (-100, -1)];
    let before: Vec<_> = all_queries().iter().flat_map(|q| ranges.iter().map(|&(a, b)| query(&db, q, a, b))).collect();
    assert!(db.stats().blocks == 0);
    db.flush().expect("flush");
    assert!(db.stats().blocks >= 1);
    assert_eq!(db.stats().head_series, 0);
    let after: Vec<_> = all_queries().iter().flat_map(|q| ranges.iter().map(|&(a, b)| query(&db, q, a, b))).collect();
    assert_eq!(before, after);
    // And with blocks cut on a grid (small block range) + head holding the rest.
    let dir2 = tempfile::tempdir().expect("tmp");
    let db2 = Db::open(dir2.path(), opts(2)).expect("open");
    fill(&db2, 3000);
    assert!(db2.stats().blocks >= 2, "{:?}", db2.stats());
    assert!(db2.stats().head_samples > 0);
    let mixed: Vec<_> = all_queries().iter().flat_map(|q| ranges.iter().map(|&(a, b)| query(&db2, q, a, b))).collect();
    assert_eq!(before, mixed);
    db2.compact().expect("compact");
    let compacted: Vec<_> = all_queries().iter().flat_map(|q| ranges.iter().map(|&(a, b)| query(&db2, q, a, b))).collect();
    assert_eq!(before, compacted);
}

#[test]
fn empty_matcher_selects_series_without_the_label() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(2)).expect("open");
    let mut app = db.appender();
    app.add(labels!("__name__" => "up", "a" => "1"), &[Sample::new(1, 1.0)]);
    app.add(labels!("__name__" => "up"), &[Sample::new(1, 2.0)]);
    app.add(labels!("__name__" => "up", "a" => ""), &[Sample::new(2, 3.0)]); // same as without `a`
    app.commit().expect("commit");
    let got = query(&db, &[eq("__name__", "up"), eq("a", "")], 0, 10);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].1.len(), 2);
    let got = query(&db, &[eq("__name__", "up"), m(MatchOp::NotEqual, "a", "")], 0, 10);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].0.get("a"), "1");
    let q = db.querier(0, 10).expect("q");
    assert_eq!(q.label_names(&[]).expect("names"), vec!["__name__", "a"]);
    assert_eq!(q.label_values("a", &[]).expect("vals"), vec!["1"]);
    assert_eq!(q.label_values("a", &[eq("a", "")]).expect("vals"), Vec::<String>::new());
    let so = q.select(&[eq("__name__", "up")], &SelectHints { series_only: true, ..Default::default() }).expect("sel");
    assert_eq!(so.count(), 2);
}

#[test]
fn delete_hides_data_now_and_removes_it_at_compaction() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(2)).expect("open");
    fill(&db, 3000);
    let before = query(&db, &[eq("i", "1")], 0, 3000);
    let other = query(&db, &[eq("i", "2")], 0, 3000);
    db.delete(1000, 1999, &[eq("i", "1")]).expect("delete");
    let want: Vec<Sample> = before[0].1.iter().copied().filter(|s| s.t < 1000 || s.t > 1999).collect();
    assert_eq!(bits(&query(&db, &[eq("i", "1")], 0, 3000)[0].1), bits(&want));
    // Other series untouched.
    assert_eq!(query(&db, &[eq("i", "2")], 0, 3000), other);
    // Head tombstones are in the WAL: still applied after a restart.
    drop(db);
    let db = Db::open(dir.path(), opts(2)).expect("reopen");
    assert_eq!(bits(&query(&db, &[eq("i", "1")], 0, 3000)[0].1), bits(&want));
    db.flush().expect("flush");
    db.compact().expect("compact");
    db.clean_tombstones().expect("clean");
    assert_eq!(bits(&query(&db, &[eq("i", "1")], 0, 3000)[0].1), bits(&want));
    // Deleting everything of a series removes it from results.
    db.delete(i64::MIN, i64::MAX, &[eq("i", "1")]).expect("delete");
    assert!(query(&db, &[eq("i", "1")], 0, 3000).is_empty());
}

#[test]
fn reopen_replays_wal_and_refuses_other_shard_count() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(2)).expect("open");
    fill(&db, 1400);
    let before = query(&db, &[eq("__name__", "m")], 0, 5000);
    db.close().expect("close");
    assert!(db.appender().commit().is_ok(), "empty commit is fine");
    let mut app = db.appender();
    app.add(series(1), &[Sample::new(99999, 1.0)]);
    assert!(app.commit().is_err(), "closed db refuses writes");
    drop(db);
    let err = Db::open(dir.path(), opts(3)).expect_err("shard count differs");
    assert!(matches!(err, Error::InvalidOptions(_)), "{err}");
    let db = Db::open(dir.path(), opts(2)).expect("reopen");
    assert_eq!(query(&db, &[eq("__name__", "m")], 0, 5000), before);
    // Writes continue; series refs do not collide with replayed ones.
    let mut app = db.appender();
    app.add(labels!("__name__" => "new"), &[Sample::new(1495, 5.0)]);
    app.add(series(3), &[Sample::new(1495, 5.0)]);
    app.commit().expect("commit");
    assert_eq!(query(&db, &[eq("__name__", "new")], 0, 5000)[0].1.len(), 1);
    drop(db);
    let db = Db::open(dir.path(), opts(2)).expect("reopen again");
    assert_eq!(query(&db, &[eq("__name__", "new")], 0, 5000)[0].1.len(), 1);
    assert_eq!(query(&db, &[eq("i", "3")], 0, 5000)[0].1.last().map(|s| s.t), Some(1495));
}

#[test]
fn retention_keeps_exactly_the_newest_blocks() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), Options { retention_ms: 2000, ..opts(1) }).expect("open");
    fill(&db, 6000);
    db.flush().expect("flush");
    db.compact().expect("compact");
    let got = query(&db, &[eq("__name__", "m")], i64::MIN / 2, i64::MAX / 2);
    let min_t = got.iter().map(|(_, s)| s[0].t).min().expect("some");
    // Blocks entirely older than (newest block end − retention) are gone, the rest intact.
    assert!(min_t >= 6000 - 2000 - 1000, "min_t {min_t}");
    let all_t: std::collections::BTreeSet<i64> = got.iter().flat_map(|(_, s)| s.iter().map(|x| x.t)).collect();
    let lo = *all_t.iter().next().expect("some");
    assert!(all_t.range(lo..6000).count() > 0);
    assert_eq!(lo % 1000, 0, "retention drops whole blocks");
}

#[test]
fn stats_and_head_cardinality() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(2)).expect("open");
    let mut app = db.appender();
    for i in 0..5 {
        app.add(series(i), &[Sample::new(10, 1.0), Sample::new(20, 2.0)]);
    }
    app.add(labels!("__name__" => "other", "parity" => "odd"), &[Sample::new(15, 1.0)]);
    app.commit().expect("commit");
    let st = db.stats();
    assert_eq!((st.head_series, st.head_samples, st.head_min_t, st.head_max_t, st.shards), (6, 11, 10, 20, 2));
    let c = db.head_cardinality(2);
    assert_eq!(c.series_count_by_metric_name, vec![("m".to_string(), 5)]
        .into_iter()
        .chain([("other".to_string(), 1)])
        .collect::<Vec<_>>());
    assert_eq!(c.label_value_count_by_label_name[0], ("i".to_string(), 5));
    assert_eq!(c.series_count_by_label_value_pair[0], ("__name__=m".to_string(), 5));
    assert_eq!(c.series_count_by_label_value_pair.len(), 2);
}

/// The defaults' block range and future bound (2 h, 10 min), one shard, no background work.
fn future_opts() -> Options {
    Options { block_range_ms: 2 * 3_600_000, max_future_ms: 10 * 60_000, ..opts(1) }
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock after 1970").as_millis() as i64
}

/// Issue 9: one sample from next year used to be accepted, move the shard's newest time, and make it
/// refuse every real sample afterwards ("out of bounds"), even after a restart. Now it is rejected on
/// its own, with its own reason, and the shard goes on accepting the present.
#[test]
fn a_sample_from_the_future_is_rejected_alone_and_never_wedges_the_shard() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), future_opts()).expect("open");
    let now = now_ms();
    for far in [now + 365 * 86_400_000, i64::MAX, now + 11 * 60_000] {
        let mut app = db.appender();
        app.add(labels!("__name__" => "real"), &[Sample::new(now - 1000, 1.0)]);
        app.add(labels!("__name__" => "bogus"), &[Sample::new(now - 1000, 1.0), Sample::new(far, 2.0)]);
        let rep = app.commit().expect("commit");
        assert_eq!(rep.rejected.len(), 1, "{far}: {rep:?}");
        assert_eq!((rep.rejected[0].reason, rep.rejected[0].count, rep.rejected[0].first_t_ms), (RejectReason::TooFarInFuture, 1, far));
    }
    // Within the tolerance (clock skew) is fine; the present still goes in afterwards.
    let mut app = db.appender();
    app.add(labels!("__name__" => "skewed"), &[Sample::new(now + 5 * 60_000, 1.0)]);
    app.add(labels!("__name__" => "real"), &[Sample::new(now, 2.0)]);
    assert!(app.commit().expect("commit").rejected.is_empty());
    let mut app = db.appender();
    app.add(labels!("__name__" => "new"), &[Sample::new(now, 3.0)]);
    assert!(app.commit().expect("commit").rejected.is_empty(), "a new series after the skewed one");
    // 0 turns the bound off (Prometheus' behaviour).
    let dir2 = tempfile::tempdir().expect("tmp");
    let db2 = Db::open(dir2.path(), Options { max_future_ms: 0, ..future_opts() }).expect("open");
    // The bound must stay under half the block range, where it could still move the present out.
    assert!(Db::open(dir2.path(), Options { block_range_ms: 10 * 60_000, ..future_opts() }).is_err());
    let mut app = db2.appender();
    app.add(labels!("__name__" => "x"), &[Sample::new(now + 365 * 86_400_000, 1.0)]);
    assert!(app.commit().expect("commit").rejected.is_empty());
}

/// A WAL written before the bound existed holds a sample from next year: replay drops it (and only
/// it), so the reopened database accepts the present again and keeps every other sample. (The real
/// data lies 3 h back, as in a database that ran before the wedge: the old version's inline head cut
/// moved it into blocks of 2 h cells that are closed now.)
#[test]
fn replay_drops_future_samples_of_an_older_wal_and_accepts_writes_again() {
    let dir = tempfile::tempdir().expect("tmp");
    let now = now_ms();
    let past = now - 3 * 3_600_000;
    {
        let db = Db::open(dir.path(), Options { max_future_ms: 0, ..future_opts() }).expect("open");
        let mut app = db.appender();
        app.add(labels!("__name__" => "real"), &[Sample::new(past, 1.0), Sample::new(past + 1000, 2.0)]);
        app.add(labels!("__name__" => "bogus"), &[Sample::new(past + 1000, 5.0), Sample::new(now + 365 * 86_400_000, 6.0)]);
        assert!(app.commit().expect("commit").rejected.is_empty());
        // Two samples of next year 5 h apart: the old head cut wrote the first into a block of its own.
        let mut app = db.appender();
        let far = now + 365 * 86_400_000 + 1000;
        app.add(labels!("__name__" => "bogus2"), &[Sample::new(far, 7.0), Sample::new(far + 5 * 3_600_000, 8.0)]);
        assert!(app.commit().expect("commit").rejected.is_empty());
        // The wedge, as it was: the present is out of bounds now.
        let mut app = db.appender();
        app.add(labels!("__name__" => "real"), &[Sample::new(now, 3.0)]);
        assert_eq!(app.commit().expect("commit").rejected[0].reason, RejectReason::OutOfBounds);
        db.close().expect("close");
    }
    // Without the repair nothing is dropped (a clock that is behind must not lose data): the future
    // samples replay as they are, and the wedge stays.
    let db = Db::open(dir.path(), future_opts()).expect("reopen with the bound");
    let got = query(&db, &[eq("__name__", "bogus")], 0, i64::MAX);
    assert_eq!(got[0].1.len(), 2, "kept without the repair");
    let mut app = db.appender();
    app.add(labels!("__name__" => "real"), &[Sample::new(now, 3.0)]);
    assert_eq!(app.commit().expect("commit").rejected[0].reason, RejectReason::OutOfBounds);
    db.close().expect("close");
    drop(db);
    let future_blocks = || walk(dir.path()).into_iter().filter(|p| p.parent().is_some_and(|d| d.ends_with("future-blocks"))).count();
    assert_eq!(future_blocks(), 0, "nothing set aside without the repair");
    // With the repair, once.
    let db = Db::open(dir.path(), Options { repair_future: true, ..future_opts() }).expect("reopen with the repair");
    let mut app = db.appender();
    app.add(labels!("__name__" => "real"), &[Sample::new(now, 3.0)]);
    app.add(labels!("__name__" => "fresh"), &[Sample::new(now, 4.0)]);
    let rep = app.commit().expect("commit");
    assert!(rep.rejected.is_empty(), "{rep:?}");
    let got = query(&db, &[eq("__name__", "real")], 0, i64::MAX);
    assert_eq!(got[0].1, vec![Sample::new(past, 1.0), Sample::new(past + 1000, 2.0), Sample::new(now, 3.0)]);
    let got = query(&db, &[eq("__name__", "bogus")], 0, i64::MAX);
    assert_eq!(got[0].1, vec![Sample::new(past + 1000, 5.0)], "only the future sample is gone");
    // The future block was moved aside, not deleted.
    let aside: Vec<_> = walk(dir.path()).into_iter().filter(|p| p.parent().is_some_and(|d| d.ends_with("future-blocks"))).collect();
    assert_eq!(aside.len(), 1, "{aside:?}");
    assert!(aside[0].join("meta.json").exists());
    drop(db);
    // A later start whose bound reaches it (the clock caught up; here: no bound) moves it back.
    let db = Db::open(dir.path(), Options { max_future_ms: 0, ..future_opts() }).expect("reopen without a bound");
    assert_eq!(future_blocks(), 0, "moved back");
    let got = query(&db, &[eq("__name__", "bogus2")], 0, i64::MAX);
    assert!(!got.is_empty() && !got[0].1.is_empty(), "the set-aside block is read again");
}

fn walk(d: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(d).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
            out.push(p);
        }
    }
    out
}

/// Issue 9: one request could create a million series. A per-request budget and a global cap reject
/// the samples of series that would exceed them, each with its reason, and write everything else.
#[test]
fn series_limits_reject_new_series_only() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), Options { max_series: 10, ..opts(3) }).expect("open");
    // Per request: 4 new series allowed, across shards.
    let mut app = db.appender();
    app.limit_new_series(4);
    for i in 0..6 {
        app.add(series(i), &[Sample::new(1, 1.0)]);
    }
    let rep = app.commit().expect("commit");
    assert_eq!((rep.series_created, rep.samples_written), (4, 4));
    let limited: u64 = rep.rejected.iter().filter(|r| r.reason == RejectReason::RequestSeriesLimit).map(|r| r.count).sum();
    assert_eq!(limited, 2, "{rep:?}");
    // Existing series are never limited: the 4 created ones take more samples under a zero budget.
    let created: Vec<usize> = (0..6).filter(|&i| !query(&db, &[eq("i", &i.to_string())], 0, 10).is_empty()).collect();
    assert_eq!(created.len(), 4);
    let mut app = db.appender();
    app.limit_new_series(0);
    for &i in &created {
        app.add(series(i), &[Sample::new(2, 2.0)]);
    }
    app.add(series(100), &[Sample::new(2, 2.0)]);
    let rep = app.commit().expect("commit");
    assert_eq!((rep.series_created, rep.samples_written, rep.rejected_samples()), (0, 4, 1));
    // Globally: 10 active series at most, whatever the requests.
    let mut app = db.appender();
    for i in 200..220 {
        app.add(series(i), &[Sample::new(3, 3.0)]);
    }
    let rep = app.commit().expect("commit");
    assert_eq!(rep.series_created, 6);
    assert!(rep.rejected.iter().all(|r| r.reason == RejectReason::MaxSeries));
    assert_eq!(rep.rejected_samples(), 14);
    assert_eq!(db.metrics().active_series.load(std::sync::atomic::Ordering::Relaxed), 10);
    // The count survives a restart (replayed series count too).
    db.close().expect("close");
    drop(db);
    let db = Db::open(dir.path(), Options { max_series: 10, ..opts(3) }).expect("reopen");
    assert_eq!(db.metrics().active_series.load(std::sync::atomic::Ordering::Relaxed), 10);
    let mut app = db.appender();
    app.add(series(300), &[Sample::new(4, 4.0)]);
    assert_eq!(app.commit().expect("commit").rejected[0].reason, RejectReason::MaxSeries);
}

/// Issue 9: `tessera.json` was trusted blindly: version 99 opened, and shards 2 → 7 created five new
/// shards and routed existing series elsewhere. Now the file is checksummed and checked against the
/// shard directories before anything is created, and an older file without a checksum still opens.
#[test]
fn the_identity_file_is_validated_before_anything_is_created() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(2)).expect("open");
    fill(&db, 100);
    let before = query(&db, &[eq("__name__", "m")], 0, 5000);
    db.close().expect("close");
    drop(db);
    let meta = dir.path().join("tessera.json");
    let good = std::fs::read_to_string(&meta).expect("read");
    assert!(good.contains("crc32c"), "{good}");
    assert_eq!(tessera_tsdb::db::recorded_shards(dir.path()).expect("valid"), Some(2));
    let shard_dirs = || std::fs::read_dir(dir.path()).expect("ls").flatten().filter(|e| e.file_name().to_string_lossy().starts_with("shard-")).count();
    let refuse = |text: &str, shards: usize, what: &str| {
        std::fs::write(&meta, text).expect("write");
        let err = Db::open(dir.path(), opts(shards)).expect_err(what);
        assert!(err.to_string().contains(what), "{err}");
        assert!(tessera_tsdb::db::recorded_shards(dir.path()).is_err());
        assert_eq!(shard_dirs(), 2, "nothing created");
    };
    refuse(&good.replace("\"version\": 1", "\"version\": 99"), 2, "version 99");
    refuse(&good.replace("\"shards\": 2", "\"shards\": 7"), 7, "checksum");
    // Without a checksum (as older versions wrote it), the directories still tell.
    refuse("{\"version\": 1, \"shards\": 7}", 7, "holds only 2 shard directories");
    refuse("{\"version\": 1, \"shards\": 1}", 1, "holds shard-001");
    refuse("{\"version\": 1, \"shards\": 2, \"extra\": true}", 2, "unknown field");
    refuse("not json", 2, "bad tessera.json");
    // A checksummed file with a shard directory missing (a crash while the shards were first created)
    // opens, and the shard is created.
    std::fs::write(&meta, &good).expect("restore");
    let gone = dir.path().join("shard-001");
    let aside = dir.path().join("aside-001");
    std::fs::rename(&gone, &aside).expect("hide shard-001");
    let db = Db::open(dir.path(), opts(2)).expect("opens with a shard directory missing");
    assert!(gone.exists());
    drop(db);
    std::fs::remove_dir_all(&gone).expect("rm new shard");
    std::fs::rename(&aside, &gone).expect("restore shard-001");
    std::fs::remove_file(&meta).expect("rm");
    let err = Db::open(dir.path(), opts(2)).expect_err("missing");
    assert!(err.to_string().contains("missing"), "{err}");
    // An older file without a checksum opens, and is rewritten with one.
    std::fs::write(&meta, "{\"version\": 1, \"shards\": 2}").expect("write");
    let db = Db::open(dir.path(), opts(2)).expect("legacy file opens");
    assert_eq!(query(&db, &[eq("__name__", "m")], 0, 5000), before);
    assert!(std::fs::read_to_string(&meta).expect("read").contains("crc32c"));
}

#[test]
fn an_early_cut_that_finds_no_chunk_boundary_is_not_retried_on_every_commit() {
    use std::sync::atomic::Ordering::Relaxed;
    // Over the soft limit from the first closed chunk on; series "d"'s first chunk starts at the head's
    // start and reaches past the appendable minimum, so no chunk boundary lies in the cuttable range and
    // the early cut gives up. It
    // scans every series under the shard's write lock: once per sixteenth of a block range of new data
    // (62,500 ms here), not on every commit.
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), Options { block_range_ms: 1_000_000, head_chunk_bytes_soft_limit: 1, ..opts(1) }).expect("open");
    let mut app = db.appender();
    app.add(labels!("__name__" => "a"), &(0..121).map(|i| Sample::new(i * 3 / 2, 1.0)).collect::<Vec<_>>());
    app.add(labels!("__name__" => "d"), &[Sample::new(0, 1.0)]);
    app.commit().expect("commit");
    let skipped = || db.metrics().head_early_cuts_skipped.load(Relaxed);
    assert_eq!(skipped(), 0, "nothing is cuttable below the appendable minimum yet");
    let mut t = 600_000;
    let mut commits = 0;
    while t < 600_000 + 62_500 {
        let mut app = db.appender();
        app.add(labels!("__name__" => "d"), &[Sample::new(t, 1.0)]);
        app.commit().expect("commit");
        commits += 1;
        t += 500;
    }
    assert_eq!(commits, 125);
    assert_eq!(skipped(), 1, "one scan for the first 62.5 s of data past the appendable minimum");
    let mut app = db.appender();
    app.add(labels!("__name__" => "d"), &[Sample::new(t, 1.0)]);
    app.commit().expect("commit");
    assert_eq!(skipped(), 2, "tried again once a sixteenth of a block range of newer data arrived");
    assert_eq!(db.metrics().head_cuts.load(Relaxed), 0);
    // Nothing was lost or cut: every sample is still read back.
    let got = query(&db, &[eq("__name__", "d")], 0, i64::MAX);
    assert_eq!(got[0].1.len(), 127);
}
