//! The HTTP API (`docs/api.md` is the contract): axum routes over the session registry and the
//! viewer actor, the `/api/live` WebSocket, `/metrics` and the dashboard's files. Connections,
//! TLS and the transport limits are in [`serve`]; the status of every refusal in [`error`].

pub mod error;
pub mod live;
pub mod serve;

use crate::auth::{need_of, presented_token, query_param, Denied, Grant, Need};
use crate::config::SessionConfig;
use crate::error::Error;
use crate::render;
use crate::state::{lock, State};
use crate::viewers::{Telemetry, Viewers};
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, Request, State as Ax};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use error::ApiError;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

/// Largest request body accepted.
pub const MAX_BODY: usize = 256 * 1024;
/// Most header fields a request may carry. Our clients send fewer than ten (browsers about
/// twenty).
pub const MAX_HEADERS: usize = 64;
/// Most bytes of header fields (names and values, plus 4 per field for `: ` and CRLF).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Longest request target (path and query).
pub const MAX_URL: usize = 8 * 1024;

/// Whether a request's head is within [`MAX_HEADERS`], [`MAX_HEADER_BYTES`] and [`MAX_URL`];
/// the refusal says which bound was exceeded. (hyper has already refused, before parsing, a
/// head larger than its read buffer: `serve::MAX_HEAD_BUF`.)
pub fn check_head(
    url_len: usize,
    fields: impl Iterator<Item = (usize, usize)>,
) -> Result<(), String> {
    if url_len > MAX_URL {
        return Err(format!("request target over {MAX_URL} bytes"));
    }
    let (mut n, mut bytes) = (0usize, 0usize);
    for (k, v) in fields {
        n += 1;
        bytes += k + v + 4;
        if n > MAX_HEADERS {
            return Err(format!("more than {MAX_HEADERS} header fields"));
        }
        if bytes > MAX_HEADER_BYTES {
            return Err(format!("header fields over {MAX_HEADER_BYTES} bytes"));
        }
    }
    Ok(())
}

/// The connection a request came on (set by [`serve`] on every request).
#[derive(Clone, Copy, Debug)]
pub struct Conn {
    pub peer: SocketAddr,
    pub tls: bool,
}

/// What every handler shares.
#[derive(Clone)]
pub struct App {
    pub state: Arc<State>,
    pub viewers: Viewers,
    /// WebSocket clients at most (`http_max_websockets`).
    pub ws_slots: Arc<tokio::sync::Semaphore>,
    /// Longest time a request (head and body) may take to arrive and be handled.
    pub request_timeout: Duration,
}

/// The router with every route and the access-control layer.
pub fn router(app: App) -> Router {
    Router::new()
        .route("/api/sessions", get(list_sessions).post(create_session))
        .route(
            "/api/sessions/{id}",
            get(get_session).delete(delete_session),
        )
        .route("/api/sessions/{id}/sdp", get(sdp))
        .route("/api/sessions/{id}/announcement", get(announcement))
        .route("/api/sessions/{id}/keyframe", post(keyframe))
        .route("/api/sessions/{id}/keys", get(keys))
        .route("/api/sessions/{id}/keys/rotate", post(rotate_media_key))
        .route("/api/token-key/rotate", post(rotate_token_key))
        .route("/api/viewers", get(list_viewers))
        .route("/api/viewers/{id}", get(get_viewer))
        .route("/api/telemetry", post(telemetry))
        .route("/api/live", get(live::upgrade))
        .route("/metrics", get(metrics))
        .fallback(fallback)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn_with_state(app.clone(), guard))
        .with_state(app)
}

