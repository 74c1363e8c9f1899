//! Parser tests: a table of inputs with their canonical printing or exact error, the conformance-script
//! sweep (every `eval` expression of `../shared/promqltest/*.test` must parse unless it expects a parse
//! failure), and a never-panics property test.

use super::*;

/// Every `eval` command of the conformance scripts: (file, line, expression, expected failure message).
fn conformance_evals() -> Vec<(String, usize, String, Option<String>)> {
    let mut out = Vec::new();
    let Some(dir) = tessera_model::fixtures::shared("promqltest", "parser conformance sweep") else { return out };
    let Ok(rd) = std::fs::read_dir(&dir) else { return out };
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

/// Parses and prints in canonical form.
fn canon(input: &str) -> String {
    match parse(input) {
        Ok(e) => e.to_string(),
        Err(e) => panic!("{input:?} failed to parse: {e}"),
    }
}

fn error(input: &str) -> String {
    match parse(input) {
        Ok(e) => panic!("{input:?} parsed as {e}, expected an error"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn canonical_printing() {
    let cases = [
        ("1 + 2 * 3", "1 + 2 * 3"),
        ("(1 + 2) * 3", "(1 + 2) * 3"),
        ("-1", "-1"),
        ("- -1", "1"),
        ("0x1F", "31"),
        ("010", "8"),
        ("1e3", "1000"),
        ("Inf", "+Inf"),
        ("-inf", "-Inf"),
        ("nAn", "NaN"),
        ("1_000", "1000"),
        (".5", "0.5"),
        ("5m", "5m"),
        ("90s", "1m30s"),
        ("'a\\'b'", "\"a'b\""),
        ("`raw\\n`", "\"raw\\\\n\""),
        ("\"\\u00e9\\x41\"", "\"éA\""),
        ("foo", "foo"),
        ("foo{}", "foo"),
        ("foo{b=\"2\", a!~\"x|y\",}", "foo{a!~\"x|y\",b=\"2\"}"),
        ("{\"my.metric\", \"label.name\"=\"x\"}", "{\"label.name\"=\"x\",__name__=\"my.metric\"}"),
        ("sum", "sum"),
        ("by{a=\"b\"}", "by{a=\"b\"}"),
        ("foo offset 5m", "foo offset 5m"),
        ("foo offset -1h30m", "foo offset -1h30m"),
        ("foo @ 100", "foo @ 100.000"),
        ("foo @ start() offset 1m", "foo @ start() offset 1m"),
        ("foo[5m] @ end()", "foo[5m] @ end()"),
        ("rate(foo[1800])", "rate(foo[30m])"),
        ("rate(foo[5m*2])", "rate(foo[5m * 2])"),
        ("foo[(1h+5m)]", "foo[(1h + 5m)]"),
        ("foo offset (1h + 5m)", "foo offset (1h + 5m)"),
        ("foo offset -step()", "foo offset -step()"),
        ("foo[min_of(step()+1,1h)]", "foo[min_of(step() + 1, 1h)]"),
        ("foo[5m] anchored", "foo[5m] anchored"),
        ("foo[5m] smoothed offset 1m", "foo[5m] smoothed offset 1m"),
        ("rate(foo[5m])[30m:1m]", "rate(foo[5m])[30m:1m]"),
        ("foo[30m:]", "foo[30m:]"),
        ("foo[30m:step()]", "foo[30m:step()]"),
        ("sum by (a, b) (foo)", "sum by (a, b) (foo)"),
        ("sum(foo) without (a)", "sum without (a) (foo)"),
        ("sum by () (foo)", "sum(foo)"),
        ("SUM BY (a) (foo)", "sum by (a) (foo)"),
        ("topk(5, foo)", "topk(5, foo)"),
        ("count_values(\"v\", foo)", "count_values(\"v\", foo)"),
        ("a > bool b", "a > bool b"),
        ("a + on(b) group_left(c) d", "a + on (b) group_left (c) d"),
        ("a + ignoring(b) group_right d", "a + ignoring (b) group_right () d"),
        ("a - on() c", "a - on () c"),
        ("a and b", "a and b"),
        ("a + fill(0) b", "a + fill (0) b"),
        ("a + fill_left(1) fill_right(-2) b", "a + fill_left (1) fill_right (-2) b"),
        ("a + on(x) fill_right(5m) b", "a + on (x) fill_right (300) b"),
        ("fill_left + fill", "fill_left + fill"),
        ("foo offset (1m) * 2 + 1", "foo offset (1m) * 2 + 1"),
        ("1_000.5_5", "1000.55"),
        ("0x_1F", "31"),
        ("a ^ b ^ c", "a ^ b ^ c"),
        ("label_replace(up, \"a\", \"$1\", \"b\", \"(.*)\")", "label_replace(up, \"a\", \"$1\", \"b\", \"(.*)\")"),
        ("a:b:c # comment", "a:b:c"),
        ("time()", "time()"),
        ("step()", "step()"),
        ("start", "start"),
    ];
    for (input, want) in cases {
        assert_eq!(canon(input), want, "input {input:?}");
    }
}

#[test]
fn strings_keep_bytes_that_are_not_utf8() {
    let Ok(Expr::Call(c)) = parse(r#"label_join(x, "a\xc5z", "b", "c")"#) else { panic!("not a call") };
    let Expr::StringLiteral(s) = &c.args[1] else { panic!("not a string") };
    assert_eq!(s.raw.as_deref(), Some(&b"a\xc5z"[..]));
    assert_eq!(s.val, "a\u{FFFD}z");
    assert_eq!(go_quote_bytes(b"a\xc5z"), "\"a\\xc5z\"");
    assert_eq!(canon("count_values(\"a\\xc5z\", x)"), "count_values(\"a\\xc5z\", x)");
    let Ok(Expr::StringLiteral(s)) = parse("'\\u00e9'") else { panic!("not a string") };
    assert_eq!((s.val.as_str(), s.raw), ("é", None));
}

#[test]
fn precedence_and_associativity() {
    let Ok(Expr::Binary(b)) = parse("a ^ b ^ c") else { panic!("not binary") };
    assert!(matches!(*b.rhs, Expr::Binary(_)), "^ is right-associative");
    let Ok(Expr::Binary(b)) = parse("a - b - c") else { panic!("not binary") };
    assert!(matches!(*b.lhs, Expr::Binary(_)), "- is left-associative");
    let Ok(Expr::Binary(b)) = parse("a or b and c") else { panic!("not binary") };
    assert_eq!(b.op, BinaryOp::Or);
    let Ok(Expr::Binary(b)) = parse("a + b * c == d") else { panic!("not binary") };
    assert_eq!(b.op, BinaryOp::Eql);
    // Unary minus binds like `*`, but its operand includes `^`.
    let Ok(Expr::Unary(u)) = parse("-a ^ 2") else { panic!("not unary") };
    assert!(matches!(*u.expr, Expr::Binary(ref x) if x.op == BinaryOp::Pow));
    let Ok(Expr::Binary(b)) = parse("-a * 2") else { panic!("not binary") };
    assert!(matches!(*b.lhs, Expr::Unary(_)));
    // `-2 ^ 2` is -(2^2).
    let Ok(Expr::Unary(_)) = parse("-2 ^ 2") else { panic!("not unary") };
    // Modifiers bind to the nearest selector; `offset` takes no bare binary duration expression.
    let Ok(Expr::Binary(b)) = parse("a + b offset 5m") else { panic!("not binary") };
    assert!(matches!(*b.rhs, Expr::VectorSelector(ref vs) if vs.original_offset_ms == 300_000));
    let Ok(Expr::Binary(b)) = parse("foo offset 100 + 2") else { panic!("not binary") };
    assert!(matches!(*b.lhs, Expr::VectorSelector(ref vs) if vs.original_offset_ms == 100_000));
    let Ok(Expr::Binary(b)) = parse("foo offset -2 ^ 2") else { panic!("not binary") };
    assert!(matches!(*b.lhs, Expr::VectorSelector(ref vs) if vs.original_offset_ms == -2000));
}

#[test]
fn ast_shapes() {
    let Ok(Expr::VectorSelector(vs)) = parse("foo{a=\"b\"}") else { panic!("not a selector") };
    assert_eq!(vs.name.as_deref(), Some("foo"));
    assert_eq!(vs.matchers.len(), 2);
    assert_eq!(vs.matchers[1].name, "__name__");
    let Ok(Expr::MatrixSelector(ms)) = parse("foo[1m30s] offset 1m @ 1.5") else { panic!("not a matrix") };
    assert_eq!(ms.range_ms, 90_000);
    assert_eq!(ms.vs.original_offset_ms, 60_000);
    assert_eq!(ms.vs.at, Some(AtModifier::Timestamp(1500)));
    let Ok(Expr::Subquery(sq)) = parse("foo[1h:step()*2] offset range()") else { panic!("not a subquery") };
    assert_eq!(sq.range_ms, 3_600_000);
    assert!(sq.step_expr.is_some() && sq.offset_expr.is_some());
    let Ok(Expr::Aggregate(a)) = parse("quantile without (x) (0.9, foo)") else { panic!("not an aggregate") };
    assert_eq!(a.op, AggregateOp::Quantile);
    assert!(a.without && a.param.is_some());
    let Ok(Expr::Binary(b)) = parse("a and b") else { panic!("not binary") };
    assert_eq!(b.matching.as_ref().map(|m| m.card), Some(VectorMatchCardinality::ManyToMany));
    let Ok(Expr::Binary(b)) = parse("a + 1") else { panic!("not binary") };
    assert!(b.matching.is_none(), "vector matching is dropped unless both sides are vectors");
    let Ok(Expr::Call(c)) = parse("info(foo, {x=\"y\"})") else { panic!("not a call") };
    assert!(matches!(&c.args[1], Expr::VectorSelector(vs) if vs.bypass_empty_matcher_check));
    assert_eq!(parse("rate(x[5m])").map(|e| e.value_type()), Ok(ValueType::Vector));
    assert_eq!(parse("x[5m]").map(|e| e.value_type()), Ok(ValueType::Matrix));
    assert_eq!(parse("1 + 2").map(|e| e.value_type()), Ok(ValueType::Scalar));
    assert_eq!(parse("\"s\"").map(|e| e.value_type()), Ok(ValueType::String));
}

#[test]
fn duration_expressions_resolve_per_query() {
    let mut e = parse("count_over_time(foo[step() * 2 + 1s] offset -min_of(range(), 1m))").expect("parses");
    resolve_durations(&mut e, 15_000, 3_600_000).expect("resolves");
    let Expr::Call(c) = &e else { panic!("not a call") };
    let Expr::MatrixSelector(ms) = &c.args[0] else { panic!("not a matrix") };
    assert_eq!(ms.range_ms, 31_000);
    assert_eq!(ms.vs.original_offset_ms, -60_000);
    // A range that resolves to zero is an evaluation error with upstream's position-only message.
    let mut e = parse("foo[step()]").expect("parses");
    assert_eq!(resolve_durations(&mut e, 0, 0), Err("4:10: duration must be greater than 0".into()));
    let mut e = parse("foo[1h / (step() - step())]").expect("parses");
    assert!(resolve_durations(&mut e, 1000, 0).is_err_and(|m| m.ends_with("division by zero")));
}

#[test]
fn error_messages_match_prometheus() {
    let cases = [
        ("", "unknown position: parse error: no expression found in input"),
        ("# only a comment\n", "1:1: parse error: no expression found in input"),
        ("1+", "1:3: parse error: unexpected end of input"),
        ("*1", "1:1: parse error: unexpected <op:*>"),
        ("((1)", "1:5: parse error: unclosed left parenthesis"),
        ("(1))", "1:5: parse error: unexpected right parenthesis ')'"),
        ("2.5.", "1:1: parse error: bad number or duration syntax: \"2.5.\""),
        ("1 == 1", "1:3: parse error: comparisons between scalars must use BOOL modifier"),
        ("1 unless 1", "1:1: parse error: set operator \"unless\" not allowed in binary scalar expression"),
        ("foo and 1", "1:1: parse error: set operator \"and\" not allowed in binary scalar expression"),
        ("1 or on(bar) foo", "1:1: parse error: vector matching only allowed between instant vectors"),
        ("foo + group_left(baz) bar", "1:7: parse error: unexpected <group_left>"),
        ("foo and on(bar) group_right(baz) bar", "1:1: parse error: no grouping allowed for \"and\" operation"),
        ("foo + bool bar", "1:5: parse error: bool modifier can only be used on comparison operators"),
        ("foo + on(a) group_left(a) bar", "1:5: parse error: label \"a\" must not occur in ON and GROUP clause at once"),
        ("-test[5m]", "1:1: parse error: unary expression only allowed on expressions of type scalar or instant vector, got \"range vector\""),
        ("foo offset 1s offset 2s", "1:1: parse error: offset may not be set multiple times"),
        ("foo @ NaN", "1:1: parse error: timestamp out of bounds for @ modifier: NaN"),
        ("foo @ 1 @ 2", "1:1: parse error: @ <timestamp> may not be set multiple times"),
        ("some}", "1:5: parse error: unexpected character: '}'"),
        ("foo{a>=\"b\"}", "1:6: parse error: unexpected character inside braces: '>'"),
        ("foo{gibberish}", "1:14: parse error: unexpected \"}\" in label matching, expected label matching operator"),
        ("foo{\"a\"=}", "1:9: parse error: unexpected \"}\" in label matching, expected string"),
        ("{}", "1:1: parse error: vector selector must contain at least one non-empty matcher"),
        ("{x=~\".*\"}", "1:1: parse error: vector selector must contain at least one non-empty matcher"),
        ("foo{__name__=\"bar\"}", "1:1: parse error: metric name must not be set twice: \"foo\" or \"bar\""),
        ("foo[5m1]", "1:5: parse error: bad number or duration syntax: \"5m1\""),
        ("foo[5y1hs]", "1:5: parse error: unknown unit \"hs\" in duration \"5y1hs\""),
        ("foo[5m1m]", "1:5: parse error: not a valid duration string: \"5m1m\""),
        ("foo[\"5m\"]", "1:5: parse error: unexpected character in duration expression: '\"'"),
        ("foo[-1]", "1:5: parse error: duration must be greater than 0"),
        ("foo[step]", "1:9: parse error: unexpected \"]\" in subquery or range selector, expected number, duration, step(), or range()"),
        ("foo[5s/0d]", "1:7: parse error: division by zero"),
        ("foo[5s%0d]", "1:7: parse error: modulo by zero"),
        ("foo[9.5e10]", "1:5: parse error: duration out of range"),
        ("foo[5s s 5s]", "1:8: parse error: unexpected character: 's', expected ':'"),
        ("some_metric[5m] OFFSET", "1:23: parse error: unexpected end of input in offset, expected number, duration, step(), or range()"),
        ("some_metric[5m] @", "1:18: parse error: unexpected end of input in @, expected timestamp"),
        ("some_metric @ start() [5m]", "1:23: parse error: no @ modifiers allowed before range"),
        ("some_metric offset step()[5m]", "1:26: parse error: no offset modifiers allowed before range"),
        ("rate(food[1m])[1h] offset 1h", "1:15: parse error: ranges only allowed for vector selectors"),
        ("test[5d] OFFSET 10s [10m:5s]", "1:1: parse error: subquery is only allowed on instant vector, got matrix instead"),
        ("1[5m] anchored", "1:2: parse error: ranges only allowed for vector selectors"),
        ("foo[5m] anchored smoothed", "1:1: parse error: anchored and smoothed modifiers cannot be used together"),
        ("sum by (\"foo)(some_metric{})", "1:9: parse error: unterminated quoted string"),
        ("sum without(,)(some_metric)", "1:13: parse error: unexpected \",\" in grouping opts, expected label"),
        ("sum some_metric by (test)", "1:5: parse error: unexpected identifier \"some_metric\""),
        ("sum by (a) foo", "1:12: parse error: unexpected identifier \"foo\" in aggregation"),
        ("sum () by (test)", "1:1: parse error: no arguments for aggregate expression provided"),
        ("topk(some_metric)", "1:1: parse error: wrong number of arguments for aggregate expression provided, expected 2, got 1"),
        ("MIN (some_metric) keep_common", "1:19: parse error: unexpected identifier \"keep_common\""),
        ("sum without (test) (some_metric) by (test)", "1:34: parse error: unexpected <by>"),
        ("topk(some_metric,)", "1:17: parse error: trailing commas not allowed in function call args"),
        ("count_values(5, other_metric)", "1:14: parse error: expected type string in aggregation parameter, got scalar"),
        ("sum(foo[5m])", "1:5: parse error: expected type instant vector in aggregation expression, got range vector"),
        ("floor()", "1:1: parse error: expected 1 argument(s) in call to \"floor\", got 0"),
        ("hour(a, b, c)", "1:1: parse error: expected at most 1 argument(s) in call to \"hour\", got 3"),
        ("label_join(a)", "1:1: parse error: expected at least 3 argument(s) in call to \"label_join\", got 1"),
        ("non_existent_function()", "1:1: parse error: unknown function with name \"non_existent_function\""),
        ("rate(avg)", "1:6: parse error: expected type range vector in call to function \"rate\", got instant vector"),
        ("\"\\", "1:1: parse error: escape sequence not terminated"),
        ("\"\\x.\"", "1:1: parse error: illegal character U+002E '.' in escape sequence"),
        ("info(rate(x[5m]), target_info{foo=\"bar\"})", "1:19: parse error: expected label selectors only, got vector selector instead"),
        ("sum(rate(", "1:10: parse error: unclosed left parenthesis"),
        ("foo\n  + \n  on(", "3:6: parse error: unclosed left parenthesis"),
        // Contexts from upstream's error productions (checked against upstream's parser).
        ("sum(rate(=x[5m]))", "1:10: parse error: unexpected \"=\" in aggregation"),
        ("sum(x y)", "1:7: parse error: unexpected identifier \"y\" in aggregation"),
        ("rate(x y)", "1:8: parse error: unexpected identifier \"y\""),
        ("rate(agv,[5m])", "1:9: parse error: trailing commas not allowed in function call args"),
        ("clamp(x, -25,<= 75)", "1:13: parse error: trailing commas not allowed in function call args"),
        ("foo[max_of(range),5s)]", "1:17: parse error: unexpected \")\" in subquery or range selector, expected number, duration, step(), or range()"),
        ("foo[5m/]", "1:8: parse error: unexpected \"]\" in subquery or range selector, expected number, duration, step(), or range()"),
        ("foo[5m 5m]", "1:8: parse error: unexpected duration \"5m\" in subquery or range, expected \":\" or \"]\""),
        ("foo[5m:1m+]", "1:11: parse error: unexpected \"]\" in subquery selector, expected number, duration, step(), range(), or \"]\""),
        ("foo offset min_of(stp(), 1s)", "1:19: parse error: unexpected identifier \"stp\" in offset, expected number, duration, step(), or range()"),
        ("foo offset (1m) * 2 *", "1:22: parse error: unexpected end of input in offset, expected number, duration, step(), or range()"),
        ("a * on(b) group_right != c", "1:23: parse error: unexpected <op:!=> in grouping opts, expected \"(\""),
        ("foo[0m", "1:7: parse error: unclosed left bracket"),
        ("avg(topk11, foo)) == 52", "1:18: parse error: unexpected right parenthesis ')'"),
        ("3_ < x", "1:1: parse error: error parsing number: strconv.ParseFloat: parsing \"3_\": invalid syntax"),
        ("{a=~\"x)|(y\"}", "1:2: parse error: error parsing regexp: unexpected ): `x)|(y`"),
        ("{a=~\"(x\"}", "1:2: parse error: error parsing regexp: missing closing ): `(x`"),
        ("{a=~\"*x\"}", "1:2: parse error: error parsing regexp: missing argument to repetition operator: `*`"),
    ];
    let mut bad = Vec::new();
    for (input, want) in cases {
        let got = error(input);
        if got != want {
            bad.push(format!("{input:?}\n  got:  {got}\n  want: {want}"));
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn deep_nesting_is_an_error_not_a_stack_overflow() {
    for open in ["(", "-", "sum(", "foo[(", "abs(", "x offset -("] {
        let input = open.repeat(100_000);
        assert!(parse(&input).is_err(), "{open:?}");
    }
    let nested = format!("{}1{}", "(".repeat(100), ")".repeat(100));
    assert_eq!(canon(&nested), nested);
}

#[test]
fn durations_and_metric_selectors() {
    assert_eq!(parse_duration("1y2w3d4h5m6s7ms"), Ok(((365 + 14 + 3) * 86_400 + 4 * 3600 + 5 * 60 + 6) * 1000 + 7));
    assert_eq!(parse_duration("0"), Ok(0));
    assert_eq!(parse_duration(""), Err("empty duration string".into()));
    assert_eq!(parse_duration("1m1h"), Err("not a valid duration string: \"1m1h\"".into()));
    assert_eq!(parse_duration("1.5s"), Err("unknown unit \".\" in duration \"1.5s\"".into()));
    assert_eq!(parse_duration("300y"), Err("duration out of range".into()));
    assert_eq!(format_duration_ms(90 * 86_400_000), "90d");
    assert_eq!(format_duration_ms(14 * 86_400_000), "2w");
    assert_eq!(format_duration_ms(3_723_004), "1h2m3s4ms");

    let ms = parse_metric_selector("up{job=~\"a|b\", \"x.y\"!=\"\"}").expect("parses");
    let printed: Vec<String> = ms.iter().map(format_matcher).collect();
    assert_eq!(printed, vec!["job=~\"a|b\"", "\"x.y\"!=\"\"", "__name__=\"up\""]);
    assert_eq!(parse_metric_selector("{\"a.b\"}").map(|m| m[0].value.clone()), Ok("a.b".to_string()));
    assert!(parse_metric_selector("up + 1").is_err());
    assert!(parse_metric_selector("rate(x[5m])").is_err());
}

/// Random inputs never panic the lexer, parser or printer, and whatever parses prints to a string that
/// parses to the same canonical form. (A seeded generator rather than the proptest crate so that this
/// module adds no dependency to the crate; it runs the same way on every CI run.)
mod never_panics {
    use super::super::parse;

    /// Fragments of PromQL, so random strings reach deep into the grammar instead of failing at once.
    const PIECES: &[&str] = &[
        "foo", "{", "}", "(", ")", "[", "]", ":", ",", "5m", "1", "-", "+", "*", "/", "^", "%", " ", "offset",
        "@", "start()", "step()", "min_of(", "by", "without", "sum", "rate", "on", "ignoring", "group_left",
        "fill", "bool", "and", "\"x\"", "'", "`", "=~", "!=", "=", "==", "anchored", "smoothed", "#", "\n",
        "0x", "1e", "Inf", ".", "\\", "label_replace", "topk", "info", "a.b", "é", "\u{FFFD}", "x=\"1\"",
    ];

    /// xorshift64*: small, seeded, good enough to spread choices.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    fn check(s: &str) {
        if let Ok(e) = parse(s) {
            let printed = e.to_string();
            assert_eq!(parse(&printed).map(|e| e.to_string()), Ok(printed.clone()), "input {s:?} printed {printed:?}");
        }
    }

    #[test]
    fn random_fragment_sequences() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for _ in 0..20_000 {
            let n = rng.below(24);
            let s: String = (0..n).map(|_| PIECES[rng.below(PIECES.len())]).collect();
            check(&s);
        }
    }

    #[test]
    fn random_characters() {
        let mut rng = Rng(42);
        let alphabet: Vec<char> = "abz_:{}()[]<>=!~^*/%+-,.@#`'\"\\ \n\t019eExXé\u{FFFD}".chars().collect();
        for _ in 0..20_000 {
            let n = rng.below(32);
            let s: String = (0..n).map(|_| alphabet[rng.below(alphabet.len())]).collect();
            check(&s);
        }
    }

    #[test]
    fn mutated_conformance_expressions() {
        let mut rng = Rng(7);
        let exprs: Vec<String> = super::conformance_evals().into_iter().map(|(_, _, e, _)| e).collect();
        if exprs.is_empty() {
            return;
        }
        for _ in 0..20_000 {
            let mut s: Vec<char> = exprs[rng.below(exprs.len())].chars().collect();
            for _ in 0..1 + rng.below(3) {
                let at = rng.below(s.len() + 1);
                match rng.below(3) {
                    0 if at < s.len() => {
                        s.remove(at);
                    }
                    1 => s.insert(at, PIECES[rng.below(PIECES.len())].chars().next().unwrap_or(' ')),
                    _ if !s.is_empty() => {
                        let (other, last) = (rng.below(s.len()), s.len() - 1);
                        s.swap(at.min(last), other);
                    }
                    _ => {}
                }
            }
            check(&s.into_iter().collect::<String>());
        }
    }
}

#[test]
fn pretty_splits_long_expressions() {
    let e = parse("sum by (job) (rate(http_requests_total{job=\"api\"}[5m])) / on (job) group_left sum by (job) (rate(errors[5m]))")
        .expect("parses");
    assert_eq!(
        pretty_width(&e, 40),
        "  sum by (job) (\n    rate(http_requests_total{job=\"api\"}[5m])\n  )\n/ on (job) group_left ()\n  sum by (job) (rate(errors[5m]))"
    );
    // Short expressions stay on one line with the default width of 100.
    let e = parse("rate(x[5m])").expect("parses");
    assert_eq!(pretty(&e), "rate(x[5m])");
    let e = parse("-(a + b)").expect("parses");
    assert_eq!(pretty_width(&e, 3), "-(\n    a\n  +\n    b\n)");
}

#[test]
fn json_ast_matches_prometheus_shape() {
    let e = parse("sum by (a) (rate(foo{x=~\"y\"}[5m] offset -(1m)) * on(a) group_left fill(0) bar @ start())").expect("parses");
    let j = to_json(&e);
    assert_eq!(j["type"], "aggregation");
    assert_eq!(j["op"], "sum");
    assert_eq!(j["grouping"], serde_json::json!(["a"]));
    assert_eq!(j["param"], serde_json::Value::Null);
    let b = &j["expr"];
    assert_eq!(b["type"], "binaryExpr");
    assert_eq!(b["op"], "*");
    assert_eq!(b["matching"]["card"], "many-to-one");
    assert_eq!(b["matching"]["fillValues"], serde_json::json!({"lhs": 0.0, "rhs": 0.0}));
    assert_eq!(b["rhs"]["startOrEnd"], "start");
    let call = &b["lhs"];
    assert_eq!(call["func"]["argTypes"], serde_json::json!(["matrix"]));
    assert_eq!(call["func"]["returnType"], "vector");
    let ms = &call["args"][0];
    assert_eq!(ms["type"], "matrixSelector");
    assert_eq!(ms["range"], 300_000);
    // A parenthesised offset stays an expression, as upstream (only bare literals fold).
    assert_eq!(ms["offset"], 0);
    assert_eq!(ms["offsetExpr"]["op"], "-");
    assert_eq!(ms["matchers"][0], serde_json::json!({"name": "x", "type": "=~", "value": "y"}));
    let e = parse("foo[5m+1m] offset (10m/2)").expect("parses");
    let j = to_json(&e);
    assert_eq!(j["range"], 0);
    assert_eq!(
        j["offsetExpr"],
        serde_json::json!({"type": "durationExpr", "op": "/", "wrapped": true,
            "lhs": {"type": "numberLiteral", "val": "600", "duration": true},
            "rhs": {"type": "numberLiteral", "val": "2", "duration": false}})
    );
    assert_eq!(to_json(&parse("1.5").expect("parses")), serde_json::json!({"type": "numberLiteral", "val": "1.5"}));
}

/// Byte-identical results to upstream's parser on 2,238 stratified inputs (see testdata/README.md).
#[test]
fn upstream_golden() {
    let text = include_str!("testdata/upstream_golden.jsonl");
    let mut bad = Vec::new();
    let mut n = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("valid json line");
        let q = v["q"].as_str().expect("query");
        n += 1;
        let got = match parse(q) {
            Ok(e) => serde_json::json!({"q": q, "ok": e.to_string(), "pretty": pretty(&e)}),
            Err(e) => serde_json::json!({"q": q, "err": e.to_string()}),
        };
        if got != v {
            bad.push(format!("{q:?}\n  upstream: {v}\n  ours:     {got}"));
        }
    }
    assert!(n > 2000, "golden file truncated: {n}");
    assert!(bad.is_empty(), "{} of {n} differ from upstream:\n{}", bad.len(), bad.join("\n"));
}

#[test]
fn disabled_experimental_features_are_rejected_like_upstream() {
    let none = ParseOptions::NONE;
    let err = |q: &str| parse_with_options(q, &none).map(|e| e.to_string()).expect_err("rejected").to_string();
    assert_eq!(err("info(up)"), "1:1: parse error: function \"info\" is not enabled");
    assert_eq!(
        err("limitk(1, up)"),
        "1:1: parse error: limitk() is experimental and must be enabled with --enable-feature=promql-experimental-functions"
    );
    assert_eq!(err("foo[5m+1m]"), "1:5: parse error: experimental duration expression is not enabled");
    assert_eq!(err("foo offset -step()"), "1:12: parse error: experimental duration expression is not enabled");
    assert_eq!(err("foo[5m] anchored"), "1:1: parse error: anchored modifier is experimental and not enabled");
    assert_eq!(err("a + fill(0) b"), "1:1: parse error: binop fill modifiers are experimental and not enabled");
    // Plain literals and `offset -(5)` never needed the feature upstream.
    assert_eq!(parse_with_options("foo[5m] offset -(5)", &none).map(|e| e.to_string()), Ok("foo[5m] offset -(5)".into()));
    assert_eq!(ParseOptions::default(), ParseOptions::ALL);
}

/// `to_json` equals upstream's parse_query JSON on 66 expressions covering every node type and modifier.
#[test]
fn upstream_json_golden() {
    let text = include_str!("testdata/upstream_json_golden.jsonl");
    let mut n = 0;
    for line in text.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("valid json line");
        let q = v["q"].as_str().expect("query");
        let e = parse(q).unwrap_or_else(|e| panic!("{q:?}: {e}"));
        assert_eq!(to_json(&e), v["json"], "{q:?}");
        n += 1;
    }
    assert!(n > 60, "golden file truncated: {n}");
}
