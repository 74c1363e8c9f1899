//! Tessera's own metrics, exposed at `/metrics` in the Prometheus text format (0.0.4).
//!
//! A deliberately small hand-rolled registry: a few counters and one histogram family for the HTTP layer
//! and remote write; the storage engine renders its own through `Db::metrics().encode_text`, and the
//! process metrics are read from `/proc` at scrape time (as client_golang's process collector does).

use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

/// Upper bounds of the request-duration buckets, seconds (client_golang's `DefBuckets` plus 25/60 s).
const DURATION_BUCKETS: [f64; 13] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 60.0];

#[derive(Debug, Default, Clone)]
struct Histogram {
    counts: [u64; DURATION_BUCKETS.len()],
    count: u64,
    sum: f64,
}

/// Counters and histograms of the HTTP layer and the write path.
#[derive(Debug, Default)]
pub struct ApiMetrics {
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    durations: Mutex<BTreeMap<String, Histogram>>,
    /// Float samples received in remote-write requests (decoded, before validation).
    pub rw_samples_received: AtomicU64,
    /// Float samples acknowledged by storage.
    pub rw_samples_written: AtomicU64,
    pub rw_histograms_received: AtomicU64,
    pub rw_histograms_written: AtomicU64,
    pub rw_exemplars_written: AtomicU64,
    pub rw_exemplars_received: AtomicU64,
    rw_rejected: Mutex<BTreeMap<String, u64>>,
    /// Series dropped by validation (bad labels, limits).
    pub rw_invalid_series: AtomicU64,
    /// Request bytes currently held by in-flight remote-write requests.
    pub rw_inflight_bytes: AtomicI64,
    /// Requests answered 429 because the in-flight byte budget was used up.
    pub rw_throttled: AtomicU64,
}

impl ApiMetrics {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records one finished request of `handler` (the route pattern) with its status and duration.
    pub fn observe_request(&self, handler: &str, code: u16, seconds: f64) {
        *self.requests.lock().entry((handler.to_string(), code)).or_default() += 1;
        let mut d = self.durations.lock();
        let h = d.entry(handler.to_string()).or_default();
        for (i, ub) in DURATION_BUCKETS.iter().enumerate() {
            if seconds <= *ub {
                h.counts[i] += 1;
            }
        }
        h.count += 1;
        h.sum += seconds;
    }

    /// Counts samples not written, by reason (`out_of_order`, `too_old`, `invalid_series`, …).
    pub fn add_rejected(&self, reason: &str, n: u64) {
        if n > 0 {
            *self.rw_rejected.lock().entry(reason.to_string()).or_default() += n;
        }
    }

    pub fn requests_total(&self, handler: &str, code: u16) -> u64 {
        self.requests.lock().get(&(handler.to_string(), code)).copied().unwrap_or(0)
    }

