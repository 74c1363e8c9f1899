//! Chunk segment files (`chunks/000001`, `chunks/000002`, …): the encoded chunks of a block, one record
//! after another. Format: `docs/format/chunks.md`.
//!
//! A chunk is addressed by a 64-bit reference: the segment's sequence number in the upper 32 bits and the
//! record's byte offset inside that segment in the lower 32 bits (segments are at most
//! [`MAX_SEGMENT_BYTES`], so the offset always fits). Each record carries its own CRC32C, verified every
//! time the chunk is read, so a flipped bit in a cold chunk is found when (and only when) it is used, and
//! names the segment file and the record's offset.

use super::bin::{crc32c, put_uvarint, Dec};
use super::mmap::{map_file, Mapped};
use crate::Error;
use bytes::Bytes;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use tessera_model::{ChunkEncoding, ChunkRef};

/// Magic number at the start of every segment ("TSCH").
pub const SEGMENT_MAGIC: u32 = 0x5453_4348;
/// Format version written after the magic.
pub const SEGMENT_VERSION: u8 = 1;
/// Bytes of the segment header: magic (4), version (1), padding (3).
pub const SEGMENT_HEADER_BYTES: usize = 8;
/// Upper bound of one segment file's size.
pub const MAX_SEGMENT_BYTES: u64 = 512 << 20;

/// The name of segment `seq` (1-based) inside the `chunks` directory.
pub fn segment_name(seq: u32) -> String {
    format!("{seq:06}")
}

/// Writes chunk records into numbered segments, cutting a new one before a record would push the current
/// segment past the size limit.
pub(crate) struct ChunkWriter {
    dir: PathBuf,
    max_segment_bytes: u64,
    seq: u32,
    cur: Option<BufWriter<File>>,
    cur_path: PathBuf,
    cur_len: u64,
    rec: Vec<u8>,
}

impl ChunkWriter {
    pub(crate) fn new(dir: &Path, max_segment_bytes: u64) -> Self {
        Self {
            dir: dir.to_path_buf(),
            max_segment_bytes: max_segment_bytes.clamp(SEGMENT_HEADER_BYTES as u64 + 64, MAX_SEGMENT_BYTES),
            seq: 0,
            cur: None,
            cur_path: PathBuf::new(),
            cur_len: 0,
            rec: Vec::new(),
        }
    }

    fn cut(&mut self) -> Result<(), Error> {
        self.finish_segment()?;
        self.seq += 1;
        let path = self.dir.join(segment_name(self.seq));
        let f = File::create(&path).map_err(|e| Error::io(&path, e))?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        let mut hdr = [0u8; SEGMENT_HEADER_BYTES];
        hdr[..4].copy_from_slice(&SEGMENT_MAGIC.to_be_bytes());
        hdr[4] = SEGMENT_VERSION;
        w.write_all(&hdr).map_err(|e| Error::io(&path, e))?;
        self.cur = Some(w);
        self.cur_path = path;
        self.cur_len = SEGMENT_HEADER_BYTES as u64;
        Ok(())
    }

    /// Appends one chunk; returns its reference.
    pub(crate) fn write(&mut self, encoding: ChunkEncoding, data: &[u8]) -> Result<u64, Error> {
        self.rec.clear();
        self.rec.push(encoding as u8);
        put_uvarint(&mut self.rec, data.len() as u64);
        let head = self.rec.len();
        let crc = crc32c::crc32c_append(crc32c(&self.rec), data);
        let total = (head + data.len() + 4) as u64;
        if total + SEGMENT_HEADER_BYTES as u64 > MAX_SEGMENT_BYTES {
            return Err(Error::Other(format!("chunk of {} bytes cannot fit a segment", data.len())));
        }
        if self.cur.is_none() || (self.cur_len + total > self.max_segment_bytes && self.cur_len > SEGMENT_HEADER_BYTES as u64) {
            self.cut()?;
        }
        let off = self.cur_len;
        let w = self.cur.as_mut().expect("a segment is open after cut");
        let path = &self.cur_path;
        w.write_all(&self.rec).map_err(|e| Error::io(path, e))?;
        w.write_all(data).map_err(|e| Error::io(path, e))?;
        w.write_all(&crc.to_be_bytes()).map_err(|e| Error::io(path, e))?;
        self.cur_len += total;
        Ok((u64::from(self.seq) << 32) | off)
    }

