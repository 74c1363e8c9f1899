//! What the query harnesses (B3 `b3`, B6 `b6`) share: a Prometheus HTTP API client for instant and
//! range queries against any base URL, the evaluation time (the data's end), and latency statistics.
//!
//! The base URL may carry a path prefix (VictoriaMetrics cluster's `/select/0/prometheus`); the API's
//! paths are appended to it.

use crate::http::{Client, Response, Url};
use serde_json::Value;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The metric whose newest sample marks the data's end: every node_exporter target has one, at the
/// scrape interval ([`crate::nodegen`]).
pub const END_MARKER_METRIC: &str = "node_load1";

/// How far back [`data_end_ms`] looks when the data ended more than a lookback before the hint.
const END_SEARCH_BACK_MS: i64 = 7 * 86_400_000;

/// A Prometheus API endpoint over one kept-alive connection.
pub struct Api {
    client: Client,
    /// The base URL's path without a trailing slash ("" for none).
    prefix: String,
    /// Send `nocache=1` with range queries: Tessera's and VictoriaMetrics' result caches are bypassed
    /// (Prometheus has none and ignores it), so that repeated runs measure evaluation.
    pub nocache: bool,
}

impl Api {
    /// `base` is e.g. `http://127.0.0.1:9090`; answers of up to `max_body_bytes` are read.
    pub fn new(base: &str, timeout: Duration, max_body_bytes: usize) -> anyhow::Result<Api> {
        let url = Url::parse(base)?;
        let prefix = url.path.trim_end_matches('/').to_string();
        Ok(Api { client: Client::new(url, timeout).with_max_body(max_body_bytes), prefix, nocache: false })
    }

    /// The path of API endpoint `path` (`/api/v1/query`) under the base URL.
    pub fn path(&self, path: &str) -> String {
        format!("{}{path}", self.prefix)
    }

    /// POSTs a form to `path` (as Grafana's Prometheus data source does) and returns the answer and
    /// the time from sending the request to having read the whole answer.
    pub fn post_form(&mut self, path: &str, params: &[(&str, &str)]) -> std::io::Result<(Duration, Response)> {
        let mut form = form_urlencoded::Serializer::new(String::new());
        for (k, v) in params {
            form.append_pair(k, v);
        }
        let body = form.finish();
        let path = self.path(path);
        let t0 = Instant::now();
        let r = self.client.request("POST", &path, &[("Content-Type", "application/x-www-form-urlencoded")], body.as_bytes())?;
        Ok((t0.elapsed(), r))
    }

    /// A GET of `path` under the base URL (e.g. `/metrics`).
    pub fn client_get(&mut self, path: &str) -> std::io::Result<Response> {
        let path = self.path(path);
        self.client.get(&path)
    }

    /// An instant query at `time_ms`.
    pub fn instant(&mut self, expr: &str, time_ms: i64) -> std::io::Result<(Duration, Response)> {
        self.post_form("/api/v1/query", &[("query", expr), ("time", &secs(time_ms))])
    }

    /// A range query over `[start_ms, end_ms]` at `step_ms`.
    pub fn range(&mut self, expr: &str, start_ms: i64, end_ms: i64, step_ms: i64) -> std::io::Result<(Duration, Response)> {
        let (start, end, step) = (secs(start_ms), secs(end_ms), secs(step_ms));
        let mut params = vec![("query", expr), ("start", &start), ("end", &end), ("step", &step)];
        if self.nocache {
            params.push(("nocache", "1"));
        }
        self.post_form("/api/v1/query_range", &params)
    }
}

/// Milliseconds as the API's seconds (`1700000000.5`).
pub fn secs(ms: i64) -> String {
    if ms.rem_euclid(1000) == 0 {
        ms.div_euclid(1000).to_string()
    } else {
        format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
    }
}

pub fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as i64)
}

/// The answer as JSON if it is a successful one, else an error with the status and the body's start.
pub fn success_json(r: &Response) -> anyhow::Result<Value> {
    let head = || String::from_utf8_lossy(&r.body[..r.body.len().min(300)]).trim().to_string();
    let v: Value = match serde_json::from_slice(&r.body) {
        Ok(v) => v,
        Err(e) if r.status == 200 => anyhow::bail!("HTTP 200 but not a JSON answer ({e}): {}", head()),
        Err(_) => anyhow::bail!("HTTP {}: {}", r.status, head()),
    };
    anyhow::ensure!(
        r.status == 200 && v.get("status").and_then(Value::as_str) == Some("success"),
        "HTTP {}: {}",
        r.status,
        head()
    );
    Ok(v)
}

fn num(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => s.parse().ok(),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// A point of an answer: the series' labels (if any), the timestamp in seconds, the value.
pub type Point<'a> = (Option<&'a serde_json::Map<String, Value>>, f64, f64);

/// Every point of a vector or matrix answer.
pub fn points(v: &Value) -> Vec<Point<'_>> {
    let mut out = Vec::new();
    for s in v.pointer("/data/result").and_then(Value::as_array).into_iter().flatten() {
        let metric = s.get("metric").and_then(Value::as_object);
        let one = s.get("value").into_iter();
        let many = s.get("values").and_then(Value::as_array).into_iter().flatten();
        for p in one.chain(many).filter_map(Value::as_array) {
            if let (Some(t), Some(x)) = (p.first().and_then(num), p.get(1).and_then(num)) {
                out.push((metric, t, x));
            }
        }
    }
    out
}

