//! Unpacking frame-of-reference bit-packed streams (`bitpack`, which Decimal chunks and block postings
//! use): 1 M values a run at the widths Decimal chunks of node_exporter data take (a few bits for a
//! gauge's steps, ~10–20 for counters' increments, 33 for large differences, 60 for the widest).
//!
//! `cargo bench -p tessera-encoding --bench bitpack`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use std::hint::black_box;
use tessera_encoding::bitpack::{Unpacker, pack_into};

const N: usize = 1 << 20;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("bitpack_unpack");
    g.throughput(Throughput::Elements(N as u64));
    for w in [3u32, 11, 17, 33, 60] {
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let xs: Vec<i64> = (0..N)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                (x >> (64 - w)) as i64
            })
            .collect();
        let mut packed = Vec::new();
        pack_into(&xs, &mut packed);
        g.bench_with_input(BenchmarkId::from_parameter(format!("width_{w}")), &packed, |b, packed| {
            b.iter(|| {
                let mut u = Unpacker::new(black_box(packed), N, packed.len());
                let mut sum = 0i64;
                while !u.is_done() {
                    let vals = u.buffered().expect("values");
                    sum = vals.iter().fold(sum, |a, v| a.wrapping_add(*v));
                    let k = vals.len();
                    u.consume(k);
                }
                sum
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
