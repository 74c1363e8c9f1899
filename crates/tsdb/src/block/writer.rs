//! Writing a block directory: [`write_block`].
//!
//! Crash safety: everything is written into `<parent>/<id>.tmp`, every file is fsynced, then the
//! directory is fsynced, renamed to `<parent>/<id>` and the parent fsynced. A crash leaves either no block
//! or a complete one; a leftover `.tmp` directory is removed by `compact::cleanup_after_crash`.

use super::chunks::ChunkWriter;
use super::index::{ChunkMeta, ChunkMetaEncoder, IndexBuilder};
use super::meta::{new_block_id, sync_dir, BlockMeta, BlockStats, CompactionMeta, META_VERSION};
use super::{CHUNKS_DIR, INDEX_FILE, TOMBSTONES_FILE};
use crate::tombstones::Tombstones;
use crate::Error;
use std::path::{Path, PathBuf};
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
    let compaction = CompactionMeta { level, sources, ..Default::default() };
    write_block_with(parent_dir, mint_ms, maxt_ms, series, compaction, &WriteOptions::default())
}

/// [`write_block`] with the full lineage and writer options (used by compaction and tests).
pub fn write_block_with(
    parent_dir: &Path,
    mint_ms: i64,
    maxt_ms: i64,
    series: impl Iterator<Item = Result<(Labels, Vec<ChunkRef>), Error>>,
    compaction: CompactionMeta,
    opts: &WriteOptions,
) -> Result<Option<BlockMeta>, Error> {
    let mut w = BlockWriter::new(parent_dir, mint_ms, maxt_ms, opts)?;
    let res = (|| {
        for item in series {
            let (labels, chunks) = item?;
            w.start_series(labels)?;
            for c in &chunks {
                w.add_chunk(c)?;
            }
            w.end_series()?;
        }
        Ok(())
    })();
    match res {
        Ok(()) => w.finish(compaction),
        Err(e) => {
            w.abort();
            Err(e)
        }
    }
}

/// A block being written, series by series and chunk by chunk, so that a series with millions of chunks
/// (compaction of long blocks) never has to be held in memory: each chunk goes to its segment as soon as
/// it is added and its meta is kept encoded (a few bytes). Dropping a writer without [`BlockWriter::finish`]
/// removes its temporary directory.
pub(crate) struct BlockWriter {
    parent: PathBuf,
    tmp: PathBuf,
    id: String,
    mint_ms: i64,
    maxt_ms: i64,
    cw: Option<ChunkWriter>,
    ix: IndexBuilder,
    stats: BlockStats,
    prev: Option<Labels>,
    cur: Option<Labels>,
    cur_chunks: ChunkMetaEncoder,
    last_mint: i64,
    done: bool,
}

impl BlockWriter {
    pub(crate) fn new(parent_dir: &Path, mint_ms: i64, maxt_ms: i64, opts: &WriteOptions) -> Result<Self, Error> {
        if mint_ms >= maxt_ms {
            return Err(Error::Other(format!("block range [{mint_ms}, {maxt_ms}) is empty")));
        }
        let id = new_block_id();
        let tmp = parent_dir.join(format!("{id}.tmp"));
        let chunks_dir = tmp.join(CHUNKS_DIR);
        std::fs::create_dir_all(&chunks_dir).map_err(|e| Error::io(&chunks_dir, e))?;
        let cw = ChunkWriter::new(&chunks_dir, opts.max_segment_bytes);
        Ok(Self {
            parent: parent_dir.to_path_buf(),
            tmp,
            id,
            mint_ms,
            maxt_ms,
            cw: Some(cw),
            ix: IndexBuilder::new(),
            stats: BlockStats::default(),
            prev: None,
            cur: None,
            cur_chunks: ChunkMetaEncoder::default(),
            last_mint: i64::MIN,
            done: false,
        })
    }

    /// Starts the next series; labels must sort strictly after the previous series'.
    pub(crate) fn start_series(&mut self, labels: Labels) -> Result<(), Error> {
        if self.cur.is_some() {
            return Err(Error::Other("write_block: start_series inside a series".into()));
        }
        if let Some(p) = &self.prev
            && labels <= *p
        {
            return Err(Error::Other(format!("write_block: series not strictly sorted: {labels} after {p}")));
        }
        self.cur = Some(labels);
        self.cur_chunks.clear();
        self.last_mint = i64::MIN;
        Ok(())
    }

    /// Appends a chunk to the current series (chunks sorted by `mint_ms`, inside the block's range).
    pub(crate) fn add_chunk(&mut self, c: &ChunkRef) -> Result<(), Error> {
        let Some(labels) = &self.cur else {
            return Err(Error::Other("write_block: add_chunk outside a series".into()));
        };
        if c.mint_ms < self.last_mint || c.mint_ms > c.maxt_ms {
            return Err(Error::Other(format!("write_block: chunks of {labels} unsorted or inverted at [{}, {}]", c.mint_ms, c.maxt_ms)));
        }
        if c.mint_ms < self.mint_ms || c.maxt_ms >= self.maxt_ms {
            return Err(Error::Other(format!(
                "write_block: chunk [{}, {}] of {labels} outside the block range [{}, {})",
                c.mint_ms, c.maxt_ms, self.mint_ms, self.maxt_ms
            )));
        }
        self.last_mint = c.mint_ms;
        let cw = self.cw.as_mut().expect("chunk writer lives until finish");
        let r = cw.write(c.encoding, &c.data)?;
        self.cur_chunks.push(ChunkMeta { mint_ms: c.mint_ms, maxt_ms: c.maxt_ms, chunk_ref: r });
        self.stats.num_chunks += 1;
        self.stats.num_samples += chunk_samples(&c.data);
        Ok(())
    }

