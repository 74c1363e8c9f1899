//! Replay: [`WalReader`] iterates the records of consecutive segments, and [`repair`] cuts a damaged log
//! back to its last good record.
//!
//! # Torn tail versus corruption
//! A crash while `write(2)` is in flight leaves a *prefix* of the written bytes, possibly followed by
//! zero-filled pages the file system had already allocated. The reader therefore treats as a **torn tail**
//! (truncate the file there, `tracing::warn!`, carry on) exactly these shapes at the end of the **last**
//! segment of the directory:
//! - fewer bytes than a segment or record header remain;
//! - a header that fails its checksum, followed only by zero bytes up to the end of the file;
//! - a valid header whose payload runs past the end of the file;
//! - a payload that fails its CRC and ends exactly at the end of the file (a torn write with a hole).
//!
//! Anything else (a bad checksum with more data after it, damage in an earlier segment or in a
//! checkpoint, a missing segment number) is [`Corruption`]: the reader stops and reports the file and
//! byte offset; the caller may call [`repair`], which mirrors Prometheus' `wlog.(*WL).Repair`: keep every
//! record before the damage, delete everything after it.
//!
//! Known limit (shared with Prometheus): a segment that is *not* the last one, cut exactly at a record
//! boundary (but not to less than its header), looks like a complete segment; its lost records cannot be
//! detected by the framing. Crashes never produce that shape, since only the last segment is being written.

use crate::error::{Corruption, CorruptionKind, WalError};
use crate::format::{
    decode_record_header, parse_segment_name, segment_file_name, segment_header_ok, RECORD_HEADER_BYTES,
    SEGMENT_HEADER_BYTES,
};
use crate::fs::{RealFs, WalFs};
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Smallest read buffer; large enough that replay makes few syscalls.
const MIN_READ_BUFFER_BYTES: usize = 1 << 20;

/// The segment indices present in `dir`, ascending. A missing directory has none.
pub(crate) fn list_segments(fs: &dyn WalFs, dir: &Path) -> Result<Vec<u64>, WalError> {
    let entries = match fs.list(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(WalError::io(dir, e)),
    };
    let mut segs: Vec<u64> =
        entries.iter().filter(|e| !e.is_dir).filter_map(|e| parse_segment_name(&e.name)).collect();
    segs.sort_unstable();
    Ok(segs)
}

struct Segment {
    index: u64,
    path: PathBuf,
    file: Box<dyn Read + Send>,
    /// File length when it was opened; bytes appended later are not read.
    len: u64,
    /// File offset of `WalReader::buf[start]`, i.e. of the next unread byte.
    off: u64,
    /// Whether a torn tail of this segment may be repaired (it is the last one and repair is enabled).
    repairable: bool,
}

/// Iterates the records of a WAL directory (or of a checkpoint directory) in order.
///
/// Contract:
/// - Records come back in the order they were logged, segment by segment; each exactly once.
/// - A torn tail of the last segment of the directory is truncated away (with a warning) and iteration
///   then ends normally. This **modifies the file**, so never run a reader on a directory whose [`crate::Wal`]
///   writer is open: replay first, then open the writer.
/// - Damage anywhere else is returned once as [`WalError::Corruption`]; every record before it has been
///   returned. After any error the reader is finished and `next_record` returns `Ok(None)`.
pub struct WalReader {
    fs: Arc<dyn WalFs>,
    dir: PathBuf,
    segments: Vec<u64>,
    /// Highest segment index in the directory when the reader was opened.
    last_in_dir: Option<u64>,
    repair_torn_tail: bool,
    /// Position in `segments` of the next segment to open.
    next: usize,
    cur: Option<Segment>,
    buf: Vec<u8>,
    start: usize,
    end: usize,
    pos: (u64, u64),
    done: bool,
    torn_tails_repaired: u32,
}

impl WalReader {
    /// Reads every segment of `dir` (checkpoints are not included; see [`crate::read_all`]).
    pub fn open(dir: &Path) -> Result<Self, WalError> {
        Self::from_segment(dir, 0)
    }

