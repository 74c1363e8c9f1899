//! The file-system seam. Everything the WAL does to disk goes through [`WalFs`], so tests can swap in
//! [`crate::fault::FaultFs`] to fail the Nth write, tear a write half-way, or fail an fsync, and prove that
//! the writer poisons itself and that the reader recovers.
//!
//! The trait is deliberately small and synchronous: the WAL only creates files, appends to them, syncs
//! them, reads them front to back, truncates them, and lists/removes/renames directory entries.

use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::Path;

/// A file opened for appending by the WAL writer.
pub trait WalFile: Send {
    /// Writes all of `buf` at the end of the file (looping over short writes). On error, any prefix of
    /// `buf` may have reached the file.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes everything written so far durable (`fdatasync`).
    fn sync(&mut self) -> io::Result<()>;
}

/// One entry of a directory listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirEntry {
    /// File name (not the full path).
    pub name: String,
    /// Whether the entry is a directory.
    pub is_dir: bool,
}

/// File-system operations used by the WAL. Implementations must be usable from several threads.
pub trait WalFs: Send + Sync + fmt::Debug {
    /// `mkdir -p`.
    fn create_dir_all(&self, dir: &Path) -> io::Result<()>;
    /// The entries of `dir`, in no particular order.
    fn list(&self, dir: &Path) -> io::Result<Vec<DirEntry>>;
    /// Creates a new, empty file for appending; fails if it already exists.
    fn create(&self, path: &Path) -> io::Result<Box<dyn WalFile>>;
    /// Opens a file for sequential reading.
    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>>;
    /// Current length of a file in bytes.
    fn file_len(&self, path: &Path) -> io::Result<u64>;
    /// Shrinks a file to `len` bytes and makes the new length durable.
    fn truncate(&self, path: &Path, len: u64) -> io::Result<()>;
    /// Deletes a file.
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Deletes a directory and everything in it.
    fn remove_dir_all(&self, path: &Path) -> io::Result<()>;
    /// Atomically renames `from` to `to` (same file system).
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// fsyncs a directory, making created/removed/renamed entries in it durable.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system (`std::fs`).
#[derive(Clone, Copy, Debug, Default)]
pub struct RealFs;

struct RealFile(File);

impl WalFile for RealFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }
    fn sync(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl WalFs for RealFs {
    fn create_dir_all(&self, dir: &Path) -> io::Result<()> {
        fs::create_dir_all(dir)
    }

    fn list(&self, dir: &Path) -> io::Result<Vec<DirEntry>> {
        let mut out = Vec::new();
        for e in fs::read_dir(dir)? {
            let e = e?;
            // Names that are not UTF-8 cannot be ours; skip them rather than fail the listing.
            let Ok(name) = e.file_name().into_string() else { continue };
            out.push(DirEntry { name, is_dir: e.file_type()?.is_dir() });
        }
        Ok(out)
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn WalFile>> {
        let f = OpenOptions::new().append(true).create_new(true).open(path)?;
        Ok(Box::new(RealFile(f)))
    }

    fn open_read(&self, path: &Path) -> io::Result<Box<dyn Read + Send>> {
        Ok(Box::new(File::open(path)?))
    }

    fn file_len(&self, path: &Path) -> io::Result<u64> {
        Ok(fs::metadata(path)?.len())
    }

    fn truncate(&self, path: &Path, len: u64) -> io::Result<()> {
        let f = OpenOptions::new().write(true).open(path)?;
        f.set_len(len)?;
        f.sync_all()
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        fs::remove_file(path)
    }

    fn remove_dir_all(&self, path: &Path) -> io::Result<()> {
        fs::remove_dir_all(path)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        fs::rename(from, to)
    }

    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        // Opening a directory read-only and calling fsync on it is how POSIX persists its entries.
        File::open(dir)?.sync_all()
    }
}
