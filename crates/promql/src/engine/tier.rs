//! Evaluating from a downsampling tier (DESIGN.md's tier choice): which tier a query reads
//! ([`choose`]), and the selectors and range functions computed from buckets instead of samples.
//!
//! # Choice
//! A range query in the default mode reads the coarsest tier whose resolution `R` fits its step
//! (`R <= step` and `step` a multiple of `R`); tiers are configured so that coarser tiers are kept at
//! least as long as finer ones, so the coarsest fitting tier also reaches furthest back. Instant queries
//! read raw data. A request may force raw data or a named tier ([`TierRequest`]). The choice depends on
//! the request, the step and the configuration only, so the result cache can key on it. Steps reaching
//! back past the chosen source's data (raw retention, a tier's retention) read another tier that still
//! holds them ([`past_raw`]); which steps those are follows the storage's retention, whose drops the
//! result cache hears of as changes.
//!
//! # Exact where the windows fall on buckets
//! A window `(a, b]` with `a` and `b` multiples of `R` is exactly a run of bucket records (see
//! `tessera_encoding::buckets`), and the records' aggregates answer these functions exactly (up to the
//! order of floating-point additions): `rate`, `increase`, `delta`, `irate`, `idelta`, `changes`,
//! `resets`, `count_`, `sum_`, `avg_`, `min_`, `max_`, `last_`, `first_`, `present_over_time`,
//! `ts_of_first_over_time`, `ts_of_last_over_time`, and instant selectors (the lookback picks the last
//! raw sample of the window, stale or not). Windows that do not fall on buckets are widened to the
//! whole buckets that end at or before the window's end and reach back at least as far as it starts;
//! the other range functions (quantiles, deviations, regressions, smoothing) see two samples per bucket
//! record (its first and last). Such answers carry an info annotation; exact ones say nothing.
//!
//! Native histograms (`tessera_encoding::hbuckets`): the same functions and selectors, from each window's
//! histogram aggregate beside its float one, mirroring `hist::range_window` (mixes of floats and
//! histograms included), exact when the window's histograms share one layout ([`HAgg::clean`]);
//! other windows are approximated from each record's first and last histogram, annotated.
//!
//! Not from tiers: start timestamps (`use-start-timestamps`), anchored and smoothed
//! selectors, range vectors returned as such or handed to other functions (`absent_over_time`, …) —
//! those read the raw data.

use super::eval::{Grid, HPoint, HistCol, QueryCtx, Series, Val};
use super::functions::{extrapolate, instant_from, range_kernel, Window};
use super::hist::{self, HOut};
use super::EngineError;
use crate::parser::{MatrixSelector, VectorSelector};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tessera_encoding::buckets::{bucket_of, col, decode_bucket_cols_into, Agg, Bucket, Cols};
use tessera_encoding::hbuckets::{decode_hbuckets_into, HAgg, HBucket};
use tessera_model::histogram::CounterResetHint;
use tessera_model::{ChunkEncoding, Labels, Queryable, Sample, SelectHints};

/// What a request asks of the tiers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum TierRequest {
    /// The coarsest tier that fits the step (range queries), raw data for instant queries.
    #[default]
    Auto,
    /// Raw samples only.
    Raw,
    /// The tier of this resolution, ms.
    Resolution(i64),
}

/// The tier a query at `step_ms` (0: instant) reads, `None` for raw data.
pub fn choose(q: &dyn Queryable, req: TierRequest, step_ms: i64) -> Result<Option<i64>, EngineError> {
    match req {
        TierRequest::Raw => Ok(None),
        TierRequest::Resolution(r) => {
            let tiers = q.tiers();
            if tiers.iter().any(|t| t.resolution_ms == r) {
                Ok(Some(r))
            } else {
                let have: Vec<String> = tiers.iter().map(|t| fmt_res(t.resolution_ms)).collect();
                Err(EngineError::BadData(format!(
                    "no downsampling tier with resolution {} (tiers: {})",
                    fmt_res(r),
                    if have.is_empty() { "none".to_string() } else { have.join(", ") }
                )))
            }
        }
        TierRequest::Auto => {
            if step_ms <= 0 {
                return Ok(None);
            }
            Ok(q.tiers().iter().filter(|t| t.resolution_ms <= step_ms && step_ms % t.resolution_ms == 0).map(|t| t.resolution_ms).max())
        }
    }
}

