//! Damaged blocks are detected and reported with file and offset, never panic, never return silently
//! wrong data, and do not affect other blocks.

mod blocks_common;

use blocks_common::*;
use bytes::Bytes;
use proptest::prelude::{any, proptest, ProptestConfig};
use std::path::{Path, PathBuf};
use tessera_model::{ChunkRef, Labels};
use tessera_tsdb::block::{Block, BlockIndex, BlockMeta};
use tessera_tsdb::index::IndexReader;
use tessera_tsdb::Error;

const H2: i64 = 7_200_000;

fn small_block(dir: &Path, seed: u64, n: usize) -> (BlockMeta, PathBuf) {
    let model = random_series(&mut Rng::new(seed), n, 0, H2, 2);
    let m = write(dir, 0, H2, &model, 1, vec![]).expect("block");
    let p = dir.join(&m.id);
    (m, p)
}

/// Everything a reader can get out of an index: every series, every postings list, every label value.
type Dump = (Vec<(Labels, Vec<tessera_tsdb::block::ChunkMeta>)>, Vec<(String, String, Vec<u32>)>, Vec<u32>);

fn dump_index(ix: &BlockIndex) -> Result<Dump, Error> {
    let mut series = Vec::new();
    for r in 0..ix.num_series() {
        series.push(ix.series(r)?);
    }
    let mut postings = Vec::new();
    for n in ix.label_names()? {
        for v in ix.label_values(&n, "")? {
            let p = ix.postings(&n, &v)?;
            postings.push((n.clone(), v, p));
        }
    }
    Ok((series, postings, ix.all_postings()?))
}

fn dump_block(b: &Block) -> Result<Vec<(Labels, Vec<ChunkRef>)>, Error> {
    (0..b.index().num_series()).map(|r| b.series(r)).collect()
}

fn is_corruption_in(e: &Error, file_suffix: &str, max_offset: u64) -> bool {
    match e {
        Error::Corruption { file, offset, .. }
        | Error::Storage(tessera_model::StorageError::Corruption { file, offset, .. }) => {
            file.ends_with(file_suffix) && *offset <= max_offset
        }
        _ => false,
    }
}

#[test]
fn every_flipped_index_byte_is_detected_at_open_or_at_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, path) = small_block(dir.path(), 1, 12);
    let ixp = path.join("index");
    let orig = std::fs::read(&ixp).expect("read index");
    let good = dump_index(&BlockIndex::from_bytes(Bytes::from(orig.clone()), "index".into()).expect("valid")).expect("dump");
    let (mut at_open, mut at_read) = (0, 0);
    for i in 0..orig.len() {
        for x in [0x01u8, 0x80, 0xff] {
            let mut b = orig.clone();
            b[i] ^= x;
            match BlockIndex::from_bytes(Bytes::from(b), "blk/index".into()) {
                Err(e) => {
                    assert!(is_corruption_in(&e, "index", orig.len() as u64), "byte {i}: {e}");
                    at_open += 1;
                }
                Ok(ix) => match dump_index(&ix) {
                    Err(e) => {
                        assert!(is_corruption_in(&e, "index", orig.len() as u64), "byte {i}: {e}");
                        at_read += 1;
                    }
                    Ok(d) => panic!("flip of byte {i} by {x:#x} went unnoticed (same data: {})", d == good),
                },
            }
        }
    }
    assert!(at_open > 0 && at_read > 0, "both kinds exercised: {at_open} at open, {at_read} at read");
}

#[test]
fn flipped_index_byte_in_the_symbol_table_fails_open_with_file_and_offset() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, path) = small_block(dir.path(), 2, 10);
    let ixp = path.join("index");
    let mut b = std::fs::read(&ixp).expect("read");
    b[12] ^= 0x20; // inside the symbol table, which starts right after the 5-byte header
    std::fs::write(&ixp, &b).expect("write");
    let e = Block::open(&path).expect_err("must fail");
    match &e {
        Error::Corruption { file, offset, .. } => {
            assert_eq!(file, &ixp.display().to_string());
            assert_eq!(*offset, 5, "the symbol section starts at 5");
        }
        other => panic!("unexpected {other}"),
    }
}

#[test]
fn truncated_or_missing_index_gives_clean_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, path) = small_block(dir.path(), 3, 10);
    let ixp = path.join("index");
    let orig = std::fs::read(&ixp).expect("read");
    for n in 0..orig.len() {
        let e = BlockIndex::from_bytes(Bytes::copy_from_slice(&orig[..n]), "index".into()).expect_err("truncated");
        assert!(is_corruption_in(&e, "index", orig.len() as u64), "len {n}: {e}");
    }
    std::fs::write(&ixp, &orig[..orig.len() / 2]).expect("truncate");
    assert!(matches!(Block::open(&path), Err(Error::Corruption { .. })));
    std::fs::remove_file(&ixp).expect("rm");
    assert!(matches!(Block::open(&path), Err(Error::Io { .. })));
}

