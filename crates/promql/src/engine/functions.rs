//! PromQL functions (upstream `promql/functions.go`): range-vector kernels that see one window of samples
//! at a time, and instant-vector functions that map columns.
//!
//! Range kernels are plain functions over a sample slice so that the fused selector+function path in
//! [`eval_call`] can run them inside each shard's loop, one pass per series for all steps.

use super::EngineError;
use super::eval::{
    Grid, HPoint, Held, QueryCtx, RangeArg, Series, StartTimestamps, Val, eval, eval_range_arg, eval_scalar, eval_vector,
    eval_vector_selector,
    for_each_window, for_each_window_idx, merge_same_labels,
};
use crate::gomath::{go_max, go_min};
use crate::parser::{Call, Expr};
use tessera_model::MatchOp;
use tessera_model::{Labels, LabelsBuilder, Sample};

/// Neumaier-compensated summation step (upstream `kahanSumInc`), shared with the histogram arithmetic.
pub use tessera_model::histogram_float::kahan_inc;

/// What a range kernel sees for one step.
pub struct Window<'a> {
    pub s: &'a [Sample],
    /// Exclusive start and inclusive end of the window, ms.
    pub range_start: i64,
    pub range_end: i64,
    pub range_ms: i64,
    /// The evaluation step's own time (not shifted by `@`/offset): predict_linear's intercept time.
    pub step_t: i64,
    /// Scalar parameters at this step (quantile, smoothing factors, predict_linear's duration).
    pub params: &'a [f64],
    /// Start timestamps aligned with `s` (0: unknown), or empty when the series has none or they are not
    /// used (upstream `EvalNodeHelper.StartTimestamps`, only set for rate/irate/increase/resets over a
    /// matrix selector with `use-start-timestamps`).
    pub sts: &'a [i64],
    /// For `rate`/`increase` over floats without start timestamps: where the counter drops inside this
    /// window, found once per series instead of by scanning every window (see [`Drops`]). `None`: the
    /// kernel scans the window itself.
    pub drops: Option<Drops<'a>>,
}

/// The positions `g` of a series' samples where the value drops (`samples[g] < samples[g - 1]`, a
/// counter reset), restricted to one window: `idx` holds those with `base < g < base + s.len()`,
/// `base` being the index of the window's first sample in the series. With them a counter's increase
/// over a window costs O(resets), not O(samples), and adds the same values in the same order as
/// upstream's loop over the window, so the answer is the same to the bit.
#[derive(Debug, Clone, Copy)]
pub struct Drops<'a> {
    pub idx: &'a [u32],
    pub base: usize,
}

impl<'a> Drops<'a> {
    /// Every drop of a series, ascending (empty, without allocating, for a counter that never drops).
    pub fn find(samples: &[Sample]) -> Vec<u32> {
        // Most counters never drop inside a query's range: a count without branches first (it
        // vectorises), the positions only where there are any.
        let n = samples.windows(2).fold(0usize, |n, w| n + usize::from(w[1].v < w[0].v));
        if n == 0 {
            return Vec::new();
        }
        let mut out = Vec::with_capacity(n);
        out.extend(samples.windows(2).enumerate().filter(|(_, w)| w[1].v < w[0].v).map(|(i, _)| (i + 1) as u32));
        out
    }

    /// The drops of the window `samples[lo..hi]` among a series' `all` drops.
    #[inline]
    pub fn within(all: &'a [u32], lo: usize, hi: usize) -> Self {
        let a = all.partition_point(|&g| g as usize <= lo);
        let b = a + all[a..].partition_point(|&g| (g as usize) < hi);
        Drops { idx: &all[a..b], base: lo }
    }
}

/// Upstream `isStartTimestampReset`: whether the current sample's start timestamp says the counter
/// restarted after the previous sample. ST == T is OTel's "unknown start", ST > T is invalid, 0 unknown;
/// ST == previous T is a delta sample (a reset) unless the previous sample had no usable start time
/// (a cumulative series with unknown start).
#[inline]
pub fn is_st_reset(prev_st: i64, prev_t: i64, cur_st: i64, cur_t: i64) -> bool {
    if cur_st == 0 || cur_st >= cur_t || cur_st < prev_t {
        return false;
    }
    if cur_st > prev_t {
        return true;
    }
    if prev_st > prev_t {
        return false;
    }
    prev_st != 0 && prev_st != prev_t
}

/// Upstream `checkStartTimeOverlap`: the current sample's start time lies before the previous sample and
/// is not the shared start of a cumulative series.
#[inline]
pub fn st_overlaps(prev_st: i64, prev_t: i64, cur_st: i64) -> bool {
    cur_st != 0 && cur_st < prev_t && cur_st != prev_st
}

/// The start-timestamp overlap warning (upstream `NewStartTimeOverlapWarning`, printed without position).
pub fn st_overlap_warning(metric: &str) -> String {
    format!(
        "PromQL warning: sample has start time that overlaps with previous sample timestamp for metric {}",
        tessera_model::labels::go_quote(metric)
    )
}

/// Upstream `extrapolatedRate`: the increase over the window, extrapolated towards the window's edges
/// (but not beyond half an average sample interval, nor below zero for counters). With start timestamps
/// (counters only), a start-timestamp reset counts like a value drop, and a first sample whose start time
/// lies inside the window stands for an increase from zero at that start time instead of extrapolating to
/// the left (which also lets a single sample have a rate).
pub fn extrapolated_rate(w: &Window<'_>, is_counter: bool, is_rate: bool) -> Option<f64> {
    let s = w.s;
    if s.is_empty() {
        return None;
    }
    let sts = if is_counter { w.sts } else { &[] };
    let n1 = s.len() - 1;
    let (first, last) = (s[0], s[n1]);
    let mut result = last.v - first.v;
    if let (true, Some(d), true) = (is_counter, w.drops, sts.is_empty()) {
        for &g in d.idx {
            result += s[g as usize - d.base - 1].v;
        }
    } else if is_counter {
        for i in 1..s.len() {
            let (prev, cur) = (s[i - 1], s[i]);
            if cur.v < prev.v || (i < sts.len() && is_st_reset(sts[i - 1], prev.t, sts[i], cur.t)) {
                result += prev.v;
            }
        }
    }
    if !sts.is_empty() && sts[0] != 0 && sts[0] > w.range_start && sts[0] < first.t {
        // The range start is exclusive: a start time on it is outside.
        let sampled = (last.t - sts[0]) as f64 / 1000.0;
        let n1f = if n1 > 0 { (last.t - first.t) as f64 / 1000.0 / n1 as f64 } else { 0.0 };
        let mut to_end = (w.range_end - last.t) as f64 / 1000.0;
        if to_end >= n1f * 1.1 {
            to_end = n1f / 2.0;
        }
        result += first.v;
        let mut factor = if sampled != 0.0 { (sampled + to_end) / sampled } else { 1.0 };
        if is_rate {
            factor /= w.range_ms as f64 / 1000.0;
        }
        return Some(result * factor);
    }
    extrapolate(result, first, last, n1, w.range_start, w.range_end, w.range_ms, is_counter, is_rate)
}

/// The extrapolation of upstream `extrapolatedRate` without start timestamps: `result` is the
/// (counter-corrected) difference between the window's `first` and `last` samples, `n1` the number of
/// samples minus one. Shared by the raw kernel and the downsampling tiers' (which know these from their
/// buckets).
#[allow(clippy::too_many_arguments)]
pub fn extrapolate(
    result: f64,
    first: Sample,
    last: Sample,
    n1: usize,
    range_start: i64,
    range_end: i64,
    range_ms: i64,
    is_counter: bool,
    is_rate: bool,
) -> Option<f64> {
    if n1 == 0 {
        return None;
    }
    let mut to_start = (first.t - range_start) as f64 / 1000.0;
    let mut to_end = (range_end - last.t) as f64 / 1000.0;
    let sampled = (last.t - first.t) as f64 / 1000.0;
    let avg = sampled / n1 as f64;
    let threshold = avg * 1.1;
    if to_start >= threshold {
        to_start = avg / 2.0;
    }
    if is_counter && result > 0.0 && first.v >= 0.0 {
        let to_zero = sampled * (first.v / result);
        if to_zero < to_start {
            to_start = to_zero;
        }
    }
    if to_end >= threshold {
        to_end = avg / 2.0;
    }
    let mut factor = if sampled != 0.0 { (sampled + to_start + to_end) / sampled } else { 1.0 };
    if is_rate {
        factor /= range_ms as f64 / 1000.0;
    }
    Some(result * factor)
}

/// `rate`, `increase` or `delta` (upstream `extrapolatedRate` without start timestamps) over every
/// window of one float series at once, into `vals` (one slot a step). The scalar kernel
/// ([`extrapolated_rate`]) is bound by its seven floating-point divisions a window; here each window's
/// inputs are gathered into columns first and [`extrapolate_columns`] runs the same operations in the same
/// order without branches, so that the compiler can use packed divisions: the answers are the same to the
/// bit (IEEE division, addition and multiplication round the same way packed or not; a property test
/// compares the two). Before that, a window whose counter cannot meet upstream's zero bound is answered
/// as `result * factor` at once, the factor from the thread's [`FactorMemo`] (its times met before, in
/// this series or another scraped with it). The windows and their factors are planned once for a run of
/// series with the same times ([`WindowPlan`]: a target's series, one after another). Returns the number
/// of samples in the windows, for the query's sample count; `check` (the query's deadline) is asked every 1,024 steps.
#[allow(clippy::too_many_arguments)]
pub(crate) fn extrapolated_rates(
    check: impl Fn() -> Result<(), EngineError>,
    samples: &[Sample],
    drops: &[u32],
    eff: &[i64],
    range_ms: i64,
    is_counter: bool,
    is_rate: bool,
    vals: &mut [Option<f64>],
) -> Result<usize, EngineError> {
    RATE_COLS.with_borrow_mut(|c| {
        // Every column sized for one row a step; rows are written in place (`rows <= i < n`), not pushed,
        // and only the first `rows` are read.
        let n = eff.len();
        c.memo.reset_unless(range_ms, is_rate);
        for v in [&mut c.to_start, &mut c.to_end, &mut c.sampled, &mut c.n1, &mut c.first_v, &mut c.result] {
            v.resize(n, 0.0);
        }
        c.step.resize(n, 0);
        // The windows and their factors depend on the series' times alone: a series scraped with the
        // one before (a target's series come one after another in label order) reuses its plan.
        let RateCols { plan, memo, .. } = &mut *c;
        if !plan.fits(samples, eff, range_ms, is_rate) {
            plan.build(samples, eff, range_ms, is_rate, memo);
        }
        let (mut rows, mut window_samples) = (0usize, 0usize);
        for (i, w) in c.plan.windows.iter().enumerate() {
            if i % 1024 == 1023 {
                check()?;
            }
            let (lo, hi) = (w.lo, w.hi);
            window_samples += hi - lo;
            if hi - lo < 2 {
                continue;
            }
            let (first, last) = (samples[lo], samples[hi - 1]);
            let mut result = last.v - first.v;
            if is_counter && !drops.is_empty() {
                for &g in Drops::within(drops, lo, hi).idx {
                    result += samples[g as usize - 1].v;
                }
            }
            // Where the memo proved that upstream's zero bound would not apply (see
            // `RateFactor::zero_safe`), the answer is `result * factor`, bit for bit what the columns
            // would give.
            if !(is_counter && result > 0.0 && first.v >= 0.0) || (w.zero_safe && first.v >= result) {
                vals[i] = Some(result * w.factor);
                continue;
            }
            let e = eff[i];
            c.step[rows] = i as u32;
            c.to_start[rows] = (first.t - (e - range_ms)) as f64;
            c.to_end[rows] = (e - last.t) as f64;
            c.sampled[rows] = (last.t - first.t) as f64;
            c.n1[rows] = (hi - lo - 1) as f64;
            c.first_v[rows] = first.v;
            c.result[rows] = result;
            rows += 1;
        }
        c.step.truncate(rows);
        let range_s = range_ms as f64 / 1000.0;
        match (is_counter, is_rate) {
            (true, true) => extrapolate_columns::<true, true>(c, range_s),
            (true, false) => extrapolate_columns::<true, false>(c, range_s),
            (false, true) => extrapolate_columns::<false, true>(c, range_s),
            (false, false) => extrapolate_columns::<false, false>(c, range_s),
        }
        for (&i, &v) in c.step.iter().zip(&c.out) {
            vals[i as usize] = Some(v);
        }
        Ok(window_samples)
    })
}

/// One row a window with at least two samples: its step, the distances (ms) from the range start to the
/// first sample and from the last sample to the range end, the time between them, the number of samples
/// minus one, the first value and the counter-corrected difference.
#[derive(Default)]
pub(crate) struct RateCols {
    step: Vec<u32>,
    to_start: Vec<f64>,
    to_end: Vec<f64>,
    sampled: Vec<f64>,
    n1: Vec<f64>,
    first_v: Vec<f64>,
    result: Vec<f64>,
    out: Vec<f64>,
    memo: FactorMemo,
    plan: WindowPlan,
}

/// One step's window of a [`WindowPlan`]: the samples `lo..hi`, and (with two or more) the window's
/// [`RateFactor`] and whether it is zero-safe.
#[derive(Clone, Copy)]
struct PlannedWindow {
    lo: usize,
    hi: usize,
    zero_safe: bool,
    factor: f64,
}

