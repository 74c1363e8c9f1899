//! The result cache never changes an answer: random writes (in order, out of order, new series with old
//! timestamps), deletions, head cuts with compaction and retention, interleaved with repeated range
//! queries; every answer through the cache must equal the uncached answer at that moment.

use tessera_model::{Labels, Matcher, MatchOp, Sample};
use tessera_promql::cache::{CacheOptions, PointRenderer, ResultCache, Window, dependency_window};
use tessera_promql::engine::{Engine, EngineOptions, QueryOptions, Value, parse};
use tessera_tsdb::db::Db;
use tessera_tsdb::options::Options;

const T0: i64 = 1_700_000_000_000;
const MIN: i64 = 60_000;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

const QUERIES: &[&str] = &[
    "m",
    "rate(m[5m])",
    "sum by (b) (rate(m[2m]))",
    "m offset 10m",
    "m offset -5m",
    "avg_over_time(m[10m:1m])",
    "max_over_time(rate(m[1m])[5m:30s] offset 3m)",
    "m - m offset 2m",
    "count(m)",
    "absent(m{a=\"9\"})",
    "vector(1)",
    "time()",
    "changes(m[10m])",
    "timestamp(m)",
    "resets(m[15m])",
    "last_over_time(m[1h])",
    "m @ 1700000600",
    "sum(m) / count(m)",
    "topk(2, m)",
];

/// One shard holding `m{a="0".."9",b="x"}`, samples 0..=`n` every 15 s from T0, sample i worth i × `slope`.
fn ten_series(n: i64, slope: f64) -> (tempfile::TempDir, std::sync::Arc<Db>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options { shards: 1, background: false, max_future_ms: 0, ..Options::default() }).expect("open");
    let mut app = db.appender();
    for a in 0..10 {
        app.add_owned(labels(a, "x"), (0..=n).map(|i| Sample::new(T0 + i * 15_000, i as f64 * slope)).collect());
    }
    app.commit().expect("commit");
    (dir, db)
}

/// A renderer that shows every bit of a point.
fn test_render(out: &mut Vec<u8>, t: i64, v: f64) {
    out.extend_from_slice(format!("|{t}:{:x}", v.to_bits()).as_bytes());
}

fn labels(a: u64, b: &str) -> Labels {
    Labels::from_pairs([("__name__", "m".to_string()), ("a", a.to_string()), ("b", b.to_string())])
}

/// Equality with NaN equal to itself (by bits), as answers are compared.
fn same(x: &Value, y: &Value) -> bool {
    match (x, y) {
        (Value::Matrix(a), Value::Matrix(b)) => {
            a.len() == b.len()
                && a.iter().zip(b).all(|(s, t)| {
                    s.labels == t.labels
                        && s.histograms == t.histograms
                        && match &s.rendered {
                            // Points handed over as text only (`test_render` shows every bit).
                            Some(r) => {
                                let mut want = Vec::new();
                                for &(t, v) in &t.points {
                                    test_render(&mut want, t, v);
                                }
                                s.points.is_empty() && r.points == t.points.len() && r.to_vec() == want
                            }
                            None => {
                                s.points.len() == t.points.len()
                                    && s.points.iter().zip(&t.points).all(|(p, q)| p.0 == q.0 && p.1.to_bits() == q.1.to_bits())
                            }
                        }
                })
        }
        _ => x == y,
    }
}

