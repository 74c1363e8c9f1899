//! One shard: a self-contained mini-TSDB in `dir/shard-NNN/` with its head, its WAL (`wal/`) and its blocks.
//!
//! Concurrency: two locks. `writer` (a mutex) serialises everything that writes: commits, head cuts,
//! deletions; it owns the WAL. `state` (a rwlock) guards what readers see: the head and the list of
//! open blocks. A commit validates under a read lock, logs its WAL record while holding no state lock at
//! all (readers are never blocked by disk I/O), then applies the batch under a short write lock, so a
//! batch becomes visible all at once and only after it is in the WAL (Prometheus' `headAppender.Commit`
//! order: log first, then append to the series).
//!
//! Head cuts (Prometheus' `DB.compactHead` + `Head.truncateMemory` + `Head.truncateWAL`): when the head
//! spans more than 1.5 block ranges, its oldest block-range window is written as a block, dropped from
//! the head, and the WAL segments that only hold data older than the cut are replaced by a checkpoint of
//! the live series and tombstones.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use parking_lot::{Mutex, RwLock};
use tessera_model::{ChunkRef, Labels, Sample};
use tessera_wal::{Wal, WalError, WalOptions};

use crate::appender::{BatchLabels, CommitReport, RejectReason, Rejected};
use crate::block::{self, Block};
use crate::error::{Error, Result};
use crate::head::{appendable, appendable_bits, Head, IdHasher, Verdict};
use crate::metrics::Metrics;
use crate::options::Options;
use crate::merge::finalize_chunks_st;
use crate::tombstones::Interval;
use crate::wal_records::{self, BatchEncoder, Record, TombstoneRec};

mod histograms;

use histograms::{accepted_histograms, Bounds};

pub(crate) const WAL_DIR: &str = "wal";
/// The ref of a batch whose series could not be created (a series limit): its samples are all rejected.
const NO_SERIES: u32 = u32::MAX;
/// Where [`Shard::open`] moves blocks that lie wholly beyond [`Options::max_future_ms`] (see there).
pub(crate) const FUTURE_BLOCKS_DIR: &str = "future-blocks";

/// One `add*()` call routed to this shard (borrowing what the appender borrowed).
pub(crate) struct ShardBatch<'a> {
    pub index: usize,
    pub hash: u64,
    pub labels: BatchLabels<'a>,
    pub samples: Cow<'a, [Sample]>,
    /// Start timestamps of `samples` (same length, some ≠ 0), or empty when the batch has none.
    pub sts: Cow<'a, [i64]>,
    /// Native-histogram samples, judged and stored after `samples` ([`Shard::judge_histograms`]).
    pub hists: Cow<'a, [tessera_model::HistogramSample]>,
    /// Exemplars, stored after the samples ([`Shard::store_exemplars`]).
    pub exemplars: Cow<'a, [tessera_model::Exemplar]>,
}

/// What readers see.
pub(crate) struct State {
    pub head: Head,
    /// Open blocks, sorted by `mint_ms`.
    pub blocks: Vec<Arc<Block>>,
}

struct Writer {
    wal: Option<Wal>,
    /// Packs what is logged (`Options::wal_compression`).
    packer: Option<crate::wal_pack::Packer>,
    poisoned: Option<String>,
    buf: Vec<u8>,
    /// Largest sample time logged per WAL segment (segments absent here hold no samples).
    seg_maxt: BTreeMap<u64, i64>,
    next_ref: u32,
    // Scratch reused across commits.
    verdicts: Vec<Verdict>,
    /// Verdicts of the batches' histogram samples, batch after batch.
    hverdicts: Vec<Verdict>,
    pending: Pending,
}

/// Each series' last accepted sample as the commit in progress leaves it, for series that appear in
/// more than one batch of a commit (judged against the head, their later batches would miss the earlier
/// ones). A slot per series ref tagged with the commit's epoch, so neither hashing nor clearing is paid
/// per batch: a stale tag reads as "not seen in this commit". 8 bytes per ref.
#[derive(Default)]
struct Pending {
    /// Per ref: (epoch of the commit that set it, index into `vals`).
    marks: Vec<(u32, u32)>,
    vals: Vec<(i64, u64)>,
    epoch: u32,
}

impl Writer {
    /// Logs `self.buf` (packed when compression is on); the bytes logged. The WAL must be open.
    fn log_buf(&mut self) -> std::result::Result<usize, tessera_wal::WalError> {
        let wal = self.wal.as_mut().expect("the caller checked that the WAL is open");
        match &mut self.packer {
            Some(p) => p.log(wal, &self.buf),
            None => wal.log(&self.buf).map(|()| self.buf.len()),
        }
    }
}

impl Pending {
    /// Starts a commit: forgets every value of the previous one.
    fn begin(&mut self) {
        self.vals.clear();
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            // Wrapped: tags of 2^32 commits ago would read as current.
            self.marks.fill((0, 0));
            self.epoch = 1;
        }
    }

    fn get(&self, r: u32) -> Option<(i64, u64)> {
        match self.marks.get(r as usize) {
            Some(&(e, i)) if e == self.epoch => Some(self.vals[i as usize]),
            _ => None,
        }
    }

    fn set(&mut self, r: u32, v: (i64, u64)) {
        let r = r as usize;
        if r >= self.marks.len() {
            self.marks.resize((r + 1).max(self.marks.len() * 5 / 4), (0, 0));
        }
        let (e, i) = self.marks[r];
        if e == self.epoch {
            self.vals[i as usize] = v;
        } else {
            self.marks[r] = (self.epoch, self.vals.len() as u32);
            self.vals.push(v);
        }
    }
}

pub(crate) struct Shard {
    pub id: usize,
    pub dir: PathBuf,
    opts: Options,
    metrics: Arc<Metrics>,
    writer: Mutex<Writer>,
    /// Serialises head cuts (inline ones and the background thread's).
    cut_lock: Mutex<()>,
    /// The head's newest time when a cut last made no progress (`i64::MIN`: none): no cut is due
    /// again until newer data arrives, so a head that cannot be cut further is not rescanned forever.
    cut_stuck_max_t: std::sync::atomic::AtomicI64,
    /// The head's newest time from which an early (memory-pressure) cut may be tried again after one
    /// found nothing to cut: the scan for a chunk boundary holds the state's write lock over every
    /// series, so it runs once per sixteenth of a block range of new data, not on every commit.
    early_cut_retry_at: std::sync::atomic::AtomicI64,
    pub state: RwLock<State>,
    /// The shard's exemplars (a bounded ring, see [`crate::exemplars`]).
    pub(crate) exemplars: Mutex<crate::exemplars::ExemplarStore>,
}

