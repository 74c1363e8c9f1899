//! `POST /api/v1/write`: remote write 1.0 and 2.0.
//!
//! The order of checks is the order of cost: readiness, content negotiation (415), declared size (413),
//! the in-flight byte budget (429 with `Retry-After`, so senders back off instead of us growing memory),
//! then reading the body, and on a blocking thread: snappy (declared length checked before allocating),
//! protobuf decoding with validation, and one [`tessera_tsdb::Appender`] commit for the whole request
//! (the database commits the shards in parallel).
//!
//! Start timestamps of remote write 2.0 samples are stored with them (Tessera always stores STs, as
//! Prometheus does with `--enable-feature=st-storage`); whether PromQL uses them is a query-side option.
//!
//! Decoding is zero-copy ([`rw::decode_ref`]): label strings borrow from the decompressed body, and the
//! appender borrows them too ([`tessera_tsdb::Appender::add_ref`]), with the samples and start
//! timestamps: a series the head already has is found by hash and compared in place, and labels are
//! copied only for a series the request creates. The rejection report names a series by rebuilding its
//! labels from the request only when there is something to report.
//!
//! Answers (senders retry 5xx and 429, never other 4xx): 204 only when everything was written; 400 with
//! a plain-text body saying what was not written and why (invalid series, histograms failing upstream's
//! validation, samples and histograms rejected by storage by reason with counts) — the valid rest of
//! the request is written all the same; exemplars never fail a request (upstream only logs theirs); 5xx only when storage failed in a way worth a retry.
//! The `X-Prometheus-Remote-Write-*-Written` headers are set on every answer to a 2.0 request that was
//! read, and on none to 1.0, as Prometheus' handler does (1.0 defines no such headers; the compliance
//! suite's `TestRW1BasicCompatibility` checks that a 1.0 answer reports nothing; a missing header means
//! 0 written).

use crate::metadata::MetricMetadata;
use crate::AppState;
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::fmt::Write as _;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use tessera_protocol::remote_write::{
    self as rw, ProtoVersion, WriteRequestRef, HEADER_EXEMPLARS_WRITTEN, HEADER_HISTOGRAMS_WRITTEN,
    HEADER_SAMPLES_WRITTEN,
};
use tessera_tsdb::{Db, RejectReason};

/// Invalid series listed by name in a 400 body; the rest are counted.
const MAX_LISTED_INVALID: usize = 5;

/// What happened to one request, for the answer and the metrics.
#[derive(Debug, Default)]
struct Outcome {
    status: u16,
    samples_written: u64,
    histograms_written: u64,
    exemplars_written: u64,
    body: String,
    /// A 2.0 request: the answer carries the Written headers.
    v2: bool,
    /// Seconds for `Retry-After` (429, 503); 1 when not set.
    retry_after: Option<u64>,
}

fn answer(o: Outcome) -> Response {
    let status = StatusCode::from_u16(o.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut r = if o.body.is_empty() { status.into_response() } else { (status, o.body).into_response() };
    let h = r.headers_mut();
    if o.v2 {
        h.insert(HEADER_SAMPLES_WRITTEN, HeaderValue::from(o.samples_written));
        h.insert(HEADER_HISTOGRAMS_WRITTEN, HeaderValue::from(o.histograms_written));
        h.insert(HEADER_EXEMPLARS_WRITTEN, HeaderValue::from(o.exemplars_written));
    }
    if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
        h.insert(header::RETRY_AFTER, HeaderValue::from(o.retry_after.unwrap_or(1)));
    }
    r
}

fn plain(status: u16, body: impl Into<String>) -> Response {
    let mut body = body.into();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    answer(Outcome { status, body, ..Outcome::default() })
}

/// Marks an answer given without reading the request body: the server closes that connection afterwards
/// (hyper does not drain an unread body), and `Connection: close` tells the client not to reuse it.
/// Every early answer needs it (503 not ready, 415, 413 undrained, 429): without it a keep-alive
/// client sends its next request into the closed socket and sees a broken pipe (found by
/// `tessera-bench hostile`: one 415 in four broke the writer's next, valid, request).
fn closing(mut r: Response) -> Response {
    r.headers_mut().insert(header::CONNECTION, header::HeaderValue::from_static("close"));
    r
}

