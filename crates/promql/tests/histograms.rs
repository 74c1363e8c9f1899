//! Native histograms through the engine beyond the conformance scripts: integer-histogram chunks (the
//! scripts load float histograms only), aggregations over histograms pushed into the shards, the
//! max-samples accounting of histograms, mixes of floats and histograms, and HistogramSt chunks built
//! with the encoders (their start timestamps through rate/irate/increase/resets/start_timestamp).

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

/// One bucket (schema 0, bucket 0) holding all `c` observations, each of value 1.
fn one_bucket(c: u64) -> Histogram {
    Histogram { schema: 0, count: c, sum: c as f64, positive_spans: vec![Span::new(0, 1)], positive_buckets: vec![c as i64], ..Histogram::default() }
}

/// Integer-histogram chunks with start timestamps (`HistogramSt`), built with the encoder as the head
/// builds them: `(t, st, count)` per sample, a new chunk at every `cut` index.
fn st_chunks(samples: &[(i64, i64, u64)], cut: &[usize]) -> Vec<tessera_model::ChunkRef> {
    use tessera_encoding::{Appended, HistogramStEncoder};
    let mut out = Vec::new();
    let mut done = |e: &HistogramStEncoder, lo: usize, hi: usize| {
        out.push(tessera_model::ChunkRef {
            mint_ms: samples[lo].0,
            maxt_ms: samples[hi - 1].0,
            encoding: tessera_model::ChunkEncoding::HistogramSt,
            data: bytes::Bytes::copy_from_slice(e.bytes()),
        });
    };
    let mut enc = HistogramStEncoder::new();
    let mut first = 0;
    for (i, &(t, st, c)) in samples.iter().enumerate() {
        if cut.contains(&i) && i > first {
            done(&enc, first, i);
            enc = HistogramStEncoder::new();
            first = i;
        }
        match enc.append(t, st, &one_bucket(c), None).expect("appends") {
            Appended::NewChunk(_) => panic!("no cut expected inside the test data"),
            Appended::InPlace | Appended::Recoded => {}
        }
    }
    done(&enc, first, samples.len());
    out
}

/// A cumulative counter histogram (OTel style) that started at 5 s and restarted at 65 s, scraped every
/// 15 s: 10, 20, 30, 40 observations up to 60 s, then 50, 60, 70, 80 after the restart. The restart is
/// visible only in the start timestamps (the counts keep rising), as with a process that restarted and
/// caught up between two scrapes.
fn restarted_counter() -> MemStorage {
    let samples: Vec<(i64, i64, u64)> = (1..=8)
        .map(|k| {
            let t = k * 15_000;
            let st = if k <= 4 { 5_000 } else { 65_000 };
            (t, st, 10 * k as u64)
        })
        .collect();
    let mut st = MemStorage::new(2);
    st.add_chunks(labels("h_total", "a"), st_chunks(&samples, &[4]));
    st
}

fn one_value(e: &Engine, st: &MemStorage, q: &str, t: i64) -> (Option<f64>, Option<f64>) {
    let r = e.instant(st, q, t).expect("runs");
    let Value::Vector(v) = r.value else { panic!("vector expected") };
    match v.first() {
        None => (None, None),
        Some(s) => (Some(s.v), s.h.as_ref().map(|h| h.count)),
    }
}

