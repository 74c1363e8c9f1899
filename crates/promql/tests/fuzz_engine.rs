//! Issue 9, "no single request can take Tessera down": random well-typed (and a few ill-typed) PromQL
//! expressions evaluated over a small fixed data set, as instant and range queries with a small sample
//! limit and a short timeout. Each must answer or fail with an `EngineError`, never panic, and stay
//! within the limits (peak samples ≤ `max_samples`, wall time close to the timeout).
//!
//! The generator is small and self-contained (the bench crate's `promql_diff::exprgen` is the big one,
//! aimed at comparing answers with Prometheus). Short smoke by default; `TESSERA_FUZZ_CASES=N` for N
//! cases per property.

use proptest::prelude::*;
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tessera_model::histogram::CounterResetHint;
use tessera_model::{FloatHistogram, Labels, STALE_NAN, Sample, Span};
use tessera_promql::engine::{Engine, EngineError, EngineOptions, QueryOptions};
use tessera_promql::promqltest::MemStorage;

fn cases(default: u32) -> u32 {
    std::env::var("TESSERA_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

const MAX_SAMPLES: usize = 5_000;
const TIMEOUT: Duration = Duration::from_millis(500);
/// How far past the timeout a query may run: the engine checks the deadline between steps and inside
/// long series, so it overshoots by one unit of work (slack for a loaded CI machine).
const SLACK: Duration = Duration::from_secs(5);

/// Counters (with a reset), gauges (NaN, ±Inf, a stale marker, huge values), classic histogram buckets
/// and an info-style metric, 15 s apart over 30 minutes.
fn storage() -> &'static MemStorage {
    static ST: OnceLock<MemStorage> = OnceLock::new();
    ST.get_or_init(|| {
        let mut st = MemStorage::new(2);
        let n = 121;
        let t = |k: usize| k as i64 * 15_000;
        for j in 0..3 {
            for id in 0..2 {
                let l = |name: &str| {
                    Labels::from_pairs([
                        ("__name__", name.to_string()),
                        ("job", format!("j{j}")),
                        ("id", id.to_string()),
                    ])
                };
                let c: Vec<Sample> =
                    (0..n).map(|k| Sample::new(t(k), if k == 60 { 0.0 } else { (k * (j + 1)) as f64 })).collect();
                st.add_series(l("reqs_total"), &c);
                let g: Vec<Sample> = (0..n)
                    .map(|k| {
                        let v = match (k + j) % 17 {
                            3 => f64::NAN,
                            5 => f64::INFINITY,
                            7 => f64::NEG_INFINITY,
                            11 => 1e308,
                            13 if id == 1 => STALE_NAN,
                            _ => (k as f64 * 0.37 + j as f64).sin() * 10.0,
                        };
                        Sample::new(t(k), v)
                    })
                    .collect();
                st.add_series(l("temp"), &g);
            }
            for le in ["0.1", "1", "10", "+Inf"] {
                let l = Labels::from_pairs([
                    ("__name__", "lat_bucket".to_string()),
                    ("job", format!("j{j}")),
                    ("le", le.to_string()),
                ]);
                let f: f64 = le.parse().unwrap_or(f64::INFINITY);
                let s: Vec<Sample> = (0..n).map(|k| Sample::new(t(k), (k as f64 * f.min(100.0)).floor())).collect();
                st.add_series(l, &s);
            }
        }
        // Native histograms: exponential ones with a counter reset and a gauge hint, custom-bucket ones,
        // and a series that switches from floats to histograms (with a stale marker between).
        for j in 0..2 {
            let l = |name: &str| Labels::from_pairs([("__name__", name.to_string()), ("job", format!("j{j}"))]);
            let exp: Vec<(i64, FloatHistogram)> = (0..n)
                .map(|k| {
                    let c = if k == 60 { 1.0 } else { (k * (j + 1)) as f64 };
                    let h = FloatHistogram {
                        schema: j as i32,
                        zero_threshold: 0.001,
                        zero_count: c,
                        count: 4.0 * c,
                        sum: c * 1.5,
                        positive_spans: vec![Span::new(-1, 2), Span::new(1, 1)],
                        positive_buckets: vec![c, c, c],
                        counter_reset_hint: if k == 90 { CounterResetHint::Gauge } else { CounterResetHint::Unknown },
                        ..FloatHistogram::default()
                    };
                    (t(k), h)
                })
                .collect();
            st.add_float_histograms(l("hist"), &exp).expect("encodes");
            let nhcb: Vec<(i64, FloatHistogram)> = (0..n)
                .map(|k| {
                    let c = k as f64;
                    let h = FloatHistogram {
                        schema: -53,
                        count: 3.0 * c,
                        sum: c * 7.0,
                        positive_spans: vec![Span::new(0, 3)],
                        positive_buckets: vec![c, c, c],
                        custom_values: vec![1.0, if j == 0 { 5.0 } else { 6.0 }],
                        ..FloatHistogram::default()
                    };
                    (t(k), h)
                })
                .collect();
            st.add_float_histograms(l("nhcb"), &nhcb).expect("encodes");
            let half = n / 2;
            st.add_series(l("mix"), &(0..half).map(|k| Sample::new(t(k), if k + 1 == half { STALE_NAN } else { k as f64 })).collect::<Vec<_>>());
            st.add_float_histograms(l("mix"), &exp[half..]).expect("encodes");
        }
        let info = Labels::from_pairs([("__name__", "build_info"), ("job", "j0"), ("version", "1.2")]);
        st.add_series(info, &(0..n).map(|k| Sample::new(t(k), 1.0)).collect::<Vec<_>>());
        st
    })
}

fn pick<T: Clone + std::fmt::Debug + 'static>(xs: &'static [T]) -> impl Strategy<Value = T> + Clone {
    proptest::sample::select(xs)
}

