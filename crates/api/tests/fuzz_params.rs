//! Issue 9, "no single request can take Tessera down": the pure functions that read HTTP query
//! parameters (`params.rs`: form decoding, timestamps, durations, sizes, limits; `selector.rs`: `match[]`)
//! on arbitrary text and on soups of the characters they care about. An answer or an error, never a
//! panic; the formatters invert the parsers where both exist.
//!
//! A short smoke by default; `TESSERA_FUZZ_CASES=N` for N cases per property.

use proptest::prelude::*;
use tessera_api::params::*;
use tessera_api::selector::{parse_metric_selector, unescape_label_name};

fn cases(default: u32) -> u32 {
    std::env::var("TESSERA_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn every_parser(s: &str) {
    let _ = parse_time(s);
    let _ = parse_api_duration_ms(s);
    if let Ok(ms) = parse_duration_ms(s) {
        // What parses prints back to a duration that parses to the same value.
        let f = format_duration_ms(ms);
        assert_eq!(parse_duration_ms(&f), Ok(ms), "{s:?} = {ms} ms printed as {f:?}");
    }
    let _ = parse_bytes(s);
    let _ = parse_limit(s);
    let _ = parse_metric_selector(s);
    let _ = unescape_label_name(s);
    let p = Params::parse(Some(s.as_bytes()), Some(s));
    for k in ["time", "start", "end", "step", "timeout", "limit", "match[]", "query"] {
        let _ = parse_time_param(&p, k, 0);
        let _ = p.all(k);
    }
}

/// Text built from what these parsers look at: digits, signs, units, date separators, exponents,
/// percent escapes and selector syntax.
fn soup() -> impl Strategy<Value = String> {
    let tok = proptest::sample::select(&[
        "0", "1", "9", "12", "2024", "-", "+", ".", "e", "E", "e+308", "Inf", "NaN", "0x", "_", "y", "w", "d", "h",
        "m", "s", "ms", "us", "ns", "B", "KB", "KiB", "MB", "GB", "EB", "T", "Z", ":", "+07:00", "-00:00",
        "2006-01-02T15:04:05", "9999-12-31T23:59:59.999999999Z", "0000-01-01T00:00:00Z", "%", "%2", "%zz", "%e2%82",
        "&", "=", ";", "{", "}", "\"", "__name__", "=~", "!~", "!=", ",", "up", "é", "\u{10FFFF}", " ",
        "99999999999999999999", "9223372036854775807", "-9223372036854775808",
    ][..]);
    proptest::collection::vec(tok, 0..16).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(500), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(s in "\\PC{0,40}") {
        every_parser(&s);
    }

    #[test]
    fn token_soup_never_panics(s in soup()) {
        every_parser(&s);
    }

    #[test]
    fn arbitrary_form_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..200)) {
        let p = Params::parse(Some(&body), None);
        let _ = parse_time_param(&p, "time", 0);
        let _ = p.get("query");
    }

    #[test]
    fn timestamps_print_and_parse_back(ms in MIN_TIME_MS..=MAX_TIME_MS) {
        let f = format_rfc3339_ms(ms);
        // RFC 3339 as Go parses it takes 4-digit years only.
        if f.as_bytes().get(4) == Some(&b'-') && !f.starts_with('-') {
            prop_assert_eq!(parse_time(&f), Ok(ms), "{}", f);
        }
        let _ = format_rfc3339_nano(ms, 999_999_999);
        let _ = format_duration_ms(ms);
    }
}

#[test]
fn extreme_values_never_panic() {
    for ms in [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX] {
        let _ = format_rfc3339_ms(ms);
        let _ = format_duration_ms(ms);
        for n in [0, 999_999_999, u32::MAX] {
            let _ = format_rfc3339_nano(ms, n);
        }
    }
}
