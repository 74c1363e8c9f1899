//! The PromQL lexer, a state machine with the same states as Prometheus' `promql/parser/lex.go`
//! (statements, inside braces, inside a range/subquery bracket), so that it accepts and rejects exactly
//! the same inputs with the same messages. It turns the whole input into a token vector up front; a lexing
//! error becomes a final [`Kind::Error`] token, which the parser reports only if it reaches it (upstream
//! lexes lazily, so an earlier syntax error wins).

use std::borrow::Cow;

/// Token kinds (upstream `ItemType`), grouped as upstream groups them (operators, aggregators, keywords,
/// preprocessors) because error messages describe tokens by group.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    Eql,
    Colon,
    Comma,
    Duration,
    Eof,
    Error,
    Identifier,
    LeftBrace,
    LeftBracket,
    LeftParen,
    MetricIdentifier,
    Number,
    RightBrace,
    RightBracket,
    RightParen,
    String,
    // Operators.
    Add,
    Div,
    Eqlc,
    EqlRegex,
    Gte,
    Gtr,
    TrimUpper,
    TrimLower,
    Land,
    Lor,
    Lss,
    Lte,
    Lunless,
    Mod,
    Mul,
    Neq,
    NeqRegex,
    Pow,
    Sub,
    At,
    Atan2,
    // Aggregators.
    Avg,
    Bottomk,
    Count,
    CountValues,
    Group,
    Max,
    Min,
    Quantile,
    Stddev,
    Stdvar,
    Sum,
    Topk,
    Limitk,
    LimitRatio,
    // Keywords.
    Bool,
    By,
    GroupLeft,
    GroupRight,
    Fill,
    FillLeft,
    FillRight,
    Ignoring,
    Offset,
    Smoothed,
    Anchored,
    On,
    Without,
    // Preprocessors.
    Start,
    End,
    Step,
    Range,
    MaxOf,
    MinOf,
}

impl Kind {
    pub fn is_operator(self) -> bool {
        use Kind::*;
        matches!(
            self,
            Add | Div
                | Eqlc
                | EqlRegex
                | Gte
                | Gtr
                | TrimUpper
                | TrimLower
                | Land
                | Lor
                | Lss
                | Lte
                | Lunless
                | Mod
                | Mul
                | Neq
                | NeqRegex
                | Pow
                | Sub
                | At
                | Atan2
        )
    }

    pub fn is_aggregator(self) -> bool {
        use Kind::*;
        matches!(
            self,
            Avg | Bottomk | Count | CountValues | Group | Max | Min | Quantile | Stddev | Stdvar | Sum | Topk | Limitk | LimitRatio
        )
    }

    pub fn is_keyword(self) -> bool {
        use Kind::*;
        matches!(
            self,
            Bool | By | GroupLeft | GroupRight | Fill | FillLeft | FillRight | Ignoring | Offset | Smoothed | Anchored | On | Without
        )
    }

    /// Whether the token can name a metric (upstream grammar rule `metric_identifier`).
    pub fn is_metric_identifier(self) -> bool {
        use Kind::*;
        matches!(
            self,
            Avg | Bottomk
                | By
                | Count
                | CountValues
                | Fill
                | FillLeft
                | FillRight
                | Group
                | Identifier
                | Land
                | Lor
                | Lunless
                | Max
                | MetricIdentifier
                | Min
                | Offset
                | Quantile
                | Stddev
                | Stdvar
                | Sum
                | Topk
                | Without
                | Start
                | End
                | Limitk
                | LimitRatio
                | Step
                | Range
                | Anchored
                | Smoothed
                | MaxOf
                | MinOf
        )
    }

    /// Whether the token can be a label name in a grouping list (upstream rule `maybe_label`).
    pub fn is_maybe_label(self) -> bool {
        use Kind::*;
        self.is_metric_identifier() || matches!(self, Bool | GroupLeft | GroupRight | Ignoring | On | Atan2)
    }

    /// Whether upstream lists the kind in `ItemTypeStr` (then a token is described by its text).
    fn has_fixed_text(self) -> bool {
        use Kind::*;
        !matches!(self, Duration | Eof | Error | Identifier | MetricIdentifier | Number | String)
    }

