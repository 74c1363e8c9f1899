//! The meaning of the bytes in the WAL. `tessera-wal` moves opaque, CRC-checked records; this module
//! defines what a record says and how it is laid out.
//!
//! One record per shard per committed batch ([`Record::Batch`]): the series the batch created and its
//! accepted samples (type 2, or type 4 when some samples carry start timestamps), so that a batch is in the log entirely or not at all (the WAL's CRC covers the whole
//! record; a torn record is dropped as a whole on replay). Checkpoints reuse [`Record::Series`],
//! [`Record::Tombstones`] and [`Record::Exemplars`].
//!
//! Layout (all integers LEB128 varints; `zz` = zigzag-encoded signed):
//! ```text
//! record     := type:u8 body
//! type 1 Series     : n:uvar { ref:uvar nlabels:uvar { len:uvar name len:uvar value } }
//! type 2 Batch      : nseries:uvar series-defs (as in type 1, without the type byte)
//!                     ngroups:uvar { ref:uvar n:uvar t0:zz { dt:zz }*(n-1) { v:u64le }*n }
//! type 3 Tombstones : n:uvar { ref:uvar mint:zz maxt:zz }
//! type 4 BatchSt    : as type 2, each group followed by has_st:u8 (0 or 1) and, when 1,
//!                     { st - previous st:zz }*n (the first against 0)
//! type 5 BatchHist  : as type 4, then nhgroups:uvar { ref:uvar n:uvar { t:zz hist }*n has_st:u8
//!                     [ { st - previous st:zz }*n when has_st = 1 ] }
//! hist := kind:u8 (1 integer, 2 float) hint:u8 schema:zz zero_threshold:u64le
//!         count zero_count (uvar each for integer, u64le bits for float) sum:u64le
//!         npos_spans:uvar { offset:zz length:uvar } nneg_spans:uvar { … }
//!         npos:uvar { delta:zz | count:u64le } nneg:uvar { … } ncustom:uvar { bound:u64le }
//! type 6 Exemplars  : n:uvar { series-labels t:zz v:u64le exemplar-labels }
//!                     labels := nlabels:uvar { len:uvar name len:uvar value }
//! type 7 Compressed : codec:u8 (1 = zstd) raw_len:uvar frame (another record; see crate::wal_pack)
//! type 8 BatchCtx   : src:u8 (2, 4, 5) then src's body, each group
//!                     dref:zz n:uvar dt0:zz { dt:zz }*(n-1) { xor }*n [ has_st … as src ]
//!                     (values XOR the series' last value earlier in the segment: [`put_xor`])
//! ```
//! Exemplars (type 6) are logged after their commit's batch record and written into checkpoints; they
//! name their series by its labels, not its ref, so they outlive the series' time in the head (the
//! exemplar ring is independent of head garbage collection, as upstream's).
//! Native-histogram samples (type 5) travel in the same record as the float samples of their commit, so
//! a commit stays all-or-nothing in the log; commits without histograms keep writing types 2 and 4.
//! Samples are grouped per series (a batch usually carries many samples of few series), timestamps as
//! deltas from the previous sample of the group (1 byte for regular scrapes), values as raw bits so stale
//! markers and NaN payloads survive exactly.
//!
//! Key decision: decoding never panics on arbitrary bytes (proptest below): every length is checked against
//! the remaining input before anything is allocated.

use tessera_model::histogram::{CounterResetHint, FloatHistogram, Histogram, Span};
use tessera_model::{Exemplar, HistogramSample, HistogramValue, Label, Labels, Sample};

pub const REC_SERIES: u8 = 1;
pub const REC_BATCH: u8 = 2;
pub const REC_TOMBSTONES: u8 = 3;
/// A batch whose groups may carry per-sample start timestamps (Prometheus 3.14's ST). Written only when
/// a commit holds some sample with an ST, so commits without STs keep writing type 2 byte for byte.
pub const REC_BATCH_ST: u8 = 4;
/// A type 4 batch followed by native-histogram sample groups.
pub const REC_BATCH_HIST: u8 = 5;
/// Exemplars of series the shard defines.
pub const REC_EXEMPLARS: u8 = 6;
/// Another record compressed (see [`crate::wal_pack`]): `codec:u8 raw_len:uvar frame`.
pub const REC_COMPRESSED: u8 = 7;
/// A batch of type 2, 4 or 5 whose float values are coded against the segment's value context (see
/// [`crate::wal_pack`]).
pub const REC_BATCH_CTX: u8 = 8;

/// A series definition: the shard-local ref and its labels.
#[derive(Debug, Clone, PartialEq)]
pub struct SeriesDef {
    pub series_ref: u32,
    pub labels: Labels,
}

/// A run of samples of one series, in the order they were accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleGroup {
    pub series_ref: u32,
    pub samples: Vec<Sample>,
    /// Start timestamp of each sample (0 = unset), or empty when the group carries none.
    pub sts: Vec<i64>,
}

/// Native-histogram samples of one series, in the order they were accepted.
#[derive(Debug, Clone, PartialEq)]
pub struct HistogramGroup {
    pub series_ref: u32,
    pub samples: Vec<HistogramSample>,
}

/// A deletion interval of one series, both ends inclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TombstoneRec {
    pub series_ref: u32,
    pub mint_ms: i64,
    pub maxt_ms: i64,
}

/// A decoded record.
#[derive(Debug, Clone, PartialEq)]
pub enum Record {
    Series(Vec<SeriesDef>),
    Batch { series: Vec<SeriesDef>, groups: Vec<SampleGroup>, hists: Vec<HistogramGroup> },
    Tombstones(Vec<TombstoneRec>),
    Exemplars(Vec<(Labels, Exemplar)>),
}

// ---- encoding -------------------------------------------------------------------------------------