/// The handler.
pub async fn remote_write(State(st): State<Arc<AppState>>, headers: HeaderMap, body: Body) -> Response {
    let store = st.store();
    if store.is_union() {
        return crate::response::ApiError::bad_data(format!("store {:?} is a union store: write to its member stores", store.name)).into_response();
    }
    let Some(db) = store.db().cloned() else {
        return closing(plain(503, "TSDB not ready: the data directory is still being opened"));
    };
    let declared = headers.get(header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|s| s.parse::<u64>().ok());
    if store.over_rate() {
        // Refused before decoding; the body is read and dropped (bounded) so that the connection
        // stays usable: a sender over its rate then costs about what its bytes cost.
        st.store_metrics.limited(&store.name, "ingestion_rate");
        let r = plain(429, format!("store {:?} is over its ingestion rate of {} samples/s; retry later", store.name, store.limits().ingestion_rate));
        let drained = match declared {
            Some(n) if n <= st.options.max_request_bytes as u64 => {
                tokio::time::timeout(std::time::Duration::from_secs(10), drain(body, n)).await.is_ok()
            }
            _ => false,
        };
        return if drained { r } else { closing(r) };
    }
    let hdr = |name: header::HeaderName| -> Result<Option<&str>, ()> {
        match headers.get(name) {
            None => Ok(None),
            Some(v) => v.to_str().map(Some).map_err(|_| ()),
        }
    };
    let (Ok(ct), Ok(ce)) = (hdr(header::CONTENT_TYPE), hdr(header::CONTENT_ENCODING)) else {
        return closing(plain(415, "Content-Type and Content-Encoding must be ASCII"));
    };
    let version = match rw::negotiate(ct, ce) {
        Ok(v) => v,
        Err(e) => return closing(plain(415, e.0)),
    };

    let max = st.options.max_request_bytes;
    if let Some(n) = declared
        && n > max as u64
    {
        // Answering before the body is read makes the connection close under a sender still writing: it sees a
        // broken pipe, a network error that it retries forever, instead of the 413 that tells it to drop the
        // batch. So a moderately oversized body is read and discarded (streamed, never buffered, time-bounded);
        // one far past the limit is not worth the bandwidth.
        let drained = n <= 4 * max as u64
            && tokio::time::timeout(std::time::Duration::from_secs(10), drain(body, n)).await.is_ok();
        let r = plain(413, format!("request body of {n} bytes exceeds the limit of {max} bytes (--web.max-request-bytes)"));
        return if drained { r } else { closing(r) };
    }
    // Reserve the body's bytes in the in-flight budget before reading it (unknown length: the maximum).
    let want = declared.map(|n| n as usize).unwrap_or(max).clamp(1, u32::MAX as usize);
    let Ok(permit) = st.write_budget.clone().try_acquire_many_owned(want as u32) else {
        st.metrics.rw_throttled.fetch_add(1, Relaxed);
        // The body is not read, so the connection cannot carry another request: say so, or a client that
        // pools connections sends its next request into a closing socket.
        return closing(plain(
            429,
            format!(
                "too many remote-write bytes in flight (limit {} bytes, --web.max-inflight-write-bytes); retry later",
                st.options.max_inflight_write_bytes
            ),
        ));
    };
    st.metrics.rw_inflight_bytes.fetch_add(want as i64, Relaxed);
    let _release = Release { st: st.clone(), n: want as i64 };

    let bytes = match axum::body::to_bytes(body, max).await {
        Ok(b) => b,
        Err(e) => {
            return plain(413, format!("cannot read request body (limit {max} bytes, --web.max-request-bytes): {e}"));
        }
    };
    let st2 = st.clone();
    let store2 = store.clone();
    let outcome = tokio::task::spawn_blocking(move || process(&st2, &store2, &db, version, &bytes)).await;
    if let Ok(o) = &outcome {
        let n = o.samples_written + o.histograms_written;
        if n > 0 {
            st.store_metrics.samples_written.get_or_create(&crate::stores::StoreLabel { store: store.name.clone() }).inc_by(n);
        }
    }
    drop(permit);
    match outcome {
        Ok(o) => answer(Outcome { v2: version == ProtoVersion::V2, ..o }),
        Err(e) => plain(500, format!("internal error: remote-write task failed: {e}")),
    }
}

