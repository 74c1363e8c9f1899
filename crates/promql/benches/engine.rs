//! Engine hot loops: `rate` over 10k series × 1h at a 15 s scrape (range query, 1h, step 60 s), and
//! `sum by` over 100k series (instant). Data sits in [`MemStorage`] as XOR chunks over 4 shards, so the
//! figures include decoding. Run: `cargo bench -p tessera-promql --bench engine`.
//! Smaller sizes for a quick look: `TESSERA_BENCH_SCALE=10` divides the series counts.
//!
//! First figures (2026-11-22, 2 shared cores at load average ~14, so inflated several-fold):
//! rate 10k series × 1h, 61 steps: 313 ms (393 ms before the selector+kernel fusion);
//! sum by (job) over 100k series, instant: 459 ms (1.05 s before the per-shard aggregation pushdown).

use criterion::{Criterion, criterion_group, criterion_main};
use tessera_model::{Labels, Sample};
use tessera_promql::engine::Engine;
use tessera_promql::promqltest::MemStorage;

fn scale() -> usize {
    std::env::var("TESSERA_BENCH_SCALE").ok().and_then(|s| s.parse().ok()).unwrap_or(1).max(1)
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
    drop(st);
    let st = counters(100_000 / scale(), 5, 15_000);
    g.bench_function("sum_by_job_100k_series_instant", |b| {
        b.iter(|| {
            let r = engine.instant(&st, "sum by (job) (http_requests_total)", 60_000).expect("query runs");
            std::hint::black_box(r);
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
