//! A head's label sets as symbol ids: every distinct label name and value of the head's series is stored
//! once here instead of once per series (issue 15: "label strings interned once"; the head's inverted
//! index keeps its own copy of each name and value as its keys, as before).
//!
//! A [`HeadLabels`] holds a table of symbols, each with the number of series pairs using it, and an arena
//! of records, one per series: the number of pairs, then each pair's name id and value id, all as varints
//! (ids below 128 take one byte, below 16,384 two). A series keeps the offset of its record. A
//! node_exporter series' five pairs take ~13 bytes of arena where a packed [`Labels`] took a ~100-byte
//! string in a 112-byte allocation. The head's labels no longer exist as [`Labels`]: a reader builds one
//! from the record ([`HeadLabels::labels`], one allocation, as a clone of a stored set was one reference
//! count), and comparisons, hashing and the ingest path's collision check read the strings in place.
//! Prometheus' `dedupelabels` build makes the same trade (label sets as varint symbol ids into a shared
//! table, `labels_dedupelabels.go`).
//!
//! Ids are handed out in first-use order, so the names and values most series carry (`__name__`, `job`,
//! `instance`, …) get the one-byte ids. Removing a series releases its symbols (a symbol no series uses
//! any more is dropped and its id reused) and leaves its record dead in the arena until dead records are
//! half of it; the head's garbage collection then rewrites the arena with the live records
//! ([`HeadLabels::compact`]).
//!
//! Not synchronised: the head is behind its shard's lock, and only the committing writer adds or removes.

use std::cmp::Ordering;

use tessera_model::{LabelStr, Labels};

/// Where a series' record lies in the arena.
pub(crate) type LabelsAt = usize;

/// Symbols and label-set records of one head (see the module docs).
#[derive(Default)]
pub(crate) struct HeadLabels {
    /// The symbol of each id (empty for a free id).
    strs: Vec<LabelStr>,
    /// How many pair members (names and values of live series) use each id; 0 for a free id.
    uses: Vec<u32>,
    /// Ids whose symbol was dropped, reused first.
    free: Vec<u32>,
    /// Ids by their symbol's hash.
    table: hashbrown::HashTable<u32>,
    /// The records (module docs).
    arena: Vec<u8>,
    /// Bytes of the arena held by removed series' records.
    dead: usize,
}

#[inline]
fn sym_hash(s: &str) -> u64 {
    xxhash_rust::xxh3::xxh3_64(s.as_bytes())
}

