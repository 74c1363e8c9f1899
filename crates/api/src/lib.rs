//! `tessera-api`: Tessera's HTTP surface — Prometheus' HTTP API v1, remote write, and the operational
//! endpoints — as an `axum` [`Router`] over an [`AppState`].
//!
//! Main types:
//! - [`AppState`]: everything a handler needs: the database (set once the data directory is open, which
//!   is what `/-/ready` reports), the [`ApiOptions`], the remote-write [`metadata::MetadataStore`], the
//!   self-metrics ([`metrics::ApiMetrics`]), the in-flight write budget, the flags for
//!   `/api/v1/status/flags`.
//! - [`router`]: the route table. Each endpoint lives in its own module ([`read`], [`write`],
//!   [`status`], [`ops`]); a new endpoint (query, query_range, remote read…) is a new module plus one
//!   `.route(…)` line here, never a change to an existing handler.
//! - [`response`]: the JSON envelope and errors, byte-compatible with Prometheus (Go's escaping, field
//!   order, status codes); [`params`]: Prometheus' parameter parsing (times, durations, limits, forms).
//!
//! Key decision: the server starts serving before the database is open (WAL replay can take minutes),
//! so the database sits in a `OnceLock`: `/-/healthy` answers at once, `/-/ready` and every data
//! endpoint answer 503 until [`AppState::set_db`] is called. Storage work (decoding, appending, index
//! reads) runs on tokio's blocking pool, never on the async workers.
#![forbid(unsafe_code)]

pub mod access;
pub mod admin;
pub mod exemplars;
pub mod metadata;
pub mod metrics;
pub mod ops;
pub mod params;
pub mod query;
pub mod read;
pub mod remote_read;
pub mod response;
pub mod selector;
pub mod stores;
pub mod union;
pub mod status;
pub mod ui;
pub mod write;

use axum::Router;
use axum::routing::{get, post};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use tessera_tsdb::Db;

pub use response::{ApiError, ErrorType};

/// Settings of the HTTP layer (the server fills them from flags and the config file).
#[derive(Debug, Clone)]
pub struct ApiOptions {
    /// The data directory (metadata.json lives there; runtimeinfo reports it).
    pub data_dir: PathBuf,
    /// Largest accepted remote-write body (compressed), bytes.
    pub max_request_bytes: usize,
    /// Total compressed bytes of remote-write requests being processed at once; beyond it, 429.
    pub max_inflight_write_bytes: usize,
    /// Per-request decoding limits (decompressed size, labels per series, name/value lengths).
    pub write_limits: tessera_protocol::remote_write::Limits,
    /// Human-readable retention for `/api/v1/status/runtimeinfo` (e.g. "15d", "15d or 512MiB").
    pub retention_description: String,
    /// For the query endpoints: default lookback delta, timeout and sample limit.
    pub lookback_delta_ms: i64,
    pub query_timeout_ms: i64,
    pub query_max_samples: usize,
    /// Remote read: largest frame of a streamed response, bytes (`--storage.remote.read-max-bytes-in-frame`).
    pub remote_read_max_bytes_in_frame: usize,
    /// Remote read requests served at once; more wait (`--storage.remote.read-concurrent-limit`, 0 = no limit).
    pub remote_read_concurrent_limit: usize,
    /// The PromQL features `--enable-feature` turned on (all off by default, as in Prometheus).
    pub promql: PromqlFeatures,
    /// Samples one `SAMPLES` remote-read query may return (`--storage.remote.read-sample-limit`).
    pub remote_read_sample_limit: usize,
    /// Series one remote-write request may create; the samples of further new series are rejected
    /// (`--web.remote-write.max-new-series-per-request`, 0 = no limit).
    pub max_new_series_per_request: usize,
    /// PromQL queries evaluated at once; more wait in a queue, inside their timeout
    /// (`--query.max-concurrency`, as Prometheus').
    pub query_max_concurrency: usize,
    /// The most entries the series, labels and label-values APIs return; a request's `limit` can only
    /// lower it (`--web.api.result-limit`, 0 = no limit).
    pub api_result_limit: usize,
    /// The range-query result cache (`--query.results-cache.max-size`, `--query.results-cache.freshness`;
    /// a size of 0 disables it).
    pub results_cache: tessera_promql::cache::CacheOptions,
    /// Align every range query's start and end down to a multiple of its step before evaluating
    /// (`--query.align-to-step`; a request can ask with `align_to_step=1`). Off by default: it shifts the
    /// user's timestamps.
    pub align_to_step: bool,
    /// `--web.enable-admin-api`: `/api/v1/admin/tsdb/*` (otherwise 503, as upstream).
    pub enable_admin_api: bool,
    /// `--web.enable-lifecycle`: `/-/reload` and `/-/quit` (otherwise 403, as upstream).
    pub enable_lifecycle: bool,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            data_dir: PathBuf::from("data"),
            max_request_bytes: 32 << 20,
            max_inflight_write_bytes: 256 << 20,
            write_limits: Default::default(),
            retention_description: "15d".into(),
            lookback_delta_ms: 5 * 60 * 1000,
            query_timeout_ms: 2 * 60 * 1000,
            query_max_samples: 50_000_000,
            remote_read_max_bytes_in_frame: 1 << 20,
            remote_read_concurrent_limit: 10,
            remote_read_sample_limit: 50_000_000,
            promql: PromqlFeatures::default(),
            max_new_series_per_request: 100_000,
            query_max_concurrency: 20,
            api_result_limit: 1_000_000,
            results_cache: Default::default(),
            align_to_step: false,
            enable_admin_api: false,
            enable_lifecycle: false,
        }
    }
}

