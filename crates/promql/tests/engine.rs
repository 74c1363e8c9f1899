//! Engine behaviour beyond the conformance scripts: limits, cancellation, timeouts, error types, result
//! shapes, and that the sharded parallel path gives the same answers whatever the shard count.

use std::time::Duration;
use tessera_model::{Labels, Sample};
use tessera_promql::engine::{CancelToken, Engine, EngineError, EngineOptions, QueryOptions, Value};
use tessera_promql::promqltest::MemStorage;

fn store(shards: usize, series: usize, points: usize) -> MemStorage {
    let mut st = MemStorage::new(shards);
    for i in 0..series {
        let l = Labels::from_pairs([
            ("__name__", "reqs_total".to_string()),
            ("job", format!("j{}", i % 3)),
            ("id", i.to_string()),
        ]);
        let samples: Vec<Sample> = (0..points).map(|k| Sample::new(k as i64 * 15_000, (k * (i + 1)) as f64)).collect();
        st.add_series(l, &samples);
    }
    st
}

#[test]
fn instant_and_range_shapes() {
    let st = store(2, 3, 41);
    let e = Engine::default();
    match e.instant(&st, "sum(reqs_total)", 60_000).expect("runs").value {
        Value::Vector(v) => {
            assert_eq!(v.len(), 1);
            // k = 4 at 60 s: 4*1 + 4*2 + 4*3.
            assert_eq!(v[0].v, 24.0);
            assert_eq!(v[0].t_ms, 60_000);
            assert!(v[0].labels.is_empty());
        }
        other => panic!("vector expected, got {other:?}"),
    }
    match e.instant(&st, "1 + 2", 0).expect("runs").value {
        Value::Scalar { v, .. } => assert_eq!(v, 3.0),
        other => panic!("scalar expected, got {other:?}"),
    }
    match e.instant(&st, "\"hi\"", 0).expect("runs").value {
        Value::String { v, .. } => assert_eq!(v, "hi"),
        other => panic!("string expected, got {other:?}"),
    }
    match e.instant(&st, "reqs_total{id=\"0\"}[1m]", 60_000).expect("runs").value {
        // (0, 60 s]: samples at 15, 30, 45, 60 s.
        Value::Matrix(m) => assert_eq!(m[0].points.len(), 4),
        other => panic!("matrix expected, got {other:?}"),
    }
    match e.range(&st, "rate(reqs_total[1m])", 60_000, 300_000, 60_000).expect("runs").value {
        Value::Matrix(m) => {
            assert_eq!(m.len(), 3);
            // Sorted by labels; names dropped by rate.
            assert!(m.windows(2).all(|w| w[0].labels < w[1].labels));
            assert!(m.iter().all(|s| s.labels.metric_name().is_empty() && s.points.len() == 5));
            // id=0 grows by 1 per 15 s.
            assert!((m[0].points[0].1 - 1.0 / 15.0).abs() < 1e-9);
        }
        other => panic!("matrix expected, got {other:?}"),
    }
}

/// Equal up to float rounding (partials merged in another order), NaN equal to NaN.
fn same(a: &Value, b: &Value) -> bool {
    let close = |x: f64, y: f64| (x.is_nan() && y.is_nan()) || x == y || (x - y).abs() <= 1e-9 * x.abs().max(y.abs());
    match (a, b) {
        (Value::Matrix(x), Value::Matrix(y)) => {
            let mut x = x.clone();
            let mut y = y.clone();
            x.sort_by(|p, q| p.labels.cmp(&q.labels));
            y.sort_by(|p, q| p.labels.cmp(&q.labels));
            x.len() == y.len()
                && x.iter().zip(&y).all(|(p, q)| {
                    p.labels == q.labels
                        && p.points.len() == q.points.len()
                        && p.points.iter().zip(&q.points).all(|(u, v)| u.0 == v.0 && close(u.1, v.1))
                })
        }
        _ => format!("{a:?}") == format!("{b:?}"),
    }
}

