//! Tombstones: which samples of a block are deleted, as time intervals per series.
//!
//! A block is immutable, so `DELETE` (the admin API's delete-series) does not rewrite it; it records
//! `(series ref, [mint, maxt])` intervals in the block's `tombstones` file, readers hide the covered
//! samples, and compaction finally drops them (see `compact`). Intervals are inclusive at both ends, kept
//! sorted and merged (overlapping or adjacent intervals become one), as Prometheus'
//! `tombstones.Intervals.Add` does.
//!
//! Format: `docs/format/tombstones.md` — a magic, a version, the intervals, and a CRC32C over the body.

use crate::block::bin::{crc32c, put_u32, put_uvarint, put_varint, Dec};
use crate::index::SeriesRef;
use crate::Error;
use std::collections::BTreeMap;
use tessera_model::Sample;

/// Magic number of the tombstones file ("TSTB").
pub const TOMBSTONES_MAGIC: u32 = 0x5453_5442;
/// Tombstones format version.
pub const TOMBSTONES_VERSION: u8 = 1;

/// A deleted time span, both ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Interval {
    pub mint_ms: i64,
    pub maxt_ms: i64,
}

impl Interval {
    pub const fn new(mint_ms: i64, maxt_ms: i64) -> Self {
        Self { mint_ms, maxt_ms }
    }

    pub fn contains(&self, t: i64) -> bool {
        self.mint_ms <= t && t <= self.maxt_ms
    }

    /// True when `[mint, maxt]` shares at least one timestamp with this interval.
    pub fn overlaps(&self, mint_ms: i64, maxt_ms: i64) -> bool {
        self.mint_ms <= maxt_ms && mint_ms <= self.maxt_ms
    }
}

/// Deleted intervals per series reference of one block.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tombstones {
    map: BTreeMap<SeriesRef, Vec<Interval>>,
}

impl Tombstones {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records that `iv` of series `r` is deleted, merging with what is there. An interval with
    /// `mint > maxt` is ignored.
    pub fn add(&mut self, r: SeriesRef, iv: Interval) {
        if iv.mint_ms > iv.maxt_ms {
            return;
        }
        let ivs = self.map.entry(r).or_default();
        ivs.push(iv);
        merge_intervals(ivs);
    }

    /// The sorted, merged intervals of series `r` (empty when none).
    pub fn get(&self, r: SeriesRef) -> &[Interval] {
        self.map.get(&r).map(Vec::as_slice).unwrap_or(&[])
    }

    pub fn is_deleted(&self, r: SeriesRef, t: i64) -> bool {
        is_deleted_in(self.get(r), t)
    }

    /// True when some deleted interval of `r` touches `[mint, maxt]`.
    pub fn overlaps(&self, r: SeriesRef, mint_ms: i64, maxt_ms: i64) -> bool {
        self.get(r).iter().any(|iv| iv.overlaps(mint_ms, maxt_ms))
    }

    /// Removes the deleted samples of series `r` from `samples` (sorted by time or not).
    pub fn apply(&self, r: SeriesRef, samples: &mut Vec<Sample>) {
        let ivs = self.get(r);
        if !ivs.is_empty() {
            samples.retain(|s| !is_deleted_in(ivs, s.t));
        }
    }

    /// Number of series with at least one interval.
    pub fn num_series(&self) -> usize {
        self.map.len()
    }

    /// Number of intervals over all series (Prometheus' `NumTombstones` statistic).
    pub fn num_intervals(&self) -> usize {
        self.map.values().map(Vec::len).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (SeriesRef, &[Interval])> + '_ {
        self.map.iter().map(|(r, v)| (*r, v.as_slice()))
    }

    /// The file's bytes: `magic u32 | version u8 | body | crc32c(body) u32` (see docs/format/tombstones.md).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(16 + self.map.len() * 8);
        put_u32(&mut out, TOMBSTONES_MAGIC);
        out.push(TOMBSTONES_VERSION);
        let body_at = out.len();
        put_uvarint(&mut out, self.map.len() as u64);
        let mut prev = 0u32;
        for (&r, ivs) in &self.map {
            put_uvarint(&mut out, u64::from(r - prev));
            prev = r;
            put_uvarint(&mut out, ivs.len() as u64);
            for iv in ivs {
                put_varint(&mut out, iv.mint_ms);
                put_uvarint(&mut out, iv.maxt_ms.wrapping_sub(iv.mint_ms) as u64);
            }
        }
        let c = crc32c(&out[body_at..]);
        put_u32(&mut out, c);
        out
    }

    /// Parses a tombstones file; `file` names it in errors. Never panics on any input.
    pub fn decode(data: &[u8], file: &str) -> Result<Self, Error> {
        if data.len() < 9 {
            return Err(Error::corruption(file, 0, format!("tombstones file of {} bytes is too short", data.len())));
        }
        let mut d = Dec::new(data, 0, file);
        if d.u32()? != TOMBSTONES_MAGIC {
            return Err(Error::corruption(file, 0, "bad tombstones magic"));
        }
        let v = d.u8()?;
        if v != TOMBSTONES_VERSION {
            return Err(Error::corruption(file, 4, format!("unsupported tombstones version {v}")));
        }
        let body = &data[5..data.len() - 4];
        let want = Dec::new(&data[data.len() - 4..], data.len() as u64 - 4, file).u32()?;
        if crc32c(body) != want {
            return Err(Error::corruption(file, 5, "tombstones checksum mismatch"));
        }
        let mut d = Dec::new(body, 5, file);
        let n = d.uvarint()?;
        let mut map = BTreeMap::new();
        let mut r: u64 = 0;
        for i in 0..n {
            let delta = d.uvarint()?;
            if i > 0 && delta == 0 {
                return Err(d.err("duplicate series in tombstones"));
            }
            r = r.checked_add(delta).filter(|&r| r <= u64::from(u32::MAX)).ok_or_else(|| d.err("series reference overflow"))?;
            let k = d.uvarint()?;
            let mut ivs = Vec::with_capacity((k as usize).min(d.remaining()));
            for _ in 0..k {
                let mint = d.varint()?;
                let span = d.uvarint()?;
                let maxt = mint.checked_add_unsigned(span).ok_or_else(|| d.err("interval end overflows"))?;
                ivs.push(Interval::new(mint, maxt));
            }
            merge_intervals(&mut ivs);
            if !ivs.is_empty() {
                map.insert(r as SeriesRef, ivs);
            }
        }
        if !d.is_empty() {
            return Err(d.err("trailing bytes in tombstones"));
        }
        Ok(Self { map })
    }
}

