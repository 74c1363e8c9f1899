//! Decimal float chunks: `ChunkEncoding::Decimal` (0x44, Tessera's own), for cold chunks whose values
//! are all decimal numbers of a few significant digits — what monitoring values mostly are (counters of
//! seconds with centisecond resolution, byte counts, gauges like `0.25`, constants), VictoriaMetrics'
//! lesson. Every value is `m / 10^k` for one exponent `k` per chunk and integers `m` of at most 53 bits,
//! and the `m` are stored as differences from the previous one (or differences of those), runs of zero
//! differences counted rather than written where that is smaller: a constant costs a few bytes per
//! chunk, a counter one or two bytes a sample.
//!
//! ```text
//! u8 version (1) │ uvarint n │ times (as dense chunks: varint t0 │ [n>=2: varint t1-t0] │ uvarint ts_len │
//! (uvarint zero-run, varint dod)…) │ u8 k │ u8 mode │ [mode & 0x80: uvarint s │ s × uvarint gap] │
//! uvarint g │ varint m0 │ uvarint vs_len │ vs_len bytes
//! (every difference below is stored divided by `g`, the differences' greatest common divisor, ≥ 1):
//!   layout 0: (uvarint zero-run, varint delta)…   (constants and rarely changing values)
//!   layout 1: varint delta × (n-1)                 (counters and gauges that move every sample)
//!   layout 2: varint dod × (n-1), the first against 0   (steady rates)
//!   layout 3: the n-1 deltas bit-packed in frames (`crate::bitpack`)   (counters with random increments)
//!   layout 4: the n-1 dods bit-packed in frames
//! ```
//! The layout is `mode & 0x7f`; the encoder writes the smallest of the five. With `mode & 0x80` the chunk
//! holds `s ≥ 1` stale markers (Prometheus' staleness NaN, which a series' last scrape ends with): sample
//! positions, the first as is and each further one as its distance to the previous minus one; a stale
//! sample's integer is the previous sample's (0 for a leading one), so it costs nothing in the values.
//! A value decodes as `m as f64 / 10^k` (`m as f64` for `k = 0`), a correctly rounded IEEE division, so
//! the encoder keeps a chunk only when every value reads back **bit for bit** that way (NaN, infinities,
//! `-0.0` and values needing more than 15 decimals or 53-bit integers never qualify: they stay XOR or
//! Dense). Not a Prometheus encoding: remote read re-encodes it as XOR before it leaves.

use crate::dense::corrupt;
use crate::error::ChunkError;
use crate::varint;
use tessera_model::{STALE_NAN, Sample, is_stale_nan};

/// Format version byte.
const VERSION: u8 = 1;
/// Most samples one decimal chunk may hold; bounds what a corrupt count can make a decoder produce.
pub const MAX_DECIMAL_SAMPLES: usize = 1 << 20;
/// Largest decimal exponent tried (`10^15` is exact in a double, and so is every smaller power).
pub(crate) const MAX_K: u8 = 15;
/// Value layouts: runs of zero differences (`(uvarint zero-run, varint delta)…`), every difference
/// (`varint delta`…), every difference of differences (`varint dod`…, the first against 0).
const MODE_RUNS: u8 = 0;
const MODE_DELTAS: u8 = 1;
const MODE_DODS: u8 = 2;
/// The deltas and the dods bit-packed in frames (`crate::bitpack`).
const MODE_PACKED_DELTAS: u8 = 3;
const MODE_PACKED_DODS: u8 = 4;
/// Set in the mode byte when a list of stale-marker positions follows it.
const MODE_STALE: u8 = 0x80;
/// Largest `|m|`: every integer up to 2^53 is exact in a double.
pub(crate) const MAX_M: f64 = 9_007_199_254_740_992.0;

pub(crate) fn pow10(k: u8) -> f64 {
    10f64.powi(i32::from(k))
}

/// The value `m / 10^k` decodes to.
#[inline]
pub(crate) fn value(m: i64, k: u8, p: f64) -> f64 {
    if k == 0 { m as f64 } else { m as f64 / p }
}

/// `v`'s integer at exponent `k` when it reads back bit for bit.
#[inline]
pub(crate) fn integer_at(v: f64, k: u8, p: f64) -> Option<i64> {
    let m = if k == 0 { v } else { (v * p).round() };
    if !m.is_finite() || m.abs() > MAX_M || m.fract() != 0.0 {
        return None;
    }
    let m = m as i64;
    (value(m, k, p).to_bits() == v.to_bits()).then_some(m)
}

/// The smallest exponent at which every value of `samples` other than stale markers is a decimal integer
/// that reads back bit for bit, or `None`.
pub fn decimal_exponent(samples: &[Sample]) -> Option<u8> {
    // The largest of the values' own smallest exponents; then check all of them at it.
    let mut k = 0u8;
    for s in samples {
        let v = s.v;
        if is_stale_nan(v) {
            continue;
        }
        if !v.is_finite() || (v == 0.0 && v.is_sign_negative()) {
            return None;
        }
        while integer_at(v, k, pow10(k)).is_none() {
            k += 1;
            if k > MAX_K {
                return None;
            }
        }
    }
    let p = pow10(k);
    samples.iter().all(|s| is_stale_nan(s.v) || integer_at(s.v, k, p).is_some()).then_some(k)
}

