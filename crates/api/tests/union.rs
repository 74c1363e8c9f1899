//! A union store answers as one store holding all its members' data: random series spread over two
//! stores (some in both, the shared samples equal, as an HA pair writes them), random range queries of
//! the shapes dashboards and rules use, compared with the same data written into one store — with equal
//! shard counts (the union keeps per-shard pushdown) and unequal ones (one union shard).

use tessera_api::union::UnionQueryable;
use tessera_model::{Labels, Sample};
use tessera_promql::cache::{CacheOptions, ResultCache};
use tessera_promql::engine::tier::TierRequest;
use tessera_promql::engine::{parse, Engine, EngineOptions, QueryOptions, QueryResult, Value};
use tessera_tsdb::db::Db;
use tessera_tsdb::options::{Options, TierOptions};

const MIN: i64 = 60_000;
const T0: i64 = 1_700_000_000_000;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn open(dir: &std::path::Path, shards: usize) -> std::sync::Arc<Db> {
    Db::open(dir, Options { shards, background: false, max_future_ms: 0, fsync: tessera_tsdb::FsyncPolicy::Never, ..Options::default() })
        .expect("open")
}

/// With 1m and 5m tiers and 1 h blocks.
fn open_tiered(dir: &std::path::Path, shards: usize) -> std::sync::Arc<Db> {
    let tiers = vec![TierOptions { resolution_ms: MIN, retention_ms: 0 }, TierOptions { resolution_ms: 5 * MIN, retention_ms: 0 }];
    let opts = Options { shards, background: false, max_future_ms: 0, fsync: tessera_tsdb::FsyncPolicy::Never, block_range_ms: 60 * MIN, retention_ms: 0, tiers, ..Options::default() };
    Db::open(dir, opts).expect("open")
}

/// Asserts that two answers of `q` are the same (values within 1e-9 relative, warnings equal).
fn assert_same(what: &str, u: &QueryResult, o: &QueryResult) {
    let (Value::Matrix(x), Value::Matrix(y)) = (&u.value, &o.value) else { panic!("{what}: not matrices") };
    assert_eq!(x.len(), y.len(), "{what}: series");
    for (s, t) in x.iter().zip(y) {
        assert_eq!(s.labels, t.labels, "{what}");
        assert_eq!(s.points.len(), t.points.len(), "{what}: points of {}", s.labels);
        for (p, r) in s.points.iter().zip(&t.points) {
            assert!(p.0 == r.0 && close(p.1, r.1), "{what} at {}: {} vs {}", p.0, p.1, r.1);
        }
        assert_eq!(s.histograms.len(), t.histograms.len(), "{what}: histograms of {}", s.labels);
    }
    assert_eq!(u.warnings, o.warnings, "{what}");
}

const QUERIES: &[&str] = &[
    "m",
    "rate(m[5m])",
    "sum by (job) (rate(m[5m]))",
    "count(m)",
    "max_over_time(m[10m])",
    "m{job=\"b\"} * 2",
    "topk(3, m)",
    "sum(m) / count(m)",
    "increase(m[15m])",
    "count_values(\"v\", round(m / 100))",
    "absent(nope)",
    "m and on(i) m{job=\"a\"}",
];

fn close(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// 24 series `m` over 3 hours: a third only in `a`, a third only in `b`, a third in both with gaps in
/// each (the shared samples equal, as an HA pair writes them); all of it in `one`.
fn fill(a: &Db, b: &Db, one: &Db, rng: &mut Rng) {
    // Per store, per series: its samples; written below in time order, 10 minutes at a time.
    let mut data: Vec<[(Labels, Vec<Sample>); 3]> = Vec::new();
    for i in 0..24 {
        let l = Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string()), ("job", ["a", "b", "c"][i % 3].to_string())]);
        let mut v = 0.0;
        let (mut in_a, mut in_b, mut all) = (Vec::new(), Vec::new(), Vec::new());
        let mut t = T0 + rng.below(60_000) as i64;
        while t < T0 + 3 * 60 * MIN {
            v += rng.below(100) as f64;
            if rng.below(50) == 0 {
                v = 0.0;
            }
            let s = Sample::new(t, v);
            // Mostly in one store; a third of the series in both, with gaps in each.
            match (i % 3, rng.below(10)) {
                (0, _) => in_a.push(s),
                (1, _) => in_b.push(s),
                (_, 0) => in_a.push(s),
                (_, 1) => in_b.push(s),
                _ => {
                    in_a.push(s);
                    in_b.push(s);
                }
            }
            all.push(s);
            t += 15_000;
        }
        data.push([(l.clone(), in_a), (l.clone(), in_b), (l, all)]);
    }
    for w in 0..18 {
        let (lo, hi) = (T0 + w * 10 * MIN, T0 + (w + 1) * 10 * MIN);
        for (k, db) in [&a, &b, &one].into_iter().enumerate() {
            let mut app = db.appender();
            for d in &data {
                let s: Vec<Sample> = d[k].1.iter().filter(|s| s.t >= lo && s.t < hi).copied().collect();
                app.add(d[k].0.clone(), &s);
            }
            let r = app.commit().expect("commit");
            assert!(r.rejected.is_empty(), "{r:?}");
        }
    }
}

