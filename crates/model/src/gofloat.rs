//! Float-to-text exactly as Go writes it, for every place where Prometheus turns a float64 into text
//! that a client sees: sample values in JSON (`strconv.FormatFloat(v, 'f', -1, 64)`), `count_values`
//! labels (the same), printed PromQL (`%v`), annotation messages (`%g`), JSON numbers
//! (`encoding/json`) and the text exposition format (`'g'`).
//!
//! All of them start from the *shortest* decimal that reads back as the same float. Rust's `{:e}`
//! finds how many digits that takes, but when two decimals of that length are equally close to the
//! float (`2520997616570.40625` lies halfway between `…4062` and `…4063`) it may pick the upper one,
//! where Go picks the correctly rounded one (ties to even: `…4062`). So the digits are re-rounded
//! with Rust's exact fixed-precision formatting (`{:.Ne}`, exact decimal expansion, ties to even) at
//! the length `{:e}` found: the correctly rounded value of the shortest length round-trips whenever
//! any value of that length does, because it is the closest one.

/// Shortest round-trip digits of a finite `v`: (negative, digits without a point, decimal exponent
/// `dp` such that the value is `0.digits × 10^dp`). Zero is `("0", 1)`.
///
/// From the `zmij` crate (Schubfach with xjb's refinements; it replaced `ryu` here, twice as fast): the
/// shortest digits that read back as `v`, the closest to it among those, which is what Go's `strconv`
/// gives (`ryuFtoaShortest`).
/// [`shortest_reference`] derives the same digits from Rust's formatting by the reasoning in the module
/// docs; a test holds the two equal over millions of floats of every kind.
fn shortest(v: f64) -> (bool, String, i32) {
    let mut d = String::with_capacity(20);
    let (neg, dp) = shortest_into(v, &mut d);
    (neg, d, dp)
}

/// [`shortest`] writing the digits into `d` (cleared first).
pub fn shortest_into(v: f64, d: &mut String) -> (bool, i32) {
    d.clear();
    let (neg, digits, dp) = shortest_digits(v);
    d.push_str(std::str::from_utf8(digits.as_bytes()).unwrap_or("0"));
    (neg, dp)
}

/// Shortest digits held on the stack (at most 17 significant digits).
#[derive(Debug, Clone, Copy)]
pub struct Digits {
    buf: [u8; 24],
    len: usize,
}

impl Digits {
    /// The ASCII digits, without leading or trailing zeros (`"0"` for zero).
    pub fn as_bytes(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

/// [`shortest`] without allocating: the allocation-free form JSON writers use, once per value of an
/// answer (byte loops, not `str` searches).
pub fn shortest_digits(v: f64) -> (bool, Digits, i32) {
    let neg = v.is_sign_negative();
    let a = v.abs();
    let mut d = Digits { buf: [0; 24], len: 0 };
    if a == 0.0 || !a.is_finite() {
        d.buf[0] = b'0';
        d.len = 1;
        return (neg, d, 1);
    }
    let mut buf = zmij::Buffer::new();
    // `1.0`, `123.45`, `0.0001`, `1e-7`, `1.2345e+30`.
    let s = buf.format_finite(a).as_bytes();
    let (mant, exp) = match s.iter().position(|&b| b == b'e') {
        Some(i) => (&s[..i], parse_exp(&s[i + 1..])),
        None => (s, 0),
    };
    let (int, frac): (&[u8], &[u8]) = match mant.iter().position(|&b| b == b'.') {
        Some(i) => (&mant[..i], &mant[i + 1..]),
        None => (mant, &[]),
    };
    let mut dp = int.len() as i32 + exp;
    let mut leading = true;
    for &b in int.iter().chain(frac) {
        if leading && b == b'0' {
            dp -= 1;
            continue;
        }
        leading = false;
        if d.len < d.buf.len() {
            d.buf[d.len] = b;
            d.len += 1;
        }
    }
    while d.len > 1 && d.buf[d.len - 1] == b'0' {
        d.len -= 1;
    }
    (neg, d, dp)
}

/// The exponent zmij writes after `e` (`-7`, `+30`).
fn parse_exp(s: &[u8]) -> i32 {
    let (neg, digits) = match s.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, s),
    };
    let n = digits.iter().fold(0i32, |n, &b| n.saturating_mul(10).saturating_add(i32::from(b.wrapping_sub(b'0'))));
    if neg { -n } else { n }
}

