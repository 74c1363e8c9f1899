//! Who may do what: Prometheus' web configuration file (`--web.config.file`, the Exporter Toolkit's
//! format: `tls_server_config`, `http_server_config`, `basic_auth_users` with bcrypt hashes,
//! `rate_limit`), read as Prometheus reads it (unknown keys are errors), plus Tessera's `authorization`
//! section: bearer tokens and basic-auth users granted `read`, `write` and/or `admin` on named stores.
//!
//! ```yaml
//! basic_auth_users:
//!   alice: $2y$10$…          # bcrypt, as `htpasswd -nBC 10 "" | tr -d ':\n'` writes it
//!   bob: $2y$10$…
//! authorization:             # Tessera's: without it every basic-auth user may do everything
//!   users:
//!     bob: { read: ["*"] }   # listed users get what is listed, no more
//!   bearer_tokens:
//!     - name: grafana
//!       token_sha256: 9f86d0…  # hex SHA-256 of the token (or token_file: a file holding the token)
//!       read: ["default"]
//!     - name: vmagent
//!       token_file: /etc/tessera/vmagent.token
//!       write: ["default"]
//! ```
//!
//! Rights: `write` is remote write; `admin` the admin APIs and lifecycle endpoints; `read` everything
//! else (queries, metadata, remote read, status, `/metrics`, health). Grants name stores (`*`: all);
//! the request's store is the one `stores::resolve` found. With no credential configured the server is
//! open, as Prometheus is. A request without valid credentials is a 401 with `WWW-Authenticate: Basic`,
//! a credential without the right a 403 naming what was refused.
//!
//! Password checks follow the Exporter Toolkit: bcrypt, run off the async threads behind a small gate
//! (a flood of wrong passwords costs bounded CPU), a successful check cached (keyed by a SHA-256 of user,
//! hash and password) so that only the first request of a client pays for bcrypt, and an unknown user
//! checked against a dummy hash so that timing does not tell which users exist. Token digests are
//! compared in constant time, all of them every time.

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::header::{HeaderName, HeaderValue, AUTHORIZATION, WWW_AUTHENTICATE};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use parking_lot::Mutex;
use serde::Deserialize;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::AppState;

/// The file as written (Exporter Toolkit's keys, strictly; Tessera's `authorization`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebConfigFile {
    #[serde(default)]
    pub tls_server_config: Option<TlsServerConfig>,
    #[serde(default)]
    pub http_server_config: HttpServerConfig,
    #[serde(default)]
    pub basic_auth_users: BTreeMap<String, String>,
    #[serde(default)]
    pub rate_limit: Option<RateLimitConfig>,
    #[serde(default)]
    pub authorization: Option<AuthorizationConfig>,
}

