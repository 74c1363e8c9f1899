//! `POST /api/v1/read` end to end through the router: data written into a real `Db` (part flushed into
//! blocks across a 2 h boundary, part in the head), read back with both response types by a client that
//! checks every frame's CRC, decodes every chunk and compares with what was written.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use std::collections::BTreeMap;
use std::sync::Arc;
use tessera_api::{router, ApiOptions, AppState};
use tessera_model::{labels::Labels, MatchOp, Matcher, Sample};
use tessera_protocol::prompb;
use tessera_protocol::remote_read::{self as rr, FrameReader, CONTENT_TYPE_STREAMED};
use tessera_tsdb::Db;
use tower::ServiceExt;

const H: i64 = 3_600_000;
/// 2 h-aligned start.
const T0: i64 = 1_700_006_400_000;
const STEP: i64 = 15_000;

fn series_labels(job: &str, inst: usize) -> Labels {
    Labels::from_pairs([("__name__", "m"), ("job", job), ("instance", format!("i{inst}").as_str())])
}

fn value(job: &str, inst: usize, t: i64) -> f64 {
    let k = if job == "a" { 1.0 } else { 1000.0 };
    k * inst as f64 + (t - T0) as f64 / 1000.0 + if t % 7 == 0 { 0.5 } else { 0.0 }
}

/// Every series' samples as written.
type Written = BTreeMap<Labels, Vec<Sample>>;

fn write(db: &Db, from: i64, to: i64, w: &mut Written) {
    let mut app = db.appender();
    for job in ["a", "b"] {
        for inst in 0..3 {
            let l = series_labels(job, inst);
            let s: Vec<Sample> = (from..to).step_by(STEP as usize).map(|t| Sample { t, v: value(job, inst, t) }).collect();
            w.entry(l.clone()).or_default().extend_from_slice(&s);
            app.add(l, &s);
        }
    }
    let rep = app.commit().expect("commit");
    assert_eq!(rep.rejected_samples(), 0);
}

/// 5 h flushed into blocks (crossing two 2 h boundaries), then 1 h in the head.
fn setup(opts: ApiOptions) -> (tempfile::TempDir, Arc<AppState>, Written) {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), tessera_tsdb::Options { shards: 2, background: false, ..Default::default() }).expect("open");
    let mut w = Written::new();
    write(&db, T0, T0 + 5 * H, &mut w);
    db.flush().expect("flush");
    write(&db, T0 + 5 * H, T0 + 6 * H, &mut w);
    let st = AppState::new(opts, BTreeMap::new());
    st.set_db(db);
    (dir, st, w)
}

fn m(op: MatchOp, n: &str, v: &str) -> Matcher {
    Matcher::new(op, n, v).expect("matcher")
}

fn query(start: i64, end: i64, ms: &[Matcher]) -> prompb::Query {
    prompb::Query { start_timestamp_ms: start, end_timestamp_ms: end, matchers: rr::from_matchers(ms), hints: None }
}

async fn post(st: &Arc<AppState>, body: Vec<u8>) -> (StatusCode, Option<String>, Vec<u8>) {
    let req = Request::builder().method("POST").uri("/api/v1/read").body(Body::from(body)).expect("request");
    let resp = router(st.clone()).oneshot(req).await.expect("infallible");
    let status = resp.status();
    let ct = resp.headers().get("content-type").map(|v| v.to_str().expect("ascii").to_string());
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body").to_vec();
    (status, ct, body)
}

/// What each query should return: series → samples in [start, end].
fn expected(w: &Written, q: &prompb::Query) -> Vec<(Labels, Vec<Sample>)> {
    let ms = rr::to_matchers(0, &q.matchers).expect("valid");
    w.iter()
        .filter(|(l, _)| ms.iter().all(|m| m.matches(l.get(&m.name))))
        .map(|(l, s)| {
            (l.clone(), s.iter().copied().filter(|x| x.t >= q.start_timestamp_ms && x.t <= q.end_timestamp_ms).collect::<Vec<_>>())
        })
        .filter(|(_, s)| !s.is_empty())
        .collect()
}

fn from_wire(ls: &[prompb::Label]) -> Labels {
    Labels::from_pairs(ls.iter().map(|l| (l.name.clone(), l.value.clone())))
}

/// Per query index, the series with their samples.
type PerQuery = Vec<Vec<(Labels, Vec<Sample>)>>;

