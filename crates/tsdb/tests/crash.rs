//! Crash test: ingest in a child process, SIGKILL it at a random moment, reopen, and check that every
//! batch whose commit returned ("ACK") is there completely, that no batch is partially there within a
//! shard, and that the database accepts writes again.
//!
//! The child is this very test binary, re-executed with `TESSERA_CRASH_CHILD` set, running the
//! `crash_child` test. The block range is tiny and the WAL segments small so that kills land in WAL
//! writes, head cuts (block writes, checkpoints, segment deletion) and block compactions alike; the kill
//! moment is random (and sometimes lands while the child is still replaying the previous crash).
//! Every batch carries float series and native-histogram series (WAL record type 5), so both kinds are
//! checked the same way. Each life of the child logs with WAL compression on or off (alternately), so
//! replays meet both kinds of segments. Trials: 50 by default, `TESSERA_CRASH_TRIALS=N` for more.

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rand::{Rng, SeedableRng};
use tessera_model::histogram::{Histogram, Span};
use tessera_model::{ChunkEncoding, HistogramSample, HistogramValue, Labels, MatchOp, Matcher, Queryable, Sample, SelectHints};
use tessera_tsdb::{Db, FsyncPolicy, Options};

const SHARDS: usize = 2;
const SERIES: usize = 6;
/// Series with native-histogram samples (labels `k` = SERIES..SERIES+HSERIES).
const HSERIES: usize = 2;
const SAMPLES_PER_SERIES: i64 = 8;
const STEP: i64 = 5;
const BATCH_SPAN: i64 = SAMPLES_PER_SERIES * STEP;

fn opts() -> Options {
    opts_with(true)
}

/// The child alternates WAL compression between lives (by the parity of its first batch), so that a
/// replay meets segments of both kinds, packed segments cut mid-record and packed records that were
/// re-coded for a segment they started.
fn opts_with(wal_compression: bool) -> Options {
    Options {
        wal_compression,
        shards: SHARDS,
        block_range_ms: 1000,
        retention_ms: 0,
        fsync: FsyncPolicy::Never,
        wal_segment_bytes: 8 << 10,
        background: false,
        max_future_ms: 0,
        ..Options::default()
    }
}

fn series_labels(k: usize) -> Labels {
    Labels::from_pairs([("__name__", "crash".to_string()), ("k", k.to_string())])
}

fn value(b: u64, k: usize, j: i64) -> f64 {
    (b * 1000 + k as u64 * 10 + j as u64) as f64
}

/// The histogram sample `j` of batch `b` for series `k`: its count (one bucket) carries the value.
fn hvalue(b: u64, k: usize, j: i64) -> Histogram {
    let c = value(b, k, j) as u64;
    Histogram { count: c, sum: 1.0, positive_spans: vec![Span::new(0, 1)], positive_buckets: vec![c as i64], ..Histogram::default() }
}

/// The child: opens the db in `TESSERA_CRASH_CHILD` and appends batches from `TESSERA_CRASH_FIRST` on,
/// printing `ACK <id>` after each commit returns. Compacts now and then. Runs until killed.
#[test]
fn crash_child() {
    let Ok(dir) = std::env::var("TESSERA_CRASH_CHILD") else { return };
    let first: u64 = std::env::var("TESSERA_CRASH_FIRST").ok().and_then(|s| s.parse().ok()).unwrap_or(0);
    let db = Db::open(&dir, opts_with(first.is_multiple_of(2))).expect("child open");
    let mut out = std::io::stdout();
    writeln!(out, "OPEN").ok();
    out.flush().ok();
    for b in first.. {
        let mut app = db.appender();
        for k in 0..SERIES {
            let s: Vec<Sample> = (0..SAMPLES_PER_SERIES)
                .map(|j| Sample::new(b as i64 * BATCH_SPAN + j * STEP, value(b, k, j)))
                .collect();
            app.add(series_labels(k), &s);
        }
        for k in SERIES..SERIES + HSERIES {
            let h: Vec<HistogramSample> = (0..SAMPLES_PER_SERIES)
                .map(|j| HistogramSample::new(b as i64 * BATCH_SPAN + j * STEP, HistogramValue::Int(hvalue(b, k, j))))
                .collect();
            app.add_histograms(series_labels(k), h);
        }
        let rep = app.commit().expect("child commit");
        assert!(rep.rejected.is_empty(), "child batch {b} rejected: {rep:?}");
        writeln!(out, "ACK {b}").ok();
        out.flush().ok();
        if b % 7 == 3 {
            db.compact().expect("child compact");
        }
    }
}

