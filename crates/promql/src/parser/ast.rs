//! The PromQL syntax tree, mirroring Prometheus' `promql/parser/ast.go`.
//!
//! One enum [`Expr`] with one variant per upstream node type. Durations that the query fixes (`[5m]`,
//! `offset 1h`) are folded to milliseconds by the parser (`range_ms`, `original_offset_ms`); Prometheus 3
//! duration *expressions* that depend on the query (`[step()*2]`, `offset min_of(range(), 1h)`) are kept
//! as a small [`DurationExpr`] tree next to the folded field and resolved once per query with
//! [`resolve_durations`] (upstream: `promql/durations.go`, `durationVisitor`), which writes the folded
//! field. After resolution the engine reads only the `_ms` fields.
//!
//! Positions ([`PosRange`], byte offsets into the query) are kept only where an error message needs
//! them (duration expressions, evaluated at query time).

use std::fmt;
use tessera_model::Matcher;

use super::functions::Function;

/// A byte range `[start, end)` in the query string.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PosRange {
    pub start: usize,
    pub end: usize,
}

/// The type an expression evaluates to (upstream `ValueType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ValueType {
    Scalar,
    Vector,
    Matrix,
    String,
}

impl ValueType {
    /// The name used in Prometheus' JSON results and `/api/v1/parse_query` (`"vector"`, `"matrix"`, ...).
    pub fn as_str(self) -> &'static str {
        match self {
            ValueType::Scalar => "scalar",
            ValueType::Vector => "vector",
            ValueType::Matrix => "matrix",
            ValueType::String => "string",
        }
    }

    /// The name used in parser error messages (upstream `DocumentedType`).
    pub fn documented(self) -> &'static str {
        match self {
            ValueType::Scalar => "scalar",
            ValueType::Vector => "instant vector",
            ValueType::Matrix => "range vector",
            ValueType::String => "string",
        }
    }
}

/// A PromQL expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    NumberLiteral(NumberLiteral),
    StringLiteral(StringLiteral),
    VectorSelector(VectorSelector),
    MatrixSelector(MatrixSelector),
    Subquery(SubqueryExpr),
    Call(Call),
    Aggregate(AggregateExpr),
    Binary(BinaryExpr),
    Unary(UnaryExpr),
    Paren(ParenExpr),
}

/// A number. `duration` is set when it was written as a duration (`5m`), so that it prints as one.
#[derive(Debug, Clone, PartialEq)]
pub struct NumberLiteral {
    pub val: f64,
    pub duration: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct StringLiteral {
    /// The value; if the escapes produced bytes that are not UTF-8 (`"a\xc5z"`), those are U+FFFD here
    /// and the exact bytes are in `raw`.
    pub val: String,
    /// The exact bytes, only when they are not valid UTF-8. Go strings can hold such bytes and upstream
    /// rejects them where a label name is needed (`count_values("a\xc5z", x)` fails with
    /// `invalid label name "a\xc5z"`; see [`super::go_quote_bytes`] for that quoting).
    pub raw: Option<Vec<u8>>,
}

/// The `@` modifier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AtModifier {
    /// `@ <unix seconds>`, stored in milliseconds.
    Timestamp(i64),
    /// `@ start()`: the start of the range query (the evaluation time of an instant query).
    Start,
    /// `@ end()`.
    End,
}

/// An instant vector selector `name{matchers} offset d @ t`.
#[derive(Debug, Clone, PartialEq)]
pub struct VectorSelector {
    /// The metric name written before the braces (`foo{...}`), if any. A quoted name inside the braces
    /// (`{"my.metric"}`) is only a `__name__` matcher and leaves this `None`, as upstream.
    pub name: Option<String>,
    /// All matchers; when `name` is set, the `__name__="name"` matcher is the LAST one (upstream
    /// `assembleVectorSelector` appends it).
    pub matchers: Vec<Matcher>,
    /// The offset as written, in ms (negative offsets allowed). When `offset_expr` is set this is 0 until
    /// [`resolve_durations`] computes it.
    pub original_offset_ms: i64,
    /// A non-constant offset (`offset step()`, `offset (1h+5m)`); `None` for a plain literal.
    pub offset_expr: Option<DurationExpr>,
    pub at: Option<AtModifier>,
    /// `anchored` range modifier (extended range selectors); set on the selector inside a matrix selector.
    pub anchored: bool,
    /// `smoothed` range modifier.
    pub smoothed: bool,
    /// Set for the second argument of `info()`, which need not contain a non-empty matcher.
    pub bypass_empty_matcher_check: bool,
}

