//! `tessera-encoding`: the byte-level codecs every other Tessera crate stores and ships samples with.
//!
//! - [`bstream`]: MSB-first bit writer (appending to a caller's `Vec<u8>`) and bit reader (over `&[u8]`).
//! - [`varint`]: Go-compatible uvarint / zig-zag varint, appended to a `Vec<u8>`, read from a slice with
//!   the unread tail returned.
//! - [`crc`]: CRC32-Castagnoli, as Prometheus checksums chunks, index sections, WAL records and frames.
//! - [`xor`]: Prometheus' XOR float chunk, byte for byte ([`XorEncoder`], [`XorIter`], [`encode_xor`],
//!   [`decode_xor_into`], and [`for_each_xor_sample`] to fold a range without materialising it).
//! - [`dense`]: a denser codec for cold chunks (`ChunkEncoding::Dense`): Huffman-coded exponents, raw
//!   mantissas, run-length delta-of-delta timestamps; [`encode_dense`] only returns it when smaller than XOR.
//! - [`xor_st`]: XOR plus a per-sample start timestamp column (`ChunkEncoding::XorSt`, Tessera's own):
//!   [`XorStEncoder`], [`XorStIter`], [`encode_xor_st`], [`decode_xor_st_range_into`].
//! - [`histogram`] / [`float_histogram`]: Prometheus' native-histogram chunks (`ChunkEncoding::Histogram`
//!   and `FloatHistogram`), byte for byte, with the appender's layout decisions ([`HistogramEncoder`],
//!   [`FloatHistogramEncoder`], [`AppendDecision`], [`HistogramIter`], [`FloatHistogramIter`]);
//!   [`histogram_meta`] holds what both share (header bits, layout block, bucket-layout arithmetic);
//!   [`histogram_st`] wraps them with a start-timestamp column (`HistogramSt`, `FloatHistogramSt`).
//! - [`hbuckets`]: the same for native histograms (`ChunkEncoding::HistBuckets`).
//! - [`buckets`]: downsampling buckets (`ChunkEncoding::Buckets`, Tessera's own): per series and bucket of a
//!   tier's resolution, count, sum, min, max, first, last, counter correction, resets and changes.
//! - [`decode_chunk_range_into`]: decode any [`tessera_model::ChunkRef`] by its encoding byte;
//!   [`decode_chunk_range_st_into`] also returns start timestamps (0 for encodings without them);
//!   [`to_xor_chunks`] turns any float chunk into Prometheus XOR chunks (remote read).
//!
//! Key decision: the head writes exactly Prometheus' XOR chunk bytes (checked against vectors produced by
//! Prometheus' own Go code), so a chunk leaves through remote read or lands in a block unchanged. Decoders
//! treat bytes as untrusted: any truncation or impossible field is a typed [`ChunkError`], never a panic
//! and never an unbounded loop (the header's sample count bounds every decode).
#![forbid(unsafe_code)]

pub mod bitpack;
pub mod bstream;
pub mod buckets;
mod chunk;
pub mod crc;
pub mod dense;
mod error;
pub mod float_histogram;
pub mod hbuckets;
pub mod histogram;
pub mod decimal;
pub mod decimal_open;
pub mod histogram_meta;
pub mod histogram_st;
mod varbit;
pub mod varint;
pub mod xor;
pub mod xor_st;

pub use chunk::{
    chunk_sample_count, decode_chunk_range_into, decode_chunk_range_into_slice, decode_chunk_range_st_into, to_xor_chunks,
};
pub use decimal_open::{
    DECIMAL_OPEN_HEADER_BYTES, DecimalAppender, decimal_exponent_of, decimal_open_sample_count, decode_decimal_open_into,
    decode_decimal_open_range_into,
};
pub use decimal::{DecimalEncoder, decode_decimal_into, decode_decimal_range_into, decimal_sample_count, encode_decimal};
pub use dense::{
    DenseEncoder, SliceDecoded, decode_dense_into, decode_dense_range_into, decode_dense_range_into_slice, dense_sample_count, encode_dense, encode_dense_always,
};
pub use error::ChunkError;
pub use float_histogram::{FloatHistogramEncoder, FloatHistogramIter, decode_float_histogram_into, encode_float_histograms};
pub use histogram::{
    AppendDecision, Appended, HistogramAppendError, HistogramEncoder, HistogramIter, decode_histogram_into,
    encode_histograms,
};
pub use histogram_meta::{CounterResetHeader, HISTOGRAM_HEADER_BYTES};
pub use histogram_st::{
    FloatHistogramStEncoder, HistogramStEncoder, decode_float_histogram_st_into, decode_histogram_samples_into,
    decode_histogram_st_into, prometheus_histogram_chunk, split_st_chunk,
};
pub use xor::{
    XOR_HEADER_BYTES, XorAppender, XorEncoder, XorIter, decode_xor_into, decode_xor_range_into, encode_xor, for_each_xor_sample,
};
pub use xor_st::{XorStEncoder, XorStIter, decode_xor_st_range_into, decode_xor_st_samples_range_into, encode_xor_st};
