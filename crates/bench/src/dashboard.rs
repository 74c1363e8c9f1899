//! B5, the result cache's half: a Grafana dashboard refreshing every 10 s with a moving end, while the
//! fleet keeps writing in real time.
//!
//! The harness backfills the fleet for the dashboard's window, keeps a real-time writer running (remote
//! write, one scrape per target per interval), and then, every `--refresh`, issues the first `--panels`
//! panels of [`crate::query_latency::DASHBOARD`] over `[end - window, end]`, `end` being now aligned down to
//! the step as Grafana aligns it. Each panel is asked twice per refresh: as a dashboard asks (the result
//! cache in play, `trace=1` to read what the cache answered) and with `nocache=1` (evaluated whole).
//! Reported: the share of steps served from the cache, the median latency of both forms and their
//! ratio (refreshes after the first), and the cache's bytes against its bound.

use crate::prom_query::{self, Api, median};
use crate::query_latency::DASHBOARD;
use crate::remote_write::{self, parse_duration};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Prometheus-API base URL, e.g. http://127.0.0.1:9090.
    #[arg(long)]
    pub url: String,
    /// Remote-write URL for the fleet. Default: <url>/api/v1/write.
    #[arg(long)]
    pub write_url: Option<String>,
    /// Simulated node_exporter targets (~1,200 series each).
    #[arg(long, default_value_t = 100)]
    pub targets: usize,
    /// The dashboard's time range.
    #[arg(long, default_value = "1h", value_parser = parse_duration)]
    pub window: Duration,
    /// The panels' step.
    #[arg(long, default_value = "15s", value_parser = parse_duration)]
    pub step: Duration,
    /// Time between refreshes.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub refresh: Duration,
    /// Number of refreshes.
    #[arg(long, default_value_t = 30)]
    pub refreshes: usize,
    /// Panels of the dashboard (the first N of B3's panel set).
    #[arg(long, default_value_t = 6)]
    pub panels: usize,
    /// Query what the server holds (no backfill, no live writer).
    #[arg(long)]
    pub no_load: bool,
    /// Parallel remote-write senders.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// How far behind the wall clock the real-time writer's samples arrive (a lagging sender).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub writer_lag: Duration,
    /// Per-request timeout.
    #[arg(long, default_value = "300s", value_parser = parse_duration)]
    pub timeout: Duration,
}

fn writer_args(a: &Args, url: &str, mode: remote_write::Mode, start_ms: Option<i64>, end_ms: Option<i64>, run: Duration) -> remote_write::Args {
    remote_write::Args {
        url: url.to_string(),
        proto: 1,
        targets: a.targets,
        mode,
        duration: run,
        concurrency: a.concurrency,
        samples_per_request: 2000,
        lag: if mode == remote_write::Mode::Steady { a.writer_lag } else { Duration::ZERO },
        start_ms,
        backfill: a.window + Duration::from_secs(600),
        end_ms,
        churn_percent: 1.0,
        churn_interval: Duration::from_secs(600),
        scrape_interval: Duration::from_secs(10),
        job: "node".to_string(),
        seed: 1,
        progress_interval: Duration::from_secs(3600),
        no_retry: false,
        metadata: true,
        headers: Vec::new(),
    }
}

