//! A shard's exemplars: a bounded ring shared by all its series (upstream `CircularExemplarStorage`,
//! tsdb/exemplar.go): when full, the exemplar stored first is evicted, whichever series it belongs to.
//!
//! Each series keeps its exemplars sorted by time; an exemplar is accepted when it is not a duplicate of
//! the series' newest one and not older than the out-of-order window allows (upstream's
//! `validateExemplar`, whose ordering of equal timestamps by value then label hash is mirrored), and
//! its labels hold at most [`EXEMPLAR_MAX_LABEL_SET_RUNES`] runes. Refusals are counted, never errors:
//! upstream's remote-write handler does not fail a request over exemplars either.
//!
//! The ring's capacity is the database's limit split evenly over the shards (series are spread evenly
//! by their hash), so the whole database holds at most about the configured number.

use std::collections::{HashMap, VecDeque};

use tessera_model::exemplar::EXEMPLAR_MAX_LABEL_SET_RUNES;
use tessera_model::{Exemplar, Labels, Matcher};

/// Why an exemplar was not stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExemplarRefusal {
    /// The same as the series' newest exemplar: a no-op, as upstream's `ErrDuplicateExemplar`.
    Duplicate,
    /// Older than the window allows (upstream `ErrOutOfOrderExemplar`).
    OutOfOrder,
    /// Labels longer than 128 runes (upstream `ErrExemplarLabelLength`).
    LabelLength,
    /// The limit is 0: exemplar storage is off.
    Disabled,
}

struct SeriesExemplars {
    labels: Labels,
    /// Sorted by (time, value, label hash); each with the sequence number it was stored under.
    ex: VecDeque<(u64, Exemplar)>,
}

/// The ring.
pub struct ExemplarStore {
    cap: usize,
    ooo_window_ms: i64,
    ids: HashMap<Labels, u32>,
    series: Vec<Option<SeriesExemplars>>,
    free: Vec<u32>,
    /// Insertion order: (series id, sequence number).
    order: VecDeque<(u32, u64)>,
    next_seq: u64,
}

fn order_key(e: &Exemplar) -> (i64, f64, u64) {
    (e.t, e.value, e.labels.hash())
}

