//! The writer thread: one valid remote-write 2.0 request per round, then one hostile write.
//!
//! Valid requests carry one sample of every series of a fixed set (promql-diff's 69 catalogue series,
//! which the random queries select, then `hostile_soak_gauge` series up to `--series`), all at the
//! round's timestamp (current time, strictly increasing). Series `i` gets the value
//! `i·10⁶ + round + (round mod 4)/4` in round `round`, so every series has its own known values and
//! the read-back can compare exactly. Only samples of requests answered 204 with a matching
//! `X-Prometheus-Remote-Write-Samples-Written` count as acknowledged; anything else is a failure.
//!
//! Hostile writes never touch those series (a 400's partial write would make the read-back ambiguous):
//! they use their own `hostile_soak_*` names. Where a hostile request has valid parts, the number the
//! server says it wrote is checked against what it should have written, and the totals per metric name
//! are counted back at the end too ([`Claimed`]).

use super::{now_ms, snippet, Recorder};
use crate::http::{Client, Response, Url};
use crate::nodegen::Rng;
use crate::promql_diff::data::dataset;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use prost::Message;
use tessera_model::{Labels, Sample};
use tessera_protocol::prompb;
use tessera_protocol::remote_write::{
    compress, V2Builder, CONTENT_TYPE_V1, CONTENT_TYPE_V2, HEADER_SAMPLES_WRITTEN, HEADER_VERSION, VERSION_V1, VERSION_V2,
};

/// A far-future timestamp: a year ahead.
const YEAR_MS: i64 = 365 * 86_400_000;
/// Body of the oversized request: over the server's default 32 MB `--web.max-request-bytes`, within
/// the 4× it still reads and discards (so the answer is a clean 413 on a kept connection).
const OVERSIZE_BYTES: usize = 40 << 20;
/// A label value of exactly the default `--web.remote-write.max-label-value-bytes` (valid)…
const LABEL_VALUE_AT_LIMIT: usize = 16 * 1024;
/// … and one far over it (its series is invalid, the rest of the request written).
const LABEL_VALUE_HUGE: usize = 100 * 1024;

/// Samples the server acknowledged, per series (labels sorted, as the server stores them).
pub type Acknowledged = Vec<(Labels, Vec<Sample>)>;

/// Samples of 400-answered requests the server said it wrote (the header), per metric name, with the
/// first and last timestamp written: the read-back counts them with `count_over_time`.
#[derive(Debug, Default, Clone)]
pub struct Claimed {
    pub by_name: BTreeMap<String, (u64, i64, i64)>,
}

impl Claimed {
    fn add(&mut self, name: &str, n: u64, t_ms: i64) {
        let e = self.by_name.entry(name.to_string()).or_insert((0, t_ms, t_ms));
        e.0 += n;
        e.1 = e.1.min(t_ms);
        e.2 = e.2.max(t_ms);
    }
}

