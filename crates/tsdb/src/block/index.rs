//! The block index file: symbols, series (labels as symbol references + chunk metas), postings lists and a
//! postings offset table, closed by a table of contents. Format: `docs/format/index.md`.
//!
//! Series references are dense (`0..num_series`) and follow label order, so postings lists are sorted by
//! labels as well as by reference, and "series refs in label order" holds for every reader.
//!
//! What is verified when: on [`BlockIndex::open`] the TOC, the symbol table, the series offset table and
//! the postings offset table are checksummed and parsed (they are small next to the rest and every look-up
//! goes through them); each series entry and each postings list carries its own CRC32C, checked when it is
//! read. Any failure is an [`Error::Corruption`] naming the file and the byte offset.

use super::bin::{crc32c, put_u32, put_u64, put_uvarint, put_varint, Dec};
use super::mmap::{map_file, Mapped};
use crate::index::{IndexReader, IndexResult, SeriesRef};
use crate::Error;
use bytes::Bytes;
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::Path;
use tessera_model::{Label, Labels};

/// Magic number at the start of the index ("TSIX").
pub const INDEX_MAGIC: u32 = 0x5453_4958;
/// Index format version written. Version 1 (blocks before 2026-11-26) is still read: it had a skip table in
/// every series entry, absolute group-start `mint`s and postings as big-endian u32 arrays.
pub const INDEX_VERSION: u8 = 2;
const HEADER_BYTES: u64 = 5;
/// Size of the table of contents at the end of the file: five u64 offsets and a CRC32C.
pub const TOC_BYTES: usize = 5 * 8 + 4;

/// Where one chunk of a series lives and which time span it covers (both inclusive).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkMeta {
    pub mint_ms: i64,
    pub maxt_ms: i64,
    /// Segment sequence number (upper 32 bits) and byte offset (lower 32 bits).
    pub chunk_ref: u64,
}

/// Encodes one series' chunk metas incrementally, in the layout of a series entry (see
/// docs/format/index.md): the first as (mint, span, ref), the others as deltas from the previous one.
pub(crate) struct ChunkMetaEncoder {
    /// The block's `mint`: group-start `mint`s are stored as differences from it.
    base: i64,
    buf: Vec<u8>,
    /// One (cumulative max maxt, byte offset in `buf`) per group of [`SKIP_EVERY`] chunks.
    skips: Vec<(i64, u64)>,
    count: u32,
    prev: Option<ChunkMeta>,
}

/// Every this many chunks a series entry restarts its delta encoding and gets a skip-table entry, so that a
/// time-range read binary-searches to the right group instead of decoding every chunk meta.
pub const SKIP_EVERY: u32 = 64;

impl ChunkMetaEncoder {
    /// An encoder for the series of a block starting at `base` (its `mint_ms`).
    pub(crate) fn new(base: i64) -> Self {
        Self { base, buf: Vec::new(), skips: Vec::new(), count: 0, prev: None }
    }

