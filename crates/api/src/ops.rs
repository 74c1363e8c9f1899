//! Operational endpoints: `/-/healthy`, `/-/ready`, `/metrics`, and the middleware that counts and
//! times every request.

use crate::AppState;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// Always 200 while the process serves HTTP (Prometheus' `/-/healthy`).
pub async fn healthy() -> impl IntoResponse {
    (StatusCode::OK, "Tessera is Healthy.\n")
}

/// 200 once the data directory is open and its WAL replayed, 503 before (Prometheus' `/-/ready`); under
/// `/store/<name>/`, that store's.
pub async fn ready(State(st): State<Arc<AppState>>) -> impl IntoResponse {
    if st.db().is_some() {
        (StatusCode::OK, "Tessera is Ready.\n")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable")
    }
}

/// `POST|PUT /-/reload` (Prometheus' lifecycle API, behind `--web.enable-lifecycle`): re-reads the config
/// file's stores and unions and the web configuration; 200, or 500 `failed to reload config: …` with the
/// previous configuration kept.
pub async fn reload(State(st): State<Arc<AppState>>) -> Response {
    if !st.options.enable_lifecycle {
        return (StatusCode::FORBIDDEN, "Lifecycle API is not enabled.").into_response();
    }
    let Some(tx) = st.reload.lock().clone() else {
        return (StatusCode::INTERNAL_SERVER_ERROR, "failed to reload config: nothing to reload").into_response();
    };
    let (done, wait) = tokio::sync::oneshot::channel();
    if tx.send(done).await.is_err() {
        return (StatusCode::INTERNAL_SERVER_ERROR, "failed to reload config: the server is stopping").into_response();
    }
    match wait.await {
        Ok(Ok(())) => StatusCode::OK.into_response(),
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, format!("failed to reload config: {e}")).into_response(),
        Err(_) => (StatusCode::INTERNAL_SERVER_ERROR, "failed to reload config: no answer").into_response(),
    }
}

/// `POST|PUT /-/quit` (Prometheus' lifecycle API, behind `--web.enable-lifecycle`): a graceful shutdown,
/// as SIGTERM (no new connections, in-flight requests finish, every store closed cleanly). Under
/// `/store/<name>/` too, and it still stops the whole server (as `/-/reload` reloads all of it).
pub async fn quit(State(st): State<Arc<AppState>>) -> Response {
    if !st.options.enable_lifecycle {
        return (StatusCode::FORBIDDEN, "Lifecycle API is not enabled.").into_response();
    }
    // A stored permit: the shutdown task sees it even if it was not waiting yet.
    st.quit.notify_one();
    (StatusCode::OK, "Requesting termination... Goodbye!").into_response()
}

/// Tessera's own metrics in the text format: HTTP and remote write, storage, process.
pub async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let mut out = String::with_capacity(16 << 10);
    st.metrics.encode_text(&mut out);
    // Storage metrics of every open store: the default store's unlabelled, the others' with `store`.
    let stores: Vec<_> = st.all_stores().into_iter().filter_map(|s| s.db().cloned().map(|db| (s.name.clone(), db))).collect();
    if !stores.is_empty() {
        let ms: Vec<(Option<&str>, &tessera_tsdb::Metrics)> = stores
            .iter()
            .map(|(name, db)| ((name != crate::stores::DEFAULT).then_some(name.as_str()), db.metrics()))
            .collect();
        tessera_tsdb::metrics::encode_text_many(&ms, &mut out);
    }
    out.push_str("# HELP tessera_ready Whether the data directory is open (1) or still being opened (0).\n");
    out.push_str("# TYPE tessera_ready gauge\n");
    out.push_str(if st.is_ready() { "tessera_ready 1\n" } else { "tessera_ready 0\n" });
    out.push_str("# HELP tessera_metadata_families Metric families with metadata received through remote write.\n");
    out.push_str("# TYPE tessera_metadata_families gauge\n");
    out.push_str(&format!("tessera_metadata_families {}\n", st.default_store().metadata.len()));
    crate::metrics::encode_registry_004(&st.registry, &mut out);
    crate::metrics::encode_process_metrics(&mut out);
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")], out).into_response()
}

/// Counts and times each request under its route pattern (`/api/v1/label/{name}/values`, not the
/// concrete path, so label names cannot blow up the metric's cardinality).
pub async fn track(State(st): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    let handler = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "other".to_string());
    let start = std::time::Instant::now();
    let resp = next.run(req).await;
    st.metrics.observe_request(&handler, resp.status().as_u16(), start.elapsed().as_secs_f64());
    resp
}
