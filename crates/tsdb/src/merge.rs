//! Merging one series' chunks from the head and the blocks into the sorted, non-overlapping, fully-live
//! chunk list the read contract promises ([`finalize_chunks_st`]), used by the querier and by compaction.
//!
//! Key decision: chunks pass through untouched (cloning a `Bytes` handle, zero-copy out of mmap'd blocks)
//! unless something forces a re-encode: overlapping chunks, out-of-order samples still in the head, or a
//! tombstone cutting into a chunk. Then the series' samples are decoded once, merged (in-order data wins
//! over an out-of-order sample at the same timestamp), filtered and re-encoded in 120-sample chunks.
//!
//! Start timestamps survive a re-encode: chunks are decoded with their STs (0 for encodings without),
//! and each re-encoded chunk is XorSt when one of its samples has an ST ≠ 0, XOR otherwise
//! ([`encode_chunks_st`]).

use tessera_encoding::{decode_chunk_range_st_into, encode_xor, encode_xor_st};
use tessera_model::{ChunkEncoding, ChunkRef, Sample};

use crate::error::{Error, Result};
use crate::head::SAMPLES_PER_CHUNK;
use crate::tombstones::Interval;

/// Sorts `chunks`, merges `extra` (out-of-order samples; `extra_sts[i]` is `extra[i]`'s start
/// timestamp, 0 = unset, an empty `extra_sts` means none) into them and removes the samples inside
/// `deleted`; re-encodes only when needed (see the module docs).
pub(crate) fn finalize_chunks_st(
    mut chunks: Vec<ChunkRef>,
    extra: &[Sample],
    extra_sts: &[i64],
    deleted: &[Interval],
) -> Result<Vec<ChunkRef>> {
    chunks.sort_by_key(|c| c.mint_ms);
    let overlapping = chunks.windows(2).any(|w| w[1].mint_ms <= w[0].maxt_ms);
    let cut = deleted.iter().any(|iv| chunks.iter().any(|c| iv.overlaps(c.mint_ms, c.maxt_ms)));
    if extra.is_empty() && !overlapping && !cut {
        return Ok(chunks);
    }
    let mut samples: Vec<Sample> = Vec::new();
    let mut sts: Vec<i64> = Vec::new();
    for c in &chunks {
        decode_chunk_range_st_into(c, i64::MIN, i64::MAX, &mut samples, &mut sts).map_err(|e| match e {
            tessera_encoding::ChunkError::UnsupportedEncoding(_) => {
                Error::Other(format!("cannot merge chunks of encoding {:?}", c.encoding))
            }
            e => Error::Corruption { file: "chunk".into(), offset: 0, reason: e.to_string() },
        })?;
    }
    samples.extend_from_slice(extra);
    if extra_sts.len() == extra.len() {
        sts.extend_from_slice(extra_sts);
    } else {
        sts.resize(samples.len(), 0);
    }
    if sts.iter().all(|&st| st == 0) {
        // The common case: no start timestamps, merge the samples alone.
        // Stable: for equal timestamps, chunk data (in-order, earlier in the list) stays first and wins.
        samples.sort_by_key(|s| s.t);
        samples.dedup_by_key(|s| s.t);
        if !deleted.is_empty() {
            samples.retain(|s| !deleted.iter().any(|iv| iv.contains(s.t)));
        }
        return Ok(encode_chunks(&samples));
    }
    let mut pairs: Vec<(Sample, i64)> = samples.into_iter().zip(sts).collect();
    pairs.sort_by_key(|p| p.0.t);
    pairs.dedup_by_key(|p| p.0.t);
    if !deleted.is_empty() {
        pairs.retain(|p| !deleted.iter().any(|iv| iv.contains(p.0.t)));
    }
    let (samples, sts): (Vec<Sample>, Vec<i64>) = pairs.into_iter().unzip();
    Ok(encode_chunks_st(&samples, &sts))
}

/// Encodes sorted samples as XOR chunks of at most 120 samples.
pub(crate) fn encode_chunks(samples: &[Sample]) -> Vec<ChunkRef> {
    samples
        .chunks(SAMPLES_PER_CHUNK)
        .map(|c| ChunkRef {
            mint_ms: c[0].t,
            maxt_ms: c[c.len() - 1].t,
            encoding: ChunkEncoding::Xor,
            data: bytes::Bytes::from(encode_xor(c)),
        })
        .collect()
}

/// Encodes sorted samples with their start timestamps (`sts[i]` for `samples[i]`; empty = none) in
/// chunks of at most `per_chunk` samples: XorSt for a chunk with some ST ≠ 0, XOR otherwise.
pub(crate) fn encode_chunks_st_sized(samples: &[Sample], sts: &[i64], per_chunk: usize) -> Vec<ChunkRef> {
    let per = per_chunk.clamp(1, usize::from(u16::MAX));
    if sts.len() != samples.len() {
        return samples
            .chunks(per)
            .map(|c| ChunkRef {
                mint_ms: c[0].t,
                maxt_ms: c[c.len() - 1].t,
                encoding: ChunkEncoding::Xor,
                data: bytes::Bytes::from(encode_xor(c)),
            })
            .collect();
    }
    samples
        .chunks(per)
        .zip(sts.chunks(per))
        .map(|(c, s)| {
            let (encoding, data) = if s.iter().any(|&x| x != 0) {
                (ChunkEncoding::XorSt, encode_xor_st(c, s))
            } else {
                (ChunkEncoding::Xor, encode_xor(c))
            };
            ChunkRef { mint_ms: c[0].t, maxt_ms: c[c.len() - 1].t, encoding, data: bytes::Bytes::from(data) }
        })
        .collect()
}

/// [`encode_chunks_st_sized`] with the head's 120 samples per chunk.
pub(crate) fn encode_chunks_st(samples: &[Sample], sts: &[i64]) -> Vec<ChunkRef> {
    encode_chunks_st_sized(samples, sts, SAMPLES_PER_CHUNK)
}

/// True when some chunk certainly or actually holds a sample in `[mint, maxt]`.
pub(crate) fn has_sample_in(chunks: &[ChunkRef], mint: i64, maxt: i64) -> bool {
    for c in chunks {
        if c.maxt_ms < mint || c.mint_ms > maxt {
            continue;
        }
        // The first and last samples are at mint_ms/maxt_ms.
        if (c.mint_ms >= mint && c.mint_ms <= maxt) || (c.maxt_ms >= mint && c.maxt_ms <= maxt) {
            return true;
        }
        let mut v = Vec::new();
        if tessera_encoding::decode_chunk_range_into(c, mint, maxt, &mut v).is_ok() && !v.is_empty() {
            return true;
        }
    }
    false
}
