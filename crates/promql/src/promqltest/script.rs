//! Parser of the promqltest script language (Prometheus' `promql/promqltest/test.go`, `parseLoad`,
//! `parseEval`, and the series-description grammar of `parser.ParseSeriesDesc`).
//!
//! The output is a flat list of [`Command`]s; nothing here touches the engine. Native-histogram points
//! (`{{schema:0 sum:5 count:4 buckets:[1 2 1]}}`, with `xN` and `+`/`-` series) are parsed as upstream's
//! `buildHistogramFromMap` and `histogramsIncreaseSeries` build them ([`Point::Histogram`]).

use tessera_model::histogram::{CounterResetHint, Span};
use tessera_model::{FloatHistogram, Labels};

/// One point of a series description.
#[derive(Debug, Clone, PartialEq)]
pub enum Point {
    /// `_`: no sample at this position.
    Omitted,
    Float(f64),
    /// A native histogram literal, and whether it set `counter_reset_hint` explicitly (upstream
    /// `SequenceValue.CounterResetHintSet`: only then does the comparison check the hint).
    Histogram(Box<FloatHistogram>, bool),
}

#[derive(Debug, Clone, PartialEq)]
pub struct SeriesDef {
    pub labels: Labels,
    pub points: Vec<Point>,
    /// Start timestamps from a preceding `metric@st` line (upstream `parseSTLine`): per point, the offset
    /// in ms of the sample's start time from its own timestamp (`None`: omitted). Empty: no `@st` line.
    pub st_offsets: Vec<Option<i64>>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ExpectAnno {
    /// Any annotation of the kind.
    Any,
    Msg(String),
    Regex(String),
}

#[derive(Debug, Clone, Default)]
pub struct EvalCmd {
    /// 1-based line of the `eval` command.
    pub line: usize,
    pub expr: String,
    pub is_range: bool,
    pub start_ms: i64,
    pub end_ms: i64,
    pub step_ms: i64,
    pub fail: bool,
    /// `expect fail msg:` / `regex:` / `expected_fail_message` / `expected_fail_regexp`.
    pub fail_msg: Option<String>,
    pub fail_regex: Option<String>,
    pub ordered: bool,
    /// Legacy `eval_warn` / `eval_info`: at least one annotation of that kind.
    pub warn: bool,
    pub info: bool,
    pub expect_warn: Vec<ExpectAnno>,
    pub expect_info: Vec<ExpectAnno>,
    pub no_warn: bool,
    pub no_info: bool,
    pub expected_string: Option<String>,
    /// `expect range vector from .. to .. step ..` on an instant query.
    pub range_vector: Option<(i64, i64, i64)>,
    /// A bare number: the expected scalar.
    pub expect_scalar: Option<f64>,
    /// Expected series, in file order (position matters for `ordered`).
    pub expected: Vec<SeriesDef>,
}

#[derive(Debug, Clone)]
pub enum Command {
    Clear,
    Load { interval_ms: i64, with_nhcb: bool, series: Vec<SeriesDef>, line: usize },
    Eval(Box<EvalCmd>),
}

/// A script error, with its 1-based line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("line {line}: {msg}")]
pub struct ScriptError {
    pub line: usize,
    pub msg: String,
}

fn err(line: usize, msg: impl Into<String>) -> ScriptError {
    ScriptError { line: line + 1, msg: msg.into() }
}

/// Parses a Prometheus duration (`model.ParseDuration`): `1h30m`, `5m`, `10s`, `100ms`, `1d`, `1w`, `1y`, `0`.
pub fn parse_duration_ms(s: &str) -> Result<i64, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err("empty duration string".into());
    }
    let b = s.as_bytes();
    let mut i = 0;
    let mut total: i64 = 0;
    while i < b.len() {
        let st = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if st == i {
            return Err(format!("not a valid duration string: {s:?}"));
        }
        let n: i64 = s[st..i].parse().map_err(|_| format!("not a valid duration string: {s:?}"))?;
        let us = i;
        while i < b.len() && b[i].is_ascii_alphabetic() {
            i += 1;
        }
        let mult = match &s[us..i] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            "y" => 365 * 86_400_000,
            _ => return Err(format!("not a valid duration string: {s:?}")),
        };
        total = total.saturating_add(n.saturating_mul(mult));
    }
    Ok(total)
}