/// A range vector selector `vs[range]`. Offset, `@`, anchored and smoothed live on `vs`.
#[derive(Debug, Clone, PartialEq)]
pub struct MatrixSelector {
    pub vs: VectorSelector,
    /// The range in ms; 0 until resolved when `range_expr` is set.
    pub range_ms: i64,
    pub range_expr: Option<DurationExpr>,
}

/// A subquery `expr[range:step] offset d @ t`.
#[derive(Debug, Clone, PartialEq)]
pub struct SubqueryExpr {
    pub expr: Box<Expr>,
    pub range_ms: i64,
    pub range_expr: Option<DurationExpr>,
    /// The step in ms; 0 means "the default evaluation interval" (`[5m:]`).
    pub step_ms: i64,
    pub step_expr: Option<DurationExpr>,
    pub original_offset_ms: i64,
    pub offset_expr: Option<DurationExpr>,
    pub at: Option<AtModifier>,
}

/// A function call. `func` points into the static function table ([`super::functions::FUNCTIONS`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub func: &'static Function,
    pub args: Vec<Expr>,
}

/// Aggregation operators (upstream item types SUM, AVG, ...).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AggregateOp {
    Sum,
    Avg,
    Count,
    Min,
    Max,
    Group,
    Stddev,
    Stdvar,
    Topk,
    Bottomk,
    CountValues,
    Quantile,
    Limitk,
    LimitRatio,
}

impl AggregateOp {
    pub fn as_str(self) -> &'static str {
        match self {
            AggregateOp::Sum => "sum",
            AggregateOp::Avg => "avg",
            AggregateOp::Count => "count",
            AggregateOp::Min => "min",
            AggregateOp::Max => "max",
            AggregateOp::Group => "group",
            AggregateOp::Stddev => "stddev",
            AggregateOp::Stdvar => "stdvar",
            AggregateOp::Topk => "topk",
            AggregateOp::Bottomk => "bottomk",
            AggregateOp::CountValues => "count_values",
            AggregateOp::Quantile => "quantile",
            AggregateOp::Limitk => "limitk",
            AggregateOp::LimitRatio => "limit_ratio",
        }
    }

    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "sum" => AggregateOp::Sum,
            "avg" => AggregateOp::Avg,
            "count" => AggregateOp::Count,
            "min" => AggregateOp::Min,
            "max" => AggregateOp::Max,
            "group" => AggregateOp::Group,
            "stddev" => AggregateOp::Stddev,
            "stdvar" => AggregateOp::Stdvar,
            "topk" => AggregateOp::Topk,
            "bottomk" => AggregateOp::Bottomk,
            "count_values" => AggregateOp::CountValues,
            "quantile" => AggregateOp::Quantile,
            "limitk" => AggregateOp::Limitk,
            "limit_ratio" => AggregateOp::LimitRatio,
            _ => return None,
        })
    }

    /// Whether the operator takes a parameter before the vector (upstream `ItemType.IsAggregatorWithParam`).
    pub fn has_param(self) -> bool {
        matches!(
            self,
            AggregateOp::Topk
                | AggregateOp::Bottomk
                | AggregateOp::CountValues
                | AggregateOp::Quantile
                | AggregateOp::Limitk
                | AggregateOp::LimitRatio
        )
    }

    /// Experimental aggregators (need `--enable-feature=promql-experimental-functions` upstream).
    pub fn is_experimental(self) -> bool {
        matches!(self, AggregateOp::Limitk | AggregateOp::LimitRatio)
    }
}

