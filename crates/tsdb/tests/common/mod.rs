//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::sync::Arc;

use tessera_model::{Labels, MatchOp, Matcher, Queryable, Sample, SelectHints};
use tessera_tsdb::{Db, FsyncPolicy, Options};

pub fn opts(shards: usize) -> Options {
    Options {
        shards,
        block_range_ms: 1000,
        retention_ms: 0,
        fsync: FsyncPolicy::Never,
        background: false,
        wal_segment_bytes: 64 << 10,
        // No future bound: it must stay under half of this tiny block range (tests that need it set both).
        max_future_ms: 0,
        ..Options::default()
    }
}

pub fn m(op: MatchOp, n: &str, v: &str) -> Matcher {
    Matcher::new(op, n, v).expect("valid matcher")
}

pub fn eq(n: &str, v: &str) -> Matcher {
    m(MatchOp::Equal, n, v)
}

/// Every series matching `ms` in `[mint, maxt]`, decoded (samples filtered to the range), label-sorted.
pub fn query(db: &Arc<Db>, ms: &[Matcher], mint: i64, maxt: i64) -> Vec<(Labels, Vec<Sample>)> {
    let q = db.querier(mint, maxt).expect("querier");
    let set = q.select(ms, &SelectHints::default()).expect("select");
    let mut out = Vec::new();
    for s in set {
        let s = s.expect("series");
        // Contract: chunks sorted and not overlapping.
        for w in s.chunks.windows(2) {
            assert!(w[0].maxt_ms < w[1].mint_ms, "chunks overlap for {}", s.labels);
        }
        let mut v = Vec::new();
        for c in &s.chunks {
            tessera_encoding::decode_chunk_range_into(c, mint, maxt, &mut v).expect("decodes");
        }
        assert!(!v.is_empty(), "series {} returned without samples in range", s.labels);
        out.push((s.labels, v));
    }
    out
}

pub fn bits(v: &[Sample]) -> Vec<(i64, u64)> {
    v.iter().map(|s| (s.t, s.v.to_bits())).collect()
}
