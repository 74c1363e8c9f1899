//! `tessera-bench hist-query`: native-histogram query latency, Tessera against Prometheus on the same
//! data (issue 11 item 6).
//!
//! It starts Tessera and Prometheus on loopback in fresh temporary directories (and optionally a second
//! Tessera binary, `--baseline-bin`, e.g. one built before a change), writes the same native-histogram
//! data set to each by remote write 1.0, checks that every server holds every series, then runs each
//! query as an instant query (at the data's end) and as a range query (over the whole data but its
//! first 5 minutes, at `--step-s`) `--runs` times against each server in turn, and prints the median
//! latency per server, the ratios, and whether the answers agree (floats and every histogram count,
//! sum and bucket within 1e-9 relative, bucket bounds exact), and each server's peak RSS growth over
//! the untimed run of each query (Linux: the peak is reset through `/proc/<pid>/clear_refs` first).
//!
//! The data: `--series` series of `http_request_duration_seconds`, a schema-3 latency histogram as a
//! client library exposes it (integer counts; 20–70 buckets from ~5 ms; 10 jobs), scraped every 15 s
//! for `--hours`, each scrape adding a bell-shaped batch of observations with random jitter.
//! Everything derives from `--seed`; the time axis ends at `--data-end-ms` (default: a few minutes
//! before now, printed with the command line that reproduces the run).

use crate::http::Client;
use crate::promql_diff::servers::Server;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tessera_model::{Histogram, HistogramSample, HistogramValue, Labels, Span};
use tessera_protocol::remote_write::{V1Builder, CONTENT_TYPE_V1, HEADER_VERSION, VERSION_V1};

const METRIC: &str = "http_request_duration_seconds";
const STEP_MS: i64 = 15_000;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Tessera's binary. Default: `tessera` next to this executable (target/<profile>/tessera).
    #[arg(long)]
    pub tessera_bin: Option<PathBuf>,
    /// A second Tessera binary measured beside the first (e.g. built before a change).
    #[arg(long)]
    pub baseline_bin: Option<PathBuf>,
    /// Prometheus' binary (3.x).
    #[arg(long, env = "PROMETHEUS_BIN")]
    pub prometheus_bin: PathBuf,
    /// Number of histogram series.
    #[arg(long, default_value_t = 2_000)]
    pub series: usize,
    /// Hours of data at a 15 s scrape interval.
    #[arg(long, default_value_t = 1.0)]
    pub hours: f64,
    /// Timed runs per query and server (after one untimed run whose answers are compared).
    #[arg(long, default_value_t = 9)]
    pub runs: usize,
    /// Step of the range queries, seconds.
    #[arg(long, default_value_t = 60)]
    pub step_s: i64,
    /// Seed of the data.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Last sample time (unix ms). Default: now minus 2 minutes, rounded down to a minute.
    #[arg(long)]
    pub data_end_ms: Option<i64>,
    /// Seconds to wait after the data is written and before anything is timed, so that the servers'
    /// background work on the fresh data (head chunks cut and mapped, WAL) is not measured.
    #[arg(long, default_value_t = 20)]
    pub settle_s: u64,
    /// Run only these queries (repeatable); default: the standard set.
    #[arg(long)]
    pub expr: Vec<String>,
}

/// The standard queries: `histogram_quantile` over `sum(rate())` in both grouping forms that make sense
/// for native histograms (upstream's idiom has no `le`), and the sums alone.
pub const QUERIES: &[&str] = &[
    "histogram_quantile(0.99, sum(rate(http_request_duration_seconds[5m])))",
    "histogram_quantile(0.99, sum by (job) (rate(http_request_duration_seconds[5m])))",
    "sum(rate(http_request_duration_seconds[5m]))",
    "sum by (job) (rate(http_request_duration_seconds[5m]))",
];

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// One series' generator state.
struct Gen {
    labels: Labels,
    lo: i32,
    weights: Vec<f64>,
    counts: Vec<u64>,
    sum: f64,
}

