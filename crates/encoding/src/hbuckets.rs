//! Downsampling buckets of native histograms (`ChunkEncoding::HistBuckets`, Tessera's own): the
//! histogram counterpart of [`crate::buckets`], with the same bucket and window rules (bucket `k` keeps
//! an *edge* aggregate for the sample at exactly `k·R` and a *body* aggregate for `(k·R, (k+1)·R)`, so
//! a PromQL window `(a·R, b·R]` is exactly a run of records folded in time order with [`HAgg::merge`]).
//!
//! # What an aggregate keeps
//! Over the histogram samples of its span, stale markers excluded: count, first, last and penultimate
//! sample (time and histogram, counter-reset hint included), the sum of all histograms (what
//! `sum_over_time`/`avg_over_time` need), the counter correction (the sum of the histograms just before
//! each detected counter reset, except a reset between the first two samples, which upstream's
//! `histogramRate` handles by dropping the first sample: kept apart as [`HAgg::second_reset`]), resets
//! and changes (upstream's `DetectReset` and `Equals` between neighbours), the number of samples with a
//! gauge hint and whether counter-reset and not-counter-reset hints were seen (for the annotations
//! upstream adds). [`HAgg::clean`] says whether every histogram of the span shares the first one's
//! schema, zero threshold and custom bounds: only then are additions independent of their order and the
//! aggregate answers exactly; the reader approximates otherwise (and says so). For the instant
//! selector's lookback, the time of the last raw histogram (stale markers included), whether it was a
//! stale marker, and the time of the last raw *float* sample of the same span (a histogram series'
//! staleness markers often arrive as float stale NaNs).
//!
//! # Bytes
//! A version byte (1), `uvarint R`, `uvarint n`, then per bucket `varint` the step from the previous
//! bucket index (from 0 for the first), a presence byte (edge, body), and each present aggregate: a
//! flag byte, counts as uvarints, times as varints, and its histograms, each coded against the previous
//! histogram of its role (samples, sums, corrections): the layout only when it changed, integer counts
//! as varint differences (see `docs/format/chunks.md`). Decoding is bounded by the data and checks every
//! histogram with `FloatHistogram::validate`; bad bytes are a [`ChunkError`], never a panic.

use crate::varint::{put_uvarint, put_varint, read_uvarint, read_varint};
use crate::ChunkError;
use tessera_model::histogram::{CounterResetHint, Span};
use tessera_model::{FloatHistogram, Sample};

/// Most buckets one chunk may announce.
pub const MAX_HBUCKETS_PER_CHUNK: u64 = 1 << 20;

/// An aggregate of a run of histogram samples, in time order (see the module docs).
#[derive(Debug, Clone, PartialEq)]
pub struct HAgg {
    /// Histogram samples (stale markers excluded).
    pub count: u32,
    pub first_t: i64,
    pub first: FloatHistogram,
    pub last_t: i64,
    pub last: FloatHistogram,
    /// The sample before the last (meaningful when `count >= 2`).
    pub penult_t: i64,
    pub penult: FloatHistogram,
    /// The sum of every histogram (meaningful when `count >= 1`).
    pub sum: FloatHistogram,
    /// The sum of the histograms just before each detected reset, the one between the first two
    /// samples excepted (`None`: zero).
    pub corr: Option<FloatHistogram>,
    /// `count >= 2` and the second sample is a counter reset after the first.
    pub second_reset: bool,
    pub resets: u32,
    pub changes: u32,
    /// Samples with a gauge counter-reset hint.
    pub gauges: u32,
    /// A sample with a `CounterReset` hint, one with a `NotCounterReset` hint.
    pub hint_reset: bool,
    pub hint_not_reset: bool,
    /// Every histogram has the first one's schema, zero threshold and custom bounds, and every
    /// addition succeeded.
    pub clean: bool,
    /// Any raw histogram sample at all, stale markers included; the last one's time; whether it was a
    /// stale marker.
    pub raw: bool,
    pub raw_t: i64,
    pub tail_stale: bool,
    /// The time of the last raw float sample in the same span (`i64::MIN`: none).
    pub float_raw_t: i64,
}

