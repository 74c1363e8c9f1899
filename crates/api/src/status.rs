//! `/api/v1/status/*`: buildinfo, runtimeinfo, flags and the TSDB cardinality view, in the shapes of
//! Prometheus' `PrometheusVersion`, `RuntimeInfo`, flags map and `TSDBStatus`.

use crate::params::{format_rfc3339_ms, Params};
use crate::response::{success, ApiError};
use crate::AppState;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::sync::Arc;

pub async fn buildinfo(State(st): State<Arc<AppState>>) -> Response {
    success(&st.build, &[], &[])
}

/// Prometheus' `RuntimeInfo`, field for field. The Go-runtime fields carry their nearest Rust
/// equivalents: `goroutineCount` is the process' thread count, `GOMAXPROCS` the available cores.
#[derive(Serialize)]
struct RuntimeInfo {
    #[serde(rename = "startTime")]
    start_time: String,
    #[serde(rename = "CWD")]
    cwd: String,
    hostname: String,
    #[serde(rename = "serverTime")]
    server_time: String,
    #[serde(rename = "reloadConfigSuccess")]
    reload_config_success: bool,
    #[serde(rename = "lastConfigTime")]
    last_config_time: String,
    #[serde(rename = "corruptionCount")]
    corruption_count: i64,
    #[serde(rename = "goroutineCount")]
    goroutine_count: u64,
    #[serde(rename = "GOMAXPROCS")]
    gomaxprocs: usize,
    #[serde(rename = "GOMEMLIMIT")]
    gomemlimit: i64,
    #[serde(rename = "GOGC")]
    gogc: String,
    #[serde(rename = "GODEBUG")]
    godebug: String,
    #[serde(rename = "storageRetention")]
    storage_retention: String,
}

pub async fn runtimeinfo(State(st): State<Arc<AppState>>) -> Response {
    let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let info = RuntimeInfo {
        start_time: format_rfc3339_ms(st.start_time_ms),
        cwd: std::env::current_dir().map(|p| p.display().to_string()).unwrap_or_default(),
        hostname,
        server_time: format_rfc3339_ms(crate::now_ms()),
        reload_config_success: true,
        last_config_time: format_rfc3339_ms(st.start_time_ms),
        corruption_count: 0,
        goroutine_count: crate::metrics::thread_count().unwrap_or(0),
        gomaxprocs: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
        gomemlimit: i64::MAX,
        gogc: String::new(),
        godebug: String::new(),
        storage_retention: st.options.retention_description.clone(),
    };
    success(&info, &[], &[])
}

pub async fn flags(State(st): State<Arc<AppState>>) -> Response {
    success(&st.flags, &[], &[])
}

#[derive(Serialize)]
struct Stat {
    name: String,
    value: u64,
}

#[derive(Serialize)]
struct HeadStats {
    #[serde(rename = "numSeries")]
    num_series: u64,
    #[serde(rename = "numLabelPairs")]
    num_label_pairs: u64,
    #[serde(rename = "chunkCount")]
    chunk_count: u64,
    #[serde(rename = "minTime")]
    min_time: i64,
    #[serde(rename = "maxTime")]
    max_time: i64,
}

#[derive(Serialize)]
struct TsdbStatus {
    #[serde(rename = "headStats")]
    head_stats: HeadStats,
    #[serde(rename = "seriesCountByMetricName")]
    series_count_by_metric_name: Vec<Stat>,
    #[serde(rename = "labelValueCountByLabelName")]
    label_value_count_by_label_name: Vec<Stat>,
    #[serde(rename = "memoryInBytesByLabelName")]
    memory_in_bytes_by_label_name: Vec<Stat>,
    #[serde(rename = "seriesCountByLabelValuePair")]
    series_count_by_label_value_pair: Vec<Stat>,
}

fn stats(v: Vec<(String, u64)>, limit: usize) -> Vec<Stat> {
    v.into_iter().take(limit).map(|(name, value)| Stat { name, value }).collect()
}

/// `GET /api/v1/status/tsdb?limit=N` (Prometheus' `serveTSDBStatus`: default 10, 1..=10000).
pub async fn tsdb(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let r = async {
        let p: Params = crate::read::form(req).await?;
        const MAX_TSDB_LIMIT: usize = 10_000;
        let limit = match p.get("limit") {
            "" => 10,
            s => match s.parse::<i64>() {
                Ok(n) if n >= 1 => {
                    if n as u64 > MAX_TSDB_LIMIT as u64 {
                        return Err(ApiError::bad_data(format!("limit must not exceed {MAX_TSDB_LIMIT}")));
                    }
                    n as usize
                }
                _ => return Err(ApiError::bad_data("limit must be a positive number")),
            },
        };
        let db = st.ready_db()?;
        tokio::task::spawn_blocking(move || {
            let s = db.stats();
            // The full label-name list gives numLabelPairs (the sum of distinct values per name).
            let card = db.head_cardinality(usize::MAX);
            let num_label_pairs = card.label_value_count_by_label_name.iter().map(|(_, n)| n).sum();
            TsdbStatus {
                head_stats: HeadStats {
                    num_series: s.head_series,
                    num_label_pairs,
                    chunk_count: s.head_chunks,
                    min_time: s.head_min_t,
                    max_time: s.head_max_t,
                },
                series_count_by_metric_name: stats(card.series_count_by_metric_name, limit),
                label_value_count_by_label_name: stats(card.label_value_count_by_label_name, limit),
                memory_in_bytes_by_label_name: stats(card.memory_in_bytes_by_label_name, limit),
                series_count_by_label_value_pair: stats(card.series_count_by_label_value_pair, limit),
            }
        })
        .await
        .map_err(|e| ApiError::internal(format!("request task failed: {e}")))
    }
    .await;
    match r {
        Ok(s) => success(&s, &[], &[]),
        Err(e) => e.into_response(),
    }
}

