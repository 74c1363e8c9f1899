//! `tessera-bench remote-write`: the B2 load generator (../shared/BENCHMARKS.md).
//!
//! T node_exporter-shaped targets ([`crate::nodegen`], ~1,200 series each) are scraped every 10 s of
//! simulated time and pushed as real snappy-compressed remote-write 1.0 or 2.0 requests of
//! `--samples-per-request` samples to any receiver URL (Tessera, Prometheus with
//! `--web.enable-remote-write-receiver`, VictoriaMetrics' `/api/v1/write`).
//!
//! - `--mode max` backfills from `--start-ms` (default: now − `--backfill`) towards now (or `--end-ms`)
//!   as fast as the receiver accepts, for `--duration` of wall time or until it reaches that end.
//! - `--mode steady` scrapes in real time, each target at its own offset within the interval, as a
//!   Prometheus server does, batching up to the request size or a 1 s send deadline.
//!
//! Like Prometheus' shards, `--concurrency` senders each own a fixed subset of the targets and send
//! their requests in order over their own connection, so a series' samples always arrive in time order.
//! 429 and 5xx answers and connection errors are retried with backoff (honouring `Retry-After`), as
//! Prometheus does; other 4xx answers are counted and dropped. `--churn-percent` of the targets are
//! replaced every `--churn-interval` of simulated time; a replaced target's series get a stale marker,
//! as Prometheus writes when a target disappears.
//!
//! Prints a progress line every few seconds and a final report: accepted samples/s, requests and
//! errors by status code, latency percentiles, bytes per sample on the wire, and the command line.

use crate::http::{Client, Url};
use crate::nodegen::{metadata_for, Target};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tessera_model::{Labels, Sample, STALE_NAN};
use tessera_protocol::remote_write::{
    Metadata, ProtoVersion, V1Builder, V2Builder, HEADER_SAMPLES_WRITTEN, HEADER_VERSION,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Mode {
    /// Backfill a time range as fast as the receiver accepts.
    Max,
    /// Send in real time, one scrape per target per interval.
    Steady,
}

/// Parses `500ms`, `10s`, `5m`, `3h`, `1d` (or a bare number of seconds).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !(c.is_ascii_digit() || c == '.')) {
        Some(i) => (&s[..i], &s[i..]),
        None => (s, "s"),
    };
    let n: f64 = num.parse().map_err(|_| format!("bad duration {s:?}"))?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        _ => return Err(format!("bad duration unit in {s:?} (use ms, s, m, h, d)")),
    };
    if !(secs.is_finite() && secs >= 0.0) {
        return Err(format!("bad duration {s:?}"));
    }
    Ok(Duration::from_secs_f64(secs))
}

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Receiver URL, e.g. http://127.0.0.1:9090/api/v1/write (http:// only).
    #[arg(long)]
    pub url: String,
    /// Remote-write protocol version: 1 or 2.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u8).range(1..=2))]
    pub proto: u8,
    /// Number of simulated node_exporter targets (~1,200 series each).
    #[arg(long, default_value_t = 100)]
    pub targets: usize,
    #[arg(long, value_enum, default_value_t = Mode::Max)]
    pub mode: Mode,
    /// Wall-clock duration of the run.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Parallel senders (Prometheus' shards), each with its own connection and targets.
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    /// Samples per request (Prometheus' max_samples_per_send).
    #[arg(long, default_value_t = 2000)]
    pub samples_per_request: usize,
    /// Steady mode: how far behind the wall clock samples arrive (each scrape is sent this long after
    /// its timestamp, as a sender whose queue lags: Prometheus' batch deadline is 5 s).
    #[arg(long, default_value = "0s", value_parser = parse_duration)]
    pub lag: Duration,
    /// Max mode: first simulated timestamp (ms). Default: now minus --backfill.
    #[arg(long)]
    pub start_ms: Option<i64>,
    /// Max mode: how far back the default start lies.
    #[arg(long, default_value = "3h", value_parser = parse_duration)]
    pub backfill: Duration,
    /// Max mode: last simulated timestamp (ms, inclusive); the run ends there. Default: now when the
    /// start is the default, else none (the run lasts --duration).
    #[arg(long)]
    pub end_ms: Option<i64>,
    /// Percentage of targets replaced every --churn-interval of simulated time.
    #[arg(long, default_value_t = 1.0)]
    pub churn_percent: f64,
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub churn_interval: Duration,
    /// Simulated scrape interval.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub scrape_interval: Duration,
    /// Value of the `job` label.
    #[arg(long, default_value = "node")]
    pub job: String,
    /// Seed of the value generator (same seed, same stream).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Seconds between progress lines.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub progress_interval: Duration,
    /// Do not retry 429/5xx/connection errors (count them instead).
    #[arg(long)]
    pub no_retry: bool,
    /// Send metadata (1.0: once per sender at start; 2.0: with every series).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    pub metadata: bool,
    /// Extra request header, "Name: value" (repeatable), e.g. a tenant header.
    #[arg(long = "header")]
    pub headers: Vec<String>,
}

