//! HTTP API, WebSocket live stats, Prometheus `/metrics` and the dashboard's static files
//! (`docs/api.md` is the contract). Built on `tiny_http` with a few worker threads: the API is
//! small and the machine has two cores, so no async runtime.

use crate::config::SessionConfig;
use crate::error::Error;
use crate::state::{lock, State, Telemetry};
use serde_json::json;
use std::io::Read;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tiny_http::{Header, Method, Request, Response, Server, StatusCode};

/// Largest request body accepted.
const MAX_BODY: u64 = 256 * 1024;

/// Most header fields a request may carry. Our clients send fewer than ten (browsers about
/// twenty); `tiny_http` itself accepts any number.
pub const MAX_HEADERS: usize = 64;
/// Most bytes of header fields (names and values, plus 4 per field for `: ` and CRLF).
pub const MAX_HEADER_BYTES: usize = 16 * 1024;
/// Longest request target (path and query).
pub const MAX_URL: usize = 8 * 1024;

/// Whether a request's head is within [`MAX_HEADERS`], [`MAX_HEADER_BYTES`] and [`MAX_URL`];
/// the refusal says which bound was exceeded.
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

type Resp = Response<std::io::Cursor<Vec<u8>>>;

fn header(k: &str, v: &str) -> Header {
    Header::from_bytes(k.as_bytes(), v.as_bytes()).expect("static header is valid")
}

fn json_resp(code: u16, v: &serde_json::Value) -> Resp {
    Response::from_data(v.to_string().into_bytes())
        .with_status_code(code)
        .with_header(header("Content-Type", "application/json"))
}

/// A response body whose buffer goes back to the state's pool once the response is sent or
/// dropped (`State::give_json_buf`, why in `State::viewers_json`).
struct PooledBody {
    buf: Vec<u8>,
    pos: usize,
    state: Arc<State>,
}

impl Read for PooledBody {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        let n = rest.len().min(out.len());
        out[..n].copy_from_slice(&rest[..n]);
        self.pos += n;
        Ok(n)
    }
}

impl Drop for PooledBody {
    fn drop(&mut self) {
        self.state.give_json_buf(std::mem::take(&mut self.buf));
    }
}

fn error_resp(code: u16, msg: &str) -> Resp {
    json_resp(code, &json!({"error": msg}))
}

/// Serves until `stop` is set; spawns `workers` threads on one listener.
pub fn serve(server: Arc<Server>, state: Arc<State>, stop: Arc<AtomicBool>, workers: usize) {
    let mut hs = Vec::new();
    for i in 0..workers {
        let (server, state, stop) = (server.clone(), state.clone(), stop.clone());
        hs.push(
            std::thread::Builder::new()
                .name(format!("http-{i}"))
                .spawn(move || {
                    while !stop.load(Ordering::Relaxed) {
                        match server.recv_timeout(Duration::from_millis(200)) {
                            Ok(Some(req)) => handle(req, &state, &stop),
                            Ok(None) => {}
                            Err(_) => break,
                        }
                    }
                })
                .expect("spawning http worker"),
        );
    }
    for h in hs {
        let _ = h.join();
    }
}

fn read_body(req: &mut Request) -> Result<Vec<u8>, String> {
    let mut body = Vec::new();
    req.as_reader()
        .take(MAX_BODY + 1)
        .read_to_end(&mut body)
        .map_err(|e| e.to_string())?;
    if body.len() as u64 > MAX_BODY {
        return Err(format!("body over {MAX_BODY} bytes"));
    }
    Ok(body)
}

