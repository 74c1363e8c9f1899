//! Downsampling tiers answer as the raw data does: for every function the tiers answer exactly, over
//! random data (counters with resets, gauges, NaN, stale markers, gaps, samples on bucket edges) and
//! random windows and steps on the tier's buckets, the tier's answer equals the raw answer within 1e-9
//! relative — before the tier blocks exist (raw data bucketed on the fly) and after — and says
//! nothing; answers that had to be approximated say so in `infos`. The same for native-histogram
//! series (counters with resets, gauge histograms, histogram and float stale markers, buckets
//! appearing), histogram answers compared bucket by bucket, warnings included.

use std::sync::Arc;
use tessera_model::histogram::{CounterResetHint, FloatHistogram, Histogram, Span};
use tessera_model::{HistogramSample, HistogramValue, Labels, Queryable, Sample, STALE_NAN};
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

/// 16 float series `m` over 8 hours, and the histogram series of [`fill_histograms`] alongside.
fn fill(db: &Db, rng: &mut Rng) {
    let mut hist_state = HistState::default();
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
        fill_histograms(db, rng, batch, &mut hist_state);
    }
}

/// 6 native-histogram series `hm` over the same 8 hours: integer counters (series 0–3, with resets,
/// a bucket appearing now and then), a float-histogram counter (4), a gauge histogram (5); stale
/// markers as histograms and as floats (a target going away for a while).
#[derive(Default)]
struct HistState {
    counts: [[u64; 5]; 6],
    next_t: [i64; 6],
    wide: [bool; 6],
}

fn fill_histograms(db: &Db, rng: &mut Rng, batch: i64, st: &mut HistState) {
    let HistState { counts, next_t, wide } = st;
    if batch == 0 {
        *next_t = [T0; 6];
    }
    {
        let end = T0 + (batch + 1) * 10 * MIN;
        let mut hists_app = db.appender();
        let mut floats_app = db.appender();
        for i in 0..6 {
            let l = Labels::from_pairs([("__name__", "hm".to_string()), ("i", i.to_string()), ("k", (i % 2).to_string())]);
            let (mut hs, mut fs) = (Vec::new(), Vec::new());
            while next_t[i] < end {
                let t = next_t[i];
                next_t[i] = match rng.below(20) {
                    0 => (t / MIN + 1) * MIN,
                    _ => t + 15_000 + rng.below(2000) as i64 - 1000,
                };
                match rng.below(80) {
                    0 => {
                        hs.push(HistogramSample::new(t, HistogramValue::Int(Histogram::stale())));
                        continue;
                    }
                    1 => {
                        // The target goes away: a float stale marker, then nothing until a later batch.
                        fs.push(Sample::new(t, STALE_NAN));
                        next_t[i] = end + rng.below(20) as i64 * MIN;
                        break;
                    }
                    2 if i != 5 => counts[i] = [0; 5],
                    _ => {}
                }
                wide[i] |= rng.below(100) == 0;
                for c in counts[i].iter_mut() {
                    if i == 5 {
                        *c = rng.below(20);
                    } else {
                        *c += rng.below(6);
                    }
                }
                let n = if wide[i] { 5 } else { 4 };
                let b = &counts[i][..n];
                let total: u64 = b.iter().sum::<u64>() + counts[i][0];
                let mut deltas = Vec::with_capacity(n);
                let mut prev = 0i64;
                for &c in b {
                    deltas.push(c as i64 - prev);
                    prev = c as i64;
                }
                let h = Histogram {
                    counter_reset_hint: if i == 5 { CounterResetHint::Gauge } else { CounterResetHint::Unknown },
                    schema: 0,
                    zero_threshold: 0.001,
                    zero_count: counts[i][0],
                    count: total,
                    sum: total as f64 * 0.75,
                    positive_spans: vec![Span::new(0, n as u32)],
                    positive_buckets: deltas,
                    ..Histogram::default()
                };
                let v = if i == 4 { HistogramValue::Float(h.to_float()) } else { HistogramValue::Int(h) };
                hs.push(HistogramSample::new(t, v));
            }
            hists_app.add_histograms(l.clone(), hs);
            floats_app.add(l, &fs);
        }
        let rep = hists_app.commit().expect("commit histograms");
        assert!(rep.rejected.is_empty(), "{:?}", rep.rejected);
        floats_app.commit().expect("commit floats");
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
        if s.histograms.len() != t.histograms.len() {
            return Err(format!("{}: {} histograms vs {}", s.labels, s.histograms.len(), t.histograms.len()));
        }
        for (p, q) in s.histograms.iter().zip(&t.histograms) {
            if p.0 != q.0 || !close_h(&p.1, &q.1) {
                return Err(format!("{} at {}: {:?} vs {:?}", s.labels, p.0, p, q));
            }
        }
    }
    Ok(())
}

