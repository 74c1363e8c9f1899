//! Error types of the WAL. Corruption always names the file and the byte offset.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Every error of this crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// An I/O operation failed. If it was a write or fsync of the writer, the [`crate::Wal`] is now poisoned.
    #[error("WAL I/O error on {}: {source}", path.display())]
    Io {
        /// The file or directory the operation was on.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A record or segment is damaged in a way a crash cannot explain; see [`crate::repair`].
    #[error(transparent)]
    Corruption(#[from] Corruption),
    /// An earlier write or fsync failed; the writer refuses all further work. Reopen the WAL.
    #[error("WAL writer is poisoned by an earlier failed write or fsync; reopen the WAL to continue")]
    Poisoned,
    /// A record longer than [`crate::MAX_RECORD_BYTES`].
    #[error("WAL record of {len} bytes exceeds the maximum of {max} bytes")]
    RecordTooLarge {
        /// Length of the rejected record.
        len: usize,
        /// The maximum.
        max: usize,
    },
    /// Options out of range.
    #[error("invalid WAL options: {0}")]
    InvalidOptions(String),
}

impl WalError {
    pub(crate) fn io(path: impl Into<PathBuf>, source: io::Error) -> Self {
        WalError::Io { path: path.into(), source }
    }

    /// The corruption details, if this is a corruption error.
    pub fn as_corruption(&self) -> Option<&Corruption> {
        match self {
            WalError::Corruption(c) => Some(c),
            _ => None,
        }
    }
}

/// Where and how a WAL file is damaged. Pass it to [`crate::repair`] to cut the log at this point.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("corrupt WAL: {kind} in {} at byte offset {offset}", path.display())]
pub struct Corruption {
    /// Index of the damaged segment (the number in its file name).
    pub segment: u64,
    /// Full path of the damaged segment file (inside the WAL dir or a checkpoint dir).
    pub path: PathBuf,
    /// Byte offset in that file where the first bad record (or segment header) starts.
    pub offset: u64,
    /// What is wrong.
    pub kind: CorruptionKind,
}

impl Corruption {
    /// Whether the damage is inside a checkpoint directory rather than in a WAL segment. After a
    /// [`crate::read_all`] stopped on such damage, the segments after the checkpoint were not replayed yet.
    pub fn in_checkpoint(&self) -> bool {
        self.path
            .parent()
            .and_then(|d| d.file_name())
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(crate::format::CHECKPOINT_PREFIX))
    }
}

/// The kind of damage found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CorruptionKind {
    /// The 8-byte segment header is not `TWAL` + a known version.
    BadSegmentHeader,
    /// The record header's own checksum does not match (length field unreliable).
    HeaderChecksum,
    /// The payload's CRC32C does not match.
    PayloadChecksum,
    /// A record is cut off at the end of a segment that is not the last one, or of a checkpoint.
    Truncated,
    /// Segment numbers are not consecutive: this segment follows a missing one.
    SegmentGap,
}

impl fmt::Display for CorruptionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CorruptionKind::BadSegmentHeader => "bad segment header",
            CorruptionKind::HeaderChecksum => "record header checksum mismatch",
            CorruptionKind::PayloadChecksum => "record payload CRC32C mismatch",
            CorruptionKind::Truncated => "record truncated before end of a non-final segment",
            CorruptionKind::SegmentGap => "missing preceding segment",
        })
    }
}
