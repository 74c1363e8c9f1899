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
//! Borrowed batches ([`Appender::add_ref`]) are the ingest fast path: labels as canonical `(name, value)`
//! pairs, samples and start timestamps all stay the caller's until the commit; a series the head already
//! has is found by [`Labels::hash`]-identical hashing of the pairs and compared in place, so only series
//! the commit creates get an owned [`Labels`]. The appender's lifetime covers what it borrows.
//!
//! Start timestamps (Prometheus 3.14's per-sample "ST", ms, 0 = unset) come in through
//! [`Appender::add_with_st`] / [`Appender::add_owned_with_st`]; they are logged (WAL record type 4) and
//! stored in XorSt chunks. A batch whose STs are all 0 is stored exactly as one given to [`Appender::add`].

use std::borrow::Cow;
use std::sync::Arc;

use tessera_model::{Exemplar, HistogramSample, Labels, Sample};

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
    /// More than [`crate::Options::max_future_ms`] ahead of the clock. Prometheus has no such bound (it
    /// answers a far-future sample with "out of bounds" only once the head has moved); the wording
    /// starts as Prometheus' so that tools matching on it still do.
    TooFarInFuture,
    /// The series is new and the request already created [`Appender::limit_new_series`] series.
    RequestSeriesLimit,
    /// The series is new and the database holds [`crate::Options::max_series`] active series.
    MaxSeries,
    /// A native histogram whose bucket counts do not match its spans (upstream's validation, which
    /// remote write runs before storage, words the finer cases).
    InvalidHistogram,
}

impl RejectReason {
    pub const ALL: [RejectReason; 8] = [
        RejectReason::OutOfOrder,
        RejectReason::TooOld,
        RejectReason::DuplicateTimestamp,
        RejectReason::OutOfBounds,
        RejectReason::TooFarInFuture,
        RejectReason::RequestSeriesLimit,
        RejectReason::MaxSeries,
        RejectReason::InvalidHistogram,
    ];

    /// Prometheus' error text for this reason.
    pub fn as_str(&self) -> &'static str {
        match self {
            RejectReason::OutOfOrder => "out of order sample",
            RejectReason::TooOld => "too old sample",
            RejectReason::DuplicateTimestamp => "duplicate sample for timestamp",
            RejectReason::OutOfBounds => "out of bounds",
            RejectReason::TooFarInFuture => "out of bounds: timestamp too far in the future",
            RejectReason::RequestSeriesLimit => "per-request limit of new series exceeded",
            RejectReason::MaxSeries => "limit of active series reached",
            RejectReason::InvalidHistogram => "invalid histogram: bucket counts do not match spans",
        }
    }

    /// A metric label value (snake case).
    pub fn label(&self) -> &'static str {
        match self {
            RejectReason::OutOfOrder => "out_of_order",
            RejectReason::TooOld => "too_old",
            RejectReason::DuplicateTimestamp => "duplicate",
            RejectReason::OutOfBounds => "out_of_bounds",
            RejectReason::TooFarInFuture => "too_far_in_future",
            RejectReason::RequestSeriesLimit => "request_series_limit",
            RejectReason::MaxSeries => "max_series",
            RejectReason::InvalidHistogram => "invalid_histogram",
        }
    }

    pub(crate) fn index(&self) -> usize {
        match self {
            RejectReason::OutOfOrder => 0,
            RejectReason::TooOld => 1,
            RejectReason::DuplicateTimestamp => 2,
            RejectReason::OutOfBounds => 3,
            RejectReason::TooFarInFuture => 4,
            RejectReason::RequestSeriesLimit => 5,
            RejectReason::MaxSeries => 6,
            RejectReason::InvalidHistogram => 7,
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
    /// The rejected samples are native histograms (a batch's floats and histograms are reported apart).
    pub histograms: bool,
}

/// What a commit did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CommitReport {
    /// Samples accepted (exact duplicates of the last sample count as accepted, as in Prometheus).
    pub samples_written: u64,
    /// Native-histogram samples accepted (exact duplicates included, as for floats).
    pub histograms_written: u64,
    /// Exemplars stored (duplicates of a series' newest one count, as upstream's no-op).
    pub exemplars_written: u64,
    pub series_created: u64,
    pub rejected: Vec<Rejected>,
}

