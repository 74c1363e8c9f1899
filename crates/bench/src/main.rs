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
}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {
        Cmd::Billions(a) => tessera_bench::billions::run(a),
    }
}
