//! Issue 13's union figure: a query through a union of two stores costs about what the same query costs
//! over one store holding both stores' data.
//!
//! In process, so that both sides hold exactly the same samples: the node_exporter-shaped fleet of
//! `--targets` hosts (half of them in store `a`, half in store `b`, all of them in store `one`) for
//! `--backfill` at 10 s scrapes, written in time order into three databases (then compacted, so the older
//! data sits in blocks and the newest in the heads, as on a live server). Then B3's dashboard range
//! queries over 1 h and the whole span, and the alerting rules, each evaluated `--runs` times through
//! the union of `a` and `b` (`tessera_api::union::UnionQueryable`, what `/store/<union>/` reads) and
//! over `one`, alternately, with the engine's default options. Prints the medians, their ratio and
//! whether the answers are identical (labels, timestamps and value bits), and the reproducing command.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tessera_model::{Labels, Queryable, Sample};
use tessera_promql::engine::{parse, Engine, EngineOptions, QueryOptions, Value};
use tessera_tsdb::db::Db;
use tessera_tsdb::options::Options;

use crate::nodegen::Target;
use crate::query_latency::{dashboard_step_ms, load_rules, DASHBOARD};
use crate::remote_write::parse_duration;

#[derive(clap::Args, Debug)]
pub struct Args {
    /// Simulated hosts (~1,300 series each): the first half in store a, the rest in store b.
    #[arg(long, default_value_t = 50)]
    pub targets: usize,
    /// Data span, ending at --end-ms.
    #[arg(long, default_value = "3h", value_parser = parse_duration)]
    pub backfill: Duration,
    /// The data's end (unix ms; default: a fixed hour, so runs are comparable).
    #[arg(long, default_value_t = 1_795_460_400_000)]
    pub end_ms: i64,
    /// Shards per store.
    #[arg(long, default_value_t = 2)]
    pub shards: usize,
    /// Timed runs per query and side (after one untimed run each).
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// The alerting rules (one expression per line).
    #[arg(long, default_value = "../shared/bench/node-alert-rules.txt")]
    pub rules: PathBuf,
    /// Where the three databases go (default: a temporary directory, removed at the end).
    #[arg(long)]
    pub dir: Option<PathBuf>,
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
}

fn open(dir: &std::path::Path, shards: usize) -> anyhow::Result<Arc<Db>> {
    let opts = Options { shards, retention_ms: 0, max_future_ms: 0, background: false, fsync: tessera_tsdb::FsyncPolicy::Never, ..Options::default() };
    Ok(Db::open(dir, opts)?)
}

/// Writes the fleet into `a`/`b` (by host) and `one`, 10 minutes of scrapes at a time, in time order.
fn load(args: &Args, a: &Db, b: &Db, one: &Db) -> anyhow::Result<u64> {
    let span = args.backfill.as_millis() as i64;
    let start = args.end_ms - span;
    let mut targets: Vec<Target> = (0..args.targets).map(|i| Target::new(i as u64, "node", args.seed)).collect();
    let mut written = 0u64;
    let window = 600_000;
    let mut t0 = start;
    while t0 < args.end_ms {
        let t1 = (t0 + window).min(args.end_ms);
        for (i, tg) in targets.iter_mut().enumerate() {
            let mut per: Vec<(Labels, Vec<Sample>)> = tg.series.iter().map(|s| (s.labels.clone(), Vec::new())).collect();
            let mut t = t0;
            while t < t1 {
                let mut k = 0;
                tg.scrape(t, 10.0, |_, s| {
                    per[k].1.push(s);
                    k += 1;
                });
                t += 10_000;
            }
            let half: &Db = if i < args.targets / 2 { a } else { b };
            for db in [half, one] {
                let mut app = db.appender();
                for (l, s) in &per {
                    app.add(l.clone(), s);
                }
                let r = app.commit()?;
                anyhow::ensure!(r.rejected.is_empty(), "samples rejected while loading: {:?}", r.rejected);
                written += r.samples_written;
            }
        }
        t0 = t1;
    }
    Ok(written / 2)
}