    /// Upstream `ItemType.desc()` for kinds without fixed text.
    fn desc(self) -> &'static str {
        match self {
            Kind::Error => "error",
            Kind::Eof => "end of input",
            Kind::Identifier => "identifier",
            Kind::MetricIdentifier => "metric identifier",
            Kind::String => "string",
            Kind::Number => "number",
            Kind::Duration => "duration",
            _ => "token",
        }
    }
}

/// A token: kind, byte offset and the text it covers (for `Error`: the message).
#[derive(Debug, Clone, PartialEq)]
pub struct Token<'a> {
    pub kind: Kind,
    pub pos: usize,
    pub val: Cow<'a, str>,
}

impl Token<'_> {
    /// Upstream `Item.String()`.
    fn item_string(&self) -> String {
        match self.kind {
            Kind::Eof => "EOF".to_string(),
            Kind::Error => self.val.to_string(),
            Kind::Identifier | Kind::MetricIdentifier => go_quote_str(&self.val),
            k if k.is_keyword() => format!("<{}>", self.val),
            k if k.is_operator() => format!("<op:{}>", self.val),
            k if k.is_aggregator() => format!("<aggr:{}>", self.val),
            _ => {
                if self.val.chars().count() > 10 {
                    // Go's %.10q quotes the first 10 runes.
                    let short: String = self.val.chars().take(10).collect();
                    format!("{}...", go_quote_str(&short))
                } else {
                    go_quote_str(&self.val)
                }
            }
        }
    }

    /// Upstream `Item.desc()`: how "unexpected X" messages name a token.
    pub fn desc(&self) -> String {
        if self.kind.has_fixed_text() {
            return self.item_string();
        }
        if self.kind == Kind::Eof {
            return self.kind.desc().to_string();
        }
        format!("{} {}", self.kind.desc(), self.item_string())
    }

    pub fn end(&self) -> usize {
        self.pos + self.val.len()
    }
}

/// Go's `%q` for a string (printable Unicode kept, the rest escaped): `tessera_model::labels::go_quote`,
/// except that U+FFFD, which stands for bytes that were not valid UTF-8 (see `unquote`), is printed escaped:
/// Go's lexer rejects a literal U+FFFD, and the printed form must stay parseable.
pub(crate) fn go_quote_str(s: &str) -> String {
    let q = tessera_model::labels::go_quote(s);
    if q.contains('\u{FFFD}') { q.replace('\u{FFFD}', "\\ufffd") } else { q }
}

/// Go's `%q` for a rune (`'x'`).
fn go_quote_rune(r: Option<char>) -> String {
    match r {
        None => "'\\uffffffff'".to_string(), // Go prints eof (-1) like this.
        Some('\'') => "'\\''".to_string(),
        Some(c) => {
            let q = go_quote_str(&c.to_string());
            let inner = &q[1..q.len() - 1];
            let inner = if inner == "\\\"" { "\"" } else { inner };
            format!("'{inner}'")
        }
    }
}

/// Go's `%#U` (`U+0041 'A'`).
fn go_unicode(r: Option<char>) -> String {
    match r {
        None => "U+FFFFFFFFFFFFFFFF".to_string(),
        Some(c) => {
            if c.is_control() {
                format!("U+{:04X}", c as u32)
            } else {
                format!("U+{:04X} '{}'", c as u32, c)
            }
        }
    }
}

fn keyword(word_lower: &str) -> Option<Kind> {
    use Kind::*;
    Some(match word_lower {
        "and" => Land,
        "or" => Lor,
        "unless" => Lunless,
        "atan2" => Atan2,
        "sum" => Sum,
        "avg" => Avg,
        "count" => Count,
        "min" => Min,
        "max" => Max,
        "group" => Group,
        "stddev" => Stddev,
        "stdvar" => Stdvar,
        "topk" => Topk,
        "bottomk" => Bottomk,
        "count_values" => CountValues,
        "quantile" => Quantile,
        "limitk" => Limitk,
        "limit_ratio" => LimitRatio,
        "offset" => Offset,
        "smoothed" => Smoothed,
        "anchored" => Anchored,
        "by" => By,
        "without" => Without,
        "on" => On,
        "ignoring" => Ignoring,
        "group_left" => GroupLeft,
        "group_right" => GroupRight,
        "fill" => Fill,
        "fill_left" => FillLeft,
        "fill_right" => FillRight,
        "bool" => Bool,
        "start" => Start,
        "end" => End,
        "step" => Step,
        "range" => Range,
        "max_of" => MaxOf,
        "min_of" => MinOf,
        "inf" | "nan" => Number,
        _ => return None,
    })
}

