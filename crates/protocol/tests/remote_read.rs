//! Remote read codec: Prometheus' frame bytes, request validation, SAMPLES round trip, frame cutting.

use prost::Message;
use tessera_model::{labels, MatchOp};
use tessera_protocol::prompb;
use tessera_protocol::remote_read::*;

/// `../shared/vectors/wire.json`, or `None` (skipped loudly; an error in CI) when it is not there.
fn wire() -> Option<serde_json::Value> {
    let path = tessera_model::fixtures::shared("vectors/wire.json", module_path!())?;
    Some(serde_json::from_str(&std::fs::read_to_string(path).expect("wire.json")).expect("json"))
}

#[test]
fn frame_is_byte_exact_with_prometheus() {
    let Some(w) = wire() else { return };
    let chunk = hex::decode(w["remote_read_frame_chunk_hex"].as_str().expect("hex")).expect("hex");
    let want = hex::decode(w["remote_read_frame_hex"].as_str().expect("hex")).expect("hex");
    let resp = prompb::ChunkedReadResponse {
        chunked_series: vec![prompb::ChunkedSeries {
            labels: to_wire_labels(&labels!("__name__" => "up", "job" => "node")),
            chunks: vec![prompb::Chunk {
                min_time_ms: 1_700_000_000_000,
                max_time_ms: 1_700_000_000_000 + 9 * 15_000,
                r#type: prompb::chunk::Encoding::Xor as i32,
                data: chunk.clone(),
            }],
        }],
        query_index: 0,
    };
    let mut out = Vec::new();
    write_chunked_response(&mut out, &resp);
    assert_eq!(hex::encode(&out), hex::encode(&want));

    // And the SeriesFramer writes the same frame for a single small chunk.
    let mut framer = SeriesFramer::new(DEFAULT_MAX_BYTES_IN_FRAME);
    let mut frames = Vec::new();
    framer
        .write_series::<()>(0, &resp.chunked_series[0].labels, resp.chunked_series[0].chunks.clone(), |f| {
            frames.push(f.to_vec());
            Ok(())
        })
        .expect("no error");
    assert_eq!(frames, vec![want.clone()]);

    // The reader checks the CRC and gives the message back.
    let mut r = FrameReader::new(&want, DEFAULT_MAX_BYTES_IN_FRAME);
    assert_eq!(r.next_response().expect("one").expect("valid"), resp);
    assert!(r.next_frame().is_none());
}

#[test]
fn frame_reader_detects_corruption_truncation_and_size() {
    let Some(w) = wire() else { return };
    let frame = hex::decode(w["remote_read_frame_hex"].as_str().expect("hex")).expect("hex");
    let mut bad = frame.clone();
    let n = bad.len();
    bad[n - 1] ^= 1;
    assert_eq!(FrameReader::new(&bad, 1 << 20).next_frame(), Some(Err(ReadError::FrameChecksum)));
    let mut bad = frame.clone();
    bad[2] ^= 0x40;
    assert_eq!(FrameReader::new(&bad, 1 << 20).next_frame(), Some(Err(ReadError::FrameChecksum)));
    assert_eq!(FrameReader::new(&frame[..frame.len() - 1], 1 << 20).next_frame(), Some(Err(ReadError::FrameTruncated)));
    assert!(matches!(FrameReader::new(&frame, 10).next_frame(), Some(Err(ReadError::FrameTooLarge { size: 88, limit: 10 }))));
    // Two frames back to back.
    let mut two = frame.clone();
    two.extend_from_slice(&frame);
    let mut r = FrameReader::new(&two, 1 << 20);
    assert!(r.next_frame().expect("1").is_ok());
    assert!(r.next_frame().expect("2").is_ok());
    assert!(r.next_frame().is_none());
}

fn request(queries: Vec<prompb::Query>, types: Vec<i32>) -> Vec<u8> {
    encode_request(&prompb::ReadRequest { queries, accepted_response_types: types })
}

