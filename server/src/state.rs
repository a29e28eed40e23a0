//! The session registry: running sessions (their media threads, keys and counters), the SAM
//! signer and the counters of refused input. Viewers live in `crate::viewers` (one owner
//! task); what the API publishes is rendered in `crate::render`.

use crate::config::{ResolvedSession, ServerConfig, SessionConfig};
use crate::error::{Error, Result};
use crate::pacer::{self, PacerConfig, PacerStats};
use crate::sock;
use congestion::{LayerInfo, SessionInfo, Time};
use security::auth::{InfluenceConfig, InfluenceLimiter, ReportMac, SamSigner};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
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

/// Ports a session takes from its layer 0 port on: RTP and RTCP for each layer and for the
/// audio track, and the audio track's repair stream (the feedback socket is on layer 0's RTCP port number, on the sender's own
/// address).
fn port_span(r: &ResolvedSession) -> u32 {
    2 * (r.rates_bps.len() as u32 + 2 * u32::from(r.audio.is_some()))
}

/// The first port from `base` on whose `span` ports overlap none of the `taken` (first, span)
/// ranges, if one fits below 65536.
fn free_ports(base: u16, span: u32, taken: &[(u32, u32)]) -> Option<u16> {
    let mut p = u32::from(base).max(1);
    loop {
        if p + span > 65_536 {
            return None;
        }
        match taken.iter().find(|&&(q, n)| p < q + n && q < p + span) {
            Some(&(q, n)) => p = q + n,
            None => return Some(p as u16),
        }
    }
}

/// Binds a session's feedback socket on `addr`, or on a free port of the same address when
/// `addr`'s port is in use.
fn bind_feedback(addr: SocketAddrV4) -> std::io::Result<std::net::UdpSocket> {
    let s = match std::net::UdpSocket::bind(addr) {
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            std::net::UdpSocket::bind(SocketAddrV4::new(*addr.ip(), 0))?
        }
        r => r?,
    };
    s.set_nonblocking(true)?;
    Ok(s)
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
    /// The media keys of an encrypted session (handed out by the key API only) and their
    /// rotation (`crate::media_keys`).
    pub media_keys: Option<crate::media_keys::MediaKeys>,
    /// The report-MAC session secret of a TFMCC session with `auth_reports` (the key API
    /// hands out per-receiver keys derived from it, never the secret itself).
    pub report_mac: Option<ReportMac>,
    /// Keys of the UDP report channel (`crate::reports`): per session start, never stored;
    /// viewers get their receiver id's key from the key API.
    pub telemetry_mac: ReportMac,
    /// A handle on the feedback socket that acknowledgements of viewer reports leave by.
    pub feedback_reply: Option<std::net::UdpSocket>,
    /// The feedback port the SAM announces (or implies).
    pub feedback_port: Option<u16>,
    /// Receiver id -> SHA-256 of the binding secret of the client its report key was first
    /// issued to (`keys_json`), and the viewer id of its token if the token names one: the key
    /// of an id goes to that client only, and its reports speak for that viewer only.
    report_bindings: Mutex<std::collections::HashMap<u32, RidBinding>>,
}

/// Who a receiver id's report key was issued to.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RidBinding {
    secret: [u8; 32],
    viewer: Option<String>,
}

/// Most receiver ids whose report keys one session hands out (bindings are kept for the
/// session's life, about 40 bytes each: 2.6 MB at the cap). Every viewer with a token asks for
/// one (its UDP report key, docs/protocols/reports.md), and players pick a new id per run, so
/// a session with more player starts than this refuses further report keys (503, counted)
/// until it is restarted; such players keep HTTP telemetry and their media key.
pub const MAX_REPORT_BINDINGS: usize = 65_536;

/// The SHA-256 of a key request's `binding` (32-128 hex digits, a client's own secret).
fn binding_of(b: &str) -> Option<[u8; 32]> {
    if !(32..=128).contains(&b.len()) || !b.bytes().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    Some(openssl::sha::sha256(b.to_ascii_lowercase().as_bytes()))
}

