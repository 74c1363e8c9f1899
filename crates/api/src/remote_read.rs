//! `POST /api/v1/read`: Prometheus remote read, both response types, the streamed one in constant memory.
//!
//! Flow (Prometheus' `readHandler.ServeHTTP` in storage/remote/read_handler.go): wait for a slot of the
//! concurrency gate, read and decode the snappy `ReadRequest` (400 with the reason: garbage, a body that
//! is not snappy — gzip, uncompressed —, no queries, an inverted time range, an invalid matcher), then
//! negotiate the response type (`tessera_protocol::remote_read::negotiate_response_type`).
//!
//! - `SAMPLES` ([`samples`]): every query's series with their samples in `[start, end]`, one
//!   snappy-compressed `ReadResponse`. Materialised, as upstream does; bounded by the sample limit
//!   (`--storage.remote.read-sample-limit`; exceeding it is upstream's 400 "exceeded sample limit (N)").
//! - `STREAMED_XOR_CHUNKS` ([`stream`]): a blocking task walks the querier series by series and cuts each
//!   series' chunks into frames (`SeriesFramer`, ≤ `--storage.remote.read-max-bytes-in-frame`); frames go
//!   through a channel of capacity [`STREAM_CHANNEL_FRAMES`] into the response body, so the handler holds
//!   at most a couple of frames whatever the range; the storage querier under it yields one series at a
//!   time (see `tessera_tsdb`'s querier docs), so nothing grows with the range or the series count. A client
//!   that goes away drops the body, the channel send fails and the producer stops.
//!
//! Key decisions:
//! - Stored XOR and native-histogram chunks leave exactly as stored (the bytes are copied into the
//!   frame, never decoded; `SAMPLES` mode decodes histograms into the response's `histograms`);
//!   Tessera's dense cold-chunk codec is converted with `tessera_encoding::to_xor_chunks` (≤120 samples
//!   per piece). Like upstream's `StreamChunkedReadResponses` (storage/remote/codec.go), whole chunks
//!   that overlap the query range are sent: a chunk may hold samples before `start` or after `end`, and
//!   clients filter by time. Converted pieces that do not overlap the range at all are dropped.
//! - `hints.func == "series"` selects labels only (`SelectHints::series_only`): `SAMPLES` answers the
//!   series with no samples; the streamed mode sends one frame per series with no chunks (upstream would
//!   send nothing for a chunk-less series, which makes the hint useless to a streaming client).
//! - The concurrency gate waits (like upstream's `gate.Start`, which blocks until a slot frees or the
//!   client goes away) instead of answering 429: remote-read clients do not retry 429s.
//! - Invalid regexes are 400 here (upstream fails later inside `FromLabelMatchers` with a 500); the
//!   request is wrong, not the server.

use crate::AppState;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tessera_model::{ChunkEncoding, SelectHints};
use tessera_protocol::histogram_wire::to_prompb;
use tessera_protocol::prompb;
use tessera_protocol::remote_read::{
    self as rr, ReadQuery, ReadResponseType, SeriesFramer, CONTENT_TYPE_SAMPLES, CONTENT_TYPE_STREAMED,
    DEFAULT_MAX_REQUEST_BYTES,
};

/// Frames buffered between the producer and the socket (plus the one being written and the one being
/// built: at most ~3 frames in memory per request).
pub const STREAM_CHANNEL_FRAMES: usize = 1;
/// Samples per XOR chunk when a dense chunk must be converted (Prometheus' head chunk size).
const XOR_CHUNK_SAMPLES: usize = 120;

fn plain(status: StatusCode, msg: impl Into<String>) -> Response {
    let mut msg = msg.into();
    if !msg.ends_with('\n') {
        msg.push('\n');
    }
    (status, [(header::CONTENT_TYPE, "text/plain; charset=utf-8")], msg).into_response()
}

/// An error of one query, with upstream's status: 400 for the sample limit, 500 otherwise.
#[derive(Debug)]
struct QueryError {
    status: StatusCode,
    msg: String,
}

impl QueryError {
    fn internal(msg: impl std::fmt::Display) -> Self {
        QueryError { status: StatusCode::INTERNAL_SERVER_ERROR, msg: msg.to_string() }
    }
}

