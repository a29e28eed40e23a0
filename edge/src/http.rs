//! The edge's HTTP side (axum): WHEP, the watch page, viewer stats, `/metrics`.
//!
//! WHEP (draft-ietf-wish-whep, whose HTTP rules are RFC 9725's): `POST /whep/{session}` with an
//! `application/sdp` offer answers 201 with the SDP answer and `Location:
//! /whep/{session}/{resource}`; `DELETE` of that location ends the viewer (200); `PATCH` with
//! `application/trickle-ice-sdpfrag` answers 204 (the edge is ICE-lite: it learns a browser's
//! address from its connectivity checks, so trickled candidates need nothing). Refusals carry
//! their reason as text: 400 malformed offer, 415 wrong media type, 422 unsupported offer or a
//! session without video, 404 unknown session or resource, 503 + `Retry-After` when full,
//! 401/403 for tokens (`auth`).

use crate::auth::{self, Right};
use crate::cli::Config;
use crate::control::Control;
use crate::error::Error;
use crate::media::Media;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, RawQuery, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tower_http::cors::{Any, CorsLayer};

#[derive(Clone)]
pub struct App {
    pub conf: Arc<Config>,
    pub media: Media,
    pub control: Control,
}

struct Shared {
    app: App,
    registry: prometheus_client::registry::Registry,
}

type St = State<Arc<Shared>>;

/// Session ids: what the server accepts as ids (and nothing that could walk a path).
pub fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        && s != "."
        && s != ".."
}

fn text(status: StatusCode, msg: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        msg.into(),
    )
        .into_response()
}

fn refuse(r: auth::Refusal) -> Response {
    let mut resp = text(r.status(), "a valid bearer token is needed for this");
    if r == auth::Refusal::Unauthorized {
        resp.headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    resp
}

pub fn router(app: App) -> Router {
    let registry = crate::metrics::registry(
        app.media.snapshot.clone(),
        app.control.telemetry_outcomes(),
        &app.conf.name,
        app.conf.max_viewer_labels,
    );
    let shared = Arc::new(Shared { app, registry });
    // WHEP players on other origins: allow them, expose what they need.
    let cors = CorsLayer::new()
        .allow_origin(Any)
        .allow_methods([
            Method::POST,
            Method::DELETE,
            Method::PATCH,
            Method::GET,
            Method::OPTIONS,
        ])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::IF_MATCH,
        ])
        .expose_headers([header::LOCATION, header::ETAG, header::RETRY_AFTER])
        .max_age(Duration::from_secs(3600));
    Router::new()
        .route("/whep/{session}", post(whep_post))
        .route(
            "/whep/{session}/{resource}",
            axum::routing::delete(whep_delete).patch(whep_patch),
        )
        .route("/whep/{session}/{resource}/stats", get(viewer_stats))
        .route("/watch/{session}", get(watch_page))
        .route("/api/viewers", get(viewers))
        .route("/metrics", get(metrics))
        .route("/healthz", get(|| async { "ok" }))
        .layer(DefaultBodyLimit::max(edge::whep::MAX_OFFER_BYTES))
        .layer(cors)
        .layer(tower_http::timeout::TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(10),
        ))
        .with_state(shared)
}

async fn whep_post(
    State(s): St,
    Path(session): Path<String>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = auth::check(&s.app.conf.tokens, &headers, q.as_deref(), Right::View) {
        return refuse(r);
    }
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct
        .trim()
        .to_ascii_lowercase()
        .starts_with("application/sdp")
    {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "a WHEP offer is Content-Type: application/sdp",
        );
    }
    if !valid_id(&session) {
        return text(StatusCode::NOT_FOUND, format!("no session {session:?}"));
    }
    let Ok(offer) = String::from_utf8(body.to_vec()) else {
        return text(StatusCode::BAD_REQUEST, "malformed SDP offer: not UTF-8");
    };
    // Refuse a full edge before touching the server or the session.
    let snap = s.app.media.snapshot();
    if snap.viewers.len() >= s.app.conf.max_peers {
        return full(snap.viewers.len(), s.app.conf.max_peers);
    }
    if let Err(e) = s.app.control.ensure_session(&session).await {
        return match e {
            Error::NoSession(_) => text(StatusCode::NOT_FOUND, e.to_string()),
            Error::Edge(edge::Error::NoVideo(_)) => {
                text(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
            }
            other => text(StatusCode::BAD_GATEWAY, other.to_string()),
        };
    }
    match s.app.media.add_viewer(&session, offer).await {
        Err(e) => text(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
        Ok(Err(e)) => edge_error(e),
        Ok(Ok((id, answer))) => {
            let res = s.app.control.register(id, &session);
            let loc = format!("/whep/{session}/{res}");
            tracing::info!("viewer {id:x} of {session}: {loc}");
            let mut r = (StatusCode::CREATED, answer).into_response();
            let h = r.headers_mut();
            h.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/sdp"),
            );
            if let Ok(v) = HeaderValue::from_str(&loc) {
                h.insert(header::LOCATION, v);
            }
            if let Ok(v) = HeaderValue::from_str(&format!("\"{res}\"")) {
                h.insert(header::ETAG, v);
            }
            r
        }
    }
}

fn full(current: usize, max: usize) -> Response {
    let mut r = text(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("edge full: {current} of {max} viewers; try again later or another edge"),
    );
    r.headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    r
}

