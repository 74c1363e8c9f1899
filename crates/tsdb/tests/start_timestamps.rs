//! Per-sample start timestamps (ST, Prometheus 3.14): written with `add_with_st`/`add_owned_with_st`,
//! read back through the `Db` querier with `decode_chunk_range_st_into`, from the head, after a WAL
//! replay, after flushing into blocks and after compaction; mixed ST / no-ST series; out-of-order
//! samples; deletions; and the no-ST path still writing plain XOR chunks.

mod common;

use common::*;
use tessera_model::{ChunkEncoding, Labels, Matcher, Queryable, STALE_NAN, Sample, SelectHints, labels};
use tessera_tsdb::{Db, Options, RejectReason};

/// (t, st, value bits) of every sample of every series matching `ms` in `[mint, maxt]`, with the
/// encodings of the chunks the querier returned.
type Got = Vec<(Labels, Vec<(i64, i64, u64)>, Vec<ChunkEncoding>)>;

fn query_st(db: &std::sync::Arc<Db>, ms: &[Matcher], mint: i64, maxt: i64) -> Got {
    let q = db.querier(mint, maxt).expect("querier");
    let mut out = Vec::new();
    for s in q.select(ms, &SelectHints::default()).expect("select") {
        let s = s.expect("series");
        for w in s.chunks.windows(2) {
            assert!(w[0].maxt_ms < w[1].mint_ms, "chunks overlap for {}", s.labels);
        }
        let (mut v, mut sts) = (Vec::new(), Vec::new());
        for c in &s.chunks {
            tessera_encoding::decode_chunk_range_st_into(c, mint, maxt, &mut v, &mut sts).expect("decodes");
        }
        assert_eq!(v.len(), sts.len());
        let triples = v.iter().zip(&sts).map(|(s, &st)| (s.t, st, s.v.to_bits())).collect();
        out.push((s.labels, triples, s.chunks.iter().map(|c| c.encoding).collect()));
    }
    out
}

fn triples(s: &[Sample], sts: &[i64]) -> Vec<(i64, i64, u64)> {
    s.iter().zip(sts).map(|(s, &st)| (s.t, st, s.v.to_bits())).collect()
}

/// Four series over `[0, 1400)` every 10 ms: a cumulative counter (ST constant, reset halfway), an
/// OTel-style delta (ST = previous t), a series that gets STs only from t = 700 on, and one without.
fn data() -> Vec<(Labels, Vec<Sample>, Vec<i64>)> {
    let ts: Vec<i64> = (0..140).map(|i| i * 10).collect();
    let samples = |f: &dyn Fn(i64) -> f64| ts.iter().map(|&t| Sample::new(t, f(t))).collect::<Vec<_>>();
    let cumulative = ts.iter().map(|&t| if t < 700 { -5_000 } else { 695 }).collect();
    let delta = ts.iter().map(|&t| if t == 0 { -10 } else { t - 10 }).collect();
    let late = ts.iter().map(|&t| if t < 700 { 0 } else { t - 3 }).collect();
    vec![
        (labels!("__name__" => "c", "k" => "cumulative"), samples(&|t| (t % 700) as f64), cumulative),
        (labels!("__name__" => "c", "k" => "delta"), samples(&|t| if t == 500 { STALE_NAN } else { 1.0 }), delta),
        (labels!("__name__" => "c", "k" => "late"), samples(&|t| t as f64 / 3.0), late),
        (labels!("__name__" => "c", "k" => "none"), samples(&|t| t as f64), vec![0; 140]),
    ]
}

/// Writes `data()` in commits of 20 samples per series, alternating the two ST entry points; the
/// no-ST series goes through plain `add`.
fn write(db: &std::sync::Arc<Db>) {
    let d = data();
    for k in 0..7 {
        let r = k * 20..(k + 1) * 20;
        let mut app = db.appender();
        for (l, s, sts) in &d {
            if l.get("k") == "none" {
                app.add(l.clone(), &s[r.clone()]);
            } else if k % 2 == 0 {
                app.add_with_st(l.clone(), &s[r.clone()], &sts[r.clone()]);
            } else {
                app.add_owned_with_st(l.clone(), s[r.clone()].to_vec(), sts[r.clone()].to_vec());
            }
        }
        let rep = app.commit().expect("commit");
        assert!(rep.rejected.is_empty(), "{rep:?}");
        assert_eq!(rep.samples_written, 80);
    }
}

