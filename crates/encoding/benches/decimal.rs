//! Decimal cold chunks against XOR on monitoring-shaped values: bytes per sample and decode throughput
//! (criterion elements/s = samples/s). Shapes, 1M samples each at a regular 10 s scrape: a centisecond CPU
//! counter growing by U(3, 9) s a scrape (its increments bit-packed), a 2-decimal gauge random walk, and a
//! byte counter moving in 4 KiB pages; for the other layouts, a gauge changing one scrape in 40 (runs of
//! zero differences) and one of small steps with a large jump one scrape in ten (varint differences). XOR chunks are cut at 120 samples (the head's), Decimal ones at 720
//! (a 2 h block's series at 10 s, as the block writer makes them).
//!
//! `decimal_last_5m`: the last five minutes of each 720-sample chunk, as a rule over block data reads it;
//! `decimal_head_last_5m`: of each 120-sample chunk, as a dashboard's newest step reads the head's.
//!
//! `decimal_open`: the head's open chunks (16 samples each, about what one holds before it closes):
//! appending sample by sample and decoding, XOR (`xor_*`) against open decimal chunks (`open_*`).
//!
//! Run: `cargo bench -p tessera-encoding --bench decimal`

use criterion::measurement::WallTime;
use criterion::{BenchmarkGroup, BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use tessera_encoding::{DecimalAppender, XorEncoder, decode_decimal_into, decode_decimal_open_into, decode_decimal_range_into, decode_xor_into, encode_decimal};
use tessera_model::Sample;

const N: usize = 1_000_000;

fn shape(name: &str) -> Vec<Sample> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let mut m = 123_456_789i64;
    (0..N as i64)
        .map(|i| {
            let v = match name {
                "cpu_counter" => {
                    m += rng.random_range(300..900);
                    m as f64 / 100.0
                }
                "small_steps" => {
                    // A counter of small integer steps (requests, packets): one-byte varint deltas.
                    m += rng.random_range(0..50);
                    m as f64
                }
                "gauge_2dec" => {
                    m = (m + rng.random_range(-100..=100)).clamp(0, 1_000_000);
                    m as f64 / 100.0
                }
                "rare_changes" => {
                    // A gauge that holds for a while (filesystem sizes, unit states): runs of zero differences.
                    if rng.random_range(0..40) == 0 {
                        m += rng.random_range(-1000..1000);
                    }
                    m as f64
                }
                "spiky" => {
                    // Small steps and now and then a jump (queue lengths, memory): whole varints beat frames.
                    m += if rng.random_range(0..10) == 0 { rng.random_range(-40_000_000..40_000_000) } else { rng.random_range(-3..4) };
                    m as f64
                }
                _ => {
                    m += rng.random_range(0..64) * 4096;
                    m as f64
                }
            };
            Sample::new(1_700_000_000_000 + i * 10_000, v)
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("decimal");
    g.sample_size(20);
    g.measurement_time(std::time::Duration::from_secs(3));
    g.throughput(Throughput::Elements(N as u64));
    for name in ["cpu_counter", "gauge_2dec", "page_bytes", "rare_changes", "spiky"] {
        let samples = shape(name);
        let xor: Vec<Vec<u8>> = samples
            .chunks(120)
            .map(|c| {
                let mut e = XorEncoder::new();
                for s in c {
                    e.append(s.t, s.v);
                }
                e.into_bytes()
            })
            .collect();
        let dec: Vec<Vec<u8>> = samples.chunks(720).map(|c| encode_decimal(c).expect("exact decimals")).collect();
        let size = |cs: &[Vec<u8>]| cs.iter().map(Vec::len).sum::<usize>() as f64 / N as f64;
        eprintln!("{name}: xor {:.3} bytes/sample, decimal {:.3}", size(&xor), size(&dec));
        decodes(&mut g, name, [("xor_decode", &xor, decode_xor_into), ("decimal_decode", &dec, decode_decimal_into)]);
    }
    g.finish();
    // A rule's five minutes at the end of each 2 h block chunk (the last 30 of 720 samples): the samples
    // before the window are passed, not decoded one by one. Elements/s = chunks/s.
    last_5m(c, "decimal_last_5m", 720, ["cpu_counter", "gauge_2dec", "page_bytes"]);
    // The head's closed chunks (120 samples at 10 s, recoded to Decimal at close): the last five minutes
    // of each, as a refresh's newest step reads the newest closed chunk.
    last_5m(c, "decimal_head_last_5m", 120, ["cpu_counter", "small_steps", "gauge_2dec"]);
    open_chunks(c);
}

type Decode = fn(&[u8], &mut Vec<Sample>) -> Result<(), tessera_encoding::ChunkError>;

/// Decoding every chunk of each set into one vector (elements/s = samples/s).
fn decodes(g: &mut BenchmarkGroup<'_, WallTime>, name: &str, sets: [(&str, &Vec<Vec<u8>>, Decode); 2]) {
    for (id, chunks, decode) in sets {
        g.bench_with_input(BenchmarkId::new(id, name), chunks, |b, cs| {
            let mut out = Vec::with_capacity(N);
            b.iter(|| {
                out.clear();
                for c in cs {
                    decode(c, &mut out).expect("valid");
                }
                black_box(out.len())
            })
        });
    }
}

/// The head's open chunks: 16-sample pieces appended one sample at a time and decoded, XOR against open
/// decimal chunks. Elements/s = samples/s.
fn open_chunks(c: &mut Criterion) {
    const OPEN: usize = 16;
    let mut g = c.benchmark_group("decimal_open");
    g.sample_size(20);
    g.measurement_time(std::time::Duration::from_secs(3));
    g.throughput(Throughput::Elements(N as u64));
    for name in ["cpu_counter", "gauge_2dec", "page_bytes", "small_steps"] {
        let samples = shape(name);
        let xor = |s: &[Sample]| {
            let mut e = XorEncoder::with_capacity(128);
            for x in s {
                e.append(x.t, x.v);
            }
            e.into_bytes()
        };
        let open = |s: &[Sample]| {
            let mut a = DecimalAppender::with_capacity(56);
            let mut last = (i64::MIN, 0u64);
            for x in s {
                assert!(a.append(last.0, last.1, x.t, x.v), "exact decimals");
                last = (x.t, x.v.to_bits());
            }
            a.bytes().to_vec()
        };
        let xs: Vec<Vec<u8>> = samples.chunks(OPEN).map(xor).collect();
        let os: Vec<Vec<u8>> = samples.chunks(OPEN).map(open).collect();
        let size = |cs: &[Vec<u8>]| cs.iter().map(Vec::len).sum::<usize>() as f64 / N as f64;
        eprintln!("{name}, {OPEN}-sample open chunks: xor {:.3} bytes/sample, open decimal {:.3}", size(&xs), size(&os));
        g.bench_with_input(BenchmarkId::new("xor_append", name), &samples, |b, s| b.iter(|| s.chunks(OPEN).map(|c| xor(c).len()).sum::<usize>()));
        g.bench_with_input(BenchmarkId::new("open_append", name), &samples, |b, s| b.iter(|| s.chunks(OPEN).map(|c| open(c).len()).sum::<usize>()));
        decodes(&mut g, name, [("xor_decode", &xs, decode_xor_into), ("open_decode", &os, decode_decimal_open_into)]);
    }
    g.finish();
}

/// The last five minutes of each `len`-sample Decimal chunk of each shape, as a range read takes them.
fn last_5m(c: &mut Criterion, group: &str, len: usize, shapes: [&str; 3]) {
    let mut g = c.benchmark_group(group);
    g.sample_size(20);
    g.measurement_time(std::time::Duration::from_secs(3));
    for name in shapes {
        let samples = shape(name);
        let dec: Vec<(i64, Vec<u8>)> = samples
            .chunks(len)
            .map(|c| (c[c.len() - 1].t - 300_000, encode_decimal(c).expect("exact decimals")))
            .collect();
        g.throughput(Throughput::Elements(dec.len() as u64));
        g.bench_with_input(BenchmarkId::new("range", name), &dec, |b, cs| {
            let mut out = Vec::with_capacity(N);
            b.iter(|| {
                out.clear();
                for (from, c) in cs {
                    decode_decimal_range_into(c, *from, i64::MAX, &mut out).expect("valid");
                }
                black_box(out.len())
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
