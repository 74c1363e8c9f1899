//! PromQL lexer, parser, AST and printer.
//!
//! - [`ast`]: the syntax tree ([`Expr`]) mirroring Prometheus' `promql/parser/ast.go`.
//! - [`functions`]: the function table.

pub mod ast;
pub mod functions;

pub use ast::*;
pub use functions::{FUNCTIONS, Function, get_function};
