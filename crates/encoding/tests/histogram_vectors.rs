//! Byte-exact agreement with Prometheus' own native-histogram chunk encoders, on the vectors in
//! `../shared/vectors/histogram_chunks.json` (produced by Prometheus 3.14's Go code): our appender
//! must cut the same chunks with the same headers and bytes, and our decoders must read them back to
//! what Prometheus' iterators return, bit for bit.

use serde_json::Value;
use tessera_encoding::{
    CounterResetHeader, FloatHistogramEncoder, FloatHistogramIter, HistogramEncoder, HistogramIter, encode_float_histograms, encode_histograms,
};
use tessera_model::histogram::{CounterResetHint, FloatHistogram, Histogram, Span};

fn float(obj: &Value, field: &str) -> f64 {
    if let Some(bits) = obj.get(format!("{field}_bits")).and_then(Value::as_str) {
        return f64::from_bits(u64::from_str_radix(bits, 16).expect("hex bits"));
    }
    obj[field].as_f64().unwrap_or_else(|| panic!("{field} is a number"))
}

fn spans(v: &Value) -> Vec<Span> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| Span::new(s["Offset"].as_i64().expect("Offset") as i32, s["Length"].as_u64().expect("Length") as u32))
                .collect()
        })
        .unwrap_or_default()
}

fn floats(v: &Value) -> Vec<f64> {
    v.as_array().map(|a| a.iter().map(|x| x.as_f64().expect("float")).collect()).unwrap_or_default()
}

fn ints(v: &Value) -> Vec<i64> {
    v.as_array().map(|a| a.iter().map(|x| x.as_i64().expect("int")).collect()).unwrap_or_default()
}

fn hint(v: &Value) -> CounterResetHint {
    CounterResetHint::from_u8(v["CounterResetHint"].as_u64().expect("hint") as u8).expect("known hint")
}

fn histogram(v: &Value) -> Histogram {
    Histogram {
        counter_reset_hint: hint(v),
        schema: v["Schema"].as_i64().expect("Schema") as i32,
        zero_threshold: float(v, "ZeroThreshold"),
        zero_count: v["ZeroCount"].as_u64().expect("ZeroCount"),
        count: v["Count"].as_u64().expect("Count"),
        sum: float(v, "Sum"),
        positive_spans: spans(&v["PositiveSpans"]),
        negative_spans: spans(&v["NegativeSpans"]),
        positive_buckets: ints(&v["PositiveBuckets"]),
        negative_buckets: ints(&v["NegativeBuckets"]),
        custom_values: floats(&v["CustomValues"]),
    }
}

fn float_histogram(v: &Value) -> FloatHistogram {
    FloatHistogram {
        counter_reset_hint: hint(v),
        schema: v["Schema"].as_i64().expect("Schema") as i32,
        zero_threshold: float(v, "ZeroThreshold"),
        zero_count: float(v, "ZeroCount"),
        count: float(v, "Count"),
        sum: float(v, "Sum"),
        positive_spans: spans(&v["PositiveSpans"]),
        negative_spans: spans(&v["NegativeSpans"]),
        positive_buckets: floats(&v["PositiveBuckets"]),
        negative_buckets: floats(&v["NegativeBuckets"]),
        custom_values: floats(&v["CustomValues"]),
    }
}

/// Everything of a float histogram, floats as bits, so `assert_eq!` compares bit for bit.
fn fh_bits(h: &FloatHistogram) -> String {
    let b = |v: &[f64]| v.iter().map(|x| format!("{:016x}", x.to_bits())).collect::<Vec<_>>();
    format!(
        "hint={:?} schema={} zt={:016x} zc={:016x} c={:016x} sum={:016x} ps={:?} ns={:?} pb={:?} nb={:?} cv={:?}",
        h.counter_reset_hint,
        h.schema,
        h.zero_threshold.to_bits(),
        h.zero_count.to_bits(),
        h.count.to_bits(),
        h.sum.to_bits(),
        h.positive_spans,
        h.negative_spans,
        b(&h.positive_buckets),
        b(&h.negative_buckets),
        b(&h.custom_values)
    )
}

fn h_bits(h: &Histogram) -> String {
    let mut f = h.to_float();
    // Keep the integer fields exact (to_float would round counts above 2^53).
    f.count = 0.0;
    f.zero_count = 0.0;
    format!("{} count={} zc={} pb={:?} nb={:?}", fh_bits(&f), h.count, h.zero_count, h.positive_buckets, h.negative_buckets)
}

fn header_name(h: CounterResetHeader) -> &'static str {
    match h {
        CounterResetHeader::Unknown => "UnknownCounterReset",
        CounterResetHeader::NotCounterReset => "NotCounterReset",
        CounterResetHeader::CounterReset => "CounterReset",
        CounterResetHeader::Gauge => "GaugeType",
    }
}

struct Case {
    name: String,
    json: Value,
}

fn cases() -> Vec<Case> {
    let Some(path) = tessera_model::fixtures::shared("vectors/histogram_chunks.json", "histogram chunk vectors") else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(path).expect("histogram_chunks.json readable");
    let json: Value = serde_json::from_str(&text).expect("valid JSON");
    json.as_array()
        .expect("a list of cases")
        .iter()
        .map(|c| Case { name: c["name"].as_str().expect("name").to_string(), json: c.clone() })
        .collect()
}

