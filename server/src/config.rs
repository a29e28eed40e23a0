//! Configuration: a file (TOML), environment variables (`LAYERCAST_*`) and command-line flags,
//! in increasing precedence. Every server-level key can be given in all three places under the
//! same name (`http_addr` in the file, `LAYERCAST_HTTP_ADDR` in the environment,
//! `--http-addr` on the command line). Sessions come from `[[session]]` tables in the file,
//! from `--session JSON` flags (repeatable) and from `POST /api/sessions`; they share one
//! schema, [`SessionConfig`].

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

/// Default announcement group. 239.255.0.0/16 is the IPv4 organisation-local scope (RFC 2365);
/// ".76" is "L" for Layercast. Port 5000 is below the layers' default range.
pub const DEFAULT_ANNOUNCE: &str = "239.255.76.1:5000";

/// Server-level keys, their defaults and a one-line description (also printed by `--help`).
pub const KEYS: &[(&str, &str, &str)] = &[
    ("config", "", "path of a TOML config file"),
    (
        "http_addr",
        "127.0.0.1:8080",
        "HTTP API / WebSocket / metrics listen address",
    ),
    (
        "announce",
        DEFAULT_ANNOUNCE,
        "announcement group:port (SAM), empty to disable",
    ),
    (
        "announce_interval_ms",
        "1000",
        "period of the multicast session announcement",
    ),
    (
        "interface",
        "0.0.0.0",
        "IPv4 address of the interface multicast goes out of",
    ),
    ("ttl", "8", "multicast TTL"),
    (
        "loop",
        "true",
        "IP_MULTICAST_LOOP (deliver to listeners on this host)",
    ),
    (
        "ssm_source",
        "",
        "source address announced for SSM receivers (default: interface)",
    ),
    (
        "group_base",
        "239.255.77.0",
        "first multicast group handed to new sessions",
    ),
    (
        "port_base",
        "5004",
        "first UDP port handed to new sessions (layer k: +2k)",
    ),
    (
        "dashboard_dir",
        "server/dashboard/dist",
        "directory of the built dashboard",
    ),
    (
        "telemetry_min_interval_ms",
        "500",
        "minimum spacing of telemetry posts per viewer",
    ),
    (
        "max_viewer_labels",
        "200",
        "cap on viewers exported with per-viewer metric labels",
    ),
    (
        "viewer_timeout_s",
        "5",
        "a viewer silent this long is marked gone",
    ),
    (
        "pacer_spin_us",
        "50",
        "the pacer sleeps until this long before a bunch, then spins",
    ),
    (
        "pacer_realtime",
        "true",
        "run pacer threads at SCHED_FIFO priority 10 if permitted",
    ),
    (
        "api_token",
        "",
        "bearer token for the control API (empty: generated at the first start; with dev, API open)",
    ),
    (
        "player_token",
        "",
        "bearer token for players: telemetry and media keys",
    ),
    (
        "dashboard_token",
        "",
        "read-only bearer token (GET, /metrics, WebSocket)",
    ),
    (
        "sam_key",
        "",
        "Ed25519 SAM signing key, 64 hex digits (overrides sam_key_file)",
    ),
    (
        "token_secret_file",
        "",
        "HS256 key (hex) of signed, scoped, expiring tokens (JWT); created (0600) if absent",
    ),
    (
        "sam_key_file",
        "",
        "file of the SAM signing key; made at first start (empty: a key per run)",
    ),
    (
        "dev",
        "false",
        "development mode: tokens optional (none: API open), plain HTTP, keys per run; loopback or a lab only",
    ),
    (
        "state_dir",
        "",
        "where the first start writes tokens, keys and the certificate, 0600 (default $XDG_STATE_HOME/layercast, else ~/.local/state/layercast)",
    ),
    (
        "tls",
        "",
        "serve the API over HTTPS (default true; with dev, false)",
    ),
    (
        "tls_cert",
        "",
        "PEM certificate; with tls_key, made self-signed there if both are absent",
    ),
    ("tls_key", "", "PEM private key of tls_cert"),
    (
        "http_io_timeout_ms",
        "10000",
        "an API connection silent this long (TLS handshake, request) is dropped",
    ),
    (
        "telemetry_per_addr_per_sec",
        "20",
        "telemetry posts per second accepted from one source address",
    ),
    (
        "udp_reports",
        "true",
        "accept viewer reports on each session's feedback port (false: HTTP telemetry only)",
    ),
    (
        "report_budget_bps",
        "2000000",
        "bit/s all viewers' UDP reports may take together (players space reports to fit)",
    ),
    (
        "http_idle_timeout_ms",
        "60000",
        "an API connection with nothing arriving this long is closed (keep-alive, WebSocket)",
    ),
    (
        "http_max_connections",
        "4096",
        "API connections open at once; more are closed at accept",
    ),
    (
        "http_max_websockets",
        "256",
        "live (/api/live) WebSocket clients at once",
    ),
    // Key rotation (crate::media_keys).
    (
        "media_key_refresh_ms",
        "10000",
        "how often players of encrypted sessions fetch the media keys again (a rotation's lead should be at least twice this)",
    ),
];

/// Resolved server-level configuration.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    pub http_addr: SocketAddr,
    pub announce: Option<(Ipv4Addr, u16)>,
    pub announce_interval: Duration,
    pub interface: Ipv4Addr,
    pub ttl: u32,
    pub multicast_loop: bool,
    pub ssm_source: Option<Ipv4Addr>,
    pub group_base: Ipv4Addr,
    pub port_base: u16,
    pub dashboard_dir: PathBuf,
    pub telemetry_min_interval: Duration,
    pub max_viewer_labels: usize,
    pub viewer_timeout: Duration,
    pub pacer_spin: Duration,
    pub pacer_realtime: bool,
    pub sessions: Vec<SessionConfig>,
    /// Bearer tokens (`crate::auth`); the signing key of signed tokens is added from
    /// `token_secret_file` by `crate::provision`, so that loading a configuration writes no
    /// file.
    pub tokens: crate::auth::Tokens,
    pub token_secret_file: Option<PathBuf>,
    /// SAM signing key as hex, if given directly.
    pub sam_key: Option<String>,
    /// SAM signing key file.
    pub sam_key_file: Option<PathBuf>,
    /// Development mode (`--dev`): no tokens needed, plain HTTP by default, keys per run.
    pub dev: bool,
    /// Where the first start writes what it generates (`crate::provision`).
    pub state_dir: PathBuf,
    /// HTTPS instead of HTTP.
    pub tls: bool,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    /// Deadline of an API connection's TLS handshake and request head, and of each write.
    pub http_io_timeout: Duration,
    /// Token-bucket refill of telemetry posts per source address (burst: twice this).
    pub telemetry_per_addr_per_sec: f64,
    /// Idle (read) timeout of an API connection.
    pub http_idle_timeout: Duration,
    pub http_max_connections: usize,
    pub http_max_websockets: usize,
    /// Viewer reports (`crate::reports`) on each session's feedback port.
    pub udp_reports: bool,
    pub report_budget_bps: u32,
    /// Key rotation: how often players fetch media keys again (`crate::media_keys`).
    pub media_key_refresh: Duration,
}

