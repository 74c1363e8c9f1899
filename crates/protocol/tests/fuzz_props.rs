//! "Arbitrary and mutated bytes never panic" for every decoder of untrusted input in this crate
//! (what a cargo-fuzz target would do, run by CI as a proptest).

use proptest::prelude::*;
use tessera_model::{labels, Sample};
use tessera_protocol::remote_read;
use tessera_protocol::remote_write::*;

fn valid_v1() -> Vec<u8> {
    let s = vec![
        WriteSeries::new(labels!("__name__" => "a", "job" => "x"), vec![Sample::new(1, 1.0), Sample::new(2, 2.0)]),
        WriteSeries::new(labels!("__name__" => "b", "instance" => "h:1"), vec![Sample::new(3, f64::NAN)]),
    ];
    let md = vec![Metadata { metric_family_name: "a".into(), kind: MetricType::Gauge, help: "h".into(), unit: "u".into() }];
    encode_v1(&s, &md)
}

fn valid_v2() -> Vec<u8> {
    let mut with_st =
        WriteSeries::new(labels!("__name__" => "c", "job" => "x"), vec![Sample::new(1_000, 1.0), Sample::new(2_000, 2.0)]);
    with_st.start_timestamps = vec![0, 500];
    let s = vec![
        WriteSeries::new(labels!("__name__" => "a", "job" => "x"), vec![Sample::new(1, 1.0), Sample::new(2, 2.0)]),
        with_st,
        WriteSeries::new(labels!("__name__" => "b", "instance" => "h:1"), vec![Sample::new(3, f64::NAN)]),
    ];
    let md = vec![Metadata { metric_family_name: "a".into(), kind: MetricType::Gauge, help: "h".into(), unit: "u".into() }];
    encode_v2(&s, &md)
}

/// Our zero-copy walker against prost's decoding of the byte-typed twins: never stricter than prost,
/// and when both accept a body they see the same series.
fn differential(bytes: &[u8]) {
    use prost::Message;
    use tessera_protocol::remote_write::raw;
    let limits = Limits::default();
    let ours = decode_ref(ProtoVersion::V1, bytes, &limits);
    let theirs = raw::WriteRequest::decode(bytes);
    match (&ours, &theirs) {
        (Ok(o), Ok(t)) => {
            assert_eq!(o.len() + o.invalid.len(), t.timeseries.len(), "v1 series count");
            assert_eq!(o.valid_samples() + o.invalid.iter().map(|i| i.samples).sum::<usize>(), t.timeseries.iter().map(|s| s.samples.len()).sum::<usize>());
        }
        (Err(e), Ok(_)) => panic!("v1: we reject what prost accepts: {e}"),
        _ => {}
    }
    let ours = decode_ref(ProtoVersion::V2, bytes, &limits);
    let theirs = raw::RequestV2::decode(bytes);
    match (&ours, &theirs) {
        (Ok(o), Ok(t)) => {
            assert_eq!(o.len() + o.invalid.len(), t.timeseries.len(), "v2 series count");
            // Start timestamps: when every series is valid, ours are prost's, sample by sample (an
            // empty slice standing for all zeros).
            if o.invalid.is_empty() {
                for (a, b) in o.series().zip(&t.timeseries) {
                    assert_eq!(a.samples.len(), b.samples.len());
                    for (i, s) in b.samples.iter().enumerate() {
                        assert_eq!(a.start_timestamps.get(i).copied().unwrap_or(0), s.start_timestamp, "v2 start timestamp");
                    }
                    assert!(a.start_timestamps.is_empty() || a.start_timestamps.len() == a.samples.len());
                }
            }
        }
        (Err(DecodeError::Protobuf { reason, .. }), Ok(_)) => panic!("v2: we reject what prost accepts: {reason}"),
        _ => {}
    }
}

