//! The crate's only `unsafe`: mapping an immutable block file into memory.
//!
//! The mapping is wrapped into a [`Bytes`] (via `Bytes::from_owner`), so chunk data handed to readers are
//! zero-copy, reference-counted slices that keep the mapping alive as long as any of them lives, even after
//! the block was closed or its directory deleted (on Unix the pages stay valid after unlink).
#![allow(unsafe_code)]

use crate::Error;
use bytes::Bytes;
use std::fs::File;
use std::path::Path;

/// Maps the whole file at `path` read-only. An empty file gives an empty `Bytes` (mapping zero bytes is an
/// error on some platforms).
pub(crate) fn map_file(path: &Path) -> Result<Bytes, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: `Mmap::map` is unsafe because another process could modify or truncate the file while it is
    // mapped, changing memory we treat as immutable (or raising SIGBUS on truncation). Block files are
    // written once into a `.tmp` directory, fsynced and renamed into place; after that nothing in Tessera
    // writes to them again (tombstones are a separate file replaced by rename, and deleting a block unlinks
    // files, which leaves existing mappings valid). Every byte read from the mapping is still bounds- and
    // checksum-checked, so foreign modification yields a corruption error, not undefined parsing.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?;
    Ok(Bytes::from_owner(map))
}