fn check(db: &std::sync::Arc<Db>, what: &str) {
    let got = query_st(db, &[eq("__name__", "c")], i64::MIN, i64::MAX);
    let mut want = data();
    want.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(got.len(), want.len(), "{what}");
    for ((gl, gs, encs), (wl, ws, wsts)) in got.iter().zip(&want) {
        assert_eq!(gl, wl, "{what}");
        assert_eq!(gs, &triples(ws, wsts), "{what}: {wl}");
        match wl.get("k") {
            // Blocks may store runs of XOR chunks as Dense or Decimal (`Options::cold_codec`), and the head
            // its chunks of short decimals as Decimal (open: DecimalOpen).
            "none" => assert!(
                encs.iter().all(|&e| matches!(e, ChunkEncoding::Xor | ChunkEncoding::Dense | ChunkEncoding::Decimal | ChunkEncoding::DecimalOpen)),
                "{what}: {encs:?}"
            ),
            "late" => assert!(encs.contains(&ChunkEncoding::XorSt), "{what}: {encs:?}"),
            _ => assert!(encs.iter().all(|&e| e == ChunkEncoding::XorSt), "{what}: {encs:?}"),
        }
    }
    // A range query returns the STs of just that range.
    let got = query_st(db, &[eq("k", "delta")], 695, 905);
    let ts: Vec<(i64, i64)> = got[0].1.iter().map(|x| (x.0, x.1)).collect();
    assert_eq!(ts, (70..=90).map(|i| (i * 10, i * 10 - 10)).collect::<Vec<_>>(), "{what}");
}

#[test]
fn start_timestamps_survive_head_replay_flush_and_compaction() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = Options { block_range_ms: 10_000, ..opts(2) };
    let db = Db::open(dir.path(), o.clone()).expect("open");
    write(&db);
    check(&db, "head");
    drop(db);
    let db = Db::open(dir.path(), o.clone()).expect("reopen");
    check(&db, "after WAL replay");
    db.flush().expect("flush");
    assert_eq!(db.stats().head_samples, 0);
    check(&db, "blocks");
    db.close().expect("close");
    drop(db);
    let db = Db::open(dir.path(), o).expect("reopen");
    check(&db, "blocks after reopen");
}

#[test]
fn start_timestamps_survive_block_cuts_and_compaction() {
    // Block range 1000 (the minimum): the flush cuts two blocks, then blocks are compacted.
    let dir = tempfile::tempdir().expect("tmp");
    let o = opts(1);
    let db = Db::open(dir.path(), o.clone()).expect("open");
    write(&db);
    db.flush().expect("flush");
    let before = db.stats().blocks;
    assert!(before >= 2, "{:?}", db.stats());
    check(&db, "blocks on the 1000 ms grid");
    db.compact().expect("compact");
    check(&db, "compacted");
}

#[test]
fn out_of_order_samples_keep_their_start_timestamps() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = Options { ooo_window_ms: 300, ..opts(1) };
    let db = Db::open(dir.path(), o.clone()).expect("open");
    let l = labels!("__name__" => "x");
    let mut app = db.appender();
    app.add_with_st(l.clone(), &[Sample::new(100, 1.0), Sample::new(200, 2.0), Sample::new(400, 4.0)], &[50, 150, 0]);
    app.commit().expect("commit");
    let mut app = db.appender();
    // 300 and 150 out of order (with STs), 50 too old, 200 collides with the in-order sample (which wins).
    app.add_with_st(
        l.clone(),
        &[Sample::new(300, 3.0), Sample::new(150, 1.5), Sample::new(50, 0.5), Sample::new(200, 9.0)],
        &[-7, 140, 1, 2],
    );
    let rep = app.commit().expect("commit");
    assert_eq!((rep.rejected[0].reason, rep.rejected[0].count), (RejectReason::TooOld, 1));
    let want = vec![
        (100, 50, 1f64.to_bits()),
        (150, 140, 1.5f64.to_bits()),
        (200, 150, 2f64.to_bits()),
        (300, -7, 3f64.to_bits()),
        (400, 0, 4f64.to_bits()),
    ];
    assert_eq!(query_st(&db, &[eq("__name__", "x")], 0, 1000)[0].1, want);
    drop(db);
    let db = Db::open(dir.path(), o).expect("reopen");
    assert_eq!(query_st(&db, &[eq("__name__", "x")], 0, 1000)[0].1, want);
    // Cut into a block: the out-of-order samples' STs are there too.
    db.flush().expect("flush");
    assert_eq!(query_st(&db, &[eq("__name__", "x")], 0, 1000)[0].1, want);
}

#[test]
fn deletions_keep_the_other_samples_start_timestamps() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), Options { block_range_ms: 10_000, ..opts(1) }).expect("open");
    write(&db);
    db.delete(100, 199, &[eq("k", "cumulative")]).expect("delete");
    let (_, s, sts) = data().into_iter().find(|d| d.0.get("k") == "cumulative").expect("series");
    let want: Vec<_> = triples(&s, &sts).into_iter().filter(|x| !(100..=199).contains(&x.0)).collect();
    assert_eq!(query_st(&db, &[eq("k", "cumulative")], i64::MIN, i64::MAX)[0].1, want);
    db.flush().expect("flush");
    db.compact().expect("compact");
    assert_eq!(query_st(&db, &[eq("k", "cumulative")], i64::MIN, i64::MAX)[0].1, want);
}