/// Before any handler: the head's bounds (431), the token (401/403), secrets over plain HTTP
/// (403), the telemetry source bucket (429), and the request timeout (408). A refused request
/// changes nothing: no body has been read.
async fn guard(Ax(app): Ax<App>, req: Request, next: Next) -> Response {
    let st = &app.state;
    let fields = req
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().len(), v.len()));
    let url_len = req.uri().path_and_query().map_or(0, |p| p.as_str().len());
    if let Err(e) = check_head(url_len, fields) {
        st.drops
            .api_headers_too_large
            .fetch_add(1, Ordering::Relaxed);
        return ApiError::HeadTooLarge(e).into_response();
    }
    let conn = req.extensions().get::<Conn>().copied();
    let method = req.method().as_str().to_string();
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    let need = need_of(&method, &parts);
    let authz = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok());
    let token = presented_token(authz, &method, &query);
    let grant = match st.cfg.tokens.authorize(need, token.as_deref()) {
        Ok(g) => g,
        Err(d) => {
            return match d {
                Denied::Unauthenticated(m) => {
                    st.drops.api_unauthorized.fetch_add(1, Ordering::Relaxed);
                    ApiError::Unauthorized(m)
                }
                Denied::NotAllowed(m) => {
                    st.drops.api_forbidden.fetch_add(1, Ordering::Relaxed);
                    ApiError::Forbidden(m.into())
                }
            }
            .into_response();
        }
    };
    // A token scoped to one session reaches the keys and key requests of that session only
    // (its telemetry is checked in `accept_telemetry`, where the body names the session).
    if let Some(scope) = grant.as_ref().and_then(|g| g.session.as_deref()) {
        let other = matches!(parts.as_slice(), ["api", "sessions", id, ..] if *id != scope);
        if other && matches!(need, Need::Keys | Need::Telemetry) {
            st.drops.api_forbidden.fetch_add(1, Ordering::Relaxed);
            return ApiError::Forbidden("this token is scoped to another session".into())
                .into_response();
        }
    }
    let mut req = req;
    if let Some(g) = grant {
        req.extensions_mut().insert(g);
    }
    // Media and report keys never cross a network in clear (F5): plain HTTP serves them to
    // loopback clients only (a local proxy that terminates TLS, the tests).
    if need == Need::Keys {
        let remote_plain = conn.is_some_and(|c| !c.tls && !c.peer.ip().is_loopback());
        if remote_plain {
            st.drops
                .api_plain_http_secrets
                .fetch_add(1, Ordering::Relaxed);
            return ApiError::Forbidden(
                "keys are served over HTTPS only (or to a loopback client)".into(),
            )
            .into_response();
        }
    }
    if need == Need::Telemetry && !st.admit_telemetry(conn.map(|c| c.peer.ip())) {
        return ApiError::from(Error::RateLimited("source address".into())).into_response();
    }
    match tokio::time::timeout(app.request_timeout, next.run(req)).await {
        Ok(r) => r,
        Err(_) => ApiError::Timeout.into_response(),
    }
}

type ApiResult<T> = Result<T, ApiError>;

fn session_of(app: &App, id: &str) -> ApiResult<Arc<crate::state::Session>> {
    app.state
        .session(id)
        .ok_or_else(|| Error::NoSuchSession(id.to_string()).into())
}

/// A JSON answer from bytes rendered on the viewer actor.
fn json_bytes(code: StatusCode, body: Vec<u8>) -> Response {
    (
        code,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        body,
    )
        .into_response()
}

/// Refuses bodies a cross-site form can send without a CORS preflight (F1's CSRF path):
/// absent or JSON is accepted.
fn check_json_body(h: &HeaderMap) -> ApiResult<()> {
    match h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()) {
        None => Ok(()),
        Some(ct) => {
            let ct = ct.split(';').next().unwrap_or("").trim();
            if ct.eq_ignore_ascii_case("application/json") {
                Ok(())
            } else {
                Err(ApiError::UnsupportedMediaType)
            }
        }
    }
}

fn bad_request(app: &App, e: Error) -> ApiError {
    if matches!(e, Error::BadRequest(_) | Error::Config { .. }) {
        app.state
            .drops
            .api_bad_request
            .fetch_add(1, Ordering::Relaxed);
    }
    e.into()
}

async fn list_sessions(Ax(app): Ax<App>) -> ApiResult<Json<Value>> {
    let st = app.state.clone();
    Ok(Json(
        app.viewers
            .query(move |t| render::json::sessions(&st, t))
            .await?,
    ))
}

async fn session_value(app: &App, s: Arc<crate::state::Session>) -> ApiResult<Value> {
    let st = app.state.clone();
    Ok(app
        .viewers
        .query(move |t| render::json::session(&st, &s, t))
        .await?)
}