impl Session {
    /// Receiver ids whose report key has been issued.
    pub fn report_keys_bound(&self) -> usize {
        lock(&self.report_bindings).len()
    }

    /// Whether a report under `rid`'s key may speak for `viewer_id`: yes unless the key was
    /// issued on a token bound to another viewer.
    pub fn rid_may_report_as(&self, rid: u32, viewer_id: &str) -> bool {
        match lock(&self.report_bindings).get(&rid) {
            Some(RidBinding {
                viewer: Some(v), ..
            }) => v == viewer_id,
            _ => true,
        }
    }

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

/// Counters of dropped input, by reason (exported as `layercast_dropped_total{what,reason}`).
#[derive(Debug, Default)]
pub struct Drops {
    pub telemetry_malformed: AtomicU64,
    pub telemetry_rate_limited: AtomicU64,
    pub telemetry_unknown_session: AtomicU64,
    /// HTTP telemetry whose viewer id is not the one its viewer-bound token was issued to.
    pub telemetry_wrong_viewer: AtomicU64,
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
    /// Telemetry refused because the viewer actor's queue was full (503).
    pub telemetry_queue_full: AtomicU64,
    /// Connections closed at once because the connection cap was reached.
    pub api_connections_over_cap: AtomicU64,
    /// Failed `accept` calls (the loop goes on after a short pause).
    pub api_accept_errors: AtomicU64,
    /// TLS handshakes that failed or did not finish within the handshake timeout.
    pub api_tls_handshake_failed: AtomicU64,
    /// WebSocket upgrades refused by the client cap (503), and clients dropped because they
    /// fell behind the live broadcast.
    pub api_websockets_over_cap: AtomicU64,
    pub api_websocket_lagged: AtomicU64,
    /// Key or token requests refused because they came over plain HTTP from a non-loopback
    /// address (docs/security.md).
    pub api_plain_http_secrets: AtomicU64,
}

/// Everything the HTTP side and the background threads share.
pub struct State {
    pub cfg: ServerConfig,
    pub sessions: Mutex<BTreeMap<String, Arc<Session>>>,
    pub drops: Drops,
    /// Counters of the UDP report channel.
    pub reports: crate::reports::Counters,
    /// The sessions' media threads queue viewer reports here (`udp_reports`); the report
    /// task takes the receiving end once ([`State::take_report_queue`]).
    report_tx: Option<tokio::sync::mpsc::Sender<crate::reports::Inbound>>,
    report_rx: Mutex<Option<tokio::sync::mpsc::Receiver<crate::reports::Inbound>>>,
    next_group: Mutex<u32>,
    counter: AtomicU64,
    /// Signs every SAM (multicast and `?format=sam`).
    pub signer: SamSigner,
    /// `ed25519:<hex>`, published in every session description.
    pub sam_key: String,
    /// Per-source-address token bucket on telemetry posts (before the body is read).
    pub telemetry_limiter: Mutex<InfluenceLimiter>,
    /// Time base of the limiter.
    epoch: Instant,
}

impl State {
    pub fn new(cfg: ServerConfig, signer: SamSigner) -> Arc<State> {
        let limiter = InfluenceLimiter::new(InfluenceConfig {
            reports_per_sec: cfg.telemetry_per_addr_per_sec,
            burst: 2.0 * cfg.telemetry_per_addr_per_sec,
            ..InfluenceConfig::default()
        });
        let (report_tx, report_rx) = match cfg.udp_reports {
            true => {
                let (tx, rx) = tokio::sync::mpsc::channel(crate::reports::QUEUE);
                (Some(tx), Some(rx))
            }
            false => (None, None),
        };
        Arc::new(State {
            report_tx,
            report_rx: Mutex::new(report_rx),
            sam_key: signer.published_key(),
            signer,
            telemetry_limiter: Mutex::new(limiter),
            epoch: Instant::now(),
            next_group: Mutex::new(u32::from(cfg.group_base)),
            cfg,
            sessions: Mutex::new(BTreeMap::new()),
            drops: Drops::default(),
            reports: crate::reports::Counters::default(),
            counter: AtomicU64::new(0),
        })
    }

