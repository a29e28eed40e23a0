//! The JSON contract (`docs/api.md`): sessions, viewers, the live snapshot. Every function that
//! needs the viewer table runs on the viewer actor (`crate::viewers::Viewers::query`).

use crate::state::{lock, unix_now, Session, State};
use crate::viewers::{viewer_view, Publisher, Table, ViewerView};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// The contract's `Session` object.
pub fn session(state: &State, s: &Session, table: &Table) -> Value {
    let info = lock(&s.info).clone();
    let by_layer = table.by_layer(&s.cfg.id, info.layers.len());
    let labels = s.cfg.video.as_ref().map(crate::video::labels);
    let mut cum = 0u64;
    let layers: Vec<Value> = info
        .layers
        .iter()
        .enumerate()
        .map(|(k, l)| {
            cum += l.rate_bps;
            json!({"index": k, "rate_bps": l.rate_bps, "cumulative_bps": cum,
                   "group": l.group.to_string(), "port": l.port,
                   "label": labels.as_ref().and_then(|v| v.get(k).cloned())
                       .unwrap_or_else(|| format!("L{k} {} kbit/s", l.rate_bps / 1000))})
        })
        .collect();
    let clr_viewer = |t: &crate::tfmcc::TfmccState| {
        let rid = lock(&t.snap).clr?;
        table.viewer_of_rid(&s.cfg.id, rid).map(str::to_string)
    };
    let q = s.queues.as_ref();
    json!({
        "id": s.cfg.id, "name": s.cfg.name, "protocol": s.cfg.protocol,
        "source": s.cfg.source, "codec": info.describe(), "layers": layers,
        // The audio track rides in layer 0: its share of layer 0's announced rate.
        "audio_rate_bps": info.tracks.iter()
            .filter(|t| t.kind == proto::TrackKind::Audio)
            .flat_map(|t| t.streams.iter().map(|st| st.rate_bps))
            .reduce(|a, b| a + b),
        "video_pictures": q.map(|q| q.pictures.load(Ordering::Relaxed)),
        "video_dropped": q.map(|q| q.dropped.load(Ordering::Relaxed)),
        "video_layer_frames_dropped": q.map(|q| q.layer_frames_dropped.load(Ordering::Relaxed)),
        "video_discarded_frames": q.map(|_| lock(&s.stats.per_layer_discarded).clone()),
        "video_key_requests": q.map(|q| q.key_requests.load(Ordering::Relaxed)),
        "video_keys_forced": q.map(|q| q.keys_forced.load(Ordering::Relaxed)),
        "video_syncs_forced": q.map(|q| q.syncs_forced.load(Ordering::Relaxed)),
        // The source pipeline's and the audio track's counters (issue 21).
        "media": crate::media::session_json(lock(&s.source).as_deref(), s.audio.as_deref()),
        "viewers_by_layer": by_layer,
        "tfmcc": s.tfmcc.as_ref().map_or(Value::Null, |t| t.json(clr_viewer(t))),
        "started_at": s.started_at,
        "packets_sent": s.stats.packets.load(Ordering::Relaxed),
        "bytes_sent": s.stats.bytes.load(Ordering::Relaxed),
        "sam_key": state.sam_key,
        "encrypted": s.cfg.encrypt,
        "auth_reports": s.cfg.auth_reports,
        "report_keys_bound": s.report_keys_bound(),
        "ssm_source": state.cfg.ssm_source.map(|a| a.to_string()),
        "seal_errors": s.stats.seal_errors.load(Ordering::Relaxed),
    })
}

/// The contract's `[Session]`.
pub fn sessions(state: &State, table: &Table) -> Value {
    Value::Array(
        state
            .all_sessions()
            .iter()
            .map(|s| session(state, s, table))
            .collect(),
    )
}

/// Plain structs with string keys and numbers cannot fail to serialise; if one ever did, the
/// answer is `null` rather than a panic.
fn to_bytes(x: &impl Serialize, hint: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(hint);
    if serde_json::to_writer(&mut out, x).is_err() {
        out.clear();
        out.extend_from_slice(b"null");
    }
    out
}

/// The contract's `[Viewer]` (`GET /api/viewers`), every viewer with its kept decisions.
pub fn viewers(table: &Table) -> Vec<u8> {
    let views: Vec<ViewerView<'_>> = table
        .sorted()
        .into_iter()
        .map(|(id, v)| viewer_view(id, v, usize::MAX))
        .collect();
    to_bytes(&views, 512 * views.len() + 2)
}

/// One viewer with its kept decisions (`GET /api/viewers/{id}`).
pub fn viewer(table: &Table, id: &str) -> Option<Vec<u8>> {
    let (k, v) = table.entry(id)?;
    Some(to_bytes(&viewer_view(k, v, usize::MAX), 4096))
}

/// Counts over the whole table, in every live message.
#[derive(Serialize)]
struct Aggregates {
    viewers: usize,
    active: u64,
}

/// The live message (`/api/live`): `full` carries every viewer, a delta only the viewers that
/// reported since the previous tick (with the decisions they reported since) and the ids
/// removed since.
#[derive(Serialize)]
struct Snapshot<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    full: bool,
    t: f64,
    sessions: Value,
    aggregates: Aggregates,
    viewers: Vec<ViewerView<'a>>,
    removed: Vec<String>,
}

fn aggregates(table: &Table) -> Aggregates {
    Aggregates {
        viewers: table.len(),
        active: table.live_counts().values().sum(),
    }
}

/// A full live message: what a dashboard client gets first.
pub fn full_snapshot(state: &State, table: &Table) -> Vec<u8> {
    let snap = Snapshot {
        kind: "snapshot",
        full: true,
        t: unix_now(),
        sessions: sessions(state, table),
        aggregates: aggregates(table),
        viewers: table
            .sorted()
            .into_iter()
            .map(|(id, v)| viewer_view(id, v, usize::MAX))
            .collect(),
        removed: Vec::new(),
    };
    let hint = if table.is_empty() {
        4096
    } else {
        512 * table.len()
    };
    to_bytes(&snap, hint)
}

/// The actor's per-tick publisher: one delta message, serialised once, for every client.
pub struct LivePublisher {
    pub state: Arc<State>,
    /// Size of the last message: the next one's buffer size.
    len_hint: usize,
}

impl LivePublisher {
    pub fn new(state: Arc<State>) -> LivePublisher {
        LivePublisher { state, len_hint: 0 }
    }
}

impl Publisher for LivePublisher {
    fn tick(&mut self, table: &mut Table) -> Option<bytes::Bytes> {
        let sessions = sessions(&self.state, table);
        let aggregates = aggregates(table);
        self.state
            .reports
            .audience
            .store(aggregates.active, Ordering::Relaxed);
        let (viewers, removed) = table.take_delta();
        let snap = Snapshot {
            kind: "snapshot",
            full: false,
            t: unix_now(),
            sessions,
            aggregates,
            viewers,
            removed,
        };
        let out = to_bytes(&snap, self.len_hint + self.len_hint / 8 + 256);
        self.len_hint = out.len();
        Some(out.into())
    }
}
