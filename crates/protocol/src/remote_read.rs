//! Remote read: request decoding and validation, response-type negotiation, and both response formats.
//!
//! - [`decode_request`]: snappy body → `prometheus.ReadRequest` → a validated [`ReadRequest`] whose
//!   queries carry `tessera_model::Matcher`s (an invalid regex is a clear 400, not a panic later).
//! - [`negotiate_response_type`]: the first of the client's `accepted_response_types` we support, as
//!   Prometheus' `NegotiateResponseType` decides (none listed means `SAMPLES`).
//! - `SAMPLES`: [`encode_samples_response`] writes one snappy-compressed `ReadResponse`.
//! - `STREAMED_XOR_CHUNKS`: a stream of frames, each `uvarint(len) | big-endian CRC32C(msg) | msg` with
//!   msg a `ChunkedReadResponse` ([`write_frame`], [`FrameReader`]). [`SeriesFramer`] cuts one series'
//!   chunks into frames under `max_bytes_in_frame` the way Prometheus' `StreamChunkedReadResponses` does,
//!   so the server holds at most one frame per request whatever the range.
//!
//! Key decision: chunk bytes pass through as given (`prompb::Chunk.data`); this module never decodes or
//! re-encodes a chunk, so stored XOR chunks leave exactly as stored.

use crate::prompb::{self, read_request::ResponseType};
use crate::remote_write::{self, DecodeError};
use prost::Message;
use tessera_model::{Labels, MatchOp, Matcher};

/// Content type of a `SAMPLES` response (with `Content-Encoding: snappy`).
pub const CONTENT_TYPE_SAMPLES: &str = "application/x-protobuf";
/// Content type of a `STREAMED_XOR_CHUNKS` response.
pub const CONTENT_TYPE_STREAMED: &str = "application/x-streamed-protobuf; proto=prometheus.ChunkedReadResponse";
/// Prometheus' default for `--storage.remote.read-max-bytes-in-frame`.
pub const DEFAULT_MAX_BYTES_IN_FRAME: usize = 1 << 20;
/// Prometheus' limit on a decoded read request (`decodeReadLimit`, 32 MiB).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 32 << 20;

/// What is wrong with a read request or a frame (answer 400 with the message).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ReadError {
    #[error(transparent)]
    Decode(#[from] DecodeError),
    #[error("remote read request has no queries")]
    NoQueries,
    #[error("query {index}: start {start_ms} is after end {end_ms}")]
    InvertedRange { index: usize, start_ms: i64, end_ms: i64 },
    #[error("query {index}: invalid matcher type {value}")]
    MatcherType { index: usize, value: i32 },
    #[error("query {index}: {reason}")]
    Matcher { index: usize, reason: String },
    #[error("server does not support any of the requested response types: {0:?}; supported: [SAMPLES STREAMED_XOR_CHUNKS]")]
    UnsupportedResponseTypes(Vec<i32>),
    #[error("chunkedReader: message size exceeded the limit {limit} bytes; got: {size} bytes")]
    FrameTooLarge { size: u64, limit: usize },
    #[error("chunkedReader: corrupted frame; checksum mismatch")]
    FrameChecksum,
    #[error("chunkedReader: truncated frame")]
    FrameTruncated,
}

/// One validated query.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadQuery {
    pub start_ms: i64,
    pub end_ms: i64,
    pub matchers: Vec<Matcher>,
    pub hints: Option<prompb::ReadHints>,
}

/// A validated request: queries in request order (their index is the `query_index` of the answer).
#[derive(Debug, Clone, PartialEq)]
pub struct ReadRequest {
    pub queries: Vec<ReadQuery>,
    /// As sent; see [`negotiate_response_type`].
    pub accepted_response_types: Vec<i32>,
}

/// The two response types.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReadResponseType {
    Samples,
    StreamedXorChunks,
}

/// Decodes the protobuf of a read request without validating it.
pub fn decode_request_message(buf: &[u8]) -> Result<prompb::ReadRequest, ReadError> {
    prompb::ReadRequest::decode(buf)
        .map_err(|e| ReadError::Decode(DecodeError::Protobuf { message: "prometheus.ReadRequest", reason: e.to_string() }))
}

/// Snappy body → validated request (Prometheus' `DecodeReadRequest`, plus the checks its handler and
/// `FromQuery`/`FromLabelMatchers` do later: at least one query, start ≤ end, valid matchers).
pub fn decode_request(body: &[u8], max_decoded_bytes: usize) -> Result<ReadRequest, ReadError> {
    let buf = remote_write::decompress(body, max_decoded_bytes)?;
    let msg = decode_request_message(&buf)?;
    validate_request(msg)
}

