//! `tessera-bench`: see the crate docs in lib.rs. One subcommand per harness.
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "tessera-bench", about = "Tessera's benchmark harnesses and load generators")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// B1: bulk ingest of 10 series × N points through the embedded API ("billions").
    Billions(tessera_bench::billions::Args),
    /// B2: remote-write load generator (node_exporter-shaped fleet) against any receiver URL.
    RemoteWrite(tessera_bench::remote_write::Args),
    /// B3: PromQL latency on fleet data (35 alerting rules, dashboard range queries) against any
    /// Prometheus-API URL, optionally loading the data first; answers checksummed for comparison.
    B3(tessera_bench::query_latency::Args),
    /// B4: remote read (SAMPLES and STREAMED_XOR_CHUNKS) against any URL, checked, with server RSS growth.
    RemoteRead(tessera_bench::remote_read::Args),
    /// B5 (result cache): a dashboard refreshed every 10 s with a moving end while the fleet writes in
    /// real time; cached against `nocache=1` latency and the share of steps served from the cache.
    B5(tessera_bench::dashboard::Args),
    /// B5 (downsampling): 30-day queries at a 1 h step over ~10,000 series, from a tier against raw
    /// data (`raw=1`) on one server, answers compared, tier bytes against raw bytes.
    B5Tiers(tessera_bench::tiers::Args),
    /// B6: point queries at high QPS from many concurrent clients against any Prometheus-API URL.
    B6(tessera_bench::point_queries::Args),
    /// Bytes on disk of a data directory and RSS of a process (B2's per-sample and per-series figures).
    DiskUsage(tessera_bench::disk_usage::Args),
    /// Randomised differential test of PromQL: the same data and queries against Tessera and Prometheus.
    PromqlDiff(tessera_bench::promql_diff::Args),
    /// Issue 9's mixed hostile soak against a running server: valid and hostile writes, reproducers and
    /// random queries, RSS and health monitored, every acknowledged sample read back.
    Hostile(tessera_bench::hostile::Args),
    /// Native-histogram query latency (`histogram_quantile(0.99, sum(rate()))` and friends), Tessera
    /// against Prometheus on the same data, answers compared.
    HistQuery(tessera_bench::hist_query::Args),
    /// Issue 13: one store flooded past its ingestion rate against another store's write latency.
    StoreIsolation(tessera_bench::store_isolation::Args),
    /// Issue 13's union figure: queries through a union of two stores against one store holding both.
    UnionCost(tessera_bench::union_cost::Args),
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Billions(a) => tessera_bench::billions::run(a),
        Cmd::RemoteWrite(a) => tessera_bench::remote_write::run(a),
        Cmd::B3(a) => tessera_bench::query_latency::run(a),
        Cmd::B5(a) => tessera_bench::dashboard::run(a),
        Cmd::B5Tiers(a) => tessera_bench::tiers::run(a),
        Cmd::B6(a) => tessera_bench::point_queries::run(a),
        Cmd::RemoteRead(a) => tessera_bench::remote_read::run(a),
        Cmd::DiskUsage(a) => tessera_bench::disk_usage::run(a),
        Cmd::PromqlDiff(a) => tessera_bench::promql_diff::run(a),
        Cmd::Hostile(a) => tessera_bench::hostile::run(a),
        Cmd::HistQuery(a) => tessera_bench::hist_query::run(a),
        Cmd::StoreIsolation(a) => tessera_bench::store_isolation::run(a),
        Cmd::UnionCost(a) => tessera_bench::union_cost::run(a),
    }
}
