//! Starting Tessera and Prometheus on loopback in fresh temporary directories, and stopping them.
//!
//! A [`Server`] owns its child process and its temporary directory; dropping it kills the process and
//! removes the directory, so an error or a panic anywhere in the harness never leaves a server behind.

use crate::http::{Client, Url};
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One running server.
pub struct Server {
    /// `tessera` or `prometheus`, for messages.
    pub name: &'static str,
    /// `127.0.0.1:PORT`.
    pub addr: String,
    child: Child,
    log: PathBuf,
    // Dropped after the child is killed (field order does not matter: `Drop` kills first).
    _dir: tempfile::TempDir,
}

impl Server {
    /// Starts Tessera's `serve` with experimental PromQL functions enabled.
    pub fn tessera(bin: &Path) -> anyhow::Result<Server> {
        Server::tessera_with(bin, &[])
    }

    /// [`Server::tessera`] with extra command-line flags.
    pub fn tessera_with(bin: &Path, extra: &[&str]) -> anyhow::Result<Server> {
        let dir = tempfile::Builder::new().prefix("tessera-bench-tessera").tempdir()?;
        let addr = free_addr()?;
        let mut cmd = Command::new(bin);
        cmd.arg("serve")
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--enable-feature=promql-experimental-functions")
            .arg("--log.level=warn")
            .args(extra);
        Server::spawn("tessera", cmd, dir, addr)
    }

    /// Starts Prometheus with an empty configuration (no scrapes), the remote-write receiver and
    /// experimental PromQL functions.
    pub fn prometheus(bin: &Path) -> anyhow::Result<Server> {
        let dir = tempfile::Builder::new().prefix("promql-diff-prometheus").tempdir()?;
        let addr = free_addr()?;
        let cfg = dir.path().join("prometheus.yml");
        std::fs::write(&cfg, "global: {}\n")?;
        let mut cmd = Command::new(bin);
        cmd.arg(format!("--config.file={}", cfg.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address={addr}"))
            .arg("--web.enable-remote-write-receiver")
            .arg("--enable-feature=promql-experimental-functions")
            .arg("--log.level=warn");
        Server::spawn("prometheus", cmd, dir, addr)
    }

    fn spawn(name: &'static str, mut cmd: Command, dir: tempfile::TempDir, addr: String) -> anyhow::Result<Server> {
        let log = dir.path().join("server.log");
        let out = File::create(&log)?;
        let err = out.try_clone()?;
        cmd.stdin(Stdio::null()).stdout(Stdio::from(out)).stderr(Stdio::from(err));
        let child = cmd.spawn().map_err(|e| anyhow::anyhow!("cannot start {name} ({:?}): {e}", cmd.get_program()))?;
        Ok(Server { name, addr, child, log, _dir: dir })
    }

    /// The child's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A client on this server (any path can be requested through [`Client::request`]).
    pub fn client(&self, timeout: Duration) -> anyhow::Result<Client> {
        Ok(Client::new(Url::parse(&format!("{}/", self.base_url()))?, timeout))
    }

    /// Waits until `/-/ready` answers 200, the process dies, or `timeout` passes.
    pub fn wait_ready(&mut self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = Instant::now() + timeout;
        let mut client = self.client(Duration::from_secs(5))?;
        loop {
            if let Some(status) = self.child.try_wait()? {
                anyhow::bail!("{} exited with {status} before it was ready; its log:\n{}", self.name, self.log_tail());
            }
            if let Ok(r) = client.request("GET", "/-/ready", &[], &[])
                && r.status == 200
            {
                return Ok(());
            }
            if Instant::now() > deadline {
                anyhow::bail!("{} not ready after {timeout:?}; its log:\n{}", self.name, self.log_tail());
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The last ~40 lines of the server's output.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(40)..].join("\n")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback address with a port that was free a moment ago (the OS picks it; the small race with
/// other processes is acceptable for a dev harness).
fn free_addr() -> anyhow::Result<String> {
    let l = TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.to_string())
}