/// The windows of one series' steps (what [`for_each_window_idx`] finds) with their factors, kept for
/// the next series on the thread: they depend on the sample times, the steps, the range and the
/// function only, so a series with the same times (scraped with the last one) takes them as they are,
/// after a comparison of its times, instead of walking its samples and looking up the memo per step.
#[derive(Default)]
struct WindowPlan {
    valid: bool,
    range_ms: i64,
    is_rate: bool,
    times: Vec<i64>,
    eff: Vec<i64>,
    windows: Vec<PlannedWindow>,
}

/// Whether `samples` have the times `times` (of equal length). Eight at a time without a branch between
/// them: comparing a target's series, whose times are equal, is a tenth of the plan's time otherwise.
fn same_times(times: &[i64], samples: &[Sample]) -> bool {
    let (mut tc, mut sc) = (times.chunks_exact(8), samples.chunks_exact(8));
    for (a, b) in (&mut tc).zip(&mut sc) {
        let mut d = 0i64;
        for k in 0..8 {
            d |= a[k] ^ b[k].t;
        }
        if d != 0 {
            return false;
        }
    }
    tc.remainder().iter().zip(sc.remainder()).all(|(&t, s)| t == s.t)
}

impl WindowPlan {
    /// Whether the plan is that of a series with `samples`' times over these steps and range.
    fn fits(&self, samples: &[Sample], eff: &[i64], range_ms: i64, is_rate: bool) -> bool {
        self.valid
            && self.range_ms == range_ms
            && self.is_rate == is_rate
            && self.times.len() == samples.len()
            && self.eff == eff
            && same_times(&self.times, samples)
    }

    /// Plans `samples`' windows over `eff`, the factors from (and into) `memo`.
    fn build(&mut self, samples: &[Sample], eff: &[i64], range_ms: i64, is_rate: bool, memo: &mut FactorMemo) {
        self.valid = false;
        self.times.clear();
        self.times.extend(samples.iter().map(|s| s.t));
        self.eff.clear();
        self.eff.extend_from_slice(eff);
        self.windows.clear();
        self.windows.reserve(eff.len());
        for_each_window_idx(samples, eff, range_ms, |lo, hi, i| {
            let mut w = PlannedWindow { lo, hi, zero_safe: false, factor: 0.0 };
            if hi - lo >= 2 {
                let (first, last, e) = (samples[lo], samples[hi - 1], eff[i]);
                let f = memo.get(first.t - (e - range_ms), e - last.t, (hi - lo - 1) as u32, range_ms, is_rate);
                (w.zero_safe, w.factor) = (f.zero_safe, f.factor);
            }
            self.windows.push(w);
        });
        (self.range_ms, self.is_rate, self.valid) = (range_ms, is_rate, true);
    }
}

/// The extrapolation factor of a window, from its times alone: `(sampled + to_start + to_end) /
/// sampled` (1 if nothing was sampled), divided by the range in seconds for `rate`, with `to_start`
/// and `to_end` clamped to half the average interval as upstream `extrapolatedRate` does.
#[derive(Clone, Copy)]
struct RateFactor {
    ts_ms: i64,
    te_ms: i64,
    /// Samples minus one; 0 marks an empty slot (a window with a factor has at least two samples).
    n1: u32,
    /// `sampled >= to_start` (seconds, `to_start` clamped). Then a counter whose first value is at
    /// least its increase keeps `to_start`: `first / result >= 1` rounds to at least 1, so upstream's
    /// `durationToZero = sampled * (first / result)` rounds to at least `sampled`, never below `to_start`.
    zero_safe: bool,
    factor: f64,
}

/// A direct-mapped memo of [`RateFactor`]s for one range and function, kept from series to series on
/// a thread (the series of a target share their scrape times).
#[derive(Default)]
struct FactorMemo {
    range_ms: i64,
    is_rate: bool,
    slots: Vec<RateFactor>,
}

const FACTOR_SLOTS: usize = 1024;

impl FactorMemo {
    /// Empties the memo when the range or the function differs from the one it was filled for.
    fn reset_unless(&mut self, range_ms: i64, is_rate: bool) {
        if self.slots.is_empty() || self.range_ms != range_ms || self.is_rate != is_rate {
            let empty = RateFactor { ts_ms: 0, te_ms: 0, n1: 0, zero_safe: false, factor: 0.0 };
            self.slots.clear();
            self.slots.resize(FACTOR_SLOTS, empty);
            (self.range_ms, self.is_rate) = (range_ms, is_rate);
        }
    }

    /// The factor of a window whose first sample is `ts_ms` after the range's start and whose last is
    /// `te_ms` before its end, with `n1 + 1` samples; on a miss computed as [`extrapolate_columns`]
    /// computes it, operation for operation.
    #[inline]
    fn get(&mut self, ts_ms: i64, te_ms: i64, n1: u32, range_ms: i64, is_rate: bool) -> RateFactor {
        let h = (ts_ms as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (te_ms as u64).wrapping_mul(0xC2B2_AE3D_27D4_EB4F)
            ^ (n1 as u64).wrapping_mul(0x1656_67B1_9E37_79F9);
        let slot = &mut self.slots[(h >> 54) as usize & (FACTOR_SLOTS - 1)];
        if slot.n1 == n1 && slot.ts_ms == ts_ms && slot.te_ms == te_ms {
            return *slot;
        }
        // `range - ts - te` is the last sample's time minus the first's.
        let sampled = (range_ms - ts_ms - te_ms) as f64 / 1000.0;
        let avg = sampled / n1 as f64;
        let threshold = avg * 1.1;
        let half = avg / 2.0;
        let to_start = ts_ms as f64 / 1000.0;
        let to_start = if to_start >= threshold { half } else { to_start };
        let to_end = te_ms as f64 / 1000.0;
        let to_end = if to_end >= threshold { half } else { to_end };
        let mut factor = if sampled != 0.0 { (sampled + to_start + to_end) / sampled } else { 1.0 };
        if is_rate {
            factor /= range_ms as f64 / 1000.0;
        }
        *slot = RateFactor { ts_ms, te_ms, n1, zero_safe: sampled >= to_start, factor };
        *slot
    }
}

thread_local! {
    static RATE_COLS: std::cell::RefCell<RateCols> = std::cell::RefCell::new(RateCols::default());
}

/// [`extrapolate`] over columns: the same operations in the same order, each `if` a select, so that
/// the loop vectorises. `to_zero` is computed for every row and used only where upstream would compute
/// it (`result > 0 && first >= 0`).
fn extrapolate_columns<const COUNTER: bool, const RATE: bool>(c: &mut RateCols, range_s: f64) {
    let n = c.step.len();
    c.out.resize(n, 0.0);
    let (ts, te, sm, n1, fv, res) =
        (&c.to_start[..n], &c.to_end[..n], &c.sampled[..n], &c.n1[..n], &c.first_v[..n], &c.result[..n]);
    let out = &mut c.out[..n];
    for j in 0..n {
        let sampled = sm[j] / 1000.0;
        let avg = sampled / n1[j];
        let threshold = avg * 1.1;
        let half = avg / 2.0;
        let to_start = ts[j] / 1000.0;
        let mut to_start = if to_start >= threshold { half } else { to_start };
        let result = res[j];
        if COUNTER {
            let to_zero = sampled * (fv[j] / result);
            let use_zero = result > 0.0 && fv[j] >= 0.0 && to_zero < to_start;
            to_start = if use_zero { to_zero } else { to_start };
        }
        let to_end = te[j] / 1000.0;
        let to_end = if to_end >= threshold { half } else { to_end };
        let factor = (sampled + to_start + to_end) / sampled;
        let mut factor = if sampled != 0.0 { factor } else { 1.0 };
        if RATE {
            factor /= range_s;
        }
        out[j] = result * factor;
    }
}

/// Upstream `instantValue` (irate, idelta). For irate, a start-timestamp reset between the last two
/// samples counts like a value drop.
fn instant_value(w: &Window<'_>, is_rate: bool) -> Option<f64> {
    let s = w.s;
    if s.len() < 2 {
        return None;
    }
    let n = s.len();
    let (prev, last) = (s[n - 2], s[n - 1]);
    let st_reset = is_rate && w.sts.len() == n && is_st_reset(w.sts[n - 2], prev.t, w.sts[n - 1], last.t);
    instant_from(prev, last, st_reset, is_rate)
}

/// The end of upstream `instantValue` over the last two samples (`st_reset`: a start-timestamp reset
/// between them, which counts like a value drop for irate). Shared with the downsampling tiers.
pub fn instant_from(prev: Sample, last: Sample, st_reset: bool, is_rate: bool) -> Option<f64> {
    let mut r = if is_rate && (last.v < prev.v || st_reset) { last.v } else { last.v - prev.v };
    let dt = last.t - prev.t;
    if dt == 0 {
        return None;
    }
    if is_rate {
        r /= dt as f64 / 1000.0;
    }
    Some(r)
}

/// Upstream `funcResets` (floats): value drops and start-timestamp resets.
fn resets(w: &Window<'_>) -> Option<f64> {
    let s = w.s;
    if s.is_empty() {
        return None;
    }
    let sts = w.sts;
    let mut n = 0usize;
    for i in 1..s.len() {
        if s[i].v < s[i - 1].v || (i < sts.len() && is_st_reset(sts[i - 1], s[i - 1].t, sts[i], s[i].t)) {
            n += 1;
        }
    }
    Some(n as f64)
}

/// Upstream `linearRegression`.
pub fn linear_regression(s: &[Sample], intercept_t: i64) -> (f64, f64) {
    let (mut n, mut sx, mut cx, mut sy, mut cy, mut sxy, mut cxy, mut sx2, mut cx2) =
        (0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0);
    let init_y = s[0].v;
    let mut const_y = true;
    for (i, p) in s.iter().enumerate() {
        if const_y && i > 0 && p.v != init_y {
            const_y = false;
        }
        n += 1.0;
        let x = (p.t - intercept_t) as f64 / 1e3;
        (sx, cx) = kahan_inc(x, sx, cx);
        (sy, cy) = kahan_inc(p.v, sy, cy);
        (sxy, cxy) = kahan_inc(x * p.v, sxy, cxy);
        (sx2, cx2) = kahan_inc(x * x, sx2, cx2);
    }
    if const_y {
        if init_y.is_infinite() {
            return (f64::NAN, f64::NAN);
        }
        return (0.0, init_y);
    }
    sx += cx;
    sy += cy;
    sxy += cxy;
    sx2 += cx2;
    let cov = sxy - sx * sy / n;
    let var = sx2 - sx * sx / n;
    let slope = cov / var;
    (slope, sy / n - slope * sx / n)
}

/// Upstream `quantile` (used by quantile_over_time and the quantile aggregation).
pub fn quantile(q: f64, vals: &mut [f64]) -> f64 {
    if vals.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    vals.sort_by(|a, b| go_float_less(*a, *b));
    let n = vals.len() as f64;
    let rank = q * (n - 1.0);
    let lo = rank.floor().max(0.0);
    let hi = (lo + 1.0).min(n - 1.0);
    let w = rank - rank.floor();
    vals[lo as usize] * (1.0 - w) + vals[hi as usize] * w
}

/// Go's `sort.Float64s` order: NaNs first, then ascending.
fn go_float_less(a: f64, b: f64) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Equal,
        (true, false) => Less,
        (false, true) => Greater,
        _ => a.partial_cmp(&b).unwrap_or(Equal),
    }
}

/// Step `i`'s values of a range function's scalar parameters (one column each) into `pbuf`.
pub(super) fn step_params(params: &[Vec<f64>], i: usize, pbuf: &mut [f64]) {
    for (b, p) in pbuf.iter_mut().zip(params) {
        *b = p[i];
    }
}

fn avg_over(s: &[Sample]) -> f64 {
    // Upstream `funcAvgOverTime`: Kahan sum, switching to an incremental mean on overflow.
    let (mut sum, mut count) = (s[0].v, 1.0f64);
    let (mut mean, mut c) = (0.0f64, 0.0f64);
    let mut incremental = false;
    for (i, p) in s[1..].iter().enumerate() {
        count = (i + 2) as f64;
        if !incremental {
            let (ns, nc) = kahan_inc(p.v, sum, c);
            if !ns.is_infinite() {
                sum = ns;
                c = nc;
                continue;
            }
            incremental = true;
            mean = sum / (count - 1.0);
            c /= count - 1.0;
        }
        let q = (count - 1.0) / count;
        (mean, c) = kahan_inc(p.v / count, q * mean, q * c);
    }
    if incremental { mean + c } else { sum / count + c / count }
}

fn stdvar_over(s: &[Sample]) -> f64 {
    let (mut count, mut mean, mut cm, mut aux, mut ca) = (0.0, 0.0, 0.0, 0.0, 0.0);
    for p in s {
        count += 1.0;
        let delta = p.v - (mean + cm);
        (mean, cm) = kahan_inc(delta / count, mean, cm);
        (aux, ca) = kahan_inc(delta * (p.v - (mean + cm)), aux, ca);
    }
    (aux + ca) / count
}

