//! A block written from random series reads back exactly: every series, chunk, sample and postings list,
//! and matcher selection through the block's `IndexReader` agrees with brute force over the model.

mod blocks_common;

use blocks_common::*;
use std::collections::{BTreeMap, BTreeSet};
use tessera_model::{ChunkEncoding, ChunkRef, Labels, MatchOp, Matcher, Sample};
use tessera_tsdb::block::{write_block, Block};
use tessera_tsdb::index::{postings_for_matchers, IndexReader};
use tessera_tsdb::tombstones::Interval;
use tessera_tsdb::Error;

const H2: i64 = 7_200_000;

fn blocks_in(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> =
        std::fs::read_dir(dir).expect("read dir").map(|e| e.expect("entry").file_name().to_string_lossy().into_owned()).collect();
    v.sort();
    v
}

#[test]
fn written_block_reads_back_exactly() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng::new(7);
    let model = random_series(&mut rng, 400, H2, 2 * H2, 4);
    let meta = write(dir.path(), H2, 2 * H2, &model, 1, vec![]).expect("non-empty block");
    assert_eq!(blocks_in(dir.path()), vec![meta.id.clone()], "only the final directory remains");
    assert_eq!(meta.compaction.sources, vec![meta.id.clone()]);
    assert_eq!((meta.mint_ms, meta.maxt_ms, meta.compaction.level), (H2, 2 * H2, 1));
    assert_eq!(meta.stats.num_series, model.len() as u64);
    assert_eq!(meta.stats.num_chunks, model.iter().map(|s| s.chunks.len() as u64).sum::<u64>());
    assert_eq!(meta.stats.num_samples, model.iter().map(|s| s.samples().len() as u64).sum::<u64>());
    let segs = std::fs::read_dir(dir.path().join(&meta.id).join("chunks")).expect("chunks dir").count();
    assert!(segs > 3, "small segment limit must give several segments, got {segs}");

    let b = Block::open(&dir.path().join(&meta.id)).expect("open");
    assert_eq!(b.meta(), meta);
    assert!(b.size_bytes() > 0);
    let ix = b.index();
    assert_eq!(ix.num_series() as usize, model.len());
    for (r, m) in model.iter().enumerate() {
        let (labels, chunks) = b.series(r as u32).expect("series");
        assert_eq!(labels, m.labels, "series refs follow label order");
        assert_eq!(chunks, m.chunk_refs(), "chunks of {labels}");
        assert_eq!(bits(&chunks.iter().flat_map(decode).collect::<Vec<_>>()), bits(&m.samples()));
        assert_eq!(b.series_labels(r as u32).expect("labels"), m.labels);
        // Range reads keep exactly the overlapping chunks.
        let (lo, hi) = (m.chunks[0][0].t + 1, m.chunks[0][0].t + 1000);
        let want: Vec<ChunkRef> = m.chunk_refs().into_iter().filter(|c| c.mint_ms <= hi && c.maxt_ms >= lo).collect();
        assert_eq!(b.series_in_range(r as u32, lo, hi).expect("range").1, want);
    }
    assert!(b.series(model.len() as u32).is_err(), "a ref past the end is an error, not a panic");

    // Postings against brute force.
    let mut pairs: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for (r, m) in model.iter().enumerate() {
        for l in m.labels.iter() {
            pairs.entry((l.name.to_string(), l.value.to_string())).or_default().push(r as u32);
        }
    }
    assert_eq!(ix.all_postings().expect("all"), (0..model.len() as u32).collect::<Vec<_>>());
    for ((n, v), refs) in &pairs {
        assert_eq!(&ix.postings(n, v).expect("postings"), refs, "{n}={v}");
    }
    assert!(ix.postings("job", "nope").expect("p").is_empty());
    assert!(ix.postings("nope", "x").expect("p").is_empty());
    let names: BTreeSet<String> = pairs.keys().map(|(n, _)| n.clone()).collect();
    assert_eq!(ix.label_names().expect("names"), names.iter().cloned().collect::<Vec<_>>());
    for n in &names {
        for prefix in ["", "h", "host-1", "p", "prod", "zzz", "web"] {
            let want: Vec<String> =
                pairs.keys().filter(|(k, v)| k == n && v.starts_with(prefix)).map(|(_, v)| v.clone()).collect();
            assert_eq!(ix.label_values(n, prefix).expect("values"), want, "{n} prefix {prefix:?}");
        }
    }

    // Matchers through postings_for_matchers against brute force.
    let ops = [MatchOp::Equal, MatchOp::NotEqual, MatchOp::Regex, MatchOp::NotRegex];
    let vals = ["", "prod", "prod.*", "api|db", "host-1.*", ".+", ".*", "up", "cpu|mem", "nope"];
    let mut ms = Vec::new();
    for n in ["__name__", "job", "env", "instance", "absent"] {
        for v in vals {
            for op in ops {
                ms.push(Matcher::new(op, n, v).expect("matcher"));
            }
        }
    }
    let brute = |sel: &[Matcher]| -> Vec<u32> {
        (0..model.len() as u32).filter(|&i| sel.iter().all(|m| m.matches(model[i as usize].labels.get(&m.name)))).collect()
    };
    for (i, a) in ms.iter().enumerate() {
        let one = [a.clone()];
        assert_eq!(postings_for_matchers(ix, &one).expect("select"), brute(&one), "{a}");
        let b2 = ms[(i * 7 + 3) % ms.len()].clone();
        let two = [a.clone(), b2];
        assert_eq!(postings_for_matchers(ix, &two).expect("select"), brute(&two), "{:?}", two);
    }
}

