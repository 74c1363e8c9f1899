//! The database: N shards behind one embedded API ([`Db`]).
//!
//! Layout on disk: `dir/tessera.json` records the shard count (a database cannot be reopened with another
//! one: resharding is not supported), and `dir/shard-NNN/` holds each shard's blocks and `wal/`.
//! Every series lives in exactly one shard, `labels.shard(N)`.
//!
//! A background thread (unless `Options::background` is false) fsyncs idle WALs per the interval policy,
//! cuts heads into blocks when due, compacts blocks and applies retention.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use parking_lot::Mutex;
use tessera_model::{ChangeLog, Matcher, Querier, Queryable, StorageError};

use crate::appender::Appender;
use crate::error::{Error, Result};
use crate::metrics::Metrics;
use crate::options::Options;
use crate::querier::DbQuerier;
use crate::shard::Shard;

/// The file recording the shard count.
pub const META_FILE: &str = "tessera.json";

/// Head and disk statistics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Stats {
    pub head_series: u64,
    pub head_chunks: u64,
    pub head_samples: u64,
    /// Bytes in the heads' chunk files (closed chunks, and those merges replaced until their file goes).
    pub head_chunk_file_bytes: u64,
    /// Closed head chunks' bytes held in RAM (not written to a chunk file yet, or not writable).
    pub head_chunk_memory_bytes: u64,
    /// Earliest sample time in the heads (`i64::MAX` when empty).
    pub head_min_t: i64,
    /// Latest sample time in the heads (`i64::MIN` when empty).
    pub head_max_t: i64,
    pub blocks: u64,
    /// Bytes of all blocks.
    pub disk_bytes: u64,
    /// Downsampling tier blocks and their bytes (not in `blocks`/`disk_bytes`).
    pub tier_blocks: u64,
    pub tier_bytes: u64,
    pub wal_bytes: u64,
    pub shards: usize,
}

/// Head cardinality, like Prometheus' `/api/v1/status/tsdb` (each list: top `limit`, descending).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cardinality {
    pub series_count_by_metric_name: Vec<(String, u64)>,
    pub label_value_count_by_label_name: Vec<(String, u64)>,
    pub memory_in_bytes_by_label_name: Vec<(String, u64)>,
    pub series_count_by_label_value_pair: Vec<(String, u64)>,
}

/// An open database.
pub struct Db {
    dir: PathBuf,
    pub(crate) shards: Vec<Arc<Shard>>,
    pub(crate) metrics: Arc<Metrics>,
    /// Each shard's downsampling tiers (same order as `shards`).
    pub(crate) tiers: Vec<Arc<crate::tiers::ShardTiers>>,
    opts: Options,
    bg: Mutex<Option<(std::sync::mpsc::Sender<()>, std::thread::JoinHandle<()>)>>,
    /// Serialises compaction runs (background and explicit).
    compact_lock: Arc<Mutex<()>>,
    /// Changes to old time ranges, for readers that keep derived data (the result cache).
    pub(crate) changes: Arc<ChangeLog>,
    /// Where raw data ends and only tiers reach back (`Queryable::raw_horizon`), as of the last
    /// maintenance pass: it moves only there, with a change recorded (see `tiers::refresh_horizon`).
    horizon: Arc<Mutex<Option<tessera_model::RawHorizon>>>,
}

impl std::fmt::Debug for Db {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Db").field("dir", &self.dir).field("shards", &self.shards.len()).finish()
    }
}

/// `tessera.json`: the database's identity. `crc32c` (hex, of [`DbMeta::signed_text`]) catches a hand
/// edit; files written before it existed have none and are checked against the shard directories, then
/// rewritten with one.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct DbMeta {
    version: u32,
    shards: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    crc32c: Option<String>,
}

/// The only `tessera.json` version this build reads and writes.
const DB_META_VERSION: u32 = 1;

impl DbMeta {
    fn new(shards: usize) -> DbMeta {
        let mut m = DbMeta { version: DB_META_VERSION, shards, crc32c: None };
        m.crc32c = Some(m.checksum());
        m
    }

    fn signed_text(&self) -> String {
        format!("tessera version={} shards={}", self.version, self.shards)
    }

    fn checksum(&self) -> String {
        format!("{:08x}", crc32c::crc32c(self.signed_text().as_bytes()))
    }

