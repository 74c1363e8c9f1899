//! Remote write 1.0 and 2.0: negotiation, decompression, decoding with validation, and encoding.
//!
//! Receiving a request is three calls, in the order the specs imply:
//! 1. [`negotiate`] the `Content-Type` / `Content-Encoding` headers (415 on failure);
//! 2. [`decompress`] the snappy *block* body, refusing a declared length over the limit before
//!    allocating anything (no snappy bomb);
//! 3. [`decode`] the protobuf into a [`DecodedWrite`]: the valid series, the invalid ones with a
//!    human-readable reason each (the request is still written, then answered 400 with those reasons,
//!    because senders never retry a 4xx), metadata, and counts of histograms and exemplars.
//!
//! A [`DecodeError`] means the body as a whole is unusable (bad snappy, bad protobuf, a broken 2.0
//! symbol table): answer 400 and write nothing.
//!
//! Decoding walks the protobuf without materialising it (`crate::pbwire`): [`decode_ref`] returns a
//! [`WriteRequestRef`] whose label strings borrow from the body (the receiver's fast path: it can hash
//! and look up a series without allocating, and copy labels only for new series); [`decode`] is the
//! same plus owned labels. Strings are checked for UTF-8 per series, so one bad series does not sink
//! the request (prost would reject the whole message). Every element the decoder stores was present
//! in the buffer (each length prefix is checked against the remaining input), so a body of N bytes
//! cannot make it allocate much more than a small multiple of N; a test with a counting allocator pins
//! that down. [`raw`] keeps byte-typed prost twins of the messages for tests and tools.
//!
//! Start timestamps (2.0's per-sample `Sample.start_timestamp`, field 3; 0 = unset) are decoded into a
//! vector parallel to the samples, kept only for series where some sample has one: a request without
//! STs costs nothing extra, and the receiver can keep its plain path when a series' slice is empty.
//! The experimental per-series `created_timestamp` (field 6) is `reserved` in the final proto and
//! Prometheus' `writeHandler.appendV2` ignores it; so do we. 1.0 has no start timestamps.
//!
//! The encoders ([`V1Builder`], [`V2Builder`], [`encode_v1`], [`encode_v2`]) write protobuf directly
//! from borrowed labels and samples, without building `prost` structs: the B2 load generator shares the
//! machine with the receiver it measures, so the sender must be cheap.

use crate::pbwire::{read_u32s, Reader, WireError, WT_FIXED64, WT_LEN, WT_VARINT};
use crate::prompb;
use prost::Message;
use std::collections::HashMap;
use crate::histogram_wire::{read_histogram, validate as validate_histogram};
use tessera_model::{Exemplar, HistogramSample, HistogramValue, Labels, Sample, METRIC_NAME};

/// Content type of a remote-write 1.0 request (`prometheus.WriteRequest`).
pub const CONTENT_TYPE_V1: &str = "application/x-protobuf";
/// Content type of a remote-write 2.0 request.
pub const CONTENT_TYPE_V2: &str = "application/x-protobuf;proto=io.prometheus.write.v2.Request";
/// The `proto=` parameter values of the two versions.
pub const PROTO_MSG_V1: &str = "prometheus.WriteRequest";
pub const PROTO_MSG_V2: &str = "io.prometheus.write.v2.Request";
/// The only content encoding the specs define.
pub const CONTENT_ENCODING_SNAPPY: &str = "snappy";
/// Response headers a 2.0 receiver sets (on every answer, success or not).
pub const HEADER_SAMPLES_WRITTEN: &str = "X-Prometheus-Remote-Write-Samples-Written";
pub const HEADER_HISTOGRAMS_WRITTEN: &str = "X-Prometheus-Remote-Write-Histograms-Written";
pub const HEADER_EXEMPLARS_WRITTEN: &str = "X-Prometheus-Remote-Write-Exemplars-Written";
/// The header senders set to announce their protocol version ("0.1.0" for 1.0, "2.0.0" for 2.0).
pub const HEADER_VERSION: &str = "X-Prometheus-Remote-Write-Version";
pub const VERSION_V1: &str = "0.1.0";
pub const VERSION_V2: &str = "2.0.0";

/// The protocol version of a request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProtoVersion {
    V1,
    V2,
}

impl ProtoVersion {
    /// The `Content-Type` a sender of this version sets.
    pub fn content_type(self) -> &'static str {
        match self {
            ProtoVersion::V1 => CONTENT_TYPE_V1,
            ProtoVersion::V2 => CONTENT_TYPE_V2,
        }
    }

    /// The `X-Prometheus-Remote-Write-Version` a sender of this version sets.
    pub fn version_header(self) -> &'static str {
        match self {
            ProtoVersion::V1 => VERSION_V1,
            ProtoVersion::V2 => VERSION_V2,
        }
    }
}

/// The headers name a media type or encoding we do not speak: answer 415 with this message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnsupportedMediaType(pub String);

/// Mirrors Prometheus' `writeHandler.ServeHTTP` header checks and `parseProtoMsg`:
/// - a missing or empty `Content-Type` means 1.0 (old senders set none);
/// - the media type must be `application/x-protobuf`; a `proto=` parameter picks the message
///   (`prometheus.WriteRequest` → 1.0, `io.prometheus.write.v2.Request` → 2.0, anything else → 415);
///   no `proto=` parameter means 1.0; a parameter that is not `key=value` → 415;
/// - a missing `Content-Encoding` is tolerated (Prometheus does so not to break old 1.0 clients: the
///   body is still read as snappy); any encoding other than `snappy` → 415.
///
/// Deviation, on the lenient side: whitespace around parameters and the media type's case are ignored
/// (RFC 9110 allows both; Prometheus compares raw strings, so `…; proto=…` with a space silently falls
/// back to 1.0 there).
pub fn negotiate(content_type: Option<&str>, content_encoding: Option<&str>) -> Result<ProtoVersion, UnsupportedMediaType> {
    let version = match content_type.map(str::trim).filter(|s| !s.is_empty()) {
        None => ProtoVersion::V1,
        Some(ct) => parse_proto_msg(ct)?,
    };
    match content_encoding.map(str::trim).filter(|s| !s.is_empty()) {
        None => {}
        Some(enc) if enc.eq_ignore_ascii_case(CONTENT_ENCODING_SNAPPY) => {}
        Some(enc) => {
            return Err(UnsupportedMediaType(format!(
                "{enc} encoding (compression) is not accepted by this server; only {CONTENT_ENCODING_SNAPPY} is acceptable"
            )));
        }
    }
    Ok(version)
}

/// Mirrors Prometheus' `parseProtoMsg`.
fn parse_proto_msg(content_type: &str) -> Result<ProtoVersion, UnsupportedMediaType> {
    let mut parts = content_type.split(';');
    let media = parts.next().unwrap_or("").trim();
    if !media.eq_ignore_ascii_case(CONTENT_TYPE_V1) {
        return Err(UnsupportedMediaType(format!(
            "expected {CONTENT_TYPE_V1} as the first (media) part, got {content_type} content-type"
        )));
    }
    for p in parts {
        let p = p.trim();
        let Some((k, v)) = p.split_once('=') else {
            return Err(UnsupportedMediaType(format!(
                "expected parameters to be key-values (RFC 9110), got {p:?} in {content_type} content-type"
            )));
        };
        if v.contains('=') {
            return Err(UnsupportedMediaType(format!(
                "expected parameters to be key-values (RFC 9110), got {p:?} in {content_type} content-type"
            )));
        }
        if k.trim().eq_ignore_ascii_case("proto") {
            let v = v.trim().trim_matches('"');
            return match v {
                PROTO_MSG_V1 => Ok(ProtoVersion::V1),
                PROTO_MSG_V2 => Ok(ProtoVersion::V2),
                other => Err(UnsupportedMediaType(format!(
                    "got {content_type} content type; unknown remote write protobuf message {other}, supported: {PROTO_MSG_V1}, {PROTO_MSG_V2}"
                ))),
            };
        }
    }
    Ok(ProtoVersion::V1)
}

