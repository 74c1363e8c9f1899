//! Issue 13's isolation figure: one store at its ingestion limit does not slow another's writes.
//!
//! Against a running `tessera serve` with two stores, e.g. a config file holding
//! `[stores.noisy]` with `web.remote-write.ingestion-rate = 1000` and `[stores.quiet]`: a steady writer
//! sends `--batch`-sample remote-write requests to the quiet store back to back for `--duration`, first
//! alone, then while `--noisy-writers` threads flood the noisy store with batches it refuses (429) or
//! takes. Prints the quiet writer's requests/s and p50/p99/max latency in both phases, the noisy answers
//! by status, and the command that reproduces it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_model::{Labels, Sample};
use tessera_protocol::remote_write::{compress, encode_v1, WriteSeries};

use crate::http::{Client, Url};

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Base URL of the server (`http://127.0.0.1:9090`).
    #[arg(long)]
    pub url: String,
    /// The store that stays within its limits.
    #[arg(long, default_value = "quiet")]
    pub quiet: String,
    /// The store flooded past its ingestion rate.
    #[arg(long, default_value = "noisy")]
    pub noisy: String,
    /// Seconds per phase.
    #[arg(long, default_value_t = 15)]
    pub duration: u64,
    /// Threads flooding the noisy store.
    #[arg(long, default_value_t = 2)]
    pub noisy_writers: usize,
    /// Samples per request.
    #[arg(long, default_value_t = 100)]
    pub batch: usize,
}

/// `n` series of `writer`, one sample each at `t` (as a scrape sends them).
fn body(writer: &str, t: i64, n: usize) -> Vec<u8> {
    let series: Vec<WriteSeries> = (0..n)
        .map(|i| {
            let l = Labels::from_pairs([("__name__", "isolation_test".to_string()), ("writer", writer.to_string()), ("i", i.to_string())]);
            WriteSeries::new(l, vec![Sample::new(t, i as f64)])
        })
        .collect();
    compress(&encode_v1(&series, &[]))
}

/// A timestamp after `last`, near now.
fn next_t(last: &mut i64) -> i64 {
    *last = now_ms().max(*last + 1);
    *last
}

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The quiet writer for `secs` (`batch` series a request, one sample each): latencies of its 2xx answers, and the count of others.
fn quiet_phase(a: &Args, secs: u64, tag: &str) -> anyhow::Result<(Vec<Duration>, u64)> {
    let url = Url::parse(&format!("{}/store/{}/api/v1/write", a.url.trim_end_matches('/'), a.quiet))?;
    let mut c = Client::new(url, Duration::from_secs(30));
    let (mut lat, mut bad) = (Vec::new(), 0u64);
    let end = Instant::now() + Duration::from_secs(secs);
    let mut t = 0;
    while Instant::now() < end {
        let b = body(tag, next_t(&mut t), a.batch);
        let s = Instant::now();
        let r = c.post(&[("Content-Type", "application/x-protobuf"), ("Content-Encoding", "snappy")], &b)?;
        if (200..300).contains(&r.status) {
            lat.push(s.elapsed());
        } else {
            bad += 1;
        }
    }
    lat.sort();
    Ok((lat, bad))
}

fn pct(v: &[Duration], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() - 1) as f64 * p).round() as usize].as_secs_f64() * 1000.0
}

/// The quiet writer while `a.noisy_writers` threads flood `target`: its latencies and refusals, and the
/// flood's answers by status class (index 0: transport errors).
fn flooded(a: &Args, target: &str, tag: &str) -> anyhow::Result<(Vec<Duration>, u64, Vec<u64>)> {
    let stop = Arc::new(AtomicBool::new(false));
    let statuses: Arc<[AtomicU64; 6]> = Arc::new(Default::default());
    let mut floods = Vec::new();
    for w in 0..a.noisy_writers {
        let (stop, statuses) = (stop.clone(), statuses.clone());
        let url = Url::parse(&format!("{}/store/{target}/api/v1/write", a.url.trim_end_matches('/')))?;
        let batch = a.batch * 10;
        floods.push(std::thread::spawn(move || {
            let mut c = Client::new(url, Duration::from_secs(30));
            // One body, sent again and again: the flood costs the client little (this machine's two
            // cores are shared with the server).
            let b = body(&format!("flood-{w}"), now_ms(), batch);
            while !stop.load(Ordering::Relaxed) {
                match c.post(&[("Content-Type", "application/x-protobuf"), ("Content-Encoding", "snappy")], &b) {
                    Ok(r) => statuses[(r.status / 100).min(5) as usize].fetch_add(1, Ordering::Relaxed),
                    Err(_) => statuses[0].fetch_add(1, Ordering::Relaxed),
                };
            }
        }));
    }
    let (lat, bad) = quiet_phase(a, a.duration, tag)?;
    stop.store(true, Ordering::Relaxed);
    for f in floods {
        let _ = f.join();
    }
    Ok((lat, bad, statuses.iter().map(|x| x.load(Ordering::Relaxed)).collect()))
}

pub fn run(a: Args) -> anyhow::Result<()> {
    println!("command: tessera-bench store-isolation --url {} --quiet {} --noisy {} --duration {} --noisy-writers {} --batch {}",
        a.url, a.quiet, a.noisy, a.duration, a.noisy_writers, a.batch);
    let (alone, bad_alone) = quiet_phase(&a, a.duration, "alone")?;
    // The same flood against the noisy store (refused for its rate), then against a store that does
    // not exist (404, the cheapest answer there is): the second is what any flood of requests costs the
    // quiet writer on this machine, client threads included.
    let (noisy, bad_noisy, s) = flooded(&a, &a.noisy, "beside")?;
    let (control, bad_control, sc) = flooded(&a, "no-such-store-for-isolation", "control")?;
    let rate = |v: &[Duration]| v.len() as f64 / a.duration as f64;
    println!("| quiet store's writes ({} series × 1 sample a request, back to back) | requests/s | p50 ms | p99 ms | max ms | refused |", a.batch);
    println!("|---|---|---|---|---|---|");
    for (what, v, bad) in [
        ("alone", &alone, bad_alone),
        ("beside a store flooded past its rate (429s)", &noisy, bad_noisy),
        ("beside a flood of requests to no store (404s, control)", &control, bad_control),
    ] {
        println!(
            "| {what} | {:.0} | {:.2} | {:.2} | {:.2} | {bad} |",
            rate(v),
            pct(v, 0.5),
            pct(v, 0.99),
            v.last().map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0)
        );
    }
    println!(
        "noisy store ({} writers, requests of {} series × 1 sample): 2xx {}, 4xx {} (429 over its rate), 5xx {}, errors {}",
        a.noisy_writers,
        a.batch * 10,
        s[2],
        s[4],
        s[5],
        s[0]
    );
    println!("control flood: 2xx {}, 4xx {}, 5xx {}, errors {}", sc[2], sc[4], sc[5], sc[0]);
    println!(
        "p50 ratios: beside the rate-limited flood / alone {:.2}, beside the control flood / alone {:.2}",
        pct(&noisy, 0.5) / pct(&alone, 0.5),
        pct(&control, 0.5) / pct(&alone, 0.5)
    );
    Ok(())
}
