//! The runner of Prometheus' promqltest conformance scripts (`../shared/PROMQLTEST.md`).
//!
//! [`run_file`] parses a `.test` script ([`script`]), loads its series into a fresh [`MemStorage`] (XOR
//! chunks over two shards, so the engine's parallel decode path runs), evaluates each `eval` with the
//! [`Engine`] configured as upstream's test engine (lookback 5m, experimental features on), and compares
//! results the way upstream's `evalCmd.compareResult` and `checkAnnotations` do: relative tolerance 1e-6,
//! NaN equals NaN, series compared as label sets, order only for `ordered`.
//!
//! `metric@st` lines give the next series' samples start timestamps (loaded as XorSt chunks); the engine
//! runs with start timestamps on, as upstream's test engine does.
//!
//! Native-histogram points are parsed but not loaded: evals that need them fail and sit on the
//! known-failures list until the engine supports native histograms.

pub mod script;
pub mod storage;

use crate::engine::{Engine, EngineError, EngineOptions, QueryOptions, QueryResult, Value};
use script::{Command, EvalCmd, ExpectAnno, Point};
pub use storage::MemStorage;
use tessera_model::{Labels, Sample};

/// One failed eval.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    /// 1-based line of the `eval` command.
    pub line: usize,
    pub query: String,
    pub expected: String,
    pub got: String,
    /// Context for triage, e.g. that the loaded data holds native histograms (which are not loaded yet).
    pub note: String,
}

/// The outcome of one script.
#[derive(Debug, Clone, Default)]
pub struct FileReport {
    pub file: String,
    pub passed: usize,
    pub failed: Vec<Failure>,
}

impl FileReport {
    pub fn total(&self) -> usize {
        self.passed + self.failed.len()
    }
}

/// The engine settings the scripts assume (upstream `NewTestEngine`).
pub fn test_engine() -> Engine {
    Engine::new(EngineOptions {
        lookback_delta_ms: 5 * 60 * 1000,
        max_samples: 50_000_000,
        timeout: std::time::Duration::from_secs(100),
        enable_experimental: true,
        no_step_subquery_interval_ms: 60_000,
        delayed_name_removal: true,
        use_start_timestamps: true,
    })
}

/// Runs one script file.
pub fn run_file(path: &std::path::Path) -> FileReport {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match std::fs::read_to_string(path) {
        Ok(s) => run_script(&name, &s),
        Err(e) => FileReport {
            file: name,
            passed: 0,
            failed: vec![Failure {
                line: 0,
                query: String::new(),
                expected: "readable file".into(),
                got: e.to_string(),
                note: String::new(),
            }],
        },
    }
}

/// Runs a script given as text.
pub fn run_script(name: &str, text: &str) -> FileReport {
    run_script_with(name, text, &test_engine())
}

/// [`run_script`] with another engine configuration (e.g. without delayed name removal).
pub fn run_script_with(name: &str, text: &str, engine: &Engine) -> FileReport {
    let mut rep = FileReport { file: name.to_string(), ..Default::default() };
    let cmds = match script::parse_script(text) {
        Ok(c) => c,
        Err(e) => {
            rep.failed.push(Failure {
                line: e.line,
                query: String::new(),
                expected: "valid script".into(),
                got: e.msg,
                note: String::new(),
            });
            return rep;
        }
    };
    let mut store = MemStorage::new(2);
    // Native histograms in the data are parsed but not loaded; failures then get a note saying so.
    let mut hist_note = "";
    for c in cmds {
        match c {
            Command::Clear => {
                store = MemStorage::new(2);
                hist_note = "";
            }
            Command::Load { interval_ms, series, with_nhcb, .. } => {
                if with_nhcb {
                    hist_note = "load_with_nhcb data (native histograms, not supported yet)";
                } else if hist_note.is_empty() && series.iter().any(|s| s.points.contains(&Point::Histogram)) {
                    hist_note = "native histograms in the loaded data (not supported yet)";
                }
                for s in series {
                    // Upstream `loadCmd.set`: a start timestamp is the sample's time plus the `@st` offset;
                    // 0 (also an omitted offset) means unknown.
                    let mut samples: Vec<Sample> = Vec::with_capacity(s.points.len());
                    let mut sts: Vec<i64> = Vec::new();
                    for (i, p) in s.points.iter().enumerate() {
                        if let Point::Float(v) = p {
                            let t = i as i64 * interval_ms;
                            samples.push(Sample::new(t, *v));
                            if !s.st_offsets.is_empty() {
                                sts.push(s.st_offsets[i].map_or(0, |o| t + o));
                            }
                        }
                    }
                    store.add_series_st(s.labels, &samples, &sts);
                }
            }
            Command::Eval(ev) => {
                // A panic in the engine is a failure of this eval, not of the whole run.
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run_eval(engine, &store, &ev)))
                    .unwrap_or_else(|p| {
                        let msg = p
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        Err(("no panic".into(), format!("panic: {msg}")))
                    });
                match outcome {
                    Ok(()) => rep.passed += 1,
                    Err((expected, got)) => rep.failed.push(Failure {
                        line: ev.line,
                        query: ev.expr.clone(),
                        expected,
                        got,
                        note: hist_note.to_string(),
                    }),
                }
            }
        }
    }
    rep
}

