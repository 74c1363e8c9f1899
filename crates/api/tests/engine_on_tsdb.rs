//! The engine over the embedded store: series whose chunks overlap a query's range without a sample in
//! it (the store is told it need not check, `SelectHints::unchecked_range`) are not part of the answer.

use tessera_model::{labels, Matcher, MatchOp, Queryable, Sample, SelectHints};
use tessera_promql::engine::{parse, Engine, EngineOptions, QueryOptions, Value};
use tessera_tsdb::db::Db;
use tessera_tsdb::options::Options;

const T0: i64 = 1_700_000_000_000;
const MIN: i64 = 60_000;

#[test]
fn series_without_a_sample_in_range_are_not_in_the_answer() {
    let dir = tempfile::tempdir().expect("tempdir");
    let db = Db::open(dir.path(), Options { shards: 1, background: false, max_future_ms: 0, ..Options::default() }).expect("open");
    let mut app = db.appender();
    // "gap": one head chunk from T0 to T0+30m holding two samples; "dense": a sample every 15 s.
    app.add_owned(labels!("__name__" => "m", "k" => "gap"), vec![Sample::new(T0, 1.0), Sample::new(T0 + 30 * MIN, 2.0)]);
    app.add_owned(labels!("__name__" => "m", "k" => "dense"), (0..=120).map(|i| Sample::new(T0 + i * 15_000, i as f64)).collect());
    app.commit().expect("commit");

    // The store yields "gap" over [T0+10m, T0+20m] only when told it need not check.
    let q = db.querier(T0 + 10 * MIN, T0 + 20 * MIN).expect("querier");
    let m = [Matcher::new(MatchOp::Equal, "k", "gap").expect("matcher")];
    let names = |hints: &SelectHints| q.select_shard(0, &m, hints).expect("select").count();
    assert_eq!(names(&SelectHints::default()), 0);
    assert_eq!(names(&SelectHints { unchecked_range: true, ..SelectHints::default() }), 1);

    let engine = Engine::new(EngineOptions::default());
    let range = |query: &str| -> Value {
        engine.range(&*db, query, T0 + 10 * MIN, T0 + 20 * MIN, MIN).unwrap_or_else(|e| panic!("{query}: {e}")).value
    };
    let matrix = |v: Value| match v {
        Value::Matrix(m) => m.into_iter().map(|s| (s.labels.get("k").to_string(), s.points.len())).collect::<Vec<_>>(),
        other => panic!("{other:?}"),
    };
    // Range functions, plain selectors (lookback 5 m: "gap" at T0 is out of reach from T0+10m on), and
    // the pushed-down aggregations over both.
    assert_eq!(matrix(range("count_over_time(m[1m])")), vec![("dense".to_string(), 11)]);
    assert_eq!(matrix(range("m")), vec![("dense".to_string(), 11)]);
    assert_eq!(matrix(range("count(count_over_time(m[1m]))")), vec![(String::new(), 11)]);
    assert_eq!(matrix(range("count(m)")), vec![(String::new(), 11)]);
    assert_eq!(matrix(range("avg(rate(m[1m]))")), vec![(String::new(), 11)]);
    assert_eq!(matrix(range("absent_over_time(m{k=\"gap\"}[1m])")), vec![("gap".to_string(), 11)]);
    assert_eq!(matrix(range("absent(m{k=\"gap\"})")), vec![("gap".to_string(), 11)]);
    assert_eq!(matrix(range("count by (k) (last_over_time(m[1m]))")), vec![("dense".to_string(), 11)]);
    // The plan's figures count the series read, not the one without samples.
    // (a range function in the shards, an aggregation of one pushed into them, an ordered one).
    let qo = QueryOptions { trace: true, ..QueryOptions::default() };
    for q in ["count_over_time(m[1m])", "count(count_over_time(m[1m]))", "avg(rate(m[1m]))", "sum(m)"] {
        let expr = parse(q).expect("parses");
        let r = engine.range_expr(&*db, &expr, T0 + 10 * MIN, T0 + 20 * MIN, MIN, &qo).expect("range");
        let t = r.trace.expect("traced");
        fn touched(t: &tessera_promql::engine::plan::TraceNode) -> u64 {
            t.series_touched + t.children.iter().map(touched).sum::<u64>()
        }
        assert_eq!(touched(&t), 1, "{q}: {t:?}");
    }
    // …and where its samples are in reach, it is there.
    let v = engine.range(&*db, "count_over_time(m{k=\"gap\"}[10m])", T0, T0 + 30 * MIN, 10 * MIN).expect("range").value;
    assert_eq!(matrix(v), vec![("gap".to_string(), 2)]);
}
