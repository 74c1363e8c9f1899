//! The cold codec (`Options::cold_codec`): blocks written with Dense chunks answer every query exactly
//! as the head did and as XOR blocks do — after the head cut, after compaction, with deletions — while
//! taking less disk for random-looking values; smooth series stay XOR; remote read's conversion
//! (`to_xor_chunks`) hands out XOR chunks with the same samples.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use tessera_model::{ChunkEncoding, Labels, MatchOp, Queryable, Sample, SelectHints};
use tessera_tsdb::block::Block;
use tessera_tsdb::options::ColdCodec;
use tessera_tsdb::{Db, Options};

fn series(i: usize) -> Labels {
    Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string())])
}

/// splitmix64, for values with all 53 bits random (B1's shape) on some series.
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Six series over `[0, upto)` at 1 ms steps: 0–3 random doubles in [0, 100) (Dense wins), 4 a counter
/// (XOR wins), 5 random with stale markers and NaN payloads sprinkled in.
fn fill(db: &Arc<Db>, upto: i64) {
    for t0 in (0..upto).step_by(500) {
        let mut app = db.appender();
        for i in 0..6usize {
            let s: Vec<Sample> = (t0..t0 + 500)
                .map(|t| {
                    let r = mix(t as u64 * 31 + i as u64);
                    let v = match i {
                        4 => (t / 3) as f64,
                        5 if r.is_multiple_of(97) => tessera_model::STALE_NAN,
                        5 if r.is_multiple_of(89) => f64::from_bits(0x7ff8_0000_0000_0000 | (r & 0xffff)),
                        _ => (r >> 11) as f64 / (1u64 << 53) as f64 * 100.0,
                    };
                    Sample::new(t, v)
                })
                .collect();
            app.add(series(i), &s);
        }
        let r = app.commit().expect("commit");
        assert!(r.rejected.is_empty(), "{r:?}");
    }
}

/// Every series' samples as (t, value bits), label-sorted.
type Answer = Vec<(Labels, Vec<(i64, u64)>)>;

fn all_bits(db: &Arc<Db>, mint: i64, maxt: i64) -> Answer {
    query(db, &[eq("__name__", "m")], mint, maxt).into_iter().map(|(l, s)| (l, bits(&s))).collect()
}

const RANGES: [(i64, i64); 5] = [(0, i64::MAX / 2), (0, 0), (1234, 5678), (2999, 3001), (7000, 20_000)];

fn answers(db: &Arc<Db>) -> Vec<Answer> {
    RANGES.iter().map(|&(a, b)| all_bits(db, a, b)).collect()
}

/// Encodings of the chunks the querier hands out for series `i` over everything.
fn encodings(db: &Arc<Db>, i: usize) -> Vec<ChunkEncoding> {
    let q = db.querier(i64::MIN / 2, i64::MAX / 2).expect("querier");
    let set = q.select(&[eq("i", &i.to_string())], &SelectHints::default()).expect("select");
    set.flat_map(|s| s.expect("series").chunks.into_iter().map(|c| c.encoding)).collect()
}

/// The share of series `i`'s samples that the querier hands out in Dense chunks.
fn dense_share(db: &Arc<Db>, i: usize) -> f64 {
    share(db, i, ChunkEncoding::Dense)
}

/// The share of series `i`'s samples that the querier hands out in chunks of `enc`.
fn share(db: &Arc<Db>, i: usize, enc: ChunkEncoding) -> f64 {
    let q = db.querier(i64::MIN / 2, i64::MAX / 2).expect("querier");
    let set = q.select(&[eq("i", &i.to_string())], &SelectHints::default()).expect("select");
    let (mut dense, mut all) = (0, 0);
    for s in set {
        for c in s.expect("series").chunks {
            let mut v = Vec::new();
            tessera_encoding::decode_chunk_range_into(&c, i64::MIN, i64::MAX, &mut v).expect("decodes");
            all += v.len();
            if c.encoding == enc {
                dense += v.len();
            }
        }
    }
    dense as f64 / all.max(1) as f64
}