/// `tls_server_config`, as the Exporter Toolkit spells it; the binary turns it into a TLS acceptor.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsServerConfig {
    pub cert: Option<String>,
    pub key: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    pub client_ca: Option<String>,
    pub client_ca_file: Option<String>,
    pub client_auth_type: Option<String>,
    #[serde(default)]
    pub client_allowed_sans: Vec<String>,
    pub min_version: Option<String>,
    pub max_version: Option<String>,
    #[serde(default)]
    pub cipher_suites: Vec<String>,
    pub prefer_server_cipher_suites: Option<bool>,
    #[serde(default)]
    pub curve_preferences: Vec<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpServerConfig {
    pub http2: Option<bool>,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RateLimitConfig {
    /// Time between two requests (a Prometheus duration); 0 disables the limiter.
    pub interval: String,
    pub burst: u32,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthorizationConfig {
    #[serde(default)]
    pub users: BTreeMap<String, Grants>,
    #[serde(default)]
    pub bearer_tokens: Vec<TokenConfig>,
}

/// Stores a credential may read, write and administer (`*`: every store).
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct Grants {
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
    #[serde(default)]
    pub admin: Vec<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenConfig {
    pub name: String,
    pub token_sha256: Option<String>,
    pub token_file: Option<String>,
    #[serde(default)]
    pub read: Vec<String>,
    #[serde(default)]
    pub write: Vec<String>,
    #[serde(default)]
    pub admin: Vec<String>,
}

/// What a request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    Read,
    Write,
    Admin,
}

impl Right {
    pub fn as_str(self) -> &'static str {
        match self {
            Right::Read => "read",
            Right::Write => "write",
            Right::Admin => "admin",
        }
    }

    /// The right a request needs.
    pub fn of(method: &Method, path: &str) -> Right {
        let _ = method;
        if path == "/api/v1/write" || path.starts_with("/api/v1/otlp/") {
            Right::Write
        } else if path.starts_with("/api/v1/admin/") || path == "/-/reload" || path == "/-/quit" {
            Right::Admin
        } else {
            Right::Read
        }
    }
}

impl Grants {
    fn all() -> Grants {
        let star = vec!["*".to_string()];
        Grants { read: star.clone(), write: star.clone(), admin: star }
    }

    pub fn allows(&self, right: Right, store: &str) -> bool {
        let list = match right {
            Right::Read => &self.read,
            Right::Write => &self.write,
            Right::Admin => &self.admin,
        };
        list.iter().any(|s| s == "*" || s == store)
    }
}

/// Response headers `http_server_config.headers` may set (the Exporter Toolkit's list).
const ALLOWED_HEADERS: &[&str] =
    &["Content-Security-Policy", "X-Frame-Options", "X-Content-Type-Options", "X-XSS-Protection", "Strict-Transport-Security"];

/// Longest `Authorization` header looked at; longer ones are refused unread.
const MAX_AUTH_HEADER: usize = 8192;
/// Successful password checks remembered.
const OK_CACHE_MAX: usize = 4096;

struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The loaded access rules (see the module docs).
pub struct Access {
    /// user → (bcrypt hash, grants).
    users: BTreeMap<String, (String, Grants)>,
    /// (SHA-256 of the token, name, grants).
    tokens: Vec<([u8; 32], String, Grants)>,
    headers: Vec<(HeaderName, HeaderValue)>,
    dummy_hash: String,
    ok_cache: Mutex<HashSet<[u8; 32]>>,
    bcrypt_gate: tokio::sync::Semaphore,
    /// (interval, burst) and the bucket.
    rate: Option<(Duration, u32, Mutex<Bucket>)>,
    /// `http_server_config.http2`.
    pub http2: bool,
    /// `tls_server_config`, for the binary.
    pub tls: Option<TlsServerConfig>,
}

impl std::fmt::Debug for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Access")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .field("tokens", &self.tokens.iter().map(|t| &t.1).collect::<Vec<_>>())
            .field("tls", &self.tls.is_some())
            .finish()
    }
}

/// Who a request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    User(String),
    Token(String),
}

