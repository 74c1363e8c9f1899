//! The runner of Prometheus' promqltest conformance scripts (`../shared/PROMQLTEST.md`).
//!
//! [`run_file`] parses a `.test` script ([`script`]), loads its series into a fresh [`MemStorage`] (XOR
//! chunks over two shards, so the engine's parallel decode path runs), evaluates each `eval` with the
//! [`Engine`] configured as upstream's test engine (lookback 5m, experimental features on), and compares
//! results the way upstream's `evalCmd.compareResult` and `checkAnnotations` do: relative tolerance 1e-6,
//! NaN equals NaN, series compared as label sets, order only for `ordered`.
//!
//! `metric@st` lines give the next series' samples start timestamps, floats and histograms alike (loaded
//! as XorSt and FloatHistogramSt chunks); the engine runs with start timestamps on, as upstream's test
//! engine does.
//!
//! Native-histogram points are loaded as float-histogram chunks (upstream's test storage appends float
//! histograms); `load_with_nhcb` also turns classic histogram series into native histograms with custom
//! buckets, as upstream's `appendCustomHistogram`. Histogram results compare as `compareNativeHistogram`
//! does after `Compact(0)`: schema, count, sum, zero bucket and every non-empty bucket with the float
//! tolerance, the counter-reset hint only when the script set it.

pub mod script;
pub mod storage;

