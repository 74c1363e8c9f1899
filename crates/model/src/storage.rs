//! The read interface: how everything above storage (PromQL, remote read, the metadata APIs) reads the
//! head and the blocks alike, without knowing which is which.
//!
//! Contracts (the implementations in `tessera-tsdb` uphold them; consumers may rely on them):
//! - A [`Querier`] is a consistent view of `[mint_ms, maxt_ms]` (both inclusive) taken when it was opened.
//! - A database is split into shards; every series lives in exactly one. [`Querier::select_shard`] returns
//!   one shard's matching series **sorted by labels** ([`crate::Labels`]' `Ord`), each at most once, so that
//!   callers can work per shard in parallel and merge sorted results.
//! - A [`Series`] carries only series that have at least one sample in `[mint_ms, maxt_ms]`
//!   (unless [`SelectHints::series_only`] asked for series without samples).
//! - A series' [`ChunkRef`]s are sorted by `mint_ms` and do not overlap in time; every sample in them is
//!   live (deletions already applied, out-of-order data already merged). A chunk may hold samples outside
//!   `[mint_ms, maxt_ms]`: consumers filter by time.
//! - `ChunkRef::data` is the chunk's bytes exactly as its encoding defines them (for XOR: Prometheus'
//!   XOR chunk, 2-byte sample count included); it may point into an mmap'd block file and is cheap to clone.

use crate::{Labels, Matcher};
use bytes::Bytes;
use std::sync::Arc;

/// Chunk encodings, numbered as Prometheus numbers them (`chunkenc.Encoding`), so the byte can be sent
/// on the wire (remote read) unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum ChunkEncoding {
    Xor = 1,
    Histogram = 2,
    FloatHistogram = 3,
    /// Tessera's denser codec for cold, compacted float chunks (`tessera_encoding::encode_dense`). Not a
    /// Prometheus encoding: re-encode as XOR before sending a chunk over remote read.
    Dense = 0x40,
    /// Tessera's float codec that also carries each sample's start timestamp (`st`, ms; 0 = unset), for
    /// series written with start timestamps (remote write 2.0 `start_timestamp`, OTel cumulative/delta
    /// metrics). Not a Prometheus encoding: remote read converts it to XOR (the wire format has no `st`).
    XorSt = 0x41,
    /// Prometheus' integer histogram chunk followed by a start-timestamp column
    /// (`tessera_encoding::histogram_st`). Remote read sends its prefix, a plain `Histogram` chunk.
    HistogramSt = 0x42,
    /// The same for float histograms.
    FloatHistogramSt = 0x43,
    /// Tessera's decimal codec for cold float chunks whose values are all exact decimals of a few digits
    /// (`tessera_encoding::decimal`). Not a Prometheus encoding: remote read converts it to XOR.
    Decimal = 0x44,
    /// The head's open chunk of a series of exact short decimals (`tessera_encoding::decimal_open`):
    /// appendable, about a third of XOR's bytes; a closing chunk becomes `Decimal`. Not a Prometheus
    /// encoding: remote read converts it to XOR.
    DecimalOpen = 0x45,
    /// A downsampling tier's buckets of one series (`tessera_encoding::buckets`): aggregates, not samples.
    /// Only tier blocks hold them; they never leave through remote read.
    Buckets = 0x50,
    /// The same for native-histogram series (`tessera_encoding::hbuckets`).
    HistBuckets = 0x51,
}

impl ChunkEncoding {
    pub fn from_u8(b: u8) -> Option<Self> {
        match b {
            1 => Some(Self::Xor),
            2 => Some(Self::Histogram),
            3 => Some(Self::FloatHistogram),
            0x40 => Some(Self::Dense),
            0x41 => Some(Self::XorSt),
            0x42 => Some(Self::HistogramSt),
            0x43 => Some(Self::FloatHistogramSt),
            0x44 => Some(Self::Decimal),
            0x45 => Some(Self::DecimalOpen),
            0x50 => Some(Self::Buckets),
            0x51 => Some(Self::HistBuckets),
            _ => None,
        }
    }

    /// Whether chunks of this encoding hold native histograms.
    pub fn is_histogram(self) -> bool {
        matches!(self, Self::Histogram | Self::FloatHistogram | Self::HistogramSt | Self::FloatHistogramSt)
    }

