//! Writing a block directory: [`write_block`].
//!
//! Crash safety: everything is written into `<parent>/<id>.tmp`, every file is fsynced, then the
//! directory is fsynced, renamed to `<parent>/<id>` and the parent fsynced. A crash leaves either no block
//! or a complete one; a leftover `.tmp` directory is removed by `compact::cleanup_after_crash`.
//!
//! Cold codec: with [`ColdCodec::Dense`] (the database's default, see [`WriteOptions::cold_codec`]) the
//! writer, not its callers, turns runs of a series' consecutive XOR chunks (and small Decimal ones, which a
//! head stores its closed chunks as) into one `Decimal` chunk (when
//! every value is an exact short decimal) or `Dense` chunk, whichever is smaller, of up to
//! [`DENSE_CHUNK_SAMPLES`] samples when that saves at least 1/16 of the bytes. Doing it here covers
//! both the head cut and compaction, and keeps memory flat: only one run's chunk handles and decoded
//! samples are held at a time.

use super::chunks::ChunkWriter;
use super::index::{ChunkMeta, ChunkMetaEncoder, IndexBuilder};
use super::meta::{new_block_id, sync_dir, BlockMeta, BlockStats, CompactionMeta, META_VERSION};
use super::{CHUNKS_DIR, INDEX_FILE, TOMBSTONES_FILE};
use crate::options::ColdCodec;
use crate::tombstones::Tombstones;
use crate::Error;
use std::path::{Path, PathBuf};
use tessera_encoding::DenseEncoder;
use tessera_model::{ChunkEncoding, ChunkRef, Labels, Sample};

/// Most samples the writer puts in one Dense chunk. Measured on B1's random doubles (1 ms steps):
/// 120 samples → 7.06 bytes/point, 480 → 6.87, 960 → 6.83, 4096 → 6.80, against XOR's 7.94; Dense
/// decodes ~25 % faster than XOR per sample from 960 on. Longer chunks make a point query decode more
/// samples it does not need, so the writer stops at 1024 (eight full 120-sample head chunks).
pub const DENSE_CHUNK_SAMPLES: usize = 1024;

/// Decimal chunks of at most this many samples (a head's closed chunks hold up to
/// `head::MERGED_CHUNK_SAMPLES`, 480) are merged into runs like XOR chunks; larger ones (a block's, 720 for
/// a 2 h range at 10 s) are copied as they are.
const SMALL_DECIMAL_SAMPLES: usize = 512;

/// Bytes a chunk costs besides its data: the record's encoding byte, length and CRC (6–8 bytes) and its
/// index entry (a few bytes). Used when comparing one Dense chunk with the XOR chunks it would replace.
const CHUNK_OVERHEAD_BYTES: usize = 10;

/// Knobs of the block writer (tests shrink the segment size to exercise many segments).
#[derive(Debug, Clone)]
pub struct WriteOptions {
    /// Upper bound of a chunk segment file (clamped to [`super::chunks::MAX_SEGMENT_BYTES`]).
    pub max_segment_bytes: u64,
    /// Whether runs of XOR chunks are re-encoded as Decimal or Dense. Default [`ColdCodec::Xor`]: the block API
    /// ([`write_block`], `compact::compact`) stores chunks byte for byte unless asked; the database passes
    /// its [`crate::Options::cold_codec`] (default Dense) through [`WriteOptions::from_db_options`].
    pub cold_codec: ColdCodec,
    /// Most samples per Dense chunk (default [`DENSE_CHUNK_SAMPLES`]; clamped to 1..=2^20).
    pub dense_chunk_samples: usize,
}

impl Default for WriteOptions {
    fn default() -> Self {
        Self {
            max_segment_bytes: super::chunks::MAX_SEGMENT_BYTES,
            cold_codec: ColdCodec::Xor,
            dense_chunk_samples: DENSE_CHUNK_SAMPLES,
        }
    }
}

