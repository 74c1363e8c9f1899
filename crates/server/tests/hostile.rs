//! Issue 9's reproducers, each against the real binary: one request (or one edited file) that used to
//! crash, wedge or exhaust the server, and what it gets now. After each, the server must still be up
//! and answering, and data accepted before must still be there.

mod common;

use common::{Server, CT_V1};
use prost::Message;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tessera_model::{labels, Labels, Sample};
use tessera_protocol::prompb;
use tessera_protocol::remote_write::{self as rw, WriteSeries};

fn now_ms() -> i64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as i64
}

fn series(l: Labels, samples: &[(i64, f64)]) -> WriteSeries {
    WriteSeries::new(l, samples.iter().map(|&(t, v)| Sample::new(t, v)).collect())
}

fn form(q: &str) -> String {
    form_urlencoded::Serializer::new(String::new()).append_pair("query", q).finish()
}

/// The server answers a trivial query (it is up, not wedged).
fn alive(s: &Server) {
    let (status, body) = s.get("/api/v1/query?query=vector(1)");
    assert_eq!(status, 200, "{body}");
}

/// Issue 9.1: a sample a year ahead (or at i64::MAX) is refused on its own, and the shard goes on
/// accepting the present, also after a restart.
#[test]
fn a_sample_from_the_future_is_refused_alone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let now = now_ms();
    for far in [now + 365 * 86_400_000, i64::MAX] {
        let (status, written, body) = s.write_v2(
            &[series(labels!("__name__" => "bogus"), &[(now - 1000, 1.0), (far, 2.0)]), series(labels!("__name__" => "real"), &[(now - 1000, 1.0)])],
            &[],
        );
        assert_eq!((status, written), (400, Some(2)), "{body}");
        assert!(body.contains("out of bounds: timestamp too far in the future: 1 sample not written"), "{body}");
    }
    // Every shard still takes the present: 20 new series and the old ones.
    let fresh: Vec<WriteSeries> = (0..20).map(|i| series(labels!("__name__" => "fresh", "i" => &i.to_string()), &[(now, 1.0)])).collect();
    assert_eq!(s.write_v2(&fresh, &[]).0, 204);
    let s = s.restart(false);
    let (status, written, body) = s.write_v2(&[series(labels!("__name__" => "real"), &[(now_ms(), 2.0)])], &[]);
    assert_eq!((status, written), (204, Some(1)), "{body}");
    let (_, body) = s.get("/api/v1/query?query=count(fresh)");
    assert!(body.contains(r#""value":["#) && body.contains(r#","20"]"#), "{body}");
    let (_, m) = s.get("/metrics");
    assert!(m.contains("tessera_tsdb_samples_rejected_total{reason=\"too_far_in_future\"}"), "{m}");
}

/// Issue 9.2: a 6 KB chain of binary operators aborted the process through stack overflow, in the
/// query, format and parse endpoints alike. Now it is a 400 naming the reason.
#[test]
fn long_operator_chains_are_a_clean_400() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    for (op, n) in [("or", 3_000), ("or", 10_000), ("+", 100_000), ("and", 3_000), (">", 3_000), ("unless", 3_000)] {
        let q = vec!["m"; n].join(&format!(" {op} "));
        for path in ["/api/v1/query", "/api/v1/format_query", "/api/v1/parse_query", "/api/v1/query_range?start=0&end=60&step=15"] {
            let (status, body) = s.post_form(path, &form(&q));
            assert_eq!(status, 400, "{path} {op} x{n}: {body}");
            assert!(body.contains("expression nesting too deep"), "{path}: {body}");
        }
    }
    // Subquery chains (the review found them overflowing the stack at 20,000 brackets).
    let q = format!("vector(1){}", "[1m:]".repeat(20_000));
    for path in ["/api/v1/query", "/api/v1/format_query", "/api/v1/parse_query", "/api/v1/query_exemplars"] {
        let (status, body) = s.post_form(path, &form(&q));
        assert_eq!(status, 400, "{path}: {body}");
    }
    // Within the bound, chains are answered.
    let q = vec!["vector(1)"; 300].join(" + ");
    let (status, body) = s.post_form("/api/v1/query", &form(&q));
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""300"]"#), "{body}");
    alive(&s);
}