#[test]
fn shard_count_does_not_change_answers() {
    let queries = [
        "sum by (job) (rate(reqs_total[2m]))",
        "topk(2, reqs_total)",
        "reqs_total / ignoring(id) group_left sum without (id) (reqs_total)",
        "max_over_time(reqs_total[5m:30s])",
        "count_values(\"v\", reqs_total)",
        // Pushed-down aggregations: per-shard partials merged.
        "sum by (job) (reqs_total)",
        "avg(reqs_total)",
        "stddev by (job) (reqs_total)",
        "max without (id) (reqs_total) - min without (id) (reqs_total)",
        "count(reqs_total) + group(reqs_total)",
    ];
    let e = Engine::default();
    let one = store(1, 20, 41);
    for shards in [2, 3, 8] {
        let many = store(shards, 20, 41);
        for q in queries {
            let a = e.range(&one, q, 0, 600_000, 30_000).expect("runs");
            let b = e.range(&many, q, 0, 600_000, 30_000).expect("runs");
            assert!(same(&a.value, &b.value), "{q} differs with {shards} shards:\n{:?}\n{:?}", a.value, b.value);
        }
    }
}

#[test]
fn too_many_samples() {
    let st = store(2, 10, 100);
    let e = Engine::new(EngineOptions { max_samples: 200, ..Default::default() });
    // 10 series x 26 steps of output: held at once, over the limit.
    let err = e.range(&st, "rate(reqs_total[10m])", 0, 1_500_000, 60_000).expect_err("over the limit");
    assert!(matches!(err, EngineError::TooManySamples(_)));
    assert_eq!(err.to_string(), "query processing would load too many samples into memory in query execution");
    // The same query on one series stays under the limit.
    assert!(e.range(&st, "rate(reqs_total{id=\"1\"}[10m])", 0, 1_500_000, 60_000).is_ok());
}

/// The limit is on samples held at once, counted as upstream's `currentSamples` (not on every sample
/// decoded): a range function holds one window of one series plus the outputs so far; a range vector
/// result holds all its samples; a node's inputs are released when it is done.
#[test]
fn max_samples_counts_what_is_held() {
    // One shard, so that the order series are evaluated in (and so the peak) is deterministic.
    let st = store(1, 10, 100);
    let with = |max: usize| Engine::new(EngineOptions { max_samples: max, ..Default::default() });
    let t = 1_485_000;
    // rate over 10 series: each window (885 s, 1485 s] holds 40 samples; the peak is the last series'
    // window plus the 9 outputs before it. All 400 decoded samples are never held at once.
    assert!(with(49).instant(&st, "rate(reqs_total[10m])", t).is_ok());
    assert!(matches!(with(48).instant(&st, "rate(reqs_total[10m])", t), Err(EngineError::TooManySamples(_))));
    // sum() over it: rate's 10 outputs are released once sum is done; the peak is still rate's.
    assert!(with(49).instant(&st, "sum(rate(reqs_total[10m]))", t).is_ok());
    // A range vector result holds every sample: 10 x 40.
    assert!(with(400).instant(&st, "reqs_total[10m]", t).is_ok());
    assert!(matches!(with(399).instant(&st, "reqs_total[10m]", t), Err(EngineError::TooManySamples(_))));
    // A binary operation holds both inputs and its output: 10 + 10 + 10.
    assert!(with(30).instant(&st, "reqs_total + reqs_total", t).is_ok());
    assert!(matches!(with(29).instant(&st, "reqs_total + reqs_total", t), Err(EngineError::TooManySamples(_))));
    // An aggregation pushed into the shards still counts its input vector, as upstream materialises it.
    assert!(with(10).instant(&st, "sum(reqs_total)", t).is_ok());
    assert!(matches!(with(9).instant(&st, "sum(reqs_total)", t), Err(EngineError::TooManySamples(_))));
    // A range query streaming 10 series through rate at 26 steps holds the outputs (about 250).
    assert!(with(300).range(&st, "sum(rate(reqs_total[10m]))", 0, 1_500_000, 60_000).is_ok());
}

#[test]
fn cancellation_and_timeout() {
    let st = store(2, 10, 100);
    let e = Engine::default();
    let expr = tessera_promql::engine::parse("sum(rate(reqs_total[5m]))").expect("parses");
    let cancel = CancelToken::new();
    cancel.cancel();
    let qo = QueryOptions { cancel, ..Default::default() };
    let err = e.range_expr(&st, &expr, 0, 1_000_000, 10_000, &qo).expect_err("canceled");
    assert!(matches!(err, EngineError::Canceled(_)), "{err:?}");
    let qo = QueryOptions { timeout: Some(Duration::ZERO), ..Default::default() };
    std::thread::sleep(Duration::from_millis(2));
    let err = e.range_expr(&st, &expr, 0, 1_000_000, 10_000, &qo).expect_err("timed out");
    assert!(matches!(err, EngineError::Timeout(_)), "{err:?}");
}

