//! `tessera-bench promql-diff`: a randomised differential tester of Tessera's PromQL against Prometheus.
//!
//! It starts both servers on loopback in fresh temporary directories ([`servers`]), writes the same
//! fixed data set to both by remote write 1.0 ([`data`]), generates seeded random PromQL ([`exprgen`]),
//! runs every expression as an instant and as a range query against both, and compares the answers
//! ([`compare`]). It prints every disagreement with its expression and a short diff, a summary, and
//! the command line that reproduces the run; it fails when any hard disagreement remains after the
//! documented, accepted differences ([`exprgen::Known`]) are set apart.
//!
//! Everything random derives from `--seed`; the data's time axis ends at `--data-end-ms` (default: a
//! few minutes before now, printed), so `--seed`, `--count` and `--data-end-ms` reproduce a run exactly
//! and `--only N` re-runs expression N of it alone. `--expr` runs given expressions instead.

pub mod compare;
pub mod data;
pub mod exprgen;
pub mod servers;

use crate::http::Client;
use crate::nodegen::Rng;
use compare::{compare, Answer};
use exprgen::{Expr, Gen, Known, Order, Type};
use servers::Server;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tessera_protocol::remote_write::{encode_v1, WriteSeries, CONTENT_TYPE_V1, HEADER_VERSION, VERSION_V1};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Tessera's binary. Default: `tessera` next to this executable (target/<profile>/tessera).
    #[arg(long)]
    pub tessera_bin: Option<PathBuf>,
    /// Prometheus' binary (3.x).
    #[arg(long, env = "PROMETHEUS_BIN")]
    pub prometheus_bin: Option<PathBuf>,
    /// Seed of the expression generator.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Number of generated expressions.
    #[arg(long, default_value_t = 500)]
    pub count: usize,
    /// Run only the expressions with these numbers (1-based) of the seeded sequence (repeatable).
    #[arg(long)]
    pub only: Vec<usize>,
    /// Run these expressions instead of generated ones (repeatable).
    #[arg(long)]
    pub expr: Vec<String>,
    /// Evaluation time of `--expr` instant queries (unix seconds). Default: the data's end.
    #[arg(long)]
    pub time: Option<f64>,
    /// Last sample time of the data set (unix ms). Default: now minus 5 minutes, rounded to a minute.
    #[arg(long)]
    pub data_end_ms: Option<i64>,
    /// Stop at the first hard disagreement.
    #[arg(long)]
    pub fail_fast: bool,
    /// Print every expression and both answers' summaries, and soft differences in full.
    #[arg(long)]
    pub verbose: bool,
}

/// One disagreement.
#[derive(Debug, Clone)]
pub struct Disagreement {
    /// 1-based number of the expression in the run.
    pub n: usize,
    pub expr: String,
    /// `instant t=…` or `range start=… end=… step=…`.
    pub query: String,
    pub diff: String,
    /// Documented differences the expression may run into (empty: a hard disagreement).
    pub known: Vec<Known>,
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    pub expressions: usize,
    /// Queries run against both servers (instant and range).
    pub queries: usize,
    pub agreements: usize,
    pub hard: Vec<Disagreement>,
    /// Disagreements on expressions that may run into a documented difference.
    pub known: Vec<Disagreement>,
    /// Both failed alike but with different messages.
    pub messages: Vec<Disagreement>,
    /// Warnings/infos differ (values agree).
    pub annotations: Vec<Disagreement>,
    /// Queries whose warnings/infos differ only by Prometheus' positions (and so repetitions).
    pub positions_only: usize,
    /// Agreements where both answers were empty (a vector or matrix of no series): a measure of how
    /// much of the run exercised only the empty path.
    pub both_empty: usize,
    pub command: String,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let report = run_diff(&args)?;
    print_report(&report, args.verbose);
    if !report.hard.is_empty() {
        anyhow::bail!("{} hard disagreement(s) between Tessera and Prometheus", report.hard.len());
    }
    Ok(())
}

