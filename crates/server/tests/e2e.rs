//! End-to-end tests against the real `tessera` binary on a loopback port with a temporary data
//! directory: remote write 1.0 and 2.0 (the shared wire vectors included) read back through the API,
//! a table of bad inputs, overload, restarts after SIGTERM and SIGKILL, and the operational endpoints.

mod common;

use common::{Server, CT_V1, CT_V2};
use prost::Message;
use std::io::Write as _;
use std::net::TcpStream;
use std::process::Command;
use std::time::{Duration, Instant};
use tessera_model::{labels, Labels, Sample};
use tessera_protocol::prompb;
use tessera_protocol::remote_write::{self as rw, Metadata, MetricType, WriteSeries};

/// A hex field of `../shared/vectors/wire.json`, or `None` (skipped loudly; an error in CI).
fn vector_bytes(key: &str) -> Option<Vec<u8>> {
    let p = tessera_model::fixtures::shared("vectors/wire.json", "e2e shared vectors")?;
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(p).expect("read wire.json")).expect("parse wire.json");
    Some(hex::decode(v[key].as_str().expect("hex string")).expect("hex"))
}

fn series(l: Labels, samples: &[(i64, f64)]) -> WriteSeries {
    WriteSeries::new(l, samples.iter().map(|&(t, v)| Sample::new(t, v)).collect())
}

fn md(name: &str, kind: MetricType, help: &str) -> Metadata {
    Metadata { metric_family_name: name.into(), kind, help: help.into(), unit: String::new() }
}

const T0: i64 = 1_700_000_000_000;

