//! Differential test of the histogram arithmetic against Prometheus 3.14's own Go code.
//!
//! The case file is produced by a Go program that feeds random histograms (exponential and NHCB,
//! matching and mismatching bounds, all counter-reset hints, NaN sums, zero-length spans …) to
//! upstream's `model/histogram` and `promql` functions and writes one case per line:
//! `<op> <args…> => <upstream result>`, floats as 16 hex digits of their bits, a histogram as
//! `hint;schema;zt;zc;count;sum;pos spans;neg spans;pos buckets;neg buckets;custom values` (spans
//! `offset:length`, lists comma-separated, `-` if empty). Where upstream panics the result is
//! `PANIC`; then only "does not panic" is checked here.
//!
//! The file is large (tens of MB) and generated, so it is not in the repository. Make it with
//! `sh crates/model/tests/histogram_oracle_gen/setup.sh <prometheus checkout> <scratch dir> [seed n] > cases.txt`
//! (Go and python3 needed, no network), then run
//! `TESSERA_HIST_ORACLE=cases.txt cargo test -p tessera-model --test histogram_oracle -- --ignored`.
//! Sections: random valid histograms (every operation), "wide" values (tiny, huge, Inf and NaN
//! counts; chains of 2–6 `kahan_add`s), and invalid layouts (only what upstream survives).

use tessera_model::histogram::{CounterResetHint, FloatHistogram, Histogram, Span};
use tessera_model::histogram_quantile::{
    histogram_fraction_annotated, histogram_quantile_annotated, histogram_variance,
};

fn fl(s: &str) -> f64 {
    f64::from_bits(u64::from_str_radix(s, 16).unwrap_or_else(|e| panic!("bad float {s}: {e}")))
}

fn fls(s: &str) -> Vec<f64> {
    if s == "-" {
        Vec::new()
    } else {
        s.split(',').map(fl).collect()
    }
}

fn sps(s: &str) -> Vec<Span> {
    if s == "-" {
        return Vec::new();
    }
    s.split(',')
        .map(|x| {
            let (o, l) = x.split_once(':').expect("span");
            Span::new(o.parse().expect("offset"), l.parse().expect("length"))
        })
        .collect()
}

fn parse_h(s: &str) -> FloatHistogram {
    let f: Vec<&str> = s.split(';').collect();
    assert_eq!(f.len(), 11, "histogram {s}");
    FloatHistogram {
        counter_reset_hint: CounterResetHint::from_u8(f[0].parse().expect("hint")).expect("hint"),
        schema: f[1].parse().expect("schema"),
        zero_threshold: fl(f[2]),
        zero_count: fl(f[3]),
        count: fl(f[4]),
        sum: fl(f[5]),
        positive_spans: sps(f[6]),
        negative_spans: sps(f[7]),
        positive_buckets: fls(f[8]),
        negative_buckets: fls(f[9]),
        custom_values: fls(f[10]),
    }
}

fn ints(s: &str) -> Vec<i64> {
    if s == "-" {
        Vec::new()
    } else {
        s.split(',').map(|x| x.parse().expect("int")).collect()
    }
}

fn parse_ih(s: &str) -> Histogram {
    let f: Vec<&str> = s.split(';').collect();
    assert_eq!(f.len(), 11, "histogram {s}");
    Histogram {
        counter_reset_hint: CounterResetHint::from_u8(f[0].parse().expect("hint")).expect("hint"),
        schema: f[1].parse().expect("schema"),
        zero_threshold: fl(f[2]),
        zero_count: f[3].parse().expect("zero count"),
        count: f[4].parse().expect("count"),
        sum: fl(f[5]),
        positive_spans: sps(f[6]),
        negative_spans: sps(f[7]),
        positive_buckets: ints(f[8]),
        negative_buckets: ints(f[9]),
        custom_values: fls(f[10]),
    }
}

fn fmt_ih(h: &Histogram) -> String {
    let ints = |v: &[i64]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.iter().map(|x| x.to_string()).collect::<Vec<_>>().join(",")
        }
    };
    format!(
        "{};{};{};{};{};{};{};{};{};{};{}",
        h.counter_reset_hint as u8,
        h.schema,
        hx(h.zero_threshold),
        h.zero_count,
        h.count,
        hx(h.sum),
        spss(&h.positive_spans),
        spss(&h.negative_spans),
        ints(&h.positive_buckets),
        ints(&h.negative_buckets),
        hxs(&h.custom_values)
    )
}

fn hx(v: f64) -> String {
    format!("{:016x}", v.to_bits())
}

