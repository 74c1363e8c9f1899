//! Comparing two answers of the Prometheus query API.
//!
//! Hard differences: the HTTP status, `status`, `errorType`, the result type, the set of series (by
//! label set), timestamps (exactly) and values (relative tolerance 1e-6, an absolute 1e-9 near zero,
//! NaN equal to NaN, infinities exact), and for instant results whose order is defined, the order.
//! Soft differences, reported apart: error messages when both sides fail, and warnings/infos.

use super::exprgen::Order;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// A label set, sorted by name.
pub type LabelSet = BTreeMap<String, String>;

/// The outcome of one comparison.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    /// What makes the answers different, one line each (empty: they agree).
    pub hard: Vec<String>,
    /// Both failed with the same type but different messages.
    pub message: Option<String>,
    /// Warnings or infos differ (beyond Prometheus' positions).
    pub annotations: Option<String>,
    /// Warnings or infos differ only by Prometheus' ` (line:col)` positions and repetitions.
    pub positions_only: bool,
}

/// One parsed answer.
#[derive(Debug, Clone)]
pub struct Answer {
    pub http_status: u16,
    pub json: Option<Value>,
    pub raw: String,
}

impl Answer {
    pub fn parse(http_status: u16, body: &[u8]) -> Answer {
        let raw = String::from_utf8_lossy(body).into_owned();
        Answer { http_status, json: serde_json::from_slice(body).ok(), raw }
    }

    /// A success whose result is an empty vector or matrix.
    pub fn is_empty_result(&self) -> bool {
        self.field("data").and_then(|d| d.get("result")).and_then(Value::as_array).is_some_and(Vec::is_empty)
            && self.str_field("status") == "success"
    }

    fn field(&self, name: &str) -> Option<&Value> {
        self.json.as_ref().and_then(|j| j.get(name))
    }

    fn str_field(&self, name: &str) -> &str {
        self.field(name).and_then(Value::as_str).unwrap_or("")
    }

    /// A one-line summary: `error bad_data: msg` or the result type and its size.
    pub fn summary(&self) -> String {
        match self.str_field("status") {
            "error" => format!("HTTP {} {}: {}", self.http_status, self.str_field("errorType"), self.str_field("error")),
            "success" => {
                let data = self.field("data");
                let ty = data.and_then(|d| d.get("resultType")).and_then(Value::as_str).unwrap_or("?");
                let result = data.and_then(|d| d.get("result"));
                match ty {
                    "scalar" | "string" => format!("{ty} {}", result.map_or(String::new(), |r| r.to_string())),
                    _ => format!("{ty} of {}", result.and_then(Value::as_array).map_or(0, Vec::len)),
                }
            }
            _ => format!("HTTP {} (not an API answer) {}", self.http_status, self.raw.chars().take(200).collect::<String>()),
        }
    }

    /// Warnings and infos, sorted; with `positions == false`, without Prometheus' ` (line:col)` suffix,
    /// deduplicated and without its "N more … annotations omitted" line (Tessera's annotations carry
    /// no position, so the same message from several places is one annotation there).
    fn annotations(&self, positions: bool) -> Vec<String> {
        let mut out = Vec::new();
        for key in ["warnings", "infos"] {
            if let Some(a) = self.field(key).and_then(Value::as_array) {
                for w in a {
                    let w = w.as_str().unwrap_or("");
                    if !positions && w.contains(" annotations omitted") {
                        continue;
                    }
                    let w = if positions { w } else { strip_position(w) };
                    out.push(format!("{key}: {w}"));
                }
            }
        }
        out.sort();
        if !positions {
            out.dedup();
        }
        out
    }
}

