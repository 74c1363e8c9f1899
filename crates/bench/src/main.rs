//! `tessera-bench`: see the crate docs in lib.rs. One subcommand per harness.
use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "tessera-bench", about = "Tessera's benchmark harnesses and load generators")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {}

fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.cmd {}
}