/// Validates a decoded `prometheus.ReadRequest`.
pub fn validate_request(msg: prompb::ReadRequest) -> Result<ReadRequest, ReadError> {
    if msg.queries.is_empty() {
        return Err(ReadError::NoQueries);
    }
    let mut queries = Vec::with_capacity(msg.queries.len());
    for (index, q) in msg.queries.into_iter().enumerate() {
        if q.start_timestamp_ms > q.end_timestamp_ms {
            return Err(ReadError::InvertedRange { index, start_ms: q.start_timestamp_ms, end_ms: q.end_timestamp_ms });
        }
        queries.push(ReadQuery {
            start_ms: q.start_timestamp_ms,
            end_ms: q.end_timestamp_ms,
            matchers: to_matchers(index, &q.matchers)?,
            hints: q.hints,
        });
    }
    Ok(ReadRequest { queries, accepted_response_types: msg.accepted_response_types })
}

/// Mirrors Prometheus' `FromLabelMatchers`.
pub fn to_matchers(index: usize, ms: &[prompb::LabelMatcher]) -> Result<Vec<Matcher>, ReadError> {
    ms.iter()
        .map(|m| {
            let op = match m.r#type {
                0 => MatchOp::Equal,
                1 => MatchOp::NotEqual,
                2 => MatchOp::Regex,
                3 => MatchOp::NotRegex,
                value => return Err(ReadError::MatcherType { index, value }),
            };
            Matcher::new(op, m.name.clone(), m.value.clone())
                .map_err(|e| ReadError::Matcher { index, reason: format!("matcher {}{}{:?}: {e}", m.name, op.as_str(), m.value) })
        })
        .collect()
}

/// The inverse of [`to_matchers`], for clients.
pub fn from_matchers(ms: &[Matcher]) -> Vec<prompb::LabelMatcher> {
    ms.iter()
        .map(|m| prompb::LabelMatcher {
            r#type: match m.op {
                MatchOp::Equal => 0,
                MatchOp::NotEqual => 1,
                MatchOp::Regex => 2,
                MatchOp::NotRegex => 3,
            },
            name: m.name.clone(),
            value: m.value.clone(),
        })
        .collect()
}

/// Mirrors Prometheus' `NegotiateResponseType`: no types listed means `SAMPLES`; otherwise the first
/// listed type the server supports, in the client's order; none supported is an error.
pub fn negotiate_response_type(accepted_response_types: &[i32]) -> Result<ReadResponseType, ReadError> {
    if accepted_response_types.is_empty() {
        return Ok(ReadResponseType::Samples);
    }
    for &t in accepted_response_types {
        match ResponseType::try_from(t) {
            Ok(ResponseType::Samples) => return Ok(ReadResponseType::Samples),
            Ok(ResponseType::StreamedXorChunks) => return Ok(ReadResponseType::StreamedXorChunks),
            Err(_) => {}
        }
    }
    Err(ReadError::UnsupportedResponseTypes(accepted_response_types.to_vec()))
}

/// Encodes a request for clients: protobuf then snappy.
pub fn encode_request(req: &prompb::ReadRequest) -> Vec<u8> {
    remote_write::compress(&req.encode_to_vec())
}

/// The body of a `SAMPLES` response: a snappy-compressed `ReadResponse`.
pub fn encode_samples_response(resp: &prompb::ReadResponse) -> Vec<u8> {
    remote_write::compress(&resp.encode_to_vec())
}

/// Decodes a `SAMPLES` response body (for clients and tests).
pub fn decode_samples_response(body: &[u8], max_decoded_bytes: usize) -> Result<prompb::ReadResponse, ReadError> {
    let buf = remote_write::decompress(body, max_decoded_bytes)?;
    prompb::ReadResponse::decode(buf.as_slice())
        .map_err(|e| ReadError::Decode(DecodeError::Protobuf { message: "prometheus.ReadResponse", reason: e.to_string() }))
}

/// Appends one frame: `uvarint(len(msg)) | big-endian CRC32-Castagnoli(msg) | msg` (Prometheus'
/// `ChunkedWriter.Write`).
pub fn write_frame(out: &mut Vec<u8>, msg: &[u8]) {
    let mut v = msg.len() as u64;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
    out.extend_from_slice(&crc32c::crc32c(msg).to_be_bytes());
    out.extend_from_slice(msg);
}

/// Appends one frame holding `resp`.
pub fn write_chunked_response(out: &mut Vec<u8>, resp: &prompb::ChunkedReadResponse) {
    write_frame(out, &resp.encode_to_vec());
}

/// Reads frames from a complete streamed body, checking each CRC (Prometheus' `ChunkedReader.Next`).
pub struct FrameReader<'a> {
    buf: &'a [u8],
    max_frame_bytes: usize,
    failed: bool,
}

impl<'a> FrameReader<'a> {
    pub fn new(buf: &'a [u8], max_frame_bytes: usize) -> Self {
        FrameReader { buf, max_frame_bytes, failed: false }
    }

