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
//! [`ChangeLog::CAPACITY`] ranges; a reader that fell further behind is told so ([`Lost`]) and must drop
//! everything.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, Ordering, fence};

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
#[derive(Debug)]
pub struct ChangeLog {
    watch_below: AtomicI64,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Sequence number of the newest recorded change (0: none yet).
    last_seq: u64,
    /// The newest changes, oldest first.
    changes: VecDeque<Change>,
    /// Changes up to and including this sequence number are no longer in `changes`.
    dropped_through: u64,
}

impl Default for ChangeLog {
    fn default() -> Self {
        ChangeLog { watch_below: AtomicI64::new(i64::MIN), inner: Mutex::default() }
    }
}

impl ChangeLog {
    /// Ranges kept; older ones are dropped and readers behind them get [`Lost`].
    pub const CAPACITY: usize = 4096;

    pub fn new() -> Self {
        Self::default()
    }

    /// Raises the watermark to `t` (never lowers it): from now on, changes touching times `<= t` are
    /// recorded.
    pub fn watch(&self, t: i64) {
        self.watch_below.fetch_max(t, Ordering::SeqCst);
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
            return false;
        }
        let mut g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        g.last_seq += 1;
        let c = Change { seq: g.last_seq, min_t, max_t };
        g.changes.push_back(c);
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
        let g = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        if seq < g.dropped_through {
            return Err(Lost);
        }
        // Sequence numbers are consecutive, so the first wanted change sits at a computable index.
        let first = g.changes.front().map_or(0, |c| c.seq);
        let skip = (seq + 1).saturating_sub(first) as usize;
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
    fn a_reader_too_far_behind_is_told() {
        let log = ChangeLog::new();
        log.watch(i64::MAX);
        for i in 0..(ChangeLog::CAPACITY as i64 + 10) {
            log.record(i, i);
        }
        assert_eq!(log.since(0), Err(Lost));
        assert_eq!(log.since(9), Err(Lost));
        let tail = log.since(10).expect("still kept");
        assert_eq!(tail.len(), ChangeLog::CAPACITY);
        assert_eq!(tail[0].seq, 11);
        assert_eq!(log.since(log.seq()).expect("kept"), vec![]);
    }
}
