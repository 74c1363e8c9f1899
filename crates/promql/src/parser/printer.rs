//! `Display` for the AST: Prometheus' canonical `String()` form (upstream `promql/parser/printer.go`),
//! which `/api/v1/format_query` serves and which parses back to the same tree.

use std::fmt::{self, Write as _};

use tessera_model::Matcher;

use super::ast::*;
use super::lexer::go_quote_str;

/// Prometheus' `model.Duration.String()` for a duration in ms (`1h30m`, `90d`, `0s`, `-5m`).
pub fn format_duration_ms(ms: i64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    if ms < 0 {
        out.push('-');
    }
    let mut ms = ms.unsigned_abs();
    let mut unit = |name: &str, mult: u64, exact: bool| {
        if exact && !ms.is_multiple_of(mult) {
            return;
        }
        let v = ms / mult;
        if v > 0 {
            let _ = write!(out, "{v}{name}");
            ms -= v * mult;
        }
    };
    // Years and weeks only when exact: 90d reads better than 12w6d.
    unit("y", 1000 * 60 * 60 * 24 * 365, true);
    unit("w", 1000 * 60 * 60 * 24 * 7, true);
    unit("d", 1000 * 60 * 60 * 24, false);
    unit("h", 1000 * 60 * 60, false);
    unit("m", 1000 * 60, false);
    unit("s", 1000, false);
    unit("ms", 1, false);
    out
}

/// Go's `strconv.FormatFloat(v, 'f', -1, 64)`.
pub fn format_float_f(v: f64) -> String {
    tessera_model::gofloat::format_f(v)
}

/// Go's `%v` for a float64.
pub fn format_float_v(v: f64) -> String {
    tessera_model::gofloat::format_g(v)
}

fn seconds_literal(secs: f64, duration: bool) -> String {
    if duration {
        let ns = secs * 1e9;
        if secs < 0.0 {
            return format!("-{}", format_duration_ms((-ns / 1e6) as i64));
        }
        return format_duration_ms((ns / 1e6) as i64);
    }
    format_float_f(secs)
}

/// Upstream `labels.Matcher.String()`: the name is quoted unless it is a legacy label name.
pub fn format_matcher(m: &Matcher) -> String {
    let mut s = String::new();
    if should_quote_name(&m.name) {
        s.push_str(&go_quote_str(&m.name));
    } else {
        s.push_str(&m.name);
    }
    s.push_str(m.op.as_str());
    s.push_str(&go_quote_str(&m.value));
    s
}

fn should_quote_name(name: &str) -> bool {
    name.is_empty()
        || name
            .chars()
            .enumerate()
            .any(|(i, c)| !(c == '_' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())))
}

fn write_labels(f: &mut fmt::Formatter<'_>, labels: &[String]) -> fmt::Result {
    for (i, l) in labels.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        if should_quote_name(l) {
            f.write_str(&go_quote_str(l))?;
        } else {
            f.write_str(l)?;
        }
    }
    Ok(())
}

fn at_str(at: &Option<AtModifier>) -> String {
    match at {
        None => String::new(),
        Some(AtModifier::Timestamp(ms)) => format!(" @ {:.3}", *ms as f64 / 1000.0),
        Some(AtModifier::Start) => " @ start()".into(),
        Some(AtModifier::End) => " @ end()".into(),
    }
}

fn offset_str(ms: i64, expr: &Option<DurationExpr>) -> String {
    match expr {
        Some(e) => format!(" offset {e}"),
        None if ms > 0 => format!(" offset {}", format_duration_ms(ms)),
        None if ms < 0 => format!(" offset -{}", format_duration_ms(-ms)),
        None => String::new(),
    }
}

fn range_str(ms: i64, expr: &Option<DurationExpr>) -> String {
    match expr {
        Some(e) => e.to_string(),
        None => format_duration_ms(ms),
    }
}

impl fmt::Display for DurationExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationExpr::Number { secs, duration, .. } => f.write_str(&seconds_literal(*secs, *duration)),
            DurationExpr::Step { .. } => f.write_str("step()"),
            DurationExpr::Range { .. } => f.write_str("range()"),
            DurationExpr::Unary { neg, expr, .. } => {
                if *neg {
                    f.write_str("-")?;
                }
                write!(f, "{expr}")
            }
            DurationExpr::Binary { op, lhs, rhs, .. } => write!(f, "{lhs} {} {rhs}", op.as_str()),
            DurationExpr::MinMaxOf { max, lhs, rhs, .. } => {
                write!(f, "{}({lhs}, {rhs})", if *max { "max_of" } else { "min_of" })
            }
            // Upstream marks a duration expression "wrapped" instead of nesting nodes, so `((1h))` prints
            // as `(1h)`.
            DurationExpr::Paren { expr, .. } => match expr.as_ref() {
                inner @ DurationExpr::Paren { .. } => write!(f, "{inner}"),
                inner => write!(f, "({inner})"),
            },
        }
    }
}

