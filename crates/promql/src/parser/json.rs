//! The JSON form of the AST that `/api/v1/parse_query` returns (upstream `web/api/v1/translate_ast.go`).
//! Field names and value spellings are upstream's; objects are key-sorted like Go's map encoding.

use serde_json::{Map, Value, json};
use tessera_model::Matcher;

use super::ast::*;
use super::printer::format_float_f;

/// Translates an expression to upstream's JSON AST.
pub fn to_json(e: &Expr) -> Value {
    match e {
        Expr::Aggregate(a) => obj(&[
            ("type", json!("aggregation")),
            ("op", json!(a.op.as_str())),
            ("expr", to_json(&a.expr)),
            ("param", a.param.as_ref().map_or(Value::Null, |p| to_json(p))),
            ("grouping", json!(a.grouping)),
            ("without", json!(a.without)),
        ]),
        Expr::Binary(b) => {
            let matching = b.matching.as_ref().map_or(Value::Null, |m| {
                obj(&[
                    ("card", json!(m.card.as_str())),
                    ("labels", json!(m.matching_labels)),
                    ("on", json!(m.on)),
                    ("include", json!(m.include)),
                    ("fillValues", obj(&[("lhs", float_or_null(m.fill_lhs)), ("rhs", float_or_null(m.fill_rhs))])),
                ])
            });
            obj(&[
                ("type", json!("binaryExpr")),
                ("op", json!(b.op.as_str())),
                ("lhs", to_json(&b.lhs)),
                ("rhs", to_json(&b.rhs)),
                ("matching", matching),
                ("bool", json!(b.return_bool)),
            ])
        }
        Expr::Call(c) => obj(&[
            ("type", json!("call")),
            (
                "func",
                obj(&[
                    ("name", json!(c.func.name)),
                    ("argTypes", Value::Array(c.func.arg_types.iter().map(|t| json!(t.as_str())).collect())),
                    ("variadic", json!(c.func.variadic)),
                    ("returnType", json!(c.func.return_type.as_str())),
                ]),
            ),
            ("args", Value::Array(c.args.iter().map(to_json).collect())),
        ]),
        Expr::MatrixSelector(ms) => {
            let vs = &ms.vs;
            obj(&[
                ("type", json!("matrixSelector")),
                ("name", json!(vs.name.as_deref().unwrap_or(""))),
                ("range", json!(ms.range_ms)),
                ("rangeExpr", duration_or_null(&ms.range_expr)),
                ("offset", json!(vs.original_offset_ms)),
                ("offsetExpr", duration_or_null(&vs.offset_expr)),
                ("matchers", matchers(&vs.matchers)),
                ("timestamp", timestamp(&vs.at)),
                ("startOrEnd", start_or_end(&vs.at)),
                ("anchored", json!(vs.anchored)),
                ("smoothed", json!(vs.smoothed)),
            ])
        }
        Expr::Subquery(sq) => obj(&[
            ("type", json!("subquery")),
            ("expr", to_json(&sq.expr)),
            ("range", json!(sq.range_ms)),
            ("rangeExpr", duration_or_null(&sq.range_expr)),
            ("offset", json!(sq.original_offset_ms)),
            ("offsetExpr", duration_or_null(&sq.offset_expr)),
            ("step", json!(sq.step_ms)),
            ("stepExpr", duration_or_null(&sq.step_expr)),
            ("timestamp", timestamp(&sq.at)),
            ("startOrEnd", start_or_end(&sq.at)),
        ]),
        Expr::NumberLiteral(n) => obj(&[("type", json!("numberLiteral")), ("val", json!(format_float_f(n.val)))]),
        Expr::Paren(p) => obj(&[("type", json!("parenExpr")), ("expr", to_json(&p.expr))]),
        Expr::StringLiteral(s) => obj(&[("type", json!("stringLiteral")), ("val", json!(s.val))]),
        Expr::Unary(u) => obj(&[
            ("type", json!("unaryExpr")),
            ("op", json!(if u.op == UnaryOp::Neg { "-" } else { "+" })),
            ("expr", to_json(&u.expr)),
        ]),
        Expr::VectorSelector(vs) => obj(&[
            ("type", json!("vectorSelector")),
            ("name", json!(vs.name.as_deref().unwrap_or(""))),
            ("offset", json!(vs.original_offset_ms)),
            ("offsetExpr", duration_or_null(&vs.offset_expr)),
            ("matchers", matchers(&vs.matchers)),
            ("timestamp", timestamp(&vs.at)),
            ("startOrEnd", start_or_end(&vs.at)),
            ("anchored", json!(vs.anchored)),
            ("smoothed", json!(vs.smoothed)),
        ]),
    }
}