#[test]
fn partly_rejected_batches_keep_sts_aligned_and_bad_lengths_drop_them() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = opts(1);
    let db = Db::open(dir.path(), o.clone()).expect("open");
    let l = labels!("__name__" => "x");
    let y = labels!("__name__" => "y");
    let z = labels!("__name__" => "z");
    let mut app = db.appender();
    app.add_with_st(l.clone(), &[Sample::new(10, 1.0), Sample::new(20, 2.0)], &[1, 2]);
    app.commit().expect("commit");
    let mut app = db.appender();
    // 20 with another value and 15 are rejected; 30 and 40 keep their own STs.
    app.add_with_st(
        l.clone(),
        &[Sample::new(20, 5.0), Sample::new(15, 1.0), Sample::new(30, 3.0), Sample::new(40, 4.0)],
        &[100, 200, 300, 400],
    );
    // Mismatched lengths: STs ignored, samples written.
    app.add_with_st(y.clone(), &[Sample::new(10, 1.0), Sample::new(20, 2.0)], &[5]);
    // All-zero STs: stored exactly as without.
    app.add_owned_with_st(z.clone(), vec![Sample::new(10, 1.0)], vec![0]);
    let rep = app.commit().expect("commit");
    assert_eq!(rep.samples_written, 5);
    assert_eq!(rep.rejected_samples(), 2);
    let want_x = vec![(10, 1, 1f64.to_bits()), (20, 2, 2f64.to_bits()), (30, 300, 3f64.to_bits()), (40, 400, 4f64.to_bits())];
    let check = |db: &std::sync::Arc<Db>, round: &str| {
        let got = query_st(db, &[m(tessera_model::MatchOp::Regex, "__name__", "x|y|z")], i64::MIN, i64::MAX);
        assert_eq!(got[0].1, want_x, "{round}");
        assert_eq!(got[1].1, vec![(10, 0, 1f64.to_bits()), (20, 0, 2f64.to_bits())], "{round}");
        // Plain float chunks (the head's open chunk of short decimals is an open decimal chunk).
        assert_eq!(got[1].2, vec![ChunkEncoding::DecimalOpen], "{round}");
        assert_eq!(got[2].2, vec![ChunkEncoding::DecimalOpen], "{round}");
    };
    check(&db, "head");
    drop(db);
    let db = Db::open(dir.path(), o).expect("reopen");
    check(&db, "replay");
}

/// A XorSt chunk of `samples` with `sts`.
fn st_chunk(samples: &[Sample], sts: &[i64]) -> tessera_model::ChunkRef {
    tessera_model::ChunkRef {
        mint_ms: samples[0].t,
        maxt_ms: samples[samples.len() - 1].t,
        encoding: ChunkEncoding::XorSt,
        data: tessera_encoding::encode_xor_st(samples, sts).into(),
    }
}

#[test]
fn compaction_merges_overlapping_xor_st_chunks_and_copies_lone_ones() {
    use tessera_tsdb::block::{Block, write_block};
    let dir = tempfile::tempdir().expect("tmp");
    let x = labels!("__name__" => "x");
    let lone = labels!("__name__" => "lone");
    // Two blocks over the same range: x's chunks interleave (every 10 ms, offset by 5), so compaction
    // must decode, merge and re-encode them; `lone` only lives in the first block.
    let a: Vec<Sample> = (0..50).map(|i| Sample::new(i * 10, i as f64)).collect();
    let a_st: Vec<i64> = a.iter().map(|s| s.t - 1).collect();
    let b: Vec<Sample> = (0..50).map(|i| Sample::new(i * 10 + 5, -(i as f64))).collect();
    let b_st: Vec<i64> = b.iter().map(|s| if s.t % 20 == 5 { 0 } else { 42 }).collect();
    let lone_s: Vec<Sample> = (0..10).map(|i| Sample::new(i, 1.0)).collect();
    let lone_c = st_chunk(&lone_s, &[7; 10]);
    let ma = write_block(dir.path(), 0, 1000, [Ok((lone.clone(), vec![lone_c.clone()])), Ok((x.clone(), vec![st_chunk(&a, &a_st)]))].into_iter(), 1, vec![])
        .expect("write")
        .expect("block");
    let mb = write_block(dir.path(), 0, 1000, [Ok((x.clone(), vec![st_chunk(&b, &b_st)]))].into_iter(), 1, vec![])
        .expect("write")
        .expect("block");
    let blocks = [Block::open(&dir.path().join(&ma.id)).expect("open"), Block::open(&dir.path().join(&mb.id)).expect("open")];
    let mc = tessera_tsdb::compact::compact(&blocks, dir.path()).expect("compact").expect("block");
    let c = Block::open(&dir.path().join(&mc.id)).expect("open");
    let mut want: Vec<(i64, i64, u64)> = triples(&a, &a_st).into_iter().chain(triples(&b, &b_st)).collect();
    want.sort_by_key(|x| x.0);
    let mut seen = 0;
    for r in c.all_series().expect("postings") {
        let (l, chunks) = c.series(r).expect("series");
        let (mut v, mut sts) = (Vec::new(), Vec::new());
        for ch in &chunks {
            tessera_encoding::decode_chunk_range_st_into(ch, i64::MIN, i64::MAX, &mut v, &mut sts).expect("decodes");
        }
        if l == lone {
            assert_eq!(chunks.len(), 1);
            assert_eq!((chunks[0].encoding, &chunks[0].data[..]), (ChunkEncoding::XorSt, &lone_c.data[..]), "copied as is");
        } else {
            assert_eq!(triples(&v, &sts), want);
            assert!(chunks.iter().all(|c| c.encoding == ChunkEncoding::XorSt), "every part has an ST");
        }
        seen += 1;
    }
    assert_eq!(seen, 2);
}