impl VectorSelector {
    /// The selector without modifiers: `name{sorted matchers}` (upstream skips the `__name__` matcher that
    /// repeats the name).
    fn write_selector(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut strs: Vec<String> = self
            .matchers
            .iter()
            .filter(|m| {
                !(m.name == "__name__"
                    && m.op == tessera_model::MatchOp::Equal
                    && Some(&m.value) == self.name.as_ref()
                    && !m.value.is_empty())
            })
            .map(format_matcher)
            .collect();
        if let Some(n) = &self.name {
            f.write_str(n)?;
        }
        if !strs.is_empty() {
            strs.sort();
            write!(f, "{{{}}}", strs.join(","))?;
        }
        Ok(())
    }
}

impl fmt::Display for VectorSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_selector(f)?;
        f.write_str(&at_str(&self.at))?;
        if self.anchored {
            f.write_str(" anchored")?;
        } else if self.smoothed {
            f.write_str(" smoothed")?;
        }
        f.write_str(&offset_str(self.original_offset_ms, &self.offset_expr))
    }
}

impl fmt::Display for VectorMatching {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let grouped = matches!(self.card, VectorMatchCardinality::ManyToOne | VectorMatchCardinality::OneToMany);
        if !self.matching_labels.is_empty() || self.on || grouped {
            f.write_str(if self.on { " on (" } else { " ignoring (" })?;
            write_labels(f, &self.matching_labels)?;
            f.write_str(")")?;
        }
        if grouped {
            f.write_str(if self.card == VectorMatchCardinality::ManyToOne { " group_left (" } else { " group_right (" })?;
            write_labels(f, &self.include)?;
            f.write_str(")")?;
        }
        match (self.fill_lhs, self.fill_rhs) {
            (Some(l), Some(r)) if l == r => write!(f, " fill ({})", format_float_v(l))?,
            (l, r) => {
                if let Some(l) = l {
                    write!(f, " fill_left ({})", format_float_v(l))?;
                }
                if let Some(r) = r {
                    write!(f, " fill_right ({})", format_float_v(r))?;
                }
            }
        }
        Ok(())
    }
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expr::NumberLiteral(n) => f.write_str(&seconds_literal(n.val, n.duration)),
            Expr::StringLiteral(s) => match &s.raw {
                Some(raw) => f.write_str(&go_quote_bytes(raw)),
                None => f.write_str(&go_quote_str(&s.val)),
            },
            Expr::VectorSelector(vs) => write!(f, "{vs}"),
            Expr::MatrixSelector(ms) => {
                ms.vs.write_selector(f)?;
                write!(f, "[{}]", range_str(ms.range_ms, &ms.range_expr))?;
                if ms.vs.anchored {
                    f.write_str(" anchored")?;
                } else if ms.vs.smoothed {
                    f.write_str(" smoothed")?;
                }
                f.write_str(&at_str(&ms.vs.at))?;
                f.write_str(&offset_str(ms.vs.original_offset_ms, &ms.vs.offset_expr))
            }
            Expr::Subquery(sq) => {
                let step = match &sq.step_expr {
                    _ if sq.step_ms != 0 => format_duration_ms(sq.step_ms),
                    Some(e) => e.to_string(),
                    None => String::new(),
                };
                write!(
                    f,
                    "{}[{}:{}]{}{}",
                    sq.expr,
                    range_str(sq.range_ms, &sq.range_expr),
                    step,
                    at_str(&sq.at),
                    offset_str(sq.original_offset_ms, &sq.offset_expr)
                )
            }
            Expr::Call(c) => {
                write!(f, "{}(", c.func.name)?;
                for (i, a) in c.args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{a}")?;
                }
                f.write_str(")")
            }
            Expr::Aggregate(a) => {
                f.write_str(a.op.as_str())?;
                if a.without {
                    f.write_str(" without (")?;
                    write_labels(f, &a.grouping)?;
                    f.write_str(") ")?;
                } else if !a.grouping.is_empty() {
                    f.write_str(" by (")?;
                    write_labels(f, &a.grouping)?;
                    f.write_str(") ")?;
                }
                f.write_str("(")?;
                if let Some(p) = &a.param {
                    write!(f, "{p}, ")?;
                }
                write!(f, "{})", a.expr)
            }
            Expr::Binary(b) => {
                write!(f, "{} {}", b.lhs, b.op.as_str())?;
                if b.return_bool {
                    f.write_str(" bool")?;
                }
                if let Some(vm) = &b.matching {
                    write!(f, "{vm}")?;
                }
                write!(f, " {}", b.rhs)
            }
            Expr::Unary(u) => write!(f, "{}{}", if u.op == UnaryOp::Neg { "-" } else { "+" }, u.expr),
            Expr::Paren(p) => write!(f, "({})", p.expr),
        }
    }
}

