//! Properties of the native-histogram chunks: whatever series of histograms goes in (layouts that grow
//! and shrink, counter resets, schema changes, gauges, stale markers, NHCB), the chunks the appender cuts
//! decode to the same samples — same timestamps, counts, sums (bit for bit) and the same count in every
//! bucket index (the appender may add empty buckets, never change a count); [`AppendDecision`] predicts
//! what `append` does. And the decoders never panic on random or mutated bytes (issue 9's rule for every
//! decoder of untrusted bytes), including through the generic entry points, which refuse histogram chunks.
//!
//! A short run by default; `TESSERA_FUZZ_CASES=N` for N cases per property.

use std::collections::BTreeMap;

use bytes::Bytes;
use proptest::prelude::*;
use tessera_encoding::{
    AppendDecision, Appended, ChunkError, FloatHistogramEncoder, FloatHistogramIter, HistogramEncoder, HistogramIter,
    decode_chunk_range_into, decode_chunk_range_st_into, decode_float_histogram_into, decode_histogram_into,
    encode_float_histograms, encode_histograms, to_xor_chunks,
};
use tessera_model::histogram::{CounterResetHint, FloatHistogram, Histogram, Span};
use tessera_model::{ChunkEncoding, ChunkRef, Sample};

fn cases(default: u32) -> u32 {
    std::env::var("TESSERA_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Spans for sorted, distinct bucket indexes.
fn spans_of(idx: &[i32]) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    let mut last = 0i32;
    for (k, &i) in idx.iter().enumerate() {
        match spans.last_mut() {
            Some(s) if i == last + 1 => s.length += 1,
            _ => spans.push(Span::new(if k == 0 { i } else { i - last - 1 }, 1)),
        }
        last = i;
    }
    spans
}

/// One generated sample: bucket index → count (both sides), zero count, sum, schema, threshold, hint.
#[derive(Debug, Clone)]
struct Raw {
    dt: i64,
    pos: BTreeMap<i32, u32>,
    neg: BTreeMap<i32, u32>,
    zero: u32,
    sum: f64,
    schema: i32,
    zt: f64,
    hint: CounterResetHint,
    stale: bool,
    bounds: Vec<f64>,
}

fn raw() -> impl Strategy<Value = Raw> {
    let buckets = || proptest::collection::btree_map(-12i32..12, prop_oneof![Just(0u32), 0u32..50, 0u32..100_000], 0..8);
    (
        prop_oneof![Just(15_000i64), 1i64..100_000],
        buckets(),
        buckets(),
        0u32..1000,
        prop_oneof![any::<f64>(), (-1000i32..100_000).prop_map(|x| f64::from(x) / 8.0)],
        prop_oneof![6 => Just(0i32), 2 => -4i32..=8, 1 => Just(-53)],
        prop_oneof![Just(0.0), Just(0.001), Just(2f64.powi(-128))],
        prop_oneof![8 => Just(CounterResetHint::Unknown), 1 => Just(CounterResetHint::CounterReset), 1 => Just(CounterResetHint::NotCounterReset), 2 => Just(CounterResetHint::Gauge)],
        prop::bool::weighted(0.05),
        prop_oneof![Just(vec![0.1, 0.5, 1.0, 2.5, 10.0]), Just(vec![0.25, 1.0, 1e9])],
    )
        .prop_map(|(dt, pos, neg, zero, sum, schema, zt, hint, stale, bounds)| Raw {
            dt,
            pos,
            neg,
            zero,
            sum,
            schema,
            zt,
            hint,
            stale,
            bounds,
        })
}

/// Series of samples where each sample mostly grows the previous one (as counters do), sometimes replaced.
fn series() -> impl Strategy<Value = Vec<Raw>> {
    proptest::collection::vec((raw(), prop::bool::weighted(0.8)), 1..40).prop_map(|xs| {
        let mut out: Vec<Raw> = Vec::new();
        for (mut r, grow) in xs {
            if let Some(p) = out.last().filter(|_| grow) {
                // Same layout family: old buckets plus new ones, counts not decreasing.
                let mut pos = p.pos.clone();
                for (k, v) in &r.pos {
                    *pos.entry(*k).or_default() += v % 7;
                }
                let mut neg = p.neg.clone();
                for (k, v) in &r.neg {
                    *neg.entry(*k).or_default() += v % 7;
                }
                r = Raw { pos, neg, zero: p.zero + r.zero % 3, schema: p.schema, zt: p.zt, bounds: p.bounds.clone(), hint: p.hint, ..r };
            }
            if r.schema == -53 {
                r.neg.clear();
                r.zt = 0.0;
                r.zero = 0;
                r.pos.retain(|k, _| (0..=r.bounds.len() as i32).contains(k));
            }
            out.push(r);
        }
        out
    })
}

fn count_of(r: &Raw) -> u64 {
    r.pos.values().chain(r.neg.values()).map(|&v| u64::from(v)).sum::<u64>() + u64::from(r.zero)
}

fn to_int(rs: &[Raw]) -> Vec<(i64, Histogram)> {
    let mut t = 1_700_000_000_000i64;
    rs.iter()
        .map(|r| {
            t += r.dt;
            if r.stale {
                return (t, Histogram::stale());
            }
            let deltas = |m: &BTreeMap<i32, u32>| {
                let mut prev = 0i64;
                m.values()
                    .map(|&v| {
                        let d = i64::from(v) - prev;
                        prev = i64::from(v);
                        d
                    })
                    .collect()
            };
            let keys = |m: &BTreeMap<i32, u32>| m.keys().copied().collect::<Vec<_>>();
            let h = Histogram {
                counter_reset_hint: r.hint,
                schema: r.schema,
                zero_threshold: r.zt,
                zero_count: u64::from(r.zero),
                count: count_of(r),
                sum: r.sum,
                positive_spans: spans_of(&keys(&r.pos)),
                negative_spans: spans_of(&keys(&r.neg)),
                positive_buckets: deltas(&r.pos),
                negative_buckets: deltas(&r.neg),
                custom_values: if r.schema == -53 { r.bounds.clone() } else { Vec::new() },
            };
            (t, h)
        })
        .collect()
}

fn to_float(rs: &[Raw]) -> Vec<(i64, FloatHistogram)> {
    to_int(rs)
        .into_iter()
        .map(|(t, h)| {
            let mut f = h.to_float();
            if h.is_stale() {
                f = FloatHistogram::stale();
            } else {
                // Quarter counts keep float sums exact while exercising non-integers.
                for b in f.positive_buckets.iter_mut().chain(f.negative_buckets.iter_mut()) {
                    *b /= 4.0;
                }
                f.zero_count /= 4.0;
                f.count /= 4.0;
            }
            (t, f)
        })
        .collect()
}

/// Index → count of the non-empty buckets, from spans and absolute counts.
fn index_counts(spans: &[Span], counts: &[f64]) -> Vec<(i64, u64)> {
    let mut out = Vec::new();
    let mut idx = 0i64;
    let mut k = 0;
    // The first offset is an index; later ones count from the previous span's last bucket + 1.
    for s in spans {
        idx += i64::from(s.offset);
        for _ in 0..s.length {
            if counts[k] != 0.0 {
                out.push((idx, counts[k].to_bits()));
            }
            k += 1;
            idx += 1;
        }
    }
    assert_eq!(k, counts.len(), "spans describe exactly the buckets");
    out
}

/// What must survive encoding: everything but the hint and empty buckets.
fn essence(t: i64, f: &FloatHistogram) -> String {
    if f.is_stale() {
        return format!("t={t} stale");
    }
    format!(
        "t={t} schema={} zt={:x} zc={:x} c={:x} sum={:x} pos={:?} neg={:?} cv={:?}",
        f.schema,
        f.zero_threshold.to_bits(),
        f.zero_count.to_bits(),
        f.count.to_bits(),
        f.sum.to_bits(),
        index_counts(&f.positive_spans, &f.positive_buckets),
        index_counts(&f.negative_spans, &f.negative_buckets),
        f.custom_values.iter().map(|x| x.to_bits()).collect::<Vec<_>>()
    )
}

/// Every reader of histogram bytes: an error or samples, never a panic; the generic float entry points
/// refuse the encodings cleanly.
fn exercise(data: &[u8]) {
    let mut a = vec![(0, Histogram::default())];
    if decode_histogram_into(data, &mut a).is_err() {
        assert_eq!(a.len(), 1, "output touched on error");
    }
    let mut b = vec![(0, FloatHistogram::default())];
    if decode_float_histogram_into(data, &mut b).is_err() {
        assert_eq!(b.len(), 1, "output touched on error");
    }
    // The iterators stop after an error.
    let mut it = HistogramIter::new(data);
    while let Some(r) = it.next() {
        if r.is_err() {
            assert!(it.next().is_none());
            break;
        }
    }
    // Reopening is decoding: an error, never a panic.
    let _ = HistogramEncoder::from_bytes(data);
    let _ = FloatHistogramEncoder::from_bytes(data);
    for enc in [ChunkEncoding::Histogram, ChunkEncoding::FloatHistogram] {
        let c = ChunkRef { mint_ms: i64::MIN, maxt_ms: i64::MAX, encoding: enc, data: Bytes::copy_from_slice(data) };
        let mut out = vec![Sample::new(1, 1.0)];
        assert_eq!(decode_chunk_range_into(&c, i64::MIN, i64::MAX, &mut out), Err(ChunkError::UnsupportedEncoding(enc as u8)));
        let mut sts = vec![7];
        assert!(decode_chunk_range_st_into(&c, i64::MIN, i64::MAX, &mut out, &mut sts).is_err());
        assert!(out.len() == 1 && sts.len() == 1);
        assert!(to_xor_chunks(&c, 120).is_err());
    }
}

fn mutate(mut b: Vec<u8>, edits: &[(prop::sample::Index, u8, u8)]) -> Vec<u8> {
    for (at, byte, kind) in edits {
        if b.is_empty() {
            break;
        }
        let i = at.index(b.len());
        match kind {
            0 => b[i] ^= byte | 1,
            1 => b[i] = *byte,
            2 => b.truncate(i),
            _ => b.insert(i, *byte),
        }
    }
    b
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(200), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn integer_histograms_round_trip(rs in series()) {
        let input = to_int(&rs);
        let chunks = encode_histograms(&input).expect("valid histograms");
        let mut out = Vec::new();
        for c in &chunks {
            decode_histogram_into(c, &mut out).expect("our chunks decode");
        }
        let got: Vec<String> = out.iter().map(|(t, h)| essence(*t, &h.to_float())).collect();
        let want: Vec<String> = input.iter().map(|(t, h)| essence(*t, &h.to_float())).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn float_histograms_round_trip(rs in series()) {
        let input = to_float(&rs);
        let chunks = encode_float_histograms(&input).expect("valid histograms");
        let mut out = Vec::new();
        for c in &chunks {
            decode_float_histogram_into(c, &mut out).expect("our chunks decode");
        }
        let got: Vec<String> = out.iter().map(|(t, h)| essence(*t, h)).collect();
        let want: Vec<String> = input.iter().map(|(t, h)| essence(*t, h)).collect();
        prop_assert_eq!(got, want);
    }

    #[test]
    fn decide_predicts_append(rs in series()) {
        let mut e = HistogramEncoder::new();
        for (t, h) in to_int(&rs) {
            let d = e.decide(&h);
            let before = e.bytes().to_vec();
            match (d, e.append(t, &h, None).expect("valid")) {
                (AppendDecision::Append { .. }, Appended::InPlace) | (AppendDecision::Recode { .. }, Appended::Recoded) => {}
                (AppendDecision::NewChunk(hd), Appended::NewChunk(next)) => {
                    prop_assert_eq!(next.counter_reset_header(), hd);
                    prop_assert_eq!(e.bytes(), &before[..]);
                    e = next;
                }
                (d, a) => prop_assert!(false, "decided {:?}, did {:?}", d, a),
            }
        }
        let mut f = FloatHistogramEncoder::new();
        for (t, h) in to_float(&rs) {
            let d = f.decide(&h);
            match (d, f.append(t, &h, None).expect("valid")) {
                (AppendDecision::Append { .. }, Appended::InPlace) | (AppendDecision::Recode { .. }, Appended::Recoded) => {}
                (AppendDecision::NewChunk(hd), Appended::NewChunk(next)) => {
                    prop_assert_eq!(next.counter_reset_header(), hd);
                    f = next;
                }
                (d, a) => prop_assert!(false, "decided {:?}, did {:?}", d, a),
            }
        }
    }

    #[test]
    fn reopening_after_any_sample_changes_nothing(rs in series(), every in 1usize..5) {
        let input = to_int(&rs);
        let mut chunks = Vec::new();
        let mut e = HistogramEncoder::new();
        for (i, (t, h)) in input.iter().enumerate() {
            if let Appended::NewChunk(next) = e.append(*t, h, None).expect("valid") {
                chunks.push(std::mem::replace(&mut e, next).into_bytes());
            }
            if i % every == 0 {
                e = HistogramEncoder::from_bytes(e.bytes()).expect("our chunk reopens");
            }
        }
        chunks.push(e.into_bytes());
        prop_assert_eq!(chunks, encode_histograms(&input).expect("valid"));

        let input = to_float(&rs);
        let mut chunks = Vec::new();
        let mut e = FloatHistogramEncoder::new();
        for (i, (t, h)) in input.iter().enumerate() {
            if let Appended::NewChunk(next) = e.append(*t, h, None).expect("valid") {
                chunks.push(std::mem::replace(&mut e, next).into_bytes());
            }
            if i % every == 0 {
                e = FloatHistogramEncoder::from_bytes(e.bytes()).expect("our chunk reopens");
            }
        }
        chunks.push(e.into_bytes());
        prop_assert_eq!(chunks, encode_float_histograms(&input).expect("valid"));
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        exercise(&data);
        let _ = FloatHistogramIter::new(&data).count();
    }

    #[test]
    fn mutated_chunks_never_panic(
        rs in series(),
        float in any::<bool>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 1..5),
    ) {
        let chunks = if float { encode_float_histograms(&to_float(&rs)) } else { encode_histograms(&to_int(&rs)) }
            .expect("valid histograms");
        for c in chunks {
            exercise(&mutate(c, &edits));
        }
    }
}

#[test]
fn too_short_chunks_are_truncated_errors() {
    for data in [&[][..], &[0][..], &[0, 1][..], &[0, 1, 0][..]] {
        assert!(matches!(HistogramIter::new(data).next(), Some(Err(ChunkError::Truncated { .. }))), "{data:?}");
        assert!(matches!(FloatHistogramIter::new(data).next(), Some(Err(ChunkError::Truncated { .. }))), "{data:?}");
    }
    // A header announcing no samples is an empty chunk.
    assert!(HistogramIter::new(&[0, 0, 0]).next().is_none());
}

#[test]
fn mismatched_bucket_counts_are_refused() {
    let h = Histogram { positive_spans: vec![Span::new(0, 2)], positive_buckets: vec![1], count: 1, ..Histogram::default() };
    assert!(HistogramEncoder::new().append(0, &h, None).is_err());
}
