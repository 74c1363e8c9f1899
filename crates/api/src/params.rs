//! Request parameters as Prometheus reads them: form values from the body and the URL, timestamps
//! (RFC 3339 or unix seconds), durations (`1h30m` or float seconds), limits.
//!
//! Go's `r.FormValue` looks at the POST form first and the URL query second, and `r.Form["match[]"]`
//! is the body's values followed by the query's; [`Params`] keeps that order so the first value wins
//! exactly as it does upstream.

/// Decoded form parameters in Go's `r.Form` order (body first, then URL query).
#[derive(Debug, Clone, Default)]
pub struct Params {
    pairs: Vec<(String, String)>,
}

impl Params {
    /// Builds from an optional `application/x-www-form-urlencoded` body and an optional raw URL query.
    pub fn parse(body: Option<&[u8]>, query: Option<&str>) -> Self {
        let mut pairs = Vec::new();
        if let Some(b) = body {
            pairs.extend(form_urlencoded::parse(b).map(|(k, v)| (k.into_owned(), v.into_owned())));
        }
        if let Some(q) = query {
            pairs.extend(form_urlencoded::parse(q.as_bytes()).map(|(k, v)| (k.into_owned(), v.into_owned())));
        }
        Params { pairs }
    }

    /// The first value of `name`, or "" (Go's `FormValue`).
    pub fn get(&self, name: &str) -> &str {
        self.pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str()).unwrap_or("")
    }

    /// Every value of `name`, in order (Go's `r.Form[name]`).
    pub fn all(&self, name: &str) -> Vec<&str> {
        self.pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str()).collect()
    }
}

/// `MinTime` of Prometheus' API (`time.Unix(math.MinInt64/1000+62135596801, 0)`), in milliseconds.
pub const MIN_TIME_MS: i64 = (i64::MIN / 1000 + 62_135_596_801) * 1000;
/// `MaxTime` of Prometheus' API (`time.Unix(math.MaxInt64/1000-62135596801, 999999999)`), in milliseconds.
pub const MAX_TIME_MS: i64 = (i64::MAX / 1000 - 62_135_596_801) * 1000 + 999;

/// Parses a timestamp parameter; an empty value gives `default_ms` (Prometheus' `parseTimeParam`).
pub fn parse_time_param(params: &Params, name: &str, default_ms: i64) -> Result<i64, String> {
    let v = params.get(name);
    if v.is_empty() {
        return Ok(default_ms);
    }
    parse_time(v).map_err(|e| format!("invalid time value for '{name}': {e}"))
}

/// Unix seconds (float, rounded to milliseconds) or RFC 3339 (Prometheus' `parseTime`).
pub fn parse_time(s: &str) -> Result<i64, String> {
    if let Some(f) = parse_go_float(s) {
        // Mirrors parseTime: whole seconds and the fraction rounded to milliseconds, then
        // timestamp.FromTime (which floors the nanoseconds to milliseconds).
        if f.is_finite() {
            let secs = f.trunc();
            let frac_ms = ((f - secs) * 1000.0).round();
            let ms = secs * 1000.0 + frac_ms;
            if ms >= i64::MIN as f64 && ms <= i64::MAX as f64 {
                return Ok(ms as i64);
            }
        }
        return Err(format!("cannot parse {} to a valid timestamp", go_quote(s)));
    }
    if let Some(ms) = parse_rfc3339_ms(s) {
        return Ok(ms);
    }
    if s == format_rfc3339_nano(MIN_TIME_MS / 1000, 0) {
        return Ok(MIN_TIME_MS);
    }
    if s == format_rfc3339_nano(MAX_TIME_MS / 1000, 999_999_999) {
        return Ok(MAX_TIME_MS);
    }
    Err(format!("cannot parse {} to a valid timestamp", go_quote(s)))
}

/// What Go's `strconv.ParseFloat` accepts, near enough: Rust's float syntax minus the forms Go rejects
/// ("infinity" is accepted by both; Rust rejects Go's hex floats and underscores, which no client sends).
fn parse_go_float(s: &str) -> Option<f64> {
    if s.is_empty() || s.starts_with('+') && s.len() == 1 {
        return None;
    }
    s.parse::<f64>().ok()
}

fn go_quote(s: &str) -> String {
    tessera_model::labels::go_quote(s)
}

