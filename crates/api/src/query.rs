//! The PromQL endpoints: `/api/v1/query`, `/api/v1/query_range`, `/api/v1/format_query` and
//! `/api/v1/parse_query`, mirroring `query`, `queryRange`, `formatQuery` and `parseQuery` in Prometheus'
//! web/api/v1/api.go: same parameters, checks (in the same order), error types and messages.
//!
//! Results are written by hand rather than through serde because Prometheus' encoders
//! (web/api/v1/json_codec.go, util/jsonutil) have two timestamp spellings that serde cannot produce:
//! samples and points write `t/1000` with the millisecond fraction zero-padded to three digits
//! (`jsonutil.MarshalTimestamp`: `1435781451.780`), while scalars and strings go through Go's
//! `encoding/json` float encoding (`Scalar.MarshalJSON`: `1435781451.78`). Values are strings in
//! `strconv.FormatFloat(v, 'f', -1, 64)` form (`"NaN"`, `"+Inf"`, `"-Inf"`).
//!
//! Evaluation runs on tokio's blocking pool. The handler owns a [`CancelOnDrop`] guard: when the client
//! goes away hyper drops the handler's future, the guard sets the query's [`CancelToken`], and the
//! engine stops at its next check instead of burning CPU for nobody.

use crate::params::{parse_api_duration_ms, parse_limit, parse_time, parse_time_param, Params};
use crate::read::form;
use crate::response::{to_go_json, ApiError, ErrorType, LabelsJson};
use crate::AppState;
use tessera_promql::cache::CacheReport;
use tessera_promql::engine::tier::TierRequest;
use axum::body::Body;
use axum::extract::{Request, State};
use bytes::Bytes;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera_promql::engine::{
    CancelToken, Engine, EngineError, EngineOptions, QueryOptions, QueryResult, QueryStats, Value,
};

/// Upstream's cap on points per series of a range query (`queryRange`).
const MAX_POINTS_PER_SERIES: i64 = 11_000;

/// `GET|POST /api/v1/query`.
pub async fn query(State(st): State<Arc<AppState>>, req: Request) -> Response {
    match query_inner(st, req, false).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// `GET|POST /api/v1/query_range`.
pub async fn query_range(State(st): State<Arc<AppState>>, req: Request) -> Response {
    match query_inner(st, req, true).await {
        Ok(r) => r,
        Err(e) => e.into_response(),
    }
}

/// `GET|POST /api/v1/format_query`: the query through Prometheus' pretty printer (`expr.Pretty(0)`).
pub async fn format_query(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let p = match form(req).await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    match st.options.promql.parse(p.get("query")) {
        Ok(e) => crate::response::success(&tessera_promql::parser::pretty(&e), &[], &[]),
        Err(e) => ApiError::invalid_param("query", e).into_response(),
    }
}

/// `GET|POST /api/v1/parse_query`: the query's AST as JSON (upstream `translateAST`).
pub async fn parse_query(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let p = match form(req).await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    match st.options.promql.parse(p.get("query")) {
        Ok(e) => crate::response::success(&tessera_promql::parser::to_json(&e), &[], &[]),
        Err(e) => ApiError::invalid_param("query", e).into_response(),
    }
}

/// Sets the cancel token when dropped: the handler future is dropped when the client disconnects.
struct CancelOnDrop(CancelToken);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.cancel();
    }
}

/// What the request asked for, validated.
struct QueryParams {
    query: String,
    start_ms: i64,
    end_ms: i64,
    /// 0 for an instant query.
    step_ms: i64,
    limit: usize,
    timeout: Option<Duration>,
    lookback_ms: Option<i64>,
    stats: bool,
    /// `trace=1` (VictoriaMetrics' parameter): return the plan with per-node figures.
    trace: bool,
    /// `nocache=1` (VictoriaMetrics' parameter) or `Cache-Control: no-cache`: neither read nor fill the
    /// result cache.
    nocache: bool,
    /// `raw=1` or `tier=raw|auto|<duration>`: which downsampling tier the query reads.
    tier: TierRequest,
}

/// `raw=1` forces raw data; `tier=<duration>` a named downsampling tier (`tier=raw` and `tier=auto`
/// also work); neither: the planner's choice (see `tessera_promql::engine::tier`).
fn tier_param(p: &Params) -> Result<TierRequest, ApiError> {
    let raw = bool_param(p, "raw")?;
    let t = match p.get("tier") {
        "" | "auto" => TierRequest::Auto,
        "raw" => TierRequest::Raw,
        s => {
            let ms = parse_api_duration_ms(s).map_err(|e| ApiError::invalid_param("tier", e))?;
            if ms <= 0 {
                return Err(ApiError::invalid_param("tier", "a tier's resolution must be positive"));
            }
            TierRequest::Resolution(ms)
        }
    };
    match (raw, t) {
        (true, TierRequest::Resolution(_)) => Err(ApiError::invalid_param("tier", "raw=1 and a named tier exclude each other")),
        (true, _) => Ok(TierRequest::Raw),
        (false, t) => Ok(t),
    }
}

/// A boolean request parameter: empty, 0/false or 1/true.
fn bool_param(p: &Params, name: &str) -> Result<bool, ApiError> {
    match p.get(name) {
        "" | "0" | "false" => Ok(false),
        "1" | "true" => Ok(true),
        other => Err(ApiError::invalid_param(
            name,
            format!("cannot parse {} to a boolean (use 1 or 0)", tessera_model::labels::go_quote(other)),
        )),
    }
}

/// Parameter checks in the order of upstream `query` / `queryRange`.
fn parse_request(p: &Params, range: bool, now_ms: i64, align: bool) -> Result<QueryParams, ApiError> {
    let limit = parse_limit(p.get("limit")).map_err(|e| ApiError::invalid_param("limit", e))?;
    let (start_ms, end_ms, step_ms) = if range {
        let mut start = parse_time(p.get("start")).map_err(|e| ApiError::invalid_param("start", e))?;
        let mut end = parse_time(p.get("end")).map_err(|e| ApiError::invalid_param("end", e))?;
        if end < start {
            return Err(ApiError::invalid_param("end", "end timestamp must not be before start time"));
        }
        let step = parse_api_duration_ms(p.get("step")).map_err(|e| ApiError::invalid_param("step", e))?;
        if step <= 0 {
            return Err(ApiError::invalid_param(
                "step",
                "zero or negative query resolution step widths are not accepted. Try a positive integer",
            ));
        }
        // Opt-in alignment (server flag or `align_to_step=1`): start and end move down to multiples of
        // the step, so that requests with a moving end share their steps in the result cache.
        if align || bool_param(p, "align_to_step")? {
            start = start.saturating_sub(start.rem_euclid(step));
            end = end.saturating_sub(end.rem_euclid(step));
        }
        // For safety, limit the number of returned points per timeseries (as upstream).
        if (end - start) / step > MAX_POINTS_PER_SERIES {
            return Err(ApiError::bad_data(
                "exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)",
            ));
        }
        (start, end, step)
    } else {
        let t = parse_time_param(p, "time", now_ms).map_err(|e| ApiError::invalid_param("time", e))?;
        (t, t, 0)
    };
    let timeout = match p.get("timeout") {
        "" => None,
        to => {
            let ms = parse_api_duration_ms(to).map_err(|e| ApiError::invalid_param("timeout", e))?;
            if ms <= 0 {
                // Upstream's deadline has passed before `NewInstantQuery`/`NewRangeQuery` runs, whose
                // context error becomes `invalidParamError(err, "query")`.
                return Err(ApiError::invalid_param("query", "context deadline exceeded"));
            }
            Some(Duration::from_millis(ms as u64))
        }
    };
    // Upstream `extractQueryOpts`: a bad lookback delta is bad_data without the "invalid parameter" prefix.
    let lookback_ms = match p.get("lookback_delta") {
        "" => None,
        s => Some(
            parse_api_duration_ms(s)
                .map_err(|e| ApiError::bad_data(format!("error parsing lookback delta duration: {e}")))?,
        ),
    };
    let trace = bool_param(p, "trace")?;
    let nocache = bool_param(p, "nocache")?;
    let tier = tier_param(p)?;
    Ok(QueryParams {
        trace,
        nocache,
        tier,
        query: p.get("query").to_string(),
        start_ms,
        end_ms,
        step_ms,
        limit,
        timeout,
        lookback_ms,
        stats: !p.get("stats").is_empty(),
    })
}

/// Upstream `returnAPIError` (plus `invalidParamError(err, "query")` for what `NewInstantQuery` /
/// `NewRangeQuery` reject: parse errors and invalid expression types).
fn engine_error(e: EngineError) -> ApiError {
    match e {
        EngineError::BadData(msg) => ApiError::invalid_param("query", msg),
        EngineError::Canceled(_) => ApiError::new(ErrorType::Canceled, e.to_string()),
        EngineError::Timeout(_) => ApiError::new(ErrorType::Timeout, e.to_string()),
        EngineError::Storage(_) => ApiError::internal(e.to_string()),
        other => ApiError::new(ErrorType::Execution, other.to_string()),
    }
}

