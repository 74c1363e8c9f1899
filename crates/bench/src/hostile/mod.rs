//! `tessera-bench hostile`: a mixed hostile soak against a running server (issue 9's "Done means").
//!
//! For `--duration`, two client threads share one server:
//! - the writer ([`writer`]) keeps writing valid remote-write 2.0 requests of a fixed set of series with
//!   current timestamps, remembering every sample of every request answered 204, and between them sends
//!   hostile writes: samples from the far future, a request creating more new series than the
//!   per-request limit, garbage, truncated and snappy-bomb bodies, 1.0 with unsorted labels, oversized
//!   label values and bodies, wrong content types;
//! - the query thread ([`queries`]) runs issue 9's reproducers in rotation (long operator chains,
//!   huge subqueries, a query timeout, a client that hangs up, odd parameters) among seeded random
//!   PromQL, valid (from [`crate::promql_diff::exprgen`] over the written series) and mangled.
//!
//! The main thread monitors: the server's VmRSS and VmHWM every second, `/-/healthy` every few
//! seconds. At the end every acknowledged sample is read back ([`verify`]): each series carries its own
//! values, so the check is exact (same timestamps, same values, nothing missing).
//!
//! Every answer must be a well-formed HTTP response with a status the request kind allows (at most
//! {200, 400, 422, 503} for queries, plus 204, 413 and 415 for writes), within `--slow-after`; any other
//! status, any connection error but the deliberate hang-up, a malformed body or a slow answer is a
//! failure. The report lists requests by kind and status, failures, peak and final RSS, acknowledged and
//! read-back samples and the command line; the run fails (non-zero exit) on any failure.

pub mod queries;
pub mod verify;
pub mod writer;

use crate::disk_usage::proc_memory;
use crate::http::{Client, Response, Url};
use crate::remote_write::parse_duration;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Server base URL, e.g. http://127.0.0.1:19390 (loopback, http:// only).
    #[arg(long)]
    pub url: String,
    /// The server's process id, for its RSS (Linux /proc) and to notice it dying.
    #[arg(long)]
    pub pid: u32,
    /// Wall-clock duration of the hostile phase (the read-back comes after).
    #[arg(long, default_value = "10m", value_parser = parse_duration)]
    pub duration: Duration,
    /// Seed of everything random (queries, garbage bodies).
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Series the writer keeps writing (at least the 69 of promql-diff's catalogue, which the random
    /// queries select; the rest are `hostile_soak_gauge`).
    #[arg(long, default_value_t = 300)]
    pub series: usize,
    /// Pause between the writer's rounds (one valid request and one hostile write per round).
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub write_interval: Duration,
    /// Series of each cardinality bomb (one request of only new series).
    #[arg(long, default_value_t = 200_000)]
    pub bomb_series: usize,
    /// The server's --web.remote-write.max-new-series-per-request (what a bomb should get written).
    #[arg(long, default_value_t = 100_000)]
    pub new_series_limit: usize,
    /// Cardinality bombs per run (each creates `--new-series-limit` series for good, so a bounded few).
    #[arg(long, default_value_t = 2)]
    pub bombs: usize,
    /// An answer slower than this is a failure.
    #[arg(long, default_value = "30s", value_parser = parse_duration)]
    pub slow_after: Duration,
}

/// Counts and latency of one (kind, status) pair.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub count: u64,
    pub total_ms: f64,
    pub max_ms: f64,
}

/// What both threads and the monitor record.
#[derive(Default)]
pub struct Recorder {
    /// (request kind, status or "io-error"/"disconnected") → tally.
    tallies: Mutex<BTreeMap<(String, String), Tally>>,
    failures: Mutex<Vec<String>>,
}

/// How many failures are kept in full (all are counted).
const MAX_FAILURES_KEPT: usize = 200;

impl Recorder {
    pub fn count(&self, kind: &str, status: &str, elapsed: Duration) {
        let ms = elapsed.as_secs_f64() * 1000.0;
        let mut t = self.tallies.lock().expect("tallies lock");
        let e = t.entry((kind.to_string(), status.to_string())).or_default();
        e.count += 1;
        e.total_ms += ms;
        e.max_ms = e.max_ms.max(ms);
    }

    pub fn fail(&self, what: String) {
        eprintln!("FAILURE: {what}");
        let mut f = self.failures.lock().expect("failures lock");
        if f.len() < MAX_FAILURES_KEPT {
            f.push(what);
        } else if f.len() == MAX_FAILURES_KEPT {
            f.push("… further failures not kept".to_string());
        }
    }

    pub fn failures(&self) -> Vec<String> {
        self.failures.lock().expect("failures lock").clone()
    }

    pub fn tallies(&self) -> BTreeMap<(String, String), Tally> {
        self.tallies.lock().expect("tallies lock").clone()
    }

