//! Reading a database: [`DbQuerier`] implements `tessera_model::Querier` over every shard's head and
//! blocks; `crate::merge::finalize_chunks_st` turns the chunks one series has across head and blocks into the
//! sorted, non-overlapping, fully-live chunk list the read contract promises.
//!
//! # Lazy, one series at a time
//!
//! `select_shard` returns a [`ShardSeries`] iterator that holds, per request, only series refs and one
//! series' chunks: it never materialises the result. On creation it takes a [`View`] of the shard under
//! one short read lock: `Arc` clones of the block list and the matching head refs (postings, 4 bytes a
//! series), the head refs sorted by their labels. Head refs are handed out in creation order, not label
//! order, so that sort is needed; it compares the labels in place (no copy) while the read lock is held,
//! O(n log n) comparisons for n matching head series. Each overlapping block's postings are resolved with
//! no lock at all (blocks are immutable; their refs are in label order already). Then each `next()`
//! merges the per-source sorted cursors: it picks the smallest current label set, reads that series'
//! chunks from every block that has it (zero-copy slices of the mapping) and, under a short read lock,
//! its head chunks, and yields it. Memory per request is the refs plus one series, whatever the range.
//!
//! # Consistency against a concurrent head cut
//!
//! A head cut writes the oldest head window as a new block and then, under one write lock, adds the
//! block to the list and drops the same data from the head; compaction and retention also swap the block
//! list under the write lock. The state under any one read lock is therefore consistent (every sample
//! in exactly one of head and blocks), but the iterator's block list is a snapshot and may go stale.
//! Decision: every time a series' head chunks are read, the same read lock also checks that the shard's
//! block list is still the snapshot's (pointer equality, O(blocks)). If it is, head + snapshot blocks is
//! exactly the current state, so that series is read from a consistent state. If it is not, the chunks
//! gathered for that series are dropped, a fresh [`View`] is taken and every cursor is moved past the last
//! label set already yielded, and the series is read again from the new view. Output is label-ordered, so
//! nothing is yielded twice (everything ≤ the last label set is skipped) and nothing vanishes (a series
//! not yet yielded is read whole from the new state, including the block the cut just wrote). A series
//! that is only in blocks needs no check: the snapshot's blocks are immutable and still hold all of its
//! data in the snapshot's state (a block deleted by retention meanwhile stays readable through its
//! mapping). Restarts cost one new view each and only follow a cut, a compaction or retention.
//!
//! Consequence: a batch committed while a stream is being consumed is visible in series yielded after it
//! and not in those yielded before (each series is read at a possibly later instant than the previous
//! one, never at an inconsistent one); one series' batch is applied under one write lock, so a series
//! never shows half a batch. Tombstones (head and block) are read per series too, so a deletion that
//! completes mid-stream applies to every series read after it.
//!
//! # Resident pages
//!
//! Every [`RELEASE_EVERY_BYTES`] (1 MiB) of block chunk data read, the iterator tells the kernel it may drop the
//! view's block mappings from the process' resident set (`Block::release_resident_pages`): the pages stay
//! in the page cache, so this changes no byte read (slices still held fault back in), but a long stream
//! no longer shows the whole range's block files as process RSS.

use std::cmp::Ordering;
use std::sync::Arc;

use tessera_model::{ChunkRef, Labels, Matcher, Querier, Sample, SelectHints, Series, SeriesSet, StorageError};

use crate::block::Block;
use crate::error::{Error, Result};
use crate::index::{postings_for_matchers, SeriesRef};
use crate::merge::{finalize_chunks_st, has_sample_in};
use crate::shard::{Shard, State};
use crate::tombstones::Interval;

/// Block chunk bytes read between two releases of the blocks' resident pages (see the module docs).
pub const RELEASE_EVERY_BYTES: usize = 1 << 20;

/// A view of `[mint_ms, maxt_ms]` over all shards.
pub struct DbQuerier {
    pub(crate) shards: Vec<Arc<Shard>>,
    pub(crate) mint: i64,
    pub(crate) maxt: i64,
}

/// One block's matching series, in label order, and the position reached.
struct BlockCursor {
    block: Arc<Block>,
    refs: Vec<SeriesRef>,
    pos: usize,
    /// Labels of `refs[pos]` (None when exhausted).
    cur: Option<Labels>,
}

