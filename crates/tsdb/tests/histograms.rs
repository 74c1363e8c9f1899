//! Native histograms through the embedded API: append rules, chunk kinds, WAL replay, blocks,
//! compaction and deletion — each read back sample by sample.

mod common;

use common::*;
use tessera_model::histogram::{CounterResetHint, FloatHistogram, Histogram, Span};
use tessera_model::{labels, ChunkEncoding, HistogramSample, HistogramValue, Labels, Queryable, Sample, SelectHints};
use tessera_tsdb::{Db, RejectReason};

/// A sample read back: a float or a histogram (hints dropped: chunks keep them only per chunk).
#[derive(Debug, Clone, PartialEq)]
enum Got {
    F(i64, u64),
    H(i64, Histogram),
    FH(i64, FloatHistogram),
}

fn read(db: &std::sync::Arc<Db>, l: &Labels, mint: i64, maxt: i64) -> (Vec<Got>, Vec<ChunkEncoding>) {
    let q = db.querier(mint, maxt).expect("querier");
    let ms: Vec<_> = l.iter().map(|x| eq(x.name, x.value)).collect();
    let mut set = q.select(&ms, &SelectHints::default()).expect("select");
    let Some(s) = set.next() else { return (vec![], vec![]) };
    let s = s.expect("series");
    for w in s.chunks.windows(2) {
        assert!(w[0].maxt_ms < w[1].mint_ms, "chunks overlap");
    }
    let mut out = Vec::new();
    for c in &s.chunks {
        match c.encoding {
            e if e.is_histogram() => {
                let mut v = Vec::new();
                tessera_encoding::decode_histogram_samples_into(c, &mut v).expect("decodes");
                out.extend(v.into_iter().map(|s| match s.h {
                    HistogramValue::Int(mut h) => {
                        h.counter_reset_hint = CounterResetHint::Unknown;
                        Got::H(s.t, h)
                    }
                    HistogramValue::Float(mut h) => {
                        h.counter_reset_hint = CounterResetHint::Unknown;
                        Got::FH(s.t, h)
                    }
                }));
            }
            _ => {
                let mut v = Vec::new();
                tessera_encoding::decode_chunk_range_into(c, i64::MIN, i64::MAX, &mut v).expect("decodes");
                out.extend(v.into_iter().map(|s| Got::F(s.t, s.v.to_bits())));
            }
        }
    }
    out.retain(|g| {
        let t = match g {
            Got::F(t, _) | Got::H(t, _) | Got::FH(t, _) => *t,
        };
        t >= mint && t <= maxt
    });
    (out, s.chunks.iter().map(|c| c.encoding).collect())
}

/// An integer histogram at step `i`: counts grow, a bucket appears at step 5 (a recode).
fn ih(i: u64) -> Histogram {
    let grow = i >= 5;
    Histogram {
        schema: 1,
        zero_threshold: 0.001,
        zero_count: i,
        count: 3 * i + if grow { i } else { 0 },
        sum: 1.5 * i as f64,
        positive_spans: vec![Span::new(0, if grow { 3 } else { 2 })],
        positive_buckets: if grow { vec![i as i64, 0, 0] } else { vec![i as i64, 0] },
        negative_spans: vec![Span::new(1, 1)],
        negative_buckets: vec![i as i64],
        ..Histogram::default()
    }
}

fn fh(i: u64) -> FloatHistogram {
    FloatHistogram {
        schema: -53,
        count: 2.5 * i as f64,
        sum: 0.25 * i as f64,
        positive_spans: vec![Span::new(0, 3)],
        positive_buckets: vec![0.5 * i as f64, i as f64, i as f64],
        custom_values: vec![0.1, 1.0],
        ..FloatHistogram::default()
    }
}

fn hs(ts: impl Iterator<Item = i64>, f: impl Fn(u64) -> HistogramValue) -> Vec<HistogramSample> {
    ts.enumerate().map(|(i, t)| HistogramSample::new(t, f(i as u64))).collect()
}

fn expected(v: &[HistogramSample]) -> Vec<Got> {
    v.iter()
        .map(|s| match &s.h {
            HistogramValue::Int(h) => {
                let mut h = h.clone();
                h.counter_reset_hint = CounterResetHint::Unknown;
                Got::H(s.t, h)
            }
            HistogramValue::Float(h) => Got::FH(s.t, h.clone()),
        })
        .collect()
}

