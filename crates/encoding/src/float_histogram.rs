//! Prometheus' float native-histogram chunk (`chunkenc.EncFloatHistogram`, encoding byte 3), byte for
//! byte: [`FloatHistogramEncoder`] mirrors upstream's `FloatHistogramAppender`, [`FloatHistogramIter`]
//! its `floatHistogramIterator` (`tsdb/chunkenc/float_histogram.go`).
//!
//! Same 3-byte header and layout block as the integer chunk ([`crate::histogram`]); then
//! ```text
//! sample 0: t varbit, count, zero count, sum: 64 raw bits each, then each bucket's count: 64 raw bits
//! sample n: dod of t (varbit), then count, zero count, sum and each bucket XOR'ed with its own previous
//!           value, each with its own leading/trailing window (the XOR chunk's value coding); a stale
//!           marker stops after the sum
//! ```
//! Layout changes, counter resets and gauges are handled as in the integer chunk ([`AppendDecision`]),
//! with absolute counts: widening a sample inserts zeros.

use std::borrow::Cow;

use crate::bstream::{BitReader, BitWriter};
use crate::error::ChunkError;
use crate::histogram::{
    AppendDecision, Appended, HistogramAppendError, check_bucket_counts, decoded_hint, layout_error,
};
use crate::histogram_meta::{
    CounterResetHeader, HISTOGRAM_HEADER_BYTES, Insert, adjust_for_inserts, expand_spans_and_buckets,
    expand_spans_both_ways, insert_buckets, num_samples, read_layout, set_header, set_num_samples, write_layout,
};
use crate::varbit::{put_varbit_int, read_varbit_int};
use crate::xor::{NO_WINDOW, read_value_bits, write_value};
use tessera_model::histogram::{
    CounterResetHint, EXPONENTIAL_SCHEMA_MAX, FloatHistogram, Span, custom_bucket_bounds_match,
    is_custom_buckets_schema, is_known_schema, span_bucket_count,
};
use tessera_model::is_stale_nan;

/// A value XOR-coded against its predecessor, with its own window (upstream `xorValue`).
#[derive(Debug, Clone, Copy)]
struct XorValue {
    value: f64,
    leading: u8,
    trailing: u8,
}

impl XorValue {
    const fn fresh(value: f64) -> Self {
        Self { value, leading: NO_WINDOW, trailing: 0 }
    }

    fn write(&mut self, w: &mut BitWriter<'_>, v: f64) {
        write_value(w, &mut self.leading, &mut self.trailing, self.value.to_bits(), v.to_bits());
        self.value = v;
    }
}

/// Upstream `FloatHistogramAppender.appendable`'s result.
struct Appendability {
    fwd_p: Vec<Insert>,
    fwd_n: Vec<Insert>,
    back_p: Vec<Insert>,
    back_n: Vec<Insert>,
    ok: bool,
    counter_reset: bool,
}

/// Appends float histograms to one chunk (upstream `FloatHistogramAppender`).
#[derive(Debug, Clone)]
pub struct FloatHistogramEncoder {
    buf: Vec<u8>,
    free_bits: u32,
    schema: i32,
    zero_threshold: f64,
    p_spans: Vec<Span>,
    n_spans: Vec<Span>,
    custom_values: Vec<f64>,
    t: i64,
    t_delta: i64,
    sum: XorValue,
    cnt: XorValue,
    z_cnt: XorValue,
    p_buckets: Vec<XorValue>,
    n_buckets: Vec<XorValue>,
}

impl Default for FloatHistogramEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl FloatHistogramEncoder {
    /// An empty chunk: 0 samples, `Unknown` counter-reset header.
    pub fn new() -> Self {
        let mut buf = Vec::with_capacity(128);
        buf.extend_from_slice(&[0; HISTOGRAM_HEADER_BYTES]);
        Self {
            buf,
            free_bits: 0,
            schema: 0,
            zero_threshold: 0.0,
            p_spans: Vec::new(),
            n_spans: Vec::new(),
            custom_values: Vec::new(),
            t: i64::MIN,
            t_delta: 0,
            sum: XorValue::fresh(0.0),
            cnt: XorValue::fresh(0.0),
            z_cnt: XorValue::fresh(0.0),
            p_buckets: Vec::new(),
            n_buckets: Vec::new(),
        }
    }

