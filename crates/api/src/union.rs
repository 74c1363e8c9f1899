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
//!
//! The result cache works through a union: its change log follows every member's
//! ([`ChangeLog::union`]), so a change to old samples in any member drops the union's cached steps it
//! touches. Downsampling tiers too: the union has the tiers (resolutions) all its members have; a series
//! held by one member is that member's buckets, a series held by several is bucketed from their merged
//! raw samples (exactly the union's buckets) wherever a member still has raw samples, and is the first
//! such member's buckets before that ([`tessera_tsdb::tiers::union_tier_series`]).

use std::sync::Arc;

use tessera_model::{
    ChangeLog, ChunkRef, Labels, MatchOp, Matcher, Queryable, Querier, RawHorizon, SelectHints, Series, SeriesSet, StorageError, TierInfo,
};
use tessera_tsdb::Db;

/// A union of open stores' databases, each with its external labels, in member order, and the union's
/// change log (kept by the union store across requests, so that the result cache's entries outlive one).
pub struct UnionQueryable {
    pub members: Vec<(Arc<Db>, Labels)>,
    pub log: Arc<ChangeLog>,
}

impl UnionQueryable {
    /// A union with a new change log following its members'.
    pub fn new(members: Vec<(Arc<Db>, Labels)>) -> UnionQueryable {
        let log = Self::log_of(&members);
        UnionQueryable { members, log }
    }

    /// A change log following `members`' (what a union store keeps for its life).
    pub fn log_of(members: &[(Arc<Db>, Labels)]) -> Arc<ChangeLog> {
        ChangeLog::union(members.iter().map(|(db, _)| db.change_log()).collect())
    }

    fn union_querier(members: Vec<(Arc<dyn Querier>, Labels)>, mint_ms: i64, maxt_ms: i64, tier: Option<TierPart>) -> Arc<dyn Querier> {
        let counts: Vec<usize> = members.iter().map(|(q, _)| q.shard_count()).collect();
        let shards = if counts.windows(2).all(|w| w[0] == w[1]) { counts.first().copied().unwrap_or(1).max(1) } else { 1 };
        Arc::new(UnionQuerier { members, shards, mint_ms, maxt_ms, tier })
    }
}

impl Queryable for UnionQueryable {
    fn querier(&self, mint_ms: i64, maxt_ms: i64) -> Result<Arc<dyn Querier>, StorageError> {
        let mut members = Vec::with_capacity(self.members.len());
        for (db, ext) in &self.members {
            members.push((Queryable::querier(&**db, mint_ms, maxt_ms)?, ext.clone()));
        }
        Ok(Self::union_querier(members, mint_ms, maxt_ms, None))
    }

    fn changes(&self) -> Option<&ChangeLog> {
        Some(&self.log)
    }

    /// The resolutions every member keeps; a tier's retention is the shortest of its members' (0: as
    /// long as the raw data, in every member).
    fn tiers(&self) -> Vec<TierInfo> {
        let mut out: Vec<TierInfo> = Vec::new();
        for (i, (db, _)) in self.members.iter().enumerate() {
            let mine = Queryable::tiers(&**db);
            if i == 0 {
                out = mine;
                continue;
            }
            out.retain_mut(|t| match mine.iter().find(|m| m.resolution_ms == t.resolution_ms) {
                None => false,
                Some(m) => {
                    t.retention_ms = match (t.retention_ms, m.retention_ms) {
                        (0, r) | (r, 0) => r,
                        (x, y) => x.min(y),
                    };
                    true
                }
            });
        }
        out
    }

    /// The latest of the members' raw horizons; per tier (those every member keeps), the latest of the
    /// members' oldest buckets.
    fn raw_horizon(&self) -> Option<RawHorizon> {
        let hs: Vec<RawHorizon> = self.members.iter().filter_map(|(db, _)| Queryable::raw_horizon(&**db)).collect();
        let raw_mint_ms = hs.iter().map(|h| h.raw_mint_ms).max()?;
        let tiers = Queryable::tiers(self)
            .iter()
            .map(|t| {
                let oldest = hs.iter().flat_map(|h| &h.tiers).filter(|(r, _)| *r == t.resolution_ms).filter_map(|(_, m)| *m).max();
                (t.resolution_ms, oldest)
            })
            .collect();
        Some(RawHorizon { raw_mint_ms, tiers })
    }