    /// Counts an answer (or error) to a request of `kind` and checks it: a status in `allowed`, in time.
    /// `what` names the request for a failure message. Returns the response when there was one.
    pub fn check(
        &self,
        kind: &str,
        what: &str,
        allowed: &[u16],
        slow_after: Duration,
        elapsed: Duration,
        r: std::io::Result<Response>,
    ) -> Option<Response> {
        match r {
            Ok(resp) => {
                self.count(kind, &resp.status.to_string(), elapsed);
                if !allowed.contains(&resp.status) {
                    self.fail(format!(
                        "{kind}: {what}: status {} (allowed {allowed:?}) after {:.0} ms: {}",
                        resp.status,
                        elapsed.as_secs_f64() * 1000.0,
                        snippet(&resp.body)
                    ));
                }
                if elapsed > slow_after {
                    self.fail(format!("{kind}: {what}: answered {} after {:.1} s (limit {slow_after:?})", resp.status, elapsed.as_secs_f64()));
                }
                Some(resp)
            }
            Err(e) => {
                self.count(kind, "io-error", elapsed);
                self.fail(format!("{kind}: {what}: connection error after {:.0} ms: {e}", elapsed.as_secs_f64() * 1000.0));
                None
            }
        }
    }
}

/// The first 300 characters of a body, on one line.
pub fn snippet(body: &[u8]) -> String {
    let s = String::from_utf8_lossy(body);
    let mut out: String = s.chars().take(300).collect::<String>().replace('\n', "⏎");
    if s.chars().count() > 300 {
        out.push('…');
    }
    out
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// One RSS sample.
#[derive(Debug, Clone, Copy)]
pub struct RssSample {
    pub at_s: f64,
    pub rss_bytes: u64,
    pub hwm_bytes: u64,
}

/// What a run found.
#[derive(Debug, Default)]
pub struct Report {
    pub elapsed: Duration,
    pub tallies: BTreeMap<(String, String), Tally>,
    pub failures: Vec<String>,
    pub rss: Vec<RssSample>,
    pub verified: verify::Verified,
    pub command: String,
}

impl Report {
    pub fn peak_rss_bytes(&self) -> u64 {
        self.rss.iter().map(|s| s.hwm_bytes.max(s.rss_bytes)).max().unwrap_or(0)
    }
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

/// Runs the soak and returns what it found (the caller prints it and decides the exit status).
pub fn run_soak(args: &Args) -> anyhow::Result<Report> {
    let base = Url::parse(&args.url)?;
    let command = format!(
        "tessera-bench hostile --url {} --pid <pid> --duration {}s --seed {} --series {} --write-interval {}ms --bomb-series {} --new-series-limit {} --bombs {} --slow-after {}s",
        args.url,
        args.duration.as_secs_f64(),
        args.seed,
        args.series,
        args.write_interval.as_millis(),
        args.bomb_series,
        args.new_series_limit,
        args.bombs,
        args.slow_after.as_secs_f64(),
    );
    proc_memory(args.pid).map_err(|e| anyhow::anyhow!("cannot read /proc/{}/status: {e}", args.pid))?;
    let rec = Arc::new(Recorder::default());
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let start_ms = now_ms();

    let mut w = writer::Writer::new(args, base.clone(), rec.clone(), stop.clone());
    let writer = std::thread::Builder::new().name("hostile-writer".into()).spawn(move || {
        w.run();
        w
    })?;
    let q_args = args.clone();
    let (q_rec, q_stop) = (rec.clone(), stop.clone());
    let q_base = base.clone();
    let querier = std::thread::Builder::new()
        .name("hostile-queries".into())
        .spawn(move || queries::run(&q_args, q_base, &q_rec, &q_stop, start_ms))?;

    // The monitor.
    let mut rss = Vec::new();
    let mut health = Client::new(base.clone(), Duration::from_secs(10));
    let mut last_health = Instant::now() - Duration::from_secs(60);
    let mut last_progress = Instant::now();
    let mut server_gone = false;
    while started.elapsed() < args.duration {
        std::thread::sleep(Duration::from_secs(1));
        match proc_memory(args.pid) {
            Ok((rss_bytes, hwm_bytes)) if rss_bytes > 0 => {
                rss.push(RssSample { at_s: started.elapsed().as_secs_f64(), rss_bytes, hwm_bytes })
            }
            _ => {
                rec.fail(format!("server process {} is gone (no /proc/{}/status) after {:.0} s", args.pid, args.pid, started.elapsed().as_secs_f64()));
                server_gone = true;
                break;
            }
        }
        if last_health.elapsed() >= Duration::from_secs(5) {
            last_health = Instant::now();
            let t0 = Instant::now();
            let r = health.request("GET", "/-/healthy", &[], &[]);
            rec.check("healthy", "GET /-/healthy", &[200], args.slow_after.min(Duration::from_secs(10)), t0.elapsed(), r);
        }
        if last_progress.elapsed() >= Duration::from_secs(30) {
            last_progress = Instant::now();
            let last = rss.last().copied().unwrap_or(RssSample { at_s: 0.0, rss_bytes: 0, hwm_bytes: 0 });
            let n: u64 = rec.tallies().values().map(|t| t.count).sum();
            eprintln!(
                "[{:>4.0} s] {n} requests, {} failures, RSS {:.0} MiB (peak {:.0} MiB)",
                started.elapsed().as_secs_f64(),
                rec.failures().len(),
                mib(last.rss_bytes),
                mib(last.hwm_bytes)
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    let w = writer.join().map_err(|_| anyhow::anyhow!("the writer thread panicked"))?;
    querier.join().map_err(|_| anyhow::anyhow!("the query thread panicked"))?;
    let elapsed = started.elapsed();

    let mut verified = verify::Verified::default();
    if !server_gone {
        eprintln!("reading back what was acknowledged…");
        verified = verify::verify(&base, &w.acknowledged(), &w.claimed, &rec, args.slow_after);
        // The smallest of a few samples over a second: what the server keeps, not a request's transient
        // allocation caught at the instant of one sample (a leak stays in every sample).
        let mut last: Option<(u64, u64)> = None;
        for i in 0..5 {
            if i > 0 {
                std::thread::sleep(Duration::from_millis(250));
            }
            match proc_memory(args.pid) {
                Ok((r, h)) => last = Some(last.map_or((r, h), |(lr, lh)| (lr.min(r), lh.max(h)))),
                Err(_) => {
                    last = None;
                    break;
                }
            }
        }
        match last {
            Some((rss_bytes, hwm_bytes)) => rss.push(RssSample { at_s: started.elapsed().as_secs_f64(), rss_bytes, hwm_bytes }),
            None => rec.fail(format!("server process {} is gone after the read-back", args.pid)),
        }
    }
    check_rss_growth(&rss, args.duration, &rec);
    Ok(Report {
        elapsed,
        tallies: rec.tallies(),
        failures: rec.failures(),
        rss,
        verified,
        command,
    })
}

/// Flags growth that does not level off: RSS over the last third of the run still rising by more than
/// half of what it was at the start of that third, and by more than 256 MiB (the cardinality bombs and
/// the head's chunks legitimately grow it early on; a leak keeps growing).
fn check_rss_growth(rss: &[RssSample], duration: Duration, rec: &Recorder) {
    let third = duration.as_secs_f64() * 2.0 / 3.0;
    let Some(from) = rss.iter().find(|s| s.at_s >= third) else { return };
    let Some(to) = rss.last() else { return };
    let grew = to.rss_bytes.saturating_sub(from.rss_bytes);
    if grew > from.rss_bytes / 2 && grew > 256 << 20 {
        rec.fail(format!(
            "RSS kept growing: {:.0} MiB at {:.0} s, {:.0} MiB at {:.0} s",
            mib(from.rss_bytes),
            from.at_s,
            mib(to.rss_bytes),
            to.at_s
        ));
    }
}

pub fn print_report(r: &Report) {
    println!("hostile soak: {:.1} s", r.elapsed.as_secs_f64());
    println!("requests by kind and status (count, mean ms, max ms):");
    let mut total = 0;
    for ((kind, status), t) in &r.tallies {
        total += t.count;
        println!("  {kind:<28} {status:<13} {:>8} {:>9.1} {:>9.1}", t.count, t.total_ms / t.count.max(1) as f64, t.max_ms);
    }
    println!("  total {total}");
    let peak = r.peak_rss_bytes();
    let end = r.rss.last().map_or(0, |s| s.rss_bytes);
    println!("server RSS: peak {:.1} MiB, at end {:.1} MiB", mib(peak), mib(end));
    if !r.rss.is_empty() {
        // The first sample of every minute, and the last.
        let mut marks = Vec::new();
        let mut next_mark = 0.0;
        for s in &r.rss {
            if s.at_s >= next_mark {
                marks.push(format!("{:.0}s {:.0}", s.at_s, mib(s.rss_bytes)));
                next_mark = (s.at_s / 60.0).floor() * 60.0 + 60.0;
            }
        }
        if let Some(s) = r.rss.last() {
            marks.push(format!("{:.0}s {:.0}", s.at_s, mib(s.rss_bytes)));
        }
        println!("  RSS (MiB) over time: {}", marks.join(", "));
    }
    let v = &r.verified;
    println!("acknowledged samples (204): {} in {} series; read back exactly: {}", v.acknowledged, v.series, v.read_back);
    println!("samples 400 answers said they wrote: {}; counted back: {}", v.claimed, v.claimed_read_back);
    if r.failures.is_empty() {
        println!("failures: none");
    } else {
        println!("failures: {}", r.failures.len());
        for f in &r.failures {
            println!("  {f}");
        }
    }
    println!("rerun: {}", r.command);
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let report = run_soak(&args)?;
    print_report(&report);
    anyhow::ensure!(report.failures.is_empty(), "{} failure(s); see the report above", report.failures.len());
    anyhow::ensure!(
        report.verified.acknowledged == report.verified.read_back && report.verified.acknowledged > 0,
        "{} acknowledged samples, {} read back",
        report.verified.acknowledged,
        report.verified.read_back
    );
    Ok(())
}
