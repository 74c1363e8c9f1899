//! Options of a database ([`Options`]), with Prometheus' defaults where Prometheus has one.

pub use tessera_wal::FsyncPolicy;

/// How a [`crate::Db`] is opened.
#[derive(Debug, Clone)]
pub struct Options {
    /// Number of shards (default: the number of available cores). Recorded on disk at creation; a database
    /// cannot be reopened with another count (resharding is not supported).
    pub shards: usize,
    /// Width of a level-1 block and of the head's cut grid, ms (default 2 h, Prometheus' `min-block-duration`).
    pub block_range_ms: i64,
    /// Blocks entirely older than this (relative to the newest block's end) are deleted; 0 = off (default 15 d).
    pub retention_ms: i64,
    /// The oldest blocks are deleted while all blocks together exceed this many bytes; 0 = off (default).
    pub retention_bytes: u64,
    /// Out-of-order window, ms (default 0 = out-of-order samples rejected, as in Prometheus).
    pub ooo_window_ms: i64,
    /// When the WAL is fsynced (default `Interval(1 s)`; see `tessera_wal::FsyncPolicy`).
    pub fsync: FsyncPolicy,
    /// WAL segment size (default 128 MiB).
    pub wal_segment_bytes: u64,
    /// Compress what the WAL logs (default true, as Prometheus' `--storage.tsdb.wal-compression`; see
    /// [`crate::wal_pack`]). Replay reads compressed and uncompressed records either way.
    pub wal_compression: bool,
    /// Run head cuts, compaction, retention and the fsync timer in a background thread (default true).
    /// When false, head cuts happen inline in commits and the rest only through [`crate::Db::compact`].
    pub background: bool,
    /// How float chunks are encoded when a block is written (head cut or compaction); default
    /// [`ColdCodec::Dense`]. See [`ColdCodec`]. Other than [`ColdCodec::Xor`] it also lets the head keep
    /// its closed float chunks as Decimal chunks where that is smaller (`head::recode_decimal`).
    pub cold_codec: ColdCodec,
    /// Samples more than this many ms ahead of the machine's clock are rejected
    /// ([`crate::RejectReason::TooFarInFuture`]); 0 = no limit. What an older version accepted beyond it
    /// is kept, unless [`Options::repair_future`] says otherwise. Default 10 min: senders' clocks are rarely further
    /// off, and the bound must stay well under half the block range, because the newest sample of
    /// a shard sets the oldest time it still accepts (`max_t - block_range / 2`): one sample from next
    /// year would otherwise refuse every real sample after it.
    pub max_future_ms: i64,
    /// At most this many active series (in all heads together); a commit that would create more
    /// rejects the new series' samples ([`crate::RejectReason::MaxSeries`]) and still writes those of
    /// existing series. 0 = no limit (default, as Prometheus).
    pub max_series: u64,
    /// Most exemplars kept in memory (upstream `--storage.exemplars.exemplars-limit`, default 100 000),
    /// split evenly over the shards; the oldest stored goes first. 0 turns exemplar storage off.
    pub max_exemplars: usize,
    /// Repairs a data directory that an older version wedged with samples from the future: WAL replay
    /// drops samples beyond [`Options::max_future_ms`] (counted, logged) and blocks wholly beyond it
    /// are moved to `future-blocks/`. Off by default, because a clock that is behind at start-up
    /// (a host without a hardware clock, a restored VM) would make real data look like the future:
    /// without it such samples are replayed as they are, and a warning says how many there are.
    pub repair_future: bool,
    /// Downsampling tiers (see `crate::tiers`), finest first; empty (default) = none.
    pub tiers: Vec<TierOptions>,
    /// Closed head chunk bytes per shard above which the oldest head data is cut into a block early, at
    /// a chunk boundary below the appendable minimum (default 48 MiB).
    pub head_chunk_bytes_soft_limit: u64,
    /// Bytes per head chunk file (`<shard>/chunks_head/`, see `crate::head::chunk_files`; default 4 MiB).
    /// A file is deleted once every chunk in it went into a block, so smaller files free disk sooner.
    pub head_chunk_segment_bytes: usize,
}

/// One downsampling tier: its bucket width and how long its blocks are kept.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TierOptions {
    /// Bucket width, ms: a divisor of the block range (buckets never straddle blocks).
    pub resolution_ms: i64,
    /// Tier blocks entirely older than this (from the newest data) are deleted; 0 = kept forever.
    pub retention_ms: i64,
}