/// Bucket vectors as the chunk stores them once later samples added a bucket: every earlier sample
/// read back with the wider layout (upstream's recoding), so compare on absolute per-index counts.
fn normalise(v: Vec<Got>) -> Vec<Got> {
    v.into_iter()
        .map(|g| match g {
            Got::H(t, h) => Got::FH(t, h.to_float()),
            other => other,
        })
        .map(|g| match g {
            Got::FH(t, mut h) => {
                // Drop trailing/leading empty buckets into a canonical (index → count) list.
                let mut idx = Vec::new();
                let mut at = 0i32;
                let mut k = 0;
                for sp in &h.positive_spans {
                    at += sp.offset;
                    for _ in 0..sp.length {
                        if h.positive_buckets[k] != 0.0 {
                            idx.push((at, h.positive_buckets[k]));
                        }
                        at += 1;
                        k += 1;
                    }
                }
                h.positive_spans = idx.iter().map(|(i, _)| Span::new(*i, 1)).collect();
                h.positive_buckets = idx.iter().map(|(_, c)| *c).collect();
                Got::FH(t, h)
            }
            other => other,
        })
        .collect()
}

#[test]
fn integer_and_float_histograms_round_trip_through_head_wal_blocks_and_compaction() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(2)).expect("open");
    let a = labels!("__name__" => "lat", "kind" => "int");
    let b = labels!("__name__" => "lat", "kind" => "nhcb");
    let ia = hs((0..300).map(|t| t * 10), |i| HistogramValue::Int(ih(i % 70)));
    let fb = hs((0..300).map(|t| t * 10 + 3), |i| HistogramValue::Float(fh(i)));
    let mut app = db.appender();
    app.add_histograms(a.clone(), ia.clone());
    app.add_histograms(b.clone(), fb.clone());
    let rep = app.commit().expect("commit");
    assert_eq!((rep.histograms_written, rep.samples_written, rep.series_created), (600, 0, 2));
    assert!(rep.rejected.is_empty(), "{:?}", rep.rejected);

    let check = |db: &std::sync::Arc<Db>, what: &str| {
        let (got, encs) = read(db, &a, 0, 3000);
        assert_eq!(normalise(got), normalise(expected(&ia)), "{what}: integer series");
        assert!(encs.iter().all(|e| *e == ChunkEncoding::Histogram), "{what}: {encs:?}");
        // Counter resets (every 70 samples) start new chunks; block boundaries (1000 ms) cut too.
        assert!(encs.len() >= 6, "{what}: {} chunks", encs.len());
        let (got, encs) = read(db, &b, 0, 3000);
        assert_eq!(got, expected(&fb), "{what}: float series");
        assert!(encs.iter().all(|e| *e == ChunkEncoding::FloatHistogram), "{what}: {encs:?}");
    };
    check(&db, "head");
    drop(db);
    let db = Db::open(dir.path(), opts(2)).expect("reopen");
    check(&db, "after WAL replay");
    db.flush().expect("flush");
    check(&db, "blocks");
    db.compact().expect("compact");
    check(&db, "compacted");
    drop(db);
    let db = Db::open(dir.path(), opts(2)).expect("reopen");
    check(&db, "reopened blocks");
}

#[test]
fn histogram_append_rules_follow_upstream() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(1)).expect("open");
    let l = labels!("__name__" => "h");
    let mut app = db.appender();
    app.add_histograms(l.clone(), hs([10, 20].into_iter(), |i| HistogramValue::Int(ih(i + 1))));
    app.commit().expect("commit");
    let mut bad = ih(9);
    bad.positive_buckets.push(1);
    let mut app = db.appender();
    app.add_histograms(
        l.clone(),
        vec![
            HistogramSample::new(20, HistogramValue::Int(ih(2))), // exact duplicate: accepted, dropped
            HistogramSample::new(20, HistogramValue::Int(ih(3))), // same time, other value
            HistogramSample::new(15, HistogramValue::Int(ih(3))), // out of order
            HistogramSample::new(30, HistogramValue::Int(bad)),   // buckets do not match spans
            HistogramSample::new(40, HistogramValue::Int(ih(4))), // fine
        ],
    );
    let rep = app.commit().expect("commit");
    assert_eq!(rep.histograms_written, 2);
    let mut reasons: Vec<(RejectReason, u64, bool)> = rep.rejected.iter().map(|r| (r.reason, r.count, r.histograms)).collect();
    reasons.sort_by_key(|r| r.0.label());
    assert_eq!(
        reasons,
        [
            (RejectReason::DuplicateTimestamp, 1, true),
            (RejectReason::InvalidHistogram, 1, true),
            (RejectReason::OutOfOrder, 1, true)
        ]
    );
    let (got, _) = read(&db, &l, 0, 100);
    let times: Vec<i64> = got.iter().map(|g| if let Got::H(t, _) = g { *t } else { -1 }).collect();
    assert_eq!(times, [10, 20, 40]);
}