fn check_all(bytes: &[u8]) {
    differential(bytes);
    let limits = Limits::default();
    let _ = decompress(bytes, 1 << 20);
    let _ = decode(ProtoVersion::V1, bytes, &limits);
    let _ = decode(ProtoVersion::V2, bytes, &limits);
    let _ = remote_read::decode_request(bytes, 1 << 20);
    let _ = remote_read::decode_request_message(bytes);
    let mut r = remote_read::FrameReader::new(bytes, 1 << 20);
    while let Some(Ok(_)) = r.next_frame() {}
}

fn mutate(mut base: Vec<u8>, edits: &[(usize, u8)], cut: usize) -> Vec<u8> {
    for &(i, b) in edits {
        if !base.is_empty() {
            let n = base.len();
            base[i % n] = b;
        }
    }
    let keep = base.len().saturating_sub(cut % (base.len() + 1));
    base.truncate(keep);
    base
}

proptest! {
    // `TESSERA_FUZZ_CASES=N` (issue 9's stable-toolchain fuzzing; `PROPTEST_CASES` works too) for longer runs.
    #![proptest_config(ProptestConfig { cases: ["TESSERA_FUZZ_CASES", "PROPTEST_CASES"].iter().find_map(|k| std::env::var(k).ok()?.parse().ok()).unwrap_or(512), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        check_all(&bytes);
    }

    #[test]
    fn mutated_requests_never_panic(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..6), cut in any::<usize>(), which in 0u8..2) {
        let base = if which == 0 { valid_v1() } else { valid_v2() };
        let m = mutate(base, &edits, cut % 8);
        check_all(&m);
        // Through snappy too: the compressed form mutated.
        let c = mutate(compress(&if which == 0 { valid_v1() } else { valid_v2() }), &edits, cut % 8);
        check_all(&c);
        if let Ok(d) = decompress(&c, 1 << 20) {
            check_all(&d);
        }
    }

    #[test]
    fn valid_series_round_trip(names in proptest::collection::btree_map("[a-z_]{1,8}", "\\PC{0,12}", 0..6), ts in proptest::collection::vec((any::<i64>(), any::<f64>(), prop_oneof![Just(0i64), any::<i64>()]), 0..5)) {
        let mut pairs: Vec<(String, String)> = names.into_iter().collect();
        pairs.push(("__name__".into(), "m".into()));
        let l = tessera_model::Labels::from_pairs(pairs);
        let samples: Vec<Sample> = ts.iter().map(|&(t, v, _)| Sample::new(t, v)).collect();
        let sts: Vec<i64> = ts.iter().map(|&(_, _, st)| st).collect();
        let mut series = WriteSeries::new(l.clone(), samples.clone());
        series.start_timestamps = sts.clone();
        let s = vec![series];
        // What a receiver should see: the STs when any is set (2.0 only), else nothing.
        let want_sts = if sts.iter().any(|&x| x != 0) { sts.clone() } else { Vec::new() };
        for (v, buf) in [(ProtoVersion::V1, encode_v1(&s, &[])), (ProtoVersion::V2, encode_v2(&s, &[]))] {
            let d = decode(v, &decompress(&compress(&buf), 1 << 20).expect("snappy"), &Limits::default()).expect("decodes");
            prop_assert_eq!(d.series.len(), 1);
            prop_assert_eq!(&d.series[0].labels, &l);
            let r = decode_ref(v, &buf, &Limits::default()).expect("decodes");
            prop_assert_eq!(r.get(0).hash(), l.hash());
            prop_assert_eq!(d.series[0].samples.len(), samples.len());
            for (a, b) in d.series[0].samples.iter().zip(&samples) {
                prop_assert!(a.bits_eq(b));
            }
            let want = if v == ProtoVersion::V2 { want_sts.clone() } else { Vec::new() };
            prop_assert_eq!(&d.series[0].start_timestamps, &want);
            prop_assert_eq!(r.get(0).start_timestamps, want.as_slice());
        }
    }
}
