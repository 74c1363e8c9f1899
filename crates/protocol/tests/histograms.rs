//! Native histograms in remote write 1.0 and 2.0 against Prometheus' own request bytes
//! (`../shared/vectors/wire_histograms.json`), and upstream's validation of what arrives.

use prost::Message;
use tessera_model::histogram::{CounterResetHint, FloatHistogram, Histogram, Span};
use tessera_model::{HistogramSample, HistogramValue};
use tessera_protocol::prompb;
use tessera_protocol::remote_write::*;

fn vectors() -> Option<serde_json::Value> {
    let path = tessera_model::fixtures::shared("vectors/wire_histograms.json", module_path!())?;
    Some(serde_json::from_str(&std::fs::read_to_string(path).expect("readable")).expect("parses"))
}

fn f64_bits(v: &serde_json::Value, k: &str) -> f64 {
    match v.get(format!("{k}_bits")).and_then(|b| b.as_str()) {
        Some(b) => f64::from_bits(u64::from_str_radix(b, 16).expect("hex bits")),
        None => v[k].as_f64().unwrap_or(0.0),
    }
}

fn spans(v: &serde_json::Value) -> Vec<Span> {
    v.as_array()
        .map(|a| {
            a.iter()
                .map(|s| Span::new(s["offset"].as_i64().expect("offset") as i32, s["length"].as_u64().expect("length") as u32))
                .collect()
        })
        .unwrap_or_default()
}

fn nums<T>(v: &serde_json::Value, f: impl Fn(&serde_json::Value) -> T) -> Vec<T> {
    v.as_array().map(|a| a.iter().map(f).collect()).unwrap_or_default()
}

/// A histogram of the vectors' decoded requests (protobuf field names).
fn json_histogram(h: &serde_json::Value) -> HistogramSample {
    let hint = CounterResetHint::from_u8(h["reset_hint"].as_u64().unwrap_or(0) as u8).expect("hint");
    let schema = h["schema"].as_i64().expect("schema") as i32;
    let zero_threshold = f64_bits(h, "zero_threshold");
    let sum = f64_bits(h, "sum");
    let custom_values = nums(&h["custom_values"], |x| x.as_f64().expect("bound"));
    let v = if h.get("count_float").is_some() {
        HistogramValue::Float(FloatHistogram {
            counter_reset_hint: hint,
            schema,
            zero_threshold,
            zero_count: h["zero_count_float"].as_f64().unwrap_or(0.0),
            count: h["count_float"].as_f64().expect("count"),
            sum,
            positive_spans: spans(&h["positive_spans"]),
            negative_spans: spans(&h["negative_spans"]),
            positive_buckets: nums(&h["positive_counts"], |x| x.as_f64().expect("count")),
            negative_buckets: nums(&h["negative_counts"], |x| x.as_f64().expect("count")),
            custom_values,
        })
    } else {
        HistogramValue::Int(Histogram {
            counter_reset_hint: hint,
            schema,
            zero_threshold,
            zero_count: h["zero_count_int"].as_u64().unwrap_or(0),
            count: h["count_int"].as_u64().expect("count"),
            sum,
            positive_spans: spans(&h["positive_spans"]),
            negative_spans: spans(&h["negative_spans"]),
            positive_buckets: nums(&h["positive_deltas"], |x| x.as_i64().expect("delta")),
            negative_buckets: nums(&h["negative_deltas"], |x| x.as_i64().expect("delta")),
            custom_values,
        })
    };
    HistogramSample::new(h["timestamp"].as_i64().expect("timestamp"), v)
}

fn check(version: ProtoVersion, key: &str) {
    let Some(w) = vectors() else { return };
    let body = hex::decode(w[format!("{key}_snappy_hex")].as_str().expect("hex")).expect("hex");
    let buf = decompress(&body, 64 << 20).expect("snappy");
    let dec = decode(version, &buf, &Limits::default()).expect("decodes");
    let want = w[format!("{key}_decoded")]["timeseries"].as_array().expect("series").clone();
    assert_eq!(dec.series.len(), want.len());
    assert!(dec.invalid.is_empty() && dec.invalid_histograms.is_empty(), "{:?} {:?}", dec.invalid, dec.invalid_histograms);
    let mut total = 0;
    for (got, want) in dec.series.iter().zip(&want) {
        let hs: Vec<HistogramSample> = nums(&want["histograms"], json_histogram);
        total += hs.len();
        assert_eq!(got.histogram_samples, hs, "{key}: {}", got.labels);
        assert_eq!(got.histograms, hs.len());
        // Bits survive exactly (NaN sums included).
        for (a, b) in got.histogram_samples.iter().zip(&hs) {
            let bits = |h: &HistogramValue| match h {
                HistogramValue::Int(h) => h.sum.to_bits(),
                HistogramValue::Float(h) => h.sum.to_bits(),
            };
            assert_eq!(bits(&a.h), bits(&b.h));
        }
    }
    assert_eq!(dec.histograms, total as u64);
    // 1.0's vector: an integer and a float gauge histogram; 2.0's adds NHCB.
    assert!(total >= 4, "{key}: {total} histograms");
    assert!(dec.series.iter().any(|s| s.histogram_samples.iter().any(|h| h.h.is_float())));
    if version == ProtoVersion::V2 {
        assert!(dec.series.iter().any(|s| s.histogram_samples.iter().any(|h| matches!(&h.h, HistogramValue::Int(x) if x.schema == -53))));
    }
}