impl Gen {
    fn new(i: usize) -> Gen {
        let labels = Labels::from_pairs([
            ("__name__", METRIC.to_string()),
            ("instance", format!("host-{}:9100", i / 10)),
            ("job", format!("job{}", i % 10)),
        ]);
        let nb = 20 + (i * 7919) % 51;
        let (center, sigma) = (nb as f64 * 0.4, nb as f64 / 6.0);
        let weights = (0..nb).map(|b| (-((b as f64 - center).powi(2)) / (2.0 * sigma * sigma)).exp()).collect();
        Gen { labels, lo: -61, weights, counts: vec![0; nb], sum: 0.0 }
    }

    /// The next scrape's histogram.
    fn next(&mut self, r: &mut Rng) -> Histogram {
        for (b, (c, w)) in self.counts.iter_mut().zip(&self.weights).enumerate() {
            let inc = (w * 20.0 * (0.5 + r.unit())).floor() as u64;
            *c += inc;
            // Observations a little below the bucket's upper bound 2^((lo + b) / 8).
            self.sum += inc as f64 * 2f64.powf((self.lo + b as i32) as f64 / 8.0) * 0.95;
        }
        let mut prev = 0i64;
        let deltas = self
            .counts
            .iter()
            .map(|c| {
                let d = *c as i64 - prev;
                prev = *c as i64;
                d
            })
            .collect();
        Histogram {
            schema: 3,
            zero_threshold: 2.938735877055719e-39,
            count: self.counts.iter().sum(),
            sum: self.sum,
            positive_spans: vec![Span::new(self.lo, self.counts.len() as u32)],
            positive_buckets: deltas,
            ..Histogram::default()
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

fn secs(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// Writes the data to every server: time slices of 20 scrapes, each in requests of at most 250 series,
/// so every series arrives in time order.
fn ingest(servers: &[&Server], args: &Args, start_ms: i64, points: usize) -> anyhow::Result<usize> {
    let mut clients: Vec<Client> = servers.iter().map(|s| s.client(Duration::from_secs(60))).collect::<Result<_, _>>()?;
    let mut gens: Vec<Gen> = (0..args.series).map(Gen::new).collect();
    let mut r = Rng(args.seed);
    let mut written = 0;
    let slice = 20;
    let mut k0 = 0;
    while k0 < points {
        let k1 = (k0 + slice).min(points);
        for chunk in gens.chunks_mut(250) {
            let mut b = V1Builder::new();
            for g in chunk.iter_mut() {
                let hs: Vec<HistogramSample> = (k0..k1)
                    .map(|k| HistogramSample::new(start_ms + k as i64 * STEP_MS, HistogramValue::Int(g.next(&mut r))))
                    .collect();
                written += hs.len();
                b.add_series_with_histograms(&g.labels, &[], &hs);
            }
            let body = snap::raw::Encoder::new().compress_vec(&b.finish())?;
            for (s, c) in servers.iter().zip(clients.iter_mut()) {
                let resp = c.request(
                    "POST",
                    "/api/v1/write",
                    &[("Content-Encoding", "snappy"), ("Content-Type", CONTENT_TYPE_V1), (HEADER_VERSION, VERSION_V1)],
                    &body,
                )?;
                anyhow::ensure!(
                    (200..300).contains(&resp.status),
                    "{} refused remote write: HTTP {} {}",
                    s.name,
                    resp.status,
                    String::from_utf8_lossy(&resp.body)
                );
            }
        }
        k0 = k1;
    }
    Ok(written)
}

fn query(c: &mut Client, path: &str, expr: &str, params: &[(&str, String)]) -> anyhow::Result<(Duration, Value)> {
    let mut form = form_urlencoded::Serializer::new(String::new());
    form.append_pair("query", expr);
    for (k, v) in params {
        form.append_pair(k, v);
    }
    let body = form.finish();
    let t0 = Instant::now();
    let r = c.request("POST", path, &[("Content-Type", "application/x-www-form-urlencoded")], body.as_bytes())?;
    let took = t0.elapsed();
    let v: Value = serde_json::from_slice(&r.body)
        .map_err(|e| anyhow::anyhow!("HTTP {}: {e}: {}", r.status, String::from_utf8_lossy(&r.body)))?;
    anyhow::ensure!(
        v.get("status").and_then(Value::as_str) == Some("success"),
        "HTTP {}: {}",
        r.status,
        String::from_utf8_lossy(&r.body)
    );
    Ok((took, v))
}

/// One point of an answer: a float or a histogram (count, sum, buckets as (bounds rule, lower, upper,
/// count)).
#[derive(Debug, Clone)]
enum Point {
    F(f64),
    H { count: f64, sum: f64, buckets: Vec<(i64, String, String, f64)> },
}

fn num(v: &Value) -> f64 {
    match v {
        Value::String(s) => match s.as_str() {
            "+Inf" => f64::INFINITY,
            "-Inf" => f64::NEG_INFINITY,
            "NaN" => f64::NAN,
            s => s.parse().unwrap_or(f64::NAN),
        },
        Value::Number(n) => n.as_f64().unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

fn hist_point(h: &Value) -> Point {
    let buckets = h
        .get("buckets")
        .and_then(Value::as_array)
        .map(|bs| {
            bs.iter()
                .filter_map(Value::as_array)
                .map(|b| {
                    let s = |i: usize| b.get(i).and_then(Value::as_str).unwrap_or("").to_string();
                    (b.first().and_then(Value::as_i64).unwrap_or(-1), s(1), s(2), num(b.get(3).unwrap_or(&Value::Null)))
                })
                .collect()
        })
        .unwrap_or_default();
    Point::H {
        count: num(h.get("count").unwrap_or(&Value::Null)),
        sum: num(h.get("sum").unwrap_or(&Value::Null)),
        buckets,
    }
}

/// An answer as label set → (timestamp ms → point).
type Answer = BTreeMap<String, BTreeMap<i64, Point>>;

fn answer(v: &Value) -> Answer {
    let mut out = Answer::new();
    let Some(result) = v.get("data").and_then(|d| d.get("result")).and_then(Value::as_array) else { return out };
    for s in result {
        let labels = s.get("metric").map(|m| m.to_string()).unwrap_or_default();
        let e = out.entry(labels).or_default();
        let ts = |p: &Value| (p.as_f64().unwrap_or(0.0) * 1000.0).round() as i64;
        if let Some(p) = s.get("value").and_then(Value::as_array) {
            e.insert(ts(&p[0]), Point::F(num(&p[1])));
        }
        if let Some(p) = s.get("histogram").and_then(Value::as_array) {
            e.insert(ts(&p[0]), hist_point(&p[1]));
        }
        for p in s.get("values").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_array) {
            e.insert(ts(&p[0]), Point::F(num(&p[1])));
        }
        for p in s.get("histograms").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_array) {
            e.insert(ts(&p[0]), hist_point(&p[1]));
        }
    }
    out
}

/// Equal within 1e-9 relative (NaN equal to NaN).
fn close(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

/// `None` when the answers agree, else the first difference.
fn differ(a: &Answer, b: &Answer) -> Option<String> {
    if a.len() != b.len() || a.keys().ne(b.keys()) {
        return Some(format!("series differ: {:?} vs {:?}", a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>()));
    }
    for (l, pa) in a {
        let pb = &b[l];
        if pa.len() != pb.len() || pa.keys().ne(pb.keys()) {
            return Some(format!("{l}: timestamps differ ({} vs {} points)", pa.len(), pb.len()));
        }
        for (t, x) in pa {
            let ok = match (x, &pb[t]) {
                (Point::F(x), Point::F(y)) => close(*x, *y),
                (Point::H { count: c1, sum: s1, buckets: b1 }, Point::H { count: c2, sum: s2, buckets: b2 }) => {
                    close(*c1, *c2)
                        && close(*s1, *s2)
                        && b1.len() == b2.len()
                        && b1.iter().zip(b2).all(|(p, q)| p.0 == q.0 && p.1 == q.1 && p.2 == q.2 && close(p.3, q.3))
                }
                _ => false,
            };
            if !ok {
                return Some(format!("{l} @{t}: {x:?} vs {:?}", pb[t]));
            }
        }
    }
    None
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`).
fn proc_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines().find(|l| l.starts_with(field))?.split_whitespace().nth(1)?.parse().ok()
}

/// Resets the process' peak RSS (`VmHWM`) to its current RSS (Linux `clear_refs` 5); false when not
/// possible (not Linux, not ours).
fn reset_peak_rss(pid: u32) -> bool {
    std::fs::write(format!("/proc/{pid}/clear_refs"), "5").is_ok()
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort();
    let n = v.len();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        ms(v[n / 2])
    } else {
        (ms(v[n / 2 - 1]) + ms(v[n / 2])) / 2.0
    }
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let tessera_bin = match &args.tessera_bin {
        Some(b) => b.clone(),
        None => crate::promql_diff::default_tessera_bin()
            .ok_or_else(|| anyhow::anyhow!("no tessera binary next to this executable; build it or pass --tessera-bin"))?,
    };
    let end_ms = args.data_end_ms.unwrap_or_else(|| (now_ms() - 2 * 60_000) / 60_000 * 60_000);
    let points = (args.hours * 3_600_000.0 / STEP_MS as f64).round() as usize + 1;
    let start_ms = end_ms - (points as i64 - 1) * STEP_MS;
    let mut command = format!(
        "tessera-bench hist-query --tessera-bin {} --prometheus-bin {} --series {} --hours {} --runs {} --step-s {} --seed {} --settle-s {} --data-end-ms {end_ms}",
        tessera_bin.display(),
        args.prometheus_bin.display(),
        args.series,
        args.hours,
        args.runs,
        args.step_s,
        args.seed,
        args.settle_s
    );
    if let Some(b) = &args.baseline_bin {
        command += &format!(" --baseline-bin {}", b.display());
    }
    for e in &args.expr {
        command += &format!(" --expr '{e}'");
    }
    println!("hist-query: {command}");

    let mut servers = vec![Server::tessera(&tessera_bin)?, Server::prometheus(&args.prometheus_bin)?];
    if let Some(b) = &args.baseline_bin {
        servers.push(Server::tessera(b)?);
    }
    for s in servers.iter_mut() {
        s.wait_ready(Duration::from_secs(120))?;
    }
    let names: Vec<&str> = ["tessera", "prometheus", "baseline"][..servers.len()].to_vec();
    let t0 = Instant::now();
    let refs: Vec<&Server> = servers.iter().collect();
    let written = ingest(&refs, &args, start_ms, points)?;
    println!(
        "hist-query: {} series x {points} histograms ({written} in all) written to {} in {:.1} s; data {}..{}",
        args.series,
        names.join(", "),
        t0.elapsed().as_secs_f64(),
        secs(start_ms),
        secs(end_ms)
    );
    let mut clients: Vec<Client> = servers.iter().map(|s| s.client(Duration::from_secs(300))).collect::<Result<_, _>>()?;
    // Every server must hold every series before anything is timed.
    let deadline = Instant::now() + Duration::from_secs(60);
    for (c, name) in clients.iter_mut().zip(&names) {
        loop {
            let (_, v) = query(c, "/api/v1/query", &format!("count({METRIC})"), &[("time", secs(end_ms))])?;
            let n = answer(&v).values().flat_map(|p| p.values()).find_map(|p| match p {
                Point::F(x) => Some(*x),
                _ => None,
            });
            if n == Some(args.series as f64) {
                break;
            }
            anyhow::ensure!(Instant::now() < deadline, "{name} holds {n:?} series of {}", args.series);
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    std::thread::sleep(Duration::from_secs(args.settle_s));
    let exprs: Vec<String> = if args.expr.is_empty() { QUERIES.iter().map(|s| s.to_string()).collect() } else { args.expr.clone() };
    let range_start = start_ms + 5 * 60_000;
    let mut rows = Vec::new();
    let mut all_equal = true;
    for e in &exprs {
        for instant in [true, false] {
            let (path, params, kind) = if instant {
                ("/api/v1/query", vec![("time", secs(end_ms))], "instant".to_string())
            } else {
                let p = vec![("start", secs(range_start)), ("end", secs(end_ms)), ("step", args.step_s.to_string())];
                let steps = (end_ms - range_start) / 1000 / args.step_s + 1;
                ("/api/v1/query_range", p, format!("range {steps} steps"))
            };
            // One untimed run each: the answers are compared with Prometheus', and each server's peak
            // RSS growth over it is measured (the process' RSS before, its peak after).
            let mut answers = Vec::new();
            let mut growth = Vec::new();
            for (c, s) in clients.iter_mut().zip(&servers) {
                let before = if reset_peak_rss(s.pid()) { proc_kib(s.pid(), "VmRSS:") } else { None };
                answers.push(answer(&query(c, path, e, &params)?.1));
                let peak = proc_kib(s.pid(), "VmHWM:");
                growth.push(before.zip(peak).map(|(b, p)| p.saturating_sub(b) as f64 / 1024.0));
            }
            let mut diffs = Vec::new();
            for (i, a) in answers.iter().enumerate() {
                if i != 1
                    && let Some(d) = differ(a, &answers[1])
                {
                    diffs.push(format!("{} vs prometheus: {d}", names[i]));
                }
            }
            let mut times: Vec<Vec<Duration>> = vec![Vec::new(); clients.len()];
            for _ in 0..args.runs {
                for (c, t) in clients.iter_mut().zip(times.iter_mut()) {
                    t.push(query(c, path, e, &params)?.0);
                }
            }
            let meds: Vec<f64> = times.into_iter().map(median).collect();
            let points: usize = answers[1].values().map(BTreeMap::len).sum();
            all_equal &= diffs.is_empty();
            rows.push((e.clone(), kind, meds, points, diffs, growth));
        }
    }
    println!();
    let mut head = "| query | kind | tessera ms | prometheus ms | prometheus / tessera |".to_string();
    if servers.len() > 2 {
        head += " baseline ms | baseline / tessera |";
    }
    head += " peak RSS growth MiB (tessera / prometheus";
    head += if servers.len() > 2 { " / baseline) | answers |" } else { ") | answers |" };
    println!("{head}");
    println!("|{}", "---|".repeat(head.matches('|').count() - 1));
    for (e, kind, meds, points, diffs, growth) in &rows {
        let mut line = format!("| `{e}` | {kind} | {:.1} | {:.1} | {:.2}x |", meds[0], meds[1], meds[1] / meds[0]);
        if meds.len() > 2 {
            line += &format!(" {:.1} | {:.2}x |", meds[2], meds[2] / meds[0]);
        }
        let g: Vec<String> = growth.iter().map(|g| g.map_or("?".to_string(), |g| format!("{g:.1}"))).collect();
        line += &format!(" {} |", g.join(" / "));
        line += &if diffs.is_empty() { format!(" equal ({points} points) |") } else { " DIFFER |".to_string() };
        println!("{line}");
    }
    println!("\nmedians of {} runs per query and server, run in turn; command: {command}", args.runs);
    for (e, kind, _, _, diffs, _) in &rows {
        for d in diffs {
            println!("DIFFER {e} [{kind}]: {d}");
        }
    }
    anyhow::ensure!(all_equal, "answers differ from Prometheus'");
    Ok(())
}
