//! Checkpoints, after Prometheus' `wlog.Checkpoint`: when the head drops old data, the tsdb collects the
//! records it still needs from the old segments (live series, tombstones, …), writes them as a
//! checkpoint, and then deletes those segments. Replay reads the latest checkpoint, then the segments
//! from its index on.
//!
//! Naming (differs from Prometheus by one): `checkpoint.N` holds the state of every segment **below** `N`;
//! replay continues with segment `N`. A checkpoint directory holds ordinary segment files
//! (`00000000`, …) in the WAL format.
//!
//! Atomicity: the checkpoint is written to `checkpoint.N.tmp`, every file and the directory are fsynced,
//! and only then is it renamed to `checkpoint.N` (and the WAL directory fsynced). A crash leaves either no
//! checkpoint (the `.tmp` leftover is ignored and removed by the next attempt) or a complete one.

use crate::error::WalError;
use crate::format::{checkpoint_dir_name, parse_checkpoint_name, CHECKPOINT_PREFIX, TMP_SUFFIX};
use crate::fs::{RealFs, WalFs};
use crate::reader::WalReader;
use crate::writer::{latest_checkpoint_index, Wal};
use crate::{FsyncPolicy, WalOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Records are handed to the checkpoint's writer in batches of about this size (one write each).
const CHECKPOINT_BATCH_BYTES: usize = 1 << 20;

/// Writes `records` atomically as `wal_dir/checkpoint.<upto_segment>` and returns its path.
///
/// The checkpoint stands for every segment with index `< upto_segment`; after this returns, the caller
/// may delete those segments ([`Wal::truncate_before`]`(upto_segment)`). Older checkpoints are deleted
/// once the new one is in place; an existing checkpoint with the same index is replaced. Records keep the
/// iterator's order. On error no new checkpoint is visible and the previous one is untouched.
pub fn write_checkpoint(
    wal_dir: &Path,
    upto_segment: u64,
    records: impl Iterator<Item = Vec<u8>>,
) -> Result<PathBuf, WalError> {
    write_checkpoint_with_fs(Arc::new(RealFs), wal_dir, upto_segment, records)
}

/// [`write_checkpoint`] through a given file system.
pub fn write_checkpoint_with_fs(
    fs: Arc<dyn WalFs>,
    wal_dir: &Path,
    upto_segment: u64,
    records: impl Iterator<Item = Vec<u8>>,
) -> Result<PathBuf, WalError> {
    let final_dir = wal_dir.join(checkpoint_dir_name(upto_segment));
    let tmp_dir = wal_dir.join(format!("{}{TMP_SUFFIX}", checkpoint_dir_name(upto_segment)));
    remove_dir_if_exists(fs.as_ref(), &tmp_dir)?;

    // No per-write fsyncs (nothing is visible before the rename), but every finished segment must be
    // durable before the rename: an "interval" that never elapses syncs exactly on rotation and close.
    let opts = WalOptions { segment_bytes: WalOptions::DEFAULT_SEGMENT_BYTES, fsync: FsyncPolicy::Interval(Duration::MAX) };
    let mut w = Wal::open_with_fs(Arc::clone(&fs), &tmp_dir, opts)?;
    let mut batch: Vec<Vec<u8>> = Vec::new();
    let mut batch_bytes = 0usize;
    for rec in records {
        batch_bytes += rec.len();
        batch.push(rec);
        if batch_bytes >= CHECKPOINT_BATCH_BYTES {
            log_batch(&mut w, &batch)?;
            batch.clear();
            batch_bytes = 0;
        }
    }
    log_batch(&mut w, &batch)?;
    w.close()?;
    fs.sync_dir(&tmp_dir).map_err(|e| WalError::io(&tmp_dir, e))?;

    // Like Prometheus' fileutil.Replace: the destination must not exist for the rename.
    remove_dir_if_exists(fs.as_ref(), &final_dir)?;
    fs.rename(&tmp_dir, &final_dir).map_err(|e| WalError::io(&final_dir, e))?;
    fs.sync_dir(wal_dir).map_err(|e| WalError::io(wal_dir, e))?;

    // Prometheus' DeleteCheckpoints: older checkpoints are now redundant. Failing to delete one is not
    // an error of this checkpoint (replay always picks the latest); it is retried next time.
    for (name, idx) in list_checkpoints(fs.as_ref(), wal_dir)? {
        if idx < upto_segment {
            let p = wal_dir.join(&name);
            if let Err(e) = fs.remove_dir_all(&p) {
                tracing::warn!(dir = %p.display(), error = %e, "WAL: could not delete old checkpoint");
            }
        }
    }
    Ok(final_dir)
}

fn log_batch(w: &mut Wal, batch: &[Vec<u8>]) -> Result<(), WalError> {
    if batch.is_empty() {
        return Ok(());
    }
    let refs: Vec<&[u8]> = batch.iter().map(Vec::as_slice).collect();
    w.log_many(&refs)
}

fn remove_dir_if_exists(fs: &dyn WalFs, dir: &Path) -> Result<(), WalError> {
    match fs.remove_dir_all(dir) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(WalError::io(dir, e)),
    }
}

