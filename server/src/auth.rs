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
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

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
    /// HS256 keys of signed tokens ([`Claims`]), if configured; shared by every clone, so a
    /// rotation ([`Tokens::rotate_signing_key`]) reaches every request at once.
    jwt: Option<Arc<RwLock<JwtKeys>>>,
}

/// The keys of signed tokens: the current one signs and verifies; after a rotation the
/// previous one still verifies until its retirement (the overlap, Unix seconds), then never.
struct JwtKeys {
    current: Arc<[u8]>,
    previous: Option<(Arc<[u8]>, u64)>,
    /// The key file (rewritten by a rotation; the previous key goes to `<file>.previous`).
    file: Option<PathBuf>,
}

/// What a rotation of the token key did.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct KeyRotation {
    /// First 8 bytes of SHA-256 of the new key, hex (not secret: names the key in logs).
    pub key_id: String,
    pub previous_key_id: String,
    /// Unix seconds until which tokens signed with the previous key are still accepted.
    pub previous_valid_until: u64,
}

/// First 8 bytes of SHA-256 of a key, hex.
fn key_id(k: &[u8]) -> String {
    openssl::sha::sha256(k)[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Hex text of 32 or more bytes, as in a key file.
fn key_of_hex(hex: &str) -> Option<Vec<u8>> {
    let hex = hex.trim();
    (0..hex.len())
        .step_by(2)
        .map(|i| {
            hex.get(i..i + 2)
                .and_then(|b| u8::from_str_radix(b, 16).ok())
        })
        .collect::<Option<Vec<u8>>>()
        .filter(|k| k.len() >= 32)
}

fn hex_of(k: &[u8]) -> String {
    k.iter().map(|b| format!("{b:02x}")).collect()
}

/// `<file>.previous`: the key a rotation replaced and when it retires (`<hex> <unix s>`), so a
/// restart within the overlap keeps accepting the tokens it signed.
fn previous_file(f: &Path) -> PathBuf {
    let mut n = f.as_os_str().to_owned();
    n.push(".previous");
    PathBuf::from(n)
}

/// What a presented token grants: a role, and for a signed token possibly one session only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    pub role: Role,
    /// `Some(id)`: keys, telemetry and key requests of session `id` only.
    pub session: Option<String>,
    /// `Some(viewer id)`: a signed player token, issued to one viewer (its `sub`). Telemetry
    /// and report keys of this grant are that viewer's only (docs/security.md §9.8). Shared
    /// static tokens and operator tokens bind no viewer.
    pub viewer: Option<String>,
}

/// The claims of a signed token (JWT, RFC 7519, HS256), as LiveKit and MediaMTX scope theirs:
/// a subject, a role, optionally one session, and an expiry.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Claims {
    /// Who it was issued to: for a player token the viewer id its telemetry and report key
    /// must carry (checked); for the others a name (logged).
    pub sub: String,
    /// `control`, `player` or `dashboard`.
    pub role: String,
    /// The one session it covers; absent: every session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// Expiry, Unix seconds (required).
    pub exp: u64,
}

fn role_named(s: &str) -> Option<Role> {
    match s {
        "control" => Some(Role::Control),
        "player" => Some(Role::Player),
        "dashboard" => Some(Role::Dashboard),
        _ => None,
    }
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

/// Constant-time equality (`subtle`; the length is not secret).
fn ct_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    a.len() == b.len() && bool::from(a.ct_eq(b))
}

/// A refusal: who is asking is unknown (401), or may not do this (403).
#[derive(Debug, PartialEq, Eq)]
pub enum Denied {
    Unauthenticated(&'static str),
    NotAllowed(&'static str),
}

#[cfg(test)]
impl Denied {
    /// Its HTTP status (tests and logs; `crate::api::error` maps it for responses).
    pub fn code(&self) -> u16 {
        match self {
            Denied::Unauthenticated(_) => 401,
            Denied::NotAllowed(_) => 403,
        }
    }
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
            jwt: None,
        };
        if t.api.is_none() && (t.player.is_some() || t.dashboard.is_some()) {
            return Err(Error::config(
                "api_token",
                "player_token/dashboard_token need api_token too",
            ));
        }
        Ok(t)
    }