/// Upstream `funcDoubleExponentialSmoothing`.
fn double_exp_smoothing(s: &[Sample], sf: f64, tf: f64) -> Option<f64> {
    if s.len() < 2 {
        return None;
    }
    let (mut s0, mut s1) = (0.0, s[0].v);
    let mut b = s[1].v - s[0].v;
    for (i, p) in s.iter().enumerate().skip(1) {
        let x = sf * p.v;
        if i > 1 {
            b = tf * (s1 - s0) + (1.0 - tf) * b;
        }
        let y = (1.0 - sf) * (s1 + b);
        s0 = s1;
        s1 = x + y;
    }
    Some(s1)
}

/// Range-vector kernels by function name. `None`: not a range function.
pub fn range_kernel(name: &str) -> Option<fn(&Window<'_>) -> Option<f64>> {
    Some(match name {
        "rate" => |w| extrapolated_rate(w, true, true),
        "increase" => |w| extrapolated_rate(w, true, false),
        "delta" => |w| extrapolated_rate(w, false, false),
        "irate" => |w| instant_value(w, true),
        "idelta" => |w| instant_value(w, false),
        "changes" => |w| {
            (!w.s.is_empty()).then(|| {
                let mut n = 0.0;
                for p in w.s.windows(2) {
                    if p[1].v != p[0].v && !(p[1].v.is_nan() && p[0].v.is_nan()) {
                        n += 1.0;
                    }
                }
                n
            })
        },
        "resets" => resets,
        "deriv" => |w| (w.s.len() >= 2).then(|| linear_regression(w.s, w.s[0].t).0),
        "predict_linear" => |w| {
            (w.s.len() >= 2).then(|| {
                let (slope, icpt) = linear_regression(w.s, w.step_t);
                slope * w.params[0] + icpt
            })
        },
        "double_exponential_smoothing" => |w| double_exp_smoothing(w.s, w.params[0], w.params[1]),
        "avg_over_time" => |w| (!w.s.is_empty()).then(|| avg_over(w.s)),
        "sum_over_time" => |w| {
            (!w.s.is_empty()).then(|| {
                let (mut s, mut c) = (0.0, 0.0);
                for p in w.s {
                    (s, c) = kahan_inc(p.v, s, c);
                }
                if s.is_infinite() { s } else { s + c }
            })
        },
        "count_over_time" => |w| (!w.s.is_empty()).then_some(w.s.len() as f64),
        "min_over_time" => |w| {
            (!w.s.is_empty()).then(|| {
                let mut m = w.s[0].v;
                for p in w.s {
                    if p.v < m || m.is_nan() {
                        m = p.v;
                    }
                }
                m
            })
        },
        "max_over_time" => |w| {
            (!w.s.is_empty()).then(|| {
                let mut m = w.s[0].v;
                for p in w.s {
                    if p.v > m || m.is_nan() {
                        m = p.v;
                    }
                }
                m
            })
        },
        "last_over_time" => |w| w.s.last().map(|p| p.v),
        "first_over_time" => |w| w.s.first().map(|p| p.v),
        "ts_of_last_over_time" => |w| w.s.last().map(|p| p.t as f64 / 1000.0),
        "ts_of_first_over_time" => |w| w.s.first().map(|p| p.t as f64 / 1000.0),
        "ts_of_min_over_time" => |w| {
            (!w.s.is_empty()).then(|| {
                let mut m = w.s[0];
                for p in w.s {
                    if p.v <= m.v || m.v.is_nan() {
                        m = *p;
                    }
                }
                m.t as f64 / 1000.0
            })
        },
        "ts_of_max_over_time" => |w| {
            (!w.s.is_empty()).then(|| {
                let mut m = w.s[0];
                for p in w.s {
                    if p.v >= m.v || m.v.is_nan() {
                        m = *p;
                    }
                }
                m.t as f64 / 1000.0
            })
        },
        "present_over_time" => |w| (!w.s.is_empty()).then_some(1.0),
        "stdvar_over_time" => |w| (!w.s.is_empty()).then(|| stdvar_over(w.s)),
        "stddev_over_time" => |w| (!w.s.is_empty()).then(|| stdvar_over(w.s).sqrt()),
        "quantile_over_time" => |w| {
            (!w.s.is_empty()).then(|| {
                let mut v: Vec<f64> = w.s.iter().map(|p| p.v).collect();
                quantile(w.params[0], &mut v)
            })
        },
        "mad_over_time" => |w| {
            (!w.s.is_empty()).then(|| {
                let mut v: Vec<f64> = w.s.iter().map(|p| p.v).collect();
                if v.iter().any(|x| x.is_nan()) {
                    return f64::NAN;
                }
                let med = quantile(0.5, &mut v);
                let mut d: Vec<f64> = v.iter().map(|x| (x - med).abs()).collect();
                quantile(0.5, &mut d)
            })
        },
        _ => return None,
    })
}

/// Range functions that keep the metric name (upstream: everything else drops it).
fn keeps_name(name: &str) -> bool {
    matches!(name, "last_over_time" | "first_over_time")
}

fn has_counter_suffix(name: &str) -> bool {
    ["_total", "_sum", "_count", "_bucket"].iter().any(|s| name.ends_with(s))
}

/// Evaluates a function call (upstream `evaluator.eval` for `*parser.Call` and the `funcXxx` functions).
pub fn eval_call(ctx: &QueryCtx<'_>, c: &Call, grid: &Grid) -> Result<Val, EngineError> {
    let name = c.func.name;
    if let Some(k) = range_kernel(name) {
        return eval_range_function(ctx, c, grid, k);
    }
    let n = grid.n;
    match name {
        "time" => Ok(Val::Scalar((0..n).map(|i| grid.t(i) as f64 / 1000.0).collect())),
        "pi" => Ok(Val::Scalar(vec![std::f64::consts::PI; n])),
        // start(), end(), range() and step() never get here: `Engine::exec` folds them into numbers first
        // (`parser::fold_query_context_functions`), since inside a subquery they still mean the query's.
        // Upstream `funcMaxOf`/`funcMinOf`: Go's math.Max/math.Min, so an infinity wins over NaN.
        "min_of" | "max_of" => {
            let a = eval_scalar(ctx, &c.args[0], grid)?;
            let b = eval_scalar(ctx, &c.args[1], grid)?;
            let f = if name == "max_of" { go_max } else { go_min };
            Ok(Val::Scalar(a.iter().zip(&b).map(|(x, y)| f(*x, *y)).collect()))
        }
        "vector" => {
            let s = eval_scalar(ctx, &c.args[0], grid)?;
            Ok(Val::Vector(vec![Series { hists: None, labels: Labels::empty(), vals: s.into_iter().map(Some).collect(), drop_name: false }]))
        }
        "scalar" => {
            let v = eval_vector(ctx, &c.args[0], grid)?;
            let mut out = vec![f64::NAN; n];
            let mut cnt = vec![0u32; n];
            for s in &v {
                for (i, x) in s.vals.iter().enumerate() {
                    if let Some(x) = x {
                        cnt[i] += 1;
                        out[i] = *x;
                    }
                }
            }
            for i in 0..n {
                if cnt[i] != 1 {
                    out[i] = f64::NAN;
                }
            }
            Ok(Val::Scalar(out))
        }
        "timestamp" => {
            let v = match c.args[0].unwrap_parens() {
                Expr::VectorSelector(vs) => eval_vector_selector(ctx, vs, grid, true)?,
                other => {
                    let mut v = eval_vector(ctx, other, grid)?;
                    for s in &mut v {
                        // Upstream `funcTimestamp`: every sample, float or histogram, becomes its time.
                        let hs = s.hists.take();
                        for (i, x) in s.vals.iter_mut().enumerate() {
                            if x.is_some() || hs.as_ref().is_some_and(|h| h[i].is_some()) {
                                *x = Some(grid.t(i) as f64 / 1000.0);
                            }
                        }
                    }
                    v
                }
            };
            // The selector's histogram steps carry their timestamps as floats already.
            Ok(Val::Vector(v.into_iter().map(|s| Series { drop_name: true, hists: None, ..s }).collect()))
        }
        "start_timestamp" => {
            // Upstream `funcStartTimestamp`: only a plain selector carries start timestamps into the
            // function; over any other expression (or with start timestamps off) the result is empty.
            if let (true, Expr::VectorSelector(vs)) = (ctx.opts.use_start_timestamps, c.args[0].unwrap_parens()) {
                return Ok(Val::Vector(super::eval::eval_start_timestamp_selector(ctx, vs, grid)?));
            }
            let _ = eval_vector(ctx, &c.args[0], grid)?;
            Ok(Val::Vector(vec![]))
        }
        "absent" => {
            let v = eval_vector(ctx, &c.args[0], grid)?;
            Ok(absent(&v, n, absent_labels(&c.args[0])))
        }
        "absent_over_time" => {
            let ra = eval_range_arg(ctx, &c.args[0], grid)?;
            let mut present = vec![false; n];
            for s in &ra.series {
                for_each_window(&s.samples, &ra.eff, ra.range_ms, |w, i| {
                    if !w.is_empty() {
                        present[i] = true;
                    }
                });
                let hs = &s.hists;
                super::eval::for_each_window_idx_by(hs.len(), |j| hs[j].t, &ra.eff, ra.range_ms, |lo, hi, i| {
                    if lo < hi {
                        present[i] = true;
                    }
                });
            }
            let vals: Vec<Option<f64>> = present.iter().map(|p| (!p).then_some(1.0)).collect();
            if vals.iter().all(|v| v.is_none()) {
                return Ok(Val::Vector(vec![]));
            }
            Ok(Val::Vector(vec![Series { hists: None, labels: absent_labels(&c.args[0]), vals, drop_name: false }]))
        }
        "sort" | "sort_desc" => {
            if n > 1 {
                ctx.warn("PromQL warning: sort is ineffective for range queries since results are always ordered by labels".into());
            }
            let mut v = eval_vector(ctx, &c.args[0], grid)?;
            // Upstream `filterFloats`: histograms are not sorted, they go.
            for s in &mut v {
                s.hists = None;
            }
            v.retain(|s| s.vals.iter().any(|x| x.is_some()));
            let desc = name == "sort_desc";
            // Upstream sorts by value with NaNs last in both directions.
            v.sort_by(|a, b| {
                let (x, y) = (a.vals[0].unwrap_or(f64::NAN), b.vals[0].unwrap_or(f64::NAN));
                match (x.is_nan(), y.is_nan()) {
                    (true, true) => std::cmp::Ordering::Equal,
                    (true, false) => std::cmp::Ordering::Greater,
                    (false, true) => std::cmp::Ordering::Less,
                    _ => {
                        let o = x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal);
                        if desc { o.reverse() } else { o }
                    }
                }
            });
            Ok(Val::Vector(v))
        }
        "sort_by_label" | "sort_by_label_desc" => {
            if n > 1 {
                ctx.warn("PromQL warning: sort is ineffective for range queries since results are always ordered by labels".into());
            }
            let mut v = eval_vector(ctx, &c.args[0], grid)?;
            let mut names = Vec::new();
            for a in &c.args[1..] {
                names.push(string_arg(ctx, a, grid)?);
            }
            let desc = name == "sort_by_label_desc";
            v.sort_by(|a, b| {
                for l in &names {
                    let o = natural_cmp(a.labels.get(l), b.labels.get(l));
                    if o != std::cmp::Ordering::Equal {
                        return if desc { o.reverse() } else { o };
                    }
                }
                let o = a.labels.cmp(&b.labels);
                if desc { o.reverse() } else { o }
            });
            Ok(Val::Vector(v))
        }
        "label_replace" => label_replace(ctx, c, grid),
        "label_join" => label_join(ctx, c, grid),
        "clamp" | "clamp_min" | "clamp_max" => {
            let v = eval_vector(ctx, &c.args[0], grid)?;
            let p1 = eval_scalar(ctx, &c.args[1], grid)?;
            let p2 = if name == "clamp" { eval_scalar(ctx, &c.args[2], grid)? } else { vec![] };
            // Upstream `clamp` (behind `funcClamp`, `funcClampMin`, `funcClampMax`): clamp_min's upper bound
            // is +Inf and clamp_max's lower bound -Inf; nothing when max < min; then
            // math.Max(min, math.Min(max, v)), Go's, where an infinity wins over NaN.
            map_vals(v, true, |x, i| {
                let (lo, hi) = match name {
                    "clamp" => (p1[i], p2[i]),
                    "clamp_min" => (p1[i], f64::INFINITY),
                    _ => (f64::NEG_INFINITY, p1[i]),
                };
                if hi < lo { None } else { Some(go_max(lo, go_min(hi, x))) }
            })
        }
        "round" => {
            let v = eval_vector(ctx, &c.args[0], grid)?;
            let to = if c.args.len() > 1 { eval_scalar(ctx, &c.args[1], grid)? } else { vec![1.0; n] };
            map_vals(v, true, |x, i| {
                let inv = 1.0 / to[i];
                Some((x * inv + 0.5).floor() / inv)
            })
        }
        "minute" | "hour" | "day_of_week" | "day_of_month" | "day_of_year" | "days_in_month" | "month" | "year" => {
            let v = if c.args.is_empty() {
                vec![Series { hists: None,
                    labels: Labels::empty(),
                    vals: (0..n).map(|i| Some(grid.t(i) as f64 / 1000.0)).collect(),
                    drop_name: false,
                }]
            } else {
                eval_vector(ctx, &c.args[0], grid)?
            };
            map_vals(v, true, |x, _| Some(time_part(name, x)))
        }
        "info" => eval_info(ctx, c, grid),
        "histogram_quantile" => super::aggregate::histogram_quantile(ctx, c, grid),
        "histogram_fraction" => super::aggregate::histogram_fraction(ctx, c, grid),
        "histogram_quantiles" => super::aggregate::histogram_quantiles(ctx, c, grid),
        "histogram_count" | "histogram_sum" | "histogram_avg" | "histogram_stddev" | "histogram_stdvar" => {
            // Upstream `simpleHistogramFunc`: native histograms only, float samples produce nothing.
            let v = eval_vector(ctx, &c.args[0], grid)?;
            let f: fn(&tessera_model::FloatHistogram) -> Option<f64> = match name {
                "histogram_count" => |h| Some(h.count),
                "histogram_sum" => |h| Some(h.sum),
                "histogram_avg" => |h| Some(h.sum / h.count),
                "histogram_stddev" => |h| super::hist::math::stdvar(h).map(f64::sqrt),
                _ => super::hist::math::stdvar,
            };
            let mut out = Vec::new();
            for s in v {
                let Some(hs) = s.hists else { continue };
                let vals: Vec<Option<f64>> = hs.iter().map(|h| h.as_ref().and_then(|h| f(h))).collect();
                if vals.iter().any(|x| x.is_some()) {
                    out.push(Series { labels: s.labels, vals, hists: None, drop_name: true });
                }
            }
            Ok(Val::Vector(out))
        }
        _ => {
            if let Some(f) = simple_fn(name) {
                let v = eval_vector(ctx, &c.args[0], grid)?;
                return map_vals(v, true, |x, _| Some(f(x)));
            }
            Err(EngineError::Execution(format!("function {name}() is not supported yet")))
        }
    }
}