impl BlockCursor {
    fn load_cur(&mut self) -> Result<()> {
        self.cur = match self.refs.get(self.pos) {
            Some(&r) => Some(self.block.series_labels(r)?),
            None => None,
        };
        Ok(())
    }

    /// Moves past every series whose labels are `<= after` (binary search: refs are in label order).
    fn skip_through(&mut self, after: &Labels) -> Result<()> {
        let (mut lo, mut hi) = (self.pos, self.refs.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.block.series_labels(self.refs[mid])? <= *after {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.pos = lo;
        self.load_cur()
    }
}

/// How many series ahead [`HeadCursor::load_cur`] prefetches series objects, and what they point to.
const PREFETCH_SLOT: usize = 8;
const PREFETCH_FAR: usize = 4;
const PREFETCH_MID: usize = 2;

/// The head's matching series, sorted by labels, and the position reached.
#[derive(Default)]
struct HeadCursor {
    refs: Vec<u32>,
    pos: usize,
    cur: Option<Labels>,
    /// The time range read (to prefetch the chunks that overlap it).
    mint: i64,
    maxt: i64,
}

impl HeadCursor {
    /// Sets `cur` to the labels of the first still-live ref at or after `pos` (a series garbage-collected
    /// by a cut that wrote no block has no data left to read).
    fn load_cur(&mut self, st: &State) {
        self.cur = None;
        while let Some(&r) = self.refs.get(self.pos) {
            if let Some(ms) = st.head.series(r) {
                // The series a few places on are scattered over the heap: start their cache misses now
                // (their entries in the series table first, then the series object, then, once it is
                // likely in cache, what it points to).
                if let Some(&r) = self.refs.get(self.pos + PREFETCH_SLOT) {
                    crate::block::mmap::prefetch(st.head.series_slot_addr(r));
                }
                if let Some(far) = self.refs.get(self.pos + PREFETCH_FAR).and_then(|&r| st.head.series(r)) {
                    let p = (far as *const crate::head::MemSeries).cast::<u8>();
                    crate::block::mmap::prefetch(p);
                    crate::block::mmap::prefetch(p.wrapping_add(64));
                    crate::block::mmap::prefetch(p.wrapping_add(std::mem::size_of::<crate::head::MemSeries>() - 1));
                }
                if let Some(mid) = self.refs.get(self.pos + PREFETCH_MID).and_then(|&r| st.head.series(r)) {
                    crate::block::mmap::prefetch(st.head.label_sets.addr(mid.labels_at));
                    crate::block::mmap::prefetch(mid.chunks.as_ptr());
                    crate::block::mmap::prefetch(mid.open.bytes().as_ptr());
                }
                if let Some(near) = self.refs.get(self.pos + 1).and_then(|&r| st.head.series(r)) {
                    // The closed chunks the read will take (their list is in cache by now): the first
                    // line of each, which holds its header.
                    for c in near.chunks.iter().take_while(|c| c.maxt >= self.mint).take(4) {
                        if c.mint <= self.maxt
                            && let Some(p) = st.head.files.addr_of(c.loc)
                        {
                            crate::block::mmap::prefetch(p);
                        }
                    }
                }
                self.cur = Some(st.head.labels_of(ms));
                return;
            }
            self.pos += 1;
        }
    }
}

/// What one request reads from one shard: a snapshot of the block list and the cursors.
struct View {
    /// The shard's whole block list when the view was taken, to detect a change (see the module docs).
    all_blocks: Vec<Arc<Block>>,
    head: HeadCursor,
    blocks: Vec<BlockCursor>,
}

impl View {
    /// Takes a view of `shard`; with `after`, every cursor starts past the series labelled `<= after`.
    fn take(shard: &Shard, matchers: &[Matcher], mint: i64, maxt: i64, series_only: bool, after: Option<&Labels>) -> Result<View> {
        let mut head = HeadCursor { mint, maxt, ..HeadCursor::default() };
        let all_blocks = {
            let st = shard.state.read();
            let h = &st.head;
            if h.num_series() > 0 && (series_only || (h.min_t <= maxt && h.max_t >= mint)) {
                let mut refs = postings_for_matchers(&h.index, matchers)?;
                refs.retain(|&r| h.series(r).is_some());
                h.sort_by_labels(&mut refs);
                if let Some(after) = after {
                    let at = |r: u32| h.series(r).expect("retained live refs only").labels_at;
                    let k = refs.partition_point(|&r| h.label_sets.cmp_labels(at(r), after).is_le());
                    refs.drain(..k);
                }
                head.refs = refs;
                head.load_cur(&st);
            }
            st.blocks.clone()
        };
        let mut blocks = Vec::new();
        for b in &all_blocks {
            if !b.meta().overlaps_closed(mint, maxt) {
                continue;
            }
            let refs = postings_for_matchers(b.index(), matchers)?;
            if refs.is_empty() {
                continue;
            }
            let mut c = BlockCursor { block: b.clone(), refs, pos: 0, cur: None };
            match after {
                Some(a) => c.skip_through(a)?,
                None => c.load_cur()?,
            }
            blocks.push(c);
        }
        Ok(View { all_blocks, head, blocks })
    }

    /// The smallest current label set over all cursors.
    fn min_labels(&self) -> Option<Labels> {
        let mut best: Option<&Labels> = self.head.cur.as_ref();
        for c in &self.blocks {
            if let Some(l) = &c.cur
                && best.is_none_or(|b| l.cmp(b) == Ordering::Less)
            {
                best = Some(l);
            }
        }
        best.cloned()
    }
}

fn same_blocks(a: &[Arc<Block>], b: &[Arc<Block>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| Arc::ptr_eq(x, y))
}

/// The lazy, label-sorted series of one shard (see the module docs).
pub(crate) struct ShardSeries {
    shard: Arc<Shard>,
    matchers: Vec<Matcher>,
    mint: i64,
    maxt: i64,
    series_only: bool,
    view: View,
    /// The last label set dealt with (yielded, or found to have no sample in range).
    last: Option<Labels>,
    done: bool,
    /// Views taken again after the block list changed (for tests and curiosity).
    restarts: usize,
    block_bytes_since_release: usize,
    /// Yield series whose chunks overlap the range without checking that a sample lies inside it
    /// ([`SelectHints::unchecked_range`]).
    pub(crate) unchecked_range: bool,
}

impl ShardSeries {
    pub(crate) fn new(shard: Arc<Shard>, matchers: &[Matcher], mint: i64, maxt: i64, series_only: bool) -> Result<Self> {
        let view = if matchers.is_empty() {
            View { all_blocks: Vec::new(), head: HeadCursor::default(), blocks: Vec::new() }
        } else {
            View::take(&shard, matchers, mint, maxt, series_only, None)?
        };
        Ok(ShardSeries {
            shard,
            matchers: matchers.to_vec(),
            mint,
            maxt,
            series_only,
            view,
            last: None,
            done: false,
            restarts: 0,
            block_bytes_since_release: 0,
            unchecked_range: false,
        })
    }

    /// Advances every cursor standing on `labels`.
    fn advance_past(&mut self, labels: &Labels, st: Option<&State>) -> Result<()> {
        for c in &mut self.view.blocks {
            if c.cur.as_ref() == Some(labels) {
                c.pos += 1;
                c.load_cur()?;
            }
        }
        while self.view.head.cur.as_ref() == Some(labels) {
            self.view.head.pos += 1;
            match st {
                Some(st) => self.view.head.load_cur(st),
                None => {
                    let st = self.shard.state.read();
                    self.view.head.load_cur(&st);
                }
            }
        }
        Ok(())
    }

    /// The next series with data in range; `Ok(None)` at the end.
    fn next_series(&mut self) -> Result<Option<Series>> {
        loop {
            let Some(labels) = self.view.min_labels() else { return Ok(None) };
            if self.series_only {
                self.advance_past(&labels, None)?;
                self.last = Some(labels.clone());
                return Ok(Some(Series { labels, chunks: Vec::new() }));
            }
            let (mint, maxt) = (self.mint, self.maxt);
            let mut chunks: Vec<ChunkRef> = Vec::new();
            let mut extra: Vec<Sample> = Vec::new();
            // Start timestamps of `extra` (out-of-order head samples), kept through the merge.
            let mut extra_sts: Vec<i64> = Vec::new();
            // Out-of-order native-histogram samples of the head.
            let mut extra_hists: Vec<tessera_model::HistogramSample> = Vec::new();
            let mut deleted: Vec<Interval> = Vec::new();
            for c in &self.view.blocks {
                if c.cur.as_ref() != Some(&labels) {
                    continue;
                }
                let r = c.refs[c.pos];
                let (_, cs) = c.block.series_in_range(r, mint, maxt)?;
                self.block_bytes_since_release += cs.iter().map(|c| c.data.len()).sum::<usize>();
                chunks.extend(cs);
                // Tombstones as of now (a deletion may have run since the view was taken).
                deleted.extend_from_slice(c.block.tombstones().get(r));
            }
            if self.view.head.cur.as_ref() == Some(&labels) {
                let shard = self.shard.clone();
                let st = shard.state.read();
                if !same_blocks(&st.blocks, &self.view.all_blocks) {
                    // A cut, compaction or retention changed the shard: read this series (and the rest)
                    // from a fresh view.
                    drop(st);
                    self.view =
                        View::take(&self.shard, &self.matchers, mint, maxt, false, self.last.as_ref())?;
                    self.restarts += 1;
                    continue;
                }
                // Every head series with these labels: WAL replay can leave two refs with one label set
                // (a series garbage-collected and created again before the restart), which the sorted refs
                // put side by side; they are one series to the reader.
                while self.view.head.cur.as_ref() == Some(&labels) {
                    let r = self.view.head.refs[self.view.head.pos];
                    if let Some(ms) = st.head.series(r) {
                        ms.read_st(&st.head.files, mint, maxt, &mut chunks, &mut extra, &mut extra_sts, &mut extra_hists, self.unchecked_range);
                        deleted.extend(st.head.tombstones_of(r).iter().map(|&(a, b)| Interval::new(a, b)));
                    }
                    self.view.head.pos += 1;
                    self.view.head.load_cur(&st);
                }
                self.advance_past(&labels, Some(&st))?;
            } else {
                self.advance_past(&labels, None)?;
            }
            self.last = Some(labels.clone());
            self.maybe_release();
            if chunks.is_empty() && extra.is_empty() && extra_hists.is_empty() {
                continue;
            }
            let chunks = finalize_chunks_st(chunks, &extra, &extra_sts, &extra_hists, &deleted)?;
            if self.unchecked_range || has_sample_in(&chunks, mint, maxt) {
                return Ok(Some(Series { labels, chunks }));
            }
        }
    }

    fn maybe_release(&mut self) {
        if self.block_bytes_since_release >= RELEASE_EVERY_BYTES {
            for c in &self.view.blocks {
                c.block.release_resident_pages();
            }
            self.block_bytes_since_release = 0;
        }
    }
}

impl Iterator for ShardSeries {
    type Item = std::result::Result<Series, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.next_series() {
            Ok(Some(s)) => Some(Ok(s)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e.into()))
            }
        }
    }
}

