//! `tessera-bench`: load generators and benchmark harnesses (dev-only). Each subcommand lives in its own
//! module with an `Args` (clap) and a `run` function; `main.rs` only dispatches.
#![forbid(unsafe_code)]

pub mod answer;
pub mod billions;
pub mod dashboard;
pub mod disk_usage;
pub mod hist_query;
pub mod hostile;
pub mod http;
pub mod nodegen;
pub mod point_queries;
pub mod prom_query;
pub mod promql_diff;
pub mod query_latency;
pub mod remote_read;
pub mod remote_write;
pub mod store_isolation;
pub mod tiers;
pub mod union_cost;
