//! Codec throughput on B2-shaped requests (2,000 series × 1 sample, node_exporter-like labels).
//! Not a timed test: `#[ignore]`d; run with
//! `cargo test --release -p tessera-protocol --test throughput -- --ignored --nocapture`.

use std::time::Instant;
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
        let t = Instant::now();
        let mut n = 0;
        for _ in 0..iters {
            let buf = decompress(&body, 64 << 20).expect("snappy");
            let d = decode(v, &buf, &Limits::default()).expect("decode");
            n += d.valid_samples();
        }
        let dec = n as f64 / t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut n = 0;
        for _ in 0..iters {
            let buf = decompress(&body, 64 << 20).expect("snappy");
            let d = decode_ref(v, &buf, &Limits::default()).expect("decode");
            n += d.valid_samples();
        }
        let dec_ref = n as f64 / t.elapsed().as_secs_f64();
        let t = Instant::now();
        let mut bytes = 0;
        for _ in 0..iters {
            let raw = match v {
                ProtoVersion::V1 => encode_v1(&s, &[]),
                ProtoVersion::V2 => encode_v2(&s, &[]),
            };
            bytes += compress(&raw).len();
        }
        let enc = (iters * 2000) as f64 / t.elapsed().as_secs_f64();
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