#[test]
fn flipped_chunk_byte_is_reported_when_that_chunk_is_read() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, path) = small_block(dir.path(), 4, 30);
    let b = Block::open(&path).expect("open");
    let good = dump_block(&b).expect("good");
    let (_, metas) = b.index().series(7).expect("series 7");
    let cref = metas[0].chunk_ref;
    drop(b);
    let seg = path.join("chunks").join(format!("{:06}", cref >> 32));
    let off = cref & 0xffff_ffff;
    let mut bytes = std::fs::read(&seg).expect("read");
    bytes[off as usize + 4] ^= 0x10; // inside the chunk data (after encoding byte and length)
    std::fs::write(&seg, &bytes).expect("write");

    let b = Block::open(&path).expect("chunk damage is not checked at open");
    for r in 0..b.index().num_series() {
        match b.series(r) {
            Ok(s) => assert_eq!(s, good[r as usize], "undamaged series read as before"),
            Err(Error::Corruption { file, offset, .. }) => {
                assert_eq!(file, seg.display().to_string());
                assert_eq!(offset, off, "offset of the damaged chunk record");
                assert!(!good[r as usize].1.is_empty());
            }
            Err(e) => panic!("unexpected {e}"),
        }
    }
    assert!(b.series(7).is_err());
    // Range reads that skip the damaged chunk still work.
    let (lo, _) = (metas[0].mint_ms, metas[0].maxt_ms);
    if metas.len() > 1 {
        assert!(b.series_in_range(7, metas[1].mint_ms, metas[1].maxt_ms).is_ok() || metas[1].mint_ms <= lo);
    }
}

#[test]
fn every_flipped_chunk_segment_byte_is_detected() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, path) = small_block(dir.path(), 5, 3);
    let good = dump_block(&Block::open(&path).expect("open")).expect("good");
    let seg = path.join("chunks").join("000001");
    let orig = std::fs::read(&seg).expect("read");
    // Every header byte, then every 5th byte (reopening the block per flip is what costs time).
    for i in (0..8).chain((8..orig.len()).step_by(5)) {
        let mut b = orig.clone();
        b[i] ^= 0x41;
        std::fs::write(&seg, &b).expect("write");
        match Block::open(&path) {
            Err(e) => assert!(is_corruption_in(&e, "000001", 8) && i < 8, "byte {i}: {e}"),
            Ok(blk) => match dump_block(&blk) {
                Err(e) => assert!(is_corruption_in(&e, "000001", orig.len() as u64), "byte {i}: {e}"),
                Ok(d) => panic!("flip of chunk byte {i} unnoticed (same: {})", d == good),
            },
        }
    }
}

#[test]
fn damaged_meta_or_tombstones_fail_open_and_other_blocks_still_work() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_, p1) = small_block(dir.path(), 6, 10);
    let (_, p2) = small_block(dir.path(), 7, 10);
    let b2 = Block::open(&p2).expect("open");
    let before = dump_block(&b2).expect("read");

    let ts = p1.join("tombstones");
    let mut t = std::fs::read(&ts).expect("read");
    t[5] ^= 1;
    std::fs::write(&ts, &t).expect("write");
    let e = Block::open(&p1).expect_err("bad tombstones");
    assert!(is_corruption_in(&e, "tombstones", t.len() as u64), "{e}");
    std::fs::remove_file(&ts).expect("rm");
    assert!(Block::open(&p1).is_ok(), "a missing tombstones file means no deletions");

    std::fs::write(p1.join("meta.json"), b"{\"id\": \"x\", \"mint_ms\": oops}").expect("write");
    let e = Block::open(&p1).expect_err("bad meta");
    assert!(is_corruption_in(&e, "meta.json", 100), "{e}");

    let seg = p1.join("chunks").join("000001");
    let mut s = std::fs::read(&seg).expect("read");
    s[0] ^= 0xff;
    std::fs::write(&seg, &s).expect("write");

    assert_eq!(dump_block(&b2).expect("still fine"), before);
    assert_eq!(dump_block(&Block::open(&p2).expect("reopen")).expect("fine"), before);
}

#[test]
fn compaction_over_a_damaged_chunk_fails_cleanly_and_flags_the_block() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (ma, pa) = small_block(dir.path(), 9, 10);
    let (mb, pb) = small_block(dir.path(), 10, 10);
    let seg = pa.join("chunks").join("000001");
    let mut bytes = std::fs::read(&seg).expect("read");
    let at = bytes.len() - 6; // inside the last chunk record
    bytes[at] ^= 0x55;
    std::fs::write(&seg, &bytes).expect("write");
    let (a, b) = (Block::open(&pa).expect("open"), Block::open(&pb).expect("open"));
    let e = tessera_tsdb::compact::compact(&[a.clone(), b.clone()], dir.path()).expect_err("damaged input");
    assert!(is_corruption_in(&e, "000001", bytes.len() as u64), "{e}");
    let mut left: Vec<String> =
        std::fs::read_dir(dir.path()).expect("ls").map(|e| e.expect("e").file_name().to_string_lossy().into_owned()).collect();
    left.sort();
    let mut want = vec![ma.id.clone(), mb.id.clone()];
    want.sort();
    assert_eq!(left, want, "no half-written output remains");
    assert!(a.meta().compaction.failed && Block::open(&pa).expect("reopen").meta().compaction.failed);
    assert!(!b.meta().compaction.failed, "only the damaged block is flagged");
}

fn valid_index_bytes() -> Vec<u8> {
    static IX: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    IX.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir");
        let (_, path) = small_block(dir.path(), 8, 8);
        std::fs::read(path.join("index")).expect("read")
    })
    .clone()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_index_bytes_never_panic(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        if let Ok(ix) = BlockIndex::from_bytes(Bytes::from(data), "index".into()) {
            let _ = dump_index(&ix);
        }
    }

    #[test]
    fn mutated_index_never_panics(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6), cut in any::<Option<usize>>()) {
        let mut b = valid_index_bytes();
        for (at, x) in edits {
            let i = at % b.len();
            b[i] = x;
        }
        if let Some(c) = cut {
            b.truncate(c % (b.len() + 1));
        }
        if let Ok(ix) = BlockIndex::from_bytes(Bytes::from(b), "index".into()) {
            let _ = dump_index(&ix);
            for p in ["", "a", "h", "z"] {
                for n in ["__name__", "job", "instance", "nope"] {
                    let _ = ix.label_values(n, p);
                    let _ = ix.postings(n, p);
                }
            }
        }
    }
}