    /// The receiving end of the viewer-report queue (once; `None` with `udp_reports` off).
    pub fn take_report_queue(
        &self,
    ) -> Option<tokio::sync::mpsc::Receiver<crate::reports::Inbound>> {
        lock(&self.report_rx).take()
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
        let mut r = c.resolve(
            ctx,
            &format!("s{n}"),
            Ipv4Addr::from(*next_group),
            self.cfg.port_base,
        )?;
        let mut sessions = lock(&self.sessions);
        if sessions.contains_key(&r.id) {
            return Err(Error::Duplicate(r.id));
        }
        if c.port.is_none() {
            // Like the groups: each session its own ports, so that its feedback socket (on
            // layer 0's port + 1) is its own.
            let taken: Vec<(u32, u32)> = sessions
                .values()
                .map(|s| (u32::from(s.cfg.port), port_span(&s.cfg)))
                .collect();
            r.port = free_ports(self.cfg.port_base, port_span(&r), &taken).ok_or_else(|| {
                Error::config(
                    &format!("{ctx}.port"),
                    format!(
                        "no {} free ports from port_base {}",
                        port_span(&r),
                        self.cfg.port_base
                    ),
                )
            })?;
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
                a.rate_bps(extra) + a.repair_rate_bps(extra),
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
        let mut info = SessionInfo {
            session_id: random_u32(),
            announce_seq: 0,
            sender,
            layers: layers.clone(),
            packet_size: r.packet_size,
            bunch_len: if is_tfmcc { 1 } else { r.bunch_len },
            adapt_interval: r.adapt_interval,
            announce_interval: self.cfg.announce_interval,
            tracks,
            feedback_port: None,
            retransmission: r.retransmission,
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
        // nonce then never repeats under one key. One sealer, the Publisher's (it seals the
        // audio track's streams too), rotatable by the control plane (`crate::media_keys`).
        let (media_keys, mut sealers) = match r.encrypt {
            true => {
                let (k, s) = crate::media_keys::MediaKeys::generate(1, self.cfg.media_key_refresh);
                (Some(k), s)
            }
            false => (None, Vec::new()),
        };
        // Sealing adds MEDIA_OVERHEAD bytes: packets are built that much smaller, so that
        // what goes on the wire is exactly the announced packet size.
        let plain_size = if r.encrypt {
            r.packet_size - security::auth::MEDIA_OVERHEAD as u16
        } else {
            r.packet_size
        };
        // Pictures go from the encoder thread to the media thread over a lock-free ring.
        let (ring_tx, ring_rx) = rtrb::RingBuffer::new(crate::video::RING_PICTURES);
        let (queues, encoder, ring_rx) = match &r.video {
            Some(v) => {
                let src = crate::video::FrameSource::from_source(&r.source)
                    .ok_or_else(|| Error::config(&format!("{ctx}.source"), "not a video source"))?;
                let q = Arc::new(crate::video::LayerQueues::default());
                let audio_io = match (&r.audio, &audio_queue) {
                    (Some(a), Some(queue)) => Some(crate::video::AudioIo {
                        encoder: Arc::new(Mutex::new(
                            crate::media::audio::AudioEncoder::new(a, clock).map_err(|e| {
                                Error::config(&format!("{ctx}.audio"), e.to_string())
                            })?,
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
                    ring_tx,
                    stop.clone(),
                )?;
                (Some(q), Some(h), Some(ring_rx))
            }
            None => (None, None, None),
        };
        let stats = Arc::new(PacerStats::default());
        let (s2, st2) = (stats.clone(), stop.clone());
        // Like the media key: fresh per session start, never stored (docs/security.md §4).
        let report_mac = r.auth_reports.then(ReportMac::generate);
        // The feedback socket: TFMCC reports and every session's key-picture and re-sync
        // requests, on layer 0's port + 1, or on a port of the system's choosing when that one
        // is taken (another session configured on the same ports); the SAM announces it.
        let fb_default = SocketAddrV4::new(self.cfg.interface, layers[0].port.wrapping_add(1));
        let feedback = match bind_feedback(fb_default) {
            Ok(s) => Some(s),
            Err(e) if is_tfmcc => {
                return Err(Error::io(format!("TFMCC feedback socket {fb_default}"), e));
            }
            Err(e) => {
                eprintln!("layercast-server: session {}: no feedback socket on {fb_default} ({e}): key-picture requests only over HTTP", r.id);
                None
            }
        };
        let fb_port = feedback
            .as_ref()
            .and_then(|s| s.local_addr().ok())
            .map_or(fb_default.port(), |a| a.port());
        if fb_port != fb_default.port() {
            eprintln!(
                "layercast-server: session {}: {fb_default} is taken; feedback on port {fb_port} (announced)",
                r.id
            );
        }
        info.feedback_port = Some(fb_port);
        // Retransmissions leave by the feedback socket: without one there are none to offer.
        info.retransmission &= feedback.is_some();
        let feedback_reply = feedback.as_ref().and_then(|s| s.try_clone().ok());
        let tfmcc = is_tfmcc.then(|| {
            let announced =
                SocketAddrV4::new(self.cfg.ssm_source.unwrap_or(self.cfg.interface), fb_port);
            Arc::new(crate::tfmcc::TfmccState::new(
                announced,
                layers[0].rate_bps as f64,
                report_mac.is_some(),
            ))
        });
        let pc = PacerConfig {
            publisher: session::publisher::PublisherConfig {
                media: r.video.is_some(),
                burst: r.video.as_ref().and_then(crate::video::burst_for_video),
                sealer: sealers.pop(),
                report_mac: report_mac.clone(),
                tfmcc: is_tfmcc.then(|| {
                    r.video
                        .as_ref()
                        .map(|v| v.cell_kbps.iter().flatten().sum::<u32>())
                }),
                max_discardable_wait: r.video.as_ref().and_then(|v| v.max_discardable_wait),
                max_middle_wait: r.video.as_ref().and_then(|v| v.max_middle_wait),
                reports: r.video.as_ref().map(|_| session::publisher::ReportConfig {
                    clock,
                    cname: format!("layercast-{}@{}", r.id, sender),
                    interval: session::publisher::REPORT_INTERVAL,
                }),
                ..session::publisher::PublisherConfig::new(info.clone(), ssrc_base)
            },
            spin: self.cfg.pacer_spin,
            realtime: self.cfg.pacer_realtime,
            video: queues.clone().zip(ring_rx),
            feedback,
            reports: self
                .report_tx
                .clone()
                .map(|tx| (tx, Arc::<str>::from(r.id.as_str()))),
            tfmcc: tfmcc.clone(),
            // The audio track and the RTCP sender reports, sent between bunches.
            side: r
                .video
                .as_ref()
                .map(|_| crate::media::out::SideStreams::new(audio_queue.clone())),
        };
        let h = std::thread::Builder::new()
            .name(format!("media-{}", r.id))
            .spawn(move || pacer::run(pc, sock, s2, st2))
            .map_err(|e| Error::io("spawning the media thread", e))?;
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
            media_keys,
            report_mac,
            telemetry_mac: ReportMac::generate(),
            report_bindings: Mutex::new(std::collections::HashMap::new()),
            feedback_reply,
            feedback_port: Some(fb_port),
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
        rid: Option<&str>,
        binding: Option<&str>,
        viewer: Option<&str>,
    ) -> Result<Value> {
        if s.media_keys.is_none() && s.report_mac.is_none() && rid.is_none() {
            return Err(Error::NotFound(
                "session has no keys (not encrypted, no auth_reports; ask with rid= for a report key)"
                    .into(),
            ));
        }
        let mut v = match &s.media_keys {
            Some(k) => k.json(Instant::now()),
            None => serde_json::Map::new(),
        };
        if s.report_mac.is_some() {
            v.insert("auth_reports".into(), json!(true));
        }
        if let Some(rid) = rid {
            let rid = rid
                .parse::<u32>()
                .ok()
                .filter(|&r| r != 0)
                .ok_or_else(|| Error::BadRequest("rid: a non-zero 32-bit decimal".into()))?;
            self.bind_rid(s, rid, binding, viewer)?;
            v.insert("rid".into(), json!(rid));
            if let Some(m) = &s.report_mac {
                v.insert("report_key".into(), json!(m.receiver_key(rid).key_hex()));
            }
            // The UDP report channel (crate::reports): the viewer's key and the port.
            v.insert(
                "telemetry_key".into(),
                json!(s.telemetry_mac.receiver_key(rid).key_hex()),
            );
            // Reports go to the session's feedback port, on the SAM's sender when it names
            // one (else the host the player reached the API on).
            if let (Some(_), Some(p)) = (&s.feedback_reply, s.feedback_port) {
                if self.report_tx.is_some() {
                    v.insert("report_port".into(), json!(p));
                    let host = lock(&s.info).sender;
                    if !host.is_unspecified() {
                        v.insert("report_host".into(), json!(host.to_string()));
                    }
                }
            }
        }
        Ok(Value::Object(v))
    }

    /// Binds receiver id `rid` of `s` to the client's `binding` secret on first use; later
    /// requests for the id need the same secret and the same viewer (403), and a full table
    /// refuses new ids (503).
    fn bind_rid(
        &self,
        s: &Session,
        rid: u32,
        binding: Option<&str>,
        viewer: Option<&str>,
    ) -> Result<()> {
        let h = binding.and_then(binding_of).ok_or_else(|| {
            Error::BadRequest(
                "rid needs binding=<32-128 hex digits>: a receiver id's report key is issued to \
                 one client only"
                    .into(),
            )
        })?;
        let mut b = lock(&s.report_bindings);
        let full = b.len() >= MAX_REPORT_BINDINGS;
        let want = RidBinding {
            secret: h,
            viewer: viewer.map(str::to_string),
        };
        match b.get(&rid) {
            Some(known) if *known == want => Ok(()),
            Some(_) => {
                self.drops.api_rid_taken.fetch_add(1, Ordering::Relaxed);
                Err(Error::Forbidden(
                    "this rid's report key was issued to another client".into(),
                ))
            }
            None if full => {
                self.drops
                    .api_rid_table_full
                    .fetch_add(1, Ordering::Relaxed);
                Err(Error::Unavailable(format!(
                    "{MAX_REPORT_BINDINGS} receiver ids already hold report keys in this session"
                )))
            }
            None => {
                b.insert(rid, want);
                Ok(())
            }
        }
    }

    /// Every running session, in id order.
    pub fn all_sessions(&self) -> Vec<Arc<Session>> {
        lock(&self.sessions).values().cloned().collect()
    }
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
    use super::free_ports;

    #[test]
    fn free_ports_skip_every_taken_range() {
        assert_eq!(free_ports(5004, 8, &[]), Some(5004));
        // Two sessions from the base: the second starts where the first's range ends.
        assert_eq!(free_ports(5004, 6, &[(5004, 8)]), Some(5012));
        // A configured session in the way is skipped too, in whatever order they are listed.
        assert_eq!(free_ports(5004, 6, &[(5014, 4), (5004, 8)]), Some(5018));
        // A gap that fits is used.
        assert_eq!(free_ports(5004, 4, &[(5004, 2), (5010, 2)]), Some(5006));
        assert_eq!(free_ports(5004, 6, &[(5004, 2), (5010, 2)]), Some(5012));
        // Nothing past 65535.
        assert_eq!(free_ports(65_530, 8, &[]), None);
        assert_eq!(free_ports(65_528, 8, &[]), Some(65_528));
    }
}