/// `op [by|without (labels)] ([param,] expr)`.
#[derive(Debug, Clone, PartialEq)]
pub struct AggregateExpr {
    pub op: AggregateOp,
    pub expr: Box<Expr>,
    pub param: Option<Box<Expr>>,
    pub grouping: Vec<String>,
    pub without: bool,
}

/// Binary operators, including the set operators and the native-histogram trim operators `</` and `>/`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
    Atan2,
    Eql,
    Neq,
    Gtr,
    Lss,
    Gte,
    Lte,
    And,
    Or,
    Unless,
    /// `</`: trim the upper part of a native histogram.
    TrimUpper,
    /// `>/`: trim the lower part of a native histogram.
    TrimLower,
}

impl BinaryOp {
    pub fn as_str(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::Pow => "^",
            BinaryOp::Atan2 => "atan2",
            BinaryOp::Eql => "==",
            BinaryOp::Neq => "!=",
            BinaryOp::Gtr => ">",
            BinaryOp::Lss => "<",
            BinaryOp::Gte => ">=",
            BinaryOp::Lte => "<=",
            BinaryOp::And => "and",
            BinaryOp::Or => "or",
            BinaryOp::Unless => "unless",
            BinaryOp::TrimUpper => "</",
            BinaryOp::TrimLower => ">/",
        }
    }

    /// `==`, `!=`, `>`, `<`, `>=`, `<=` (upstream `IsComparisonOperator`).
    pub fn is_comparison(self) -> bool {
        matches!(self, BinaryOp::Eql | BinaryOp::Neq | BinaryOp::Gtr | BinaryOp::Lss | BinaryOp::Gte | BinaryOp::Lte)
    }

    /// `and`, `or`, `unless` (upstream `IsSetOperator`).
    pub fn is_set_operator(self) -> bool {
        matches!(self, BinaryOp::And | BinaryOp::Or | BinaryOp::Unless)
    }

    /// Binding strength, higher binds tighter (upstream yacc precedence declarations).
    pub fn precedence(self) -> u8 {
        match self {
            BinaryOp::Or => 1,
            BinaryOp::And | BinaryOp::Unless => 2,
            BinaryOp::Eql
            | BinaryOp::Neq
            | BinaryOp::Gtr
            | BinaryOp::Lss
            | BinaryOp::Gte
            | BinaryOp::Lte
            | BinaryOp::TrimUpper
            | BinaryOp::TrimLower => 3,
            BinaryOp::Add | BinaryOp::Sub => 4,
            BinaryOp::Mul | BinaryOp::Div | BinaryOp::Mod | BinaryOp::Atan2 => 5,
            BinaryOp::Pow => 6,
        }
    }

    pub fn is_right_associative(self) -> bool {
        self == BinaryOp::Pow
    }
}

/// Cardinality of a vector match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum VectorMatchCardinality {
    OneToOne,
    ManyToOne,
    OneToMany,
    ManyToMany,
}

impl VectorMatchCardinality {
    pub fn as_str(self) -> &'static str {
        match self {
            VectorMatchCardinality::OneToOne => "one-to-one",
            VectorMatchCardinality::ManyToOne => "many-to-one",
            VectorMatchCardinality::OneToMany => "one-to-many",
            VectorMatchCardinality::ManyToMany => "many-to-many",
        }
    }
}

/// How the two sides of a vector/vector binary operation are matched (upstream `VectorMatching`).
#[derive(Debug, Clone, PartialEq)]
pub struct VectorMatching {
    pub card: VectorMatchCardinality,
    /// Labels listed in `on(...)` or `ignoring(...)`.
    pub matching_labels: Vec<String>,
    /// `on` (true) or `ignoring` (false; also the default when neither is written).
    pub on: bool,
    /// Extra labels from `group_left(...)`/`group_right(...)`.
    pub include: Vec<String>,
    /// `fill(v)`/`fill_left(v)`: value used for a missing left-hand-side series.
    pub fill_lhs: Option<f64>,
    /// `fill(v)`/`fill_right(v)`: value used for a missing right-hand-side series.
    pub fill_rhs: Option<f64>,
}

