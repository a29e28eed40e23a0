//! The API's one mapping from errors to HTTP statuses. Domain code returns
//! [`crate::error::Error`] (or an [`ApiError`] for protocol-level refusals); nothing else in the
//! server picks a status code.

use crate::error::Error;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

/// A refused or failed request.
#[derive(Debug)]
pub enum ApiError {
    /// From the server's domain (config, sessions, keys, telemetry).
    Domain(Error),
    /// No or an unknown bearer token (401, with `WWW-Authenticate: Bearer`).
    Unauthorized(&'static str),
    /// A known token without the right, or a secret asked for over plain HTTP (403).
    Forbidden(String),
    /// The request head is over a bound (431; the connection is closed).
    HeadTooLarge(String),
    /// A POST body that is not JSON (415): refuses the CORS-simple types of a cross-site form.
    UnsupportedMediaType,
    /// No route for this method (405).
    MethodNotAllowed,
    /// The request (body included) did not arrive within the request timeout (408).
    Timeout,
}

impl From<Error> for ApiError {
    fn from(e: Error) -> ApiError {
        ApiError::Domain(e)
    }
}

impl ApiError {
    /// The status and message of this error.
    pub fn status(&self) -> (StatusCode, String) {
        use StatusCode as S;
        match self {
            ApiError::Domain(e) => {
                let s = match e {
                    Error::Config { .. }
                    | Error::Cli(_)
                    | Error::BadRequest(_)
                    | Error::Congestion(_) => S::BAD_REQUEST,
                    Error::ConfigFile { .. } | Error::Io { .. } => S::INTERNAL_SERVER_ERROR,
                    Error::NoSuchSession(_) | Error::NotFound(_) => S::NOT_FOUND,
                    Error::Duplicate(_) | Error::Conflict(_) => S::CONFLICT,
                    Error::Forbidden(_) => S::FORBIDDEN,
                    Error::RateLimited(_) => S::TOO_MANY_REQUESTS,
                    Error::Unavailable(_) => S::SERVICE_UNAVAILABLE,
                };
                (s, e.to_string())
            }
            ApiError::Unauthorized(m) => (S::UNAUTHORIZED, (*m).to_string()),
            ApiError::Forbidden(m) => (S::FORBIDDEN, m.clone()),
            ApiError::HeadTooLarge(m) => (S::REQUEST_HEADER_FIELDS_TOO_LARGE, m.clone()),
            ApiError::UnsupportedMediaType => (
                S::UNSUPPORTED_MEDIA_TYPE,
                "request bodies are application/json".into(),
            ),
            ApiError::MethodNotAllowed => (S::METHOD_NOT_ALLOWED, "method not allowed".into()),
            ApiError::Timeout => (S::REQUEST_TIMEOUT, "request not received in time".into()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let (code, msg) = self.status();
        let mut r = (code, axum::Json(json!({ "error": msg }))).into_response();
        let h = r.headers_mut();
        match self {
            ApiError::Unauthorized(_) => {
                h.insert(
                    header::WWW_AUTHENTICATE,
                    HeaderValue::from_static("Bearer realm=\"layercast\""),
                );
            }
            ApiError::HeadTooLarge(_) => {
                h.insert(header::CONNECTION, HeaderValue::from_static("close"));
            }
            _ => {}
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_domain_error_has_one_status() {
        let cases = [
            (Error::config("k", "v"), 400),
            (Error::BadRequest("x".into()), 400),
            (Error::NoSuchSession("s".into()), 404),
            (Error::NotFound("x".into()), 404),
            (Error::Duplicate("s".into()), 409),
            (Error::Conflict("x".into()), 409),
            (Error::Forbidden("x".into()), 403),
            (Error::RateLimited("x".into()), 429),
            (Error::Unavailable("x".into()), 503),
            (Error::io("x", std::io::Error::other("y")), 500),
        ];
        for (e, code) in cases {
            assert_eq!(ApiError::from(e).status().0.as_u16(), code);
        }
        let r = ApiError::Unauthorized("missing bearer token").into_response();
        assert_eq!(r.status(), 401);
        assert!(r.headers().contains_key(header::WWW_AUTHENTICATE));
    }
}
