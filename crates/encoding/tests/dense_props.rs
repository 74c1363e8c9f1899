//! The dense cold-chunk codec: exact round-trips, "only when smaller than XOR", B1's size goal, and
//! "arbitrary or mutated bytes never panic".

use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use tessera_encoding::{
    decode_chunk_range_into, decode_chunk_range_into_slice, decode_dense_into, decode_dense_range_into_slice, encode_dense,
    encode_dense_always, encode_xor,
};
use tessera_model::{ChunkEncoding, ChunkRef, Sample};

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => any::<f64>(),
        3 => 0.0f64..100.0,
        1 => Just(-0.0),
        1 => Just(f64::INFINITY),
        1 => Just(tessera_model::STALE_NAN),
        1 => (1u64..0x000f_ffff_ffff_ffff).prop_map(f64::from_bits),
        2 => (0i64..1000).prop_map(|i| i as f64),
    ]
}

fn series() -> impl Strategy<Value = Vec<Sample>> {
    let gap = prop_oneof![4 => Just(1i64), 2 => Just(15_000i64), 2 => 1i64..100, 1 => 1i64..1 << 40];
    (any::<i64>(), proptest::collection::vec((gap, value()), 0..400)).prop_map(|(start, steps)| {
        let mut t = start / 2;
        let mut out = Vec::new();
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

/// `samples` as a Dense chunk with exact bounds (`samples` not empty).
fn dense_chunk(samples: &[Sample]) -> ChunkRef {
    ChunkRef {
        mint_ms: samples[0].t,
        maxt_ms: samples[samples.len() - 1].t,
        encoding: ChunkEncoding::Dense,
        data: bytes::Bytes::from(encode_dense_always(samples)),
    }
}

fn bits(s: &[Sample]) -> Vec<(i64, u64)> {
    s.iter().map(|s| (s.t, s.v.to_bits())).collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trips_exact_bits(samples in series()) {
        let bytes = encode_dense_always(&samples);
        let mut out = Vec::new();
        decode_dense_into(&bytes, &mut out).expect("own chunk decodes");
        prop_assert_eq!(bits(&out), bits(&samples));
    }

    #[test]
    fn chosen_only_when_smaller_than_xor(samples in series()) {
        prop_assume!(!samples.is_empty());
        if let Some(d) = encode_dense(&samples) {
            prop_assert!(d.len() < encode_xor(&samples).len());
        }
    }

    #[test]
    fn range_decode_matches_filter(samples in series(), a in any::<i64>(), b in any::<i64>()) {
        prop_assume!(!samples.is_empty());
        let (mint, maxt) = if a <= b { (a, b) } else { (b, a) };
        let c = dense_chunk(&samples);
        let mut out = Vec::new();
        decode_chunk_range_into(&c, mint, maxt, &mut out).expect("decodes");
        let want: Vec<Sample> = samples.iter().copied().filter(|s| s.t >= mint && s.t <= maxt).collect();
        prop_assert_eq!(bits(&out), bits(&want));
    }

    /// Decoding into a slice laid out beforehand gives what decoding into a vector gives, leaves the
    /// slice past it alone, and "finite" is never claimed for a chunk with a NaN, an infinity or a
    /// stale marker in range.
    #[test]
    fn slice_decode_matches_vector_decode(samples in series(), a in any::<i64>(), b in any::<i64>(), spare in 0usize..3) {
        prop_assume!(!samples.is_empty());
        let (mint, maxt) = if a <= b { (a, b) } else { (b, a) };
        let c = dense_chunk(&samples);
        let mut want = Vec::new();
        decode_chunk_range_into(&c, mint, maxt, &mut want).expect("decodes");
        let junk = Sample::new(-7, 7.0);
        let mut dst = vec![junk; want.len() + spare];
        let got = decode_chunk_range_into_slice(&c, mint, maxt, &mut dst).expect("decodes").expect("dense decodes into a slice");
        prop_assert_eq!(got.len, want.len());
        prop_assert_eq!(bits(&dst[..got.len]), bits(&want));
        prop_assert!(dst[got.len..].iter().all(|s| s.t == -7));
        if got.finite {
            prop_assert!(want.iter().all(|s| s.v.is_finite()));
        }
        if samples.iter().all(|s| s.v.is_finite()) {
            prop_assert!(got.finite, "every value finite: the symbol table shows it");
        }
        // One sample too few places: an error, not a panic and not a short answer.
        if !want.is_empty() {
            let mut short = vec![junk; want.len() - 1];
            prop_assert!(decode_dense_range_into_slice(&c.data, mint, maxt, &mut short).is_err());
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..300)) {
        exercise(&data);
    }

    #[test]
    fn mutated_chunks_never_panic(samples in series(), muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>()) {
        let mut bytes = encode_dense_always(&samples);
        for (i, x) in muts {
            let at = i.index(bytes.len());
            bytes[at] ^= x;
        }
        exercise(&bytes);
        exercise(&bytes[..cut.index(bytes.len() + 1)]);
    }

    #[test]
    fn truncation_is_an_error(samples in series(), cut in any::<prop::sample::Index>()) {
        prop_assume!(!samples.is_empty());
        let bytes = encode_dense_always(&samples);
        let mut out = Vec::new();
        let r = decode_dense_into(&bytes[..cut.index(bytes.len())], &mut out);
        // The last byte always carries bits of the last value unless values take 0 bits (one symbol, all
        // mantissas equal), where only the header can be cut.
        if r.is_ok() {
            let first = samples[0].v.to_bits();
            prop_assert!(samples.iter().all(|s| s.v.to_bits() == first));
        } else {
            prop_assert!(out.is_empty());
        }
    }
}

fn exercise(data: &[u8]) {
    let mut out = Vec::new();
    if decode_dense_into(data, &mut out).is_err() {
        assert!(out.is_empty());
    }
    let c = ChunkRef {
        mint_ms: i64::MIN,
        maxt_ms: i64::MAX,
        encoding: ChunkEncoding::Dense,
        data: bytes::Bytes::copy_from_slice(data),
    };
    let _ = decode_chunk_range_into(&c, 0, 1000, &mut out);
    for n in [0, 1, 64, 4096] {
        let mut dst = vec![Sample::new(0, 0.0); n];
        if let Ok(r) = decode_dense_range_into_slice(data, i64::MIN, i64::MAX, &mut dst) {
            assert!(r.len <= n);
        }
    }
}

/// B1's shape: timestamps 0,1,2,… ms and values uniform in [0, 100) from rand.
fn b1(n: usize, seed: u64) -> Vec<Sample> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    (0..n as i64).map(|t| Sample::new(t, rng.random_range(0.0..100.0))).collect()
}

#[test]
fn b1_values_fit_the_seven_bytes_per_point_goal() {
    let samples = b1(65_536, 7);
    for per_chunk in [1024usize, 8192, 65_536] {
        let mut dense = 0usize;
        let mut xor = 0usize;
        for part in samples.chunks(per_chunk) {
            dense += encode_dense(part).expect("dense is smaller than XOR on random doubles").len();
            xor += part.chunks(usize::from(u16::MAX)).map(|p| encode_xor(p).len()).sum::<usize>();
        }
        let d = dense as f64 / samples.len() as f64;
        let x = xor as f64 / samples.len() as f64;
        assert!(d <= 7.0, "dense {d:.3} bytes/point with {per_chunk}-sample chunks");
        assert!(d < x, "dense {d:.3} vs xor {x:.3}");
    }
}

#[test]
fn dense_chunks_convert_to_xor_for_remote_read() {
    let samples = b1(1000, 3);
    let c = ChunkRef {
        mint_ms: 0,
        maxt_ms: 999,
        encoding: ChunkEncoding::Dense,
        data: encode_dense(&samples).expect("smaller").into(),
    };
    let parts = tessera_encoding::to_xor_chunks(&c, 120).expect("converts");
    assert_eq!(parts.len(), 9);
    let mut out = Vec::new();
    for p in &parts {
        assert_eq!(p.encoding, ChunkEncoding::Xor);
        let before = out.len();
        tessera_encoding::decode_xor_into(&p.data, &mut out).expect("decodes");
        assert_eq!((p.mint_ms, p.maxt_ms), (out[before].t, out[out.len() - 1].t));
    }
    assert_eq!(bits(&out), bits(&samples));
    let x = ChunkRef { encoding: ChunkEncoding::Xor, data: encode_xor(&samples).into(), ..c };
    assert_eq!(tessera_encoding::to_xor_chunks(&x, 120).expect("as is"), vec![x]);
}

#[test]
fn constant_series_cost_at_most_one_bit_per_sample() {
    // Regular steps and a constant value: timestamps are one run, the value one symbol and the shared
    // trailing zeros leave at most one mantissa bit.
    let s: Vec<Sample> = (0..1000).map(|i| Sample::new(i * 15_000, 3.0)).collect();
    let d = encode_dense(&s).expect("smaller than XOR's 2 bits per sample");
    assert!(d.len() <= 30 + 1000 / 8, "{}", d.len());
    let mut out = Vec::new();
    decode_dense_into(&d, &mut out).expect("decodes");
    assert_eq!(bits(&out), bits(&s));
}

/// Size and speed of dense chunks against XOR on B1's data, per chunk length (run with
/// `cargo test --release -p tessera-encoding --test dense_props -- --ignored --nocapture`). Sizes count
/// 8 bytes per chunk beyond its data (a block's chunk record and index entry).
#[test]
#[ignore]
fn dense_size_and_speed_by_chunk_length() {
    let n = 1 << 20;
    let samples = b1(n, 11);
    let xor: Vec<Vec<u8>> = samples.chunks(120).map(encode_xor).collect();
    let xor_bytes: usize = xor.iter().map(|c| c.len() + 8).sum();
    let mut out = Vec::with_capacity(n + 1);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let t0 = std::time::Instant::now();
        out.clear();
        for c in &xor {
            tessera_encoding::decode_xor_into(c, &mut out).expect("decodes");
        }
        best = best.min(t0.elapsed().as_nanos() as f64 / n as f64);
    }
    println!("XOR/120: {:.3} bytes/point, decode {best:.2} ns/point", xor_bytes as f64 / n as f64);
    for per in [120usize, 240, 480, 960, 1920, 4096, 16384, 65536] {
        let t0 = std::time::Instant::now();
        let mut enc = tessera_encoding::DenseEncoder::new();
        let dense: Vec<Vec<u8>> = samples
            .chunks(per)
            .map(|c| {
                let mut v = Vec::new();
                enc.encode_into(c, &mut v);
                v
            })
            .collect();
        let enc = t0.elapsed().as_nanos() as f64 / n as f64;
        let bytes: usize = dense.iter().map(|c| c.len() + 8).sum();
        let mut best = f64::MAX;
        for _ in 0..5 {
            let t0 = std::time::Instant::now();
            out.clear();
            for c in &dense {
                decode_dense_into(c, &mut out).expect("decodes");
            }
            best = best.min(t0.elapsed().as_nanos() as f64 / n as f64);
        }
        println!("Dense/{per}: {:.3} bytes/point, encode {enc:.2} ns/point, decode {best:.2} ns/point", bytes as f64 / n as f64);
    }
}