#[inline]
pub fn put_uvarint(buf: &mut Vec<u8>, mut x: u64) {
    while x >= 0x80 {
        buf.push((x as u8) | 0x80);
        x >>= 7;
    }
    buf.push(x as u8);
}

#[inline]
pub fn put_varint(buf: &mut Vec<u8>, x: i64) {
    put_uvarint(buf, ((x << 1) ^ (x >> 63)) as u64);
}

fn put_series_defs<'a>(buf: &mut Vec<u8>, defs: impl ExactSizeIterator<Item = (u32, &'a Labels)>) {
    put_uvarint(buf, defs.len() as u64);
    for (r, l) in defs {
        put_uvarint(buf, r as u64);
        put_uvarint(buf, l.len() as u64);
        for lb in l.iter() {
            put_uvarint(buf, lb.name.len() as u64);
            buf.extend_from_slice(lb.name.as_bytes());
            put_uvarint(buf, lb.value.len() as u64);
            buf.extend_from_slice(lb.value.as_bytes());
        }
    }
}

/// Appends a [`Record::Series`] to `buf`.
pub fn encode_series<'a>(buf: &mut Vec<u8>, defs: impl ExactSizeIterator<Item = (u32, &'a Labels)>) {
    buf.push(REC_SERIES);
    put_series_defs(buf, defs);
}

/// Incremental writer of a [`Record::Batch`]: series definitions first, then sample groups.
pub struct BatchEncoder<'b> {
    buf: &'b mut Vec<u8>,
    groups_at: usize,
    groups: u64,
    /// Writing a type 4 record (every group gets its `has_st` byte).
    with_st: bool,
}

impl<'b> BatchEncoder<'b> {
    /// Starts a batch record in `buf` (cleared) with the given new series.
    pub fn new<'a>(buf: &'b mut Vec<u8>, defs: impl ExactSizeIterator<Item = (u32, &'a Labels)>) -> Self {
        Self::start(buf, defs, false)
    }

    /// Starts a type 4 record (groups may carry start timestamps, see [`BatchEncoder::group_st`]).
    pub fn new_st<'a>(buf: &'b mut Vec<u8>, defs: impl ExactSizeIterator<Item = (u32, &'a Labels)>) -> Self {
        Self::start(buf, defs, true)
    }

    /// Starts a type 5 record: float groups as in type 4, then native-histogram groups
    /// ([`BatchEncoder::finish_with_histograms`]).
    pub fn new_hist<'a>(buf: &'b mut Vec<u8>, defs: impl ExactSizeIterator<Item = (u32, &'a Labels)>) -> Self {
        let e = Self::start(buf, defs, true);
        e.buf[0] = REC_BATCH_HIST;
        e
    }

    fn start<'a>(buf: &'b mut Vec<u8>, defs: impl ExactSizeIterator<Item = (u32, &'a Labels)>, with_st: bool) -> Self {
        buf.clear();
        buf.push(if with_st { REC_BATCH_ST } else { REC_BATCH });
        put_series_defs(buf, defs);
        let groups_at = buf.len();
        // Placeholder for the group count: a fixed 5-byte varint so it can be patched in place.
        buf.extend_from_slice(&[0x80, 0x80, 0x80, 0x80, 0x00]);
        BatchEncoder { buf, groups_at, groups: 0, with_st }
    }

    /// Adds the samples of one series with their start timestamps (`sts[i]` for `samples[i]`, 0 = unset).
    /// In a type 2 record (started with [`BatchEncoder::new`]) the STs cannot be stored and are dropped;
    /// callers start with [`BatchEncoder::new_st`] when any group has one.
    pub fn group_st(&mut self, series_ref: u32, samples: &[Sample], sts: &[i64]) {
        debug_assert_eq!(samples.len(), sts.len());
        debug_assert!(self.with_st, "group_st on a type 2 batch record");
        self.put_group(series_ref, samples);
        if self.with_st {
            let b = &mut *self.buf;
            if sts.len() == samples.len() && sts.iter().any(|&x| x != 0) {
                b.push(1);
                let mut prev = 0i64;
                for &st in sts {
                    put_varint(b, st.wrapping_sub(prev));
                    prev = st;
                }
            } else {
                b.push(0);
            }
        }
    }

    /// Adds the samples of one series (must be non-empty).
    pub fn group(&mut self, series_ref: u32, samples: &[Sample]) {
        self.put_group(series_ref, samples);
        if self.with_st {
            self.buf.push(0);
        }
    }

    fn put_group(&mut self, series_ref: u32, samples: &[Sample]) {
        debug_assert!(!samples.is_empty());
        let b = &mut *self.buf;
        put_uvarint(b, series_ref as u64);
        put_uvarint(b, samples.len() as u64);
        b.reserve(samples.len() * 10);
        let mut prev = samples[0].t;
        put_varint(b, prev);
        for s in &samples[1..] {
            put_varint(b, s.t.wrapping_sub(prev));
            prev = s.t;
        }
        for s in samples {
            b.extend_from_slice(&s.v.to_bits().to_le_bytes());
        }
        self.groups += 1;
    }