/// Runs one seeded sequence; returns how many blocks retention dropped.
fn run(seed: u64) -> u64 {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options {
        shards: 2,
        background: false,
        ooo_window_ms: 60 * MIN,
        max_future_ms: 0,
        retention_ms: 3 * 60 * MIN,
        ..Options::default()
    };
    let db = Db::open(dir.path(), opts).expect("open");
    let engine = Engine::new(EngineOptions::default());
    // Odd seeds keep the points rendered too (every answer's text is checked against its points).
    let render: Option<PointRenderer> = (seed % 2 == 1).then_some(test_render as PointRenderer);
    // Seeds 3, 4, 7, 8, … keep steps up to "now" (the default); the others keep a two-minute horizon.
    let freshness_ms = if (seed / 2) % 2 == 1 { 0 } else { 2 * MIN };
    let cache = ResultCache::new(CacheOptions { max_bytes: 2 << 20, freshness_ms, render });
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    // Each series with the time of its newest sample.
    let mut series: Vec<(Labels, f64, i64)> = (0..4)
        .flat_map(|a| ["x", "y"].map(|b| (labels(a, b), 0.0, T0 - 15_000)))
        .collect();
    // `now` is simulated: data is written up to it and the cache's horizon counts from it.
    let mut now = T0;
    let append = |db: &Db, l: &Labels, samples: Vec<Sample>| {
        let mut app = db.appender();
        app.add_owned(l.clone(), samples);
        app.commit().expect("commit");
    };
    let (mut hits, mut compared) = (0usize, 0usize);
    for _ in 0..260 {
        match rng.below(12) {
            // In-order data up to a new "now".
            // Some series lag behind it (a sender behind "now"): their samples up to an earlier "now"
            // arrive with a later write, in order, after queries may have kept steps over them.
            0..=3 => {
                now += (1 + rng.below(8) as i64) * MIN;
                for (l, v, last) in series.iter_mut() {
                    let to = if rng.below(4) == 0 { now - rng.below(120) as i64 * 1000 } else { now };
                    let mut samples = Vec::new();
                    let mut t = *last + 15_000;
                    while t <= to {
                        // Counters with the odd reset.
                        *v = if rng.below(50) == 0 { 0.0 } else { *v + rng.below(10) as f64 };
                        samples.push(Sample::new(t, *v));
                        *last = t;
                        t += 15_000;
                    }
                    if !samples.is_empty() {
                        append(&db, l, samples);
                    }
                }
            }
            // An out-of-order sample inside the window.
            4 | 5 => {
                let (l, _, _) = &series[rng.below(series.len() as u64) as usize];
                let t = now - rng.below(50) as i64 * MIN - 7_000;
                append(&db, l, vec![Sample::new(t, rng.below(1000) as f64)]);
            }
            // A new series arriving with old timestamps.
            6 => {
                let l = labels(10 + rng.below(1000), "z");
                let start = now - (5 + rng.below(40) as i64) * MIN;
                let samples = (0..10).map(|i| Sample::new(start + i * 30_000, i as f64)).collect();
                append(&db, &l, samples);
                series.push((l, 10.0, start + 9 * 30_000));
            }
            // A deletion.
            7 => {
                let a = rng.below(4).to_string();
                let m = [Matcher::new(MatchOp::Equal, "a", &a).expect("matcher")];
                let hi = now - rng.below(120) as i64 * MIN;
                db.delete(hi - rng.below(30) as i64 * MIN, hi, &m).expect("delete");
            }
            // Head cut, compaction and retention.
            8 => {
                db.flush().expect("flush");
                db.compact().expect("compact");
            }
            // Queries, several times over the same windows (a dashboard refreshing).
            _ => {
                let q = QUERIES[rng.below(QUERIES.len() as u64) as usize];
                let expr = parse(q).expect("parses");
                let step = [15_000, 30_000, 60_000][rng.below(3) as usize];
                let span = (5 + rng.below(180) as i64) * MIN;
                let end = now - rng.below(20) as i64 * MIN + rng.below(2) as i64 * 7_000;
                for _ in 0..1 + rng.below(3) {
                    let qo = QueryOptions::default();
                    let (got, rep) = cache.range(&engine, &*db, &expr, end - span, end, step, &qo, now).expect("cached");
                    let want = engine.range_expr(&*db, &expr, end - span, end, step, &qo).expect("plain");
                    assert!(
                        same(&got.value, &want.value),
                        "seed {seed}: {q} over [{}, {}] step {step} at now {now} (report {rep:?}):\ncached {:?}\nplain  {:?}",
                        end - span,
                        end,
                        got.value,
                        want.value
                    );
                    assert_eq!(got.warnings, want.warnings, "{q}");
                    if let Value::Matrix(m) = &got.value {
                        for s in m {
                            // (A query the cache bypasses is the engine's answer as it is; the text of a
                            // rendered one was compared with the plain answer's points above.)
                            assert_eq!(s.rendered.is_some(), render.is_some() && rep.bypass.is_none(), "{q}: rendered or not as configured");
                        }
                    }
                    hits += rep.hits;
                    compared += 1;
                }
            }
        }
    }
    assert!(compared > 30, "seed {seed}: only {compared} comparisons");
    assert!(hits > 0, "seed {seed}: the cache never answered a step");
    db.metrics().blocks_deleted_by_retention.load(std::sync::atomic::Ordering::Relaxed)
}