async fn create_session(Ax(app): Ax<App>, headers: HeaderMap, body: Bytes) -> ApiResult<Response> {
    check_json_body(&headers)?;
    let c: SessionConfig = serde_json::from_slice(&body)
        .map_err(|e| bad_request(&app, Error::BadRequest(format!("session config: {e}"))))?;
    let st = app.state.clone();
    // Starting a session spawns threads and may start GStreamer: off the async workers.
    let s = tokio::task::spawn_blocking(move || st.create_session(&c, "body"))
        .await
        .map_err(|e| Error::io("session start", std::io::Error::other(e.to_string())))?
        .map_err(|e| bad_request(&app, e))?;
    Ok((StatusCode::CREATED, Json(session_value(&app, s).await?)).into_response())
}

async fn get_session(Ax(app): Ax<App>, Path(id): Path<String>) -> ApiResult<Json<Value>> {
    let s = session_of(&app, &id)?;
    Ok(Json(session_value(&app, s).await?))
}

async fn delete_session(Ax(app): Ax<App>, Path(id): Path<String>) -> ApiResult<StatusCode> {
    let st = app.state.clone();
    tokio::task::spawn_blocking(move || st.stop_session(&id))
        .await
        .map_err(|e| Error::io("session stop", std::io::Error::other(e.to_string())))??;
    Ok(StatusCode::NO_CONTENT)
}

async fn sdp(Ax(app): Ax<App>, Path(id): Path<String>) -> ApiResult<Response> {
    let s = session_of(&app, &id)?;
    let text = render::sdp::sdp(&app.state, &s)?;
    Ok(([(header::CONTENT_TYPE, "application/sdp")], text).into_response())
}

async fn announcement(
    Ax(app): Ax<App>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let s = session_of(&app, &id)?;
    let info = lock(&s.info).clone();
    if query_param(q.as_deref().unwrap_or(""), "format").as_deref() == Some("sam") {
        let b = app.state.signed_sam(&info)?;
        return Ok(([(header::CONTENT_TYPE, "application/octet-stream")], b).into_response());
    }
    Ok(Json(info).into_response())
}

async fn keyframe(
    Ax(app): Ax<App>,
    Path(id): Path<String>,
    RawQuery(q): RawQuery,
) -> ApiResult<StatusCode> {
    let s = session_of(&app, &id)?;
    let spatial = match query_param(q.as_deref().unwrap_or(""), "spatial") {
        None => None,
        Some(v) => Some(
            v.parse::<u8>()
                .ok()
                .filter(|n| (1..8).contains(n))
                .ok_or_else(|| {
                    bad_request(
                        &app,
                        Error::BadRequest("keyframe: spatial must be 1..=7".into()),
                    )
                })?,
        ),
    };
    crate::keyreq::request(&s, spatial)?;
    Ok(StatusCode::NO_CONTENT)
}

async fn keys(
    Ax(app): Ax<App>,
    Path(id): Path<String>,
    grant: Option<axum::Extension<Grant>>,
    RawQuery(q): RawQuery,
) -> ApiResult<Response> {
    let s = session_of(&app, &id)?;
    let q = q.unwrap_or_default();
    let rid = query_param(&q, "rid");
    let binding = query_param(&q, "binding");
    let v = app
        .state
        .keys_json(
            &s,
            rid.as_deref(),
            binding.as_deref(),
            grant.as_ref().and_then(|g| g.viewer.as_deref()),
        )
        .map_err(|e| bad_request(&app, e))?;
    // A key must not stay in a cache on the way (F16).
    Ok(([(header::CACHE_CONTROL, "no-store")], Json(v)).into_response())
}