    fn write(&self, dir: &Path) -> Result<()> {
        let path = dir.join(META_FILE);
        let tmp = dir.join(format!("{META_FILE}.tmp"));
        let data = serde_json::to_vec_pretty(self).map_err(|e| Error::Other(e.to_string()))?;
        std::fs::write(&tmp, data).map_err(|e| Error::io(&tmp, e))?;
        std::fs::File::open(&tmp).and_then(|f| f.sync_all()).map_err(|e| Error::io(&tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| Error::io(&path, e))?;
        std::fs::File::open(dir).and_then(|f| f.sync_all()).map_err(|e| Error::io(dir, e))
    }
}

/// Numbers of the `shard-NNN` directories in `dir`.
fn shard_dirs(dir: &Path) -> Result<Vec<usize>> {
    let mut out = Vec::new();
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for ent in rd {
        let ent = ent.map_err(|e| Error::io(dir, e))?;
        let name = ent.file_name().to_string_lossy().into_owned();
        if let Some(n) = name.strip_prefix("shard-").and_then(|n| n.parse::<usize>().ok())
            && ent.path().is_dir()
        {
            out.push(n);
        }
    }
    out.sort_unstable();
    Ok(out)
}

/// The shard count a database directory records, after checking that `tessera.json` is intact (known
/// version, checksum) and agrees with the shard directories on disk. `None`: no database there yet.
/// Nothing is created or changed.
pub fn recorded_shards(dir: &Path) -> Result<Option<usize>> {
    Ok(read_identity(dir)?.map(|(m, _)| m.shards))
}

/// [`recorded_shards`], with whether the file lacks a checksum (an older version wrote it).
fn read_identity(dir: &Path) -> Result<Option<(DbMeta, bool)>> {
    let meta_path = dir.join(META_FILE);
    let on_disk = shard_dirs(dir)?;
    let b = match std::fs::read(&meta_path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            if !on_disk.is_empty() {
                return Err(Error::corruption(
                    meta_path.display(),
                    0,
                    format!(
                        "{META_FILE} is missing but {} holds {} shard directories; restore it (it records the shard count) rather than start over",
                        dir.display(),
                        on_disk.len()
                    ),
                ));
            }
            return Ok(None);
        }
        Err(e) => return Err(Error::io(&meta_path, e)),
    };
    let bad = |reason: String| Error::corruption(meta_path.display(), 0, reason);
    let m: DbMeta = serde_json::from_slice(&b).map_err(|e| bad(format!("bad {META_FILE}: {e}")))?;
    if m.version != DB_META_VERSION {
        return Err(bad(format!(
            "{META_FILE} has version {}, this build reads version {DB_META_VERSION} (written by a newer Tessera, or edited)",
            m.version
        )));
    }
    let legacy = m.crc32c.is_none();
    if let Some(c) = &m.crc32c
        && *c != m.checksum()
    {
        return Err(bad(format!("{META_FILE} fails its checksum (edited by hand?): recorded {c}, computed {}", m.checksum())));
    }
    if m.shards == 0 || m.shards > 4096 {
        return Err(bad(format!("{META_FILE} records {} shards", m.shards)));
    }
    // Every directory is a shard below the count: an extra one means the count would route series
    // elsewhere. Missing ones are fine in a checksummed file (a crash while the shards were first
    // created; `Shard::open` creates them), but not in an older file without a checksum, where a
    // larger count is the only sign of a hand edit.
    if let Some(&extra) = on_disk.iter().find(|&&n| n >= m.shards) {
        return Err(bad(format!(
            "{META_FILE} records {} shards but {} holds shard-{extra:03}: the file does not describe this directory",
            m.shards,
            dir.display()
        )));
    }
    if legacy && !on_disk.is_empty() && on_disk.len() < m.shards {
        return Err(bad(format!(
            "{META_FILE} records {} shards but {} holds only {} shard directories: the file does not describe this directory",
            m.shards,
            dir.display(),
            on_disk.len()
        )));
    }
    Ok(Some((m, legacy)))
}

impl Db {
    /// Opens (or creates) the database in `dir`, replaying every shard's WAL (shards in parallel).
    pub fn open(dir: impl AsRef<Path>, opts: Options) -> Result<Arc<Db>> {
        Self::open_with_wal_fs(dir, opts, None)
    }