    /// Reopens a chunk's bytes to append more samples (WAL replay, out-of-order merging), as upstream's
    /// `Appender()` on a non-empty chunk. The samples are decoded and written again, which gives the
    /// appender exactly the state it had when it wrote them and the same bytes for any chunk written in
    /// one go (ours or Prometheus'); unlike upstream, bytes after the last sample are dropped and the
    /// next sample continues in the last byte's padding bits, so reopen-then-append equals one appender.
    pub fn from_bytes(data: &[u8]) -> Result<Self, ChunkError> {
        let mut enc = Self::new();
        let mut it = FloatHistogramIter::raw(data);
        while let Some((t, h)) = it.next_histogram()? {
            enc.append_float_histogram(t, &h);
        }
        enc.set_counter_reset_header(CounterResetHeader::of_chunk(data));
        Ok(enc)
    }

    /// The complete chunk bytes, header included; valid after every append.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }

    pub fn num_samples(&self) -> u16 {
        num_samples(&self.buf)
    }

    pub fn counter_reset_header(&self) -> CounterResetHeader {
        CounterResetHeader::of_chunk(&self.buf)
    }

    pub fn set_counter_reset_header(&mut self, h: CounterResetHeader) {
        set_header(&mut self.buf, h);
    }

    pub fn last_t(&self) -> Option<i64> {
        (self.num_samples() > 0).then_some(self.t)
    }

    /// What [`FloatHistogramEncoder::append`] would do with `h` (nothing is changed).
    pub fn decide(&self, h: &FloatHistogram) -> AppendDecision {
        if self.num_samples() == 0 {
            return AppendDecision::Append { widen_sample: false };
        }
        let (fwd, back, ok, header) = if h.counter_reset_hint != CounterResetHint::Gauge {
            let a = self.appendable(h);
            let header = if a.counter_reset { CounterResetHeader::CounterReset } else { CounterResetHeader::Unknown };
            let ok = a.ok && !a.counter_reset;
            (
                !a.fwd_p.is_empty() || !a.fwd_n.is_empty(),
                !a.back_p.is_empty() || !a.back_n.is_empty(),
                ok,
                header,
            )
        } else {
            let (fp, fnn, bp, bn, _, _, ok) = self.appendable_gauge(h);
            (!fp.is_empty() || !fnn.is_empty(), !bp.is_empty() || !bn.is_empty(), ok, CounterResetHeader::Gauge)
        };
        match (ok, fwd) {
            (false, _) => AppendDecision::NewChunk(header),
            (true, true) => AppendDecision::Recode { widen_sample: back },
            (true, false) => AppendDecision::Append { widen_sample: back },
        }
    }

    /// The header a new chunk starting with `h` gets when this is the series' previous chunk.
    pub fn header_for_next_chunk(&self, h: &FloatHistogram) -> CounterResetHeader {
        if self.appendable(h).counter_reset { CounterResetHeader::CounterReset } else { CounterResetHeader::NotCounterReset }
    }