/// `POST /api/sessions/{id}/keys/rotate` (control token), body `{"lead_ms": N}` or empty: makes
/// the next media key, serves it for the lead, then switches the sealers (docs/security.md
/// §9.3). 404 for an unencrypted session, 409 while a rotation is pending.
async fn rotate_media_key(
    Ax(app): Ax<App>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    check_json_body(&headers)?;
    let s = session_of(&app, &id)?;
    let keys = s
        .media_keys
        .as_ref()
        .ok_or_else(|| Error::NotFound("session is not encrypted".into()))?;
    let lead = match body_u64(&app, &body, "lead_ms")? {
        Some(ms) => Duration::from_millis(ms),
        None => crate::media_keys::DEFAULT_LEAD,
    };
    let sch = keys.schedule(lead, std::time::Instant::now())?;
    eprintln!(
        "layercast-server: session {id}: media key epoch {} scheduled, switch in {} ms",
        sch.epoch,
        lead.as_millis()
    );
    // The switch runs on the monotonic clock (a wall-clock step moves nothing).
    let sess = s.clone();
    tokio::spawn(async move {
        tokio::time::sleep(lead).await;
        if let Some(k) = &sess.media_keys {
            if k.switch_if_due(std::time::Instant::now()) {
                eprintln!(
                    "layercast-server: session {}: sealing with media key epoch {}",
                    sess.cfg.id,
                    k.current().epoch()
                );
            }
        }
    });
    Ok((
        StatusCode::ACCEPTED,
        Json(serde_json::json!({
            "epoch": sch.epoch,
            "lead_ms": lead.as_millis() as u64,
            "rotate_at_unix_ms": sch.switch_at_unix_ms,
            "key_refresh_ms": keys.refresh.as_millis() as u64,
        })),
    )
        .into_response())
}

/// `POST /api/token-key/rotate` (control token), body `{"overlap_s": N}` or empty: a new key
/// for signed tokens; tokens signed with the old one are accepted for `overlap_s` more
/// seconds (default [`TOKEN_KEY_OVERLAP_S`]), then refused (docs/security.md §9.5).
async fn rotate_token_key(
    Ax(app): Ax<App>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<Response> {
    check_json_body(&headers)?;
    let overlap = body_u64(&app, &body, "overlap_s")?.unwrap_or(TOKEN_KEY_OVERLAP_S);
    let now = crate::state::unix_now() as u64;
    let tokens = app.state.cfg.tokens.clone();
    // Writes two small files (fsync): off the async workers.
    let r = tokio::task::spawn_blocking(move || tokens.rotate_signing_key(overlap, now))
        .await
        .map_err(|e| Error::io("token key rotation", std::io::Error::other(e.to_string())))?
        .map_err(|e| match e {
            Error::Config { .. } => Error::NotFound("signed tokens are not configured".into()),
            e => e,
        })?;
    eprintln!(
        "layercast-server: token key rotated to {} ({} accepted until {} Unix s)",
        r.key_id, r.previous_key_id, r.previous_valid_until
    );
    Ok(Json(r).into_response())
}

/// Overlap of a token-key rotation when the request names none: the `token` subcommand's
/// default lifetime, so no token issued before with that lifetime is cut short.
pub const TOKEN_KEY_OVERLAP_S: u64 = 86_400;

/// One optional non-negative integer field of a small JSON object body (empty body: `None`).
fn body_u64(app: &App, body: &[u8], field: &str) -> ApiResult<Option<u64>> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(None);
    }
    let bad = |m: String| bad_request(app, Error::BadRequest(m));
    let v: serde_json::Map<String, Value> =
        serde_json::from_slice(body).map_err(|e| bad(format!("body: {e}")))?;
    if let Some(k) = v.keys().find(|k| k.as_str() != field) {
        return Err(bad(format!("unknown field {k:?} (only {field:?})")));
    }
    match v.get(field) {
        None => Ok(None),
        Some(x) => x
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(format!("{field}: a non-negative integer"))),
    }
}

async fn list_viewers(Ax(app): Ax<App>) -> ApiResult<Response> {
    let b = app.viewers.query(|t| render::json::viewers(t)).await?;
    Ok(json_bytes(StatusCode::OK, b))
}

async fn get_viewer(Ax(app): Ax<App>, Path(id): Path<String>) -> ApiResult<Response> {
    let b = app
        .viewers
        .query(move |t| render::json::viewer(t, &id))
        .await?
        .ok_or_else(|| Error::NotFound("no such viewer".into()))?;
    Ok(json_bytes(StatusCode::OK, b))
}