fn close_h(a: &Arc<FloatHistogram>, b: &Arc<FloatHistogram>) -> bool {
    let all = |x: &[f64], y: &[f64]| x.len() == y.len() && x.iter().zip(y).all(|(p, q)| close(*p, *q));
    a.schema == b.schema
        && close(a.count, b.count)
        && close(a.sum, b.sum)
        && close(a.zero_count, b.zero_count)
        && a.positive_spans == b.positive_spans
        && a.negative_spans == b.negative_spans
        && all(&a.positive_buckets, &b.positive_buckets)
        && all(&a.negative_buckets, &b.negative_buckets)
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
    "rate(hm[W])",
    "increase(hm[W])",
    "delta(hm[W])",
    "irate(hm[W])",
    "idelta(hm[W])",
    "changes(hm[W])",
    "resets(hm[W])",
    "count_over_time(hm[W])",
    "sum_over_time(hm[W])",
    "avg_over_time(hm[W])",
    "max_over_time(hm[W])",
    "last_over_time(hm[W])",
    "present_over_time(hm[W])",
    "ts_of_last_over_time(hm[W])",
    "hm",
    "timestamp(hm)",
    "histogram_quantile(0.9, sum by (k) (rate(hm[W])))",
    "histogram_count(increase(hm[W]))",
    "sum by (k) (hm)",
];

