//! Native-histogram chunks that also carry each sample's start timestamp (`st`, ms; 0 = unset):
//! `ChunkEncoding::HistogramSt` and `FloatHistogramSt`, Tessera's own (as `XorSt` is for floats;
//! Prometheus 3.14 has its own ST histogram chunk encodings, which we do not mirror).
//!
//! Layout: the complete Prometheus histogram chunk first — so the leading big-endian u16 sample count
//! and every reader of it stay valid, and remote read sends that prefix as a plain histogram chunk,
//! zero-copy — then the ST column, then a 4-byte trailer:
//! ```text
//! ┌──────────────────────────────────┬──────────────────────────────┬─────────────────────────┐
//! │ Histogram / FloatHistogram chunk │ ST column: zz(st − prev st)  │ inner length: u32 (BE)  │
//! │ (count u16, flags, bit stream)   │ per sample, first against 0  │                         │
//! └──────────────────────────────────┴──────────────────────────────┴─────────────────────────┘
//! ```
//! The ST column has exactly as many entries as the inner chunk has samples (checked when decoding).
//! The encoders wrap [`HistogramEncoder`] / [`FloatHistogramEncoder`] and keep their decisions (recode,
//! new chunk on a counter reset or layout change); the complete bytes are rebuilt after each append (a
//! histogram chunk is about a KiB).

use crate::error::ChunkError;
use crate::float_histogram::{FloatHistogramEncoder, decode_float_histogram_into};
use crate::histogram::{Appended, HistogramAppendError, HistogramEncoder, decode_histogram_into};
use crate::varint::{put_varint, read_varint};
use tessera_model::histogram::{FloatHistogram, Histogram};

const TRAILER: usize = 4;

/// The inner histogram chunk and the ST column of an ST histogram chunk.
pub fn split_st_chunk(data: &[u8]) -> Result<(&[u8], &[u8]), ChunkError> {
    if data.len() < TRAILER {
        return Err(ChunkError::Truncated { offset: data.len() });
    }
    let (body, trailer) = data.split_at(data.len() - TRAILER);
    let inner_len = u32::from_be_bytes(trailer.try_into().expect("4 bytes")) as usize;
    if inner_len > body.len() {
        return Err(ChunkError::Corrupt { offset: data.len() - TRAILER, reason: "ST chunk inner length beyond the chunk" });
    }
    Ok(body.split_at(inner_len))
}

/// Decodes `n` start timestamps of an ST column into `out`.
fn decode_st_column(mut col: &[u8], n: usize, out: &mut Vec<i64>, base_offset: usize) -> Result<(), ChunkError> {
    let before = out.len();
    let mut prev = 0i64;
    for _ in 0..n {
        let Ok((d, rest)) = read_varint(col) else {
            out.truncate(before);
            return Err(ChunkError::Truncated { offset: base_offset });
        };
        prev = prev.wrapping_add(d);
        out.push(prev);
        col = rest;
    }
    if !col.is_empty() {
        out.truncate(before);
        return Err(ChunkError::Corrupt { offset: base_offset, reason: "ST column longer than the samples" });
    }
    Ok(())
}

/// Decodes an integer ST histogram chunk: samples into `out`, their start timestamps into `sts`.
pub fn decode_histogram_st_into(data: &[u8], out: &mut Vec<(i64, Histogram)>, sts: &mut Vec<i64>) -> Result<(), ChunkError> {
    let (inner, col) = split_st_chunk(data)?;
    let before = out.len();
    decode_histogram_into(inner, out)?;
    decode_st_column(col, out.len() - before, sts, inner.len()).inspect_err(|_| out.truncate(before))
}

/// Decodes a float ST histogram chunk: samples into `out`, their start timestamps into `sts`.
pub fn decode_float_histogram_st_into(
    data: &[u8],
    out: &mut Vec<(i64, FloatHistogram)>,
    sts: &mut Vec<i64>,
) -> Result<(), ChunkError> {
    let (inner, col) = split_st_chunk(data)?;
    let before = out.len();
    decode_float_histogram_into(inner, out)?;
    decode_st_column(col, out.len() - before, sts, inner.len()).inspect_err(|_| out.truncate(before))
}

/// What the ST wrapper needs of a histogram chunk encoder.
pub trait HistogramChunkEncoder: Sized + Default {
    type Sample;
    fn bytes(&self) -> &[u8];
    fn num_samples(&self) -> u16;
    fn append_sample(&mut self, t: i64, h: &Self::Sample, prev: Option<&Self>) -> Result<Appended<Self>, HistogramAppendError>;
}