/// A query-API duration: float seconds or a Prometheus duration (Prometheus' `parseDuration`), in ms.
pub fn parse_api_duration_ms(s: &str) -> Result<i64, String> {
    if let Some(f) = parse_go_float(s) {
        let ms = f * 1000.0;
        if !ms.is_finite() || ms > i64::MAX as f64 / 1e6 || ms < i64::MIN as f64 / 1e6 {
            return Err(format!("cannot parse {} to a valid duration. It overflows int64", go_quote(s)));
        }
        return Ok(ms as i64);
    }
    if let Ok(d) = parse_duration_ms(s) {
        return Ok(d);
    }
    Err(format!("cannot parse {} to a valid duration", go_quote(s)))
}

/// Prometheus' duration syntax (`model.ParseDuration`): `1y2w3d4h5m6s7ms`, units from biggest to
/// smallest, each at most once; "0" alone is allowed. Returns milliseconds.
pub fn parse_duration_ms(s: &str) -> Result<i64, String> {
    match s {
        "0" => return Ok(0),
        "" => return Err("empty duration string".into()),
        _ => {}
    }
    let invalid = || format!("not a valid duration string: {}", go_quote(s));
    // (unit, position, milliseconds)
    const UNITS: [(&str, u8, u64); 7] = [
        ("y", 1, 365 * 24 * 3_600_000),
        ("w", 2, 7 * 24 * 3_600_000),
        ("d", 3, 24 * 3_600_000),
        ("h", 4, 3_600_000),
        ("m", 5, 60_000),
        ("s", 6, 1000),
        ("ms", 7, 1),
    ];
    let b = s.as_bytes();
    let mut i = 0;
    let mut last_pos = 0u8;
    let mut total: u64 = 0;
    while i < b.len() {
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(invalid());
        }
        let v: u64 = s[start..i].parse().map_err(|_| invalid())?;
        let ustart = i;
        while i < b.len() && !b[i].is_ascii_digit() {
            i += 1;
        }
        if i == ustart {
            return Err(invalid());
        }
        let u = &s[ustart..i];
        let Some(&(_, pos, mult)) = UNITS.iter().find(|(n, _, _)| *n == u) else {
            return Err(format!("unknown unit {} in duration {}", go_quote(u), go_quote(s)));
        };
        if pos <= last_pos {
            return Err(invalid());
        }
        last_pos = pos;
        // time.Duration is nanoseconds: keep the same overflow bound (~292 years).
        let add = v.checked_mul(mult).ok_or("duration out of range")?;
        total = total.checked_add(add).ok_or("duration out of range")?;
        if total > (i64::MAX as u64) / 1_000_000 {
            return Err("duration out of range".into());
        }
    }
    Ok(total as i64)
}

/// Formats milliseconds as a Prometheus duration (`model.Duration.String`): `1d2h`, `90s`, `0s`.
pub fn format_duration_ms(ms: i64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    let (sign, mut ms) = if ms < 0 { ("-", ms.unsigned_abs()) } else { ("", ms as u64) };
    let mut out = String::from(sign);
    let units: [(&str, u64, bool); 7] = [
        ("y", 365 * 24 * 3_600_000, true),
        ("w", 7 * 24 * 3_600_000, true),
        ("d", 24 * 3_600_000, false),
        ("h", 3_600_000, false),
        ("m", 60_000, false),
        ("s", 1000, false),
        ("ms", 1, false),
    ];
    for (name, mult, exact) in units {
        if exact && ms % mult != 0 {
            continue;
        }
        let v = ms / mult;
        if v > 0 {
            out.push_str(&format!("{v}{name}"));
            ms -= v * mult;
        }
    }
    out
}