/// The shortest digits from Rust's own formatting (see the module docs): the reference the zmij path is
/// tested against.
#[cfg(test)]
fn shortest_reference(v: f64) -> (bool, String, i32) {
    let neg = v.is_sign_negative();
    let a = v.abs();
    if a == 0.0 {
        return (neg, "0".into(), 1);
    }
    let s = format!("{a:e}");
    let (m, _) = s.split_once('e').unwrap_or((&s, "0"));
    let n = m.chars().filter(|c| c.is_ascii_digit()).count();
    let r = format!("{a:.*e}", n.saturating_sub(1));
    // Where the float's rounding interval is lopsided (exact powers of two: the gap below is half the
    // gap above), the correctly rounded digits of that length can fall outside it; then `{:e}`'s
    // digits are the answer (and Go's: 2^-24 is …539063, not …539062).
    let r = if r.parse::<f64>().map(f64::to_bits) == Ok(a.to_bits()) { r } else { s.clone() };
    let (m, e) = r.split_once('e').unwrap_or((&r, "0"));
    let digits: String = m.chars().filter(|c| c.is_ascii_digit()).collect();
    let e: i32 = e.parse().unwrap_or(0);
    // Trailing zeros carry nothing in the shortest form (`{:.0e}` of 1e23 is "1e23" already).
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    (neg, digits.to_string(), e + 1)
}

fn special(v: f64) -> Option<String> {
    if v.is_nan() {
        Some("NaN".into())
    } else if v.is_infinite() {
        Some(if v > 0.0 { "+Inf" } else { "-Inf" }.into())
    } else {
        None
    }
}

/// Go's `strconv.FormatFloat(v, 'f', -1, 64)`: `NaN`, `+Inf`, `-Inf`, else the shortest round-trip
/// decimal without an exponent.
pub fn format_f(v: f64) -> String {
    let mut out = Vec::with_capacity(24);
    append_f(&mut out, v);
    String::from_utf8(out).expect("digits, signs and points are ASCII")
}

/// What both appending forms start with: a non-finite `v`'s text (then `None`: nothing more to write),
/// else the sign, and the shortest digits with their decimal exponent.
fn append_start(out: &mut Vec<u8>, v: f64) -> Option<(Digits, i32)> {
    if let Some(sp) = special(v) {
        out.extend_from_slice(sp.as_bytes());
        return None;
    }
    let (neg, digits, dp) = shortest_digits(v);
    if neg {
        out.push(b'-');
    }
    Some((digits, dp))
}

/// [`format_f`] appended to `out` without allocating.
pub fn append_f(out: &mut Vec<u8>, v: f64) {
    // Whole numbers below 2^53 (byte counts, counters, states: most stored values) are their integer's
    // digits: every integer there is a float, so the shortest round-trip digits, padded to the point,
    // name that integer. Zero keeps the general path (its sign).
    if v != 0.0 && v.abs() < 9_007_199_254_740_992.0 && (v as i64) as f64 == v {
        let n = v as i64;
        if n < 0 {
            out.push(b'-');
        }
        append_u64(out, n.unsigned_abs());
        return;
    }
    // zmij (as Ryū did) writes its shortest digits without an exponent when the decimal point falls
    // within 16 digits of them (1e-5 <= |v| < 1e16): that text is Go's, but for the `.0` it puts after
    // whole numbers. Copied as it is, it skips re-reading and re-placing the digits (the general path
    // below), which was most of a large matrix's JSON.
    if v != 0.0 && v.is_finite() {
        let mut buf = zmij::Buffer::new();
        let s = buf.format_finite(v).as_bytes();
        // The exponent form ends in `e-6`, `e+16` or `e+308`: its `e` is among the last five bytes, and the
        // plain form has none (looking there only, not searching the text, and not `strip_suffix`: those
        // two were a third of this function's time).
        let n = s.len();
        let has_e = s[n - 3] == b'e' || (n >= 4 && s[n - 4] == b'e') || (n >= 5 && s[n - 5] == b'e');
        if !has_e {
            let whole = s[n - 2] == b'.' && s[n - 1] == b'0';
            out.extend_from_slice(&s[..if whole { n - 2 } else { n }]);
            return;
        }
    }
    append_f_general(out, v);
}