fn expected_chunks(c: &Value) -> Vec<Vec<u8>> {
    match c.get("chunks_hex").and_then(Value::as_array) {
        Some(list) => list.iter().map(|h| hex::decode(h.as_str().expect("hex")).expect("hex")).collect(),
        None => vec![hex::decode(c["chunk_hex"].as_str().expect("chunk_hex")).expect("hex")],
    }
}

fn check_chunk_meta(case: &Case, chunks: &[Vec<u8>]) {
    if let Some(counts) = case.json.get("chunk_sample_counts").and_then(Value::as_array) {
        let ours: Vec<u64> = chunks.iter().map(|c| u64::from(u16::from_be_bytes([c[0], c[1]]))).collect();
        let theirs: Vec<u64> = counts.iter().map(|x| x.as_u64().expect("count")).collect();
        assert_eq!(ours, theirs, "{}: samples per chunk", case.name);
    }
    if let Some(headers) = case.json.get("counter_reset_headers").and_then(Value::as_array) {
        let ours: Vec<&str> = chunks.iter().map(|c| header_name(CounterResetHeader::of_chunk(c))).collect();
        let theirs: Vec<&str> = headers.iter().map(|x| x.as_str().expect("header name")).collect();
        assert_eq!(ours, theirs, "{}: counter-reset headers", case.name);
    }
}

#[test]
fn every_vector_is_reproduced_and_decoded_bit_for_bit() {
    let cases = cases();
    let mut failures = Vec::new();
    for case in &cases {
        let expected = expected_chunks(&case.json);
        let samples = case.json["samples"].as_array().expect("samples");
        let float_kind = case.json["kind"] == "float_histogram";
        // Which of "decoded" / "samples" says what the iterator returns; the two original vectors have no
        // "decoded": their samples come back with the hints a chunk gives.
        let decoded = case.json.get("decoded").and_then(Value::as_array).unwrap_or(samples);
        let (ours, got, want): (Vec<Vec<u8>>, Vec<String>, Vec<String>) = if float_kind {
            let input: Vec<(i64, FloatHistogram)> =
                samples.iter().map(|s| (s["t"].as_i64().expect("t"), float_histogram(&s["fh"]))).collect();
            let ours = encode_float_histograms(&input).expect("valid input");
            let got = expected
                .iter()
                .flat_map(|c| FloatHistogramIter::new(c).map(|r| r.expect("vector decodes")))
                .map(|(t, h)| format!("t={t} {}", fh_bits(&h)))
                .collect();
            let want = decoded
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let mut h = float_histogram(&s["fh"]);
                    if case.json.get("decoded").is_none() && h.counter_reset_hint != CounterResetHint::Gauge {
                        h.counter_reset_hint =
                            if i == 0 { CounterResetHint::Unknown } else { CounterResetHint::NotCounterReset };
                    }
                    format!("t={} {}", s["t"].as_i64().expect("t"), fh_bits(&h))
                })
                .collect();
            (ours, got, want)
        } else {
            let input: Vec<(i64, Histogram)> =
                samples.iter().map(|s| (s["t"].as_i64().expect("t"), histogram(&s["h"]))).collect();
            let ours = encode_histograms(&input).expect("valid input");
            let got = expected
                .iter()
                .flat_map(|c| HistogramIter::new(c).map(|r| r.expect("vector decodes")))
                .map(|(t, h)| format!("t={t} {}", h_bits(&h)))
                .collect();
            let want = decoded
                .iter()
                .enumerate()
                .map(|(i, s)| {
                    let mut h = histogram(&s["h"]);
                    if case.json.get("decoded").is_none() && h.counter_reset_hint != CounterResetHint::Gauge {
                        h.counter_reset_hint =
                            if i == 0 { CounterResetHint::Unknown } else { CounterResetHint::NotCounterReset };
                    }
                    format!("t={} {}", s["t"].as_i64().expect("t"), h_bits(&h))
                })
                .collect();
            (ours, got, want)
        };
        check_chunk_meta(case, &expected);
        for c in &expected {
            let reopened = if float_kind {
                FloatHistogramEncoder::from_bytes(c).expect("reopens").into_bytes()
            } else {
                HistogramEncoder::from_bytes(c).expect("reopens").into_bytes()
            };
            assert_eq!(&reopened, c, "{}: reopening keeps the bytes", case.name);
        }
        assert_eq!(got.len(), want.len(), "{}: decoded sample count", case.name);
        if let Some(i) = (0..got.len()).find(|&i| got[i] != want[i]) {
            panic!("{}: decoding Prometheus' bytes, sample {i}:\n  ours   {}\n  theirs {}", case.name, got[i], want[i]);
        }
        if ours != expected {
            let show = |v: &[Vec<u8>]| v.iter().map(hex::encode).collect::<Vec<_>>();
            failures.push(format!("{}:\n  ours   {:?}\n  theirs {:?}", case.name, show(&ours), show(&expected)));
        }
    }
    assert!(failures.is_empty(), "{} of {} vectors differ:\n{}", failures.len(), cases.len(), failures.join("\n"));
    if !cases.is_empty() {
        assert_eq!(cases.len(), 17, "the README promises 17 vectors");
    }
}