#[test]
fn a_series_switching_between_floats_and_histograms_gets_chunks_of_each_kind() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(1)).expect("open");
    let l = labels!("__name__" => "mixed");
    let mut app = db.appender();
    app.add(l.clone(), &[Sample::new(1, 1.0), Sample::new(2, 2.0)]);
    app.add_histograms(l.clone(), hs([3, 4].into_iter(), |i| HistogramValue::Float(fh(i))));
    app.commit().expect("commit");
    let mut app = db.appender();
    app.add(l.clone(), &[Sample::new(5, 5.0)]);
    // A histogram at the float's timestamp is a duplicate timestamp with another value.
    app.add_histograms(l.clone(), hs([5, 6].into_iter(), |i| HistogramValue::Int(ih(i))));
    let rep = app.commit().expect("commit");
    assert_eq!(rep.rejected.iter().map(|r| (r.reason, r.count)).collect::<Vec<_>>(), [(RejectReason::DuplicateTimestamp, 1)]);
    let want_encs = [ChunkEncoding::Xor, ChunkEncoding::FloatHistogram, ChunkEncoding::Xor, ChunkEncoding::Histogram];
    for what in ["head", "replayed", "block"] {
        let db = match what {
            "head" => db.clone(),
            _ => {
                let d = Db::open(dir.path(), opts(1)).expect("reopen");
                if what == "block" {
                    d.flush().expect("flush");
                }
                d
            }
        };
        let (got, mut encs) = read(&db, &l, 0, 100);
        // Blocks may store float runs in Tessera's denser codecs.
        encs.iter_mut().filter(|e| matches!(**e, ChunkEncoding::Dense | ChunkEncoding::Decimal)).for_each(|e| *e = ChunkEncoding::Xor);
        assert_eq!(encs, want_encs, "{what}");
        assert_eq!(got.len(), 6, "{what}: {got:?}");
        assert_eq!(got[4], Got::F(5, 5f64.to_bits()), "{what}");
        drop(db);
    }
}

#[test]
fn one_commit_naming_a_series_twice_stores_its_floats_and_histograms_in_time_order() {
    // Histograms at 30 in one batch, then a float at 20 and a histogram at 40 in another, one commit:
    // floats are judged before histograms, so all three are in order only if they are stored in that
    // order too (storing batch by batch put the histogram chunk at 30 before the float chunk at 20).
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(1)).expect("open");
    let l = labels!("__name__" => "twice");
    let mut app = db.appender();
    app.add_histograms(l.clone(), hs([30].into_iter(), |i| HistogramValue::Int(ih(i))));
    app.add(l.clone(), &[Sample::new(20, 2.0)]);
    app.add_histograms(l.clone(), hs([40].into_iter(), |i| HistogramValue::Int(ih(i + 1))));
    let rep = app.commit().expect("commit");
    assert!(rep.rejected.is_empty(), "{:?}", rep.rejected);
    for what in ["head", "replayed"] {
        let db = if what == "head" { db.clone() } else { Db::open(dir.path(), opts(1)).expect("reopen") };
        // `read` asserts that the chunks do not overlap (in list order).
        let (got, mut encs) = read(&db, &l, 0, 100);
        // A float chunk of short decimals closes as Decimal.
        encs.iter_mut().filter(|e| **e == ChunkEncoding::Decimal).for_each(|e| *e = ChunkEncoding::Xor);
        assert_eq!(encs, [ChunkEncoding::Xor, ChunkEncoding::Histogram], "{what}");
        let ts: Vec<i64> = got.iter().map(|g| match g {
            Got::F(t, _) | Got::H(t, _) | Got::FH(t, _) => *t,
        }).collect();
        assert_eq!(ts, [20, 30, 40], "{what}: {got:?}");
        drop(db);
    }
}