/// One session, as a `[[session]]` table, a `--session` JSON flag or a `POST /api/sessions`
/// body. Unknown fields are errors so that typos do not pass silently.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SessionConfig {
    /// Stable id used in URLs; default: the name, else `s<n>`. Stable across restarts so a
    /// player's announcement URL keeps working.
    pub id: Option<String>,
    pub name: Option<String>,
    /// Congestion-control protocol receivers should run (`lcc`, `era`, `plm`, ...). Default
    /// `lcc`, the product controller (docs/protocols/lcc.md).
    pub protocol: Option<String>,
    /// `synthetic` (constant-rate padding layers). Video sources need the codec crate.
    pub source: Option<String>,
    /// Number of equal layers (with `layer_rate_bps`); ignored if `layer_rates_bps` is given.
    pub layers: Option<usize>,
    /// Rate of each equal layer, bit/s.
    pub layer_rate_bps: Option<u64>,
    /// Per-layer (non-cumulative) rates, bit/s, base first.
    pub layer_rates_bps: Option<Vec<u64>>,
    /// UDP payload bytes of every data packet (ERA's M). Default 512; 600 for video
    /// (`DEFAULT_VIDEO_PACKET`).
    pub packet_size: Option<u16>,
    /// Packets per bunch. Default 2 (packet pairs).
    pub bunch_len: Option<u8>,
    /// Receivers' adaptation interval, ms (ERA's RAI). Default 1000.
    pub adapt_interval_ms: Option<u64>,
    /// First group of this session (layer k on group + k).
    pub group: Option<Ipv4Addr>,
    /// First port (layer k on port + 2k).
    pub port: Option<u16>,
    /// Video parameters for `source = "testpattern"`.
    pub video: Option<VideoConfig>,
    /// An Opus audio track from the source's sound (GStreamer sources; issue 21,
    /// docs/protocols/audio.md). Absent: no audio track.
    pub audio: Option<AudioConfig>,
    /// Encrypt every data packet (ChaCha20-Poly1305 with a group key that players fetch
    /// from the authenticated key API). Needs `api_token`. Default false.
    pub encrypt: Option<bool>,
    /// TFMCC sessions only: accept only receiver reports that carry a valid HMAC under the
    /// receiver's key (derived from a per-session secret that players fetch from the
    /// authenticated key API), and apply the influence limiter to them
    /// (docs/security.md §4). Needs `api_token`. Default false.
    pub auth_reports: Option<bool>,
}

/// The audio track of a session (`"audio": {"kbps": 64}`; every field optional).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AudioConfig {
    /// Opus bit rate, kbit/s, 32..=128. Default 64.
    pub kbps: Option<u32>,
    /// 1 or 2. Default 2.
    pub channels: Option<u8>,
    /// In-band FEC (each packet carries a coarse copy of the one before). Default true.
    pub fec: Option<bool>,
}

impl AudioConfig {
    fn resolve(&self, key: &dyn Fn(&str) -> String) -> Result<crate::media::audio::AudioSettings> {
        let kbps = self.kbps.unwrap_or(64);
        if !(32..=128).contains(&kbps) {
            return Err(Error::config(
                &key("audio.kbps"),
                format!("{kbps} outside 32..=128"),
            ));
        }
        let channels = self.channels.unwrap_or(2);
        if !(1..=2).contains(&channels) {
            return Err(Error::config(
                &key("audio.channels"),
                format!("{channels}: 1 or 2"),
            ));
        }
        Ok(crate::media::audio::AudioSettings {
            channels,
            bitrate: kbps * 1000,
            inband_fec: self.fec.unwrap_or(true),
        })
    }
}

/// The SVC encode of a video source. Layers are the ladder's cells in spatial-major order
/// (`codec::ladder::LayerLadder::spatial_major`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VideoConfig {
    /// Top spatial layer size (even). Default 1280x720 (docs/server.md "The default ladder").
    pub width: Option<u32>,
    pub height: Option<u32>,
    /// Frames per second. Default 30.
    pub fps: Option<u32>,
    /// Spatial and temporal layers, 1..=3 each. Default 3 and 3.
    pub spatial: Option<usize>,
    pub temporal: Option<usize>,
    /// Multiplies the codec's default 720p30 L3T3 cell rates (`codec::ladder`). Default 1.
    pub kbps_scale: Option<f64>,
    /// Stamp each source frame with a QR code of its frame number and capture time (unix ns),
    /// GStreamer `qroverlay` in-process, any video source (see docs/server.md). Default false.
    pub qroverlay: Option<bool>,
    /// Write the source frames (after the stamp, before the encoder) to `DIR/reference.y4m`
    /// at the top resolution; frame n of the file is frame number n. Default: none.
    pub reference_dir: Option<String>,
    /// Seconds between key pictures: the longest a receiver that joins mid-stream waits
    /// before it can decode the base layer (multicast receivers cannot ask for one). Default 2.
    pub keyframe_interval_s: Option<f64>,
    /// Announced layer rate over what the layer's frames occupy on the wire at the encoder's
    /// cell budget (`video_layer_rate`), 1.0..=5.0, for the layers above temporal layer 0; the
    /// slots media leaves free carry FEC repair (RTP/payload headers are in the occupancy;
    /// this covers encoder overshoot and the time a frame takes to drain). Default 1.1
    /// (`DEFAULT_RATE_HEADROOM`, docs/server.md "Layer rates": 1.15 put the small layers
    /// above 25 % repair, the issue-19 bound).
    pub rate_headroom: Option<f64>,
    /// The same for the temporal-layer-0 layers (S*T0), which carry the key pictures
    /// (1.0..=5.0; below `rate_headroom` it is raised to it). Default 1.1
    /// (`DEFAULT_KEY_HEADROOM`): key pictures are budgeted by the encoder (base-layer intra cap
    /// 150 %, frame dropping after an overshoot) and their queueing is measured, docs/server.md.
    pub key_headroom: Option<f64>,
    /// Pacer burst (1.0..=16.0): a layer with queued media may send its bunches at up to this
    /// multiple of its announced rate, running ahead of its constant-rate schedule by at most
    /// the burst credit (`pacer_credit_ms`); the padding slots it ran ahead of are then
    /// skipped, so the mean rate stays the announced one. 1 = strict constant-rate pacing.
    /// Default 8 (`DEFAULT_PACER_PEAK`, docs/server.md "Pacer burst").
    pub pacer_peak: Option<f64>,
    /// Largest lead of a layer over its constant-rate schedule, ms (1..=1000), further capped
    /// at one frame period of the layer's temporal layer. A layer's rate over any window W
    /// deviates from its announced rate by at most credit / W. Default 120
    /// (`DEFAULT_PACER_CREDIT_MS`: 2 % over the 6-s window of the per-layer rate check).
    pub pacer_credit_ms: Option<u64>,
}

