//! Issue 9, "no single request can take Tessera down", for the bytes this crate reads back from disk:
//! WAL records, the block index, chunk segments (and the chunks in them, every encoding), tombstones and
//! `meta.json`. Fully random bytes, and valid files mutated (bit flips, overwrites, truncation,
//! insertion), must give `Err`, never a panic, at open or at any read.
//!
//! Every block file is checksummed, so a random mutation is almost always caught by a CRC before the
//! parser behind it runs. The `*_resealed` properties therefore recompute the checksums of the original
//! layout after an in-place mutation: the damage then reaches the structural checks (symbol references,
//! offsets, sortedness, varints, chunk data) the way a bug in a writer would.
//!
//! Runs as an ordinary test on the stable toolchain (cargo-fuzz needs nightly); a short smoke by
//! default, `TESSERA_FUZZ_CASES=N` for N cases per property.

use bytes::Bytes;
use proptest::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use tessera_model::{ChunkEncoding, ChunkRef, Labels, MatchOp, Matcher, Sample};
use tessera_tsdb::block::{Block, BlockIndex, CompactionMeta, WriteOptions, write_block_with};
use tessera_tsdb::index::{IndexReader, postings_for_matchers};
use tessera_tsdb::options::ColdCodec;
use tessera_tsdb::tombstones::{Interval, Tombstones};
use tessera_tsdb::wal_records::{self, BatchEncoder, TombstoneRec};

fn cases(default: u32) -> u32 {
    std::env::var("TESSERA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn config(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: cases(default),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---- mutations ------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum Mutation {
    Flip {
        at: usize,
        mask: u8,
    },
    Set {
        at: usize,
        byte: u8,
    },
    /// Overwrite with a "magic" value likely to hit a length or an offset check boundary.
    Interesting {
        at: usize,
        which: usize,
    },
    Truncate {
        keep: usize,
    },
    Insert {
        at: usize,
        bytes: Vec<u8>,
    },
    Remove {
        at: usize,
        n: usize,
    },
}

impl Mutation {
    fn in_place(&self) -> bool {
        matches!(
            self,
            Mutation::Flip { .. } | Mutation::Set { .. } | Mutation::Interesting { .. }
        )
    }
}

const INTERESTING: &[&[u8]] = &[
    &[0x00],
    &[0xff],
    &[0x7f],
    &[0x80],
    &[0xff, 0xff, 0xff, 0xff],
    &[0x7f, 0xff, 0xff, 0xff],
    &[0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01],
    &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01],
    &[0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
    &[0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00],
];

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        4 => (any::<usize>(), 1u8..=255).prop_map(|(at, mask)| Mutation::Flip { at, mask }),
        3 => (any::<usize>(), any::<u8>()).prop_map(|(at, byte)| Mutation::Set { at, byte }),
        2 => (any::<usize>(), any::<usize>()).prop_map(|(at, which)| Mutation::Interesting { at, which }),
        1 => any::<usize>().prop_map(|keep| Mutation::Truncate { keep }),
        1 => (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..16)).prop_map(|(at, bytes)| Mutation::Insert { at, bytes }),
        1 => (any::<usize>(), 1usize..16).prop_map(|(at, n)| Mutation::Remove { at, n }),
    ]
}

/// Applies `m` to `b`, positions taken modulo the length (or within `range` when given and non-empty).
fn apply(b: &mut Vec<u8>, m: &Mutation, range: Option<(usize, usize)>) {
    if b.is_empty() {
        return;
    }
    let (lo, hi) = range
        .filter(|(lo, hi)| lo < hi && *hi <= b.len())
        .unwrap_or((0, b.len()));
    let pos = |at: usize| lo + at % (hi - lo);
    match m {
        Mutation::Flip { at, mask } => b[pos(*at)] ^= mask,
        Mutation::Set { at, byte } => b[pos(*at)] = *byte,
        Mutation::Interesting { at, which } => {
            let i = pos(*at);
            let v = INTERESTING[which % INTERESTING.len()];
            let end = (i + v.len()).min(b.len());
            b[i..end].copy_from_slice(&v[..end - i]);
        }
        Mutation::Truncate { keep } => b.truncate(keep % (b.len() + 1)),
        Mutation::Insert { at, bytes } => {
            let i = pos(*at);
            b.splice(i..i, bytes.iter().copied());
        }
        Mutation::Remove { at, n } => {
            let i = pos(*at);
            let end = (i + n).min(b.len());
            b.drain(i..end);
        }
    }
}

