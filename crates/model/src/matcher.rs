//! Label matchers with Prometheus' semantics.
//!
//! - Regexes are fully anchored: `=~"foo"` means `^(?s:foo)$` (Prometheus' `labels.NewFastRegexMatcher`).
//! - A missing label has the value "": `{a=""}` matches series without `a`, `{a!=""}` those that have it.
//! - [`Matcher::set_matches`] and [`Matcher::literal_prefix`] expose what a regex reduces to (a finite set of
//!   strings such as `a|b|c`, or a literal prefix such as `foo.*`), so an index can answer it with
//!   look-ups or a range of its sorted values instead of a scan of every value.

use regex::Regex;
use regex_syntax::hir::{Class, Hir, HirKind};
use std::fmt;

/// The four matcher kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MatchOp {
    Equal,
    NotEqual,
    Regex,
    NotRegex,
}

impl MatchOp {
    pub fn as_str(self) -> &'static str {
        match self {
            MatchOp::Equal => "=",
            MatchOp::NotEqual => "!=",
            MatchOp::Regex => "=~",
            MatchOp::NotRegex => "!~",
        }
    }

    pub fn is_negative(self) -> bool {
        matches!(self, MatchOp::NotEqual | MatchOp::NotRegex)
    }
}

/// A matcher could not be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MatcherError {
    #[error("invalid regular expression {pattern:?}: {reason}")]
    InvalidRegex { pattern: String, reason: String },
}

/// Go's RE2 syntax as the regex crate's: braces that start no repetition become literals
/// ([`go_literal_braces`]), and capture group names that begin with a digit (`(?P<1>…)`, which Go
/// accepts and the regex crate does not) are renamed `_go_<name>`. Returns the pattern and the renamed
/// groups' original names; a group keeps its index, so `$1` in a `label_replace` replacement still
/// refers to it.
pub fn go_regex_to_rust(v: &str) -> (std::borrow::Cow<'_, str>, Vec<String>) {
    let braces = go_literal_braces(v);
    if !braces.contains("(?P<") && !braces.contains("(?<") {
        return (braces, Vec::new());
    }
    let mut out = String::with_capacity(braces.len() + 8);
    let mut renamed = Vec::new();
    let b = braces.as_ref();
    let mut i = 0;
    let mut in_class = false;
    while i < b.len() {
        let rest = &b[i..];
        let c = rest.chars().next().unwrap_or('\0');
        if c == '\\' {
            let n = rest.chars().nth(1).map_or(0, char::len_utf8);
            out.push_str(&rest[..1 + n]);
            i += 1 + n;
            continue;
        }
        if c == '[' && !in_class {
            // A class: `]` right after `[` or `[^` is a literal, as in Go; copy the opening through it.
            in_class = true;
            let mut j = 1;
            if rest[j..].starts_with('^') {
                j += 1;
            }
            if rest[j..].starts_with(']') {
                j += 1;
            }
            out.push_str(&rest[..j]);
            i += j;
            continue;
        }
        if in_class && rest.starts_with("[:") {
            // A POSIX class (`[:alpha:]`) inside a class: its `]` does not end the outer one.
            let end = rest.find(":]").map_or(2, |e| e + 2);
            out.push_str(&rest[..end]);
            i += end;
            continue;
        }
        if c == ']' {
            in_class = false;
        }
        let open = if in_class { None } else { ["(?P<", "(?<"].into_iter().find(|o| rest.starts_with(o)) };
        if let Some(o) = open {
            let name_end = rest[o.len()..].find('>').map(|e| o.len() + e);
            if let Some(e) = name_end {
                let name = &rest[o.len()..e];
                if name.starts_with(|ch: char| ch.is_ascii_digit()) && name.bytes().all(|ch| ch.is_ascii_alphanumeric() || ch == b'_') {
                    out.push_str(&format!("(?P<_go_{name}>"));
                    renamed.push(name.to_string());
                    i += e + 1;
                    continue;
                }
            }
        }
        out.push(c);
        i += c.len_utf8();
    }
    (std::borrow::Cow::Owned(out), renamed)
}