/// A resolved video encode.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedVideo {
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    pub spatial: usize,
    pub temporal: usize,
    /// `cell_kbps[s][t]`, the encoder's per-cell budget.
    pub cell_kbps: Vec<Vec<u32>>,
    /// Frames between key pictures.
    pub keyframe_interval: u32,
    /// Stamp frame number and capture time with `qroverlay`.
    pub qroverlay: bool,
    /// Where to write `reference.y4m`, if anywhere.
    pub reference_dir: Option<std::path::PathBuf>,
    /// Announced rate / encoder budget of the layers above temporal layer 0.
    pub rate_headroom: f64,
    /// Announced rate / encoder budget of the temporal-layer-0 layers (>= `rate_headroom`).
    pub key_headroom: f64,
    /// Peak rate / announced rate of a layer's media bunches (1 = constant-rate pacing).
    pub pacer_peak: f64,
    /// Largest lead over the constant-rate schedule (before the one-frame-period cap).
    pub pacer_credit: Duration,
}

/// Default per-cell rates of the 720p30 L3T3 ladder (kbit/s).
const L3T3_CELL_KBPS: [[u32; 3]; 3] = codec::ladder::DEFAULT_L3T3_CELL_KBPS;

impl VideoConfig {
    fn resolve(&self, key: &dyn Fn(&str) -> String) -> Result<ResolvedVideo> {
        let (w, h) = (self.width.unwrap_or(1280), self.height.unwrap_or(720));
        if w < 64 || h < 64 || w > 1920 || h > 1088 || w % 2 == 1 || h % 2 == 1 {
            return Err(Error::config(
                &key("video.width"),
                format!("{w}x{h}: even, 64..=1920 x 64..=1088"),
            ));
        }
        let fps = self.fps.unwrap_or(30);
        if !(1..=60).contains(&fps) {
            return Err(Error::config(
                &key("video.fps"),
                format!("{fps} outside 1..=60"),
            ));
        }
        let (ns, nt) = (self.spatial.unwrap_or(3), self.temporal.unwrap_or(3));
        if !(1..=3).contains(&ns) || !(1..=3).contains(&nt) {
            return Err(Error::config(
                &key("video.spatial"),
                format!("L{ns}T{nt}: 1..=3 each"),
            ));
        }
        let scale = self.kbps_scale.unwrap_or(1.0);
        if !(0.01..=10.0).contains(&scale) {
            return Err(Error::config(
                &key("video.kbps_scale"),
                format!("{scale} outside 0.01..=10"),
            ));
        }
        let cell_kbps = (0..ns)
            .map(|s| {
                (0..nt)
                    .map(|t| ((L3T3_CELL_KBPS[3 - ns + s][t] as f64 * scale).round() as u32).max(1))
                    .collect()
            })
            .collect();
        let ki = self.keyframe_interval_s.unwrap_or(2.0);
        if !(0.1..=60.0).contains(&ki) {
            return Err(Error::config(
                &key("video.keyframe_interval_s"),
                format!("{ki} outside 0.1..=60"),
            ));
        }
        let keyframe_interval = ((ki * fps as f64).round() as u32).max(1);
        let rate_headroom = self.rate_headroom.unwrap_or(DEFAULT_RATE_HEADROOM);
        if !(1.0..=5.0).contains(&rate_headroom) {
            return Err(Error::config(
                &key("video.rate_headroom"),
                format!("{rate_headroom} outside 1..=5"),
            ));
        }
        let pacer_peak = self.pacer_peak.unwrap_or(DEFAULT_PACER_PEAK);
        if !(1.0..=16.0).contains(&pacer_peak) {
            return Err(Error::config(
                &key("video.pacer_peak"),
                format!("{pacer_peak} outside 1..=16"),
            ));
        }
        let key_headroom = self.key_headroom.unwrap_or(DEFAULT_KEY_HEADROOM);
        if !(1.0..=5.0).contains(&key_headroom) {
            return Err(Error::config(
                &key("video.key_headroom"),
                format!("{key_headroom} outside 1..=5"),
            ));
        }
        let credit_ms = self.pacer_credit_ms.unwrap_or(DEFAULT_PACER_CREDIT_MS);
        if !(1..=1000).contains(&credit_ms) {
            return Err(Error::config(
                &key("video.pacer_credit_ms"),
                format!("{credit_ms} outside 1..=1000"),
            ));
        }
        Ok(ResolvedVideo {
            width: w,
            height: h,
            fps,
            spatial: ns,
            temporal: nt,
            cell_kbps,
            keyframe_interval,
            qroverlay: self.qroverlay.unwrap_or(false),
            reference_dir: match self.reference_dir.as_deref() {
                None | Some("") => None,
                Some(d) => Some(std::path::PathBuf::from(d)),
            },
            rate_headroom,
            key_headroom: key_headroom.max(rate_headroom),
            pacer_peak,
            pacer_credit: Duration::from_millis(credit_ms),
        })
    }
}