fn duration_keyword(word_lower: &str) -> Option<Kind> {
    match word_lower {
        "step" => Some(Kind::Step),
        "range" => Some(Kind::Range),
        "max_of" => Some(Kind::MaxOf),
        "min_of" => Some(Kind::MinOf),
        _ => None,
    }
}

fn is_space(r: Option<char>) -> bool {
    matches!(r, Some(' ' | '\t' | '\n' | '\r'))
}
fn is_digit(r: Option<char>) -> bool {
    matches!(r, Some('0'..='9'))
}
fn is_alpha(r: Option<char>) -> bool {
    matches!(r, Some('_' | 'a'..='z' | 'A'..='Z'))
}
fn is_alnum(r: Option<char>) -> bool {
    is_alpha(r) || is_digit(r)
}
fn is_duration_keyword_start(r: Option<char>) -> bool {
    matches!(r.map(|c| c.to_ascii_lowercase()), Some('s' | 'r' | 'm'))
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Statements,
    InsideBraces,
    DurationExpr,
    Done,
}

struct Lexer<'a> {
    input: &'a str,
    pos: usize,
    start: usize,
    width: usize,
    paren_depth: i64,
    brace_open: bool,
    bracket_open: bool,
    got_colon: bool,
    got_duration: bool,
    string_open: char,
    out: Vec<Token<'a>>,
}

/// Lexes the whole input. The result always ends with an `Eof` or `Error` token. Comments are dropped.
pub fn lex(input: &str) -> Vec<Token<'_>> {
    let mut l = Lexer {
        input,
        pos: 0,
        start: 0,
        width: 0,
        paren_depth: 0,
        brace_open: false,
        bracket_open: false,
        got_colon: false,
        got_duration: false,
        string_open: '"',
        out: Vec::new(),
    };
    let mut state = State::Statements;
    while state != State::Done {
        state = match state {
            State::Statements => l.statements(),
            State::InsideBraces => l.inside_braces(),
            State::DurationExpr => l.duration_expr(),
            State::Done => State::Done,
        };
    }
    l.out
}

impl<'a> Lexer<'a> {
    fn next(&mut self) -> Option<char> {
        match self.input[self.pos..].chars().next() {
            None => {
                self.width = 0;
                None
            }
            Some(c) => {
                self.width = c.len_utf8();
                self.pos += self.width;
                Some(c)
            }
        }
    }
    fn peek(&self) -> Option<char> {
        self.input[self.pos..].chars().next()
    }
    fn backup(&mut self) {
        self.pos -= self.width;
        self.width = 0;
    }
    fn emit(&mut self, kind: Kind) {
        self.out.push(Token { kind, pos: self.start, val: Cow::Borrowed(&self.input[self.start..self.pos]) });
        self.start = self.pos;
    }
    fn ignore(&mut self) {
        self.start = self.pos;
    }
    fn accept(&mut self, valid: &str) -> bool {
        match self.next() {
            Some(c) if valid.contains(c) => true,
            _ => {
                self.backup();
                false
            }
        }
    }
    fn is(&self, valid: &str) -> bool {
        matches!(self.peek(), Some(c) if valid.contains(c))
    }
    fn accept_run(&mut self, valid: &str) {
        while self.accept(valid) {}
    }
    /// Upstream's `errorf` right after `emit` overwrites the emitted item: the error replaces the token
    /// and is positioned after it.
    fn error_after_emit(&mut self, msg: String) -> State {
        self.out.pop();
        self.errorf(msg)
    }

    fn errorf(&mut self, msg: String) -> State {
        self.out.push(Token { kind: Kind::Error, pos: self.start, val: Cow::Owned(msg) });
        State::Done
    }
    fn skip_spaces(&mut self) {
        while is_space(self.peek()) {
            self.next();
        }
        self.ignore();
    }

