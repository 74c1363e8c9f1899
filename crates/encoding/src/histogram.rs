//! Prometheus' integer native-histogram chunk (`chunkenc.EncHistogram`, encoding byte 2), byte for byte:
//! [`HistogramEncoder`] mirrors upstream's `HistogramAppender`, [`HistogramIter`] its `histogramIterator`
//! (`tsdb/chunkenc/histogram.go`).
//!
//! Layout (see `docs/format/chunks.md`):
//! ```text
//! ┌─────────────────┬──────────────┬──────────────────────────────────────────────────────────────┐
//! │ count: u16 (BE) │ flags: u8    │ bit stream                                                    │
//! │                 │ (top 2 bits: │ sample 0: layout block, t varbit, count uvarbit, zero count   │
//! │                 │ counter-reset│   uvarbit, sum 64 bits, each bucket delta varbit               │
//! │                 │ header)      │ sample n: dod of t, count, zero count (varbit each), sum XOR, │
//! │                 │              │   dod of each bucket delta (varbit); nothing more when stale  │
//! └─────────────────┴──────────────┴──────────────────────────────────────────────────────────────┘
//! ```
//! All samples of a chunk share one bucket layout (schema, zero threshold, spans, NHCB bounds). When a
//! sample brings buckets the chunk lacks, the appender rewrites ("recodes") the chunk with those buckets
//! present and empty in every earlier sample; when a sample lacks empty buckets the chunk has, the sample
//! is widened instead. A counter reset, a schema / zero-threshold / bound change or a sample after a stale
//! marker needs a new chunk, whose header says why ([`AppendDecision`]).
//!
//! Key decision: the encoder owns complete chunk bytes after every append (the header is rewritten in
//! place), like [`crate::XorEncoder`], so the head can hand them out at any time; the decoders treat
//! bytes as untrusted (every count is checked against the bits left before it is allocated, and arithmetic
//! wraps as Go's does), so a corrupt chunk is a [`ChunkError`], never a panic.

use std::borrow::Cow;

use crate::bstream::{BitReader, BitWriter};
use crate::error::ChunkError;
use crate::histogram_meta::{
    CounterResetHeader, HISTOGRAM_HEADER_BYTES, Insert, LayoutError, adjust_for_inserts, expand_spans_and_buckets,
    expand_spans_both_ways, insert_buckets, num_samples, read_layout, set_header, set_num_samples, write_layout,
};
use crate::varbit::{put_varbit_int, put_varbit_uint, read_varbit_int, read_varbit_uint};
use crate::xor::{NO_WINDOW, read_value_bits, write_value};
use tessera_model::histogram::{
    CounterResetHint, EXPONENTIAL_SCHEMA_MAX, Histogram, Span, custom_bucket_bounds_match, is_custom_buckets_schema,
    is_known_schema, span_bucket_count,
};
use tessera_model::is_stale_nan;

/// What upstream's appender does with the next sample of a chunk (`appendable` / `appendableGauge`
/// and the branches of `AppendHistogram` / `AppendFloatHistogram` that act on them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AppendDecision {
    /// The sample joins the chunk as it is; `widen_sample`: after the chunk's empty buckets it lacks
    /// were added to it (upstream `recodeHistogram` with backward inserts).
    Append { widen_sample: bool },
    /// The chunk must first be rewritten with the sample's new buckets (upstream `recode`, forward
    /// inserts); `widen_sample` as for `Append`.
    Recode { widen_sample: bool },
    /// The sample starts a new chunk with this header: `CounterReset` after a counter reset (counts
    /// dropped, a populated bucket vanished, NHCB bounds changed, or the sample's hint says so),
    /// `Unknown` after a schema / zero-threshold change or a stale marker, `Gauge` for gauge histograms
    /// (after a counter chunk, or a schema, threshold or bound change). A counter sample after a gauge
    /// chunk gets `NotCounterReset` in the integer chunk and `Unknown` in the float one, as upstream.
    NewChunk(CounterResetHeader),
}

