//! The crate's only `unsafe`: mapping an immutable block file into memory, and telling the kernel it may
//! drop the mapping's resident pages.
//!
//! The mapping is wrapped into a [`Bytes`] (via `Bytes::from_owner`), so chunk data handed to readers are
//! zero-copy, reference-counted slices that keep the mapping alive as long as any of them lives, even after
//! the block was closed or its directory deleted (on Unix the pages stay valid after unlink).
#![allow(unsafe_code)]

use crate::Error;
use bytes::Bytes;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

/// A mapped file: its bytes, and (for non-empty files) the mapping itself, kept for `madvise`.
pub(crate) struct Mapped {
    pub(crate) bytes: Bytes,
    map: Option<Arc<memmap2::Mmap>>,
}

/// Lets `Bytes` own a shared mapping.
struct Owner(Arc<memmap2::Mmap>);

impl AsRef<[u8]> for Owner {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

/// Maps the whole file at `path` read-only. An empty file gives an empty `Bytes` (mapping zero bytes is an
/// error on some platforms).
pub(crate) fn map_file(path: &Path) -> Result<Mapped, Error> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    if len == 0 {
        return Ok(Mapped { bytes: Bytes::new(), map: None });
    }
    // SAFETY: `Mmap::map` is unsafe because another process could modify or truncate the file while it is
    // mapped, changing memory we treat as immutable (or raising SIGBUS on truncation). Block files are
    // written once into a `.tmp` directory, fsynced and renamed into place; after that nothing in Tessera
    // writes to them again (tombstones are a separate file replaced by rename, and deleting a block unlinks
    // files, which leaves existing mappings valid). Every byte read from the mapping is still bounds- and
    // checksum-checked, so foreign modification yields a corruption error, not undefined parsing.
    let map = Arc::new(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(path, e))?);
    Ok(Mapped { bytes: Bytes::from_owner(Owner(map.clone())), map: Some(map) })
}

impl Mapped {
    /// Drops the mapping's pages from this process' resident set (they stay in the page cache and fault
    /// back in on the next access). Compaction calls this as it streams through inputs so that reading a
    /// multi-GiB block does not show up as multi-GiB RSS.
    pub(crate) fn release_resident(&self) {
        #[cfg(unix)]
        if let Some(m) = &self.map {
            // SAFETY: `MADV_DONTNEED` is "unchecked" in memmap2 because on private or anonymous mappings it
            // discards modified pages (they read back as zeros or as the file's original bytes). This
            // mapping is read-only and `MAP_SHARED` on a regular file that nobody writes (see `map_file`),
            // so no page is ever modified and a later access re-reads exactly the same bytes from the page
            // cache; slices held by readers on other threads stay valid.
            let _ = unsafe { m.unchecked_advise(memmap2::UncheckedAdvice::DontNeed) };
        }
    }
}