fn differential(db: &Db, rng: &mut Rng, what: &str) {
    let mut checked = 0;
    for _ in 0..200 {
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
        let sorted = |v: &[String]| {
            let mut v = v.to_vec();
            v.sort();
            v
        };
        assert_eq!(sorted(&tiered.warnings), sorted(&raw.warnings), "{what}: warnings of {q} over [{start}, {end}] step {step} at tier {res}");
        assert!(
            !tiered.infos.iter().any(|i| i.contains("downsampling tier")),
            "{what}: exact answer annotated: {q} {:?}",
            tiered.infos
        );
        if matches!(&raw.value, Value::Matrix(m) if m.iter().map(|s| s.points.len() + s.histograms.len()).sum::<usize>() > 0) {
            checked += 1;
        }
    }
    assert!(checked >= 170, "{what}: only {checked} of 200 answers had points");
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

#[test]
fn histograms_whose_layout_changes_inside_a_bucket_are_approximated_and_said_so() {
    let dir = tempfile::tempdir().expect("tmp");
    let db = open(dir.path());
    let l = Labels::from_pairs([("__name__", "lat".to_string())]);
    // A counter histogram every 15 s for 2 hours whose schema drops from 1 to 0 at 00:37:30 (upstream
    // reduces resolution like that when a histogram grows too many buckets).
    let hs: Vec<HistogramSample> = (0..480)
        .map(|i| {
            let c = i as u64 + 1;
            let h = Histogram {
                schema: if i < 150 { 1 } else { 0 },
                zero_threshold: 0.001,
                count: 2 * c,
                sum: c as f64,
                positive_spans: vec![Span::new(0, 2)],
                positive_buckets: vec![c as i64, 0],
                ..Histogram::default()
            };
            HistogramSample::new(T0 + i * 15_000, HistogramValue::Int(h))
        })
        .collect();
    let mut app = db.appender();
    app.add_histograms(l, hs);
    assert!(app.commit().expect("commit").rejected.is_empty());
    db.flush().expect("flush");
    db.compact().expect("compact");
    let q = "histogram_count(increase(lat[5m]))";
    let (start, end) = (T0 + 10 * MIN, T0 + 110 * MIN);
    let tiered = run(&db, q, start, end, 5 * MIN, TierRequest::Resolution(5 * MIN));
    let raw = run(&db, q, start, end, 5 * MIN, TierRequest::Raw);
    assert!(tiered.infos.iter().any(|i| i.contains("5m downsampling tier") && i.contains("increase")), "{:?}", tiered.infos);
    // Away from the change every window is exact; the window holding it is approximated from the
    // buckets' first and last histograms.
    let (Value::Matrix(a), Value::Matrix(b)) = (&tiered.value, &raw.value) else { panic!("matrices") };
    assert_eq!(a[0].points.len(), b[0].points.len());
    let differ: Vec<i64> = a[0].points.iter().zip(&b[0].points).filter(|(p, q)| !close(p.1, q.1)).map(|(p, _)| p.0).collect();
    assert!(differ.iter().all(|t| *t == T0 + 40 * MIN), "only the window with the change may differ: {differ:?}");
    // Without the change in range, nothing is approximated.
    let late = run(&db, q, T0 + 45 * MIN, end, 5 * MIN, TierRequest::Resolution(5 * MIN));
    assert!(late.infos.is_empty(), "{:?}", late.infos);
    same(&late.value, &run(&db, q, T0 + 45 * MIN, end, 5 * MIN, TierRequest::Raw).value).expect("exact after the change");
}

fn open_with(dir: &std::path::Path, retention_ms: i64, tiers: &[(i64, i64)]) -> std::sync::Arc<Db> {
    Db::open(
        dir,
        Options {
            shards: 2,
            block_range_ms: H,
            retention_ms,
            background: false,
            max_future_ms: 0,
            fsync: tessera_tsdb::FsyncPolicy::Never,
            tiers: tiers.iter().map(|&(resolution_ms, retention_ms)| TierOptions { resolution_ms, retention_ms }).collect(),
            ..Options::default()
        },
    )
    .expect("open")
}

/// `v`'s points (floats and histograms) at times `keep` accepts.
fn points_where(v: &Value, keep: impl Fn(i64) -> bool) -> Vec<tessera_promql::engine::MatrixSeries> {
    let Value::Matrix(m) = v else { panic!("not a matrix") };
    m.iter()
        .map(|s| {
            let mut s = s.clone();
            s.points.retain(|p| keep(p.0));
            s.histograms.retain(|p| keep(p.0));
            s
        })
        .filter(|s| !s.points.is_empty() || !s.histograms.is_empty())
        .collect()
}

/// Checks `auto` against each step's source as `engine::tier::past_raw` defines it (the chosen source
/// where the window begins late enough for it to answer whole, else the finest tier that does, else the
/// tier reaching furthest back), read from that source's own answer.
fn check_past_raw(db: &Db, q: &str, start: i64, end: i64, step: i64, chosen: Option<i64>, auto: &QueryResult) {
    let h = db.raw_horizon().expect("raw data dropped");
    // The query's window: its range, or the 5m lookback.
    let before = ["2m", "5m", "10m"].iter().zip([2 * MIN, 5 * MIN, 10 * MIN]).find(|(w, _)| q.contains(&format!("[{w}]"))).map_or(5 * MIN, |x| x.1);
    // A tier's data (its buckets, or raw data bucketed on the fly) begins at `from`; it answers a window
    // whole from one bucket after the first whole bucket of its data (a window inside one bucket reads
    // the bucket before).
    let from = |m: Option<i64>| m.unwrap_or(i64::MAX).min(h.raw_mint_ms);
    let usable = |r: i64, m: Option<i64>| {
        let f = from(m);
        (if f % r == 0 { f } else { (f.div_euclid(r) + 1) * r }) + r
    };
    let horizon = chosen.map_or(h.raw_mint_ms, |c| h.tiers.iter().find(|x| x.0 == c).map_or(h.raw_mint_ms, |x| usable(x.0, x.1)));
    let source = |t: i64| {
        let ws = t - before;
        if ws >= horizon {
            return chosen.map_or(TierRequest::Raw, TierRequest::Resolution);
        }
        let r = h
            .tiers
            .iter()
            .find(|x| usable(x.0, x.1) <= ws)
            .or_else(|| h.tiers.iter().filter(|x| from(x.1) < h.raw_mint_ms).min_by_key(|x| from(x.1)))
            .expect("a tier");
        TierRequest::Resolution(r.0)
    };
    let mut want: Vec<tessera_promql::engine::MatrixSeries> = Vec::new();
    for src in [TierRequest::Raw, TierRequest::Resolution(MIN), TierRequest::Resolution(5 * MIN)] {
        let ans = run(db, q, start, end, step, src);
        for s in points_where(&ans.value, |t| source(t) == src) {
            match want.iter_mut().find(|w| w.labels == s.labels) {
                Some(w) => {
                    w.points.extend(s.points);
                    w.histograms.extend(s.histograms);
                }
                None => want.push(s),
            }
        }
    }
    for w in &mut want {
        w.points.sort_by_key(|p| p.0);
        w.histograms.sort_by_key(|p| p.0);
    }
    want.sort_by(|a, b| a.labels.cmp(&b.labels));
    if let Err(e) = same(&auto.value, &Value::Matrix(want)) {
        panic!("{q} at step {step}: {e}");
    }
}

/// A range query whose first steps reach back past raw retention, at a step no tier fits: those steps
/// come from the finest tier that still holds them (approximated, and said so), the others from the raw
/// data exactly as `raw=1` gives them; a query within the raw data, `raw=1` and `@` stay on raw data.
#[test]
fn queries_reaching_past_raw_retention_read_a_tier_for_the_steps_raw_data_no_longer_covers() {
    let dir = tempfile::tempdir().expect("tmp");
    let tiers = [(MIN, 0), (5 * MIN, 0)];
    {
        // Blocks stay an hour long (compaction is capped at a tenth of retention).
        let db = open_with(dir.path(), 10 * H, &tiers);
        fill(&db, &mut Rng(11));
        db.flush().expect("flush");
        db.compact().expect("compact");
        assert!(db.raw_horizon().is_none(), "nothing dropped yet: {:?}", db.raw_horizon());
    }
    // Raw retention now drops the first hours; the tiers (kept forever) still hold them.
    let db = open_with(dir.path(), 4 * H, &tiers);
    db.compact().expect("compact");
    let h = db.raw_horizon().expect("raw data dropped");
    assert!(h.raw_mint_ms >= T0 + 3 * H && h.raw_mint_ms <= T0 + 5 * H, "{h:?}");
    assert_eq!(h.tiers, vec![(MIN, Some(T0)), (5 * MIN, Some(T0))]);
    let (start, end) = (T0 + H, T0 + 7 * H + 30_000);
    for (q, step) in [("rate(m[5m])", 30_000), ("m", 30_000), ("sum by (k) (increase(m[10m]))", 90_000), ("rate(hm[5m])", 45_000)] {
        let auto = run(&db, q, start, end, step, TierRequest::Auto);
        assert_eq!(auto.tier_ms, Some(MIN), "{q}: the finest tier reaching back");
        assert!(auto.infos.iter().any(|i| i.contains("1m downsampling tier")), "{q}: approximated, and said: {:?}", auto.infos);
        check_past_raw(&db, q, start, end, step, None, &auto);
        // The tier answered for steps raw data has nothing for.
        let raw = run(&db, q, start, end, step, TierRequest::Raw);
        let old = |v: &Value| points_where(v, |t| t < h.raw_mint_ms).iter().map(|s| s.points.len() + s.histograms.len()).sum::<usize>();
        assert_eq!(old(&raw.value), 0, "{q}: raw data is gone there");
        assert!(old(&auto.value) > 100, "{q}: the tier answers there");
    }
    // Within the raw data, forced raw data, and `@`: raw data only.
    assert_eq!(run(&db, "rate(m[5m])", h.raw_mint_ms + 10 * MIN, end, 30_000, TierRequest::Auto).tier_ms, None);
    let at = format!("rate(m[5m] @ {})", (T0 + 6 * H) / 1000);
    assert_eq!(run(&db, &at, start, end, 30_000, TierRequest::Auto).tier_ms, None);
    // A step a tier fits reads that tier throughout, as before.
    assert_eq!(run(&db, "rate(m[5m])", start, end, 5 * MIN, TierRequest::Auto).tier_ms, Some(5 * MIN));
    // Through the result cache: `raw=1` and the planner's choice are kept apart, and runs evaluated from
    // other starts give each step the source a whole evaluation gives it.
    {
        use tessera_promql::cache::{CacheOptions, ResultCache};
        let cache = ResultCache::new(CacheOptions { max_bytes: 8 << 20, freshness_ms: MIN, render: None });
        let engine = Engine::new(EngineOptions::default());
        let expr = parse("rate(m[5m])").expect("parses");
        let now = T0 + 100 * H;
        let ask = |s: i64, tier: TierRequest| {
            let qo = QueryOptions { tier, ..Default::default() };
            cache.range(&engine, &*db, &expr, s, end, 30_000, &qo, now).expect("cached").0
        };
        let raw = ask(start, TierRequest::Raw);
        same(&raw.value, &run(&db, "rate(m[5m])", start, end, 30_000, TierRequest::Raw).value).expect("raw=1 through the cache");
        for s in [start + 2 * H, start + 30 * MIN, start] {
            let got = ask(s, TierRequest::Auto);
            same(&got.value, &run(&db, "rate(m[5m])", s, end, 30_000, TierRequest::Auto).value).unwrap_or_else(|e| panic!("auto from {s}: {e}"));
        }
        same(&ask(start, TierRequest::Raw).value, &raw.value).expect("raw=1 again");
        // Every step kept: the answer still names the tier its old steps came from.
        let (hit, rep) = cache.range(&engine, &*db, &expr, start, end, 30_000, &QueryOptions::default(), now).expect("cached");
        assert_eq!((rep.hits, hit.tier_ms), (rep.steps, Some(MIN)), "{rep:?}");
    }
    // A 1m tier kept 5 hours and a 5m tier kept forever: going back, raw data, then 1m, then 5m.
    drop(db);
    let db = open_with(dir.path(), 4 * H, &[(MIN, 5 * H), (5 * MIN, 0)]);
    db.compact().expect("compact");
    let h = db.raw_horizon().expect("raw data dropped");
    assert!(h.tiers[0].1.is_some_and(|m| m > T0 + H && m < h.raw_mint_ms) && h.tiers[1].1 == Some(T0), "{h:?}");
    for (q, step) in [("rate(m[5m])", 30_000), ("sum by (k) (increase(m[10m]))", 90_000)] {
        let auto = run(&db, q, start, end, step, TierRequest::Auto);
        assert_eq!(auto.tier_ms, Some(MIN), "{q}");
        assert!(auto.infos.iter().any(|i| i.contains("5m downsampling tier")), "{q}: {:?}", auto.infos);
        check_past_raw(&db, q, start, end, step, None, &auto);
    }
    // A step only the 1m tier fits (2m): that tier where it reaches, the 5m tier before.
    let auto = run(&db, "rate(m[2m])", start, end, 2 * MIN, TierRequest::Auto);
    assert_eq!(auto.tier_ms, Some(MIN));
    assert!(auto.infos.iter().any(|i| i.contains("5m downsampling tier")), "{:?}", auto.infos);
    check_past_raw(&db, "rate(m[2m])", start, end, 2 * MIN, Some(MIN), &auto);
    let old = points_where(&auto.value, |t| t < h.tiers[0].1.unwrap_or(0)).iter().map(|s| s.points.len()).sum::<usize>();
    assert!(old > 100, "the 5m tier answers before the 1m tier's oldest bucket: {old}");
    // Blocks that retention drops as soon as they are written (8 hours at once, 4 kept) leave their
    // buckets behind: tiers are computed before retention runs.
    let dir = tempfile::tempdir().expect("tmp");
    let db = open_with(dir.path(), 4 * H, &tiers);
    fill(&db, &mut Rng(12));
    db.flush().expect("flush");
    db.compact().expect("compact");
    let h = db.raw_horizon().expect("raw data dropped");
    assert_eq!(h.tiers, vec![(MIN, Some(T0)), (5 * MIN, Some(T0))], "{h:?}");
}

/// Raw retention publishes the raw horizon before it drops a block, never after: a reader that finds
/// the old raw data gone (its querier opened after the drop) then reads a horizon that sends those
/// steps to the tiers. (Found by CI: the horizon used to move after every shard's drops, and a query in
/// between read neither raw data nor a tier there.)
#[test]
fn raw_data_is_never_gone_while_the_horizon_still_points_at_it() {
    let dir = tempfile::tempdir().expect("tmp");
    let tiers = [(5 * MIN, 0)];
    {
        let db = open_with(dir.path(), 10 * H, &tiers);
        fill(&db, &mut Rng(13));
        db.flush().expect("flush");
        db.compact().expect("compact");
    }
    for round in 0..4 {
        // Each round drops more: retention 4 h, 3 h, 2 h, 1 h behind the newest data.
        let dir2 = tempfile::tempdir().expect("tmp");
        copy_dir(dir.path(), dir2.path());
        let db = open_with(dir2.path(), (4 - round) * H, &tiers);
        assert!(db.raw_horizon().is_none(), "nothing dropped at open");
        let stop = std::sync::atomic::AtomicBool::new(false);
        let (gone_seen, checks) = std::thread::scope(|sc| {
            let reader = sc.spawn(|| {
                let (mut gone_seen, mut checks) = (0u32, 0u32);
                loop {
                    let done = stop.load(std::sync::atomic::Ordering::Acquire);
                    let raw = run(&db, "count(m)", T0 + 20 * MIN, T0 + 20 * MIN, 60_000, TierRequest::Raw);
                    let gone = matches!(&raw.value, Value::Matrix(m) if m.is_empty());
                    if gone {
                        gone_seen += 1;
                        assert!(db.raw_horizon().is_some(), "round {round}: raw data gone, horizon not moved");
                    }
                    checks += 1;
                    if done {
                        return (gone_seen, checks);
                    }
                }
            });
            db.compact().expect("compact");
            stop.store(true, std::sync::atomic::Ordering::Release);
            reader.join().expect("reader")
        });
        assert!(gone_seen > 0 && checks > 1, "round {round}: the reader saw the drop ({gone_seen} of {checks})");
    }
}

fn copy_dir(from: &std::path::Path, to: &std::path::Path) {
    for e in std::fs::read_dir(from).expect("read_dir") {
        let e = e.expect("entry");
        let dst = to.join(e.file_name());
        if e.file_type().expect("type").is_dir() {
            std::fs::create_dir_all(&dst).expect("mkdir");
            copy_dir(&e.path(), &dst);
        } else {
            std::fs::copy(e.path(), &dst).expect("copy");
        }
    }
}

/// A tier's retention dropping its blocks is a change to what queries read there: results the cache
/// kept from them are dropped, so a repeat equals a fresh evaluation. Raw retention drops blocks only
/// after the tiers have their buckets.
#[test]
fn tier_retention_invalidates_cached_steps() {
    use tessera_promql::cache::{CacheOptions, ResultCache};
    let dir = tempfile::tempdir().expect("tmp");
    // Raw data kept 4 h, the 5m tier 6 h.
    let db = open_with(dir.path(), 4 * H, &[(5 * MIN, 6 * H)]);
    let series = |i: usize| Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string()), ("k", (i % 3).to_string())]);
    // An hour at a time, the head cut into blocks on the grid when due and maintained, as the background
    // would.
    let hour = |db: &Db, h: i64| {
        let mut app = db.appender();
        for i in 0..16 {
            let s: Vec<Sample> = (0..240).map(|j| Sample::new(T0 + h * H + j * 15_000, (h * 240 + j) as f64 * (i + 1) as f64)).collect();
            app.add(series(i), &s);
        }
        app.commit().expect("commit");
        db.compact().expect("compact");
    };
    for h in 0..8 {
        hour(&db, h);
    }
    let horizon = db.raw_horizon().expect("raw data dropped");
    assert!(horizon.raw_mint_ms >= T0 + 3 * H && horizon.tiers[0].1.is_some_and(|m| m <= T0 + 2 * H), "{horizon:?}");
    let engine = Engine::new(EngineOptions::default());
    let cache = ResultCache::new(CacheOptions { max_bytes: 8 << 20, freshness_ms: MIN, render: None });
    let expr = parse("sum by (k) (rate(m[5m]))").expect("parses");
    let (start, end, step) = (T0 + H, T0 + 8 * H, 5 * MIN);
    let now = T0 + 100 * H;
    let qo = QueryOptions::default();
    let ask = || {
        let (got, rep) = cache.range(&engine, &*db, &expr, start, end, step, &qo, now).expect("cached");
        let fresh = engine.range_expr(&*db, &expr, start, end, step, &qo).expect("fresh");
        (got, rep, fresh)
    };
    // Steps between T0 + 2h and T0 + 3h come from tier blocks alone (their raw blocks are gone).
    let early = |v: &Value| points_where(v, |t| t > T0 + 2 * H + 5 * MIN && t < T0 + 3 * H).iter().map(|s| s.points.len()).sum::<usize>();
    let (got, _, fresh) = ask();
    assert_eq!(got.tier_ms, Some(5 * MIN));
    same(&got.value, &fresh.value).expect("first answer");
    assert!(early(&fresh.value) > 10, "the tier answers where raw data is gone");
    let (_, rep, _) = ask();
    assert_eq!(rep.hits, rep.steps, "kept: {rep:?}");
    // Newer hours move the tier's retention (counted from the newest block) past T0 + 3h.
    for h in 8..11 {
        hour(&db, h);
    }
    let (got, _, fresh) = ask();
    assert_eq!(early(&fresh.value), 0, "the dropped tier blocks answer nothing now");
    same(&got.value, &fresh.value).expect("after the tier's retention");
}