impl WriteOptions {
    /// The writer options a database's [`crate::Options`] ask for.
    pub fn from_db_options(o: &crate::Options) -> Self {
        Self { cold_codec: o.cold_codec, ..Self::default() }
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
///   chunk with its 2-byte sample count, which is also what `stats.num_samples` is summed from), except
///   that with [`ColdCodec::Dense`] consecutive XOR chunks may be stored as one Dense chunk with the
///   same samples (see the module docs). [`write_block`] uses the default options (no re-encoding).
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
    cold_codec: ColdCodec,
    dense_max: usize,
    /// XOR chunks of the current series waiting to be written, maybe as one Dense chunk.
    pending: Vec<ChunkRef>,
    pending_samples: usize,
    dense: DenseEncoder,
    scratch: Vec<Sample>,
    dense_buf: Vec<u8>,
    decimal: tessera_encoding::DecimalEncoder,
    decimal_buf: Vec<u8>,
    derived: Option<super::meta::Derived>,
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
            ix: IndexBuilder::new(mint_ms),
            stats: BlockStats::default(),
            prev: None,
            cur: None,
            cur_chunks: ChunkMetaEncoder::new(mint_ms),
            last_mint: i64::MIN,
            done: false,
            cold_codec: opts.cold_codec,
            dense_max: opts.dense_chunk_samples.clamp(1, tessera_encoding::dense::MAX_DENSE_SAMPLES),
            pending: Vec::new(),
            pending_samples: 0,
            dense: DenseEncoder::new(),
            scratch: Vec::new(),
            dense_buf: Vec::new(),
            decimal: tessera_encoding::DecimalEncoder::default(),
            decimal_buf: Vec::new(),
            derived: None,
        })
    }

    /// Marks the block as a downsampling tier's (recorded in `meta.json`).
    pub(crate) fn set_derived(&mut self, d: super::meta::Derived) {
        self.derived = Some(d);
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
        if c.encoding == ChunkEncoding::DecimalOpen {
            // The head's open decimal chunks (a cut or snapshot takes the open chunk as it is) never go into
            // blocks as such: as XOR, which runs join and recode.
            for x in tessera_encoding::to_xor_chunks(c, usize::from(u16::MAX)).map_err(|e| Error::Other(format!("write_block: {e}")))? {
                self.add_chunk(&x)?;
            }
            return Ok(());
        }
        self.last_mint = c.mint_ms;
        let n = chunk_samples(c.encoding, &c.data) as usize;
        // XOR chunks, and the small Decimal chunks a head stores its closed chunks as, join runs.
        let joins = c.encoding == ChunkEncoding::Xor || (c.encoding == ChunkEncoding::Decimal && n <= SMALL_DECIMAL_SAMPLES);
        if self.cold_codec == ColdCodec::Dense && joins {
            // A run holds non-overlapping chunks only (one Dense chunk must be in time order) and stops
            // at the sample limit.
            if let Some(last) = self.pending.last()
                && (c.mint_ms <= last.maxt_ms || self.pending_samples + n > self.dense_max)
            {
                self.flush_pending()?;
            }
            self.pending.push(c.clone());
            self.pending_samples += n;
            return Ok(());
        }
        self.flush_pending()?;
        self.write_chunk(c.encoding, &c.data, c.mint_ms, c.maxt_ms)
    }

    fn write_chunk(&mut self, encoding: ChunkEncoding, data: &[u8], mint_ms: i64, maxt_ms: i64) -> Result<(), Error> {
        let cw = self.cw.as_mut().expect("chunk writer lives until finish");
        let r = cw.write(encoding, data)?;
        self.cur_chunks.push(ChunkMeta { mint_ms, maxt_ms, chunk_ref: r });
        self.stats.num_chunks += 1;
        self.stats.num_samples += chunk_samples(encoding, data);
        Ok(())
    }

    /// Writes the pending XOR run: as one Decimal or Dense chunk (the smaller) when that is at least 1/16
    /// smaller (remote read must convert both back to XOR, so a marginal gain is not worth it), else as it
    /// came. A chunk that
    /// does not decode is written unchanged (its reader reports the damage, as without re-encoding).
    fn flush_pending(&mut self) -> Result<(), Error> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let pending = std::mem::take(&mut self.pending);
        self.pending_samples = 0;
        self.scratch.clear();
        let mut xor_bytes = 0usize;
        let mut decoded = true;
        for c in &pending {
            xor_bytes += c.data.len() + CHUNK_OVERHEAD_BYTES;
            if tessera_encoding::decode_chunk_range_into(c, i64::MIN, i64::MAX, &mut self.scratch).is_err() {
                decoded = false;
                break;
            }
        }
        // The smaller of Decimal (when every value is an exact short decimal) and Dense, if it beats XOR.
        let mut choice: Option<ChunkEncoding> = None;
        if decoded && !self.scratch.is_empty() {
            // A run that is Decimal already (the head's chunks) is merged whenever that is smaller at
            // all (remote read converts it either way); a lone chunk that would come out the same is
            // written as it came.
            let all_decimal = pending.iter().all(|c| c.encoding == ChunkEncoding::Decimal);
            let limit = if all_decimal { xor_bytes - 1 } else { xor_bytes - xor_bytes / 16 };
            self.dense_buf.clear();
            self.dense.encode_into(&self.scratch, &mut self.dense_buf);
            if self.dense_buf.len() + CHUNK_OVERHEAD_BYTES <= limit {
                choice = Some(ChunkEncoding::Dense);
            }
            self.decimal_buf.clear();
            if self.decimal.encode_into(&self.scratch, &mut self.decimal_buf)
                && self.decimal_buf.len() + CHUNK_OVERHEAD_BYTES <= limit
                && (choice.is_none() || self.decimal_buf.len() < self.dense_buf.len())
            {
                choice = Some(ChunkEncoding::Decimal);
            }
        }
        if let Some(enc) = choice {
            let (mint, maxt) = (pending[0].mint_ms, pending[pending.len() - 1].maxt_ms);
            let buf = std::mem::take(if enc == ChunkEncoding::Dense { &mut self.dense_buf } else { &mut self.decimal_buf });
            let r = self.write_chunk(enc, &buf, mint, maxt);
            *(if enc == ChunkEncoding::Dense { &mut self.dense_buf } else { &mut self.decimal_buf }) = buf;
            r?;
        } else {
            for c in &pending {
                self.write_chunk(c.encoding, &c.data, c.mint_ms, c.maxt_ms)?;
            }
        }
        // Keep the vector's capacity for the next run.
        self.pending = pending;
        self.pending.clear();
        Ok(())
    }

    /// Ends the current series; a series without chunks is left out of the block.
    pub(crate) fn end_series(&mut self) -> Result<(), Error> {
        if self.cur.is_none() {
            return Err(Error::Other("write_block: end_series outside a series".into()));
        }
        self.flush_pending()?;
        let labels = self.cur.take().expect("checked above");
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
        std::mem::replace(&mut self.ix, IndexBuilder::new(self.mint_ms)).write(&tmp.join(INDEX_FILE))?;
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
            derived: self.derived.take(),
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

/// Sample count of an encoded chunk: every Prometheus chunk encoding (and XorSt) starts with a big-endian
/// u16 count; a Dense chunk has a version byte and a uvarint count.
pub(crate) fn chunk_samples(encoding: ChunkEncoding, data: &[u8]) -> u64 {
    if encoding == ChunkEncoding::Dense {
        return tessera_encoding::dense_sample_count(data).unwrap_or(0);
    }
    if encoding == ChunkEncoding::Decimal {
        return tessera_encoding::decimal_sample_count(data).unwrap_or(0);
    }
    if encoding == ChunkEncoding::Buckets {
        // A tier block counts buckets.
        return tessera_encoding::buckets::buckets_header(data).map_or(0, |(_, n)| n);
    }
    if encoding == ChunkEncoding::HistBuckets {
        return tessera_encoding::hbuckets::hbuckets_header(data).map_or(0, |(_, n)| n);
    }
    match data {
        [a, b, ..] => u64::from(u16::from_be_bytes([*a, *b])),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn random_chunk(t0: i64, n: i64) -> ChunkRef {
        let s: Vec<Sample> = (t0..t0 + n)
            .map(|t| {
                let r = (t as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15).rotate_left(29).wrapping_mul(0xBF58_476D_1CE4_E5B9);
                Sample::new(t, (r >> 11) as f64 / (1u64 << 53) as f64 * 100.0)
            })
            .collect();
        ChunkRef {
            mint_ms: t0,
            maxt_ms: t0 + n - 1,
            encoding: ChunkEncoding::Xor,
            data: bytes::Bytes::from(tessera_encoding::encode_xor(&s)),
        }
    }

    #[test]
    fn dense_runs_stop_at_the_limit_overlaps_and_other_encodings() {
        let dir = tempfile::tempdir().expect("tempdir");
        let opts = WriteOptions { cold_codec: ColdCodec::Dense, dense_chunk_samples: 250, ..WriteOptions::default() };
        let mut w = BlockWriter::new(dir.path(), 0, 10_000, &opts).expect("new");
        let st: Vec<Sample> = (1000..1010).map(|t| Sample::new(t, 1.0)).collect();
        let st_chunk = ChunkRef {
            mint_ms: 1000,
            maxt_ms: 1009,
            encoding: ChunkEncoding::XorSt,
            data: bytes::Bytes::from(tessera_encoding::encode_xor_st(&st, &[5; 10])),
        };
        let counter: Vec<Sample> = (3000..3120).map(|t| Sample::new(t, (t / 10) as f64)).collect();
        let input = vec![
            random_chunk(0, 120),
            random_chunk(120, 120),
            random_chunk(240, 120), // 360 > 250 samples: a second run starts here
            random_chunk(360, 5),
            st_chunk.clone(),       // XorSt: written as is, ends the run
            random_chunk(2000, 100),
            random_chunk(2050, 150), // overlaps the previous chunk: a new run
            ChunkRef {
                mint_ms: 3000,
                maxt_ms: 3119,
                encoding: ChunkEncoding::Xor,
                data: bytes::Bytes::from(tessera_encoding::encode_xor(&counter)),
            },
        ];
        w.start_series(Labels::from_pairs([("a", "1")])).expect("start");
        for c in &input {
            w.add_chunk(c).expect("add");
        }
        w.end_series().expect("end");
        let meta = w.finish(CompactionMeta { level: 1, ..Default::default() }).expect("finish").expect("block");
        let b = crate::block::Block::open(&dir.path().join(&meta.id)).expect("open");
        let refs = b.all_series().expect("all");
        assert_eq!(refs.len(), 1);
        let (_, got) = b.series(refs[0]).expect("series");
        let encs: Vec<ChunkEncoding> = got.iter().map(|c| c.encoding).collect();
        // The counter (slowly growing integers) is smaller as Dense than XOR only marginally, and much
        // smaller as Decimal; the overlapping pair [2000, 2099], [2050, 2199] becomes two single-chunk runs
        // (the second ends at the sample limit). Random doubles are no exact short decimals: Dense.
        use ChunkEncoding::{Decimal, Dense, XorSt};
        assert_eq!(encs, [Dense, Dense, XorSt, Dense, Dense, Decimal]);
        let bounds: Vec<(i64, i64)> = got.iter().map(|c| (c.mint_ms, c.maxt_ms)).collect();
        assert_eq!(bounds, [(0, 239), (240, 364), (1000, 1009), (2000, 2099), (2050, 2199), (3000, 3119)]);
        assert_eq!(got[2].data, st_chunk.data);
        let decode = |cs: &[ChunkRef]| {
            let mut v = Vec::new();
            for c in cs {
                tessera_encoding::decode_chunk_range_into(c, i64::MIN, i64::MAX, &mut v).expect("decodes");
            }
            v.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>()
        };
        assert_eq!(decode(&got), decode(&input));
        assert_eq!(meta.stats.num_samples, 365 + 10 + 250 + 120);
        assert_eq!(meta.stats.num_chunks, 6);
    }
}