/// Go's RE2 syntax treats a `{` that does not start a valid repetition (`{n}`, `{n,}`, `{n,m}`) as a
/// literal character (`=~"{foo}"`, `=~"a{,2}"`), where the regex crate reports an error; escape such
/// braces so both accept and match the same strings. Escapes and character classes are left alone.
fn go_literal_braces(v: &str) -> std::borrow::Cow<'_, str> {
    fn is_repeat(rest: &str) -> bool {
        // rest starts just after '{'.
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return false;
        }
        let rest = &rest[digits..];
        if rest.starts_with('}') {
            return true;
        }
        let Some(rest) = rest.strip_prefix(',') else { return false };
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        rest[digits..].starts_with('}')
    }
    if !v.contains('{') {
        return std::borrow::Cow::Borrowed(v);
    }
    let mut out = String::with_capacity(v.len() + 4);
    let mut chars = v.char_indices().peekable();
    let mut in_class = false;
    let mut class_start = false;
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                out.push(c);
                if let Some((_, n)) = chars.next() {
                    out.push(n);
                }
                class_start = false;
                continue;
            }
            '[' if !in_class => {
                in_class = true;
                class_start = true;
                out.push(c);
                if let Some(&(_, '^')) = chars.peek() {
                    out.push('^');
                    chars.next();
                }
                continue;
            }
            ']' if in_class && !class_start => in_class = false,
            '{' if !in_class && !is_repeat(&v[i + 1..]) => {
                out.push_str("\\{");
                class_start = false;
                continue;
            }
            _ => {}
        }
        class_start = false;
        out.push(c);
    }
    std::borrow::Cow::Owned(out)
}

/// The largest literal set a regex is expanded into; beyond it the regex is evaluated per value.
const MAX_SET_MATCHES: usize = 256;

/// One `name op "value"` condition on a series' labels.
#[derive(Clone)]
pub struct Matcher {
    pub name: String,
    pub op: MatchOp,
    pub value: String,
    re: Option<Regex>,
    /// For regex matchers whose language is a finite set of strings: that set, sorted and deduplicated.
    set: Option<Vec<String>>,
    /// For regex matchers of the form `literal.*`: the literal (then the matcher is exactly a prefix test).
    prefix_all: Option<String>,
    /// A literal every matching value starts with (a pre-filter; the regex still decides).
    prefix: Option<String>,
    /// `.*`: matches every value, the empty one included.
    match_all: bool,
}

impl fmt::Debug for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self}")
    }
}

impl PartialEq for Matcher {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name && self.op == other.op && self.value == other.value
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}{}", self.name, self.op.as_str(), crate::labels::go_quote(&self.value))
    }
}

impl Matcher {
    pub fn new(op: MatchOp, name: impl Into<String>, value: impl Into<String>) -> Result<Self, MatcherError> {
        let name = name.into();
        let value = value.into();
        let mut m = Matcher { name, op, value, re: None, set: None, prefix_all: None, prefix: None, match_all: false };
        if matches!(op, MatchOp::Regex | MatchOp::NotRegex) {
            // Validate the value on its own first (as upstream does): inside the `^(?s:...)$` wrapper an
            // unbalanced `)` could close the wrapper's group and silently un-anchor the regex (`a)|(b`).
            let (pattern, _) = go_regex_to_rust(&m.value);
            let parsed = regex_syntax::ParserBuilder::new().dot_matches_new_line(true).build().parse(&pattern);
            if let Err(e) = &parsed {
                return Err(MatcherError::InvalidRegex { pattern: m.value.clone(), reason: e.to_string() });
            }
            let anchored = format!("^(?s:{pattern})$");
            let re = Regex::new(&anchored).map_err(|e| MatcherError::InvalidRegex {
                pattern: m.value.clone(),
                reason: e.to_string(),
            })?;
            if let Ok(hir) = parsed {
                m.match_all = is_any_repeat(&hir, 0);
                m.set = finite_strings(&hir, MAX_SET_MATCHES).map(|mut v| {
                    v.sort();
                    v.dedup();
                    v
                });
                let (prefix, rest_all) = literal_prefix(&hir);
                if !prefix.is_empty() {
                    if rest_all {
                        m.prefix_all = Some(prefix.clone());
                    }
                    m.prefix = Some(prefix);
                }
            }
            m.re = Some(re);
        }
        Ok(m)
    }