/// Whether two answers are the same: labels, timestamps and value bits.
fn identical(x: &Value, y: &Value) -> bool {
    match (x, y) {
        (Value::Matrix(p), Value::Matrix(q)) => {
            p.len() == q.len()
                && p.iter().zip(q).all(|(s, t)| {
                    s.labels == t.labels
                        && s.points.len() == t.points.len()
                        && s.points.iter().zip(&t.points).all(|(u, v)| u.0 == v.0 && u.1.to_bits() == v.1.to_bits())
                        && s.histograms.len() == t.histograms.len()
                })
        }
        (Value::Vector(p), Value::Vector(q)) => {
            p.len() == q.len() && p.iter().zip(q).all(|(s, t)| s.labels == t.labels && s.t_ms == t.t_ms && s.v.to_bits() == t.v.to_bits() && s.h.is_some() == t.h.is_some())
        }
        (Value::Scalar { t_ms: p, v: x }, Value::Scalar { t_ms: q, v: y }) => p == q && x.to_bits() == y.to_bits(),
        _ => false,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

pub fn run(args: Args) -> anyhow::Result<()> {
    anyhow::ensure!(args.targets >= 2, "--targets: at least 2 (one host per store)");
    anyhow::ensure!(args.runs >= 1, "--runs: at least 1");
    let rules = load_rules(&args.rules)?;
    let tmp = tempfile::tempdir()?;
    let root = args.dir.clone().unwrap_or_else(|| tmp.path().to_path_buf());
    let dbs: Vec<Arc<Db>> = ["a", "b", "one"].iter().map(|n| open(&root.join(n), args.shards)).collect::<anyhow::Result<_>>()?;
    let (a, b, one) = (&dbs[0], &dbs[1], &dbs[2]);
    let t = Instant::now();
    let samples = load(&args, a, b, one)?;
    for db in &dbs {
        db.compact()?;
    }
    println!(
        "union-cost: {} hosts, {samples} samples in a+b and in one ({:.1} s to load and compact); {} series in one",
        args.targets,
        t.elapsed().as_secs_f64(),
        one.stats().head_series
    );
    let union = tessera_api::union::UnionQueryable::new(vec![(a.clone(), Labels::default()), (b.clone(), Labels::default())]);
    let engine = Engine::new(EngineOptions::default());
    let qo = QueryOptions::default();
    let span = args.backfill.as_millis() as i64;
    // (name, expression, range query's window and step or an instant query)
    type Query = (String, String, Option<(i64, i64)>);
    let mut queries: Vec<Query> = Vec::new();
    for w in [3_600_000i64, span] {
        for (name, q) in DASHBOARD {
            queries.push((format!("range {name} {}", tessera_promql::engine::tier::fmt_res(w)), q.to_string(), Some((w, dashboard_step_ms(w)))));
        }
    }
    for (i, q) in rules.iter().enumerate() {
        queries.push((format!("rule r{:02}", i + 1), q.clone(), None));
    }
    let eval = |q: &dyn Queryable, expr: &tessera_promql::parser::Expr, range: Option<(i64, i64)>| -> anyhow::Result<(f64, Value)> {
        let s = Instant::now();
        let r = match range {
            Some((w, step)) => engine.range_expr(q, expr, args.end_ms - w, args.end_ms, step, &qo)?,
            None => engine.instant_expr(q, expr, args.end_ms, &qo)?,
        };
        Ok((s.elapsed().as_secs_f64() * 1e3, r.value))
    };
    println!("\n| query | one store ms | union ms | union / one | answers |\n|---|---|---|---|---|");
    let (mut sum_one, mut sum_union, mut differ) = (0.0, 0.0, 0usize);
    let (mut sum_range_one, mut sum_range_union) = (0.0, 0.0);
    for (name, q, range) in &queries {
        let expr = parse(q).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        let (_, vo) = eval(&**one, &expr, *range)?;
        let (_, vu) = eval(&union, &expr, *range)?;
        let (mut to, mut tu) = (Vec::new(), Vec::new());
        for _ in 0..args.runs {
            to.push(eval(&**one, &expr, *range)?.0);
            tu.push(eval(&union, &expr, *range)?.0);
        }
        let (mo, mu) = (median(to), median(tu));
        let same = identical(&vo, &vu);
        differ += usize::from(!same);
        sum_one += mo;
        sum_union += mu;
        if range.is_some() {
            sum_range_one += mo;
            sum_range_union += mu;
        }
        println!("| {name} | {mo:.2} | {mu:.2} | {:.2} | {} |", mu / mo.max(1e-9), if same { "identical" } else { "DIFFERENT" });
    }
    println!("| all range queries (sum of medians) | {sum_range_one:.1} | {sum_range_union:.1} | {:.2} | |", sum_range_union / sum_range_one.max(1e-9));
    println!("| all {} queries (sum of medians) | {sum_one:.1} | {sum_union:.1} | {:.2} | {} differ |", queries.len(), sum_union / sum_one.max(1e-9), differ);
    println!(
        "\nmedians of {} runs after one untimed run each; reproduce: tessera-bench union-cost --targets {} --backfill {}s --end-ms {} --shards {} --runs {} --seed {}",
        args.runs,
        args.targets,
        args.backfill.as_secs(),
        args.end_ms,
        args.shards,
        args.runs,
        args.seed
    );
    anyhow::ensure!(differ == 0, "{differ} queries answered differently through the union");
    Ok(())
}
