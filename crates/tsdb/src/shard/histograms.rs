//! The native-histogram part of a shard commit: judging each histogram sample (upstream
//! `memSeries.appendableHistogram`) and collecting the accepted ones for the WAL record. Applying them
//! to the head is [`crate::head::Head::apply_histograms`].
//!
//! Histograms are judged after the float samples of the same commit, so a series carrying both in one
//! request (unusual, but legal) has its floats first, as upstream's `headAppender.Commit` does.

use std::borrow::Cow;

use tessera_model::HistogramSample;
use tessera_model::histogram::span_bucket_count;
use tessera_model::HistogramValue;

use super::{NO_SERIES, Shard, ShardBatch, Writer};
use crate::appender::{CommitReport, RejectReason, Rejected};
use crate::head::{Head, Verdict, appendable_bits};

/// The head's time bounds a commit judges against (taken once, under the read lock).
#[derive(Debug, Clone, Copy)]
pub(super) struct Bounds {
    pub min_valid: i64,
    pub block_min_valid: i64,
    pub head_max: i64,
    pub max_valid: i64,
}

/// Whether each bucket vector has as many entries as its spans describe: what the chunk encoder needs
/// (the full upstream validation runs where requests are decoded).
fn buckets_match_spans(h: &HistogramValue) -> bool {
    match h {
        HistogramValue::Int(h) => {
            span_bucket_count(&h.positive_spans) == h.positive_buckets.len() as u64
                && span_bucket_count(&h.negative_spans) == h.negative_buckets.len() as u64
        }
        HistogramValue::Float(h) => {
            span_bucket_count(&h.positive_spans) == h.positive_buckets.len() as u64
                && span_bucket_count(&h.negative_spans) == h.negative_buckets.len() as u64
        }
    }
}

impl Shard {
    /// Judges every histogram sample of `batches` (whose series refs are `refs`) into `w.hverdicts`,
    /// counting rejections in `report`. Inside the out-of-order window an older histogram is accepted
    /// as out of order (upstream stores out-of-order native histograms the same way); a second one at
    /// the same time is a duplicate (same value) or refused. Returns the newest accepted timestamp
    /// (`i64::MIN` if none).
    pub(super) fn judge_histograms(
        &self,
        w: &mut Writer,
        head: &Head,
        batches: &[ShardBatch<'_>],
        refs: &[(u32, bool)],
        b: Bounds,
        report: &mut CommitReport,
    ) -> i64 {
        let mut maxt = i64::MIN;
        for (bi, batch) in batches.iter().enumerate() {
            if batch.hists.is_empty() {
                continue;
            }
            let r = refs[bi].0;
            if r == NO_SERIES {
                // Already reported as a whole when the series was refused.
                w.hverdicts.resize(w.hverdicts.len() + batch.hists.len(), Verdict::Reject(RejectReason::MaxSeries));
                continue;
            }
            let ms = head.series(r);
            let (mut last_t, mut last_bits) = match w.pending.get(r) {
                Some(p) => p,
                None => ms.map(|s| (s.last_t, s.last_bits)).unwrap_or((i64::MIN, 0)),
            };
            // Out-of-order times accepted earlier in this batch (the head's buffer does not have them yet).
            let mut ooo_here: Vec<(i64, u64)> = Vec::new();
            let mut rej = [(0u64, 0i64); RejectReason::ALL.len()];
            for s in batch.hists.iter() {
                let fp = s.h.fingerprint();
                let v = if s.t > b.max_valid {
                    Verdict::Reject(RejectReason::TooFarInFuture)
                } else if !buckets_match_spans(&s.h) {
                    Verdict::Reject(RejectReason::InvalidHistogram)
                } else {
                    match appendable_bits(last_t, last_bits, s.t, fp, b.head_max, b.min_valid, b.block_min_valid, self.opts.ooo_window_ms) {
                        Verdict::OutOfOrder => {
                            let earlier = ooo_here.iter().find(|x| x.0 == s.t).map(|x| x.1);
                            match earlier.or_else(|| ms.and_then(|m| m.ooo_hist_at(s.t))) {
                                Some(f) if f == fp => Verdict::Duplicate,
                                Some(_) => Verdict::Reject(RejectReason::DuplicateTimestamp),
                                None => {
                                    ooo_here.push((s.t, fp));
                                    Verdict::OutOfOrder
                                }
                            }
                        }
                        v => v,
                    }
                };
                match v {
                    Verdict::InOrder => {
                        last_t = s.t;
                        last_bits = fp;
                        maxt = maxt.max(s.t);
                        report.histograms_written += 1;
                    }
                    Verdict::Duplicate => report.histograms_written += 1,
                    Verdict::Reject(reason) => {
                        let slot = &mut rej[reason.index()];
                        if slot.0 == 0 {
                            slot.1 = s.t;
                        }
                        slot.0 += 1;
                    }
                    Verdict::OutOfOrder => {
                        maxt = maxt.max(s.t);
                        report.histograms_written += 1;
                    }
                }
                w.hverdicts.push(v);
            }
            w.pending.set(r, (last_t, last_bits));
            for reason in RejectReason::ALL {
                let (count, first_t_ms) = rej[reason.index()];
                if count > 0 {
                    self.metrics.add_rejected(reason, count);
                    report.rejected.push(Rejected { batch_index: batch.index, reason, count, first_t_ms, histograms: true });
                }
            }
        }
        maxt
    }
}

/// Each batch's accepted (in-order or out-of-order) histogram samples with its series ref, for the WAL
/// record: borrowed when the whole batch was accepted, copied otherwise.
pub(super) fn accepted_histograms<'b>(
    batches: &'b [ShardBatch<'_>],
    refs: &[(u32, bool)],
    hverdicts: &[Verdict],
) -> Vec<(u32, Cow<'b, [HistogramSample]>)> {
    let mut out = Vec::new();
    let mut at = 0;
    for (bi, b) in batches.iter().enumerate() {
        let n = b.hists.len();
        let vs = &hverdicts[at..at + n];
        at += n;
        if n == 0 || refs[bi].0 == NO_SERIES {
            continue;
        }
        let kept = |v: &Verdict| matches!(v, Verdict::InOrder | Verdict::OutOfOrder);
        if vs.iter().all(kept) {
            out.push((refs[bi].0, Cow::Borrowed(&b.hists[..])));
            continue;
        }
        let kept: Vec<HistogramSample> =
            b.hists.iter().zip(vs).filter(|(_, v)| kept(v)).map(|(s, _)| s.clone()).collect();
        if !kept.is_empty() {
            out.push((refs[bi].0, Cow::Owned(kept)));
        }
    }
    out
}

