//! Prometheus' admin API (`/api/v1/admin/tsdb/*`, behind `--web.enable-admin-api` as upstream), mirroring
//! `deleteSeries`, `cleanTombstones` and `snapshot` in web/api/v1/api.go: the same parameters, errors and
//! answers (204 without a body for the first two; the snapshot's name for the last). Disabled, every one
//! answers 503 `admin APIs disabled`, as upstream.

use crate::params::{parse_time_param, MAX_TIME_MS, MIN_TIME_MS};
use crate::read::{blocking, form, parse_matchers_param};
use crate::response::{success, ApiError, ErrorType};
use crate::AppState;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

fn enabled(st: &AppState) -> Result<(), ApiError> {
    if st.options.enable_admin_api { Ok(()) } else { Err(ApiError::new(ErrorType::Unavailable, "admin APIs disabled")) }
}

fn no_content(r: Result<(), ApiError>) -> Response {
    match r {
        Ok(()) => StatusCode::NO_CONTENT.into_response(),
        Err(e) => e.into_response(),
    }
}

/// `POST|PUT /api/v1/admin/tsdb/delete_series?match[]=…&start=…&end=…`.
pub async fn delete_series(State(st): State<Arc<AppState>>, req: Request) -> Response {
    no_content(
        async {
            enabled(&st)?;
            let p = form(req).await?;
            let matches = p.all("match[]");
            if matches.is_empty() {
                return Err(ApiError::bad_data("no match[] parameter provided"));
            }
            let start = parse_time_param(&p, "start", MIN_TIME_MS).map_err(|e| ApiError::invalid_param("start", e))?;
            let end = parse_time_param(&p, "end", MAX_TIME_MS).map_err(|e| ApiError::invalid_param("end", e))?;
            let sets = parse_matchers_param(&matches).map_err(|e| ApiError::invalid_param("match[]", e))?;
            let db = st.ready_db()?;
            blocking(move || {
                for set in &sets {
                    db.delete(start, end, set).map_err(|e| ApiError::internal(e.to_string()))?;
                }
                Ok(())
            })
            .await
        }
        .await,
    )
}

/// `POST|PUT /api/v1/admin/tsdb/clean_tombstones`.
pub async fn clean_tombstones(State(st): State<Arc<AppState>>) -> Response {
    no_content(
        async {
            enabled(&st)?;
            let db = st.ready_db()?;
            blocking(move || db.clean_tombstones().map_err(|e| ApiError::internal(e.to_string()))).await
        }
        .await,
    )
}

#[derive(serde::Serialize)]
struct SnapshotName {
    name: String,
}

/// `POST|PUT /api/v1/admin/tsdb/snapshot?skip_head=<bool>`: `<data>/snapshots/<name>`, a data directory of
/// its own (hard links of the blocks, and unless `skip_head` a block of the head).
pub async fn snapshot(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let r = async {
        enabled(&st)?;
        let p = form(req).await?;
        let skip_head = match p.get("skip_head") {
            "" => false,
            v => parse_go_bool(v).ok_or_else(|| {
                ApiError::bad_data(format!("unable to parse boolean 'skip_head' argument: strconv.ParseBool: parsing {}: invalid syntax", tessera_model::labels::go_quote(v)))
            })?,
        };
        let db = st.ready_db()?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        let name = format!("{}-{:016x}", format_utc_compact(now.as_secs() as i64), rand_u63());
        // In the store's own directory (the data directory for `default`).
        let dir = st.store().dir.join("snapshots").join(&name);
        blocking(move || db.snapshot(&dir, !skip_head).map_err(|e| ApiError::internal(format!("create snapshot: {e}")))).await?;
        Ok::<_, ApiError>(SnapshotName { name })
    }
    .await;
    match r {
        Ok(n) => success(&n, &[], &[]),
        Err(e) => e.into_response(),
    }
}

/// Go's `strconv.ParseBool`.
fn parse_go_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

/// `20060102T150405Z` of a unix time (upstream's snapshot name format, UTC).
fn format_utc_compact(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let rem = secs.rem_euclid(86_400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}{m:02}{d:02}T{:02}{:02}{:02}Z", rem / 3600, rem / 60 % 60, rem % 60)
}

/// A random non-negative 63-bit number (upstream's `rand.Int63`), from the OS' hasher seed.
fn rand_u63() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.finish() >> 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshot_names_follow_upstream() {
        assert_eq!(format_utc_compact(0), "19700101T000000Z");
        assert_eq!(format_utc_compact(1_512_940_344), "20171210T211224Z");
        assert_eq!(format_utc_compact(1_795_449_600), "20261123T160000Z");
        assert_eq!(parse_go_bool("T"), Some(true));
        assert_eq!(parse_go_bool("yes"), None);
        assert!(rand_u63() < 1 << 63);
    }
}
