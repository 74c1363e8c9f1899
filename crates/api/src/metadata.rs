//! Metric metadata (type, unit, help per metric family) received through remote write, served by
//! `GET /api/v1/metadata`.
//!
//! Kept in memory (a family has a handful of distinct entries at most) and persisted as JSON to
//! `<data>/metadata.json` by the server periodically and on shutdown, written to a temporary file and
//! renamed so a crash leaves either the old or the new file, never half of one.

use parking_lot::RwLock;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::Path;

/// The file name of the persisted store inside the data directory.
pub const METADATA_FILE: &str = "metadata.json";

/// Distinct entries kept per family; older ones are dropped first. Prometheus keeps one per target;
/// a remote-write receiver sees the union of many senders, so a small bound keeps memory in check.
const MAX_ENTRIES_PER_FAMILY: usize = 8;

/// One entry, serialized in the field order of Prometheus' `metadata.Metadata` (type, unit, help).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MetricMetadata {
    #[serde(rename = "type")]
    pub kind: String,
    pub unit: String,
    pub help: String,
}

/// Family name → distinct entries, most recent last.
#[derive(Debug, Default)]
pub struct MetadataStore {
    inner: RwLock<BTreeMap<String, Vec<MetricMetadata>>>,
    dirty: std::sync::atomic::AtomicBool,
}

impl MetadataStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// Records an entry; a repeat of a known entry only refreshes its recency.
    pub fn insert(&self, family: &str, m: MetricMetadata) {
        if family.is_empty() {
            return;
        }
        {
            let r = self.inner.read();
            if r.get(family).and_then(|v| v.last()) == Some(&m) {
                return; // the common case: the same metadata re-sent with every request
            }
        }
        let mut w = self.inner.write();
        let v = w.entry(family.to_string()).or_default();
        v.retain(|e| e != &m);
        v.push(m);
        if v.len() > MAX_ENTRIES_PER_FAMILY {
            v.remove(0);
        }
        self.dirty.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn len(&self) -> usize {
        self.inner.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The `/api/v1/metadata` answer (Prometheus' `metricMetadata`): families sorted by name (Go's JSON
    /// sorts map keys); `metric` filters to one family; `limit` (negative = none) bounds the families,
    /// `limit_per_metric` (> 0) the entries per family.
    pub fn query(&self, metric: &str, limit: i64, limit_per_metric: i64) -> BTreeMap<String, Vec<MetricMetadata>> {
        let r = self.inner.read();
        let mut out = BTreeMap::new();
        let iter: Box<dyn Iterator<Item = (&String, &Vec<MetricMetadata>)>> = if metric.is_empty() {
            Box::new(r.iter())
        } else {
            Box::new(r.get_key_value(metric).into_iter())
        };
        for (name, entries) in iter {
            if limit >= 0 && out.len() as i64 >= limit {
                break;
            }
            let mut v: Vec<MetricMetadata> = entries.iter().rev().cloned().collect();
            if limit_per_metric > 0 {
                v.truncate(limit_per_metric as usize);
            }
            out.insert(name.clone(), v);
        }
        out
    }

    /// Loads a store persisted by [`MetadataStore::save`]; a missing file is an empty store.
    pub fn load(dir: &Path) -> std::io::Result<Self> {
        let path = dir.join(METADATA_FILE);
        let map = match std::fs::read(&path) {
            Ok(b) => serde_json::from_slice(&b).map_err(|e| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{}: {e}", path.display()))
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(e) => return Err(e),
        };
        Ok(MetadataStore { inner: RwLock::new(map), dirty: Default::default() })
    }

    /// Replaces this store's content with `other`'s (used once the data directory has been opened).
    pub fn replace_with(&self, other: MetadataStore) {
        let mut w = self.inner.write();
        let mut loaded = other.inner.into_inner();
        // Keep anything received while the directory was being opened.
        for (k, v) in std::mem::take(&mut *w) {
            loaded.insert(k, v);
        }
        *w = loaded;
    }

    /// Writes `<dir>/metadata.json` if anything changed since the last save (atomically: temp + rename).
    pub fn save(&self, dir: &Path) -> std::io::Result<bool> {
        if !self.dirty.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return Ok(false);
        }
        let body = serde_json::to_vec(&*self.inner.read()).map_err(std::io::Error::other)?;
        let tmp = dir.join(format!("{METADATA_FILE}.tmp"));
        let res = (|| {
            std::fs::write(&tmp, &body)?;
            std::fs::File::open(&tmp)?.sync_all()?;
            std::fs::rename(&tmp, dir.join(METADATA_FILE))
        })();
        if res.is_err() {
            self.dirty.store(true, std::sync::atomic::Ordering::Relaxed);
        }
        res.map(|_| true)
    }
}

/// Remote write's metric type enum (v1 `MetricMetadata.MetricType`, v2 `Metadata.MetricType`, the
/// same numbers) as the strings of Prometheus' `model.MetricType`.
pub fn metric_type_name(n: i32) -> &'static str {
    match n {
        1 => "counter",
        2 => "gauge",
        3 => "histogram",
        4 => "gaugehistogram",
        5 => "summary",
        6 => "info",
        7 => "stateset",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn md(kind: &str, help: &str) -> MetricMetadata {
        MetricMetadata { kind: kind.into(), unit: String::new(), help: help.into() }
    }

    #[test]
    fn insert_query_limits_and_persistence() {
        let s = MetadataStore::new();
        s.insert("b_total", md("counter", "B."));
        s.insert("a", md("gauge", "A."));
        s.insert("a", md("gauge", "A2."));
        s.insert("a", md("gauge", "A2."));
        let all = s.query("", -1, -1);
        assert_eq!(all.keys().collect::<Vec<_>>(), ["a", "b_total"]);
        assert_eq!(all["a"], [md("gauge", "A2."), md("gauge", "A.")]);
        assert_eq!(s.query("", 1, -1).len(), 1);
        assert_eq!(s.query("", 0, -1).len(), 0);
        assert_eq!(s.query("", -1, 1)["a"].len(), 1);
        assert_eq!(s.query("b_total", -1, -1).len(), 1);
        assert!(s.query("nope", -1, -1).is_empty());
        assert_eq!(
            serde_json::to_string(&s.query("b_total", -1, -1)).expect("json"),
            r#"{"b_total":[{"type":"counter","unit":"","help":"B."}]}"#
        );

        let dir = tempfile::tempdir().expect("tempdir");
        assert!(s.save(dir.path()).expect("save"));
        assert!(!s.save(dir.path()).expect("clean"), "nothing changed");
        let back = MetadataStore::load(dir.path()).expect("load");
        assert_eq!(back.query("", -1, -1), s.query("", -1, -1));
        assert!(MetadataStore::load(&dir.path().join("missing")).expect("missing is empty").is_empty());
    }
}
