//! Bearer tokens, the server's scheme (docs/api.md "Security"): with an API token configured
//! every request but the watch page's static HTML needs `Authorization: Bearer <token>` (or
//! `?access_token=` on a GET, for pages that cannot set the header). The API token has every
//! right, the viewer token WHEP and a viewer's stats, the metrics token the read-only views.
//! Without an API token the API is open. The one check is [`check`]; the control plane's
//! signed, scoped tokens will replace the comparison inside it.

use axum::http::{HeaderMap, StatusCode};

/// What a request needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Right {
    /// WHEP (POST, DELETE, PATCH) and a viewer's own stats.
    View,
    /// /metrics and the list of viewers.
    Read,
}

/// The tokens this edge accepts.
#[derive(Debug, Clone, Default)]
pub struct Tokens {
    pub api: String,
    pub viewer: String,
    pub metrics: String,
}

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No token or an unknown one: 401.
    Unauthorized,
    /// A known token without the right: 403.
    Forbidden,
}

impl Refusal {
    pub fn status(self) -> StatusCode {
        match self {
            Refusal::Unauthorized => StatusCode::UNAUTHORIZED,
            Refusal::Forbidden => StatusCode::FORBIDDEN,
        }
    }
}

/// The token of a request: the bearer header, else `access_token` in the query.
fn presented<'a>(headers: &'a HeaderMap, query: Option<&'a str>) -> Option<&'a str> {
    if let Some(h) = headers.get(axum::http::header::AUTHORIZATION) {
        return h.to_str().ok()?.strip_prefix("Bearer ").map(str::trim);
    }
    query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("access_token="))
}

/// Constant-time comparison (the length is not secret).
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// Whether a request may do what needs `right`.
pub fn check(
    t: &Tokens,
    headers: &HeaderMap,
    query: Option<&str>,
    right: Right,
) -> Result<(), Refusal> {
    if t.api.is_empty() {
        return Ok(());
    }
    let Some(p) = presented(headers, query).filter(|p| !p.is_empty()) else {
        return Err(Refusal::Unauthorized);
    };
    if same(p, &t.api) {
        return Ok(());
    }
    let viewer = !t.viewer.is_empty() && same(p, &t.viewer);
    let metrics = !t.metrics.is_empty() && same(p, &t.metrics);
    match (right, viewer, metrics) {
        (Right::View, true, _) | (Right::Read, _, true) => Ok(()),
        (_, true, _) | (_, _, true) => Err(Refusal::Forbidden),
        _ => Err(Refusal::Unauthorized),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(tok: &str) -> HeaderMap {
        let mut m = HeaderMap::new();
        m.insert(
            axum::http::header::AUTHORIZATION,
            format!("Bearer {tok}").parse().unwrap(),
        );
        m
    }

    #[test]
    fn rights() {
        let t = Tokens {
            api: "A".into(),
            viewer: "V".into(),
            metrics: "M".into(),
        };
        let none = HeaderMap::new();
        assert_eq!(
            check(&t, &none, None, Right::View),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(check(&t, &h("A"), None, Right::Read), Ok(()));
        assert_eq!(check(&t, &h("V"), None, Right::View), Ok(()));
        assert_eq!(
            check(&t, &h("V"), None, Right::Read),
            Err(Refusal::Forbidden)
        );
        assert_eq!(check(&t, &h("M"), None, Right::Read), Ok(()));
        assert_eq!(
            check(&t, &h("M"), None, Right::View),
            Err(Refusal::Forbidden)
        );
        assert_eq!(
            check(&t, &h("x"), None, Right::View),
            Err(Refusal::Unauthorized)
        );
        assert_eq!(
            check(&t, &none, Some("a=1&access_token=V"), Right::View),
            Ok(())
        );
        let open = Tokens::default();
        assert_eq!(check(&open, &none, None, Right::Read), Ok(()));
    }
}