use crate::engine::{Engine, EngineError, EngineOptions, QueryOptions, QueryResult, Value};
use script::{Command, EvalCmd, ExpectAnno, Point};
pub use storage::MemStorage;
use tessera_model::{FloatHistogram, Labels, Sample};

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
        aggregation_pushdown: true,
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
    // Failures get a note when the data could not be loaded as written.
    let mut hist_note = "";
    for c in cmds {
        match c {
            Command::Clear => {
                store = MemStorage::new(2);
                hist_note = "";
            }
            Command::Load { interval_ms, series, with_nhcb, .. } => {
                if with_nhcb && load_nhcb(&mut store, &series, interval_ms).is_err() {
                    hist_note = "load_with_nhcb data that does not convert";
                }
                for s in series {
                    if let Err(e) = load_series(&mut store, s, interval_ms) {
                        rep.failed.push(Failure {
                            line: 0,
                            query: String::new(),
                            expected: "loadable series".into(),
                            got: e,
                            note: String::new(),
                        });
                    }
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

/// Appends one series description (upstream `loadCmd.set` + `appendSample`): floats as XOR chunks,
/// histograms as float-histogram chunks (XorSt / FloatHistogramSt where the script gives start
/// timestamps), in time order. A
/// stale marker right after histograms is a histogram stale marker, as the head writes it.
fn load_series(store: &mut MemStorage, s: script::SeriesDef, interval_ms: i64) -> Result<(), String> {
    let mut floats: Vec<Sample> = Vec::new();
    let mut sts: Vec<i64> = Vec::new();
    let mut hists: Vec<(i64, FloatHistogram)> = Vec::new();
    let mut hsts: Vec<i64> = Vec::new();
    // Upstream `loadCmd.set`: a start timestamp is the sample's time plus the `@st` offset; 0 (also an
    // omitted offset) means unknown. It applies to float and histogram samples alike.
    let st_of = |i: usize, t: i64| s.st_offsets.get(i).copied().flatten().map_or(0, |o| t + o);
    let flush_f = |store: &mut MemStorage, floats: &mut Vec<Sample>, sts: &mut Vec<i64>| {
        if !floats.is_empty() {
            store.add_series_st(s.labels.clone(), floats, sts);
        }
        floats.clear();
        sts.clear();
    };
    for (i, p) in s.points.iter().enumerate() {
        let t = i as i64 * interval_ms;
        match p {
            Point::Float(v) if tessera_model::is_stale_nan(*v) && !hists.is_empty() => {
                hists.push((t, FloatHistogram::stale()));
                hsts.push(st_of(i, t));
            }
            Point::Float(v) => {
                if !hists.is_empty() {
                    store.add_float_histograms_st(s.labels.clone(), &hists, &hsts)?;
                    hists.clear();
                    hsts.clear();
                }
                floats.push(Sample::new(t, *v));
                if !s.st_offsets.is_empty() {
                    sts.push(st_of(i, t));
                }
            }
            Point::Histogram(h, _) => {
                flush_f(store, &mut floats, &mut sts);
                hists.push((t, (**h).clone()));
                hsts.push(st_of(i, t));
            }
            Point::Omitted => {}
        }
    }
    flush_f(store, &mut floats, &mut sts);
    store.add_float_histograms_st(s.labels.clone(), &hists, &hsts)
}

/// Upstream `loadCmd.appendCustomHistogram`: classic histogram series (`_bucket` with `le`, `_count`,
/// `_sum`) of this load become native histograms with custom buckets under the base name, per
/// timestamp (`convertnhcb.TempHistogram`), next to the float series.
fn load_nhcb(store: &mut MemStorage, series: &[script::SeriesDef], interval_ms: i64) -> Result<(), String> {
    use std::collections::BTreeMap;
    #[derive(Default, Clone)]
    struct Temp {
        buckets: Vec<(f64, f64)>,
        count: Option<f64>,
        sum: f64,
        err: bool,
    }
    let mut by_series: BTreeMap<Labels, BTreeMap<i64, Temp>> = BTreeMap::new();
    for s in series {
        let name = s.labels.metric_name();
        let (kind, base) = if let Some(b) = name.strip_suffix("_bucket") {
            (0, b)
        } else if let Some(b) = name.strip_suffix("_sum") {
            (1, b)
        } else if let Some(b) = name.strip_suffix("_count") {
            (2, b)
        } else {
            continue;
        };
        let le = if kind == 0 {
            match s.labels.get("le").parse::<f64>() {
                Ok(le) if !le.is_nan() => le,
                _ => continue,
            }
        } else {
            0.0
        };
        let mut b = tessera_model::LabelsBuilder::from_labels(&s.labels);
        b.set("__name__".to_string(), base.to_string());
        b.del("le");
        let entry = by_series.entry(b.build()).or_default();
        for (i, p) in s.points.iter().enumerate() {
            let Point::Float(v) = p else { continue };
            let v = *v;
            let h = entry.entry(i as i64 * interval_ms).or_default();
            if h.err {
                continue;
            }
            match kind {
                // `TempHistogram.SetBucketCount`: cumulative counts, the first count for a bound wins.
                0 => {
                    if v < 0.0 {
                        h.err = true;
                        continue;
                    }
                    let pos = h.buckets.partition_point(|b| b.0 < le);
                    if pos < h.buckets.len() && h.buckets[pos].0 == le {
                        continue;
                    }
                    if (pos > 0 && v < h.buckets[pos - 1].1) || (pos < h.buckets.len() && v > h.buckets[pos].1) {
                        h.err = true;
                        continue;
                    }
                    h.buckets.insert(pos, (le, v));
                }
                1 => h.sum = v,
                _ => {
                    if v < 0.0 {
                        h.err = true;
                        continue;
                    }
                    h.count = Some(v);
                }
            }
        }
    }
    for (labels, per_t) in by_series {
        let mut samples: Vec<(i64, FloatHistogram)> = Vec::new();
        for (t, mut h) in per_t {
            if h.err {
                return Err(format!("classic histogram {labels} at {t} does not convert"));
            }
            // `TempHistogram.Convert` / `convertToFloatHistogram`: the count defaults to the last
            // bucket's, a +Inf bucket is added when missing, buckets become per-bucket counts.
            let count = h.count.unwrap_or_else(|| h.buckets.last().map_or(0.0, |b| b.1));
            if h.buckets.last().is_none_or(|b| b.0 != f64::INFINITY) {
                h.buckets.push((f64::INFINITY, count));
            }
            if count != h.buckets[h.buckets.len() - 1].1 {
                return Err(format!("count mismatch for {labels} at {t}"));
            }
            let mut prev = 0.0;
            let mut fh = FloatHistogram {
                schema: tessera_model::histogram::CUSTOM_BUCKETS_SCHEMA,
                count,
                sum: h.sum,
                positive_spans: vec![tessera_model::Span::new(0, h.buckets.len() as u32)],
                ..FloatHistogram::default()
            };
            for (le, c) in &h.buckets {
                fh.positive_buckets.push(c - prev);
                prev = *c;
                if *le != f64::INFINITY {
                    fh.custom_values.push(*le);
                }
            }
            // Upstream compacts the converted histogram (`Compact(2)` for integer counts, `Compact(0)`
            // for float ones); the layout differs, the values do not, and results compare compacted.
            crate::engine::hist::math::compact(&mut fh).map_err(|_| format!("{labels} at {t} does not compact"))?;
            samples.push((t, fh));
        }
        store.add_float_histograms(labels, &samples)?;
    }
    Ok(())
}

type EvalOutcome = Result<(), (String, String)>;

fn run_eval(engine: &Engine, store: &MemStorage, ev: &EvalCmd) -> EvalOutcome {
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
            let f = s.points.iter().find(|p| p.0 == t).map(|p| crate::engine::VectorSample {
                labels: s.labels.clone(),
                t_ms: t,
                v: p.1,
                h: None,
            });
            f.or_else(|| {
                s.histograms.iter().find(|p| p.0 == t).map(|p| crate::engine::VectorSample {
                    labels: s.labels.clone(),
                    t_ms: t,
                    v: 0.0,
                    h: Some(p.1.clone()),
                })
            })
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
            let parts: Vec<String> = s
                .iter()
                .map(|x| match &x.h {
                    Some(h) => format!("{} {}", x.labels, fmt_hist(h)),
                    None => format!("{} {}", x.labels, x.v),
                })
                .collect();
            format!("vector [{}]", parts.join(", "))
        }
        Value::Matrix(m) => {
            let parts: Vec<String> = m
                .iter()
                .map(|x| {
                    let hs: Vec<String> = x.histograms.iter().map(|(t, h)| format!("{}@{t}", fmt_hist(h))).collect();
                    if hs.is_empty() {
                        format!("{} [{}]", x.labels, fmt_points(&x.points))
                    } else {
                        format!("{} [{}] [{}]", x.labels, fmt_points(&x.points), hs.join(" "))
                    }
                })
                .collect();
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
                    Point::Histogram(h, _) => fmt_hist(h),
                })
                .collect();
            format!("{} {}", s.labels, pts.join(" "))
        })
        .collect();
    format!("[{}]", parts.join(", "))
}

