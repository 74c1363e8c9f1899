//! Native-histogram chunk throughput and density: a latency histogram as Prometheus' client libraries
//! expose it (schema 3, observations spread lognormally over ~20 populated buckets, 15 s scrapes, counts
//! growing by a few hundred observations per scrape), appended to integer `HistogramChunk`s the way the
//! head does (a new chunk when the appender asks for one, or once a chunk holds 10 samples and 1 KiB,
//! upstream's `MinSamplesPerHistogramChunk` / `TargetBytesPerHistogramChunk`), then decoded. criterion reports
//! elements/s (= histogram samples/s); the bench prints bytes per sample once.
//!
//! Run: `cargo bench -p tessera-encoding --bench histogram`

use criterion::{Criterion, Throughput, criterion_group};
use rand::{Rng, SeedableRng};
use std::hint::black_box;
use tessera_encoding::{Appended, FloatHistogramEncoder, HistogramEncoder, decode_float_histogram_into, decode_histogram_into};
use tessera_model::histogram::{Histogram, Span};

const N: usize = 100_000;

/// `N` cumulative scrapes of one latency histogram.
fn latency_samples() -> Vec<(i64, Histogram)> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    // Bucket index range of schema 3 for ~0.5 ms .. ~5 s; absolute counts per index.
    let (lo, n) = (-88i32, 106usize);
    let mut counts = vec![0u64; n];
    let (mut sum, mut t) = (0f64, 1_700_000_000_000i64);
    let mut out = Vec::with_capacity(N);
    for _ in 0..N {
        t += 15_000;
        for _ in 0..rng.random_range(200..400) {
            // Lognormal-ish around 40 ms.
            let z: f64 = (0..4).map(|_| rng.random_range(-1.0..1.0)).sum::<f64>() * 0.8;
            let v = 0.04 * z.exp();
            sum += v;
            let idx = (v.log2() * 8.0).ceil() as i32;
            let k = (idx - lo).clamp(0, n as i32 - 1) as usize;
            counts[k] += 1;
        }
        // Spans over the populated indexes (gaps of up to 2 empty buckets bridged, as clients do).
        let mut spans: Vec<Span> = Vec::new();
        let mut deltas = Vec::new();
        let (mut prev_idx, mut prev_count): (Option<i32>, i64) = (None, 0);
        for (k, &c) in counts.iter().enumerate() {
            if c == 0 {
                continue;
            }
            let idx = lo + k as i32;
            match prev_idx {
                Some(p) if idx - p <= 3 => {
                    for _ in p + 1..idx {
                        deltas.push(-prev_count);
                        prev_count = 0;
                    }
                    spans.last_mut().expect("open span").length += (idx - p) as u32;
                }
                Some(p) => spans.push(Span::new(idx - p - 1, 1)),
                None => spans.push(Span::new(idx, 1)),
            }
            deltas.push(c as i64 - prev_count);
            prev_count = c as i64;
            prev_idx = Some(idx);
        }
        let count = counts.iter().sum();
        out.push((
            t,
            Histogram { schema: 3, zero_threshold: 2f64.powi(-128), count, sum, positive_spans: spans, positive_buckets: deltas, ..Histogram::default() },
        ));
    }
    out
}

fn encode(samples: &[(i64, Histogram)]) -> Vec<Vec<u8>> {
    let mut done = Vec::new();
    let mut cur = HistogramEncoder::new();
    for (t, h) in samples {
        if cur.num_samples() >= 10 && cur.bytes().len() >= 1024 {
            let prev = std::mem::take(&mut cur);
            cur.append(*t, h, Some(&prev)).expect("valid");
            done.push(prev.into_bytes());
            continue;
        }
        if let Appended::NewChunk(next) = cur.append(*t, h, None).expect("valid") {
            done.push(std::mem::replace(&mut cur, next).into_bytes());
        }
    }
    done.push(cur.into_bytes());
    done
}

fn bench(c: &mut Criterion) {
    let samples = latency_samples();
    let chunks = encode(&samples);
    let bytes: usize = chunks.iter().map(Vec::len).sum();
    let buckets: usize = samples.iter().map(|s| s.1.positive_buckets.len()).sum::<usize>() / samples.len();
    println!(
        "integer histogram chunks: {:.2} bytes/sample ({} samples, ~{buckets} buckets each, {} chunks)",
        bytes as f64 / samples.len() as f64,
        samples.len(),
        chunks.len()
    );
    let floats: Vec<_> = samples.iter().map(|(t, h)| (*t, h.to_float())).collect();
    let mut fchunks = Vec::new();
    let mut fe = FloatHistogramEncoder::new();
    for (t, h) in &floats {
        if fe.num_samples() >= 10 && fe.bytes().len() >= 1024 {
            fchunks.push(std::mem::take(&mut fe).into_bytes());
        }
        if let Appended::NewChunk(next) = fe.append(*t, h, None).expect("valid") {
            fchunks.push(std::mem::replace(&mut fe, next).into_bytes());
        }
    }
    fchunks.push(fe.into_bytes());
    let fbytes: usize = fchunks.iter().map(Vec::len).sum();
    println!("float histogram chunks: {:.2} bytes/sample", fbytes as f64 / floats.len() as f64);

    let mut g = c.benchmark_group("histogram_chunk");
    g.throughput(Throughput::Elements(samples.len() as u64));
    g.sample_size(10);
    g.bench_function("encode_int", |b| b.iter(|| black_box(encode(black_box(&samples)))));
    g.bench_function("decode_int", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(120);
            let mut n = 0;
            for c in &chunks {
                out.clear();
                decode_histogram_into(c, &mut out).expect("decodes");
                n += out.len();
            }
            black_box(n)
        })
    });
    g.bench_function("decode_float", |b| {
        b.iter(|| {
            let mut out = Vec::with_capacity(120);
            let mut n = 0;
            for c in &fchunks {
                out.clear();
                decode_float_histogram_into(c, &mut out).expect("decodes");
                n += out.len();
            }
            black_box(n)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