fn crc32c(b: &[u8]) -> u32 {
    tessera_encoding::crc::crc32c(b)
}

fn uvarint_at(b: &[u8], mut i: usize) -> (u64, usize) {
    let (mut x, mut s) = (0u64, 0);
    loop {
        let c = b[i];
        i += 1;
        x |= u64::from(c & 0x7f) << s;
        if c < 0x80 {
            return (x, i);
        }
        s += 7;
    }
}

fn be_u32(b: &[u8], i: usize) -> usize {
    u32::from_be_bytes(b[i..i + 4].try_into().expect("4 bytes")) as usize
}

fn be_u64(b: &[u8], i: usize) -> usize {
    u64::from_be_bytes(b[i..i + 8].try_into().expect("8 bytes")) as usize
}

/// The checksummed ranges of a valid index (`docs/format/index.md`): `(from, to)` with CRC32C(b[from..to])
/// stored big-endian at `to`.
fn index_crc_ranges(b: &[u8]) -> Vec<(usize, usize)> {
    let toc = b.len() - 44;
    let (sym, series, series_table, postings, postings_table) = (
        be_u64(b, toc),
        be_u64(b, toc + 8),
        be_u64(b, toc + 16),
        be_u64(b, toc + 24),
        be_u64(b, toc + 32),
    );
    let section = |at: usize| (at + 4, at + 4 + be_u32(b, at));
    let mut out = vec![
        section(sym),
        section(series_table),
        section(postings_table),
        (toc, toc + 40),
    ];
    let mut at = series;
    while at < series_table {
        let (len, body) = uvarint_at(b, at);
        out.push((body, body + len as usize));
        at = body + len as usize + 4;
    }
    let mut at = postings;
    while at < postings_table {
        let s = section(at);
        out.push(s);
        at = s.1 + 4;
    }
    out
}

/// The checksummed ranges of a valid chunk segment (`docs/format/chunks.md`).
fn segment_crc_ranges(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut at = 8;
    while at < b.len() {
        let (len, data) = uvarint_at(b, at + 1);
        out.push((at, data + len as usize));
        at = data + len as usize + 4;
    }
    out
}

fn reseal(b: &mut [u8], ranges: &[(usize, usize)]) {
    for &(from, to) in ranges {
        let c = crc32c(&b[from..to]);
        b[to..to + 4].copy_from_slice(&c.to_be_bytes());
    }
}

// ---- the fixture block ----------------------------------------------------------------------------

/// Two small blocks, written once, each with a tombstone: the same series with the cold codec off (XOR
/// and XorSt chunks, Prometheus' bytes) and on (the XOR runs became Dense or Decimal chunks), so every chunk
/// encoding a block can hold is there to be damaged. `k` picks one.
fn fixture(k: usize) -> &'static PathBuf {
    static DIRS: OnceLock<[(tempfile::TempDir, PathBuf); 2]> = OnceLock::new();
    &DIRS.get_or_init(|| [fixture_block(ColdCodec::Xor), fixture_block(ColdCodec::Dense)])[k % 2].1
}

