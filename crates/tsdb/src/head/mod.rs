//! The head: a shard's in-memory, writable time range.
//!
//! Main types: [`Head`] (series table, hash lookup, inverted index, interned label sets, time bounds,
//! tombstones) and [`MemSeries`] (one series: where its labels and closed chunks are, the open chunk being
//! appended to, and a small sorted buffer of out-of-order samples); the closed chunks' bytes are in
//! [`chunk_files::ChunkFiles`].
//!
//! Key decisions:
//! - Series refs are dense `u32`s handed out in increasing order and never reused within a process, so the
//!   postings lists of [`index::HeadIndex`] stay sorted by pushing at the end, and WAL records can name a
//!   series by ref.
//! - Chunks are cut at 120 samples (Prometheus' `samplesPerChunk`) or when a sample falls into another
//!   block-range window than the chunk's first sample, so a chunk never spans two blocks and the head can
//!   be cut into blocks by moving whole chunks (no re-encoding unless out-of-order samples or tombstones
//!   touch the window).
//! - Closed chunks are written to the shard's head chunk files and read through their mapping
//!   ([`chunk_files`]): the head keeps ~13 bytes per closed chunk ([`closed`]), a reader gets a slice of
//!   the mapping (no copy); only the open chunk is copied for a reader. With a cold codec other than XOR
//!   (the default) a closed float chunk whose values are all exact short decimals is stored as a Decimal
//!   chunk when that is at least 1/16 smaller ([`recode_decimal`]), and runs of closed Decimal chunks are
//!   merged ([`MemSeries::merge_closed`]); the block writer merges such chunks into one per block range.
//! - A series' labels are symbol ids into the head's [`symbols::HeadLabels`] (each distinct name and
//!   value stored once); readers get a [`Labels`] built from them, comparisons read them in place.
//! - Append rules follow Prometheus' `memSeries.appendable` (tsdb/head_append.go); see [`appendable`].
//! - Start timestamps (ST, Prometheus 3.14): a series' chunks are XOR until its first sample with an
//!   ST ≠ 0; that sample converts the open chunk to XorSt (its samples re-encoded with ST 0, no extra
//!   chunk cut) and every later chunk of the series in this head is XorSt too ([`OpenChunk`]), even for
//!   samples with ST 0 (1 bit each). Series that never carry an ST are untouched: XOR, same speed.
//!   Out-of-order samples keep their ST in `ooo_st`, a column parallel to `ooo` that stays empty (no
//!   allocation) until a series gets an out-of-order sample with an ST. The XorSt encoder is boxed, and
//!   the out-of-order buffers and histogram cutting state sit together behind one pointer
//!   ([`MemSeries`]'s `rare`), so a float series without STs or late samples pays 8 bytes for them.
//!
//! The head is not synchronised itself: a shard owns it behind a `RwLock` (readers share, the single
//! committing writer applies a whole batch under the write lock so a batch becomes visible at once).

pub(crate) mod chunk_files;
pub(crate) mod closed;
pub(crate) mod index;
pub(crate) mod symbols;

use std::collections::HashMap;
use std::hash::Hasher;

use bytes::Bytes;
use tessera_encoding::{
    Appended, FloatHistogramEncoder, FloatHistogramStEncoder, HistogramAppendError, HistogramEncoder, HistogramStEncoder,
    DecimalAppender, XorAppender, XorEncoder, XorStEncoder,
};
use tessera_model::{ChunkEncoding, ChunkRef, HistogramSample, HistogramValue, Labels, Sample};

use crate::appender::RejectReason;
use chunk_files::{ChunkFiles, Loc};
use closed::ClosedChunks;
use index::HeadIndex;
use symbols::{HeadLabels, LabelsAt};

/// Samples per chunk before a new one is cut (Prometheus' `samplesPerChunk` default).
pub const SAMPLES_PER_CHUNK: usize = 120;
/// A histogram chunk is cut once it holds this many bytes (upstream `TargetBytesPerHistogramChunk`)…
pub const TARGET_BYTES_PER_HISTOGRAM_CHUNK: usize = 1024;
/// …and at least this many samples (upstream `MinSamplesPerHistogramChunk`).
pub const MIN_SAMPLES_PER_HISTOGRAM_CHUNK: usize = 10;

/// A closed head chunk: its time range and where its bytes are in the head chunk files. 32 bytes as a
/// value; a series' list holds its chunks packed ([`closed::ClosedChunks`], ~13 bytes each).
#[derive(Debug, Clone)]
pub(crate) struct HeadChunk {
    pub mint: i64,
    pub maxt: i64,
    pub loc: Loc,
    /// Samples in the chunk (a head chunk holds fewer than 2^16: upstream's limit, and
    /// [`MERGED_CHUNK_SAMPLES`]).
    pub samples: u16,
    /// `Xor`, or `XorSt` for series with start timestamps, or `Decimal` once recoded or merged
    /// ([`recode_decimal`], [`MemSeries::merge_closed`]), or a histogram encoding.
    pub encoding: ChunkEncoding,
}

impl HeadChunk {
    pub(crate) fn to_ref(&self, files: &ChunkFiles) -> ChunkRef {
        ChunkRef { mint_ms: self.mint, maxt_ms: self.maxt, encoding: self.encoding, data: files.get(self.loc) }
    }
}

/// A closing float XOR chunk's bytes as a Decimal chunk (`docs/format/chunks.md`) in `buf`, when every
/// value is an exact short decimal and that saves at least a sixteenth of its bytes (the block writer's
/// rule): what scrapes send mostly is, and the head holds an hour and a half of closed chunks per series.
/// The samples read back bit for bit; readers decode either encoding.
fn recode_decimal(xor: &[u8], samples: &mut Vec<Sample>, enc: &mut tessera_encoding::DecimalEncoder, buf: &mut Vec<u8>) -> bool {
    samples.clear();
    buf.clear();
    if tessera_encoding::decode_xor_into(xor, samples).is_err() {
        return false;
    }
    let limit = xor.len() - xor.len() / 16;
    enc.encode_into(samples, buf) && buf.len() <= limit
}