fn handle(mut req: Request, state: &Arc<State>, stop: &Arc<AtomicBool>) {
    // The head's size first, before anything else looks at it: 431, counted, connection
    // closed. (`tiny_http` has already read the head into memory by now: see
    // docs/security.md §9.5 for what this bounds and what it does not.)
    if let Err(e) = check_head(
        req.url().len(),
        req.headers()
            .iter()
            .map(|h| (h.field.as_str().as_str().len(), h.value.as_str().len())),
    ) {
        state
            .drops
            .api_headers_too_large
            .fetch_add(1, Ordering::Relaxed);
        let r = error_resp(431, &e).with_header(header("Connection", "close"));
        let _ = req.respond(r);
        return;
    }
    let url = req.url().to_string();
    let path = url.split('?').next().unwrap_or("").to_string();
    let method = req.method().clone();
    let addr = req.remote_addr().map(|a| a.to_string()).unwrap_or_default();
    let parts: Vec<&str> = path.trim_matches('/').split('/').collect();
    // Access control first, before any body is read: a refused request changes nothing.
    let query = url.split_once('?').map(|(_, q)| q).unwrap_or("");
    let authz = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Authorization"))
        .map(|h| h.value.as_str().to_string());
    let m = method.as_str().to_string();
    let need = crate::auth::need_of(&m, &parts);
    let token = crate::auth::presented_token(authz.as_deref(), &m, query);
    if let Err(d) = state.cfg.tokens.authorize(need, token) {
        let c = if d.code == 401 {
            &state.drops.api_unauthorized
        } else {
            &state.drops.api_forbidden
        };
        c.fetch_add(1, Ordering::Relaxed);
        let mut r = error_resp(d.code, d.msg);
        if d.code == 401 {
            r = r.with_header(header("WWW-Authenticate", "Bearer realm=\"layercast\""));
        }
        let _ = req.respond(r);
        return;
    }
    if need == crate::auth::Need::Telemetry
        && !state.admit_telemetry(req.remote_addr().map(|a| a.ip()))
    {
        let _ = req.respond(error_resp(429, "rate limited (source address)"));
        return;
    }
    let resp: Resp = match (&method, parts.as_slice()) {
        (Method::Get, ["api", "sessions"]) => json_resp(200, &state.sessions_json()),
        (Method::Post, ["api", "sessions"]) => match read_body(&mut req) {
            Err(e) => bad(state, &e),
            Ok(b) => match serde_json::from_slice::<SessionConfig>(&b) {
                Err(e) => bad(state, &format!("session config: {e}")),
                Ok(c) => match state.create_session(&c, "body") {
                    Ok(s) => json_resp(201, &state.session_json(&s)),
                    Err(e @ Error::Duplicate(_)) => error_resp(409, &e.to_string()),
                    Err(e @ Error::Config { .. }) => bad(state, &e.to_string()),
                    Err(e) => error_resp(500, &e.to_string()),
                },
            },
        },
        (Method::Get, ["api", "sessions", id]) => match state.session(id) {
            Some(s) => json_resp(200, &state.session_json(&s)),
            None => error_resp(404, "no such session"),
        },
        (Method::Delete, ["api", "sessions", id]) => match state.stop_session(id) {
            Ok(()) => Response::from_data(Vec::new()).with_status_code(204),
            Err(e) => error_resp(404, &e.to_string()),
        },
        (Method::Get, ["api", "sessions", id, "sdp"]) => match state.session(id) {
            Some(s) => match state.sdp(&s) {
                Ok(sdp) => Response::from_data(sdp.into_bytes())
                    .with_header(header("Content-Type", "application/sdp")),
                Err(e) => error_resp(500, &e.to_string()),
            },
            None => error_resp(404, "no such session"),
        },
        (Method::Get, ["api", "sessions", id, "announcement"]) => match state.session(id) {
            Some(s) => {
                let info = lock(&s.info).clone();
                if url.contains("format=sam") {
                    match state.signed_sam(&info) {
                        Ok(b) => Response::from_data(b)
                            .with_header(header("Content-Type", "application/octet-stream")),
                        Err(e) => error_resp(500, &e.to_string()),
                    }
                } else {
                    json_resp(200, &serde_json::to_value(&info).unwrap_or_default())
                }
            }
            None => error_resp(404, "no such session"),
        },
        (Method::Post, ["api", "sessions", id, "keyframe"]) => match state.session(id) {
            Some(s) => {
                // `?spatial=N`: re-sync spatial layer N (1..=7) instead of a key picture.
                let spatial = query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("spatial="))
                    .map(|v| v.parse::<u8>().ok().filter(|n| (1..8).contains(n)));
                match (&s.queues, spatial) {
                    (None, _) => error_resp(404, "session has no video"),
                    (Some(_), Some(None)) => bad(state, "keyframe: spatial must be 1..=7"),
                    (Some(q), Some(Some(n))) => {
                        q.request_sync(n);
                        Response::from_data(Vec::new()).with_status_code(204)
                    }
                    (Some(q), None) => {
                        q.request_key();
                        Response::from_data(Vec::new()).with_status_code(204)
                    }
                }
            }
            None => error_resp(404, "no such session"),
        },
        (Method::Get, ["api", "sessions", id, "keys"]) => match state.session(id) {
            Some(s) => match state.keys_json(&s, query) {
                Some(Ok(k)) => json_resp(200, &k),
                Some(Err((400, e))) => bad(state, &e),
                Some(Err((code, e))) => error_resp(code, &e),
                None => error_resp(404, "session has no keys (not encrypted, no auth_reports)"),
            },
            None => error_resp(404, "no such session"),
        },
        (Method::Get, ["api", "viewers"]) => {
            let body = PooledBody {
                buf: state.viewers_json(),
                pos: 0,
                state: state.clone(),
            };
            let len = body.buf.len();
            let r = Response::new(
                StatusCode(200),
                vec![header("Content-Type", "application/json")],
                body,
                Some(len),
                None,
            );
            let _ = req.respond(r);
            return;
        }
        (Method::Post, ["api", "telemetry"]) => match read_body(&mut req) {
            Err(e) => {
                state
                    .drops
                    .telemetry_malformed
                    .fetch_add(1, Ordering::Relaxed);
                error_resp(400, &e)
            }
            Ok(b) => match serde_json::from_slice::<Telemetry>(&b) {
                Err(e) => {
                    state
                        .drops
                        .telemetry_malformed
                        .fetch_add(1, Ordering::Relaxed);
                    error_resp(400, &format!("telemetry: {e}"))
                }
                Ok(t) => match state.telemetry(t, addr) {
                    Ok(()) => Response::from_data(Vec::new()).with_status_code(204),
                    Err(Error::NoSuchSession(s)) => error_resp(404, &format!("no session {s:?}")),
                    Err(Error::BadRequest(m)) if m == "rate limited" => error_resp(429, &m),
                    Err(e) => error_resp(400, &e.to_string()),
                },
            },
        },
        (Method::Get, ["api", "live"]) => {
            websocket(req, state.clone(), stop.clone());
            return;
        }
        (Method::Get, ["metrics"]) => Response::from_data(state.metrics().into_bytes())
            .with_header(header("Content-Type", "text/plain; version=0.0.4")),
        (Method::Get, _) => static_file(state, &path),
        _ => error_resp(405, "method not allowed"),
    };
    let _ = req.respond(resp);
}