/// `lhs op [bool] [on|ignoring(...)] [group_x(...)] [fill...] rhs`.
#[derive(Debug, Clone, PartialEq)]
pub struct BinaryExpr {
    pub op: BinaryOp,
    pub lhs: Box<Expr>,
    pub rhs: Box<Expr>,
    /// Set when both sides are instant vectors (upstream leaves it nil otherwise).
    pub matching: Option<VectorMatching>,
    /// `bool` modifier on a comparison.
    pub return_bool: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum UnaryOp {
    Neg,
    Pos,
}

#[derive(Debug, Clone, PartialEq)]
pub struct UnaryExpr {
    pub op: UnaryOp,
    pub expr: Box<Expr>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ParenExpr {
    pub expr: Box<Expr>,
}

/// Operators of duration expressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DurationOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    Pow,
}

impl DurationOp {
    pub fn as_str(self) -> &'static str {
        match self {
            DurationOp::Add => "+",
            DurationOp::Sub => "-",
            DurationOp::Mul => "*",
            DurationOp::Div => "/",
            DurationOp::Mod => "%",
            DurationOp::Pow => "^",
        }
    }
}

/// A duration expression (Prometheus 3 `promql-duration-expr`), valued in SECONDS as f64 like upstream.
#[derive(Debug, Clone, PartialEq)]
pub enum DurationExpr {
    /// A number (seconds) or duration literal (`duration` set: prints as `5m`).
    Number { secs: f64, duration: bool, pos: PosRange },
    /// `step()`: the query step (0 for instant queries).
    Step { pos: PosRange },
    /// `range()`: the query range `end - start` (0 for instant queries).
    Range { pos: PosRange },
    /// `-d` / `+d`.
    Unary { neg: bool, expr: Box<DurationExpr>, pos: PosRange },
    Binary { op: DurationOp, lhs: Box<DurationExpr>, rhs: Box<DurationExpr>, pos: PosRange },
    /// `min_of(a, b)` (`max == false`) or `max_of(a, b)`.
    MinMaxOf { max: bool, lhs: Box<DurationExpr>, rhs: Box<DurationExpr>, pos: PosRange },
    /// `( d )`, kept for printing.
    Paren { expr: Box<DurationExpr>, pos: PosRange },
}

impl DurationExpr {
    pub fn pos(&self) -> PosRange {
        match self {
            DurationExpr::Number { pos, .. }
            | DurationExpr::Step { pos }
            | DurationExpr::Range { pos }
            | DurationExpr::Unary { pos, .. }
            | DurationExpr::Binary { pos, .. }
            | DurationExpr::MinMaxOf { pos, .. }
            | DurationExpr::Paren { pos, .. } => *pos,
        }
    }

    /// Evaluates to seconds (upstream `durationVisitor.evaluateDurationExpr`). `step_ms`/`range_ms` are the
    /// query's step and range (0 for instant queries).
    pub fn eval_secs(&self, step_ms: i64, range_ms: i64) -> Result<f64, String> {
        Ok(match self {
            DurationExpr::Number { secs, .. } => *secs,
            DurationExpr::Step { .. } => crate::gomath::go_duration_secs(step_ms),
            DurationExpr::Range { .. } => crate::gomath::go_duration_secs(range_ms),
            DurationExpr::Unary { neg, expr, .. } => {
                let v = expr.eval_secs(step_ms, range_ms)?;
                if *neg { -v } else { v }
            }
            DurationExpr::Paren { expr, .. } => expr.eval_secs(step_ms, range_ms)?,
            DurationExpr::MinMaxOf { max, lhs, rhs, .. } => {
                let (l, r) = (lhs.eval_secs(step_ms, range_ms)?, rhs.eval_secs(step_ms, range_ms)?);
                // Upstream `durationVisitor.evaluateDurationExpr`: Go's math.Max/math.Min.
                if *max { crate::gomath::go_max(l, r) } else { crate::gomath::go_min(l, r) }
            }
            DurationExpr::Binary { op, lhs, rhs, pos } => {
                let (l, r) = (lhs.eval_secs(step_ms, range_ms)?, rhs.eval_secs(step_ms, range_ms)?);
                match op {
                    DurationOp::Add => l + r,
                    DurationOp::Sub => l - r,
                    DurationOp::Mul => l * r,
                    DurationOp::Div => {
                        if r == 0.0 {
                            return Err(format!("{}:{}: division by zero", pos.start, pos.end));
                        }
                        l / r
                    }
                    DurationOp::Mod => {
                        if r == 0.0 {
                            return Err(format!("{}:{}: modulo by zero", pos.start, pos.end));
                        }
                        l % r
                    }
                    DurationOp::Pow => l.powf(r),
                }
            }
        })
    }

