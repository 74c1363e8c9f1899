//! Binary operators (upstream `evaluator.VectorBinop`, `VectorscalarBinop`, `VectorAnd/Or/Unless`,
//! `scalarBinop`, `vectorElemBinop`, `resultMetric`).
//!
//! Matching is column-wise: every series' match signature is hashed once and mapped to a dense id; the
//! per-step loops then work on id-indexed arrays stamped with the step number (no maps on the hot path).

use super::EngineError;
use super::eval::{Grid, QueryCtx, Series, Val, eval};
use std::sync::Arc;
use tessera_model::FloatHistogram;
use crate::parser::{BinaryExpr, BinaryOp, VectorMatchCardinality, VectorMatching};
use std::collections::HashMap;
use tessera_model::{Labels, LabelsBuilder};

/// Upstream `vectorElemBinop` for floats: the value and whether a comparison keeps the sample.
#[inline]
pub fn elem_binop(op: BinaryOp, l: f64, r: f64) -> (f64, bool) {
    match op {
        BinaryOp::Add => (l + r, true),
        BinaryOp::Sub => (l - r, true),
        BinaryOp::Mul => (l * r, true),
        BinaryOp::Div => (l / r, true),
        BinaryOp::Pow => (go_pow(l, r), true),
        BinaryOp::Mod => (l % r, true),
        BinaryOp::Atan2 => (l.atan2(r), true),
        BinaryOp::Eql => (l, l == r),
        BinaryOp::Neq => (l, l != r),
        BinaryOp::Gtr => (l, l > r),
        BinaryOp::Lss => (l, l < r),
        BinaryOp::Gte => (l, l >= r),
        BinaryOp::Lte => (l, l <= r),
        _ => (f64::NAN, false),
    }
}

/// Upstream `vectorElemBinop` when a histogram is involved: `Err(())` drops the pair (upstream returns
/// an error or an info there and the pair yields nothing, even with `bool`; the annotation is added
/// here); otherwise the float result, the histogram result and whether a comparison keeps it.
fn elem_binop_h(
    ctx: &QueryCtx<'_>,
    op: BinaryOp,
    lf: f64,
    rf: f64,
    lh: Option<&Arc<FloatHistogram>>,
    rh: Option<&Arc<FloatHistogram>>,
) -> Result<(f64, Option<Arc<FloatHistogram>>, bool), ()> {
    use super::hist::{self as h, math};
    let name = op.as_str();
    let incompatible = |l: &str, r: &str| {
        ctx.info(h::incompatible_types_in_binop_info(l, name, r));
        Err(())
    };
    let scaled = |x: &FloatHistogram, f: f64, div: bool| -> Result<(f64, Option<Arc<FloatHistogram>>, bool), ()> {
        let mut r = x.clone();
        let ok = if div { math::div(&mut r, f) } else { math::mul(&mut r, f) };
        ok.and_then(|_| math::compact(&mut r)).map_err(|_| ())?;
        Ok((0.0, Some(Arc::new(r)), true))
    };
    let trim = is_trim(op);
    match (lh, rh) {
        (None, None) if trim => incompatible("float", "float"),
        (None, None) => {
            let (v, keep) = elem_binop(op, lf, rf);
            Ok((v, None, keep))
        }
        (None, Some(r)) => match op {
            BinaryOp::Mul => scaled(r, lf, false),
            _ => incompatible("float", "histogram"),
        },
        (Some(l), None) => match op {
            BinaryOp::Mul => scaled(l, rf, false),
            BinaryOp::Div => scaled(l, rf, true),
            // `TrimBuckets` (upstream copies first: the input may be shared).
            BinaryOp::TrimUpper | BinaryOp::TrimLower => {
                let mut r = (**l).clone();
                math::trim_buckets(&mut r, rf, op == BinaryOp::TrimUpper);
                Ok((0.0, Some(Arc::new(r)), true))
            }
            _ => incompatible("histogram", "float"),
        },
        (Some(l), Some(r)) => match op {
            BinaryOp::Add | BinaryOp::Sub => {
                let mut res = (**l).clone();
                let sub = op == BinaryOp::Sub;
                let what = if sub { "subtraction" } else { "addition" };
                let got = if sub { math::sub(&mut res, r) } else { math::add(&mut res, r) };
                match got {
                    Ok(i) => {
                        if sub {
                            res.counter_reset_hint = tessera_model::histogram::CounterResetHint::Gauge;
                        }
                        if i.counter_reset_collision {
                            ctx.warn(h::counter_reset_collision_warning(what));
                        }
                        if i.nhcb_bounds_reconciled {
                            ctx.info(h::mismatched_custom_buckets_info(what));
                        }
                        math::compact(&mut res).map_err(|_| ())?;
                        Ok((0.0, Some(Arc::new(res)), true))
                    }
                    // Upstream `handleVectorBinopError`.
                    Err(math::HistOpError::IncompatibleSchema) => {
                        ctx.warn(h::incompatible_bucket_layout_in_binop_warning(name));
                        Err(())
                    }
                    Err(_) => Err(()),
                }
            }
            BinaryOp::Eql | BinaryOp::Neq => {
                let eq = math::equals(l, r).ok_or(())?;
                Ok((0.0, Some(l.clone()), eq == (op == BinaryOp::Eql)))
            }
            _ => incompatible("histogram", "histogram"),
        },
    }
}

