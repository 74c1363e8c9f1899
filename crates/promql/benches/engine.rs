//! Engine hot loops: `rate` over 10k series × 1h at a 15 s scrape (range query, 1h, step 60 s), and
//! `sum by` over 100k series (instant). Data sits in [`MemStorage`] as XOR chunks over 4 shards, so the
//! figures include decoding. Run: `cargo bench -p tessera-promql --bench engine`.
//! Smaller sizes for a quick look: `TESSERA_BENCH_SCALE=10` divides the series counts.
//!
//! First figures (2026-11-22, 2 shared cores at load average ~14, so inflated several-fold):
//! rate 10k series × 1h, 61 steps: 313 ms (393 ms before the selector+kernel fusion);
//! sum by (job) over 100k series, instant: 459 ms (1.05 s before the per-shard aggregation pushdown).
//! Native histograms, 1,000 series x 1h, pushed / central back to back (2026-11-23, load ~4): instant
//! 117/123 ms, 124/125 ms, 120/120 ms; range 56 steps 198/217 ms, 221/214 ms, 206/217 ms for
//! histogram_quantile(sum()), histogram_quantile(sum by (job)), sum() of rate(x[5m]): decoding and the
//! per-series rate dominate, what the pushdown saves is the series x steps histogram vector.

use criterion::{Criterion, criterion_group, criterion_main};
use tessera_model::{Histogram, Labels, Sample, Span};
use tessera_promql::engine::{Engine, EngineOptions};
use tessera_promql::promqltest::MemStorage;

