//! A union store answers as one store holding all its members' data: random series spread over two
//! stores (some in both, the shared samples equal, as an HA pair writes them), random range queries of
//! the shapes dashboards and rules use, compared with the same data written into one store — with equal
//! shard counts (the union keeps per-shard pushdown) and unequal ones (one union shard).

use tessera_api::union::UnionQueryable;
use tessera_model::{Labels, Sample};
use tessera_promql::engine::{parse, Engine, EngineOptions, QueryOptions, Value};
use tessera_tsdb::db::Db;
use tessera_tsdb::options::Options;

const MIN: i64 = 60_000;
const T0: i64 = 1_700_000_000_000;

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

fn open(dir: &std::path::Path, shards: usize) -> std::sync::Arc<Db> {
    Db::open(dir, Options { shards, background: false, max_future_ms: 0, fsync: tessera_tsdb::FsyncPolicy::Never, ..Options::default() })
        .expect("open")
}

const QUERIES: &[&str] = &[
    "m",
    "rate(m[5m])",
    "sum by (job) (rate(m[5m]))",
    "count(m)",
    "max_over_time(m[10m])",
    "m{job=\"b\"} * 2",
    "topk(3, m)",
    "sum(m) / count(m)",
    "increase(m[15m])",
    "count_values(\"v\", round(m / 100))",
    "absent(nope)",
    "m and on(i) m{job=\"a\"}",
];

fn close(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-9 * a.abs().max(b.abs())
}

#[test]
fn a_union_answers_as_one_store_holding_both() {
    for (seed, shards_b) in [(1u64, 2), (7, 2), (42, 3)] {
        let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tmp")).collect();
        let (a, b, one) = (open(dirs[0].path(), 2), open(dirs[1].path(), shards_b), open(dirs[2].path(), 2));
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        // Per store, per series: its samples; written below in time order, 10 minutes at a time.
        let mut data: Vec<[(Labels, Vec<Sample>); 3]> = Vec::new();
        for i in 0..24 {
            let l = Labels::from_pairs([("__name__", "m".to_string()), ("i", i.to_string()), ("job", ["a", "b", "c"][i % 3].to_string())]);
            let mut v = 0.0;
            let (mut in_a, mut in_b, mut all) = (Vec::new(), Vec::new(), Vec::new());
            let mut t = T0 + rng.below(60_000) as i64;
            while t < T0 + 3 * 60 * MIN {
                v += rng.below(100) as f64;
                if rng.below(50) == 0 {
                    v = 0.0;
                }
                let s = Sample::new(t, v);
                // Mostly in one store; a third of the series in both, with gaps in each.
                match (i % 3, rng.below(10)) {
                    (0, _) => in_a.push(s),
                    (1, _) => in_b.push(s),
                    (_, 0) => in_a.push(s),
                    (_, 1) => in_b.push(s),
                    _ => {
                        in_a.push(s);
                        in_b.push(s);
                    }
                }
                all.push(s);
                t += 15_000;
            }
            data.push([(l.clone(), in_a), (l.clone(), in_b), (l, all)]);
        }
        for w in 0..18 {
            let (lo, hi) = (T0 + w * 10 * MIN, T0 + (w + 1) * 10 * MIN);
            for (k, db) in [&a, &b, &one].into_iter().enumerate() {
                let mut app = db.appender();
                for d in &data {
                    let s: Vec<Sample> = d[k].1.iter().filter(|s| s.t >= lo && s.t < hi).copied().collect();
                    app.add(d[k].0.clone(), &s);
                }
                let r = app.commit().expect("commit");
                assert!(r.rejected.is_empty(), "{r:?}");
            }
        }
        // Some data in blocks, some in the heads.
        a.flush().expect("flush");
        let union = UnionQueryable { members: vec![(a.clone(), Labels::default()), (b.clone(), Labels::default())] };
        let e = Engine::new(EngineOptions::default());
        for k in 0..60 {
            let q = QUERIES[k % QUERIES.len()];
            let step = [15_000, 60_000, 300_000][rng.below(3) as usize];
            let start = T0 + rng.below(120) as i64 * MIN;
            let end = start + step * rng.below(100) as i64;
            let expr = parse(q).expect("parses");
            let qo = QueryOptions::default();
            let u = e.range_expr(&union, &expr, start, end, step, &qo).unwrap_or_else(|err| panic!("{q}: {err}"));
            let o = e.range_expr(&*one, &expr, start, end, step, &qo).unwrap_or_else(|err| panic!("{q}: {err}"));
            let (Value::Matrix(x), Value::Matrix(y)) = (&u.value, &o.value) else { panic!("{q}: not matrices") };
            assert_eq!(x.len(), y.len(), "seed {seed}: {q} over [{start}, {end}] step {step}: series");
            for (s, t) in x.iter().zip(y) {
                assert_eq!(s.labels, t.labels, "{q}");
                assert_eq!(s.points.len(), t.points.len(), "seed {seed}: {q}: points of {}", s.labels);
                for (p, r) in s.points.iter().zip(&t.points) {
                    assert!(p.0 == r.0 && close(p.1, r.1), "seed {seed}: {q} at {}: {} vs {}", p.0, p.1, r.1);
                }
            }
            assert_eq!(u.warnings, o.warnings, "{q}");
        }
    }
}