    /// Upstream `lexStatements`.
    fn statements(&mut self) -> State {
        if self.brace_open {
            return State::InsideBraces;
        }
        if self.input[self.pos..].starts_with('#') {
            self.line_comment();
            return State::Statements;
        }
        let r = self.next();
        match r {
            None => {
                if self.paren_depth != 0 {
                    return self.errorf("unclosed left parenthesis".into());
                } else if self.bracket_open {
                    return self.errorf("unclosed left bracket".into());
                }
                self.emit(Kind::Eof);
                return State::Done;
            }
            Some(',') => self.emit(Kind::Comma),
            r if is_space(r) => self.skip_spaces(),
            Some('*') => self.emit(Kind::Mul),
            Some('/') => self.emit(Kind::Div),
            Some('%') => self.emit(Kind::Mod),
            Some('+') => self.emit(Kind::Add),
            Some('-') => self.emit(Kind::Sub),
            Some('^') => self.emit(Kind::Pow),
            Some('=') => match self.peek() {
                Some('=') => {
                    self.next();
                    self.emit(Kind::Eqlc)
                }
                Some('~') => return self.errorf(format!("unexpected character after '=': {}", go_quote_rune(Some('~')))),
                _ => self.emit(Kind::Eql),
            },
            Some('!') => {
                let t = self.next();
                if t != Some('=') {
                    return self.errorf(format!("unexpected character after '!': {}", go_quote_rune(t)));
                }
                self.emit(Kind::Neq)
            }
            Some('<') => match self.peek() {
                Some('=') => {
                    self.next();
                    self.emit(Kind::Lte)
                }
                Some('/') => {
                    self.next();
                    self.emit(Kind::TrimUpper)
                }
                _ => self.emit(Kind::Lss),
            },
            Some('>') => match self.peek() {
                Some('=') => {
                    self.next();
                    self.emit(Kind::Gte)
                }
                Some('/') => {
                    self.next();
                    self.emit(Kind::TrimLower)
                }
                _ => self.emit(Kind::Gtr),
            },
            r if is_digit(r) || (r == Some('.') && is_digit(self.peek())) => {
                self.backup();
                return self.number_or_duration();
            }
            Some(q @ ('"' | '\'')) => {
                self.string_open = q;
                return self.string();
            }
            Some('`') => {
                self.string_open = '`';
                return self.raw_string();
            }
            r if is_alpha(r) || r == Some(':') => {
                if !self.bracket_open {
                    self.backup();
                    return self.keyword_or_identifier();
                }
                if r == Some(':') {
                    if self.got_colon {
                        return self.errorf(format!("unexpected colon {}", go_quote_rune(r)));
                    }
                    self.emit(Kind::Colon);
                    self.got_colon = true;
                    return State::Statements;
                }
                if is_duration_keyword_start(r) && self.scan_duration_keyword() {
                    return State::Statements;
                }
                return self.errorf(format!("unexpected character: {}, expected {}", go_quote_rune(r), go_quote_rune(Some(':'))));
            }
            Some('(') => {
                self.emit(Kind::LeftParen);
                self.paren_depth += 1;
            }
            Some(')') => {
                self.emit(Kind::RightParen);
                self.paren_depth -= 1;
                if self.paren_depth < 0 {
                    return self.error_after_emit(format!("unexpected right parenthesis {}", go_quote_rune(r)));
                }
            }
            Some('{') => {
                self.emit(Kind::LeftBrace);
                self.brace_open = true;
                return State::InsideBraces;
            }
            Some('[') => {
                if self.bracket_open {
                    return self.errorf(format!("unexpected left bracket {}", go_quote_rune(r)));
                }
                self.got_colon = false;
                self.emit(Kind::LeftBracket);
                if is_space(self.peek()) {
                    self.skip_spaces();
                }
                self.bracket_open = true;
                return State::DurationExpr;
            }
            Some(']') => {
                if !self.bracket_open {
                    return self.errorf(format!("unexpected right bracket {}", go_quote_rune(r)));
                }
                self.emit(Kind::RightBracket);
                self.bracket_open = false;
            }
            Some('@') => self.emit(Kind::At),
            r => return self.errorf(format!("unexpected character: {}", go_quote_rune(r))),
        }
        State::Statements
    }