/// The hostile writes, in rotation.
const ROTATION: &[Hostile] = &[
    Hostile::FutureYear,
    Hostile::Garbage,
    Hostile::FutureMax,
    Hostile::Truncated,
    Hostile::WrongType,
    Hostile::SnappyBomb,
    Hostile::V1Unsorted,
    Hostile::HugeLabel,
    Hostile::ProtobufGarbage,
    Hostile::Empty,
    Hostile::WrongType,
    Hostile::BadHistograms,
    Hostile::Oversize,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hostile {
    FutureYear,
    FutureMax,
    Garbage,
    Truncated,
    SnappyBomb,
    V1Unsorted,
    HugeLabel,
    ProtobufGarbage,
    Empty,
    WrongType,
    Oversize,
    Bomb,
    /// Valid and invalid native histograms and over-long exemplars in one request.
    BadHistograms,
}

pub struct Writer {
    client: Client,
    rec: Arc<Recorder>,
    stop: Arc<AtomicBool>,
    rng: Rng,
    slow_after: Duration,
    interval: Duration,
    duration: Duration,
    bomb_series: usize,
    new_series_limit: usize,
    bombs: usize,
    bombs_done: usize,
    series: Vec<Labels>,
    acked: Vec<Vec<Sample>>,
    /// The 1.0 series written with unsorted labels, and its acknowledged samples.
    v1_series: Labels,
    v1_acked: Vec<Sample>,
    pub claimed: Claimed,
    round: u64,
    last_t: i64,
    oversize_turn: u64,
    wrong_type_turn: u64,
    v2: V2Builder,
    raw: Vec<u8>,
    /// The previous request on the connection, named in a connection error's message.
    previous: String,
}

/// The hostile series' names.
const FUTURE: &str = "hostile_soak_future";
const HUGE_OK: &str = "hostile_soak_huge_ok";
const CARD: &str = "hostile_soak_card";

impl Writer {
    pub fn new(args: &super::Args, base: Url, rec: Arc<Recorder>, stop: Arc<AtomicBool>) -> Writer {
        let url = Url { host_port: base.host_port, path: "/api/v1/write".to_string() };
        let mut series: Vec<Labels> = dataset(0).into_iter().map(|(l, _)| l).collect();
        let mut i = 0;
        while series.len() < args.series {
            series.push(Labels::from_pairs([
                ("__name__", "hostile_soak_gauge".to_string()),
                ("job", "soak".to_string()),
                ("i", i.to_string()),
            ]));
            i += 1;
        }
        let n = series.len();
        Writer {
            client: Client::new(url, Duration::from_secs(120)),
            rec,
            stop,
            rng: Rng::new(args.seed ^ 0x7772_6974_6572),
            slow_after: args.slow_after,
            interval: args.write_interval,
            duration: args.duration,
            bomb_series: args.bomb_series,
            new_series_limit: args.new_series_limit,
            bombs: args.bombs,
            bombs_done: 0,
            series,
            acked: vec![Vec::new(); n],
            v1_series: Labels::from_pairs([("__name__", "hostile_soak_v1"), ("alpha", "a"), ("zeta", "z")]),
            v1_acked: Vec::new(),
            claimed: Claimed::default(),
            round: 0,
            last_t: 0,
            oversize_turn: 0,
            wrong_type_turn: 0,
            v2: V2Builder::new(),
            raw: Vec::new(),
            previous: "none".to_string(),
        }
    }

    /// Everything acknowledged so far.
    pub fn acknowledged(&self) -> Acknowledged {
        let mut out: Acknowledged = self.series.iter().cloned().zip(self.acked.iter().cloned()).collect();
        out.push((self.v1_series.clone(), self.v1_acked.clone()));
        out
    }

    pub fn run(&mut self) {
        let started = Instant::now();
        let mut hostile_turn = 0usize;
        while !self.stop.load(Ordering::Relaxed) {
            let round_start = Instant::now();
            let t = now_ms().max(self.last_t + 1);
            self.last_t = t;
            self.valid(t);
            let bomb_due = self.bombs_done < self.bombs
                && started.elapsed().as_secs_f64()
                    >= self.duration.as_secs_f64() * (self.bombs_done + 1) as f64 / (2 * (self.bombs + 1)) as f64;
            let h = if bomb_due {
                Hostile::Bomb
            } else {
                hostile_turn += 1;
                ROTATION[(hostile_turn - 1) % ROTATION.len()]
            };
            self.hostile(h, t);
            self.round += 1;
            while round_start.elapsed() < self.interval && !self.stop.load(Ordering::Relaxed) {
                std::thread::sleep((self.interval.saturating_sub(round_start.elapsed())).min(Duration::from_millis(100)));
            }
        }
    }

    fn value(&self, i: usize) -> f64 {
        i as f64 * 1e6 + self.round as f64 + (self.round % 4) as f64 * 0.25
    }

    fn post(&mut self, kind: &str, what: &str, allowed: &[u16], headers: &[(&str, &str)], body: &[u8]) -> Option<Response> {
        let t0 = Instant::now();
        let r = self.client.post(headers, body);
        let answer = match &r {
            Ok(resp) => format!("{} (answered {}, Connection: {})", kind, resp.status, resp.header("connection").unwrap_or("-")),
            Err(_) => format!("{kind} (no answer)"),
        };
        let what = format!("{what}; the request before on this connection: {}", std::mem::replace(&mut self.previous, answer));
        self.rec.check(kind, &what, allowed, self.slow_after, t0.elapsed(), r)
    }

    fn post_v2(&mut self, kind: &str, what: &str, allowed: &[u16], body: &[u8]) -> Option<Response> {
        let headers = [("Content-Type", CONTENT_TYPE_V2), ("Content-Encoding", "snappy"), (HEADER_VERSION, VERSION_V2)];
        self.post(kind, what, allowed, &headers, body)
    }

    /// The samples-written header of a 2.0 answer (missing: a failure, counted as 0).
    fn written(&self, kind: &str, resp: &Response) -> u64 {
        match resp.header(HEADER_SAMPLES_WRITTEN).and_then(|v| v.parse::<u64>().ok()) {
            Some(n) => n,
            None => {
                self.rec.fail(format!("{kind}: answer {} without a valid {HEADER_SAMPLES_WRITTEN} header", resp.status));
                0
            }
        }
    }

    fn valid(&mut self, t: i64) {
        for i in 0..self.series.len() {
            let s = Sample::new(t, self.value(i));
            self.v2.add_series(&self.series[i], std::slice::from_ref(&s), None, &[]);
        }
        self.v2.finish_into(&mut self.raw);
        let body = compress(&self.raw);
        let n = self.series.len() as u64;
        let what = format!("round {} at t={t}", self.round);
        let Some(resp) = self.post_v2("write-valid", &what, &[204], &body) else { return };
        let written = self.written("write-valid", &resp);
        if resp.status != 204 {
            return;
        }
        if written != n {
            self.rec.fail(format!("write-valid: {what}: 204 but {written} of {n} samples written"));
            return;
        }
        for i in 0..self.series.len() {
            let v = self.value(i);
            self.acked[i].push(Sample::new(t, v));
        }
    }

    /// Sends one hostile write and checks the answer.
    fn hostile(&mut self, h: Hostile, t: i64) {
        match h {
            Hostile::FutureYear | Hostile::FutureMax => {
                let (far, kind) = if h == Hostile::FutureYear { (t + YEAR_MS, "write-future-1y") } else { (i64::MAX, "write-future-i64max") };
                for i in 0..5 {
                    let l = Labels::from_pairs([("__name__", FUTURE.to_string()), ("i", i.to_string())]);
                    self.v2.add_series(&l, &[Sample::new(t, i as f64), Sample::new(far, 1.0)], None, &[]);
                }
                self.v2.finish_into(&mut self.raw);
                let body = compress(&self.raw);
                if let Some(resp) = self.post_v2(kind, &format!("5 series with a sample at t={t} and one at {far}"), &[400], &body) {
                    let written = self.written(kind, &resp);
                    self.expect_written(kind, &resp, written, 5, "too far in the future");
                    self.claimed.add(FUTURE, written, t);
                }
            }
            Hostile::Bomb => {
                let generation = self.bombs_done;
                self.bombs_done += 1;
                let gen_s = generation.to_string();
                for i in 0..self.bomb_series {
                    let l = Labels::from_pairs([("__name__", CARD), ("gen", gen_s.as_str()), ("i", i.to_string().as_str())]);
                    self.v2.add_series(&l, &[Sample::new(t, 1.0)], None, &[]);
                }
                self.v2.finish_into(&mut self.raw);
                let body = compress(&self.raw);
                let over = self.bomb_series > self.new_series_limit;
                let want = self.bomb_series.min(self.new_series_limit) as u64;
                let allowed: &[u16] = if over { &[400] } else { &[204] };
                let what = format!("{} new series in one request ({} bytes)", self.bomb_series, body.len());
                if let Some(resp) = self.post_v2("write-cardinality-bomb", &what, allowed, &body) {
                    let written = self.written("write-cardinality-bomb", &resp);
                    let says = if over { "per-request limit of new series exceeded" } else { "" };
                    self.expect_written("write-cardinality-bomb", &resp, written, want, says);
                    self.claimed.add(CARD, written, t);
                }
            }
            Hostile::Garbage => {
                let n = 1 + (self.rng.next_u64() % 4096) as usize;
                let body: Vec<u8> = (0..n).map(|_| self.rng.next_u64() as u8).collect();
                self.post_v2("write-garbage", &format!("{n} random bytes"), &[400], &body);
            }
            Hostile::Truncated => {
                self.v2.add_series(&Labels::from_pairs([("__name__", "hostile_soak_truncated")]), &[Sample::new(t, 1.0)], None, &[]);
                for s in self.series.iter().take(50) {
                    self.v2.add_series(s, &[Sample::new(t, 1.0)], None, &[]);
                }
                self.v2.finish_into(&mut self.raw);
                let full = compress(&self.raw);
                let cut = 1 + (self.rng.next_u64() % (full.len() as u64 - 1)) as usize;
                self.post_v2("write-truncated", &format!("a valid request cut to {cut} of {} bytes", full.len()), &[400], &full[..cut]);
            }
            Hostile::SnappyBomb => {
                // A snappy block whose varint header claims 1 GiB, followed by a few literal bytes.
                let mut body = Vec::new();
                let mut len: u64 = 1 << 30;
                while len >= 0x80 {
                    body.push((len as u8) | 0x80);
                    len >>= 7;
                }
                body.push(len as u8);
                body.extend_from_slice(&[0x0c, b'h', b'o', b's', b't', b'i', b'l', b'e']);
                self.post_v2("write-snappy-bomb", "snappy header claiming 1 GiB", &[400], &body);
            }
            Hostile::ProtobufGarbage => {
                let n = 1 + (self.rng.next_u64() % 2048) as usize;
                let raw: Vec<u8> = (0..n).map(|_| self.rng.next_u64() as u8).collect();
                // Random protobuf could, in theory, be a valid (empty) request.
                self.post_v2("write-protobuf-garbage", &format!("{n} random bytes, snappy-compressed"), &[400, 204], &compress(&raw));
            }
            Hostile::Empty => {
                self.post_v2("write-empty", "empty body", &[400, 204], &[]);
            }
            Hostile::BadHistograms => {
                use tessera_model::histogram::{Histogram, Span};
                use tessera_model::{Exemplar, HistogramSample, HistogramValue};
                let good = Histogram {
                    count: 3,
                    sum: 1.5,
                    positive_spans: vec![Span::new(0, 2)],
                    positive_buckets: vec![1, 1],
                    ..Histogram::default()
                };
                // Count 9 is not the sum of the buckets; a span of 4 billion buckets with 2 buckets;
                // an unknown schema.
                let bad = [
                    Histogram { count: 9, ..good.clone() },
                    Histogram { positive_spans: vec![Span::new(i32::MAX, u32::MAX)], ..good.clone() },
                    Histogram { schema: 99, ..good.clone() },
                ];
                let mut hs = vec![HistogramSample::new(t, HistogramValue::Int(good))];
                hs.extend(bad.into_iter().enumerate().map(|(i, h)| HistogramSample::new(t + 1 + i as i64, HistogramValue::Int(h))));
                let long = Exemplar { labels: Labels::from_pairs([("trace_id", "x".repeat(5000))]), value: 1.0, t };
                let l = Labels::from_pairs([("__name__", "hostile_soak_histogram".to_string()), ("round", self.round.to_string())]);
                self.v2.add_series_full(&l, &[], None, &[], &hs, &[long]);
                self.v2.finish_into(&mut self.raw);
                let body = compress(&self.raw);
                let kind = "write-bad-histograms";
                if let Some(resp) = self.post_v2(kind, "1 valid and 3 invalid histograms, a 5000-rune exemplar", &[400], &body) {
                    let h = resp.header("X-Prometheus-Remote-Write-Histograms-Written").and_then(|v| v.parse::<u64>().ok());
                    if h != Some(1) {
                        self.rec.fail(format!("{kind}: histograms written {h:?}, expected 1: {}", snippet(&resp.body)));
                    }
                    self.expect_written(kind, &resp, 0, 0, "invalid histograms: 3 histogram samples were not written");
                }
            }
            Hostile::V1Unsorted => {
                // zeta, __name__, alpha: not sorted (so built with prost: `Labels` are sorted by
                // construction); the server sorts them.
                let label = |n: &str, v: &str| prompb::Label { name: n.into(), value: v.into() };
                let s = Sample::new(t, self.round as f64);
                let req = prompb::WriteRequest {
                    timeseries: vec![prompb::TimeSeries {
                        labels: vec![label("zeta", "z"), label("__name__", "hostile_soak_v1"), label("alpha", "a")],
                        samples: vec![prompb::Sample { timestamp: s.t, value: s.v }],
                        ..Default::default()
                    }],
                    ..Default::default()
                };
                let body = compress(&req.encode_to_vec());
                let headers = [("Content-Type", CONTENT_TYPE_V1), ("Content-Encoding", "snappy"), (HEADER_VERSION, VERSION_V1)];
                if let Some(resp) = self.post("write-v1-unsorted", &format!("1.0, labels zeta,__name__,alpha at t={t}"), &[204], &headers, &body)
                    && resp.status == 204
                {
                    self.v1_acked.push(s);
                }
            }
            Hostile::HugeLabel => {
                let huge = "h".repeat(LABEL_VALUE_HUGE);
                let at_limit = "l".repeat(LABEL_VALUE_AT_LIMIT);
                self.v2.add_series(&Labels::from_pairs([("__name__", "hostile_soak_huge"), ("v", huge.as_str())]), &[Sample::new(t, 1.0)], None, &[]);
                self.v2.add_series(&Labels::from_pairs([("__name__", HUGE_OK), ("v", at_limit.as_str())]), &[Sample::new(t, 1.0)], None, &[]);
                self.v2.add_series(&Labels::from_pairs([("__name__", HUGE_OK), ("v", "short")]), &[Sample::new(t, 2.0)], None, &[]);
                self.v2.finish_into(&mut self.raw);
                let body = compress(&self.raw);
                if let Some(resp) = self.post_v2("write-huge-label", "a 100 KiB label value among 2 valid series", &[400], &body) {
                    let written = self.written("write-huge-label", &resp);
                    self.expect_written("write-huge-label", &resp, written, 2, "");
                    self.claimed.add(HUGE_OK, written, t);
                }
            }
            Hostile::WrongType => {
                self.wrong_type_turn += 1;
                self.v2.add_series(&Labels::from_pairs([("__name__", "hostile_soak_wrong_type")]), &[Sample::new(t, 1.0)], None, &[]);
                self.v2.finish_into(&mut self.raw);
                let body = compress(&self.raw);
                let (ct, ce) = match self.wrong_type_turn % 4 {
                    0 => ("text/plain", "snappy"),
                    1 => ("application/x-protobuf;proto=io.prometheus.write.v3.Request", "snappy"),
                    2 => (CONTENT_TYPE_V2, "gzip"),
                    _ => ("application/json", "snappy"),
                };
                let headers = [("Content-Type", ct), ("Content-Encoding", ce), (HEADER_VERSION, VERSION_V2)];
                self.post("write-wrong-type", &format!("Content-Type {ct}, Content-Encoding {ce}"), &[415], &headers, &body);
            }
            Hostile::Oversize => {
                self.oversize_turn += 1;
                // Every fourth turn only: 40 MiB per try.
                if self.oversize_turn % 4 == 1 {
                    let body = vec![0u8; OVERSIZE_BYTES];
                    self.post_v2("write-oversize", &format!("{OVERSIZE_BYTES}-byte body"), &[413], &body);
                } else {
                    self.hostile(Hostile::Garbage, t);
                }
            }
        }
    }

    /// A partial write: the header says `written`, it should be `want`, and the body should name the reason.
    fn expect_written(&self, kind: &str, resp: &Response, written: u64, want: u64, says: &str) {
        if written != want {
            self.rec.fail(format!("{kind}: {written} samples written, expected {want}: {}", snippet(&resp.body)));
        }
        if !says.is_empty() && !String::from_utf8_lossy(&resp.body).contains(says) {
            self.rec.fail(format!("{kind}: the answer does not say {says:?}: {}", snippet(&resp.body)));
        }
    }
}
