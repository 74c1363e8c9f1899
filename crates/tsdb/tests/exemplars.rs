//! Exemplars through the embedded API: stored with their series, bounded, replayed from the WAL and
//! kept across a head cut (checkpoint).

mod common;

use common::*;
use tessera_model::{labels, Exemplar, Labels, MatchOp, Sample};
use tessera_tsdb::Db;

fn ex(t: i64, v: f64, trace: &str) -> Exemplar {
    Exemplar { labels: labels!("trace_id" => trace), value: v, t }
}

fn sel(db: &std::sync::Arc<Db>) -> Vec<(Labels, Vec<Exemplar>)> {
    db.select_exemplars(i64::MIN, i64::MAX, &[vec![m(MatchOp::Regex, "__name__", ".+")]])
}

#[test]
fn exemplars_are_stored_bounded_replayed_and_checkpointed() {
    let dir = tempfile::tempdir().expect("tmp");
    let o = || tessera_tsdb::Options { max_exemplars: 4, ..opts(1) };
    let db = Db::open(dir.path(), o()).expect("open");
    let a = labels!("__name__" => "req", "job" => "a");
    let mut app = db.appender();
    app.add(a.clone(), &[Sample::new(10, 1.0), Sample::new(20, 2.0)]);
    app.add_exemplars(a.clone(), vec![ex(10, 1.0, "x"), ex(20, 2.0, "y"), ex(20, 2.0, "y")]);
    // Exemplars of a series that has no samples are not stored (upstream needs the series).
    app.add_exemplars(labels!("__name__" => "ghost"), vec![ex(5, 1.0, "z")]);
    let rep = app.commit().expect("commit");
    assert_eq!(rep.exemplars_written, 3, "the duplicate counts as a no-op write");
    assert_eq!(sel(&db), vec![(a.clone(), vec![ex(10, 1.0, "x"), ex(20, 2.0, "y")])]);
    // Out of order without a window: refused; the ring keeps the newest 4.
    let mut app = db.appender();
    app.add_exemplars(a.clone(), vec![ex(15, 1.0, "old"), ex(30, 3.0, "p"), ex(40, 4.0, "q"), ex(50, 5.0, "r")]);
    assert_eq!(app.commit().expect("commit").exemplars_written, 3);
    let times = |v: &[(Labels, Vec<Exemplar>)]| v[0].1.iter().map(|e| e.t).collect::<Vec<_>>();
    assert_eq!(times(&sel(&db)), [20, 30, 40, 50]);
    assert_eq!(db.exemplar_count(), 4);
    // Matchers and the time range.
    assert!(db.select_exemplars(0, 100, &[vec![m(MatchOp::Equal, "job", "b")]]).is_empty());
    assert_eq!(db.select_exemplars(25, 45, &[vec![eq("job", "a")]])[0].1.len(), 2);
    drop(db);
    let db = Db::open(dir.path(), o()).expect("reopen");
    assert_eq!(times(&sel(&db)), [20, 30, 40, 50], "replayed from the WAL");
    // Cut the whole head (a checkpoint replaces the old segments; the series leaves the head): the
    // exemplars survive in the checkpoint, as the ring outlives the series' time in the head.
    let mut app = db.appender();
    app.add(a.clone(), &(1..40).map(|i| Sample::new(50 + i * 100, 1.0)).collect::<Vec<_>>());
    app.commit().expect("commit");
    db.flush().expect("flush");
    let mut app = db.appender();
    app.add(a.clone(), &[Sample::new(10_000, 1.0)]);
    app.commit().expect("commit");
    drop(db);
    let db = Db::open(dir.path(), o()).expect("reopen");
    assert_eq!(times(&sel(&db)), [20, 30, 40, 50], "after a checkpoint");
}

