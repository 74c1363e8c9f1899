//! Upstream's table tests for `FloatHistogram` and `Histogram` (model/histogram/float_histogram_test.go,
//! histogram_test.go), translated case by case: the expected values are the ones upstream's tests assert.
//! The case tables at the end of this file were translated mechanically from the Go literals.

#![allow(clippy::approx_constant)] // Upstream's tables scale by 3.1415, which is not meant as π.

use super::*;

/// One case of any of the tables; each table uses the fields it needs.
#[derive(Debug, Default)]
struct Case {
    name: &'static str,
    a: Option<FloatHistogram>,
    b: Option<FloatHistogram>,
    c: Option<FloatHistogram>,
    expected: Option<FloatHistogram>,
    scalar: f64,
    n: i64,
    flag: bool,
    flag2: bool,
    err: &'static str,
}

fn req(h: &Option<FloatHistogram>, what: &str, name: &str) -> FloatHistogram {
    h.clone().unwrap_or_else(|| panic!("{name}: case has no {what}"))
}

/// What upstream's `FloatHistogram.Copy` keeps, which its tests compare: NHCBs lose zero-bucket
/// and negative fields, exponential histograms their custom values.
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

#[test]
fn mul_table() {
    for c in mul_cases() {
        let mut a = req(&c.a, "input", c.name);
        a.mul(c.scalar);
        assert_eq!(a, req(&c.expected, "expected", c.name), "{}", c.name);
    }
}

#[test]
fn div_table() {
    for c in div_cases() {
        let mut a = req(&c.a, "input", c.name);
        a.div(c.scalar);
        assert_eq!(a, req(&c.expected, "expected", c.name), "{}", c.name);
    }
}

#[test]
fn detect_reset_table() {
    for c in detect_reset_cases() {
        let (current, previous) = (req(&c.a, "current", c.name), req(&c.b, "previous", c.name));
        assert_eq!(current.detect_reset(&previous), c.flag, "{}", c.name);
    }
}

#[test]
fn compact_table() {
    for c in compact_cases() {
        let mut a = req(&c.a, "input", c.name);
        a.compact(c.n as usize);
        assert_eq!(a, req(&c.expected, "expected", c.name), "{}", c.name);
    }
}

/// Upstream `testHistogramAdd`.
fn check_add(
    name: &str,
    a: &FloatHistogram,
    b: &FloatHistogram,
    expected: Option<&FloatHistogram>,
    err: &str,
    collision: bool,
    reconciled: bool,
) {
    assert_eq!(a.validate(), Ok(()), "{name}: a");
    assert_eq!(b.validate(), Ok(()), "{name}: b");
    let mut res = upstream_copy(a);
    let out = res.add(b);
    match &out {
        Err(e) => assert_eq!(e.to_string(), err, "{name}"),
        Ok(flags) => {
            assert_eq!(err, "", "{name}: expected an error");
            assert_eq!(*flags, (collision, reconciled), "{name}: (collision, reconciled)");
        }
    }
    if let Some(expected) = expected {
        res.compact(0);
        let mut want = upstream_copy(expected);
        want.compact(0);
        assert_eq!(res, want, "{name}");
    }
}

/// Upstream `testHistogramKahanAdd`.
#[allow(clippy::too_many_arguments)]
fn check_kahan_add(
    name: &str,
    a: &FloatHistogram,
    c: Option<&FloatHistogram>,
    b: &FloatHistogram,
    expected: Option<&FloatHistogram>,
    err: &str,
    collision: bool,
    reconciled: bool,
) {
    let mut x = upstream_copy(a);
    let res = match x.kahan_add(b, c.map(upstream_copy)) {
        Err(e) => {
            assert_eq!(e.to_string(), err, "{name}");
            return;
        }
        Ok((comp, c1, c2)) => {
            assert_eq!(err, "", "{name}: expected an error");
            assert_eq!((c1, c2), (collision, reconciled), "{name}: (collision, reconciled)");
            assert_eq!(x.schema, comp.schema, "{name}");
            assert_eq!(x.zero_threshold, comp.zero_threshold, "{name}");
            assert_eq!(x.positive_spans, comp.positive_spans, "{name}");
            assert_eq!(x.negative_spans, comp.negative_spans, "{name}");
            assert_eq!(x.custom_values.len(), comp.custom_values.len(), "{name}");
            assert_eq!(x.positive_buckets.len(), comp.positive_buckets.len(), "{name}");
            assert_eq!(x.negative_buckets.len(), comp.negative_buckets.len(), "{name}");
            let mut res = x.clone();
            res.add(&comp).unwrap_or_else(|e| panic!("{name}: {e}"));
            res
        }
    };
    if let Some(expected) = expected {
        let mut res = res;
        res.compact(0);
        let mut want = upstream_copy(expected);
        want.compact(0);
        assert_eq!(res, want, "{name}");
    }
}

#[test]
fn add_table() {
    for c in add_cases() {
        let (a, b) = (req(&c.a, "in1", c.name), req(&c.b, "in2", c.name));
        let e = c.expected.as_ref();
        check_add(c.name, &a, &b, e, c.err, c.flag, c.flag2);
        check_add(c.name, &b, &a, e, c.err, c.flag, c.flag2);
        check_kahan_add(c.name, &a, None, &b, e, c.err, c.flag, c.flag2);
        check_kahan_add(c.name, &b, None, &a, e, c.err, c.flag, c.flag2);
    }
}

#[test]
fn kahan_add_with_compensation_table() {
    for c in kahan_add_comp_cases() {
        let (a, b) = (req(&c.a, "in1", c.name), req(&c.b, "in2", c.name));
        check_kahan_add(
            c.name,
            &a,
            c.c.as_ref(),
            &b,
            c.expected.as_ref(),
            c.err,
            c.flag,
            c.flag2,
        );
    }
}

/// Upstream `testFloatHistogramSub`.
fn check_sub(
    name: &str,
    a: &FloatHistogram,
    b: &FloatHistogram,
    expected: Option<&FloatHistogram>,
    err: &str,
    collision: bool,
    reconciled: bool,
) {
    assert_eq!(a.validate(), Ok(()), "{name}: a");
    assert_eq!(b.validate(), Ok(()), "{name}: b");
    let mut res = upstream_copy(a);
    let out = res.sub(b);
    if let Err(e) = &out {
        assert_eq!(e.to_string(), err, "{name}");
    } else {
        assert_eq!(err, "", "{name}: expected an error");
    }
    if let Some(expected) = expected {
        res.compact(0);
        let mut want = upstream_copy(expected);
        want.compact(0);
        assert_eq!(res, want, "{name}");
        assert_eq!(
            out.ok(),
            Some((collision, reconciled)),
            "{name}: (collision, reconciled)"
        );
    }
}

#[test]
fn sub_table() {
    for c in sub_cases() {
        let (a, b) = (req(&c.a, "in1", c.name), req(&c.b, "in2", c.name));
        check_sub(c.name, &a, &b, c.expected.as_ref(), c.err, c.flag, c.flag2);
        let negated = c.expected.as_ref().map(|e| {
            let mut n = e.clone();
            n.mul(-1.0);
            n.counter_reset_hint = e.counter_reset_hint;
            n
        });
        check_sub(c.name, &b, &a, negated.as_ref(), c.err, c.flag, c.flag2);
    }
}

#[test]
fn copy_to_schema_table() {
    for c in copy_to_schema_cases() {
        let a = req(&c.a, "input", c.name);
        let before = a.clone();
        let got = a
            .copy_to_schema(c.n as i32)
            .unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert_eq!(got, req(&c.expected, "expected", c.name), "{}", c.name);
        assert_eq!(a, before, "{}: receiver mutated", c.name);
    }
}

#[test]
fn string_table() {
    for c in string_cases() {
        let a = req(&c.a, "input", c.name);
        assert_eq!(a.validate(), Ok(()), "{}", c.name);
        assert_eq!(a.to_string(), c.err, "{}", c.name);
    }
}

