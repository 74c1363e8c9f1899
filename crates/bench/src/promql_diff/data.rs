//! The fixed synthetic data set both servers receive: one hour at 15 s intervals, ~70 series whose
//! shapes exercise what PromQL treats specially — counter resets, negative, zero and fractional gauges,
//! gaps longer and shorter than the 5 m lookback, stale markers, constants, NaN and ±Inf values, values
//! beyond int64, and a classic histogram (`_bucket` with `le`, `_sum`, `_count`).
//!
//! Values come from a fixed seed, so every run writes the same values; only the time axis moves (it
//! ends at `end_ms`, which the caller picks near now and prints so a run can be reproduced).

use crate::nodegen::Rng;
use tessera_model::{Labels, Sample, STALE_NAN};

/// Scrape interval of the data set.
pub const STEP_MS: i64 = 15_000;
/// Samples per series (one hour and one sample).
pub const POINTS: i64 = 241;

/// Kinds of series, which the expression generator uses to pick type-correct operands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Counter,
    Gauge,
    /// Classic histogram buckets (`le` label, cumulative counters).
    Bucket,
    /// A gauge whose values include NaN, ±Inf or magnitudes beyond int64.
    Odd,
}

/// A metric family of the data set: its name, kind and the label names its series carry.
#[derive(Debug, Clone, Copy)]
pub struct Family {
    pub name: &'static str,
    pub kind: Kind,
    pub labels: &'static [&'static str],
}

/// Every metric family written, with the label names the generator may match on.
pub const FAMILIES: &[Family] = &[
    Family { name: "tdiff_http_requests_total", kind: Kind::Counter, labels: &["job", "instance", "code"] },
    Family { name: "tdiff_cpu_seconds_total", kind: Kind::Counter, labels: &["job", "instance", "mode"] },
    Family { name: "tdiff_temperature_celsius", kind: Kind::Gauge, labels: &["job", "instance"] },
    Family { name: "tdiff_queue_length", kind: Kind::Gauge, labels: &["job", "instance"] },
    Family { name: "tdiff_gappy", kind: Kind::Gauge, labels: &["job", "instance"] },
    Family { name: "tdiff_flaky", kind: Kind::Gauge, labels: &["job", "instance"] },
    Family { name: "tdiff_constant", kind: Kind::Gauge, labels: &["job", "instance", "kind"] },
    Family { name: "tdiff_request_duration_seconds_bucket", kind: Kind::Bucket, labels: &["job", "instance", "le"] },
    Family { name: "tdiff_request_duration_seconds_sum", kind: Kind::Counter, labels: &["job", "instance"] },
    Family { name: "tdiff_request_duration_seconds_count", kind: Kind::Counter, labels: &["job", "instance"] },
    Family { name: "tdiff_odd", kind: Kind::Odd, labels: &["job", "instance", "kind"] },
];

/// Label values the generator draws from (plus a value no series has).
pub fn label_values(name: &str) -> &'static [&'static str] {
    match name {
        "job" => &["api", "db", "node"],
        "instance" => &["10.0.0.1:9100", "10.0.0.2:9100", "10.0.0.3:9100"],
        "code" => &["200", "404", "500"],
        "mode" => &["idle", "user", "system"],
        "kind" => &["one", "zero", "answer", "negative", "nan", "inf", "huge"],
        "le" => &["0.05", "0.1", "0.25", "1", "2.5", "+Inf"],
        _ => &["x"],
    }
}

const INSTANCES: [&str; 3] = ["10.0.0.1:9100", "10.0.0.2:9100", "10.0.0.3:9100"];
const LES: [f64; 6] = [0.05, 0.1, 0.25, 1.0, 2.5, f64::INFINITY];
const LE_TEXT: [&str; 6] = ["0.05", "0.1", "0.25", "1", "2.5", "+Inf"];

fn labels(name: &str, pairs: &[(&str, &str)]) -> Labels {
    let mut all = vec![("__name__", name)];
    all.extend_from_slice(pairs);
    Labels::from_pairs(all)
}

/// Timestamps `end_ms - (POINTS-1)·STEP_MS ..= end_ms`.
fn times(end_ms: i64) -> impl Iterator<Item = (i64, i64)> {
    (0..POINTS).map(move |i| (i, end_ms - (POINTS - 1 - i) * STEP_MS))
}