    /// `name="value"`; never fails.
    pub fn equal(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self::new(MatchOp::Equal, name, value).expect("equality matchers cannot fail")
    }

    pub fn not_equal(name: impl Into<String>, value: impl Into<String>) -> Self {
        Self::new(MatchOp::NotEqual, name, value).expect("inequality matchers cannot fail")
    }

    /// Does a label value (the empty string for a missing label) satisfy this matcher?
    #[inline]
    pub fn matches(&self, v: &str) -> bool {
        match self.op {
            MatchOp::Equal => self.value == v,
            MatchOp::NotEqual => self.value != v,
            MatchOp::Regex => self.regex_matches(v),
            MatchOp::NotRegex => !self.regex_matches(v),
        }
    }

    fn regex_matches(&self, v: &str) -> bool {
        if self.match_all {
            return true;
        }
        if let Some(set) = &self.set {
            return set.binary_search_by(|s| s.as_str().cmp(v)).is_ok();
        }
        if let Some(p) = &self.prefix_all {
            return v.starts_with(p.as_str());
        }
        if let Some(p) = &self.prefix
            && !v.starts_with(p.as_str())
        {
            return false;
        }
        self.re.as_ref().is_some_and(|re| re.is_match(v))
    }

    /// Does this matcher match the empty string, i.e. series that lack the label?
    pub fn matches_empty(&self) -> bool {
        self.matches("")
    }

    /// The exact set of values a positive matcher accepts, when it is finite and small: `=` gives its
    /// value, `=~"a|b|c"` gives `[a, b, c]`. For negative matchers, the set of values they *reject*.
    pub fn set_matches(&self) -> Option<Vec<String>> {
        match self.op {
            MatchOp::Equal | MatchOp::NotEqual => Some(vec![self.value.clone()]),
            MatchOp::Regex | MatchOp::NotRegex => self.set.clone(),
        }
    }

    /// A literal that every value accepted by a positive regex matcher starts with, if any.
    pub fn literal_prefix(&self) -> Option<&str> {
        match self.op {
            MatchOp::Regex => self.prefix.as_deref(),
            MatchOp::Equal => Some(&self.value),
            _ => None,
        }
    }

    /// `=~".*"` (or `!~".*"`): the regex accepts every value.
    pub fn is_match_all_regex(&self) -> bool {
        self.match_all
    }
}

/// True if `hir` is `.{min,}` over any character (with `(?s)`), e.g. `.*` for min 0, `.+` for min 1.
fn is_any_repeat(hir: &Hir, min: u32) -> bool {
    match hir.kind() {
        HirKind::Repetition(r) => r.min == min && r.max.is_none() && is_any_char(&r.sub),
        HirKind::Capture(c) => is_any_repeat(&c.sub, min),
        _ => false,
    }
}

fn is_any_char(hir: &Hir) -> bool {
    match hir.kind() {
        HirKind::Class(Class::Unicode(c)) => {
            let r = c.ranges();
            r.len() == 1 && r[0].start() == '\0' && r[0].end() == char::MAX
        }
        HirKind::Class(Class::Bytes(c)) => {
            let r = c.ranges();
            r.len() == 1 && r[0].start() == 0 && r[0].end() == 255
        }
        _ => false,
    }
}