    /// Appends `h` at `t` as upstream's `AppendFloatHistogram(prev, _, t, h, appendOnly=false)` does.
    /// See [`crate::HistogramEncoder::append`].
    pub fn append(
        &mut self,
        t: i64,
        h: &FloatHistogram,
        prev: Option<&FloatHistogramEncoder>,
    ) -> Result<Appended<FloatHistogramEncoder>, HistogramAppendError> {
        if !h.is_stale() {
            check_bucket_counts(
                (&h.positive_spans, h.positive_buckets.len()),
                (&h.negative_spans, h.negative_buckets.len()),
            )?;
        }
        let n = self.num_samples();
        if n == u16::MAX {
            return Err(HistogramAppendError::ChunkFull);
        }
        if n == 0 {
            self.append_float_histogram(t, h);
            if h.counter_reset_hint == CounterResetHint::Gauge {
                self.set_counter_reset_header(CounterResetHeader::Gauge);
            } else if h.counter_reset_hint == CounterResetHint::CounterReset {
                self.set_counter_reset_header(CounterResetHeader::CounterReset);
            } else if let Some(p) = prev {
                self.set_counter_reset_header(p.header_for_next_chunk(h));
            }
            return Ok(Appended::InPlace);
        }
        let mut h = Cow::Borrowed(h);
        let (fwd_p, fwd_n) = if h.counter_reset_hint != CounterResetHint::Gauge {
            let a = self.appendable(&h);
            if !a.ok || a.counter_reset {
                let header =
                    if a.counter_reset { CounterResetHeader::CounterReset } else { CounterResetHeader::Unknown };
                return Ok(Appended::NewChunk(self.new_chunk_with(header, t, &h)));
            }
            if !a.back_p.is_empty() || !a.back_n.is_empty() {
                let hm = h.to_mut();
                if a.fwd_p.is_empty() && a.fwd_n.is_empty() {
                    hm.positive_spans = self.p_spans.clone();
                    hm.negative_spans = self.n_spans.clone();
                } else {
                    hm.positive_spans = adjust_for_inserts(&hm.positive_spans, &a.back_p);
                    hm.negative_spans = adjust_for_inserts(&hm.negative_spans, &a.back_n);
                }
                widen(hm, &a.back_p, &a.back_n);
            }
            (a.fwd_p, a.fwd_n)
        } else {
            let (fp, fnn, bp, bn, sp, sn, ok) = self.appendable_gauge(&h);
            if !ok {
                return Ok(Appended::NewChunk(self.new_chunk_with(CounterResetHeader::Gauge, t, &h)));
            }
            if !bp.is_empty() || !bn.is_empty() {
                let hm = h.to_mut();
                hm.positive_spans = sp;
                hm.negative_spans = sn;
                widen(hm, &bp, &bn);
            }
            (fp, fnn)
        };
        if !fwd_p.is_empty() || !fwd_n.is_empty() {
            self.recode(&fwd_p, &fwd_n, &h.positive_spans, &h.negative_spans);
            self.append_float_histogram(t, &h);
            return Ok(Appended::Recoded);
        }
        self.append_float_histogram(t, &h);
        Ok(Appended::InPlace)
    }

    fn new_chunk_with(&self, header: CounterResetHeader, t: i64, h: &FloatHistogram) -> FloatHistogramEncoder {
        let mut c = FloatHistogramEncoder::new();
        c.set_counter_reset_header(header);
        c.append_float_histogram(t, h);
        c
    }

    /// Upstream `FloatHistogramAppender.appendable`.
    fn appendable(&self, h: &FloatHistogram) -> Appendability {
        let mut r = Appendability {
            fwd_p: Vec::new(),
            fwd_n: Vec::new(),
            back_p: Vec::new(),
            back_n: Vec::new(),
            ok: false,
            counter_reset: false,
        };
        if self.num_samples() > 0 && self.counter_reset_header() == CounterResetHeader::Gauge {
            return r;
        }
        if h.counter_reset_hint == CounterResetHint::CounterReset {
            r.counter_reset = true;
            return r;
        }
        if h.is_stale() {
            r.ok = true;
            return r;
        }
        if is_stale_nan(self.sum.value) {
            return r;
        }
        if h.count < self.cnt.value {
            r.counter_reset = true;
            return r;
        }
        if h.schema != self.schema || h.zero_threshold != self.zero_threshold {
            return r;
        }
        if is_custom_buckets_schema(h.schema) && !custom_bucket_bounds_match(&h.custom_values, &self.custom_values) {
            r.counter_reset = true;
            return r;
        }
        if h.zero_count < self.z_cnt.value {
            r.counter_reset = true;
            return r;
        }
        let values = |v: &[XorValue]| v.iter().map(|x| x.value).collect::<Vec<_>>();
        let Some((fp, bp)) =
            expand_spans_and_buckets(&self.p_spans, &h.positive_spans, &values(&self.p_buckets), &h.positive_buckets)
        else {
            r.counter_reset = true;
            return r;
        };
        let Some((fnn, bn)) =
            expand_spans_and_buckets(&self.n_spans, &h.negative_spans, &values(&self.n_buckets), &h.negative_buckets)
        else {
            r.counter_reset = true;
            return r;
        };
        (r.fwd_p, r.back_p, r.fwd_n, r.back_n, r.ok) = (fp, bp, fnn, bn, true);
        r
    }

