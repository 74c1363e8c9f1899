//! Remote write codecs against Prometheus' own bytes (../shared/vectors/wire.json), round trips,
//! negotiation, and hostile inputs.

use prost::Message;
use tessera_model::{labels, Labels, Sample};
use tessera_protocol::prompb;
use tessera_protocol::remote_write::*;

/// `../shared/vectors/wire.json`, or `None` (skipped loudly; an error in CI) when it is not there.
fn wire() -> Option<serde_json::Value> {
    let path = tessera_model::fixtures::shared("vectors/wire.json", module_path!())?;
    let text = std::fs::read_to_string(path).expect("wire.json readable");
    Some(serde_json::from_str(&text).expect("wire.json parses"))
}

fn hex_field(w: &serde_json::Value, k: &str) -> Vec<u8> {
    hex::decode(w[k].as_str().expect("hex string")).expect("valid hex")
}

/// The series of `rw1_request_decoded`, as (labels, samples).
fn expected_series(w: &serde_json::Value) -> Vec<(Labels, Vec<Sample>)> {
    w["rw1_request_decoded"]["timeseries"]
        .as_array()
        .expect("array")
        .iter()
        .map(|ts| {
            let labels = Labels::from_pairs(ts["labels"].as_array().expect("labels").iter().map(|l| {
                (l["name"].as_str().expect("name").to_string(), l["value"].as_str().expect("value").to_string())
            }));
            let samples = ts["samples"]
                .as_array()
                .expect("samples")
                .iter()
                .map(|s| Sample::new(s["timestamp"].as_i64().expect("ts"), s["value"].as_f64().expect("v")))
                .collect();
            (labels, samples)
        })
        .collect()
}

#[test]
fn decodes_prometheus_rw1_vector() {
    let Some(w) = wire() else { return };
    let body = hex_field(&w, "rw1_request_snappy_hex");
    let buf = decompress(&body, 1 << 20).expect("snappy");
    let d = decode(ProtoVersion::V1, &buf, &Limits::default()).expect("decodes");
    assert!(d.invalid.is_empty(), "{:?}", d.invalid);
    let got: Vec<_> = d.series.iter().map(|s| (s.labels.clone(), s.samples.clone())).collect();
    assert_eq!(got, expected_series(&w));
    let md = &w["rw1_request_decoded"]["metadata"][0];
    assert_eq!(
        d.metadata,
        vec![Metadata {
            metric_family_name: md["metric_family_name"].as_str().expect("name").into(),
            kind: MetricType::Counter,
            help: md["help"].as_str().expect("help").into(),
            unit: String::new(),
        }]
    );
    assert_eq!(md["type"].as_i64(), Some(1));
    assert_eq!((d.histograms, d.exemplars), (0, 0));
}

#[test]
fn decodes_prometheus_rw2_vector() {
    let Some(w) = wire() else { return };
    let body = hex_field(&w, "rw2_request_snappy_hex");
    let buf = decompress(&body, 1 << 20).expect("snappy");
    // The raw message: symbols and refs exactly as in the vector.
    let msg = decode_v2_message(&buf).expect("v2 message");
    let symbols: Vec<String> =
        w["rw2_symbols"].as_array().expect("symbols").iter().map(|s| s.as_str().expect("str").to_string()).collect();
    assert_eq!(msg.symbols, symbols);
    let refs: Vec<Vec<u32>> = w["rw2_labels_refs"]
        .as_array()
        .expect("refs")
        .iter()
        .map(|r| r.as_array().expect("arr").iter().map(|x| x.as_u64().expect("u") as u32).collect())
        .collect();
    assert_eq!(msg.timeseries.iter().map(|t| t.labels_refs.clone()).collect::<Vec<_>>(), refs);

    let d = decode(ProtoVersion::V2, &buf, &Limits::default()).expect("decodes");
    assert!(d.invalid.is_empty(), "{:?}", d.invalid);
    let got: Vec<_> = d.series.iter().map(|s| (s.labels.clone(), s.samples.clone())).collect();
    assert_eq!(got, expected_series(&w));
    assert_eq!(
        d.metadata,
        vec![
            Metadata {
                metric_family_name: "http_requests_total".into(),
                kind: MetricType::Counter,
                help: "Total HTTP requests.".into(),
                unit: String::new(),
            },
            Metadata { metric_family_name: "up".into(), kind: MetricType::Gauge, help: String::new(), unit: String::new() },
        ]
    );
    assert!(d.series.iter().all(|s| s.start_timestamps.is_empty()));
}