/// Byte sizes as Prometheus' `--storage.tsdb.retention.size` takes them (`units.Base2Bytes`:
/// `512MB` = 512 MiB; B, KB, MB, GB, TB, PB, EB and the `KiB` spellings).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let s = s.trim();
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (num, unit) = s.split_at(split);
    if num.is_empty() {
        return Err(format!("invalid size {s:?}: expected a number followed by B, KB, MB, GB, TB, PB or EB"));
    }
    let n: u64 = num.parse().map_err(|_| format!("invalid size {s:?}"))?;
    let mult: u64 = match unit.to_ascii_uppercase().as_str() {
        "" | "B" => 1,
        "KB" | "KIB" | "K" => 1 << 10,
        "MB" | "MIB" | "M" => 1 << 20,
        "GB" | "GIB" | "G" => 1 << 30,
        "TB" | "TIB" | "T" => 1 << 40,
        "PB" | "PIB" | "P" => 1 << 50,
        "EB" | "EIB" | "E" => 1 << 60,
        _ => return Err(format!("invalid size {s:?}: unknown unit {unit:?}")),
    };
    n.checked_mul(mult).ok_or_else(|| format!("invalid size {s:?}: too large"))
}

/// Prometheus' `parseLimitParam`: "" → 0 (no limit), negative → error.
pub fn parse_limit(s: &str) -> Result<usize, String> {
    if s.is_empty() {
        return Ok(0);
    }
    let v: i64 = s.trim_start_matches('+').parse().map_err(|_| format!("strconv.Atoi: parsing {}: invalid syntax", go_quote(s)))?;
    if v < 0 {
        return Err("limit must be non-negative".into());
    }
    Ok(v as usize)
}

// ---- civil time (proleptic Gregorian, UTC), enough for RFC 3339 in both directions ----

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Formats like Go's `time.Time.Format(time.RFC3339Nano)` in UTC (trailing zeros of the fraction dropped).
pub fn format_rfc3339_nano(secs: i64, nanos: u32) -> String {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    let mut s = if (0..=9999).contains(&y) {
        format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}", sod / 3600, sod % 3600 / 60, sod % 60)
    } else {
        format!("{y}-{m:02}-{d:02}T{:02}:{:02}:{:02}", sod / 3600, sod % 3600 / 60, sod % 60)
    };
    if nanos > 0 {
        let frac = format!("{nanos:09}");
        s.push('.');
        s.push_str(frac.trim_end_matches('0'));
    }
    s.push('Z');
    s
}

/// Formats unix milliseconds as RFC 3339 with nanosecond precision (Go's JSON encoding of `time.Time`).
pub fn format_rfc3339_ms(ms: i64) -> String {
    format_rfc3339_nano(ms.div_euclid(1000), (ms.rem_euclid(1000) * 1_000_000) as u32)
}

/// Parses RFC 3339 (`2006-01-02T15:04:05.999999999Z07:00`, 4-digit years as Go requires) to ms.
fn parse_rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        if t.bytes().all(|c| c.is_ascii_digit()) { t.parse().ok() } else { None }
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    if b[4] != b'-' || b[7] != b'-' || !(b[10] == b'T' || b[10] == b't') || b[13] != b':' || b[16] != b':' {
        return None;
    }
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || d < 1 || d > days_in_month(y, mo) || h > 23 || mi > 59 || se > 59 {
        return None;
    }
    let mut i = 19;
    let mut nanos: i64 = 0;
    if b[i] == b'.' || b[i] == b',' {
        i += 1;
        let st = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == st || i - st > 9 {
            return None;
        }
        let digits = &s[st..i];
        nanos = digits.parse::<i64>().ok()? * 10i64.pow(9 - (i - st) as u32);
    }
    let offset_s = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        c @ (b'+' | b'-') if i + 6 == b.len() && b[i + 3] == b':' => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            if oh > 23 || om > 59 {
                return None;
            }
            let o = oh * 3600 + om * 60;
            if *c == b'-' { -o } else { o }
        }
        _ => return None,
    };
    let secs = days_from_civil(y, mo, d) * 86_400 + h * 3600 + mi * 60 + se - offset_s;
    Some(secs * 1000 + nanos / 1_000_000)
}