/// Per-request limits. The defaults are generous enough for any sane exporter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest decompressed body accepted (checked against snappy's declared length before allocating).
    pub max_decoded_bytes: usize,
    pub max_labels_per_series: usize,
    pub max_label_name_bytes: usize,
    pub max_label_value_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_decoded_bytes: 64 << 20,
            max_labels_per_series: 64,
            max_label_name_bytes: 1024,
            max_label_value_bytes: 16 * 1024,
        }
    }
}

/// The body as a whole cannot be used: answer 400 with this message and write nothing.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    #[error("snappy: decoded length {declared} bytes exceeds the limit of {limit} bytes")]
    TooLarge { declared: u64, limit: usize },
    #[error("snappy: corrupt input ({0})")]
    Snappy(String),
    #[error("protobuf: cannot decode {message}: {reason}")]
    Protobuf { message: &'static str, reason: String },
    #[error("remote write 2.0: {0}")]
    Symbols(String),
}

/// Snappy's densest element is a 3-byte copy that yields 64 bytes, so no valid block decodes to more
/// than ~21.4 times its size: a larger declared length is corrupt, whatever the limit.
const SNAPPY_MAX_EXPANSION: u64 = 22;

/// Decompresses a snappy *block* (not framed) body. The declared length is read first and refused when
/// it exceeds `max_decoded_bytes` or what the body could possibly expand to; only then is the output
/// buffer allocated.
pub fn decompress(body: &[u8], max_decoded_bytes: usize) -> Result<Vec<u8>, DecodeError> {
    let declared = snap::raw::decompress_len(body).map_err(|e| DecodeError::Snappy(e.to_string()))?;
    if declared as u64 > max_decoded_bytes as u64 {
        return Err(DecodeError::TooLarge { declared: declared as u64, limit: max_decoded_bytes });
    }
    if declared as u64 > (body.len() as u64).saturating_mul(SNAPPY_MAX_EXPANSION) {
        return Err(DecodeError::Snappy(format!(
            "declared length {declared} is impossible for a {}-byte body",
            body.len()
        )));
    }
    let mut out = vec![0u8; declared];
    let n = snap::raw::Decoder::new().decompress(body, &mut out).map_err(|e| DecodeError::Snappy(e.to_string()))?;
    out.truncate(n);
    Ok(out)
}

/// Compresses with snappy's block format, as remote-write senders do.
pub fn compress(buf: &[u8]) -> Vec<u8> {
    // Only fails for inputs over 4 GiB, which no caller builds.
    snap::raw::Encoder::new().compress_vec(buf).expect("snappy block input under 4 GiB")
}

/// A metric family's type, as `/api/v1/metadata` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum MetricType {
    Counter,
    Gauge,
    Histogram,
    GaugeHistogram,
    Summary,
    Info,
    StateSet,
    #[default]
    Unknown,
}

impl MetricType {
    /// Prometheus' `model.MetricType` strings.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::GaugeHistogram => "gaugehistogram",
            MetricType::Summary => "summary",
            MetricType::Info => "info",
            MetricType::StateSet => "stateset",
            MetricType::Unknown => "unknown",
        }
    }

    /// From the wire enum (same numbering in 1.0 and 2.0; 0 is UNKNOWN / UNSPECIFIED). Unknown numbers
    /// map to `Unknown`, as Go's generated code would keep them opaque.
    pub fn from_wire(v: i32) -> Self {
        match v {
            1 => MetricType::Counter,
            2 => MetricType::Gauge,
            3 => MetricType::Histogram,
            4 => MetricType::GaugeHistogram,
            5 => MetricType::Summary,
            6 => MetricType::Info,
            7 => MetricType::StateSet,
            _ => MetricType::Unknown,
        }
    }

    pub fn to_wire(self) -> i32 {
        match self {
            MetricType::Unknown => 0,
            MetricType::Counter => 1,
            MetricType::Gauge => 2,
            MetricType::Histogram => 3,
            MetricType::GaugeHistogram => 4,
            MetricType::Summary => 5,
            MetricType::Info => 6,
            MetricType::StateSet => 7,
        }
    }
}

/// Metadata of one metric family.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct Metadata {
    pub metric_family_name: String,
    pub kind: MetricType,
    pub help: String,
    pub unit: String,
}

/// One valid series of a request.
#[derive(Debug, Clone, PartialEq)]
pub struct WriteSeries {
    pub labels: Labels,
    pub samples: Vec<Sample>,
    /// Native histogram samples this series carried (valid or not).
    pub histograms: usize,
    /// Exemplars this series carried.
    pub exemplars: usize,
    /// 2.0's per-sample `start_timestamp`, parallel to `samples` (0 = unset for that sample), or empty
    /// when no sample of the series carried one (always empty for 1.0, which has no such field).
    pub start_timestamps: Vec<i64>,
    /// The series' valid native-histogram samples, in request order.
    pub histogram_samples: Vec<HistogramSample>,
    /// The series' exemplars that could be read (labels valid UTF-8), in request order.
    pub exemplar_list: Vec<Exemplar>,
}

impl WriteSeries {
    pub fn new(labels: Labels, samples: Vec<Sample>) -> Self {
        WriteSeries {
            labels,
            samples,
            histograms: 0,
            exemplars: 0,
            start_timestamps: Vec::new(),
            histogram_samples: Vec::new(),
            exemplar_list: Vec::new(),
        }
    }

    /// The start timestamp of sample `i` (0 when unset).
    pub fn start_timestamp(&self, i: usize) -> i64 {
        self.start_timestamps.get(i).copied().unwrap_or(0)
    }
}

/// A series that was not accepted, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSeries {
    /// The labels as well as they could be read (invalid UTF-8 replaced, long text cut).
    pub labels_text: String,
    /// Human-readable, e.g. `duplicate label name "job"`.
    pub reason: String,
    /// Samples it carried (they were not written).
    pub samples: usize,
    pub histograms: usize,
    pub exemplars: usize,
}

/// A decoded request.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DecodedWrite {
    /// The valid series, in request order.
    pub series: Vec<WriteSeries>,
    /// The invalid series, in request order.
    pub invalid: Vec<InvalidSeries>,
    /// Metadata carried by the request (1.0 `metadata` field; 2.0 per-series metadata keyed by the
    /// series' metric name), deduplicated.
    pub metadata: Vec<Metadata>,
    /// Metadata entries that could not be used (e.g. invalid UTF-8), with a reason each.
    pub invalid_metadata: Vec<String>,
    /// Native histogram samples the request carried, valid series or not.
    pub histograms: u64,
    /// Exemplars the request carried, valid series or not.
    pub exemplars: u64,
    /// See [`WriteRequestRef::invalid_histograms`].
    pub invalid_histograms: Vec<String>,
    pub invalid_histogram_count: u64,
}

impl DecodedWrite {
    /// Float samples in the valid series.
    pub fn valid_samples(&self) -> usize {
        self.series.iter().map(|s| s.samples.len()).sum()
    }

    /// Float samples in the invalid series (not written).
    pub fn invalid_samples(&self) -> usize {
        self.invalid.iter().map(|s| s.samples).sum()
    }
}

/// Decodes an (already decompressed) body and validates it series by series.
/// Allocates owned labels for every series; receivers that look series up by their labels can use
/// [`decode_ref`] instead and allocate only for new series.
pub fn decode(version: ProtoVersion, buf: &[u8], limits: &Limits) -> Result<DecodedWrite, DecodeError> {
    decode_ref(version, buf, limits).map(|r| r.to_owned_write())
}

