//! Runs every Prometheus conformance script in `../shared/promqltest/` (read in place, never copied) and
//! compares the failing evals with `promqltest-known-failures.txt` (`file:line reason` per line).
//!
//! The test fails when an eval that is not on the list fails, and when a listed eval now passes — so the
//! list is always exactly true and only shrinks. Set `PROMQLTEST_WRITE_KNOWN=1` to print a fresh list
//! (with the first failure reason as the reason) instead of asserting.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use tessera_promql::promqltest::run_file;

const OWN_SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata");
const KNOWN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/promqltest-known-failures.txt");

fn scripts(dir: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "test")).collect())
        .unwrap_or_default();
    v.sort();
    v
}

#[test]
fn our_own_scripts_pass() {
    for p in scripts(OWN_SCRIPTS) {
        let r = run_file(&p);
        for f in &r.failed {
            eprintln!("{}:{} {}\n  expected {}\n  got {}", r.file, f.line, f.query, f.expected, f.got);
        }
        assert!(r.failed.is_empty(), "{} has failures", r.file);
        assert!(r.passed > 0, "{} ran no evals", r.file);
    }
}

/// Our scripts for the engine without delayed `__name__` removal (upstream's default setting), run with
/// the test engine's other settings.
#[test]
fn scripts_without_delayed_name_removal() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/testdata/no_delayed_name_removal");
    let mut engine = tessera_promql::promqltest::test_engine();
    engine.opts.delayed_name_removal = false;
    let files = scripts(dir);
    assert!(!files.is_empty(), "no scripts in {dir}");
    for p in files {
        let text = std::fs::read_to_string(&p).expect("readable script");
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let r = tessera_promql::promqltest::run_script_with(&name, &text, &engine);
        for f in &r.failed {
            eprintln!("{}:{} {}\n  expected {}\n  got {}", r.file, f.line, f.query, f.expected, f.got);
        }
        assert!(r.failed.is_empty(), "{} has failures", r.file);
        assert!(r.passed > 0, "{} ran no evals", r.file);
    }
    // With delayed removal the same script differs exactly on the evals that tell the two apart
    let text = std::fs::read_to_string(format!("{dir}/name_dropping.test")).expect("readable script");
    let delayed = tessera_promql::promqltest::run_script("name_dropping.test", &text);
    // (label_replace copying the name, the duplicate before sum, the range-function duplicate, the
    // annotation's metric name, the name a `bool` comparison's group_left copies).
    let lines: Vec<usize> = delayed.failed.iter().map(|f| f.line).collect();
    assert_eq!(lines, vec![35, 40, 61, 79, 90], "delayed removal must differ on exactly these evals");
}

#[test]
fn prometheus_conformance_scripts() {
    let Some(dir) = tessera_model::fixtures::shared("promqltest", "prometheus_conformance_scripts") else { return };
    let files = scripts(&dir.to_string_lossy());
    assert!(!files.is_empty(), "no .test scripts in {}", dir.display());
    let known_text = std::fs::read_to_string(KNOWN).unwrap_or_default();
    let known: BTreeMap<String, String> = known_text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(' ') {
            Some((k, r)) => (k.to_string(), r.to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect();
    let mut failing: BTreeMap<String, String> = BTreeMap::new();
    let (mut pass, mut total) = (0, 0);
    for p in &files {
        let r = run_file(p);
        eprintln!("{:<28} {:>4} / {:>4} passed", r.file, r.passed, r.total());
        pass += r.passed;
        total += r.total();
        for f in r.failed {
            let reason = if f.note.is_empty() {
                format!("{} | expected {} | got {}", f.query, f.expected, f.got)
            } else {
                format!("[{}] {} | got {}", f.note, f.query, f.got)
            };
            failing.insert(format!("{}:{}", r.file, f.line), reason);
        }
    }
    eprintln!("{:<28} {pass:>4} / {total:>4} passed", "TOTAL");
    if std::env::var("PROMQLTEST_WRITE_KNOWN").is_ok() {
        for (k, r) in &failing {
            let r: String = r.chars().take(200).collect();
            println!("{k} {}", r.replace('\n', " "));
        }
        return;
    }
    let failing_keys: BTreeSet<&String> = failing.keys().collect();
    let known_keys: BTreeSet<&String> = known.keys().collect();
    let new_failures: Vec<_> = failing_keys.difference(&known_keys).collect();
    let now_passing: Vec<_> = known_keys.difference(&failing_keys).collect();
    for k in &new_failures {
        eprintln!("NEW FAILURE {k}: {}", failing[**k]);
    }
    for k in &now_passing {
        eprintln!("NOW PASSING (remove from the list) {k}");
    }
    assert!(new_failures.is_empty() && now_passing.is_empty(), "conformance differs from the known-failures list");
}

#[test]
fn cli_exit_codes_and_failure_details() {
    let ok = scripts(OWN_SCRIPTS);
    assert_eq!(tessera_promql::promqltest::run_files_cli(&ok), 0);
    let r = tessera_promql::promqltest::run_script(
        "bad.test",
        "load 1m\n  m 1 2\n\neval instant at 1m m\n  m 3\n\neval instant at 1m m\n  m 2\n",
    );
    assert_eq!(r.passed, 1);
    assert_eq!(r.failed.len(), 1);
    assert_eq!(r.failed[0].line, 4);
    assert_eq!(r.failed[0].query, "m");
    assert!(r.failed[0].got.contains("m\"} 2"), "{}", r.failed[0].got);
    let dir = std::env::temp_dir().join(format!("tessera-promqltest-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let p = dir.join("bad.test");
    std::fs::write(&p, "load 1m\n  m 1\n\neval instant at 0 m\n  m 5\n").expect("write");
    assert_eq!(tessera_promql::promqltest::run_files_cli(&[p]), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A development aid: `PROMQLTEST_FILE=path cargo test -p tessera-promql --test conformance one_script
/// -- --ignored --nocapture` runs one script and prints its failures.
#[test]
#[ignore]
fn one_script() {
    let Ok(p) = std::env::var("PROMQLTEST_FILE") else { return };
    let r = run_file(std::path::Path::new(&p));
    for f in &r.failed {
        eprintln!("{}:{} {}\n  expected {}\n  got {}", r.file, f.line, f.query, f.expected, f.got);
    }
    eprintln!("{}: {} passed, {} failed", r.file, r.passed, r.failed.len());
}