/// One store in `/api/v1/status/stores`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StoreStatus {
    name: String,
    /// `store` or `union`.
    kind: &'static str,
    /// Whether its database is open (a union: all its members').
    ready: bool,
    /// A union's members with their external labels.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    members: Vec<UnionMember>,
    limits: StoreLimits,
    /// A store's usage (absent for a union, which holds nothing of its own, and before it is open).
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<StoreUsage>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct UnionMember {
    name: String,
    external_labels: std::collections::BTreeMap<String, String>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StoreLimits {
    /// Samples per second remote write may add (0: none).
    ingestion_rate: f64,
    ingestion_burst: f64,
    /// `null`: the server's `--query.max-samples`.
    query_max_samples: Option<usize>,
    /// 0: only the server's `--query.max-concurrency`.
    query_max_concurrency: usize,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct StoreUsage {
    head_series: u64,
    head_chunks: u64,
    head_samples: u64,
    /// Unix ms of the head's first and last samples (`null` when it is empty).
    head_min_time: Option<i64>,
    head_max_time: Option<i64>,
    blocks: u64,
    block_bytes: u64,
    tier_blocks: u64,
    tier_bytes: u64,
    wal_bytes: u64,
    shards: usize,
    /// Seconds opening the database took at start (WAL replay included).
    open_seconds: Option<f64>,
}

/// `GET /api/v1/status/stores` (Tessera's own): every store and union store the caller may read, with
/// its limits and, for a store, what it holds. With access control on, a credential sees only the
/// stores it has the `read` right on (the guard hands its grants over in the request's extensions).
pub async fn stores(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let grants = req.extensions().get::<crate::access::Grants>().cloned();
    // Fail closed: with credentials configured, the guard always hands the grants over; without them
    // here, list nothing rather than everything.
    if grants.is_none() && st.access().is_some_and(|a| a.has_credentials()) {
        return ApiError::internal("no credential's grants with the request").into_response();
    }
    let visible: Vec<_> = st
        .all_stores()
        .into_iter()
        .filter(|s| grants.as_ref().is_none_or(|g| g.allows(crate::access::Right::Read, &s.name)))
        .collect();
    let r = tokio::task::spawn_blocking(move || {
        visible
            .iter()
            .map(|s| {
                let l = s.limits();
                let usage = (!s.is_union()).then(|| s.db()).flatten().map(|db| {
                    let x = db.stats();
                    StoreUsage {
                        head_series: x.head_series,
                        head_chunks: x.head_chunks,
                        head_samples: x.head_samples,
                        head_min_time: (x.head_min_t != i64::MAX).then_some(x.head_min_t),
                        head_max_time: (x.head_max_t != i64::MIN).then_some(x.head_max_t),
                        blocks: x.blocks,
                        block_bytes: x.disk_bytes,
                        tier_blocks: x.tier_blocks,
                        tier_bytes: x.tier_bytes,
                        wal_bytes: x.wal_bytes,
                        shards: x.shards,
                        open_seconds: s.open_duration().map(|d| d.as_secs_f64()),
                    }
                });
                StoreStatus {
                    name: s.name.clone(),
                    kind: if s.is_union() { "union" } else { "store" },
                    ready: if s.is_union() { s.members.iter().all(|(m, _)| m.db().is_some()) } else { s.db().is_some() },
                    members: s
                        .members
                        .iter()
                        .map(|(m, ext)| UnionMember {
                            name: m.name.clone(),
                            external_labels: ext.iter().map(|l| (l.name.to_string(), l.value.to_string())).collect(),
                        })
                        .collect(),
                    limits: StoreLimits {
                        ingestion_rate: l.ingestion_rate,
                        ingestion_burst: l.ingestion_burst,
                        query_max_samples: l.query_max_samples,
                        query_max_concurrency: l.query_max_concurrency,
                    },
                    usage,
                }
            })
            .collect::<Vec<_>>()
    })
    .await;
    match r {
        Ok(v) => success(&v, &[], &[]),
        Err(e) => ApiError::internal(format!("request task failed: {e}")).into_response(),
    }
}
