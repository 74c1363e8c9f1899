//! Blocks written with index format 1 (every block before 2026-11-26) stay readable after the format moved
//! on: `tests/data/index-v1/` holds a block written by that writer (`write_index_v1_fixture`, run once with
//! that code and kept), and this test reads it back against the model it was written from.

mod blocks_common;

use blocks_common::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use tessera_model::Sample;
use tessera_tsdb::block::Block;
use tessera_tsdb::index::IndexReader;

const H2: i64 = 7_200_000;

/// The fixture's series: a small random set, two of them with 130 two-sample chunks (so their entries
/// carry a skip table of three groups).
fn model() -> Vec<ModelSeries> {
    let mut rng = Rng::new(11);
    let mut m = random_series(&mut rng, 20, H2, 2 * H2, 3);
    for i in [3usize, 11] {
        m[i].chunks = (0..130i64).map(|c| vec![Sample::new(H2 + c * 50_000, c as f64), Sample::new(H2 + c * 50_000 + 10_000, 0.5)]).collect();
    }
    m
}

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/index-v1")
}

#[test]
#[ignore = "writes the fixture; run only with the index format 1 writer"]
fn write_index_v1_fixture() {
    let dir = fixture_dir();
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("mkdir");
    write(&dir, H2, 2 * H2, &model(), 1, vec![]).expect("block");
}

#[test]
fn index_format_1_blocks_still_read() {
    let dir = fixture_dir();
    let blocks: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    assert_eq!(blocks.len(), 1, "one block in {}", dir.display());
    let index = std::fs::read(blocks[0].join("index")).expect("index");
    assert_eq!(index[4], 1, "the fixture is index format 1");
    let b = Block::open(&blocks[0]).expect("open");
    let model = model();
    assert_eq!(b.index().num_series() as usize, model.len());
    let mut pairs: BTreeMap<(String, String), Vec<u32>> = BTreeMap::new();
    for (r, m) in model.iter().enumerate() {
        let (labels, chunks) = b.series(r as u32).expect("series");
        assert_eq!(labels, m.labels);
        assert_eq!(chunks, m.chunk_refs(), "chunks of {labels}");
        assert_eq!(bits(&chunks.iter().flat_map(decode).collect::<Vec<_>>()), bits(&m.samples()));
        // A range read through the skip table.
        let (lo, hi) = (H2 + 3_000_000, H2 + 3_100_000);
        let want: Vec<_> = m.chunk_refs().into_iter().filter(|c| c.mint_ms <= hi && c.maxt_ms >= lo).collect();
        assert_eq!(b.series_in_range(r as u32, lo, hi).expect("range").1, want);
        for l in m.labels.iter() {
            pairs.entry((l.name.to_string(), l.value.to_string())).or_default().push(r as u32);
        }
    }
    assert!(model.iter().any(|m| m.chunks.len() > 64));
    let ix = b.index();
    assert_eq!(ix.all_postings().expect("all"), (0..model.len() as u32).collect::<Vec<_>>());
    for ((n, v), refs) in &pairs {
        assert_eq!(&ix.postings(n, v).expect("postings"), refs, "{n}={v}");
    }
    let names: Vec<String> = pairs.keys().map(|(n, _)| n.clone()).collect::<std::collections::BTreeSet<_>>().into_iter().collect();
    assert_eq!(ix.label_names().expect("names"), names);
}