/// Where a range query in the default mode reaches back past the data of the source [`choose`] gave it
/// (`chosen`: raw data, or the tier fitting its step): raw retention has dropped the samples of its first
/// steps — and the chosen tier's own retention its buckets —, which other tiers still hold. A step whose
/// window (the expression's dependency window, as the result cache computes it) begins late enough for
/// the chosen source to answer it whole (raw data: at or after the raw horizon; a tier: at least a bucket
/// after the first whole bucket of its data — its oldest bucket or the raw horizon, whichever is older —
/// since a window inside one bucket reads the bucket before) reads that source; an older one reads the
/// finest tier that answers it whole, or, before all of them, the tier reaching furthest back. A step's
/// source depends on its time and the storage only, not on the query's start, so the result cache's runs
/// agree with a whole evaluation. Returns the steps as runs `(first, last, source)` (`None`: raw data) in
/// time order, or `None` when every step reads the chosen source: the windows all lie within its data,
/// no tier holds anything older, or the windows cannot be told per step (`@`, `start()`, non-constant
/// durations). Answers from a tier that does not fit the step are approximations and say so as any tier
/// answer does.
pub fn past_raw(
    q: &dyn Queryable,
    chosen: Option<i64>,
    expr: &crate::parser::Expr,
    start_ms: i64,
    end_ms: i64,
    step_ms: i64,
    lookback_ms: i64,
) -> Option<Vec<(i64, i64, Option<i64>)>> {
    if step_ms <= 0 || end_ms < start_ms {
        return None;
    }
    let h = q.raw_horizon()?;
    let w = crate::cache::dependency_window(expr, lookback_ms).ok()??;
    // Per tier, finest first: the oldest time it has data for (its buckets, or raw data it buckets on the
    // fly), and the earliest window start it answers whole from: a window reads buckets from the one
    // holding its start, or the one before when the window fits inside one bucket (`bucket_window`),
    // so one bucket after the first whole bucket of its data.
    let reach: Vec<(i64, i64, i64)> = h
        .tiers
        .iter()
        .map(|&(r, m)| {
            let from = m.unwrap_or(i64::MAX).min(h.raw_mint_ms);
            let usable = (i128::from(from).div_euclid(i128::from(r)) + 2) * i128::from(r) - i128::from(r) * i128::from(from.rem_euclid(r) == 0);
            (r, from, i64::try_from(usable).unwrap_or(i64::MAX))
        })
        .collect();
    let horizon = match chosen {
        None => h.raw_mint_ms,
        Some(r) => reach.iter().find(|x| x.0 == r).map_or(h.raw_mint_ms, |x| x.2),
    };
    if start_ms.saturating_sub(w.before) >= horizon {
        return None;
    }
    // The earliest minimum is the finest of those reaching furthest back.
    let furthest = reach.iter().filter(|x| x.1 < h.raw_mint_ms).min_by_key(|x| x.1)?.0;
    let source = |t: i64| {
        let ws = t.saturating_sub(w.before);
        if ws >= horizon {
            return chosen;
        }
        Some(reach.iter().find(|x| x.2 <= ws).map_or(furthest, |x| x.0))
    };
    // A step's source changes only where its window's start crosses the horizon or a tier's oldest
    // bucket: the runs begin at the first steps past those times (no walk over every step).
    let (start, step) = (i128::from(start_ms), i128::from(step_ms));
    let n = (i128::from(end_ms) - start) / step;
    let mut cuts: Vec<i128> = std::iter::once(horizon)
        .chain(reach.iter().map(|x| x.2))
        .map(|b| (i128::from(b) + i128::from(w.before) - start + step - 1).div_euclid(step))
        .filter(|&k| k > 0 && k <= n)
        .collect();
    cuts.push(0);
    cuts.sort_unstable();
    cuts.dedup();
    let mut runs: Vec<(i64, i64, Option<i64>)> = Vec::new();
    for (i, &k) in cuts.iter().enumerate() {
        let last = cuts.get(i + 1).map_or(n, |next| next - 1);
        // On the grid and at most `end_ms`: fits in i64.
        let (t0, t1) = (i64::try_from(start + k * step).ok()?, i64::try_from(start + last * step).ok()?);
        let src = source(t0);
        match runs.last_mut() {
            Some(r) if r.2 == src => r.1 = t1,
            _ => runs.push((t0, t1, src)),
        }
    }
    // Every step from the chosen source after all (a tier reaching no further back than it).
    if runs.len() == 1 && runs[0].2 == chosen {
        return None;
    }
    Some(runs)
}

