//! Closed head chunks on disk, memory-mapped (DESIGN.md's "closed chunks on disk and memory-mapped";
//! Prometheus keeps them in `chunks_head` for the same reason): the head's RAM holds the open chunks and a
//! [`Loc`]ation per closed chunk (packed into the series' list, `super::closed`), not the closed chunks'
//! bytes.
//!
//! ```text
//! <shard dir>/chunks_head/00000001 …   closed chunks' bytes, back to back, ≤ SEGMENT_BYTES per file
//! ```
//!
//! Key decisions:
//! - **A place to keep bytes, not a source of truth.** The WAL holds every sample; the directory is emptied
//!   when the shard opens and WAL replay writes the chunks again. So the files carry no headers, checksums
//!   or format version, and a crash, a torn write or a damaged file can cost nothing: it is never read back
//!   in a later process. (Prometheus also replays from its mmapped chunks to start faster; not done here.)
//! - **Written with `pwrite`, read through the mapping.** Each segment is mapped once, at its full size, when
//!   it is created; bytes are appended to the file behind the mapping (the page cache is shared, so they are
//!   readable through it at once). Readers get `Bytes` slices of the mapping (no copy, as for blocks), and
//!   only for bytes already in the file. Written pages are not in the process' resident set until a reader
//!   touches them, and the kernel may drop those again (they are clean file pages); after a head cut
//!   [`ChunkFiles::release_resident`] drops them.
//! - **Batched writes.** Chunks closed during a commit are gathered in the segment's `pending` buffer and
//!   written with one `pwrite` when the commit has applied (`flush`), or sooner when 256 KiB gather. A
//!   chunk still pending is read from the buffer. A failed write (disk full) keeps the bytes in the
//!   buffer, where they stay readable, and is retried at the next flush: nothing is lost, the head only
//!   holds them in RAM meanwhile (a warning is logged).
//! - **Freed by whole segments.** A head cut drops every chunk ending before its window's end, so a
//!   segment whose newest chunk ends before it holds nothing live ([`ChunkFiles::drop_before`] deletes it;
//!   slices held by readers keep its mapping valid). Chunks replaced by a merge
//!   ([`super::MemSeries::merge_closed`]) stay in their segment as garbage until then.
//! - **Without a directory** (a head built in memory, unit tests) the same segments hold their bytes in
//!   RAM: the pending buffer is the segment until it is full, then it is sealed into `Bytes`.

use std::collections::VecDeque;
use std::fs::File;
use std::path::{Path, PathBuf};

use bytes::Bytes;

use crate::block::mmap::{map_growing, Mapped};
use crate::{Error, Result};

/// The directory under a shard's.
pub(crate) const DIR: &str = "chunks_head";
/// Bytes per segment file by default (`Options::head_chunk_segment_bytes`; a bigger chunk gets a segment
/// of its own size).
pub(crate) const SEGMENT_BYTES: usize = 4 << 20;
/// Pending bytes that make a write happen before the commit ends.
const FLUSH_BYTES: usize = 256 << 10;

/// Where a closed head chunk's bytes are: segment id, offset and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Loc {
    pub seg: u32,
    pub off: u32,
    pub len: u32,
}

struct Segment {
    id: u32,
    /// The mapping (file segments) or the sealed bytes (memory segments); `[0, written)` is readable.
    view: Bytes,
    /// File segments: the file and its mapping (for `madvise`).
    file: Option<(File, PathBuf, Mapped)>,
    cap: usize,
    /// Bytes in the file (or sealed).
    written: usize,
    /// Bytes after `written` not in the file yet.
    pending: Vec<u8>,
    /// The newest sample time of any chunk written here.
    maxt: i64,
}

impl Segment {
    fn used(&self) -> usize {
        self.written + self.pending.len()
    }
}