#[test]
fn deleting_part_of_a_histogram_series_reencodes_its_chunks() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(1)).expect("open");
    let l = labels!("__name__" => "h");
    let v = hs((0..150).map(|t| t * 5), |i| HistogramValue::Float(fh(i)));
    let mut app = db.appender();
    app.add_histograms(l.clone(), v.clone());
    app.commit().expect("commit");
    db.delete(100, 199, &[eq("__name__", "h")]).expect("delete");
    let want: Vec<Got> = expected(&v).into_iter().filter(|g| !matches!(g, Got::FH(t, _) if (100..=199).contains(t))).collect();
    assert_eq!(read(&db, &l, 0, 1000).0, want, "head with a tombstone");
    db.flush().expect("flush");
    db.compact().expect("compact");
    db.clean_tombstones().expect("clean");
    assert_eq!(read(&db, &l, 0, 1000).0, want, "compacted");
}

#[test]
fn stale_histogram_markers_are_stored() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(1)).expect("open");
    let l = labels!("__name__" => "h");
    let mut app = db.appender();
    app.add_histograms(
        l.clone(),
        vec![
            HistogramSample::new(1, HistogramValue::Int(ih(1))),
            HistogramSample::new(2, HistogramValue::Int(Histogram::stale())),
            HistogramSample::new(3, HistogramValue::Int(ih(2))),
        ],
    );
    assert_eq!(app.commit().expect("commit").histograms_written, 3);
    let (got, _) = read(&db, &l, 0, 10);
    assert!(matches!(&got[1], Got::H(2, h) if h.is_stale()), "{got:?}");
    assert_eq!(got.len(), 3);
}

