//! Remote write 2.0 start timestamps through the router into a real `Db`: the STs a request carries are
//! what storage returns for those samples, before and after a reopen (WAL replay); series without STs,
//! and every 1.0 series, stay plain XOR chunks.

use axum::body::Body;
use axum::http::{Request, StatusCode};
use std::collections::BTreeMap;
use std::sync::Arc;
use tessera_api::{router, ApiOptions, AppState};
use tessera_model::{labels, ChunkEncoding, Labels, MatchOp, Matcher, Queryable, Sample, SelectHints};
use tessera_protocol::remote_write::{self as rw, ProtoVersion, WriteSeries};
use tessera_tsdb::Db;
use tower::ServiceExt;

const T0: i64 = 1_700_000_040_000;

fn open(dir: &std::path::Path) -> Arc<Db> {
    Db::open(dir, tessera_tsdb::Options { shards: 2, background: false, ..Default::default() }).expect("open")
}

async fn write(st: &Arc<AppState>, v: ProtoVersion, series: &[WriteSeries]) -> StatusCode {
    let pb = match v {
        ProtoVersion::V1 => rw::encode_v1(series, &[]),
        ProtoVersion::V2 => rw::encode_v2(series, &[]),
    };
    let req = Request::post("/api/v1/write")
        .header("content-type", v.content_type())
        .header("content-encoding", "snappy")
        .body(Body::from(rw::compress(&pb)))
        .expect("request");
    let resp = router(st.clone()).oneshot(req).await.expect("infallible");
    let status = resp.status();
    let body = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body");
    assert_eq!(status, StatusCode::NO_CONTENT, "{}", String::from_utf8_lossy(&body));
    status
}

/// Labels → (t, st) of each sample, and the chunk encodings seen.
type Stored = BTreeMap<Labels, (Vec<(i64, i64)>, Vec<ChunkEncoding>)>;

/// Every series named `name`, as stored.
fn read(db: &Db, name: &str) -> Stored {
    let q = db.querier(i64::MIN / 2, i64::MAX / 2).expect("querier");
    let ms = [Matcher::new(MatchOp::Equal, "__name__", name).expect("matcher")];
    let mut out = BTreeMap::new();
    for s in q.select(&ms, &SelectHints::default()).expect("select") {
        let s = s.expect("series");
        let (mut v, mut sts) = (Vec::new(), Vec::new());
        for c in &s.chunks {
            tessera_encoding::decode_chunk_range_st_into(c, i64::MIN, i64::MAX, &mut v, &mut sts).expect("decodes");
        }
        let pts = v.iter().zip(&sts).map(|(s, &st)| (s.t, st)).collect();
        out.insert(s.labels, (pts, s.chunks.iter().map(|c| c.encoding).collect()));
    }
    out
}

fn with_st(l: Labels, pts: &[(i64, f64, i64)]) -> WriteSeries {
    let mut s = WriteSeries::new(l, pts.iter().map(|&(t, v, _)| Sample::new(t, v)).collect());
    s.start_timestamps = pts.iter().map(|&(_, _, st)| st).collect();
    s
}

#[tokio::test]
async fn start_timestamps_of_remote_write_2_are_stored_and_survive_a_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let st = AppState::new(ApiOptions::default(), BTreeMap::new());
    st.set_db(open(dir.path()));
    let m = |k: &str| labels!("__name__" => "m", "k" => k);
    let series = vec![
        // A cumulative counter whose ST moves at the third sample (a reset the values hide).
        with_st(m("cumulative"), &[(T0, 5.0, T0 - 30_000), (T0 + 60_000, 9.0, T0 - 30_000), (T0 + 120_000, 12.0, T0 + 90_000)]),
        // An OTel delta: ST = previous sample's time; its first sample has no ST (0 = unset).
        with_st(m("delta"), &[(T0, 1.0, 0), (T0 + 60_000, 1.0, T0), (T0 + 120_000, 1.0, T0 + 60_000)]),
        WriteSeries::new(m("plain"), vec![Sample::new(T0, 1.0), Sample::new(T0 + 60_000, 2.0)]),
    ];
    write(&st, ProtoVersion::V2, &series).await;
    // 1.0 carries no STs: the same kind of series written by 1.0 is plain.
    write(&st, ProtoVersion::V1, &[WriteSeries::new(m("v1"), vec![Sample::new(T0, 1.0)])]).await;

    let check = |db: &Db| {
        let got = read(db, "m");
        for s in &series {
            let (pts, encodings) = &got[&s.labels];
            let want: Vec<(i64, i64)> =
                s.samples.iter().enumerate().map(|(i, x)| (x.t, s.start_timestamp(i))).collect();
            assert_eq!(pts, &want, "{}", s.labels);
            // Without STs a plain float chunk: the head's open chunk of short decimals is an open decimal
            // chunk (XOR for other values).
            let plain = |e: &ChunkEncoding| matches!(e, ChunkEncoding::Xor | ChunkEncoding::DecimalOpen);
            if s.start_timestamps.is_empty() {
                assert!(encodings.iter().all(plain), "{}: {encodings:?}", s.labels);
            } else {
                assert!(encodings.iter().all(|e| *e == ChunkEncoding::XorSt), "{}: {encodings:?}", s.labels);
            }
        }
        let (pts, encodings) = &got[&m("v1")];
        assert_eq!(pts, &vec![(T0, 0)]);
        assert_eq!(encodings, &vec![ChunkEncoding::DecimalOpen]);
    };
    let db = st.db().expect("db");
    check(&db);
    db.close().expect("close");
    drop(db);
    drop(st);
    check(&open(dir.path()));
}