    /// Appends this registry's families in the text format.
    pub fn encode_text(&self, out: &mut String) {
        out.push_str("# HELP tessera_http_requests_total Count of HTTP requests by handler and status code.\n");
        out.push_str("# TYPE tessera_http_requests_total counter\n");
        for ((h, c), v) in self.requests.lock().iter() {
            let _ = writeln!(out, "tessera_http_requests_total{{code=\"{c}\",handler=\"{}\"}} {v}", esc(h));
        }
        out.push_str("# HELP tessera_http_request_duration_seconds Latency of HTTP requests by handler.\n");
        out.push_str("# TYPE tessera_http_request_duration_seconds histogram\n");
        for (h, hist) in self.durations.lock().iter() {
            let h = esc(h);
            for (i, ub) in DURATION_BUCKETS.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "tessera_http_request_duration_seconds_bucket{{handler=\"{h}\",le=\"{}\"}} {}",
                    fmt_f64(*ub),
                    hist.counts[i]
                );
            }
            let _ = writeln!(out, "tessera_http_request_duration_seconds_bucket{{handler=\"{h}\",le=\"+Inf\"}} {}", hist.count);
            let _ = writeln!(out, "tessera_http_request_duration_seconds_sum{{handler=\"{h}\"}} {}", fmt_f64(hist.sum));
            let _ = writeln!(out, "tessera_http_request_duration_seconds_count{{handler=\"{h}\"}} {}", hist.count);
        }
        let counters: [(&str, &str, &AtomicU64); 8] = [
            ("tessera_remote_write_samples_received_total", "Float samples received through remote write.", &self.rw_samples_received),
            ("tessera_remote_write_samples_written_total", "Float samples written to storage through remote write.", &self.rw_samples_written),
            ("tessera_remote_write_histograms_received_total", "Native histogram samples received through remote write.", &self.rw_histograms_received),
            ("tessera_remote_write_histograms_written_total", "Native histogram samples written to storage through remote write.", &self.rw_histograms_written),
            ("tessera_remote_write_exemplars_received_total", "Exemplars received through remote write.", &self.rw_exemplars_received),
            ("tessera_remote_write_exemplars_written_total", "Exemplars stored through remote write (duplicates of a series' newest included).", &self.rw_exemplars_written),
            ("tessera_remote_write_invalid_series_total", "Series dropped from remote-write requests by validation.", &self.rw_invalid_series),
            ("tessera_remote_write_throttled_requests_total", "Remote-write requests answered 429 because the in-flight byte budget was used up.", &self.rw_throttled),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {}", v.load(Ordering::Relaxed));
        }
        out.push_str("# HELP tessera_remote_write_samples_rejected_total Samples not written, by reason.\n");
        out.push_str("# TYPE tessera_remote_write_samples_rejected_total counter\n");
        for (r, v) in self.rw_rejected.lock().iter() {
            let _ = writeln!(out, "tessera_remote_write_samples_rejected_total{{reason=\"{}\"}} {v}", esc(r));
        }
        let _ = writeln!(
            out,
            "# HELP tessera_remote_write_inflight_bytes Request bytes held by in-flight remote-write requests.\n# TYPE tessera_remote_write_inflight_bytes gauge\ntessera_remote_write_inflight_bytes {}",
            self.rw_inflight_bytes.load(Ordering::Relaxed)
        );
    }
}

