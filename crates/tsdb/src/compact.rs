//! Compaction: choosing which blocks to merge ([`plan`]) and merging them into one new block
//! ([`compact`]), plus the crash recovery that goes with it ([`cleanup_after_crash`]).
//!
//! Planning mirrors Prometheus' `LeveledCompactor.Plan` (tsdb/compact.go): block ranges grow
//! geometrically (2h, 6h, 18h, 54h, …, ×3 per level as `ExponentialBlockRanges(2h, 10, 3)`), capped at the
//! largest block the database allows (a tenth of the retention). Overlapping blocks (out-of-order data
//! cut into a block of an already covered range) are merged first; then neighbouring blocks that fill a
//! range of the next size; then single blocks with many tombstones are rewritten to drop deleted data.
//!
//! Merging is a k-way merge of the inputs' series (each block's series refs are in label order). Per
//! series, chunks that do not overlap any other chunk and carry no tombstone are copied as bytes (still
//! zero-copy slices of the input mappings until written); overlapping chunks are decoded, merged by time,
//! deduplicated (for equal timestamps the sample of the block listed first wins) and re-encoded as XOR
//! chunks of at most [`MAX_SAMPLES_PER_CHUNK`] samples; deleted samples are dropped. The block writer
//! then turns runs of XOR chunks into Dense chunks when the writer options ask for it
//! (`WriteOptions::cold_codec`, the database's `Options::cold_codec`); [`compact`] itself uses the
//! default options and stores chunks as they come.
//!
//! Crash safety: the new block appears atomically (see `block::writer`); only after that does the caller
//! delete the inputs. A crash in between leaves the inputs next to a block whose `sources` contain all of
//! theirs at a higher level: [`cleanup_after_crash`] removes such superseded blocks (and any `.tmp`
//! directory) when the database opens, before blocks are loaded.

use crate::block::meta::sync_dir;
use crate::block::writer::BlockWriter;
use crate::block::{is_block_id, Block, BlockMeta, ChunkMeta, CompactionMeta, WriteOptions};
use crate::index::SeriesRef;
use crate::tombstones::{Interval, Tombstones};
use crate::Error;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tessera_model::{ChunkEncoding, ChunkRef, Labels, Sample};

/// Chunks re-encoded by compaction hold at most this many samples (Prometheus' head cuts at 120 too).
pub const MAX_SAMPLES_PER_CHUNK: usize = 120;

/// After reading this many chunk bytes from the inputs, compaction drops the inputs' mapped pages from the
/// resident set (`Block::release_resident_pages`), so RSS stays bounded however large the inputs are.
const RELEASE_RESIDENT_EVERY_BYTES: usize = 32 << 20;

/// `steps` ranges starting at `min_ms`, each `factor` times the previous (Prometheus'
/// `ExponentialBlockRanges`).
pub fn exponential_ranges(min_ms: i64, steps: usize, factor: i64) -> Vec<i64> {
    let mut out = Vec::with_capacity(steps);
    let mut r = min_ms;
    for _ in 0..steps {
        out.push(r);
        r = r.saturating_mul(factor);
    }
    out
}

/// The compaction ranges: `block_range_ms × 3^i` for i in 0..10, without those above `max_range_ms`
/// (`max_range_ms <= 0`: no cap). The first range is always kept.
pub fn block_ranges(block_range_ms: i64, max_range_ms: i64) -> Vec<i64> {
    let mut r = exponential_ranges(block_range_ms, 10, 3);
    if max_range_ms > 0 {
        let first = r[0];
        r.retain(|&x| x <= max_range_ms);
        if r.is_empty() {
            r.push(first);
        }
    }
    r
}