/// A numeric sample of `name` in a text exposition (no labels), if present.
fn scrape_value(text: &str, name: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cmdline: Vec<String> = std::env::args().collect();
    anyhow::ensure!(a.refreshes >= 2, "--refreshes must be at least 2 (the first refresh fills the cache)");
    anyhow::ensure!(a.panels >= 1 && a.panels <= DASHBOARD.len(), "--panels must be between 1 and {}", DASHBOARD.len());
    let step_ms = a.step.as_millis() as i64;
    let window_ms = a.window.as_millis() as i64;
    anyhow::ensure!(step_ms > 0 && window_ms > 0, "--step and --window must be positive");
    let write_url = a.write_url.clone().unwrap_or_else(|| format!("{}/api/v1/write", a.url.trim_end_matches('/')));
    let live = if a.no_load {
        None
    } else {
        let now = prom_query::now_ms();
        let start = now - window_ms - 600_000;
        println!("b5: backfilling {} targets over the last {} s into {write_url}", a.targets, (now - start) / 1000);
        remote_write::run(writer_args(&a, &write_url, remote_write::Mode::Max, Some(start), Some(now), Duration::from_secs(24 * 3600)))?;
        let run = a.refresh * a.refreshes as u32 + Duration::from_secs(15);
        let wa = writer_args(&a, &write_url, remote_write::Mode::Steady, None, None, run);
        println!("b5: real-time writer started ({} targets, 10 s scrapes)", a.targets);
        Some(std::thread::spawn(move || remote_write::run(wa)))
    };

    let mut api = Api::new(&a.url, a.timeout, 2048 << 20)?;
    let panels = &DASHBOARD[..a.panels];
    // Per panel: cached and uncached latencies (ms) from the second refresh on, and steps/hits.
    let mut cached: Vec<Vec<f64>> = vec![Vec::new(); panels.len()];
    let mut uncached: Vec<Vec<f64>> = vec![Vec::new(); panels.len()];
    let (mut steps, mut hits, mut traced) = (0u64, 0u64, 0usize);
    for r in 0..a.refreshes {
        let t0 = Instant::now();
        let now = prom_query::now_ms();
        let end = now - now.rem_euclid(step_ms);
        let (start, end_s, step_s) = (prom_query::secs(end - window_ms), prom_query::secs(end), prom_query::secs(step_ms));
        for (i, (name, expr)) in panels.iter().enumerate() {
            let params = [("query", *expr), ("start", &start), ("end", &end_s), ("step", &step_s), ("trace", "1")];
            let (d, resp) = api.post_form("/api/v1/query_range", &params)?;
            let v = prom_query::success_json(&resp).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
            let c = &v["trace"]["cache"];
            if r > 0 {
                cached[i].push(d.as_secs_f64() * 1000.0);
                if let (Some(s), Some(h)) = (c["steps"].as_u64(), c["hits"].as_u64()) {
                    steps += s;
                    hits += h;
                    traced += 1;
                }
            }
            let mut p = params.to_vec();
            p.pop();
            p.push(("nocache", "1"));
            let (d, resp) = api.post_form("/api/v1/query_range", &p)?;
            prom_query::success_json(&resp).map_err(|e| anyhow::anyhow!("{name} (nocache): {e}"))?;
            if r > 0 {
                uncached[i].push(d.as_secs_f64() * 1000.0);
            }
        }
        let spent = t0.elapsed();
        println!("b5: refresh {}/{} ending {end}: {:.1} ms for {} panels, twice", r + 1, a.refreshes, spent.as_secs_f64() * 1000.0, panels.len());
        if r + 1 < a.refreshes && spent < a.refresh {
            std::thread::sleep(a.refresh - spent);
        }
    }

    println!();
    println!("| panel | query | cached, median ms | nocache=1, median ms | ratio |");
    println!("|---|---|---|---|---|");
    let mut ratios = Vec::new();
    let (mut all_c, mut all_u) = (Vec::new(), Vec::new());
    for (i, (name, expr)) in panels.iter().enumerate() {
        all_c.extend_from_slice(&cached[i]);
        all_u.extend_from_slice(&uncached[i]);
        let (c, u) = (median(&cached[i]), median(&uncached[i]));
        ratios.push(u / c);
        println!("| {name} | `{}` | {c:.2} | {u:.2} | {:.1}× |", expr.replace('|', "\\|"), u / c);
    }
    let (c, u) = (median(&all_c), median(&all_u));
    println!("| all | | {c:.2} | {u:.2} | {:.1}× |", u / c);
    println!();
    if traced > 0 {
        println!(
            "steps served from the cache (refreshes 2..{}): {hits} of {steps} = {:.1}%",
            a.refreshes,
            100.0 * hits as f64 / steps.max(1) as f64
        );
    } else {
        println!("steps served from the cache: not reported by this server (no trace.cache in its answers)");
    }
    if let Ok(resp) = api.client_get("/metrics") {
        let text = String::from_utf8_lossy(&resp.body).into_owned();
        if let Some(b) = scrape_value(&text, "tessera_query_results_cache_bytes") {
            let bound = api
                .client_get("/api/v1/status/flags")
                .ok()
                .and_then(|r| serde_json::from_slice::<serde_json::Value>(&r.body).ok())
                .and_then(|v| v["data"]["query.results-cache.max-size"].as_str().map(str::to_string))
                .unwrap_or_else(|| "?".into());
            println!("result cache: {:.1} MiB held (bound {bound})", b / 1048576.0);
        }
    }
    println!("median of per-panel ratios: {:.1}×", median(&ratios));
    println!("command: {}", cmdline.join(" "));
    if let Some(h) = live {
        // The writer ends at its duration; its errors are reported but do not void the figures.
        match h.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => println!("b5: real-time writer: {e}"),
            Err(_) => println!("b5: real-time writer panicked"),
        }
    }
    Ok(())
}
