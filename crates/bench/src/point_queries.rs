//! `tessera-bench b6`: point queries at high QPS (B6 in ../shared/BENCHMARKS.md), against any
//! Prometheus-API base URL holding the B2/B3 fleet data.
//!
//! `--clients` threads, each with its own kept-alive connection ([`crate::http::Client`]), issue GET
//! instant queries at the evaluation time (`--time`, else the data's end as in B3) for `--duration`,
//! back to back. Each query selects one or a few series of one instance: `node_load1{instance=…}`,
//! `up{instance=…}` (the series a Prometheus scrape adds, which the generator writes too), and
//! `rate(node_network_receive_bytes_total{instance=…,device="eth0"}[5m])`. The instances are those with
//! an `up` series at the evaluation time (`count by (instance) (up)`), shuffled by `--seed` (at most
//! `--instances` of them); the query list is instance by instance, and each client walks it round robin
//! from its own offset, so the clients ask about different instances at any moment.
//!
//! Reported per client count: answered queries per second, the p50 / p99 / p99.9 latency of the
//! answered (HTTP 200) queries, errors (any other status or an I/O error; the first of each client
//! count is printed), and answers with an empty result (a sign of a wrong `--time`).
//!
//! CPU per answered query: the harness' own (user + system time of this process, from
//! `/proc/self/stat`) and, given `--pid`, the server's (the same of that process). The clients run on
//! the machine they measure, so their CPU bounds the queries/s any server can reach here:
//! `cores / (client CPU + server CPU per query)`; the server's figure compares systems' work per query
//! where queries/s alone would compare the sum.

use crate::http::{Client, Url};
use crate::nodegen::Rng;
use crate::prom_query::{self, percentile, secs, Api};
use crate::remote_write::parse_duration;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The point queries, `{instance}` replaced by an instance's label value.
pub const POINT_QUERIES: &[&str] = &[
    r#"node_load1{instance="{instance}"}"#,
    r#"up{instance="{instance}"}"#,
    r#"rate(node_network_receive_bytes_total{instance="{instance}",device="eth0"}[5m])"#,
];

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Prometheus-API base URL, e.g. http://127.0.0.1:9090.
    #[arg(long)]
    pub url: String,
    /// Evaluation time, unix ms. Default: the data's end, max(timestamp(node_load1)).
    #[arg(long)]
    pub time: Option<i64>,
    /// How long each client count runs.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Concurrent clients (connections); one run per value.
    #[arg(long, value_delimiter = ',', default_value = "16,64")]
    pub clients: Vec<usize>,
    /// Use at most this many instances (chosen at random). Default: all with data.
    #[arg(long)]
    pub instances: Option<usize>,
    /// Seed of the instance choice and order.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Per-request timeout.
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// The server's process id: its CPU per query is reported too (Linux, `/proc/<pid>/stat`).
    #[arg(long)]
    pub pid: Option<u32>,
}

/// User + system CPU seconds of a process so far, from `/proc/<pid>/stat` (fields 14 and 15, in the
/// kernel's `USER_HZ` ticks, 100 a second on Linux for every architecture's user interface). `None`
/// where there is no such file.
pub fn process_cpu_s(pid: &str) -> Option<f64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu_s(&s)
}

/// [`process_cpu_s`]' parsing: the command name (field 2) is in parentheses and may hold blanks and
/// parentheses itself, so the fields are counted from the last `)`.
fn parse_stat_cpu_s(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    // After the name: state (field 3) is the first, so utime (14) and stime (15) are the 12th and 13th.
    let mut f = rest.split_ascii_whitespace().skip(11);
    let utime: u64 = f.next()?.parse().ok()?;
    let stime: u64 = f.next()?.parse().ok()?;
    Some((utime + stime) as f64 / 100.0)
}

/// One instance label value quoted for a PromQL string literal.
fn quote_label(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"")
}

