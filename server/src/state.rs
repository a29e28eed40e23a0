//! Shared server state: running sessions, the viewers that report telemetry, and the JSON
//! views of both that the HTTP API, the WebSocket and `/metrics` publish.

use crate::config::{ResolvedSession, ServerConfig, SessionConfig};
use crate::error::{Error, Result};
use crate::pacer::{self, PacerConfig, PacerStats};
use crate::sock;
use congestion::{LayerInfo, SessionInfo, Time};
use security::auth::{
    GroupKey, InfluenceConfig, InfluenceLimiter, MediaSealer, ReportMac, SamSigner,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Locks a mutex, recovering from poisoning (a panicked thread must not take the API down).
pub fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or(0.0)
}

/// A random 32-bit value (session ids, SSRCs): std's randomly keyed hasher over the time.
pub fn random_u32() -> u32 {
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0),
    );
    h.finish() as u32
}

/// One running session.
pub struct Session {
    pub cfg: ResolvedSession,
    pub info: Mutex<SessionInfo>,
    pub started_at: u64,
    pub stats: Arc<PacerStats>,
    stop: Arc<AtomicBool>,
    thread: Mutex<Option<JoinHandle<()>>>,
    encoder: Mutex<Option<JoinHandle<()>>>,
    /// The source pipeline's counters of a GStreamer-sourced session (set by the encoder
    /// thread when it builds the source).
    pub source: Arc<Mutex<Option<Arc<crate::media::source::SourceStats>>>>,
    /// The audio track's queue and counters (issue 21).
    pub audio: Option<Arc<crate::media::audio::AudioQueue>>,
    /// Media queues of a video session.
    pub queues: Option<Arc<crate::video::LayerQueues>>,
    /// The TFMCC sender's state of a `protocol: tfmcc` session (`crate::tfmcc`).
    pub tfmcc: Option<Arc<crate::tfmcc::TfmccState>>,
    /// The media group key of an encrypted session (handed out by the key API only).
    pub media_key: Option<GroupKey>,
    /// The report-MAC session secret of a TFMCC session with `auth_reports` (the key API
    /// hands out per-receiver keys derived from it, never the secret itself).
    pub report_mac: Option<ReportMac>,
    /// Receiver id -> SHA-256 of the binding secret of the client its report key was first
    /// issued to (`keys_json`): the key of an id goes to that client only.
    report_bindings: Mutex<std::collections::HashMap<u32, [u8; 32]>>,
}

/// Most receiver ids whose report key one session hands out (bindings are kept for the
/// session's life: 4096 × ~40 bytes). Players pick a new id per run, so a session with more
/// player starts than this refuses further keys (503, counted) until it is restarted.
pub const MAX_REPORT_BINDINGS: usize = 4096;

/// The `binding=` parameter of a key request: 32-128 hex digits (a client's own secret).
fn binding_of(query: &str) -> Option<std::result::Result<[u8; 32], ()>> {
    let b = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("binding="))?;
    if !(32..=128).contains(&b.len()) || !b.bytes().all(|c| c.is_ascii_hexdigit()) {
        return Some(Err(()));
    }
    Some(Ok(openssl::sha::sha256(b.to_ascii_lowercase().as_bytes())))
}

impl Session {
    /// Stops the pacer and waits for it.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = lock(&self.thread).take() {
            let _ = h.join();
        }
        // The encoder thread waits for pictures at most 100 ms at a time, then sees `stop`
        // and drops the source pipeline.
        if let Some(h) = lock(&self.encoder).take() {
            let _ = h.join();
        }
    }
}

/// One decision entry as the API shows it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct DecisionJson {
    pub at_s: f64,
    pub from: u32,
    pub to: u32,
    pub reason: String,
    #[serde(default)]
    pub inputs: BTreeMap<String, f64>,
}

/// A telemetry report as players post it (`POST /api/telemetry`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Telemetry {
    pub viewer_id: String,
    pub session_id: String,
    pub protocol: String,
    pub layers: u32,
    pub max_layers: u32,
    pub rate_bps: f64,
    pub estimate_bps: Option<f64>,
    pub loss_ratio: f64,
    #[serde(default)]
    pub packets_received: u64,
    #[serde(default)]
    pub packets_lost: u64,
    #[serde(default)]
    pub width: u32,
    #[serde(default)]
    pub height: u32,
    #[serde(default)]
    pub fps: f64,
    #[serde(default)]
    pub frames: u64,
    #[serde(default)]
    pub freezes: u64,
    #[serde(default)]
    pub rtt_s: Option<f64>,
    #[serde(default)]
    pub decisions: Vec<DecisionJson>,
    /// TFMCC receivers only: their receiver id, calculated rate, RTT, loss event rate, CLR.
    #[serde(default)]
    pub tfmcc: Option<crate::tfmcc::ViewerTfmcc>,
    /// Issue 21: audio packets received, lost and 20-ms frames concealed (totals).
    #[serde(default)]
    pub audio_packets: u64,
    #[serde(default)]
    pub audio_lost: u64,
    #[serde(default)]
    pub audio_concealed: u64,
}

impl Telemetry {
    /// Range checks beyond what the types enforce.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(Error::BadRequest(m));
        if self.viewer_id.is_empty() || self.viewer_id.len() > 64 {
            return bad("viewer_id must be 1..=64 bytes".into());
        }
        if self.session_id.is_empty() || self.session_id.len() > 64 {
            return bad("session_id must be 1..=64 bytes".into());
        }
        if self.protocol.len() > 32 {
            return bad("protocol longer than 32 bytes".into());
        }
        if self.layers > 256
            || self.max_layers > 256
            || (self.max_layers != 0 && self.layers > self.max_layers)
        {
            return bad(format!(
                "layers {} / max_layers {} out of range",
                self.layers, self.max_layers
            ));
        }
        let nums = [
            ("rate_bps", Some(self.rate_bps)),
            ("estimate_bps", self.estimate_bps),
            ("fps", Some(self.fps)),
            ("rtt_s", self.rtt_s),
        ];
        for (k, v) in nums {
            if let Some(v) = v {
                if !v.is_finite() || v < 0.0 {
                    return bad(format!("{k} must be a finite non-negative number"));
                }
            }
        }
        if !(0.0..=1.0).contains(&self.loss_ratio) {
            return bad("loss_ratio must be within 0..=1".into());
        }
        if let Some(t) = &self.tfmcc {
            t.validate()?;
        }
        if self.decisions.len() > 100 {
            return bad("more than 100 decisions in one report".into());
        }
        for d in &self.decisions {
            if !d.at_s.is_finite() || d.reason.len() > 64 || d.inputs.len() > 32 {
                return bad("malformed decision entry".into());
            }
        }
        Ok(())
    }
}

