//! Downsampling tiers: per shard and per configured resolution, blocks of buckets
//! (`tessera_encoding::buckets`) computed in the background from the shard's immutable raw blocks, and
//! the querier that reads them ([`TierQuerier`]).
//!
//! # Layout and lineage
//! `shard-NNN/tiers/<resolution ms>/<block id>/` are ordinary blocks (index, chunks, meta.json) whose
//! chunks are `ChunkEncoding::Buckets`, one chunk per series. Each is computed from exactly one raw block
//! and covers that block's range `[mint, maxt)`; its `meta.json` records the source block's id and its
//! tombstone count then (`Derived`). Raw block ranges are multiples of the block range, which every
//! resolution divides (checked by `Options::validate`), so buckets never straddle two tier blocks.
//!
//! # When a tier block is computed, replaced and dropped
//! - Computed for a raw block that is *sealed*: no other raw block overlaps it and the head holds
//!   nothing older than its end (so no out-of-order sample can still change it). Never from the head.
//! - Replaced when its source changes: compaction merges the source into a larger block (the larger
//!   block gets a tier block of its own, which then supersedes the smaller ones: an older tier block
//!   overlapping a newer one is deleted), or a deletion adds tombstones to it (recomputed).
//! - Kept when raw retention deletes the source: that is what tiers are for. Dropped by the tier's own
//!   retention, measured like raw retention from the newest data.
//! - Crash safety: a tier block appears by atomic rename; on open, temporary directories are removed
//!   and overlapping tier blocks resolved as above (the newer wins), so a crash between writing a
//!   replacement and deleting what it replaces leaves nothing wrong behind.
//!
//! # Reading: the same answer with or without the tier
//! [`TierQuerier`] serves every range from a tier block only when that block is *current*: its source
//! still exists unchanged (same tombstones, nothing overlapping it, nothing older in the head), or its
//! source is gone and no raw data overlaps it (kept past raw retention). Every other part of the range
//! is bucketed from the raw samples on the fly, with the same function. So a tier is a pure cache of
//! the raw data while the raw data exists: answers do not depend on how far the background got.
//!
//! A series with native histograms gets a second chunk per tier block, `ChunkEncoding::HistBuckets`
//! (`tessera_encoding::hbuckets`), beside the `Buckets` chunk of its float samples (if any).
//!
//! Deletions reach tier blocks as tombstones: while the raw block exists its tier block is recomputed
//! without the deleted samples; once it is gone, the tier block answers without every bucket a deleted
//! interval touches (buckets cannot be split).

use std::cmp::Ordering;
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use tessera_encoding::buckets::{bucket_of, bucketize, decode_buckets_into, encode_buckets, Bucket};
use tessera_encoding::hbuckets::{decode_hbuckets_into, encode_hbuckets, hbucketize, HBucket};
use tessera_model::{
    ChangeLog, ChunkEncoding, ChunkRef, FloatHistogram, HistogramSample, Labels, Matcher, Querier, Sample, SelectHints, Series, SeriesSet,
    StorageError,
};

use crate::block::meta::Derived;
use crate::block::writer::BlockWriter;
use crate::block::{is_block_id, Block, BlockMeta, CompactionMeta, WriteOptions};
use crate::compact::delete_block_dir;
use crate::error::{Error, Result};
use crate::index::postings_for_matchers;
use crate::options::{Options, TierOptions};
use crate::querier::{DbQuerier, ShardSeries};
use crate::tombstones::Interval;
use crate::shard::Shard;

/// One tier of one shard.
pub(crate) struct TierSet {
    pub(crate) opts: TierOptions,
    pub(crate) dir: PathBuf,
    /// Sorted by `mint_ms`.
    pub(crate) blocks: RwLock<Vec<Arc<Block>>>,
    /// Raw blocks whose buckets could not be computed (damaged data): not retried until restart.
    failed: Mutex<HashSet<String>>,
}

/// Every tier of one shard.
pub(crate) struct ShardTiers {
    pub(crate) sets: Vec<TierSet>,
}

fn tier_dir(shard_dir: &Path, res: i64) -> PathBuf {
    shard_dir.join("tiers").join(format!("{res}"))
}

