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
//!
//! Native-histogram chunks take the general path ([`merge_any`]): every chunk decoded to samples of
//! any kind ([`AnyVal`]), merged and filtered the same way, and runs of one kind re-encoded in that
//! kind's chunks (histogram runs as upstream's appender would cut them).

use tessera_encoding::{
    decode_chunk_range_st_into, decode_float_histogram_into, decode_histogram_into, encode_float_histograms,
    encode_histograms, encode_xor, encode_xor_st,
};
use tessera_model::{ChunkEncoding, ChunkRef, FloatHistogram, Histogram, HistogramSample, HistogramValue, Sample};

use crate::error::{Error, Result};
use crate::head::SAMPLES_PER_CHUNK;
use crate::tombstones::Interval;

/// Sorts `chunks`, merges `extra` (out-of-order samples; `extra_sts[i]` is `extra[i]`'s start
/// timestamp, 0 = unset, an empty `extra_sts` means none) and `extra_hists` (out-of-order histogram
/// samples) into them and removes the samples inside `deleted`; re-encodes only when needed (see the
/// module docs). Chunk data wins over an out-of-order sample at the same timestamp.
pub(crate) fn finalize_chunks_st(
    mut chunks: Vec<ChunkRef>,
    extra: &[Sample],
    extra_sts: &[i64],
    extra_hists: &[HistogramSample],
    deleted: &[Interval],
) -> Result<Vec<ChunkRef>> {
    chunks.sort_by_key(|c| c.mint_ms);
    let overlapping = chunks.windows(2).any(|w| w[1].mint_ms <= w[0].maxt_ms);
    let cut = deleted.iter().any(|iv| chunks.iter().any(|c| iv.overlaps(c.mint_ms, c.maxt_ms)));
    if extra.is_empty() && extra_hists.is_empty() && !overlapping && !cut {
        return Ok(chunks);
    }
    if !extra_hists.is_empty() || chunks.iter().any(|c| is_histogram(c.encoding)) {
        let mut vals = Vec::new();
        for c in &chunks {
            decode_any(c, &mut vals)?;
        }
        let sts = if extra_sts.len() == extra.len() { extra_sts } else { &[] };
        vals.extend(extra.iter().enumerate().map(|(i, s)| (s.t, AnyVal::F(s.v, sts.get(i).copied().unwrap_or(0)))));
        vals.extend(extra_hists.iter().map(|s| {
            let v = match &s.h {
                HistogramValue::Int(h) => AnyVal::H(h.clone()),
                HistogramValue::Float(h) => AnyVal::FH(h.clone()),
            };
            (s.t, v)
        }));
        return merge_any(vals, deleted, SAMPLES_PER_CHUNK);
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

/// A sample of any kind, for merges across chunk encodings.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum AnyVal {
    /// A float and its start timestamp (0 = unset).
    F(f64, i64),
    H(Histogram),
    FH(FloatHistogram),
}

pub(crate) fn is_histogram(e: ChunkEncoding) -> bool {
    matches!(e, ChunkEncoding::Histogram | ChunkEncoding::FloatHistogram)
}

fn corrupt(c: &ChunkRef, e: tessera_encoding::ChunkError) -> Error {
    match e {
        tessera_encoding::ChunkError::UnsupportedEncoding(_) => {
            Error::Other(format!("cannot merge chunks of encoding {:?}", c.encoding))
        }
        e => Error::Corruption { file: "chunk".into(), offset: 0, reason: e.to_string() },
    }
}

/// Appends every sample of `c`, whatever its encoding, to `out`.
pub(crate) fn decode_any(c: &ChunkRef, out: &mut Vec<(i64, AnyVal)>) -> Result<()> {
    match c.encoding {
        ChunkEncoding::Histogram => {
            let mut v = Vec::new();
            decode_histogram_into(&c.data, &mut v).map_err(|e| corrupt(c, e))?;
            out.extend(v.into_iter().map(|(t, h)| (t, AnyVal::H(h))));
        }
        ChunkEncoding::FloatHistogram => {
            let mut v = Vec::new();
            decode_float_histogram_into(&c.data, &mut v).map_err(|e| corrupt(c, e))?;
            out.extend(v.into_iter().map(|(t, h)| (t, AnyVal::FH(h))));
        }
        _ => {
            let (mut v, mut sts) = (Vec::new(), Vec::new());
            decode_chunk_range_st_into(c, i64::MIN, i64::MAX, &mut v, &mut sts).map_err(|e| corrupt(c, e))?;
            out.extend(v.into_iter().zip(sts).map(|(s, st)| (s.t, AnyVal::F(s.v, st))));
        }
    }
    Ok(())
}

/// Sorts `vals` by time (stable: of equal timestamps the first pushed wins and the rest are dropped),
/// removes the samples inside `deleted`, and encodes each run of one kind in that kind's chunks: floats
/// as XOR/XorSt chunks of at most `per_chunk` samples, histograms as upstream's appender cuts them.
pub(crate) fn merge_any(mut vals: Vec<(i64, AnyVal)>, deleted: &[Interval], per_chunk: usize) -> Result<Vec<ChunkRef>> {
    vals.sort_by_key(|v| v.0);
    vals.dedup_by_key(|v| v.0);
    if !deleted.is_empty() {
        vals.retain(|v| !deleted.iter().any(|iv| iv.contains(v.0)));
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < vals.len() {
        let kind = std::mem::discriminant(&vals[i].1);
        let j = i + vals[i..].iter().take_while(|v| std::mem::discriminant(&v.1) == kind).count();
        let run = &vals[i..j];
        match &run[0].1 {
            AnyVal::F(..) => {
                let (samples, sts): (Vec<Sample>, Vec<i64>) = run
                    .iter()
                    .map(|(t, v)| match v {
                        AnyVal::F(f, st) => (Sample::new(*t, *f), *st),
                        _ => unreachable!("one kind per run"),
                    })
                    .unzip();
                out.extend(encode_chunks_st_sized(&samples, &sts, per_chunk));
            }
            AnyVal::H(_) => {
                let hs: Vec<(i64, Histogram)> = run
                    .iter()
                    .map(|(t, v)| match v {
                        AnyVal::H(h) => (*t, h.clone()),
                        _ => unreachable!("one kind per run"),
                    })
                    .collect();
                let chunks = encode_histograms(&hs).map_err(|e| Error::Other(format!("re-encoding histograms: {e}")))?;
                push_runs(&mut out, ChunkEncoding::Histogram, chunks, hs.iter().map(|h| h.0));
            }
            AnyVal::FH(_) => {
                let hs: Vec<(i64, FloatHistogram)> = run
                    .iter()
                    .map(|(t, v)| match v {
                        AnyVal::FH(h) => (*t, h.clone()),
                        _ => unreachable!("one kind per run"),
                    })
                    .collect();
                let chunks =
                    encode_float_histograms(&hs).map_err(|e| Error::Other(format!("re-encoding histograms: {e}")))?;
                push_runs(&mut out, ChunkEncoding::FloatHistogram, chunks, hs.iter().map(|h| h.0));
            }
        }
        i = j;
    }
    Ok(out)
}

/// Turns encoded histogram chunks (each starting with its u16 sample count) of samples at `times`
/// into chunk refs with their time bounds.
fn push_runs(out: &mut Vec<ChunkRef>, encoding: ChunkEncoding, chunks: Vec<Vec<u8>>, times: impl Iterator<Item = i64>) {
    let times: Vec<i64> = times.collect();
    let mut at = 0usize;
    for data in chunks {
        let n = usize::from(u16::from_be_bytes([data[0], data[1]])).max(1);
        let (mint, maxt) = (times[at.min(times.len() - 1)], times[(at + n - 1).min(times.len() - 1)]);
        at += n;
        out.push(ChunkRef { mint_ms: mint, maxt_ms: maxt, encoding, data: bytes::Bytes::from(data) });
    }
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
        if is_histogram(c.encoding) {
            let mut v = Vec::new();
            if decode_any(c, &mut v).is_ok() && v.iter().any(|(t, _)| *t >= mint && *t <= maxt) {
                return true;
            }
            continue;
        }
        let mut v = Vec::new();
        if tessera_encoding::decode_chunk_range_into(c, mint, maxt, &mut v).is_ok() && !v.is_empty() {
            return true;
        }
    }
    false
}
