//! `match[]` series selectors and label names in URL paths.
//!
//! Selectors are parsed by Tessera's PromQL parser (`tessera_promql::parser::parse_metric_selector`,
//! upstream's `ParseMetricSelector`), so `match[]` accepts exactly the syntax, and gets exactly the
//! error messages, of a PromQL selector.

use tessera_model::Matcher;

/// Parses a series selector into matchers (Prometheus' `parser.ParseMetricSelector`). Whether the
/// selector has a non-empty matcher is the caller's check (`parseMatchersParam`), as upstream.
pub fn parse_metric_selector(input: &str) -> Result<Vec<Matcher>, String> {
    tessera_promql::parser::parse_metric_selector(input).map_err(|e| e.to_string())
}

/// Label names in URL paths: Prometheus 3 lets clients send a UTF-8 name as `U__` + value-encoding
/// escapes (`U__my_2e_name` is `my.name`, `__` is `_`). Mirrors `model.UnescapeName(name,
/// ValueEncodingEscaping)`: anything malformed is returned unchanged.
pub fn unescape_label_name(name: &str) -> String {
    let Some(esc) = name.strip_prefix("U__") else {
        return name.to_string();
    };
    let b = esc.as_bytes();
    let mut out: Vec<u8> = Vec::with_capacity(b.len());
    let mut i = 0;
    'top: while i < b.len() {
        if b[i] != b'_' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        i += 1;
        if i >= b.len() {
            return name.to_string();
        }
        if b[i] == b'_' {
            out.push(b'_');
            i += 1;
            continue;
        }
        let mut v: u32 = 0;
        let mut j = 0;
        while i < b.len() {
            if j >= 6 {
                return name.to_string();
            }
            if b[i] == b'_' {
                let Some(c) = char::from_u32(v) else {
                    return name.to_string();
                };
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                i += 1;
                continue 'top;
            }
            let d = match b[i].to_ascii_lowercase() {
                c @ b'0'..=b'9' => c - b'0',
                c @ b'a'..=b'f' => c - b'a' + 10,
                _ => return name.to_string(),
            };
            v = v * 16 + d as u32;
            i += 1;
            j += 1;
        }
        return name.to_string();
    }
    String::from_utf8(out).unwrap_or_else(|_| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ms: &[Matcher]) -> Vec<String> {
        ms.iter().map(|m| m.to_string()).collect()
    }

    #[test]
    fn selectors() {
        assert_eq!(s(&parse_metric_selector("up").expect("up")), ["__name__=\"up\""]);
        let mut got = s(&parse_metric_selector(r#"up{job="a", instance=~"h.*" ,x!="1",y!~'z',}"#).expect("full"));
        got.sort();
        assert_eq!(got, ["__name__=\"up\"", "instance=~\"h.*\"", "job=\"a\"", "x!=\"1\"", "y!~\"z\""]);
        let mut got = s(&parse_metric_selector(r#"{"my.metric", "a.b"="c"}"#).expect("utf8"));
        got.sort();
        assert_eq!(got, ["__name__=\"my.metric\"", "a.b=\"c\""]);
        assert!(parse_metric_selector("").is_err());
        assert!(parse_metric_selector("up{").is_err());
        assert!(parse_metric_selector("up{a=~\"(\"}").is_err());
        assert!(parse_metric_selector("up + 1").is_err());
    }

    #[test]
    fn unescape_like_prometheus() {
        assert_eq!(unescape_label_name("job"), "job");
        assert_eq!(unescape_label_name("U__my_2e_name"), "my.name");
        assert_eq!(unescape_label_name("U__a__b"), "a_b");
        assert_eq!(unescape_label_name("U___1f600_"), "😀");
        assert_eq!(unescape_label_name("U__bad_zz_"), "U__bad_zz_");
        assert_eq!(unescape_label_name("U__open_2e"), "U__open_2e");
        assert_eq!(unescape_label_name("U__trail_"), "U__trail_");
    }

    proptest::proptest! {
        #[test]
        fn never_panics(input in ".{0,40}") {
            let _ = parse_metric_selector(&input);
            let _ = unescape_label_name(&input);
            let _ = unescape_label_name(&format!("U__{input}"));
        }
    }
}
