//! What a reader of old data needs to hear from the writers: which time ranges changed after it read them.
//!
//! A [`ChangeLog`] lets a consumer that keeps derived data about *old* time ranges (the PromQL result
//! cache) stay exact without the storage knowing about it. The consumer raises a watermark
//! ([`ChangeLog::watch`]) to the newest sample time its kept data depends on; every change whose oldest
//! touched time is at or below the watermark (a late or out-of-order write, a new series arriving with old
//! timestamps, a deletion, retention dropping blocks) is then recorded as a time range with a sequence
//! number, and the consumer reads the ranges it has not seen ([`ChangeLog::since`]). Writes above the
//! watermark (the normal, in-order stream at "now") cost one atomic load and record nothing.
//!
//! The protocol that makes a kept result exact, whatever the interleaving:
//! - reader: `watch(newest time it will keep)`, then `seq()`, then read the data, then `since(seq)` and
//!   discard what any recorded range touches;
//! - writer: make the data visible, then [`ChangeLog::record`] (which fences before reading the
//!   watermark).
//!
//! A writer that read the watermark before the reader raised it had made its data visible before the
//! reader read anything, so the reader saw it; otherwise the change is recorded after the reader's `seq()`
//! or before it, and before it means it was visible before the reader read. The log keeps the newest
//! [`ChangeLog::CAPACITY`] ranges (a change overlapping or adjoining the newest merges into it while no
//! reader has read that one, so a sender lagging behind the watermark adds a range per look-up, not one
//! per write); a reader that fell further behind is told so ([`Lost`]) and must drop
//! everything.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, Weak};

/// One recorded change: samples in `[min_t, max_t]` (ms, inclusive) may differ from before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    pub seq: u64,
    pub min_t: i64,
    pub max_t: i64,
}

/// Some changes after the asked sequence number were dropped from the log: assume everything changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lost;

/// See the module documentation.
///
/// A log may follow others ([`ChangeLog::union`]): watching it watches them, and every change recorded in
/// one of them is recorded in it too (a union of stores has one log over its members' logs).
#[derive(Debug)]
pub struct ChangeLog {
    /// Unique in the process (never reused, unlike an address): consumers key what they keep by it.
    id: u64,
    watch_below: AtomicI64,
    inner: Mutex<Inner>,
    /// The logs this one follows.
    sources: Vec<Arc<ChangeLog>>,
    /// The logs that follow this one (dropped ones are pruned as changes are forwarded).
    followers: Mutex<Vec<Weak<ChangeLog>>>,
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

#[derive(Debug, Default)]
struct Inner {
    /// Sequence number of the newest recorded change (0: none yet).
    last_seq: u64,
    /// The newest changes, oldest first.
    changes: VecDeque<Change>,
    /// Changes up to and including this sequence number are no longer in `changes`.
    dropped_through: u64,
    /// Changes up to and including this sequence number may have been handed to a reader
    /// ([`ChangeLog::since`]); they are never merged into.
    handed_through: u64,
}

impl Default for ChangeLog {
    fn default() -> Self {
        ChangeLog {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            watch_below: AtomicI64::new(i64::MIN),
            inner: Mutex::default(),
            sources: Vec::new(),
            followers: Mutex::default(),
        }
    }
}

impl ChangeLog {
    /// Ranges kept; older ones are dropped and readers behind them get [`Lost`].
    pub const CAPACITY: usize = 4096;

    pub fn new() -> Self {
        Self::default()
    }

    /// A log that follows `sources`: [`ChangeLog::watch`] on it raises theirs too (after its own), and a
    /// change recorded in any of them is then recorded in it as well. The protocol holds through it: a
    /// reader raises every source's watermark before it reads data, and a writer records in its source
    /// after its data is visible.
    pub fn union(sources: Vec<Arc<ChangeLog>>) -> Arc<ChangeLog> {
        let log = Arc::new(ChangeLog { sources, ..ChangeLog::default() });
        for s in &log.sources {
            let mut f = s.followers.lock().unwrap_or_else(|e| e.into_inner());
            f.retain(|w| w.strong_count() > 0);
            f.push(Arc::downgrade(&log));
        }
        log
    }