/// Line width above which [`pretty`] splits an expression (upstream `maxCharactersPerLine`).
const MAX_CHARS_PER_LINE: usize = 100;

/// Prometheus' `Pretty(0)` (upstream `prettier.go`): expressions longer than 100 characters are split
/// over lines with two-space indentation. This is what `/api/v1/format_query` returns.
pub fn pretty(e: &Expr) -> String {
    pretty_width(e, MAX_CHARS_PER_LINE)
}

/// [`pretty`] with another line width (upstream tests use 10).
pub fn pretty_width(e: &Expr, max_chars_per_line: usize) -> String {
    pretty_at(e, 0, max_chars_per_line)
}

fn indent(level: usize) -> String {
    "  ".repeat(level)
}

fn pretty_at(e: &Expr, level: usize, max: usize) -> String {
    let flat = e.to_string();
    let split = flat.len() > max;
    let ind = indent(level);
    match e {
        Expr::Aggregate(a) if split => {
            let mut s = format!("{ind}{}", a.op.as_str());
            if a.without {
                s.push_str(&format!(" without ({}) ", join_labels(&a.grouping)));
            } else if !a.grouping.is_empty() {
                s.push_str(&format!(" by ({}) ", join_labels(&a.grouping)));
            }
            s.push_str("(\n");
            if let Some(p) = &a.param {
                s.push_str(&format!("{},\n", pretty_at(p, level + 1, max)));
            }
            s.push_str(&format!("{}\n{ind})", pretty_at(&a.expr, level + 1, max)));
            s
        }
        Expr::Binary(b) if split => {
            let matching = b.matching.as_ref().map(|m| m.to_string()).unwrap_or_default();
            format!(
                "{}\n{ind}{}{}{matching}\n{}",
                pretty_at(&b.lhs, level + 1, max),
                b.op.as_str(),
                if b.return_bool { " bool" } else { "" },
                pretty_at(&b.rhs, level + 1, max)
            )
        }
        Expr::Call(c) if split => {
            let args: Vec<String> = c.args.iter().map(|a| pretty_at(a, level + 1, max)).collect();
            format!("{ind}{}(\n{}\n{ind})", c.func.name, args.join(",\n"))
        }
        Expr::Paren(p) if split => format!("{ind}(\n{}\n{ind})", pretty_at(&p.expr, level + 1, max)),
        // Upstream returns the unsplit subquery without indentation; mirrored.
        Expr::Subquery(_) if !split => flat,
        Expr::Subquery(sq) => {
            let inner = sq.expr.to_string();
            let suffix = &flat[inner.len()..];
            format!("{}{suffix}", pretty_at(&sq.expr, level, max))
        }
        Expr::Unary(u) => {
            let child = pretty_at(&u.expr, level, max);
            format!("{ind}{}{}", if u.op == UnaryOp::Neg { "-" } else { "+" }, child.trim())
        }
        _ => format!("{ind}{flat}"),
    }
}

fn join_labels(labels: &[String]) -> String {
    labels
        .iter()
        .map(|l| if should_quote_name(l) { go_quote_str(l) } else { l.clone() })
        .collect::<Vec<_>>()
        .join(", ")
}

/// Go's `strconv.Quote` for bytes that may not be UTF-8: valid sequences as Go's `strconv.Quote` prints
/// them, each invalid byte as `\xNN`.
pub fn go_quote_bytes(b: &[u8]) -> String {
    let mut out = String::from("\"");
    let mut rest = b;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(s) => {
                let q = go_quote_str(s);
                out.push_str(&q[1..q.len() - 1]);
                break;
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                let q = go_quote_str(std::str::from_utf8(valid).unwrap_or_default());
                out.push_str(&q[1..q.len() - 1]);
                let bad = e.error_len().unwrap_or(after.len()).max(1);
                for byte in &after[..bad] {
                    out.push_str(&format!("\\x{byte:02x}"));
                }
                rest = &after[bad..];
            }
        }
    }
    out.push('"');
    out
}
