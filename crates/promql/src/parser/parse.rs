//! Recursive-descent parser producing [`Expr`], with Prometheus' error messages.
//!
//! Upstream uses a yacc grammar (`generated_parser.y`); we use precedence climbing with the same
//! precedences (`or` < `and`/`unless` < comparisons < `+ -` < `* / % atan2` < `^` (right-assoc);
//! unary `+ -` bind like `*` but their operand may contain `^`; `[..]`, `offset`, `@`, `anchored` and
//! `smoothed` bind tightest, to the preceding primary).
//!
//! Like upstream, parsing is two phases: the grammar phase builds the tree and reports syntax and
//! construction errors (e.g. "no offset modifiers allowed before range"), then, only if that succeeded,
//! [`check`] walks the tree for type errors (upstream `parser.checkAST`). Upstream reports the *first*
//! error it recorded; we stop at the first error, which yields the same message in the same order.
//! Positions for those messages come from a [`PosTree`] built alongside the AST, so the AST itself stays
//! free of position bookkeeping.

use std::fmt;

use tessera_model::{MatchOp, Matcher};

use super::ast::*;
use super::functions::get_function;
use super::lexer::{Kind, Token, go_quote_str, lex};

/// A parse error; `Display` is Prometheus' `<line>:<col>: parse error: <msg>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// Byte range of the offending input.
    pub pos: PosRange,
    /// The message without the position prefix.
    pub msg: String,
    /// `line:col` (1-based), or "unknown position" for an empty query (upstream `StartPosInput`).
    pub position: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: parse error: {}", self.position, self.msg)
    }
}

impl std::error::Error for ParseError {}

impl ParseError {
    fn new(input: &str, pos: PosRange, msg: impl Into<String>) -> Self {
        ParseError { pos, msg: msg.into(), position: start_pos_input(input, pos.start) }
    }
}

/// Upstream `PositionRange.StartPosInput`.
fn start_pos_input(query: &str, pos: usize) -> String {
    if query.is_empty() {
        return "unknown position".into();
    }
    if pos > query.len() {
        return "invalid position".into();
    }
    let mut line = 1;
    let mut last_break: isize = -1;
    for (i, b) in query.as_bytes()[..pos].iter().enumerate() {
        if *b == b'\n' {
            last_break = i as isize;
            line += 1;
        }
    }
    format!("{}:{}", line, pos as isize - last_break)
}

/// Positions of an expression and its children, in the child order of [`Expr::walk`]-like traversal:
/// Aggregate `[param?, expr]`... see [`PosTree::kid`] uses below.
#[derive(Debug, Clone, Default)]
pub(crate) struct PosTree {
    pub r: PosRange,
    /// Start of the operator token (binary expressions only).
    pub op: usize,
    pub kids: Vec<PosTree>,
}

impl PosTree {
    fn leaf(r: PosRange) -> Self {
        PosTree { r, op: 0, kids: Vec::new() }
    }
}

type PResult<T> = Result<T, ParseError>;

/// Which experimental parts of the language are accepted (upstream `parser.Options`). Prometheus
/// disables them by default; Tessera enables them all by default ([`ParseOptions::ALL`]), as the
/// conformance scripts assume.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Experimental functions and the `limitk`/`limit_ratio` aggregators (`promql-experimental-functions`).
    pub experimental_functions: bool,
    /// Duration expressions such as `[5m * 2]`, `offset step()` (`promql-duration-expr`).
    pub duration_expressions: bool,
    /// `anchored` and `smoothed` range modifiers (`promql-extended-range-selectors`).
    pub extended_range_selectors: bool,
    /// `fill`, `fill_left`, `fill_right` binary-operator modifiers (`promql-binop-fill-modifiers`).
    pub binop_fill_modifiers: bool,
}

impl ParseOptions {
    /// Everything enabled (Tessera's default).
    pub const ALL: ParseOptions = ParseOptions {
        experimental_functions: true,
        duration_expressions: true,
        extended_range_selectors: true,
        binop_fill_modifiers: true,
    };
    /// Nothing experimental (Prometheus' default).
    pub const NONE: ParseOptions = ParseOptions {
        experimental_functions: false,
        duration_expressions: false,
        extended_range_selectors: false,
        binop_fill_modifiers: false,
    };
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions::ALL
    }
}

/// Parses a PromQL expression (upstream `ParseExpr` with every experimental feature enabled:
/// experimental functions, duration expressions, extended range selectors, fill modifiers).
pub fn parse(input: &str) -> Result<Expr, ParseError> {
    parse_with_options(input, &ParseOptions::ALL)
}

/// [`parse`] with a choice of experimental features; a disabled one is rejected with upstream's message.
pub fn parse_with_options(input: &str, opts: &ParseOptions) -> Result<Expr, ParseError> {
    let mut p = Parser::new(input);
    p.opts = *opts;
    if p.peek().kind == Kind::Eof {
        return Err(ParseError::new(input, PosRange::default(), "no expression found in input"));
    }
    let (mut e, pt) = p.expr(0)?;
    p.expect_eof()?;
    check(input, &mut e, &pt)?;
    Ok(e)
}

/// Parses a series selector such as `up{job="x"}` or `{"my.metric"}` into its matchers (upstream
/// `ParseMetricSelector`, used for `match[]`). No type checks: an empty selector is the caller's concern.
pub fn parse_metric_selector(input: &str) -> Result<Vec<Matcher>, ParseError> {
    let mut p = Parser::new(input);
    let t = p.peek().clone();
    let vs = if t.kind.is_metric_identifier() || t.kind == Kind::LeftBrace {
        let (e, _) = p.vector_selector()?;
        match e {
            Expr::VectorSelector(vs) => vs,
            _ => return Err(p.unexpected("", "")),
        }
    } else {
        return Err(p.unexpected("", ""));
    };
    p.expect_eof()?;
    Ok(vs.matchers)
}

/// Parses a Prometheus duration (`1y2w3d4h5m6s7ms`, or `0`) into milliseconds (upstream
/// `model.ParseDuration`). The error text is upstream's.
pub fn parse_duration(s: &str) -> Result<i64, String> {
    parse_duration_ns(s).map(|ns| (ns / 1_000_000) as i64)
}

fn parse_duration_ns(s: &str) -> Result<u64, String> {
    match s {
        "0" => return Ok(0),
        "" => return Err("empty duration string".into()),
        _ => {}
    }
    let invalid = || format!("not a valid duration string: {}", go_quote_str(s));
    let b = s.as_bytes();
    let mut i = 0;
    let mut dur: u128 = 0;
    let mut last_unit = 0;
    while i < b.len() {
        if !b[i].is_ascii_digit() {
            return Err(invalid());
        }
        let ds = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let v: u64 = s[ds..i].parse().map_err(|_| invalid())?;
        let us = i;
        while i < b.len() && !b[i].is_ascii_digit() {
            i += 1;
        }
        if us == i {
            return Err(invalid());
        }
        let unit = &s[us..i];
        let (upos, mult): (u32, u64) = match unit {
            "ms" => (7, 1_000_000),
            "s" => (6, 1_000_000_000),
            "m" => (5, 60_000_000_000),
            "h" => (4, 3_600_000_000_000),
            "d" => (3, 86_400_000_000_000),
            "w" => (2, 604_800_000_000_000),
            "y" => (1, 31_536_000_000_000_000),
            _ => return Err(format!("unknown unit {} in duration {}", go_quote_str(unit), go_quote_str(s))),
        };
        if upos <= last_unit {
            return Err(invalid());
        }
        last_unit = upos;
        if v as u128 > (1u128 << 63) / mult as u128 {
            return Err("duration out of range".into());
        }
        dur += v as u128 * mult as u128;
        if dur > (1u128 << 63) - 1 {
            return Err("duration out of range".into());
        }
    }
    Ok(dur as u64)
}

/// Go's `strconv.ParseInt(s, 0, 64)` then `ParseFloat` (upstream `parser.number`).
fn parse_number(s: &str) -> Option<f64> {
    let lower = s.to_ascii_lowercase();
    match lower.as_str() {
        "inf" | "+inf" | "infinity" => return Some(f64::INFINITY),
        "nan" => return Some(f64::NAN),
        _ => {}
    }
    if s.contains('_') && !underscore_ok(s) {
        return None;
    }
    let clean: String = s.chars().filter(|&c| c != '_').collect();
    if let Some(hex) = clean.strip_prefix("0x").or_else(|| clean.strip_prefix("0X")) {
        return u64::from_str_radix(hex, 16).ok().map(|v| v as f64);
    }
    if clean.len() > 1
        && clean.starts_with('0')
        && clean.bytes().all(|c| c.is_ascii_digit())
        && let Ok(v) = i64::from_str_radix(&clean[1..], 8)
    {
        return Some(v as f64);
    }
    clean.parse::<f64>().ok()
}

