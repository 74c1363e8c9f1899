//! Retention: which whole blocks to drop, by age and by total size.
//!
//! Mirrors Prometheus' `BeyondTimeRetention` and `BeyondSizeRetention` (tsdb/db.go). Blocks are considered
//! newest first (by `maxt`): by time, every block whose `maxt` lies at least `retention_ms` before the
//! newest block's `maxt` goes (the newest block itself never goes by time); by size, sizes are summed from
//! the newest block down and the block at which the sum first exceeds `retention_bytes` goes together
//! with every older one. Deleting whole blocks only means data lives up to one block range longer than
//! the retention, which is what Prometheus does too.

use crate::block::BlockMeta;

/// Ids of the blocks to delete, oldest first. `metas[i]` has size `sizes[i]` bytes (missing sizes count
/// as 0); the input may be in any order. `retention_ms == 0` disables time retention,
/// `retention_bytes == 0` size retention. Callers that want the head and WAL counted against the size
/// limit (as Prometheus does) pass `retention_bytes` minus their size.
///
/// `newest_cap_ms` bounds the reference time: a block that claims to end later (a sample from next
/// year, written before future samples were rejected) must not make real data look old. Callers pass
/// the newest time they would accept now ([`crate::Options::max_valid_time_ms`]).
pub fn blocks_to_delete(
    metas: &[BlockMeta],
    retention_ms: i64,
    retention_bytes: u64,
    sizes: &[u64],
    newest_cap_ms: i64,
) -> Vec<String> {
    let mut order: Vec<usize> = (0..metas.len()).collect();
    // Newest first; ties broken by id so the result does not depend on input order.
    order.sort_by(|&a, &b| metas[b].maxt_ms.cmp(&metas[a].maxt_ms).then(metas[b].id.cmp(&metas[a].id)));
    let mut cut = order.len();
    if retention_ms > 0 && !order.is_empty() {
        let newest = metas[order[0]].maxt_ms.min(newest_cap_ms);
        if let Some(i) = (1..order.len()).find(|&i| newest.saturating_sub(metas[order[i]].maxt_ms) >= retention_ms) {
            cut = cut.min(i);
        }
    }
    if retention_bytes > 0 {
        let mut total: u64 = 0;
        for (i, &ix) in order.iter().enumerate() {
            total = total.saturating_add(sizes.get(ix).copied().unwrap_or(0));
            if total > retention_bytes {
                cut = cut.min(i);
                break;
            }
        }
    }
    order[cut..].iter().rev().map(|&i| metas[i].id.clone()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::block::{BlockStats, CompactionMeta, META_VERSION};

    const H: i64 = 3_600_000;

    fn m(id: &str, mint: i64, maxt: i64) -> BlockMeta {
        BlockMeta {
            id: id.into(),
            mint_ms: mint,
            maxt_ms: maxt,
            stats: BlockStats::default(),
            compaction: CompactionMeta::default(),
            version: META_VERSION,
            derived: None,
        }
    }

    fn blocks() -> Vec<BlockMeta> {
        // maxt: 2h, 4h, 6h, 8h, 10h (given out of order on purpose).
        vec![m("c", 4 * H, 6 * H), m("a", 0, 2 * H), m("e", 8 * H, 10 * H), m("b", 2 * H, 4 * H), m("d", 6 * H, 8 * H)]
    }

    #[test]
    fn time_retention_drops_blocks_at_least_retention_older_than_the_newest() {
        let ms = blocks();
        assert!(blocks_to_delete(&ms, 0, 0, &[], i64::MAX).is_empty(), "both disabled");
        // newest maxt 10h; 10h - 4h = 6h ≥ 6h: b and everything older go.
        assert_eq!(blocks_to_delete(&ms, 6 * H, 0, &[], i64::MAX), vec!["a", "b"]);
        assert_eq!(blocks_to_delete(&ms, 6 * H + 1, 0, &[], i64::MAX), vec!["a"]);
        assert_eq!(blocks_to_delete(&ms, 1, 0, &[], i64::MAX), vec!["a", "b", "c", "d"], "the newest block never goes by time");
        assert!(blocks_to_delete(&ms, 100 * H, 0, &[], i64::MAX).is_empty());
        assert!(blocks_to_delete(&ms[..1], 1, 0, &[], i64::MAX).is_empty());
    }

    /// Issue 9: a block ending next year (one bogus sample) does not make real data look old.
    #[test]
    fn a_block_from_the_future_is_judged_by_the_clock() {
        let mut ms = blocks();
        ms.push(m("future", 10 * H, 365 * 24 * H));
        assert_eq!(blocks_to_delete(&ms, 6 * H, 0, &[], i64::MAX).len(), 5, "uncapped: everything real goes");
        // The clock says 10h: only what is 6h older than that goes, as without the bogus block.
        assert_eq!(blocks_to_delete(&ms, 6 * H, 0, &[], 10 * H), vec!["a", "b"]);
    }

    #[test]
    fn size_retention_drops_oldest_until_the_total_fits() {
        let ms = blocks();
        // Sizes by position: c=30, a=10, e=50, b=20, d=40. Newest first: e 50, d 90, c 120, b 140, a 150.
        let sizes = [30, 10, 50, 20, 40];
        assert!(blocks_to_delete(&ms, 0, 150, &sizes, i64::MAX).is_empty());
        assert_eq!(blocks_to_delete(&ms, 0, 149, &sizes, i64::MAX), vec!["a"]);
        assert_eq!(blocks_to_delete(&ms, 0, 120, &sizes, i64::MAX), vec!["a", "b"]);
        assert_eq!(blocks_to_delete(&ms, 0, 119, &sizes, i64::MAX), vec!["a", "b", "c"]);
        assert_eq!(blocks_to_delete(&ms, 0, 49, &sizes, i64::MAX), vec!["a", "b", "c", "d", "e"], "even the newest when alone too big");
        // Both limits: the union (the stricter cut).
        assert_eq!(blocks_to_delete(&ms, 6 * H + 1, 120, &sizes, i64::MAX), vec!["a", "b"]);
        assert_eq!(blocks_to_delete(&ms, 6 * H, 149, &sizes, i64::MAX), vec!["a", "b"]);
    }
}
