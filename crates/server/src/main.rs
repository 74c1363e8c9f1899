//! `tessera`: the Tessera server binary.
//!
//! Thin by design: it parses flags and the config file ([`config`]), sets up logging, opens the
//! database and serves `tessera_api::router` ([`serve`]). Everything worth testing on its own lives in
//! `tessera-api` and `tessera-tsdb`; this crate's tests run the real binary end to end.
#![forbid(unsafe_code)]

mod config;
mod serve;
mod tls;

use clap::{Parser, Subcommand};

/// Tessera: a Prometheus-compatible time-series database. Prometheus (or any remote-write sender)
/// pushes into it; Grafana and Prometheus API clients read from it.
#[derive(Debug, Parser)]
#[command(name = "tessera", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
// Parsed once at start-up: the size difference between the variants costs nothing.
#[allow(clippy::large_enum_variant)]
enum Command {
    /// Run the server: remote write at /api/v1/write, Prometheus' HTTP API at /api/v1/*, /metrics,
    /// /-/healthy and /-/ready, on an embedded store in --storage.tsdb.path.
    Serve(config::ServeArgs),
    /// Run promqltest conformance scripts (Prometheus' `.test` format) against Tessera's PromQL engine:
    /// prints each failure (file:line, query, expected, got) and per-file pass/fail counts; exits 1 on
    /// any failure.
    Promqltest {
        /// The `.test` files to run.
        #[arg(required = true, value_name = "FILE")]
        files: Vec<std::path::PathBuf>,
    },
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Promqltest { files } => {
            let code = tessera_promql::promqltest::run_files_cli(&files);
            std::process::ExitCode::from(u8::try_from(code).unwrap_or(1))
        }
        Command::Serve(args) => {
            let settings = match config::Settings::resolve(&args) {
                Ok(s) => s,
                Err(e) => {
                    eprintln!("tessera: {e:#}");
                    return std::process::ExitCode::from(2);
                }
            };
            serve::init_logging(&settings);
            match serve::run(settings) {
                Ok(()) => std::process::ExitCode::SUCCESS,
                Err(e) => {
                    tracing::error!(error = format!("{e:#}"), "tessera stopped with an error");
                    std::process::ExitCode::FAILURE
                }
            }
        }
    }
}
