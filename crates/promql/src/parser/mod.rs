//! PromQL lexer, parser, AST and printer — our own implementation of Prometheus 3's language, including
//! the experimental parts the conformance scripts enable (duration expressions, `anchored`/`smoothed`,
//! fill modifiers, experimental functions and aggregators).
//!
//! - [`ast`]: the syntax tree ([`Expr`]) mirroring upstream `promql/parser/ast.go`, plus
//!   [`resolve_durations`] which folds duration expressions for one query, and
//!   [`fold_query_context_functions`] which turns `start()`, `end()`, `range()`, `step()` into numbers.
//! - [`functions`]: the function table (signatures, experimental flags).
//! - `lexer`: a port of upstream's lexer state machine (`lex.go`) so the same inputs lex the same way.
//! - `parse`: precedence-climbing parser plus upstream's `checkAST` type checks; [`parse`] is the entry.
//! - `printer`: `Display for Expr` = upstream `String()`; [`pretty`] = upstream `Pretty(0)`, which
//!   `/api/v1/format_query` returns.
//! - `json`: [`to_json`], the AST as `/api/v1/parse_query` returns it.
//!
//! Key decision: a hand-written parser instead of a generated one, reproducing upstream's error *messages*
//! (the conformance scripts and API clients compare them) rather than its yacc state machine. Where yacc's
//! error recovery decides the wording (which enclosing construct is named, which of two errors comes
//! first), the parser models it explicitly (`ctx`, lookahead lexer errors). Parity is checked against the
//! real upstream parser: `testdata/` holds byte-exact upstream outputs for 2,238 generated inputs and
//! 66 JSON ASTs (see its README), and [`ParseOptions`] reproduces upstream's feature gates.

pub mod ast;
pub mod functions;
mod json;
mod lexer;
mod parse;
mod printer;

pub use ast::*;
pub use functions::{FUNCTIONS, Function, get_function};
pub use parse::{ParseError, ParseOptions, parse, parse_duration, parse_metric_selector, parse_with_options};
pub use json::to_json;
pub use printer::{format_duration_ms, format_float_f, format_matcher, go_quote_bytes, pretty, pretty_width};

#[cfg(test)]
mod tests;