#[test]
fn error_types() {
    let st = store(1, 2, 10);
    let e = Engine::default();
    assert!(matches!(e.instant(&st, "sum(", 0), Err(EngineError::BadData(_))));
    assert!(matches!(e.range(&st, "reqs_total[5m]", 0, 60_000, 15_000), Err(EngineError::BadData(_))));
    assert!(matches!(e.range(&st, "reqs_total", 0, 60_000, 0), Err(EngineError::BadData(_))));
    // Two series that become one labelset once the name is dropped.
    let mut st = MemStorage::new(2);
    st.add_series(Labels::from_pairs([("__name__", "a"), ("x", "1")]), &[Sample::new(0, 1.0)]);
    st.add_series(Labels::from_pairs([("__name__", "b"), ("x", "1")]), &[Sample::new(0, 1.0)]);
    let err = e.instant(&st, "{x=\"1\"} * 2", 0).expect_err("duplicate labelset");
    assert_eq!(err.to_string(), "vector cannot contain metrics with the same labelset");
    let err = e.instant(&st, "a + on() b or a - on(x) group_left b", 0);
    assert!(err.is_ok(), "{err:?}");
}

#[test]
fn lookback_override_and_annotations() {
    let mut st = MemStorage::new(1);
    st.add_series(Labels::from_pairs([("__name__", "g")]), &[Sample::new(0, 1.0), Sample::new(60_000, 3.0)]);
    let e = Engine::default();
    let expr = tessera_promql::engine::parse("g").expect("parses");
    let qo = QueryOptions { lookback_delta_ms: Some(30_000), ..Default::default() };
    match e.instant_expr(&st, &expr, 120_000, &qo).expect("runs").value {
        Value::Vector(v) => assert!(v.is_empty(), "60 s old sample is outside a 30 s lookback"),
        other => panic!("{other:?}"),
    }
    let r = e.instant(&st, "rate(g[5m])", 60_000).expect("runs");
    assert_eq!(
        r.infos,
        vec!["PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"g\"".to_string()]
    );
    let r = e.instant(&st, "quantile(2, g)", 60_000).expect("runs");
    assert_eq!(r.warnings, vec!["PromQL warning: quantile value should be between 0 and 1, got 2".to_string()]);
}

#[test]
fn experimental_functions_can_be_disabled() {
    let st = store(1, 2, 10);
    let e = Engine::new(EngineOptions { enable_experimental: false, ..Default::default() });
    let err = e.instant(&st, "limitk(1, reqs_total)", 0).expect_err("experimental");
    assert!(matches!(err, EngineError::BadData(_)), "{err:?}");
    assert!(e.instant(&st, "sum(reqs_total)", 0).is_ok());
}

/// A delta counter (OTel style: each sample starts where the previous one ended) read with and without
/// `use_start_timestamps`: only with it does the engine see the resets, and only then does
/// `start_timestamp()` return anything.
#[test]
fn start_timestamps_only_with_the_option() {
    let mut st = MemStorage::new(2);
    let l = Labels::from_pairs([("__name__", "d_total".to_string())]);
    let samples: Vec<Sample> = (1..=10).map(|k| Sample::new(k * 60_000, 60.0)).collect();
    let sts: Vec<i64> = (1..=10).map(|k| (k - 1) * 60_000 + 1).collect();
    st.add_series_st(l, &samples, &sts);
    let one = |e: &Engine, q: &str| match e.instant(&st, q, 600_000).expect("runs").value {
        Value::Vector(v) => v.first().map(|s| s.v),
        other => panic!("vector expected, got {other:?}"),
    };
    let off = Engine::default();
    assert!(!off.opts.use_start_timestamps, "off by default, like upstream");
    assert_eq!(one(&off, "increase(d_total[5m])"), Some(0.0));
    assert_eq!(one(&off, "resets(d_total[5m])"), Some(0.0));
    assert_eq!(one(&off, "start_timestamp(d_total)"), None);
    let on = Engine::new(EngineOptions { use_start_timestamps: true, ..Default::default() });
    // Five samples of 60 in (5m, 10m], the first starting just after 4m: 300 over 299.999 s of data,
    // extrapolated to the window end (which is the last sample): 300.
    let inc = one(&on, "increase(d_total[5m])").expect("value");
    assert!((inc - 300.0).abs() < 1e-9, "{inc}");
    assert_eq!(one(&on, "resets(d_total[5m])"), Some(4.0));
    assert_eq!(one(&on, "irate(d_total[5m])"), Some(1.0));
    assert_eq!(one(&on, "start_timestamp(d_total)"), Some(540.001));
    // Subqueries cut start timestamps, and start_timestamp() of an expression is empty.
    assert_eq!(one(&on, "resets(d_total[5m:1m])"), Some(0.0));
    assert_eq!(one(&on, "start_timestamp(d_total * 1)"), None);
}

