//! The engine's own counters and gauges, as plain atomics (no registry dependency), rendered in
//! Prometheus' text exposition format by [`Metrics::encode_text`] under the prefix `tessera_tsdb_`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use crate::appender::RejectReason;

/// Atomic counters (monotonic) and gauges (set) of one database.
#[derive(Debug, Default)]
pub struct Metrics {
    pub samples_appended: AtomicU64,
    pub series_created: AtomicU64,
    pub series_removed: AtomicU64,
    /// Rejected samples, indexed like [`RejectReason::ALL`].
    pub samples_rejected: [AtomicU64; RejectReason::ALL.len()],
    /// Series in the heads now (created or replayed, not yet removed), kept exactly so that
    /// [`crate::Options::max_series`] can be checked with one atomic operation.
    pub active_series: AtomicU64,
    pub out_of_order_samples_appended: AtomicU64,
    pub commits: AtomicU64,
    pub commit_errors: AtomicU64,
    pub head_series: AtomicU64,
    pub head_chunks: AtomicU64,
    pub head_samples: AtomicU64,
    pub head_cuts: AtomicU64,
    pub wal_bytes_written: AtomicU64,
    pub wal_fsyncs: AtomicU64,
    /// Total fsync time, nanoseconds.
    pub wal_fsync_nanos: AtomicU64,
    pub wal_corruptions: AtomicU64,
    pub wal_replayed_records: AtomicU64,
    pub compactions: AtomicU64,
    pub compaction_failures: AtomicU64,
    pub blocks_deleted_by_retention: AtomicU64,
    pub blocks: AtomicU64,
    pub disk_bytes: AtomicU64,
    /// Downsampling tier blocks and their bytes (all tiers).
    pub tier_blocks: AtomicU64,
    pub tier_bytes: AtomicU64,
    /// Exemplars added to the rings.
    pub exemplars_stored: AtomicU64,
    /// Exemplars not stored: out of order, labels too long, storage off, or no such series.
    pub exemplars_refused: AtomicU64,
}

impl Metrics {
    pub(crate) fn add_rejected(&self, r: RejectReason, n: u64) {
        self.samples_rejected[r.index()].fetch_add(n, Relaxed);
    }

    /// Writes every metric in Prometheus' text exposition format (with `# HELP` and `# TYPE`).
    pub fn encode_text(&self, out: &mut String) {
        let c = |out: &mut String, name: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(out, "# HELP tessera_tsdb_{name} {help}\n# TYPE tessera_tsdb_{name} counter");
            let _ = writeln!(out, "tessera_tsdb_{name} {}", v.load(Relaxed));
        };
        let g = |out: &mut String, name: &str, help: &str, v: &AtomicU64| {
            let _ = writeln!(out, "# HELP tessera_tsdb_{name} {help}\n# TYPE tessera_tsdb_{name} gauge");
            let _ = writeln!(out, "tessera_tsdb_{name} {}", v.load(Relaxed));
        };
        c(out, "samples_appended_total", "Samples written to the head (after the WAL).", &self.samples_appended);
        c(out, "out_of_order_samples_appended_total", "Samples accepted inside the out-of-order window.", &self.out_of_order_samples_appended);
        c(out, "series_created_total", "Series created in the head.", &self.series_created);
        c(out, "series_removed_total", "Series removed from the head by garbage collection.", &self.series_removed);
        let _ = writeln!(out, "# HELP tessera_tsdb_samples_rejected_total Samples rejected, by reason.");
        let _ = writeln!(out, "# TYPE tessera_tsdb_samples_rejected_total counter");
        for r in RejectReason::ALL {
            let _ = writeln!(
                out,
                "tessera_tsdb_samples_rejected_total{{reason=\"{}\"}} {}",
                r.label(),
                self.samples_rejected[r.index()].load(Relaxed)
            );
        }
        c(out, "commits_total", "Appender commits.", &self.commits);
        c(out, "commit_errors_total", "Appender commits that failed with an error (not rejections).", &self.commit_errors);
        g(out, "head_series", "Series in the head.", &self.head_series);
        g(out, "head_chunks", "Chunks in the head (open and closed).", &self.head_chunks);
        g(out, "head_samples", "Samples in the head.", &self.head_samples);
        c(out, "head_truncations_total", "Head ranges cut into blocks.", &self.head_cuts);
        c(out, "wal_bytes_written_total", "Bytes of records written to the WAL.", &self.wal_bytes_written);
        c(out, "wal_fsyncs_total", "Explicit WAL fsyncs.", &self.wal_fsyncs);
        let _ = writeln!(out, "# HELP tessera_tsdb_wal_fsync_seconds_total Time spent in explicit WAL fsyncs.");
        let _ = writeln!(out, "# TYPE tessera_tsdb_wal_fsync_seconds_total counter");
        let _ = writeln!(out, "tessera_tsdb_wal_fsync_seconds_total {}", self.wal_fsync_nanos.load(Relaxed) as f64 / 1e9);
        c(out, "wal_corruptions_total", "Corrupt WAL records found (and repaired) on replay.", &self.wal_corruptions);
        c(out, "wal_replayed_records_total", "WAL records replayed on open.", &self.wal_replayed_records);
        c(out, "compactions_total", "Block compactions.", &self.compactions);
        c(out, "compactions_failed_total", "Block compactions that failed.", &self.compaction_failures);
        c(out, "retention_blocks_deleted_total", "Blocks deleted by retention.", &self.blocks_deleted_by_retention);
        g(out, "blocks", "Blocks on disk.", &self.blocks);
        g(out, "disk_bytes", "Bytes of blocks on disk.", &self.disk_bytes);
        g(out, "tier_blocks", "Downsampling tier blocks on disk (all tiers).", &self.tier_blocks);
        g(out, "tier_bytes", "Bytes of downsampling tier blocks on disk (all tiers).", &self.tier_bytes);
        c(out, "exemplars_appended_total", "Exemplars stored in the exemplar rings.", &self.exemplars_stored);
        c(out, "exemplars_refused_total", "Exemplars not stored (out of order, labels over 128 runes, storage off, unknown series).", &self.exemplars_refused);
    }
}
