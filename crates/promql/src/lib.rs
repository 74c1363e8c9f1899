//! `tessera-promql`: our own PromQL — lexer, parser, AST and pretty-printer ([`parser`]), the evaluation
//! engine ([`engine`]), and the runner of Prometheus' conformance scripts ([`promqltest`]).
//!
//! The engine reads only through `tessera_model::storage` (the read interface), never tsdb internals.
#![forbid(unsafe_code)]

pub mod cache;
pub mod engine;
pub(crate) mod gomath;
pub mod parser;
pub mod promqltest;