fn days_in_month(y: i64, m: i64) -> i64 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_follow_go_form_order() {
        let p = Params::parse(Some(b"match%5B%5D=a&start=1"), Some("match[]=b&start=2&x=%7Bq%7D"));
        assert_eq!(p.all("match[]"), ["a", "b"]);
        assert_eq!(p.get("start"), "1");
        assert_eq!(p.get("x"), "{q}");
        assert_eq!(p.get("missing"), "");
    }

    #[test]
    fn parse_time_accepts_floats_and_rfc3339() {
        assert_eq!(parse_time("1700000000").expect("int"), 1_700_000_000_000);
        assert_eq!(parse_time("1700000000.123").expect("float"), 1_700_000_000_123);
        assert_eq!(parse_time("1.0006").expect("round"), 1001);
        assert_eq!(parse_time("-1.5").expect("neg"), -1500);
        assert_eq!(parse_time("2015-07-01T20:10:51.781Z").expect("rfc"), 1_435_781_451_781);
        assert_eq!(parse_time("2015-07-01T22:10:51+02:00").expect("offset"), 1_435_781_451_000);
        assert_eq!(parse_time("1970-01-01T00:00:00Z").expect("epoch"), 0);
        assert!(parse_time("yesterday").is_err());
        assert_eq!(parse_time("2015-02-30T00:00:00Z").expect_err("must fail"), "cannot parse \"2015-02-30T00:00:00Z\" to a valid timestamp");
    }

    #[test]
    fn min_and_max_time_round_trip_through_their_go_spelling() {
        let min = format_rfc3339_nano(MIN_TIME_MS / 1000, 0);
        let max = format_rfc3339_nano(MAX_TIME_MS / 1000, 999_999_999);
        // The strings Go prints for MinTime/MaxTime (client_golang sends them).
        assert_eq!(min, "-292273086-05-16T16:47:06Z");
        assert_eq!(max, "292277025-08-18T07:12:54.999999999Z");
        assert_eq!(parse_time(&min).expect("min"), MIN_TIME_MS);
        assert_eq!(parse_time(&max).expect("max"), MAX_TIME_MS);
    }

    #[test]
    fn civil_round_trip() {
        for days in [-800_000i64, -1, 0, 1, 59, 365, 10_957, 19_000, 2_932_896] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
        assert_eq!(format_rfc3339_ms(1_435_781_451_781), "2015-07-01T20:10:51.781Z");
    }

    #[test]
    fn durations_like_model_parse_duration() {
        assert_eq!(parse_duration_ms("15d").expect("d"), 15 * 86_400_000);
        assert_eq!(parse_duration_ms("2h30m").expect("hm"), 9_000_000);
        assert_eq!(parse_duration_ms("1y").expect("y"), 365 * 86_400_000);
        assert_eq!(parse_duration_ms("500ms").expect("ms"), 500);
        assert_eq!(parse_duration_ms("0").expect("0"), 0);
        assert!(parse_duration_ms("30m2h").is_err(), "units must shrink");
        assert!(parse_duration_ms("5").is_err());
        assert!(parse_duration_ms("-5m").is_err());
        assert_eq!(parse_duration_ms("5x").expect_err("must fail"), "unknown unit \"x\" in duration \"5x\"");
        assert_eq!(parse_api_duration_ms("1.5").expect("float"), 1500);
        assert_eq!(parse_api_duration_ms("5m").expect("dur"), 300_000);
        assert_eq!(format_duration_ms(15 * 86_400_000), "15d");
        assert_eq!(format_duration_ms(14 * 86_400_000), "2w");
        assert_eq!(format_duration_ms(300_000), "5m");
        assert_eq!(format_duration_ms(0), "0s");
    }

    #[test]
    fn byte_sizes_are_base_2() {
        assert_eq!(parse_bytes("512MB").expect("mb"), 512 << 20);
        assert_eq!(parse_bytes("10GB").expect("gb"), 10 << 30);
        assert_eq!(parse_bytes("1KiB").expect("kib"), 1024);
        assert_eq!(parse_bytes("100").expect("b"), 100);
        assert!(parse_bytes("MB").is_err());
        assert!(parse_bytes("5XB").is_err());
    }

    #[test]
    fn limits() {
        assert_eq!(parse_limit("").expect("empty"), 0);
        assert_eq!(parse_limit("7").expect("7"), 7);
        assert_eq!(parse_limit("-1").expect_err("must fail"), "limit must be non-negative");
        assert_eq!(parse_limit("x").expect_err("must fail"), "strconv.Atoi: parsing \"x\": invalid syntax");
    }

    proptest::proptest! {
        #[test]
        fn parse_time_never_panics(s in ".{0,40}") {
            let _ = parse_time(&s);
            let _ = parse_api_duration_ms(&s);
            let _ = parse_bytes(&s);
        }
    }
}