#[test]
fn chunk_bytes_are_zero_copy_and_outlive_the_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = random_series(&mut Rng::new(3), 5, 0, H2, 2);
    let meta = write(dir.path(), 0, H2, &model, 1, vec![]).expect("block");
    let b = Block::open(&dir.path().join(&meta.id)).expect("open");
    let (_, c1) = b.series(0).expect("series");
    let (_, c2) = b.series(0).expect("series");
    assert_eq!(c1[0].data.as_ptr(), c2[0].data.as_ptr(), "both reads point into the same mapping");
    // Dropping resident pages never changes what is read, for held slices or new reads.
    let before: Vec<_> = (0..5).map(|r| b.series(r).expect("series")).collect();
    b.release_resident_pages();
    assert_eq!(bits(&decode(&c1[0])), bits(&model[0].chunks[0]));
    assert_eq!((0..5).map(|r| b.series(r).expect("series")).collect::<Vec<_>>(), before);
    drop(b);
    std::fs::remove_dir_all(dir.path().join(&meta.id)).expect("remove");
    assert_eq!(decode(&c1[0]).len(), model[0].chunks[0].len(), "data stays valid after the block is gone");
}

#[test]
fn empty_input_writes_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let none = write_block(dir.path(), 0, H2, std::iter::empty(), 1, vec![]).expect("ok");
    assert!(none.is_none());
    let no_chunks = vec![Ok((Labels::from_pairs([("a", "b")]), vec![]))];
    assert!(write_block(dir.path(), 0, H2, no_chunks.into_iter(), 1, vec![]).expect("ok").is_none());
    assert!(blocks_in(dir.path()).is_empty(), "no directory, not even a .tmp one");
}

#[test]
fn invalid_input_is_rejected_without_leftovers() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = xor_chunk(&[Sample::new(10, 1.0)]);
    let a = Labels::from_pairs([("a", "1")]);
    let b = Labels::from_pairs([("a", "2")]);
    let unsorted = vec![Ok((b.clone(), vec![c.clone()])), Ok((a.clone(), vec![c.clone()]))];
    assert!(write_block(dir.path(), 0, H2, unsorted.into_iter(), 1, vec![]).is_err());
    let dup = vec![Ok((a.clone(), vec![c.clone()])), Ok((a.clone(), vec![c.clone()]))];
    assert!(write_block(dir.path(), 0, H2, dup.into_iter(), 1, vec![]).is_err());
    let outside = vec![Ok((a.clone(), vec![xor_chunk(&[Sample::new(H2, 1.0)])]))];
    assert!(write_block(dir.path(), 0, H2, outside.into_iter(), 1, vec![]).is_err(), "maxt is exclusive");
    let failing = vec![Ok((a.clone(), vec![c.clone()])), Err(Error::Other("source failed".into()))];
    assert!(write_block(dir.path(), 0, H2, failing.into_iter(), 1, vec![]).is_err());
    assert!(blocks_in(dir.path()).is_empty());
}