/// Byte-typed prost twins of the upstream messages (tests build hostile bodies with them, and the
/// differential proptest checks the zero-copy walker against prost through them).
/// Same field numbers as [`prompb`]; `bytes` and `string` share a wire type.
pub mod raw {
    use crate::prompb;

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Label {
        #[prost(bytes = "vec", tag = "1")]
        pub name: Vec<u8>,
        #[prost(bytes = "vec", tag = "2")]
        pub value: Vec<u8>,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct Exemplar {
        #[prost(message, repeated, tag = "1")]
        pub labels: Vec<Label>,
        #[prost(double, tag = "2")]
        pub value: f64,
        #[prost(int64, tag = "3")]
        pub timestamp: i64,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct TimeSeries {
        #[prost(message, repeated, tag = "1")]
        pub labels: Vec<Label>,
        #[prost(message, repeated, tag = "2")]
        pub samples: Vec<prompb::Sample>,
        #[prost(message, repeated, tag = "3")]
        pub exemplars: Vec<Exemplar>,
        #[prost(message, repeated, tag = "4")]
        pub histograms: Vec<prompb::Histogram>,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct MetricMetadata {
        #[prost(int32, tag = "1")]
        pub r#type: i32,
        #[prost(bytes = "vec", tag = "2")]
        pub metric_family_name: Vec<u8>,
        #[prost(bytes = "vec", tag = "4")]
        pub help: Vec<u8>,
        #[prost(bytes = "vec", tag = "5")]
        pub unit: Vec<u8>,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct WriteRequest {
        #[prost(message, repeated, tag = "1")]
        pub timeseries: Vec<TimeSeries>,
        #[prost(message, repeated, tag = "3")]
        pub metadata: Vec<MetricMetadata>,
    }

    #[derive(Clone, PartialEq, ::prost::Message)]
    pub struct RequestV2 {
        #[prost(bytes = "vec", repeated, tag = "4")]
        pub symbols: Vec<Vec<u8>>,
        #[prost(message, repeated, tag = "5")]
        pub timeseries: Vec<prompb::v2::TimeSeries>,
    }
}

/// Series with invalid histograms named in [`WriteRequestRef::invalid_histograms`]; the rest counted.
pub const MAX_LISTED_INVALID_HISTOGRAMS: usize = 5;

/// Longest label text quoted in an error message.
const MAX_LABELS_TEXT: usize = 512;

fn labels_text<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> String {
    let mut s = String::from("{");
    for (i, (n, v)) in pairs.enumerate() {
        if s.len() > MAX_LABELS_TEXT {
            s.push_str(", …");
            break;
        }
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(&String::from_utf8_lossy(n));
        s.push('=');
        s.push_str(&tessera_model::labels::go_quote(&String::from_utf8_lossy(v)));
    }
    s.push('}');
    s
}

fn shorten(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    if s.chars().count() > 64 {
        let cut: String = s.chars().take(64).collect();
        format!("{cut}…")
    } else {
        s.into_owned()
    }
}

/// One label borrowed from the request body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LabelRef<'a> {
    pub name: &'a str,
    pub value: &'a str,
}

/// One valid series of a [`WriteRequestRef`]: labels sorted by name, unique, non-empty values only
/// (an empty value means "absent"), `__name__` present.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesRef<'r> {
    pub labels: &'r [LabelRef<'r>],
    pub samples: &'r [Sample],
    /// Native histogram samples the series carried (valid or not).
    pub histograms: usize,
    pub exemplars: usize,
    /// The series' valid native-histogram samples (upstream's `Validate` passed), in request order.
    pub histogram_samples: &'r [HistogramSample],
    /// The series' readable exemplars, in request order.
    pub exemplar_list: &'r [Exemplar],
    /// Per-sample start timestamps parallel to `samples` (0 = unset), or empty when none of this
    /// series' samples carried one: a receiver can test `is_empty()` to keep its no-ST fast path.
    pub start_timestamps: &'r [i64],
}

impl SeriesRef<'_> {
    /// The value of `__name__`.
    pub fn metric_name(&self) -> &str {
        self.labels.iter().find(|l| l.name == METRIC_NAME).map(|l| l.value).unwrap_or("")
    }

    /// The same value as `self.to_labels().hash()` ([`Labels::hash`]), without allocating, so a
    /// receiver can route the series to its shard and look it up before copying any label. A test pins
    /// the equality.
    pub fn hash(&self) -> u64 {
        tessera_model::labels::hash_pairs_iter(self.labels.iter().map(|l| (l.name, l.value)))
    }

    /// Owned labels (allocates).
    pub fn to_labels(&self) -> Labels {
        Labels::from_canonical_iter(self.labels.iter().map(|l| (l.name, l.value)))
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
struct SeriesEntry {
    labels: (u32, u32),
    samples: (u32, u32),
    /// Range of the series' valid histograms in `WriteRequestRef::hists`.
    hists: (u32, u32),
    /// Range of the series' exemplars in `WriteRequestRef::exs`.
    exs: (u32, u32),
    histograms: u32,
    exemplars: u32,
    /// Some sample of the series has a non-zero start timestamp: `sts` covers its sample range.
    has_st: bool,
}

/// A decoded, validated request whose label strings borrow from the decompressed body: the fast path
/// for receivers (no allocation per label or per series; three flat vectors per request). Same
/// validation and reporting as [`decode`], which is this plus a conversion to owned labels.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WriteRequestRef<'a> {
    labels: Vec<LabelRef<'a>>,
    samples: Vec<Sample>,
    /// Start timestamps, indexed like `samples` but filled lazily: only the ranges of series whose
    /// entry has `has_st` are meaningful (a request without STs never grows it).
    sts: Vec<i64>,
    entries: Vec<SeriesEntry>,
    /// Valid native-histogram samples of all series, back to back.
    hists: Vec<HistogramSample>,
    /// Readable exemplars of all series, back to back.
    exs: Vec<Exemplar>,
    /// Exemplars that could not be read (labels not UTF-8, label refs out of range): dropped, counted.
    pub unreadable_exemplars: u64,
    /// Histogram samples of valid series that failed upstream's validation (not written): one line per
    /// series naming it and the first reason, at most [`MAX_LISTED_INVALID_HISTOGRAMS`] lines.
    pub invalid_histograms: Vec<String>,
    /// How many histogram samples failed validation.
    pub invalid_histogram_count: u64,
    /// The invalid series, in request order.
    pub invalid: Vec<InvalidSeries>,
    /// See [`DecodedWrite::metadata`].
    pub metadata: Vec<Metadata>,
    pub invalid_metadata: Vec<String>,
    pub histograms: u64,
    pub exemplars: u64,
}

impl<'a> WriteRequestRef<'a> {
    /// Number of valid series.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The `i`-th valid series.
    pub fn get(&self, i: usize) -> SeriesRef<'_> {
        let e = &self.entries[i];
        SeriesRef {
            labels: &self.labels[e.labels.0 as usize..e.labels.1 as usize],
            samples: &self.samples[e.samples.0 as usize..e.samples.1 as usize],
            histograms: e.histograms as usize,
            histogram_samples: &self.hists[e.hists.0 as usize..e.hists.1 as usize],
            exemplar_list: &self.exs[e.exs.0 as usize..e.exs.1 as usize],
            exemplars: e.exemplars as usize,
            start_timestamps: if e.has_st { &self.sts[e.samples.0 as usize..e.samples.1 as usize] } else { &[] },
        }
    }

    /// The valid series in request order.
    pub fn series(&self) -> impl ExactSizeIterator<Item = SeriesRef<'_>> + '_ {
        (0..self.entries.len()).map(|i| self.get(i))
    }

    /// Float samples in the valid series.
    pub fn valid_samples(&self) -> usize {
        self.samples.len()
    }

