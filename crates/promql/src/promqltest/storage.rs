//! [`MemStorage`]: an in-memory [`Queryable`] for the runner and tests. Series are held as real XOR chunks
//! (at most 120 samples each, like Prometheus' head) and float-histogram chunks (cut where upstream's
//! appender cuts them; with start timestamps, XorSt and FloatHistogramSt chunks), spread over shards by `labels.shard(n)`, so the engine's decode path and its
//! per-shard parallel path are the ones production uses.

use bytes::Bytes;
use std::sync::Arc;
use tessera_model::{
    ChunkEncoding, ChunkRef, Labels, Matcher, Querier, Queryable, Sample, SelectHints, Series, SeriesSet, StorageError,
};

const SAMPLES_PER_CHUNK: usize = 120;

#[derive(Debug, Clone)]
struct MemSeries {
    labels: Labels,
    chunks: Vec<ChunkRef>,
}

/// In-memory storage; build it with [`MemStorage::add_series`], then query it.
#[derive(Debug, Clone)]
pub struct MemStorage {
    /// Per shard, series sorted by labels.
    shards: Arc<Vec<Vec<MemSeries>>>,
}

impl MemStorage {
    pub fn new(shards: usize) -> Self {
        Self { shards: Arc::new(vec![Vec::new(); shards.max(1)]) }
    }

    /// Adds (or extends) a series with samples sorted by time. Samples must be newer than any already
    /// added for the series.
    pub fn add_series(&mut self, labels: Labels, samples: &[Sample]) {
        self.add_series_st(labels, samples, &[]);
    }

    /// [`MemStorage::add_series`] with per-sample start timestamps (`sts` empty, or one per sample with
    /// 0 meaning unknown). A chunk with any start timestamp is stored as [`ChunkEncoding::XorSt`], like
    /// the head stores it; the others stay plain XOR.
    pub fn add_series_st(&mut self, labels: Labels, samples: &[Sample], sts: &[i64]) {
        assert!(sts.is_empty() || sts.len() == samples.len(), "one start timestamp per sample");
        let shards = Arc::make_mut(&mut self.shards);
        let n = shards.len();
        let shard = &mut shards[labels.shard(n)];
        let pos = match shard.binary_search_by(|s| s.labels.cmp(&labels)) {
            Ok(p) => p,
            Err(p) => {
                shard.insert(p, MemSeries { labels, chunks: Vec::new() });
                p
            }
        };
        for (k, c) in samples.chunks(SAMPLES_PER_CHUNK).enumerate() {
            if c.is_empty() {
                continue;
            }
            let st = if sts.is_empty() { &[][..] } else { &sts[k * SAMPLES_PER_CHUNK..k * SAMPLES_PER_CHUNK + c.len()] };
            let (encoding, data) = if st.iter().any(|t| *t != 0) {
                (ChunkEncoding::XorSt, tessera_encoding::encode_xor_st(c, st))
            } else {
                (ChunkEncoding::Xor, tessera_encoding::encode_xor(c))
            };
            shard[pos].chunks.push(ChunkRef {
                mint_ms: c[0].t,
                maxt_ms: c[c.len() - 1].t,
                encoding,
                data: Bytes::from(data),
            });
        }
    }

    /// Adds float histograms (sorted by time, newer than anything already added for the series) as
    /// float-histogram chunks, cut where upstream's appender cuts them (counter resets, layout
    /// changes); the chunks' counter-reset headers are the appender's, so reading them back gives
    /// upstream's hints. A sample that cannot be encoded is refused with the encoder's reason.
    pub fn add_float_histograms(
        &mut self,
        labels: Labels,
        samples: &[(i64, tessera_model::FloatHistogram)],
    ) -> Result<(), String> {
        if samples.is_empty() {
            return Ok(());
        }
        let chunks = tessera_encoding::encode_float_histograms(samples).map_err(|e| e.to_string())?;
        let pos = self.series_pos(labels);
        let shards = Arc::make_mut(&mut self.shards);
        let (shard, p) = pos;
        for data in chunks {
            shards[shard][p].chunks.push(histogram_chunk(ChunkEncoding::FloatHistogram, data));
        }
        Ok(())
    }