/// Experimental PromQL behaviour, by Prometheus' `--enable-feature` name. Every field defaults to off,
/// as upstream's do; duration expressions (`promql-duration-expr`) are always on, as upstream made them
/// permanent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromqlFeatures {
    /// `promql-experimental-functions`: experimental functions and the `limitk`/`limit_ratio` aggregators.
    pub experimental_functions: bool,
    /// `promql-delayed-name-removal`: `__name__` is dropped at the end of evaluation, not per function.
    pub delayed_name_removal: bool,
    /// `promql-extended-range-selectors`: the `anchored` and `smoothed` range modifiers.
    pub extended_range_selectors: bool,
    /// `promql-binop-fill-modifiers`: `fill`, `fill_left`, `fill_right` on binary operators.
    pub binop_fill_modifiers: bool,
    /// `use-start-timestamps`: functions such as `rate` and `increase` use stored start timestamps.
    pub use_start_timestamps: bool,
}

impl PromqlFeatures {
    /// The parser options these features imply (upstream's `parser.Options`).
    pub fn parse_options(&self) -> tessera_promql::parser::ParseOptions {
        tessera_promql::parser::ParseOptions {
            experimental_functions: self.experimental_functions,
            duration_expressions: true,
            extended_range_selectors: self.extended_range_selectors,
            binop_fill_modifiers: self.binop_fill_modifiers,
        }
    }

    /// Parses a query with these features (a disabled one is a parse error, with upstream's message).
    pub fn parse(&self, query: &str) -> Result<tessera_promql::parser::Expr, tessera_promql::parser::ParseError> {
        tessera_promql::parser::parse_with_options(query, &self.parse_options())
    }
}

/// Build information reported by `/api/v1/status/buildinfo`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BuildInfo {
    pub version: String,
    pub revision: String,
    pub branch: String,
    #[serde(rename = "buildUser")]
    pub build_user: String,
    #[serde(rename = "buildDate")]
    pub build_date: String,
    /// Named as Prometheus names it (clients parse the field); holds the Rust toolchain.
    #[serde(rename = "goVersion")]
    pub go_version: String,
}

impl Default for BuildInfo {
    fn default() -> Self {
        BuildInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            revision: option_env!("TESSERA_GIT_REVISION").unwrap_or("unknown").into(),
            branch: option_env!("TESSERA_GIT_BRANCH").unwrap_or("unknown").into(),
            build_user: option_env!("TESSERA_BUILD_USER").unwrap_or("unknown").into(),
            build_date: option_env!("TESSERA_BUILD_DATE").unwrap_or("unknown").into(),
            go_version: format!("rust{}", env!("CARGO_PKG_RUST_VERSION")),
        }
    }
}

