//! The web UI in a real headless browser, through the binary: `tessera serve` with an hour of data
//! written by remote write, then `ui/test/browser.mjs` (playwright-core driving Debian's Chromium) runs
//! an instant and a range query (the graph's canvas must not be blank), autocompletes a metric name,
//! opens a Prometheus `/graph?g0.expr=` link, shows the explain view's plan, the cardinality page's top
//! metric, explore and status, shows the parser's message for an invalid query, and checks the page's
//! weight (≤ 1 MB compressed) and that no request leaves the server. Screenshots of every page go to
//! `target/ui-screenshots/` (or `$TESSERA_UI_SCREENSHOTS`).
//!
//! Needs Node.js, `npm ci` run in `ui/` and Chromium (`/usr/bin/chromium`, or `$CHROMIUM`): `.ci/run`
//! installs them. Without them the test fails in CI naming what is missing, and elsewhere says loudly
//! that it was skipped.

mod common;

use common::Server;
use std::path::PathBuf;
use std::process::Command;
use tessera_model::histogram::{CounterResetHint, Histogram, Span};
use tessera_model::{HistogramSample, HistogramValue, Labels, Sample};
use tessera_protocol::remote_write::{Metadata, MetricType, WriteSeries};

const ODD_PATH: &str = "/a\"b\\c/ünï";

fn ui_dir() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../ui"))
}

/// What the browser test needs, or why it cannot run.
fn prerequisites() -> Result<PathBuf, String> {
    let chromium = PathBuf::from(std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()));
    if !chromium.exists() {
        return Err(format!("no Chromium at {} (apt-get install chromium, or set CHROMIUM)", chromium.display()));
    }
    if Command::new("node").arg("--version").output().is_err() {
        return Err("no `node` on PATH".into());
    }
    let pw = ui_dir().join("node_modules/playwright-core");
    if !pw.exists() {
        return Err(format!("{} is missing (run `npm ci` in ui/)", pw.display()));
    }
    Ok(chromium)
}

fn counter(name: &str, pairs: &[(&str, &str)], now: i64, rate: f64) -> WriteSeries {
    let mut all = vec![("__name__", name)];
    all.extend_from_slice(pairs);
    // An hour of samples every 15 s, ending now: a counter growing at `rate` per second, with a wobble so
    // that lines differ.
    let samples = (0..240)
        .map(|i| {
            let t = now - 3_600_000 + i * 15_000;
            Sample::new(t, (i as f64 * 15.0 * rate + (i as f64 / 7.0).sin() * rate).floor())
        })
        .collect();
    WriteSeries::new(Labels::from_pairs(all), samples)
}

#[test]
fn the_ui_works_in_a_real_browser() {
    let chromium = match prerequisites() {
        Ok(c) => c,
        Err(why) => {
            assert!(!tessera_model::fixtures::in_ci(), "the browser test cannot run in CI: {why}");
            use std::io::Write as _;
            let _ = writeln!(std::io::stderr(), "SKIPPED the_ui_works_in_a_real_browser: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().expect("tempdir");
    // A second store, which the navigation bar's selector must offer and switch every page to.
    let cfg = dir.path().join("tessera.toml");
    std::fs::write(&cfg, "[stores.team-a]\n").expect("config");
    let s = Server::start(&dir.path().join("data"), &[&format!("--config.file={}", cfg.display())]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as i64;

    // A counter over 3 instances × 4 codes (12 series) with metadata, and a gauge with 40 series: the
    // metric with most series, which the cardinality page must list first.
    let mut series = Vec::new();
    for (j, inst) in ["web-1:8080", "web-2:8080", "web-3:8080"].iter().enumerate() {
        for (k, code) in ["200", "404", "500", "503"].iter().enumerate() {
            let mut labels = vec![("instance", *inst), ("code", *code), ("job", "web")];
            // One series with a label value that needs escaping in PromQL (quotes, a backslash,
            // non-ASCII letters): the explorer's query for it must select it.
            if j == 0 && k == 0 {
                labels.push(("path", ODD_PATH));
            }
            series.push(counter("ui_http_requests_total", &labels, now, 1.0 + k as f64 + j as f64 / 3.0));
        }
    }
    for q in 0..40 {
        let name = format!("queue-{q:02}");
        series.push(counter("ui_queue_items", &[("queue", &name), ("job", "worker")], now, 0.5));
    }
    // A native histogram (schema 0: buckets (0.5,1], (1,2], (2,4]), growing each scrape.
    let mut h = counter("ui_request_duration_seconds", &[("job", "web")], now, 1.0);
    h.samples.clear();
    h.histogram_samples = (0..240i64)
        .map(|i| {
            let k = i + 1;
            let v = HistogramValue::Int(Histogram {
                counter_reset_hint: CounterResetHint::Unknown,
                schema: 0,
                zero_threshold: 1e-128,
                zero_count: 0,
                count: 6 * k as u64,
                sum: 9.0 * k as f64,
                positive_spans: vec![Span::new(0, 3)],
                negative_spans: vec![],
                // Deltas: 1k, 2k, 3k observations.
                positive_buckets: vec![k, k, k],
                negative_buckets: vec![],
                custom_values: vec![],
            });
            HistogramSample::new(now - 3_600_000 + i * 15_000, v)
        })
        .collect();
    series.push(h);
    let md = [
        Metadata {
            metric_family_name: "ui_http_requests_total".into(),
            kind: MetricType::Counter,
            help: "HTTP requests served, by status code.".into(),
            unit: String::new(),
        },
        Metadata { metric_family_name: "ui_queue_items".into(), kind: MetricType::Gauge, help: "Items waiting.".into(), unit: String::new() },
    ];
    let (status, _, body) = s.write_v1(&series, &md);
    assert_eq!(status, 204, "{body}");
    let team = [counter("ui_team_a_jobs_total", &[("job", "batch")], now, 2.0)];
    let r = s
        .http
        .post(format!("{}/store/team-a/api/v1/write", s.base))
        .header("Content-Type", common::CT_V1)
        .header("Content-Encoding", "snappy")
        .body(tessera_protocol::remote_write::compress(&tessera_protocol::remote_write::encode_v1(&team, &[])))
        .send()
        .expect("POST");
    assert_eq!(r.status().as_u16(), 204);

    let out = std::env::var("TESSERA_UI_SCREENSHOTS")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/ui-screenshots")));
    let run = Command::new("node")
        .current_dir(ui_dir())
        .env("CHROMIUM", &chromium)
        .args(["test/browser.mjs", "--url", &s.base, "--out"])
        .arg(&out)
        .args(["--metric", "ui_http_requests_total", "--top-metric", "ui_queue_items", "--label", "code"])
        .args(["--store", "team-a", "--store-metric", "ui_team_a_jobs_total", "--histogram", "ui_request_duration_seconds"])
        .args(["--odd-label", &serde_json::json!(["path", ODD_PATH]).to_string()])
        .output()
        .expect("run node");
    let stdout = String::from_utf8_lossy(&run.stdout);
    let stderr = String::from_utf8_lossy(&run.stderr);
    // Shown on failure, and with --nocapture: the steps, the page weight and time to interactive.
    println!("{stdout}");
    assert!(run.status.success(), "the browser test failed:\n{stdout}\n{stderr}");
    assert!(stdout.contains("RESULT "), "{stdout}");
    for page in ["query-table", "query-graph", "explain", "cardinality", "explore", "status", "invalid-query", "autocomplete", "store"] {
        let p = out.join(format!("{page}.png"));
        assert!(std::fs::metadata(&p).is_ok_and(|m| m.len() > 1000), "no screenshot {}", p.display());
    }
}
