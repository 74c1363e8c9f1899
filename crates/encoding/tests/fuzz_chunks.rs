//! Issue 9, "no single request can take Tessera down": every chunk encoding through the one entry point
//! readers use (`decode_chunk_range_into`, `decode_chunk_range_st_into`, `to_xor_chunks`, dispatching on
//! the encoding byte a block or the head stores). Random bytes, and valid chunks of each encoding
//! mutated (bit flips, overwrites, truncation, insertion), or labelled with the wrong encoding or
//! impossible bounds: an error or samples, never a panic, and on error the output untouched.
//! The per-codec properties (`xor_props.rs`, `dense_props.rs`, `xor_st_props.rs`) test each decoder on its
//! own; this is the dispatch layer on top, as the cargo-fuzz target `decode_chunks` would run it, on stable.
//!
//! A short smoke by default; `TESSERA_FUZZ_CASES=N` for N cases per property.

use bytes::Bytes;
use proptest::prelude::*;
use tessera_encoding::{
    decode_chunk_range_into, decode_chunk_range_st_into, encode_dense_always, encode_float_histograms, encode_histograms,
    encode_xor, encode_xor_st, to_xor_chunks,
};
use tessera_model::histogram::{Histogram, Span};
use tessera_model::{ChunkEncoding, ChunkRef, Sample};