    /// Reads the segments of `dir` with index `>= first`.
    pub fn from_segment(dir: &Path, first: u64) -> Result<Self, WalError> {
        Self::with_fs(Arc::new(RealFs), dir, first, true)
    }

    /// Like [`WalReader::from_segment`] through a given file system. With `repair_torn_tail == false` a torn
    /// tail is reported as [`CorruptionKind::Truncated`] instead of being truncated (used for checkpoints,
    /// which are written atomically and so can never legitimately be torn).
    pub fn with_fs(fs: Arc<dyn WalFs>, dir: &Path, first: u64, repair_torn_tail: bool) -> Result<Self, WalError> {
        let all = list_segments(fs.as_ref(), dir)?;
        let last_in_dir = all.last().copied();
        let segments: Vec<u64> = all.into_iter().filter(|&s| s >= first).collect();
        Ok(WalReader {
            fs,
            dir: dir.to_path_buf(),
            pos: (segments.first().copied().unwrap_or(first), 0),
            segments,
            last_in_dir,
            repair_torn_tail,
            next: 0,
            cur: None,
            buf: Vec::new(),
            start: 0,
            end: 0,
            done: false,
            torn_tails_repaired: 0,
        })
    }

    /// The directory being read.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The segment indices this reader covers, ascending.
    pub fn segments(&self) -> &[u64] {
        &self.segments
    }

    /// `(segment index, byte offset)` where the record most recently returned starts (its frame header).
    /// Before the first record: the first segment and offset 0.
    pub fn position(&self) -> (u64, u64) {
        self.pos
    }

    /// How many torn tails this reader has truncated (0 or 1).
    pub fn torn_tails_repaired(&self) -> u32 {
        self.torn_tails_repaired
    }

    /// [`WalReader::next_record`] with the index of the segment the record comes from.
    pub fn next_record_at(&mut self) -> Result<Option<(u64, &[u8])>, WalError> {
        let mut seg = 0u64;
        match self.next_record_inner(&mut seg)? {
            Some((at, n)) => Ok(Some((seg, &self.buf[at..at + n]))),
            None => Ok(None),
        }
    }
    /// The next record, borrowed from the reader's buffer until the next call; `Ok(None)` at the end.
    /// See the type's documentation for what happens on damage.
    pub fn next_record(&mut self) -> Result<Option<&[u8]>, WalError> {
        match self.next_record_inner(&mut 0)? {
            Some((at, n)) => Ok(Some(&self.buf[at..at + n])),
            None => Ok(None),
        }
    }

    /// The next record's position in `buf`, and its segment in `seg`.
    fn next_record_inner(&mut self, seg: &mut u64) -> Result<Option<(usize, usize)>, WalError> {
        if self.done {
            return Ok(None);
        }
        match self.advance() {
            Ok(Some((at, n))) => {
                *seg = self.cur.as_ref().map_or(0, |c| c.index);
                Ok(Some((at, n)))
            }
            Ok(None) => {
                self.done = true;
                Ok(None)
            }
            Err(e) => {
                self.done = true;
                self.cur = None;
                Err(e)
            }
        }
    }