impl Default for HAgg {
    fn default() -> Self {
        HAgg {
            count: 0,
            first_t: 0,
            first: FloatHistogram::default(),
            last_t: 0,
            last: FloatHistogram::default(),
            penult_t: 0,
            penult: FloatHistogram::default(),
            sum: FloatHistogram::default(),
            corr: None,
            second_reset: false,
            resets: 0,
            changes: 0,
            gauges: 0,
            hint_reset: false,
            hint_not_reset: false,
            clean: true,
            raw: false,
            raw_t: 0,
            tail_stale: false,
            float_raw_t: i64::MIN,
        }
    }
}

/// Whether two histograms share the parameters that make additions order-independent.
pub fn same_layout(a: &FloatHistogram, b: &FloatHistogram) -> bool {
    a.schema == b.schema && a.zero_threshold.to_bits() == b.zero_threshold.to_bits() && a.custom_values == b.custom_values
}

fn add_into(acc: &mut Option<FloatHistogram>, h: &FloatHistogram) -> bool {
    match acc {
        None => {
            *acc = Some(h.clone());
            true
        }
        Some(a) => a.add(h).is_ok(),
    }
}

impl HAgg {
    /// The aggregate of one (non-stale) histogram sample.
    pub fn single(t: i64, h: &FloatHistogram) -> HAgg {
        HAgg {
            count: 1,
            first_t: t,
            first: h.clone(),
            last_t: t,
            last: h.clone(),
            sum: h.clone(),
            gauges: u32::from(h.counter_reset_hint == CounterResetHint::Gauge),
            hint_reset: h.counter_reset_hint == CounterResetHint::CounterReset,
            hint_not_reset: h.counter_reset_hint == CounterResetHint::NotCounterReset,
            raw: true,
            raw_t: t,
            ..HAgg::default()
        }
    }

    /// Adds the next histogram sample (in time order). Stale markers only mark the tail.
    pub fn push(&mut self, t: i64, h: &FloatHistogram) {
        if h.is_stale() {
            self.raw = true;
            self.raw_t = t;
            self.tail_stale = true;
            return;
        }
        let s = HAgg::single(t, h);
        self.merge(&s);
    }

    /// Appends `next`, which follows `self` in time.
    pub fn merge(&mut self, next: &HAgg) {
        self.float_raw_t = self.float_raw_t.max(next.float_raw_t);
        if !next.raw {
            return;
        }
        self.raw = true;
        self.raw_t = next.raw_t;
        self.tail_stale = next.tail_stale;
        if next.count == 0 {
            return;
        }
        if self.count == 0 {
            let (raw_t, tail, frt) = (self.raw_t, self.tail_stale, self.float_raw_t);
            *self = next.clone();
            self.raw_t = raw_t;
            self.tail_stale = tail;
            self.float_raw_t = frt;
            return;
        }
        let boundary = next.first.detect_reset(&self.last);
        let mut clean = self.clean && next.clean && same_layout(&self.first, &next.first);
        if self.count >= 2 {
            if boundary {
                clean &= add_into(&mut self.corr, &self.last.clone());
            }
        } else {
            self.second_reset = boundary;
        }
        if next.second_reset {
            clean &= add_into(&mut self.corr, &next.first);
        }
        if let Some(c) = &next.corr {
            clean &= add_into(&mut self.corr, c);
        }
        clean &= self.sum.add(&next.sum).is_ok();
        self.resets += next.resets + u32::from(boundary);
        self.changes += next.changes + u32::from(!next.first.equals(&self.last));
        self.gauges += next.gauges;
        self.hint_reset |= next.hint_reset;
        self.hint_not_reset |= next.hint_not_reset;
        self.clean = clean;
        if next.count >= 2 {
            self.penult_t = next.penult_t;
            self.penult = next.penult.clone();
        } else {
            self.penult_t = self.last_t;
            self.penult = std::mem::take(&mut self.last);
        }
        self.last_t = next.last_t;
        self.last = next.last.clone();
        self.count += next.count;
    }
}

