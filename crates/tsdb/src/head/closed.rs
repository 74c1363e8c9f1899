//! A series' list of closed head chunks, packed: newest first, each entry a few varints relative to the
//! next newer one, in one exact-size allocation (none while the list is empty).
//!
//! A [`HeadChunk`] is 32 bytes and a series holds a handful of them (a merged Decimal chunk and up to four
//! short ones, plus a few more per block-range window once the head spans hours); as a `Vec` with its
//! capacity slack that was ~150 bytes a series, the largest part of a series' RAM after its open chunk.
//! Packed, an entry takes ~13 bytes (its time range as the gap to the next newer chunk and its length,
//! the segment as "same as the newer one" in a flag bit, offset, length and sample count as varints).
//!
//! ```text
//! count (uvarint)
//! entry*   newest first:
//!   flag     u8: the chunk encoding (every `ChunkEncoding` value is below 0x80) | 0x80 when the segment
//!            is the newer entry's
//!   anchor   zigzag varint: maxt for the newest entry, else newer.mint − maxt (≥ 1: chunks do not overlap)
//!   span     zigzag varint: maxt − mint
//!   seg      absent with the flag bit; else uvarint (newest) or zigzag varint seg − newer.seg
//!   off len samples   uvarint each
//! ```
//!
//! Newest first because readers mostly want the newest chunks (an instant query at "now" stops after
//! the first entry or two), a head cut drops the oldest (a truncation of the bytes: the entries left do
//! not depend on the ones after them), and a merge replaces entries near the front. Differences are
//! wrapping, so any `i64` times and `u32` locations round-trip. Writes (a close, a merge, a cut) build a
//! new allocation; they happen once per chunk, not per sample.

use tessera_encoding::varint::{put_uvarint as put, zigzag_decode, zigzag_encode};
use tessera_model::ChunkEncoding;

use super::chunk_files::Loc;
use super::HeadChunk;

const SAME_SEG: u8 = 0x80;

thread_local! {
    /// Where a list is packed before it is copied into its exact-size allocation (one `malloc` of the
    /// final size: no growth or shrink leaves fragments behind in the allocator).
    static SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Closed chunks of one series, sorted by time and non-overlapping; see the module docs.
#[derive(Debug, Default, Clone)]
pub(crate) struct ClosedChunks(Box<[u8]>);

/// Reads a uvarint written by [`put`] (`tessera_encoding`'s `put_uvarint`). Not its `read_uvarint`: the
/// bytes are this module's own, so there is no error to return (a short read yields zeros and a debug
/// assertion, never a panic), and one-byte values take a short path.
#[inline(always)]
fn get(b: &[u8], pos: &mut usize) -> u64 {
    // Most fields take one byte (flags, lengths, sample counts, a segment delta).
    if let Some(&byte) = b.get(*pos)
        && byte < 0x80
    {
        *pos += 1;
        return u64::from(byte);
    }
    let (mut x, mut shift) = (0u64, 0u32);
    while let Some(&byte) = b.get(*pos) {
        *pos += 1;
        x |= u64::from(byte & 0x7f).wrapping_shl(shift);
        if byte < 0x80 {
            return x;
        }
        shift += 7;
    }
    debug_assert!(false, "closed-chunk list truncated");
    x
}

/// Appends `c` relative to `newer` (the entry before it in the list; `None` for the newest).
fn put_entry(buf: &mut Vec<u8>, c: &HeadChunk, newer: Option<&HeadChunk>) {
    let same = newer.is_some_and(|n| n.loc.seg == c.loc.seg);
    buf.push(c.encoding as u8 | if same { SAME_SEG } else { 0 });
    let anchor = match newer {
        None => c.maxt,
        Some(n) => n.mint.wrapping_sub(c.maxt),
    };
    put(buf, zigzag_encode(anchor));
    put(buf, zigzag_encode(c.maxt.wrapping_sub(c.mint)));
    match newer {
        _ if same => {}
        None => put(buf, u64::from(c.loc.seg)),
        Some(n) => put(buf, zigzag_encode(i64::from(c.loc.seg) - i64::from(n.loc.seg))),
    }
    put(buf, u64::from(c.loc.off));
    put(buf, u64::from(c.loc.len));
    put(buf, u64::from(c.samples));
}

/// Reads the entry at `*pos`, the one after an entry starting at `newer.0` in segment `newer.1`.
#[inline(always)]
fn get_entry(b: &[u8], pos: &mut usize, newer: Option<(i64, u32)>) -> HeadChunk {
    let flag = b.get(*pos).copied().unwrap_or(0);
    *pos += 1;
    let anchor = zigzag_decode(get(b, pos));
    let maxt = match newer {
        None => anchor,
        Some((mint, _)) => mint.wrapping_sub(anchor),
    };
    let mint = maxt.wrapping_sub(zigzag_decode(get(b, pos)));
    let seg = match newer {
        Some((_, seg)) if flag & SAME_SEG != 0 => seg,
        None => get(b, pos) as u32,
        Some((_, seg)) => (i64::from(seg) + zigzag_decode(get(b, pos))) as u32,
    };
    let off = get(b, pos) as u32;
    let len = get(b, pos) as u32;
    let samples = get(b, pos) as u16;
    let encoding = ChunkEncoding::from_u8(flag & !SAME_SEG).unwrap_or_else(|| {
        debug_assert!(false, "closed-chunk list: bad encoding byte {flag:#x}");
        ChunkEncoding::Xor
    });
    HeadChunk { mint, maxt, loc: Loc { seg, off, len }, samples, encoding }
}

/// Newest-first iterator over a [`ClosedChunks`]; [`Iter::pos`] is where the next entry begins.
pub(crate) struct Iter<'a> {
    b: &'a [u8],
    pos: usize,
    left: usize,
    /// The last entry read: its start and segment.
    prev: Option<(i64, u32)>,
}