    /// [`MemStorage::add_float_histograms`] with per-sample start timestamps (`sts` empty, or one per
    /// sample with 0 meaning unknown): the chunks are cut as without them, and a chunk with any start
    /// timestamp is stored as [`ChunkEncoding::FloatHistogramSt`] (the others stay plain), as
    /// [`MemStorage::add_series_st`] does for floats.
    pub fn add_float_histograms_st(
        &mut self,
        labels: Labels,
        samples: &[(i64, tessera_model::FloatHistogram)],
        sts: &[i64],
    ) -> Result<(), String> {
        assert!(sts.is_empty() || sts.len() == samples.len(), "one start timestamp per sample");
        if sts.iter().all(|t| *t == 0) {
            return self.add_float_histograms(labels, samples);
        }
        // Each chunk with the start timestamps of its samples.
        let mut chunks: Vec<(tessera_encoding::FloatHistogramStEncoder, Vec<i64>)> = Vec::new();
        let mut cur = tessera_encoding::FloatHistogramStEncoder::new();
        let mut cur_sts = Vec::new();
        for ((t, h), &st) in samples.iter().zip(sts) {
            match cur.append(*t, st, h, None).map_err(|e| e.to_string())? {
                tessera_encoding::Appended::NewChunk(next) => {
                    chunks.push((std::mem::replace(&mut cur, next), std::mem::replace(&mut cur_sts, vec![st])));
                }
                _ => cur_sts.push(st),
            }
        }
        if cur.num_samples() > 0 {
            chunks.push((cur, cur_sts));
        }
        let (shard, p) = self.series_pos(labels);
        let shards = Arc::make_mut(&mut self.shards);
        for (enc, sts) in chunks {
            let (inner, _) = tessera_encoding::split_st_chunk(enc.bytes()).map_err(|e| e.to_string())?;
            let (encoding, data) = if sts.iter().any(|t| *t != 0) {
                (ChunkEncoding::FloatHistogramSt, enc.bytes().to_vec())
            } else {
                (ChunkEncoding::FloatHistogram, inner.to_vec())
            };
            shards[shard][p].chunks.push(histogram_chunk(encoding, data));
        }
        Ok(())
    }

    /// Adds ready-made chunks to a series (after any it has; sorted by time, newer than those), whatever
    /// their encoding: for tests that build chunks with the encoders directly.
    pub fn add_chunks(&mut self, labels: Labels, chunks: Vec<ChunkRef>) {
        let (shard, p) = self.series_pos(labels);
        let shards = Arc::make_mut(&mut self.shards);
        shards[shard][p].chunks.extend(chunks);
    }

    /// [`MemStorage::add_float_histograms`] for integer histograms: integer-histogram chunks (encoding
    /// 2), as Prometheus' head writes scraped histograms.
    pub fn add_histograms(&mut self, labels: Labels, samples: &[(i64, tessera_model::Histogram)]) -> Result<(), String> {
        if samples.is_empty() {
            return Ok(());
        }
        let chunks = tessera_encoding::encode_histograms(samples).map_err(|e| e.to_string())?;
        let (shard, p) = self.series_pos(labels);
        let shards = Arc::make_mut(&mut self.shards);
        for data in chunks {
            shards[shard][p].chunks.push(histogram_chunk(ChunkEncoding::Histogram, data));
        }
        Ok(())
    }

    /// The (shard, index) of a series, inserting it when new.
    fn series_pos(&mut self, labels: Labels) -> (usize, usize) {
        let shards = Arc::make_mut(&mut self.shards);
        let n = shards.len();
        let si = labels.shard(n);
        let shard = &mut shards[si];
        let pos = match shard.binary_search_by(|s| s.labels.cmp(&labels)) {
            Ok(p) => p,
            Err(p) => {
                shard.insert(p, MemSeries { labels, chunks: Vec::new() });
                p
            }
        };
        (si, pos)
    }