    fn line_comment(&mut self) {
        self.pos += 1;
        loop {
            match self.next() {
                None | Some('\r' | '\n') => break,
                _ => {}
            }
        }
        self.backup();
        // Comments are dropped (the parser skips them upstream too).
        self.ignore();
    }

    /// Upstream `lexInsideBraces`.
    fn inside_braces(&mut self) -> State {
        if self.input[self.pos..].starts_with('#') {
            self.line_comment();
            return State::InsideBraces;
        }
        let r = self.next();
        match r {
            None => return self.errorf("unexpected end of input inside braces".into()),
            r if is_space(r) => self.skip_spaces(),
            r if is_alpha(r) => {
                self.backup();
                while is_alnum(self.next()) {}
                self.backup();
                self.emit(Kind::Identifier);
            }
            Some(',') => self.emit(Kind::Comma),
            Some(q @ ('"' | '\'')) => {
                self.string_open = q;
                let st = self.string();
                if st == State::Done {
                    return st;
                }
            }
            Some('`') => {
                self.string_open = '`';
                let st = self.raw_string();
                if st == State::Done {
                    return st;
                }
            }
            Some('=') => {
                if self.next() == Some('~') {
                    self.emit(Kind::EqlRegex);
                } else {
                    self.backup();
                    self.emit(Kind::Eql);
                }
            }
            Some('!') => match self.next() {
                Some('~') => self.emit(Kind::NeqRegex),
                Some('=') => self.emit(Kind::Neq),
                nr => return self.errorf(format!("unexpected character after '!' inside braces: {}", go_quote_rune(nr))),
            },
            Some('{') => return self.errorf(format!("unexpected left brace {}", go_quote_rune(r))),
            Some('}') => {
                self.emit(Kind::RightBrace);
                self.brace_open = false;
                return State::Statements;
            }
            r => return self.errorf(format!("unexpected character inside braces: {}", go_quote_rune(r))),
        }
        State::InsideBraces
    }

    /// Upstream `lexString`/`lexEscape`: validates escapes; the parser unquotes.
    fn string(&mut self) -> State {
        loop {
            match self.next() {
                Some('\\') => {
                    if let Some(msg) = self.escape() {
                        return self.errorf(msg);
                    }
                }
                Some('\u{FFFD}') => {
                    // Rust strings are valid UTF-8; U+FFFD stands in for Go's utf8.RuneError. A literal
                    // replacement character in the query is therefore rejected like an invalid byte.
                    return self.errorf("invalid UTF-8 rune".into());
                }
                None | Some('\n') => return self.errorf("unterminated quoted string".into()),
                Some(c) if c == self.string_open => break,
                _ => {}
            }
        }
        self.emit(Kind::String);
        if self.brace_open { State::InsideBraces } else { State::Statements }
    }

    fn escape(&mut self) -> Option<String> {
        let mut ch = self.next();
        let (mut n, base, max): (u32, u32, u32) = match ch {
            Some('a' | 'b' | 'f' | 'n' | 'r' | 't' | 'v' | '\\') => return None,
            Some(c) if c == self.string_open => return None,
            Some('0'..='7') => (3, 8, 255),
            Some('x') => {
                ch = self.next();
                (2, 16, 255)
            }
            Some('u') => {
                ch = self.next();
                (4, 16, 0x10FFFF)
            }
            Some('U') => {
                ch = self.next();
                (8, 16, 0x10FFFF)
            }
            None => return Some("escape sequence not terminated".into()),
            other => return Some(format!("unknown escape sequence {}", go_unicode(other))),
        };
        let mut x: u32 = 0;
        while n > 0 {
            let d = ch.and_then(|c| c.to_digit(16)).unwrap_or(16);
            if d >= base {
                if ch.is_none() {
                    return Some("escape sequence not terminated".into());
                }
                return Some(format!("illegal character {} in escape sequence", go_unicode(ch)));
            }
            x = x.wrapping_mul(base).wrapping_add(d);
            n -= 1;
            if n > 0 {
                ch = self.next();
            }
        }
        if x > max || (0xD800..0xE000).contains(&x) {
            return Some("escape sequence is an invalid Unicode code point".into());
        }
        None
    }