    /// Ends the current series; a series without chunks is left out of the block.
    pub(crate) fn end_series(&mut self) -> Result<(), Error> {
        let Some(labels) = self.cur.take() else {
            return Err(Error::Other("write_block: end_series outside a series".into()));
        };
        if !self.cur_chunks.is_empty() {
            self.ix.add_series(&labels, &self.cur_chunks)?;
            self.stats.num_series += 1;
        }
        self.prev = Some(labels);
        Ok(())
    }

    /// Writes index, tombstones and meta, fsyncs and renames the block into place. `None` (and nothing on
    /// disk) when no series had a chunk.
    pub(crate) fn finish(mut self, mut compaction: CompactionMeta) -> Result<Option<BlockMeta>, Error> {
        let res = self.finish_inner(&mut compaction);
        if !matches!(res, Ok(Some(_))) {
            self.abort();
        }
        self.done = true;
        res
    }

    fn finish_inner(&mut self, compaction: &mut CompactionMeta) -> Result<Option<BlockMeta>, Error> {
        if self.cur.is_some() {
            return Err(Error::Other("write_block: finish inside a series".into()));
        }
        if let Some(cw) = self.cw.take() {
            cw.finish()?;
        }
        if self.stats.num_series == 0 {
            return Ok(None);
        }
        let tmp = self.tmp.clone();
        std::mem::replace(&mut self.ix, IndexBuilder::new()).write(&tmp.join(INDEX_FILE))?;
        super::meta::write_file_atomic(&tmp, TOMBSTONES_FILE, &Tombstones::new().encode())?;
        sync_dir(&tmp.join(CHUNKS_DIR))?;
        if compaction.sources.is_empty() {
            compaction.sources.push(self.id.clone());
        }
        compaction.sources.sort();
        compaction.sources.dedup();
        let meta = BlockMeta {
            id: self.id.clone(),
            mint_ms: self.mint_ms,
            maxt_ms: self.maxt_ms,
            stats: self.stats.clone(),
            compaction: std::mem::take(compaction),
            version: META_VERSION,
        };
        meta.write(&tmp)?;
        sync_dir(&tmp)?;
        let dst = self.parent.join(&self.id);
        std::fs::rename(&tmp, &dst).map_err(|e| Error::io(&dst, e))?;
        sync_dir(&self.parent)?;
        Ok(Some(meta))
    }

    /// Gives up: removes the temporary directory.
    pub(crate) fn abort(&mut self) {
        self.cw = None;
        let _ = std::fs::remove_dir_all(&self.tmp);
        self.done = true;
    }
}

impl Drop for BlockWriter {
    fn drop(&mut self) {
        if !self.done {
            self.abort();
        }
    }
}

/// Sample count of an encoded chunk: every Prometheus chunk encoding starts with a big-endian u16 count.
pub(crate) fn chunk_samples(data: &[u8]) -> u64 {
    match data {
        [a, b, ..] => u64::from(u16::from_be_bytes([*a, *b])),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::ChunkEncoding;

    fn chunk(t: i64) -> ChunkRef {
        ChunkRef { mint_ms: t, maxt_ms: t + 1, encoding: ChunkEncoding::Xor, data: bytes::Bytes::from_static(&[0, 2, 9, 9]) }
    }

    #[test]
    fn dropped_or_misused_writer_leaves_nothing_behind() {
        let dir = tempfile::tempdir().expect("tempdir");
        let count = || std::fs::read_dir(dir.path()).expect("ls").count();
        {
            let mut w = BlockWriter::new(dir.path(), 0, 100, &WriteOptions::default()).expect("new");
            w.start_series(Labels::from_pairs([("a", "1")])).expect("start");
            w.add_chunk(&chunk(5)).expect("chunk");
            assert_eq!(count(), 1, "the .tmp directory exists while writing");
        }
        assert_eq!(count(), 0, "dropping an unfinished writer removes its .tmp directory");

        let mut w = BlockWriter::new(dir.path(), 0, 100, &WriteOptions::default()).expect("new");
        assert!(w.add_chunk(&chunk(5)).is_err(), "chunk outside a series");
        w.start_series(Labels::from_pairs([("a", "1")])).expect("start");
        assert!(w.start_series(Labels::from_pairs([("a", "2")])).is_err(), "nested series");
        w.add_chunk(&chunk(5)).expect("chunk");
        assert!(w.add_chunk(&chunk(4)).is_err(), "unsorted chunk");
        assert!(w.add_chunk(&chunk(99)).is_err(), "chunk reaching maxt (exclusive)");
        w.end_series().expect("end");
        assert!(w.start_series(Labels::from_pairs([("a", "1")])).is_err(), "same labels again");
        w.start_series(Labels::from_pairs([("b", "1")])).expect("start");
        w.end_series().expect("a series without chunks is skipped");
        let meta = w.finish(CompactionMeta { level: 1, ..Default::default() }).expect("finish").expect("block");
        assert_eq!((meta.stats.num_series, meta.stats.num_chunks, meta.stats.num_samples), (1, 1, 2));
        assert_eq!(count(), 1);
        assert!(dir.path().join(&meta.id).join(INDEX_FILE).exists());
    }
}
