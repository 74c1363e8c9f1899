//! A minimal blocking HTTP/1.1 client for the load generators and query harnesses: `POST` with a body
//! or `GET`, over one kept-alive connection per sender, `http://` only.
//!
//! Why not reqwest: the generator shares two cores with the server it measures, so each request must
//! cost as little CPU as possible, and a load generator needs exactly one verb, one connection per
//! thread and the status, a few headers and the body of the answer. This does that in ~150 lines with
//! the standard library (responses with `Content-Length`, chunked, or read-to-close bodies).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// `http://host:port/path` split up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Url {
    pub host_port: String,
    pub path: String,
}

impl Url {
    pub fn parse(url: &str) -> anyhow::Result<Url> {
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| anyhow::anyhow!("only http:// URLs are supported, got {url:?}"))?;
        let (hp, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        anyhow::ensure!(!hp.is_empty(), "no host in {url:?}");
        let host_port = if hp.contains(':') { hp.to_string() } else { format!("{hp}:80") };
        Ok(Url { host_port, path: path.to_string() })
    }
}

/// An answer.
#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One connection, reopened when the server closes it or an error occurs.
pub struct Client {
    url: Url,
    conn: Option<BufReader<TcpStream>>,
    timeout: Duration,
    head: Vec<u8>,
    max_body_bytes: usize,
}

/// The default cap on an answer's body: [`read_response`]'s.
pub const DEFAULT_MAX_BODY_BYTES: usize = 64 << 20;

impl Client {
    pub fn new(url: Url, timeout: Duration) -> Self {
        Client { url, conn: None, timeout, head: Vec::with_capacity(512), max_body_bytes: DEFAULT_MAX_BODY_BYTES }
    }

    /// Accepts answers of up to `bytes` (default [`DEFAULT_MAX_BODY_BYTES`]): a fleet-wide range query's
    /// JSON runs to hundreds of MiB.
    pub fn with_max_body(mut self, bytes: usize) -> Self {
        self.max_body_bytes = bytes;
        self
    }

    fn connect(&mut self) -> std::io::Result<&mut BufReader<TcpStream>> {
        if self.conn.is_none() {
            let s = TcpStream::connect(&self.url.host_port)?;
            s.set_nodelay(true)?;
            s.set_read_timeout(Some(self.timeout))?;
            s.set_write_timeout(Some(self.timeout))?;
            self.conn = Some(BufReader::with_capacity(16 * 1024, s));
        }
        Ok(self.conn.as_mut().expect("just connected"))
    }

    /// POSTs `body` with the given extra headers. On an I/O error the connection is dropped (the next
    /// call reconnects) and the error returned; the caller decides about retrying.
    pub fn post(&mut self, headers: &[(&str, &str)], body: &[u8]) -> std::io::Result<Response> {
        let path = std::mem::take(&mut self.url.path);
        let r = self.request("POST", &path, headers, body);
        self.url.path = path;
        r
    }

    /// GETs `path` (with its query string) on the URL's host, with the same error handling as
    /// [`Client::post`].
    pub fn get(&mut self, path: &str) -> std::io::Result<Response> {
        self.request("GET", path, &[], &[])
    }