    /// Upstream `FloatHistogramAppender.appendableGauge`: forward and backward inserts (positive,
    /// negative), the merged spans, and whether the sample fits at all.
    #[allow(clippy::type_complexity)]
    fn appendable_gauge(
        &self,
        h: &FloatHistogram,
    ) -> (Vec<Insert>, Vec<Insert>, Vec<Insert>, Vec<Insert>, Vec<Span>, Vec<Span>, bool) {
        let none = || (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new(), false);
        if self.num_samples() > 0 && self.counter_reset_header() != CounterResetHeader::Gauge {
            return none();
        }
        if h.is_stale() {
            let mut r = none();
            r.6 = true;
            return r;
        }
        if is_stale_nan(self.sum.value)
            || h.schema != self.schema
            || h.zero_threshold != self.zero_threshold
            || (is_custom_buckets_schema(h.schema) && !custom_bucket_bounds_match(&h.custom_values, &self.custom_values))
        {
            return none();
        }
        let (fp, bp, sp) = expand_spans_both_ways(&self.p_spans, &h.positive_spans);
        let (fnn, bn, sn) = expand_spans_both_ways(&self.n_spans, &h.negative_spans);
        (fp, fnn, bp, bn, sp, sn, true)
    }

    /// Writes one sample and bumps the count (upstream `appendFloatHistogram` plus `setNumSamples`).
    fn append_float_histogram(&mut self, t: i64, h: &FloatHistogram) {
        let stale;
        let h = if h.is_stale() {
            stale = FloatHistogram { sum: h.sum, ..FloatHistogram::default() };
            &stale
        } else {
            h
        };
        let num = self.num_samples();
        let mut buf = std::mem::take(&mut self.buf);
        let mut w = BitWriter::resume(&mut buf, self.free_bits);
        let mut t_delta = 0i64;
        if num == 0 {
            write_layout(&mut w, h.schema, h.zero_threshold, &h.positive_spans, &h.negative_spans, &h.custom_values);
            self.schema = h.schema;
            self.zero_threshold = h.zero_threshold;
            self.p_spans.clone_from(&h.positive_spans);
            self.n_spans.clone_from(&h.negative_spans);
            self.custom_values.clone_from(&h.custom_values);
            self.p_buckets = h.positive_buckets.iter().map(|&v| XorValue::fresh(v)).collect();
            self.n_buckets = h.negative_buckets.iter().map(|&v| XorValue::fresh(v)).collect();
            put_varbit_int(&mut w, t);
            for v in [h.count, h.zero_count, h.sum] {
                w.write_bits(v.to_bits(), 64);
            }
            self.cnt.value = h.count;
            self.z_cnt.value = h.zero_count;
            self.sum.value = h.sum;
            for &b in h.positive_buckets.iter().chain(&h.negative_buckets) {
                w.write_bits(b.to_bits(), 64);
            }
        } else {
            t_delta = t.wrapping_sub(self.t);
            put_varbit_int(&mut w, t_delta.wrapping_sub(self.t_delta));
            self.cnt.write(&mut w, h.count);
            self.z_cnt.write(&mut w, h.zero_count);
            self.sum.write(&mut w, h.sum);
            for (&b, x) in h.positive_buckets.iter().zip(self.p_buckets.iter_mut()) {
                x.write(&mut w, b);
            }
            for (&b, x) in h.negative_buckets.iter().zip(self.n_buckets.iter_mut()) {
                x.write(&mut w, b);
            }
        }
        self.free_bits = w.free_bits();
        self.buf = buf;
        self.t = t;
        self.t_delta = t_delta;
        set_num_samples(&mut self.buf, num + 1);
    }

    /// Upstream `FloatHistogramAppender.recode`; the header bits are kept.
    fn recode(&mut self, ins_p: &[Insert], ins_n: &[Insert], spans_p: &[Span], spans_n: &[Span]) {
        let header = self.counter_reset_header();
        let mut out = FloatHistogramEncoder::new();
        let mut it = FloatHistogramIter::raw(&self.buf);
        while let Some((t, mut old)) = it.next_histogram().expect("the encoder's own bytes decode") {
            old.positive_spans = spans_p.to_vec();
            old.negative_spans = spans_n.to_vec();
            if !ins_p.is_empty() {
                old.positive_buckets = insert_buckets(&old.positive_buckets, ins_p, false);
            }
            if !ins_n.is_empty() {
                old.negative_buckets = insert_buckets(&old.negative_buckets, ins_n, false);
            }
            out.append_float_histogram(t, &old);
        }
        out.set_counter_reset_header(header);
        *self = out;
    }
}

/// Upstream `FloatHistogramAppender.recodeHistogram`.
fn widen(h: &mut FloatHistogram, back_p: &[Insert], back_n: &[Insert]) {
    if !back_p.is_empty() {
        h.positive_buckets = insert_buckets(&h.positive_buckets, back_p, false);
    }
    if !back_n.is_empty() {
        h.negative_buckets = insert_buckets(&h.negative_buckets, back_n, false);
    }
}

