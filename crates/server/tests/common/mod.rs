//! The start-up harness shared by the end-to-end tests: a real `tessera serve` on a free loopback port
//! over a temporary data directory, waited on until `/-/ready`, with helpers to send remote write and
//! HTTP API requests, and to stop it gracefully (SIGTERM) or not (SIGKILL) and start it again.
// Each test binary compiles this module on its own and uses only part of it.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use tessera_protocol::remote_write::{self as rw, Metadata, WriteSeries};

pub const CT_V1: &str = "application/x-protobuf";
pub const CT_V2: &str = "application/x-protobuf;proto=io.prometheus.write.v2.Request";

/// A running `tessera serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    /// `http://127.0.0.1:<port>`.
    pub base: String,
    pub dir: PathBuf,
    /// The flags given to [`Server::start`] beyond the harness' own, kept for [`Server::restart`].
    pub extra: Vec<String>,
    pub http: reqwest::blocking::Client,
    /// An `Authorization` header readiness checks send (a server with credentials configured).
    pub auth: Option<String>,
}

/// A loopback port for a server under test: free when asked, and never handed out twice by this process.
/// Not the kernel's `bind(0)`: a port it hands out and this process releases can be handed to the next
/// `bind(0)` too, so two servers of concurrent tests got one port (CI: the second failed to bind, the
/// first answered the second's readiness check, then was stopped under its writes). These come from
/// below Linux' ephemeral range (32768–60999), which no `bind(0)` or outgoing connection takes, from a
/// start that depends on the process id (test binaries of other runs on the machine).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU32, Ordering};
    const FIRST: u32 = 10_000;
    const SPAN: u32 = 22_000;
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let start = std::process::id().wrapping_mul(97) % SPAN;
    for _ in 0..SPAN {
        let port = (FIRST + (start + NEXT.fetch_add(1, Ordering::Relaxed)) % SPAN) as u16;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FIRST}..{}", FIRST + SPAN)
}

impl Server {
    pub fn start(dir: &Path, extra: &[&str]) -> Server {
        Self::start_auth(dir, extra, None)
    }

    /// [`Server::start`] for a server that wants credentials: readiness is asked with `auth`.
    pub fn start_auth(dir: &Path, extra: &[&str], auth: Option<&str>) -> Server {
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let (child, base) = spawn(dir, &extra);
        let http = reqwest::blocking::Client::builder().timeout(Duration::from_secs(30)).build().expect("client");
        let s = Server { child, base, dir: dir.to_path_buf(), extra, http, auth: auth.map(str::to_string) };
        s.wait_ready();
        s
    }

    /// Waits until `/-/ready` answers 200 (the default store is open) and then until every store the
    /// config file names (`[stores.<name>]`) is open too: stores open in the background, each on its own,
    /// and a write to one still opening answers 503 (a test that wrote at once raced that).
    pub fn wait_ready(&self) {
        self.wait_ready_at("");
        for name in self.configured_stores() {
            self.wait_ready_at(&format!("/store/{name}"));
        }
    }

    /// The store names of the `--config.file` this server was started with (table headers only).
    fn configured_stores(&self) -> Vec<String> {
        let Some(path) = self.extra.iter().find_map(|f| f.strip_prefix("--config.file=")) else {
            return Vec::new();
        };
        let text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines().filter_map(|l| l.trim().strip_prefix("[stores.")?.strip_suffix(']')).map(|n| n.trim_matches('"').to_string()).collect()
    }

    fn wait_ready_at(&self, prefix: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let mut req = self.http.get(format!("{}{prefix}/-/ready", self.base));
            if let Some(a) = &self.auth {
                req = req.header("Authorization", a);
            }
            if let Ok(r) = req.send()
                && r.status() == 200
            {
                return;
            }
            assert!(Instant::now() < deadline, "server at {}{prefix} did not become ready", self.base);
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    pub fn get(&self, path: &str) -> (u16, String) {
        let r = self.http.get(format!("{}{path}", self.base)).send().expect("GET");
        (r.status().as_u16(), r.text().expect("body"))
    }

    pub fn post_form(&self, path: &str, form: &str) -> (u16, String) {
        let r = self
            .http
            .post(format!("{}{path}", self.base))
            .header("Content-Type", "application/x-www-form-urlencoded")
            .body(form.to_string())
            .send()
            .expect("POST");
        (r.status().as_u16(), r.text().expect("body"))
    }

    /// Posts a remote-write body; returns status, samples-written header (answers to 2.0 carry the
    /// Written headers, answers to 1.0 none, as Prometheus'), body.
    pub fn write_raw(&self, body: Vec<u8>, ct: Option<&str>, ce: Option<&str>) -> (u16, Option<u64>, String) {
        let mut req = self.http.post(format!("{}/api/v1/write", self.base)).body(body);
        if let Some(ct) = ct {
            req = req.header("Content-Type", ct);
        }
        if let Some(ce) = ce {
            req = req.header("Content-Encoding", ce);
        }
        let r = req.send().expect("POST write");
        let written = r
            .headers()
            .get("X-Prometheus-Remote-Write-Samples-Written")
            .and_then(|v| v.to_str().ok())
            .and_then(|s| s.parse().ok());
        let v2 = ct.is_some_and(|c| c.contains("io.prometheus.write.v2.Request"));
        for h in ["X-Prometheus-Remote-Write-Histograms-Written", "X-Prometheus-Remote-Write-Exemplars-Written"] {
            assert!(!v2 || r.status() == 415 || r.headers().contains_key(h), "{h} missing");
            assert!(v2 || !r.headers().contains_key(h), "{h} on a 1.0 answer");
        }
        (r.status().as_u16(), written, r.text().expect("body"))
    }

    pub fn write_v1(&self, series: &[WriteSeries], md: &[Metadata]) -> (u16, Option<u64>, String) {
        self.write_raw(rw::compress(&rw::encode_v1(series, md)), Some(CT_V1), Some("snappy"))
    }

    pub fn write_v2(&self, series: &[WriteSeries], md: &[Metadata]) -> (u16, Option<u64>, String) {
        self.write_raw(rw::compress(&rw::encode_v2(series, md)), Some(CT_V2), Some("snappy"))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// SIGTERM, then wait for a clean exit.
    pub fn terminate(mut self) {
        let st = Command::new("kill").args(["-TERM", &self.pid().to_string()]).status().expect("run kill");
        assert!(st.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                assert!(status.success(), "tessera exited with {status} after SIGTERM");
                return;
            }
            assert!(Instant::now() < deadline, "tessera did not exit after SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: no chance to flush anything.
    pub fn kill9(mut self) {
        self.child.kill().expect("SIGKILL");
        let _ = self.child.wait();
    }

    pub fn restart(self, graceful: bool) -> Server {
        let extra = self.extra.clone();
        let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
        self.restart_with(graceful, &extra)
    }

    /// Stops (SIGTERM if `graceful`, else SIGKILL) and starts again on the same data directory with
    /// other flags.
    pub fn restart_with(self, graceful: bool, extra: &[&str]) -> Server {
        let dir = self.dir.clone();
        if graceful { self.terminate() } else { self.kill9() }
        Server::start(&dir, extra)
    }
}

pub fn spawn(dir: &Path, extra: &[String]) -> (Child, String) {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .arg("serve")
        .arg(format!("--storage.tsdb.path={}", dir.display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--storage.tsdb.shards=2")
        .arg("--log.level=warn")
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn tessera");
    (child, format!("http://127.0.0.1:{port}"))
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
