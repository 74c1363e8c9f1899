//! Stores through the binary: `[stores.<name>]` tables in the config file; a store addressed by the
//! `X-Scope-OrgID` header or the `/store/<name>/` path prefix; each store's series, metadata and
//! queries apart from the others', `default` unchanged for clients that know nothing of stores;
//! unknown stores 404, conflicting addresses 400; grants per store; data kept across restarts.

mod common;

use base64::Engine as _;
use common::Server;
use tessera_model::{labels, Sample};
use tessera_protocol::remote_write::{self as rw, WriteSeries};

fn series(name: &str, v: f64, t: i64) -> Vec<WriteSeries> {
    vec![WriteSeries::new(labels!("__name__" => name, "job" => "x"), vec![Sample::new(t, v)])]
}

fn write_with(s: &Server, path: &str, header: Option<&str>, ws: &[WriteSeries], auth: Option<&str>) -> u16 {
    let mut r = s
        .http
        .post(format!("{}{path}", s.base))
        .header("Content-Type", common::CT_V1)
        .header("Content-Encoding", "snappy")
        .body(rw::compress(&rw::encode_v1(ws, &[])));
    if let Some(h) = header {
        r = r.header("X-Scope-OrgID", h);
    }
    if let Some(a) = auth {
        r = r.header("Authorization", a);
    }
    r.send().expect("POST").status().as_u16()
}

fn query(s: &Server, prefix: &str, header: Option<&str>, q: &str, auth: Option<&str>) -> (u16, String) {
    let mut r = s.http.get(format!("{}{prefix}/api/v1/query", s.base)).query(&[("query", q)]);
    if let Some(h) = header {
        r = r.header("X-Scope-OrgID", h);
    }
    if let Some(a) = auth {
        r = r.header("Authorization", a);
    }
    let r = r.send().expect("GET");
    (r.status().as_u16(), r.text().expect("body"))
}

