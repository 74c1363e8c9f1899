//! Immutable blocks: a directory per time range holding the series of that range, written once by
//! [`write_block`] (from the head, or by compaction) and read through memory maps by [`Block`].
//!
//! ```text
//! <data dir>/<id>/            id: 26 Crockford base-32 chars, sortable by creation time (ULID-like)
//!     meta.json               BlockMeta: range [mint, maxt), stats, compaction lineage
//!     index                   symbols, series, postings, postings offset table, TOC (all CRC32C'd)
//!     chunks/000001 …         chunk records: encoding, length, data, CRC32C; ≤ 512 MiB per segment
//!     tombstones              deleted intervals per series, CRC32C'd
//! ```
//! The byte layouts are written down in `docs/format/{index,chunks,meta,tombstones}.md`.
//!
//! Main types: [`Block`] (an open block: its [`BlockIndex`], which implements [`IndexReader`], its
//! mapped chunk segments and its [`Tombstones`]) and [`BlockMeta`].
//!
//! Key decisions:
//! - **Zero-copy reads.** Each file is mapped once and wrapped in a `bytes::Bytes`, so a [`ChunkRef`]
//!   handed to a reader is a reference-counted slice of the mapping: no copy, and it stays valid after the
//!   block is dropped (the mapping lives until its last slice does). The mapping is the crate's only
//!   `unsafe`, confined to `block/mmap.rs`.
//! - **Checksums at two grains.** What every look-up needs (TOC, symbols, series offsets, postings table)
//!   is verified on open; each series entry, postings list and chunk has its own CRC32C, verified when it
//!   is read. A corrupt block therefore fails either at open (the caller skips it) or at the one series or
//!   chunk that is damaged, with the file and offset in the error; it never panics and never takes the
//!   other blocks down.
//! - **Blocks are immutable except for tombstones**, which are replaced whole by an atomic rename.

pub(crate) mod bin;
pub mod chunks;
pub mod index;
pub mod meta;
pub(crate) mod mmap;
pub mod writer;

pub use index::{BlockIndex, ChunkMeta};
pub use meta::{is_block_id, new_block_id, BlockMeta, BlockStats, CompactionMeta, META_VERSION};
pub use writer::{write_block, write_block_with, WriteOptions};

use crate::index::{postings_for_matchers, IndexReader, SeriesRef};
use crate::tombstones::{Interval, Tombstones};
use crate::Error;
use chunks::ChunkReader;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use tessera_model::{ChunkRef, Labels, Matcher};

/// File and directory names inside a block directory.
pub const META_FILE: &str = "meta.json";
pub const INDEX_FILE: &str = "index";
pub const CHUNKS_DIR: &str = "chunks";
pub const TOMBSTONES_FILE: &str = "tombstones";

/// An open, immutable block. Shared as `Arc<Block>`; every method may be called from many threads.
pub struct Block {
    dir: PathBuf,
    id: String,
    meta: RwLock<BlockMeta>,
    index: BlockIndex,
    chunks: ChunkReader,
    tombstones: RwLock<Arc<Tombstones>>,
    /// Serialises writers of the tombstones file.
    delete_lock: Mutex<()>,
    size_bytes: AtomicU64,
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block").field("dir", &self.dir).field("index", &self.index).finish()
    }
}

/// A series with at least this many chunks in range has their checksums verified in parallel.
const PAR_CRC_CHUNKS: usize = 32;