/// Parses a whole script.
pub fn parse_script(input: &str) -> Result<Vec<Command>, ScriptError> {
    let lines: Vec<&str> = input
        .split('\n')
        .map(|l| {
            let t = l.trim();
            if t.starts_with('#') { "" } else { t }
        })
        .collect();
    let mut cmds = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i];
        if l.is_empty() {
            i += 1;
            continue;
        }
        let first = l.split_whitespace().next().unwrap_or("").to_ascii_lowercase();
        if first == "clear" {
            cmds.push(Command::Clear);
            i += 1;
        } else if first.starts_with("load") {
            let (ni, c) = parse_load(&lines, i)?;
            cmds.push(c);
            i = ni + 1;
        } else if first.starts_with("eval") {
            let (ni, c) = parse_eval(&lines, i)?;
            cmds.push(Command::Eval(Box::new(c)));
            i = ni + 1;
        } else {
            return Err(err(i, format!("invalid command {l:?}")));
        }
    }
    Ok(cmds)
}

fn parse_load(lines: &[&str], mut i: usize) -> Result<(usize, Command), ScriptError> {
    let l = lines[i];
    let (kw, rest) = split_word(l);
    let with_nhcb = match kw {
        "load" => false,
        "load_with_nhcb" => true,
        _ => return Err(err(i, "invalid load command. (load[_with_nhcb] <step:duration>)")),
    };
    let interval_ms = parse_duration_ms(rest).map_err(|e| err(i, e))?;
    let line = i + 1;
    let mut series = Vec::new();
    // A `metric@st` line applies to the sample line right after it (upstream `parseLoad`).
    let mut pending: Option<(usize, Labels, Vec<Option<i64>>)> = None;
    while i + 1 < lines.len() {
        i += 1;
        let d = lines[i];
        if d.is_empty() {
            i -= 1;
            break;
        }
        if is_st_line(d) {
            if let Some((pl, ..)) = pending {
                return Err(err(pl, "@st line has no following sample line"));
            }
            let (labels, offs) = parse_st_line(d).map_err(|e| err(i, e))?;
            pending = Some((i, labels, offs));
            continue;
        }
        let mut def = parse_series(d).map_err(|e| err(i, e))?;
        if let Some((pl, labels, offs)) = pending.take() {
            if labels != def.labels {
                return Err(err(pl, "@st metric does not match the following sample line metric"));
            }
            if offs.len() != def.points.len() {
                return Err(err(
                    pl,
                    format!("@st line has {} values but sample line has {}", offs.len(), def.points.len()),
                ));
            }
            def.st_offsets = offs;
        }
        series.push(def);
    }
    if let Some((pl, ..)) = pending {
        return Err(err(pl, "@st line has no following sample line"));
    }
    Ok((i, Command::Load { interval_ms, with_nhcb, series, line }))
}

/// Upstream `isSTLine`: the selector part (up to the first blank) ends in `@st`.
fn is_st_line(d: &str) -> bool {
    let d = d.trim();
    match d.find([' ', '\t']) {
        Some(p) => d[..p].ends_with("@st"),
        None => false,
    }
}

/// Upstream `parseSTLine`: `metric{labels}@st <offsets>`.
fn parse_st_line(d: &str) -> Result<(Labels, Vec<Option<i64>>), String> {
    let d = d.trim();
    let p = d.find([' ', '\t']).ok_or("invalid @st line: missing value sequence")?;
    let metric = d[..p].strip_suffix("@st").unwrap_or(&d[..p]);
    let (labels, rest) = parse_labels_prefix(metric).map_err(|e| format!("invalid @st line metric {metric:?}: {e}"))?;
    if !rest.trim().is_empty() {
        return Err(format!("invalid @st line metric {metric:?}"));
    }
    let mut out = Vec::new();
    for item in d[p..].split_whitespace() {
        st_item(item, &mut out).map_err(|e| format!("invalid @st sequence: invalid ST item {item:?}: {e}"))?;
    }
    Ok((labels, out))
}

