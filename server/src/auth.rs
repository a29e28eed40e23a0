//! Access control of the HTTP API and the server's signing key (`docs/security.md` §9).
//!
//! Three bearer tokens, each optional, from the config file, `LAYERCAST_*` or flags (the
//! usual precedence):
//!
//! | token | may |
//! |---|---|
//! | `api_token` (control) | everything |
//! | `player_token` | read, `POST /api/telemetry`, `GET /api/sessions/{id}/keys` |
//! | `dashboard_token` | read only: `GET` of the API, `/metrics`, the `/api/live` WebSocket |
//!
//! With no `api_token` the API is open as before (the demo and the plain tests), except that
//! media keys are never served and encrypted sessions cannot be created: a key handed to
//! anyone who asks would protect nothing. `player_token` or `dashboard_token` without
//! `api_token` is a configuration error (nobody could then control the server).
//!
//! A token rides in `Authorization: Bearer <token>` (RFC 6750 §2.1) or, for `GET` only, in
//! the `access_token` query parameter (§2.3): browsers cannot put a header on a WebSocket
//! upgrade or a page load. No token or an unknown one is `401` (with
//! `WWW-Authenticate: Bearer`); a known token without the right is `403`. Both are decided
//! before the request body is read, so a refused request changes nothing.

use crate::config::ServerConfig;
use crate::error::{Error, Result};
use security::auth::SamSigner;
use std::io::Write;
use std::path::Path;

/// What a request needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Dashboard assets (`GET /`, scripts, styles): they carry no data.
    Public,
    /// Any `GET` of the API, `/metrics`, the WebSocket.
    Read,
    /// `POST /api/telemetry`.
    Telemetry,
    /// `GET /api/sessions/{id}/keys`: the media group key.
    Keys,
    /// Everything that changes sessions.
    Control,
}

/// The role a presented token grants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Control,
    Player,
    Dashboard,
}

/// The configured tokens.
#[derive(Clone, Default)]
pub struct Tokens {
    pub api: Option<String>,
    pub player: Option<String>,
    pub dashboard: Option<String>,
}

impl std::fmt::Debug for Tokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a token.
        f.debug_struct("Tokens")
            .field("api", &self.api.is_some())
            .field("player", &self.player.is_some())
            .field("dashboard", &self.dashboard.is_some())
            .finish()
    }
}

/// Constant-time equality (the length is not secret).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// A refusal: status code and message.
#[derive(Debug, PartialEq, Eq)]
pub struct Denied {
    pub code: u16,
    pub msg: &'static str,
}

impl Tokens {
    /// Checks the token values and that the set makes sense.
    pub fn new(api: &str, player: &str, dashboard: &str) -> Result<Tokens> {
        let norm = |k: &str, v: &str| -> Result<Option<String>> {
            let v = v.trim();
            if v.is_empty() {
                return Ok(None);
            }
            if v.len() < 16 || v.len() > 256 || !v.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(Error::config(
                    k,
                    "tokens are 16..=256 printable ASCII characters without spaces",
                ));
            }
            Ok(Some(v.to_string()))
        };
        let t = Tokens {
            api: norm("api_token", api)?,
            player: norm("player_token", player)?,
            dashboard: norm("dashboard_token", dashboard)?,
        };
        if t.api.is_none() && (t.player.is_some() || t.dashboard.is_some()) {
            return Err(Error::config(
                "api_token",
                "player_token/dashboard_token need api_token too",
            ));
        }
        Ok(t)
    }

    /// Whether access control is on.
    pub fn enabled(&self) -> bool {
        self.api.is_some()
    }

    fn role_of(&self, presented: &str) -> Option<Role> {
        let p = presented.as_bytes();
        // Check all three whatever matches, so timing says nothing about which token it was.
        let c = self.api.as_ref().is_some_and(|t| ct_eq(t.as_bytes(), p));
        let pl = self.player.as_ref().is_some_and(|t| ct_eq(t.as_bytes(), p));
        let d = self
            .dashboard
            .as_ref()
            .is_some_and(|t| ct_eq(t.as_bytes(), p));
        if c {
            Some(Role::Control)
        } else if pl {
            Some(Role::Player)
        } else if d {
            Some(Role::Dashboard)
        } else {
            None
        }
    }

    /// Decides one request. `presented` is the token from the header or query, if any.
    pub fn authorize(
        &self,
        need: Need,
        presented: Option<&str>,
    ) -> std::result::Result<(), Denied> {
        if need == Need::Public {
            return Ok(());
        }
        if !self.enabled() {
            return match need {
                Need::Keys => Err(Denied {
                    code: 403,
                    msg: "media keys are only served with api_token configured",
                }),
                _ => Ok(()),
            };
        }
        let Some(p) = presented else {
            return Err(Denied {
                code: 401,
                msg: "missing bearer token",
            });
        };
        let Some(role) = self.role_of(p) else {
            return Err(Denied {
                code: 401,
                msg: "unknown token",
            });
        };
        let ok = match need {
            Need::Public | Need::Read => true,
            Need::Telemetry | Need::Keys => matches!(role, Role::Control | Role::Player),
            Need::Control => role == Role::Control,
        };
        if ok {
            Ok(())
        } else {
            Err(Denied {
                code: 403,
                msg: "this token does not allow that",
            })
        }
    }
}