/// What the server keeps per viewer.
#[derive(Clone, Debug)]
pub struct Viewer {
    pub last: Telemetry,
    pub addr: String,
    pub decisions: VecDeque<DecisionJson>,
    pub last_seen: f64,
    pub last_post: Instant,
}

/// Counters of dropped input, by reason (exported as `layercast_dropped_total{what,reason}`).
#[derive(Debug, Default)]
pub struct Drops {
    pub telemetry_malformed: AtomicU64,
    pub telemetry_rate_limited: AtomicU64,
    pub telemetry_unknown_session: AtomicU64,
    pub api_bad_request: AtomicU64,
    /// Telemetry refused by the per-source-address token bucket.
    pub telemetry_addr_rate_limited: AtomicU64,
    /// Requests without a valid token (401) and with a token lacking the right (403).
    pub api_unauthorized: AtomicU64,
    pub api_forbidden: AtomicU64,
    /// Requests refused with 431: too many header fields, too many header bytes or too long
    /// a request target (`http::check_head`).
    pub api_headers_too_large: AtomicU64,
    /// Report-key requests for a receiver id already issued to another client (403), and
    /// refused because the session's binding table is full (503).
    pub api_rid_taken: AtomicU64,
    pub api_rid_table_full: AtomicU64,
}

/// Everything the HTTP side and the background threads share.
pub struct State {
    pub cfg: ServerConfig,
    pub sessions: Mutex<BTreeMap<String, Arc<Session>>>,
    pub viewers: Mutex<BTreeMap<String, Viewer>>,
    pub drops: Drops,
    next_group: Mutex<u32>,
    counter: AtomicU64,
    /// Size of the last WebSocket snapshot, bytes: the next one's buffer size.
    json_len_hint: AtomicUsize,
    /// Buffers of sent `/api/viewers` answers, for the next ones ([`State::give_json_buf`]).
    json_bufs: Mutex<Vec<Vec<u8>>>,
    /// Signs every SAM (multicast and `?format=sam`).
    pub signer: SamSigner,
    /// `ed25519:<hex>`, published in every session description.
    pub sam_key: String,
    /// Per-source-address token bucket on telemetry posts (before the body is read).
    pub telemetry_limiter: Mutex<InfluenceLimiter>,
    /// Time base of the limiter.
    epoch: Instant,
}

/// One viewer as the API publishes it (the contract's `Viewer`), borrowed from [`Viewer`].
/// The same members and values as the `json!` object it replaces (a unit test compares them);
/// the key order inside nested objects may differ, which JSON leaves open.
#[derive(Serialize)]
struct ViewerView<'a> {
    addr: &'a str,
    decisions: &'a VecDeque<DecisionJson>,
    estimate_bps: Option<f64>,
    fps: f64,
    frames: u64,
    freezes: u64,
    gone: bool,
    height: u32,
    id: &'a str,
    last_seen_s: f64,
    layers: u32,
    loss_ratio: f64,
    max_layers: u32,
    protocol: &'a str,
    rate_bps: f64,
    rtt_s: Option<f64>,
    session_id: &'a str,
    tfmcc: &'a Option<crate::tfmcc::ViewerTfmcc>,
    width: u32,
    audio_packets: u64,
    audio_lost: u64,
    audio_concealed: u64,
}

/// The published view of one viewer (`gone` computed by the caller, which knows the timeout).
fn viewer_view<'a>(id: &'a str, v: &'a Viewer, gone: bool) -> ViewerView<'a> {
    let t = &v.last;
    ViewerView {
        addr: &v.addr,
        decisions: &v.decisions,
        estimate_bps: t.estimate_bps,
        fps: t.fps,
        frames: t.frames,
        freezes: t.freezes,
        gone,
        height: t.height,
        id,
        last_seen_s: v.last_seen,
        layers: t.layers,
        loss_ratio: t.loss_ratio,
        max_layers: t.max_layers,
        protocol: &t.protocol,
        rate_bps: t.rate_bps,
        rtt_s: t.rtt_s,
        session_id: &t.session_id,
        tfmcc: &t.tfmcc,
        width: t.width,
        audio_packets: t.audio_packets,
        audio_lost: t.audio_lost,
        audio_concealed: t.audio_concealed,
    }
}

/// The WebSocket snapshot.
#[derive(Serialize)]
struct Snapshot<'a> {
    sessions: Value,
    t: f64,
    #[serde(rename = "type")]
    kind: &'static str,
    viewers: Vec<ViewerView<'a>>,
}

/// Answer buffers kept for reuse (the HTTP server runs a few worker threads).
pub const JSON_BUFS_KEPT: usize = 4;
/// Largest answer buffer kept for reuse, bytes (10,000 viewers' worth would be far more; the
/// soak's 20 viewers with 50 decisions each take about 0.3 MB).
pub const JSON_BUF_MAX_KEPT: usize = 4 << 20;

/// Cap on decisions kept per viewer.
pub const DECISIONS_KEPT: usize = 50;

impl State {
    pub fn new(cfg: ServerConfig, signer: SamSigner) -> Arc<State> {
        let limiter = InfluenceLimiter::new(InfluenceConfig {
            reports_per_sec: cfg.telemetry_per_addr_per_sec,
            burst: 2.0 * cfg.telemetry_per_addr_per_sec,
            ..InfluenceConfig::default()
        });
        Arc::new(State {
            sam_key: signer.published_key(),
            signer,
            telemetry_limiter: Mutex::new(limiter),
            epoch: Instant::now(),
            next_group: Mutex::new(u32::from(cfg.group_base)),
            cfg,
            sessions: Mutex::new(BTreeMap::new()),
            viewers: Mutex::new(BTreeMap::new()),
            drops: Drops::default(),
            counter: AtomicU64::new(0),
            json_len_hint: AtomicUsize::new(0),
            json_bufs: Mutex::new(Vec::new()),
        })
    }