/// Upstream `parseSTItem`: `_`, `_xN`, `<dur>`, `<dur>xN`, `<dur>(+|-)<dur>xN`, durations with an optional sign.
fn st_item(item: &str, out: &mut Vec<Option<i64>>) -> Result<(), String> {
    if item == "_" {
        out.push(None);
        return Ok(());
    }
    if let Some(n) = item.strip_prefix("_x") {
        let n: usize = n.parse().ok().filter(|n| *n > 0).ok_or("invalid repeat count")?;
        out.extend(std::iter::repeat_n(None, n));
        return Ok(());
    }
    let (base, rest) = duration_prefix(item)?;
    if rest.is_empty() {
        out.push(Some(base));
        return Ok(());
    }
    if let Some(n) = rest.strip_prefix('x') {
        let n: usize = n.parse().map_err(|_| "invalid repeat count")?;
        out.extend(std::iter::repeat_n(Some(base), n + 1));
        return Ok(());
    }
    let neg = match rest.as_bytes()[0] {
        b'+' => false,
        b'-' => true,
        c => return Err(format!("unexpected character {:?} after duration", c as char)),
    };
    let (delta, rest) = duration_prefix(&rest[1..]).map_err(|e| format!("invalid step duration: {e}"))?;
    let delta = if neg { -delta } else { delta };
    let n: usize = rest
        .strip_prefix('x')
        .ok_or("expected 'x<count>' after step duration")?
        .parse()
        .map_err(|_| "invalid repeat count")?;
    let mut off = base;
    for _ in 0..=n {
        out.push(Some(off));
        off += delta;
    }
    Ok(())
}

/// Upstream `parseDurationPrefix`: an optionally signed duration (digits, then a unit that stops at `x`)
/// at the start of `s`, in ms, and the rest.
fn duration_prefix(s: &str) -> Result<(i64, &str), String> {
    let b = s.as_bytes();
    let mut i = 0;
    let neg = match b.first() {
        None => return Err("empty duration".into()),
        Some(b'-') => {
            i = 1;
            true
        }
        Some(b'+') => {
            i = 1;
            false
        }
        _ => false,
    };
    let st = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    if i == st {
        return Err(format!("expected digits in duration {s:?}"));
    }
    while i < b.len() && b[i].is_ascii_alphabetic() && b[i] != b'x' {
        i += 1;
    }
    let ms = parse_duration_ms(&s[st..i])?;
    Ok((if neg { -ms } else { ms }, &s[i..]))
}

fn split_word(l: &str) -> (&str, &str) {
    match l.find([' ', '\t']) {
        Some(p) => (&l[..p], l[p..].trim_start()),
        None => (l, ""),
    }
}

fn parse_eval(lines: &[&str], mut i: usize) -> Result<(usize, EvalCmd), ScriptError> {
    let l = lines[i];
    let (kw, rest) = split_word(l);
    let mut c = EvalCmd { line: i + 1, ..Default::default() };
    match kw {
        "eval" => {}
        "eval_fail" => c.fail = true,
        "eval_warn" => c.warn = true,
        "eval_info" => c.info = true,
        "eval_ordered" => c.ordered = true,
        _ => return Err(err(i, format!("invalid evaluation command {kw:?}"))),
    }
    let (mode, rest) = split_word(rest);
    match mode {
        "instant" => {
            let (at, rest) = split_word(rest);
            if at != "at" {
                return Err(err(i, "expected 'at' after 'instant'"));
            }
            let (ts, expr) = split_word(rest);
            let t = parse_duration_ms(ts).map_err(|e| err(i, format!("invalid timestamp definition {ts:?}: {e}")))?;
            c.start_ms = t;
            c.end_ms = t;
            c.expr = expr.to_string();
        }
        "range" => {
            let (from, rest) = split_word(rest);
            let (s, rest) = split_word(rest);
            let (to, rest) = split_word(rest);
            let (e, rest) = split_word(rest);
            let (step, rest) = split_word(rest);
            let (st, expr) = split_word(rest);
            if from != "from" || to != "to" || step != "step" {
                return Err(err(i, "invalid range eval: eval range from <from> to <to> step <step> <query>"));
            }
            c.is_range = true;
            c.start_ms = parse_duration_ms(s).map_err(|x| err(i, x))?;
            c.end_ms = parse_duration_ms(e).map_err(|x| err(i, x))?;
            c.step_ms = parse_duration_ms(st).map_err(|x| err(i, x))?;
            c.expr = expr.to_string();
        }
        _ => return Err(err(i, "invalid evaluation command: instant or range expected")),
    }
    while i + 1 < lines.len() {
        i += 1;
        let d = lines[i];
        if d.is_empty() {
            i -= 1;
            break;
        }
        if c.fail && d.starts_with("expected_fail_message") {
            c.fail_msg = Some(d["expected_fail_message".len()..].trim().to_string());
            break;
        }
        if c.fail && d.starts_with("expected_fail_regexp") {
            c.fail_regex = Some(d["expected_fail_regexp".len()..].trim().to_string());
            break;
        }
        if let Some(r) = d.strip_prefix("expect range vector") {
            let w: Vec<&str> = r.split_whitespace().collect();
            if w.len() != 6 || w[0] != "from" || w[2] != "to" || w[4] != "step" {
                return Err(err(i, format!("invalid range vector definition {d:?}")));
            }
            let s = parse_duration_ms(w[1]).map_err(|x| err(i, x))?;
            let e = parse_duration_ms(w[3]).map_err(|x| err(i, x))?;
            let st = parse_duration_ms(w[5]).map_err(|x| err(i, x))?;
            c.range_vector = Some((s, e, st));
            continue;
        }
        if let Some(r) = d.strip_prefix("expect string") {
            c.expected_string = Some(unquote(r.trim()).ok_or_else(|| err(i, "expected string literal not valid"))?);
            continue;
        }
        if d.split(' ').next() == Some("expect") {
            parse_expect(d, &mut c).map_err(|e| err(i, e))?;
            continue;
        }
        if let Some(f) = parse_number(d) {
            c.expect_scalar = Some(f);
            break;
        }
        let s = parse_series(d).map_err(|e| err(i, e))?;
        c.expected.push(s);
    }
    Ok((i, c))
}