/// Go's `math.Pow` differs from IEEE `pow` in a few special cases (e.g. `Pow(-1, ±Inf) = 1`, as IEEE).
fn go_pow(l: f64, r: f64) -> f64 {
    l.powf(r)
}

/// The native-histogram trim operators `</` and `>/`.
fn is_trim(op: BinaryOp) -> bool {
    matches!(op, BinaryOp::TrimUpper | BinaryOp::TrimLower)
}

/// Upstream `changesMetricSchema`: the operators whose result drops the metric name (the trim
/// operators keep it).
fn is_arith(op: BinaryOp) -> bool {
    !op.is_comparison() && !op.is_set_operator() && !is_trim(op)
}

pub fn eval_binary(ctx: &QueryCtx<'_>, b: &BinaryExpr, grid: &Grid) -> Result<Val, EngineError> {
    let lhs = eval(ctx, &b.lhs, grid)?;
    let rhs = eval(ctx, &b.rhs, grid)?;
    let op = b.op;
    match (lhs, rhs) {
        (Val::Scalar(l), Val::Scalar(r)) => Ok(Val::Scalar(
            l.iter()
                .zip(&r)
                .map(|(a, c)| {
                    let (v, keep) = elem_binop(op, *a, *c);
                    if op.is_comparison() { if keep { 1.0 } else { 0.0 } } else { v }
                })
                .collect(),
        )),
        (Val::Vector(v), Val::Scalar(s)) => Ok(Val::Vector(vector_scalar(ctx, op, v, &s, false, b.return_bool))),
        (Val::Scalar(s), Val::Vector(v)) => Ok(Val::Vector(vector_scalar(ctx, op, v, &s, true, b.return_bool))),
        (Val::Vector(l), Val::Vector(r)) => {
            let default_matching = VectorMatching {
                card: if op.is_set_operator() { VectorMatchCardinality::ManyToMany } else { VectorMatchCardinality::OneToOne },
                matching_labels: vec![],
                on: false,
                include: vec![],
                fill_lhs: None,
                fill_rhs: None,
            };
            let m = b.matching.as_ref().unwrap_or(&default_matching);
            match op {
                BinaryOp::And | BinaryOp::Or | BinaryOp::Unless => Ok(Val::Vector(set_op(ctx, op, l, r, m, grid.n)?)),
                _ => Ok(Val::Vector(vector_vector(ctx, op, l, r, m, b.return_bool, grid.n)?)),
            }
        }
        _ => Err(EngineError::Execution(format!("binary operator {} on unsupported operand types", op.as_str()))),
    }
}