    /// Takes a token from `addr`'s telemetry bucket (`false`: refuse, counted).
    pub fn admit_telemetry(&self, addr: Option<std::net::IpAddr>) -> bool {
        let Some(ip) = addr else { return true };
        let now = Time(self.epoch.elapsed().as_nanos() as u64);
        let ok = lock(&self.telemetry_limiter).admit(now, ip).is_ok();
        if !ok {
            self.drops
                .telemetry_addr_rate_limited
                .fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// The signed SAM of a session as it goes out now.
    pub fn signed_sam(&self, info: &SessionInfo) -> Result<Vec<u8>> {
        let ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        Ok(self.signer.to_signed_bytes(info, ms)?)
    }

    /// Validates and starts a session. `ctx` names the config origin in errors.
    pub fn create_session(&self, c: &SessionConfig, ctx: &str) -> Result<Arc<Session>> {
        if c.encrypt == Some(true) && !self.cfg.tokens.enabled() {
            return Err(Error::config(
                &format!("{ctx}.encrypt"),
                "needs api_token: the media key is only handed out over the authenticated API",
            ));
        }
        if c.auth_reports == Some(true) && !self.cfg.tokens.enabled() {
            return Err(Error::config(
                &format!("{ctx}.auth_reports"),
                "needs api_token: report keys are only handed out over the authenticated API",
            ));
        }
        let n = self.counter.fetch_add(1, Ordering::Relaxed) + 1;
        let mut next_group = lock(&self.next_group);
        let r = c.resolve(
            ctx,
            &format!("s{n}"),
            Ipv4Addr::from(*next_group),
            self.cfg.port_base,
        )?;
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(&r.id) {
            return Err(Error::Duplicate(r.id));
        }
        if c.group.is_none() {
            // The audio track (issue 21) takes the group after the layers.
            *next_group =
                u32::from(r.group) + r.rates_bps.len() as u32 + u32::from(r.audio.is_some());
        }
        drop(next_group);
        let sender = self.cfg.ssm_source.unwrap_or(self.cfg.interface);
        let is_tfmcc = r.protocol == "tfmcc";
        let mut layers: Vec<LayerInfo> = r
            .rates_bps
            .iter()
            .enumerate()
            .map(|(k, &rate)| LayerInfo {
                rate_bps: rate,
                group: Ipv4Addr::from(u32::from(r.group) + k as u32),
                port: r.port + 2 * k as u16,
            })
            .collect();
        if is_tfmcc {
            // One group whose announced rate is the ceiling (crate::tfmcc).
            layers.truncate(1);
            layers[0].rate_bps = r.rates_bps.iter().sum();
            crate::tfmcc::check_session(&r, c.encrypt == Some(true), ctx)?;
        } else if r.auth_reports {
            return Err(Error::config(
                &format!("{ctx}.auth_reports"),
                "only TFMCC sessions have receiver reports",
            ));
        }
        let ssrc_base = random_u32();
        // Issue 21: the audio track on the group after the layers, riding in layer 0 (its
        // rate counts in layer 0's announced rate); the media clock both tracks' RTP time
        // comes from (crate::media::audio::MediaClock).
        let clock = crate::media::audio::MediaClock {
            epoch_ns: (unix_now() * 1e9) as u64,
        };
        let audio_ssrc = ssrc_base.wrapping_add(0x100);
        let audio_dest = r.audio.as_ref().map(|a| {
            let n = r.rates_bps.len() as u32;
            let extra = if r.encrypt {
                security::auth::MEDIA_OVERHEAD as u64
            } else {
                0
            };
            (
                Ipv4Addr::from(u32::from(r.group) + n),
                r.port + 2 * n as u16,
                a.rate_bps(extra),
            )
        });
        let mut tracks: Vec<proto::Track> = r
            .video
            .as_ref()
            .map(|v| {
                let mut t = crate::video::video_track(v, &layers, ssrc_base);
                // Repair rides in each layer's own slots (docs/protocols/fec.md); a TFMCC
                // session's single stream is paced by its own sender and carries none.
                let fec = crate::video::fec_params(&r);
                if !is_tfmcc && fec.len() == t.streams.len() {
                    for (st, f) in t.streams.iter_mut().zip(&fec) {
                        st.repair = Some(proto::Repair {
                            payload_type: f.payload_type,
                            params: f.announced_params(),
                        });
                    }
                }
                vec![t]
            })
            .unwrap_or_default();
        if let (Some(a), Some((g, p, rate))) = (&r.audio, audio_dest) {
            tracks.push(crate::media::audio_track(a, g, p, audio_ssrc, rate));
            layers[0].rate_bps += rate;
        }
        let info = SessionInfo {
            session_id: random_u32(),
            announce_seq: 0,
            sender,
            layers: layers.clone(),
            packet_size: r.packet_size,
            bunch_len: if is_tfmcc { 1 } else { r.bunch_len },
            adapt_interval: r.adapt_interval,
            announce_interval: self.cfg.announce_interval,
            tracks,
        };
        congestion::wire::sam::validate(&info)?;
        let sock = sock::sender_socket(&self.cfg)?;
        let stop = Arc::new(AtomicBool::new(false));
        let source_stats = Arc::new(Mutex::new(None));
        let audio_queue = r
            .audio
            .as_ref()
            .map(|_| Arc::new(crate::media::audio::AudioQueue::default()));
        // A fresh key per session start, never stored: see docs/security.md §3 on why the
        // nonce then never repeats under one key.
        let media_key = r.encrypt.then(|| GroupKey::generate(0));
        // Sealing adds MEDIA_OVERHEAD bytes: packets are built that much smaller, so that
        // what goes on the wire is exactly the announced packet size.
        let plain_size = if r.encrypt {
            r.packet_size - security::auth::MEDIA_OVERHEAD as u16
        } else {
            r.packet_size
        };
        let (queues, encoder) = match &r.video {
            Some(v) => {
                let src = crate::video::FrameSource::from_source(&r.source)
                    .ok_or_else(|| Error::config(&format!("{ctx}.source"), "not a video source"))?;
                let q = Arc::new(crate::video::LayerQueues::default());
                let audio_io = match (&r.audio, &audio_queue) {
                    (Some(a), Some(queue)) => Some(crate::video::AudioIo {
                        encoder: Arc::new(Mutex::new(
                            crate::media::audio::AudioEncoder::new(a, audio_ssrc, clock).map_err(
                                |e| Error::config(&format!("{ctx}.audio"), e.to_string()),
                            )?,
                        )),
                        queue: queue.clone(),
                        channels: a.channels,
                    }),
                    _ => None,
                };
                let h = crate::video::start(
                    v,
                    src,
                    source_stats.clone(),
                    clock,
                    audio_io,
                    // TFMCC packets carry a second, larger header extension.
                    if is_tfmcc {
                        plain_size.saturating_sub(crate::tfmcc::VIDEO_PACKET_RESERVE)
                    } else {
                        plain_size
                    },
                    ssrc_base,
                    q.clone(),
                    stop.clone(),
                )?;
                (Some(q), Some(h))
            }
            None => (None, None),
        };
        let pc = PacerConfig {
            rates_bps: r.rates_bps.clone(),
            packet_size: r.packet_size,
            bunch_len: r.bunch_len,
            dests: layers
                .iter()
                .map(|l| SocketAddrV4::new(l.group, l.port))
                .collect(),
            ssrc_base,
            spin: self.cfg.pacer_spin,
            payload_type: 96,
            realtime: self.cfg.pacer_realtime,
            queues: queues.clone(),
            sealer: media_key.clone().map(MediaSealer::new),
            fec: match queues {
                Some(_) => crate::video::fec_params(&r),
                None => Vec::new(),
            },
            // Issue 21: audio packets and RTCP sender reports, sent between bunches.
            side: r.video.as_ref().map(|_| {
                let mut reports: Vec<crate::media::out::SrStream> = layers
                    .iter()
                    .enumerate()
                    .map(|(k, l)| crate::media::out::SrStream {
                        ssrc: ssrc_base.wrapping_add(k as u32),
                        rate: 90_000,
                        rtcp: SocketAddrV4::new(l.group, l.port + 1),
                    })
                    .collect();
                let audio = match (&audio_queue, audio_dest) {
                    (Some(q), Some((g, p, _))) => {
                        reports.push(crate::media::out::SrStream {
                            ssrc: audio_ssrc,
                            rate: 48_000,
                            rtcp: SocketAddrV4::new(g, p + 1),
                        });
                        Some(crate::media::out::AudioSide {
                            queue: q.clone(),
                            dest: SocketAddrV4::new(g, p),
                        })
                    }
                    _ => None,
                };
                crate::media::out::SideStreams::new(
                    audio,
                    clock,
                    reports,
                    format!("layercast-{}@{}", r.id, sender),
                    plain_size.saturating_sub(28) as u64,
                    media_key.clone().map(MediaSealer::new),
                )
            }),
        };
        let stats = Arc::new(PacerStats::default());
        let (s2, st2) = (stats.clone(), stop.clone());
        // Like the media key: fresh per session start, never stored (docs/security.md §4).
        let report_mac = r.auth_reports.then(ReportMac::generate);
        let (h, tfmcc) = if is_tfmcc {
            let (h, t) = crate::tfmcc::start(
                &self.cfg,
                &r,
                &layers[0],
                sock,
                s2,
                st2,
                ssrc_base,
                report_mac.clone(),
                queues.clone(),
            )?;
            (h, Some(t))
        } else {
            let h = std::thread::Builder::new()
                .name(format!("pacer-{}", r.id))
                .spawn(move || pacer::run(pc, sock, s2, st2))
                .map_err(|e| Error::io("spawning pacer thread", e))?;
            (h, None)
        };
        let s = Arc::new(Session {
            cfg: r.clone(),
            info: Mutex::new(info),
            started_at: unix_now() as u64,
            stats,
            stop,
            thread: Mutex::new(Some(h)),
            encoder: Mutex::new(encoder),
            source: source_stats,
            audio: audio_queue,
            queues,
            tfmcc,
            media_key,
            report_mac,
            report_bindings: Mutex::new(std::collections::HashMap::new()),
        });
        sessions.insert(r.id.clone(), s.clone());
        Ok(s)
    }

    /// Stops and removes a session.
    pub fn stop_session(&self, id: &str) -> Result<()> {
        let s = lock(&self.sessions)
            .remove(id)
            .ok_or_else(|| Error::NoSuchSession(id.to_string()))?;
        s.stop();
        Ok(())
    }

    /// Stops everything (shutdown).
    pub fn stop_all(&self) {
        let all: Vec<_> = std::mem::take(&mut *lock(&self.sessions))
            .into_values()
            .collect();
        for s in all {
            s.stop();
        }
    }

    pub fn session(&self, id: &str) -> Option<Arc<Session>> {
        lock(&self.sessions).get(id).cloned()
    }

    /// Accepts one telemetry report.
    pub fn telemetry(&self, t: Telemetry, addr: String) -> Result<()> {
        if t.validate().is_err() {
            self.drops
                .telemetry_malformed
                .fetch_add(1, Ordering::Relaxed);
            t.validate()?;
        }
        if self.session(&t.session_id).is_none() {
            self.drops
                .telemetry_unknown_session
                .fetch_add(1, Ordering::Relaxed);
            return Err(Error::NoSuchSession(t.session_id));
        }
        let mut v = lock(&self.viewers);
        let now = Instant::now();
        if let Some(old) = v.get(&t.viewer_id) {
            if now.duration_since(old.last_post) < self.cfg.telemetry_min_interval {
                self.drops
                    .telemetry_rate_limited
                    .fetch_add(1, Ordering::Relaxed);
                return Err(Error::BadRequest("rate limited".into()));
            }
        }
        if !v.contains_key(&t.viewer_id) && v.len() >= 10_000 {
            // Bound memory: forget the longest-silent viewer.
            if let Some(k) = v
                .iter()
                .min_by(|a, b| a.1.last_seen.total_cmp(&b.1.last_seen))
                .map(|(k, _)| k.clone())
            {
                v.remove(&k);
            }
        }
        let e = v.entry(t.viewer_id.clone()).or_insert_with(|| Viewer {
            last: t.clone(),
            addr: addr.clone(),
            decisions: VecDeque::new(),
            last_seen: 0.0,
            last_post: now,
        });
        for d in &t.decisions {
            e.decisions.push_back(d.clone());
            while e.decisions.len() > DECISIONS_KEPT {
                e.decisions.pop_front();
            }
        }
        e.last = t;
        e.addr = addr;
        e.last_seen = unix_now();
        e.last_post = now;
        Ok(())
    }

    /// The viewer id of a TFMCC session's current limiting receiver, from the receiver ids
    /// its players put in their telemetry.
    fn clr_viewer(&self, s: &Session, t: &crate::tfmcc::TfmccState) -> Option<String> {
        let rid = lock(&t.snap).clr?;
        lock(&self.viewers)
            .iter()
            .find(|(_, v)| {
                v.last.session_id == s.cfg.id && v.last.tfmcc.as_ref().is_some_and(|x| x.rid == rid)
            })
            .map(|(id, _)| id.clone())
    }

    fn viewer_gone(&self, v: &Viewer, now: f64) -> bool {
        now - v.last_seen > self.cfg.viewer_timeout.as_secs_f64()
    }

    /// The contract's `Session` object.
    pub fn session_json(&self, s: &Session) -> Value {
        let info = lock(&s.info).clone();
        let now = unix_now();
        let mut by_layer = vec![0u64; info.layers.len()];
        for v in lock(&self.viewers).values() {
            if v.last.session_id == s.cfg.id && !self.viewer_gone(v, now) {
                let l = v.last.layers as usize;
                if l >= 1 && l <= by_layer.len() {
                    by_layer[l - 1] += 1;
                }
            }
        }
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
        json!({
            "id": s.cfg.id, "name": s.cfg.name, "protocol": s.cfg.protocol,
            "source": s.cfg.source, "codec": info.describe(), "layers": layers,
            "video_pictures": s.queues.as_ref().map(|q| q.pictures.load(Ordering::Relaxed)),
            "video_dropped": s.queues.as_ref().map(|q| q.dropped.load(Ordering::Relaxed)),
            "video_key_requests": s.queues.as_ref().map(|q| q.key_requests.load(Ordering::Relaxed)),
            "video_keys_forced": s.queues.as_ref().map(|q| q.keys_forced.load(Ordering::Relaxed)),
            "video_syncs_forced": s.queues.as_ref().map(|q| q.syncs_forced.load(Ordering::Relaxed)),
            // Issue 21: the source pipeline's and the audio track's counters.
            "media": crate::media::session_json(lock(&s.source).as_deref(), s.audio.as_deref()),
            "viewers_by_layer": by_layer,
            "tfmcc": s.tfmcc.as_ref().map_or(Value::Null, |t| t.json(self.clr_viewer(s, t))),
            "started_at": s.started_at,
            "packets_sent": s.stats.packets.load(Ordering::Relaxed),
            "bytes_sent": s.stats.bytes.load(Ordering::Relaxed),
            "sam_key": self.sam_key,
            "encrypted": s.cfg.encrypt,
            "auth_reports": s.cfg.auth_reports,
            "report_keys_bound": lock(&s.report_bindings).len(),
            "ssm_source": self.cfg.ssm_source.map(|a| a.to_string()),
            "seal_errors": s.stats.seal_errors.load(Ordering::Relaxed),
        })
    }

    /// The key API's answer: the media key of an encrypted session and, for a TFMCC session
    /// with `auth_reports` when the query names `rid=N` (N non-zero, decimal), receiver N's
    /// report key. `None` when the session has neither. A bad `rid` is an `Err` message.
    ///
    /// A report key is issued to one client per receiver id: the request must carry
    /// `binding=<32-128 hex digits>`, a secret the client keeps for its run; the first request
    /// for an id binds the id to (the SHA-256 of) that secret, and later requests for the id
    /// get the key only with the same secret (a player asking again after a refresh), else 403.
    /// Ids travel in clear in reports, but a player fetches its key before its first report,
    /// so a token holder who learns an honest player's id finds it already bound.
    /// `Err((status, message))` on refusal.
    pub fn keys_json(
        &self,
        s: &Session,
        query: &str,
    ) -> Option<std::result::Result<Value, (u16, String)>> {
        if s.media_key.is_none() && s.report_mac.is_none() {
            return None;
        }
        let mut v = serde_json::Map::new();
        if let Some(k) = &s.media_key {
            v.insert("cipher".into(), json!("chacha20-poly1305"));
            v.insert("epoch".into(), json!(k.epoch()));
            v.insert("media_key".into(), json!(k.key_hex()));
        }
        if let Some(m) = &s.report_mac {
            v.insert("auth_reports".into(), json!(true));
            let rid = query
                .split('&')
                .find_map(|kv| kv.strip_prefix("rid="))
                .map(|r| r.parse::<u32>().ok().filter(|&r| r != 0));
            match rid {
                Some(Some(rid)) => {
                    let h =
                        match binding_of(query) {
                            Some(Ok(h)) => h,
                            _ => return Some(Err((
                                400,
                                "rid needs binding=<32-128 hex digits>: a receiver id's report \
                                 key is issued to one client only"
                                    .into(),
                            ))),
                        };
                    let mut b = lock(&s.report_bindings);
                    let full = b.len() >= MAX_REPORT_BINDINGS;
                    match b.get(&rid) {
                        Some(known) if *known == h => {}
                        Some(_) => {
                            self.drops.api_rid_taken.fetch_add(1, Ordering::Relaxed);
                            return Some(Err((
                                403,
                                "this rid's report key was issued to another client".into(),
                            )));
                        }
                        None if full => {
                            self.drops
                                .api_rid_table_full
                                .fetch_add(1, Ordering::Relaxed);
                            return Some(Err((
                                503,
                                format!(
                                    "{MAX_REPORT_BINDINGS} receiver ids already hold report keys in this session"
                                ),
                            )));
                        }
                        None => {
                            b.insert(rid, h);
                        }
                    }
                    v.insert("rid".into(), json!(rid));
                    v.insert("report_key".into(), json!(m.receiver_key(rid).key_hex()));
                }
                Some(None) => return Some(Err((400, "rid: a non-zero 32-bit decimal".into()))),
                None => {}
            }
        }
        Some(Ok(Value::Object(v)))
    }

    pub fn sessions_json(&self) -> Value {
        let all: Vec<_> = lock(&self.sessions).values().cloned().collect();
        Value::Array(all.iter().map(|s| self.session_json(s)).collect())
    }

    /// The contract's `[Viewer]` (`GET /api/viewers`), serialised straight from the viewer
    /// table into one buffer of about the previous answer's size.
    ///
    /// Why not a `serde_json::Value` first: with 20 viewers of 50 decisions each (about 12
    /// inputs a decision) the tree is about 2 MB of small maps and strings, built and freed
    /// on an HTTP thread at every request, and the server's resident memory followed each poll
    /// up and down by 1-2.5 MiB (the soak polls every 10 s; docs/reliability.md "The steps
    /// were huge pages").
    /// Written directly, the answer costs its own bytes (about 0.3 MB then), and those go into
    /// a buffer from [`Self::take_json_buf`]: the HTTP layer gives it back once sent, so the
    /// answer's pages are allocated once and reused instead of being freed and purged by the
    /// allocator a second later, request after request (which showed as ±0.35 MiB in the
    /// server's RssAnon depending on when it was sampled).
    pub fn viewers_json(&self) -> Vec<u8> {
        let now = unix_now();
        let v = lock(&self.viewers);
        let views: Vec<ViewerView<'_>> = v
            .iter()
            .map(|(id, v)| viewer_view(id, v, self.viewer_gone(v, now)))
            .collect();
        let mut out = self.take_json_buf();
        if serde_json::to_writer(&mut out, &views).is_err() {
            // Plain structs with string keys cannot fail to serialise; never a panic.
            out.clear();
            out.extend_from_slice(b"null");
        }
        out
    }

    /// An empty buffer for a JSON answer: a returned one (capacity kept) or a new one.
    pub fn take_json_buf(&self) -> Vec<u8> {
        lock(&self.json_bufs).pop().unwrap_or_default()
    }

    /// Gives a sent answer's buffer back for the next request. At most [`JSON_BUFS_KEPT`] are
    /// kept (one per concurrent request of the usual HTTP worker count), and none larger than
    /// [`JSON_BUF_MAX_KEPT`]: a one-off huge answer is not held for the life of the server.
    pub fn give_json_buf(&self, mut buf: Vec<u8>) {
        if buf.capacity() > JSON_BUF_MAX_KEPT {
            return;
        }
        buf.clear();
        let mut pool = lock(&self.json_bufs);
        if pool.len() < JSON_BUFS_KEPT {
            pool.push(buf);
        }
    }

    /// The WebSocket snapshot (`{"type": "snapshot", ...}`), written like [`Self::viewers_json`].
    pub fn snapshot_json(&self) -> Vec<u8> {
        // Sessions first: `session_json` takes the viewer lock itself.
        let sessions = self.sessions_json();
        let now = unix_now();
        let v = lock(&self.viewers);
        let snap = Snapshot {
            sessions,
            t: now,
            kind: "snapshot",
            viewers: v
                .iter()
                .map(|(id, v)| viewer_view(id, v, self.viewer_gone(v, now)))
                .collect(),
        };
        self.to_json_bytes(&snap)
    }

    /// Serialises into a buffer sized from the previous answer (no doubling reallocations of
    /// a large buffer). Plain structs, string keys and numbers cannot fail to serialise; if
    /// one ever did, the answer is `null` rather than a panic.
    fn to_json_bytes(&self, x: &impl Serialize) -> Vec<u8> {
        let hint = self.json_len_hint.load(Ordering::Relaxed);
        let mut out = Vec::with_capacity(hint + hint / 8 + 256);
        if serde_json::to_writer(&mut out, x).is_err() {
            out.clear();
            out.extend_from_slice(b"null");
        }
        self.json_len_hint.store(out.len(), Ordering::Relaxed);
        out
    }

    /// SDP for layer 0 of a session (RFC 8866), with the FEC the SAM announces for it and the
    /// audio track's section (`codec::sdp` writes both). An error only if the announced
    /// payload types are not dynamic ones.
    pub fn sdp(&self, s: &Session) -> std::result::Result<String, codec::Error> {
        use std::net::IpAddr;
        let info = lock(&s.info).clone();
        let l0 = &info.layers[0];
        let ttl = self.cfg.ttl.min(255) as u8;
        let mut sdp =
            codec::sdp::LayerSdp::new(IpAddr::V4(info.sender), IpAddr::V4(l0.group), l0.port);
        sdp.session_name = s.cfg.name.clone();
        sdp.session_id = info.session_id as u64;
        sdp.session_version = info.announce_seq as u64;
        sdp.ttl = ttl;
        sdp.cc_ext_id = congestion::wire::cc_ext::DEFAULT_ID;
        sdp.source = self.cfg.ssm_source.map(IpAddr::V4);
        let video = info.track(proto::TrackKind::Video);
        if video.is_none() {
            sdp.encoding = "X-LAYERCAST-SYNTH/90000".into();
        }
        // Repair packets share the layer's stream under their own payload type, which the
        // m= line does not list: stock receivers drop them (docs/protocols/fec.md).
        sdp.fec = video
            .and_then(|t| t.streams.first())
            .and_then(|st| st.repair.as_ref())
            .and_then(|r| codec::fec::FecParams::from_announced(r.payload_type, &r.params).ok());
        // The audio track's own group (docs/protocols/audio.md).
        if let Some(t) = info.track(proto::TrackKind::Audio) {
            if let (proto::Codec::Opus(p), Some(st)) = (&t.codec, t.streams.first()) {
                sdp.audio = Some(codec::sdp::OpusSdp {
                    dest: IpAddr::V4(st.group),
                    ttl,
                    port: st.port,
                    payload_type: p.payload_type,
                    channels: p.channels,
                    inband_fec: p.inband_fec,
                    bitrate: s.cfg.audio.as_ref().map_or(64_000, |a| a.bitrate),
                    ssrc: Some(st.ssrc),
                });
            }
        }
        sdp.render()
    }

    /// Prometheus text exposition.
    pub fn metrics(&self) -> String {
        let mut m = String::new();
        let sessions: Vec<_> = lock(&self.sessions).values().cloned().collect();
        // One counter family per sender statistic, one series per session.
        type Read = fn(&PacerStats) -> u64;
        let counters: [(&str, Read); 7] = [
            ("layercast_sender_packets_total", |st| {
                st.packets.load(Ordering::Relaxed)
            }),
            ("layercast_sender_bytes_total", |st| {
                st.bytes.load(Ordering::Relaxed)
            }),
            ("layercast_sender_send_errors_total", |st| {
                st.send_errors.load(Ordering::Relaxed)
            }),
            // Encryption cost: packets sealed and nanoseconds spent sealing them.
            ("layercast_sender_sealed_packets_total", |st| {
                st.sealed.load(Ordering::Relaxed)
            }),
            ("layercast_sender_seal_nanoseconds_total", |st| {
                st.seal_ns.load(Ordering::Relaxed)
            }),
            // Video slots without media: FEC repair packets, and padding where none was due.
            ("layercast_sender_repair_packets_total", |st| {
                st.repair_packets.load(Ordering::Relaxed)
            }),
            ("layercast_sender_padding_packets_total", |st| {
                st.padding_packets.load(Ordering::Relaxed)
            }),
        ];
        for (name, get) in counters {
            m.push_str(&format!("# TYPE {name} counter\n"));
            for s in &sessions {
                m.push_str(&format!(
                    "{name}{{session=\"{}\"}} {}\n",
                    s.cfg.id,
                    get(&s.stats)
                ));
            }
        }
        m.push_str("# HELP layercast_sender_bunch_error_seconds Bunch start time minus schedule.\n# TYPE layercast_sender_bunch_error_seconds summary\n");
        for s in &sessions {
            let h = lock(&s.stats.errors).clone();
            for q in [0.5, 0.99] {
                m.push_str(&format!(
                    "layercast_sender_bunch_error_seconds{{session=\"{}\",quantile=\"{q}\"}} {}\n",
                    s.cfg.id,
                    h.quantile_us(q) as f64 / 1e6
                ));
            }
            m.push_str(&format!(
                "layercast_sender_bunch_error_seconds_sum{{session=\"{}\"}} {}\nlayercast_sender_bunch_error_seconds_count{{session=\"{}\"}} {}\n",
                s.cfg.id, h.sum_us as f64 / 1e6, s.cfg.id, h.count
            ));
        }
        let now = unix_now();
        let viewers = lock(&self.viewers);
        let live: Vec<_> = viewers
            .iter()
            .filter(|(_, v)| !self.viewer_gone(v, now))
            .collect();
        let per_viewer: [MetricFn; 9] = [
            ("layercast_viewer_layers", "gauge", |t| t.layers as f64),
            ("layercast_viewer_rate_bps", "gauge", |t| t.rate_bps),
            ("layercast_viewer_estimate_bps", "gauge", |t| {
                t.estimate_bps.unwrap_or(f64::NAN)
            }),
            ("layercast_viewer_packets_received_total", "counter", |t| {
                t.packets_received as f64
            }),
            ("layercast_viewer_packets_lost_total", "counter", |t| {
                t.packets_lost as f64
            }),
            ("layercast_viewer_freezes_total", "counter", |t| {
                t.freezes as f64
            }),
            // Issue 21: the audio track per viewer.
            ("layercast_viewer_audio_packets_total", "counter", |t| {
                t.audio_packets as f64
            }),
            ("layercast_viewer_audio_lost_total", "counter", |t| {
                t.audio_lost as f64
            }),
            (
                "layercast_viewer_audio_concealed_frames_total",
                "counter",
                |t| t.audio_concealed as f64,
            ),
        ];
        for (name, kind, f) in per_viewer {
            m.push_str(&format!("# TYPE {name} {kind}\n"));
            for (id, v) in live.iter().take(self.cfg.max_viewer_labels) {
                m.push_str(&format!(
                    "{name}{{session=\"{}\",viewer=\"{}\"}} {}\n",
                    esc(&v.last.session_id),
                    esc(id),
                    f(&v.last)
                ));
            }
        }
        m.push_str("# TYPE layercast_viewers gauge\n");
        let mut agg: BTreeMap<(String, u32), u64> = BTreeMap::new();
        for (_, v) in &live {
            *agg.entry((v.last.session_id.clone(), v.last.layers))
                .or_default() += 1;
        }
        for ((s, l), n) in agg {
            m.push_str(&format!(
                "layercast_viewers{{session=\"{}\",layers=\"{l}\"}} {n}\n",
                esc(&s)
            ));
        }
        crate::tfmcc::metrics(&sessions, &mut m);
        // Issue 21 / finding F12: pictures, source restarts, audio packets per session.
        let sources: Vec<_> = sessions.iter().map(|s| lock(&s.source).clone()).collect();
        let media: Vec<crate::media::SessionMedia<'_>> = sessions
            .iter()
            .zip(&sources)
            .map(|(s, src)| crate::media::SessionMedia {
                id: &s.cfg.id,
                pictures: s
                    .queues
                    .as_ref()
                    .map(|q| q.pictures.load(Ordering::Relaxed)),
                encode_errors: s
                    .queues
                    .as_ref()
                    .map(|q| q.encode_errors.load(Ordering::Relaxed)),
                source: src.as_deref(),
                audio: s.audio.as_deref(),
            })
            .collect();
        crate::media::metrics(&media, &mut m);
        let d = &self.drops;
        m.push_str("# TYPE layercast_dropped_total counter\n");
        for (what, reason, c) in [
            ("telemetry", "malformed", &d.telemetry_malformed),
            ("telemetry", "rate_limited", &d.telemetry_rate_limited),
            ("telemetry", "unknown_session", &d.telemetry_unknown_session),
            ("api", "bad_request", &d.api_bad_request),
            (
                "telemetry",
                "addr_rate_limited",
                &d.telemetry_addr_rate_limited,
            ),
            ("api", "unauthorized", &d.api_unauthorized),
            ("api", "forbidden", &d.api_forbidden),
            ("api", "headers_too_large", &d.api_headers_too_large),
            ("api", "rid_taken", &d.api_rid_taken),
            ("api", "rid_table_full", &d.api_rid_table_full),
        ] {
            m.push_str(&format!(
                "layercast_dropped_total{{what=\"{what}\",reason=\"{reason}\"}} {}\n",
                c.load(Ordering::Relaxed)
            ));
        }
        m
    }
}

/// A per-viewer metric: name, Prometheus type, value extractor.
type MetricFn = (&'static str, &'static str, fn(&Telemetry) -> f64);

/// Escapes a Prometheus label value.
fn esc(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Sends the SAM of every session once per announce interval until `stop`.
pub fn announcer(state: Arc<State>, stop: Arc<AtomicBool>) {
    let Some((group, port)) = state.cfg.announce else {
        return;
    };
    let sock = match sock::sender_socket(&state.cfg) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("layercast-server: announcer disabled: {e}");
            return;
        }
    };
    let dst = SocketAddrV4::new(group, port);
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let sessions: Vec<_> = lock(&state.sessions).values().cloned().collect();
        for s in sessions {
            let bytes = {
                let mut info = lock(&s.info);
                info.announce_seq = info.announce_seq.wrapping_add(1);
                state.signed_sam(&info)
            };
            if let Ok(b) = bytes {
                let _ = sock.send_to(&b, dst);
            }
        }
        next += state.cfg.announce_interval;
        let now = Instant::now();
        if next < now {
            next = now;
        }
        while Instant::now() < next && !stop.load(Ordering::Relaxed) {
            std::thread::sleep((next - Instant::now()).min(Duration::from_millis(100)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The direct serialisation publishes exactly what the former `json!` object did: same
    /// members, same values (decisions with their inputs, the TFMCC part, nulls).
    #[test]
    fn viewer_view_publishes_the_same_object_as_before() {
        let t: Telemetry = serde_json::from_value(json!({
            "viewer_id": "p01", "session_id": "live", "protocol": "era", "layers": 3,
            "max_layers": 10, "rate_bps": 300000.0, "estimate_bps": null, "loss_ratio": 0.001,
            "packets_received": 10, "packets_lost": 1, "width": 320, "height": 180,
            "fps": 29.5, "frames": 900, "freezes": 2, "rtt_s": 0.05,
            "decisions": [{"at_s": 12.5, "from": 2, "to": 3, "reason": "rai",
                           "inputs": {"r_pp": 1.2e6, "plr": 0.0}}],
            "tfmcc": {"rid": 7, "rate_bps": 1.0e6, "rtt_s": 0.1, "loss_event_rate": 0.01,
                      "is_clr": true, "have_rtt": true, "reports_sent": 3}
        }))
        .unwrap();
        let v = Viewer {
            decisions: t.decisions.iter().cloned().collect(),
            last: t,
            addr: "10.0.0.2".into(),
            last_seen: 1234.5,
            last_post: Instant::now(),
        };
        let t = &v.last;
        let before = json!({"id": "p01", "session_id": t.session_id, "addr": v.addr,
            "protocol": t.protocol, "layers": t.layers, "max_layers": t.max_layers,
            "rate_bps": t.rate_bps, "estimate_bps": t.estimate_bps,
            "loss_ratio": t.loss_ratio, "width": t.width, "height": t.height,
            "fps": t.fps, "frames": t.frames, "freezes": t.freezes, "rtt_s": t.rtt_s,
            "decisions": v.decisions, "last_seen_s": v.last_seen,
            "tfmcc": t.tfmcc,
            "audio_packets": 0, "audio_lost": 0, "audio_concealed": 0,
            "gone": false});
        let now: Value =
            serde_json::from_slice(&serde_json::to_vec(&viewer_view("p01", &v, false)).unwrap())
                .unwrap();
        assert_eq!(now, before);
    }

    /// Sent answers' buffers come back with their capacity, at most `JSON_BUFS_KEPT` of them
    /// and none over `JSON_BUF_MAX_KEPT`; an empty table still answers `[]`.
    #[test]
    fn answer_buffers_are_reused_and_bounded() {
        let cfg = match crate::config::load(&[], &BTreeMap::new()).unwrap() {
            crate::config::Cli::Run(c) => *c,
            crate::config::Cli::Help(_) => unreachable!("no --help given"),
        };
        let state = State::new(cfg, SamSigner::from_seed(&[7; 32]));
        let first = state.viewers_json();
        assert_eq!(first, b"[]");
        let (ptr, cap) = (first.as_ptr(), first.capacity());
        state.give_json_buf(first);
        let again = state.viewers_json();
        assert_eq!(again, b"[]");
        assert_eq!(
            (again.as_ptr(), again.capacity()),
            (ptr, cap),
            "the returned buffer was not reused"
        );
        for _ in 0..JSON_BUFS_KEPT + 3 {
            state.give_json_buf(Vec::with_capacity(1024));
        }
        assert_eq!(lock(&state.json_bufs).len(), JSON_BUFS_KEPT);
        lock(&state.json_bufs).clear();
        state.give_json_buf(Vec::with_capacity(JSON_BUF_MAX_KEPT + 1));
        assert!(lock(&state.json_bufs).is_empty());
    }
}