/// Frames per second carried by temporal layer `t` of `nt` (patterns 0, 01, 0212).
pub fn temporal_fps(fps: u32, nt: usize, t: usize) -> f64 {
    let f = fps as f64;
    match (nt, t) {
        (1, _) => f,
        (2, _) => f / 2.0,
        (_, 0) | (_, 1) => f / 4.0,
        _ => f / 2.0,
    }
}

/// Default `packet_size` of video sessions: small enough that the smallest cells of the default
/// ladder fill about two packets per frame (docs/server.md "The default ladder": at 1200 bytes
/// the 180p and 360p TL1/TL2 layers were 26-36 % repair and padding).
pub const DEFAULT_VIDEO_PACKET: u16 = 600;

/// Default `video.pacer_peak`.
pub const DEFAULT_PACER_PEAK: f64 = 8.0;

/// Default `video.pacer_credit_ms`.
pub const DEFAULT_PACER_CREDIT_MS: u64 = 120;

/// Default `video.key_headroom`.
pub const DEFAULT_KEY_HEADROOM: f64 = 1.1;

/// Default `video.rate_headroom`.
pub const DEFAULT_RATE_HEADROOM: f64 = 1.1;

/// Bytes of a video packet that carry no VP9 payload: the RTP header (12), the cc extension
/// block (16) and the room kept for the FEC header ([`codec::fec::MAX_HEADER_LEN`]), so that a
/// repair packet is no longer than the media packets it protects (docs/protocols/fec.md).
pub const VIDEO_PACKET_OVERHEAD: u16 = 12 + 16 + codec::fec::MAX_HEADER_LEN as u16;

/// Announced rate of a video layer: `headroom` times what the cell's frames occupy on the wire
/// at its budget (docs/server.md "Layer rates"): the budget in packets of `packet_size` bytes
/// (`packet_size - VIDEO_PACKET_OVERHEAD` of VP9 payload each), plus `bunch_len / 2` packets
/// per frame: a frame's last packet is on average half full, and a bunch its frame leaves
/// short is completed with repair (FEC) packets, on average half a bunch less one packet.
pub fn video_layer_rate(
    cell_kbps: u32,
    layer_fps: f64,
    packet_size: u16,
    bunch_len: u8,
    headroom: f64,
) -> u64 {
    let payload_bits = 8.0 * packet_size.saturating_sub(VIDEO_PACKET_OVERHEAD).max(1) as f64;
    let per_frame =
        cell_kbps as f64 * 1000.0 / layer_fps.max(0.01) / payload_bits + bunch_len as f64 / 2.0;
    (headroom * layer_fps * per_frame * 8.0 * packet_size as f64).round() as u64
}

/// Checks that a session may announce `protocol`: TFMCC, or a receiver-driven controller whose
/// sender layout this server sends (constant-rate cumulative layers). RLC, FLID-DL and WEBRC
/// need synchronisation points, dynamic layers or waves, which the pacer does not send: their
/// receivers would silently run against a sender that does not exist, so they are refused.
pub fn check_protocol(protocol: &str) -> std::result::Result<(), String> {
    use congestion::factory::{find, SenderLayout, LIVE_CONTROLLERS};
    if protocol == "tfmcc" {
        return Ok(());
    }
    #[cfg(feature = "research")]
    let extra = baselines::CONTROLLERS;
    #[cfg(not(feature = "research"))]
    let extra: &[congestion::factory::ControllerSpec] = &[];
    let spec = find(protocol, LIVE_CONTROLLERS, extra).map_err(|e| format!("{e}, tfmcc"))?;
    match spec.layout {
        SenderLayout::ConstantLayers => Ok(()),
        other => Err(format!(
            "{protocol} needs a sender with {}, which this server does not send; use lcc, era, plm or tfmcc",
            match other {
                SenderLayout::SyncPoints => "synchronisation-point bursts",
                SenderLayout::DynamicLayers => "dynamic layers",
                SenderLayout::Waves => "waves",
                SenderLayout::ConstantLayers => "constant layers",
            }
        )),
    }
}

/// A session config with every default filled in and every value checked.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedSession {
    pub id: String,
    pub name: String,
    pub protocol: String,
    pub source: String,
    pub rates_bps: Vec<u64>,
    pub packet_size: u16,
    pub bunch_len: u8,
    pub adapt_interval: Duration,
    pub group: Ipv4Addr,
    pub port: u16,
    pub video: Option<ResolvedVideo>,
    /// The audio track (issue 21), if configured.
    pub audio: Option<crate::media::audio::AudioSettings>,
    pub encrypt: bool,
    pub auth_reports: bool,
}

/// Smallest packet: 12-byte RTP header + 16-byte cc extension + 1 byte of payload.
pub const MIN_PACKET: u16 = 29;
/// Largest UDP payload that fits a 1500-byte MTU without fragmentation.
pub const MAX_PACKET: u16 = 1472;