/// The data's end: the newest sample of [`END_MARKER_METRIC`], `max(timestamp(node_load1))`, as an
/// instant query at `hint_ms` (now, or where a load ended). If the data ended more than a lookback
/// before the hint that answer is empty, and the same expression is asked as a range query over the 7
/// days before the hint at a 60 s step: each step sees the newest sample within its lookback, so the
/// largest value over all steps is the newest sample. `None` when neither finds a sample.
pub fn data_end_ms(api: &mut Api, hint_ms: i64) -> anyhow::Result<Option<i64>> {
    let expr = format!("max(timestamp({END_MARKER_METRIC}))");
    let v = success_json(&api.instant(&expr, hint_ms)?.1)?;
    if let Some((_, _, t)) = points(&v).first() {
        return Ok(Some((t * 1000.0).round() as i64));
    }
    let v = success_json(&api.range(&expr, hint_ms - END_SEARCH_BACK_MS, hint_ms, 60_000)?.1)?;
    Ok(points(&v).iter().map(|p| p.2).reduce(f64::max).map(|t| (t * 1000.0).round() as i64))
}

/// The oldest sample of [`END_MARKER_METRIC`] in `[end_ms − window_ms, end_ms]`, roughly (to the
/// step of a range query of at most ~1,500 steps): `min(timestamp(node_load1))` at the first step
/// that sees data. Tells how much of a window the data covers.
pub fn data_start_ms(api: &mut Api, end_ms: i64, window_ms: i64) -> anyhow::Result<Option<i64>> {
    let step_ms = (window_ms / 1440).max(60_000);
    let expr = format!("min(timestamp({END_MARKER_METRIC}))");
    let v = success_json(&api.range(&expr, end_ms - window_ms, end_ms, step_ms)?.1)?;
    Ok(points(&v).iter().map(|p| p.2).reduce(f64::min).map(|t| (t * 1000.0).round() as i64))
}

/// The evaluation time: `--time` if given, else [`data_end_ms`] from `hint_ms`; an error if there is
/// no data to find the end of.
pub fn evaluation_time_ms(api: &mut Api, time_ms: Option<i64>, hint_ms: i64) -> anyhow::Result<i64> {
    if let Some(t) = time_ms {
        return Ok(t);
    }
    data_end_ms(api, hint_ms)?.ok_or_else(|| {
        anyhow::anyhow!(
            "no {END_MARKER_METRIC} sample in the 7 days before {} (no data? load it with --load, or pass --time MS)",
            secs(hint_ms)
        )
    })
}

/// The `q` quantile (0..=1) of sorted values, nearest rank: the smallest value with at least
/// `q · n` values at or below it. NaN for no values.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// The median of values (the mean of the middle two for an even count). NaN for no values.
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_take_the_nearest_rank() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(percentile(&v, 0.5), 50.0);
        assert_eq!(percentile(&v, 0.99), 99.0);
        assert_eq!(percentile(&v, 0.999), 100.0);
        assert_eq!(percentile(&v, 1.0), 100.0);
        assert_eq!(percentile(&v, 0.0), 1.0);
        assert_eq!(percentile(&[7.0], 0.99), 7.0);
        // 5 runs: p99 is the slowest.
        assert_eq!(percentile(&[1.0, 2.0, 3.0, 4.0, 50.0], 0.99), 50.0);
        assert!(percentile(&[], 0.5).is_nan());
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn seconds_for_the_api() {
        assert_eq!(secs(1_700_000_000_000), "1700000000");
        assert_eq!(secs(1_700_000_000_005), "1700000000.005");
        assert_eq!(secs(15_000), "15");
        assert_eq!(secs(-500), "-1.500");
    }

    #[test]
    fn api_paths_keep_the_base_urls_prefix() {
        let d = Duration::from_secs(1);
        assert_eq!(Api::new("http://127.0.0.1:9090", d, 1).expect("url").path("/api/v1/query"), "/api/v1/query");
        assert_eq!(Api::new("http://127.0.0.1:9090/", d, 1).expect("url").path("/api/v1/query"), "/api/v1/query");
        assert_eq!(
            Api::new("http://vm:8481/select/0/prometheus/", d, 1).expect("url").path("/api/v1/query"),
            "/select/0/prometheus/api/v1/query"
        );
    }

    #[test]
    fn points_of_vectors_and_matrices() {
        let v: Value = serde_json::from_str(
            r#"{"status":"success","data":{"resultType":"matrix","result":[
                {"metric":{"instance":"a"},"values":[[1,"2"],[2,"3"]]},{"metric":{},"value":[5,"NaN"]}]}}"#,
        )
        .expect("json");
        let p = points(&v);
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].0.and_then(|m| m.get("instance")).and_then(Value::as_str), Some("a"));
        assert_eq!((p[1].1, p[1].2), (2.0, 3.0));
        assert!(p[2].2.is_nan());
    }
}
