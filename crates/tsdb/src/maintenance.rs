//! Block maintenance of one shard: compaction of neighbouring blocks (planning and merging live in
//! [`crate::compact`]), retention by time and size ([`crate::retention`]), and tombstone cleaning.
//!
//! Order of a swap, for crash safety: the new block is complete on disk (atomic rename) and opened, then
//! the shard's block list is switched under its state lock (readers see the old set or the new one, never
//! a mix), then the inputs' directories are deleted. A crash before the deletion leaves superseded blocks
//! that `compact::cleanup_after_crash` removes at the next open.

use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;

use crate::block::{Block, BlockMeta, WriteOptions};
use crate::compact;
use crate::error::Result;
use crate::metrics::Metrics;
use crate::options::Options;
use crate::shard::Shard;
use tessera_model::ChangeLog;

fn max_range(opts: &Options) -> i64 {
    // Prometheus caps the largest block at a tenth of the retention (`--storage.tsdb.max-block-duration`).
    if opts.retention_ms > 0 { opts.retention_ms / 10 } else { 0 }
}

fn delete_dirs(s: &Shard, ids: &[String]) {
    for id in ids {
        let p = s.dir.join(id);
        if let Err(e) = compact::delete_block_dir(&p) {
            tracing::warn!(dir = %p.display(), error = %e, "could not delete replaced block (removed at next open)");
        }
    }
}

/// Runs compactions until the planner has nothing left. Retention ([`retain`]) comes after the
/// downsampling tiers have been computed from the compacted blocks, so a block that retention drops at
/// once still leaves its buckets behind.
pub(crate) fn compact(s: &Shard, opts: &Options, metrics: &Metrics) -> Result<()> {
    for _ in 0..64 {
        let blocks = s.blocks();
        let metas: Vec<BlockMeta> = blocks.iter().map(|b| b.meta()).collect();
        let groups = compact::plan(&metas, opts.block_range_ms, max_range(opts));
        if groups.is_empty() {
            break;
        }
        for g in groups {
            let inputs: Vec<Arc<Block>> = blocks.iter().filter(|b| g.iter().any(|id| id == b.id())).cloned().collect();
            if inputs.is_empty() {
                continue;
            }
            // A failure is counted by the caller (`db::maintenance_pass`), once.
            let meta = compact::compact_with(&inputs, &s.dir, &WriteOptions::from_db_options(opts))?;
            let new = match meta {
                Some(m) => vec![Block::open(&s.dir.join(&m.id))?],
                None => Vec::new(),
            };
            s.swap_blocks(&g, new);
            delete_dirs(s, &g);
            metrics.compactions.fetch_add(1, Relaxed);
        }
    }
    Ok(())
}

/// The blocks beyond the time or size retention (Prometheus' `BeyondTimeRetention`,
/// `BeyondSizeRetention`; the size limit counts blocks only), which [`retain`] drops.
pub(crate) fn retention_drops(s: &Shard, opts: &Options) -> Vec<String> {
    if opts.retention_ms == 0 && opts.retention_bytes == 0 {
        return Vec::new();
    }
    let blocks = s.blocks();
    let metas: Vec<BlockMeta> = blocks.iter().map(|b| b.meta()).collect();
    let sizes: Vec<u64> = blocks.iter().map(|b| b.size_bytes()).collect();
    crate::retention::blocks_to_delete(&metas, opts.retention_ms, opts.retention_bytes, &sizes, opts.max_valid_time_ms())
}

/// Drops the blocks [`retention_drops`] chose (the caller has published the raw horizon they leave).
pub(crate) fn retain(s: &Shard, ids: &[String], metrics: &Metrics, changes: &ChangeLog) {
    if ids.is_empty() {
        return;
    }
    let (lo, hi) = s
        .blocks()
        .iter()
        .map(|b| b.meta())
        .filter(|m| ids.contains(&m.id))
        .fold((i64::MAX, i64::MIN), |(lo, hi), m| (lo.min(m.mint_ms), hi.max(m.maxt_ms - 1)));
    s.swap_blocks(ids, Vec::new());
    // The dropped blocks' samples are gone for new readers: derived data about that range is stale.
    if lo <= hi {
        changes.record(lo, hi);
    }
    delete_dirs(s, ids);
    metrics.blocks_deleted_by_retention.fetch_add(ids.len() as u64, Relaxed);
}

/// Rewrites every block that has tombstones without the deleted data (Prometheus' `DB.CleanTombstones`).
pub(crate) fn clean_tombstones(s: &Shard, opts: &Options, metrics: &Metrics) -> Result<()> {
    for b in s.blocks() {
        if b.tombstones().is_empty() {
            continue;
        }
        let meta = compact::compact_with(std::slice::from_ref(&b), &s.dir, &WriteOptions::from_db_options(opts))?;
        let new = match meta {
            Some(m) => vec![Block::open(&s.dir.join(&m.id))?],
            None => Vec::new(),
        };
        let ids = vec![b.id().to_string()];
        s.swap_blocks(&ids, new);
        delete_dirs(s, &ids);
        metrics.compactions.fetch_add(1, Relaxed);
    }
    Ok(())
}