    /// Patches the float group count and appends the histogram groups (each non-empty) of a type 5
    /// record ([`BatchEncoder::new_hist`]).
    pub fn finish_with_histograms<'h>(mut self, groups: impl ExactSizeIterator<Item = (u32, &'h [HistogramSample])>) -> usize {
        debug_assert_eq!(self.buf[0], REC_BATCH_HIST);
        self.patch_groups();
        let b = &mut *self.buf;
        put_uvarint(b, groups.len() as u64);
        for (r, samples) in groups {
            put_uvarint(b, r as u64);
            put_uvarint(b, samples.len() as u64);
            for s in samples {
                put_varint(b, s.t);
                put_histogram(b, &s.h);
            }
            if samples.iter().any(|s| s.st != 0) {
                b.push(1);
                let mut prev = 0i64;
                for s in samples {
                    put_varint(b, s.st.wrapping_sub(prev));
                    prev = s.st;
                }
            } else {
                b.push(0);
            }
        }
        b.len()
    }

    /// Patches the group count; the record is complete in the buffer.
    pub fn finish(mut self) -> usize {
        self.patch_groups();
        self.buf.len()
    }

    fn patch_groups(&mut self) {
        let g = self.groups;
        assert!(g < (1 << 28), "too many groups in one record");
        let p = &mut self.buf[self.groups_at..self.groups_at + 5];
        p[0] = (g as u8 & 0x7f) | 0x80;
        p[1] = ((g >> 7) as u8 & 0x7f) | 0x80;
        p[2] = ((g >> 14) as u8 & 0x7f) | 0x80;
        p[3] = ((g >> 21) as u8 & 0x7f) | 0x80;
        p[4] = 0;
    }
}

fn put_spans(b: &mut Vec<u8>, spans: &[Span]) {
    put_uvarint(b, spans.len() as u64);
    for sp in spans {
        put_varint(b, i64::from(sp.offset));
        put_uvarint(b, u64::from(sp.length));
    }
}

fn put_f64s(b: &mut Vec<u8>, v: &[f64]) {
    put_uvarint(b, v.len() as u64);
    for x in v {
        b.extend_from_slice(&x.to_bits().to_le_bytes());
    }
}

/// One histogram of a type 5 record (layout in the module docs): the fields both kinds share written
/// once, counts and buckets by kind.
fn put_histogram(b: &mut Vec<u8>, h: &HistogramValue) {
    let (kind, hint, schema, zt, sum, pos, neg, custom) = match h {
        HistogramValue::Int(h) => {
            (1, h.counter_reset_hint, h.schema, h.zero_threshold, h.sum, &h.positive_spans, &h.negative_spans, &h.custom_values)
        }
        HistogramValue::Float(h) => {
            (2, h.counter_reset_hint, h.schema, h.zero_threshold, h.sum, &h.positive_spans, &h.negative_spans, &h.custom_values)
        }
    };
    b.push(kind);
    b.push(hint as u8);
    put_varint(b, i64::from(schema));
    b.extend_from_slice(&zt.to_bits().to_le_bytes());
    match h {
        HistogramValue::Int(h) => {
            put_uvarint(b, h.count);
            put_uvarint(b, h.zero_count);
        }
        HistogramValue::Float(h) => {
            b.extend_from_slice(&h.count.to_bits().to_le_bytes());
            b.extend_from_slice(&h.zero_count.to_bits().to_le_bytes());
        }
    }
    b.extend_from_slice(&sum.to_bits().to_le_bytes());
    put_spans(b, pos);
    put_spans(b, neg);
    match h {
        HistogramValue::Int(h) => {
            for v in [&h.positive_buckets, &h.negative_buckets] {
                put_uvarint(b, v.len() as u64);
                for &d in v.iter() {
                    put_varint(b, d);
                }
            }
        }
        HistogramValue::Float(h) => {
            put_f64s(b, &h.positive_buckets);
            put_f64s(b, &h.negative_buckets);
        }
    }
    put_f64s(b, custom);
}

/// Appends a [`Record::Exemplars`] to `buf`.
pub fn encode_exemplars<'a>(buf: &mut Vec<u8>, ex: impl ExactSizeIterator<Item = (&'a Labels, &'a Exemplar)>) {
    let put_labels = |buf: &mut Vec<u8>, ls: &Labels| {
        put_uvarint(buf, ls.len() as u64);
        for l in ls.iter() {
            put_uvarint(buf, l.name.len() as u64);
            buf.extend_from_slice(l.name.as_bytes());
            put_uvarint(buf, l.value.len() as u64);
            buf.extend_from_slice(l.value.as_bytes());
        }
    };
    buf.push(REC_EXEMPLARS);
    put_uvarint(buf, ex.len() as u64);
    for (series, e) in ex {
        put_labels(buf, series);
        put_varint(buf, e.t);
        buf.extend_from_slice(&e.value.to_bits().to_le_bytes());
        put_labels(buf, &e.labels);
    }
}

/// Appends a [`Record::Tombstones`] to `buf`.
pub fn encode_tombstones(buf: &mut Vec<u8>, ts: &[TombstoneRec]) {
    buf.push(REC_TOMBSTONES);
    put_uvarint(buf, ts.len() as u64);
    for t in ts {
        put_uvarint(buf, t.series_ref as u64);
        put_varint(buf, t.mint_ms);
        put_varint(buf, t.maxt_ms);
    }
}

// ---- decoding -------------------------------------------------------------------------------------

// ---- the value context of a segment -----------------------------------------------------------------

/// Control byte of a value XOR that is zero (the value repeats).
const XOR_ZERO: u8 = 0x80;

/// Writes `x` (a value's bits XOR the series' previous value's) as a control byte `lead << 4 | trail`
/// (its zero bytes at the most and least significant ends) and the `8 - lead - trail` bytes between them,
/// most significant first; `0x80` alone when `x` is zero. A repeated value costs 1 byte, a counter's
/// small step usually 3 to 5.
#[inline]
pub fn put_xor(b: &mut Vec<u8>, x: u64) {
    if x == 0 {
        b.push(XOR_ZERO);
        return;
    }
    let (lead, trail) = ((x.leading_zeros() / 8) as usize, (x.trailing_zeros() / 8) as usize);
    b.push(((lead as u8) << 4) | trail as u8);
    b.extend_from_slice(&x.to_be_bytes()[lead..8 - trail]);
}

/// Hashes a series ref for [`ValueCtx`] (refs are small, dense integers: a multiplicative hash spreads
/// them over the table's control bits).
#[derive(Default, Clone, Copy)]
pub struct RefHasher(u64);

