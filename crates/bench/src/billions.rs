//! B1, "billions" (see `shared/BENCHMARKS.md`): 10 series `bench_cpu_total_billions{env="prod",
//! service="db",host="h-0"…"h-9"}`, host `h-i` holding timestamps `i·P … (i+1)·P−1` (ms, step 1) with
//! values uniform in [0, 100), written through the embedded `tessera-tsdb` API in batches with the WAL
//! on; then a final flush and compaction. Prints points/s, peak RSS (VmHWM), bytes on disk per point and
//! the median of 5 runs of "average of the last 1,000,000 points of h-9" (querier + decode).
//!
//! One writer thread per shard writes the hosts that shard owns, in order, so every core ingests.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context;
use tessera_model::{Labels, MatchOp, Matcher, Queryable, Sample, SelectHints};
use tessera_tsdb::options::ColdCodec;
use tessera_tsdb::{Db, FsyncPolicy, Options};

const HOSTS: u64 = 10;
const METRIC: &str = "bench_cpu_total_billions";

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Points per host (full scale: 100,000,000 → 1e9 points in all).
    #[arg(long, default_value_t = 1_000_000)]
    pub points_per_host: u64,
    /// Data directory (default: a fresh temporary directory, deleted afterwards).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    /// Shards (and writer threads); default: available cores.
    #[arg(long)]
    pub shards: Option<usize>,
    /// Samples per batch (one series per batch, one commit per batch).
    #[arg(long, default_value_t = 10_000)]
    pub batch: usize,
    /// WAL fsync policy: "interval" (1 s, the default), "always" or "never".
    #[arg(long, default_value = "interval")]
    pub fsync: String,
    /// Keep the data directory (only matters without --dir).
    #[arg(long)]
    pub keep: bool,
    /// Runs of the PromQL form of the query (`avg_over_time`); the median is reported. The background
    /// maintenance thread makes single runs noisy.
    #[arg(long, default_value_t = 15)]
    pub promql_runs: usize,
    /// Encoding of float chunks in blocks: "dense" (the default, `ColdCodec::Dense`) or "xor".
    #[arg(long, default_value = "dense")]
    pub cold_codec: String,
}

fn host_labels(h: u64) -> Labels {
    Labels::from_pairs([
        ("__name__", METRIC.to_string()),
        ("env", "prod".to_string()),
        ("service", "db".to_string()),
        ("host", format!("h-{h}")),
    ])
}

/// splitmix64: a fast, seedable generator; values uniform in [0, 100) with 53 random bits.
struct Rng(u64);

impl Rng {
    #[inline]
    fn next_f64_100(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        ((z >> 11) as f64) * (1.0 / (1u64 << 53) as f64) * 100.0
    }
}

fn vm_hwm_kib() -> u64 {
    proc_status_kib("VmHWM:")
}

fn proc_status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

fn dir_bytes(p: &Path) -> u64 {
    let mut total = 0;
    if let Ok(rd) = std::fs::read_dir(p) {
        for e in rd.flatten() {
            let path = e.path();
            match e.metadata() {
                Ok(m) if m.is_dir() => total += dir_bytes(&path),
                Ok(m) => total += m.len(),
                Err(_) => {}
            }
        }
    }
    total
}