/// Go's `strconv.underscoreOK`: underscores only between digits, or between a base prefix and a digit.
fn underscore_ok(s: &str) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let mut saw = b'^';
    let mut hex = false;
    if b.len() >= 2 && b[0] == b'0' && matches!(b[1].to_ascii_lowercase(), b'b' | b'o' | b'x') {
        i = 2;
        saw = b'0';
        hex = b[1].eq_ignore_ascii_case(&b'x');
    }
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_digit() || (hex && c.is_ascii_hexdigit()) {
            saw = b'0';
        } else if c == b'_' {
            if saw != b'0' {
                return false;
            }
            saw = b'_';
        } else {
            if saw == b'_' {
                return false;
            }
            saw = b'!';
        }
        i += 1;
    }
    saw != b'_'
}

/// Go's `strconv.Unquote`-like unquoting of a lexed string token (upstream `strutil.Unquote`). Bytes
/// that do not form valid UTF-8 (from `\x` or octal escapes) are replaced with U+FFFD.
fn unquote(s: &str) -> Result<String, String> {
    unquote_bytes(s).map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// [`unquote`] keeping the exact bytes, which Go strings may hold even when they are not UTF-8.
fn unquote_bytes(s: &str) -> Result<Vec<u8>, String> {
    let b = s.as_bytes();
    if b.len() < 2 {
        return Err("invalid syntax".into());
    }
    let q = b[0];
    if b[b.len() - 1] != q {
        return Err("invalid syntax".into());
    }
    let inner = &s[1..s.len() - 1];
    if q == b'`' {
        if inner.contains('`') {
            return Err("invalid syntax".into());
        }
        return Ok(inner.replace('\r', "").into_bytes());
    }
    if !inner.contains('\\') && !inner.contains(q as char) {
        return Ok(inner.as_bytes().to_vec());
    }
    let mut out: Vec<u8> = Vec::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == q as char {
            return Err("invalid syntax".into());
        }
        if c != '\\' {
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
            continue;
        }
        let e = chars.next().ok_or("invalid syntax")?;
        let simple = match e {
            'a' => Some(7u8),
            'b' => Some(8),
            'f' => Some(12),
            'n' => Some(b'\n'),
            'r' => Some(b'\r'),
            't' => Some(b'\t'),
            'v' => Some(11),
            '\\' => Some(b'\\'),
            '\'' | '"' => {
                if e as u32 != q as u32 {
                    return Err("invalid syntax".into());
                }
                Some(e as u8)
            }
            _ => None,
        };
        if let Some(v) = simple {
            out.push(v);
            continue;
        }
        let (n, radix, is_byte) = match e {
            '0'..='7' => (2, 8, true),
            'x' => (2, 16, true),
            'u' => (4, 16, false),
            'U' => (8, 16, false),
            _ => return Err("invalid syntax".into()),
        };
        let mut v: u32 = if e.is_digit(8) && radix == 8 { e.to_digit(8).unwrap_or(0) } else { 0 };
        for _ in 0..n {
            let d = chars.next().and_then(|c| c.to_digit(radix)).ok_or("invalid syntax")?;
            v = v * radix + d;
        }
        if is_byte {
            if v > 255 {
                return Err("invalid syntax".into());
            }
            out.push(v as u8);
        } else {
            let c = char::from_u32(v).ok_or("invalid syntax")?;
            let mut buf = [0u8; 4];
            out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
        }
    }
    Ok(out)
}

fn is_valid_label_name(s: &str) -> bool {
    // UTF-8 validation (upstream model.UTF8Validation): any non-empty valid UTF-8 string.
    !s.is_empty()
}

fn binary_op(k: Kind) -> Option<BinaryOp> {
    Some(match k {
        Kind::Add => BinaryOp::Add,
        Kind::Sub => BinaryOp::Sub,
        Kind::Mul => BinaryOp::Mul,
        Kind::Div => BinaryOp::Div,
        Kind::Mod => BinaryOp::Mod,
        Kind::Pow => BinaryOp::Pow,
        Kind::Atan2 => BinaryOp::Atan2,
        Kind::Eqlc => BinaryOp::Eql,
        Kind::Neq => BinaryOp::Neq,
        Kind::Gtr => BinaryOp::Gtr,
        Kind::Lss => BinaryOp::Lss,
        Kind::Gte => BinaryOp::Gte,
        Kind::Lte => BinaryOp::Lte,
        Kind::Land => BinaryOp::And,
        Kind::Lor => BinaryOp::Or,
        Kind::Lunless => BinaryOp::Unless,
        Kind::TrimUpper => BinaryOp::TrimUpper,
        Kind::TrimLower => BinaryOp::TrimLower,
        _ => return None,
    })
}

fn aggregate_op(k: Kind) -> Option<AggregateOp> {
    Some(match k {
        Kind::Sum => AggregateOp::Sum,
        Kind::Avg => AggregateOp::Avg,
        Kind::Count => AggregateOp::Count,
        Kind::Min => AggregateOp::Min,
        Kind::Max => AggregateOp::Max,
        Kind::Group => AggregateOp::Group,
        Kind::Stddev => AggregateOp::Stddev,
        Kind::Stdvar => AggregateOp::Stdvar,
        Kind::Topk => AggregateOp::Topk,
        Kind::Bottomk => AggregateOp::Bottomk,
        Kind::CountValues => AggregateOp::CountValues,
        Kind::Quantile => AggregateOp::Quantile,
        Kind::Limitk => AggregateOp::Limitk,
        Kind::LimitRatio => AggregateOp::LimitRatio,
        _ => return None,
    })
}

/// Upstream `durationLiteralOutOfRange`.
fn duration_out_of_range(secs: f64) -> bool {
    // 2^63 ns in seconds. Written as comparisons on purpose: NaN is not out of range upstream.
    const LIMIT: f64 = 9_223_372_036.854_775;
    #[allow(clippy::manual_range_contains)]
    let out = secs > LIMIT || secs < -LIMIT;
    out
}

/// Seconds to ms the way upstream does: `time.Duration(math.Round(secs*1e9))` truncated to ms.
fn secs_to_ms(secs: f64) -> i64 {
    let ns = (secs * 1e9).round();
    (ns / 1e6).trunc() as i64
}

/// Deepest nesting of expressions accepted. Upstream's yacc parser has an explicit stack and no limit;
/// ours recurses, and so do the checker, printer, evaluator and `Drop` over the tree it builds, so an
/// unbounded `((((...` or `a or a or …` from an HTTP client must become an error, not a stack
/// overflow. Every level counts: parentheses, calls, unary operators and each operator of a binary
/// chain, so a tree's height stays below twice this bound. Real queries nest a few dozen levels.
const MAX_DEPTH: usize = 400;

const RANGE_CTX: (&str, &str) = ("subquery or range selector", "number, duration, step(), or range()");
const STEP_CTX: (&str, &str) = ("subquery selector", "number, duration, step(), range(), or \"]\"");
const OFFSET_CTX: (&str, &str) = ("offset", "number, duration, step(), or range()");
const AT_CTX: (&str, &str) = ("@", "timestamp");

struct Parser<'a> {
    input: &'a str,
    toks: Vec<Token<'a>>,
    i: usize,
    depth: usize,
    /// Where a syntax error that no rule describes is reported (context, expected): the innermost
    /// construct that has an `error` production upstream (an aggregation body, an offset, a range or
    /// step, an `@`). yacc's error recovery pops its stack to that state, so its message names it.
    ctx: Vec<(&'static str, &'static str)>,
    opts: ParseOptions,
    /// How the next `duration_atom` reports a disabled duration expression: upstream checks signed
    /// offsets (`offset -step()`) at the sign and not at all for `offset -(..)`.
    atom_check: AtomCheck,
}

#[derive(Clone, Copy)]
enum AtomCheck {
    Own,
    At(PosRange),
    Skip,
}

impl<'a> Parser<'a> {
    fn new(input: &'a str) -> Self {
        Parser { input, toks: lex(input), i: 0, depth: 0, ctx: Vec::new(), opts: ParseOptions::ALL, atom_check: AtomCheck::Own }
    }

