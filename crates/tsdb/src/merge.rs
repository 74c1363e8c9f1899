//! Merging one series' chunks from the head and the blocks into the sorted, non-overlapping, fully-live
//! chunk list the read contract promises ([`finalize_chunks`]), used by the querier and by compaction.
//!
//! Key decision: chunks pass through untouched (cloning a `Bytes` handle, zero-copy out of mmap'd blocks)
//! unless something forces a re-encode: overlapping chunks, out-of-order samples still in the head, or a
//! tombstone cutting into a chunk. Then the series' samples are decoded once, merged (in-order data wins
//! over an out-of-order sample at the same timestamp), filtered and re-encoded in 120-sample chunks.

use tessera_encoding::{decode_xor_into, encode_xor};
use tessera_model::{ChunkEncoding, ChunkRef, Sample};

use crate::error::{Error, Result};
use crate::head::SAMPLES_PER_CHUNK;
use crate::tombstones::Interval;

/// Sorts `chunks`, merges `extra` (out-of-order samples) into them and removes the samples inside
/// `deleted`; re-encodes only when needed (see the module docs).
pub(crate) fn finalize_chunks(mut chunks: Vec<ChunkRef>, extra: &[Sample], deleted: &[Interval]) -> Result<Vec<ChunkRef>> {
    chunks.sort_by_key(|c| c.mint_ms);
    let overlapping = chunks.windows(2).any(|w| w[1].mint_ms <= w[0].maxt_ms);
    let cut = deleted.iter().any(|iv| chunks.iter().any(|c| iv.overlaps(c.mint_ms, c.maxt_ms)));
    if extra.is_empty() && !overlapping && !cut {
        return Ok(chunks);
    }
    let mut samples: Vec<Sample> = Vec::new();
    for c in &chunks {
        if c.encoding != ChunkEncoding::Xor {
            return Err(Error::Other(format!("cannot merge chunks of encoding {:?}", c.encoding)));
        }
        decode_xor_into(&c.data, &mut samples)
            .map_err(|e| Error::Corruption { file: "chunk".into(), offset: 0, reason: e.to_string() })?;
    }
    samples.extend_from_slice(extra);
    // Stable: for equal timestamps, chunk data (in-order, earlier in the list) stays first and wins.
    samples.sort_by_key(|s| s.t);
    samples.dedup_by_key(|s| s.t);
    if !deleted.is_empty() {
        samples.retain(|s| !deleted.iter().any(|iv| iv.contains(s.t)));
    }
    Ok(encode_chunks(&samples))
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

