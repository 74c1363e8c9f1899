//! `tessera-wal`: a segmented, checksummed write-ahead log of **opaque** byte records.
//!
//! The WAL knows nothing about series, samples or tombstones: the tsdb encodes those into records and
//! decodes them on replay. What this crate guarantees is the transport: a record handed to [`Wal::log`]
//! either comes back byte-for-byte from a [`WalReader`] after a crash, or (if the crash tore it) is cut
//! off cleanly together with everything after it in the same write, and the log keeps working.
//!
//! # Main types
//! - [`Wal`]: the single writer. Appends records to numbered segment files (`00000000`, `00000001`, …),
//!   starts a new segment when the current one would grow past [`WalOptions::segment_bytes`], fsyncs per
//!   [`FsyncPolicy`], and *poisons* itself after any failed write or fsync.
//! - [`WalReader`]: iterates the records of a range of segments in order, truncating a torn tail of the
//!   last segment (with a `tracing::warn!` naming file and offset) and reporting real damage as
//!   [`Corruption`] (file + byte offset), which [`repair`] turns into a usable log again.
//! - Checkpoints ([`write_checkpoint`], [`last_checkpoint`], [`read_all`]): a compacted snapshot of the
//!   records the tsdb still needs, written atomically so that older segments can be deleted.
//! - [`fs::WalFs`]: every file operation goes through this small trait; [`fs::RealFs`] is the real one and
//!   [`fault::FaultFs`] injects failed writes, torn writes and failed fsyncs in tests.
//!
//! The byte format is specified in `docs/format/wal.md`.
//!
//! # Key decisions
//! - **Records never span segments and are never split into pages** (unlike Prometheus' `wlog`, which cuts
//!   records into 32 KiB page fragments). Tessera's records are large batches, so a 12-byte frame per record
//!   is all the overhead there is, a record is one contiguous slice for the reader (no reassembly copy),
//!   and a record bigger than a segment simply gets a segment of its own.
//! - **The frame header has its own checksum.** A reader must tell a torn tail (crash mid-write: repair
//!   silently) from a flipped bit (corruption: report). With a checksummed header a damaged length field is
//!   detected as corruption instead of being mistaken for "the record runs past the end of the file".
//! - **Default fsync policy is `Interval(1s)`.** Every record is written with `write(2)` before `log`
//!   returns, so a crash of the *process* (SIGKILL, panic, OOM kill) loses nothing that was acknowledged.
//!   Only a crash of the *machine* can lose the page-cache tail, and then at most about one second of
//!   writes, the same trade Prometheus makes (its WAL fsyncs only when a segment is completed). `Always`
//!   costs one fsync per write (milliseconds on many disks) and would cap ingestion far below the target;
//!   `Never` is for benchmarks and for data that can be re-sent.
//! - **A failed write or fsync poisons the writer** ([`WalError::Poisoned`] from then on). After a failed
//!   fsync the kernel may already have dropped the dirty pages, so retrying could "succeed" while data is
//!   lost (the PostgreSQL fsyncgate lesson, followed by redb and fjall). The only way forward is to reopen,
//!   which replays and repairs the log.
#![forbid(unsafe_code)]

mod checkpoint;
mod error;
pub mod fault;
mod format;
pub mod fs;
mod reader;
mod writer;

pub use checkpoint::{
    last_checkpoint, read_all, read_all_at, read_all_at_with_fs, read_all_with_fs, write_checkpoint, write_checkpoint_with_fs, RecordAt, ReplayStats,
};
pub use error::{Corruption, CorruptionKind, WalError};
pub use format::{
    checkpoint_dir_name, segment_file_name, MAX_RECORD_BYTES, RECORD_HEADER_BYTES, SEGMENT_HEADER_BYTES, SEGMENT_MAGIC,
};
pub use reader::{repair, repair_with_fs, WalReader};
pub use writer::Wal;

use std::time::Duration;

/// When the writer calls fsync (`fdatasync`) on the active segment.
///
/// Whatever the policy, [`Wal::log`] returns only after the whole record has been handed to the kernel
/// with `write(2)`, so acknowledged records survive a crash of the process. The policy decides how much a
/// crash of the *machine* (power loss, kernel panic) can lose.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FsyncPolicy {
    /// fsync after every `log`/`log_many` call: nothing acknowledged is ever lost, at the price of one
    /// disk flush per call.
    Always,
    /// fsync from the writer when at least this long has passed since the last fsync (checked on each
    /// `log`, and by [`Wal::sync_if_due`] which an idle ticker may call). Loses at most about one interval
    /// of writes on a machine crash.
    Interval(Duration),
    /// Never fsync on its own (only [`Wal::sync`] and [`Wal::close`] do). For benchmarks and tests.
    Never,
}

impl Default for FsyncPolicy {
    /// `Interval(1s)`: see the crate documentation ("Key decisions") for why.
    fn default() -> Self {
        FsyncPolicy::Interval(Duration::from_secs(1))
    }
}

/// Options of a [`Wal`] writer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalOptions {
    /// A new segment is started when appending a record would make the current one larger than this.
    /// Default 128 MiB, the same as Prometheus. Must be at least [`WalOptions::MIN_SEGMENT_BYTES`].
    pub segment_bytes: u64,
    /// When to fsync; default `Interval(1s)`.
    pub fsync: FsyncPolicy,
}

impl WalOptions {
    /// Default segment size, 128 MiB.
    pub const DEFAULT_SEGMENT_BYTES: u64 = 128 << 20;
    /// Smallest accepted segment size (tests use tiny segments to exercise rotation).
    pub const MIN_SEGMENT_BYTES: u64 = 64;
}

impl Default for WalOptions {
    fn default() -> Self {
        WalOptions { segment_bytes: Self::DEFAULT_SEGMENT_BYTES, fsync: FsyncPolicy::default() }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn writer_and_reader_are_send() {
        fn assert_send<T: Send>() {}
        assert_send::<crate::Wal>();
        assert_send::<crate::WalReader>();
        assert_send::<crate::WalError>();
    }
}