type EvalOutcome = Result<(), (String, String)>;

fn run_eval(engine: &Engine, store: &MemStorage, ev: &EvalCmd) -> EvalOutcome {
    if ev.expected.iter().any(|s| s.points.contains(&Point::Histogram)) {
        return Err(("native histogram result".into(), "native histograms are not supported yet".into()));
    }
    let expr = match crate::engine::parse(&ev.expr) {
        Ok(e) => e,
        Err(e) => return check_failure(ev, &e),
    };
    let res = if ev.is_range {
        engine.range_expr(store, &expr, ev.start_ms, ev.end_ms, ev.step_ms, &QueryOptions::default())
    } else {
        let t = ev.range_vector.map(|(_, e, _)| e).unwrap_or(ev.start_ms);
        engine.instant_expr(store, &expr, t, &QueryOptions::default())
    };
    let res = match res {
        Ok(r) => r,
        Err(e) => return check_failure(ev, &e),
    };
    if ev.fail {
        return Err(("an error".into(), format!("no error, result {}", fmt_value(&res.value))));
    }
    check_annotations(ev, &res)?;
    compare(ev, &res.value)?;
    // Like upstream, queries that depend on the query's own start/end/range/step are not re-run.
    let context_dependent = ["start()", "end()", "range()", "step()"].iter().any(|f| ev.expr.contains(f));
    if !ev.is_range && ev.range_vector.is_none() && !ev.ordered && !context_dependent {
        check_range_mode(engine, store, ev, &expr, &res.value)?;
    }
    Ok(())
}

/// Upstream `runInstantQuery`'s second half: the same expression as a range query over
/// `[t-1m, t+1m]` step 1m must give, at `t`, the instant result.
fn check_range_mode(engine: &Engine, store: &MemStorage, ev: &EvalCmd, expr: &crate::parser::Expr, inst: &Value) -> EvalOutcome {
    if !matches!(inst, Value::Vector(_) | Value::Scalar { .. }) {
        return Ok(());
    }
    let t = ev.start_ms;
    let r = match engine.range_expr(store, expr, t - 60_000, t + 60_000, 60_000, &QueryOptions::default()) {
        Ok(r) => r,
        Err(e) => return Err(("the same result in range mode".into(), format!("range-mode error: {e}"))),
    };
    let Value::Matrix(m) = r.value else {
        return Err(("a matrix in range mode".into(), fmt_value(&r.value)));
    };
    let at_t: Vec<crate::engine::VectorSample> = m
        .iter()
        .filter_map(|s| {
            s.points.iter().find(|p| p.0 == t).map(|p| crate::engine::VectorSample { labels: s.labels.clone(), t_ms: t, v: p.1 })
        })
        .collect();
    let v = if matches!(inst, Value::Scalar { .. }) {
        match at_t.first() {
            Some(s) => Value::Scalar { t_ms: t, v: s.v },
            None => return Err(("a scalar in range mode".into(), "nothing".into())),
        }
    } else {
        Value::Vector(at_t)
    };
    compare(ev, &v).map_err(|(e, g)| (e, format!("range mode: {g}")))
}

