//! Codec throughput on B2-shaped requests (2,000 series × 1 sample, node_exporter-like labels).
//! Not a timed test: `#[ignore]`d; run with
//! `cargo test --release -p tessera-protocol --test throughput -- --ignored --nocapture`.

use std::time::Instant;

/// CPU time of this thread in seconds (/proc/thread-self/schedstat), so that figures mean something on
/// a machine shared with other work; falls back to wall time elsewhere.
struct Clock(Instant, Option<u64>);

fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat").ok()?.split_whitespace().next()?.parse().ok()
}

impl Clock {
    fn start() -> Self {
        Clock(Instant::now(), cpu_ns())
    }
    fn secs(&self) -> f64 {
        match (self.1, cpu_ns()) {
            (Some(a), Some(b)) => (b - a) as f64 / 1e9,
            _ => self.0.elapsed().as_secs_f64(),
        }
    }
}
use tessera_model::{Labels, Sample};
use tessera_protocol::remote_write::*;

fn series(n: usize) -> Vec<WriteSeries> {
    (0..n)
        .map(|i| {
            let l = Labels::from_pairs([
                ("__name__", format!("node_metric_{}_total", i % 150)),
                ("cpu", (i % 16).to_string()),
                ("instance", format!("host-{:06}:9100", i / 1200)),
                ("job", "node".to_string()),
                ("mode", ["idle", "user", "system", "iowait"][i % 4].to_string()),
            ]);
            WriteSeries::new(l, vec![Sample::new(1_700_000_000_000 + i as i64, 12345.67 + i as f64)])
        })
        .collect()
}

#[test]
#[ignore]
fn decode_and_encode_throughput() {
    let s = series(2000);
    for v in [ProtoVersion::V1, ProtoVersion::V2] {
        let raw = match v {
            ProtoVersion::V1 => encode_v1(&s, &[]),
            ProtoVersion::V2 => encode_v2(&s, &[]),
        };
        let body = compress(&raw);
        let iters = 300;
        let t = Clock::start();
        let mut n = 0;
        for _ in 0..iters {
            let buf = decompress(&body, 64 << 20).expect("snappy");
            let d = decode(v, &buf, &Limits::default()).expect("decode");
            n += d.valid_samples();
        }
        let dec = n as f64 / t.secs();
        let t = Clock::start();
        let mut n = 0;
        for _ in 0..iters {
            let buf = decompress(&body, 64 << 20).expect("snappy");
            let d = decode_ref(v, &buf, &Limits::default()).expect("decode");
            n += d.valid_samples();
        }
        let dec_ref = n as f64 / t.secs();
        let t = Clock::start();
        let mut n = 0;
        for _ in 0..iters {
            n += decompress(&body, 64 << 20).expect("snappy").len();
        }
        let snappy_mbs = n as f64 / t.secs() / 1e6;
        let buf = decompress(&body, 64 << 20).expect("snappy");
        let t = Clock::start();
        let mut n = 0;
        for _ in 0..iters {
            n += decode_ref(v, &buf, &Limits::default()).expect("decode").valid_samples();
        }
        let walk = n as f64 / t.secs();
        println!("{v:?}: snappy decompress {snappy_mbs:.0} MB/s; decode_ref alone {:.2} M samples/s", walk / 1e6);
        let t = Clock::start();
        let mut bytes = 0;
        for _ in 0..iters {
            let raw = match v {
                ProtoVersion::V1 => encode_v1(&s, &[]),
                ProtoVersion::V2 => encode_v2(&s, &[]),
            };
            bytes += compress(&raw).len();
        }
        let enc = (iters * 2000) as f64 / t.secs();
        println!(
            "{v:?}: raw {} B, snappy {} B per 2000-sample request; decompress+decode {:.2} M samples/s (decode_ref {:.2} M/s); encode+compress {:.2} M samples/s ({} B)",
            raw.len(),
            body.len(),
            dec / 1e6,
            dec_ref / 1e6,
            enc / 1e6,
            bytes / iters
        );
    }
}