impl std::hash::Hasher for RefHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ b as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, n: u32) {
        self.0 = (n as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Per series ref, the bits of the last float value logged in the current WAL segment: a type 8 record
/// codes each value as its XOR with that one (0 for a series' first value in the segment). Writer and
/// reader start it empty in every segment (and checkpoint), so a segment decodes on its own.
#[derive(Default)]
pub struct ValueCtx {
    /// Refs below [`ValueCtx::DENSE_REFS`]: `(segment stamp, bits)` by ref, a slot read in place (refs
    /// are dense and a scrape's arrive in order, so this walks memory forwards); a stale stamp reads as
    /// "none in this segment", so starting a segment costs nothing.
    dense: Vec<(u32, u64)>,
    stamp: u32,
    /// Larger refs (a shard that has created millions of series since it started).
    sparse: std::collections::HashMap<u32, u64, std::hash::BuildHasherDefault<RefHasher>>,
    /// A record of this segment could not be decoded: the values after it cannot be trusted.
    broken: bool,
}

impl ValueCtx {
    /// Refs kept in the dense table: 16 bytes each, at most 64 MiB per shard.
    const DENSE_REFS: u32 = 1 << 22;

    /// Starts a segment.
    pub fn reset(&mut self) {
        self.stamp = self.stamp.wrapping_add(1);
        if self.stamp == 0 {
            // Wrapped: old stamps could read as current.
            self.dense.iter_mut().for_each(|s| *s = (u32::MAX, 0));
            self.stamp = 1;
        }
        self.sparse.clear();
        self.broken = false;
    }

    #[inline]
    fn slot(&mut self, r: u32) -> &mut u64 {
        if r < Self::DENSE_REFS {
            let i = r as usize;
            if i >= self.dense.len() {
                self.dense.resize((i + 1).next_power_of_two().min(Self::DENSE_REFS as usize), (u32::MAX, 0));
            }
            let s = &mut self.dense[i];
            if s.0 != self.stamp {
                *s = (self.stamp, 0);
            }
            &mut s.1
        } else {
            self.sparse.entry(r).or_insert(0)
        }
    }

    /// The bits of `r`'s last value (0 if none in this segment), replaced by `bits`.
    #[inline]
    fn swap(&mut self, r: u32, bits: u64) -> u64 {
        std::mem::replace(self.slot(r), bits)
    }

    /// `r`'s next value from its XOR with the last one (which it replaces).
    #[inline]
    fn unxor(&mut self, r: u32, x: u64) -> u64 {
        let v = self.slot(r);
        *v ^= x;
        *v
    }

    /// Whether a context-coded record of this segment failed to decode (later ones cannot be trusted).
    pub fn is_broken(&self) -> bool {
        self.broken
    }

    pub(crate) fn set_broken(&mut self) {
        self.broken = true;
    }
}

/// Re-codes a batch record of type 2, 4 or 5 (as [`BatchEncoder`] writes it) as type 8 into `out`
/// (cleared): the same series definitions, start timestamps and histogram groups byte for byte; each float
/// group's ref and first timestamp as differences from the previous group's, and its values as XORs
/// against `ctx` (which it updates). `Err` (nothing useful in `out`, and `ctx` partly updated: start a
/// new segment) when `raw` is not such a record.
pub fn transcode_batch(raw: &[u8], ctx: &mut ValueCtx, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    out.clear();
    // Never longer than the input by more than a byte per group's XOR control (values shrink from 8).
    out.reserve(raw.len() + 16);
    let mut d = Dec { b: raw, pos: 1 };
    let typ = *raw.first().ok_or(DecodeError { offset: 0, reason: "empty record" })?;
    if !matches!(typ, REC_BATCH | REC_BATCH_ST | REC_BATCH_HIST) {
        return Err(d.err("not a batch record"));
    }
    out.push(REC_BATCH_CTX);
    out.push(typ);
    d.skip_series_defs()?;
    out.extend_from_slice(&raw[1..d.pos]);
    let ng = d.len(3)?;
    put_uvarint(out, ng as u64);
    let (mut prev_ref, mut prev_t0) = (0i64, 0i64);
    for _ in 0..ng {
        let r = d.u32()?;
        put_varint(out, (r as i64).wrapping_sub(prev_ref));
        prev_ref = r as i64;
        let n = d.len(9)?;
        if n == 0 {
            return Err(d.err("empty sample group"));
        }
        put_uvarint(out, n as u64);
        let t0 = d.varint()?;
        put_varint(out, t0.wrapping_sub(prev_t0));
        prev_t0 = t0;
        let dts = d.pos;
        for _ in 1..n {
            d.varint()?;
        }
        out.extend_from_slice(&raw[dts..d.pos]);
        if d.b.len() - d.pos < n * 8 {
            return Err(d.err("truncated sample values"));
        }
        for _ in 0..n {
            let bits = u64::from_le_bytes(raw[d.pos..d.pos + 8].try_into().expect("length checked"));
            d.pos += 8;
            put_xor(out, bits ^ ctx.swap(r, bits));
        }
        if typ != REC_BATCH {
            let at = d.pos;
            match d.u8()? {
                0 => {}
                1 => {
                    for _ in 0..n {
                        d.varint()?;
                    }
                }
                _ => return Err(d.err("start timestamp flag is neither 0 nor 1")),
            }
            out.extend_from_slice(&raw[at..d.pos]);
        }
    }
    // Histogram groups (type 5) as they are.
    out.extend_from_slice(&raw[d.pos..]);
    Ok(())
}

/// Why a record could not be decoded, and where inside the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    pub offset: usize,
    pub reason: &'static str,
}

struct Dec<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Dec<'a> {
    fn err(&self, reason: &'static str) -> DecodeError {
        DecodeError { offset: self.pos, reason }
    }
    fn uvarint(&mut self) -> Result<u64, DecodeError> {
        let mut x: u64 = 0;
        let mut shift = 0u32;
        loop {
            let Some(&byte) = self.b.get(self.pos) else { return Err(self.err("truncated varint")) };
            self.pos += 1;
            if shift == 63 && byte > 1 {
                return Err(self.err("varint overflows 64 bits"));
            }
            x |= ((byte & 0x7f) as u64) << shift;
            if byte < 0x80 {
                return Ok(x);
            }
            shift += 7;
            if shift > 63 {
                return Err(self.err("varint too long"));
            }
        }
    }
    fn varint(&mut self) -> Result<i64, DecodeError> {
        let u = self.uvarint()?;
        Ok(((u >> 1) as i64) ^ -((u & 1) as i64))
    }
    fn len(&mut self, elem_min_bytes: usize) -> Result<usize, DecodeError> {
        let n = self.uvarint()?;
        let rem = (self.b.len() - self.pos) as u64;
        if n.saturating_mul(elem_min_bytes.max(1) as u64) > rem && n != 0 {
            return Err(self.err("length exceeds record"));
        }
        Ok(n as usize)
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let v = self.uvarint()?;
        u32::try_from(v).map_err(|_| self.err("series ref exceeds u32"))
    }
    fn str(&mut self) -> Result<tessera_model::LabelStr, DecodeError> {
        let n = self.len(1)?;
        let s = &self.b[self.pos..self.pos + n];
        let s = std::str::from_utf8(s).map_err(|_| self.err("label is not utf-8"))?;
        self.pos += n;
        Ok(s.into())
    }
    /// A value XOR as [`put_xor`] writes it.
    fn xor(&mut self) -> Result<u64, DecodeError> {
        let ctrl = self.u8()?;
        if ctrl == XOR_ZERO {
            return Ok(0);
        }
        let (lead, trail) = ((ctrl >> 4) as usize, (ctrl & 0x0f) as usize);
        if ctrl & 0x80 != 0 || lead + trail >= 8 {
            return Err(self.err("bad value XOR control byte"));
        }
        let n = 8 - lead - trail;
        let Some(bytes) = self.b.get(self.pos..self.pos + n) else { return Err(self.err("truncated value XOR")) };
        self.pos += n;
        let mut be = [0u8; 8];
        be[lead..lead + n].copy_from_slice(bytes);
        Ok(u64::from_be_bytes(be))
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        let Some(&b) = self.b.get(self.pos) else { return Err(self.err("truncated record")) };
        self.pos += 1;
        Ok(b)
    }
    fn f64(&mut self) -> Result<f64, DecodeError> {
        let Some(bytes) = self.b.get(self.pos..self.pos + 8) else { return Err(self.err("truncated float")) };
        self.pos += 8;
        Ok(f64::from_bits(u64::from_le_bytes(bytes.try_into().expect("8 bytes"))))
    }
    fn i32(&mut self) -> Result<i32, DecodeError> {
        let v = self.varint()?;
        i32::try_from(v).map_err(|_| self.err("value exceeds i32"))
    }
    fn spans(&mut self) -> Result<Vec<Span>, DecodeError> {
        let n = self.len(2)?;
        let mut v = Vec::with_capacity(n);
        for _ in 0..n {
            let offset = self.i32()?;
            let length = u32::try_from(self.uvarint()?).map_err(|_| self.err("span length exceeds u32"))?;
            v.push(Span { offset, length });
        }
        Ok(v)
    }
    fn f64s(&mut self) -> Result<Vec<f64>, DecodeError> {
        let n = self.len(8)?;
        (0..n).map(|_| self.f64()).collect()
    }
    fn histogram(&mut self) -> Result<HistogramValue, DecodeError> {
        let kind = self.u8()?;
        let hint = CounterResetHint::from_u8(self.u8()?).ok_or_else(|| self.err("unknown counter-reset hint"))?;
        let schema = self.i32()?;
        let zero_threshold = self.f64()?;
        // Integer counts are varints and bucket deltas, float counts raw bits; the rest is shared.
        let int_counts = match kind {
            1 => Some((self.uvarint()?, self.uvarint()?)),
            2 => None,
            _ => return Err(self.err("unknown histogram kind")),
        };
        let float_counts = if int_counts.is_none() { (self.f64()?, self.f64()?) } else { (0.0, 0.0) };
        let sum = self.f64()?;
        let positive_spans = self.spans()?;
        let negative_spans = self.spans()?;
        let mut deltas = || -> Result<Vec<i64>, DecodeError> {
            let n = self.len(1)?;
            (0..n).map(|_| self.varint()).collect()
        };
        let h = match int_counts {
            Some((count, zero_count)) => {
                let (positive_buckets, negative_buckets) = (deltas()?, deltas()?);
                HistogramValue::Int(Histogram {
                    counter_reset_hint: hint,
                    schema,
                    zero_threshold,
                    zero_count,
                    count,
                    sum,
                    positive_spans,
                    negative_spans,
                    positive_buckets,
                    negative_buckets,
                    custom_values: self.f64s()?,
                })
            }
            None => {
                let (positive_buckets, negative_buckets) = (self.f64s()?, self.f64s()?);
                HistogramValue::Float(FloatHistogram {
                    counter_reset_hint: hint,
                    schema,
                    zero_threshold,
                    zero_count: float_counts.1,
                    count: float_counts.0,
                    sum,
                    positive_spans,
                    negative_spans,
                    positive_buckets,
                    negative_buckets,
                    custom_values: self.f64s()?,
                })
            }
        };
        Ok(h)
    }
    fn labels(&mut self) -> Result<Labels, DecodeError> {
        let nl = self.len(2)?;
        let mut ls = Vec::with_capacity(nl);
        for _ in 0..nl {
            let name = self.str()?;
            let value = self.str()?;
            ls.push(Label { name, value });
        }
        Labels::from_sorted(ls).map_err(|_| self.err("labels not sorted/unique"))
    }
    /// Steps over series definitions, checking their shape but allocating nothing.
    fn skip_series_defs(&mut self) -> Result<(), DecodeError> {
        let n = self.len(2)?;
        for _ in 0..n {
            self.u32()?;
            let nl = self.len(2)?;
            for _ in 0..2 * nl {
                let k = self.len(1)?;
                self.pos += k;
            }
        }
        Ok(())
    }
    fn series_defs(&mut self) -> Result<Vec<SeriesDef>, DecodeError> {
        let n = self.len(2)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let series_ref = self.u32()?;
            let nl = self.len(2)?;
            let mut v = Vec::with_capacity(nl);
            for _ in 0..nl {
                let name = self.str()?;
                let value = self.str()?;
                v.push(Label { name, value });
            }
            let labels = Labels::from_sorted(v).map_err(|_| self.err("labels not sorted/unique"))?;
            out.push(SeriesDef { series_ref, labels });
        }
        Ok(out)
    }
}

