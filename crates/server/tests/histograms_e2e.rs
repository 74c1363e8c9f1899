//! Native histograms end to end through the `tessera` binary: Prometheus' own remote-write requests
//! carrying histograms (`../shared/vectors/wire_histograms.json`) are written, counted in the Written
//! header, and read back by remote read in both modes; the streamed frame's histogram chunks are byte
//! for byte the ones Prometheus' head writes for the same samples.

mod common;

use common::{Server, CT_V1, CT_V2};
use prost::Message;
use tessera_model::histogram::{CounterResetHint, FloatHistogram, Histogram, Span};
use tessera_model::{HistogramSample, HistogramValue, Labels, MatchOp, Matcher};
use tessera_protocol::histogram_wire::to_prompb;
use tessera_protocol::prompb;
use tessera_protocol::remote_read::{self as rr, FrameReader, CONTENT_TYPE_STREAMED};
use tessera_protocol::remote_write::{self as rw, WriteSeries};

fn vectors() -> Option<serde_json::Value> {
    let p = tessera_model::fixtures::shared("vectors/wire_histograms.json", "histogram e2e vectors")?;
    Some(serde_json::from_slice(&std::fs::read(p).expect("read")).expect("parse"))
}

fn bits(v: &serde_json::Value, k: &str) -> f64 {
    match v.get(format!("{k}_bits")).and_then(|b| b.as_str()) {
        Some(b) => f64::from_bits(u64::from_str_radix(b, 16).expect("hex")),
        None => v[k].as_f64().unwrap_or(0.0),
    }
}

fn spans(v: &serde_json::Value) -> Vec<Span> {
    v.as_array()
        .map(|a| a.iter().map(|s| Span::new(s["Offset"].as_i64().expect("o") as i32, s["Length"].as_u64().expect("l") as u32)).collect())
        .unwrap_or_default()
}

/// A histogram of the remote-read frame's decoded chunks (Go field names).
fn chunk_sample(s: &serde_json::Value) -> HistogramSample {
    let (h, float) = match s.get("h") {
        Some(h) => (h, false),
        None => (&s["fh"], true),
    };
    let nums = |k: &str| h[k].as_array().map(|a| a.iter().map(|x| x.as_f64().expect("num")).collect::<Vec<f64>>()).unwrap_or_default();
    let hint = CounterResetHint::from_u8(h["CounterResetHint"].as_u64().unwrap_or(0) as u8).expect("hint");
    let v = if float {
        HistogramValue::Float(FloatHistogram {
            counter_reset_hint: hint,
            schema: h["Schema"].as_i64().expect("schema") as i32,
            zero_threshold: bits(h, "ZeroThreshold"),
            zero_count: h["ZeroCount"].as_f64().expect("zc"),
            count: h["Count"].as_f64().expect("count"),
            sum: bits(h, "Sum"),
            positive_spans: spans(&h["PositiveSpans"]),
            negative_spans: spans(&h["NegativeSpans"]),
            positive_buckets: nums("PositiveBuckets"),
            negative_buckets: nums("NegativeBuckets"),
            custom_values: nums("CustomValues"),
        })
    } else {
        HistogramValue::Int(Histogram {
            counter_reset_hint: hint,
            schema: h["Schema"].as_i64().expect("schema") as i32,
            zero_threshold: bits(h, "ZeroThreshold"),
            zero_count: h["ZeroCount"].as_u64().expect("zc"),
            count: h["Count"].as_u64().expect("count"),
            sum: bits(h, "Sum"),
            positive_spans: spans(&h["PositiveSpans"]),
            negative_spans: spans(&h["NegativeSpans"]),
            positive_buckets: nums("PositiveBuckets").into_iter().map(|x| x as i64).collect(),
            negative_buckets: nums("NegativeBuckets").into_iter().map(|x| x as i64).collect(),
            custom_values: nums("CustomValues"),
        })
    };
    HistogramSample::new(s["t"].as_i64().expect("t"), v)
}

fn post_write(s: &Server, body: Vec<u8>, ct: &str) -> (u16, Option<String>, String) {
    let r = s
        .http
        .post(format!("{}/api/v1/write", s.base))
        .header("Content-Type", ct)
        .header("Content-Encoding", "snappy")
        .body(body)
        .send()
        .expect("POST");
    let h = r.headers().get("X-Prometheus-Remote-Write-Histograms-Written").map(|v| v.to_str().expect("ascii").to_string());
    (r.status().as_u16(), h, r.text().expect("body"))
}

