//! A seeded generator of random, mostly type-correct PromQL over the data set of [`super::data`].
//!
//! A small recursive generator with a depth budget: `vector`, `scalar` and `range` produce an expression
//! of that type, choosing among selectors (every matcher kind, `offset`, `@`), range functions over
//! selectors and subqueries, instant functions, aggregations with `by`/`without`, binary operators with
//! vector matching, and literals. A few percent of the expressions are wrong on purpose (type errors,
//! bad regexes, many-to-many matches fall out naturally) so that error answers are compared too.
//!
//! Each expression carries what the comparison needs to know about it: whether the order of an
//! instant result is defined ([`Order`]), and which documented differences between Tessera and
//! Prometheus ([`Known`]) it may run into.

use super::data::{label_values, Family, Kind, FAMILIES};
use crate::nodegen::Rng;

/// Whether an instant query's result order is part of the answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Order {
    /// A set: order ignored.
    Unordered,
    /// `sort`, `sort_desc`, ungrouped `topk`/`bottomk`: the order of different values matters.
    ByValue,
    /// `sort_by_label(_desc)`: the order is fully defined (ties fall back to the whole label set).
    ByLabels,
}

/// Documented, accepted differences between Tessera and Prometheus an expression may run into; a
/// disagreement on an expression tagged with one is reported as known, not as a failure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Known {
    /// `timestamp(v @ t offset d)`: Prometheus drops the offset, Tessera keeps it.
    TimestampAtOffset,
    /// Date functions (`year`, `minute`, …) of NaN, ±Inf or values beyond int64: Tessera answers NaN,
    /// Prometheus a CPU-dependent value.
    DateOfNonFinite,
    /// The order of tied values among more than 12 `topk`/`bottomk` results.
    TopkTiesOver12,
    /// Prometheus itself answered differently when asked again: the answer depends on Go map order
    /// (which series `limitk` keeps, or which tied values `topk` keeps, after a range evaluation or
    /// `count_values` in Prometheus' `rangeEval`/`aggregation`, whose output order is a map's).
    UpstreamNondeterministic,
}

impl Known {
    pub fn describe(self) -> &'static str {
        match self {
            Known::TimestampAtOffset => "timestamp() of a selector with both @ and offset (Prometheus drops the offset)",
            Known::DateOfNonFinite => "date function of NaN/±Inf/beyond-int64 values (Prometheus' answer is CPU-dependent)",
            Known::TopkTiesOver12 => "order of tied values among more than 12 topk/bottomk results",
            Known::UpstreamNondeterministic => "Prometheus' own answer changes from one run to the next (Go map order)",
        }
    }
}

/// The type of a generated expression.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Type {
    Vector,
    Scalar,
    Matrix,
    String,
}

/// One generated expression.
#[derive(Debug, Clone)]
pub struct Expr {
    pub text: String,
    pub ty: Type,
    pub order: Order,
    pub known: Vec<Known>,
}

/// What kind of series a selector should pick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    Any,
    /// Counters and buckets (for rate and friends).
    Counter,
    Bucket,
    /// Anything but `tdiff_odd` (finite values within int64).
    Finite,
}

const RANGE_FNS: &[&str] = &[
    "rate",
    "irate",
    "increase",
    "delta",
    "idelta",
    "deriv",
    "changes",
    "resets",
    "avg_over_time",
    "min_over_time",
    "max_over_time",
    "sum_over_time",
    "count_over_time",
    "stddev_over_time",
    "stdvar_over_time",
    "last_over_time",
    "first_over_time",
    "present_over_time",
    "mad_over_time",
    "absent_over_time",
    "ts_of_max_over_time",
    "ts_of_min_over_time",
    "ts_of_last_over_time",
    "ts_of_first_over_time",
    "predict_linear",
    "quantile_over_time",
    "double_exponential_smoothing",
];

