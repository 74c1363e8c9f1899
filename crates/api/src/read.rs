//! Read-side metadata endpoints: `/api/v1/series`, `/api/v1/labels`, `/api/v1/label/<name>/values`,
//! `/api/v1/metadata`. Each mirrors the function of the same purpose in Prometheus' web/api/v1/api.go
//! (`series`, `labelNames`, `labelValues`, `metricMetadata`): same parameters, defaults, errors and
//! the "results truncated due to limit" warning.

use crate::params::{parse_limit, parse_time_param, Params, MAX_TIME_MS, MIN_TIME_MS};
use crate::response::{success, ApiError, LabelsJson};
use crate::AppState;
use axum::extract::{Request, State};
use axum::http::{header, Method};
use axum::response::{IntoResponse, Response};
use std::collections::BTreeSet;
use std::sync::Arc;
use tessera_model::{Labels, Matcher, SelectHints};

/// Largest form body read from a POST (Prometheus relies on Go's 10 MiB `ParseForm` default).
const MAX_FORM_BYTES: usize = 10 << 20;

const TRUNCATED: &str = "results truncated due to limit";

/// A request's `limit` within the server's `--web.api.result-limit` (either 0: the other; both 0: none).
fn effective_limit(st: &AppState, requested: usize) -> usize {
    match (requested, st.options.api_result_limit) {
        (0, s) => s,
        (r, 0) => r,
        (r, s) => r.min(s),
    }
}

/// Cuts `v` to `limit` entries (0 = no limit) and adds Prometheus' truncation warning when it did.
fn truncate_to_limit<T>(v: &mut Vec<T>, limit: usize, warnings: &mut Vec<String>) -> bool {
    if limit > 0 && v.len() > limit {
        v.truncate(limit);
        warnings.push(TRUNCATED.to_string());
        return true;
    }
    false
}

/// Reads the parameters like Go's `r.ParseForm`: the URL query, plus the body of a urlencoded POST.
pub async fn form(req: Request) -> Result<Params, ApiError> {
    let query = req.uri().query().map(str::to_string);
    // Go reads the body of POST, PUT and PATCH requests.
    let is_form = matches!(*req.method(), Method::POST | Method::PUT | Method::PATCH)
        && req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ct| ct.trim_start().to_ascii_lowercase().starts_with("application/x-www-form-urlencoded"));
    let body = if is_form {
        let b = axum::body::to_bytes(req.into_body(), MAX_FORM_BYTES)
            .await
            .map_err(|e| ApiError::bad_data(format!("error parsing form values: {e}")))?;
        Some(b)
    } else {
        None
    };
    Ok(Params::parse(body.as_deref(), query.as_deref()))
}

/// Prometheus' `parseMatchersParam`: every `match[]` parsed, each with at least one matcher that does
/// not match the empty string.
pub fn parse_matchers_param(matches: &[&str]) -> Result<Vec<Vec<Matcher>>, String> {
    let mut sets = Vec::with_capacity(matches.len());
    for m in matches {
        let set = crate::selector::parse_metric_selector(m)?;
        if set.iter().all(|m| m.matches("")) {
            return Err("match[] must contain at least one non-empty matcher".into());
        }
        sets.push(set);
    }
    Ok(sets)
}

/// Runs storage work off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T, ApiError> + Send + 'static) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f).await.map_err(|e| ApiError::internal(format!("request task failed: {e}")))?
}

fn respond<T: serde::Serialize>(r: Result<(T, Vec<String>), ApiError>) -> Response {
    match r {
        Ok((data, warnings)) => success(&data, &warnings, &[]),
        Err(e) => e.into_response(),
    }
}

/// `GET|POST /api/v1/series`.
pub async fn series(State(st): State<Arc<AppState>>, req: Request) -> Response {
    respond(series_inner(st, req).await.map(|(v, w)| (SeriesJson(v), w)))
}

/// A list of label sets, each serialized as Prometheus serializes `labels.Labels`.
struct SeriesJson(Vec<Labels>);

impl serde::Serialize for SeriesJson {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq(self.0.iter().map(LabelsJson))
    }
}

async fn series_inner(st: Arc<AppState>, req: Request) -> Result<(Vec<Labels>, Vec<String>), ApiError> {
    let p = form(req).await?;
    let matches = p.all("match[]");
    if matches.is_empty() {
        return Err(ApiError::bad_data("no match[] parameter provided"));
    }
    let limit = effective_limit(&st, parse_limit(p.get("limit")).map_err(|e| ApiError::invalid_param("limit", e))?);
    let start = parse_time_param(&p, "start", MIN_TIME_MS).map_err(|e| ApiError::invalid_param("start", e))?;
    let end = parse_time_param(&p, "end", MAX_TIME_MS).map_err(|e| ApiError::invalid_param("end", e))?;
    let sets = parse_matchers_param(&matches).map_err(|e| ApiError::invalid_param("match[]", e))?;
    let db = st.ready_queryable()?;
    blocking(move || {
        let q = db.querier(start, end)?;
        // Not `series_only`: storage may then return series without samples in [start, end], and
        // Prometheus answers only series of blocks overlapping the range; asking for chunks keeps
        // "has data in range" exact (the chunks are shared bytes, not copies).
        let hints = SelectHints { series_only: false, func: Some("series".into()), ..Default::default() };
        let mut warnings = Vec::new();
        // Each set's answer is label-sorted; several sets are merged and deduplicated like upstream's
        // NewMergeSeriesSet over sorted selects.
        let mut out: Vec<Labels> = Vec::new();
        if sets.len() == 1 {
            for s in q.select(&sets[0], &hints)? {
                out.push(s?.labels);
                if truncate_to_limit(&mut out, limit, &mut warnings) {
                    break;
                }
            }
        } else {
            // Merged in label order, holding at most `limit` + 1 (the first `limit` are the answer; one
            // more says it was truncated).
            let mut all = BTreeSet::new();
            for set in &sets {
                for s in q.select(set, &hints)? {
                    all.insert(s?.labels);
                    if limit > 0 && all.len() > limit + 1 {
                        all.pop_last();
                    }
                }
            }
            out = all.into_iter().collect();
            truncate_to_limit(&mut out, limit, &mut warnings);
        }
        Ok((out, warnings))
    })
    .await
}