impl Iterator for Iter<'_> {
    type Item = HeadChunk;

    #[inline]
    fn next(&mut self) -> Option<HeadChunk> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let c = get_entry(self.b, &mut self.pos, self.prev);
        self.prev = Some((c.mint, c.loc.seg));
        Some(c)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Iter<'_> {}

impl ClosedChunks {
    /// Number of closed chunks (read from the allocation: the hot paths learn of closes otherwise).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.iter().len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Bytes held (the list's allocation).
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.0.len()
    }

    /// Start of the allocation (for prefetching).
    pub(crate) fn as_ptr(&self) -> *const u8 {
        self.0.as_ptr()
    }

    /// The chunks, newest first.
    #[inline]
    pub(crate) fn iter(&self) -> Iter<'_> {
        let mut pos = 0;
        let left = if self.0.is_empty() { 0 } else { get(&self.0, &mut pos) as usize };
        Iter { b: &self.0, pos, left, prev: None }
    }

    pub(crate) fn newest(&self) -> Option<HeadChunk> {
        self.iter().next()
    }

    #[cfg(test)]
    pub(crate) fn oldest(&self) -> Option<HeadChunk> {
        self.iter().last()
    }

    /// The chunks, oldest first.
    #[cfg(test)]
    pub(crate) fn to_vec(&self) -> Vec<HeadChunk> {
        let mut v: Vec<HeadChunk> = self.iter().collect();
        v.reverse();
        v
    }

    /// Adds `c`, newer than every chunk listed.
    pub(crate) fn push(&mut self, c: HeadChunk) {
        self.splice_front(0, std::slice::from_ref(&c));
    }

    /// Replaces the `remove` newest chunks with `insert` (newest first).
    pub(crate) fn splice_front(&mut self, remove: usize, insert: &[HeadChunk]) {
        let mut it = self.iter();
        let n = it.left;
        let remove = remove.min(n);
        for _ in 0..remove {
            it.next();
        }
        // The first entry kept is re-encoded after the inserted ones; the rest keep their bytes.
        let kept = it.next();
        let tail = &self.0[it.pos.min(self.0.len())..];
        let count = n - remove + insert.len();
        if count == 0 {
            self.0 = Box::default();
            return;
        }
        let packed = SCRATCH.with_borrow_mut(|buf| {
            buf.clear();
            put(buf, count as u64);
            let mut newer: Option<&HeadChunk> = None;
            for c in insert.iter().chain(kept.as_ref()) {
                put_entry(buf, c, newer);
                newer = Some(c);
            }
            buf.extend_from_slice(tail);
            Box::<[u8]>::from(&buf[..])
        });
        self.0 = packed;
    }

    /// Drops the chunks ending before `t` (the oldest ones): one pass over the list, which also finds
    /// the oldest chunk kept.
    pub(crate) fn drop_before(&mut self, t: i64) -> Dropped {
        let mut it = self.iter();
        let n = it.left;
        let (mut keep, mut cut) = (0, it.pos);
        let mut d = Dropped::default();
        loop {
            let at = it.pos;
            let Some(c) = it.next() else { break };
            if c.maxt < t {
                if d.chunks == 0 {
                    cut = at;
                }
                d.chunks += 1;
                d.samples += u64::from(c.samples);
                d.bytes += u64::from(c.loc.len);
            } else {
                keep += 1;
                d.oldest_kept = Some(c.mint);
            }
        }
        if d.chunks == 0 {
            return d;
        }
        debug_assert_eq!(keep + d.chunks as usize, n);
        if keep == 0 {
            self.0 = Box::default();
            return d;
        }
        let mut pos = 0;
        get(&self.0, &mut pos);
        let packed = SCRATCH.with_borrow_mut(|buf| {
            buf.clear();
            put(buf, keep as u64);
            buf.extend_from_slice(&self.0[pos..cut]);
            Box::<[u8]>::from(&buf[..])
        });
        self.0 = packed;
        d
    }
}