/// Encodes `samples` (at most [`MAX_DECIMAL_SAMPLES`], timestamps increasing) as a decimal chunk, or
/// `None` when some value is not a decimal that reads back exactly (or there are no samples, or too many).
pub fn encode_decimal(samples: &[Sample]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    DecimalEncoder::default().encode_into(samples, &mut out).then_some(out)
}

/// A decimal encoder with scratch buffers kept between chunks.
#[derive(Default)]
pub struct DecimalEncoder {
    ts: Vec<u8>,
    ms: Vec<i64>,
    vs: Vec<u8>,
    alt: [Vec<u8>; 4],
    diffs: [Vec<i64>; 2],
    /// Only the given layout (tests of each layout's bytes and decoding).
    #[cfg(test)]
    force: Option<u8>,
}

impl DecimalEncoder {
    /// Appends the chunk of `samples` to `out` and returns true, or returns false (`out` unchanged) when
    /// the samples do not qualify (see [`encode_decimal`]).
    pub fn encode_into(&mut self, samples: &[Sample], out: &mut Vec<u8>) -> bool {
        if samples.is_empty() || samples.len() > MAX_DECIMAL_SAMPLES {
            return false;
        }
        let Some(k) = decimal_exponent(samples) else { return false };
        let p = pow10(k);
        out.push(VERSION);
        varint::put_uvarint(out, samples.len() as u64);
        crate::dense::put_time_runs(samples, out, &mut self.ts);
        out.push(k);
        let ms = &mut self.ms;
        ms.clear();
        let mut stale = 0usize;
        let mut prev = 0i64;
        for s in samples {
            if is_stale_nan(s.v) {
                stale += 1;
            } else {
                prev = integer_at(s.v, k, p).expect("checked by decimal_exponent");
            }
            ms.push(prev);
        }
        // The five value layouts; the smallest is kept.
        let runs = &mut self.vs;
        let [deltas, dods, packed_deltas, packed_dods] = &mut self.alt;
        let [ds, dds] = &mut self.diffs;
        runs.clear();
        deltas.clear();
        dods.clear();
        packed_deltas.clear();
        packed_dods.clear();
        ds.clear();
        dds.clear();
        // The differences' common factor (byte counts move in pages, for example): they are stored divided
        // by it.
        let g = ms.windows(2).fold(0u64, |g, w| gcd(g, w[1].wrapping_sub(w[0]).unsigned_abs())).max(1);
        let mut run = 0u64;
        let mut prev_d = 0i64;
        for (i, w) in ms.windows(2).enumerate() {
            let d = w[1].wrapping_sub(w[0]) / g as i64;
            if d == 0 {
                run += 1;
            } else {
                varint::put_uvarint(runs, run);
                varint::put_varint(runs, d);
                run = 0;
            }
            let dd = if i == 0 { d } else { d.wrapping_sub(prev_d) };
            varint::put_varint(deltas, d);
            varint::put_varint(dods, dd);
            ds.push(d);
            dds.push(dd);
            prev_d = d;
        }
        if run > 0 {
            varint::put_uvarint(runs, run);
        }
        crate::bitpack::pack_into(ds, packed_deltas);
        crate::bitpack::pack_into(dds, packed_dods);
        let layouts = [
            (MODE_RUNS, &*runs),
            (MODE_DELTAS, &*deltas),
            (MODE_DODS, &*dods),
            (MODE_PACKED_DELTAS, &*packed_deltas),
            (MODE_PACKED_DODS, &*packed_dods),
        ];
        #[cfg(test)]
        let layouts: Vec<_> = layouts.into_iter().filter(|(m, _)| self.force.is_none_or(|f| f == *m)).collect();
        let (mode, vs) = layouts.into_iter().min_by_key(|(_, b)| b.len()).expect("five layouts");
        if stale == 0 {
            out.push(mode);
        } else {
            out.push(mode | MODE_STALE);
            varint::put_uvarint(out, stale as u64);
            let mut last: Option<usize> = None;
            for (i, s) in samples.iter().enumerate() {
                if is_stale_nan(s.v) {
                    varint::put_uvarint(out, (last.map_or(i, |l| i - l - 1)) as u64);
                    last = Some(i);
                }
            }
        }
        varint::put_uvarint(out, g);
        varint::put_varint(out, ms[0]);
        varint::put_uvarint(out, vs.len() as u64);
        out.extend_from_slice(vs);
        true
    }
}