#[test]
fn rw1_histograms_decode_as_prometheus_wrote_them() {
    check(ProtoVersion::V1, "rw1_request");
}

#[test]
fn rw2_histograms_decode_as_prometheus_wrote_them() {
    check(ProtoVersion::V2, "rw2_request");
}

fn request_with(h: prompb::Histogram) -> Vec<u8> {
    let req = prompb::WriteRequest {
        timeseries: vec![prompb::TimeSeries {
            labels: vec![prompb::Label { name: "__name__".into(), value: "h".into() }],
            histograms: vec![h],
            ..Default::default()
        }],
        ..Default::default()
    };
    req.encode_to_vec()
}

#[test]
fn invalid_histograms_are_refused_with_upstreams_reason_and_the_rest_kept() {
    let good = prompb::Histogram {
        count: Some(prompb::histogram::Count::CountInt(2)),
        zero_count: Some(prompb::histogram::ZeroCount::ZeroCountInt(0)),
        positive_spans: vec![prompb::BucketSpan { offset: 0, length: 2 }],
        positive_deltas: vec![1, 0],
        timestamp: 5,
        ..Default::default()
    };
    let cases: Vec<(prompb::Histogram, &str)> = vec![
        (prompb::Histogram { positive_deltas: vec![1], ..good.clone() }, "span"),
        (prompb::Histogram { count: Some(prompb::histogram::Count::CountInt(9)), ..good.clone() }, "count"),
        (prompb::Histogram { schema: 60, ..good.clone() }, "schema"),
        (prompb::Histogram { positive_deltas: vec![1, -5], count: Some(prompb::histogram::Count::CountInt(0)), ..good.clone() }, "negative"),
        (prompb::Histogram { schema: -53, ..good.clone() }, "custom"),
        (
            prompb::Histogram {
                positive_spans: vec![prompb::BucketSpan { offset: i32::MAX, length: u32::MAX }],
                ..good.clone()
            },
            "span",
        ),
    ];
    for (bad, word) in cases {
        let mut req = prompb::WriteRequest::decode(&request_with(good.clone())[..]).expect("round trip");
        req.timeseries[0].histograms.push(prompb::Histogram { timestamp: 6, ..bad });
        let dec = decode(ProtoVersion::V1, &req.encode_to_vec(), &Limits::default()).expect("decodes");
        assert_eq!(dec.series.len(), 1, "the series stays valid");
        assert_eq!(dec.series[0].histogram_samples.len(), 1, "the valid histogram is kept");
        assert_eq!(dec.invalid_histogram_count, 1);
        assert!(
            dec.invalid_histograms[0].to_lowercase().contains(word),
            "{word}: {}",
            dec.invalid_histograms[0]
        );
        assert_eq!(dec.histograms, 2);
    }
}

#[test]
fn truncated_histogram_bytes_fail_the_body_never_panic() {
    let good = prompb::Histogram {
        count: Some(prompb::histogram::Count::CountFloat(2.0)),
        positive_spans: vec![prompb::BucketSpan { offset: 0, length: 2 }],
        positive_counts: vec![1.0, 1.0],
        custom_values: vec![1.0, 2.0],
        timestamp: 5,
        ..Default::default()
    };
    let body = request_with(good);
    assert!(decode(ProtoVersion::V1, &body, &Limits::default()).is_ok());
    for cut in 0..body.len() {
        let _ = decode(ProtoVersion::V1, &body[..cut], &Limits::default());
    }
    for i in 0..body.len() {
        for b in [0u8, 0x7f, 0x80, 0xff] {
            let mut m = body.clone();
            m[i] = b;
            let _ = decode(ProtoVersion::V1, &m, &Limits::default());
        }
    }
}

