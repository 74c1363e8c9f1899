//! The query thread: issue 9's reproducers in rotation, among seeded random queries.
//!
//! Each turn is, by chance, the next reproducer ([`reproducers`], each with the statuses it may get),
//! a valid random expression from [`crate::promql_diff::exprgen`] (instant or range, windows of a few
//! minutes, steps of at least 1 s), or mangled query text ([`mangle`]: truncations, junk characters,
//! random bytes, deep nesting) sent to any of the query, range, format and parse endpoints. Every
//! answer must have a status in {200, 400, 422, 503} (or the reproducer's narrower set) and a JSON body.
//! One reproducer is a client that sends a slow query and hangs up after 200 ms.

use super::{now_ms, Args, Recorder};
use crate::http::{Client, Url};
use crate::nodegen::Rng;
use crate::promql_diff::exprgen::Gen;
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What any query endpoint may answer.
const ANY: &[u16] = &[200, 400, 422, 503];
/// A real series of the writer's set (promql-diff's catalogue).
const SERIES: &str = r#"tdiff_queue_length{job="api",instance="10.0.0.1:9100"}"#;

/// One request.
#[derive(Debug, Clone)]
pub struct Query {
    pub kind: &'static str,
    pub method: &'static str,
    /// Path with query string (GET), or the endpoint (POST).
    pub path: String,
    /// Form body (POST).
    pub body: String,
    pub allowed: &'static [u16],
    /// A tighter latency bound than `--slow-after` (queries with their own `timeout`).
    pub within: Option<Duration>,
}

impl Query {
    fn post(kind: &'static str, path: &str, params: &[(&str, &str)], allowed: &'static [u16]) -> Query {
        let mut f = form_urlencoded::Serializer::new(String::new());
        for (k, v) in params {
            f.append_pair(k, v);
        }
        Query { kind, method: "POST", path: path.to_string(), body: f.finish(), allowed, within: None }
    }

    fn get(kind: &'static str, path: &str, allowed: &'static [u16]) -> Query {
        Query { kind, method: "GET", path: path.to_string(), body: String::new(), allowed, within: None }
    }

    /// `METHOD path body…` for a failure message (long bodies cut).
    pub fn describe(&self) -> String {
        let body: String = self.body.chars().take(200).collect();
        let more = if self.body.len() > 200 { format!("… ({} bytes)", self.body.len()) } else { String::new() };
        format!("{} {} {body}{more}", self.method, self.path)
    }
}