    /// Sends `method` to `path` (instead of the URL's own path) on the same host and connection, with the
    /// same error handling as [`Client::post`].
    pub fn request(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> std::io::Result<Response> {
        let r = self.request_once(method, path, headers, body);
        if r.is_err() {
            self.conn = None;
        }
        r
    }

    fn request_once(&mut self, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> std::io::Result<Response> {
        self.head.clear();
        write!(self.head, "{method} {path} HTTP/1.1\r\nHost: {}\r\nUser-Agent: tessera-bench\r\n", self.url.host_port)?;
        // A bodiless GET carries no Content-Length, as curl and wrk send it.
        if !(body.is_empty() && method == "GET") {
            write!(self.head, "Content-Length: {}\r\n", body.len())?;
        }
        for (n, v) in headers {
            write!(self.head, "{n}: {v}\r\n")?;
        }
        self.head.extend_from_slice(b"\r\n");
        let head = std::mem::take(&mut self.head);
        let conn = self.connect()?;
        let w = conn.get_mut();
        let res = w.write_all(&head).and_then(|_| w.write_all(body)).and_then(|_| w.flush());
        self.head = head;
        res?;
        let conn = self.conn.as_mut().expect("connected");
        let resp = read_response_limited(conn, self.max_body_bytes)?;
        let close = resp.header("connection").is_some_and(|v| v.eq_ignore_ascii_case("close"));
        if close {
            self.conn = None;
        }
        Ok(resp)
    }
}

fn bad(msg: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, msg.to_string())
}

fn too_big(max_body_bytes: usize) -> std::io::Error {
    bad(&format!("response body over {} MiB", max_body_bytes >> 20))
}

/// Reads one response (status line, headers, body of at most [`DEFAULT_MAX_BODY_BYTES`]).
pub fn read_response<R: BufRead>(r: &mut R) -> std::io::Result<Response> {
    read_response_limited(r, DEFAULT_MAX_BODY_BYTES)
}

/// [`read_response`] with a body of at most `max_body_bytes`.
pub fn read_response_limited<R: BufRead>(r: &mut R, max_body_bytes: usize) -> std::io::Result<Response> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed before a response"));
    }
    let mut parts = line.split_whitespace();
    let version = parts.next().unwrap_or("");
    if !version.starts_with("HTTP/1.") {
        return Err(bad("not an HTTP/1.x response"));
    }
    let status: u16 = parts.next().and_then(|s| s.parse().ok()).ok_or_else(|| bad("bad status line"))?;
    let mut headers = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(bad("eof in headers"));
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((n, v)) = l.split_once(':') {
            headers.push((n.trim().to_string(), v.trim().to_string()));
        }
        if headers.len() > 200 {
            return Err(bad("too many headers"));
        }
    }
    let get = |n: &str| headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(n)).map(|(_, v)| v.clone());
    let mut body = Vec::new();
    if status == 204 || status == 304 || (100..200).contains(&status) {
        // No body by definition.
    } else if get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        loop {
            line.clear();
            r.read_line(&mut line)?;
            let size_txt = line.trim().split(';').next().unwrap_or("");
            let size = usize::from_str_radix(size_txt, 16).map_err(|_| bad("bad chunk size"))?;
            if size == 0 {
                // Trailers until the empty line.
                loop {
                    line.clear();
                    if r.read_line(&mut line)? == 0 || line.trim().is_empty() {
                        break;
                    }
                }
                break;
            }
            if body.len() + size > max_body_bytes {
                return Err(too_big(max_body_bytes));
            }
            let start = body.len();
            body.resize(start + size, 0);
            r.read_exact(&mut body[start..])?;
            line.clear();
            r.read_line(&mut line)?;
        }
    } else if let Some(n) = get("content-length") {
        let n: usize = n.parse().map_err(|_| bad("bad content-length"))?;
        if n > max_body_bytes {
            return Err(too_big(max_body_bytes));
        }
        body.resize(n, 0);
        r.read_exact(&mut body)?;
    } else {
        r.take(max_body_bytes as u64).read_to_end(&mut body)?;
    }
    Ok(Response { status, headers, body })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_urls() {
        assert_eq!(
            Url::parse("http://127.0.0.1:9090/api/v1/write").expect("ok"),
            Url { host_port: "127.0.0.1:9090".into(), path: "/api/v1/write".into() }
        );
        assert_eq!(Url::parse("http://localhost").expect("ok"), Url { host_port: "localhost:80".into(), path: "/".into() });
        assert!(Url::parse("https://x").is_err());
    }

    #[test]
    fn reads_all_three_body_framings() {
        let mut r = std::io::Cursor::new(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 5\r\nX-A: b\r\n\r\nhello".to_vec());
        let resp = read_response(&mut r).expect("ok");
        assert_eq!((resp.status, resp.body.as_slice(), resp.header("x-a")), (400, &b"hello"[..], Some("b")));
        let mut r = std::io::Cursor::new(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n".to_vec());
        assert_eq!(read_response(&mut r).expect("ok").body, b"abcde");
        let mut r = std::io::Cursor::new(b"HTTP/1.0 500 x\r\n\r\nuntil close".to_vec());
        assert_eq!(read_response(&mut r).expect("ok").body, b"until close");
        let mut r = std::io::Cursor::new(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec());
        assert!(read_response(&mut r).expect("ok").body.is_empty());
    }

    #[test]
    fn bodies_over_the_limit_are_refused_in_both_framings() {
        let mut r = std::io::Cursor::new(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec());
        assert!(read_response_limited(&mut r, 4).is_err());
        let mut r = std::io::Cursor::new(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n".to_vec());
        assert!(read_response_limited(&mut r, 4).is_err());
        let mut r = std::io::Cursor::new(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello".to_vec());
        assert_eq!(read_response_limited(&mut r, 5).expect("ok").body, b"hello");
    }
}
