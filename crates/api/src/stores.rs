//! Stores (what Prometheus people call tenants): named, isolated namespaces, each with its own database
//! (shards, WAL, blocks, tiers) and metadata. `default` is the data directory itself, so single-tenant
//! users notice nothing; the others live in `<data>/stores/<name>/`.
//!
//! A request addresses a store in one of two ways: the `X-Scope-OrgID` header (the Cortex/Mimir/Loki
//! convention, which Prometheus' `remote_write.headers` and Grafana's data sources can set), or a path
//! prefix `/store/<name>/` in front of any API for clients that cannot set headers. Neither: `default`.
//! Both, naming different stores: 400. A store that is not configured: 404 (a sender must not retry it).
//!
//! [`resolve`] runs before the access guard and every handler: it finds the store and serves the
//! request inside a task-local scope, so that `AppState::store`, `db` and `ready_db` give the request's
//! store wherever a handler asks, with no handler knowing about stores.

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tessera_tsdb::Db;

use crate::response::{ApiError, ErrorType};
use crate::AppState;

/// The store every request without a store addresses.
pub const DEFAULT: &str = "default";

/// The header naming a request's store (Cortex' tenant header).
pub const HEADER: &str = "X-Scope-OrgID";

/// A store's own limits (the server's settings where the store sets none).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Limits {
    /// Samples (and histograms) per second remote write may add; 0: no limit.
    pub ingestion_rate: f64,
    /// Most samples at once (the bucket's size); 0: one second's worth.
    pub ingestion_burst: f64,
    /// A query's sample limit (`query.max-samples`); `None`: the server's.
    pub query_max_samples: Option<usize>,
    /// Queries of this store evaluated at once (`query.max-concurrency`); 0: only the server's limit.
    pub query_max_concurrency: usize,
}

/// What [`Store::admit`] refused.
#[derive(Debug, Clone, PartialEq)]
pub enum Refused {
    /// Over the rate: retry after this many seconds.
    RetryAfter(u64, String),
    /// Larger than the burst: never admitted.
    TooLarge(String),
}

struct Bucket {
    tokens: f64,
    at: std::time::Instant,
}

/// Per-store counters in `/metrics` (`tessera_store_*{store=…}`).
#[derive(Clone, Debug, Default)]
pub struct StoreMetrics {
    pub samples_written: prometheus_client::metrics::family::Family<StoreLabel, prometheus_client::metrics::counter::Counter>,
    pub limited: prometheus_client::metrics::family::Family<LimitLabel, prometheus_client::metrics::counter::Counter>,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct StoreLabel {
    pub store: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
pub struct LimitLabel {
    pub store: String,
    pub limit: String,
}

impl StoreMetrics {
    pub fn register(&self, registry: &mut prometheus_client::registry::Registry) {
        let r = registry.sub_registry_with_prefix("tessera_store");
        r.register("samples_written", "Samples and histograms written by remote write, per store", self.samples_written.clone());
        r.register(
            "limited_requests",
            "Requests refused or cut by a store limit (ingestion_rate, series, query_samples)",
            self.limited.clone(),
        );
    }

    pub fn limited(&self, store: &str, limit: &str) {
        self.limited.get_or_create(&LimitLabel { store: store.to_string(), limit: limit.to_string() }).inc();
    }
}

/// One store.
pub struct Store {
    pub name: String,
    /// Its directory (the data directory for `default`).
    pub dir: PathBuf,
    db: OnceLock<Arc<Db>>,
    pub metadata: crate::metadata::MetadataStore,
    /// A union store's members with their external labels (see [`crate::union`]); empty for a store.
    pub members: Vec<(Arc<Store>, tessera_model::Labels)>,
    limits: parking_lot::RwLock<Limits>,
    bucket: parking_lot::Mutex<Bucket>,
    /// Its own query gate (`Limits::query_max_concurrency`).
    query_gate: parking_lot::RwLock<Option<Arc<tokio::sync::Semaphore>>>,
    /// A union store's change log (see [`crate::union`]).
    union_log: OnceLock<Arc<tessera_model::ChangeLog>>,
    /// How long opening the database took (WAL replay included), once open.
    opened_in: OnceLock<std::time::Duration>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("name", &self.name).field("dir", &self.dir).field("open", &self.db.get().is_some()).finish()
    }
}

impl Store {
    pub fn new(name: &str, dir: PathBuf) -> Store {
        Store {
            name: name.to_string(),
            dir,
            db: OnceLock::new(),
            metadata: crate::metadata::MetadataStore::new(),
            members: Vec::new(),
            limits: parking_lot::RwLock::new(Limits::default()),
            bucket: parking_lot::Mutex::new(Bucket { tokens: 0.0, at: std::time::Instant::now() }),
            query_gate: parking_lot::RwLock::new(None),
            union_log: OnceLock::new(),
            opened_in: OnceLock::new(),
        }
    }