#[test]
fn cached_answers_equal_uncached_ones_under_random_changes() {
    let mut retained = 0;
    for seed in 1..=12 {
        retained += run(seed);
    }
    assert!(retained > 0, "retention never dropped a block: the sequence does not exercise it");
}

/// Writers change old ranges while readers fill the cache from other threads: once the writers stop,
/// every cached answer must equal the uncached one (a query that evaluated while a change landed must
/// not keep the steps it touched).
#[test]
fn concurrent_late_writes_never_leave_stale_steps() {
    // With the default horizon (none: late writes land right behind the newest kept steps, and merge in
    // the change log) and with a minute's.
    for freshness_ms in [0, MIN] {
        concurrent_late_writes(freshness_ms);
    }
}

fn concurrent_late_writes(freshness_ms: i64) {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = Options { shards: 2, background: false, ooo_window_ms: 60 * MIN, max_future_ms: 0, ..Options::default() };
    let db = Db::open(dir.path(), opts).expect("open");
    let now = T0 + 120 * MIN;
    for a in 0..6 {
        let mut app = db.appender();
        let samples = (0..=480).map(|i| Sample::new(T0 + i * 15_000, i as f64)).collect();
        app.add_owned(labels(a, "x"), samples);
        app.commit().expect("commit");
    }
    let engine = Engine::new(EngineOptions::default());
    let cache = ResultCache::new(CacheOptions { max_bytes: 8 << 20, freshness_ms, render: None });
    let queries = ["sum(m)", "rate(m[5m])", "max_over_time(m[10m])", "m offset 3m"];
    let stop = std::sync::atomic::AtomicBool::new(false);
    std::thread::scope(|s| {
        let (db, stop) = (&db, &stop);
        s.spawn(move || {
            let mut rng = Rng(77);
            for i in 0..1500 {
                std::thread::sleep(std::time::Duration::from_micros(200));
                let mut app = db.appender();
                // Half of them in the last two minutes, right behind the newest steps kept.
                let t = if rng.below(2) == 0 { now - rng.below(120) as i64 * 1000 } else { now - 55 * MIN + rng.below(55 * 60) as i64 * 1000 };
                app.add_owned(labels(rng.below(6), "x"), vec![Sample::new(t, 1000.0 + i as f64)]);
                app.commit().expect("commit");
            }
            stop.store(true, std::sync::atomic::Ordering::SeqCst);
        });
        for r in 0..2 {
            let (engine, cache) = (&engine, &cache);
            s.spawn(move || {
                let mut rng = Rng(5 + r);
                while !stop.load(std::sync::atomic::Ordering::SeqCst) {
                    let expr = parse(queries[rng.below(4) as usize]).expect("parses");
                    let end = now - rng.below(30) as i64 * MIN;
                    let _ = cache.range(engine, &**db, &expr, end - 60 * MIN, end, 30_000, &QueryOptions::default(), now);
                }
            });
        }
    });
    for q in queries {
        let expr = parse(q).expect("parses");
        for back in 0..30 {
            let end = now - back * MIN;
            let qo = QueryOptions::default();
            let (got, _) = cache.range(&engine, &*db, &expr, end - 60 * MIN, end, 30_000, &qo, now).expect("cached");
            let want = engine.range_expr(&*db, &expr, end - 60 * MIN, end, 30_000, &qo).expect("plain");
            assert!(same(&got.value, &want.value), "{q} ending {end} (freshness {freshness_ms}): a stale step survived");
        }
    }
}