pub fn run(a: Args) -> anyhow::Result<()> {
    let cmdline: Vec<String> = std::env::args().collect();
    let shards = a.shards.unwrap_or_else(|| std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1));
    let fsync = match a.fsync.as_str() {
        "interval" => FsyncPolicy::Interval(Duration::from_secs(1)),
        "always" => FsyncPolicy::Always,
        "never" => FsyncPolicy::Never,
        o => anyhow::bail!("unknown --fsync {o}"),
    };
    let mut tmp = None;
    let dir = match &a.dir {
        Some(d) => d.clone(),
        None => {
            let t = tempfile::Builder::new().prefix("tessera-b1-").tempdir()?;
            let p = t.path().to_path_buf();
            tmp = Some(t);
            p
        }
    };
    let cold_codec = match a.cold_codec.as_str() {
        "dense" => ColdCodec::Dense,
        "xor" => ColdCodec::Xor,
        o => anyhow::bail!("unknown --cold-codec {o}"),
    };
    let opts = Options { shards, fsync, cold_codec, ..Options::default() };
    let db = Db::open(&dir, opts).context("open db")?;
    let p = a.points_per_host;
    let total_points = p * HOSTS;
    println!(
        "B1 billions: {HOSTS} hosts × {p} points = {total_points} points, {shards} shards, batch {}, cold codec {cold_codec:?}",
        a.batch
    );

    // Hosts per shard, in host order.
    let mut per_shard: Vec<Vec<u64>> = vec![Vec::new(); shards];
    for h in 0..HOSTS {
        per_shard[host_labels(h).shard(shards)].push(h);
    }
    // Peak anonymous vs file-backed (mmap'd blocks) resident memory, sampled every 20 ms.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let (mut anon, mut file) = (0u64, 0u64);
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                anon = anon.max(proc_status_kib("RssAnon:"));
                file = file.max(proc_status_kib("RssFile:"));
                std::thread::sleep(Duration::from_millis(20));
            }
            (anon, file)
        })
    };
    let t0 = Instant::now();
    std::thread::scope(|s| -> anyhow::Result<()> {
        let mut hs = Vec::new();
        for hosts in per_shard.iter().filter(|h| !h.is_empty()) {
            let db = &db;
            let batch = a.batch;
            hs.push(s.spawn(move || -> anyhow::Result<u64> {
                let mut written = 0u64;
                for &h in hosts {
                    let labels = host_labels(h);
                    let mut rng = Rng(0x5EED ^ h.wrapping_mul(0x1234_5678_9ABC_DEF1));
                    let start = h * p;
                    let end = start + p;
                    let mut t = start;
                    while t < end {
                        let n = (end - t).min(batch as u64);
                        let samples: Vec<Sample> =
                            (t..t + n).map(|ts| Sample::new(ts as i64, rng.next_f64_100())).collect();
                        let mut app = db.appender();
                        app.add_owned(labels.clone(), samples);
                        let rep = app.commit()?;
                        anyhow::ensure!(rep.rejected.is_empty(), "rejected samples: {:?}", rep.rejected);
                        written += rep.samples_written;
                        t += n;
                    }
                }
                Ok(written)
            }));
        }
        let mut sum = 0;
        for h in hs {
            sum += h.join().map_err(|_| anyhow::anyhow!("writer panicked"))??;
        }
        anyhow::ensure!(sum == total_points, "wrote {sum} of {total_points} points");
        Ok(())
    })?;
    let ingest = t0.elapsed();
    db.flush().context("final flush")?;
    let with_flush = t0.elapsed();
    db.compact().context("compaction")?;
    let with_compact = t0.elapsed();
    let stats = db.stats();
    let disk = dir_bytes(&dir);

    // Query: the average of the last min(1e6, P) points of h-9, through the read interface.
    let qn = p.min(1_000_000);
    let last_t = (HOSTS * p - 1) as i64;
    let mint = last_t - qn as i64 + 1;
    let matchers = [
        Matcher::new(MatchOp::Equal, "__name__", METRIC)?,
        Matcher::new(MatchOp::Equal, "host", "h-9")?,
    ];
    let mut times = Vec::new();
    let mut select_times = Vec::new();
    let mut avg = 0.0;
    let mut buf: Vec<Sample> = Vec::with_capacity(qn as usize);
    for _ in 0..5 {
        let q0 = Instant::now();
        let q = db.querier(mint, last_t).map_err(|e| anyhow::anyhow!("{e}"))?;
        let set = q.select(&matchers, &SelectHints::default()).map_err(|e| anyhow::anyhow!("{e}"))?;
        let (mut sum, mut count) = (0.0f64, 0u64);
        let series: Vec<_> = set.collect();
        select_times.push(q0.elapsed());
        for s in series {
            let s = s.map_err(|e| anyhow::anyhow!("{e}"))?;
            for c in &s.chunks {
                buf.clear();
                tessera_encoding::decode_chunk_range_into(c, mint, last_t, &mut buf)
                    .map_err(|e| anyhow::anyhow!("{e}"))?;
                for x in &buf {
                    sum += x.v;
                }
                count += buf.len() as u64;
            }
        }
        anyhow::ensure!(count == qn, "query saw {count} points, expected {qn}");
        avg = sum / count as f64;
        times.push(q0.elapsed());
    }
    times.sort();
    select_times.sort();
    // The same average as a user asks it, through PromQL: `avg_over_time` over a window holding exactly
    // the last `qn` points (timestamps step 1 ms), on the engine's pool (a one-series query: the chunks
    // are decoded in parallel below the shard).
    let expr = format!("avg_over_time({METRIC}{{host=\"h-9\"}}[{qn}ms])");
    let engine = tessera_promql::engine::Engine::default();
    let mut ptimes = Vec::new();
    let mut pavg = f64::NAN;
    for _ in 0..a.promql_runs.max(1) {
        let q0 = Instant::now();
        let r = engine.instant(&*db, &expr, last_t).map_err(|e| anyhow::anyhow!("{expr}: {e}"))?;
        ptimes.push(q0.elapsed());
        if let tessera_promql::engine::Value::Vector(v) = &r.value {
            pavg = v.first().map_or(f64::NAN, |s| s.v);
        }
    }
    ptimes.sort();
    anyhow::ensure!(
        (pavg - avg).abs() <= 1e-9 * avg.abs().max(1.0),
        "PromQL's average {pavg} differs from the read interface's {avg}"
    );
    let median = times[2];
    let hwm_kib = vm_hwm_kib();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (anon_kib, file_kib) = sampler.join().map_err(|_| anyhow::anyhow!("sampler panicked"))?;

    println!("command:            {}", cmdline.join(" "));
    println!("points:             {total_points}");
    println!(
        "ingest:             {:.2} s → {:.0} points/s (WAL on, fsync {})",
        ingest.as_secs_f64(),
        total_points as f64 / ingest.as_secs_f64(),
        a.fsync
    );
    println!(
        "ingest+final flush: {:.2} s → {:.0} points/s",
        with_flush.as_secs_f64(),
        total_points as f64 / with_flush.as_secs_f64()
    );
    println!("+compaction:        {:.2} s", with_compact.as_secs_f64());
    println!(
        "peak RSS (VmHWM):   {:.1} MiB (sampled peaks: anonymous {:.1} MiB, file-backed/mmap {:.1} MiB)",
        hwm_kib as f64 / 1024.0,
        anon_kib as f64 / 1024.0,
        file_kib as f64 / 1024.0
    );
    println!(
        "disk:               {} bytes = {:.3} bytes/point ({} blocks, WAL {} bytes)",
        disk,
        disk as f64 / total_points as f64,
        stats.blocks,
        stats.wal_bytes
    );
    println!(
        "query avg(last {qn} points of h-9) = {avg:.6}: median of 5 {:.3} ms (runs: {:?})",
        median.as_secs_f64() * 1e3,
        times.iter().map(|d| format!("{:.3}", d.as_secs_f64() * 1e3)).collect::<Vec<_>>()
    );
    println!("  of which select (series + chunk refs, no decoding): median {:.3} ms", select_times[2].as_secs_f64() * 1e3);
    println!(
        "query {expr} through PromQL = {pavg:.6}: median of {} {:.3} ms (runs, sorted: {:?})",
        ptimes.len(),
        ptimes[ptimes.len() / 2].as_secs_f64() * 1e3,
        ptimes.iter().map(|d| format!("{:.3}", d.as_secs_f64() * 1e3)).collect::<Vec<_>>()
    );
    db.close().context("close")?;
    drop(db);
    if let Some(t) = tmp.take()
        && a.keep
    {
        println!("data kept in {}", dir.display());
        std::mem::forget(t); // not deleted
    }
    Ok(())
}