    /// Evaluates to milliseconds with upstream's checks (`durationVisitor.calculateDuration`).
    pub fn eval_ms(&self, step_ms: i64, range_ms: i64, allow_negative: bool) -> Result<i64, String> {
        let d = self.eval_secs(step_ms, range_ms)?;
        let pos = self.pos();
        if d.is_nan() || d.is_infinite() {
            return Err(format!("{}:{}: duration is NaN or infinite", pos.start, pos.end));
        }
        if d <= 0.0 && !allow_negative {
            return Err(format!("{}:{}: duration must be greater than 0", pos.start, pos.end));
        }
        let bound = 9_223_372_036_854_775_808.0 / 1e9;
        if d > bound || d < -bound {
            return Err(format!("{}:{}: duration is out of range", pos.start, pos.end));
        }
        // time.Duration(duration*1000) * time.Millisecond: truncation toward zero.
        Ok((d * 1000.0) as i64)
    }
}

/// Computes every duration expression in `expr` for a query with this step and range (ms; both 0 for an
/// instant query) and stores the results in the folded `_ms` fields (upstream `durationVisitor`).
pub fn resolve_durations(expr: &mut Expr, step_ms: i64, range_ms: i64) -> Result<(), String> {
    match expr {
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => Ok(()),
        Expr::VectorSelector(vs) => resolve_vs(vs, step_ms, range_ms),
        Expr::MatrixSelector(ms) => {
            resolve_vs(&mut ms.vs, step_ms, range_ms)?;
            if let Some(e) = &ms.range_expr {
                ms.range_ms = e.eval_ms(step_ms, range_ms, false)?;
            }
            Ok(())
        }
        Expr::Subquery(sq) => {
            if let Some(e) = &sq.offset_expr {
                sq.original_offset_ms = e.eval_ms(step_ms, range_ms, true)?;
            }
            if let Some(e) = &sq.step_expr {
                sq.step_ms = e.eval_ms(step_ms, range_ms, false)?;
            }
            if let Some(e) = &sq.range_expr {
                sq.range_ms = e.eval_ms(step_ms, range_ms, false)?;
            }
            resolve_durations(&mut sq.expr, step_ms, range_ms)
        }
        Expr::Call(c) => c.args.iter_mut().try_for_each(|a| resolve_durations(a, step_ms, range_ms)),
        Expr::Aggregate(a) => {
            if let Some(p) = &mut a.param {
                resolve_durations(p, step_ms, range_ms)?;
            }
            resolve_durations(&mut a.expr, step_ms, range_ms)
        }
        Expr::Binary(b) => {
            resolve_durations(&mut b.lhs, step_ms, range_ms)?;
            resolve_durations(&mut b.rhs, step_ms, range_ms)
        }
        Expr::Unary(u) => resolve_durations(&mut u.expr, step_ms, range_ms),
        Expr::Paren(p) => resolve_durations(&mut p.expr, step_ms, range_ms),
    }
}