/// Bucket `k` of a histogram series at resolution `R` (see the module docs).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct HBucket {
    pub k: i64,
    pub edge: HAgg,
    pub body: HAgg,
}

/// Buckets of a series' time-sorted histogram samples (stale markers included) at resolution `r_ms`,
/// with the times of its raw float samples (`floats`, stale markers included) noted per span; appended
/// to `out` in bucket order. Buckets without any raw sample of either kind are left out.
pub fn hbucketize(floats: &[Sample], hists: &[(i64, FloatHistogram)], r_ms: i64, out: &mut Vec<HBucket>) {
    assert!(r_ms > 0, "bucket resolution must be positive");
    let (mut i, mut j) = (0, 0);
    while i < floats.len() || j < hists.len() {
        let take_float = j >= hists.len() || (i < floats.len() && floats[i].t < hists[j].0);
        let t = if take_float { floats[i].t } else { hists[j].0 };
        let k = t.div_euclid(r_ms);
        if out.last().is_none_or(|b| b.k != k) {
            out.push(HBucket { k, ..HBucket::default() });
        }
        let b = out.last_mut().expect("pushed");
        let a = if t == k * r_ms { &mut b.edge } else { &mut b.body };
        if take_float {
            a.float_raw_t = t;
            i += 1;
        } else {
            a.push(t, &hists[j].1);
            j += 1;
        }
    }
}

/// Format version, the chunk's first byte.
const VERSION: u8 = 1;

const F_SECOND_RESET: u8 = 1;
const F_HINT_RESET: u8 = 2;
const F_HINT_NOT_RESET: u8 = 4;
const F_CLEAN: u8 = 8;
const F_RAW: u8 = 16;
const F_TAIL_STALE: u8 = 32;
const F_FLOAT_RAW: u8 = 64;
const F_CORR: u8 = 128;

fn put_f64(out: &mut Vec<u8>, v: f64) {
    out.extend_from_slice(&v.to_bits().to_le_bytes());
}

fn put_spans(out: &mut Vec<u8>, spans: &[Span]) {
    put_uvarint(out, spans.len() as u64);
    for s in spans {
        put_varint(out, i64::from(s.offset));
        put_uvarint(out, u64::from(s.length));
    }
}

fn put_f64s(out: &mut Vec<u8>, vs: &[f64]) {
    put_uvarint(out, vs.len() as u64);
    for v in vs {
        put_f64(out, *v);
    }
}

/// The previous histogram of each role in a chunk, which the next one of that role is coded against.
#[derive(Default)]
struct Ctx {
    /// First, last and penultimate samples, in the order written.
    sample: Option<FloatHistogram>,
    sum: Option<FloatHistogram>,
    corr: Option<FloatHistogram>,
}

#[derive(Clone, Copy)]
enum Role {
    Sample,
    Sum,
    Corr,
}

impl Ctx {
    fn prev(&mut self, role: Role) -> &mut Option<FloatHistogram> {
        match role {
            Role::Sample => &mut self.sample,
            Role::Sum => &mut self.sum,
            Role::Corr => &mut self.corr,
        }
    }
}

const H_SAME_LAYOUT: u8 = 4;
const H_INTEGRAL: u8 = 8;
const H_DELTA: u8 = 16;

/// Whether every count is an integer a varint carries exactly (and not −0).
fn integral(h: &FloatHistogram) -> bool {
    let ok = |v: f64| v.fract() == 0.0 && v.abs() <= 9_007_199_254_740_992.0 && v.to_bits() != (-0.0f64).to_bits();
    ok(h.zero_count) && ok(h.count) && h.positive_buckets.iter().all(|v| ok(*v)) && h.negative_buckets.iter().all(|v| ok(*v))
}

fn layout_eq(a: &FloatHistogram, b: &FloatHistogram) -> bool {
    same_layout(a, b) && a.positive_spans == b.positive_spans && a.negative_spans == b.negative_spans
}