    /// Adds signed tokens with the HS256 key in `path` (64 hex digits), made there (0600) at
    /// the first start. A previous key left by a rotation (`<path>.previous`) is taken too
    /// while its overlap lasts.
    pub fn with_jwt_secret_file(mut self, path: Option<&Path>) -> Result<Tokens> {
        let Some(path) = path else { return Ok(self) };
        let hex = match std::fs::read_to_string(path) {
            Ok(h) => h.trim().to_string(),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let h = hex_of(&random_key()?);
                write_secret(path, &h)
                    .map_err(|e| Error::io(format!("writing {}", path.display()), e))?;
                h
            }
            Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
        };
        let key = key_of_hex(&hex)
            .ok_or_else(|| Error::config("token_secret_file", "64 or more hex digits"))?;
        let now = crate::state::unix_now() as u64;
        let previous = std::fs::read_to_string(previous_file(path))
            .ok()
            .and_then(|t| {
                let (k, until) = t.trim().split_once(' ')?;
                Some((key_of_hex(k)?.into(), until.trim().parse::<u64>().ok()?))
            })
            .filter(|&(_, until)| until > now);
        self.jwt = Some(Arc::new(RwLock::new(JwtKeys {
            current: key.into(),
            previous,
            file: Some(path.to_path_buf()),
        })));
        Ok(self)
    }

    /// Replaces the token key without a restart. Tokens signed with the old key stay valid
    /// for `overlap_s` more seconds (then 401), new tokens are signed with the new key; with a
    /// key file, the new key replaces it atomically and the old one is kept beside it until
    /// the overlap ends. A rotation within an overlap ends the earlier overlap: only one
    /// previous key is ever accepted.
    pub fn rotate_signing_key(&self, overlap_s: u64, now_unix_s: u64) -> Result<KeyRotation> {
        let jwt = self
            .jwt
            .as_ref()
            .ok_or_else(|| Error::config("token_secret_file", "signed tokens not configured"))?;
        let new: Arc<[u8]> = random_key()?.into();
        let mut k = jwt.write().unwrap_or_else(|p| p.into_inner());
        let until = now_unix_s.saturating_add(overlap_s);
        if let Some(f) = &k.file {
            // The old key first: a crash between the two writes leaves both files naming the
            // old key, never a server that forgot the key of tokens still in use.
            let prev = format!("{} {until}", hex_of(&k.current));
            replace_secret(&previous_file(f), &prev)
                .map_err(|e| Error::io(format!("writing {}", previous_file(f).display()), e))?;
            replace_secret(f, &hex_of(&new))
                .map_err(|e| Error::io(format!("writing {}", f.display()), e))?;
        }
        let old = std::mem::replace(&mut k.current, new);
        let r = KeyRotation {
            key_id: key_id(&k.current),
            previous_key_id: key_id(&old),
            previous_valid_until: until,
        };
        k.previous = Some((old, until));
        Ok(r)
    }

    fn keys(&self) -> Option<std::sync::RwLockReadGuard<'_, JwtKeys>> {
        self.jwt
            .as_ref()
            .map(|j| j.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Signs a token (the `token` subcommand; tests).
    pub fn sign(&self, c: &Claims) -> Result<String> {
        let k = self
            .keys()
            .ok_or_else(|| Error::config("token_secret_file", "not configured"))?;
        jsonwebtoken::encode(
            &jsonwebtoken::Header::new(jsonwebtoken::Algorithm::HS256),
            c,
            &jsonwebtoken::EncodingKey::from_secret(&k.current),
        )
        .map_err(|e| Error::config("token", e.to_string()))
    }

    /// Whether signed tokens are configured.
    pub fn has_signing_key(&self) -> bool {
        self.jwt.is_some()
    }

    /// Whether access control is on.
    pub fn enabled(&self) -> bool {
        self.api.is_some() || self.jwt.is_some()
    }

    /// The grant of a signed token: signature (constant-time, in the library) under the
    /// current key or, until its overlap ends at `now_unix_s`, the previous one; expiry (no
    /// leeway beyond 30 s of clock skew) and a known role.
    fn signed_grant(&self, presented: &str, now_unix_s: u64) -> std::result::Result<Grant, Denied> {
        let Some(k) = self.keys() else {
            return Err(Denied::Unauthenticated("unknown token"));
        };
        let mut v = jsonwebtoken::Validation::new(jsonwebtoken::Algorithm::HS256);
        v.leeway = 30;
        v.set_required_spec_claims(&["exp"]);
        let decode = |key: &[u8]| {
            jsonwebtoken::decode::<Claims>(
                presented,
                &jsonwebtoken::DecodingKey::from_secret(key),
                &v,
            )
        };
        let mut d = decode(&k.current);
        if let Some((old, until)) = &k.previous {
            let bad_sig = matches!(&d, Err(e) if matches!(e.kind(), jsonwebtoken::errors::ErrorKind::InvalidSignature));
            if bad_sig && now_unix_s < *until {
                d = decode(old);
            }
        }
        let d = d.map_err(|e| match e.kind() {
            jsonwebtoken::errors::ErrorKind::ExpiredSignature => {
                Denied::Unauthenticated("expired token")
            }
            _ => Denied::Unauthenticated("unknown token"),
        })?;
        let role = role_named(&d.claims.role).ok_or(Denied::Unauthenticated("unknown role"))?;
        Ok(Grant {
            role,
            session: d.claims.session,
            viewer: (role == Role::Player).then_some(d.claims.sub),
        })
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
    ) -> std::result::Result<Option<Grant>, Denied> {
        self.authorize_at(need, presented, crate::state::unix_now() as u64)
    }

    /// [`Tokens::authorize`] at `now_unix_s` (when a rotated-out key's overlap ends).
    pub fn authorize_at(
        &self,
        need: Need,
        presented: Option<&str>,
        now_unix_s: u64,
    ) -> std::result::Result<Option<Grant>, Denied> {
        if need == Need::Public {
            return Ok(None);
        }
        if !self.enabled() {
            return match need {
                Need::Keys => Err(Denied::NotAllowed(
                    "media keys are only served with api_token configured",
                )),
                _ => Ok(None),
            };
        }
        let Some(p) = presented else {
            return Err(Denied::Unauthenticated("missing bearer token"));
        };
        let grant = match self.role_of(p) {
            Some(role) => Grant {
                role,
                session: None,
                viewer: None,
            },
            None => self.signed_grant(p, now_unix_s)?,
        };
        let role = grant.role;
        let ok = match need {
            Need::Public | Need::Read => true,
            Need::Telemetry | Need::Keys => matches!(role, Role::Control | Role::Player),
            Need::Control => role == Role::Control,
        };
        if ok {
            Ok(Some(grant))
        } else {
            Err(Denied::NotAllowed("this token does not allow that"))
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
pub fn presented_token(authorization: Option<&str>, method: &str, query: &str) -> Option<String> {
    if let Some(h) = authorization {
        let h = h.trim();
        let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
        if scheme.eq_ignore_ascii_case("bearer") {
            return Some(rest.trim().to_string());
        }
        return None;
    }
    if method != "GET" {
        return None;
    }
    // Percent-decoded (F16: a token with `+/=` arrives encoded from the dashboard).
    query_param(query, "access_token")
}

/// One query parameter, percent-decoded (`application/x-www-form-urlencoded`).
pub fn query_param(query: &str, name: &str) -> Option<String> {
    form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.into_owned())
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

/// 32 random bytes (OpenSSL's RNG).
fn random_key() -> Result<Vec<u8>> {
    let mut k = vec![0u8; 32];
    openssl::rand::rand_bytes(&mut k)
        .map_err(|e| Error::io("token key", std::io::Error::other(e.to_string())))?;
    Ok(k)
}

/// Replaces a secret file atomically (owner-only): a new file beside it, then renamed over
/// it, so a reader sees the old or the new text, never a partial one.
pub fn replace_secret(path: &Path, text: &str) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".new");
    let tmp = PathBuf::from(tmp);
    let _ = std::fs::remove_file(&tmp);
    write_secret(&tmp, text)?;
    std::fs::rename(&tmp, path)?;
    if let Some(d) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::File::open(d)?.sync_all()?;
    }
    Ok(())
}