/// The handler.
pub async fn read(State(st): State<Arc<AppState>>, body: Body) -> Response {
    let Some(db) = st.store().queryable() else {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "TSDB not ready");
    };
    // Upstream's remoteReadGate: wait for a slot. The permit lives as long as the response body.
    let Ok(permit) = st.remote_read_gate.clone().acquire_owned().await else {
        return plain(StatusCode::INTERNAL_SERVER_ERROR, "remote read gate closed");
    };
    // Upstream's DecodeReadRequest reads at most decodeReadLimit (32 MiB) of body and of decoded bytes.
    let bytes = match axum::body::to_bytes(body, DEFAULT_MAX_REQUEST_BYTES).await {
        Ok(b) => b,
        Err(e) => return plain(StatusCode::BAD_REQUEST, format!("cannot read request body: {e}")),
    };
    let req = match rr::decode_request(&bytes, DEFAULT_MAX_REQUEST_BYTES) {
        Ok(r) => r,
        Err(e) => return plain(StatusCode::BAD_REQUEST, e.to_string()),
    };
    drop(bytes);
    let typ = match rr::negotiate_response_type(&req.accepted_response_types) {
        Ok(t) => t,
        Err(e) => return plain(StatusCode::BAD_REQUEST, e.to_string()),
    };
    match typ {
        ReadResponseType::Samples => {
            let limit = st.options.remote_read_sample_limit;
            let r = tokio::task::spawn_blocking(move || samples(&*db, &req.queries, limit)).await;
            drop(permit);
            match r {
                Ok(Ok(body)) => (
                    StatusCode::OK,
                    [(header::CONTENT_TYPE, CONTENT_TYPE_SAMPLES), (header::CONTENT_ENCODING, "snappy")],
                    body,
                )
                    .into_response(),
                Ok(Err(e)) => plain(e.status, e.msg),
                Err(e) => plain(StatusCode::INTERNAL_SERVER_ERROR, format!("remote read task failed: {e}")),
            }
        }
        ReadResponseType::StreamedXorChunks => {
            let max_frame = st.options.remote_read_max_bytes_in_frame.max(1);
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Bytes, std::io::Error>>(STREAM_CHANNEL_FRAMES);
            tokio::task::spawn_blocking(move || {
                let _permit = permit;
                if let Err(e) = stream(&*db, &req.queries, max_frame, &tx) {
                    // The receiver may be gone already (client disconnect); nothing more to do then.
                    let _ = tx.blocking_send(Err(std::io::Error::other(e.msg)));
                }
            });
            // Wait for the first frame so an error before any byte was sent is a proper status code.
            let first = match rx.recv().await {
                Some(Ok(f)) => Some(f),
                Some(Err(e)) => return plain(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()),
                None => None,
            };
            let mut resp = Body::from_stream(FrameStream { first, rx }).into_response();
            resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static(CONTENT_TYPE_STREAMED));
            resp
        }
    }
}

/// The response body: the first frame, then whatever the producer sends. An `Err` item aborts the
/// response (hyper closes the connection), so a client never mistakes a truncated stream for a whole one.
struct FrameStream {
    first: Option<Bytes>,
    rx: tokio::sync::mpsc::Receiver<Result<Bytes, std::io::Error>>,
}

impl futures_core::Stream for FrameStream {
    type Item = Result<Bytes, std::io::Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if let Some(f) = self.first.take() {
            return Poll::Ready(Some(Ok(f)));
        }
        self.rx.poll_recv(cx)
    }
}

fn hints_of(q: &ReadQuery) -> SelectHints {
    let h = q.hints.as_ref();
    SelectHints {
        series_only: h.is_some_and(|h| h.func == "series"),
        func: h.map(|h| h.func.clone()).filter(|f| !f.is_empty()),
        range_ms: h.map_or(0, |h| h.range_ms),
        step_ms: h.map_or(0, |h| h.step_ms),
        // Remote read answers only series with samples in range, as Prometheus does.
        unchecked_range: false,
    }
}