    pub(crate) fn clear(&mut self) {
        self.buf.clear();
        self.skips.clear();
        self.count = 0;
        self.prev = None;
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub(crate) fn push(&mut self, c: ChunkMeta) {
        let body = &mut self.buf;
        match self.prev {
            Some(p) if !self.count.is_multiple_of(SKIP_EVERY) => {
                put_varint(body, c.mint_ms.wrapping_sub(p.maxt_ms));
                put_uvarint(body, c.maxt_ms.wrapping_sub(c.mint_ms) as u64);
                put_varint(body, c.chunk_ref.wrapping_sub(p.chunk_ref) as i64);
            }
            _ => {
                // A group starts: absolute values, and a skip entry carrying the running max of maxt.
                let cummax = self.skips.last().map_or(i64::MIN, |s| s.0);
                self.skips.push((cummax, body.len() as u64));
                put_varint(body, c.mint_ms.wrapping_sub(self.base));
                put_uvarint(body, c.maxt_ms.wrapping_sub(c.mint_ms) as u64);
                put_uvarint(body, c.chunk_ref);
            }
        }
        if let Some(last) = self.skips.last_mut() {
            last.0 = last.0.max(c.maxt_ms);
        }
        self.count += 1;
        self.prev = Some(c);
    }

    /// Appends `#chunks | skip table | metas` (the chunk part of a series entry) to `out`; a series of at
    /// most [`SKIP_EVERY`] chunks (one group) has no skip table.
    fn encode_into(&self, out: &mut Vec<u8>) {
        put_uvarint(out, u64::from(self.count));
        let skips: &[(i64, u64)] = if self.count > SKIP_EVERY { &self.skips } else { &[] };
        for &(m, off) in skips {
            put_u64(out, m as u64);
            put_u64(out, off);
        }
        out.extend_from_slice(&self.buf);
    }
}

/// Writes an index from series given in label order. Collects everything in memory first (symbols must be
/// known before the series that refer to them), interning strings so each series costs 8 bytes per label.
pub(crate) struct IndexBuilder {
    /// The block's `mint` (see [`ChunkMetaEncoder`]), stored in the series offset table.
    base: i64,
    sym_ids: HashMap<String, u32>,
    syms: Vec<String>,
    /// Flat (name, value) provisional symbol ids of all series; `label_starts[i]..label_starts[i+1]`.
    label_syms: Vec<(u32, u32)>,
    label_starts: Vec<u32>,
    /// Each series' chunk metas, already encoded as they appear in its entry (a few bytes per chunk
    /// instead of 24, which matters for blocks holding millions of chunks); `chunk_starts` delimit them.
    chunk_bytes: Vec<u8>,
    chunk_starts: Vec<usize>,
    postings: HashMap<(u32, u32), Vec<SeriesRef>>,
}

impl IndexBuilder {
    pub(crate) fn new(base: i64) -> Self {
        Self {
            base,
            sym_ids: HashMap::new(),
            syms: Vec::new(),
            label_syms: Vec::new(),
            label_starts: vec![0],
            chunk_bytes: Vec::new(),
            chunk_starts: vec![0],
            postings: HashMap::new(),
        }
    }

    pub(crate) fn num_series(&self) -> usize {
        self.label_starts.len() - 1
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&id) = self.sym_ids.get(s) {
            return id;
        }
        let id = self.syms.len() as u32;
        self.syms.push(s.to_string());
        self.sym_ids.insert(s.to_string(), id);
        id
    }

    /// Adds the next series (the caller guarantees label order) with its chunk metas encoded by a
    /// [`ChunkMetaEncoder`].
    pub(crate) fn add_series(&mut self, labels: &Labels, chunks: &ChunkMetaEncoder) -> Result<(), Error> {
        let r = self.num_series();
        if r >= u32::MAX as usize {
            return Err(Error::Other("too many series for one block".into()));
        }
        for l in labels.iter() {
            let n = self.intern(l.name);
            let v = self.intern(l.value);
            self.label_syms.push((n, v));
            self.postings.entry((n, v)).or_default().push(r as SeriesRef);
        }
        self.label_starts.push(self.label_syms.len() as u32);
        chunks.encode_into(&mut self.chunk_bytes);
        self.chunk_starts.push(self.chunk_bytes.len());
        Ok(())
    }