    /// Converts to owned series (allocates every label).
    pub fn to_owned_write(&self) -> DecodedWrite {
        DecodedWrite {
            series: self
                .series()
                .map(|s| WriteSeries {
                    labels: s.to_labels(),
                    samples: s.samples.to_vec(),
                    histograms: s.histograms,
                    exemplars: s.exemplars,
                    start_timestamps: s.start_timestamps.to_vec(),
                    histogram_samples: s.histogram_samples.to_vec(),
                    exemplar_list: s.exemplar_list.to_vec(),
                })
                .collect(),
            invalid: self.invalid.clone(),
            metadata: self.metadata.clone(),
            invalid_metadata: self.invalid_metadata.clone(),
            histograms: self.histograms,
            exemplars: self.exemplars,
            invalid_histograms: self.invalid_histograms.clone(),
            invalid_histogram_count: self.invalid_histogram_count,
        }
    }

    /// Keeps a decoded histogram of the series being read if it passes upstream's validation;
    /// otherwise counts it in `bad` (with the first reason).
    fn push_histogram(&mut self, (t, st, h): (i64, i64, HistogramValue), bad: &mut (u64, Option<String>)) {
        match validate_histogram(&h) {
            Ok(()) => self.hists.push(HistogramSample::with_st(t, st, h)),
            Err(reason) => {
                bad.0 += 1;
                bad.1.get_or_insert(reason);
            }
        }
    }

    /// The metric name of the last valid series, borrowed from the body (empty if none).
    fn last_metric_name(&self) -> &'a str {
        let Some(e) = self.entries.last() else { return "" };
        let labels = &self.labels[e.labels.0 as usize..e.labels.1 as usize];
        labels.iter().find(|l| l.name == METRIC_NAME).map(|l| l.value).unwrap_or("")
    }

    /// Appends one decoded sample of the series whose samples start at `samples_start`; `has_st` says
    /// whether an earlier sample of that series had a start timestamp and becomes true at the first
    /// non-zero one, when `sts` is padded with zeros up to this sample (so the series' range is covered).
    fn push_sample(&mut self, s: Sample, st: i64, has_st: &mut bool) {
        if st != 0 && !*has_st {
            *has_st = true;
            self.sts.resize(self.samples.len(), 0);
        }
        self.samples.push(s);
        if *has_st {
            self.sts.push(st);
        }
    }

    /// Validates one series' raw label pairs and, when valid, records it with its samples (which the
    /// caller has already appended to `self.samples` from `samples_start`). Otherwise the samples are
    /// dropped and the series is reported.
    fn finish_series(
        &mut self,
        pairs: &[(&'a [u8], &'a [u8])],
        (samples_start, hists_start, exs_start): (usize, usize, usize),
        (histograms, exemplars, has_st): (usize, usize, bool),
        extra_check: Option<String>,
        bad_hists: (u64, Option<String>),
        limits: &Limits,
    ) -> bool {
        self.histograms += histograms as u64;
        self.exemplars += exemplars as u64;
        let labels_start = self.labels.len();
        let res = match extra_check {
            Some(reason) => Err(reason),
            None => validate_labels(pairs, limits, &mut self.labels),
        };
        match res {
            Ok(()) => {
                self.entries.push(SeriesEntry {
                    labels: (labels_start as u32, self.labels.len() as u32),
                    samples: (samples_start as u32, self.samples.len() as u32),
                    hists: (hists_start as u32, self.hists.len() as u32),
                    exs: (exs_start as u32, self.exs.len() as u32),
                    histograms: histograms as u32,
                    exemplars: exemplars as u32,
                    has_st,
                });
                if let (n @ 1.., Some(reason)) = bad_hists {
                    self.invalid_histogram_count += n;
                    if self.invalid_histograms.len() < MAX_LISTED_INVALID_HISTOGRAMS {
                        self.invalid_histograms.push(format!("{}: {n} histogram(s) not written: {reason}", labels_text(pairs.iter().copied())));
                    }
                }
                true
            }
            Err(reason) => {
                self.labels.truncate(labels_start);
                let samples = self.samples.len() - samples_start;
                self.samples.truncate(samples_start);
                self.sts.truncate(samples_start.min(self.sts.len()));
                self.hists.truncate(hists_start);
                self.exs.truncate(exs_start);
                self.invalid.push(InvalidSeries {
                    labels_text: labels_text(pairs.iter().copied()),
                    reason,
                    samples,
                    histograms,
                    exemplars,
                });
                false
            }
        }
    }
}

/// The checks of Prometheus' write handler (`labels.IsValid`, `HasDuplicateLabelNames`, a present
/// metric name) plus the size limits, on raw bytes. Valid non-empty pairs are appended to `out`
/// sorted by name (the caller truncates on error): labels that arrive unsorted are sorted, as
/// upstream's `labelProtosToLabels` and `desymbolizeLabels` do for 1.0 and 2.0, not refused.
/// Returns the reason on failure.
fn validate_labels<'a>(pairs: &[(&'a [u8], &'a [u8])], limits: &Limits, out: &mut Vec<LabelRef<'a>>) -> Result<(), String> {
    let n = pairs.len();
    let start = out.len();
    let mut sorted = true;
    if n > limits.max_labels_per_series {
        return Err(format!("too many labels ({n} > {})", limits.max_labels_per_series));
    }
    let mut prev: Option<&[u8]> = None;
    let mut has_name = false;
    for &(name, value) in pairs {
        if name.is_empty() {
            return Err("empty label name".to_string());
        }
        let Ok(name_str) = std::str::from_utf8(name) else {
            return Err(format!("invalid UTF-8 in label name {:?}", shorten(name)));
        };
        if name.len() > limits.max_label_name_bytes {
            return Err(format!(
                "label name too long ({} > {} bytes): {:?}",
                name.len(),
                limits.max_label_name_bytes,
                shorten(name)
            ));
        }
        let Ok(value_str) = std::str::from_utf8(value) else {
            return Err(format!("invalid UTF-8 in label value of {name_str:?}"));
        };
        if value.len() > limits.max_label_value_bytes {
            return Err(format!(
                "label value too long ({} > {} bytes) for label {name_str:?}",
                value.len(),
                limits.max_label_value_bytes
            ));
        }
        if let Some(p) = prev {
            match name.cmp(p) {
                std::cmp::Ordering::Equal => return Err(format!("duplicate label name {name_str:?}")),
                std::cmp::Ordering::Less => sorted = false,
                std::cmp::Ordering::Greater => {}
            }
        }
        prev = Some(name);
        if name_str == METRIC_NAME {
            if value.is_empty() {
                return Err("empty metric name".to_string());
            }
            has_name = true;
        }
        // An empty value means "absent" (Prometheus semantics): dropped, not stored.
        if !value.is_empty() {
            out.push(LabelRef { name: name_str, value: value_str });
        }
    }
    if !has_name {
        return Err(format!("missing metric name (no {METRIC_NAME} label)"));
    }
    if !sorted {
        let mut names: Vec<&[u8]> = pairs.iter().map(|&(name, _)| name).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("duplicate label name {:?}", String::from_utf8_lossy(w[0])));
        }
        out[start..].sort_unstable_by(|a, b| a.name.cmp(b.name));
    }
    Ok(())
}

/// An exemplar's labels from raw pairs: `None` when a name or value is not UTF-8 (empty values are
/// dropped and repeated names keep the last, as `Labels::from_pairs` does).
fn exemplar_labels<'a>(pairs: impl Iterator<Item = (&'a [u8], &'a [u8])>) -> Option<Labels> {
    let mut v = Vec::new();
    for (n, val) in pairs {
        v.push((std::str::from_utf8(n).ok()?, std::str::from_utf8(val).ok()?));
    }
    Some(Labels::from_pairs(v))
}