fn edge_error(e: edge::Error) -> Response {
    match e {
        edge::Error::Full { current, max } => full(current, max),
        edge::Error::MalformedOffer(_) => text(StatusCode::BAD_REQUEST, e.to_string()),
        edge::Error::UnsupportedOffer(_) | edge::Error::NoVideo(_) => {
            text(StatusCode::UNPROCESSABLE_ENTITY, e.to_string())
        }
        edge::Error::UnknownSession(_) | edge::Error::UnknownViewer(_) => {
            text(StatusCode::NOT_FOUND, e.to_string())
        }
        other => text(StatusCode::INTERNAL_SERVER_ERROR, other.to_string()),
    }
}

/// The viewer a WHEP resource of `session` names, for a caller with the view right: the
/// refusal, or 404 for a resource that is not (or no longer) this session's. (Once per request,
/// so the large `Response` in the error costs nothing worth boxing.)
#[allow(clippy::result_large_err)]
fn viewer_of(
    s: &Shared,
    headers: &HeaderMap,
    q: Option<&str>,
    session: &str,
    res: &str,
) -> Result<u64, Response> {
    auth::check(&s.app.conf.tokens, headers, q, Right::View).map_err(refuse)?;
    s.app
        .control
        .lookup(res)
        .filter(|(_, sess)| sess == session)
        .map(|(id, _)| id)
        .ok_or_else(|| text(StatusCode::NOT_FOUND, "no such WHEP session"))
}

async fn whep_delete(
    State(s): St,
    Path((session, res)): Path<(String, String)>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let id = match viewer_of(&s, &headers, q.as_deref(), &session, &res) {
        Ok(id) => id,
        Err(r) => return r,
    };
    match s.app.media.remove_viewer(id).await {
        Ok(Ok(())) => text(StatusCode::OK, "ended"),
        Ok(Err(e)) => edge_error(e),
        Err(e) => text(StatusCode::SERVICE_UNAVAILABLE, e.to_string()),
    }
}

async fn whep_patch(
    State(s): St,
    Path((session, res)): Path<(String, String)>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    if let Err(r) = viewer_of(&s, &headers, q.as_deref(), &session, &res) {
        return r;
    }
    let ct = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if !ct.starts_with("application/trickle-ice-sdpfrag") {
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "PATCH takes application/trickle-ice-sdpfrag",
        );
    }
    StatusCode::NO_CONTENT.into_response()
}

async fn viewer_stats(
    State(s): St,
    Path((session, res)): Path<(String, String)>,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Response {
    let id = match viewer_of(&s, &headers, q.as_deref(), &session, &res) {
        Ok(id) => id,
        Err(r) => return r,
    };
    let snap = s.app.media.snapshot();
    match snap.viewers.iter().find(|v| v.id == id) {
        Some(v) => axum::Json(viewer_json(&s.app.conf.name, v)).into_response(),
        None => text(StatusCode::NOT_FOUND, "no such viewer"),
    }
}

/// One viewer as the stats endpoint and the viewer list show it.
pub fn viewer_json(edge: &str, v: &edge::ViewerReport) -> serde_json::Value {
    let st = &v.stats;
    json!({
        "id": format!("{edge}-{:x}", v.id),
        "session": v.session,
        "connected": v.connected,
        "remote": v.remote.map(|a| a.to_string()),
        "spatial": v.current.spatial, "temporal": v.current.temporal,
        "target_spatial": v.target.spatial, "target_temporal": v.target.temporal,
        "width": v.width, "height": v.height, "fps": v.fps,
        "layers": v.layers, "max_layers": v.max_layers,
        "pictures": v.pictures,
        "estimate_bps": st.estimate_bps, "rate_bps": st.rate_bps,
        "loss_ratio": st.loss, "rtt_s": st.rtt.map(|r| r.as_secs_f64()),
        "packets_sent": st.media_packets, "nacks": st.nacks, "rtx_packets": st.rtx_packets,
        "repair_copies": st.repair_copies,
        "repair_copies_refused": st.repair_copies_refused,
        "repair_copies_skipped_loss": st.repair_copies_skipped_loss,
        "repair_copies_skipped_backlog": st.repair_copies_skipped_backlog,
        "plis": st.plis, "firs": st.firs, "lost_reported": st.remote_lost,
        "audio_packets": st.audio_packets,
        "latency_p50_ms": st.frame_latency_p50_us.map(|u| u as f64 / 1000.0),
        "spatial_up": v.forward.spatial_up, "spatial_down": v.forward.spatial_down,
        "cache_start": v.forward.cache_starts > 0,
        "fillers_left_out": v.forward.fillers_left_out,
        "age_s": v.age.as_secs_f64(),
    })
}

async fn viewers(State(s): St, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    if let Err(r) = auth::check(&s.app.conf.tokens, &headers, q.as_deref(), Right::Read) {
        return refuse(r);
    }
    let snap = s.app.media.snapshot();
    let v: Vec<_> = snap
        .viewers
        .iter()
        .map(|v| viewer_json(&s.app.conf.name, v))
        .collect();
    axum::Json(v).into_response()
}

async fn metrics(State(s): St, RawQuery(q): RawQuery, headers: HeaderMap) -> Response {
    if let Err(r) = auth::check(&s.app.conf.tokens, &headers, q.as_deref(), Right::Read) {
        return refuse(r);
    }
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        crate::metrics::render(&s.registry),
    )
        .into_response()
}

/// The watch page (static: the session and the token come from its own URL).
async fn watch_page(Path(session): Path<String>) -> Response {
    if !valid_id(&session) {
        return text(StatusCode::NOT_FOUND, "no such session");
    }
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        include_str!("../watch/index.html"),
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids() {
        assert!(valid_id("live") && valid_id("s-1_x.2"));
        for bad in ["", "..", ".", "a/b", "a b", &"x".repeat(65)] {
            assert!(!valid_id(bad), "{bad:?}");
        }
    }
}