fn fixture_block(cold_codec: ColdCodec) -> (tempfile::TempDir, PathBuf) {
    {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut series = Vec::new();
        for i in 0..12 {
            let labels = Labels::from_pairs([
                ("__name__", if i % 3 == 0 { "up" } else { "reqs_total" }.to_string()),
                ("job", ["api", "db", "web"][i % 3].to_string()),
                ("instance", format!("host-{i}")),
            ]);
            let mut chunks = Vec::new();
            for c in 0..(1 + i % 4) {
                let base = c as i64 * 400_000;
                let s: Vec<Sample> = (0..(20 + 7 * i))
                    .map(|k| Sample::new(base + k as i64 * 15_000, ((k * i) % 13) as f64 * 0.5))
                    .collect();
                let (encoding, data) = if i % 5 == 4 {
                    let sts: Vec<i64> = s.iter().map(|x| x.t - 1_000).collect();
                    (ChunkEncoding::XorSt, tessera_encoding::encode_xor_st(&s, &sts))
                } else {
                    (ChunkEncoding::Xor, tessera_encoding::encode_xor(&s))
                };
                chunks.push(ChunkRef {
                    mint_ms: s[0].t,
                    maxt_ms: s[s.len() - 1].t,
                    encoding,
                    data: Bytes::from(data),
                });
            }
            series.push((labels, chunks));
        }
        series.sort_by(|a, b| a.0.cmp(&b.0));
        let opts = WriteOptions {
            max_segment_bytes: 4 << 10,
            cold_codec,
            ..Default::default()
        };
        let it = series.into_iter().map(Ok::<_, tessera_tsdb::Error>);
        let meta = write_block_with(dir.path(), 0, 4_000_000, it, CompactionMeta::default(), &opts)
            .expect("write")
            .expect("non-empty block");
        let path = dir.path().join(&meta.id);
        let b = Block::open(&path).expect("open");
        b.delete(&[(1, Interval::new(30_000, 90_000)), (5, Interval::new(i64::MIN, 0))])
            .expect("delete");
        // The fixture must hold what it promises.
        let mut encodings = std::collections::BTreeSet::new();
        for r in 0..b.index().num_series() {
            for c in b.series(r).expect("series").1 {
                encodings.insert(format!("{:?}", c.encoding));
            }
        }
        let want = if cold_codec == ColdCodec::Xor {
            vec!["Xor", "XorSt"]
        } else {
            vec!["Decimal", "Dense", "XorSt"]
        };
        assert_eq!(
            encodings,
            want.iter().map(|s| s.to_string()).collect(),
            "chunk encodings of the fixture"
        );
        (dir, path)
    }
}

fn copy_block(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.join("chunks")).expect("mkdir");
    for e in std::fs::read_dir(from)
        .expect("ls")
        .chain(std::fs::read_dir(from.join("chunks")).expect("ls"))
    {
        let e = e.expect("entry");
        if e.file_type().expect("type").is_file() {
            let rel = e.path().strip_prefix(from).expect("inside").to_path_buf();
            std::fs::copy(e.path(), to.join(rel)).expect("copy");
        }
    }
}

fn segments(block: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(block.join("chunks"))
        .expect("ls")
        .map(|e| e.expect("e").path())
        .collect();
    v.sort();
    v
}

// ---- readers: everything that can be read out of an index or a block ------------------------------

fn matchers() -> Vec<Vec<Matcher>> {
    let m = |op, n: &str, v: &str| Matcher::new(op, n, v).expect("valid matcher");
    vec![
        vec![m(MatchOp::Equal, "__name__", "up")],
        vec![
            m(MatchOp::NotEqual, "job", "api"),
            m(MatchOp::Regex, "instance", "host-1.*"),
        ],
        vec![m(MatchOp::NotRegex, "job", ""), m(MatchOp::Regex, "__name__", ".+")],
        vec![m(MatchOp::Equal, "nope", "")],
    ]
}

fn read_index(ix: &BlockIndex) {
    for r in 0..ix.num_series().min(64) {
        let _ = ix.series(r);
        let mut metas = Vec::new();
        let _ = ix.series_range_into(r, 100_000, 500_000, &mut metas);
        let _ = ix.series_range_into(r, i64::MIN, i64::MIN, &mut metas);
    }
    let _ = ix.series(u32::MAX);
    if let Ok(names) = ix.label_names() {
        for n in names.iter().take(16) {
            if let Ok(vals) = ix.label_values(n, "") {
                for v in vals.iter().take(16) {
                    let _ = ix.postings(n, v);
                }
            }
            let _ = ix.label_values(n, "h");
        }
    }
    let _ = ix.all_postings();
    for ms in matchers() {
        let _ = postings_for_matchers(ix, &ms);
    }
}

