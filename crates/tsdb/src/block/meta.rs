//! `meta.json` (what a block covers, its statistics and lineage) and block ids. Format:
//! `docs/format/meta.md`.

use crate::Error;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Version of the block layout recorded in `meta.json`.
pub const META_VERSION: u32 = 1;

/// Everything `meta.json` records about a block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockMeta {
    /// The block's id, also its directory name: 26 characters that sort by creation time.
    pub id: String,
    /// Smallest timestamp the block may hold, inclusive.
    pub mint_ms: i64,
    /// End of the block's range, **exclusive** (as Prometheus' `MaxTime`): a 2h block starting at 0 has
    /// `maxt_ms` = 7 200 000 and holds samples with `t < 7 200 000`.
    pub maxt_ms: i64,
    pub stats: BlockStats,
    pub compaction: CompactionMeta,
    pub version: u32,
    /// Set on a downsampling tier's block: what it was computed from (see `crate::tiers`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub derived: Option<Derived>,
}

/// The lineage of a tier block: the raw block it was computed from, as that block was then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Derived {
    /// The tier's resolution, ms.
    pub resolution_ms: i64,
    /// Id of the raw block the buckets were computed from.
    pub source: String,
    /// That block's `stats.num_tombstones` at the time: a deletion since makes the tier block stale.
    pub source_tombstones: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockStats {
    pub num_series: u64,
    pub num_samples: u64,
    pub num_chunks: u64,
    /// Number of deleted intervals in the block's tombstones (Prometheus' `NumTombstones`).
    #[serde(default)]
    pub num_tombstones: u64,
}

/// The block's lineage.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactionMeta {
    /// 1 for a block cut from the head; one more than the highest input level for a compacted block.
    pub level: u32,
    /// Ids of the level-1 blocks whose data this block contains (itself, for a level-1 block), sorted.
    pub sources: Vec<String>,
    /// Ids of the blocks this one was compacted from directly (empty for a level-1 block).
    #[serde(default)]
    pub parents: Vec<String>,
    /// Set when compacting this block failed on damaged data (Prometheus' `Compaction.Failed`): the
    /// planner leaves it out of leveled compaction instead of retrying forever.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub failed: bool,
}

impl BlockMeta {
    /// True when the block's range `[mint, maxt)` shares time with `[mint_ms, maxt_ms]` (inclusive).
    pub fn overlaps_closed(&self, mint_ms: i64, maxt_ms: i64) -> bool {
        self.mint_ms <= maxt_ms && mint_ms < self.maxt_ms
    }

    /// Reads `dir/meta.json`.
    pub fn read(dir: &Path) -> Result<Self, Error> {
        let path = dir.join(super::META_FILE);
        let data = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        serde_json::from_slice(&data).map_err(|e| {
            // serde_json reports line/column; turn them into a byte offset for the error.
            let off = line_col_offset(&data, e.line(), e.column());
            Error::corruption(path.display(), off, format!("meta.json: {e}"))
        })
    }

    /// Writes `dir/meta.json` atomically (temporary file, fsync, rename, fsync of the directory).
    pub fn write(&self, dir: &Path) -> Result<(), Error> {
        let json = serde_json::to_vec_pretty(self).map_err(|e| Error::Other(format!("encoding meta.json: {e}")))?;
        write_file_atomic(dir, super::META_FILE, &json)
    }
}

fn line_col_offset(data: &[u8], line: usize, col: usize) -> u64 {
    if line == 0 {
        return 0;
    }
    let mut off = 0usize;
    for (i, l) in data.split(|&b| b == b'\n').enumerate() {
        if i + 1 == line {
            return (off + col.saturating_sub(1)) as u64;
        }
        off += l.len() + 1;
    }
    off as u64
}