    /// Finds the next record; returns its payload's position in `buf`.
    fn advance(&mut self) -> Result<Option<(usize, usize)>, WalError> {
        loop {
            let Some(cur) = self.cur.as_ref() else {
                if self.next >= self.segments.len() {
                    return Ok(None);
                }
                let index = self.segments[self.next];
                if self.next > 0 && self.segments[self.next - 1] + 1 != index {
                    // Prometheus' NewSegmentsRangeReader refuses non-sequential segments too.
                    return Err(self.corruption_at(index, 0, CorruptionKind::SegmentGap));
                }
                self.next += 1;
                self.open_segment(index)?;
                continue;
            };
            let (index, off, rem, repairable) = (cur.index, cur.off, cur.len - cur.off, cur.repairable);
            if rem == 0 {
                self.cur = None;
                continue;
            }
            if rem < RECORD_HEADER_BYTES as u64 {
                self.torn(off, "incomplete record header")?;
                continue;
            }
            self.fill(RECORD_HEADER_BYTES)?;
            let hdr: [u8; RECORD_HEADER_BYTES] =
                self.buf[self.start..self.start + RECORD_HEADER_BYTES].try_into().expect("fill() made 12 bytes available");
            let Some(h) = decode_record_header(&hdr) else {
                if repairable && self.rest_is_zero()? {
                    self.torn(off, "zero-filled tail")?;
                    continue;
                }
                return Err(self.corruption_at(index, off, CorruptionKind::HeaderChecksum));
            };
            let n = h.len as usize;
            if h.len as u64 > rem - RECORD_HEADER_BYTES as u64 {
                self.torn(off, "record runs past end of file")?;
                continue;
            }
            self.fill(RECORD_HEADER_BYTES + n)?;
            let at = self.start + RECORD_HEADER_BYTES;
            if crc32c::crc32c(&self.buf[at..at + n]) != h.payload_crc {
                if repairable && h.len as u64 == rem - RECORD_HEADER_BYTES as u64 {
                    self.torn(off, "checksum mismatch in the final record")?;
                    continue;
                }
                return Err(self.corruption_at(index, off, CorruptionKind::PayloadChecksum));
            }
            self.start += RECORD_HEADER_BYTES + n;
            let cur = self.cur.as_mut().expect("checked above");
            cur.off += (RECORD_HEADER_BYTES + n) as u64;
            self.pos = (index, off);
            return Ok(Some((at, n)));
        }
    }

    fn corruption_at(&self, segment: u64, offset: u64, kind: CorruptionKind) -> WalError {
        WalError::Corruption(Corruption { segment, path: self.dir.join(segment_file_name(segment)), offset, kind })
    }

    /// Opens segment `index` and checks its header; leaves `self.cur` set unless the segment is empty.
    fn open_segment(&mut self, index: u64) -> Result<(), WalError> {
        let path = self.dir.join(segment_file_name(index));
        let len = self.fs.file_len(&path).map_err(|e| WalError::io(&path, e))?;
        let file = self.fs.open_read(&path).map_err(|e| WalError::io(&path, e))?;
        let repairable = self.repair_torn_tail && Some(index) == self.last_in_dir;
        self.start = 0;
        self.end = 0;
        self.cur = Some(Segment { index, path, file, len, off: 0, repairable });
        if len == 0 {
            if !repairable {
                // Only the last segment can be empty (a crash between creating it and writing its
                // header, and Wal::open reuses such a segment's index), so elsewhere it is lost data.
                self.cur = None;
                return Err(self.corruption_at(index, 0, CorruptionKind::Truncated));
            }
            self.cur = None;
            return Ok(());
        }
        if len < SEGMENT_HEADER_BYTES {
            return self.torn(0, "incomplete segment header");
        }
        self.fill(SEGMENT_HEADER_BYTES as usize)?;
        if !segment_header_ok(&self.buf[self.start..self.start + SEGMENT_HEADER_BYTES as usize]) {
            if repairable && self.rest_is_zero()? {
                return self.torn(0, "zero-filled segment");
            }
            return Err(self.corruption_at(index, 0, CorruptionKind::BadSegmentHeader));
        }
        self.start += SEGMENT_HEADER_BYTES as usize;
        self.cur.as_mut().expect("set above").off = SEGMENT_HEADER_BYTES;
        Ok(())
    }

    /// Handles a torn tail at `off` of the current segment: truncate and finish the segment if allowed,
    /// otherwise report it as corruption.
    fn torn(&mut self, off: u64, why: &str) -> Result<(), WalError> {
        let cur = self.cur.take().expect("torn() is only called with an open segment");
        if !cur.repairable {
            return Err(self.corruption_at(cur.index, off, CorruptionKind::Truncated));
        }
        tracing::warn!(
            file = %cur.path.display(),
            offset = off,
            dropped_bytes = cur.len - off,
            reason = why,
            "WAL: truncating torn tail of the last segment"
        );
        drop(cur.file);
        self.fs.truncate(&cur.path, off).map_err(|e| WalError::io(&cur.path, e))?;
        self.torn_tails_repaired += 1;
        Ok(())
    }