fn scale() -> usize {
    std::env::var("TESSERA_BENCH_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1)
}

/// node_exporter's CPU counters: `n` series of `node_cpu_seconds_total` (16 cpus × 8 modes a host) over
/// `points` scrapes `step_ms` apart, growing by whole centiseconds; with `jitter_ms`, every host's
/// scrape times stray by up to that much from the grid (all series of a host share them, as a scrape's
/// samples do).
fn cpu_counters(n: usize, points: usize, step_ms: i64, jitter_ms: i64) -> MemStorage {
    let mut st = MemStorage::new(4);
    let mut r = Rng(7);
    let hosts = n.div_ceil(128);
    for h in 0..hosts {
        let times: Vec<i64> = (0..points)
            .map(|k| k as i64 * step_ms + if jitter_ms > 0 { (r.unit() * jitter_ms as f64) as i64 } else { 0 })
            .collect();
        for s in 0..128.min(n - h * 128) {
            let l = Labels::from_pairs([
                ("__name__", "node_cpu_seconds_total".to_string()),
                ("cpu", (s / 8).to_string()),
                ("instance", format!("host-{h}")),
                ("mode", ["idle", "iowait", "irq", "nice", "softirq", "steal", "system", "user"][s % 8].to_string()),
            ]);
            let mut v = 1e5 + (s * 1000) as f64;
            let samples: Vec<Sample> = times
                .iter()
                .map(|&t| {
                    v += (r.unit() * 1000.0).floor() / 100.0;
                    Sample::new(t, v)
                })
                .collect();
            st.add_series(l, &samples);
        }
    }
    st
}

fn counters(n: usize, points: usize, step_ms: i64) -> MemStorage {
    let mut st = MemStorage::new(4);
    for i in 0..n {
        let l = Labels::from_pairs([
            ("__name__", "http_requests_total".to_string()),
            ("instance", format!("i{}", i % 100)),
            ("job", format!("job{}", i % 10)),
            ("id", i.to_string()),
        ]);
        let mut v = 0.0;
        let samples: Vec<Sample> = (0..points)
            .map(|k| {
                v += (k % 7) as f64;
                Sample::new(k as i64 * step_ms, v)
            })
            .collect();
        st.add_series(l, &samples);
    }
    st
}

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// `n` series of a schema-3 request-latency histogram (`http_request_duration_seconds`, 10 jobs),
/// 20–70 buckets each (one span, from ~5 ms up), as integer-histogram chunks like scraped ones:
/// every scrape adds a bell-shaped batch of observations with random jitter.
fn latency_histograms(n: usize, points: usize, step_ms: i64) -> MemStorage {
    let mut st = MemStorage::new(4);
    let mut r = Rng(42);
    for i in 0..n {
        let l = Labels::from_pairs([
            ("__name__", "http_request_duration_seconds".to_string()),
            ("instance", format!("i{}", i / 10)),
            ("job", format!("job{}", i % 10)),
        ]);
        let nb = 20 + (i * 7919) % 51;
        let lo = -61i32;
        let (center, sigma) = (nb as f64 * 0.4, nb as f64 / 6.0);
        let mut counts = vec![0u64; nb];
        let mut sum = 0.0;
        let samples: Vec<(i64, Histogram)> = (0..points)
            .map(|k| {
                for (b, c) in counts.iter_mut().enumerate() {
                    let w = (-((b as f64 - center).powi(2)) / (2.0 * sigma * sigma)).exp();
                    let inc = (w * 20.0 * (0.5 + r.unit())).floor() as u64;
                    *c += inc;
                    // Upper bound of bucket `lo + b` at schema 3: 2^((lo + b) / 8).
                    sum += inc as f64 * 2f64.powf((lo + b as i32) as f64 / 8.0) * 0.95;
                }
                let mut prev = 0i64;
                let deltas: Vec<i64> = counts
                    .iter()
                    .map(|c| {
                        let d = *c as i64 - prev;
                        prev = *c as i64;
                        d
                    })
                    .collect();
                let h = Histogram {
                    schema: 3,
                    zero_threshold: 2.938735877055719e-39,
                    count: counts.iter().sum(),
                    sum,
                    positive_spans: vec![Span::new(lo, nb as u32)],
                    positive_buckets: deltas,
                    ..Histogram::default()
                };
                (k as i64 * step_ms, h)
            })
            .collect();
        st.add_histograms(l, &samples).expect("encodes");
    }
    st
}

/// Issue 11 item 6: `sum(rate())` over native histograms and `histogram_quantile` of it, as instant and
/// range queries, with the aggregation pushed into the shards and without (the central path, which is
/// what these queries ran before the pushdown: histogram chunks sent a pushed aggregation back, and
/// aggregations over range functions were not pushed at all).
fn bench_histograms(c: &mut Criterion) {
    let hour = 3_600_000;
    let n = 1_000 / scale();
    let st = latency_histograms(n, 241, 15_000);
    let mut g = c.benchmark_group(format!("native_histograms_{n}_series_1h"));
    g.sample_size(10);
    g.measurement_time(std::time::Duration::from_secs(8));
    let queries = [
        ("quantile_sum", "histogram_quantile(0.99, sum(rate(http_request_duration_seconds[5m])))"),
        ("quantile_sum_by_job", "histogram_quantile(0.99, sum by (job) (rate(http_request_duration_seconds[5m])))"),
        ("sum", "sum(rate(http_request_duration_seconds[5m]))"),
    ];
    // Pushed and central back to back per query: on shared cores the load drifts over minutes.
    for (name, q) in queries {
        for range in [false, true] {
            for pushdown in [true, false] {
                let engine = Engine::new(EngineOptions { aggregation_pushdown: pushdown, ..EngineOptions::default() });
                let mode = if pushdown { "pushed" } else { "central" };
                let kind = if range { "range_step60s" } else { "instant" };
                g.bench_function(format!("{name}_{kind}_{mode}"), |b| {
                    b.iter(|| {
                        let r = if range { engine.range(&st, q, 300_000, hour, 60_000) } else { engine.instant(&st, q, hour) };
                        std::hint::black_box(r.expect("query runs"))
                    })
                });
            }
        }
    }
    g.finish();
}

fn bench(c: &mut Criterion) {
    let engine = Engine::default();
    let hour = 3_600_000;
    let st = counters(10_000 / scale(), 241, 15_000);
    let mut g = c.benchmark_group("engine");
    g.sample_size(10);
    g.bench_function("rate_10k_series_1h_step60s", |b| {
        b.iter(|| {
            let r = engine.range(&st, "rate(http_requests_total[5m])", 0, hour, 60_000).expect("query runs");
            std::hint::black_box(r);
        })
    });
    // A long-window alerting rule (`rate(...[1h])` at one instant): every sample of the hour is read
    // once, so the per-sample passes (decoding, stale markers, counter drops) are what it costs.
    g.bench_function("min_by_job_rate1h_10k_series_instant", |b| {
        b.iter(|| {
            let r = engine.instant(&st, "min by (job) (rate(http_requests_total[1h]))", hour).expect("query runs");
            std::hint::black_box(r);
        })
    });
    drop(st);
    // B3's heaviest dashboard panel: a range query over 3 h at 15 s (720 steps) of counters scraped
    // every 10 s, the rates folded by an ordered aggregation; on the grid and with scrape jitter.
    for (name, jitter) in [("regular", 0), ("jitter25ms", 25)] {
        let st = cpu_counters(4_096 / scale(), 1_080, 10_000, jitter);
        g.bench_function(format!("avg_by_instance_mode_rate5m_4k_series_3h_step15s_{name}"), |b| {
            b.iter(|| {
                let q = "avg by (instance, mode) (rate(node_cpu_seconds_total[5m]))";
                let r = engine.range(&st, q, 600_000, 3 * hour, 15_000).expect("query runs");
                std::hint::black_box(r);
            })
        });
        if jitter > 0 {
            continue;
        }
        // B3's `cpu_busy` panel: the rates summed in the shards (a decomposable fold), a row of 720
        // accumulators a group.
        g.bench_function("sum_by_instance_rate5m_busy_4k_series_3h_step15s", |b| {
            b.iter(|| {
                let q = r#"sum by (instance) (rate(node_cpu_seconds_total{mode!="idle"}[5m]))"#;
                let r = engine.range(&st, q, 600_000, 3 * hour, 15_000).expect("query runs");
                std::hint::black_box(r);
            })
        });
    }
    let st = counters(100_000 / scale(), 5, 15_000);
    g.bench_function("sum_by_job_100k_series_instant", |b| {
        b.iter(|| {
            let r = engine.instant(&st, "sum by (job) (http_requests_total)", 60_000).expect("query runs");
            std::hint::black_box(r);
        })
    });
    g.finish();
}

criterion_group!(benches, bench, bench_histograms);
criterion_main!(benches);