/// What [`HistogramEncoder::append`] did with a sample.
#[derive(Debug, Clone)]
pub enum Appended<E> {
    /// Appended to this chunk.
    InPlace,
    /// This chunk was rewritten with a wider layout, then the sample appended: its earlier bytes changed.
    Recoded,
    /// The sample went into the returned new chunk; this one is complete.
    NewChunk(E),
}

/// Why a histogram could not be appended.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HistogramAppendError {
    /// The chunk holds `u16::MAX` samples already (upstream panics).
    #[error("histogram chunk is full")]
    ChunkFull,
    /// A bucket vector's length is not the number of buckets its spans describe (upstream panics).
    #[error("histogram has {buckets} {side} buckets but its spans describe {spans}")]
    BucketCountMismatch { side: &'static str, buckets: usize, spans: u64 },
}

/// Checks what upstream assumes without checking.
pub(crate) fn check_bucket_counts(
    pos: (&[Span], usize),
    neg: (&[Span], usize),
) -> Result<(), HistogramAppendError> {
    for (side, (spans, buckets)) in [("positive", pos), ("negative", neg)] {
        let n = span_bucket_count(spans);
        if n != buckets as u64 {
            return Err(HistogramAppendError::BucketCountMismatch { side, buckets, spans: n });
        }
    }
    Ok(())
}

/// Absolute bucket counts from deltas (wrapping, as Go's int64 does).
fn absolute(deltas: &[i64]) -> Vec<i64> {
    let mut cur = 0i64;
    deltas
        .iter()
        .map(|d| {
            cur = cur.wrapping_add(*d);
            cur
        })
        .collect()
}

/// The result of upstream `appendable` (counter histograms).
struct Appendability {
    fwd_p: Vec<Insert>,
    fwd_n: Vec<Insert>,
    back_p: Vec<Insert>,
    back_n: Vec<Insert>,
    ok: bool,
    header: CounterResetHeader,
}

/// The result of upstream `appendableGauge`.
struct GaugeAppendability {
    fwd_p: Vec<Insert>,
    fwd_n: Vec<Insert>,
    back_p: Vec<Insert>,
    back_n: Vec<Insert>,
    spans_p: Vec<Span>,
    spans_n: Vec<Span>,
    ok: bool,
}

/// Appends integer histograms to one chunk (upstream `HistogramAppender`).
#[derive(Debug, Clone)]
pub struct HistogramEncoder {
    /// Complete chunk bytes: 3 header bytes then the bit stream, last byte zero-padded.
    buf: Vec<u8>,
    free_bits: u32,
    schema: i32,
    zero_threshold: f64,
    p_spans: Vec<Span>,
    n_spans: Vec<Span>,
    custom_values: Vec<f64>,
    t: i64,
    cnt: u64,
    z_cnt: u64,
    t_delta: i64,
    cnt_delta: i64,
    z_cnt_delta: i64,
    p_buckets: Vec<i64>,
    n_buckets: Vec<i64>,
    p_buckets_delta: Vec<i64>,
    n_buckets_delta: Vec<i64>,
    sum: f64,
    leading: u8,
    trailing: u8,
}

impl Default for HistogramEncoder {
    fn default() -> Self {
        Self::new()
    }
}