const MATH_FNS: &[&str] = &[
    "abs", "ceil", "floor", "exp", "ln", "log2", "log10", "sqrt", "sgn", "sin", "cos", "tan", "asin", "acos", "atan", "sinh",
    "cosh", "tanh", "asinh", "acosh", "atanh", "deg", "rad",
];

const DATE_FNS: &[&str] = &["minute", "hour", "day_of_week", "day_of_month", "day_of_year", "days_in_month", "month", "year"];

const AGGRS: &[&str] = &[
    "sum", "avg", "min", "max", "count", "group", "stddev", "stdvar", "quantile", "topk", "bottomk", "count_values", "limitk",
    "limit_ratio",
];

const GROUP_LABELS: &[&str] = &["job", "instance", "code", "mode", "le", "kind", "__name__", "nosuchlabel"];

const RANGES: &[&str] = &["1m", "2m", "5m", "5m", "10m", "1h", "30s", "15s", "90s", "1m30s"];
const OFFSETS: &[&str] = &["30s", "1m", "5m", "10m", "-2m", "1m30s", "-30s", "7m"];

/// The generator: a random stream plus the data set's time span (for `@` timestamps).
pub struct Gen {
    rng: Rng,
    data_start_s: i64,
    data_end_s: i64,
    known: Vec<Known>,
    /// A metric family the current binary operation prefers, so that its sides match now and then.
    hint: Option<&'static Family>,
}

impl Gen {
    pub fn new(seed: u64, data_start_s: i64, data_end_s: i64) -> Gen {
        Gen { rng: Rng::new(seed), data_start_s, data_end_s, known: Vec::new(), hint: None }
    }

    /// The random stream, for the caller's choice of evaluation times.
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    fn below(&mut self, n: usize) -> usize {
        (self.rng.next_u64() % n as u64) as usize
    }

