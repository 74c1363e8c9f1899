//! End-to-end tests of the PromQL endpoints and the `promqltest` command against the real `tessera`
//! binary: data written by remote write is read back through `/api/v1/query` and
//! `/api/v1/query_range` (JSON compared byte for byte), errors keep Prometheus' types and statuses, and
//! `tessera promqltest` prints per-file counts and each failure.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tessera_model::{labels, Sample};
use tessera_protocol::remote_write::{self as rw, WriteSeries};

/// A running `tessera serve`, killed when dropped.
struct Server {
    child: Child,
    base: String,
    http: reqwest::blocking::Client,
}

impl Server {
    fn start(dir: &Path) -> Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
        let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .arg("serve")
            .arg(format!("--storage.tsdb.path={}", dir.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--storage.tsdb.shards=2")
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn tessera");
        let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
        let s = Server { child, base: format!("http://127.0.0.1:{port}"), http };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = s.http.get(format!("{}/-/ready", s.base)).send()
                && r.status() == 200
            {
                return s;
            }
            assert!(Instant::now() < deadline, "server did not become ready");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn get(&self, path: &str) -> (u16, String) {
        let r = self.http.get(format!("{}{path}", self.base)).send().expect("GET");
        (r.status().as_u16(), r.text().expect("body"))
    }

    fn post_form(&self, path: &str, form: &str) -> (u16, String) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form.to_string())
            .send()
            .expect("POST");
        (r.status().as_u16(), r.text().expect("body"))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

const T0: i64 = 1_700_000_000_000;

#[test]
fn remote_write_then_query_and_query_range() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path());
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