/// What [`ClosedChunks::drop_before`] dropped, and the start of the oldest chunk it kept.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Dropped {
    pub chunks: u64,
    pub samples: u64,
    pub bytes: u64,
    pub oldest_kept: Option<i64>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn chunk(mint: i64, maxt: i64, seg: u32, off: u32, len: u32, samples: u16, encoding: ChunkEncoding) -> HeadChunk {
        HeadChunk { mint, maxt, loc: Loc { seg, off, len }, samples, encoding }
    }

    fn same(a: &[HeadChunk], b: &[HeadChunk]) -> bool {
        a.len() == b.len()
            && a.iter().zip(b).all(|(x, y)| {
                (x.mint, x.maxt, x.loc, x.samples, x.encoding) == (y.mint, y.maxt, y.loc, y.samples, y.encoding)
            })
    }

    const ENCODINGS: [ChunkEncoding; 6] = [
        ChunkEncoding::Xor,
        ChunkEncoding::XorSt,
        ChunkEncoding::Decimal,
        ChunkEncoding::Histogram,
        ChunkEncoding::FloatHistogramSt,
        ChunkEncoding::Dense,
    ];

    /// Chunks oldest first, sorted and non-overlapping when `sorted`, any values otherwise.
    fn chunks(sorted: bool) -> impl Strategy<Value = Vec<HeadChunk>> {
        prop::collection::vec(
            (any::<i64>(), any::<i64>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u16>(), 0..ENCODINGS.len(), 1i64..100_000, 0i64..1_000_000),
            0..40,
        )
        .prop_map(move |v| {
            let mut t = 1_795_449_600_000i64;
            v.into_iter()
                .map(|(a, b, seg, off, len, samples, e, gap, span)| {
                    let (mint, maxt) = if sorted {
                        let m = t + gap;
                        t = m + span;
                        (m, t)
                    } else {
                        (a, b)
                    };
                    chunk(mint, maxt, seg, off, len, samples, ENCODINGS[e])
                })
                .collect()
        })
    }

    proptest! {
        #[test]
        fn pushed_chunks_read_back_exactly(cs in chunks(false)) {
            let mut l = ClosedChunks::default();
            for c in &cs {
                l.push(c.clone());
            }
            prop_assert_eq!(l.len(), cs.len());
            prop_assert!(same(&l.to_vec(), &cs));
            prop_assert!(same(&[l.newest()].into_iter().flatten().collect::<Vec<_>>(), cs.last().map(std::slice::from_ref).unwrap_or(&[])));
            prop_assert!(same(&[l.oldest()].into_iter().flatten().collect::<Vec<_>>(), cs.first().map(std::slice::from_ref).unwrap_or(&[])));
        }

        #[test]
        fn splices_and_cuts_give_what_the_same_edits_of_a_vec_give(cs in chunks(true), remove in 0usize..6, ins in 0usize..3, cut in any::<prop::sample::Index>()) {
            let mut l = ClosedChunks::default();
            for c in &cs {
                l.push(c.clone());
            }
            // Replace the `remove` newest by up to `ins` chunks built from them (as a merge does).
            let mut v = cs.clone();
            let r = remove.min(v.len());
            let gone: Vec<HeadChunk> = v.split_off(v.len() - r);
            let new: Vec<HeadChunk> = gone.iter().rev().take(ins).map(|c| chunk(c.mint, c.maxt, c.loc.seg + 1, 7, 9, 480, ChunkEncoding::Decimal)).collect();
            l.splice_front(r, &new);
            v.extend(new.iter().rev().cloned());
            prop_assert_eq!(l.len(), v.len());
            prop_assert!(same(&l.to_vec(), &v));
            // A cut at some chunk's end (or past them all).
            let t = if v.is_empty() { 0 } else { v[cut.index(v.len())].maxt + 1 };
            let k = v.iter().take_while(|c| c.maxt < t).count();
            let d = l.drop_before(t);
            prop_assert_eq!(d, Dropped {
                chunks: k as u64,
                samples: v[..k].iter().map(|c| u64::from(c.samples)).sum(),
                bytes: v[..k].iter().map(|c| u64::from(c.loc.len)).sum(),
                oldest_kept: v.get(k).map(|c| c.mint),
            });
            prop_assert!(same(&l.to_vec(), &v[k..]));
            prop_assert_eq!(l.is_empty(), k == v.len());
        }
    }

    #[test]
    fn an_entry_takes_about_a_dozen_bytes() {
        // A 10 s scrape: chunks of ~40 samples a few hundred bytes apart in one 4 MiB segment.
        let mut l = ClosedChunks::default();
        let mut t = 1_795_449_600_000i64;
        for i in 0..8u32 {
            l.push(chunk(t, t + 390_000, 3, 1_000_000 + i * 700_000 % 3_000_000, 170, 40, ChunkEncoding::Decimal));
            t += 400_000;
        }
        assert!(l.bytes() <= 1 + 8 * 14 + 4, "{} bytes", l.bytes());
        assert_eq!(ClosedChunks::default().bytes(), 0);
    }
}
