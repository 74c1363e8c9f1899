//! Downsampling tiers through the database: the buckets a tier querier returns equal the raw samples
//! bucketed, before the background computed anything, after it did, across compaction and deletion,
//! and the tier keeps answering after raw retention dropped the raw blocks.

mod common;

use common::{eq, opts};
use rand::{Rng, SeedableRng};
use tessera_encoding::buckets::{bucket_of, bucketize, decode_buckets_into, encode_buckets, Bucket};
use tessera_model::{Labels, Queryable, Sample, SelectHints, STALE_NAN};
use tessera_tsdb::{Db, Options, TierOptions};

const RES: [i64; 2] = [1000, 3000];

fn tiered(retention_ms: i64) -> Options {
    Options {
        block_range_ms: 6000,
        retention_ms,
        tiers: RES.iter().map(|&r| TierOptions { resolution_ms: r, retention_ms: 0 }).collect(),
        ..opts(2)
    }
}

fn series(i: usize) -> Labels {
    Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string())])
}

/// 10 series over `[0, upto)`: counters with resets, gauges, NaNs, stale markers, gaps, samples on
/// bucket edges.
fn fill(db: &Db, upto: i64, seed: u64) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let mut vals = [0.0f64; 10];
    for t0 in (0..upto).step_by(500) {
        let mut app = db.appender();
        for (i, v) in vals.iter_mut().enumerate() {
            let mut s = Vec::new();
            let mut t = t0;
            while t < t0 + 500 {
                let x = match rng.random_range(0..40) {
                    0 => STALE_NAN,
                    1 => f64::NAN,
                    2 => {
                        *v = 0.0;
                        0.0
                    }
                    _ if i % 2 == 0 => {
                        *v += f64::from(rng.random_range(0..100)) / 8.0;
                        *v
                    }
                    _ => f64::from(rng.random_range(-50..50)) * 1.5,
                };
                s.push(Sample::new(t, x));
                t += [1, 7, 100, 250][rng.random_range(0..4)];
            }
            app.add(series(i), &s);
        }
        let r = app.commit().expect("commit");
        assert!(r.rejected.is_empty(), "{r:?}");
    }
}

/// Per series: the encoded buckets of the tier querier over `[mint, maxt]`.
fn tier_view(db: &Db, res: i64, mint: i64, maxt: i64) -> Vec<(Labels, Vec<u8>)> {
    let q = db.tier_querier(res, mint, maxt).expect("querier").expect("tier exists");
    let mut out = Vec::new();
    for s in q.select(&[eq("__name__", "m")], &SelectHints::default()).expect("select") {
        let s = s.expect("series");
        let mut bs: Vec<Bucket> = Vec::new();
        for c in &s.chunks {
            assert_eq!(c.encoding, tessera_model::ChunkEncoding::Buckets);
            assert_eq!(decode_buckets_into(&c.data, &mut bs).expect("decodes"), res);
        }
        // Chunks may reach outside the range (the read contract): keep the range's buckets.
        bs.retain(|b| b.k >= bucket_of(mint, res) && b.k <= bucket_of(maxt, res));
        if bs.is_empty() {
            continue;
        }
        for w in bs.windows(2) {
            assert!(w[0].k < w[1].k, "buckets of {} out of order", s.labels);
        }
        out.push((s.labels, encode_buckets(res, &bs)));
    }
    out
}

/// The same from the raw samples, bucketed here.
fn raw_view(db: &Db, res: i64, mint: i64, maxt: i64) -> Vec<(Labels, Vec<u8>)> {
    let (a, b) = (bucket_of(mint, res) * res, (bucket_of(maxt, res) + 1) * res - 1);
    let q = db.querier(a, b).expect("querier");
    let mut out = Vec::new();
    for s in q.select(&[eq("__name__", "m")], &SelectHints::default()).expect("select") {
        let s = s.expect("series");
        let mut v = Vec::new();
        for c in &s.chunks {
            tessera_encoding::decode_chunk_range_into(c, a, b, &mut v).expect("decodes");
        }
        if v.is_empty() {
            continue;
        }
        let mut bs = Vec::new();
        bucketize(&v, res, &mut bs);
        out.push((s.labels, encode_buckets(res, &bs)));
    }
    out
}

fn check_ranges(db: &Db, seed: u64, what: &str) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    for _ in 0..12 {
        let mint = rng.random_range(-2000..40_000);
        let maxt = mint + rng.random_range(0..30_000);
        for res in RES {
            let (t, r) = (tier_view(db, res, mint, maxt), raw_view(db, res, mint, maxt));
            assert_eq!(t.len(), r.len(), "{what}: series at {res} over [{mint}, {maxt}]");
            for (x, y) in t.iter().zip(&r) {
                assert_eq!(x.0, y.0, "{what}");
                assert!(x.1 == y.1, "{what}: buckets of {} at {res} over [{mint}, {maxt}] differ", x.0);
            }
        }
    }
}

#[test]
fn tier_buckets_equal_raw_buckets_before_and_after_the_tier_exists() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), tiered(0)).expect("open");
    fill(&db, 40_000, 1);
    check_ranges(&db, 2, "head and unsealed blocks");
    assert_eq!(db.stats().tier_blocks, 0, "nothing computed without maintenance");
    db.compact().expect("compact");
    let st = db.stats();
    assert!(st.tier_blocks > 0 && st.tier_bytes > 0, "{st:?}");
    check_ranges(&db, 3, "tier blocks");
    db.flush().expect("flush");
    db.compact().expect("compact");
    check_ranges(&db, 4, "after flush and compaction");
    // A deletion makes the affected tier blocks stale until recomputed: answers follow the raw data.
    db.delete(5000, 9000, &[eq("i", "3")]).expect("delete");
    check_ranges(&db, 5, "after a deletion");
    db.compact().expect("compact");
    check_ranges(&db, 6, "after recomputing");
    // Reopened: the same.
    drop(db);
    let db = Db::open(dir.path(), tiered(0)).expect("reopen");
    check_ranges(&db, 7, "after reopening");
}