    /// Makes at least `n` unread bytes of the current segment available at `buf[start..]`.
    fn fill(&mut self, n: usize) -> Result<(), WalError> {
        let cur = self.cur.as_mut().expect("fill() is only called with an open segment");
        while self.end - self.start < n {
            if self.buf.len() - self.start < n || self.end == self.buf.len() {
                // Move the unread bytes to the front, growing the buffer if a record needs it.
                self.buf.copy_within(self.start..self.end, 0);
                self.end -= self.start;
                self.start = 0;
                if self.buf.len() < n.max(MIN_READ_BUFFER_BYTES) {
                    self.buf.resize(n.max(MIN_READ_BUFFER_BYTES), 0);
                }
            }
            let got = match cur.file.read(&mut self.buf[self.end..]) {
                Ok(g) => g,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(WalError::io(&cur.path, e)),
            };
            if got == 0 {
                // The length was checked against the file size, so the file shrank under us.
                return Err(WalError::io(&cur.path, io::Error::from(io::ErrorKind::UnexpectedEof)));
            }
            self.end += got;
        }
        Ok(())
    }

    /// Whether every byte from `buf[start]` to the end of the current segment is zero. Consumes them.
    fn rest_is_zero(&mut self) -> Result<bool, WalError> {
        let cur = self.cur.as_mut().expect("rest_is_zero() is only called with an open segment");
        let mut remaining = cur.len - cur.off;
        let buffered = ((self.end - self.start) as u64).min(remaining) as usize;
        if self.buf[self.start..self.start + buffered].iter().any(|&b| b != 0) {
            return Ok(false);
        }
        remaining -= buffered as u64;
        self.start = 0;
        self.end = 0;
        while remaining > 0 {
            let want = remaining.min(self.buf.len() as u64) as usize;
            let got = match cur.file.read(&mut self.buf[..want]) {
                Ok(0) => break,
                Ok(g) => g,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(WalError::io(&cur.path, e)),
            };
            if self.buf[..got].iter().any(|&b| b != 0) {
                return Ok(false);
            }
            remaining -= got as u64;
        }
        Ok(true)
    }
}

/// Cuts the log at a reported corruption so that it can be opened and written again; mirrors Prometheus'
/// `wlog.(*WL).Repair`.
///
/// Every record before `corruption.offset` in the damaged file is kept; the rest of that file and every
/// later segment in the same directory (the WAL dir, or the checkpoint dir the damage was found in) is
/// deleted. For a [`CorruptionKind::SegmentGap`] the segment after the gap is deleted as well. Records
/// after the damage are lost: they may depend on what was lost with it. `dir` is the WAL directory.
pub fn repair(dir: &Path, corruption: &Corruption) -> Result<(), WalError> {
    repair_with_fs(&RealFs, dir, corruption)
}

/// [`repair`] through a given file system.
pub fn repair_with_fs(fs: &dyn WalFs, dir: &Path, corruption: &Corruption) -> Result<(), WalError> {
    let seg_dir = corruption.path.parent().unwrap_or(dir);
    tracing::warn!(
        file = %corruption.path.display(),
        offset = corruption.offset,
        kind = %corruption.kind,
        "WAL: repairing corruption, deleting everything after it"
    );
    for index in list_segments(fs, seg_dir)? {
        if index > corruption.segment {
            let p = seg_dir.join(segment_file_name(index));
            fs.remove_file(&p).map_err(|e| WalError::io(&p, e))?;
        }
    }
    let keep = if corruption.offset < SEGMENT_HEADER_BYTES { 0 } else { corruption.offset };
    if corruption.kind == CorruptionKind::SegmentGap || keep == 0 {
        // Nothing to keep: drop the file rather than leave an empty segment behind a gap.
        match fs.remove_file(&corruption.path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(WalError::io(&corruption.path, e)),
        }
    } else {
        fs.truncate(&corruption.path, keep).map_err(|e| WalError::io(&corruption.path, e))?;
    }
    fs.sync_dir(seg_dir).map_err(|e| WalError::io(seg_dir, e))
}