impl ShardTiers {
    /// Opens the tiers of a shard: removes temporary directories, opens the blocks and resolves
    /// overlaps left by a crash (the newer block wins).
    pub(crate) fn open(shard_dir: &Path, opts: &Options) -> Result<ShardTiers> {
        let mut sets = Vec::new();
        for t in &opts.tiers {
            let dir = tier_dir(shard_dir, t.resolution_ms);
            std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
            let mut blocks = Vec::new();
            for e in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
                let e = e.map_err(|e| Error::io(&dir, e))?;
                let name = e.file_name().to_string_lossy().to_string();
                if name.ends_with(".tmp") {
                    let _ = std::fs::remove_dir_all(e.path());
                    continue;
                }
                if !is_block_id(&name) {
                    continue;
                }
                match Block::open(&e.path()) {
                    Ok(b) => blocks.push(b),
                    // A damaged tier block is only a cache of raw data (or of data already past raw
                    // retention): it is set aside, never fatal.
                    Err(err) => tracing::error!(dir = %e.path().display(), error = %err, "tier block unreadable, skipped"),
                }
            }
            blocks.sort_by_key(|b| b.meta().mint_ms);
            let set = TierSet { opts: *t, dir, blocks: RwLock::new(blocks), failed: Mutex::new(HashSet::new()) };
            set.drop_superseded();
            sets.push(set);
        }
        Ok(ShardTiers { sets })
    }

    /// Bytes of every tier block of this shard.
    pub(crate) fn size_bytes(&self) -> u64 {
        self.sets.iter().map(|s| s.blocks.read().iter().map(|b| b.size_bytes()).sum::<u64>()).sum()
    }
}

fn overlap(a: &BlockMeta, b: &BlockMeta) -> bool {
    a.mint_ms < b.maxt_ms && b.mint_ms < a.maxt_ms
}

impl TierSet {
    /// Deletes every tier block that overlaps a newer one (block ids sort by creation time).
    fn drop_superseded(&self) {
        let mut gone = Vec::new();
        {
            let mut bs = self.blocks.write();
            let metas: Vec<BlockMeta> = bs.iter().map(|b| b.meta()).collect();
            bs.retain(|b| {
                let m = b.meta();
                let newer = metas.iter().any(|o| o.id > m.id && overlap(o, &m));
                if newer {
                    gone.push(b.dir().to_path_buf());
                }
                !newer
            });
        }
        for d in gone {
            if let Err(e) = delete_block_dir(&d) {
                tracing::warn!(dir = %d.display(), error = %e, "could not delete a superseded tier block");
            }
        }
    }
}

/// Whether a raw block can no longer change except by deletion: nothing overlaps it and the head holds
/// nothing older than its end.
fn sealed(b: &BlockMeta, raw: &[BlockMeta], head_min: i64) -> bool {
    b.maxt_ms <= head_min && !raw.iter().any(|o| o.id != b.id && overlap(o, b))
}

/// The head's oldest sample time, `i64::MAX` when the head is empty.
fn head_min(shard: &Shard) -> i64 {
    let st = shard.state.read();
    if st.head.num_series() > 0 { st.head.min_t } else { i64::MAX }
}

/// Whether tier block `t` may answer for its range now (see the module docs).
fn current(t: &BlockMeta, raw: &[BlockMeta], head_min: i64) -> bool {
    if t.maxt_ms > head_min {
        return false;
    }
    let Some(d) = &t.derived else { return false };
    match raw.iter().find(|r| r.id == d.source) {
        Some(src) => src.stats.num_tombstones == d.source_tombstones && sealed(src, raw, head_min),
        None => !raw.iter().any(|r| overlap(r, t)),
    }
}

/// Reusable buffers of [`bucket_chunks`].
#[derive(Default)]
pub(crate) struct BucketBufs {
    samples: Vec<Sample>,
    hists: Vec<(i64, FloatHistogram)>,
    hs: Vec<HistogramSample>,
    buckets: Vec<Bucket>,
    hbuckets: Vec<HBucket>,
}