fn hxs(v: &[f64]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.iter().map(|x| hx(*x)).collect::<Vec<_>>().join(",")
    }
}

fn spss(v: &[Span]) -> String {
    if v.is_empty() {
        "-".into()
    } else {
        v.iter()
            .map(|s| format!("{}:{}", s.offset, s.length))
            .collect::<Vec<_>>()
            .join(",")
    }
}

fn fmt_h(h: &FloatHistogram) -> String {
    format!(
        "{};{};{};{};{};{};{};{};{};{};{}",
        h.counter_reset_hint as u8,
        h.schema,
        hx(h.zero_threshold),
        hx(h.zero_count),
        hx(h.count),
        hx(h.sum),
        spss(&h.positive_spans),
        spss(&h.negative_spans),
        hxs(&h.positive_buckets),
        hxs(&h.negative_buckets),
        hxs(&h.custom_values)
    )
}

/// What upstream's `FloatHistogram.Copy` keeps: NHCBs lose zero-bucket and negative fields,
/// exponential histograms their custom values.
fn upstream_copy(h: &FloatHistogram) -> FloatHistogram {
    let mut c = h.clone();
    if c.uses_custom_buckets() {
        c.zero_threshold = 0.0;
        c.zero_count = 0.0;
        c.negative_spans.clear();
        c.negative_buckets.clear();
    } else {
        c.custom_values.clear();
    }
    c
}

fn err(e: impl std::fmt::Display) -> String {
    format!("ERR {}", e.to_string().replace(' ', "_"))
}

fn buckets(it: impl Iterator<Item = tessera_model::histogram_float::Bucket>) -> String {
    let v: Vec<String> = it
        .map(|b| {
            format!(
                "{}:{}:{}:{}:{}:{}",
                hx(b.lower),
                hx(b.upper),
                b.lower_inclusive,
                b.upper_inclusive,
                hx(b.count),
                b.index
            )
        })
        .collect();
    if v.is_empty() { "-".into() } else { v.join(",") }
}

/// Runs one case and returns what upstream's harness would print.
fn run(op: &str, args: &[&str]) -> String {
    match op {
        "add" | "sub" => {
            let (mut a, b) = (parse_h(args[0]), parse_h(args[1]));
            let r = if op == "add" { a.add(&b) } else { a.sub(&b) };
            match r {
                Ok((c1, c2)) => {
                    if op == "sub" {
                        a.compact(0);
                    }
                    format!("{} {c1} {c2}", fmt_h(&a))
                }
                Err(e) => err(e),
            }
        }
        "kahan3" => {
            let (mut x, b, c) = (parse_h(args[0]), parse_h(args[1]), parse_h(args[2]));
            let comp = match x.kahan_add(&b, None) {
                Ok((comp, _, _)) => comp,
                Err(e) => return err(e),
            };
            let (comp, c1, c2) = match x.kahan_add(&c, Some(comp)) {
                Ok(r) => r,
                Err(e) => return err(e),
            };
            let s = format!("{} {} {c1} {c2}", fmt_h(&x), fmt_h(&comp));
            let mut fin = x.clone();
            match fin.add(&comp) {
                Ok(_) => format!("{s} {}", fmt_h(fin.compact(0))),
                Err(e) => format!("{s} {}", err(e)),
            }
        }
        "kahann" => {
            let mut x = parse_h(args[0]);
            let mut comp = None;
            for y in &args[1..] {
                match x.kahan_add(&parse_h(y), comp.take()) {
                    Ok((c, _, _)) => comp = Some(c),
                    Err(e) => return err(e),
                }
            }
            let comp = comp.expect("at least one addend");
            let mut fin = x.clone();
            match fin.add(&comp) {
                Ok(_) => format!("{} {} {}", fmt_h(&x), fmt_h(&comp), fmt_h(fin.compact(0))),
                Err(e) => err(e),
            }
        }
        "detect" => parse_h(args[0]).detect_reset(&parse_h(args[1])).to_string(),
        "equals" => {
            let a = parse_h(args[0]);
            format!("{} {}", a.equals(&parse_h(args[1])), a.equals(&upstream_copy(&a)))
        }
        "mul" => fmt_h(parse_h(args[0]).mul(fl(args[1]))),
        "div" => fmt_h(parse_h(args[0]).div(fl(args[1]))),
        "compact" => fmt_h(parse_h(args[0]).compact(args[1].parse().expect("n"))),
        "copyschema" => match parse_h(args[0]).copy_to_schema(args[1].parse().expect("schema")) {
            Ok(h) => fmt_h(&h),
            Err(e) => err(e),
        },
        "reduce" => {
            let mut h = parse_h(args[0]);
            match h.reduce_resolution(args[1].parse().expect("schema")) {
                Ok(()) => fmt_h(&h),
                Err(e) => err(e),
            }
        }
        "string" => parse_h(args[0]).to_string().replace(' ', "_"),
        "testexpr" => parse_h(args[0]).test_expression().replace(' ', "_"),
        "validate" => match parse_h(args[0]).validate() {
            Ok(()) => "ok".into(),
            Err(e) => err(e),
        },
        "iters" => {
            let h = parse_h(args[0]);
            [
                buckets(h.positive_bucket_iter()),
                buckets(h.negative_bucket_iter()),
                buckets(h.positive_reverse_bucket_iter()),
                buckets(h.negative_reverse_bucket_iter()),
                buckets(h.all_bucket_iter()),
                buckets(h.all_reverse_bucket_iter()),
            ]
            .join(" ")
        }
        "quantile" => {
            let (v, info) = histogram_quantile_annotated(fl(args[0]), &parse_h(args[1]));
            format!("{} {}", hx(v), info.map_or("-".into(), |i| format!("{i:?}")))
        }
        "fraction" => {
            let (v, info) = histogram_fraction_annotated(fl(args[0]), fl(args[1]), &parse_h(args[2]));
            format!("{} {}", hx(v), info.map_or("-".into(), |i| format!("{i:?}")))
        }
        "variance" => hx(histogram_variance(&parse_h(args[0]))),
        "trim" => fmt_h(parse_h(args[0]).trim_buckets(fl(args[1]), args[2] == "true")),
        "icompact" => fmt_ih(parse_ih(args[0]).compact(args[1].parse().expect("n"))),
        "ireduce" => {
            let mut h = parse_ih(args[0]);
            match h.reduce_resolution(args[1].parse().expect("schema")) {
                Ok(()) => fmt_ih(&h),
                Err(e) => err(e),
            }
        }
        "ivalidate" => match parse_ih(args[0]).validate() {
            Ok(()) => "ok".into(),
            Err(e) => err(e),
        },
        _ => panic!("unknown op {op}"),
    }
}