/// Which blocks to compact now. Each inner vector is one compaction (ids in time order); the groups are
/// disjoint. Run the compactions, reopen, and call `plan` again until it returns nothing: one level is
/// planned at a time, as Prometheus does, so that a freshly merged block can join the next level's group
/// instead of being compacted twice.
///
/// Order of preference (mirrors Prometheus' `LeveledCompactor.plan`):
/// 1. every group of blocks whose time ranges overlap (all such groups at once);
/// 2. otherwise, leaving out the newest block (the one with the largest `mint`, just cut from the head),
///    the first group of ≥ 2 blocks that lies in one aligned window of a range size (the block range
///    first: early head cuts' pieces go back onto its grid) and either
///    fills it (`maxt − mint == range`) or ends before the newest block starts (`selectDirs`), skipping
///    groups with a block whose compaction failed on damaged data (`compaction.failed`);
/// 3. otherwise one block (newest first) whose tombstones exceed 5 % of its series, or that is entirely
///    deleted, among blocks at least half-way up the range ladder.
pub fn plan(metas: &[BlockMeta], block_range_ms: i64, max_range_ms: i64) -> Vec<Vec<String>> {
    let mut ds: Vec<&BlockMeta> = metas.iter().collect();
    ds.sort_by(|a, b| a.mint_ms.cmp(&b.mint_ms).then(a.maxt_ms.cmp(&b.maxt_ms)).then(a.id.cmp(&b.id)));
    let overlapping = overlapping_groups(&ds);
    if !overlapping.is_empty() {
        return overlapping;
    }
    if ds.len() <= 1 {
        return Vec::new();
    }
    // Keep the block just cut from the head out of leveled compaction (Prometheus: "gives users a window
    // of a full block size to piece-wise backup new data").
    ds.pop();
    let ranges = block_ranges(block_range_ms, max_range_ms);
    if let Some(g) = select_dirs(&ds, &ranges) {
        return vec![g.iter().map(|m| m.id.clone()).collect()];
    }
    let mid_range = ranges[ranges.len() / 2];
    for m in ds.iter().rev() {
        let s = &m.stats;
        if m.compaction.failed {
            continue;
        }
        if m.maxt_ms - m.mint_ms < mid_range {
            // Small block: rewrite only when everything in it is deleted (then it simply goes away).
            if s.num_tombstones > 0 && s.num_tombstones >= s.num_series {
                return vec![vec![m.id.clone()]];
            }
            break;
        }
        if s.num_tombstones as f64 / (s.num_series + 1) as f64 > 0.05 {
            return vec![vec![m.id.clone()]];
        }
    }
    Vec::new()
}

/// Groups of ≥ 2 blocks whose `[mint, maxt)` ranges overlap (transitively), from blocks sorted by mint
/// (Prometheus' `selectOverlappingDirs`, returning every group).
fn overlapping_groups(ds: &[&BlockMeta]) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    let mut cur: Vec<String> = Vec::new();
    let mut cur_max = i64::MIN;
    for m in ds {
        if !cur.is_empty() && m.mint_ms < cur_max {
            cur.push(m.id.clone());
            cur_max = cur_max.max(m.maxt_ms);
            continue;
        }
        if cur.len() > 1 {
            out.push(std::mem::take(&mut cur));
        }
        cur = vec![m.id.clone()];
        cur_max = m.maxt_ms;
    }
    if cur.len() > 1 {
        out.push(cur);
    }
    out
}

/// Prometheus' `selectDirs`, with one difference: the block range itself is a level too. Prometheus'
/// head only ever cuts whole block ranges, so it starts at the second range; Tessera's head also cuts
/// early under memory pressure (pieces shorter than a block range), and those pieces are merged back
/// into one block on the block-range grid before anything goes up the ladder.
fn select_dirs<'a>(ds: &[&'a BlockMeta], ranges: &[i64]) -> Option<Vec<&'a BlockMeta>> {
    let high_time = ds.last()?.mint_ms;
    for &iv in ranges {
        for p in split_by_range(ds, iv) {
            if p.iter().any(|m| m.compaction.failed) {
                continue; // Prometheus: "Do not select the range if it has a block whose compaction failed."
            }
            let mint = p[0].mint_ms;
            let maxt = p[p.len() - 1].maxt_ms;
            if (maxt - mint == iv || maxt <= high_time) && p.len() > 1 {
                return Some(p);
            }
        }
    }
    None
}

