//! B4: remote read against any receiver (Tessera or Prometheus).
//!
//! `--load` writes `--series` series × `--hours` of samples every 15 s ending now (remote write 1.0,
//! time slice after time slice so every receiver accepts them in order). Then the newest 2 h (head data
//! in a server that keeps the last 2-3 h in its head), the oldest 2 h (block data) and the full range are
//! read with `SAMPLES` and with `STREAMED_XOR_CHUNKS`; every frame's CRC is checked, every chunk decoded
//! and every sample compared with the generator ([`value`]), so the figures are only reported for a
//! correct answer. Reported: latency, bytes received, samples decoded, and with `--pid`
//! the server's peak RSS growth during the request: a thread samples `/proc/<pid>/status` `VmRSS` every
//! ~5 ms (`VmHWM` cannot be reset between requests) and growth = max during − value just before.
//!
//! Key decision: the series are synthetic and deterministic (`rr_bench{series="k"}`, value a function of
//! k and t) so that the harness can check a read from a target it did not load in this run.

use crate::http::{Client, Url};
use anyhow::{bail, ensure, Context};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_model::{Labels, MatchOp, Matcher, Sample};
use tessera_protocol::prompb;
use tessera_protocol::remote_read::{self as rr, FrameReader};
use tessera_protocol::remote_write::{compress, V1Builder};

const STEP_MS: i64 = 15_000;
const METRIC: &str = "rr_bench";

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Base URL of the target, e.g. http://127.0.0.1:9090 (paths /api/v1/write and /api/v1/read are appended).
    #[arg(long)]
    pub url: String,
    #[arg(long, default_value_t = 10_000)]
    pub series: usize,
    #[arg(long, default_value_t = 8)]
    pub hours: i64,
    /// Load the data first (remote write).
    #[arg(long)]
    pub load: bool,
    /// End of the data, unix ms (default: now rounded down to 15 s when loading; required to read only).
    #[arg(long)]
    pub end_ms: Option<i64>,
    /// PID of the server, to report its RSS growth per request.
    #[arg(long)]
    pub pid: Option<u32>,
    /// Only the streamed mode (SAMPLES for 10k series × 8 h costs the server ~800 MiB and seconds).
    #[arg(long)]
    pub streamed_only: bool,
    /// Repetitions of each read (the best latency and the largest RSS growth are reported).
    #[arg(long, default_value_t = 2)]
    pub repeat: usize,
}

/// The generator: a counter-like value per series.
pub fn value(series: usize, t: i64) -> f64 {
    (series as f64) * 0.5 + ((t / STEP_MS) % 100_000) as f64
}

fn labels_of(k: usize) -> Labels {
    Labels::from_pairs([
        ("__name__", METRIC.to_string()),
        ("instance", format!("host-{}", k / 100)),
        ("job", "rr_bench".to_string()),
        ("series", k.to_string()),
    ])
}

fn base(url: &str) -> String {
    url.trim_end_matches('/').trim_end_matches("/api/v1/read").trim_end_matches("/api/v1/write").to_string()
}

fn load(args: &Args, end: i64) -> anyhow::Result<()> {
    let start = end - args.hours * 3_600_000;
    let mut client = Client::new(Url::parse(&format!("{}/api/v1/write", base(&args.url)))?, Duration::from_secs(60));
    let labels: Vec<Labels> = (0..args.series).map(labels_of).collect();
    // 10 minutes of every series per round; each request ≤ ~40k samples.
    let slice = 10 * 60_000;
    let per_req = (40_000 / (slice / STEP_MS) as usize).max(1);
    let t0 = Instant::now();
    let mut sent = 0u64;
    let mut b = V1Builder::new();
    let mut buf = Vec::new();
    let mut from = start;
    while from <= end {
        let to = (from + slice).min(end + 1);
        for group in labels.chunks(per_req) {
            for l in group {
                let k: usize = l.get("series").parse().expect("numeric");
                let s: Vec<Sample> = (from..to).step_by(STEP_MS as usize).map(|t| Sample { t, v: value(k, t) }).collect();
                sent += s.len() as u64;
                b.add_series(l, &s);
            }
            b.finish_into(&mut buf);
            let body = compress(&buf);
            let r = client
                .post(
                    &[
                        ("Content-Type", "application/x-protobuf"),
                        ("Content-Encoding", "snappy"),
                        ("X-Prometheus-Remote-Write-Version", "0.1.0"),
                    ],
                    &body,
                )
                .context("remote write")?;
            if !(200..300).contains(&r.status) {
                bail!("remote write answered {}: {}", r.status, String::from_utf8_lossy(&r.body));
            }
        }
        from = to;
    }
    let secs = t0.elapsed().as_secs_f64();
    println!("loaded {sent} samples ({} series × {} h at 15 s) in {secs:.1} s ({:.0} samples/s)", args.series, args.hours, sent as f64 / secs);
    Ok(())
}