/// Aggregation arithmetic mirrors upstream's `aggregation` bit for bit: stdvar/stddev are plain Welford
/// (no Kahan compensation; the values below are what upstream's float path computes for these inputs,
/// where a compensated Welford gives 1.7768750000000002), sum/avg Kahan-compensated in label order.
#[test]
fn aggregation_arithmetic_matches_upstream() {
    for shards in [1, 2, 3] {
        let mut st = MemStorage::new(shards);
        for (i, v) in [5.0, 4.5, 6.5, 7.9].into_iter().enumerate() {
            let l = Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string())]);
            st.add_series(l, &[Sample::new(0, v)]);
        }
        for (i, v) in [0.1, 0.2, 0.3].into_iter().enumerate() {
            let l = Labels::from_pairs([("__name__", "k".to_string()), ("i", i.to_string())]);
            st.add_series(l, &[Sample::new(0, v)]);
        }
        let e = Engine::default();
        let one = |q: &str| match e.instant(&st, q, 0).expect("runs").value {
            Value::Vector(v) => v[0].v,
            other => panic!("vector expected, got {other:?}"),
        };
        assert_eq!(one("stdvar(m)"), 1.7768750000000009, "{shards} shards");
        assert_eq!(one("stdvar(m * 1)"), 1.7768750000000009);
        assert_eq!(one("stddev(m)"), 1.3329947486768283);
        // Kahan: 0.1 + 0.2 + 0.3 is 0.6000000000000001 naively, 0.6 compensated.
        assert_eq!(one("sum(k)"), 0.6);
        assert_eq!(one("sum(k * 1)"), 0.6);
        assert_eq!(one("avg(k)"), 0.2);
        assert_eq!(one("avg(k * 1)"), 0.2);
    }
}

/// Issue 9: a long binary chain (`m or m or …`) is a tree as deep as it is long; every pass over it
/// recurses. The parser bounds it with every other kind of nesting, so a chain within the bound parses,
/// prints, evaluates and drops on a 2 MiB thread stack (what a test or a tokio blocking thread gets),
/// and a longer one is a parse error — never a stack overflow.
#[test]
fn long_binary_chains_evaluate_or_fail_cleanly() {
    let run = || {
        let st = store(2, 3, 41);
        let e = Engine::default();
        for op in ["or", "+", "and", "unless", ">", "* on()", "/ ignoring(id) group_left"] {
            // Within the bound: it answers (or fails for a PromQL reason), and prints back.
            let q = vec!["reqs_total"; 390].join(&format!(" {op} "));
            let _ = e.instant(&st, &q, 60_000);
            let ast = tessera_promql::parser::parse(&q).expect("a 390-term chain parses");
            assert!(!ast.to_string().is_empty());
            assert!(!tessera_promql::parser::pretty(&ast).is_empty());
            assert!(!tessera_promql::parser::to_json(&ast).to_string().is_empty());
            // Nested inside calls and parentheses the levels add up.
            let nested = format!("{}{}{}", "abs(".repeat(200), vec!["reqs_total"; 199].join(&format!(" {op} ")), ")".repeat(200));
            let _ = e.instant(&st, &nested, 60_000);
            for n in [3_000, 10_000, 100_000] {
                let q = vec!["reqs_total"; n].join(&format!(" {op} "));
                let err = e.instant(&st, &q, 60_000).expect_err("too deep");
                assert!(err.to_string().contains("expression nesting too deep"), "{op} {n}: {err}");
                assert!(tessera_promql::parser::parse(&q).is_err());
            }
        }
        // Subquery chains (`x[1m:][1m:]…`) count too: each wraps the expression once more.
        for n in [1_000, 20_000] {
            let q = format!("vector(1){}", "[1m:]".repeat(n));
            assert!(tessera_promql::parser::parse(&q).is_err(), "{n}");
        }
        // Duration arithmetic chains count too.
        let d = vec!["1s"; 5_000].join("+");
        assert!(e.instant(&st, &format!("reqs_total[{d}]"), 60_000).is_err());
    };
    std::thread::Builder::new().stack_size(2 << 20).spawn(run).expect("thread").join().expect("no overflow");
}