/// Per-value XOR decoding state (the reader's side of [`XorValue`]): Go's iterator starts from
/// leading = trailing = 0, i.e. a 64-bit window.
#[derive(Debug, Clone, Copy)]
struct XorState {
    bits: u64,
    trailing: u32,
    sig: u32,
}

impl XorState {
    const fn new(bits: u64) -> Self {
        Self { bits, trailing: 0, sig: 64 }
    }
}

/// Decodes a float histogram chunk (upstream `floatHistogramIterator`). Yields `Ok((t, histogram))` per
/// sample, or one `Err` and then `None`.
#[derive(Debug, Clone)]
pub struct FloatHistogramIter<'a> {
    br: BitReader<'a>,
    total: u16,
    read: u16,
    header: CounterResetHeader,
    short: Option<usize>,
    raw_schemas: bool,
    failed: bool,
    schema: i32,
    zero_threshold: f64,
    p_spans: Vec<Span>,
    n_spans: Vec<Span>,
    custom_values: Vec<f64>,
    t: i64,
    t_delta: i64,
    cnt: XorState,
    z_cnt: XorState,
    sum: XorState,
    p_buckets: Vec<XorState>,
    n_buckets: Vec<XorState>,
}

impl<'a> FloatHistogramIter<'a> {
    /// An iterator over `data`, a whole chunk (3 header bytes included).
    pub fn new(data: &'a [u8]) -> Self {
        let short = data.len() < HISTOGRAM_HEADER_BYTES;
        let (total, header, body) = if short {
            (1, CounterResetHeader::Unknown, &data[..0])
        } else {
            (num_samples(data), CounterResetHeader::of_chunk(data), &data[HISTOGRAM_HEADER_BYTES..])
        };
        Self {
            br: BitReader::new(body),
            total,
            read: 0,
            header,
            short: short.then_some(data.len()),
            raw_schemas: false,
            failed: false,
            schema: 0,
            zero_threshold: 0.0,
            p_spans: Vec::new(),
            n_spans: Vec::new(),
            custom_values: Vec::new(),
            t: i64::MIN,
            t_delta: 0,
            cnt: XorState::new(0),
            z_cnt: XorState::new(0),
            sum: XorState::new(0),
            p_buckets: Vec::new(),
            n_buckets: Vec::new(),
        }
    }

    fn raw(data: &'a [u8]) -> Self {
        let mut it = Self::new(data);
        it.raw_schemas = true;
        it
    }

    pub fn counter_reset_header(&self) -> CounterResetHeader {
        self.header
    }

    pub fn num_samples(&self) -> u16 {
        self.total
    }

    fn offset(&self) -> usize {
        HISTOGRAM_HEADER_BYTES + self.br.bit_position() / 8
    }

    fn truncated(&self) -> ChunkError {
        ChunkError::Truncated { offset: self.offset() }
    }