/// Buckets of one series' samples in `[mint, maxt]` that `deleted` leaves (it tells deleted sample
/// times), as chunks: a `Buckets` chunk of its float samples, and for a series with native histograms a
/// `HistBuckets` chunk of them (which also notes where its float samples were, stale markers included).
/// Empty when nothing is left.
pub(crate) fn bucket_chunks(
    chunks: &[ChunkRef],
    mint: i64,
    maxt: i64,
    res: i64,
    deleted: impl Fn(i64) -> bool,
    bufs: &mut BucketBufs,
) -> Result<Vec<ChunkRef>> {
    let BucketBufs { samples, hists, hs, buckets, hbuckets } = bufs;
    samples.clear();
    hists.clear();
    for c in chunks {
        if c.encoding == ChunkEncoding::Buckets || c.encoding == ChunkEncoding::HistBuckets {
            continue;
        }
        let err = |e: tessera_encoding::ChunkError| Error::Other(format!("chunk [{}, {}]: {e}", c.mint_ms, c.maxt_ms));
        if c.encoding.is_histogram() {
            if c.maxt_ms < mint || c.mint_ms > maxt {
                continue;
            }
            hs.clear();
            tessera_encoding::decode_histogram_samples_into(c, hs).map_err(err)?;
            // As the query path reads them: integer histograms as float ones (upstream `AtFloatHistogram`).
            hists.extend(hs.drain(..).filter(|s| s.t >= mint && s.t <= maxt).map(|s| (s.t, s.h.to_float())));
        } else {
            tessera_encoding::decode_chunk_range_into(c, mint, maxt, samples).map_err(err)?;
        }
    }
    samples.retain(|s| !deleted(s.t));
    hists.retain(|(t, _)| !deleted(*t));
    let mut out = Vec::new();
    if !samples.is_empty() {
        buckets.clear();
        bucketize(samples, res, buckets);
        let (first, last) = (buckets[0].k, buckets[buckets.len() - 1].k);
        out.push(ChunkRef {
            mint_ms: first.saturating_mul(res),
            maxt_ms: last.saturating_add(1).saturating_mul(res) - 1,
            encoding: ChunkEncoding::Buckets,
            data: encode_buckets(res, buckets).into(),
        });
    }
    if !hists.is_empty() {
        hbuckets.clear();
        hbucketize(samples, hists, res, hbuckets);
        let (first, last) = (hbuckets[0].k, hbuckets[hbuckets.len() - 1].k);
        out.push(ChunkRef {
            mint_ms: first.saturating_mul(res),
            maxt_ms: last.saturating_add(1).saturating_mul(res) - 1,
            encoding: ChunkEncoding::HistBuckets,
            data: encode_hbuckets(res, hbuckets).into(),
        });
    }
    // Blocks keep a series' chunks ordered by their start.
    out.sort_by_key(|c| c.mint_ms);
    Ok(out)
}

/// Computes the tier block of raw block `src` at resolution `res` under `dir`.
fn derive(src: &Block, res: i64, dir: &Path) -> Result<Option<BlockMeta>> {
    let meta = src.meta();
    let ts = src.tombstones();
    let mut w = BlockWriter::new(dir, meta.mint_ms, meta.maxt_ms, &WriteOptions::default())?;
    w.set_derived(Derived { resolution_ms: res, source: meta.id.clone(), source_tombstones: meta.stats.num_tombstones });
    let mut bufs = BucketBufs::default();
    let res_w = (|| -> Result<()> {
        for r in src.all_series()? {
            let (labels, chunks) = src.series(r)?;
            // Deleted samples go before bucketing.
            let cs = bucket_chunks(&chunks, meta.mint_ms, meta.maxt_ms - 1, res, |t| ts.is_deleted(r, t), &mut bufs)?;
            if cs.is_empty() {
                continue;
            }
            w.start_series(labels)?;
            for c in &cs {
                w.add_chunk(c)?;
            }
            w.end_series()?;
        }
        Ok(())
    })();
    match res_w {
        Ok(()) => w.finish(CompactionMeta {
            level: meta.compaction.level,
            sources: meta.compaction.sources.clone(),
            parents: vec![meta.id.clone()],
            failed: false,
        }),
        Err(e) => {
            w.abort();
            Err(e)
        }
    }
}

