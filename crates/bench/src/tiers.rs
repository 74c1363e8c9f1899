//! B5, the downsampling half: long-range dashboard queries (30 days at a 1 h step over ~10,000
//! series by default) answered from a downsampling tier against the same queries over raw data
//! (`raw=1`), on one server, with the answers compared and the tiers' bytes against the raw blocks'.
//!
//! The harness backfills the fleet for `--days` (unless `--no-load`), waits until the server's tier
//! and block figures in `/metrics` stop changing (the background has computed the tiers from the
//! finished blocks), then runs each query `--runs` times both ways with `nocache=1`, interleaved. The
//! server must run with a tier that fits the step (`--storage.tsdb.downsampling=1h`, say) and a raw
//! retention longer than `--days`.

use crate::prom_query::{self, median, Api};
use crate::remote_write::{self, parse_duration};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Prometheus-API base URL of a Tessera server with downsampling on.
    #[arg(long)]
    pub url: String,
    /// Remote-write URL for the fleet. Default: <url>/api/v1/write.
    #[arg(long)]
    pub write_url: Option<String>,
    /// Simulated node_exporter targets (~1,200 series each).
    #[arg(long, default_value_t = 9)]
    pub targets: usize,
    /// Days of data to backfill and to query.
    #[arg(long, default_value_t = 30)]
    pub days: i64,
    /// Scrape interval of the backfilled fleet.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub scrape_interval: Duration,
    /// The queries' step.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub step: Duration,
    /// Runs of each query each way.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Query what the server holds (no backfill).
    #[arg(long)]
    pub no_load: bool,
    /// Parallel remote-write senders.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// How long to wait for the server's tiers to settle after the backfill.
    #[arg(long, default_value = "30m", value_parser = parse_duration)]
    pub settle: Duration,
    /// Per-request timeout.
    #[arg(long, default_value = "600s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// Long-range panels: windows equal to the step, so that tier answers are exact and comparable; the
