//! Downsampling tiers answer as the raw data does: for every function the tiers answer exactly, over
//! random data (counters with resets, gauges, NaN, stale markers, gaps, samples on bucket edges) and
//! random windows and steps on the tier's buckets, the tier's answer equals the raw answer within 1e-9
//! relative — before the tier blocks exist (raw data bucketed on the fly) and after — and says
//! nothing; answers that had to be approximated say so in `infos`.

use tessera_model::{Labels, Sample, STALE_NAN};
use tessera_promql::engine::tier::TierRequest;
use tessera_promql::engine::{parse, Engine, EngineOptions, QueryOptions, QueryResult, Value};
use tessera_tsdb::db::Db;
use tessera_tsdb::options::{Options, TierOptions};

const H: i64 = 3_600_000;
const MIN: i64 = 60_000;
/// An hour boundary.
const T0: i64 = 472_222 * H;

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

fn open(dir: &std::path::Path) -> std::sync::Arc<Db> {
    Db::open(
        dir,
        Options {
            shards: 2,
            block_range_ms: H,
            retention_ms: 0,
            background: false,
            max_future_ms: 0,
            fsync: tessera_tsdb::FsyncPolicy::Never,
            tiers: vec![TierOptions { resolution_ms: MIN, retention_ms: 0 }, TierOptions { resolution_ms: 5 * MIN, retention_ms: 0 }],
            ..Options::default()
        },
    )
    .expect("open")
}

/// 16 series over 8 hours.
fn fill(db: &Db, rng: &mut Rng) {
    let mut vals = [0.0f64; 16];
    let mut next_t = [T0; 16];
    for batch in 0..48 {
        let end = T0 + (batch + 1) * 10 * MIN;
        let mut app = db.appender();
        for i in 0..16 {
            let mut s = Vec::new();
            while next_t[i] < end {
                let t = next_t[i];
                let v = match rng.below(60) {
                    0 => STALE_NAN,
                    1 => f64::NAN,
                    2 => {
                        vals[i] = 0.0;
                        0.0
                    }
                    _ if i % 2 == 0 => {
                        vals[i] += rng.below(400) as f64 / 4.0;
                        vals[i]
                    }
                    _ => (rng.below(1000) as f64 - 500.0) / 4.0,
                };
                s.push(Sample::new(t, v));
                // Mostly a 15 s scrape with jitter, sometimes on a minute edge, sometimes a gap.
                next_t[i] = match rng.below(20) {
                    0 => (t / MIN + 1) * MIN,
                    1 => t + 7 * MIN,
                    _ => t + 15_000 + rng.below(2000) as i64 - 1000,
                };
            }
            let l = Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string()), ("k", (i % 3).to_string())]);
            app.add(l, &s);
        }
        app.commit().expect("commit");
    }
}

