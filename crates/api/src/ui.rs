//! The web UI, embedded in the binary: `ui/dist/` (built from `ui/src/` by `npm run build` in `ui/`,
//! committed, and checked by CI to equal what the source builds to) is compiled in with `include_bytes!`,
//! so `cargo run` needs no Node.js and the page needs nothing but this server.
//!
//! Routes: `/` redirects to `/query`; the UI's pages (`/query`, `/explore`, `/cardinality`, `/status`)
//! and Prometheus' older addresses of them (`/graph`, `/tsdb-status`, `/flags`) answer the one HTML page,
//! which routes on the path itself (so `/graph?g0.expr=…` links from a Prometheus open their panels);
//! `/assets/app.js` and `/assets/app.css` the bundle. Every answer carries an `ETag` (a hash of the
//! bytes: `If-None-Match` gets a 304) and `Cache-Control: no-cache`, so a new binary's UI is picked up at
//! once; the gzip copies built beside each file are sent to clients that accept gzip (with an ETag of
//! their own). A Content-Security-Policy keeps the page from loading or sending anything anywhere but
//! this server (a `Content-Security-Policy` set in the web configuration's `http_server_config.headers`
//! replaces it, as it does on every answer). With access control on, the pages need a valid credential
//! but no grant on a store: they hold no data, and the API they call checks the grants.

use axum::http::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_SECURITY_POLICY, CONTENT_TYPE, ETAG, IF_NONE_MATCH, LOCATION, VARY,
};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::sync::OnceLock;

/// One embedded file: its bytes, their gzip copy, its content type, and its ETags (plain, gzip), made
/// on first use.
struct Asset {
    plain: &'static [u8],
    gzip: &'static [u8],
    content_type: &'static str,
    tags: OnceLock<(String, String)>,
}

static INDEX: Asset = Asset {
    plain: include_bytes!("../../../ui/dist/index.html"),
    gzip: include_bytes!("../../../ui/dist/index.html.gz"),
    content_type: "text/html; charset=utf-8",
    tags: OnceLock::new(),
};
static APP_JS: Asset = Asset {
    plain: include_bytes!("../../../ui/dist/app.js"),
    gzip: include_bytes!("../../../ui/dist/app.js.gz"),
    content_type: "text/javascript; charset=utf-8",
    tags: OnceLock::new(),
};
static APP_CSS: Asset = Asset {
    plain: include_bytes!("../../../ui/dist/app.css"),
    gzip: include_bytes!("../../../ui/dist/app.css.gz"),
    content_type: "text/css; charset=utf-8",
    tags: OnceLock::new(),
};

/// Scripts and styles from this server only (CodeMirror and uPlot set inline styles, hence
/// `'unsafe-inline'` for styles alone), requests to this server only, no frames.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; \
                   connect-src 'self'; font-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

/// The paths that answer the UI's page.
pub const PAGES: &[&str] = &["/query", "/graph", "/explore", "/cardinality", "/tsdb-status", "/status", "/flags"];

/// Whether `path` is one of the UI's (its pages, its assets, `/`).
pub fn is_ui_path(path: &str) -> bool {
    path == "/" || path == "/assets/app.js" || path == "/assets/app.css" || PAGES.contains(&path)
}

/// `GET /`: to the query page, as Prometheus does.
pub async fn root() -> Response {
    (StatusCode::FOUND, [(LOCATION, HeaderValue::from_static("/query"))]).into_response()
}

/// `GET` of any of [`PAGES`].
pub async fn page(headers: HeaderMap) -> Response {
    serve(&INDEX, &headers)
}

/// `GET /assets/app.js`.
pub async fn app_js(headers: HeaderMap) -> Response {
    serve(&APP_JS, &headers)
}

/// `GET /assets/app.css`.
pub async fn app_css(headers: HeaderMap) -> Response {
    serve(&APP_CSS, &headers)
}

