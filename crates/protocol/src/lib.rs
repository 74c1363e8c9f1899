//! `tessera-protocol`: the wire codecs of Prometheus' remote protocols, with no I/O and no storage.
//!
//! - [`prompb`]: hand-written `prost` mirrors of upstream's `.proto` messages (remote write 1.0, remote
//!   write 2.0, remote read), field numbers exactly as upstream, so no `protoc` or build script is needed.
//! - [`remote_write`]: Content-Type negotiation, bounded snappy decompression, decoding of 1.0 and 2.0
//!   requests into validated [`remote_write::WriteSeries`] (invalid series are collected with a reason,
//!   the valid rest is kept), and fast encoders for senders (the B2 load generator, tests).
//! - [`remote_read`]: request decoding and validation, response-type negotiation, the
//!   `STREAMED_XOR_CHUNKS` frame format (uvarint length | big-endian CRC32C | message) and the `SAMPLES`
//!   response.
//!
//! Key decision: untrusted remote-write bodies are decoded by a zero-copy protobuf walker (`pbwire`)
//! into [`remote_write::WriteRequestRef`], whose labels borrow from the body, rather than by prost into
//! `String`-typed messages: prost fails the *whole* message when any `string` field holds invalid
//! UTF-8 (one bad series must not sink the request, the specs say the valid rest is written), and it
//! allocates per label and per series (the walker is ~3–4× faster). A differential proptest keeps the
//! walker in step with prost on arbitrary bytes.
#![forbid(unsafe_code)]

pub mod histogram_wire;
mod pbwire;
pub mod prompb;
pub mod remote_read;
pub mod remote_write;