/// One case of the integer-histogram tables.
#[derive(Debug, Default)]
struct ICase {
    name: &'static str,
    a: Option<Histogram>,
    expected: Option<Histogram>,
    n: i64,
    err: &'static str,
}

#[test]
fn int_compact_table() {
    for c in int_compact_cases() {
        let mut a = c.a.clone().unwrap_or_default();
        a.compact(c.n as usize);
        assert_eq!(Some(a), c.expected, "{}", c.name);
    }
}

#[test]
fn int_reduce_resolution_table() {
    for c in int_reduce_resolution_cases() {
        let mut a = c.a.clone().unwrap_or_default();
        match a.reduce_resolution(c.n as i32) {
            Ok(()) => {
                assert_eq!(c.err, "", "{}: expected an error", c.name);
                assert_eq!(Some(a), c.expected, "{}", c.name);
            }
            Err(e) => assert_eq!(e.to_string(), c.err, "{}", c.name),
        }
    }
}

/// Upstream `TestReduceResolutionHistogram` and `TestReduceResolutionFloatHistogram`
/// (model/histogram/generic_test.go).
#[test]
fn reduce_resolution_generic_table() {
    let spans = vec![Span::new(0, 4), Span::new(0, 0), Span::new(3, 2)];
    let (s, b) = reduce_resolution_generic(&spans, &[1i64, 2, -2, 1, -1, 0], 0, -1, true).expect("valid");
    assert_eq!(s, vec![Span::new(0, 3), Span::new(1, 1)]);
    assert_eq!(b, vec![1, 3, -2, 0]);
    let (s, b) = reduce_resolution_generic(&spans, &[1.0, 3.0, 1.0, 2.0, 1.0, 1.0], 0, -1, false).expect("valid");
    assert_eq!(s, vec![Span::new(0, 3), Span::new(1, 1)]);
    assert_eq!(b, vec![1.0, 4.0, 2.0, 2.0]);
}