/// Writes a new secret file readable by its owner only; refuses to overwrite.
pub fn write_secret(path: &Path, text: &str) -> std::io::Result<()> {
    let mut b = text.as_bytes().to_vec();
    b.push(b'\n');
    write_new_file(path, &b, 0o600)
}

/// Writes a new file atomically (F17): into a temporary file beside it (mode `mode`), synced,
/// then linked to `path` (which fails if `path` exists: never an overwrite) and the directory
/// synced. A crash or a full disk leaves either no `path` or the whole file, never a partial
/// one that the next start would choke on; a leftover temporary file is removed.
pub fn write_new_file(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir)?;
    let name = path
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    let _ = std::fs::remove_file(&tmp);
    let r = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::hard_link(&tmp, path)
    })();
    let _ = std::fs::remove_file(&tmp);
    r?;
    std::fs::File::open(dir)?.sync_all()
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
        let code = |n, p| t.authorize(n, p).unwrap_err().code();
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

    /// A fresh directory `lc-PID-tag`, its token key file, and tokens signing with it.
    fn signed_tokens(tag: &str) -> (std::path::PathBuf, std::path::PathBuf, Tokens) {
        let dir = std::env::temp_dir().join(format!("lc-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let f = dir.join("token.key");
        let t = Tokens::new(A, "", "")
            .unwrap()
            .with_jwt_secret_file(Some(&f))
            .unwrap();
        (dir, f, t)
    }

    /// F15: signed tokens carry a role, a session scope and an expiry; a forged or expired
    /// one is 401, a known role keeps its rights.
    #[test]
    fn signed_tokens_have_role_scope_and_expiry() {
        let (dir, f, t) = signed_tokens("jwt");
        // Made at first start, owner-only, and the same key at the next.
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let again = Tokens::new(A, "", "")
            .unwrap()
            .with_jwt_secret_file(Some(&f))
            .unwrap();
        let now = crate::state::unix_now() as u64;
        let claims = |role: &str, session: Option<&str>, exp: u64| Claims {
            sub: "viewer-1".into(),
            role: role.into(),
            session: session.map(str::to_string),
            exp,
        };
        let p = t.sign(&claims("player", Some("enc"), now + 3600)).unwrap();
        let g = again.authorize(Need::Keys, Some(&p)).unwrap().unwrap();
        assert_eq!((g.role, g.session.as_deref()), (Role::Player, Some("enc")));
        assert_eq!(
            t.authorize(Need::Control, Some(&p)).unwrap_err().code(),
            403
        );
        let old = t.sign(&claims("player", None, now - 3600)).unwrap();
        assert_eq!(t.authorize(Need::Read, Some(&old)).unwrap_err().code(), 401);
        let mut forged = p.clone();
        forged.pop();
        forged.push(if p.ends_with('A') { 'B' } else { 'A' });
        assert_eq!(
            t.authorize(Need::Read, Some(&forged)).unwrap_err().code(),
            401
        );
        let other = Tokens::new(A, "", "")
            .unwrap()
            .with_jwt_secret_file(Some(&dir.join("other.key")))
            .unwrap();
        assert_eq!(
            other.authorize(Need::Read, Some(&p)).unwrap_err().code(),
            401
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Token-key rotation: tokens signed with the old key keep working until the overlap
    /// ends and are refused after; new tokens use the new key; the files on disk follow, so a
    /// restart within the overlap keeps the old key and one after it does not.
    #[test]
    fn rotated_token_key_overlaps_then_retires() {
        let (dir, f, t) = signed_tokens("jwt-rot");
        let now = crate::state::unix_now() as u64;
        let claims = Claims {
            sub: "viewer-1".into(),
            role: "player".into(),
            session: None,
            exp: now + 7200,
        };
        let old = t.sign(&claims).unwrap();
        let old_file = std::fs::read_to_string(&f).unwrap();
        // A clone (the server's State holds one) sees the rotation.
        let served = t.clone();
        let r = t.rotate_signing_key(600, now).unwrap();
        assert_eq!(r.previous_valid_until, now + 600);
        assert_ne!(r.key_id, r.previous_key_id);
        let new = t.sign(&claims).unwrap();
        assert_ne!(old, new);
        let ok = |tok: &str, at: u64| served.authorize_at(Need::Keys, Some(tok), at).is_ok();
        assert!(
            ok(&old, now) && ok(&old, now + 599),
            "old token within the overlap"
        );
        assert!(!ok(&old, now + 600), "old token after the overlap");
        assert!(ok(&new, now) && ok(&new, now + 3600));
        // On disk: the new key, owner-only; the old one beside it with its retirement.
        use std::os::unix::fs::PermissionsExt;
        assert_ne!(std::fs::read_to_string(&f).unwrap(), old_file);
        for p in [f.clone(), previous_file(&f)] {
            let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, 0o600, "{}", p.display());
        }
        let prev = std::fs::read_to_string(previous_file(&f)).unwrap();
        assert!(prev.starts_with(old_file.trim()), "{prev}");
        // A restart within the overlap accepts both, and a token signed by the CLI (which
        // reads the file) is a new-key token.
        let restarted = Tokens::new(A, "", "")
            .unwrap()
            .with_jwt_secret_file(Some(&f))
            .unwrap();
        assert!(restarted.authorize(Need::Keys, Some(&old)).is_ok());
        assert!(restarted.authorize(Need::Keys, Some(&new)).is_ok());
        // A second rotation ends the first overlap: the first key is gone at once.
        t.rotate_signing_key(600, now).unwrap();
        assert!(!ok(&old, now));
        assert!(ok(&new, now));
        let newest = t.sign(&claims).unwrap();
        assert!(ok(&newest, now));
        // With no overlap the old key retires at once.
        t.rotate_signing_key(0, now).unwrap();
        assert!(!ok(&newest, now));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// F17: secret files appear whole or not at all, owner-only, never overwritten, and no
    /// temporary file is left behind.
    #[test]
    fn secret_files_are_written_atomically() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("lc-{}-atomic", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let f = dir.join("sam.key");
        write_secret(&f, "abc").unwrap();
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "abc\n");
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
        let e = write_secret(&f, "other").unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "abc\n");
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1, "{left:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn open_mode_never_serves_keys() {
        let t = Tokens::new("", "", "").unwrap();
        assert!(t.authorize(Need::Control, None).is_ok());
        assert_eq!(t.authorize(Need::Keys, Some(A)).unwrap_err().code(), 403);
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
        let p = |a, m, q| presented_token(a, m, q);
        assert_eq!(p(Some("Bearer abc"), "POST", "").as_deref(), Some("abc"));
        assert_eq!(p(Some("bearer  abc "), "GET", "").as_deref(), Some("abc"));
        assert_eq!(p(Some("Basic abc"), "GET", "access_token=x"), None);
        assert_eq!(
            p(None, "GET", "a=1&access_token=xyz").as_deref(),
            Some("xyz")
        );
        assert_eq!(p(None, "POST", "access_token=xyz"), None);
    }

    /// F16: the dashboard percent-encodes the token in the query; `+/=` must survive.
    #[test]
    fn query_tokens_are_percent_decoded() {
        let t = Tokens::new(A, P, "dash+board/token==0123").unwrap();
        let q = "access_token=dash%2Bboard%2Ftoken%3D%3D0123";
        let got = presented_token(None, "GET", q);
        assert_eq!(got.as_deref(), Some("dash+board/token==0123"));
        assert!(t.authorize(Need::Read, got.as_deref()).is_ok());
    }
}
