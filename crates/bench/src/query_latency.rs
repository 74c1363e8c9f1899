//! `tessera-bench b3`: PromQL latency on node_exporter fleet data (B3 in ../shared/BENCHMARKS.md),
//! against any Prometheus-API base URL (Tessera, Prometheus, VictoriaMetrics' single-node `/` or a
//! cluster's `/select/0/prometheus`).
//!
//! - `--load` first writes the B2 data with the remote-write generator ([`crate::remote_write`], max
//!   mode) from a fixed `--start-ms` for `--backfill`, so that every system gets the same samples;
//!   without it the harness queries whatever the server holds.
//! - The evaluation time is `--time`, else the data's end: `max(timestamp(node_load1))`, see
//!   [`crate::prom_query::data_end_ms`].
//! - Set "rules": the 35 node_exporter alerting expressions of `--rules`, one instant query each at
//!   the evaluation time. Set "range": Grafana "Node Exporter Full"-style panels ([`DASHBOARD`]) as
//!   range queries over each `--windows` window ending at the evaluation time, at the step Grafana would
//!   pick ([`dashboard_step_ms`]), start and end aligned down to the step as Grafana does. A window
//!   longer than the data is still queried (the report says how much of it the data covers).
//! - Each query runs once untimed (its answer is canonicalised and checksummed, [`crate::answer`]),
//!   then `--runs` times timed, one after the other; a run's latency is from sending the request to
//!   having read the whole answer. Reported: per query the median, series, points and checksum (and
//!   whether a timed run's answer differed from the untimed one); per set the mean of the per-query
//!   medians and the p99 of all timed runs; and the command that reproduces the run.
//! - `--out` writes the rows as JSON lines, `--compare` matches them against another run's `--out`
//!   (latency ratio, same answer or not), `--dump` writes each answer's canonical text for `diff -r`.