/// The cases of upstream `TestFloatHistogramMul` (model/histogram/float_histogram_test.go).
fn mul_cases() -> Vec<Case> {
    vec![
        Case {
            name: "zero value",
            a: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            scalar: 3.1415,
            expected: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "zero multiplier",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            scalar: 0.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 0.0,
                count: 0.0,
                sum: 0.0,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![0.0, 0.0, 0.0, 0.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![0.0, 0.0, 0.0, 0.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "no-op",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            scalar: 1.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "double",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            scalar: 2.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 3493.3 * 2.0,
                sum: 2349209.324 * 2.0,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![2.0, 6.6, 8.4, 0.2],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![6.2, 6.0, 1.234e5 * 2.0, 2000.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "triple",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 23.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            scalar: 3.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 33.0,
                count: 90.0,
                sum: 69.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![3.0, 0.0, 9.0, 12.0, 21.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![9.0, 3.0, 15.0, 18.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "negation",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 23.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            scalar: -1.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: -11.0,
                count: -30.0,
                sum: -23.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![-1.0, 0.0, -3.0, -4.0, -7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![-3.0, -1.0, -5.0, -6.0],
                counter_reset_hint: CounterResetHint::Gauge,
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "negative multiplier",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 23.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            scalar: -2.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: -22.0,
                count: -60.0,
                sum: -46.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![-2.0, 0.0, -6.0, -8.0, -14.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![-6.0, -2.0, -10.0, -12.0],
                counter_reset_hint: CounterResetHint::Gauge,
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "no-op with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            scalar: 1.0,
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "triple with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 30.0,
                sum: 23.0,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            scalar: 3.0,
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 90.0,
                sum: 69.0,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![3.0, 0.0, 9.0, 12.0, 21.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
    ]
}

/// The cases of upstream `TestFloatHistogramDiv` (model/histogram/float_histogram_test.go).
fn div_cases() -> Vec<Case> {
    vec![
        Case {
            name: "zero value",
            a: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            scalar: 3.1415,
            expected: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "zero divisor",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            scalar: 0.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                count: f64::INFINITY,
                sum: f64::INFINITY,
                zero_count: f64::INFINITY,
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "no-op",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            scalar: 1.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "half",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 23.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            scalar: 2.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 15.0,
                sum: 11.5,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![0.5, 0.0, 1.5, 2.0, 3.5],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![1.5, 0.5, 2.5, 3.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "negation",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            scalar: -1.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: -5.5,
                count: -3493.3,
                sum: -2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![-1.0, -3.3, -4.2, -0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![-3.1, -3.0, -1.234e5, -1000.0],
                counter_reset_hint: CounterResetHint::Gauge,
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "negative half",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 23.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            scalar: -2.0,
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: -5.5,
                count: -15.0,
                sum: -11.5,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![-0.5, 0.0, -1.5, -2.0, -3.5],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![-1.5, -0.5, -2.5, -3.0],
                counter_reset_hint: CounterResetHint::Gauge,
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "no-op with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            scalar: 1.0,
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "half with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 30.0,
                sum: 23.0,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            scalar: 2.0,
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 15.0,
                sum: 11.5,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![0.5, 0.0, 1.5, 2.0, 3.5],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
    ]
}

/// The cases of upstream `TestFloatHistogramDetectReset` (model/histogram/float_histogram_test.go).
fn detect_reset_cases() -> Vec<Case> {
    vec![
        Case {
            name: "zero values",
            b: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "no buckets to some buckets",
            b: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "some buckets to no buckets",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "one bucket appears, nothing else changes",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "one bucket disappears, nothing else changes",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "an unpopulated bucket disappears, nothing else changes",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "an unpopulated bucket at the end disappears, nothing else changes",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(1, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(1, 2)],
                positive_buckets: vec![1.0, 3.3, 4.2],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "an unpopulated bucket disappears in a histogram with nothing else",
            b: Some(FloatHistogram {
                positive_spans: vec![Span::new(23, 1)],
                positive_buckets: vec![0.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "zero count goes up",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.6,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "zero count goes down",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.4,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "count goes up",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.4,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "count goes down",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.2,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "sum goes up",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349210.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "sum goes down",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349200.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "one positive bucket goes up",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.3, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "one positive bucket goes down",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.1, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "one negative bucket goes up",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.1, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "one negative bucket goes down",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 2.9, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "zero threshold decreases",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.009,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "zero threshold increases without touching any existing buckets",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.011,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "zero threshold increases enough to cover existing buckets",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 7.73,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(1, 3)],
                positive_buckets: vec![3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "zero threshold increases into the middle of an existing buckets",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.3,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "schema increases without any other changes",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                schema: 0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                schema: 1,
                positive_spans: vec![Span::new(-5, 4), Span::new(2, 6)],
                positive_buckets: vec![0.4, 0.6, 1.0, 0.23, 2.0, 1.3, 1.2, 3.0, 0.05, 0.05],
                negative_spans: vec![Span::new(5, 4), Span::new(6, 4)],
                negative_buckets: vec![2.0, 1.1, 2.0, 1.0, 0.234e5, 1e5, 500.0, 500.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "schema decreases without any other changes",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                schema: 1,
                positive_spans: vec![Span::new(-5, 4), Span::new(2, 6)],
                positive_buckets: vec![0.4, 0.6, 1.0, 0.23, 2.0, 1.3, 1.2, 3.0, 0.05, 0.05],
                negative_spans: vec![Span::new(5, 4), Span::new(6, 4)],
                negative_buckets: vec![2.0, 1.1, 2.0, 1.0, 0.234e5, 1e5, 500.0, 500.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                schema: 0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "schema decreases and a bucket goes up",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                schema: 1,
                positive_spans: vec![Span::new(-5, 4), Span::new(2, 6)],
                positive_buckets: vec![0.4, 0.6, 1.0, 0.23, 2.0, 1.3, 1.2, 3.0, 0.05, 0.05],
                negative_spans: vec![Span::new(5, 4), Span::new(6, 4)],
                negative_buckets: vec![2.0, 1.1, 2.0, 1.0, 0.234e5, 1e5, 500.0, 500.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                schema: 0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 4.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "schema decreases and a bucket goes down",
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                schema: 1,
                positive_spans: vec![Span::new(-5, 4), Span::new(2, 6)],
                positive_buckets: vec![0.4, 0.6, 1.0, 0.23, 2.0, 1.3, 1.2, 3.0, 0.05, 0.05],
                negative_spans: vec![Span::new(5, 4), Span::new(6, 4)],
                negative_buckets: vec![2.0, 1.1, 2.0, 1.0, 0.234e5, 1e5, 500.0, 500.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                schema: 0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 2.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "no buckets to some buckets with custom bounds",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "some buckets to no buckets with custom bounds",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "one bucket appears, nothing else changes with custom bounds",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "one bucket disappears, nothing else changes with custom bounds",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 1.23, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "an unpopulated bucket disappears, nothing else changes with custom bounds",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "one positive bucket goes up with custom bounds",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.3, 0.1],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "one positive bucket goes down with custom bounds",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.3, 4.1, 0.1],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "mismatched custom bounds - no reset when all buckets increase",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 200.0,
                sum: 1000.0,
                positive_spans: vec![Span::new(0, 4)],
                positive_buckets: vec![20.0, 35.0, 40.0, 50.0],
                custom_values: vec![0.0, 1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 200.0,
                sum: 1000.0,
                positive_spans: vec![Span::new(0, 5)],
                positive_buckets: vec![25.0, 15.0, 40.0, 50.0, 70.0],
                custom_values: vec![0.0, 0.5, 1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "mismatched custom bounds - reset in middle bucket",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 100.0,
                sum: 500.0,
                positive_spans: vec![Span::new(1, 4)],
                positive_buckets: vec![10.0, 15.0, 20.0, 25.0],
                custom_values: vec![0.0, 1.0, 3.0, 5.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 100.0,
                sum: 500.0,
                positive_spans: vec![Span::new(1, 5)],
                positive_buckets: vec![10.0, 16.0, 10.0, 5.0, 25.0],
                custom_values: vec![0.0, 1.0, 2.0, 3.0, 5.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "mismatched custom bounds - reset in last bucket",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 100.0,
                sum: 500.0,
                positive_spans: vec![Span::new(1, 3)],
                positive_buckets: vec![10.0, 20.0, 20.0],
                custom_values: vec![0.0, 1.0, 2.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 100.0,
                sum: 500.0,
                positive_spans: vec![Span::new(1, 4)],
                positive_buckets: vec![100.0, 200.0, 8.0, 7.0],
                custom_values: vec![0.0, 1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "mismatched custom bounds - no common bounds",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 100.0,
                sum: 500.0,
                positive_spans: vec![Span::new(1, 3)],
                positive_buckets: vec![10.0, 20.0, 30.0],
                custom_values: vec![4.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 100.0,
                sum: 500.0,
                positive_spans: vec![Span::new(1, 3)],
                positive_buckets: vec![15.0, 25.0, 35.0],
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "mismatched custom bounds - sparse common bounds",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 200.0,
                sum: 1000.0,
                positive_spans: vec![Span::new(0, 4)],
                positive_buckets: vec![10.0, 20.0, 30.0, 40.0],
                custom_values: vec![0.0, 1.0, 3.0, 5.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 200.0,
                sum: 1000.0,
                positive_spans: vec![Span::new(0, 5)],
                positive_buckets: vec![15.0, 25.0, 70.0, 50.0, 100.0],
                custom_values: vec![0.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
        Case {
            name: "reset detected with mismatched custom bounds and split bucket spans",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 200.0,
                sum: 1000.0,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![10.0, 20.0, 30.0, 40.0, 50.0],
                custom_values: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 200.0,
                sum: 1000.0,
                positive_spans: vec![Span::new(0, 3), Span::new(1, 2)],
                positive_buckets: vec![15.0, 25.0, 35.0, 25.0, 60.0],
                custom_values: vec![0.0, 1.0, 3.0, 4.0, 5.0, 7.0],
                ..FloatHistogram::default()
            }),
            flag: true,
            ..Default::default()
        },
        Case {
            name: "no reset with mismatched custom bounds and split bucket spans",
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 300.0,
                sum: 1500.0,
                positive_spans: vec![Span::new(0, 2), Span::new(2, 3)],
                positive_buckets: vec![10.0, 20.0, 30.0, 40.0, 50.0],
                custom_values: vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 300.0,
                sum: 1500.0,
                positive_spans: vec![Span::new(0, 3), Span::new(1, 2)],
                positive_buckets: vec![12.0, 25.0, 45.0, 75.0, 95.0],
                custom_values: vec![0.0, 0.5, 1.0, 3.0, 5.0, 7.0],
                ..FloatHistogram::default()
            }),
            flag: false,
            ..Default::default()
        },
    ]
}

/// The cases of upstream `TestFloatHistogramCompact` (model/histogram/float_histogram_test.go).
fn compact_cases() -> Vec<Case> {
    vec![
        Case {
            name: "empty histogram",
            a: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "nothing should happen",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "eliminate zero offsets",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(0, 3), Span::new(0, 1)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(0, 2), Span::new(2, 1), Span::new(0, 1)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 5)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 4), Span::new(2, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "eliminate zero length",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 0), Span::new(3, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(0, 0), Span::new(2, 0), Span::new(1, 4)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(5, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 4)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "eliminate multiple zero length spans",
            a: Some(FloatHistogram {
                positive_spans: vec![
                    Span::new(-2, 2),
                    Span::new(2, 0),
                    Span::new(2, 0),
                    Span::new(2, 0),
                    Span::new(3, 3),
                ],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(9, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut empty buckets at start or end",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-4, 4), Span::new(5, 3)],
                positive_buckets: vec![0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0, 0.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(5, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 4)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut empty buckets at start and end",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-4, 4), Span::new(5, 6)],
                positive_buckets: vec![0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3, 0.0, 0.0, 0.0],
                negative_spans: vec![Span::new(-2, 4), Span::new(3, 5)],
                negative_buckets: vec![0.0, 0.0, 3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0, 0.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(5, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 4)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut empty buckets in the middle",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(5, 4)],
                positive_buckets: vec![1.0, 3.0, 0.0, 2.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(5, 2), Span::new(1, 1)],
                positive_buckets: vec![1.0, 3.0, 2.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut empty buckets at start or end of spans, even in the middle",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 6)],
                positive_buckets: vec![0.0, 0.0, 1.0, 3.3, 0.0, 0.0, 4.2, 0.1, 3.3, 0.0, 0.0, 0.0],
                negative_spans: vec![Span::new(0, 2), Span::new(2, 6)],
                negative_buckets: vec![3.1, 3.0, 0.0, 1.234e5, 1000.0, 3.0, 4.0, 0.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(5, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 4)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut empty buckets at start and end - also merge spans due to maxEmptyBuckets",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-4, 4), Span::new(5, 3)],
                positive_buckets: vec![0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0, 0.0],
                ..FloatHistogram::default()
            }),
            n: 10,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 10)],
                positive_buckets: vec![1.0, 3.3, 0.0, 0.0, 0.0, 0.0, 0.0, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 9)],
                negative_buckets: vec![3.1, 3.0, 0.0, 0.0, 0.0, 1.234e5, 1000.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut empty buckets from the middle of a span",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 3)],
                positive_buckets: vec![0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 0.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 1), Span::new(3, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 2), Span::new(1, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut out a span containing only empty buckets",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-4, 3), Span::new(2, 2), Span::new(3, 4)],
                positive_buckets: vec![0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(7, 4)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut empty buckets from the middle of a span, avoiding none due to maxEmptyBuckets",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 4)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.3],
                ..FloatHistogram::default()
            }),
            n: 1,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 1)],
                positive_buckets: vec![1.0, 3.3],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut empty buckets and merge spans due to maxEmptyBuckets",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 4), Span::new(3, 1)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.3, 4.2],
                ..FloatHistogram::default()
            }),
            n: 1,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 1), Span::new(3, 1)],
                positive_buckets: vec![1.0, 3.3, 4.2],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut empty buckets from the middle of a span, avoiding some due to maxEmptyBuckets",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 3), Span::new(10, 2)],
                positive_buckets: vec![0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3, 2.0, 3.0],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 0.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            n: 1,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 1), Span::new(3, 3), Span::new(10, 2)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3, 2.0, 3.0],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 0.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "avoiding all cutting of empty buckets from the middle of a chunk due to maxEmptyBuckets",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 3)],
                positive_buckets: vec![0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 0.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            n: 2,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 4), Span::new(3, 3)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 0.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "everything merged into one span due to maxEmptyBuckets",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 3)],
                positive_buckets: vec![0.0, 0.0, 1.0, 0.0, 0.0, 3.3, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0, 0.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            n: 3,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-2, 10)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.3, 0.0, 0.0, 0.0, 4.2, 0.1, 3.3],
                negative_spans: vec![Span::new(0, 10)],
                negative_buckets: vec![3.1, 3.0, 0.0, 0.0, 0.0, 1.234e5, 1000.0, 0.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "only empty buckets and maxEmptyBuckets greater zero",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 3)],
                positive_buckets: vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                negative_spans: vec![Span::new(0, 7)],
                negative_buckets: vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
                ..FloatHistogram::default()
            }),
            n: 3,
            expected: Some(FloatHistogram {
                positive_spans: vec![],
                positive_buckets: vec![],
                negative_spans: vec![],
                negative_buckets: vec![],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "multiple spans of only empty buckets",
            a: Some(FloatHistogram {
                positive_spans: vec![Span::new(-10, 2), Span::new(2, 1), Span::new(3, 3)],
                positive_buckets: vec![0.0, 0.0, 0.0, 0.0, 2.0, 3.0],
                negative_spans: vec![Span::new(-10, 2), Span::new(2, 1), Span::new(3, 3)],
                negative_buckets: vec![2.0, 3.0, 0.0, 0.0, 0.0, 0.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                positive_spans: vec![Span::new(-1, 2)],
                positive_buckets: vec![2.0, 3.0],
                negative_spans: vec![Span::new(-10, 2)],
                negative_buckets: vec![2.0, 3.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "nothing should happen with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "eliminate zero offsets with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(0, 1), Span::new(0, 3), Span::new(0, 1)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(0, 5)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "eliminate multiple zero length spans with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![
                    Span::new(0, 2),
                    Span::new(2, 0),
                    Span::new(2, 0),
                    Span::new(2, 0),
                    Span::new(3, 3),
                ],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(0, 2), Span::new(9, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                custom_values: vec![1.0, 2.0, 3.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "cut empty buckets at start and end with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(0, 4), Span::new(5, 6)],
                positive_buckets: vec![0.0, 0.0, 1.0, 3.3, 4.2, 0.1, 3.3, 0.0, 0.0, 0.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                ..FloatHistogram::default()
            }),
            n: 0,
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(2, 2), Span::new(5, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 3.3],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
    ]
}

/// The cases of upstream `TestFloatHistogramAdd` (model/histogram/float_histogram_test.go).
fn add_cases() -> Vec<Case> {
    vec![
        Case {
            name: "same bucket layout",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![0.0, 0.0, 2.0, 3.0, 6.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 19.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 5.0, 7.0, 13.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![4.0, 2.0, 9.0, 10.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "same bucket layout, defined differently",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 1), Span::new(0, 2)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 2), Span::new(0, 1)],
                positive_buckets: vec![0.0, 0.0, 2.0, 3.0, 6.0],
                negative_spans: vec![Span::new(3, 7)],
                negative_buckets: vec![1.0, 1.0, 0.0, 0.0, 0.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 19.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 1), Span::new(0, 2)],
                positive_buckets: vec![1.0, 0.0, 5.0, 7.0, 13.0],
                negative_spans: vec![Span::new(3, 5), Span::new(0, 2)],
                negative_buckets: vec![4.0, 2.0, 0.0, 0.0, 0.0, 9.0, 10.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "non-overlapping spans",
            a: Some(FloatHistogram {
                zero_threshold: 0.001,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.001,
                zero_count: 8.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(0, 2), Span::new(3, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 3.0, 6.0],
                negative_spans: vec![Span::new(-9, 2), Span::new(3, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.001,
                zero_count: 19.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(-2, 4), Span::new(0, 6)],
                positive_buckets: vec![1.0, 0.0, 5.0, 4.0, 3.0, 4.0, 7.0, 2.0, 3.0, 6.0],
                negative_spans: vec![Span::new(-9, 2), Span::new(3, 2), Span::new(5, 2), Span::new(3, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0, 3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "non-overlapping spans inverted order",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(0, 2), Span::new(3, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 3.0, 6.0],
                negative_spans: vec![Span::new(-6, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 19.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(-2, 2), Span::new(0, 5), Span::new(0, 3)],
                positive_buckets: vec![1.0, 0.0, 5.0, 4.0, 3.0, 4.0, 7.0, 2.0, 3.0, 6.0],
                negative_spans: vec![Span::new(-6, 2), Span::new(1, 2), Span::new(4, 2), Span::new(3, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0, 3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "overlapping spans",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(-1, 4), Span::new(0, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 19.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(-2, 4), Span::new(0, 4)],
                positive_buckets: vec![1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.0, 2.0, 1.0, 4.0, 9.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "overlapping spans inverted order",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(-1, 4), Span::new(0, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 19.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(-2, 5), Span::new(0, 3)],
                positive_buckets: vec![1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.0, 2.0, 1.0, 4.0, 9.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "schema change",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 21.0,
                sum: 1.234,
                schema: 0,
                positive_spans: vec![Span::new(-1, 4), Span::new(0, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                schema: 1,
                positive_spans: vec![Span::new(-4, 3), Span::new(5, 5)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
                negative_spans: vec![Span::new(6, 3), Span::new(6, 4)],
                negative_buckets: vec![3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 19.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(-2, 5), Span::new(0, 3)],
                positive_buckets: vec![1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.0, 2.0, 1.0, 4.0, 9.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "larger zero bucket in first histogram",
            a: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 17.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 2), Span::new(0, 3)],
                positive_buckets: vec![2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 29.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(1, 2), Span::new(0, 3)],
                positive_buckets: vec![2.0, 6.0, 10.0, 9.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.0, 2.0, 1.0, 4.0, 9.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "larger zero bucket in second histogram",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 17.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 2), Span::new(0, 3)],
                positive_buckets: vec![2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 29.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(1, 5)],
                positive_buckets: vec![2.0, 6.0, 10.0, 9.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.0, 2.0, 1.0, 4.0, 9.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "larger zero threshold in first histogram ends up inside a populated bucket of second histogram",
            a: Some(FloatHistogram {
                zero_threshold: 0.2,
                zero_count: 17.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 2), Span::new(0, 3)],
                positive_buckets: vec![2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.25,
                zero_count: 29.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(-1, 1), Span::new(1, 5)],
                positive_buckets: vec![0.0, 2.0, 6.0, 10.0, 9.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.0, 2.0, 1.0, 4.0, 9.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "larger zero threshold in second histogram ends up inside a populated bucket of first histogram",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.2,
                zero_count: 17.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 2), Span::new(0, 3)],
                positive_buckets: vec![2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.25,
                zero_count: 29.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(1, 5)],
                positive_buckets: vec![2.0, 6.0, 10.0, 9.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.0, 2.0, 1.0, 4.0, 9.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "schema change combined with larger zero bucket in second histogram",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 21.0,
                sum: 1.234,
                schema: 0,
                positive_spans: vec![Span::new(-2, 5), Span::new(0, 3)],
                positive_buckets: vec![2.0, 5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.25,
                zero_count: 12.0,
                count: 30.0,
                sum: 2.345,
                schema: 1,
                positive_spans: vec![Span::new(-3, 2), Span::new(5, 5)],
                positive_buckets: vec![1.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
                negative_spans: vec![Span::new(6, 3), Span::new(6, 4)],
                negative_buckets: vec![3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.25,
                zero_count: 22.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(-1, 7)],
                positive_buckets: vec![6.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.0, 2.0, 1.0, 4.0, 9.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "schema change combined with larger zero bucket in first histogram",
            a: Some(FloatHistogram {
                zero_threshold: 0.25,
                zero_count: 8.0,
                count: 21.0,
                sum: 1.234,
                schema: 0,
                positive_spans: vec![Span::new(-1, 4), Span::new(0, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                schema: 1,
                positive_spans: vec![Span::new(-4, 3), Span::new(5, 5)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
                negative_spans: vec![Span::new(6, 3), Span::new(6, 4)],
                negative_buckets: vec![3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.25,
                zero_count: 20.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(-1, 4), Span::new(0, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.0, 2.0, 1.0, 4.0, 9.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "same custom bucket layout",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 15.0,
                sum: 2.345,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 11.0,
                sum: 1.234,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![0.0, 0.0, 2.0, 3.0, 6.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 26.0,
                sum: 3.579,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 5.0, 7.0, 13.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "same custom bucket layout, defined differently",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 15.0,
                sum: 2.345,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 1), Span::new(0, 2)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 11.0,
                sum: 1.234,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 2), Span::new(0, 1)],
                positive_buckets: vec![0.0, 0.0, 2.0, 3.0, 6.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 26.0,
                sum: 3.579,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 1), Span::new(0, 2)],
                positive_buckets: vec![1.0, 0.0, 5.0, 7.0, 13.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "non-overlapping spans with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 15.0,
                sum: 2.345,
                positive_spans: vec![Span::new(0, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 20.0,
                sum: 1.234,
                positive_spans: vec![Span::new(2, 2), Span::new(3, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 3.0, 6.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 35.0,
                sum: 3.579,
                positive_spans: vec![Span::new(0, 4), Span::new(0, 6)],
                positive_buckets: vec![1.0, 0.0, 5.0, 4.0, 3.0, 4.0, 7.0, 2.0, 3.0, 6.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "non-overlapping spans inverted order with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 20.0,
                sum: 1.234,
                positive_spans: vec![Span::new(2, 2), Span::new(3, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 3.0, 6.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 15.0,
                sum: 2.345,
                positive_spans: vec![Span::new(0, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 35.0,
                sum: 3.579,
                positive_spans: vec![Span::new(0, 4), Span::new(0, 6)],
                positive_buckets: vec![1.0, 0.0, 5.0, 4.0, 3.0, 4.0, 7.0, 2.0, 3.0, 6.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "overlapping spans with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 15.0,
                sum: 2.345,
                positive_spans: vec![Span::new(0, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 27.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 4), Span::new(0, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 42.0,
                sum: 3.579,
                positive_spans: vec![Span::new(0, 4), Span::new(0, 4)],
                positive_buckets: vec![1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "overlapping spans inverted order with custom buckets",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 27.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 4), Span::new(0, 3)],
                positive_buckets: vec![5.0, 4.0, 2.0, 3.0, 6.0, 2.0, 5.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 15.0,
                sum: 2.345,
                positive_spans: vec![Span::new(0, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 42.0,
                sum: 3.579,
                positive_spans: vec![Span::new(0, 4), Span::new(0, 4)],
                positive_buckets: vec![1.0, 5.0, 4.0, 2.0, 6.0, 10.0, 9.0, 5.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "custom buckets with partial intersection",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 10.0,
                sum: 100.0,
                positive_spans: vec![Span::new(0, 3)],
                positive_buckets: vec![2.0, 3.0, 5.0],
                custom_values: vec![1.0, 2.5],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 8.0,
                sum: 80.0,
                positive_spans: vec![Span::new(0, 4)],
                positive_buckets: vec![1.0, 2.0, 3.0, 2.0],
                custom_values: vec![1.0, 2.0, 3.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 18.0,
                sum: 180.0,
                positive_spans: vec![Span::new(0, 2)],
                positive_buckets: vec![3.0, 15.0],
                custom_values: vec![1.0],
                ..FloatHistogram::default()
            }),
            flag2: true,
            ..Default::default()
        },
        Case {
            name: "different custom bucket layout - intersection and rollup",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 6.0,
                sum: 2.345,
                positive_spans: vec![Span::new(0, 1), Span::new(1, 1)],
                positive_buckets: vec![1.0, 5.0],
                custom_values: vec![2.0, 4.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 220.0,
                sum: 1.234,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 1), Span::new(0, 2)],
                positive_buckets: vec![10.0, 20.0, 40.0, 50.0, 100.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 226.0,
                sum: 3.579,
                positive_spans: vec![Span::new(0, 3)],
                positive_buckets: vec![1.0 + 10.0 + 20.0, 40.0, 5.0 + 50.0 + 100.0],
                custom_values: vec![2.0, 4.0],
                ..FloatHistogram::default()
            }),
            flag2: true,
            ..Default::default()
        },
        Case {
            name: "custom buckets with no common boundaries except +Inf",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3.0,
                sum: 50.0,
                positive_spans: vec![Span::new(0, 2)],
                positive_buckets: vec![1.0, 2.0],
                custom_values: vec![1.5],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 30.0,
                sum: 40.0,
                positive_spans: vec![Span::new(0, 2)],
                positive_buckets: vec![10.0, 20.0],
                custom_values: vec![2.5],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 33.0,
                sum: 90.0,
                positive_spans: vec![Span::new(0, 1)],
                positive_buckets: vec![1.0 + 2.0 + 10.0 + 20.0],
                custom_values: vec![],
                ..FloatHistogram::default()
            }),
            flag2: true,
            ..Default::default()
        },
        Case {
            name: "mix exponential and custom buckets histograms",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 59.0,
                sum: 1.234,
                schema: 0,
                positive_spans: vec![Span::new(-2, 5), Span::new(0, 3)],
                positive_buckets: vec![2.0, 5.0, 4.0, 2.0, 3.0, 6.0, 7.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![4.0, 10.0, 1.0, 4.0, 14.0, 7.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 11.0,
                sum: 12.0,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![0.0, 0.0, 2.0, 3.0, 6.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            err: "cannot apply this operation on histograms with a mix of exponential and custom bucket schemas",
            ..Default::default()
        },
        Case {
            name: "warn on counter reset hint collision",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                counter_reset_hint: CounterResetHint::CounterReset,
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                counter_reset_hint: CounterResetHint::NotCounterReset,
                ..FloatHistogram::default()
            }),
            err: "",
            flag: true,
            ..Default::default()
        },
    ]
}

/// The cases of upstream `TestFloatHistogramSub` (model/histogram/float_histogram_test.go).
fn sub_cases() -> Vec<Case> {
    vec![
        Case {
            name: "same bucket layout",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 23.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 21.0,
                sum: 12.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![0.0, 0.0, 2.0, 3.0, 6.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 3.0,
                count: 9.0,
                sum: 11.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 1.0, 1.0, 1.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![2.0, 0.0, 1.0, 2.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "schema change",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 59.0,
                sum: 1.234,
                schema: 0,
                positive_spans: vec![Span::new(-2, 5), Span::new(0, 3)],
                positive_buckets: vec![2.0, 5.0, 4.0, 2.0, 3.0, 6.0, 7.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![4.0, 10.0, 1.0, 4.0, 14.0, 7.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 2.0,
                count: 19.0,
                sum: 0.345,
                schema: 1,
                positive_spans: vec![Span::new(-4, 3), Span::new(5, 5)],
                positive_buckets: vec![1.0, 0.0, 0.0, 1.0, 2.0, 2.0, 3.0, 4.0],
                negative_spans: vec![Span::new(6, 3), Span::new(6, 4)],
                negative_buckets: vec![3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 6.0,
                count: 40.0,
                sum: 0.889,
                positive_spans: vec![Span::new(-2, 5), Span::new(0, 3)],
                positive_buckets: vec![1.0, 5.0, 4.0, 2.0, 2.0, 2.0, 0.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![1.0, 9.0, 1.0, 4.0, 9.0, 1.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "same custom bucket layout",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 15.0,
                sum: 23.0,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 11.0,
                sum: 12.0,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![0.0, 0.0, 2.0, 3.0, 6.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 4.0,
                sum: 11.0,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![1.0, 0.0, 1.0, 1.0, 1.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "different custom bucket layout - with intersection and rollup",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 220.0,
                sum: 9.9,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 1), Span::new(0, 2)],
                positive_buckets: vec![10.0, 20.0, 40.0, 50.0, 100.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0],
                counter_reset_hint: CounterResetHint::Gauge,
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 6.0,
                sum: 4.4,
                positive_spans: vec![Span::new(0, 1), Span::new(1, 1)],
                positive_buckets: vec![1.0, 5.0],
                custom_values: vec![2.0, 4.0],
                counter_reset_hint: CounterResetHint::Gauge,
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 214.0,
                sum: 5.5,
                positive_spans: vec![Span::new(0, 3)],
                positive_buckets: vec![10.0 + 20.0 - 1.0, 40.0, 50.0 + 100.0 - 5.0],
                custom_values: vec![2.0, 4.0],
                counter_reset_hint: CounterResetHint::Gauge,
                ..FloatHistogram::default()
            }),
            flag2: true,
            ..Default::default()
        },
        Case {
            name: "mix exponential and custom buckets histograms",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 8.0,
                count: 59.0,
                sum: 1.234,
                schema: 0,
                positive_spans: vec![Span::new(-2, 5), Span::new(0, 3)],
                positive_buckets: vec![2.0, 5.0, 4.0, 2.0, 3.0, 6.0, 7.0, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![4.0, 10.0, 1.0, 4.0, 14.0, 7.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 11.0,
                sum: 12.0,
                positive_spans: vec![Span::new(0, 2), Span::new(1, 3)],
                positive_buckets: vec![0.0, 0.0, 2.0, 3.0, 6.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            err: "cannot apply this operation on histograms with a mix of exponential and custom bucket schemas",
            ..Default::default()
        },
        Case {
            name: "warn on counter reset hint collision",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                counter_reset_hint: CounterResetHint::CounterReset,
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                counter_reset_hint: CounterResetHint::NotCounterReset,
                ..FloatHistogram::default()
            }),
            err: "",
            flag: true,
            ..Default::default()
        },
    ]
}

/// The cases of upstream `TestKahanAddWithCompHistogram` (model/histogram/float_histogram_test.go).
fn kahan_add_comp_cases() -> Vec<Case> {
    vec![
        Case {
            name: "larger zero bucket in first histogram",
            a: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 17.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 2), Span::new(0, 3)],
                positive_buckets: vec![2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            c: Some(FloatHistogram {
                zero_threshold: 1.0,
                positive_spans: vec![Span::new(1, 2), Span::new(0, 3)],
                positive_buckets: vec![0.02, 0.03, 0.06, 0.02, 0.05],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![0.01, 0.01, 0.04, 0.04],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 29.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(1, 2), Span::new(0, 3)],
                positive_buckets: vec![2.02, 6.03, 10.06, 9.02, 5.05],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.0, 2.01, 1.01, 4.04, 9.04, 6.0],
                ..FloatHistogram::default()
            }),
            err: "",
            flag: false,
            flag2: false,
            ..Default::default()
        },
        Case {
            name: "smaller zero bucket in first histogram",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 40.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 2.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            c: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 0.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![0.02, 0.03, 0.06, 0.07, 0.05],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![0.01, 0.01, 0.04, 0.04],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 17.0,
                count: 11.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 2), Span::new(0, 3)],
                positive_buckets: vec![2.0, 3.0, 6.0, 2.0, 5.0],
                negative_spans: vec![Span::new(4, 2), Span::new(1, 2)],
                negative_buckets: vec![1.0, 1.0, 4.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 31.05,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(1, 5)],
                positive_buckets: vec![2.0, 6.06, 10.07, 9.05, 5.0],
                negative_spans: vec![Span::new(3, 3), Span::new(1, 3)],
                negative_buckets: vec![3.01, 2.01, 1.0, 4.0, 9.04, 6.04],
                ..FloatHistogram::default()
            }),
            err: "",
            flag: false,
            flag2: false,
            ..Default::default()
        },
        Case {
            name: "first histogram contains zero buckets and Compact is called",
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 1), Span::new(1, 3)],
                positive_buckets: vec![1.0, 3.0, 3.0, 0.0, 7.0, -6.0],
                ..FloatHistogram::default()
            }),
            c: Some(FloatHistogram {
                zero_threshold: 0.01,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 1), Span::new(1, 3)],
                positive_buckets: vec![7.0, 2.0, 0.03, 0.0, 0.05, 0.06],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 17.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 2), Span::new(1, 2)],
                positive_buckets: vec![2.0, 3.0, 2.0, 5.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 1.0,
                zero_count: 41.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(1, 2), Span::new(1, 2)],
                positive_buckets: vec![5.03, 3.0, 9.05, -0.94],
                ..FloatHistogram::default()
            }),
            err: "",
            flag: false,
            flag2: false,
            ..Default::default()
        },
        Case {
            name: "reduce resolution",
            a: Some(FloatHistogram {
                schema: 2,
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 1), Span::new(1, 3)],
                positive_buckets: vec![1.0, 3.0, 1e100, 0.0, 7.0, -6.0],
                ..FloatHistogram::default()
            }),
            c: Some(FloatHistogram {
                schema: 2,
                zero_threshold: 0.01,
                zero_count: 1.0,
                positive_spans: vec![Span::new(-2, 2), Span::new(1, 1), Span::new(1, 3)],
                positive_buckets: vec![7.0, 2.0, 0.03, 0.0, 0.05, 0.06],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: 1,
                zero_threshold: 1.0,
                zero_count: 17.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 2), Span::new(1, 2)],
                positive_buckets: vec![-1e100, 3.0, 2.0, 5.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: 1,
                zero_threshold: 1.0,
                zero_count: 42.0,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(1, 5)],
                positive_buckets: vec![0.03, 10.05, -5.94, 2.0, 5.0],
                ..FloatHistogram::default()
            }),
            err: "",
            flag: false,
            flag2: false,
            ..Default::default()
        },
        Case {
            name: "reduce resolution of 'other' histogram",
            a: Some(FloatHistogram {
                schema: 0,
                zero_threshold: 1.0,
                zero_count: 17.0,
                count: 21.0,
                sum: 1.234,
                positive_spans: vec![Span::new(1, 2), Span::new(1, 2)],
                positive_buckets: vec![2.0, 3.0, 2.0, 5.0],
                ..FloatHistogram::default()
            }),
            c: Some(FloatHistogram {
                schema: 0,
                zero_threshold: 1.0,
                zero_count: 1.0,
                positive_spans: vec![Span::new(1, 2), Span::new(1, 2)],
                positive_buckets: vec![17.0, 2.0, 0.03, 0.0],
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: 2,
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                positive_spans: vec![Span::new(-2, 3), Span::new(1, 1), Span::new(1, 3)],
                positive_buckets: vec![1e100, 4.1, -1e100, 2.1, 0.0, 7.0, -6.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                schema: 0,
                zero_threshold: 1.0,
                zero_count: 33.1,
                count: 51.0,
                sum: 3.579,
                positive_spans: vec![Span::new(1, 2), Span::new(1, 2)],
                positive_buckets: vec![21.1, 6.0, 2.03, 5.0],
                ..FloatHistogram::default()
            }),
            err: "",
            flag: false,
            flag2: false,
            ..Default::default()
        },
        Case {
            name: "warn on counter reset hint collision",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                counter_reset_hint: CounterResetHint::CounterReset,
                ..FloatHistogram::default()
            }),
            b: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                counter_reset_hint: CounterResetHint::NotCounterReset,
                ..FloatHistogram::default()
            }),
            err: "",
            flag: true,
            flag2: false,
            ..Default::default()
        },
    ]
}

/// The cases of upstream `TestFloatHistogramCopyToSchema` (model/histogram/float_histogram_test.go).
fn copy_to_schema_cases() -> Vec<Case> {
    vec![
        Case {
            name: "no schema change",
            n: 1,
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                schema: 1,
                positive_spans: vec![Span::new(-4, 3), Span::new(5, 5)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
                negative_spans: vec![Span::new(6, 3), Span::new(6, 4)],
                negative_buckets: vec![3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                schema: 1,
                positive_spans: vec![Span::new(-4, 3), Span::new(5, 5)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
                negative_spans: vec![Span::new(6, 3), Span::new(6, 4)],
                negative_buckets: vec![3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "schema change",
            n: 0,
            a: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                schema: 1,
                positive_spans: vec![Span::new(-4, 3), Span::new(5, 5)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
                negative_spans: vec![Span::new(6, 3), Span::new(6, 4)],
                negative_buckets: vec![3.0, 0.5, 0.5, 2.0, 3.0, 2.0, 4.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                zero_threshold: 0.01,
                zero_count: 11.0,
                count: 30.0,
                sum: 2.345,
                schema: 0,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 3)],
                positive_buckets: vec![1.0, 0.0, 3.0, 4.0, 7.0],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.0, 1.0, 5.0, 6.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
        Case {
            name: "no schema change for custom buckets",
            n: CUSTOM_BUCKETS_SCHEMA as i64,
            a: Some(FloatHistogram {
                count: 30.0,
                sum: 2.345,
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(0, 3), Span::new(5, 5)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                ..FloatHistogram::default()
            }),
            expected: Some(FloatHistogram {
                count: 30.0,
                sum: 2.345,
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(0, 3), Span::new(5, 5)],
                positive_buckets: vec![1.0, 0.0, 0.0, 3.0, 2.0, 2.0, 3.0, 4.0],
                custom_values: vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0],
                ..FloatHistogram::default()
            }),
            ..Default::default()
        },
    ]
}

/// The cases of upstream `TestFloatHistogramString` (model/histogram/float_histogram_test.go).
fn string_cases() -> Vec<Case> {
    vec![
        Case {
            name: "exponential histogram",
            a: Some(FloatHistogram {
                schema: 1,
                zero_threshold: 0.01,
                zero_count: 5.5,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![3.1, 3.0, 1.234e5, 1000.0],
                ..FloatHistogram::default()
            }),
            err: r#"{count:3493.3, sum:2.349209324e+06, [-22.62741699796952,-16):1000, [-16,-11.31370849898476):123400, [-4,-2.82842712474619):3, [-2.82842712474619,-2):3.1, [-0.01,0.01]:5.5, (0.35355339059327373,0.5]:1, (1,1.414213562373095]:3.3, (1.414213562373095,2]:4.2, (2,2.82842712474619]:0.1}"#,
            ..Default::default()
        },
        Case {
            name: "custom buckets histogram",
            a: Some(FloatHistogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                count: 3493.3,
                sum: 2349209.324,
                positive_spans: vec![Span::new(0, 1), Span::new(2, 4)],
                positive_buckets: vec![1.0, 3.3, 4.2, 0.1, 5.0],
                custom_values: vec![1.0, 2.0, 5.0, 10.0, 15.0, 20.0],
                ..FloatHistogram::default()
            }),
            err: r#"{count:3493.3, sum:2.349209324e+06, [-Inf,1]:1, (5,10]:3.3, (10,15]:4.2, (15,20]:0.1, (20,+Inf]:5}"#,
            ..Default::default()
        },
    ]
}

/// The cases of upstream `TestHistogramCompact` (model/histogram/histogram_test.go).
fn int_compact_cases() -> Vec<ICase> {
    vec![
        ICase {
            name: "empty histogram",
            a: Some(Histogram { ..Histogram::default() }),
            n: 0,
            expected: Some(Histogram { ..Histogram::default() }),
            ..Default::default()
        },
        ICase {
            name: "nothing should happen",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1, 3, -3, 42],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![5, 3, 123400, 1000],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1, 3, -3, 42],
                negative_spans: vec![Span::new(3, 2), Span::new(3, 2)],
                negative_buckets: vec![5, 3, 123400, 1000],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "eliminate zero offsets",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(0, 3), Span::new(0, 1)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(0, 2), Span::new(2, 1), Span::new(0, 1)],
                negative_buckets: vec![5, 3, 123400, 1000, 3, 4],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 5)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                negative_spans: vec![Span::new(0, 4), Span::new(2, 2)],
                negative_buckets: vec![5, 3, 123400, 1000, 3, 4],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "eliminate zero length",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 0), Span::new(3, 3)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(0, 0), Span::new(2, 0), Span::new(1, 4)],
                negative_buckets: vec![5, 3, 123400, 1000, 3, 4],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(5, 3)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 4)],
                negative_buckets: vec![5, 3, 123400, 1000, 3, 4],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "eliminate multiple zero length spans",
            a: Some(Histogram {
                positive_spans: vec![
                    Span::new(-2, 2),
                    Span::new(2, 0),
                    Span::new(2, 0),
                    Span::new(2, 0),
                    Span::new(3, 3),
                ],
                positive_buckets: vec![1, 3, -3, 42, 3],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(9, 3)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "cut empty buckets at start or end",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-4, 4), Span::new(5, 3)],
                positive_buckets: vec![0, 0, 1, 3, -3, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![5, 3, -4, -2, 3, 4, -9],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(5, 3)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 4)],
                negative_buckets: vec![5, 3, -4, -2, 3, 4],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "cut empty buckets at start and end",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-4, 4), Span::new(5, 6)],
                positive_buckets: vec![0, 0, 1, 3, -3, 42, 3, -46, 0, 0],
                negative_spans: vec![Span::new(-2, 4), Span::new(3, 5)],
                negative_buckets: vec![0, 0, 5, 3, -4, -2, 3, 4, -9],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(5, 3)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 4)],
                negative_buckets: vec![5, 3, -4, -2, 3, 4],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "cut empty buckets at start or end of spans, even in the middle",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 6)],
                positive_buckets: vec![0, 0, 1, 3, -4, 0, 1, 42, 3, -46, 0, 0],
                negative_spans: vec![Span::new(0, 2), Span::new(2, 6)],
                negative_buckets: vec![5, 3, -8, 4, -2, 3, 4, -9],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 2), Span::new(5, 3)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 4)],
                negative_buckets: vec![5, 3, -4, -2, 3, 4],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "cut empty buckets at start or end but merge spans due to maxEmptyBuckets",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-4, 4), Span::new(5, 3)],
                positive_buckets: vec![0, 0, 1, 3, -3, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![5, 3, -4, -2, 3, 4, -9],
                ..Histogram::default()
            }),
            n: 10,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 10)],
                positive_buckets: vec![1, 3, -4, 0, 0, 0, 0, 1, 42, 3],
                negative_spans: vec![Span::new(0, 9)],
                negative_buckets: vec![5, 3, -8, 0, 0, 4, -2, 3, 4],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "cut empty buckets from the middle of a span",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 3)],
                positive_buckets: vec![0, 0, 1, -1, 0, 3, -2, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![5, 3, -4, -2, -2, 3, 4],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 1), Span::new(3, 3)],
                positive_buckets: vec![1, 2, -2, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 2), Span::new(1, 2)],
                negative_buckets: vec![5, 3, -4, -2, 1, 4],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "cut out a span containing only empty buckets",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-4, 3), Span::new(2, 2), Span::new(3, 4)],
                positive_buckets: vec![0, 0, 1, -1, 0, 3, -2, 42, 3],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(7, 4)],
                positive_buckets: vec![1, 2, -2, 42, 3],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "cut empty buckets from the middle of a span, avoiding some due to maxEmptyBuckets",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 3)],
                positive_buckets: vec![0, 0, 1, -1, 0, 3, -2, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![5, 3, -4, -2, -2, 3, 4],
                ..Histogram::default()
            }),
            n: 1,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 1), Span::new(3, 3)],
                positive_buckets: vec![1, 2, -2, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![5, 3, -4, -2, -2, 3, 4],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "avoiding all cutting of empty buckets from the middle of a chunk due to maxEmptyBuckets",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 3)],
                positive_buckets: vec![0, 0, 1, -1, 0, 3, -2, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![5, 3, -4, -2, -2, 3, 4],
                ..Histogram::default()
            }),
            n: 2,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 4), Span::new(3, 3)],
                positive_buckets: vec![1, -1, 0, 3, -2, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![5, 3, -4, -2, -2, 3, 4],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "everything merged into one span due to maxEmptyBuckets",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 3)],
                positive_buckets: vec![0, 0, 1, -1, 0, 3, -2, 42, 3],
                negative_spans: vec![Span::new(0, 2), Span::new(3, 5)],
                negative_buckets: vec![5, 3, -4, -2, -2, 3, 4],
                ..Histogram::default()
            }),
            n: 3,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-2, 10)],
                positive_buckets: vec![1, -1, 0, 3, -3, 0, 0, 1, 42, 3],
                negative_spans: vec![Span::new(0, 10)],
                negative_buckets: vec![5, 3, -8, 0, 0, 4, -2, -2, 3, 4],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "only empty buckets and maxEmptyBuckets greater zero",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 3)],
                positive_buckets: vec![0, 0, 0, 0, 0, 0, 0, 0, 0],
                negative_spans: vec![Span::new(0, 7)],
                negative_buckets: vec![0, 0, 0, 0, 0, 0, 0],
                ..Histogram::default()
            }),
            n: 3,
            expected: Some(Histogram {
                positive_spans: vec![],
                positive_buckets: vec![],
                negative_spans: vec![],
                negative_buckets: vec![],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "multiple spans of only empty buckets",
            a: Some(Histogram {
                positive_spans: vec![Span::new(-10, 2), Span::new(2, 1), Span::new(3, 3)],
                positive_buckets: vec![0, 0, 0, 0, 2, 3],
                negative_spans: vec![Span::new(-10, 2), Span::new(2, 1), Span::new(3, 3)],
                negative_buckets: vec![2, 3, -5, 0, 0, 0],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(-1, 2)],
                positive_buckets: vec![2, 3],
                negative_spans: vec![Span::new(-10, 2)],
                negative_buckets: vec![2, 3],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "nothing should happen with custom buckets",
            a: Some(Histogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1, 3, -3, 42],
                custom_values: vec![5.0, 10.0, 15.0],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(-2, 1), Span::new(2, 3)],
                positive_buckets: vec![1, 3, -3, 42],
                custom_values: vec![5.0, 10.0, 15.0],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "eliminate zero offsets with custom buckets",
            a: Some(Histogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(-2, 1), Span::new(0, 3), Span::new(0, 1)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                custom_values: vec![5.0, 10.0, 15.0, 20.0],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(-2, 5)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                custom_values: vec![5.0, 10.0, 15.0, 20.0],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "eliminate zero length with custom buckets",
            a: Some(Histogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(-2, 2), Span::new(2, 0), Span::new(3, 3)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                custom_values: vec![5.0, 10.0, 15.0, 20.0],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(-2, 2), Span::new(5, 3)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                custom_values: vec![5.0, 10.0, 15.0, 20.0],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "all zero-length spans with non-empty buckets",
            a: Some(Histogram {
                positive_spans: vec![Span::new(0, 0), Span::new(2, 0)],
                positive_buckets: vec![1, 3],
                negative_spans: vec![Span::new(1, 0)],
                negative_buckets: vec![2],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![],
                positive_buckets: vec![],
                negative_spans: vec![],
                negative_buckets: vec![],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "more buckets than spans account for",
            a: Some(Histogram {
                positive_spans: vec![Span::new(0, 1), Span::new(2, 1)],
                positive_buckets: vec![1, 2, 3, 4],
                negative_spans: vec![Span::new(0, 1)],
                negative_buckets: vec![5, 6],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                positive_spans: vec![Span::new(0, 1), Span::new(2, 1)],
                positive_buckets: vec![1, 2, 3, 4],
                negative_spans: vec![Span::new(0, 1)],
                negative_buckets: vec![5, 6],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "eliminate multiple zero length spans with custom buckets",
            a: Some(Histogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![
                    Span::new(-2, 2),
                    Span::new(2, 0),
                    Span::new(2, 0),
                    Span::new(2, 0),
                    Span::new(3, 3),
                ],
                positive_buckets: vec![1, 3, -3, 42, 3],
                custom_values: vec![5.0, 10.0, 15.0, 20.0],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(-2, 2), Span::new(9, 3)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                custom_values: vec![5.0, 10.0, 15.0, 20.0],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "cut empty buckets at start or end of spans, even in the middle, with custom buckets",
            a: Some(Histogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(-4, 6), Span::new(3, 6)],
                positive_buckets: vec![0, 0, 1, 3, -4, 0, 1, 42, 3, -46, 0, 0],
                custom_values: vec![5.0, 10.0, 15.0, 20.0],
                ..Histogram::default()
            }),
            n: 0,
            expected: Some(Histogram {
                schema: CUSTOM_BUCKETS_SCHEMA,
                positive_spans: vec![Span::new(-2, 2), Span::new(5, 3)],
                positive_buckets: vec![1, 3, -3, 42, 3],
                custom_values: vec![5.0, 10.0, 15.0, 20.0],
                ..Histogram::default()
            }),
            ..Default::default()
        },
    ]
}

/// The cases of upstream `TestHistogramReduceResolution` (model/histogram/histogram_test.go).
fn int_reduce_resolution_cases() -> Vec<ICase> {
    vec![
        ICase {
            name: "valid histogram",
            a: Some(Histogram {
                schema: 0,
                positive_spans: vec![Span::new(-2, 4), Span::new(0, 0), Span::new(3, 2)],
                positive_buckets: vec![1, 2, -2, 1, -1, 0],
                negative_spans: vec![Span::new(0, 4), Span::new(0, 0), Span::new(3, 2)],
                negative_buckets: vec![1, 2, -2, 1, -1, 0],
                ..Histogram::default()
            }),
            n: -1,
            expected: Some(Histogram {
                schema: -1,
                positive_spans: vec![Span::new(-1, 3), Span::new(1, 1)],
                positive_buckets: vec![1, 3, -2, 0],
                negative_spans: vec![Span::new(0, 3), Span::new(1, 1)],
                negative_buckets: vec![1, 3, -2, 0],
                ..Histogram::default()
            }),
            ..Default::default()
        },
        ICase {
            name: "not enough buckets",
            a: Some(Histogram {
                schema: 0,
                positive_spans: vec![Span::new(-2, 4), Span::new(0, 0), Span::new(3, 2)],
                positive_buckets: vec![1, 2, -2, 1, -1],
                ..Histogram::default()
            }),
            n: -1,
            err: "have 5 buckets but spans need more: histogram spans specify different number of buckets than provided",
            ..Default::default()
        },
        ICase {
            name: "too many buckets",
            a: Some(Histogram {
                schema: 0,
                positive_spans: vec![Span::new(-2, 4), Span::new(0, 0), Span::new(3, 2)],
                positive_buckets: vec![1, 2, -2, 1, -1, 0, 3],
                ..Histogram::default()
            }),
            n: -1,
            err: "spans need 6 buckets, have 7 buckets: histogram spans specify different number of buckets than provided",
            ..Default::default()
        },
        ICase {
            name: "negative offset",
            a: Some(Histogram {
                schema: 0,
                positive_spans: vec![Span::new(-2, 4), Span::new(-1, 0), Span::new(3, 2)],
                positive_buckets: vec![1, 2, -2, 1, -1, 0],
                ..Histogram::default()
            }),
            n: -1,
            err: "span number 2 with offset -1: histogram has a span whose offset is negative",
            ..Default::default()
        },
    ]
}