fn simple_fn(name: &str) -> Option<fn(f64) -> f64> {
    Some(match name {
        "abs" => f64::abs,
        "ceil" => f64::ceil,
        "floor" => f64::floor,
        "exp" => f64::exp,
        "sqrt" => f64::sqrt,
        "ln" => f64::ln,
        "log2" => f64::log2,
        "log10" => f64::log10,
        "sin" => f64::sin,
        "cos" => f64::cos,
        "tan" => f64::tan,
        "asin" => f64::asin,
        "acos" => f64::acos,
        "atan" => f64::atan,
        "sinh" => f64::sinh,
        "cosh" => f64::cosh,
        "tanh" => f64::tanh,
        "asinh" => f64::asinh,
        "acosh" => f64::acosh,
        "atanh" => f64::atanh,
        "deg" => |x| x * 180.0 / std::f64::consts::PI,
        "rad" => |x| x * std::f64::consts::PI / 180.0,
        "sgn" => |x: f64| {
            if x > 0.0 {
                1.0
            } else if x < 0.0 {
                -1.0
            } else {
                x
            }
        },
        _ => return None,
    })
}

fn map_vals(
    mut v: Vec<Series>,
    drop_name: bool,
    f: impl Fn(f64, usize) -> Option<f64>,
) -> Result<Val, EngineError> {
    for s in &mut v {
        // Upstream `simpleFloatFunc` and friends process float samples only: histograms go.
        s.hists = None;
        for (i, x) in s.vals.iter_mut().enumerate() {
            if let Some(val) = *x {
                *x = f(val, i);
            }
        }
        if drop_name {
            s.drop_name = true;
        }
    }
    v.retain(|s| s.vals.iter().any(|x| x.is_some()));
    Ok(Val::Vector(v))
}

fn string_arg(ctx: &QueryCtx<'_>, e: &Expr, grid: &Grid) -> Result<String, EngineError> {
    match eval(ctx, e, grid)? {
        Val::Str(s) => Ok(s),
        _ => Err(EngineError::Execution("expected string".into())),
    }
}

/// Civil date from days since 1970-01-01 (proleptic Gregorian).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// Upstream `dateWrapper` functions: parts of the UTC date of a Unix time in seconds, which upstream
/// takes as `time.Unix(int64(v), 0)`: truncated toward zero, so -0.5 is 1970-01-01 00:00.
///
/// NaN, ±Inf and values outside int64 are NaN here. Upstream's `int64(v)` of those is whatever the
/// CPU's conversion gives (int64's minimum on amd64, which Go's calendar then wraps to the year
/// 292277026596; 0 or a saturated value on arm64), so Prometheus' answer depends on the machine it
/// runs on; "no such time" is the answer that does not.
fn time_part(name: &str, secs: f64) -> f64 {
    // -2^63 ≤ secs < 2^63: the range in which upstream's conversion is defined.
    if !(-9_223_372_036_854_775_808.0..9_223_372_036_854_775_808.0).contains(&secs) {
        return f64::NAN;
    }
    let t = secs.trunc() as i64;
    let days = t.div_euclid(86_400);
    let sod = t.rem_euclid(86_400);
    let (y, m, d) = civil(days);
    match name {
        "minute" => ((sod / 60) % 60) as f64,
        "hour" => (sod / 3600) as f64,
        "day_of_week" => (days + 4).rem_euclid(7) as f64,
        "day_of_month" => d as f64,
        "day_of_year" => {
            let cum = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];
            let mut doy = cum[(m - 1) as usize] + d as i64;
            if m > 2 && is_leap(y) {
                doy += 1;
            }
            doy as f64
        }
        "days_in_month" => match m {
            2 => {
                if is_leap(y) {
                    29.0
                } else {
                    28.0
                }
            }
            4 | 6 | 9 | 11 => 30.0,
            _ => 31.0,
        },
        "month" => m as f64,
        _ => y as f64,
    }
}

/// Natural order for `sort_by_label`: digit runs compare as numbers.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    let (ab, bb) = (a.as_bytes(), b.as_bytes());
    let (mut i, mut j) = (0, 0);
    while i < ab.len() && j < bb.len() {
        if ab[i].is_ascii_digit() && bb[j].is_ascii_digit() {
            let si = i;
            while i < ab.len() && ab[i].is_ascii_digit() {
                i += 1;
            }
            let sj = j;
            while j < bb.len() && bb[j].is_ascii_digit() {
                j += 1;
            }
            let (na, nb) = (a[si..i].trim_start_matches('0'), b[sj..j].trim_start_matches('0'));
            let o = na.len().cmp(&nb.len()).then_with(|| na.cmp(nb));
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        } else {
            if ab[i] != bb[j] {
                return ab[i].cmp(&bb[j]);
            }
            i += 1;
            j += 1;
        }
    }
    (ab.len() - i).cmp(&(bb.len() - j))
}

/// Labels of `absent`'s output, upstream `createLabelsForAbsentFunction` step by step: an equality matcher
/// sets its label unless an earlier equality already named it, every other matcher (and a repeated
/// equality) deletes it. The matchers are walked in the order upstream sees them: by then tsdb
/// `PostingsForMatchers` has stable-sorted the selector's own matcher slice in place so that the
/// "subtracting" matchers come last (one on a label that no matcher requires to be set, or a `!=`/`!~`
/// that matches the empty string). So `{job=~"a", job="b"}` keeps `job="b"` and `{job="a", job=~"b"}`
/// keeps nothing (both intersecting: written order), but `{kind!="one", kind="negative"}` walks
/// `kind="negative"` first and then deletes `kind`: `{}`.
fn absent_labels(e: &Expr) -> Labels {
    let ms = match e.unwrap_parens() {
        Expr::VectorSelector(vs) => &vs.matchers,
        Expr::MatrixSelector(m) => &m.vs.matchers,
        _ => return Labels::empty(),
    };
    // `labelMustBeSet` and `isSubtractingMatcher` of upstream `PostingsForMatchers`.
    let must_be_set = |name: &str| ms.iter().any(|m| m.name == name && !m.matches_empty());
    let subtracting = |m: &tessera_model::Matcher| {
        !must_be_set(&m.name) || (matches!(m.op, MatchOp::NotEqual | MatchOp::NotRegex) && m.matches_empty())
    };
    let (intersecting, rest): (Vec<_>, Vec<_>) = ms.iter().partition(|m| !subtracting(m));
    let mut b = LabelsBuilder::new();
    let mut has: Vec<&str> = Vec::new();
    for m in intersecting.into_iter().chain(rest) {
        if m.name == "__name__" {
            continue;
        }
        if m.op == MatchOp::Equal && !has.contains(&m.name.as_str()) {
            if m.value.is_empty() {
                b.del(&m.name);
            } else {
                b.set(m.name.clone(), m.value.clone());
            }
            has.push(&m.name);
        } else {
            b.del(&m.name);
        }
    }
    b.build()
}

fn absent(v: &[Series], n: usize, labels: Labels) -> Val {
    let mut vals = vec![Some(1.0); n];
    for s in v {
        for (i, x) in vals.iter_mut().enumerate() {
            if s.has(i) {
                *x = None;
            }
        }
    }
    if vals.iter().all(|x| x.is_none()) {
        return Val::Vector(vec![]);
    }
    Val::Vector(vec![Series { hists: None, labels, vals, drop_name: false }])
}

fn eval_range_function(
    ctx: &QueryCtx<'_>,
    c: &Call,
    grid: &Grid,
    k: fn(&Window<'_>) -> Option<f64>,
) -> Result<Val, EngineError> {
    match range_function::<()>(ctx, c, grid, k, None, None)? {
        RangeOut::Vector(v) => Ok(v),
        RangeOut::Folded(_) | RangeOut::Streamed => {
            Err(EngineError::Execution("range function folded without a fold".into()))
        }
    }
}

/// The partial stage of an aggregation over a range function, run inside the shards
/// ([`fold_range_function`]): a fresh per-shard state, and how one series' output enters it (returning
/// `false` to give up, see [`super::eval::select_fold`]).
pub struct RangeFold<'a, S> {
    pub init: &'a (dyn Fn() -> S + Sync),
    pub add: &'a (dyn Fn(&mut S, Series) -> bool + Sync),
}

/// What [`range_function`] produced: the function's vector, or the per-shard states of a fold (`None`:
/// the fold gave up).
enum RangeOut<S> {
    Vector(Val),
    Folded(Option<Vec<S>>),
    /// Every series went to the ordered consumer ([`stream_range_function`]).
    Streamed,
}

/// `f(matrix selector)` with each series' output folded into per-shard states as soon as it is computed
/// (the series' vector is never materialised): the per-series work is exactly [`eval_range_function`]'s.
/// `None` when the argument is not a plain matrix selector or the fold gave up.
pub fn fold_range_function<S: Send>(
    ctx: &QueryCtx<'_>,
    c: &Call,
    grid: &Grid,
    fold: &RangeFold<'_, S>,
) -> Result<Option<Vec<S>>, EngineError> {
    let Some(k) = range_kernel(c.func.name) else { return Ok(None) };
    match range_function(ctx, c, grid, k, Some(fold), None)? {
        RangeOut::Folded(states) => Ok(states),
        RangeOut::Vector(_) | RangeOut::Streamed => Ok(None),
    }
}

/// `f(matrix selector)` with each series' output handed to `consume` on the calling thread, in the label
/// order of all shards together, as soon as it is computed (see [`super::eval::select_ordered`]); the
/// per-series work is exactly [`eval_range_function`]'s and runs in the shards in parallel. `false`
/// when the argument is not a plain matrix selector or `consume` gave up (evaluate centrally then).
pub fn stream_range_function(
    ctx: &QueryCtx<'_>,
    c: &Call,
    grid: &Grid,
    consume: &mut dyn FnMut(Series) -> bool,
) -> Result<bool, EngineError> {
    let Some(k) = range_kernel(c.func.name) else { return Ok(false) };
    Ok(matches!(range_function::<()>(ctx, c, grid, k, None, Some(consume))?, RangeOut::Streamed))
}

