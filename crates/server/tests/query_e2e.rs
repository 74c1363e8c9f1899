//! End-to-end tests of the PromQL endpoints and the `promqltest` command against the real `tessera`
//! binary: data written by remote write is read back through `/api/v1/query` and
//! `/api/v1/query_range` (JSON compared byte for byte), errors keep Prometheus' types and statuses, and
//! `tessera promqltest` prints per-file counts and each failure.

mod common;

use common::Server;
use std::process::Command;
use tessera_model::{labels, Sample};
use tessera_protocol::remote_write::{self as rw, WriteSeries};

const T0: i64 = 1_700_000_000_000;

#[test]
fn remote_write_then_query_and_query_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let pts = |f: &dyn Fn(i64) -> f64| -> Vec<Sample> { (0..10).map(|i| Sample::new(T0 + i * 15_000, f(i))).collect() };
    let series = vec![
        WriteSeries::new(labels!("__name__" => "req_total", "job" => "api", "code" => "200"), pts(&|i| (i * 30) as f64)),
        WriteSeries::new(labels!("__name__" => "req_total", "job" => "api", "code" => "500"), pts(&|i| (i * 3) as f64)),
        WriteSeries::new(labels!("__name__" => "temp", "room" => "a"), pts(&|i| if i == 9 { f64::NAN } else { 20.5 })),
    ];
    let r = s
        .http
        .post(format!("{}/api/v1/write", s.base))
        .header("Content-Type", "application/x-protobuf")
        .header("Content-Encoding", "snappy")
        .body(rw::compress(&rw::encode_v1(&series, &[])))
        .send()
        .expect("remote write");
    assert_eq!(r.status().as_u16(), 204);

    let t_end = (T0 + 9 * 15_000) as f64 / 1000.0; // 1700000135
    assert_eq!(
        s.get(&format!("/api/v1/query?query=sum%20by%20(job)%20(req_total)&time={t_end}")),
        (200, r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"job":"api"},"value":[1700000135,"297"]}]}}"#.into())
    );
    assert_eq!(
        s.post_form("/api/v1/query", &format!("query=temp&time={}", t_end + 0.25)),
        (200, r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"__name__":"temp","room":"a"},"value":[1700000135.250,"NaN"]}]}}"#.into())
    );
    assert_eq!(
        s.get("/api/v1/query_range?query=req_total%7Bcode%3D%22500%22%7D&start=1700000000&end=1700000060&step=30s"),
        (
            200,
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"req_total","code":"500","job":"api"},"values":[[1700000000,"0"],[1700000030,"6"],[1700000060,"12"]]}]}}"#
                .into()
        )
    );
    assert_eq!(
        s.get("/api/v1/query?query=scalar(count(req_total))%20*%202&time=1700000100.5"),
        (200, r#"{"status":"success","data":{"resultType":"scalar","result":[1700000100.5,"4"]}}"#.into())
    );
    // Errors keep Prometheus' types and statuses.
    let (st, body) = s.get("/api/v1/query?query=rate(req_total)");
    assert_eq!(st, 400);
    assert!(body.starts_with(r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": "#), "{body}");
    assert_eq!(
        s.get("/api/v1/query_range?query=up&start=2&end=1&step=1"),
        (400, r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"end\": end timestamp must not be before start time"}"#.into())
    );
    let (st, body) = s.get(&format!("/api/v1/query?query=req_total*on()req_total&time={t_end}"));
    assert_eq!(st, 422, "{body}");
    assert!(body.contains(r#""errorType":"execution""#), "{body}");
    assert_eq!(
        s.get("/api/v1/format_query?query=sum(req_total)by(job)"),
        (200, r#"{"status":"success","data":"sum by (job) (req_total)"}"#.into())
    );
}

#[test]
fn promqltest_command_prints_counts_and_failures() {
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data");
    let run = |files: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("promqltest")
            .args(files.iter().map(|f| format!("{data}/{f}")))
            .output()
            .expect("run tessera promqltest");
        (out.status.code(), String::from_utf8(out.stdout).expect("utf8"))
    };
    let (code, out) = run(&["query_pass.test"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("query_pass.test: 3 passed, 0 failed\n"), "{out}");
    assert!(out.contains("total: 3 passed, 0 failed"), "{out}");

    let (code, out) = run(&["query_pass.test", "query_fail.test"]);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("query_fail.test: 1 passed, 1 failed\n"), "{out}");
    assert!(out.contains("query_fail.test:8: FAIL metric * 2"), "{out}");
    assert!(out.contains("total: 4 passed, 1 failed"), "{out}");

    // No file: a usage error from the argument parser.
    let (code, _) = run(&[]);
    assert_eq!(code, Some(2));
}

/// `T` minutes after an origin aligned on the minute, as promqltest's `load 1m` lays samples out.
fn at_min(m: f64) -> i64 {
    const ORIGIN: i64 = 1_700_000_040_000; // a multiple of 60 s
    ORIGIN + (m * 60_000.0) as i64
}

/// The two float series of upstream's `promql/promqltest/testdata/start_timestamps.test` blocks 1 and 2,
/// sent over remote write 2.0 with their start timestamps: a cumulative counter whose ST moves forward
/// (a reset the values do not show), and an OTel-style delta (ST = previous sample's time).
fn st_series() -> Vec<WriteSeries> {
    // cumulative{type="st_resets"}: values 0+60x14 from 2m; @st offsets per group of three samples.
    let offsets_ms = [30_000, 90_000, 150_000, 60_000, 120_000, 180_000, 59_999, 119_999, 179_999, 1_000, 61_000, 121_000, 1, 60_001, 120_001];
    let mut cumulative = WriteSeries::new(
        labels!("__name__" => "cumulative", "type" => "st_resets"),
        (0..15).map(|i| Sample::new(at_min(2.0 + i as f64), 60.0 * i as f64)).collect(),
    );
    cumulative.start_timestamps = (0..15).map(|i| at_min(2.0 + i as f64) - offsets_ms[i]).collect();
    // delta{type="otel"}: 60 every minute from 2m, ST one minute before each sample.
    let mut delta = WriteSeries::new(
        labels!("__name__" => "delta", "type" => "otel"),
        (0..16).map(|i| Sample::new(at_min(2.0 + i as f64), 60.0)).collect(),
    );
    delta.start_timestamps = delta.samples.iter().map(|s| s.t - 60_000).collect();
    vec![cumulative, delta]
}

/// A `query_range` POST of `form` that must succeed: its JSON.
fn range_ok(s: &Server, form: &str) -> serde_json::Value {
    let (st, body) = s.post_form("/api/v1/query_range", form);
    assert_eq!(st, 200, "{body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// The values of a one-series range query, as floats.
fn range_values(s: &Server, query: &str, from_min: f64, to_min: f64) -> Vec<f64> {
    let (start, end) = (at_min(from_min) as f64 / 1000.0, at_min(to_min) as f64 / 1000.0);
    let q: String = query.bytes().map(|b| if b.is_ascii_alphanumeric() { (b as char).to_string() } else { format!("%{b:02X}") }).collect();
    let (st, body) = s.get(&format!("/api/v1/query_range?query={q}&start={start}&end={end}&step=60"));
    assert_eq!(st, 200, "{query}: {body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let result = v["data"]["result"].as_array().expect("matrix");
    assert_eq!(result.len(), 1, "{query}: {body}");
    result[0]["values"]
        .as_array()
        .expect("values")
        .iter()
        .map(|p| p[1].as_str().expect("value string").parse::<f64>().expect("float"))
        .collect()
}

fn assert_close(got: &[f64], want: &[f64], what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: {got:?} vs {want:?}");
    for (g, w) in got.iter().zip(want) {
        assert!((g - w).abs() <= 1e-9 * w.abs().max(1.0), "{what}: {got:?} vs {want:?}");
    }
}

#[test]
fn remote_write_2_start_timestamps_drive_rate_and_increase_with_the_feature() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &["--enable-feature=use-start-timestamps"]);
    let (status, written, body) = s.write_v2(&st_series(), &[]);
    assert_eq!((status, written), (204, Some(31)), "{body}");

    // Expected values: upstream's start_timestamps.test (evaluated by Prometheus 3.14's engine).
    let st_aware = |s: &Server| {
        assert_close(
            &range_values(s, r#"increase(cumulative{type="st_resets"}[5m])"#, 7.0, 15.0),
            &[420.0, 780.0, 675.0, 675.0, 1275.0, 1080.0, 900.0, 1725.0, 1440.0],
            "increase over ST resets",
        );
        assert_close(
            &range_values(s, r#"rate(cumulative{type="st_resets"}[5m])"#, 7.0, 15.0),
            &[1.4, 2.6, 2.25, 2.25, 4.25, 3.6, 3.0, 5.75, 4.8],
            "rate over ST resets",
        );
        assert_close(&range_values(s, "increase(delta[5m])", 10.0, 15.0), &[300.0; 6], "increase of an OTel delta");
        assert_close(&range_values(s, "rate(delta[5m])", 10.0, 15.0), &[1.0; 6], "rate of an OTel delta");
    };
    st_aware(&s);

    // Without the feature the same stored data reads as plain samples: the counter never resets
    // (60 per minute: 300 per 5m) and the constant delta never increases.
    let s = s.restart_with(true, &[]);
    assert_close(
        &range_values(&s, r#"increase(cumulative{type="st_resets"}[5m])"#, 7.0, 15.0),
        &[300.0; 9],
        "increase ignoring STs",
    );
    assert_close(&range_values(&s, "increase(delta[5m])", 10.0, 15.0), &[0.0; 6], "delta ignoring STs");

    // The STs survived the restart, and a crash (WAL replay) too.
    let s = s.restart_with(false, &["--enable-feature=use-start-timestamps"]);
    st_aware(&s);
}

/// The result cache through the binary: a repeated range query is answered from the cache, and writes
/// into the range it covers (a new series with old timestamps, an out-of-order sample) change the next
/// answer exactly as they change the uncached one.
#[test]
fn repeated_range_queries_come_from_the_cache_and_late_writes_invalidate_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &["--storage.tsdb.out-of-order-time-window=1h"]);
    let pts = |n: i64, f: &dyn Fn(i64) -> f64| -> Vec<Sample> { (0..n).map(|i| Sample::new(T0 + i * 15_000, f(i))).collect() };
    let series = vec![
        WriteSeries::new(labels!("__name__" => "m", "a" => "1"), pts(60, &|i| i as f64)),
        WriteSeries::new(labels!("__name__" => "m", "a" => "2"), pts(60, &|i| (2 * i) as f64)),
    ];
    assert_eq!(s.write_v1(&series, &[]).0, 204);
    let q = "query=sum(rate(m%5B2m%5D))%20%2B%20count(m)&start=1700000000&end=1700000840&step=60";
    let ask = |extra: &str| range_ok(&s, &format!("{q}{extra}"));
    let first = ask("&trace=1");
    assert_eq!(first["trace"]["cache"]["stored"], 15, "{first}");
    let second = ask("&trace=1");
    assert_eq!(second["trace"]["cache"]["hits"], 15, "{second}");
    assert_eq!(second["data"], first["data"]);
    // A new series arriving with old timestamps, and an out-of-order sample of an existing one.
    let late = vec![
        WriteSeries::new(labels!("__name__" => "m", "a" => "3"), (20..30).map(|i| Sample::new(T0 + i * 15_000, 100.0)).collect()),
        WriteSeries::new(labels!("__name__" => "m", "a" => "1"), vec![Sample::new(T0 + 40 * 15_000 + 7_000, 1000.0)]),
    ];
    assert_eq!(s.write_v1(&late, &[]).0, 204);
    let third = ask("&trace=1");
    let uncached = ask("&nocache=1");
    assert_eq!(third["data"], uncached["data"], "the cache kept a stale step");
    assert_ne!(third["data"], first["data"], "the late writes changed nothing?");
    let c = &third["trace"]["cache"];
    assert!(c["evaluated"].as_u64().expect("n") > 0 && c["hits"].as_u64().expect("n") > 0, "{third}");
    // Its figures are in /metrics.
    let (_, metrics) = s.get("/metrics");
    assert!(metrics.contains("tessera_query_results_cache_hit_steps_total "), "{metrics}");
    let invalidated = metrics
        .lines()
        .find_map(|l| l.strip_prefix("tessera_query_results_cache_invalidated_steps_total "))
        .and_then(|v| v.parse::<f64>().ok())
        .expect("the counter");
    assert!(invalidated > 0.0, "{metrics}");
}

/// A dashboard at "now" through the binary with the default flags: every step whose window has ended is
/// kept (a repeat within the same step evaluates nothing), and a sender lagging behind — its samples up to
/// the newest step arrive after the query, in order — changes the next answer exactly as it changes the
/// uncached one.
#[test]
fn steps_up_to_now_are_kept_and_a_lagging_sender_invalidates_them() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock").as_millis() as i64;
    // The newest step: a multiple of 15 s at least 15 s before now; ten minutes of steps before it.
    let end = now - now.rem_euclid(15_000) - 15_000;
    let start = end - 10 * 60_000;
    let pts = |from: i64, to: i64, f: &dyn Fn(i64) -> f64| -> Vec<Sample> {
        (0..).map(|i| from + i * 15_000).take_while(|t| *t <= to).map(|t| Sample::new(t, f(t))).collect()
    };
    // `a="1"` is written up to `end`; `a="2"` (a lagging sender) only up to 90 s before it.
    let series = vec![
        WriteSeries::new(labels!("__name__" => "m", "a" => "1"), pts(start - 300_000, end, &|t| ((t / 15_000) % 7) as f64)),
        WriteSeries::new(labels!("__name__" => "m", "a" => "2"), pts(start - 300_000, end - 90_000, &|t| ((t / 15_000) % 5) as f64)),
    ];
    assert_eq!(s.write_v1(&series, &[]).0, 204);
    let q = format!("query=sum(rate(m%5B1m%5D))%20%2B%20count(m)&start={}&end={}&step=15", start / 1000, end / 1000);
    let ask = |extra: &str| range_ok(&s, &format!("{q}{extra}"));
    let first = ask("&trace=1");
    assert_eq!(first["trace"]["cache"]["stored"], 41, "every step up to now is kept: {first}");
    let second = ask("&trace=1");
    assert_eq!(second["trace"]["cache"]["hits"], 41, "{second}");
    assert_eq!(second["trace"]["cache"]["evaluated"], 0, "{second}");
    assert_eq!(second["data"], first["data"]);
    // The lagging sender catches up: its samples up to `end` arrive now, in order.
    let late = vec![WriteSeries::new(labels!("__name__" => "m", "a" => "2"), pts(end - 75_000, end, &|_| 100.0))];
    assert_eq!(s.write_v1(&late, &[]).0, 204);
    let third = ask("&trace=1");
    let uncached = ask("&nocache=1");
    assert_eq!(third["data"], uncached["data"], "the cache kept a stale step");
    assert_ne!(third["data"], first["data"], "the late samples changed nothing?");
    let c = &third["trace"]["cache"];
    assert!(c["evaluated"].as_u64().expect("n") > 0 && c["hits"].as_u64().expect("n") > 30, "only the steps over the late samples are evaluated: {third}");
}

/// Downsampling through the binary: with `--storage.tsdb.downsampling`, a long range query at a coarse
/// step reads the tier by itself (shown in `trace`), gives the raw answer where its windows fall on
/// buckets, says so in `infos` where it had to approximate, and `raw=1` / `tier=` force the choice;
/// the tier blocks appear in `/metrics` once the background computed them from finished blocks.
#[test]
fn long_range_queries_read_downsampling_tiers() {
    const H: i64 = 3_600_000;
    let t0 = 472_222 * H;
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &["--storage.tsdb.downsampling=5m,1h"]);
    // 20 counters over 10 hours, one sample a minute, written in time order half an hour at a time;
    // and a native-histogram counter that resets every 7 hours' minute 401.
    for part in 0..20 {
        let mut series: Vec<WriteSeries> = (0..20)
            .map(|i| {
                let pts = (part * 30..part * 30 + 30).map(|m| Sample::new(t0 + m * 60_000 + 5_000, (m * (i + 1) % 997) as f64)).collect();
                WriteSeries::new(labels!("__name__" => "m", "i" => &i.to_string()), pts)
            })
            .collect();
        let mut hm = WriteSeries::new(labels!("__name__" => "hm"), vec![]);
        hm.histogram_samples = (part * 30..part * 30 + 30)
            .map(|m| {
                let c = (m % 401 + 1) as u64;
                let h = tessera_model::histogram::Histogram {
                    schema: 0,
                    count: 3 * c,
                    sum: c as f64 * 0.5,
                    positive_spans: vec![tessera_model::histogram::Span::new(0, 2)],
                    positive_buckets: vec![c as i64, c as i64],
                    ..Default::default()
                };
                tessera_model::HistogramSample::new(t0 + m * 60_000 + 5_000, tessera_model::HistogramValue::Int(h))
            })
            .collect();
        series.push(hm);
        assert_eq!(s.write_v1(&series, &[]).0, 204);
    }
    let range = format!("start={}&end={}&step=3600", (t0 + H) / 1000, (t0 + 9 * H) / 1000);
    let ask = |q: &str, extra: &str| -> (u16, serde_json::Value) {
        let (st, body) = s.post_form("/api/v1/query_range", &format!("query={q}&{range}&trace=1&nocache=1{extra}"));
        (st, serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}")))
    };
    let q = "sum%20by%20(i)%20(increase(m%5B1h%5D))";
    let (st, tiered) = ask(q, "");
    assert_eq!(st, 200, "{tiered}");
    assert_eq!(tiered["trace"]["tier"], "1h", "{tiered}");
    let (_, raw) = ask(q, "&raw=1");
    assert_eq!(raw["trace"]["tier"], serde_json::Value::Null);
    assert_eq!(tiered["data"], raw["data"], "a window on the buckets must give the raw answer");
    assert_eq!(tiered["data"]["result"].as_array().map(Vec::len), Some(20));
    assert!(tiered.get("infos").is_none(), "an exact answer says nothing: {tiered}");
    let (_, five) = ask(q, "&tier=5m");
    assert_eq!(five["trace"]["tier"], "5m");
    assert_eq!(five["data"], raw["data"]);
    // A window shorter than the tier's buckets: approximated, and said.
    let (_, approx) = ask("rate(m%5B5m%5D)", "");
    let infos = approx["infos"].to_string();
    assert!(infos.contains("answered from the 1h downsampling tier"), "{approx}");
    // Bad choices are the client's: 400 with the reason.
    let (st, e) = ask(q, "&tier=7m");
    assert_eq!(st, 400, "{e}");
    assert!(e["error"].as_str().is_some_and(|m| m.contains("no downsampling tier with resolution 7m (tiers: 5m, 1h)")), "{e}");
    assert_eq!(ask(q, "&raw=2").0, 400);
    assert_eq!(ask(q, "&raw=1&tier=1h").0, 400);
    assert_eq!(ask(q, "&tier=-1h").0, 400);
    for huge in ["1e300", "9223372036854775807", "999999999999999999y", "NaN", "%00"] {
        assert_eq!(ask(q, &format!("&tier={huge}")).0, 400, "tier={huge}");
    }
    // The background computes tier blocks from the blocks cut from the head.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let (_, metrics) = s.get("/metrics");
        let n = metrics
            .lines()
            .find_map(|l| l.strip_prefix("tessera_tsdb_tier_blocks "))
            .and_then(|v| v.parse::<f64>().ok())
            .expect("the gauge");
        if n > 0.0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no tier block after 60 s: {metrics}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let (_, again) = ask(q, "");
    assert_eq!(again["data"], raw["data"], "the same answer once tier blocks exist");
    // Native histograms come from the tier too, with the raw answer.
    for hq in ["increase(hm%5B1h%5D)", "hm", "histogram_quantile(0.5%2C%20rate(hm%5B2h%5D))"] {
        let (st, tiered) = ask(hq, "");
        assert_eq!(st, 200, "{tiered}");
        assert_eq!(tiered["trace"]["tier"], "1h", "{tiered}");
        let (_, raw) = ask(hq, "&raw=1");
        assert_eq!(tiered["data"], raw["data"], "{hq}");
        // A 5m lookback on 1h buckets is widened (and said); the windows on buckets are exact.
        assert_eq!(tiered.get("infos").is_none(), hq != "hm", "{hq}: {tiered}");
        assert!(tiered["data"]["result"][0]["histograms"].as_array().is_some_and(|h| h.len() >= 7) || hq.starts_with("histogram_quantile"), "{hq}: {tiered}");
        assert!(tiered["data"]["result"][0]["values"].as_array().is_some_and(|v| v.len() >= 7) || !hq.starts_with("histogram_quantile"), "{hq}: {tiered}");
    }
}

/// Past raw retention through the binary: with raw data kept 4 hours and tiers kept forever, a range
/// query over 10 hours at a step no tier fits (1m against 5m and 1h) answers its old steps from the 5m
/// tier (said in `trace` and `infos`) and its recent ones from raw data, where `raw=1` has nothing old.
#[test]
fn range_queries_past_raw_retention_read_the_finest_tier_that_reaches_back() {
    const H: i64 = 3_600_000;
    let t0 = 472_222 * H;
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &["--storage.tsdb.downsampling=5m,1h", "--storage.tsdb.retention.time=4h"]);
    for part in 0..20 {
        let series: Vec<WriteSeries> = (0..5)
            .map(|i| {
                let pts = (part * 30..part * 30 + 30).map(|m| Sample::new(t0 + m * 60_000 + 5_000, (m * (i + 1)) as f64)).collect();
                WriteSeries::new(labels!("__name__" => "m", "i" => &i.to_string()), pts)
            })
            .collect();
        assert_eq!(s.write_v1(&series, &[]).0, 204);
    }
    let ask = |q: &str, start: i64, extra: &str| -> serde_json::Value {
        let range = format!("start={}&end={}&step=60", start / 1000, (t0 + 9 * H) / 1000);
        range_ok(&s, &format!("query={q}&{range}&trace=1&nocache=1{extra}"))
    };
    let first_t = |v: &serde_json::Value| -> Option<f64> { v["data"]["result"][0]["values"][0][0].as_f64() };
    // The background cuts blocks from the head, computes their tiers, then retention drops the old ones.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let q = "rate(m%5B5m%5D)";
    let raw = loop {
        let raw = ask(q, t0 + H, "&raw=1");
        if first_t(&raw).is_some_and(|t| t * 1000.0 >= (t0 + 4 * H) as f64) {
            break raw;
        }
        assert!(std::time::Instant::now() < deadline, "raw retention did not drop the old blocks in 60 s: {raw}");
        std::thread::sleep(std::time::Duration::from_millis(200));
    };
    let auto = ask(q, t0 + H, "");
    assert_eq!(auto["trace"]["tier"], "5m", "{auto}");
    assert!(auto["infos"].to_string().contains("5m downsampling tier"), "{auto}");
    let t = first_t(&auto).expect("points");
    assert!(t * 1000.0 < (t0 + 2 * H) as f64, "the old steps answered from the tier: {auto}");
    // The recent steps are the raw answer's.
    let (a, r) = (&auto["data"]["result"][0]["values"], &raw["data"]["result"][0]["values"]);
    let last = |v: &serde_json::Value| v.as_array().and_then(|v| v.last().cloned());
    assert_eq!(last(a), last(r));
    let n_raw = r.as_array().map(Vec::len).unwrap_or(0);
    let tail: Vec<_> = a.as_array().expect("values").iter().rev().take(n_raw.saturating_sub(10)).collect();
    let raw_tail: Vec<_> = r.as_array().expect("values").iter().rev().take(n_raw.saturating_sub(10)).collect();
    assert_eq!(tail, raw_tail);
    // Within the raw data the answer is raw.
    let recent = ask(q, t0 + 7 * H, "");
    assert_eq!(recent["trace"]["tier"], serde_json::Value::Null, "{recent}");
}
