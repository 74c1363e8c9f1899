//! Property tests for the XOR chunk: seeded random round-trips over awkward timestamps and values,
//! reopen-then-append equivalence, size bounds, and "arbitrary or mutated bytes never panic".

use proptest::prelude::*;
use tessera_encoding::{ChunkError, XorEncoder, XorIter, decode_chunk_range_into, decode_xor_into, decode_xor_range_into, for_each_xor_sample, encode_xor};
use tessera_model::{ChunkEncoding, ChunkRef, Sample};

/// Values that stress the XOR windows: special floats, NaN payloads, subnormals, and runs.
fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => any::<f64>(),
        2 => 0.0f64..100.0,
        1 => Just(0.0),
        1 => Just(-0.0),
        1 => Just(f64::INFINITY),
        1 => Just(f64::NEG_INFINITY),
        1 => Just(tessera_model::STALE_NAN),
        1 => any::<u64>().prop_map(|p| f64::from_bits(0x7ff0_0000_0000_0001 | (p & 0x000f_ffff_ffff_ffff))),
        1 => (1u64..0x000f_ffff_ffff_ffff).prop_map(f64::from_bits), // subnormals
        1 => (0i64..1000).prop_map(|i| i as f64),
    ]
}

/// Gaps between consecutive timestamps: regular, jittered, huge; always >= 1.
fn gap() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => Just(15_000i64),
        2 => 1i64..3,
        2 => 14_000i64..16_000,
        1 => 1i64..1 << 20,
        1 => 1i64..1 << 40,
        1 => 1i64..i64::MAX / 70_000,
    ]
}

fn series() -> impl Strategy<Value = Vec<Sample>> {
    (any::<i64>(), proptest::collection::vec((gap(), value()), 0..300)).prop_map(|(start, steps)| {
        // Keep every timestamp in range: start low enough that the sum of gaps cannot overflow.
        let mut t = start / 2;
        let mut out = Vec::with_capacity(steps.len());
        for (g, v) in steps {
            out.push(Sample::new(t, v));
            t = match t.checked_add(g) {
                Some(n) => n,
                None => break,
            };
        }
        out
    })
}