fn range_function<S: Send>(
    ctx: &QueryCtx<'_>,
    c: &Call,
    grid: &Grid,
    k: fn(&Window<'_>) -> Option<f64>,
    fold: Option<&RangeFold<'_, S>>,
    mut ordered: Option<&mut dyn FnMut(Series) -> bool>,
) -> Result<RangeOut<S>, EngineError> {
    let name = c.func.name;
    // Which argument is the range vector, and the scalar parameters.
    let (m_idx, param_exprs): (usize, Vec<&Expr>) = match name {
        "quantile_over_time" => (1, vec![&c.args[0]]),
        "predict_linear" => (0, vec![&c.args[1]]),
        "double_exponential_smoothing" => (0, vec![&c.args[1], &c.args[2]]),
        _ => (0, vec![]),
    };
    if let Expr::MatrixSelector(ms) = c.args[m_idx].unwrap_parens()
        && (ms.vs.anchored || ms.vs.smoothed)
    {
        if fold.is_some() || ordered.is_some() {
            return Ok(RangeOut::Folded(None));
        }
        return eval_extended_range_function(ctx, c, ms, grid).map(RangeOut::Vector);
    }
    let mut params: Vec<Vec<f64>> = Vec::new();
    for p in &param_exprs {
        params.push(eval_scalar(ctx, p, grid)?);
    }
    if name == "quantile_over_time"
        && let Some(q) = params[0].iter().find(|q| q.is_nan() || **q < 0.0 || **q > 1.0)
    {
        ctx.warn(format!("PromQL warning: quantile value should be between 0 and 1, got {}", fmt_g(*q)));
    }
    // Upstream `funcDoubleExponentialSmoothing` validates its factors only when it is called, and
    // `rangeEval` calls it only for a window holding samples: invalid factors at steps where every
    // window is empty are no error. `bad_step` keeps the earliest step where one was called.
    let invalid_factor = |i: usize| -> Option<String> {
        if name != "double_exponential_smoothing" || i >= grid.n {
            return None;
        }
        // NaN passes, as upstream's `sf <= 0 || sf >= 1` lets it through.
        for (what, short, v) in [("smoothing", "sf", params[0][i]), ("trend", "tf", params[1][i])] {
            if v <= 0.0 || v >= 1.0 {
                let shown = if v.is_infinite() { fmt_g(v) } else { format!("{v:.6}") };
                return Some(format!("invalid {what} factor. Expected: 0 < {short} < 1, got: {shown}"));
            }
        }
        None
    };
    if let Some(r) = ctx.tier_ms
        && let Expr::MatrixSelector(ms) = c.args[m_idx].unwrap_parens()
        && !(name == "double_exponential_smoothing" && params.iter().flatten().any(|v| *v <= 0.0 || *v >= 1.0))
    {
        // From a downsampling tier: evaluated centrally over buckets (a fold or an ordered consumer
        // gives up and the aggregation runs over this vector).
        if fold.is_some() || ordered.is_some() {
            return Ok(RangeOut::Folded(None));
        }
        if let Some(v) = super::tier::range_call(ctx, r, name, ms, grid, &params, keeps_name(name))? {
            return Ok(RangeOut::Vector(v));
        }
    }
    let bad_step = std::sync::atomic::AtomicUsize::new(usize::MAX);
    // The first timeout or cancel seen inside a series: one series over a fine grid can take seconds
    // (`stdvar_over_time(x[30m:15s])` over 1.6M steps), so the deadline is checked between steps too.
    let stopped: std::sync::OnceLock<EngineError> = std::sync::OnceLock::new();
    let n = grid.n;
    let is_counter_fn = matches!(name, "rate" | "increase");
    // `rate`, `increase` and `delta` over floats without start timestamps run column-wise
    // ([`extrapolated_rates`]); `(is_counter, is_rate)`.
    let batch_rate = match name {
        "rate" => Some((true, true)),
        "increase" => Some((true, false)),
        "delta" => Some((false, false)),
        _ => None,
    };
    let keep = keeps_name(name);
    // Applies the kernel to every step's window of one series, walking its samples once.
    // `sts.floats` is empty or aligned with `samples`, `sts.histograms` with `hists`.
    let apply = |labels: &Labels,
                 samples: &[Sample],
                 sts: StartTimestamps<'_>,
                 hists: &[HPoint],
                 drop: bool,
                 eff: &[i64],
                 range_ms: i64|
     -> Option<Series> {
        if stopped.get().is_some() {
            return None;
        }
        if !hists.is_empty() {
            let series = SeriesIn { labels, samples, sts, hists, drop };
            return apply_hist(ctx, name, series, eff, range_ms, grid, &params, k, &invalid_factor, &bad_step, &stopped);
        }
        let sts = sts.floats;
        let mut vals = vec![None; n];
        let mut any = false;
        let mut pbuf = vec![0.0; params.len()];
        let mut overlap_warned = false;
        let mut window_samples = 0usize;
        let mut stop = false;
        let drops = if is_counter_fn && sts.is_empty() { Some(Drops::find(samples)) } else { None };
        if let Some((is_counter, is_rate)) = batch_rate
            && sts.is_empty()
        {
            match extrapolated_rates(|| ctx.check(), samples, drops.as_deref().unwrap_or(&[]), eff, range_ms, is_counter, is_rate, &mut vals) {
                Ok(w) => window_samples = w,
                Err(e) => {
                    let _ = stopped.set(e);
                    stop = true;
                }
            }
            any = vals.iter().any(Option::is_some);
        } else {
            for_each_window_idx(samples, eff, range_ms, |lo, hi, i| {
                if stop || lo == hi {
                    return;
                }
                if i % 1024 == 1023
                    && let Err(e) = ctx.check()
                {
                    let _ = stopped.set(e);
                    stop = true;
                    return;
                }
                if invalid_factor(i).is_some() {
                    bad_step.fetch_min(i, std::sync::atomic::Ordering::Relaxed);
                    return;
                }
                step_params(&params, i, &mut pbuf);
                let w_sts = if sts.is_empty() { &[][..] } else { &sts[lo..hi] };
                // Upstream `extrapolatedRate` warns once per series when a start time overlaps the previous
                // sample (counters only).
                if is_counter_fn && !overlap_warned && !w_sts.is_empty() && float_st_overlap(&samples[lo..hi], w_sts) {
                    ctx.warn(st_overlap_warning(labels.metric_name()));
                    overlap_warned = true;
                }
                let win = Window {
                    s: &samples[lo..hi],
                    range_start: eff[i] - range_ms,
                    range_end: eff[i],
                    range_ms,
                    step_t: grid.t(i),
                    params: &pbuf,
                    sts: w_sts,
                    drops: drops.as_deref().map(|all| Drops::within(all, lo, hi)),
                };
                window_samples += hi - lo;
                if let Some(v) = k(&win) {
                    vals[i] = Some(v);
                    any = true;
                }
            });
        }
        ctx.count_queryable(window_samples);
        if !any || stop {
            return None;
        }
        if is_counter_fn {
            let mn = labels.metric_name();
            if !mn.is_empty() && !has_counter_suffix(mn) {
                ctx.info(format!(
                    "PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"{mn}\""
                ));
            }
        }
        Some(Series { hists: None, labels: labels.clone(), vals, drop_name: if keep { drop } else { true } })
    };
    // Fused path for a plain matrix selector: selection, decoding and the kernel run inside each shard's
    // loop in parallel, and no series' samples outlive its own iteration.
    if let Expr::MatrixSelector(ms) = c.args[m_idx].unwrap_parens() {
        let vs = &ms.vs;
        let eff = super::eval::effective_times_pub(ctx, vs.at, vs.original_offset_ms, grid);
        let range = ms.range_ms;
        let (lo, hi) = (eff.iter().copied().min().unwrap_or(0), eff.iter().copied().max().unwrap_or(0));
        let hints = tessera_model::SelectHints {
            range_ms: range,
            step_ms: grid.step,
            func: Some(name.to_string()),
            ..Default::default()
        };
        // Upstream `rangeEval` hands start timestamps only to these functions, and only over a matrix
        // selector (a subquery's samples have none); the column is decoded only then.
        let want_st = ctx.opts.use_start_timestamps && matches!(name, "rate" | "irate" | "increase" | "resets");
        let window = Some((&eff[..], range));
        // The shard fold hands each series' float start timestamps only; with start timestamps in use the
        // series go through the map below, which carries the histograms' too.
        // One series' output for a fold or the ordered consumer (stale markers dropped first).
        // The selection drops the float stale markers (`dec`); the histograms' are dropped here.
        let dec = super::eval::Decode { want_st, drop_stale: true, latest_from: None };
        let one = |labels: &Labels, samples: &[Sample], sts: &[i64], hs: &[HPoint]| -> Option<Series> {
            let clean_h: Vec<HPoint>;
            let hs = if hs.iter().any(|p| p.h.is_stale()) {
                clean_h = hs.iter().filter(|p| !p.h.is_stale()).cloned().collect();
                &clean_h[..]
            } else {
                hs
            };
            apply(labels, samples, StartTimestamps { floats: sts, histograms: &[] }, hs, false, &eff, range)
        };
        let finished = |out: RangeOut<S>| -> Result<RangeOut<S>, EngineError> {
            if let Some(e) = stopped.get().cloned() {
                return Err(e);
            }
            if let Some(msg) = invalid_factor(bad_step.load(std::sync::atomic::Ordering::Relaxed)) {
                return Err(EngineError::Execution(msg));
            }
            Ok(out)
        };
        if let Some(consume) = ordered.as_mut().filter(|_| !want_st) {
            // An order-dependent aggregation: each series' output goes to the merge in label order and
            // is folded there, so nothing holds series x steps.
            let f = |labels: &Labels, samples: &[Sample], sts: &[i64], hs: &[HPoint]| match one(labels, samples, sts, hs) {
                None => Some((0, None)),
                Some(s) => Some((s.held(), Some(s))),
            };
            let ok = super::eval::select_ordered(ctx, vs, lo.saturating_sub(range) + 1, hi, hints, dec, window, grid.n, f, consume)?;
            return finished(if ok { RangeOut::Streamed } else { RangeOut::Folded(None) });
        }
        if let Some(fold) = fold.filter(|_| !want_st) {
            // The partial stage of an aggregation: each series' output goes straight into the shard's
            // state, so the fold holds groups x steps, not series x steps.
            let states = super::eval::select_fold(ctx, vs, lo.saturating_sub(range) + 1, hi, hints, dec, window, fold.init, |st, labels, samples, sts, hs| {
                let Some(s) = one(labels, samples, sts, hs) else { return Some(0) };
                let held = s.held();
                (fold.add)(st, s).then_some(held)
            })?;
            return finished(RangeOut::Folded(states));
        }
        let runs = super::eval::select_map_runs(ctx, vs, lo.saturating_sub(range) + 1, hi, hints, dec, window, grid.n, |labels, samples, sts, hs| {
            let (clean_h, clean_hst): (Vec<HPoint>, Vec<i64>);
            let (hs, hsts) = if hs.iter().any(|p| p.h.is_stale()) {
                (clean_h, clean_hst) = super::eval::drop_stale_histograms(hs, sts.histograms);
                (&clean_h[..], &clean_hst[..])
            } else {
                (hs, sts.histograms)
            };
            apply(labels, samples, StartTimestamps { floats: sts.floats, histograms: hsts }, hs, false, &eff, range)
        })?;
        if let Some(e) = stopped.get().cloned() {
            return Err(e);
        }
        if let Some(msg) = invalid_factor(bad_step.load(std::sync::atomic::Ordering::Relaxed)) {
            return Err(EngineError::Execution(msg));
        }
        return Ok(RangeOut::Vector(Val::Vector(super::eval::merge_runs(runs, |s: &Series| &s.labels))));
    }
    if fold.is_some() || ordered.is_some() {
        return Ok(RangeOut::Folded(None));
    }
    let ra: RangeArg = eval_range_arg(ctx, &c.args[m_idx], grid)?;
    use rayon::prelude::*;
    let out: Vec<Series> =
        ra.series.par_iter().filter_map(|s| apply(&s.labels, &s.samples, StartTimestamps::default(), &s.hists, s.drop_name, &ra.eff, ra.range_ms)).collect();
    if let Some(e) = stopped.get().cloned() {
        return Err(e);
    }
    if let Some(msg) = invalid_factor(bad_step.load(std::sync::atomic::Ordering::Relaxed)) {
        return Err(EngineError::Execution(msg));
    }
    Ok(RangeOut::Vector(Val::Vector(out)))
}

/// One series as a range function sees it: its float and histogram samples (stale markers dropped)
/// with their start timestamps (see [`StartTimestamps`]).
struct SeriesIn<'a> {
    labels: &'a Labels,
    samples: &'a [Sample],
    sts: StartTimestamps<'a>,
    hists: &'a [HPoint],
    drop: bool,
}

/// Upstream `extrapolatedRate`'s `checkStartTimeOverlap` over a window of floats: whether some sample's
/// start time overlaps the previous sample (`sts` aligned with `w`, or empty).
#[inline]
fn float_st_overlap(w: &[Sample], sts: &[i64]) -> bool {
    !sts.is_empty() && (1..w.len()).any(|j| st_overlaps(sts[j - 1], w[j - 1].t, sts[j]))
}