fn scalar_leaf() -> BoxedStrategy<String> {
    prop_oneof![
        pick(&["0", "1", "-1", "0.5", "2", "3", "100", "1e308", "-1e308", "NaN", "Inf", "-Inf", "9e18", "0.99"])
            .prop_map(str::to_string),
        Just("time()".to_string()),
        Just("scalar(sum(reqs_total))".to_string()),
        Just("pi()".to_string()),
    ]
    .boxed()
}

fn selector() -> BoxedStrategy<String> {
    let base = pick(&[
        "reqs_total",
        "temp",
        "temp{job=\"j1\"}",
        "reqs_total{id!=\"0\"}",
        "{__name__=~\"temp|reqs_total\"}",
        "lat_bucket",
        "lat_bucket{le!=\"+Inf\"}",
        "build_info",
        "hist",
        "nhcb",
        "mix",
        "{__name__=~\"hist|nhcb\"}",
        "nope",
        "{job=~\"j.*\"}",
    ]);
    let modifier = pick(&["", "", "", " offset 1m", " offset -5m", " @ 300", " @ end()", " @ start() offset 1h", " @ 1e10", " offset 10000d"]);
    (base, modifier).prop_map(|(b, m)| format!("{b}{m}")).boxed()
}

fn range_sel() -> BoxedStrategy<String> {
    (pick(&["reqs_total", "temp", "lat_bucket", "{__name__=\"temp\"}", "hist", "nhcb", "mix"]), pick(&["1m", "5m", "10m", "1h", "30s", "1d", "1ms"]), pick(&["", " offset 2m", " @ 600"]))
        .prop_map(|(s, r, m)| format!("{s}[{r}]{m}"))
        .boxed()
}

const RANGE_FUNCS: &[&str] = &[
    "rate", "irate", "increase", "delta", "idelta", "deriv", "resets", "changes", "avg_over_time", "sum_over_time",
    "min_over_time", "max_over_time", "count_over_time", "last_over_time", "present_over_time", "stddev_over_time",
    "stdvar_over_time", "absent_over_time", "mad_over_time", "ts_of_max_over_time", "ts_of_min_over_time",
    "ts_of_last_over_time", "first_over_time", "ts_of_first_over_time",
];
const INSTANT_FUNCS: &[&str] = &[
    "abs", "ceil", "floor", "exp", "ln", "log2", "log10", "sqrt", "sgn", "timestamp", "sort", "sort_desc", "absent",
    "day_of_month", "day_of_week", "hour", "minute", "month", "year", "days_in_month", "day_of_year", "deg", "rad",
    "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "round",
    "histogram_count", "histogram_sum", "histogram_avg", "histogram_stddev", "histogram_stdvar",
];
const AGGS: &[&str] = &["sum", "avg", "min", "max", "count", "group", "stddev", "stdvar"];
const PARAM_AGGS: &[&str] = &["topk", "bottomk", "quantile", "limitk", "limit_ratio"];
const GROUPING: &[&str] = &["", " by (job)", " without (id)", " by ()", " by (le)", " without ()"];
const ARITH: &[&str] = &["+", "-", "*", "/", "%", "^", "atan2", "</", ">/"];
const CMP: &[&str] = &["==", "!=", ">", "<", ">=", "<="];
const MATCHING: &[&str] = &["", " on(job)", " ignoring(id)", " on(job) group_left", " ignoring(id, le) group_right", " on() group_left(version)", " on(job) fill(0)"];