/// [`append_f`] by the shortest digits and their decimal exponent, for every value.
fn append_f_general(out: &mut Vec<u8>, v: f64) {
    let Some((digits, dp)) = append_start(out, v) else { return };
    let d = digits.as_bytes();
    if dp <= 0 {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-dp) as usize, b'0');
        out.extend_from_slice(d);
    } else if dp as usize >= d.len() {
        out.extend_from_slice(d);
        out.resize(out.len() + (dp as usize - d.len()), b'0');
    } else {
        out.extend_from_slice(&d[..dp as usize]);
        out.push(b'.');
        out.extend_from_slice(&d[dp as usize..]);
    }
}

/// [`format_e`] appended to `out` without allocating.
pub fn append_e(out: &mut Vec<u8>, v: f64) {
    let Some((digits, dp)) = append_start(out, v) else { return };
    let d = digits.as_bytes();
    out.push(d[0]);
    if d.len() > 1 {
        out.push(b'.');
        out.extend_from_slice(&d[1..]);
    }
    let exp = if d == b"0" { 0 } else { dp - 1 };
    out.push(b'e');
    out.push(if exp < 0 { b'-' } else { b'+' });
    let a = exp.unsigned_abs();
    if a < 10 {
        out.push(b'0');
    }
    append_u64(out, u64::from(a));
}