/// Upstream `VectorscalarBinop`. `swap`: the scalar is on the left.
fn vector_scalar(
    ctx: &QueryCtx<'_>,
    op: BinaryOp,
    mut v: Vec<Series>,
    s: &[f64],
    swap: bool,
    return_bool: bool,
) -> Vec<Series> {
    let drop = is_arith(op) || return_bool;
    for ser in &mut v {
        for (i, x) in ser.vals.iter_mut().enumerate() {
            let Some(val) = *x else { continue };
            if is_trim(op) {
                // Upstream `vectorElemBinop`: trimming a float is an incompatible pair.
                ctx.info(super::hist::incompatible_types_in_binop_info("float", op.as_str(), "float"));
                *x = None;
                continue;
            }
            let (l, r) = if swap { (s[i], val) } else { (val, s[i]) };
            let (mut res, keep) = elem_binop(op, l, r);
            if op.is_comparison() && swap {
                res = val;
            }
            *x = if return_bool {
                Some(if keep { 1.0 } else { 0.0 })
            } else if keep {
                Some(res)
            } else {
                None
            };
        }
        if let Some(hs) = ser.hists.take() {
            // Upstream `VectorscalarBinop` with `vectorElemBinop`'s histogram cases (histogram steps
            // have no float, so the loop above left them alone).
            let mut out_h = vec![None; hs.len()];
            for (i, h) in hs.iter().enumerate() {
                let Some(h) = h else { continue };
                let (lh, rh) = if swap { (None, Some(h)) } else { (Some(h), None) };
                let Ok((_, mut res_h, keep)) = elem_binop_h(ctx, op, s[i], s[i], lh, rh) else { continue };
                if op.is_comparison() && swap {
                    res_h = Some(h.clone());
                }
                if return_bool {
                    ser.vals[i] = Some(if keep { 1.0 } else { 0.0 });
                } else if keep {
                    out_h[i] = res_h;
                }
            }
            ser.hists = Some(out_h);
        }
        if drop {
            ser.drop_name = true;
        }
        ser.tidy();
    }
    v.retain(|s| s.any_value());
    v
}

/// The match signature of a series (upstream `signatureFunc`): the `on` labels, or all labels but the
/// `ignoring` ones and `__name__`.
fn signature(l: &Labels, m: &VectorMatching) -> u64 {
    // One-shot xxh3 over the matching pairs (see `aggregate::group_hash`).
    tessera_model::labels::hash_pairs_iter(
        l.iter()
            .filter(|lb| {
                if m.on {
                    m.matching_labels.iter().any(|g| g == lb.name)
                } else {
                    lb.name != "__name__" && !m.matching_labels.iter().any(|g| g == lb.name)
                }
            })
            .map(|lb| (lb.name, lb.value)),
    )
}

fn match_labels(l: &Labels, m: &VectorMatching) -> Labels {
    if m.on {
        l.keep(&m.matching_labels)
    } else {
        let mut names = m.matching_labels.clone();
        names.push("__name__".into());
        l.drop_names(&names)
    }
}

/// Dense ids for the signatures of both sides.
fn sig_ids(l: &[Series], r: &[Series], m: &VectorMatching) -> (Vec<usize>, Vec<usize>, usize) {
    let mut ids: HashMap<u64, usize> = HashMap::new();
    let mut id = |s: &Series| {
        let n = ids.len();
        *ids.entry(signature(&s.labels, m)).or_insert(n)
    };
    let li: Vec<usize> = l.iter().map(&mut id).collect();
    let ri: Vec<usize> = r.iter().map(&mut id).collect();
    let n = ids.len();
    (li, ri, n)
}

