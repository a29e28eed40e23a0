//! Per-browser telemetry to the server, the report the native player posts (docs/api.md
//! `POST /api/telemetry`), from the edge's view: the layers sent, the rate sent, str0m's
//! bandwidth estimate, loss and RTT from the browser's RTCP receiver reports. Browser viewers
//! then appear on the dashboard and in the server's `/metrics` like native ones (protocol
//! `webrtc`). Reports are spread so the edge stays under the server's per-address limit; the
//! control plane's UDP report path will replace the HTTP post here, in this module only.

use crate::media::{MediaEvent, Snapshot};
use crate::server::Server;
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What is kept per viewer between reports.
#[derive(Default)]
struct Pending {
    decisions: Vec<serde_json::Value>,
    last_sent: Option<Instant>,
}

pub struct Telemetry {
    edge: String,
    rate: f64,
    pending: HashMap<u64, Pending>,
    pub posted: u64,
    pub refused: u64,
}

impl Telemetry {
    pub fn new(edge: &str, rate: f64) -> Self {
        Telemetry {
            edge: edge.to_string(),
            rate,
            pending: HashMap::new(),
            posted: 0,
            refused: 0,
        }
    }

    /// The viewer id the server sees.
    pub fn viewer_id(&self, id: u64) -> String {
        format!("{}-{id:x}", self.edge)
    }

    pub fn on_event(&mut self, e: &MediaEvent) {
        match e {
            MediaEvent::Decision {
                viewer,
                at_s,
                from,
                to,
                reason,
                estimate_bps,
                loss,
            } => {
                let p = self.pending.entry(*viewer).or_default();
                if p.decisions.len() < 100 {
                    p.decisions.push(json!({
                        "at_s": at_s, "from": from, "to": to, "reason": reason,
                        "inputs": {"estimate_bps": estimate_bps, "loss": loss},
                    }));
                }
            }
            MediaEvent::Gone { viewer } => {
                self.pending.remove(viewer);
            }
            MediaEvent::KeyRequest { .. } => {}
        }
    }

    /// The reports due now (each viewer at most once per max(1 s, viewers / rate)).
    pub fn due(&mut self, snap: &Snapshot, now: Instant) -> Vec<Vec<u8>> {
        let n = snap.viewers.len().max(1) as f64;
        let every = Duration::from_secs_f64((n / self.rate).max(1.0));
        let mut out = Vec::new();
        for v in snap.viewers.iter().filter(|v| v.connected) {
            let viewer_id = self.viewer_id(v.id);
            let p = self.pending.entry(v.id).or_default();
            if p.last_sent.is_some_and(|t| now < t + every) {
                continue;
            }
            p.last_sent = Some(now);
            let s = &v.stats;
            let decisions = std::mem::take(&mut p.decisions);
            let body = json!({
                "viewer_id": viewer_id,
                "session_id": v.session,
                "protocol": "webrtc",
                "layers": v.layers,
                "max_layers": v.max_layers,
                "rate_bps": s.rate_bps.max(0.0),
                "estimate_bps": s.estimate_bps,
                "loss_ratio": f64::from(s.loss).clamp(0.0, 1.0),
                "packets_received": s.media_packets.saturating_sub(s.remote_lost),
                "packets_lost": s.remote_lost,
                "width": v.width, "height": v.height, "fps": v.fps,
                "frames": v.pictures, "freezes": 0,
                "rtt_s": s.rtt.map(|r| r.as_secs_f64()),
                "decisions": decisions,
            });
            out.push(body.to_string().into_bytes());
        }
        out
    }
}

/// Posts the due reports once a second until the process ends.
pub async fn run(
    mut t: Telemetry,
    server: Arc<Server>,
    snapshot: tokio::sync::watch::Receiver<Arc<Snapshot>>,
    mut events: tokio::sync::broadcast::Receiver<MediaEvent>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let snap = snapshot.borrow().clone();
                for body in t.due(&snap, Instant::now()) {
                    match server.telemetry(body).await {
                        Ok(204) => t.posted += 1,
                        Ok(s) => {
                            t.refused += 1;
                            tracing::debug!("telemetry refused: HTTP {s}");
                        }
                        Err(e) => {
                            t.refused += 1;
                            tracing::debug!("telemetry: {e}");
                        }
                    }
                }
            }
            e = events.recv() => match e {
                Ok(e) => t.on_event(&e),
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(_) => return,
            },
        }
    }
}