fn parse_expect(d: &str, c: &mut EvalCmd) -> Result<(), String> {
    let rest = d["expect".len()..].trim_start();
    let (kind, rest) = split_word(rest);
    let anno = if rest.is_empty() {
        ExpectAnno::Any
    } else if let Some(m) = rest.strip_prefix("msg:") {
        ExpectAnno::Msg(m.trim().to_string())
    } else if let Some(r) = rest.strip_prefix("regex:") {
        ExpectAnno::Regex(r.trim().to_string())
    } else {
        return Err(format!("invalid expect statement {d:?}"));
    };
    match kind {
        "fail" => {
            c.fail = true;
            match anno {
                ExpectAnno::Msg(m) => c.fail_msg = Some(m),
                ExpectAnno::Regex(r) => c.fail_regex = Some(r),
                ExpectAnno::Any => {}
            }
        }
        "ordered" => c.ordered = true,
        "warn" => c.expect_warn.push(anno),
        "info" => c.expect_info.push(anno),
        "no_warn" => c.no_warn = true,
        "no_info" => c.no_info = true,
        _ => return Err(format!("invalid expect statement {d:?}")),
    }
    Ok(())
}

/// Go's `strconv.Unquote` for the forms the scripts use: "..." with escapes, `...`, '...'.
pub fn unquote(s: &str) -> Option<String> {
    let b = s.as_bytes();
    if b.len() < 2 {
        return None;
    }
    let q = b[0];
    if b[b.len() - 1] != q || !(q == b'"' || q == b'\'' || q == b'`') {
        return None;
    }
    let inner = &s[1..s.len() - 1];
    if q == b'`' {
        return Some(inner.to_string());
    }
    let mut out = String::new();
    let mut it = inner.chars();
    while let Some(ch) = it.next() {
        if ch != '\\' {
            out.push(ch);
            continue;
        }
        match it.next()? {
            'n' => out.push('\n'),
            't' => out.push('\t'),
            'r' => out.push('\r'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'v' => out.push('\x0b'),
            '\\' => out.push('\\'),
            '"' => out.push('"'),
            '\'' => out.push('\''),
            'x' => {
                let h: String = it.by_ref().take(2).collect();
                out.push(char::from(u8::from_str_radix(&h, 16).ok()?));
            }
            'u' => {
                let h: String = it.by_ref().take(4).collect();
                out.push(char::from_u32(u32::from_str_radix(&h, 16).ok()?)?);
            }
            'U' => {
                let h: String = it.by_ref().take(8).collect();
                out.push(char::from_u32(u32::from_str_radix(&h, 16).ok()?)?);
            }
            _ => return None,
        }
    }
    Some(out)
}

/// A number as the series-description lexer reads it: decimal, exponent, `Inf`, `NaN`, optional sign.
pub fn parse_number(s: &str) -> Option<f64> {
    let t = s.trim();
    let (neg, body) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let v = match body.to_ascii_lowercase().as_str() {
        "inf" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => {
            if body.is_empty() || !body.bytes().all(|c| c.is_ascii_hexdigit() || matches!(c, b'.' | b'e' | b'E' | b'+' | b'-' | b'x' | b'X')) {
                return None;
            }
            if let Some(h) = body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
                i64::from_str_radix(h, 16).ok()? as f64
            } else {
                if body.bytes().any(|c| c.is_ascii_alphabetic() && c != b'e' && c != b'E') {
                    return None;
                }
                body.parse::<f64>().ok()?
            }
        }
    };
    Some(if neg { -v } else { v })
}