fn counts(h: &FloatHistogram) -> impl Iterator<Item = f64> + '_ {
    [h.zero_count, h.count].into_iter().chain(h.positive_buckets.iter().copied()).chain(h.negative_buckets.iter().copied())
}

/// A histogram, coded against the previous one of its role: its layout only when it changed, integer
/// counts as (zigzag) varints, as differences from the previous counts when both are integers of one
/// layout (a counter's next histogram costs about a byte per bucket).
fn put_hist(out: &mut Vec<u8>, h: &FloatHistogram, ctx: &mut Ctx, role: Role) {
    let prev = ctx.prev(role);
    let same = prev.as_ref().is_some_and(|p| layout_eq(p, h));
    let int = integral(h);
    let delta = same && int && prev.as_ref().is_some_and(integral);
    let mut f = h.counter_reset_hint as u8;
    for (on, bit) in [(same, H_SAME_LAYOUT), (int, H_INTEGRAL), (delta, H_DELTA)] {
        if on {
            f |= bit;
        }
    }
    out.push(f);
    if !same {
        put_varint(out, i64::from(h.schema));
        put_f64(out, h.zero_threshold);
        put_spans(out, &h.positive_spans);
        put_spans(out, &h.negative_spans);
        put_f64s(out, &h.custom_values);
        put_uvarint(out, h.positive_buckets.len() as u64);
        put_uvarint(out, h.negative_buckets.len() as u64);
    }
    put_f64(out, h.sum);
    if delta {
        let p = prev.as_ref().expect("delta has a previous histogram");
        for (v, pv) in counts(h).zip(counts(p)) {
            put_varint(out, v as i64 - pv as i64);
        }
    } else if int {
        for v in counts(h) {
            put_varint(out, v as i64);
        }
    } else {
        for v in counts(h) {
            put_f64(out, v);
        }
    }
    *prev = Some(h.clone());
}

fn put_agg(out: &mut Vec<u8>, a: &HAgg, ctx: &mut Ctx) {
    let mut f = 0;
    for (on, bit) in [
        (a.second_reset, F_SECOND_RESET),
        (a.hint_reset, F_HINT_RESET),
        (a.hint_not_reset, F_HINT_NOT_RESET),
        (a.clean, F_CLEAN),
        (a.raw, F_RAW),
        (a.tail_stale, F_TAIL_STALE),
        (a.float_raw_t != i64::MIN, F_FLOAT_RAW),
        (a.corr.is_some(), F_CORR),
    ] {
        if on {
            f |= bit;
        }
    }
    out.push(f);
    if a.raw {
        put_varint(out, a.raw_t);
    }
    if a.float_raw_t != i64::MIN {
        put_varint(out, a.float_raw_t);
    }
    put_uvarint(out, u64::from(a.count));
    if a.count == 0 {
        return;
    }
    for v in [a.resets, a.changes, a.gauges] {
        put_uvarint(out, u64::from(v));
    }
    put_varint(out, a.first_t);
    put_hist(out, &a.first, ctx, Role::Sample);
    if a.count >= 2 {
        put_varint(out, a.last_t.wrapping_sub(a.first_t));
        put_hist(out, &a.last, ctx, Role::Sample);
        put_hist(out, &a.sum, ctx, Role::Sum);
    }
    if a.count >= 3 {
        put_varint(out, a.penult_t.wrapping_sub(a.first_t));
        put_hist(out, &a.penult, ctx, Role::Sample);
    }
    if let Some(c) = &a.corr {
        put_hist(out, c, ctx, Role::Corr);
    }
}