/// The finite language of `hir` if it has at most `limit` strings (literals, small classes, alternations,
/// concatenations, bounded repetitions), else `None`.
fn finite_strings(hir: &Hir, limit: usize) -> Option<Vec<String>> {
    match hir.kind() {
        HirKind::Empty => Some(vec![String::new()]),
        HirKind::Literal(l) => Some(vec![String::from_utf8(l.0.to_vec()).ok()?]),
        HirKind::Class(Class::Unicode(c)) => {
            let mut out = Vec::new();
            for r in c.ranges() {
                let (s, e) = (r.start() as u32, r.end() as u32);
                if (e - s) as usize + out.len() >= limit {
                    return None;
                }
                for cp in s..=e {
                    out.push(char::from_u32(cp)?.to_string());
                }
            }
            Some(out)
        }
        HirKind::Class(Class::Bytes(_)) | HirKind::Look(_) => None,
        HirKind::Capture(c) => finite_strings(&c.sub, limit),
        HirKind::Alternation(alts) => {
            let mut out = Vec::new();
            for a in alts {
                out.extend(finite_strings(a, limit)?);
                if out.len() > limit {
                    return None;
                }
            }
            Some(out)
        }
        HirKind::Concat(parts) => {
            let mut acc = vec![String::new()];
            for p in parts {
                let next = finite_strings(p, limit)?;
                if acc.len() * next.len() > limit {
                    return None;
                }
                acc = acc.iter().flat_map(|a| next.iter().map(move |n| format!("{a}{n}"))).collect();
            }
            Some(acc)
        }
        HirKind::Repetition(r) => {
            let max = r.max?;
            if max > 8 {
                return None;
            }
            let sub = finite_strings(&r.sub, limit)?;
            let mut out = Vec::new();
            let mut cur = vec![String::new()];
            for n in 0..=max {
                if n >= r.min {
                    out.extend(cur.iter().cloned());
                }
                if n < max {
                    if cur.len() * sub.len() > limit {
                        return None;
                    }
                    cur = cur.iter().flat_map(|a| sub.iter().map(move |s| format!("{a}{s}"))).collect();
                }
                if out.len() > limit {
                    return None;
                }
            }
            Some(out)
        }
    }
}