fn block_dirs(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for e in std::fs::read_dir(dir).expect("ls").flatten() {
        let p = e.path();
        if p.is_dir() {
            if p.join("meta.json").exists() {
                out.push(p);
            } else {
                block_dirs(&p, out);
            }
        }
    }
}

/// (samples in the blocks' meta.json stats, chunk bytes on disk).
fn block_stats(dir: &Path) -> (u64, u64) {
    let mut dirs = Vec::new();
    block_dirs(dir, &mut dirs);
    let (mut samples, mut bytes) = (0, 0);
    for d in dirs {
        samples += Block::open(&d).expect("open block").meta().stats.num_samples;
        for f in std::fs::read_dir(d.join("chunks")).expect("chunks").flatten() {
            bytes += f.metadata().expect("stat").len();
        }
    }
    (samples, bytes)
}

fn open(dir: &Path, codec: ColdCodec) -> Arc<Db> {
    Db::open(dir, Options { block_range_ms: 2000, cold_codec: codec, ..opts(2) }).expect("open")
}

#[test]
fn dense_blocks_answer_like_the_head_and_like_xor_blocks() {
    let (dx, dd) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
    let (x, d) = (open(dx.path(), ColdCodec::Xor), open(dd.path(), ColdCodec::Dense));
    // Everything in the head first.
    let upto = 12_000;
    let head = {
        let dh = tempfile::tempdir().expect("tmp");
        let h = Db::open(dh.path(), Options { block_range_ms: 1 << 40, ..opts(2) }).expect("open");
        fill(&h, upto);
        assert_eq!(h.stats().blocks, 0);
        answers(&h)
    };
    fill(&x, upto);
    fill(&d, upto);
    assert!(d.stats().blocks >= 2, "head cuts wrote blocks: {:?}", d.stats());
    assert_eq!(answers(&d), head, "dense blocks + head after inline cuts");
    d.flush().expect("flush");
    x.flush().expect("flush");
    assert_eq!(d.stats().head_samples, 0);
    assert_eq!(answers(&d), head, "after the final flush");
    assert_eq!(answers(&x), head);

    // Random doubles went Dense (all but short leftovers where a head chunk was closed at a block
    // boundary: a few samples do not pay for Dense's header), the counter (small integers) went Decimal
    // (again but for short leftovers); XOR blocks hold only XOR.
    assert!(dense_share(&d, 0) > 0.95, "{:?}", encodings(&d, 0));
    let counter = encodings(&d, 4);
    assert!(counter.iter().all(|&e| matches!(e, ChunkEncoding::Decimal | ChunkEncoding::Xor)), "{counter:?}");
    assert!(share(&d, 4, ChunkEncoding::Decimal) > 0.9, "{counter:?}");
    assert!(encodings(&x, 0).iter().all(|&e| e == ChunkEncoding::Xor));
    // Dense chunks hold up to 1024 samples: 8 head chunks of 120.
    let n0 = encodings(&d, 0).len();
    assert!(n0 * 960 <= upto as usize + 960 * d.stats().blocks as usize, "{n0} chunks");

    // Blocks' sample statistics count Dense chunks right; Dense takes clearly less disk.
    let ((sx, bx), (sd, bd)) = (block_stats(dx.path()), block_stats(dd.path()));
    assert_eq!(sx, 6 * upto as u64);
    assert_eq!(sd, sx);
    assert!(bd * 100 < bx * 93, "dense {bd} bytes vs xor {bx}");

    // Compaction (Dense chunks copied or merged) and deletions (chunks cut and re-encoded).
    d.compact().expect("compact");
    assert_eq!(answers(&d), head, "after compaction");
    for db in [&x, &d] {
        db.delete(2500, 4321, &[eq("i", "1")]).expect("delete");
        db.delete(0, 100_000, &[eq("i", "3")]).expect("delete");
        db.delete(7777, 7777, &[m(MatchOp::Regex, "i", "0|5")]).expect("delete");
    }
    let deleted = answers(&x);
    assert_ne!(deleted, head);
    assert_eq!(answers(&d), deleted, "tombstones over dense chunks");
    d.compact().expect("compact");
    d.clean_tombstones().expect("clean");
    assert_eq!(answers(&d), deleted, "after rewriting without the deleted data");
    assert!(encodings(&d, 1).contains(&ChunkEncoding::Dense), "{:?}", encodings(&d, 1));
    assert_eq!(block_stats(dd.path()).0, sx - (4321 - 2500 + 1) - upto as u64 - 2);

    // Reopened: the same.
    drop(d);
    let d = open(dd.path(), ColdCodec::Dense);
    assert_eq!(answers(&d), deleted, "after reopening");
    // A database may switch codecs: old Dense blocks stay readable, new ones are XOR.
    drop(d);
    let d = open(dd.path(), ColdCodec::Xor);
    assert_eq!(answers(&d), deleted);
}

