//! [`Wal`]: the single writer of a WAL directory.
//!
//! Every `log`/`log_many` call frames its records into one reusable buffer and hands it to the file with
//! one `write_all` per segment touched (normally one), so the per-record cost is a 12-byte header, two
//! CRC32C computations and a memcpy, with no allocation once the buffer has grown to the batch size.

use crate::error::WalError;
use crate::format::{encode_record, parse_checkpoint_name, segment_file_name, segment_header, MAX_RECORD_BYTES, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES};
use crate::fs::{RealFs, WalFile, WalFs};
use crate::reader::{list_segments, WalReader};
use crate::{FsyncPolicy, WalOptions};
use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Past this capacity the write buffer is shrunk back after use, so one huge record does not pin memory.
const KEEP_BUFFER_BYTES: usize = 8 << 20;

/// The writer of a WAL directory. One per directory; `Send`, so it can live behind a `Mutex`.
///
/// Contract:
/// - `log`/`log_many` return `Ok` only after every byte of the records was written to the file with
///   `write(2)` (durable against a process crash), and after an fsync if the policy asks for one.
/// - Records are appended in call order; records of one `log_many` call are contiguous.
/// - Any failed write or fsync **poisons** the writer: that call returns the I/O error, and every later
///   call (except [`Wal::segment_range`], [`Wal::size_bytes`], [`Wal::dir`], [`Wal::is_poisoned`]) returns
///   [`WalError::Poisoned`]. The on-disk log stays readable: a partially written record is a torn tail the
///   next replay truncates. To continue, drop the writer, replay, and [`Wal::open`] again.
/// - Do not run a [`WalReader`] on the directory while the writer is open (the reader repairs torn tails
///   in place). Dropping the writer without [`Wal::close`] makes a best-effort fsync unless the policy is
///   `Never`.
pub struct Wal {
    fs: Arc<dyn WalFs>,
    dir: PathBuf,
    opts: WalOptions,
    file: Option<Box<dyn WalFile>>,
    /// Index of the active segment.
    index: u64,
    /// Bytes in the active segment.
    seg_bytes: u64,
    /// Older segments still on disk: (index, bytes), ascending.
    closed: VecDeque<(u64, u64)>,
    buf: Vec<u8>,
    last_sync: Instant,
    /// Bytes written to the active segment since its last fsync.
    unsynced: bool,
    poisoned: bool,
}