/// One shard head's closed-chunk segments. Not synchronised: the head's lock guards it (readers call
/// [`ChunkFiles::get`] under the read lock, the committing writer appends under the write lock).
pub(crate) struct ChunkFiles {
    dir: Option<PathBuf>,
    segment_bytes: usize,
    /// Ascending ids.
    segs: VecDeque<Segment>,
    next_id: u32,
    /// Whether the last write failed (so a failure is logged once, and a recovery once).
    failing: bool,
}

impl Default for ChunkFiles {
    fn default() -> Self {
        ChunkFiles { dir: None, segment_bytes: SEGMENT_BYTES, segs: VecDeque::new(), next_id: 1, failing: false }
    }
}

impl std::fmt::Debug for ChunkFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkFiles").field("dir", &self.dir).field("segments", &self.segs.len()).finish()
    }
}

impl ChunkFiles {
    /// Segments of `segment_bytes` in `dir`, which is emptied first (what an earlier process left there
    /// is rebuilt by WAL replay).
    pub(crate) fn open(dir: &Path, segment_bytes: usize) -> Result<ChunkFiles> {
        match std::fs::remove_dir_all(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(dir, e)),
        }
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        // Offsets are u32s.
        let segment_bytes = segment_bytes.clamp(1, u32::MAX as usize);
        Ok(ChunkFiles { dir: Some(dir.to_path_buf()), segment_bytes, segs: VecDeque::new(), next_id: 1, failing: false })
    }

    /// Appends a closed chunk's bytes (fewer than 2^32 - 1; a head chunk is a few KiB at most); `maxt`
    /// is its newest sample's time.
    pub(crate) fn write(&mut self, data: &[u8], maxt: i64) -> Loc {
        assert!(data.len() < u32::MAX as usize, "head chunk of {} bytes", data.len());
        if self.segs.back().is_none_or(|s| s.used() + data.len() > s.cap) {
            self.roll(data.len());
        }
        let s = self.segs.back_mut().expect("rolled");
        let off = s.used();
        s.pending.extend_from_slice(data);
        s.maxt = s.maxt.max(maxt);
        // While writes fail (disk full) only the flush at the end of a commit retries, not every chunk.
        let flush = s.file.is_some() && s.pending.len() >= FLUSH_BYTES && !self.failing;
        let loc = Loc { seg: s.id, off: off as u32, len: data.len() as u32 };
        if flush {
            self.flush();
        }
        loc
    }

    /// Ends the segment being written (sealing it in memory mode) and starts one with room for `need`
    /// bytes: a file segment, or a memory one without a directory or when the file cannot be made.
    fn roll(&mut self, need: usize) {
        if let Some(s) = self.segs.back_mut()
            && s.file.is_none()
            && s.written == 0
        {
            s.written = s.pending.len();
            s.view = Bytes::from(std::mem::take(&mut s.pending));
        }
        let id = self.next_id;
        self.next_id += 1;
        let cap = self.segment_bytes.max(need).min(u32::MAX as usize);
        let file = self.dir.as_ref().and_then(|dir| {
            let path = dir.join(format!("{id:08}"));
            let made = File::options()
                .read(true)
                .write(true)
                .create_new(true)
                .open(&path)
                .map_err(|e| Error::io(&path, e))
                .and_then(|f| {
                    map_growing(&f, &path, cap).map(|m| (f, m)).inspect_err(|_| {
                        let _ = std::fs::remove_file(&path);
                    })
                });
            match made {
                Ok((f, m)) => Some((f, path, m)),
                Err(e) => {
                    tracing::warn!(error = %e, "head chunk segment could not be created; its chunks stay in memory");
                    None
                }
            }
        });
        let view = file.as_ref().map(|(_, _, m)| m.bytes.clone()).unwrap_or_default();
        self.segs.push_back(Segment { id, view, file, cap, written: 0, pending: Vec::new(), maxt: i64::MIN });
        // The ended segment's pending bytes go to its file, and its buffer goes.
        self.flush();
    }

    /// Writes every file segment's pending bytes. Memory segments keep theirs until sealed. Only the
    /// segment being written keeps a buffer (nothing is appended to an earlier one again).
    pub(crate) fn flush(&mut self) {
        use std::os::unix::fs::FileExt;
        let mut failed = None;
        let last = self.segs.back().map(|s| s.id);
        for s in self.segs.iter_mut() {
            if let Some((f, path, _)) = &s.file
                && !s.pending.is_empty()
            {
                match f.write_all_at(&s.pending, s.written as u64) {
                    Ok(()) => {
                        s.written += s.pending.len();
                        s.pending.clear();
                    }
                    Err(e) => failed = Some((path.clone(), e)),
                }
            }
            if s.pending.is_empty() && Some(s.id) != last {
                s.pending = Vec::new();
            } else if s.pending.is_empty() && s.pending.capacity() > 4 * FLUSH_BYTES {
                s.pending.shrink_to(FLUSH_BYTES);
            }
        }
        match failed {
            Some((path, e)) if !self.failing => {
                self.failing = true;
                tracing::warn!(file = %path.display(), error = %e, "head chunks could not be written; they stay in memory and the write is retried");
            }
            None if self.failing => {
                self.failing = false;
                tracing::info!("head chunks are written to disk again");
            }
            _ => {}
        }
    }

    fn seg(&self, id: u32) -> Option<&Segment> {
        self.segs.binary_search_by_key(&id, |s| s.id).ok().map(|i| &self.segs[i])
    }

    /// Where a written chunk's bytes lie in memory (for a prefetch; `None` while pending or unknown).
    #[inline]
    pub(crate) fn addr_of(&self, loc: Loc) -> Option<*const u8> {
        let s = self.seg(loc.seg)?;
        let end = loc.off as usize + loc.len as usize;
        (end <= s.written).then(|| s.view.as_ptr().wrapping_add(loc.off as usize))
    }

    /// A chunk's bytes: a slice of its segment's mapping, or a copy of them while they are pending. A
    /// location no segment holds (a bug) gives no bytes, which readers report as a damaged chunk.
    pub(crate) fn get(&self, loc: Loc) -> Bytes {
        let Some(s) = self.seg(loc.seg) else {
            debug_assert!(false, "head chunk {loc:?} in no segment");
            return Bytes::new();
        };
        let (off, end) = (loc.off as usize, loc.off as usize + loc.len as usize);
        if end <= s.written {
            return s.view.slice(off..end);
        }
        match s.pending.get(off.wrapping_sub(s.written)..end - s.written) {
            Some(b) if off >= s.written => Bytes::copy_from_slice(b),
            _ => {
                debug_assert!(false, "head chunk {loc:?} straddles a segment's written end");
                Bytes::new()
            }
        }
    }

    /// A chunk's bytes into `out` (cleared first) without touching the mapping: the head reads chunks it
    /// merges this way, so merging does not bring written pages into the resident set.
    pub(crate) fn read_into(&self, loc: Loc, out: &mut Vec<u8>) {
        use std::os::unix::fs::FileExt;
        out.clear();
        if let Some(s) = self.seg(loc.seg)
            && let Some((f, _, _)) = &s.file
            && (loc.off as usize + loc.len as usize) <= s.written
        {
            out.resize(loc.len as usize, 0);
            if f.read_exact_at(out, loc.off as u64).is_ok() {
                return;
            }
            out.clear();
        }
        out.extend_from_slice(&self.get(loc));
    }

    /// Deletes every segment (but the one being written) whose chunks all end before `t`: a head cut at
    /// `t` dropped them all.
    pub(crate) fn drop_before(&mut self, t: i64) {
        let last = self.segs.back().map(|s| s.id);
        self.segs.retain(|s| {
            let keep = Some(s.id) == last || s.maxt >= t;
            if !keep && let Some((_, path, _)) = &s.file {
                // Readers' slices keep the mapping valid after the unlink.
                if let Err(e) = std::fs::remove_file(path) {
                    tracing::warn!(file = %path.display(), error = %e, "could not delete a head chunk segment");
                }
            }
            keep
        });
    }

    /// Drops the mappings' pages from the resident set (they stay in the page cache).
    pub(crate) fn release_resident(&self) {
        for s in &self.segs {
            if let Some((_, _, m)) = &s.file {
                m.release_resident();
            }
        }
    }

    /// (bytes in the files, bytes held in RAM: pending or in memory segments), for `/metrics`.
    pub(crate) fn usage(&self) -> (u64, u64) {
        let mut bytes = 0u64;
        let mut ram = 0u64;
        for s in &self.segs {
            ram += s.pending.len() as u64;
            match s.file {
                Some(_) => bytes += s.written as u64,
                None => ram += s.written as u64,
            }
        }
        (bytes, ram)
    }
}