fn scalar_expr(vector: BoxedStrategy<String>) -> BoxedStrategy<String> {
    prop_oneof![
        3 => scalar_leaf(),
        1 => vector.prop_map(|v| format!("scalar({v})")),
        1 => (scalar_leaf(), pick(ARITH), scalar_leaf()).prop_map(|(a, o, b)| format!("({a} {o} {b})")),
    ]
    .boxed()
}

fn vector_expr() -> BoxedStrategy<String> {
    let leaf = prop_oneof![
        4 => selector(),
        2 => (pick(RANGE_FUNCS), range_sel()).prop_map(|(f, m)| format!("{f}({m})")),
        1 => scalar_leaf().prop_map(|s| format!("vector({s})")),
    ];
    leaf.prop_recursive(5, 48, 3, |inner| {
        let scalar = scalar_expr(inner.clone());
        let sub = pick(&["[5m:1m]", "[10m:]", "[1h:30s]", "[1m:1ms]", "[30m:15s] offset 1m", "[1d:1h]"]);
        prop_oneof![
            2 => (pick(INSTANT_FUNCS), inner.clone()).prop_map(|(f, v)| format!("{f}({v})")),
            2 => (pick(RANGE_FUNCS), inner.clone(), sub).prop_map(|(f, v, s)| format!("{f}(({v}){s})")),
            2 => (pick(AGGS), pick(GROUPING), inner.clone()).prop_map(|(a, g, v)| format!("{a}{g} ({v})")),
            1 => (pick(PARAM_AGGS), pick(GROUPING), scalar.clone(), inner.clone()).prop_map(|(a, g, s, v)| format!("{a}{g} ({s}, {v})")),
            1 => (pick(GROUPING), inner.clone()).prop_map(|(g, v)| format!("count_values{g} (\"val\", {v})")),
            2 => (inner.clone(), pick(ARITH), pick(MATCHING), inner.clone()).prop_map(|(a, o, m, b)| format!("({a} {o}{m} {b})")),
            1 => (inner.clone(), pick(CMP), any::<bool>(), inner.clone())
                .prop_map(|(a, o, b, c)| format!("({a} {o}{} {c})", if b { " bool" } else { "" })),
            1 => (inner.clone(), pick(&["and", "or", "unless"]), pick(&["", " on(job)", " ignoring(id)"]), inner.clone())
                .prop_map(|(a, o, m, b)| format!("({a} {o}{m} {b})")),
            2 => (inner.clone(), pick(ARITH), scalar.clone(), any::<bool>())
                .prop_map(|(v, o, s, flip)| if flip { format!("({s} {o} {v})") } else { format!("({v} {o} {s})") }),
            1 => (inner.clone(), pick(CMP), scalar.clone()).prop_map(|(v, o, s)| format!("({v} {o} {s})")),
            1 => (inner.clone(), scalar.clone(), scalar.clone()).prop_map(|(v, a, b)| format!("clamp({v}, {a}, {b})")),
            1 => (scalar.clone(), inner.clone()).prop_map(|(s, v)| format!("histogram_quantile({s}, sum by (le) (rate(lat_bucket[5m])) * 0 + {v})")),
            1 => scalar.clone().prop_map(|s| format!("histogram_quantile({s}, rate(lat_bucket[5m]))")),
            1 => (scalar.clone(), inner.clone()).prop_map(|(s, v)| format!("histogram_quantile({s}, {v})")),
            1 => (scalar.clone(), inner.clone()).prop_map(|(s, v)| format!("histogram_fraction(0, {s}, {v})")),
            1 => (inner.clone(), scalar.clone()).prop_map(|(v, s)| format!("predict_linear(({v})[10m:1m], {s})")),
            1 => (inner.clone(), scalar.clone()).prop_map(|(v, s)| format!("quantile_over_time({s}, ({v})[10m:1m])")),
            1 => (inner.clone(), scalar.clone(), scalar.clone()).prop_map(|(v, a, b)| format!("double_exponential_smoothing(({v})[10m:1m], {a}, {b})")),
            1 => inner.clone().prop_map(|v| format!("label_replace({v}, \"dst\", \"x$1\", \"job\", \"j(.*)\")")),
            1 => inner.clone().prop_map(|v| format!("label_join({v}, \"dst\", \"-\", \"job\", \"id\")")),
            1 => inner.clone().prop_map(|v| format!("sort_by_label({v}, \"job\", \"id\")")),
            1 => inner.clone().prop_map(|v| format!("-({v})")),
            1 => (inner.clone(), scalar).prop_map(|(v, s)| format!("round({v}, {s})")),
        ]
    })
    .boxed()
}

