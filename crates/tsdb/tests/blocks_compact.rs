//! Compaction keeps exactly the right samples (overlaps merged, duplicates deduplicated, tombstones
//! applied), copies untouched chunks byte for byte, records the lineage, and crash leftovers are cleaned.

mod blocks_common;

use blocks_common::*;
use std::collections::BTreeMap;
use std::sync::Arc;
use tessera_model::{Labels, Sample};
use tessera_tsdb::block::{Block, BlockMeta};
use tessera_tsdb::compact::{cleanup_after_crash, compact, compact_with, delete_block_dir, MAX_SAMPLES_PER_CHUNK};
use tessera_tsdb::tombstones::Interval;

const H2: i64 = 7_200_000;

fn open(dir: &std::path::Path, m: &BlockMeta) -> Arc<Block> {
    Block::open(&dir.join(&m.id)).expect("open")
}

/// Every series of a block with its decoded samples; also checks chunk invariants on the way.
fn read_all(b: &Block) -> BTreeMap<Labels, Vec<Sample>> {
    let mut out = BTreeMap::new();
    let mut prev: Option<Labels> = None;
    for r in b.all_series().expect("postings") {
        let (l, chunks) = b.series(r).expect("series");
        assert!(prev.as_ref().is_none_or(|p| *p < l), "label order");
        assert!(!chunks.is_empty(), "no empty series in a block");
        let mut samples = Vec::new();
        let mut last_maxt = i64::MIN;
        for c in &chunks {
            assert!(c.mint_ms > last_maxt, "chunks of {l} overlap or are unsorted");
            last_maxt = c.maxt_ms;
            let s = decode(c);
            assert!(!s.is_empty() && s.len() <= MAX_SAMPLES_PER_CHUNK.max(120));
            assert_eq!((s[0].t, s[s.len() - 1].t), (c.mint_ms, c.maxt_ms), "chunk bounds match its samples");
            samples.extend(s);
        }
        prev = Some(l.clone());
        out.insert(l, samples);
    }
    out
}

#[test]
fn adjacent_blocks_merge_and_untouched_chunks_are_copied() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng::new(21);
    let a = random_series(&mut rng, 120, 0, H2, 3);
    let b = random_series(&mut rng, 120, H2, 2 * H2, 3);
    let ma = write(dir.path(), 0, H2, &a, 1, vec![]).expect("a");
    let mb = write(dir.path(), H2, 2 * H2, &b, 1, vec![]).expect("b");
    let (ba, bb) = (open(dir.path(), &ma), open(dir.path(), &mb));
    let mc = compact(&[ba.clone(), bb.clone()], dir.path()).expect("compact").expect("non-empty");
    assert_eq!((mc.mint_ms, mc.maxt_ms, mc.compaction.level), (0, 2 * H2, 2));
    let mut srcs = vec![ma.id.clone(), mb.id.clone()];
    srcs.sort();
    assert_eq!(mc.compaction.sources, srcs);
    assert_eq!(mc.compaction.parents, vec![ma.id.clone(), mb.id.clone()]);

    let mut want: BTreeMap<Labels, Vec<Sample>> = BTreeMap::new();
    let mut want_chunks: BTreeMap<Labels, Vec<tessera_model::ChunkRef>> = BTreeMap::new();
    for s in a.iter().chain(b.iter()) {
        want.entry(s.labels.clone()).or_default().extend(s.samples());
        want_chunks.entry(s.labels.clone()).or_default().extend(s.chunk_refs());
    }
    let bc = open(dir.path(), &mc);
    let got = read_all(&bc);
    assert_eq!(got.len(), want.len());
    for (l, s) in &want {
        assert_eq!(bits(&got[l]), bits(s), "{l}");
    }
    // Nothing overlapped and nothing was deleted: every chunk is the input's bytes.
    for r in bc.all_series().expect("all") {
        let (l, chunks) = bc.series(r).expect("series");
        assert_eq!(chunks, want_chunks[&l], "{l}");
    }
    assert_eq!(mc.stats.num_samples, want.values().map(|v| v.len() as u64).sum::<u64>());
}