/// Prometheus' `splitByRange`: groups of consecutive blocks that lie inside one window `[t0, t0 + tr]`
/// aligned to multiples of `tr`; a block wider than its window is skipped.
fn split_by_range<'a>(ds: &[&'a BlockMeta], tr: i64) -> Vec<Vec<&'a BlockMeta>> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < ds.len() {
        let t0 = ds[i].mint_ms.div_euclid(tr) * tr;
        if ds[i].maxt_ms > t0 + tr {
            i += 1;
            continue;
        }
        let mut group = Vec::new();
        while i < ds.len() && ds[i].maxt_ms <= t0 + tr {
            group.push(ds[i]);
            i += 1;
        }
        if !group.is_empty() {
            out.push(group);
        }
    }
    out
}

/// Merges `blocks` into one new block under `parent_dir` and returns its meta, or `None` when nothing is
/// left (every sample deleted): then no block is written and the inputs may simply be deleted.
///
/// The new block covers `[min mint, max maxt)` of the inputs, has level `max(level) + 1`, sources = the
/// union of the inputs' sources, parents = the inputs' ids. The inputs are not touched; the caller deletes
/// them (with [`delete_block_dir`]) once the new block is open. A chunk that fails its checksum aborts
/// the compaction with that corruption error (the inputs stay as they are).
///
/// Each input's tombstones are read once, when the compaction starts: deletions added to an input while
/// it is being compacted would not reach the output, so callers serialise `Block::delete` with the
/// compaction of the same blocks (or re-apply them to the new block).
pub fn compact(blocks: &[Arc<Block>], parent_dir: &Path) -> Result<Option<BlockMeta>, Error> {
    compact_with(blocks, parent_dir, &WriteOptions::default())
}

/// [`compact`] with writer options.
pub fn compact_with(blocks: &[Arc<Block>], parent_dir: &Path, opts: &WriteOptions) -> Result<Option<BlockMeta>, Error> {
    if blocks.is_empty() {
        return Err(Error::Other("compact: no input blocks".into()));
    }
    let metas: Vec<BlockMeta> = blocks.iter().map(|b| b.meta()).collect();
    let mint = metas.iter().map(|m| m.mint_ms).min().expect("non-empty");
    let maxt = metas.iter().map(|m| m.maxt_ms).max().expect("non-empty");
    let level = metas.iter().map(|m| m.compaction.level).max().expect("non-empty") + 1;
    let sources: BTreeSet<String> = metas.iter().flat_map(|m| m.compaction.sources.iter().cloned()).collect();
    let compaction = CompactionMeta {
        level,
        sources: sources.into_iter().collect(),
        parents: metas.iter().map(|m| m.id.clone()).collect(),
        failed: false,
    };
    let mut cursors = Vec::with_capacity(blocks.len());
    for b in blocks {
        cursors.push(Cursor::new(b.clone())?);
    }
    let mut w = BlockWriter::new(parent_dir, mint, maxt, opts)?;
    match merge_into(&mut cursors, &mut w) {
        Ok(()) => w.finish(compaction),
        Err(e) => {
            w.abort();
            // Damaged input data: flag the block it came from so that `plan` stops picking it (mirrors
            // Prometheus' `Compaction.Failed`); the block stays readable for what is intact.
            if let Error::Corruption { file, .. } | Error::Storage(tessera_model::StorageError::Corruption { file, .. }) = &e {
                for b in blocks {
                    if Path::new(file).starts_with(b.dir()) {
                        let _ = b.mark_compaction_failed();
                    }
                }
            }
            Err(e)
        }
    }
}

/// One input block's position in its label-ordered series.
struct Cursor {
    block: Arc<Block>,
    tombstones: Arc<Tombstones>,
    num_series: SeriesRef,
    next_ref: SeriesRef,
    cur: Option<(Labels, SeriesRef, Vec<ChunkMeta>)>,
}

