//! `--web.config.file` through the binary: HTTPS with a certificate made here (rcgen), basic auth with
//! bcrypt, bearer tokens with rights, client certificates required after a reload, clients that connect
//! and say nothing, and configuration mistakes refused at start.

mod common;

use base64::Engine as _;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

struct Pki {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    server: (String, String),
    client: (CertificateDer<'static>, PrivateKeyDer<'static>),
}

fn pki() -> Pki {
    let ca_key = rcgen::KeyPair::generate().expect("key");
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).expect("params");
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(rcgen::DnType::CommonName, "tessera test CA");
    let ca = ca_params.self_signed(&ca_key).expect("CA");
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf = |names: Vec<String>, client: bool| {
        let key = rcgen::KeyPair::generate().expect("key");
        let mut p = rcgen::CertificateParams::new(names).expect("params");
        p.extended_key_usages =
            vec![if client { rcgen::ExtendedKeyUsagePurpose::ClientAuth } else { rcgen::ExtendedKeyUsagePurpose::ServerAuth }];
        let cert = p.signed_by(&key, &issuer).expect("sign");
        (cert, key)
    };
    let (sc, sk) = leaf(vec!["localhost".into(), "127.0.0.1".into()], false);
    let (cc, ck) = leaf(vec!["client.test".into()], true);
    Pki {
        ca_pem: ca.pem(),
        ca_der: ca.der().clone(),
        server: (sc.pem(), sk.serialize_pem()),
        client: (cc.der().clone(), PrivateKeyDer::try_from(ck.serialize_der()).expect("key der")),
    }
}

fn tls_client(p: &Pki, with_cert: bool) -> Arc<rustls::ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(p.ca_der.clone()).expect("root");
    let b = rustls::ClientConfig::builder_with_provider(provider).with_safe_default_protocol_versions().expect("versions").with_root_certificates(roots);
    Arc::new(if with_cert {
        b.with_client_auth_cert(vec![p.client.0.clone()], p.client.1.clone_key()).expect("client cert")
    } else {
        b.with_no_client_auth()
    })
}

/// One HTTP/1.1 request over TLS; `Err` when the connection or handshake fails.
fn https(port: u16, cfg: &Arc<rustls::ClientConfig>, method: &str, path: &str, headers: &[(&str, String)], body: &[u8]) -> Result<(u16, String), String> {
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).map_err(|e| e.to_string())?;
    tcp.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let name = ServerName::try_from("localhost").expect("name");
    let mut conn = rustls::ClientConnection::new(cfg.clone(), name).map_err(|e| e.to_string())?;
    let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    tls.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
    tls.write_all(body).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    match tls.read_to_end(&mut out) {
        Ok(_) => {}
        // Servers may close without close_notify after `Connection: close`.
        Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof && !out.is_empty() => {}
        Err(e) => return Err(e.to_string()),
    }
    let text = String::from_utf8_lossy(&out).into_owned();
    let status = text.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or_else(|| format!("no status line: {text:?}"))?;
    Ok((status, text))
}

/// One HTTP/2 GET over TLS with ALPN offering `h2` and `http/1.1`: the protocol agreed and the status.
fn h2_get(port: u16, p: &Pki, path: &str, auth: &str) -> (Option<Vec<u8>>, u16) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let mut cfg = (*tls_client(p, false)).clone();
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port)).await.expect("connect");
        let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
            .connect(ServerName::try_from("localhost").expect("name"), tcp)
            .await
            .expect("handshake");
        let alpn = tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec);
        let (mut sender, conn) = hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), hyper_util::rt::TokioIo::new(tls))
            .await
            .expect("h2 handshake");
        tokio::spawn(conn);
        let req = hyper::Request::get(format!("https://localhost:{port}{path}"))
            .header("authorization", auth)
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .expect("request");
        let resp = sender.send_request(req).await.expect("an HTTP/2 answer");
        (alpn, resp.status().as_u16())
    })
}

fn basic(u: &str, p: &str) -> (&'static str, String) {
    ("Authorization", format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))))
}