impl Block {
    /// Opens the block in `dir`: reads `meta.json`, maps and validates the index (see [`BlockIndex`]),
    /// maps the chunk segments (headers checked; chunk CRCs are checked when chunks are read) and reads the
    /// tombstones (a missing file means none). Any damage found is an [`Error::Corruption`] with the file
    /// and offset; the caller may skip this block and go on with the others.
    pub fn open(dir: &Path) -> Result<Arc<Block>, Error> {
        let meta = BlockMeta::read(dir)?;
        let index = BlockIndex::open(&dir.join(INDEX_FILE))?;
        let chunks = ChunkReader::open(&dir.join(CHUNKS_DIR))?;
        let ts_path = dir.join(TOMBSTONES_FILE);
        let (tombstones, ts_len) = match std::fs::read(&ts_path) {
            Ok(b) => (Tombstones::decode(&b, &ts_path.display().to_string())?, b.len() as u64),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Tombstones::new(), 0),
            Err(e) => return Err(Error::io(&ts_path, e)),
        };
        let meta_len = std::fs::metadata(dir.join(META_FILE)).map(|m| m.len()).unwrap_or(0);
        let size = index.size_bytes() + chunks.size_bytes() + ts_len + meta_len;
        Ok(Arc::new(Block {
            dir: dir.to_path_buf(),
            id: meta.id.clone(),
            meta: RwLock::new(meta),
            index,
            chunks,
            tombstones: RwLock::new(Arc::new(tombstones)),
            delete_lock: Mutex::new(()),
            size_bytes: AtomicU64::new(size),
        }))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    /// A copy of the block's meta (its `stats.num_tombstones` changes when [`Block::delete`] runs).
    pub fn meta(&self) -> BlockMeta {
        self.meta.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The block's inverted index; series refs are dense and in label order.
    pub fn index(&self) -> &BlockIndex {
        &self.index
    }

    /// Bytes the block occupies on disk (index + chunk segments + tombstones + meta.json).
    pub fn size_bytes(&self) -> u64 {
        self.size_bytes.load(Ordering::Relaxed)
    }

    /// Lets the kernel drop this block's mapped pages from the process' resident set; they stay in the
    /// page cache and are faulted back in on the next access, so this never changes what is read. Used by
    /// compaction while it streams through large inputs; callers may use it after a large scan too.
    pub fn release_resident_pages(&self) {
        self.chunks.release_resident();
        self.index.release_resident();
    }

    /// The labels of series `r` (no chunk is read).
    pub fn series_labels(&self, r: SeriesRef) -> Result<Labels, Error> {
        self.index.series_into(r, &mut Vec::new())
    }

    /// Labels and all chunks of series `r`, chunks sorted by `mint_ms`, each CRC-verified; chunk data are
    /// zero-copy slices of the mapping. Tombstones are **not** applied (see [`Block::tombstones`]).
    pub fn series(&self, r: SeriesRef) -> Result<(Labels, Vec<ChunkRef>), Error> {
        self.series_in_range(r, i64::MIN, i64::MAX)
    }

    /// Like [`Block::series`], keeping only the chunks that overlap `[mint_ms, maxt_ms]` (inclusive);
    /// the other chunks are not even read.
    pub fn series_in_range(&self, r: SeriesRef, mint_ms: i64, maxt_ms: i64) -> Result<(Labels, Vec<ChunkRef>), Error> {
        let mut metas = Vec::new();
        let labels = self.index.series_range_into(r, mint_ms, maxt_ms, &mut metas)?;
        // Only from a pool worker (one outside the pool waiting on it could wait behind workers that are
        // themselves blocked).
        if metas.len() >= PAR_CRC_CHUNKS && rayon::current_thread_index().is_some() && rayon::current_num_threads() > 1 {
            // One long series (B1's million points are ~1,000 chunks, 7 MB to check): the checksums
            // are computed on both cores.
            use rayon::prelude::*;
            let out = metas.par_iter().with_min_len(8).map(|m| self.chunk(m)).collect::<Result<Vec<_>, _>>()?;
            return Ok((labels, out));
        }
        let mut out = Vec::with_capacity(metas.len());
        for m in &metas {
            out.push(self.chunk(m)?);
        }
        Ok((labels, out))
    }

    /// Reads one chunk (CRC verified).
    #[inline]
    pub fn chunk(&self, m: &ChunkMeta) -> Result<ChunkRef, Error> {
        self.chunks.chunk(m.chunk_ref, m.mint_ms, m.maxt_ms, self.index.file())
    }

    /// The current tombstones (a snapshot: a later [`Block::delete`] installs a new one).
    pub fn tombstones(&self) -> Arc<Tombstones> {
        self.tombstones.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Adds deleted intervals per series to the block's tombstones. The new tombstones file (old ∪ new
    /// intervals) is written to a temporary file, fsynced and renamed over the old one, then `meta.json`'s
    /// `num_tombstones` is updated the same way; only then do readers see the new tombstones. Refs beyond
    /// the block's series are rejected.
    pub fn delete(&self, deletions: &[(SeriesRef, Interval)]) -> Result<(), Error> {
        if deletions.is_empty() {
            return Ok(());
        }
        let _g = self.delete_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut ts = (*self.tombstones()).clone();
        for &(r, iv) in deletions {
            if r >= self.index.num_series() {
                return Err(Error::Other(format!("delete: series ref {r} out of range in block {}", self.id)));
            }
            ts.add(r, iv);
        }
        let bytes = ts.encode();
        meta::write_file_atomic(&self.dir, TOMBSTONES_FILE, &bytes)?;
        let mut m = self.meta();
        m.stats.num_tombstones = ts.num_intervals() as u64;
        m.write(&self.dir)?;
        *self.meta.write().unwrap_or_else(|e| e.into_inner()) = m;
        let old_len = self.tombstones().encode().len() as u64;
        *self.tombstones.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(ts);
        let size = self.size_bytes().saturating_sub(old_len) + bytes.len() as u64;
        self.size_bytes.store(size, Ordering::Relaxed);
        Ok(())
    }

    /// Records in `meta.json` (atomically) that compacting this block failed on damaged data, so the
    /// planner stops choosing it for leveled compaction (Prometheus' `Compaction.Failed`).
    pub fn mark_compaction_failed(&self) -> Result<(), Error> {
        let _g = self.delete_lock.lock().unwrap_or_else(|e| e.into_inner());
        let mut m = self.meta();
        if m.compaction.failed {
            return Ok(());
        }
        m.compaction.failed = true;
        m.write(&self.dir)?;
        *self.meta.write().unwrap_or_else(|e| e.into_inner()) = m;
        Ok(())
    }

    /// Deletes `[mint_ms, maxt_ms]` (inclusive) of every series matching `matchers` that has a chunk in
    /// that range (mirrors Prometheus' `Block.Delete`). Returns the number of series affected.
    pub fn delete_matching(&self, matchers: &[Matcher], mint_ms: i64, maxt_ms: i64) -> Result<usize, Error> {
        if mint_ms > maxt_ms || !self.meta().overlaps_closed(mint_ms, maxt_ms) {
            return Ok(0);
        }
        let refs = postings_for_matchers(&self.index, matchers)?;
        let mut dels = Vec::new();
        let mut metas = Vec::new();
        for r in refs {
            self.index.series_range_into(r, mint_ms, maxt_ms, &mut metas)?;
            if !metas.is_empty() {
                dels.push((r, Interval::new(mint_ms, maxt_ms)));
            }
        }
        self.delete(&dels)?;
        Ok(dels.len())
    }

    /// All series refs, in label order (a convenience over [`IndexReader::all_postings`]).
    pub fn all_series(&self) -> Result<Vec<SeriesRef>, Error> {
        Ok(self.index.all_postings()?)
    }
}