fn read_chunk(c: &ChunkRef) {
    let mut out = Vec::new();
    let _ = tessera_encoding::decode_chunk_range_into(c, i64::MIN, i64::MAX, &mut out);
    out.clear();
    let _ = tessera_encoding::decode_chunk_range_into(c, 100_000, 200_000, &mut out);
    out.clear();
    let mut sts = Vec::new();
    let _ = tessera_encoding::decode_chunk_range_st_into(c, i64::MIN, i64::MAX, &mut out, &mut sts);
    let _ = tessera_encoding::to_xor_chunks(c, 120);
}

fn read_block(b: &Block) {
    read_index(b.index());
    let ts = b.tombstones();
    for r in 0..b.index().num_series().min(64) {
        if let Ok((_, metas)) = b.index().series(r) {
            for m in &metas {
                if let Ok(c) = b.chunk(m) {
                    read_chunk(&c);
                }
            }
        }
        if let Ok((_, cs)) = b.series_in_range(r, 0, 500_000) {
            for c in &cs {
                let mut out = Vec::new();
                if tessera_encoding::decode_chunk_range_into(c, 0, 500_000, &mut out).is_ok() {
                    ts.apply(r, &mut out);
                }
            }
        }
    }
    let _ = b.all_series();
    let _ = b.meta();
}

fn open_and_read(dir: &Path) {
    if let Ok(b) = Block::open(dir) {
        read_block(&b);
    }
}

// ---- WAL records ----------------------------------------------------------------------------------

fn valid_wal_records() -> Vec<Vec<u8>> {
    let l1 = Labels::from_pairs([("__name__", "a"), ("job", "x")]);
    let l2 = Labels::from_pairs([("__name__", "b"), ("instance", "h:1")]);
    let mut out = Vec::new();
    let mut b = Vec::new();
    wal_records::encode_series(&mut b, [(1u32, &l1), (2, &l2)].into_iter());
    out.push(b);
    let mut b = Vec::new();
    let mut e = BatchEncoder::new(&mut b, [(3u32, &l1)].into_iter());
    e.group(
        3,
        &[
            Sample::new(1, 1.0),
            Sample::new(15_001, f64::NAN),
            Sample::new(30_000, tessera_model::STALE_NAN),
        ],
    );
    e.group(1, &[Sample::new(-5, -0.0)]);
    e.finish();
    out.push(b);
    let mut b = Vec::new();
    let mut e = BatchEncoder::new_st(&mut b, [(4u32, &l2)].into_iter());
    e.group_st(4, &[Sample::new(1_000, 1.0), Sample::new(2_000, 2.0)], &[500, 500]);
    e.group_st(2, &[Sample::new(7, 7.0)], &[0]);
    e.group(1, &[Sample::new(8, 8.0)]);
    e.finish();
    out.push(b);
    let mut b = Vec::new();
    wal_records::encode_tombstones(
        &mut b,
        &[
            TombstoneRec {
                series_ref: 1,
                mint_ms: i64::MIN,
                maxt_ms: 5,
            },
            TombstoneRec {
                series_ref: 9,
                mint_ms: 0,
                maxt_ms: i64::MAX,
            },
        ],
    );
    out.push(b);
    for r in &out {
        wal_records::decode(r).expect("the valid records decode");
    }
    out
}