/// Appends `n`'s decimal digits (no `fmt`: JSON writers call this once per point).
pub fn append_u64(out: &mut Vec<u8>, n: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

/// Go's `strconv.FormatFloat(v, 'e', -1, 64)`: `1e+06`, `1.5e-07` (at least two exponent digits).
pub fn format_e(v: f64) -> String {
    let mut out = Vec::with_capacity(24);
    append_e(&mut out, v);
    String::from_utf8(out).expect("digits, signs and points are ASCII")
}

/// Go's `%v` and `%g` of a float64 (`strconv.FormatFloat(v, 'g', -1, 64)`): the exponent form when
/// the decimal exponent is below -4 or at least 6 (`1e+06`, `1e-05`), else as [`format_f`].
pub fn format_g(v: f64) -> String {
    if let Some(s) = special(v) {
        return s;
    }
    let (_, d, dp) = shortest(v);
    let exp = if d == "0" { 0 } else { dp - 1 };
    if !(-4..6).contains(&exp) { format_e(v) } else { format_f(v) }
}

/// How Go's `encoding/json` writes a float64: as [`format_f`] unless the magnitude is below 1e-6 or
/// at least 1e21, where it uses the `e` form with a negative two-digit exponent shortened (`1e-7`,
/// `1e+21`).
pub fn format_json(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-6..1e21).contains(&a) {
        let s = format_e(v);
        if let Some(i) = s.find("e-0") {
            return format!("{}e-{}", &s[..i], &s[i + 3..]);
        }
        return s;
    }
    format_f(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each row was printed by Go 1.26 (`json.Marshal`, `%v`, `FormatFloat 'f'`, `FormatFloat 'e'`).
    #[test]
    fn matches_go() {
        let rows: &[(f64, &str, &str, &str, &str)] = &[
            (1e-7, "1e-7", "1e-07", "0.0000001", "1e-07"),
            (1.5e-7, "1.5e-7", "1.5e-07", "0.00000015", "1.5e-07"),
            (1e21, "1e+21", "1e+21", "1000000000000000000000", "1e+21"),
            (1.5e21, "1.5e+21", "1.5e+21", "1500000000000000000000", "1.5e+21"),
            (2_520_997_616_570.406_3, "2520997616570.4062", "2.5209976165704062e+12", "2520997616570.4062", "2.5209976165704062e+12"),
            (1e20, "100000000000000000000", "1e+20", "100000000000000000000", "1e+20"),
            (123456.0, "123456", "123456", "123456", "1.23456e+05"),
            (1234567.0, "1234567", "1.234567e+06", "1234567", "1.234567e+06"),
            (0.0001, "0.0001", "0.0001", "0.0001", "1e-04"),
            (0.00001, "0.00001", "1e-05", "0.00001", "1e-05"),
            (0.0, "0", "0", "0", "0e+00"),
            (5e-324, "5e-324", "5e-324", &format!("0.{}5", "0".repeat(323)), "5e-324"),
            (1e23, "1e+23", "1e+23", "100000000000000000000000", "1e+23"),
            (0.1, "0.1", "0.1", "0.1", "1e-01"),
            (100.0, "100", "100", "100", "1e+02"),
            (-2.5, "-2.5", "-2.5", "-2.5", "-2.5e+00"),
            (9223372036854775807.0, "9223372036854776000", "9.223372036854776e+18", "9223372036854776000", "9.223372036854776e+18"),
            (-0.0, "-0", "-0", "-0", "-0e+00"),
            (5.960464477539063e-8, "5.960464477539063e-8", "5.960464477539063e-08", "0.00000005960464477539063", "5.960464477539063e-08"),
            (5.684341886080802e-14, "5.684341886080802e-14", "5.684341886080802e-14", "0.00000000000005684341886080802", "5.684341886080802e-14"),
            (6.189700196426902e26, "6.189700196426902e+26", "6.189700196426902e+26", "618970019642690200000000000", "6.189700196426902e+26"),
        ];
        for (v, json, g, f, e) in rows {
            assert_eq!(format_json(*v), *json, "json {v:e}");
            assert_eq!(format_g(*v), *g, "g {v:e}");
            assert_eq!(format_f(*v), *f, "f {v:e}");
            assert_eq!(format_e(*v), *e, "e {v:e}");
        }
        assert_eq!(format_f(f64::NAN), "NaN");
        assert_eq!(format_g(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_f(-0.0), "-0");
    }

    /// The re-rounded digits always read back as the same float, powers of two (lopsided rounding
    /// intervals) and their neighbours included.
    #[test]
    fn round_trips_at_powers_of_two() {
        for e in -1074..=1023 {
            let p = 2f64.powi(e);
            for v in [p, f64::from_bits(p.to_bits() + 1), f64::from_bits(p.to_bits().saturating_sub(1))] {
                if v.is_finite() && v > 0.0 {
                    assert_eq!(format_f(v).parse::<f64>().map(f64::to_bits), Ok(v.to_bits()), "{v:e}");
                    assert_eq!(format_g(v).parse::<f64>().map(f64::to_bits), Ok(v.to_bits()), "{v:e}");
                }
            }
        }
    }

    #[test]
    fn round_trips() {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let v = f64::from_bits(x);
            if !v.is_finite() {
                continue;
            }
            assert_eq!(format_f(v).parse::<f64>().map(f64::to_bits), Ok(v.to_bits()), "{v:e}");
            assert_eq!(format_g(v).parse::<f64>().map(f64::to_bits), Ok(v.to_bits()), "{v:e}");
        }
    }

    /// zmij's digits equal the reference's: random bit patterns (every exponent, subnormals), powers of
    /// two (lopsided intervals), integers, short decimals and their neighbours. `TESSERA_FLOAT_CASES`
    /// sets how many random floats (default 300,000).
    #[test]
    fn shortest_digits_equal_the_reference() {
        let n: u64 = std::env::var("TESSERA_FLOAT_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(300_000);
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        let check = |v: f64| {
            if v.is_finite() {
                assert_eq!(shortest(v), shortest_reference(v), "{v:e} ({:#x})", v.to_bits());
            }
        };
        for _ in 0..n {
            check(f64::from_bits(next()));
        }
        for e in -1074..1024 {
            let p = 2f64.powi(e);
            for v in [p, f64::from_bits(p.to_bits().wrapping_sub(1)), f64::from_bits(p.to_bits() + 1)] {
                check(v);
            }
        }
        for k in 0..200_000u64 {
            check(k as f64);
            check(k as f64 / 1000.0);
            check(k as f64 * 0.1);
            let r = next();
            check((r % 1_000_000_000) as f64 / 100.0);
            check(f64::from_bits(((r % 1_000_000) as f64 * 0.001).to_bits() + 1));
        }
    }

    #[test]
    fn whole_numbers_take_the_integer_path_with_the_same_text() {
        let mut x = 3u64;
        let mut cases: Vec<f64> = vec![1.0, -1.0, 9_007_199_254_740_991.0, -9_007_199_254_740_991.0, 9_007_199_254_740_992.0, 1e15, 4096.0, 1e20];
        for _ in 0..200_000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = ((x >> 11) >> (x % 53)) as f64;
            cases.push(if x & 1 == 0 { v } else { -v });
        }
        for v in cases {
            let mut fast = Vec::new();
            append_f(&mut fast, v);
            // The general path, by hand.
            let mut slow = Vec::new();
            if let Some((d, dp)) = append_start(&mut slow, v) {
                let d = d.as_bytes();
                slow.extend_from_slice(d);
                slow.resize(slow.len() + (dp as usize).saturating_sub(d.len()), b'0');
            }
            assert_eq!(String::from_utf8(fast).expect("ascii"), String::from_utf8(slow).expect("ascii"), "{v}");
        }
    }

    /// The copied zmij text equals the general path's for every kind of float: random bit patterns,
    /// the edges of its plain-decimal range (1e-5, 1e16) and of Go's `'e'` switch, whole numbers
    /// beyond 2^53, short decimals, negatives, zeros, subnormals and non-finite values.
    #[test]
    fn plain_text_takes_the_fast_path_with_the_same_text() {
        let mut x = 11u64;
        let mut cases: Vec<f64> = vec![
            0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 5e-324, f64::MAX, f64::MIN_POSITIVE,
            1e-5, 9.999999999999999e-6, 1e-6, 1e16, 9_999_999_999_999_998.0, 1e15 + 0.5, 9_007_199_254_740_994.0,
            0.1, 0.3, 2_520_997_616_570.406_3, 123.456, -0.024743750000052387, 1e21, 1e20,
        ];
        for k in 0..300_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = match k % 5 {
                0 => f64::from_bits(x),
                1 => (x % 1_000_000_000) as f64 / 1000.0,
                2 => (x % 1_000_000) as f64 * 1e-9,
                3 => (x >> 11) as f64 * 2f64.powi((x % 40) as i32 - 20),
                _ => -((x % 100_000) as f64 / 7.0),
            };
            cases.push(v);
            cases.push(f64::from_bits(v.to_bits().wrapping_add(1)));
        }
        let (mut fast, mut slow) = (Vec::new(), Vec::new());
        for v in cases {
            fast.clear();
            slow.clear();
            append_f(&mut fast, v);
            append_f_general(&mut slow, v);
            assert_eq!(fast, slow, "{v:e} ({:#x})", v.to_bits());
        }
    }

    #[test]
    fn appended_forms_read_back_as_the_float() {
        let mut out = Vec::new();
        let mut x = 7u64;
        for k in 0..100_000u64 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let v = match k % 4 {
                0 => f64::from_bits(x),
                1 => (x % 100_000) as f64 / 1000.0,
                2 => -((x % 1000) as f64) * 1e-9,
                _ => [0.0, -0.0, f64::NAN, f64::INFINITY, f64::NEG_INFINITY, 5e-324, 1e300][(x % 7) as usize],
            };
            // Parsed back, both forms give the float itself (to the bit; NaN as NaN).
            for append in [append_f, append_e] {
                out.clear();
                append(&mut out, v);
                let text = std::str::from_utf8(&out).expect("ascii");
                let back: f64 = text.replace("+Inf", "inf").parse().expect("parses");
                assert!(back.to_bits() == v.to_bits() || (v.is_nan() && back.is_nan()), "{v:e} -> {text}");
            }
        }
    }
}