    fn finish_segment(&mut self) -> Result<(), Error> {
        if let Some(w) = self.cur.take() {
            let f = w.into_inner().map_err(|e| Error::io(&self.cur_path, e.into_error()))?;
            f.sync_all().map_err(|e| Error::io(&self.cur_path, e))?;
        }
        Ok(())
    }

    /// Flushes and fsyncs the last segment.
    pub(crate) fn finish(mut self) -> Result<(), Error> {
        self.finish_segment()
    }
}

/// The mapped segments of one block, indexed by sequence number − 1.
pub(crate) struct ChunkReader {
    segments: Vec<(Bytes, String)>,
    maps: Vec<Mapped>,
}

impl ChunkReader {
    /// Maps every segment in `dir`. Segment numbers must be contiguous from 1; headers are checked.
    pub(crate) fn open(dir: &Path) -> Result<Self, Error> {
        let mut seqs = Vec::new();
        let rd = match std::fs::read_dir(dir) {
            Ok(rd) => Some(rd),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(Error::io(dir, e)),
        };
        for ent in rd.into_iter().flatten() {
            let ent = ent.map_err(|e| Error::io(dir, e))?;
            let name = ent.file_name();
            let Some(name) = name.to_str() else { continue };
            if let Ok(seq) = name.parse::<u32>() {
                seqs.push(seq);
            }
        }
        seqs.sort_unstable();
        let mut segments = Vec::with_capacity(seqs.len());
        let mut maps = Vec::with_capacity(seqs.len());
        for (i, &seq) in seqs.iter().enumerate() {
            let path = dir.join(segment_name(seq));
            let file = path.display().to_string();
            if seq as usize != i + 1 {
                return Err(Error::corruption(&file, 0, format!("segment sequence gap: expected {}", i + 1)));
            }
            let mapped = map_file(&path)?;
            let data = mapped.bytes.clone();
            let mut d = Dec::new(&data, 0, &file);
            let magic = d.u32()?;
            if magic != SEGMENT_MAGIC {
                return Err(Error::corruption(&file, 0, format!("bad segment magic {magic:#010x}")));
            }
            let v = d.u8()?;
            if v != SEGMENT_VERSION {
                return Err(Error::corruption(&file, 4, format!("unsupported segment version {v}")));
            }
            if d.bytes(3)? != [0, 0, 0] {
                return Err(Error::corruption(&file, 5, "segment header padding is not zero"));
            }
            segments.push((data, file));
            maps.push(mapped);
        }
        Ok(Self { segments, maps })
    }

    /// See [`Mapped::release_resident`].
    pub(crate) fn release_resident(&self) {
        self.maps.iter().for_each(Mapped::release_resident);
    }

    pub(crate) fn size_bytes(&self) -> u64 {
        self.segments.iter().map(|(b, _)| b.len() as u64).sum()
    }

    /// Reads the chunk at `r`, verifying its CRC; `data` is a zero-copy slice of the mapping.
    pub(crate) fn chunk(&self, r: u64, mint_ms: i64, maxt_ms: i64, index_file: &str) -> Result<ChunkRef, Error> {
        let seq = (r >> 32) as usize;
        let off = (r & 0xffff_ffff) as usize;
        let Some((seg, file)) = seq.checked_sub(1).and_then(|i| self.segments.get(i)) else {
            return Err(Error::corruption(index_file, 0, format!("chunk reference {r:#x} names missing segment {seq}")));
        };
        if off < SEGMENT_HEADER_BYTES || off >= seg.len() {
            return Err(Error::corruption(file, off as u64, format!("chunk offset {off} outside the segment")));
        }
        let mut d = Dec::new(&seg[off..], off as u64, file);
        let enc_byte = d.u8()?;
        let len = d.len_prefix()?;
        let data_start = off + d.pos();
        d.bytes(len)?;
        let crc_at = d.offset();
        let want = d.u32()?;
        let got = crc32c(&seg[off..data_start + len]);
        if got != want {
            return Err(Error::corruption(file, off as u64, format!("chunk checksum mismatch (stored {want:#010x}, computed {got:#010x}, crc at {crc_at})")));
        }
        let encoding = ChunkEncoding::from_u8(enc_byte)
            .ok_or_else(|| Error::corruption(file, off as u64, format!("unknown chunk encoding {enc_byte}")))?;
        Ok(ChunkRef { mint_ms, maxt_ms, encoding, data: seg.slice(data_start..data_start + len) })
    }
}