impl HistogramChunkEncoder for HistogramEncoder {
    type Sample = Histogram;
    fn bytes(&self) -> &[u8] {
        HistogramEncoder::bytes(self)
    }
    fn num_samples(&self) -> u16 {
        HistogramEncoder::num_samples(self)
    }
    fn append_sample(&mut self, t: i64, h: &Histogram, prev: Option<&Self>) -> Result<Appended<Self>, HistogramAppendError> {
        self.append(t, h, prev)
    }
}

impl HistogramChunkEncoder for FloatHistogramEncoder {
    type Sample = FloatHistogram;
    fn bytes(&self) -> &[u8] {
        FloatHistogramEncoder::bytes(self)
    }
    fn num_samples(&self) -> u16 {
        FloatHistogramEncoder::num_samples(self)
    }
    fn append_sample(&mut self, t: i64, h: &FloatHistogram, prev: Option<&Self>) -> Result<Appended<Self>, HistogramAppendError> {
        self.append(t, h, prev)
    }
}

/// A histogram chunk encoder with a start-timestamp column.
#[derive(Debug, Clone, Default)]
pub struct StEncoder<E> {
    inner: E,
    sts: Vec<i64>,
    buf: Vec<u8>,
}

/// Integer histograms with start timestamps (`ChunkEncoding::HistogramSt`).
pub type HistogramStEncoder = StEncoder<HistogramEncoder>;
/// Float histograms with start timestamps (`ChunkEncoding::FloatHistogramSt`).
pub type FloatHistogramStEncoder = StEncoder<FloatHistogramEncoder>;

impl<E: HistogramChunkEncoder> StEncoder<E> {
    pub fn new() -> Self {
        let mut e = Self { inner: E::default(), sts: Vec::new(), buf: Vec::new() };
        e.rebuild();
        e
    }

    /// The chunk `inner` holds so far, every sample with ST 0 (a series' first ST converts its open
    /// chunk this way, as XOR becomes XorSt).
    pub fn from_plain(inner: E) -> Self {
        let n = usize::from(inner.num_samples());
        let mut e = Self { inner, sts: vec![0; n], buf: Vec::new() };
        e.rebuild();
        e
    }

    fn rebuild(&mut self) {
        let inner = self.inner.bytes();
        self.buf.clear();
        self.buf.extend_from_slice(inner);
        let mut prev = 0i64;
        for &st in &self.sts {
            put_varint(&mut self.buf, st.wrapping_sub(prev));
            prev = st;
        }
        self.buf.extend_from_slice(&(inner.len() as u32).to_be_bytes());
    }

    /// The complete chunk bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.buf
    }

    pub fn num_samples(&self) -> u16 {
        self.inner.num_samples()
    }

    /// Appends `h` at `t` with start timestamp `st`, as the inner encoder would (in place, recoding, or
    /// into a returned new chunk whose predecessor is this one).
    pub fn append(&mut self, t: i64, st: i64, h: &E::Sample, prev: Option<&Self>) -> Result<Appended<Self>, HistogramAppendError> {
        match self.inner.append_sample(t, h, prev.map(|p| &p.inner))? {
            Appended::NewChunk(next) => {
                let mut n = Self { inner: next, sts: vec![st], buf: Vec::new() };
                n.rebuild();
                Ok(Appended::NewChunk(n))
            }
            other => {
                self.sts.push(st);
                self.rebuild();
                Ok(match other {
                    Appended::Recoded => Appended::Recoded,
                    _ => Appended::InPlace,
                })
            }
        }
    }
}

/// Decodes any native-histogram chunk (`Histogram`, `FloatHistogram`, `HistogramSt`, `FloatHistogramSt`)
/// into samples with their start timestamps (0 where the encoding has none), all of it, in order.
/// Other encodings are [`ChunkError::UnsupportedEncoding`]. On error `out` is left as it was.
pub fn decode_histogram_samples_into(
    c: &tessera_model::ChunkRef,
    out: &mut Vec<tessera_model::HistogramSample>,
) -> Result<(), ChunkError> {
    use tessera_model::{ChunkEncoding, HistogramSample, HistogramValue};
    let mut sts = Vec::new();
    match c.encoding {
        ChunkEncoding::Histogram | ChunkEncoding::HistogramSt => {
            let mut v = Vec::new();
            if c.encoding == ChunkEncoding::Histogram {
                decode_histogram_into(&c.data, &mut v)?;
            } else {
                decode_histogram_st_into(&c.data, &mut v, &mut sts)?;
            }
            let n = v.len();
            out.extend(v.into_iter().zip(sts.into_iter().chain(std::iter::repeat(0)).take(n)).map(|((t, h), st)| {
                HistogramSample::with_st(t, st, HistogramValue::Int(h))
            }));
        }
        ChunkEncoding::FloatHistogram | ChunkEncoding::FloatHistogramSt => {
            let mut v = Vec::new();
            if c.encoding == ChunkEncoding::FloatHistogram {
                decode_float_histogram_into(&c.data, &mut v)?;
            } else {
                decode_float_histogram_st_into(&c.data, &mut v, &mut sts)?;
            }
            let n = v.len();
            out.extend(v.into_iter().zip(sts.into_iter().chain(std::iter::repeat(0)).take(n)).map(|((t, h), st)| {
                HistogramSample::with_st(t, st, HistogramValue::Float(h))
            }));
        }
        other => return Err(ChunkError::UnsupportedEncoding(other as u8)),
    }
    Ok(())
}

