//! `tessera-tsdb`: the storage engine (skeleton being filled in; see DESIGN.md "A shard").
#![deny(unsafe_code)]

pub mod index;