fn check_failure(ev: &EvalCmd, e: &EngineError) -> EvalOutcome {
    if !ev.fail {
        return Err(("a result".into(), format!("error: {e}")));
    }
    let msg = e.to_string();
    if let Some(m) = &ev.fail_msg
        && *m != msg
    {
        return Err((format!("error {m:?}"), format!("error {msg:?}")));
    }
    if let Some(r) = &ev.fail_regex {
        match regex::Regex::new(r) {
            Ok(re) if re.is_match(&msg) => {}
            _ => return Err((format!("error matching /{r}/"), format!("error {msg:?}"))),
        }
    }
    Ok(())
}

fn anno_matches(e: &ExpectAnno, s: &str) -> bool {
    match e {
        ExpectAnno::Any => true,
        ExpectAnno::Msg(m) => m == s,
        ExpectAnno::Regex(r) => regex::Regex::new(r).map(|re| re.is_match(s)).unwrap_or(false),
    }
}

/// Upstream `checkAnnotations` / `validateExpectedAnnotationsOfType`.
fn check_annotations(ev: &EvalCmd, r: &QueryResult) -> EvalOutcome {
    if ev.warn && r.warnings.is_empty() {
        return Err(("warnings".into(), "none".into()));
    }
    if ev.info && r.infos.is_empty() {
        return Err(("info annotations".into(), "none".into()));
    }
    for (kind, exp, got) in [("warn", &ev.expect_warn, &r.warnings), ("info", &ev.expect_info, &r.infos)] {
        if exp.is_empty() {
            continue;
        }
        if got.is_empty() {
            return Err((format!("{kind} annotations {exp:?}"), "none".into()));
        }
        for e in exp {
            if !got.iter().any(|g| anno_matches(e, g)) {
                return Err((format!("{kind} annotation {e:?}"), format!("{got:?}")));
            }
        }
        for g in got {
            if !exp.iter().any(|e| anno_matches(e, g)) {
                return Err((format!("{kind} annotations {exp:?}"), format!("unexpected {g:?}")));
            }
        }
    }
    if ev.no_warn && !r.warnings.is_empty() {
        return Err(("no warnings".into(), format!("{:?}", r.warnings)));
    }
    if ev.no_info && !r.infos.is_empty() {
        return Err(("no infos".into(), format!("{:?}", r.infos)));
    }
    Ok(())
}

/// Upstream `almost.Equal` with epsilon 1e-6.
pub fn almost_equal(a: f64, b: f64) -> bool {
    let (sa, sb) = (tessera_model::is_stale_nan(a), tessera_model::is_stale_nan(b));
    if sa || sb {
        return sa && sb;
    }
    if a.is_nan() && b.is_nan() {
        return true;
    }
    if a == b {
        return true;
    }
    let min_normal = f64::from_bits(0x0010_0000_0000_0000);
    let abs_sum = a.abs() + b.abs();
    let diff = (a - b).abs();
    if a == 0.0 || b == 0.0 || abs_sum < min_normal {
        return diff < 1e-6 * min_normal;
    }
    diff / abs_sum.min(f64::MAX) < 1e-6
}

fn fmt_points(pts: &[(i64, f64)]) -> String {
    pts.iter().map(|(t, v)| format!("{v}@{t}")).collect::<Vec<_>>().join(" ")
}

fn fmt_value(v: &Value) -> String {
    match v {
        Value::Scalar { v, .. } => format!("scalar {v}"),
        Value::String { v, .. } => format!("string {v:?}"),
        Value::Vector(s) => {
            let parts: Vec<String> = s.iter().map(|x| format!("{} {}", x.labels, x.v)).collect();
            format!("vector [{}]", parts.join(", "))
        }
        Value::Matrix(m) => {
            let parts: Vec<String> = m.iter().map(|x| format!("{} [{}]", x.labels, fmt_points(&x.points))).collect();
            format!("matrix [{}]", parts.join(", "))
        }
    }
}