fn bits(s: &[Sample]) -> Vec<(i64, u64)> {
    s.iter().map(|s| (s.t, s.v.to_bits())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trips_exact_bits(samples in series()) {
        let bytes = encode_xor(&samples);
        prop_assert_eq!(u16::from_be_bytes([bytes[0], bytes[1]]) as usize, samples.len());
        let mut out = Vec::new();
        decode_xor_into(&bytes, &mut out).expect("own chunk decodes");
        prop_assert_eq!(bits(&out), bits(&samples));
        let it: Vec<(i64, u64)> = XorIter::new(&bytes).map(|r| r.map(|(t, v)| (t, v.to_bits())).expect("decodes")).collect();
        prop_assert_eq!(it, bits(&samples));
    }

    #[test]
    fn reopen_then_append_equals_encoding_at_once(samples in series(), split in any::<prop::sample::Index>()) {
        let at = if samples.is_empty() { 0 } else { split.index(samples.len() + 1) };
        let whole = encode_xor(&samples);
        let mut enc = XorEncoder::from_bytes(&encode_xor(&samples[..at])).expect("reopens");
        for s in &samples[at..] {
            enc.append(s.t, s.v);
        }
        prop_assert_eq!(enc.bytes(), &whole[..]);
        prop_assert_eq!(enc.num_samples() as usize, samples.len());
    }

    #[test]
    fn reopen_ignores_garbage_padding(samples in series(), junk in any::<u8>(), extra in proptest::collection::vec(any::<u8>(), 0..4)) {
        prop_assume!(!samples.is_empty());
        let whole = encode_xor(&samples);
        let mut dirty = whole.clone();
        // Set the unused bits of the last byte and add trailing bytes: neither may leak into appends.
        let last = dirty.len() - 1;
        dirty[last] |= junk & padding_mask(&samples);
        dirty.extend_from_slice(&extra);
        let reopened = XorEncoder::from_bytes(&dirty).expect("reopens");
        prop_assert_eq!(reopened.bytes(), &whole[..]);
    }

    #[test]
    fn size_bounds(samples in series()) {
        let bytes = encode_xor(&samples);
        // Worst case per sample after the first two: 4+64 dod bits + 2+11+64 value bits = 145 bits.
        let n = samples.len();
        let bound = 2 + if n == 0 { 0 } else { 10 + 8 } + if n >= 2 { 10 + 10 } else { 0 } + n.saturating_sub(2) * 145 / 8 + 1;
        prop_assert!(bytes.len() <= bound, "{} > {}", bytes.len(), bound);
        // Constant step and constant value: 2 bits per sample after the second.
        let regular: Vec<Sample> = (0..n as i64).map(|i| Sample::new(i * 15_000, 1.0)).collect();
        let rb = encode_xor(&regular);
        prop_assert!(rb.len() <= 2 + 10 + 8 + 3 + 1 + n.saturating_sub(2).div_ceil(4) + 1);
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        exercise(&data);
    }

    #[test]
    fn mutated_chunks_never_panic(samples in series(), muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>()) {
        let mut bytes = encode_xor(&samples);
        for (i, x) in muts {
            let at = i.index(bytes.len());
            bytes[at] ^= x;
        }
        exercise(&bytes);
        let end = cut.index(bytes.len() + 1);
        exercise(&bytes[..end]);
    }

    #[test]
    fn truncated_chunks_are_errors(samples in series(), cut in any::<prop::sample::Index>()) {
        prop_assume!(!samples.is_empty());
        let bytes = encode_xor(&samples);
        // Cutting off at least one whole byte that carries sample bits must be noticed.
        let end = cut.index(bytes.len());
        let mut out = Vec::new();
        let r = decode_xor_into(&bytes[..end], &mut out);
        prop_assert!(matches!(r, Err(ChunkError::Truncated { .. })), "{:?}", r);
        prop_assert!(out.is_empty());
    }

    #[test]
    fn range_decode_matches_filter(samples in series(), a in any::<i64>(), b in any::<i64>()) {
        prop_assume!(!samples.is_empty());
        let (mint, maxt) = if a <= b { (a, b) } else { (b, a) };
        let c = ChunkRef {
            mint_ms: samples[0].t,
            maxt_ms: samples[samples.len() - 1].t,
            encoding: ChunkEncoding::Xor,
            data: bytes::Bytes::from(encode_xor(&samples)),
        };
        let mut out = Vec::new();
        decode_chunk_range_into(&c, mint, maxt, &mut out).expect("decodes");
        let want: Vec<Sample> = samples.iter().copied().filter(|s| s.t >= mint && s.t <= maxt).collect();
        prop_assert_eq!(bits(&out), bits(&want));
        let mut visited = Vec::new();
        let n = for_each_xor_sample(&c.data, mint, maxt, |t, v| visited.push(Sample::new(t, v))).expect("decodes");
        prop_assert_eq!(n, want.len());
        prop_assert_eq!(bits(&visited), bits(&want));
    }
}

/// Mask of the unused low bits in the last byte of `samples`' chunk.
fn padding_mask(samples: &[Sample]) -> u8 {
    let enc = XorEncoder::from_bytes(&encode_xor(samples)).expect("reopens");
    let free = enc.bytes().len() * 8 - enc.bit_len();
    assert!(free < 8);
    ((1u16 << free) - 1) as u8
}

fn exercise(data: &[u8]) {
    let mut out = Vec::new();
    let r = decode_xor_into(data, &mut out);
    if r.is_err() {
        assert!(out.is_empty());
    }
    // The bulk fast path and the iterator are separate code: they must agree on every input.
    let iter: Result<Vec<(i64, u64)>, ChunkError> =
        XorIter::new(data).map(|r| r.map(|(t, v)| (t, v.to_bits()))).collect();
    match (&r, &iter) {
        (Ok(()), Ok(v)) => assert_eq!(&bits(&out), v),
        (Err(a), Err(b)) => assert_eq!(std::mem::discriminant(a), std::mem::discriminant(b)),
        _ => panic!("bulk decode {r:?} disagrees with the iterator {iter:?}"),
    }
    let mut it = XorIter::new(data);
    let mut n = 0usize;
    while let Some(r) = it.next() {
        n += 1;
        assert!(n <= 65_536, "iterator must stop");
        if r.is_err() {
            assert!(it.next().is_none(), "fused after an error");
            break;
        }
    }
    let mut it = XorIter::new(data);
    let _ = it.seek(0);
    let _ = it.seek(i64::MAX);
    if let Ok(mut enc) = XorEncoder::from_bytes(data) {
        // A reopened chunk must accept appends and still decode.
        if !enc.is_full() {
            let t = enc.last_t().map_or(0, |t| t.saturating_add(1));
            enc.append(t, 1.0);
            let mut out = Vec::new();
            decode_xor_into(enc.bytes(), &mut out).expect("reopened chunk with an append decodes");
        }
    }
    for e in [ChunkEncoding::Xor, ChunkEncoding::Histogram, ChunkEncoding::FloatHistogram] {
        let c =
            ChunkRef { mint_ms: i64::MIN, maxt_ms: i64::MAX, encoding: e, data: bytes::Bytes::copy_from_slice(data) };
        let _ = decode_chunk_range_into(&c, i64::MIN, i64::MAX, &mut out);
    }
}

#[test]
fn histogram_encodings_are_unsupported_for_now() {
    for (e, b) in [(ChunkEncoding::Histogram, 2u8), (ChunkEncoding::FloatHistogram, 3)] {
        let c = ChunkRef { mint_ms: 0, maxt_ms: 10, encoding: e, data: bytes::Bytes::from_static(&[0, 0]) };
        let mut out = Vec::new();
        assert_eq!(decode_chunk_range_into(&c, 0, 10, &mut out), Err(ChunkError::UnsupportedEncoding(b)));
    }
}

#[test]
fn clear_reuses_the_buffer() {
    let mut enc = XorEncoder::with_capacity(4096);
    for i in 0..100 {
        enc.append(i, i as f64);
    }
    let cap = enc.size_bytes();
    enc.clear();
    assert_eq!(enc.bytes(), &[0, 0]);
    assert_eq!(enc.size_bytes(), cap);
    enc.append(5, 2.0);
    assert_eq!(enc.bytes(), &encode_xor(&[Sample::new(5, 2.0)])[..]);
}

#[test]
fn full_chunk_holds_u16_max_samples() {
    let mut enc = XorEncoder::new();
    for i in 0..u16::MAX as i64 {
        enc.append(i, (i % 7) as f64);
    }
    assert!(enc.is_full());
    let mut out = Vec::new();
    decode_xor_into(enc.bytes(), &mut out).expect("decodes");
    assert_eq!(out.len(), u16::MAX as usize);
}

#[test]
fn the_last_bytes_decode_alike_on_both_paths_at_every_truncation() {
    // Scrape-like chunks (10 s with jitter, small integer values: about a byte a sample, so the last 32
    // bytes — decoded from a zero-padded copy — hold dozens of samples), cut at every byte: the bulk
    // decoder and the checked iterator agree on the samples and on the error.
    for n in [1usize, 2, 3, 5, 20, 40, 120, 140] {
        let samples: Vec<Sample> =
            (0..n as i64).map(|i| Sample::new(1_700_000_000_000 + i * 10_000 + (i % 3), (i * 7 % 13) as f64)).collect();
        let bytes = encode_xor(&samples);
        for end in 0..=bytes.len() {
            exercise(&bytes[..end]);
        }
        let mut out = Vec::new();
        decode_xor_into(&bytes, &mut out).expect("decodes");
        assert_eq!(bits(&out), bits(&samples));
        for (a, b) in [(0, i64::MAX), (samples[n / 2].t, samples[n - 1].t), (samples[n - 1].t, samples[n - 1].t)] {
            let mut got = Vec::new();
            decode_xor_range_into(&bytes, a, b, &mut got).expect("decodes");
            let want: Vec<Sample> = samples.iter().copied().filter(|s| s.t >= a && s.t <= b).collect();
            assert_eq!(bits(&got), bits(&want));
        }
    }
}

#[test]
fn the_widest_samples_decode_alike_in_the_last_bytes() {
    // Samples whose time deltas need the 64-bit bucket and whose values XOR to 58–64 significant bits:
    // the widest reads the decoder makes, at every position of the zero-padded tail, cut at every byte.
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut t = 0i64;
    let mut samples = Vec::new();
    for i in 0..40i64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        t += if i % 3 == 0 { 1 << 40 } else { 1 + (x % 5000) as i64 };
        samples.push(Sample::new(t, f64::from_bits(x | 1 | (1 << 62))));
    }
    for n in [1usize, 2, 3, 4, 7, 40] {
        let bytes = encode_xor(&samples[..n]);
        for end in 0..=bytes.len() {
            exercise(&bytes[..end]);
        }
        let mut out = Vec::new();
        decode_xor_into(&bytes, &mut out).expect("decodes");
        assert_eq!(bits(&out), bits(&samples[..n]));
    }
}
