//! Where tests find the data that comes from elsewhere (Prometheus' conformance scripts, byte-exact
//! vectors made with Prometheus' code, benchmark query sets): `../shared` beside the repository, or the
//! directory `TESSERA_SHARED` names. It is read in place, never copied into the repository.
//!
//! A test that cannot find its fixture fails in CI (`CI` or `TESSERA_CI` set, as `.ci/run` does) with
//! the path it looked for; anywhere else it says loudly on stderr that it was skipped and how to point
//! it at a copy, and passes.

use std::path::PathBuf;

/// The shared directory: `$TESSERA_SHARED`, else `../shared` beside the repository.
pub fn shared_dir() -> PathBuf {
    match std::env::var_os("TESSERA_SHARED") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared")),
    }
}

/// Whether this is a CI run, where a missing fixture is an error.
pub fn in_ci() -> bool {
    ["CI", "TESSERA_CI"].iter().any(|v| std::env::var_os(v).is_some_and(|x| !x.is_empty() && x != "0" && x != "false"))
}

/// `rel` under [`shared_dir`], if it exists. Missing: panics in CI naming the path; elsewhere prints
/// that `test` was skipped and returns `None`.
pub fn shared(rel: &str, test: &str) -> Option<PathBuf> {
    let p = shared_dir().join(rel);
    if p.exists() {
        return Some(p);
    }
    assert!(
        !in_ci(),
        "test fixture missing: {} (CI needs ../shared beside the repository, or TESSERA_SHARED pointing at a copy)",
        p.display()
    );
    // Written to stderr directly, not with `eprintln!`, which the test harness captures and hides
    // for a passing test: a skip must be seen.
    use std::io::Write as _;
    let _ = writeln!(
        std::io::stderr(),
        "\n*** SKIPPED {test}: test fixture {} not found. Set TESSERA_SHARED=/path/to/shared to run it. ***",
        p.display()
    );
    None
}