impl CommitReport {
    pub(crate) fn merge(&mut self, o: CommitReport) {
        self.samples_written += o.samples_written;
        self.histograms_written += o.histograms_written;
        self.exemplars_written += o.exemplars_written;
        self.series_created += o.series_created;
        self.rejected.extend(o.rejected);
    }

    /// Total rejected samples.
    pub fn rejected_samples(&self) -> u64 {
        self.rejected.iter().map(|r| r.count).sum()
    }
}

/// A batch's series identity: owned labels, or `(name, value)` pairs borrowed from the caller (e.g. a
/// remote-write body) that are already canonical (sorted by name, unique, no empty value).
///
/// Borrowed pairs are the ingest fast path: a series the head already has is found by hash and a
/// comparison against the pairs, so its labels are never copied; a [`Labels`] is built only for a series
/// the commit creates.
pub(crate) enum BatchLabels<'a> {
    Owned(Labels),
    Borrowed(&'a [(&'a str, &'a str)]),
}

impl BatchLabels<'_> {
    /// [`Labels::hash`] of these labels (identical for both forms of the same set).
    pub(crate) fn hash(&self) -> u64 {
        match self {
            BatchLabels::Owned(l) => l.hash(),
            BatchLabels::Borrowed(p) => tessera_model::labels::hash_pairs(p),
        }
    }

    /// Whether these are exactly `l`.
    pub(crate) fn matches(&self, l: &Labels) -> bool {
        match self {
            BatchLabels::Owned(o) => o == l,
            BatchLabels::Borrowed(p) => l.eq_pairs(p),
        }
    }

    /// Whether these are exactly the pairs of a head series (read in place).
    pub(crate) fn matches_pairs(&self, p: crate::head::symbols::Pairs<'_>) -> bool {
        match self {
            BatchLabels::Owned(o) => crate::head::symbols::pairs_eq(p, o.iter().map(|l| (l.name, l.value))),
            BatchLabels::Borrowed(b) => crate::head::symbols::pairs_eq(p, b.iter().copied()),
        }
    }

    /// Whether two batches name the same series.
    pub(crate) fn same_series(&self, o: &BatchLabels<'_>) -> bool {
        match (self, o) {
            (BatchLabels::Owned(a), b) => b.matches(a),
            (a, BatchLabels::Owned(b)) => a.matches(b),
            (BatchLabels::Borrowed(a), BatchLabels::Borrowed(b)) => a == b,
        }
    }

    /// Owned labels, copying borrowed pairs (leaves an empty set behind).
    pub(crate) fn take_owned(&mut self) -> Labels {
        match std::mem::replace(self, BatchLabels::Borrowed(&[])) {
            BatchLabels::Owned(l) => l,
            BatchLabels::Borrowed(p) => {
                Labels::from_canonical_pairs(p)
            }
        }
    }
}

/// One buffered `add*()` call.
pub(crate) struct Batch<'a> {
    pub(crate) labels: BatchLabels<'a>,
    pub(crate) samples: Cow<'a, [Sample]>,
    /// Same length as samples with some ≠ 0, or empty for none.
    pub(crate) sts: Cow<'a, [i64]>,
    /// Native-histogram samples of the series (judged and stored after its float samples).
    pub(crate) hists: Cow<'a, [HistogramSample]>,
    /// Exemplars of the series (stored after its samples; see [`Appender::add_ref_exemplars`]).
    pub(crate) exemplars: Cow<'a, [Exemplar]>,
}