/// `GET|POST /api/v1/labels`.
pub async fn label_names(State(st): State<Arc<AppState>>, req: Request) -> Response {
    respond(label_names_inner(st, req).await)
}

async fn label_names_inner(st: Arc<AppState>, req: Request) -> Result<(Vec<String>, Vec<String>), ApiError> {
    let p = form(req).await?;
    let limit = effective_limit(&st, parse_limit(p.get("limit")).map_err(|e| ApiError::invalid_param("limit", e))?);
    let start = parse_time_param(&p, "start", MIN_TIME_MS).map_err(|e| ApiError::invalid_param("start", e))?;
    let end = parse_time_param(&p, "end", MAX_TIME_MS).map_err(|e| ApiError::invalid_param("end", e))?;
    let sets = parse_matchers_param(&p.all("match[]")).map_err(ApiError::bad_data)?;
    let db = st.ready_queryable()?;
    blocking(move || {
        let q = db.querier(start, end)?;
        let mut names: Vec<String> = if sets.len() > 1 {
            let mut all = BTreeSet::new();
            for set in &sets {
                all.extend(q.label_names(set)?);
            }
            all.into_iter().collect()
        } else {
            q.label_names(sets.first().map(Vec::as_slice).unwrap_or(&[]))?
        };
        let mut warnings = Vec::new();
        truncate_to_limit(&mut names, limit, &mut warnings);
        Ok((names, warnings))
    })
    .await
}

/// `GET /api/v1/label/<name>/values`; `<name>` may be `U__`-escaped (UTF-8 names).
///
/// The name is taken from the raw path and percent-decoded here (not by axum's `Path<String>`, which
/// answers a name that is not UTF-8 in plain text): such a name gets Prometheus' JSON error,
/// `invalid label name: "\xff\xfe"`.
pub async fn label_values(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let path = req.uri().path();
    let enc = path.strip_prefix("/api/v1/label/").and_then(|p| p.strip_suffix("/values")).unwrap_or("");
    let bytes: Vec<u8> = percent_decode(enc);
    match String::from_utf8(bytes) {
        Ok(name) => respond(label_values_inner(st, name, req).await),
        Err(e) => respond::<Vec<String>>(Err(ApiError::bad_data(format!(
            "invalid label name: {}",
            tessera_promql::parser::go_quote_bytes(e.as_bytes())
        )))),
    }
}

/// `%XX` escapes of a URL path segment decoded to bytes (a bad escape is kept as written).
fn percent_decode(s: &str) -> Vec<u8> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%'
            && i + 2 < b.len()
            && let (Some(h), Some(l)) = ((b[i + 1] as char).to_digit(16), (b[i + 2] as char).to_digit(16))
        {
            out.push((h * 16 + l) as u8);
            i += 3;
            continue;
        }
        out.push(b[i]);
        i += 1;
    }
    out
}

async fn label_values_inner(st: Arc<AppState>, name: String, req: Request) -> Result<(Vec<String>, Vec<String>), ApiError> {
    let name = if name.starts_with("U__") { crate::selector::unescape_label_name(&name) } else { name };
    // model.UTF8Validation.IsValidLabelName: non-empty valid UTF-8 (a Rust String always is).
    if name.is_empty() {
        return Err(ApiError::bad_data(format!("invalid label name: {}", tessera_model::labels::go_quote(&name))));
    }
    let p = form(req).await?;
    let limit = effective_limit(&st, parse_limit(p.get("limit")).map_err(|e| ApiError::invalid_param("limit", e))?);
    let start = parse_time_param(&p, "start", MIN_TIME_MS).map_err(|e| ApiError::invalid_param("start", e))?;
    let end = parse_time_param(&p, "end", MAX_TIME_MS).map_err(|e| ApiError::invalid_param("end", e))?;
    let sets = parse_matchers_param(&p.all("match[]")).map_err(ApiError::bad_data)?;
    let db = st.ready_queryable()?;
    blocking(move || {
        let q = db.querier(start, end)?;
        let mut vals: Vec<String> = if sets.len() > 1 {
            let mut all = BTreeSet::new();
            for set in &sets {
                all.extend(q.label_values(&name, set)?);
            }
            all.into_iter().collect()
        } else {
            q.label_values(&name, sets.first().map(Vec::as_slice).unwrap_or(&[]))?
        };
        vals.sort();
        let mut warnings = Vec::new();
        truncate_to_limit(&mut vals, limit, &mut warnings);
        Ok((vals, warnings))
    })
    .await
}

/// `GET /api/v1/metadata` (`metric`, `limit`, `limit_per_metric`), from what remote write delivered.
pub async fn metadata(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let r = async {
        let p = form(req).await?;
        let limit = match p.get("limit") {
            "" => -1,
            s => s.parse::<i64>().map_err(|_| ApiError::bad_data("limit must be a number"))?,
        };
        let per = match p.get("limit_per_metric") {
            "" => -1,
            s => s.parse::<i64>().map_err(|_| ApiError::bad_data("limit_per_metric must be a number"))?,
        };
        Ok((st.store().metadata.query(p.get("metric"), limit, per), Vec::new()))
    }
    .await;
    respond(r)
}
