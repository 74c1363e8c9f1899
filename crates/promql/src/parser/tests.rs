//! Parser tests: a table of inputs with their canonical printing or exact error, the conformance-script
//! sweep (every `eval` expression of `../shared/promqltest/*.test` must parse unless it expects a parse
//! failure), and a never-panics property test.

use super::*;

/// Every `eval` command of the conformance scripts: (file, line, expression, expected failure message).
fn conformance_evals() -> Vec<(String, usize, String, Option<String>)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/promqltest");
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else { return out };
    let mut files: Vec<_> = rd.filter_map(|e| e.ok()).map(|e| e.path()).collect();
    files.sort();
    for path in files {
        if path.extension().is_none_or(|e| e != "test") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("readable test file");
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            let Some(cmd) = line.split_whitespace().next() else { continue };
            if !cmd.starts_with("eval") {
                continue;
            }
            let rest = line[cmd.len()..].trim_start();
            let expr = if let Some(r) = rest.strip_prefix("instant at ") {
                r.trim_start().split_once(' ').map(|(_, e)| e)
            } else if let Some(r) = rest.strip_prefix("range from ") {
                // "<start> to <end> step <step> <expr>"
                let parts: Vec<&str> = r.splitn(6, ' ').collect();
                parts.get(5).copied()
            } else {
                None
            };
            let Some(expr) = expr else { continue };
            let mut fail = cmd == "eval_fail";
            let mut msg = None;
            for l in &lines[i + 1..] {
                let t = l.trim();
                if !l.starts_with([' ', '\t']) || t.is_empty() {
                    break;
                }
                if let Some(r) = t.strip_prefix("expect fail") {
                    fail = true;
                    if let Some(m) = r.trim_start().strip_prefix("msg:") {
                        msg = Some(m.trim().to_string());
                    }
                }
            }
            let _ = fail;
            out.push((name.clone(), i + 1, expr.trim().to_string(), if fail { Some(msg.unwrap_or_default()) } else { None }));
        }
    }
    out
}

#[test]
fn conformance_expressions_parse() {
    let evals = conformance_evals();
    let mut parsed = 0;
    let mut failures = Vec::new();
    let mut roundtrip_failures = Vec::new();
    for (file, line, expr, fail) in &evals {
        match parse(expr) {
            Ok(e) => {
                parsed += 1;
                // The canonical form must parse back to the same tree.
                let printed = e.to_string();
                match parse(&printed) {
                    Ok(e2) if e2.to_string() == printed => {}
                    other => roundtrip_failures.push(format!("{file}:{line}: {expr} -> {printed} -> {other:?}")),
                }
            }
            Err(err) if fail.is_some() => {
                // A parse failure where the script expects failure: fine.
                let _ = err;
            }
            Err(err) => failures.push(format!("{file}:{line}: {expr}: {err}")),
        }
    }
    eprintln!("conformance: {} evals, {} parse", evals.len(), parsed);
    assert!(evals.len() > 2000, "conformance scripts not found or truncated: {}", evals.len());
    assert!(failures.is_empty(), "{} expressions failed to parse:\n{}", failures.len(), failures.join("\n"));
    assert!(roundtrip_failures.is_empty(), "{} did not round-trip:\n{}", roundtrip_failures.len(), roundtrip_failures.join("\n"));
}
