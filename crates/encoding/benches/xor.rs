//! XOR chunk throughput: append 1M samples and decode 1M samples, reported by criterion as elements/s
//! (= samples/s). Two shapes: B1's (timestamps step 1 ms, values uniform in [0, 100)) and a node_exporter-like
//! gauge (15 s scrape with jitter, 2-decimal values). Chunks are cut at 120 samples as Prometheus' head does,
//! and at 8192 samples as a compacted chunk might be.
//!
//! Run: `cargo bench -p tessera-encoding --bench xor`

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group};
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use tessera_encoding::{XorEncoder, XorIter, decode_dense_into, decode_xor_into, encode_dense_always, for_each_xor_sample};
use tessera_model::Sample;

const N: usize = 1_000_000;

fn b1_samples() -> Vec<Sample> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    (0..N as i64).map(|t| Sample::new(t, rng.random_range(0.0..100.0))).collect()
}

fn gauge_samples() -> Vec<Sample> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let mut v = 50.0f64;
    let mut t = 1_700_000_000_000i64;
    (0..N)
        .map(|_| {
            t += 15_000 + rng.random_range(-20..=20);
            v = ((v + rng.random_range(-1.0..1.0)) * 100.0).round() / 100.0;
            Sample::new(t, v)
        })
        .collect()
}

fn encode_chunks(samples: &[Sample], per_chunk: usize) -> Vec<Vec<u8>> {
    samples
        .chunks(per_chunk)
        .map(|c| {
            let mut e = XorEncoder::new();
            for s in c {
                e.append(s.t, s.v);
            }
            e.into_bytes()
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let shapes = [("b1_random", b1_samples()), ("gauge_15s", gauge_samples())];
    let mut g = c.benchmark_group("xor");
    g.sample_size(20);
    g.measurement_time(std::time::Duration::from_secs(3));
    g.throughput(Throughput::Elements(N as u64));
    for (name, samples) in &shapes {
        for per_chunk in [120usize, 8192] {
            let chunks = encode_chunks(samples, per_chunk);
            let bytes: usize = chunks.iter().map(Vec::len).sum();
            eprintln!("{name}/{per_chunk}: {:.3} bytes/sample", bytes as f64 / N as f64);

            g.bench_with_input(BenchmarkId::new(format!("append/{name}"), per_chunk), samples, |b, s| {
                let mut enc = XorEncoder::with_capacity(per_chunk * 10);
                b.iter(|| {
                    for c in s.chunks(per_chunk) {
                        enc.clear();
                        for x in c {
                            enc.append(x.t, x.v);
                        }
                        black_box(enc.bytes());
                    }
                })
            });
            g.bench_with_input(BenchmarkId::new(format!("decode_into/{name}"), per_chunk), &chunks, |b, cs| {
                let mut out = Vec::with_capacity(N);
                b.iter(|| {
                    out.clear();
                    for c in cs {
                        decode_xor_into(c, &mut out).expect("valid");
                    }
                    black_box(out.len())
                })
            });
            g.bench_with_input(BenchmarkId::new(format!("iter_sum/{name}"), per_chunk), &chunks, |b, cs| {
                let mut it = XorIter::new(&[]);
                b.iter(|| {
                    let mut sum = 0.0;
                    for c in cs {
                        it.reset(c);
                        for r in &mut it {
                            sum += r.expect("valid").1;
                        }
                    }
                    black_box(sum)
                })
            });
        }
    }
    g.finish();
}

/// CPU seconds this process has used (user + system), from /proc: on a shared, overloaded machine wall
/// time says more about the neighbours than about the code, CPU time does not.
fn cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th of those.
    let after = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// Samples per CPU-second for append and decode of 1M B1 samples, repeated until ~2 CPU-s are spent.
fn cpu_report() {
    let samples = b1_samples();
    for per_chunk in [120usize, 8192] {
        let chunks = encode_chunks(&samples, per_chunk);
        let mut enc = XorEncoder::with_capacity(per_chunk * 10);
        let (c0, mut reps) = (cpu_seconds(), 0u64);
        while cpu_seconds() - c0 < 1.0 {
            for c in samples.chunks(per_chunk) {
                enc.clear();
                for x in c {
                    enc.append(x.t, x.v);
                }
                black_box(enc.bytes());
            }
            reps += 1;
        }
        let append = (reps * N as u64) as f64 / (cpu_seconds() - c0);
        let mut out = Vec::with_capacity(N);
        let (c0, mut reps) = (cpu_seconds(), 0u64);
        while cpu_seconds() - c0 < 1.0 {
            out.clear();
            for c in &chunks {
                decode_xor_into(c, &mut out).expect("valid");
            }
            black_box(out.len());
            reps += 1;
        }
        let decode = (reps * N as u64) as f64 / (cpu_seconds() - c0);
        let mut it = XorIter::new(&[]);
        let (c0, mut reps) = (cpu_seconds(), 0u64);
        while cpu_seconds() - c0 < 1.0 {
            let mut sum = 0.0;
            for c in &chunks {
                it.reset(c);
                for r in &mut it {
                    sum += r.expect("valid").1;
                }
            }
            black_box(sum);
            reps += 1;
        }
        let iter = (reps * N as u64) as f64 / (cpu_seconds() - c0);
        let (c0, mut reps) = (cpu_seconds(), 0u64);
        while cpu_seconds() - c0 < 1.0 {
            let mut sum = 0.0;
            for c in &chunks {
                for_each_xor_sample(c, i64::MIN, i64::MAX, |_, v| sum += v).expect("valid");
            }
            black_box(sum);
            reps += 1;
        }
        let fold = (reps * N as u64) as f64 / (cpu_seconds() - c0);
        eprintln!(
            "cpu-time b1_random chunk={per_chunk}: append {:.1} M samples/s, decode_xor_into {:.1} M samples/s ({:.2} ms per 1M), XorIter {:.1} M samples/s, for_each_xor_sample sum {:.1} M samples/s",
            append / 1e6,
            decode / 1e6,
            1e3 * N as f64 / decode,
            iter / 1e6,
            fold / 1e6
        );
    }
}

criterion_group!(benches, bench);

/// Bytes/point and decode speed of the dense cold-chunk codec on B1 data.
fn dense_report() {
    let samples = b1_samples();
    for per_chunk in [120usize, 1024, 8192, 65_535] {
        let chunks: Vec<Vec<u8>> = samples.chunks(per_chunk).map(encode_dense_always).collect();
        let xor: usize = encode_chunks(&samples, per_chunk).iter().map(Vec::len).sum();
        let dense: usize = chunks.iter().map(Vec::len).sum();
        let mut out = Vec::with_capacity(N);
        let (c0, mut reps) = (cpu_seconds(), 0u64);
        while cpu_seconds() - c0 < 0.5 {
            out.clear();
            for c in &chunks {
                decode_dense_into(c, &mut out).expect("valid");
            }
            black_box(out.len());
            reps += 1;
        }
        let decode = (reps * N as u64) as f64 / (cpu_seconds() - c0);
        eprintln!(
            "b1_random chunk={per_chunk}: xor {:.3} bytes/point, dense {:.3} bytes/point, dense decode {:.1} M samples/s",
            xor as f64 / N as f64,
            dense as f64 / N as f64,
            decode / 1e6
        );
    }
}

fn main() {
    cpu_report();
    dense_report();
    if std::env::args().any(|a| a == "--cpu-only") {
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