    /// Writes the index file at `path` and fsyncs it.
    pub(crate) fn write(self, path: &Path) -> Result<(), Error> {
        let io = |e| Error::io(path, e);
        let f = File::create(path).map_err(io)?;
        let mut w = Out { w: BufWriter::with_capacity(1 << 20, f), pos: 0 };

        let mut buf = Vec::with_capacity(256);
        put_u32(&mut buf, INDEX_MAGIC);
        buf.push(INDEX_VERSION);
        w.put(&buf).map_err(io)?;

        // Symbols, sorted; remap provisional ids to final ones.
        let mut order: Vec<u32> = (0..self.syms.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| self.syms[a as usize].cmp(&self.syms[b as usize]));
        let mut remap = vec![0u32; self.syms.len()];
        for (fin, &prov) in order.iter().enumerate() {
            remap[prov as usize] = fin as u32;
        }
        let toc_symbols = w.pos;
        buf.clear();
        put_u32(&mut buf, order.len() as u32);
        for &prov in &order {
            let s = &self.syms[prov as usize];
            put_uvarint(&mut buf, s.len() as u64);
            buf.extend_from_slice(s.as_bytes());
        }
        w.section(&buf).map_err(io)?;

        // Series entries.
        let toc_series = w.pos;
        let n = self.num_series();
        let mut offsets = Vec::with_capacity(n);
        let mut body = Vec::with_capacity(256);
        for i in 0..n {
            offsets.push(w.pos);
            body.clear();
            let labels = &self.label_syms[self.label_starts[i] as usize..self.label_starts[i + 1] as usize];
            put_uvarint(&mut body, labels.len() as u64);
            for &(nm, v) in labels {
                put_uvarint(&mut body, u64::from(remap[nm as usize]));
                put_uvarint(&mut body, u64::from(remap[v as usize]));
            }
            body.extend_from_slice(&self.chunk_bytes[self.chunk_starts[i]..self.chunk_starts[i + 1]]);
            buf.clear();
            put_uvarint(&mut buf, body.len() as u64);
            buf.extend_from_slice(&body);
            put_u32(&mut buf, crc32c(&body));
            w.put(&buf).map_err(io)?;
        }

        // Series offset table.
        let toc_series_table = w.pos;
        buf.clear();
        put_u32(&mut buf, n as u32);
        put_u64(&mut buf, self.base as u64);
        for &o in &offsets {
            put_u64(&mut buf, o);
        }
        w.section(&buf).map_err(io)?;

        // Postings: the all-series list first, then one list per label pair in (name, value) order.
        let toc_postings = w.pos;
        let all: Vec<SeriesRef> = (0..n as u32).collect();
        write_postings(&mut w, &mut buf, &all).map_err(io)?;
        let mut by_name: BTreeMap<&str, BTreeMap<&str, &Vec<SeriesRef>>> = BTreeMap::new();
        for ((nm, v), list) in &self.postings {
            by_name.entry(self.syms[*nm as usize].as_str()).or_default().insert(self.syms[*v as usize].as_str(), list);
        }
        let mut table = Vec::new();
        put_uvarint(&mut table, by_name.len() as u64);
        for (name, values) in &by_name {
            put_uvarint(&mut table, name.len() as u64);
            table.extend_from_slice(name.as_bytes());
            put_uvarint(&mut table, values.len() as u64);
            for (value, list) in values {
                let off = w.pos;
                write_postings(&mut w, &mut buf, list).map_err(io)?;
                put_uvarint(&mut table, value.len() as u64);
                table.extend_from_slice(value.as_bytes());
                put_uvarint(&mut table, off);
            }
        }
        let toc_postings_table = w.pos;
        w.section(&table).map_err(io)?;

        buf.clear();
        for o in [toc_symbols, toc_series, toc_series_table, toc_postings, toc_postings_table] {
            put_u64(&mut buf, o);
        }
        let c = crc32c(&buf);
        put_u32(&mut buf, c);
        w.put(&buf).map_err(io)?;
        let f = w.w.into_inner().map_err(|e| Error::io(path, e.into_error()))?;
        f.sync_all().map_err(io)?;
        Ok(())
    }
}

struct Out {
    w: BufWriter<File>,
    pos: u64,
}

impl Out {
    fn put(&mut self, b: &[u8]) -> std::io::Result<()> {
        self.w.write_all(b)?;
        self.pos += b.len() as u64;
        Ok(())
    }

    /// `len u32 | body | crc32c(body) u32`.
    fn section(&mut self, body: &[u8]) -> std::io::Result<()> {
        let len = u32::try_from(body.len()).map_err(|_| std::io::Error::other("index section over 4 GiB"))?;
        self.put(&len.to_be_bytes())?;
        self.put(body)?;
        self.put(&crc32c(body).to_be_bytes())
    }
}

/// `count u32 | the gaps bit-packed`: the first reference, then each one's distance from the previous
/// minus one (a run of consecutive references packs to a frame header).
fn write_postings(w: &mut Out, buf: &mut Vec<u8>, list: &[SeriesRef]) -> std::io::Result<()> {
    buf.clear();
    put_u32(buf, list.len() as u32);
    let mut prev: Option<SeriesRef> = None;
    let gaps: Vec<i64> = list
        .iter()
        .map(|&r| {
            let g = prev.map_or(i64::from(r), |p| i64::from(r) - i64::from(p) - 1);
            prev = Some(r);
            g
        })
        .collect();
    tessera_encoding::bitpack::pack_into(&gaps, buf);
    w.section(buf)
}