impl DbQuerier {
    fn shard_series(&self, shard: usize, matchers: &[Matcher], series_only: bool) -> Result<ShardSeries> {
        let sh = self.shards.get(shard).ok_or_else(|| Error::Other(format!("no shard {shard}")))?;
        ShardSeries::new(sh.clone(), matchers, self.mint, self.maxt, series_only)
    }

    /// Calls `f` with the labels of every series matching `matchers` that has a sample in range, shard by
    /// shard, one series in memory at a time.
    fn for_each_matching(&self, matchers: &[Matcher], mut f: impl FnMut(&Labels)) -> Result<()> {
        for s in 0..self.shards.len() {
            let mut it = self.shard_series(s, matchers, false)?;
            while let Some(series) = it.next_series()? {
                f(&series.labels);
            }
        }
        Ok(())
    }
}

impl Querier for DbQuerier {
    fn mint_ms(&self) -> i64 {
        self.mint
    }

    fn maxt_ms(&self) -> i64 {
        self.maxt
    }

    fn shard_count(&self) -> usize {
        self.shards.len()
    }

    fn select_shard(&self, shard: usize, matchers: &[Matcher], hints: &SelectHints) -> Result<SeriesSet, StorageError> {
        let mut it = self.shard_series(shard, matchers, hints.series_only)?;
        it.unchecked_range = hints.unchecked_range;
        Ok(Box::new(it))
    }

