//! Aggregations pushed into the shards give the central path's answers: random data (float counters,
//! native histograms — integer and float, mostly one layout, sometimes another schema, zero threshold or
//! custom buckets — series that switch between floats and histograms, stale markers, counter resets)
//! in a random number of shards, and random pushed-down shapes (`op [by|without] (selector)` and
//! `op [by|without] (f(selector[range]))`) evaluated with [`EngineOptions::aggregation_pushdown`] on
//! and off. Values must be equal to the bit (floats and every histogram field), and so must the
//! warnings and infos (as sets: upstream keeps them in a map) and the errors.
//!
//! `TESSERA_FUZZ_CASES=N` for N cases (default 64).

use proptest::prelude::*;
use tessera_model::histogram::CounterResetHint;
use tessera_model::{FloatHistogram, Histogram, Labels, STALE_NAN, Sample, Span};
use tessera_promql::engine::{Engine, EngineOptions, QueryResult, Value};
use tessera_promql::promqltest::MemStorage;

fn cases(default: u32) -> u32 {
    std::env::var("TESSERA_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

const STEP_MS: i64 = 15_000;
const POINTS: usize = 80;

fn labels(name: &str, job: u64, id: usize) -> Labels {
    Labels::from_pairs([("__name__", name.to_string()), ("job", format!("j{job}")), ("id", id.to_string())])
}

/// A counter-like float histogram series: `buckets` buckets in one or two spans, growing by random
/// non-integer amounts, with an occasional reset; `odd` picks another layout (schema, zero threshold,
/// custom buckets) for the whole series.
fn float_hist_series(r: &mut Rng, odd: u64) -> Vec<(i64, FloatHistogram)> {
    let nb = 2 + r.below(6) as usize;
    let split = r.below(nb as u64) as usize;
    let spans = if split == 0 {
        vec![Span::new(r.below(5) as i32 - 2, nb as u32)]
    } else {
        vec![Span::new(-1, split as u32), Span::new(1 + r.below(3) as i32, (nb - split) as u32)]
    };
    let (schema, zt, custom) = match odd {
        1 => (2, 0.001, vec![]),
        2 => (3, 0.01, vec![]),
        3 => (-53, 0.0, (1..=nb).map(|k| k as f64 * 0.25).collect::<Vec<_>>()),
        _ => (3, 0.001, vec![]),
    };
    let spans = if schema == -53 { vec![Span::new(0, nb as u32)] } else { spans };
    let mut b = vec![0.0; nb];
    let mut zc = 0.0;
    let mut sum = 0.0;
    let mut out = Vec::with_capacity(POINTS);
    let start = r.below(10) as usize;
    for k in start..POINTS {
        if r.below(40) == 0 {
            b.iter_mut().for_each(|x| *x = 0.0);
            zc = 0.0;
            sum = 0.0;
        }
        for x in b.iter_mut() {
            *x += r.unit() * 3.0;
        }
        if schema != -53 {
            zc += r.unit();
        }
        sum += r.unit() * 10.0 - 1.0;
        let mut h = FloatHistogram {
            schema,
            zero_threshold: zt,
            zero_count: zc,
            count: b.iter().sum::<f64>() + zc,
            sum,
            positive_spans: spans.clone(),
            positive_buckets: b.clone(),
            custom_values: custom.clone(),
            counter_reset_hint: CounterResetHint::Unknown,
            ..FloatHistogram::default()
        };
        if r.below(60) == 0 {
            // A stale marker.
            h.sum = STALE_NAN;
        }
        out.push((k as i64 * STEP_MS, h));
    }
    out
}

/// An integer histogram series (integer-histogram chunks), schema 3, counts growing by whole numbers.
fn int_hist_series(r: &mut Rng) -> Vec<(i64, Histogram)> {
    let nb = 2 + r.below(5) as usize;
    let mut b = vec![0i64; nb];
    let mut out = Vec::with_capacity(POINTS);
    let mut sum = 0.0;
    for k in 0..POINTS {
        for x in b.iter_mut() {
            *x += r.below(5) as i64;
        }
        sum += r.unit() * 4.0;
        // Delta-encoded buckets.
        let mut deltas = Vec::with_capacity(nb);
        let mut prev = 0;
        for x in &b {
            deltas.push(x - prev);
            prev = *x;
        }
        let h = Histogram {
            schema: 3,
            zero_threshold: 0.001,
            count: b.iter().sum::<i64>() as u64,
            sum,
            positive_spans: vec![Span::new(5, nb as u32)],
            positive_buckets: deltas,
            ..Histogram::default()
        };
        out.push((k as i64 * STEP_MS, h));
    }
    out
}

fn floats_series(r: &mut Rng, from: usize, to: usize) -> Vec<Sample> {
    let mut v = r.unit() * 100.0;
    (from..to)
        .map(|k| {
            v += r.unit() * 7.0;
            if r.below(50) == 0 {
                v = r.unit();
            }
            let x = if r.below(70) == 0 { STALE_NAN } else { v };
            Sample::new(k as i64 * STEP_MS, x)
        })
        .collect()
}

/// `layouts`: 0 = every histogram in one layout; otherwise, one series in `layouts` gets another.
fn storage(seed: u64, shards: usize, series: usize, layouts: u64) -> MemStorage {
    let mut r = Rng(seed);
    let mut st = MemStorage::new(shards);
    for id in 0..series {
        let job = r.below(3);
        let odd = if layouts > 0 && r.below(layouts) == 0 { 1 + r.below(3) } else { 0 };
        st.add_float_histograms(labels("lat", job, id), &float_hist_series(&mut r, odd)).expect("encodes");
        st.add_histograms(labels("lat_int", job, id), &int_hist_series(&mut r)).expect("encodes");
        st.add_series(labels("reqs_total", job, id), &floats_series(&mut r, 0, POINTS));
        // `mix`: floats only, histograms only, or floats then histograms.
        let l = labels("mix", job, id);
        match r.below(3) {
            0 => st.add_series(l, &floats_series(&mut r, 0, POINTS)),
            1 => st.add_float_histograms(l, &float_hist_series(&mut r, 0)).expect("encodes"),
            _ => {
                let half = POINTS / 2;
                st.add_series(l.clone(), &floats_series(&mut r, 0, half));
                let hs: Vec<(i64, FloatHistogram)> =
                    float_hist_series(&mut r, 0).into_iter().filter(|(t, _)| *t >= half as i64 * STEP_MS).collect();
                st.add_float_histograms(l, &hs).expect("encodes");
            }
        }
    }
    st
}

/// A result in a comparable form: series sorted by labels, floats by their bits, histograms by every
/// field; annotations as sorted sets.
fn normal(r: &Result<QueryResult, tessera_promql::engine::EngineError>) -> String {
    let r = match r {
        Err(e) => return format!("error: {e}"),
        Ok(r) => r,
    };
    let f = |x: f64| format!("{:016x}", if x.is_nan() { f64::NAN.to_bits() } else { x.to_bits() });
    let h = |x: &FloatHistogram| {
        format!(
            "{{{:?} schema={} zt={} zc={} count={} sum={} ps={:?} pb={:?} ns={:?} nb={:?} cv={:?}}}",
            x.counter_reset_hint,
            x.schema,
            f(x.zero_threshold),
            f(x.zero_count),
            f(x.count),
            f(x.sum),
            x.positive_spans,
            x.positive_buckets.iter().map(|v| f(*v)).collect::<Vec<_>>(),
            x.negative_spans,
            x.negative_buckets.iter().map(|v| f(*v)).collect::<Vec<_>>(),
            x.custom_values,
        )
    };
    let mut rows: Vec<String> = match &r.value {
        Value::Vector(v) => v
            .iter()
            .map(|s| format!("{:?} @{} {} {}", s.labels, s.t_ms, f(s.v), s.h.as_deref().map(h).unwrap_or_default()))
            .collect(),
        Value::Matrix(m) => m
            .iter()
            .map(|s| {
                let p: Vec<String> = s.points.iter().map(|(t, v)| format!("{t}:{}", f(*v))).collect();
                let hs: Vec<String> = s.histograms.iter().map(|(t, x)| format!("{t}:{}", h(x))).collect();
                format!("{:?} {p:?} {hs:?}", s.labels)
            })
            .collect(),
        other => vec![format!("{other:?}")],
    };
    rows.sort();
    let mut w = r.warnings.clone();
    w.sort();
    let mut i = r.infos.clone();
    i.sort();
    format!("{}\nwarnings {w:?}\ninfos {i:?}", rows.join("\n"))
}

const OPS: &[&str] = &["sum", "count", "group", "min", "max", "avg", "stddev", "stdvar"];
const GROUPINGS: &[&str] = &["", " by (job)", " without (id)", " by (__name__)", " by (job, id)"];
const INNERS: &[&str] = &[
    "lat",
    "lat_int",
    "reqs_total",
    "mix",
    "{__name__=~\"lat|mix\"}",
    "{__name__=~\"lat.*\"}",
    "rate(lat[1m])",
    "rate(lat[5m])",
    "increase(lat_int[2m])",
    "rate(lat_int[1m])",
    "rate(mix[2m])",
    "increase(mix[1m])",
    "rate(reqs_total[1m])",
    "irate(lat[1m])",
    "delta(lat[2m])",
    "sum_over_time(lat[1m])",
    "count_over_time(mix[1m])",
    "last_over_time(mix[1m])",
    "rate({__name__=~\"lat|mix\"}[1m])",
    "rate(lat[1m] offset 1m)",
];

fn engine(pushdown: bool, delayed: bool) -> Engine {
    Engine::new(EngineOptions { aggregation_pushdown: pushdown, delayed_name_removal: delayed, ..EngineOptions::default() })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(64), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn pushed_down_aggregations_equal_the_central_path(
        seed in any::<u64>(),
        shards in 1usize..6,
        series in 1usize..14,
        layouts in prop_oneof![Just(0u64), Just(0), Just(3), Just(8)],
        op in proptest::sample::select(OPS),
        grouping in proptest::sample::select(GROUPINGS),
        inner in proptest::sample::select(INNERS),
        delayed in any::<bool>(),
        range in any::<bool>(),
        t in 0i64..(POINTS as i64 * STEP_MS + 120_000),
    ) {
        let st = storage(seed, shards, series, layouts);
        let q = format!("{op}{grouping} ({inner})");
        let (on, off) = (engine(true, delayed), engine(false, delayed));
        let (a, b) = if range {
            let end = t.max(60_000);
            (on.range(&st, &q, end - 600_000, end, 30_000), off.range(&st, &q, end - 600_000, end, 30_000))
        } else {
            (on.instant(&st, &q, t), off.instant(&st, &q, t))
        };
        let (na, nb) = (normal(&a), normal(&b));
        prop_assert!(na == nb, "{q} (range: {range}, delayed: {delayed}, shards {shards}, t {t}):\npushed:\n{na}\ncentral:\n{nb}");
    }
}

/// The fold holds groups × steps: a sum over many histogram series answers like the central path and
/// the pushed path counts the same queryable samples.
#[test]
fn histogram_sum_of_rates_is_pushed_and_equal() {
    let st = storage(7, 4, 40, 0);
    for q in ["sum(rate(lat[1m]))", "sum by (job) (rate(lat[2m]))", "sum(lat)", "count by (job) (rate(lat_int[1m]))"] {
        let a = engine(true, false).range(&st, q, 300_000, 1_200_000, 15_000);
        let b = engine(false, false).range(&st, q, 300_000, 1_200_000, 15_000);
        assert_eq!(normal(&a), normal(&b), "{q}");
        let (a, b) = (a.expect("runs"), b.expect("runs"));
        assert_eq!(a.stats.total_queryable_samples, b.stats.total_queryable_samples, "{q}");
        assert!(matches!(&a.value, Value::Matrix(m) if !m.is_empty()), "{q}");
    }
}

/// Order-dependent aggregations over many series (several batches per shard in the ordered merge,
/// or collected per shard and merged when a series has a few values) answer exactly as the central path.
#[test]
fn ordered_fold_over_many_series_equals_the_central_path() {
    for shards in [1, 2, 3] {
        let st = storage(11, shards, 400, 0);
        for q in ["avg(rate(reqs_total[1m]))", "stddev by (job) (rate(reqs_total[2m]))", "stdvar without (id) (increase(reqs_total[1m]))", "avg by (job) (rate(lat[1m]))", "avg by (job) (reqs_total)", "stdvar(reqs_total)", "avg({__name__=~\"reqs.*\"})"] {
            let a = engine(true, false).range(&st, q, 300_000, 1_200_000, 15_000);
            let b = engine(false, false).range(&st, q, 300_000, 1_200_000, 15_000);
            assert_eq!(normal(&a), normal(&b), "{q} over {shards} shards");
            assert!(matches!(&a.expect("runs").value, Value::Matrix(m) if !m.is_empty()), "{q}");
            // A few values a series (collected on the pool and merged, not streamed): the same.
            let a = engine(true, false).range(&st, q, 1_170_000, 1_200_000, 15_000);
            let b = engine(false, false).range(&st, q, 1_170_000, 1_200_000, 15_000);
            assert_eq!(normal(&a), normal(&b), "{q} over {shards} shards, 3 steps");
            let a = engine(true, false).instant(&st, q, 1_200_000);
            let b = engine(false, false).instant(&st, q, 1_200_000);
            assert_eq!(normal(&a), normal(&b), "{q} over {shards} shards, instant");
            assert!(matches!(&a.expect("runs").value, Value::Vector(v) if !v.is_empty()), "{q}");
        }
    }
}
