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
//! Key decision: untrusted bodies are decoded into byte-typed twins of the upstream messages
//! (`remote_write::raw`) rather than into `String`-typed ones, because prost fails the *whole* message
//! when any `string` field holds invalid UTF-8; decoding bytes first lets one bad series be reported
//! while the rest of the request is still written, as the remote-write specs ask.
#![forbid(unsafe_code)]

pub mod prompb;
pub mod remote_read;
pub mod remote_write;