    fn peek(&self) -> &Token<'a> {
        // The token vector always ends in Eof or Error, and we never advance past it.
        &self.toks[self.i.min(self.toks.len() - 1)]
    }

    fn peek_kind_at(&self, n: usize) -> Kind {
        self.toks.get(self.i + n).map_or(Kind::Eof, |t| t.kind)
    }

    fn advance(&mut self) -> Token<'a> {
        let t = self.peek().clone();
        if self.i < self.toks.len() - 1 {
            self.i += 1;
        }
        t
    }

    fn err(&self, r: PosRange, msg: impl Into<String>) -> ParseError {
        ParseError::new(self.input, r, msg)
    }

    /// The error for the current token (upstream `parser.unexpected`); a lexer error token reports its
    /// own message, positioned from its start to the end of the input like upstream.
    fn unexpected(&self, context: &str, expected: &str) -> ParseError {
        let t = self.peek();
        if t.kind == Kind::Error {
            return self.err(PosRange { start: t.pos, end: self.input.len() }, t.val.to_string());
        }
        let (context, expected) = match self.ctx.last() {
            Some(&(c, e)) if context.is_empty() && expected.is_empty() => (c, e),
            _ => (context, expected),
        };
        let mut msg = format!("unexpected {}", t.desc());
        if !context.is_empty() {
            msg.push_str(" in ");
            msg.push_str(context);
        }
        if !expected.is_empty() {
            msg.push_str(", expected ");
            msg.push_str(expected);
        }
        self.err(PosRange { start: t.pos, end: t.end() }, msg)
    }

    fn expect(&mut self, kind: Kind, context: &str, expected: &str) -> PResult<Token<'a>> {
        if self.peek().kind == kind {
            Ok(self.advance())
        } else {
            Err(self.unexpected(context, expected))
        }
    }

    /// Runs `f` with a context for otherwise undescribed syntax errors (see `ctx`).
    fn with_ctx<T>(
        &mut self,
        ctx: (&'static str, &'static str),
        f: impl FnOnce(&mut Self) -> PResult<T>,
    ) -> PResult<T> {
        self.ctx.push(ctx);
        let r = f(self);
        self.ctx.pop();
        r
    }

    /// Whether the current token can begin an expression (FIRST(expr) of upstream's grammar).
    fn at_expr_start(&self) -> bool {
        let k = self.peek().kind;
        k.is_metric_identifier()
            || k.is_aggregator()
            || matches!(
                k,
                Kind::Number | Kind::Duration | Kind::String | Kind::LeftParen | Kind::LeftBrace | Kind::Add | Kind::Sub
            )
    }

    /// yacc records errors of a reduction only after reading the lookahead token, and reading it
    /// records a lexer error first; call this before such errors.
    fn lookahead_lex_error(&self) -> PResult<()> {
        if self.peek().kind == Kind::Error { Err(self.unexpected("", "")) } else { Ok(()) }
    }

    /// Upstream `experimentalDurationExpr`.
    fn experimental_duration(&self, r: PosRange) -> PResult<()> {
        if self.opts.duration_expressions {
            Ok(())
        } else {
            Err(self.err(r, "experimental duration expression is not enabled"))
        }
    }

    fn expect_eof(&mut self) -> PResult<()> {
        if self.peek().kind == Kind::Eof { Ok(()) } else { Err(self.unexpected("", "")) }
    }

    fn enter(&mut self) -> PResult<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            let t = self.peek();
            return Err(self.err(PosRange { start: t.pos, end: t.end() }, "expression nesting too deep"));
        }
        Ok(())
    }

    /// Binary expressions with operators of at least `min_prec` (precedence climbing).
    fn expr(&mut self, min_prec: u8) -> PResult<(Expr, PosTree)> {
        let d0 = self.depth;
        self.enter()?;
        let r = self.expr_inner(min_prec);
        self.depth = d0;
        r
    }

    fn expr_inner(&mut self, min_prec: u8) -> PResult<(Expr, PosTree)> {
        let (mut lhs, mut lpt) = self.unary()?;
        while let Some(op) = binary_op(self.peek().kind) {
            let prec = op.precedence();
            if prec < min_prec {
                break;
            }
            // Each operator of a chain (`a or b or c …`) is one more level of the tree that every
            // later pass (checker, printer, evaluator, drop) recurses through, although the loop
            // here does not: it counts toward the nesting bound too. `expr` restores the depth.
            self.enter()?;
            let op_tok = self.advance();
            let (matching, return_bool) = self.bin_modifiers()?;
            let next_min = if op.is_right_associative() { prec } else { prec + 1 };
            let (rhs, rpt) = self.expr(next_min)?;
            let r = PosRange { start: lpt.r.start, end: rpt.r.end };
            if !self.opts.binop_fill_modifiers && (matching.fill_lhs.is_some() || matching.fill_rhs.is_some()) {
                self.lookahead_lex_error()?;
                // Upstream `newBinaryExpression`.
                return Err(self.err(r, "binop fill modifiers are experimental and not enabled"));
            }
            lhs = Expr::Binary(BinaryExpr {
                op,
                lhs: Box::new(lhs),
                rhs: Box::new(rhs),
                matching: Some(matching),
                return_bool,
            });
            lpt = PosTree { r, op: op_tok.pos, kids: vec![lpt, rpt] };
        }
        Ok((lhs, lpt))
    }

    /// `bool`, `on`/`ignoring`, `group_left`/`group_right`, fill modifiers (upstream `bin_modifier`).
    fn bin_modifiers(&mut self) -> PResult<(VectorMatching, bool)> {
        let mut vm = VectorMatching {
            card: VectorMatchCardinality::OneToOne,
            matching_labels: Vec::new(),
            on: false,
            include: Vec::new(),
            fill_lhs: None,
            fill_rhs: None,
        };
        let mut return_bool = false;
        if self.peek().kind == Kind::Bool {
            self.advance();
            return_bool = true;
        }
        let k = self.peek().kind;
        if k == Kind::On || k == Kind::Ignoring {
            self.advance();
            vm.on = k == Kind::On;
            vm.matching_labels = self.grouping_labels()?;
            let g = self.peek().kind;
            if g == Kind::GroupLeft || g == Kind::GroupRight {
                self.advance();
                vm.card =
                    if g == Kind::GroupLeft { VectorMatchCardinality::ManyToOne } else { VectorMatchCardinality::OneToMany };
                let next = self.peek().kind;
                if next == Kind::LeftParen
                    || !(self.at_expr_start() || matches!(next, Kind::Fill | Kind::FillLeft | Kind::FillRight))
                {
                    // Upstream's optional label list: anything that cannot follow it is a
                    // "grouping opts" error.
                    vm.include = self.grouping_labels()?;
                }
            }
        }
        match self.peek().kind {
            Kind::Fill => {
                self.advance();
                let v = self.fill_value()?;
                vm.fill_lhs = Some(v);
                vm.fill_rhs = Some(v);
            }
            Kind::FillLeft => {
                self.advance();
                vm.fill_lhs = Some(self.fill_value()?);
                if self.peek().kind == Kind::FillRight {
                    self.advance();
                    vm.fill_rhs = Some(self.fill_value()?);
                }
            }
            Kind::FillRight => {
                self.advance();
                vm.fill_rhs = Some(self.fill_value()?);
                if self.peek().kind == Kind::FillLeft {
                    self.advance();
                    vm.fill_lhs = Some(self.fill_value()?);
                }
            }
            _ => {}
        }
        Ok((vm, return_bool))
    }

    /// `( [+-] number_or_duration )` (upstream `fill_value`).
    fn fill_value(&mut self) -> PResult<f64> {
        self.expect(Kind::LeftParen, "", "")?;
        let mut neg = false;
        if matches!(self.peek().kind, Kind::Add | Kind::Sub) {
            neg = self.advance().kind == Kind::Sub;
        }
        let (v, _) = match self.peek().kind {
            Kind::Number | Kind::Duration => self.number_literal()?,
            _ => return Err(self.unexpected("", "")),
        };
        self.expect(Kind::RightParen, "", "")?;
        Ok(if neg { -v.val } else { v.val })
    }

    /// `( label, ... )` (upstream `grouping_labels`).
    fn grouping_labels(&mut self) -> PResult<Vec<String>> {
        if self.peek().kind != Kind::LeftParen {
            return Err(self.unexpected("grouping opts", "\"(\""));
        }
        self.advance();
        let mut labels = Vec::new();
        loop {
            let t = self.peek().clone();
            if t.kind == Kind::RightParen {
                self.advance();
                return Ok(labels);
            }
            let name = if t.kind.is_maybe_label() {
                self.advance();
                t.val.to_string()
            } else if t.kind == Kind::String {
                self.advance();
                unquote(&t.val).map_err(|e| self.unquote_err(&t, &e))?
            } else {
                return Err(self.unexpected("grouping opts", "label"));
            };
            if !is_valid_label_name(&name) {
                return Err(self.err(
                    PosRange { start: t.pos, end: t.end() },
                    format!("invalid label name for grouping: {}", go_quote_str(&name)),
                ));
            }
            labels.push(name);
            match self.peek().kind {
                Kind::Comma => {
                    self.advance();
                }
                Kind::RightParen => {}
                _ => return Err(self.unexpected("grouping opts", "\",\" or \")\"")),
            }
        }
    }

    fn unquote_err(&self, t: &Token<'_>, e: &str) -> ParseError {
        self.err(
            PosRange { start: t.pos, end: t.end() },
            format!("error unquoting string {}: {}", go_quote_str(&t.val), e),
        )
    }

    /// Unary `+`/`-` (precedence of `*`, so `-a^b` is `-(a^b)` and `-a*b` is `(-a)*b`).
    fn unary(&mut self) -> PResult<(Expr, PosTree)> {
        let k = self.peek().kind;
        if k == Kind::Add || k == Kind::Sub {
            let op = self.advance();
            let (e, pt) = self.expr(BinaryOp::Pow.precedence())?;
            let r = PosRange { start: op.pos, end: pt.r.end };
            if let Expr::NumberLiteral(mut n) = e {
                if k == Kind::Sub {
                    n.val = -n.val;
                }
                return Ok((Expr::NumberLiteral(n), PosTree::leaf(r)));
            }
            let op = if k == Kind::Sub { UnaryOp::Neg } else { UnaryOp::Pos };
            return Ok((Expr::Unary(UnaryExpr { op, expr: Box::new(e) }), PosTree { r, op: 0, kids: vec![pt] }));
        }
        let (e, pt) = self.primary()?;
        self.postfix(e, pt)
    }

    fn number_literal(&mut self) -> PResult<(NumberLiteral, PosRange)> {
        let t = self.advance();
        let r = PosRange { start: t.pos, end: t.end() };
        if t.kind == Kind::Duration {
            let ns = parse_duration_ns(&t.val).map_err(|e| self.err(r, e))?;
            return Ok((NumberLiteral { val: ns as f64 / 1e9, duration: true }, r));
        }
        match parse_number(&t.val) {
            None if t.val.contains('_') => Err(self.err(
                r,
                format!("error parsing number: strconv.ParseFloat: parsing {}: invalid syntax", go_quote_str(&t.val)),
            )),
            Some(v) if v.is_infinite() && !t.val.to_ascii_lowercase().contains("inf") => Err(self.err(
                r,
                format!("error parsing number: strconv.ParseFloat: parsing {}: value out of range", go_quote_str(&t.val)),
            )),
            Some(v) => Ok((NumberLiteral { val: v, duration: false }, r)),
            None => Err(self.err(r, format!("error parsing number: strconv.ParseFloat: parsing {}: invalid syntax", go_quote_str(&t.val)))),
        }
    }

    fn primary(&mut self) -> PResult<(Expr, PosTree)> {
        let t = self.peek().clone();
        let next = self.peek_kind_at(1);
        match t.kind {
            Kind::Number | Kind::Duration => {
                let (n, r) = self.number_literal()?;
                Ok((Expr::NumberLiteral(n), PosTree::leaf(r)))
            }
            Kind::String => {
                self.advance();
                let bytes = unquote_bytes(&t.val).map_err(|e| self.unquote_err(&t, &e))?;
                let (val, raw) = match String::from_utf8(bytes) {
                    Ok(v) => (v, None),
                    Err(e) => (String::from_utf8_lossy(e.as_bytes()).into_owned(), Some(e.into_bytes())),
                };
                Ok((Expr::StringLiteral(StringLiteral { val, raw }), PosTree::leaf(PosRange { start: t.pos, end: t.end() })))
            }
            Kind::LeftParen => {
                self.advance();
                let (e, pt) = self.expr(0)?;
                let close = self.expect(Kind::RightParen, "", "")?;
                let r = PosRange { start: t.pos, end: close.end() };
                Ok((Expr::Paren(ParenExpr { expr: Box::new(e) }), PosTree { r, op: 0, kids: vec![pt] }))
            }
            Kind::LeftBrace => self.vector_selector(),
            k if k.is_aggregator() && matches!(next, Kind::LeftParen | Kind::By | Kind::Without) => self.aggregate(),
            Kind::Identifier | Kind::Start | Kind::End | Kind::Step | Kind::Range | Kind::MaxOf | Kind::MinOf
                if next == Kind::LeftParen =>
            {
                self.call()
            }
            k if k.is_metric_identifier() => self.vector_selector(),
            k if k.is_aggregator() => {
                self.advance();
                Err(self.unexpected("aggregation", ""))
            }
            _ => Err(self.unexpected("", "")),
        }
    }

    /// `name(args)` (upstream `function_call`).
    fn call(&mut self) -> PResult<(Expr, PosTree)> {
        let name = self.advance();
        let (args, kids, end) = self.call_body()?;
        let name_r = PosRange { start: name.pos, end: name.end() };
        let Some(func) = get_function(&name.val) else {
            return Err(self.err(name_r, format!("unknown function with name {}", go_quote_str(&name.val))));
        };
        if func.experimental && !self.opts.experimental_functions {
            return Err(self.err(name_r, format!("function {} is not enabled", go_quote_str(&name.val))));
        }
        Ok((Expr::Call(Call { func, args }), PosTree { r: PosRange { start: name.pos, end }, op: 0, kids }))
    }

    /// `( expr, ... )`; returns the arguments, their positions and the end of the `)`.
    fn call_body(&mut self) -> PResult<(Vec<Expr>, Vec<PosTree>, usize)> {
        self.expect(Kind::LeftParen, "", "")?;
        let mut args = Vec::new();
        let mut kids = Vec::new();
        if self.peek().kind == Kind::RightParen {
            let c = self.advance();
            return Ok((args, kids, c.end()));
        }
        loop {
            let (e, pt) = self.expr(0)?;
            args.push(e);
            kids.push(pt);
            match self.peek().kind {
                Kind::Comma => {
                    let comma = self.advance();
                    // yacc reduces `function_call_args COMMA` (which records this error) by default when
                    // no expression follows; a lexer error, recorded first upstream, still wins.
                    if !self.at_expr_start() && self.peek().kind != Kind::Error {
                        return Err(self.err(
                            PosRange { start: comma.pos, end: comma.end() },
                            "trailing commas not allowed in function call args",
                        ));
                    }
                }
                Kind::RightParen => {
                    let c = self.advance();
                    return Ok((args, kids, c.end()));
                }
                _ => return Err(self.unexpected("", "")),
            }
        }
    }

    /// `op [by|without (..)] (args) [by|without (..)]` (upstream `aggregate_expr`/`newAggregateExpr`).
    fn aggregate(&mut self) -> PResult<(Expr, PosTree)> {
        let op_tok = self.advance();
        let op = aggregate_op(op_tok.kind).expect("caller checked the token is an aggregator");
        let mut grouping = Vec::new();
        let mut without = false;
        let mut have_modifier = false;
        if matches!(self.peek().kind, Kind::By | Kind::Without) {
            without = self.advance().kind == Kind::Without;
            grouping = self.grouping_labels()?;
            have_modifier = true;
        }
        if self.peek().kind != Kind::LeftParen {
            return Err(self.unexpected("aggregation", ""));
        }
        let (mut args, mut kids, end) = self.with_ctx(("aggregation", ""), |p| p.call_body())?;
        if !have_modifier && matches!(self.peek().kind, Kind::By | Kind::Without) {
            without = self.advance().kind == Kind::Without;
            grouping = self.grouping_labels()?;
        }
        if !have_modifier {
            // yacc needs the token after `)` (a `by`/`without` may follow) before reducing, so its
            // lexer error comes first.
            self.lookahead_lex_error()?;
        }
        let r = PosRange { start: op_tok.pos, end };
        if args.is_empty() {
            return Err(self.err(r, "no arguments for aggregate expression provided"));
        }
        if op.is_experimental() && !self.opts.experimental_functions {
            return Err(self.err(
                r,
                format!(
                    "{}() is experimental and must be enabled with --enable-feature=promql-experimental-functions",
                    op.as_str()
                ),
            ));
        }
        let desired = if op.has_param() { 2 } else { 1 };
        if args.len() != desired {
            return Err(self.err(
                r,
                format!(
                    "wrong number of arguments for aggregate expression provided, expected {desired}, got {}",
                    args.len()
                ),
            ));
        }
        let expr = args.pop().expect("length checked");
        let param = args.pop().map(Box::new);
        // Child order for the PosTree: [expr, param?].
        kids.reverse();
        let e = Expr::Aggregate(AggregateExpr { op, expr: Box::new(expr), param, grouping, without });
        Ok((e, PosTree { r, op: 0, kids }))
    }

    /// `name`, `name{...}` or `{...}` (upstream `vector_selector`).
    fn vector_selector(&mut self) -> PResult<(Expr, PosTree)> {
        let start = self.peek().pos;
        let mut name = None;
        let mut end = start;
        if self.peek().kind != Kind::LeftBrace {
            let t = self.advance();
            end = t.end();
            name = Some(t.val.into_owned());
        }
        let mut matchers = Vec::new();
        if self.peek().kind == Kind::LeftBrace {
            let (m, e) = self.label_matchers()?;
            matchers = m;
            end = e;
        }
        if let Some(n) = &name {
            matchers.push(Matcher::equal("__name__", n.clone()));
        }
        let vs = VectorSelector {
            name,
            matchers,
            original_offset_ms: 0,
            offset_expr: None,
            at: None,
            anchored: false,
            smoothed: false,
            bypass_empty_matcher_check: false,
        };
        Ok((Expr::VectorSelector(vs), PosTree::leaf(PosRange { start, end })))
    }

    /// `{ matcher, ... }`; returns the matchers and the end of `}`.
    fn label_matchers(&mut self) -> PResult<(Vec<Matcher>, usize)> {
        self.advance(); // {
        let mut out = Vec::new();
        loop {
            let t = self.peek().clone();
            match t.kind {
                Kind::RightBrace => {
                    self.advance();
                    return Ok((out, t.end()));
                }
                Kind::Identifier | Kind::String => {
                    self.advance();
                    let label = if t.kind == Kind::String {
                        unquote(&t.val).map_err(|e| self.unquote_err(&t, &e))?
                    } else {
                        t.val.to_string()
                    };
                    let op = match self.peek().kind {
                        Kind::Eql => Some(MatchOp::Equal),
                        Kind::Neq => Some(MatchOp::NotEqual),
                        Kind::EqlRegex => Some(MatchOp::Regex),
                        Kind::NeqRegex => Some(MatchOp::NotRegex),
                        _ => None,
                    };
                    match op {
                        Some(op) => {
                            self.advance();
                            let v = self.peek().clone();
                            if v.kind != Kind::String {
                                return Err(self.unexpected("label matching", "string"));
                            }
                            self.advance();
                            let value = unquote(&v.val).map_err(|e| self.unquote_err(&v, &e))?;
                            let m = Matcher::new(op, label, value).map_err(|e| {
                                self.err(PosRange { start: t.pos, end: v.end() }, matcher_error_message(&e))
                            })?;
                            out.push(m);
                        }
                        None if t.kind == Kind::String => out.push(Matcher::equal("__name__", label)),
                        None => return Err(self.unexpected("label matching", "label matching operator")),
                    }
                }
                _ => return Err(self.unexpected("label matching", "identifier or \"}\"")),
            }
            match self.peek().kind {
                Kind::Comma => {
                    self.advance();
                }
                Kind::RightBrace => {}
                _ => return Err(self.unexpected("label matching", "\",\" or \"}\"")),
            }
        }
    }

    /// Range/subquery brackets, `offset`, `@`, `anchored`, `smoothed` after a primary.
    /// Ranges, subqueries, `offset`, `@` and extended modifiers after an expression. A subquery wraps
    /// the expression in one more node (`x[1m:][1m:]…`), so each bracket counts toward the nesting
    /// bound, as a binary chain's operators do; the depth is restored at the end.
    fn postfix(&mut self, e: Expr, pt: PosTree) -> PResult<(Expr, PosTree)> {
        let d0 = self.depth;
        let r = self.postfix_inner(e, pt);
        self.depth = d0;
        r
    }

    fn postfix_inner(&mut self, mut e: Expr, mut pt: PosTree) -> PResult<(Expr, PosTree)> {
        loop {
            match self.peek().kind {
                Kind::LeftBracket => {
                    self.enter()?;
                    (e, pt) = self.range_or_subquery(e, pt)?;
                }
                Kind::Offset => {
                    self.advance();
                    let d = self.offset_duration()?;
                    self.add_offset(&mut e, &pt, d)?;
                    pt.r.end = self.toks[self.i.saturating_sub(1)].end();
                }
                Kind::At => {
                    self.advance();
                    let at = self.at_value()?;
                    self.set_at(&mut e, &pt, at)?;
                    pt.r.end = self.toks[self.i.saturating_sub(1)].end();
                }
                Kind::Anchored | Kind::Smoothed => {
                    let anchored = self.advance().kind == Kind::Anchored;
                    self.set_extended(&mut e, &pt, anchored)?;
                }
                _ => return Ok((e, pt)),
            }
        }
    }

    fn range_or_subquery(&mut self, e: Expr, pt: PosTree) -> PResult<(Expr, PosTree)> {
        let open = self.advance();
        if !self.starts_duration() {
            if matches!(self.peek().kind, Kind::Step | Kind::Range | Kind::MinOf | Kind::MaxOf) {
                // yacc shifts the keyword and fails on the token after it.
                self.advance();
            }
            return Err(self.unexpected("subquery or range selector", "number, duration, step(), or range()"));
        }
        let range = self.with_ctx(RANGE_CTX, |p| p.positive_duration())?;
        match self.peek().kind {
            Kind::RightBracket => {
                let close = self.advance();
                let err_r = PosRange { start: open.pos, end: close.end() };
                let Expr::VectorSelector(vs) = e else {
                    return Err(self.err(err_r, "ranges only allowed for vector selectors"));
                };
                if vs.original_offset_ms != 0 || vs.offset_expr.is_some() {
                    return Err(self.err(err_r, "no offset modifiers allowed before range"));
                }
                if vs.at.is_some() {
                    return Err(self.err(err_r, "no @ modifiers allowed before range"));
                }
                let (range_ms, range_expr) = fold_duration(range);
                let r = PosRange { start: pt.r.start, end: close.end() };
                Ok((Expr::MatrixSelector(MatrixSelector { vs, range_ms, range_expr }), PosTree { r, op: 0, kids: vec![pt] }))
            }
            Kind::Colon => {
                self.advance();
                let mut step = None;
                if self.peek().kind != Kind::RightBracket {
                    if !self.starts_duration() {
                        return Err(self.unexpected(
                            "subquery selector",
                            "number, duration, step(), range(), or \"]\"",
                        ));
                    }
                    step = Some(self.with_ctx(STEP_CTX, |p| p.positive_duration())?);
                    if self.peek().kind != Kind::RightBracket {
                        return Err(self.unexpected("subquery selector", "\"]\""));
                    }
                }
                let close = self.advance();
                let (range_ms, range_expr) = fold_duration(range);
                let (step_ms, step_expr) = step.map_or((0, None), fold_duration);
                let r = PosRange { start: pt.r.start, end: close.end() };
                let sq = SubqueryExpr {
                    expr: Box::new(e),
                    range_ms,
                    range_expr,
                    step_ms,
                    step_expr,
                    original_offset_ms: 0,
                    offset_expr: None,
                    at: None,
                };
                Ok((Expr::Subquery(sq), PosTree { r, op: 0, kids: vec![pt] }))
            }
            _ => Err(self.unexpected("subquery or range", "\":\" or \"]\"")),
        }
    }

    fn starts_duration(&self) -> bool {
        match self.peek().kind {
            Kind::Number | Kind::Duration | Kind::LeftParen | Kind::Add | Kind::Sub => true,
            Kind::Step | Kind::Range | Kind::MinOf | Kind::MaxOf => self.peek_kind_at(1) == Kind::LeftParen,
            _ => false,
        }
    }

    /// A full duration expression that must be positive when it is a literal (`positive_duration_expr`).
    fn positive_duration(&mut self) -> PResult<DurationExpr> {
        let d = self.duration_expr(0)?;
        self.lookahead_lex_error()?;
        if let DurationExpr::Number { secs, pos, .. } = &d
            && *secs <= 0.0
        {
            return Err(self.err(*pos, "duration must be greater than 0"));
        }
        Ok(d)
    }

    /// Duration expressions with the binary precedences of PromQL (`duration_expr`).
    fn duration_expr(&mut self, min_prec: u8) -> PResult<DurationExpr> {
        let d0 = self.depth;
        self.enter()?;
        let r = self.duration_expr_inner(min_prec);
        self.depth = d0;
        r
    }

    fn duration_expr_inner(&mut self, min_prec: u8) -> PResult<DurationExpr> {
        let mut lhs = self.duration_unary()?;
        loop {
            let op = match self.peek().kind {
                Kind::Add => DurationOp::Add,
                Kind::Sub => DurationOp::Sub,
                Kind::Mul => DurationOp::Mul,
                Kind::Div => DurationOp::Div,
                Kind::Mod => DurationOp::Mod,
                Kind::Pow => DurationOp::Pow,
                _ => break,
            };
            let prec = match op {
                DurationOp::Add | DurationOp::Sub => 4,
                DurationOp::Mul | DurationOp::Div | DurationOp::Mod => 5,
                DurationOp::Pow => 6,
            };
            if prec < min_prec {
                break;
            }
            // A chain level, as in `expr_inner`; `duration_expr` restores the depth.
            self.enter()?;
            let op_tok = self.advance();
            let rhs = self.duration_expr(if op == DurationOp::Pow { prec } else { prec + 1 })?;
            self.lookahead_lex_error()?;
            self.experimental_duration(lhs.pos())?;
            if let DurationExpr::Number { secs, .. } = &rhs
                && *secs == 0.0
            {
                let r = PosRange { start: op_tok.pos, end: op_tok.end() };
                match op {
                    DurationOp::Div => return Err(self.err(r, "division by zero")),
                    DurationOp::Mod => return Err(self.err(r, "modulo by zero")),
                    _ => {}
                }
            }
            let pos = PosRange { start: lhs.pos().start, end: rhs.pos().end };
            lhs = DurationExpr::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs), pos };
        }
        Ok(lhs)
    }

    /// `[+-] duration_expr` at the precedence of `*` (the operand may contain `^`).
    fn duration_unary(&mut self) -> PResult<DurationExpr> {
        let k = self.peek().kind;
        if k == Kind::Add || k == Kind::Sub {
            let op = self.advance();
            let inner = self.duration_expr(6)?;
            return self.apply_duration_unary(&op, inner);
        }
        self.duration_atom()
    }

    /// Upstream `applyUnaryOpToDurationExpr`: a sign on a literal folds into it.
    fn apply_duration_unary(&self, op: &Token<'_>, inner: DurationExpr) -> PResult<DurationExpr> {
        let neg = op.kind == Kind::Sub;
        match inner {
            DurationExpr::Number { secs, duration, pos } => {
                let secs = if neg { -secs } else { secs };
                if duration_out_of_range(secs) {
                    return Err(self.err(PosRange { start: op.pos, end: op.end() }, "duration out of range"));
                }
                Ok(DurationExpr::Number { secs, duration, pos: PosRange { start: op.pos, end: pos.end } })
            }
            other if neg => {
                let pos = PosRange { start: op.pos, end: other.pos().end };
                Ok(DurationExpr::Unary { neg: true, expr: Box::new(other), pos })
            }
            other => Ok(other),
        }
    }

    /// A literal, `step()`, `range()`, `min_of(a, b)`, `max_of(a, b)` or `( duration_expr )`.
    fn duration_atom(&mut self) -> PResult<DurationExpr> {
        let check = std::mem::replace(&mut self.atom_check, AtomCheck::Own);
        let d = self.duration_atom_inner()?;
        if !matches!(d, DurationExpr::Number { .. }) {
            match check {
                AtomCheck::Own => {
                    let r = match &d {
                        DurationExpr::Paren { expr, .. } => expr.pos(),
                        other => other.pos(),
                    };
                    self.experimental_duration(r)?;
                }
                AtomCheck::At(r) => self.experimental_duration(r)?,
                AtomCheck::Skip => {}
            }
        }
        Ok(d)
    }

    fn duration_atom_inner(&mut self) -> PResult<DurationExpr> {
        let t = self.peek().clone();
        match t.kind {
            Kind::Number | Kind::Duration => {
                let (n, r) = self.number_literal()?;
                if duration_out_of_range(n.val) {
                    return Err(self.err(r, "duration out of range"));
                }
                Ok(DurationExpr::Number { secs: n.val, duration: n.duration, pos: r })
            }
            Kind::Step | Kind::Range => {
                self.advance();
                self.expect(Kind::LeftParen, "", "")?;
                let close = self.expect(Kind::RightParen, "", "")?;
                let pos = PosRange { start: t.pos, end: close.end() };
                Ok(if t.kind == Kind::Step { DurationExpr::Step { pos } } else { DurationExpr::Range { pos } })
            }
            Kind::MinOf | Kind::MaxOf => {
                self.advance();
                self.expect(Kind::LeftParen, "", "")?;
                let lhs = self.duration_expr(0)?;
                self.expect(Kind::Comma, "", "")?;
                let rhs = self.duration_expr(0)?;
                let close = self.expect(Kind::RightParen, "", "")?;
                let pos = PosRange { start: t.pos, end: close.end() };
                Ok(DurationExpr::MinMaxOf { max: t.kind == Kind::MaxOf, lhs: Box::new(lhs), rhs: Box::new(rhs), pos })
            }
            Kind::LeftParen => {
                self.advance();
                let inner = self.duration_expr(0)?;
                let close = self.expect(Kind::RightParen, "", "")?;
                let pos = PosRange { start: t.pos, end: close.end() };
                Ok(DurationExpr::Paren { expr: Box::new(inner), pos })
            }
            _ => Err(self.unexpected("", "")),
        }
    }

    /// The duration after `offset` (upstream `offset_duration_expr`): a signed literal, `step()`,
    /// `range()`, `min_of`/`max_of`, or a parenthesised expression — never a bare binary expression, so
    /// `x offset 1m + 2` is `(x offset 1m) + 2`.
    fn offset_duration(&mut self) -> PResult<DurationExpr> {
        let k = self.peek().kind;
        if matches!(k, Kind::Add | Kind::Sub) && matches!(self.peek_kind_at(1), Kind::Add | Kind::Sub) {
            // `offset --2 * 2`: only the general `duration_expr` alternative derives a double sign, and
            // it goes on with the operators that follow.
            return self.with_ctx(OFFSET_CTX, |p| p.duration_expr(0));
        }
        let sign = if matches!(k, Kind::Add | Kind::Sub) { Some(self.advance()) } else { None };
        let ok = matches!(
            self.peek().kind,
            Kind::Number | Kind::Duration | Kind::Step | Kind::Range | Kind::MinOf | Kind::MaxOf | Kind::LeftParen
        );
        if !ok {
            return Err(self.unexpected(OFFSET_CTX.0, OFFSET_CTX.1));
        }
        // A bare parenthesised start is upstream's `duration_expr` alternative, and yacc prefers shifting
        // the next operator: `x offset (1m) * 2` offsets by 2m. Every other start (a literal, `step()`,
        // `min_of(..)`, a sign) is an `offset_duration_expr` that ends there: `x offset 1m * 2` is
        // `(x offset 1m) * 2`.
        if sign.is_none() && self.peek().kind == Kind::LeftParen {
            return self.with_ctx(OFFSET_CTX, |p| p.duration_expr(0));
        }
        if let Some(op) = &sign
            && matches!(self.peek().kind, Kind::Number | Kind::Duration)
        {
            // `unary_op number_duration_literal`: the range check happens once, after the sign, and
            // points at the sign.
            let (n, r) = self.number_literal()?;
            let lit = DurationExpr::Number { secs: n.val, duration: n.duration, pos: r };
            return self.apply_duration_unary(op, lit);
        }
        if let Some(op) = &sign {
            self.atom_check = if self.peek().kind == Kind::LeftParen {
                AtomCheck::Skip
            } else {
                AtomCheck::At(PosRange { start: op.pos, end: op.end() })
            };
        }
        let atom = self.with_ctx(OFFSET_CTX, |p| p.duration_atom())?;
        match sign {
            // Upstream's `unary_op STEP ...`/`unary_op max_of_min_of ...` rules keep even a `+` as a
            // node (visible in the parse_query JSON); `+(..)` and literals fold as usual.
            Some(op)
                if op.kind == Kind::Add
                    && matches!(atom, DurationExpr::Step { .. } | DurationExpr::Range { .. } | DurationExpr::MinMaxOf { .. }) =>
            {
                let pos = PosRange { start: op.pos, end: atom.pos().end };
                Ok(DurationExpr::Unary { neg: false, expr: Box::new(atom), pos })
            }
            Some(op) => self.apply_duration_unary(&op, atom),
            None => Ok(atom),
        }
    }

    /// The value after `@`: a signed number/duration (seconds) or `start()`/`end()`.
    fn at_value(&mut self) -> PResult<AtValue> {
        let k = self.peek().kind;
        if k == Kind::Start || k == Kind::End {
            self.advance();
            self.expect(Kind::LeftParen, AT_CTX.0, AT_CTX.1)?;
            self.expect(Kind::RightParen, AT_CTX.0, AT_CTX.1)?;
            return Ok(AtValue::Mod(if k == Kind::Start { AtModifier::Start } else { AtModifier::End }));
        }
        let mut neg = false;
        if matches!(k, Kind::Add | Kind::Sub) {
            if !matches!(self.peek_kind_at(1), Kind::Number | Kind::Duration) {
                self.advance();
                return Err(self.unexpected("@", "timestamp"));
            }
            neg = self.advance().kind == Kind::Sub;
        }
        if !matches!(self.peek().kind, Kind::Number | Kind::Duration) {
            return Err(self.unexpected("@", "timestamp"));
        }
        let (n, _) = self.number_literal()?;
        Ok(AtValue::Secs(if neg { -n.val } else { n.val }))
    }

    /// Upstream `addOffset`/`addOffsetExpr`.
    fn add_offset(&self, e: &mut Expr, pt: &PosTree, d: DurationExpr) -> PResult<()> {
        let (off_ms, off_expr) = match e {
            Expr::VectorSelector(vs) => (&mut vs.original_offset_ms, &mut vs.offset_expr),
            Expr::MatrixSelector(ms) => (&mut ms.vs.original_offset_ms, &mut ms.vs.offset_expr),
            Expr::Subquery(sq) => (&mut sq.original_offset_ms, &mut sq.offset_expr),
            _ => {
                return Err(self.err(
                    pt.r,
                    "offset modifier must be preceded by an instant vector selector or range vector selector or a subquery",
                ));
            }
        };
        if *off_ms != 0 || off_expr.is_some() {
            return Err(self.err(pt.r, "offset may not be set multiple times"));
        }
        let (ms, expr) = fold_duration(d);
        *off_ms = ms;
        *off_expr = expr;
        Ok(())
    }

    /// Upstream `setTimestamp`/`setAtModifierPreprocessor`.
    fn set_at(&self, e: &mut Expr, pt: &PosTree, at: AtValue) -> PResult<()> {
        let at = match at {
            AtValue::Mod(m) => m,
            AtValue::Secs(ts) => {
                if !ts.is_finite() || ts >= i64::MAX as f64 || ts <= i64::MIN as f64 {
                    return Err(self.err(pt.r, format!("timestamp out of bounds for @ modifier: {}", go_float_f(ts))));
                }
                AtModifier::Timestamp((ts * 1000.0).round() as i64)
            }
        };
        let slot = match e {
            Expr::VectorSelector(vs) => &mut vs.at,
            Expr::MatrixSelector(ms) => &mut ms.vs.at,
            Expr::Subquery(sq) => &mut sq.at,
            _ => {
                return Err(self.err(
                    pt.r,
                    "@ modifier must be preceded by an instant vector selector or range vector selector or a subquery",
                ));
            }
        };
        if slot.is_some() {
            return Err(self.err(pt.r, "@ <timestamp> may not be set multiple times"));
        }
        *slot = Some(at);
        Ok(())
    }

    /// Upstream `setAnchored`/`setSmoothed`.
    fn set_extended(&self, e: &mut Expr, pt: &PosTree, anchored: bool) -> PResult<()> {
        let name = if anchored { "anchored" } else { "smoothed" };
        if !self.opts.extended_range_selectors {
            return Err(self.err(pt.r, format!("{name} modifier is experimental and not enabled")));
        }
        let vs = match e {
            Expr::VectorSelector(vs) => vs,
            Expr::MatrixSelector(ms) => &mut ms.vs,
            Expr::Subquery(_) => return Err(self.err(pt.r, format!("{name} modifier is not supported for subqueries"))),
            _ => return Err(self.err(pt.r, format!("{name} modifier not implemented"))),
        };
        if anchored {
            vs.anchored = true;
        } else {
            vs.smoothed = true;
        }
        if vs.anchored && vs.smoothed {
            return Err(self.err(pt.r, "anchored and smoothed modifiers cannot be used together"));
        }
        Ok(())
    }
}

