//! The canonical form and checksum of a Prometheus HTTP API query answer, so that the answers of
//! different systems (Tessera, Prometheus, VictoriaMetrics) to the same query can be compared by a hash
//! and, when they differ, by `diff` on their dumps.
//!
//! The canonical form is text: a line with the result type, then per series (sorted by their rendered
//! label set, since systems return series in different orders) a line with the labels in name order and
//! one line per point, `<timestamp ms> <value>`. Float values are rounded to 9 significant digits
//! (`{:.8e}`), so that the last-bit differences of summation orders do not count; `NaN`, `+Inf` and
//! `-Inf` are kept as they are and `-0` becomes `0`. (Two values straddling a rounding boundary still
//! hash differently; the dumps show which.) Native-histogram points are kept as their JSON, exactly.
//! The checksum is xxh3-64 of the canonical bytes.
//!
//! The answer is deserialised into borrowed slices of the body and hashed series by series, because a
//! fleet-wide range query's JSON runs to hundreds of MiB and `serde_json::Value` would need several
//! times that.

use serde::Deserialize;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Write;

/// What [`canonicalise`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    /// Series in the result (1 for a scalar or string result).
    pub series: usize,
    /// Points (samples and histograms) over all series.
    pub points: usize,
    /// xxh3-64 of the canonical form.
    pub checksum: u64,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(borrow, default)]
    data: Option<Data<'a>>,
    #[serde(default, rename = "errorType")]
    error_type: Option<String>,
    #[serde(default)]
    error: Option<String>,
}

#[derive(Deserialize)]
struct Data<'a> {
    #[serde(borrow, rename = "resultType")]
    result_type: Cow<'a, str>,
    #[serde(borrow)]
    result: Vec<Elem<'a>>,
}

/// An element of `data.result`: a series of a vector or matrix, or the timestamp and value of a scalar
/// or string result (`[1700000000.5, "1"]`).
#[derive(Deserialize)]
#[serde(untagged)]
enum Elem<'a> {
    Series(#[serde(borrow)] Series<'a>),
    Number(f64),
    Text(#[serde(borrow)] Cow<'a, str>),
}

type Point<'a> = (f64, Cow<'a, str>);

#[derive(Deserialize)]
struct Series<'a> {
    #[serde(borrow, default)]
    metric: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
    #[serde(borrow, default)]
    value: Option<Point<'a>>,
    #[serde(borrow, default)]
    values: Vec<Point<'a>>,
    #[serde(default)]
    histogram: Option<(f64, serde_json::Value)>,
    #[serde(default)]
    histograms: Vec<(f64, serde_json::Value)>,
}

impl Series<'_> {
    fn points(&self) -> usize {
        self.values.len() + self.histograms.len() + usize::from(self.value.is_some()) + usize::from(self.histogram.is_some())
    }
}

/// A value rounded to 9 significant digits; the API's special values as they are.
pub fn canonical_value(v: &str) -> Cow<'_, str> {
    match v {
        "NaN" | "+Inf" | "-Inf" => Cow::Borrowed(v),
        _ => match v.parse::<f64>() {
            Ok(x) if x.is_nan() => Cow::Borrowed("NaN"),
            Ok(x) if x.is_infinite() => Cow::Borrowed(if x > 0.0 { "+Inf" } else { "-Inf" }),
            // `+ 0.0` turns -0 into 0.
            Ok(x) => Cow::Owned(format!("{:.8e}", x + 0.0)),
            Err(_) => Cow::Borrowed(v),
        },
    }
}

/// The API's timestamps are seconds with (at most) millisecond precision.
fn ts_ms(t: f64) -> i64 {
    (t * 1000.0).round() as i64
}

fn render_labels(metric: &BTreeMap<Cow<'_, str>, Cow<'_, str>>) -> String {
    let mut s = String::with_capacity(16 + metric.len() * 24);
    s.push('{');
    for (i, (n, v)) in metric.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "{n}={v:?}");
    }
    s.push('}');
    s
}

/// Feeds the canonical form to the hasher and, when dumping, to a writer.
struct Sink<'w> {
    hasher: xxhash_rust::xxh3::Xxh3,
    dump: Option<&'w mut dyn Write>,
}

impl Sink<'_> {
    fn put(&mut self, text: &str) -> std::io::Result<()> {
        self.hasher.update(text.as_bytes());
        if let Some(w) = self.dump.as_mut() {
            w.write_all(text.as_bytes())?;
        }
        Ok(())
    }
}