/// A histogram in the scripts' literal syntax (upstream `TestExpression`), for messages.
fn fmt_hist(h: &FloatHistogram) -> String {
    h.test_expression()
}

/// The non-empty buckets of one side as (bucket index, count): what remains of the spans and buckets
/// after upstream's `Compact(0)`, so that two layouts of the same histogram compare equal (a chunk
/// re-coded for a wider layout hands back explicit empty buckets).
fn nonempty_buckets(spans: &[tessera_model::Span], buckets: &[f64]) -> Vec<(i64, f64)> {
    let mut out = Vec::new();
    let mut idx: i64 = 0;
    let mut k = 0usize;
    // The first span's offset is its first index; later offsets count from the previous span's end.
    for s in spans {
        idx += i64::from(s.offset);
        for _ in 0..s.length {
            if let Some(&c) = buckets.get(k)
                && c != 0.0
            {
                out.push((idx, c));
            }
            k += 1;
            idx += 1;
        }
    }
    out
}

/// Upstream `compareNativeHistogram(exp.Compact(0), cur.Compact(0), hintSet)`.
fn hist_matches(exp: &FloatHistogram, got: &FloatHistogram, hint_set: bool) -> bool {
    if exp.schema != got.schema || !almost_equal(exp.count, got.count) || !almost_equal(exp.sum, got.sum) {
        return false;
    }
    if exp.schema == tessera_model::histogram::CUSTOM_BUCKETS_SCHEMA
        && !tessera_model::histogram::custom_bucket_bounds_match(&exp.custom_values, &got.custom_values)
    {
        return false;
    }
    if exp.zero_threshold != got.zero_threshold || !almost_equal(exp.zero_count, got.zero_count) {
        return false;
    }
    let same = |a: Vec<(i64, f64)>, b: Vec<(i64, f64)>| {
        a.len() == b.len() && a.iter().zip(&b).all(|(x, y)| x.0 == y.0 && almost_equal(x.1, y.1))
    };
    if !same(nonempty_buckets(&exp.negative_spans, &exp.negative_buckets), nonempty_buckets(&got.negative_spans, &got.negative_buckets))
        || !same(nonempty_buckets(&exp.positive_spans, &exp.positive_buckets), nonempty_buckets(&got.positive_spans, &got.positive_buckets))
    {
        return false;
    }
    !hint_set || exp.counter_reset_hint == got.counter_reset_hint
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
                match (ev.expected[i].points.first(), &s.h) {
                    (Some(Point::Float(f)), None) => {
                        if !almost_equal(*f, s.v) {
                            return fail(format!("value of {}", s.labels));
                        }
                    }
                    (Some(Point::Histogram(e, hint_set)), Some(h)) => {
                        if !hist_matches(e, h, *hint_set) {
                            return fail(format!("histogram of {}", s.labels));
                        }
                    }
                    (Some(Point::Float(_)), Some(_)) => return fail(format!("expected float for {}, got histogram", s.labels)),
                    (Some(Point::Histogram(..)), None) => return fail(format!("expected histogram for {}, got float", s.labels)),
                    _ => return fail("unexpected expected point".into()),
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
                let mut exp_h: Vec<(i64, &FloatHistogram, bool)> = Vec::new();
                for (k, p) in ev.expected[i].points.iter().enumerate() {
                    let t = start + k as i64 * step;
                    if t > end {
                        return fail("expected more points than the range allows".into());
                    }
                    match p {
                        Point::Float(f) => exp.push((t, *f)),
                        Point::Histogram(h, hint_set) => exp_h.push((t, h, *hint_set)),
                        Point::Omitted => {}
                    }
                }
                if exp.len() != s.points.len() || exp_h.len() != s.histograms.len() {
                    return fail(format!("point count of {}", s.labels));
                }
                for (e, g) in exp.iter().zip(&s.points) {
                    if e.0 != g.0 || !almost_equal(e.1, g.1) {
                        return fail(format!("point of {} at {}", s.labels, g.0));
                    }
                }
                for (e, g) in exp_h.iter().zip(&s.histograms) {
                    if e.0 != g.0 || !hist_matches(e.1, &g.1, e.2) {
                        return fail(format!("histogram of {} at {}", s.labels, g.0));
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
