//! Per-browser telemetry to the server, the report the native player posts (docs/api.md
//! `POST /api/telemetry`), from the edge's view: the layers sent, the rate sent, str0m's
//! bandwidth estimate, loss and RTT from the browser's RTCP receiver reports. Browser viewers
//! then appear on the dashboard and in the server's `/metrics` like native ones (protocol
//! `webrtc`). Reports are spread so the edge stays under the server's per-address limit; the
//! control plane's UDP report path will replace the HTTP post here, in this module only.
//!
//! A refused report is never silent: the first refusal of each kind (HTTP status, or no
//! answer) is a warning with the server's reason, and every report is counted by outcome in
//! the edge's `/metrics` (`layercast_edge_telemetry_reports_total{result}`).

use crate::media::{MediaEvent, Snapshot};
use crate::server::Server;
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
}

/// What became of the reports (shared with `/metrics`).
#[derive(Debug, Default)]
pub struct Outcomes {
    /// The server answered 2xx.
    pub accepted: AtomicU64,
    /// The server answered with another status.
    pub refused: AtomicU64,
    /// No answer (connection refused, timeout, TLS).
    pub failed: AtomicU64,
    /// Kinds already warned about: HTTP statuses, 0 for no answer.
    warned: Mutex<HashSet<u16>>,
}

impl Outcomes {
    /// Counts one post's outcome; the warning to log when it is the first of its kind.
    pub fn note(&self, r: &crate::error::Result<(u16, String)>) -> Option<String> {
        let (kind, msg) = match r {
            Ok((s, _)) if (200..300).contains(s) => {
                self.accepted.fetch_add(1, Ordering::Relaxed);
                return None;
            }
            Ok((s, reason)) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                (*s, format!("HTTP {s}: {reason}"))
            }
            Err(e) => {
                self.failed.fetch_add(1, Ordering::Relaxed);
                (0, e.to_string())
            }
        };
        let first = self
            .warned
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(kind);
        first.then(|| {
            format!("telemetry to the server refused ({msg}); further ones of this kind are only counted")
        })
    }
}

impl Telemetry {
    pub fn new(edge: &str, rate: f64) -> Self {
        Telemetry {
            edge: edge.to_string(),
            rate,
            pending: HashMap::new(),
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
    outcomes: Arc<Outcomes>,
    snapshot: tokio::sync::watch::Receiver<Arc<Snapshot>>,
    mut events: tokio::sync::broadcast::Receiver<MediaEvent>,
) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = tick.tick() => {
                let snap = snapshot.borrow().clone();
                for body in t.due(&snap, Instant::now()) {
                    let r = server.telemetry(body).await;
                    if matches!(r, Ok((200..=299, _))) && outcomes.accepted.load(Ordering::Relaxed) == 0 {
                        tracing::info!("telemetry: the server accepted the first viewer report");
                    }
                    match outcomes.note(&r) {
                        Some(w) => tracing::warn!("{w}"),
                        None if !matches!(r, Ok((200..=299, _))) => {
                            tracing::debug!("telemetry refused: {r:?}")
                        }
                        None => {}
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn viewer(id: u64) -> edge::edge::ViewerReport {
        edge::edge::ViewerReport {
            id,
            session: "main".into(),
            connected: true,
            remote: None,
            current: Default::default(),
            target: Default::default(),
            width: 640,
            height: 360,
            fps: 30.0,
            layers: 9,
            max_layers: 9,
            pictures: 300,
            stats: Default::default(),
            forward: Default::default(),
            age: Duration::from_secs(3),
        }
    }

    fn snapshot(viewers: Vec<edge::edge::ViewerReport>) -> Snapshot {
        Snapshot {
            viewers,
            counters: Default::default(),
            totals: Default::default(),
            sessions: Vec::new(),
            upstream_unknown: 0,
            upstream_queue_full: 0,
            send_errors: 0,
        }
    }

    #[test]
    fn a_connected_viewer_is_reported_once_a_second_in_the_servers_schema() {
        let mut t = Telemetry::new("edge1", 15.0);
        let snap = snapshot(vec![viewer(0xab)]);
        let t0 = Instant::now();
        let first = t.due(&snap, t0);
        assert_eq!(first.len(), 1);
        let v: serde_json::Value = serde_json::from_slice(&first[0]).unwrap();
        assert_eq!(v["viewer_id"], "edge1-ab");
        assert_eq!(v["session_id"], "main");
        assert_eq!(v["protocol"], "webrtc");
        assert_eq!(
            (v["layers"].as_u64(), v["max_layers"].as_u64()),
            (Some(9), Some(9))
        );
        assert!(t.due(&snap, t0 + Duration::from_millis(500)).is_empty());
        assert_eq!(t.due(&snap, t0 + Duration::from_secs(1)).len(), 1);
    }

    #[test]
    fn every_post_is_counted_and_each_kind_of_refusal_warned_once() {
        let o = Outcomes::default();
        assert_eq!(o.note(&Ok((204, String::new()))), None);
        let w = o.note(&Ok((400, "telemetry: missing field `x`".into())));
        assert!(w.is_some_and(|w| w.contains("HTTP 400: telemetry: missing field `x`")));
        assert_eq!(o.note(&Ok((400, "again".into()))), None);
        assert!(o.note(&Ok((429, "rate limited".into()))).is_some());
        assert!(o
            .note(&Err(Error::Server("connection refused".into())))
            .is_some());
        assert_eq!(o.note(&Err(Error::Server("again".into()))), None);
        let n = |c: &AtomicU64| c.load(Ordering::Relaxed);
        assert_eq!((n(&o.accepted), n(&o.refused), n(&o.failed)), (1, 3, 2));
    }
}