/// Decodes a streamed body: every frame's CRC, every chunk; consecutive frames of one series are joined.
/// Returns per query index the series with their in-range samples, and the number of frames.
fn decode_streamed(body: &[u8], queries: &[prompb::Query], max_frame: usize) -> (PerQuery, usize) {
    let mut out: PerQuery = vec![Vec::new(); queries.len()];
    let mut r = FrameReader::new(body, max_frame + 64 * 1024);
    let mut frames = 0;
    let mut last_index = 0;
    while let Some(f) = r.next_response() {
        let f = f.expect("frame with a valid CRC");
        frames += 1;
        let qi = f.query_index as usize;
        assert!(qi >= last_index, "queries answered in order");
        last_index = qi;
        let q = &queries[qi];
        assert_eq!(f.chunked_series.len(), 1);
        for cs in f.chunked_series {
            let labels = from_wire(&cs.labels);
            let list = &mut out[qi];
            if list.last().is_none_or(|(l, _)| *l != labels) {
                if let Some((prev, _)) = list.last() {
                    assert!(*prev < labels, "series sorted: {prev} then {labels}");
                }
                list.push((labels, Vec::new()));
            }
            let samples = &mut list.last_mut().expect("pushed").1;
            for c in cs.chunks {
                assert_eq!(c.r#type, prompb::chunk::Encoding::Xor as i32);
                assert!(c.max_time_ms >= q.start_timestamp_ms && c.min_time_ms <= q.end_timestamp_ms, "chunk overlaps the range");
                let mut all = Vec::new();
                tessera_encoding::decode_xor_into(&c.data, &mut all).expect("chunk decodes");
                assert_eq!(all.first().map(|s| s.t), Some(c.min_time_ms));
                assert_eq!(all.last().map(|s| s.t), Some(c.max_time_ms));
                if let Some(prev) = samples.last() {
                    assert!(prev.t < c.min_time_ms, "chunks in time order");
                }
                samples.extend(all.into_iter().filter(|s| s.t >= q.start_timestamp_ms && s.t <= q.end_timestamp_ms));
            }
        }
    }
    (out, frames)
}

fn decode_samples(body: &[u8]) -> Vec<Vec<(Labels, Vec<Sample>)>> {
    let resp = rr::decode_samples_response(body, 1 << 30).expect("ReadResponse");
    resp.results
        .into_iter()
        .map(|r| {
            r.timeseries
                .into_iter()
                .map(|ts| (from_wire(&ts.labels), ts.samples.iter().map(|s| Sample { t: s.timestamp, v: s.value }).collect()))
                .collect()
        })
        .collect()
}

fn all_queries() -> Vec<prompb::Query> {
    use MatchOp::*;
    vec![
        // Everything of job a, blocks and head.
        query(T0, T0 + 6 * H, &[m(Equal, "__name__", "m"), m(Equal, "job", "a")]),
        // Across the 2 h block boundary, mid-chunk start and end.
        query(T0 + 2 * H - 7 * 60_000 - 1, T0 + 2 * H + 11 * 60_000 + 1, &[m(Regex, "__name__", "m|x"), m(NotEqual, "instance", "i1")]),
        // Head only, and the block/head boundary.
        query(T0 + 4 * H + 50 * 60_000, T0 + 5 * H + 30 * 60_000, &[m(Equal, "__name__", "m"), m(NotRegex, "job", "b")]),
        // Matches nothing.
        query(T0, T0 + 6 * H, &[m(Equal, "__name__", "nope")]),
        // A range with no data.
        query(T0 - 10 * H, T0 - 9 * H, &[m(Equal, "__name__", "m")]),
    ]
}

#[tokio::test]
async fn both_modes_return_what_was_written() {
    for max_frame in [1 << 20, 300] {
        let (_dir, st, w) = setup(ApiOptions { remote_read_max_bytes_in_frame: max_frame, ..Default::default() });
        let queries = all_queries();
        let want: Vec<_> = queries.iter().map(|q| expected(&w, q)).collect();
        assert!(want[0].len() == 3 && want[1].len() == 4 && want[2].len() == 3, "test data as intended");

        // STREAMED_XOR_CHUNKS (preferred first by the client).
        let req = prompb::ReadRequest { queries: queries.clone(), accepted_response_types: vec![1, 0] };
        let (status, ct, body) = post(&st, rr::encode_request(&req)).await;
        assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
        assert_eq!(ct.as_deref(), Some(CONTENT_TYPE_STREAMED));
        let (got, frames) = decode_streamed(&body, &queries, max_frame);
        assert_eq!(got, want, "streamed, max frame {max_frame}");
        let series: usize = want.iter().map(Vec::len).sum();
        if max_frame == 300 {
            assert!(frames > 2 * series, "small frames split series: {frames} frames for {series} series");
        } else {
            assert_eq!(frames, series, "one frame per series when it fits");
        }

        // SAMPLES (negotiated by order, and by default).
        for types in [vec![0, 1], vec![]] {
            let req = prompb::ReadRequest { queries: queries.clone(), accepted_response_types: types };
            let (status, ct, body) = post(&st, rr::encode_request(&req)).await;
            assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
            assert_eq!(ct.as_deref(), Some("application/x-protobuf"));
            assert_eq!(decode_samples(&body), want);
        }
    }
}

#[tokio::test]
async fn series_hint_returns_labels_only() {
    let (_dir, st, _w) = setup(ApiOptions::default());
    let mut q = query(T0, T0 + 6 * H, &[m(MatchOp::Equal, "job", "b")]);
    q.hints = Some(prompb::ReadHints { func: "series".into(), ..Default::default() });
    for types in [vec![1], vec![0]] {
        let req = prompb::ReadRequest { queries: vec![q.clone()], accepted_response_types: types.clone() };
        let (status, _, body) = post(&st, rr::encode_request(&req)).await;
        assert_eq!(status, StatusCode::OK);
        let got = if types == [1] { decode_streamed(&body, std::slice::from_ref(&q), 1 << 20).0 } else { decode_samples(&body) };
        let names: Vec<String> = got[0].iter().map(|(l, s)| {
            assert!(s.is_empty());
            l.get("instance").to_string()
        }).collect();
        assert_eq!(names, ["i0", "i1", "i2"], "{types:?}");
    }
}

#[tokio::test]
async fn sample_limit_is_upstreams_400() {
    let (_dir, st, _w) = setup(ApiOptions { remote_read_sample_limit: 1000, ..Default::default() });
    let small = query(T0, T0 + H, &[m(MatchOp::Equal, "instance", "i0"), m(MatchOp::Equal, "job", "a")]);
    let big = query(T0, T0 + 6 * H, &[m(MatchOp::Equal, "__name__", "m")]);
    let req = prompb::ReadRequest { queries: vec![small.clone()], accepted_response_types: vec![] };
    assert_eq!(post(&st, rr::encode_request(&req)).await.0, StatusCode::OK);
    let req = prompb::ReadRequest { queries: vec![small, big], accepted_response_types: vec![] };
    let (status, _, body) = post(&st, rr::encode_request(&req)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(String::from_utf8_lossy(&body), "exceeded sample limit (1000)\n");
}

#[tokio::test]
async fn bad_requests_are_400_with_a_reason_and_harmless() {
    let (_dir, st, w) = setup(ApiOptions::default());
    let good = query(T0, T0 + 6 * H, &[m(MatchOp::Equal, "job", "a")]);
    let req_of = |qs: Vec<prompb::Query>, types: Vec<i32>| prompb::ReadRequest { queries: qs, accepted_response_types: types };
    let raw = tessera_protocol::remote_write::decompress(&rr::encode_request(&req_of(vec![good.clone()], vec![1])), 1 << 20)
        .expect("own encoding decompresses");
    let mut inverted = good.clone();
    inverted.start_timestamp_ms = inverted.end_timestamp_ms + 1;
    let mut bad_regex = good.clone();
    bad_regex.matchers.push(prompb::LabelMatcher { r#type: 2, name: "job".into(), value: "a(".into() });
    let mut bad_type = good.clone();
    bad_type.matchers[0].r#type = 9;
    // A gzip stream of the good request's protobuf (header + stored block), as a confused client would send.
    let mut gzip = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
    gzip.extend_from_slice(&raw);
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("garbage", b"\x00\x01\x02garbage that is not snappy".to_vec(), ""),
        ("empty body", Vec::new(), ""),
        ("no compression", raw.clone(), ""),
        ("gzip", gzip, ""),
        ("zero queries", rr::encode_request(&req_of(vec![], vec![1])), "no queries"),
        ("inverted", rr::encode_request(&req_of(vec![inverted], vec![1])), "is after end"),
        ("invalid regex", rr::encode_request(&req_of(vec![bad_regex], vec![0])), "query 0: matcher"),
        ("matcher type", rr::encode_request(&req_of(vec![bad_type], vec![0])), "invalid matcher type 9"),
        ("unsupported response types", rr::encode_request(&req_of(vec![good.clone()], vec![7])), "does not support"),
        ("protobuf garbage in snappy", tessera_protocol::remote_write::compress(b"\xff\xff\xff\xff"), ""),
    ];
    for (what, body, reason) in cases {
        let (status, _, answer) = post(&st, body).await;
        let answer = String::from_utf8_lossy(&answer);
        assert_eq!(status, StatusCode::BAD_REQUEST, "{what}: {answer}");
        assert!(answer.len() > 5 && answer.contains(reason), "{what}: {answer}");
    }
    // Still serving correctly.
    let req = req_of(vec![good.clone()], vec![1]);
    let (status, _, body) = post(&st, rr::encode_request(&req)).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(decode_streamed(&body, std::slice::from_ref(&good), 1 << 20).0[0], expected(&w, &good));
}

#[tokio::test]
async fn not_ready_is_503() {
    let st = AppState::new(ApiOptions::default(), BTreeMap::new());
    let req = prompb::ReadRequest { queries: vec![query(0, 1, &[m(MatchOp::Equal, "a", "b")])], accepted_response_types: vec![] };
    assert_eq!(post(&st, rr::encode_request(&req)).await.0, StatusCode::SERVICE_UNAVAILABLE);
}