/// The oldest and newest timestamps of the batches' float and histogram samples (`None`: none).
fn time_range(batches: &[Batch<'_>]) -> Option<(i64, i64)> {
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    for b in batches {
        for t in b.samples.iter().map(|s| s.t).chain(b.hists.iter().map(|h| h.t)) {
            lo = lo.min(t);
            hi = hi.max(t);
        }
    }
    (lo <= hi).then_some((lo, hi))
}

/// Buffers batches until [`Appender::commit`]. `'a` covers the database and whatever the batches borrow
/// ([`Appender::add_ref`]): borrowed data must outlive the appender, since shards commit it in parallel.
pub struct Appender<'a> {
    pub(crate) db: &'a Db,
    pub(crate) batches: Vec<Batch<'a>>,
    /// How many series this appender's commit may create ([`Appender::limit_new_series`]).
    pub(crate) new_series_limit: usize,
}

impl<'a> Appender<'a> {
    fn push(&mut self, labels: BatchLabels<'a>, samples: Cow<'a, [Sample]>, sts: Cow<'a, [i64]>) {
        self.batches.push(Batch { labels, samples, sts, hists: Cow::Borrowed(&[]), exemplars: Cow::Borrowed(&[]) });
    }

    /// A batch of histograms and/or exemplars alone (no float samples).
    fn push_other(&mut self, labels: BatchLabels<'a>, hists: Cow<'a, [HistogramSample]>, exemplars: Cow<'a, [Exemplar]>) {
        self.batches.push(Batch { labels, samples: Cow::Borrowed(&[]), sts: Cow::Borrowed(&[]), hists, exemplars });
    }