/// Issue 9: subqueries with huge step counts used to allocate before counting (an abort on a 6.9 TB
/// allocation, 17.8 GB of RSS), and ran on after the timeout or a cancel. The step count is checked
/// against the sample limit before anything is allocated, and long evaluations stop at the deadline
/// or the cancel within a series.
#[test]
fn subqueries_are_bounded_by_the_sample_limit_the_timeout_and_cancellation() {
    let st = store(2, 20, 2000);
    let e = Engine::default();
    let t = 2000 * 15_000;
    for q in [
        "count_over_time(vector(1)[10000d:1ms])",
        "count_over_time(reqs_total[1d:1ms])",
        "max_over_time(count_over_time(reqs_total[1h:1s])[10000d:1ms])",
        "reqs_total[100000d:1ms]",
    ] {
        let err = e.instant(&st, q, t).expect_err(q);
        assert!(matches!(err, EngineError::TooManySamples(_)), "{q}: {err:?}");
    }
    // Within the step limit but too slow for the timeout: stopped there, as a timeout.
    let expr = tessera_promql::engine::parse("count_over_time(reqs_total[4h:1ms])").expect("parses");
    let qo = QueryOptions { timeout: Some(Duration::from_millis(100)), ..Default::default() };
    let err = e.instant_expr(&st, &expr, t, &qo).expect_err("timed out");
    assert!(matches!(err, EngineError::Timeout(_) | EngineError::TooManySamples(_)), "{err:?}");
    // Canceled from another thread while it runs (a client that went away).
    let cancel = CancelToken::new();
    let c2 = cancel.clone();
    let h = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        c2.cancel();
    });
    let qo = QueryOptions { cancel, ..Default::default() };
    let err = e.instant_expr(&st, &expr, t, &qo).expect_err("canceled");
    h.join().expect("join");
    assert!(matches!(err, EngineError::Canceled(_) | EngineError::TooManySamples(_)), "{err:?}");
    // A range selector longer than the limit allows is refused while decoding, not after.
    let small = Engine::new(EngineOptions { max_samples: 1000, ..Default::default() });
    assert!(matches!(small.instant(&st, "count_over_time(reqs_total{id=\"1\"}[1000d])", t), Err(EngineError::TooManySamples(_))));
}

/// count_values makes one output series of every step per distinct value: their number is bounded by
/// the sample limit before one more is allocated.
#[test]
fn count_values_output_is_bounded() {
    let st = store(2, 20, 200);
    let small = Engine::new(EngineOptions { max_samples: 5_000, ..Default::default() });
    // 20 series with distinct values at every step, over 1,001 steps: far more distinct values than fit.
    let err = small.range(&st, "count_values(\"v\", reqs_total)", 0, 3_000_000, 3_000).expect_err("bounded");
    assert!(matches!(err, EngineError::TooManySamples(_)), "{err:?}");
    assert!(small.instant(&st, "count_values(\"v\", reqs_total)", 1_500_000).is_ok());
}