    /// Advances to the next sample: `Ok(Some((t, h)))`, `Ok(None)` at the end.
    pub fn next_histogram(&mut self) -> Result<Option<(i64, FloatHistogram)>, ChunkError> {
        if self.failed || self.read == self.total {
            return Ok(None);
        }
        match self.advance() {
            Ok(()) => {
                self.read += 1;
                Ok(Some((self.t, self.current())))
            }
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    fn read_raw(&mut self) -> Result<u64, ChunkError> {
        self.br.read_bits(64).ok_or_else(|| self.truncated())
    }

    fn read_xor(br: &mut BitReader<'_>, x: &mut XorState) -> Result<(), ChunkError> {
        let at = HISTOGRAM_HEADER_BYTES + br.bit_position() / 8;
        read_value_bits(br, &mut x.bits, &mut x.trailing, &mut x.sig).map(|_| ()).map_err(|e| e.at(at))
    }

    fn advance(&mut self) -> Result<(), ChunkError> {
        if let Some(len) = self.short {
            return Err(ChunkError::Truncated { offset: len });
        }
        if self.read == 0 {
            let start = self.offset();
            let l = read_layout(&mut self.br).map_err(|e| layout_error(e, start))?;
            if !is_known_schema(l.schema) {
                return Err(ChunkError::Corrupt { offset: start, reason: "unknown histogram schema" });
            }
            if l.schema > EXPONENTIAL_SCHEMA_MAX && !self.raw_schemas {
                // Upstream reduces such samples to schema 8 (`ReduceResolution`); not implemented yet.
                return Err(ChunkError::UnsupportedSchema(l.schema));
            }
            let (np, nn) = (span_bucket_count(&l.pos), span_bucket_count(&l.neg));
            // Every bucket of the first sample takes 64 bits.
            if np.saturating_add(nn) > self.br.remaining_bits() as u64 / 64 {
                return Err(self.truncated());
            }
            (self.schema, self.zero_threshold, self.p_spans, self.n_spans, self.custom_values) =
                (l.schema, l.zero_threshold, l.pos, l.neg, l.custom_values);
            self.t = read_varbit_int(&mut self.br).ok_or_else(|| self.truncated())?;
            self.cnt = XorState::new(self.read_raw()?);
            self.z_cnt = XorState::new(self.read_raw()?);
            self.sum = XorState::new(self.read_raw()?);
            self.p_buckets = Vec::with_capacity(np as usize);
            for _ in 0..np {
                let b = XorState::new(self.read_raw()?);
                self.p_buckets.push(b);
            }
            self.n_buckets = Vec::with_capacity(nn as usize);
            for _ in 0..nn {
                let b = XorState::new(self.read_raw()?);
                self.n_buckets.push(b);
            }
            return Ok(());
        }
        let t_dod = read_varbit_int(&mut self.br).ok_or_else(|| self.truncated())?;
        self.t_delta = self.t_delta.wrapping_add(t_dod);
        self.t = self.t.wrapping_add(self.t_delta);
        Self::read_xor(&mut self.br, &mut self.cnt)?;
        Self::read_xor(&mut self.br, &mut self.z_cnt)?;
        Self::read_xor(&mut self.br, &mut self.sum)?;
        if is_stale_nan(f64::from_bits(self.sum.bits)) {
            return Ok(());
        }
        for b in self.p_buckets.iter_mut().chain(self.n_buckets.iter_mut()) {
            Self::read_xor(&mut self.br, b)?;
        }
        Ok(())
    }

    /// The current sample (upstream `AtFloatHistogram`); a stale marker has only its sum.
    fn current(&self) -> FloatHistogram {
        let sum = f64::from_bits(self.sum.bits);
        if is_stale_nan(sum) {
            return FloatHistogram::stale();
        }
        let values = |v: &[XorState]| v.iter().map(|x| f64::from_bits(x.bits)).collect();
        FloatHistogram {
            counter_reset_hint: decoded_hint(self.header, self.read),
            schema: self.schema,
            zero_threshold: self.zero_threshold,
            zero_count: f64::from_bits(self.z_cnt.bits),
            count: f64::from_bits(self.cnt.bits),
            sum,
            positive_spans: self.p_spans.clone(),
            negative_spans: self.n_spans.clone(),
            positive_buckets: values(&self.p_buckets),
            negative_buckets: values(&self.n_buckets),
            custom_values: self.custom_values.clone(),
        }
    }
}

impl Iterator for FloatHistogramIter<'_> {
    type Item = Result<(i64, FloatHistogram), ChunkError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_histogram().transpose()
    }
}

/// Decodes a whole float histogram chunk, appending its samples to `out`; on error `out` is left as it was.
pub fn decode_float_histogram_into(data: &[u8], out: &mut Vec<(i64, FloatHistogram)>) -> Result<(), ChunkError> {
    let before = out.len();
    let mut it = FloatHistogramIter::new(data);
    loop {
        match it.next_histogram() {
            Ok(Some(s)) => out.push(s),
            Ok(None) => return Ok(()),
            Err(e) => {
                out.truncate(before);
                return Err(e);
            }
        }
    }
}

/// Encodes `samples` with one appender, cutting a new chunk wherever it asks for one; the chunks in order.
pub fn encode_float_histograms(samples: &[(i64, FloatHistogram)]) -> Result<Vec<Vec<u8>>, HistogramAppendError> {
    let mut done = Vec::new();
    let mut cur = FloatHistogramEncoder::new();
    for (t, h) in samples {
        if let Appended::NewChunk(next) = cur.append(*t, h, None)? {
            done.push(std::mem::replace(&mut cur, next).into_bytes());
        }
    }
    if cur.num_samples() > 0 {
        done.push(cur.into_bytes());
    }
    Ok(done)
}