fn gcd(mut a: u64, mut b: u64) -> u64 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// The sample count a decimal chunk's header claims (`None` when unreadable or above the limit).
pub fn decimal_sample_count(data: &[u8]) -> Option<u64> {
    crate::dense::header_sample_count(data, VERSION, MAX_DECIMAL_SAMPLES)
}

/// A run-length stream of `(uvarint zero-run, varint step)` pairs, the last run possibly without its
/// step: hands out one step at a time (0 inside runs).
struct Runs<'a> {
    rest: &'a [u8],
    /// Zero steps left in the current run, then the step that ends it (if any).
    zeros: u64,
    pending: Option<i64>,
    /// The chunk offset where the stream ends (errors name offsets from it).
    end: usize,
}

impl Runs<'_> {
    #[inline]
    fn next_step(&mut self) -> Result<i64, ChunkError> {
        if self.zeros > 0 {
            self.zeros -= 1;
            return Ok(0);
        }
        if let Some(s) = self.pending.take() {
            return Ok(s);
        }
        if self.rest.is_empty() {
            return Err(ChunkError::Truncated { offset: self.end });
        }
        let at = self.end - self.rest.len();
        let (run, r) = varint::read_uvarint(self.rest).map_err(|_| corrupt(at, "bad run length"))?;
        self.rest = r;
        if !self.rest.is_empty() {
            let at = self.end - self.rest.len();
            let (step, r) = varint::read_varint(self.rest).map_err(|_| corrupt(at, "bad step"))?;
            self.rest = r;
            self.pending = Some(step);
        }
        if run == 0 {
            return self.pending.take().ok_or(corrupt(at, "empty run"));
        }
        self.zeros = run - 1;
        Ok(0)
    }
}

/// The stale-marker positions of a chunk (already checked by the decoder), one at a time.
struct Stales<'a> {
    rest: &'a [u8],
    left: u64,
    /// The next stale sample's position.
    next: Option<usize>,
}

impl<'a> Stales<'a> {
    /// `list` starts with the count (already read and checked as `count`; 0 for a chunk without any).
    fn new(list: &'a [u8], count: u64) -> Self {
        let mut s = Stales { rest: list, left: count, next: None };
        if count > 0 {
            s.rest = varint::read_uvarint(list).map_or(&[][..], |(_, r)| r);
            s.advance(0);
        }
        s
    }

    fn advance(&mut self, from: usize) {
        self.next = None;
        if self.left > 0
            && let Ok((gap, r)) = varint::read_uvarint(self.rest)
        {
            self.rest = r;
            self.left -= 1;
            self.next = Some(from + gap as usize);
        }
    }

    /// Passes the stale markers before sample `i` (the samples a decoder skipped).
    fn skip_before(&mut self, i: usize) {
        while let Some(j) = self.next
            && j < i
        {
            self.advance(j + 1);
        }
    }

    /// Whether sample `i` is a stale marker (called for every `i` in order, after any skip).
    #[inline]
    fn is_next(&mut self, i: usize) -> bool {
        if self.next == Some(i) {
            self.advance(i + 1);
            true
        } else {
            false
        }
    }
}

/// Decodes a whole decimal chunk, appending its samples to `out`.
pub fn decode_decimal_into(data: &[u8], out: &mut Vec<Sample>) -> Result<(), ChunkError> {
    decode_decimal_range_into(data, i64::MIN, i64::MAX, out)
}

/// Decodes the samples with `mint_ms <= t <= maxt_ms` of a decimal chunk, appending them to `out`; on
/// error `out` is left as it was.
pub fn decode_decimal_range_into(data: &[u8], mint_ms: i64, maxt_ms: i64, out: &mut Vec<Sample>) -> Result<(), ChunkError> {
    let before = out.len();
    let r = decode_inner(data, mint_ms, maxt_ms, out);
    if r.is_err() {
        out.truncate(before);
    }
    r
}

/// The samples of a run of regular timestamps (`delta` apart) whose value differences (or differences
/// of differences, with `dods`) are `xs`, each times `g`, appended to `out` after the state `(t, dm,
/// m)`; returns the state at the last of them, exactly as stepping sample by sample leaves it. In
/// three passes over at most a frame: the integers (the running sums, kept in registers), then the
/// values (independent divisions, which the compiler packs two or more to an instruction: IEEE
/// division rounds the same either way), then the samples.
#[allow(clippy::too_many_arguments)]
#[inline]
fn packed_run(
    xs: &[i64],
    t: i64,
    delta: i64,
    mut dm: i64,
    mut m: i64,
    g: i64,
    dods: bool,
    k: u8,
    p: f64,
    out: &mut Vec<Sample>,
) -> (i64, i64, i64) {
    let n = xs.len().min(crate::bitpack::FRAME);
    let xs = &xs[..n];
    let mut vs = [0f64; crate::bitpack::FRAME];
    let vs = &mut vs[..n];
    let mut ms = [0i64; crate::bitpack::FRAME];
    let ms = &mut ms[..n];
    if dods {
        for (mj, &x) in ms.iter_mut().zip(xs) {
            dm = dm.wrapping_add(x.wrapping_mul(g));
            m = m.wrapping_add(dm);
            *mj = m;
        }
    } else {
        for (mj, &x) in ms.iter_mut().zip(xs) {
            dm = x.wrapping_mul(g);
            m = m.wrapping_add(dm);
            *mj = m;
        }
    }
    if k == 0 {
        for (v, &mj) in vs.iter_mut().zip(ms.iter()) {
            *v = mj as f64;
        }
    } else {
        for (v, &mj) in vs.iter_mut().zip(ms.iter()) {
            *v = mj as f64 / p;
        }
    }
    out.extend(vs.iter().enumerate().map(|(j, &v)| Sample { t: t.wrapping_add((j as i64).wrapping_add(1).wrapping_mul(delta)), v }));
    (t.wrapping_add((n as i64).wrapping_mul(delta)), dm, m)
}

