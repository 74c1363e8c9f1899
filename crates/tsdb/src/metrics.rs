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
    pub head_chunk_file_bytes: AtomicU64,
    pub head_chunk_memory_bytes: AtomicU64,
    pub head_cuts: AtomicU64,
    /// Early (memory-pressure) head cuts given up because no chunk boundary lay in the cuttable range.
    pub head_early_cuts_skipped: AtomicU64,
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
        encode_text_many(&[(None, self)], out);
    }
}

/// Several databases' metrics in one exposition (a store each): every family once, one sample per
/// database, labelled `store="<name>"` except the database given `None` (the default store keeps the
/// label sets it always had, so single-store dashboards see no change).
pub fn encode_text_many(dbs: &[(Option<&str>, &Metrics)], out: &mut String) {
    // `labels`: other labels of the sample (`reason="…"`), or empty.
    let sample = |out: &mut String, name: &str, store: Option<&str>, labels: &str, v: &dyn std::fmt::Display| {
        let ls = match (store, labels.is_empty()) {
            (None, true) => String::new(),
            (None, false) => format!("{{{labels}}}"),
            (Some(s), true) => format!("{{store=\"{s}\"}}"),
            (Some(s), false) => format!("{{store=\"{s}\",{labels}}}"),
        };
        let _ = writeln!(out, "tessera_tsdb_{name}{ls} {v}");
    };
    let head = |out: &mut String, name: &str, help: &str, kind: &str| {
        let _ = writeln!(out, "# HELP tessera_tsdb_{name} {help}\n# TYPE tessera_tsdb_{name} {kind}");
    };
    let fam = |out: &mut String, name: &str, help: &str, kind: &str, v: &dyn Fn(&Metrics) -> &AtomicU64| {
        head(out, name, help, kind);
        for (store, m) in dbs {
            sample(out, name, *store, "", &v(m).load(Relaxed));
        }
    };
    let c = |out: &mut String, name: &str, help: &str, v: &dyn Fn(&Metrics) -> &AtomicU64| fam(out, name, help, "counter", v);
    let g = |out: &mut String, name: &str, help: &str, v: &dyn Fn(&Metrics) -> &AtomicU64| fam(out, name, help, "gauge", v);
    c(out, "samples_appended_total", "Samples written to the head (after the WAL).", &|m| &m.samples_appended);
    c(out, "out_of_order_samples_appended_total", "Samples accepted inside the out-of-order window.", &|m| &m.out_of_order_samples_appended);
    c(out, "series_created_total", "Series created in the head.", &|m| &m.series_created);
    c(out, "series_removed_total", "Series removed from the head by garbage collection.", &|m| &m.series_removed);
    head(out, "samples_rejected_total", "Samples rejected, by reason.", "counter");
    for (store, m) in dbs {
        for r in RejectReason::ALL {
            sample(out, "samples_rejected_total", *store, &format!("reason=\"{}\"", r.label()), &m.samples_rejected[r.index()].load(Relaxed));
        }
    }
    c(out, "commits_total", "Appender commits.", &|m| &m.commits);
    c(out, "commit_errors_total", "Appender commits that failed with an error (not rejections).", &|m| &m.commit_errors);
    g(out, "head_series", "Series in the head.", &|m| &m.head_series);
    g(out, "head_chunks", "Chunks in the head (open and closed).", &|m| &m.head_chunks);
    g(out, "head_samples", "Samples in the head.", &|m| &m.head_samples);
    g(out, "head_chunk_file_bytes", "Bytes in the head's memory-mapped chunk files (closed chunks, and chunks merges replaced until their file is deleted).", &|m| &m.head_chunk_file_bytes);
    g(out, "head_chunks_in_memory_bytes", "Closed head chunks' bytes held in RAM: not yet written to a chunk file, or not writable (disk full).", &|m| &m.head_chunk_memory_bytes);
    c(out, "head_truncations_total", "Head ranges cut into blocks.", &|m| &m.head_cuts);
    c(out, "head_early_cuts_skipped_total", "Early (memory-pressure) head cuts given up: no chunk boundary in the cuttable range.", &|m| &m.head_early_cuts_skipped);
    c(out, "wal_bytes_written_total", "Bytes of records written to the WAL.", &|m| &m.wal_bytes_written);
    c(out, "wal_fsyncs_total", "Explicit WAL fsyncs.", &|m| &m.wal_fsyncs);
    head(out, "wal_fsync_seconds_total", "Time spent in explicit WAL fsyncs.", "counter");
    for (store, m) in dbs {
        sample(out, "wal_fsync_seconds_total", *store, "", &(m.wal_fsync_nanos.load(Relaxed) as f64 / 1e9));
    }
    c(out, "wal_corruptions_total", "Corrupt WAL records found (and repaired) on replay.", &|m| &m.wal_corruptions);
    c(out, "wal_replayed_records_total", "WAL records replayed on open.", &|m| &m.wal_replayed_records);
    c(out, "compactions_total", "Block compactions.", &|m| &m.compactions);
    c(out, "compactions_failed_total", "Block compactions that failed.", &|m| &m.compaction_failures);
    c(out, "retention_blocks_deleted_total", "Blocks deleted by retention.", &|m| &m.blocks_deleted_by_retention);
    g(out, "blocks", "Blocks on disk.", &|m| &m.blocks);
    g(out, "disk_bytes", "Bytes of blocks on disk.", &|m| &m.disk_bytes);
    g(out, "tier_blocks", "Downsampling tier blocks on disk (all tiers).", &|m| &m.tier_blocks);
    g(out, "tier_bytes", "Bytes of downsampling tier blocks on disk (all tiers).", &|m| &m.tier_bytes);
    c(out, "exemplars_appended_total", "Exemplars stored in the exemplar rings.", &|m| &m.exemplars_stored);
    c(
        out,
        "exemplars_refused_total",
        "Exemplars not stored (out of order, labels over 128 runes, storage off, unknown series).",
        &|m| &m.exemplars_refused,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn several_stores_share_each_family() {
        let (a, b) = (Metrics::default(), Metrics::default());
        a.head_series.store(3, Relaxed);
        b.head_series.store(5, Relaxed);
        b.samples_rejected[RejectReason::ALL[0].index()].store(7, Relaxed);
        let mut out = String::new();
        encode_text_many(&[(None, &a), (Some("team-b"), &b)], &mut out);
        assert!(out.contains("# TYPE tessera_tsdb_head_series gauge\ntessera_tsdb_head_series 3\ntessera_tsdb_head_series{store=\"team-b\"} 5\n"), "{out}");
        let r = RejectReason::ALL[0].label();
        assert!(out.contains(&format!("tessera_tsdb_samples_rejected_total{{store=\"team-b\",reason=\"{r}\"}} 7\n")), "{out}");
        assert_eq!(out.matches("# HELP tessera_tsdb_head_series ").count(), 1);
        let mut one = String::new();
        a.encode_text(&mut one);
        assert!(!one.contains("store="), "one store: the label sets as before");
    }
}