    /// The log's identity, unique in the process.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Raises the watermark to `t` (never lowers it): from now on, changes touching times `<= t` are
    /// recorded.
    pub fn watch(&self, t: i64) {
        self.watch_below.fetch_max(t, Ordering::SeqCst);
        for s in &self.sources {
            s.watch(t);
        }
    }

    /// The current watermark (`i64::MIN` while nobody watches).
    pub fn watermark(&self) -> i64 {
        self.watch_below.load(Ordering::SeqCst)
    }

    /// Whether a change whose oldest time is `min_t` would be recorded: callers may skip computing a
    /// write's time range when nobody watches. Call [`ChangeLog::record`] after the data is visible.
    pub fn is_watched(&self, min_t: i64) -> bool {
        fence(Ordering::SeqCst);
        min_t <= self.watch_below.load(Ordering::SeqCst)
    }

    /// Records that samples in `[min_t, max_t]` changed, if that range reaches the watermark. Call it
    /// after the change is visible to new readers. Returns whether it was recorded.
    pub fn record(&self, min_t: i64, max_t: i64) -> bool {
        if min_t > max_t || !self.is_watched(min_t) {
            // A follower's watermark never exceeds its sources' once its reader reads data.
            return false;
        }
        let followers: Vec<Arc<ChangeLog>> = {
            let mut f = self.followers.lock().unwrap_or_else(|e| e.into_inner());
            f.retain(|w| w.strong_count() > 0);
            f.iter().filter_map(Weak::upgrade).collect()
        };
        for f in followers {
            f.record(min_t, max_t);
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.last_seq += 1;
        let seq = g.last_seq;
        // A change that overlaps or adjoins the newest one, which no reader has been handed yet,
        // replaces it with their union (the exact union: times are whole milliseconds) under the new
        // number, so a stream of late writes (a sender lagging behind the watermark) between two
        // look-ups takes one entry, not one per write, and readers do not fall behind the log. A reader
        // that took the sequence number before the newest change sees the union, as it would have seen
        // both; one that took it after sees the union too (the new number), which drops no more than the
        // older change's range besides. A change handed out already is never widened: a reader that
        // applied it, and kept steps since, would otherwise drop them again with every later write.
        if let Some(last) = g.changes.back()
            && last.seq > g.handed_through
            && min_t <= last.max_t.saturating_add(1)
            && last.min_t <= max_t.saturating_add(1)
        {
            let (lo, hi) = (last.min_t.min(min_t), last.max_t.max(max_t));
            g.changes.pop_back();
            g.changes.push_back(Change { seq, min_t: lo, max_t: hi });
            return true;
        }
        g.changes.push_back(Change { seq, min_t, max_t });
        if g.changes.len() > Self::CAPACITY
            && let Some(old) = g.changes.pop_front()
        {
            g.dropped_through = old.seq;
        }
        true
    }

    /// The sequence number of the newest recorded change.
    pub fn seq(&self) -> u64 {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).last_seq
    }

