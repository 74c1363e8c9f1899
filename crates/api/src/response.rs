//! The JSON envelope of Prometheus' HTTP API and its errors.
//!
//! Success: `{"status":"success","data":…,"warnings":[…],"infos":[…]}` (empty lists omitted); error:
//! `{"status":"error","errorType":"bad_data","error":"…"}`, fields in Go's struct order (`Response` in
//! web/api/v1/api.go). Strings are escaped as Go's `encoding/json` escapes them (`<`, `>`, `&`, U+2028
//! and U+2029 as `\u003c`…) so that the bytes match Prometheus', not only the meaning.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::io;

/// Prometheus' error types (`errorType` in web/api/v1/api.go) with their default status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    Timeout,
    Canceled,
    Execution,
    BadData,
    Internal,
    Unavailable,
    NotFound,
    NotAcceptable,
}

impl ErrorType {
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorType::Timeout => "timeout",
            ErrorType::Canceled => "canceled",
            ErrorType::Execution => "execution",
            ErrorType::BadData => "bad_data",
            ErrorType::Internal => "internal",
            ErrorType::Unavailable => "unavailable",
            ErrorType::NotFound => "not_found",
            ErrorType::NotAcceptable => "not_acceptable",
        }
    }

    /// Mirrors `getDefaultErrorCode` (499 is nginx' "client closed request", as upstream).
    pub fn status(self) -> StatusCode {
        match self {
            ErrorType::BadData => StatusCode::BAD_REQUEST,
            ErrorType::Execution => StatusCode::UNPROCESSABLE_ENTITY,
            ErrorType::Canceled => StatusCode::from_u16(499).expect("499 is a valid status code"),
            ErrorType::Timeout => StatusCode::SERVICE_UNAVAILABLE,
            ErrorType::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            ErrorType::NotFound => StatusCode::NOT_FOUND,
            ErrorType::NotAcceptable => StatusCode::NOT_ACCEPTABLE,
            // Not in getDefaultErrorCode's switch: upstream falls through to 500; a not-ready TSDB is
            // worth a retry, so 503 (what Prometheus' readiness wrapper answers).
            ErrorType::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// An API error: a type and a message.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub typ: ErrorType,
    pub msg: String,
}

impl ApiError {
    pub fn new(typ: ErrorType, msg: impl Into<String>) -> Self {
        ApiError { typ, msg: msg.into() }
    }
    pub fn bad_data(msg: impl Into<String>) -> Self {
        Self::new(ErrorType::BadData, msg)
    }
    /// Prometheus' `invalidParamError`: `invalid parameter "start": …`.
    pub fn invalid_param(param: &str, err: impl std::fmt::Display) -> Self {
        Self::bad_data(format!("invalid parameter {}: {err}", tessera_model::labels::go_quote(param)))
    }
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(ErrorType::Internal, msg)
    }
    pub fn unavailable() -> Self {
        Self::new(ErrorType::Unavailable, "TSDB not ready")
    }
}

impl From<tessera_model::StorageError> for ApiError {
    /// Mirrors `returnAPIError`: storage failures are `internal`, everything else `execution`.
    fn from(e: tessera_model::StorageError) -> Self {
        use tessera_model::StorageError as E;
        match e {
            E::Corruption { .. } | E::Io(_) | E::Poisoned(_) => ApiError::internal(e.to_string()),
            _ => ApiError::new(ErrorType::Execution, e.to_string()),
        }
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    status: &'static str,
    #[serde(rename = "errorType")]
    error_type: &'static str,
    error: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = to_go_json(&ErrorBody { status: "error", error_type: self.typ.as_str(), error: &self.msg });
        json_response(self.typ.status(), body)
    }
}

#[derive(Serialize)]
struct SuccessBody<'a, T: Serialize> {
    status: &'static str,
    data: &'a T,
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    warnings: &'a [String],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    infos: &'a [String],
}

/// A successful API answer: 200 and the envelope around `data`.
pub fn success<T: Serialize>(data: &T, warnings: &[String], infos: &[String]) -> Response {
    let body = to_go_json(&SuccessBody { status: "success", data, warnings, infos });
    json_response(StatusCode::OK, body)
}

fn json_response(status: StatusCode, body: Vec<u8>) -> Response {
    let mut r = (status, body).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r
}

/// Serializes like Go's `encoding/json` (compact, HTML-safe escaping).
pub fn to_go_json<T: Serialize + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    let mut ser = serde_json::Serializer::with_formatter(&mut out, GoFormatter);
    // Serializing our own plain data into a Vec cannot fail (no maps with non-string keys, no I/O).
    v.serialize(&mut ser).expect("serializing API data to memory cannot fail");
    out
}

/// serde_json's compact formatter plus Go's extra escapes: `<`, `>`, `&` (HTMLEscape) and the JS line
/// separators U+2028/U+2029.
struct GoFormatter;

impl serde_json::ser::Formatter for GoFormatter {
    fn write_string_fragment<W: ?Sized + io::Write>(&mut self, w: &mut W, fragment: &str) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            let esc = match c {
                '<' => "\\u003c",
                '>' => "\\u003e",
                '&' => "\\u0026",
                '\u{2028}' => "\\u2028",
                '\u{2029}' => "\\u2029",
                _ => continue,
            };
            w.write_all(&fragment.as_bytes()[start..i])?;
            w.write_all(esc.as_bytes())?;
            start = i + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[start..])
    }
}

/// Serializes a label set as Prometheus does (`labels.Labels.MarshalJSON`: an object, keys sorted).
pub struct LabelsJson<'a>(pub &'a tessera_model::Labels);

impl Serialize for LabelsJson<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for l in self.0.iter() {
            m.serialize_entry(l.name, l.value)?;
        }
        m.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tessera_model::labels;

    #[test]
    fn go_escaping() {
        let v = vec!["a<b>&c\u{2028}", "\"q\"\n"];
        assert_eq!(String::from_utf8(to_go_json(&v)).expect("utf8"), r#"["a\u003cb\u003e\u0026c\u2028","\"q\"\n"]"#);
    }

    #[test]
    fn envelope_field_order() {
        let l = labels!("__name__" => "up", "job" => "node");
        let data = vec![LabelsJson(&l)];
        let body = to_go_json(&SuccessBody { status: "success", data: &data, warnings: &["w".into()], infos: &[] });
        assert_eq!(
            String::from_utf8(body).expect("utf8"),
            r#"{"status":"success","data":[{"__name__":"up","job":"node"}],"warnings":["w"]}"#
        );
        let e = to_go_json(&ErrorBody { status: "error", error_type: "bad_data", error: "x" });
        assert_eq!(String::from_utf8(e).expect("utf8"), r#"{"status":"error","errorType":"bad_data","error":"x"}"#);
    }
}
