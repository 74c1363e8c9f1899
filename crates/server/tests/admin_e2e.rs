//! Prometheus' admin API through the binary: off unless `--web.enable-admin-api` (503 as upstream);
//! on, `delete_series` hides the matched samples from every API at once (204), `clean_tombstones`
//! rewrites the blocks (204), and `snapshot` leaves a data directory a second server opens with the
//! same answers, head included unless `skip_head`.

mod common;

use common::Server;
use tessera_model::{labels, Sample};
use tessera_protocol::remote_write::WriteSeries;

fn write(s: &Server, t0: i64) {
    let series: Vec<WriteSeries> = (0..4)
        .map(|i| {
            let pts = (0..120).map(|m| Sample::new(t0 + m * 60_000, (m * (i + 1)) as f64)).collect();
            WriteSeries::new(labels!("__name__" => "m", "i" => &i.to_string()), pts)
        })
        .collect();
    assert_eq!(s.write_v1(&series, &[]).0, 204);
}

fn count(s: &Server, q: &str, t: i64) -> usize {
    let (st, body) = s.post_form("/api/v1/query", &format!("query={q}&time={}", t / 1000));
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    v["data"]["result"].as_array().map_or(0, Vec::len)
}

#[test]
fn admin_api_is_off_by_default() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = Server::start(dir.path(), &[]);
    for p in ["/api/v1/admin/tsdb/delete_series?match[]=up", "/api/v1/admin/tsdb/clean_tombstones", "/api/v1/admin/tsdb/snapshot"] {
        let (st, body) = s.post_form(p, "");
        assert_eq!((st, body.as_str()), (503, r#"{"status":"error","errorType":"unavailable","error":"admin APIs disabled"}"#), "{p}");
    }
}

#[test]
fn delete_clean_and_snapshot() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = Server::start(dir.path(), &["--web.enable-admin-api"]);
    let t0 = (tessera_api::now_ms() / 60_000 - 150) * 60_000;
    write(&s, t0);
    let at = t0 + 119 * 60_000;
    assert_eq!(count(&s, "m", at), 4);
    // Parameter errors first, as upstream.
    let (st, body) = s.post_form("/api/v1/admin/tsdb/delete_series", "");
    assert_eq!((st, body.as_str()), (400, r#"{"status":"error","errorType":"bad_data","error":"no match[] parameter provided"}"#));
    assert_eq!(s.post_form("/api/v1/admin/tsdb/delete_series", "match[]=m{").0, 400);
    assert_eq!(s.post_form("/api/v1/admin/tsdb/delete_series", "match[]=m&start=yesterday").0, 400);
    assert_eq!(s.post_form("/api/v1/admin/tsdb/snapshot", "skip_head=maybe").0, 400);
    // A snapshot before the deletion, head included: the second server below sees all four series.
    let (st, body) = s.post_form("/api/v1/admin/tsdb/snapshot", "");
    assert_eq!(st, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let name = v["data"]["name"].as_str().expect("name").to_string();
    assert!(name.len() == 33 && name.as_bytes()[8] == b'T' && name.as_bytes()[15] == b'Z', "{name}");
    // Delete two series over their whole range (PUT works as POST does).
    let r = s
        .http
        .put(format!("{}/api/v1/admin/tsdb/delete_series", s.base))
        .header("Content-Type", "application/x-www-form-urlencoded")
        .body("match[]=m{i=~\"0|1\"}")
        .send()
        .expect("PUT");
    assert_eq!(r.status().as_u16(), 204);
    assert!(r.text().expect("body").is_empty());
    assert_eq!(count(&s, "m", at), 2);
    let (st, body) = s.get("/api/v1/series?match[]=m");
    assert_eq!(st, 200);
    assert!(!body.contains("\"i\":\"0\"") && body.contains("\"i\":\"2\""), "{body}");
    assert_eq!(s.post_form("/api/v1/admin/tsdb/clean_tombstones", "").0, 204);
    assert_eq!(count(&s, "m", at), 2);
    // The snapshot is a data directory of its own.
    let snap = dir.path().join("snapshots").join(&name);
    assert!(snap.join("tessera.json").exists(), "{}", snap.display());
    let copy = tempfile::tempdir().expect("tmp");
    let copied = copy.path().join("data");
    assert!(std::process::Command::new("cp").arg("-a").arg(&snap).arg(&copied).status().expect("cp").success());
    let s2 = Server::start(&copied, &[]);
    assert_eq!(count(&s2, "m", at), 4);
    assert_eq!(count(&s2, "sum(count_over_time(m[3h]))", at), 1);
    let (_, body) = s2.post_form("/api/v1/query", &format!("query=sum(count_over_time(m[3h]))&time={}", at / 1000));
    assert!(body.contains("\"480\""), "all 480 samples: {body}");
    // skip_head: only blocks, which never hold the newest samples (the head does).
    let (_, body) = s.post_form("/api/v1/admin/tsdb/snapshot", "skip_head=true");
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let name2 = v["data"]["name"].as_str().expect("name");
    let s3 = Server::start(&dir.path().join("snapshots").join(name2), &[]);
    let (_, body) = s3.post_form("/api/v1/query", &format!("query=sum(count_over_time(m[3h]))&time={}", at / 1000));
    let v: serde_json::Value = serde_json::from_str(&body).expect("json");
    let n: f64 = v["data"]["result"][0]["value"][1].as_str().map_or(0.0, |x| x.parse().expect("number"));
    assert!(n < 240.0, "the head's samples are not in a skip_head snapshot: {body}");
}

/// Hostile admin requests: extreme and malformed bounds, thousands of matcher sets, regexes that
/// match everything, and snapshots, deletions, tombstone cleaning and writes all at once. Every answer
/// is a 2xx or a 4xx with a reason, the server stays up, and what no deletion matched reads back whole.
#[test]
fn hostile_admin_requests_are_answered_or_refused() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = Server::start(dir.path(), &["--web.enable-admin-api"]);
    let t0 = (tessera_api::now_ms() / 60_000 - 150) * 60_000;
    write(&s, t0);
    let at = t0 + 119 * 60_000;
    let huge = "9".repeat(400);
    for form in [
        "match[]=m&start=1e400".to_string(),
        "match[]=m&start=-1e400".into(),
        "match[]=m&start=NaN".into(),
        "match[]=m&end=Inf".into(),
        format!("match[]=m&start={huge}"),
        "match[]=m&start=9223372036854775807&end=-9223372036854775808".into(),
        "match[]=m&start=%00".into(),
        "match[]=&start=0".into(),
        "match[]={}".into(),
        "match[]={__name__=~\".*\"}".into(),
        format!("match[]=m{{i=~\"{}\"}}", "(a|b)*".repeat(2000)),
        format!("match[]={}", "m{".repeat(5000)),
        "match[]=m&match[]=nope{x=\"1\"}&start=2000-01-01T00:00:00Z&end=2000-01-02T00:00:00Z".into(),
    ] {
        let (st, body) = s.post_form("/api/v1/admin/tsdb/delete_series", &form);
        assert!(st == 204 || st == 400, "{}: {st} {body}", &form[..form.len().min(60)]);
    }
    assert_eq!(count(&s, "m", at), 4, "nothing above matched the samples in range");
    // Thousands of matcher sets in one request, none matching.
    let many: Vec<String> = (0..5000).map(|i| format!("match[]=nope{{i=\"{i}\"}}")).collect();
    let (st, body) = s.post_form("/api/v1/admin/tsdb/delete_series", &many.join("&"));
    assert_eq!(st, 204, "{body}");
    // Snapshots, deletions, cleaning and writes at once.
    std::thread::scope(|sc| {
        for k in 0..4 {
            let s = &s;
            sc.spawn(move || {
                for _ in 0..3 {
                    let (st, body) = match k {
                        0 => s.post_form("/api/v1/admin/tsdb/snapshot", ""),
                        1 => s.post_form("/api/v1/admin/tsdb/delete_series", "match[]=m{i=\"3\"}"),
                        2 => s.post_form("/api/v1/admin/tsdb/clean_tombstones", ""),
                        _ => {
                            // New samples after the written ones (the same again are duplicates).
                            let t = t0 + 120 * 60_000 + 15_000 * k as i64;
                            let series = [WriteSeries::new(labels!("__name__" => "w", "k" => &k.to_string()), vec![Sample::new(t, 1.0)])];
                            let (st, _, body) = s.write_v1(&series, &[]);
                            (st, body)
                        }
                    };
                    assert!((200..300).contains(&st), "{k}: {st} {body}");
                }
            });
        }
    });
    assert_eq!(count(&s, "m", at), 3, "only i=3 deleted");
    assert_eq!(count(&s, "m{i=\"0\"}", at), 1);
    assert_eq!(s.get("/-/healthy").0, 200);
}