/// Decoded samples, an encoder, its output and a chunk read back, reused by every chunk a thread recodes
/// or merges.
#[derive(Default)]
struct Scratch {
    samples: Vec<Sample>,
    enc: tessera_encoding::DecimalEncoder,
    buf: Vec<u8>,
    read: Vec<u8>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Most samples a closed head chunk merged from Decimal chunks holds (four of 120: 80 minutes at a 10 s
/// scrape). Each closed chunk costs the head's RAM its entry in the series' list ([`closed`]) and the
/// chunk files its header; merged, a block cut also has fewer chunks to join.
pub const MERGED_CHUNK_SAMPLES: u64 = 480;
/// How many closed Decimal chunks are merged at once (see [`MemSeries::merge_closed`]).
pub const MERGE_RUN: usize = 4;
/// An open XOR chunk this long (in bytes) is closed early as a Decimal chunk when it can be
/// ([`MemSeries::close_at_cap`])…
pub const OPEN_CHUNK_BYTES: usize = 96;
/// …and holds at least this many samples.
pub const OPEN_CHUNK_MIN_SAMPLES: usize = 8;
/// An open decimal chunk ([`OpenChunk::Decimal`]) is closed as a Decimal chunk by the sample that takes
/// it to this many bytes (with [`OPEN_CHUNK_MIN_SAMPLES`]): ~25 samples of a centisecond CPU counter, where
/// an XOR chunk held ~14 at [`OPEN_CHUNK_BYTES`] (at 40 bytes the head's chunk files took a quarter more
/// for the fleet stream's hour, RAM the same)…
pub const OPEN_DECIMAL_BYTES: usize = 48;
/// …in a buffer of this many bytes (glibc's 64-byte chunk; an XOR chunk's took 144), which one more sample
/// of up to 8 bytes does not outgrow (a larger one grows it until the chunk closes).
pub const OPEN_DECIMAL_CAPACITY: usize = 56;

/// A series' open chunk: XOR, or XorSt once the series has carried a start timestamp, or a native
/// histogram chunk (integer or float) while the series receives histograms.
#[derive(Debug, Clone)]
pub(crate) enum OpenChunk {
    /// Plain XOR: the series keeps the last sample ([`MemSeries::last_t`], [`MemSeries::last_bits`]),
    /// so the encoder does not (40 bytes instead of 56).
    Xor(XorAppender),
    /// A series of exact short decimals ([`tessera_encoding::decimal_open`]): the same samples in 38–83% of
    /// XOR's bytes; the series keeps the last sample as for `Xor`. Only with
    /// [`Head::recode_closed`]; a value that is no such decimal turns the chunk into `Xor`
    /// ([`OpenChunk::make_xor`]), and a closing chunk is always written as Decimal.
    Decimal(DecimalAppender),
    XorSt(Box<XorStEncoder>),
    Histogram(Box<HistogramEncoder>),
    FloatHistogram(Box<FloatHistogramEncoder>),
    /// Histogram chunks with a start-timestamp column, once the series has carried an ST.
    HistogramSt(Box<HistogramStEncoder>),
    FloatHistogramSt(Box<FloatHistogramStEncoder>),
}

impl OpenChunk {
    /// The complete chunk bytes so far.
    #[inline]
    pub(crate) fn bytes(&self) -> &[u8] {
        match self {
            OpenChunk::Xor(e) => e.bytes(),
            OpenChunk::Decimal(e) => e.bytes(),
            OpenChunk::XorSt(e) => e.bytes(),
            OpenChunk::Histogram(e) => e.bytes(),
            OpenChunk::FloatHistogram(e) => e.bytes(),
            OpenChunk::HistogramSt(e) => e.bytes(),
            OpenChunk::FloatHistogramSt(e) => e.bytes(),
        }
    }

    /// Samples in the chunk.
    #[inline]
    pub(crate) fn num_samples(&self) -> usize {
        match self {
            OpenChunk::Xor(e) => usize::from(e.num_samples()),
            OpenChunk::Decimal(e) => usize::from(e.num_samples()),
            OpenChunk::XorSt(e) => e.num_samples(),
            OpenChunk::Histogram(e) => usize::from(e.num_samples()),
            OpenChunk::FloatHistogram(e) => usize::from(e.num_samples()),
            OpenChunk::HistogramSt(e) => usize::from(e.num_samples()),
            OpenChunk::FloatHistogramSt(e) => usize::from(e.num_samples()),
        }
    }

    #[inline]
    pub(crate) fn encoding(&self) -> ChunkEncoding {
        match self {
            OpenChunk::Xor(_) => ChunkEncoding::Xor,
            OpenChunk::Decimal(_) => ChunkEncoding::DecimalOpen,
            OpenChunk::XorSt(_) => ChunkEncoding::XorSt,
            OpenChunk::Histogram(_) => ChunkEncoding::Histogram,
            OpenChunk::FloatHistogram(_) => ChunkEncoding::FloatHistogram,
            OpenChunk::HistogramSt(_) => ChunkEncoding::HistogramSt,
            OpenChunk::FloatHistogramSt(_) => ChunkEncoding::FloatHistogramSt,
        }
    }

    #[inline]
    fn is_histogram(&self) -> bool {
        self.encoding().is_histogram()
    }

    /// Empties the chunk, keeping its encoding (and, for float chunks, its buffer).
    pub(crate) fn clear(&mut self) {
        match self {
            OpenChunk::Xor(e) => e.clear(),
            OpenChunk::Decimal(e) => e.clear_to(OPEN_DECIMAL_CAPACITY),
            OpenChunk::XorSt(e) => e.clear(),
            OpenChunk::Histogram(e) => **e = HistogramEncoder::new(),
            OpenChunk::FloatHistogram(e) => **e = FloatHistogramEncoder::new(),
            OpenChunk::HistogramSt(e) => **e = HistogramStEncoder::new(),
            OpenChunk::FloatHistogramSt(e) => **e = FloatHistogramStEncoder::new(),
        }
    }

    /// An empty chunk of the kind `h` goes into (with an ST column when `st`).
    /// An empty float chunk: open decimal or XOR.
    fn new_float(decimal: bool) -> Self {
        if decimal { OpenChunk::Decimal(DecimalAppender::with_capacity(OPEN_DECIMAL_CAPACITY)) } else { OpenChunk::Xor(XorAppender::new()) }
    }

    fn for_histogram(h: &HistogramValue, st: bool) -> Self {
        match (h, st) {
            (HistogramValue::Int(_), false) => OpenChunk::Histogram(Box::default()),
            (HistogramValue::Float(_), false) => OpenChunk::FloatHistogram(Box::default()),
            (HistogramValue::Int(_), true) => OpenChunk::HistogramSt(Box::new(HistogramStEncoder::new())),
            (HistogramValue::Float(_), true) => OpenChunk::FloatHistogramSt(Box::new(FloatHistogramStEncoder::new())),
        }
    }

    /// Whether this chunk holds samples of `h`'s kind.
    fn fits(&self, h: &HistogramValue) -> bool {
        match h {
            HistogramValue::Int(_) => matches!(self, OpenChunk::Histogram(_) | OpenChunk::HistogramSt(_)),
            HistogramValue::Float(_) => matches!(self, OpenChunk::FloatHistogram(_) | OpenChunk::FloatHistogramSt(_)),
        }
    }

    /// Turns a plain histogram chunk into the ST kind with the same samples (ST 0). No-op otherwise.
    #[cold]
    fn make_histogram_st(&mut self) {
        let taken = std::mem::replace(self, OpenChunk::Xor(XorAppender::with_capacity(0)));
        *self = match taken {
            OpenChunk::Histogram(e) => OpenChunk::HistogramSt(Box::new(HistogramStEncoder::from_plain(*e))),
            OpenChunk::FloatHistogram(e) => OpenChunk::FloatHistogramSt(Box::new(FloatHistogramStEncoder::from_plain(*e))),
            other => other,
        };
    }

    /// Appends after the series' last sample `(last_t, last_bits)` (what a plain XOR chunk continues from
    /// when it holds samples).
    #[inline(always)]
    fn append(&mut self, last_t: i64, last_bits: u64, t: i64, st: i64, v: f64) {
        match self {
            OpenChunk::Xor(e) => e.append(last_t, last_bits, t, v),
            OpenChunk::Decimal(e) => {
                // The head cuts chunks at `SAMPLES_PER_CHUNK`, far below a count the XOR chunk could not take.
                debug_assert!(e.num_samples() < u16::MAX, "an open chunk below the count limit");
                if !e.append(last_t, last_bits, t, v) {
                    self.make_xor();
                    self.append(last_t, last_bits, t, st, v);
                }
            }
            OpenChunk::XorSt(e) => e.append(t, st, v),
            // `append_st` switches a histogram chunk to XOR before appending a float.
            _ => debug_assert!(false, "float appended to a histogram chunk"),
        }
    }

    /// The samples of an open decimal chunk.
    fn decimal_samples(e: &DecimalAppender) -> Vec<Sample> {
        let mut samples = Vec::with_capacity(usize::from(e.num_samples()));
        // The appender wrote every byte, and the tests hold its decoder to it: a failure here is a bug
        // that must not pass silently (it would drop the chunk's samples).
        tessera_encoding::decode_decimal_open_into(e.bytes(), &mut samples).expect("an open decimal chunk decodes");
        samples
    }

    /// Turns an open decimal chunk into an XOR one with the same samples (a value that is no short
    /// decimal arrived). No-op for other chunks.
    #[cold]
    fn make_xor(&mut self) {
        if let OpenChunk::Decimal(e) = self {
            let mut x = XorAppender::new();
            let mut last: Option<Sample> = None;
            for s in Self::decimal_samples(e) {
                x.append(last.map_or(i64::MIN, |l| l.t), last.map_or(0, |l| l.v.to_bits()), s.t, s.v);
                last = Some(s);
            }
            *self = OpenChunk::Xor(x);
        }
    }

    /// Turns an XOR (or open decimal) chunk into a XorSt one with the same samples (ST 0). No-op when
    /// already XorSt.
    #[cold]
    fn make_st(&mut self) {
        self.make_xor();
        if let OpenChunk::Xor(e) = self {
            let mut st = XorStEncoder::with_capacity(e.bytes().len() + e.bytes().len() / 4 + 16);
            for (t, v) in tessera_encoding::XorIter::new(e.bytes()).flatten() {
                st.append(t, 0, v);
            }
            *self = OpenChunk::XorSt(Box::new(st));
        }
    }
}

/// One series in the head.
pub(crate) struct MemSeries {
    /// Where the series' labels are in the head's [`HeadLabels`] (symbol ids); their hash
    /// (`Labels::hash`, the head's lookup key) is not kept but computed again when the series is dropped.
    pub labels_at: LabelsAt,
    /// Closed chunks, sorted by time, non-overlapping (packed, newest first: [`closed`]).
    pub chunks: ClosedChunks,
    /// The open chunk (may hold zero samples; its encoder counts them: [`MemSeries::open_n`]).
    pub open: OpenChunk,
    /// Last in-order sample (`i64::MIN` when the series has none in the head): its time and value bits
    /// (a histogram's fingerprint). A plain XOR open chunk continues from it ([`XorAppender`] does not
    /// keep it: 16 bytes of every series).
    pub last_t: i64,
    pub last_bits: u64,
    /// Out-of-order samples and histogram cutting state: `None` (8 bytes, nothing allocated) for the
    /// float series that make up nearly all of a head, which never get an out-of-order sample.
    rare: Option<Box<Rare>>,
}

/// The parts of a series few series use, boxed together so that the rest pay one pointer for them.
#[derive(Default)]
struct Rare {
    /// Out-of-order samples, sorted by time, unique timestamps.
    ooo: Vec<Sample>,
    /// Start timestamps of `ooo` (same positions); empty while none of them had one.
    ooo_st: Vec<i64>,
    /// Out-of-order native-histogram samples, sorted by time, unique timestamps.
    ooo_hists: Vec<HistogramSample>,
    /// Upstream's histogram chunk-cutting state (`memSeries.nextAt` and
    /// `histogramChunkHasComputedEndTime`), set at the series' first histogram.
    hist_cut: Option<HistCut>,
}

impl Rare {
    fn is_unused(&self) -> bool {
        self.ooo.is_empty() && self.ooo_hists.is_empty() && self.hist_cut.is_none()
    }
}

/// When the open histogram chunk is to be cut (see [`MemSeries::append_histogram`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HistCut {
    next_at: i64,
    computed: bool,
    /// The open histogram chunk's first timestamp (see [`MemSeries::open_mint`]).
    mint: i64,
}

/// The end of the block-range window holding `t` (upstream `rangeForTimestamp`, Go's truncating
/// division included).
fn range_for_timestamp(t: i64, width: i64) -> i64 {
    (t / width).saturating_mul(width).saturating_add(width)
}

/// Upstream `computeChunkEndTime`: an end for the chunk that makes the chunks left in its range equally
/// full, assuming samples keep arriving at the rate seen so far (the chunk is `1/ratio_to_full` full).
fn compute_chunk_end_time(start: i64, cur: i64, max_t: i64, ratio_to_full: f64) -> i64 {
    let n = (max_t - start) as f64 / ((cur - start + 1) as f64 * ratio_to_full);
    if n <= 1.0 {
        return max_t;
    }
    (start as f64 + (max_t - start) as f64 / n.floor()) as i64
}

impl MemSeries {
    /// A series without samples; its first chunk is an open decimal one when `decimal` (the head recodes
    /// closed chunks), else XOR.
    fn new(labels_at: LabelsAt, decimal: bool) -> Self {
        MemSeries {
            labels_at,
            chunks: ClosedChunks::default(),
            open: OpenChunk::new_float(decimal),
            last_t: i64::MIN,
            last_bits: 0,
            rare: None,
        }
    }

    /// Samples in the open chunk.
    #[inline]
    pub(crate) fn open_n(&self) -> u32 {
        self.open.num_samples() as u32
    }

    /// The open chunk's first timestamp, only meaningful while it holds samples (callers check
    /// [`MemSeries::open_n`] first: an empty histogram chunk answers its predecessor's). Not a field (8
    /// bytes of every series): XOR chunks begin with it (a varint read), XorSt encoders keep it,
    /// histogram series keep it with their cutting state ([`HistCut::mint`]).
    #[inline]
    pub(crate) fn open_mint(&self) -> i64 {
        match &self.open {
            OpenChunk::Xor(e) => e.first_t(),
            OpenChunk::Decimal(e) => e.first_t(),
            OpenChunk::XorSt(e) => e.first_t(),
            _ => self.rare.as_deref().and_then(|r| r.hist_cut).map(|c| c.mint),
        }
        .unwrap_or(i64::MIN)
    }

    /// True when the series holds no sample at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.chunks.is_empty() && self.open_n() == 0 && self.ooo().is_empty() && self.ooo_hists().is_empty()
    }