impl std::fmt::Debug for Wal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wal")
            .field("dir", &self.dir)
            .field("opts", &self.opts)
            .field("segment", &self.index)
            .field("segment_bytes", &self.seg_bytes)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl Wal {
    /// Opens (creating it if needed) the WAL in `dir` for appending.
    ///
    /// The last existing segment is scanned and a torn tail truncated (as replay would); new records go
    /// to a fresh segment numbered after the last one (and never below the latest checkpoint's index, so
    /// that replay from that checkpoint sees them). Returns [`WalError::Corruption`] if the last segment is
    /// damaged in a way that needs [`crate::repair`]. Normally the tsdb replays with [`crate::read_all`]
    /// first (repairing if needed) and opens the writer afterwards.
    pub fn open(dir: &Path, opts: WalOptions) -> Result<Wal, WalError> {
        Self::open_with_fs(Arc::new(RealFs), dir, opts)
    }

    /// [`Wal::open`] through a given file system (tests inject faults this way).
    pub fn open_with_fs(fs: Arc<dyn WalFs>, dir: &Path, opts: WalOptions) -> Result<Wal, WalError> {
        if opts.segment_bytes < WalOptions::MIN_SEGMENT_BYTES {
            return Err(WalError::InvalidOptions(format!(
                "segment_bytes {} is below the minimum of {}",
                opts.segment_bytes,
                WalOptions::MIN_SEGMENT_BYTES
            )));
        }
        if let FsyncPolicy::Interval(d) = opts.fsync
            && d.is_zero()
        {
            return Err(WalError::InvalidOptions("fsync interval must be > 0 (use FsyncPolicy::Always)".into()));
        }
        fs.create_dir_all(dir).map_err(|e| WalError::io(dir, e))?;
        let segments = list_segments(fs.as_ref(), dir)?;
        if let Some(&last) = segments.last() {
            // Repair a torn tail now: once a newer segment exists, a torn record here would be reported as
            // corruption instead (only the last segment may legitimately be torn).
            let mut r = WalReader::with_fs(Arc::clone(&fs), dir, last, true)?;
            while r.next_record()?.is_some() {}
        }
        let mut closed = VecDeque::with_capacity(segments.len());
        for &s in &segments {
            let p = dir.join(segment_file_name(s));
            closed.push_back((s, fs.file_len(&p).map_err(|e| WalError::io(&p, e))?));
        }
        let mut next = segments.last().map_or(0, |l| l + 1);
        if let Some(&(last, bytes)) = closed.back()
            && bytes < SEGMENT_HEADER_BYTES
        {
            // An empty last segment (crash before its header was written, or a torn header just
            // truncated) is replaced rather than left behind: readers treat an empty segment that is not
            // the last one as lost data.
            let p = dir.join(segment_file_name(last));
            fs.remove_file(&p).map_err(|e| WalError::io(&p, e))?;
            closed.pop_back();
            next = last;
        }
        let checkpoint_floor = latest_checkpoint_index(fs.as_ref(), dir)?.unwrap_or(0);
        let index = next.max(checkpoint_floor);
        let mut wal = Wal {
            fs,
            dir: dir.to_path_buf(),
            opts,
            file: None,
            index,
            seg_bytes: 0,
            closed,
            buf: Vec::new(),
            last_sync: Instant::now(),
            unsynced: false,
            poisoned: false,
        };
        wal.create_segment(index)?;
        Ok(wal)
    }

    /// Appends one record. See the type's contract for ordering, durability and poisoning.
    pub fn log(&mut self, record: &[u8]) -> Result<(), WalError> {
        self.log_many(&[record])
    }

    /// Appends several records, with one `write(2)` per segment touched (one unless a segment fills up).
    /// On error, any prefix of the records may be on disk (replay sees a prefix, possibly with a torn
    /// tail that it truncates).
    pub fn log_many(&mut self, records: &[&[u8]]) -> Result<(), WalError> {
        self.check_poisoned()?;
        if let Some(r) = records.iter().find(|r| r.len() > MAX_RECORD_BYTES) {
            return Err(WalError::RecordTooLarge { len: r.len(), max: MAX_RECORD_BYTES });
        }
        self.buf.clear();
        for rec in records {
            let frame = (RECORD_HEADER_BYTES + rec.len()) as u64;
            let pending = self.buf.len() as u64;
            // A record never spans segments; one larger than a segment gets a (non-empty-free) segment alone.
            if self.seg_bytes + pending + frame > self.opts.segment_bytes
                && self.seg_bytes + pending > SEGMENT_HEADER_BYTES
            {
                self.flush_buf()?;
                self.rotate()?;
            }
            encode_record(&mut self.buf, rec);
        }
        self.flush_buf()?;
        if self.buf.capacity() > KEEP_BUFFER_BYTES {
            self.buf = Vec::new();
        }
        self.sync_per_policy()
    }

    /// fsyncs the active segment now. A failure poisons the writer.
    pub fn sync(&mut self) -> Result<(), WalError> {
        self.check_poisoned()?;
        self.sync_file()
    }

    /// fsyncs if the policy is `Interval(d)`, data is unsynced and `d` has passed since the last fsync.
    /// Meant for a ticker of the owner, so that the tail of an idle WAL is not left unsynced forever.
    pub fn sync_if_due(&mut self) -> Result<(), WalError> {
        self.check_poisoned()?;
        match self.opts.fsync {
            FsyncPolicy::Interval(d) if self.unsynced && self.last_sync.elapsed() >= d => self.sync_file(),
            _ => Ok(()),
        }
    }

    /// Whether appending a record of `len` bytes now would start a new segment first (a record never
    /// spans segments). Lets a caller whose encoding depends on the segment a record lands in (the
    /// tsdb's value context) start the segment itself ([`Wal::next_segment`]) and encode for it.
    pub fn would_rotate(&self, len: usize) -> bool {
        let frame = (RECORD_HEADER_BYTES + len) as u64;
        self.seg_bytes + frame > self.opts.segment_bytes && self.seg_bytes > SEGMENT_HEADER_BYTES
    }

    /// `(first, last)` segment indices on disk; `last` is the active segment.
    pub fn segment_range(&self) -> (u64, u64) {
        (self.closed.front().map_or(self.index, |c| c.0), self.index)
    }

    /// Finishes the active segment (fsyncing it unless the policy is `Never`) and starts a new one;
    /// returns the new segment's index. Used before a checkpoint so that it can cover every older segment.
    pub fn next_segment(&mut self) -> Result<u64, WalError> {
        self.check_poisoned()?;
        self.rotate()?;
        Ok(self.index)
    }

    /// Deletes the segments with index `< segment`, never the active one (so `segment` is effectively
    /// capped at the active index). A failed deletion returns the error but does not poison the writer:
    /// no data written through it is at risk; the call can be retried.
    pub fn truncate_before(&mut self, segment: u64) -> Result<(), WalError> {
        self.check_poisoned()?;
        while let Some(&(idx, _)) = self.closed.front() {
            if idx >= segment {
                break;
            }
            let p = self.dir.join(segment_file_name(idx));
            match self.fs.remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                Err(e) => return Err(WalError::io(&p, e)),
            }
            self.closed.pop_front();
        }
        Ok(())
    }

    /// Total bytes of all segments on disk (as tracked by this writer).
    pub fn size_bytes(&self) -> u64 {
        self.closed.iter().map(|c| c.1).sum::<u64>() + self.seg_bytes
    }

    /// The WAL directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Whether an earlier failure poisoned the writer.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }

    /// The options the writer was opened with.
    pub fn options(&self) -> WalOptions {
        self.opts
    }

    /// fsyncs (whatever the policy) and closes the writer.
    pub fn close(mut self) -> Result<(), WalError> {
        self.check_poisoned()?;
        let r = self.sync_file();
        self.file = None;
        r
    }

    fn check_poisoned(&self) -> Result<(), WalError> {
        if self.poisoned { Err(WalError::Poisoned) } else { Ok(()) }
    }

    fn segment_path(&self) -> PathBuf {
        self.dir.join(segment_file_name(self.index))
    }

    /// Writes `buf` to the active segment and clears it.
    fn flush_buf(&mut self) -> Result<(), WalError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let file = self.file.as_mut().expect("an unpoisoned writer always has an active segment");
        if let Err(e) = file.write_all(&self.buf) {
            self.poisoned = true;
            return Err(WalError::io(self.segment_path(), e));
        }
        self.seg_bytes += self.buf.len() as u64;
        self.unsynced = true;
        self.buf.clear();
        Ok(())
    }

    fn sync_per_policy(&mut self) -> Result<(), WalError> {
        match self.opts.fsync {
            FsyncPolicy::Always => self.sync_file(),
            FsyncPolicy::Interval(d) if self.last_sync.elapsed() >= d => self.sync_file(),
            _ => Ok(()),
        }
    }

    fn sync_file(&mut self) -> Result<(), WalError> {
        let Some(file) = self.file.as_mut() else { return Ok(()) };
        if self.unsynced {
            if let Err(e) = file.sync() {
                self.poisoned = true;
                return Err(WalError::io(self.segment_path(), e));
            }
            self.unsynced = false;
        }
        self.last_sync = Instant::now();
        Ok(())
    }

    /// Finishes the active segment and creates the next one.
    fn rotate(&mut self) -> Result<(), WalError> {
        if self.opts.fsync != FsyncPolicy::Never {
            // The interval timer only ever syncs the active segment, so a finished one is synced now.
            self.sync_file()?;
        }
        self.file = None;
        self.closed.push_back((self.index, self.seg_bytes));
        self.create_segment(self.index + 1)
    }

    /// Creates segment `index` with its header and makes it the active one. Poisons on failure.
    fn create_segment(&mut self, index: u64) -> Result<(), WalError> {
        self.index = index;
        self.seg_bytes = 0;
        let path = self.segment_path();
        let result = (|| {
            let mut f = self.fs.create(&path)?;
            f.write_all(&segment_header())?;
            if self.opts.fsync != FsyncPolicy::Never {
                // Make the new directory entry durable, or a later fsync of the file could be in vain.
                self.fs.sync_dir(&self.dir)?;
            }
            Ok::<_, io::Error>(f)
        })();
        match result {
            Ok(f) => {
                self.file = Some(f);
                self.seg_bytes = SEGMENT_HEADER_BYTES;
                self.unsynced = true;
                Ok(())
            }
            Err(e) => {
                self.poisoned = true;
                Err(WalError::io(path, e))
            }
        }
    }
}

impl Drop for Wal {
    fn drop(&mut self) {
        if !self.poisoned
            && self.opts.fsync != FsyncPolicy::Never
            && let Err(e) = self.sync_file()
        {
            tracing::warn!(dir = %self.dir.display(), error = %e, "WAL: fsync on drop failed");
        }
    }
}

/// Highest finished checkpoint index in `dir`.
pub(crate) fn latest_checkpoint_index(fs: &dyn WalFs, dir: &Path) -> Result<Option<u64>, WalError> {
    let entries = match fs.list(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(WalError::io(dir, e)),
    };
    Ok(entries.iter().filter(|e| e.is_dir).filter_map(|e| parse_checkpoint_name(&e.name)).max())
}