fn fmt_expected(ev: &EvalCmd) -> String {
    if let Some(s) = &ev.expected_string {
        return format!("string {s:?}");
    }
    if let Some(f) = ev.expect_scalar {
        return format!("scalar {f}");
    }
    let parts: Vec<String> = ev
        .expected
        .iter()
        .map(|s| {
            let pts: Vec<String> = s
                .points
                .iter()
                .map(|p| match p {
                    Point::Omitted => "_".to_string(),
                    Point::Float(f) => format!("{f}"),
                    Point::Histogram => "{{histogram}}".to_string(),
                })
                .collect();
            format!("{} {}", s.labels, pts.join(" "))
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// Upstream `evalCmd.compareResult`.
fn compare(ev: &EvalCmd, v: &Value) -> EvalOutcome {
    let fail = |why: String| Err((fmt_expected(ev), format!("{} ({why})", fmt_value(v))));
    let find = |l: &Labels| ev.expected.iter().position(|s| s.labels == *l);
    match v {
        Value::String { v: s, .. } => {
            if ev.expected_string.as_deref() != Some(s.as_str()) {
                return fail("string mismatch".into());
            }
        }
        Value::Scalar { v: f, .. } => match ev.expect_scalar {
            Some(e) if almost_equal(e, *f) => {}
            _ => return fail("scalar mismatch".into()),
        },
        Value::Vector(samples) => {
            if ev.expect_scalar.is_some() {
                return fail("expected scalar".into());
            }
            let mut seen = vec![false; ev.expected.len()];
            for (pos, s) in samples.iter().enumerate() {
                let Some(i) = find(&s.labels) else { return fail(format!("unexpected series {}", s.labels)) };
                if ev.ordered && i != pos {
                    return fail(format!("{} at position {} instead of {}", s.labels, pos + 1, i + 1));
                }
                let exp = match ev.expected[i].points.first() {
                    Some(Point::Float(f)) => *f,
                    _ => return fail("unexpected expected point".into()),
                };
                if !almost_equal(exp, s.v) {
                    return fail(format!("value of {}", s.labels));
                }
                seen[i] = true;
            }
            if seen.iter().any(|s| !s) {
                return fail("missing series".into());
            }
        }
        Value::Matrix(series) => {
            if ev.ordered {
                return fail("expected ordered result, but query returned a matrix".into());
            }
            if ev.expect_scalar.is_some() {
                return fail("expected scalar".into());
            }
            let (start, end, step) = match ev.range_vector {
                Some(r) => r,
                None => (ev.start_ms, ev.end_ms, ev.step_ms),
            };
            let mut seen = vec![false; ev.expected.len()];
            for s in series {
                let Some(i) = find(&s.labels) else { return fail(format!("unexpected series {}", s.labels)) };
                seen[i] = true;
                let mut exp: Vec<(i64, f64)> = Vec::new();
                for (k, p) in ev.expected[i].points.iter().enumerate() {
                    let t = start + k as i64 * step;
                    if t > end {
                        return fail("expected more points than the range allows".into());
                    }
                    if let Point::Float(f) = p {
                        exp.push((t, *f));
                    }
                }
                if exp.len() != s.points.len() {
                    return fail(format!("point count of {}", s.labels));
                }
                for (e, g) in exp.iter().zip(&s.points) {
                    if e.0 != g.0 || !almost_equal(e.1, g.1) {
                        return fail(format!("point of {} at {}", s.labels, g.0));
                    }
                }
            }
            if seen.iter().any(|s| !s) {
                return fail("missing series".into());
            }
        }
    }
    Ok(())
}

/// The `tessera promqltest FILE...` command: prints per-file pass/fail counts and every failure; returns
/// the process exit code (0 when everything passed).
pub fn run_files_cli(paths: &[std::path::PathBuf]) -> i32 {
    let mut total_pass = 0;
    let mut total_fail = 0;
    for p in paths {
        let r = run_file(p);
        for f in &r.failed {
            println!("{}:{}: FAIL {}\n  expected: {}\n  got:      {}", r.file, f.line, f.query, f.expected, f.got);
        }
        println!("{}: {} passed, {} failed", r.file, r.passed, r.failed.len());
        total_pass += r.passed;
        total_fail += r.failed.len();
    }
    println!("total: {total_pass} passed, {total_fail} failed");
    if total_fail == 0 { 0 } else { 1 }
}