/// A kept tier step whose window lies inside one bucket read the bucket before it (`bucket_window`): a
/// deletion at that bucket's start, more than a bucket before the window, still invalidates it.
#[test]
fn a_change_in_the_bucket_a_short_window_reads_invalidates_it() {
    use tessera_promql::cache::{CacheOptions, ResultCache};
    let dir = tempfile::tempdir().expect("tmp");
    let db = open_with(dir.path(), 0, &[(H, 0)]);
    fill(&db, &mut Rng(21));
    db.flush().expect("flush");
    db.compact().expect("compact");
    let engine = Engine::new(EngineOptions::default());
    let cache = ResultCache::new(CacheOptions { max_bytes: 8 << 20, freshness_ms: MIN, render: None });
    let expr = parse("rate(m[5m])").expect("parses");
    // Steps half past the hour: each 5m window inside one 1h bucket, read from the bucket before.
    let (start, end, step) = (T0 + 2 * H + 30 * MIN, T0 + 6 * H + 30 * MIN, H);
    let qo = QueryOptions { tier: TierRequest::Resolution(H), ..Default::default() };
    let now = T0 + 100 * H;
    let (before, _) = cache.range(&engine, &*db, &expr, start, end, step, &qo, now).expect("cached");
    let (_, rep) = cache.range(&engine, &*db, &expr, start, end, step, &qo, now).expect("cached");
    assert_eq!(rep.hits, rep.steps, "kept: {rep:?}");
    // The first samples of the hour before the step at T0 + 3h30m, for every series.
    let m = tessera_model::Matcher::new(tessera_model::MatchOp::Equal, "__name__", "m").expect("matcher");
    db.delete(T0 + 2 * H, T0 + 2 * H + 3 * MIN, &[m]).expect("delete");
    let fresh = engine.range_expr(&*db, &expr, start, end, step, &qo).expect("fresh");
    assert!(same(&before.value, &fresh.value).is_err(), "the deletion changes the answer at T0 + 3h30m");
    let (got, _) = cache.range(&engine, &*db, &expr, start, end, step, &qo, now).expect("cached");
    same(&got.value, &fresh.value).expect("the kept step was invalidated");
}