/// Parses `metric{l="v",...} <points>` (a `parser.ParseSeriesDesc` equivalent).
pub fn parse_series(line: &str) -> Result<SeriesDef, String> {
    let (labels, rest) = parse_labels_prefix(line)?;
    let points = parse_points(rest)?;
    Ok(SeriesDef { labels, points, st_offsets: Vec::new() })
}

/// Parses a series selector-like label set at the start of `s`; returns it and the rest.
pub fn parse_labels_prefix(s: &str) -> Result<(Labels, &str), String> {
    let s = s.trim_start();
    let b = s.as_bytes();
    let mut i = 0;
    let mut pairs: Vec<(String, String)> = Vec::new();
    // Metric name (identifier) before the braces.
    while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
        i += 1;
    }
    if i > 0 {
        pairs.push(("__name__".into(), s[..i].to_string()));
    }
    if i < b.len() && b[i] == b'{' && !s[i..].starts_with("{{") {
        i += 1;
        loop {
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i >= b.len() {
                return Err("unterminated label set".into());
            }
            if b[i] == b'}' {
                i += 1;
                break;
            }
            // Label name: identifier or quoted string.
            let name = if b[i] == b'"' || b[i] == b'\'' {
                let (q, n) = read_quoted(&s[i..])?;
                i += n;
                q
            } else {
                let st = i;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                if st == i {
                    return Err(format!("unexpected character in label set: {:?}", &s[i..]));
                }
                s[st..i].to_string()
            };
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < b.len() && b[i] == b'=' {
                i += 1;
                while i < b.len() && b[i].is_ascii_whitespace() {
                    i += 1;
                }
                let (v, n) = read_quoted(&s[i..])?;
                i += n;
                pairs.push((name, v));
            } else {
                // A bare quoted string inside braces is the metric name.
                pairs.push(("__name__".into(), name));
            }
            while i < b.len() && b[i].is_ascii_whitespace() {
                i += 1;
            }
            if i < b.len() && b[i] == b',' {
                i += 1;
            }
        }
    }
    if i == 0 {
        return Err(format!("invalid series description {s:?}"));
    }
    Ok((Labels::from_pairs(pairs), &s[i..]))
}

fn read_quoted(s: &str) -> Result<(String, usize), String> {
    let b = s.as_bytes();
    let q = *b.first().ok_or("expected quoted string")?;
    if q != b'"' && q != b'\'' && q != b'`' {
        return Err(format!("expected quoted string at {s:?}"));
    }
    let mut i = 1;
    while i < b.len() {
        if b[i] == b'\\' && q != b'`' {
            i += 2;
            continue;
        }
        if b[i] == q {
            let raw = &s[..=i];
            return Ok((unquote(raw).ok_or_else(|| format!("invalid string {raw}"))?, i + 1));
        }
        i += 1;
    }
    Err("unterminated string".into())
}

fn parse_points(s: &str) -> Result<Vec<Point>, String> {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        // A token runs to the next whitespace outside `{{ }}`.
        let st = i;
        let mut depth = 0i32;
        while i < b.len() {
            match b[i] {
                b'{' => depth += 1,
                b'}' => depth -= 1,
                c if c.is_ascii_whitespace() && depth <= 0 => break,
                _ => {}
            }
            i += 1;
        }
        expand_item(&s[st..i], &mut out)?;
    }
    Ok(out)
}