/// Gives the in-flight gauge back when the request ends, however it ends.
struct Release {
    st: Arc<AppState>,
    n: i64,
}

impl Drop for Release {
    fn drop(&mut self) {
        self.st.metrics.rw_inflight_bytes.fetch_sub(self.n, Relaxed);
    }
}

/// Decodes and writes one request body (blocking).
fn process(st: &AppState, store: &crate::stores::Store, db: &Db, version: ProtoVersion, body: &[u8]) -> Outcome {
    let limits = &st.options.write_limits;
    let bad = |e: rw::DecodeError| Outcome {
        status: 400,
        body: format!("cannot decode remote-write request: {e}\n"),
        ..Outcome::default()
    };
    let buf = match rw::decompress(body, limits.max_decoded_bytes) {
        Ok(b) => b,
        Err(e) => return bad(e),
    };
    match rw::decode_ref(version, &buf, limits) {
        Ok(dec) => write_decoded(st, store, db, &dec),
        Err(e) => bad(e),
    }
}

/// Writes a decoded request and says what happened.
fn write_decoded(st: &AppState, store: &crate::stores::Store, db: &Db, dec: &WriteRequestRef<'_>) -> Outcome {
    let m = &st.metrics;
    let valid_samples = dec.valid_samples() as u64;
    let invalid_samples: u64 = dec.invalid.iter().map(|s| s.samples as u64).sum();
    m.rw_samples_received.fetch_add(valid_samples + invalid_samples, Relaxed);
    m.rw_histograms_received.fetch_add(dec.histograms, Relaxed);
    m.rw_exemplars_received.fetch_add(dec.exemplars, Relaxed);
    m.rw_invalid_series.fetch_add(dec.invalid.len() as u64, Relaxed);
    m.add_rejected("invalid_series", invalid_samples);
    // The store's ingestion rate: 429 with when to retry, or 400 for a request it never takes.
    if let Err(r) = store.admit(valid_samples + dec.histograms) {
        st.store_metrics.limited(&store.name, "ingestion_rate");
        let (status, retry_after, body) = match r {
            crate::stores::Refused::RetryAfter(secs, msg) => (429, Some(secs), msg),
            crate::stores::Refused::TooLarge(msg) => (400, None, msg),
        };
        return Outcome { status, retry_after, body: format!("{body}\n"), ..Outcome::default() };
    }

    for md in &dec.metadata {
        store.metadata.insert(
            &md.metric_family_name,
            MetricMetadata { kind: md.kind.as_str().to_string(), unit: md.unit.clone(), help: md.help.clone() },
        );
    }

    // One batch per valid series, in request order: a rejection's `batch_index` is the series' index
    // in `dec`, which names it for the report without keeping a copy of every series' labels.
    // A series whose samples carry start timestamps (2.0 only) stores them beside the samples; the
    // rest keep the plain path (Prometheus' `appendV2` hands each sample's ST to storage the same way).
    // Labels, samples and STs are lent to the appender, not copied: the labels of a series the head
    // already has are only hashed and compared; they are copied only for a series this request creates.
    // `pairs` is every series' labels back to back (one allocation per request), sliced per series.
    let mut pairs: Vec<(&str, &str)> = Vec::with_capacity(dec.series().map(|s| s.labels.len()).sum());
    for s in dec.series() {
        pairs.extend(s.labels.iter().map(|l| (l.name, l.value)));
    }
    let mut app = db.appender();
    if st.options.max_new_series_per_request > 0 {
        app.limit_new_series(st.options.max_new_series_per_request);
    }
    let mut at = 0;
    for s in dec.series() {
        let n = s.labels.len();
        app.add_ref(&pairs[at..at + n], s.samples, s.start_timestamps);
        if !s.histogram_samples.is_empty() {
            app.add_ref_histograms(&pairs[at..at + n], s.histogram_samples);
        }
        if !s.exemplar_list.is_empty() {
            app.add_ref_exemplars(&pairs[at..at + n], s.exemplar_list);
        }
        at += n;
    }
    let report = match app.commit() {
        Ok(r) => r,
        Err(e) => {
            tracing::error!(error = %e, "remote write: commit failed");
            let status = match e {
                tessera_tsdb::Error::Closed => 503,
                _ => 500,
            };
            return Outcome { status, body: format!("storage error, nothing written: {e}\n"), ..Outcome::default() };
        }
    };
    m.rw_samples_written.fetch_add(report.samples_written, Relaxed);
    m.rw_histograms_written.fetch_add(report.histograms_written, Relaxed);
    m.rw_exemplars_written.fetch_add(report.exemplars_written, Relaxed);

    let mut problems: Vec<String> = Vec::new();
    if !dec.invalid.is_empty() {
        let mut s = format!(
            "invalid series: {} series ({} samples) were not written",
            dec.invalid.len(),
            invalid_samples
        );
        for inv in dec.invalid.iter().take(MAX_LISTED_INVALID) {
            let _ = write!(s, "\n  {}: {}", inv.labels_text, inv.reason);
        }
        if dec.invalid.len() > MAX_LISTED_INVALID {
            let _ = write!(s, "\n  … and {} more", dec.invalid.len() - MAX_LISTED_INVALID);
        }
        problems.push(s);
    }
    for reason in RejectReason::ALL {
        let rs: Vec<_> = report.rejected.iter().filter(|r| r.reason == reason).collect();
        if rs.is_empty() {
            continue;
        }
        let n: u64 = rs.iter().map(|r| r.count).sum();
        m.add_rejected(reason.label(), n);
        if reason == RejectReason::MaxSeries {
            st.store_metrics.limited(&store.name, "series");
        }
        // Floats and histograms of one reason are reported apart, each naming its first series.
        for (histograms, what) in [(false, "sample"), (true, "histogram sample")] {
            let part: Vec<_> = rs.iter().filter(|r| r.histograms == histograms).collect();
            let Some(first) = part.first() else { continue };
            let n: u64 = part.iter().map(|r| r.count).sum();
            let series =
                if first.batch_index < dec.len() { dec.get(first.batch_index).to_labels().to_string() } else { String::new() };
            problems.push(format!(
                "{}: {n} {what}{} not written, in {} series (first: {series} at timestamp {})",
                reason.as_str(),
                if n == 1 { "" } else { "s" },
                part.len(),
                first.first_t_ms
            ));
        }
    }
    if dec.invalid_histogram_count > 0 {
        m.add_rejected("invalid_histogram", dec.invalid_histogram_count);
        let mut s = format!("invalid histograms: {} histogram samples were not written", dec.invalid_histogram_count);
        for r in &dec.invalid_histograms {
            let _ = write!(s, "\n  {r}");
        }
        problems.push(s);
    }
    // Exemplars never fail a request (upstream's handler only logs and counts their errors): refused
    // ones are counted in `tessera_tsdb_exemplars_refused_total`, unreadable ones here.
    m.add_rejected("unreadable_exemplar", dec.unreadable_exemplars);
    if !dec.invalid_metadata.is_empty() {
        let mut s = format!("invalid metadata: {} entries were not stored", dec.invalid_metadata.len());
        for r in dec.invalid_metadata.iter().take(MAX_LISTED_INVALID) {
            let _ = write!(s, "\n  {r}");
        }
        problems.push(s);
    }
    if problems.is_empty() {
        return Outcome {
            status: 204,
            samples_written: report.samples_written,
            histograms_written: report.histograms_written,
            exemplars_written: report.exemplars_written,
            ..Outcome::default()
        };
    }
    let total = valid_samples + invalid_samples;
    let mut body = format!(
        "remote write partially failed: {} of {} samples and {} of {} histogram samples written\n",
        report.samples_written, total, report.histograms_written, dec.histograms
    );
    for p in problems {
        body.push_str(&p);
        body.push('\n');
    }
    Outcome {
        status: 400,
        samples_written: report.samples_written,
        histograms_written: report.histograms_written,
        exemplars_written: report.exemplars_written,
        body,
        v2: false,
        retry_after: None,
    }
}

/// Reads and discards up to `limit` bytes of `body` without holding them.
async fn drain(mut body: Body, limit: u64) {
    use axum::body::HttpBody;
    let mut seen = 0u64;
    while seen <= limit {
        match std::future::poll_fn(|cx| std::pin::Pin::new(&mut body).poll_frame(cx)).await {
            Some(Ok(frame)) => seen += frame.data_ref().map_or(0, |d| d.len() as u64),
            _ => break,
        }
    }
}