#[test]
fn stores_are_apart_and_addressed_both_ways() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("tessera.toml");
    let hash = bcrypt::hash("pw", 4).expect("bcrypt");
    std::fs::write(&cfg, "[stores.team-a]\nstorage.tsdb.retention.time = \"30d\"\n\n[stores.team_b]\nstorage.tsdb.max-series = 1\n").expect("toml");
    let web = dir.path().join("web.yml");
    std::fs::write(
        &web,
        format!("basic_auth_users:\n  admin: {hash}\n  bob: {hash}\nauthorization:\n  users:\n    bob: {{ read: [team_b], write: [team_b] }}\n"),
    )
    .expect("web");
    let data = dir.path().join("data");
    let admin = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("admin:pw"));
    let flags = [format!("--config.file={}", cfg.display()), format!("--web.config.file={}", web.display())];
    let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
    let s = Server::start_auth(&data, &flags, Some(&admin));
    let bob = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("bob:pw"));
    let a = Some(admin.as_str());
    let t = tessera_api::now_ms() - 10_000;
    assert_eq!(write_with(&s, "/api/v1/write", None, &series("in_default", 1.0, t), a), 204);
    assert_eq!(write_with(&s, "/api/v1/write", Some("team-a"), &series("in_a", 2.0, t), a), 204);
    assert_eq!(write_with(&s, "/store/team_b/api/v1/write", None, &series("in_b", 3.0, t), a), 204);
    // Each store sees its own series only.
    assert_eq!(names(&s, &admin, "", None), r#"{"status":"success","data":["in_default"]}"#);
    assert_eq!(names(&s, &admin, "", Some("team-a")), r#"{"status":"success","data":["in_a"]}"#);
    assert_eq!(names(&s, &admin, "/store/team-a", None), r#"{"status":"success","data":["in_a"]}"#);
    assert_eq!(names(&s, &admin, "/store/team_b", Some("team_b")), r#"{"status":"success","data":["in_b"]}"#);
    let (st, body) = query(&s, "/store/team-a", None, "in_a", a);
    assert_eq!(st, 200);
    assert!(body.contains("\"2\""), "{body}");
    assert!(query(&s, "", None, "in_a", a).1.contains(r#""result":[]"#));
    // The per-store limit: team_b holds at most one series.
    let st = write_with(&s, "/api/v1/write", Some("team_b"), &series("another", 1.0, t), a);
    assert!(st >= 400, "over team_b's series limit: {st}");
    // Unknown stores, conflicts, several stores at once, bad names.
    let (st, body) = query(&s, "/store/nope", None, "up", a);
    assert_eq!((st, body.as_str()), (404, r#"{"status":"error","errorType":"not_found","error":"unknown store \"nope\""}"#));
    assert_eq!(query(&s, "", Some("nope"), "up", a).0, 404);
    assert_eq!(write_with(&s, "/api/v1/write", Some("nope"), &series("x", 1.0, t), a), 404);
    assert_eq!(query(&s, "/store/team-a", Some("team_b"), "up", a).0, 400);
    assert_eq!(query(&s, "", Some("team-a|team_b"), "up", a).0, 400);
    assert_eq!(query(&s, "", Some("../etc"), "up", a).0, 404);
    assert_eq!(query(&s, "", Some(&"x".repeat(5000)), "up", a).0, 404);
    // Grants per store: bob may read and write team_b only.
    let b = Some(bob.as_str());
    assert_eq!(query(&s, "/store/team_b", None, "in_b", b).0, 200);
    assert_eq!(query(&s, "", Some("team-a"), "in_a", b).0, 403);
    assert_eq!(query(&s, "", None, "in_default", b).0, 403);
    assert_eq!(write_with(&s, "/store/team-a/api/v1/write", None, &series("x", 1.0, t), b), 403);
    // Readiness and status per store.
    let r = s.http.get(format!("{}/store/team-a/-/ready", s.base)).header("Authorization", &admin).send().expect("GET");
    assert_eq!(r.status().as_u16(), 200);
    // /api/v1/status/stores lists the stores a credential may read, with limits and usage.
    let stores = |auth: &str| -> serde_json::Value {
        let r = s.http.get(format!("{}/api/v1/status/stores", s.base)).header("Authorization", auth).send().expect("GET");
        serde_json::from_str(&r.text().expect("body")).expect("json")
    };
    let all = stores(&admin);
    let names_of = |v: &serde_json::Value| -> Vec<String> {
        v["data"].as_array().expect("list").iter().map(|x| x["name"].as_str().expect("name").to_string()).collect()
    };
    assert_eq!(names_of(&all), ["default", "team-a", "team_b"], "{all}");
    let b_status = &all["data"][2];
    assert_eq!(b_status["kind"], "store");
    assert_eq!(b_status["ready"], true);
    assert_eq!(b_status["usage"]["headSeries"], 1, "{all}");
    assert_eq!(b_status["limits"]["ingestionRate"], 0.0);
    assert!(b_status["usage"]["openSeconds"].as_f64().is_some_and(|x| x >= 0.0), "{all}");
    assert!(b_status["usage"]["walBytes"].as_u64().is_some_and(|x| x > 0), "{all}");
    // bob reads team_b only, so he sees only team_b; the list and the UI's pages need a credential but
    // no grant on the default store (the pages hold no data), the data behind them does.
    for path in ["/api/v1/status/stores", "/store/team_b/api/v1/status/stores"] {
        let r = s.http.get(format!("{}{path}", s.base)).header("Authorization", &bob).send().expect("GET");
        assert_eq!(r.status().as_u16(), 200);
        let v: serde_json::Value = serde_json::from_str(&r.text().expect("body")).expect("json");
        assert_eq!(names_of(&v), ["team_b"], "{v}");
    }
    let ui = |path: &str, auth: Option<&str>| {
        let mut r = s.http.get(format!("{}{path}", s.base));
        if let Some(a) = auth {
            r = r.header("Authorization", a);
        }
        r.send().expect("GET").status().as_u16()
    };
    assert_eq!(ui("/query", Some(&bob)), 200);
    assert_eq!(ui("/assets/app.js", Some(&bob)), 200);
    assert_eq!(ui("/query", None), 401);
    assert_eq!(ui("/api/v1/status/stores", None), 401);
    assert_eq!(ui("/api/v1/status/tsdb", Some(&bob)), 403);
    // Restart: the stores keep their data apart.
    s.terminate();
    let s = Server::start_auth(&data, &flags, Some(&admin));
    assert_eq!(names(&s, &admin, "", Some("team-a")), r#"{"status":"success","data":["in_a"]}"#);
    assert_eq!(names(&s, &admin, "", None), r#"{"status":"success","data":["in_default"]}"#);
    assert!(data.join("stores").join("team-a").join("tessera.json").exists());
}

fn names(s: &Server, auth: &str, prefix: &str, header: Option<&str>) -> String {
    let mut r = s.http.get(format!("{}{prefix}/api/v1/label/__name__/values", s.base)).header("Authorization", auth);
    if let Some(h) = header {
        r = r.header("X-Scope-OrgID", h);
    }
    r.send().expect("GET").text().expect("body")
}

#[test]
fn store_tables_are_checked() {
    let dir = tempfile::tempdir().expect("tmp");
    for (toml, why) in [
        ("[stores.default]\nstorage.tsdb.retention.time = \"1d\"\n", "top-level"),
        ("[stores.\"a.b\"]\nstorage.tsdb.retention.time = \"1d\"\n", "store name"),
        ("[stores.a]\nquery.timeout = \"1m\"\n", "unknown store setting"),
        ("[stores.a]\nstorage.tsdb.retention.time = \"soon\"\n", "[stores.a] storage.tsdb.retention.time"),
        ("[stores.a]\nexternal_labels = { \"1x\" = \"a\" }\n", "not a label name"),
        ("[unions.u]\nstores = [\"nope\"]\n", "is not a store"),
        ("[stores.a]\n[unions.a]\nstores = [\"a\"]\n", "a store of that name exists"),
        ("[unions.u]\nstores = []\n", "names no store"),
        ("[stores.a]\nweb.remote-write.ingestion-rate = -5\n", "non-negative"),
        ("[stores.a]\nweb.remote-write.ingestion-rate = nan\n", "non-negative"),
        ("[stores.a]\nweb.remote-write.ingestion-rate = \"1e400\"\n", "non-negative"),
        ("[stores.a]\nquery.max-samples = -1\n", "query.max-samples"),
        ("[stores.a]\nquery.max-concurrency = 99999999999999999999999\n", "invalid TOML"),
    ] {
        let cfg = dir.path().join("t.toml");
        std::fs::write(&cfg, toml).expect("write");
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["serve", &format!("--storage.tsdb.path={}", dir.path().join("d").display()), "--web.listen-address=127.0.0.1:0"])
            .arg(format!("--config.file={}", cfg.display()))
            .output()
            .expect("run");
        assert!(!out.status.success(), "{toml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{toml}: {err}");
    }
}

#[test]
fn union_stores_read_their_members_as_one() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("tessera.toml");
    std::fs::write(
        &cfg,
        "[stores.a]\nexternal_labels = { team = \"a\" }\nstorage.tsdb.downsampling = \"1m\"\n\
         [stores.b]\nexternal_labels.team = \"b\"\nstorage.tsdb.downsampling = \"1m,5m\"\n[stores.c]\n[stores.d]\n\
         [unions.ab]\nstores = [\"a\", \"b\"]\n[unions.cd]\nstores = [\"c\", \"d\"]\n",
    )
    .expect("toml");
    let s = Server::start(&dir.path().join("data"), &[&format!("--config.file={}", cfg.display())]);
    let t = (tessera_api::now_ms() / 1000 - 600) * 1000;
    assert_eq!(write_with(&s, "/api/v1/write", Some("a"), &series("m", 1.0, t), None), 204);
    assert_eq!(write_with(&s, "/api/v1/write", Some("b"), &series("m", 2.0, t), None), 204);
    // The same series in two stores without external labels (an HA pair): merged, deduplicated.
    let pts = |v: &[(i64, f64)]| vec![WriteSeries::new(labels!("__name__" => "m2"), v.iter().map(|&(dt, x)| Sample::new(t + dt, x)).collect())];
    assert_eq!(write_with(&s, "/api/v1/write", Some("c"), &pts(&[(0, 10.0), (15_000, 11.0)]), None), 204);
    assert_eq!(write_with(&s, "/api/v1/write", Some("d"), &pts(&[(15_000, 99.0), (30_000, 12.0)]), None), 204);
    let at = format!("&time={}", (t + 30_000) / 1000);
    let ask = |store: &str, q: &str| -> serde_json::Value {
        let r = s.http.get(format!("{}/store/{store}/api/v1/query?query={q}{at}", s.base)).send().expect("GET");
        assert_eq!(r.status().as_u16(), 200);
        serde_json::from_str(&r.text().expect("body")).expect("json")
    };
    // The union store in /api/v1/status/stores: its members with their external labels, no usage of
    // its own.
    let r = s.http.get(format!("{}/api/v1/status/stores", s.base)).send().expect("GET");
    let v: serde_json::Value = serde_json::from_str(&r.text().expect("body")).expect("json");
    let ab = v["data"].as_array().expect("list").iter().find(|x| x["name"] == "ab").expect("ab listed").clone();
    assert_eq!(ab["kind"], "union", "{v}");
    assert_eq!(ab["ready"], true);
    assert_eq!(ab["members"], serde_json::json!([{"name": "a", "externalLabels": {"team": "a"}}, {"name": "b", "externalLabels": {"team": "b"}}]));
    assert!(ab.get("usage").is_none(), "{ab}");
    let v = ask("ab", "m");
    let res = v["data"]["result"].as_array().expect("result");
    assert_eq!(res.len(), 2, "{v}");
    assert_eq!(res[0]["metric"]["team"], "a");
    assert_eq!(res[1]["metric"]["team"], "b");
    assert_eq!(ask("ab", "sum(m)")["data"]["result"][0]["value"][1], "3");
    let v = ask("ab", "m%7Bteam%3D%22b%22%7D");
    assert_eq!(v["data"]["result"].as_array().map(Vec::len), Some(1), "{v}");
    assert_eq!(v["data"]["result"][0]["value"][1], "2");
    let v = ask("cd", "count_over_time(m2%5B1h%5D)");
    assert_eq!(v["data"]["result"][0]["value"][1], "3", "three distinct timestamps: {v}");
    let v = ask("cd", "sum_over_time(m2%5B1h%5D)");
    assert_eq!(v["data"]["result"][0]["value"][1], "33", "the first member's sample at a shared timestamp: {v}");
    // The members alone are unchanged; series and labels through the union.
    let v = ask("a", "m");
    assert!(v["data"]["result"][0]["metric"].get("team").is_none(), "external labels only through a union: {v}");
    let (_, body) = s.get("/store/ab/api/v1/label/team/values");
    assert_eq!(body, r#"{"status":"success","data":["a","b"]}"#);
    let (_, body) = s.get("/store/ab/api/v1/series?match[]=m");
    assert!(body.contains(r#""team":"a""#) && body.contains(r#""team":"b""#), "{body}");
    // The per-shard stage and the partial aggregation run in the members' shards (the plan says so).
    let r = s
        .http
        .get(format!("{}/store/ab/api/v1/query?query=sum%20by%20(team)%20(rate(m%5B5m%5D))&trace=1{at}", s.base))
        .send()
        .expect("GET");
    let text = r.text().expect("body");
    assert!(text.contains(r#""placement":"shards+merge""#), "{text}");
    // Storage metrics per store: the default store's unlabelled, the others' with `store`.
    let (_, metrics) = s.get("/metrics");
    for line in ["tessera_tsdb_samples_appended_total{store=\"a\"} 1\n", "tessera_tsdb_samples_appended_total{store=\"c\"} 2\n", "tessera_tsdb_samples_appended_total 0\n"] {
        assert!(metrics.contains(line), "{line}: {metrics}");
    }
    assert_eq!(metrics.matches("# TYPE tessera_tsdb_head_series gauge").count(), 1, "one family");
    // Unions are read-only.
    let r = s
        .http
        .post(format!("{}/api/v1/write", s.base))
        .header("X-Scope-OrgID", "ab")
        .header("Content-Type", common::CT_V1)
        .header("Content-Encoding", "snappy")
        .body(rw::compress(&rw::encode_v1(&series("m", 1.0, t), &[])))
        .send()
        .expect("POST");
    assert_eq!(r.status().as_u16(), 400);
    assert!(r.text().expect("body").contains("union store"));
    assert_eq!(s.get("/store/ab/api/v1/status/tsdb").0, 400);
    assert_eq!(s.get("/store/ab/api/v1/query_exemplars?query=m").0, 400);

    // The result cache through a union: a repeat comes from it, and a late write into a member drops
    // the steps it touches (the answer changes as the uncached one does).
    let range = |extra: &str| -> serde_json::Value {
        let (st, body) = s.get(&format!("/store/ab/api/v1/query_range?query=sum(m)&start={}&end={}&step=60&trace=1&raw=1{extra}", t / 1000, t / 1000 + 240));
        assert_eq!(st, 200, "{body}");
        serde_json::from_str(&body).expect("json")
    };
    let values = |v: &serde_json::Value| v["data"]["result"][0]["values"].as_array().expect("values").iter().map(|p| p[1].as_str().map(str::to_string)).collect::<Vec<_>>();
    let first = range("");
    assert_eq!(values(&first), vec![Some("3".to_string()); 5], "{first}");
    let again = range("");
    assert_eq!(again["trace"]["cache"]["hits"], 5, "every step from the cache: {again}");
    assert_eq!(values(&again), values(&first));
    assert_eq!(write_with(&s, "/api/v1/write", Some("a"), &series("m", 5.0, t + 60_000), None), 204);
    let after = range("");
    assert_eq!(after["trace"]["cache"]["hits"], 1, "the late write drops the steps it touches: {after}");
    assert_eq!(values(&after), vec![Some("3".to_string()), Some("7".to_string()), Some("7".to_string()), Some("7".to_string()), Some("7".to_string())]);
    assert_eq!(values(&range("&nocache=1")), values(&after));
    // Downsampling tiers through a union: the tiers every member has (1m here), chosen by the planner,
    // exact for windows on the buckets.
    let m0 = t / 60_000 * 60;
    let ask_range = |extra: &str| -> serde_json::Value {
        let q = "sum%20by%20(team)%20(max_over_time(m%5B1m%5D))";
        let (st, body) = s.get(&format!("/store/ab/api/v1/query_range?query={q}&start={m0}&end={}&step=60&trace=1&nocache=1{extra}", m0 + 300));
        assert_eq!(st, 200, "{body}");
        serde_json::from_str(&body).expect("json")
    };
    let (tiered, raw) = (ask_range(""), ask_range("&raw=1"));
    assert_eq!(tiered["trace"]["tier"], "1m", "{tiered}");
    assert!(tiered.get("infos").is_none(), "exact: {tiered}");
    assert_eq!(tiered["data"], raw["data"], "{tiered}\n{raw}");
    assert_eq!(tiered["data"]["result"].as_array().map(Vec::len), Some(2), "{tiered}");
    let (st, body) = s.get(&format!("/store/ab/api/v1/query_range?query=sum(m)&start={}&end={}&step=300&tier=5m", t / 1000, t / 1000 + 600));
    assert_eq!(st, 400, "5m is not a tier of every member: {body}");
    assert!(body.contains("no downsampling tier with resolution 5m (tiers: 1m)"), "{body}");
}

#[test]
fn store_limits_answer_as_senders_and_users_expect() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("tessera.toml");
    std::fs::write(
        &cfg,
        "[stores.slow]\nweb.remote-write.ingestion-rate = 100\nweb.remote-write.ingestion-burst = 200\nquery.max-samples = 10\n[stores.other]\n",
    )
    .expect("toml");
    let s = Server::start(&dir.path().join("data"), &[&format!("--config.file={}", cfg.display())]);
    let t = (tessera_api::now_ms() / 1000 - 3000) * 1000;
    let batch = |n: i64, t0: i64| vec![WriteSeries::new(labels!("__name__" => "m"), (0..n).map(|i| Sample::new(t0 + i * 1000, i as f64)).collect())];
    let post = |store: &str, ws: &[WriteSeries]| {
        s.http
            .post(format!("{}/store/{store}/api/v1/write", s.base))
            .header("Content-Type", common::CT_V1)
            .header("Content-Encoding", "snappy")
            .body(rw::compress(&rw::encode_v1(ws, &[])))
            .send()
            .expect("POST")
    };
    assert_eq!(post("slow", &batch(150, t)).status().as_u16(), 204);
    let r = post("slow", &batch(150, t + 200_000));
    assert_eq!(r.status().as_u16(), 429, "over the rate");
    let retry: u64 = r.headers().get("Retry-After").and_then(|v| v.to_str().ok()).and_then(|v| v.parse().ok()).expect("Retry-After");
    assert!((1..=2).contains(&retry), "{retry}");
    assert!(r.text().expect("body").contains("ingestion rate of 100 samples/s"));
    let r = post("slow", &batch(300, t + 400_000));
    assert_eq!(r.status().as_u16(), 400, "more than the burst: never");
    // Another store is not held back by it.
    for k in 0..5 {
        assert_eq!(post("other", &batch(400, t + k * 400_000)).status().as_u16(), 204);
    }
    // The store's query sample limit, in Prometheus' words.
    let r = s
        .http
        .get(format!("{}/store/slow/api/v1/query", s.base))
        .query(&[("query", "count_over_time(m[1h])"), ("time", &((t + 200_000) / 1000).to_string())])
        .send()
        .expect("GET");
    assert_eq!(r.status().as_u16(), 422);
    assert!(r.text().expect("body").contains("query processing would load too many samples into memory"));
    let r = s
        .http
        .get(format!("{}/store/other/api/v1/query", s.base))
        .query(&[("query", "count_over_time(m[1h])"), ("time", &((t + 200_000) / 1000).to_string())])
        .send()
        .expect("GET");
    assert_eq!(r.status().as_u16(), 200);
    let (_, m) = s.get("/metrics");
    assert!(m.contains("tessera_store_limited_requests_total{store=\"slow\",limit=\"ingestion_rate\"} 2"), "{m}");
    assert!(m.contains("tessera_store_limited_requests_total{store=\"slow\",limit=\"query_samples\"} 1"), "{m}");
    assert!(m.contains("tessera_store_samples_written_total{store=\"other\"} 2000"), "{m}");
}

#[test]
fn reload_adds_and_retires_stores() {
    let dir = tempfile::tempdir().expect("tmp");
    let cfg = dir.path().join("tessera.toml");
    std::fs::write(&cfg, "[stores.a]\n").expect("toml");
    let data = dir.path().join("data");
    let s = Server::start(&data, &[&format!("--config.file={}", cfg.display()), "--web.enable-lifecycle"]);
    let t = tessera_api::now_ms() - 10_000;
    assert_eq!(write_with(&s, "/api/v1/write", Some("a"), &series("in_a", 1.0, t), None), 204);
    assert_eq!(write_with(&s, "/api/v1/write", Some("b"), &series("in_b", 1.0, t), None), 404);
    std::fs::write(&cfg, "[stores.b]\nweb.remote-write.ingestion-rate = 1000\n[unions.ab]\nstores = [\"default\", \"b\"]\n").expect("toml");
    let (st, body) = s.post_form("/-/reload", "");
    assert_eq!(st, 200, "{body}");
    // b is served (once open), a no longer (its data stays on disk), the union exists.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while write_with(&s, "/api/v1/write", Some("b"), &series("in_b", 2.0, t), None) != 204 {
        assert!(std::time::Instant::now() < deadline, "store b not open after the reload");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(write_with(&s, "/api/v1/write", Some("a"), &series("in_a", 1.0, t), None), 404);
    assert!(data.join("stores").join("a").exists());
    assert_eq!(query(&s, "/store/ab", None, "in_b", None).0, 200);
    // A broken file: 500, the stores in force stay.
    std::fs::write(&cfg, "[stores.b]\nstorage.tsdb.retention.time = \"soon\"\n").expect("toml");
    let (st, body) = s.post_form("/-/reload", "");
    assert_eq!(st, 500);
    assert!(body.starts_with("failed to reload config:") && body.contains("retention.time"), "{body}");
    assert_eq!(write_with(&s, "/api/v1/write", Some("b"), &series("in_b", 3.0, t + 1000), None), 204);
    // Adding a back serves its data again.
    std::fs::write(&cfg, "[stores.a]\n[stores.b]\n").expect("toml");
    assert_eq!(s.post_form("/-/reload", "").0, 200);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (st, body) = query(&s, "/store/a", None, "in_a", None);
        if st == 200 && body.contains("in_a") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "store a not back: {st} {body}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // A flood of reloads at once, with writes to both stores going on: every reload 200, every write
    // 204 (a store in the file stays served through reloads), nothing lost.
    std::thread::scope(|sc| {
        for k in 0..12 {
            let s = &s;
            sc.spawn(move || {
                for i in 0..4 {
                    if k % 3 == 0 {
                        let store = if k % 2 == 0 { "a" } else { "b" };
                        let st = write_with(s, "/api/v1/write", Some(store), &series(&format!("flood_{k}"), 1.0, t + 2000 + i as i64), None);
                        assert_eq!(st, 204, "write to {store}");
                    } else {
                        let (st, body) = s.post_form("/-/reload", "");
                        assert_eq!(st, 200, "{body}");
                    }
                }
            });
        }
    });
    for (store, k) in [("a", 0), ("a", 6), ("b", 3), ("b", 9)] {
        let (st, body) = query(&s, &format!("/store/{store}"), None, &format!("count_over_time(flood_{k}[1h])"), None);
        assert!(st == 200 && body.contains(r#""4"]"#), "{store} {k}: {body}");
    }
    assert_eq!(query(&s, "/store/a", None, "in_a", None).0, 200);
}

#[test]
fn reload_needs_the_lifecycle_flag() {
    let dir = tempfile::tempdir().expect("tmp");
    let s = Server::start(dir.path(), &[]);
    assert_eq!(s.post_form("/-/reload", ""), (403, "Lifecycle API is not enabled.".to_string()));
    assert_eq!(s.post_form("/-/quit", ""), (403, "Lifecycle API is not enabled.".to_string()));
    assert_eq!(s.get("/-/healthy").0, 200, "still serving");
}

/// `/-/quit` with `--web.enable-lifecycle` shuts down as SIGTERM does: exit status 0, what was written
/// kept (the WAL synced on the way out, replayed at the next start).
#[test]
fn quit_shuts_down_gracefully() {
    let dir = tempfile::tempdir().expect("tmp");
    let mut s = Server::start(dir.path(), &["--web.enable-lifecycle"]);
    let t = (tessera_api::now_ms() / 1000 - 60) * 1000;
    assert_eq!(write_with(&s, "/api/v1/write", None, &series("kept", 4.0, t), None), 204);
    assert_eq!(s.http.get(format!("{}/-/quit", s.base)).send().expect("GET").status().as_u16(), 405, "POST or PUT only");
    assert_eq!(s.post_form("/-/quit", ""), (200, "Requesting termination... Goodbye!".to_string()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let status = loop {
        if let Some(st) = s.child.try_wait().expect("wait") {
            break st;
        }
        assert!(std::time::Instant::now() < deadline, "still running 30 s after /-/quit");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    let s = Server::start(dir.path(), &[]);
    let (_, body) = s.get(&format!("/api/v1/query?query=kept&time={}", t / 1000));
    assert!(body.contains(r#""value":["#) && body.contains(r#""4"]"#), "{body}");
}