fn wal_err(e: WalError) -> Error {
    Error::Wal(Box::new(e))
}

impl Shard {
    /// Opens (or creates) the shard in `dir`: opens its blocks, replays its WAL, opens the WAL writer.
    pub(crate) fn open(
        id: usize,
        dir: PathBuf,
        opts: Options,
        metrics: Arc<Metrics>,
        wal_fs: Option<Arc<dyn tessera_wal::fs::WalFs>>,
    ) -> Result<Shard> {
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        for p in crate::compact::cleanup_after_crash(&dir)? {
            tracing::info!(dir = %p.display(), "removed leftover of an interrupted block write/compaction");
        }
        let max_valid = opts.max_valid_time_ms();
        restore_future_blocks(&dir, max_valid);
        let mut blocks = open_blocks(&dir)?;
        // A block wholly in the future (samples an older version accepted, cut out of its head) would
        // make the head refuse the present: with `repair_future` it is moved aside, not deleted.
        blocks.retain(|b| {
            if b.meta().mint_ms <= max_valid {
                return true;
            }
            if !opts.repair_future {
                tracing::warn!(block = %b.id(), mint_ms = b.meta().mint_ms, "block lies wholly in the future (or the clock is behind); start with --storage.tsdb.repair-future-samples to set it aside");
                return true;
            }
            let aside = dir.join(FUTURE_BLOCKS_DIR);
            match std::fs::create_dir_all(&aside).and_then(|_| std::fs::rename(b.dir(), aside.join(b.id()))) {
                Ok(()) => {
                    tracing::warn!(block = %b.id(), mint_ms = b.meta().mint_ms, moved_to = %aside.display(), "block lies wholly in the future; moved aside, not loaded");
                    false
                }
                Err(e) => {
                    tracing::error!(block = %b.id(), error = %e, "block lies wholly in the future and could not be moved aside; loaded");
                    true
                }
            }
        });
        let min_valid = blocks.iter().map(|b| b.meta().maxt_ms).max().unwrap_or(i64::MIN);
        let mut head = Head::new(opts.block_range_ms, min_valid);
        head.recode_closed = opts.cold_codec != crate::options::ColdCodec::Xor;
        head.files = crate::head::chunk_files::ChunkFiles::open(&dir.join(crate::head::chunk_files::DIR), opts.head_chunk_segment_bytes)?;
        let wal_dir = dir.join(WAL_DIR);
        std::fs::create_dir_all(&wal_dir).map_err(|e| Error::io(&wal_dir, e))?;
        let per_shard = if opts.max_exemplars == 0 { 0 } else { opts.max_exemplars.div_ceil(opts.shards.max(1)) };
        let mut exemplars = crate::exemplars::ExemplarStore::new(per_shard, opts.ooo_window_ms);
        replay(&wal_dir, &mut head, &mut exemplars, &opts, &metrics)?;
        head.files.flush();
        metrics.active_series.fetch_add(head.num_series() as u64, Relaxed);
        let wal_opts = WalOptions { segment_bytes: opts.wal_segment_bytes, fsync: opts.fsync };
        let wal = match wal_fs {
            Some(fs) => Wal::open_with_fs(fs, &wal_dir, wal_opts),
            None => Wal::open(&wal_dir, wal_opts),
        }
        .map_err(wal_err)?;
        // Segments written before this process: their sample times are unknown, assume the newest.
        let mut seg_maxt = BTreeMap::new();
        let (first, last) = wal.segment_range();
        if head.max_t != i64::MIN {
            for s in first..last {
                seg_maxt.insert(s, head.max_t);
            }
        }
        let next_ref = head.next_ref();
        let packer = if opts.wal_compression { Some(crate::wal_pack::Packer::new().map_err(|e| Error::Other(format!("zstd: {e}")))?) } else { None };
        Ok(Shard {
            id,
            dir,
            opts,
            metrics,
            writer: Mutex::new(Writer { wal: Some(wal), packer, poisoned: None, buf: Vec::new(), seg_maxt, next_ref, verdicts: Vec::new(), hverdicts: Vec::new(), pending: Pending::default() }),
            cut_lock: Mutex::new(()),
            cut_stuck_max_t: std::sync::atomic::AtomicI64::new(i64::MIN),
            early_cut_retry_at: std::sync::atomic::AtomicI64::new(i64::MIN),
            state: RwLock::new(State { head, blocks }),
            exemplars: Mutex::new(exemplars),
        })
    }