async fn telemetry(
    Ax(app): Ax<App>,
    conn: Option<axum::Extension<Conn>>,
    grant: Option<axum::Extension<Grant>>,
    headers: HeaderMap,
    body: Bytes,
) -> ApiResult<StatusCode> {
    let d = &app.state.drops;
    check_json_body(&headers)?;
    let t: Telemetry = serde_json::from_slice(&body).map_err(|e| {
        d.telemetry_malformed.fetch_add(1, Ordering::Relaxed);
        Error::BadRequest(format!("telemetry: {e}"))
    })?;
    if let Some(scope) = grant.as_ref().and_then(|g| g.session.as_deref()) {
        if scope != t.session_id {
            d.api_forbidden.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::Forbidden(
                "this token is scoped to another session".into(),
            ));
        }
    }
    // A viewer's own token speaks for that viewer only.
    if let Some(v) = grant.as_ref().and_then(|g| g.viewer.as_deref()) {
        if v != t.viewer_id {
            d.telemetry_wrong_viewer.fetch_add(1, Ordering::Relaxed);
            return Err(ApiError::Forbidden(
                "this token belongs to another viewer".into(),
            ));
        }
    }
    let addr = conn.map(|c| c.peer.to_string()).unwrap_or_default();
    accept_telemetry(&app, t, addr, true).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The checks every telemetry report passes, HTTP or UDP, then the viewer actor. With `wait`
/// the actor's verdict is awaited (HTTP's status); without, a full queue is a counted drop.
pub async fn accept_telemetry(app: &App, t: Telemetry, addr: String, wait: bool) -> ApiResult<()> {
    let d = &app.state.drops;
    if let Err(e) = t.validate() {
        d.telemetry_malformed.fetch_add(1, Ordering::Relaxed);
        return Err(e.into());
    }
    if app.state.session(&t.session_id).is_none() {
        d.telemetry_unknown_session.fetch_add(1, Ordering::Relaxed);
        return Err(Error::NoSuchSession(t.session_id).into());
    }
    if !wait {
        if !app.viewers.report_nowait(t, addr) {
            d.telemetry_queue_full.fetch_add(1, Ordering::Relaxed);
        }
        return Ok(());
    }
    app.viewers.report(t, addr).await.map_err(|e| {
        if matches!(e, Error::Unavailable(_)) {
            d.telemetry_queue_full.fetch_add(1, Ordering::Relaxed);
        }
        e.into()
    })
}

async fn metrics(Ax(app): Ax<App>) -> ApiResult<Response> {
    let st = app.state.clone();
    let text = app
        .viewers
        .query(move |t| render::prometheus::metrics(&st, t))
        .await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], text).into_response())
}