    fn label_names(&self, matchers: &[Matcher]) -> Result<Vec<String>, StorageError> {
        let mut names = std::collections::BTreeSet::new();
        if matchers.is_empty() {
            for sh in &self.shards {
                let st = sh.state.read();
                if st.head.num_series() > 0 && st.head.min_t <= self.maxt && st.head.max_t >= self.mint {
                    names.extend(crate::index::IndexReader::label_names(&st.head.index)?);
                }
                for b in &st.blocks {
                    if b.meta().overlaps_closed(self.mint, self.maxt) {
                        names.extend(crate::index::IndexReader::label_names(b.index())?);
                    }
                }
            }
        } else {
            self.for_each_matching(matchers, |l| {
                for x in l.iter() {
                    if !names.contains(x.name) {
                        names.insert(x.name.to_string());
                    }
                }
            })?;
        }
        Ok(names.into_iter().collect())
    }

    fn label_values(&self, name: &str, matchers: &[Matcher]) -> Result<Vec<String>, StorageError> {
        let mut vals = std::collections::BTreeSet::new();
        if matchers.is_empty() {
            for sh in &self.shards {
                let st = sh.state.read();
                if st.head.num_series() > 0 && st.head.min_t <= self.maxt && st.head.max_t >= self.mint {
                    vals.extend(crate::index::IndexReader::label_values(&st.head.index, name, "")?);
                }
                for b in &st.blocks {
                    if b.meta().overlaps_closed(self.mint, self.maxt) {
                        vals.extend(crate::index::IndexReader::label_values(b.index(), name, "")?);
                    }
                }
            }
        } else {
            self.for_each_matching(matchers, |l| {
                let v = l.get(name);
                if !v.is_empty() && !vals.contains(v) {
                    vals.insert(v.to_string());
                }
            })?;
        }
        Ok(vals.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Db, Options};
    use tessera_model::MatchOp;

    fn opts() -> Options {
        Options {
            shards: 1,
            block_range_ms: 1000,
            retention_ms: 0,
            fsync: crate::FsyncPolicy::Never,
            background: false,
            max_future_ms: 0,
            ..Options::default()
        }
    }

    fn all(db: &Db) -> Vec<Matcher> {
        let _ = db;
        vec![Matcher::new(MatchOp::Equal, "__name__", "m").expect("valid")]
    }

    /// The view restarts after a cut and counts it; nothing is yielded twice.
    #[test]
    fn restart_after_cut_is_counted_and_exact() {
        let dir = tempfile::tempdir().expect("tmp");
        let db = Db::open(dir.path(), opts()).expect("open");
        let mut app = db.appender();
        for i in 0..10 {
            let s: Vec<Sample> = (0..50).map(|t| Sample::new(t * 10, i as f64)).collect();
            app.add(Labels::from_pairs([("__name__", "m".to_string()), ("i", format!("{i:02}"))]), &s);
        }
        app.commit().expect("commit");
        let q = DbQuerier { shards: db.shards.clone(), mint: 0, maxt: 10_000 };
        let mut it = q.shard_series(0, &all(&db), false).expect("select");
        let first = it.next_series().expect("ok").expect("some");
        assert_eq!(first.labels.get("i"), "00");
        db.flush().expect("flush");
        let mut seen = vec![first.labels.get("i").to_string()];
        while let Some(s) = it.next_series().expect("ok") {
            let mut v = Vec::new();
            for c in &s.chunks {
                tessera_encoding::decode_chunk_range_into(c, 0, 10_000, &mut v).expect("decode");
            }
            assert_eq!(v.len(), 50, "series {}", s.labels);
            seen.push(s.labels.get("i").to_string());
        }
        assert_eq!(it.restarts, 1);
        let want: Vec<String> = (0..10).map(|i| format!("{i:02}")).collect();
        assert_eq!(seen, want);
    }
}