    /// The changes recorded after `seq`, oldest first, or [`Lost`] when some were already dropped.
    pub fn since(&self, seq: u64) -> Result<Vec<Change>, Lost> {
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.handed_through = g.last_seq;
        if seq < g.dropped_through {
            return Err(Lost);
        }
        // Sequence numbers rise along the log (with gaps where changes were merged).
        let skip = g.changes.partition_point(|c| c.seq <= seq);
        Ok(g.changes.iter().skip(skip).copied().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_recorded_above_the_watermark() {
        let log = ChangeLog::new();
        assert!(!log.record(0, 10), "nobody watches");
        log.watch(100);
        log.watch(50);
        assert_eq!(log.watermark(), 100, "never lowered");
        assert!(!log.record(101, 200));
        assert!(log.record(100, 200));
        assert!(log.record(-5, -1));
        assert!(!log.record(10, 5), "empty range");
        let all = log.since(0).expect("kept");
        assert_eq!(all, vec![Change { seq: 1, min_t: 100, max_t: 200 }, Change { seq: 2, min_t: -5, max_t: -1 }]);
        assert_eq!(log.since(1).expect("kept"), vec![Change { seq: 2, min_t: -5, max_t: -1 }]);
        assert!(log.since(2).expect("kept").is_empty());
        assert_eq!(log.seq(), 2);
    }

    #[test]
    fn a_union_log_sees_its_sources_changes_once_watched() {
        let (a, b) = (Arc::new(ChangeLog::new()), Arc::new(ChangeLog::new()));
        let u = ChangeLog::union(vec![a.clone(), b.clone()]);
        assert_ne!(u.id(), a.id());
        assert!(!a.record(0, 10), "nobody watches");
        u.watch(100);
        assert_eq!((a.watermark(), b.watermark()), (100, 100), "watching the union watches its sources");
        assert!(a.record(5, 10));
        assert!(b.record(50, 60));
        assert!(!b.record(150, 160), "above the watermark");
        let seen: Vec<(i64, i64)> = u.since(0).expect("kept").iter().map(|c| (c.min_t, c.max_t)).collect();
        assert_eq!(seen, vec![(5, 10), (50, 60)]);
        // A source watched higher by its own reader forwards only what the union watches.
        a.watch(1000);
        assert!(a.record(500, 600));
        assert_eq!(u.seq(), 2, "the union's watermark is 100");
        // A dropped union is pruned from its sources.
        drop(u);
        assert!(a.record(1, 2));
        assert!(a.followers.lock().expect("lock").is_empty());
    }

    #[test]
    fn overlapping_changes_merge_into_the_newest_without_hiding_any() {
        let log = ChangeLog::new();
        log.watch(1_000);
        assert!(log.record(100, 200));
        let r1 = log.seq();
        assert!(log.record(150, 300), "overlapping");
        assert!(log.record(301, 310), "adjoining");
        assert!(log.record(50, 99), "adjoining below");
        // A reader that took its number after the first change sees the union too (a new number).
        assert_eq!(log.since(r1).expect("kept"), vec![Change { seq: 4, min_t: 50, max_t: 310 }]);
        assert_eq!(log.since(0).expect("kept"), vec![Change { seq: 4, min_t: 50, max_t: 310 }]);
        assert!(log.since(4).expect("kept").is_empty());
        // Handed out, it is never widened: a reader that applied it would drop what it kept since.
        assert!(log.record(200, 250));
        assert_eq!(log.since(4).expect("kept"), vec![Change { seq: 5, min_t: 200, max_t: 250 }]);
        // A change apart from the newest is its own entry; readers between numbers find theirs.
        assert!(log.record(500, 600));
        assert!(log.record(320, 330), "apart from 500..600 (only the newest merges)");
        let seqs: Vec<u64> = log.since(0).expect("kept").iter().map(|c| c.seq).collect();
        assert_eq!(seqs, vec![4, 5, 6, 7]);
        assert_eq!(log.since(2).expect("kept").len(), 4, "a number merged away still finds what followed it");
        assert_eq!(log.since(6).expect("kept"), vec![Change { seq: 7, min_t: 320, max_t: 330 }]);
        // A long stream of overlapping late writes between two look-ups keeps one entry.
        log.watch(i64::MAX);
        for i in 0..(2 * ChangeLog::CAPACITY as i64) {
            assert!(log.record(320 + i, 340 + i));
        }
        assert_eq!(log.since(0).expect("no reader is behind").len(), 5);
        // An unbounded change (a deletion without bounds) handed out does not absorb later writes.
        assert!(log.record(i64::MIN, i64::MAX));
        log.since(0).expect("kept");
        assert!(log.record(10, 20));
        assert_eq!(log.since(log.seq() - 1).expect("kept"), vec![Change { seq: log.seq(), min_t: 10, max_t: 20 }]);
    }

    #[test]
    fn a_reader_too_far_behind_is_told() {
        let log = ChangeLog::new();
        log.watch(i64::MAX);
        for i in 0..(ChangeLog::CAPACITY as i64 + 10) {
            log.record(3 * i, 3 * i);
        }
        assert_eq!(log.since(0), Err(Lost));
        assert_eq!(log.since(9), Err(Lost));
        let tail = log.since(10).expect("still kept");
        assert_eq!(tail.len(), ChangeLog::CAPACITY);
        assert_eq!(tail[0].seq, 11);
        assert_eq!(log.since(log.seq()).expect("kept"), vec![]);
    }
}