mod props {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// Commits: per commit, per series (0..3), a run of (gap, st kind, value) steps; with `with_st`
    /// false a run goes through plain `add`.
    type Plan = Vec<Vec<(usize, bool, Vec<(i64, u8, f64)>)>>;
    /// ("k" label value, (t, st, value bits) of its samples).
    type Read = Vec<(String, Vec<(i64, i64, u64)>)>;

    fn plan() -> impl Strategy<Value = Plan> {
        let step = (1i64..40, 0u8..4, prop_oneof![Just(1.0), Just(STALE_NAN), any::<f64>()]);
        let run = (0usize..3, any::<bool>(), proptest::collection::vec(step, 1..30));
        proptest::collection::vec(proptest::collection::vec(run, 1..4), 1..8)
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 8, ..ProptestConfig::default() })]

        /// Whatever mix of ST and no-ST runs is written, the querier returns exactly what was written,
        /// from the head, after WAL replay and after a flush into blocks.
        #[test]
        fn random_mixes_read_back_exactly(plan in plan()) {
            let dir = tempfile::tempdir().expect("tmp");
            let o = Options { block_range_ms: 1000, ..opts(2) };
            let db = Db::open(dir.path(), o.clone()).expect("open");
            let mut model: BTreeMap<String, Vec<(i64, i64, u64)>> = BTreeMap::new();
            // One clock for all series, so no series falls behind the head's appendable window.
            let mut clock = 0i64;
            let mut last_t = [0i64; 3];
            for commit in &plan {
                let mut app = db.appender();
                for (k, with_st, steps) in commit {
                    let (mut samples, mut sts) = (Vec::new(), Vec::new());
                    for &(gap, kind, v) in steps {
                        let prev = last_t[*k];
                        clock += gap;
                        let t = clock;
                        last_t[*k] = t;
                        let st = if !with_st { 0 } else { match kind { 0 => 0, 1 => 1_000, 2 => prev, _ => t - 5 } };
                        samples.push(Sample::new(t, v));
                        sts.push(st);
                    }
                    let ks = k.to_string();
                    let l = labels!("__name__" => "p", "k" => ks.as_str());
                    model.entry(k.to_string()).or_default().extend(triples(&samples, &sts));
                    if *with_st { app.add_owned_with_st(l, samples, sts) } else { app.add(l, &samples) }
                }
                let rep = app.commit().expect("commit");
                prop_assert!(rep.rejected.is_empty(), "{:?}", rep);
            }
            let check = |db: &std::sync::Arc<Db>| -> Read {
                query_st(db, &[eq("__name__", "p")], i64::MIN, i64::MAX).into_iter().map(|(l, s, _)| (l.get("k").to_string(), s)).collect()
            };
            let want: Read = model.into_iter().collect();
            prop_assert_eq!(&check(&db), &want);
            drop(db);
            let db = Db::open(dir.path(), o).expect("reopen");
            prop_assert_eq!(&check(&db), &want);
            // Replay keeps one head series per label set, even when a series was garbage-collected and
            // created again under a new ref before the restart.
            prop_assert!(db.stats().head_series <= want.len() as u64, "{:?}", db.stats());
            db.flush().expect("flush");
            prop_assert_eq!(&check(&db), &want);
        }
    }
}
