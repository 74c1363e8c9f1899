//! Issue 9, "no single request can take Tessera down": the PromQL parser on untrusted text. Arbitrary
//! strings, soups of PromQL's own tokens and very long or deeply nested inputs must parse or fail with
//! a `ParseError`, never panic or overflow a 2 MiB stack; what parses prints back (`Display`, upstream
//! `String()`) to text that parses to the same print, and `pretty`/`to_json` accept it.
//!
//! A cargo-fuzz target needs nightly; this runs on stable as an ordinary test. It runs a short smoke by
//! default; `TESSERA_FUZZ_CASES=N` runs N cases per property instead.

use proptest::prelude::*;
use tessera_promql::parser::{parse, pretty, to_json, FUNCTIONS};

fn cases(default: u32) -> u32 {
    std::env::var("TESSERA_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Runs `f` on a thread with a 2 MiB stack (a tokio worker's default), so a recursion the parser does
/// not bound shows up as a stack overflow here rather than passing on the test harness' bigger stack.
fn on_small_stack(f: impl FnOnce() + Send + 'static) {
    std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(f)
        .expect("spawn")
        .join()
        .unwrap_or_else(|p| std::panic::resume_unwind(p));
}

/// Parse; for an accepted input, the printed form must parse again to the same tree and the same text
/// (both up to unary `+`), and the pretty printer and the JSON AST must not panic.
fn check(input: String) {
    on_small_stack(move || {
        let Ok(e) = parse(&input) else { return };
        let printed = e.to_string();
        let again = match parse(&printed) {
            Ok(a) => a,
            Err(err) => panic!("{input:?} parsed and printed as {printed:?}, which does not parse: {err}"),
        };
        // `x offset --1s - 1` takes upstream's general `duration_expr` alternative only because of the
        // double sign, which `applyUnaryOpToDurationExpr` folds into the literal; the printed `x offset 1s
        // - 1` (upstream's `DurationExpr.String()` prints a binary duration bare) then reads as
        // `(x offset 1s) - 1`. We print as upstream does; such inputs only need to print something that parses.
        if double_signed_offset(&input) {
            return;
        }
        // The same tree, up to unary `+` (see `without_unary_plus`).
        assert_eq!(
            without_unary_plus(to_json(&again)),
            without_unary_plus(to_json(&e)),
            "{input:?} printed as {printed:?} parses to another expression"
        );
        // And the text is stable but for those unary `+`s.
        let printed2 = again.to_string();
        let third = parse(&printed2).unwrap_or_else(|err| panic!("{printed2:?} does not parse: {err}"));
        assert_eq!(printed2.replace('+', ""), printed.replace('+', ""), "print of {input:?} is not stable");
        let _ = pretty(&e);
        let _ = pretty(&third);
        let _ = to_json(&e).to_string();
    });
}

/// Whether `input` has an `offset` followed by two signs (see `check`).
fn double_signed_offset(input: &str) -> bool {
    let lower = input.to_ascii_lowercase();
    lower.match_indices("offset").any(|(i, _)| {
        let mut signs = lower[i + 6..].chars().filter(|c| !c.is_whitespace()).take(2);
        matches!((signs.next(), signs.next()), (Some('+' | '-'), Some('+' | '-')))
    })
}

#[test]
fn a_double_signed_offset_prints_as_upstream() {
    let e = parse("up offset --1s-1").expect("parses");
    assert_eq!(e.to_string(), "up offset 1s - 1");
    check("up offset ----------1s-1".to_string());
    assert!(double_signed_offset("x OFFSET - -2") && !double_signed_offset("x offset -2 - 1"));
}

/// The JSON AST with unary `+` nodes replaced by their operand. Upstream's `String()` prints the number
/// `+Inf` as `+Inf` and a unary minus as `-` before its operand, so `-Inf ^ x` (a minus over `Inf ^ x`)
/// prints as `-+Inf ^ x`, which parses with one more unary `+` (an identity): we print as upstream does,
/// so the round trip holds up to those.
fn without_unary_plus(v: serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::Object(mut m) => {
            if m.get("type").and_then(Value::as_str) == Some("unaryExpr") && m.get("op").and_then(Value::as_str) == Some("+") {
                return without_unary_plus(m.remove("expr").unwrap_or(Value::Null));
            }
            Value::Object(m.into_iter().map(|(k, v)| (k, without_unary_plus(v))).collect())
        }
        Value::Array(a) => Value::Array(a.into_iter().map(without_unary_plus).collect()),
        other => other,
    }
}

const TOKENS: &[&str] = &[
    // Operators, brackets and punctuation.
    "+", "-", "*", "/", "%", "^", "==", "!=", ">", "<", ">=", "<=", "=", "=~", "!~", ",", "(", ")", "{", "}",
    "[", "]", ":", "@", "#c\n", " ", "\n", "\t",
    // Keywords and modifiers.
    "and", "or", "unless", "atan2", "sum", "avg", "count", "min", "max", "group", "stddev", "stdvar", "topk",
    "bottomk", "count_values", "quantile", "limitk", "limit_ratio", "offset", "smoothed", "anchored", "by",
    "without", "on", "ignoring", "group_left", "group_right", "fill", "fill_left", "fill_right", "bool",
    "start()", "end()", "start", "end", "step()", "range()", "step", "range", "max_of", "min_of",
    // Numbers and durations.
    "0", "1", "-1", "1.5", "1e3", "1e-300", "1e400", "0x1F", "0755", "Inf", "-Inf", "NaN", "nan", "1_000",
    "9223372036854775807", "99999999999999999999", "5m", "1h30m", "0s", "1ms", "300y", "1d2h", "5m1", "-5m",
    "1.5s", "9999999999999999y",
    // Strings (well-formed and not), identifiers, label names.
    "\"a\"", "'b'", "`c`", "\"\\u00e9\"", "\"\\x41\"", "\"\\777\"", "\"\\q\"", "\"", "'", "`", "\"\u{1F600}\"",
    "foo", "up", "job", "__name__", "a:b", "x_y", "é", "\"my.metric\"",
];

fn token_soup() -> impl Strategy<Value = String> {
    let names: Vec<&'static str> = FUNCTIONS.iter().map(|f| f.name).collect();
    let tok = prop_oneof![
        4 => proptest::sample::select(TOKENS),
        1 => proptest::sample::select(names),
    ];
    proptest::collection::vec((tok, any::<bool>()), 0..40)
        .prop_map(|ts| ts.into_iter().map(|(t, sp)| if sp { format!("{t} ") } else { t.to_string() }).collect())
}

/// Mostly-valid expressions: a small grammar, so the round trip sees nested modifiers and operators.
fn valid_ish() -> impl Strategy<Value = String> {
    let leaf = prop_oneof![
        Just("up".to_string()),
        Just("foo{job=\"a\",x=~\"b.*\"}".to_string()),
        Just("{__name__=\"bar\"}".to_string()),
        Just("1.5".to_string()),
        Just("-Inf".to_string()),
        Just("\"s\"".to_string()),
        Just("foo offset 5m".to_string()),
        Just("foo @ 100".to_string()),
        Just("foo @ start()".to_string()),
        Just("time()".to_string()),
    ];
    leaf.prop_recursive(6, 64, 4, |inner| {
        prop_oneof![
            (inner.clone(), proptest::sample::select(&["+", "-", "*", "/", "%", "^", "==", "> bool", "and", "or", "unless", "atan2", "+ on(job) group_left(x)", "/ ignoring(a)", "* fill(0)", "< on() fill_left(1) fill_right(2)"][..]), inner.clone())
                .prop_map(|(a, op, b)| format!("{a} {op} {b}")),
            inner.clone().prop_map(|a| format!("({a})")),
            inner.clone().prop_map(|a| format!("-{a}")),
            inner.clone().prop_map(|a| format!("sum by (job) ({a})")),
            inner.clone().prop_map(|a| format!("topk(3, {a})")),
            inner.clone().prop_map(|a| format!("count_values(\"v\", {a})")),
            inner.clone().prop_map(|a| format!("rate(({a})[5m:1m])")),
            inner.clone().prop_map(|a| format!("({a})[1h:] offset -1m @ end()")),
            inner.clone().prop_map(|a| format!("abs({a})")),
            inner.clone().prop_map(|a| format!("label_replace({a}, \"d\", \"$1\", \"s\", \"(.*)\")")),
            inner.clone().prop_map(|a| format!("max_over_time(({a})[5m+step():step()*2])")),
            inner.prop_map(|a| format!("histogram_quantile(0.9, {a})")),
        ]
    })
}

/// Deep and long inputs: bracket towers, unary chains, long operator chains, nested calls and subqueries.
fn deep() -> impl Strategy<Value = String> {
    let n = 1usize..3000;
    prop_oneof![
        n.clone().prop_map(|n| format!("{}1{}", "(".repeat(n), ")".repeat(n))),
        n.clone().prop_map(|n| format!("{}1", "-".repeat(n))),
        n.clone().prop_map(|n| format!("{}1", "+-".repeat(n))),
        n.clone().prop_map(|n| vec!["up"; n].join(" or ")),
        n.clone().prop_map(|n| vec!["1"; n].join("^")),
        n.clone().prop_map(|n| format!("{}x{}", "abs(".repeat(n), ")".repeat(n))),
        n.clone().prop_map(|n| format!("{}x{}", "sum(".repeat(n), ")".repeat(n))),
        (1usize..300).prop_map(|n| format!("{}up{}", "max_over_time((".repeat(n), ")[5m:])".repeat(n))),
        n.clone().prop_map(|n| format!("vector(1){}", "[1m:]".repeat(n))),
        n.clone().prop_map(|n| format!("up{}", "[5m:1m] offset 1m".repeat(n))),
        n.clone().prop_map(|n| format!("up[{}]", vec!["1s"; n].join("+"))),
        n.clone().prop_map(|n| format!("up[{}1s{}]", "(".repeat(n), ")".repeat(n))),
        n.clone().prop_map(|n| format!("up offset {}1s", "-".repeat(n))),
        n.clone().prop_map(|n| "(".repeat(n)),
        n.clone().prop_map(|n| "{".repeat(n)),
        n.clone().prop_map(|n| "[".repeat(n)),
        n.clone().prop_map(|n| format!("up{{{}}}", vec!["a=\"b\""; n].join(","))),
        n.prop_map(|n| format!("\"{}\"", "\\".repeat(n))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(300), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,80}") {
        check(s);
    }

    #[test]
    fn arbitrary_bytes_as_text_never_panic(b in proptest::collection::vec(any::<u8>(), 0..80)) {
        check(String::from_utf8_lossy(&b).into_owned());
    }

    #[test]
    fn token_soup_never_panics(s in token_soup()) {
        check(s);
    }

    #[test]
    fn valid_ish_expressions_round_trip(s in valid_ish()) {
        check(s);
    }
}

proptest! {
    // Each case builds and parses up to a few thousand levels: fewer cases.
    #![proptest_config(ProptestConfig { cases: cases(300) / 4 + 1, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn deep_and_long_inputs_never_overflow_the_stack(s in deep(), tail in proptest::sample::select(TOKENS)) {
        check(s.clone());
        // And with a stray token appended (the error path of a deep input).
        check(format!("{s}{tail}"));
    }
}

/// Found by `valid_ish_expressions_round_trip`: `-Inf ^ x` prints as `-+Inf ^ x` (as upstream's
/// `String()` does), which is the same expression but for a unary `+`.
#[test]
fn minus_inf_power_prints_as_upstream_and_means_the_same() {
    let e = parse("-Inf ^ up").expect("parses");
    assert_eq!(e.to_string(), "-+Inf ^ up");
    check("abs(-Inf ^ {__name__=\"bar\"})".to_string());
}