fn expand_item(tok: &str, out: &mut Vec<Point>) -> Result<(), String> {
    if tok.starts_with("{{") {
        return expand_histogram_item(tok, out);
    }
    if tok == "_" {
        out.push(Point::Omitted);
        return Ok(());
    }
    if let Some(n) = tok.strip_prefix("_x") {
        let n: usize = n.parse().map_err(|_| format!("invalid repetition in {tok:?}"))?;
        out.extend(std::iter::repeat_n(Point::Omitted, n));
        return Ok(());
    }
    if tok == "stale" {
        out.push(Point::Float(tessera_model::STALE_NAN));
        return Ok(());
    }
    // number [ (+|-) number ] [ x N ]
    let (base_s, rest) = split_number(tok).ok_or_else(|| format!("invalid value {tok:?}"))?;
    let base = parse_number(base_s).ok_or_else(|| format!("invalid value {tok:?}"))?;
    if rest.is_empty() {
        out.push(Point::Float(base));
        return Ok(());
    }
    let (delta, rest) = if rest.starts_with('+') || rest.starts_with('-') {
        let (d, r) = split_number(rest).ok_or_else(|| format!("invalid value {tok:?}"))?;
        (parse_number(d).ok_or_else(|| format!("invalid value {tok:?}"))?, r)
    } else {
        (0.0, rest)
    };
    let n: u64 = rest.strip_prefix('x').and_then(|n| n.parse().ok()).ok_or_else(|| format!("invalid value {tok:?}"))?;
    let mut v = base;
    for _ in 0..=n {
        out.push(Point::Float(v));
        v += delta;
    }
    Ok(())
}

/// `{{...}}`, `{{...}}xN`, `{{...}}+{{...}}xN`, `{{...}}-{{...}}xN` (upstream's `series_item` rules for
/// histograms: `xN` repeats the literal, `+`/`-` add or subtract the increment N times).
fn expand_histogram_item(tok: &str, out: &mut Vec<Point>) -> Result<(), String> {
    let (base, hint_set, rest) = parse_histogram(tok)?;
    if rest.is_empty() {
        out.push(Point::Histogram(Box::new(base), hint_set));
        return Ok(());
    }
    if let Some(n) = rest.strip_prefix('x') {
        let n: usize = n.parse().map_err(|_| format!("invalid repetition in {tok:?}"))?;
        for _ in 0..=n {
            out.push(Point::Histogram(Box::new(base.clone()), hint_set));
        }
        return Ok(());
    }
    let sub = rest.starts_with('-');
    let (inc, inc_hint_set, rest) = parse_histogram(&rest[1..])?;
    let n: usize = rest.strip_prefix('x').and_then(|n| n.parse().ok()).ok_or_else(|| format!("invalid value {tok:?}"))?;
    // Upstream `histogramsSeries`: the base is emitted first; every value carries the hint flag of
    // the increment (the last literal parsed), the base's own flag is not used.
    let _ = hint_set;
    out.push(Point::Histogram(Box::new(base.clone()), inc_hint_set));
    let mut cur = base;
    for _ in 0..n {
        if cur.schema > inc.schema {
            return Err(format!("error combining histograms: cannot merge from schema {} to {}", inc.schema, cur.schema));
        }
        // Upstream `histogramsSeries`: an incompatible increment is an error of the script.
        let r = if sub { crate::engine::hist::math::sub(&mut cur, &inc) } else { crate::engine::hist::math::add(&mut cur, &inc) };
        if let Err(e) = r {
            return Err(format!("error combining histograms: {e:?}"));
        }
        out.push(Point::Histogram(Box::new(cur.clone()), inc_hint_set));
    }
    Ok(())
}