/// `msg (1:23)` → `msg`.
fn strip_position(w: &str) -> &str {
    if let Some(i) = w.rfind(" (") {
        let tail = &w[i + 2..];
        if let Some(pos) = tail.strip_suffix(')')
            && pos.split(':').count() == 2
            && pos.split(':').all(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
        {
            return &w[..i];
        }
    }
    w
}

/// A float as the API writes it (`"1.5"`, `"NaN"`, `"+Inf"`).
fn value(v: &Value) -> Result<f64, String> {
    let s = v.as_str().ok_or_else(|| format!("value {v} is not a string"))?;
    s.parse::<f64>().map_err(|_| format!("bad value {s:?}"))
}

fn timestamp(v: &Value) -> Result<f64, String> {
    v.as_f64().ok_or_else(|| format!("timestamp {v} is not a number"))
}

/// `[t, "v"]` → (t, v).
fn point(p: &Value) -> Result<(f64, f64), String> {
    let a = p.as_array().filter(|a| a.len() == 2).ok_or_else(|| format!("point {p} is not a pair"))?;
    Ok((timestamp(&a[0])?, value(&a[1])?))
}

fn labels(v: &Value) -> Result<LabelSet, String> {
    let m = v.get("metric").and_then(Value::as_object).ok_or_else(|| format!("no metric in {v}"))?;
    Ok(m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect())
}

pub fn fmt_labels(l: &LabelSet) -> String {
    let inner: Vec<String> = l.iter().map(|(k, v)| format!("{k}={v:?}")).collect();
    format!("{{{}}}", inner.join(", "))
}

/// Equal within the tolerance: NaN equals NaN, infinities exact, relative 1e-6, absolute 1e-9.
pub fn close(a: f64, b: f64) -> bool {
    if a.is_nan() || b.is_nan() {
        return a.is_nan() && b.is_nan();
    }
    if a.is_infinite() || b.is_infinite() {
        return a == b;
    }
    let d = (a - b).abs();
    d <= 1e-9 || d <= 1e-6 * a.abs().max(b.abs())
}

/// The series of a success answer: label set → points (one point for a vector).
type Series = Vec<(LabelSet, Vec<(f64, f64)>)>;

fn series(data: &Value, ty: &str) -> Result<Series, String> {
    let result = data.get("result").ok_or("no result")?;
    match ty {
        "vector" | "matrix" => {
            let arr = result.as_array().ok_or("result is not an array")?;
            arr.iter()
                .map(|s| {
                    if s.get("histogram").is_some() || s.get("histograms").is_some() {
                        return Err("a native histogram in the result".to_string());
                    }
                    let pts = if ty == "vector" {
                        vec![point(s.get("value").ok_or("no value")?)?]
                    } else {
                        s.get("values").and_then(Value::as_array).ok_or("no values")?.iter().map(point).collect::<Result<_, _>>()?
                    };
                    Ok((labels(s)?, pts))
                })
                .collect()
        }
        "scalar" => Ok(vec![(LabelSet::new(), vec![point(result)?])]),
        "string" => {
            let a = result.as_array().filter(|a| a.len() == 2).ok_or("bad string result")?;
            // Strings compare exactly: map them to a value that only equal strings share.
            let s = a[1].as_str().unwrap_or("");
            let mut l = LabelSet::new();
            l.insert("<string>".into(), s.into());
            Ok(vec![(l, vec![(timestamp(&a[0])?, 0.0)])])
        }
        other => Err(format!("unknown result type {other}")),
    }
}

fn fmt_v(v: f64) -> String {
    if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{v}")
    }
}

/// Compares Tessera's answer `t` with Prometheus' answer `p`. `order` applies to instant queries only.
pub fn compare(t: &Answer, p: &Answer, order: Order, instant: bool) -> Outcome {
    let mut out = Outcome::default();
    let (ts, ps) = (t.str_field("status"), p.str_field("status"));
    if t.json.is_none() || p.json.is_none() || ts != ps || t.http_status != p.http_status {
        out.hard.push(format!("tessera: {}\n      prometheus: {}", t.summary(), p.summary()));
        return out;
    }
    let (ta, pa) = (t.annotations(false), p.annotations(false));
    if ta != pa {
        out.annotations = Some(format!("tessera {ta:?} vs prometheus {pa:?}"));
    } else if t.annotations(true) != p.annotations(true) {
        out.positions_only = true;
    }
    if ts == "error" {
        if t.str_field("errorType") != p.str_field("errorType") {
            out.hard.push(format!("tessera: {}\n      prometheus: {}", t.summary(), p.summary()));
        } else if t.str_field("error") != p.str_field("error") {
            out.message = Some(format!("tessera: {}\n      prometheus: {}", t.str_field("error"), p.str_field("error")));
        }
        return out;
    }
    let (td, pd) = (t.field("data"), p.field("data"));
    let ty = |d: Option<&Value>| d.and_then(|d| d.get("resultType")).and_then(Value::as_str).unwrap_or("").to_string();
    let (tty, pty) = (ty(td), ty(pd));
    if tty != pty {
        out.hard.push(format!("result type: tessera {tty}, prometheus {pty}"));
        return out;
    }
    let (tser, pser) = match (series(td.unwrap_or(&Value::Null), &tty), series(pd.unwrap_or(&Value::Null), &pty)) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => {
            out.hard.push(format!("unreadable result: tessera {:?}, prometheus {:?}", a.err(), b.err()));
            return out;
        }
    };
    diff_series(&tser, &pser, &mut out.hard);
    if out.hard.is_empty() && instant && tty == "vector" {
        diff_order(&tser, &pser, order, &mut out.hard);
    }
    out
}