/// Counters shared by the senders and the progress printer.
#[derive(Default)]
struct Stats {
    samples_accepted: AtomicU64,
    samples_sent: AtomicU64,
    requests_ok: AtomicU64,
    retries: AtomicU64,
    bytes_sent: AtomicU64,
    sim_ms_min: AtomicU64,
    by_status: Mutex<BTreeMap<String, u64>>,
    errors_shown: AtomicU64,
}

impl Stats {
    fn count_status(&self, key: String) {
        *self.by_status.lock().expect("stats lock").entry(key).or_insert(0) += 1;
    }
}

/// Encodes, compresses and posts one request at a time for one sender.
struct Sender {
    client: Client,
    version: ProtoVersion,
    headers: Vec<(String, String)>,
    v1: V1Builder,
    v2: V2Builder,
    raw: Vec<u8>,
    compressed: Vec<u8>,
    snappy: snap::raw::Encoder,
    latencies_us: Vec<u32>,
    retry: bool,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    metadata: BTreeMap<String, Metadata>,
    send_metadata: bool,
}

impl Sender {
    fn pending(&self) -> usize {
        match self.version {
            ProtoVersion::V1 => self.v1.samples(),
            ProtoVersion::V2 => self.v2.samples(),
        }
    }

    fn add(&mut self, labels: &Labels, s: Sample) {
        match self.version {
            ProtoVersion::V1 => self.v1.add_series(labels, std::slice::from_ref(&s)),
            ProtoVersion::V2 => {
                let md = if self.send_metadata { self.metadata.get(labels.metric_name()) } else { None };
                self.v2.add_series(labels, std::slice::from_ref(&s), md, &[])
            }
        }
    }

    /// Sends what is pending (if anything).
    fn flush(&mut self) {
        let samples = self.pending();
        if samples == 0 {
            return;
        }
        match self.version {
            ProtoVersion::V1 => self.v1.finish_into(&mut self.raw),
            ProtoVersion::V2 => self.v2.finish_into(&mut self.raw),
        }
        self.compressed.resize(snap::raw::max_compress_len(self.raw.len()), 0);
        let n = self.snappy.compress(&self.raw, &mut self.compressed).expect("snappy block under 4 GiB");
        self.compressed.truncate(n);
        self.post(samples);
    }