/// HistogramSt chunks built with the encoder (not through promqltest) give upstream's answers: with
/// `use_start_timestamps`, `histogramRate` adds the value before a start-timestamp reset and
/// `extrapolatedRate` starts from a zero histogram at the first sample's start time; without it, the
/// same chunks read as plain histograms.
#[test]
fn histogram_st_chunks_give_upstreams_rates() {
    let st = restarted_counter();
    let on = Engine::new(EngineOptions { use_start_timestamps: true, ..Default::default() });
    let off = Engine::default();
    // On: increase over (0, 120 s] = 80 - 10, plus 40 lost at the restart, plus the first sample's 10
    // counted from its start time at 5 s (inside the window, so no extrapolation to the left); the
    // sampled interval 115 s equals the covered one, so the factor is 1: 40 + 80 = 120.
    assert_eq!(one_value(&on, &st, "increase(h_total[2m])", 120_000).1, Some(120.0));
    assert_eq!(one_value(&on, &st, "rate(h_total[2m])", 120_000).1, Some(1.0));
    // Off: 70 over 105 s sampled, extrapolated 15 s to the left: 70 * 120 / 105 = 80.
    let off_increase = one_value(&off, &st, "increase(h_total[2m])", 120_000).1.expect("a histogram");
    assert!((off_increase - 80.0).abs() < 1e-9, "{off_increase}");
    // irate across the restart: the last value over 15 s (a reset) on, the difference off.
    let on_irate = one_value(&on, &st, "irate(h_total[1m])", 75_000).1.expect("a histogram");
    assert!((on_irate - 50.0 / 15.0).abs() < 1e-9, "{on_irate}");
    let off_irate = one_value(&off, &st, "irate(h_total[1m])", 75_000).1.expect("a histogram");
    assert!((off_irate - 10.0 / 15.0).abs() < 1e-9, "{off_irate}");
    assert_eq!(one_value(&on, &st, "resets(h_total[2m])", 120_000).0, Some(1.0));
    assert_eq!(one_value(&off, &st, "resets(h_total[2m])", 120_000).0, Some(0.0));
    // A single sample with its start time inside the window has an increase of its whole value; the
    // window's start is exclusive, so a start time on it does not count.
    assert_eq!(one_value(&on, &st, "increase(h_total[11s])", 15_000).1, Some(10.0));
    assert_eq!(one_value(&on, &st, "increase(h_total[10s])", 15_000), (None, None));
    assert_eq!(one_value(&off, &st, "increase(h_total[11s])", 15_000), (None, None));
    // start_timestamp() returns the sample's start time, in seconds.
    assert_eq!(one_value(&on, &st, "start_timestamp(h_total)", 120_000).0, Some(65.0));
    assert_eq!(one_value(&off, &st, "start_timestamp(h_total)", 120_000), (None, None));
    // A subquery carries no start timestamps: the plain answer.
    let sq = one_value(&on, &st, "resets(h_total[2m:15s])", 120_000).0;
    assert_eq!(sq, Some(0.0));
}

/// The start-timestamp column of a histogram chunk is decoded only when a start-timestamp path asks for
/// it: a chunk whose column is broken still answers every other query, and fails only those.
#[test]
fn histogram_st_column_is_decoded_only_when_needed() {
    let samples: Vec<(i64, i64, u64)> = (1..=4).map(|k| (k * 15_000, 5_000, 10 * k as u64)).collect();
    let mut chunks = st_chunks(&samples, &[]);
    // Break the column: one entry fewer than the samples (the trailer's inner length stays right).
    let (inner, col) = tessera_encoding::split_st_chunk(&chunks[0].data).expect("splits");
    let (inner_len, col_len) = (inner.len(), col.len());
    let mut data = chunks[0].data[..inner_len + col_len - 1].to_vec();
    data.extend_from_slice(&(inner_len as u32).to_be_bytes());
    chunks[0].data = bytes::Bytes::from(data);
    let mut st = MemStorage::new(1);
    st.add_chunks(labels("h_total", "a"), chunks);
    let on = Engine::new(EngineOptions { use_start_timestamps: true, ..Default::default() });
    for q in ["h_total", "sum(h_total)", "histogram_count(h_total)", "delta(h_total[1m])", "count_over_time(h_total[1m])"] {
        assert!(on.instant(&st, q, 60_000).is_ok(), "{q} reads the chunk through its plain prefix");
    }
    assert!(Engine::default().instant(&st, "rate(h_total[1m])", 60_000).is_ok(), "off: never decoded");
    for q in ["rate(h_total[1m])", "irate(h_total[1m])", "increase(h_total[1m])", "resets(h_total[1m])", "start_timestamp(h_total)"] {
        assert!(matches!(on.instant(&st, q, 60_000), Err(EngineError::Storage(_))), "{q} decodes the column");
    }
}

/// A range function over histogram windows stops at the timeout however large one series' windows
/// are (the fuzz found `sum_over_time` of a histogram subquery at a 1 ms step running on for minutes).
#[test]
fn histogram_range_functions_stop_at_the_timeout() {
    let st = store();
    let e = Engine::default();
    let expr = tessera_promql::engine::parse("sum_over_time(h[10m:1ms])").expect("parses");
    let qo = tessera_promql::engine::QueryOptions { timeout: Some(std::time::Duration::from_millis(200)), ..Default::default() };
    let started = std::time::Instant::now();
    let err = e.range_expr(&st, &expr, 0, 600_000, 60_000, &qo).expect_err("stopped");
    assert!(matches!(err, EngineError::Timeout(_) | EngineError::TooManySamples(_)), "{err:?}");
    assert!(started.elapsed() < std::time::Duration::from_secs(20), "took {:?}", started.elapsed());
}