/// The `tessera` binary next to the running executable (target/<profile>/tessera), also from a test
/// binary in target/<profile>/deps.
pub fn default_tessera_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let mut dir = exe.parent()?;
    if dir.ends_with("deps") {
        dir = dir.parent()?;
    }
    let bin = dir.join(format!("tessera{}", std::env::consts::EXE_SUFFIX));
    bin.exists().then_some(bin)
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// `1700000000.123`
fn secs(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// A query to run against both servers.
struct Case {
    n: usize,
    expr: Expr,
    instant_ms: i64,
    range: (i64, i64, i64),
}

/// Evaluation times for one expression: an instant within (or just past) the data, and a range window
/// inside it with a 15–60 s step.
fn times(rng: &mut Rng, start_ms: i64, end_ms: i64) -> (i64, (i64, i64, i64)) {
    let lo = start_ms + 5 * 60_000;
    let hi = end_ms + 8 * 60_000;
    let mut t = lo + (rng.next_u64() % ((hi - lo) as u64 / 1000)) as i64 * 1000;
    if rng.f64() < 0.3 {
        t += (rng.next_u64() % 1000) as i64;
    }
    let step_s = [15, 20, 30, 30, 45, 60, 60][(rng.next_u64() % 7) as usize];
    let len_s = 300 + (rng.next_u64() % 2100) as i64;
    let rs = start_ms + (rng.next_u64() % ((end_ms - start_ms) as u64 / 1000 - len_s as u64 + 300)) as i64 * 1000;
    (t, (rs, rs + len_s * 1000, step_s * 1000))
}

/// Runs the comparison and returns what it found (printing disagreements as they occur).
pub fn run_diff(args: &Args) -> anyhow::Result<Report> {
    let tessera_bin = match &args.tessera_bin {
        Some(b) => b.clone(),
        None => default_tessera_bin()
            .ok_or_else(|| anyhow::anyhow!("no tessera binary next to this executable; build it (cargo build -p tessera-server) or pass --tessera-bin"))?,
    };
    let prometheus_bin =
        args.prometheus_bin.clone().ok_or_else(|| anyhow::anyhow!("no Prometheus binary: pass --prometheus-bin or set PROMETHEUS_BIN"))?;
    let end_ms = args.data_end_ms.unwrap_or_else(|| (now_ms() - 5 * 60_000) / 60_000 * 60_000);
    let start_ms = end_ms - (data::POINTS - 1) * data::STEP_MS;

    let mut command = format!(
        "tessera-bench promql-diff --tessera-bin {} --prometheus-bin {} --data-end-ms {end_ms}",
        tessera_bin.display(),
        prometheus_bin.display()
    );
    if args.expr.is_empty() {
        command += &format!(" --seed {} --count {}", args.seed, args.count);
        for n in &args.only {
            command += &format!(" --only {n}");
        }
    } else {
        for e in &args.expr {
            command += &format!(" --expr '{}'", e.replace('\'', "'\\''"));
        }
        if let Some(t) = args.time {
            command += &format!(" --time {t}");
        }
    }
    println!("promql-diff: {command}");

    // Generate first: the sequence is the same whatever --only selects.
    let mut cases = Vec::new();
    let mut g = Gen::new(args.seed, start_ms / 1000, end_ms / 1000);
    if args.expr.is_empty() {
        for n in 1..=args.count {
            let expr = g.expr();
            let (instant_ms, range) = times(g.rng(), start_ms, end_ms);
            if args.only.is_empty() || args.only.contains(&n) {
                cases.push(Case { n, expr, instant_ms, range });
            }
        }
    } else {
        for (i, text) in args.expr.iter().enumerate() {
            let expr = Expr { text: text.clone(), ty: Type::Vector, order: order_of(text), known: Vec::new() };
            let instant_ms = args.time.map_or(end_ms, |t| (t * 1000.0).round() as i64);
            let range = (end_ms - 30 * 60_000, end_ms, 60_000);
            cases.push(Case { n: i + 1, expr, instant_ms, range });
        }
    }

    let mut tessera = Server::tessera(&tessera_bin)?;
    let mut prometheus = Server::prometheus(&prometheus_bin)?;
    tessera.wait_ready(Duration::from_secs(60))?;
    prometheus.wait_ready(Duration::from_secs(120))?;
    let started = Instant::now();
    let set = data::dataset(end_ms);
    for s in [&tessera, &prometheus] {
        ingest(s, &set)?;
    }
    println!(
        "promql-diff: {} series, {} samples written to both ({} and {}); data {}..{}",
        set.len(),
        set.iter().map(|s| s.1.len()).sum::<usize>(),
        tessera.addr,
        prometheus.addr,
        secs(start_ms),
        secs(end_ms)
    );

    let timeout = Duration::from_secs(150);
    let mut tc = tessera.client(timeout)?;
    let mut pc = prometheus.client(timeout)?;
    let mut report = Report { command, ..Report::default() };
    'cases: for case in &cases {
        report.expressions += 1;
        let (rs, re, step) = case.range;
        let queries = [
            (format!("instant t={}", secs(case.instant_ms)), "/api/v1/query", vec![("time", secs(case.instant_ms))], true),
            (
                format!("range start={} end={} step={}s", secs(rs), secs(re), step / 1000),
                "/api/v1/query_range",
                vec![("start", secs(rs)), ("end", secs(re)), ("step", format!("{}", step / 1000))],
                false,
            ),
        ];
        for (what, path, params, instant) in queries {
            let t = query(&mut tc, path, &case.expr.text, &params).map_err(|e| {
                anyhow::anyhow!("tessera: {e} (expression {}: {}); its log:\n{}", case.n, case.expr.text, tessera.log_tail())
            })?;
            let p = query(&mut pc, path, &case.expr.text, &params)
                .map_err(|e| anyhow::anyhow!("prometheus: {e} (expression {}: {})", case.n, case.expr.text))?;
            report.queries += 1;
            let o = compare(&t, &p, case.expr.order, instant);
            if args.verbose {
                println!("#{} {what}: {}\n    tessera {} | prometheus {}", case.n, case.expr.text, t.summary(), p.summary());
            }
            let d = |diff: String| Disagreement {
                n: case.n,
                expr: case.expr.text.clone(),
                query: what.clone(),
                diff,
                known: case.expr.known.clone(),
            };
            if !o.hard.is_empty() {
                let mut dis = d(o.hard.join("\n      "));
                if dis.known.is_empty() && prometheus_is_nondeterministic(&mut pc, path, &case.expr.text, &params, &p, case.expr.order, instant)? {
                    dis.known.push(Known::UpstreamNondeterministic);
                }
                if dis.known.is_empty() {
                    println!("HARD #{} [{}] {}\n      {}", dis.n, dis.query, dis.expr, dis.diff);
                    report.hard.push(dis);
                    if args.fail_fast {
                        break 'cases;
                    }
                } else {
                    report.known.push(dis);
                }
                continue;
            }
            report.agreements += 1;
            report.positions_only += usize::from(o.positions_only);
            report.both_empty += usize::from(t.is_empty_result() && p.is_empty_result());
            if let Some(m) = o.message {
                report.messages.push(d(m));
            }
            if let Some(a) = o.annotations {
                report.annotations.push(d(a));
            }
        }
    }
    println!("promql-diff: {} queries in {:.1} s", report.queries, started.elapsed().as_secs_f64());
    Ok(report)
}

