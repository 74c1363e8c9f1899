//! Reading a database: [`DbQuerier`] implements `tessera_model::Querier` over every shard's head and
//! blocks; `crate::merge::finalize_chunks` turns the chunks one series has across head and blocks into the
//! sorted, non-overlapping, fully-live chunk list the read contract promises.
//!
//! Consistency: each `select_shard` reads one shard's head and block list under one read lock, so a
//! concurrent head cut (which adds a block and drops the same data from the head under the write lock)
//! can never make data appear twice or vanish; a batch is visible in a shard entirely or not at all.

use std::sync::Arc;

use tessera_model::{ChunkRef, Labels, Matcher, Querier, Sample, SelectHints, Series, SeriesSet, StorageError};

use crate::error::{Error, Result};
use crate::index::postings_for_matchers;
use crate::merge::{finalize_chunks, has_sample_in};
use crate::shard::Shard;
use crate::tombstones::Interval;

/// A view of `[mint_ms, maxt_ms]` over all shards.
pub struct DbQuerier {
    pub(crate) shards: Vec<Arc<Shard>>,
    pub(crate) mint: i64,
    pub(crate) maxt: i64,
}

struct Item {
    labels: Labels,
    chunks: Vec<ChunkRef>,
    extra: Vec<Sample>,
    deleted: Vec<Interval>,
}

impl DbQuerier {
    fn select_items(&self, shard: usize, matchers: &[Matcher], series_only: bool) -> Result<Vec<Item>> {
        let (mint, maxt) = (self.mint, self.maxt);
        let sh = self.shards.get(shard).ok_or_else(|| Error::Other(format!("no shard {shard}")))?;
        let mut items: Vec<Item> = Vec::new();
        if matchers.is_empty() {
            return Ok(items);
        }
        let st = sh.state.read();
        let head = &st.head;
        if head.num_series() > 0 && (series_only || (head.min_t <= maxt && head.max_t >= mint)) {
            for r in postings_for_matchers(&head.index, matchers)? {
                let Some(ms) = head.series(r) else { continue };
                let mut chunks = Vec::new();
                let mut extra = Vec::new();
                if !series_only {
                    ms.read(mint, maxt, &mut chunks, &mut extra);
                    if chunks.is_empty() && extra.is_empty() {
                        continue;
                    }
                }
                let deleted = head.tombstones_of(r).iter().map(|&(a, b)| Interval::new(a, b)).collect();
                items.push(Item { labels: ms.labels.clone(), chunks, extra, deleted });
            }
        }
        for b in &st.blocks {
            let meta = b.meta();
            if !meta.overlaps_closed(mint, maxt) {
                continue;
            }
            let tomb = b.tombstones();
            for r in postings_for_matchers(b.index(), matchers)? {
                if series_only {
                    items.push(Item { labels: b.series_labels(r)?, chunks: vec![], extra: vec![], deleted: vec![] });
                    continue;
                }
                let (labels, chunks) = b.series_in_range(r, mint, maxt)?;
                if chunks.is_empty() {
                    continue;
                }
                items.push(Item { labels, chunks, extra: vec![], deleted: tomb.get(r).to_vec() });
            }
        }
        drop(st);
        items.sort_by(|a, b| a.labels.cmp(&b.labels));
        Ok(items)
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
        let items = self.select_items(shard, matchers, hints.series_only)?;
        let (mint, maxt) = (self.mint, self.maxt);
        let series_only = hints.series_only;
        // Group equal label sets (one series seen in several blocks and the head).
        let mut out: Vec<std::result::Result<Series, StorageError>> = Vec::new();
        let mut it = items.into_iter().peekable();
        while let Some(first) = it.next() {
            let labels = first.labels;
            let mut chunks = first.chunks;
            let mut extra = first.extra;
            let mut deleted = first.deleted;
            while it.peek().is_some_and(|n| n.labels == labels) {
                let n = it.next().expect("peeked");
                chunks.extend(n.chunks);
                extra.extend(n.extra);
                deleted.extend(n.deleted);
            }
            if series_only {
                out.push(Ok(Series { labels, chunks: Vec::new() }));
                continue;
            }
            match finalize_chunks(chunks, &extra, &deleted) {
                Ok(chunks) => {
                    if has_sample_in(&chunks, mint, maxt) {
                        out.push(Ok(Series { labels, chunks }));
                    }
                }
                Err(e) => out.push(Err(e.into())),
            }
        }
        Ok(Box::new(out.into_iter()))
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
            for s in 0..self.shards.len() {
                for it in self.select_items(s, matchers, false)? {
                    names.extend(it.labels.iter().map(|l| l.name.clone()));
                }
            }
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
            for s in 0..self.shards.len() {
                for it in self.select_items(s, matchers, false)? {
                    let v = it.labels.get(name);
                    if !v.is_empty() {
                        vals.insert(v.to_string());
                    }
                }
            }
        }
        Ok(vals.into_iter().collect())
    }
}