    fn post(&mut self, samples: usize) {
        let headers: Vec<(&str, &str)> = [
            ("Content-Type", self.version.content_type()),
            ("Content-Encoding", "snappy"),
            (HEADER_VERSION, self.version.version_header()),
        ]
        .into_iter()
        .chain(self.headers.iter().map(|(n, v)| (n.as_str(), v.as_str())))
        .collect();
        let mut backoff = Duration::from_millis(50);
        loop {
            let t0 = Instant::now();
            let r = self.client.post(&headers, &self.compressed);
            let us = t0.elapsed().as_micros().min(u32::MAX as u128) as u32;
            self.stats.bytes_sent.fetch_add(self.compressed.len() as u64, Ordering::Relaxed);
            let retry_after = match r {
                Ok(resp) => {
                    self.latencies_us.push(us);
                    self.stats.count_status(resp.status.to_string());
                    let written = resp.header(HEADER_SAMPLES_WRITTEN).and_then(|v| v.parse::<u64>().ok());
                    if (200..300).contains(&resp.status) {
                        self.stats.requests_ok.fetch_add(1, Ordering::Relaxed);
                        self.stats.samples_accepted.fetch_add(written.unwrap_or(samples as u64), Ordering::Relaxed);
                        self.stats.samples_sent.fetch_add(samples as u64, Ordering::Relaxed);
                        return;
                    }
                    let retryable = resp.status == 429 || resp.status >= 500;
                    if !retryable || !self.retry {
                        // Senders never retry other 4xx; a partial write is reported by the header.
                        self.stats.samples_accepted.fetch_add(written.unwrap_or(0), Ordering::Relaxed);
                        self.stats.samples_sent.fetch_add(samples as u64, Ordering::Relaxed);
                        if self.stats.errors_shown.fetch_add(1, Ordering::Relaxed) < 5 {
                            let body = String::from_utf8_lossy(&resp.body);
                            let body: String = body.chars().take(300).collect();
                            eprintln!("HTTP {}: {}", resp.status, body.trim());
                        }
                        return;
                    }
                    resp.header("retry-after").and_then(|v| v.trim().parse::<u64>().ok()).map(Duration::from_secs)
                }
                Err(e) => {
                    self.stats.count_status("io-error".to_string());
                    if self.stats.errors_shown.fetch_add(1, Ordering::Relaxed) < 5 {
                        eprintln!("request failed: {e}");
                    }
                    if !self.retry {
                        self.stats.samples_sent.fetch_add(samples as u64, Ordering::Relaxed);
                        return;
                    }
                    None
                }
            };
            if self.stop.load(Ordering::Relaxed) {
                self.stats.samples_sent.fetch_add(samples as u64, Ordering::Relaxed);
                return;
            }
            self.stats.retries.fetch_add(1, Ordering::Relaxed);
            std::thread::sleep(retry_after.unwrap_or(backoff).min(Duration::from_secs(5)));
            backoff = (backoff * 2).min(Duration::from_secs(5));
        }
    }
}

/// The churn plan shared by all senders: at churn event `k` (k ≥ 1), slots
/// `[floor((k−1)·r), floor(k·r))` modulo T are replaced, with r = T·percent/100.
#[derive(Debug, Clone, Copy)]
pub struct Churn {
    pub targets: usize,
    pub percent: f64,
}

impl Churn {
    /// The slots replaced at event `k` (k ≥ 1).
    pub fn slots(&self, k: u64) -> impl Iterator<Item = usize> + use<> {
        let r = self.targets as f64 * self.percent / 100.0;
        let lo = ((k - 1) as f64 * r).floor() as u64;
        let hi = (k as f64 * r).floor() as u64;
        let t = self.targets as u64;
        (lo..hi.min(lo + t)).map(move |i| (i % t) as usize)
    }
}

/// One sender's share of the fleet.
struct Fleet {
    /// (slot, generation, target)
    owned: Vec<(usize, u64, Target)>,
    job: String,
    seed: u64,
    targets: usize,
    churn: Churn,
    churn_done: u64,
}

impl Fleet {
    fn new(worker: usize, workers: usize, targets: usize, job: &str, seed: u64, churn: Churn) -> Self {
        let owned = (0..targets)
            .filter(|s| s % workers == worker)
            .map(|s| (s, 0, Target::new(s as u64, job, seed)))
            .collect();
        Fleet { owned, job: job.to_string(), seed, targets, churn, churn_done: 0 }
    }