    fn raw_string(&mut self) -> State {
        loop {
            match self.next() {
                None => return self.errorf("unterminated raw string".into()),
                Some('`') => break,
                _ => {}
            }
        }
        self.emit(Kind::String);
        if self.brace_open { State::InsideBraces } else { State::Statements }
    }

    fn scan_duration_keyword(&mut self) -> bool {
        loop {
            let r = self.next();
            if !is_alpha(r) {
                self.backup();
                let word = self.input[self.start..self.pos].to_ascii_lowercase();
                if let Some(k) = duration_keyword(&word) {
                    self.emit(k);
                    return true;
                }
                return false;
            }
        }
    }

    /// Upstream `lexNumberOrDuration`.
    fn number_or_duration(&mut self) -> State {
        if self.scan_number() {
            self.emit(Kind::Number);
            return State::Statements;
        }
        if self.accept_remaining_duration() {
            self.backup();
            self.emit(Kind::Duration);
            return State::Statements;
        }
        let text = self.input[self.start..self.pos].to_string();
        self.errorf(format!("bad number or duration syntax: {}", go_quote_str(&text)))
    }

    fn accept_remaining_duration(&mut self) -> bool {
        if !self.accept("smhdwy") {
            return false;
        }
        self.accept("s");
        while self.accept("0123456789") {
            while self.accept("0123456789") {}
            if !self.accept("smhdw") {
                return false;
            }
            self.accept("s");
        }
        let r = self.next();
        if r.is_none() {
            // Upstream's backup after reading EOF is a no-op (width 0); keep that.
            self.width = 0;
        }
        !is_alnum(r)
    }

    /// Upstream `Lexer.scanNumber`.
    fn scan_number(&mut self) -> bool {
        let initial = self.pos;
        let mut digits = "0123456789";
        if self.accept("0") && self.accept("xX") {
            self.accept("_");
            digits = "0123456789abcdefABCDEF";
        }
        self.accept(".");
        self.accept(digits);
        let mut dot = false;
        let mut exp = false;
        let all = if digits.len() > 10 { "0123456789abcdefABCDEF._eE" } else { "0123456789._eE" };
        while self.is(all) {
            if self.is(".") && dot {
                self.accept(".");
                return false;
            }
            if self.is("eE") && exp {
                self.accept("eE");
                return false;
            }
            if self.accept(".") {
                dot = true;
                if self.accept("_.") {
                    return false;
                }
                if digits.len() > 10 {
                    return false;
                }
                continue;
            }
            if self.accept("eE") {
                exp = true;
                self.accept("+-");
                if self.accept("._eE") || self.peek().is_none() {
                    return false;
                }
                continue;
            }
            if self.accept("_") {
                if self.accept("._eE") || self.peek().is_none() {
                    return false;
                }
                continue;
            }
            self.accept_run(digits);
        }
        if self.pos == initial {
            return false;
        }
        !is_alnum(self.peek())
    }

    /// Upstream `lexKeywordOrIdentifier`.
    fn keyword_or_identifier(&mut self) -> State {
        loop {
            let r = self.next();
            if !(is_alnum(r) || r == Some(':')) {
                self.backup();
                break;
            }
        }
        let word = &self.input[self.start..self.pos];
        // Keywords are at most 12 bytes; longer words need no lower-casing.
        let kw = if word.len() <= 12 { keyword(&word.to_ascii_lowercase()) } else { None };
        match kw {
            Some(kw @ (Kind::Fill | Kind::FillLeft | Kind::FillRight)) => {
                // fill/fill_left/fill_right are keywords only before "(" so they stay usable as names.
                if self.input[self.pos..].trim_start_matches([' ', '\t', '\n', '\r']).starts_with('(') {
                    self.emit(kw)
                } else {
                    self.emit(Kind::Identifier)
                }
            }
            Some(kw) => self.emit(kw),
            None if !word.contains(':') => self.emit(Kind::Identifier),
            None => self.emit(Kind::MetricIdentifier),
        }
        State::Statements
    }