fn by_labels<'a>(s: &'a Series, who: &str, hard: &mut Vec<String>) -> BTreeMap<&'a LabelSet, &'a Vec<(f64, f64)>> {
    let mut m = BTreeMap::new();
    for (l, pts) in s {
        if m.insert(l, pts).is_some() {
            hard.push(format!("{who} answers {} twice", fmt_labels(l)));
        }
    }
    m
}

fn diff_series(t: &Series, p: &Series, hard: &mut Vec<String>) {
    let tm = by_labels(t, "tessera", hard);
    let pm = by_labels(p, "prometheus", hard);
    let only_t: Vec<_> = tm.keys().filter(|l| !pm.contains_key(*l)).collect();
    let only_p: Vec<_> = pm.keys().filter(|l| !tm.contains_key(*l)).collect();
    let show = |ls: &[&&LabelSet], m: &BTreeMap<&LabelSet, &Vec<(f64, f64)>>| {
        let mut s = String::new();
        for l in ls.iter().take(3) {
            let pts = m[**l];
            let _ = write!(s, "\n        {} {}", fmt_labels(l), fmt_points(pts));
        }
        if ls.len() > 3 {
            let _ = write!(s, "\n        … {} more", ls.len() - 3);
        }
        s
    };
    if !only_t.is_empty() {
        hard.push(format!("{} series only in tessera:{}", only_t.len(), show(&only_t, &tm)));
    }
    if !only_p.is_empty() {
        hard.push(format!("{} series only in prometheus:{}", only_p.len(), show(&only_p, &pm)));
    }
    let mut shown = 0;
    for (l, tp) in &tm {
        let Some(pp) = pm.get(l) else { continue };
        if let Some(d) = diff_points(tp, pp) {
            shown += 1;
            if shown <= 3 {
                hard.push(format!("{}: {d}", fmt_labels(l)));
            } else if shown == 4 {
                hard.push("… more series differ".into());
            }
        }
    }
}

fn fmt_points(pts: &[(f64, f64)]) -> String {
    let mut s: Vec<String> = pts.iter().take(4).map(|(t, v)| format!("{}@{t}", fmt_v(*v))).collect();
    if pts.len() > 4 {
        s.push(format!("… ({} points)", pts.len()));
    }
    s.join(" ")
}

/// The first difference between two point lists, if any.
fn diff_points(t: &[(f64, f64)], p: &[(f64, f64)]) -> Option<String> {
    let tt: Vec<f64> = t.iter().map(|x| x.0).collect();
    let pt: Vec<f64> = p.iter().map(|x| x.0).collect();
    if tt != pt {
        let only_t: Vec<f64> = tt.iter().copied().filter(|x| !pt.contains(x)).take(5).collect();
        let only_p: Vec<f64> = pt.iter().copied().filter(|x| !tt.contains(x)).take(5).collect();
        return Some(format!(
            "timestamps differ ({} vs {} points; only tessera {only_t:?}, only prometheus {only_p:?})",
            tt.len(),
            pt.len()
        ));
    }
    let bad: Vec<String> = t
        .iter()
        .zip(p)
        .filter(|(a, b)| !close(a.1, b.1))
        .map(|(a, b)| format!("@{}: tessera {} prometheus {}", a.0, fmt_v(a.1), fmt_v(b.1)))
        .collect();
    if bad.is_empty() {
        None
    } else {
        let n = bad.len();
        let mut s = bad.into_iter().take(2).collect::<Vec<_>>().join(", ");
        if n > 2 {
            let _ = write!(s, " (+{} more points)", n - 2);
        }
        Some(s)
    }
}