    /// Validates, logs and applies the batches routed to this shard.
    pub(crate) fn commit(&self, mut batches: Vec<ShardBatch<'_>>, new_series_budget: &std::sync::atomic::AtomicUsize) -> Result<CommitReport> {
        let mut wg = self.writer.lock();
        let w = &mut *wg;
        if let Some(p) = &w.poisoned {
            return Err(Error::Poisoned(format!("shard {}: {p}", self.id)));
        }
        if w.wal.is_none() {
            return Err(Error::Closed);
        }
        let mut report = CommitReport::default();
        let ooo_window = self.opts.ooo_window_ms;

        // Phase 1: resolve series and judge every sample against the head as it is (read lock).
        let mut refs: Vec<(u32, bool)> = Vec::with_capacity(batches.len());
        let mut new_series: Vec<(u32, u64, usize)> = Vec::new(); // (ref, hash, batch position)
        w.verdicts.clear();
        w.hverdicts.clear();
        w.pending.begin();
        let mut batch_maxt = i64::MIN;
        {
            let st = self.state.read();
            let head = &st.head;
            let min_valid = head.appendable_min_valid();
            let block_min_valid = head.min_valid_t;
            let head_max = head.max_t;
            let max_valid = self.opts.max_valid_time_ms();
            let mut new_by_hash: HashMap<u64, Vec<(u32, usize)>, std::hash::BuildHasherDefault<IdHasher>> =
                HashMap::default();
            for (bi, b) in batches.iter().enumerate() {
                let found = head.get_with(b.hash, |p| b.labels.matches_pairs(p)).or_else(|| {
                    new_by_hash.get(&b.hash).and_then(|v| {
                        v.iter().find(|(_, pos)| batches[*pos].labels.same_series(&b.labels)).map(|(r, _)| *r)
                    })
                });
                let (r, is_new) = match found {
                    Some(r) => (r, false),
                    // Exemplars alone never create a series (upstream's `AppendExemplar` needs one).
                    None if b.samples.is_empty() && b.hists.is_empty() => {
                        refs.push((NO_SERIES, false));
                        continue;
                    }
                    None if let Some(reason) = self.reserve_series(new_series_budget) => {
                        // Every sample of a series that may not be created is rejected; the ref
                        // `NO_SERIES` makes the later phases pass the batch over.
                        refs.push((NO_SERIES, false));
                        let n = b.samples.len();
                        w.verdicts.resize(w.verdicts.len() + n, Verdict::Reject(reason));
                        if let Some(first) = b.samples.first() {
                            self.metrics.add_rejected(reason, n as u64);
                            report.rejected.push(Rejected { batch_index: b.index, reason, count: n as u64, first_t_ms: first.t, histograms: false });
                        }
                        if let Some(first) = b.hists.first() {
                            let n = b.hists.len() as u64;
                            self.metrics.add_rejected(reason, n);
                            report.rejected.push(Rejected { batch_index: b.index, reason, count: n, first_t_ms: first.t, histograms: true });
                        }
                        continue;
                    }
                    None => {
                        let r = w.next_ref;
                        let Some(next) = w.next_ref.checked_add(1).filter(|&n| n != NO_SERIES) else {
                            // Give back what this commit counted: this series and the ones before it.
                            self.metrics.active_series.fetch_sub(new_series.len() as u64 + 1, Relaxed);
                            return Err(Error::Other("series refs exhausted".into()));
                        };
                        w.next_ref = next;
                        new_series.push((r, b.hash, bi));
                        new_by_hash.entry(b.hash).or_default().push((r, bi));
                        (r, true)
                    }
                };
                refs.push((r, is_new));
                if b.samples.is_empty() {
                    continue;
                }
                let ms = head.series(r);
                let (mut last_t, mut last_bits) = match w.pending.get(r) {
                    Some(p) => p,
                    None => ms.map(|s| (s.last_t, s.last_bits)).unwrap_or((i64::MIN, 0)),
                };
                // Fast path: a strictly increasing run entirely after the series' last sample and inside the
                // appendable range is all in order (what `appendable` would say sample by sample).
                let first_t = b.samples[0].t;
                let last = b.samples[b.samples.len() - 1];
                if (last_t == i64::MIN || first_t > last_t)
                    && first_t >= min_valid
                    && last.t <= max_valid
                    && b.samples.windows(2).all(|w| w[0].t < w[1].t)
                {
                    let n = b.samples.len();
                    w.verdicts.resize(w.verdicts.len() + n, Verdict::InOrder);
                    report.samples_written += n as u64;
                    batch_maxt = batch_maxt.max(last.t);
                    w.pending.set(r, (last.t, last.v.to_bits()));
                    continue;
                }
                let mut rej = [(0u64, 0i64); RejectReason::ALL.len()];
                for s in b.samples.iter() {
                    let mut v = if s.t > max_valid {
                        Verdict::Reject(RejectReason::TooFarInFuture)
                    } else {
                        appendable(last_t, last_bits, s.t, s.v, head_max, min_valid, block_min_valid, ooo_window)
                    };
                    match v {
                        Verdict::InOrder => {
                            last_t = s.t;
                            last_bits = s.v.to_bits();
                            report.samples_written += 1;
                            batch_maxt = batch_maxt.max(s.t);
                        }
                        Verdict::Duplicate => report.samples_written += 1,
                        Verdict::OutOfOrder => {
                            // Prometheus' OOO head chunk rejects a second sample at the same time.
                            match ms.and_then(|m| m.ooo_at(s.t)) {
                                Some(bits) if bits == s.v.to_bits() => v = Verdict::Duplicate,
                                Some(_) => v = Verdict::Reject(RejectReason::DuplicateTimestamp),
                                None => batch_maxt = batch_maxt.max(s.t),
                            }
                            if v != Verdict::Reject(RejectReason::DuplicateTimestamp) {
                                report.samples_written += 1;
                            }
                        }
                        Verdict::Reject(_) => {}
                    }
                    if let Verdict::Reject(reason) = v {
                        let slot = &mut rej[reason.index()];
                        if slot.0 == 0 {
                            slot.1 = s.t;
                        }
                        slot.0 += 1;
                    }
                    w.verdicts.push(v);
                }
                w.pending.set(r, (last_t, last_bits));
                for reason in RejectReason::ALL {
                    let (count, first_t_ms) = rej[reason.index()];
                    if count > 0 {
                        self.metrics.add_rejected(reason, count);
                        report.rejected.push(Rejected { batch_index: b.index, reason, count, first_t_ms, histograms: false });
                    }
                }
            }
            if batches.iter().any(|b| !b.hists.is_empty()) {
                let bounds = Bounds { min_valid, block_min_valid, head_max, max_valid };
                batch_maxt = batch_maxt.max(self.judge_histograms(w, head, &batches, &refs, bounds, &mut report));
            }
        }

        // Labels of the new series, owned now (copied from borrowed pairs): the WAL logs them, the head keeps them.
        let new_series: Vec<(u32, u64, Labels)> =
            new_series.into_iter().map(|(r, hash, bi)| (r, hash, batches[bi].labels.take_owned())).collect();

        // Phase 2: one WAL record for the whole batch set, logged with no state lock held.
        let mut scratch: Vec<Sample> = Vec::new();
        let mut scratch_st: Vec<i64> = Vec::new();
        {
            let defs = new_series.iter().map(|(r, _, l)| (*r, l));
            let defs = defs.collect::<Vec<_>>().into_iter();
            // Record type 4 only when some batch carries start timestamps; otherwise type 2 as always.
            let any_st = batches.iter().any(|b| !b.sts.is_empty());
            let any_hist = w.hverdicts.iter().any(|v| matches!(v, Verdict::InOrder | Verdict::OutOfOrder));
            let mut enc = if any_hist {
                BatchEncoder::new_hist(&mut w.buf, defs)
            } else if any_st {
                BatchEncoder::new_st(&mut w.buf, defs)
            } else {
                BatchEncoder::new(&mut w.buf, defs)
            };
            let mut vi = 0;
            for (bi, b) in batches.iter().enumerate() {
                let vs = &w.verdicts[vi..vi + b.samples.len()];
                vi += b.samples.len();
                if b.samples.is_empty() {
                    continue;
                }
                if vs.iter().all(|v| matches!(v, Verdict::InOrder | Verdict::OutOfOrder)) {
                    // The common case: the whole batch was accepted, log it without copying.
                    if b.sts.is_empty() {
                        enc.group(refs[bi].0, &b.samples);
                    } else {
                        enc.group_st(refs[bi].0, &b.samples, &b.sts);
                    }
                    continue;
                }
                scratch.clear();
                scratch_st.clear();
                for (i, (s, v)) in b.samples.iter().zip(vs).enumerate() {
                    if matches!(v, Verdict::InOrder | Verdict::OutOfOrder) {
                        scratch.push(*s);
                        if !b.sts.is_empty() {
                            scratch_st.push(b.sts[i]);
                        }
                    }
                }
                if !scratch.is_empty() {
                    if b.sts.is_empty() {
                        enc.group(refs[bi].0, &scratch);
                    } else {
                        enc.group_st(refs[bi].0, &scratch, &scratch_st);
                    }
                }
            }
            if any_hist {
                let groups = accepted_histograms(&batches, &refs, &w.hverdicts);
                enc.finish_with_histograms(groups.iter().map(|(r, h)| (*r, &h[..])).collect::<Vec<_>>().into_iter());
            } else {
                enc.finish();
            }
        }
        let has_content = !new_series.is_empty()
            || w.verdicts.iter().any(|v| matches!(v, Verdict::InOrder | Verdict::OutOfOrder))
            || w.hverdicts.iter().any(|v| matches!(v, Verdict::InOrder | Verdict::OutOfOrder));
        if has_content {
            let logged = w.log_buf();
            if let Err(e) = &logged {
                self.metrics.active_series.fetch_sub(new_series.len() as u64, Relaxed);
                let msg = format!("WAL write failed: {e}");
                tracing::error!(shard = self.id, error = %e, "WAL write failed; shard poisoned");
                w.poisoned = Some(msg.clone());
                return Err(Error::Poisoned(format!("shard {}: {msg}", self.id)));
            }
            self.metrics.wal_bytes_written.fetch_add(logged.unwrap_or(0) as u64, Relaxed);
            if batch_maxt != i64::MIN {
                let seg = w.wal.as_ref().expect("checked above").segment_range().1;
                let e = w.seg_maxt.entry(seg).or_insert(i64::MIN);
                *e = (*e).max(batch_maxt);
            }
        }

        // Phase 3: apply under the write lock; the batch becomes visible at once.
        let created = new_series.len() as u64;
        let mut appended = 0u64;
        let mut ooo = 0u64;
        {
            let mut st = self.state.write();
            let head = &mut st.head;
            for (r, hash, labels) in new_series {
                head.create(r, hash, labels);
            }
            // Floats of every batch, then histograms of every batch: the order they were judged in (a
            // series named by two batches of this commit gets its samples in that order: applied batch
            // by batch, a histogram of the first batch could precede an older float of the second and
            // leave its chunks out of order) and the order a WAL replay applies the record in.
            let mut vi = 0;
            for (bi, b) in batches.iter().enumerate() {
                let n = b.samples.len();
                vi += n;
                if refs[bi].0 != NO_SERIES && n > 0 {
                    let (stored, o) = head.apply_batch_st(refs[bi].0, &b.samples, &b.sts, &w.verdicts[vi - n..vi]);
                    appended += stored;
                    ooo += o;
                }
            }
            let mut hi = 0;
            for (bi, b) in batches.iter().enumerate() {
                let nh = b.hists.len();
                hi += nh;
                if refs[bi].0 != NO_SERIES && nh > 0 {
                    appended += head.apply_histograms(refs[bi].0, &b.hists, &w.hverdicts[hi - nh..hi]);
                }
            }
            // The chunks this batch closed go to their file before readers see them.
            head.files.flush();
        }
        report.series_created = created;
        if batches.iter().any(|b| !b.exemplars.is_empty()) {
            report.exemplars_written = self.store_exemplars(w, &batches, &refs)?;
        }
        self.metrics.samples_appended.fetch_add(appended, Relaxed);
        self.metrics.out_of_order_samples_appended.fetch_add(ooo, Relaxed);
        self.metrics.series_created.fetch_add(created, Relaxed);

        drop(wg);
        // With a background thread, it cuts the head once it is compactable (Prometheus'
        // `Head.compactable`) or holds too many chunk bytes: it looks every 250 ms. A cut here would make
        // this request wait for the whole block write — at 1.3 M series half a minute, longer than
        // senders wait (they retried, and with a request stuck per shard nothing was accepted meanwhile).
        // Without one (embedded use, tests), cut inline so the head stays bounded however fast data
        // arrives; the cut runs without the writer lock, so other commits of this shard proceed.
        if !self.opts.background {
            self.cut_if_due()?;
        }
        Ok(report)
    }