fn secs(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// Issue 9's reproducers and other odd requests, with the statuses each may get. A `None` entry is the
/// client that hangs up.
pub fn reproducers() -> Vec<Option<Query>> {
    let mut out = Vec::new();
    for (op, n) in [("or", 3_000), ("or", 10_000), ("+", 100_000)] {
        let q = vec!["m"; n].join(&format!(" {op} "));
        for path in ["/api/v1/query", "/api/v1/format_query", "/api/v1/parse_query"] {
            out.push(Some(Query::post("repro-operator-chain", path, &[("query", &q)], &[400])));
        }
    }
    let now = now_ms();
    let now_s = secs(now);
    let day_ago = secs(now - 86_400_000);
    out.extend([
        Some(Query::post("repro-huge-subquery", "/api/v1/query", &[("query", "count_over_time(vector(1)[10000d:1ms])")], &[422])),
        Some(Query::post("repro-huge-subquery", "/api/v1/query", &[("query", &format!("count_over_time({SERIES}[1d:1ms])"))], &[422])),
        // 14.4 million steps, within the sample limit: the 1 s timeout answers 503 — or the evaluation
        // finishes first (200), which it may while the series is only minutes old. Either way, promptly.
        Some(Query {
            within: Some(Duration::from_secs(5)),
            ..Query::post(
                "repro-subquery-timeout",
                "/api/v1/query",
                &[("query", &format!("count_over_time({SERIES}[4h:1ms])")), ("timeout", "1s")],
                &[200, 503, 422],
            )
        }),
        None,
        Some(Query::post("repro-topk-1e300", "/api/v1/query", &[("query", "topk(1e300, tdiff_queue_length)")], &[422])),
        Some(Query::post("repro-bottomk-i64max", "/api/v1/query", &[("query", "bottomk(9223372036854775807, tdiff_queue_length)")], &[422])),
        Some(Query::post("repro-label-replace", "/api/v1/query", &[("query", r#"label_replace(vector(1),"a","$1","","(?P<1>.*)")"#)], &[200])),
        Some(Query::get("repro-label-ff-fe", "/api/v1/label/%FF%FE/values", &[400])),
        Some(Query::get("repro-exemplars", "/api/v1/query_exemplars?query=tdiff_queue_length", &[200])),
        // No selectors: upstream's empty answer, 204 without a body.
        Some(Query::get("repro-exemplars", "/api/v1/query_exemplars?query=1", &[204])),
        Some(Query::post("repro-lookback-negative", "/api/v1/query", &[("query", "count(tdiff_queue_length)"), ("lookback_delta", "-1")], &[200])),
        Some(Query::post("repro-stats-all", "/api/v1/query", &[("query", "count(tdiff_queue_length)"), ("stats", "all")], &[200])),
        Some(Query::post("repro-timeout-0", "/api/v1/query", &[("query", "vector(1)"), ("timeout", "0")], &[400])),
        Some(Query::post(
            "repro-range-1ms-step",
            "/api/v1/query_range",
            &[("query", "tdiff_queue_length"), ("start", &day_ago), ("end", &now_s), ("step", "0.001")],
            &[400],
        )),
        Some(Query::post("repro-range-bad", "/api/v1/query_range", &[("query", "vector(1)"), ("start", &now_s), ("end", &day_ago), ("step", "15")], &[400])),
        Some(Query::post("repro-range-bad", "/api/v1/query_range", &[("query", "vector(1)"), ("start", &day_ago), ("end", &now_s), ("step", "0")], &[400])),
        Some(Query::post("repro-range-bad", "/api/v1/query_range", &[("query", "vector(1)"), ("start", "NaN"), ("end", &now_s), ("step", "15")], &[400])),
        Some(Query::get("metadata-apis", "/api/v1/labels", &[200])),
        Some(Query::get("metadata-apis", "/api/v1/label/__name__/values", &[200])),
        Some(Query::get("metadata-apis", "/api/v1/series?match%5B%5D=tdiff_queue_length", &[200])),
        Some(Query::get("metadata-apis", "/api/v1/series?match%5B%5D=%7B", &[400])),
        Some(Query::get("metadata-apis", "/api/v1/status/tsdb", &[200])),
    ]);
    out
}

/// Query text made hostile: a mangled `valid` expression, random bytes, or deep nesting.
pub fn mangle(rng: &mut Rng, valid: &str) -> String {
    const JUNK: &[u8] = b"(){}[]\"'`~!@#$%^&*,;=<>+-/\\|?:. \n\t0123456789abcxyz_";
    let below = |rng: &mut Rng, n: usize| (rng.next_u64() % n.max(1) as u64) as usize;
    match below(rng, 8) {
        0 => {
            let cut = below(rng, valid.len());
            let mut i = cut;
            while !valid.is_char_boundary(i) {
                i -= 1;
            }
            valid[..i].to_string()
        }
        1 => {
            let mut s = valid.as_bytes().to_vec();
            for _ in 0..1 + below(rng, 5) {
                let at = below(rng, s.len() + 1);
                s.insert(at, JUNK[below(rng, JUNK.len())]);
            }
            String::from_utf8_lossy(&s).into_owned()
        }
        2 => {
            let n = below(rng, 200);
            // Random bytes, then made a string: invalid UTF-8 becomes U+FFFD (the raw-bytes case is
            // `raw_bytes_form`).
            let b: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
            String::from_utf8_lossy(&b).into_owned()
        }
        3 => {
            let n = [10, 100, 200, 1_000, 10_000, 100_000][below(rng, 6)];
            format!("{}vector(1){}", "(".repeat(n), ")".repeat(n))
        }
        4 => {
            let n = [10, 100, 1_000, 100_000][below(rng, 4)];
            "(".repeat(n)
        }
        5 => {
            let n = [10, 100, 200, 1_000, 10_000][below(rng, 5)];
            format!("{}vector(1){}", "abs(".repeat(n), ")".repeat(n))
        }
        6 => {
            let n = [10, 1_000, 100_000][below(rng, 3)];
            format!("{}1", "-".repeat(n))
        }
        _ => {
            let n = [2, 10, 100, 1_000][below(rng, 4)];
            format!("sum({})", vec![valid; n].join(" * on() group_left "))
        }
    }
}

/// A form body `query=<random bytes, percent-encoded>` (possibly invalid UTF-8).
fn raw_bytes_form(rng: &mut Rng) -> String {
    let n = (rng.next_u64() % 100) as usize;
    let b: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
    format!("query={}", form_urlencoded::byte_serialize(&b).collect::<String>())
}

/// Sends a slow query and closes the connection after `after`.
fn hang_up(host_port: &str, after: Duration) -> std::io::Result<()> {
    let body = form_urlencoded::Serializer::new(String::new()).append_pair("query", &format!("count_over_time({SERIES}[4h:1ms])")).finish();
    let mut s = TcpStream::connect(host_port)?;
    write!(
        s,
        "POST /api/v1/query HTTP/1.1\r\nHost: {host_port}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    s.flush()?;
    std::thread::sleep(after);
    s.shutdown(std::net::Shutdown::Both)
}

pub fn run(args: &Args, base: Url, rec: &Recorder, stop: &AtomicBool, start_ms: i64) {
    let host_port = base.host_port.clone();
    let mut client = Client::new(Url { host_port: host_port.clone(), path: "/".into() }, args.slow_after * 2);
    let mut rng = Rng::new(args.seed ^ 0x0071_7565_7279);
    let end_s = (start_ms + args.duration.as_millis() as i64) / 1000;
    let mut exprs = Gen::new(args.seed, start_ms / 1000, end_s);
    let mut repro = reproducers();
    let mut next_repro = 0usize;
    let mut turn = 0u64;
    while !stop.load(Ordering::Relaxed) {
        turn += 1;
        let r = rng.f64();
        let q = if r < 0.2 {
            if next_repro == repro.len() {
                // Rebuilt now and then, for fresh timestamps.
                repro = reproducers();
                next_repro = 0;
            }
            next_repro += 1;
            match &repro[next_repro - 1] {
                Some(q) => q.clone(),
                None => {
                    let t0 = Instant::now();
                    match hang_up(&host_port, Duration::from_millis(200)) {
                        Ok(()) => rec.count("repro-client-hangs-up", "disconnected", t0.elapsed()),
                        Err(e) => {
                            rec.count("repro-client-hangs-up", "io-error", t0.elapsed());
                            rec.fail(format!("repro-client-hangs-up: cannot send the query: {e}"));
                        }
                    }
                    continue;
                }
            }
        } else if r < 0.7 {
            random_valid(&mut exprs, &mut rng)
        } else {
            random_hostile(&mut exprs, &mut rng)
        };
        let t0 = Instant::now();
        let headers: &[(&str, &str)] = if q.method == "POST" { &[("Content-Type", "application/x-www-form-urlencoded")] } else { &[] };
        let r = client.request(q.method, &q.path, headers, q.body.as_bytes());
        let what = format!("#{turn} {}", q.describe());
        let slow_after = q.within.unwrap_or(args.slow_after).min(args.slow_after);
        if let Some(resp) = rec.check(q.kind, &what, q.allowed, slow_after, t0.elapsed(), r)
            && !(resp.status == 204 && resp.body.is_empty())
            && !is_json(&resp.body)
        {
            rec.fail(format!("{}: {what}: status {} with a body that is not JSON: {}", q.kind, resp.status, super::snippet(&resp.body)));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Whether `body` is one JSON value. serde_json stops at 128 levels, and format and parse answers for
/// deeply nested expressions go deeper: those are checked for balanced brackets outside strings.
fn is_json(body: &[u8]) -> bool {
    match serde_json::from_slice::<serde_json::Value>(body) {
        Ok(_) => true,
        Err(e) if e.to_string().contains("recursion limit exceeded") => balanced(body),
        Err(_) => false,
    }
}

fn balanced(body: &[u8]) -> bool {
    let (mut stack, mut in_str, mut escaped) = (Vec::new(), false, false);
    for &b in body {
        if in_str {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_str = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_str = true,
            b'{' | b'[' => stack.push(b),
            b'}' if stack.pop() != Some(b'{') => return false,
            b']' if stack.pop() != Some(b'[') => return false,
            _ => {}
        }
    }
    stack.is_empty() && !in_str && body.first() == Some(&b'{')
}

/// A generated expression as an instant query (now, or up to 30 s before) or a range query (a window of
/// one to ten minutes ending then, steps of 1 s to 1 min).
fn random_valid(exprs: &mut Gen, rng: &mut Rng) -> Query {
    let e = exprs.expr();
    let end = now_ms() - (rng.next_u64() % 30_000) as i64;
    if rng.f64() < 0.5 {
        Query::post("random-instant", "/api/v1/query", &[("query", &e.text), ("time", &secs(end))], ANY)
    } else {
        let start = end - 60_000 - (rng.next_u64() % 540_000) as i64;
        let step = [1, 2, 5, 10, 15, 30, 60][(rng.next_u64() % 7) as usize].to_string();
        Query::post(
            "random-range",
            "/api/v1/query_range",
            &[("query", &e.text), ("start", &secs(start)), ("end", &secs(end)), ("step", &step)],
            ANY,
        )
    }
}

/// Mangled query text to any query endpoint.
fn random_hostile(exprs: &mut Gen, rng: &mut Rng) -> Query {
    let text = exprs.expr().text;
    let end = now_ms();
    let start = end - 300_000;
    let mut q = if rng.f64() < 0.1 {
        Query { kind: "garbage-query", method: "POST", path: "/api/v1/query".into(), body: raw_bytes_form(rng), allowed: ANY, within: None }
    } else {
        let m = mangle(rng, &text);
        match rng.next_u64() % 4 {
            0 => Query::post("garbage-query", "/api/v1/query", &[("query", &m)], ANY),
            1 => Query::post("garbage-query", "/api/v1/query_range", &[("query", &m), ("start", &secs(start)), ("end", &secs(end)), ("step", "15")], ANY),
            2 => Query::post("garbage-query", "/api/v1/format_query", &[("query", &m)], ANY),
            _ => Query::post("garbage-query", "/api/v1/parse_query", &[("query", &m)], ANY),
        }
    };
    q.kind = "garbage-query";
    q
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_json_is_checked_by_its_brackets() {
        let deep = format!("{}1{}", r#"{"a":["#.repeat(300), "]}".repeat(300));
        assert!(is_json(deep.as_bytes()));
        assert!(is_json(br#"{"s":"x]}\"{"}"#));
        let cut = &deep[..deep.len() - 1];
        assert!(!is_json(cut.as_bytes()));
        assert!(!is_json(b"<html>"));
    }

    #[test]
    fn mangling_keeps_to_char_boundaries() {
        let mut rng = Rng::new(3);
        for _ in 0..2000 {
            let m = mangle(&mut rng, "sum(rate(héllo_wörld{a=\"ü\"}[5m]))");
            assert!(m.len() < 1_000_000);
        }
    }

    #[test]
    fn reproducers_cover_the_three_endpoints_and_the_hang_up() {
        let r = reproducers();
        assert!(r.iter().any(Option::is_none));
        for path in ["/api/v1/query", "/api/v1/format_query", "/api/v1/parse_query"] {
            assert!(r.iter().flatten().any(|q| q.kind == "repro-operator-chain" && q.path == path));
        }
    }
}
