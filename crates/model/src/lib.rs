//! `tessera-model`: the vocabulary every other Tessera crate speaks.
//!
//! - [`Labels`] / [`Label`]: a series' identity, a sorted set of name/value pairs (`__name__` included),
//!   with a stable 64-bit hash ([`Labels::hash`]) used both for series identity and shard routing.
//! - [`Sample`] and the stale marker ([`STALE_NAN_BITS`]).
//! - [`histogram`]: native histogram samples ([`Histogram`], [`FloatHistogram`], [`Span`]) as Prometheus represents them.
//! - [`histogram_sample`]: a histogram sample as written and stored ([`HistogramSample`]: integer or float).
//! - [`Matcher`]: Prometheus' four matcher kinds with Prometheus' semantics (fully anchored regexes,
//!   an empty value matches a missing label), plus the analysis (literal sets, prefixes) that lets an
//!   index answer most regexes without scanning every value.
//! - [`storage`]: the read interface ([`storage::Queryable`], [`storage::Querier`], [`storage::Series`],
//!   [`storage::ChunkRef`]) through which the head and every block are read alike.
//!
//! Key decision: the read interface hands out *encoded chunks* (`bytes::Bytes`, which can point into an
//! mmap'd block without copying), not decoded samples. Remote read forwards them as stored; PromQL decodes
//! each series exactly once with the iterators of `tessera-encoding`.
#![forbid(unsafe_code)]

pub mod changes;
pub mod exemplar;
pub mod fixtures;
pub mod gofloat;
pub mod histogram;
pub mod histogram_float;
pub mod histogram_quantile;
pub mod histogram_sample;
pub mod labels;
pub mod matcher;
pub mod sample;
pub mod storage;

pub use changes::ChangeLog;
pub use exemplar::Exemplar;
pub use histogram::{CounterResetHint, FloatHistogram, Histogram, Span};
pub use histogram_sample::{HistogramSample, HistogramValue};
pub use labels::{Label, LabelRef, LabelStr, Labels, LabelsBuilder, METRIC_NAME};
pub use matcher::{MatchOp, Matcher, MatcherError};
pub use sample::{is_stale_nan, Sample, STALE_NAN, STALE_NAN_BITS};
pub use storage::{ChunkEncoding, ChunkRef, Querier, Queryable, RawHorizon, SelectHints, Series, SeriesSet, StorageError, TierInfo};
