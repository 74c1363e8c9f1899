//! Decoding any [`ChunkRef`], whatever its encoding: the one entry point readers (PromQL, remote read's
//! `SAMPLES` mode, the compactor) need so they never match on encodings themselves.

use crate::dense::{SliceDecoded, decode_dense_range_into};
use crate::error::ChunkError;
use crate::xor::{decode_xor_range_into, encode_xor};
use crate::xor_st::{decode_xor_st_range_into, decode_xor_st_samples_range_into};
use tessera_model::{ChunkEncoding, ChunkRef, Sample};

/// Decodes `c` (dispatching on [`ChunkRef::encoding`]), appending the samples with
/// `mint_ms <= t <= maxt_ms` (both inclusive) to `out`. On error `out` is left as it was.
///
/// XorSt chunks are decoded with their start timestamps dropped (use [`decode_chunk_range_st_into`] to
/// keep them). Native-histogram chunks (encodings 2 and 3) are [`ChunkError::UnsupportedEncoding`]: they hold no
/// float samples (read them with [`crate::HistogramIter`] / [`crate::FloatHistogramIter`]).
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
        ChunkEncoding::Decimal => crate::decimal::decode_decimal_range_into(&c.data, mint_ms, maxt_ms, out),
        ChunkEncoding::DecimalOpen => crate::decimal_open::decode_decimal_open_range_into(&c.data, mint_ms, maxt_ms, out),
        ChunkEncoding::XorSt => decode_xor_st_samples_range_into(&c.data, mint_ms, maxt_ms, out),
        other => Err(ChunkError::UnsupportedEncoding(other as u8)),
    }
}

/// Decodes `c`'s samples with `mint_ms <= t <= maxt_ms` into the start of `dst` (no allocation, no copy)
/// for the encodings that can (Dense, the cold blocks' default), returning how many were written and
/// whether every value is known to be finite; `Ok(None)` for the others, which the caller decodes into
/// a vector. A chunk with more samples in range than `dst` holds is an error.
pub fn decode_chunk_range_into_slice(
    c: &ChunkRef,
    mint_ms: i64,
    maxt_ms: i64,
    dst: &mut [Sample],
) -> Result<Option<SliceDecoded>, ChunkError> {
    match c.encoding {
        _ if mint_ms > maxt_ms || c.maxt_ms < mint_ms || c.mint_ms > maxt_ms => Ok(Some(SliceDecoded { len: 0, finite: true })),
        ChunkEncoding::Dense => crate::dense::decode_dense_range_into_slice(&c.data, mint_ms, maxt_ms, dst).map(Some),
        _ => Ok(None),
    }
}

/// The number of samples a float chunk's header claims, read without decoding (XOR's and XorSt's 2-byte
/// count, Dense's and Decimal's count); `None` for other encodings or an unreadable header. Readers use it to size work,
/// never to trust: decoding still checks everything.
pub fn chunk_sample_count(c: &ChunkRef) -> Option<usize> {
    match c.encoding {
        ChunkEncoding::Xor => c.data.get(..2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]]))),
        ChunkEncoding::Dense => crate::dense::dense_sample_count(&c.data).map(|n| n as usize),
        ChunkEncoding::Decimal => crate::decimal::decimal_sample_count(&c.data).map(|n| n as usize),
        ChunkEncoding::DecimalOpen => crate::decimal_open::decimal_open_sample_count(&c.data).map(|n| n as usize),
        ChunkEncoding::XorSt => Some(usize::from(crate::xor_st::XorStIter::new(&c.data).num_samples())),
        _ => None,
    }
}

/// Like [`decode_chunk_range_into`], also appending each sample's start timestamp to `sts` (same
/// positions as `out`; 0 = unset). Encodings without start timestamps push 0 for every sample. On
/// error both vectors are left as they were.
pub fn decode_chunk_range_st_into(
    c: &ChunkRef,
    mint_ms: i64,
    maxt_ms: i64,
    out: &mut Vec<Sample>,
    sts: &mut Vec<i64>,
) -> Result<(), ChunkError> {
    if c.encoding == ChunkEncoding::XorSt {
        if mint_ms > maxt_ms || c.maxt_ms < mint_ms || c.mint_ms > maxt_ms {
            return Ok(());
        }
        return decode_xor_st_range_into(&c.data, mint_ms, maxt_ms, out, sts);
    }
    let before = out.len();
    decode_chunk_range_into(c, mint_ms, maxt_ms, out)?;
    sts.resize(sts.len() + (out.len() - before), 0);
    Ok(())
}

/// The chunk as Prometheus XOR chunks, for senders that must speak Prometheus' encodings (remote read's
/// `STREAMED_XOR_CHUNKS`): an XOR chunk is returned as is (a cheap `Bytes` clone); a dense, decimal or XorSt
/// chunk (whose start timestamps XOR cannot carry, so they are dropped) is decoded and re-encoded in pieces of at most `max_samples` samples (clamped to 1..=`u16::MAX`), each
/// with its own exact `mint_ms`/`maxt_ms`. Histogram chunks are [`ChunkError::UnsupportedEncoding`].
pub fn to_xor_chunks(c: &ChunkRef, max_samples: usize) -> Result<Vec<ChunkRef>, ChunkError> {
    match c.encoding {
        ChunkEncoding::Xor => Ok(vec![c.clone()]),
        ChunkEncoding::Dense | ChunkEncoding::Decimal | ChunkEncoding::DecimalOpen | ChunkEncoding::XorSt => {
            let mut samples = Vec::new();
            // XorSt's start timestamps are dropped (the XOR wire chunk cannot carry them).
            decode_chunk_range_into(c, i64::MIN, i64::MAX, &mut samples)?;
            let per = max_samples.clamp(1, usize::from(u16::MAX));
            Ok(samples
                .chunks(per)
                .map(|part| ChunkRef {
                    mint_ms: part[0].t,
                    maxt_ms: part[part.len() - 1].t,
                    encoding: ChunkEncoding::Xor,
                    data: encode_xor(part).into(),
                })
                .collect())
        }
        other => Err(ChunkError::UnsupportedEncoding(other as u8)),
    }
}
