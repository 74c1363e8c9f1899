//! The PromQL function table (upstream `promql/parser/functions.go`): every function's argument types,
//! variadic count, return type and whether it is experimental. Sorted by name for binary search; the
//! engine dispatches on `Function::name`.

use super::ast::ValueType;
use super::ast::ValueType as V;

/// A function's signature.
#[derive(Debug, PartialEq, Eq)]
pub struct Function {
    pub name: &'static str,
    pub arg_types: &'static [ValueType],
    /// 0: exactly `arg_types.len()` arguments; n > 0: up to n trailing arguments may be omitted
    /// (histogram_quantiles: up to n extra); -1: the last type repeats without bound.
    pub variadic: i32,
    pub return_type: ValueType,
    pub experimental: bool,
}

const fn f(
    name: &'static str,
    arg_types: &'static [ValueType],
    variadic: i32,
    return_type: ValueType,
    experimental: bool,
) -> Function {
    Function { name, arg_types, variadic, return_type, experimental }
}

/// All functions, sorted by name.
pub static FUNCTIONS: &[Function] = &[
    f("abs", &[V::Vector], 0, V::Vector, false),
    f("absent", &[V::Vector], 0, V::Vector, false),
    f("absent_over_time", &[V::Matrix], 0, V::Vector, false),
    f("acos", &[V::Vector], 0, V::Vector, false),
    f("acosh", &[V::Vector], 0, V::Vector, false),
    f("asin", &[V::Vector], 0, V::Vector, false),
    f("asinh", &[V::Vector], 0, V::Vector, false),
    f("atan", &[V::Vector], 0, V::Vector, false),
    f("atanh", &[V::Vector], 0, V::Vector, false),
    f("avg_over_time", &[V::Matrix], 0, V::Vector, false),
    f("ceil", &[V::Vector], 0, V::Vector, false),
    f("changes", &[V::Matrix], 0, V::Vector, false),
    f("clamp", &[V::Vector, V::Scalar, V::Scalar], 0, V::Vector, false),
    f("clamp_max", &[V::Vector, V::Scalar], 0, V::Vector, false),
    f("clamp_min", &[V::Vector, V::Scalar], 0, V::Vector, false),
    f("cos", &[V::Vector], 0, V::Vector, false),
    f("cosh", &[V::Vector], 0, V::Vector, false),
    f("count_over_time", &[V::Matrix], 0, V::Vector, false),
    f("day_of_month", &[V::Vector], 1, V::Vector, false),
    f("day_of_week", &[V::Vector], 1, V::Vector, false),
    f("day_of_year", &[V::Vector], 1, V::Vector, false),
    f("days_in_month", &[V::Vector], 1, V::Vector, false),
    f("deg", &[V::Vector], 0, V::Vector, false),
    f("delta", &[V::Matrix], 0, V::Vector, false),
    f("deriv", &[V::Matrix], 0, V::Vector, false),
    f("double_exponential_smoothing", &[V::Matrix, V::Scalar, V::Scalar], 0, V::Vector, true),
    f("end", &[], 0, V::Scalar, true),
    f("exp", &[V::Vector], 0, V::Vector, false),
    f("first_over_time", &[V::Matrix], 0, V::Vector, false),
    f("floor", &[V::Vector], 0, V::Vector, false),
    f("histogram_avg", &[V::Vector], 0, V::Vector, false),
    f("histogram_count", &[V::Vector], 0, V::Vector, false),
    f("histogram_fraction", &[V::Scalar, V::Scalar, V::Vector], 0, V::Vector, false),
    f("histogram_quantile", &[V::Scalar, V::Vector], 0, V::Vector, false),
    f("histogram_quantiles", &[V::Vector, V::String, V::Scalar, V::Scalar], 9, V::Vector, true),
    f("histogram_stddev", &[V::Vector], 0, V::Vector, false),
    f("histogram_stdvar", &[V::Vector], 0, V::Vector, false),
    f("histogram_sum", &[V::Vector], 0, V::Vector, false),
    f("hour", &[V::Vector], 1, V::Vector, false),
    f("idelta", &[V::Matrix], 0, V::Vector, false),
    f("increase", &[V::Matrix], 0, V::Vector, false),
    f("info", &[V::Vector, V::Vector], 1, V::Vector, true),
    f("irate", &[V::Matrix], 0, V::Vector, false),
    f("label_join", &[V::Vector, V::String, V::String, V::String], -1, V::Vector, false),
    f("label_replace", &[V::Vector, V::String, V::String, V::String, V::String], 0, V::Vector, false),
    f("last_over_time", &[V::Matrix], 0, V::Vector, false),
    f("ln", &[V::Vector], 0, V::Vector, false),
    f("log10", &[V::Vector], 0, V::Vector, false),
    f("log2", &[V::Vector], 0, V::Vector, false),
    f("mad_over_time", &[V::Matrix], 0, V::Vector, true),
    f("max_of", &[V::Scalar, V::Scalar], 0, V::Scalar, true),
    f("max_over_time", &[V::Matrix], 0, V::Vector, false),
    f("min_of", &[V::Scalar, V::Scalar], 0, V::Scalar, true),
    f("min_over_time", &[V::Matrix], 0, V::Vector, false),
    f("minute", &[V::Vector], 1, V::Vector, false),
    f("month", &[V::Vector], 1, V::Vector, false),
    f("pi", &[], 0, V::Scalar, false),
    f("predict_linear", &[V::Matrix, V::Scalar], 0, V::Vector, false),
    f("present_over_time", &[V::Matrix], 0, V::Vector, false),
    f("quantile_over_time", &[V::Scalar, V::Matrix], 0, V::Vector, false),
    f("rad", &[V::Vector], 0, V::Vector, false),
    f("range", &[], 0, V::Scalar, true),
    f("rate", &[V::Matrix], 0, V::Vector, false),
    f("resets", &[V::Matrix], 0, V::Vector, false),
    f("round", &[V::Vector, V::Scalar], 1, V::Vector, false),
    f("scalar", &[V::Vector], 0, V::Scalar, false),
    f("sgn", &[V::Vector], 0, V::Vector, false),
    f("sin", &[V::Vector], 0, V::Vector, false),
    f("sinh", &[V::Vector], 0, V::Vector, false),
    f("sort", &[V::Vector], 0, V::Vector, false),
    f("sort_by_label", &[V::Vector, V::String], -1, V::Vector, true),
    f("sort_by_label_desc", &[V::Vector, V::String], -1, V::Vector, true),
    f("sort_desc", &[V::Vector], 0, V::Vector, false),
    f("sqrt", &[V::Vector], 0, V::Vector, false),
    f("start", &[], 0, V::Scalar, true),
    f("start_timestamp", &[V::Vector], 0, V::Vector, true),
    f("stddev_over_time", &[V::Matrix], 0, V::Vector, false),
    f("stdvar_over_time", &[V::Matrix], 0, V::Vector, false),
    f("step", &[], 0, V::Scalar, true),
    f("sum_over_time", &[V::Matrix], 0, V::Vector, false),
    f("tan", &[V::Vector], 0, V::Vector, false),
    f("tanh", &[V::Vector], 0, V::Vector, false),
    f("time", &[], 0, V::Scalar, false),
    f("timestamp", &[V::Vector], 0, V::Vector, false),
    f("ts_of_first_over_time", &[V::Matrix], 0, V::Vector, true),
    f("ts_of_last_over_time", &[V::Matrix], 0, V::Vector, true),
    f("ts_of_max_over_time", &[V::Matrix], 0, V::Vector, true),
    f("ts_of_min_over_time", &[V::Matrix], 0, V::Vector, true),
    f("vector", &[V::Scalar], 0, V::Vector, false),
    f("year", &[V::Vector], 1, V::Vector, false),
];

/// Looks a function up by name.
pub fn get_function(name: &str) -> Option<&'static Function> {
    FUNCTIONS.binary_search_by(|f| f.name.cmp(name)).ok().map(|i| &FUNCTIONS[i])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted_and_lookups_work() {
        assert!(FUNCTIONS.windows(2).all(|w| w[0].name < w[1].name));
        assert_eq!(get_function("rate").map(|f| f.arg_types), Some(&[ValueType::Matrix][..]));
        assert!(get_function("holt_winters").is_none());
        assert!(get_function("info").is_some_and(|f| f.experimental));
    }
}