    /// Earliest sample time held, if any.
    /// `closed_mint` is the oldest closed chunk's start (`None` without closed chunks), which a caller
    /// walking the list has at hand ([`ClosedChunks::drop_before`]).
    fn min_t_with(&self, closed_mint: Option<i64>) -> Option<i64> {
        let a = closed_mint.or_else(|| (self.open_n() > 0).then(|| self.open_mint()));
        let ooo_first = match (self.ooo().first().map(|s| s.t), self.ooo_hists().first().map(|s| s.t)) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        match (a, ooo_first) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Writes the open chunk (with samples) to the chunk files — as Decimal when `recode` and
    /// [`recode_decimal`] say so, and an open decimal chunk always — and lists it as closed. The open chunk
    /// is left as it was (an open decimal chunk that would not recode, which cannot happen, as XOR).
    fn push_closed(&mut self, files: &mut ChunkFiles, recode: bool) {
        let recode = recode || matches!(self.open, OpenChunk::Decimal(_));
        if let Some(chunk) = recode.then(|| self.recoded_open(files)).flatten() {
            self.chunks.push(chunk);
            return;
        }
        self.open.make_xor();
        let (data, encoding) = (self.open.bytes(), self.open.encoding());
        let samples = u16::try_from(crate::block::writer::chunk_samples(encoding, data)).unwrap_or(u16::MAX);
        let chunk = HeadChunk { mint: self.open_mint(), maxt: self.last_t, loc: files.write(data, self.last_t), samples, encoding };
        self.chunks.push(chunk);
    }

    /// The open chunk written to the chunk files as a Decimal chunk: an open decimal chunk always, an XOR
    /// one when [`recode_decimal`] says so.
    fn recoded_open(&self, files: &mut ChunkFiles) -> Option<HeadChunk> {
        let (mint, maxt) = (self.open_mint(), self.last_t);
        if let OpenChunk::Decimal(e) = &self.open {
            // Always: its values are what a Decimal chunk holds.
            return SCRATCH.with_borrow_mut(|Scratch { samples: smp, enc, buf, .. }| {
                smp.clear();
                buf.clear();
                (tessera_encoding::decode_decimal_open_into(e.bytes(), smp).is_ok() && enc.encode_into(smp, buf)).then(|| {
                    let samples = u16::try_from(smp.len()).unwrap_or(u16::MAX);
                    HeadChunk { mint, maxt, loc: files.write(buf, maxt), samples, encoding: ChunkEncoding::Decimal }
                })
            });
        }
        let OpenChunk::Xor(e) = &self.open else { return None };
        SCRATCH.with_borrow_mut(|Scratch { samples: smp, enc, buf, .. }| {
            recode_decimal(e.bytes(), smp, enc, buf).then(|| {
                let samples = u16::try_from(crate::block::writer::chunk_samples(ChunkEncoding::Decimal, buf)).unwrap_or(u16::MAX);
                HeadChunk { mint, maxt, loc: files.write(buf, maxt), samples, encoding: ChunkEncoding::Decimal }
            })
        })
    }

    /// Empties the open chunk after it was closed.
    fn reset_open(&mut self) {
        match &mut self.open {
            // The series' next chunk is likely about as long: its buffer is cut down to this one's size.
            OpenChunk::Xor(e) => e.clear_fitted(),
            // Every chunk of exact short decimals closes at the same bytes: the buffer keeps its size.
            o => o.clear(),
        }
    }

    /// Closes the open chunk (if it holds samples) into the chunk files (see [`MemSeries::push_closed`]).
    /// Returns true if one was closed.
    pub(crate) fn close_open(&mut self, files: &mut ChunkFiles, recode: bool) -> bool {
        if self.open_n() == 0 {
            return false;
        }
        self.push_closed(files, recode);
        self.reset_open();
        true
    }

    /// Closes an open XOR chunk that has just reached [`OPEN_CHUNK_BYTES`] as a Decimal chunk, when its
    /// values are exact short decimals (see [`recode_decimal`]); otherwise it stays open (to
    /// [`SAMPLES_PER_CHUNK`]): the byte count passes the cap once per chunk, so it is not tried again.
    /// The open chunk is the one part of a series the head holds in RAM bytes for, and XOR takes 2–6
    /// bytes a sample of scraped counters and gauges where Decimal takes about one: a head of such series
    /// held ~290 bytes of open chunk per series, at most [`OPEN_CHUNK_BYTES`] and an eighth now. The short
    /// closed chunks are merged as the others ([`MemSeries::merge_closed`]). Returns true when it closed
    /// the chunk.
    #[cold]
    fn close_at_cap(&mut self, files: &mut ChunkFiles) -> bool {
        match self.recoded_open(files) {
            Some(chunk) => {
                self.chunks.push(chunk);
                self.reset_open();
                true
            }
            None => false,
        }
    }

    /// Merges the [`MERGE_RUN`] closed chunks before the newest one into one when all are Decimal, lie in
    /// the same block-range window (`range`), hold at most [`MERGED_CHUNK_SAMPLES`] together and the
    /// merged chunk is smaller. With 120-sample chunks, merging a run at once encodes each sample once
    /// (growing one chunk at every close re-encoded them up to four times: 13% of max-rate ingest); with
    /// chunks closed at their byte cap ([`MemSeries::close_at_cap`], ~14 samples of a noisy counter at
    /// 96 bytes) a run usually begins with the chunk merged before, which grows by three short ones at a
    /// time to ~450 samples: ~7 encodes a sample, and the replaced chunks stay in the chunk files until
    /// a cut (the price of holding ~200 fewer bytes a series in RAM; README, *Open chunks closed at 160
    /// bytes* and *… at 96 bytes*). The newest closed chunk stays as it is, so a query at "now" decodes
    /// no more than before. Returns the change in bytes when it merged.
    ///
    /// Nothing starting below `min_valid_t` is merged: a cut raises it to its window's end under the
    /// writer lock, then collects and writes the chunks below it without the lock, and an early
    /// (memory-pressure) cut's end may lie inside a block-range window; a merge across it would take
    /// samples out of the block being written and leave them in the head below `min_valid_t`.
    /// The chunks are read back with `pread` ([`ChunkFiles::read_into`]), not through the mapping, and the
    /// merged chunk is written anew; the four stay in their segment as garbage until it is deleted.
    pub(crate) fn merge_closed(&mut self, range: i64, min_valid_t: i64, files: &mut ChunkFiles) -> Option<i64> {
        // The newest chunk, then the run (newest first), then the chunk before it if any.
        let mut front = self.chunks.iter();
        let newest = front.next()?;
        let mut run: [HeadChunk; MERGE_RUN] = std::array::from_fn(|_| newest.clone());
        for slot in run.iter_mut().rev() {
            *slot = front.next()?;
        }
        let (first, last) = (&run[0], &run[MERGE_RUN - 1]);
        if first.mint < min_valid_t
            || first.mint.div_euclid(range) != last.mint.div_euclid(range)
            || run.windows(2).any(|w| w[0].maxt >= w[1].mint)
            || run.iter().any(|c| c.encoding != ChunkEncoding::Decimal)
        {
            return None;
        }
        let count: u64 = run.iter().map(|c| u64::from(c.samples)).sum();
        if count > MERGED_CHUNK_SAMPLES {
            return None;
        }
        let before: usize = run.iter().map(|c| c.loc.len as usize).sum();
        let maxt = last.maxt;
        let (loc, len) = SCRATCH.with_borrow_mut(|Scratch { samples, enc, buf, read }| {
            samples.clear();
            buf.clear();
            for c in &run {
                files.read_into(c.loc, read);
                tessera_encoding::decode_decimal_into(read, samples).ok()?;
            }
            (enc.encode_into(samples, buf) && buf.len() < before).then(|| (files.write(buf, maxt), buf.len()))
        })?;
        let merged = HeadChunk { mint: first.mint, maxt, loc, samples: count as u16, encoding: ChunkEncoding::Decimal };
        self.chunks.splice_front(1 + MERGE_RUN, &[newest, merged]);
        Some(len as i64 - before as i64)
    }

    /// Appends an in-order sample (`t > last_t`, checked by the caller) with its start timestamp (0 =
    /// unset; see the module docs for how an ST switches the series to XorSt chunks). Returns whether a
    /// new chunk was started and whether a chunk was closed (at most one is). Mirrors Prometheus'
    /// `memSeries.append` cutting rules, simplified to the two limits.
    /// A chunk closed here goes to `files` (recoded when `recode`, see [`MemSeries::push_closed`]).
    #[inline]
    pub(crate) fn append_st(&mut self, t: i64, st: i64, v: f64, chunk_range: i64, files: &mut ChunkFiles, recode: bool) -> (bool, bool) {
        let mut closed = false;
        if self.open.is_histogram() {
            // A float after histograms starts a float chunk (upstream cuts a chunk of the other encoding).
            closed = self.close_open(files, false);
            self.open = OpenChunk::new_float(recode);
        }
        if st != 0 && matches!(self.open, OpenChunk::Xor(_) | OpenChunk::Decimal(_)) {
            self.open.make_st();
        }
        let mut created = false;
        let n = self.open.num_samples();
        // An open chunk's samples all lie in its first one's block-range window (a sample in the next
        // window cuts it), so the last sample's window is the chunk's.
        if n > 0 && (n >= SAMPLES_PER_CHUNK || t.div_euclid(chunk_range) != self.last_t.div_euclid(chunk_range)) {
            closed = self.close_open(files, recode);
        }
        if self.open.num_samples() == 0 {
            created = true;
            // A chunk that begins with an exact short decimal is an open decimal chunk (one that begins
            // otherwise, or meets another value, is XOR: `OpenChunk::append`).
            if recode
                && matches!(self.open, OpenChunk::Xor(_))
                && (tessera_model::is_stale_nan(v) || tessera_encoding::decimal_exponent_of(v).is_some())
            {
                self.open = OpenChunk::new_float(true);
            }
        }
        let len = self.open.bytes().len();
        // The plain XOR chunk continues from the series' last sample: it must be the chunk's last one.
        #[cfg(debug_assertions)]
        if let OpenChunk::Xor(e) = &self.open
            && e.num_samples() > 0
        {
            let last = tessera_encoding::XorIter::new(e.bytes()).flatten().last().map(|(t, v)| (t, v.to_bits()));
            debug_assert_eq!(last, Some((self.last_t, self.last_bits)), "the series' last sample is its open XOR chunk's");
        }
        #[cfg(debug_assertions)]
        if let OpenChunk::Decimal(e) = &self.open
            && e.num_samples() > 0
        {
            let last = OpenChunk::decimal_samples(e).last().map(|s| (s.t, s.v.to_bits()));
            debug_assert_eq!(last, Some((self.last_t, self.last_bits)), "the series' last sample is its open decimal chunk's");
        }
        self.open.append(self.last_t, self.last_bits, t, st, v);
        self.last_t = t;
        self.last_bits = v.to_bits();
        debug_assert!(self.open_mint().div_euclid(chunk_range) == t.div_euclid(chunk_range), "an open chunk spans one window");
        // The sample that takes an open XOR chunk past its byte cap closes it, or the one that brings it
        // to the minimum samples if it passed the cap before: one attempt per chunk. (At most one close
        // per sample: a chunk just cut holds one sample, far below the cap.)
        if recode
            && let OpenChunk::Xor(e) = &self.open
            && e.bytes().len() >= OPEN_CHUNK_BYTES
        {
            let n = usize::from(e.num_samples());
            if n == OPEN_CHUNK_MIN_SAMPLES || (n > OPEN_CHUNK_MIN_SAMPLES && len < OPEN_CHUNK_BYTES) {
                debug_assert!(!closed, "one close per sample");
                closed = self.close_at_cap(files);
            }
        }
        // An open decimal chunk always closes (as Decimal) once it holds enough bytes and samples.
        if let OpenChunk::Decimal(e) = &self.open
            && e.bytes().len() >= OPEN_DECIMAL_BYTES
            && usize::from(e.num_samples()) >= OPEN_CHUNK_MIN_SAMPLES
        {
            debug_assert!(!closed, "one close per sample");
            closed = self.close_at_cap(files);
        }
        (created, closed)
    }

    /// Appends an in-order native-histogram sample (`t > last_t`, checked by the caller) as upstream's
    /// `memSeries.appendHistogram` / `appendFloatHistogram` do: a float chunk, or a histogram chunk of
    /// the other kind, is closed first; the open chunk is cut where upstream's
    /// `histogramsAppendPreprocessor` cuts it (an end time predicted once the chunk holds a quarter of
    /// [`TARGET_BYTES_PER_HISTOGRAM_CHUNK`], spreading the block range's chunks evenly; at twice the
    /// target bytes; never below [`MIN_SAMPLES_PER_HISTOGRAM_CHUNK`] samples unless the block range
    /// ends), so a series' chunks — and with them the bucket layouts its samples read back with — are
    /// those of a Prometheus head fed the same samples. The chunk encoder itself recodes on new buckets
    /// and starts a new chunk on a counter reset or a layout change, with the header upstream gives it;
    /// the previous chunk informs the header of a chunk cut here. Returns whether a chunk was started. An
    /// error (bucket counts inconsistent with spans, which validation refuses before) stores nothing.
    ///
    /// Start timestamps (`st`, 0 = unset) as for floats: a series' first ST ≠ 0 converts its open histogram
    /// chunk to the ST kind (its samples keep ST 0, nothing is cut), and its later histogram chunks in this
    /// head are of the ST kind too.
    pub(crate) fn append_histogram(
        &mut self,
        t: i64,
        st: i64,
        h: &HistogramValue,
        chunk_range: i64,
        files: &mut ChunkFiles,
        closed: &mut usize,
    ) -> Result<bool, HistogramAppendError> {
        if st != 0 && matches!(self.open, OpenChunk::Histogram(_) | OpenChunk::FloatHistogram(_)) {
            self.open.make_histogram_st();
        }
        let st_kind = matches!(self.open, OpenChunk::HistogramSt(_) | OpenChunk::FloatHistogramSt(_)) || st != 0;
        let same_kind = self.open.fits(h);
        // Upstream's `histogramsAppendPreprocessor`: a chunk of the other kind (or none) is replaced by a
        // fresh one; the open chunk is cut once the sample passes its predicted end (or the chunk holds
        // twice the target bytes) and it holds the minimum samples, or when the block range ends.
        let HistCut { mut next_at, mut computed, mut mint } =
            self.rare.as_deref().and_then(|r| r.hist_cut).unwrap_or(HistCut { next_at: i64::MIN, computed: false, mint: i64::MIN });
        // The chunk before the sample's, when it is cut here: it decides the new chunk's header.
        let mut prev: Option<OpenChunk> = None;
        let mut created = false;
        let n = self.open.num_samples();
        if n == 0 || !same_kind {
            if n > 0 {
                prev = Some(self.close_into_chunks(OpenChunk::for_histogram(h, st_kind), files));
                *closed += 1;
            } else if !same_kind {
                self.open = OpenChunk::for_histogram(h, st_kind);
            }
            created = true;
        }
        let n = self.open.num_samples();
        let num_bytes = self.open.bytes().len();
        if n == 0 {
            mint = t;
            next_at = range_for_timestamp(t, chunk_range);
        }
        let next_range_start = if computed { range_for_timestamp(mint, chunk_range) } else { next_at };
        if !computed && num_bytes >= TARGET_BYTES_PER_HISTOGRAM_CHUNK / 4 {
            let ratio = TARGET_BYTES_PER_HISTOGRAM_CHUNK as f64 / num_bytes as f64;
            next_at = compute_chunk_end_time(mint, self.last_t, next_at, ratio);
            computed = true;
        }
        if n > 0
            && (((t >= next_at || num_bytes >= TARGET_BYTES_PER_HISTOGRAM_CHUNK * 2)
                && (n >= MIN_SAMPLES_PER_HISTOGRAM_CHUNK || t >= next_range_start))
                || n >= usize::from(u16::MAX) - 1)
        {
            prev = Some(self.close_into_chunks(OpenChunk::for_histogram(h, st_kind), files));
            *closed += 1;
            mint = t;
            // Upstream's `cutNewHeadChunk`: the new chunk's window ends with its block range.
            next_at = range_for_timestamp(t, chunk_range);
            created = true;
        }
        if created {
            computed = false;
        }
        // One arm per chunk kind: the previous chunk counts for the header only when of the same kind;
        // the ST kinds also take the sample's start timestamp.
        macro_rules! append {
            ($kind:ident, $e:expr, $($arg:expr),+) => {{
                let p = match &prev {
                    Some(OpenChunk::$kind(p)) => Some(&**p),
                    _ => None,
                };
                match $e.append($($arg,)+ p)? {
                    Appended::NewChunk(ne) => Some(OpenChunk::$kind(Box::new(ne))),
                    _ => None,
                }
            }};
        }
        let appended = match (&mut self.open, h) {
            (OpenChunk::Histogram(e), HistogramValue::Int(h)) => append!(Histogram, e, t, h),
            (OpenChunk::FloatHistogram(e), HistogramValue::Float(h)) => append!(FloatHistogram, e, t, h),
            (OpenChunk::HistogramSt(e), HistogramValue::Int(h)) => append!(HistogramSt, e, t, st, h),
            (OpenChunk::FloatHistogramSt(e), HistogramValue::Float(h)) => append!(FloatHistogramSt, e, t, st, h),
            _ => unreachable!("the open chunk was made to fit the sample"),
        };
        if let Some(next) = appended {
            // Counter reset or layout change: the encoder started a new chunk holding the sample (its
            // window's end is the next cut point; the computed-end flag stays, as upstream's does). The
            // chunk closed here began at `mint`, which the close reads from the cutting state.
            self.rare.get_or_insert_with(Default::default).hist_cut = Some(HistCut { next_at, computed, mint });
            self.close_into_chunks(next, files);
            *closed += 1;
            mint = t;
            next_at = range_for_timestamp(t, chunk_range);
            created = true;
        }
        self.rare.get_or_insert_with(Default::default).hist_cut = Some(HistCut { next_at, computed, mint });
        self.last_t = t;
        self.last_bits = h.fingerprint();
        Ok(created)
    }

    /// Pushes the open chunk (with samples) onto the closed chunks and makes `next` the open one; returns
    /// the closed chunk's encoder.
    fn close_into_chunks(&mut self, next: OpenChunk, files: &mut ChunkFiles) -> OpenChunk {
        self.push_closed(files, false);
        std::mem::replace(&mut self.open, next)
    }

    /// Out-of-order float samples, sorted by time, unique timestamps.
    #[inline]
    pub(crate) fn ooo(&self) -> &[Sample] {
        self.rare.as_deref().map_or(&[], |r| &r.ooo)
    }

    /// Out-of-order native-histogram samples, sorted by time, unique timestamps.
    #[inline]
    pub(crate) fn ooo_hists(&self) -> &[HistogramSample] {
        self.rare.as_deref().map_or(&[], |r| &r.ooo_hists)
    }

    /// Whether any out-of-order sample has a start timestamp.
    #[inline]
    pub(crate) fn has_ooo_st(&self) -> bool {
        self.rare.as_deref().is_some_and(|r| !r.ooo_st.is_empty())
    }

    /// Inserts an out-of-order sample with its start timestamp (0 = unset); an existing sample at the same
    /// time wins (first write wins, as for Prometheus' `OOOChunk.Insert`).
    pub(crate) fn insert_ooo_st(&mut self, s: Sample, st: i64) -> bool {
        match self.ooo().binary_search_by_key(&s.t, |x| x.t) {
            Ok(_) => false,
            Err(i) => {
                let r = self.rare.get_or_insert_with(Default::default);
                // `ooo_st` stays empty until the first ST arrives, then mirrors `ooo` (zeros for the others).
                if st != 0 || !r.ooo_st.is_empty() {
                    r.ooo_st.resize(r.ooo.len(), 0);
                    r.ooo_st.insert(i, st);
                }
                r.ooo.insert(i, s);
                true
            }
        }
    }

    /// Inserts an out-of-order histogram sample; one already at that time wins (returns false).
    pub(crate) fn insert_ooo_hist(&mut self, s: &HistogramSample) -> bool {
        let v = &mut self.rare.get_or_insert_with(Default::default).ooo_hists;
        match v.binary_search_by_key(&s.t, |x| x.t) {
            Ok(_) => false,
            Err(i) => {
                v.insert(i, s.clone());
                true
            }
        }
    }

    /// The fingerprint of an out-of-order histogram sample at `t`, if any.
    pub(crate) fn ooo_hist_at(&self, t: i64) -> Option<u64> {
        let v = self.ooo_hists();
        v.binary_search_by_key(&t, |x| x.t).ok().map(|i| v[i].h.fingerprint())
    }

    /// Start timestamp of out-of-order sample `i` (0 when unset).
    #[inline]
    pub(crate) fn ooo_st_of(&self, i: usize) -> i64 {
        self.rare.as_deref().and_then(|r| r.ooo_st.get(i)).copied().unwrap_or(0)
    }

    /// Drops the out-of-order samples before `t` (and their STs); returns how many. Frees the rare part
    /// once nothing is left in it.
    pub(crate) fn drop_ooo_before(&mut self, t: i64) -> usize {
        let Some(r) = self.rare.as_deref_mut() else { return 0 };
        let k = r.ooo.partition_point(|x| x.t < t);
        r.ooo.drain(..k);
        if r.ooo.is_empty() {
            r.ooo = Vec::new();
            r.ooo_st = Vec::new();
        } else if !r.ooo_st.is_empty() {
            r.ooo_st.drain(..k);
        }
        let kh = r.ooo_hists.partition_point(|x| x.t < t);
        r.ooo_hists.drain(..kh);
        if r.ooo_hists.is_empty() {
            r.ooo_hists = Vec::new();
        }
        if r.is_unused() {
            self.rare = None;
        }
        k + kh
    }

    /// Value bits of an out-of-order sample at `t`, if any.
    pub(crate) fn ooo_at(&self, t: i64) -> Option<u64> {
        let v = self.ooo();
        v.binary_search_by_key(&t, |x| x.t).ok().map(|i| v[i].v.to_bits())
    }

    /// The series' chunks and out-of-order samples overlapping `[mint, maxt]`, with each out-of-order
    /// sample's start timestamp in `extra_sts` (0 when unset) and the out-of-order histogram samples in
    /// `extra_hists`, for `crate::merge::finalize_chunks_st` (the querier and block cuts).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn read_st(
        &self,
        files: &ChunkFiles,
        mint: i64,
        maxt: i64,
        chunks: &mut Vec<ChunkRef>,
        extra: &mut Vec<Sample>,
        extra_sts: &mut Vec<i64>,
        extra_hists: &mut Vec<HistogramSample>,
        split_last: bool,
    ) {
        self.read_chunks(files, mint, maxt, chunks, split_last);
        extra_hists.extend(self.ooo_hists().iter().filter(|s| s.t >= mint && s.t <= maxt).cloned());
        for (i, s) in self.ooo().iter().enumerate() {
            if s.t >= mint && s.t <= maxt {
                extra.push(*s);
                extra_sts.push(self.ooo_st_of(i));
            }
        }
    }