#[test]
fn remote_read_conversion_gives_xor_with_the_same_samples() {
    let dd = tempfile::tempdir().expect("tmp");
    let d = open(dd.path(), ColdCodec::Dense);
    fill(&d, 6000);
    d.flush().expect("flush");
    let q = d.querier(0, 5999).expect("querier");
    let mut dense = 0;
    for s in q.select(&[eq("__name__", "m")], &SelectHints::default()).expect("select") {
        let s = s.expect("series");
        let (mut want, mut got) = (Vec::new(), Vec::new());
        for c in &s.chunks {
            dense += usize::from(c.encoding == ChunkEncoding::Dense);
            tessera_encoding::decode_chunk_range_into(c, i64::MIN, i64::MAX, &mut want).expect("decodes");
            for x in tessera_encoding::to_xor_chunks(c, 120).expect("converts") {
                assert_eq!(x.encoding, ChunkEncoding::Xor);
                assert!(x.mint_ms >= c.mint_ms && x.maxt_ms <= c.maxt_ms);
                tessera_encoding::decode_xor_into(&x.data, &mut got).expect("xor decodes");
            }
        }
        assert_eq!(bits(&got), bits(&want), "{}", s.labels);
        assert_eq!(want.len(), 6000);
    }
    assert!(dense > 0);
}

/// Chunks the querier hands out for series `i`: (encoding, samples, bytes).
fn chunks_of(db: &Arc<Db>, i: usize) -> Vec<(ChunkEncoding, usize, usize)> {
    let q = db.querier(i64::MIN / 2, i64::MAX / 2).expect("querier");
    let set = q.select(&[eq("i", &i.to_string())], &SelectHints::default()).expect("select");
    set.flat_map(|s| {
        s.expect("series").chunks.into_iter().map(|c| {
            let mut v = Vec::new();
            tessera_encoding::decode_chunk_range_into(&c, i64::MIN, i64::MAX, &mut v).expect("decodes");
            (c.encoding, v.len(), c.data.len())
        })
    })
    .collect()
}