fn obj(fields: &[(&str, Value)]) -> Value {
    let mut m = Map::new();
    for (k, v) in fields {
        m.insert((*k).to_string(), v.clone());
    }
    Value::Object(m)
}

/// Go encodes a `*float64` as a JSON number (NaN/Inf cannot be encoded; upstream would fail, we emit null).
fn float_or_null(v: Option<f64>) -> Value {
    v.and_then(serde_json::Number::from_f64).map_or(Value::Null, Value::Number)
}

fn duration_or_null(d: &Option<DurationExpr>) -> Value {
    d.as_ref().map_or(Value::Null, duration_json)
}

/// Upstream `translateDurationExpr`. Upstream has no paren node: it sets `wrapped` on the inner node,
/// or wraps a literal in a unary `+`.
fn duration_json(d: &DurationExpr) -> Value {
    let node = |op: &str, lhs: Value, rhs: Value, wrapped: bool| {
        obj(&[
            ("type", json!("durationExpr")),
            ("op", json!(op)),
            ("lhs", lhs),
            ("rhs", rhs),
            ("wrapped", json!(wrapped)),
        ])
    };
    match d {
        DurationExpr::Number { secs, duration, .. } => obj(&[
            ("type", json!("numberLiteral")),
            ("val", json!(format_float_f(*secs))),
            ("duration", json!(duration)),
        ]),
        DurationExpr::Step { .. } => node("step", Value::Null, Value::Null, false),
        DurationExpr::Range { .. } => node("range", Value::Null, Value::Null, false),
        DurationExpr::Unary { neg, expr, .. } => {
            node(if *neg { "-" } else { "+" }, Value::Null, duration_json(expr), false)
        }
        DurationExpr::Binary { op, lhs, rhs, .. } => node(op.as_str(), duration_json(lhs), duration_json(rhs), false),
        DurationExpr::MinMaxOf { max, lhs, rhs, .. } => {
            node(if *max { "max_of" } else { "min_of" }, duration_json(lhs), duration_json(rhs), false)
        }
        DurationExpr::Paren { expr, .. } => {
            let mut inner = expr.as_ref();
            while let DurationExpr::Paren { expr, .. } = inner {
                inner = expr;
            }
            match inner {
                DurationExpr::Number { .. } => node("+", Value::Null, duration_json(inner), true),
                _ => {
                    let mut v = duration_json(inner);
                    if let Value::Object(m) = &mut v {
                        m.insert("wrapped".into(), json!(true));
                    }
                    v
                }
            }
        }
    }
}

fn matchers(ms: &[Matcher]) -> Value {
    Value::Array(
        ms.iter()
            .map(|m| obj(&[("name", json!(m.name)), ("value", json!(m.value)), ("type", json!(m.op.as_str()))]))
            .collect(),
    )
}

fn timestamp(at: &Option<AtModifier>) -> Value {
    match at {
        Some(AtModifier::Timestamp(ms)) => json!(ms),
        _ => Value::Null,
    }
}

fn start_or_end(at: &Option<AtModifier>) -> Value {
    match at {
        Some(AtModifier::Start) => json!("start"),
        Some(AtModifier::End) => json!("end"),
        _ => Value::Null,
    }
}
