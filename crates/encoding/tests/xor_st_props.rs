//! Property tests for the XorSt chunk (floats plus start timestamps): round-trips over random and
//! patterned STs, reopen equivalence, range decoding through the generic chunk entry points, XOR
//! conversion, "arbitrary or mutated bytes never panic", and the bytes/sample of the common ST patterns.

use proptest::prelude::*;
use tessera_encoding::{
    ChunkError, XorStEncoder, XorStIter, decode_chunk_range_into, decode_chunk_range_st_into,
    decode_xor_st_range_into, encode_xor, encode_xor_st, to_xor_chunks,
};
use tessera_model::{ChunkEncoding, ChunkRef, STALE_NAN, Sample};

fn value() -> impl Strategy<Value = f64> {
    prop_oneof![
        3 => any::<f64>(),
        2 => 0.0f64..100.0,
        1 => Just(0.0),
        1 => Just(f64::NAN),
        1 => Just(STALE_NAN),
        1 => (0i64..1000).prop_map(|i| i as f64),
    ]
}

fn gap() -> impl Strategy<Value = i64> {
    prop_oneof![
        4 => Just(15_000i64),
        2 => 1i64..3,
        2 => 14_000i64..16_000,
        1 => 1i64..1 << 40,
    ]
}

/// How a sample's ST relates to the sample (mixed within one series to exercise rule switches).
fn st_kind() -> impl Strategy<Value = (u8, i64)> {
    prop_oneof![
        3 => Just((0u8, 0i64)),           // unset
        2 => (Just(1u8), -5i64..5),       // constant base (+ the small change picks a new base)
        2 => Just((2u8, 0)),              // previous t
        2 => (Just(3u8), 0i64..100_000),  // t - const
        1 => (Just(4u8), any::<i64>()),   // arbitrary, negative included
    ]
}

fn series() -> impl Strategy<Value = (Vec<Sample>, Vec<i64>)> {
    (any::<i64>(), proptest::collection::vec((gap(), value(), st_kind()), 0..300)).prop_map(|(start, steps)| {
        let mut t = start / 2;
        let (mut out, mut sts) = (Vec::new(), Vec::new());
        let (mut base, mut prev_t) = (start / 3, 0i64);
        for (g, v, (kind, x)) in steps {
            let st = match kind {
                0 => 0,
                1 => {
                    if x == 0 {
                        base = base.wrapping_add(1_000);
                    }
                    base
                }
                2 => prev_t,
                3 => t.wrapping_sub(x),
                _ => x,
            };
            out.push(Sample::new(t, v));
            sts.push(st);
            prev_t = t;
            t = match t.checked_add(g) {
                Some(n) => n,
                None => break,
            };
        }
        (out, sts)
    })
}

fn triples(s: &[Sample], sts: &[i64]) -> Vec<(i64, i64, u64)> {
    s.iter().zip(sts).map(|(s, &st)| (s.t, st, s.v.to_bits())).collect()
}

fn chunk(bytes: Vec<u8>, s: &[Sample]) -> ChunkRef {
    ChunkRef {
        mint_ms: s.first().map_or(0, |s| s.t),
        maxt_ms: s.last().map_or(0, |s| s.t),
        encoding: ChunkEncoding::XorSt,
        data: bytes.into(),
    }
}

