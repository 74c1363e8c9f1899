//! Helpers shared by the `blocks_*` integration tests: a seeded generator of random series and an
//! in-memory model to compare blocks against.
#![allow(dead_code)]

use std::path::Path;
use tessera_model::{ChunkEncoding, ChunkRef, Labels, Sample};
use tessera_tsdb::block::{write_block_with, BlockMeta, CompactionMeta, WriteOptions};
use tessera_tsdb::Error;

/// xorshift64*: deterministic, dependency-free randomness for tests.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    pub fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo) as u64) as i64
    }
}

/// One series of the model: labels and its chunks' samples.
#[derive(Debug, Clone)]
pub struct ModelSeries {
    pub labels: Labels,
    pub chunks: Vec<Vec<Sample>>,
}

impl ModelSeries {
    pub fn chunk_refs(&self) -> Vec<ChunkRef> {
        self.chunks.iter().map(|s| xor_chunk(s)).collect()
    }
    pub fn samples(&self) -> Vec<Sample> {
        self.chunks.concat()
    }
}

pub fn xor_chunk(s: &[Sample]) -> ChunkRef {
    ChunkRef {
        mint_ms: s[0].t,
        maxt_ms: s[s.len() - 1].t,
        encoding: ChunkEncoding::Xor,
        data: bytes::Bytes::from(tessera_encoding::encode_xor(s)),
    }
}

/// Decodes a chunk of any float encoding (blocks may hold Dense chunks the writer made of XOR runs).
pub fn decode(c: &ChunkRef) -> Vec<Sample> {
    let mut v = Vec::new();
    tessera_encoding::decode_chunk_range_into(c, i64::MIN, i64::MAX, &mut v).expect("valid chunk");
    v
}

/// Random label sets over a small vocabulary (so postings lists share values), sorted and unique,
/// each with 1..=max_chunks non-overlapping chunks of 1..=120 samples inside `[mint, maxt)`.
pub fn random_series(rng: &mut Rng, n: usize, mint: i64, maxt: i64, max_chunks: usize) -> Vec<ModelSeries> {
    let names = ["up", "http_requests_total", "cpu", "mem", "disk_io"];
    let jobs = ["api", "db", "web", "cache"];
    let envs = ["prod", "staging", "dev", "prod-eu"];
    let mut set = std::collections::BTreeSet::new();
    while set.len() < n {
        let mut pairs = vec![
            ("__name__".to_string(), names[rng.below(5) as usize].to_string()),
            ("instance".to_string(), format!("host-{}", rng.below(n as u64 * 2))),
        ];
        if rng.below(3) > 0 {
            pairs.push(("job".into(), jobs[rng.below(4) as usize].into()));
        }
        if rng.below(2) == 0 {
            pairs.push(("env".into(), envs[rng.below(4) as usize].into()));
        }
        set.insert(Labels::from_pairs(pairs));
    }
    set.into_iter()
        .map(|labels| {
            let k = 1 + rng.below(max_chunks as u64) as usize;
            let span = (maxt - mint) / k as i64;
            let mut chunks = Vec::new();
            for c in 0..k {
                let lo = mint + span * c as i64;
                let cnt = 1 + rng.below(120) as i64;
                let step = (span / (cnt + 1)).max(1);
                let mut t = lo + rng.below(step as u64) as i64;
                let mut s = Vec::new();
                for _ in 0..cnt {
                    if t >= lo + span || t >= maxt {
                        break;
                    }
                    let v = match rng.below(10) {
                        0 => tessera_model::STALE_NAN,
                        1 => rng.next() as f64,
                        _ => (rng.below(1000) as f64) / 4.0,
                    };
                    s.push(Sample::new(t, v));
                    t += 1 + rng.below(step as u64) as i64;
                }
                if !s.is_empty() {
                    chunks.push(s);
                }
            }
            ModelSeries { labels, chunks }
        })
        .collect()
}

/// Writes `series` as a level-`level` block with small segments (many segment files even for small data).
pub fn write(dir: &Path, mint: i64, maxt: i64, series: &[ModelSeries], level: u32, sources: Vec<String>) -> Option<BlockMeta> {
    let it = series.iter().map(|s| Ok::<_, Error>((s.labels.clone(), s.chunk_refs())));
    let opts = WriteOptions { max_segment_bytes: 16 << 10, ..Default::default() };
    write_block_with(dir, mint, maxt, it, CompactionMeta { level, sources, ..Default::default() }, &opts).expect("write block")
}

pub fn bits(s: &[Sample]) -> Vec<(i64, u64)> {
    s.iter().map(|x| (x.t, x.v.to_bits())).collect()
}