/// The GET paths of every (instance, query), instance by instance.
pub fn query_paths(api_path: &str, instances: &[String], time_ms: i64) -> Vec<String> {
    let t = secs(time_ms);
    let mut out = Vec::with_capacity(instances.len() * POINT_QUERIES.len());
    for inst in instances {
        for q in POINT_QUERIES {
            let expr = q.replace("{instance}", &quote_label(inst));
            let qs = form_urlencoded::Serializer::new(String::new()).append_pair("query", &expr).append_pair("time", &t).finish();
            out.push(format!("{api_path}?{qs}"));
        }
    }
    out
}

/// Fisher-Yates with the generator's RNG.
fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
}

/// What one client did.
#[derive(Default)]
struct ClientResult {
    latencies_us: Vec<u32>,
    errors: u64,
    empty: u64,
}

/// One figure line.
struct Figures {
    clients: usize,
    wall_s: f64,
    answered: usize,
    p50_ms: f64,
    p99_ms: f64,
    p999_ms: f64,
    max_ms: f64,
    errors: u64,
    empty: u64,
    /// CPU seconds the harness and (given `--pid`) the server spent during the run.
    client_cpu_s: Option<f64>,
    server_cpu_s: Option<f64>,
}

impl Figures {
    /// CPU microseconds per answered query.
    fn per_query_us(&self, cpu_s: Option<f64>) -> String {
        match cpu_s {
            Some(s) if self.answered > 0 => format!("{:.1}", s * 1e6 / self.answered as f64),
            _ => "—".to_string(),
        }
    }
}