use crate::answer::{canonicalise, Summary};
use crate::prom_query::{self, percentile, secs, Api};
use crate::remote_write::{self, parse_duration};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Grafana "Node Exporter Full"-style dashboard panels over the whole fleet: (name, expression).
pub const DASHBOARD: &[(&str, &str)] = &[
    ("cpu_busy", r#"sum by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[5m]))"#),
    ("cpu_modes", "avg by (instance, mode) (rate(node_cpu_seconds_total[5m]))"),
    ("mem_used", "node_memory_MemTotal_bytes - node_memory_MemAvailable_bytes"),
    ("net_rx", "sum by (instance) (rate(node_network_receive_bytes_total[5m]))"),
    ("disk_io", "rate(node_disk_io_time_seconds_total[5m])"),
    ("load1", "node_load1"),
    (
        "fs_used",
        r#"1 - node_filesystem_avail_bytes{fstype!~"tmpfs|fuse.*"} / node_filesystem_size_bytes{fstype!~"tmpfs|fuse.*"}"#,
    ),
    ("cpu_top5", r#"topk(5, sum by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[5m])))"#),
];

/// A dashboard panel's data points at most (a wide Grafana panel's `maxDataPoints`).
pub const MAX_DATA_POINTS: i64 = 1100;

/// The steps a range query may take, seconds: Grafana's minimum interval of 15 s (the scrape interval)
/// and "nice" intervals above it.
const NICE_STEPS_S: &[i64] = &[15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

/// The step of a dashboard range query over `window_ms`: `window / 1100`, rounded up to the next nice
/// step, and at least 15 s (whole days beyond a day). Rounding up (Grafana's `roundInterval` rounds to
/// the nearest nice interval, which may give up to ~1.5× more points) keeps every panel within
/// [`MAX_DATA_POINTS`]: 1h → 15 s, 6h → 30 s, 24h → 2 m.
pub fn dashboard_step_ms(window_ms: i64) -> i64 {
    let ceil_div = |a: i64, b: i64| (a + b - 1) / b;
    let raw_ms = ceil_div(window_ms.max(1), MAX_DATA_POINTS);
    NICE_STEPS_S.iter().map(|s| s * 1000).find(|s| *s >= raw_ms).unwrap_or_else(|| ceil_div(raw_ms, 86_400_000) * 86_400_000)
}

/// The expressions of a rules file: one per line, blank lines and `#` comments skipped. A missing file
/// is an error naming the path looked for.
pub fn load_rules(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        // A relative path is looked for from the working directory: say where that was.
        let looked = match std::env::current_dir() {
            Ok(d) if path.is_relative() => format!(" (looked for {})", d.join(path).display()),
            _ => String::new(),
        };
        anyhow::anyhow!("cannot read the rules file {}{looked}: {e}; pass --rules PATH", path.display())
    })?;
    let rules: Vec<String> =
        text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string).collect();
    anyhow::ensure!(!rules.is_empty(), "the rules file {} holds no expressions", path.display());
    Ok(rules)
}

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Prometheus-API base URL, e.g. http://127.0.0.1:9090 (VictoriaMetrics: http://127.0.0.1:8428).
    #[arg(long)]
    pub url: String,
    /// Write the B2 fleet data first (remote-write generator in max mode), then query it.
    #[arg(long)]
    pub load: bool,
    /// --load: remote-write URL. Default: <url>/api/v1/write.
    #[arg(long)]
    pub write_url: Option<String>,
    /// --load: node_exporter targets (~1,200 series each): 100 or 1000 in B3.
    #[arg(long, default_value_t = 100)]
    pub targets: usize,
    /// --load: how much data (simulated time, one sample per series per 10 s).
    #[arg(long, default_value = "3h", value_parser = parse_duration)]
    pub backfill: Duration,
    /// --load: first sample's time, unix ms. Default: now minus --backfill, rounded down to the hour;
    /// printed in the command, pass it again to load the same data into another system.
    #[arg(long)]
    pub start_ms: Option<i64>,
    /// --load: remote-write protocol version, 1 or 2.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub proto: u8,
    /// --load: parallel senders.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// --load: seed of the generated values.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// --load: wait this long after loading before timing anything (the server's background work on
    /// the fresh data is not measured).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub settle: Duration,
    /// Evaluation time, unix ms. Default: the data's end, max(timestamp(node_load1)).
    #[arg(long)]
    pub time: Option<i64>,
    /// The alerting rules, one PromQL expression per line.
    #[arg(long, default_value = "../shared/bench/node-alert-rules.txt")]
    pub rules: PathBuf,
    /// Windows of the dashboard range queries, ending at the evaluation time.
    #[arg(long, value_delimiter = ',', default_value = "1h,6h,24h")]
    pub windows: Vec<String>,
    /// Query sets to run: rules, range.
    #[arg(long, value_delimiter = ',', default_value = "rules,range")]
    pub sets: Vec<String>,
    /// Timed runs per query, after one untimed warm-up.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Write each answer's canonical text to a file in this directory (for `diff -r` across systems).
    #[arg(long)]
    pub dump: Option<PathBuf>,
    /// Write one JSON line per query (set, query, window, median_ms, series, points, checksum).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Compare with a previous run's --out file: latency ratio and whether the answers are the same.
    #[arg(long)]
    pub compare: Option<PathBuf>,
    /// Send `nocache=1` with range queries, bypassing Tessera's and VictoriaMetrics' result caches
    /// (every run then measures evaluation; without it, runs after the first may be cache hits).
    #[arg(long)]
    pub nocache: bool,
    /// Per-request timeout.
    #[arg(long, default_value = "300s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// Largest answer accepted, MiB (fleet-wide range queries at 1,000 targets run to hundreds).
    #[arg(long, default_value_t = 2048)]
    pub max_body_mib: usize,
}

/// One query of a set.
#[derive(Debug, Clone)]
struct Query {
    set: &'static str,
    /// `r01`… for rules, the panel's name for range queries.
    name: String,
    expr: String,
    /// Range queries: the window as given (`6h`), its length and the step.
    window: Option<(String, i64, i64)>,
}