    /// The store's limits.
    pub fn limits(&self) -> Limits {
        *self.limits.read()
    }

    /// Sets the store's limits (a full bucket to start with).
    pub fn set_limits(&self, l: Limits) {
        *self.limits.write() = l;
        *self.bucket.lock() = Bucket { tokens: burst(&l), at: std::time::Instant::now() };
        *self.query_gate.write() = (l.query_max_concurrency > 0).then(|| Arc::new(tokio::sync::Semaphore::new(l.query_max_concurrency)));
    }

    /// The store's own query gate, if it has a concurrency limit.
    pub fn query_gate(&self) -> Option<Arc<tokio::sync::Semaphore>> {
        self.query_gate.read().clone()
    }

    /// Whether the ingestion-rate bucket is empty now (then any request is refused before its body is
    /// read and decoded: a sender far over its rate costs the server almost nothing).
    pub fn over_rate(&self) -> bool {
        let l = self.limits();
        if l.ingestion_rate <= 0.0 {
            return false;
        }
        let b = self.bucket.lock();
        b.tokens + b.at.elapsed().as_secs_f64() * l.ingestion_rate < 1.0
    }

    /// Takes `n` samples from the ingestion-rate bucket (a token bucket refilled at the rate, holding
    /// at most the burst), or says when to retry.
    pub fn admit(&self, n: u64) -> Result<(), Refused> {
        let l = self.limits();
        if l.ingestion_rate <= 0.0 || n == 0 {
            return Ok(());
        }
        let cap = burst(&l);
        let n = n as f64;
        if n > cap {
            return Err(Refused::TooLarge(format!(
                "a request of {n} samples is more than store {:?} ever accepts at once (its ingestion burst is {cap}); send smaller batches",
                self.name
            )));
        }
        let mut b = self.bucket.lock();
        let now = std::time::Instant::now();
        b.tokens = (b.tokens + now.duration_since(b.at).as_secs_f64() * l.ingestion_rate).min(cap);
        b.at = now;
        if b.tokens >= n {
            b.tokens -= n;
            return Ok(());
        }
        let wait = ((n - b.tokens) / l.ingestion_rate).ceil().max(1.0) as u64;
        Err(Refused::RetryAfter(
            wait,
            format!("store {:?} is over its ingestion rate of {} samples/s (burst {cap}); retry in {wait}s", self.name, l.ingestion_rate),
        ))
    }

    /// A union store over `members` (each with its external labels).
    pub fn union(name: &str, members: Vec<(Arc<Store>, tessera_model::Labels)>) -> Store {
        Store { members, ..Store::new(name, PathBuf::new()) }
    }

    /// Whether this is a union store (read-only).
    pub fn is_union(&self) -> bool {
        !self.members.is_empty()
    }

    /// What to read: the store's database, or a union of its members' (all open); `None` before that.
    pub fn queryable(&self) -> Option<Arc<dyn tessera_model::Queryable>> {
        if !self.is_union() {
            return self.db().map(|d| d.clone() as Arc<dyn tessera_model::Queryable>);
        }
        let mut members = Vec::with_capacity(self.members.len());
        for (s, ext) in &self.members {
            members.push((s.db()?.clone(), ext.clone()));
        }
        // One change log for the union's life (the result cache keys its entries by it), made once every
        // member is open.
        let log = self.union_log.get_or_init(|| crate::union::UnionQueryable::log_of(&members));
        Some(Arc::new(crate::union::UnionQueryable { members, log: log.clone() }))
    }

    /// Publishes the store's opened database.
    pub fn set_db(&self, db: Arc<Db>) {
        if self.db.set(db).is_err() {
            tracing::warn!(store = %self.name, "set_db called twice; keeping the first database");
        }
    }

    /// The database, once open.
    pub fn db(&self) -> Option<&Arc<Db>> {
        self.db.get()
    }

    /// Records how long opening the database took (shown by `/api/v1/status/stores`).
    pub fn set_open_duration(&self, d: std::time::Duration) {
        let _ = self.opened_in.set(d);
    }

