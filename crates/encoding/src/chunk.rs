//! Decoding any [`ChunkRef`], whatever its encoding: the one entry point readers (PromQL, remote read's
//! `SAMPLES` mode, the compactor) need so they never match on encodings themselves.

use crate::dense::decode_dense_range_into;
use crate::error::ChunkError;
use crate::xor::decode_xor_range_into;
use tessera_model::{ChunkEncoding, ChunkRef, Sample};

/// Decodes `c` (dispatching on [`ChunkRef::encoding`]), appending the samples with
/// `mint_ms <= t <= maxt_ms` (both inclusive) to `out`. On error `out` is left as it was.
///
/// Native-histogram chunks (encodings 2 and 3) are [`ChunkError::UnsupportedEncoding`] for now.
pub fn decode_chunk_range_into(
    c: &ChunkRef,
    mint_ms: i64,
    maxt_ms: i64,
    out: &mut Vec<Sample>,
) -> Result<(), ChunkError> {
    if mint_ms > maxt_ms || c.maxt_ms < mint_ms || c.mint_ms > maxt_ms {
        // Nothing of this chunk can be in range (its bounds are inclusive); skip decoding entirely.
        return Ok(());
    }
    match c.encoding {
        ChunkEncoding::Xor => decode_xor_range_into(&c.data, mint_ms, maxt_ms, out),
        ChunkEncoding::Dense => decode_dense_range_into(&c.data, mint_ms, maxt_ms, out),
        other => Err(ChunkError::UnsupportedEncoding(other as u8)),
    }
}