/// The body of a batch record of type `typ` (2, 4 or 5), its float values context-coded when `ctx` is given.
fn batch(d: &mut Dec<'_>, typ: u8, mut ctx: Option<&mut ValueCtx>) -> Result<Record, DecodeError> {
    let series = d.series_defs()?;
    let ng = d.len(3)?;
    let mut groups = Vec::with_capacity(ng);
    // Context-coded groups: refs and first timestamps against the previous group's.
    let (mut prev_ref, mut prev_t0) = (0i64, 0i64);
    for _ in 0..ng {
        let series_ref = match ctx {
            None => d.u32()?,
            Some(_) => {
                let r = prev_ref.wrapping_add(d.varint()?);
                prev_ref = r;
                u32::try_from(r).map_err(|_| d.err("series ref exceeds u32"))?
            }
        };
        // Each sample takes at least 9 bytes (a delta byte + 8 value bytes), 2 context-coded.
        let n = d.len(if ctx.is_some() { 2 } else { 9 })?;
        if n == 0 {
            return Err(d.err("empty sample group"));
        }
        let mut samples = Vec::with_capacity(n);
        let mut t = d.varint()?;
        if ctx.is_some() {
            t = prev_t0.wrapping_add(t);
            prev_t0 = t;
        }
        samples.push(Sample::new(t, 0.0));
        for _ in 1..n {
            t = t.wrapping_add(d.varint()?);
            samples.push(Sample::new(t, 0.0));
        }
        match ctx.as_deref_mut() {
            None => {
                if d.b.len() - d.pos < n * 8 {
                    return Err(d.err("truncated sample values"));
                }
                for s in samples.iter_mut() {
                    let bytes: [u8; 8] = d.b[d.pos..d.pos + 8].try_into().expect("length checked");
                    s.v = f64::from_bits(u64::from_le_bytes(bytes));
                    d.pos += 8;
                }
            }
            Some(c) => {
                for s in samples.iter_mut() {
                    s.v = f64::from_bits(c.unxor(series_ref, d.xor()?));
                }
            }
        }
        let mut sts = Vec::new();
        if typ != REC_BATCH {
            let Some(&has_st) = d.b.get(d.pos) else { return Err(d.err("truncated start timestamp flag")) };
            d.pos += 1;
            match has_st {
                0 => {}
                1 => {
                    // Each ST takes at least one byte.
                    if d.b.len() - d.pos < n {
                        return Err(d.err("truncated start timestamps"));
                    }
                    sts.reserve_exact(n);
                    let mut st = 0i64;
                    for _ in 0..n {
                        st = st.wrapping_add(d.varint()?);
                        sts.push(st);
                    }
                }
                _ => return Err(d.err("start timestamp flag is neither 0 nor 1")),
            }
        }
        groups.push(SampleGroup { series_ref, samples, sts });
    }
    let mut hists = Vec::new();
    if typ == REC_BATCH_HIST {
        // Each group takes at least 3 bytes, each histogram more than 30.
        let ng = d.len(3)?;
        hists.reserve_exact(ng);
        for _ in 0..ng {
            let series_ref = d.u32()?;
            let n = d.len(30)?;
            if n == 0 {
                return Err(d.err("empty histogram group"));
            }
            let mut samples = Vec::with_capacity(n);
            for _ in 0..n {
                let t = d.varint()?;
                samples.push(HistogramSample::new(t, d.histogram()?));
            }
            match d.u8()? {
                0 => {}
                1 => {
                    let mut st = 0i64;
                    for s in samples.iter_mut() {
                        st = st.wrapping_add(d.varint()?);
                        s.st = st;
                    }
                }
                _ => return Err(d.err("start timestamp flag is neither 0 nor 1")),
            }
            hists.push(HistogramGroup { series_ref, samples });
        }
    }
    Ok(Record::Batch { series, groups, hists })
}