/// Upstream `VectorAnd`, `VectorOr`, `VectorUnless`.
fn set_op(
    ctx: &QueryCtx<'_>,
    op: BinaryOp,
    l: Vec<Series>,
    r: Vec<Series>,
    m: &VectorMatching,
    steps: usize,
) -> Result<Vec<Series>, EngineError> {
    let (li, ri, nsig) = sig_ids(&l, &r, m);
    // present[sig] == step+1 when a series with that signature has a sample at the step.
    let mut present = vec![0usize; nsig];
    let mut out_l = l;
    let mut out_r = r;
    for i in 0..steps {
        if i % 1024 == 0 {
            ctx.check()?;
        }
        let stamp = i + 1;
        match op {
            BinaryOp::And | BinaryOp::Unless => {
                for (s, &sid) in out_r.iter().zip(&ri) {
                    if s.has(i) {
                        present[sid] = stamp;
                    }
                }
                for (s, &sid) in out_l.iter_mut().zip(&li) {
                    let hit = present[sid] == stamp;
                    if (op == BinaryOp::And) != hit {
                        clear_step(s, i);
                    }
                }
            }
            _ => {
                for (s, &sid) in out_l.iter().zip(&li) {
                    if s.has(i) {
                        present[sid] = stamp;
                    }
                }
                for (s, &sid) in out_r.iter_mut().zip(&ri) {
                    if present[sid] == stamp {
                        clear_step(s, i);
                    }
                }
            }
        }
    }
    if op == BinaryOp::Or {
        out_l.extend(out_r);
    }
    for s in &mut out_l {
        s.tidy();
    }
    out_l.retain(|s| s.any_value());
    Ok(out_l)
}

/// Removes step `i`'s value, float or histogram.
#[inline]
fn clear_step(s: &mut Series, i: usize) {
    s.vals[i] = None;
    if let Some(h) = &mut s.hists {
        h[i] = None;
    }
}

/// Upstream `resultMetric`: the "many" side's labels; without `__name__`, `__type__` and `__unit__` when
/// `drop_name` (an arithmetic operator, or `bool` without delayed name removal); only the `on` labels or
/// without the `ignoring` ones for one-to-one matching; then the `group_x` labels copied from the "one"
/// side, *after* the name went: `a * on() group_right(__name__) b` keeps `a`'s name.
fn result_labels(many: &Labels, one: &Labels, m: &VectorMatching, drop_name: bool) -> Labels {
    let mut b = LabelsBuilder::from_labels(many);
    if drop_name {
        for n in ["__name__", "__type__", "__unit__"] {
            b.del(n);
        }
    }
    if m.card == VectorMatchCardinality::OneToOne {
        if m.on {
            let keep: Vec<tessera_model::LabelStr> = many
                .iter()
                .filter(|l| !m.matching_labels.iter().any(|g| g == l.name))
                .map(|l| l.name.into())
                .collect();
            for n in keep {
                b.del(&n);
            }
        } else {
            for n in &m.matching_labels {
                b.del(n);
            }
        }
    }
    for n in &m.include {
        let v = one.get(n);
        if v.is_empty() {
            b.del(n);
        } else {
            b.set(n.clone(), v.to_string());
        }
    }
    b.build()
}