/// Issue 9.3: subqueries with huge step counts allocated terabytes, or ran for minutes after the
/// client left. Now the step count is checked first, and the timeout and a disconnect stop them.
#[test]
fn huge_subqueries_are_refused_or_stopped() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let now = now_ms();
    let data: Vec<WriteSeries> = (0..20)
        .map(|i| series(labels!("__name__" => "m", "i" => &i.to_string()), &[(now - 60_000, 1.0), (now - 30_000, 2.0), (now - 1000, 3.0)]))
        .collect();
    assert_eq!(s.write_v2(&data, &[]).0, 204);
    for q in ["count_over_time(vector(1)[10000d:1ms])", "count_over_time(m[1d:1ms])"] {
        let (status, body) = s.post_form("/api/v1/query", &form(q));
        assert_eq!(status, 422, "{q}: {body}");
        assert!(body.contains("query processing would load too many samples into memory"), "{body}");
    }
    // `@` and `offset` at the edges of int64 (they overflowed in the evaluator's arithmetic).
    for q in ["m @ 9200000000000000 offset -1s", "m[5m:1m] @ -9200000000000000 offset 1y", "rate(m[1y] @ 9200000000000000 offset -100y)"] {
        let (status, body) = s.post_form("/api/v1/query", &form(q));
        assert!(matches!(status, 200 | 400 | 422), "{q}: {status} {body}");
    }
    // Within the step limit but slower than the request's timeout: the timeout answers.
    let (status, body) = s.post_form("/api/v1/query", &format!("{}&timeout=1s", form("count_over_time(m[4h:1ms])")));
    assert!(matches!(status, 503 | 422), "{status}: {body}");
    // A client that goes away: its query is canceled, the next one is answered.
    let impatient = reqwest::blocking::Client::builder().timeout(Duration::from_millis(300)).build().expect("client");
    let r = impatient
        .post(format!("{}/api/v1/query", s.base))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body(form("count_over_time(m[4h:1ms])"))
        .send();
    assert!(r.is_err(), "the slow query should outlast the client's 300 ms");
    alive(&s);
}

/// Issue 9.4: an edited `tessera.json` is refused before anything is created, with the reason.
#[test]
fn an_edited_identity_file_stops_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    assert_eq!(s.write_v2(&[series(labels!("__name__" => "m"), &[(now_ms(), 1.0)])], &[]).0, 204);
    s.terminate();
    let meta = dir.path().join("tessera.json");
    let good = std::fs::read_to_string(&meta).expect("tessera.json");
    for (edited, says) in [
        (good.replace("\"version\": 1", "\"version\": 99"), "version 99"),
        (good.replace("\"shards\": 2", "\"shards\": 7"), "checksum"),
        ("{\"version\": 1, \"shards\": 7}".to_string(), "holds only 2 shard directories"),
    ] {
        std::fs::write(&meta, edited).expect("edit");
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("serve")
            .arg(format!("--storage.tsdb.path={}", dir.path().display()))
            .arg(format!("--web.listen-address=127.0.0.1:{}", common::free_port()))
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output()
            .expect("run tessera");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "started with an edited tessera.json");
        assert!(err.contains(says), "{err}");
        let shards = std::fs::read_dir(dir.path()).expect("ls").flatten().filter(|e| e.file_name().to_string_lossy().starts_with("shard-")).count();
        assert_eq!(shards, 2, "nothing created");
    }
    std::fs::write(&meta, good).expect("restore");
    let s = Server::start(dir.path(), &[]);
    let (_, body) = s.get("/api/v1/query?query=count(m)");
    assert!(body.contains(r#","1"]"#), "{body}");
}

/// Issue 9.5: one request could create a million series. Now a request may create at most
/// `--web.remote-write.max-new-series-per-request`, the head at most `--storage.tsdb.max-series`;
/// samples of series beyond are refused (400, counted), everything else written.
#[test]
fn series_limits_refuse_new_series_only() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &["--web.remote-write.max-new-series-per-request=1000", "--storage.tsdb.max-series=1500"]);
    let now = now_ms();
    let many: Vec<WriteSeries> = (0..5000).map(|i| series(labels!("__name__" => "card", "i" => &i.to_string()), &[(now, 1.0)])).collect();
    let (status, written, body) = s.write_v2(&many, &[]);
    assert_eq!((status, written), (400, Some(1000)), "{body}");
    assert!(body.contains("per-request limit of new series exceeded: 4000 samples not written"), "{body}");
    let (status, written, body) = s.write_v2(&many, &[]);
    assert_eq!((status, written), (400, Some(1500)), "{body}");
    assert!(body.contains("limit of active series reached"), "{body}");
    // Existing series keep being written (which ones were created depends on the shards' order).
    let (_, body) = s.get("/api/v1/series?match[]=card");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let created: Vec<String> = v["data"].as_array().expect("array").iter().map(|l| l["i"].as_str().expect("i").to_string()).collect();
    assert_eq!(created.len(), 1500);
    let again: Vec<WriteSeries> = created.iter().map(|i| series(labels!("__name__" => "card", "i" => i.as_str()), &[(now + 1000, 2.0)])).collect();
    let (status, written, body) = s.write_v2(&again, &[]);
    assert_eq!((status, written), (204, Some(1500)), "{body}");
    let (_, m) = s.get("/metrics");
    assert!(m.contains("reason=\"request_series_limit\""), "{m}");
    assert!(m.contains("reason=\"max_series\""), "{m}");
}