impl Cursor {
    fn new(block: Arc<Block>) -> Result<Self, Error> {
        let tombstones = block.tombstones();
        let num_series = block.index().num_series();
        let mut c = Cursor { block, tombstones, num_series, next_ref: 0, cur: None };
        c.advance()?;
        Ok(c)
    }

    fn advance(&mut self) -> Result<(), Error> {
        if self.next_ref >= self.num_series {
            self.cur = None;
            return Ok(());
        }
        let r = self.next_ref;
        self.next_ref += 1;
        // Reuse the previous series' chunk-meta vector.
        let (prev, mut metas) = match self.cur.take() {
            Some((l, _, m)) => (Some(l), m),
            None => (None, Vec::new()),
        };
        let labels = self.block.index().series_into(r, &mut metas)?;
        if let Some(prev) = &prev
            && labels <= *prev
        {
            return Err(Error::corruption(self.block.index().file(), 0, format!("series {r} out of label order")));
        }
        self.cur = Some((labels, r, metas));
        Ok(())
    }
}

/// A chunk meta of one input; `prio` is the input block's position in `blocks` (lower wins on equal
/// timestamps).
#[derive(Clone, Copy)]
struct MetaInput {
    meta: ChunkMeta,
    prio: usize,
}

/// The k-way merge: series by series in label order, chunk cluster by chunk cluster, straight into the
/// writer. Memory per series is one `ChunkMeta` per input chunk plus one cluster's samples.
fn merge_into(cursors: &mut [Cursor], w: &mut BlockWriter) -> Result<(), Error> {
    let mut read_bytes = 0usize;
    let mut inputs: Vec<MetaInput> = Vec::new();
    let mut deleted: Vec<Vec<Interval>> = vec![Vec::new(); cursors.len()];
    loop {
        let mut min: Option<&Labels> = None;
        for c in cursors.iter() {
            if let Some((l, _, _)) = &c.cur
                && min.is_none_or(|m| l < m)
            {
                min = Some(l);
            }
        }
        let Some(min) = min.cloned() else { return Ok(()) };
        inputs.clear();
        for (prio, c) in cursors.iter_mut().enumerate() {
            deleted[prio].clear();
            let Some((l, r, metas)) = &c.cur else { continue };
            if *l != min {
                continue;
            }
            deleted[prio].extend_from_slice(c.tombstones.get(*r));
            for m in metas {
                // A chunk entirely inside one deleted interval is dropped unread.
                if !deleted[prio].iter().any(|iv| iv.mint_ms <= m.mint_ms && m.maxt_ms <= iv.maxt_ms) {
                    inputs.push(MetaInput { meta: *m, prio });
                }
            }
            c.advance()?;
        }
        inputs.sort_by(|a, b| a.meta.mint_ms.cmp(&b.meta.mint_ms).then(a.prio.cmp(&b.prio)));
        w.start_series(min)?;
        let mut i = 0;
        while i < inputs.len() {
            // The cluster of chunks that overlap (transitively) the one at i.
            let mut j = i + 1;
            let mut cmax = inputs[i].meta.maxt_ms;
            while j < inputs.len() && inputs[j].meta.mint_ms <= cmax {
                cmax = cmax.max(inputs[j].meta.maxt_ms);
                j += 1;
            }
            let mut chunks = Vec::with_capacity(j - i);
            for x in &inputs[i..j] {
                let c = cursors[x.prio].block.chunk(&x.meta)?;
                read_bytes += c.data.len();
                let dels: Vec<Interval> =
                    deleted[x.prio].iter().filter(|iv| iv.overlaps(x.meta.mint_ms, x.meta.maxt_ms)).copied().collect();
                chunks.push((c, dels, x.prio));
            }
            for c in merge_cluster(chunks)? {
                w.add_chunk(&c)?;
            }
            if read_bytes >= RELEASE_RESIDENT_EVERY_BYTES {
                read_bytes = 0;
                cursors.iter().for_each(|c| c.block.release_resident_pages());
            }
            i = j;
        }
        w.end_series()?;
    }
}