/// Replaces every call of `start()`, `end()`, `range()` and `step()` by a number: the query's start and end
/// (unix seconds), its length, and its step (0 when start equals end), whatever subquery the call sits in
/// (upstream `foldQueryContextFunctions`, run by `PreprocessExpr` before anything is evaluated).
/// `step_ms` is 0 for an instant query.
pub fn fold_query_context_functions(expr: &mut Expr, start_ms: i64, end_ms: i64, step_ms: i64) {
    if let Expr::Call(c) = expr {
        let val = match c.func.name {
            "start" => Some(start_ms as f64 / 1000.0),
            "end" => Some(end_ms as f64 / 1000.0),
            "range" => Some(crate::gomath::go_duration_secs(end_ms - start_ms)),
            "step" => Some(if start_ms != end_ms { crate::gomath::go_duration_secs(step_ms) } else { 0.0 }),
            _ => None,
        };
        if let Some(val) = val {
            *expr = Expr::NumberLiteral(NumberLiteral { val, duration: false });
            return;
        }
    }
    let fold = |e: &mut Expr| fold_query_context_functions(e, start_ms, end_ms, step_ms);
    match expr {
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::VectorSelector(_) | Expr::MatrixSelector(_) => {}
        Expr::Subquery(sq) => fold(&mut sq.expr),
        Expr::Call(c) => c.args.iter_mut().for_each(fold),
        Expr::Aggregate(a) => {
            fold(&mut a.expr);
            if let Some(p) = &mut a.param {
                fold(p);
            }
        }
        Expr::Binary(b) => {
            fold(&mut b.lhs);
            fold(&mut b.rhs);
        }
        Expr::Unary(u) => fold(&mut u.expr),
        Expr::Paren(p) => fold(&mut p.expr),
    }
}

fn resolve_vs(vs: &mut VectorSelector, step_ms: i64, range_ms: i64) -> Result<(), String> {
    if let Some(e) = &vs.offset_expr {
        vs.original_offset_ms = e.eval_ms(step_ms, range_ms, true)?;
    }
    Ok(())
}

impl Expr {
    /// The type the expression evaluates to (upstream `Expr.Type()`).
    pub fn value_type(&self) -> ValueType {
        match self {
            Expr::NumberLiteral(_) => ValueType::Scalar,
            Expr::StringLiteral(_) => ValueType::String,
            Expr::VectorSelector(_) => ValueType::Vector,
            Expr::MatrixSelector(_) | Expr::Subquery(_) => ValueType::Matrix,
            Expr::Call(c) => c.func.return_type,
            Expr::Aggregate(_) => ValueType::Vector,
            Expr::Binary(b) => {
                if b.lhs.value_type() == ValueType::Scalar && b.rhs.value_type() == ValueType::Scalar {
                    ValueType::Scalar
                } else {
                    ValueType::Vector
                }
            }
            Expr::Unary(u) => u.expr.value_type(),
            Expr::Paren(p) => p.expr.value_type(),
        }
    }

    /// Strips any number of enclosing parentheses (upstream `unwrapParenExpr`).
    pub fn unwrap_parens(&self) -> &Expr {
        let mut e = self;
        while let Expr::Paren(p) = e {
            e = &p.expr;
        }
        e
    }

    /// Visits every node depth-first, parents before children (upstream `Inspect`).
    pub fn walk<'a>(&'a self, f: &mut dyn FnMut(&'a Expr)) {
        f(self);
        match self {
            Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::VectorSelector(_) | Expr::MatrixSelector(_) => {}
            Expr::Subquery(s) => s.expr.walk(f),
            Expr::Call(c) => c.args.iter().for_each(|a| a.walk(f)),
            Expr::Aggregate(a) => {
                a.expr.walk(f);
                if let Some(p) = &a.param {
                    p.walk(f);
                }
            }
            Expr::Binary(b) => {
                b.lhs.walk(f);
                b.rhs.walk(f);
            }
            Expr::Unary(u) => u.expr.walk(f),
            Expr::Paren(p) => p.expr.walk(f),
        }
    }
}

impl fmt::Display for ValueType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
