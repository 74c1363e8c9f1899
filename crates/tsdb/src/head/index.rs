//! The head's in-memory inverted index: label name → value → sorted series refs.
//!
//! Head refs are dense and handed out in increasing order, so a new series' ref is appended to the end of
//! each of its postings lists and they stay sorted without a sort. Values are kept in a `BTreeMap` so a
//! regex with a literal prefix reads one contiguous range (`label_values(name, prefix)`).

use std::collections::BTreeMap;

use tessera_model::{LabelStr, Labels};

use crate::index::{IndexReader, IndexResult, SeriesRef};

#[derive(Debug, Default)]
pub(crate) struct HeadIndex {
    postings: BTreeMap<LabelStr, BTreeMap<LabelStr, Vec<SeriesRef>>>,
    /// Every live ref, sorted.
    all: Vec<SeriesRef>,
}

impl HeadIndex {
    /// Adds a series; `r` must be larger than every ref added before.
    pub(crate) fn add(&mut self, r: SeriesRef, labels: &Labels) {
        for l in labels.iter() {
            let vals = match self.postings.get_mut(l.name) {
                Some(v) => v,
                None => self.postings.entry(l.name.into()).or_default(),
            };
            let list = match vals.get_mut(l.value) {
                Some(p) => p,
                None => vals.entry(l.value.into()).or_default(),
            };
            push_sorted(list, r);
        }
        push_sorted(&mut self.all, r);
    }

    /// Removes a series (garbage collection after head truncation).
    pub(crate) fn remove<'a>(&mut self, r: SeriesRef, pairs: impl Iterator<Item = (&'a str, &'a str)>) {
        for (name, value) in pairs {
            if let Some(vals) = self.postings.get_mut(name) {
                if let Some(list) = vals.get_mut(value) {
                    if let Ok(i) = list.binary_search(&r) {
                        list.remove(i);
                    }
                    if list.is_empty() {
                        vals.remove(value);
                    }
                }
                if vals.is_empty() {
                    self.postings.remove(name);
                }
            }
        }
        if let Ok(i) = self.all.binary_search(&r) {
            self.all.remove(i);
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.all.len()
    }

    /// (label name, number of values, sum of series over values) for cardinality stats.
    pub(crate) fn names(&self) -> impl Iterator<Item = (&LabelStr, &BTreeMap<LabelStr, Vec<SeriesRef>>)> {
        self.postings.iter()
    }
}

fn push_sorted(list: &mut Vec<SeriesRef>, r: SeriesRef) {
    match list.last() {
        Some(&last) if last >= r => {
            if let Err(i) = list.binary_search(&r) {
                list.insert(i, r);
            }
        }
        _ => list.push(r),
    }
}

impl IndexReader for HeadIndex {
    fn all_postings(&self) -> IndexResult<Vec<SeriesRef>> {
        Ok(self.all.clone())
    }

    fn postings(&self, name: &str, value: &str) -> IndexResult<Vec<SeriesRef>> {
        self.postings_ref(name, value).map(std::borrow::Cow::into_owned)
    }

    fn postings_ref(&self, name: &str, value: &str) -> IndexResult<std::borrow::Cow<'_, [SeriesRef]>> {
        Ok(std::borrow::Cow::Borrowed(self.postings.get(name).and_then(|v| v.get(value)).map_or(&[][..], |p| &p[..])))
    }

    fn label_values(&self, name: &str, prefix: &str) -> IndexResult<Vec<String>> {
        let Some(vals) = self.postings.get(name) else { return Ok(Vec::new()) };
        Ok(vals
            .range::<str, _>((std::ops::Bound::Included(prefix), std::ops::Bound::Unbounded))
            .take_while(|(v, _)| v.starts_with(prefix))
            .map(|(v, _)| v.to_string())
            .collect())
    }

    fn label_names(&self) -> IndexResult<Vec<String>> {
        Ok(self.postings.keys().map(|k| k.to_string()).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::labels;

    #[test]
    fn add_remove_and_prefix_values() {
        let mut ix = HeadIndex::default();
        ix.add(0, &labels!("__name__" => "up", "job" => "api"));
        ix.add(1, &labels!("__name__" => "up", "job" => "apx"));
        ix.add(2, &labels!("__name__" => "up", "job" => "b"));
        assert_eq!(ix.label_values("job", "ap").expect("ok"), vec!["api", "apx"]);
        assert_eq!(ix.postings("__name__", "up").expect("ok"), vec![0, 1, 2]);
        // The borrowed list is the same list, and an absent name or value gives an empty one.
        assert_eq!(&*ix.postings_ref("__name__", "up").expect("ok"), &[0, 1, 2]);
        assert!(matches!(ix.postings_ref("__name__", "up").expect("ok"), std::borrow::Cow::Borrowed(_)));
        assert!(ix.postings_ref("__name__", "down").expect("ok").is_empty());
        assert!(ix.postings_ref("nope", "up").expect("ok").is_empty());
        ix.remove(1, labels!("__name__" => "up", "job" => "apx").iter().map(|l| (l.name, l.value)));
        assert_eq!(ix.label_values("job", "").expect("ok"), vec!["api", "b"]);
        assert_eq!(ix.all_postings().expect("ok"), vec![0, 2]);
        assert_eq!(ix.label_names().expect("ok"), vec!["__name__", "job"]);
    }
}