/// 1.0's `Exemplar { repeated Label labels = 1; double value = 2; int64 timestamp = 3; }`: `Ok(None)`
/// when its labels are not UTF-8.
fn read_exemplar_v1(buf: &[u8]) -> Result<Option<Exemplar>, WireError> {
    let mut r = Reader::new(buf);
    let mut pairs = Vec::new();
    let (mut value, mut t) = (0f64, 0i64);
    while !r.is_empty() {
        match r.key()? {
            (1, wt) => {
                r.expect_wt(1, wt, WT_LEN)?;
                pairs.push(read_label(r.bytes()?)?);
            }
            (2, wt) => {
                r.expect_wt(2, wt, WT_FIXED64)?;
                value = f64::from_bits(r.fixed64()?);
            }
            (3, wt) => {
                r.expect_wt(3, wt, WT_VARINT)?;
                t = r.varint()? as i64;
            }
            (tag, wt) => r.skip(tag, wt)?,
        }
    }
    Ok(exemplar_labels(pairs.into_iter()).map(|labels| Exemplar { labels, value, t }))
}

fn proto_err(message: &'static str) -> impl FnOnce(prost::DecodeError) -> DecodeError {
    move |e| DecodeError::Protobuf { message, reason: e.to_string() }
}

fn wire_err(message: &'static str) -> impl FnOnce(WireError) -> DecodeError {
    move |e| DecodeError::Protobuf { message, reason: e.0 }
}

/// Decodes an (already decompressed) body into a [`WriteRequestRef`] borrowing from `buf`.
pub fn decode_ref<'a>(version: ProtoVersion, buf: &'a [u8], limits: &Limits) -> Result<WriteRequestRef<'a>, DecodeError> {
    match version {
        ProtoVersion::V1 => decode_v1(buf, limits).map_err(wire_err("prometheus.WriteRequest")),
        ProtoVersion::V2 => decode_v2(buf, limits),
    }
}

/// `Sample { double value = 1; int64 timestamp = 2; }`, plus 2.0's `int64 start_timestamp = 3` when
/// `v2` (1.0 has no field 3: there it is an unknown field, skipped whatever its wire type).
/// Returns the sample and its start timestamp (0 = unset, as on the wire).
fn read_sample(buf: &[u8], v2: bool) -> Result<(Sample, i64), WireError> {
    let mut r = Reader::new(buf);
    let (mut t, mut v, mut st) = (0i64, 0u64, 0i64);
    while !r.is_empty() {
        match r.key()? {
            (1, wt) => {
                r.expect_wt(1, wt, WT_FIXED64)?;
                v = r.fixed64()?;
            }
            (2, wt) => {
                r.expect_wt(2, wt, WT_VARINT)?;
                t = r.varint()? as i64;
            }
            (3, wt) if v2 => {
                r.expect_wt(3, wt, WT_VARINT)?;
                st = r.varint()? as i64;
            }
            (tag, wt) => r.skip(tag, wt)?,
        }
    }
    Ok((Sample::new(t, f64::from_bits(v)), st))
}

/// `Label { string name = 1; string value = 2; }`, as bytes.
fn read_label(buf: &[u8]) -> Result<(&[u8], &[u8]), WireError> {
    let mut r = Reader::new(buf);
    let (mut n, mut v): (&[u8], &[u8]) = (b"", b"");
    while !r.is_empty() {
        match r.key()? {
            (1, wt) => {
                r.expect_wt(1, wt, WT_LEN)?;
                n = r.bytes()?;
            }
            (2, wt) => {
                r.expect_wt(2, wt, WT_LEN)?;
                v = r.bytes()?;
            }
            (tag, wt) => r.skip(tag, wt)?,
        }
    }
    Ok((n, v))
}

/// Mirrors Prometheus' `writeHandler.write` (1.0): every series validated on its own.
fn decode_v1<'a>(buf: &'a [u8], limits: &Limits) -> Result<WriteRequestRef<'a>, WireError> {
    let mut out = WriteRequestRef::default();
    let mut pairs: Vec<(&'a [u8], &'a [u8])> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut r = Reader::new(buf);
    while !r.is_empty() {
        match r.key()? {
            (1, wt) => {
                r.expect_wt(1, wt, WT_LEN)?;
                let mut ts = Reader::new(r.bytes()?);
                pairs.clear();
                let samples_start = out.samples.len();
                let hists_start = out.hists.len();
                let exs_start = out.exs.len();
                let mut bad_hists = (0u64, None);
                let (mut histograms, mut exemplars) = (0usize, 0usize);
                while !ts.is_empty() {
                    match ts.key()? {
                        (1, wt) => {
                            ts.expect_wt(1, wt, WT_LEN)?;
                            pairs.push(read_label(ts.bytes()?)?);
                        }
                        (2, wt) => {
                            ts.expect_wt(2, wt, WT_LEN)?;
                            out.samples.push(read_sample(ts.bytes()?, false)?.0);
                        }
                        (3, wt) => {
                            ts.expect_wt(3, wt, WT_LEN)?;
                            match read_exemplar_v1(ts.bytes()?)? {
                                Some(e) => out.exs.push(e),
                                None => out.unreadable_exemplars += 1,
                            }
                            exemplars += 1;
                        }
                        (4, wt) => {
                            ts.expect_wt(4, wt, WT_LEN)?;
                            out.push_histogram(read_histogram(ts.bytes()?, false)?, &mut bad_hists);
                            histograms += 1;
                        }
                        (tag, wt) => ts.skip(tag, wt)?,
                    }
                }
                out.finish_series(&pairs, (samples_start, hists_start, exs_start), (histograms, exemplars, false), None, bad_hists, limits);
            }
            (3, wt) => {
                r.expect_wt(3, wt, WT_LEN)?;
                let mut m = Reader::new(r.bytes()?);
                let (mut kind, mut name, mut help, mut unit): (i32, &[u8], &[u8], &[u8]) = (0, b"", b"", b"");
                while !m.is_empty() {
                    match m.key()? {
                        (1, wt) => {
                            m.expect_wt(1, wt, WT_VARINT)?;
                            kind = m.varint()? as i32;
                        }
                        (2, wt) => {
                            m.expect_wt(2, wt, WT_LEN)?;
                            name = m.bytes()?;
                        }
                        (4, wt) => {
                            m.expect_wt(4, wt, WT_LEN)?;
                            help = m.bytes()?;
                        }
                        (5, wt) => {
                            m.expect_wt(5, wt, WT_LEN)?;
                            unit = m.bytes()?;
                        }
                        (tag, wt) => m.skip(tag, wt)?,
                    }
                }
                let (Ok(n), Ok(h), Ok(u)) = (std::str::from_utf8(name), std::str::from_utf8(help), std::str::from_utf8(unit))
                else {
                    out.invalid_metadata.push(format!("metadata for {:?}: invalid UTF-8", String::from_utf8_lossy(name)));
                    continue;
                };
                let md = Metadata {
                    metric_family_name: n.to_owned(),
                    kind: MetricType::from_wire(kind),
                    help: h.to_owned(),
                    unit: u.to_owned(),
                };
                if seen.insert(md.clone()) {
                    out.metadata.push(md);
                }
            }
            (tag, wt) => r.skip(tag, wt)?,
        }
    }
    Ok(out)
}

/// v2 metadata fields, merged across occurrences as protobuf merges a message field.
#[derive(Default, Clone, Copy)]
struct MetaRefs {
    kind: i32,
    help_ref: u32,
    unit_ref: u32,
}