    /// Whether chunks of this encoding hold float (not integer) native histograms.
    pub fn is_float_histogram(self) -> bool {
        matches!(self, Self::FloatHistogram | Self::FloatHistogramSt)
    }
}

/// One encoded chunk of one series.
#[derive(Debug, Clone, PartialEq)]
pub struct ChunkRef {
    /// Timestamp of the first sample, inclusive.
    pub mint_ms: i64,
    /// Timestamp of the last sample, inclusive.
    pub maxt_ms: i64,
    pub encoding: ChunkEncoding,
    pub data: Bytes,
}

/// A series and its chunks within the querier's range.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: Labels,
    pub chunks: Vec<ChunkRef>,
}

/// What the caller will do with a selection; implementations may use it to do less work.
#[derive(Debug, Clone, Default)]
pub struct SelectHints {
    /// Only the labels are needed (e.g. `/api/v1/series`, remote read `func: "series"`): chunks may be
    /// left empty, and series need not have samples in range.
    pub series_only: bool,
    /// The PromQL function the selection feeds, if any (informational).
    pub func: Option<String>,
    /// The range-vector window of the selection, ms (0 for instant vectors).
    pub range_ms: i64,
    /// The evaluation step, ms (0 for instant queries).
    pub step_ms: i64,
    /// The caller drops the series without a sample in range itself: the storage may yield a series whose
    /// chunks overlap the range without holding a sample inside it, rather than decode them to find out
    /// (a query at "now" otherwise decoded every open head chunk twice). The PromQL engine sets it; the
    /// head then also hands out its open chunks' newest samples as chunks of their own (see
    /// `MemSeries::read_chunks` in `tessera-tsdb`), which remote read, whose chunks leave as they are, does
    /// not ask for.
    pub unchecked_range: bool,
}

/// Errors of the read path.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum StorageError {
    /// On-disk data failed a checksum or could not be parsed; names the file and byte offset.
    #[error("corruption in {file} at offset {offset}: {reason}")]
    Corruption { file: String, offset: u64, reason: String },
    #[error("i/o error: {0}")]
    Io(String),
    /// The storage cannot accept writes any more (a failed fsync or write); reads may still work.
    #[error("storage is poisoned: {0}")]
    Poisoned(String),
    #[error("{0}")]
    Other(String),
}

/// One shard's matching series, sorted by labels. Iteration may fail mid-way (e.g. a corrupt chunk).
pub type SeriesSet = Box<dyn Iterator<Item = Result<Series, StorageError>> + Send>;

/// Something that can be read: a database, a store, a union of stores.
pub trait Queryable: Send + Sync {
    /// A consistent view of `[mint_ms, maxt_ms]`, both inclusive.
    fn querier(&self, mint_ms: i64, maxt_ms: i64) -> Result<Arc<dyn Querier>, StorageError>;

    /// Where this storage records changes to old time ranges (see [`crate::changes`]); `None` when it
    /// cannot tell, and then nothing derived from it may be kept across queries (no result cache).
    fn changes(&self) -> Option<&crate::ChangeLog> {
        None
    }

    /// The downsampling tiers this storage keeps, finest first (none by default).
    fn tiers(&self) -> Vec<TierInfo> {
        Vec::new()
    }

    /// A view of `[mint_ms, maxt_ms]` at the tier of `resolution_ms`: every series' chunks are
    /// `ChunkEncoding::Buckets` chunks whose buckets together cover the range, computed ahead of time
    /// where the tier has them and from the raw samples where it does not (see `tessera_encoding::buckets`).
    /// The buckets of a range are the same whichever way they were computed, as long as the raw samples
    /// exist. `None`: no such tier.
    fn tier_querier(&self, resolution_ms: i64, mint_ms: i64, maxt_ms: i64) -> Result<Option<Arc<dyn Querier>>, StorageError> {
        let _ = (resolution_ms, mint_ms, maxt_ms);
        Ok(None)
    }

    /// Where raw retention has dropped raw samples that downsampling tiers still hold (see
    /// [`RawHorizon`]); `None` when no tier reaches further back than the raw data (by default).
    fn raw_horizon(&self) -> Option<RawHorizon> {
        None
    }
}

