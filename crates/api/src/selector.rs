//! `match[]` series selectors and label names in URL paths.
//!
//! TEMPORARY: [`parse_metric_selector`] is a small private parser for `metric{a="b", c=~"d"}` written
//! while `tessera_promql::parser::parse_metric_selector` is being built; replace its body with a call
//! to that function once it lands (its error messages are Prometheus'; these are only close).

use tessera_model::{MatchOp, Matcher, METRIC_NAME};

/// Parses a series selector into matchers (Prometheus' `parser.ParseMetricSelector`).
pub fn parse_metric_selector(input: &str) -> Result<Vec<Matcher>, String> {
    let mut p = P { s: input.as_bytes(), src: input, i: 0 };
    let mut out = Vec::new();
    p.ws();
    if p.peek().is_some_and(is_name_start) {
        let name = p.ident();
        out.push(Matcher::equal(METRIC_NAME, name));
        p.ws();
    }
    if p.peek() == Some(b'{') {
        p.i += 1;
        loop {
            p.ws();
            match p.peek() {
                Some(b'}') => {
                    p.i += 1;
                    break;
                }
                None => return Err(p.err("unexpected end of input inside braces")),
                _ => {}
            }
            let name = match p.peek() {
                Some(b'"') | Some(b'\'') | Some(b'`') => p.string()?,
                Some(c) if is_name_start(c) => p.ident().to_string(),
                _ => return Err(p.err("unexpected character inside braces")),
            };
            p.ws();
            let op = match (p.peek(), p.s.get(p.i + 1).copied()) {
                (Some(b'='), Some(b'~')) => Some((MatchOp::Regex, 2)),
                (Some(b'!'), Some(b'~')) => Some((MatchOp::NotRegex, 2)),
                (Some(b'!'), Some(b'=')) => Some((MatchOp::NotEqual, 2)),
                (Some(b'='), _) => Some((MatchOp::Equal, 1)),
                _ => None,
            };
            match op {
                Some((op, n)) => {
                    p.i += n;
                    p.ws();
                    let value = p.string()?;
                    out.push(Matcher::new(op, name, value).map_err(|e| p.err(&e.to_string()))?);
                }
                // A bare quoted string is a UTF-8 metric name: {"my.metric", job="x"}.
                None => out.push(Matcher::equal(METRIC_NAME, name)),
            }
            p.ws();
            match p.peek() {
                Some(b',') => p.i += 1,
                Some(b'}') => {}
                _ => return Err(p.err("unexpected character in label matching, expected \",\" or \"}\"")),
            }
        }
    }
    p.ws();
    if p.i != p.s.len() || out.is_empty() {
        return Err(p.err("unexpected input, expected a series selector"));
    }
    if out.iter().all(|m| m.matches("")) {
        // Upstream reports this one at the selector's start.
        return Err("1:1: parse error: vector selector must contain at least one non-empty matcher".into());
    }
    Ok(out)
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b':'
}

struct P<'a> {
    s: &'a [u8],
    src: &'a str,
    i: usize,
}

impl<'a> P<'a> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.i).copied()
    }
    fn ws(&mut self) {
        while self.peek().is_some_and(|c| c.is_ascii_whitespace()) {
            self.i += 1;
        }
    }
    fn ident(&mut self) -> &'a str {
        let st = self.i;
        while self.peek().is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_' || c == b':') {
            self.i += 1;
        }
        &self.src[st..self.i]
    }
    fn err(&self, msg: &str) -> String {
        format!("1:{}: parse error: {msg}", self.i + 1)
    }
    fn string(&mut self) -> Result<String, String> {
        let q = self.peek().ok_or_else(|| self.err("unexpected end of input, expected a string"))?;
        if !matches!(q, b'"' | b'\'' | b'`') {
            return Err(self.err("unexpected character, expected a quoted string"));
        }
        self.i += 1;
        let mut out = String::new();
        loop {
            let rest = &self.src[self.i..];
            let mut chars = rest.chars();
            let c = chars.next().ok_or_else(|| self.err("unterminated quoted string"))?;
            self.i += c.len_utf8();
            if c as u32 == q as u32 {
                return Ok(out);
            }
            if c == '\\' && q != b'`' {
                let e = self.src[self.i..].chars().next().ok_or_else(|| self.err("unterminated quoted string"))?;
                self.i += e.len_utf8();
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    'a' => out.push('\u{07}'),
                    'b' => out.push('\u{08}'),
                    'f' => out.push('\u{0c}'),
                    'v' => out.push('\u{0b}'),
                    '\\' | '"' | '\'' => out.push(e),
                    'x' | 'u' | 'U' => {
                        let n = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex = self.src.get(self.i..self.i + n).ok_or_else(|| self.err("invalid escape"))?;
                        let v = u32::from_str_radix(hex, 16).map_err(|_| self.err("invalid escape"))?;
                        self.i += n;
                        out.push(char::from_u32(v).ok_or_else(|| self.err("invalid escape"))?);
                    }
                    _ => return Err(self.err(&format!("unknown escape sequence {e:?}"))),
                }
            } else {
                out.push(c);
            }
        }
    }
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
        assert_eq!(
            s(&parse_metric_selector(r#"up{job="a", instance=~"h.*" ,x!="1",y!~'z',}"#).expect("full")),
            ["__name__=\"up\"", "job=\"a\"", "instance=~\"h.*\"", "x!=\"1\"", "y!~\"z\""]
        );
        assert_eq!(s(&parse_metric_selector(r#"{"my.metric", "a.b"="c\n"}"#).expect("utf8")), ["__name__=\"my.metric\"", "a.b=\"c\\n\""]);
        assert!(parse_metric_selector(r#"{job=""}"#).is_err());
        assert!(parse_metric_selector(r#"{job=~".*"}"#).is_err());
        assert!(parse_metric_selector("").is_err());
        assert!(parse_metric_selector("up{").is_err());
        assert!(parse_metric_selector("up{a=\"b\"").is_err());
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
