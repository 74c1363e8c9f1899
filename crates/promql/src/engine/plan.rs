//! The plan step (DESIGN.md: text → AST → **plan** → evaluate).
//!
//! [`plan`] walks the expression once, after the query-context functions and durations are resolved,
//! and decides for every node where it runs:
//! - **In the shards, fused**: a vector selector (selection, decoding and lookback per series inside
//!   each shard's loop), a range function over a plain matrix selector (selection, decoding and the
//!   kernel per series), and the *partial stage* of a decomposable aggregation over either of those
//!   (per-group accumulators built inside each shard; only the partials cross to the merge).
//! - **Centrally**: everything else (binary operators, instant functions, aggregations that cannot be
//!   decomposed exactly, subqueries' outer windows), over the materialised vectors of its children.
//!
//! The decision is made here and only here: the evaluator asks [`Plan::pushdown`] for an aggregation
//! instead of matching shapes itself. A pushed-down aggregation can still fall back to central
//! evaluation at run time when its data turns out not to merge exactly (a histogram layout change, a
//! label set the central path would refuse); the trace says when that happened.
//!
//! Bounds are checked before anything is allocated, where they can be known from the plan alone: the
//! nesting depth (the parser limits it too) and the number of steps of each subquery's inner grid.
//! Data-dependent bounds (samples held, slots) are checked while evaluating, as upstream does.
//!
//! With `trace=1` ([`super::QueryOptions::trace`]) the evaluator records, per node, wall time, series
//! out, series and chunks touched and samples decoded ([`Trace`]); [`Plan::explain`] joins the plan
//! and the trace into the tree the API returns.

use super::EngineOptions;
use crate::parser::{AggregateExpr, AggregateOp, Call, Expr, VectorSelector};
use std::collections::HashMap;
use std::time::Duration;

/// How a pushed-down aggregation gets its per-series values inside the shards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pushdown {
    /// `op (selector)`: the lookback value of each series at each step.
    Selector,
    /// `op (f(selector[range]))`: a range function's value of each series at each step.
    RangeFunction,
    /// `avg|stddev|stdvar (f(selector[range]))`: the range function runs in the shards, and its series
    /// are folded centrally in label order as they arrive (their result depends on that order), never
    /// all held at once ([`super::eval::select_ordered`]).
    OrderedRangeFunction,
    /// `avg|stddev|stdvar (selector)`: the same with each series' lookback values.
    OrderedSelector,
}

/// Where a node runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Inside every shard, in parallel, per series.
    Shards,
    /// The partial stage inside the shards, the merge central.
    ShardsThenMerge,
    /// The per-series stage inside the shards, folded centrally in label order as series arrive.
    ShardsThenOrderedFold,
    /// Fused into its parent's shard pipeline (never evaluated on its own).
    Fused,
    /// Centrally, over its children's materialised values.
    Central,
}

impl Placement {
    pub fn as_str(self) -> &'static str {
        match self {
            Placement::Shards => "shards",
            Placement::ShardsThenMerge => "shards+merge",
            Placement::ShardsThenOrderedFold => "shards+ordered fold",
            Placement::Fused => "fused into parent",
            Placement::Central => "central",
        }
    }
}

/// One node of a plan.
#[derive(Debug, Clone)]
pub struct PlanNode {
    /// The expression node's address (the key of the evaluator's records).
    pub id: usize,
    /// What the node does, e.g. `sum by (instance)`, `rate[5m]`, `selector`.
    pub op: String,
    /// The node's expression as PromQL.
    pub expr: String,
    pub placement: Placement,
    pub children: Vec<PlanNode>,
    /// For an aggregation: its own address (the key of pushdown decisions and fallbacks), else 0.
    agg_id: usize,
}

/// A query's plan: the node tree and the pushdown decisions by node.
#[derive(Debug, Clone)]
pub struct Plan {
    pub root: PlanNode,
    pushdowns: HashMap<usize, Pushdown>,
}

fn addr<T>(x: &T) -> usize {
    x as *const T as usize
}

/// Aggregations pushed into the shards: those whose merged partials give upstream's result. Upstream folds
/// series in label order; Kahan-compensated partial sums merge to the same `sum + c` (checked on random
/// inputs), but avg divides the sum and its compensation separately (so how they split matters) and
/// stddev/stdvar are plain Welford (Chan's combination of per-shard states differs in the last bits):
/// those three run over the materialised vector in label order instead, floats and histograms alike.
///
/// Over histograms: count and group count them, min and max ignore them with upstream's info, and sum
/// adds them with `KahanAdd` in each shard and merges the partial sums and compensations as floats
/// merge ([`super::hist::HistKahan::merge_sum`] via the aggregate module). That merge is upstream's sum only while every
/// histogram of a group at a step has the same schema, zero threshold and custom bounds (otherwise
/// the running sum is reduced, widened or reconciled, which depends on the order, and the annotations
/// of mixed exponential and custom buckets name the series added at that moment); the fold gives up
/// and the query is evaluated centrally as soon as one does not.
pub fn is_decomposable(op: AggregateOp) -> bool {
    matches!(op, AggregateOp::Sum | AggregateOp::Count | AggregateOp::Min | AggregateOp::Max | AggregateOp::Group)
}

