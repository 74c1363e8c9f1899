//! A small seeded `promql-diff` run: Tessera against a real Prometheus, when one is available.
//!
//! Runs only when `PROMETHEUS_BIN` names a Prometheus 3.x binary and the `tessera` binary has been built
//! into this target directory (`cargo build -p tessera-server`); otherwise it says loudly why it was
//! skipped and passes, so CI without Prometheus is not affected.
//!
//! Allow-list: the documented differences of `promql_diff::exprgen::Known` (timestamp() of a selector
//! with both `@` and `offset`; date functions of NaN/±Inf/beyond-int64 values; the order of tied values
//! among more than 12 topk/bottomk results) are reported by the run as known, not as hard
//! disagreements; the assertion below is on the hard ones only.

use std::io::Write as _;
use tessera_bench::promql_diff::{default_tessera_bin, print_report, run_diff, Args};

/// Says why the test was skipped on stderr directly: `eprintln!` is captured (and hidden) for a
/// passing test.
fn skipped(why: &str) {
    let _ = writeln!(std::io::stderr(), "\n!!! SKIPPED promql_diff: {why}\n");
}

#[test]
fn tessera_agrees_with_prometheus_on_a_seeded_run() {
    let Some(prometheus_bin) = std::env::var_os("PROMETHEUS_BIN").filter(|v| !v.is_empty()) else {
        skipped(
            "PROMETHEUS_BIN is not set. To run this differential test, build Tessera (cargo build -p tessera-server) \
             and run\n!!!     PROMETHEUS_BIN=/path/to/prometheus cargo test -p tessera-bench --test promql_diff",
        );
        return;
    };
    let Some(tessera_bin) = default_tessera_bin() else {
        skipped(
            "PROMETHEUS_BIN is set but no tessera binary next to the test binary (target/<profile>/tessera); \
             build it first with cargo build -p tessera-server (same profile as the test)",
        );
        return;
    };
    let args = Args {
        tessera_bin: Some(tessera_bin),
        prometheus_bin: Some(prometheus_bin.into()),
        seed: 16,
        count: 300,
        only: Vec::new(),
        expr: Vec::new(),
        time: None,
        data_end_ms: None,
        fail_fast: false,
        verbose: false,
    };
    let report = run_diff(&args).expect("the run itself works (servers start, data is written, queries answer)");
    print_report(&report, false);
    assert!(report.agreements > 0);
    assert!(
        report.hard.is_empty(),
        "{} hard disagreement(s) between Tessera and Prometheus; rerun with: {}",
        report.hard.len(),
        report.command
    );
}