    /// Applies every churn event up to `event`; replaced targets' series get a stale marker at `t_ms`.
    fn churn_to(&mut self, event: u64, t_ms: i64, sender: &mut Sender) {
        while self.churn_done < event {
            self.churn_done += 1;
            for slot in self.churn.slots(self.churn_done) {
                if let Some(entry) = self.owned.iter_mut().find(|(s, _, _)| *s == slot) {
                    for s in &entry.2.series {
                        sender.add(&s.labels, Sample::new(t_ms, STALE_NAN));
                    }
                    entry.1 += 1;
                    let id = entry.1 * self.targets as u64 + slot as u64;
                    entry.2 = Target::new(id, &self.job, self.seed);
                }
            }
        }
    }

    fn series(&self) -> usize {
        self.owned.iter().map(|(_, _, t)| t.series.len()).sum()
    }
}

/// Max mode: how far (simulated) the senders may drift apart.
const MAX_SKEW_MS: i64 = 5 * 60 * 1000;

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

fn percentile(sorted: &[u32], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)] as f64 / 1000.0
}

/// Scrapes one target into the sender, flushing whenever a request is full.
fn scrape_into(target: &mut Target, t_ms: i64, dt_s: f64, sender: &mut Sender, spr: usize) {
    target.scrape(t_ms, dt_s, |labels, s| {
        sender.add(labels, s);
        if sender.pending() >= spr {
            sender.flush();
        }
    });
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.targets > 0 && args.concurrency > 0 && args.samples_per_request > 0, "targets, concurrency and samples-per-request must be positive");
    let url = Url::parse(&args.url)?;
    let version = if args.proto == 2 { ProtoVersion::V2 } else { ProtoVersion::V1 };
    let mut extra = Vec::new();
    for h in &args.headers {
        let (n, v) = h.split_once(':').ok_or_else(|| anyhow::anyhow!("--header wants \"Name: value\", got {h:?}"))?;
        extra.push((n.trim().to_string(), v.trim().to_string()));
    }
    let interval_ms = args.scrape_interval.as_millis().max(1) as i64;
    let churn_ms = args.churn_interval.as_millis().max(1) as i64;
    let now = now_ms();
    let start_ms = match args.mode {
        Mode::Max => args.start_ms.unwrap_or(now - args.backfill.as_millis() as i64),
        Mode::Steady => now,
    };
    let start_ms = start_ms - start_ms.rem_euclid(interval_ms);
    let end_ms = match (args.mode, args.end_ms) {
        (Mode::Max, Some(end)) => end,
        (Mode::Max, None) if args.start_ms.is_some() => i64::MAX,
        (Mode::Max, None) => now,
        (Mode::Steady, _) => i64::MAX,
    };
    let churn = Churn { targets: args.targets, percent: args.churn_percent.max(0.0) };
    let stats = Arc::new(Stats::default());
    stats.sim_ms_min.store(start_ms as u64, Ordering::Relaxed);
    let stop = Arc::new(AtomicBool::new(false));
    let workers = args.concurrency.min(args.targets);
    let series_per_target = Target::new(0, &args.job, args.seed).series.len();
    let command_line = std::env::args().collect::<Vec<_>>().join(" ");
    println!(
        "remote-write: {} mode, proto {}, {} targets × ~{} series = ~{} active series, {} senders, {} samples/request, url {}",
        match args.mode { Mode::Max => "max", Mode::Steady => "steady" },
        args.proto,
        args.targets,
        series_per_target,
        args.targets * series_per_target,
        workers,
        args.samples_per_request,
        args.url
    );
    if args.mode == Mode::Max {
        println!("simulated time from {start_ms} ms ({} s before now)", (now - start_ms) / 1000);
    }
    // What the values carry, the floor of any lossless store's bytes per sample (timestamps aside).
    println!(
        "information in the values: {:.3} bytes per sample (the generator's draws; no lossless store needs fewer)",
        crate::nodegen::fleet_information_bytes(args.targets, &args.job, args.seed, interval_ms as f64 / 1000.0)
    );

    let t_begin = Instant::now();
    let sim_pos: Arc<Vec<AtomicU64>> = Arc::new((0..workers).map(|_| AtomicU64::new(start_ms as u64)).collect());
    let mut handles = Vec::new();
    for w in 0..workers {
        let stats = stats.clone();
        let stop = stop.clone();
        let sim_pos = sim_pos.clone();
        let args = args.clone();
        let url = url.clone();
        let extra = extra.clone();
        handles.push(std::thread::Builder::new().name(format!("sender-{w}")).spawn(move || -> Vec<u32> {
            let mut fleet = Fleet::new(w, workers, args.targets, &args.job, args.seed, churn);
            let metadata: BTreeMap<String, Metadata> = fleet
                .owned
                .first()
                .map(|(_, _, t)| metadata_for(t).into_iter().map(|m| (m.metric_family_name.clone(), m)).collect())
                .unwrap_or_default();
            let mut sender = Sender {
                client: Client::new(url, Duration::from_secs(30)),
                version,
                headers: extra,
                v1: V1Builder::new(),
                v2: V2Builder::new(),
                raw: Vec::new(),
                compressed: Vec::new(),
                snappy: snap::raw::Encoder::new(),
                latencies_us: Vec::new(),
                retry: !args.no_retry,
                stats: stats.clone(),
                stop: stop.clone(),
                metadata,
                send_metadata: args.metadata,
            };
            if args.metadata && version == ProtoVersion::V1 {
                // Prometheus sends 1.0 metadata in requests of its own.
                for m in sender.metadata.values() {
                    sender.v1.add_metadata(m);
                }
                sender.v1.finish_into(&mut sender.raw);
                sender.compressed = tessera_protocol::remote_write::compress(&sender.raw);
                sender.post(0);
            }
            let spr = args.samples_per_request;
            let dt_s = interval_ms as f64 / 1000.0;
            match args.mode {
                Mode::Max => {
                    let mut t = start_ms;
                    while !stop.load(Ordering::Relaxed) && t <= end_ms {
                        // Keep the senders within MAX_SKEW_MS of simulated time of each other: a
                        // receiver's head accepts only a window behind its newest sample (Prometheus:
                        // an hour), so a sender left far behind would see its samples refused.
                        while !stop.load(Ordering::Relaxed)
                            && t - MAX_SKEW_MS > sim_pos.iter().map(|a| a.load(Ordering::Relaxed) as i64).min().unwrap_or(t)
                        {
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        fleet.churn_to(((t - start_ms) / churn_ms) as u64, t, &mut sender);
                        for (_, _, target) in &mut fleet.owned {
                            scrape_into(target, t, dt_s, &mut sender, spr);
                        }
                        sim_pos[w].store(t as u64, Ordering::Relaxed);
                        t += interval_ms;
                    }
                }
                Mode::Steady => {
                    // Each target scrapes at its own offset inside the interval.
                    let n = args.targets as i64;
                    // The first round starts now; offsets already past wait for the next interval.
                    let first = now_ms();
                    let mut due: Vec<i64> = fleet
                        .owned
                        .iter()
                        .map(|(slot, _, _)| {
                            let d = start_ms + (*slot as i64 * interval_ms) / n;
                            if d < first { d + interval_ms } else { d }
                        })
                        .collect();
                    let mut oldest_pending: Option<Instant> = None;
                    let lag_ms = args.lag.as_millis() as i64;
                    while !stop.load(Ordering::Relaxed) {
                        // Scrapes are taken (with their due timestamps) `lag` after they are due.
                        let now = now_ms() - lag_ms;
                        fleet.churn_to(((now - start_ms) / churn_ms).max(0) as u64, now, &mut sender);
                        for (i, (_, _, target)) in fleet.owned.iter_mut().enumerate() {
                            if due[i] <= now {
                                scrape_into(target, due[i], dt_s, &mut sender, spr);
                                due[i] += interval_ms;
                            }
                        }
                        sim_pos[w].store(now as u64, Ordering::Relaxed);
                        if sender.pending() > 0 {
                            let since = *oldest_pending.get_or_insert_with(Instant::now);
                            if since.elapsed() >= Duration::from_secs(1) {
                                sender.flush();
                                oldest_pending = None;
                            }
                        } else {
                            oldest_pending = None;
                        }
                        let next = due.iter().copied().min().unwrap_or(now + 1000);
                        let wait = (next - (now_ms() - lag_ms)).clamp(1, 200);
                        std::thread::sleep(Duration::from_millis(wait as u64));
                    }
                }
            }
            sender.flush();
            let _ = fleet.series();
            sender.latencies_us
        })?);
    }

    // Progress until the duration elapses or every sender is done.
    let deadline = t_begin + args.duration;
    let mut last = (Instant::now(), 0u64);
    loop {
        let step = args.progress_interval.max(Duration::from_millis(200));
        let mut slept = Duration::ZERO;
        while slept < step && !handles.iter().all(|h| h.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
            slept += Duration::from_millis(100);
        }
        let acc = stats.samples_accepted.load(Ordering::Relaxed);
        let el = t_begin.elapsed().as_secs_f64();
        let rate_now = (acc - last.1) as f64 / last.0.elapsed().as_secs_f64().max(1e-9);
        last = (Instant::now(), acc);
        let sim_min = sim_pos.iter().map(|a| a.load(Ordering::Relaxed)).min().unwrap_or(0) as i64;
        let errs: u64 = stats
            .by_status
            .lock()
            .expect("stats lock")
            .iter()
            .filter(|(k, _)| !k.starts_with('2'))
            .map(|(_, v)| v)
            .sum();
        println!(
            "[{el:6.1}s] accepted {acc} samples ({:.0}/s now, {:.0}/s avg), {} requests ok, {errs} errors, {} retries, sim time {}",
            rate_now,
            acc as f64 / el.max(1e-9),
            stats.requests_ok.load(Ordering::Relaxed),
            stats.retries.load(Ordering::Relaxed),
            if args.mode == Mode::Max { format!("{:+.0} s vs now", (sim_min - now_ms()) as f64 / 1000.0) } else { "real".to_string() }
        );
        if Instant::now() >= deadline || handles.iter().all(|h| h.is_finished()) {
            break;
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut lat: Vec<u32> = Vec::new();
    for h in handles {
        lat.extend(h.join().map_err(|_| anyhow::anyhow!("a sender thread panicked"))?);
    }
    let wall = t_begin.elapsed().as_secs_f64();
    lat.sort_unstable();
    let acc = stats.samples_accepted.load(Ordering::Relaxed);
    let sent = stats.samples_sent.load(Ordering::Relaxed);
    let bytes = stats.bytes_sent.load(Ordering::Relaxed);
    println!("---- B2 remote-write report ----");
    println!("command:           {command_line}");
    println!("active series:     ~{} ({} targets)", args.targets * series_per_target, args.targets);
    println!("wall time:         {wall:.1} s");
    println!("accepted samples:  {acc} of {sent} sent = {:.0} samples/s", acc as f64 / wall);
    println!("requests:          {} ok, {} retries", stats.requests_ok.load(Ordering::Relaxed), stats.retries.load(Ordering::Relaxed));
    println!("by status:         {:?}", stats.by_status.lock().expect("stats lock"));
    println!(
        "latency (ms):      p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}  ({} responses)",
        percentile(&lat, 0.5),
        percentile(&lat, 0.9),
        percentile(&lat, 0.99),
        percentile(&lat, 1.0),
        lat.len()
    );
    println!("wire bytes:        {bytes} ({:.2} bytes/sample compressed)", bytes as f64 / sent.max(1) as f64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_protocol::remote_write::{decode, decompress, Limits};

    #[test]
    fn durations_parse() {
        assert_eq!(parse_duration("60s"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("10m"), Ok(Duration::from_secs(600)));
        assert_eq!(parse_duration("3h"), Ok(Duration::from_secs(10800)));
        assert_eq!(parse_duration("250ms"), Ok(Duration::from_millis(250)));
        assert_eq!(parse_duration("7"), Ok(Duration::from_secs(7)));
        assert!(parse_duration("5 parsecs").is_err());
    }

    #[test]
    fn churn_replaces_the_right_share_round_robin() {
        let c = Churn { targets: 100, percent: 1.0 };
        assert_eq!(c.slots(1).collect::<Vec<_>>(), vec![0]);
        assert_eq!(c.slots(2).collect::<Vec<_>>(), vec![1]);
        assert_eq!(c.slots(101).collect::<Vec<_>>(), vec![0]);
        // 1% of 30 targets: 0.3 per event, i.e. one every 3 or 4 events.
        let c = Churn { targets: 30, percent: 1.0 };
        let total: usize = (1..=100).map(|k| c.slots(k).count()).sum();
        assert_eq!(total, 30);
        let c = Churn { targets: 10, percent: 0.0 };
        assert_eq!(c.slots(5).count(), 0);
    }

    fn test_sender(version: ProtoVersion) -> Sender {
        Sender {
            client: Client::new(Url::parse("http://127.0.0.1:9/").expect("url"), Duration::from_secs(1)),
            version,
            headers: vec![],
            v1: V1Builder::new(),
            v2: V2Builder::new(),
            raw: vec![],
            compressed: vec![],
            snappy: snap::raw::Encoder::new(),
            latencies_us: vec![],
            retry: false,
            stats: Arc::new(Stats::default()),
            stop: Arc::new(AtomicBool::new(false)),
            metadata: BTreeMap::new(),
            send_metadata: true,
        }
    }

    #[test]
    fn requests_decode_to_the_generated_series_in_both_versions() {
        for version in [ProtoVersion::V1, ProtoVersion::V2] {
            let mut sender = test_sender(version);
            let mut expected = Vec::new();
            for id in [1, 2] {
                let mut t = Target::new(id, "node", 1);
                sender.metadata = metadata_for(&t).into_iter().map(|m| (m.metric_family_name.clone(), m)).collect();
                t.scrape(1_700_000_000_000, 10.0, |l, s| {
                    if expected.len() < 2000 {
                        expected.push((l.clone(), s));
                        sender.add(l, s);
                    }
                });
            }
            assert_eq!(sender.pending(), 2000);
            match version {
                ProtoVersion::V1 => sender.v1.finish_into(&mut sender.raw),
                ProtoVersion::V2 => sender.v2.finish_into(&mut sender.raw),
            }
            let body = tessera_protocol::remote_write::compress(&sender.raw);
            let d = decode(version, &decompress(&body, 64 << 20).expect("snappy"), &Limits::default()).expect("valid request");
            assert!(d.invalid.is_empty(), "{:?}", d.invalid.first());
            assert_eq!(d.series.len(), 2000);
            for (got, (l, s)) in d.series.iter().zip(&expected) {
                assert_eq!(&got.labels, l);
                assert_eq!(got.samples.len(), 1);
                assert!(got.samples[0].bits_eq(s));
            }
            if version == ProtoVersion::V2 {
                assert!(d.metadata.iter().any(|m| m.metric_family_name == "node_cpu_seconds_total"
                    && m.kind == tessera_protocol::remote_write::MetricType::Counter));
            }
            // The builder is empty again and reusable.
            assert_eq!(sender.pending(), 0);
        }
    }

    #[test]
    fn fleet_splits_targets_and_churn_sends_stale_markers() {
        let churn = Churn { targets: 10, percent: 10.0 };
        let a = Fleet::new(0, 3, 10, "node", 1, churn);
        let b = Fleet::new(1, 3, 10, "node", 1, churn);
        let c = Fleet::new(2, 3, 10, "node", 1, churn);
        assert_eq!(a.owned.len() + b.owned.len() + c.owned.len(), 10);
        let mut a = a;
        let before = a.owned[0].2.instance.clone();
        let mut sender = test_sender(ProtoVersion::V1);
        // Event 1 replaces slot 0 (owned by sender 0).
        a.churn_to(1, 600_000, &mut sender);
        assert_ne!(a.owned[0].2.instance, before);
        assert!(sender.pending() > 1000, "stale markers for the old series");
        sender.v1.finish_into(&mut sender.raw);
        let d = decode(ProtoVersion::V1, &sender.raw, &Limits::default()).expect("valid");
        assert!(d.series.iter().all(|s| tessera_model::is_stale_nan(s.samples[0].v)));
        assert!(d.series.iter().all(|s| s.labels.get("instance") == before));
        // Event 2 replaces slot 1: not ours.
        a.churn_to(2, 1_200_000, &mut sender);
        assert_eq!(sender.pending(), 0);
    }

    #[test]
    fn end_to_end_against_a_local_listener() {
        // A tiny receiver: decodes every request with our decoder and answers 204 (first one 429 to
        // exercise the retry).
        use std::io::{BufRead, BufReader, Read, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let server = std::thread::spawn(move || -> (usize, usize) {
            let (s, _) = l.accept().expect("accept");
            let mut r = BufReader::new(s.try_clone().expect("clone"));
            let mut w = s;
            let (mut reqs, mut samples) = (0, 0);
            loop {
                let mut line = String::new();
                let mut len = 0usize;
                let mut ct = String::new();
                if r.read_line(&mut line).expect("read") == 0 {
                    return (reqs, samples);
                }
                loop {
                    line.clear();
                    r.read_line(&mut line).expect("hdr");
                    if line.trim().is_empty() {
                        break;
                    }
                    let (n, v) = line.split_once(':').expect("header");
                    if n.eq_ignore_ascii_case("content-length") {
                        len = v.trim().parse().expect("len");
                    }
                    if n.eq_ignore_ascii_case("content-type") {
                        ct = v.trim().to_string();
                    }
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).expect("body");
                reqs += 1;
                if reqs == 1 {
                    w.write_all(b"HTTP/1.1 429 Too Many Requests\r\nRetry-After: 0\r\nContent-Length: 0\r\n\r\n").expect("write");
                    continue;
                }
                let v = tessera_protocol::remote_write::negotiate(Some(&ct), Some("snappy")).expect("content type");
                let d = decode(v, &decompress(&body, 64 << 20).expect("snappy"), &Limits::default()).expect("decodes");
                assert!(d.invalid.is_empty());
                samples += d.valid_samples();
                w.write_all(b"HTTP/1.1 204 No Content\r\n\r\n").expect("write");
            }
        });
        let mut sender = test_sender(ProtoVersion::V2);
        sender.client = Client::new(Url::parse(&format!("http://{addr}/api/v1/write")).expect("url"), Duration::from_secs(5));
        sender.retry = true;
        let mut t = Target::new(1, "node", 1);
        scrape_into(&mut t, 1_700_000_000_000, 10.0, &mut sender, 500);
        sender.flush();
        let n = t.series.len();
        let stats = sender.stats.clone();
        drop(sender);
        let (reqs, samples) = server.join().expect("server");
        assert_eq!(samples, n);
        assert_eq!(reqs, n.div_ceil(500) + 1, "one retried request");
        assert_eq!(stats.samples_accepted.load(Ordering::Relaxed), n as u64);
        assert_eq!(stats.retries.load(Ordering::Relaxed), 1);
    }
}