    /// Upstream `lexDurationExpr`: the state right after `[`, `:` and operators inside brackets.
    fn duration_expr(&mut self) -> State {
        let r = self.next();
        match r {
            None => self.errorf("unexpected end of input in duration expression".into()),
            Some(']') => {
                self.emit(Kind::RightBracket);
                self.bracket_open = false;
                self.got_colon = false;
                State::Statements
            }
            Some(':') => {
                self.emit(Kind::Colon);
                if !self.got_duration {
                    return self.error_after_emit("unexpected colon before duration in duration expression".into());
                }
                if self.got_colon {
                    return self.error_after_emit("unexpected repeated colon in duration expression".into());
                }
                self.got_colon = true;
                State::DurationExpr
            }
            Some('(') => {
                self.emit(Kind::LeftParen);
                self.paren_depth += 1;
                State::DurationExpr
            }
            Some(')') => {
                self.emit(Kind::RightParen);
                self.paren_depth -= 1;
                if self.paren_depth < 0 {
                    return self.error_after_emit(format!("unexpected right parenthesis {}", go_quote_rune(r)));
                }
                State::DurationExpr
            }
            r if is_space(r) => {
                self.skip_spaces();
                State::DurationExpr
            }
            Some(c @ ('+' | '-' | '*' | '/' | '%' | '^' | ',')) => {
                self.emit(match c {
                    '+' => Kind::Add,
                    '-' => Kind::Sub,
                    '*' => Kind::Mul,
                    '/' => Kind::Div,
                    '%' => Kind::Mod,
                    '^' => Kind::Pow,
                    _ => Kind::Comma,
                });
                State::DurationExpr
            }
            r if is_duration_keyword_start(r) => {
                if self.scan_duration_keyword() {
                    return State::DurationExpr;
                }
                self.errorf(format!("unexpected character in duration expression: {}", go_quote_rune(r)))
            }
            r if is_digit(r) || (r == Some('.') && is_digit(self.peek())) => {
                self.backup();
                self.got_duration = true;
                self.number_or_duration()
            }
            r => self.errorf(format!("unexpected character in duration expression: {}", go_quote_rune(r))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(s: &str) -> Vec<Kind> {
        lex(s).into_iter().map(|t| t.kind).collect()
    }

    #[test]
    fn lexes_common_tokens() {
        use Kind::*;
        assert_eq!(kinds("sum(rate(x[5m]))"), vec![Sum, LeftParen, Identifier, LeftParen, Identifier, LeftBracket, Duration, RightBracket, RightParen, RightParen, Eof]);
        assert_eq!(kinds("a:b{c=~\"d\"} offset -1h"), vec![MetricIdentifier, LeftBrace, Identifier, EqlRegex, String, RightBrace, Offset, Sub, Duration, Eof]);
        assert_eq!(kinds("x[step()*2:1m]"), vec![Identifier, LeftBracket, Step, LeftParen, RightParen, Mul, Number, Colon, Duration, RightBracket, Eof]);
        assert_eq!(kinds("0x1F 1e3 .5 Inf nan 1_000"), vec![Number, Number, Number, Number, Number, Number, Eof]);
        assert_eq!(kinds("fill_left + fill(1)"), vec![Identifier, Add, Fill, LeftParen, Number, RightParen, Eof]);
        assert_eq!(kinds("a # comment\n + b"), vec![Identifier, Add, Identifier, Eof]);
    }

    #[test]
    fn lexer_errors() {
        let last = |s: &str| lex(s).pop().map(|t| (t.kind, t.val.into_owned()));
        assert_eq!(last("\"abc"), Some((Kind::Error, "unterminated quoted string".into())));
        assert_eq!(last("a ! b"), Some((Kind::Error, "unexpected character after '!': ' '".into())));
        assert_eq!(last("(a"), Some((Kind::Error, "unclosed left parenthesis".into())));
        assert_eq!(last("a[5m"), Some((Kind::Error, "unclosed left bracket".into())));
        assert_eq!(last("a["), Some((Kind::Error, "unexpected end of input in duration expression".into())));
        assert_eq!(last("{a=\"\\z\"}"), Some((Kind::Error, "unknown escape sequence U+007A 'z'".into())));
        assert_eq!(last("1.5.5"), Some((Kind::Error, "bad number or duration syntax: \"1.5.\"".into())));
    }
}