    /// Counts one more series against the request's budget and [`Options::max_series`]; `Some(reason)`
    /// (and nothing counted) when either is exhausted.
    fn reserve_series(&self, budget: &std::sync::atomic::AtomicUsize) -> Option<RejectReason> {
        use std::sync::atomic::Ordering::SeqCst;
        if budget.fetch_update(SeqCst, SeqCst, |b| b.checked_sub(1)).is_err() {
            return Some(RejectReason::RequestSeriesLimit);
        }
        let prev = self.metrics.active_series.fetch_add(1, SeqCst);
        if self.opts.max_series > 0 && prev >= self.opts.max_series {
            self.metrics.active_series.fetch_sub(1, SeqCst);
            budget.fetch_add(1, SeqCst);
            return Some(RejectReason::MaxSeries);
        }
        None
    }

    /// Whether the head should be cut now: `Some(true)` for a regular cut (it spans more than 1.5 block
    /// ranges), `Some(false)` for a memory-pressure cut, `None` when nothing is due.
    fn cut_due(&self) -> Option<bool> {
        let st = self.state.read();
        let h = &st.head;
        if h.max_t == i64::MIN || h.min_t == i64::MAX {
            return None;
        }
        if h.max_t == self.cut_stuck_max_t.load(Relaxed) {
            return None;
        }
        let range = self.opts.block_range_ms;
        if h.max_t.saturating_sub(h.min_t) > range / 2 * 3 {
            return Some(true);
        }
        // Closed head chunks above the soft limit trigger an early ("memory pressure") cut of the oldest
        // data, up to the head's appendable minimum, so a fast stream cannot make the head grow to 1.5
        // block ranges.
        if h.chunk_bytes > self.opts.head_chunk_bytes_soft_limit
            && h.appendable_min_valid().saturating_sub(h.min_t) >= range / 16
            && h.max_t >= self.early_cut_retry_at.load(Relaxed)
        {
            return Some(false);
        }
        None
    }