fn bad(state: &State, msg: &str) -> Resp {
    state.drops.api_bad_request.fetch_add(1, Ordering::Relaxed);
    error_resp(400, msg)
}

/// Serves the built dashboard. Paths with `..` are refused; unknown paths fall back to
/// `index.html` (single-page app routing).
fn static_file(state: &State, path: &str) -> Resp {
    if path.split('/').any(|c| c == "..") {
        return error_resp(400, "bad path");
    }
    let root = &state.cfg.dashboard_dir;
    let rel = path.trim_start_matches('/');
    let mut p = root.join(if rel.is_empty() { "index.html" } else { rel });
    if !p.is_file() {
        p = root.join("index.html");
    }
    match std::fs::read(&p) {
        Ok(b) => {
            let ct = match p.extension().and_then(|e| e.to_str()) {
                Some("html") => "text/html; charset=utf-8",
                Some("js") => "text/javascript",
                Some("css") => "text/css",
                Some("svg") => "image/svg+xml",
                Some("json") => "application/json",
                Some("png") => "image/png",
                _ => "application/octet-stream",
            };
            Response::from_data(b).with_header(header("Content-Type", ct))
        }
        Err(_) => error_resp(404, "dashboard not built (server/dashboard/dist missing)"),
    }
}

/// Upgrades to a WebSocket and pushes one snapshot a second until the peer goes away.
fn websocket(req: Request, state: Arc<State>, stop: Arc<AtomicBool>) {
    let key = req
        .headers()
        .iter()
        .find(|h| h.field.equiv("Sec-WebSocket-Key"))
        .map(|h| h.value.as_str().to_string());
    let Some(key) = key else {
        let _ = req.respond(error_resp(400, "expected a WebSocket upgrade"));
        return;
    };
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    let resp = Response::empty(StatusCode(101))
        .with_header(header("Upgrade", "websocket"))
        .with_header(header("Connection", "Upgrade"))
        .with_header(header("Sec-WebSocket-Accept", &accept));
    let stream = req.upgrade("websocket", resp);
    std::thread::spawn(move || {
        let mut ws = tungstenite::WebSocket::from_raw_socket(
            stream,
            tungstenite::protocol::Role::Server,
            None,
        );
        while !stop.load(Ordering::Relaxed) {
            // serde_json writes UTF-8 only, so the lossy branch never runs (no copy).
            let msg = String::from_utf8(state.snapshot_json())
                .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
            if ws.send(tungstenite::Message::text(msg)).is_err() {
                break;
            }
            for _ in 0..10 {
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = ws.close(None);
        let _ = ws.flush();
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_heads_are_bounded_in_fields_bytes_and_target() {
        let small = |n: usize| (0..n).map(|_| (8usize, 20usize));
        assert!(check_head(20, small(0)).is_ok());
        assert!(check_head(20, small(MAX_HEADERS)).is_ok());
        let e = check_head(20, small(MAX_HEADERS + 1)).unwrap_err();
        assert!(e.contains("header fields"), "{e}");
        // Few fields, but one huge value.
        assert!(check_head(20, [(4, MAX_HEADER_BYTES - 8)].into_iter()).is_ok());
        let e = check_head(20, [(4, MAX_HEADER_BYTES - 7)].into_iter()).unwrap_err();
        assert!(e.contains("bytes"), "{e}");
        // Within the count, over the bytes.
        assert!(check_head(20, (0..10).map(|_| (10usize, 2000usize))).is_err());
        assert!(check_head(MAX_URL, small(1)).is_ok());
        let e = check_head(MAX_URL + 1, small(1)).unwrap_err();
        assert!(e.contains("target"), "{e}");
    }
}