/// Mirrors Prometheus' `writeHandler.writeV2` / `appendV2` (2.0).
fn decode_v2<'a>(buf: &'a [u8], limits: &Limits) -> Result<WriteRequestRef<'a>, DecodeError> {
    const MSG: &str = "io.prometheus.write.v2.Request";
    let werr = |e: WireError| DecodeError::Protobuf { message: MSG, reason: e.0 };
    // Pass 1: the symbol table and the series bodies (fields may come in any order).
    let mut symbols: Vec<&'a [u8]> = Vec::new();
    let mut bodies: Vec<&'a [u8]> = Vec::new();
    let mut r = Reader::new(buf);
    while !r.is_empty() {
        match r.key().map_err(werr)? {
            (4, wt) => {
                r.expect_wt(4, wt, WT_LEN).map_err(werr)?;
                symbols.push(r.bytes().map_err(werr)?);
            }
            (5, wt) => {
                r.expect_wt(5, wt, WT_LEN).map_err(werr)?;
                bodies.push(r.bytes().map_err(werr)?);
            }
            (tag, wt) => r.skip(tag, wt).map_err(werr)?,
        }
    }
    if let Some(first) = symbols.first()
        && !first.is_empty()
    {
        return Err(DecodeError::Symbols(format!("symbols[0] must be the empty string, got {:?}", shorten(first))));
    }
    if symbols.is_empty() && !bodies.is_empty() {
        return Err(DecodeError::Symbols("series present but the symbol table is empty".to_string()));
    }
    let nsym = symbols.len();
    let sym = |r: u32| -> Option<&'a [u8]> { symbols.get(r as usize).copied() };
    // Pass 2: every series on its own; a structural error still fails the whole body.
    let mut out = WriteRequestRef::default();
    // Metadata travels with every series in 2.0 (most senders repeat it per series): deduplicated on
    // borrowed text, so a repeat costs a comparison with the previous one or one hash, never an allocation.
    let mut seen: std::collections::HashSet<(&'a str, i32, &'a str, &'a str)> = std::collections::HashSet::new();
    let mut last_md: Option<(&'a str, i32, &'a str, &'a str)> = None;
    let mut refs: Vec<u32> = Vec::new();
    let mut ex_refs: Vec<u32> = Vec::new();
    let mut pairs: Vec<(&'a [u8], &'a [u8])> = Vec::new();
    for body in bodies {
        refs.clear();
        let samples_start = out.samples.len();
        let hists_start = out.hists.len();
        let exs_start = out.exs.len();
        let mut bad_hists = (0u64, None);
        let (mut histograms, mut exemplars) = (0usize, 0usize);
        let mut meta: Option<MetaRefs> = None;
        let mut has_st = false;
        let mut problem: Option<String> = None;
        let mut ts = Reader::new(body);
        while !ts.is_empty() {
            match ts.key().map_err(werr)? {
                (1, wt) => read_u32s(&mut ts, 1, wt, &mut refs).map_err(werr)?,
                (2, wt) => {
                    ts.expect_wt(2, wt, WT_LEN).map_err(werr)?;
                    let (s, st) = read_sample(ts.bytes().map_err(werr)?, true).map_err(werr)?;
                    out.push_sample(s, st, &mut has_st);
                }
                (3, wt) => {
                    ts.expect_wt(3, wt, WT_LEN).map_err(werr)?;
                    out.push_histogram(read_histogram(ts.bytes().map_err(werr)?, true).map_err(werr)?, &mut bad_hists);
                    histograms += 1;
                }
                (4, wt) => {
                    ts.expect_wt(4, wt, WT_LEN).map_err(werr)?;
                    let mut ex = Reader::new(ts.bytes().map_err(werr)?);
                    ex_refs.clear();
                    let (mut value, mut t) = (0f64, 0i64);
                    while !ex.is_empty() {
                        match ex.key().map_err(werr)? {
                            (1, wt) => read_u32s(&mut ex, 1, wt, &mut ex_refs).map_err(werr)?,
                            (2, wt) => {
                                ex.expect_wt(2, wt, WT_FIXED64).map_err(werr)?;
                                value = f64::from_bits(ex.fixed64().map_err(werr)?);
                            }
                            (3, wt) => {
                                ex.expect_wt(3, wt, WT_VARINT).map_err(werr)?;
                                t = ex.varint().map_err(werr)? as i64;
                            }
                            (tag, wt) => ex.skip(tag, wt).map_err(werr)?,
                        }
                    }
                    exemplars += 1;
                    if ex_refs.len().is_multiple_of(2) && ex_refs.iter().all(|&r| (r as usize) < nsym) {
                        let pairs = ex_refs.chunks_exact(2).map(|p| (sym(p[0]).unwrap_or(b""), sym(p[1]).unwrap_or(b"")));
                        match exemplar_labels(pairs) {
                            Some(labels) => out.exs.push(Exemplar { labels, value, t }),
                            None => out.unreadable_exemplars += 1,
                        }
                    }
                    if problem.is_none() {
                        if !ex_refs.len().is_multiple_of(2) {
                            problem = Some(format!("exemplar labels_refs has odd length {}", ex_refs.len()));
                        } else if let Some(&bad) = ex_refs.iter().find(|&&r| r as usize >= nsym) {
                            problem = Some(format!("exemplar label symbol ref {bad} out of range ({nsym} symbols)"));
                        }
                    }
                }
                (5, wt) => {
                    ts.expect_wt(5, wt, WT_LEN).map_err(werr)?;
                    let m = meta.get_or_insert_with(MetaRefs::default);
                    let mut mr = Reader::new(ts.bytes().map_err(werr)?);
                    while !mr.is_empty() {
                        match mr.key().map_err(werr)? {
                            (1, wt) => {
                                mr.expect_wt(1, wt, WT_VARINT).map_err(werr)?;
                                m.kind = mr.varint().map_err(werr)? as i32;
                            }
                            (3, wt) => {
                                mr.expect_wt(3, wt, WT_VARINT).map_err(werr)?;
                                m.help_ref = mr.varint().map_err(werr)? as u32;
                            }
                            (4, wt) => {
                                mr.expect_wt(4, wt, WT_VARINT).map_err(werr)?;
                                m.unit_ref = mr.varint().map_err(werr)? as u32;
                            }
                            (tag, wt) => mr.skip(tag, wt).map_err(werr)?,
                        }
                    }
                }
                // Field 6 (the experimental per-series `created_timestamp`) is `reserved` in the final
                // 2.0 proto and Prometheus' `appendV2` no longer reads it: skipped like any unknown field.
                (tag, wt) => ts.skip(tag, wt).map_err(werr)?,
            }
        }
        // Label references first (their problems name the series best), then exemplars, metadata.
        pairs.clear();
        let label_problem = if !refs.len().is_multiple_of(2) {
            Some(format!("labels_refs has odd length {}", refs.len()))
        } else if let Some(&bad) = refs.iter().find(|&&r| r as usize >= nsym) {
            Some(format!("label symbol ref {bad} out of range ({nsym} symbols)"))
        } else {
            None
        };
        for p in refs.chunks_exact(2) {
            pairs.push((sym(p[0]).unwrap_or(b"?"), sym(p[1]).unwrap_or(b"?")));
        }
        let mut md_text: Option<(&'a str, &'a str, i32)> = None;
        let problem = label_problem.or(problem).or_else(|| {
            let m = meta?;
            let Some(help) = sym(m.help_ref) else {
                return Some(format!("metadata help_ref {} out of range ({nsym} symbols)", m.help_ref));
            };
            let Some(unit) = sym(m.unit_ref) else {
                return Some(format!("metadata unit_ref {} out of range ({nsym} symbols)", m.unit_ref));
            };
            let Ok(help) = std::str::from_utf8(help) else {
                return Some("invalid UTF-8 in metadata help".to_string());
            };
            let Ok(unit) = std::str::from_utf8(unit) else {
                return Some("invalid UTF-8 in metadata unit".to_string());
            };
            md_text = Some((help, unit, m.kind));
            None
        });
        if out.finish_series(&pairs, (samples_start, hists_start, exs_start), (histograms, exemplars, has_st), problem, bad_hists, limits)
            && let Some((help, unit, kind)) = md_text
        {
            let kind = MetricType::from_wire(kind);
            // A zero Metadata (type UNSPECIFIED, no help, no unit) is what senders send when they
            // know nothing: not worth storing.
            if !(kind == MetricType::Unknown && help.is_empty() && unit.is_empty()) {
                let key = (out.last_metric_name(), kind.to_wire(), help, unit);
                if last_md != Some(key) {
                    last_md = Some(key);
                    if seen.insert(key) {
                        out.metadata.push(Metadata {
                            metric_family_name: key.0.to_owned(),
                            kind,
                            help: help.to_owned(),
                            unit: unit.to_owned(),
                        });
                    }
                }
            }
        }
    }
    Ok(out)
}

// ---------------------------------------------------------------------------------------------------
// Encoding (senders). Protobuf written by hand from borrowed data; checked against prost in the tests.

fn put_uvarint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn uvarint_len(v: u64) -> usize {
    // 1 byte per started group of 7 bits; 0 takes one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

/// Each histogram's `prometheus.Histogram` message body; with `v2`, its start timestamp too.
fn encode_histogram_bodies(hists: &[HistogramSample], v2: bool) -> Vec<Vec<u8>> {
    hists
        .iter()
        .map(|h| {
            let mut m = crate::histogram_wire::to_prompb(h.t, &h.h);
            if v2 {
                m.start_timestamp = h.st;
            }
            m.encode_to_vec()
        })
        .collect()
}

/// Field key: `tag << 3 | wire_type`.
fn put_key(out: &mut Vec<u8>, tag: u32, wire_type: u8) {
    put_uvarint(out, ((tag as u64) << 3) | wire_type as u64);
}


fn len_field_len(tag: u32, len: usize) -> usize {
    uvarint_len(((tag as u64) << 3) | 2) + uvarint_len(len as u64) + len
}

fn put_bytes_field(out: &mut Vec<u8>, tag: u32, b: &[u8]) {
    put_key(out, tag, WT_LEN);
    put_uvarint(out, b.len() as u64);
    out.extend_from_slice(b);
}

/// Encoded length of a `Sample` message body (`value` double, `timestamp` int64, 2.0's
/// `start_timestamp` int64; zero fields omitted, as proto3 encoders do, so `st == 0` is "unset").
fn sample_body_len(s: &Sample, st: i64) -> usize {
    let mut n = 0;
    if s.v.to_bits() != 0 {
        n += 1 + 8;
    }
    if s.t != 0 {
        n += 1 + uvarint_len(s.t as u64);
    }
    if st != 0 {
        n += 1 + uvarint_len(st as u64);
    }
    n
}

fn put_sample(out: &mut Vec<u8>, tag: u32, s: &Sample, st: i64) {
    put_key(out, tag, WT_LEN);
    put_uvarint(out, sample_body_len(s, st) as u64);
    if s.v.to_bits() != 0 {
        put_key(out, 1, WT_FIXED64);
        out.extend_from_slice(&s.v.to_le_bytes());
    }
    if s.t != 0 {
        put_key(out, 2, WT_VARINT);
        put_uvarint(out, s.t as u64);
    }
    if st != 0 {
        put_key(out, 3, WT_VARINT);
        put_uvarint(out, st as u64);
    }
}

fn label_body_len(l: tessera_model::LabelRef<'_>) -> usize {
    let mut n = 0;
    if !l.name.is_empty() {
        n += len_field_len(1, l.name.len());
    }
    if !l.value.is_empty() {
        n += len_field_len(2, l.value.len());
    }
    n
}

/// Builds a remote-write 1.0 `prometheus.WriteRequest` incrementally (series, then metadata). The bytes
/// are exactly what prost (and Go's generated code) would write for the same message.
#[derive(Debug, Default, Clone)]
pub struct V1Builder {
    buf: Vec<u8>,
    metadata: Vec<u8>,
    series: usize,
    samples: usize,
}

impl V1Builder {
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends one `TimeSeries` with float samples.
    pub fn add_series(&mut self, labels: &Labels, samples: &[Sample]) {
        self.add_series_with_histograms(labels, samples, &[]);
    }

    /// Appends one `TimeSeries` with float and native-histogram samples.
    pub fn add_series_with_histograms(&mut self, labels: &Labels, samples: &[Sample], hists: &[HistogramSample]) {
        self.add_series_full(labels, samples, hists, &[]);
    }

    /// Appends one `TimeSeries` with float samples, native histograms and exemplars.
    pub fn add_series_full(&mut self, labels: &Labels, samples: &[Sample], hists: &[HistogramSample], exemplars: &[Exemplar]) {
        let hist_bodies = encode_histogram_bodies(hists, false);
        let ex_bodies: Vec<Vec<u8>> = exemplars
            .iter()
            .map(|e| {
                prompb::Exemplar {
                    labels: e.labels.iter().map(|l| prompb::Label { name: l.name.to_string(), value: l.value.to_string() }).collect(),
                    value: e.value,
                    timestamp: e.t,
                }
                .encode_to_vec()
            })
            .collect();
        let labels_len: usize = labels.iter().map(|l| len_field_len(1, label_body_len(l))).sum();
        let samples_len: usize = samples.iter().map(|s| len_field_len(2, sample_body_len(s, 0))).sum();
        let hists_len: usize = hist_bodies.iter().map(|h| len_field_len(4, h.len())).sum();
        let ex_len: usize = ex_bodies.iter().map(|h| len_field_len(3, h.len())).sum();
        put_key(&mut self.buf, 1, WT_LEN);
        put_uvarint(&mut self.buf, (labels_len + samples_len + hists_len + ex_len) as u64);
        for l in labels {
            put_key(&mut self.buf, 1, WT_LEN);
            put_uvarint(&mut self.buf, label_body_len(l) as u64);
            if !l.name.is_empty() {
                put_bytes_field(&mut self.buf, 1, l.name.as_bytes());
            }
            if !l.value.is_empty() {
                put_bytes_field(&mut self.buf, 2, l.value.as_bytes());
            }
        }
        for s in samples {
            put_sample(&mut self.buf, 2, s, 0);
        }
        for e in &ex_bodies {
            put_bytes_field(&mut self.buf, 3, e);
        }
        for h in &hist_bodies {
            put_bytes_field(&mut self.buf, 4, h);
        }
        self.series += 1;
        self.samples += samples.len();
    }

    /// Appends one `MetricMetadata`.
    pub fn add_metadata(&mut self, md: &Metadata) {
        let t = md.kind.to_wire();
        let mut body = 0;
        if t != 0 {
            body += 1 + uvarint_len(t as u64);
        }
        for (tag, s) in [(2, &md.metric_family_name), (4, &md.help), (5, &md.unit)] {
            if !s.is_empty() {
                body += len_field_len(tag, s.len());
            }
        }
        let m = &mut self.metadata;
        put_key(m, 3, WT_LEN);
        put_uvarint(m, body as u64);
        if t != 0 {
            put_key(m, 1, WT_VARINT);
            put_uvarint(m, t as u64);
        }
        for (tag, s) in [(2, &md.metric_family_name), (4, &md.help), (5, &md.unit)] {
            if !s.is_empty() {
                put_bytes_field(m, tag, s.as_bytes());
            }
        }
    }

    pub fn series(&self) -> usize {
        self.series
    }

    pub fn samples(&self) -> usize {
        self.samples
    }

    /// The uncompressed protobuf.
    pub fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(&self.metadata);
        self.buf
    }

    /// Empties the builder, keeping its buffers' capacity.
    pub fn clear(&mut self) {
        self.buf.clear();
        self.metadata.clear();
        self.series = 0;
        self.samples = 0;
    }

    /// Writes the request into `out` (cleared first) and clears the builder, for reuse in loops.
    pub fn finish_into(&mut self, out: &mut Vec<u8>) {
        out.clear();
        out.extend_from_slice(&self.buf);
        out.extend_from_slice(&self.metadata);
        self.clear();
    }
}

/// Builds a remote-write 2.0 `io.prometheus.write.v2.Request` incrementally, interning strings into the
/// symbol table (index 0 is the empty string, as the spec requires).
#[derive(Debug, Clone)]
pub struct V2Builder {
    symbols: Vec<String>,
    index: HashMap<String, u32>,
    series_buf: Vec<u8>,
    refs: Vec<u32>,
    series: usize,
    samples: usize,
}

impl Default for V2Builder {
    fn default() -> Self {
        Self::new()
    }
}

impl V2Builder {
    pub fn new() -> Self {
        let mut index = HashMap::new();
        index.insert(String::new(), 0);
        V2Builder { symbols: vec![String::new()], index, series_buf: Vec::new(), refs: Vec::new(), series: 0, samples: 0 }
    }

    fn intern(&mut self, s: &str) -> u32 {
        if let Some(&r) = self.index.get(s) {
            return r;
        }
        let r = u32::try_from(self.symbols.len()).expect("fewer than 2^32 symbols in one request");
        self.symbols.push(s.to_owned());
        self.index.insert(s.to_owned(), r);
        r
    }

    /// Appends one `TimeSeries`; `metadata` (if any) travels with it, as 2.0 senders do.
    /// `start_timestamps` is parallel to `samples` (0 = unset) or empty for none.
    pub fn add_series(&mut self, labels: &Labels, samples: &[Sample], metadata: Option<&Metadata>, start_timestamps: &[i64]) {
        self.add_series_with_histograms(labels, samples, metadata, start_timestamps, &[]);
    }

    /// [`Self::add_series`] with native-histogram samples too.
    pub fn add_series_with_histograms(
        &mut self,
        labels: &Labels,
        samples: &[Sample],
        metadata: Option<&Metadata>,
        start_timestamps: &[i64],
        hists: &[HistogramSample],
    ) {
        self.add_series_full(labels, samples, metadata, start_timestamps, hists, &[]);
    }

    /// [`Self::add_series`] with native histograms and exemplars too.
    pub fn add_series_full(
        &mut self,
        labels: &Labels,
        samples: &[Sample],
        metadata: Option<&Metadata>,
        start_timestamps: &[i64],
        hists: &[HistogramSample],
        exemplars: &[Exemplar],
    ) {
        let hist_bodies = encode_histogram_bodies(hists, true);
        let mut ex_bodies: Vec<Vec<u8>> = Vec::with_capacity(exemplars.len());
        for e in exemplars {
            let mut refs = Vec::new();
            for l in e.labels.iter() {
                refs.push(self.intern(l.name));
                refs.push(self.intern(l.value));
            }
            ex_bodies.push(prompb::v2::Exemplar { labels_refs: refs, value: e.value, timestamp: e.t }.encode_to_vec());
        }
        let st = |i: usize| start_timestamps.get(i).copied().unwrap_or(0);
        let mut refs = std::mem::take(&mut self.refs);
        refs.clear();
        for l in labels {
            refs.push(self.intern(l.name));
            refs.push(self.intern(l.value));
        }
        let md = metadata.map(|m| (m.kind.to_wire(), self.intern(&m.help), self.intern(&m.unit)));
        let refs_body: usize = refs.iter().map(|&r| uvarint_len(r as u64)).sum();
        let mut body = 0;
        if !refs.is_empty() {
            body += len_field_len(1, refs_body);
        }
        body += samples.iter().enumerate().map(|(i, s)| len_field_len(2, sample_body_len(s, st(i)))).sum::<usize>();
        body += hist_bodies.iter().map(|h| len_field_len(3, h.len())).sum::<usize>();
        body += ex_bodies.iter().map(|h| len_field_len(4, h.len())).sum::<usize>();
        let md_body = md.map(|(t, h, u)| {
            (if t != 0 { 1 + uvarint_len(t as u64) } else { 0 })
                + (if h != 0 { 1 + uvarint_len(h as u64) } else { 0 })
                + (if u != 0 { 1 + uvarint_len(u as u64) } else { 0 })
        });
        if let Some(n) = md_body {
            body += len_field_len(5, n);
        }
        let b = &mut self.series_buf;
        put_key(b, 5, WT_LEN);
        put_uvarint(b, body as u64);
        if !refs.is_empty() {
            put_key(b, 1, WT_LEN);
            put_uvarint(b, refs_body as u64);
            for &r in &refs {
                put_uvarint(b, r as u64);
            }
        }
        for (i, s) in samples.iter().enumerate() {
            put_sample(b, 2, s, st(i));
        }
        for h in &hist_bodies {
            put_bytes_field(b, 3, h);
        }
        for e in &ex_bodies {
            put_bytes_field(b, 4, e);
        }
        if let (Some((t, h, u)), Some(n)) = (md, md_body) {
            put_key(b, 5, WT_LEN);
            put_uvarint(b, n as u64);
            for (tag, v) in [(1u32, t as u32), (3, h), (4, u)] {
                if v != 0 {
                    put_key(b, tag, WT_VARINT);
                    put_uvarint(b, v as u64);
                }
            }
        }
        self.refs = refs;
        self.series += 1;
        self.samples += samples.len();
    }

    pub fn series(&self) -> usize {
        self.series
    }

    pub fn samples(&self) -> usize {
        self.samples
    }

    /// Writes the request (symbols first, then series, as upstream's field order has it) into `out`
    /// (cleared first) and resets the builder, keeping capacity.
    pub fn finish_into(&mut self, out: &mut Vec<u8>) {
        out.clear();
        for s in &self.symbols {
            // Repeated strings are written even when empty (symbols[0] must be present).
            put_bytes_field(out, 4, s.as_bytes());
        }
        out.extend_from_slice(&self.series_buf);
        self.symbols.truncate(1);
        self.index.clear();
        self.index.insert(String::new(), 0);
        self.series_buf.clear();
        self.series = 0;
        self.samples = 0;
    }

    /// The uncompressed protobuf.
    pub fn finish(mut self) -> Vec<u8> {
        let mut out = Vec::new();
        self.finish_into(&mut out);
        out
    }
}

/// Encodes a 1.0 request (uncompressed protobuf).
pub fn encode_v1(series: &[WriteSeries], metadata: &[Metadata]) -> Vec<u8> {
    let mut b = V1Builder::new();
    for s in series {
        b.add_series_full(&s.labels, &s.samples, &s.histogram_samples, &s.exemplar_list);
    }
    for m in metadata {
        b.add_metadata(m);
    }
    b.finish()
}

/// Encodes a 2.0 request (uncompressed protobuf). Each metadata entry travels with the series of its
/// metric family; each sample's start timestamp (if any) goes into its `start_timestamp`.
pub fn encode_v2(series: &[WriteSeries], metadata: &[Metadata]) -> Vec<u8> {
    let mut b = V2Builder::new();
    for s in series {
        let md = metadata.iter().find(|m| m.metric_family_name == s.labels.metric_name());
        b.add_series_full(&s.labels, &s.samples, md, &s.start_timestamps, &s.histogram_samples, &s.exemplar_list);
    }
    b.finish()
}

/// Decodes a 1.0 body with the `String`-typed upstream messages (for tests and tools that want the raw
/// message rather than a validated [`DecodedWrite`]).
pub fn decode_v1_message(buf: &[u8]) -> Result<prompb::WriteRequest, DecodeError> {
    prompb::WriteRequest::decode(buf).map_err(proto_err("prometheus.WriteRequest"))
}

/// Decodes a 2.0 body with the `String`-typed upstream messages.
pub fn decode_v2_message(buf: &[u8]) -> Result<prompb::v2::Request, DecodeError> {
    prompb::v2::Request::decode(buf).map_err(proto_err("io.prometheus.write.v2.Request"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uvarint_len_matches_encoding() {
        for v in [0u64, 1, 127, 128, 16383, 16384, u32::MAX as u64, u64::MAX, 1_700_000_000_000] {
            let mut b = Vec::new();
            put_uvarint(&mut b, v);
            assert_eq!(b.len(), uvarint_len(v), "{v}");
        }
    }

    #[test]
    fn negative_timestamps_encode_as_ten_byte_varints() {
        let s = Sample::new(-1, 1.0);
        let mut b = Vec::new();
        put_sample(&mut b, 2, &s, 0);
        let decoded = prompb::Sample::decode(&b[2..]).expect("decodes");
        assert_eq!(decoded.timestamp, -1);
    }
}