/// What a request needs, from its method and path segments.
pub fn need_of(method: &str, parts: &[&str]) -> Need {
    match (method, parts) {
        ("GET", ["api", "sessions", _, "keys"]) => Need::Keys,
        ("POST", ["api", "telemetry"]) => Need::Telemetry,
        // A joining player's key-picture request: the player token, like its telemetry.
        ("POST", ["api", "sessions", _, "keyframe"]) => Need::Telemetry,
        ("GET", ["api", ..]) | ("GET", ["metrics"]) => Need::Read,
        ("GET", _) => Need::Public,
        _ => Need::Control,
    }
}

/// The token of a request: `Authorization: Bearer`, else (GET only) `access_token=` in the
/// query.
pub fn presented_token<'a>(
    authorization: Option<&'a str>,
    method: &str,
    query: &'a str,
) -> Option<&'a str> {
    if let Some(h) = authorization {
        let h = h.trim();
        let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
        if scheme.eq_ignore_ascii_case("bearer") {
            return Some(rest.trim());
        }
        return None;
    }
    if method != "GET" {
        return None;
    }
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix("access_token="))
}

/// The SAM signing key: `sam_key` (hex seed) if set; else the file `sam_key_file`, created
/// with a fresh key (mode 0600) if it does not exist; else a key made for this run only.
/// Returns the signer and where it came from (for the start-up log).
pub fn load_signer(cfg: &ServerConfig) -> Result<(SamSigner, String)> {
    if let Some(hex) = &cfg.sam_key {
        let s = SamSigner::from_hex(hex).map_err(|e| Error::config("sam_key", e.to_string()))?;
        return Ok((s, "sam_key".into()));
    }
    let Some(path) = &cfg.sam_key_file else {
        return Ok((SamSigner::generate(), "generated for this run".into()));
    };
    if path.exists() {
        let s = SamSigner::from_hex_file(path)
            .map_err(|e| Error::config("sam_key_file", e.to_string()))?;
        return Ok((s, format!("{}", path.display())));
    }
    let s = SamSigner::generate();
    write_secret(path, &s.seed_hex())
        .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
    Ok((s, format!("{} (generated)", path.display())))
}

/// Writes a new secret file readable by its owner only; refuses to overwrite.
pub fn write_secret(path: &Path, text: &str) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(text.as_bytes())?;
    f.write_all(b"\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "control-token-0123456789";
    const P: &str = "player-token-0123456789";
    const D: &str = "dashboard-token-0123456789";

    #[test]
    fn roles_and_refusals() {
        let t = Tokens::new(A, P, D).unwrap();
        let ok = |n, p| t.authorize(n, p).is_ok();
        let code = |n, p| t.authorize(n, p).unwrap_err().code;
        assert!(ok(Need::Public, None));
        assert_eq!(code(Need::Read, None), 401);
        assert_eq!(code(Need::Read, Some("wrong-token-0123456789")), 401);
        assert!(ok(Need::Read, Some(D)));
        assert_eq!(code(Need::Telemetry, Some(D)), 403);
        assert_eq!(code(Need::Keys, Some(D)), 403);
        assert_eq!(code(Need::Control, Some(D)), 403);
        assert!(ok(Need::Telemetry, Some(P)));
        assert!(ok(Need::Keys, Some(P)));
        assert_eq!(code(Need::Control, Some(P)), 403);
        for n in [Need::Read, Need::Telemetry, Need::Keys, Need::Control] {
            assert!(ok(n, Some(A)));
        }
        // A prefix of a token is not the token.
        assert_eq!(code(Need::Read, Some(&A[..A.len() - 1])), 401);
    }

    #[test]
    fn open_mode_never_serves_keys() {
        let t = Tokens::new("", "", "").unwrap();
        assert!(t.authorize(Need::Control, None).is_ok());
        assert_eq!(t.authorize(Need::Keys, Some(A)).unwrap_err().code, 403);
        assert!(Tokens::new("", P, "").is_err());
        assert!(Tokens::new("short", "", "").is_err());
        assert!(Tokens::new("has a space in it 0123", "", "").is_err());
    }

    #[test]
    fn classification_and_token_sources() {
        assert_eq!(
            need_of("GET", &["api", "sessions", "x", "keys"]),
            Need::Keys
        );
        assert_eq!(need_of("GET", &["api", "sessions"]), Need::Read);
        assert_eq!(need_of("GET", &["metrics"]), Need::Read);
        assert_eq!(need_of("GET", &["assets", "x.js"]), Need::Public);
        assert_eq!(need_of("POST", &["api", "telemetry"]), Need::Telemetry);
        assert_eq!(
            need_of("POST", &["api", "sessions", "s", "keyframe"]),
            Need::Telemetry
        );
        assert_eq!(need_of("POST", &["api", "sessions"]), Need::Control);
        assert_eq!(need_of("DELETE", &["api", "sessions", "a"]), Need::Control);
        assert_eq!(need_of("PUT", &["anything"]), Need::Control);
        assert_eq!(presented_token(Some("Bearer abc"), "POST", ""), Some("abc"));
        assert_eq!(
            presented_token(Some("bearer  abc "), "GET", ""),
            Some("abc")
        );
        assert_eq!(
            presented_token(Some("Basic abc"), "GET", "access_token=x"),
            None
        );
        assert_eq!(
            presented_token(None, "GET", "a=1&access_token=xyz"),
            Some("xyz")
        );
        assert_eq!(presented_token(None, "POST", "access_token=xyz"), None);
    }
}