/// Escapes a label value for the text format.
/// Appends the families of a `prometheus-client` registry in the text format 0.0.4 that `/metrics`
/// serves. The crate writes OpenMetrics, whose counter families are named without `_total` (`# TYPE x
/// counter` over samples `x_total`) and which ends with `# EOF`; the 0.0.4 format names the family as its
/// samples, so counter families are renamed here, `# UNIT` lines dropped and no `# EOF` written.
pub fn encode_registry_004(registry: &prometheus_client::registry::Registry, out: &mut String) {
    let mut om = String::new();
    if prometheus_client::encoding::text::encode_registry(&mut om, registry).is_err() {
        return;
    }
    let counters: std::collections::HashSet<&str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE ")?.strip_suffix(" counter"))
        .collect();
    for line in om.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let meta = ["# HELP ", "# TYPE "].into_iter().find_map(|p| line.strip_prefix(p).map(|rest| (p, rest)));
        match meta {
            Some((p, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                let total = if counters.contains(name) { "_total" } else { "" };
                let _ = writeln!(out, "{p}{name}{total} {tail}");
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
}

fn esc(s: &str) -> String {
    s.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

/// Formats a float as the text format expects (Go's `strconv.FormatFloat(v, 'g', -1, 64)`, as
/// `expfmt` writes it).
pub fn fmt_f64(v: f64) -> String {
    tessera_model::gofloat::format_g(v)
}

/// Appends `process_*` metrics read from `/proc/self` (Linux); silently nothing elsewhere.
pub fn encode_process_metrics(out: &mut String) {
    // CLK_TCK is 100 on every Linux we target; reading it needs sysconf (unsafe FFI), not worth it here.
    const TICKS_PER_SECOND: f64 = 100.0;
    if let Ok(stat) = std::fs::read_to_string("/proc/self/stat") {
        // Fields after the parenthesised command name (which may itself contain spaces).
        if let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) {
            let f: Vec<&str> = rest.split_whitespace().collect();
            // rest[0] is field 3 (state): utime = field 14, stime = 15, starttime = 22, vsize = 23.
            let field = |n: usize| f.get(n - 3).and_then(|s| s.parse::<f64>().ok());
            if let (Some(u), Some(s)) = (field(14), field(15)) {
                let _ = writeln!(out, "# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {}", fmt_f64((u + s) / TICKS_PER_SECOND));
            }
            if let (Some(start), Some(btime)) = (field(22), boot_time()) {
                let _ = writeln!(out, "# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {}", fmt_f64(btime + start / TICKS_PER_SECOND));
            }
            if let Some(v) = field(23) {
                let _ = writeln!(out, "# HELP process_virtual_memory_bytes Virtual memory size in bytes.\n# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes {}", fmt_f64(v));
            }
        }
    }
    if let Some(rss) = rss_bytes() {
        let _ = writeln!(out, "# HELP process_resident_memory_bytes Resident memory size in bytes.\n# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {rss}");
    }
    if let Ok(rd) = std::fs::read_dir("/proc/self/fd") {
        let _ = writeln!(out, "# HELP process_open_fds Number of open file descriptors.\n# TYPE process_open_fds gauge\nprocess_open_fds {}", rd.count());
    }
}

/// Resident set size from `/proc/self/status` (`VmRSS`, kB).
pub fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Threads of this process (`/proc/self/status`), reported where Prometheus reports goroutines.
pub fn thread_count() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/status").ok()?;
    s.lines().find(|l| l.starts_with("Threads:"))?.split_whitespace().nth(1)?.parse().ok()
}

fn boot_time() -> Option<f64> {
    let s = std::fs::read_to_string("/proc/stat").ok()?;
    s.lines().find(|l| l.starts_with("btime "))?.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_families_in_the_004_format() {
        use prometheus_client::metrics::{counter::Counter, gauge::Gauge};
        let mut r = prometheus_client::registry::Registry::default();
        let c: Counter = Counter::default();
        let g: Gauge = Gauge::default();
        c.inc_by(7);
        g.set(-3);
        let sub = r.sub_registry_with_prefix("tessera_x");
        sub.register("hits", "Hits", c);
        sub.register("bytes", "Bytes held", g);
        let mut out = String::new();
        encode_registry_004(&r, &mut out);
        assert_eq!(
            out,
            "# HELP tessera_x_hits_total Hits.\n# TYPE tessera_x_hits_total counter\ntessera_x_hits_total 7\n\
             # HELP tessera_x_bytes Bytes held.\n# TYPE tessera_x_bytes gauge\ntessera_x_bytes -3\n"
        );
    }

    #[test]
    fn text_format() {
        let m = ApiMetrics::new();
        m.observe_request("/api/v1/write", 204, 0.003);
        m.observe_request("/api/v1/write", 204, 0.2);
        m.add_rejected("out_of_order", 3);
        m.add_rejected("too_old", 0);
        let mut s = String::new();
        m.encode_text(&mut s);
        assert!(s.contains("tessera_http_requests_total{code=\"204\",handler=\"/api/v1/write\"} 2\n"), "{s}");
        assert!(s.contains("tessera_http_request_duration_seconds_bucket{handler=\"/api/v1/write\",le=\"0.005\"} 1\n"));
        assert!(s.contains("tessera_http_request_duration_seconds_bucket{handler=\"/api/v1/write\",le=\"0.25\"} 2\n"));
        assert!(s.contains("tessera_http_request_duration_seconds_count{handler=\"/api/v1/write\"} 2\n"));
        assert!(s.contains("tessera_remote_write_samples_rejected_total{reason=\"out_of_order\"} 3\n"));
        assert!(!s.contains("too_old"));
        let mut p = String::new();
        encode_process_metrics(&mut p);
        if cfg!(target_os = "linux") {
            assert!(p.contains("process_resident_memory_bytes "), "{p}");
            assert!(p.contains("process_cpu_seconds_total "));
            assert!(p.contains("process_start_time_seconds "));
        }
    }
}