impl ExemplarStore {
    pub(crate) fn new(cap: usize, ooo_window_ms: i64) -> Self {
        ExemplarStore {
            cap,
            ooo_window_ms,
            ids: HashMap::new(),
            series: Vec::new(),
            free: Vec::new(),
            order: VecDeque::new(),
            next_seq: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.order.len()
    }

    /// Upstream `validateExemplar` for `e` of the series `labels`.
    pub(crate) fn validate(&self, labels: &Labels, e: &Exemplar) -> Result<(), ExemplarRefusal> {
        if self.cap == 0 {
            return Err(ExemplarRefusal::Disabled);
        }
        if e.label_runes() > EXEMPLAR_MAX_LABEL_SET_RUNES {
            return Err(ExemplarRefusal::LabelLength);
        }
        let Some(s) = self.ids.get(labels).and_then(|&id| self.series[id as usize].as_ref()) else { return Ok(()) };
        let Some((_, newest)) = s.ex.back() else { return Ok(()) };
        if newest.same_as(e) {
            return Err(ExemplarRefusal::Duplicate);
        }
        let too_old = e.t < newest.t && e.t <= newest.t.saturating_sub(self.ooo_window_ms);
        let same_t_lower = e.t == newest.t
            && (e.value < newest.value || (e.value == newest.value && e.labels.hash() < newest.labels.hash()));
        if too_old || same_t_lower {
            return Err(ExemplarRefusal::OutOfOrder);
        }
        Ok(())
    }

    /// Stores `e` (validated by the caller), evicting the oldest-stored exemplar when full.
    pub(crate) fn insert(&mut self, labels: &Labels, e: Exemplar) {
        if self.cap == 0 {
            return;
        }
        while self.order.len() >= self.cap {
            self.evict_oldest();
        }
        let id = match self.ids.get(labels) {
            Some(&id) => id,
            None => {
                let s = SeriesExemplars { labels: labels.clone(), ex: VecDeque::new() };
                let id = match self.free.pop() {
                    Some(id) => {
                        self.series[id as usize] = Some(s);
                        id
                    }
                    None => {
                        self.series.push(Some(s));
                        (self.series.len() - 1) as u32
                    }
                };
                self.ids.insert(labels.clone(), id);
                id
            }
        };
        let seq = self.next_seq;
        self.next_seq += 1;
        let s = self.series[id as usize].as_mut().expect("live id");
        let k = order_key(&e);
        // After every exemplar ordered at or before it (a NaN value sorts by time alone).
        let at = s.ex.partition_point(|(_, x)| {
            let xk = order_key(x);
            xk <= k || (xk.0 == k.0 && xk.1.partial_cmp(&k.1).is_none())
        });
        s.ex.insert(at, (seq, e));
        self.order.push_back((id, seq));
    }

    fn evict_oldest(&mut self) {
        let Some((id, seq)) = self.order.pop_front() else { return };
        let Some(s) = self.series.get_mut(id as usize).and_then(|s| s.as_mut()) else { return };
        if let Some(i) = s.ex.iter().position(|(q, _)| *q == seq) {
            s.ex.remove(i);
        }
        if s.ex.is_empty() {
            let s = self.series[id as usize].take().expect("live");
            self.ids.remove(&s.labels);
            self.free.push(id);
        }
    }

    /// Validates and stores; returns whether it was stored.
    pub(crate) fn add(&mut self, labels: &Labels, e: Exemplar) -> Result<(), ExemplarRefusal> {
        self.validate(labels, &e)?;
        self.insert(labels, e);
        Ok(())
    }

    /// Upstream `Select`: series matching any of the matcher sets with exemplars in `[start, end]`,
    /// each with those exemplars in time order.
    pub(crate) fn select(&self, start: i64, end: i64, sets: &[Vec<Matcher>]) -> Vec<(Labels, Vec<Exemplar>)> {
        let mut out = Vec::new();
        for s in self.series.iter().flatten() {
            if !sets.iter().any(|ms| ms.iter().all(|m| m.matches(s.labels.get(&m.name)))) {
                continue;
            }
            let ex: Vec<Exemplar> = s.ex.iter().map(|(_, e)| e).filter(|e| e.t >= start && e.t <= end).cloned().collect();
            if !ex.is_empty() {
                out.push((s.labels.clone(), ex));
            }
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Every stored exemplar with its series (for WAL checkpoints), oldest-stored first.
    pub(crate) fn all(&self) -> Vec<(&Labels, &Exemplar)> {
        self.order
            .iter()
            .filter_map(|&(id, seq)| {
                let s = self.series[id as usize].as_ref()?;
                s.ex.iter().find(|(q, _)| *q == seq).map(|(_, e)| (&s.labels, e))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::labels;

    fn ex(t: i64, v: f64) -> Exemplar {
        Exemplar { labels: labels!("trace_id" => format!("t{t}")), value: v, t }
    }

    #[test]
    fn ring_evicts_the_oldest_stored_and_rules_follow_upstream() {
        let a = labels!("__name__" => "a");
        let b = labels!("__name__" => "b");
        let mut s = ExemplarStore::new(3, 0);
        s.add(&a, ex(10, 1.0)).expect("ok");
        assert_eq!(s.add(&a, ex(10, 1.0)), Err(ExemplarRefusal::Duplicate));
        assert_eq!(s.add(&a, ex(5, 1.0)), Err(ExemplarRefusal::OutOfOrder));
        s.add(&b, ex(1, 1.0)).expect("other series");
        s.add(&a, ex(20, 2.0)).expect("ok");
        s.add(&b, ex(30, 3.0)).expect("ok");
        // Full at 3: a@10 (stored first) went.
        assert_eq!(s.len(), 3);
        let got = s.select(i64::MIN, i64::MAX, &[vec![Matcher::new(tessera_model::MatchOp::Regex, "__name__", ".+").expect("m")]]);
        let times: Vec<(String, Vec<i64>)> =
            got.iter().map(|(l, e)| (l.get("__name__").to_string(), e.iter().map(|x| x.t).collect())).collect();
        assert_eq!(times, [("a".to_string(), vec![20]), ("b".to_string(), vec![1, 30])]);
        // Range and matchers.
        let got = s.select(25, 40, &[vec![Matcher::new(tessera_model::MatchOp::Equal, "__name__", "b").expect("m")]]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].1.len(), 1);
        let long = Exemplar { labels: labels!("trace_id" => "x".repeat(130)), value: 1.0, t: 99 };
        assert_eq!(s.add(&a, long), Err(ExemplarRefusal::LabelLength));
        assert_eq!(ExemplarStore::new(0, 0).add(&a, ex(1, 1.0)), Err(ExemplarRefusal::Disabled));
    }

    #[test]
    fn out_of_order_window_inserts_in_time_order() {
        let a = labels!("__name__" => "a");
        let mut s = ExemplarStore::new(10, 100);
        for t in [50, 200, 150, 120] {
            s.add(&a, ex(t, 1.0)).expect("inside the window");
        }
        assert_eq!(s.add(&a, ex(100, 1.0)), Err(ExemplarRefusal::OutOfOrder));
        let got = s.select(0, 1000, &[vec![]]);
        assert_eq!(got[0].1.iter().map(|e| e.t).collect::<Vec<_>>(), [50, 120, 150, 200]);
        assert_eq!(s.all().len(), 4);
    }
}