fn read(s: &Server, streamed: bool, ms: &[Matcher]) -> Vec<u8> {
    let req = prompb::ReadRequest {
        queries: vec![prompb::Query {
            start_timestamp_ms: 0,
            end_timestamp_ms: i64::MAX / 2,
            matchers: rr::from_matchers(ms),
            hints: None,
        }],
        accepted_response_types: if streamed { vec![prompb::read_request::ResponseType::StreamedXorChunks as i32] } else { vec![] },
    };
    let r = s.http.post(format!("{}/api/v1/read", s.base)).body(rr::encode_request(&req)).send().expect("POST read");
    assert_eq!(r.status().as_u16(), 200);
    if streamed {
        assert_eq!(r.headers().get("content-type").and_then(|v| v.to_str().ok()), Some(CONTENT_TYPE_STREAMED));
    }
    r.bytes().expect("body").to_vec()
}

fn all() -> Vec<Matcher> {
    vec![Matcher::new(MatchOp::Regex, "__name__", ".+").expect("matcher")]
}

#[test]
fn prometheus_histogram_requests_are_written_counted_and_read_back_in_both_modes() {
    let Some(v) = vectors() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let body = hex::decode(v["rw2_request_snappy_hex"].as_str().expect("hex")).expect("hex");
    let (status, hist_written, text) = post_write(&s, body, CT_V2);
    assert_eq!((status, hist_written.as_deref()), (204, Some("6")), "{text}");
    // The request's exemplar is stored and served as upstream's query_exemplars serves it.
    let (code, ex) = s.get("/api/v1/query_exemplars?query=rate(http_requests_total%5B5m%5D)&start=1699999999&end=1700000100");
    assert_eq!(code, 200);
    assert_eq!(
        ex,
        r#"{"status":"success","data":[{"seriesLabels":{"__name__":"http_requests_total","code":"200","job":"api"},"exemplars":[{"labels":{"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"},"value":"1","timestamp":1700000014.123}]}]}"#
    );
    // Outside the range, or other series: none.
    assert_eq!(s.get("/api/v1/query_exemplars?query=up&start=1699999999&end=1700000100").1, r#"{"status":"success","data":[]}"#);
    assert_eq!(s.get("/api/v1/query_exemplars?query=http_requests_total&start=1700000015&end=1700000100").1, r#"{"status":"success","data":[]}"#);
    // The 1.0 request (the same integer and float histograms) into another server: all written, and
    // 1.0 answers carry no Written headers.
    let dir1 = tempfile::tempdir().expect("tempdir");
    let s1 = Server::start(dir1.path(), &[]);
    let body = hex::decode(v["rw1_request_snappy_hex"].as_str().expect("hex")).expect("hex");
    let (status, hist_written, text) = post_write(&s1, body.clone(), CT_V1);
    assert_eq!((status, hist_written), (204, None), "{text}");
    // Sent again: the newest sample of each series is an exact duplicate (accepted), the older ones
    // are out of order, as upstream judges them.
    let (status, _, text) = post_write(&s1, body, CT_V1);
    assert_eq!(status, 400);
    assert!(text.contains("out of order sample: 2 histogram samples not written, in 2 series"), "{text}");
    drop(s1);

    // What was sent, per series (the decoded request, through our own decoder, checked against the
    // vector's decoded form in tessera-protocol's tests).
    let buf = rw::decompress(&hex::decode(v["rw2_request_snappy_hex"].as_str().expect("hex")).expect("hex"), 1 << 20).expect("snappy");
    let sent = rw::decode(rw::ProtoVersion::V2, &buf, &rw::Limits::default()).expect("decodes");
    let sent: Vec<(Labels, Vec<HistogramSample>)> =
        sent.series.into_iter().filter(|s| !s.histogram_samples.is_empty()).map(|s| (s.labels, s.histogram_samples)).collect();
    assert_eq!(sent.len(), 3);

    // SAMPLES mode: `histograms` as sent (hints aside: chunks keep only gauge-ness and resets).
    let resp = rr::decode_samples_response(&read(&s, false, &all()), 64 << 20).expect("response");
    // Compared on their meaning: a chunk shares one bucket layout among its samples, so a sample may
    // come back with empty buckets it did not have (as from Prometheus); hints aside from gauge-ness.
    let norm = |h: &prompb::Histogram| {
        let mut h = h.clone();
        if h.reset_hint != prompb::histogram::ResetHint::Gauge as i32 {
            h.reset_hint = 0;
        }
        let canon = |spans: &[prompb::BucketSpan], deltas: &[i64], counts: &[f64]| -> Vec<(i32, u64)> {
            let abs: Vec<f64> = if deltas.is_empty() {
                counts.to_vec()
            } else {
                deltas.iter().scan(0i64, |c, d| {
                    *c += d;
                    Some(*c as f64)
                }).collect()
            };
            let (mut out, mut at, mut k) = (Vec::new(), 0i32, 0usize);
            for sp in spans {
                at += sp.offset;
                for _ in 0..sp.length {
                    if abs[k] != 0.0 {
                        out.push((at, abs[k].to_bits()));
                    }
                    at += 1;
                    k += 1;
                }
            }
            out
        };
        let p = canon(&h.positive_spans, &h.positive_deltas, &h.positive_counts);
        let n = canon(&h.negative_spans, &h.negative_deltas, &h.negative_counts);
        for v in [&mut h.positive_deltas, &mut h.negative_deltas] {
            v.clear();
        }
        h.positive_counts.clear();
        h.negative_counts.clear();
        h.positive_spans.clear();
        h.negative_spans.clear();
        (h, p, n)
    };
    for (labels, hs) in &sent {
        let ts = resp.results[0]
            .timeseries
            .iter()
            .find(|t| t.labels == rr::to_wire_labels(labels))
            .unwrap_or_else(|| panic!("{labels} not read back"));
        let want: Vec<_> =
            hs.iter().map(|h| norm(&to_prompb(h.t, &h.h))).collect();
        assert_eq!(ts.histograms.iter().map(norm).collect::<Vec<_>>(), want, "{labels}");
    }

    // Streamed: one chunk per series, of the histogram's own encoding, decoding to what was sent.
    let body = read(&s, true, &all());
    let mut fr = FrameReader::new(&body, 1 << 20);
    let mut seen = 0;
    while let Some(r) = fr.next_response() {
        let r = r.expect("frame");
        for cs in r.chunked_series {
            let Some((labels, hs)) = sent.iter().find(|(l, _)| rr::to_wire_labels(l) == cs.labels) else { continue };
            seen += 1;
            assert_eq!(cs.chunks.len(), 1, "{labels}");
            let c = &cs.chunks[0];
            let float = hs[0].h.is_float();
            assert_eq!(c.r#type, if float { 3 } else { 2 }, "{labels}");
            assert_eq!((c.min_time_ms, c.max_time_ms), (hs[0].t, hs[hs.len() - 1].t));
            let got: Vec<prompb::Histogram> = if float {
                let mut got = Vec::new();
                tessera_encoding::decode_float_histogram_into(&c.data, &mut got).expect("decodes");
                got.into_iter().map(|(t, h)| to_prompb(t, &HistogramValue::Float(h))).collect()
            } else {
                let mut got = Vec::new();
                tessera_encoding::decode_histogram_into(&c.data, &mut got).expect("decodes");
                got.into_iter().map(|(t, h)| to_prompb(t, &HistogramValue::Int(h))).collect()
            };
            let want: Vec<_> = hs.iter().map(|h| norm(&to_prompb(h.t, &h.h))).collect();
            assert_eq!(got.iter().map(norm).collect::<Vec<_>>(), want, "{labels}");
        }
    }
    assert_eq!(seen, 3);
    // Metrics count what was received and written.
    let (_, metrics) = s.get("/metrics");
    assert!(metrics.contains("tessera_remote_write_histograms_written_total 6"), "{metrics}");
}

#[test]
fn the_streamed_frame_of_histogram_chunks_is_byte_exact_with_prometheus() {
    let Some(v) = vectors() else { return };
    let dec = &v["remote_read_frame_decoded"];
    let cs = &dec["chunked_series"][0];
    let labels = Labels::from_pairs(
        cs["labels"].as_array().expect("labels").iter().map(|l| (l["name"].as_str().expect("n"), l["value"].as_str().expect("v"))),
    );
    let mut hs = Vec::new();
    for c in cs["chunks"].as_array().expect("chunks") {
        hs.extend(c["samples"].as_array().expect("samples").iter().map(chunk_sample));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let mut ws = WriteSeries::new(labels.clone(), vec![]);
    ws.histogram_samples = hs;
    let (status, hist_written, text) = post_write(&s, rw::compress(&rw::encode_v2(&[ws], &[])), CT_V2);
    assert_eq!((status, hist_written.as_deref()), (204, Some("10")), "{text}");
    let ms: Vec<Matcher> = labels.iter().map(|l| Matcher::new(MatchOp::Equal, l.name, l.value).expect("m")).collect();
    let body = read(&s, true, &ms);
    let mut fr = FrameReader::new(&body, 1 << 20);
    let r = fr.next_response().expect("a frame").expect("valid frame");
    let want_chunks: Vec<String> =
        v["remote_read_frame_chunks_hex"].as_array().expect("hex").iter().map(|x| x.as_str().expect("s").to_string()).collect();
    let got_chunks: Vec<String> = r.chunked_series[0].chunks.iter().map(|c| hex::encode(&c.data)).collect();
    assert_eq!(got_chunks, want_chunks, "the head's histogram chunks are Prometheus' bytes");
    // The whole frame (length, CRC, labels, chunk bounds and types, query index) too.
    let want_frame = hex::decode(v["remote_read_frame_hex"].as_str().expect("hex")).expect("hex");
    let mut got_frame = Vec::new();
    rr::write_chunked_response(&mut got_frame, &r);
    assert_eq!(hex::encode(&got_frame), hex::encode(&want_frame));
    assert_eq!(&body[..], &want_frame[..]);
    let _ = prompb::ChunkedReadResponse::decode(&got_frame[got_frame.len() - r.encoded_len()..]).expect("decodes");
}

#[test]
fn start_timestamps_of_histograms_are_stored_and_remote_read_sends_plain_chunks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let s = Server::start(dir.path(), &[]);
    let l = tessera_model::labels!("__name__" => "otel_latency", "job" => "x");
    let t0 = 1_700_000_000_000i64;
    let hs: Vec<HistogramSample> = (0..5u64)
        .map(|i| {
            let h = Histogram {
                count: i + 1,
                sum: i as f64,
                positive_spans: vec![Span::new(0, 1)],
                positive_buckets: vec![i as i64 + 1],
                ..Histogram::default()
            };
            HistogramSample::with_st(t0 + i as i64 * 15_000, t0 - 60_000, HistogramValue::Int(h))
        })
        .collect();
    let mut ws = WriteSeries::new(l.clone(), vec![]);
    ws.histogram_samples = hs.clone();
    let (status, written, text) = post_write(&s, rw::compress(&rw::encode_v2(&[ws], &[])), CT_V2);
    assert_eq!((status, written.as_deref()), (204, Some("5")), "{text}");
    let ms: Vec<Matcher> = l.iter().map(|x| Matcher::new(MatchOp::Equal, x.name, x.value).expect("m")).collect();
    let body = read(&s, true, &ms);
    let r = FrameReader::new(&body, 1 << 20).next_response().expect("frame").expect("valid");
    let c = &r.chunked_series[0].chunks[0];
    // A plain Prometheus histogram chunk: exactly what Prometheus' encoder writes for these samples.
    assert_eq!(c.r#type, 2);
    let plain: Vec<(i64, Histogram)> = hs
        .iter()
        .map(|h| match &h.h {
            HistogramValue::Int(x) => (h.t, x.clone()),
            HistogramValue::Float(_) => unreachable!(),
        })
        .collect();
    assert_eq!(c.data, tessera_encoding::encode_histograms(&plain).expect("valid").swap_remove(0));
    // After a restart (WAL replay), the same plain chunk (storage keeps the STs: crates/tsdb/tests/histograms.rs).
    let s = s.restart(true);
    let body = read(&s, true, &ms);
    let r = FrameReader::new(&body, 1 << 20).next_response().expect("frame").expect("valid");
    assert_eq!(r.chunked_series[0].chunks[0].data, c.data);
}