fn run_clients(
    url: &Url,
    paths: &Arc<Vec<String>>,
    clients: usize,
    duration: Duration,
    timeout: Duration,
    pid: Option<u32>,
) -> anyhow::Result<Figures> {
    let shown = Arc::new(AtomicBool::new(false));
    let server = pid.map(|p| p.to_string());
    let cpu = || (process_cpu_s("self"), server.as_deref().and_then(process_cpu_s));
    let (client0, server0) = cpu();
    let start = Instant::now();
    let deadline = start + duration;
    let mut handles = Vec::with_capacity(clients);
    for c in 0..clients {
        let (url, paths, shown) = (url.clone(), paths.clone(), shown.clone());
        handles.push(std::thread::Builder::new().name(format!("b6-client-{c}")).spawn(move || {
            let mut client = Client::new(url, timeout);
            let mut res = ClientResult::default();
            let mut i = c * paths.len() / clients;
            while Instant::now() < deadline {
                let path = &paths[i % paths.len()];
                i += 1;
                let t0 = Instant::now();
                let r = client.get(path);
                let us = t0.elapsed().as_micros().min(u32::MAX as u128) as u32;
                match r {
                    Ok(resp) if resp.status == 200 => {
                        res.latencies_us.push(us);
                        // The servers' JSON has no blanks; an empty result is `"result":[]`.
                        if resp.body.windows(11).any(|w| w == b"\"result\":[]") {
                            res.empty += 1;
                        }
                    }
                    other => {
                        res.errors += 1;
                        if !shown.swap(true, Ordering::Relaxed) {
                            match other {
                                Ok(resp) => {
                                    let body = String::from_utf8_lossy(&resp.body[..resp.body.len().min(300)]).into_owned();
                                    eprintln!("b6: first error: HTTP {} for {path}: {}", resp.status, body.trim());
                                }
                                Err(e) => eprintln!("b6: first error: {e} for {path}"),
                            }
                        }
                        if res.errors > 100 && res.latencies_us.is_empty() {
                            // Nothing but errors: do not spin.
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                }
            }
            res
        })?);
    }
    let mut lat = Vec::new();
    let (mut errors, mut empty) = (0, 0);
    for h in handles {
        let r = h.join().map_err(|_| anyhow::anyhow!("a client thread panicked"))?;
        lat.extend(r.latencies_us);
        errors += r.errors;
        empty += r.empty;
    }
    let wall_s = start.elapsed().as_secs_f64();
    let (client1, server1) = cpu();
    let spent = |a: Option<f64>, b: Option<f64>| Some(b? - a?);
    let mut ms: Vec<f64> = lat.iter().map(|us| *us as f64 / 1000.0).collect();
    ms.sort_by(f64::total_cmp);
    Ok(Figures {
        clients,
        wall_s,
        answered: ms.len(),
        p50_ms: percentile(&ms, 0.5),
        p99_ms: percentile(&ms, 0.99),
        p999_ms: percentile(&ms, 0.999),
        max_ms: percentile(&ms, 1.0),
        errors,
        empty,
        client_cpu_s: spent(client0, client1),
        server_cpu_s: spent(server0, server1),
    })
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(!args.clients.is_empty() && args.clients.iter().all(|c| *c > 0), "--clients wants positive counts");
    let url = Url::parse(&args.url)?;
    let mut api = Api::new(&args.url, Duration::from_secs(120), crate::http::DEFAULT_MAX_BODY_BYTES)?;
    let eval_ms = prom_query::evaluation_time_ms(&mut api, args.time, prom_query::now_ms())?;
    let v = prom_query::success_json(&api.instant("count by (instance) (up)", eval_ms)?.1)?;
    let mut instances: Vec<String> = prom_query::points(&v)
        .iter()
        .filter_map(|(m, _, _)| m.and_then(|m| m.get("instance")).and_then(|i| i.as_str()).map(str::to_string))
        .collect();
    anyhow::ensure!(!instances.is_empty(), "no `up` series at time {eval_ms} ({}): no data there? (pass --time MS)", secs(eval_ms));
    instances.sort();
    let present = instances.len();
    shuffle(&mut instances, &mut Rng::new(args.seed));
    instances.truncate(args.instances.unwrap_or(usize::MAX).max(1));
    let paths = Arc::new(query_paths(&api.path("/api/v1/query"), &instances, eval_ms));
    let mut command = format!(
        "tessera-bench b6 --url {} --time {eval_ms} --duration {}s --clients {} --seed {}",
        args.url,
        args.duration.as_secs_f64(),
        args.clients.iter().map(usize::to_string).collect::<Vec<_>>().join(","),
        args.seed
    );
    if let Some(n) = args.instances {
        command += &format!(" --instances {n}");
    }
    if args.pid.is_some() {
        command += " --pid PID";
    }
    println!(
        "b6: {} at time {eval_ms} ({}): {} of {present} instances × {} queries, {} s per client count",
        args.url,
        secs(eval_ms),
        instances.len(),
        POINT_QUERIES.len(),
        args.duration.as_secs_f64()
    );
    for q in POINT_QUERIES {
        println!("b6:   {q}");
    }
    println!("b6: {command}");
    let mut rows = Vec::new();
    for &c in &args.clients {
        let f = run_clients(&url, &paths, c, args.duration, args.timeout, args.pid)?;
        eprintln!("b6: {c} clients: {:.0} queries/s, p99 {:.2} ms, {} errors", f.answered as f64 / f.wall_s, f.p99_ms, f.errors);
        rows.push(f);
    }
    println!();
    println!("| clients | queries/s | p50 ms | p99 ms | p99.9 ms | max ms | answered | errors | empty answers | client CPU µs/query | server CPU µs/query |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for f in &rows {
        println!(
            "| {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.1} | {} | {} | {} | {} | {} |",
            f.clients,
            f.answered as f64 / f.wall_s,
            f.p50_ms,
            f.p99_ms,
            f.p999_ms,
            f.max_ms,
            f.answered,
            f.errors,
            f.empty,
            f.per_query_us(f.client_cpu_s),
            f.per_query_us(f.server_cpu_s)
        );
    }
    println!("\nlatency of answered (HTTP 200) queries, {:.0} s per row; command: {command}", args.duration.as_secs_f64());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_quote_the_instance_and_cycle_instance_by_instance() {
        let p = query_paths("/api/v1/query", &["host-000001:9100".to_string(), "we\"ird".to_string()], 1_700_000_000_500);
        assert_eq!(p.len(), 6);
        assert_eq!(p[0], "/api/v1/query?query=node_load1%7Binstance%3D%22host-000001%3A9100%22%7D&time=1700000000.500");
        assert!(p[1].starts_with("/api/v1/query?query=up%7B"));
        assert!(p[2].contains("device%3D%22eth0%22"));
        let q: Vec<(String, String)> = form_urlencoded::parse(p[3].split_once('?').expect("query").1.as_bytes()).into_owned().collect();
        assert_eq!(q[0].1, r#"node_load1{instance="we\"ird"}"#);
    }

    #[test]
    fn stat_cpu_counts_fields_after_the_last_parenthesis() {
        // utime 250 and stime 50 ticks; the name holds a blank and a parenthesis.
        let stat = "4242 (tessera (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 5 0 100 0 0";
        assert_eq!(parse_stat_cpu_s(stat), Some(3.0));
        assert_eq!(parse_stat_cpu_s("4242 (short) S 1"), None);
        assert_eq!(parse_stat_cpu_s("no parenthesis"), None);
        let own = process_cpu_s("self").expect("/proc/self/stat on Linux");
        assert!(own >= 0.0);
    }

    #[test]
    fn shuffling_is_a_seeded_permutation() {
        let mut a: Vec<u32> = (0..50).collect();
        let mut b = a.clone();
        shuffle(&mut a, &mut Rng::new(3));
        shuffle(&mut b, &mut Rng::new(3));
        assert_eq!(a, b);
        assert_ne!(a, (0..50).collect::<Vec<_>>());
        a.sort();
        assert_eq!(a, (0..50).collect::<Vec<_>>());
    }

    #[test]
    fn clients_count_answers_errors_and_empty_results_against_a_local_server() {
        // A tiny keep-alive server: answers a non-empty vector, an empty one, then a 503, in turn.
        use std::io::{BufRead, BufReader, Write};
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { return };
                std::thread::spawn(move || {
                    let mut r = BufReader::new(s.try_clone().expect("clone"));
                    let mut w = s;
                    let mut n = 0u64;
                    loop {
                        let mut line = String::new();
                        if r.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        while line.trim() != "" {
                            line.clear();
                            if r.read_line(&mut line).unwrap_or(0) == 0 {
                                return;
                            }
                        }
                        let (status, body) = match n % 3 {
                            0 => ("200 OK", r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}"#),
                            1 => ("200 OK", r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#),
                            _ => ("503 Service Unavailable", "busy"),
                        };
                        n += 1;
                        let resp = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\n\r\n{body}", body.len());
                        if w.write_all(resp.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        let url = Url::parse(&format!("http://{addr}")).expect("url");
        let paths = Arc::new(query_paths("/api/v1/query", &["a".to_string()], 0));
        let f = run_clients(&url, &paths, 2, Duration::from_millis(300), Duration::from_secs(5), Some(std::process::id())).expect("run");
        assert!(f.answered > 10, "{} answered", f.answered);
        assert!(f.errors > 0 && f.empty > 0);
        // Per connection the answers cycle ok, empty, error: errors ≈ empty ≈ answered / 2.
        assert!(f.errors.abs_diff(f.empty) <= 2, "{} errors, {} empty", f.errors, f.empty);
        assert!((f.answered as u64).abs_diff(2 * f.empty) <= 4, "{} answered, {} empty", f.answered, f.empty);
        assert!(f.p50_ms <= f.p99_ms && f.p99_ms <= f.p999_ms && f.p999_ms <= f.max_ms);
        // The "server" is this process: both CPU figures are read, and the harness' includes it.
        let (client, server) = (f.client_cpu_s.expect("client CPU"), f.server_cpu_s.expect("server CPU"));
        assert!(client >= 0.0 && (client - server).abs() < 0.05, "{client} vs {server}");
        assert_ne!(f.per_query_us(f.client_cpu_s), "—");
    }
}