impl HistogramEncoder {
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
            cnt: 0,
            z_cnt: 0,
            t_delta: 0,
            cnt_delta: 0,
            z_cnt_delta: 0,
            p_buckets: Vec::new(),
            n_buckets: Vec::new(),
            p_buckets_delta: Vec::new(),
            n_buckets_delta: Vec::new(),
            sum: 0.0,
            leading: NO_WINDOW,
            trailing: 0,
        }
    }

    /// Reopens a chunk's bytes to append more samples (WAL replay, out-of-order merging), as upstream's
    /// `Appender()` on a non-empty chunk. The samples are decoded and written again, which gives the
    /// appender exactly the state it had when it wrote them and the same bytes for any chunk written in
    /// one go (ours or Prometheus'); unlike upstream, bytes after the last sample are dropped and the
    /// next sample continues in the last byte's padding bits, so reopen-then-append equals one appender.
    pub fn from_bytes(data: &[u8]) -> Result<Self, ChunkError> {
        let mut enc = Self::new();
        let mut it = HistogramIter::raw(data);
        while let Some((t, h)) = it.next_histogram()? {
            enc.append_histogram(t, &h);
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

    /// Overwrites the header bits (upstream `setCounterResetHeader`), e.g. when storage knows more.
    pub fn set_counter_reset_header(&mut self, h: CounterResetHeader) {
        set_header(&mut self.buf, h);
    }

    /// Timestamp of the last sample, if any.
    pub fn last_t(&self) -> Option<i64> {
        (self.num_samples() > 0).then_some(self.t)
    }

    /// What [`HistogramEncoder::append`] would do with `h` (nothing is changed). An empty chunk always
    /// takes the sample.
    pub fn decide(&self, h: &Histogram) -> AppendDecision {
        if self.num_samples() == 0 {
            return AppendDecision::Append { widen_sample: false };
        }
        if h.counter_reset_hint != CounterResetHint::Gauge {
            let a = self.appendable(h);
            if !a.ok || a.header != CounterResetHeader::NotCounterReset {
                return AppendDecision::NewChunk(a.header);
            }
            let widen_sample = !a.back_p.is_empty() || !a.back_n.is_empty();
            if !a.fwd_p.is_empty() || !a.fwd_n.is_empty() {
                return AppendDecision::Recode { widen_sample };
            }
            return AppendDecision::Append { widen_sample };
        }
        let g = self.appendable_gauge(h);
        if !g.ok {
            return AppendDecision::NewChunk(CounterResetHeader::Gauge);
        }
        let widen_sample = !g.back_p.is_empty() || !g.back_n.is_empty();
        if !g.fwd_p.is_empty() || !g.fwd_n.is_empty() {
            AppendDecision::Recode { widen_sample }
        } else {
            AppendDecision::Append { widen_sample }
        }
    }

    /// The header a new chunk starting with `h` gets when this is the series' previous chunk (what
    /// upstream's `AppendHistogram` asks of `prev` for a chunk's first sample).
    pub fn header_for_next_chunk(&self, h: &Histogram) -> CounterResetHeader {
        self.appendable(h).header
    }

    /// Appends `h` at `t` as upstream's `AppendHistogram(prev, _, t, h, appendOnly=false)` does: in
    /// place, by recoding this chunk, or by starting a new chunk (returned). `prev` is the series'
    /// previous chunk, consulted only for the counter-reset header of an empty chunk's first sample.
    /// Timestamps are not checked (storage orders samples).
    pub fn append(
        &mut self,
        t: i64,
        h: &Histogram,
        prev: Option<&HistogramEncoder>,
    ) -> Result<Appended<HistogramEncoder>, HistogramAppendError> {
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
            self.append_histogram(t, h);
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
            if !a.ok || a.header != CounterResetHeader::NotCounterReset {
                return Ok(Appended::NewChunk(self.new_chunk_with(a.header, t, &h)));
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
            let g = self.appendable_gauge(&h);
            if !g.ok {
                return Ok(Appended::NewChunk(self.new_chunk_with(CounterResetHeader::Gauge, t, &h)));
            }
            if !g.back_p.is_empty() || !g.back_n.is_empty() {
                let hm = h.to_mut();
                hm.positive_spans = g.spans_p;
                hm.negative_spans = g.spans_n;
                widen(hm, &g.back_p, &g.back_n);
            }
            (g.fwd_p, g.fwd_n)
        };
        if !fwd_p.is_empty() || !fwd_n.is_empty() {
            self.recode(&fwd_p, &fwd_n, &h.positive_spans, &h.negative_spans);
            self.append_histogram(t, &h);
            return Ok(Appended::Recoded);
        }
        self.append_histogram(t, &h);
        Ok(Appended::InPlace)
    }

    fn new_chunk_with(&self, header: CounterResetHeader, t: i64, h: &Histogram) -> HistogramEncoder {
        let mut c = HistogramEncoder::new();
        c.set_counter_reset_header(header);
        c.append_histogram(t, h);
        c
    }

    /// Upstream `HistogramAppender.appendable`.
    fn appendable(&self, h: &Histogram) -> Appendability {
        let mut r = Appendability {
            fwd_p: Vec::new(),
            fwd_n: Vec::new(),
            back_p: Vec::new(),
            back_n: Vec::new(),
            ok: false,
            header: CounterResetHeader::NotCounterReset,
        };
        if self.num_samples() > 0 && self.counter_reset_header() == CounterResetHeader::Gauge {
            return r;
        }
        if h.counter_reset_hint == CounterResetHint::CounterReset {
            r.header = CounterResetHeader::CounterReset;
            return r;
        }
        if h.is_stale() {
            r.ok = true;
            return r;
        }
        if is_stale_nan(self.sum) {
            r.header = CounterResetHeader::Unknown;
            return r;
        }
        if h.count < self.cnt {
            r.header = CounterResetHeader::CounterReset;
            return r;
        }
        if h.schema != self.schema || h.zero_threshold != self.zero_threshold {
            r.header = CounterResetHeader::Unknown;
            return r;
        }
        if is_custom_buckets_schema(h.schema) && !custom_bucket_bounds_match(&h.custom_values, &self.custom_values) {
            r.header = CounterResetHeader::CounterReset;
            return r;
        }
        if h.zero_count < self.z_cnt {
            r.header = CounterResetHeader::CounterReset;
            return r;
        }
        let Some((fp, bp)) = expand_spans_and_buckets(
            &self.p_spans,
            &h.positive_spans,
            &absolute(&self.p_buckets),
            &absolute(&h.positive_buckets),
        ) else {
            r.header = CounterResetHeader::CounterReset;
            return r;
        };
        let Some((fnn, bn)) = expand_spans_and_buckets(
            &self.n_spans,
            &h.negative_spans,
            &absolute(&self.n_buckets),
            &absolute(&h.negative_buckets),
        ) else {
            r.header = CounterResetHeader::CounterReset;
            return r;
        };
        (r.fwd_p, r.back_p, r.fwd_n, r.back_n, r.ok) = (fp, bp, fnn, bn, true);
        r
    }

    /// Upstream `HistogramAppender.appendableGauge`.
    fn appendable_gauge(&self, h: &Histogram) -> GaugeAppendability {
        let mut r = GaugeAppendability {
            fwd_p: Vec::new(),
            fwd_n: Vec::new(),
            back_p: Vec::new(),
            back_n: Vec::new(),
            spans_p: Vec::new(),
            spans_n: Vec::new(),
            ok: false,
        };
        if self.num_samples() > 0 && self.counter_reset_header() != CounterResetHeader::Gauge {
            return r;
        }
        if h.is_stale() {
            r.ok = true;
            return r;
        }
        if is_stale_nan(self.sum)
            || h.schema != self.schema
            || h.zero_threshold != self.zero_threshold
            || (is_custom_buckets_schema(h.schema) && !custom_bucket_bounds_match(&h.custom_values, &self.custom_values))
        {
            return r;
        }
        (r.fwd_p, r.back_p, r.spans_p) = expand_spans_both_ways(&self.p_spans, &h.positive_spans);
        (r.fwd_n, r.back_n, r.spans_n) = expand_spans_both_ways(&self.n_spans, &h.negative_spans);
        r.ok = true;
        r
    }

    /// Writes one sample and bumps the count (upstream `appendHistogram` plus `setNumSamples`). The
    /// caller has made `h`'s layout the chunk's.
    fn append_histogram(&mut self, t: i64, h: &Histogram) {
        let stale;
        let h = if h.is_stale() {
            stale = Histogram { sum: h.sum, ..Histogram::default() };
            &stale
        } else {
            h
        };
        let num = self.num_samples();
        let mut buf = std::mem::take(&mut self.buf);
        let mut w = BitWriter::resume(&mut buf, self.free_bits);
        let (mut t_delta, mut cnt_delta, mut z_cnt_delta) = (0i64, 0i64, 0i64);
        if num == 0 {
            write_layout(&mut w, h.schema, h.zero_threshold, &h.positive_spans, &h.negative_spans, &h.custom_values);
            self.schema = h.schema;
            self.zero_threshold = h.zero_threshold;
            self.p_spans.clone_from(&h.positive_spans);
            self.n_spans.clone_from(&h.negative_spans);
            self.custom_values.clone_from(&h.custom_values);
            let (np, nn) = (span_bucket_count(&h.positive_spans) as usize, span_bucket_count(&h.negative_spans) as usize);
            self.p_buckets = vec![0; np];
            self.p_buckets_delta = vec![0; np];
            self.n_buckets = vec![0; nn];
            self.n_buckets_delta = vec![0; nn];
            put_varbit_int(&mut w, t);
            put_varbit_uint(&mut w, h.count);
            put_varbit_uint(&mut w, h.zero_count);
            w.write_bits(h.sum.to_bits(), 64);
            for &b in h.positive_buckets.iter().chain(&h.negative_buckets) {
                put_varbit_int(&mut w, b);
            }
        } else {
            // Go's int64 arithmetic wraps; so does ours.
            t_delta = t.wrapping_sub(self.t);
            cnt_delta = (h.count as i64).wrapping_sub(self.cnt as i64);
            z_cnt_delta = (h.zero_count as i64).wrapping_sub(self.z_cnt as i64);
            let t_dod = t_delta.wrapping_sub(self.t_delta);
            let (mut cnt_dod, mut z_cnt_dod) =
                (cnt_delta.wrapping_sub(self.cnt_delta), z_cnt_delta.wrapping_sub(self.z_cnt_delta));
            if h.is_stale() {
                (cnt_dod, z_cnt_dod) = (0, 0);
            }
            put_varbit_int(&mut w, t_dod);
            put_varbit_int(&mut w, cnt_dod);
            put_varbit_int(&mut w, z_cnt_dod);
            write_value(&mut w, &mut self.leading, &mut self.trailing, self.sum.to_bits(), h.sum.to_bits());
            for (buckets, (prev, prev_delta)) in [
                (&h.positive_buckets, (&self.p_buckets, &mut self.p_buckets_delta)),
                (&h.negative_buckets, (&self.n_buckets, &mut self.n_buckets_delta)),
            ] {
                for ((&b, &p), pd) in buckets.iter().zip(prev.iter()).zip(prev_delta.iter_mut()) {
                    let delta = b.wrapping_sub(p);
                    put_varbit_int(&mut w, delta.wrapping_sub(*pd));
                    *pd = delta;
                }
            }
        }
        self.free_bits = w.free_bits();
        self.buf = buf;
        self.t = t;
        self.cnt = h.count;
        self.z_cnt = h.zero_count;
        self.t_delta = t_delta;
        self.cnt_delta = cnt_delta;
        self.z_cnt_delta = z_cnt_delta;
        copy_prefix(&mut self.p_buckets, &h.positive_buckets);
        copy_prefix(&mut self.n_buckets, &h.negative_buckets);
        self.sum = h.sum;
        set_num_samples(&mut self.buf, num + 1);
    }

    /// Rewrites the chunk with `inserts` added to every sample's buckets and the wider spans (upstream
    /// `HistogramAppender.recode`); the header bits are kept.
    fn recode(&mut self, ins_p: &[Insert], ins_n: &[Insert], spans_p: &[Span], spans_n: &[Span]) {
        let header = self.counter_reset_header();
        let mut out = HistogramEncoder::new();
        let mut it = HistogramIter::raw(&self.buf);
        while let Some((t, mut old)) = it.next_histogram().expect("the encoder's own bytes decode") {
            old.positive_spans = spans_p.to_vec();
            old.negative_spans = spans_n.to_vec();
            if !ins_p.is_empty() {
                old.positive_buckets = insert_buckets(&old.positive_buckets, ins_p, true);
            }
            if !ins_n.is_empty() {
                old.negative_buckets = insert_buckets(&old.negative_buckets, ins_n, true);
            }
            out.append_histogram(t, &old);
        }
        out.set_counter_reset_header(header);
        *self = out;
    }
}

/// Go's `copy(dst, src)`: as many elements as both have.
pub(crate) fn copy_prefix<T: Copy>(dst: &mut [T], src: &[T]) {
    let n = dst.len().min(src.len());
    dst[..n].copy_from_slice(&src[..n]);
}

/// Adds the chunk's empty buckets a sample lacks (upstream `HistogramAppender.recodeHistogram`); the
/// sample's spans are already the widened ones.
fn widen(h: &mut Histogram, back_p: &[Insert], back_n: &[Insert]) {
    if !back_p.is_empty() {
        h.positive_buckets = insert_buckets(&h.positive_buckets, back_p, true);
    }
    if !back_n.is_empty() {
        h.negative_buckets = insert_buckets(&h.negative_buckets, back_n, true);
    }
}

/// The counter-reset hint a decoded sample carries (upstream `counterResetHint`): `Gauge` in a gauge
/// chunk, `Unknown` for a chunk's first sample, `NotCounterReset` after it.
pub(crate) fn decoded_hint(header: CounterResetHeader, num_read: u16) -> CounterResetHint {
    match header {
        CounterResetHeader::Gauge => CounterResetHint::Gauge,
        _ if num_read > 1 => CounterResetHint::NotCounterReset,
        _ => CounterResetHint::Unknown,
    }
}

pub(crate) fn layout_error(e: LayoutError, offset: usize) -> ChunkError {
    match e {
        LayoutError::Truncated => ChunkError::Truncated { offset },
        LayoutError::Corrupt(reason) => ChunkError::Corrupt { offset, reason },
    }
}

/// Decodes an integer histogram chunk (upstream `histogramIterator`). Yields `Ok((t, histogram))` per
/// sample, or one `Err` and then `None`.
#[derive(Debug, Clone)]
pub struct HistogramIter<'a> {
    br: BitReader<'a>,
    total: u16,
    read: u16,
    header: CounterResetHeader,
    /// `Some(len)` when the bytes are shorter than the header.
    short: Option<usize>,
    /// Recoding re-reads our own chunks, where schemas 9..=52 are passed through as written.
    raw_schemas: bool,
    failed: bool,
    schema: i32,
    zero_threshold: f64,
    p_spans: Vec<Span>,
    n_spans: Vec<Span>,
    custom_values: Vec<f64>,
    t: i64,
    cnt: u64,
    z_cnt: u64,
    t_delta: i64,
    cnt_delta: i64,
    z_cnt_delta: i64,
    p_buckets: Vec<i64>,
    n_buckets: Vec<i64>,
    p_buckets_delta: Vec<i64>,
    n_buckets_delta: Vec<i64>,
    sum_bits: u64,
    trailing: u32,
    sig: u32,
}