fn close(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

fn same(x: &Value, y: &Value) -> Result<(), String> {
    let (Value::Matrix(a), Value::Matrix(b)) = (x, y) else { return Err("not matrices".into()) };
    if a.len() != b.len() {
        return Err(format!("{} series vs {}", a.len(), b.len()));
    }
    for (s, t) in a.iter().zip(b) {
        if s.labels != t.labels {
            return Err(format!("{} vs {}", s.labels, t.labels));
        }
        if s.points.len() != t.points.len() {
            return Err(format!("{}: {} points vs {}", s.labels, s.points.len(), t.points.len()));
        }
        for (p, q) in s.points.iter().zip(&t.points) {
            if p.0 != q.0 || !close(p.1, q.1) {
                return Err(format!("{} at {}: {:?} vs {:?}", s.labels, p.0, p, q));
            }
        }
    }
    Ok(())
}

fn run(db: &Db, q: &str, start: i64, end: i64, step: i64, tier: TierRequest) -> QueryResult {
    let e = Engine::new(EngineOptions::default());
    let qo = QueryOptions { tier, ..Default::default() };
    e.range_expr(db, &parse(q).expect("parses"), start, end, step, &qo).unwrap_or_else(|err| panic!("{q}: {err}"))
}

const EXACT: &[&str] = &[
    "rate(m[W])",
    "increase(m[W])",
    "delta(m[W])",
    "irate(m[W])",
    "idelta(m[W])",
    "changes(m[W])",
    "resets(m[W])",
    "count_over_time(m[W])",
    "sum_over_time(m[W])",
    "avg_over_time(m[W])",
    "min_over_time(m[W])",
    "max_over_time(m[W])",
    "last_over_time(m[W])",
    "present_over_time(m[W])",
    "ts_of_last_over_time(m[W])",
    "sum by (k) (rate(m[W]))",
    "max(max_over_time(m[W]))",
    "m",
    "timestamp(m)",
    "avg by (k) (m)",
];

fn differential(db: &Db, rng: &mut Rng, what: &str) {
    let mut checked = 0;
    for _ in 0..120 {
        let res = [MIN, 5 * MIN][rng.below(2) as usize];
        let step = res * (1 + rng.below(6) as i64);
        let w = res * (1 + rng.below(12) as i64);
        let start = T0 + res * rng.below((7 * H / res) as u64) as i64;
        let end = start + step * rng.below(120) as i64;
        let q = EXACT[rng.below(EXACT.len() as u64) as usize].replace('W', &format!("{}s", w / 1000));
        // Instant selectors look back 5m: exact on a 1m tier, widened on a 5m one only when unaligned.
        let tiered = run(db, &q, start, end, step, TierRequest::Resolution(res));
        let raw = run(db, &q, start, end, step, TierRequest::Raw);
        assert_eq!(tiered.tier_ms, Some(res));
        assert_eq!(raw.tier_ms, None);
        if let Err(e) = same(&tiered.value, &raw.value) {
            panic!("{what}: {q} over [{start}, {end}] step {step} at tier {res}: {e}");
        }
        assert!(
            !tiered.infos.iter().any(|i| i.contains("downsampling tier")),
            "{what}: exact answer annotated: {q} {:?}",
            tiered.infos
        );
        if matches!(&raw.value, Value::Matrix(m) if m.iter().map(|s| s.points.len()).sum::<usize>() > 0) {
            checked += 1;
        }
    }
    assert!(checked >= 100, "{what}: only {checked} of 120 answers had points");
}

#[test]
fn tier_answers_equal_raw_answers_on_bucket_windows() {
    for seed in [0x9e37_79b9_7f4a_7c15, 0xdead_beef, 0x1234_5678_9abc] {
        let dir = tempfile::tempdir().expect("tmp");
        let db = open(dir.path());
        let mut rng = Rng(seed);
        fill(&db, &mut rng);
        differential(&db, &mut rng, "raw bucketed on the fly");
        db.flush().expect("flush");
        db.compact().expect("compact");
        assert!(db.stats().tier_blocks >= 2, "tier blocks computed: {:?}", db.stats());
        differential(&db, &mut rng, "tier blocks");
    }
}

#[test]
fn approximations_are_annotated_and_the_choice_follows_the_step() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = open(dir.path());
    let mut rng = Rng(7);
    fill(&db, &mut rng);
    db.flush().expect("flush");
    db.compact().expect("compact");
    let (start, end) = (T0 + H, T0 + 7 * H);
    // A window shorter than the bucket: widened to the bucket, said in `infos`.
    let r = run(&db, "rate(m[2m])", start, end, 5 * MIN, TierRequest::Resolution(5 * MIN));
    assert!(r.infos.iter().any(|i| i.contains("5m downsampling tier") && i.contains("rate")), "{:?}", r.infos);
    // A function no bucket answers exactly.
    let r = run(&db, "quantile_over_time(0.5, m[10m])", start, end, 5 * MIN, TierRequest::Resolution(5 * MIN));
    assert!(r.infos.iter().any(|i| i.contains("quantile_over_time")), "{:?}", r.infos);
    // The planner's choice: the coarsest tier that fits the step; raw data for instant queries and
    // steps no tier divides.
    assert_eq!(run(&db, "m", start, end, 15 * MIN, TierRequest::Auto).tier_ms, Some(5 * MIN));
    assert_eq!(run(&db, "m", start, end, 2 * MIN, TierRequest::Auto).tier_ms, Some(MIN));
    assert_eq!(run(&db, "m", start, end, 30_000, TierRequest::Auto).tier_ms, None);
    assert_eq!(run(&db, "m", start, end, 90_000, TierRequest::Auto).tier_ms, None);
    let e = Engine::new(EngineOptions::default());
    let inst = e.instant_expr(&*db, &parse("m").expect("parses"), end, &QueryOptions::default()).expect("instant");
    assert_eq!(inst.tier_ms, None);
    // A tier that does not exist is the client's mistake.
    let err = e
        .range_expr(&*db, &parse("m").expect("parses"), start, end, MIN, &QueryOptions { tier: TierRequest::Resolution(7 * MIN), ..Default::default() })
        .expect_err("no 7m tier");
    assert!(err.to_string().contains("no downsampling tier with resolution 7m (tiers: 1m, 5m)"), "{err}");
}