// ---- properties -----------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config(500))]

    #[test]
    fn wal_records_arbitrary_bytes_never_panic(typ in 0u8..10, body in proptest::collection::vec(any::<u8>(), 0..300)) {
        let mut rec = vec![typ];
        rec.extend_from_slice(&body);
        let _ = wal_records::decode(&rec);
        let _ = wal_records::decode(&body);
        // Packed records (types 7 and 8) through the replay's unpacker.
        let mut u = tessera_tsdb::wal_pack::Unpacker::new().expect("zstd");
        let _ = u.decode(&rec);
        let _ = u.decode(&body);
    }

    #[test]
    fn wal_records_mutated_never_panic(which in 0usize..4, packed in any::<bool>(), muts in proptest::collection::vec(mutation(), 1..4)) {
        let mut rec = valid_wal_records().swap_remove(which);
        if packed {
            // Context-coded (batches) and compressed, as a shard logs it.
            if matches!(rec[0], 2 | 4 | 5) {
                let mut ctx = wal_records::ValueCtx::default();
                let mut coded = Vec::new();
                wal_records::transcode_batch(&rec, &mut ctx, &mut coded).expect("valid batches transcode");
                rec = coded;
            }
            rec = tessera_tsdb::wal_pack::compress(&rec);
        }
        for m in &muts {
            apply(&mut rec, m, None);
        }
        let _ = wal_records::decode(&rec);
        let mut u = tessera_tsdb::wal_pack::Unpacker::new().expect("zstd");
        let _ = u.decode(&rec);
    }

    #[test]
    fn tombstones_arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..200), framed in any::<bool>()) {
        let mut b = if framed { vec![0x54, 0x53, 0x54, 0x42, 1] } else { Vec::new() };
        b.extend_from_slice(&body);
        if framed {
            let c = crc32c(&b[5..]);
            b.extend_from_slice(&c.to_be_bytes());
        }
        if let Ok(t) = Tombstones::decode(&b, "tombstones") {
            let mut s = vec![Sample::new(0, 1.0), Sample::new(i64::MAX, 2.0), Sample::new(i64::MIN, 3.0)];
            for (r, _) in t.iter() {
                t.apply(r, &mut s);
                let _ = t.overlaps(r, i64::MIN, i64::MAX);
            }
            let _ = Tombstones::decode(&t.encode(), "tombstones").expect("re-encoded tombstones decode");
        }
    }

    #[test]
    fn tombstones_mutated_never_panic(muts in proptest::collection::vec(mutation(), 1..4), resealed in any::<bool>()) {
        let mut t = Tombstones::new();
        t.add(0, Interval::new(i64::MIN, -1));
        t.add(3, Interval::new(5, 10));
        t.add(3, Interval::new(100, i64::MAX));
        t.add(u32::MAX, Interval::new(0, 0));
        let mut b = t.encode();
        for m in &muts {
            let body = if resealed { Some((5, b.len().saturating_sub(4))) } else { None };
            apply(&mut b, m, body);
        }
        if resealed && b.len() >= 9 {
            let n = b.len();
            let c = crc32c(&b[5..n - 4]);
            b[n - 4..].copy_from_slice(&c.to_be_bytes());
        }
        if let Ok(t) = Tombstones::decode(&b, "tombstones") {
            let mut s = vec![Sample::new(0, 1.0), Sample::new(7, 2.0)];
            t.apply(3, &mut s);
        }
    }

    #[test]
    fn index_arbitrary_bytes_with_a_valid_header_never_panic(body in proptest::collection::vec(any::<u8>(), 0..600), toc in proptest::collection::vec(0u64..700, 5)) {
        // A header and a checksummed TOC pointing into the random body: past the first two checks.
        let mut b = vec![0x54, 0x53, 0x49, 0x58, 1];
        b.extend_from_slice(&body);
        let mut offs = toc;
        offs.sort_unstable();
        let at = b.len();
        for o in offs {
            b.extend_from_slice(&o.to_be_bytes());
        }
        let c = crc32c(&b[at..]);
        b.extend_from_slice(&c.to_be_bytes());
        if let Ok(ix) = BlockIndex::from_bytes(Bytes::from(b), "index".into()) {
            read_index(&ix);
        }
    }

    #[test]
    fn index_mutated_resealed_never_panics(muts in proptest::collection::vec(mutation(), 1..4)) {
        let orig = std::fs::read(fixture(0).join("index")).expect("read");
        let ranges = index_crc_ranges(&orig);
        let mut b = orig.clone();
        let in_place = muts.iter().all(Mutation::in_place);
        for m in &muts {
            apply(&mut b, m, None);
        }
        if in_place {
            reseal(&mut b, &ranges);
        }
        if let Ok(ix) = BlockIndex::from_bytes(Bytes::from(b), "index".into()) {
            read_index(&ix);
        }
    }
}