#[test]
fn tiers_outlive_raw_retention() {
    let dir = tempfile::tempdir().expect("tmp");
    // A retention whose tenth is the block range: blocks stay 6 s long, so retention can drop some.
    let db = Db::open(dir.path(), tiered(60_000)).expect("open");
    fill(&db, 60_000, 9);
    db.flush().expect("flush");
    db.compact().expect("compact");
    let before: Vec<_> = RES.iter().map(|&r| tier_view(&db, r, 0, 59_999)).collect();
    assert!(before[0].len() == 10);
    drop(db);
    // Raw data older than 60 s − 20 s goes; the tiers (kept forever) still answer for it.
    let db = Db::open(dir.path(), tiered(20_000)).expect("reopen");
    db.compact().expect("compact");
    assert!(common::query(&std::sync::Arc::clone(&db), &[eq("__name__", "m")], 0, 30_000).is_empty(), "raw data dropped");
    for (i, &r) in RES.iter().enumerate() {
        assert_eq!(tier_view(&db, r, 0, 59_999), before[i], "tier {r} after raw retention");
    }
    // A deletion there reaches the tier blocks: the whole buckets it touches go, the rest stay, also
    // after a restart.
    db.delete(10_500, 12_200, &[eq("i", "4")]).expect("delete");
    let check = |db: &Db| {
        for (i, &r) in RES.iter().enumerate() {
            let after = tier_view(db, r, 0, 59_999);
            assert_eq!(after.len(), 10);
            for ((l, a), (_, b)) in after.iter().zip(&before[i]) {
                let dec = |d: &[u8]| {
                    let mut v = Vec::new();
                    decode_buckets_into(d, &mut v).expect("decodes");
                    v
                };
                let (a, b) = (dec(a), dec(b));
                // Compared encoded: NaN values are not equal to themselves.
                if l.get("i") != "4" {
                    assert!(encode_buckets(r, &a) == encode_buckets(r, &b), "{l} untouched at {r}");
                    continue;
                }
                let hit = |k: i64| k * r <= 12_200 && (k + 1) * r > 10_500;
                let want: Vec<Bucket> = b.into_iter().filter(|x| !hit(x.k)).collect();
                assert!(encode_buckets(r, &a) == encode_buckets(r, &want), "{l} at {r}: the buckets the deletion touches are gone");
                assert!(a.iter().any(|x| x.k * r > 12_200) && a.iter().any(|x| x.k * r < 10_000));
            }
        }
    };
    check(&db);
    drop(db);
    check(&Db::open(dir.path(), tiered(20_000)).expect("reopen"));
}

#[test]
fn tier_options_are_validated() {
    let dir = tempfile::tempdir().expect("tmp");
    for bad in [vec![(7000, 0)], vec![(0, 0)], vec![(3000, 0), (1000, 0)], vec![(1000, -1)]] {
        let o = Options { tiers: bad.iter().map(|&(r, k)| TierOptions { resolution_ms: r, retention_ms: k }).collect(), ..tiered(0) };
        assert!(Db::open(dir.path(), o).is_err(), "{bad:?} accepted");
    }
}

#[test]
fn a_snapshot_is_a_data_directory_with_the_same_data() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = Db::open(dir.path(), tiered(0)).expect("open");
    fill(&db, 40_000, 11);
    db.compact().expect("compact");
    // Values as bits: NaN values are not equal to themselves.
    let bits = |v: Vec<(Labels, Vec<Sample>)>| -> Vec<(Labels, Vec<(i64, u64)>)> {
        v.into_iter().map(|(l, s)| (l, s.into_iter().map(|x| (x.t, x.v.to_bits())).collect())).collect()
    };
    let before = bits(common::query(&db, &[eq("__name__", "m")], 0, 40_000));
    assert!(db.stats().blocks > 0 && db.stats().head_series > 0, "blocks and a head: {:?}", db.stats());
    let snap = dir.path().join("snapshots").join("s1");
    db.snapshot(&snap, true).expect("snapshot");
    let skip = dir.path().join("snapshots").join("s2");
    db.snapshot(&skip, false).expect("snapshot without the head");
    let tiers_before: Vec<_> = RES.iter().map(|&r| tier_view(&db, r, 0, 39_999)).collect();
    // Changes after the snapshot do not reach it.
    db.delete(0, 40_000, &[eq("i", "1")]).expect("delete");
    db.flush().expect("flush");
    db.compact().expect("compact");
    drop(db);
    let s = Db::open(&snap, tiered(0)).expect("open the snapshot");
    let got_s = bits(common::query(&s, &[eq("__name__", "m")], 0, 40_000));
    assert!(got_s == before, "the snapshot's samples");
    for (i, &r) in RES.iter().enumerate() {
        assert_eq!(tier_view(&s, r, 0, 39_999), tiers_before[i], "tier {r} in the snapshot");
    }
    let s2 = Db::open(&skip, tiered(0)).expect("open the snapshot without head");
    let got = bits(common::query(&s2, &[eq("__name__", "m")], 0, 40_000));
    assert!(!got.is_empty() && got != before, "blocks only");
}