/// Random overlapping blocks with random tombstones against a model: for every series the output holds
/// exactly the samples that survive deletion, one per timestamp, the first block's value winning.
#[test]
fn overlapping_blocks_with_tombstones_match_the_model() {
    for seed in 0..6u64 {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut rng = Rng::new(100 + seed);
        let mut blocks = Vec::new();
        // label → t → value (first block to provide t wins).
        let mut model: BTreeMap<Labels, BTreeMap<i64, f64>> = BTreeMap::new();
        let nblocks = 2 + rng.below(3) as usize;
        let base: Vec<Labels> = random_series(&mut rng, 25, 0, H2, 1).into_iter().map(|s| s.labels).collect();
        let (mut overlaps, mut dups) = (0usize, 0usize);
        for _ in 0..nblocks {
            // Every block covers [0, 2h) and draws its series from one shared set of label sets, so
            // series recur across blocks; timestamps are snapped to whole minutes so that blocks also
            // share exact timestamps (with different values).
            let mut series: Vec<ModelSeries> = random_series(&mut rng, 25, 0, H2, 3)
                .into_iter()
                .zip(base.iter())
                .filter(|_| rng.below(4) != 0)
                .map(|(mut s, l)| {
                    s.labels = l.clone();
                    for c in &mut s.chunks {
                        for x in c.iter_mut() {
                            x.t = x.t / 60_000 * 60_000;
                        }
                        c.dedup_by_key(|x| x.t);
                    }
                    s
                })
                .collect();
            // Chunks of one series must not overlap inside a block: drop those that now touch.
            for s in &mut series {
                let mut last = i64::MIN;
                s.chunks.retain(|c| {
                    let keep = c[0].t > last;
                    if keep {
                        last = c[c.len() - 1].t;
                    }
                    keep
                });
            }
            let m = write(dir.path(), 0, H2, &series, 1, vec![]).expect("block");
            let b = open(dir.path(), &m);
            // Random tombstones.
            let mut dels = Vec::new();
            for r in 0..b.index().num_series() {
                if rng.below(3) == 0 {
                    let lo = rng.range(0, H2);
                    let hi = if rng.below(4) == 0 { H2 } else { lo + rng.range(0, H2 / 4) };
                    dels.push((r, Interval::new(lo, hi)));
                }
            }
            b.delete(&dels).expect("delete");
            let ts = b.tombstones();
            for (r, s) in series.iter().enumerate() {
                let e = model.entry(s.labels.clone()).or_default();
                if !e.is_empty() {
                    overlaps += 1;
                }
                for x in s.samples() {
                    if !ts.is_deleted(r as u32, x.t) {
                        dups += usize::from(e.contains_key(&x.t));
                        e.entry(x.t).or_insert(x.v);
                    }
                }
            }
            blocks.push(b);
        }
        assert!(overlaps > 10 && dups > 10, "seed {seed}: the test must exercise overlaps ({overlaps}) and duplicates ({dups})");
        model.retain(|_, v| !v.is_empty());
        let out = compact(&blocks, dir.path()).expect("compact");
        let Some(mc) = out else {
            assert!(model.is_empty(), "seed {seed}: compaction returned no block but samples survive");
            continue;
        };
        assert_eq!(mc.compaction.level, 2);
        let got = read_all(&open(dir.path(), &mc));
        assert_eq!(got.keys().collect::<Vec<_>>(), model.keys().collect::<Vec<_>>(), "seed {seed}: series set");
        for (l, want) in &model {
            let want: Vec<Sample> = want.iter().map(|(&t, &v)| Sample::new(t, v)).collect();
            assert_eq!(bits(&got[l]), bits(&want), "seed {seed}: {l}");
        }
    }
}

#[test]
fn duplicate_timestamps_keep_the_first_blocks_sample() {
    let dir = tempfile::tempdir().expect("tempdir");
    let l = Labels::from_pairs([("__name__", "x")]);
    let s1: Vec<Sample> = (0..200).map(|i| Sample::new(i * 10, 1.0)).collect();
    let s2: Vec<Sample> = (0..200).map(|i| Sample::new(i * 15, 2.0)).collect();
    let mk = |s: &[Sample]| ModelSeries { labels: l.clone(), chunks: s.chunks(100).map(|c| c.to_vec()).collect() };
    let m1 = write(dir.path(), 0, H2, &[mk(&s1)], 1, vec![]).expect("b1");
    let m2 = write(dir.path(), 0, H2, &[mk(&s2)], 1, vec![]).expect("b2");
    let (b1, b2) = (open(dir.path(), &m1), open(dir.path(), &m2));
    let mc = compact(&[b1.clone(), b2.clone()], dir.path()).expect("compact").expect("block");
    let got = read_all(&open(dir.path(), &mc)).remove(&l).expect("series");
    let mut want: BTreeMap<i64, f64> = BTreeMap::new();
    for s in &s1 {
        want.insert(s.t, s.v);
    }
    for s in &s2 {
        want.entry(s.t).or_insert(s.v);
    }
    let want: Vec<Sample> = want.into_iter().map(|(t, v)| Sample::new(t, v)).collect();
    assert_eq!(bits(&got), bits(&want));
    // Reversed priority: block 2's values win.
    let mc2 = compact(&[b2, b1], dir.path()).expect("compact").expect("block");
    let got2 = read_all(&open(dir.path(), &mc2)).remove(&l).expect("series");
    assert!(got2.iter().filter(|s| s.t % 30 == 0).all(|s| s.v == 2.0));
}

