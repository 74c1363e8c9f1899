//! `tessera-tsdb`: the storage engine (see DESIGN.md "A shard").
//!
//! Main types: [`Db`] (N shards behind one embedded API: [`Db::appender`] for writes, the
//! `tessera_model::Queryable` impl for reads), [`Options`], [`Appender`] / [`CommitReport`], [`Error`].
//! Inside: each shard ([`shard`]) has a head ([`head`]: series, open XOR chunks, an inverted index), a
//! WAL (`tessera-wal` moves the bytes, [`wal_records`] gives them meaning) and immutable blocks
//! ([`block`]), compacted and expired in the background.
//!
//! Key decision: sharding by label hash is the unit of parallelism. A shard is a complete mini-TSDB with
//! its own locks, WAL and blocks, so N cores ingest N streams without sharing a lock or a file, and a
//! commit touching several shards runs them in parallel.
#![deny(unsafe_code)]

pub mod appender;
pub mod block;
pub mod compact;
pub mod db;
pub mod error;
pub mod exemplars;
pub mod head;
pub mod index;
mod maintenance;
mod merge;
pub mod metrics;
pub mod options;
pub mod querier;
pub mod retention;
pub(crate) mod shard;
pub mod tiers;
pub mod tombstones;
pub mod wal_pack;
pub mod wal_records;

pub use block::mmap::release_free_heap;
pub use appender::{Appender, CommitReport, RejectReason, Rejected};
pub use db::{Cardinality, Db, Stats};
pub use error::{Error, Result};
pub use merge::merge_chunk_lists;
pub use metrics::Metrics;
pub use options::{FsyncPolicy, Options, TierOptions};