impl Drop for ChunkFiles {
    /// The files are of no use to a later process (it empties the directory); deleting them now frees the
    /// disk at once. Readers' slices keep the mappings valid.
    fn drop(&mut self) {
        for s in &self.segs {
            if let Some((_, path, _)) = &s.file {
                let _ = std::fs::remove_file(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(i: u32, len: usize) -> Vec<u8> {
        (0..len).map(|k| (i as usize * 31 + k) as u8).collect()
    }

    /// Writes chunks of many sizes, flushing now and then; every one reads back, before and after its
    /// flush, through `get` and `read_into`.
    fn round_trip(files: &mut ChunkFiles) {
        let mut locs = Vec::new();
        for i in 0..3000u32 {
            let data = chunk(i, 1 + (i as usize * 7919) % 3000);
            let loc = files.write(&data, i as i64);
            assert_eq!(&files.get(loc)[..], &data[..], "chunk {i} while pending");
            if let Some(p) = files.addr_of(loc) {
                assert_eq!(p, files.get(loc).as_ptr(), "chunk {i} while pending");
            }
            locs.push((loc, data));
            if i % 97 == 0 {
                files.flush();
            }
        }
        files.flush();
        let mut buf = Vec::new();
        for (i, (loc, data)) in locs.iter().enumerate() {
            assert_eq!(&files.get(*loc)[..], &data[..], "chunk {i}");
            // What a reader prefetches is where `get` reads from (every flushed chunk of a file segment
            // has an address; a memory segment's last chunks are copies while pending).
            match files.addr_of(*loc) {
                Some(p) => assert_eq!(p, files.get(*loc).as_ptr(), "chunk {i}"),
                None => assert!(files.dir.is_none(), "chunk {i}: a flushed chunk in a file has an address"),
            }
            files.read_into(*loc, &mut buf);
            assert_eq!(&buf[..], &data[..], "chunk {i} read without the mapping");
        }
    }

    #[test]
    fn chunks_read_back_from_files_and_from_memory() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut f = ChunkFiles::open(&dir.path().join(DIR), SEGMENT_BYTES).expect("open");
        round_trip(&mut f);
        let on_disk: u64 = std::fs::read_dir(dir.path().join(DIR)).expect("dir").map(|e| e.expect("entry").metadata().expect("md").len()).sum();
        let (bytes, ram) = f.usage();
        assert_eq!((on_disk, ram), (bytes, 0), "every byte in the files, none held in RAM");
        round_trip(&mut ChunkFiles::default());
    }

    #[test]
    fn a_chunk_bigger_than_a_segment_gets_its_own() {
        let dir = tempfile::tempdir().expect("tmp");
        for mut f in [ChunkFiles::default(), ChunkFiles::open(&dir.path().join(DIR), SEGMENT_BYTES).expect("open")] {
            let small = f.write(b"abc", 1);
            let big = chunk(9, SEGMENT_BYTES + 5);
            let l = f.write(&big, 2);
            let after = f.write(b"xyz", 3);
            f.flush();
            assert_ne!(small.seg, l.seg);
            assert_ne!(l.seg, after.seg);
            assert_eq!(&f.get(l)[..], &big[..]);
            assert_eq!((&f.get(small)[..], &f.get(after)[..]), (&b"abc"[..], &b"xyz"[..]));
        }
    }

    #[test]
    fn whole_segments_are_dropped_once_their_chunks_end_before_a_cut() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(DIR);
        let mut f = ChunkFiles::open(&path, SEGMENT_BYTES).expect("open");
        let data = vec![7u8; SEGMENT_BYTES / 4 + 1];
        // Three such chunks fit in a segment; times ascend.
        let locs: Vec<Loc> = (0..10).map(|t| f.write(&data, t)).collect();
        f.flush();
        let files = || std::fs::read_dir(&path).expect("dir").count();
        assert_eq!((f.segs.len(), files()), (4, 4));
        // A slice held across the drop stays readable.
        let held = f.get(locs[0]);
        f.drop_before(3);
        assert_eq!((f.segs.len(), files()), (3, 3), "the segment of times 0..=2 is gone");
        assert!(held.iter().all(|&b| b == 7));
        f.drop_before(i64::MAX);
        assert_eq!((f.segs.len(), files()), (1, 1), "the segment being written stays");
        assert_eq!(&f.get(locs[9])[..], &data[..]);
        f.release_resident();
        assert_eq!(&f.get(locs[9])[..], &data[..], "pages come back after being released");
        drop(f);
        assert_eq!(files(), 0, "a dropped head deletes its files");
    }

    #[test]
    fn earlier_segments_keep_no_write_buffer() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut f = ChunkFiles::open(&dir.path().join(DIR), 64 << 10).expect("open");
        // 1 MiB gathered in one commit, over sixteen 64 KiB segments.
        let locs: Vec<Loc> = (0..256).map(|i| f.write(&chunk(i, 4096), i as i64)).collect();
        f.flush();
        assert!(f.segs.len() >= 16);
        let n = f.segs.len();
        assert!(f.segs.iter().take(n - 1).all(|s| s.pending.capacity() == 0), "only the segment being written keeps a buffer");
        for (i, l) in locs.iter().enumerate() {
            assert_eq!(&f.get(*l)[..], &chunk(i as u32, 4096)[..]);
        }
    }

    #[test]
    fn segment_offsets_stay_in_32_bits() {
        let f = ChunkFiles::open(&tempfile::tempdir().expect("tmp").path().join(DIR), usize::MAX).expect("open");
        assert_eq!(f.segment_bytes, u32::MAX as usize);
    }

    #[test]
    fn opening_empties_the_directory() {
        let dir = tempfile::tempdir().expect("tmp");
        let path = dir.path().join(DIR);
        std::fs::create_dir_all(&path).expect("mkdir");
        std::fs::write(path.join("00000001"), b"left by an earlier process").expect("write");
        let mut f = ChunkFiles::open(&path, SEGMENT_BYTES).expect("open");
        let l = f.write(b"new", 1);
        f.flush();
        assert_eq!(&f.get(l)[..], b"new");
        assert_eq!(std::fs::read(path.join("00000001")).expect("read"), b"new");
    }

    #[test]
    fn a_failed_write_keeps_the_chunks_readable_and_is_retried() {
        let dir = tempfile::tempdir().expect("tmp");
        let mut f = ChunkFiles::open(&dir.path().join(DIR), SEGMENT_BYTES).expect("open");
        let a = f.write(b"first", 1);
        f.flush();
        // Swap the segment's file for a read-only handle: the next write fails.
        let path = f.segs[0].file.as_ref().expect("file").1.clone();
        let ro = File::open(&path).expect("open ro");
        let rw = std::mem::replace(&mut f.segs[0].file.as_mut().expect("file").0, ro);
        let b = f.write(b"second", 2);
        f.flush();
        assert!(f.failing);
        assert_eq!(f.usage().1, 6, "the unwritten chunk is held in RAM");
        assert_eq!((&f.get(a)[..], &f.get(b)[..]), (&b"first"[..], &b"second"[..]));
        f.segs[0].file.as_mut().expect("file").0 = rw;
        f.flush();
        assert!(!f.failing);
        assert_eq!(f.usage().1, 0);
        assert_eq!(&f.get(b)[..], b"second");
        assert_eq!(std::fs::read(&path).expect("read"), b"firstsecond");
    }
}