/// Runs every decoding path over `data`; they may fail but must not panic or hang.
fn exercise(data: &[u8]) {
    let _ = XorStIter::new(data).count();
    let (mut out, mut sts) = (Vec::new(), Vec::new());
    if decode_xor_st_range_into(data, i64::MIN, i64::MAX, &mut out, &mut sts).is_err() {
        assert!(out.is_empty() && sts.is_empty());
    }
    assert_eq!(out.len(), sts.len());
    let _ = XorStEncoder::from_bytes(data);
    let c = ChunkRef { mint_ms: i64::MIN, maxt_ms: i64::MAX, encoding: ChunkEncoding::XorSt, data: data.to_vec().into() };
    let _ = to_xor_chunks(&c, 120);
    let _ = decode_chunk_range_into(&c, i64::MIN, i64::MAX, &mut Vec::new());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn round_trips_exact_bits((samples, sts) in series()) {
        let bytes = encode_xor_st(&samples, &sts);
        prop_assert_eq!(u16::from_be_bytes([bytes[0], bytes[1]]) as usize, samples.len());
        let (mut out, mut got_sts) = (vec![Sample::new(1, 1.0)], vec![7]);
        decode_xor_st_range_into(&bytes, i64::MIN, i64::MAX, &mut out, &mut got_sts).expect("own chunk decodes");
        prop_assert_eq!(triples(&out[1..], &got_sts[1..]), triples(&samples, &sts));
        let it: Vec<_> = XorStIter::new(&bytes).map(|r| r.map(|(t, st, v)| (t, st, v.to_bits())).expect("decodes")).collect();
        prop_assert_eq!(it, triples(&samples, &sts));
    }

    #[test]
    fn encoder_bytes_are_complete_after_every_append((samples, sts) in series()) {
        let mut enc = XorStEncoder::new();
        for (i, (s, &st)) in samples.iter().zip(&sts).enumerate() {
            enc.append(s.t, st, s.v);
            if i % 37 == 0 {
                let got: Vec<_> = XorStIter::new(enc.bytes()).map(|r| r.map(|(t, st, v)| (t, st, v.to_bits())).expect("decodes")).collect();
                prop_assert_eq!(got, triples(&samples[..=i], &sts[..=i]));
            }
        }
        prop_assert_eq!(enc.num_samples(), samples.len());
    }

    #[test]
    fn reopen_then_append_equals_encoding_at_once((samples, sts) in series(), split in any::<prop::sample::Index>()) {
        let at = split.index(samples.len() + 1);
        let whole = encode_xor_st(&samples, &sts);
        let mut enc = XorStEncoder::from_bytes(&encode_xor_st(&samples[..at], &sts[..at])).expect("reopens");
        for (s, &st) in samples[at..].iter().zip(&sts[at..]) {
            enc.append(s.t, st, s.v);
        }
        prop_assert_eq!(enc.bytes(), &whole[..]);
    }

    #[test]
    fn range_decode_matches_filter((samples, sts) in series(), a in any::<i64>(), b in any::<i64>()) {
        prop_assume!(!samples.is_empty());
        let (mint, maxt) = if a <= b { (a, b) } else { (b, a) };
        // Half the time pick bounds inside the series so the filter actually cuts.
        let (mint, maxt) = if a % 2 == 0 {
            let i = (a.unsigned_abs() as usize) % samples.len();
            let j = (b.unsigned_abs() as usize) % samples.len();
            (samples[i.min(j)].t, samples[i.max(j)].t)
        } else {
            (mint, maxt)
        };
        let c = chunk(encode_xor_st(&samples, &sts), &samples);
        let (mut out, mut got_sts) = (Vec::new(), Vec::new());
        decode_chunk_range_st_into(&c, mint, maxt, &mut out, &mut got_sts).expect("decodes");
        let want: Vec<_> = triples(&samples, &sts).into_iter().filter(|x| x.0 >= mint && x.0 <= maxt).collect();
        prop_assert_eq!(triples(&out, &got_sts), want.clone());
        // Without STs: the same samples.
        let mut plain = Vec::new();
        decode_chunk_range_into(&c, mint, maxt, &mut plain).expect("decodes");
        prop_assert_eq!(plain.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>(), want.iter().map(|x| (x.0, x.2)).collect::<Vec<_>>());
        // XOR and dense chunks report st = 0.
        let x = ChunkRef { encoding: ChunkEncoding::Xor, data: encode_xor(&samples).into(), ..c.clone() };
        let (mut out, mut got_sts) = (Vec::new(), vec![5]);
        decode_chunk_range_st_into(&x, mint, maxt, &mut out, &mut got_sts).expect("decodes");
        prop_assert_eq!(got_sts.len(), out.len() + 1);
        prop_assert!(got_sts[1..].iter().all(|&s| s == 0));
    }

    #[test]
    fn converts_to_xor_without_sts((samples, sts) in series()) {
        prop_assume!(!samples.is_empty());
        let c = chunk(encode_xor_st(&samples, &sts), &samples);
        let mut out = Vec::new();
        for x in to_xor_chunks(&c, 120).expect("converts") {
            prop_assert_eq!(x.encoding, ChunkEncoding::Xor);
            decode_chunk_range_into(&x, i64::MIN, i64::MAX, &mut out).expect("decodes");
        }
        prop_assert_eq!(out.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>(), samples.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>());
    }

    #[test]
    fn arbitrary_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..400)) {
        exercise(&data);
    }

    #[test]
    fn mutated_chunks_never_panic((samples, sts) in series(), muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>()) {
        let mut bytes = encode_xor_st(&samples, &sts);
        for (i, x) in muts {
            let at = i.index(bytes.len());
            bytes[at] ^= x;
        }
        exercise(&bytes);
        let end = cut.index(bytes.len() + 1);
        exercise(&bytes[..end]);
    }

    /// The bulk decoder's unchecked fast loop and the sample-by-sample iterator agree on every input,
    /// valid or damaged: same samples, or both an error.
    #[test]
    fn fast_and_checked_paths_agree((samples, sts) in series(), muts in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..4)) {
        let mut bytes = encode_xor_st(&samples, &sts);
        for (i, x) in muts {
            let at = i.index(bytes.len());
            bytes[at] ^= x;
        }
        let slow: Result<Vec<_>, ChunkError> = XorStIter::new(&bytes).map(|r| r.map(|(t, st, v)| (t, st, v.to_bits()))).collect();
        let (mut out, mut got) = (Vec::new(), Vec::new());
        let fast = decode_xor_st_range_into(&bytes, i64::MIN, i64::MAX, &mut out, &mut got).map(|()| triples(&out, &got));
        match (slow, fast) {
            (Ok(a), Ok(b)) => prop_assert_eq!(a, b),
            (Err(_), Err(_)) => {}
            (a, b) => prop_assert!(false, "iterator {:?} vs bulk {:?}", a.map(|v| v.len()), b.map(|v| v.len())),
        }
    }

    #[test]
    fn truncated_chunks_are_errors((samples, sts) in series(), cut in any::<prop::sample::Index>()) {
        prop_assume!(!samples.is_empty());
        let bytes = encode_xor_st(&samples, &sts);
        let end = cut.index(bytes.len());
        let (mut out, mut got_sts) = (Vec::new(), Vec::new());
        let r = decode_xor_st_range_into(&bytes[..end], i64::MIN, i64::MAX, &mut out, &mut got_sts);
        prop_assert!(matches!(r, Err(ChunkError::Truncated { .. })), "{:?}", r);
        prop_assert!(out.is_empty() && got_sts.is_empty());
    }
}