/// Shared state of every handler.
pub struct AppState {
    pub options: ApiOptions,
    /// The `default` store (the data directory itself).
    default_store: Arc<stores::Store>,
    /// Every store by name, `default` included (see [`stores`]).
    stores: parking_lot::RwLock<BTreeMap<String, Arc<stores::Store>>>,
    pub metrics: metrics::ApiMetrics,
    /// Permits are bytes of request bodies being processed.
    pub(crate) write_budget: Arc<tokio::sync::Semaphore>,
    /// Remote read's concurrency gate (permits: requests).
    pub(crate) remote_read_gate: Arc<tokio::sync::Semaphore>,
    /// PromQL's concurrency gate (permits: queries being evaluated).
    pub(crate) query_gate: Arc<tokio::sync::Semaphore>,
    /// When the process started serving, unix ms.
    pub start_time_ms: i64,
    /// Flag name → effective value, for `/api/v1/status/flags`.
    pub flags: BTreeMap<String, String>,
    pub build: BuildInfo,
    /// Range-query results kept per step (see `tessera_promql::cache`).
    pub results_cache: Arc<tessera_promql::cache::ResultCache>,
    /// Metric families kept with `prometheus-client` (new families go here; the older hand-rolled ones
    /// are in `metrics`).
    pub registry: prometheus_client::registry::Registry,
    /// Where `/-/reload` asks the binary to reload (its answer comes back on the one-shot channel).
    pub reload: parking_lot::Mutex<Option<ReloadSender>>,
    /// Notified by `/-/quit`: the binary shuts down as on SIGTERM.
    pub quit: tokio::sync::Notify,
    /// Per-store counters (`tessera_store_*`).
    pub store_metrics: stores::StoreMetrics,
    /// The web configuration's access rules (`--web.config.file`); `None`: open.
    access: parking_lot::RwLock<Option<Arc<access::Access>>>,
}

impl AppState {
    pub fn new(options: ApiOptions, flags: BTreeMap<String, String>) -> Arc<Self> {
        let budget = options.max_inflight_write_bytes.clamp(1, tokio::sync::Semaphore::MAX_PERMITS);
        // A concurrency gate of `n` permits; 0 = no limit.
        let gate = |n: usize| {
            Arc::new(tokio::sync::Semaphore::new(if n == 0 {
                tokio::sync::Semaphore::MAX_PERMITS
            } else {
                n.min(tokio::sync::Semaphore::MAX_PERMITS)
            }))
        };
        let (remote_read_gate, query_gate) = (gate(options.remote_read_concurrent_limit), gate(options.query_max_concurrency));
        // Kept points are kept as their JSON too: a dashboard's repeat copies text instead of formatting
        // every float again (`query::render_cached_point`).
        let results_cache = Arc::new(tessera_promql::cache::ResultCache::new(tessera_promql::cache::CacheOptions {
            render: Some(query::render_cached_point),
            ..options.results_cache
        }));
        let mut registry = prometheus_client::registry::Registry::default();
        results_cache.metrics.register(&mut registry);
        let store_metrics = stores::StoreMetrics::default();
        store_metrics.register(&mut registry);
        let default_store = Arc::new(stores::Store::new(stores::DEFAULT, options.data_dir.clone()));
        Arc::new(AppState {
            results_cache,
            registry,
            default_store: default_store.clone(),
            stores: parking_lot::RwLock::new(BTreeMap::from([(stores::DEFAULT.to_string(), default_store)])),
            options,
            metrics: metrics::ApiMetrics::new(),
            write_budget: Arc::new(tokio::sync::Semaphore::new(budget)),
            remote_read_gate,
            query_gate,
            start_time_ms: now_ms(),
            flags,
            build: BuildInfo::default(),
            access: parking_lot::RwLock::new(None),
            store_metrics,
            reload: parking_lot::Mutex::new(None),
            quit: tokio::sync::Notify::new(),
        })
    }