/// last one (an instant selector, 5m lookback against 1h buckets) is approximated by design.
const PANELS: &[(&str, &str)] = &[
    ("cpu_busy", r#"sum by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[1h]))"#),
    ("net_rx", "sum by (instance) (increase(node_network_receive_bytes_total[1h]))"),
    ("disk_io", "rate(node_disk_io_time_seconds_total[1h])"),
    ("load1_avg", "avg_over_time(node_load1[1h])"),
    ("mem_min", "min_over_time(node_memory_MemAvailable_bytes[1h])"),
    ("load1", "node_load1"),
];

fn metric(api: &mut Api, name: &str) -> Option<f64> {
    let text = String::from_utf8_lossy(&api.client_get("/metrics").ok()?.body).into_owned();
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cmdline: Vec<String> = std::env::args().collect();
    let step_ms = a.step.as_millis() as i64;
    anyhow::ensure!(step_ms > 0 && a.days > 0 && a.runs >= 1, "--step, --days and --runs must be positive");
    let now = prom_query::now_ms();
    let end = now - now.rem_euclid(step_ms);
    let start = end - a.days * 86_400_000;
    let mut api = Api::new(&a.url, a.timeout, 2048 << 20)?;
    if !a.no_load {
        let write_url = a.write_url.clone().unwrap_or_else(|| format!("{}/api/v1/write", a.url.trim_end_matches('/')));
        println!("b5-tiers: backfilling {} targets over {} days ({} s scrapes) into {write_url}", a.targets, a.days, a.scrape_interval.as_secs());
        let t0 = Instant::now();
        remote_write::run(remote_write::Args {
            url: write_url,
            proto: 1,
            targets: a.targets,
            mode: remote_write::Mode::Max,
            duration: Duration::from_secs(7 * 24 * 3600),
            concurrency: a.concurrency,
            samples_per_request: 2000,
            lag: Duration::ZERO,
            start_ms: Some(start - 600_000),
            backfill: Duration::from_secs(0),
            end_ms: Some(now),
            churn_percent: 0.0,
            churn_interval: Duration::from_secs(24 * 3600),
            scrape_interval: a.scrape_interval,
            job: "node".to_string(),
            seed: 1,
            progress_interval: Duration::from_secs(60),
            no_retry: false,
            metadata: false,
            headers: Vec::new(),
        })?;
        println!("b5-tiers: backfill took {:.0} s", t0.elapsed().as_secs_f64());
    }
    // Wait until blocks and tiers stop changing.
    let t0 = Instant::now();
    let mut last = (f64::NAN, f64::NAN, f64::NAN);
    let mut stable_since = Instant::now();
    loop {
        let cur = (
            metric(&mut api, "tessera_tsdb_blocks").unwrap_or(f64::NAN),
            metric(&mut api, "tessera_tsdb_tier_blocks").unwrap_or(f64::NAN),
            metric(&mut api, "tessera_tsdb_tier_bytes").unwrap_or(f64::NAN),
        );
        if cur != last {
            last = cur;
            stable_since = Instant::now();
        }
        if cur.1 > 0.0 && stable_since.elapsed() >= Duration::from_secs(20) {
            break;
        }
        anyhow::ensure!(
            t0.elapsed() < a.settle,
            "tiers did not settle within {:?} (blocks, tier blocks, tier bytes = {cur:?}); is --storage.tsdb.downsampling set?",
            a.settle
        );
        std::thread::sleep(Duration::from_secs(2));
    }
    let raw_bytes = metric(&mut api, "tessera_tsdb_disk_bytes").unwrap_or(f64::NAN);
    let tier_bytes = metric(&mut api, "tessera_tsdb_tier_bytes").unwrap_or(f64::NAN);
    let series = metric(&mut api, "tessera_tsdb_head_series").unwrap_or(f64::NAN);
    println!(
        "b5-tiers: settled after {:.0} s: raw blocks {:.1} MiB, tiers {:.2} MiB = {:.2}% of raw; {series} head series",
        t0.elapsed().as_secs_f64(),
        raw_bytes / 1048576.0,
        tier_bytes / 1048576.0,
        100.0 * tier_bytes / raw_bytes
    );

    let (start_s, end_s, step_s) = (prom_query::secs(start), prom_query::secs(end), prom_query::secs(step_ms));
    println!();
    println!("| panel | query | raw=1, median ms | tier, median ms | ratio | tier | answers |");
    println!("|---|---|---|---|---|---|---|");
    let mut ratios = Vec::new();
    for (name, expr) in PANELS {
        let (mut raw_ms, mut tier_ms) = (Vec::new(), Vec::new());
        let (mut raw_v, mut tier_v) = (serde_json::Value::Null, serde_json::Value::Null);
        for _ in 0..a.runs {
            for forced_raw in [true, false] {
                let mut p = vec![("query", *expr), ("start", &start_s), ("end", &end_s), ("step", &step_s), ("nocache", "1"), ("trace", "1")];
                if forced_raw {
                    p.push(("raw", "1"));
                }
                let (d, resp) = api.post_form("/api/v1/query_range", &p)?;
                let v = prom_query::success_json(&resp).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
                if forced_raw {
                    raw_ms.push(d.as_secs_f64() * 1000.0);
                    raw_v = v;
                } else {
                    tier_ms.push(d.as_secs_f64() * 1000.0);
                    tier_v = v;
                }
            }
        }
        let (r, t) = (median(&raw_ms), median(&tier_ms));
        ratios.push(r / t);
        let (pr, pt) = (prom_query::points(&raw_v), prom_query::points(&tier_v));
        let close = |x: f64, y: f64| x == y || (x.is_nan() && y.is_nan()) || (x - y).abs() <= 1e-9 * x.abs().max(y.abs());
        let equal = pr.len() == pt.len() && pr.iter().zip(&pt).all(|(x, y)| x.0 == y.0 && x.1 == y.1 && close(x.2, y.2));
        let answers = if equal {
            format!("equal within 1e-9 ({} points)", pr.len())
        } else if tier_v.get("infos").is_some() {
            "approximated (said in infos)".to_string()
        } else {
            "DIFFERENT".to_string()
        };
        println!(
            "| {name} | `{}` | {r:.1} | {t:.2} | {:.0}× | {} | {answers} |",
            expr.replace('|', "\\|"),
            r / t,
            tier_v["trace"]["tier"].as_str().unwrap_or("raw")
        );
    }
    println!();
    println!("median of per-panel ratios: {:.0}×; tiers cost {:.2}% of the raw blocks' bytes", median(&ratios), 100.0 * tier_bytes / raw_bytes);
    println!("command: {}", cmdline.join(" "));
    Ok(())
}