/// How far back raw samples and each downsampling tier reach, once raw retention has dropped raw blocks
/// that tiers outlive: before `raw_mint_ms` only the tiers answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawHorizon {
    /// The oldest time raw samples are held for everywhere (the latest of the shards' oldest raw times).
    pub raw_mint_ms: i64,
    /// Per tier, finest first: its resolution and the oldest time it holds buckets for everywhere (the
    /// latest of the shards' oldest bucket; `None`: no buckets at all).
    pub tiers: Vec<(i64, Option<i64>)>,
}

/// A downsampling tier: its bucket width and how long it is kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierInfo {
    pub resolution_ms: i64,
    /// 0: as long as the raw data.
    pub retention_ms: i64,
}

/// A view of a time range. Cheap to share across threads; every method may be called concurrently.
pub trait Querier: Send + Sync {
    fn mint_ms(&self) -> i64;
    fn maxt_ms(&self) -> i64;

    /// How many shards this view spans; `select_shard` takes `0..shard_count()`.
    fn shard_count(&self) -> usize;

    /// The series of one shard that match all `matchers` (an empty list matches nothing), sorted by labels.
    fn select_shard(&self, shard: usize, matchers: &[Matcher], hints: &SelectHints) -> Result<SeriesSet, StorageError>;

    /// Sorted, unique label names of the series matching `matchers` (all series when empty) in range.
    fn label_names(&self, matchers: &[Matcher]) -> Result<Vec<String>, StorageError>;

    /// Sorted, unique values of label `name` among the series matching `matchers` (all when empty).
    fn label_values(&self, name: &str, matchers: &[Matcher]) -> Result<Vec<String>, StorageError>;

    /// All shards' matching series merged into one label-sorted stream.
    fn select(&self, matchers: &[Matcher], hints: &SelectHints) -> Result<SeriesSet, StorageError> {
        let mut sets = Vec::with_capacity(self.shard_count());
        for s in 0..self.shard_count() {
            sets.push(self.select_shard(s, matchers, hints)?);
        }
        Ok(merge_sorted(sets))
    }
}

/// Merges label-sorted series sets whose series are disjoint (as shards are) into one sorted set.
pub fn merge_sorted(sets: Vec<SeriesSet>) -> SeriesSet {
    if sets.len() == 1 {
        return sets.into_iter().next().expect("len checked");
    }
    Box::new(MergeSorted { heads: sets.into_iter().map(|s| (None, s)).collect(), primed: false })
}

struct MergeSorted {
    heads: Vec<(Option<Result<Series, StorageError>>, SeriesSet)>,
    primed: bool,
}

impl Iterator for MergeSorted {
    type Item = Result<Series, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if !self.primed {
            for (h, s) in &mut self.heads {
                *h = s.next();
            }
            self.primed = true;
        }
        // Errors surface first; otherwise the smallest label set. Shard counts are small, so a linear scan
        // beats a heap here.
        let mut best: Option<usize> = None;
        for (i, (h, _)) in self.heads.iter().enumerate() {
            match h {
                None => {}
                Some(Err(_)) => {
                    best = Some(i);
                    break;
                }
                Some(Ok(s)) => {
                    let better = match best.and_then(|b| self.heads[b].0.as_ref()) {
                        Some(Ok(bs)) => s.labels < bs.labels,
                        _ => true,
                    };
                    if better {
                        best = Some(i);
                    }
                }
            }
        }
        let i = best?;
        let (h, s) = &mut self.heads[i];
        let out = h.take();
        *h = s.next();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::labels;

    fn set(names: &[&str]) -> SeriesSet {
        let v: Vec<_> = names
            .iter()
            .map(|n| Ok(Series { labels: labels!("__name__" => *n), chunks: vec![] }))
            .collect();
        Box::new(v.into_iter())
    }

    #[test]
    fn merge_sorted_interleaves_shards() {
        let m = merge_sorted(vec![set(&["a", "d"]), set(&["b", "c", "e"]), set(&[])]);
        let got: Vec<String> = m.map(|s| s.expect("ok").labels.metric_name().to_string()).collect();
        assert_eq!(got, ["a", "b", "c", "d", "e"]);
    }
}