    /// Borrowed pairs as batch labels: kept borrowed when canonical, normalised (a copy) otherwise.
    fn ref_labels(labels: &'a [(&'a str, &'a str)]) -> BatchLabels<'a> {
        if tessera_model::labels::pairs_are_canonical(labels) {
            BatchLabels::Borrowed(labels)
        } else {
            BatchLabels::Owned(Labels::from_pairs(labels.iter().copied()))
        }
    }

    /// Buffers native-histogram samples of one series (integer or float, in time order). They follow
    /// upstream's append rules for histograms: a later sample must be newer than the series' last sample
    /// of any kind (an exact duplicate is accepted and dropped); out-of-order histograms are refused
    /// (`OutOfOrder`, or `TooOld` with an out-of-order window) — the out-of-order window applies to float
    /// samples only for now. Histograms must be valid (see `tessera_protocol`'s checks): one whose bucket
    /// counts do not match its spans is skipped by the head with a warning.
    pub fn add_histograms(&mut self, labels: Labels, hists: Vec<HistogramSample>) {
        self.push_other(BatchLabels::Owned(labels), Cow::Owned(hists), Cow::Borrowed(&[]));
    }

    /// [`Appender::add_histograms`] borrowing labels (as [`Appender::add_ref`]) and samples.
    pub fn add_ref_histograms(&mut self, labels: &'a [(&'a str, &'a str)], hists: &'a [HistogramSample]) {
        self.push_other(Self::ref_labels(labels), Cow::Borrowed(hists), Cow::Borrowed(&[]));
    }

    /// Buffers exemplars of one series (labels borrowed as in [`Appender::add_ref`]). They are kept in
    /// the shard's bounded ring (see `crate::exemplars`) when the series exists — written before in
    /// the head or by this commit — as upstream's `AppendExemplar` needs its series; duplicates, ones
    /// too far out of order and ones with over-long labels are dropped and counted, never an error.
    pub fn add_ref_exemplars(&mut self, labels: &'a [(&'a str, &'a str)], exemplars: &'a [Exemplar]) {
        self.push_other(Self::ref_labels(labels), Cow::Borrowed(&[]), Cow::Borrowed(exemplars));
    }

    /// [`Appender::add_ref_exemplars`] with owned labels and exemplars.
    pub fn add_exemplars(&mut self, labels: Labels, exemplars: Vec<Exemplar>) {
        self.push_other(BatchLabels::Owned(labels), Cow::Borrowed(&[]), Cow::Owned(exemplars));
    }

    /// Buffers one batch: samples of one series. Nothing is validated here.
    pub fn add(&mut self, labels: Labels, samples: &[Sample]) {
        self.push(BatchLabels::Owned(labels), Cow::Owned(samples.to_vec()), Cow::Borrowed(&[]));
    }

    /// Buffers one batch, taking ownership of the samples (no copy).
    pub fn add_owned(&mut self, labels: Labels, samples: Vec<Sample>) {
        self.push(BatchLabels::Owned(labels), Cow::Owned(samples), Cow::Borrowed(&[]));
    }

    /// Buffers one batch whose samples carry start timestamps: `sts[i]` is `samples[i]`'s (ms, 0 =
    /// unset). If the lengths differ the STs are ignored (the batch is stored as by [`Appender::add`],
    /// and a warning is logged): a caller bug must not attach STs to the wrong samples, nor panic.
    pub fn add_with_st(&mut self, labels: Labels, samples: &[Sample], sts: &[i64]) {
        let sts = if Self::keep_sts(samples.len(), sts) { sts.to_vec() } else { Vec::new() };
        self.push(BatchLabels::Owned(labels), Cow::Owned(samples.to_vec()), Cow::Owned(sts));
    }

    /// [`Appender::add_with_st`] taking ownership (no copy).
    pub fn add_owned_with_st(&mut self, labels: Labels, samples: Vec<Sample>, sts: Vec<i64>) {
        let sts = if Self::keep_sts(samples.len(), &sts) { sts } else { Vec::new() };
        self.push(BatchLabels::Owned(labels), Cow::Owned(samples), Cow::Owned(sts));
    }

    /// Buffers one batch borrowing everything: labels as `(name, value)` pairs, the samples, and their
    /// start timestamps (`sts` empty for none; otherwise as in [`Appender::add_with_st`]). Nothing is
    /// copied unless the commit creates the series, whose labels are then copied once.
    ///
    /// `labels` should be canonical (sorted by name, unique names, no empty value), as remote write
    /// requires and `tessera_protocol`'s decoder validates; pairs that are not are normalised the way
    /// [`Labels::from_pairs`] does (sorted, empty values dropped, the last of a repeated name wins), at
    /// the cost of a copy.
    pub fn add_ref(&mut self, labels: &'a [(&'a str, &'a str)], samples: &'a [Sample], sts: &'a [i64]) {
        let labels = Self::ref_labels(labels);
        let sts: &[i64] = if sts.is_empty() || !Self::keep_sts(samples.len(), sts) { &[] } else { sts };
        self.push(labels, Cow::Borrowed(samples), Cow::Borrowed(sts));
    }

    /// Whether a batch's STs are worth storing: one per sample, and not all unset.
    fn keep_sts(n: usize, sts: &[i64]) -> bool {
        if sts.len() != n {
            tracing::warn!(samples = n, start_timestamps = sts.len(), "start timestamps ignored: one per sample expected");
            return false;
        }
        sts.iter().any(|&st| st != 0)
    }

    /// Lets the commit create at most `n` series (default: no limit); the samples of further new series
    /// are rejected ([`RejectReason::RequestSeriesLimit`]), those of existing series still written. A
    /// server sets this per request, so one request cannot create a million series.
    pub fn limit_new_series(&mut self, n: usize) {
        self.new_series_limit = n;
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
        let budget = std::sync::atomic::AtomicUsize::new(self.new_series_limit);
        let budget = &budget;
        // The time range this commit touches, recorded once the samples are visible (whatever the
        // outcome: a failed commit may have stored part of its batches) if a reader of old ranges (the
        // result cache) watches it by then. Always computed: a reader may start watching while this
        // commit runs.
        let touched = time_range(&self.batches);
        let mut per_shard: Vec<Vec<ShardBatch<'_>>> = (0..n).map(|_| Vec::new()).collect();
        for (i, Batch { labels, samples, sts, hists, exemplars }) in self.batches.into_iter().enumerate() {
            if samples.is_empty() && hists.is_empty() && exemplars.is_empty() {
                continue;
            }
            let hash = labels.hash();
            let s = tessera_model::labels::shard_of_hash(hash, n);
            per_shard[s].push(ShardBatch { index: i, hash, labels, samples, sts, hists, exemplars });
        }
        let busy: Vec<(usize, Vec<ShardBatch<'_>>)> =
            per_shard.into_iter().enumerate().filter(|(_, b)| !b.is_empty()).collect();
        let results: Vec<Result<CommitReport>> = if busy.len() <= 1 {
            busy.into_iter().map(|(s, b)| db.shards[s].commit(b, budget)).collect()
        } else {
            let shards: Vec<Arc<crate::shard::Shard>> = busy.iter().map(|(s, _)| db.shards[*s].clone()).collect();
            std::thread::scope(|scope| {
                let mut hs = Vec::new();
                let mut iter = busy.into_iter().zip(shards);
                // Run the first shard on this thread, the others on scoped threads.
                let first = iter.next();
                for ((_, b), sh) in iter {
                    hs.push(scope.spawn(move || sh.commit(b, budget)));
                }
                let mut out = Vec::new();
                if let Some(((_, b), sh)) = first {
                    out.push(sh.commit(b, budget));
                }
                for h in hs {
                    out.push(h.join().unwrap_or_else(|_| Err(crate::Error::Other("shard commit panicked".into()))));
                }
                out
            })
        };
        if let Some((min_t, max_t)) = touched {
            db.changes.record(min_t, max_t);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{FsyncPolicy, Options};
    use tessera_model::{labels, Matcher, MatchOp, Queryable, SelectHints};

    fn opts(shards: usize) -> Options {
        Options {
            shards,
            block_range_ms: 1 << 40,
            retention_ms: 0,
            fsync: FsyncPolicy::Never,
            background: false,
            ..Options::default()
        }
    }

    /// Every series with `__name__="m"`: (labels, samples).
    fn read(db: &Db) -> Vec<(Labels, Vec<Sample>)> {
        let q = db.querier(i64::MIN / 2, i64::MAX / 2).expect("querier");
        let ms = [Matcher::new(MatchOp::Equal, "__name__", "m").expect("matcher")];
        let mut out = Vec::new();
        for s in q.select(&ms, &SelectHints::default()).expect("select") {
            let s = s.expect("series");
            let mut v = Vec::new();
            for c in &s.chunks {
                tessera_encoding::decode_chunk_range_into(c, i64::MIN, i64::MAX, &mut v).expect("decodes");
            }
            out.push((s.labels, v));
        }
        out
    }

    fn pairs(l: &Labels) -> Vec<(&str, &str)> {
        l.iter().map(|x| (x.name, x.value)).collect()
    }

    #[test]
    fn borrowed_and_owned_labels_name_the_same_series() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = Db::open(dir.path(), opts(3)).expect("open");
        let ls: Vec<Labels> = (0..30).map(|i| Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string())])).collect();
        // Created through borrowed labels, found again through owned ones and vice versa.
        let ps: Vec<Vec<(&str, &str)>> = ls.iter().map(pairs).collect();
        let s1 = [Sample::new(1, 1.0)];
        let mut app = db.appender();
        for (i, p) in ps.iter().enumerate() {
            if i % 2 == 0 {
                app.add_ref(p, &s1, &[]);
            } else {
                app.add(ls[i].clone(), &s1);
            }
        }
        let rep = app.commit().expect("commit");
        assert_eq!((rep.series_created, rep.samples_written), (30, 30));
        let s2 = [Sample::new(2, 2.0)];
        let mut app = db.appender();
        for (i, p) in ps.iter().enumerate() {
            if i % 2 == 1 {
                app.add_ref(p, &s2, &[]);
            } else {
                app.add(ls[i].clone(), &s2);
            }
        }
        let rep = app.commit().expect("commit");
        assert_eq!((rep.series_created, rep.samples_written), (0, 30));
        let got = read(&db);
        assert_eq!(got.len(), 30);
        for (l, s) in &got {
            assert!(ls.contains(l));
            assert_eq!(s, &vec![Sample::new(1, 1.0), Sample::new(2, 2.0)]);
        }
        // The series survive a restart (the WAL logged the borrowed labels' copy).
        drop(db);
        let db = Db::open(dir.path(), opts(3)).expect("reopen");
        assert_eq!(read(&db), got);
    }