impl<'a> HistogramIter<'a> {
    /// An iterator over `data`, a whole chunk (3 header bytes included). Bytes shorter than the header
    /// yield one `Truncated` error.
    pub fn new(data: &'a [u8]) -> Self {
        let short = data.len() < HISTOGRAM_HEADER_BYTES;
        let (total, header, body) = if short {
            // Reported as a truncation on the first call.
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
            cnt: 0,
            z_cnt: 0,
            t_delta: 0,
            cnt_delta: 0,
            z_cnt_delta: 0,
            p_buckets: Vec::new(),
            n_buckets: Vec::new(),
            p_buckets_delta: Vec::new(),
            n_buckets_delta: Vec::new(),
            sum_bits: 0,
            trailing: 0,
            sig: 64,
        }
    }

    fn raw(data: &'a [u8]) -> Self {
        let mut it = Self::new(data);
        it.raw_schemas = true;
        it
    }

    /// The chunk's counter-reset header.
    pub fn counter_reset_header(&self) -> CounterResetHeader {
        self.header
    }

    /// Samples the header announces.
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
    pub fn next_histogram(&mut self) -> Result<Option<(i64, Histogram)>, ChunkError> {
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
            // Every bucket of the first sample takes at least one bit.
            if np.saturating_add(nn) > self.br.remaining_bits() as u64 {
                return Err(self.truncated());
            }
            (self.schema, self.zero_threshold, self.p_spans, self.n_spans, self.custom_values) =
                (l.schema, l.zero_threshold, l.pos, l.neg, l.custom_values);
            self.p_buckets = vec![0; np as usize];
            self.p_buckets_delta = vec![0; np as usize];
            self.n_buckets = vec![0; nn as usize];
            self.n_buckets_delta = vec![0; nn as usize];
            self.t = read_varbit_int(&mut self.br).ok_or_else(|| self.truncated())?;
            self.cnt = read_varbit_uint(&mut self.br).ok_or_else(|| self.truncated())?;
            self.z_cnt = read_varbit_uint(&mut self.br).ok_or_else(|| self.truncated())?;
            self.sum_bits = self.br.read_bits(64).ok_or_else(|| self.truncated())?;
            for i in 0..self.p_buckets.len() + self.n_buckets.len() {
                let v = read_varbit_int(&mut self.br).ok_or_else(|| self.truncated())?;
                match self.p_buckets.get_mut(i) {
                    Some(b) => *b = v,
                    None => self.n_buckets[i - self.p_buckets.len()] = v,
                }
            }
            return Ok(());
        }
        let t_dod = read_varbit_int(&mut self.br).ok_or_else(|| self.truncated())?;
        self.t_delta = self.t_delta.wrapping_add(t_dod);
        self.t = self.t.wrapping_add(self.t_delta);
        let cnt_dod = read_varbit_int(&mut self.br).ok_or_else(|| self.truncated())?;
        self.cnt_delta = self.cnt_delta.wrapping_add(cnt_dod);
        self.cnt = (self.cnt as i64).wrapping_add(self.cnt_delta) as u64;
        let z_dod = read_varbit_int(&mut self.br).ok_or_else(|| self.truncated())?;
        self.z_cnt_delta = self.z_cnt_delta.wrapping_add(z_dod);
        self.z_cnt = (self.z_cnt as i64).wrapping_add(self.z_cnt_delta) as u64;
        let at = self.offset();
        read_value_bits(&mut self.br, &mut self.sum_bits, &mut self.trailing, &mut self.sig).map_err(|e| e.at(at))?;
        if is_stale_nan(f64::from_bits(self.sum_bits)) {
            return Ok(());
        }
        for (buckets, deltas) in
            [(&mut self.p_buckets, &mut self.p_buckets_delta), (&mut self.n_buckets, &mut self.n_buckets_delta)]
        {
            for (b, d) in buckets.iter_mut().zip(deltas.iter_mut()) {
                let Some(dod) = read_varbit_int(&mut self.br) else {
                    return Err(ChunkError::Truncated { offset: HISTOGRAM_HEADER_BYTES + self.br.bit_position() / 8 });
                };
                *d = d.wrapping_add(dod);
                *b = b.wrapping_add(*d);
            }
        }
        Ok(())
    }

    /// The current sample (upstream `AtHistogram`); a stale marker has only its sum.
    fn current(&self) -> Histogram {
        let sum = f64::from_bits(self.sum_bits);
        if is_stale_nan(sum) {
            return Histogram::stale();
        }
        Histogram {
            counter_reset_hint: decoded_hint(self.header, self.read),
            schema: self.schema,
            zero_threshold: self.zero_threshold,
            zero_count: self.z_cnt,
            count: self.cnt,
            sum,
            positive_spans: self.p_spans.clone(),
            negative_spans: self.n_spans.clone(),
            positive_buckets: self.p_buckets.clone(),
            negative_buckets: self.n_buckets.clone(),
            custom_values: self.custom_values.clone(),
        }
    }
}

impl Iterator for HistogramIter<'_> {
    type Item = Result<(i64, Histogram), ChunkError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_histogram().transpose()
    }
}

/// Decodes a whole integer histogram chunk, appending its samples to `out`; on error `out` is left as it was.
pub fn decode_histogram_into(data: &[u8], out: &mut Vec<(i64, Histogram)>) -> Result<(), ChunkError> {
    let before = out.len();
    let mut it = HistogramIter::new(data);
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

/// Encodes `samples` the way upstream's head would: one appender, a new chunk wherever the appender
/// asks for one (each new chunk's predecessor is the previous chunk). Returns the chunks in order.
pub fn encode_histograms(samples: &[(i64, Histogram)]) -> Result<Vec<Vec<u8>>, HistogramAppendError> {
    let mut done = Vec::new();
    let mut cur = HistogramEncoder::new();
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
