//! A ten-second `hostile` soak against a `tessera` binary this test starts: no failures, and every
//! acknowledged sample read back.
//!
//! Needs the `tessera` binary of the same profile (`cargo build -p tessera-server`), found next to the
//! test binary's directory (target/<profile>/tessera). Without it the test says loudly that it was
//! skipped and passes, except in CI (`TESSERA_CI` or `CI` set), where it fails.

use std::io::Write;
use std::time::Duration;
use tessera_bench::hostile::{print_report, run_soak, Args};
use tessera_bench::promql_diff::default_tessera_bin;
use tessera_bench::promql_diff::servers::Server;

fn in_ci() -> bool {
    ["CI", "TESSERA_CI"].iter().any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty() && x != "0" && x != "false"))
}

#[test]
fn a_short_hostile_soak_finds_nothing() {
    let Some(bin) = default_tessera_bin() else {
        let msg = "no tessera binary next to the test binary (target/<profile>/tessera); build it first with \
                   cargo build -p tessera-server (same profile as the test)";
        assert!(!in_ci(), "hostile_smoke: {msg}");
        // Straight to stderr, past the test harness' capture.
        let _ = writeln!(std::io::stderr(), "\n!!! SKIPPED hostile_smoke: {msg}\n");
        return;
    };
    // A small per-request series limit, so the cardinality bomb is quick in a debug build.
    let mut server = Server::tessera_with(&bin, &["--web.remote-write.max-new-series-per-request=1000"]).expect("start tessera");
    server.wait_ready(Duration::from_secs(60)).expect("tessera ready");
    let args = Args {
        url: server.base_url(),
        pid: server.pid(),
        duration: Duration::from_secs(10),
        seed: 9,
        series: 100,
        write_interval: Duration::from_millis(500),
        bomb_series: 2000,
        new_series_limit: 1000,
        bombs: 1,
        slow_after: Duration::from_secs(30),
    };
    let report = run_soak(&args).expect("the soak runs");
    print_report(&report);
    assert!(report.failures.is_empty(), "{} failure(s): {:#?}\nserver log:\n{}", report.failures.len(), report.failures, server.log_tail());
    let v = report.verified;
    assert!(v.acknowledged > 0, "nothing was acknowledged");
    assert_eq!(v.acknowledged, v.read_back, "acknowledged samples missing");
    assert_eq!(v.claimed, v.claimed_read_back, "samples 400 answers said they wrote are missing");
    let kinds: Vec<&str> = report.tallies.keys().map(|(k, _)| k.as_str()).collect();
    for k in ["write-valid", "write-cardinality-bomb", "random-instant", "healthy"] {
        assert!(kinds.contains(&k), "no {k} request in {kinds:?}");
    }
}
