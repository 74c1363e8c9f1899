//! The crate's error type.

/// Why a chunk could not be decoded (or reopened). Offsets are byte offsets from the start of the chunk
/// (its 2-byte sample-count header included), so they can be added to a chunk's position in a file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChunkError {
    /// The bytes ended before the samples the header announces were all read.
    #[error("chunk truncated: data ended at byte offset {offset} before all announced samples were read")]
    Truncated { offset: usize },
    /// The encoding byte is one this build cannot decode (yet): e.g. native-histogram chunks.
    #[error("unsupported chunk encoding {0}")]
    UnsupportedEncoding(u8),
    /// A native-histogram chunk with a schema Prometheus reads but this build cannot decode yet (the
    /// reserved exponential schemas 9..=52, which upstream reduces to schema 8 on reading).
    #[error("unsupported native histogram schema {0}")]
    UnsupportedSchema(i32),
    /// The bytes are structurally impossible for the encoding (a field out of range).
    #[error("corrupt chunk at byte offset {offset}: {reason}")]
    Corrupt { offset: usize, reason: &'static str },
}
