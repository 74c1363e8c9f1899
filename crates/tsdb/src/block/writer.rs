//! Writing a block directory: [`write_block`].
//!
//! Crash safety: everything is written into `<parent>/<id>.tmp`, every file is fsynced, then the
//! directory is fsynced, renamed to `<parent>/<id>` and the parent fsynced. A crash leaves either no block
//! or a complete one; a leftover `.tmp` directory is removed by `compact::cleanup_after_crash`.

use super::chunks::ChunkWriter;
use super::index::{ChunkMeta, IndexBuilder};
use super::meta::{new_block_id, sync_dir, BlockMeta, BlockStats, CompactionMeta, META_VERSION};
use super::{CHUNKS_DIR, INDEX_FILE, TOMBSTONES_FILE};
use crate::tombstones::Tombstones;
use crate::Error;
use std::path::Path;
use tessera_model::{ChunkRef, Labels};

/// Knobs of the block writer (tests shrink the segment size to exercise many segments).
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Upper bound of a chunk segment file (clamped to [`super::chunks::MAX_SEGMENT_BYTES`]).
    pub max_segment_bytes: u64,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self { max_segment_bytes: super::chunks::MAX_SEGMENT_BYTES }
    }
}

/// Writes a block holding `series` under `parent_dir` and returns its meta, or `Ok(None)` when no series
/// has any chunk (an empty block is never written; nothing is left on disk).
///
/// Contract:
/// - `series` arrive strictly sorted by labels (`Labels`' `Ord`), each label set at most once; otherwise
///   an error is returned and nothing is left behind. An `Err` from the iterator aborts the write.
/// - A series' chunks are sorted by `mint_ms`; every chunk lies inside `[mint_ms, maxt_ms)` (`maxt_ms` is
///   exclusive, as in `meta.json`). Series without chunks are skipped.
/// - Chunks are stored byte for byte as given (their `data` is the encoding's own bytes, e.g. an XOR
///   chunk with its 2-byte sample count, which is also what `stats.num_samples` is summed from).
/// - `level` is 1 for a block cut from the head; `sources` may be empty, then the block's own id is its
///   only source (as for Prometheus' level-1 blocks).
pub fn write_block(
    parent_dir: &Path,
    mint_ms: i64,
    maxt_ms: i64,
    series: impl Iterator<Item = Result<(Labels, Vec<ChunkRef>), Error>>,
    level: u32,
    sources: Vec<String>,
) -> Result<Option<BlockMeta>, Error> {
    let compaction = CompactionMeta { level, sources, parents: Vec::new() };
    write_block_with(parent_dir, mint_ms, maxt_ms, series, compaction, &WriteOptions::default())
}

/// [`write_block`] with the full lineage and writer options (used by compaction and tests).
pub fn write_block_with(
    parent_dir: &Path,
    mint_ms: i64,
    maxt_ms: i64,
    series: impl Iterator<Item = Result<(Labels, Vec<ChunkRef>), Error>>,
    mut compaction: CompactionMeta,
    opts: &WriteOptions,
) -> Result<Option<BlockMeta>, Error> {
    if mint_ms >= maxt_ms {
        return Err(Error::Other(format!("block range [{mint_ms}, {maxt_ms}) is empty")));
    }
    let id = new_block_id();
    let tmp = parent_dir.join(format!("{id}.tmp"));
    let res = write_into(&tmp, &id, mint_ms, maxt_ms, series, opts);
    let stats = match res {
        Ok(Some(stats)) => stats,
        Ok(None) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Ok(None);
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            return Err(e);
        }
    };
    if compaction.sources.is_empty() {
        compaction.sources.push(id.clone());
    }
    compaction.sources.sort();
    compaction.sources.dedup();
    let meta = BlockMeta { id: id.clone(), mint_ms, maxt_ms, stats, compaction, version: META_VERSION };
    let finish = || -> Result<(), Error> {
        meta.write(&tmp)?;
        sync_dir(&tmp)?;
        let dst = parent_dir.join(&id);
        std::fs::rename(&tmp, &dst).map_err(|e| Error::io(&dst, e))?;
        sync_dir(parent_dir)
    };
    if let Err(e) = finish() {
        let _ = std::fs::remove_dir_all(&tmp);
        return Err(e);
    }
    Ok(Some(meta))
}

/// Writes chunks, index and tombstones into `tmp`; `None` when there was no series with chunks.
fn write_into(
    tmp: &Path,
    _id: &str,
    mint_ms: i64,
    maxt_ms: i64,
    series: impl Iterator<Item = Result<(Labels, Vec<ChunkRef>), Error>>,
    opts: &WriteOptions,
) -> Result<Option<BlockStats>, Error> {
    let chunks_dir = tmp.join(CHUNKS_DIR);
    std::fs::create_dir_all(&chunks_dir).map_err(|e| Error::io(&chunks_dir, e))?;
    let mut cw = ChunkWriter::new(&chunks_dir, opts.max_segment_bytes);
    let mut ix = IndexBuilder::new();
    let mut stats = BlockStats::default();
    let mut prev: Option<Labels> = None;
    let mut metas = Vec::new();
    for item in series {
        let (labels, chunks) = item?;
        if let Some(p) = &prev
            && labels <= *p
        {
            return Err(Error::Other(format!("write_block: series not strictly sorted: {labels} after {p}")));
        }
        if chunks.is_empty() {
            prev = Some(labels);
            continue;
        }
        metas.clear();
        let mut last_mint = i64::MIN;
        for c in &chunks {
            if c.mint_ms < last_mint || c.mint_ms > c.maxt_ms {
                return Err(Error::Other(format!("write_block: chunks of {labels} unsorted or inverted at [{}, {}]", c.mint_ms, c.maxt_ms)));
            }
            if c.mint_ms < mint_ms || c.maxt_ms >= maxt_ms {
                return Err(Error::Other(format!(
                    "write_block: chunk [{}, {}] of {labels} outside the block range [{mint_ms}, {maxt_ms})",
                    c.mint_ms, c.maxt_ms
                )));
            }
            last_mint = c.mint_ms;
            let r = cw.write(c.encoding, &c.data)?;
            metas.push(ChunkMeta { mint_ms: c.mint_ms, maxt_ms: c.maxt_ms, chunk_ref: r });
            stats.num_chunks += 1;
            stats.num_samples += chunk_samples(&c.data);
        }
        ix.add_series(&labels, &metas)?;
        stats.num_series += 1;
        prev = Some(labels);
    }
    cw.finish()?;
    if stats.num_series == 0 {
        return Ok(None);
    }
    ix.write(&tmp.join(INDEX_FILE))?;
    super::meta::write_file_atomic(tmp, TOMBSTONES_FILE, &Tombstones::new().encode())?;
    sync_dir(&chunks_dir)?;
    Ok(Some(stats))
}

/// Sample count of an encoded chunk: every Prometheus chunk encoding starts with a big-endian u16 count.
pub(crate) fn chunk_samples(data: &[u8]) -> u64 {
    match data {
        [a, b, ..] => u64::from(u16::from_be_bytes([*a, *b])),
        _ => 0,
    }
}