#[test]
#[should_panic(expected = "one start timestamp per sample")]
fn mismatched_lengths_panic() {
    encode_xor_st(&[Sample::new(1, 1.0)], &[]);
}

/// A 120-sample scrape-like chunk (15 s ± jitter, a slowly growing counter) with each ST pattern:
/// prints bytes/sample (run with `--nocapture` to see them) and bounds the ST overhead over plain XOR.
#[test]
fn st_patterns_are_compact() {
    let n = 120usize;
    let mut samples = Vec::with_capacity(n);
    let mut t = 1_700_000_000_000i64;
    let mut v = 1000.0;
    for i in 0..n {
        samples.push(Sample::new(t, v));
        t += 15_000 + [0, 1, -1, 3, 0][i % 5];
        v += [1.0, 2.0, 0.0, 5.0][i % 4];
    }
    let xor = encode_xor(&samples).len();
    type Pattern<'a> = (&'a str, Box<dyn Fn(usize) -> i64 + 'a>, usize);
    let pats: [Pattern<'_>; 5] = [
        ("st = 0", Box::new(|_| 0), 18),
        ("st constant (cumulative)", Box::new(|_| 1_699_990_000_123), 32),
        ("st = previous t (delta)", Box::new(|i| if i == 0 { samples[0].t - 15_000 } else { samples[i - 1].t }), 32),
        ("st = t - 60000", Box::new(|i| samples[i].t - 60_000), 32),
        ("st mostly 0 (1 in 20 set)", Box::new(|i| if i % 20 == 7 { samples[i].t - 5 } else { 0 }), 80),
    ];
    println!("plain XOR: {:.3} bytes/sample", xor as f64 / n as f64);
    for (name, f, max_extra) in pats {
        let sts: Vec<i64> = (0..n).map(&f).collect();
        let b = encode_xor_st(&samples, &sts);
        println!("{name}: {:.3} bytes/sample (+{} bytes over XOR)", b.len() as f64 / n as f64, b.len() - xor);
        assert!(b.len() <= xor + max_extra, "{name}: {} > {} + {max_extra}", b.len(), xor);
        let (mut out, mut got) = (Vec::new(), Vec::new());
        decode_xor_st_range_into(&b, i64::MIN, i64::MAX, &mut out, &mut got).expect("decodes");
        assert_eq!(got, sts);
    }
}

/// Decode speed of XorSt against XOR on the same 120-sample counter chunks (run with
/// `cargo test --release -p tessera-encoding --test xor_st_props -- --ignored --nocapture`).
#[test]
#[ignore]
fn decode_speed_vs_xor() {
    let chunks: Vec<(Vec<u8>, Vec<u8>)> = (0..10_000)
        .map(|c| {
            let s: Vec<Sample> = (0..120).map(|i| Sample::new(c * 1_800_000 + i * 15_000 + (i % 3), (c * 120 + i) as f64)).collect();
            let sts = vec![1_700_000_000_000 + c; 120];
            (encode_xor(&s), encode_xor_st(&s, &sts))
        })
        .collect();
    let (mut out, mut sts) = (Vec::with_capacity(130), Vec::with_capacity(130));
    for round in 0..3 {
        let t0 = std::time::Instant::now();
        let mut n = 0;
        for (x, _) in &chunks {
            out.clear();
            tessera_encoding::decode_xor_into(x, &mut out).expect("decodes");
            n += out.len();
        }
        let xor = t0.elapsed();
        let t0 = std::time::Instant::now();
        for (_, st) in &chunks {
            out.clear();
            sts.clear();
            decode_xor_st_range_into(st, i64::MIN, i64::MAX, &mut out, &mut sts).expect("decodes");
        }
        let xst = t0.elapsed();
        println!("round {round}: {n} samples: XOR {:.1} ns/sample, XorSt {:.1} ns/sample", xor.as_nanos() as f64 / n as f64, xst.as_nanos() as f64 / n as f64);
    }
}