/// Asks Prometheus the same query a few more times: true when one of its answers differs from `first`
/// (then the disagreement says nothing about Tessera).
fn prometheus_is_nondeterministic(
    pc: &mut Client,
    path: &str,
    expr: &str,
    params: &[(&str, String)],
    first: &Answer,
    order: Order,
    instant: bool,
) -> anyhow::Result<bool> {
    for _ in 0..5 {
        let again = query(pc, path, expr, params)?;
        if !compare(&again, first, order, instant).hard.is_empty() {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The order semantics of a hand-written expression (outermost call only).
fn order_of(text: &str) -> Order {
    let t = text.trim();
    let outer = t.split(|c: char| c == '(' || c.is_whitespace()).next().unwrap_or("");
    match outer {
        "sort" | "sort_desc" => Order::ByValue,
        "sort_by_label" | "sort_by_label_desc" => Order::ByLabels,
        "topk" | "bottomk" if !t.contains(" by ") && !t.contains(" without ") && !t.contains(")by") => Order::ByValue,
        _ => Order::Unordered,
    }
}

/// Writes the data set: every series, in time slices of 5 minutes (so each request keeps every
/// series in time order and the whole stream moves forward together).
fn ingest(server: &Server, set: &[(tessera_model::Labels, Vec<tessera_model::Sample>)]) -> anyhow::Result<()> {
    let mut client = server.client(Duration::from_secs(30))?;
    let slice = 20usize;
    let mut from = 0usize;
    let max_len = set.iter().map(|s| s.1.len()).max().unwrap_or(0);
    let first_t = set.iter().filter_map(|s| s.1.first().map(|x| x.t)).min().unwrap_or(0);
    while from < max_len {
        let lo = first_t + from as i64 * data::STEP_MS;
        let hi = lo + slice as i64 * data::STEP_MS;
        let batch: Vec<WriteSeries> = set
            .iter()
            .filter_map(|(l, s)| {
                let pts: Vec<_> = s.iter().copied().filter(|x| x.t >= lo && x.t < hi).collect();
                (!pts.is_empty()).then(|| WriteSeries::new(l.clone(), pts))
            })
            .collect();
        from += slice;
        if batch.is_empty() {
            continue;
        }
        let body = snap::raw::Encoder::new().compress_vec(&encode_v1(&batch, &[]))?;
        let r = client.request(
            "POST",
            "/api/v1/write",
            &[("Content-Encoding", "snappy"), ("Content-Type", CONTENT_TYPE_V1), (HEADER_VERSION, VERSION_V1)],
            &body,
        )?;
        anyhow::ensure!(
            (200..300).contains(&r.status),
            "{} refused remote write: HTTP {} {}",
            server.name,
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    }
    Ok(())
}

fn query(client: &mut Client, path: &str, expr: &str, params: &[(&str, String)]) -> anyhow::Result<Answer> {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("query", expr);
    for (k, v) in params {
        form.append_pair(k, v);
    }
    let body = form.finish();
    let r = client.request("POST", path, &[("Content-Type", "application/x-www-form-urlencoded")], body.as_bytes())?;
    Ok(Answer::parse(r.status, &r.body))
}

/// Prints the summary: counts, every hard disagreement, and the other classes (in full with `verbose`).
pub fn print_report(r: &Report, verbose: bool) {
    println!("\n=== promql-diff summary ===");
    println!("command: {}", r.command);
    println!(
        "expressions: {}, queries: {} (instant + range), agreements: {} (of which both empty: {}), hard disagreements: {}, \
         known (allow-listed): {}, error-message differences: {}, annotation differences: {} (+{} by Prometheus' positions only)",
        r.expressions,
        r.queries,
        r.agreements,
        r.both_empty,
        r.hard.len(),
        r.known.len(),
        r.messages.len(),
        r.annotations.len(),
        r.positions_only
    );
    let section = |title: &str, ds: &[Disagreement], limit: usize| {
        if ds.is_empty() {
            return;
        }
        println!("\n--- {title} ({}) ---", ds.len());
        for d in ds.iter().take(limit) {
            let known: Vec<&str> = d.known.iter().map(|k| k.describe()).collect();
            let k = if known.is_empty() { String::new() } else { format!("\n      known: {}", known.join("; ")) };
            println!("#{} [{}] {}\n      {}{k}", d.n, d.query, d.expr, d.diff);
        }
        if ds.len() > limit {
            println!("… {} more (--verbose shows all)", ds.len() - limit);
        }
    };
    let soft = if verbose { usize::MAX } else { 10 };
    section("hard disagreements", &r.hard, usize::MAX);
    section("known differences (allow-listed)", &r.known, soft);
    section("error messages differ (soft)", &r.messages, soft);
    section("warnings/infos differ (soft)", &r.annotations, soft);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn evaluation_times_stay_in_and_around_the_data() {
        let mut rng = Rng::new(3);
        let (s, e) = (1_000_000_000i64, 1_000_000_000 + 3_600_000);
        for _ in 0..10_000 {
            let (t, (rs, re, step)) = times(&mut rng, s, e);
            assert!(t >= s && t <= e + 8 * 60_000);
            assert!(rs >= s && re <= e + 300_000 && re > rs && step >= 15_000);
        }
    }

    #[test]
    fn order_of_hand_written_expressions() {
        assert_eq!(order_of("sort(x)"), Order::ByValue);
        assert_eq!(order_of("topk(3, x)"), Order::ByValue);
        assert_eq!(order_of("topk by (a) (3, x)"), Order::Unordered);
        assert_eq!(order_of("sort_by_label(x, \"a\")"), Order::ByLabels);
        assert_eq!(order_of("sum(x)"), Order::Unordered);
        assert_eq!(secs(1_700_000_000_005), "1700000000.005");
    }
}
