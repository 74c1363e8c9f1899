//! Throughput of `Wal::log` with 64 KiB records and `FsyncPolicy::Never` (the page cache absorbs the
//! writes, so this measures framing + CRC32C + write(2) cost). Run:
//! `cargo bench -p tessera-wal --bench wal`.

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use tessera_wal::{FsyncPolicy, Wal, WalOptions};

fn bench_log(c: &mut Criterion) {
    let dir = tempfile::tempdir().expect("tempdir");
    let opts = WalOptions { segment_bytes: 128 << 20, fsync: FsyncPolicy::Never };
    let mut wal = Wal::open(dir.path(), opts).expect("open wal");
    let record: Vec<u8> = (0..64 * 1024u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let mut g = c.benchmark_group("wal");
    g.throughput(Throughput::Bytes(record.len() as u64));
    g.bench_function("log_64KiB_never", |b| {
        b.iter(|| {
            wal.log(&record).expect("log");
            // Keep the disk footprint bounded during long runs.
            if wal.size_bytes() > 256 << 20 {
                let (_, last) = wal.segment_range();
                wal.truncate_before(last).expect("truncate");
            }
        })
    });
    let small: Vec<Vec<u8>> = (0..64).map(|i| vec![i as u8; 1024]).collect();
    let refs: Vec<&[u8]> = small.iter().map(Vec::as_slice).collect();
    g.throughput(Throughput::Bytes(64 * 1024));
    g.bench_function("log_many_64x1KiB_never", |b| {
        b.iter(|| {
            wal.log_many(&refs).expect("log_many");
            if wal.size_bytes() > 256 << 20 {
                let (_, last) = wal.segment_range();
                wal.truncate_before(last).expect("truncate");
            }
        })
    });
    g.finish();
}

criterion_group!(benches, bench_log);
criterion_main!(benches);