#[test]
fn fully_deleted_input_gives_no_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let series = random_series(&mut Rng::new(5), 10, 0, H2, 2);
    let m = write(dir.path(), 0, H2, &series, 1, vec![]).expect("block");
    let b = open(dir.path(), &m);
    let all: Vec<_> = (0..b.index().num_series()).map(|r| (r, Interval::new(i64::MIN, i64::MAX))).collect();
    b.delete(&all).expect("delete");
    assert!(compact(&[b], dir.path()).expect("compact").is_none());
    assert_eq!(std::fs::read_dir(dir.path()).expect("ls").count(), 1, "only the input remains");
}

#[test]
fn single_block_rewrite_drops_deleted_samples_and_raises_level() {
    let dir = tempfile::tempdir().expect("tempdir");
    let series = random_series(&mut Rng::new(9), 30, 0, H2, 3);
    let m = write(dir.path(), 0, H2, &series, 1, vec![]).expect("block");
    let b = open(dir.path(), &m);
    b.delete(&[(0, Interval::new(0, H2 / 2)), (1, Interval::new(i64::MIN, i64::MAX))]).expect("delete");
    let opts = tessera_tsdb::block::WriteOptions { max_segment_bytes: 4096, ..Default::default() };
    let mc = compact_with(std::slice::from_ref(&b), dir.path(), &opts).expect("compact").expect("block");
    assert_eq!(mc.compaction.sources, m.compaction.sources);
    assert_eq!(mc.compaction.level, 2);
    let got = read_all(&open(dir.path(), &mc));
    assert!(!got.contains_key(&series[1].labels));
    let s0: Vec<Sample> = series[0].samples().into_iter().filter(|s| s.t > H2 / 2).collect();
    assert_eq!(got.get(&series[0].labels).map(|v| bits(v)).unwrap_or_default(), bits(&s0));
    assert_eq!(got.len(), series.len() - 1 - usize::from(s0.is_empty()));
}

#[test]
fn cleanup_after_crash_removes_tmp_dirs_and_superseded_blocks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng::new(1);
    let a = write(dir.path(), 0, H2, &random_series(&mut rng, 5, 0, H2, 1), 1, vec![]).expect("a");
    let b = write(dir.path(), H2, 2 * H2, &random_series(&mut rng, 5, H2, 2 * H2, 1), 1, vec![]).expect("b");
    let other = write(dir.path(), 2 * H2, 3 * H2, &random_series(&mut rng, 5, 2 * H2, 3 * H2, 1), 1, vec![]).expect("o");
    let c = compact(&[open(dir.path(), &a), open(dir.path(), &b)], dir.path()).expect("compact").expect("c");
    // A crash here: c is in place, a and b are still there. Plus a half-written block and a half-deleted one.
    let tmp = dir.path().join(format!("{}.tmp", tessera_tsdb::block::new_block_id()));
    std::fs::create_dir_all(tmp.join("chunks")).expect("mkdir");
    let doomed = dir.path().join(format!("{}.tmp-for-deletion", tessera_tsdb::block::new_block_id()));
    std::fs::create_dir_all(&doomed).expect("mkdir");
    let unrelated = dir.path().join("wal");
    std::fs::create_dir_all(&unrelated).expect("mkdir");

    let mut removed = cleanup_after_crash(dir.path()).expect("cleanup");
    removed.sort();
    let mut want = vec![tmp, doomed, dir.path().join(&a.id), dir.path().join(&b.id)];
    want.sort();
    assert_eq!(removed, want);
    let mut left: Vec<String> =
        std::fs::read_dir(dir.path()).expect("ls").map(|e| e.expect("e").file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    let mut want_left = vec![c.id.clone(), other.id.clone(), "wal".to_string()];
    want_left.sort();
    assert_eq!(left, want_left);
    assert!(cleanup_after_crash(dir.path()).expect("again").is_empty(), "idempotent");

    delete_block_dir(&dir.path().join(&other.id)).expect("delete");
    assert!(!dir.path().join(&other.id).exists());
}