impl Access {
    /// Reads and checks a web configuration file; paths in it are relative to the file's directory,
    /// as the Exporter Toolkit resolves them.
    pub fn load(path: &Path) -> Result<Access, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))?;
        let dir = path.parent().unwrap_or_else(|| Path::new("."));
        Access::parse(&text, dir).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// [`Access::load`] from text; `dir` resolves relative paths.
    pub fn parse(text: &str, dir: &Path) -> Result<Access, String> {
        let f: WebConfigFile = if text.trim().is_empty() {
            WebConfigFile::default()
        } else {
            serde_yaml_ng::from_str(text).map_err(|e| e.to_string())?
        };
        let resolve = |p: &str| -> PathBuf {
            let p = Path::new(p);
            if p.is_absolute() { p.to_path_buf() } else { dir.join(p) }
        };
        let mut tls = f.tls_server_config.clone();
        if let Some(t) = &mut tls {
            for p in [&mut t.cert_file, &mut t.key_file, &mut t.client_ca_file].into_iter().flatten() {
                *p = resolve(p).to_string_lossy().into_owned();
            }
        }
        let mut headers = Vec::new();
        for (k, v) in &f.http_server_config.headers {
            let Some(canon) = ALLOWED_HEADERS.iter().find(|h| h.eq_ignore_ascii_case(k)) else {
                return Err(format!("http_server_config.headers: {k:?} is not one of {}", ALLOWED_HEADERS.join(", ")));
            };
            if v.is_empty() {
                continue;
            }
            let bad = |why: &str| Err(format!("http_server_config.headers.{canon}: {why}"));
            match *canon {
                "X-Frame-Options" if !["deny", "sameorigin"].contains(&v.to_ascii_lowercase().as_str()) => {
                    return bad("accepted values are deny and sameorigin");
                }
                "X-Content-Type-Options" if !v.eq_ignore_ascii_case("nosniff") => return bad("accepted value is nosniff"),
                _ => {}
            }
            let value = HeaderValue::from_str(v).map_err(|e| format!("http_server_config.headers.{canon}: {e}"))?;
            headers.push((HeaderName::from_bytes(canon.as_bytes()).map_err(|e| e.to_string())?, value));
        }
        let auth = f.authorization.clone().unwrap_or_default();
        let mut users = BTreeMap::new();
        for (u, h) in &f.basic_auth_users {
            if u.contains(':') {
                return Err(format!("basic_auth_users: user {u:?} contains ':', which basic auth cannot carry"));
            }
            h.parse::<bcrypt::HashParts>().map_err(|e| format!("basic_auth_users.{u}: not a bcrypt hash: {e}"))?;
            // A user without grants has every right (Prometheus' basic auth is all or nothing).
            let g = auth.users.get(u).cloned().unwrap_or_else(Grants::all);
            users.insert(u.clone(), (h.clone(), g));
        }
        if let Some(u) = auth.users.keys().find(|u| !f.basic_auth_users.contains_key(*u)) {
            return Err(format!("authorization.users.{u}: no such user in basic_auth_users"));
        }
        let mut tokens = Vec::new();
        for t in &auth.bearer_tokens {
            let digest = match (&t.token_sha256, &t.token_file) {
                (Some(h), None) => hex_32(h).ok_or_else(|| format!("bearer token {:?}: token_sha256 must be 64 hex digits", t.name))?,
                (None, Some(file)) => {
                    let p = resolve(file);
                    let tok = std::fs::read_to_string(&p).map_err(|e| format!("bearer token {:?}: reading {}: {e}", t.name, p.display()))?;
                    let tok = tok.trim();
                    if tok.is_empty() {
                        return Err(format!("bearer token {:?}: {} is empty", t.name, p.display()));
                    }
                    Sha256::digest(tok.as_bytes()).into()
                }
                _ => return Err(format!("bearer token {:?}: exactly one of token_sha256 and token_file", t.name)),
            };
            tokens.push((digest, t.name.clone(), Grants { read: t.read.clone(), write: t.write.clone(), admin: t.admin.clone() }));
        }
        let rate = match &f.rate_limit {
            None => None,
            Some(r) => {
                let ms = crate::params::parse_duration_ms(&r.interval).map_err(|e| format!("rate_limit.interval: {e}"))?;
                (ms > 0).then(|| {
                    let burst = r.burst.max(1);
                    (Duration::from_millis(ms as u64), burst, Mutex::new(Bucket { tokens: f64::from(burst), at: Instant::now() }))
                })
            }
        };
        // The cost of the dummy hash matches the configured ones, so an unknown user takes as long.
        let cost = f.basic_auth_users.values().filter_map(|h| h.parse::<bcrypt::HashParts>().ok()).map(|p| p.get_cost()).max();
        let dummy_hash = match cost {
            Some(c) => bcrypt::hash("tessera-dummy-password", c).map_err(|e| e.to_string())?,
            None => String::new(),
        };
        Ok(Access {
            users,
            tokens,
            headers,
            dummy_hash,
            ok_cache: Mutex::new(HashSet::new()),
            bcrypt_gate: tokio::sync::Semaphore::new(2),
            rate,
            http2: f.http_server_config.http2.unwrap_or(true),
            tls,
        })
    }

    /// Whether any credential is configured (otherwise the server is open).
    pub fn has_credentials(&self) -> bool {
        !self.users.is_empty() || !self.tokens.is_empty()
    }

    /// The principal an `Authorization` header proves, if any.
    pub async fn authenticate(&self, header: Option<&HeaderValue>) -> Option<(Principal, Grants)> {
        let h = header?.as_bytes();
        if h.len() > MAX_AUTH_HEADER {
            return None;
        }
        let (scheme, rest) = match h.iter().position(|b| *b == b' ') {
            Some(i) => (&h[..i], trim(&h[i + 1..])),
            None => return None,
        };
        if scheme.eq_ignore_ascii_case(b"basic") && !self.users.is_empty() {
            let raw = base64::engine::general_purpose::STANDARD.decode(rest).ok()?;
            let i = raw.iter().position(|b| *b == b':')?;
            let (user, pass) = (std::str::from_utf8(&raw[..i]).ok()?, &raw[i + 1..]);
            return self.check_password(user, pass).await.then(|| {
                let g = self.users.get(user).map(|u| u.1.clone()).unwrap_or_default();
                (Principal::User(user.to_string()), g)
            });
        }
        if scheme.eq_ignore_ascii_case(b"bearer") && !self.tokens.is_empty() {
            let d: [u8; 32] = Sha256::digest(rest).into();
            let mut found: Option<usize> = None;
            for (i, (t, _, _)) in self.tokens.iter().enumerate() {
                if bool::from(t.ct_eq(&d)) && found.is_none() {
                    found = Some(i);
                }
            }
            return found.map(|i| (Principal::Token(self.tokens[i].1.clone()), self.tokens[i].2.clone()));
        }
        None
    }

    async fn check_password(&self, user: &str, pass: &[u8]) -> bool {
        let (hash, known) = match self.users.get(user) {
            Some((h, _)) => (h.clone(), true),
            None => (self.dummy_hash.clone(), false),
        };
        let key: [u8; 32] = {
            let mut h = Sha256::new();
            for part in [user.as_bytes(), b"\0", hash.as_bytes(), b"\0", pass] {
                h.update(part);
            }
            h.finalize().into()
        };
        if known && self.ok_cache.lock().contains(&key) {
            return true;
        }
        let Ok(_permit) = self.bcrypt_gate.acquire().await else { return false };
        let pass = pass.to_vec();
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(&pass, &hash).unwrap_or(false)).await.unwrap_or(false) && known;
        if ok {
            let mut c = self.ok_cache.lock();
            if c.len() >= OK_CACHE_MAX {
                c.clear();
            }
            c.insert(key);
        }
        ok
    }

    /// Takes a token from the rate limiter's bucket; `false` when the request must wait.
    fn admit(&self) -> bool {
        let Some((interval, burst, b)) = &self.rate else { return true };
        let mut b = b.lock();
        let now = Instant::now();
        let refill = now.duration_since(b.at).as_secs_f64() / interval.as_secs_f64();
        b.tokens = (b.tokens + refill).min(f64::from(*burst));
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

fn trim(b: &[u8]) -> &[u8] {
    let s = b.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(b.len());
    let e = b.iter().rposition(|c| !c.is_ascii_whitespace()).map_or(s, |i| i + 1);
    &b[s..e.max(s)]
}

fn hex_32(s: &str) -> Option<[u8; 32]> {
    let s = s.trim().as_bytes();
    if s.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in s.chunks(2).enumerate() {
        let hi = (pair[0] as char).to_digit(16)?;
        let lo = (pair[1] as char).to_digit(16)?;
        out[i] = (hi * 16 + lo) as u8;
    }
    Some(out)
}

fn plain(status: StatusCode, body: String) -> Response {
    (status, [(axum::http::header::CONTENT_TYPE, "text/plain; charset=utf-8")], body).into_response()
}

fn needs_no_grant(path: &str) -> bool {
    path == "/api/v1/status/stores" || crate::ui::is_ui_path(path)
}

/// The middleware: rate limit, authentication, authorisation, response headers.
pub async fn guard(State(st): State<Arc<AppState>>, mut req: Request, next: Next) -> Response {
    // Cross-site request forgery: a page on another site must not make a browser (which may hold this
    // server's basic-auth credentials, or reach a server on localhost) delete data, reload or stop the
    // server. Browsers say where a request comes from in `Sec-Fetch-Site`; other clients send nothing.
    let (_, path) = crate::stores::split_path(req.uri().path());
    let right = Right::of(req.method(), path);
    if right == Right::Admin
        && req.headers().get("sec-fetch-site").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"cross-site"))
    {
        return plain(StatusCode::FORBIDDEN, "Forbidden: cross-site requests may not use admin or lifecycle endpoints\n".into());
    }
    let Some(a) = st.access() else { return next.run(req).await };
    if !a.admit() {
        return plain(StatusCode::TOO_MANY_REQUESTS, "Too Many Requests\n".into());
    }
    if a.has_credentials() {
        let name = req.extensions().get::<crate::stores::StoreName>().map(|s| s.0.clone());
        let store = name.as_deref().unwrap_or(crate::stores::DEFAULT);
        match a.authenticate(req.headers().get(AUTHORIZATION)).await {
            None => {
                let mut r = plain(StatusCode::UNAUTHORIZED, "Unauthorized\n".into());
                r.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_static("Basic"));
                return r;
            }
            // The UI's pages and the list of stores need a valid credential but no grant on a store:
            // the pages hold no data, and the list shows only the stores the credential may read.
            Some((who, g)) if !needs_no_grant(path) && !g.allows(right, store) => {
                let who = match who {
                    Principal::User(u) => format!("user {u:?}"),
                    Principal::Token(t) => format!("token {t:?}"),
                };
                return plain(StatusCode::FORBIDDEN, format!("Forbidden: {who} has no {} right on store {store:?}\n", right.as_str()));
            }
            // Handlers that list stores show only those this credential may read.
            Some((_, g)) => {
                req.extensions_mut().insert(g);
            }
        }
    }
    let mut resp = next.run(req).await;
    for (k, v) in &a.headers {
        resp.headers_mut().insert(k.clone(), v.clone());
    }
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_exporter_toolkit_format_is_read_strictly() {
        let dir = Path::new("/etc/tessera");
        let h = bcrypt::hash("pw", 4).expect("hash");
        let a = Access::parse(
            &format!(
                "tls_server_config:\n  cert_file: server.crt\n  key_file: /abs/server.key\n  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n  min_version: TLS13\nhttp_server_config:\n  http2: false\n  headers:\n    X-Frame-Options: deny\n    Strict-Transport-Security: max-age=31536000\nbasic_auth_users:\n  alice: {h}\n"
            ),
            dir,
        )
        .expect("parses");
        let t = a.tls.as_ref().expect("tls");
        assert_eq!(t.cert_file.as_deref(), Some("/etc/tessera/server.crt"));
        assert_eq!(t.key_file.as_deref(), Some("/abs/server.key"));
        assert_eq!(t.client_ca_file.as_deref(), Some("/etc/tessera/ca.crt"));
        assert!(!a.http2);
        assert_eq!(a.headers.len(), 2);
        assert!(a.has_credentials());
        for (bad, why) in [
            ("tls_server_config:\n  cert_fil: x\n", "unknown field"),
            ("basic_auth_users:\n  alice: plaintext\n", "not a bcrypt hash"),
            ("http_server_config:\n  headers:\n    Server: x\n", "is not one of"),
            ("http_server_config:\n  headers:\n    X-Frame-Options: allow\n", "deny and sameorigin"),
            ("authorization:\n  bearer_tokens:\n    - name: x\n      token_sha256: abc\n", "64 hex digits"),
            ("authorization:\n  bearer_tokens:\n    - name: x\n", "exactly one of"),
            ("authorization:\n  users:\n    eve: { read: ['*'] }\n", "no such user"),
            ("rate_limit:\n  interval: nope\n  burst: 1\n", "rate_limit.interval"),
            ("- a\n- b\n", "invalid type"),
        ] {
            let e = Access::parse(bad, dir).expect_err(bad);
            assert!(e.contains(why), "{bad}: {e}");
        }
        // Empty: open, as without the flag.
        assert!(!Access::parse("", dir).expect("empty").has_credentials());
    }

    #[test]
    fn rights_follow_the_path() {
        assert_eq!(Right::of(&Method::POST, "/api/v1/write"), Right::Write);
        assert_eq!(Right::of(&Method::POST, "/api/v1/admin/tsdb/delete_series"), Right::Admin);
        assert_eq!(Right::of(&Method::POST, "/-/reload"), Right::Admin);
        assert_eq!(Right::of(&Method::POST, "/api/v1/read"), Right::Read);
        assert_eq!(Right::of(&Method::GET, "/metrics"), Right::Read);
        let g = Grants { read: vec!["*".into()], write: vec!["default".into()], admin: vec![] };
        assert!(g.allows(Right::Read, "x") && g.allows(Right::Write, "default") && !g.allows(Right::Write, "x"));
        assert!(!g.allows(Right::Admin, "default"));
    }

    #[tokio::test]
    async fn passwords_and_tokens_are_checked_and_hostile_headers_refused() {
        let h = bcrypt::hash("s3cret", 4).expect("hash");
        let tok_hex: String = Sha256::digest(b"tok-123").iter().map(|b| format!("{b:02x}")).collect();
        let a = Access::parse(
            &format!(
                "basic_auth_users:\n  alice: {h}\n  bob: {h}\nauthorization:\n  users:\n    bob: {{ read: [default] }}\n  bearer_tokens:\n    - name: grafana\n      token_sha256: {tok_hex}\n      read: ['*']\n"
            ),
            Path::new("."),
        )
        .expect("parses");
        let basic = |u: &str, p: &str| HeaderValue::from_str(&format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}")))).expect("hv");
        let (who, g) = a.authenticate(Some(&basic("alice", "s3cret"))).await.expect("alice");
        assert_eq!(who, Principal::User("alice".into()));
        assert_eq!(g, Grants::all());
        // Cached now: the same answer without bcrypt.
        assert!(a.authenticate(Some(&basic("alice", "s3cret"))).await.is_some());
        assert!(a.authenticate(Some(&basic("alice", "wrong"))).await.is_none());
        assert!(a.authenticate(Some(&basic("mallory", "s3cret"))).await.is_none());
        let (_, g) = a.authenticate(Some(&basic("bob", "s3cret"))).await.expect("bob");
        assert!(g.allows(Right::Read, "default") && !g.allows(Right::Write, "default"));
        let bearer = |t: &str| HeaderValue::from_str(&format!("Bearer {t}")).expect("hv");
        let (who, g) = a.authenticate(Some(&bearer("tok-123"))).await.expect("token");
        assert_eq!(who, Principal::Token("grafana".into()));
        assert!(!g.allows(Right::Write, "default"));
        assert!(a.authenticate(Some(&bearer("tok-124"))).await.is_none());
        let long = "A".repeat(1 << 20);
        for bad in [
            "Basic".to_string(),
            "Basic !!!notbase64".into(),
            "Basic ".into(),
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode([0xff, 0xfe, b':', b'x'])),
            format!("Basic {}", base64::engine::general_purpose::STANDARD.encode("nocolon")),
            format!("Basic {long}"),
            format!("Bearer {long}"),
            "Digest x".into(),
            "bearer".into(),
        ] {
            let v = HeaderValue::from_str(&bad).expect("hv");
            assert!(a.authenticate(Some(&v)).await.is_none(), "{}", &bad[..bad.len().min(40)]);
        }
        assert!(a.authenticate(None).await.is_none());
    }

    async fn call(app: &axum::Router, method: &str, uri: &str, auth: Option<&str>) -> Response {
        use tower::ServiceExt;
        let mut b = Request::builder().method(method).uri(uri);
        if let Some(a) = auth {
            b = b.header(AUTHORIZATION, a);
        }
        app.clone().oneshot(b.body(axum::body::Body::empty()).expect("request")).await.expect("infallible")
    }

    #[tokio::test]
    async fn the_router_answers_401_403_or_the_handler_and_adds_the_headers() {
        let h = bcrypt::hash("pw", 4).expect("hash");
        let st = AppState::new(crate::ApiOptions::default(), BTreeMap::new());
        let a = Access::parse(
            &format!(
                "http_server_config:\n  headers:\n    X-Content-Type-Options: nosniff\nbasic_auth_users:\n  alice: {h}\n  bob: {h}\nauthorization:\n  users:\n    bob: {{ read: [default] }}\n"
            ),
            Path::new("."),
        )
        .expect("parses");
        st.set_access(Some(Arc::new(a)));
        let app = crate::router(st.clone());
        let basic = |u: &str| format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{u}:pw")));
        let r = call(&app, "GET", "/-/healthy", None).await;
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        assert_eq!(r.headers().get(WWW_AUTHENTICATE).map(|v| v.as_bytes()), Some(&b"Basic"[..]));
        let r = call(&app, "GET", "/-/healthy", Some(&basic("alice"))).await;
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers().get("x-content-type-options").map(|v| v.as_bytes()), Some(&b"nosniff"[..]));
        let r = call(&app, "POST", "/api/v1/write", Some(&basic("bob"))).await;
        assert_eq!(r.status(), StatusCode::FORBIDDEN);
        let body = axum::body::to_bytes(r.into_body(), 1 << 16).await.expect("body");
        assert_eq!(&body[..], &b"Forbidden: user \"bob\" has no write right on store \"default\"\n"[..]);
        // Bob may read: the handler answers (not ready yet, but past the guard).
        assert_eq!(call(&app, "GET", "/api/v1/labels", Some(&basic("bob"))).await.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(call(&app, "POST", "/api/v1/write", Some(&basic("alice"))).await.status(), StatusCode::SERVICE_UNAVAILABLE);
        // Rate limit: a burst of 2 per hour.
        st.set_access(Some(Arc::new(Access::parse("rate_limit:\n  interval: 1h\n  burst: 2\n", Path::new(".")).expect("parses"))));
        for want in [StatusCode::OK, StatusCode::OK, StatusCode::TOO_MANY_REQUESTS] {
            assert_eq!(call(&app, "GET", "/-/healthy", None).await.status(), want);
        }
        // Open again without rules.
        st.set_access(None);
        assert_eq!(call(&app, "GET", "/-/healthy", None).await.status(), StatusCode::OK);
    }

    #[tokio::test]
    async fn hostile_store_addresses_are_refused() {
        use tower::ServiceExt;
        let st = AppState::new(crate::ApiOptions::default(), BTreeMap::new());
        let app = crate::router(st);
        let send = |h: Option<HeaderValue>, uri: &str| {
            let mut b = Request::builder().uri(uri);
            if let Some(h) = h {
                b = b.header(crate::stores::HEADER, h);
            }
            app.clone().oneshot(b.body(axum::body::Body::empty()).expect("request"))
        };
        let bad_utf8 = HeaderValue::from_bytes(&[b'a', 0xff, b'b']).expect("opaque bytes are a valid header value");
        assert_eq!(send(Some(bad_utf8), "/-/healthy").await.expect("infallible").status(), StatusCode::BAD_REQUEST);
        for uri in ["/store/%2e%2e/-/healthy", "/store/../-/healthy", "/store//-/healthy", "/store/a%00b/-/healthy"] {
            let st = send(None, uri).await.expect("infallible").status();
            assert!(st == StatusCode::NOT_FOUND || st == StatusCode::BAD_REQUEST, "{uri}: {st}");
        }
        let long = HeaderValue::from_str(&"s".repeat(100_000)).expect("hv");
        assert_eq!(send(Some(long), "/-/healthy").await.expect("infallible").status(), StatusCode::NOT_FOUND);
        assert_eq!(send(Some(HeaderValue::from_static("default")), "/-/healthy").await.expect("infallible").status(), StatusCode::OK);
        assert_eq!(send(None, "/store/default/-/healthy").await.expect("infallible").status(), StatusCode::OK);
    }
}
