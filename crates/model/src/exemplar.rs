//! Exemplars: a sample's trace reference (upstream `exemplar.Exemplar`), kept per series in a bounded
//! ring by storage and served by `/api/v1/query_exemplars`.

use crate::Labels;

/// Most runes an exemplar's label names and values may hold together (upstream
/// `exemplar.ExemplarMaxLabelSetLength`).
pub const EXEMPLAR_MAX_LABEL_SET_RUNES: usize = 128;

/// One exemplar.
#[derive(Debug, Clone, PartialEq)]
pub struct Exemplar {
    pub labels: Labels,
    pub value: f64,
    pub t: i64,
}

impl Exemplar {
    /// Upstream `Exemplar.Equals`: same labels, timestamp and value (value bits compared, so NaN equals
    /// NaN as Go's `==` on bits would not — upstream compares with `==`, which makes a NaN exemplar
    /// never a duplicate; mirrored here).
    pub fn same_as(&self, o: &Exemplar) -> bool {
        self.t == o.t && self.value == o.value && self.labels == o.labels
    }

    /// The runes of the label names and values together, as upstream counts them for the limit.
    pub fn label_runes(&self) -> usize {
        self.labels.iter().map(|l| l.name.chars().count() + l.value.chars().count()).sum()
    }
}