    /// With `split_last`, an open XOR or open decimal chunk of two or more samples is handed out as two chunks: its
    /// samples but the last (the same bytes, the header's count one less: a reader stops after the count)
    /// and the last sample alone, which the series keeps decoded (`last_t`, `last_bits`). A reader that
    /// needs only the latest sample (an instant query or a dashboard's newest step at "now") then decodes
    /// one sample instead of up to a chunk's worth of XOR, and none of the rest when its window begins
    /// after the one before the last.
    fn read_chunks(&self, files: &ChunkFiles, mint: i64, maxt: i64, chunks: &mut Vec<ChunkRef>, split_last: bool) {
        // Newest first: the list is read only as far back as `mint`, then the chunks taken are put in
        // time order.
        let start = chunks.len();
        for c in self.chunks.iter() {
            if c.maxt < mint {
                break;
            }
            if c.mint <= maxt {
                chunks.push(c.to_ref(files));
            }
        }
        chunks[start..].reverse();
        if split_last
            && self.open_n() >= 2
            && self.last_t <= maxt
            && self.last_t >= mint
            && let Some(prev_t) = match &self.open {
                OpenChunk::Xor(e) => e.prev_t(self.last_t),
                OpenChunk::Decimal(e) => e.prev_t(self.last_t),
                _ => None,
            }
        {
            // Both encodings begin with XOR's 2-byte count.
            let head = self.open.bytes();
            let mut last = XorEncoder::with_capacity(tessera_encoding::XOR_HEADER_BYTES + tessera_encoding::xor::SAMPLE_BYTES_MAX);
            last.append(self.last_t, f64::from_bits(self.last_bits));
            let mut buf = Vec::with_capacity(head.len() + last.bytes().len());
            let split = if prev_t >= mint {
                buf.extend_from_slice(head);
                buf[..tessera_encoding::XOR_HEADER_BYTES].copy_from_slice(&((self.open_n() - 1) as u16).to_be_bytes());
                buf.len()
            } else {
                0
            };
            buf.extend_from_slice(last.bytes());
            let data = Bytes::from(buf);
            if split > 0 {
                chunks.push(ChunkRef { mint_ms: self.open_mint(), maxt_ms: prev_t, encoding: self.open.encoding(), data: data.slice(..split) });
            }
            chunks.push(ChunkRef { mint_ms: self.last_t, maxt_ms: self.last_t, encoding: ChunkEncoding::Xor, data: data.slice(split..) });
            return;
        }
        if self.open_n() > 0
            && self.last_t >= mint
            && let open_mint = self.open_mint()
            && open_mint <= maxt
        {
            chunks.push(ChunkRef {
                mint_ms: open_mint,
                maxt_ms: self.last_t,
                encoding: self.open.encoding(),
                data: Bytes::copy_from_slice(self.open.bytes()),
            });
        }
    }
}

/// What to do with one incoming sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    InOrder,
    /// Same timestamp and value bits as the last sample: accepted, nothing stored.
    Duplicate,
    OutOfOrder,
    Reject(RejectReason),
}

/// Mirrors Prometheus' `memSeries.appendable(t, v, headMaxt, minValidTime, oooTimeWindow)`
/// (tsdb/head_append.go). `min_valid` is the head's appendable minimum (`Head.appendableMinValidTime`);
/// `block_min_valid` the time below which data is already in blocks: unlike Prometheus (which writes
/// overlapping out-of-order blocks and compacts them vertically), out-of-order samples must not reach
/// below it and are then "too old".
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn appendable(
    last_t: i64,
    last_bits: u64,
    t: i64,
    v: f64,
    head_max_t: i64,
    min_valid: i64,
    block_min_valid: i64,
    ooo_window: i64,
) -> Verdict {
    appendable_bits(last_t, last_bits, t, v.to_bits(), head_max_t, min_valid, block_min_valid, ooo_window)
}

/// [`appendable`] on a value's identity bits: a float's bits, or a histogram's
/// [`tessera_model::HistogramValue::fingerprint`] (upstream `appendableHistogram` compares with
/// `Equals`; a fingerprint match stands for that).
#[allow(clippy::too_many_arguments)]
#[inline]
pub(crate) fn appendable_bits(
    last_t: i64,
    last_bits: u64,
    t: i64,
    bits: u64,
    head_max_t: i64,
    min_valid: i64,
    block_min_valid: i64,
    ooo_window: i64,
) -> Verdict {
    if t >= min_valid {
        if last_t == i64::MIN || t > last_t {
            return Verdict::InOrder;
        }
        if t == last_t {
            // Exact duplicates are allowed (federation), a different value is not.
            return if bits == last_bits {
                Verdict::Duplicate
            } else {
                Verdict::Reject(RejectReason::DuplicateTimestamp)
            };
        }
    }
    if ooo_window > 0 {
        if t >= head_max_t.saturating_sub(ooo_window) && t >= block_min_valid {
            return Verdict::OutOfOrder;
        }
        return Verdict::Reject(RejectReason::TooOld);
    }
    if t < min_valid {
        return Verdict::Reject(RejectReason::OutOfBounds);
    }
    Verdict::Reject(RejectReason::OutOfOrder)
}

