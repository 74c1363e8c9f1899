//! Union stores: read-only views over several stores that answer every read API and full PromQL as if
//! they were one store (the mission's Union MetricStore).
//!
//! Each member may carry external labels (Prometheus' `external_labels` idea): read through a union, a
//! member's series get them, except where a series has a label of that name already. Series whose label
//! sets are then equal are one series: their samples are merged by time and a timestamp present in
//! several members keeps the first member's sample (Prometheus' merge querier deduplicates so too).
//!
//! Shards: when every member has the same shard count, union shard `i` is made of every member's shard
//! `i` (series are routed by a hash of their labels, so a series written to several stores lands in the
//! same shard index in each), and the engine runs its per-shard stages on each union shard in parallel,
//! as for one store. Otherwise the union is one shard. A series whose labels become equal to another's
//! only through external labels may sit in different shard indexes; to be exact whatever the labels, a
//! union shard merges all its members' matching series by their final labels, and series that are equal
//! across union shards cannot occur when the members' external labels differ in some label all their
//! series lack (the usual `team`/`replica` label), nor when the members have no external labels.
//!
//! Matchers on a member's external label names are applied after the labels are added (they cannot be
//! pushed into the member, whose series may lack the label); the others are pushed down.

use std::sync::Arc;

use tessera_model::{Labels, MatchOp, Matcher, Queryable, Querier, SelectHints, Series, SeriesSet, StorageError};
use tessera_tsdb::Db;

/// A union of open stores' databases, each with its external labels, in member order.
pub struct UnionQueryable {
    pub members: Vec<(Arc<Db>, Labels)>,
}

impl Queryable for UnionQueryable {
    fn querier(&self, mint_ms: i64, maxt_ms: i64) -> Result<Arc<dyn Querier>, StorageError> {
        let mut members = Vec::with_capacity(self.members.len());
        for (db, ext) in &self.members {
            members.push((Queryable::querier(&**db, mint_ms, maxt_ms)?, ext.clone()));
        }
        let counts: Vec<usize> = members.iter().map(|(q, _)| q.shard_count()).collect();
        let shards = if counts.windows(2).all(|w| w[0] == w[1]) { counts.first().copied().unwrap_or(1).max(1) } else { 1 };
        Ok(Arc::new(UnionQuerier { members, shards, mint_ms, maxt_ms }))
    }
}

struct UnionQuerier {
    members: Vec<(Arc<dyn Querier>, Labels)>,
    shards: usize,
    mint_ms: i64,
    maxt_ms: i64,
}

/// `labels` with `ext`'s labels it lacks.
fn with_external(labels: &Labels, ext: &Labels) -> Labels {
    if ext.is_empty() {
        return labels.clone();
    }
    let mut pairs: Vec<(String, String)> = labels.iter().map(|l| (l.name.to_string(), l.value.to_string())).collect();
    for l in ext.iter() {
        if labels.get(&l.name).is_empty() {
            pairs.push((l.name.to_string(), l.value.to_string()));
        }
    }
    Labels::from_pairs(pairs)
}

impl UnionQuerier {
    /// Every member's matching series of union shard `shard` (`None`: all shards), external labels
    /// added, filtered by every matcher, merged by labels, sorted.
    fn collect(&self, shard: Option<usize>, matchers: &[Matcher], hints: &SelectHints) -> Result<Vec<Series>, StorageError> {
        let mut all: Vec<(Labels, usize, Vec<tessera_model::ChunkRef>)> = Vec::new();
        for (i, (q, ext)) in self.members.iter().enumerate() {
            let mut pushed: Vec<Matcher> = matchers.iter().filter(|m| ext.get(&m.name).is_empty()).cloned().collect();
            if pushed.is_empty() {
                // Only external-label matchers: every series of the member, filtered below.
                pushed.push(Matcher::new(MatchOp::Regex, "__name__", ".*").map_err(|e| StorageError::Other(e.to_string()))?);
            }
            let set: SeriesSet = match shard {
                Some(s) => q.select_shard(s, &pushed, hints)?,
                None => q.select(&pushed, hints)?,
            };
            for s in set {
                let s = s?;
                let labels = with_external(&s.labels, ext);
                if matchers.iter().all(|m| m.matches(labels.get(&m.name))) {
                    all.push((labels, i, s.chunks));
                }
            }
        }
        all.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut out: Vec<Series> = Vec::with_capacity(all.len());
        let mut i = 0;
        while i < all.len() {
            let j = i + all[i..].iter().take_while(|x| x.0 == all[i].0).count();
            let chunks = if j - i == 1 || hints.series_only {
                std::mem::take(&mut all[i].2)
            } else {
                let lists: Vec<Vec<tessera_model::ChunkRef>> = all[i..j].iter_mut().map(|x| std::mem::take(&mut x.2)).collect();
                tessera_tsdb::merge_chunk_lists(&lists).map_err(|e| StorageError::Other(e.to_string()))?
            };
            out.push(Series { labels: all[i].0.clone(), chunks });
            i = j;
        }
        Ok(out)
    }
}

impl Querier for UnionQuerier {
    fn mint_ms(&self) -> i64 {
        self.mint_ms
    }

    fn maxt_ms(&self) -> i64 {
        self.maxt_ms
    }

    fn shard_count(&self) -> usize {
        self.shards
    }

    fn select_shard(&self, shard: usize, matchers: &[Matcher], hints: &SelectHints) -> Result<SeriesSet, StorageError> {
        if matchers.is_empty() {
            return Ok(Box::new(std::iter::empty()));
        }
        let s = if self.shards == 1 { None } else { Some(shard) };
        Ok(Box::new(self.collect(s, matchers, hints)?.into_iter().map(Ok)))
    }

    fn label_names(&self, matchers: &[Matcher]) -> Result<Vec<String>, StorageError> {
        self.labels_of(matchers, |q| q.label_names(&[]), |l, out| out.extend(l.iter().map(|l| l.name.to_string())))
    }

    fn label_values(&self, name: &str, matchers: &[Matcher]) -> Result<Vec<String>, StorageError> {
        self.labels_of(matchers, |q| q.label_values(name, &[]), |l, out| {
            let v = l.get(name);
            if !v.is_empty() {
                out.insert(v.to_string());
            }
        })
    }
}

impl UnionQuerier {
    /// Label names or values of the matching series: straight from the members when nothing has to be
    /// added or matched (`direct`), else from the series with their external labels (`pick`).
    fn labels_of(
        &self,
        matchers: &[Matcher],
        direct: impl Fn(&Arc<dyn Querier>) -> Result<Vec<String>, StorageError>,
        pick: impl Fn(&Labels, &mut std::collections::BTreeSet<String>),
    ) -> Result<Vec<String>, StorageError> {
        let mut out = std::collections::BTreeSet::new();
        if matchers.is_empty() && self.members.iter().all(|(_, ext)| ext.is_empty()) {
            for (q, _) in &self.members {
                out.extend(direct(q)?);
            }
            return Ok(out.into_iter().collect());
        }
        let all = [Matcher::new(MatchOp::Regex, "__name__", ".*").map_err(|e| StorageError::Other(e.to_string()))?];
        let ms = if matchers.is_empty() { &all[..] } else { matchers };
        let hints = SelectHints { series_only: true, ..Default::default() };
        for s in self.collect(None, ms, &hints)? {
            pick(&s.labels, &mut out);
        }
        Ok(out.into_iter().collect())
    }
}