    fn tier_querier(&self, resolution_ms: i64, mint_ms: i64, maxt_ms: i64) -> Result<Option<Arc<dyn Querier>>, StorageError> {
        if resolution_ms <= 0 {
            return Ok(None);
        }
        // Whole buckets, as a member's tier querier reads them.
        let a = tessera_encoding::buckets::bucket_of(mint_ms, resolution_ms).saturating_mul(resolution_ms);
        let b = tessera_encoding::buckets::bucket_of(maxt_ms, resolution_ms).saturating_add(1).saturating_mul(resolution_ms);
        let mut members = Vec::with_capacity(self.members.len());
        let mut raw = Vec::with_capacity(self.members.len());
        for (db, ext) in &self.members {
            let Some(t) = db.tier_querier(resolution_ms, mint_ms, maxt_ms)? else { return Ok(None) };
            members.push((t, ext.clone()));
            raw.push(Queryable::querier(&**db, a, b.saturating_sub(1))?);
        }
        Ok(Some(Self::union_querier(members, mint_ms, maxt_ms, Some(TierPart { res: resolution_ms, a, b, raw }))))
    }
}

/// A union querier at a tier: the resolution, the whole buckets `[a, b)` read, and every member's raw view
/// of them (for series held by several members).
struct TierPart {
    res: i64,
    a: i64,
    b: i64,
    raw: Vec<Arc<dyn Querier>>,
}

struct UnionQuerier {
    members: Vec<(Arc<dyn Querier>, Labels)>,
    shards: usize,
    mint_ms: i64,
    maxt_ms: i64,
    tier: Option<TierPart>,
}

/// `labels` with `ext`'s labels it lacks.
fn with_external(labels: &Labels, ext: &Labels) -> Labels {
    if ext.is_empty() {
        return labels.clone();
    }
    let mut pairs: Vec<(String, String)> = labels.iter().map(|l| (l.name.to_string(), l.value.to_string())).collect();
    for l in ext.iter() {
        if labels.get(l.name).is_empty() {
            pairs.push((l.name.to_string(), l.value.to_string()));
        }
    }
    Labels::from_pairs(pairs)
}

impl UnionQuerier {
    /// Every member's matching series of union shard `shard` (`None`: all shards), external labels
    /// added, filtered by every matcher, merged by labels, sorted.
    fn collect(&self, shard: Option<usize>, matchers: &[Matcher], hints: &SelectHints) -> Result<Vec<Series>, StorageError> {
        // (labels with external ones, member, the member's own labels, chunks)
        let mut all: Vec<(Labels, usize, Labels, Vec<ChunkRef>)> = Vec::new();
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
                    all.push((labels, i, s.labels, s.chunks));
                }
            }
        }
        all.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
        let mut out: Vec<Series> = Vec::with_capacity(all.len());
        let mut i = 0;
        while i < all.len() {
            let j = i + all[i..].iter().take_while(|x| x.0 == all[i].0).count();
            let chunks = if j - i == 1 || hints.series_only {
                std::mem::take(&mut all[i].3)
            } else {
                let lists: Vec<Vec<ChunkRef>> = all[i..j].iter_mut().map(|x| std::mem::take(&mut x.3)).collect();
                match &self.tier {
                    None => tessera_tsdb::merge_chunk_lists(&lists).map_err(|e| StorageError::Other(e.to_string()))?,
                    Some(tp) => {
                        let mut raw = Vec::with_capacity(j - i);
                        for x in &all[i..j] {
                            raw.push(tp.raw_chunks(x.1, shard, &x.2, hints)?);
                        }
                        tessera_tsdb::tiers::union_tier_series(&lists, &raw, tp.a, tp.b, tp.res)
                            .map_err(|e| StorageError::Other(e.to_string()))?
                    }
                }
            };
            out.push(Series { labels: all[i].0.clone(), chunks });
            i = j;
        }
        Ok(out)
    }
}

impl TierPart {
    /// Member `member`'s raw chunks of its series `labels` (exactly that label set).
    fn raw_chunks(&self, member: usize, shard: Option<usize>, labels: &Labels, hints: &SelectHints) -> Result<Vec<ChunkRef>, StorageError> {
        let mut ms = Vec::with_capacity(labels.len());
        for l in labels.iter() {
            ms.push(Matcher::new(MatchOp::Equal, l.name, l.value).map_err(|e| StorageError::Other(e.to_string()))?);
        }
        let q = &self.raw[member];
        let set = match shard {
            Some(s) => q.select_shard(s, &ms, hints)?,
            None => q.select(&ms, hints)?,
        };
        for s in set {
            let s = s?;
            if s.labels == *labels {
                return Ok(s.chunks);
            }
        }
        Ok(Vec::new())
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