#[test]
fn out_of_order_histograms_inside_the_window_are_merged_everywhere() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = || tessera_tsdb::Options { ooo_window_ms: 500, ..opts(1) };
    let db = Db::open(dir.path(), o()).expect("open");
    let l = labels!("__name__" => "h");
    let inorder = hs((0..10).map(|i| 600 + i * 20), |i| HistogramValue::Float(fh(i + 1)));
    let mut app = db.appender();
    app.add_histograms(l.clone(), inorder.clone());
    app.commit().expect("commit");
    let late = vec![
        HistogramSample::new(610, HistogramValue::Float(fh(50))),
        HistogramSample::new(630, HistogramValue::Float(fh(51))),
        HistogramSample::new(610, HistogramValue::Float(fh(50))), // the same again: a duplicate
        HistogramSample::new(630, HistogramValue::Float(fh(7))),  // same time, other value
        HistogramSample::new(620, HistogramValue::Float(fh(7))),  // an in-order sample is there
        HistogramSample::new(50, HistogramValue::Float(fh(1))),   // beyond the window
    ];
    let mut app = db.appender();
    app.add_histograms(l.clone(), late.clone());
    let rep = app.commit().expect("commit");
    assert_eq!(rep.histograms_written, 4, "two stored, one duplicate, one merged away at read time: {:?}", rep.rejected);
    let mut reasons: Vec<_> = rep.rejected.iter().map(|r| (r.reason, r.count)).collect();
    reasons.sort_by_key(|r| r.0.label());
    assert_eq!(reasons, [(RejectReason::DuplicateTimestamp, 1), (RejectReason::TooOld, 1)]);
    // In-order data wins at 620; 610 and 630 come from the out-of-order buffer.
    let mut want = expected(&inorder);
    want.extend(expected(&late[..2]));
    want.sort_by_key(|g| match g {
        Got::FH(t, _) => *t,
        _ => unreachable!(),
    });
    let check = |db: &std::sync::Arc<Db>, what: &str| assert_eq!(normalise(read(db, &l, 0, 2000).0), normalise(want.clone()), "{what}");
    check(&db, "head");
    drop(db);
    let db = Db::open(dir.path(), o()).expect("reopen");
    check(&db, "replayed");
    db.flush().expect("flush");
    check(&db, "block");
    db.compact().expect("compact");
    check(&db, "compacted");
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    /// A histogram with arbitrary layout: any schema, sparse spans with huge gaps, big counts. Only
    /// those upstream's validation accepts reach storage (as remote write guarantees), but the
    /// layouts of consecutive samples may differ wildly.
    fn arb_hist() -> impl Strategy<Value = Histogram> {
        (
            -6i32..10,
            proptest::collection::vec((prop_oneof![Just(0i32), 1..3i32, Just(i32::MAX / 4), Just(-(i32::MAX / 4))], 1u32..4), 0..4),
            proptest::collection::vec(0u64..1_000_000, 0..12),
            any::<bool>(),
        )
            .prop_map(|(schema, spans, counts, nan)| {
                let n: u32 = spans.iter().map(|s| s.1).sum();
                let buckets: Vec<u64> = (0..n as usize).map(|i| counts.get(i).copied().unwrap_or(1)).collect();
                let mut prev = 0i64;
                let deltas = buckets
                    .iter()
                    .map(|&c| {
                        let d = c as i64 - prev;
                        prev = c as i64;
                        d
                    })
                    .collect();
                Histogram {
                    schema,
                    count: buckets.iter().sum(),
                    sum: if nan { f64::NAN } else { 1.0 },
                    positive_spans: spans.iter().map(|&(o, l)| Span::new(o, l)).collect(),
                    positive_buckets: deltas,
                    ..Histogram::default()
                }
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
        #[test]
        fn any_valid_sequence_is_stored_and_read_back(hs in proptest::collection::vec(arb_hist(), 1..40)) {
            let dir = tempfile::tempdir().expect("tmp");
            let db = Db::open(dir.path(), opts(1)).expect("open");
            let l = labels!("__name__" => "h");
            let samples: Vec<HistogramSample> = hs
                .into_iter()
                .filter(|h| h.validate().is_ok())
                .enumerate()
                .map(|(i, h)| HistogramSample::new(i as i64 * 7, HistogramValue::Int(h)))
                .collect();
            let mut app = db.appender();
            app.add_histograms(l.clone(), samples.clone());
            let rep = app.commit().expect("commit");
            prop_assert_eq!(rep.histograms_written as usize, samples.len());
            let (got, _) = read(&db, &l, i64::MIN, i64::MAX);
            prop_assert_eq!(got.len(), samples.len());
            // Compared as text: NaN sums are equal there.
            prop_assert_eq!(format!("{:?}", normalise(got)), format!("{:?}", normalise(expected(&samples))));
        }
    }
}

/// Start timestamps of every histogram sample of the series, in time order.
fn sts_of(db: &std::sync::Arc<Db>, l: &Labels) -> (Vec<i64>, Vec<ChunkEncoding>) {
    let q = db.querier(i64::MIN, i64::MAX).expect("querier");
    let ms: Vec<_> = l.iter().map(|x| eq(x.name, x.value)).collect();
    let s = q.select(&ms, &SelectHints::default()).expect("select").next().expect("series").expect("ok");
    let mut v = Vec::new();
    for c in &s.chunks {
        tessera_encoding::decode_histogram_samples_into(c, &mut v).expect("decodes");
    }
    (v.iter().map(|h| h.st).collect(), s.chunks.iter().map(|c| c.encoding).collect())
}

#[test]
fn start_timestamps_of_histograms_are_stored_through_wal_blocks_compaction_and_deletion() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), opts(1)).expect("open");
    let l = labels!("__name__" => "h");
    // 5 samples without ST, then STs: the open chunk converts, later chunks keep the ST kind.
    let v: Vec<HistogramSample> = (0..60)
        .map(|i| HistogramSample::with_st(i * 50, if i < 5 { 0 } else { 1 + i / 20 }, HistogramValue::Int(ih(i as u64 % 40))))
        .collect();
    let mut app = db.appender();
    app.add_histograms(l.clone(), v.clone());
    app.commit().expect("commit");
    let want: Vec<i64> = v.iter().map(|s| s.st).collect();
    let check = |db: &std::sync::Arc<Db>, what: &str| {
        let (sts, encs) = sts_of(db, &l);
        assert_eq!(sts, want, "{what}");
        assert!(encs.iter().all(|e| *e == ChunkEncoding::HistogramSt), "{what}: {encs:?}");
        assert_eq!(normalise(read(db, &l, i64::MIN, i64::MAX).0), normalise(expected(&v)), "{what}");
    };
    check(&db, "head");
    drop(db);
    let db = Db::open(dir.path(), opts(1)).expect("reopen");
    check(&db, "replayed");
    db.flush().expect("flush");
    check(&db, "blocks");
    db.compact().expect("compact");
    check(&db, "compacted");
    db.delete(1000, 1999, &[eq("__name__", "h")]).expect("delete");
    let (sts, _) = sts_of(&db, &l);
    let want_del: Vec<i64> = v.iter().filter(|s| !(1000..=1999).contains(&s.t)).map(|s| s.st).collect();
    assert_eq!(sts, want_del, "re-encoded around a deletion");
}