/// Deliberately unlike Prometheus 3.14, which answers nothing for both subquery queries below: its
/// `preprocessExprHelper` wraps an `@`-pinned subquery argument in a `StepInvariantExpr` whenever the
/// call itself is not step-invariant (predict_linear is in `AtModifierUnsafeFunctions`; quantile_over_time
/// here has a parameter that changes per step), and the `*parser.Call` case of `evaluator.eval` then no
/// longer recognises the wrapped subquery as the range argument, so the function is handed no matrix.
/// We answer as for the equivalent range selector, where upstream does too.
#[test]
fn at_pinned_subquery_arguments_behave_like_pinned_range_selectors() {
    let st = store(1, 2, 41);
    let e = Engine::default();
    let run = |q: &str| e.range(&st, q, 300_000, 600_000, 60_000).expect(q).value;
    // predict_linear predicts from each step's evaluation time even over a pinned window (upstream lists
    // it as @-unsafe), so it changes per step, exactly as over the pinned range selector.
    let sel = run("predict_linear(reqs_total[2m] @ 300, 0)");
    let sub = run("predict_linear((reqs_total)[2m:15s] @ 300, 0)");
    assert!(same(&sel, &sub), "{sel:?} vs {sub:?}");
    match &sub {
        Value::Matrix(m) => {
            assert_eq!(m.len(), 2);
            assert!(m.iter().all(|s| s.points.len() == 6 && s.points[0].1 != s.points[5].1), "{m:?}");
        }
        other => panic!("matrix expected, got {other:?}"),
    }
    // A pinned window with a per-step parameter that stays the same: the same answer at every step.
    match run("quantile_over_time(time() - time() + 0.5, (reqs_total)[2m:15s] @ 300)") {
        Value::Matrix(m) => {
            assert_eq!(m.len(), 2);
            assert!(m.iter().all(|s| s.points.len() == 6 && s.points.iter().all(|p| p.1 == s.points[0].1)), "{m:?}");
        }
        other => panic!("matrix expected, got {other:?}"),
    }
}

/// Vectors keep a slot for every step, present or not; a sparse series over a fine subquery grid held
/// gigabytes below the sample limit. Slots are bounded at twice the sample limit.
#[test]
fn dense_slots_of_sparse_series_are_bounded() {
    let mut st = MemStorage::new(2);
    for i in 0..10 {
        st.add_series(Labels::from_pairs([("__name__", "gone".to_string()), ("i", i.to_string())]), &[Sample::new(0, 1.0)]);
    }
    let e = Engine::new(EngineOptions { max_samples: 1_000_000, ..Default::default() });
    // 360,000 inner steps; each series is present for 30,000 of them (its lookback): 300,000 samples
    // held, 3,600,000 slots.
    let err = e.instant(&st, "count_over_time(gone[1h:10ms])", 3_600_000).expect_err("slots bounded");
    assert!(matches!(err, EngineError::TooManySamples(_)), "{err:?}");
    // One series fits (360,000 slots).
    assert!(e.instant(&st, "count_over_time(gone{i=\"1\"}[1h:10ms])", 3_600_000).is_ok());
}