#[test]
fn a_union_answers_as_one_store_holding_both() {
    for (seed, shards_b) in [(1u64, 2), (7, 2), (42, 3)] {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
        let (a, b, one) = (open(dirs[0].path(), 2), open(dirs[1].path(), shards_b), open(dirs[2].path(), 2));
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        fill(&a, &b, &one, &mut rng);
        // Some data in blocks, some in the heads.
        a.flush().expect("flush");
        let union = UnionQueryable::new(vec![(a.clone(), Labels::default()), (b.clone(), Labels::default())]);
        let e = Engine::new(EngineOptions::default());
        for k in 0..60 {
            let q = QUERIES[k % QUERIES.len()];
            let step = [15_000, 60_000, 300_000][rng.below(3) as usize];
            let start = T0 + rng.below(120) as i64 * MIN;
            let end = start + step * rng.below(100) as i64;
            let expr = parse(q).expect("parses");
            let qo = QueryOptions::default();
            let u = e.range_expr(&union, &expr, start, end, step, &qo).unwrap_or_else(|err| panic!("{q}: {err}"));
            let o = e.range_expr(&*one, &expr, start, end, step, &qo).unwrap_or_else(|err| panic!("{q}: {err}"));
            assert_same(&format!("seed {seed}: {q} over [{start}, {end}] step {step}"), &u, &o);
        }
    }
}

/// Through a union, the downsampling tiers answer as one store's: the union has the tiers its members
/// share, and a series held by both members (a third of them) is bucketed from their merged samples.
#[test]
fn a_union_reads_tiers_as_one_store_does() {
    for seed in [3u64, 11] {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
        let (a, b, one) = (open_tiered(dirs[0].path(), 2), open_tiered(dirs[1].path(), 2), open_tiered(dirs[2].path(), 2));
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        fill(&a, &b, &one, &mut rng);
        // Tier blocks for the first hours (the rest is bucketed from the heads on the fly).
        for db in [&a, &b, &one] {
            db.flush().expect("flush");
            db.compact().expect("compact");
        }
        assert!(a.stats().tier_blocks > 0 && one.stats().tier_blocks > 0, "tier blocks: {:?}", a.stats());
        let union = UnionQueryable::new(vec![(a.clone(), Labels::default()), (b.clone(), Labels::default())]);
        assert_eq!(tessera_model::Queryable::tiers(&union).len(), 2, "the members' tiers");
        let e = Engine::new(EngineOptions::default());
        for k in 0..40 {
            let q = ["rate(m[5m])", "sum by (job) (increase(m[10m]))", "max_over_time(m[5m])", "count_over_time(m[15m])", "changes(m[5m])", "m"][k % 6];
            let step = [5 * MIN, 10 * MIN, 15 * MIN][rng.below(3) as usize];
            let start = T0 + rng.below(24) as i64 * 5 * MIN;
            let end = start + step * rng.below(20) as i64;
            let expr = parse(q).expect("parses");
            let qo = QueryOptions { tier: TierRequest::Resolution(5 * MIN), ..Default::default() };
            let u = e.range_expr(&union, &expr, start, end, step, &qo).unwrap_or_else(|err| panic!("{q}: {err}"));
            let o = e.range_expr(&*one, &expr, start, end, step, &qo).unwrap_or_else(|err| panic!("{q}: {err}"));
            assert_eq!((u.tier_ms, o.tier_ms), (Some(5 * MIN), Some(5 * MIN)), "{q}: from the tier");
            assert_same(&format!("seed {seed}: {q} over [{start}, {end}] step {step} (5m tier)"), &u, &o);
        }
    }
}