    fn chance(&mut self, p: f64) -> bool {
        self.rng.f64() < p
    }

    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }

    fn tag(&mut self, k: Known) {
        if !self.known.contains(&k) {
            self.known.push(k);
        }
    }

    /// One top-level expression: mostly vectors, some scalars, a few range vectors and strings.
    pub fn expr(&mut self) -> Expr {
        self.known.clear();
        self.hint = None;
        let depth = 1 + self.below(4) as u32;
        let r = self.rng.f64();
        let (text, ty, order) = if r < 0.84 {
            let (t, o) = self.vector(depth);
            (t, Type::Vector, o)
        } else if r < 0.93 {
            (self.scalar(depth), Type::Scalar, Order::Unordered)
        } else if r < 0.98 {
            (self.range(depth), Type::Matrix, Order::Unordered)
        } else {
            (self.pick(&["\"hello\"", "`raw\\string`", "'single'"]).to_string(), Type::String, Order::Unordered)
        };
        let mut known = std::mem::take(&mut self.known);
        known.sort();
        Expr { text, ty, order, known }
    }

    fn family(&mut self, want: Want) -> &'static Family {
        if let Some(h) = self.hint {
            let fits = match want {
                Want::Any => true,
                Want::Counter => matches!(h.kind, Kind::Counter | Kind::Bucket),
                Want::Bucket => h.kind == Kind::Bucket,
                Want::Finite => h.kind != Kind::Odd,
            };
            if fits && self.chance(0.7) {
                return h;
            }
        }
        let fams: Vec<&'static Family> = FAMILIES
            .iter()
            .filter(|f| match want {
                Want::Any => true,
                Want::Counter => matches!(f.kind, Kind::Counter | Kind::Bucket),
                Want::Bucket => f.kind == Kind::Bucket,
                Want::Finite => f.kind != Kind::Odd,
            })
            .collect();
        fams[self.below(fams.len())]
    }

    fn regex_for(&mut self, label: &str) -> String {
        let vals = label_values(label);
        let esc = |v: &str| v.replace('.', "\\\\.").replace('+', "\\\\+");
        match self.below(8) {
            0 => format!("\"{}|{}\"", esc(self.pick(vals)), esc(self.pick(vals))),
            1 => {
                let v = self.pick(vals);
                format!("\"{}.*\"", esc(&v[..2.min(v.len())]))
            }
            2 => "\".*\"".into(),
            3 => "\".+\"".into(),
            4 => "\"\"".into(),
            5 => format!("\"(?i){}\"", esc(&self.pick(vals).to_uppercase())),
            6 => format!("`{}`", self.pick(vals).replace('.', "\\.").replace('+', "\\+")),
            _ => format!("\"{}\"", esc(self.pick(vals))),
        }
    }

    /// A bare selector `name{matchers}` (no modifiers).
    fn bare_selector(&mut self, want: Want) -> String {
        let fam = self.family(want);
        let mut matchers = Vec::new();
        let style = self.rng.f64();
        let name_in_braces = style < 0.1;
        if name_in_braces {
            matchers.push(format!("__name__=\"{}\"", fam.name));
        } else if style < 0.13 && want == Want::Any {
            matchers.push(self.pick(&["__name__=~\"tdiff_(queue_length|gappy)\"", "__name__=~\"tdiff_.*_total\"", "__name__!~\"tdiff_.*\""]).into());
        }
        let n = self.pick(&[0, 0, 0, 1, 1, 1, 1, 2, 2, 3]);
        for _ in 0..n {
            let label = self.pick(fam.labels);
            let op = self.pick(&["=", "=", "!=", "=~", "=~", "!~"]);
            let value = match op {
                "=" | "!=" => {
                    if self.chance(0.1) {
                        "\"nosuchvalue\"".to_string()
                    } else if self.chance(0.05) {
                        "\"\"".to_string()
                    } else {
                        format!("\"{}\"", self.pick(label_values(label)))
                    }
                }
                _ => self.regex_for(label),
            };
            matchers.push(format!("{label}{op}{value}"));
        }
        if name_in_braces || (style < 0.13 && want == Want::Any) {
            if matchers.len() == 1 && matchers[0].starts_with("__name__!~") {
                // A negative name matcher alone matches no name, which is a parse error; give it company.
                matchers.push("job=\"api\"".into());
            }
            format!("{{{}}}", matchers.join(", "))
        } else if matchers.is_empty() && self.chance(0.5) {
            fam.name.to_string()
        } else {
            format!("{}{{{}}}", fam.name, matchers.join(","))
        }
    }

    fn at(&mut self) -> String {
        match self.below(4) {
            0 => "@ start()".into(),
            1 => "@ end()".into(),
            _ => {
                let span = (self.data_end_s - self.data_start_s + 240) as u64;
                let t = self.data_start_s - 120 + (self.rng.next_u64() % span) as i64;
                if self.chance(0.3) {
                    format!("@ {t}.5")
                } else {
                    format!("@ {t}")
                }
            }
        }
    }

    /// ` offset d`, ` @ t`, both (in either order) or nothing; says which it wrote.
    fn modifiers(&mut self) -> (String, bool, bool) {
        let off = self.chance(0.2);
        let at = self.chance(0.15);
        let o = if off { format!(" offset {}", self.pick(OFFSETS)) } else { String::new() };
        let a = if at { format!(" {}", self.at()) } else { String::new() };
        let s = if self.chance(0.5) { format!("{o}{a}") } else { format!("{a}{o}") };
        (s, off, at)
    }

    fn selector(&mut self, want: Want) -> String {
        let s = self.bare_selector(want);
        let (m, _, _) = self.modifiers();
        format!("{s}{m}")
    }

    /// A range vector: a selector with a range, or a subquery.
    fn range_of(&mut self, depth: u32, want: Want) -> String {
        if depth > 0 && self.chance(0.2) {
            let (inner, _) = self.vector(depth - 1);
            let range = self.pick(&["5m", "10m", "30m", "2m", "1h"]);
            let step = self.pick(&["", "15s", "30s", "1m", "20s"]);
            let (m, _, _) = self.modifiers();
            format!("({inner})[{range}:{step}]{m}")
        } else {
            let s = self.bare_selector(want);
            let r = self.pick(RANGES);
            let (m, _, _) = self.modifiers();
            format!("{s}[{r}]{m}")
        }
    }

    pub fn range(&mut self, depth: u32) -> String {
        self.range_of(depth, Want::Any)
    }

    fn number(&mut self) -> String {
        self.pick(&["0", "1", "2", "3", "0.5", "-1", "10", "100", "1e3", "0.001", "-2.5", "Inf", "-Inf", "NaN", "0x10", "42"]).into()
    }

    pub fn scalar(&mut self, depth: u32) -> String {
        if depth == 0 {
            return if self.chance(0.8) { self.number() } else { self.pick(&["time()", "pi()"]).into() };
        }
        match self.below(10) {
            0..=2 => self.number(),
            3 => {
                let (v, _) = self.vector(depth - 1);
                format!("scalar({v})")
            }
            4 => self.pick(&["time()", "pi()", "start()", "end()", "range()", "step()"]).into(),
            5 | 6 => {
                let a = self.scalar(depth - 1);
                let b = self.scalar(depth - 1);
                let op = self.pick(&["+", "-", "*", "/", "%", "^", "atan2", "== bool", "!= bool", "> bool", "< bool", ">= bool", "<= bool"]);
                format!("{a} {op} {b}")
            }
            7 => format!("-({})", self.scalar(depth - 1)),
            8 => {
                let f = self.pick(&["max_of", "min_of"]);
                let a = self.scalar(depth - 1);
                let b = self.scalar(depth - 1);
                format!("{f}({a}, {b})")
            }
            _ => format!("({})", self.scalar(depth - 1)),
        }
    }

    /// A small scalar argument (mostly a literal from `choices`).
    fn param(&mut self, depth: u32, choices: &[&str]) -> String {
        if depth > 0 && self.chance(0.1) {
            self.scalar(depth - 1)
        } else {
            self.pick(choices).to_string()
        }
    }

    fn grouping(&mut self) -> Option<String> {
        match self.below(10) {
            0..=3 => None,
            4..=7 => {
                let n = 1 + self.below(2);
                let mut ls: Vec<&str> = (0..n).map(|_| self.pick(GROUP_LABELS)).collect();
                ls.dedup();
                let kw = if self.below(10) < 6 { "by" } else { "without" };
                Some(format!("{kw} ({})", ls.join(", ")))
            }
            8 => Some("by ()".into()),
            _ => Some("without ()".into()),
        }
    }

    fn range_function(&mut self, depth: u32) -> String {
        let f = self.pick(RANGE_FNS);
        let want = match f {
            "rate" | "irate" | "increase" | "resets" if self.chance(0.8) => Want::Counter,
            _ => Want::Any,
        };
        let r = self.range_of(depth, want);
        match f {
            "predict_linear" => {
                let t = self.param(depth, &["60", "300", "0", "-600", "3600"]);
                format!("predict_linear({r}, {t})")
            }
            "quantile_over_time" => {
                let q = self.param(depth, &["0.5", "0.9", "0", "1", "0.99", "-1", "2"]);
                format!("quantile_over_time({q}, {r})")
            }
            "double_exponential_smoothing" => {
                let sf = self.param(depth, &["0.5", "0.1", "0.9", "0", "1"]);
                let tf = self.param(depth, &["0.5", "0.3", "0.8", "1.5"]);
                format!("double_exponential_smoothing({r}, {sf}, {tf})")
            }
            _ => format!("{f}({r})"),
        }
    }

    /// `timestamp(selector modifiers)`, tagged when both `@` and `offset` are present.
    fn timestamp_of_selector(&mut self) -> String {
        let sel = self.bare_selector(Want::Any);
        let (m, off, at) = self.modifiers();
        if off && at {
            self.tag(Known::TimestampAtOffset);
        }
        format!("timestamp({sel}{m})")
    }

    fn date_function(&mut self, depth: u32) -> String {
        let f = self.pick(DATE_FNS);
        match self.below(10) {
            0 | 1 => format!("{f}()"),
            2 | 3 => format!("{f}({})", self.timestamp_of_selector()),
            4 => format!("{f}(vector(time()))"),
            5..=7 => format!("{f}({})", self.selector(Want::Finite)),
            _ => {
                // Anything may be NaN, ±Inf or huge by now: the documented difference applies.
                self.tag(Known::DateOfNonFinite);
                let (v, _) = self.vector(depth - 1);
                format!("{f}({v})")
            }
        }
    }

    fn aggregation(&mut self, depth: u32) -> (String, Order) {
        let op = self.pick(AGGRS);
        let (inner, _) = self.vector(depth - 1);
        let g = self.grouping();
        let param = match op {
            "quantile" => Some(self.param(depth, &["0.5", "0.9", "0", "1", "0.25", "-0.5", "1.5", "NaN"])),
            "topk" | "bottomk" | "limitk" => {
                let k = self.param(depth, &["1", "2", "3", "5", "0", "-1", "2.5", "20"]);
                if k == "20" && op != "limitk" {
                    self.tag(Known::TopkTiesOver12);
                }
                Some(k)
            }
            "count_values" => Some(self.pick(&["\"value\"", "\"job\"", "\"le\"", "\"v\""]).to_string()),
            "limit_ratio" => Some(self.param(depth, &["0.5", "-0.5", "1", "0", "0.25", "-1", "1.5"])),
            _ => None,
        };
        let args = match &param {
            Some(p) => format!("{p}, {inner}"),
            None => inner,
        };
        let order = match (op, &g) {
            ("topk" | "bottomk", None) => Order::ByValue,
            ("topk" | "bottomk", Some(g)) if g == "by ()" => Order::ByValue,
            _ => Order::Unordered,
        };
        let text = match g {
            None => format!("{op}({args})"),
            Some(g) if self.chance(0.3) => format!("{op}({args}) {g}"),
            Some(g) => format!("{op} {g} ({args})"),
        };
        (text, order)
    }

    fn matching(&mut self) -> String {
        let n = self.below(3);
        let mut ls: Vec<&str> = (0..n).map(|_| self.pick(GROUP_LABELS)).collect();
        ls.dedup();
        let ls = ls.join(", ");
        match self.below(10) {
            0..=4 => String::new(),
            5..=7 => {
                let kw = if self.chance(0.6) { "on" } else { "ignoring" };
                if self.chance(0.3) {
                    let side = if self.chance(0.5) { "group_left" } else { "group_right" };
                    let extra = if self.chance(0.5) { format!(" ({})", self.pick(GROUP_LABELS)) } else { String::new() };
                    format!(" {kw} ({ls}) {side}{extra}")
                } else {
                    format!(" {kw} ({ls})")
                }
            }
            8 => " on ()".into(),
            _ => " ignoring (code, mode)".into(),
        }
    }

    fn binop_vv(&mut self, depth: u32) -> String {
        let saved = self.hint;
        if self.hint.is_none() || self.chance(0.3) {
            self.hint = Some(self.family(Want::Any));
        }
        let (a, _) = self.vector(depth - 1);
        let (b, _) = self.vector(depth - 1);
        self.hint = saved;
        let kind = self.below(10);
        let (op, set) = match kind {
            0..=3 => (self.pick(&["+", "-", "*", "/", "%", "^", "atan2"]).to_string(), false),
            4..=6 => {
                let op = self.pick(&["==", "!=", ">", "<", ">=", "<="]);
                (if self.chance(0.4) { format!("{op} bool") } else { op.to_string() }, false)
            }
            _ => (self.pick(&["and", "or", "unless"]).to_string(), true),
        };
        let mut m = self.matching();
        if set && m.contains("group_") && self.chance(0.7) {
            // group_left/right with a set operator is a parse error; keep a few of those.
            m = m.split(" group_").next().unwrap_or("").to_string();
        }
        format!("{a} {op}{m} {b}")
    }

    fn binop_vs(&mut self, depth: u32) -> String {
        let (v, _) = self.vector(depth - 1);
        let s = self.scalar(depth - 1);
        let op = self.pick(&["+", "-", "*", "/", "%", "^", "atan2", "==", "!=", ">", "<", ">=", "<=", "> bool", "== bool", "<= bool"]);
        if self.chance(0.5) {
            format!("{v} {op} {s}")
        } else {
            format!("{s} {op} {v}")
        }
    }

    fn label_function(&mut self, depth: u32) -> String {
        let (v, _) = self.vector(depth - 1);
        if self.chance(0.6) {
            let dst = self.pick(&["\"job\"", "\"new\"", "\"instance\"", "\"__name__\"", "\"1bad\""]);
            let repl = self.pick(&["\"$1\"", "\"x-$1\"", "\"\"", "\"${1}y\"", "\"host\""]);
            let src = self.pick(&["\"instance\"", "\"job\"", "\"code\"", "\"nosuchlabel\"", "\"__name__\""]);
            let re = self.pick(&["\"(.*)\"", "`10\\.0\\.0\\.(\\d+):.*`", "\"(a|d).*\"", "\"\"", "\".*_(.*)\"", "\"([\""]);
            format!("label_replace({v}, {dst}, {repl}, {src}, {re})")
        } else {
            let dst = self.pick(&["\"new\"", "\"job\"", "\"__name__\""]);
            let sep = self.pick(&["\"-\"", "\",\"", "\"\""]);
            let n = 1 + self.below(3);
            let srcs: Vec<&str> = (0..n).map(|_| self.pick(&["\"instance\"", "\"job\"", "\"code\"", "\"mode\"", "\"nosuchlabel\""])).collect();
            format!("label_join({v}, {dst}, {sep}, {})", srcs.join(", "))
        }
    }

    fn histogram_quantile(&mut self, depth: u32) -> String {
        let q = self.param(depth, &["0.5", "0.9", "0.99", "0", "1", "-1", "2", "NaN", "0.25"]);
        let r = self.pick(RANGES);
        let sel = self.bare_selector(Want::Bucket);
        let f = self.pick(&["rate", "increase", "irate"]);
        let b = match self.below(7) {
            0 => format!("{f}({sel}[{r}])"),
            1 | 2 => format!("sum by (le) ({f}({sel}[{r}]))"),
            3 => format!("sum by (le, job) ({f}({sel}[{r}]))"),
            4 => format!("sum without (instance) ({f}({sel}[{r}]))"),
            5 => sel,
            _ => self.vector(depth - 1).0,
        };
        format!("histogram_quantile({q}, {b})")
    }

    /// A deliberately wrong expression.
    fn wrong(&mut self) -> String {
        let s = self.bare_selector(Want::Any);
        match self.below(8) {
            0 => format!("rate({s})"),
            1 => format!("sum({s}[5m])"),
            2 => format!("{s}[5m] + 1"),
            3 => format!("topk({s}, {s})"),
            4 => format!("nosuchfunction({s})"),
            5 => "tdiff_queue_length{job=~\"(\"}".into(),
            6 => format!("{s} and on(job) group_left {s}"),
            _ => format!("{s}[5m:1m:1m]"),
        }
    }

    /// An instant vector, with its order semantics when it is the outermost expression.
    pub fn vector(&mut self, depth: u32) -> (String, Order) {
        if depth == 0 {
            return (self.selector(Want::Any), Order::Unordered);
        }
        let text = match self.below(100) {
            0..=11 => self.selector(Want::Any),
            12..=29 => self.range_function(depth),
            30..=37 => {
                let f = self.pick(MATH_FNS);
                format!("{f}({})", self.vector(depth - 1).0)
            }
            38..=40 => {
                let (v, _) = self.vector(depth - 1);
                match self.below(5) {
                    0 => format!("round({v})"),
                    1 => format!("round({v}, {})", self.param(depth, &["0.5", "10", "0.1", "-1", "0"])),
                    2 => format!("clamp({v}, {}, {})", self.param(depth, &["-1", "0", "2"]), self.param(depth, &["1", "5", "-5"])),
                    3 => format!("clamp_min({v}, {})", self.param(depth, &["0", "1", "-2.5"])),
                    _ => format!("clamp_max({v}, {})", self.param(depth, &["0", "1", "5"])),
                }
            }
            41..=54 => return self.aggregation(depth),
            55..=66 => self.binop_vv(depth),
            67..=74 => self.binop_vs(depth),
            75..=77 => self.label_function(depth),
            78..=81 => {
                let (v, _) = self.vector(depth - 1);
                return match self.below(4) {
                    0 => (format!("sort({v})"), Order::ByValue),
                    1 => (format!("sort_desc({v})"), Order::ByValue),
                    2 => (format!("sort_by_label({v}, \"{}\")", self.pick(GROUP_LABELS)), Order::ByLabels),
                    _ => {
                        let a = self.pick(GROUP_LABELS);
                        let b = self.pick(GROUP_LABELS);
                        (format!("sort_by_label_desc({v}, \"{a}\", \"{b}\")"), Order::ByLabels)
                    }
                };
            }
            82..=84 => self.histogram_quantile(depth),
            85..=86 => {
                if self.chance(0.5) {
                    self.timestamp_of_selector()
                } else {
                    format!("timestamp({})", self.vector(depth - 1).0)
                }
            }
            87..=88 => self.date_function(depth),
            89 => format!("vector({})", self.scalar(depth - 1)),
            90..=91 => {
                if self.chance(0.5) {
                    let ms = self.pick(&["", "job=\"api\"", "job=\"x\",instance=~\"y.*\"", "code!=\"200\",job=\"a\",job=\"b\""]);
                    format!("absent(tdiff_missing{{{ms}}})")
                } else {
                    format!("absent({})", self.vector(depth - 1).0)
                }
            }
            92 => format!("absent_over_time({})", self.range(depth - 1)),
            93..=94 => format!("-{}", self.vector(depth - 1).0),
            95..=96 => {
                let (v, o) = self.vector(depth - 1);
                return (format!("({v})"), o);
            }
            97 => format!("start_timestamp({})", self.selector(Want::Any)),
            _ => {
                if self.chance(0.5) {
                    self.wrong()
                } else {
                    format!("{} {}", self.vector(depth - 1).0, self.pick(&["+ on(job) group_left", "* on(instance)", "or ignoring(job)"]))
                        + " "
                        + &self.selector(Want::Any)
                }
            }
        };
        (text, Order::Unordered)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_expressions_and_every_kind_occurs() {
        let mut a = Gen::new(7, 1_000_000, 1_003_600);
        let mut b = Gen::new(7, 1_000_000, 1_003_600);
        let xs: Vec<String> = (0..2000).map(|_| a.expr().text).collect();
        let ys: Vec<String> = (0..2000).map(|_| b.expr().text).collect();
        assert_eq!(xs, ys);
        let all = xs.join("\n");
        for needle in ["rate(", "@ start()", "@ end()", "offset", "=~", "!~", "!=", "group_left", "group_right", "by (", "without (",
            "topk(", "bottomk(", "count_values(", "limitk(", "limit_ratio(", "quantile_over_time(", "double_exponential_smoothing(",
            "histogram_quantile(", "label_replace(", "label_join(", "sort_by_label(", "absent(", "absent_over_time(", "scalar(",
            "vector(", "time()", " bool ", " unless ", ":1m]", "mad_over_time("]
        {
            assert!(all.contains(needle), "{needle} never generated");
        }
    }
}