/// One maintenance pass over a shard's tiers: computes tier blocks for sealed raw blocks that have
/// none (or a stale one), deletes what they supersede, applies each tier's retention. Returns the
/// number of tier blocks written.
pub(crate) fn maintain(shard: &Shard, tiers: &ShardTiers, changes: &ChangeLog) -> Result<usize> {
    let raw: Vec<Arc<Block>> = shard.blocks();
    let raw_meta: Vec<BlockMeta> = raw.iter().map(|b| b.meta()).collect();
    let hmin = head_min(shard);
    let mut written = 0;
    for set in &tiers.sets {
        let res = set.opts.resolution_ms;
        // What the tier blocks were computed from: (source id, its tombstones then).
        let have: HashSet<(String, u64)> =
            set.blocks.read().iter().filter_map(|t| t.meta().derived).map(|d| (d.source, d.source_tombstones)).collect();
        for (b, m) in raw.iter().zip(&raw_meta) {
            if !sealed(m, &raw_meta, hmin) || m.mint_ms.rem_euclid(res) != 0 || m.maxt_ms.rem_euclid(res) != 0 {
                continue;
            }
            if have.contains(&(m.id.clone(), m.stats.num_tombstones)) || set.failed.lock().contains(&m.id) {
                continue;
            }
            match derive(b, res, &set.dir) {
                Ok(Some(nm)) => {
                    let nb = Block::open(&set.dir.join(&nm.id))?;
                    let mut bs = set.blocks.write();
                    bs.push(nb);
                    bs.sort_by_key(|x| x.meta().mint_ms);
                    written += 1;
                }
                Ok(None) => {
                    // No float series at all: nothing to keep; remember, so the block is not read again.
                    set.failed.lock().insert(m.id.clone());
                }
                Err(e) => {
                    tracing::error!(block = %m.id, resolution_ms = res, error = %e, "computing a tier block failed; the raw data answers for its range");
                    set.failed.lock().insert(m.id.clone());
                }
            }
            set.drop_superseded();
        }
        retain(set, &raw_meta, changes);
    }
    Ok(written)
}

/// Where raw retention has dropped what tiers still hold (`Queryable::raw_horizon`): a shard whose tier
/// blocks reach back before its oldest raw sample (block or head) answers only from tiers before that
/// sample — before the newest tier bucket when it has no raw data left at all —, and the database's
/// horizon is the latest of those shards' times, so that every shard's raw data covers what comes after.
/// A tier's oldest bucket is likewise the latest of its shards' oldest (those holding any).
/// `dropping[i]` names shard i's blocks that retention is about to drop: they count as gone already.
pub(crate) fn raw_horizon(shards: &[Arc<Shard>], tiers: &[Arc<ShardTiers>], dropping: &[Vec<String>]) -> Option<tessera_model::RawHorizon> {
    let mut raw_mint: Option<i64> = None;
    let mut per_tier: Vec<(i64, Option<i64>)> = Vec::new();
    for (n, (sh, ts)) in shards.iter().zip(tiers).enumerate() {
        let gone = dropping.get(n).map(Vec::as_slice).unwrap_or(&[]);
        let kept = sh.blocks().into_iter().filter(|b| !gone.iter().any(|id| id == b.id()));
        let raw_min = kept.map(|b| b.meta().mint_ms).chain([head_min(sh)]).min().unwrap_or(i64::MAX);
        let (mut tier_min, mut tier_max) = (i64::MAX, i64::MIN);
        for (i, set) in ts.sets.iter().enumerate() {
            let bs = set.blocks.read();
            let lo = bs.iter().map(|b| b.meta().mint_ms).min();
            tier_max = tier_max.max(bs.iter().map(|b| b.meta().maxt_ms).max().unwrap_or(i64::MIN));
            if per_tier.len() <= i {
                per_tier.push((set.opts.resolution_ms, None));
            }
            if let Some(lo) = lo {
                tier_min = tier_min.min(lo);
                per_tier[i].1 = Some(per_tier[i].1.map_or(lo, |x: i64| x.max(lo)));
            }
        }
        if tier_min < raw_min {
            let at = if raw_min == i64::MAX { tier_max } else { raw_min };
            raw_mint = Some(raw_mint.map_or(at, |x| x.max(at)));
        }
    }
    raw_mint.map(|raw_mint_ms| tessera_model::RawHorizon { raw_mint_ms, tiers: per_tier })
}