/// Issue 9.5: `--query.max-concurrency`: a query beyond it waits for a slot within its timeout.
#[test]
fn queries_beyond_the_concurrency_limit_wait_in_a_queue() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &["--query.max-concurrency=1"]);
    let now = now_ms();
    assert_eq!(s.write_v2(&[series(labels!("__name__" => "m"), &[(now - 1000, 1.0)])], &[]).0, 204);
    let base = s.base.clone();
    let slow = std::thread::spawn(move || {
        let c = reqwest::blocking::Client::builder().timeout(Duration::from_secs(60)).build().expect("client");
        c.post(format!("{base}/api/v1/query"))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(format!("{}&timeout=3s", form("count_over_time(m[12h:1ms])")))
            .send()
            .map(|r| r.status().as_u16())
    });
    std::thread::sleep(Duration::from_millis(300));
    // While the slot is taken, a query with a short timeout times out in the queue.
    let (status, body) = s.post_form("/api/v1/query", &format!("{}&timeout=0.2", form("vector(1)")));
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("query timed out in query queue"), "{body}");
    let _ = slow.join();
    alive(&s);
}

/// Issue 9.6: answers that differed from Prometheus 3.14's for no reason.
#[test]
fn answers_as_prometheus_gives_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let now = now_ms();
    assert_eq!(s.write_v2(&[series(labels!("__name__" => "m", "i" => "1"), &[(now - 1000, 1.0)])], &[]).0, 204);
    let cases: &[(&str, u16, &str)] = &[
        ("/api/v1/query?query=topk(1e300,m)", 422, "Scalar value 1e+300 overflows int64"),
        ("/api/v1/query?query=bottomk(9223372036854775807,m)", 422, "Scalar value 9.223372036854776e+18 overflows int64"),
        ("/api/v1/query?query=vector(1)&timeout=0", 400, r#"invalid parameter \"query\": context deadline exceeded"#),
        ("/api/v1/query?query=count(m)&lookback_delta=-1", 200, r#","1"]"#),
        ("/api/v1/query?query=count(m)&stats=all", 200, r#""samples":{"totalQueryableSamples":1,"samplesRead":1,"peakSamples":"#),
        ("/api/v1/label/%FF%FE/values", 400, r#"{"status":"error","errorType":"bad_data","error":"invalid label name: \"\\xff\\xfe\""}"#),
        ("/api/v1/query_exemplars?query=m", 200, r#"{"status":"success","data":[]}"#),
        ("/api/v1/query_exemplars?query=1", 204, ""),
    ];
    for (path, want_status, says) in cases {
        let (status, body) = s.get(path);
        assert_eq!(status, *want_status, "{path}: {body}");
        assert!(body.contains(says), "{path}: {body}");
    }
    let (status, body) = s.post_form("/api/v1/query", &form(r#"label_replace(vector(1),"a","$1","","(?P<1>.*)")"#));
    assert_eq!(status, 200, "{body}");
    // Remote write 1.0 with unsorted labels: sorted and written.
    let req = prompb::WriteRequest {
        timeseries: vec![prompb::TimeSeries {
            labels: vec![
                prompb::Label { name: "job".into(), value: "a".into() },
                prompb::Label { name: "__name__".into(), value: "unsorted".into() },
            ],
            samples: vec![prompb::Sample { timestamp: now, value: 1.0 }],
            ..Default::default()
        }],
        ..Default::default()
    };
    let (status, written, body) = s.write_raw(rw::compress(&req.encode_to_vec()), Some(CT_V1), Some("snappy"));
    assert_eq!((status, written), (204, None), "{body}");
    let (_, body) = s.get("/api/v1/series?match[]=unsorted");
    assert!(body.contains(r#"{"__name__":"unsorted","job":"a"}"#), "{body}");
    let started = Instant::now();
    alive(&s);
    assert!(started.elapsed() < Duration::from_secs(30));
}