/// Parses a query answer (`{"status":"success","data":{...}}`), writes its canonical form to `dump`
/// if given, and returns its size and checksum. An error answer (`"status":"error"`) or a body that is
/// not an answer is an error naming what the server said.
pub fn canonicalise(body: &[u8], dump: Option<&mut dyn Write>) -> anyhow::Result<Summary> {
    let env: Envelope<'_> = serde_json::from_slice(body).map_err(|e| {
        let head: String = String::from_utf8_lossy(&body[..body.len().min(300)]).into_owned();
        anyhow::anyhow!("not a query answer ({e}): {head}")
    })?;
    if env.status != "success" {
        anyhow::bail!(
            "{}: {}",
            env.error_type.as_deref().unwrap_or(&env.status),
            env.error.as_deref().unwrap_or("(no message)")
        );
    }
    let data = env.data.ok_or_else(|| anyhow::anyhow!("a successful answer without data"))?;
    let mut sink = Sink { hasher: xxhash_rust::xxh3::Xxh3::new(), dump };
    sink.put(&format!("{}\n", data.result_type))?;
    let mut series = Vec::with_capacity(data.result.len());
    let mut loose = Vec::new();
    for e in data.result {
        match e {
            Elem::Series(s) => series.push((render_labels(&s.metric), s)),
            Elem::Number(t) => loose.push(ts_ms(t).to_string()),
            Elem::Text(v) => loose.push(canonical_value(&v).into_owned()),
        }
    }
    if !loose.is_empty() {
        // A scalar or string: `[time, "value"]`.
        sink.put(&format!("{}\n", loose.join(" ")))?;
        return Ok(Summary { series: 1, points: 1, checksum: sink.hasher.digest() });
    }
    series.sort_by(|a, b| a.0.cmp(&b.0));
    let mut points = 0;
    let mut buf = String::with_capacity(4096);
    for (labels, s) in &series {
        points += s.points();
        buf.clear();
        buf.push_str(labels);
        buf.push('\n');
        for (t, v) in s.value.iter().chain(&s.values) {
            let _ = writeln!(buf, "{} {}", ts_ms(*t), canonical_value(v));
            if buf.len() > 1 << 16 {
                sink.put(&buf)?;
                buf.clear();
            }
        }
        for (t, h) in s.histogram.iter().chain(&s.histograms) {
            let _ = writeln!(buf, "{} H{h}", ts_ms(*t));
        }
        sink.put(&buf)?;
    }
    Ok(Summary { series: series.len(), points, checksum: sink.hasher.digest() })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sum(body: &str) -> Summary {
        canonicalise(body.as_bytes(), None).expect("an answer")
    }

    #[test]
    fn values_keep_nine_significant_digits_and_special_values() {
        assert_eq!(canonical_value("0.30000000000000004"), "3.00000000e-1");
        assert_eq!(canonical_value("0.3"), "3.00000000e-1");
        assert_eq!(canonical_value("123456789012"), "1.23456789e11");
        assert_eq!(canonical_value("-0"), "0.00000000e0");
        assert_eq!(canonical_value("0"), "0.00000000e0");
        assert_eq!(canonical_value("NaN"), "NaN");
        assert_eq!(canonical_value("+Inf"), "+Inf");
        assert_eq!(canonical_value("-Inf"), "-Inf");
        assert_eq!(canonical_value("1e400"), "+Inf");
    }

    #[test]
    fn checksum_ignores_series_order_and_float_noise() {
        let a = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"instance":"a","job":"node"},"value":[1700000000.5,"0.30000000000000004"]},
            {"metric":{"job":"node","instance":"b"},"value":[1700000000.5,"NaN"]}]}}"#;
        let b = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"instance":"b","job":"node"},"value":[1700000000.500,"NaN"]},
            {"metric":{"instance":"a","job":"node"},"value":[1700000000.5,"0.3"]}]},"stats":{"x":1}}"#;
        let (x, y) = (sum(a), sum(b));
        assert_eq!(x, y);
        assert_eq!((x.series, x.points), (2, 2));
        // A real difference (a value, a label, a timestamp) changes it.
        assert_ne!(sum(&a.replace("0.30000000000000004", "0.31")).checksum, x.checksum);
        assert_ne!(sum(&a.replace(r#""instance":"a""#, r#""instance":"c""#)).checksum, x.checksum);
        assert_ne!(sum(&a.replace("1700000000.5,\"NaN\"", "1700000001.5,\"NaN\"")).checksum, x.checksum);
        // A vector and a matrix with the same points are different answers.
        let m = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"instance":"a","job":"node"},"values":[[1700000000.5,"0.3"]]},
            {"metric":{"instance":"b","job":"node"},"values":[[1700000000.5,"NaN"]]}]}}"#;
        assert_ne!(sum(m).checksum, x.checksum);
    }

    #[test]
    fn matrices_count_points_and_the_dump_is_the_hashed_text() {
        let m = r#"{"status":"success","data":{"resultType":"matrix","result":[
            {"metric":{"__name__":"up","instance":"h:9100"},"values":[[1,"1"],[2,"1"],[3.25,"+Inf"]]},
            {"metric":{"__name__":"up","instance":"a:9100"},"values":[[1,"-2.5"]]}]}}"#;
        let mut out = Vec::new();
        let s = canonicalise(m.as_bytes(), Some(&mut out)).expect("answer");
        assert_eq!((s.series, s.points), (2, 4));
        let text = String::from_utf8(out).expect("utf8");
        assert_eq!(
            text,
            "matrix\n{__name__=\"up\", instance=\"a:9100\"}\n1000 -2.50000000e0\n\
             {__name__=\"up\", instance=\"h:9100\"}\n1000 1.00000000e0\n2000 1.00000000e0\n3250 +Inf\n"
        );
        assert_eq!(s.checksum, xxhash_rust::xxh3::xxh3_64(text.as_bytes()));
    }

    #[test]
    fn scalars_empty_results_and_errors() {
        let s = sum(r#"{"status":"success","data":{"resultType":"scalar","result":[1700000000,"2"]}}"#);
        assert_eq!((s.series, s.points), (1, 1));
        let e = sum(r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#);
        assert_eq!((e.series, e.points), (0, 0));
        let err = canonicalise(br#"{"status":"error","errorType":"bad_data","error":"parse error"}"#, None)
            .expect_err("an error answer");
        assert_eq!(err.to_string(), "bad_data: parse error");
        assert!(canonicalise(b"<html>502</html>", None).is_err());
    }
}