/// The asset's ETag: a hash of its bytes, `-gz` for the gzip copy (another representation, RFC 9110
/// §8.8.3).
fn etag(asset: &'static Asset, gzip: bool) -> &'static str {
    let (plain, gz) = asset.tags.get_or_init(|| {
        let h = xxhash_rust::xxh3::xxh3_64(asset.plain);
        (format!("\"{h:016x}\""), format!("\"{h:016x}-gz\""))
    });
    if gzip { gz } else { plain }
}

fn serve(asset: &'static Asset, headers: &HeaderMap) -> Response {
    let gzip = accepts_gzip(headers);
    let tag = etag(asset, gzip);
    let mut resp = if if_none_match(headers, tag) {
        StatusCode::NOT_MODIFIED.into_response()
    } else if gzip {
        let mut r = asset.gzip.into_response();
        r.headers_mut().insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
        r
    } else {
        asset.plain.into_response()
    };
    let h = resp.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static(asset.content_type));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
    if let Ok(v) = HeaderValue::from_str(tag) {
        h.insert(ETAG, v);
    }
    h.insert(CONTENT_SECURITY_POLICY, HeaderValue::from_static(CSP));
    resp
}

/// Whether `Accept-Encoding` lists gzip (or `*`) with a non-zero quality (RFC 9110 §12.5.3).
fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers.get_all(ACCEPT_ENCODING).iter().filter_map(|v| v.to_str().ok()).flat_map(|v| v.split(',')).any(|item| {
        let mut parts = item.split(';');
        let coding = parts.next().unwrap_or("").trim();
        if !(coding.eq_ignore_ascii_case("gzip") || coding == "*") {
            return false;
        }
        // A `q=0` (or 0.0, 0.00…) refuses it.
        !parts.any(|p| {
            let p = p.trim();
            p.len() >= 2 && p[..2].eq_ignore_ascii_case("q=") && p[2..].trim().parse::<f64>().is_ok_and(|q| q <= 0.0)
        })
    })
}

