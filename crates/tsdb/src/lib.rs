//! `tessera-tsdb`: the storage engine (skeleton being filled in; see DESIGN.md "A shard").
#![deny(unsafe_code)]

pub mod error;
pub mod index;
pub mod block;
pub mod tombstones;

pub use error::{Error, Result};