proptest! {
    // Each case copies and opens a whole block directory: fewer cases.
    #![proptest_config(config(120))]

    #[test]
    fn block_with_a_mutated_file_never_panics(k in 0usize..2, file in 0usize..4, muts in proptest::collection::vec(mutation(), 1..4), resealed in any::<bool>(), seg in any::<usize>()) {
        let src = fixture(k);
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("blk");
        copy_block(src, &dir);
        let segs = segments(&dir);
        let path = match file {
            0 => dir.join("index"),
            1 => segs[seg % segs.len()].clone(),
            2 => dir.join("tombstones"),
            _ => dir.join("meta.json"),
        };
        let mut b = std::fs::read(&path).expect("read");
        let ranges = match file {
            0 => index_crc_ranges(&b),
            1 => segment_crc_ranges(&b),
            2 => vec![(5, b.len() - 4)],
            _ => Vec::new(),
        };
        for m in &muts {
            apply(&mut b, m, None);
        }
        if resealed && muts.iter().all(Mutation::in_place) {
            reseal(&mut b, &ranges);
        }
        std::fs::write(&path, &b).expect("write");
        open_and_read(&dir);
    }

    #[test]
    fn block_meta_json_edits_never_panic(k in 0usize..2, field in 0usize..8, value in prop_oneof![
        Just("-1".to_string()), Just("0".to_string()), Just("9223372036854775807".to_string()),
        Just("-9223372036854775808".to_string()), Just("1e400".to_string()), Just("null".to_string()),
        Just("\"\"".to_string()), Just("[]".to_string()), Just("{}".to_string()), Just("18446744073709551616".to_string()),
        any::<i64>().prop_map(|v| v.to_string()),
    ]) {
        let src = fixture(k);
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("blk");
        copy_block(src, &dir);
        let p = dir.join("meta.json");
        let mut j: serde_json::Value = serde_json::from_slice(&std::fs::read(&p).expect("read")).expect("json");
        let v: serde_json::Value = serde_json::from_str(&value).unwrap_or(serde_json::Value::Null);
        let keys: Vec<String> = j.as_object().expect("object").keys().cloned().collect();
        let k = &keys[field % keys.len()];
        j[k] = v;
        if field >= keys.len() {
            // Damage a nested field too, when there is one.
            if let Some(obj) = j.as_object_mut().and_then(|o| o.values_mut().find_map(|x| x.as_object_mut())) {
                for x in obj.values_mut() {
                    *x = serde_json::Value::from(-1);
                }
            }
        }
        std::fs::write(&p, serde_json::to_vec(&j).expect("json")).expect("write");
        open_and_read(&dir);
    }
}

/// The harness itself: the reseal helpers understand the fixture's layout (a resealed, unmutated file
/// reads exactly as before) and every encoding is there to be fuzzed.
#[test]
fn reseal_helpers_match_the_written_layout() {
    for k in 0..2 {
        let dir = fixture(k);
        let ix = std::fs::read(dir.join("index")).expect("read");
        let mut b = ix.clone();
        reseal(&mut b, &index_crc_ranges(&ix));
        assert_eq!(b, ix);
        for s in segments(dir) {
            let seg = std::fs::read(&s).expect("read");
            let mut b = seg.clone();
            reseal(&mut b, &segment_crc_ranges(&seg));
            assert_eq!(b, seg);
        }
        let blk = Block::open(dir).expect("open");
        assert!(!blk.tombstones().is_empty());
        read_block(&blk);
    }
}