enum AtValue {
    Secs(f64),
    Mod(AtModifier),
}

/// Go's `%f` (6 decimals; `+Inf`, `-Inf`, `NaN`).
fn go_float_f(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 { "+Inf".into() } else { "-Inf".into() }
    } else {
        format!("{v:.6}")
    }
}

/// A plain literal folds to ms; anything else stays an expression (resolved per query).
fn fold_duration(d: DurationExpr) -> (i64, Option<DurationExpr>) {
    match d {
        DurationExpr::Number { secs, .. } => (secs_to_ms(secs), None),
        other => (0, Some(other)),
    }
}

fn matcher_error_message(e: &tessera_model::MatcherError) -> String {
    match e {
        tessera_model::MatcherError::InvalidRegex { pattern, reason } => {
            format!("error parsing regexp: {}", go_regexp_error(pattern, reason))
        }
        other => other.to_string(),
    }
}

/// Upstream surfaces Go's `regexp/syntax` errors; ours come from the regex crate. The common kinds are
/// translated into Go's wording (which quotes the offending text); anything else keeps the regex
/// crate's explanation.
fn go_regexp_error(pattern: &str, reason: &str) -> String {
    // The regex crate shows the pattern (possibly inside the matcher's `^(?s:...)$` wrapper) indented by
    // four spaces, with a caret line under it.
    let lines: Vec<&str> = reason.lines().collect();
    let kind = lines.iter().find_map(|l| l.strip_prefix("error: ")).unwrap_or("");
    let prefix = if lines.get(1).is_some_and(|l| l.starts_with("    ^(?s:")) { 4 + "^(?s:".len() } else { 4 };
    let caret = lines.get(2).and_then(|l| l.find('^')).map(|c| c.saturating_sub(prefix));
    let chars: Vec<char> = pattern.chars().collect();
    let from = |i: usize| chars.get(i..).map(|c| c.iter().collect::<String>()).unwrap_or_default();
    match kind {
        "unclosed group" => format!("missing closing ): `{pattern}`"),
        "unopened group" => format!("unexpected ): `{pattern}`"),
        "unclosed character class" => match caret {
            Some(i) => format!("missing closing ]: `{}`", from(i)),
            None => format!("missing closing ]: `{pattern}`"),
        },
        "repetition operator missing expression" => match caret.and_then(|i| chars.get(i)) {
            Some(op) => format!("missing argument to repetition operator: `{op}`"),
            None => reason.to_string(),
        },
        k if k.starts_with("invalid character class range") => {
            let span = lines.get(2).map_or(0, |l| l.matches('^').count());
            match caret {
                Some(i) => format!("invalid character class range: `{}`", from(i).chars().take(span).collect::<String>()),
                None => reason.to_string(),
            }
        }
        "unrecognized escape sequence" => match caret {
            Some(i) => format!("invalid escape sequence: `{}`", from(i).chars().take(2).collect::<String>()),
            None => reason.to_string(),
        },
        "unrecognized flag" => match caret {
            // Go quotes from "(?" up to and including the offending flag.
            Some(i) => match pattern[..pattern.char_indices().nth(i).map_or(pattern.len(), |(b, _)| b)].rfind("(?") {
                Some(start) => {
                    let end = pattern.char_indices().nth(i + 1).map_or(pattern.len(), |(b, _)| b);
                    format!("invalid or unsupported Perl syntax: `{}`", &pattern[start..end])
                }
                None => reason.to_string(),
            },
            None => reason.to_string(),
        },
        _ => reason.to_string(),
    }
}