    /// The access rules in force (`None`: open).
    pub fn access(&self) -> Option<Arc<access::Access>> {
        self.access.read().clone()
    }

    /// Replaces the access rules (at start, and when the web configuration file changes).
    pub fn set_access(&self, a: Option<Arc<access::Access>>) {
        *self.access.write() = a;
    }

    /// Publishes the default store's opened database: from now on the server is ready.
    pub fn set_db(&self, db: Arc<Db>) {
        self.default_store.set_db(db);
    }

    /// The store the request being served addresses (see [`stores::resolve`]); `default` outside one.
    pub fn store(&self) -> Arc<stores::Store> {
        stores::current().unwrap_or_else(|| self.default_store.clone())
    }

    /// The `default` store.
    pub fn default_store(&self) -> &Arc<stores::Store> {
        &self.default_store
    }

    /// A store by name.
    pub fn get_store(&self, name: &str) -> Option<Arc<stores::Store>> {
        self.stores.read().get(name).cloned()
    }

    /// Every store, `default` first.
    pub fn all_stores(&self) -> Vec<Arc<stores::Store>> {
        let m = self.stores.read();
        let mut v: Vec<_> = m.values().cloned().collect();
        v.sort_by_key(|s| (s.name != stores::DEFAULT, s.name.clone()));
        v
    }

    /// Adds a store (its database published later with [`stores::Store::set_db`]); an existing one of
    /// that name is returned as it is.
    pub fn add_store(&self, name: &str, dir: PathBuf) -> Arc<stores::Store> {
        self.stores.write().entry(name.to_string()).or_insert_with(|| Arc::new(stores::Store::new(name, dir))).clone()
    }

    /// The current store's database, once open.
    pub fn db(&self) -> Option<Arc<Db>> {
        self.store().db().cloned()
    }

    /// Whether the default store's database is open (`/-/ready`).
    pub fn is_ready(&self) -> bool {
        self.default_store.db().is_some()
    }

    /// The current store's database or the 503 every data endpoint answers before it is open; a union
    /// store has none (it is read through [`AppState::ready_queryable`]): 400.
    pub fn ready_db(&self) -> Result<Arc<Db>, ApiError> {
        let s = self.store();
        if s.is_union() {
            return Err(ApiError::bad_data(format!("store {:?} is a union store: it can only be read (queries, series, labels, remote read)", s.name)));
        }
        s.db().cloned().ok_or_else(ApiError::unavailable)
    }

    /// What the current store reads from: its database, or its union's members together.
    pub fn ready_queryable(&self) -> Result<Arc<dyn tessera_model::Queryable>, ApiError> {
        self.store().queryable().ok_or_else(ApiError::unavailable)
    }

    /// Stops serving a store or union (its directory and data stay where they are); returns it.
    pub fn remove_store(&self, name: &str) -> Option<Arc<stores::Store>> {
        if name == stores::DEFAULT {
            return None;
        }
        self.stores.write().remove(name)
    }

    /// Adds a union store over existing stores.
    pub fn add_union(&self, name: &str, members: Vec<(Arc<stores::Store>, tessera_model::Labels)>) -> Arc<stores::Store> {
        let u = Arc::new(stores::Store::union(name, members));
        self.stores.write().insert(name.to_string(), u.clone());
        u
    }
}

/// How `/-/reload` asks the binary to reload: a one-shot channel for the answer.
pub type ReloadSender = tokio::sync::mpsc::Sender<tokio::sync::oneshot::Sender<Result<(), String>>>;