    /// Cuts the head into blocks when due (`force`: cut everything, leaving the head empty).
    pub(crate) fn cut(&self, force: bool) -> Result<()> {
        let _c = self.cut_lock.lock();
        if self.writer.lock().wal.is_none() {
            return Err(Error::Closed);
        }
        let mut cut_any = false;
        let range = self.opts.block_range_ms;
        loop {
            let due = if force { Some(true) } else { self.cut_due() };
            let Some(regular) = due else { break };
            // Fix the window and raise the head's minimum valid time to its end while holding the writer
            // lock: no commit is in flight, and none can add data below the window's end afterwards.
            let (w_start, w_end) = {
                let _w = self.writer.lock();
                let mut st = self.state.write();
                let h = &mut st.head;
                if h.min_t == i64::MAX || h.max_t == i64::MIN {
                    break;
                }
                let aligned = h.min_t.div_euclid(range) * range;
                let w_start = aligned.max(h.min_valid_t.min(h.min_t));
                let mut w_end = aligned + range;
                if force && w_end > h.max_t {
                    // The final window of a flush ends right after the newest sample, so writing resumes.
                    w_end = h.max_t + 1;
                } else if !force && !regular {
                    // Memory pressure: cut up to where appends may still land, at a chunk boundary.
                    w_end = w_end.min(h.appendable_min_valid());
                    w_end = h.chunk_boundary_at_or_before(w_end);
                    if w_end <= w_start {
                        // Nothing to cut whole yet (series' chunks overlap each other back to the head's
                        // start): not again before a sixteenth of a block range of newer data, in which
                        // chunks are closed and a boundary may appear. Regular cuts stay due as before.
                        self.early_cut_retry_at.store(h.max_t.saturating_add((range / 16).max(1)), Relaxed);
                        self.metrics.head_early_cuts_skipped.fetch_add(1, Relaxed);
                        break;
                    }
                }
                h.min_valid_t = h.min_valid_t.max(w_end);
                h.close_open_chunks_before(w_end);
                h.files.flush();
                (w_start, w_end)
            };
            let min_t_before = self.state.read().head.min_t;
            self.cut_window(w_start, w_end)?;
            cut_any = true;
            // A cut that left the head's oldest data where it was cannot be followed by a better one
            // until new data arrives: stop (a loop here once spun forever on a chunk the window could
            // not take whole, holding the cut lock and both cores).
            let st = self.state.read();
            if !force && st.head.min_t <= min_t_before {
                self.cut_stuck_max_t.store(st.head.max_t, Relaxed);
                tracing::warn!(shard = self.id, w_start, w_end, min_t = st.head.min_t, "head cut made no progress; waiting for newer data");
                break;
            }
        }
        if cut_any {
            self.truncate_wal();
        }
        Ok(())
    }

    /// Rebuilds the head's label order ([`crate::head::LabelOrder`]) when enough series are newer than
    /// it; readers stay correct with any order, only slower the more series it does not know.
    pub(crate) fn refresh_label_order(&self) {
        let order = {
            let st = self.state.read();
            if !st.head.label_order_stale() {
                return;
            }
            st.head.build_label_order()
        };
        self.state.write().head.label_order = Arc::new(order);
    }

    /// Cuts if due, unless another thread is cutting this shard right now (then it will see the need).
    pub(crate) fn cut_if_due(&self) -> Result<()> {
        if self.cut_due().is_none() {
            return Ok(());
        }
        match self.cut_lock.try_lock() {
            Some(g) => {
                drop(g);
                self.cut(false)
            }
            None => Ok(()),
        }
    }

    /// The head's series with their data before `w_end` as block chunks (out-of-order samples merged in,
    /// deleted samples dropped), by ref, sorted by labels; with `open`, the open chunks copied too (a cut
    /// closes those before its window's end first). The labels are read as the block is written
    /// ([`Shard::with_head_labels`]): the head holds them as symbol ids, and a copy of every series'
    /// labels at once would add ~100 bytes a series to the cut's peak.
    fn head_series_before(&self, w_end: i64, open: bool) -> Result<Vec<(u32, Vec<ChunkRef>)>> {
        let mut series: Vec<(u32, Vec<ChunkRef>)> = Vec::new();
        {
            let st = self.state.read();
            let head = &st.head;
            let mut extra = Vec::new();
            let mut extra_sts = Vec::new();
            let mut refs: Vec<u32> = head.refs().collect();
            head.sort_by_labels(&mut refs);
            for r in refs {
                let ms = head.series(r).expect("listed");
                let mut chunks: Vec<ChunkRef> =
                    ms.chunks.iter().skip_while(|c| c.maxt >= w_end).map(|c| c.to_ref(&head.files)).collect();
                chunks.reverse();
                if open && ms.open_n() > 0 && ms.last_t < w_end {
                    chunks.push(ChunkRef {
                        mint_ms: ms.open_mint(),
                        maxt_ms: ms.last_t,
                        encoding: ms.open.encoding(),
                        data: bytes::Bytes::copy_from_slice(ms.open.bytes()),
                    });
                }
                extra.clear();
                extra.extend(ms.ooo().iter().take_while(|s| s.t < w_end).copied());
                extra_sts.clear();
                if ms.has_ooo_st() {
                    extra_sts.extend((0..extra.len()).map(|i| ms.ooo_st_of(i)));
                }
                let extra_hists = ms.ooo_hists();
                let extra_hists = &extra_hists[..extra_hists.partition_point(|s| s.t < w_end)];
                if chunks.is_empty() && extra.is_empty() && extra_hists.is_empty() {
                    continue;
                }
                let dels: Vec<Interval> =
                    head.tombstones_of(r).iter().map(|&(a, b)| Interval::new(a, b)).collect();
                if !extra.is_empty() || !extra_hists.is_empty() || !dels.is_empty() {
                    chunks = finalize_chunks_st(chunks, &extra, &extra_sts, extra_hists, &dels)?;
                }
                if !chunks.is_empty() {
                    series.push((r, chunks));
                }
            }
        }
        Ok(series)
    }