/// Token-wise comparison where any two NaNs are equal (Go and Rust NaN payloads differ).
fn same(got: &str, want: &str) -> bool {
    if got == want {
        return true;
    }
    let split = |s: &str| s.split([' ', ';', ',', ':']).map(str::to_string).collect::<Vec<_>>();
    let (g, w) = (split(got), split(want));
    g.len() == w.len()
        && g.iter().zip(&w).all(|(a, b)| {
            a == b
                || (a.len() == 16
                    && b.len() == 16
                    && u64::from_str_radix(a, 16).is_ok_and(|x| f64::from_bits(x).is_nan())
                    && u64::from_str_radix(b, 16).is_ok_and(|x| f64::from_bits(x).is_nan()))
        })
}

#[test]
#[ignore = "needs TESSERA_HIST_ORACLE=<case file made with Prometheus' Go code>"]
fn histogram_ops_match_upstream() {
    let Some(path) = std::env::var_os("TESSERA_HIST_ORACLE") else {
        panic!("set TESSERA_HIST_ORACLE to the oracle case file");
    };
    let text = std::fs::read_to_string(&path).expect("read oracle file");
    let (mut failures, mut total, mut panics) = (Vec::new(), 0, 0);
    for (n, line) in text.lines().enumerate() {
        let Some((lhs, want)) = line.split_once(" => ") else {
            continue;
        };
        let mut parts = lhs.split(' ');
        let op = parts.next().expect("op");
        let args: Vec<&str> = parts.collect();
        total += 1;
        let got = run(op, &args);
        if want == "PANIC" {
            panics += 1;
            continue;
        }
        if !same(&got, want) {
            failures.push(format!("line {}: {lhs}\n  want {want}\n  got  {got}", n + 1));
        }
    }
    eprintln!(
        "{total} cases, {panics} where upstream panics (checked for no panic only), {} failures",
        failures.len()
    );
    let mut shown = std::collections::HashSet::new();
    for f in failures
        .iter()
        .filter(|f| shown.insert(f.split(' ').nth(2).map(str::to_string)))
        .take(15)
    {
        eprintln!("{f}");
    }
    assert!(
        failures.is_empty(),
        "{} of {total} cases differ from upstream",
        failures.len()
    );
}