/// The Prometheus histogram chunk inside `c`: the chunk itself for `Histogram`/`FloatHistogram`, the
/// leading plain chunk (its start timestamps dropped, zero-copy) for the ST encodings; `None` for
/// float encodings. What remote read sends.
pub fn prometheus_histogram_chunk(c: &tessera_model::ChunkRef) -> Result<Option<tessera_model::ChunkRef>, ChunkError> {
    use tessera_model::{ChunkEncoding, ChunkRef};
    Ok(match c.encoding {
        ChunkEncoding::Histogram | ChunkEncoding::FloatHistogram => Some(c.clone()),
        ChunkEncoding::HistogramSt | ChunkEncoding::FloatHistogramSt => {
            let (inner, _) = split_st_chunk(&c.data)?;
            let encoding =
                if c.encoding == ChunkEncoding::HistogramSt { ChunkEncoding::Histogram } else { ChunkEncoding::FloatHistogram };
            Some(ChunkRef { mint_ms: c.mint_ms, maxt_ms: c.maxt_ms, encoding, data: c.data.slice(..inner.len()) })
        }
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::histogram::Span;

    fn h(c: u64) -> Histogram {
        Histogram { count: c, sum: c as f64, positive_spans: vec![Span::new(0, 1)], positive_buckets: vec![c as i64], ..Histogram::default() }
    }

    #[test]
    fn st_chunks_round_trip_and_their_prefix_is_the_plain_chunk() {
        let mut plain = HistogramEncoder::new();
        let mut e = HistogramStEncoder::new();
        let sts = [0i64, 100, 100, -5, i64::MAX];
        for (i, &st) in sts.iter().enumerate() {
            let t = i as i64 * 10;
            assert!(matches!(plain.append(t, &h(i as u64 + 1), None).expect("ok"), Appended::InPlace));
            assert!(matches!(e.append(t, st, &h(i as u64 + 1), None).expect("ok"), Appended::InPlace));
        }
        let (inner, _) = split_st_chunk(e.bytes()).expect("splits");
        assert_eq!(inner, plain.bytes());
        assert_eq!(&e.bytes()[..2], &[0, 5], "the sample count leads, as in every chunk");
        let (mut out, mut got) = (Vec::new(), Vec::new());
        decode_histogram_st_into(e.bytes(), &mut out, &mut got).expect("decodes");
        assert_eq!(got, sts);
        assert_eq!(out.len(), 5);
        // A counter reset starts a new ST chunk holding the sample and its ST.
        let Appended::NewChunk(n) = e.append(60, 7, &h(1), None).expect("ok") else { panic!("new chunk") };
        let (mut out, mut got) = (Vec::new(), Vec::new());
        decode_histogram_st_into(n.bytes(), &mut out, &mut got).expect("decodes");
        assert_eq!((out.len(), got), (1, vec![7]));
        // Converting a plain chunk keeps its samples with ST 0.
        let c = HistogramStEncoder::from_plain(plain);
        let (mut out, mut got) = (Vec::new(), Vec::new());
        decode_histogram_st_into(c.bytes(), &mut out, &mut got).expect("decodes");
        assert_eq!(got, vec![0; 5]);
    }

    #[test]
    fn truncated_or_mangled_st_chunks_are_errors() {
        let mut e = FloatHistogramStEncoder::new();
        for i in 0..4 {
            e.append(i * 10, 1000 + i, &h(i as u64 + 1).to_float(), None).expect("ok");
        }
        let b = e.bytes().to_vec();
        for cut in 0..b.len() {
            let (mut out, mut sts) = (Vec::new(), Vec::new());
            let _ = decode_float_histogram_st_into(&b[..cut], &mut out, &mut sts);
            assert_eq!(out.len(), sts.len(), "never half a result");
        }
        for i in 0..b.len() {
            for v in [0u8, 0xff, 0x80] {
                let mut m = b.clone();
                m[i] = v;
                let (mut out, mut sts) = (Vec::new(), Vec::new());
                if decode_float_histogram_st_into(&m, &mut out, &mut sts).is_ok() {
                    assert_eq!(out.len(), sts.len());
                }
            }
        }
    }
}
