//! The write API: an [`Appender`] buffers `(labels, samples)` batches; [`Appender::commit`] routes each
//! batch to the shard that owns its series, commits the shards in parallel, and returns a
//! [`CommitReport`].
//!
//! Rejected samples (Prometheus' `ErrOutOfOrderSample`, `ErrTooOldSample`, `ErrDuplicateSampleForTimestamp`,
//! `ErrOutOfBounds`) are not errors: they are counted per batch in [`CommitReport::rejected`] and the rest
//! of the batch is written. A commit returns `Err` only when the storage itself failed (e.g. a poisoned
//! shard); in that case the batches routed to the failed shard were not acknowledged, while batches of
//! other shards may have been written.
//!
//! Atomicity: within one shard, one batch is one WAL record and becomes visible at once (or never).
//!
//! Start timestamps (Prometheus 3.14's per-sample "ST", ms, 0 = unset) come in through
//! [`Appender::add_with_st`] / [`Appender::add_owned_with_st`]; they are logged (WAL record type 4) and
//! stored in XorSt chunks. A batch whose STs are all 0 is stored exactly as one given to [`Appender::add`].

use std::sync::Arc;

use tessera_model::{Labels, Sample};

use crate::db::Db;
use crate::error::Result;
use crate::shard::ShardBatch;

/// Why samples were rejected. The wording of [`RejectReason::as_str`] is Prometheus'.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RejectReason {
    /// Older than the series' last sample, with no out-of-order window (`storage.ErrOutOfOrderSample`).
    OutOfOrder,
    /// Older than the out-of-order window allows (`storage.ErrTooOldSample`).
    TooOld,
    /// Same timestamp as the last sample with a different value (`storage.ErrDuplicateSampleForTimestamp`).
    DuplicateTimestamp,
    /// Before the head's appendable range, i.e. in time already (being) cut into blocks (`storage.ErrOutOfBounds`).
    OutOfBounds,
}

impl RejectReason {
    pub const ALL: [RejectReason; 4] =
        [RejectReason::OutOfOrder, RejectReason::TooOld, RejectReason::DuplicateTimestamp, RejectReason::OutOfBounds];

    /// Prometheus' error text for this reason.
    pub fn as_str(&self) -> &'static str {
        match self {
            RejectReason::OutOfOrder => "out of order sample",
            RejectReason::TooOld => "too old sample",
            RejectReason::DuplicateTimestamp => "duplicate sample for timestamp",
            RejectReason::OutOfBounds => "out of bounds",
        }
    }

    /// A metric label value (snake case).
    pub fn label(&self) -> &'static str {
        match self {
            RejectReason::OutOfOrder => "out_of_order",
            RejectReason::TooOld => "too_old",
            RejectReason::DuplicateTimestamp => "duplicate",
            RejectReason::OutOfBounds => "out_of_bounds",
        }
    }

    pub(crate) fn index(&self) -> usize {
        match self {
            RejectReason::OutOfOrder => 0,
            RejectReason::TooOld => 1,
            RejectReason::DuplicateTimestamp => 2,
            RejectReason::OutOfBounds => 3,
        }
    }
}

impl std::fmt::Display for RejectReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Samples of one `add()` call rejected for one reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// Index of the `add()` call (0-based) whose samples were rejected.
    pub batch_index: usize,
    pub reason: RejectReason,
    /// How many samples of that batch were rejected for that reason.
    pub count: u64,
    /// Timestamp of the first rejected sample (for the error message).
    pub first_t_ms: i64,
}

/// What a commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitReport {
    /// Samples accepted (exact duplicates of the last sample count as accepted, as in Prometheus).
    pub samples_written: u64,
    pub series_created: u64,
    pub rejected: Vec<Rejected>,
}

impl CommitReport {
    pub(crate) fn merge(&mut self, o: CommitReport) {
        self.samples_written += o.samples_written;
        self.series_created += o.series_created;
        self.rejected.extend(o.rejected);
    }

    /// Total rejected samples.
    pub fn rejected_samples(&self) -> u64 {
        self.rejected.iter().map(|r| r.count).sum()
    }
}

/// Buffers batches until [`Appender::commit`].
pub struct Appender<'a> {
    pub(crate) db: &'a Db,
    /// (labels, samples, start timestamps: same length as samples with some ≠ 0, or empty for none).
    pub(crate) batches: Vec<(Labels, Vec<Sample>, Vec<i64>)>,
}

