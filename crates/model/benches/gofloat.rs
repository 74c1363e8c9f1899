//! Float-to-text as a query answer's JSON needs it (`append_f`, Go's `FormatFloat(v, 'f', -1, 64)`),
//! over the values a dashboard's answers carry: rates (long fractions), 2-decimal gauges, whole
//! counters and byte counts, and tiny or huge magnitudes (the general path). Reported by criterion
//! as elements/s (= values/s).
//!
//! Run: `cargo bench -p tessera-model --bench gofloat`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use tessera_model::gofloat::append_f;

const N: usize = 100_000;

fn values(kind: u32) -> Vec<f64> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..N)
        .map(|_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let r = (x >> 11) as f64 / (1u64 << 53) as f64;
            match kind {
                0 => r * 0.25 + 0.001,                             // rate() of CPU seconds
                1 => (r * 10_000.0).round() / 100.0,               // a 2-decimal gauge
                2 => (r * 1e12).round(),                           // a byte counter
                _ => r * 1e-9,                                     // below 1e-5: the general path
            }
        })
        .collect()
}

fn benches(c: &mut Criterion) {
    let mut g = c.benchmark_group("append_f");
    g.throughput(Throughput::Elements(N as u64));
    for (kind, name) in [(0, "rate"), (1, "gauge_2_decimals"), (2, "whole_counter"), (3, "tiny")] {
        let vs = values(kind);
        let mut out = Vec::with_capacity(N * 24);
        g.bench_function(name, |b| {
            b.iter(|| {
                out.clear();
                for &v in &vs {
                    append_f(&mut out, black_box(v));
                    out.push(b',');
                }
                black_box(out.len())
            })
        });
    }
    g.finish();
}

criterion_group!(group, benches);
criterion_main!(group);