#[test]
fn histogram_encoding_byte_is_preserved() {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = ChunkRef { mint_ms: 5, maxt_ms: 9, encoding: ChunkEncoding::Histogram, data: bytes::Bytes::from_static(&[0, 3, 1, 2, 3]) };
    let l = Labels::from_pairs([("__name__", "h")]);
    let meta = write_block(dir.path(), 0, H2, vec![Ok((l, vec![c.clone()]))].into_iter(), 1, vec![]).expect("ok").expect("block");
    assert_eq!(meta.stats.num_samples, 3);
    let b = Block::open(&dir.path().join(&meta.id)).expect("open");
    assert_eq!(b.series(0).expect("series").1, vec![c]);
}

#[test]
fn tombstones_persist_across_reopen() {
    let dir = tempfile::tempdir().expect("tempdir");
    let model = random_series(&mut Rng::new(11), 50, 0, H2, 3);
    let meta = write(dir.path(), 0, H2, &model, 1, vec![]).expect("block");
    let path = dir.path().join(&meta.id);
    let b = Block::open(&path).expect("open");
    assert!(b.tombstones().is_empty());
    b.delete(&[(3, Interval::new(0, 1000)), (3, Interval::new(1001, 2000)), (7, Interval::new(50, 60))]).expect("delete");
    let up = Matcher::new(MatchOp::Equal, "__name__", "up").expect("m");
    let n_up = model.iter().filter(|m| m.labels.get("__name__") == "up").count();
    assert_eq!(b.delete_matching(&[up], 0, H2 - 1).expect("delete"), n_up);
    assert!(b.delete(&[(10_000, Interval::new(0, 1))]).is_err(), "unknown ref");
    let ts = b.tombstones();
    assert_eq!(ts.get(3)[0], Interval::new(0, 2000));
    let reopened = Block::open(&path).expect("reopen");
    assert_eq!(*reopened.tombstones(), *ts);
    assert_eq!(reopened.meta().stats.num_tombstones, ts.num_intervals() as u64);
    assert!(ts.num_intervals() >= 2);
    assert!(!path.join("tombstones.tmp").exists());
}

/// Series with hundreds of chunks exercise the skip table: range reads must return exactly the chunks a
/// linear filter returns, also when chunks overlap (a long early chunk reaching far into later groups).
#[test]
fn range_reads_over_many_chunks_match_a_linear_filter() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut rng = Rng::new(77);
    let mut series = Vec::new();
    for s in 0..4 {
        let n = [1, 63, 64, 1000][s];
        let mut chunks = Vec::new();
        let mut t = 0i64;
        for i in 0..n {
            let len = 1 + rng.below(50) as i64;
            // Every 97th chunk is long and overlaps many following chunks.
            let span = if i % 97 == 5 { 20_000 } else { len };
            let c = ChunkRef {
                mint_ms: t,
                maxt_ms: t + span,
                encoding: ChunkEncoding::Xor,
                data: bytes::Bytes::from(vec![0, 1, i as u8, s as u8]),
            };
            chunks.push(c);
            t += 1 + rng.below(60) as i64;
        }
        series.push((Labels::from_pairs([("s", format!("{s}"))]), chunks));
    }
    let items: Vec<Result<_, Error>> = series.iter().cloned().map(Ok).collect();
    let meta = write_block(dir.path(), 0, 1 << 40, items.into_iter(), 1, vec![]).expect("ok").expect("block");
    let b = Block::open(&dir.path().join(&meta.id)).expect("open");
    for (r, (labels, chunks)) in series.iter().enumerate() {
        let (l, all) = b.series(r as u32).expect("series");
        assert_eq!((&l, &all), (labels, chunks));
        let end = chunks.iter().map(|c| c.maxt_ms).max().expect("chunk");
        for _ in 0..300 {
            let lo = rng.range(-100, end + 100);
            let hi = lo + rng.range(0, 3000);
            let want: Vec<ChunkRef> = chunks.iter().filter(|c| c.mint_ms <= hi && c.maxt_ms >= lo).cloned().collect();
            assert_eq!(b.series_in_range(r as u32, lo, hi).expect("range").1, want, "series {r} [{lo}, {hi}]");
        }
        assert!(b.series_in_range(r as u32, end + 1, i64::MAX).expect("range").1.is_empty());
    }
}
