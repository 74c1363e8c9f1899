//! [`FaultFs`]: a [`WalFs`] over the real file system that injects failures on command, for crash and
//! fault tests (here and in the tsdb).
//!
//! Failures are planned through a shared [`FaultPlan`]: fail the Nth `write_all` call (optionally after
//! letting a prefix of the buffer reach the file, which is what a crash mid-write leaves behind), fail
//! fsyncs from the Nth on, or fail everything. Counters let a test aim at "the write after this one".

use crate::fs::{DirEntry, RealFs, WalFile, WalFs};
use std::io::{self, Read};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};

/// What to break, and counters of what happened. Write and sync numbers count from 0 across all files.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    /// Fail the `write_all` call with this number.
    pub fail_write_at: Option<u64>,
    /// Bytes of the failing write that still reach the file before the error (a torn write).
    pub torn_write_bytes: usize,
    /// Fail every `sync` call with a number >= this.
    pub fail_sync_from: Option<u64>,
    /// Fail file creation (new segments, checkpoint files).
    pub fail_create: bool,
    /// `write_all` calls seen so far (including failed ones).
    pub writes: u64,
    /// `sync` calls seen so far (including failed ones).
    pub syncs: u64,
}

/// A fault-injecting file system; cheap to clone, clones share one plan.
#[derive(Clone, Debug, Default)]
pub struct FaultFs {
    plan: Arc<Mutex<FaultPlan>>,
}

impl FaultFs {
    /// A fault-free file system to be armed later through [`FaultFs::plan`].
    pub fn new() -> Self {
        Self::default()
    }

    /// The shared plan, to arm faults and read counters. Do not hold the guard across WAL calls (or hold
    /// two at once): the fault file locks the same mutex.
    pub fn plan(&self) -> MutexGuard<'_, FaultPlan> {
        // A poisoned lock only means another test thread panicked; the plan itself is still valid.
        self.plan.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `write_all` calls so far.
    pub fn writes(&self) -> u64 {
        self.plan().writes
    }

    /// `sync` calls so far.
    pub fn syncs(&self) -> u64 {
        self.plan().syncs
    }

    /// Makes the next `write_all` fail after `torn_bytes` of its buffer reached the file.
    pub fn fail_next_write(&self, torn_bytes: usize) {
        let mut p = self.plan();
        p.fail_write_at = Some(p.writes);
        p.torn_write_bytes = torn_bytes;
    }

    /// Makes every `sync` from now on fail.
    pub fn fail_syncs_from_now(&self) {
        let mut p = self.plan();
        p.fail_sync_from = Some(p.syncs);
    }

    fn injected(what: &str) -> io::Error {
        io::Error::other(format!("injected fault: {what}"))
    }
}

struct FaultFile {
    inner: Box<dyn WalFile>,
    plan: Arc<Mutex<FaultPlan>>,
}

impl WalFile for FaultFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let torn = {
            let mut p = self.plan.lock().unwrap_or_else(|e| e.into_inner());
            let n = p.writes;
            p.writes += 1;
            (p.fail_write_at == Some(n)).then_some(p.torn_write_bytes.min(buf.len()))
        };
        match torn {
            None => self.inner.write_all(buf),
            Some(prefix) => {
                self.inner.write_all(&buf[..prefix])?;
                Err(FaultFs::injected("write"))
            }
        }
    }

    fn sync(&mut self) -> io::Result<()> {
        let fail = {
            let mut p = self.plan.lock().unwrap_or_else(|e| e.into_inner());
            let n = p.syncs;
            p.syncs += 1;
            p.fail_sync_from.is_some_and(|from| n >= from)
        };
        if fail { Err(FaultFs::injected("fsync")) } else { self.inner.sync() }
    }
}

impl WalFs for FaultFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        RealFs.create_dir_all(dir)
    }
    fn list(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        RealFs.list(dir)
    }
    fn create(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        if self.plan().fail_create {
            return Err(Self::injected("create"));
        }
        Ok(Box::new(FaultFile { inner: RealFs.create(path)?, plan: Arc::clone(&self.plan) }))
    }
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        RealFs.open_read(path)
    }
    fn file_len(&self, path: &Path) -> io::Result<u64> {
        RealFs.file_len(path)
    }
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        RealFs.truncate(path, len)
    }
    fn remove_file(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_file(path)
    }
    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        RealFs.remove_dir_all(path)
    }
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        RealFs.rename(from, to)
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        RealFs.sync_dir(dir)
    }
}