fn decode_inner(data: &[u8], mint_ms: i64, maxt_ms: i64, out: &mut Vec<Sample>) -> Result<(), ChunkError> {
    let off = |rest: &[u8]| data.len() - rest.len();
    let vi = |e, at| crate::dense::varint_err(e, at, data.len());
    let Some(crate::dense::TimesHeader { n, t0, d0, ts, rest }) = crate::dense::read_times_header(
        data,
        VERSION,
        MAX_DECIMAL_SAMPLES,
        "unknown decimal chunk version",
        "sample count above the decimal chunk limit",
    )?
    else {
        return Ok(());
    };
    let ts_end = off(rest);
    let mut times = Runs { rest: ts, zeros: 0, pending: None, end: ts_end };
    let (&k, rest) = rest.split_first().ok_or(ChunkError::Truncated { offset: data.len() })?;
    if k > MAX_K {
        return Err(corrupt(off(rest) - 1, "decimal exponent above 15"));
    }
    let p = pow10(k);
    let (&mode, mut rest) = rest.split_first().ok_or(ChunkError::Truncated { offset: data.len() })?;
    let layout = mode & !MODE_STALE;
    if layout > MODE_PACKED_DODS {
        return Err(corrupt(off(rest) - 1, "unknown decimal value layout"));
    }
    // Stale-marker positions: checked here (strictly increasing, inside the chunk), read again below.
    let mut stale_left = 0u64;
    let stale_list = rest;
    if mode & MODE_STALE != 0 {
        let (s, r) = varint::read_uvarint(rest).map_err(|e| vi(e, off(rest)))?;
        if s == 0 || s > n as u64 {
            return Err(corrupt(off(rest), "stale marker count out of range"));
        }
        rest = r;
        let mut next = 0u64;
        for _ in 0..s {
            let (gap, r) = varint::read_uvarint(rest).map_err(|e| vi(e, off(rest)))?;
            next = next.saturating_add(gap);
            if next >= n as u64 {
                return Err(corrupt(off(rest), "stale marker position out of range"));
            }
            rest = r;
            next += 1;
        }
        stale_left = s;
    }
    let (g, rest) = varint::read_uvarint(rest).map_err(|e| vi(e, off(rest)))?;
    if g == 0 || g > 1 << 54 {
        return Err(corrupt(off(rest), "difference factor out of range"));
    }
    let g = g as i64;
    let (m0, rest) = varint::read_varint(rest).map_err(|e| vi(e, off(rest)))?;
    let (vs_len, rest) = varint::read_uvarint(rest).map_err(|e| vi(e, off(rest)))?;
    if vs_len != rest.len() as u64 {
        return Err(if vs_len > rest.len() as u64 { ChunkError::Truncated { offset: data.len() } } else { corrupt(off(rest), "trailing bytes after the values") });
    }
    let mut vals = Runs { rest, zeros: 0, pending: None, end: data.len() };
    let mut plain = rest;
    let mut packed = crate::bitpack::Unpacker::new(rest, if layout >= MODE_PACKED_DELTAS { n - 1 } else { 0 }, data.len());
    let dods = layout == MODE_DODS || layout == MODE_PACKED_DODS;
    out.reserve(n.min(data.len() * 8));
    let (mut t, mut delta, mut m, mut dm) = (t0, d0, m0, 0i64);
    // Moves the state from sample `i - 1` to sample `i`.
    macro_rules! advance {
        ($i:expr) => {
            if $i >= 2 {
                delta = delta.wrapping_add(times.next_step()?);
            }
            t = t.wrapping_add(delta);
            let step = match layout {
                MODE_RUNS => vals.next_step()?,
                MODE_DELTAS | MODE_DODS => {
                    let (x, r) = varint::read_varint(plain).map_err(|e| vi(e, off(plain)))?;
                    plain = r;
                    x
                }
                _ => packed.next_value()?,
            };
            let step = step.wrapping_mul(g);
            dm = if dods { dm.wrapping_add(step) } else { step };
            m = m.wrapping_add(dm);
        };
    }
    // Samples before `mint_ms` only move the state on (a short window over a long chunk: a rule's
    // five minutes of a two-hour block chunk). Where the timestamps are regular (a run of zero steps)
    // and the values bit-packed, many are passed at once: the times by multiplying, the values by
    // summing their differences a frame at a time. `i` is the sample the state stands at.
    let mut i = 0usize;
    while t < mint_ms && t <= maxt_ms && i + 1 < n {
        if layout >= MODE_PACKED_DELTAS && i >= 1 && delta > 0 {
            // The zero steps left in the current run of the timestamps.
            if times.zeros > 0 {
                // Steps that keep `t` below `mint_ms`.
                let room = (i128::from(mint_ms) - 1 - i128::from(t)) / i128::from(delta);
                let k = (room.min(i128::from(times.zeros)) as usize).min(n - 1 - i);
                if k > 0 {
                    times.zeros -= k as u64;
                    t = t.wrapping_add((k as i64).wrapping_mul(delta));
                    let (sum, sum_of_sums) = packed.skip_sums(k)?;
                    if dods {
                        m = m.wrapping_add((k as i64).wrapping_mul(dm)).wrapping_add(sum_of_sums.wrapping_mul(g));
                        dm = dm.wrapping_add(sum.wrapping_mul(g));
                    } else {
                        m = m.wrapping_add(sum.wrapping_mul(g));
                    }
                    i += k;
                    continue;
                }
            }
        }
        i += 1;
        advance!(i);
    }
    let mut stales = Stales::new(stale_list, stale_left);
    stales.skip_before(i);
    loop {
        if t > maxt_ms {
            return Ok(());
        }
        let stale = stales.is_next(i);
        if t >= mint_ms {
            out.push(Sample { t, v: if stale { STALE_NAN } else { value(m, k, p) } });
        }
        i += 1;
        if i == n {
            break;
        }
        // Many samples at once inside a run of regular timestamps (zero steps) without stale markers,
        // all inside the range: no per-sample checks of the time streams, the range or the markers.
        // The state moves exactly as `advance!` moves it, sample after sample.
        if i >= 2 && times.zeros > 0 && delta > 0 && t >= mint_ms {
            let room = (i128::from(maxt_ms) - i128::from(t)) / i128::from(delta);
            let to_stale = stales.next.map_or(usize::MAX, |j| j.saturating_sub(i));
            let mut take = (n - i).min(to_stale).min(times.zeros.min(room.max(0) as u64) as usize);
            match layout {
                MODE_RUNS => {
                    // Inside a run of zero differences the value stays.
                    take = take.min(vals.zeros.min(usize::MAX as u64) as usize);
                    let v = value(m, k, p);
                    out.extend((0..take).map(|_| {
                        t = t.wrapping_add(delta);
                        Sample { t, v }
                    }));
                    vals.zeros -= take as u64;
                }
                MODE_DELTAS | MODE_DODS => {
                    // Each difference takes a byte at least: a damaged chunk's runs cannot make this
                    // reserve more than its bytes could hold (the loop then fails as `advance!` would).
                    take = take.min(plain.len());
                    out.reserve(take);
                    for _ in 0..take {
                        let (x, r) = varint::read_varint(plain).map_err(|e| vi(e, off(plain)))?;
                        plain = r;
                        t = t.wrapping_add(delta);
                        let step = x.wrapping_mul(g);
                        dm = if dods { dm.wrapping_add(step) } else { step };
                        m = m.wrapping_add(dm);
                        out.push(Sample { t, v: value(m, k, p) });
                    }
                }
                _ => {
                    let buf = packed.buffered()?;
                    take = take.min(buf.len());
                    (t, dm, m) = packed_run(&buf[..take], t, delta, dm, m, g, dods, k, p, out);
                    packed.consume(take);
                }
            }
            times.zeros -= take as u64;
            i += take;
            if i == n {
                break;
            }
        }
        advance!(i);
    }
    // Every stream used up exactly (a damaged chunk fails here rather than later in a compaction).
    let vals_left = match layout {
        MODE_RUNS => !vals.rest.is_empty() || vals.zeros > 0 || vals.pending.is_some(),
        MODE_DELTAS | MODE_DODS => !plain.is_empty(),
        _ => !packed.is_done(),
    };
    if vals_left {
        return Err(corrupt(data.len(), "trailing bytes after the values"));
    }
    if !times.rest.is_empty() || times.zeros > 0 || times.pending.is_some() {
        return Err(corrupt(ts_end, "trailing bytes after the timestamps"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn scrape(n: usize, mut f: impl FnMut(usize) -> f64) -> Vec<Sample> {
        (0..n).map(|i| Sample::new(1_700_000_000_000 + i as i64 * 15_000, f(i))).collect()
    }

    fn round_trip(s: &[Sample]) -> Vec<u8> {
        let c = encode_decimal(s).expect("qualifies");
        check_decodes(&c, s);
        // Every layout reads back the same samples.
        for layout in MODE_RUNS..=MODE_PACKED_DODS {
            check_decodes(&encode_layout(s, layout), s);
        }
        c
    }

    fn check_decodes(c: &[u8], s: &[Sample]) {
        let mut out = Vec::new();
        decode_decimal_into(c, &mut out).expect("decodes");
        assert_eq!(out.len(), s.len());
        for (a, b) in out.iter().zip(s) {
            assert!(a.t == b.t && a.v.to_bits() == b.v.to_bits(), "{a:?} vs {b:?}");
        }
        assert_eq!(decimal_sample_count(c), Some(s.len() as u64));
    }

    /// `s` encoded with the given value layout only.
    fn encode_layout(s: &[Sample], layout: u8) -> Vec<u8> {
        let mut e = DecimalEncoder { force: Some(layout), ..DecimalEncoder::default() };
        let mut out = Vec::new();
        assert!(e.encode_into(s, &mut out), "qualifies");
        assert_eq!(out[mode_offset(&out)] & !MODE_STALE, layout);
        out
    }

    /// Where a chunk's mode byte is.
    fn mode_offset(c: &[u8]) -> usize {
        let h = crate::dense::read_times_header(c, VERSION, MAX_DECIMAL_SAMPLES, "v", "n").expect("header").expect("samples");
        c.len() - h.rest.len() + 1
    }

    #[test]
    fn monitoring_values_round_trip_small() {
        // A constant: a few bytes for the whole chunk.
        let c = round_trip(&scrape(120, |_| 8_250_011_648.0));
        assert!(c.len() <= 24, "{} bytes", c.len());
        // A centisecond counter: one or two bytes a sample.
        // (as a scrape parses it from text: the shortest decimal, not float arithmetic's residue)
        let c = round_trip(&scrape(120, |i| (1_234_567 + (i * i % 7) * 101 + i * 999) as f64 / 100.0));
        assert!(c.len() <= 120 * 2 + 20, "{} bytes", c.len());
        // Byte counts that move in 4 KiB pages: the common factor makes each difference one byte.
        let c = round_trip(&scrape(120, |i| (8_000_000_000u64 - (i as u64 * 37 % 50) * 4096) as f64));
        assert!(c.len() <= 120 + 30, "{} bytes", c.len());
        round_trip(&scrape(120, |i| [0.25, 0.5, 1.75, -3.0][i % 4]));
        round_trip(&scrape(1, |_| 0.1));
        round_trip(&scrape(2, |_| 0.0));
        round_trip(&scrape(50, |i| i as f64 / 1e15));
        round_trip(&scrape(50, |i| 9_007_199_254_740_992.0 - i as f64));
        // Sixteen significant digits still qualify when they fit 53 bits at 10^-15.
        round_trip(&scrape(3, |_| std::f64::consts::PI));
    }

    #[test]
    fn random_counter_increments_are_bit_packed() {
        // A centisecond counter growing by U(300, 900) a scrape: 10 bits of news per sample, where a varint
        // takes two bytes.
        let mut m = 123_456_789i64;
        let mut x = 1u64;
        let s = scrape(720, |_| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            m += 300 + (x >> 33) as i64 % 600;
            m as f64 / 100.0
        });
        let c = round_trip(&s);
        assert_eq!(c[mode_offset(&c)], MODE_PACKED_DELTAS, "packed deltas are the smallest");
        assert!(c.len() <= 720 * 10 / 8 + 60, "{} bytes", c.len());
        let varints = encode_layout(&s, MODE_DELTAS).len();
        assert!(c.len() * 10 < varints * 7, "{} bytes against {varints} as varints", c.len());
    }

    #[test]
    fn stale_markers_are_kept_without_costing_the_values() {
        // A series' last scrape ends in Prometheus' staleness marker.
        let mut s = scrape(100, |i| (1000 + i * 7) as f64 / 10.0);
        s[99].v = STALE_NAN;
        let c = round_trip(&s);
        assert_eq!(c[mode_offset(&c)] & MODE_STALE, MODE_STALE);
        // Stale in the middle, at the start, twice in a row, everywhere.
        for at in [&[0usize][..], &[5], &[5, 6], &[0, 1, 2, 50, 98, 99]] {
            let mut s = scrape(100, |i| [0.25, 0.5, 1.75, -3.0][i % 4]);
            for &i in at {
                s[i].v = STALE_NAN;
            }
            round_trip(&s);
        }
        round_trip(&scrape(3, |_| STALE_NAN));
        round_trip(&scrape(1, |_| STALE_NAN));
        // Other NaNs never qualify (only the exact staleness bits are kept).
        assert!(encode_decimal(&scrape(3, |i| if i == 1 { f64::NAN } else { 1.0 })).is_none());
        // The positions list is checked: out of range, too many, and a count of zero are errors.
        let mut s = scrape(4, |_| 1.0);
        s[3].v = STALE_NAN;
        let c = encode_decimal(&s).expect("qualifies");
        let at = mode_offset(&c);
        assert_eq!(&c[at..at + 3], &[MODE_RUNS | MODE_STALE, 1, 3]);
        for (i, bad) in [(at + 1, 0u8), (at + 1, 5), (at + 2, 4), (at + 2, 0x80)] {
            let mut d = c.clone();
            d[i] = bad;
            assert!(decode_decimal_into(&d, &mut Vec::new()).is_err(), "byte {i} = {bad}");
        }
    }

    #[test]
    fn values_that_are_not_exact_decimals_do_not_qualify() {
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY, -0.0, 1.0 / 3.0, 0.1 + 0.2, 1e300, 9_007_199_254_740_993.0 * 4.0, f64::from_bits(0x7ff0_0000_0000_0003), f64::from_bits(0xfff0_0000_0000_0002)] {
            assert!(encode_decimal(&scrape(3, |i| if i == 1 { bad } else { 1.5 })).is_none(), "{bad}");
        }
        assert!(encode_decimal(&[]).is_none());
    }

    /// The bytes of a small chunk, as the module documentation lays them out.
    #[test]
    fn golden_bytes() {
        let s = [Sample::new(1000, 1.5), Sample::new(2000, 1.5), Sample::new(3000, 1.75), Sample::new(4000, 1.75)];
        let c = encode_decimal(&s).expect("qualifies");
        // version 1, n 4, t0 1000 (zz 2000 = d0 0f), d0 1000 (d0 0f), ts: one run of 2 zero dods (1 byte),
        // k 2, mode 0 (runs; the three layouts tie at 3 bytes and the first is kept), g, m0 150 (zz 300
        // = ac 02), values: (1 zero, +25/g), then a trailing run of 1.
        // The only difference, 25, is its own common factor: g 25, stored as 1 (zz 2).
        assert_eq!(c, vec![1, 4, 0xd0, 0x0f, 0xd0, 0x0f, 1, 2, 2, 0, 25, 0xac, 0x02, 3, 1, 2, 1]);
        // A steady counter: its deltas bit-packed in one frame (base 1, zz 2; width 0), 2 bytes.
        let s = [Sample::new(0, 100.0), Sample::new(1, 200.0), Sample::new(2, 300.0), Sample::new(3, 400.0)];
        let c = encode_decimal(&s).expect("qualifies");
        // k 0, mode 3, g 100, m0 100 (zz 200 = c8 01), 2 bytes of values.
        assert_eq!(&c[c.len() - 8..], &[0, 3, 100, 0xc8, 0x01, 2, 2, 0][..], "{c:?}");
        // The other layouts of the same chunk: the deltas as varints (each 100/g, zz 2)…
        let c = encode_layout(&s, MODE_DELTAS);
        assert_eq!(&c[c.len() - 9..], &[0, 1, 100, 0xc8, 0x01, 3, 2, 2, 2][..], "{c:?}");
        // …and the dods (1, 0, 0) packed: base 0, width 1, bits 1,0,0.
        let c = encode_layout(&s, MODE_PACKED_DODS);
        assert_eq!(&c[c.len() - 9..], &[0, 4, 100, 0xc8, 0x01, 3, 0, 1, 1][..], "{c:?}");
    }

    /// A damaged chunk claiming a million samples in one run of regular timestamps, with two varint
    /// differences behind it, fails without reserving room for the million (the batch path reserved
    /// what the runs claimed before reading the bytes; found in review).
    #[test]
    fn a_damaged_run_length_does_not_reserve_what_it_claims() {
        let mut c = vec![VERSION];
        varint::put_uvarint(&mut c, 1 << 20);
        varint::put_varint(&mut c, 1_000);
        varint::put_varint(&mut c, 10);
        let mut ts = Vec::new();
        varint::put_uvarint(&mut ts, 1 << 20);
        varint::put_uvarint(&mut c, ts.len() as u64);
        c.extend_from_slice(&ts);
        c.extend_from_slice(&[0, MODE_DELTAS]);
        varint::put_uvarint(&mut c, 1);
        varint::put_varint(&mut c, 0);
        varint::put_uvarint(&mut c, 2);
        c.extend_from_slice(&[2, 2]);
        let mut out = Vec::new();
        assert!(decode_decimal_into(&c, &mut out).is_err());
        assert!(out.is_empty());
        assert!(out.capacity() < 1 << 16, "reserved {}", out.capacity());
    }

    #[test]
    fn truncated_and_corrupt_chunks_are_errors() {
        let c = encode_decimal(&scrape(30, |i| i as f64 * 0.5)).expect("qualifies");
        for cut in 0..c.len() {
            let mut out = vec![Sample::new(0, 0.0)];
            assert!(decode_decimal_into(&c[..cut], &mut out).is_err(), "cut at {cut}");
            assert_eq!(out.len(), 1, "left as it was");
        }
    }

    proptest! {
        #[test]
        fn random_decimals_round_trip(ms in proptest::collection::vec(-1_000_000_000i64..1_000_000_000, 1..300), k in 0u8..6, gaps in proptest::collection::vec(1i64..100_000, 300), stale in proptest::collection::vec(0usize..300, 0..4)) {
            let p = pow10(k);
            let mut t = -5_000i64;
            let mut s: Vec<Sample> = ms.iter().enumerate().map(|(i, &m)| { t += gaps[i]; Sample::new(t, value(m, k, p)) }).collect();
            for i in stale {
                let n = s.len();
                s[i % n].v = STALE_NAN;
            }
            for layout in MODE_RUNS..=MODE_PACKED_DODS {
                check_decodes(&encode_layout(&s, layout), &s);
            }
            if let Some(c) = encode_decimal(&s) {
                let mut out = Vec::new();
                decode_decimal_into(&c, &mut out).expect("decodes");
                prop_assert_eq!(out.len(), s.len());
                for (a, b) in out.iter().zip(&s) {
                    prop_assert!(a.t == b.t && a.v.to_bits() == b.v.to_bits());
                }
                // A range decodes exactly its samples.
                let (lo, hi) = (s[s.len() / 3].t, s[s.len() * 2 / 3].t);
                let mut part = Vec::new();
                decode_decimal_range_into(&c, lo, hi, &mut part).expect("decodes");
                let want: Vec<&Sample> = s.iter().filter(|x| x.t >= lo && x.t <= hi).collect();
                prop_assert_eq!(part.len(), want.len());
            } else {
                // Every such value is an exact decimal at k: only overflow of 2^53 can refuse it.
                prop_assert!(false, "exact decimals refused");
            }
        }

        /// A time range decodes exactly the full decode's samples in it, bit for bit, in every layout:
        /// scrapes at a regular interval with a few late ones (runs of zero time steps, which the decoder
        /// passes at once before the range), counters and gauges, stale markers, ranges starting before,
        /// inside, on and after the samples.
        #[test]
        fn ranges_decode_what_the_full_decode_has_in_them(
            n in 1usize..400,
            interval in 1i64..60_000,
            late in proptest::collection::vec((0usize..400, 1i64..5_000), 0..4),
            incs in proptest::collection::vec(-3i64..40, 400),
            k in 0u8..4,
            stale in proptest::collection::vec(0usize..400, 0..3),
            lo_at in 0usize..420,
            lo_shift in -2i64..2,
            span in -60_000i64..20_000_000,
        ) {
            let p = pow10(k);
            let mut times = Vec::with_capacity(n);
            let mut t = 1_700_000_000_000i64;
            for i in 0..n {
                t += interval + late.iter().filter(|(at, _)| *at == i).map(|(_, d)| d).sum::<i64>();
                times.push(t);
            }
            let mut m = 1_000i64;
            let mut s: Vec<Sample> = times.iter().enumerate().map(|(i, &t)| { m += incs[i]; Sample::new(t, value(m, k, p)) }).collect();
            for i in stale {
                s[i % n].v = STALE_NAN;
            }
            let lo = times.get(lo_at).map_or(times[n - 1] + 1, |&t| t + lo_shift);
            let hi = lo.saturating_add(span);
            let want: Vec<(i64, u64)> = s.iter().filter(|x| x.t >= lo && x.t <= hi).map(|x| (x.t, x.v.to_bits())).collect();
            for layout in MODE_RUNS..=MODE_PACKED_DODS {
                let c = encode_layout(&s, layout);
                let mut part = Vec::new();
                decode_decimal_range_into(&c, lo, hi, &mut part).expect("decodes");
                let got: Vec<(i64, u64)> = part.iter().map(|x| (x.t, x.v.to_bits())).collect();
                prop_assert_eq!(&got, &want, "layout {}", layout);
                // Up to the end, so the streams are checked to be used up exactly after a skip.
                let mut tail = Vec::new();
                decode_decimal_range_into(&c, lo, i64::MAX, &mut tail).expect("decodes");
                prop_assert_eq!(tail.len(), s.iter().filter(|x| x.t >= lo).count());
            }
        }

        #[test]
        fn arbitrary_and_mutated_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200), pos in 0usize..400, val in any::<u8>()) {
            let mut out = Vec::new();
            let _ = decode_decimal_into(&bytes, &mut out);
            let mut s = scrape(40, |i| (i * i % 37) as f64 * 0.01);
            s[pos % 40].v = STALE_NAN;
            for layout in MODE_RUNS..=MODE_PACKED_DODS {
                let mut c = encode_layout(&s, layout);
                let p = pos % c.len();
                c[p] = val;
                let _ = decode_decimal_range_into(&c, i64::MIN, i64::MAX, &mut out);
                // Skipping to a start time reads the same damaged streams another way.
                let _ = decode_decimal_range_into(&c, s[pos % 40].t, i64::MAX, &mut out);
                let _ = decode_decimal_range_into(&c, i64::from(val) << 40, i64::MAX, &mut out);
            }
        }
    }
}