impl SessionConfig {
    /// Fills defaults and validates; `ctx` names the session in errors (`session[0]`, `body`).
    pub fn resolve(
        &self,
        ctx: &str,
        default_id: &str,
        default_group: Ipv4Addr,
        default_port: u16,
    ) -> Result<ResolvedSession> {
        let key = |k: &str| format!("{ctx}.{k}");
        let protocol = self.protocol.clone().unwrap_or_else(|| "lcc".into());
        if let Err(why) = check_protocol(&protocol) {
            return Err(Error::config(&key("protocol"), why));
        }
        let source = self.source.clone().unwrap_or_else(|| "synthetic".into());
        check_source(&source).map_err(|reason| Error::config(&key("source"), reason))?;
        let video = if source == "synthetic" {
            None
        } else if crate::video::FrameSource::from_source(&source).is_some() {
            Some(self.video.clone().unwrap_or_default().resolve(&key)?)
        } else {
            return Err(Error::config(
                &key("source"),
                format!("{source:?}: one of synthetic, testpattern, gst-testpattern, file://PATH, http://, rtsp://, srt:// URIs, v4l2:///dev/videoN"),
            ));
        };
        let bunch_len = self.bunch_len.unwrap_or(2);
        if bunch_len == 0 || bunch_len > 64 {
            return Err(Error::config(
                &key("bunch_len"),
                format!("{bunch_len} outside 1..=64"),
            ));
        }
        let default_packet = if video.is_some() {
            DEFAULT_VIDEO_PACKET
        } else {
            512
        };
        let rates = match (&video, &self.layer_rates_bps) {
            (Some(v), _) => {
                let m = self.packet_size.unwrap_or(default_packet);
                let mut r = Vec::new();
                for row in &v.cell_kbps {
                    for (t, &c) in row.iter().enumerate() {
                        r.push(video_layer_rate(
                            c,
                            temporal_fps(v.fps, v.temporal, t),
                            m,
                            bunch_len,
                            if t == 0 {
                                v.key_headroom
                            } else {
                                v.rate_headroom
                            },
                        ));
                    }
                }
                r
            }
            (None, Some(r)) => r.clone(),
            (None, None) => {
                // Checked before the allocation: a `layers` of 10^11 from a file, a flag or
                // a POST body must be an error, not an allocation failure that aborts the
                // process (found by the config_file fuzz target).
                let n = self.layers.unwrap_or(10);
                if !(1..=255).contains(&n) {
                    return Err(Error::config(
                        &key("layers"),
                        format!("{n} layers; need 1..=255"),
                    ));
                }
                vec![self.layer_rate_bps.unwrap_or(100_000); n]
            }
        };
        if rates.is_empty() || rates.len() > 255 {
            return Err(Error::config(
                &key("layers"),
                format!("{} layers; need 1..=255", rates.len()),
            ));
        }
        if let Some(i) = rates
            .iter()
            .position(|&r| !(1_000..=1_000_000_000).contains(&r))
        {
            return Err(Error::config(
                &key("layer_rates_bps"),
                format!("layer {i} rate {} outside 1000..=1e9 bit/s", rates[i]),
            ));
        }
        let packet_size = self.packet_size.unwrap_or(default_packet);
        if video.is_some() && packet_size < 200 {
            return Err(Error::config(
                &key("packet_size"),
                "video needs at least 200 bytes",
            ));
        }
        if !(MIN_PACKET..=MAX_PACKET).contains(&packet_size) {
            return Err(Error::config(
                &key("packet_size"),
                format!("{packet_size} outside {MIN_PACKET}..={MAX_PACKET} bytes"),
            ));
        }
        let encrypt = self.encrypt.unwrap_or(false);
        if encrypt && packet_size < 64 {
            return Err(Error::config(
                &key("packet_size"),
                "encrypted packets need at least 64 bytes (22 go to the AEAD)",
            ));
        }
        let rai = self.adapt_interval_ms.unwrap_or(1000);
        if !(50..=60_000).contains(&rai) {
            return Err(Error::config(
                &key("adapt_interval_ms"),
                format!("{rai} outside 50..=60000"),
            ));
        }
        let group = self.group.unwrap_or(default_group);
        if !group.is_multicast() {
            return Err(Error::config(
                &key("group"),
                format!("{group} is not multicast"),
            ));
        }
        let last = u32::from(group).checked_add(rates.len() as u32 - 1);
        if !last.is_some_and(|l| Ipv4Addr::from(l).is_multicast()) {
            return Err(Error::config(
                &key("group"),
                format!(
                    "{} layers from {group} leave the multicast range",
                    rates.len()
                ),
            ));
        }
        let port = self.port.unwrap_or(default_port);
        if port == 0 || (port as usize) + 2 * (rates.len() - 1) > 65_535 {
            return Err(Error::config(
                &key("port"),
                format!("{port} (+2 per layer) does not fit in 1..=65535"),
            ));
        }
        let name = self.name.clone().unwrap_or_else(|| default_id.to_string());
        let id = self
            .id
            .clone()
            .or(self.name.clone())
            .unwrap_or_else(|| default_id.into());
        if id.is_empty()
            || id.len() > 64
            || !id
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(Error::config(
                &key("id"),
                format!("{id:?}: use 1..64 characters of [A-Za-z0-9_-]"),
            ));
        }
        // Issue 21: the audio track needs a GStreamer source and a layered session.
        let audio = match &self.audio {
            None => None,
            Some(a) => {
                let settings = a.resolve(&key)?;
                let gst = matches!(
                    crate::video::FrameSource::from_source(&source),
                    Some(crate::video::FrameSource::Gst(_))
                );
                if !gst {
                    return Err(Error::config(
                        &key("audio"),
                        "needs a GStreamer source (gst-testpattern, a URI, a capture device)",
                    ));
                }
                if protocol == "tfmcc" {
                    return Err(Error::config(
                        &key("audio"),
                        "not carried by TFMCC sessions yet",
                    ));
                }
                Some(settings)
            }
        };
        Ok(ResolvedSession {
            id,
            name,
            protocol,
            source,
            rates_bps: rates,
            packet_size,
            bunch_len,
            adapt_interval: Duration::from_millis(rai),
            group,
            port,
            video,
            audio,
            encrypt,
            auth_reports: self.auth_reports.unwrap_or(false),
        })
    }
}

/// Where a raw value came from, for error messages.
fn parse_val<T: std::str::FromStr>(key: &str, raw: &str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    raw.trim()
        .parse::<T>()
        .map_err(|e| Error::config(key, format!("{raw:?}: {e}")))
}

fn parse_bool(key: &str, raw: &str) -> Result<bool> {
    match raw.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "0" | "false" | "no" | "off" => Ok(false),
        _ => Err(Error::config(key, format!("{raw:?} is not a boolean"))),
    }
}

/// Result of parsing the command line: either run with a config, or print help.
pub enum Cli {
    Run(Box<ServerConfig>),
    Help(String),
}

/// Builds the configuration from `args` (without the program name) and `env`. Reads the
/// config file, writes nothing.
pub fn load(args: &[String], env: &BTreeMap<String, String>) -> Result<Cli> {
    load_inner(args, env, None)
}

/// The configuration a config file's `text` alone gives (no flags, no environment): the
/// config-file fuzz target's entry.
pub fn load_file_text(text: &str) -> Result<Cli> {
    let args = ["--config".to_string(), "config.toml".to_string()];
    load_inner(&args, &BTreeMap::new(), Some(text))
}