/// The built dashboard for any other `GET`; paths with `..` are refused; unknown paths fall
/// back to `index.html` (single-page app routing).
async fn fallback(Ax(app): Ax<App>, method: Method, uri: axum::http::Uri) -> ApiResult<Response> {
    if method != Method::GET {
        return Err(ApiError::MethodNotAllowed);
    }
    let path = uri.path();
    if path.split('/').any(|c| c == "..") {
        return Err(Error::BadRequest("bad path".into()).into());
    }
    let root = &app.state.cfg.dashboard_dir;
    let rel = path.trim_start_matches('/');
    let mut p = root.join(if rel.is_empty() { "index.html" } else { rel });
    if !p.is_file() {
        p = root.join("index.html");
    }
    let b = tokio::fs::read(&p).await.map_err(|_| {
        Error::NotFound("dashboard not built (server/dashboard/dist missing)".into())
    })?;
    let ct = match p.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js") => "text/javascript",
        Some("css") => "text/css",
        Some("svg") => "image/svg+xml",
        Some("json") => "application/json",
        Some("png") => "image/png",
        _ => "application/octet-stream",
    };
    Ok((
        [
            (header::CONTENT_TYPE, ct),
            (header::REFERRER_POLICY, "no-referrer"),
        ],
        b,
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::ServiceExt;

    const API: &str = "control-token-0123456789";
    const PLAYER: &str = "player-token-0123456789";

    pub(super) fn app() -> App {
        // Under the build's own directory, not /tmp: one file per test process, which
        // nothing would clean up there.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp");
        std::fs::create_dir_all(&dir).unwrap();
        let key = dir.join(format!("lc-{}-api-token.key", std::process::id()));
        let key = key.to_string_lossy().to_string();
        let args: Vec<String> = [
            "--dev",
            "--api-token",
            API,
            "--player-token",
            PLAYER,
            "--token-secret-file",
            &key,
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let mut cfg = match crate::config::load(&args, &Default::default()).unwrap() {
            crate::config::Cli::Run(c) => *c,
            crate::config::Cli::Help(_) => unreachable!("no --help given"),
        };
        crate::provision::provision(&mut cfg).unwrap();
        let state = State::new(cfg, security::auth::SamSigner::from_seed(&[7; 32]));
        let viewers = Viewers::spawn(
            crate::viewers::TableConfig {
                viewer_timeout: Duration::from_secs(5),
                min_interval: Duration::from_millis(500),
                max_viewers: 100,
            },
            Duration::from_secs(1),
            render::json::LivePublisher::new(state.clone()),
        );
        App {
            state,
            viewers,
            ws_slots: Arc::new(tokio::sync::Semaphore::new(4)),
            request_timeout: Duration::from_secs(5),
        }
    }

    async fn status(app: &App, peer: &str, tls: bool, path: &str) -> u16 {
        let mut req = axum::http::Request::get(path)
            .header("Authorization", format!("Bearer {PLAYER}"))
            .body(axum::body::Body::empty())
            .unwrap();
        req.extensions_mut().insert(Conn {
            peer: peer.parse().unwrap(),
            tls,
        });
        router(app.clone())
            .oneshot(req)
            .await
            .unwrap()
            .status()
            .as_u16()
    }

    /// F5: keys never leave over plain HTTP to a non-loopback client. The refusal comes from
    /// the guard (403) before any handler; over TLS, or to loopback, the request reaches the
    /// handler (404 here: there is no such session).
    #[tokio::test]
    async fn keys_are_refused_over_plain_http_to_remote_clients() {
        let app = app();
        let keys = "/api/sessions/none/keys";
        assert_eq!(status(&app, "10.1.2.3:40000", false, keys).await, 403);
        assert_eq!(status(&app, "10.1.2.3:40000", true, keys).await, 404);
        assert_eq!(status(&app, "127.0.0.1:40000", false, keys).await, 404);
        assert_eq!(
            app.state
                .drops
                .api_plain_http_secrets
                .load(Ordering::Relaxed),
            1
        );
        // F15: a player token signed for session "a" gets 403 on session "b"'s keys, and an
        // expired one 401 (checked before the session lookup, which would say 404).
        let now = crate::state::unix_now() as u64;
        let sign = |session: &str, exp: u64| {
            app.state
                .cfg
                .tokens
                .sign(&crate::auth::Claims {
                    sub: "v".into(),
                    role: "player".into(),
                    session: Some(session.into()),
                    exp,
                })
                .unwrap()
        };
        let scoped = sign("a", now + 600);
        let req = |tok: &str, path: &str| {
            let mut r = axum::http::Request::get(path)
                .header("Authorization", format!("Bearer {tok}"))
                .body(axum::body::Body::empty())
                .unwrap();
            r.extensions_mut().insert(Conn {
                peer: "127.0.0.1:1".parse().unwrap(),
                tls: false,
            });
            r
        };
        let code = |r: axum::http::Request<axum::body::Body>| {
            let app = app.clone();
            async move { router(app).oneshot(r).await.unwrap().status().as_u16() }
        };
        assert_eq!(code(req(&scoped, "/api/sessions/b/keys")).await, 403);
        assert_eq!(code(req(&scoped, "/api/sessions/a/keys")).await, 404);
        assert_eq!(
            code(req(&sign("a", now - 600), "/api/sessions/a/keys")).await,
            401
        );
        // Other reads are not secrets.
        assert_eq!(
            status(&app, "10.1.2.3:40000", false, "/api/sessions").await,
            200
        );
    }

    #[test]
    fn request_heads_are_bounded_in_fields_bytes_and_target() {
        let small = |n: usize| (0..n).map(|_| (8usize, 20usize));
        assert!(check_head(20, small(0)).is_ok());
        assert!(check_head(20, small(MAX_HEADERS)).is_ok());
        let e = check_head(20, small(MAX_HEADERS + 1)).unwrap_err();
        assert!(e.contains("header fields"), "{e}");
        assert!(check_head(20, [(4, MAX_HEADER_BYTES - 8)].into_iter()).is_ok());
        let e = check_head(20, [(4, MAX_HEADER_BYTES - 7)].into_iter()).unwrap_err();
        assert!(e.contains("bytes"), "{e}");
        assert!(check_head(20, (0..10).map(|_| (10usize, 2000usize))).is_err());
        assert!(check_head(MAX_URL, small(1)).is_ok());
        let e = check_head(MAX_URL + 1, small(1)).unwrap_err();
        assert!(e.contains("target"), "{e}");
    }
}