    /// The next frame's message bytes; `None` at a clean end. After an error, always `None`.
    pub fn next_frame(&mut self) -> Option<Result<&'a [u8], ReadError>> {
        if self.buf.is_empty() || self.failed {
            return None;
        }
        let r = self.read_one();
        if r.is_err() {
            self.failed = true;
        }
        Some(r)
    }

    fn read_one(&mut self) -> Result<&'a [u8], ReadError> {
        let mut size: u64 = 0;
        let mut i = 0;
        loop {
            let b = *self.buf.get(i).ok_or(ReadError::FrameTruncated)?;
            if i == 9 && b > 1 {
                return Err(ReadError::FrameTooLarge { size: u64::MAX, limit: self.max_frame_bytes });
            }
            size |= ((b & 0x7f) as u64) << (7 * i);
            i += 1;
            if b < 0x80 {
                break;
            }
        }
        if size > self.max_frame_bytes as u64 {
            return Err(ReadError::FrameTooLarge { size, limit: self.max_frame_bytes });
        }
        let rest = &self.buf[i..];
        if rest.len() < 4 + size as usize {
            return Err(ReadError::FrameTruncated);
        }
        let crc = u32::from_be_bytes([rest[0], rest[1], rest[2], rest[3]]);
        let msg = &rest[4..4 + size as usize];
        if crc32c::crc32c(msg) != crc {
            return Err(ReadError::FrameChecksum);
        }
        self.buf = &rest[4 + size as usize..];
        Ok(msg)
    }

    /// The next frame decoded as a `ChunkedReadResponse`.
    pub fn next_response(&mut self) -> Option<Result<prompb::ChunkedReadResponse, ReadError>> {
        self.next_frame().map(|r| {
            r.and_then(|msg| {
                prompb::ChunkedReadResponse::decode(msg).map_err(|e| {
                    ReadError::Decode(DecodeError::Protobuf { message: "prometheus.ChunkedReadResponse", reason: e.to_string() })
                })
            })
        })
    }
}

/// Labels in wire form.
pub fn to_wire_labels(labels: &Labels) -> Vec<prompb::Label> {
    labels.iter().map(|l| prompb::Label { name: l.name.to_string(), value: l.value.to_string() }).collect()
}

/// Cuts one series' chunks into `ChunkedReadResponse` frames of about `max_bytes_in_frame` each, as
/// Prometheus' `StreamChunkedReadResponses` does: each frame carries one `ChunkedSeries` (the series'
/// labels repeated) with as many chunks as fit; a frame is emitted once the budget is used up, so a
/// single chunk larger than the budget still goes out alone. Holds at most one frame.
pub struct SeriesFramer {
    max_bytes_in_frame: usize,
    frame: Vec<u8>,
}

impl SeriesFramer {
    pub fn new(max_bytes_in_frame: usize) -> Self {
        SeriesFramer { max_bytes_in_frame, frame: Vec::new() }
    }

    /// Streams the chunks of one series; `emit` receives each complete frame (length, CRC, message).
    pub fn write_series<E>(
        &mut self,
        query_index: i64,
        labels: &[prompb::Label],
        chunks: impl IntoIterator<Item = prompb::Chunk>,
        mut emit: impl FnMut(&[u8]) -> Result<(), E>,
    ) -> Result<(), E> {
        let labels_bytes: usize = labels.iter().map(|l| l.encoded_len()).sum();
        let mut pending: Vec<prompb::Chunk> = Vec::new();
        let mut left = self.max_bytes_in_frame as i64 - labels_bytes as i64;
        let mut it = chunks.into_iter().peekable();
        while let Some(c) = it.next() {
            left -= c.encoded_len() as i64;
            pending.push(c);
            if left > 0 && it.peek().is_some() {
                continue;
            }
            let resp = prompb::ChunkedReadResponse {
                chunked_series: vec![prompb::ChunkedSeries { labels: labels.to_vec(), chunks: std::mem::take(&mut pending) }],
                query_index,
            };
            self.frame.clear();
            write_chunked_response(&mut self.frame, &resp);
            emit(&self.frame)?;
            left = self.max_bytes_in_frame as i64 - labels_bytes as i64;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn negotiation_follows_the_clients_order() {
        assert_eq!(negotiate_response_type(&[]), Ok(ReadResponseType::Samples));
        assert_eq!(negotiate_response_type(&[1]), Ok(ReadResponseType::StreamedXorChunks));
        assert_eq!(negotiate_response_type(&[1, 0]), Ok(ReadResponseType::StreamedXorChunks));
        assert_eq!(negotiate_response_type(&[0, 1]), Ok(ReadResponseType::Samples));
        assert_eq!(negotiate_response_type(&[7, 1]), Ok(ReadResponseType::StreamedXorChunks));
        assert!(matches!(negotiate_response_type(&[7, 9]), Err(ReadError::UnsupportedResponseTypes(_))));
    }
}