fn if_none_match(headers: &HeaderMap, tag: &str) -> bool {
    headers
        .get_all(IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| {
            let t = t.trim();
            t == "*" || t == tag || t.strip_prefix("W/") == Some(tag)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut m = HeaderMap::new();
        for (k, v) in pairs {
            m.append(axum::http::HeaderName::from_bytes(k.as_bytes()).expect("name"), HeaderValue::from_str(v).expect("value"));
        }
        m
    }

    #[test]
    fn gzip_only_where_accepted() {
        assert!(accepts_gzip(&h(&[("accept-encoding", "gzip, deflate, br")])));
        assert!(accepts_gzip(&h(&[("accept-encoding", "br;q=1.0, GZIP;q=0.5")])));
        assert!(accepts_gzip(&h(&[("accept-encoding", "*")])));
        assert!(!accepts_gzip(&h(&[])));
        assert!(!accepts_gzip(&h(&[("accept-encoding", "identity")])));
        assert!(!accepts_gzip(&h(&[("accept-encoding", "gzip;q=0")])));
        assert!(!accepts_gzip(&h(&[("accept-encoding", "gzip; Q=0.000")])));
        assert!(!accepts_gzip(&h(&[("accept-encoding", "xgzip")])));
    }

    #[test]
    fn embedded_files_are_the_build() {
        // The page names the bundle it was built with; the gzip copies hold the same bytes.
        let html = std::str::from_utf8(INDEX.plain).expect("utf-8");
        assert!(html.contains("/assets/app.js?v=") && html.contains("/assets/app.css?v="), "{html}");
        assert!(!html.contains("__JS_HASH__"), "index.html was not built: {html}");
        // The gzip copies hold the same bytes: a gzip member's trailer is the CRC-32 and length of what it
        // inflates to (RFC 1952 §2.3.1); the browser test inflates them for real.
        for a in [&INDEX, &APP_JS, &APP_CSS] {
            assert_eq!(a.gzip[..3], [0x1f, 0x8b, 8], "not gzip/deflate");
            let n = a.gzip.len();
            let crc = u32::from_le_bytes(a.gzip[n - 8..n - 4].try_into().expect("4 bytes"));
            let len = u32::from_le_bytes(a.gzip[n - 4..].try_into().expect("4 bytes"));
            assert_eq!((crc, len as usize), (crc32(a.plain), a.plain.len()), "a gzip copy is not of its file");
        }
    }

    #[tokio::test]
    async fn routes_headers_and_revalidation() {
        use axum::body::Body;
        use axum::http::Request;
        use tower::ServiceExt;
        let app = crate::router(crate::AppState::new(crate::ApiOptions::default(), std::collections::BTreeMap::new()));
        let get = |uri: &str, hdrs: &[(&str, &str)]| {
            let mut b = Request::get(uri);
            for (k, v) in hdrs {
                b = b.header(*k, *v);
            }
            let app = app.clone();
            let req = b.body(Body::empty()).expect("request");
            async move {
                let r = app.oneshot(req).await.expect("infallible");
                let (parts, body) = r.into_parts();
                (parts.status, parts.headers, axum::body::to_bytes(body, usize::MAX).await.expect("body"))
            }
        };
        // `/` to the query page; the pages (served before the database is open: they hold no data).
        let (s, h, _) = get("/", &[]).await;
        assert_eq!((s, h.get(LOCATION).map(|v| v.to_str().expect("ascii"))), (StatusCode::FOUND, Some("/query")));
        for p in PAGES {
            let (s, h, b) = get(&format!("{p}?g0.expr=up&g0.tab=1"), &[]).await;
            assert_eq!(s, StatusCode::OK, "{p}");
            assert_eq!(&b[..], INDEX.plain, "{p}");
            assert_eq!(h[CONTENT_TYPE], "text/html; charset=utf-8");
            assert!(h[CONTENT_SECURITY_POLICY].to_str().expect("ascii").contains("connect-src 'self'"));
        }
        // gzip when accepted, the same ETag either way; If-None-Match gets a 304 with no body.
        let (s, h, b) = get("/assets/app.js", &[("accept-encoding", "gzip, br")]).await;
        assert_eq!((s, h.get(CONTENT_ENCODING).map(|v| v.as_bytes())), (StatusCode::OK, Some(&b"gzip"[..])));
        assert_eq!(&b[..], APP_JS.gzip);
        let tag = h[ETAG].to_str().expect("ascii").to_string();
        assert!(tag.ends_with("-gz\""), "{tag}");
        let (s, h2, b) = get("/assets/app.js", &[]).await;
        assert_eq!((s, h2.get(CONTENT_ENCODING), &b[..]), (StatusCode::OK, None, APP_JS.plain));
        assert_eq!(h2[ETAG].to_str().expect("ascii"), tag.replace("-gz", ""));
        assert_eq!(h2[VARY], "Accept-Encoding");
        let (s, _, b) = get("/assets/app.js", &[("if-none-match", &format!("W/\"x\", {tag}")), ("accept-encoding", "gzip")]).await;
        assert_eq!((s, b.len()), (StatusCode::NOT_MODIFIED, 0));
        // The gzip copy's tag does not validate the plain bytes.
        let (s, _, _) = get("/assets/app.js", &[("if-none-match", &tag)]).await;
        assert_eq!(s, StatusCode::OK);
        let (s, _, _) = get("/assets/app.js", &[("if-none-match", "\"stale\"")]).await;
        assert_eq!(s, StatusCode::OK);
        let (s, h, _) = get("/assets/app.css", &[("accept-encoding", "identity")]).await;
        assert_eq!((s, h[CONTENT_TYPE].to_str().expect("ascii")), (StatusCode::OK, "text/css; charset=utf-8"));
        // Hostile headers: bytes that are not text, a huge list of tags and codings, absurd qualities.
        let mut hm = HeaderMap::new();
        hm.append(IF_NONE_MATCH, HeaderValue::from_bytes(b"\"\xff\xfe\"").expect("opaque bytes"));
        hm.append(ACCEPT_ENCODING, HeaderValue::from_bytes(b"gz\xffip").expect("opaque bytes"));
        assert!(!accepts_gzip(&hm) && !if_none_match(&hm, "\"x\""));
        let many = ",".repeat(200_000) + "gzip;q=1e999, *;q=-5, gzip;q=NaN";
        assert!(accepts_gzip(&super::tests::h(&[("accept-encoding", &many)])));
        let (s, _, _) = get("/assets/app.css", &[("if-none-match", &"W/\"a\",".repeat(20_000)), ("accept-encoding", &many)]).await;
        assert_eq!(s, StatusCode::OK);
        // Nothing else is served from the UI's paths.
        for p in ["/assets/../Cargo.toml", "/assets/app.js.gz", "/assets/", "/query/x", "/store/default/query", "/index.html"] {
            assert_eq!(get(p, &[]).await.0, StatusCode::NOT_FOUND, "{p}");
        }
    }

    fn crc32(b: &[u8]) -> u32 {
        let mut c = !0u32;
        for &x in b {
            c ^= x as u32;
            for _ in 0..8 {
                c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
            }
        }
        !c
    }
}