/// [`eval_range_function`]'s per-series work for a series holding histograms: the float and the
/// histogram samples of each step's window go to [`super::hist::range_window`] (upstream's range
/// functions see `Floats` and `Histograms` apart), each with its start timestamps.
#[allow(clippy::too_many_arguments)]
fn apply_hist(
    ctx: &QueryCtx<'_>,
    name: &str,
    series: SeriesIn<'_>,
    eff: &[i64],
    range_ms: i64,
    grid: &Grid,
    params: &[Vec<f64>],
    k: fn(&Window<'_>) -> Option<f64>,
    invalid_factor: &dyn Fn(usize) -> Option<String>,
    bad_step: &std::sync::atomic::AtomicUsize,
    stopped: &std::sync::OnceLock<EngineError>,
) -> Option<Series> {
    use super::hist::HOut;
    let SeriesIn { labels, samples, sts, hists, drop } = series;
    let n = grid.n;
    let mut vals: Vec<Option<f64>> = vec![None; n];
    let mut hv: super::eval::HistCol = vec![None; n];
    let mut pbuf = vec![0.0; params.len()];
    let mut hwin: Vec<(usize, usize)> = vec![(0, 0); n];
    super::eval::for_each_window_idx_by(hists.len(), |j| hists[j].t, eff, range_ms, |lo, hi, i| hwin[i] = (lo, hi));
    let metric = labels.metric_name().to_string();
    let mut floats_seen = false;
    let mut window_samples = 0usize;
    let mut work = 0usize;
    super::eval::for_each_window_idx_by(samples.len(), |j| samples[j].t, eff, range_ms, |lo, hi, i| {
        let (hlo, hhi) = hwin[i];
        if lo == hi && hlo == hhi || stopped.get().is_some() {
            return;
        }
        // The deadline, by work done rather than by step: one step's window can hold thousands of
        // histograms (`sum_over_time(h[1d:1s])`), and a series can have a million steps.
        work += (hi - lo) + (hhi - hlo) * 16;
        if work >= 1 << 14 {
            work = 0;
            if let Err(e) = ctx.check() {
                let _ = stopped.set(e);
                return;
            }
        }
        if invalid_factor(i).is_some() {
            bad_step.fetch_min(i, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        step_params(params, i, &mut pbuf);
        floats_seen |= lo < hi;
        window_samples += (hi - lo) + hists[hlo..hhi].iter().map(|p| super::eval::hist_size(&p.h)).sum::<usize>();
        let w_sts = if sts.floats.is_empty() { &[][..] } else { &sts.floats[lo..hi] };
        let w_hsts = if sts.histograms.is_empty() { &[][..] } else { &sts.histograms[hlo..hhi] };
        // A window of floats only is a float rate (upstream `extrapolatedRate`'s float case, which
        // warns about overlapping start times); the histogram case warns in `histogramRate`.
        if matches!(name, "rate" | "increase") && hlo == hhi && float_st_overlap(&samples[lo..hi], w_sts) {
            ctx.warn(st_overlap_warning(&metric));
        }
        let win = Window {
            s: &samples[lo..hi],
            range_start: eff[i] - range_ms,
            range_end: eff[i],
            range_ms,
            step_t: grid.t(i),
            params: &pbuf,
            sts: w_sts,
            drops: None,
        };
        match super::hist::range_window(ctx, name, &metric, &samples[lo..hi], &hists[hlo..hhi], w_hsts, &win, k) {
            HOut::None => {}
            HOut::F(v) => vals[i] = Some(v),
            HOut::H(h) => hv[i] = Some(h),
        }
    });
    if stopped.get().is_some() {
        return None;
    }
    ctx.count_queryable(window_samples);
    let mut s = Series { labels: labels.clone(), vals, hists: Some(hv), drop_name: if keeps_name(name) { drop } else { true } };
    s.tidy();
    if !s.any_value() {
        return None;
    }
    if matches!(name, "rate" | "increase") && floats_seen {
        let mn = labels.metric_name();
        if !mn.is_empty() && !has_counter_suffix(mn) {
            ctx.info(format!(
                "PromQL info: metric might not be a counter, name does not end in _total/_sum/_count/_bucket: \"{mn}\""
            ));
        }
    }
    Some(s)
}

/// Go's `%g` for annotation messages.
pub fn fmt_g(f: f64) -> String {
    tessera_model::gofloat::format_g(f)
}

/// A string argument that upstream's `model.UTF8Validation.IsValidLabelName` rejects (empty, or bytes
/// that are not UTF-8), as upstream prints it; `None` when it is a valid label name.
fn invalid_label_name_arg(ctx: &QueryCtx<'_>, e: &Expr, grid: &Grid) -> Result<Option<String>, EngineError> {
    if let Expr::StringLiteral(sl) = e.unwrap_parens()
        && let Some(raw) = &sl.raw
    {
        return Ok(Some(String::from_utf8_lossy(raw).into_owned()));
    }
    let name = string_arg(ctx, e, grid)?;
    Ok(name.is_empty().then_some(name))
}

/// Upstream `evalLabelReplace`: the regex, then the destination name are checked before the vector is
/// evaluated, so their errors win over the vector's.
fn label_replace(ctx: &QueryCtx<'_>, c: &Call, grid: &Grid) -> Result<Val, EngineError> {
    let dst = string_arg(ctx, &c.args[1], grid)?;
    let repl = string_arg(ctx, &c.args[2], grid)?;
    let src = string_arg(ctx, &c.args[3], grid)?;
    let re_s = string_arg(ctx, &c.args[4], grid)?;
    // Go's RE2 syntax: literal braces, digit-led group names (renamed; a replacement's `$1a` or
    // `${1a}` follows the rename, a purely numeric `$1` is the index and needs nothing).
    let (re_rust, renamed) = tessera_model::matcher::go_regex_to_rust(&re_s);
    let re = regex::Regex::new(&format!("^(?s:{re_rust})$"))
        // Upstream names the regex as written, not the compiler's complaint.
        .map_err(|_| EngineError::Execution(format!("invalid regular expression in label_replace(): {re_s}")))?;
    let repl = rename_template_groups(&repl, &renamed);
    if let Some(bad) = invalid_label_name_arg(ctx, &c.args[1], grid)? {
        return Err(EngineError::Execution(format!("invalid destination label name in label_replace(): {bad}")));
    }
    let v = eval_vector(ctx, &c.args[0], grid)?;
    let mut out = Vec::with_capacity(v.len());
    for s in v {
        let val = s.labels.get(&src).to_string();
        let labels = if let Some(caps) = re.captures(&val) {
            let mut res = String::new();
            caps.expand(&repl, &mut res);
            let mut b = LabelsBuilder::from_labels(&s.labels);
            b.set(dst.clone(), res);
            b.build()
        } else {
            s.labels.clone()
        };
        let drop_name = s.drop_name && dst != "__name__";
        out.push(Series { labels, drop_name, ..s });
    }
    Ok(Val::Vector(merge_same_labels(out)?))
}

/// Rewrites `$name` and `${name}` in a `label_replace` replacement for the groups
/// [`tessera_model::matcher::go_regex_to_rust`] renamed (names that begin with a digit and are not a
/// plain index). Names follow Go's `Regexp.Expand`: the longest run of letters, digits and `_`.
fn rename_template_groups(repl: &str, renamed: &[String]) -> String {
    if renamed.is_empty() || !repl.contains('$') {
        return repl.to_string();
    }
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let mut out = String::with_capacity(repl.len() + 8);
    let mut rest = repl;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        let after = &rest[i + 1..];
        let (name, used) = if let Some(b) = after.strip_prefix('{') {
            match b.find('}') {
                Some(e) => (&b[..e], e + 2),
                None => ("", 0),
            }
        } else if let Some(tail) = after.strip_prefix('$') {
            out.push_str("$$");
            rest = tail;
            continue;
        } else {
            let e = after.find(|c: char| !is_name(c)).unwrap_or(after.len());
            (&after[..e], e)
        };
        if !name.is_empty() && !name.bytes().all(|b| b.is_ascii_digit()) && renamed.iter().any(|r| r == name) {
            out.push_str(&format!("${{_go_{name}}}"));
        } else {
            out.push('$');
            out.push_str(&after[..used]);
        }
        rest = &after[used..];
    }
    out.push_str(rest);
    out
}

/// Upstream `evalLabelJoin`: every source name, then the destination name are checked before the vector
/// is evaluated.
fn label_join(ctx: &QueryCtx<'_>, c: &Call, grid: &Grid) -> Result<Val, EngineError> {
    let dst = string_arg(ctx, &c.args[1], grid)?;
    let sep = string_arg(ctx, &c.args[2], grid)?;
    let mut srcs = Vec::new();
    for a in &c.args[3..] {
        if let Some(bad) = invalid_label_name_arg(ctx, a, grid)? {
            return Err(EngineError::Execution(format!("invalid source label name in label_join(): {bad}")));
        }
        srcs.push(string_arg(ctx, a, grid)?);
    }
    if let Some(bad) = invalid_label_name_arg(ctx, &c.args[1], grid)? {
        return Err(EngineError::Execution(format!("invalid destination label name in label_join(): {bad}")));
    }
    let v = eval_vector(ctx, &c.args[0], grid)?;
    let mut out = Vec::with_capacity(v.len());
    for s in v {
        let joined: Vec<&str> = srcs.iter().map(|n| s.labels.get(n)).collect();
        let mut b = LabelsBuilder::from_labels(&s.labels);
        b.set(dst.clone(), joined.join(&sep));
        let drop_name = s.drop_name && dst != "__name__";
        out.push(Series { labels: b.build(), drop_name, ..s });
    }
    Ok(Val::Vector(merge_same_labels(out)?))
}

/// Upstream `interpolate`: the value at `t` on the line through `p1` and `p2`. A counter reset between
/// them means the counter restarted from 0 at `p1`, on either edge (what the 3.14 conformance scripts
/// expect: `extended_vectors.test`, "Smoothed rate interpolation across a counter reset").
fn interpolate(p1: Sample, p2: Sample, t: i64, is_counter: bool, _left_edge: bool) -> f64 {
    let (mut y1, y2) = (p1.v, p2.v);
    if is_counter && y2 < y1 {
        y1 = 0.0;
    }
    y1 + (y2 - y1) * (t - p1.t) as f64 / (p2.t - p1.t) as f64
}

/// Go's `sort.Search(n, f)`.
fn go_search(n: usize, f: impl Fn(usize) -> bool) -> usize {
    let (mut i, mut j) = (0, n);
    while i < j {
        let h = (i + j) / 2;
        if !f(h) {
            i = h + 1;
        } else {
            j = h;
        }
    }
    i
}

/// The boundary values of an anchored/smoothed window (upstream `pickOrInterpolateLeft/Right`), or `None`
/// when no sample reaches into the range. Returns (left, right, first index, last index).
fn boundaries(f: &[Sample], start: i64, end: i64, smoothed: bool, is_counter: bool) -> Option<(f64, f64, usize, usize)> {
    if f.is_empty() {
        return None;
    }
    let mut last = f.len() - 1;
    let first = go_search(last, |i| f[i].t > start).saturating_sub(1);
    if smoothed {
        last = go_search(last, |i| f[i].t >= end);
    }
    if f[last].t <= start {
        return None;
    }
    let left = if smoothed && f[first].t < start {
        interpolate(f[first], f[first + 1], start, is_counter, true)
    } else {
        f[first].v
    };
    let right = if smoothed && last > 0 && f[last].t > end {
        interpolate(f[last - 1], f[last], end, is_counter, false)
    } else {
        f[last].v
    };
    Some((left, right, first, last))
}

/// Upstream `extendedRate`: rate/increase/delta over an anchored or smoothed range.
fn extended_rate(f: &[Sample], start: i64, end: i64, range_ms: i64, smoothed: bool, is_counter: bool, is_rate: bool) -> Option<f64> {
    let (left, right, mut first, mut last) = boundaries(f, start, end, smoothed, is_counter)?;
    let mut r = right - left;
    if is_counter {
        if f[first].t <= start {
            first += 1;
        }
        if f[last].t >= end {
            last = last.wrapping_sub(1);
        }
        let inner: &[Sample] = if last != usize::MAX && first <= last { &f[first..=last] } else { &[] };
        // Upstream `correctForCounterResets`.
        let mut prev = left;
        for p in inner {
            if p.v < prev {
                r += prev;
            }
            prev = p.v;
        }
        if right < prev {
            r += prev;
        }
    }
    if is_rate {
        r /= range_ms as f64 / 1000.0;
    }
    Some(r)
}

/// Upstream `extendFloats`: the window's samples with synthetic points at both boundaries.
pub fn extend_floats(f: &[Sample], start: i64, end: i64, smoothed: bool) -> Vec<Sample> {
    let Some((left, right, mut first, mut last)) = boundaries(f, start, end, smoothed, false) else {
        return Vec::new();
    };
    if f[first].t <= start {
        first += 1;
    }
    if f[last].t >= end {
        last = last.wrapping_sub(1);
    }
    let mut out = Vec::with_capacity(f.len() + 2);
    out.push(Sample::new(start, left));
    if last != usize::MAX && first <= last {
        out.extend_from_slice(&f[first..=last]);
    }
    out.push(Sample::new(end, right));
    out
}

/// `rate`/`increase`/`delta`/`changes`/`resets` over `x[d] anchored` or `x[d] smoothed` (Prometheus 3
/// extended range selectors). Samples are loaded one lookback delta before each window (and after it for
/// `smoothed`), so that the boundary values can be picked or interpolated.
fn eval_extended_range_function(
    ctx: &QueryCtx<'_>,
    c: &Call,
    ms: &crate::parser::MatrixSelector,
    grid: &Grid,
) -> Result<Val, EngineError> {
    let name = c.func.name;
    let smoothed = ms.vs.smoothed;
    if smoothed && !matches!(name, "rate" | "increase" | "delta") {
        return Err(EngineError::Execution(format!(
            "smoothed modifier can only be used with: delta, increase, rate - not with {name}"
        )));
    }
    if !smoothed && !matches!(name, "rate" | "increase" | "delta" | "changes" | "resets") {
        return Err(EngineError::Execution(format!(
            "anchored modifier can only be used with: changes, delta, increase, rate, resets - not with {name}"
        )));
    }
    let vs = &ms.vs;
    let range = ms.range_ms;
    let lb = ctx.lookback_ms;
    let ahead = if smoothed { lb } else { 0 };
    let eff = super::eval::effective_times_pub(ctx, vs.at, vs.original_offset_ms, grid);
    let (lo, hi) = (eff.iter().copied().min().unwrap_or(0), eff.iter().copied().max().unwrap_or(0));
    let hints = tessera_model::SelectHints { range_ms: range, step_ms: grid.step, ..Default::default() };
    let n = grid.n;
    let k = range_kernel(name).expect("checked above");
    let is_counter = matches!(name, "rate" | "increase");
    let ext_eff: Vec<i64> = eff.iter().map(|e| e + ahead).collect();
    let window = Some((&ext_eff[..], range + lb + ahead));
    // Upstream hands start timestamps to anchored windows too; of the functions allowed here only
    // `funcResets` reads them (`extendedRate`/`extendedHistogramRate` do not).
    let want_st = ctx.opts.use_start_timestamps && name == "resets";
    let mint = lo.saturating_sub(range).saturating_sub(lb) + 1;
    let dec = super::eval::Decode { want_st, drop_stale: true, latest_from: None };
    let runs = super::eval::select_map_runs(ctx, vs, mint, hi.saturating_add(ahead), hints, dec, window, n, |labels, samples, sts, hs| {
        let fsts = sts.floats;
        if !hs.is_empty() || !fsts.is_empty() {
            // Histograms, or floats with start timestamps for `resets`: upstream `funcResets` over the
            // raw samples from `pickFirstSampleIndices` on.
            let (hs, hsts) = super::eval::drop_stale_histograms(hs, sts.histograms);
            let series = SeriesIn { labels, samples, sts: StartTimestamps { floats: fsts, histograms: &hsts }, hists: &hs, drop: true };
            return extended_with_histograms(ctx, name, series, &eff, &ext_eff, range, range + lb + ahead, smoothed, n);
        }
        let mut vals = vec![None; n];
        let mut any = false;
        for_each_window(samples, &ext_eff, range + lb + ahead, |w, i| {
            let (start, end) = (eff[i] - range, eff[i]);
            if w.is_empty() || w[0].t > end {
                return;
            }
            let v = match name {
                "rate" | "increase" | "delta" => extended_rate(w, start, end, range, smoothed, is_counter, name == "rate"),
                _ => {
                    let ext = extend_floats(w, start, end, false);
                    let win = Window { s: &ext, range_start: start, range_end: end, range_ms: range, step_t: grid.t(i), params: &[], sts: &[], drops: None };
                    if ext.is_empty() { None } else { k(&win) }
                }
            };
            if let Some(v) = v {
                vals[i] = Some(v);
                any = true;
            }
        });
        any.then(|| Series { hists: None, labels: labels.clone(), vals, drop_name: true })
    })?;
    Ok(Val::Vector(super::eval::merge_runs(runs, |s: &Series| &s.labels)))
}

/// [`eval_extended_range_function`] for a series holding histograms (or, for `resets`, floats with
/// start timestamps): per step, the float and histogram samples of the extended window; rate/increase/
/// delta as upstream `extrapolatedRate` dispatches them (a mix is dropped with a warning, histograms go
/// to `extendedHistogramRate`), changes/resets from upstream `pickFirstSampleIndices` over both kinds,
/// resets with the samples' start timestamps.
#[allow(clippy::too_many_arguments)]
fn extended_with_histograms(
    ctx: &QueryCtx<'_>,
    name: &str,
    series: SeriesIn<'_>,
    eff: &[i64],
    ext_eff: &[i64],
    range: i64,
    ext_range: i64,
    smoothed: bool,
    n: usize,
) -> Option<Series> {
    use super::hist;
    let SeriesIn { labels, samples, sts, hists: hs, .. } = series;
    let metric = labels.metric_name();
    let is_counter = matches!(name, "rate" | "increase");
    // `s[from..to]` of a start-timestamp slice, which may be empty.
    fn st_slice(s: &[i64], from: usize, to: usize) -> &[i64] {
        if s.is_empty() { s } else { &s[from..to] }
    }
    let mut fwin: Vec<(usize, usize)> = vec![(0, 0); n];
    for_each_window_idx(samples, ext_eff, ext_range, |lo, hi, i| fwin[i] = (lo, hi));
    let mut vals: Vec<Option<f64>> = vec![None; n];
    let mut hv: super::eval::HistCol = vec![None; n];
    super::eval::for_each_window_idx_by(hs.len(), |j| hs[j].t, ext_eff, ext_range, |hlo, hhi, i| {
        let (lo, hi) = fwin[i];
        let (f, h) = (&samples[lo..hi], &hs[hlo..hhi]);
        let (start, end) = (eff[i] - range, eff[i]);
        if f.is_empty() && h.is_empty() {
            return;
        }
        match name {
            "rate" | "increase" | "delta" => {
                if !f.is_empty() && !h.is_empty() {
                    ctx.warn(hist::mixed_floats_histograms_warning(metric));
                } else if !h.is_empty() {
                    if h[0].t > end {
                        return;
                    }
                    hv[i] = hist::extended_histogram_rate(ctx, metric, h, start, end, range, smoothed, is_counter, name == "rate")
                        .map(std::sync::Arc::new);
                } else if f[0].t <= end {
                    vals[i] = extended_rate(f, start, end, range, smoothed, is_counter, name == "rate");
                }
            }
            _ => {
                let f_end = lo + f.partition_point(|p| p.t <= end);
                let h_end = hlo + h.partition_point(|p| p.t <= end);
                let (f, h) = (&samples[lo..f_end], &hs[hlo..h_end]);
                let (fsts, hsts) = (st_slice(sts.floats, lo, f_end), st_slice(sts.histograms, hlo, h_end));
                if let Some((fi, hi)) = hist::pick_first_sample_indices(f, h, start) {
                    let (fsts, hsts) = (st_slice(fsts, fi, fsts.len()), st_slice(hsts, hi, hsts.len()));
                    vals[i] = hist::changes_or_resets_from(&f[fi..], fsts, &h[hi..], hsts, name == "resets");
                }
            }
        }
    });
    let mut s = Series { labels: labels.clone(), vals, hists: Some(hv), drop_name: true };
    s.tidy();
    s.any_value().then_some(s)
}

/// The labels that tie a series to its info series (upstream `identifyingLabels` default).
const IDENTIFYING_LABELS: [&str; 2] = ["instance", "job"];

/// `info(v, [selector])` (experimental; upstream `evaluator.evalInfo`): enriches each series of `v` with
/// the data labels of the info series (default `target_info`) that share its identifying labels, per step.
fn eval_info(ctx: &QueryCtx<'_>, c: &Call, grid: &Grid) -> Result<Val, EngineError> {
    let base = eval_vector(ctx, &c.args[0], grid)?;
    let mut matchers: Vec<tessera_model::Matcher> = match c.args.get(1).map(|e| e.unwrap_parens()) {
        Some(Expr::VectorSelector(vs)) => vs.matchers.clone(),
        Some(_) => return Err(EngineError::Execution("info(): the second argument must be a selector".into())),
        None => vec![],
    };
    if !matchers.iter().any(|m| m.name == "__name__") {
        matchers.push(tessera_model::Matcher::equal("__name__", "target_info"));
    }
    let (mut name_ms, data_ms): (Vec<_>, Vec<_>) = matchers.into_iter().partition(|m| m.name == "__name__");
    // Only negative name matchers: info metrics are still only the `*_info` ones.
    if name_ms.iter().all(|m| m.op.is_negative()) {
        name_ms.push(tessera_model::Matcher::new(tessera_model::MatchOp::Regex, "__name__", ".+_info").expect("valid regex"));
    }
    // Info series over the same steps; the value is the sample's timestamp (the latest sample wins).
    let sel = crate::parser::VectorSelector {
        name: None,
        matchers: name_ms.clone(),
        original_offset_ms: 0,
        offset_expr: None,
        at: None,
        anchored: false,
        smoothed: false,
        bypass_empty_matcher_check: true,
    };
    let infos = eval_vector_selector(ctx, &sel, grid, true)?;
    // Upstream `combineWithInfoVector`: a histogram among the info samples of a step with base
    // samples is an error.
    for i in 0..grid.n {
        if infos.iter().any(|s| s.hist(i).is_some()) && base.iter().any(|b| b.has(i)) {
            return Err(EngineError::Execution("info sample should be float".into()));
        }
    }
    let sig = |l: &Labels| -> (String, String) { (l.get("instance").to_string(), l.get("job").to_string()) };
    let mut by_sig: std::collections::HashMap<(String, String), Vec<usize>> = std::collections::HashMap::new();
    for (k, s) in infos.iter().enumerate() {
        by_sig.entry(sig(&s.labels)).or_default().push(k);
    }
    let include: Option<Vec<&str>> = (!data_ms.is_empty()).then(|| data_ms.iter().map(|m| m.name.as_str()).collect());
    let data_ok_empty = data_ms.iter().all(|m| m.matches(""));
    let n = grid.n;
    let mut out: Vec<Series> = Vec::new();
    for b in base {
        let name = b.labels.metric_name();
        if !name.is_empty() && name_ms.iter().all(|m| m.matches(name)) {
            out.push(b);
            continue;
        }
        let cands: &[usize] = by_sig.get(&sig(&b.labels)).map(|v| v.as_slice()).unwrap_or(&[]);
        // Per step: the chosen info series per info metric name, then the added labels.
        let mut per_labels: Vec<(Labels, Vec<Option<f64>>)> = Vec::new();
        for i in 0..n {
            let Some(v) = b.vals[i] else { continue };
            let mut chosen: Vec<(&str, usize, f64)> = Vec::new();
            for &k in cands {
                let info = &infos[k];
                let Some(ts) = info.vals[i] else { continue };
                if !data_ms.iter().all(|m| m.matches(info.labels.get(&m.name))) {
                    continue;
                }
                let nm = info.labels.metric_name();
                match chosen.iter_mut().find(|c| c.0 == nm) {
                    Some(c) if ts > c.2 => *c = (nm, k, ts),
                    Some(_) => {}
                    None => chosen.push((nm, k, ts)),
                }
            }
            if chosen.is_empty() && !data_ok_empty {
                continue;
            }
            let mut lb = LabelsBuilder::from_labels(&b.labels);
            let mut added: Vec<(tessera_model::LabelStr, tessera_model::LabelStr)> = Vec::new();
            for &(_, k, _) in &chosen {
                for l in &infos[k].labels {
                    if l.name == "__name__" || IDENTIFYING_LABELS.contains(&l.name) && include.is_none() {
                        continue;
                    }
                    if let Some(inc) = &include
                        && !inc.contains(&l.name)
                    {
                        continue;
                    }
                    if b.labels.has(l.name) {
                        continue;
                    }
                    if let Some(prev) = added.iter().find(|(n, _)| *n == l.name) {
                        if prev.1 != l.value {
                            return Err(EngineError::Execution(format!(
                                "conflicting label: {} has values {:?} and {:?} in different info metrics",
                                l.name, prev.1, l.value
                            )));
                        }
                        continue;
                    }
                    added.push((l.name.into(), l.value.into()));
                }
            }
            for (nme, val) in added {
                lb.set(nme, val);
            }
            let labels = lb.build();
            match per_labels.iter_mut().find(|(l, _)| *l == labels) {
                Some((_, vals)) => vals[i] = Some(v),
                None => {
                    let mut vals = vec![None; n];
                    vals[i] = Some(v);
                    per_labels.push((labels, vals));
                }
            }
        }
        for (labels, vals) in per_labels {
            out.push(Series { hists: None, labels, vals, drop_name: b.drop_name });
        }
    }
    Ok(Val::Vector(merge_same_labels(out)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Equal times compare equal at every length, and one time off anywhere (in a group of eight or in
    /// the rest) does not.
    #[test]
    fn same_times_finds_a_difference_anywhere() {
        for n in 0..40usize {
            let samples: Vec<Sample> = (0..n).map(|i| Sample::new(i as i64 * 10_000, 1.0)).collect();
            let times: Vec<i64> = samples.iter().map(|s| s.t).collect();
            assert!(super::same_times(&times, &samples), "{n}");
            for k in 0..n {
                let mut off = times.clone();
                off[k] += 1;
                assert!(!super::same_times(&off, &samples), "{n} {k}");
            }
        }
    }

    proptest::proptest! {
        /// The column-wise `rate`/`increase`/`delta` equals the scalar kernel to the bit at every step:
        /// random scrape gaps (duplicated timestamps excluded, as storage has none), counters with resets,
        /// gauges, NaN and infinities, steps shorter and longer than the range, times that go back.
        #[test]
        fn column_rates_equal_the_scalar_kernel(
            gaps in proptest::collection::vec(1i64..40_000, 1..200),
            regular in proptest::option::of(proptest::prop_oneof![proptest::strategy::Just(10_000i64), proptest::strategy::Just(15_000i64)]),
            vals in proptest::collection::vec(proptest::prop_oneof![
                8 => 0.0f64..1e6,
                1 => proptest::prop_oneof![proptest::strategy::Just(f64::NAN), proptest::strategy::Just(f64::INFINITY), proptest::strategy::Just(-1.0), proptest::strategy::Just(0.0)],
            ], 200),
            counter in proptest::bool::ANY,
            start in proptest::prop_oneof![
                8 => -100_000i64..100_000,
                8 => (-200i64..200).prop_map(|k| k * 500),
                // Evaluation times at the ends of the range (`@ 9.2e15`, Go's `minTime`).
                1 => proptest::strategy::Just(i64::MAX - 3 * 60_000),
                1 => proptest::strategy::Just(i64::MIN + 60_000),
            ],
            step in proptest::prop_oneof![1i64..60_000, (1i64..12).prop_map(|k| k * 5_000)],
            nsteps in 1usize..120,
            range in proptest::prop_oneof![1i64..300_000, (1i64..60).prop_map(|k| k * 5_000)],
            back in proptest::option::of(0usize..120),
        ) {
            let mut t = 0;
            let mut acc = 0.0;
            let samples: Vec<Sample> = gaps.iter().zip(&vals).map(|(g, v)| {
                t += regular.unwrap_or(*g);
                // A counter grows by `v` and resets to `v` now and then; a gauge is `v`. Whole values
                // on a regular grid make the extrapolation's comparisons meet exactly.
                acc = if counter && !v.is_nan() && *v > 100.0 { acc + v } else { *v };
                Sample { t, v: acc }
            }).collect();
            let mut eff: Vec<i64> = (0..nsteps as i64).map(|i| start.saturating_add(i * step)).collect();
            if let Some(b) = back.filter(|b| *b < eff.len()) {
                eff[b] = eff[b].saturating_sub(3 * step);
            }
            // A second series scraped with the first (its times, other values: a counter from zero
            // growing faster than the first) meets the factors the first left in the memo.
            let mut acc2 = 0.0;
            let twin: Vec<Sample> = samples.iter().zip(vals.iter().rev()).map(|(s, v)| {
                acc2 = if counter && !v.is_nan() && *v > 100.0 { acc2 + v * 3.0 } else { *v };
                Sample { t: s.t, v: acc2 }
            }).collect();
            // One with the twin's values whose middle sample comes a millisecond later (where the
            // next one leaves room): the twin's windows must not be taken for its own.
            let mut shifted = twin.clone();
            let mid = shifted.len() / 2;
            if shifted.get(mid + 1).is_none_or(|next| next.t > shifted[mid].t + 1) {
                shifted[mid].t += 1;
            }
            // Function by function, series after series: each series meets what the one before it
            // left in the thread's memo and window plan.
            let all = [samples.clone(), twin, shifted, samples];
            for (is_counter, is_rate) in [(true, true), (true, false), (false, false)] {
                for samples in &all {
                    let drops = Drops::find(samples);
                    let mut got = vec![None; eff.len()];
                    let n = extrapolated_rates(|| Ok(()), samples, &drops, &eff, range, is_counter, is_rate, &mut got).expect("no deadline");
                    let mut want = vec![None; eff.len()];
                    let mut want_n = 0;
                    for_each_window_idx(samples, &eff, range, |lo, hi, i| {
                        if lo == hi {
                            return;
                        }
                        want_n += hi - lo;
                        let w = Window {
                            s: &samples[lo..hi],
                            range_start: eff[i] - range,
                            range_end: eff[i],
                            range_ms: range,
                            step_t: eff[i],
                            params: &[],
                            sts: &[],
                            drops: is_counter.then(|| Drops::within(&drops, lo, hi)),
                        };
                        want[i] = extrapolated_rate(&w, is_counter, is_rate);
                    });
                    let bits = |v: &[Option<f64>]| v.iter().map(|x| x.map(f64::to_bits)).collect::<Vec<_>>();
                    proptest::prop_assert_eq!(bits(&got), bits(&want), "counter {} rate {}", is_counter, is_rate);
                    proptest::prop_assert_eq!(n, want_n);
                }
            }
        }
    }

    /// A window whose clamped `to_start` is just above its sampled interval, on a counter whose first
    /// value is barely above its increase: upstream's zero bound (10.204 s) cuts `to_start` (10.5 s),
    /// so the memoised factor must not be used, even when the memo holds the window's times.
    #[test]
    fn memoised_rate_factor_leaves_the_zero_bound_to_upstream() {
        let s = [Sample::new(1_000, 10.0), Sample::new(11_000, 19.8)];
        let (e, range) = (11_000, 20_500);
        for _ in 0..2 {
            for (is_counter, is_rate) in [(true, true), (true, false), (false, false)] {
                let mut got = [None];
                extrapolated_rates(|| Ok(()), &s, &[], &[e], range, is_counter, is_rate, &mut got).expect("no deadline");
                let w = Window {
                    s: &s,
                    range_start: e - range,
                    range_end: e,
                    range_ms: range,
                    step_t: e,
                    params: &[],
                    sts: &[],
                    drops: is_counter.then(|| Drops::within(&[], 0, 2)),
                };
                let want = extrapolated_rate(&w, is_counter, is_rate);
                assert_eq!(got[0].map(f64::to_bits), want.map(f64::to_bits), "counter {is_counter} rate {is_rate}");
            }
        }
        // The bound applied: increase = 9.8 * (10 + 10.204 + 0) / 10, not 9.8 * 20.5 / 10.
        let mut got = [None];
        extrapolated_rates(|| Ok(()), &s, &[], &[e], range, true, false, &mut got).expect("no deadline");
        assert!((got[0].expect("two samples") - 9.8 * (10.0 + 10.0 / 9.8 * 10.0) / 10.0).abs() < 1e-9, "{got:?}");
    }

    #[test]
    fn dates() {
        assert_eq!(time_part("year", 0.0), 1970.0);
        assert_eq!(time_part("day_of_week", 0.0), 4.0);
        // 2024-02-29 12:34:56 UTC
        let t = 1_709_210_096.0;
        assert_eq!(time_part("month", t), 2.0);
        assert_eq!(time_part("day_of_month", t), 29.0);
        assert_eq!(time_part("days_in_month", t), 29.0);
        assert_eq!(time_part("day_of_year", t), 60.0);
        assert_eq!(time_part("hour", t), 12.0);
        assert_eq!(time_part("minute", t), 34.0);
    }

    /// Rows printed by Go 1.26's `time.Unix(int64(v), 0).UTC()`: (v, year, month, day, hour, minute,
    /// weekday, yearday, days in month).
    #[test]
    fn dates_truncate_toward_zero_as_go() {
        let rows = [
            (-0.5, 1970.0, 1.0, 1.0, 0.0, 0.0, 4.0, 1.0, 31.0),
            (-1.5, 1969.0, 12.0, 31.0, 23.0, 59.0, 3.0, 365.0, 31.0),
            (9.2e18, 291536396232.0, 8.0, 31.0, 11.0, 33.0, 5.0, 244.0, 31.0),
            (-9.2e18, -291536392293.0, 5.0, 3.0, 12.0, 26.0, 2.0, 123.0, 31.0),
            (1e12, 33658.0, 9.0, 27.0, 1.0, 46.0, 5.0, 270.0, 30.0),
            (-62135596801.0, 0.0, 12.0, 31.0, 23.0, 59.0, 0.0, 366.0, 31.0),
        ];
        for (v, y, mo, d, h, mi, wd, yd, dim) in rows {
            let got = ["year", "month", "day_of_month", "hour", "minute", "day_of_week", "day_of_year", "days_in_month"]
                .map(|n| time_part(n, v));
            assert_eq!(got, [y, mo, d, h, mi, wd, yd, dim], "{v}");
        }
        for v in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 1e20, -1e20] {
            assert!(time_part("year", v).is_nan(), "{v}");
        }
    }

    fn win<'a>(s: &'a [Sample], sts: &'a [i64], start: i64, end: i64) -> Window<'a> {
        Window { s, range_start: start, range_end: end, range_ms: end - start, step_t: end, params: &[], sts, drops: None }
    }

    #[test]
    fn start_timestamp_resets() {
        // Not a reset: ST unknown, ST == T (unknown start), ST > T (invalid), ST before the previous sample.
        assert!(!is_st_reset(0, 60, 0, 120));
        assert!(!is_st_reset(0, 60, 120, 120));
        assert!(!is_st_reset(0, 60, 130, 120));
        assert!(!is_st_reset(30, 60, 30, 120));
        // Start after the previous sample: a reset.
        assert!(is_st_reset(0, 60, 90, 120));
        // Start at the previous sample: a delta sample if the previous one had a usable start time.
        assert!(is_st_reset(30, 60, 60, 120));
        assert!(!is_st_reset(0, 60, 60, 120));
        assert!(!is_st_reset(60, 60, 60, 120));
        assert!(!is_st_reset(90, 60, 60, 120));
        // Overlaps: a start before the previous sample that is not the shared cumulative start.
        assert!(st_overlaps(0, 120, 60));
        assert!(!st_overlaps(60, 120, 60));
        assert!(!st_overlaps(0, 120, 120));
        assert!(!st_overlaps(0, 120, 0));
    }

    #[test]
    fn rate_kernels_with_start_timestamps() {
        let s = [Sample::new(60_000, 10.0), Sample::new(120_000, 12.0)];
        // Plain counter: increase 2 over 60s of samples, extrapolated by 10s on each side.
        let none: [i64; 0] = [];
        let inc = extrapolated_rate(&win(&s, &none, 50_000, 130_000), true, false).expect("value");
        assert!((inc - 2.0 * 80.0 / 60.0).abs() < 1e-9, "{inc}");
        // A start-timestamp reset before the second sample adds the first value.
        let sts = [1_000, 90_000];
        let inc = extrapolated_rate(&win(&s, &sts, 50_000, 130_000), true, false).expect("value");
        assert!((inc - 12.0 * 80.0 / 60.0).abs() < 1e-9, "{inc}");
        // delta() ignores start timestamps.
        let d = extrapolated_rate(&win(&s, &sts, 50_000, 130_000), false, false).expect("value");
        assert!((d - 2.0 * 80.0 / 60.0).abs() < 1e-9, "{d}");
        // irate and resets see the reset too.
        assert_eq!(instant_value(&win(&s, &none, 0, 130_000), true), Some(2.0 / 60.0));
        assert_eq!(instant_value(&win(&s, &sts, 0, 130_000), true), Some(12.0 / 60.0));
        assert_eq!(resets(&win(&s, &none, 0, 130_000)), Some(0.0));
        assert_eq!(resets(&win(&s, &sts, 0, 130_000)), Some(1.0));
        // A single sample has an increase when its start time lies inside the window: from 0 at ST.
        let one = [Sample::new(60_000, 5.0)];
        assert_eq!(extrapolated_rate(&win(&one, &none, 0, 120_000), true, false), None);
        assert_eq!(extrapolated_rate(&win(&one, &[30_000], 0, 120_000), true, false), Some(5.0));
        assert_eq!(extrapolated_rate(&win(&one, &[30_000], 0, 120_000), true, true), Some(5.0 / 120.0));
        // A start time on the (exclusive) window start is outside: no value.
        assert_eq!(extrapolated_rate(&win(&one, &[0], 0, 120_000), true, false), None);
        // Two samples, the first starting inside the window: no left extrapolation, sampled from ST.
        let sts2 = [40_000, 40_000];
        let inc = extrapolated_rate(&win(&s, &sts2, 0, 120_000), true, false).expect("value");
        assert!((inc - 12.0).abs() < 1e-9, "{inc}");
    }

    #[test]
    fn quantiles_and_natural_order() {
        let mut v = vec![3.0, 1.0, 2.0, 4.0];
        assert_eq!(quantile(0.5, &mut v), 2.5);
        assert_eq!(natural_cmp("a10", "a9"), std::cmp::Ordering::Greater);
        assert_eq!(fmt_g(1.1), "1.1");
        assert_eq!(fmt_g(-1e-5), "-1e-05");
    }

    use proptest::prelude::*;
    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 512, failure_persistence: None, ..Default::default() })]

        /// rate and increase over precomputed drops give what the scan over each window gives, to the
        /// bit: counters with resets, repeated values, NaN and infinities, windows anywhere.
        #[test]
        fn counter_drops_found_once_give_the_scanned_answer(
            vals in proptest::collection::vec(proptest::prop_oneof![
                8 => (0u32..1000).prop_map(|v| v as f64 * 0.5),
                1 => proptest::prelude::Just(f64::NAN),
                1 => proptest::prelude::Just(f64::INFINITY),
                1 => (0u32..10).prop_map(|v| v as f64),
            ], 0..60),
            gaps in proptest::collection::vec(1i64..30_000, 60),
            windows in proptest::collection::vec((0i64..2_000_000, 1i64..600_000), 1..20),
        ) {
            let mut t = 0;
            let s: Vec<Sample> = vals.iter().zip(&gaps).map(|(&v, &g)| { t += g; Sample::new(t, v) }).collect();
            let all = Drops::find(&s);
            prop_assert!(all.windows(2).all(|w| w[0] < w[1]));
            for (end, range) in windows {
                let lo = s.partition_point(|x| x.t <= end - range);
                let hi = s.partition_point(|x| x.t <= end);
                let scan = win(&s[lo..hi], &[], end - range, end);
                let fast = Window { drops: Some(Drops::within(&all, lo, hi)), ..win(&s[lo..hi], &[], end - range, end) };
                for is_rate in [false, true] {
                    let (a, b) = (extrapolated_rate(&scan, true, is_rate), extrapolated_rate(&fast, true, is_rate));
                    prop_assert_eq!(a.map(f64::to_bits), b.map(f64::to_bits), "window ({}, {}] rate {}", end - range, end, is_rate);
                }
            }
        }
    }
}
