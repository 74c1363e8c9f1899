//! Dense cold chunks (B1's shape): decode throughput (criterion elements/s = samples/s) of 1M uniform
//! doubles in [0, 100) at 1 ms steps, cut into 1,024-sample chunks as the block writer makes them, whole
//! into one buffer (appended, and into each chunk's slice laid out beforehand, as PromQL's parallel decode
//! does) and into a cache-resident one, and with a range that keeps the middle half of every chunk (the boundary chunks of a query).
//!
//! Run: `cargo bench -p tessera-encoding --bench dense`

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use tessera_encoding::{decode_dense_into, decode_dense_range_into, decode_dense_range_into_slice, encode_dense};
use tessera_model::Sample;

const N: usize = 1_000_000;
const CHUNK: usize = 1024;

fn bench(c: &mut Criterion) {
    let mut rng = rand::rngs::StdRng::seed_from_u64(9);
    let samples: Vec<Sample> = (0..N as i64).map(|i| Sample::new(900_000_000 + i, rng.random_range(0.0..100.0))).collect();
    let chunks: Vec<Vec<u8>> = samples.chunks(CHUNK).map(|c| encode_dense(c).expect("denser than XOR")).collect();
    eprintln!("dense: {:.3} bytes/sample", chunks.iter().map(Vec::len).sum::<usize>() as f64 / N as f64);
    let mut g = c.benchmark_group("dense");
    g.sample_size(20);
    g.measurement_time(std::time::Duration::from_secs(3));
    g.throughput(Throughput::Elements(N as u64));
    let mut out = Vec::with_capacity(N);
    g.bench_function("decode_1M", |b| {
        b.iter(|| {
            out.clear();
            for ch in &chunks {
                decode_dense_into(black_box(ch), &mut out).expect("valid chunk");
            }
            assert_eq!(out.len(), N);
        })
    });
    let mut laid_out = vec![Sample::new(0, 0.0); N];
    g.bench_function("decode_1M_into_slices", |b| {
        b.iter(|| {
            let mut n = 0;
            for (ch, dst) in chunks.iter().zip(laid_out.chunks_mut(CHUNK)) {
                n += decode_dense_range_into_slice(black_box(ch), i64::MIN, i64::MAX, dst).expect("valid chunk").len;
            }
            assert_eq!(n, N);
        })
    });
    // Each chunk into a buffer that stays in the L1 cache: the decoder alone, without the memory traffic
    // of a 16 MB output.
    let mut small = Vec::with_capacity(CHUNK);
    g.bench_function("decode_1M_cached_output", |b| {
        b.iter(|| {
            let mut n = 0;
            for ch in &chunks {
                small.clear();
                decode_dense_into(black_box(ch), &mut small).expect("valid chunk");
                n += small.len();
            }
            assert_eq!(n, N);
        })
    });
    g.bench_function("decode_1M_middle_halves", |b| {
        b.iter(|| {
            out.clear();
            for (i, ch) in chunks.iter().enumerate() {
                let t0 = 900_000_000 + (i * CHUNK) as i64;
                decode_dense_range_into(black_box(ch), t0 + CHUNK as i64 / 4, t0 + 3 * CHUNK as i64 / 4 - 1, &mut out)
                    .expect("valid chunk");
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