/// Encodes buckets (ascending `k`) of resolution `r_ms`.
pub fn encode_hbuckets(r_ms: i64, buckets: &[HBucket]) -> Vec<u8> {
    let mut out = vec![VERSION];
    put_uvarint(&mut out, r_ms as u64);
    put_uvarint(&mut out, buckets.len() as u64);
    let mut prev = 0i64;
    let mut ctx = Ctx::default();
    for b in buckets {
        put_varint(&mut out, b.k.wrapping_sub(prev));
        prev = b.k;
        let (e, bo) = (b.edge.raw || b.edge.float_raw_t != i64::MIN, b.body.raw || b.body.float_raw_t != i64::MIN);
        out.push(u8::from(e) | (u8::from(bo) << 1));
        if e {
            put_agg(&mut out, &b.edge, &mut ctx);
        }
        if bo {
            put_agg(&mut out, &b.body, &mut ctx);
        }
    }
    out
}

struct Rd<'a> {
    d: &'a [u8],
    off: usize,
}

fn corrupt(off: usize, reason: &'static str) -> ChunkError {
    ChunkError::Corrupt { offset: off, reason }
}

impl Rd<'_> {
    fn u8(&mut self) -> Result<u8, ChunkError> {
        let b = *self.d.get(self.off).ok_or(ChunkError::Truncated { offset: self.off })?;
        self.off += 1;
        Ok(b)
    }
    fn uv(&mut self) -> Result<u64, ChunkError> {
        let rest = &self.d[self.off..];
        let (v, left) = read_uvarint(rest).map_err(|_| ChunkError::Truncated { offset: self.off })?;
        self.off += rest.len() - left.len();
        Ok(v)
    }
    fn v(&mut self) -> Result<i64, ChunkError> {
        let rest = &self.d[self.off..];
        let (v, left) = read_varint(rest).map_err(|_| ChunkError::Truncated { offset: self.off })?;
        self.off += rest.len() - left.len();
        Ok(v)
    }
    fn u32(&mut self) -> Result<u32, ChunkError> {
        let off = self.off;
        u32::try_from(self.uv()?).map_err(|_| corrupt(off, "count out of range"))
    }
    fn f64(&mut self) -> Result<f64, ChunkError> {
        let b = self.d.get(self.off..self.off + 8).ok_or(ChunkError::Truncated { offset: self.off })?;
        self.off += 8;
        Ok(f64::from_bits(u64::from_le_bytes(b.try_into().expect("8 bytes"))))
    }
    /// A length of items each at least `min` bytes long, checked against the bytes left.
    fn len(&mut self, min: usize) -> Result<usize, ChunkError> {
        let off = self.off;
        let n = self.uv()?;
        if n > ((self.d.len() - self.off) / min) as u64 {
            return Err(corrupt(off, "length beyond the data"));
        }
        Ok(n as usize)
    }
    fn spans(&mut self) -> Result<Vec<Span>, ChunkError> {
        let n = self.len(2)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let off = self.off;
            let offset = i32::try_from(self.v()?).map_err(|_| corrupt(off, "span offset out of range"))?;
            let length = self.u32()?;
            out.push(Span { offset, length });
        }
        Ok(out)
    }
    fn f64s(&mut self) -> Result<Vec<f64>, ChunkError> {
        let n = self.len(8)?;
        (0..n).map(|_| self.f64()).collect()
    }
    fn hist(&mut self, ctx: &mut Ctx, role: Role) -> Result<FloatHistogram, ChunkError> {
        let off = self.off;
        let f = self.u8()?;
        if f >> 5 != 0 {
            return Err(corrupt(off, "unknown histogram flags"));
        }
        let counter_reset_hint = match f & 3 {
            0 => CounterResetHint::Unknown,
            1 => CounterResetHint::CounterReset,
            2 => CounterResetHint::NotCounterReset,
            _ => CounterResetHint::Gauge,
        };
        let (same, int, delta) = (f & H_SAME_LAYOUT != 0, f & H_INTEGRAL != 0, f & H_DELTA != 0);
        let prev = ctx.prev(role);
        if (same && prev.is_none()) || (delta && !(same && int)) || (delta && !prev.as_ref().is_some_and(integral)) {
            return Err(corrupt(off, "histogram coded against nothing"));
        }
        let mut h = match (same, prev.as_ref()) {
            (true, Some(p)) => FloatHistogram {
                schema: p.schema,
                zero_threshold: p.zero_threshold,
                positive_spans: p.positive_spans.clone(),
                negative_spans: p.negative_spans.clone(),
                custom_values: p.custom_values.clone(),
                positive_buckets: vec![0.0; p.positive_buckets.len()],
                negative_buckets: vec![0.0; p.negative_buckets.len()],
                ..FloatHistogram::default()
            },
            _ => {
                let schema = i32::try_from(self.v()?).map_err(|_| corrupt(off, "schema out of range"))?;
                let zero_threshold = self.f64()?;
                let positive_spans = self.spans()?;
                let negative_spans = self.spans()?;
                let custom_values = self.f64s()?;
                // Each count takes at least a byte.
                let np = self.len(1)?;
                let nn = self.len(1)?;
                FloatHistogram {
                    schema,
                    zero_threshold,
                    positive_spans,
                    negative_spans,
                    custom_values,
                    positive_buckets: vec![0.0; np],
                    negative_buckets: vec![0.0; nn],
                    ..FloatHistogram::default()
                }
            }
        };
        h.counter_reset_hint = counter_reset_hint;
        h.sum = self.f64()?;
        let n = 2 + h.positive_buckets.len() + h.negative_buckets.len();
        let mut vals = Vec::with_capacity(n);
        let prev_counts: Vec<f64> = if delta { prev.as_ref().map(|p| counts(p).collect()).unwrap_or_default() } else { Vec::new() };
        for i in 0..n {
            let off = self.off;
            let v = if int {
                let d = self.v()?;
                let base = if delta { prev_counts.get(i).map_or(0, |p| *p as i64) } else { 0 };
                let v = base.checked_add(d).ok_or(corrupt(off, "count out of range"))?;
                if v.unsigned_abs() > 1 << 53 {
                    return Err(corrupt(off, "count out of range"));
                }
                v as f64
            } else {
                self.f64()?
            };
            vals.push(v);
        }
        h.zero_count = vals[0];
        h.count = vals[1];
        let np = h.positive_buckets.len();
        h.positive_buckets.copy_from_slice(&vals[2..2 + np]);
        h.negative_buckets.copy_from_slice(&vals[2 + np..]);
        h.validate().map_err(|_| corrupt(off, "invalid histogram"))?;
        *prev = Some(h.clone());
        Ok(h)
    }
    fn agg(&mut self, ctx: &mut Ctx) -> Result<HAgg, ChunkError> {
        let f = self.u8()?;
        let mut a = HAgg {
            second_reset: f & F_SECOND_RESET != 0,
            hint_reset: f & F_HINT_RESET != 0,
            hint_not_reset: f & F_HINT_NOT_RESET != 0,
            clean: f & F_CLEAN != 0,
            raw: f & F_RAW != 0,
            tail_stale: f & F_TAIL_STALE != 0,
            ..HAgg::default()
        };
        if a.raw {
            a.raw_t = self.v()?;
        }
        if f & F_FLOAT_RAW != 0 {
            a.float_raw_t = self.v()?;
        }
        let off = self.off;
        a.count = self.u32()?;
        if a.count > 0 && !a.raw {
            return Err(corrupt(off, "samples without raw samples"));
        }
        if a.count == 0 {
            if f & (F_CORR | F_SECOND_RESET) != 0 {
                return Err(corrupt(off, "flags of samples without samples"));
            }
            return Ok(a);
        }
        a.resets = self.u32()?;
        a.changes = self.u32()?;
        a.gauges = self.u32()?;
        a.first_t = self.v()?;
        a.first = self.hist(ctx, Role::Sample)?;
        (a.last_t, a.last, a.sum) = (a.first_t, a.first.clone(), a.first.clone());
        if a.count >= 2 {
            a.last_t = a.first_t.wrapping_add(self.v()?);
            a.last = self.hist(ctx, Role::Sample)?;
            a.sum = self.hist(ctx, Role::Sum)?;
            (a.penult_t, a.penult) = (a.first_t, a.first.clone());
        }
        if a.count >= 3 {
            a.penult_t = a.first_t.wrapping_add(self.v()?);
            a.penult = self.hist(ctx, Role::Sample)?;
        }
        if f & F_CORR != 0 {
            a.corr = Some(self.hist(ctx, Role::Corr)?);
        }
        Ok(a)
    }
}