/// One `{{key:value ...}}` literal (upstream `buildHistogramFromMap`): the histogram, whether it set
/// `counter_reset_hint`, and the text after `}}`.
fn parse_histogram(s: &str) -> Result<(FloatHistogram, bool, &str), String> {
    let body_start = s.strip_prefix("{{").ok_or_else(|| format!("expected histogram at {s:?}"))?;
    let end = body_start.find("}}").ok_or_else(|| format!("unterminated histogram {s:?}"))?;
    let body = &body_start[..end];
    let rest = &body_start[end + 2..];
    let mut h = FloatHistogram::default();
    let mut hint_set = false;
    let (mut buckets, mut offset, mut n_buckets, mut n_offset) = (Vec::new(), 0i32, Vec::new(), 0i32);
    let mut seen: Vec<String> = Vec::new();
    let b = body.as_bytes();
    let mut i = 0;
    while i < b.len() {
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        if i >= b.len() {
            break;
        }
        let ks = i;
        while i < b.len() && b[i] != b':' {
            i += 1;
        }
        let key = body[ks..i].trim().to_string();
        i += 1;
        while i < b.len() && b[i].is_ascii_whitespace() {
            i += 1;
        }
        let vs = i;
        if i < b.len() && b[i] == b'[' {
            while i < b.len() && b[i] != b']' {
                i += 1;
            }
            i += 1;
        } else {
            while i < b.len() && !b[i].is_ascii_whitespace() {
                i += 1;
            }
        }
        let val = body.get(vs..i.min(b.len())).unwrap_or("").trim();
        if seen.contains(&key) {
            return Err(format!("duplicate key \"{key}\" in histogram"));
        }
        seen.push(key.clone());
        let num = |v: &str| parse_number(v).ok_or_else(|| format!("error parsing {key} number: {v}"));
        let int = |v: &str| v.parse::<i32>().map_err(|_| format!("error parsing {key} number: {v}"));
        let list = |v: &str| -> Result<Vec<f64>, String> {
            let inner = v.strip_prefix('[').and_then(|v| v.strip_suffix(']')).ok_or_else(|| format!("error parsing {key}: {v}"))?;
            inner.split_whitespace().map(|x| parse_number(x).ok_or_else(|| format!("error parsing {key}: {v}"))).collect()
        };
        match key.as_str() {
            "schema" => h.schema = int(val)?,
            "sum" => h.sum = num(val)?,
            "count" => h.count = num(val)?,
            "z_bucket" => h.zero_count = num(val)?,
            "z_bucket_w" => h.zero_threshold = num(val)?,
            "custom_values" => h.custom_values = list(val)?,
            "buckets" => buckets = list(val)?,
            "offset" => offset = int(val)?,
            "n_buckets" => n_buckets = list(val)?,
            "n_offset" => n_offset = int(val)?,
            "counter_reset_hint" => {
                hint_set = true;
                h.counter_reset_hint = match val {
                    "unknown" => CounterResetHint::Unknown,
                    "reset" => CounterResetHint::CounterReset,
                    "not_reset" => CounterResetHint::NotCounterReset,
                    "gauge" => CounterResetHint::Gauge,
                    _ => return Err(format!("error parsing counter_reset_hint: {val}")),
                }
            }
            _ => return Err(format!("unexpected histogram description key {key:?}")),
        }
    }
    if !buckets.is_empty() {
        h.positive_spans = vec![Span::new(offset, buckets.len() as u32)];
        h.positive_buckets = buckets;
    }
    if !n_buckets.is_empty() {
        h.negative_spans = vec![Span::new(n_offset, n_buckets.len() as u32)];
        h.negative_buckets = n_buckets;
    }
    Ok((h, hint_set, rest))
}

