//! `tessera-bench disk-usage`: bytes on disk of a data directory and the memory of a server process,
//! for B2's "bytes per sample on disk" and "RSS per active series".
//!
//! Disk: the sum of file sizes under `--dir` (apparent) and of allocated blocks (what `du` reports).
//! Memory: `VmRSS` (now) and `VmHWM` (peak) from `/proc/<pid>/status`. Given `--samples` and
//! `--series`, it divides.

use std::path::Path;

#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    /// Data directory to measure.
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Process whose RSS to read (Linux /proc).
    #[arg(long)]
    pub pid: Option<u32>,
    /// Samples stored (for bytes per sample).
    #[arg(long)]
    pub samples: Option<u64>,
    /// Active series (for RSS per series).
    #[arg(long)]
    pub series: Option<u64>,
}

/// (apparent bytes, allocated bytes, files) under `dir`, symlinks not followed.
pub fn dir_usage(dir: &Path) -> std::io::Result<(u64, u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let (mut apparent, mut allocated, mut files) = (0u64, 0u64, 0u64);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let md = std::fs::symlink_metadata(e.path())?;
            if md.is_dir() {
                stack.push(e.path());
            } else if md.is_file() {
                apparent += md.len();
                allocated += md.blocks() * 512;
                files += 1;
            }
        }
    }
    Ok((apparent, allocated, files))
}

/// What the blocks under a data directory hold: every directory with a `meta.json` (Tessera's block
/// layout: `chunks/`, `index`), its samples from `stats.num_samples`.
#[derive(Debug, Default, PartialEq)]
pub struct BlocksUsage {
    pub blocks: u64,
    pub samples: u64,
    pub chunks: u64,
    pub index: u64,
}

pub fn blocks_usage(dir: &Path) -> anyhow::Result<BlocksUsage> {
    let mut u = BlocksUsage::default();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let meta = d.join("meta.json");
        if meta.is_file() && d.join("index").is_file() {
            let m: serde_json::Value = serde_json::from_slice(&std::fs::read(&meta)?)?;
            u.blocks += 1;
            u.samples += m["stats"]["num_samples"].as_u64().unwrap_or(0);
            u.index += std::fs::metadata(d.join("index"))?.len();
            u.chunks += dir_usage(&d.join("chunks")).map(|(a, _, _)| a).unwrap_or(0);
            continue;
        }
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            if e.file_type()?.is_dir() {
                stack.push(e.path());
            }
        }
    }
    Ok(u)
}

/// (VmRSS, VmHWM) in bytes from `/proc/<pid>/status`.
pub fn proc_memory(pid: u32) -> std::io::Result<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    Ok(parse_status(&status))
}

fn parse_status(status: &str) -> (u64, u64) {
    let kb = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|k| k * 1024)
            .unwrap_or(0)
    };
    (kb("VmRSS:"), kb("VmHWM:"))
}

fn mib(b: u64) -> f64 {
    b as f64 / (1024.0 * 1024.0)
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.dir.is_some() || args.pid.is_some(), "give --dir and/or --pid");
    if let Some(dir) = &args.dir {
        let (apparent, allocated, files) = dir_usage(dir)?;
        println!("disk {}: {apparent} bytes in {files} files ({:.1} MiB; {:.1} MiB allocated)", dir.display(), mib(apparent), mib(allocated));
        if let Some(n) = args.samples.filter(|&n| n > 0) {
            println!("bytes per sample: {:.3} (apparent), {:.3} (allocated) over {n} samples", apparent as f64 / n as f64, allocated as f64 / n as f64);
        }
        let b = blocks_usage(dir)?;
        if b.blocks > 0 && b.samples > 0 {
            let per = |x: u64| x as f64 / b.samples as f64;
            println!(
                "blocks: {} holding {} samples: chunks {:.3}, index {:.3}, total {:.3} bytes per sample",
                b.blocks,
                b.samples,
                per(b.chunks),
                per(b.index),
                per(b.chunks + b.index)
            );
        }
    }
    if let Some(pid) = args.pid {
        let (rss, hwm) = proc_memory(pid)?;
        println!("pid {pid}: VmRSS {rss} bytes ({:.1} MiB), VmHWM {hwm} bytes ({:.1} MiB)", mib(rss), mib(hwm));
        if let Some(n) = args.series.filter(|&n| n > 0) {
            println!("RSS per active series: {:.0} bytes now, {:.0} bytes at peak over {n} series", rss as f64 / n as f64, hwm as f64 / n as f64);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_proc_status() {
        let s = "Name:\ttessera\nVmHWM:\t  204800 kB\nVmRSS:\t  102400 kB\n";
        assert_eq!(parse_status(s), (100 << 20, 200 << 20));
        let (rss, hwm) = proc_memory(std::process::id()).expect("own status");
        assert!(rss > 0 && hwm >= rss);
    }

    #[test]
    fn sums_a_directory_tree() {
        let d = std::env::temp_dir().join(format!("tessera-bench-du-{}", std::process::id()));
        std::fs::create_dir_all(d.join("a/b")).expect("mkdir");
        std::fs::write(d.join("x"), vec![0u8; 1000]).expect("write");
        std::fs::write(d.join("a/b/y"), vec![0u8; 24]).expect("write");
        let (apparent, _, files) = dir_usage(&d).expect("walk");
        assert_eq!((apparent, files), (1024, 2));
        // A block: meta.json with its samples, an index and chunk segments.
        let blk = d.join("shard-000/01ABC");
        std::fs::create_dir_all(blk.join("chunks")).expect("mkdir");
        std::fs::write(blk.join("meta.json"), r#"{"stats":{"num_samples":500}}"#).expect("write");
        std::fs::write(blk.join("index"), vec![0u8; 100]).expect("write");
        std::fs::write(blk.join("chunks/000001"), vec![0u8; 300]).expect("write");
        let b = blocks_usage(&d).expect("walk");
        std::fs::remove_dir_all(&d).expect("cleanup");
        assert_eq!(b, BlocksUsage { blocks: 1, samples: 500, chunks: 300, index: 100 });
    }
}
