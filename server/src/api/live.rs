//! `/api/live`: the dashboard's WebSocket. A client gets one full snapshot first, then the
//! viewer actor's per-tick message, the same bytes for every client (a tokio broadcast). A
//! client that falls behind the broadcast is dropped (it reconnects and starts from a full
//! snapshot again), and the number of clients is capped.

use super::error::ApiError;
use super::App;
use crate::error::Error;
use crate::render;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::State as Ax;
use axum::response::{IntoResponse, Response};
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::broadcast::error::RecvError;

/// How often the server pings an idle client (browsers answer on their own); a client that
/// sends nothing, not even a pong, for the connection's read timeout is closed by `serve`.
const PING_EVERY: Duration = Duration::from_secs(15);

pub async fn upgrade(
    Ax(app): Ax<App>,
    ws: Result<WebSocketUpgrade, axum::extract::ws::rejection::WebSocketUpgradeRejection>,
) -> Response {
    let Ok(ws) = ws else {
        return ApiError::from(Error::BadRequest("expected a WebSocket upgrade".into()))
            .into_response();
    };
    let Ok(slot) = app.ws_slots.clone().try_acquire_owned() else {
        app.state
            .drops
            .api_websockets_over_cap
            .fetch_add(1, Ordering::Relaxed);
        return ApiError::from(Error::Unavailable("too many live clients".into())).into_response();
    };
    ws.max_message_size(64 * 1024)
        .on_upgrade(move |sock| async move {
            let _slot = slot;
            client(app, sock).await;
        })
}

async fn client(app: App, mut sock: WebSocket) {
    // Subscribe before the full snapshot: a tick between the two is then applied after the
    // snapshot (and ignored by the dashboard if older), never lost.
    let mut rx = app.viewers.live.subscribe();
    let st = app.state.clone();
    let Ok(full) = app
        .viewers
        .query(move |t| render::json::full_snapshot(&st, t))
        .await
    else {
        return;
    };
    let Ok(text) = String::from_utf8(full) else {
        return;
    };
    if sock.send(Message::Text(text.into())).await.is_err() {
        return;
    }
    let mut ping = tokio::time::interval(PING_EVERY);
    ping.tick().await;
    loop {
        tokio::select! {
            m = rx.recv() => match m {
                Ok(b) => {
                    // serde_json writes UTF-8 only.
                    let Ok(t) = axum::extract::ws::Utf8Bytes::try_from(b) else { continue };
                    if sock.send(Message::Text(t)).await.is_err() {
                        return;
                    }
                }
                Err(RecvError::Lagged(_)) => {
                    app.state.drops.api_websocket_lagged.fetch_add(1, Ordering::Relaxed);
                    let _ = sock.send(Message::Close(None)).await;
                    return;
                }
                Err(RecvError::Closed) => return,
            },
            m = sock.recv() => match m {
                // Pings are answered by the library; the client has nothing else to say.
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => return,
                Some(Ok(_)) => {}
            },
            _ = ping.tick() => {
                if sock.send(Message::Ping(Default::default())).await.is_err() {
                    return;
                }
            }
        }
    }
}