fn write_config(dir: &Path, tls_extra: &str, hash: &str, tok_sha: &str) {
    std::fs::write(
        dir.join("web.yml"),
        format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: server.key\n  client_ca_file: ca.crt\n{tls_extra}http_server_config:\n  headers:\n    X-Frame-Options: deny\nbasic_auth_users:\n  admin: {hash}\n  viewer: {hash}\nauthorization:\n  users:\n    viewer: {{ read: ['*'] }}\n  bearer_tokens:\n    - name: grafana\n      token_sha256: {tok_sha}\n      read: [default]\n"
        ),
    )
    .expect("write web.yml");
}

#[test]
fn https_with_basic_auth_tokens_and_client_certificates() {
    let p = pki();
    let dir = tempfile::tempdir().expect("tmp");
    let cfg_dir = dir.path().join("etc");
    std::fs::create_dir_all(&cfg_dir).expect("mkdir");
    std::fs::write(cfg_dir.join("server.crt"), &p.server.0).expect("crt");
    std::fs::write(cfg_dir.join("server.key"), &p.server.1).expect("key");
    std::fs::write(cfg_dir.join("ca.crt"), &p.ca_pem).expect("ca");
    let hash = bcrypt::hash("hunter2", 4).expect("bcrypt");
    let tok_sha = hex_sha256(b"tok-abc");
    write_config(&cfg_dir, "", &hash, &tok_sha);
    let port = common::free_port();
    let data = dir.path().join("data");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["serve", &format!("--storage.tsdb.path={}", data.display()), &format!("--web.listen-address=127.0.0.1:{port}")])
        .arg(format!("--web.config.file={}", cfg_dir.join("web.yml").display()))
        .args(["--storage.tsdb.shards=1", "--log.level=warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn");
    let plain = tls_client(&p, false);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok((200, _)) = https(port, &plain, "GET", "/-/ready", &[basic("admin", "hunter2")], b"") {
            break;
        }
        assert!(Instant::now() < deadline, "not ready over HTTPS");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Authentication and rights.
    let (st, text) = https(port, &plain, "GET", "/-/healthy", &[], b"").expect("https");
    assert_eq!(st, 401, "{text}");
    assert!(text.to_ascii_lowercase().contains("www-authenticate: basic"), "{text}");
    assert_eq!(https(port, &plain, "GET", "/-/healthy", &[basic("admin", "wrong")], b"").expect("https").0, 401);
    let (st, text) = https(port, &plain, "GET", "/api/v1/labels", &[basic("admin", "hunter2")], b"").expect("https");
    assert_eq!(st, 200, "{text}");
    assert!(text.to_ascii_lowercase().contains("x-frame-options: deny"), "{text}");
    let (st, text) = https(port, &plain, "POST", "/api/v1/write", &[basic("viewer", "hunter2")], b"").expect("https");
    assert_eq!(st, 403, "{text}");
    assert!(text.contains("Forbidden: user \"viewer\" has no write right on store \"default\""), "{text}");
    let tok = ("Authorization", "Bearer tok-abc".to_string());
    assert_eq!(https(port, &plain, "GET", "/api/v1/query?query=1", std::slice::from_ref(&tok), b"").expect("https").0, 200);
    assert_eq!(https(port, &plain, "POST", "/api/v1/write", &[tok], b"").expect("https").0, 403);
    assert_eq!(https(port, &plain, "GET", "/-/healthy", &[("Authorization", "Bearer tok-abd".into())], b"").expect("https").0, 401);
    // Clients that offer HTTP/2 (curl, Go's Prometheus) get it, and an answer over it.
    assert_eq!(h2_get(port, &p, "/-/healthy", &basic("admin", "hunter2").1), (Some(b"h2".to_vec()), 200));
    assert_eq!(h2_get(port, &p, "/-/healthy", "Basic eDp5").1, 401);
    // Plain HTTP on the TLS port gets no answer.
    let r = reqwest::blocking::Client::builder().timeout(Duration::from_secs(5)).build().expect("client").get(format!("http://127.0.0.1:{port}/-/healthy")).send();
    assert!(r.is_err() || r.is_ok_and(|r| r.status() != 200));
    // Clients that connect and say nothing hold no one up.
    let idle: Vec<TcpStream> = (0..64).map(|_| TcpStream::connect(("127.0.0.1", port)).expect("connect")).collect();
    assert_eq!(https(port, &plain, "GET", "/-/healthy", &[basic("admin", "hunter2")], b"").expect("https").0, 200);
    drop(idle);
    // Hostile handshakes: garbage, a record header that claims 64 KiB and stops, a ClientHello cut
    // short, a flood of bytes, clients that hang up mid-handshake. Each connection is dropped; the
    // server answers the next client.
    let mut hello_start = vec![0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03];
    hello_start.extend([0u8; 40]);
    let flood = vec![0x17u8; 1 << 20];
    let mut junk_conns = Vec::new();
    for junk in [&b"\x00\xff garbage \r\n\r\n"[..], &[0x16, 0x03, 0x01, 0xff, 0xff, 1, 2, 3][..], &hello_start[..], &flood[..], &b"GET / HTTP/1.1\r\n\r\n"[..]] {
        for _ in 0..8 {
            let mut c = TcpStream::connect(("127.0.0.1", port)).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(15))).expect("timeout");
            let _ = c.write_all(junk);
            junk_conns.push(c);
        }
    }
    // While they wait for their handshake deadline, others are served.
    assert_eq!(https(port, &plain, "GET", "/-/healthy", &[basic("admin", "hunter2")], b"").expect("https").0, 200);
    for mut c in junk_conns {
        let mut buf = [0u8; 64];
        let _ = c.read(&mut buf);
    }
    assert_eq!(https(port, &plain, "GET", "/-/healthy", &[basic("admin", "hunter2")], b"").expect("https").0, 200);
    // Requiring client certificates: picked up from the changed file, no restart.
    write_config(&cfg_dir, "  client_auth_type: RequireAndVerifyClientCert\n", &hash, &tok_sha);
    let with_cert = tls_client(&p, true);
    let deadline = Instant::now() + Duration::from_secs(20);
    while https(port, &plain, "GET", "/-/healthy", &[basic("admin", "hunter2")], b"").is_ok() {
        assert!(Instant::now() < deadline, "client certificates not required after the reload");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(https(port, &with_cert, "GET", "/-/healthy", &[basic("admin", "hunter2")], b"").expect("with a certificate").0, 200);
    // A broken file keeps the rules in force.
    std::fs::write(cfg_dir.join("web.yml"), "basic_auth_users:\n  admin: not-bcrypt\n").expect("write");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(https(port, &with_cert, "GET", "/-/healthy", &[basic("admin", "hunter2")], b"").expect("still served").0, 200);
    assert_eq!(https(port, &with_cert, "GET", "/-/healthy", &[], b"").expect("still guarded").0, 401);
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn configuration_mistakes_stop_the_start_with_the_reason() {
    let dir = tempfile::tempdir().expect("tmp");
    for (yml, why) in [
        ("basic_auth_users:\n  admin: plain\n", "not a bcrypt hash"),
        ("tls_server_config:\n  cert_file: missing.crt\n  key_file: missing.key\n", "missing.crt"),
        ("tls_server_config:\n  min_version: TLS10\n  cert_file: a\n  key_file: b\n", "TLS 1.0 and 1.1 are not supported"),
        ("tls_server_config:\n  client_auth_type: RequireAnyClientCert\n  cert_file: a\n  key_file: b\n", "not supported"),
        ("unknown_key: 1\n", "unknown field"),
    ] {
        let f = dir.path().join("web.yml");
        std::fs::write(&f, yml).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_tessera"))
            .args(["serve", &format!("--storage.tsdb.path={}", dir.path().join("data").display()), "--web.listen-address=127.0.0.1:0"])
            .arg(format!("--web.config.file={}", f.display()))
            .output()
            .expect("run");
        assert!(!out.status.success(), "{yml}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why) && err.contains("web.config.file"), "{yml}: {err}");
    }
}

fn hex_sha256(b: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(b).iter().map(|x| format!("{x:02x}")).collect()
}

/// The README's "Stores and access" example, as shipped in `examples/stores-and-access/` (a certificate
/// made here): two teams, a union, a read-only Grafana token, a writer token, TLS.
#[test]
fn the_stores_and_access_example_works_as_documented() {
    let p = pki();
    let dir = tempfile::tempdir().expect("tmp");
    let ex = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/stores-and-access");
    let etc = dir.path().join("etc");
    std::fs::create_dir_all(&etc).expect("mkdir");
    for f in ["tessera.toml", "web.yml"] {
        std::fs::copy(ex.join(f), etc.join(f)).unwrap_or_else(|e| panic!("{}: {e}", ex.join(f).display()));
    }
    std::fs::write(etc.join("server.crt"), &p.server.0).expect("crt");
    std::fs::write(etc.join("server.key"), &p.server.1).expect("key");
    let port = common::free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tessera"))
        .args(["serve", &format!("--storage.tsdb.path={}", dir.path().join("data").display()), &format!("--web.listen-address=127.0.0.1:{port}")])
        .arg(format!("--config.file={}", etc.join("tessera.toml").display()))
        .arg(format!("--web.config.file={}", etc.join("web.yml").display()))
        .args(["--storage.tsdb.shards=1", "--log.level=warn"])
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn");
    let c = tls_client(&p, false);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !matches!(https(port, &c, "GET", "/-/ready", &[basic("admin", "change-me")], b""), Ok((200, _))) {
        assert!(Instant::now() < deadline, "not ready");
        std::thread::sleep(Duration::from_millis(100));
    }
    let t = tessera_api::now_ms() - 60_000;
    let body = |v: f64| {
        use tessera_model::{labels, Sample};
        use tessera_protocol::remote_write as rw;
        rw::compress(&rw::encode_v1(&[rw::WriteSeries::new(labels!("__name__" => "up", "job" => "node"), vec![Sample::new(t, v)])], &[]))
    };
    let write_headers = |auth: (&'static str, String), store: &str| {
        vec![auth, ("X-Scope-OrgID", store.to_string()), ("Content-Type", "application/x-protobuf".into()), ("Content-Encoding", "snappy".into())]
    };
    let vmagent = ("Authorization", "Bearer example-vmagent-token".to_string());
    let grafana = ("Authorization", "Bearer example-grafana-token".to_string());
    assert_eq!(https(port, &c, "POST", "/api/v1/write", &write_headers(vmagent.clone(), "team-a"), &body(1.0)).expect("https").0, 204);
    assert_eq!(https(port, &c, "POST", "/api/v1/write", &write_headers(basic("team-b", "change-me"), "team-b"), &body(0.0)).expect("https").0, 204);
    // team-a may not write to team-b, Grafana may not write at all.
    assert_eq!(https(port, &c, "POST", "/api/v1/write", &write_headers(basic("team-a", "change-me"), "team-b"), &body(1.0)).expect("https").0, 403);
    assert_eq!(https(port, &c, "POST", "/api/v1/write", &write_headers(grafana.clone(), "team-a"), &body(1.0)).expect("https").0, 403);
    // Grafana reads the union: both teams, told apart by their external label.
    let (st, text) = https(port, &c, "GET", "/store/all-teams/api/v1/query?query=sum%20by%20(team)%20(up)", &[grafana], b"").expect("https");
    assert_eq!(st, 200, "{text}");
    assert!(text.contains(r#"{"team":"a"},"value":["#) && text.contains(r#"{"team":"b"},"value":["#), "{text}");
    assert_eq!(https(port, &c, "GET", "/store/all-teams/api/v1/query?query=up", &[basic("team-a", "change-me")], b"").expect("https").0, 200);
    assert_eq!(https(port, &c, "GET", "/store/team-b/api/v1/query?query=up", &[basic("team-a", "change-me")], b"").expect("https").0, 403);
    assert_eq!(https(port, &c, "GET", "/api/v1/query?query=up", &[basic("team-a", "wrong")], b"").expect("https").0, 401);
    let _ = child.kill();
    let _ = child.wait();
}