fn is_deleted_in(ivs: &[Interval], t: i64) -> bool {
    // Intervals are sorted and disjoint: the candidate is the last one starting at or before t.
    let i = ivs.partition_point(|iv| iv.mint_ms <= t);
    i > 0 && ivs[i - 1].maxt_ms >= t
}

/// Sorts and merges overlapping or adjacent inclusive intervals in place.
pub fn merge_intervals(ivs: &mut Vec<Interval>) {
    ivs.sort_unstable();
    let mut out: Vec<Interval> = Vec::with_capacity(ivs.len());
    for &iv in ivs.iter() {
        match out.last_mut() {
            Some(last) if iv.mint_ms <= last.maxt_ms.saturating_add(1) => last.maxt_ms = last.maxt_ms.max(iv.maxt_ms),
            _ => out.push(iv),
        }
    }
    *ivs = out;
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn intervals_merge_and_apply() {
        let mut t = Tombstones::new();
        t.add(3, Interval::new(10, 20));
        t.add(3, Interval::new(21, 25)); // adjacent: merged
        t.add(3, Interval::new(40, 50));
        t.add(3, Interval::new(45, 60));
        t.add(3, Interval::new(5, 4)); // empty: ignored
        assert_eq!(t.get(3), &[Interval::new(10, 25), Interval::new(40, 60)]);
        assert!(t.is_deleted(3, 10) && t.is_deleted(3, 25) && t.is_deleted(3, 60));
        assert!(!t.is_deleted(3, 9) && !t.is_deleted(3, 26) && !t.is_deleted(3, 61) && !t.is_deleted(4, 15));
        let mut s: Vec<Sample> = (0..70).map(|t| Sample::new(t, t as f64)).collect();
        t.apply(3, &mut s);
        assert_eq!(s.len(), 70 - 16 - 21);
        assert!(s.iter().all(|x| !(10..=25).contains(&x.t) && !(40..=60).contains(&x.t)));
        assert_eq!(t.num_intervals(), 2);
    }

    #[test]
    fn encode_decode_round_trip_and_checksum() {
        let mut t = Tombstones::new();
        t.add(0, Interval::new(i64::MIN, i64::MAX));
        t.add(7, Interval::new(-5, 5));
        t.add(u32::MAX, Interval::new(1, 2));
        let b = t.encode();
        assert_eq!(Tombstones::decode(&b, "t").expect("valid"), t);
        let mut bad = b.clone();
        bad[7] ^= 1;
        assert!(matches!(Tombstones::decode(&bad, "t"), Err(Error::Corruption { .. })));
        assert!(Tombstones::decode(&Tombstones::new().encode(), "t").expect("valid").is_empty());
    }

    proptest! {
        #[test]
        fn decode_never_panics(data in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = Tombstones::decode(&data, "t");
        }

        #[test]
        fn decode_of_mutated_file_never_panics(ivs in proptest::collection::vec((0u32..50, -100i64..100, 0i64..50), 0..20), at in any::<usize>(), x in 1u8..) {
            let mut t = Tombstones::new();
            for (r, a, len) in ivs { t.add(r, Interval::new(a, a + len)); }
            let mut b = t.encode();
            let i = at % b.len();
            b[i] ^= x;
            let _ = Tombstones::decode(&b, "t");
            // Mutated length: never panics either.
            let _ = Tombstones::decode(&b[..i], "t");
        }

        #[test]
        fn merged_intervals_agree_with_brute_force(ivs in proptest::collection::vec((-50i64..50, 0i64..10), 0..12), probe in -60i64..70) {
            let mut t = Tombstones::new();
            for &(a, l) in &ivs { t.add(1, Interval::new(a, a + l)); }
            let brute = ivs.iter().any(|&(a, l)| a <= probe && probe <= a + l);
            prop_assert_eq!(t.is_deleted(1, probe), brute);
            let g = t.get(1);
            prop_assert!(g.windows(2).all(|w| w[0].maxt_ms + 1 < w[1].mint_ms));
        }
    }
}