#[test]
fn the_cache_stays_within_its_size_and_evicts_the_least_recently_used() {
    let (_dir, db) = ten_series(240, 1.0);
    let engine = Engine::new(EngineOptions::default());
    let max = 1 << 20;
    let cache = ResultCache::new(CacheOptions { max_bytes: max, freshness_ms: MIN, render: None });
    let now = T0 + 24 * 60 * MIN;
    let qo = QueryOptions::default();
    for k in 0..40 {
        let expr = parse(&format!("m * {k}")).expect("parses");
        cache.range(&engine, &*db, &expr, T0, T0 + 60 * MIN, 15_000, &qo, now).expect("query");
        assert!(cache.metrics.bytes.get() as usize <= max, "over the bound after query {k}");
        // The first query stays in use: it must survive while others are evicted.
        let first = parse("m * 0").expect("parses");
        let (_, rep) = cache.range(&engine, &*db, &first, T0, T0 + 60 * MIN, 15_000, &qo, now).expect("query");
        assert_eq!(rep.hits, rep.steps, "the most recently used entry was evicted at query {k}");
    }
    assert!(cache.metrics.evicted_entries.get() > 0, "nothing was evicted");
}

#[test]
fn dependency_windows_follow_ranges_offsets_and_subqueries() {
    let w = |q: &str| dependency_window(&parse(q).expect("parses"), 300_000);
    assert_eq!(w("m"), Ok(Some(Window { before: 300_000, after: 0 })));
    assert_eq!(w("rate(m[1m])"), Ok(Some(Window { before: 60_000, after: 0 })));
    assert_eq!(w("m offset 10m"), Ok(Some(Window { before: 900_000, after: -600_000 })));
    assert_eq!(w("m offset -10m"), Ok(Some(Window { before: -300_000, after: 600_000 })));
    // A subquery's inner window moves with each inner step: range + inner lookback.
    assert_eq!(w("max_over_time(rate(m[1m])[5m:30s] offset 3m)"), Ok(Some(Window { before: 540_000, after: -180_000 })));
    assert_eq!(w("m + rate(n[10m])"), Ok(Some(Window { before: 600_000, after: 0 })));
    assert_eq!(w("vector(1)"), Ok(None));
    assert!(w("m @ 100").is_err());
    assert!(w("rate(m[5m] @ end())").is_err());
    assert!(w("m offset step()").is_err(), "a duration that depends on the request");
    assert!(w("vector(time() - start())").is_err());
}

/// A dashboard's moving window over an entry near its bound: steps that fell out of the window are
/// dropped, not the window's own, so every refresh evaluates only its new steps.
#[test]
fn a_moving_window_near_the_bound_evaluates_only_its_new_steps() {
    let (_dir, db) = ten_series(960, 0.37);
    let engine = Engine::new(EngineOptions::default());
    let qo = QueryOptions::default();
    let now = T0 + 24 * 60 * MIN;
    let expr = parse("rate(m[5m])").expect("parses");
    let render = Some(test_render as PointRenderer);
    // What one window's steps take.
    let probe = ResultCache::new(CacheOptions { max_bytes: 1 << 30, freshness_ms: MIN, render });
    probe.range(&engine, &*db, &expr, T0, T0 + 60 * MIN, 15_000, &qo, now).expect("query");
    let one = probe.metrics.bytes.get() as usize;
    // Half the bound (what one entry may take) holds one window and 2% more.
    let cache = ResultCache::new(CacheOptions { max_bytes: one * 2 * 51 / 50, freshness_ms: MIN, render });
    for k in 0..120 {
        let start = T0 + k * 15_000;
        let (got, rep) = cache.range(&engine, &*db, &expr, start, start + 60 * MIN, 15_000, &qo, now).expect("query");
        if k > 0 {
            assert_eq!(rep.evaluated, 1, "refresh {k}: {rep:?}");
        }
        assert!(cache.metrics.bytes.get() as usize <= one * 2 * 51 / 50, "over the bound at refresh {k}");
        let want = engine.range_expr(&*db, &expr, start, start + 60 * MIN, 15_000, &qo).expect("plain");
        assert!(same(&got.value, &want.value), "refresh {k}");
    }
}