#[test]
fn v1_builder_writes_the_same_bytes_as_prost_and_prometheus() {
    // Our hand-written encoder must produce what prost produces for the same message; and decoding
    // Prometheus' vector then re-encoding with prost must give Prometheus' bytes back.
    let Some(w) = wire() else { return };
    let buf = decompress(&hex_field(&w, "rw1_request_snappy_hex"), 1 << 20).expect("snappy");
    let msg = decode_v1_message(&buf).expect("v1");
    assert_eq!(msg.encode_to_vec(), buf, "prost mirror re-encodes Prometheus' bytes exactly");
    let d = decode(ProtoVersion::V1, &buf, &Limits::default()).expect("decodes");
    assert_eq!(encode_v1(&d.series, &d.metadata), buf, "our encoder writes Prometheus' bytes exactly");
}

#[test]
fn v2_builder_writes_prometheus_bytes() {
    let Some(w) = wire() else { return };
    let buf = decompress(&hex_field(&w, "rw2_request_snappy_hex"), 1 << 20).expect("snappy");
    let msg = decode_v2_message(&buf).expect("v2");
    assert_eq!(msg.encode_to_vec(), buf, "prost mirror re-encodes Prometheus' bytes exactly");
    let d = decode(ProtoVersion::V2, &buf, &Limits::default()).expect("decodes");
    // Same series, same metadata, interned in first-seen order: the same symbol table and bytes.
    assert_eq!(encode_v2(&d.series, &d.metadata), buf);
}

fn sample_series() -> Vec<WriteSeries> {
    vec![
        WriteSeries {
            labels: labels!("__name__" => "node_cpu_seconds_total", "cpu" => "0", "mode" => "idle", "instance" => "h:9100"),
            samples: vec![Sample::new(1_700_000_000_000, 12.5), Sample::new(1_700_000_010_000, 0.0), Sample::new(-5, -1e300)],
            histograms: 0,
            exemplars: 0,
            // Per-sample start timestamps; the 0 is "unset" for that sample.
            start_timestamps: vec![1_600_000_000_000, 0, -7],
            histogram_samples: vec![],
            exemplar_list: vec![],
        },
        WriteSeries::new(labels!("__name__" => "up"), vec![Sample::new(0, f64::NAN)]),
        WriteSeries::new(labels!("__name__" => "nothing", "ünïcode" => "väl"), vec![]),
    ]
}

#[test]
fn encode_decode_round_trips_both_versions() {
    let series = sample_series();
    let md = vec![Metadata {
        metric_family_name: "node_cpu_seconds_total".into(),
        kind: MetricType::Counter,
        help: "Seconds the CPUs spent in each mode.".into(),
        unit: "seconds".into(),
    }];
    for v in [ProtoVersion::V1, ProtoVersion::V2] {
        let buf = match v {
            ProtoVersion::V1 => encode_v1(&series, &md),
            ProtoVersion::V2 => encode_v2(&series, &md),
        };
        let body = compress(&buf);
        let d = decode(v, &decompress(&body, 1 << 20).expect("snappy"), &Limits::default()).expect("decodes");
        assert!(d.invalid.is_empty());
        assert_eq!(d.series.len(), series.len());
        for (a, b) in d.series.iter().zip(&series) {
            assert_eq!(a.labels, b.labels);
            assert_eq!(a.samples.len(), b.samples.len());
            for (x, y) in a.samples.iter().zip(&b.samples) {
                assert!(x.bits_eq(y), "{v:?}: {x:?} vs {y:?}");
            }
            if v == ProtoVersion::V2 {
                assert_eq!(a.start_timestamps, b.start_timestamps);
            } else {
                assert!(a.start_timestamps.is_empty(), "1.0 has no start timestamps");
            }
        }
        assert_eq!(d.metadata, md, "{v:?}");
        // And prost agrees with our bytes.
        match v {
            ProtoVersion::V1 => {
                let m = decode_v1_message(&buf).expect("prost decodes ours");
                assert_eq!(m.encode_to_vec(), buf);
            }
            ProtoVersion::V2 => {
                let m = decode_v2_message(&buf).expect("prost decodes ours");
                assert_eq!(m.symbols[0], "");
                assert_eq!(m.encode_to_vec(), buf);
            }
        }
    }
}