/// Per batch id, per shard: how many samples of that batch the shard holds; checks values on the way.
fn present(db: &std::sync::Arc<Db>) -> BTreeMap<u64, [usize; SHARDS]> {
    let q = db.querier(i64::MIN / 4, i64::MAX / 4).expect("querier");
    let m = Matcher::new(MatchOp::Equal, "__name__", "crash").expect("matcher");
    let mut out: BTreeMap<u64, [usize; SHARDS]> = BTreeMap::new();
    for s in q.select(&[m], &SelectHints::default()).expect("select") {
        let s = s.expect("series");
        let k: usize = s.labels.get("k").parse().expect("k");
        let shard = s.labels.shard(SHARDS);
        let mut v = Vec::new();
        for c in &s.chunks {
            if c.encoding == ChunkEncoding::Histogram {
                let mut hs = Vec::new();
                tessera_encoding::decode_histogram_into(&c.data, &mut hs).expect("histogram chunk decodes");
                v.extend(hs.into_iter().map(|(t, h)| Sample::new(t, h.count as f64)));
                continue;
            }
            tessera_encoding::decode_chunk_range_into(c, i64::MIN, i64::MAX, &mut v).expect("chunk decodes");
        }
        for w in v.windows(2) {
            assert!(w[0].t < w[1].t, "samples sorted and unique");
        }
        for smp in v {
            let b = (smp.t / BATCH_SPAN) as u64;
            let j = (smp.t % BATCH_SPAN) / STEP;
            assert_eq!(smp.t % STEP, 0);
            assert_eq!(smp.v, value(b, k, j), "wrong value at t={} k={k}", smp.t);
            out.entry(b).or_insert([0; SHARDS])[shard] += 1;
        }
    }
    out
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_batch() {
    let trials: usize = std::env::var("TESSERA_CRASH_TRIALS").ok().and_then(|s| s.parse().ok()).unwrap_or(50);
    let seed: u64 = std::env::var("TESSERA_CRASH_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
    });
    eprintln!("crash test: {trials} trials, seed {seed} (TESSERA_CRASH_SEED to repeat)");
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
    let exe = std::env::current_exe().expect("current exe");
    // Per series, how many samples a shard must hold for a complete batch.
    let mut per_shard_full = [0usize; SHARDS];
    for k in 0..SERIES + HSERIES {
        per_shard_full[series_labels(k).shard(SHARDS)] += SAMPLES_PER_SERIES as usize;
    }

    let mut trial = 0;
    let mut total_acked = 0usize;
    while trial < trials {
        // A few crashes in a row on the same directory: later kills may hit the replay of earlier ones.
        let dir = tempfile::tempdir().expect("tmp");
        let mut acked: BTreeSet<u64> = BTreeSet::new();
        let mut next_first = 0u64;
        for _ in 0..5 {
            if trial >= trials {
                break;
            }
            trial += 1;
            let mut child = Command::new(&exe)
                .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
                .env("TESSERA_CRASH_CHILD", dir.path())
                .env("TESSERA_CRASH_FIRST", next_first.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("spawn child");
            let stdout = child.stdout.take().expect("piped");
            let (tx, rx) = std::sync::mpsc::channel::<String>();
            let reader = std::thread::spawn(move || {
                for line in BufReader::new(stdout).lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
            // Kill after a random delay counted from the child's start (sometimes during its open/replay),
            // or after a random number of ACKs.
            let delay = Duration::from_micros(rng.random_range(0..60_000));
            let ack_budget = rng.random_range(1..400usize);
            let start = Instant::now();
            let mut acks_seen = 0;
            loop {
                match rx.recv_timeout(Duration::from_millis(1)) {
                    Ok(l) => {
                        if let Some(id) = l.strip_prefix("ACK ") {
                            acked.insert(id.trim().parse().expect("ack id"));
                            acks_seen += 1;
                        }
                    }
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {}
                    Err(_) => break,
                }
                if (acks_seen >= ack_budget || start.elapsed() >= delay) && start.elapsed() >= Duration::from_micros(200) {
                    break;
                }
                if start.elapsed() > Duration::from_secs(20) {
                    break;
                }
            }
            child.kill().expect("SIGKILL child");
            let status = child.wait().expect("wait child");
            assert!(!status.success(), "child must have been killed, not finished");
            // Drain what the child printed before it died.
            drop(reader.join());
            for l in rx.try_iter() {
                if let Some(id) = l.strip_prefix("ACK ") {
                    acked.insert(id.trim().parse().expect("ack id"));
                }
            }

            let db = Db::open(dir.path(), opts()).expect("reopen after crash");
            let p = present(&db);
            for b in &acked {
                let got = p.get(b).copied().unwrap_or([0; SHARDS]);
                assert_eq!(got, per_shard_full, "acknowledged batch {b} incomplete (trial {trial}, seed {seed})");
            }
            for (b, got) in &p {
                for s in 0..SHARDS {
                    assert!(
                        got[s] == 0 || got[s] == per_shard_full[s],
                        "batch {b} partially present in shard {s}: {got:?} (trial {trial}, seed {seed})"
                    );
                }
            }
            // The database accepts writes again.
            let b = p.keys().last().copied().max(acked.last().copied()).map_or(0, |x| x + 1);
            let mut app = db.appender();
            for k in 0..SERIES {
                let s: Vec<Sample> =
                    (0..SAMPLES_PER_SERIES).map(|j| Sample::new(b as i64 * BATCH_SPAN + j * STEP, value(b, k, j))).collect();
                app.add(series_labels(k), &s);
            }
            for k in SERIES..SERIES + HSERIES {
                let h: Vec<HistogramSample> = (0..SAMPLES_PER_SERIES)
                    .map(|j| HistogramSample::new(b as i64 * BATCH_SPAN + j * STEP, HistogramValue::Int(hvalue(b, k, j))))
                    .collect();
                app.add_histograms(series_labels(k), h);
            }
            let rep = app.commit().expect("write after crash");
            assert!(rep.rejected.is_empty(), "write after crash rejected: {rep:?}");
            acked.insert(b);
            db.close().expect("close");
            drop(db);
            next_first = b + 1;
            total_acked += acked.len();
        }
    }
    eprintln!("crash test: {trials} trials done, {total_acked} acknowledged batch checks");
}