/// With a cold codec other than XOR the head keeps its closed float chunks of exact decimals (what
/// scrapes send) as Decimal chunks, older ones merged, less than half of XOR's bytes here, answering bit
/// for bit as XOR does; values that are not exact decimals stay XOR; a head cut merges the Decimal
/// chunks into one per block range.
#[test]
fn the_head_keeps_closed_decimal_chunks_and_cuts_merge_them() {
    let (dx, dd) = (tempfile::tempdir().expect("tmp"), tempfile::tempdir().expect("tmp"));
    let big = Options { block_range_ms: 4 * 3600 * 1000, ..opts(1) };
    let x = Db::open(dx.path(), Options { cold_codec: ColdCodec::Xor, ..big.clone() }).expect("open");
    let d = Db::open(dd.path(), Options { cold_codec: ColdCodec::Dense, ..big }).expect("open");
    // And one whose head is cut while the samples arrive (1 h blocks): what the cuts drop is counted out.
    let dc = tempfile::tempdir().expect("tmp");
    let c = Db::open(dc.path(), Options { cold_codec: ColdCodec::Dense, block_range_ms: 3600 * 1000, ..opts(1) }).expect("open");
    // 1,000 scrapes 10 s apart (about 2.8 h): series 0 a centisecond counter with random increments,
    // series 1 random doubles, series 2 a counter ending in a stale marker.
    let mut m = 1_234_567i64;
    for k in 0..1000i64 {
        let r = mix(k as u64);
        m += 300 + (r % 600) as i64;
        let t = k * 10_000;
        let stale = if k == 999 { tessera_model::STALE_NAN } else { (k * 7) as f64 };
        for db in [&x, &d, &c] {
            let mut app = db.appender();
            app.add(series(0), &[Sample::new(t, m as f64 / 100.0)]);
            app.add(series(1), &[Sample::new(t, (r >> 11) as f64 / (1u64 << 53) as f64)]);
            app.add(series(2), &[Sample::new(t, stale)]);
            app.commit().expect("commit");
        }
    }
    assert_eq!(d.stats().blocks, 0, "everything in the head");
    let st = c.stats();
    assert!(st.blocks >= 1, "{st:?}");
    assert_eq!(st.head_samples, 3 * (0..1000i64).filter(|k| k * 10_000 >= st.head_min_t).count() as u64, "{st:?}");
    let whole = |db: &Arc<Db>| all_bits(db, i64::MIN / 2, i64::MAX / 2);
    assert_eq!(whole(&d), whole(&x));
    for i in [0, 2] {
        let (cx, cd) = (chunks_of(&x, i), chunks_of(&d, i));
        assert!(cx.iter().all(|c| c.0 == ChunkEncoding::Xor), "{cx:?}");
        // Every closed chunk Decimal, older ones merged up to 480 samples, the newest closed one as it
        // was cut (at the open decimal chunk's byte cap, ~13 samples of these); the open one (the last,
        // an open decimal chunk) within its cap, unless the last sample took it to the cap and closed it.
        let n = cd.len();
        let closed = n - usize::from(cd[n - 1].0 == ChunkEncoding::DecimalOpen);
        assert!(cd[..closed].iter().all(|c| c.0 == ChunkEncoding::Decimal && c.1 <= 480), "{cd:?}");
        assert!((8..=120).contains(&cd[closed - 1].1), "{cd:?}");
        assert!(cd[closed..].iter().all(|c| c.2 < tessera_tsdb::head::OPEN_DECIMAL_BYTES), "{cd:?}");
        assert!(cd[..closed - 1].iter().any(|c| c.1 > 120) && n < cx.len(), "{cd:?}");
        assert_eq!(cd.iter().map(|c| c.1).sum::<usize>(), 1000);
        let bytes = |c: &[(ChunkEncoding, usize, usize)], k: usize| c[..k].iter().map(|c| c.2).sum::<usize>();
        assert!(bytes(&cd, closed) * 2 < bytes(&cx, cx.len() - 1), "series {i}: {} against {} bytes", bytes(&cd, closed), bytes(&cx, cx.len() - 1));
    }
    assert!(chunks_of(&d, 1).iter().all(|c| c.0 == ChunkEncoding::Xor), "random doubles stay XOR");
    assert_eq!(d.stats().head_samples, 3000);
    // The cut: the head's 120-sample Decimal chunks leave as one chunk per block, counted out right.
    d.flush().expect("flush");
    x.flush().expect("flush");
    assert_eq!(whole(&d), whole(&x));
    assert_eq!((d.stats().head_samples, x.stats().head_samples), (0, 0));
    let cd = chunks_of(&d, 0);
    assert!(cd.iter().all(|c| c.0 == ChunkEncoding::Decimal) && cd.len() <= 2, "{cd:?}");
    drop(d);
    let d = Db::open(dd.path(), Options { cold_codec: ColdCodec::Dense, block_range_ms: 4 * 3600 * 1000, ..opts(1) }).expect("reopen");
    assert_eq!(whole(&d), whole(&x));
}
