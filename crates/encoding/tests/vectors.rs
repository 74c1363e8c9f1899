//! Byte-exact agreement with Prometheus' own XOR chunk encoder, on the vectors in shared/vectors
//! (produced by Prometheus 3.14's Go code).

use tessera_encoding::{XorEncoder, XorIter, decode_xor_into, encode_xor};
use tessera_model::Sample;


struct Case {
    name: String,
    samples: Vec<(i64, u64)>,
    chunk: Vec<u8>,
}

/// The cases of `../shared/vectors/xor_chunks.json`; none (skipped loudly, an error in CI) without it.
fn cases() -> Vec<Case> {
    let Some(path) = tessera_model::fixtures::shared("vectors/xor_chunks.json", "encoding vectors") else { return Vec::new() };
    let text = std::fs::read_to_string(path).expect("xor_chunks.json readable");
    let json: serde_json::Value = serde_json::from_str(&text).expect("valid JSON");
    let cases: Vec<Case> = json
        .as_array()
        .expect("a list of cases")
        .iter()
        .map(|c| {
            let samples = c["samples"]
                .as_array()
                .expect("samples")
                .iter()
                .map(|s| {
                    let t: i64 = s[0].as_str().expect("t as string").parse().expect("t parses");
                    let v = u64::from_str_radix(s[1].as_str().expect("v bits as hex"), 16).expect("hex bits");
                    (t, v)
                })
                .collect();
            Case {
                name: c["name"].as_str().expect("name").to_string(),
                samples,
                chunk: hex::decode(c["chunk_hex"].as_str().expect("chunk_hex")).expect("hex"),
            }
        })
        .collect();
    assert!(cases.len() >= 7, "expected the full vector set");
    cases
}

fn to_samples(c: &Case) -> Vec<Sample> {
    c.samples.iter().map(|&(t, v)| Sample::new(t, f64::from_bits(v))).collect()
}

#[test]
fn encoder_reproduces_prometheus_bytes() {
    for c in cases() {
        let mut enc = XorEncoder::new();
        for &(t, v) in &c.samples {
            enc.append(t, f64::from_bits(v));
            // The header count is correct after every append.
            assert_eq!(enc.bytes()[..2], enc.num_samples().to_be_bytes());
        }
        assert_eq!(hex::encode(enc.bytes()), hex::encode(&c.chunk), "case {}", c.name);
        assert_eq!(encode_xor(&to_samples(&c)), c.chunk, "case {}", c.name);
        assert_eq!(enc.first_t(), c.samples.first().map(|s| s.0));
        assert_eq!(enc.last_t(), c.samples.last().map(|s| s.0));
        assert_eq!(enc.last_v().map(f64::to_bits), c.samples.last().map(|s| s.1));
    }
}

#[test]
fn decoder_returns_exact_bits() {
    let mut saw_stale = false;
    for c in cases() {
        let got: Vec<(i64, u64)> =
            XorIter::new(&c.chunk).map(|r| r.map(|(t, v)| (t, v.to_bits())).expect("vector decodes")).collect();
        assert_eq!(got, c.samples, "case {}", c.name);
        saw_stale |= got.iter().any(|&(_, v)| v == tessera_model::STALE_NAN_BITS);

        let mut out = vec![Sample::new(42, 1.5)];
        decode_xor_into(&c.chunk, &mut out).expect("vector decodes");
        assert!(out[0].bits_eq(&Sample::new(42, 1.5)), "existing contents kept");
        let bits: Vec<(i64, u64)> = out[1..].iter().map(|s| (s.t, s.v.to_bits())).collect();
        assert_eq!(bits, c.samples, "case {}", c.name);
    }
    assert!(saw_stale, "the vectors include a stale marker");
}

#[test]
fn reopening_each_prefix_then_appending_the_rest_gives_prometheus_bytes() {
    for c in cases() {
        for split in 0..=c.samples.len() {
            let prefix = encode_xor(&to_samples(&Case {
                name: String::new(),
                samples: c.samples[..split].to_vec(),
                chunk: vec![],
            }));
            let mut enc = XorEncoder::from_bytes(&prefix).expect("own chunk reopens");
            assert_eq!(enc.bytes(), &prefix[..]);
            for &(t, v) in &c.samples[split..] {
                enc.append(t, f64::from_bits(v));
            }
            assert_eq!(enc.bytes(), &c.chunk[..], "case {} split {split}", c.name);
        }
    }
}