/// The literal every match of `hir` starts with, and whether the rest is exactly `.*`.
fn literal_prefix(hir: &Hir) -> (String, bool) {
    match hir.kind() {
        HirKind::Literal(l) => (String::from_utf8_lossy(&l.0).into_owned(), false),
        HirKind::Capture(c) => literal_prefix(&c.sub),
        HirKind::Concat(parts) => {
            let mut prefix = String::new();
            for (i, p) in parts.iter().enumerate() {
                match p.kind() {
                    HirKind::Literal(l) => match std::str::from_utf8(&l.0) {
                        Ok(s) => prefix.push_str(s),
                        Err(_) => return (prefix, false),
                    },
                    _ => {
                        let rest_all = i == parts.len() - 1 && is_any_repeat(p, 0);
                        return (prefix, rest_all);
                    }
                }
            }
            (prefix, false)
        }
        _ => (String::new(), false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn re(v: &str) -> Matcher {
        Matcher::new(MatchOp::Regex, "a", v).expect("valid")
    }

    #[test]
    fn regexes_are_fully_anchored() {
        let m = re("foo");
        assert!(m.matches("foo"));
        assert!(!m.matches("xfoo"));
        assert!(!m.matches("foox"));
        assert!(re("f.o").matches("f\no"), "(?s): dot matches newline");
    }

    #[test]
    fn empty_value_semantics() {
        assert!(Matcher::equal("a", "").matches_empty());
        assert!(!Matcher::not_equal("a", "").matches_empty());
        assert!(re(".*").matches_empty());
        assert!(!re(".+").matches_empty());
        assert!(re("foo|").matches_empty());
    }

    #[test]
    fn literal_alternations_become_sets() {
        assert_eq!(re("a|b|c").set_matches(), Some(vec!["a".into(), "b".into(), "c".into()]));
        assert_eq!(re("foo|foobar").set_matches(), Some(vec!["foo".into(), "foobar".into()]));
        assert_eq!(re("(?:api|web)-[12]").set_matches().map(|v| v.len()), Some(4));
        assert_eq!(re("foo.*").set_matches(), None);
        assert_eq!(re("x+").set_matches(), None);
        let m = re("(?i)ab");
        assert_eq!(m.set_matches().map(|v| v.len()), Some(4));
        assert!(m.matches("Ab") && !m.matches("abc"));
    }

    #[test]
    fn prefixes_are_found() {
        let m = re("foo.*");
        assert_eq!(m.literal_prefix(), Some("foo"));
        assert!(m.matches("foo") && m.matches("foobar") && !m.matches("fo"));
        let m = re("foo.+bar");
        assert_eq!(m.literal_prefix(), Some("foo"));
        assert!(m.matches("fooxbar") && !m.matches("foobar") && !m.matches("xfooxbar"));
        assert!(re(".*").is_match_all_regex());
    }

    #[test]
    fn braces_that_start_no_repetition_are_literals_as_in_go() {
        let m = re("{foo}");
        assert!(m.matches("{foo}") && !m.matches("foo"));
        assert!(re("a{,2}").matches("a{,2}"));
        assert!(re("x{2}").matches("xx"));
        assert!(re("[{]").matches("{"));
        assert!(re("\\{").matches("{"));
        assert!(re("a{2,}").matches("aaa"));
    }

    #[test]
    fn unbalanced_parens_cannot_escape_the_anchoring() {
        // Wrapped as ^(?s:a)|(b)$ this would compile and match "xb"; the value alone is invalid.
        assert!(Matcher::new(MatchOp::Regex, "a", "a)|(b").is_err());
        assert!(Matcher::new(MatchOp::NotRegex, "a", "exp_)oot_log(_hr?").is_err());
    }

    /// Go accepts capture names that start with a digit; so do we (renamed for the regex crate).
    #[test]
    fn digit_group_names_as_in_go() {
        assert!(re("(?P<1>a)b").matches("ab"));
        assert!(re("(?<2x>a|c)[(?P<3>]").matches("c("));
        assert_eq!(go_regex_to_rust("(?P<1>.*)").0, "(?P<_go_1>.*)");
        assert_eq!(go_regex_to_rust("\\(?P<1>.*)").0, "\\(?P<1>.*)", "an escaped parenthesis opens no group");
        assert_eq!(go_regex_to_rust("[(?P<1>]").0, "[(?P<1>]");
        assert_eq!(go_regex_to_rust("(?P<name>x)").0, "(?P<name>x)");
        // `]` first in a class is a literal in Go: the class goes on (found by review).
        assert_eq!(go_regex_to_rust("[](?P<1>]").0, "[](?P<1>]");
        assert_eq!(go_regex_to_rust("[^](?P<1>]").0, "[^](?P<1>]");
        assert_eq!(go_regex_to_rust("[[:alpha:](?P<1>]x").0, "[[:alpha:](?P<1>]x");
        assert_eq!(go_regex_to_rust("[a](?P<1>b)").0, "[a](?P<_go_1>b)");
    }

    #[test]
    fn invalid_regex_is_an_error() {
        assert!(Matcher::new(MatchOp::Regex, "a", "(").is_err());
    }

    #[test]
    fn negative_regex() {
        let m = Matcher::new(MatchOp::NotRegex, "a", "x|y").expect("valid");
        assert!(!m.matches("x") && m.matches("z") && m.matches(""));
    }

    proptest::proptest! {
        #[test]
        fn fast_paths_agree_with_the_regex(pat in "(a|b|ab|\\.\\*|\\.\\+|\\||\\(|\\)|\\?|c){1,8}", v in "[abc]{0,5}") {
            if let Ok(m) = Matcher::new(MatchOp::Regex, "x", pat.clone()) {
                let re = Regex::new(&format!("^(?s:{pat})$")).expect("compiled above");
                proptest::prop_assert_eq!(m.matches(&v), re.is_match(&v), "pattern {} value {}", pat, v);
            }
        }
    }
}