/// A measured query.
#[derive(Debug)]
struct Row {
    q: Query,
    times_ms: Vec<f64>,
    median_ms: f64,
    summary: Option<Summary>,
    /// A timed run's answer differed from the untimed one's.
    unstable: bool,
    error: Option<String>,
}

fn queries(args: &Args, rules: &[String], windows: &[(String, i64)]) -> Vec<Query> {
    let mut out = Vec::new();
    if args.sets.iter().any(|s| s == "rules") {
        for (i, r) in rules.iter().enumerate() {
            out.push(Query { set: "rules", name: format!("r{:02}", i + 1), expr: r.clone(), window: None });
        }
    }
    if args.sets.iter().any(|s| s == "range") {
        for (label, ms) in windows {
            for (name, expr) in DASHBOARD {
                out.push(Query {
                    set: "range",
                    name: name.to_string(),
                    expr: expr.to_string(),
                    window: Some((label.clone(), *ms, dashboard_step_ms(*ms))),
                });
            }
        }
    }
    out
}

/// Runs a query once: its latency and answer body (an error for a non-200 answer or I/O).
fn execute(api: &mut Api, q: &Query, eval_ms: i64) -> anyhow::Result<(f64, Vec<u8>)> {
    let (took, resp) = match &q.window {
        None => api.instant(&q.expr, eval_ms)?,
        Some((_, window_ms, step_ms)) => {
            // Grafana aligns start and end down to a multiple of the step.
            let end = eval_ms.div_euclid(*step_ms) * step_ms;
            let start = (eval_ms - window_ms).div_euclid(*step_ms) * step_ms;
            api.range(&q.expr, start, end, *step_ms)?
        }
    };
    if resp.status != 200 {
        let body = String::from_utf8_lossy(&resp.body[..resp.body.len().min(300)]).into_owned();
        anyhow::bail!("HTTP {}: {}", resp.status, body.trim());
    }
    Ok((took.as_secs_f64() * 1000.0, resp.body))
}

fn dump_file(dir: &Path, q: &Query) -> PathBuf {
    match &q.window {
        None => dir.join(format!("{}-{}.txt", q.set, q.name)),
        Some((w, _, _)) => dir.join(format!("{}-{}-{w}.txt", q.set, q.name)),
    }
}

fn measure(api: &mut Api, q: Query, eval_ms: i64, runs: usize, dump: Option<&Path>) -> Row {
    let mut row = Row { q, times_ms: Vec::new(), median_ms: f64::NAN, summary: None, unstable: false, error: None };
    let mut go = || -> anyhow::Result<()> {
        let (_, body) = execute(api, &row.q, eval_ms)?;
        let summary = match dump {
            Some(dir) => {
                let mut f = std::io::BufWriter::new(std::fs::File::create(dump_file(dir, &row.q))?);
                writeln!(f, "# {}", row.q.expr)?;
                if let Some((w, _, step)) = &row.q.window {
                    writeln!(f, "# window {w} step {} s", step / 1000)?;
                }
                writeln!(f, "# time {eval_ms}")?;
                let s = canonicalise(&body, Some(&mut f))?;
                f.flush()?;
                s
            }
            None => canonicalise(&body, None)?,
        };
        row.summary = Some(summary);
        for _ in 0..runs {
            let (ms, body) = execute(api, &row.q, eval_ms)?;
            row.times_ms.push(ms);
            if canonicalise(&body, None)?.checksum != summary.checksum {
                row.unstable = true;
            }
        }
        Ok(())
    };
    if let Err(e) = go() {
        row.error = Some(format!("{e:#}"));
    }
    row.median_ms = prom_query::median(&row.times_ms);
    row
}

fn window_of(row: &Row) -> &str {
    row.q.window.as_ref().map_or("", |w| w.0.as_str())
}