/// Recomputes the database's raw horizon into `cell` (what `Queryable::raw_horizon` answers) and, when it
/// moved, records the span between the old and new times as a change: the steps whose windows meet it
/// may now read another source, so results kept from them are stale. Called after each maintenance pass
/// (and at open), so the horizon moves only with a record; during a pass, with the blocks retention is
/// about to drop (`dropping`, per shard) counted as gone, so that no reader finds them gone and the
/// horizon not yet moved (it would read neither raw data nor the tiers there).
pub(crate) fn refresh_horizon(
    shards: &[Arc<Shard>],
    tiers: &[Arc<ShardTiers>],
    cell: &Mutex<Option<tessera_model::RawHorizon>>,
    changes: &ChangeLog,
    dropping: &[Vec<String>],
) {
    let new = raw_horizon(shards, tiers, dropping);
    let mut cur = cell.lock();
    if *cur == new {
        return;
    }
    let times = |h: &Option<tessera_model::RawHorizon>| -> Vec<i64> {
        h.iter().flat_map(|h| std::iter::once(h.raw_mint_ms).chain(h.tiers.iter().filter_map(|t| t.1))).collect()
    };
    let all: Vec<i64> = times(&cur).into_iter().chain(times(&new)).collect();
    if let (Some(&lo), Some(&hi)) = (all.iter().min(), all.iter().max()) {
        // Published first: a reader that sees the record reads the new horizon.
        *cur = new;
        drop(cur);
        changes.record(lo, hi);
    } else {
        *cur = new;
    }
}

/// Drops a tier's blocks entirely older than its retention, counted back from the newest data (raw or
/// tier), as raw retention is. What they held is gone for new readers (raw retention took it before), so
/// the dropped range is recorded as a change: results kept from it are stale.
fn retain(set: &TierSet, raw: &[BlockMeta], changes: &ChangeLog) {
    if set.opts.retention_ms <= 0 {
        return;
    }
    let newest = raw
        .iter()
        .map(|m| m.maxt_ms)
        .chain(set.blocks.read().iter().map(|b| b.meta().maxt_ms))
        .max()
        .unwrap_or(i64::MIN);
    let horizon = newest.saturating_sub(set.opts.retention_ms);
    let mut gone = Vec::new();
    let (mut lo, mut hi) = (i64::MAX, i64::MIN);
    set.blocks.write().retain(|b| {
        let m = b.meta();
        let keep = m.maxt_ms > horizon;
        if !keep {
            gone.push(b.dir().to_path_buf());
            (lo, hi) = (lo.min(m.mint_ms), hi.max(m.maxt_ms - 1));
        }
        keep
    });
    if !gone.is_empty() {
        changes.record(lo, hi);
    }
    for d in gone {
        if let Err(e) = delete_block_dir(&d) {
            tracing::warn!(dir = %d.display(), error = %e, "could not delete a tier block past retention");
        }
    }
}

/// A view of `[mint, maxt]` at one tier over every shard (see the module docs).
pub struct TierQuerier {
    /// The raw view of the same range: its shards, and the gaps and metadata calls read through it.
    pub(crate) raw: DbQuerier,
    pub(crate) tiers: Vec<Arc<ShardTiers>>,
    pub(crate) tier: usize,
    pub(crate) res: i64,
}

/// One source's next series: its labels and chunks.
type Item = std::result::Result<(Labels, Vec<ChunkRef>), StorageError>;
type Source = Box<dyn Iterator<Item = Item> + Send>;