/// Upstream `VectorBinop` for arithmetic and comparison operators, all steps at once.
fn vector_vector(
    ctx: &QueryCtx<'_>,
    op: BinaryOp,
    l: Vec<Series>,
    r: Vec<Series>,
    m: &VectorMatching,
    return_bool: bool,
    steps: usize,
) -> Result<Vec<Series>, EngineError> {
    let swapped = m.card == VectorMatchCardinality::OneToMany;
    let (many, one) = if swapped { (&r, &l) } else { (&l, &r) };
    let (mi, oi, nsig) = sig_ids(many, one, m);
    // Upstream `VectorBinop`: `resultMetric` removes the name at once for arithmetic (whatever the
    // delayed-removal setting) and for `bool` without delayed removal; with delayed removal, a `bool`
    // result is marked (`DropName: returnBool`) and loses its name when the query ends, even one a
    // `group_x` copied.
    let delayed = ctx.opts.delayed_name_removal;
    let name_now = is_arith(op) || (return_bool && !delayed);
    let name_later = return_bool && delayed;
    // Per step: which `one`-side series holds each signature; which signatures were matched (one-to-one).
    let mut one_at = vec![(0usize, 0usize); nsig];
    let mut matched = vec![0usize; nsig];
    let mut many_at = vec![(0usize, 0usize); nsig];
    let mut out: Vec<Series> = Vec::new();
    let mut out_idx: HashMap<Labels, usize> = HashMap::new();
    let mut pair_out: HashMap<(usize, usize), usize> = HashMap::new();
    // Upstream applies the fill modifiers after swapping sides for group_right: `fill_left` fills the
    // "many" side and `fill_right` the "one" side, whichever operand they are.
    let (fill_many, fill_one) = (m.fill_lhs, m.fill_rhs);
    // The output series each "many" series went to last, with the partner it had (`pair_out`'s key
    // and value): a pair mostly stays the same from step to step, so most steps find their output here
    // instead of hashing the pair again (hashing took ~7% of the CPU of `1 - a / b` over 424 series).
    // A "one" series filled in for a missing "many" one always goes to the same output: `fill_out`.
    let mut last_out: Vec<(usize, usize)> = vec![(usize::MAX, 0); many.len()];
    let mut fill_out: Vec<Option<usize>> = vec![None; if fill_many.is_some() { one.len() } else { 0 }];
    let one_side = if swapped { "left" } else { "right" };
    for i in 0..steps {
        if i % 1024 == 0 {
            ctx.check()?;
        }
        let stamp = i + 1;
        // Upstream `VectorBinop` short-circuits a step where a side is empty (both, when a fill
        // modifier is given) before any duplicate check: `nonexistent * on() up` is empty, not an error.
        let (many_any, one_any) = (many.iter().any(|s| s.has(i)), one.iter().any(|s| s.has(i)));
        if (!many_any && !one_any) || ((!many_any || !one_any) && fill_many.is_none() && fill_one.is_none()) {
            continue;
        }
        for (j, (s, &sid)) in one.iter().zip(&oi).enumerate() {
            if !s.has(i) {
                continue;
            }
            if one_at[sid].0 == stamp {
                let prev = &one[one_at[sid].1];
                // Upstream `VectorBinop` names the series it is at, then the one it met first.
                let (d1, d2) = (s.labels.to_string(), prev.labels.to_string());
                return Err(EngineError::Execution(format!(
                    "found duplicate series for the match group {} on the {one_side} hand-side of the operation: [{d1}, {d2}];many-to-many matching not allowed: matching labels must be unique on one side",
                    match_labels(&s.labels, m),
                )));
            }
            one_at[sid] = (stamp, j);
        }
        if fill_many.is_some() {
            for (k, (s, &sid)) in many.iter().zip(&mi).enumerate() {
                if s.has(i) {
                    many_at[sid] = (stamp, k);
                }
            }
        }
        for (k, (s, &sid)) in many.iter().zip(&mi).enumerate() {
            let mh = s.hist(i);
            let mv = match s.vals[i] {
                Some(v) => v,
                None if mh.is_some() => 0.0,
                None => continue,
            };
            let (ov, oh, j) = if one_at[sid].0 == stamp {
                let j = one_at[sid].1;
                (one[j].vals[i].unwrap_or(0.0), one[j].hist(i), Some(j))
            } else if let Some(f) = fill_one {
                (f, None, None)
            } else {
                continue;
            };
            let (lv, rv) = if swapped { (ov, mv) } else { (mv, ov) };
            let (v, h, keep) = if mh.is_none() && oh.is_none() && !is_trim(op) {
                let (v, keep) = elem_binop(op, lv, rv);
                (v, None, keep)
            } else {
                // Upstream `VectorBinop`: a pair `vectorElemBinop` refuses yields nothing at all.
                let (lh, rh) = if swapped { (oh, mh) } else { (mh, oh) };
                match elem_binop_h(ctx, op, lv, rv, lh, rh) {
                    Ok(r) => r,
                    Err(()) => continue,
                }
            };
            // Upstream checks one-to-one uniqueness before a comparison filters the sample out.
            if m.card == VectorMatchCardinality::OneToOne && j.is_some() {
                if matched[sid] == stamp {
                    return Err(EngineError::Execution(
                        "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)".into(),
                    ));
                }
                matched[sid] = stamp;
            }
            let (v, h) = if return_bool {
                (if keep { 1.0 } else { 0.0 }, None)
            } else if keep {
                (v, h)
            } else {
                continue;
            };
            let key = (k, j.map(|j| j + 1).unwrap_or(0));
            let o = match (last_out[k].0 == key.1).then_some(last_out[k].1).or_else(|| pair_out.get(&key).copied()) {
                Some(o) => o,
                None => {
                    // A filled-in "one" side carries the "many" series' match-group labels (upstream
                    // `VectorBinop`: `ls.Metric.MatchLabels(...)`), which `group_x` labels may copy.
                    let lbls = match j {
                        Some(j) => result_labels(&s.labels, &one[j].labels, m, name_now),
                        None => result_labels(&s.labels, &match_labels(&s.labels, m), m, name_now),
                    };
                    let o = *out_idx.entry(lbls.clone()).or_insert_with(|| {
                        out.push(Series { hists: None, labels: lbls, vals: vec![None; steps], drop_name: false });
                        out.len() - 1
                    });
                    pair_out.insert(key, o);
                    o
                }
            };
            last_out[k] = (key.1, o);
            if out[o].has(i) {
                return Err(EngineError::Execution(if m.card == VectorMatchCardinality::OneToOne {
                    "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)".into()
                } else {
                    "multiple matches for labels: grouping labels must ensure unique matches".into()
                }));
            }
            match h {
                Some(h) => out[o].hists.get_or_insert_with(|| vec![None; steps])[i] = Some(h),
                None => out[o].vals[i] = Some(v),
            }
            // Upstream's result sample is `DropName: returnBool`, whatever its inputs were marked.
            out[o].drop_name |= name_later;
        }
        // fill for the "many" side: one-side series without a partner.
        if let Some(f) = fill_many {
            for (j, (s, &sid)) in one.iter().zip(&oi).enumerate() {
                let oh = s.hist(i);
                let ov = match s.vals[i] {
                    Some(v) => v,
                    None if oh.is_some() => 0.0,
                    None => continue,
                };
                if many_at[sid].0 == stamp {
                    continue;
                }
                let (lv, rv) = if swapped { (ov, f) } else { (f, ov) };
                let (v, h, keep) = if oh.is_none() && !is_trim(op) {
                    let (v, keep) = elem_binop(op, lv, rv);
                    (v, None, keep)
                } else {
                    let (lh, rh) = if swapped { (oh, None) } else { (None, oh) };
                    match elem_binop_h(ctx, op, lv, rv, lh, rh) {
                        Ok(r) => r,
                        Err(()) => continue,
                    }
                };
                let (v, h) = if return_bool {
                    (if keep { 1.0 } else { 0.0 }, None)
                } else if keep {
                    (v, h)
                } else {
                    continue;
                };
                let o = match fill_out[j] {
                    Some(o) => o,
                    None => {
                        // A filled-in "many" side has no labels of its own but the match-group labels
                        // of the present side (upstream `VectorBinop`: `rs.Metric.MatchLabels(...)`), then
                        // `resultMetric` as for any pair.
                        let lbls = result_labels(&match_labels(&s.labels, m), &s.labels, m, name_now);
                        let o = *out_idx.entry(lbls.clone()).or_insert_with(|| {
                            out.push(Series { hists: None, labels: lbls, vals: vec![None; steps], drop_name: false });
                            out.len() - 1
                        });
                        fill_out[j] = Some(o);
                        o
                    }
                };
                if out[o].has(i) {
                    return Err(EngineError::Execution(
                        "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)".into(),
                    ));
                }
                match h {
                    Some(h) => out[o].hists.get_or_insert_with(|| vec![None; steps])[i] = Some(h),
                    None => out[o].vals[i] = Some(v),
                }
                out[o].drop_name |= name_later;
            }
        }
    }
    Ok(out)
}