/// Range functions whose output is folded inside the shards: one argument, a plain matrix selector
/// (anchored and smoothed ranges and subqueries run centrally) whose metric name is fixed by an
/// equality matcher, so that dropping the name cannot make two series one (the central path merges
/// or refuses those). `absent_over_time` is not a per-series function.
pub fn pushable_range_call(c: &Call) -> bool {
    if c.args.len() != 1 || c.func.name == "absent_over_time" || super::functions::range_kernel(c.func.name).is_none() {
        return false;
    }
    let Expr::MatrixSelector(ms) = c.args[0].unwrap_parens() else { return false };
    !ms.vs.anchored
        && !ms.vs.smoothed
        && ms.vs.matchers.iter().any(|m| m.name == "__name__" && m.op == tessera_model::MatchOp::Equal)
}

/// Whether a range function's per-series stage runs fused in the shards (a plain matrix selector
/// argument, the fused path of [`super::functions`]).
fn fused_range_call(c: &Call) -> bool {
    super::functions::range_kernel(c.func.name).is_some()
        && c.args.iter().any(|a| matches!(a.unwrap_parens(), Expr::MatrixSelector(ms) if !ms.vs.anchored && !ms.vs.smoothed))
}

/// The pushdown an aggregation gets, if any.
fn decide(a: &AggregateExpr, opts: &EngineOptions) -> Option<Pushdown> {
    if a.param.is_some() || !opts.aggregation_pushdown {
        return None;
    }
    if matches!(a.op, AggregateOp::Avg | AggregateOp::Stddev | AggregateOp::Stdvar) {
        return match a.expr.unwrap_parens() {
            Expr::Call(c) if pushable_range_call(c) => Some(Pushdown::OrderedRangeFunction),
            Expr::VectorSelector(vs) if !vs.smoothed => Some(Pushdown::OrderedSelector),
            _ => None,
        };
    }
    if !is_decomposable(a.op) {
        return None;
    }
    match a.expr.unwrap_parens() {
        Expr::VectorSelector(vs) if !vs.smoothed => Some(Pushdown::Selector),
        Expr::Call(c) if pushable_range_call(c) => Some(Pushdown::RangeFunction),
        _ => None,
    }
}

/// Plans `expr` (already resolved: durations and query-context functions folded), each node described
/// (its `op` and `expr` text) for [`Plan::explain`].
pub fn plan(expr: &Expr, opts: &EngineOptions) -> Plan {
    plan_for(expr, opts, true)
}

/// [`plan`]; without `describe` the nodes' texts stay empty (printing every node of every query would
/// cost a point query more than its plan is worth when nobody asked for the trace).
pub(crate) fn plan_for(expr: &Expr, opts: &EngineOptions, describe: bool) -> Plan {
    let mut pushdowns = HashMap::new();
    let root = node(expr, opts, &mut pushdowns, false, describe);
    Plan { root, pushdowns }
}

fn selector_op(vs: &VectorSelector) -> String {
    if vs.smoothed { "selector (smoothed)".into() } else { "selector".into() }
}

fn agg_op(a: &AggregateExpr) -> String {
    let mut s = a.op.as_str().to_string();
    if a.without {
        s.push_str(&format!(" without ({})", a.grouping.join(", ")));
    } else if !a.grouping.is_empty() {
        s.push_str(&format!(" by ({})", a.grouping.join(", ")));
    }
    s
}