/// Finished checkpoints in `dir` as (dir name, index); `.tmp` leftovers are excluded.
fn list_checkpoints(fs: &dyn WalFs, dir: &Path) -> Result<Vec<(String, u64)>, WalError> {
    let entries = match fs.list(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(WalError::io(dir, e)),
    };
    Ok(entries
        .into_iter()
        .filter(|e| e.is_dir && e.name.starts_with(CHECKPOINT_PREFIX))
        .filter_map(|e| parse_checkpoint_name(&e.name).map(|i| (e.name, i)))
        .collect())
}

/// The latest finished checkpoint of `wal_dir`: its path and index `N` (it covers segments `< N`).
pub fn last_checkpoint(wal_dir: &Path) -> Result<Option<(PathBuf, u64)>, WalError> {
    Ok(latest_checkpoint_index(&RealFs, wal_dir)?.map(|i| (wal_dir.join(checkpoint_dir_name(i)), i)))
}

/// What a [`read_all`] replay saw.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReplayStats {
    /// Index of the checkpoint replayed first, if any.
    pub checkpoint: Option<u64>,
    /// Records passed to the callback from the checkpoint.
    pub checkpoint_records: u64,
    /// Records passed to the callback from segments.
    pub segment_records: u64,
    /// Payload bytes passed to the callback in total.
    pub bytes: u64,
    /// `(first, last)` segment replayed, if any.
    pub segments: Option<(u64, u64)>,
    /// Torn tails truncated during the replay (0 or 1).
    pub torn_tails_repaired: u32,
}

/// Replays a WAL directory: the latest checkpoint's records, then every record of segments `>= N` (all
/// segments without a checkpoint), in order, passing each to `f`. A torn tail of the last segment is
/// truncated (with a warning). Stops at the first error: a [`WalError`] (converted with `E::from`; match
/// [`WalError::Corruption`] to decide on [`crate::repair`]) or the callback's own error. Records before the
/// error have been passed to `f`. Run it before opening the [`Wal`] writer.
///
/// After a corruption, [`crate::repair`] cuts the log at the damage. If the damage was in a WAL segment,
/// every record that survives the repair has already been passed to `f`: do not replay again. If it was
/// in the checkpoint ([`crate::Corruption::in_checkpoint`]), the segments after the checkpoint have not
/// been replayed yet: continue with `WalReader::from_segment(wal_dir, N)` (or replay everything again
/// with an idempotent `f`).
pub fn read_all<E: From<WalError>>(
    wal_dir: &Path,
    f: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<ReplayStats, E> {
    read_all_with_fs(Arc::new(RealFs), wal_dir, f)
}

/// [`read_all`] through a given file system.
pub fn read_all_with_fs<E: From<WalError>>(
    fs: Arc<dyn WalFs>,
    wal_dir: &Path,
    mut f: impl FnMut(&[u8]) -> Result<(), E>,
) -> Result<ReplayStats, E> {
    read_all_at_with_fs(fs, wal_dir, |_, rec| f(rec))
}

/// Where a record handed out by [`read_all_at`] comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordAt {
    /// The checkpoint of that index.
    Checkpoint(u64),
    /// The segment of that index.
    Segment(u64),
}

/// [`read_all`], telling the callback which checkpoint or segment each record comes from (for record
/// encodings whose state starts afresh in every segment).
pub fn read_all_at<E: From<WalError>>(wal_dir: &Path, f: impl FnMut(RecordAt, &[u8]) -> Result<(), E>) -> Result<ReplayStats, E> {
    read_all_at_with_fs(Arc::new(RealFs), wal_dir, f)
}

/// [`read_all_at`] through a given file system.
pub fn read_all_at_with_fs<E: From<WalError>>(
    fs: Arc<dyn WalFs>,
    wal_dir: &Path,
    mut f: impl FnMut(RecordAt, &[u8]) -> Result<(), E>,
) -> Result<ReplayStats, E> {
    let mut stats = ReplayStats::default();
    let mut first = 0;
    if let Some(n) = latest_checkpoint_index(fs.as_ref(), wal_dir)? {
        let mut r = WalReader::with_fs(Arc::clone(&fs), &wal_dir.join(checkpoint_dir_name(n)), 0, false)?;
        while let Some(rec) = r.next_record()? {
            stats.checkpoint_records += 1;
            stats.bytes += rec.len() as u64;
            f(RecordAt::Checkpoint(n), rec)?;
        }
        stats.checkpoint = Some(n);
        first = n;
    }
    let mut r = WalReader::with_fs(fs, wal_dir, first, true)?;
    stats.segments = r.segments().first().zip(r.segments().last()).map(|(a, b)| (*a, *b));
    while let Some((seg, rec)) = r.next_record_at()? {
        stats.segment_records += 1;
        stats.bytes += rec.len() as u64;
        f(RecordAt::Segment(seg), rec)?;
    }
    stats.torn_tails_repaired = r.torn_tails_repaired();
    Ok(stats)
}