    /// [`Shard::head_series_before`]'s series with their labels, read from the head 4,096 series at a
    /// time under its read lock. The caller holds the cut lock, so none of them is dropped meanwhile (a
    /// series that were would end the block write with an error, not leave it out).
    fn with_head_labels(&self, series: Vec<(u32, Vec<ChunkRef>)>) -> impl Iterator<Item = Result<(Labels, Vec<ChunkRef>)>> + '_ {
        let mut it = series.into_iter();
        let mut ready: std::collections::VecDeque<Result<(Labels, Vec<ChunkRef>)>> = Default::default();
        std::iter::from_fn(move || {
            if ready.is_empty() {
                let st = self.state.read();
                for (r, chunks) in it.by_ref().take(4096) {
                    ready.push_back(match st.head.series_labels(r) {
                        Some(l) => Ok((l, chunks)),
                        None => Err(Error::Other(format!("head series {r} dropped while its block was written"))),
                    });
                }
            }
            ready.pop_front()
        })
    }

    /// A snapshot of this shard under `dst` (Prometheus' `DB.Snapshot`): hard links of its blocks and,
    /// with `with_head`, a block of what the head holds now. No cut runs meanwhile, so nothing moves
    /// from the head into a block between the two.
    pub(crate) fn snapshot(&self, dst: &Path, with_head: bool) -> Result<()> {
        let _c = self.cut_lock.lock();
        std::fs::create_dir_all(dst).map_err(|e| Error::io(dst, e))?;
        for b in self.blocks() {
            let name = b.dir().file_name().map(|n| n.to_os_string()).unwrap_or_default();
            crate::compact::link_dir(b.dir(), &dst.join(name))?;
        }
        if with_head {
            let (min, max) = {
                let st = self.state.read();
                (st.head.min_t, st.head.max_t)
            };
            if min <= max {
                let series = self.head_series_before(i64::MAX, true)?;
                block::writer::write_block_with(
                    dst,
                    min,
                    max.saturating_add(1),
                    self.with_head_labels(series),
                    block::CompactionMeta { level: 1, ..Default::default() },
                    &block::WriteOptions::from_db_options(&self.opts),
                )?;
            }
        }
        Ok(())
    }

    /// Writes the head's data in `[w_start, w_end)` as a block and drops it from the head.
    fn cut_window(&self, w_start: i64, w_end: i64) -> Result<()> {
        let series = self.head_series_before(w_end, false)?;
        let meta = block::writer::write_block_with(
            &self.dir,
            w_start,
            w_end,
            self.with_head_labels(series),
            block::CompactionMeta { level: 1, ..Default::default() },
            &block::WriteOptions::from_db_options(&self.opts),
        )?;
        let blk = match meta {
            Some(m) => Some(Block::open(&self.dir.join(&m.id))?),
            None => None,
        };
        let mut st = self.state.write();
        if let Some(b) = blk {
            st.blocks.push(b);
            st.blocks.sort_by_key(|b| b.meta().mint_ms);
        }
        let removed = st.head.truncate_before(w_end);
        drop(st);
        self.metrics.series_removed.fetch_add(removed as u64, Relaxed);
        self.metrics.active_series.fetch_sub(removed as u64, Relaxed);
        self.metrics.head_cuts.fetch_add(1, Relaxed);
        Ok(())
    }

    /// After a cut: a new segment, a checkpoint of the live series standing for every segment that only
    /// holds data older than the head, and those segments deleted (Prometheus' `Head.truncateWAL`).
    /// Failures are logged, not returned: the data is safe in the blocks and the old segments.
    ///
    /// Commits go on meanwhile: the writer lock (which every commit takes) is held only to start the new
    /// segment and to delete the old ones, not while the checkpoint is encoded and written — at 1.3 M
    /// series that took seconds per shard, during which the shard accepted nothing. What a commit logs
    /// after the new segment started lands in it or later ones, which the checkpoint does not replace; a
    /// series such a commit creates may or may not be in the checkpoint too (replay takes both). The
    /// caller holds the cut lock, so no cut drops series and no other checkpoint runs meanwhile.
    fn truncate_wal(&self) {
        let (k, packed) = {
            let mut w = self.writer.lock();
            let min_valid = self.state.read().head.min_valid_t;
            let Some(wal) = w.wal.as_mut() else { return };
            let next = match wal.next_segment() {
                Ok(n) => n,
                Err(e) => {
                    tracing::error!(shard = self.id, error = %e, "WAL: could not start a new segment; shard poisoned");
                    w.poisoned = Some(format!("WAL segment rotation failed: {e}"));
                    return;
                }
            };
            let (first, _) = wal.segment_range();
            let mut k = first;
            while k < next && w.seg_maxt.get(&k).is_none_or(|&m| m < min_valid) {
                k += 1;
            }
            if k <= first {
                return;
            }
            (k, w.packer.is_some())
        };
        // The live series in groups, each under a short read lock (commits apply under the write lock).
        let refs: Vec<u32> = self.state.read().head.refs().collect();
        let mut records = Vec::new();
        for group in refs.chunks(4096) {
            let mut buf = Vec::new();
            {
                let st = self.state.read();
                let head = &st.head;
                let defs: Vec<(u32, Labels)> = group.iter().filter_map(|&r| head.series_labels(r).map(|l| (r, l))).collect();
                wal_records::encode_series(&mut buf, defs.iter().map(|(r, l)| (*r, l)));
            }
            records.push(buf);
        }
        {
            let st = self.state.read();
            let ts: Vec<TombstoneRec> = st
                .head
                .tombstones
                .iter()
                .flat_map(|(&r, iv)| iv.iter().map(move |&(a, b)| TombstoneRec { series_ref: r, mint_ms: a, maxt_ms: b }))
                .collect();
            if !ts.is_empty() {
                let mut buf = Vec::new();
                wal_records::encode_tombstones(&mut buf, &ts);
                records.push(buf);
            }
        }
        {
            // Every exemplar of the ring, oldest stored first (so a replay refills it in the same order).
            let store = self.exemplars.lock();
            let ex = store.all();
            for part in ex.chunks(4096) {
                let mut buf = Vec::new();
                wal_records::encode_exemplars(&mut buf, part.iter().copied());
                records.push(buf);
            }
        }
        let records: Vec<Vec<u8>> =
            if packed { records.iter().map(|r| crate::wal_pack::compress(r)).collect() } else { records };
        let wal_dir = self.dir.join(WAL_DIR);
        if let Err(e) = tessera_wal::write_checkpoint(&wal_dir, k, records.into_iter()) {
            tracing::warn!(shard = self.id, error = %e, "WAL checkpoint failed; old segments kept");
            return;
        }
        let mut w = self.writer.lock();
        // Closed meanwhile: the checkpoint already stands for the old segments (replay starts from it).
        let Some(wal) = w.wal.as_mut() else { return };
        if let Err(e) = wal.truncate_before(k) {
            tracing::warn!(shard = self.id, error = %e, "WAL truncation failed; retried at the next cut");
        }
        w.seg_maxt.retain(|&s, _| s >= k);
    }

    /// Records deletion intervals for the head series matching `matchers` (logged to the WAL) and for
    /// every block (their tombstone files).
    pub(crate) fn delete(&self, mint: i64, maxt: i64, matchers: &[tessera_model::Matcher]) -> Result<()> {
        let mut w = self.writer.lock();
        if let Some(p) = &w.poisoned {
            return Err(Error::Poisoned(p.clone()));
        }
        let refs = {
            let st = self.state.read();
            crate::index::postings_for_matchers(&st.head.index, matchers)?
        };
        if !refs.is_empty() {
            let ts: Vec<TombstoneRec> =
                refs.iter().map(|&r| TombstoneRec { series_ref: r, mint_ms: mint, maxt_ms: maxt }).collect();
            w.buf.clear();
            wal_records::encode_tombstones(&mut w.buf, &ts);
            if w.wal.is_none() {
                return Err(Error::Closed);
            }
            if let Err(e) = w.log_buf() {
                w.poisoned = Some(format!("WAL write failed: {e}"));
                return Err(Error::Poisoned(format!("shard {}: WAL write failed: {e}", self.id)));
            }
            let mut st = self.state.write();
            for &r in &refs {
                st.head.add_tombstone(r, mint, maxt);
            }
        }
        let blocks: Vec<Arc<Block>> = self.state.read().blocks.clone();
        for b in blocks {
            let m = b.meta();
            if m.overlaps_closed(mint, maxt) {
                b.delete_matching(matchers, mint, maxt)?;
            }
        }
        Ok(())
    }

    /// fsyncs the WAL if the interval policy says so (called by the background ticker).
    pub(crate) fn sync_if_due(&self) {
        let mut w = self.writer.lock();
        if w.poisoned.is_some() {
            return;
        }
        if let Some(wal) = w.wal.as_mut() {
            let t0 = std::time::Instant::now();
            if let Err(e) = wal.sync_if_due() {
                tracing::error!(shard = self.id, error = %e, "WAL fsync failed; shard poisoned");
                w.poisoned = Some(format!("WAL fsync failed: {e}"));
            }
            let el = t0.elapsed();
            if el.as_micros() > 20 {
                self.metrics.wal_fsyncs.fetch_add(1, Relaxed);
                self.metrics.wal_fsync_nanos.fetch_add(el.as_nanos() as u64, Relaxed);
            }
        }
    }

    /// fsyncs and closes the WAL; later writes fail with [`Error::Closed`]. Idempotent.
    pub(crate) fn close(&self) -> Result<()> {
        let mut w = self.writer.lock();
        if let Some(wal) = w.wal.take()
            && w.poisoned.is_none()
        {
            wal.close().map_err(wal_err)?;
        }
        Ok(())
    }

    pub(crate) fn wal_bytes(&self) -> u64 {
        self.writer.lock().wal.as_ref().map(|w| w.size_bytes()).unwrap_or(0)
    }

    pub(crate) fn is_poisoned(&self) -> bool {
        self.writer.lock().poisoned.is_some()
    }

    /// Replaces blocks after compaction/retention: `remove` are dropped from the list (their
    /// directories deleted by the caller), `add` are inserted.
    pub(crate) fn swap_blocks(&self, remove: &[String], add: Vec<Arc<Block>>) {
        let mut st = self.state.write();
        st.blocks.retain(|b| !remove.iter().any(|id| id == b.id()));
        st.blocks.extend(add);
        st.blocks.sort_by_key(|b| b.meta().mint_ms);
    }

    pub(crate) fn blocks(&self) -> Vec<Arc<Block>> {
        self.state.read().blocks.clone()
    }

}