/// Upstream `parser.checkAST`: type checks after a successful parse. Mutates only `VectorMatching`
/// (set operators become many-to-many; dropped when not both sides are vectors) and the `info()` flag.
pub(crate) fn check(input: &str, e: &mut Expr, pt: &PosTree) -> Result<ValueType, ParseError> {
    let err = |r: PosRange, msg: String| ParseError::new(input, r, msg);
    // The parser builds one PosTree child per AST child; falling back to the parent is only defensive.
    let kid = |i: usize| pt.kids.get(i).unwrap_or(pt);
    match e {
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => {}
        Expr::Aggregate(a) => {
            expect_type(input, &mut a.expr, kid(0), ValueType::Vector, "aggregation expression")?;
            match a.op {
                AggregateOp::Topk
                | AggregateOp::Bottomk
                | AggregateOp::Quantile
                | AggregateOp::Limitk
                | AggregateOp::LimitRatio => {
                    if let Some(p) = &mut a.param {
                        expect_type(input, p, kid(1), ValueType::Scalar, "aggregation parameter")?;
                    }
                }
                AggregateOp::CountValues => {
                    if let Some(p) = &mut a.param {
                        expect_type(input, p, kid(1), ValueType::String, "aggregation parameter")?;
                    }
                }
                _ => {}
            }
        }
        Expr::Binary(b) => {
            let lt = check(input, &mut b.lhs, kid(0))?;
            let rt = check(input, &mut b.rhs, kid(1))?;
            let op_r = PosRange { start: pt.op, end: pt.op + b.op.as_str().len() };
            if b.return_bool && !b.op.is_comparison() {
                return Err(err(op_r, "bool modifier can only be used on comparison operators".into()));
            }
            if b.op.is_comparison() && !b.return_bool && lt == ValueType::Scalar && rt == ValueType::Scalar {
                return Err(err(op_r, "comparisons between scalars must use BOOL modifier".into()));
            }
            if let Some(vm) = &mut b.matching {
                if b.op.is_set_operator() && vm.card == VectorMatchCardinality::OneToOne {
                    vm.card = VectorMatchCardinality::ManyToMany;
                }
                if vm.on {
                    for l1 in &vm.matching_labels {
                        if vm.include.contains(l1) {
                            return Err(err(
                                op_r,
                                format!("label {} must not occur in ON and GROUP clause at once", go_quote_str(l1)),
                            ));
                        }
                    }
                }
            }
            if lt != ValueType::Scalar && lt != ValueType::Vector {
                return Err(err(kid(0).r, "binary expression must contain only scalar and instant vector types".into()));
            }
            if rt != ValueType::Scalar && rt != ValueType::Vector {
                return Err(err(kid(1).r, "binary expression must contain only scalar and instant vector types".into()));
            }
            let has_fill = |vm: &VectorMatching| vm.fill_lhs.is_some() || vm.fill_rhs.is_some();
            if lt != ValueType::Vector || rt != ValueType::Vector {
                if let Some(vm) = &b.matching {
                    if !vm.matching_labels.is_empty() {
                        return Err(err(pt.r, "vector matching only allowed between instant vectors".into()));
                    }
                    if has_fill(vm) {
                        return Err(err(pt.r, "filling in missing series only allowed between instant vectors".into()));
                    }
                }
                b.matching = None;
            } else if b.op.is_set_operator()
                && let Some(vm) = &b.matching
            {
                if matches!(vm.card, VectorMatchCardinality::OneToMany | VectorMatchCardinality::ManyToOne) {
                    return Err(err(pt.r, format!("no grouping allowed for {} operation", go_quote_str(b.op.as_str()))));
                }
                if vm.card != VectorMatchCardinality::ManyToMany {
                    return Err(err(pt.r, "set operations must always be many-to-many".into()));
                }
                if has_fill(vm) {
                    return Err(err(pt.r, "filling in missing series not allowed for set operators".into()));
                }
            }
            if (lt == ValueType::Scalar || rt == ValueType::Scalar) && b.op.is_set_operator() {
                return Err(err(
                    pt.r,
                    format!("set operator {} not allowed in binary scalar expression", go_quote_str(b.op.as_str())),
                ));
            }
        }
        Expr::Call(c) => {
            let nargs = c.func.arg_types.len();
            let name = go_quote_str(c.func.name);
            if c.func.variadic == 0 {
                if nargs != c.args.len() {
                    return Err(err(
                        pt.r,
                        format!("expected {nargs} argument(s) in call to {name}, got {}", c.args.len()),
                    ));
                }
            } else {
                let na = nargs - 1;
                if na > c.args.len() {
                    return Err(err(
                        pt.r,
                        format!("expected at least {na} argument(s) in call to {name}, got {}", c.args.len()),
                    ));
                }
                let max = na as i64 + c.func.variadic as i64;
                if c.func.variadic > 0 && (max as usize) < c.args.len() {
                    return Err(err(
                        pt.r,
                        format!("expected at most {max} argument(s) in call to {name}, got {}", c.args.len()),
                    ));
                }
            }
            if c.func.name == "info" && c.args.len() > 1 {
                let t = c.args[1].value_type();
                if t != ValueType::Vector {
                    return Err(err(
                        pt.r,
                        format!("expected type instant vector in call to function {name}, got {}", t.documented()),
                    ));
                }
                match &mut c.args[1] {
                    Expr::VectorSelector(vs) if vs.name.is_some() => {
                        return Err(err(kid(1).r, "expected label selectors only, got vector selector instead".into()));
                    }
                    Expr::VectorSelector(vs) => vs.bypass_empty_matcher_check = true,
                    _ => return Err(err(kid(1).r, "expected label selectors only".into())),
                }
            }
            for (i, arg) in c.args.iter_mut().enumerate() {
                let ti = if i >= nargs {
                    if c.func.variadic == 0 {
                        break;
                    }
                    nargs - 1
                } else {
                    i
                };
                let want = c.func.arg_types[ti];
                let apt = kid(i);
                let t = check(input, arg, apt)?;
                if t != want {
                    return Err(err(
                        apt.r,
                        format!(
                            "expected type {} in call to function {name}, got {}",
                            want.documented(),
                            t.documented()
                        ),
                    ));
                }
            }
        }
        Expr::Paren(p) => {
            check(input, &mut p.expr, kid(0))?;
        }
        Expr::Unary(u) => {
            let t = check(input, &mut u.expr, kid(0))?;
            if t != ValueType::Scalar && t != ValueType::Vector {
                return Err(err(
                    pt.r,
                    format!(
                        "unary expression only allowed on expressions of type scalar or instant vector, got {}",
                        go_quote_str(t.documented())
                    ),
                ));
            }
        }
        Expr::Subquery(s) => {
            let t = check(input, &mut s.expr, kid(0))?;
            if t != ValueType::Vector {
                return Err(err(pt.r, format!("subquery is only allowed on instant vector, got {} instead", t.as_str())));
            }
        }
        Expr::MatrixSelector(m) => check_vs(input, &m.vs, kid(0))?,
        Expr::VectorSelector(vs) => check_vs(input, vs, pt)?,
    }
    Ok(e.value_type())
}

fn check_vs(input: &str, vs: &VectorSelector, pt: &PosTree) -> Result<(), ParseError> {
    if let Some(name) = &vs.name {
        let n = vs.matchers.len().saturating_sub(1);
        for m in &vs.matchers[..n] {
            if m.name == "__name__" {
                return Err(ParseError::new(
                    input,
                    pt.r,
                    format!("metric name must not be set twice: {} or {}", go_quote_str(name), go_quote_str(&m.value)),
                ));
            }
        }
        return Ok(());
    }
    if !vs.bypass_empty_matcher_check && !vs.matchers.iter().any(|m| !m.matches("")) {
        return Err(ParseError::new(input, pt.r, "vector selector must contain at least one non-empty matcher"));
    }
    Ok(())
}

fn expect_type(input: &str, e: &mut Expr, pt: &PosTree, want: ValueType, context: &str) -> Result<(), ParseError> {
    let t = check(input, e, pt)?;
    if t != want {
        return Err(ParseError::new(
            input,
            pt.r,
            format!("expected type {} in {context}, got {}", want.documented(), t.documented()),
        ));
    }
    Ok(())
}