/// Splits a leading number (with sign, exponent, Inf/NaN) off `s`.
fn split_number(s: &str) -> Option<(&str, &str)> {
    let b = s.as_bytes();
    let mut i = 0;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let lower = s[i..].to_ascii_lowercase();
    if lower.starts_with("inf") {
        return Some((&s[..i + 3], &s[i + 3..]));
    }
    if lower.starts_with("nan") {
        return Some((&s[..i + 3], &s[i + 3..]));
    }
    let st = i;
    while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.') {
        i += 1;
    }
    if i == st {
        return None;
    }
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let ds = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > ds {
            i = j;
        }
    }
    Some((&s[..i], &s[i..]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn floats(s: &str) -> Vec<f64> {
        parse_series(s)
            .expect("parses")
            .points
            .into_iter()
            .map(|p| match p {
                Point::Float(f) => f,
                _ => -999.0,
            })
            .collect()
    }

    #[test]
    fn start_timestamp_lines() {
        let cmds = parse_script(
            "load 1m\n  m{a=\"1\"}@st _ -30s-1mx2 +1m 0 -1msx1 _x2\n  m{a=\"1\"} _ 1 2 3 4 5 6 7 8 _\n  n 1 2\n",
        )
        .expect("parses");
        let Command::Load { series, .. } = &cmds[0] else { panic!("not a load") };
        assert_eq!(
            series[0].st_offsets,
            vec![None, Some(-30_000), Some(-90_000), Some(-150_000), Some(60_000), Some(0), Some(-1), Some(-1), None, None]
        );
        assert!(series[1].st_offsets.is_empty());
        let bad = |t: &str| parse_script(t).expect_err("must fail").msg;
        assert_eq!(bad("load 1m\n  m@st -1m\n  n 1\n"), "@st metric does not match the following sample line metric");
        assert_eq!(bad("load 1m\n  m@st -1m\n  m 1 2\n"), "@st line has 1 values but sample line has 2");
        assert_eq!(bad("load 1m\n  m 1\n  m@st -1m\n"), "@st line has no following sample line");
        assert_eq!(bad("load 1m\n  m@st -1m\n  m@st -1m\n  m 1\n"), "@st line has no following sample line");
        assert!(bad("load 1m\n  m@st 1m*2\n  m 1\n").contains("invalid @st sequence"));
    }

    #[test]
    fn expansions() {
        assert_eq!(floats("m 1+2x3"), vec![1.0, 3.0, 5.0, 7.0]);
        assert_eq!(floats("m 1-1x2"), vec![1.0, 0.0, -1.0]);
        assert_eq!(floats("m 5x2 -Inf"), vec![5.0, 5.0, 5.0, f64::NEG_INFINITY]);
        assert_eq!(floats("m 1e3 -2.5e-1+1e1x1"), vec![1000.0, -0.25, 9.75]);
        let p = parse_series("m _ _x2 stale NaN").expect("parses").points;
        assert_eq!(p.len(), 5);
        assert_eq!(p[0], Point::Omitted);
        assert!(matches!(p[3], Point::Float(f) if tessera_model::is_stale_nan(f)));
    }

    #[test]
    fn label_sets() {
        let s = parse_series(r#"http{job="a\"b", instance="x"} 1"#).expect("parses");
        assert_eq!(s.labels.get("job"), "a\"b");
        assert_eq!(s.labels.metric_name(), "http");
        let s = parse_series(r#"{"some.metric", "a.b"="c"} 1"#).expect("parses");
        assert_eq!(s.labels.metric_name(), "some.metric");
        assert_eq!(s.labels.get("a.b"), "c");
        let s = parse_series("{} 3").expect("parses");
        assert!(s.labels.is_empty());
        let s = parse_series("m {{schema:0 sum:1 count:2}}x2 {{schema:0}}").expect("parses");
        assert_eq!(s.points.len(), 4);
        assert!(s.points.iter().all(|p| matches!(p, Point::Histogram(..))));
    }

    #[test]
    fn histogram_literals_as_build_histogram_from_map() {
        let p = parse_points(
            "{{schema:1 sum:3 count:22 z_bucket:2 z_bucket_w:0.5 buckets:[5 10 7] offset:-1 n_buckets:[1] n_offset:2 counter_reset_hint:gauge}}",
        )
        .expect("parses");
        let Point::Histogram(h, hint_set) = &p[0] else { panic!("histogram expected") };
        assert!(*hint_set);
        assert_eq!((h.schema, h.sum, h.count, h.zero_count, h.zero_threshold), (1, 3.0, 22.0, 2.0, 0.5));
        assert_eq!(h.positive_spans, vec![Span::new(-1, 3)]);
        assert_eq!(h.positive_buckets, vec![5.0, 10.0, 7.0]);
        assert_eq!((h.negative_spans.clone(), h.negative_buckets.clone()), (vec![Span::new(2, 1)], vec![1.0]));
        assert_eq!(h.counter_reset_hint, CounterResetHint::Gauge);
        // `+` adds the increment N times after the base; `xN` repeats; `{{}}` is the empty histogram.
        let p = parse_points("{{sum:1 count:1 buckets:[1]}}+{{sum:2 count:2 buckets:[2]}}x2 {{}}x1").expect("parses");
        let counts: Vec<f64> = p.iter().map(|p| if let Point::Histogram(h, _) = p { h.count } else { -1.0 }).collect();
        assert_eq!(counts, vec![1.0, 3.0, 5.0, 0.0, 0.0]);
        assert!(parse_points("{{schema:0 schema:1}}").is_err(), "duplicate key");
        assert!(parse_points("{{sum:1 custom_values:[1 2] schema:-53}}+{{schema:0 sum:1}}x1").is_err(), "schema mismatch");
    }

    #[test]
    fn script() {
        let cmds = parse_script(
            "load 5m\n  m 1 2\n\n# c\neval instant at 5m m\n  expect warn msg: x y\n  m 2\n\neval range from 0 to 10m step 5m m\n  m 1 2 _\n\neval_fail instant at 0 foo(\n\nclear\n",
        )
        .expect("parses");
        assert_eq!(cmds.len(), 5);
        match &cmds[1] {
            Command::Eval(e) => {
                assert_eq!(e.start_ms, 300_000);
                assert_eq!(e.expect_warn, vec![ExpectAnno::Msg("x y".into())]);
                assert_eq!(e.line, 5);
            }
            _ => panic!("eval expected"),
        }
        assert_eq!(parse_duration_ms("1h30m").expect("ok"), 5_400_000);
    }
}