/// Writes `dir/name` through `dir/name.tmp`: write, fsync, rename, fsync the directory. A crash leaves
/// either the old file or the new one, never a torn mix.
pub(crate) fn write_file_atomic(dir: &Path, name: &str, data: &[u8]) -> Result<(), Error> {
    let tmp = dir.join(format!("{name}.tmp"));
    let dst = dir.join(name);
    let mut f = std::fs::File::create(&tmp).map_err(|e| Error::io(&tmp, e))?;
    f.write_all(data).map_err(|e| Error::io(&tmp, e))?;
    f.sync_all().map_err(|e| Error::io(&tmp, e))?;
    drop(f);
    std::fs::rename(&tmp, &dst).map_err(|e| Error::io(&dst, e))?;
    sync_dir(dir)
}

/// fsyncs a directory so that entries created, renamed or removed in it are durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<(), Error> {
    let f = std::fs::File::open(dir).map_err(|e| Error::io(dir, e))?;
    f.sync_all().map_err(|e| Error::io(dir, e))
}

const CROCKFORD: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// A new block id: 26 Crockford base-32 characters encoding 48 bits of Unix milliseconds and 80 bits of
/// entropy, like a ULID. Ids made later sort later: within one process a per-process counter is folded into
/// the entropy and, for ids made in the same millisecond, the previous id is incremented.
pub fn new_block_id() -> String {
    static LAST: std::sync::Mutex<(u64, u128)> = std::sync::Mutex::new((0, 0));
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0) & ((1 << 48) - 1);
    let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
    let rand = if ms <= last.0 {
        // Same (or a backwards-stepped) millisecond: keep the previous time, bump the entropy.
        (last.1 + 1) & ((1u128 << 80) - 1)
    } else {
        entropy(COUNTER.fetch_add(1, Ordering::Relaxed))
    };
    let ms = ms.max(last.0);
    *last = (ms, rand);
    drop(last);
    let v: u128 = (u128::from(ms) << 80) | rand;
    let mut s = String::with_capacity(26);
    for i in (0..26).rev() {
        s.push(CROCKFORD[((v >> (i * 5)) & 31) as usize] as char);
    }
    s
}

/// 80 bits of entropy without a random-number crate: std's `RandomState` is seeded from the OS per process;
/// hashing the time, the process id and a counter through it gives ids that differ across processes.
fn entropy(counter: u64) -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let rs = std::collections::hash_map::RandomState::new();
    let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
    let mut h1 = rs.build_hasher();
    h1.write_u128(nanos);
    h1.write_u32(std::process::id());
    h1.write_u64(counter);
    let a = h1.finish();
    let mut h2 = rs.build_hasher();
    h2.write_u64(a);
    h2.write_u64(counter ^ 0x9e37_79b9_7f4a_7c15);
    let b = h2.finish();
    ((u128::from(a) << 64) | u128::from(b)) & ((1u128 << 80) - 1)
}

/// True when `name` looks like a block id (26 Crockford base-32 characters).
pub fn is_block_id(name: &str) -> bool {
    name.len() == 26 && name.bytes().all(|b| CROCKFORD.contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_sortable_and_recognised() {
        let ids: Vec<String> = (0..1000).map(|_| new_block_id()).collect();
        for w in ids.windows(2) {
            assert!(w[0] < w[1], "{} !< {}", w[0], w[1]);
        }
        assert!(ids.iter().all(|i| is_block_id(i)));
        assert!(!is_block_id("01ABC.tmp"));
    }

    #[test]
    fn meta_json_round_trips() {
        let dir = tempfile::tempdir().expect("tempdir");
        let m = BlockMeta {
            id: new_block_id(),
            mint_ms: 0,
            maxt_ms: 7_200_000,
            stats: BlockStats { num_series: 2, num_samples: 3, num_chunks: 4, num_tombstones: 0 },
            compaction: CompactionMeta { level: 1, sources: vec!["x".into()], parents: vec![], failed: false },
            version: META_VERSION,
            derived: None,
        };
        m.write(dir.path()).expect("write");
        assert_eq!(BlockMeta::read(dir.path()).expect("read"), m);
        std::fs::write(dir.path().join("meta.json"), b"{\n  \"id\": 5").expect("write");
        assert!(matches!(BlockMeta::read(dir.path()), Err(Error::Corruption { .. })));
    }
}