impl Appender<'_> {
    /// Buffers one batch: samples of one series. Nothing is validated here.
    pub fn add(&mut self, labels: Labels, samples: &[Sample]) {
        self.batches.push((labels, samples.to_vec(), Vec::new()));
    }

    /// Buffers one batch, taking ownership of the samples (no copy).
    pub fn add_owned(&mut self, labels: Labels, samples: Vec<Sample>) {
        self.batches.push((labels, samples, Vec::new()));
    }

    /// Buffers one batch whose samples carry start timestamps: `sts[i]` is `samples[i]`'s (ms, 0 =
    /// unset). If the lengths differ the STs are ignored (the batch is stored as by [`Appender::add`],
    /// and a warning is logged): a caller bug must not attach STs to the wrong samples, nor panic.
    pub fn add_with_st(&mut self, labels: Labels, samples: &[Sample], sts: &[i64]) {
        let sts = if Self::keep_sts(samples.len(), sts) { sts.to_vec() } else { Vec::new() };
        self.batches.push((labels, samples.to_vec(), sts));
    }

    /// [`Appender::add_with_st`] taking ownership (no copy).
    pub fn add_owned_with_st(&mut self, labels: Labels, samples: Vec<Sample>, sts: Vec<i64>) {
        let sts = if Self::keep_sts(samples.len(), &sts) { sts } else { Vec::new() };
        self.batches.push((labels, samples, sts));
    }

    /// Whether a batch's STs are worth storing: one per sample, and not all unset.
    fn keep_sts(n: usize, sts: &[i64]) -> bool {
        if sts.len() != n {
            tracing::warn!(samples = n, start_timestamps = sts.len(), "start timestamps ignored: one per sample expected");
            return false;
        }
        sts.iter().any(|&st| st != 0)
    }

    /// Number of buffered batches.
    pub fn len(&self) -> usize {
        self.batches.len()
    }

    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Writes the buffered batches: routed by `labels.shard(n)`, shards committed in parallel, each batch
    /// logged to its shard's WAL before it becomes visible and before this returns.
    pub fn commit(self) -> Result<CommitReport> {
        let db = self.db;
        let n = db.shards.len();
        let mut per_shard: Vec<Vec<ShardBatch>> = (0..n).map(|_| Vec::new()).collect();
        for (i, (labels, samples, sts)) in self.batches.into_iter().enumerate() {
            if samples.is_empty() {
                continue;
            }
            let hash = labels.hash();
            let s = tessera_model::labels::shard_of_hash(hash, n);
            per_shard[s].push(ShardBatch { index: i, hash, labels, samples, sts });
        }
        let busy: Vec<(usize, Vec<ShardBatch>)> =
            per_shard.into_iter().enumerate().filter(|(_, b)| !b.is_empty()).collect();
        let results: Vec<Result<CommitReport>> = if busy.len() <= 1 {
            busy.into_iter().map(|(s, b)| db.shards[s].commit(b)).collect()
        } else {
            let shards: Vec<Arc<crate::shard::Shard>> = busy.iter().map(|(s, _)| db.shards[*s].clone()).collect();
            std::thread::scope(|scope| {
                let mut hs = Vec::new();
                let mut iter = busy.into_iter().zip(shards);
                // Run the first shard on this thread, the others on scoped threads.
                let first = iter.next();
                for ((_, b), sh) in iter {
                    hs.push(scope.spawn(move || sh.commit(b)));
                }
                let mut out = Vec::new();
                if let Some(((_, b), sh)) = first {
                    out.push(sh.commit(b));
                }
                for h in hs {
                    out.push(h.join().unwrap_or_else(|_| Err(crate::Error::Other("shard commit panicked".into()))));
                }
                out
            })
        };
        let mut report = CommitReport::default();
        let mut first_err = None;
        for r in results {
            match r {
                Ok(rep) => report.merge(rep),
                Err(e) => {
                    if first_err.is_none() {
                        first_err = Some(e);
                    }
                }
            }
        }
        report.rejected.sort_by_key(|r| (r.batch_index, r.reason.index()));
        match first_err {
            Some(e) => {
                db.metrics.commit_errors.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Err(e)
            }
            None => {
                db.metrics.commits.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                Ok(report)
            }
        }
    }
}