/// The planner decides pushdown once and says where every node runs; a traced query reports each
/// evaluated node's figures and answers exactly as an untraced one.
#[test]
fn plan_and_trace() {
    use tessera_promql::engine::plan::{Placement, plan};
    let opts = EngineOptions::default();
    let p = |q: &str| plan(&tessera_promql::engine::parse(q).expect("parses"), &opts);
    let root = p("sum by (job) (rate(reqs_total[1m]))").root;
    assert_eq!((root.op.as_str(), root.placement), ("sum by (job)", Placement::ShardsThenMerge));
    assert_eq!((root.children[0].op.as_str(), root.children[0].placement), ("rate", Placement::Fused));
    assert_eq!(root.children[0].children[0].placement, Placement::Fused);
    // Not decomposable exactly, or not a per-series shape: central over a shard-run child.
    // Order-dependent aggregations of a range function: folded centrally in label order as the shards
    // hand their series over.
    for q in ["avg(rate(reqs_total[1m]))", "stddev by (job) (increase(reqs_total[5m]))", "stdvar(rate(reqs_total[1m]))", "avg(reqs_total)", "stddev by (job) ({job=\"j1\"})"] {
        let root = p(q).root;
        assert_eq!((root.placement, root.children[0].placement), (Placement::ShardsThenOrderedFold, Placement::Fused), "{q}");
    }
    for q in ["sum(rate({job=\"j1\"}[1m]))", "topk(2, reqs_total)", "sum(reqs_total * 2)", "quantile(0.5, rate(reqs_total[1m]))"] {
        assert_eq!(p(q).root.placement, Placement::Central, "{q}");
    }
    let root = p("rate(reqs_total[1m]) / 2").root;
    assert_eq!(root.placement, Placement::Central);
    assert_eq!(root.children[0].placement, Placement::Shards);
    assert_eq!(root.children[0].children[0].placement, Placement::Fused);
    let root = p("max(reqs_total)").root;
    assert_eq!((root.placement, root.children[0].placement), (Placement::ShardsThenMerge, Placement::Fused));
    let off = EngineOptions { aggregation_pushdown: false, ..EngineOptions::default() };
    let root = plan(&tessera_promql::engine::parse("sum(reqs_total)").expect("parses"), &off).root;
    assert_eq!((root.placement, root.children[0].placement), (Placement::Central, Placement::Shards));

    let st = store(2, 12, 41);
    let e = Engine::default();
    let expr = tessera_promql::engine::parse("sum by (job) (rate(reqs_total[1m])) / on (job) count by (job) (reqs_total)").expect("parses");
    let traced = e.range_expr(&st, &expr, 60_000, 600_000, 15_000, &QueryOptions { trace: true, ..Default::default() }).expect("runs");
    let plain = e.range_expr(&st, &expr, 60_000, 600_000, 15_000, &QueryOptions::default()).expect("runs");
    assert_eq!(traced.value, plain.value);
    assert!(plain.trace.is_none());
    let t = traced.trace.expect("traced");
    assert_eq!(t.op, "/");
    assert!(t.evaluated && t.series_out == 3 && t.series_touched == 24, "{t:?}");
    let (sum, count) = (&t.children[0], &t.children[1]);
    assert_eq!((sum.placement, sum.series_touched, sum.series_out), ("shards+merge", 12, 3), "{sum:?}");
    assert_eq!((count.placement, count.series_touched, count.series_out), ("shards+merge", 12, 3), "{count:?}");
    assert!(sum.chunks >= 12 && sum.samples_decoded > 0, "{sum:?}");
    assert_eq!(t.samples_decoded, sum.samples_decoded + count.samples_decoded);
    assert!(!sum.children[0].evaluated, "the rate is fused into the sum");
    let mut js = String::new();
    t.write_json(&mut js);
    assert!(js.starts_with(r#"{"op":"/","expr":"#), "{js}");
}

/// A "many" series whose partner changes from step to step (and back) goes to the output of each pair
/// in turn: the binary operator's per-series memo of the last pair's output must notice the change.
#[test]
fn a_series_matched_to_changing_partners_fills_each_pairs_output() {
    let mut st = MemStorage::new(2);
    let at = |k: i64, v: f64| Sample::new(k * 15_000, v);
    st.add_series(Labels::from_pairs([("__name__", "a"), ("x", "1")]), &(0..10).map(|k| at(k, 10.0 + k as f64)).collect::<Vec<_>>());
    // Partner v="p" at steps 0-2 and 7-9, v="q" at steps 3-6; a 1 s lookback keeps each to its steps.
    let p: Vec<Sample> = [0, 1, 2, 7, 8, 9].iter().map(|&k| at(k, 2.0)).collect();
    let q: Vec<Sample> = (3..7).map(|k| at(k, 3.0)).collect();
    st.add_series(Labels::from_pairs([("__name__", "b"), ("x", "1"), ("v", "p")]), &p);
    st.add_series(Labels::from_pairs([("__name__", "b"), ("x", "1"), ("v", "q")]), &q);
    let e = Engine::default();
    let qo = QueryOptions { lookback_delta_ms: Some(1_000), ..Default::default() };
    for (expr, want) in [
        // many-to-one: the output takes the partner's `v`, so each partner has its own output series.
        ("a * on (x) group_left (v) b", [("p", vec![0, 1, 2, 7, 8, 9], 2.0), ("q", vec![3, 4, 5, 6], 3.0)]),
        // the "many" side on the right.
        ("b * on (x) group_right (v) a", [("p", vec![0, 1, 2, 7, 8, 9], 2.0), ("q", vec![3, 4, 5, 6], 3.0)]),
    ] {
        let parsed = tessera_promql::engine::parse(expr).expect("parses");
        let got = match e.range_expr(&st, &parsed, 0, 135_000, 15_000, &qo).expect("runs").value {
            Value::Matrix(m) => m,
            other => panic!("{expr}: matrix expected, got {other:?}"),
        };
        assert_eq!(got.len(), 2, "{expr}: {got:?}");
        for ((v, steps, factor), s) in want.iter().zip(&got) {
            assert_eq!(s.labels.get("v"), *v, "{expr}: {got:?}");
            let expect: Vec<(i64, f64)> = steps.iter().map(|&k| (k * 15_000, (10.0 + k as f64) * factor)).collect();
            assert_eq!(s.points, expect, "{expr}, v={v}");
        }
    }
}