impl TierQuerier {
    fn sources(&self, shard: usize, matchers: &[Matcher]) -> Result<Vec<Source>> {
        let sh = self.raw.shards.get(shard).ok_or_else(|| Error::Other(format!("no shard {shard}")))?;
        let res = self.res;
        // Whole buckets: [a, b).
        let a = bucket_of(self.raw.mint, res).saturating_mul(res);
        let b = bucket_of(self.raw.maxt, res).saturating_add(1).saturating_mul(res);
        let raw_meta: Vec<BlockMeta> = sh.blocks().iter().map(|b| b.meta()).collect();
        let hmin = head_min(sh);
        let mut use_blocks: Vec<Arc<Block>> = Vec::new();
        for t in self.tiers[shard].sets[self.tier].blocks.read().iter() {
            let m = t.meta();
            if m.maxt_ms <= a || m.mint_ms >= b || !current(&m, &raw_meta, hmin) {
                continue;
            }
            if use_blocks.last().is_some_and(|p| p.meta().maxt_ms > m.mint_ms) {
                continue;
            }
            use_blocks.push(t.clone());
        }
        let mut out: Vec<Source> = Vec::new();
        let mut at = a;
        let mut gaps = Vec::new();
        for t in &use_blocks {
            let m = t.meta();
            if m.mint_ms > at {
                gaps.push((at, m.mint_ms));
            }
            at = at.max(m.maxt_ms);
            let refs = postings_for_matchers(t.index(), matchers)?;
            let blk = t.clone();
            let ts = t.tombstones();
            let (lo, hi) = (a.max(m.mint_ms), (b - 1).min(m.maxt_ms - 1));
            out.push(Box::new(refs.into_iter().map(move |r| {
                let (labels, chunks) = blk.series_in_range(r, lo, hi)?;
                let ivs = ts.get(r);
                if ivs.is_empty() {
                    return Ok((labels, chunks));
                }
                Ok((labels, drop_deleted_buckets(chunks, ivs, res)?))
            })));
        }
        if at < b {
            gaps.push((at, b));
        }
        for (g0, g1) in gaps {
            let it = ShardSeries::new(sh.clone(), matchers, g0, g1 - 1, false)?;
            let mut bufs = BucketBufs::default();
            out.push(Box::new(it.filter_map(move |s| match s {
                Err(e) => Some(Err(e)),
                Ok(s) => match bucket_chunks(&s.chunks, g0, g1 - 1, res, |_| false, &mut bufs) {
                    Err(e) => Some(Err(e.into())),
                    Ok(cs) if cs.is_empty() => None,
                    Ok(cs) => Some(Ok((s.labels, cs))),
                },
            })));
        }
        Ok(out)
    }
}

/// One series of a union of stores at a tier when several members hold it (see `tessera_api::union`):
/// `tier_lists` are the members' bucket chunks and `raw_lists` their raw chunks over the whole buckets
/// `[a, b)`, in member order. The buckets are computed from the members' raw samples merged (a timestamp
/// in several keeps the first member's sample), so they are the buckets of the union's samples wherever a
/// member still has raw samples; older buckets, where no member has raw samples any more, are the first
/// member's that has some (buckets cannot be merged sample by sample).
pub fn union_tier_series(tier_lists: &[Vec<ChunkRef>], raw_lists: &[Vec<ChunkRef>], a: i64, b: i64, res: i64) -> Result<Vec<ChunkRef>> {
    let merged = crate::merge::merge_chunk_lists(raw_lists)?;
    let mut bufs = BucketBufs::default();
    let from_raw = bucket_chunks(&merged, a, b.saturating_sub(1), res, |_| false, &mut bufs)?;
    let Some(k0) = from_raw.iter().map(|c| c.mint_ms).min() else {
        return Ok(tier_lists.iter().find(|l| !l.is_empty()).cloned().unwrap_or_default());
    };
    let mut out = Vec::new();
    for l in tier_lists {
        let older = drop_deleted_buckets(l.clone(), &[Interval::new(k0, i64::MAX)], res)?;
        if !older.is_empty() {
            out = older;
            break;
        }
    }
    out.extend(from_raw);
    out.sort_by_key(|c| c.mint_ms);
    Ok(out)
}