    /// [`Db::open`] with every shard's WAL writer going through `wal_fs` (fault-injection tests).
    #[doc(hidden)]
    pub fn open_with_wal_fs(
        dir: impl AsRef<Path>,
        opts: Options,
        wal_fs: Option<Arc<dyn tessera_wal::fs::WalFs>>,
    ) -> Result<Arc<Db>> {
        opts.validate()?;
        let dir = dir.as_ref().to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|e| Error::io(&dir, e))?;
        match read_identity(&dir)? {
            Some((m, legacy)) => {
                if m.shards != opts.shards {
                    return Err(Error::InvalidOptions(format!(
                        "database in {} was created with {} shards, cannot open it with {} (resharding is not supported)",
                        dir.display(),
                        m.shards,
                        opts.shards
                    )));
                }
                if legacy {
                    DbMeta::new(m.shards).write(&dir)?;
                }
            }
            None => DbMeta::new(opts.shards).write(&dir)?,
        }
        let metrics = Arc::new(Metrics::default());
        let results: Vec<Result<Shard>> = std::thread::scope(|s| {
            let hs: Vec<_> = (0..opts.shards)
                .map(|i| {
                    let d = dir.join(format!("shard-{i:03}"));
                    let o = opts.clone();
                    let m = metrics.clone();
                    let fs = wal_fs.clone();
                    s.spawn(move || Shard::open(i, d, o, m, fs))
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Other("shard open panicked".into())))).collect()
        });
        let mut shards = Vec::with_capacity(results.len());
        for r in results {
            shards.push(Arc::new(r?));
        }
        let mut tiers = Vec::with_capacity(shards.len());
        for s in &shards {
            tiers.push(Arc::new(crate::tiers::ShardTiers::open(&s.dir, &opts)?));
        }
        let db = Arc::new(Db {
            dir,
            shards,
            tiers,
            metrics,
            opts: opts.clone(),
            bg: Mutex::new(None),
            compact_lock: Arc::new(Mutex::new(())),
            changes: Arc::new(ChangeLog::new()),
            horizon: Arc::new(Mutex::new(None)),
        });
        crate::tiers::refresh_horizon(&db.shards, &db.tiers, &db.horizon, &db.changes, &[]);
        db.refresh_gauges();
        if opts.background {
            let (tx, rx) = std::sync::mpsc::channel::<()>();
            let shards = db.shards.clone();
            let tiers = db.tiers.clone();
            let metrics = db.metrics.clone();
            let lock = db.compact_lock.clone();
            let opts2 = opts.clone();
            let changes = db.changes.clone();
            let horizon = db.horizon.clone();
            let h = std::thread::Builder::new()
                .name("tessera-tsdb-bg".into())
                .spawn(move || background(shards, tiers, metrics, lock, opts2, changes, horizon, rx))
                .map_err(|e| Error::Other(format!("cannot start background thread: {e}")))?;
            *db.bg.lock() = Some((tx, h));
        }
        Ok(db)
    }

    /// A new appender (buffers batches until `commit`).
    pub fn appender(&self) -> Appender<'_> {
        Appender { db: self, batches: Vec::new(), new_series_limit: usize::MAX }
    }

    /// Deletes the samples in `[mint_ms, maxt_ms]` of the series matching `matchers` (tombstones in the
    /// head and in every block; applied physically at the next head cut / compaction).
    pub fn delete(&self, mint_ms: i64, maxt_ms: i64, matchers: &[Matcher]) -> Result<()> {
        if matchers.is_empty() {
            return Ok(());
        }
        let res = self.shards.iter().try_for_each(|s| s.delete(mint_ms, maxt_ms, matchers));
        // Tier blocks too: those whose raw block is gone answer alone (bucket by bucket, see `tiers`).
        let res = res.and_then(|()| {
            self.tiers.iter().flat_map(|t| &t.sets).try_for_each(|set| {
                set.blocks.read().iter().try_for_each(|b| b.delete_matching(matchers, mint_ms, maxt_ms).map(|_| ()))
            })
        });
        // Recorded even after a failure: earlier shards may already hide the deleted samples.
        self.changes.record(mint_ms, maxt_ms);
        res
    }

    /// A snapshot of the database under `dir` (Prometheus' `DB.Snapshot`): its identity file, hard links of
    /// every block and tier block, and with `with_head` a block per shard of what the heads hold now.
    /// The result is a data directory of its own (no WAL): `tessera serve --storage.tsdb.path=<dir>`
    /// opens it. Compaction and retention wait meanwhile.
    pub fn snapshot(&self, dir: &Path, with_head: bool) -> Result<()> {
        let _g = self.compact_lock.lock();
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let meta = self.dir.join(META_FILE);
        std::fs::copy(&meta, dir.join(META_FILE)).map_err(|e| Error::io(&meta, e))?;
        for (i, (s, t)) in self.shards.iter().zip(&self.tiers).enumerate() {
            let d = dir.join(format!("shard-{i:03}"));
            s.snapshot(&d, with_head)?;
            for set in &t.sets {
                for b in set.blocks.read().iter() {
                    let name = b.dir().file_name().map(|n| n.to_os_string()).unwrap_or_default();
                    let td = d.join("tiers").join(set.opts.resolution_ms.to_string()).join(name);
                    crate::compact::link_dir(b.dir(), &td)?;
                }
            }
        }
        crate::block::meta::sync_dir(dir)?;
        Ok(())
    }

    /// Rewrites blocks that carry tombstones without the deleted data (Prometheus' `CleanTombstones`).
    pub fn clean_tombstones(&self) -> Result<()> {
        let _g = self.compact_lock.lock();
        for s in &self.shards {
            crate::maintenance::clean_tombstones(s, &self.opts, &self.metrics)?;
        }
        self.refresh_gauges();
        Ok(())
    }

    /// Cuts every shard's whole head into blocks now (a final flush); the WAL is checkpointed and truncated.
    pub fn flush(&self) -> Result<()> {
        let _g = self.compact_lock.lock();
        let r: Vec<Result<()>> = std::thread::scope(|s| {
            let hs: Vec<_> = self.shards.iter().map(|sh| s.spawn(move || sh.cut(true))).collect();
            hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(Error::Other("flush panicked".into())))).collect()
        });
        for x in r {
            x?;
        }
        self.refresh_gauges();
        Ok(())
    }

    /// Head cuts when due, block compaction and retention, now.
    pub fn compact(&self) -> Result<()> {
        let _g = self.compact_lock.lock();
        for s in &self.shards {
            s.cut_if_due()?;
        }
        let r = maintenance_pass(&self.shards, &self.tiers, &self.opts, &self.metrics, &self.changes, &self.horizon);
        for s in &self.shards {
            s.refresh_label_order();
        }
        self.refresh_gauges();
        r
    }

    /// Exemplars of the series matching any of the matcher sets (each set ANDed; upstream
    /// `ExemplarQuerier.Select`), with those in `[start_ms, end_ms]`, series sorted by labels.
    pub fn select_exemplars(
        &self,
        start_ms: i64,
        end_ms: i64,
        matcher_sets: &[Vec<tessera_model::Matcher>],
    ) -> Vec<(tessera_model::Labels, Vec<tessera_model::Exemplar>)> {
        let mut out = Vec::new();
        for s in &self.shards {
            out.extend(s.exemplars.lock().select(start_ms, end_ms, matcher_sets));
        }
        out.sort_by(|a, b| a.0.cmp(&b.0));
        out
    }

    /// Exemplars held in memory now (all shards).
    pub fn exemplar_count(&self) -> usize {
        self.shards.iter().map(|s| s.exemplars.lock().len()).sum()
    }

    /// Head and disk statistics summed over shards.
    pub fn stats(&self) -> Stats {
        let mut st = Stats { head_min_t: i64::MAX, head_max_t: i64::MIN, shards: self.shards.len(), ..Default::default() };
        for s in &self.shards {
            {
                let g = s.state.read();
                st.head_series += g.head.num_series() as u64;
                st.head_samples += g.head.num_samples;
                st.head_chunks += g.head.num_chunks;
                let (file, ram) = g.head.files.usage();
                st.head_chunk_file_bytes += file;
                st.head_chunk_memory_bytes += ram;
                st.head_min_t = st.head_min_t.min(g.head.min_t);
                st.head_max_t = st.head_max_t.max(g.head.max_t);
                st.blocks += g.blocks.len() as u64;
                st.disk_bytes += g.blocks.iter().map(|b| b.size_bytes()).sum::<u64>();
            }
            st.wal_bytes += s.wal_bytes();
        }
        for t in &self.tiers {
            st.tier_bytes += t.size_bytes();
            st.tier_blocks += t.sets.iter().map(|s| s.blocks.read().len() as u64).sum::<u64>();
        }
        st
    }

    pub(crate) fn refresh_gauges(&self) {
        let st = self.stats();
        self.metrics.head_series.store(st.head_series, Relaxed);
        self.metrics.head_chunks.store(st.head_chunks, Relaxed);
        self.metrics.head_samples.store(st.head_samples, Relaxed);
        self.metrics.head_chunk_file_bytes.store(st.head_chunk_file_bytes, Relaxed);
        self.metrics.head_chunk_memory_bytes.store(st.head_chunk_memory_bytes, Relaxed);
        self.metrics.blocks.store(st.blocks, Relaxed);
        self.metrics.disk_bytes.store(st.disk_bytes, Relaxed);
        self.metrics.tier_blocks.store(st.tier_blocks, Relaxed);
        self.metrics.tier_bytes.store(st.tier_bytes, Relaxed);
    }

    /// Head cardinality statistics (Prometheus' `/api/v1/status/tsdb`), top `limit` of each list.
    pub fn head_cardinality(&self, limit: usize) -> Cardinality {
        use std::collections::HashMap;
        let mut by_metric: HashMap<String, u64> = HashMap::new();
        let mut values_by_name: HashMap<String, u64> = HashMap::new();
        let mut mem_by_name: HashMap<String, u64> = HashMap::new();
        let mut by_pair: HashMap<String, u64> = HashMap::new();
        for s in &self.shards {
            let g = s.state.read();
            for (name, vals) in g.head.index.names() {
                *values_by_name.entry(name.to_string()).or_default() += vals.len() as u64;
                let mut mem = 0u64;
                for (v, refs) in vals {
                    mem += (v.len() * refs.len()) as u64;
                    *by_pair.entry(format!("{name}={v}")).or_default() += refs.len() as u64;
                    if name == tessera_model::METRIC_NAME {
                        *by_metric.entry(v.to_string()).or_default() += refs.len() as u64;
                    }
                }
                *mem_by_name.entry(name.to_string()).or_default() += mem;
            }
        }
        // Label values are counted per shard above; a value present in several shards is counted once per
        // shard. Recount distinct values exactly.
        let mut distinct: HashMap<String, std::collections::HashSet<String>> = HashMap::new();
        for s in &self.shards {
            let g = s.state.read();
            for (name, vals) in g.head.index.names() {
                distinct.entry(name.to_string()).or_default().extend(vals.keys().map(|k| k.to_string()));
            }
        }
        for (n, set) in distinct {
            values_by_name.insert(n, set.len() as u64);
        }
        let top = |m: HashMap<String, u64>| {
            let mut v: Vec<(String, u64)> = m.into_iter().collect();
            v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
            v.truncate(limit);
            v
        };
        Cardinality {
            series_count_by_metric_name: top(by_metric),
            label_value_count_by_label_name: top(values_by_name),
            memory_in_bytes_by_label_name: top(mem_by_name),
            series_count_by_label_value_pair: top(by_pair),
        }
    }

    /// The engine's counters and gauges.
    /// Where the database records changes to old time ranges (for logs that follow it: a union's).
    pub fn change_log(&self) -> Arc<ChangeLog> {
        self.changes.clone()
    }

    pub fn metrics(&self) -> &Metrics {
        self.refresh_gauges();
        &self.metrics
    }

    /// Stops background work and fsyncs and closes every WAL. Idempotent; later writes fail.
    pub fn close(&self) -> Result<()> {
        if let Some((tx, h)) = self.bg.lock().take() {
            drop(tx);
            let _ = h.join();
        }
        let mut first = None;
        for s in &self.shards {
            if let Err(e) = s.close() {
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    /// The database directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// True when some shard is poisoned (a WAL write or fsync failed).
    pub fn is_poisoned(&self) -> bool {
        self.shards.iter().any(|s| s.is_poisoned())
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl Queryable for Db {
    fn querier(&self, mint_ms: i64, maxt_ms: i64) -> std::result::Result<Arc<dyn Querier>, StorageError> {
        Ok(Arc::new(DbQuerier { shards: self.shards.clone(), mint: mint_ms, maxt: maxt_ms }))
    }

    fn changes(&self) -> Option<&ChangeLog> {
        Some(&self.changes)
    }

    fn tiers(&self) -> Vec<tessera_model::TierInfo> {
        self.opts.tiers.iter().map(|t| tessera_model::TierInfo { resolution_ms: t.resolution_ms, retention_ms: t.retention_ms }).collect()
    }

    fn raw_horizon(&self) -> Option<tessera_model::RawHorizon> {
        self.horizon.lock().clone()
    }

    fn tier_querier(&self, resolution_ms: i64, mint_ms: i64, maxt_ms: i64) -> std::result::Result<Option<Arc<dyn Querier>>, StorageError> {
        let Some(tier) = self.opts.tiers.iter().position(|t| t.resolution_ms == resolution_ms) else { return Ok(None) };
        Ok(Some(Arc::new(crate::tiers::TierQuerier {
            raw: DbQuerier { shards: self.shards.clone(), mint: mint_ms, maxt: maxt_ms },
            tiers: self.tiers.clone(),
            tier,
            res: resolution_ms,
        })))
    }
}

#[allow(clippy::too_many_arguments)]
fn background(
    shards: Vec<Arc<Shard>>,
    tiers: Vec<Arc<crate::tiers::ShardTiers>>,
    metrics: Arc<Metrics>,
    lock: Arc<Mutex<()>>,
    opts: Options,
    changes: Arc<ChangeLog>,
    horizon: Arc<Mutex<Option<tessera_model::RawHorizon>>>,
    stop: std::sync::mpsc::Receiver<()>,
) {
    let tick = match opts.fsync {
        crate::FsyncPolicy::Interval(d) => d.clamp(Duration::from_millis(10), Duration::from_millis(250)),
        _ => Duration::from_millis(250),
    };
    let mut last_maint = std::time::Instant::now();
    loop {
        match stop.recv_timeout(tick) {
            Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        for s in &shards {
            s.sync_if_due();
        }
        for s in &shards {
            if let Err(e) = s.cut_if_due() {
                tracing::error!(shard = s.id, error = %e, "head cut failed");
            }
            s.refresh_label_order();
        }
        if last_maint.elapsed() >= Duration::from_secs(1) {
            last_maint = std::time::Instant::now();
            let _g = lock.lock();
            // Errors are logged in the pass; the next one tries again.
            let _ = maintenance_pass(&shards, &tiers, &opts, &metrics, &changes, &horizon);
        }
    }
}

/// One maintenance pass over every shard: compaction, then the downsampling tiers computed from the
/// compacted blocks (see `maintenance::compact`), then raw retention — which waits in a shard whose
/// tiers could not be brought up to date. The raw horizon is published as the drops will leave it
/// before any block is dropped, so that a query never finds old raw data gone while the horizon still
/// sends it to raw data there. Every shard is tried; the first error is returned (and each is logged).
fn maintenance_pass(
    shards: &[Arc<Shard>],
    tiers: &[Arc<crate::tiers::ShardTiers>],
    opts: &Options,
    metrics: &Metrics,
    changes: &ChangeLog,
    horizon: &Mutex<Option<tessera_model::RawHorizon>>,
) -> Result<()> {
    let mut first = None;
    let mut drops = Vec::with_capacity(shards.len());
    for (s, t) in shards.iter().zip(tiers) {
        if let Err(e) = crate::maintenance::compact(s, opts, metrics) {
            metrics.compaction_failures.fetch_add(1, Relaxed);
            tracing::error!(shard = s.id, error = %e, "compaction failed");
            first.get_or_insert(e);
        }
        drops.push(match crate::tiers::maintain(s, t, changes) {
            Ok(_) => crate::maintenance::retention_drops(s, opts),
            Err(e) => {
                tracing::error!(shard = s.id, error = %e, "downsampling failed; raw retention waits for it");
                first.get_or_insert(e);
                Vec::new()
            }
        });
    }
    crate::tiers::refresh_horizon(shards, tiers, horizon, changes, &drops);
    for (s, ids) in shards.iter().zip(&drops) {
        crate::maintenance::retain(s, ids, metrics, changes);
    }
    crate::tiers::refresh_horizon(shards, tiers, horizon, changes, &[]);
    first.map_or(Ok(()), Err)
}