fn diff_order(t: &Series, p: &Series, order: Order, hard: &mut Vec<String>) {
    match order {
        Order::Unordered => {}
        Order::ByValue => {
            let differs = t.iter().zip(p).any(|(a, b)| !close(a.1[0].1, b.1[0].1));
            if differs {
                let vals = |s: &Series| s.iter().map(|x| fmt_v(x.1[0].1)).collect::<Vec<_>>().join(" ");
                hard.push(format!("order by value differs: tessera [{}] prometheus [{}]", vals(t), vals(p)));
            }
        }
        Order::ByLabels => {
            if t.iter().zip(p).any(|(a, b)| a.0 != b.0) {
                let ls = |s: &Series| s.iter().take(6).map(|x| fmt_labels(&x.0)).collect::<Vec<_>>().join(" ");
                hard.push(format!("order by labels differs:\n        tessera    {}\n        prometheus {}", ls(t), ls(p)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(body: &str) -> Answer {
        Answer::parse(200, body.as_bytes())
    }

    #[test]
    fn tolerance_and_special_values() {
        assert!(close(f64::NAN, f64::NAN));
        assert!(!close(f64::NAN, 0.0));
        assert!(close(f64::INFINITY, f64::INFINITY));
        assert!(!close(f64::INFINITY, f64::NEG_INFINITY));
        assert!(close(1.0, 1.0 + 1e-9));
        assert!(!close(1.0, 1.001));
        assert!(close(1e-17, 0.0));
    }

    #[test]
    fn vectors_compare_as_sets_unless_ordered() {
        let x = a(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[10,"1"]},{"metric":{"a":"2"},"value":[10,"2"]}]}}"#);
        let y = a(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"2"},"value":[10,"2"]},{"metric":{"a":"1"},"value":[10,"1"]}]}}"#);
        assert!(compare(&x, &y, Order::Unordered, true).hard.is_empty());
        assert!(!compare(&x, &y, Order::ByValue, true).hard.is_empty());
        assert!(!compare(&x, &y, Order::ByLabels, true).hard.is_empty());
        // Range queries never compare order.
        assert!(compare(&x, &y, Order::ByValue, false).hard.is_empty());
    }

    #[test]
    fn ties_may_swap_under_order_by_value() {
        let x = a(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"1"},"value":[10,"1"]},{"metric":{"a":"2"},"value":[10,"1"]}]}}"#);
        let y = a(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{"a":"2"},"value":[10,"1"]},{"metric":{"a":"1"},"value":[10,"1"]}]}}"#);
        assert!(compare(&x, &y, Order::ByValue, true).hard.is_empty());
    }

    #[test]
    fn errors_compare_type_hard_and_message_soft() {
        let x = Answer::parse(400, br#"{"status":"error","errorType":"bad_data","error":"one"}"#);
        let y = Answer::parse(400, br#"{"status":"error","errorType":"bad_data","error":"two"}"#);
        let z = Answer::parse(422, br#"{"status":"error","errorType":"execution","error":"two"}"#);
        let o = compare(&x, &y, Order::Unordered, true);
        assert!(o.hard.is_empty() && o.message.is_some());
        assert!(!compare(&x, &z, Order::Unordered, true).hard.is_empty());
    }

    #[test]
    fn matrix_values_timestamps_and_warnings() {
        let x = a(r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],[2,"NaN"]]}]}}"#);
        let y = a(r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1.0000000001"],[2,"NaN"]]}]},"warnings":["w"]}"#);
        let o = compare(&x, &y, Order::Unordered, false);
        assert!(o.hard.is_empty() && o.annotations.is_some(), "{o:?}");
        let w1 = a(r#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"]},"warnings":["w (1:5)","w (1:9)","1 more warning annotations omitted"]}"#);
        let w2 = a(r#"{"status":"success","data":{"resultType":"scalar","result":[1,"1"]},"warnings":["w"]}"#);
        let o = compare(&w2, &w1, Order::Unordered, true);
        assert!(o.annotations.is_none() && o.positions_only, "{o:?}");
        let z = a(r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1,"1"],[3,"NaN"]]}]}}"#);
        assert!(!compare(&x, &z, Order::Unordered, false).hard.is_empty());
        let s = a(r#"{"status":"success","data":{"resultType":"scalar","result":[1,"+Inf"]}}"#);
        let u = a(r#"{"status":"success","data":{"resultType":"scalar","result":[1,"-Inf"]}}"#);
        assert!(!compare(&s, &u, Order::Unordered, true).hard.is_empty());
    }
}