/// The result cache works through a union and never changes its answer: a deletion in one member and a
/// late series in the other drop exactly the union's cached steps they touch.
#[test]
fn the_result_cache_through_a_union_stays_exact() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
    // An out-of-order window, so that the late series below is accepted.
    let open = |d: &std::path::Path| {
        let opts = Options { shards: 2, background: false, max_future_ms: 0, ooo_window_ms: 60 * MIN, fsync: tessera_tsdb::FsyncPolicy::Never, ..Options::default() };
        Db::open(d, opts).expect("open")
    };
    let (a, b, one) = (open(dirs[0].path()), open(dirs[1].path()), open(dirs[2].path()));
    let mut rng = Rng(5);
    fill(&a, &b, &one, &mut rng);
    a.flush().expect("flush");
    let union = UnionQueryable::new(vec![(a.clone(), Labels::default()), (b.clone(), Labels::default())]);
    let cache = ResultCache::new(CacheOptions::default());
    let e = Engine::new(EngineOptions::default());
    let now = T0 + 24 * 60 * MIN;
    let (start, end, step) = (T0 + 30 * MIN, T0 + 170 * MIN, MIN);
    let qo = QueryOptions::default();
    let check = |round: &str, want_hits: bool| {
        for q in ["sum by (job) (rate(m[5m]))", "count(m)", "max_over_time(m[10m])"] {
            let expr = parse(q).expect("parses");
            let (c, rep) = cache.range(&e, &union, &expr, start, end, step, &qo, now).expect("cached");
            assert!(rep.bypass.is_none(), "{round}: {q}: {rep:?}");
            if want_hits {
                assert!(rep.hits > 0, "{round}: {q}: {rep:?}");
            }
            let u = e.range_expr(&union, &expr, start, end, step, &qo).expect("uncached");
            let o = e.range_expr(&*one, &expr, start, end, step, &qo).expect("one store");
            assert_same(&format!("{round}: {q} cached vs uncached"), &c, &u);
            assert_same(&format!("{round}: {q} union vs one store"), &u, &o);
        }
    };
    check("first", false);
    check("repeat", true);
    // A deletion in member a, of samples in the middle of the range (also in the one store).
    let del = [tessera_model::Matcher::new(tessera_model::MatchOp::Equal, "i", "3").expect("matcher")];
    for db in [&a, &one] {
        db.delete(T0 + 60 * MIN, T0 + 90 * MIN, &del).expect("delete");
    }
    check("after a deletion in a member", true);
    // A new series in member b with old timestamps (a late sender), also in the one store.
    let l = Labels::from_pairs([("__name__", "m".to_string()), ("i", "late".to_string()), ("job", "a".to_string())]);
    let s: Vec<Sample> = (0..40).map(|k| Sample::new(T0 + 130 * MIN + k * 15_000, k as f64)).collect();
    for db in [&b, &one] {
        let mut app = db.appender();
        app.add(l.clone(), &s);
        let r = app.commit().expect("commit");
        assert!(r.rejected.is_empty(), "{r:?}");
    }
    check("after a late series in a member", true);
}

/// Past the members' raw retention, a union answers as one store does (for series one member holds): the
/// steps whose windows begin before the raw data from the finest tier reaching back (no tier fits a 30 s
/// step), the rest raw.
#[test]
fn a_union_reaching_past_raw_retention_reads_the_tier_as_one_store_does() {
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
    // Raw retention `hours` (blocks stay an hour long: compaction is capped at a tenth of it).
    let reopen = |d: &tempfile::TempDir, hours: i64| {
        let tiers = vec![TierOptions { resolution_ms: MIN, retention_ms: 0 }, TierOptions { resolution_ms: 5 * MIN, retention_ms: 0 }];
        let opts = Options { shards: 2, background: false, max_future_ms: 0, fsync: tessera_tsdb::FsyncPolicy::Never, block_range_ms: 60 * MIN, retention_ms: hours * 60 * MIN, tiers, ..Options::default() };
        let db = Db::open(d.path(), opts).expect("open");
        db.compact().expect("compact");
        db
    };
    {
        let (a, b, one) = (reopen(&dirs[0], 10), reopen(&dirs[1], 10), reopen(&dirs[2], 10));
        fill(&a, &b, &one, &mut Rng(5));
        for db in [&a, &b, &one] {
            db.flush().expect("flush");
            db.compact().expect("compact");
        }
    }
    // Reopened with raw data kept 2 hours: the first hour's raw blocks go, the tiers keep them.
    let (a, b, one) = (reopen(&dirs[0], 2), reopen(&dirs[1], 2), reopen(&dirs[2], 2));
    let union = UnionQueryable::new(vec![(a.clone(), Labels::default()), (b.clone(), Labels::default())]);
    let h = tessera_model::Queryable::raw_horizon(&union).expect("raw data dropped");
    assert_eq!(Some(&h), tessera_model::Queryable::raw_horizon(&*one).as_ref(), "the union's horizon is one store's");
    assert!(h.raw_mint_ms > T0 && h.raw_mint_ms < T0 + 120 * MIN, "{h:?}");
    let e = Engine::new(EngineOptions::default());
    // Series held by one member (a series in both has, where no raw data is left, the first member's
    // buckets: see `union_tier_series`).
    for q in ["rate(m{job!=\"c\"}[5m])", "sum by (job) (increase(m{job!=\"c\"}[10m]))", "m{job!=\"c\"}", "count_over_time(m{job!=\"c\"}[15m])"] {
        let expr = parse(q).expect("parses");
        let qo = QueryOptions::default();
        let (start, end, step) = (T0 + 10 * MIN, T0 + 170 * MIN, 30_000);
        let u = e.range_expr(&union, &expr, start, end, step, &qo).unwrap_or_else(|err| panic!("{q}: {err}"));
        let o = e.range_expr(&*one, &expr, start, end, step, &qo).unwrap_or_else(|err| panic!("{q}: {err}"));
        assert_eq!((u.tier_ms, o.tier_ms), (Some(MIN), Some(MIN)), "{q}: the old steps from the 1m tier");
        assert_same(&format!("{q} past raw retention"), &u, &o);
    }
}