/// A resolution as a Prometheus duration (`5m`, `1h`, `90s`).
pub fn fmt_res(ms: i64) -> String {
    for (unit, n) in [("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)] {
        if ms >= n && ms % n == 0 {
            return format!("{}{unit}", ms / n);
        }
    }
    format!("{ms}ms")
}

/// The functions a tier answers exactly over windows on bucket boundaries.
fn exact_fn(name: &str) -> bool {
    matches!(
        name,
        "rate"
            | "increase"
            | "delta"
            | "irate"
            | "idelta"
            | "changes"
            | "resets"
            | "count_over_time"
            | "sum_over_time"
            | "avg_over_time"
            | "min_over_time"
            | "max_over_time"
            | "last_over_time"
            | "first_over_time"
            | "present_over_time"
            | "ts_of_first_over_time"
            | "ts_of_last_over_time"
    )
}

/// The bucket columns a range function reads (see `tessera_encoding::buckets::col`); the
/// approximating path reads first and last samples.
fn cols_for(name: &str) -> Cols {
    use col::*;
    let first_last = BASE | T_FIRST | T_LAST | V_LAST;
    match name {
        "rate" | "increase" => first_last | RESETS,
        "delta" => first_last,
        "irate" | "idelta" => first_last | T_PENULT | V_PENULT,
        "changes" => BASE | V_LAST | CHANGES,
        "resets" => BASE | V_LAST | RESETS,
        "count_over_time" | "present_over_time" => SHAPE,
        "sum_over_time" | "avg_over_time" => BASE | SUM,
        "min_over_time" => BASE | MIN,
        "max_over_time" => BASE | V_LAST | MAX,
        "last_over_time" | "first_over_time" => BASE | V_LAST,
        "ts_of_first_over_time" => BASE | T_FIRST,
        _ => first_last,
    }
}

/// Selects the buckets of `vs` in `[mint, maxt]` from tier `r`, every shard in parallel, and maps each
/// series' buckets (ascending, those of the range only) with `f`. Sorted by labels.
#[allow(clippy::too_many_arguments)]
fn select_buckets<T: Send>(
    ctx: &QueryCtx<'_>,
    r: i64,
    vs: &VectorSelector,
    mint: i64,
    maxt: i64,
    step_ms: i64,
    cols: Cols,
    f: impl Fn(&Labels, &[Bucket], &[HBucket]) -> Option<T> + Sync,
) -> Result<Vec<(Labels, T)>, EngineError> {
    let storage = |e: tessera_model::StorageError| EngineError::Execution(e.to_string());
    let q = ctx
        .queryable
        .tier_querier(r, mint, maxt)
        .map_err(storage)?
        .ok_or_else(|| EngineError::Execution(format!("downsampling tier {} is gone", fmt_res(r))))?;
    let hints = SelectHints { step_ms, ..Default::default() };
    let (k0, k1) = (bucket_of(mint, r), bucket_of(maxt, r));
    let per_shard: Vec<Result<Vec<(Labels, T)>, EngineError>> = (0..q.shard_count())
        .into_par_iter()
        .map(|shard| {
            let mut out = Vec::new();
            let mut bs: Vec<Bucket> = Vec::new();
            let mut hbs: Vec<HBucket> = Vec::new();
            for (i, s) in q.select_shard(shard, &vs.matchers, &hints).map_err(storage)?.enumerate() {
                if i % 256 == 255 {
                    ctx.check()?;
                }
                let s = s.map_err(storage)?;
                ctx.stats.series.fetch_add(1, Ordering::Relaxed);
                ctx.stats.chunks.fetch_add(s.chunks.len(), Ordering::Relaxed);
                bs.clear();
                hbs.clear();
                let bad = |e: tessera_encoding::ChunkError| EngineError::Execution(format!("tier chunk of {}: {e}", s.labels));
                // A series with histograms compares float and histogram times: every float column.
                let has_h = s.chunks.iter().any(|c| c.encoding == ChunkEncoding::HistBuckets);
                for c in &s.chunks {
                    match c.encoding {
                        ChunkEncoding::Buckets => {
                            decode_bucket_cols_into(&c.data, if has_h { col::ALL } else { cols }, &mut bs).map_err(bad)?;
                        }
                        ChunkEncoding::HistBuckets => {
                            decode_hbuckets_into(&c.data, &mut hbs).map_err(bad)?;
                        }
                        _ => {}
                    }
                }
                bs.retain(|b| b.k >= k0 && b.k <= k1);
                hbs.retain(|b| b.k >= k0 && b.k <= k1);
                ctx.stats.read.fetch_add(bs.len() + hbs.len(), Ordering::Relaxed);
                if bs.is_empty() && hbs.is_empty() {
                    continue;
                }
                if let Some(t) = f(&s.labels, &bs, &hbs) {
                    out.push((s.labels, t));
                }
            }
            Ok(out)
        })
        .collect();
    let mut all = Vec::new();
    for p in per_shard {
        all.extend(p?);
    }
    all.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(all)
}

/// The bucket window for the PromQL window `(a, b]`: bucket indexes `(lo, hi)` such that the records
/// `body_lo, edge_{lo+1}, body_{lo+1}, …, edge_hi` cover it, and whether that is exact.
fn bucket_window(a: i64, b: i64, r: i64) -> (i64, i64, bool) {
    let exact = a.rem_euclid(r) == 0 && b.rem_euclid(r) == 0;
    let (mut lo, hi) = (bucket_of(a, r), bucket_of(b, r));
    if lo == hi {
        lo = hi - 1;
    }
    (lo, hi, exact)
}

/// A bucket record of either kind, for [`fold`].
trait Record {
    type A: Default;
    fn k(&self) -> i64;
    fn edge(&self) -> &Self::A;
    fn body(&self) -> &Self::A;
    fn merge(acc: &mut Self::A, next: &Self::A);
}

impl Record for Bucket {
    type A = Agg;
    fn k(&self) -> i64 {
        self.k
    }
    fn edge(&self) -> &Agg {
        &self.edge
    }
    fn body(&self) -> &Agg {
        &self.body
    }
    fn merge(acc: &mut Agg, next: &Agg) {
        acc.merge(next);
    }
}

impl Record for HBucket {
    type A = HAgg;
    fn k(&self) -> i64 {
        self.k
    }
    fn edge(&self) -> &HAgg {
        &self.edge
    }
    fn body(&self) -> &HAgg {
        &self.body
    }
    fn merge(acc: &mut HAgg, next: &HAgg) {
        acc.merge(next);
    }
}

/// Folds the records of the window `(lo, hi)` (see [`bucket_window`]) of a series' buckets. `hint`
/// carries the first bucket of the previous window across steps (windows move forward with the steps,
/// so finding the next one costs O(1) amortised; a window further back searches again).
fn fold<B: Record>(bs: &[B], lo: i64, hi: i64, hint: &mut usize) -> B::A {
    let mut from = (*hint).min(bs.len());
    if from > 0 && bs[from - 1].k() >= lo {
        from = bs.partition_point(|b| b.k() < lo);
    } else {
        while from < bs.len() && bs[from].k() < lo {
            from += 1;
        }
    }
    *hint = from;
    let mut acc = B::A::default();
    for b in &bs[from..] {
        if b.k() > hi {
            break;
        }
        if b.k() > lo {
            B::merge(&mut acc, b.edge());
        }
        if b.k() < hi {
            B::merge(&mut acc, b.body());
        }
    }
    acc
}

/// The histograms an approximating kernel sees for a window: each record's first and last.
fn synth_h(hbs: &[HBucket], lo: i64, hi: i64, out: &mut Vec<HPoint>) {
    out.clear();
    let from = hbs.partition_point(|b| b.k < lo);
    for b in &hbs[from..] {
        if b.k > hi {
            break;
        }
        for (a, inc) in [(&b.edge, b.k > lo), (&b.body, b.k < hi)] {
            if inc && a.count > 0 {
                out.push(HPoint { t: a.first_t, h: Arc::new(a.first.clone()) });
                if a.count > 1 {
                    out.push(HPoint { t: a.last_t, h: Arc::new(a.last.clone()) });
                }
            }
        }
    }
}

/// The samples an approximating kernel sees for a window: each record's first and last.
fn synth(bs: &[Bucket], lo: i64, hi: i64, out: &mut Vec<Sample>) {
    out.clear();
    let from = bs.partition_point(|b| b.k < lo);
    for b in &bs[from..] {
        if b.k > hi {
            break;
        }
        for (a, inc) in [(&b.edge, b.k > lo), (&b.body, b.k < hi)] {
            if inc && a.count > 0 {
                out.push(Sample { t: a.first_t, v: a.first_v });
                if a.count > 1 {
                    out.push(Sample { t: a.last_t, v: a.last_v });
                }
            }
        }
    }
}

/// One exact kernel over a window's aggregate.
fn agg_kernel(name: &str, a: &Agg, range_start: i64, range_end: i64, range_ms: i64) -> Option<f64> {
    if a.count == 0 {
        return None;
    }
    let n = a.count as usize;
    let first = Sample { t: a.first_t, v: a.first_v };
    let last = Sample { t: a.last_t, v: a.last_v };
    let instant = |is_rate: bool| -> Option<f64> {
        if n < 2 {
            return None;
        }
        instant_from(Sample { t: a.penult_t, v: a.penult_v }, last, false, is_rate)
    };
    match name {
        "rate" | "increase" => {
            extrapolate(last.v - first.v + a.corr, first, last, n - 1, range_start, range_end, range_ms, true, name == "rate")
        }
        "delta" => extrapolate(last.v - first.v, first, last, n - 1, range_start, range_end, range_ms, false, false),
        "irate" => instant(true),
        "idelta" => instant(false),
        "changes" => Some(f64::from(a.changes)),
        "resets" => Some(f64::from(a.resets)),
        "count_over_time" => Some(n as f64),
        "sum_over_time" => Some(a.sum),
        "avg_over_time" => Some(if a.sum.is_infinite() { a.sum } else { a.sum / n as f64 }),
        "min_over_time" => Some(a.min),
        "max_over_time" => Some(a.max),
        "last_over_time" => Some(last.v),
        "first_over_time" => Some(first.v),
        "present_over_time" => Some(1.0),
        "ts_of_first_over_time" => Some(first.t as f64 / 1000.0),
        "ts_of_last_over_time" => Some(last.t as f64 / 1000.0),
        _ => None,
    }
}

fn note(ctx: &QueryCtx<'_>, r: i64, what: &str) {
    ctx.info(format!("PromQL info: answered from the {} downsampling tier, {what} approximated", fmt_res(r)));
}

/// `name` over a window of a histogram series (`ha.count > 0`) answered exactly from its aggregates
/// (see `hist::range_window`, which this mirrors), or `None` when it cannot be: a window whose histograms
/// do not share one layout, a mix of floats and histograms where the order of samples matters, a
/// function without an exact kernel.
#[allow(clippy::too_many_arguments)]
fn hist_kernel(ctx: &QueryCtx<'_>, name: &str, metric: &str, fa: &Agg, ha: &HAgg, win: &Window<'_>, k: fn(&Window<'_>) -> Option<f64>) -> Option<HOut> {
    let (fc, hc) = (fa.count, ha.count);
    let secs = |t: i64| HOut::F(t as f64 / 1000.0);
    Some(match name {
        "count_over_time" => HOut::F(f64::from(fc) + f64::from(hc)),
        "present_over_time" => HOut::F(1.0),
        "last_over_time" if fc > 0 && fa.last_t > ha.last_t => HOut::F(fa.last_v),
        "last_over_time" => HOut::H(Arc::new(ha.last.clone())),
        "first_over_time" if fc > 0 && fa.first_t < ha.first_t => HOut::F(fa.first_v),
        "first_over_time" => HOut::H(Arc::new(ha.first.clone())),
        "ts_of_last_over_time" => secs(ha.last_t.max(if fc > 0 { fa.last_t } else { 0 })),
        "ts_of_first_over_time" => secs(ha.first_t.min(if fc > 0 { fa.first_t } else { i64::MAX })),
        "min_over_time" | "max_over_time" if fc == 0 => HOut::None,
        "min_over_time" | "max_over_time" => {
            ctx.info(hist::ignored_in_mixed_range_info(metric));
            agg_kernel(name, fa, win.range_start, win.range_end, win.range_ms).map_or(HOut::None, HOut::F)
        }
        "rate" | "increase" | "delta" | "sum_over_time" | "avg_over_time" if fc > 0 => {
            ctx.warn(hist::mixed_floats_histograms_warning(metric));
            HOut::None
        }
        _ if !ha.clean => return None,
        "rate" | "increase" | "delta" if hc < 2 => HOut::None,
        "rate" | "increase" | "delta" => {
            let is_counter = name != "delta";
            let gauge = |h: &tessera_model::FloatHistogram| u32::from(h.counter_reset_hint == CounterResetHint::Gauge);
            let middle_gauge = ha.gauges > gauge(&ha.first) + gauge(&ha.last);
            let Some(r) = hist::histogram_rate_agg(ctx, metric, &ha.first, ha.second_reset, &ha.last, ha.corr.as_ref(), middle_gauge, is_counter)
            else {
                return Some(HOut::None);
            };
            hist::extrapolate_histogram(r, ha.first_t, ha.first.count, ha.last_t, hc as usize - 1, win, is_counter, name == "rate")
        }
        "sum_over_time" | "avg_over_time" => {
            if ha.sum.has_overflow() {
                return None;
            }
            if ha.hint_reset && ha.hint_not_reset {
                ctx.warn(hist::counter_reset_collision_warning("aggregation"));
            }
            let mut sum = ha.sum.clone();
            if name == "avg_over_time" {
                sum.div(f64::from(hc));
            }
            HOut::H(Arc::new(sum))
        }
        "irate" | "idelta" if fc == 0 => {
            let mut pts = Vec::with_capacity(2);
            if hc >= 2 {
                pts.push(HPoint { t: ha.penult_t, h: Arc::new(ha.penult.clone()) });
            }
            pts.push(HPoint { t: ha.last_t, h: Arc::new(ha.last.clone()) });
            hist::instant_value(ctx, metric, &[], &pts, &[], name == "irate", win, k)
        }
        "changes" if fc == 0 => HOut::F(f64::from(ha.changes)),
        "resets" if fc == 0 => HOut::F(f64::from(ha.resets)),
        _ => return None,
    })
}

/// `name(ms)` from tier `r`, or `None` when this call must read raw data (see the module docs).
/// `params[j][i]`: the call's scalar parameters at step `i`; `keep_name` whether the output keeps the
/// metric name.
pub fn range_call(
    ctx: &QueryCtx<'_>,
    r: i64,
    name: &str,
    ms: &MatrixSelector,
    grid: &Grid,
    params: &[Vec<f64>],
    keep_name: bool,
) -> Result<Option<Val>, EngineError> {
    let vs = &ms.vs;
    let Some(k) = range_kernel(name) else { return Ok(None) };
    if vs.anchored || vs.smoothed || (ctx.opts.use_start_timestamps && matches!(name, "rate" | "irate" | "increase" | "resets")) {
        return Ok(None);
    }
    let eff = super::eval::effective_times_pub(ctx, vs.at, vs.original_offset_ms, grid);
    let range = ms.range_ms;
    let (lo, hi) = (eff.iter().copied().min().unwrap_or(0), eff.iter().copied().max().unwrap_or(0));
    let exact_f = exact_fn(name);
    let approx = AtomicBool::new(!exact_f);
    let n = grid.n;
    let cols = if exact_f { cols_for(name) } else { cols_for("") };
    let out = select_buckets(ctx, r, vs, lo.saturating_sub(range).saturating_sub(r), hi, grid.step, cols, |labels, bs, hbs| {
        let mut vals = vec![None; n];
        let mut hvals: Option<HistCol> = (!hbs.is_empty()).then(|| vec![None; n]);
        let metric = labels.metric_name();
        let mut any = false;
        let (mut synth_buf, mut hsynth) = (Vec::new(), Vec::new());
        let mut pbuf = vec![0.0; params.len()];
        let (mut hint, mut hhint) = (0, 0);
        for (i, &e) in eff.iter().enumerate() {
            // A window of years over fine buckets costs per step: the deadline is checked between steps.
            if i % 256 == 255 && ctx.check().is_err() {
                return None;
            }
            let (wlo, whi, exact) = bucket_window(e.saturating_sub(range), e, r);
            if !exact {
                approx.store(true, Ordering::Relaxed);
            }
            super::functions::step_params(params, i, &mut pbuf);
            let fa = if exact_f || !hbs.is_empty() { fold(bs, wlo, whi, &mut hint) } else { Agg::default() };
            let ha = if hbs.is_empty() { HAgg::default() } else { fold(hbs, wlo, whi, &mut hhint) };
            let mut win = Window {
                s: &[],
                range_start: e - range,
                range_end: e,
                range_ms: range,
                step_t: grid.t(i),
                params: &pbuf,
                sts: &[],
                drops: None,
            };
            let exact_out = if ha.count > 0 {
                hist_kernel(ctx, name, metric, &fa, &ha, &win, k)
            } else if exact_f {
                Some(agg_kernel(name, &fa, e - range, e, range).map_or(HOut::None, HOut::F))
            } else {
                None
            };
            let v = match exact_out {
                Some(v) => v,
                None => {
                    approx.store(true, Ordering::Relaxed);
                    synth(bs, wlo, whi, &mut synth_buf);
                    win.s = &synth_buf;
                    if hbs.is_empty() {
                        if synth_buf.is_empty() { HOut::None } else { k(&win).map_or(HOut::None, HOut::F) }
                    } else {
                        synth_h(hbs, wlo, whi, &mut hsynth);
                        if synth_buf.is_empty() && hsynth.is_empty() {
                            HOut::None
                        } else {
                            hist::range_window(ctx, name, metric, &synth_buf, &hsynth, &[], &win, k)
                        }
                    }
                }
            };
            match v {
                HOut::None => {}
                HOut::F(v) => {
                    vals[i] = Some(v);
                    any = true;
                }
                HOut::H(h) => {
                    if let Some(hv) = &mut hvals {
                        hv[i] = Some(h);
                        any = true;
                    }
                }
            }
        }
        any.then_some((vals, hvals))
    })?;
    ctx.check()?;
    if approx.load(Ordering::Relaxed) && !out.is_empty() {
        note(ctx, r, &format!("{name} over windows of {} not on its buckets or not exact there", fmt_res(range)));
    }
    Ok(Some(Val::Vector(out.into_iter().map(|(labels, (vals, hists))| series(labels, vals, hists, !keep_name)).collect())))
}

fn series(labels: Labels, vals: Vec<Option<f64>>, hists: Option<HistCol>, drop_name: bool) -> Series {
    let mut s = Series { labels, vals, hists, drop_name };
    s.tidy();
    s
}

/// An instant selector from tier `r`: at each step the last sample of the lookback window, widened to
/// whole buckets (see the module docs); `timestamps`: its time in seconds instead (`timestamp()`).
pub fn vector_selector(ctx: &QueryCtx<'_>, r: i64, vs: &VectorSelector, grid: &Grid, timestamps: bool) -> Result<Option<Vec<Series>>, EngineError> {
    if vs.smoothed || vs.anchored {
        return Ok(None);
    }
    let eff = super::eval::effective_times_pub(ctx, vs.at, vs.original_offset_ms, grid);
    let lb = ctx.lookback_ms;
    let (lo, hi) = (eff.iter().copied().min().unwrap_or(0), eff.iter().copied().max().unwrap_or(0));
    let approx = AtomicBool::new(false);
    let n = grid.n;
    let cols = col::BASE | col::V_LAST | if timestamps { col::T_FIRST | col::T_LAST } else { 0 };
    let out = select_buckets(ctx, r, vs, lo.saturating_sub(lb).saturating_sub(r), hi, grid.step, cols, |_labels, bs, hbs| {
        let mut vals = vec![None; n];
        let mut hvals: Option<HistCol> = (!hbs.is_empty() && !timestamps).then(|| vec![None; n]);
        let mut any = false;
        let (mut hint, mut hhint) = (0, 0);
        for (i, &e) in eff.iter().enumerate() {
            if i % 256 == 255 && ctx.check().is_err() {
                return None;
            }
            let (wlo, whi, exact) = bucket_window(e.saturating_sub(lb), e, r);
            if !exact {
                approx.store(true, Ordering::Relaxed);
            }
            let a = fold(bs, wlo, whi, &mut hint);
            if !hbs.is_empty() {
                // The later of the last raw float and the last raw histogram decides (upstream's
                // iterator sees one sample per timestamp, of either kind).
                let h = fold(hbs, wlo, whi, &mut hhint);
                let h_t = if h.raw { h.raw_t } else { i64::MIN };
                if h.raw && h_t > h.float_raw_t {
                    if h.count == 0 || h.tail_stale {
                        continue;
                    }
                    if timestamps {
                        vals[i] = Some(h.last_t as f64 / 1000.0);
                    } else if let Some(hv) = &mut hvals {
                        hv[i] = Some(Arc::new(h.last));
                    }
                    any = true;
                    continue;
                }
            }
            if a.count == 0 || a.tail_stale {
                continue;
            }
            vals[i] = Some(if timestamps { a.last_t as f64 / 1000.0 } else { a.last_v });
            any = true;
        }
        any.then_some((vals, hvals))
    })?;
    ctx.check()?;
    if approx.load(Ordering::Relaxed) && !out.is_empty() {
        note(ctx, r, &format!("the lookback of {} at steps not on its buckets", fmt_res(lb)));
    }
    Ok(Some(out.into_iter().map(|(labels, (vals, hists))| series(labels, vals, hists, false)).collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_on_buckets_are_exact_and_others_widen_to_whole_buckets() {
        assert_eq!(bucket_window(3000, 6000, 1000), (3, 6, true));
        assert_eq!(bucket_window(3500, 6500, 1000), (3, 6, false));
        // Shorter than a bucket: the bucket ending at or before the window's end.
        assert_eq!(bucket_window(6100, 6400, 1000), (5, 6, false));
        assert_eq!(fmt_res(3_600_000), "1h");
        assert_eq!(fmt_res(90_000), "90s");
        assert_eq!(fmt_res(1500), "1500ms");
    }

    /// A storage with nothing but a raw horizon.
    struct Horizon(tessera_model::RawHorizon);
    impl Queryable for Horizon {
        fn querier(&self, _: i64, _: i64) -> Result<Arc<dyn tessera_model::Querier>, tessera_model::StorageError> {
            Err(tessera_model::StorageError::Other("no data".into()))
        }
        fn raw_horizon(&self) -> Option<tessera_model::RawHorizon> {
            Some(self.0.clone())
        }
    }

    proptest::proptest! {
        /// The runs found from the horizon's times give every step the source the per-step rule gives it,
        /// in order, each step once.
        #[test]
        fn past_raw_runs_follow_the_per_step_rule(
            raw in -50i64..50,
            oldest in proptest::collection::vec(proptest::option::of(-80i64..60), 1..4),
            chosen_i in 0usize..4,
            start in -100i64..100,
            nsteps in 0i64..60,
            step in 1i64..9,
            before in 0i64..20,
        ) {
            let tiers: Vec<(i64, Option<i64>)> = oldest.iter().enumerate().map(|(i, m)| ((i as i64 + 1) * 1000, m.map(|m| m * 1000))).collect();
            let h = tessera_model::RawHorizon { raw_mint_ms: raw * 1000, tiers: tiers.clone() };
            let chosen = tiers.get(chosen_i).map(|t| t.0);
            let (start, step, before) = (start * 1000, step * 1000, before * 1000);
            let end = start + nsteps * step + step / 2;
            let expr = crate::parser::parse(&format!("rate(m[{}ms])", before.max(1))).expect("parses");
            let before = before.max(1);
            let got = past_raw(&Horizon(h.clone()), chosen, &expr, start, end, step, 300_000);
            // The rule, step by step: a tier whose data (buckets, or raw data bucketed) begins at `from`
            // answers a window whole from one bucket after the first whole bucket of its data.
            let from = |m: Option<i64>| m.unwrap_or(i64::MAX).min(h.raw_mint_ms);
            let usable = |r: i64, m: Option<i64>| {
                let f = from(m);
                let first_whole = if f % r == 0 { f } else { (f.div_euclid(r) + 1) * r };
                first_whole + r
            };
            let horizon = chosen.map_or(h.raw_mint_ms, |c| tiers.iter().find(|x| x.0 == c).map_or(h.raw_mint_ms, |x| usable(x.0, x.1)));
            let furthest = tiers.iter().filter(|x| from(x.1) < h.raw_mint_ms).min_by_key(|x| from(x.1)).map(|x| x.0);
            let want: Vec<(i64, Option<i64>)> = (0..=nsteps)
                .map(|i| {
                    let t = start + i * step;
                    let ws = t - before;
                    let src = if ws >= horizon { chosen } else { tiers.iter().find(|x| usable(x.0, x.1) <= ws).map(|x| x.0).or(furthest) };
                    (t, src)
                })
                .collect();
            let all_chosen = want.iter().all(|w| w.1 == chosen);
            match got {
                None => proptest::prop_assert!(all_chosen || start - before >= horizon || furthest.is_none(), "no runs, want {want:?}"),
                Some(runs) => {
                    proptest::prop_assert!(!all_chosen, "runs {runs:?} where every step reads the chosen source");
                    let flat: Vec<(i64, Option<i64>)> =
                        runs.iter().flat_map(|&(a, b, src)| (0..).map(move |i| a + i * step).take_while(move |t| *t <= b).map(move |t| (t, src))).collect();
                    proptest::prop_assert_eq!(flat, want);
                    for w in runs.windows(2) {
                        proptest::prop_assert!(w[0].2 != w[1].2, "adjacent runs of one source: {runs:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn folding_with_a_hint_equals_folding_afresh_in_any_order() {
        let samples: Vec<Sample> = (0..200).map(|i| Sample { t: i * 370, v: (i % 7) as f64 }).collect();
        let mut bs = Vec::new();
        tessera_encoding::buckets::bucketize(&samples, 1000, &mut bs);
        let mut hint = 0;
        for (lo, hi) in [(3, 9), (4, 10), (50, 80), (2, 5), (-3, 1), (70, 200), (10, 11), (10, 11)] {
            let (a, b) = (fold(&bs, lo, hi, &mut hint), fold(&bs, lo, hi, &mut 0));
            assert_eq!(a, b, "window ({lo}, {hi})");
        }
    }
}