#[inline]
fn put_varint(buf: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        buf.push(v as u8 | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Reads a varint the arena holds at `*pos` (written by [`put_varint`]: the arena is never read from
/// outside the process, so its bytes are trusted).
#[inline(always)]
fn get_varint(b: &[u8], pos: &mut usize) -> u32 {
    let x = b[*pos];
    *pos += 1;
    if x < 0x80 {
        return u32::from(x);
    }
    let (mut v, mut shift) = (u32::from(x & 0x7f), 7);
    loop {
        let x = b[*pos];
        *pos += 1;
        v |= u32::from(x & 0x7f) << shift;
        if x < 0x80 {
            return v;
        }
        shift += 7;
    }
}

/// A series' pairs, read from its record: `(name, value)` in name order, as [`Labels::iter`] gives them.
#[derive(Clone)]
pub(crate) struct Pairs<'a> {
    strs: &'a [LabelStr],
    rec: &'a [u8],
    pos: usize,
    left: u32,
}

impl<'a> Pairs<'a> {
    /// The next pair as ids.
    #[inline(always)]
    fn next_ids(&mut self) -> Option<(u32, u32)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let n = get_varint(self.rec, &mut self.pos);
        let v = get_varint(self.rec, &mut self.pos);
        Some((n, v))
    }

    #[inline(always)]
    fn sym(&self, id: u32) -> &'a str {
        self.strs[id as usize].as_str()
    }
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (&'a str, &'a str);

    #[inline]
    fn next(&mut self) -> Option<(&'a str, &'a str)> {
        let (n, v) = self.next_ids()?;
        Some((self.sym(n), self.sym(v)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left as usize, Some(self.left as usize))
    }
}

impl ExactSizeIterator for Pairs<'_> {}

/// Whether two sequences of pairs are equal (lengths first).
#[inline]
pub(crate) fn pairs_eq<'a, 'b>(
    a: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
    b: impl ExactSizeIterator<Item = (&'b str, &'b str)>,
) -> bool {
    a.len() == b.len() && a.zip(b).all(|(x, y)| x == y)
}

/// [`Labels`]' order over pairs (Prometheus' `labels.Compare`: pairwise by name, then value; the shorter
/// set first on a tie).
fn pairs_cmp<'a, 'b>(
    a: impl ExactSizeIterator<Item = (&'a str, &'a str)>,
    b: impl ExactSizeIterator<Item = (&'b str, &'b str)>,
) -> Ordering {
    let (na, nb) = (a.len(), b.len());
    for ((an, av), (bn, bv)) in a.zip(b) {
        match an.cmp(bn).then_with(|| av.cmp(bv)) {
            Ordering::Equal => {}
            o => return o,
        }
    }
    na.cmp(&nb)
}

impl HeadLabels {
    /// The id of `s`, counting one more use (a new symbol when no live series uses it).
    fn intern(&mut self, s: &str) -> u32 {
        let h = sym_hash(s);
        let strs = &self.strs;
        if let Some(&id) = self.table.find(h, |&id| strs[id as usize] == s) {
            self.uses[id as usize] += 1;
            return id;
        }
        let id = match self.free.pop() {
            Some(id) => {
                self.strs[id as usize] = LabelStr::from(s);
                self.uses[id as usize] = 1;
                id
            }
            None => {
                self.strs.push(LabelStr::from(s));
                self.uses.push(1);
                (self.strs.len() - 1) as u32
            }
        };
        let strs = &self.strs;
        self.table.insert_unique(h, id, |&i| sym_hash(strs[i as usize].as_str()));
        id
    }

    /// Counts one use of `id` less, dropping its symbol when no series uses it any more.
    fn release(&mut self, id: u32) {
        let u = &mut self.uses[id as usize];
        if *u == 0 {
            // Never happens (every record's ids were counted once); dropping the symbol again could
            // drop another one that reuses the id, so it is left alone.
            debug_assert!(false, "symbol {id} released more often than used");
            return;
        }
        *u -= 1;
        if *u > 0 {
            return;
        }
        let h = sym_hash(self.strs[id as usize].as_str());
        if let Ok(e) = self.table.find_entry(h, |&x| x == id) {
            e.remove();
        }
        self.strs[id as usize] = LabelStr::default();
        self.free.push(id);
    }

    /// Stores a series' label set (pairs sorted by name, unique names, no empty values, as a [`Labels`]
    /// holds them); returns where its record is.
    pub(crate) fn add<'a>(&mut self, pairs: impl ExactSizeIterator<Item = (&'a str, &'a str)>) -> LabelsAt {
        let at = self.arena.len();
        put_varint(&mut self.arena, pairs.len() as u32);
        for (n, v) in pairs {
            let n = self.intern(n);
            put_varint(&mut self.arena, n);
            let v = self.intern(v);
            put_varint(&mut self.arena, v);
        }
        at
    }

    /// Releases the record at `at` (its series is gone): its symbols lose a use, its bytes are dead.
    pub(crate) fn remove(&mut self, at: LabelsAt) {
        let mut pos = at;
        let n = get_varint(&self.arena, &mut pos);
        for _ in 0..2 * n {
            let id = get_varint(&self.arena, &mut pos);
            self.release(id);
        }
        self.dead += pos - at;
    }

    /// The pairs of the record at `at`.
    #[inline]
    pub(crate) fn pairs(&self, at: LabelsAt) -> Pairs<'_> {
        let mut pos = at;
        let left = get_varint(&self.arena, &mut pos);
        Pairs { strs: &self.strs, rec: &self.arena, pos, left }
    }

    /// The record at `at` as a [`Labels`] (one allocation).
    pub(crate) fn labels(&self, at: LabelsAt) -> Labels {
        let pairs = self.pairs(at);
        let mut buf: [(&str, &str); 16] = [("", ""); 16];
        if pairs.len() <= buf.len() {
            let n = pairs.len();
            for (slot, p) in buf.iter_mut().zip(pairs) {
                *slot = p;
            }
            return Labels::from_canonical_pairs(&buf[..n]);
        }
        Labels::from_canonical_iter(pairs)
    }

    /// Where the record at `at` lies in memory (for a reader that prefetches what it reads next).
    #[inline]
    pub(crate) fn addr(&self, at: LabelsAt) -> *const u8 {
        self.arena.as_ptr().wrapping_add(at)
    }

    /// The order of two records' label sets, as [`Labels`] order them.
    pub(crate) fn cmp(&self, a: LabelsAt, b: LabelsAt) -> Ordering {
        if a == b {
            return Ordering::Equal;
        }
        let (mut x, mut y) = (self.pairs(a), self.pairs(b));
        let (na, nb) = (x.len(), y.len());
        // A symbol has one id: equal ids are equal strings, and unequal ids unequal ones.
        while let (Some((xn, xv)), Some((yn, yv))) = (x.next_ids(), y.next_ids()) {
            if xn != yn {
                return x.sym(xn).cmp(y.sym(yn));
            }
            if xv != yv {
                return x.sym(xv).cmp(y.sym(yv));
            }
        }
        na.cmp(&nb)
    }

    /// The order of the record at `a` against a label set.
    pub(crate) fn cmp_labels(&self, a: LabelsAt, l: &Labels) -> Ordering {
        pairs_cmp(self.pairs(a), l.iter().map(|p| (p.name, p.value)))
    }

    /// Whether the record at `a` holds exactly the pairs of `l`.
    pub(crate) fn eq_labels(&self, a: LabelsAt, l: &Labels) -> bool {
        pairs_eq(self.pairs(a), l.iter().map(|p| (p.name, p.value)))
    }

    /// The labels hash ([`Labels::hash`]) of the record at `a`.
    pub(crate) fn hash(&self, a: LabelsAt) -> u64 {
        tessera_model::labels::hash_pairs_iter(self.pairs(a))
    }

    /// Whether removed series' records make up enough of the arena that [`HeadLabels::compact`] pays.
    pub(crate) fn wants_compaction(&self) -> bool {
        self.dead >= 64 * 1024 && self.dead * 2 >= self.arena.len()
    }

    /// Rewrites the arena with the live records only: `live` yields every live series' record offset,
    /// which is moved to the record's new place.
    pub(crate) fn compact<'a>(&mut self, live: impl Iterator<Item = &'a mut LabelsAt>) {
        let mut arena = Vec::with_capacity(self.arena.len().saturating_sub(self.dead));
        for at in live {
            let start = *at;
            let mut pos = start;
            let n = get_varint(&self.arena, &mut pos);
            for _ in 0..2 * n {
                get_varint(&self.arena, &mut pos);
            }
            *at = arena.len();
            arena.extend_from_slice(&self.arena[start..pos]);
        }
        self.arena = arena;
        self.dead = 0;
    }

    /// Bytes of the arena (live and dead records).
    #[cfg(test)]
    pub(crate) fn arena_len(&self) -> usize {
        self.arena.len()
    }

    /// Distinct symbols in use.
    #[cfg(test)]
    pub(crate) fn num_symbols(&self) -> usize {
        self.strs.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::labels;

    fn pairs_of(l: &Labels) -> Vec<(&str, &str)> {
        l.iter().map(|p| (p.name, p.value)).collect()
    }

    #[test]
    fn records_give_back_their_labels_hash_and_order() {
        let sets = [
            labels!("__name__" => "up", "instance" => "a:9100", "job" => "node"),
            labels!("__name__" => "up", "instance" => "b:9100", "job" => "node"),
            labels!("__name__" => "up", "instance" => "a:9100"),
            labels!("__name__" => "node_cpu_seconds_total", "cpu" => "0", "instance" => "a:9100", "job" => "node", "mode" => "idle"),
            labels!("a" => "x".repeat(200).as_str(), "b" => "é"),
            Labels::empty(),
        ];
        let mut h = HeadLabels::default();
        let at: Vec<LabelsAt> = sets.iter().map(|l| h.add(pairs_of(l).into_iter())).collect();
        for (l, &a) in sets.iter().zip(&at) {
            assert_eq!(&h.labels(a), l);
            assert_eq!(h.hash(a), l.hash());
            assert!(h.eq_labels(a, l));
        }
        for (l, &a) in sets.iter().zip(&at) {
            for (m, &b) in sets.iter().zip(&at) {
                assert_eq!(h.cmp(a, b), l.cmp(m), "{l} vs {m}");
                assert_eq!(h.cmp_labels(a, m), l.cmp(m), "{l} vs {m}");
                assert_eq!(h.eq_labels(a, m), l == m);
            }
        }
        // "__name__", "up", "instance", "a:9100", "job", "node", "b:9100", … are each stored once.
        assert_eq!(h.num_symbols(), 16);
    }

    #[test]
    fn removed_series_free_their_symbols_and_compaction_keeps_the_live_ones() {
        let mut h = HeadLabels::default();
        let keep = labels!("__name__" => "kept", "job" => "j");
        let mut live = [h.add(pairs_of(&keep).into_iter())];
        let mut gone = Vec::new();
        for i in 0..20_000 {
            let l = labels!("__name__" => "churn", "job" => "j", "pod" => format!("pod-{i}").as_str());
            gone.push(h.add(pairs_of(&l).into_iter()));
        }
        assert_eq!(h.num_symbols(), 6 + 20_000);
        for a in gone {
            h.remove(a);
        }
        // Only "kept", "__name__", "job", "j" are left; the pod names' ids are free for reuse.
        assert_eq!(h.num_symbols(), 4);
        assert!(h.wants_compaction());
        h.compact(live.iter_mut());
        assert_eq!(h.arena.len(), 5);
        assert_eq!(h.labels(live[0]), keep);
        let again = labels!("__name__" => "churn", "pod" => "pod-new");
        let a = h.add(pairs_of(&again).into_iter());
        assert_eq!(h.labels(a), again);
        assert_eq!(h.strs.len(), 6 + 20_000, "freed ids are reused before new ones");
    }
}