/// Turns one cluster of (transitively) overlapping chunks of a series — each with the deleted intervals
/// that touch it and its block's priority — into sorted, non-overlapping chunks with deletions applied.
/// A lone chunk without deletions is passed through untouched (its bytes are copied, not re-encoded).
fn merge_cluster(cluster: Vec<(ChunkRef, Vec<Interval>, usize)>) -> Result<Vec<ChunkRef>, Error> {
    let untouched = cluster.len() == 1 && cluster[0].1.is_empty();
    // Float chunks (XOR, dense, XorSt) take the float merge; a cluster with native-histogram chunks the
    // general one.
    let decodable = cluster
        .iter()
        .all(|(c, _, _)| matches!(c.encoding, ChunkEncoding::Xor | ChunkEncoding::Dense | ChunkEncoding::Decimal | ChunkEncoding::XorSt));
    if untouched {
        return Ok(cluster.into_iter().map(|(c, _, _)| c).collect());
    }
    if !decodable {
        // Native-histogram chunks in the cluster: the general merge (any kind of sample), in block
        // priority order so the first of equal timestamps comes from the highest-priority block.
        let mut cluster = cluster;
        cluster.sort_by_key(|(_, _, prio)| *prio);
        let mut vals = Vec::new();
        let mut one = Vec::new();
        for (c, dels, _) in &cluster {
            one.clear();
            crate::merge::decode_any(c, &mut one)?;
            vals.extend(one.drain(..).filter(|v| !dels.iter().any(|iv| iv.contains(v.0))));
        }
        return crate::merge::merge_any(vals, &[], MAX_SAMPLES_PER_CHUNK);
    }
    // (sample, start timestamp, block priority); STs are 0 for encodings without them.
    let mut samples: Vec<(Sample, i64, usize)> = Vec::new();
    let (mut buf, mut sts) = (Vec::new(), Vec::new());
    for (c, dels, prio) in &cluster {
        buf.clear();
        sts.clear();
        tessera_encoding::decode_chunk_range_st_into(c, i64::MIN, i64::MAX, &mut buf, &mut sts)
            .map_err(|e| Error::Other(format!("compaction: undecodable chunk [{}, {}]: {e}", c.mint_ms, c.maxt_ms)))?;
        samples.extend(
            buf.iter().zip(&sts).filter(|(s, _)| !dels.iter().any(|iv| iv.contains(s.t))).map(|(s, &st)| (*s, st, *prio)),
        );
    }
    // Sort by (t, prio): the first of equal timestamps comes from the highest-priority block.
    samples.sort_by(|a, b| a.0.t.cmp(&b.0.t).then(a.2.cmp(&b.2)));
    samples.dedup_by(|later, first| later.0.t == first.0.t);
    let (merged, sts): (Vec<Sample>, Vec<i64>) = samples.into_iter().map(|(s, st, _)| (s, st)).unzip();
    // Start timestamps are kept: a part with some ST ≠ 0 becomes a XorSt chunk, the others XOR.
    Ok(crate::merge::encode_chunks_st_sized(&merged, &sts, MAX_SAMPLES_PER_CHUNK))
}

/// Deletes a block directory so that a crash midway leaves nothing that looks like a block: the
/// directory is first renamed to `<name>.tmp-for-deletion` (removed by [`cleanup_after_crash`] if the
/// process dies before the removal finishes).
pub fn delete_block_dir(dir: &Path) -> Result<(), Error> {
    let Some(name) = dir.file_name().and_then(|n| n.to_str()) else {
        return Err(Error::Other(format!("not a block directory: {}", dir.display())));
    };
    let parent = dir.parent().unwrap_or(Path::new("."));
    let doomed = parent.join(format!("{name}.tmp-for-deletion"));
    std::fs::rename(dir, &doomed).map_err(|e| Error::io(dir, e))?;
    sync_dir(parent)?;
    std::fs::remove_dir_all(&doomed).map_err(|e| Error::io(&doomed, e))
}