/// One label name's values in the postings offset table: the absolute offset of each value's entry
/// (`uvarint len | value | uvarint postings offset`), in value order.
struct NameEntry {
    name: String,
    values: Vec<u64>,
}

/// A mapped block index. Cheap to share; every method may be called concurrently.
pub struct BlockIndex {
    data: Bytes,
    /// The mapping behind `data` when opened from a file (for `release_resident`).
    mapped: Option<Mapped>,
    file: String,
    /// Absolute offset of each symbol's length prefix.
    symbols: Vec<u64>,
    series_end: u64,
    /// Absolute offset of the first u64 of the series offset table.
    series_table: u64,
    /// Format version (1 or 2).
    version: u8,
    /// Added to group-start `mint`s (the block's `mint` in version 2, 0 in version 1).
    base: i64,
    num_series: u32,
    postings_start: u64,
    postings_end: u64,
    names: Vec<NameEntry>,
}

impl std::fmt::Debug for BlockIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockIndex").field("file", &self.file).field("num_series", &self.num_series).finish()
    }
}

impl BlockIndex {
    /// Maps and validates the index at `path`.
    pub fn open(path: &Path) -> Result<Self, Error> {
        let mapped = map_file(path)?;
        let mut ix = Self::from_bytes(mapped.bytes.clone(), path.display().to_string())?;
        ix.mapped = Some(mapped);
        Ok(ix)
    }

    /// Validates an index held in memory (the mmap, or any bytes in tests). Never panics.
    pub fn from_bytes(data: Bytes, file: String) -> Result<Self, Error> {
        let len = data.len() as u64;
        let f = file.as_str();
        if len < HEADER_BYTES + TOC_BYTES as u64 {
            return Err(Error::corruption(f, 0, format!("index of {len} bytes is shorter than header + TOC")));
        }
        let mut d = Dec::new(&data, 0, f);
        let magic = d.u32()?;
        if magic != INDEX_MAGIC {
            return Err(Error::corruption(f, 0, format!("bad index magic {magic:#010x}")));
        }
        let version = d.u8()?;
        if version != 1 && version != INDEX_VERSION {
            return Err(Error::corruption(f, 4, format!("unsupported index version {version}")));
        }
        let toc_at = len - TOC_BYTES as u64;
        let toc = &data[toc_at as usize..];
        let mut d = Dec::new(toc, toc_at, f);
        let mut offs = [0u64; 5];
        for o in &mut offs {
            *o = d.u64()?;
        }
        let want = d.u32()?;
        if crc32c(&toc[..40]) != want {
            return Err(Error::corruption(f, toc_at, "table of contents checksum mismatch"));
        }
        let [symbols_at, series_at, series_table_at, postings_at, postings_table_at] = offs;
        let ordered = HEADER_BYTES <= symbols_at
            && symbols_at <= series_at
            && series_at <= series_table_at
            && series_table_at <= postings_at
            && postings_at <= postings_table_at
            && postings_table_at <= toc_at;
        if !ordered {
            return Err(Error::corruption(f, toc_at, "table of contents offsets out of order"));
        }

        let sym_body = section(&data, symbols_at, series_at, f)?;
        let mut d = Dec::new(sym_body, symbols_at + 4, f);
        let count = d.u32()?;
        let mut symbols = Vec::with_capacity((count as usize).min(sym_body.len()));
        for _ in 0..count {
            symbols.push(d.offset());
            d.str()?;
        }
        if !d.is_empty() {
            return Err(d.err("trailing bytes after the symbol table"));
        }

        let table_body = section(&data, series_table_at, postings_at, f)?;
        let mut d = Dec::new(table_body, series_table_at + 4, f);
        let num_series = d.u32()?;
        let base = if version >= 2 { d.u64()? as i64 } else { 0 };
        if d.remaining() as u64 != u64::from(num_series) * 8 {
            return Err(d.err(format!("series offset table holds {} bytes for {num_series} series", d.remaining())));
        }
        let series_table = d.offset();
        let mut prev = 0u64;
        for i in 0..num_series {
            let at = d.offset();
            let o = d.u64()?;
            if o < series_at || o >= series_table_at || (i > 0 && o <= prev) {
                return Err(Error::corruption(f, at, format!("series offset {o} out of range")));
            }
            prev = o;
        }

        let pt_body = section(&data, postings_table_at, toc_at, f)?;
        let mut d = Dec::new(pt_body, postings_table_at + 4, f);
        let n_names = d.uvarint()?;
        let mut names: Vec<NameEntry> = Vec::with_capacity((n_names as usize).min(pt_body.len()));
        for _ in 0..n_names {
            let name = d.str()?.to_string();
            if names.last().is_some_and(|p| p.name >= name) {
                return Err(d.err("postings table names out of order"));
            }
            let nv = d.uvarint()?;
            let mut values = Vec::with_capacity((nv as usize).min(d.remaining()));
            let mut prev: Option<&str> = None;
            for _ in 0..nv {
                values.push(d.offset());
                let v = d.str()?;
                if prev.is_some_and(|p| p >= v) {
                    return Err(d.err("postings table values out of order"));
                }
                prev = Some(v);
                let at = d.offset();
                let off = d.uvarint()?;
                if off < postings_at || off >= postings_table_at {
                    return Err(Error::corruption(f, at, format!("postings offset {off} out of range")));
                }
            }
            names.push(NameEntry { name, values });
        }
        if !d.is_empty() {
            return Err(d.err("trailing bytes after the postings table"));
        }

        Ok(Self {
            data,
            mapped: None,
            file,
            symbols,
            series_end: series_table_at,
            series_table,
            version,
            base,
            num_series,
            postings_start: postings_at,
            postings_end: postings_table_at,
            names,
        })
    }