/// (VmRSS, RssAnon) in KiB. RssAnon leaves out file pages of the mmap'd blocks a read touches (page
/// cache the kernel can drop at will), so it is what the request itself allocated.
fn rss_kib(pid: u32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let get = |k: &str| s.lines().find_map(|l| l.strip_prefix(k)).and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok());
    Some((get("VmRSS:")?, get("RssAnon:").unwrap_or(0)))
}

/// Samples VmRSS every ~5 ms until dropped; `peak()` is the max seen.
struct RssWatch {
    stop: Arc<AtomicBool>,
    peak: Arc<AtomicU64>,
    peak_anon: Arc<AtomicU64>,
    h: Option<std::thread::JoinHandle<()>>,
}

impl RssWatch {
    fn start(pid: u32) -> RssWatch {
        let stop = Arc::new(AtomicBool::new(false));
        let now = rss_kib(pid).unwrap_or((0, 0));
        let peak = Arc::new(AtomicU64::new(now.0));
        let peak_anon = Arc::new(AtomicU64::new(now.1));
        let (s, p, pa) = (stop.clone(), peak.clone(), peak_anon.clone());
        let h = std::thread::spawn(move || {
            while !s.load(Ordering::Relaxed) {
                if let Some((v, a)) = rss_kib(pid) {
                    p.fetch_max(v, Ordering::Relaxed);
                    pa.fetch_max(a, Ordering::Relaxed);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        RssWatch { stop, peak, peak_anon, h: Some(h) }
    }

    fn finish(mut self) -> (u64, u64) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.h.take() {
            let _ = h.join();
        }
        (self.peak.load(Ordering::Relaxed), self.peak_anon.load(Ordering::Relaxed))
    }
}

/// What one read returned, checked.
struct Checked {
    series: usize,
    samples: u64,
    frames: usize,
}

/// Checks one series' in-range samples against the generator and the expected grid.
fn check_series(labels: &[prompb::Label], samples: &[Sample], start: i64, end: i64, data_start: i64, data_end: i64) -> anyhow::Result<()> {
    let k: usize = labels
        .iter()
        .find(|l| l.name == "series")
        .context("series label")?
        .value
        .parse()
        .context("series label value")?;
    let first = start.max(data_start);
    let first = first + (STEP_MS - (first - data_start).rem_euclid(STEP_MS)) % STEP_MS;
    let last = end.min(data_end);
    let want = if last >= first { ((last - first) / STEP_MS + 1) as usize } else { 0 };
    ensure!(samples.len() == want, "series {k}: {} samples in range, want {want}", samples.len());
    for (i, s) in samples.iter().enumerate() {
        let t = first + i as i64 * STEP_MS;
        ensure!(s.t == t && s.v == value(k, t), "series {k}: sample {i} is ({}, {}), want ({t}, {})", s.t, s.v, value(k, t));
    }
    Ok(())
}

fn check_samples(body: &[u8], start: i64, end: i64, data: (i64, i64)) -> anyhow::Result<Checked> {
    let resp = rr::decode_samples_response(body, 1 << 31).context("ReadResponse")?;
    ensure!(resp.results.len() == 1, "{} results", resp.results.len());
    let mut c = Checked { series: 0, samples: 0, frames: 0 };
    for ts in &resp.results[0].timeseries {
        let s: Vec<Sample> = ts.samples.iter().map(|s| Sample { t: s.timestamp, v: s.value }).collect();
        check_series(&ts.labels, &s, start, end, data.0, data.1)?;
        c.series += 1;
        c.samples += s.len() as u64;
    }
    Ok(c)
}

fn check_streamed(body: &[u8], start: i64, end: i64, data: (i64, i64)) -> anyhow::Result<Checked> {
    let mut r = FrameReader::new(body, 64 << 20);
    let mut c = Checked { series: 0, samples: 0, frames: 0 };
    let mut cur: Option<(Vec<prompb::Label>, Vec<Sample>)> = None;
    let mut scratch = Vec::new();
    let finish = |cur: Option<(Vec<prompb::Label>, Vec<Sample>)>, c: &mut Checked| -> anyhow::Result<()> {
        if let Some((l, s)) = cur {
            check_series(&l, &s, start, end, data.0, data.1)?;
            c.series += 1;
            c.samples += s.len() as u64;
        }
        Ok(())
    };
    while let Some(f) = r.next_response() {
        let f = f.context("frame")?;
        c.frames += 1;
        ensure!(f.query_index == 0, "query index {}", f.query_index);
        for cs in f.chunked_series {
            if cur.as_ref().is_none_or(|(l, _)| *l != cs.labels) {
                finish(cur.take(), &mut c)?;
                cur = Some((cs.labels.clone(), Vec::new()));
            }
            let out = &mut cur.as_mut().expect("set").1;
            for ch in cs.chunks {
                ensure!(ch.r#type == 1, "chunk encoding {}", ch.r#type);
                scratch.clear();
                tessera_encoding::decode_xor_into(&ch.data, &mut scratch).map_err(|e| anyhow::anyhow!("chunk: {e}"))?;
                ensure!(scratch.first().map(|s| s.t) == Some(ch.min_time_ms), "chunk min time");
                ensure!(scratch.last().map(|s| s.t) == Some(ch.max_time_ms), "chunk max time");
                if let Some(p) = out.last() {
                    ensure!(p.t < ch.min_time_ms, "chunks out of order");
                }
                out.extend(scratch.iter().copied().filter(|s| s.t >= start && s.t <= end));
            }
        }
    }
    finish(cur.take(), &mut c)?;
    Ok(c)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let end = match (args.end_ms, args.load) {
        (Some(e), _) => e,
        (None, true) => now_ms() / STEP_MS * STEP_MS,
        (None, false) => bail!("--end-ms is required without --load (the end of the loaded data)"),
    };
    let data_start = end - args.hours * 3_600_000;
    let data_end = end;
    if args.load {
        load(&args, end)?;
        println!("data: [{data_start}, {end}] (pass --end-ms {end} to read again without loading)");
    }
    let read_url = Url::parse(&format!("{}/api/v1/read", base(&args.url)))?;
    let matchers = vec![Matcher::new(MatchOp::Equal, "__name__", METRIC)?, Matcher::new(MatchOp::Equal, "job", "rr_bench")?];
    // The newest 2 h (in a Tessera that was not restarted, mostly the head), the oldest 2 h (blocks) and
    // the whole range: the memory test compares the whole range with the 2 h reads.
    let h2 = 2 * 3_600_000;
    let mut ranges: Vec<(&str, i64, i64)> = vec![("2 h newest", end - h2, end)];
    if args.hours > 2 {
        ranges.push(("2 h oldest", data_start, data_start + h2));
        ranges.push(("full", data_start, end));
    }
    println!("| mode | range | series | samples | frames | bytes received | latency | server VmRSS growth | server RssAnon growth |");
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut growth: HashMap<(bool, &str), (u64, u64)> = HashMap::new();
    let modes: &[bool] = if args.streamed_only { &[true] } else { &[true, false] };
    for &streamed in modes {
        for &(name, start, end) in &ranges {
            let req = prompb::ReadRequest {
                queries: vec![prompb::Query {
                    start_timestamp_ms: start,
                    end_timestamp_ms: end,
                    matchers: rr::from_matchers(&matchers),
                    hints: None,
                }],
                accepted_response_types: if streamed { vec![1] } else { vec![0] },
            };
            let body = rr::encode_request(&req);
            let mut best = f64::MAX;
            let mut max_growth = (0u64, 0u64);
            let mut last = None;
            for _ in 0..args.repeat.max(1) {
                let before = args.pid.and_then(rss_kib);
                let watch = args.pid.map(RssWatch::start);
                let t0 = Instant::now();
                let r = post_unbounded(&read_url, &body)?;
                let dt = t0.elapsed().as_secs_f64();
                let peak = watch.map(RssWatch::finish);
                if r.status != 200 {
                    bail!("read answered {}: {}", r.status, String::from_utf8_lossy(&r.body));
                }
                let data = (data_start, data_end);
                let checked = if streamed {
                    check_streamed(&r.body, start, end, data)?
                } else {
                    check_samples(&r.body, start, end, data)?
                };
                ensure!(checked.series == args.series, "{} series returned, want {}", checked.series, args.series);
                best = best.min(dt);
                if let (Some(b), Some(p)) = (before, peak) {
                    max_growth.0 = max_growth.0.max(p.0.saturating_sub(b.0));
                    max_growth.1 = max_growth.1.max(p.1.saturating_sub(b.1));
                }
                last = Some((checked, r.body.len()));
            }
            let (c, bytes) = last.expect("ran at least once");
            growth.insert((streamed, name), max_growth);
            println!(
                "| {} | {name} | {} | {} | {} | {:.1} MiB | {:.2} s | {} | {} |",
                if streamed { "STREAMED_XOR_CHUNKS" } else { "SAMPLES" },
                c.series,
                c.samples,
                c.frames,
                bytes as f64 / 1048576.0,
                best,
                if args.pid.is_some() { format!("{:.1} MiB", max_growth.0 as f64 / 1024.0) } else { "-".into() },
                if args.pid.is_some() { format!("{:.1} MiB", max_growth.1 as f64 / 1024.0) } else { "-".into() }
            );
        }
    }
    if args.pid.is_some() && args.hours > 2 {
        let full = growth[&(true, "full")];
        let two = growth[&(true, "2 h oldest")].0.max(growth[&(true, "2 h newest")].0);
        let mib = |k: u64| k as f64 / 1024.0;
        let verdict = |k: u64| if mib(k) < 16.0 { "PASS" } else { "FAIL" };
        // "Does not grow with the range": the full read may exceed the larger 2 h read by at most 2 MiB.
        let flat = if mib(full.0) <= mib(two) + 2.0 { "PASS" } else { "FAIL" };
        println!(
            "memory test (streamed, {} h): VmRSS growth {:.1} MiB, < 16 MiB {}; vs 2 h ({:.1} MiB) flat {flat}; RssAnon growth {:.1} MiB",
            args.hours,
            mib(full.0),
            verdict(full.0),
            mib(two),
            mib(full.1),
        );
    }
    Ok(())
}

/// One read: `crate::http::Client` caps bodies at 64 MiB, and a `SAMPLES` answer for 10k series × 8 h
/// is larger. HTTP/1.0 with `Connection: close` makes any server (hyper, Go) send a streamed body
/// close-delimited, so reading to the end is the whole body; no chunked decoding needed.
fn post_unbounded(url: &Url, body: &[u8]) -> anyhow::Result<crate::http::Response> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(&url.host_port).context("connect")?;
    s.set_read_timeout(Some(Duration::from_secs(600)))?;
    write!(
        s,
        "POST {} HTTP/1.0\r\nHost: {}\r\nUser-Agent: tessera-bench\r\nContent-Type: application/x-protobuf\r\nContent-Encoding: snappy\r\nX-Prometheus-Remote-Read-Version: 0.1.0\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
        url.path,
        url.host_port,
        body.len()
    )?;
    s.write_all(body)?;
    let mut all = Vec::new();
    s.read_to_end(&mut all).context("reading the answer")?;
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").context("no end of headers")?;
    let head = std::str::from_utf8(&all[..end]).context("headers not UTF-8")?;
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .context("status line")?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':').map(|(n, v)| (n.trim().to_string(), v.trim().to_string())))
        .collect();
    ensure!(
        !headers.iter().any(|(n, v)| n.eq_ignore_ascii_case("transfer-encoding") && v.contains("chunked")),
        "server answered HTTP/1.0 with a chunked body"
    );
    let body = all.split_off(end + 4);
    Ok(crate::http::Response { status, headers, body })
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}