/// A counter that grows by `U(0, max_inc)` (rounded to `precision`) and resets to a small value at
/// the sample indexes in `resets`.
fn counter(rng: &mut Rng, end_ms: i64, max_inc: f64, precision: f64, resets: &[i64]) -> Vec<Sample> {
    let mut v = rng.range(0.0, 100.0).round();
    times(end_ms)
        .map(|(i, t)| {
            if resets.contains(&i) {
                v = (rng.range(0.0, 5.0) / precision).round() * precision;
            } else if i > 0 {
                v += (rng.range(0.0, max_inc) / precision).round() * precision;
            }
            Sample::new(t, v)
        })
        .collect()
}

/// The whole data set, series by series (samples in time order), ending at `end_ms`.
pub fn dataset(end_ms: i64) -> Vec<(Labels, Vec<Sample>)> {
    let mut rng = Rng::new(0x7e55e7a);
    let mut out = Vec::new();

    // Counters: requests by job × instance × code; two of them reset.
    for (j, job) in ["api", "db"].iter().enumerate() {
        for (n, inst) in INSTANCES.iter().enumerate() {
            for (c, code) in ["200", "404", "500"].iter().enumerate() {
                let resets: &[i64] = match (j, n, c) {
                    (0, 0, 0) => &[100],
                    (1, 2, 1) => &[40, 200],
                    _ => &[],
                };
                let max_inc = [50.0, 5.0, 1.0][c];
                let s = counter(&mut rng, end_ms, max_inc, 1.0, resets);
                out.push((labels("tdiff_http_requests_total", &[("job", job), ("instance", inst), ("code", code)]), s));
            }
        }
    }
    // Fractional counters by instance × mode; one resets.
    for (n, inst) in INSTANCES.iter().enumerate() {
        for (m, mode) in ["idle", "user", "system"].iter().enumerate() {
            let resets: &[i64] = if n == 1 && m == 1 { &[150] } else { &[] };
            let s = counter(&mut rng, end_ms, [15.0, 4.0, 1.0][m], 0.01, resets);
            out.push((labels("tdiff_cpu_seconds_total", &[("job", "node"), ("instance", inst), ("mode", mode)]), s));
        }
    }
    // Gauges: a random walk in [-10, 10] with quarter steps (so exact zeros occur), per instance.
    for inst in INSTANCES {
        let mut v: f64 = rng.range(-10.0, 10.0).round();
        let s = times(end_ms)
            .map(|(_, t)| {
                v = (v + (rng.range(-2.0, 2.0) * 4.0).round() / 4.0).clamp(-10.0, 10.0);
                Sample::new(t, v)
            })
            .collect();
        out.push((labels("tdiff_temperature_celsius", &[("job", "node"), ("instance", inst)]), s));
    }
    // Integer gauges 0..=5 per job × instance.
    for job in ["api", "db"] {
        for inst in &INSTANCES[..2] {
            let s = times(end_ms).map(|(_, t)| Sample::new(t, (rng.range(0.0, 6.0)).floor())).collect();
            out.push((labels("tdiff_queue_length", &[("job", job), ("instance", inst)]), s));
        }
    }
    // Gaps: one series misses 10 minutes (longer than the lookback), the other short holes.
    for (n, inst) in INSTANCES[..2].iter().enumerate() {
        let s = times(end_ms)
            .filter(|(i, _)| if n == 0 { !(80..120).contains(i) } else { i % 7 != 3 && !(150..156).contains(i) })
            .map(|(i, t)| Sample::new(t, (i as f64 * 0.5).sin() * 3.0 + n as f64))
            .collect();
        out.push((labels("tdiff_gappy", &[("job", "api"), ("instance", inst)]), s));
    }
    // Staleness: one series goes stale for good at sample 160, the other goes stale at 60 and comes
    // back at 100.
    for (n, inst) in INSTANCES[..2].iter().enumerate() {
        let mut s = Vec::new();
        for (i, t) in times(end_ms) {
            let v = 10.0 + (i % 5) as f64;
            match n {
                0 if i < 160 => s.push(Sample::new(t, v)),
                0 if i == 160 => s.push(Sample::new(t, STALE_NAN)),
                1 if !(60..100).contains(&i) => s.push(Sample::new(t, v)),
                1 if i == 60 => s.push(Sample::new(t, STALE_NAN)),
                _ => {}
            }
        }
        out.push((labels("tdiff_flaky", &[("job", "db"), ("instance", inst)]), s));
    }
    // Constants.
    for (kind, v, inst) in [("one", 1.0, INSTANCES[0]), ("zero", 0.0, INSTANCES[1]), ("answer", 42.0, INSTANCES[2]), ("negative", -3.5, INSTANCES[0])]
    {
        let s = times(end_ms).map(|(_, t)| Sample::new(t, v)).collect();
        out.push((labels("tdiff_constant", &[("job", "api"), ("instance", inst), ("kind", kind)]), s));
    }
    // A classic histogram per (job, instance): cumulative buckets, one reset for the db instance.
    for (job, inst) in [("api", INSTANCES[0]), ("api", INSTANCES[1]), ("db", INSTANCES[2])] {
        let mut buckets = [0.0f64; 6];
        let mut sum = 0.0f64;
        let mut series: Vec<Vec<Sample>> = vec![Vec::new(); 8];
        for (i, t) in times(end_ms) {
            if job == "db" && i == 120 {
                buckets = [0.0; 6];
                sum = 0.0;
            }
            let n = (rng.range(0.0, 20.0)).floor() as usize;
            for _ in 0..n {
                let obs = rng.f64() * rng.f64() * 4.0;
                sum += obs;
                for (b, le) in LES.iter().enumerate() {
                    if obs <= *le {
                        buckets[b] += 1.0;
                    }
                }
            }
            for b in 0..6 {
                series[b].push(Sample::new(t, buckets[b]));
            }
            series[6].push(Sample::new(t, (sum * 1000.0).round() / 1000.0));
            series[7].push(Sample::new(t, buckets[5]));
        }
        let mut series = series.into_iter();
        for le in LE_TEXT {
            let s = series.next().expect("six buckets");
            out.push((labels("tdiff_request_duration_seconds_bucket", &[("job", job), ("instance", inst), ("le", le)]), s));
        }
        let s = series.next().expect("sum");
        out.push((labels("tdiff_request_duration_seconds_sum", &[("job", job), ("instance", inst)]), s));
        let s = series.next().expect("count");
        out.push((labels("tdiff_request_duration_seconds_count", &[("job", job), ("instance", inst)]), s));
    }
    // Odd values: NaN now and then, ±Inf now and then, and magnitudes beyond int64.
    for (kind, inst) in [("nan", INSTANCES[0]), ("inf", INSTANCES[1]), ("huge", INSTANCES[2])] {
        let s = times(end_ms)
            .map(|(i, t)| {
                let v = match kind {
                    "nan" if i % 11 == 5 => f64::NAN,
                    "nan" => (i % 9) as f64 - 4.0,
                    "inf" if i % 13 == 6 => f64::INFINITY,
                    "inf" if i % 13 == 9 => f64::NEG_INFINITY,
                    "inf" => (i % 4) as f64 * 0.25,
                    _ => 1e19 * (1.0 + (i % 6) as f64) * if i % 4 == 0 { -1.0 } else { 1.0 },
                };
                Sample::new(t, v)
            })
            .collect();
        out.push((labels("tdiff_odd", &[("job", "node"), ("instance", inst), ("kind", kind)]), s));
    }
    // Prometheus' head hands series to PromQL in creation order (its querier is asked for unsorted
    // series), and what `limitk` keeps, or which of tied values `topk` keeps, follows that order.
    // Creating the series in label order makes that order the sorted one Tessera uses.
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dataset_is_fixed_ordered_and_named_by_the_catalogue() {
        let a = dataset(1_000_000_000);
        assert_eq!(a.len(), 69);
        let b = dataset(1_000_000_000);
        for ((la, sa), (lb, sb)) in a.iter().zip(&b) {
            assert_eq!(la, lb);
            assert_eq!(sa.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>(), sb.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>());
            assert!(sa.windows(2).all(|w| w[0].t < w[1].t), "{la} in time order");
            assert!(a.windows(2).all(|w| w[0].0 < w[1].0), "series in label order");
            assert!(sa.last().is_some_and(|s| s.t <= 1_000_000_000));
            let name = la.get("__name__");
            let fam = FAMILIES.iter().find(|f| f.name == name).expect("family in the catalogue");
            for l in la.iter().filter(|l| l.name != "__name__") {
                assert!(fam.labels.contains(&l.name), "{la}: label {} not in the catalogue", l.name);
                assert!(label_values(l.name).contains(&l.value), "{la}: value {} not in the catalogue", l.value);
            }
        }
    }
}