    #[test]
    fn one_series_twice_in_a_commit_is_judged_in_order() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = Db::open(dir.path(), opts(1)).expect("open");
        let l = labels!("__name__" => "m", "job" => "a");
        let p = pairs(&l);
        let (a, b, c) = ([Sample::new(10, 1.0)], [Sample::new(20, 2.0)], [Sample::new(15, 3.0)]);
        let mut app = db.appender();
        app.add_ref(&p, &a, &[]);
        app.add(l.clone(), &b);
        app.add_ref(&p, &c, &[]); // before the previous batch's 20: out of order
        let rep = app.commit().expect("commit");
        assert_eq!(rep.series_created, 1);
        assert_eq!(rep.samples_written, 2);
        assert_eq!(rep.rejected.len(), 1);
        assert_eq!((rep.rejected[0].batch_index, rep.rejected[0].reason), (2, RejectReason::OutOfOrder));
        // A later commit starts afresh from the head (the previous commit's tags are stale).
        let d = [Sample::new(21, 4.0)];
        let mut app = db.appender();
        app.add_ref(&p, &d, &[]);
        let rep = app.commit().expect("commit");
        assert_eq!((rep.samples_written, rep.rejected.len()), (1, 0));
        assert_eq!(read(&db)[0].1, vec![Sample::new(10, 1.0), Sample::new(20, 2.0), Sample::new(21, 4.0)]);
    }

    #[test]
    fn non_canonical_pairs_are_normalised() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = Db::open(dir.path(), opts(2)).expect("open");
        let unsorted = [("job", "a"), ("__name__", "m"), ("empty", "")];
        let one = [Sample::new(1, 1.0)];
        let mut app = db.appender();
        app.add_ref(&unsorted, &one, &[]);
        app.add(labels!("__name__" => "m", "job" => "a"), &[Sample::new(2, 2.0)]);
        let rep = app.commit().expect("commit");
        assert_eq!((rep.series_created, rep.samples_written), (1, 2));
        let got = read(&db);
        assert_eq!(got, vec![(labels!("__name__" => "m", "job" => "a"), vec![Sample::new(1, 1.0), Sample::new(2, 2.0)])]);
    }

    #[test]
    fn add_ref_keeps_start_timestamps_and_ignores_mismatched_ones() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = Db::open(dir.path(), opts(1)).expect("open");
        let l = labels!("__name__" => "m");
        let p = pairs(&l);
        let s = [Sample::new(10, 1.0), Sample::new(20, 2.0)];
        let mut app = db.appender();
        app.add_ref(&p, &s, &[5, 15]);
        match &app.batches[0].sts {
            Cow::Borrowed(x) => assert_eq!(*x, &[5, 15]),
            Cow::Owned(_) => panic!("copied"),
        }
        app.add_ref(&p, &s, &[5]);
        assert!(app.batches[1].sts.is_empty(), "one ST per sample or none");
        app.add_ref(&p, &s, &[0, 0]);
        assert!(app.batches[2].sts.is_empty(), "all-unset STs are no STs");
        let rep = app.commit().expect("commit");
        assert_eq!(rep.samples_written, 4, "the repeats are exact duplicates");
        let shard = &db.shards[0];
        let st = shard.state.read();
        let r = st.head.get(l.hash(), &l).expect("present");
        assert_eq!(st.head.series_labels(r).expect("live"), l);
    }
}