async fn query_inner(st: Arc<AppState>, req: Request, range: bool) -> Result<Response, ApiError> {
    // `Cache-Control: no-cache` bypasses the result cache, as `nocache=1` does.
    let no_cache_header = req
        .headers()
        .get_all(header::CACHE_CONTROL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|d| d.trim().eq_ignore_ascii_case("no-cache") || d.trim().eq_ignore_ascii_case("no-store"));
    let p = form(req).await?;
    let mut r = parse_request(&p, range, crate::now_ms(), st.options.align_to_step)?;
    r.nocache |= no_cache_header;
    let db = st.ready_queryable()?;
    let store = st.store();
    let store_limits = store.limits();
    let features = st.options.promql;
    let engine = Engine::new(EngineOptions {
        lookback_delta_ms: st.options.lookback_delta_ms,
        max_samples: store_limits.query_max_samples.unwrap_or(st.options.query_max_samples),
        timeout: Duration::from_millis(st.options.query_timeout_ms.max(0) as u64),
        enable_experimental: features.experimental_functions,
        delayed_name_removal: features.delayed_name_removal,
        use_start_timestamps: features.use_start_timestamps,
        ..EngineOptions::default()
    });
    // The request's timeout can only shorten the server's (upstream wraps the context twice).
    let timeout = r.timeout.map(|t| t.min(engine.opts.timeout));
    let cancel = CancelToken::new();
    let _guard = CancelOnDrop(cancel.clone());
    let qo = QueryOptions { lookback_delta_ms: r.lookback_ms, cancel, timeout, trace: r.trace, tier: r.tier };
    let started = Instant::now();
    // Upstream's `--query.max-concurrency`: beyond it a query waits for a slot, and the wait counts
    // toward its timeout (upstream's query queue, "query timed out in query queue").
    let wait = timeout.unwrap_or(engine.opts.timeout);
    let slot = match tokio::time::timeout(wait, st.query_gate.clone().acquire_owned()).await {
        Ok(Ok(permit)) => permit,
        Ok(Err(_)) => return Err(ApiError::new(ErrorType::Unavailable, "query engine is shutting down")),
        Err(_) => return Err(engine_error(EngineError::Timeout("query queue".into()))),
    };
    // The store's own concurrency limit, queued the same way.
    let store_slot = match store.query_gate() {
        None => None,
        Some(g) => match tokio::time::timeout(wait.saturating_sub(started.elapsed()), g.acquire_owned()).await {
            Ok(Ok(p)) => Some(p),
            Ok(Err(_)) => return Err(ApiError::new(ErrorType::Unavailable, "query engine is shutting down")),
            Err(_) => {
                st.store_metrics.limited(&store.name, "query_concurrency");
                return Err(engine_error(EngineError::Timeout("query queue".into())));
            }
        },
    };
    let qo = QueryOptions { timeout: Some(wait.saturating_sub(started.elapsed())), ..qo };
    let query = r.query.clone();
    let (start, end, step) = (r.start_ms, r.end_ms, r.step_ms);
    let cache = (range && !r.nocache).then(|| st.results_cache.clone());
    let res = on_query_pool(move || -> Result<(QueryResult, Option<CacheReport>), EngineError> {
        // The slot is the evaluation's, not the request's: a client that goes away frees it only when
        // the canceled evaluation has stopped.
        let _slot = (slot, store_slot);
        let expr = features.parse(&query).map_err(|e| EngineError::BadData(e.to_string()))?;
        let q: &dyn tessera_model::Queryable = &*db;
        match (range, cache) {
            (true, Some(c)) => {
                let (r, rep) = c.range(&engine, q, &expr, start, end, step, &qo, crate::now_ms())?;
                Ok((r, Some(rep)))
            }
            (true, None) => Ok((engine.range_expr(q, &expr, start, end, step, &qo)?, None)),
            (false, _) => Ok((engine.instant_expr(q, &expr, start, &qo)?, None)),
        }
    })
    .await
    .map_err(|e| ApiError::internal(format!("query task failed: {e}")))?
    .map_err(|e| {
        if matches!(e, EngineError::TooManySamples(_)) {
            st.store_metrics.limited(&store.name, "query_samples");
        }
        engine_error(e)
    })?;
    let elapsed = started.elapsed();

    let (QueryResult { mut value, mut warnings, infos, stats: samples, trace, tier_ms }, cache_report) = res;
    if r.limit > 0 {
        let truncated = match &mut value {
            Value::Vector(v) if v.len() > r.limit => {
                v.truncate(r.limit);
                true
            }
            Value::Matrix(m) if m.len() > r.limit => {
                m.truncate(r.limit);
                true
            }
            _ => false,
        };
        if truncated {
            warnings.push("results truncated due to limit".into());
        }
    }
    match p.get("stats") {
        "" | "true" | "all" => {}
        s => warnings.push(format!(
            "value {} for parameter \"stats\" is deprecated and will be rejected in the next major release, use \"true\" or \"all\"",
            tessera_model::labels::go_quote(s)
        )),
    }
    let stats = r.stats.then_some((elapsed, samples));
    // Sized for the answer up front (a matrix point is ~30 bytes): growing a large body copied it
    // several times over.
    // `rendered`: the text the result cache handed over; a matrix with enough goes out in frames, its text
    // uncopied.
    let (weight, size, rendered) = match &value {
        Value::Matrix(m) => (
            m.iter().map(json_weight).sum::<usize>(),
            m.iter().map(json_size).sum::<usize>(),
            m.iter().filter_map(|s| s.rendered.as_ref()).map(|r| r.len()).sum::<usize>(),
        ),
        Value::Vector(v) => (v.len() * 4, v.len() * 128, 0),
        _ => (0, 0, 0),
    };
    let want_trace = r.trace;
    let build = move || -> (Vec<Bytes>, usize) {
        let mut frames = Frames::default();
        // A large matrix goes out in frames (below): the body holds only what is written between them.
        // (Only a matrix that the parallel writer splits: one series, or one thread, is written into the body
        // sized below.)
        let split = matches!(&value, Value::Matrix(m) if splits_in_parallel(m));
        let framed = matches!(value, Value::Matrix(_)) && (rendered >= FRAMES_MIN_RENDERED || (split && weight >= PARALLEL_JSON_POINTS));
        let mut body = Vec::with_capacity(256 + if framed { 0 } else { size.min(1 << 30) });
        body.extend_from_slice(br#"{"status":"success","data":"#);
        match value {
            Value::Matrix(m) if framed => {
                body.extend_from_slice(br#"{"resultType":"matrix","result":["#);
                frames.cur = body;
                if rendered >= FRAMES_MIN_RENDERED {
                    write_matrix_frames(&mut frames, m);
                } else {
                    write_matrix_in_frames(&mut frames, &m);
                }
                body = std::mem::take(&mut frames.cur);
                body.push(b']');
                write_query_data_end(&mut body, stats);
            }
            value => write_query_data(&mut body, &value, stats),
        }
        if !warnings.is_empty() {
            body.extend_from_slice(br#","warnings":"#);
            body.extend_from_slice(&to_go_json(&warnings));
        }
        if !infos.is_empty() {
            body.extend_from_slice(br#","infos":"#);
            body.extend_from_slice(&to_go_json(&infos));
        }
        if want_trace {
            // Outside `data`, as VictoriaMetrics places it: the plan, each node with where it ran and what
            // it cost (see tessera_promql::engine::plan), and what the result cache answered (`null` plan:
            // every step came from the cache).
            let mut js = String::new();
            js.push_str(&format!(r#","trace":{{"duration_ms":{:.3}"#, elapsed.as_secs_f64() * 1000.0));
            // The downsampling tier the answer came from (`null`: raw data).
            match tier_ms {
                Some(ms) => js.push_str(&format!(r#","tier":"{}""#, tessera_promql::engine::tier::fmt_res(ms))),
                None => js.push_str(r#","tier":null"#),
            }
            if let Some(c) = &cache_report {
                js.push_str(r#","cache":"#);
                c.write_json(&mut js);
            }
            js.push_str(r#","plan":"#);
            match trace {
                Some(t) => t.write_json(&mut js),
                None => js.push_str("null"),
            }
            js.push('}');
            body.extend_from_slice(js.as_bytes());
        }
        body.push(b'}');
        frames.cur = body;
        frames.finish()
    };
    // A large answer is written on the engine's worker pool (in parallel, see `write_matrix_series`),
    // not on the server's I/O threads.
    let (frames, len) = if weight >= PARALLEL_JSON_POINTS {
        on_query_pool(build).await.map_err(|e| ApiError::internal(format!("writing the answer failed: {e}")))?
    } else {
        build()
    };
    let mut resp = if frames.len() == 1 {
        (StatusCode::OK, frames.into_iter().next().expect("one frame")).into_response()
    } else {
        let mut r = Body::from_stream(FramesStream(frames.into())).into_response();
        r.headers_mut().insert(header::CONTENT_LENGTH, HeaderValue::from(len));
        r
    };
    resp.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(resp)
}

/// Runs a query's evaluation on the engine's worker pool (rayon's) rather than on a blocking thread that
/// would hand each shard's work to that pool and wait: the shard loops then start on the worker already
/// running the query, and a point query costs one hand-over instead of three (thread switches were
/// over half of the server's CPU under 16 clients of point queries). A panic comes back as an error.
async fn on_query_pool<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T, String> {
    let (tx, rx) = tokio::sync::oneshot::channel();
    rayon::spawn(move || {
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        let _ = tx.send(r);
    });
    match rx.await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(p)) => Err(match (p.downcast_ref::<&str>(), p.downcast_ref::<String>()) {
            (Some(m), _) => format!("panicked: {m}"),
            (_, Some(m)) => format!("panicked: {m}"),
            _ => "panicked".into(),
        }),
        Err(_) => Err("the evaluation went away".into()),
    }
}

/// Upstream `QueryData`: `{"resultType":…,"result":…[,"stats":…]}`.
pub fn write_query_data(out: &mut Vec<u8>, value: &Value, stats: Option<(Duration, QueryStats)>) {
    let typ = match value {
        Value::Scalar { .. } => "scalar",
        Value::String { .. } => "string",
        Value::Vector(_) => "vector",
        Value::Matrix(_) => "matrix",
    };
    out.extend_from_slice(br#"{"resultType":""#);
    out.extend_from_slice(typ.as_bytes());
    out.extend_from_slice(br#"","result":"#);
    write_value(out, value);
    write_query_data_end(out, stats);
}

/// What follows `QueryData`'s result: the stats, if asked for, and the closing brace.
fn write_query_data_end(out: &mut Vec<u8>, stats: Option<(Duration, QueryStats)>) {
    if let Some((d, s)) = stats {
        // Upstream `stats.BuiltinStats`: timings (seconds) and samples (see `QueryStats`; no per-step
        // series, which upstream gives only with --enable-feature=promql-per-step-stats).
        let secs = format_go_float_json(d.as_secs_f64());
        out.extend_from_slice(
            format!(
                r#","stats":{{"timings":{{"evalTotalTime":{secs},"resultSortTime":0,"queryPreparationTime":0,"innerEvalTime":{secs},"execQueueTime":0,"execTotalTime":{secs}}},"samples":{{"totalQueryableSamples":{},"samplesRead":{},"peakSamples":{}}}}}"#,
                s.total_queryable_samples, s.samples_read, s.peak_samples
            )
            .as_bytes(),
        );
    }
    out.push(b'}');
}

/// The `result` field for a value, as Prometheus' encoders write it.
pub fn write_value(out: &mut Vec<u8>, value: &Value) {
    match value {
        Value::Scalar { t_ms, v } => {
            // Scalar.MarshalJSON: encoding/json of [float64(T)/1000, FormatFloat(V)].
            out.push(b'[');
            out.extend_from_slice(format_go_float_json(*t_ms as f64 / 1000.0).as_bytes());
            out.extend_from_slice(b",\"");
            out.extend_from_slice(format_value(*v).as_bytes());
            out.extend_from_slice(b"\"]");
        }
        Value::String { t_ms, v } => {
            out.push(b'[');
            out.extend_from_slice(format_go_float_json(*t_ms as f64 / 1000.0).as_bytes());
            out.push(b',');
            out.extend_from_slice(&to_go_json(v));
            out.push(b']');
        }
        Value::Vector(samples) => {
            out.push(b'[');
            for (i, s) in samples.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                out.extend_from_slice(br#"{"metric":"#);
                out.extend_from_slice(&to_go_json(&LabelsJson(&s.labels)));
                // marshalSampleJSON: a histogram sample is `"histogram":[t,{…}]` instead of `"value"`.
                match &s.h {
                    Some(h) => {
                        out.extend_from_slice(br#","histogram":["#);
                        out.extend_from_slice(format_timestamp(s.t_ms).as_bytes());
                        out.push(b',');
                        write_histogram(out, h);
                        out.push(b']');
                    }
                    None => {
                        out.extend_from_slice(br#","value":"#);
                        write_point(out, s.t_ms, s.v);
                    }
                }
                out.push(b'}');
            }
            out.push(b']');
        }
        Value::Matrix(series) => {
            out.push(b'[');
            write_matrix_series(out, series);
            out.push(b']');
        }
    }
}

/// A matrix's points (a histogram counts as 8) at or above which it is written by several threads.
pub const PARALLEL_JSON_POINTS: usize = 1 << 16;

/// The series of a matrix, comma-separated: in one pass for a small matrix, else in contiguous groups of
/// about equal points written on the engine's worker pool (each group into its own buffer, which are then
/// joined in order), so a large answer's JSON — ~50 ns a point, most of what a cached dashboard query
/// costs — takes both cores. The bytes are the same either way.
fn write_matrix_series(out: &mut Vec<u8>, series: &[tessera_promql::engine::MatrixSeries]) {
    let total: usize = series.iter().map(json_weight).sum();
    if total < PARALLEL_JSON_POINTS || !splits_in_parallel(series) {
        write_series_run(out, series, true);
        return;
    }
    write_in_groups(out, series, parallel_groups());
}

/// Whether the parallel writer splits `series` at all: there are two threads and two series to share out.
fn splits_in_parallel(series: &[tessera_promql::engine::MatrixSeries]) -> bool {
    series.len() >= 2 && rayon::current_num_threads() >= 2
}

/// How many groups the parallel writer makes: a few per thread, so that one group of long series does not
/// leave the others idle.
fn parallel_groups() -> usize {
    rayon::current_num_threads() * 4
}

/// A series' share of the work of writing a matrix's JSON, in points to format (a histogram counts as
/// 8, the labels as 8; points the result cache kept rendered are copied, 64 bytes counting as one).
fn json_weight(s: &tessera_promql::engine::MatrixSeries) -> usize {
    let points = match &s.rendered {
        Some(text) => text.len() / 64,
        None => s.points.len(),
    };
    points + 8 * s.histograms.len() + 8
}

/// About how many bytes a series' JSON takes, erring high (a buffer that falls short is grown by copying
/// it; room left unused is never touched): a formatted point up to ~40 (`,[1795461000,"0.0123456789012345"]`
/// is 35, a millisecond timestamp adds 4), a histogram ~320.
fn json_size(s: &tessera_promql::engine::MatrixSeries) -> usize {
    let labels: usize = s.labels.iter().map(|l| l.name.len() + l.value.len() + 6).sum();
    let points = match &s.rendered {
        Some(text) => text.len() + 16,
        None => s.points.len() * 40,
    };
    32 + labels + points + 320 * s.histograms.len()
}

/// [`write_matrix_series`]' parallel path: `series` in about `groups` contiguous groups of equal points.
fn write_in_groups(out: &mut Vec<u8>, series: &[tessera_promql::engine::MatrixSeries], groups: usize) {
    let parts = written_in_groups(series, groups);
    out.reserve(parts.iter().map(Vec::len).sum());
    for p in &parts {
        out.extend_from_slice(p);
    }
}

/// [`write_matrix_series`] for a large matrix of an answer: the groups' buffers become frames of the body
/// as they are, instead of being joined into one buffer first (a copy of the whole answer, into a buffer
/// that was sized by estimate and, when the estimate fell short, grown by copying again: with the page
/// faults of the fresh memory, ~40% of the CPU of `rate(node_disk_io_time_seconds_total[5m])` over 3 h,
/// 340,000 points, 10 MB). The bytes are [`write_series_run`]'s. Answers frame only a matrix that
/// [`splits_in_parallel`]; any other is written whole into the body, sized up front.
fn write_matrix_in_frames(out: &mut Frames, series: &[tessera_promql::engine::MatrixSeries]) {
    for part in written_in_groups(series, parallel_groups()) {
        out.push(Bytes::from(part));
    }
}

/// `series` written in about `groups` contiguous groups of equal points on the worker pool, each into its
/// own buffer; their concatenation is [`write_series_run`]'s bytes.
fn written_in_groups(series: &[tessera_promql::engine::MatrixSeries], groups: usize) -> Vec<Vec<u8>> {
    use rayon::prelude::*;
    let total: usize = series.iter().map(json_weight).sum();
    let per_group = total.div_ceil(groups.max(1)).max(1);
    let mut groups: Vec<&[tessera_promql::engine::MatrixSeries]> = Vec::new();
    let (mut from, mut acc) = (0, 0);
    for (i, s) in series.iter().enumerate() {
        acc += json_weight(s);
        if acc >= per_group {
            groups.push(&series[from..=i]);
            (from, acc) = (i + 1, 0);
        }
    }
    if from < series.len() {
        groups.push(&series[from..]);
    }
    groups
        .par_iter()
        .enumerate()
        .map(|(g, run)| {
            let mut b = Vec::with_capacity(run.iter().map(json_size).sum::<usize>());
            write_series_run(&mut b, run, g == 0);
            b
        })
        .collect()
}

/// `run`'s series as `{"metric":…,"values":…,"histograms":…}`, each preceded by a comma unless it is
/// the matrix's first.
fn write_series_run(out: &mut Vec<u8>, run: &[tessera_promql::engine::MatrixSeries], starts_matrix: bool) {
    for (i, s) in run.iter().enumerate() {
        write_series_head(out, s, i == 0 && starts_matrix);
        // marshalSeriesJSON omits "values" for a series without float points.
        match &s.rendered {
            // From the result cache, already written (`render_cached_point`: each point after a comma,
            // dropped before the first).
            Some(text) if text.points > 0 => {
                out.extend_from_slice(br#","values":["#);
                for part in text.after_first_byte() {
                    out.extend_from_slice(&part);
                }
                out.push(b']');
            }
            _ => {
                for (j, &(t, v)) in s.points.iter().enumerate() {
                    out.extend_from_slice(if j == 0 { br#","values":["# as &[u8] } else { b"," });
                    write_point(out, t, v);
                }
                if !s.points.is_empty() {
                    out.push(b']');
                }
            }
        }
        write_series_tail(out, s);
    }
}

/// A series' opening, `{"metric":{…}`, after the comma that separates it from the one before unless it is
/// the matrix's first.
fn write_series_head(out: &mut Vec<u8>, s: &tessera_promql::engine::MatrixSeries, first: bool) {
    if !first {
        out.push(b',');
    }
    out.extend_from_slice(br#"{"metric":"#);
    out.extend_from_slice(&to_go_json(&LabelsJson(&s.labels)));
}

/// A series' `"histograms"` (omitted for a series without histogram points, `marshalHPointJSON` each)
/// and its closing brace.
fn write_series_tail(out: &mut Vec<u8>, s: &tessera_promql::engine::MatrixSeries) {
    for (j, (t, h)) in s.histograms.iter().enumerate() {
        out.extend_from_slice(if j == 0 { br#","histograms":["# as &[u8] } else { b"," });
        out.push(b'[');
        out.extend_from_slice(format_timestamp(*t).as_bytes());
        out.push(b',');
        write_histogram(out, h);
        out.push(b']');
    }
    if !s.histograms.is_empty() {
        out.push(b']');
    }
    out.push(b'}');
}

/// Rendered text (bytes) in a matrix answer from which it is sent in frames rather than copied into one
/// buffer.
const FRAMES_MIN_RENDERED: usize = 64 << 10;

/// A body sent frame by frame (its length is known: `Content-Length` is set).
struct FramesStream(std::collections::VecDeque<Bytes>);

impl futures_core::Stream for FramesStream {
    type Item = Result<Bytes, std::convert::Infallible>;

    fn poll_next(mut self: std::pin::Pin<&mut Self>, _: &mut std::task::Context<'_>) -> std::task::Poll<Option<Self::Item>> {
        std::task::Poll::Ready(self.0.pop_front().map(Ok))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.0.len(), Some(self.0.len()))
    }
}

/// A response body in pieces: bytes written here, and whole buffers handed over as they are.
#[derive(Default)]
struct Frames {
    done: Vec<Bytes>,
    cur: Vec<u8>,
    len: usize,
}

impl Frames {
    /// Pieces shorter than this are copied into the current frame rather than sent on their own.
    const MIN_FRAME: usize = 4096;

    /// Appends `b` without copying it (unless it is short).
    fn push(&mut self, b: Bytes) {
        if b.len() < Self::MIN_FRAME {
            self.cur.extend_from_slice(&b);
            return;
        }
        self.flush();
        self.len += b.len();
        self.done.push(b);
    }

    fn flush(&mut self) {
        if !self.cur.is_empty() {
            let v = std::mem::take(&mut self.cur);
            self.len += v.len();
            self.done.push(Bytes::from(v));
        }
    }

    fn finish(mut self) -> (Vec<Bytes>, usize) {
        self.flush();
        (self.done, self.len)
    }
}

/// [`write_series_run`] for a whole matrix whose series the result cache handed over rendered: their
/// text goes into the body as it is, each series' buffer a frame of its own, so that a large cached answer
/// (a dashboard panel's 20 MB) is never copied on its way to the socket (it was copied twice, into a group's
/// buffer and into the body, ~a fifth of what a refresh cost). Series without text are written as usual.
/// The bytes are [`write_series_run`]'s.
fn write_matrix_frames(out: &mut Frames, series: Vec<tessera_promql::engine::MatrixSeries>) {
    for (i, mut s) in series.into_iter().enumerate() {
        match s.rendered.take() {
            Some(text) if text.points > 0 => {
                write_series_head(&mut out.cur, &s, i == 0);
                out.cur.extend_from_slice(br#","values":["#);
                // The text starts with the comma before its first point; its parts go out as they are
                // (shared with the cache), short ones copied.
                for part in text.after_first_byte() {
                    out.push(part);
                }
                out.cur.push(b']');
                write_series_tail(&mut out.cur, &s);
            }
            _ => write_series_run(&mut out.cur, std::slice::from_ref(&s), i == 0),
        }
    }
}

/// The result cache's renderer ([`tessera_promql::cache::PointRenderer`]): a matrix point as
/// [`write_point`] writes it, after the comma that separates it from the one before (the writer drops
/// the series' first comma).
pub fn render_cached_point(out: &mut Vec<u8>, t_ms: i64, v: f64) {
    out.push(b',');
    write_point(out, t_ms, v);
}

/// `marshalFPointJSON`: `[<timestamp>,"<value>"]`, the value as `jsonutil.MarshalFloat` writes it.
fn write_point(out: &mut Vec<u8>, t_ms: i64, v: f64) {
    out.push(b'[');
    append_timestamp(out, t_ms);
    out.push(b',');
    write_marshal_float(out, v);
    out.push(b']');
}

/// [`format_timestamp`] appended to `out` without allocating (a matrix writes one per point).
fn append_timestamp(out: &mut Vec<u8>, t_ms: i64) {
    let a = t_ms.unsigned_abs();
    let (secs, frac) = (a / 1000, a % 1000);
    if t_ms < 0 {
        out.push(b'-');
    }
    // Digits by hand: `write!` through `fmt` cost more than the rest of a matrix point.
    tessera_model::gofloat::append_u64(out, secs);
    if frac != 0 {
        out.extend_from_slice(&[b'.', b'0' + (frac / 100) as u8, b'0' + (frac / 10 % 10) as u8, b'0' + (frac % 10) as u8]);
    }
}

/// `jsonutil.MarshalFloat`: quoted, `strconv.AppendFloat` with `'f'`, or `'e'` when the magnitude is
/// below 1e-6 or at least 1e21 (`"1e-07"`, `"1e+21"`), like Prometheus' vector and matrix values
/// (scalars use `'f'` always, see [`write_value`]).
fn write_marshal_float(out: &mut Vec<u8>, v: f64) {
    let a = v.abs();
    out.push(b'"');
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        tessera_model::gofloat::append_e(out, v)
    } else {
        tessera_model::gofloat::append_f(out, v)
    }
    out.push(b'"');
}

/// `jsonutil.MarshalHistogram`: `{"count":"…","sum":"…","buckets":[[boundaries,"lower","upper","count"],…]}`
/// with every non-empty bucket in `AllBucketIterator` order (negative buckets from the lowest, the zero
/// bucket, positive buckets); `boundaries` is 0 (upper inclusive), 1 (lower inclusive), 2 (neither)
/// or 3 (both); no `"buckets"` key when all are empty.
fn write_histogram(out: &mut Vec<u8>, h: &tessera_model::FloatHistogram) {
    out.extend_from_slice(br#"{"count":"#);
    write_marshal_float(out, h.count);
    out.extend_from_slice(br#","sum":"#);
    write_marshal_float(out, h.sum);
    let mut found = false;
    for b in h.all_bucket_iter() {
        if b.count == 0.0 {
            continue;
        }
        out.extend_from_slice(if found { b"," as &[u8] } else { br#","buckets":["# });
        found = true;
        let boundaries = match (b.lower_inclusive, b.upper_inclusive) {
            (true, true) => b'3',
            (true, false) => b'1',
            (false, true) => b'0',
            (false, false) => b'2',
        };
        out.push(b'[');
        out.push(boundaries);
        out.push(b',');
        write_marshal_float(out, b.lower);
        out.push(b',');
        write_marshal_float(out, b.upper);
        out.push(b',');
        write_marshal_float(out, b.count);
        out.push(b']');
    }
    if found {
        out.push(b']');
    }
    out.push(b'}');
}

/// `jsonutil.MarshalTimestamp`: seconds, then the millisecond fraction zero-padded to three digits
/// (kept even when it ends in zeros: 1500 → `1.500`), no fraction when it is zero.
pub fn format_timestamp(t_ms: i64) -> String {
    let neg = t_ms < 0;
    let a = t_ms.unsigned_abs();
    let (secs, frac) = (a / 1000, a % 1000);
    let sign = if neg { "-" } else { "" };
    if frac == 0 { format!("{sign}{secs}") } else { format!("{sign}{secs}.{frac:03}") }
}

/// `strconv.FormatFloat(v, 'f', -1, 64)`: `NaN`, `+Inf`, `-Inf`, else the shortest round-trip decimal.
pub fn format_value(v: f64) -> String {
    tessera_promql::parser::format_float_f(v)
}

/// How Go's `encoding/json` writes a float64.
pub fn format_go_float_json(f: f64) -> String {
    tessera_model::gofloat::format_json(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_matrix_written_in_parallel_groups_is_the_same_bytes() {
        use tessera_model::{labels, FloatHistogram};
        use tessera_promql::engine::MatrixSeries;
        let h = Arc::new(FloatHistogram { count: 3.0, sum: 1.5, ..FloatHistogram::default() });
        let mut series = Vec::new();
        for i in 0..300i64 {
            let n = match i % 7 {
                0 => 0,
                1 => 1,
                2 => 2000,
                _ => (i * 13 % 97) as usize,
            };
            series.push(MatrixSeries {
                labels: labels!("__name__" => "m", "i" => &*i.to_string(), "q" => "a\"b"),
                points: (0..n as i64).map(|k| (k * 15_000 + i, (k as f64 * 0.1 + i as f64).sqrt() - 3.0)).collect(),
                histograms: if i % 5 == 0 { vec![(i * 1000, h.clone())] } else { vec![] },
                rendered: None,
            });
        }
        let mut plain = Vec::new();
        write_series_run(&mut plain, &series, true);
        assert!(serde_json::from_slice::<serde_json::Value>(&[b"[", &plain[..], b"]"].concat()).is_ok());
        for groups in [1, 2, 3, 7, 64, 299, 300, 5000] {
            let mut par = Vec::new();
            write_in_groups(&mut par, &series, groups);
            assert!(par == plain, "{groups} groups");
        }
        // Through write_value: the large matrix takes the parallel path where there are threads.
        let mut via = Vec::new();
        write_value(&mut via, &Value::Matrix(series.clone()));
        assert!(via == [b"[", &plain[..], b"]"].concat());
        // As frames of an answer (the groups' buffers handed over): the same bytes, in several frames.
        let mut frames = Frames::default();
        write_matrix_in_frames(&mut frames, &series);
        let (parts, len) = frames.finish();
        assert!(parts.concat() == plain && len == plain.len());
        assert!(rayon::current_num_threads() < 2 || parts.len() > 1, "{} frames", parts.len());
        for few in [&series[..0], &series[..1], &series[..2]] {
            let mut f = Frames::default();
            write_matrix_in_frames(&mut f, few);
            let mut b = Vec::new();
            write_series_run(&mut b, few, true);
            assert!(f.finish().0.concat() == b);
            let mut a = Vec::new();
            write_in_groups(&mut a, few, 8);
            let mut b = Vec::new();
            write_series_run(&mut b, few, true);
            assert!(a == b);
        }
    }

    #[test]
    fn a_matrix_sent_in_frames_is_the_same_bytes() {
        use tessera_model::{labels, FloatHistogram};
        use tessera_promql::engine::MatrixSeries;
        let h = Arc::new(FloatHistogram { count: 3.0, sum: 1.5, ..FloatHistogram::default() });
        // Series with text as the result cache hands it over (long and short, with histograms), without
        // text, and with text but no float points.
        let series: Vec<MatrixSeries> = (0..40i64)
            .map(|i| {
                let n = [0usize, 1, 3000, 200][i as usize % 4];
                let mut points: Vec<(i64, f64)> = (0..n as i64).map(|k| (k * 15_000 + i, k as f64 / 7.0 - i as f64)).collect();
                // The text in parts as the cache shares them: of several sizes, a first one of one byte
                // (the comma to drop) for some, empty ones between; `points` then empty.
                let rendered = (i % 3 != 0).then(|| {
                    let mut t = Vec::new();
                    for &(ts, v) in &points {
                        render_cached_point(&mut t, ts, v);
                    }
                    let t = Bytes::from(t);
                    let mut parts = Vec::new();
                    let mut at = 0;
                    for size in [if i % 2 == 0 { 1 } else { 0 }, 0, 5000, 17, 0, 9000].into_iter().cycle() {
                        if at >= t.len() {
                            break;
                        }
                        let e = (at + size).min(t.len());
                        parts.push(t.slice(at..e));
                        at = e;
                    }
                    tessera_promql::engine::Rendered { parts, points: std::mem::take(&mut points).len() }
                });
                MatrixSeries {
                    labels: labels!("__name__" => "m", "i" => &*i.to_string()),
                    points,
                    histograms: if i % 5 == 0 { vec![(i * 1000, h.clone())] } else { vec![] },
                    rendered,
                }
            })
            .collect();
        let mut plain = Vec::new();
        write_series_run(&mut plain, &series, true);
        for from in [0, 1, 2, 39] {
            let mut f = Frames::default();
            f.cur.extend_from_slice(b"[");
            write_matrix_frames(&mut f, series[from..].to_vec());
            f.cur.push(b']');
            let (frames, len) = f.finish();
            let body = frames.concat();
            assert_eq!(len, body.len());
            let mut want = b"[".to_vec();
            write_series_run(&mut want, &series[from..], true);
            want.push(b']');
            assert!(body == want, "from {from}");
            assert!(from == 39 || frames.len() > 2, "the long texts are frames of their own");
        }
        assert!(plain.len() > 100_000);
    }

    #[test]
    fn timestamps_like_marshal_timestamp() {
        assert_eq!(format_timestamp(1435781451781), "1435781451.781");
        assert_eq!(format_timestamp(1435781451780), "1435781451.780");
        assert_eq!(format_timestamp(1435781451000), "1435781451");
        assert_eq!(format_timestamp(1005), "1.005");
        assert_eq!(format_timestamp(50), "0.050");
        assert_eq!(format_timestamp(0), "0");
        assert_eq!(format_timestamp(-1500), "-1.500");
        // The appending form writes the same bytes.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut cases = vec![i64::MIN, i64::MAX, -999, -1000, -1, 0, 1, 999, 1000, 1001, 1435781451781];
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            cases.push(x as i64 >> (x % 50));
        }
        for t in cases {
            let mut out = Vec::new();
            super::append_timestamp(&mut out, t);
            assert_eq!(String::from_utf8(out).expect("ascii"), format_timestamp(t), "{t}");
        }
    }

    #[test]
    fn values_like_format_float() {
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::INFINITY), "+Inf");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(1.0), "1");
        assert_eq!(format_value(0.1), "0.1");
        assert_eq!(format_value(1e21), "1000000000000000000000");
        assert_eq!(format_value(1e-7), "0.0000001");
        assert_eq!(format_value(-0.0), "-0");
    }

    #[test]
    fn vector_and_matrix_values_like_marshal_float() {
        // Checked against Prometheus 3.14: `vector(1e-7)` is "1e-07", `vector(1e21)` "1e+21"; a scalar
        // keeps the 'f' form ("0.0000001").
        let mut out = Vec::new();
        write_point(&mut out, 1000, 1e-7);
        assert_eq!(String::from_utf8_lossy(&out), r#"[1,"1e-07"]"#);
        out.clear();
        write_point(&mut out, 1000, 1e21);
        assert_eq!(String::from_utf8_lossy(&out), r#"[1,"1e+21"]"#);
        out.clear();
        write_point(&mut out, 1500, 0.5);
        assert_eq!(String::from_utf8_lossy(&out), r#"[1.500,"0.5"]"#);
        out.clear();
        write_value(&mut out, &Value::Scalar { t_ms: 1000, v: 1e-7 });
        assert_eq!(String::from_utf8_lossy(&out), r#"[1,"0.0000001"]"#);
    }

    #[test]
    fn histogram_samples_like_marshal_histogram() {
        use std::sync::Arc;
        use tessera_model::{FloatHistogram, Labels, Span};
        use tessera_promql::engine::{MatrixSeries, VectorSample};
        // schema 0, zero bucket 2 of width 0.001, positive buckets (0.5,1]:1 (1,2]:2, negative
        // [-2,-1):2 [-1,-0.5):1, as upstream's jsonutil test data lays them out.
        let h = FloatHistogram {
            schema: 0,
            zero_threshold: 0.001,
            zero_count: 2.0,
            count: 8.0,
            sum: 10.0,
            positive_spans: vec![Span::new(0, 2)],
            positive_buckets: vec![1.0, 2.0],
            negative_spans: vec![Span::new(0, 2)],
            negative_buckets: vec![1.0, 2.0],
            ..FloatHistogram::default()
        };
        let h = Arc::new(h);
        let labels = Labels::from_pairs(vec![("__name__".to_string(), "h".to_string())]);
        let mut out = Vec::new();
        write_value(&mut out, &Value::Vector(vec![VectorSample { labels: labels.clone(), t_ms: 1500, v: 0.0, h: Some(h.clone()) }]));
        let want_h = r#"{"count":"8","sum":"10","buckets":[[1,"-2","-1","2"],[1,"-1","-0.5","1"],[3,"-0.001","0.001","2"],[0,"0.5","1","1"],[0,"1","2","2"]]}"#;
        assert_eq!(String::from_utf8_lossy(&out), format!(r#"[{{"metric":{{"__name__":"h"}},"histogram":[1.500,{want_h}]}}]"#));
        out.clear();
        let empty = Arc::new(FloatHistogram::default());
        write_value(
            &mut out,
            &Value::Matrix(vec![MatrixSeries {
                labels,
                points: vec![(1000, 1.0)],
                histograms: vec![(2000, h), (3000, empty)],
                rendered: None,
            }]),
        );
        assert_eq!(
            String::from_utf8_lossy(&out),
            format!(r#"[{{"metric":{{"__name__":"h"}},"values":[[1,"1"]],"histograms":[[2,{want_h}],[3,{{"count":"0","sum":"0"}}]]}}]"#)
        );
    }

    #[test]
    fn go_json_floats() {
        assert_eq!(format_go_float_json(1435781451.78), "1435781451.78");
        assert_eq!(format_go_float_json(0.0), "0");
        // Go 1.26 json.Marshal(1e-7) is "1e-7": encoding/json shortens a negative two-digit exponent.
        assert_eq!(format_go_float_json(1e-7), "1e-7");
        assert_eq!(format_go_float_json(1.5e21), "1.5e+21");
        assert_eq!(format_go_float_json(1e100), "1e+100");
    }
}

#[cfg(test)]
mod http_tests {
    use crate::{router, ApiOptions, AppState};
    use axum::body::Body;
    use axum::http::{header, Request, StatusCode};
    use axum::Router;
    use std::collections::BTreeMap;
    use tessera_model::{labels, Sample};
    use tower::ServiceExt;

    /// 2015-07-01T20:10:30.781Z, the start of the range example in Prometheus' docs/querying/api.md.
    const T0: i64 = 1_435_781_430_781;

    /// A router over a fresh database holding the docs' `up` series: `prometheus` is 1 throughout,
    /// `node` is 0, 0 then 1, at T0, T0+15s, T0+30s.
    fn app_with(opts: ApiOptions) -> (Router, tempfile::TempDir) {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = tessera_tsdb::Db::open(dir.path(), tessera_tsdb::Options { shards: 1, background: false, ..Default::default() })
            .expect("open db");
        let mut app = db.appender();
        let pts = |vs: [f64; 3]| -> Vec<Sample> { vs.iter().enumerate().map(|(i, &v)| Sample { t: T0 + 15_000 * i as i64, v }).collect() };
        app.add(labels!("__name__" => "up", "instance" => "localhost:9090", "job" => "prometheus"), &pts([1.0, 1.0, 1.0]));
        app.add(labels!("__name__" => "up", "instance" => "localhost:9100", "job" => "node"), &pts([0.0, 0.0, 1.0]));
        app.commit().expect("commit");
        let st = AppState::new(opts, BTreeMap::new());
        st.set_db(db);
        (router(st), dir)
    }

    fn app() -> (Router, tempfile::TempDir) {
        app_with(ApiOptions::default())
    }

    async fn send(app: &Router, req: Request<Body>) -> (StatusCode, String) {
        let resp = app.clone().oneshot(req).await.expect("infallible");
        let status = resp.status();
        if status == StatusCode::OK {
            assert_eq!(resp.headers()[header::CONTENT_TYPE], "application/json");
        }
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body");
        (status, String::from_utf8(body.to_vec()).expect("utf8"))
    }

    async fn get(app: &Router, uri: &str) -> (StatusCode, String) {
        send(app, Request::get(uri).body(Body::empty()).expect("request")).await
    }

    async fn post(app: &Router, uri: &str, form: &str) -> (StatusCode, String) {
        let req = Request::post(uri)
            .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
            .body(Body::from(form.to_string()))
            .expect("request");
        send(app, req).await
    }

    #[tokio::test]
    async fn instant_query_matches_the_docs_example() {
        let (app, _d) = app();
        let want = concat!(
            r#"{"status":"success","data":{"resultType":"vector","result":["#,
            r#"{"metric":{"__name__":"up","instance":"localhost:9090","job":"prometheus"},"value":[1435781451.781,"1"]},"#,
            r#"{"metric":{"__name__":"up","instance":"localhost:9100","job":"node"},"value":[1435781451.781,"0"]}]}}"#
        );
        let got = get(&app, "/api/v1/query?query=up&time=2015-07-01T20:10:51.781Z").await;
        assert_eq!(got, (StatusCode::OK, want.to_string()));
        // Same through a POST form body, and with the time as float seconds.
        assert_eq!(post(&app, "/api/v1/query", "query=up&time=1435781451.781").await, (StatusCode::OK, want.to_string()));
    }

    #[tokio::test]
    async fn range_query_matches_the_docs_example() {
        let (app, _d) = app();
        let want = concat!(
            r#"{"status":"success","data":{"resultType":"matrix","result":["#,
            r#"{"metric":{"__name__":"up","instance":"localhost:9090","job":"prometheus"},"values":[[1435781430.781,"1"],[1435781445.781,"1"],[1435781460.781,"1"]]},"#,
            r#"{"metric":{"__name__":"up","instance":"localhost:9100","job":"node"},"values":[[1435781430.781,"0"],[1435781445.781,"0"],[1435781460.781,"1"]]}]}}"#
        );
        let uri = "/api/v1/query_range?query=up&start=2015-07-01T20:10:30.781Z&end=2015-07-01T20:11:00.781Z&step=15s";
        assert_eq!(get(&app, uri).await, (StatusCode::OK, want.to_string()));
        // Step as float seconds, parameters split between body and URL.
        let (s, b) = post(&app, "/api/v1/query_range?step=15", "query=up&start=1435781430.781&end=1435781460.781").await;
        assert_eq!((s, b.as_str()), (StatusCode::OK, want));
    }

    #[tokio::test]
    async fn scalar_string_and_special_values() {
        let (app, _d) = app();
        assert_eq!(
            get(&app, "/api/v1/query?query=1.5&time=1435781451.78").await.1,
            r#"{"status":"success","data":{"resultType":"scalar","result":[1435781451.78,"1.5"]}}"#
        );
        assert_eq!(
            get(&app, "/api/v1/query?query=%22a%3Cb%22&time=100").await.1,
            r#"{"status":"success","data":{"resultType":"string","result":[100,"a\u003cb"]}}"#
        );
        for (q, v) in [("1%2F0", "+Inf"), ("-1%2F0", "-Inf"), ("0%2F0", "NaN")] {
            assert_eq!(
                get(&app, &format!("/api/v1/query?query={q}&time=1")).await.1,
                format!(r#"{{"status":"success","data":{{"resultType":"scalar","result":[1,"{v}"]}}}}"#)
            );
        }
        // A vector of +Inf and NaN (node's 0/0); timestamps keep their zero-padded millisecond fraction.
        let got = get(&app, "/api/v1/query?query=up%2F0&time=1435781451.780").await.1;
        assert_eq!(
            got,
            concat!(
                r#"{"status":"success","data":{"resultType":"vector","result":["#,
                r#"{"metric":{"instance":"localhost:9090","job":"prometheus"},"value":[1435781451.780,"+Inf"]},"#,
                r#"{"metric":{"instance":"localhost:9100","job":"node"},"value":[1435781451.780,"NaN"]}]}}"#
            )
        );
        // Empty results.
        assert_eq!(
            get(&app, "/api/v1/query?query=nothing&time=1").await.1,
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#
        );
    }

    #[tokio::test]
    async fn limit_lookback_and_stats() {
        let (app, _d) = app();
        let (s, b) = get(&app, "/api/v1/query?query=up&time=1435781451.781&limit=1").await;
        assert_eq!(s, StatusCode::OK);
        assert!(b.ends_with(r#"]},"warnings":["results truncated due to limit"]}"#), "{b}");
        assert_eq!(b.matches("\"metric\"").count(), 1, "{b}");
        let (_, b) = get(&app, "/api/v1/query_range?query=up&start=1435781430.781&end=1435781460.781&step=15&limit=1").await;
        assert!(b.contains(r#""warnings":["results truncated due to limit"]"#), "{b}");
        // 10s after the last sample: found with the default lookback, not with a 5s one.
        let at = (T0 + 40_000) as f64 / 1000.0;
        assert_eq!(get(&app, &format!("/api/v1/query?query=up&time={at}")).await.1.matches("\"metric\"").count(), 2);
        assert_eq!(
            get(&app, &format!("/api/v1/query?query=up&time={at}&lookback_delta=5s")).await.1,
            r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#
        );
        let (_, b) = get(&app, "/api/v1/query?query=1&time=1&stats=all").await;
        assert!(b.starts_with(r#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"],"stats":{"timings":{"evalTotalTime":"#), "{b}");
        let _: serde_json::Value = serde_json::from_str(&b).expect("valid JSON");
        let (_, b) = get(&app, "/api/v1/query?query=1&time=1&stats=yes").await;
        assert!(b.contains(r#""warnings":["value \"yes\" for parameter \"stats\" is deprecated"#), "{b}");
    }

    #[tokio::test]
    async fn range_queries_go_through_the_result_cache() {
        let (app, _d) = app();
        let q = "/api/v1/query_range?query=sum%20by%20(job)%20(rate(up[1m]))&start=1435781430.781&end=1435781460.781&step=15";
        let parse = |b: &str| -> serde_json::Value { serde_json::from_str(b).expect("valid JSON") };
        let (s, first) = get(&app, &format!("{q}&trace=1")).await;
        assert_eq!(s, StatusCode::OK, "{first}");
        let first = parse(&first);
        let c = &first["trace"]["cache"];
        assert_eq!((c["steps"].as_u64(), c["hits"].as_u64(), c["evaluated"].as_u64()), (Some(3), Some(0), Some(3)), "{first}");
        assert_eq!(c["stored"].as_u64(), Some(3), "2015 is long final: {first}");
        assert!(first["trace"]["plan"].is_object());
        // Again: every step from the cache, nothing evaluated, the same data.
        let (_, second) = get(&app, &format!("{q}&trace=1")).await;
        let second = parse(&second);
        let c = &second["trace"]["cache"];
        assert_eq!((c["hits"].as_u64(), c["evaluated"].as_u64(), c["runs"].as_u64()), (Some(3), Some(0), Some(0)), "{second}");
        assert!(second["trace"]["plan"].is_null(), "nothing was planned: {second}");
        assert_eq!(first["data"], second["data"]);
        // A longer window evaluates only its new steps.
        let (_, wider) = get(&app, &q.replace("end=1435781460.781", "end=1435781490.781").replace("step=15", "step=15&trace=1")).await;
        let c = &parse(&wider)["trace"]["cache"];
        assert_eq!((c["steps"].as_u64(), c["hits"].as_u64(), c["evaluated"].as_u64()), (Some(5), Some(3), Some(2)), "{wider}");
        // nocache=1 and Cache-Control: no-cache bypass it (no cache part in the trace).
        let (_, b) = get(&app, &format!("{q}&trace=1&nocache=1")).await;
        assert!(parse(&b)["trace"].get("cache").is_none(), "{b}");
        assert_eq!(parse(&b)["data"], first["data"]);
        let req = Request::get(format!("{q}&trace=1")).header(header::CACHE_CONTROL, "max-age=0, No-Cache").body(Body::empty()).expect("request");
        let (_, b) = send(&app, req).await;
        assert!(parse(&b)["trace"].get("cache").is_none(), "{b}");
        // An uncacheable expression says why.
        let (_, b) = get(&app, "/api/v1/query_range?query=up%20@%201435781430&start=1435781430&end=1435781460&step=15&trace=1").await;
        assert_eq!(parse(&b)["trace"]["cache"]["bypass"], "not cacheable: @ modifier", "{b}");
        // Bad values are 400 with the parameter named.
        for (p, v) in [("nocache", "yes"), ("align_to_step", "2")] {
            let (s, b) = get(&app, &format!("{q}&{p}={v}")).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
            assert!(b.contains(&format!(r#"invalid parameter \"{p}\""#)), "{b}");
        }
        // The cache's figures are in /metrics (0.0.4 names).
        let resp = app.clone().oneshot(Request::get("/metrics").body(Body::empty()).expect("request")).await.expect("infallible");
        let text = String::from_utf8(axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body").to_vec()).expect("utf8");
        assert!(text.contains("# TYPE tessera_query_results_cache_hit_steps_total counter\ntessera_query_results_cache_hit_steps_total 6\n"), "{text}");
        assert!(text.contains("tessera_query_results_cache_bypassed_queries_total 1\n"), "{text}");
        assert!(!text.contains("# EOF"), "{text}");
        // Byte for byte: an answer spliced from kept points (their JSON kept with them) and new ones is
        // the uncached answer's text.
        for end in ["1435781520.781", "1435781490.781", "1435781445.781"] {
            let q = q.replace("end=1435781460.781", &format!("end={end}"));
            let (_, cached) = get(&app, &q).await;
            let (_, plain) = get(&app, &format!("{q}&nocache=1")).await;
            assert!(cached.contains(r#""values":[["#), "{cached}");
            assert_eq!(cached, plain);
        }
        // A large answer from the cache goes out in frames, its kept text uncopied: the same bytes.
        let big = "/api/v1/query_range?query=up&start=1435781430.781&end=1435781463.781&step=0.003";
        let (_, filled) = get(&app, big).await;
        let (_, cached) = get(&app, big).await;
        let (_, plain) = get(&app, &format!("{big}&nocache=1")).await;
        assert!(cached.len() > 4 * crate::query::FRAMES_MIN_RENDERED, "{}", cached.len());
        assert!(cached == plain && filled == plain);
    }

    #[tokio::test]
    async fn hostile_range_requests_through_the_cache_are_answered_or_refused() {
        let (app, _d) = app();
        let (min, max) = (crate::params::MIN_TIME_MS as f64 / 1000.0, crate::params::MAX_TIME_MS as f64 / 1000.0);
        // Extreme bounds and steps, aligned or not, cached or not, with subqueries and negative offsets
        // (the cache's windows and horizon saturate): 200 or a clear 400, never a 5xx or a panic.
        for q in ["up", "rate(up[5m])%20offset%20-1000000000h", "max_over_time(up[1000000000h:1h])"] {
            for (start, end, step) in [(min, min + 3000.0, "1"), (max - 3000.0, max, "1"), (min, max, "1e15"), (-1e9, 1e9, "1000000"), (0.0, 0.0, "0.001")] {
                for extra in ["", "&align_to_step=1", "&nocache=1", "&trace=1"] {
                    let (s, b) = get(&app, &format!("/api/v1/query_range?query={q}&start={start}&end={end}&step={step}{extra}")).await;
                    assert!(s == StatusCode::OK || s == StatusCode::BAD_REQUEST, "{q} {start} {end} {step}{extra}: {s} {b}");
                }
            }
        }
        for bad in ["nocache=-1", "nocache=1e400", "align_to_step=%00", "nocache=truee", "align_to_step=99999999999999999999"] {
            let (s, b) = get(&app, &format!("/api/v1/query_range?query=up&start=0&end=60&step=15&{bad}")).await;
            assert_eq!(s, StatusCode::BAD_REQUEST, "{bad}: {b}");
        }
    }

    #[tokio::test]
    async fn align_to_step_moves_start_and_end_down_to_the_step() {
        let (app, _d) = app();
        let q = "/api/v1/query_range?query=up&start=1435781430.781&end=1435781460.781&step=15";
        let (_, b) = get(&app, &format!("{q}&align_to_step=1")).await;
        let v: serde_json::Value = serde_json::from_str(&b).expect("valid JSON");
        let ts: Vec<f64> = v["data"]["result"][0]["values"].as_array().expect("values").iter().map(|p| p[0].as_f64().expect("t")).collect();
        // Steps 430, 445, 460; the first sample is at 430.781, so 430 has no value yet.
        assert_eq!(ts, vec![1435781445.0, 1435781460.0], "{b}");
        // Off by default: the user's timestamps are kept.
        let (_, b) = get(&app, q).await;
        assert!(b.contains("[1435781430.781,"), "{b}");
        // On for every request with the server flag.
        let (app, _d) = app_with(ApiOptions { align_to_step: true, ..ApiOptions::default() });
        let (_, b) = get(&app, q).await;
        assert!(b.contains("[1435781445,") && !b.contains(".781"), "{b}");
    }

    #[tokio::test]
    async fn trace_returns_the_plan_with_figures() {
        let (app, _d) = app();
        let (s, b) = get(&app, "/api/v1/query_range?query=sum%20by%20(job)%20(rate(up[1m]))&start=1435781430.781&end=1435781460.781&step=15&trace=1").await;
        assert_eq!(s, StatusCode::OK, "{b}");
        let v: serde_json::Value = serde_json::from_str(&b).expect("valid JSON");
        assert_eq!(v["status"], "success");
        let plan = &v["trace"]["plan"];
        assert_eq!(plan["op"], "sum by (job)", "{b}");
        assert_eq!(plan["placement"], "shards+merge", "{b}");
        assert!(plan["series_touched"].as_u64().expect("figure") >= 2, "{b}");
        assert!(plan["samples_decoded"].as_u64().expect("figure") > 0, "{b}");
        assert!(v["trace"]["duration_ms"].as_f64().expect("total") >= 0.0);
        let rate = &plan["children"][0];
        assert_eq!(rate["op"], "rate", "{b}");
        assert_eq!(rate["placement"], "fused into parent", "{b}");
        assert!(rate.get("duration_ms").is_none(), "a fused node is not evaluated on its own: {b}");
        // The answer is the same with and without the trace.
        let (_, plain) = get(&app, "/api/v1/query_range?query=sum%20by%20(job)%20(rate(up[1m]))&start=1435781430.781&end=1435781460.781&step=15").await;
        let p: serde_json::Value = serde_json::from_str(&plain).expect("valid JSON");
        assert_eq!(p["data"], v["data"]);
        assert!(p.get("trace").is_none());
        let (s, b) = get(&app, "/api/v1/query?query=up&time=1&trace=yes%22").await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert!(b.contains(r#"invalid parameter \"trace\": cannot parse \"yes\\\"\" to a boolean"#), "{b}");
    }

    #[tokio::test]
    async fn parameter_errors_are_bad_data() {
        let (app, _d) = app();
        let bad = |m: &str| (StatusCode::BAD_REQUEST, format!(r#"{{"status":"error","errorType":"bad_data","error":"{m}"}}"#));
        let (s, b) = get(&app, "/api/v1/query?query=sum(&time=1").await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert!(b.starts_with(r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": 1:5: parse error"#), "{b}");
        assert_eq!(
            get(&app, "/api/v1/query?query=up&time=abc").await,
            bad(r#"invalid parameter \"time\": invalid time value for 'time': cannot parse \"abc\" to a valid timestamp"#)
        );
        assert_eq!(get(&app, "/api/v1/query?query=up&limit=-1").await, bad(r#"invalid parameter \"limit\": limit must be non-negative"#));
        assert_eq!(
            get(&app, "/api/v1/query?query=up&timeout=x").await,
            bad(r#"invalid parameter \"timeout\": cannot parse \"x\" to a valid duration"#)
        );
        assert_eq!(
            get(&app, "/api/v1/query?query=up&lookback_delta=x").await,
            bad(r#"error parsing lookback delta duration: cannot parse \"x\" to a valid duration"#)
        );
        assert_eq!(
            get(&app, "/api/v1/query_range?query=up&start=10&end=5&step=1").await,
            bad(r#"invalid parameter \"end\": end timestamp must not be before start time"#)
        );
        assert_eq!(
            get(&app, "/api/v1/query_range?query=up&start=0&end=5&step=0").await,
            bad(r#"invalid parameter \"step\": zero or negative query resolution step widths are not accepted. Try a positive integer"#)
        );
        assert_eq!(
            get(&app, "/api/v1/query_range?query=up&start=0&end=11001&step=1").await,
            bad("exceeded maximum resolution of 11,000 points per timeseries. Try decreasing the query resolution (?step=XX)")
        );
        assert_eq!(get(&app, "/api/v1/query_range?query=up&start=0&end=11000&step=1").await.0, StatusCode::OK);
        assert_eq!(
            get(&app, "/api/v1/query_range?query=up&end=5&step=1").await,
            bad(r#"invalid parameter \"start\": cannot parse \"\" to a valid timestamp"#)
        );
        assert_eq!(
            get(&app, "/api/v1/query_range?query=up[5m]&start=0&end=5&step=1").await,
            bad(r#"invalid parameter \"query\": invalid expression type \"range vector\" for range query, must be Scalar or instant Vector"#)
        );
    }

    #[tokio::test]
    async fn execution_errors_timeouts_and_sample_limits() {
        let (app, _d) = app();
        let (s, b) = get(&app, "/api/v1/query?query=up*on()up&time=1435781451.781").await;
        assert_eq!(s, StatusCode::UNPROCESSABLE_ENTITY, "{b}");
        assert!(b.starts_with(r#"{"status":"error","errorType":"execution","error":""#), "{b}");
        // Issue 9: as Prometheus 3.14 answers it.
        let (s, b) = get(&app, "/api/v1/query?query=up&time=1435781451.781&timeout=0").await;
        assert_eq!(
            (s, b.as_str()),
            (StatusCode::BAD_REQUEST, r#"{"status":"error","errorType":"bad_data","error":"invalid parameter \"query\": context deadline exceeded"}"#)
        );
        let (s, _) = get(&app, "/api/v1/query?query=up&time=1435781451.781&timeout=-1").await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        let (app, _d) = app_with(ApiOptions { query_max_samples: 1, ..Default::default() });
        let (s, b) = get(&app, "/api/v1/query?query=up&time=1435781451.781").await;
        assert_eq!(
            (s, b.as_str()),
            (
                StatusCode::UNPROCESSABLE_ENTITY,
                r#"{"status":"error","errorType":"execution","error":"query processing would load too many samples into memory in query execution"}"#
            )
        );
    }

    #[test]
    fn canceled_maps_to_499_and_the_guard_cancels() {
        use tessera_promql::engine::{CancelToken, EngineError};
        let tok = CancelToken::new();
        drop(super::CancelOnDrop(tok.clone()));
        assert!(tok.is_canceled());
        let e = super::engine_error(EngineError::Canceled("query execution".into()));
        assert_eq!((e.typ.as_str(), e.typ.status().as_u16(), e.msg.as_str()), ("canceled", 499, "query was canceled in query execution"));
        assert_eq!(super::engine_error(EngineError::Storage("x".into())).typ.as_str(), "internal");
    }

    #[tokio::test]
    async fn format_and_parse_query() {
        let (app, _d) = app();
        assert_eq!(
            get(&app, "/api/v1/format_query?query=foo/bar").await,
            (StatusCode::OK, r#"{"status":"success","data":"foo / bar"}"#.to_string())
        );
        assert_eq!(
            post(&app, "/api/v1/format_query", "query=sum(rate(x%5B5m%5D))by(job)").await.1,
            r#"{"status":"success","data":"sum by (job) (rate(x[5m]))"}"#
        );
        let (s, b) = get(&app, "/api/v1/format_query?query=foo/").await;
        assert_eq!(s, StatusCode::BAD_REQUEST);
        assert!(b.contains(r#""error":"invalid parameter \"query\": "#), "{b}");
        let (s, b) = get(&app, "/api/v1/parse_query?query=up").await;
        assert_eq!(s, StatusCode::OK, "{b}");
        let v: serde_json::Value = serde_json::from_str(&b).expect("json");
        assert_eq!(v["data"]["type"], "vectorSelector");
        assert_eq!(v["data"]["name"], "up");
        assert_eq!(get(&app, "/api/v1/parse_query?query=up(").await.0, StatusCode::BAD_REQUEST);
    }

    #[tokio::test]
    async fn experimental_promql_needs_its_feature() {
        // Off by default, as in Prometheus: upstream's parser errors, as bad_data.
        let (app, _d) = app();
        let (s, b) = get(&app, "/api/v1/query?query=sort_by_label(up,%22job%22)&time=1435781451.781").await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert!(b.contains("is not enabled"), "{b}");
        let (s, b) = get(&app, "/api/v1/query?query=limitk(1,up)&time=1435781451.781").await;
        assert_eq!(s, StatusCode::BAD_REQUEST, "{b}");
        assert_eq!(get(&app, "/api/v1/format_query?query=up%5B5m%5D%20anchored").await.0, StatusCode::BAD_REQUEST);
        assert_eq!(get(&app, "/api/v1/parse_query?query=up%20%2B%20fill(0)%20up").await.0, StatusCode::BAD_REQUEST);
        // Duration expressions are permanent upstream: always on.
        assert_eq!(get(&app, "/api/v1/format_query?query=up%5B5m*2%5D").await.0, StatusCode::OK);

        let promql = crate::PromqlFeatures {
            experimental_functions: true,
            extended_range_selectors: true,
            binop_fill_modifiers: true,
            ..Default::default()
        };
        let (app, _d) = app_with(ApiOptions { promql, ..ApiOptions::default() });
        let (s, b) = get(&app, "/api/v1/query?query=sort_by_label(up,%22job%22)&time=1435781451.781").await;
        assert_eq!(s, StatusCode::OK, "{b}");
        let job = |b: &str, i: usize| -> String {
            let v: serde_json::Value = serde_json::from_str(b).expect("json");
            v["data"]["result"][i]["metric"]["job"].as_str().expect("job").to_string()
        };
        assert_eq!((job(&b, 0), job(&b, 1)), ("node".to_string(), "prometheus".to_string()));
        assert_eq!(get(&app, "/api/v1/query?query=limitk(1,up)&time=1435781451.781").await.0, StatusCode::OK);
        assert_eq!(get(&app, "/api/v1/format_query?query=up%5B5m%5D%20anchored").await.0, StatusCode::OK);
        assert_eq!(get(&app, "/api/v1/parse_query?query=up%20%2B%20fill(0)%20up").await.0, StatusCode::OK);
    }
}