/// Recovery when a database opens, before its blocks are loaded. Removes
/// - every directory whose name contains `.tmp` (a block being written, or being deleted, at a crash);
/// - every block superseded by another one: a block `A` is superseded by `C` when `C` has a higher
///   compaction level and `A`'s sources are all among `C`'s, or `C` lists `A` as a parent. This is the
///   state a crash between "compacted block renamed into place" and "inputs deleted" leaves behind.
///
/// Blocks whose `meta.json` cannot be read are left alone (opening them reports the problem). Returns the
/// paths removed.
pub fn cleanup_after_crash(parent_dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let mut removed = Vec::new();
    let mut metas = Vec::new();
    let rd = std::fs::read_dir(parent_dir).map_err(|e| Error::io(parent_dir, e))?;
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(parent_dir, e))?;
        let name = ent.file_name().to_string_lossy().into_owned();
        let path = ent.path();
        if !path.is_dir() {
            continue;
        }
        let stem = name.split('.').next().unwrap_or("");
        if name.contains(".tmp") && is_block_id(stem) {
            std::fs::remove_dir_all(&path).map_err(|e| Error::io(&path, e))?;
            removed.push(path);
        } else if is_block_id(&name)
            && let Ok(m) = BlockMeta::read(&path)
        {
            metas.push(m);
        }
    }
    for a in &metas {
        let superseded = metas.iter().any(|c| {
            c.id != a.id
                && (c.compaction.parents.contains(&a.id)
                    || (c.compaction.level > a.compaction.level
                        && !a.compaction.sources.is_empty()
                        && a.compaction.sources.iter().all(|s| c.compaction.sources.contains(s))))
        });
        if superseded {
            let path = parent_dir.join(&a.id);
            delete_block_dir(&path)?;
            removed.push(path);
        }
    }
    if !removed.is_empty() {
        sync_dir(parent_dir)?;
    }
    Ok(removed)
}