    /// Drops the index mapping's pages from the resident set (see `Block::release_resident_pages`).
    pub(crate) fn release_resident(&self) {
        if let Some(m) = &self.mapped {
            m.release_resident();
        }
    }

    pub fn num_series(&self) -> u32 {
        self.num_series
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    pub fn size_bytes(&self) -> u64 {
        self.data.len() as u64
    }

    fn symbol(&self, id: u64) -> Result<&str, Error> {
        let Some(&at) = usize::try_from(id).ok().and_then(|i| self.symbols.get(i)) else {
            return Err(Error::corruption(&self.file, 0, format!("symbol reference {id} out of range")));
        };
        Dec::new(&self.data[at as usize..], at, &self.file).str()
    }

    /// The labels and chunk metas of series `r`; the entry's CRC is verified.
    pub fn series(&self, r: SeriesRef) -> Result<(Labels, Vec<ChunkMeta>), Error> {
        let mut chunks = Vec::new();
        let labels = self.series_into(r, &mut chunks)?;
        Ok((labels, chunks))
    }

    /// Like [`BlockIndex::series`], reusing `chunks` (cleared first).
    pub fn series_into(&self, r: SeriesRef, chunks: &mut Vec<ChunkMeta>) -> Result<Labels, Error> {
        self.series_range_into(r, i64::MIN, i64::MAX, chunks)
    }

    /// The labels of series `r` and the metas of its chunks that overlap `[mint_ms, maxt_ms]` (inclusive).
    /// Uses the entry's skip table: only the chunk metas from the first group that can overlap the range
    /// up to the first chunk starting after it are decoded. The entry's CRC is verified.
    pub fn series_range_into(&self, r: SeriesRef, mint_ms: i64, maxt_ms: i64, chunks: &mut Vec<ChunkMeta>) -> Result<Labels, Error> {
        chunks.clear();
        let f = self.file.as_str();
        if r >= self.num_series {
            return Err(Error::Other(format!("series reference {r} out of range ({} series) in {f}", self.num_series)));
        }
        let at = self.series_table + u64::from(r) * 8;
        let off = Dec::new(&self.data[at as usize..], at, f).u64()?;
        let region = &self.data[off as usize..self.series_end as usize];
        let mut d = Dec::new(region, off, f);
        let len = d.len_prefix()?;
        let body_at = d.offset();
        let body = d.bytes(len)?;
        let want = d.u32()?;
        if crc32c(body) != want {
            return Err(Error::corruption(f, off, format!("series {r} entry checksum mismatch")));
        }
        let mut d = Dec::new(body, body_at, f);
        let nl = d.uvarint()?;
        let mut labels = Vec::with_capacity((nl as usize).min(body.len()));
        for _ in 0..nl {
            let n = self.symbol(d.uvarint()?)?;
            let v = self.symbol(d.uvarint()?)?;
            labels.push(Label::new(n, v));
        }
        let labels = Labels::from_sorted(labels).map_err(|n| Error::corruption(f, off, format!("series {r} labels unsorted at {n:?}")))?;
        let nc = d.uvarint()?;
        // Version 2 writes no skip table for a single group; it starts at the first meta then.
        let skipless = self.version >= 2 && nc <= u64::from(SKIP_EVERY);
        let nskips = if skipless { 0 } else { nc.div_ceil(u64::from(SKIP_EVERY)) };
        if nskips.saturating_mul(16) > d.remaining() as u64 {
            return Err(d.err(format!("series {r}: skip table for {nc} chunks exceeds the entry")));
        }
        let skips_at = d.offset();
        let skips = d.bytes(nskips as usize * 16)?;
        let metas = &body[d.pos()..];
        let metas_at = d.offset();
        let skip = |k: usize| -> (i64, u64) {
            let e = &skips[k * 16..k * 16 + 16];
            let mut a = [0u8; 8];
            a.copy_from_slice(&e[..8]);
            let m = i64::from_be_bytes(a);
            a.copy_from_slice(&e[8..]);
            (m, u64::from_be_bytes(a))
        };
        // First group whose running max of maxt reaches the range: every chunk before it ends earlier.
        let (mut lo, mut hi) = (0usize, nskips as usize);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if skip(mid).0 < mint_ms {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let full = mint_ms == i64::MIN && maxt_ms == i64::MAX;
        if lo == nskips as usize && !skipless {
            return Ok(labels);
        }
        let start = if skipless { 0 } else { skip(lo).1 };
        if start > metas.len() as u64 {
            return Err(Error::corruption(f, skips_at + lo as u64 * 16, format!("series {r}: skip offset {start} out of range")));
        }
        let mut d = Dec::new(&metas[start as usize..], metas_at + start, f);
        let mut prev: Option<ChunkMeta> = None;
        let mut i = lo as u64 * u64::from(SKIP_EVERY);
        while i < nc {
            let c = match prev {
                Some(p) if !i.is_multiple_of(u64::from(SKIP_EVERY)) => {
                    let mint = p.maxt_ms.wrapping_add(d.varint()?);
                    let span = d.uvarint()?;
                    ChunkMeta { mint_ms: mint, maxt_ms: mint.wrapping_add(span as i64), chunk_ref: p.chunk_ref.wrapping_add(d.varint()? as u64) }
                }
                _ => {
                    if full && !skipless && (d.offset() - metas_at) != skip((i / u64::from(SKIP_EVERY)) as usize).1 {
                        return Err(d.err(format!("series {r}: skip table does not match chunk {i}")));
                    }
                    let mint = d.varint()?.wrapping_add(self.base);
                    let span = d.uvarint()?;
                    ChunkMeta { mint_ms: mint, maxt_ms: mint.wrapping_add(span as i64), chunk_ref: d.uvarint()? }
                }
            };
            if c.mint_ms > maxt_ms {
                break; // chunks are sorted by mint: nothing later can overlap
            }
            if c.maxt_ms >= mint_ms {
                chunks.push(c);
            }
            prev = Some(c);
            i += 1;
        }
        if full && !d.is_empty() {
            return Err(d.err(format!("trailing bytes in series {r} entry")));
        }
        Ok(labels)
    }

    fn postings_at(&self, off: u64) -> Result<Vec<SeriesRef>, Error> {
        let f = self.file.as_str();
        if off < self.postings_start || off >= self.postings_end {
            return Err(Error::corruption(f, off, "postings offset out of range"));
        }
        let body = section(&self.data, off, self.postings_end, f)?;
        let mut d = Dec::new(body, off + 4, f);
        let n = d.u32()?;
        if self.version >= 2 {
            // At most one reference per series: a larger count is damage, not a reason to allocate.
            if n > self.num_series {
                return Err(d.err("postings list longer than the series"));
            }
            let packed = &body[d.pos()..];
            let at = d.offset();
            let bad = |e: tessera_encoding::ChunkError| Error::corruption(f, at, format!("postings list: {e}"));
            let mut u = tessera_encoding::bitpack::Unpacker::new(packed, n as usize, packed.len());
            let mut out = Vec::with_capacity(n as usize);
            let mut next = 0u64;
            for _ in 0..n {
                let g = u.next_value().map_err(bad)?;
                let r = u64::try_from(g).ok().and_then(|g| next.checked_add(g)).filter(|&r| r < u64::from(self.num_series));
                let Some(r) = r else {
                    return Err(Error::corruption(f, at, "postings list unsorted or out of range"));
                };
                out.push(r as SeriesRef);
                next = r + 1;
            }
            if !u.is_done() {
                return Err(Error::corruption(f, at, "trailing bytes after the postings list"));
            }
            return Ok(out);
        }
        if d.remaining() as u64 != u64::from(n) * 4 {
            return Err(d.err("postings list length mismatch"));
        }
        let mut out = Vec::with_capacity(n as usize);
        for _ in 0..n {
            let r = d.u32()?;
            if out.last().is_some_and(|&p| p >= r) || r >= self.num_series {
                return Err(Error::corruption(f, d.offset() - 4, "postings list unsorted or out of range"));
            }
            out.push(r);
        }
        Ok(out)
    }

    /// The (value, postings offset) of a value entry.
    fn value_entry(&self, at: u64) -> Result<(&str, u64), Error> {
        let mut d = Dec::new(&self.data[at as usize..], at, &self.file);
        let v = d.str()?;
        Ok((v, d.uvarint()?))
    }

    fn name(&self, name: &str) -> Option<&NameEntry> {
        self.names.binary_search_by(|e| e.name.as_str().cmp(name)).ok().map(|i| &self.names[i])
    }

    /// Index of the first value of `e` that is `>= key`.
    fn lower_bound(&self, e: &NameEntry, key: &str) -> Result<usize, Error> {
        let (mut lo, mut hi) = (0usize, e.values.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if self.value_entry(e.values[mid])?.0 < key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        Ok(lo)
    }
}

/// The body of a `len u32 | body | crc u32` section at `at`, which must end by `limit`; checksum verified.
fn section<'a>(data: &'a [u8], at: u64, limit: u64, f: &str) -> Result<&'a [u8], Error> {
    let region = data.get(at as usize..limit as usize).ok_or_else(|| Error::corruption(f, at, "section outside the file"))?;
    let mut d = Dec::new(region, at, f);
    let len = d.u32()? as usize;
    let body = d.bytes(len)?;
    let want = d.u32()?;
    if crc32c(body) != want {
        return Err(Error::corruption(f, at, "section checksum mismatch"));
    }
    Ok(body)
}

impl IndexReader for BlockIndex {
    fn all_postings(&self) -> IndexResult<Vec<SeriesRef>> {
        Ok(self.postings_at(self.postings_start)?)
    }

    fn postings(&self, name: &str, value: &str) -> IndexResult<Vec<SeriesRef>> {
        let Some(e) = self.name(name) else { return Ok(Vec::new()) };
        let i = self.lower_bound(e, value)?;
        if let Some(&at) = e.values.get(i) {
            let (v, off) = self.value_entry(at)?;
            if v == value {
                return Ok(self.postings_at(off)?);
            }
        }
        Ok(Vec::new())
    }

    fn label_values(&self, name: &str, prefix: &str) -> IndexResult<Vec<String>> {
        let Some(e) = self.name(name) else { return Ok(Vec::new()) };
        let mut out = Vec::new();
        for &at in &e.values[self.lower_bound(e, prefix)?..] {
            let (v, _) = self.value_entry(at)?;
            if !v.starts_with(prefix) {
                break;
            }
            out.push(v.to_string());
        }
        Ok(out)
    }

    fn label_names(&self) -> IndexResult<Vec<String>> {
        Ok(self.names.iter().map(|e| e.name.clone()).collect())
    }
}
