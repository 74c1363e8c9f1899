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
    Appended, FloatHistogramEncoder, FloatHistogramStEncoder, HistogramAppendError, HistogramEncoder, HistogramStEncoder,
    decode_chunk_range_st_into, decode_histogram_samples_into, encode_xor, encode_xor_st,
};
use tessera_model::{ChunkEncoding, ChunkRef, HistogramSample, HistogramValue, Sample};

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
    if !extra_hists.is_empty() || chunks.iter().any(|c| c.encoding.is_histogram()) {
        let mut vals = Vec::new();
        for c in &chunks {
            decode_any(c, &mut vals)?;
        }
        let sts = if extra_sts.len() == extra.len() { extra_sts } else { &[] };
        vals.extend(extra.iter().enumerate().map(|(i, s)| (s.t, AnyVal::F(s.v, sts.get(i).copied().unwrap_or(0)))));
        vals.extend(extra_hists.iter().map(|s| (s.t, AnyVal::H(s.clone()))));
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
    /// A native histogram (integer or float) with its start timestamp.
    H(HistogramSample),
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
    if c.encoding.is_histogram() {
        let mut v = Vec::new();
        decode_histogram_samples_into(c, &mut v).map_err(|e| corrupt(c, e))?;
        out.extend(v.into_iter().map(|s| (s.t, AnyVal::H(s))));
    } else {
        let (mut v, mut sts) = (Vec::new(), Vec::new());
        decode_chunk_range_st_into(c, i64::MIN, i64::MAX, &mut v, &mut sts).map_err(|e| corrupt(c, e))?;
        out.extend(v.into_iter().zip(sts).map(|(s, st)| (s.t, AnyVal::F(s.v, st))));
    }
    Ok(())
}

/// The run a value belongs to: floats, integer histograms, float histograms.
fn run_kind(v: &AnyVal) -> u8 {
    match v {
        AnyVal::F(..) => 0,
        AnyVal::H(s) if !s.h.is_float() => 1,
        AnyVal::H(_) => 2,
    }
}

/// Sorts `vals` by time (stable: of equal timestamps the first pushed wins and the rest are dropped),
/// removes the samples inside `deleted`, and encodes each run of one kind in that kind's chunks: floats
/// as XOR/XorSt chunks of at most `per_chunk` samples, histograms as upstream's appender cuts them (in
/// the ST histogram encodings when a sample of the run has a start timestamp).
pub(crate) fn merge_any(mut vals: Vec<(i64, AnyVal)>, deleted: &[Interval], per_chunk: usize) -> Result<Vec<ChunkRef>> {
    vals.sort_by_key(|v| v.0);
    vals.dedup_by_key(|v| v.0);
    if !deleted.is_empty() {
        vals.retain(|v| !deleted.iter().any(|iv| iv.contains(v.0)));
    }
    let mut out = Vec::new();
    let mut i = 0;
    while i < vals.len() {
        let kind = run_kind(&vals[i].1);
        let j = i + vals[i..].iter().take_while(|v| run_kind(&v.1) == kind).count();
        let run = &vals[i..j];
        if kind == 0 {
            let (samples, sts): (Vec<Sample>, Vec<i64>) = run
                .iter()
                .map(|(t, v)| match v {
                    AnyVal::F(f, st) => (Sample::new(*t, *f), *st),
                    AnyVal::H(_) => unreachable!("one kind per run"),
                })
                .unzip();
            out.extend(encode_chunks_st_sized(&samples, &sts, per_chunk));
        } else {
            let hs: Vec<&HistogramSample> = run
                .iter()
                .map(|(_, v)| match v {
                    AnyVal::H(s) => s,
                    AnyVal::F(..) => unreachable!("one kind per run"),
                })
                .collect();
            encode_histogram_run(&hs, &mut out).map_err(|e| Error::Other(format!("re-encoding histograms: {e}")))?;
        }
        i = j;
    }
    Ok(out)
}

/// Encodes a run of histograms of one kind (time-sorted) as a series' head would: one appender, a new
/// chunk wherever it asks for one; in the ST encodings when some sample has a start timestamp.
fn encode_histogram_run(run: &[&HistogramSample], out: &mut Vec<ChunkRef>) -> std::result::Result<(), HistogramAppendError> {
    fn go<E: Clone>(
        run: &[&HistogramSample],
        out: &mut Vec<ChunkRef>,
        encoding: ChunkEncoding,
        new: impl Fn() -> E,
        append: impl Fn(&mut E, &HistogramSample) -> std::result::Result<Appended<E>, HistogramAppendError>,
        bytes: impl Fn(&E) -> &[u8],
    ) -> std::result::Result<(), HistogramAppendError> {
        let mut cur = new();
        let (mut mint, mut last) = (run[0].t, run[0].t);
        for s in run {
            if let Appended::NewChunk(next) = append(&mut cur, s)? {
                let done = std::mem::replace(&mut cur, next);
                out.push(ChunkRef { mint_ms: mint, maxt_ms: last, encoding, data: bytes::Bytes::copy_from_slice(bytes(&done)) });
                mint = s.t;
            }
            last = s.t;
        }
        out.push(ChunkRef { mint_ms: mint, maxt_ms: last, encoding, data: bytes::Bytes::copy_from_slice(bytes(&cur)) });
        Ok(())
    }
    let with_st = run.iter().any(|s| s.st != 0);
    let float = run[0].h.is_float();
    match (float, with_st) {
        (false, false) => go(run, out, ChunkEncoding::Histogram, HistogramEncoder::new, |e, s| match &s.h {
            HistogramValue::Int(h) => e.append(s.t, h, None),
            HistogramValue::Float(_) => unreachable!("one kind per run"),
        }, |e| e.bytes()),
        (true, false) => go(run, out, ChunkEncoding::FloatHistogram, FloatHistogramEncoder::new, |e, s| match &s.h {
            HistogramValue::Float(h) => e.append(s.t, h, None),
            HistogramValue::Int(_) => unreachable!("one kind per run"),
        }, |e| e.bytes()),
        (false, true) => go(run, out, ChunkEncoding::HistogramSt, HistogramStEncoder::new, |e, s| match &s.h {
            HistogramValue::Int(h) => e.append(s.t, s.st, h, None),
            HistogramValue::Float(_) => unreachable!("one kind per run"),
        }, |e| e.bytes()),
        (true, true) => go(run, out, ChunkEncoding::FloatHistogramSt, FloatHistogramStEncoder::new, |e, s| match &s.h {
            HistogramValue::Float(h) => e.append(s.t, s.st, h, None),
            HistogramValue::Int(_) => unreachable!("one kind per run"),
        }, |e| e.bytes()),
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
        if c.encoding.is_histogram() {
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

/// One series' chunks from several sources (each list time-ordered, the lists possibly overlapping) as
/// one time-ordered list without overlaps: where two sources hold a sample at the same timestamp, the
/// earlier list's wins (the deduplication a union of stores does, as Prometheus' merge querier).
pub fn merge_chunk_lists(lists: &[Vec<ChunkRef>]) -> Result<Vec<ChunkRef>> {
    let mut vals = Vec::new();
    for l in lists {
        for c in l {
            decode_any(c, &mut vals)?;
        }
    }
    merge_any(vals, &[], 120)
}
