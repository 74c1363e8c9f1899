//! PromQL evaluation engine (being written).