/// Decodes one record of types 1 to 6 (a context-coded batch needs its segment's value context:
/// [`crate::wal_pack::Unpacker`]; a compressed record, the unpacker too).
pub fn decode(rec: &[u8]) -> Result<Record, DecodeError> {
    decode_in(rec, None)
}

/// Decodes one uncompressed record; `ctx`: the value context of the record's segment, which a type 8
/// record reads and updates (a failure leaves it partly updated: the segment's later type 8 records
/// cannot be trusted).
pub(crate) fn decode_in(rec: &[u8], ctx: Option<&mut ValueCtx>) -> Result<Record, DecodeError> {
    let mut d = Dec { b: rec, pos: 1 };
    let Some(&typ) = rec.first() else { return Err(DecodeError { offset: 0, reason: "empty record" }) };
    let r = match typ {
        REC_SERIES => Record::Series(d.series_defs()?),
        REC_BATCH | REC_BATCH_ST | REC_BATCH_HIST => batch(&mut d, typ, None)?,
        REC_BATCH_CTX => {
            let src = d.u8()?;
            if !matches!(src, REC_BATCH | REC_BATCH_ST | REC_BATCH_HIST) {
                return Err(d.err("context-coded batch of an unknown type"));
            }
            let Some(ctx) = ctx else { return Err(d.err("context-coded batch read without its segment's value context")) };
            batch(&mut d, src, Some(ctx))?
        }
        REC_EXEMPLARS => {
            // Label count, t, 8 value bytes, label count: at least 11 bytes each.
            let n = d.len(11)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                let series = d.labels()?;
                let t = d.varint()?;
                let value = d.f64()?;
                let labels = d.labels()?;
                v.push((series, Exemplar { labels, value, t }));
            }
            Record::Exemplars(v)
        }
        REC_TOMBSTONES => {
            let n = d.len(3)?;
            let mut v = Vec::with_capacity(n);
            for _ in 0..n {
                let series_ref = d.u32()?;
                let mint_ms = d.varint()?;
                let maxt_ms = d.varint()?;
                v.push(TombstoneRec { series_ref, mint_ms, maxt_ms });
            }
            Record::Tombstones(v)
        }
        _ => return Err(DecodeError { offset: 0, reason: "unknown record type" }),
    };
    if d.pos != rec.len() {
        return Err(d.err("trailing bytes after record"));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use tessera_model::{labels, STALE_NAN};

    #[test]
    fn batch_round_trips_bit_exact() {
        let a = labels!("__name__" => "up", "job" => "x");
        let b = labels!("__name__" => "down");
        let mut buf = Vec::new();
        let mut e = BatchEncoder::new(&mut buf, [(7u32, &a), (9, &b)].into_iter());
        let s1 = vec![Sample::new(-5, 1.5), Sample::new(1000, STALE_NAN), Sample::new(999, f64::from_bits(0x7ff8_dead_beef_0001))];
        e.group(7, &s1);
        e.group(9, &[Sample::new(i64::MAX, -0.0)]);
        e.finish();
        let Record::Batch { series, groups, .. } = decode(&buf).expect("decodes") else { panic!("wrong type") };
        assert_eq!(series, vec![SeriesDef { series_ref: 7, labels: a }, SeriesDef { series_ref: 9, labels: b }]);
        assert_eq!(groups.len(), 2);
        for (x, y) in groups[0].samples.iter().zip(&s1) {
            assert!(x.bits_eq(y));
        }
        assert_eq!(groups[1].samples[0].t, i64::MAX);
        assert_eq!(groups[1].samples[0].v.to_bits(), (-0.0f64).to_bits());
    }

    #[test]
    fn series_and_tombstones_round_trip() {
        let a = labels!("__name__" => "up");
        let mut buf = Vec::new();
        encode_series(&mut buf, [(3u32, &a)].into_iter());
        assert_eq!(decode(&buf), Ok(Record::Series(vec![SeriesDef { series_ref: 3, labels: a }])));
        buf.clear();
        let ts = vec![TombstoneRec { series_ref: 1, mint_ms: -3, maxt_ms: 9 }];
        encode_tombstones(&mut buf, &ts);
        assert_eq!(decode(&buf), Ok(Record::Tombstones(ts)));
    }

    #[test]
    fn truncated_records_are_errors() {
        let a = labels!("__name__" => "up");
        let mut buf = Vec::new();
        let mut e = BatchEncoder::new(&mut buf, [(1u32, &a)].into_iter());
        e.group(1, &[Sample::new(1, 1.0), Sample::new(2, 2.0)]);
        e.finish();
        for cut in 0..buf.len() {
            assert!(decode(&buf[..cut]).is_err(), "prefix of {cut} bytes decoded");
        }
    }

    #[test]
    fn batch_st_round_trips_and_mixes_groups() {
        let a = labels!("__name__" => "c");
        let mut buf = Vec::new();
        let mut e = BatchEncoder::new_st(&mut buf, [(1u32, &a)].into_iter());
        let s: Vec<Sample> = (1..=4).map(|i| Sample::new(i * 15_000, i as f64)).collect();
        let sts = [i64::MIN, -1, 0, 1_700_000_000_000];
        e.group_st(1, &s, &sts);
        e.group(2, &s[..2]);
        e.group_st(3, &s[..1], &[0]);
        e.finish();
        assert_eq!(buf[0], REC_BATCH_ST);
        let Record::Batch { groups, .. } = decode(&buf).expect("decodes") else { panic!("wrong type") };
        assert_eq!(groups[0].sts, sts);
        assert_eq!(groups[0].samples, s);
        assert!(groups[1].sts.is_empty() && groups[2].sts.is_empty());
        for cut in 0..buf.len() {
            assert!(decode(&buf[..cut]).is_err(), "prefix of {cut} bytes decoded");
        }
        // A plain batch is still type 2 and carries no STs.
        let mut buf = Vec::new();
        let mut e = BatchEncoder::new(&mut buf, std::iter::empty());
        e.group(1, &s);
        e.finish();
        assert_eq!(buf[0], REC_BATCH);
        let Record::Batch { groups, .. } = decode(&buf).expect("decodes") else { panic!("wrong type") };
        assert!(groups[0].sts.is_empty());
    }

    fn hist_samples() -> Vec<HistogramSample> {
        let ih = Histogram {
            counter_reset_hint: CounterResetHint::NotCounterReset,
            schema: 3,
            zero_threshold: 1e-128,
            zero_count: 2,
            count: 9,
            sum: -3.5,
            positive_spans: vec![Span::new(-2, 2), Span::new(3, 1)],
            negative_spans: vec![Span::new(1, 1)],
            positive_buckets: vec![1, 2, -1],
            negative_buckets: vec![3],
            custom_values: vec![],
        };
        let fh = FloatHistogram {
            schema: -53,
            count: 4.5,
            sum: f64::from_bits(0x7ff0_0000_0000_0002),
            positive_spans: vec![Span::new(0, 3)],
            positive_buckets: vec![1.0, 0.5, 3.0],
            custom_values: vec![0.1, 1.0],
            ..FloatHistogram::default()
        };
        vec![HistogramSample::with_st(-7, 5, HistogramValue::Int(ih)), HistogramSample::new(i64::MAX, HistogramValue::Float(fh))]
    }

    #[test]
    fn histogram_batch_round_trips_with_floats_and_truncations_fail() {
        let a = labels!("__name__" => "h");
        let hs = hist_samples();
        let mut buf = Vec::new();
        let mut e = BatchEncoder::new_hist(&mut buf, [(4u32, &a)].into_iter());
        e.group(4, &[Sample::new(1, 2.0)]);
        e.finish_with_histograms([(4u32, &hs[..1]), (9, &hs[1..])].into_iter());
        assert_eq!(buf[0], REC_BATCH_HIST);
        let Record::Batch { series, groups, hists } = decode(&buf).expect("decodes") else { panic!("wrong type") };
        assert_eq!(series.len(), 1);
        assert_eq!(groups[0].samples, vec![Sample::new(1, 2.0)]);
        assert_eq!(hists.len(), 2);
        assert_eq!((hists[0].series_ref, &hists[0].samples[..]), (4, &hs[..1]));
        assert_eq!(hists[1].series_ref, 9);
        // NaN payloads survive bit for bit.
        let HistogramValue::Float(f) = &hists[1].samples[0].h else { panic!("kind") };
        assert_eq!(f.sum.to_bits(), 0x7ff0_0000_0000_0002);
        assert_eq!(f.custom_values, vec![0.1, 1.0]);
        for cut in 0..buf.len() {
            assert!(decode(&buf[..cut]).is_err(), "prefix of {cut} bytes decoded");
        }
    }

    #[test]
    fn exemplars_round_trip_and_truncations_fail() {
        let e = Exemplar { labels: labels!("trace_id" => "abc", "span" => "x"), value: f64::from_bits(0x7ff8_0000_0000_0001), t: -3 };
        let f = Exemplar { labels: Labels::default(), value: 2.5, t: i64::MAX };
        let mut buf = Vec::new();
        let (a, b) = (labels!("__name__" => "a"), labels!("__name__" => "b", "x" => "y"));
        encode_exemplars(&mut buf, [(&a, &e), (&b, &f)].into_iter());
        let Record::Exemplars(got) = decode(&buf).expect("decodes") else { panic!("type") };
        assert_eq!(got.len(), 2);
        assert_eq!((&got[0].0, &got[0].1.labels, got[0].1.t, got[0].1.value.to_bits()), (&a, &e.labels, -3, e.value.to_bits()));
        assert_eq!((&got[1].0, &got[1].1), (&b, &f));
        for cut in 0..buf.len() {
            assert!(decode(&buf[..cut]).is_err(), "prefix of {cut} bytes decoded");
        }
    }

    proptest! {
        #[test]
        fn mutated_histogram_records_never_panic(pos in 0usize..400, val in any::<u8>()) {
            let hs = hist_samples();
            let mut buf = Vec::new();
            let e = BatchEncoder::new_hist(&mut buf, std::iter::empty());
            e.finish_with_histograms([(1u32, &hs[..])].into_iter());
            let p = pos % buf.len();
            buf[p] = val;
            let _ = decode(&buf);
        }

        #[test]
        fn mutated_st_records_never_panic(pos in 0usize..200, val in any::<u8>(), sts in proptest::collection::vec(any::<i64>(), 1..20)) {
            let mut buf = Vec::new();
            let mut e = BatchEncoder::new_st(&mut buf, std::iter::empty());
            let s: Vec<Sample> = (0..sts.len() as i64).map(|i| Sample::new(i * 15, i as f64)).collect();
            e.group_st(1, &s, &sts);
            e.finish();
            let Record::Batch { groups, .. } = decode(&buf).expect("decodes") else { panic!("type") };
            if sts.iter().any(|&x| x != 0) {
                prop_assert_eq!(&groups[0].sts, &sts);
            }
            let p = pos % buf.len();
            buf[p] = val;
            let _ = decode(&buf);
        }

        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = decode(&bytes);
        }

        #[test]
        fn mutated_records_never_panic(pos in 0usize..64, val in any::<u8>(), n in 1usize..20) {
            let a = labels!("__name__" => "up", "job" => "x");
            let mut buf = Vec::new();
            let mut e = BatchEncoder::new(&mut buf, [(1u32, &a)].into_iter());
            let s: Vec<Sample> = (0..n as i64).map(|i| Sample::new(i * 15, i as f64)).collect();
            e.group(1, &s);
            e.finish();
            let p = pos % buf.len();
            buf[p] = val;
            let _ = decode(&buf);
        }

        #[test]
        fn random_groups_round_trip(ts in proptest::collection::vec(any::<i64>(), 1..50), seed in any::<u64>()) {
            let s: Vec<Sample> = ts.iter().enumerate().map(|(i, &t)| Sample::new(t, f64::from_bits(seed.wrapping_mul(i as u64 + 1)))).collect();
            let mut buf = Vec::new();
            let mut e = BatchEncoder::new(&mut buf, std::iter::empty());
            e.group(42, &s);
            e.finish();
            let Record::Batch { groups, .. } = decode(&buf).expect("decodes") else { panic!("type") };
            prop_assert_eq!(groups[0].samples.len(), s.len());
            for (x, y) in groups[0].samples.iter().zip(&s) {
                prop_assert!(x.bits_eq(y));
            }
        }
    }
}
