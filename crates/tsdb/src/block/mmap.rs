//! The crate's only `unsafe`: mapping an immutable block file (or a head chunk file that only grows) into
//! memory, telling the kernel it may drop the mapping's resident pages, asking the C allocator to
//! give its free pages back ([`release_free_heap`]), and prefetch hints for readers ([`prefetch`]).
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

/// Maps `len` bytes of `file` (at `path`, for errors) read-only, however short the file is now: the head's
/// chunk files ([`crate::head::chunk_files`]) are appended to after they are mapped.
pub(crate) fn map_growing(file: &File, path: &Path, len: usize) -> Result<Mapped, Error> {
    if len == 0 {
        return Ok(Mapped { bytes: Bytes::new(), map: None });
    }
    // SAFETY: as for `map_file`, plus: the mapping may extend past the file's end, where an access raises
    // SIGBUS. The only writer is the owning `ChunkFiles`, which appends with `pwrite` (the page cache is
    // shared with the mapping, so written bytes are visible through it at once) and hands out slices of
    // the mapping only for bytes it has written; no slice ever reaches past the end of the file, and no
    // written byte is written again. Nothing else writes these files: they live in the shard's
    // `chunks_head` directory, which is emptied when the shard opens.
    let map = Arc::new(unsafe { memmap2::MmapOptions::new().len(len).map(file) }.map_err(|e| Error::io(path, e))?);
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

/// Asks glibc's allocator to return the free pages inside its heaps to the kernel (`malloc_trim(0)`);
/// returns whether it released any. The head frees and reallocates small buffers all the time (open
/// chunks growing and being fitted at every cut, series created and dropped), which leaves free pages
/// scattered through glibc's arenas that it keeps resident on its own: on the 3-hour fleet backfill a
/// trim took the server from 264 to 211 MB. Does nothing (false) with another C library.
pub fn release_free_heap() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `malloc_trim` only walks and trims glibc's own arenas under their locks; it takes no
        // pointer and is safe to call from any thread at any time.
        unsafe { libc::malloc_trim(0) == 1 }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}

/// Asks the CPU to bring the cache line at `p` into its caches ahead of a read, so that walking series
/// scattered over the heap overlaps their cache misses instead of taking them one after another.
#[inline(always)]
pub(crate) fn prefetch<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it never faults, reads nothing into the program and may be given
    // any address, valid or not.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast::<i8>())
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[cfg(test)]
mod tests {
    /// Free pages between live allocations are what the trim gives back: with every other 64 KiB block
    /// of 64 MiB freed (the live ones keep the heap from shrinking at its top), glibc says it released some.
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    #[test]
    fn a_trim_returns_free_pages_between_live_blocks() {
        let mut blocks: Vec<Option<Vec<u8>>> = (0..1024).map(|i| Some(vec![i as u8; 64 << 10])).collect();
        for b in blocks.iter_mut().step_by(2) {
            *b = None;
        }
        assert!(super::release_free_heap());
        // The live blocks are untouched.
        for (i, b) in blocks.iter().enumerate().skip(1).step_by(2) {
            assert!(b.as_ref().expect("kept").iter().all(|&x| x == i as u8));
        }
    }
}