fn node(e: &Expr, opts: &EngineOptions, pd: &mut HashMap<usize, Pushdown>, fused: bool, describe: bool) -> PlanNode {
    let mk = |op: String, placement: Placement, children: Vec<PlanNode>| PlanNode {
        id: addr(e),
        op: if describe { op } else { String::new() },
        expr: if describe { e.to_string() } else { String::new() },
        placement: if fused { Placement::Fused } else { placement },
        children,
        agg_id: if let Expr::Aggregate(a) = e { addr(a) } else { 0 },
    };
    match e {
        Expr::NumberLiteral(_) => mk("number".into(), Placement::Central, vec![]),
        Expr::StringLiteral(_) => mk("string".into(), Placement::Central, vec![]),
        Expr::VectorSelector(vs) => mk(selector_op(vs), Placement::Shards, vec![]),
        Expr::MatrixSelector(ms) => {
            mk(format!("range selector [{}]", crate::parser::format_duration_ms(ms.range_ms)), Placement::Shards, vec![])
        }
        Expr::Subquery(sq) => mk(
            format!("subquery [{}:{}]", crate::parser::format_duration_ms(sq.range_ms), if sq.step_ms > 0 { crate::parser::format_duration_ms(sq.step_ms) } else { String::new() }),
            Placement::Central,
            vec![node(&sq.expr, opts, pd, false, describe)],
        ),
        Expr::Call(c) => {
            let inner_fused = fused_range_call(c);
            let children = c
                .args
                .iter()
                .map(|a| {
                    let is_ms = matches!(a.unwrap_parens(), Expr::MatrixSelector(_));
                    node(a, opts, pd, fused || (inner_fused && is_ms), describe)
                })
                .collect();
            mk(c.func.name.to_string(), if inner_fused { Placement::Shards } else { Placement::Central }, children)
        }
        Expr::Aggregate(a) => {
            let d = decide(a, opts);
            if let Some(d) = d {
                pd.insert(addr(a), d);
            }
            let mut children = vec![node(&a.expr, opts, pd, fused || d.is_some(), describe)];
            if let Some(p) = &a.param {
                children.insert(0, node(p, opts, pd, fused, describe));
            }
            let placement = match d {
                Some(Pushdown::OrderedRangeFunction | Pushdown::OrderedSelector) => Placement::ShardsThenOrderedFold,
                Some(_) => Placement::ShardsThenMerge,
                None => Placement::Central,
            };
            mk(agg_op(a), placement, children)
        }
        Expr::Binary(b) => mk(
            b.op.as_str().to_string(),
            Placement::Central,
            vec![node(&b.lhs, opts, pd, fused, describe), node(&b.rhs, opts, pd, fused, describe)],
        ),
        Expr::Unary(u) => mk(format!("unary {}", if u.op == crate::parser::UnaryOp::Neg { "-" } else { "+" }), Placement::Central, vec![node(&u.expr, opts, pd, fused, describe)]),
        Expr::Paren(p) => node(&p.expr, opts, pd, fused, describe),
    }
}

impl Plan {
    /// The pushdown decided for this aggregation node, if any.
    pub fn pushdown(&self, a: &AggregateExpr) -> Option<Pushdown> {
        self.pushdowns.get(&addr(a)).copied()
    }

    /// The plan with the trace's figures, as a tree (`trace=1`).
    pub fn explain(&self, trace: &Trace) -> TraceNode {
        explain_node(&self.root, trace)
    }
}

fn explain_node(n: &PlanNode, trace: &Trace) -> TraceNode {
    let rec = trace.records.get(&n.id).cloned().unwrap_or_default();
    TraceNode {
        op: n.op.clone(),
        expr: n.expr.clone(),
        placement: if n.agg_id != 0 && trace.fallbacks.contains(&n.agg_id) {
            "central (fell back at run time)"
        } else {
            n.placement.as_str()
        },
        evaluated: rec.calls > 0,
        duration: rec.duration,
        series_out: rec.series_out,
        series_touched: rec.series_touched,
        chunks: rec.chunks,
        samples_decoded: rec.samples_decoded,
        children: n.children.iter().map(|c| explain_node(c, trace)).collect(),
    }
}

/// What the evaluator measured for one node (inclusive of its children's work).
#[derive(Debug, Clone, Default)]
pub struct NodeRecord {
    /// Times the node was evaluated (a subquery's inner expression once per subquery evaluation).
    pub calls: u64,
    pub duration: Duration,
    pub series_out: u64,
    pub series_touched: u64,
    pub chunks: u64,
    pub samples_decoded: u64,
}

/// The records of one traced query, by node.
#[derive(Debug, Default)]
pub struct Trace {
    pub records: HashMap<usize, NodeRecord>,
    /// Pushed-down aggregations (by address) that fell back to central evaluation.
    pub fallbacks: std::collections::HashSet<usize>,
}

/// One node of the explained plan.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceNode {
    pub op: String,
    pub expr: String,
    pub placement: &'static str,
    /// False for nodes fused into a parent (their work is counted in the parent's figures).
    pub evaluated: bool,
    pub duration: Duration,
    pub series_out: u64,
    pub series_touched: u64,
    pub chunks: u64,
    pub samples_decoded: u64,
    pub children: Vec<TraceNode>,
}

impl TraceNode {
    /// The node and its children as JSON (the API's `trace` field).
    pub fn write_json(&self, out: &mut String) {
        use std::fmt::Write;
        out.push_str("{\"op\":");
        json_str(out, &self.op);
        out.push_str(",\"expr\":");
        json_str(out, &self.expr);
        out.push_str(",\"placement\":");
        json_str(out, self.placement);
        if self.evaluated {
            let _ = write!(
                out,
                ",\"duration_ms\":{:.3},\"series_out\":{},\"series_touched\":{},\"chunks\":{},\"samples_decoded\":{}",
                self.duration.as_secs_f64() * 1000.0,
                self.series_out,
                self.series_touched,
                self.chunks,
                self.samples_decoded
            );
        }
        out.push_str(",\"children\":[");
        for (i, c) in self.children.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            c.write_json(out);
        }
        out.push_str("]}");
    }
}

fn json_str(out: &mut String, s: &str) {
    use std::fmt::Write;
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