#[test]
fn encoders_carry_histograms_both_versions() {
    let hs = vec![
        HistogramSample::new(
            10,
            HistogramValue::Int(Histogram {
                count: 2,
                positive_spans: vec![Span::new(0, 2)],
                positive_buckets: vec![1, 0],
                ..Histogram::default()
            }),
        ),
        HistogramSample::new(
            20,
            HistogramValue::Float(FloatHistogram {
                schema: -53,
                count: 1.0,
                positive_spans: vec![Span::new(0, 1)],
                positive_buckets: vec![1.0],
                custom_values: vec![0.5],
                ..FloatHistogram::default()
            }),
        ),
    ];
    let mut s = WriteSeries::new(tessera_model::labels!("__name__" => "h"), vec![tessera_model::Sample::new(5, 1.0)]);
    s.histogram_samples = hs.clone();
    for (v, body) in [(ProtoVersion::V1, encode_v1(&[s.clone()], &[])), (ProtoVersion::V2, encode_v2(&[s.clone()], &[]))] {
        let d = decode(v, &body, &Limits::default()).expect("decodes");
        assert_eq!(d.series[0].histogram_samples, hs, "{v:?}");
        assert_eq!(d.series[0].samples, s.samples);
    }
}

#[test]
fn exemplars_decode_in_both_versions_and_unreadable_ones_are_counted() {
    let ex = vec![
        tessera_model::Exemplar { labels: tessera_model::labels!("trace_id" => "abc"), value: 1.5, t: 7 },
        tessera_model::Exemplar { labels: tessera_model::Labels::default(), value: -2.0, t: 9 },
    ];
    let mut s = WriteSeries::new(tessera_model::labels!("__name__" => "h"), vec![tessera_model::Sample::new(5, 1.0)]);
    s.exemplar_list = ex.clone();
    for (v, body) in [(ProtoVersion::V1, encode_v1(&[s.clone()], &[])), (ProtoVersion::V2, encode_v2(&[s.clone()], &[]))] {
        let d = decode(v, &body, &Limits::default()).expect("decodes");
        assert_eq!(d.series[0].exemplar_list, ex, "{v:?}");
        assert_eq!(d.exemplars, 2);
    }
    // A 1.0 exemplar whose label value is not UTF-8: dropped and counted, the series kept.
    let raw = raw::WriteRequest {
        timeseries: vec![raw::TimeSeries {
            labels: vec![raw::Label { name: b"__name__".to_vec(), value: b"h".to_vec() }],
            samples: vec![prompb::Sample { value: 1.0, timestamp: 1 }],
            exemplars: vec![raw::Exemplar { labels: vec![raw::Label { name: b"t".to_vec(), value: vec![0xff] }], value: 1.0, timestamp: 1 }],
            histograms: vec![],
        }],
        metadata: vec![],
    };
    let bytes = raw.encode_to_vec();
    let r = decode_ref(ProtoVersion::V1, &bytes, &Limits::default()).expect("decodes");
    assert_eq!((r.len(), r.unreadable_exemplars, r.get(0).exemplar_list.len()), (1, 1, 0));
}

#[test]
fn mangled_exemplars_of_both_versions_never_panic() {
    let mut s = WriteSeries::new(tessera_model::labels!("__name__" => "h"), vec![tessera_model::Sample::new(5, 1.0)]);
    s.exemplar_list = vec![
        tessera_model::Exemplar { labels: tessera_model::labels!("trace_id" => "abc", "span" => "x"), value: 1.5, t: 7 },
        tessera_model::Exemplar { labels: tessera_model::Labels::default(), value: f64::NAN, t: i64::MIN },
    ];
    for (v, body) in [(ProtoVersion::V1, encode_v1(&[s.clone()], &[])), (ProtoVersion::V2, encode_v2(&[s.clone()], &[]))] {
        for cut in 0..body.len() {
            let _ = decode(v, &body[..cut], &Limits::default());
        }
        for i in 0..body.len() {
            for b in [0u8, 0x7f, 0x80, 0xff] {
                let mut m = body.clone();
                m[i] = b;
                if let Ok(d) = decode(v, &m, &Limits::default()) {
                    // Whatever survives is consistent: exemplars belong to valid series only.
                    assert!(d.series.iter().map(|s| s.exemplar_list.len()).sum::<usize>() as u64 <= d.exemplars);
                }
            }
        }
    }
}