    pub fn series_count(&self) -> usize {
        self.shards.iter().map(|s| s.len()).sum()
    }
}

/// A histogram chunk (any histogram encoding) with its first and last sample times as bounds.
fn histogram_chunk(encoding: ChunkEncoding, data: Vec<u8>) -> ChunkRef {
    let mut c = ChunkRef { mint_ms: i64::MIN, maxt_ms: i64::MAX, encoding, data: Bytes::from(data) };
    let mut v = Vec::new();
    let _ = tessera_encoding::decode_histogram_samples_into(&c, &mut v);
    c.mint_ms = v.first().map_or(i64::MAX, |s| s.t);
    c.maxt_ms = v.last().map_or(i64::MIN, |s| s.t);
    c
}

impl Queryable for MemStorage {
    fn querier(&self, mint_ms: i64, maxt_ms: i64) -> Result<Arc<dyn Querier>, StorageError> {
        Ok(Arc::new(MemQuerier { shards: self.shards.clone(), mint_ms, maxt_ms }))
    }
}

struct MemQuerier {
    shards: Arc<Vec<Vec<MemSeries>>>,
    mint_ms: i64,
    maxt_ms: i64,
}

impl MemQuerier {
    fn matching<'a>(&'a self, shard: usize, matchers: &'a [Matcher]) -> impl Iterator<Item = &'a MemSeries> + 'a {
        self.shards[shard]
            .iter()
            .filter(move |s| !matchers.is_empty() && matchers.iter().all(|m| m.matches(s.labels.get(&m.name))))
    }
}

impl Querier for MemQuerier {
    fn mint_ms(&self) -> i64 {
        self.mint_ms
    }
    fn maxt_ms(&self) -> i64 {
        self.maxt_ms
    }
    fn shard_count(&self) -> usize {
        self.shards.len()
    }

    fn select_shard(&self, shard: usize, matchers: &[Matcher], hints: &SelectHints) -> Result<SeriesSet, StorageError> {
        let (mint, maxt) = (self.mint_ms, self.maxt_ms);
        let out: Vec<Result<Series, StorageError>> = self
            .matching(shard, matchers)
            .filter_map(|s| {
                let chunks: Vec<ChunkRef> =
                    s.chunks.iter().filter(|c| c.maxt_ms >= mint && c.mint_ms <= maxt).cloned().collect();
                if chunks.is_empty() && !hints.series_only {
                    return None;
                }
                Some(Ok(Series { labels: s.labels.clone(), chunks: if hints.series_only { vec![] } else { chunks } }))
            })
            .collect();
        Ok(Box::new(out.into_iter()))
    }

    fn label_names(&self, matchers: &[Matcher]) -> Result<Vec<String>, StorageError> {
        let mut v: Vec<String> = Vec::new();
        for sh in 0..self.shards.len() {
            let it: Box<dyn Iterator<Item = &MemSeries>> = if matchers.is_empty() {
                Box::new(self.shards[sh].iter())
            } else {
                Box::new(self.matching(sh, matchers))
            };
            for s in it {
                v.extend(s.labels.iter().map(|l| l.name.to_string()));
            }
        }
        v.sort();
        v.dedup();
        Ok(v)
    }

    fn label_values(&self, name: &str, matchers: &[Matcher]) -> Result<Vec<String>, StorageError> {
        let mut v: Vec<String> = Vec::new();
        for sh in 0..self.shards.len() {
            let it: Box<dyn Iterator<Item = &MemSeries>> = if matchers.is_empty() {
                Box::new(self.shards[sh].iter())
            } else {
                Box::new(self.matching(sh, matchers))
            };
            for s in it {
                let x = s.labels.get(name);
                if !x.is_empty() {
                    v.push(x.to_string());
                }
            }
        }
        v.sort();
        v.dedup();
        Ok(v)
    }
}