/// A hasher for keys that already are good 64-bit hashes.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = i;
    }
    /// Not for labels hashes, but keep small integer keys usable: hashbrown takes its bucket from the low
    /// bits and its tag from the top 7, which a byte-rotated small integer leaves constant (every key in
    /// one probe chain). A multiply spreads them.
    fn write_u32(&mut self, i: u32) {
        self.0 = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// The head's series lookup: entries are a ref and the low 32 bits of its labels' hash, 8 bytes each
/// (a `HashMap<u64, u32>` takes 16, and a separate map for refs sharing a hash). Positions and tags come
/// from [`lookup_hash`] of those 32 bits, so growing the table needs neither the series nor their labels;
/// refs whose hashes share the low 32 bits are told apart by their labels, as full-hash collisions were.
type SeriesTable = hashbrown::HashTable<(u32, u32)>;

/// The table hash of a labels hash's low 32 bits (a multiply spreads them to the top bits, where
/// hashbrown takes its tags).
#[inline]
fn lookup_hash(lo: u32) -> u64 {
    u64::from(lo).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// The in-memory part of one shard.
pub(crate) struct Head {
    /// Indexed by ref; `None` for refs removed by garbage collection.
    pub series: Vec<Option<Box<MemSeries>>>,
    /// Refs by labels hash ([`SeriesTable`]).
    by_hash: SeriesTable,
    pub index: HeadIndex,
    /// The series' label sets, interned ([`symbols`]).
    pub label_sets: HeadLabels,
    /// Time bounds of the samples in the head (`i64::MAX`/`i64::MIN` when empty).
    pub min_t: i64,
    pub max_t: i64,
    /// Samples below this time belong to blocks (Prometheus' `Head.minValidTime`).
    pub min_valid_t: i64,
    pub chunk_range: i64,
    /// Deletion intervals per series ref, applied when the head is cut into blocks and by readers.
    pub tombstones: HashMap<u32, Vec<(i64, i64)>>,
    pub num_samples: u64,
    pub num_chunks: u64,
    /// Bytes of the closed chunks (in the chunk files; what the early-cut soft limit measures).
    pub chunk_bytes: u64,
    /// Whether closed float chunks are stored as Decimal where that is smaller
    /// ([`recode_decimal`]; the database's `cold_codec` other than XOR).
    pub recode_closed: bool,
    /// Where closed chunks' bytes are (files of the shard's `chunks_head`, or memory without one).
    pub files: ChunkFiles,
    /// The series' label order as of some moment, refreshed in the background (see [`LabelOrder`]).
    pub label_order: std::sync::Arc<LabelOrder>,
}

/// The head's series in label order, as ranks: readers sort the refs a query matched by `rank` (an
/// integer sort) instead of comparing label sets, which dominated instant queries over thousands of
/// series. Refs are never handed out twice in a process and a series' labels never change, so a rank
/// stays true for as long as its series lives; refs at or after `upto` are newer than the order and are
/// sorted by their labels and merged in ([`Head::sort_by_labels`]).
#[derive(Debug, Default)]
pub(crate) struct LabelOrder {
    rank: Vec<u32>,
    upto: u32,
}

impl Head {
    pub(crate) fn new(chunk_range: i64, min_valid_t: i64) -> Self {
        Head {
            series: Vec::new(),
            by_hash: SeriesTable::new(),
            index: HeadIndex::default(),
            label_sets: HeadLabels::default(),
            min_t: i64::MAX,
            max_t: i64::MIN,
            min_valid_t,
            chunk_range,
            tombstones: HashMap::new(),
            num_samples: 0,
            num_chunks: 0,
            chunk_bytes: 0,
            recode_closed: false,
            files: ChunkFiles::default(),
            label_order: Default::default(),
        }
    }

    /// Accounts for the chunk `ms` just closed (its newest) and, with [`Head::recode_closed`], merges
    /// older closed ones ([`MemSeries::merge_closed`]). Returns the change in closed-chunk bytes and the
    /// number of chunks merged away.
    #[inline]
    fn closed_one(recode: bool, range: i64, min_valid_t: i64, ms: &mut MemSeries, files: &mut ChunkFiles) -> (i64, u64) {
        let n: i64 = ms.chunks.newest().map_or(0, |c| i64::from(c.loc.len));
        if recode && let Some(d) = ms.merge_closed(range, min_valid_t, files) {
            return (n + d, MERGE_RUN as u64 - 1);
        }
        (n, 0)
    }

    /// Whether enough series were created since [`Head::label_order`] was built that rebuilding pays.
    pub(crate) fn label_order_stale(&self) -> bool {
        let fresh = self.next_ref().saturating_sub(self.label_order.upto) as usize;
        let live = self.num_series();
        fresh > 0 && fresh >= (live / 32).max(256).min(live.max(1))
    }

    /// The live series' label order now (O(n log n) label comparisons: built off the query path).
    pub(crate) fn build_label_order(&self) -> LabelOrder {
        let mut refs: Vec<u32> = self.refs().collect();
        refs.sort_unstable_by(|&a, &b| self.cmp_series(a, b));
        let upto = self.next_ref();
        let mut rank = vec![u32::MAX; upto as usize];
        for (i, &r) in refs.iter().enumerate() {
            rank[r as usize] = i as u32;
        }
        LabelOrder { rank, upto }
    }

    /// Sorts live refs by their series' labels: by rank where the order knows them, by comparing labels
    /// for the newer ones, then one merge.
    pub(crate) fn sort_by_labels(&self, refs: &mut Vec<u32>) {
        let order = &self.label_order;
        let ranked = |r: u32| (r < order.upto).then(|| order.rank[r as usize]).filter(|&k| k != u32::MAX);
        let mut fresh: Vec<u32> = Vec::new();
        refs.retain(|&r| {
            let known = ranked(r).is_some();
            if !known {
                fresh.push(r);
            }
            known
        });
        refs.sort_unstable_by_key(|&r| order.rank[r as usize]);
        if fresh.is_empty() {
            return;
        }
        fresh.sort_unstable_by(|&a, &b| self.cmp_series(a, b));
        let known = std::mem::take(refs);
        refs.reserve(known.len() + fresh.len());
        if fresh.len() * 16 < known.len() {
            // Few new series among many ranked ones: find each one's place by binary search (fresh × log
            // known label comparisons) instead of walking every ranked series.
            let mut from = 0;
            for &f in &fresh {
                let at = from + known[from..].partition_point(|&k| self.cmp_series(k, f).is_lt());
                refs.extend_from_slice(&known[from..at]);
                refs.push(f);
                from = at;
            }
            refs.extend_from_slice(&known[from..]);
            return;
        }
        let (mut i, mut j) = (0, 0);
        while i < known.len() && j < fresh.len() {
            if self.cmp_series(fresh[j], known[i]).is_lt() {
                refs.push(fresh[j]);
                j += 1;
            } else {
                refs.push(known[i]);
                i += 1;
            }
        }
        refs.extend_from_slice(&known[i..]);
        refs.extend_from_slice(&fresh[j..]);
    }

    /// The order of two live series' label sets (as their [`Labels`] would order).
    fn cmp_series(&self, a: u32, b: u32) -> std::cmp::Ordering {
        let at = |r: u32| self.series[r as usize].as_ref().expect("live refs only").labels_at;
        self.label_sets.cmp(at(a), at(b))
    }

    /// The labels of a series of this head.
    #[inline]
    pub(crate) fn labels_of(&self, ms: &MemSeries) -> Labels {
        self.label_sets.labels(ms.labels_at)
    }

    /// The labels of series `r`, if it is live.
    pub(crate) fn series_labels(&self, r: u32) -> Option<Labels> {
        self.series(r).map(|s| self.labels_of(s))
    }

    /// The ref of the series with these labels, if it is in the head (hash lookup + collision check).
    pub(crate) fn get(&self, hash: u64, labels: &Labels) -> Option<u32> {
        self.get_with(hash, |p| symbols::pairs_eq(p, labels.iter().map(|l| (l.name, l.value))))
    }

    /// The ref of the series with this labels hash for which `is(pairs)` holds: how a commit finds a
    /// series from borrowed labels without building a [`Labels`] (`is` is the collision check, given the
    /// candidate's pairs read in place).
    #[inline]
    pub(crate) fn get_with(&self, hash: u64, is: impl Fn(symbols::Pairs<'_>) -> bool) -> Option<u32> {
        let lo = hash as u32;
        self.by_hash
            .find(lookup_hash(lo), |&(r, h)| {
                h == lo && self.series[r as usize].as_ref().is_some_and(|s| is(self.label_sets.pairs(s.labels_at)))
            })
            .map(|&(r, _)| r)
    }

    pub(crate) fn series(&self, r: u32) -> Option<&MemSeries> {
        self.series.get(r as usize).and_then(|s| s.as_deref())
    }

    /// Where ref `r`'s entry of the series table lies (for a prefetch; the address may be past the end).
    #[inline]
    pub(crate) fn series_slot_addr(&self, r: u32) -> *const u8 {
        self.series.as_ptr().wrapping_add(r as usize).cast()
    }

    /// Next ref the head would hand out.
    pub(crate) fn next_ref(&self) -> u32 {
        self.series.len() as u32
    }

    /// Makes sure ref `r` is never handed out (WAL replay: a ref the log still names, mapped elsewhere).
    pub(crate) fn reserve_ref(&mut self, r: u32) {
        if (r as usize) >= self.series.len() {
            self.series.resize_with(r as usize + 1, || None);
        }
    }

    /// Creates a series with ref `r` (`r >= next_ref()`; refs in between stay empty). Idempotent when the
    /// same series already has that ref (WAL replay meets series records twice after a checkpoint).
    pub(crate) fn create(&mut self, r: u32, hash: u64, labels: Labels) -> bool {
        debug_assert_eq!(hash, labels.hash(), "a series is found and dropped by its labels' hash");
        if let Some(Some(s)) = self.series.get(r as usize) {
            debug_assert!(self.label_sets.eq_labels(s.labels_at, &labels), "ref reused for other labels");
            return false;
        }
        if (r as usize) >= self.series.len() {
            self.series.resize_with(r as usize + 1, || None);
        }
        self.index.add(r, &labels);
        let lo = hash as u32;
        self.by_hash.insert_unique(lookup_hash(lo), (r, lo), |&(_, h)| lookup_hash(h));
        let at = self.label_sets.add(labels.iter().map(|l| (l.name, l.value)));
        self.series[r as usize] = Some(Box::new(MemSeries::new(at, self.recode_closed)));
        true
    }

    /// Prometheus' `Head.appendableMinValidTime`: no in-order sample may land in the window being
    /// compacted (older than max − range/2) nor below what is already in blocks.
    pub(crate) fn appendable_min_valid(&self) -> i64 {
        if self.max_t == i64::MIN {
            return self.min_valid_t;
        }
        self.min_valid_t.max(self.max_t.saturating_sub(self.chunk_range / 2))
    }

    /// Applies an accepted sample (verdict from [`appendable`]) with its start timestamp (0 = unset).
    /// Returns true when a chunk was created.
    #[inline]
    pub(crate) fn apply_st(&mut self, r: u32, s: Sample, st: i64, verdict: Verdict) -> bool {
        let (range, recode) = (self.chunk_range, self.recode_closed);
        let Some(ms) = self.series.get_mut(r as usize).and_then(|s| s.as_deref_mut()) else { return false };
        let files = &mut self.files;
        let created = match verdict {
            Verdict::InOrder => {
                let (c, closed) = ms.append_st(s.t, st, s.v, range, files, recode);
                if closed {
                    let (bytes, merged) = Self::closed_one(recode, range, self.min_valid_t, ms, files);
                    self.chunk_bytes = self.chunk_bytes.saturating_add_signed(bytes);
                    self.num_chunks = self.num_chunks.saturating_sub(merged);
                }
                c
            }
            Verdict::OutOfOrder => {
                if !ms.insert_ooo_st(s, st) {
                    return false;
                }
                false
            }
            _ => return false,
        };
        self.num_samples += 1;
        if created {
            self.num_chunks += 1;
        }
        if s.t < self.min_t {
            self.min_t = s.t;
        }
        if s.t > self.max_t {
            self.max_t = s.t;
        }
        created
    }

    /// Applies one batch of a series: `verdicts[i]` judges `samples[i]`; only `InOrder` and `OutOfOrder`
    /// samples are stored. The hot path of ingestion: one series lookup per batch, bounds updated once.
    /// `sts[i]` is `samples[i]`'s start timestamp (0 = unset); an empty `sts` means none (the hot path:
    /// nothing per sample is looked up then). Returns (samples stored, of which out-of-order).
    pub(crate) fn apply_batch_st(&mut self, r: u32, samples: &[Sample], sts: &[i64], verdicts: &[Verdict]) -> (u64, u64) {
        // Two instances of the loop: in the one without STs the constant 0 folds every ST test away.
        if sts.is_empty() {
            self.apply_batch_with(r, samples, |_| 0, verdicts)
        } else {
            self.apply_batch_with(r, samples, |i| sts.get(i).copied().unwrap_or(0), verdicts)
        }
    }

    #[inline(always)]
    fn apply_batch_with(
        &mut self,
        r: u32,
        samples: &[Sample],
        st_of: impl Fn(usize) -> i64,
        verdicts: &[Verdict],
    ) -> (u64, u64) {
        let (range, recode, min_valid_t) = (self.chunk_range, self.recode_closed, self.min_valid_t);
        let Some(ms) = self.series.get_mut(r as usize).and_then(|s| s.as_deref_mut()) else { return (0, 0) };
        let files = &mut self.files;
        let (mut stored, mut ooo, mut created, mut closed_bytes, mut merged) = (0u64, 0u64, 0u64, 0i64, 0u64);
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for (i, (s, v)) in samples.iter().zip(verdicts).enumerate() {
            let st = st_of(i);
            match v {
                Verdict::InOrder => {
                    let (c, closed) = ms.append_st(s.t, st, s.v, range, files, recode);
                    if c {
                        created += 1;
                    }
                    if closed {
                        let (b, m) = Self::closed_one(recode, range, min_valid_t, ms, files);
                        closed_bytes += b;
                        merged += m;
                    }
                }
                Verdict::OutOfOrder => {
                    if !ms.insert_ooo_st(*s, st) {
                        continue;
                    }
                    ooo += 1;
                }
                _ => continue,
            }
            stored += 1;
            lo = lo.min(s.t);
            hi = hi.max(s.t);
        }
        self.num_samples += stored;
        self.num_chunks = (self.num_chunks + created).saturating_sub(merged);
        self.chunk_bytes = self.chunk_bytes.saturating_add_signed(closed_bytes);
        self.min_t = self.min_t.min(lo);
        self.max_t = self.max_t.max(hi);
        (stored, ooo)
    }

    /// Applies a series' native-histogram samples: `verdicts[i]` judges `samples[i]`; `InOrder` ones go
    /// to the histogram chunks, `OutOfOrder` ones to the series' out-of-order buffer. Returns the
    /// samples stored.
    /// A sample the chunk encoder refuses (validated before, so only a bug) is logged and skipped.
    pub(crate) fn apply_histograms(&mut self, r: u32, samples: &[HistogramSample], verdicts: &[Verdict]) -> u64 {
        let range = self.chunk_range;
        let Some(ms) = self.series.get_mut(r as usize).and_then(|s| s.as_deref_mut()) else { return 0 };
        let files = &mut self.files;
        let label_sets = &self.label_sets;
        let (mut stored, mut created, mut closed_bytes) = (0u64, 0u64, 0u64);
        let (mut lo, mut hi) = (i64::MAX, i64::MIN);
        for (s, v) in samples.iter().zip(verdicts) {
            if *v == Verdict::OutOfOrder {
                if ms.insert_ooo_hist(s) {
                    stored += 1;
                    lo = lo.min(s.t);
                    hi = hi.max(s.t);
                }
                continue;
            }
            if *v != Verdict::InOrder {
                continue;
            }
            // The chunks this sample closed (the newest ones), counted even when the append then fails.
            let mut closed = 0;
            let res = ms.append_histogram(s.t, s.st, &s.h, range, files, &mut closed);
            if closed > 0 {
                closed_bytes += ms.chunks.iter().take(closed).map(|c| u64::from(c.loc.len)).sum::<u64>();
            }
            match res {
                Ok(c) => created += u64::from(c),
                Err(e) => {
                    tracing::warn!(series = %label_sets.labels(ms.labels_at), t = s.t, error = %e, "histogram sample not stored");
                    continue;
                }
            }
            stored += 1;
            lo = lo.min(s.t);
            hi = hi.max(s.t);
        }
        self.num_samples += stored;
        self.num_chunks += created;
        self.chunk_bytes += closed_bytes;
        self.min_t = self.min_t.min(lo);
        self.max_t = self.max_t.max(hi);
        stored
    }

    /// Number of live series.
    pub(crate) fn num_series(&self) -> usize {
        self.index.len()
    }

    /// Live series refs, ascending.
    pub(crate) fn refs(&self) -> impl Iterator<Item = u32> + '_ {
        self.series.iter().enumerate().filter(|(_, s)| s.is_some()).map(|(i, _)| i as u32)
    }

    /// Closes open chunks whose last sample is before `t` (they are complete for a cut at `t`).
    pub(crate) fn close_open_chunks_before(&mut self, t: i64) {
        let (mut added, mut merged) = (0i64, 0u64);
        let recode = self.recode_closed;
        for s in self.series.iter_mut().flatten() {
            if s.open_n() > 0 && s.last_t < t {
                s.close_open(&mut self.files, recode);
                let (b, m) = Self::closed_one(recode, self.chunk_range, self.min_valid_t, s, &mut self.files);
                added += b;
                merged += m;
            }
        }
        self.chunk_bytes = self.chunk_bytes.saturating_add_signed(added);
        self.num_chunks = self.num_chunks.saturating_sub(merged);
    }

    /// The largest time `<= t` that no chunk straddles (every chunk ends before it or starts at/after it),
    /// so the head can be cut there by moving whole chunks.
    ///
    /// Lowering `t` for one series can make a chunk of a series already passed straddle the new `t`
    /// (it ended before the old `t` but after the new one), so passes repeat until `t` holds still.
    pub(crate) fn chunk_boundary_at_or_before(&self, mut t: i64) -> i64 {
        loop {
            let before = t;
            for s in self.series.iter().flatten() {
                for c in s.chunks.iter() {
                    if c.maxt < t {
                        break;
                    }
                    if c.mint < t {
                        t = c.mint;
                    }
                }
                if s.open_n() > 0 && s.last_t >= t {
                    t = t.min(s.open_mint());
                }
            }
            if t == before {
                return t;
            }
        }
    }

    /// Drops every chunk and out-of-order sample before `t` (they are in a block now), raises the minimum
    /// valid time, garbage-collects series left empty (Prometheus' `Head.truncateMemory` + `gc`).
    /// Returns the number of series removed.
    pub(crate) fn truncate_before(&mut self, t: i64) -> usize {
        self.min_valid_t = self.min_valid_t.max(t);
        let mut removed = Vec::new();
        let mut samples_dropped = 0u64;
        let mut chunks_dropped = 0u64;
        let mut bytes_dropped = 0u64;
        let mut min_t = i64::MAX;
        for (i, slot) in self.series.iter_mut().enumerate() {
            let Some(s) = slot.as_deref_mut() else { continue };
            let d = s.chunks.drop_before(t);
            samples_dropped += d.samples;
            bytes_dropped += d.bytes;
            chunks_dropped += d.chunks;
            samples_dropped += s.drop_ooo_before(t) as u64;
            if s.is_empty() {
                removed.push(i as u32);
            } else if let Some(m) = s.min_t_with(d.oldest_kept) {
                min_t = min_t.min(m);
            }
        }
        for &r in &removed {
            let s = self.series[r as usize].take().expect("listed as present");
            self.index.remove(r, self.label_sets.pairs(s.labels_at));
            let lo = self.label_sets.hash(s.labels_at) as u32;
            self.label_sets.remove(s.labels_at);
            if let Ok(e) = self.by_hash.find_entry(lookup_hash(lo), |&(x, _)| x == r) {
                e.remove();
            }
            self.tombstones.remove(&r);
        }
        if self.label_sets.wants_compaction() {
            self.label_sets.compact(self.series.iter_mut().flatten().map(|s| &mut s.labels_at));
        }
        for iv in self.tombstones.values_mut() {
            iv.retain(|&(_, maxt)| maxt >= t);
        }
        self.tombstones.retain(|_, v| !v.is_empty());
        self.num_samples = self.num_samples.saturating_sub(samples_dropped);
        self.num_chunks = self.num_chunks.saturating_sub(chunks_dropped);
        self.chunk_bytes = self.chunk_bytes.saturating_sub(bytes_dropped);
        // Every chunk ending before `t` is gone: so are the segments holding only such chunks. The cut
        // read the dropped chunks through the mappings; the pages it brought in leave the resident set.
        self.files.drop_before(t);
        self.files.release_resident();
        // An emptied head keeps its max_t: the appendable minimum still derives from it (as in Prometheus).
        self.min_t = min_t;
        removed.len()
    }

    /// Deletion intervals of a series overlapping `[mint, maxt]`.
    pub(crate) fn tombstones_of(&self, r: u32) -> &[(i64, i64)] {
        self.tombstones.get(&r).map(|v| v.as_slice()).unwrap_or(&[])
    }

    pub(crate) fn add_tombstone(&mut self, r: u32, mint: i64, maxt: i64) {
        let v = self.tombstones.entry(r).or_default();
        v.push((mint, maxt));
        v.sort_unstable();
        // Merge overlapping/adjacent intervals.
        let mut out: Vec<(i64, i64)> = Vec::with_capacity(v.len());
        for &(a, b) in v.iter() {
            match out.last_mut() {
                Some(l) if a <= l.1.saturating_add(1) => l.1 = l.1.max(b),
                _ => out.push((a, b)),
            }
        }
        *v = out;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::labels;

    #[test]
    fn appendable_follows_prometheus() {
        use RejectReason::*;
        let v = |t, val: f64| appendable(100, 1f64.to_bits(), t, val, 100, 50, 0, 0);
        assert_eq!(v(101, 5.0), Verdict::InOrder);
        assert_eq!(v(100, 1.0), Verdict::Duplicate);
        assert_eq!(v(100, 2.0), Verdict::Reject(DuplicateTimestamp));
        assert_eq!(v(99, 2.0), Verdict::Reject(OutOfOrder));
        assert_eq!(v(10, 2.0), Verdict::Reject(OutOfBounds));
        // With an out-of-order window of 30.
        let w = |t| appendable(100, 1f64.to_bits(), t, 3.0, 100, 50, 0, 30);
        assert_eq!(w(80), Verdict::OutOfOrder);
        assert_eq!(w(69), Verdict::Reject(TooOld));
        assert_eq!(w(101), Verdict::InOrder);
        // Out-of-order never below what is in blocks.
        assert_eq!(appendable(100, 0, 75, 3.0, 100, 80, 80, 30), Verdict::Reject(TooOld));
        // A fresh series accepts anything at or after the minimum valid time.
        assert_eq!(appendable(i64::MIN, 0, 60, 3.0, 100, 50, 0, 0), Verdict::InOrder);
    }

    #[test]
    fn closed_decimal_chunks_are_merged_in_runs_but_never_below_the_minimum_valid_time() {
        // 1,200 samples of a 2-decimal counter in one block-range window.
        let fill = |min_valid_t: i64| {
            let mut h = Head::new(1 << 40, min_valid_t);
            h.recode_closed = true;
            let l = labels!("__name__" => "x");
            h.create(0, l.hash(), l.clone());
            for t in 0..1200i64 {
                h.apply_st(0, Sample::new(t * 10, (t * 37 % 101 + t * 50) as f64 / 100.0), 0, Verdict::InOrder);
            }
            let s = h.series(0).expect("exists");
            let spans: Vec<(i64, i64, ChunkEncoding)> = s.chunks.to_vec().iter().map(|c| (c.mint, c.maxt, c.encoding)).collect();
            let bytes: u64 = s.chunks.to_vec().iter().map(|c| u64::from(c.loc.len)).sum();
            // Every chunk reads back whole: the merged ones from where they were written anew.
            let mut v = Vec::new();
            for c in &s.chunks.to_vec() {
                tessera_encoding::decode_chunk_range_into(&c.to_ref(&h.files), i64::MIN, i64::MAX, &mut v).expect("decodes");
            }
            assert_eq!(v.len(), 1200 - s.open_n() as usize);
            assert!(v.iter().enumerate().all(|(t, x)| x.t == t as i64 * 10 && x.v == (t as i64 * 37 % 101 + t as i64 * 50) as f64 / 100.0));
            assert_eq!(s.chunks.to_vec().iter().map(|c| u64::from(c.samples)).sum::<u64>(), v.len() as u64);
            assert_eq!(h.chunk_bytes, bytes, "accounting follows the merges");
            assert_eq!(h.num_chunks, s.chunks.len() as u64 + u64::from(s.open_n() > 0), "closed chunks and the open one");
            spans
        };
        let merged = fill(i64::MIN);
        // The open decimal chunk closes at its byte cap (26 samples of this counter, see
        // `open_chunks_of_short_decimals_close_at_their_byte_cap_and_others_at_120_samples`); runs of four
        // merge into the chunk before them until it would pass 480 samples: [0, 4360) of 436, [4360,
        // 8670) of 431, then one growing chunk, two closed since, and the open one (19 samples).
        assert_eq!(
            merged.iter().map(|c| (c.0, c.1)).collect::<Vec<_>>(),
            vec![(0, 4350), (4360, 8660), (8670, 11280), (11290, 11540), (11550, 11800)]
        );
        assert!(merged.iter().all(|c| c.2 == ChunkEncoding::Decimal));
        // A cut in progress raised the minimum valid time to 2400 (inside the window): chunks starting
        // below it are never merged (with one another or with later ones); one closed at its cap may
        // still reach past the fence.
        let fenced = fill(2400);
        // (A chunk closed at its cap spans ~260 here, four merged ~1,000.)
        assert!(fenced.iter().all(|c| c.0 >= 2400 || c.1 - c.0 < 480), "{fenced:?}");
        assert!(fenced.iter().any(|c| c.0 < 2400 && c.1 > 2400 - 480), "{fenced:?}");
        assert!(fenced.iter().any(|c| c.0 >= 2400 && c.1 - c.0 > 2400), "merged above the fence: {fenced:?}");
    }

    #[test]
    fn open_chunks_of_short_decimals_close_at_their_byte_cap_and_others_at_120_samples() {
        let mut h = Head::new(1 << 40, i64::MIN);
        h.recode_closed = true;
        let (a, b) = (labels!("__name__" => "a"), labels!("__name__" => "b"));
        h.create(0, a.hash(), a.clone());
        h.create(1, b.hash(), b.clone());
        // A counter of centiseconds growing by random amounts (XOR: ~5 bytes a sample, an open decimal
        // chunk ~2), and values with random mantissas, which are no short decimals.
        let dec = |t: i64| (t * 37 % 101 + t * 50) as f64 / 100.0;
        let rnd = |t: i64| f64::from_bits(0x3ff0_0000_0000_0000 | ((t as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 12));
        let (mut max_open, mut max_cap) = (0, 0);
        for t in 0..720i64 {
            h.apply_st(0, Sample::new(t * 10_000, dec(t)), 0, Verdict::InOrder);
            h.apply_st(1, Sample::new(t * 10_000, rnd(t)), 0, Verdict::InOrder);
            let s = h.series(0).expect("exists");
            let OpenChunk::Decimal(e) = &s.open else { panic!("a series of short decimals has an open decimal chunk") };
            max_open = max_open.max(e.bytes().len());
            max_cap = max_cap.max(e.size_bytes());
        }
        assert!(max_open < OPEN_DECIMAL_BYTES + 8, "{max_open}");
        assert_eq!(max_cap, OPEN_DECIMAL_CAPACITY, "the open buffer never grows");
        let read = |h: &Head, r: u32| {
            let s = h.series(r).expect("exists");
            let mut v = Vec::new();
            for c in &s.chunks.to_vec() {
                tessera_encoding::decode_chunk_range_into(&c.to_ref(&h.files), i64::MIN, i64::MAX, &mut v).expect("decodes");
            }
            let open = ChunkRef { mint_ms: i64::MIN, maxt_ms: i64::MAX, encoding: s.open.encoding(), data: Bytes::copy_from_slice(s.open.bytes()) };
            tessera_encoding::decode_chunk_range_into(&open, i64::MIN, i64::MAX, &mut v).expect("decodes");
            (v, s.chunks.to_vec().iter().map(|c| (c.samples, c.encoding)).collect::<Vec<_>>())
        };
        let (va, ca) = read(&h, 0);
        assert!(va.iter().enumerate().all(|(t, x)| x.t == t as i64 * 10_000 && x.v.to_bits() == dec(t as i64).to_bits()));
        assert_eq!(va.len(), 720);
        // Closed early, always as Decimal, and merged in runs as the 120-sample chunks were.
        assert!(ca.iter().all(|&(_, e)| e == ChunkEncoding::Decimal), "{ca:?}");
        assert!(ca.len() <= 6, "{ca:?}");
        assert!(ca.iter().any(|&(n, _)| n > 120), "merged: {ca:?}");
        let (vb, cb) = read(&h, 1);
        assert!(vb.iter().enumerate().all(|(t, x)| x.t == t as i64 * 10_000 && x.v.to_bits() == rnd(t as i64).to_bits()));
        // Not decimals: XOR chunks of 120 samples, as upstream cuts them.
        assert_eq!(cb, vec![(120, ChunkEncoding::Xor); 5]);
        assert_eq!(h.num_samples, 1440);
        // Series with start timestamps (XorSt chunks, which are not recoded) are not closed early either.
        let c = labels!("__name__" => "c");
        h.create(2, c.hash(), c.clone());
        for t in 0..720i64 {
            h.apply_st(2, Sample::new(t * 10_000, dec(t)), 1, Verdict::InOrder);
        }
        let s = h.series(2).expect("exists");
        assert_eq!(s.chunks.to_vec().iter().map(|c| (c.samples, c.encoding)).collect::<Vec<_>>(), vec![(120, ChunkEncoding::XorSt); 5]);
    }

    #[test]
    fn an_open_decimal_chunk_rescales_keeps_stale_markers_and_turns_xor_at_other_values() {
        let mut h = Head::new(1 << 40, i64::MIN);
        h.recode_closed = true;
        let l = labels!("__name__" => "g");
        h.create(0, l.hash(), l.clone());
        // Integers, then more decimals (rescaled), a staleness marker and values after it, a value that
        // is no short decimal (the chunk turns XOR), and on: every sample reads back bit for bit, and the
        // chunk after the XOR one is an open decimal chunk again.
        let v = |t: i64| match t {
            0..=4 => t as f64 * 3.0,
            5..=9 => t as f64 * 0.25,
            10 => tessera_model::STALE_NAN,
            11..=14 => 1e12 + t as f64,
            15 => 0.1 + 0.2,
            _ => (t % 7) as f64 * 0.5,
        };
        let mut kinds = Vec::new();
        for t in 0..200i64 {
            h.apply_st(0, Sample::new(t * 15_000, v(t)), 0, Verdict::InOrder);
            let s = h.series(0).expect("exists");
            kinds.push((s.open.encoding(), s.open_n()));
        }
        assert!(kinds[..15].iter().all(|&(e, _)| e == ChunkEncoding::DecimalOpen), "{kinds:?}");
        // The chunk the other value met held samples of its own: they went to XOR with it.
        assert_eq!(kinds[15].0, ChunkEncoding::Xor);
        assert!(kinds[15].1 > 1 && kinds[14].1 == kinds[15].1 - 1, "{kinds:?}");
        let kinds: Vec<ChunkEncoding> = kinds.iter().map(|k| k.0).collect();
        assert_eq!(*kinds.last().expect("200"), ChunkEncoding::DecimalOpen);
        let s = h.series(0).expect("exists");
        let mut back = Vec::new();
        s.read_chunks(&h.files, i64::MIN, i64::MAX, &mut Vec::new(), false);
        let mut cs = Vec::new();
        s.read_chunks(&h.files, i64::MIN, i64::MAX, &mut cs, false);
        for c in &cs {
            tessera_encoding::decode_chunk_range_into(c, i64::MIN, i64::MAX, &mut back).expect("decodes");
        }
        let want: Vec<(i64, u64)> = (0..200).map(|t| (t * 15_000, v(t).to_bits())).collect();
        assert_eq!(back.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>(), want);
        // The closed ones: Decimal, but the XOR chunk (to 120 samples).
        let closed: Vec<(ChunkEncoding, u16)> = s.chunks.to_vec().iter().map(|c| (c.encoding, c.samples)).collect();
        assert_eq!(closed.iter().filter(|c| c.0 == ChunkEncoding::Xor).collect::<Vec<_>>(), [&(ChunkEncoding::Xor, 120)], "{closed:?}");
        assert!(closed.iter().all(|c| matches!(c.0, ChunkEncoding::Xor | ChunkEncoding::Decimal)), "{closed:?}");
    }

    #[test]
    fn an_open_chunks_last_sample_read_on_its_own_gives_the_same_samples() {
        for decimal in [false, true] {
            last_sample_on_its_own(decimal);
        }
    }

    fn last_sample_on_its_own(decimal: bool) {
        let mut h = Head::new(1 << 40, i64::MIN);
        h.recode_closed = decimal;
        let l = labels!("__name__" => "x");
        h.create(0, l.hash(), l.clone());
        let decode = |cs: &[ChunkRef], mint: i64, maxt: i64| {
            let mut v = Vec::new();
            for c in cs {
                tessera_encoding::decode_chunk_range_into(c, mint, maxt, &mut v).expect("decodes");
            }
            v.iter().map(|s| (s.t, s.v.to_bits())).collect::<Vec<_>>()
        };
        for n in 1..140i64 {
            let v = if n == 70 { tessera_model::STALE_NAN } else { (n * n % 17) as f64 * 0.25 };
            h.apply_st(0, Sample::new(n * 1000 + n % 3, v), 0, Verdict::InOrder);
            let s = h.series(0).expect("exists");
            for (mint, maxt) in [(i64::MIN, i64::MAX), (n * 1000 - 5000, n * 1000 + 2), (n * 1000 - 500, i64::MAX), (0, n * 1000 - 1000), (n * 1000 + 5, i64::MAX)] {
                let (mut plain, mut split) = (Vec::new(), Vec::new());
                s.read_chunks(&h.files, mint, maxt, &mut plain, false);
                s.read_chunks(&h.files, mint, maxt, &mut split, true);
                assert_eq!(decode(&split, mint, maxt), decode(&plain, mint, maxt), "n={n} [{mint}, {maxt}]");
                assert!(split.windows(2).all(|w| w[0].maxt_ms < w[1].mint_ms), "sorted, not overlapping");
                assert!(split.iter().all(|c| c.maxt_ms >= mint && c.mint_ms <= maxt), "only chunks in range");
                if s.open_n() >= 2 && s.last_t >= mint && s.last_t <= maxt {
                    let last = split.last().expect("the last sample");
                    assert_eq!((last.mint_ms, last.maxt_ms, tessera_encoding::chunk_sample_count(last)), (s.last_t, s.last_t, Some(1)));
                }
            }
        }
    }

    #[test]
    fn a_series_costs_the_head_at_most_88_bytes_of_its_own() {
        // Every series pays this (plus its label record, closed-chunk list and open buffer): the rare parts
        // stay boxed, the closed chunks are packed behind one pointer, the open chunk counts its own
        // samples and knows its first timestamp, the labels are an offset, a plain XOR chunk's last sample
        // is the series' own, and 88 bytes is what fits glibc's 96-byte chunks (104 took 112).
        assert!(std::mem::size_of::<MemSeries>() <= 88, "{}", std::mem::size_of::<MemSeries>());
    }

    #[test]
    fn chunks_cut_at_120_samples_and_block_boundaries() {
        let mut h = Head::new(1000, i64::MIN);
        let l = labels!("__name__" => "x");
        h.create(0, l.hash(), l.clone());
        for t in 0..250 {
            h.apply_st(0, Sample::new(t, t as f64), 0, Verdict::InOrder);
        }
        let s = h.series(0).expect("exists");
        assert_eq!(s.chunks.len(), 2);
        assert_eq!((s.chunks.to_vec()[0].mint, s.chunks.to_vec()[0].maxt), (0, 119));
        assert_eq!(s.open_n(), 10);
        for t in [990, 995, 1001] {
            h.apply_st(0, Sample::new(t, 1.0), 0, Verdict::InOrder);
        }
        let s = h.series(0).expect("exists");
        // 240..249 + 990 + 995 closed at the 1000 boundary; 1001 opens a new chunk.
        assert_eq!(s.chunks.newest().map(|c| (c.mint, c.maxt)), Some((240, 995)));
        assert_eq!(s.open_mint(), 1001);
        assert_eq!(h.get(l.hash(), &l), Some(0));
        assert_eq!(h.num_samples, 253);
    }

    #[test]
    fn first_start_timestamp_converts_the_open_chunk_and_later_chunks_stay_xor_st() {
        let mut h = Head::new(1_000_000, i64::MIN);
        let l = labels!("__name__" => "x");
        h.create(0, l.hash(), l.clone());
        // 130 samples without ST: one closed XOR chunk (120) and 10 in the open one.
        h.apply_batch_st(0, &(0..130).map(|t| Sample::new(t, 1.0)).collect::<Vec<_>>(), &[], &[Verdict::InOrder; 130]);
        let s = h.series(0).expect("exists");
        assert_eq!((s.chunks.to_vec()[0].encoding, s.open.encoding()), (ChunkEncoding::Xor, ChunkEncoding::Xor));
        // The 11th sample of the open chunk carries an ST: the open chunk becomes XorSt, nothing is cut.
        let more: Vec<Sample> = (130..400).map(|t| Sample::new(t, 2.0)).collect();
        let sts: Vec<i64> = (130..400).map(|t| if t == 130 { 77 } else { 0 }).collect();
        h.apply_batch_st(0, &more, &sts, &[Verdict::InOrder; 270]);
        let s = h.series(0).expect("exists");
        let encs: Vec<ChunkEncoding> = s.chunks.to_vec().iter().map(|c| c.encoding).collect();
        assert_eq!(encs, [ChunkEncoding::Xor, ChunkEncoding::XorSt, ChunkEncoding::XorSt]);
        assert_eq!((s.chunks.to_vec()[1].mint, s.chunks.to_vec()[1].maxt), (120, 239));
        assert_eq!(s.open.encoding(), ChunkEncoding::XorSt);
        let (mut v, mut got) = (Vec::new(), Vec::new());
        tessera_encoding::decode_chunk_range_st_into(&s.chunks.to_vec()[1].to_ref(&h.files), 0, 1000, &mut v, &mut got).expect("decodes");
        assert_eq!(v.len(), 120);
        assert!(got.iter().enumerate().all(|(i, &st)| st == if i == 10 { 77 } else { 0 }), "{got:?}");
        assert_eq!(h.num_samples, 400);
    }

    #[test]
    fn histogram_chunks_are_cut_by_upstreams_prediction_every_time() {
        // 1 s samples of a 20-bucket histogram over one 2 h range: every chunk after the first is cut by
        // the predicted end time again (a cut resets the prediction), never one sample at a time.
        let mut h = Head::new(2 * 3600 * 1000, i64::MIN);
        let l = labels!("__name__" => "h");
        h.create(0, l.hash(), l.clone());
        let samples: Vec<HistogramSample> = (0..2000u64)
            .map(|i| {
                let hist = tessera_model::Histogram {
                    count: 20 * (i + 1),
                    sum: i as f64,
                    positive_spans: vec![tessera_model::Span::new(0, 20)],
                    positive_buckets: std::iter::once(i as i64 + 1).chain(std::iter::repeat_n(0, 19)).collect(),
                    ..Default::default()
                };
                HistogramSample::new(i as i64 * 1000, HistogramValue::Int(hist))
            })
            .collect();
        h.apply_histograms(0, &samples, &vec![Verdict::InOrder; samples.len()]);
        let s = h.series(0).expect("exists");
        let counts: Vec<u16> = s.chunks.to_vec().iter().map(|c| c.samples).collect();
        let headers: Vec<u16> = s.chunks.to_vec().iter().map(|c| {
            let d = c.to_ref(&h.files).data;
            u16::from_be_bytes([d[0], d[1]])
        }).collect();
        assert_eq!(counts, headers, "the sample counts kept are the chunks'");
        assert!(counts.len() >= 3, "{counts:?}");
        // The head's accounting follows each close (the newest chunks' bytes, not the oldest's).
        assert_eq!(h.chunk_bytes, s.chunks.iter().map(|c| u64::from(c.loc.len)).sum::<u64>());
        assert_eq!(h.num_chunks, counts.len() as u64 + 1, "closed chunks and the open one");
        assert!(counts.iter().all(|&n| n >= MIN_SAMPLES_PER_HISTOGRAM_CHUNK as u16), "{counts:?}");
        // The predicted chunks are about evenly sized (within a tenth of each other).
        let (lo, hi) = (counts.iter().min().copied().unwrap_or(0), counts.iter().max().copied().unwrap_or(0));
        assert!(hi - lo <= hi / 10, "{counts:?}");
    }

    #[test]
    fn truncation_drops_old_chunks_and_gcs_empty_series() {
        let mut h = Head::new(1000, i64::MIN);
        let a = labels!("__name__" => "a");
        let b = labels!("__name__" => "b");
        h.create(0, a.hash(), a.clone());
        h.create(1, b.hash(), b.clone());
        for t in 0..1500 {
            h.apply_st(0, Sample::new(t, 1.0), 0, Verdict::InOrder);
        }
        for t in 0..500 {
            h.apply_st(1, Sample::new(t, 1.0), 0, Verdict::InOrder);
        }
        h.close_open_chunks_before(1000);
        assert_eq!(h.truncate_before(1000), 1);
        assert_eq!(h.get(b.hash(), &b), None);
        assert_eq!(h.min_t, 1000);
        assert_eq!(h.num_series(), 1);
        assert_eq!(h.num_samples, 500);
    }

    #[test]
    fn churned_series_leave_no_labels_behind_and_the_live_ones_keep_theirs() {
        // 20,000 pods come and go; every tenth stays. The head's label arena is rewritten once the gone
        // series' records are half of it: lookups, label reads, index and sort order stay right.
        let mut h = Head::new(1000, i64::MIN);
        let pod = |i: u32| Labels::from_pairs([("__name__", "kube_pod_info".to_string()), ("job", "ksm".to_string()), ("pod", format!("pod-{i}"))]);
        for i in 0..20_000u32 {
            let l = pod(i);
            assert!(h.create(i, l.hash(), l));
            h.apply_st(i, Sample::new(if i % 10 == 0 { 1500 } else { 10 }, 1.0), 0, Verdict::InOrder);
        }
        let before = h.label_sets.arena_len();
        h.close_open_chunks_before(1000);
        assert_eq!(h.truncate_before(1000), 18_000);
        assert!(h.label_sets.arena_len() * 5 < before, "{} of {before} arena bytes left", h.label_sets.arena_len());
        for i in 0..20_000u32 {
            let l = pod(i);
            let want = (i % 10 == 0).then_some(i);
            assert_eq!(h.get(l.hash(), &l), want, "{l}");
            if want.is_some() {
                assert_eq!(h.series_labels(i), Some(l));
            }
        }
        let got = crate::index::IndexReader::label_values(&h.index, "pod", "").expect("values");
        assert_eq!(got.len(), 2_000);
        let mut refs: Vec<u32> = h.refs().collect();
        refs.reverse();
        h.sort_by_labels(&mut refs);
        let sorted: Vec<Labels> = refs.iter().map(|&r| h.series_labels(r).expect("live")).collect();
        assert!(sorted.windows(2).all(|w| w[0] < w[1]));
        // A pod seen again gets a new series with its labels.
        let l = pod(1);
        assert!(h.create(20_000, l.hash(), l.clone()));
        assert_eq!(h.series_labels(20_000), Some(l.clone()));
        assert_eq!(h.get(l.hash(), &l), Some(20_000));
    }

    #[test]
    fn series_whose_hashes_share_their_low_32_bits_are_told_apart() {
        // The table keeps 32 bits of each hash: find two label sets that share them (a birthday search,
        // ~80 k sets), then look both up, drop one, and look again.
        let mut seen = HashMap::new();
        let (a, b) = (0..1_000_000u32)
            .find_map(|i| {
                let l = Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string())]);
                seen.insert(l.hash() as u32, l.clone()).map(|other| (other, l))
            })
            .expect("a 32-bit collision among a million hashes");
        assert_ne!(a, b);
        assert_eq!(a.hash() as u32, b.hash() as u32);
        let mut h = Head::new(1000, i64::MIN);
        assert_eq!(h.get(a.hash(), &a), None);
        h.create(0, a.hash(), a.clone());
        assert_eq!(h.get(b.hash(), &b), None);
        h.create(1, b.hash(), b.clone());
        assert_eq!((h.get(a.hash(), &a), h.get(b.hash(), &b)), (Some(0), Some(1)));
        // a has a sample at 1500 and stays; b has none before 1000 and is dropped.
        h.apply_st(0, Sample::new(1500, 1.0), 0, Verdict::InOrder);
        h.apply_st(1, Sample::new(10, 1.0), 0, Verdict::InOrder);
        h.close_open_chunks_before(1000);
        assert_eq!(h.truncate_before(1000), 1);
        assert_eq!((h.get(a.hash(), &a), h.get(b.hash(), &b)), (Some(0), None));
        h.create(2, b.hash(), b.clone());
        assert_eq!((h.get(a.hash(), &a), h.get(b.hash(), &b)), (Some(0), Some(2)));
    }

    #[test]
    fn chunk_boundary_holds_for_every_series_whatever_their_order() {
        // a: [0,178] [200,319]; b: [150,269]. From 300, a lowers the boundary to 200, b to 150, and
        // then a's first chunk straddles 150: only a second pass finds 0. (A one-pass version made the
        // memory-pressure cut loop forever on fleet data.)
        let mut h = Head::new(1_000_000, i64::MIN);
        let a = labels!("__name__" => "a");
        let b = labels!("__name__" => "b");
        h.create(0, a.hash(), a.clone());
        h.create(1, b.hash(), b.clone());
        for i in 0..120 {
            h.apply_st(0, Sample::new(i * 3 / 2, 1.0), 0, Verdict::InOrder);
        }
        for t in (200..320).chain([400]) {
            h.apply_st(0, Sample::new(t, 1.0), 0, Verdict::InOrder);
        }
        for t in (150..270).chain([400]) {
            h.apply_st(1, Sample::new(t, 1.0), 0, Verdict::InOrder);
        }
        let spans = |r: u32| h.series(r).expect("present").chunks.to_vec().iter().map(|c| (c.mint, c.maxt)).collect::<Vec<_>>();
        assert_eq!(spans(0), vec![(0, 178), (200, 319)]);
        assert_eq!(spans(1), vec![(150, 269)]);
        assert_eq!(h.chunk_boundary_at_or_before(300), 0);
        assert_eq!(h.chunk_boundary_at_or_before(100), 0);
        assert_eq!(h.chunk_boundary_at_or_before(400), 400);
    }

    #[test]
    fn refs_sort_by_labels_with_any_label_order() {
        let mut h = Head::new(1000, i64::MIN);
        let mut x = 1u64;
        let mut rnd = |n: u64| {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (x >> 33) % n
        };
        let mut next = 0u32;
        let mut create = |h: &mut Head, rnd: &mut dyn FnMut(u64) -> u64| {
            let l = Labels::from_pairs([("__name__", format!("m{}", rnd(5))), ("i", format!("{}", rnd(1000))), ("z", format!("{}", rnd(3)))]);
            if h.get(l.hash(), &l).is_none() {
                h.create(next, l.hash(), l);
                h.apply_st(next, Sample::new(0, 1.0), 0, Verdict::InOrder);
                next += 1;
            }
        };
        let check = |h: &Head| {
            let mut want: Vec<u32> = h.refs().collect();
            want.sort_by_key(|&a| h.series_labels(a).expect("live"));
            let mut got: Vec<u32> = h.refs().collect();
            got.reverse();
            h.sort_by_labels(&mut got);
            assert_eq!(got, want);
            // A subset too (a query's matches).
            let mut sub: Vec<u32> = h.refs().filter(|r| r % 3 == 0).collect();
            let want_sub: Vec<u32> = want.iter().copied().filter(|r| r % 3 == 0).collect();
            h.sort_by_labels(&mut sub);
            assert_eq!(sub, want_sub);
        };
        for _ in 0..300 {
            create(&mut h, &mut rnd);
        }
        check(&h);
        assert!(h.label_order_stale());
        h.label_order = std::sync::Arc::new(h.build_label_order());
        assert!(!h.label_order_stale());
        check(&h);
        for round in 0..5 {
            for _ in 0..50 {
                create(&mut h, &mut rnd);
            }
            if round == 2 {
                // Garbage collection removes series; their ranks stay behind harmlessly.
                h.series[3] = None;
                h.series[10] = None;
            }
            check(&h);
        }
        // Few new series among many ranked ones (placed by binary search).
        h.label_order = std::sync::Arc::new(h.build_label_order());
        for _ in 0..6 {
            create(&mut h, &mut rnd);
            check(&h);
        }
        h.label_order = std::sync::Arc::new(h.build_label_order());
        check(&h);
    }
}