/// A query: mostly vectors (the only type a range query takes besides scalars), some scalars, strings
/// and matrices (rejected by range queries: an error, not a panic).
fn query() -> impl Strategy<Value = String> {
    prop_oneof![
        12 => vector_expr(),
        2 => scalar_expr(vector_expr()),
        1 => range_sel(),
        1 => Just("\"str\"".to_string()),
        // A few type errors and bad arguments on purpose.
        1 => vector_expr().prop_map(|v| format!("rate({v})")),
        1 => vector_expr().prop_map(|v| format!("label_replace({v}, \"1bad\", \"\", \"job\", \"(\")")),
    ]
}

fn engine() -> Engine {
    Engine::new(EngineOptions { max_samples: MAX_SAMPLES, timeout: TIMEOUT, ..EngineOptions::default() })
}

fn check_result(q: &str, what: &str, started: Instant, r: Result<tessera_promql::engine::QueryResult, EngineError>) {
    let took = started.elapsed();
    assert!(took <= TIMEOUT + SLACK, "{what} {q:?} took {took:?}");
    match r {
        Ok(res) => assert!(
            res.stats.peak_samples <= MAX_SAMPLES as u64,
            "{what} {q:?}: peak {} samples over the limit {MAX_SAMPLES}",
            res.stats.peak_samples
        ),
        // Any error is a fine answer (`EngineError` is non-exhaustive), but nothing cancels these queries.
        Err(EngineError::Canceled(e)) => panic!("{what} {q:?}: canceled without a cancel: {e}"),
        Err(_) => {}
    }
}

/// Evaluates on a 2 MiB stack (a worker thread's), so deep recursion in evaluation shows too.
fn run(q: String, t_ms: i64, start_ms: i64, len_ms: i64, step_ms: i64) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let st = storage();
            let e = engine();
            let qo = QueryOptions::default();
            let Ok(expr) = tessera_promql::engine::parse(&q) else { return };
            let s = Instant::now();
            check_result(&q, "instant", s, e.instant_expr(st, &expr, t_ms, &qo));
            let s = Instant::now();
            check_result(&q, "range", s, e.range_expr(st, &expr, start_ms, start_ms + len_ms, step_ms, &qo));
        })
        .expect("spawn")
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(200), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn generated_queries_answer_or_fail_within_the_limits(
        q in query(),
        t_ms in prop_oneof![Just(0i64), 0i64..2_000_000, Just(1_800_000), Just(-60_000), Just(i64::MAX / 4)],
        start_ms in prop_oneof![0i64..1_800_000, Just(-3_600_000)],
        len_ms in prop_oneof![Just(0i64), 0i64..1_800_000],
        step_ms in prop_oneof![Just(15_000i64), Just(60_000), 1i64..600_000, Just(1)],
    ) {
        run(q, t_ms, start_ms, len_ms, step_ms);
    }
}

/// The generator is worth its name: most of what it makes parses and evaluates to an answer.
#[test]
fn most_generated_queries_parse_and_answer() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let (mut parsed, mut answered, n) = (0, 0, 200);
    let strat = query();
    for _ in 0..n {
        let q = strat.new_tree(&mut runner).expect("tree").current();
        let Ok(expr) = tessera_promql::engine::parse(&q) else {
            if std::env::var_os("FUZZ_VERBOSE").is_some() {
                eprintln!("does not parse: {q}");
            }
            continue;
        };
        parsed += 1;
        if engine().instant_expr(storage(), &expr, 900_000, &QueryOptions::default()).is_ok() {
            answered += 1;
        }
    }
    assert!(parsed * 10 >= n * 8, "only {parsed} of {n} generated queries parse");
    assert!(answered * 10 >= n * 5, "only {answered} of {n} generated queries answer");
}

/// Found by `generated_queries_answer_or_fail_within_the_limits` (minimised): a range function over a
/// 1 ms grid walked each series' 1.6 million steps without looking at the deadline, so a 500 ms query
/// ran ~8 s before failing on the sample limit. The deadline is now checked between steps.
#[test]
fn range_function_over_a_fine_grid_stops_at_the_timeout() {
    let e = engine();
    let qo = QueryOptions { timeout: Some(Duration::from_millis(100)), ..QueryOptions::default() };
    for q in ["stdvar_over_time(temp[30m])", "stdvar_over_time((temp)[30m:15s] offset 1m)"] {
        let expr = tessera_promql::engine::parse(q).expect("parses");
        let s = Instant::now();
        let r = e.range_expr(storage(), &expr, 0, 3_600_000, 1, &qo);
        let took = s.elapsed();
        assert!(matches!(r, Err(EngineError::Timeout(_) | EngineError::TooManySamples(_))), "{q}: {r:?}");
        assert!(took < Duration::from_secs(2), "{q} took {took:?} with a 100 ms timeout");
    }
}