#[test]
fn shared_v1_vector_is_written_and_read_back_through_the_api() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let Some(body) = vector_bytes("rw1_request_snappy_hex") else { return };
    let (status, written, body) = s.write_raw(body, Some(CT_V1), Some("snappy"));
    // 1.0 answers carry no Written headers, as Prometheus'.
    assert_eq!((status, written), (204, None), "{body}");

    assert_eq!(
        s.get("/api/v1/series?match[]=up").1,
        r#"{"status":"success","data":[{"__name__":"up","instance":"host-1:9100","job":"node"}]}"#
    );
    assert_eq!(
        s.get("/api/v1/series?match[]=%7Bjob%3D~%22.%2B%22%7D").1,
        r#"{"status":"success","data":[{"__name__":"http_requests_total","code":"200","job":"api"},{"__name__":"up","instance":"host-1:9100","job":"node"}]}"#
    );
    // Several match[] are merged and deduplicated; POST form works like GET.
    assert_eq!(
        s.post_form("/api/v1/series", "match[]=up&match[]=%7Bjob%3D%22node%22%7D&start=1699999999&end=1700000100").1,
        r#"{"status":"success","data":[{"__name__":"up","instance":"host-1:9100","job":"node"}]}"#
    );
    assert_eq!(
        s.get("/api/v1/series?match[]=%7Bjob%3D~%22.%2B%22%7D&limit=1").1,
        r#"{"status":"success","data":[{"__name__":"http_requests_total","code":"200","job":"api"}],"warnings":["results truncated due to limit"]}"#
    );
    // Outside the time range: nothing.
    assert_eq!(s.get("/api/v1/series?match[]=up&start=1800000000").1, r#"{"status":"success","data":[]}"#);
    assert_eq!(s.get("/api/v1/labels").1, r#"{"status":"success","data":["__name__","code","instance","job"]}"#);
    assert_eq!(s.get("/api/v1/labels?match[]=up").1, r#"{"status":"success","data":["__name__","instance","job"]}"#);
    assert_eq!(s.get("/api/v1/label/job/values").1, r#"{"status":"success","data":["api","node"]}"#);
    assert_eq!(s.get("/api/v1/label/__name__/values?limit=1").1, r#"{"status":"success","data":["http_requests_total"],"warnings":["results truncated due to limit"]}"#);
    assert_eq!(
        s.get("/api/v1/metadata").1,
        r#"{"status":"success","data":{"http_requests_total":[{"type":"counter","unit":"","help":"Total HTTP requests."}]}}"#
    );
    assert_eq!(s.get("/api/v1/metadata?metric=up").1, r#"{"status":"success","data":{}}"#);
}

#[test]
fn shared_v2_vector_and_encoded_requests_of_both_versions() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let Some(body) = vector_bytes("rw2_request_snappy_hex") else { return };
    let (status, written, body) = s.write_raw(body, Some(CT_V2), Some("snappy"));
    assert_eq!((status, written), (204, Some(3)), "{body}");
    assert_eq!(
        s.get("/api/v1/metadata").1,
        r#"{"status":"success","data":{"http_requests_total":[{"type":"counter","unit":"","help":"Total HTTP requests."}],"up":[{"type":"gauge","unit":"","help":""}]}}"#
    );

    let many: Vec<WriteSeries> = (0..50)
        .map(|i| series(labels!("__name__" => "node_cpu_seconds_total", "cpu" => &*i.to_string(), "job" => "node"), &[(T0, i as f64), (T0 + 15_000, i as f64 + 1.0)]))
        .collect();
    let (status, written, body) = s.write_v1(&many[..25], &[md("node_cpu_seconds_total", MetricType::Counter, "CPU.")]);
    assert_eq!((status, written), (204, None), "{body}");
    let (status, written, body) = s.write_v2(&many[25..], &[]);
    assert_eq!((status, written), (204, Some(50)), "{body}");
    let (_, b) = s.get("/api/v1/series?match[]=node_cpu_seconds_total");
    assert_eq!(b.matches("\"cpu\":").count(), 50, "{b}");
    let (_, b) = s.get("/api/v1/label/cpu/values");
    let v: serde_json::Value = serde_json::from_str(&b).expect("json");
    assert_eq!(v["data"].as_array().expect("array").len(), 50);
    assert_eq!(
        s.get("/api/v1/metadata?metric=node_cpu_seconds_total").1,
        r#"{"status":"success","data":{"node_cpu_seconds_total":[{"type":"counter","unit":"","help":"CPU."}]}}"#
    );
    assert_eq!(s.get("/api/v1/metadata?limit=1").1.matches("\"type\"").count(), 1);

    // A UTF-8 label name, addressed with Prometheus' U__ escaping in the path.
    let (status, _, body) = s.write_v2(&[series(labels!("__name__" => "utf8_metric", "my.label" => "x"), &[(T0, 1.0)])], &[]);
    assert_eq!(status, 204, "{body}");
    assert_eq!(s.get("/api/v1/label/U__my_2e_label/values").1, r#"{"status":"success","data":["x"]}"#);

    let (_, b) = s.get("/api/v1/status/tsdb?limit=2");
    assert!(b.starts_with(r#"{"status":"success","data":{"headStats":{"numSeries":53,"#), "{b}");
    assert!(b.contains(r#""seriesCountByMetricName":[{"name":"node_cpu_seconds_total","value":50},"#), "{b}");
}

#[test]
fn api_errors_look_like_prometheus() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let cases: &[(&str, &str)] = &[
        ("/api/v1/series", r#"{"status":"error","errorType":"bad_data","error":"no match[] parameter provided"}"#),
        (
            "/api/v1/series?match[]=up&start=yesterday",
            r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"start\": invalid time value for 'start': cannot parse \"yesterday\" to a valid timestamp"}"#,
        ),
        (
            "/api/v1/series?match[]=up&limit=-1",
            r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"limit\": limit must be non-negative"}"#,
        ),
        (
            "/api/v1/series?match[]=%7Bjob%3D%22%22%7D",
            r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"match[]\": match[] must contain at least one non-empty matcher"}"#,
        ),
        ("/api/v1/metadata?limit=x", r#"{"status":"error","errorType":"bad_data","error":"limit must be a number"}"#),
        ("/api/v1/status/tsdb?limit=0", r#"{"status":"error","errorType":"bad_data","error":"limit must be a positive number"}"#),
        ("/api/v1/status/tsdb?limit=10001", r#"{"status":"error","errorType":"bad_data","error":"limit must not exceed 10000"}"#),
    ];
    for (path, want) in cases {
        let (status, body) = s.get(path);
        assert_eq!((status, body.as_str()), (400, *want), "{path}");
    }
    let (status, body) = s.get("/api/v1/status/buildinfo");
    assert_eq!(status, 200);
    assert!(body.starts_with(r#"{"status":"success","data":{"version":""#), "{body}");
    let (_, body) = s.get("/api/v1/status/flags");
    assert!(body.contains(r#""storage.tsdb.shards":"2""#), "{body}");
    let (_, body) = s.get("/api/v1/status/runtimeinfo");
    assert!(body.contains(r#""storageRetention":"15d""#), "{body}");
}

/// One series as raw pairs: labels (any order, any content) and (t, v) samples.
type RawSeries<'a> = (Vec<(&'a str, &'a str)>, Vec<(i64, f64)>);

/// Raw protobuf for requests our encoders (which only take valid label sets) cannot express.
fn raw_v1(series: Vec<RawSeries<'_>>) -> Vec<u8> {
    let req = prompb::WriteRequest {
        timeseries: series
            .into_iter()
            .map(|(ls, ss)| prompb::TimeSeries {
                labels: ls.into_iter().map(|(n, v)| prompb::Label { name: n.into(), value: v.into() }).collect(),
                samples: ss.into_iter().map(|(t, v)| prompb::Sample { timestamp: t, value: v }).collect(),
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    };
    rw::compress(&req.encode_to_vec())
}

#[test]
fn bad_inputs_get_the_right_status_and_a_reason_and_do_no_harm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &["--web.max-request-bytes=1MB", "--web.max-inflight-write-bytes=4MB"]);
    let before = series(labels!("__name__" => "before", "job" => "x"), &[(T0, 1.0), (T0 + 15_000, 2.0)]);
    assert_eq!(s.write_v1(&[before], &[]).0, 204);

    let good_pb = rw::encode_v1(&[series(labels!("__name__" => "t", "job" => "y"), &[(T0, 1.0)])], &[]);
    let mut bomb = Vec::new();
    let mut n: u64 = 1 << 30; // declares 1 GiB
    while n >= 0x80 {
        bomb.push((n as u8) | 0x80);
        n >>= 7;
    }
    bomb.push(n as u8);
    bomb.extend_from_slice(&[0u8; 64]);
    let mut gz = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
    gz.extend_from_slice(&good_pb);
    let mut hist_ts = prompb::TimeSeries {
        labels: vec![prompb::Label { name: "__name__".into(), value: "h".into() }],
        ..Default::default()
    };
    // Its count (5) is not the sum of its buckets (none): upstream's validation refuses it.
    hist_ts.histograms.push(prompb::Histogram {
        timestamp: T0,
        schema: 0,
        sum: 1.0,
        count: Some(prompb::histogram::Count::CountInt(5)),
        ..Default::default()
    });
    let hist = rw::compress(&prompb::WriteRequest { timeseries: vec![hist_ts], ..Default::default() }.encode_to_vec());

    struct Case {
        name: &'static str,
        body: Vec<u8>,
        ct: Option<&'static str>,
        ce: Option<&'static str>,
        status: u16,
        says: &'static str,
    }
    let c = |name, body, ct, ce, status, says| Case { name, body, ct, ce, status, says };
    let cases = vec![
        c("garbage", b"this is not snappy at all".to_vec(), Some(CT_V1), Some("snappy"), 400, "snappy"),
        c("gzip encoding", gz, Some(CT_V1), Some("gzip"), 415, "gzip"),
        c("json content type", b"{}".to_vec(), Some("application/json"), Some("snappy"), 415, "application/json"),
        c("unknown proto message", rw::compress(&good_pb), Some("application/x-protobuf;proto=foo.Bar"), Some("snappy"), 415, "foo.Bar"),
        c("truncated protobuf", rw::compress(&good_pb[..good_pb.len() - 3]), Some(CT_V1), Some("snappy"), 400, "protobuf"),
        c("snappy bomb", bomb, Some(CT_V1), Some("snappy"), 400, "snappy"),
        c("huge body", vec![0u8; 2 << 20], Some(CT_V1), Some("snappy"), 413, "exceeds the limit"),
        c("unsorted duplicate labels", raw_v1(vec![(vec![("job", "a"), ("__name__", "m"), ("job", "b")], vec![(T0, 1.0)])]), Some(CT_V1), Some("snappy"), 400, "duplicate label name \"job\""),
        c("duplicate labels", raw_v1(vec![(vec![("__name__", "m"), ("job", "a"), ("job", "b")], vec![(T0, 1.0)])]), Some(CT_V1), Some("snappy"), 400, "duplicate label name \"job\""),
        c("empty metric name", raw_v1(vec![(vec![("__name__", ""), ("job", "a")], vec![(T0, 1.0)])]), Some(CT_V1), Some("snappy"), 400, "empty metric name"),
        c("no metric name", raw_v1(vec![(vec![("job", "a")], vec![(T0, 1.0)])]), Some(CT_V1), Some("snappy"), 400, "missing metric name"),
        c("empty label name", raw_v1(vec![(vec![("", "NaN"), ("__name__", "m")], vec![(T0, 1.0)])]), Some(CT_V1), Some("snappy"), 400, "empty label name"),
        c("invalid native histogram", hist, Some(CT_V1), Some("snappy"), 400, "invalid histograms: 1 histogram samples were not written\n  {__name__=\"h\"}: 1 histogram(s) not written: 0 observations found in buckets, but the Count field is 5"),
    ];
    for case in cases {
        let (status, written, body) = s.write_raw(case.body, case.ct, case.ce);
        assert_eq!(status, case.status, "{}: {body}", case.name);
        assert!(body.contains(case.says), "{}: body {body:?} should say {:?}", case.name, case.says);
        assert_eq!(written.unwrap_or(0), 0, "{}", case.name);
    }

    // Storage rejections: the rest of the request is still written, the body counts by reason.
    let (status, written, body) = s.write_v2(
        &[
            series(labels!("__name__" => "before", "job" => "x"), &[(T0 - 60_000, 0.5), (T0 + 15_000, 9.0), (T0 + 30_000, 3.0)]),
            series(labels!("__name__" => "fresh"), &[(T0, 1.0)]),
        ],
        &[],
    );
    assert_eq!((status, written), (400, Some(2)), "{body}");
    assert!(body.contains("out of order sample: 1 sample not written"), "{body}");
    assert!(body.contains("duplicate sample for timestamp: 1 sample not written"), "{body}");
    assert!(body.contains("{__name__=\"before\", job=\"x\"}"), "{body}");
    // A valid series next to an invalid one is written.
    let (status, written, body) = s.write_raw(
        raw_v1(vec![(vec![("__name__", "ok_one")], vec![(T0, 1.0)]), (vec![("job", "no_name")], vec![(T0, 1.0), (T0 + 1, 2.0)])]),
        Some(CT_V1),
        Some("snappy"),
    );
    assert_eq!((status, written), (400, None), "{body}");
    assert!(body.contains("invalid series: 1 series (2 samples) were not written"), "{body}");

    assert_eq!(s.get("/-/healthy").0, 200);
    assert_eq!(
        s.get("/api/v1/series?match[]=%7B__name__%3D~%22before%7Cfresh%7Cok_one%22%7D").1,
        r#"{"status":"success","data":[{"__name__":"before","job":"x"},{"__name__":"fresh"},{"__name__":"ok_one"}]}"#
    );
    let (_, m) = s.get("/metrics");
    assert!(m.contains("tessera_remote_write_samples_rejected_total{reason=\"out_of_order\"} 1\n"), "{m}");
    assert!(m.contains("tessera_http_requests_total{code=\"415\",handler=\"/api/v1/write\"} 3\n"), "{m}");
}

#[test]
fn in_flight_bytes_are_bounded_with_429_and_retry_after() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &["--web.max-request-bytes=1MB", "--web.max-inflight-write-bytes=1MB"]);
    // A slow sender announces a 1 MB body and sends only part of it: its bytes are reserved.
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut slow = TcpStream::connect(&addr).expect("connect");
    write!(
        slow,
        "POST /api/v1/write HTTP/1.1\r\nHost: x\r\nContent-Type: {CT_V1}\r\nContent-Encoding: snappy\r\nContent-Length: 1000000\r\n\r\n"
    )
    .expect("headers");
    slow.write_all(&[0u8; 1000]).expect("part of the body");
    std::thread::sleep(Duration::from_millis(300));
    let r = s
        .http
        .post(format!("{}/api/v1/write", s.base))
        .header("Content-Type", CT_V1)
        .header("Content-Encoding", "snappy")
        .body(vec![0u8; 100_000]) // 1,000,000 + 100,000 bytes > 1 MiB: rejected before it is read
        .send()
        .expect("second request");
    assert_eq!(r.status().as_u16(), 429);
    assert_eq!(r.headers().get("Retry-After").and_then(|v| v.to_str().ok()), Some("1"));
    // The unread body makes the connection unusable: the client must be told not to reuse it (it once was,
    // and the next request died with IncompleteMessage).
    assert_eq!(r.headers().get("Connection").and_then(|v| v.to_str().ok()), Some("close"));
    assert!(r.text().expect("body").contains("too many remote-write bytes in flight"));
    drop(slow);
    // Once the slow request is gone, its bytes are released.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, _, body) = s.write_v1(&[series(labels!("__name__" => "m"), &[(T0, 1.0)])], &[]);
        if status == 204 {
            break;
        }
        assert!(status == 429 && Instant::now() < deadline, "{status} {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn batch(round: i64) -> Vec<WriteSeries> {
    (0..20)
        .map(|i| series(labels!("__name__" => "restart_metric", "i" => &*i.to_string()), &[(T0 + round * 15_000, i as f64)]))
        .collect()
}

#[test]
fn everything_acknowledged_survives_sigterm_and_sigkill() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let (status, _, body) = s.write_v1(&batch(0), &[md("restart_metric", MetricType::Gauge, "Restarts.")]);
    assert_eq!(status, 204, "{body}");

    let s = s.restart(true);
    let (_, b) = s.get("/api/v1/series?match[]=restart_metric");
    assert_eq!(b.matches("\"i\":").count(), 20, "{b}");
    assert_eq!(
        s.get("/api/v1/metadata").1,
        r#"{"status":"success","data":{"restart_metric":[{"type":"gauge","unit":"","help":"Restarts."}]}}"#,
        "metadata is saved on shutdown"
    );

    // SIGKILL right after the 204: the WAL already has it.
    let (status, _, body) = s.write_v2(&[series(labels!("__name__" => "after_kill"), &[(T0, 1.0)])], &[]);
    assert_eq!(status, 204, "{body}");
    let s = s.restart(false);
    assert_eq!(s.get("/api/v1/series?match[]=after_kill").1, r#"{"status":"success","data":[{"__name__":"after_kill"}]}"#);
    let (_, b) = s.get("/api/v1/series?match[]=restart_metric");
    assert_eq!(b.matches("\"i\":").count(), 20, "{b}");
    // And it keeps accepting writes in order after the restart.
    assert_eq!(s.write_v1(&batch(1), &[]).0, 204);
}

#[test]
fn operational_endpoints() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    assert_eq!(s.get("/-/healthy").0, 200);
    assert_eq!(s.get("/-/ready").0, 200);
    assert_eq!(s.write_v1(&batch(0), &[]).0, 204);
    let (status, m) = s.get("/metrics");
    assert_eq!(status, 200);
    for want in [
        "tessera_http_requests_total{code=\"204\",handler=\"/api/v1/write\"} 1\n",
        "tessera_http_request_duration_seconds_count{handler=\"/api/v1/write\"} 1\n",
        "tessera_remote_write_samples_received_total 20\n",
        "tessera_remote_write_samples_written_total 20\n",
        "tessera_remote_write_inflight_bytes 0\n",
        "tessera_tsdb_head_series 20\n",
        "tessera_ready 1\n",
        "process_resident_memory_bytes ",
        "process_cpu_seconds_total ",
        "process_start_time_seconds ",
    ] {
        assert!(m.contains(want), "/metrics lacks {want:?}:\n{m}");
    }
    let (_, m) = s.get("/metrics");
    assert!(m.contains("tessera_http_requests_total{code=\"200\",handler=\"/metrics\"} 1\n"), "{m}");
}

#[test]
fn help_explains_every_flag_and_bad_flags_fail_fast() {
    let out = Command::new(env!("CARGO_BIN_EXE_tessera")).args(["serve", "--help"]).output().expect("run --help");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    for flag in [
        "--config.file",
        "--storage.tsdb.path",
        "--web.listen-address",
        "--storage.tsdb.retention.time",
        "--storage.tsdb.retention.size",
        "--storage.tsdb.out-of-order-time-window",
        "--storage.tsdb.shards",
        "--storage.tsdb.wal-fsync",
        "--query.lookback-delta",
        "--query.timeout",
        "--query.max-samples",
        "--web.max-request-bytes",
        "--web.max-inflight-write-bytes",
        "--log.format",
    ] {
        assert!(help.contains(flag), "help lacks {flag}:\n{help}");
    }
    let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["serve", "--storage.tsdb.retention.time=15 days"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--storage.tsdb.retention.time"));
}