fn q(start: i64, end: i64, ms: Vec<(i32, &str, &str)>) -> prompb::Query {
    prompb::Query {
        start_timestamp_ms: start,
        end_timestamp_ms: end,
        matchers: ms.into_iter().map(|(t, n, v)| prompb::LabelMatcher { r#type: t, name: n.into(), value: v.into() }).collect(),
        hints: None,
    }
}

#[test]
fn request_validation() {
    let body = request(
        vec![
            q(0, 100, vec![(0, "__name__", "up"), (1, "job", "x"), (2, "instance", "h.*"), (3, "env", "dev|test")]),
            q(5, 5, vec![(0, "__name__", "x")]),
        ],
        vec![1, 0],
    );
    let req = decode_request(&body, DEFAULT_MAX_REQUEST_BYTES).expect("valid");
    assert_eq!(req.queries.len(), 2);
    let ops: Vec<_> = req.queries[0].matchers.iter().map(|m| m.op).collect();
    assert_eq!(ops, vec![MatchOp::Equal, MatchOp::NotEqual, MatchOp::Regex, MatchOp::NotRegex]);
    assert!(req.queries[0].matchers[2].matches("host1"));
    assert!(!req.queries[0].matchers[2].matches("xhost"), "regexes are anchored");
    assert_eq!(negotiate_response_type(&req.accepted_response_types), Ok(ReadResponseType::StreamedXorChunks));
    // Round trip of matchers.
    assert_eq!(from_matchers(&req.queries[0].matchers), q(0, 100, vec![(0, "__name__", "up"), (1, "job", "x"), (2, "instance", "h.*"), (3, "env", "dev|test")]).matchers);

    assert_eq!(decode_request(&request(vec![], vec![]), 1 << 20), Err(ReadError::NoQueries));
    let e = decode_request(&request(vec![q(0, 1, vec![]), q(10, 5, vec![])], vec![]), 1 << 20).expect_err("inverted");
    assert_eq!(e, ReadError::InvertedRange { index: 1, start_ms: 10, end_ms: 5 });
    let e = decode_request(&request(vec![q(0, 1, vec![(2, "job", "(")])], vec![]), 1 << 20).expect_err("bad regex");
    assert!(e.to_string().contains("query 0") && e.to_string().contains("invalid regular expression"), "{e}");
    let e = decode_request(&request(vec![q(0, 1, vec![(9, "job", "x")])], vec![]), 1 << 20).expect_err("bad type");
    assert!(matches!(e, ReadError::MatcherType { index: 0, value: 9 }));
    assert!(decode_request(b"garbage garbage", 1 << 20).is_err());
    let mut gz = vec![0x1f, 0x8b, 8, 0];
    gz.extend_from_slice(&[0; 20]);
    assert!(decode_request(&gz, 1 << 20).is_err());
    assert!(matches!(decode_request(&[0xff, 0xff, 0xff, 0xff, 0x0f, 0], 1 << 20), Err(ReadError::Decode(_))));
}

#[test]
fn samples_response_round_trips() {
    let resp = prompb::ReadResponse {
        results: vec![prompb::QueryResult {
            timeseries: vec![prompb::TimeSeries {
                labels: to_wire_labels(&labels!("__name__" => "up")),
                samples: vec![prompb::Sample { value: 1.0, timestamp: 10 }, prompb::Sample { value: 0.0, timestamp: 20 }],
                ..Default::default()
            }],
        }],
    };
    let body = encode_samples_response(&resp);
    assert_eq!(decode_samples_response(&body, 1 << 20).expect("decodes"), resp);
}

#[test]
fn series_framer_cuts_frames_by_budget_and_keeps_chunk_order() {
    let labels = to_wire_labels(&labels!("__name__" => "m", "job" => "j"));
    let chunks: Vec<prompb::Chunk> = (0..50)
        .map(|i| prompb::Chunk { min_time_ms: i * 100, max_time_ms: i * 100 + 99, r#type: 1, data: vec![i as u8; 200] })
        .collect();
    let budget = 1000;
    let mut framer = SeriesFramer::new(budget);
    let mut body = Vec::new();
    let mut frames = 0;
    framer
        .write_series::<()>(3, &labels, chunks.clone(), |f| {
            frames += 1;
            body.extend_from_slice(f);
            Ok(())
        })
        .expect("ok");
    assert!(frames > 5, "{frames}");
    let mut got = Vec::new();
    let mut r = FrameReader::new(&body, 1 << 20);
    while let Some(resp) = r.next_response() {
        let resp = resp.expect("valid frame");
        assert_eq!(resp.query_index, 3);
        assert_eq!(resp.chunked_series.len(), 1);
        assert_eq!(resp.chunked_series[0].labels, labels);
        // Each frame overshoots the budget by at most one chunk.
        assert!(resp.encoded_len() < budget + 300, "{}", resp.encoded_len());
        got.extend(resp.chunked_series[0].chunks.clone());
    }
    assert_eq!(got, chunks);
    // A series without chunks produces no frame.
    let mut n = 0;
    framer.write_series::<()>(0, &labels, Vec::new(), |_| { n += 1; Ok(()) }).expect("ok");
    assert_eq!(n, 0);
    let _ = prompb::ChunkedReadResponse::default().encode_to_vec();
}