/// Opens every block directory of a shard; a block that fails to open (corruption) is reported and
/// skipped so the rest of the shard keeps working. Leftover `.tmp` directories of interrupted writes are
/// removed.
/// Moves blocks of `future-blocks/` back that are no longer in the future (the clock caught up, or was
/// wrong when they were set aside).
fn restore_future_blocks(dir: &Path, max_valid: i64) {
    let aside = dir.join(FUTURE_BLOCKS_DIR);
    let Ok(rd) = std::fs::read_dir(&aside) else { return };
    for ent in rd.flatten() {
        let p = ent.path();
        let Ok(b) = Block::open(&p) else { continue };
        let (id, mint) = (b.id().to_string(), b.meta().mint_ms);
        drop(b);
        if mint <= max_valid {
            match std::fs::rename(&p, dir.join(&id)) {
                Ok(()) => tracing::info!(block = %id, "block no longer in the future; moved back from future-blocks"),
                Err(e) => tracing::warn!(block = %id, error = %e, "could not move a block back from future-blocks"),
            }
        }
    }
}

fn open_blocks(dir: &Path) -> Result<Vec<Arc<Block>>> {
    let mut out = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(dir, e))?;
        let name = ent.file_name().to_string_lossy().to_string();
        let path = ent.path();
        if !path.is_dir() {
            continue;
        }
        if name.ends_with(".tmp") {
            if let Err(e) = std::fs::remove_dir_all(&path) {
                tracing::warn!(dir = %path.display(), error = %e, "could not remove leftover temporary block");
            }
            continue;
        }
        if !block::meta::is_block_id(&name) {
            continue;
        }
        match Block::open(&path) {
            Ok(b) => out.push(b),
            Err(e) => tracing::error!(dir = %path.display(), error = %e, "skipping unreadable block"),
        }
    }
    out.sort_by_key(|b| b.meta().mint_ms);
    Ok(out)
}