/// A tier block's chunks without the buckets a deletion touches (a tier block answers alone only where its
/// raw block is gone; buckets cannot be split, so a deletion there removes the whole buckets it reaches).
fn drop_deleted_buckets(chunks: Vec<ChunkRef>, ivs: &[Interval], res: i64) -> Result<Vec<ChunkRef>> {
    let hit = |k: i64| {
        let (a, b) = (k.saturating_mul(res), k.saturating_add(1).saturating_mul(res).saturating_sub(1));
        ivs.iter().any(|iv| iv.overlaps(a, b))
    };
    let bad = |c: &ChunkRef, e: tessera_encoding::ChunkError| Error::Other(format!("tier chunk [{}, {}]: {e}", c.mint_ms, c.maxt_ms));
    let span = |first: i64, last: i64| (first.saturating_mul(res), last.saturating_add(1).saturating_mul(res) - 1);
    let mut out = Vec::with_capacity(chunks.len());
    for c in chunks {
        match c.encoding {
            ChunkEncoding::Buckets => {
                let mut bs = Vec::new();
                decode_buckets_into(&c.data, &mut bs).map_err(|e| bad(&c, e))?;
                bs.retain(|b| !hit(b.k));
                if let (Some(f), Some(l)) = (bs.first(), bs.last()) {
                    let (mint_ms, maxt_ms) = span(f.k, l.k);
                    out.push(ChunkRef { mint_ms, maxt_ms, encoding: c.encoding, data: encode_buckets(res, &bs).into() });
                }
            }
            ChunkEncoding::HistBuckets => {
                let mut bs = Vec::new();
                decode_hbuckets_into(&c.data, &mut bs).map_err(|e| bad(&c, e))?;
                bs.retain(|b| !hit(b.k));
                if let (Some(f), Some(l)) = (bs.first(), bs.last()) {
                    let (mint_ms, maxt_ms) = span(f.k, l.k);
                    out.push(ChunkRef { mint_ms, maxt_ms, encoding: c.encoding, data: encode_hbuckets(res, &bs).into() });
                }
            }
            _ => out.push(c),
        }
    }
    Ok(out)
}

/// Merges label-sorted sources whose chunks are disjoint in time into one label-sorted stream.
struct MergeSources {
    heads: Vec<(Option<Item>, Source)>,
    primed: bool,
    failed: bool,
}

impl Iterator for MergeSources {
    type Item = std::result::Result<Series, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if !self.primed {
            for (h, s) in &mut self.heads {
                *h = s.next();
            }
            self.primed = true;
        }
        let mut best: Option<Labels> = None;
        for (h, _) in &self.heads {
            match h {
                Some(Err(e)) => {
                    self.failed = true;
                    return Some(Err(e.clone()));
                }
                Some(Ok((l, _))) if best.as_ref().is_none_or(|b| l.cmp(b) == Ordering::Less) => {
                    best = Some(l.clone());
                }
                _ => {}
            }
        }
        let labels = best?;
        let mut chunks = Vec::new();
        for (h, s) in &mut self.heads {
            if matches!(h, Some(Ok((l, _))) if *l == labels) {
                if let Some(Ok((_, cs))) = h.take() {
                    chunks.extend(cs);
                }
                *h = s.next();
            }
        }
        chunks.sort_by_key(|c| c.mint_ms);
        Some(Ok(Series { labels, chunks }))
    }
}

impl Querier for TierQuerier {
    fn mint_ms(&self) -> i64 {
        self.raw.mint_ms()
    }

    fn maxt_ms(&self) -> i64 {
        self.raw.maxt_ms()
    }

    fn shard_count(&self) -> usize {
        self.raw.shard_count()
    }

    fn select_shard(&self, shard: usize, matchers: &[Matcher], _hints: &SelectHints) -> std::result::Result<SeriesSet, StorageError> {
        if matchers.is_empty() {
            return Ok(Box::new(std::iter::empty()));
        }
        let heads = self.sources(shard, matchers)?.into_iter().map(|s| (None, s)).collect();
        Ok(Box::new(MergeSources { heads, primed: false, failed: false }))
    }

    fn label_names(&self, matchers: &[Matcher]) -> std::result::Result<Vec<String>, StorageError> {
        self.raw.label_names(matchers)
    }

    fn label_values(&self, name: &str, matchers: &[Matcher]) -> std::result::Result<Vec<String>, StorageError> {
        self.raw.label_values(name, matchers)
    }
}