/// Unix time now, ms.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// The route table. Prometheus' paths; GET and POST where Prometheus takes both.
pub fn router(state: Arc<AppState>) -> Router {
    let api: Router<Arc<AppState>> = Router::new()
        .route("/-/healthy", get(ops::healthy).head(ops::healthy))
        .route("/-/ready", get(ops::ready).head(ops::ready))
        .route("/-/reload", post(ops::reload).put(ops::reload))
        .route("/-/quit", post(ops::quit).put(ops::quit))
        .route("/metrics", get(ops::metrics))
        .route("/api/v1/write", post(write::remote_write))
        .route("/api/v1/read", post(remote_read::read))
        .route("/api/v1/series", get(read::series).post(read::series))
        .route("/api/v1/labels", get(read::label_names).post(read::label_names))
        .route("/api/v1/label/{name}/values", get(read::label_values))
        .route("/api/v1/metadata", get(read::metadata))
        .route("/api/v1/query", get(query::query).post(query::query))
        .route("/api/v1/query_range", get(query::query_range).post(query::query_range))
        .route("/api/v1/query_exemplars", get(exemplars::query_exemplars).post(exemplars::query_exemplars))
        .route("/api/v1/format_query", get(query::format_query).post(query::format_query))
        .route("/api/v1/parse_query", get(query::parse_query).post(query::parse_query))
        .route("/api/v1/status/buildinfo", get(status::buildinfo))
        .route("/api/v1/status/runtimeinfo", get(status::runtimeinfo))
        .route("/api/v1/status/flags", get(status::flags))
        .route("/api/v1/status/tsdb", get(status::tsdb))
        .route("/api/v1/status/stores", get(status::stores))
        .route("/api/v1/admin/tsdb/delete_series", post(admin::delete_series).put(admin::delete_series))
        .route("/api/v1/admin/tsdb/clean_tombstones", post(admin::clean_tombstones).put(admin::clean_tombstones))
        .route("/api/v1/admin/tsdb/snapshot", post(admin::snapshot).put(admin::snapshot));
    // The web UI (see `ui`): its pages, Prometheus' older addresses of them, and its two assets.
    let mut pages: Router<Arc<AppState>> = Router::new()
        .route("/", get(ui::root))
        .route("/assets/app.js", get(ui::app_js))
        .route("/assets/app.css", get(ui::app_css));
    for p in ui::PAGES {
        pages = pages.route(p, get(ui::page));
    }
    // Every API also under `/store/<name>/` (see `stores`).
    Router::new()
        .merge(pages)
        .merge(api.clone())
        .nest("/store/{store}", api)
        .layer(axum::middleware::from_fn_with_state(state.clone(), access::guard))
        .layer(axum::middleware::from_fn_with_state(state.clone(), stores::resolve))
        .layer(axum::middleware::from_fn_with_state(state.clone(), ops::track))
        .with_state(state)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use axum::http::{Request, StatusCode};
    use tower::ServiceExt;

    async fn call(app: &Router, method: &str, uri: &str) -> (StatusCode, String) {
        let req = Request::builder().method(method).uri(uri).body(Body::empty()).expect("request");
        let resp = app.clone().oneshot(req).await.expect("infallible");
        let status = resp.status();
        let body = axum::body::to_bytes(resp.into_body(), usize::MAX).await.expect("body");
        (status, String::from_utf8_lossy(&body).into_owned())
    }

    #[tokio::test]
    async fn cross_site_browser_requests_cannot_reach_admin_or_lifecycle_endpoints() {
        let st = AppState::new(ApiOptions::default(), BTreeMap::new());
        let app = router(st);
        let send = |uri: &str, site: Option<&str>| {
            let mut b = Request::builder().method("POST").uri(uri);
            if let Some(s) = site {
                b = b.header("Sec-Fetch-Site", s);
            }
            let req = b.body(Body::empty()).expect("request");
            let app = app.clone();
            async move {
                let r = app.oneshot(req).await.expect("infallible");
                let status = r.status();
                let body = axum::body::to_bytes(r.into_body(), usize::MAX).await.expect("body");
                (status, String::from_utf8_lossy(&body).into_owned())
            }
        };
        for uri in ["/api/v1/admin/tsdb/delete_series?match[]=up", "/store/default/api/v1/admin/tsdb/snapshot", "/-/quit", "/-/reload"] {
            for site in ["cross-site", "CROSS-SITE"] {
                let (status, body) = send(uri, Some(site)).await;
                assert_eq!(status, StatusCode::FORBIDDEN, "{uri}");
                assert!(body.contains("cross-site requests may not"), "{uri}: {body}");
            }
        }
        // The same requests from the server's own pages, or from a client that is not a browser, reach
        // their handlers (which refuse them for their own reasons here: admin API and lifecycle off).
        for site in [Some("same-origin"), Some("none"), None] {
            assert_eq!(send("/api/v1/admin/tsdb/delete_series?match[]=up", site).await.0, StatusCode::SERVICE_UNAVAILABLE);
            assert_eq!(send("/-/quit", site).await.1, "Lifecycle API is not enabled.");
        }
        // Reads are not affected: a dashboard on another origin may still query.
        assert_ne!(send("/api/v1/query?query=1", Some("cross-site")).await.0, StatusCode::FORBIDDEN);
    }

    #[tokio::test]
    async fn before_the_database_is_open_only_health_answers() {
        let st = AppState::new(ApiOptions::default(), BTreeMap::new());
        let app = router(st.clone());
        assert_eq!(call(&app, "GET", "/-/healthy").await.0, StatusCode::OK);
        assert_eq!(call(&app, "GET", "/-/ready").await, (StatusCode::SERVICE_UNAVAILABLE, "Service Unavailable".into()));
        assert_eq!(
            call(&app, "GET", "/api/v1/series?match[]=up").await,
            (StatusCode::SERVICE_UNAVAILABLE, r#"{"status":"error","errorType":"unavailable","error":"TSDB not ready"}"#.into())
        );
        assert_eq!(call(&app, "GET", "/api/v1/labels").await.0, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(call(&app, "POST", "/api/v1/write").await.0, StatusCode::SERVICE_UNAVAILABLE);
        // Parameter errors are still reported first, as upstream validates before touching storage.
        assert_eq!(call(&app, "GET", "/api/v1/series").await.0, StatusCode::BAD_REQUEST);
        assert_eq!(call(&app, "GET", "/api/v1/metadata").await, (StatusCode::OK, r#"{"status":"success","data":{}}"#.into()));
        let (_, m) = call(&app, "GET", "/metrics").await;
        assert!(m.contains("tessera_ready 0\n"), "{m}");
        assert!(m.contains("tessera_http_requests_total{code=\"503\",handler=\"/-/ready\"} 1\n"), "{m}");

        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), tessera_tsdb::Options { shards: 1, background: false, ..Default::default() }).expect("open");
        st.set_db(db);
        assert_eq!(call(&app, "GET", "/-/ready").await.0, StatusCode::OK);
        assert_eq!(call(&app, "GET", "/api/v1/labels").await, (StatusCode::OK, r#"{"status":"success","data":[]}"#.into()));
        assert_eq!(call(&app, "GET", "/api/v1/label/job/values").await, (StatusCode::OK, r#"{"status":"success","data":[]}"#.into()));
        assert_eq!(call(&app, "GET", "/nope").await.0, StatusCode::NOT_FOUND);
    }

    /// A write answered before its body is read (415 here) leaves unread bytes on the connection, which
    /// the server then closes: the answer must say so, or a keep-alive client's next request breaks.
    #[tokio::test]
    async fn a_write_refused_unread_says_connection_close() {
        let st = AppState::new(ApiOptions::default(), BTreeMap::new());
        let app = router(st.clone());
        let dir = tempfile::tempdir().expect("tempdir");
        let db = Db::open(dir.path(), tessera_tsdb::Options { shards: 1, background: false, ..Default::default() }).expect("open");
        st.set_db(db);
        for (ct, ce) in [("text/plain", "snappy"), ("application/x-protobuf;proto=io.prometheus.write.v2.Request", "gzip")] {
            let req = Request::builder()
                .method("POST")
                .uri("/api/v1/write")
                .header("Content-Type", ct)
                .header("Content-Encoding", ce)
                .body(Body::from(vec![b'x'; 300]))
                .expect("request");
            let resp = app.clone().oneshot(req).await.expect("infallible");
            assert_eq!(resp.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
            assert_eq!(resp.headers().get("connection").map(|v| v.as_bytes()), Some(&b"close"[..]), "{ct} {ce}");
        }
    }
}