#[test]
fn negotiation_table() {
    use ProtoVersion::*;
    let ok: &[(Option<&str>, Option<&str>, ProtoVersion)] = &[
        (None, None, V1),
        (Some(""), Some("snappy"), V1),
        (Some("application/x-protobuf"), Some("snappy"), V1),
        (Some("application/x-protobuf"), None, V1),
        (Some("application/x-protobuf;proto=prometheus.WriteRequest"), Some("snappy"), V1),
        (Some(CONTENT_TYPE_V2), Some("snappy"), V2),
        (Some("application/x-protobuf; proto=io.prometheus.write.v2.Request"), Some("snappy"), V2),
        (Some("Application/X-Protobuf;proto=io.prometheus.write.v2.Request"), Some("SNAPPY"), V2),
        (Some("application/x-protobuf;charset=utf-8"), Some("snappy"), V1),
    ];
    for (ct, ce, want) in ok {
        assert_eq!(negotiate(*ct, *ce), Ok(*want), "{ct:?} {ce:?}");
    }
    let bad: &[(Option<&str>, Option<&str>)] = &[
        (Some("application/json"), Some("snappy")),
        (Some("text/plain"), None),
        (Some("application/x-protobuf;proto=io.prometheus.write.v3.Request"), Some("snappy")),
        (Some("application/x-protobuf;proto"), Some("snappy")),
        (Some("application/x-protobuf"), Some("gzip")),
        (Some("application/x-protobuf"), Some("zstd")),
        (None, Some("deflate")),
    ];
    for (ct, ce) in bad {
        let e = negotiate(*ct, *ce).expect_err("must be 415");
        assert!(!e.0.is_empty());
    }
    assert!(negotiate(Some("application/x-protobuf"), Some("gzip")).expect_err("415").0.contains("gzip"));
}