fn load_inner(
    args: &[String],
    env: &BTreeMap<String, String>,
    file_text: Option<&str>,
) -> Result<Cli> {
    let mut flags: BTreeMap<String, String> = BTreeMap::new();
    let mut flag_sessions: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        if a == "-h" || a == "--help" {
            return Ok(Cli::Help(help()));
        }
        if a == "--dev" {
            // The one flag without a value: the explicit opt-out of the safe defaults.
            flags.insert("dev".into(), "true".into());
            i += 1;
            continue;
        }
        let Some(body) = a.strip_prefix("--") else {
            return Err(Error::config(
                a,
                "unexpected argument (flags are --key value)",
            ));
        };
        let (k, v) = match body.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => {
                i += 1;
                let v = args
                    .get(i)
                    .ok_or_else(|| Error::config(body, "flag needs a value"))?;
                (body.to_string(), v.clone())
            }
        };
        let k = k.replace('-', "_");
        if k == "session" {
            flag_sessions.push(v);
        } else if KEYS.iter().any(|(n, _, _)| *n == k) {
            flags.insert(k, v);
        } else {
            return Err(Error::config(&k, "unknown flag (see --help)"));
        }
        i += 1;
    }
    // Layer 1: defaults; 2: file; 3: env; 4: flags.
    let mut vals: BTreeMap<String, String> = KEYS
        .iter()
        .map(|(k, d, _)| (k.to_string(), d.to_string()))
        .collect();
    let config_path = flags
        .get("config")
        .cloned()
        .or_else(|| env.get("LAYERCAST_CONFIG").cloned());
    let mut sessions = Vec::new();
    if let Some(path) = config_path.filter(|p| !p.is_empty()) {
        let text = match file_text {
            Some(t) => t.to_string(),
            None => std::fs::read_to_string(&path).map_err(|e| Error::ConfigFile {
                path: path.clone(),
                reason: e.to_string(),
            })?,
        };
        let (file_vals, file_sessions) = parse_file(&path, &text)?;
        vals.extend(file_vals);
        sessions = file_sessions;
    }
    for (k, _, _) in KEYS {
        if let Some(v) = env.get(&format!("LAYERCAST_{}", k.to_ascii_uppercase())) {
            vals.insert(k.to_string(), v.clone());
        }
    }
    vals.extend(flags);
    for (n, s) in flag_sessions.iter().enumerate() {
        let c: SessionConfig = serde_json::from_str(s)
            .map_err(|e| Error::config(&format!("--session #{n}"), e.to_string()))?;
        sessions.push(c);
    }
    let v = |k: &str| vals.get(k).map(String::as_str).unwrap_or("");
    let announce = if v("announce").is_empty() {
        None
    } else {
        let sa: std::net::SocketAddrV4 = parse_val("announce", v("announce"))?;
        if !sa.ip().is_multicast() {
            return Err(Error::config(
                "announce",
                format!("{} is not multicast", sa.ip()),
            ));
        }
        Some((*sa.ip(), sa.port()))
    };
    let ms = |k: &str| -> Result<Duration> {
        let n: u64 = parse_val(k, v(k))?;
        if n == 0 {
            return Err(Error::config(k, "must be > 0"));
        }
        Ok(Duration::from_millis(n))
    };
    let group_base: Ipv4Addr = parse_val("group_base", v("group_base"))?;
    if !group_base.is_multicast() {
        return Err(Error::config(
            "group_base",
            format!("{group_base} is not multicast"),
        ));
    }
    let ttl: u32 = parse_val("ttl", v("ttl"))?;
    if ttl == 0 || ttl > 255 {
        return Err(Error::config("ttl", format!("{ttl} outside 1..=255")));
    }
    let ssm = v("ssm_source");
    let dev = parse_bool("dev", v("dev"))?;
    let cfg = ServerConfig {
        http_addr: parse_val("http_addr", v("http_addr"))?,
        announce,
        announce_interval: ms("announce_interval_ms")?,
        interface: parse_val("interface", v("interface"))?,
        ttl,
        multicast_loop: parse_bool("loop", v("loop"))?,
        ssm_source: if ssm.is_empty() {
            None
        } else {
            Some(parse_val("ssm_source", ssm)?)
        },
        group_base,
        port_base: parse_val("port_base", v("port_base"))?,
        dashboard_dir: PathBuf::from(v("dashboard_dir")),
        telemetry_min_interval: ms("telemetry_min_interval_ms")?,
        max_viewer_labels: parse_val("max_viewer_labels", v("max_viewer_labels"))?,
        viewer_timeout: Duration::from_secs(parse_val("viewer_timeout_s", v("viewer_timeout_s"))?),
        pacer_spin: Duration::from_micros(parse_val("pacer_spin_us", v("pacer_spin_us"))?),
        pacer_realtime: parse_bool("pacer_realtime", v("pacer_realtime"))?,
        sessions,
        tokens: crate::auth::Tokens::new(v("api_token"), v("player_token"), v("dashboard_token"))?,
        token_secret_file: Some(v("token_secret_file"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        sam_key: Some(v("sam_key").to_string()).filter(|s| !s.is_empty()),
        sam_key_file: Some(v("sam_key_file"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        dev,
        state_dir: state_dir(v("state_dir"), env),
        tls: match v("tls") {
            "" => !dev,
            t => parse_bool("tls", t)?,
        },
        http_io_timeout: ms("http_io_timeout_ms")?,
        tls_cert: Some(v("tls_cert"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        tls_key: Some(v("tls_key"))
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
        telemetry_per_addr_per_sec: {
            let r: f64 = parse_val(
                "telemetry_per_addr_per_sec",
                v("telemetry_per_addr_per_sec"),
            )?;
            if !(r > 0.0 && r <= 100_000.0) {
                return Err(Error::config(
                    "telemetry_per_addr_per_sec",
                    "must be in (0, 100000]",
                ));
            }
            r
        },
        http_idle_timeout: ms("http_idle_timeout_ms")?,
        http_max_connections: parse_val("http_max_connections", v("http_max_connections"))?,
        http_max_websockets: parse_val("http_max_websockets", v("http_max_websockets"))?,
        udp_reports: parse_bool("udp_reports", v("udp_reports"))?,
        report_budget_bps: parse_val("report_budget_bps", v("report_budget_bps"))?,
        media_key_refresh: ms("media_key_refresh_ms")?.max(Duration::from_secs(1)),
    };
    if !cfg.dev && !cfg.tls && !cfg.http_addr.ip().is_loopback() {
        return Err(Error::config(
            "tls",
            format!(
                "false on {}: bearer tokens would cross the network in clear; \
                 listen on a loopback address (behind a TLS proxy), keep tls on, or run with --dev",
                cfg.http_addr
            ),
        ));
    }
    Ok(Cli::Run(Box::new(cfg)))
}

/// The state directory: `state_dir` if set, else `$XDG_STATE_HOME/layercast`, else
/// `$HOME/.local/state/layercast` (XDG Base Directory), else `./layercast-state`.
pub fn state_dir(given: &str, env: &BTreeMap<String, String>) -> PathBuf {
    let non_empty = |k: &str| env.get(k).filter(|v| !v.is_empty()).map(PathBuf::from);
    if !given.is_empty() {
        PathBuf::from(given)
    } else if let Some(x) = non_empty("XDG_STATE_HOME") {
        x.join("layercast")
    } else if let Some(h) = non_empty("HOME") {
        h.join(".local/state/layercast")
    } else {
        PathBuf::from("layercast-state")
    }
}

/// A session `source` is a name (`synthetic`, `testpattern`, `gst-testpattern`) or one URI
/// that [`crate::media::source::parse`] accepts: its allow-list of schemes (F1) is the only
/// one, and the source is built from elements, never pipeline text. The URI must also parse
/// as RFC 3986 says, so that what GStreamer's `uridecodebin` receives is a URI.
pub fn check_source(source: &str) -> std::result::Result<(), String> {
    if matches!(source, "synthetic" | "testpattern") {
        return Ok(());
    }
    crate::media::source::parse(source).map_err(|why| format!("{source:?}: {why}"))?;
    if source != "gst-testpattern" {
        url::Url::parse(source).map_err(|e| format!("{source:?} is not a URI: {e}"))?;
    }
    Ok(())
}

/// Splits a TOML file into server-level scalars (as strings) and `[[session]]` tables.
fn parse_file(path: &str, text: &str) -> Result<(BTreeMap<String, String>, Vec<SessionConfig>)> {
    let file_err = |reason: String| Error::ConfigFile {
        path: path.to_string(),
        reason,
    };
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| file_err(e.to_string()))?;
    let mut vals = BTreeMap::new();
    let mut sessions = Vec::new();
    for (k, v) in table {
        if k == "session" {
            let arr = v
                .as_array()
                .ok_or_else(|| Error::config("session", "use [[session]] tables"))?;
            for (n, s) in arr.iter().enumerate() {
                let c: SessionConfig = s.clone().try_into().map_err(|e: toml::de::Error| {
                    Error::config(&format!("session[{n}]"), e.to_string())
                })?;
                sessions.push(c);
            }
            continue;
        }
        if k == "config" || !KEYS.iter().any(|(n, _, _)| *n == k) {
            return Err(Error::config(&k, format!("unknown key in {path}")));
        }
        let s = match v {
            toml::Value::String(s) => s,
            toml::Value::Integer(i) => i.to_string(),
            toml::Value::Boolean(b) => b.to_string(),
            toml::Value::Float(f) => f.to_string(),
            other => return Err(Error::config(&k, format!("unsupported value {other:?}"))),
        };
        vals.insert(k, s);
    }
    Ok((vals, sessions))
}

fn help() -> String {
    let mut s = String::from(
        "layercast-server: layered multicast sender, session announcements, HTTP API\n\n\
         Precedence: --flag > LAYERCAST_KEY env > config file > default.\n\
         Safe by default: tokens required, HTTPS, generated at the first start into state_dir;\n\
         --dev (no value needed) opts out, for loopback and labs only (docs/security.md).\n\n",
    );
    for (k, d, h) in KEYS {
        s.push_str(&format!(
            "  --{:<28} {h} [default: {d:?}; env LAYERCAST_{}]\n",
            k.replace('_', "-"),
            k.to_ascii_uppercase()
        ));
    }
    s.push_str(
        "  --session JSON                 add a session (same schema as POST /api/sessions);\n\
         \x20                                repeatable; the file may hold [[session]] tables\n",
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// F1: the pipeline-injection payload of the review and its variants are refused before
    /// any source is built; plain URIs pass.
    #[test]
    fn sources_are_uris_with_allowed_schemes_and_no_pipeline_text() {
        for ok in [
            "synthetic",
            "testpattern",
            "gst-testpattern",
            "file:///srv/media/talk.mkv",
            "rtsp://cam.local:554/stream1",
            "http://media.local/live.ts?token=abc&x=1",
            "v4l2:///dev/video0",
            "v4l2:///dev/video0?alsa=hw:1,0",
            "rtsps://cam.local/stream1",
            // A comma is a URI sub-delimiter; as a `uri` property it adds nothing.
            "file:///a,b",
        ] {
            assert!(check_source(ok).is_ok(), "{ok}");
        }
        for bad in [
            "file:///x filesrc location=/etc/layercast/server.toml ! tcpclientsink host=h port=4444 videotestsrc",
            "file:///x!filesink",
            "file:///x\tfilesrc",
            "v4l2:///etc/passwd",
            "v4l2:///dev/video0?alsa=hw:1 ! filesink",
            "rtsp://h/x location=y",
            "data:text/plain,hi",
            "gopher://h/",
            "appsrc",
            "file:///x\"y",
        ] {
            assert!(check_source(bad).is_err(), "{bad}");
        }
    }

    fn args(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    fn run(a: &[&str], env: &[(&str, &str)]) -> Result<ServerConfig> {
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match load(&args(a), &env)? {
            Cli::Run(c) => Ok(*c),
            Cli::Help(_) => panic!("help"),
        }
    }

    #[test]
    fn protocols_without_their_sender_layout_are_refused() {
        for ok in ["lcc", "era", "plm", "tfmcc", "PLM"] {
            assert!(check_protocol(ok).is_ok(), "{ok}");
        }
        for bad in ["rlc", "flid", "webrc", "nope"] {
            let why = check_protocol(bad).unwrap_err();
            assert!(why.contains(bad), "{why}");
        }
        #[cfg(feature = "research")]
        {
            assert!(check_protocol("delay").is_ok());
            let why = check_protocol("rlc").unwrap_err();
            assert!(why.contains("synchronisation-point bursts"), "{why}");
            assert!(check_protocol("flid")
                .unwrap_err()
                .contains("dynamic layers"));
        }
    }

    #[test]
    fn precedence_flag_over_env_over_file() {
        let dir = std::env::temp_dir().join(format!("lc-cfg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.toml");
        std::fs::write(
            &f,
            "ttl = 3\nhttp_addr = \"127.0.0.1:9001\"\nport_base = 6000\n[[session]]\nname = \"a\"\nlayers = 4\n",
        )
        .unwrap();
        let path = f.to_str().unwrap();
        let c = run(&["--config", path], &[]).unwrap();
        assert_eq!(c.ttl, 3);
        assert_eq!(c.port_base, 6000);
        assert_eq!(c.sessions.len(), 1);
        let c = run(&["--config", path], &[("LAYERCAST_TTL", "4")]).unwrap();
        assert_eq!(c.ttl, 4);
        let c = run(&["--config", path, "--ttl=5"], &[("LAYERCAST_TTL", "4")]).unwrap();
        assert_eq!(c.ttl, 5);
        assert_eq!(c.http_addr.port(), 9001);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn errors_name_the_key() {
        let e = run(&["--ttl", "0"], &[]).unwrap_err().to_string();
        assert!(e.contains("`ttl`"), "{e}");
        let e = run(&[], &[("LAYERCAST_HTTP_ADDR", "nope")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`http_addr`"), "{e}");
        let e = run(&["--bogus", "1"], &[]).unwrap_err().to_string();
        assert!(e.contains("`bogus`"), "{e}");
        let e = run(&["--announce", "10.0.0.1:5000"], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("`announce`"), "{e}");
        let e = run(&["--session", "{\"layerz\":3}"], &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("--session #0"), "{e}");
    }

    #[test]
    fn session_defaults_and_validation() {
        let g = Ipv4Addr::new(239, 255, 77, 0);
        let r = SessionConfig::default()
            .resolve("s", "s1", g, 5004)
            .unwrap();
        assert_eq!(r.rates_bps, vec![100_000; 10]);
        assert_eq!((r.packet_size, r.bunch_len, r.id.as_str()), (512, 2, "s1"));
        let bad = SessionConfig {
            packet_size: Some(2000),
            ..Default::default()
        };
        let e = bad.resolve("body", "x", g, 5004).unwrap_err().to_string();
        assert!(e.contains("body.packet_size"), "{e}");
        // A huge layer count is refused before anything is allocated for it (it aborted the
        // process before: the config_file fuzz target's finding).
        let huge = SessionConfig {
            layers: Some(100_009_551_615),
            ..Default::default()
        };
        let e = huge.resolve("body", "x", g, 5004).unwrap_err().to_string();
        assert!(e.contains("body.layers"), "{e}");
        let bad = SessionConfig {
            protocol: Some("tcp".into()),
            ..Default::default()
        };
        assert!(bad
            .resolve("b", "x", g, 5004)
            .unwrap_err()
            .to_string()
            .contains("b.protocol"));
        let bad = SessionConfig {
            group: Some(Ipv4Addr::new(239, 255, 255, 255)),
            layers: Some(2),
            ..Default::default()
        };
        assert!(bad
            .resolve("b", "x", g, 5004)
            .unwrap_err()
            .to_string()
            .contains("b.group"));
    }

    /// Default video layer rates at 640x360@15 L3T3 (kbps_scale 0.5, 1200-B pairs): the
    /// budget times 2, plus one bunch (2 x 1200 B) per frame of the layer; the TL0 layers
    /// follow `key_headroom`; and the new keys' errors name them.
    #[test]
    fn video_layer_rates_and_pacing_keys() {
        let g = Ipv4Addr::new(239, 255, 77, 0);
        let v = SessionConfig {
            source: Some("testpattern".into()),
            ..Default::default()
        }
        .resolve("s", "s1", g, 5004)
        .unwrap();
        // The default ladder (docs/server.md "The default ladder"): 720p30 L3T3, 600-byte
        // pairs, headroom 1.1 x (budget in packets of 556 payload bytes + one packet per
        // frame); TL0/TL1 at 7.5 fps, TL2 at 15 fps.
        assert_eq!(v.packet_size, 600);
        assert_eq!(
            v.rates_bps,
            vec![146_435, 134_564, 269_128, 306_686, 146_435, 239_452, 1_535_283, 538_161, 577_761]
        );
        let rule = |c: f64, fps: f64, h: f64| {
            (h * fps * (c / fps / (8.0 * 556.0) + 1.0) * 4800.0).round() as u64
        };
        assert_eq!(v.rates_bps[6], rule(1_260_000.0, 7.5, 1.1));
        assert_eq!(v.rates_bps[8], rule(420_000.0, 15.0, 1.1));
        // rate_headroom 1.3 raises the TL0 layers' key_headroom (1.1) to it too.
        let v13 = SessionConfig {
            source: Some("testpattern".into()),
            video: Some(VideoConfig {
                rate_headroom: Some(1.3),
                ..Default::default()
            }),
            ..Default::default()
        }
        .resolve("s", "s1", g, 5004)
        .unwrap();
        assert_eq!(
            &v13.rates_bps[..3],
            &[
                rule(90_000.0, 7.5, 1.3),
                rule(80_000.0, 7.5, 1.3),
                rule(160_000.0, 15.0, 1.3)
            ]
        );
        let rv = v.video.unwrap();
        assert_eq!((rv.pacer_peak, rv.pacer_credit.as_millis()), (8.0, 120));
        assert_eq!((rv.rate_headroom, rv.key_headroom), (1.1, 1.1));
        assert_eq!((rv.width, rv.height, rv.fps), (1280, 720, 30));
        // key_headroom below rate_headroom is raised to it.
        let v = SessionConfig {
            source: Some("testpattern".into()),
            video: Some(VideoConfig {
                rate_headroom: Some(2.5),
                ..Default::default()
            }),
            ..Default::default()
        }
        .resolve("s", "s1", g, 5004)
        .unwrap();
        assert_eq!(v.video.unwrap().key_headroom, 2.5);
        for (vc, k) in [
            (
                VideoConfig {
                    key_headroom: Some(0.5),
                    ..Default::default()
                },
                "s.video.key_headroom",
            ),
            (
                VideoConfig {
                    pacer_credit_ms: Some(0),
                    ..Default::default()
                },
                "s.video.pacer_credit_ms",
            ),
        ] {
            let e = SessionConfig {
                source: Some("testpattern".into()),
                video: Some(vc),
                ..Default::default()
            }
            .resolve("s", "s1", g, 5004)
            .unwrap_err()
            .to_string();
            assert!(e.contains(k), "{e}");
        }
    }
}