/// Hard-links every file under `src` into `dst` (created), directories recreated: a copy of an immutable
/// block that costs no bytes (Prometheus snapshots blocks so).
pub(crate) fn link_dir(src: &Path, dst: &Path) -> Result<(), Error> {
    std::fs::create_dir_all(dst).map_err(|e| Error::io(dst, e))?;
    for e in std::fs::read_dir(src).map_err(|e| Error::io(src, e))? {
        let e = e.map_err(|e| Error::io(src, e))?;
        let (from, to) = (e.path(), dst.join(e.file_name()));
        let ft = e.file_type().map_err(|e| Error::io(&from, e))?;
        if ft.is_dir() {
            link_dir(&from, &to)?;
        } else {
            std::fs::hard_link(&from, &to).map_err(|e| Error::io(&to, e))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::{BlockStats, META_VERSION};

    const H: i64 = 3_600_000;

    fn meta(id: &str, mint: i64, maxt: i64) -> BlockMeta {
        BlockMeta {
            id: id.into(),
            mint_ms: mint,
            maxt_ms: maxt,
            stats: BlockStats { num_series: 100, ..Default::default() },
            compaction: CompactionMeta { level: 1, sources: vec![id.into()], ..Default::default() },
            version: META_VERSION,
            derived: None,
        }
    }

    #[test]
    fn ranges_grow_by_three_and_are_capped() {
        assert_eq!(block_ranges(2 * H, 0)[..4], [2 * H, 6 * H, 18 * H, 54 * H]);
        assert_eq!(block_ranges(2 * H, 20 * H), vec![2 * H, 6 * H, 18 * H]);
        assert_eq!(block_ranges(2 * H, H), vec![2 * H]);
    }

    #[test]
    fn plan_merges_aligned_neighbours_but_not_the_newest_block() {
        let ms = [meta("a", 0, 2 * H), meta("b", 2 * H, 4 * H), meta("c", 4 * H, 6 * H), meta("d", 6 * H, 8 * H)];
        assert_eq!(plan(&ms, 2 * H, 0), vec![vec!["a", "b", "c"]]);
        // The newest (c) excluded, [a, b] neither fills its 6h window nor ends before c starts: wait.
        assert!(plan(&ms[..3], 2 * H, 0).is_empty());
        // With a gap, [a, b] ends before the newest remaining block starts: picked.
        let gap = [meta("a", 0, 2 * H), meta("b", 2 * H, 4 * H), meta("e", 8 * H, 10 * H), meta("f", 10 * H, 12 * H)];
        assert_eq!(plan(&gap, 2 * H, 0), vec![vec!["a", "b"]]);
        // A single block besides the newest: nothing.
        assert!(plan(&ms[..2], 2 * H, 0).is_empty());
        // Capped at 2h: no level above the first, nothing to do.
        assert!(plan(&ms, 2 * H, 2 * H).is_empty());
    }

    /// Pieces of early (memory-pressure) head cuts are merged into one block on the 2h grid first, then
    /// climb the ladder as whole blocks do.
    #[test]
    fn plan_merges_early_cut_pieces_onto_the_block_grid() {
        let m = 60_000;
        let ms = [meta("p1", 0, 40 * m), meta("p2", 40 * m, 80 * m), meta("p3", 80 * m, 2 * H), meta("q1", 2 * H, 2 * H + 50 * m), meta("q2", 2 * H + 50 * m, 3 * H)];
        assert_eq!(plan(&ms, 2 * H, 0), vec![vec!["p1", "p2", "p3"]]);
        // The pieces of the window still being cut wait (the newest is left out and q1 alone is one).
        let merged = [meta("p", 0, 2 * H), meta("q1", 2 * H, 2 * H + 50 * m), meta("q2", 2 * H + 50 * m, 3 * H)];
        assert!(plan(&merged, 2 * H, 0).is_empty());
        // Capped at the block range, the pieces are still merged.
        assert_eq!(plan(&ms, 2 * H, 2 * H), vec![vec!["p1", "p2", "p3"]]);
    }

    #[test]
    fn plan_skips_groups_with_a_failed_block() {
        let mut ms = [meta("a", 0, 2 * H), meta("b", 2 * H, 4 * H), meta("c", 4 * H, 6 * H), meta("d", 6 * H, 8 * H)];
        ms[1].compaction.failed = true;
        assert!(plan(&ms, 2 * H, 0).is_empty());
    }

    #[test]
    fn plan_prefers_overlapping_blocks() {
        let ms = [meta("a", 0, 2 * H), meta("b", H, 2 * H), meta("c", 4 * H, 6 * H), meta("d", 5 * H, 7 * H), meta("e", 8 * H, 10 * H)];
        assert_eq!(plan(&ms, 2 * H, 0), vec![vec!["a", "b"], vec!["c", "d"]]);
    }

    #[test]
    fn plan_rewrites_blocks_with_many_tombstones() {
        let mut big = meta("big", 0, 18 * H);
        big.compaction.level = 3;
        big.stats.num_tombstones = 10;
        let newest = meta("new", 18 * H, 20 * H);
        // Ranges capped at 54h: [2h, 6h, 18h, 54h], so an 18h block is "big enough".
        assert_eq!(plan(&[big.clone(), newest.clone()], 2 * H, 54 * H), vec![vec!["big"]]);
        // Uncapped, the mid range is 486h: an 18h block with some tombstones is left alone.
        assert!(plan(&[big.clone(), newest.clone()], 2 * H, 0).is_empty());
        big.stats.num_tombstones = 5; // 5/101 < 5 %
        assert!(plan(&[big, newest.clone()], 2 * H, 54 * H).is_empty());
        let mut small = meta("small", 0, 2 * H);
        small.stats.num_tombstones = 100; // all series deleted
        assert_eq!(plan(&[small, newest], 2 * H, 0), vec![vec!["small"]]);
    }
}