#[test]
fn snappy_bomb_is_refused_before_allocation() {
    // Declared length 4 GiB - 1 (varint ff ff ff ff 0f) in a 10-byte body.
    let body = [0xff, 0xff, 0xff, 0xff, 0x0f, 0, 0, 0, 0, 0];
    match decompress(&body, 64 << 20) {
        Err(DecodeError::TooLarge { declared, limit }) => {
            assert_eq!(declared, u32::MAX as u64);
            assert_eq!(limit, 64 << 20);
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    // Under the limit but impossible for the body's size: refused as corrupt, still without allocating.
    let body = [0x80, 0x80, 0x80, 0x10, 0, 0];
    assert!(matches!(decompress(&body, 64 << 20), Err(DecodeError::Snappy(_))));
    // A real but oversize body.
    let big = compress(&vec![b'a'; 100_000]);
    assert!(matches!(decompress(&big, 50_000), Err(DecodeError::TooLarge { declared: 100_000, .. })));
    assert_eq!(decompress(&big, 100_000).expect("at the limit").len(), 100_000);
}

#[test]
fn garbage_gzip_and_truncated_bodies_are_decode_errors() {
    let gzip = [0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x03, 0x4b, 0x4c, 0x4a, 0x06, 0x00];
    assert!(decompress(&gzip, 64 << 20).is_err(), "gzip is not snappy");
    assert!(decompress(b"this is not snappy at all, not even close", 64 << 20).is_err());
    assert!(decompress(&[], 64 << 20).is_err());

    let Some(w) = wire() else { return };
    let buf = decompress(&hex_field(&w, "rw1_request_snappy_hex"), 1 << 20).expect("snappy");
    for cut in [1, 5, buf.len() / 2, buf.len() - 1] {
        let e = decode(ProtoVersion::V1, &buf[..cut], &Limits::default()).expect_err("truncated");
        assert!(e.to_string().contains("protobuf"), "{e}");
    }
    let garbage: Vec<u8> = (0..200u32).map(|i| (i * 37 % 251) as u8).collect();
    assert!(decode(ProtoVersion::V1, &garbage, &Limits::default()).is_err());
    // Snappy-compressed truncated protobuf.
    let body = compress(&buf[..buf.len() - 3]);
    let d = decompress(&body, 1 << 20).expect("snappy fine");
    assert!(decode(ProtoVersion::V1, &d, &Limits::default()).is_err());
}

/// A 1.0 request with hand-made labels (any order, any bytes).
/// Raw label pairs of one series.
type RawPairs<'a> = Vec<(&'a [u8], &'a [u8])>;

fn raw_v1(series: &[(RawPairs<'_>, usize)]) -> Vec<u8> {
    use tessera_protocol::remote_write::raw;
    raw::WriteRequest {
        timeseries: series
            .iter()
            .map(|(ls, n)| raw::TimeSeries {
                labels: ls.iter().map(|(n, v)| raw::Label { name: n.to_vec(), value: v.to_vec() }).collect(),
                samples: (0..*n).map(|i| prompb::Sample { value: i as f64, timestamp: i as i64 }).collect(),
                exemplars: vec![],
                histograms: vec![],
            })
            .collect(),
        metadata: vec![],
    }
    .encode_to_vec()
}

#[test]
fn invalid_series_are_reported_and_the_rest_kept() {
    let good: RawPairs<'_> = vec![(b"__name__", b"ok"), (b"job", b"a")];
    let cases: Vec<(RawPairs<'_>, &str)> = vec![
        (vec![(b"__name__", b"x"), (b"job", b"1"), (b"a", b"0"), (b"job", b"2")], "duplicate label name \"job\""),
        (vec![(b"__name__", b"x"), (b"job", b"1"), (b"job", b"2")], "duplicate label name \"job\""),
        (vec![(b"__name__", b""), (b"job", b"1")], "empty metric name"),
        (vec![(b"job", b"1")], "missing metric name"),
        (vec![(b"__name__", b"x"), (b"job", b"\xff\xfe")], "invalid UTF-8 in label value"),
        (vec![(b"__name__", b"x"), (b"j\xffb", b"1")], "invalid UTF-8 in label name"),
        (vec![(b"", b"x"), (b"__name__", b"x")], "empty label name"),
    ];
    let mut all: Vec<(RawPairs<'_>, usize)> = vec![(good.clone(), 2)];
    all.extend(cases.iter().map(|(l, _)| (l.clone(), 3)));
    all.push((good.clone(), 1));
    let buf = raw_v1(&all);
    let d = decode(ProtoVersion::V1, &buf, &Limits::default()).expect("the request as a whole is fine");
    assert_eq!(d.series.len(), 2);
    assert_eq!(d.valid_samples(), 3);
    assert_eq!(d.invalid.len(), cases.len());
    assert_eq!(d.invalid_samples(), 3 * cases.len());
    for (inv, (_, want)) in d.invalid.iter().zip(&cases) {
        assert!(inv.reason.contains(want), "{:?} should contain {want:?}", inv.reason);
        assert!(inv.labels_text.starts_with('{'));
    }
    assert!(d.invalid[0].labels_text.contains("a=\"0\""), "{}", d.invalid[0].labels_text);
}

/// Issue 9: labels that arrive unsorted are sorted and written, as upstream's `labelProtosToLabels`
/// (1.0) and `desymbolizeLabels` (2.0) do; the remote-write compliance test `TestRW1BasicCompatibility`
/// sends them so.
#[test]
fn unsorted_labels_are_sorted_not_refused() {
    let buf = raw_v1(&[(vec![(b"job", b"a"), (b"__name__", b"m"), (b"empty", b""), (b"instance", b"i")], 2)]);
    let d = decode(ProtoVersion::V1, &buf, &Limits::default()).expect("decodes");
    assert!(d.invalid.is_empty(), "{:?}", d.invalid);
    let got: Vec<(&str, &str)> = d.series[0].labels.iter().map(|l| (l.name, l.value)).collect();
    assert_eq!(got, vec![("__name__", "m"), ("instance", "i"), ("job", "a")]);
}

#[test]
fn limits_are_enforced_per_series() {
    let limits = Limits { max_decoded_bytes: 1 << 20, max_labels_per_series: 3, max_label_name_bytes: 8, max_label_value_bytes: 10 };
    let buf = raw_v1(&[
        (vec![(b"__name__", b"x"), (b"a", b"1"), (b"b", b"1"), (b"c", b"1")], 1),
        (vec![(b"__name__", b"x"), (b"aaaaaaaaa", b"1")], 1),
        (vec![(b"__name__", b"x"), (b"a", b"12345678901")], 1),
        (vec![(b"__name__", b"x"), (b"a", b"1234567890")], 1),
    ]);
    let d = decode(ProtoVersion::V1, &buf, &limits).expect("decodes");
    let reasons: Vec<_> = d.invalid.iter().map(|i| i.reason.as_str()).collect();
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    assert!(reasons[0].contains("too many labels (4 > 3)"), "{reasons:?}");
    assert!(reasons[1].contains("label name too long (9 > 8 bytes)"), "{reasons:?}");
    assert!(reasons[2].contains("label value too long (11 > 10 bytes)"), "{reasons:?}");
    assert_eq!(d.series.len(), 1);
}

#[test]
fn v2_symbol_table_problems() {
    let ts = |refs: Vec<u32>| prompb::v2::TimeSeries {
        labels_refs: refs,
        samples: vec![prompb::v2::Sample { value: 1.0, timestamp: 1, start_timestamp: 0 }],
        ..Default::default()
    };
    let syms = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    // symbols[0] not empty: the whole request is unusable.
    let req = prompb::v2::Request { symbols: syms(&["x", "__name__", "up"]), timeseries: vec![ts(vec![1, 2])] };
    assert!(matches!(decode(ProtoVersion::V2, &req.encode_to_vec(), &Limits::default()), Err(DecodeError::Symbols(_))));
    // Series without a symbol table.
    let req = prompb::v2::Request { symbols: vec![], timeseries: vec![ts(vec![1, 2])] };
    assert!(decode(ProtoVersion::V2, &req.encode_to_vec(), &Limits::default()).is_err());
    // Per-series problems: out of range, odd count, bad metadata ref; the good one survives.
    let mut bad_md = ts(vec![1, 2]);
    bad_md.metadata = Some(prompb::v2::Metadata { r#type: 1, help_ref: 99, unit_ref: 0 });
    let req = prompb::v2::Request {
        symbols: syms(&["", "__name__", "up", "job"]),
        timeseries: vec![ts(vec![1, 2]), ts(vec![1, 17]), ts(vec![1, 2, 3]), bad_md, ts(vec![1, 2, 3, 0])],
    };
    let d = decode(ProtoVersion::V2, &req.encode_to_vec(), &Limits::default()).expect("decodes");
    assert_eq!(d.series.len(), 2, "{:?}", d.invalid);
    let reasons: Vec<_> = d.invalid.iter().map(|i| i.reason.clone()).collect();
    assert!(reasons[0].contains("ref 17 out of range"), "{reasons:?}");
    assert!(reasons[1].contains("odd length 3"), "{reasons:?}");
    assert!(reasons[2].contains("help_ref 99 out of range"), "{reasons:?}");
    // {__name__="up", job=""}: the empty value means absent.
    assert_eq!(d.series[1].labels, labels!("__name__" => "up"));
    // An empty request is fine.
    let d = decode(ProtoVersion::V2, &[], &Limits::default()).expect("empty");
    assert!(d.series.is_empty() && d.invalid.is_empty());
}

#[test]
fn v2_invalid_utf8_symbol_sinks_only_its_series() {
    use tessera_protocol::remote_write::raw;
    let req = raw::RequestV2 {
        symbols: vec![b"".to_vec(), b"__name__".to_vec(), b"up".to_vec(), b"\xc3\x28".to_vec()],
        timeseries: vec![
            prompb::v2::TimeSeries { labels_refs: vec![1, 2], samples: vec![prompb::v2::Sample { value: 1.0, timestamp: 5, start_timestamp: 0 }], ..Default::default() },
            prompb::v2::TimeSeries { labels_refs: vec![1, 3], samples: vec![prompb::v2::Sample { value: 1.0, timestamp: 5, start_timestamp: 0 }], ..Default::default() },
        ],
    };
    let d = decode(ProtoVersion::V2, &req.encode_to_vec(), &Limits::default()).expect("decodes");
    assert_eq!(d.series.len(), 1);
    assert_eq!(d.invalid.len(), 1);
    assert!(d.invalid[0].reason.contains("invalid UTF-8"));
}

#[test]
fn histograms_and_exemplars_are_counted() {
    let req = prompb::WriteRequest {
        timeseries: vec![prompb::TimeSeries {
            labels: vec![prompb::Label { name: "__name__".into(), value: "h".into() }],
            samples: vec![],
            exemplars: vec![prompb::Exemplar { labels: vec![], value: 1.0, timestamp: 1 }; 2],
            histograms: vec![
                prompb::Histogram {
                    count: Some(prompb::histogram::Count::CountInt(3)),
                    schema: 1,
                    positive_spans: vec![prompb::BucketSpan { offset: 0, length: 2 }],
                    positive_deltas: vec![1, 1],
                    timestamp: 10,
                    ..Default::default()
                };
                3
            ],
        }],
        metadata: vec![],
    };
    let d = decode(ProtoVersion::V1, &req.encode_to_vec(), &Limits::default()).expect("decodes");
    assert_eq!((d.histograms, d.exemplars), (3, 2));
    assert_eq!((d.series[0].histograms, d.series[0].exemplars), (3, 2));
}

#[test]
fn decode_ref_borrows_the_same_series_decode_owns() {
    let Some(w) = wire() else { return };
    for (v, key) in [(ProtoVersion::V1, "rw1_request_snappy_hex"), (ProtoVersion::V2, "rw2_request_snappy_hex")] {
        let buf = decompress(&hex_field(&w, key), 1 << 20).expect("snappy");
        let r = decode_ref(v, &buf, &Limits::default()).expect("decodes");
        let owned = decode(v, &buf, &Limits::default()).expect("decodes");
        assert_eq!(r.len(), owned.series.len());
        for (a, b) in r.series().zip(&owned.series) {
            assert_eq!(a.to_labels(), b.labels);
            assert_eq!(a.hash(), b.labels.hash(), "SeriesRef::hash must equal Labels::hash");
            assert_eq!(a.samples, b.samples.as_slice());
            assert_eq!(a.metric_name(), b.labels.metric_name());
            assert!(a.labels.iter().all(|l| buf.as_ptr_range().contains(&l.value.as_ptr())), "borrowed from the body");
        }
        assert_eq!(r.metadata, owned.metadata);
    }
}

#[test]
fn v2_start_timestamps_are_decoded_per_sample() {
    // Built with prost (independent of our encoder): a series with STs on some samples, one without,
    // an invalid one with STs between them (its STs must not shift the next series'), and the
    // reserved field 6 (the old per-series created_timestamp) on a last one: ignored.
    let s = |t: i64, v: f64, st: i64| prompb::v2::Sample { value: v, timestamp: t, start_timestamp: st };
    let req = prompb::v2::Request {
        symbols: ["", "__name__", "c", "g", "bad", "ok"].iter().map(|x| x.to_string()).collect(),
        timeseries: vec![
            prompb::v2::TimeSeries {
                labels_refs: vec![1, 2],
                samples: vec![s(10_000, 1.0, 0), s(20_000, 2.0, 5_000), s(30_000, 3.0, 5_000)],
                ..Default::default()
            },
            prompb::v2::TimeSeries { labels_refs: vec![1, 3], samples: vec![s(10_000, 7.0, 0)], ..Default::default() },
            prompb::v2::TimeSeries { labels_refs: vec![1, 99], samples: vec![s(1, 1.0, 1), s(2, 2.0, 1)], ..Default::default() },
            prompb::v2::TimeSeries { labels_refs: vec![1, 5], samples: vec![s(40_000, 4.0, -3)], ..Default::default() },
        ],
    };
    let mut buf = req.encode_to_vec();
    // One more series, written by hand with field 6 (prost's struct no longer has it).
    let mut extra = prompb::v2::TimeSeries { labels_refs: vec![1, 4], samples: vec![s(1_000, 1.0, 0)], ..Default::default() }
        .encode_to_vec();
    extra.extend_from_slice(&[6 << 3, 123]); // created_timestamp = 123 (varint)
    buf.push(5 << 3 | 2);
    buf.push(extra.len() as u8);
    buf.extend_from_slice(&extra);

    let d = decode(ProtoVersion::V2, &buf, &Limits::default()).expect("decodes");
    assert_eq!(d.invalid.len(), 1, "{:?}", d.invalid);
    let got: Vec<(String, Vec<i64>)> =
        d.series.iter().map(|x| (x.labels.metric_name().to_string(), x.start_timestamps.clone())).collect();
    assert_eq!(
        got,
        vec![
            ("c".to_string(), vec![0, 5_000, 5_000]),
            ("g".to_string(), vec![]),
            ("ok".to_string(), vec![-3]),
            ("bad".to_string(), vec![]),
        ]
    );
    assert_eq!(d.series[0].start_timestamp(1), 5_000);
    assert_eq!(d.series[1].start_timestamp(0), 0);
    // The zero-copy view agrees.
    let r = decode_ref(ProtoVersion::V2, &buf, &Limits::default()).expect("decodes");
    for (a, b) in r.series().zip(&d.series) {
        assert_eq!(a.start_timestamps, b.start_timestamps.as_slice());
        assert_eq!(a.samples.len(), b.samples.len());
    }
    // Our encoder writes what prost writes for the same STs.
    let series: Vec<WriteSeries> = d.series.clone();
    let ours = encode_v2(&series, &[]);
    let back = decode_v2_message(&ours).expect("prost reads ours");
    let sts: Vec<Vec<i64>> = back.timeseries.iter().map(|t| t.samples.iter().map(|x| x.start_timestamp).collect()).collect();
    assert_eq!(sts, vec![vec![0, 5_000, 5_000], vec![0], vec![-3], vec![0]]);
    // 1.0 has no start timestamps: a field 3 inside a 1.0 Sample is an unknown field, skipped.
    let mut v1 = Vec::new();
    let mut sample = prompb::Sample { value: 1.0, timestamp: 5 }.encode_to_vec();
    sample.extend_from_slice(&[3 << 3, 9]);
    let mut ts = prompb::Label { name: "__name__".into(), value: "m".into() }.encode_to_vec();
    ts.splice(0..0, [1 << 3 | 2, ts.len() as u8]);
    ts.extend_from_slice(&[2 << 3 | 2, sample.len() as u8]);
    ts.extend_from_slice(&sample);
    v1.extend_from_slice(&[1 << 3 | 2, ts.len() as u8]);
    v1.extend_from_slice(&ts);
    let d = decode(ProtoVersion::V1, &v1, &Limits::default()).expect("decodes");
    assert_eq!(d.series.len(), 1);
    assert_eq!(d.series[0].samples, vec![Sample::new(5, 1.0)]);
    assert!(d.series[0].start_timestamps.is_empty());
}

#[test]
fn v2_metadata_repeated_per_series_is_kept_once_in_first_seen_order() {
    let md = |name: &str, kind, help: &str| Metadata { metric_family_name: name.into(), kind, help: help.into(), unit: String::new() };
    let (a, b) = (md("a", MetricType::Counter, "A."), md("b", MetricType::Gauge, "B."));
    let mut builder = V2Builder::new();
    for (i, m) in [&a, &a, &b, &a, &b, &b].into_iter().enumerate() {
        let l = Labels::from_pairs([("__name__", m.metric_family_name.as_str()), ("i", &*i.to_string())]);
        builder.add_series(&l, &[Sample::new(1, 1.0)], Some(m), &[]);
    }
    // The same family with other help text is another entry, as Prometheus keeps both.
    let a2 = md("a", MetricType::Counter, "A, reworded.");
    builder.add_series(&labels!("__name__" => "a", "i" => "9"), &[Sample::new(1, 1.0)], Some(&a2), &[]);
    let d = decode(ProtoVersion::V2, &builder.finish(), &Limits::default()).expect("decodes");
    assert_eq!(d.series.len(), 7);
    assert_eq!(d.metadata, vec![a, b, a2]);
}
