//! `GET|POST /api/v1/query_exemplars` (upstream `queryExemplars`, web/api/v1/api.go): the selectors of
//! `query` (upstream `parser.ExtractSelectors`: every vector selector, those inside range selectors
//! too) pick the series; their exemplars in `[start, end]` come from the exemplar rings
//! (`tessera_tsdb::Db::select_exemplars`). A query without selectors answers 204 with no body, as
//! upstream's handler does.
//!
//! JSON as upstream writes it: `[{"seriesLabels": {…}, "exemplars": [{"labels": {…}, "value": "6",
//! "timestamp": 1600096945.479}]}]` — values as strings (`strconv.FormatFloat(v, 'f', -1, 64)`),
//! timestamps as numbers of seconds (`jsonutil.MarshalTimestamp`), series sorted by labels.

use crate::query::{format_timestamp, format_value};
use crate::response::ApiError;
use crate::AppState;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use std::fmt::Write as _;
use std::sync::Arc;
use tessera_model::{Exemplar, Labels, Matcher};
use tessera_promql::parser::Expr;

/// Upstream `parser.ExtractSelectors`.
pub fn extract_selectors(e: &Expr) -> Vec<Vec<Matcher>> {
    let mut out = Vec::new();
    e.walk(&mut |n| match n {
        Expr::VectorSelector(vs) => out.push(vs.matchers.clone()),
        Expr::MatrixSelector(ms) => out.push(ms.vs.matchers.clone()),
        _ => {}
    });
    out
}

fn labels_json(out: &mut String, l: &Labels) {
    out.push('{');
    for (i, lb) in l.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&serde_json::to_string(lb.name).expect("strings serialise"));
        out.push(':');
        out.push_str(&serde_json::to_string(lb.value).expect("strings serialise"));
    }
    out.push('}');
}

/// The `data` array.
pub fn exemplars_json(res: &[(Labels, Vec<Exemplar>)]) -> String {
    let mut out = String::from("[");
    for (i, (series, ex)) in res.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"seriesLabels\":");
        labels_json(&mut out, series);
        out.push_str(",\"exemplars\":[");
        for (j, e) in ex.iter().enumerate() {
            if j > 0 {
                out.push(',');
            }
            out.push_str("{\"labels\":");
            labels_json(&mut out, &e.labels);
            let _ = write!(out, ",\"value\":\"{}\",\"timestamp\":{}}}", format_value(e.value), format_timestamp(e.t));
        }
        out.push_str("]}");
    }
    out.push(']');
    out
}

/// The handler.
pub async fn query_exemplars(State(st): State<Arc<AppState>>, req: Request) -> Response {
    let p = match crate::read::form(req).await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let start = match crate::params::parse_time_param(&p, "start", crate::params::MIN_TIME_MS) {
        Ok(t) => t,
        Err(e) => return ApiError::invalid_param("start", e).into_response(),
    };
    let end = match crate::params::parse_time_param(&p, "end", crate::params::MAX_TIME_MS) {
        Ok(t) => t,
        Err(e) => return ApiError::invalid_param("end", e).into_response(),
    };
    if end < start {
        return ApiError::bad_data("end timestamp must not be before start timestamp").into_response();
    }
    let expr = match st.options.promql.parse(p.get("query")) {
        Ok(e) => e,
        Err(e) => return ApiError::bad_data(e.to_string()).into_response(),
    };
    let selectors = extract_selectors(&expr);
    if selectors.is_empty() {
        return StatusCode::NO_CONTENT.into_response();
    }
    let db = match st.ready_db() {
        Ok(db) => db,
        Err(e) => return e.into_response(),
    };
    let res = db.select_exemplars(start, end, &selectors);
    let body = format!("{{\"status\":\"success\",\"data\":{}}}", exemplars_json(&res));
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::labels;

    #[test]
    fn json_like_upstream() {
        let res = vec![(
            labels!("__name__" => "test_exemplar_metric_total", "job" => "prometheus"),
            vec![Exemplar { labels: labels!("trace_id" => "EpTxMJ40fUus7aGY"), value: 6.0, t: 1_600_096_945_479 }],
        )];
        assert_eq!(
            exemplars_json(&res),
            r#"[{"seriesLabels":{"__name__":"test_exemplar_metric_total","job":"prometheus"},"exemplars":[{"labels":{"trace_id":"EpTxMJ40fUus7aGY"},"value":"6","timestamp":1600096945.479}]}]"#
        );
        assert_eq!(exemplars_json(&[]), "[]");
    }
}