/// Milliseconds to the microsecond, for the JSON lines.
fn round_us(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

fn json_row(row: &Row, eval_ms: i64) -> Value {
    let mut v = json!({
        "set": row.q.set,
        "name": row.q.name,
        "query": row.q.expr,
        "window": row.q.window.as_ref().map(|w| w.0.clone()),
        "step_s": row.q.window.as_ref().map(|w| w.2 / 1000),
        "time_ms": eval_ms,
        "median_ms": if row.median_ms.is_finite() { json!(round_us(row.median_ms)) } else { Value::Null },
        "runs_ms": row.times_ms.iter().map(|t| round_us(*t)).collect::<Vec<_>>(),
    });
    if let Some(s) = &row.summary {
        v["series"] = json!(s.series);
        v["points"] = json!(s.points);
        v["checksum"] = json!(format!("{:016x}", s.checksum));
    }
    if let Some(e) = &row.error {
        v["error"] = json!(e);
    }
    v
}

/// A previous run's row, keyed by (set, query, window).
struct Other {
    median_ms: Option<f64>,
    checksum: Option<String>,
    time_ms: Option<i64>,
}

fn read_compare(path: &Path) -> anyhow::Result<BTreeMap<(String, String, String), Other>> {
    let text = std::fs::read_to_string(path).map_err(|e| anyhow::anyhow!("cannot read --compare file {}: {e}", path.display()))?;
    let mut out = BTreeMap::new();
    for (i, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let v: Value = serde_json::from_str(line).map_err(|e| anyhow::anyhow!("{}:{}: {e}", path.display(), i + 1))?;
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        out.insert(
            (s("set"), s("query"), s("window")),
            Other {
                median_ms: v.get("median_ms").and_then(Value::as_f64),
                checksum: v.get("checksum").and_then(Value::as_str).map(str::to_string),
                time_ms: v.get("time_ms").and_then(Value::as_i64),
            },
        );
    }
    Ok(out)
}

fn md(expr: &str) -> String {
    expr.replace('|', "\\|")
}

fn fmt_ms(ms: f64) -> String {
    if !ms.is_finite() {
        "-".to_string()
    } else if ms < 10.0 {
        format!("{ms:.2}")
    } else {
        format!("{ms:.1}")
    }
}

fn fmt_span(ms: i64) -> String {
    let s = ms / 1000;
    if s % 3600 == 0 {
        format!("{}h", s / 3600)
    } else if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else {
        format!("{}m{:02}s", s / 60, s % 60)
    }
}

/// The command that reproduces this run (with the start and evaluation time resolved).
fn command_line(args: &Args, start_ms: Option<i64>, eval_ms: i64) -> String {
    let mut c = format!("tessera-bench b3 --url {}", args.url);
    if args.load {
        c += " --load";
        if let Some(w) = &args.write_url {
            c += &format!(" --write-url {w}");
        }
        c += &format!(
            " --targets {} --backfill {}s --start-ms {} --proto {} --concurrency {} --seed {} --settle {}s",
            args.targets,
            args.backfill.as_secs(),
            start_ms.unwrap_or(0),
            args.proto,
            args.concurrency,
            args.seed,
            args.settle.as_secs()
        );
    }
    c += &format!(
        " --time {eval_ms} --rules {} --windows {} --sets {} --runs {}",
        args.rules.display(),
        args.windows.join(","),
        args.sets.join(","),
        args.runs
    );
    for (flag, p) in [("--dump", &args.dump), ("--out", &args.out), ("--compare", &args.compare)] {
        if let Some(p) = p {
            c += &format!(" {flag} {}", p.display());
        }
    }
    c
}

pub fn run(args: Args) -> anyhow::Result<()> {
    for s in &args.sets {
        anyhow::ensure!(s == "rules" || s == "range", "unknown query set {s:?} in --sets (rules, range)");
    }
    let mut windows = Vec::new();
    for w in &args.windows {
        let d = parse_duration(w).map_err(|e| anyhow::anyhow!("--windows: {e}"))?;
        anyhow::ensure!(d.as_millis() > 0, "--windows: an empty window {w:?}");
        windows.push((w.clone(), d.as_millis() as i64));
    }
    // Fail on a missing rules file before loading anything.
    let rules = if args.sets.iter().any(|s| s == "rules") { load_rules(&args.rules)? } else { Vec::new() };
    let compare = args.compare.as_deref().map(read_compare).transpose()?;
    if let Some(d) = &args.dump {
        std::fs::create_dir_all(d).map_err(|e| anyhow::anyhow!("cannot create --dump directory {}: {e}", d.display()))?;
    }
    let mut api = Api::new(&args.url, args.timeout, args.max_body_mib << 20)?;
    api.nocache = args.nocache;

    let mut hint_ms = prom_query::now_ms();
    let mut start_ms = None;
    if args.load {
        let backfill_ms = args.backfill.as_millis() as i64;
        let start = args.start_ms.unwrap_or_else(|| (prom_query::now_ms() - backfill_ms).div_euclid(3_600_000) * 3_600_000);
        let end = start + backfill_ms;
        start_ms = Some(start);
        let write_url = args.write_url.clone().unwrap_or_else(|| format!("{}/api/v1/write", args.url.trim_end_matches('/')));
        println!("b3: loading {} targets from {start} to {end} ms ({}) into {write_url}", args.targets, fmt_span(backfill_ms));
        remote_write::run(remote_write::Args {
            url: write_url,
            proto: args.proto,
            targets: args.targets,
            mode: remote_write::Mode::Max,
            // The run ends when the senders reach `end_ms`; this is only a safety net.
            duration: Duration::from_secs(24 * 3600),
            concurrency: args.concurrency,
            samples_per_request: 2000,
            lag: Duration::ZERO,
            start_ms: Some(start),
            backfill: args.backfill,
            end_ms: Some(end),
            churn_percent: 1.0,
            churn_interval: Duration::from_secs(600),
            scrape_interval: Duration::from_secs(10),
            job: "node".to_string(),
            seed: args.seed,
            progress_interval: Duration::from_secs(10),
            no_retry: false,
            metadata: true,
            headers: Vec::new(),
        })?;
        hint_ms = end;
        println!("b3: loaded; settling {} s", args.settle.as_secs());
        std::thread::sleep(args.settle);
    }

    let eval_ms = prom_query::evaluation_time_ms(&mut api, args.time, hint_ms)?;
    let instances = prom_query::points(&prom_query::success_json(
        &api.instant(&format!("count(count by (instance) ({}))", prom_query::END_MARKER_METRIC), eval_ms)?.1,
    )?)
    .first()
    .map_or(0.0, |p| p.2);
    let longest = windows.iter().map(|w| w.1).max().unwrap_or(3_600_000);
    let covered_ms = prom_query::data_start_ms(&mut api, eval_ms, longest)?.map(|s| eval_ms - s);
    println!(
        "b3: {} at time {eval_ms} ({}): {instances} instances with data; the data covers {} before it",
        args.url,
        secs(eval_ms),
        covered_ms.map_or("nothing".to_string(), |c| format!("≥ {}", fmt_span(c)))
    );
    let command = command_line(&args, start_ms, eval_ms);
    println!("b3: {command}");

    let qs = queries(&args, &rules, &windows);
    let mut rows = Vec::with_capacity(qs.len());
    for (i, q) in qs.into_iter().enumerate() {
        let row = measure(&mut api, q, eval_ms, args.runs, args.dump.as_deref());
        eprintln!(
            "[{}] {} {} {}: {} ms{}",
            i + 1,
            row.q.set,
            row.q.name,
            window_of(&row),
            fmt_ms(row.median_ms),
            row.error.as_deref().map_or(String::new(), |e| format!(" ERROR {e}"))
        );
        rows.push(row);
    }

    if let Some(path) = &args.out {
        let mut f = std::io::BufWriter::new(
            std::fs::File::create(path).map_err(|e| anyhow::anyhow!("cannot create --out file {}: {e}", path.display()))?,
        );
        for r in &rows {
            writeln!(f, "{}", json_row(r, eval_ms))?;
        }
        f.flush()?;
    }

    // Per query.
    println!();
    println!("| query | window | step | expression | median ms | series | points | checksum |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let step = r.q.window.as_ref().map_or(String::new(), |w| format!("{} s", w.2 / 1000));
        let answer = match (&r.summary, &r.error) {
            (_, Some(e)) => format!("- | - | ERROR {} ", md(e)),
            (Some(s), None) => {
                format!("{} | {} | {:016x}{}", s.series, s.points, s.checksum, if r.unstable { " (UNSTABLE)" } else { "" })
            }
            (None, None) => "- | - | -".to_string(),
        };
        println!("| {} {} | {} | {step} | `{}` | {} | {answer} |", r.q.set, r.q.name, window_of(r), md(&r.q.expr), fmt_ms(r.median_ms));
    }

    // Per set: the rules, each window, all windows.
    let mut groups: Vec<(String, Vec<&Row>)> = Vec::new();
    if args.sets.iter().any(|s| s == "rules") {
        groups.push(("rules (instant)".to_string(), rows.iter().filter(|r| r.q.set == "rules").collect()));
    }
    if args.sets.iter().any(|s| s == "range") {
        for (label, ms) in &windows {
            let clipped = match covered_ms {
                Some(c) if c + dashboard_step_ms(*ms) < *ms => format!(", data covers {}", fmt_span(c)),
                _ => String::new(),
            };
            let name = format!("range {label} (step {} s{clipped})", dashboard_step_ms(*ms) / 1000);
            groups.push((name, rows.iter().filter(|r| r.q.set == "range" && window_of(r) == label).collect()));
        }
        if windows.len() > 1 {
            groups.push(("range, all windows".to_string(), rows.iter().filter(|r| r.q.set == "range").collect()));
        }
    }
    println!();
    println!("| set | queries | mean of medians ms | p99 ms (all timed runs) | errors |");
    println!("|---|---|---|---|---|");
    for (name, g) in &groups {
        let ok: Vec<&&Row> = g.iter().filter(|r| r.error.is_none()).collect();
        let mean = ok.iter().map(|r| r.median_ms).sum::<f64>() / ok.len().max(1) as f64;
        let mut all: Vec<f64> = ok.iter().flat_map(|r| r.times_ms.iter().copied()).collect();
        all.sort_by(f64::total_cmp);
        println!(
            "| {name} | {} | {} | {} | {} |",
            g.len(),
            if ok.is_empty() { "-".to_string() } else { fmt_ms(mean) },
            fmt_ms(percentile(&all, 0.99)),
            g.len() - ok.len()
        );
    }

    if let (Some(other), Some(path)) = (&compare, &args.compare) {
        println!();
        println!("| query | window | expression | ms here | ms in {} | there / here | answer |", path.display());
        println!("|---|---|---|---|---|---|---|");
        let (mut same, mut differ, mut missing) = (0, 0, 0);
        let mut other_time = None;
        for r in &rows {
            let key = (r.q.set.to_string(), r.q.expr.clone(), window_of(r).to_string());
            let Some(o) = other.get(&key) else {
                missing += 1;
                println!("| {} {} | {} | `{}` | {} | - | - | not in the file |", r.q.set, r.q.name, window_of(r), md(&r.q.expr), fmt_ms(r.median_ms));
                continue;
            };
            other_time = other_time.or(o.time_ms);
            let here = r.summary.map(|s| format!("{:016x}", s.checksum));
            let verdict = match (&here, &o.checksum) {
                (Some(a), Some(b)) if a == b => {
                    same += 1;
                    "same"
                }
                (Some(_), Some(_)) => {
                    differ += 1;
                    "DIFFERENT"
                }
                _ => {
                    missing += 1;
                    "error on one side"
                }
            };
            let there = o.median_ms.unwrap_or(f64::NAN);
            println!(
                "| {} {} | {} | `{}` | {} | {} | {} | {verdict} |",
                r.q.set,
                r.q.name,
                window_of(r),
                md(&r.q.expr),
                fmt_ms(r.median_ms),
                fmt_ms(there),
                if there.is_finite() && r.median_ms > 0.0 { format!("{:.2}x", there / r.median_ms) } else { "-".to_string() }
            );
        }
        println!("\nanswers compared with {}: {same} same, {differ} different, {missing} not comparable", path.display());
        if let Some(t) = other_time.filter(|t| *t != eval_ms) {
            println!("note: that run evaluated at time {t}, this one at {eval_ms}; answers carry their timestamps, so they differ");
        }
    }

    let errors = rows.iter().filter(|r| r.error.is_some()).count();
    let unstable = rows.iter().filter(|r| r.unstable).count();
    println!(
        "\nmedians of {} timed runs per query after one untimed run, at time {eval_ms}; {} queries, {errors} failed, {unstable} with answers that changed between runs",
        args.runs,
        rows.len()
    );
    println!("command: {command}");
    anyhow::ensure!(errors == 0, "{errors} queries failed (see the table)");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dashboard_steps_are_nice_and_keep_panels_under_1100_points() {
        assert_eq!(dashboard_step_ms(3_600_000), 15_000);
        assert_eq!(dashboard_step_ms(6 * 3_600_000), 30_000);
        assert_eq!(dashboard_step_ms(24 * 3_600_000), 120_000);
        assert_eq!(dashboard_step_ms(5 * 60_000), 15_000);
        assert_eq!(dashboard_step_ms(12 * 3_600_000), 60_000);
        assert_eq!(dashboard_step_ms(7 * 86_400_000), 600_000);
        assert_eq!(dashboard_step_ms(365 * 86_400_000), 43_200_000);
        assert_eq!(dashboard_step_ms(1000 * 86_400_000), 86_400_000);
        assert_eq!(dashboard_step_ms(10_000 * 86_400_000), 10 * 86_400_000);
        for w in [1, 7_000_000, 3_600_000 * 3, 86_400_000 * 30, 86_400_000 * 1000] {
            let s = dashboard_step_ms(w);
            assert!(s >= 15_000 && w / s <= MAX_DATA_POINTS, "window {w} step {s}");
        }
    }

    #[test]
    fn a_missing_rules_file_is_named() {
        let err = load_rules(Path::new("no/such/dir/rules.txt")).expect_err("missing").to_string();
        assert!(err.contains("no/such/dir/rules.txt"), "{err}");
        assert!(err.contains("--rules"), "{err}");
        let cwd = std::env::current_dir().expect("cwd");
        assert!(err.contains(&format!("looked for {}", cwd.join("no/such/dir/rules.txt").display())), "{err}");
    }

    #[test]
    fn rules_files_skip_blank_lines_and_comments() {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("r.txt");
        std::fs::write(&p, "# alerting rules\nup == 0\n\n  rate(x[5m]) > 1  \n").expect("write");
        assert_eq!(load_rules(&p).expect("rules"), vec!["up == 0", "rate(x[5m]) > 1"]);
        std::fs::write(&p, "\n# nothing\n").expect("write");
        assert!(load_rules(&p).is_err());
    }

    #[test]
    fn the_shared_rules_file_has_35_rules() {
        let Some(p) = tessera_model::fixtures::shared("bench/node-alert-rules.txt", "the_shared_rules_file_has_35_rules") else {
            return;
        };
        assert_eq!(load_rules(&p).expect("rules").len(), 35);
    }

    #[test]
    fn spans_print_compactly() {
        assert_eq!(fmt_span(3 * 3_600_000), "3h");
        assert_eq!(fmt_span(3_600_000 + 30 * 60_000), "1h30m");
        assert_eq!(fmt_span(59 * 60_000 + 50_000), "59m50s");
    }
}