/// `SAMPLES`: Prometheus' `remoteReadSamples` + `ToQueryResult`. The sample limit counts per query, as
/// upstream's does.
fn samples(db: &dyn tessera_model::Queryable, queries: &[ReadQuery], sample_limit: usize) -> Result<Vec<u8>, QueryError> {
    let mut resp = prompb::ReadResponse { results: Vec::with_capacity(queries.len()) };
    for q in queries {
        let querier = db.querier(q.start_ms, q.end_ms).map_err(QueryError::internal)?;
        let set = querier.select(&q.matchers, &hints_of(q)).map_err(QueryError::internal)?;
        let mut result = prompb::QueryResult::default();
        let mut n = 0usize;
        let mut buf = Vec::new();
        let mut hists: Vec<prompb::Histogram> = Vec::new();
        for s in set {
            let s = s.map_err(QueryError::internal)?;
            buf.clear();
            hists.clear();
            for c in &s.chunks {
                if c.encoding.is_histogram() {
                    if c.maxt_ms < q.start_ms || c.mint_ms > q.end_ms {
                        continue;
                    }
                    let mut v = Vec::new();
                    tessera_encoding::decode_histogram_samples_into(c, &mut v).map_err(QueryError::internal)?;
                    // The remote-read protocol has no start timestamps: they stay behind.
                    hists.extend(
                        v.into_iter().filter(|s| s.t >= q.start_ms && s.t <= q.end_ms).map(|s| to_prompb(s.t, &s.h)),
                    );
                } else {
                    tessera_encoding::decode_chunk_range_into(c, q.start_ms, q.end_ms, &mut buf).map_err(QueryError::internal)?;
                }
            }
            // Histograms count toward the limit as samples do (upstream `ToQueryResult`).
            n += buf.len() + hists.len();
            if n > sample_limit {
                // Upstream: HTTPError{"exceeded sample limit (%d)", http.StatusBadRequest}.
                return Err(QueryError { status: StatusCode::BAD_REQUEST, msg: format!("exceeded sample limit ({sample_limit})") });
            }
            result.timeseries.push(prompb::TimeSeries {
                labels: rr::to_wire_labels(&s.labels),
                samples: buf.iter().map(|x| prompb::Sample { value: x.v, timestamp: x.t }).collect(),
                histograms: std::mem::take(&mut hists),
                ..Default::default()
            });
        }
        resp.results.push(result);
    }
    Ok(rr::encode_samples_response(&resp))
}

/// `STREAMED_XOR_CHUNKS`: Prometheus' `remoteReadStreamedXORChunks` + `StreamChunkedReadResponses`.
/// Queries in order, series in label order, chunks in time order; each frame goes to `tx` as soon as it
/// is full. Stops at the first failed send (the client went away).
fn stream(
    db: &dyn tessera_model::Queryable,
    queries: &[ReadQuery],
    max_frame: usize,
    tx: &tokio::sync::mpsc::Sender<Result<Bytes, std::io::Error>>,
) -> Result<(), QueryError> {
    let mut framer = SeriesFramer::new(max_frame);
    let mut send = |frame: &[u8]| -> Result<(), QueryError> {
        tx.blocking_send(Ok(Bytes::copy_from_slice(frame)))
            .map_err(|_| QueryError::internal("client went away"))
    };
    let mut empty_frame = Vec::new();
    for (i, q) in queries.iter().enumerate() {
        let hints = hints_of(q);
        let querier = db.querier(q.start_ms, q.end_ms).map_err(QueryError::internal)?;
        let set = querier.select(&q.matchers, &hints).map_err(QueryError::internal)?;
        for s in set {
            let s = s.map_err(QueryError::internal)?;
            let labels = rr::to_wire_labels(&s.labels);
            if hints.series_only {
                empty_frame.clear();
                rr::write_chunked_response(
                    &mut empty_frame,
                    &prompb::ChunkedReadResponse {
                        chunked_series: vec![prompb::ChunkedSeries { labels, chunks: vec![] }],
                        query_index: i as i64,
                    },
                );
                send(&empty_frame)?;
                continue;
            }
            // Chunks are converted lazily, one stored chunk at a time; a conversion error stops the series.
            let mut conv_err = None;
            let (start, end) = (q.start_ms, q.end_ms);
            let chunks = s.chunks.iter().flat_map(|c| {
                // Prometheus' own encodings (XOR, integer and float histograms) leave as stored; the ST
                // histogram chunks as their leading plain chunk (a slice, the STs left behind).
                let pieces = if c.encoding == ChunkEncoding::Xor {
                    Ok(vec![c.clone()])
                } else if c.encoding.is_histogram() {
                    tessera_encoding::prometheus_histogram_chunk(c).map(|p| p.into_iter().collect())
                } else {
                    tessera_encoding::to_xor_chunks(c, XOR_CHUNK_SAMPLES)
                };
                let pieces = match pieces {
                    Ok(p) => p,
                    Err(e) => {
                        conv_err.get_or_insert(e);
                        Vec::new()
                    }
                };
                pieces.into_iter().filter(move |p| p.maxt_ms >= start && p.mint_ms <= end).map(|p| prompb::Chunk {
                    min_time_ms: p.mint_ms,
                    max_time_ms: p.maxt_ms,
                    // Prometheus numbers its chunk encodings as the wire enum does (1 XOR, 2, 3 histograms).
                    r#type: p.encoding as i32,
                    data: p.data.to_vec(),
                })
            });
            framer.write_series(i as i64, &labels, chunks, &mut send)?;
            if let Some(e) = conv_err {
                return Err(QueryError::internal(format!("series {}: {e}", s.labels)));
            }
        }
    }
    Ok(())
}