/// Replays checkpoint and segments into `head`. A torn tail is handled by the WAL (truncated with a
/// warning); a corrupt record is reported with file and offset, the log is repaired (cut there) and the
/// shard opens with everything before it.
fn replay(
    wal_dir: &Path,
    head: &mut Head,
    exemplars: &mut crate::exemplars::ExemplarStore,
    opts: &Options,
    metrics: &Metrics,
) -> Result<()> {
    // WAL series refs that name a label set already in the head under another ref → that ref.
    let mut alias: HashMap<u32, u32> = HashMap::new();
    // Samples too far in the future, which older versions accepted and which would wedge the shard
    // (its oldest appendable time follows its newest sample), are dropped here, and said so.
    let max_valid = opts.max_valid_time_ms();
    let mut future = (0u64, i64::MIN);
    // Packed records (crate::wal_pack) are decoded with their segment's value context.
    let mut unpacker = crate::wal_pack::Unpacker::new().map_err(|e| Error::Other(format!("zstd: {e}")))?;
    let mut at: Option<tessera_wal::RecordAt> = None;
    let new_pass = std::cell::Cell::new(true);
    let mut apply = |pos: tessera_wal::RecordAt, rec: &[u8]| -> std::result::Result<(), WalError> {
        metrics.wal_replayed_records.fetch_add(1, Relaxed);
        if new_pass.replace(false) || at != Some(pos) {
            unpacker.reset();
            at = Some(pos);
        }
        match unpacker.decode(rec) {
            Ok(Record::Exemplars(ex)) => {
                for (series, e) in ex {
                    // Duplicates (a checkpoint and the segments after it) are refused, as at ingest.
                    let _ = exemplars.add(&series, e);
                }
            }
            Ok(r) => replay_record(head, &mut alias, r, opts, max_valid, &mut future),
            Err(e) => {
                metrics.wal_corruptions.fetch_add(1, Relaxed);
                tracing::error!(dir = %wal_dir.display(), offset = e.offset, reason = e.reason, "undecodable WAL record skipped");
            }
        }
        Ok(())
    };
    let warn_future = |future: (u64, i64)| {
        if future.0 == 0 {
            return;
        }
        let what = if opts.repair_future {
            metrics.add_rejected(RejectReason::TooFarInFuture, future.0);
            "WAL replay dropped samples too far in the future (--storage.tsdb.repair-future-samples)"
        } else {
            "WAL holds samples too far in the future (written before that bound existed, or the clock is behind); they were replayed. If the clock is right and writes are refused as out of bounds, start once with --storage.tsdb.repair-future-samples to drop them"
        };
        tracing::warn!(dir = %wal_dir.display(), samples = future.0, newest_ms = future.1, max_future_ms = opts.max_future_ms, "{what}");
    };
    // A corrupt segment is cut at the damage and replay ends there. A corrupt *checkpoint* is cut too, but the
    // segments after it have not been read yet: read again (records already applied are applied idempotently:
    // series definitions are checked, equal samples are deduplicated). Each repair shortens the log, so this ends.
    for _ in 0..8 {
        // A new pass starts every context afresh.
        new_pass.set(true);
        match tessera_wal::read_all_at(wal_dir, |pos, rec| apply(pos, rec)) {
            Ok(_) => {
                warn_future(future);
                return Ok(());
            }
            Err(WalError::Corruption(c)) => {
                metrics.wal_corruptions.fetch_add(1, Relaxed);
                tracing::error!(file = %c.path.display(), offset = c.offset, kind = %c.kind, "corrupt WAL; repairing (records after it are dropped)");
                tessera_wal::repair(wal_dir, &c).map_err(wal_err)?;
                if !c.in_checkpoint() {
                    // Everything before the damage has been applied; the repaired log ends there.
                    warn_future(future);
                    return Ok(());
                }
            }
            Err(e) => return Err(wal_err(e)),
        }
    }
    Err(Error::corruption(wal_dir.display(), 0, "WAL still corrupt after repeated repairs"))
}

/// Applies one WAL record to `head`. A series that was garbage-collected (its data cut into a block) and
/// written again got a new ref, so the log defines one label set under two refs: the later ref is mapped
/// onto the series already in the head (`alias`), never made a second head series with the same labels
/// (upstream `Head.loadWAL` keeps the same mapping, its `multiRef`).
fn replay_record(
    head: &mut Head,
    alias: &mut HashMap<u32, u32>,
    rec: Record,
    opts: &Options,
    max_valid: i64,
    future: &mut (u64, i64),
) {
    let create = |head: &mut Head, alias: &mut HashMap<u32, u32>, defs: Vec<wal_records::SeriesDef>| {
        for d in defs {
            // Idempotent: a checkpoint and the segments after it may both define a series.
            if head.series(d.series_ref).is_some() {
                continue;
            }
            let hash = d.labels.hash();
            match head.get(hash, &d.labels) {
                Some(existing) => {
                    alias.insert(d.series_ref, existing);
                    // Never hand this ref out again: later records may still name it.
                    head.reserve_ref(d.series_ref);
                }
                None => {
                    alias.remove(&d.series_ref);
                    head.create(d.series_ref, hash, d.labels);
                }
            }
        }
    };
    let resolve = |alias: &HashMap<u32, u32>, r: u32| alias.get(&r).copied().unwrap_or(r);
    match rec {
        Record::Series(defs) => create(head, alias, defs),
        Record::Batch { series, groups, hists } => {
            create(head, alias, series);
            let hists_later = hists;
            for mut g in groups {
                g.series_ref = resolve(alias, g.series_ref);
                let Some(ms) = head.series(g.series_ref) else { continue };
                let (mut last_t, mut last_bits) = (ms.last_t, ms.last_bits);
                for (i, s) in g.samples.into_iter().enumerate() {
                    if s.t > max_valid {
                        future.0 += 1;
                        future.1 = future.1.max(s.t);
                        if opts.repair_future {
                            continue;
                        }
                    }
                    let st = g.sts.get(i).copied().unwrap_or(0);
                    let v = appendable(
                        last_t,
                        last_bits,
                        s.t,
                        s.v,
                        head.max_t,
                        head.min_valid_t,
                        head.min_valid_t,
                        opts.ooo_window_ms.max(if s.t < last_t { i64::MAX / 4 } else { 0 }),
                    );
                    match v {
                        Verdict::InOrder => {
                            last_t = s.t;
                            last_bits = s.v.to_bits();
                            head.apply_st(g.series_ref, s, st, v);
                        }
                        Verdict::OutOfOrder => {
                            head.apply_st(g.series_ref, s, st, v);
                        }
                        _ => {}
                    }
                }
            }
            for mut g in hists_later {
                g.series_ref = resolve(alias, g.series_ref);
                let Some(ms) = head.series(g.series_ref) else { continue };
                let mut last_t = ms.last_t;
                if opts.repair_future {
                    g.samples.retain(|s| s.t <= max_valid);
                }
                for s in &g.samples {
                    if s.t > max_valid {
                        future.0 += 1;
                        future.1 = future.1.max(s.t);
                    }
                }
                // As they were accepted: newer than the last one in order, older ones out of order
                // (whatever the window is now, as for floats); what is already in blocks is skipped.
                let mut last_bits = ms.last_bits;
                let verdicts: Vec<Verdict> = g
                    .samples
                    .iter()
                    .map(|s| {
                        let fp = s.h.fingerprint();
                        let window = if s.t < last_t { i64::MAX / 4 } else { 0 };
                        let v = appendable_bits(last_t, last_bits, s.t, fp, head.max_t, head.min_valid_t, head.min_valid_t, window);
                        if v == Verdict::InOrder {
                            last_t = s.t;
                            last_bits = fp;
                        }
                        v
                    })
                    .collect();
                head.apply_histograms(g.series_ref, &g.samples, &verdicts);
            }
        }
        Record::Exemplars(_) => unreachable!("replayed by the caller"),
        Record::Tombstones(ts) => {
            for t in ts {
                let r = resolve(alias, t.series_ref);
                if head.series(r).is_some() {
                    head.add_tombstone(r, t.mint_ms, t.maxt_ms);
                }
            }
        }
    }
}