/// The resolution and bucket count a chunk announces.
pub fn hbuckets_header(data: &[u8]) -> Result<(i64, u64), ChunkError> {
    let mut r = Rd { d: data, off: 0 };
    if r.u8()? != VERSION {
        return Err(corrupt(0, "unknown histogram bucket chunk version"));
    }
    let off = r.off;
    let res = r.uv()?;
    if res == 0 || res > i64::MAX as u64 {
        return Err(corrupt(off, "resolution out of range"));
    }
    let off = r.off;
    let n = r.uv()?;
    if n > MAX_HBUCKETS_PER_CHUNK || n > (data.len() - r.off) as u64 {
        return Err(corrupt(off, "more buckets than the data holds"));
    }
    Ok((res as i64, n))
}

/// Decodes a chunk's buckets, appended to `out`; returns the resolution. On error `out` is unchanged.
pub fn decode_hbuckets_into(data: &[u8], out: &mut Vec<HBucket>) -> Result<i64, ChunkError> {
    let (res, n) = hbuckets_header(data)?;
    let mut r = Rd { d: data, off: 0 };
    r.u8()?;
    r.uv()?;
    r.uv()?;
    let mut got = Vec::with_capacity(n as usize);
    let mut k = 0i64;
    let mut ctx = Ctx::default();
    for i in 0..n {
        let off = r.off;
        let dk = r.v()?;
        if i > 0 && dk <= 0 {
            return Err(corrupt(off, "bucket indexes not ascending"));
        }
        k = k.checked_add(dk).ok_or(corrupt(off, "bucket index out of range"))?;
        if k.checked_mul(res).is_none() {
            return Err(corrupt(off, "bucket index out of range"));
        }
        let off = r.off;
        let p = r.u8()?;
        if p == 0 || p > 3 {
            return Err(corrupt(off, "bad presence byte"));
        }
        let edge = if p & 1 != 0 { r.agg(&mut ctx)? } else { HAgg::default() };
        let body = if p & 2 != 0 { r.agg(&mut ctx)? } else { HAgg::default() };
        got.push(HBucket { k, edge, body });
    }
    if r.off != data.len() {
        return Err(corrupt(r.off, "trailing bytes"));
    }
    out.extend(got);
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn hist(c: f64, hint: CounterResetHint, schema: i32) -> FloatHistogram {
        FloatHistogram {
            counter_reset_hint: hint,
            schema,
            zero_threshold: 0.001,
            zero_count: c,
            count: 3.0 * c,
            sum: 1.5 * c,
            positive_spans: vec![Span { offset: 0, length: 2 }],
            negative_spans: vec![],
            positive_buckets: vec![c, c],
            negative_buckets: vec![],
            custom_values: vec![],
        }
    }

    /// A counter with resets, gauge hints, a stale marker and one schema change.
    fn series(seed: u64, n: usize) -> (Vec<Sample>, Vec<(i64, FloatHistogram)>) {
        let mut x = seed | 1;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let (mut floats, mut hists) = (Vec::new(), Vec::new());
        let mut c = 0.0;
        let mut t = 0i64;
        for _ in 0..n {
            t += 1 + (rnd() % 700) as i64;
            match rnd() % 20 {
                0 => c = (rnd() % 3) as f64,
                1 => {
                    hists.push((t, FloatHistogram::stale()));
                    continue;
                }
                2 => {
                    floats.push(Sample { t, v: tessera_model::STALE_NAN });
                    continue;
                }
                _ => c += (rnd() % 4) as f64,
            }
            let hint = match rnd() % 9 {
                0 => CounterResetHint::Gauge,
                1 => CounterResetHint::CounterReset,
                2 => CounterResetHint::NotCounterReset,
                _ => CounterResetHint::Unknown,
            };
            let schema = if rnd() % 50 == 0 { 1 } else { 0 };
            // Some series have fractional counts (float histograms): coded as f64s.
            let scale = if seed.is_multiple_of(3) { 0.37 } else { 1.0 };
            hists.push((t, hist(c * scale, hint, schema)));
        }
        (floats, hists)
    }

    fn one_pass(hists: &[(i64, FloatHistogram)], floats: &[Sample]) -> HAgg {
        let mut a = HAgg::default();
        for (t, h) in hists {
            a.push(*t, h);
        }
        a.float_raw_t = floats.last().map_or(i64::MIN, |s| s.t);
        a
    }

    #[test]
    fn folding_buckets_equals_one_pass_and_round_trips() {
        for seed in 1..40u64 {
            let (floats, hists) = series(seed, 300);
            for r in [1000, 2500, 60_000] {
                let mut bs = Vec::new();
                hbucketize(&floats, &hists, r, &mut bs);
                let data = encode_hbuckets(r, &bs);
                let mut back = Vec::new();
                assert_eq!(decode_hbuckets_into(&data, &mut back).expect("decodes"), r);
                assert_eq!(back, bs, "round trip, seed {seed}, r {r}");
                let mut acc = HAgg::default();
                for b in &bs {
                    acc.merge(&b.edge);
                    acc.merge(&b.body);
                }
                let want = one_pass(&hists, &floats);
                // Sums and corrections are added in another order: equal within rounding.
                let close = |a: &FloatHistogram, b: &FloatHistogram| {
                    (a.count - b.count).abs() <= 1e-9 * b.count.abs().max(1.0) && a.positive_buckets.len() == b.positive_buckets.len()
                };
                assert!(close(&acc.sum, &want.sum), "sum, seed {seed}");
                match (&acc.corr, &want.corr) {
                    (Some(a), Some(b)) => assert!(close(a, b), "corr, seed {seed}"),
                    (None, None) => {}
                    other => panic!("corr presence differs: {other:?}"),
                }
                let strip = |mut a: HAgg| {
                    a.sum = FloatHistogram::default();
                    a.corr = None;
                    a
                };
                assert_eq!(strip(acc), strip(want), "seed {seed}, r {r}");
            }
        }
    }

    #[test]
    fn counter_correction_skips_a_reset_at_the_second_sample() {
        let h = |c: f64| hist(c, CounterResetHint::Unknown, 0);
        let mut a = HAgg::default();
        for (t, c) in [(1, 5.0), (2, 1.0), (3, 4.0), (4, 2.0), (5, 3.0)] {
            a.push(t, &h(c));
        }
        assert!(a.second_reset);
        assert_eq!(a.resets, 2);
        // Only the value before the reset at t=4 is a correction.
        assert_eq!(a.corr.as_ref().expect("a correction").count, 12.0);
        assert!(a.clean);
        let mut b = a.clone();
        b.push(6, &hist(9.0, CounterResetHint::Unknown, 1));
        assert!(!b.clean, "a schema change makes the span unclean");
    }

    proptest! {
        #[test]
        fn decoding_arbitrary_bytes_never_panics(data in proptest::collection::vec(any::<u8>(), 0..400)) {
            let _ = decode_hbuckets_into(&data, &mut Vec::new());
        }

        #[test]
        fn decoding_damaged_chunks_never_panics(seed in 1u64..1000, at in any::<usize>(), byte in any::<u8>(), cut in any::<usize>()) {
            let (floats, hists) = series(seed, 40);
            let mut bs = Vec::new();
            hbucketize(&floats, &hists, 1000, &mut bs);
            let mut data = encode_hbuckets(1000, &bs);
            let i = at % data.len();
            data[i] = byte;
            let _ = decode_hbuckets_into(&data, &mut Vec::new());
            data.truncate(cut % (data.len() + 1));
            let _ = decode_hbuckets_into(&data, &mut Vec::new());
        }
    }
}