impl Shard {
    /// Stores the batches' exemplars of series that exist (created by this commit or before) in the
    /// shard's ring and logs the stored ones (record type 6). Refusals are counted in the metrics, never
    /// errors (upstream's remote-write handler drops them the same way). Called with the writer lock held,
    /// after the batches were applied. Returns how many were stored (duplicates included).
    pub(super) fn store_exemplars(
        &self,
        w: &mut Writer,
        batches: &[ShardBatch<'_>],
        refs: &[(u32, bool)],
    ) -> crate::error::Result<u64> {
        use crate::exemplars::ExemplarRefusal;
        let mut logged: Vec<(tessera_model::Labels, tessera_model::Exemplar)> = Vec::new();
        let mut written = 0u64;
        {
            let st = self.state.read();
            let mut store = self.exemplars.lock();
            for (bi, b) in batches.iter().enumerate() {
                if b.exemplars.is_empty() {
                    continue;
                }
                let r = refs[bi].0;
                let Some(series) = (r != NO_SERIES).then(|| st.head.series(r)).flatten() else {
                    self.metrics.exemplars_refused.fetch_add(b.exemplars.len() as u64, std::sync::atomic::Ordering::Relaxed);
                    continue;
                };
                let labels = st.head.labels_of(series);
                for e in b.exemplars.iter() {
                    match store.add(&labels, e.clone()) {
                        Ok(()) => {
                            written += 1;
                            logged.push((labels.clone(), e.clone()));
                        }
                        Err(ExemplarRefusal::Duplicate) => written += 1,
                        Err(_) => {
                            self.metrics.exemplars_refused.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            }
        }
        if !logged.is_empty() {
            w.buf.clear();
            crate::wal_records::encode_exemplars(&mut w.buf, logged.iter().map(|(l, e)| (l, e)).collect::<Vec<_>>().into_iter());
            if w.wal.is_none() {
                return Err(crate::error::Error::Closed);
            }
            if let Err(e) = w.log_buf() {
                let msg = format!("WAL write failed: {e}");
                tracing::error!(shard = self.id, error = %e, "WAL write failed; shard poisoned");
                w.poisoned = Some(msg.clone());
                return Err(crate::error::Error::Poisoned(format!("shard {}: {msg}", self.id)));
            }
            self.metrics.exemplars_stored.fetch_add(logged.len() as u64, std::sync::atomic::Ordering::Relaxed);
        }
        Ok(written)
    }
}
