//! The read-back: every acknowledged sample must be there, exactly.
//!
//! Each series is read raw with an instant query of a range selector (`{labels}[R]` at the last
//! acknowledged timestamp, `R` covering the first), which answers every stored sample with its own
//! timestamp; the check wants each acknowledged (timestamp, value) pair back bit for bit, and nothing
//! else (the writer's series receive samples from acknowledged requests only). Samples that 400
//! answers said they wrote ([`Claimed`]) are counted back per metric name with `count_over_time`.

use super::writer::{Acknowledged, Claimed};
use super::{now_ms, snippet, Recorder};
use crate::http::{Client, Url};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tessera_model::Labels;

/// What the read-back found.
#[derive(Debug, Default, Clone, Copy)]
pub struct Verified {
    pub series: usize,
    pub acknowledged: u64,
    pub read_back: u64,
    pub claimed: u64,
    pub claimed_read_back: u64,
}

fn secs(ms: i64) -> String {
    format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000))
}

/// Posts an instant query; the parsed JSON of a 200 answer, or a failure recorded.
fn query(client: &mut Client, rec: &Recorder, slow_after: Duration, q: &str, time_ms: i64) -> Option<serde_json::Value> {
    let body = form_urlencoded::Serializer::new(String::new()).append_pair("query", q).append_pair("time", &secs(time_ms)).finish();
    let t0 = Instant::now();
    let r = client.request("POST", "/api/v1/query", &[("Content-Type", "application/x-www-form-urlencoded")], body.as_bytes());
    let what = format!("{q} at {}", secs(time_ms));
    let resp = rec.check("verify", &what, &[200], slow_after, t0.elapsed(), r)?;
    if resp.status != 200 {
        return None;
    }
    match serde_json::from_slice(&resp.body) {
        Ok(v) => Some(v),
        Err(e) => {
            rec.fail(format!("verify: {what}: not JSON ({e}): {}", snippet(&resp.body)));
            None
        }
    }
}

fn labels_of(metric: &serde_json::Value) -> Labels {
    let pairs = metric.as_object().map(|m| m.iter().map(|(k, v)| (k.clone(), v.as_str().unwrap_or("").to_string())).collect::<Vec<_>>());
    Labels::from_pairs(pairs.unwrap_or_default())
}

/// `[ts, "value"]` → (ms, value).
fn point(p: &serde_json::Value) -> Option<(i64, f64)> {
    let ts = p.get(0)?.as_f64()?;
    let v: f64 = p.get(1)?.as_str()?.parse().ok()?;
    Some(((ts * 1000.0).round() as i64, v))
}

pub fn verify(base: &Url, acked: &Acknowledged, claimed: &Claimed, rec: &Recorder, slow_after: Duration) -> Verified {
    let mut client = Client::new(Url { host_port: base.host_port.clone(), path: "/".into() }, slow_after * 2);
    let mut out = Verified::default();
    for (labels, samples) in acked {
        let (Some(first), Some(last)) = (samples.first(), samples.last()) else { continue };
        out.series += 1;
        out.acknowledged += samples.len() as u64;
        let q = format!("{labels}[{}ms]", last.t - first.t + 1000);
        let Some(v) = query(&mut client, rec, slow_after, &q, last.t) else { continue };
        let empty = Vec::new();
        let result = v["data"]["result"].as_array().unwrap_or(&empty);
        let mine: Vec<&serde_json::Value> = result.iter().filter(|r| labels_of(&r["metric"]) == *labels).collect();
        if mine.len() != 1 || result.len() != 1 {
            rec.fail(format!("verify: {q}: {} series in the answer, {} of them {labels}; expected exactly that one", result.len(), mine.len()));
            if mine.is_empty() {
                continue;
            }
        }
        let read: BTreeMap<i64, f64> = mine[0]["values"].as_array().unwrap_or(&empty).iter().filter_map(point).collect();
        let mut missing = Vec::new();
        for s in samples {
            match read.get(&s.t) {
                Some(v) if v.to_bits() == s.v.to_bits() => out.read_back += 1,
                got => missing.push(format!("t={} want {} got {got:?}", s.t, s.v)),
            }
        }
        let extra = read.len() as u64 - (samples.len() - missing.len()) as u64;
        if !missing.is_empty() || extra > 0 {
            missing.truncate(5);
            rec.fail(format!(
                "verify: {labels}: {} acknowledged, {} read back exactly, {extra} other samples; first differences: {}",
                samples.len(),
                read.len() as u64 - extra,
                missing.join("; ")
            ));
        }
    }
    // The partial writes: count what the server said it wrote, per metric name.
    let now = now_ms();
    for (name, &(n, first, _last)) in &claimed.by_name {
        out.claimed += n;
        let q = format!("sum(count_over_time({name}[{}ms]))", now - first + 60_000);
        let Some(v) = query(&mut client, rec, slow_after, &q, now) else { continue };
        let got = v["data"]["result"][0]["value"][1].as_str().and_then(|s| s.parse::<f64>().ok()).unwrap_or(0.0) as u64;
        out.claimed_read_back += got.min(n);
        if got != n {
            rec.fail(format!("verify: {q}: {got}, but 400 answers said {n} samples of {name} were written"));
        }
    }
    out
}