    /// How long opening the database took, once recorded.
    pub fn open_duration(&self) -> Option<std::time::Duration> {
        self.opened_in.get().copied()
    }
}

fn burst(l: &Limits) -> f64 {
    if l.ingestion_burst > 0.0 { l.ingestion_burst } else { l.ingestion_rate }
}

/// Whether `name` may name a store: 1–64 of `A-Z a-z 0-9 _ -` (safe as a directory name, a URL path
/// segment, a TOML bare key and a header value).
pub fn valid_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 64 && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

tokio::task_local! {
    static CURRENT: Arc<Store>;
}

/// The store of the request being served on this task, if any.
pub fn current() -> Option<Arc<Store>> {
    CURRENT.try_with(Arc::clone).ok()
}

/// The name of the store a request addresses, put in its extensions by [`resolve`].
#[derive(Debug, Clone)]
pub struct StoreName(pub String);

/// The store a path's `/store/<name>/` prefix names, and the path without it.
pub fn split_path(path: &str) -> (Option<&str>, &str) {
    let Some(rest) = path.strip_prefix("/store/") else { return (None, path) };
    match rest.find('/') {
        Some(i) => (Some(&rest[..i]), &rest[i..]),
        None => (Some(rest), "/"),
    }
}

fn error(status: StatusCode, typ: ErrorType, msg: String) -> Response {
    let mut r = ApiError::new(typ, msg).into_response();
    *r.status_mut() = status;
    r
}

/// The middleware: finds the request's store and serves the request in its scope.
pub async fn resolve(State(st): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    let (from_path, _) = split_path(req.uri().path());
    let from_path = from_path.map(str::to_string);
    let from_header = match req.headers().get(HEADER) {
        None => None,
        Some(v) => match v.to_str() {
            Ok(s) => Some(s.trim().to_string()),
            Err(_) => return error(StatusCode::BAD_REQUEST, ErrorType::BadData, format!("{HEADER}: not a valid store name")),
        },
    };
    if let Some(h) = &from_header
        && h.contains('|')
    {
        return error(
            StatusCode::BAD_REQUEST,
            ErrorType::BadData,
            format!("{HEADER}: {h:?} names several stores; query them together through a union store"),
        );
    }
    let name = match (from_path, from_header) {
        (Some(p), Some(h)) if p != h => {
            return error(StatusCode::BAD_REQUEST, ErrorType::BadData, format!("{HEADER} {h:?} and the path's store {p:?} differ"));
        }
        (Some(p), _) => p,
        (None, Some(h)) => h,
        (None, None) => DEFAULT.to_string(),
    };
    let Some(store) = (valid_name(&name)).then(|| st.get_store(&name)).flatten() else {
        let shown: String = name.chars().take(80).collect();
        return error(StatusCode::NOT_FOUND, ErrorType::NotFound, format!("unknown store {shown:?}"));
    };
    req.extensions_mut().insert(StoreName(name));
    CURRENT.scope(store, next.run(req)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ingestion_bucket_refills_at_the_rate() {
        let s = Store::new("x", PathBuf::new());
        assert_eq!(s.admit(1_000_000), Ok(()), "no limit");
        s.set_limits(Limits { ingestion_rate: 100.0, ingestion_burst: 300.0, ..Limits::default() });
        assert_eq!(s.admit(250), Ok(()));
        match s.admit(100) {
            Err(Refused::RetryAfter(secs, msg)) => assert!(secs == 1 && msg.contains("100 samples/s"), "{secs} {msg}"),
            other => panic!("{other:?}"),
        }
        assert!(matches!(s.admit(301), Err(Refused::TooLarge(_))));
        std::thread::sleep(std::time::Duration::from_millis(600));
        assert_eq!(s.admit(100), Ok(()), "refilled");
    }

    #[test]
    fn names_and_prefixes() {
        assert!(valid_name("team-a") && valid_name("A_1") && !valid_name("") && !valid_name("a/b") && !valid_name("a.b"));
        assert!(!valid_name(&"x".repeat(65)) && !valid_name("é"));
        assert_eq!(split_path("/store/a/api/v1/query"), (Some("a"), "/api/v1/query"));
        assert_eq!(split_path("/store/a"), (Some("a"), "/"));
        assert_eq!(split_path("/api/v1/query"), (None, "/api/v1/query"));
    }
}
