//! The crate's one error type. Every fallible function of `tessera-tsdb` returns [`Error`].
//!
//! Rejected samples (out of order, too old, duplicate, out of bounds) are *not* errors: they are reported
//! per batch in a `CommitReport`, because the rest of the batch is written and the caller answers 400, not
//! 500. An [`Error`] means the operation itself failed; [`Error::Poisoned`] in particular means the shard
//! can no longer accept writes (a WAL write or fsync failed) and every later write will fail fast with it.

use std::path::PathBuf;

/// Errors of the storage engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// On-disk data failed a checksum or could not be parsed; names the file and the byte offset.
    #[error("corruption in {file} at offset {offset}: {reason}")]
    Corruption { file: String, offset: u64, reason: String },

    /// An I/O operation on `path` failed.
    #[error("i/o error on {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// A shard cannot accept writes any more because a WAL write or fsync failed earlier. Reads still work.
    #[error("storage is poisoned (writes refused): {0}")]
    Poisoned(String),

    /// The options (or the options recorded on disk) do not allow opening the database.
    #[error("invalid options: {0}")]
    InvalidOptions(String),

    /// The write-ahead log failed (the message carries the WAL's own error).
    #[error("wal: {0}")]
    Wal(#[source] Box<dyn std::error::Error + Send + Sync + 'static>),

    /// An error from the read interface (e.g. while reading a block during compaction).
    #[error(transparent)]
    Storage(#[from] tessera_model::StorageError),

    /// The database was closed.
    #[error("database is closed")]
    Closed,

    /// Anything else, with a readable reason.
    #[error("{0}")]
    Other(String),
}

impl Error {
    /// An [`Error::Io`] for `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }

    /// An [`Error::Corruption`] in `file` at `offset`.
    pub fn corruption(file: impl std::fmt::Display, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corruption { file: file.to_string(), offset, reason: reason.into() }
    }

    /// True for [`Error::Poisoned`] (the server answers 5xx and stops retrying into this shard).
    pub fn is_poisoned(&self) -> bool {
        matches!(self, Error::Poisoned(_))
    }
}

/// Convenience alias.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl From<Error> for tessera_model::StorageError {
    fn from(e: Error) -> Self {
        use tessera_model::StorageError as S;
        match e {
            Error::Corruption { file, offset, reason } => S::Corruption { file, offset, reason },
            Error::Io { .. } => S::Io(e.to_string()),
            Error::Poisoned(m) => S::Poisoned(m),
            Error::Storage(s) => s,
            other => S::Other(other.to_string()),
        }
    }
}
