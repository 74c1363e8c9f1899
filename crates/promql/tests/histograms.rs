//! Native histograms through the engine beyond the conformance scripts: integer-histogram chunks (the
//! scripts load float histograms only), aggregations over histograms pushed into the shards, the
//! max-samples accounting of histograms, and mixes of floats and histograms.

use tessera_model::{Histogram, Labels, Sample, Span};
use tessera_promql::engine::{Engine, EngineError, EngineOptions, Value};
use tessera_promql::promqltest::MemStorage;

fn labels(name: &str, id: &str) -> Labels {
    Labels::from_pairs([("__name__", name.to_string()), ("id", id.to_string())])
}

/// `count` observations per minute into buckets (0.5,1] and (1,2] (schema 0), every 15 s for `n` samples.
fn int_histograms(n: usize, per_sample: u64) -> Vec<(i64, Histogram)> {
    (0..n)
        .map(|k| {
            let c = k as u64 * per_sample;
            // Deltas: first bucket c, second bucket c as well (delta 0).
            let h = Histogram {
                schema: 0,
                count: 2 * c,
                sum: 3.0 * c as f64,
                positive_spans: vec![Span::new(0, 2)],
                positive_buckets: vec![c as i64, 0],
                ..Histogram::default()
            };
            (k as i64 * 15_000, h)
        })
        .collect()
}

fn store() -> MemStorage {
    let mut st = MemStorage::new(2);
    for id in ["a", "b", "c"] {
        st.add_histograms(labels("h", id), &int_histograms(41, 1)).expect("encodes");
        st.add_series(labels("f", id), &(0..41).map(|k| Sample::new(k * 15_000, k as f64)).collect::<Vec<_>>());
    }
    st
}

#[test]
fn integer_histogram_chunks_are_read_as_float_histograms() {
    let st = store();
    let e = Engine::default();
    let r = e.instant(&st, "h{id=\"a\"}", 60_000).expect("runs");
    let Value::Vector(v) = r.value else { panic!("vector expected") };
    assert_eq!(v.len(), 1);
    let h = v[0].h.as_ref().expect("a histogram sample");
    // k = 4 at 60 s: both buckets 4, count 8, sum 12.
    assert_eq!((h.count, h.sum), (8.0, 12.0));
    assert_eq!(h.positive_buckets, vec![4.0, 4.0]);
    // rate over a minute: 8 observations per minute = 2/15 per second.
    let r = e.instant(&st, "histogram_count(rate(h{id=\"a\"}[1m]))", 300_000).expect("runs");
    let Value::Vector(v) = r.value else { panic!("vector expected") };
    assert!((v[0].v - 8.0 / 60.0).abs() < 1e-9, "{}", v[0].v);
}

#[test]
fn aggregations_over_histograms_in_the_shards() {
    let st = store();
    let e = Engine::default();
    // `sum(selector)` runs inside the shards for histograms as for floats (tests/pushdown.rs compares
    // it with the central path on random data).
    let r = e.instant(&st, "sum(h)", 60_000).expect("runs");
    let Value::Vector(v) = r.value else { panic!("vector expected") };
    let h = v[0].h.as_ref().expect("a histogram sum");
    assert_eq!((h.count, h.sum), (24.0, 36.0));
    assert_eq!(e.instant(&st, "count(h)", 60_000).expect("runs").value, e.instant(&st, "count(f)", 60_000).expect("runs").value);
    // Floats and histograms in one group: nothing, with upstream's warning.
    let r = e.instant(&st, "sum({__name__=~\"h|f\"})", 60_000).expect("runs");
    assert_eq!(r.value, Value::Vector(vec![]));
    assert_eq!(r.warnings, vec!["PromQL warning: encountered a mix of histograms and floats for aggregation".to_string()]);
    // min ignores histograms with an info.
    let r = e.instant(&st, "min({__name__=~\"h|f\"})", 60_000).expect("runs");
    let Value::Vector(v) = r.value else { panic!("vector expected") };
    assert_eq!(v[0].v, 4.0);
    assert_eq!(r.infos, vec!["PromQL info: ignored histogram in min aggregation".to_string()]);
}

#[test]
fn histograms_count_their_size_against_max_samples() {
    let st = store();
    // A histogram with one span of two buckets counts (168 + 8 * 3) / 16 = 12 samples.
    let small = Engine::new(EngineOptions { max_samples: 30, ..EngineOptions::default() });
    assert!(small.instant(&st, "f", 60_000).is_ok(), "3 floats fit");
    assert!(matches!(small.instant(&st, "h", 60_000), Err(EngineError::TooManySamples(_))), "3 histograms of 12 do not");
    let r = Engine::default().instant(&st, "h", 60_000).expect("runs");
    assert_eq!(r.stats.peak_samples, 36);
    // A range function holds one window of one series: 4 histograms of 12 here, 4 floats for `f`.
    assert!(small.instant(&st, "rate(f{id=\"a\"}[1m])", 300_000).is_ok());
    assert!(matches!(small.instant(&st, "rate(h{id=\"a\"}[1m])", 300_000), Err(EngineError::TooManySamples(_))));
}

#[test]
fn histogram_arithmetic_and_comparisons() {
    let st = store();
    let e = Engine::default();
    let r = e.instant(&st, "h{id=\"a\"} * 2", 60_000).expect("runs");
    let Value::Vector(v) = r.value else { panic!("vector expected") };
    assert_eq!(v[0].h.as_ref().map(|h| h.count), Some(16.0));
    // Comparing a histogram with a float drops it, with an info.
    let r = e.instant(&st, "h{id=\"a\"} > 1", 60_000).expect("runs");
    assert_eq!(r.value, Value::Vector(vec![]));
    assert_eq!(r.infos, vec!["PromQL info: incompatible sample types encountered for binary operator \">\": histogram > float".to_string()]);
    // Floats-only functions skip histograms; label functions pass them through.
    assert_eq!(e.instant(&st, "abs(h)", 60_000).expect("runs").value, Value::Vector(vec![]));
    let r = e.instant(&st, "label_replace(h{id=\"a\"}, \"x\", \"y\", \"\", \"\")", 60_000).expect("runs");
    let Value::Vector(v) = r.value else { panic!("vector expected") };
    assert!(v[0].h.is_some() && v[0].labels.get("x") == "y");
}
