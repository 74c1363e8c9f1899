//! tessera-api (being written).
#![forbid(unsafe_code)]

pub mod metadata;
pub mod metrics;
pub mod params;
pub mod response;
pub mod selector;