/// The encoding of plain float chunks in blocks.
///
/// The head always writes Prometheus XOR chunks (120 samples each). With `Dense`, the block writer
/// re-encodes runs of consecutive XOR chunks of a series (up to [`crate::block::writer::DENSE_CHUNK_SAMPLES`]
/// samples) as one `ChunkEncoding::Decimal` chunk (every value an exact short decimal, stored as scaled
/// integers; see `tessera_encoding::decimal`) or `ChunkEncoding::Dense` chunk, the smaller, when that is
/// at least 1/16 smaller than the XOR chunks it replaces (chunk records and index entries counted), and
/// keeps the XOR chunks otherwise. Values with many random bits gain from Dense (B1's uniform doubles:
/// 7.94 → 6.83 bytes/point), monitoring values from Decimal (the fleet's blocks: 2.18 → 1.30
/// bytes/sample on 2026-11-25, 0.81 with bit-packed Decimal and index format 2 on the fixed generator). Dense decodes ~25 % faster
/// than XOR; it costs ~8 ns/sample of CPU to encode (plus one XOR decode, ~10 ns) when a block is
/// written. Head cuts run inline in commits, so on B1 that takes ~20 % off the ingest rate when the
/// cores are contended (nothing measurable with B1 alone on 2 cores). Remote read converts Dense back
/// and Decimal to XOR (`to_xor_chunks`). Chunks with start timestamps (XorSt) and histogram
/// chunks are never re-encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ColdCodec {
    /// Blocks keep the head's XOR chunks as they are (Prometheus' block format, byte for byte), and so does
    /// the head.
    Xor,
    /// Runs of XOR chunks become Decimal or Dense chunks where that is clearly smaller; the head keeps
    /// closed chunks of exact decimals as Decimal.
    #[default]
    Dense,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            shards: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            block_range_ms: 2 * 3600 * 1000,
            retention_ms: 15 * 24 * 3600 * 1000,
            retention_bytes: 0,
            ooo_window_ms: 0,
            fsync: FsyncPolicy::default(),
            wal_segment_bytes: 128 << 20,
            wal_compression: true,
            background: true,
            cold_codec: ColdCodec::default(),
            max_future_ms: 10 * 60 * 1000,
            max_series: 0,
            max_exemplars: 100_000,
            repair_future: false,
            tiers: Vec::new(),
            head_chunk_bytes_soft_limit: 48 << 20,
            head_chunk_segment_bytes: crate::head::chunk_files::SEGMENT_BYTES,
        }
    }
}

impl Options {
    /// The newest sample time accepted now: the clock plus [`Options::max_future_ms`].
    pub fn max_valid_time_ms(&self) -> i64 {
        if self.max_future_ms == 0 {
            return i64::MAX;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0);
        now.saturating_add(self.max_future_ms)
    }

    pub(crate) fn validate(&self) -> Result<(), crate::Error> {
        let bad = |m: &str| Err(crate::Error::InvalidOptions(m.to_string()));
        if self.shards == 0 || self.shards > 4096 {
            return bad("shards must be in 1..=4096");
        }
        if self.block_range_ms < 1000 {
            return bad("block_range_ms must be at least 1000");
        }
        if self.retention_ms < 0 || self.ooo_window_ms < 0 || self.max_future_ms < 0 {
            return bad("retention_ms, ooo_window_ms and max_future_ms must not be negative");
        }
        if self.max_future_ms > 0 && self.max_future_ms >= self.block_range_ms / 2 {
            // A sample that far ahead would move the oldest appendable time past the present.
            return bad("max_future_ms must be below half of block_range_ms (or 0 for no bound)");
        }
        if self.ooo_window_ms > self.block_range_ms / 2 {
            return bad("ooo_window_ms must not exceed half of block_range_ms");
        }
        for (i, t) in self.tiers.iter().enumerate() {
            if t.resolution_ms <= 0 || self.block_range_ms % t.resolution_ms != 0 {
                return bad(&format!(
                    "tier resolution {} ms must be positive and divide the block range ({} ms)",
                    t.resolution_ms, self.block_range_ms
                ));
            }
            if t.retention_ms < 0 {
                return bad("tier retention must not be negative");
            }
            if i > 0 && self.tiers[i - 1].resolution_ms >= t.resolution_ms {
                return bad("tiers must be listed finest first, each resolution once");
            }
        }
        if self.wal_segment_bytes < tessera_wal::WalOptions::MIN_SEGMENT_BYTES {
            return bad("wal_segment_bytes too small");
        }
        Ok(())
    }
}