fn cases(default: u32) -> u32 {
    std::env::var("TESSERA_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

const ENCODINGS: &[ChunkEncoding] = &[
    ChunkEncoding::Xor,
    ChunkEncoding::Histogram,
    ChunkEncoding::FloatHistogram,
    ChunkEncoding::Dense,
    ChunkEncoding::Decimal,
    ChunkEncoding::DecimalOpen,
    ChunkEncoding::XorSt,
    ChunkEncoding::HistogramSt,
    ChunkEncoding::FloatHistogramSt,
];

fn samples() -> impl Strategy<Value = Vec<Sample>> {
    let v = prop_oneof![
        Just(0.0),
        Just(f64::NAN),
        Just(f64::INFINITY),
        Just(tessera_model::STALE_NAN),
        any::<f64>(),
        (-1000i32..1000).prop_map(|x| f64::from(x) / 4.0)
    ];
    let gap = prop_oneof![Just(15_000i64), 1i64..100_000, Just(0i64), any::<u32>().prop_map(i64::from)];
    (any::<i32>(), proptest::collection::vec((gap, v), 1..200)).prop_map(|(t0, ps)| {
        let mut t = i64::from(t0);
        ps.into_iter()
            .map(|(g, v)| {
                t = t.saturating_add(g.max(1));
                Sample::new(t, v)
            })
            .collect()
    })
}

/// A valid chunk of `enc` (for the histogram encodings: one small histogram per sample, `v` as its sum).
fn chunk(enc: ChunkEncoding, s: &[Sample], st_seed: i64) -> ChunkRef {
    let hists = || {
        s.iter().enumerate().map(|(i, x)| {
            let n = i as u64 % 5;
            let h = Histogram {
                count: n,
                sum: x.v,
                positive_spans: vec![Span::new(i as i32 % 3, 1)],
                positive_buckets: vec![n as i64],
                ..Histogram::default()
            };
            (x.t, h)
        })
    };
    let data = match enc {
        ChunkEncoding::Histogram => {
            let h: Vec<_> = hists().collect();
            encode_histograms(&h).expect("valid histograms").swap_remove(0)
        }
        ChunkEncoding::FloatHistogram => {
            let h: Vec<_> = hists().map(|(t, h)| (t, h.to_float())).collect();
            encode_float_histograms(&h).expect("valid histograms").swap_remove(0)
        }
        ChunkEncoding::HistogramSt | ChunkEncoding::FloatHistogramSt => {
            // One appender; the first chunk it fills (the generator may make it ask for a new one).
            let float = enc == ChunkEncoding::FloatHistogramSt;
            let mut hi = tessera_encoding::HistogramStEncoder::new();
            let mut fl = tessera_encoding::FloatHistogramStEncoder::new();
            for (i, (t, h)) in hists().enumerate() {
                let st = if i % 3 == 0 { 0 } else { t - st_seed.rem_euclid(1 << 20) };
                let next = if float {
                    matches!(fl.append(t, st, &h.to_float(), None).expect("valid"), tessera_encoding::Appended::NewChunk(_))
                } else {
                    matches!(hi.append(t, st, &h, None).expect("valid"), tessera_encoding::Appended::NewChunk(_))
                };
                if next {
                    break;
                }
            }
            if float { fl.bytes().to_vec() } else { hi.bytes().to_vec() }
        }
        ChunkEncoding::Dense => encode_dense_always(s),
        // Values that are not exact short decimals (NaN, arbitrary bits) replaced by quarters.
        ChunkEncoding::Decimal => tessera_encoding::encode_decimal(s).unwrap_or_else(|| {
            let q: Vec<Sample> = s.iter().enumerate().map(|(i, x)| Sample::new(x.t, i as f64 / 4.0)).collect();
            tessera_encoding::encode_decimal(&q).expect("quarters are exact decimals")
        }),
        // The same for the appendable form: the samples appended one by one (quarters when some value is
        // refused).
        ChunkEncoding::DecimalOpen => {
            let append = |s: &[Sample]| {
                let mut a = tessera_encoding::DecimalAppender::with_capacity(16);
                let mut last = (i64::MIN, 0u64);
                for x in s {
                    if !a.append(last.0, last.1, x.t, x.v) {
                        return None;
                    }
                    last = (x.t, x.v.to_bits());
                }
                Some(a.bytes().to_vec())
            };
            append(s).unwrap_or_else(|| {
                let q: Vec<Sample> = s.iter().enumerate().map(|(i, x)| Sample::new(x.t, i as f64 / 4.0)).collect();
                append(&q).expect("quarters are exact decimals")
            })
        }
        ChunkEncoding::XorSt => {
            let sts: Vec<i64> = s.iter().enumerate().map(|(i, x)| if i % 3 == 0 { 0 } else { x.t - st_seed.rem_euclid(1 << 20) }).collect();
            encode_xor_st(s, &sts)
        }
        _ => encode_xor(s),
    };
    ChunkRef { mint_ms: s[0].t, maxt_ms: s[s.len() - 1].t, encoding: enc, data: Bytes::from(data) }
}

/// Every reader of `c`; the error paths leave the output vectors as they were.
fn exercise(c: &ChunkRef) {
    for (lo, hi) in [(i64::MIN, i64::MAX), (c.mint_ms, c.mint_ms), (c.maxt_ms, c.mint_ms), (0, 1_000_000)] {
        let mut out = vec![Sample::new(1, 1.0)];
        if decode_chunk_range_into(c, lo, hi, &mut out).is_err() {
            assert_eq!(out.len(), 1, "output touched on error");
        }
        let (mut out, mut sts) = (vec![Sample::new(1, 1.0)], vec![7]);
        match decode_chunk_range_st_into(c, lo, hi, &mut out, &mut sts) {
            Ok(()) => assert_eq!(out.len(), sts.len(), "one start timestamp per sample"),
            Err(_) => assert!(out.len() == 1 && sts.len() == 1, "output touched on error"),
        }
    }
    if c.encoding.is_histogram() {
        let mut out = vec![tessera_model::HistogramSample::new(1, tessera_model::HistogramValue::Int(Histogram::default()))];
        if tessera_encoding::decode_histogram_samples_into(c, &mut out).is_err() {
            assert_eq!(out.len(), 1, "output touched on error");
        }
        if let Ok(Some(p)) = tessera_encoding::prometheus_histogram_chunk(c) {
            let _ = tessera_encoding::decode_histogram_samples_into(&p, &mut Vec::new());
        }
    }
    for max in [0, 1, 120, usize::MAX] {
        if let Ok(xs) = to_xor_chunks(c, max) {
            for x in &xs {
                assert_eq!(x.encoding, ChunkEncoding::Xor);
                // An XOR chunk passes through unread (as documented); a re-encoded one must decode.
                if c.encoding != ChunkEncoding::Xor {
                    let mut out = Vec::new();
                    decode_chunk_range_into(x, i64::MIN, i64::MAX, &mut out).expect("a re-encoded chunk decodes");
                }
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(400), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_under_every_encoding_never_panic(
        data in proptest::collection::vec(any::<u8>(), 0..400),
        enc in proptest::sample::select(ENCODINGS),
        mint in any::<i64>(),
        span in prop_oneof![Just(0u64), any::<u64>()],
    ) {
        let c = ChunkRef { mint_ms: mint, maxt_ms: mint.saturating_add_unsigned(span), encoding: enc, data: Bytes::from(data) };
        exercise(&c);
    }

    #[test]
    fn mutated_chunks_of_every_encoding_never_panic(
        s in samples(),
        enc in proptest::sample::select(ENCODINGS),
        label in proptest::option::of(proptest::sample::select(ENCODINGS)),
        st_seed in any::<i64>(),
        edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..4), 0..5),
    ) {
        let c = chunk(enc, &s, st_seed);
        // A valid float chunk decodes to what was encoded (NaN payloads aside).
        if edits.is_empty() && label.is_none() && matches!(enc, ChunkEncoding::Xor | ChunkEncoding::Dense | ChunkEncoding::Decimal | ChunkEncoding::DecimalOpen | ChunkEncoding::XorSt) {
            let mut out = Vec::new();
            decode_chunk_range_into(&c, i64::MIN, i64::MAX, &mut out).expect("a valid chunk decodes");
            prop_assert_eq!(out.len(), s.len());
        }
        let mut b = c.data.to_vec();
        for (at, byte, kind) in &edits {
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
        let c = ChunkRef { data: Bytes::from(b), encoding: label.unwrap_or(enc), ..c };
        exercise(&c);
    }
}
