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

/// One store.
pub struct Store {
    pub name: String,
    /// Its directory (the data directory for `default`).
    pub dir: PathBuf,
    db: OnceLock<Arc<Db>>,
    pub metadata: crate::metadata::MetadataStore,
    /// A union store's members with their external labels (see [`crate::union`]); empty for a store.
    pub members: Vec<(Arc<Store>, tessera_model::Labels)>,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("name", &self.name).field("dir", &self.dir).field("open", &self.db.get().is_some()).finish()
    }
}

impl Store {
    pub fn new(name: &str, dir: PathBuf) -> Store {
        Store { name: name.to_string(), dir, db: OnceLock::new(), metadata: crate::metadata::MetadataStore::new(), members: Vec::new() }
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
        Some(Arc::new(crate::union::UnionQueryable { members }))
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
    fn names_and_prefixes() {
        assert!(valid_name("team-a") && valid_name("A_1") && !valid_name("") && !valid_name("a/b") && !valid_name("a.b"));
        assert!(!valid_name(&"x".repeat(65)) && !valid_name("é"));
        assert_eq!(split_path("/store/a/api/v1/query"), (Some("a"), "/api/v1/query"));
        assert_eq!(split_path("/store/a"), (Some("a"), "/"));
        assert_eq!(split_path("/api/v1/query"), (None, "/api/v1/query"));
    }
}
