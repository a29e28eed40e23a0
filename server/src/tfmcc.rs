//! Single-rate TFMCC sessions (`protocol: tfmcc`): the I/O shell around the sans-IO
//! [`congestion::tfmcc::TfmccSender`].
//!
//! Signal flow (one thread per session):
//!
//! ```text
//!  feedback socket (unicast UDP, interface:port0+1) --report--> checks --> TfmccSender
//!                                                                              | poll_rate()
//!  data socket <-- RTP (cc ext id 1 + TFMCC ext id 2, two-byte form) <-- paced at min(X, ceiling)
//! ```
//!
//! * The session has **one** group (layer 0's group and port). Its announced rate is the
//!   *ceiling*: the sum of the configured layer rates. The sender never paces above it, so a
//!   TFMCC session on an uncongested path settles at the ceiling (receivers then report
//!   twice their receive rate and X sits at up to 2x the ceiling; the sent rate is what is
//!   exported, the controller's X is exported beside it).
//! * Receiver reports go to the sender's unicast address announced in the SAM (`sender`)
//!   on **layer 0's port + 1** (the RTP/RTCP convention of RFC 3550 §11: data ports are
//!   `port + 2k`, so odd ports are free). The HTTP Session object states it explicitly in
//!   `tfmcc.feedback_addr`.
//! * Packets are sent singly (no bunches: TFMCC does not estimate from dispersion), on the
//!   nominal schedule of RFC 4654 §3.7: the next send time is the previous *nominal* send
//!   time plus `s / X`, re-evaluated with the current X at every wake-up, so a rate change
//!   takes effect on the next packet.
//! * Reports that fail to parse are counted as `malformed`; reports that parse but cannot be
//!   genuine are counted as `forged`: an echoed timestamp from the sender's future or older
//!   than 60 s (nothing this sender sent), a zero receiver id; reports carrying an
//!   authentication block this server cannot verify (no key configured) count as `auth`.
//!   None of them reach the sender.
//! * With `auth_reports: true` ([`ReportGate`], docs/security.md §4) every report must carry
//!   a valid HMAC under its receiver id's key: per source address a token bucket runs first
//!   (`rate_limited`, before any crypto), then the MAC (missing or wrong: `auth`), the checks
//!   above (`forged`), the per-receiver timestamp replay check (`replayed`), and finally the
//!   influence limiter raises any rate request below the bounded cut (`clamped`): within one
//!   window of `R_max` one receiver id cannot pull X below half of X at the window's start,
//!   all receivers together not below a quarter.

use crate::config::{ResolvedSession, ServerConfig};
use crate::pacer::{unix_micros, PacerStats};
use crate::state::lock;
use crate::state::Session;
use crate::video::LayerQueues;
use codec::rtp::RtpHeader;
use codec::vp9rtp::LayerPacket;
use congestion::tfmcc::{TfmccConfig, TfmccSender};
use congestion::wire::cc_ext::{self, CcFields};
use congestion::wire::tfmcc::{TfmccReport, TFMCC_EXT_ID};
use congestion::{LayerInfo, Time};
use security::auth::{InfluenceConfig, InfluenceLimiter, ReportMac};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::net::{IpAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes of RTP header a TFMCC data packet needs: 12 fixed + 4 extension header + the
/// two-byte-form elements (2 + 11 cc, 2 + 32 TFMCC) padded to 48.
pub const HEADER_LEN: usize = 12 + 4 + 48;

/// Bytes a video TFMCC session's packetizer must leave free beyond what the layered pacer
/// needs (RTP header + a 16-byte cc extension block): the TFMCC element and the two-byte
/// form make the header [`HEADER_LEN`] instead of 28. The session's encoder is started with
/// `packet_size - VIDEO_PACKET_RESERVE` as its MTU.
pub const VIDEO_PACKET_RESERVE: u16 = (HEADER_LEN - 28) as u16;

/// The feedback port of a session whose layer 0 is on `port0`.
pub fn feedback_port(port0: u16) -> u16 {
    port0.wrapping_add(1)
}

/// Reports per receiver kept for the CLR's RTT and rate (oldest forgotten beyond this).
const MAX_TRACKED: usize = 4096;

/// What the last report of one receiver said.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq)]
pub struct ReceiverView {
    /// Rate it asked for (equation or 2x receive rate), bit/s.
    pub rate_bps: f64,
    /// RTT it computed the rate with, seconds.
    pub rtt_s: f64,
    /// Loss event rate.
    pub p: f64,
    pub have_rtt: bool,
    pub have_loss: bool,
}

/// The session's TFMCC state as the API, the WebSocket and `/metrics` show it.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Snapshot {
    /// Rate the session sends at, bit/s: `min(X, ceiling)`.
    pub rate_bps: f64,
    /// The controller's X, bit/s.
    pub sender_rate_bps: f64,
    pub ceiling_bps: f64,
    /// Current limiting receiver's id, its rate as the sender holds it, and its last report.
    pub clr: Option<u32>,
    pub clr_rate_bps: Option<f64>,
    pub clr_report: Option<ReceiverView>,
    pub round: u16,
    pub r_max_s: f64,
    pub slow_start: bool,
    /// Reports in the last completed round (non-CLR + CLR).
    pub reports_per_round: u32,
    /// The last completed round alone: its number, its non-CLR and CLR reports and its
    /// length (s). The e2e feedback-volume check (tfrc-tfmcc-pcc.md E14) counts non-CLR
    /// reports per round, which the sum above cannot separate.
    pub last_round: u16,
    pub last_round_non_clr: u32,
    pub last_round_clr: u32,
    pub last_round_s: f64,
    pub receivers_heard: usize,
    /// Video sessions: the encoder's total target in force (bit/s), the switches made, and
    /// the media queued for sending (ms at the current rate).
    pub encoder_target_bps: Option<f64>,
    pub target_switches: u64,
    pub queue_ms: Option<f64>,
    /// When the snapshot was taken (unix seconds): the e2e E15 check times the sender's
    /// rate steps with it (a poll sees a snapshot up to 0.1 s old).
    pub at_unix_s: f64,
}

/// One change of a video session's encoder target (the `encoder.log` of the Session JSON).
#[derive(Clone, Copy, Debug, Serialize, PartialEq)]
pub struct TargetSwitch {
    /// Wall-clock time of the switch (unix seconds).
    pub unix_s: f64,
    /// New total encoder target, bit/s.
    pub target_bps: f64,
    /// The rate it follows: the mean of `min(X, ceiling)` over the follower's window, bit/s.
    pub rate_bps: f64,
    /// `min(X, ceiling)` at the switch, bit/s.
    pub x_bps: f64,
}

/// Target switches kept for the API (oldest forgotten beyond this).
const MAX_SWITCH_LOG: usize = 256;

/// Hysteresis between the TFMCC rate and the encoder's total target (sans-IO).
///
/// The target is the time-weighted mean of `min(X, ceiling)` over the last `window`, times
/// the media share of a packet ([`media_share`]) times `headroom`, capped at the configured
/// ladder's total. It changes only when the new value differs from the one in force by
/// more than `deadband` (relative), and at most once per `min_interval`: every change makes
/// libvpx re-plan its rate buffer, and the spec (tfrc-tfmcc-pcc.md §7.3 E17) allows at most
/// one switch per 2 s. The first call always sets a target (from the rate it is given).
///
/// Why a mean and not X at the switch instant: with a TCP flow on the path, X swings by
/// ±40 % within a few seconds (a loss event cuts it, the time-accrued increase brings it
/// back). A switch can only happen every 2 s, and a target taken from X at that instant
/// samples the swing: the session-3 E17 run switched to wire rates of 770, 320, 771, 414
/// and 730 kbit/s at 2-s steps while X averaged 590, and only the fifth switch (9.3 s after
/// TCP started) landed within ±25 % of it. What the encoder must match is what the pacer
/// will send over the next seconds, which the recent mean predicts and one sample does not.
/// A step in X of more than the dead band still reaches the target within about
/// `min_interval + window / 4` (the first switch fires once the mean has moved by
/// `deadband`, the next carries mostly the new level).
#[derive(Clone, Debug)]
pub struct TargetFollower {
    pub min_interval: Duration,
    pub deadband: f64,
    pub headroom: f64,
    /// Span of the rate mean the target follows.
    pub window: Duration,
    /// Rate steps within `window` (and the one in force at its start): (since, bit/s).
    history: VecDeque<(Time, f64)>,
    /// Bytes of media per `packet_size` bytes on the wire.
    pub media_share: f64,
    /// Largest target, kbit/s (the configured ladder's total).
    pub max_kbps: u32,
    /// Smallest target, kbit/s.
    pub min_kbps: u32,
    current: Option<u32>,
    last_change: Option<Time>,
    switches: u64,
}

/// Default [`TargetFollower::headroom`]: the encoder aims 10 % under the media share of the
/// rate, so its overshoot (libvpx CBR allows +50 % per frame, a few % on average) does not
/// build a send queue.
pub const TARGET_HEADROOM: f64 = 0.9;
/// Default [`TargetFollower::deadband`].
pub const TARGET_DEADBAND: f64 = 0.1;
/// Default [`TargetFollower::min_interval`] (E17: at most one switch per 2 s).
pub const TARGET_MIN_INTERVAL: Duration = Duration::from_secs(2);
/// Default [`TargetFollower::window`]: 1.5 switch intervals, so a swing of X with a period
/// up to about the window averages out while a step is still followed within ~2.75 s.
/// Chosen on replays of seven E17 runs' rate traces and of sine swings (docs/protocols/
/// tfmcc.md, "Live video"): 2 s left the runs' worst reaction at 7.8 s, 3 s at 4.5 s.
pub const TARGET_WINDOW: Duration = Duration::from_secs(3);
/// Rate updates closer together than this share one history entry (the sender calls
/// [`TargetFollower::update`] per packet; this bounds the history to `window / 5 ms`).
const TARGET_HISTORY_STEP: Duration = Duration::from_millis(5);

/// The media share of a `packet_size`-byte TFMCC data packet: what is left after the RTP
/// header with both extensions ([`HEADER_LEN`]) and an 8-byte VP9 payload descriptor
/// (picture ID, layer indices; larger only on key pictures with their SS).
pub fn media_share(packet_size: u16) -> f64 {
    let s = f64::from(packet_size.max(1));
    ((s - HEADER_LEN as f64 - 8.0) / s).clamp(0.05, 1.0)
}

impl TargetFollower {
    pub fn new(packet_size: u16, max_kbps: u32) -> TargetFollower {
        TargetFollower {
            min_interval: TARGET_MIN_INTERVAL,
            deadband: TARGET_DEADBAND,
            headroom: TARGET_HEADROOM,
            window: TARGET_WINDOW,
            history: VecDeque::new(),
            media_share: media_share(packet_size),
            max_kbps: max_kbps.max(1),
            // libvpx cannot code 360p L3T3 much below this anyway (key pictures).
            min_kbps: (max_kbps / 20).max(10),
            current: None,
            last_change: None,
            switches: 0,
        }
    }

    /// The target (kbit/s) the rate `rate_bps` asks for, before hysteresis.
    pub fn desired_kbps(&self, rate_bps: f64) -> u32 {
        let r = if rate_bps.is_finite() { rate_bps } else { 0.0 };
        let k = (r * self.media_share * self.headroom / 1e3).round();
        (k.clamp(0.0, u32::MAX as f64) as u32)
            .clamp(self.min_kbps.min(self.max_kbps), self.max_kbps)
    }

    /// Records that the rate is `rate_bps` from `now` on, forgetting what the window no
    /// longer covers (the newest step at or before the window's start is kept: it says what
    /// the rate was there).
    fn record(&mut self, now: Time, rate_bps: f64) {
        let r = if rate_bps.is_finite() {
            rate_bps.max(0.0)
        } else {
            0.0
        };
        match self.history.back_mut() {
            Some(last) if now.saturating_since(last.0) < TARGET_HISTORY_STEP => last.1 = r,
            _ => self.history.push_back((now, r)),
        }
        let start = Time(now.0.saturating_sub(self.window.as_nanos() as u64));
        while self.history.len() >= 2 && self.history[1].0 <= start {
            self.history.pop_front();
        }
    }

    /// Time-weighted mean of the rate over the last `window` (or over what is recorded, if
    /// less); `None` while the recorded span is empty.
    pub fn mean_rate(&self, now: Time) -> Option<f64> {
        let start = Time(now.0.saturating_sub(self.window.as_nanos() as u64));
        let (mut area, mut span) = (0.0, 0.0);
        for (i, &(since, r)) in self.history.iter().enumerate() {
            let until = self.history.get(i + 1).map_or(now, |n| n.0);
            let from = since.max(start);
            if until > from {
                let d = until.saturating_since(from).as_secs_f64();
                area += r * d;
                span += d;
            }
        }
        (span > 0.0).then(|| area / span)
    }

    /// Feeds the current rate; returns the new target (kbit/s) when it switches.
    pub fn update(&mut self, now: Time, rate_bps: f64) -> Option<u32> {
        self.record(now, rate_bps);
        let rate = match self.current {
            // The first target: the mean has no span yet.
            None => rate_bps,
            Some(_) => self.mean_rate(now).unwrap_or(rate_bps),
        };
        let want = self.desired_kbps(rate);
        let switch = match (self.current, self.last_change) {
            (Some(cur), Some(last)) => {
                now.saturating_since(last) >= self.min_interval
                    && (f64::from(want) - f64::from(cur)).abs() > self.deadband * f64::from(cur)
            }
            _ => true,
        };
        if !switch {
            return None;
        }
        self.current = Some(want);
        self.last_change = Some(now);
        self.switches += 1;
        Some(want)
    }

    /// The target in force, kbit/s.
    pub fn current(&self) -> Option<u32> {
        self.current
    }

    /// Switches made (the first setting included).
    pub fn switches(&self) -> u64 {
        self.switches
    }
}

/// Seconds of media (at the current rate) a video session's send queue may hold; beyond it
/// [`trim_queues`] drops the oldest pictures. The encoder aims under the rate, so the queue
/// only fills when the rate falls faster than the target (hysteresis) or below what libvpx
/// can reach (a few kbit/s at start-up, before the first receiver report).
pub const QUEUE_CAP_S: f64 = 1.0;

/// Drops the oldest whole pictures (every packet with the oldest RTP timestamp) while the
/// queued bytes exceed `max_bytes`, keeping the newest picture. Returns the packets dropped.
/// The receivers lose those pictures and resume at the next switch point (spatial sync or
/// key picture, at most `keyframe_interval_s` away).
pub fn trim_queues(queues: &mut [VecDeque<LayerPacket>], max_bytes: usize) -> usize {
    let len = |p: &LayerPacket| p.payload.len() + HEADER_LEN;
    let mut total: usize = queues.iter().flatten().map(len).sum();
    let mut dropped = 0;
    while total > max_bytes {
        let Some(oldest) = queues
            .iter()
            .filter_map(|q| q.front().map(|p| p.header.timestamp))
            .reduce(|a, b| if (b.wrapping_sub(a) as i32) < 0 { b } else { a })
        else {
            break;
        };
        let newer_left = queues
            .iter()
            .flatten()
            .any(|p| p.header.timestamp != oldest);
        if !newer_left {
            break;
        }
        for q in queues.iter_mut() {
            while q.front().is_some_and(|p| p.header.timestamp == oldest) {
                if let Some(p) = q.pop_front() {
                    total -= len(&p);
                    dropped += 1;
                }
            }
        }
    }
    dropped
}

/// Takes the next media packet of a video session in send order: the earliest picture
/// (RTP timestamp, modular), and within a picture the lowest cumulative layer, i.e. spatial
/// layers bottom up. The encoder queues a whole picture at once, so each layer frame's
/// packets leave back to back and one sequence space serves every layer.
pub fn pop_next(queues: &mut [VecDeque<LayerPacket>]) -> Option<LayerPacket> {
    let mut best: Option<(usize, u32)> = None;
    for (k, q) in queues.iter().enumerate() {
        let Some(p) = q.front() else { continue };
        let ts = p.header.timestamp;
        let earlier = match best {
            None => true,
            Some((_, bts)) => (ts.wrapping_sub(bts) as i32) < 0,
        };
        if earlier {
            best = Some((k, ts));
        }
    }
    best.and_then(|(k, _)| queues[k].pop_front())
}

/// Shared between the session thread and the HTTP side.
#[derive(Debug)]
pub struct TfmccState {
    pub feedback_addr: SocketAddrV4,
    pub ceiling_bps: f64,
    pub snap: Mutex<Snapshot>,
    pub reports: AtomicU64,
    pub dropped_malformed: AtomicU64,
    pub dropped_forged: AtomicU64,
    pub dropped_auth: AtomicU64,
    pub dropped_replayed: AtomicU64,
    pub dropped_rate_limited: AtomicU64,
    /// Verified reports whose rate request the influence limiter raised.
    pub clamped: AtomicU64,
    /// Whether reports must carry a valid MAC.
    pub auth_reports: bool,
    /// Video sessions: the encoder target switches, newest last (bounded).
    pub target_log: Mutex<VecDeque<TargetSwitch>>,
    /// Video sessions: media packets dropped from the send queue ([`trim_queues`]).
    pub queue_dropped: AtomicU64,
}

impl TfmccState {
    pub fn new(feedback_addr: SocketAddrV4, ceiling_bps: f64, auth_reports: bool) -> TfmccState {
        TfmccState {
            dropped_replayed: AtomicU64::new(0),
            dropped_rate_limited: AtomicU64::new(0),
            clamped: AtomicU64::new(0),
            auth_reports,
            feedback_addr,
            ceiling_bps,
            snap: Mutex::new(Snapshot {
                ceiling_bps,
                ..Default::default()
            }),
            reports: AtomicU64::new(0),
            dropped_malformed: AtomicU64::new(0),
            dropped_forged: AtomicU64::new(0),
            dropped_auth: AtomicU64::new(0),
            target_log: Mutex::new(VecDeque::new()),
            queue_dropped: AtomicU64::new(0),
        }
    }

    /// The Session object's `tfmcc` member. `clr_viewer` maps the CLR's receiver id to the
    /// viewer id it reported in its telemetry, when known.
    pub fn json(&self, clr_viewer: Option<String>) -> Value {
        let s = lock(&self.snap).clone();
        json!({
            "rate_bps": s.rate_bps,
            "sender_rate_bps": s.sender_rate_bps,
            "ceiling_bps": s.ceiling_bps,
            "clr": s.clr.map(|rid| clr_viewer.unwrap_or_else(|| format!("rid:{rid:08x}"))),
            "clr_rid": s.clr,
            "clr_rate_bps": s.clr_rate_bps,
            "clr_rtt_s": s.clr_report.map(|r| r.rtt_s),
            "clr_loss_event_rate": s.clr_report.map(|r| r.p),
            "reports_per_round": s.reports_per_round,
            "last_round": {"round": s.last_round, "non_clr_reports": s.last_round_non_clr,
                           "clr_reports": s.last_round_clr, "duration_s": s.last_round_s},
            "round": s.round,
            "r_max_s": s.r_max_s,
            "slow_start": s.slow_start,
            "snapshot_unix_s": s.at_unix_s,
            "receivers_heard": s.receivers_heard,
            "reports_received": self.reports.load(Ordering::Relaxed),
            "reports_dropped": {
                "malformed": self.dropped_malformed.load(Ordering::Relaxed),
                "forged": self.dropped_forged.load(Ordering::Relaxed),
                "auth": self.dropped_auth.load(Ordering::Relaxed),
                "replayed": self.dropped_replayed.load(Ordering::Relaxed),
                "rate_limited": self.dropped_rate_limited.load(Ordering::Relaxed),
            },
            "reports_clamped": self.clamped.load(Ordering::Relaxed),
            "auth_reports": self.auth_reports,
            "feedback_addr": self.feedback_addr.to_string(),
            "encoder": s.encoder_target_bps.map(|t| json!({
                "target_bps": t,
                "switches": s.target_switches,
                "queue_ms": s.queue_ms,
                "queue_dropped_packets": self.queue_dropped.load(Ordering::Relaxed),
                "log": lock(&self.target_log).iter().copied().collect::<Vec<_>>(),
            })),
        })
    }
}

/// Why a report was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refused {
    Malformed,
    Forged,
    Auth,
    /// Authenticated, but its timestamp is not newer than that receiver's last one.
    Replayed,
    /// Over its source address's report budget (or the limiter's tables are full).
    RateLimited,
}

/// Parses and vets one report against the sender's clock `now_us` (low 32 bits of µs).
/// For sessions without `auth_reports`: an authentication block is refused (`Auth`).
pub fn vet_report(bytes: &[u8], now_us: u32) -> Result<TfmccReport, Refused> {
    let rep = TfmccReport::parse(bytes).map_err(|_| Refused::Malformed)?;
    if rep.auth.kind != 0 || !rep.auth.tag.is_empty() {
        return Err(Refused::Auth);
    }
    plausible(rep, now_us)
}

/// The checks every report passes whatever its authentication: a non-zero receiver id and
/// an echo of something this sender sent.
fn plausible(rep: TfmccReport, now_us: u32) -> Result<TfmccReport, Refused> {
    if rep.rid == 0 {
        return Err(Refused::Forged);
    }
    // The echo is a data timestamp of ours plus the receiver's hold time: never ahead of
    // our clock, and never older than 60 s.
    match congestion::tfmcc::ts_diff_s(now_us, rep.echo_ts_us) {
        Some(age) if age <= 60.0 => Ok(rep),
        _ => Err(Refused::Forged),
    }
}

/// The sender's gate for receiver reports: plain vetting ([`vet_report`]) for sessions
/// without a report key; for `auth_reports` sessions the per-source token bucket, the MAC,
/// the plausibility checks, the replay check and the influence limiter, in that order (the
/// cheap checks first, so a flood costs a hash lookup per packet and no HMAC).
#[derive(Debug)]
pub struct ReportGate {
    mac: Option<ReportMac>,
    limiter: InfluenceLimiter,
}

impl ReportGate {
    /// A gate with the session's report secret (`None`: unauthenticated session) and the
    /// limiter's defaults (docs/security.md §4), except the per-source budget: the CLR
    /// reports once per RTT, checked at each data packet, so on a LAN (RTT ~1 ms) an honest
    /// CLR sends one report per packet it receives. The budget is therefore the session's
    /// packet rate at its ceiling (`max_packets_per_s`) plus 10 %, at least the library's
    /// 20/s, with a burst of two seconds' worth.
    pub fn new(mac: Option<ReportMac>, max_packets_per_s: f64) -> ReportGate {
        let d = InfluenceConfig::default();
        let per_s = if max_packets_per_s.is_finite() {
            (1.1 * max_packets_per_s).max(d.reports_per_sec)
        } else {
            d.reports_per_sec
        };
        ReportGate {
            mac,
            limiter: InfluenceLimiter::new(InfluenceConfig {
                reports_per_sec: per_s,
                burst: (2.0 * per_s).max(d.burst),
                ..d
            }),
        }
    }

    /// Reports whose rate the limiter raised so far.
    pub fn clamped(&self) -> u64 {
        self.limiter.stats().clamped
    }

    /// Vets one report from `src` at sender time `now`. `current` is the sender's X in
    /// bytes/s and `window` the limiter's window (the sender's `R_max`). On success the
    /// report's `x_rate` is what the sender may act on (raised by the limiter if need be).
    pub fn vet(
        &mut self,
        bytes: &[u8],
        now: Time,
        src: IpAddr,
        current: f64,
        window: Duration,
    ) -> Result<TfmccReport, Refused> {
        use congestion::error::Error as E;
        let now_us = now.as_micros() as u32;
        let Some(mac) = &self.mac else {
            return vet_report(bytes, now_us);
        };
        self.limiter
            .admit(now, src)
            .map_err(|_| Refused::RateLimited)?;
        let rep = mac.verify_tfmcc(bytes).map_err(|e| match e {
            E::Unauthenticated { .. } | E::AuthFailed { .. } => Refused::Auth,
            _ => Refused::Malformed,
        })?;
        let mut rep = plausible(rep, now_us)?;
        self.limiter
            .check_fresh(now, rep.rid, rep.ts_us)
            .map_err(|e| match e {
                E::Replayed { .. } => Refused::Replayed,
                _ => Refused::RateLimited,
            })?;
        let allowed = self
            .limiter
            .clamp(now, rep.rid, current, rep.x_rate as f64, window);
        if allowed > rep.x_rate as f64 {
            rep.x_rate = allowed.ceil().min(u32::MAX as f64) as u32;
        }
        Ok(rep)
    }
}

/// What the session thread needs.
pub struct TfmccRun {
    pub dest: SocketAddrV4,
    pub packet_size: u16,
    pub ssrc: u32,
    pub payload_type: u8,
    /// Video sessions: the encoder's packets and the target hook, and the configured
    /// ladder's total (kbit/s), the largest target.
    pub video: Option<(Arc<LayerQueues>, u32)>,
}

/// Opens the feedback socket (non-blocking).
pub fn feedback_socket(addr: SocketAddrV4) -> std::io::Result<UdpSocket> {
    let s = UdpSocket::bind(addr)?;
    s.set_nonblocking(true)?;
    Ok(s)
}

/// Appends one data packet of exactly `size` bytes.
fn write_packet(out: &mut Vec<u8>, r: &TfmccRun, seq: u16, cc: &CcFields, ext: &[u8], ts90: u32) {
    let hdr = RtpHeader {
        marker: false,
        payload_type: r.payload_type,
        sequence_number: seq,
        timestamp: ts90,
        ssrc: r.ssrc,
        csrcs: Vec::new(),
        extensions: vec![
            (cc_ext::DEFAULT_ID, cc.to_bytes().to_vec()),
            (TFMCC_EXT_ID, ext.to_vec()),
        ],
        padding: 0,
    };
    let payload_len = (r.packet_size as usize).saturating_sub(hdr.header_len());
    const ZEROS: [u8; 1500] = [0; 1500];
    // Cannot fail: PT <= 127, no CSRCs, two short elements.
    let _ = hdr.write(&ZEROS[..payload_len.min(ZEROS.len())], out);
}

/// Appends one packet of a video session: the packetizer's packet on the session's single
/// SSRC and sequence space with both extensions added, at its natural length (the sender
/// paces by bytes; padding every small layer frame to `packet_size` cost 45 full packets a
/// second at 15 fps L3T3, 430 kbit/s, before any picture data). `p == None`: a payload-less
/// padding packet of exactly `packet_size` bytes (`rtp_out::pad_to`) at timestamp `ts90`
/// (players skip it for video; it counts for TFMCC's receive rate and loss).
fn write_media(
    out: &mut Vec<u8>,
    r: &TfmccRun,
    p: Option<LayerPacket>,
    seq: u16,
    cc: &CcFields,
    ext: &[u8],
    ts90: u32,
) {
    let start = out.len();
    let (mut hdr, payload) = match p {
        Some(p) => (p.header, p.payload),
        None => (
            RtpHeader {
                marker: false,
                payload_type: r.payload_type,
                sequence_number: 0,
                timestamp: ts90,
                ssrc: 0,
                csrcs: Vec::new(),
                extensions: Vec::new(),
                padding: 0,
            },
            Vec::new(),
        ),
    };
    let padding = payload.is_empty();
    hdr.ssrc = r.ssrc;
    hdr.sequence_number = seq;
    hdr.padding = 0;
    hdr.extensions
        .push((cc_ext::DEFAULT_ID, cc.to_bytes().to_vec()));
    hdr.extensions.push((TFMCC_EXT_ID, ext.to_vec()));
    if hdr.write(&payload, out).is_err() {
        out.truncate(start);
        return;
    }
    if padding {
        crate::rtp_out::pad_to(out, start, r.packet_size as usize);
    }
}

/// Waits until `deadline` or until the feedback socket is readable.
fn wait_readable(fd: i32, deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return;
    }
    let ts = libc::timespec {
        tv_sec: left.as_secs() as libc::time_t,
        tv_nsec: left.subsec_nanos() as libc::c_long,
    };
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    unsafe {
        libc::ppoll(&mut p, 1, &ts, std::ptr::null());
    }
}

/// Runs the session until `stop`.
pub fn run(
    r: TfmccRun,
    data: UdpSocket,
    fb: UdpSocket,
    stats: Arc<PacerStats>,
    st: Arc<TfmccState>,
    stop: Arc<AtomicBool>,
    mut gate: ReportGate,
) {
    // SAFETY: prctl with an integer argument (1 ns timer slack, as the pacer).
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
    let cfg = TfmccConfig {
        packet_size: r.packet_size as u32,
        ..Default::default()
    };
    let mut sender = TfmccSender::new(cfg);
    let s_bits = 8.0 * r.packet_size as f64;
    let t0 = Instant::now();
    // The sender's clock: time since the session started (only differences matter, and
    // 32-bit µs timestamps wrap after 71 min, which every use handles modularly).
    let clock = |i: Instant| Time(i.saturating_duration_since(t0).as_nanos() as u64);
    let mut last_nominal = t0;
    // Bits of the packet sent last: the next one is due that many bits later at the rate
    // (byte pacing: video packets are as long as their media, padding is `packet_size`).
    let mut last_bits = s_bits;
    let mut first = true;
    let mut seq: u16 = 0;
    let mut buf = Vec::with_capacity(r.packet_size as usize);
    let mut rbuf = [0u8; 2048];
    let mut heard: BTreeMap<u32, (ReceiverView, Instant)> = BTreeMap::new();
    let mut last_snap = t0;
    let fd = fb.as_raw_fd();
    let mut follower = r
        .video
        .as_ref()
        .map(|(_, max_kbps)| TargetFollower::new(r.packet_size, *max_kbps));
    // RTP timestamp of the last media packet: padding packets carry it (a picture's time).
    let mut last_ts90: u32 = 0;
    while !stop.load(Ordering::Relaxed) {
        // 1. Reports.
        for _ in 0..256 {
            match fb.recv_from(&mut rbuf) {
                Ok((n, from)) => {
                    let now = clock(Instant::now());
                    if n == rbuf.len() {
                        st.dropped_malformed.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    let window = Duration::from_secs_f64(sender.r_max().clamp(1e-3, 60.0));
                    let vetted = gate.vet(&rbuf[..n], now, from.ip(), sender.rate_bytes(), window);
                    st.clamped.store(gate.clamped(), Ordering::Relaxed);
                    match vetted {
                        Ok(rep) => {
                            st.reports.fetch_add(1, Ordering::Relaxed);
                            sender.handle_parsed_report(now, &rep);
                            if heard.len() >= MAX_TRACKED && !heard.contains_key(&rep.rid) {
                                if let Some(k) =
                                    heard.iter().min_by_key(|(_, (_, t))| *t).map(|(k, _)| *k)
                                {
                                    heard.remove(&k);
                                }
                            }
                            let view = ReceiverView {
                                rate_bps: 8.0 * rep.x_rate as f64,
                                rtt_s: rep.rtt_us as f64 / 1e6,
                                p: TfmccSender::report_p(&rep),
                                have_rtt: rep.have_rtt,
                                have_loss: rep.have_loss,
                            };
                            if rep.leave {
                                heard.remove(&rep.rid);
                            } else {
                                heard.insert(rep.rid, (view, Instant::now()));
                            }
                        }
                        Err(Refused::Malformed) => {
                            st.dropped_malformed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Refused::Forged) => {
                            st.dropped_forged.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Refused::Auth) => {
                            st.dropped_auth.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Refused::Replayed) => {
                            st.dropped_replayed.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(Refused::RateLimited) => {
                            st.dropped_rate_limited.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                Err(_) => break,
            }
        }
        // 2. Timers.
        let now_i = Instant::now();
        let now = clock(now_i);
        if sender.poll_timeout().is_some_and(|t| now >= t) {
            sender.handle_timeout(now);
        }
        // 3. Data: nominal time of the next packet from the previous nominal time.
        let rate = sender.poll_rate().min(st.ceiling_bps).max(1.0);
        // Video: the encoder's total target follows the rate, with hysteresis.
        if let (Some(f), Some((q, _))) = (follower.as_mut(), r.video.as_ref()) {
            if let Some(kbps) = f.update(now, rate) {
                q.target_kbps.store(u64::from(kbps), Ordering::Relaxed);
                let mut log = lock(&st.target_log);
                if log.len() >= MAX_SWITCH_LOG {
                    log.pop_front();
                }
                log.push_back(TargetSwitch {
                    unix_s: unix_micros() as f64 / 1e6,
                    target_bps: f64::from(kbps) * 1e3,
                    rate_bps: f.mean_rate(now).unwrap_or(rate),
                    x_bps: rate,
                });
            }
        }
        let interval = Duration::from_secs_f64((last_bits / rate).min(64.0));
        let mut due = if first {
            now_i
        } else {
            last_nominal + interval
        };
        if now_i.saturating_duration_since(due) > Duration::from_secs(1) {
            // Held off the CPU: re-anchor instead of bursting.
            stats.resyncs.fetch_add(1, Ordering::Relaxed);
            due = now_i;
        }
        if now_i >= due {
            first = false;
            last_nominal = due;
            let send_us = unix_micros();
            let fields = sender.data_header(now);
            let cc = CcFields {
                layer: 0,
                bunch_pos: 0,
                bunch_len: 1,
                send_time_us: send_us,
            };
            buf.clear();
            match r.video.as_ref() {
                Some((q, _)) => {
                    let mut queues = lock(&q.queues);
                    let max_bytes = (rate * QUEUE_CAP_S / 8.0).max(8.0 * s_bits / 8.0);
                    let dropped = trim_queues(&mut queues, max_bytes as usize);
                    if dropped > 0 {
                        st.queue_dropped
                            .fetch_add(dropped as u64, Ordering::Relaxed);
                    }
                    let media = pop_next(&mut queues);
                    drop(queues);
                    if let Some(p) = &media {
                        last_ts90 = p.header.timestamp;
                    }
                    write_media(&mut buf, &r, media, seq, &cc, &fields.to_bytes(), last_ts90);
                }
                None => {
                    let ts90 = (send_us.wrapping_mul(9) / 100) as u32;
                    write_packet(&mut buf, &r, seq, &cc, &fields.to_bytes(), ts90);
                }
            }
            seq = seq.wrapping_add(1);
            last_bits = 8.0 * buf.len().max(1) as f64;
            match data.send_to(&buf, r.dest) {
                Ok(n) => {
                    stats.packets.fetch_add(1, Ordering::Relaxed);
                    stats.bytes.fetch_add(n as u64, Ordering::Relaxed);
                    stats.bunches.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    stats.send_errors.fetch_add(1, Ordering::Relaxed);
                }
            }
            let late = now_i.saturating_duration_since(due).as_micros() as u64;
            lock(&stats.errors).record(late);
            continue;
        }
        // 4. Snapshot for the HTTP side, ten times a second.
        if now_i.saturating_duration_since(last_snap) >= Duration::from_millis(100) {
            last_snap = now_i;
            // X as of this instant (the snapshot is timed: `at_unix_s`).
            sender.advance_to(clock(now_i));
            let s = sender.stats();
            let clr_report = s.clr.and_then(|id| heard.get(&id).map(|(v, _)| *v));
            *lock(&st.snap) = Snapshot {
                at_unix_s: unix_micros() as f64 / 1e6,
                rate_bps: sender.poll_rate().min(st.ceiling_bps),
                sender_rate_bps: s.rate_bps,
                ceiling_bps: st.ceiling_bps,
                clr: s.clr,
                clr_rate_bps: s.clr_rate_bps,
                clr_report,
                round: s.round,
                r_max_s: s.r_max_s,
                slow_start: s.slow_start,
                reports_per_round: s.last_round.non_clr_reports + s.last_round.clr_reports,
                last_round: s.last_round.round,
                last_round_non_clr: s.last_round.non_clr_reports,
                last_round_clr: s.last_round.clr_reports,
                last_round_s: s.last_round.duration_s,
                receivers_heard: heard.len(),
                encoder_target_bps: follower
                    .as_ref()
                    .and_then(TargetFollower::current)
                    .map(|k| f64::from(k) * 1e3),
                target_switches: follower.as_ref().map_or(0, TargetFollower::switches),
                queue_ms: r.video.as_ref().map(|(q, _)| {
                    let bytes: usize = lock(&q.queues)
                        .iter()
                        .flatten()
                        .map(|p| p.payload.len() + HEADER_LEN)
                        .sum();
                    8e3 * bytes as f64 / rate
                }),
            };
        }
        // 5. Sleep until the next packet, the next timer, the next snapshot, or a report.
        let mut wake = due.min(now_i + Duration::from_millis(100));
        if let Some(t) = sender.poll_timeout() {
            let d = t.saturating_since(now);
            wake = wake.min(now_i + d);
        }
        wait_readable(fd, wake);
    }
}

/// What a TFMCC player adds to its telemetry (`tfmcc` member of the report).
#[derive(Clone, Debug, Default, Serialize, serde::Deserialize, PartialEq)]
pub struct ViewerTfmcc {
    /// Receiver id it puts in its reports (maps the sender's CLR to a viewer).
    pub rid: u32,
    /// Its calculated rate R_calc, bit/s.
    pub rate_bps: f64,
    /// RTT in use, seconds.
    pub rtt_s: f64,
    /// Loss event rate.
    pub loss_event_rate: f64,
    /// Whether the sender's echoes say it is the CLR.
    pub is_clr: bool,
    #[serde(default)]
    pub have_rtt: bool,
    #[serde(default)]
    pub reports_sent: u64,
}

impl ViewerTfmcc {
    /// Range checks (telemetry is network input).
    pub fn validate(&self) -> crate::error::Result<()> {
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if !ok(self.rate_bps) || !ok(self.rtt_s) || !(0.0..=1.0).contains(&self.loss_event_rate) {
            return Err(crate::error::Error::BadRequest(
                "tfmcc: rate_bps and rtt_s finite and non-negative, loss_event_rate within 0..=1"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// Session-level checks for `protocol: tfmcc`.
pub fn check_session(r: &ResolvedSession, encrypt: bool, ctx: &str) -> crate::error::Result<()> {
    if encrypt {
        return Err(crate::error::Error::config(
            &format!("{ctx}.encrypt"),
            "TFMCC sessions do not encrypt media yet",
        ));
    }
    // Video: the packetizer leaves room for both extensions ([`VIDEO_PACKET_RESERVE`]).
    if (r.packet_size as usize) < HEADER_LEN + 1 {
        return Err(crate::error::Error::config(
            &format!("{ctx}.packet_size"),
            format!(
                "{} bytes: TFMCC packets need at least {} (two header extensions)",
                r.packet_size,
                HEADER_LEN + 1
            ),
        ));
    }
    Ok(())
}

/// Binds the feedback socket and starts the session thread.
// Everything here is per-session state the caller owns; a struct just for this call adds
// nothing.
#[allow(clippy::too_many_arguments)]
pub fn start(
    cfg: &ServerConfig,
    r: &ResolvedSession,
    layer0: &LayerInfo,
    data: UdpSocket,
    stats: Arc<PacerStats>,
    stop: Arc<AtomicBool>,
    ssrc: u32,
    report_mac: Option<ReportMac>,
    queues: Option<Arc<LayerQueues>>,
) -> crate::error::Result<(std::thread::JoinHandle<()>, Arc<TfmccState>)> {
    let fb_addr = SocketAddrV4::new(cfg.interface, feedback_port(layer0.port));
    let fb = feedback_socket(fb_addr)
        .map_err(|e| crate::error::Error::io(format!("TFMCC feedback socket {fb_addr}"), e))?;
    let announced = SocketAddrV4::new(cfg.ssm_source.unwrap_or(cfg.interface), fb_addr.port());
    let st = Arc::new(TfmccState::new(
        announced,
        layer0.rate_bps as f64,
        report_mac.is_some(),
    ));
    let gate = ReportGate::new(
        report_mac,
        layer0.rate_bps as f64 / (8.0 * f64::from(r.packet_size.max(1))),
    );
    let run_cfg = TfmccRun {
        dest: SocketAddrV4::new(layer0.group, layer0.port),
        packet_size: r.packet_size,
        ssrc,
        payload_type: 96,
        video: queues.map(|q| {
            let max_kbps: u32 = r
                .video
                .as_ref()
                .map_or(0, |v| v.cell_kbps.iter().flatten().sum());
            (q, max_kbps)
        }),
    };
    let st2 = st.clone();
    let h = std::thread::Builder::new()
        .name(format!("tfmcc-{}", r.id))
        .spawn(move || run(run_cfg, data, fb, stats, st2, stop, gate))
        .map_err(|e| crate::error::Error::io("spawning the TFMCC thread", e))?;
    Ok((h, st))
}

/// The TFMCC families of `/metrics` (one series per TFMCC session).
pub fn metrics(sessions: &[Arc<Session>], m: &mut String) {
    let tf: Vec<(&str, &TfmccState)> = sessions
        .iter()
        .filter_map(|s| s.tfmcc.as_deref().map(|t| (s.cfg.id.as_str(), t)))
        .collect();
    let snaps: Vec<(&str, Snapshot, &TfmccState)> = tf
        .iter()
        .map(|(id, t)| (*id, lock(&t.snap).clone(), *t))
        .collect();
    type G = fn(&Snapshot) -> Option<f64>;
    let gauges: [(&str, &str, G); 8] = [
        (
            "layercast_tfmcc_rate_bps",
            "rate the session sends at, min(X, ceiling)",
            |s| Some(s.rate_bps),
        ),
        (
            "layercast_tfmcc_sender_rate_bps",
            "the TFMCC sender's X",
            |s| Some(s.sender_rate_bps),
        ),
        (
            "layercast_tfmcc_clr_rate_bps",
            "the CLR's rate as the sender holds it",
            |s| s.clr_rate_bps,
        ),
        (
            "layercast_tfmcc_clr_rtt_seconds",
            "RTT in the CLR's last report",
            |s| s.clr_report.map(|r| r.rtt_s),
        ),
        (
            "layercast_tfmcc_clr_loss_event_rate",
            "loss event rate in the CLR's last report",
            |s| s.clr_report.map(|r| r.p),
        ),
        (
            "layercast_tfmcc_reports_per_round",
            "reports in the last completed feedback round",
            |s| Some(s.reports_per_round as f64),
        ),
        (
            "layercast_tfmcc_encoder_target_bps",
            "video sessions: the encoder's total target, following the rate",
            |s| s.encoder_target_bps,
        ),
        (
            "layercast_tfmcc_encoder_target_switches",
            "video sessions: encoder target switches since the session started",
            |s| s.encoder_target_bps.map(|_| s.target_switches as f64),
        ),
    ];
    for (name, help, f) in gauges {
        m.push_str(&format!("# HELP {name} {help}.\n# TYPE {name} gauge\n"));
        for (id, s, _) in &snaps {
            if let Some(v) = f(s) {
                m.push_str(&format!("{name}{{session=\"{id}\"}} {v}\n"));
            }
        }
    }
    m.push_str("# HELP layercast_tfmcc_clr_info The current limiting receiver (receiver id as 8 hex digits).\n# TYPE layercast_tfmcc_clr_info gauge\n");
    for (id, s, _) in &snaps {
        if let Some(c) = s.clr {
            m.push_str(&format!(
                "layercast_tfmcc_clr_info{{session=\"{id}\",clr=\"{c:08x}\"}} 1\n"
            ));
        }
    }
    m.push_str("# TYPE layercast_tfmcc_reports_total counter\n");
    for (id, _, t) in &snaps {
        m.push_str(&format!(
            "layercast_tfmcc_reports_total{{session=\"{id}\"}} {}\n",
            t.reports.load(Ordering::Relaxed)
        ));
    }
    m.push_str("# TYPE layercast_tfmcc_reports_clamped_total counter\n");
    for (id, _, t) in &snaps {
        m.push_str(&format!(
            "layercast_tfmcc_reports_clamped_total{{session=\"{id}\"}} {}\n",
            t.clamped.load(Ordering::Relaxed)
        ));
    }
    m.push_str("# TYPE layercast_tfmcc_reports_dropped_total counter\n");
    for (id, _, t) in &snaps {
        for (reason, c) in [
            ("malformed", &t.dropped_malformed),
            ("forged", &t.dropped_forged),
            ("auth", &t.dropped_auth),
            ("replayed", &t.dropped_replayed),
            ("rate_limited", &t.dropped_rate_limited),
        ] {
            m.push_str(&format!(
                "layercast_tfmcc_reports_dropped_total{{session=\"{id}\",reason=\"{reason}\"}} {}\n",
                c.load(Ordering::Relaxed)
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use congestion::tfmcc::TfmccReceiver;
    use congestion::wire::tfmcc::TfmccDataFields;
    use congestion::{Action, LayeredController, PacketArrival};

    fn report(rid: u32, echo: u32) -> TfmccReport {
        TfmccReport {
            rid,
            round: 0,
            have_rtt: false,
            have_loss: false,
            leave: false,
            is_clr: false,
            ts_us: 5,
            echo_ts_us: echo,
            x_rate: 1000,
            x_recv: 500,
            rtt_us: 100_000,
            p_fixed: 0,
            auth: Default::default(),
        }
    }

    #[test]
    fn vetting_counts_malformed_forged_and_auth() {
        let now = 10_000_000u32;
        assert_eq!(vet_report(b"junk", now), Err(Refused::Malformed));
        assert_eq!(vet_report(&[], now), Err(Refused::Malformed));
        let ok = report(7, now - 50_000);
        assert_eq!(vet_report(&ok.to_bytes(), now), Ok(ok.clone()));
        // Echo from the future, echo older than 60 s, receiver id 0.
        let fut = report(7, now + 1_000);
        assert_eq!(vet_report(&fut.to_bytes(), now), Err(Refused::Forged));
        let old = report(7, now.wrapping_sub(61_000_000));
        assert_eq!(vet_report(&old.to_bytes(), now), Err(Refused::Forged));
        let zero = report(0, now - 1);
        assert_eq!(vet_report(&zero.to_bytes(), now), Err(Refused::Forged));
        let mut signed = report(7, now - 1);
        signed.auth.kind = 1;
        signed.auth.tag = vec![1, 2, 3, 4];
        assert_eq!(vet_report(&signed.to_bytes(), now), Err(Refused::Auth));
    }

    #[test]
    fn gate_checks_mac_replay_and_bounds_one_receivers_cut() {
        let mac = ReportMac::new([7; 32]);
        let key = mac.receiver_key(9);
        let mut gate = ReportGate::new(Some(mac), 0.0);
        let src: IpAddr = "10.0.0.2".parse().unwrap();
        let w = Duration::from_millis(100);
        let t = |ms: u64| Time::from_millis(1000 + ms);
        let now_us = |ms: u64| t(ms).as_micros() as u32;
        // Honest report: passes with its rate.
        let mut r = report(9, now_us(0) - 20_000);
        r.ts_us = 100;
        r.x_rate = 100_000;
        let sealed = key.seal_tfmcc(&r).unwrap();
        let ok = gate.vet(&sealed, t(0), src, 100_000.0, w).unwrap();
        assert_eq!((ok.rid, ok.x_rate), (9, 100_000));
        // Its replay: refused.
        assert_eq!(
            gate.vet(&sealed, t(1), src, 100_000.0, w),
            Err(Refused::Replayed)
        );
        // No MAC, a guessed MAC, the right MAC under another id's key: `Auth`.
        let mut plain = r.clone();
        plain.ts_us = 200;
        assert_eq!(
            gate.vet(&plain.to_bytes(), t(2), src, 100_000.0, w),
            Err(Refused::Auth)
        );
        let mut guessed = sealed.clone();
        let n = guessed.len();
        guessed[n - 1] ^= 1;
        assert_eq!(
            gate.vet(&guessed, t(3), src, 100_000.0, w),
            Err(Refused::Auth)
        );
        let other = ReportMac::new([7; 32]).receiver_key(10);
        let mut r10 = r.clone();
        r10.rid = 10;
        // Sealed under receiver 10's key, then relabelled as 9's (tag kept).
        let mut r9 = TfmccReport::parse(&other.seal_tfmcc(&r10).unwrap()).unwrap();
        r9.rid = 9;
        let relabelled = r9.to_bytes();
        assert_eq!(
            gate.vet(&relabelled, t(4), src, 100_000.0, w),
            Err(Refused::Auth)
        );
        // A genuine report asking for a tiny rate: raised to half of X at the window's start.
        let mut low = r.clone();
        low.ts_us = 300;
        low.x_rate = 10;
        let got = gate
            .vet(&key.seal_tfmcc(&low).unwrap(), t(5), src, 100_000.0, w)
            .unwrap();
        assert_eq!(got.x_rate, 50_000);
        assert_eq!(gate.clamped(), 1);
        // Unauthenticated sessions keep plain vetting.
        let mut open = ReportGate::new(None, 0.0);
        assert_eq!(open.vet(&sealed, t(6), src, 1.0, w), Err(Refused::Auth));
        assert_eq!(
            open.vet(&plain.to_bytes(), t(6), src, 1.0, w)
                .map(|r| r.rid),
            Ok(9)
        );
    }

    #[test]
    fn data_packets_have_exact_size_and_both_extensions() {
        let r = TfmccRun {
            dest: "127.0.0.1:9".parse().unwrap(),
            packet_size: 1000,
            ssrc: 42,
            payload_type: 96,
            video: None,
        };
        let mut snd = TfmccSender::new(TfmccConfig::default());
        let f = snd.data_header(Time::from_millis(3));
        let cc = CcFields {
            layer: 0,
            bunch_pos: 0,
            bunch_len: 1,
            send_time_us: 77,
        };
        let mut out = Vec::new();
        write_packet(&mut out, &r, 9, &cc, &f.to_bytes(), 1);
        assert_eq!(out.len(), 1000);
        let p = codec::rtp::RtpPacket::parse(&out).unwrap();
        assert_eq!(p.header_len(), HEADER_LEN);
        assert_eq!(
            CcFields::parse(p.extension(cc_ext::DEFAULT_ID).unwrap()).unwrap(),
            cc
        );
        // The block as the receiver takes it (with its 4-byte header).
        let cnt = (out[0] & 0x0f) as usize;
        let off = 12 + 4 * cnt;
        let words = u16::from_be_bytes([out[off + 2], out[off + 3]]) as usize;
        let block = &out[off..off + 4 + 4 * words];
        assert_eq!(
            TfmccDataFields::from_extension_block(block).unwrap(),
            Some(f)
        );
        // A receiver fed such packets reports, and the sender accepts the report.
        let mut rx = TfmccReceiver::new(TfmccConfig::default(), 5);
        let mut rep = None;
        for i in 1..2000u64 {
            let t = Time::from_millis(10 * i);
            let f = snd.data_header(t);
            let mut out = Vec::new();
            write_packet(&mut out, &r, i as u16, &cc, &f.to_bytes(), 1);
            let block = &out[off..off + 4 + 4 * words];
            let arr = PacketArrival {
                layer: 0,
                seq: i,
                bunch_pos: 0,
                bunch_len: 1,
                size: 1000,
                send_time_us: 77,
                recv_time: t,
            };
            rx.handle_packet_with_extension(t, &arr, block).unwrap();
            if rx.poll_timeout().is_some_and(|(d, _)| t >= d) {
                rx.handle_timeout(t);
            }
            while let Some(a) = rx.poll_action() {
                if let Action::SendFeedback(b) = a {
                    rep = Some(vet_report(&b, t.as_micros() as u32).unwrap());
                }
            }
            if rep.is_some() {
                break;
            }
        }
        let rep = rep.expect("the receiver reports within 20 s");
        assert_eq!(rep.rid, 5);
    }

    #[test]
    fn target_follower_switches_at_most_every_2_s_and_outside_the_deadband() {
        let mut f = TargetFollower::new(1200, 1550);
        // 1 Mbit/s on the wire: 1128 of 1200 bytes are media, 90 % of that is the target.
        assert_eq!(f.desired_kbps(1e6), 846);
        // Capped at the ladder's total and floored at 5 % of it.
        assert_eq!(f.desired_kbps(10e6), 1550);
        assert_eq!(f.desired_kbps(1e3), 77);
        assert_eq!(f.desired_kbps(f64::NAN), 77);
        let t = |ms: u64| Time::from_millis(ms);
        // The first call sets the target from the rate it is given.
        assert_eq!(f.update(t(0), 1e6), Some(846));
        // Within 2 s nothing moves, however far the rate goes.
        assert_eq!(f.update(t(100), 0.5e6), None);
        assert_eq!(f.update(t(1999), 0.5e6), None);
        // After 2 s the target carries the mean rate over what the window holds so far
        // (2 s of its 3): 0.1 s at 1 Mbit/s and 1.9 s at 0.5 Mbit/s = 525 kbit/s.
        let m = f.mean_rate(t(2000)).unwrap();
        assert!((m - 0.525e6).abs() < 1.0, "{m}");
        assert_eq!(f.update(t(2000), 0.5e6), Some(444));
        // A mean within 10 % of the target in force (0.5 Mbit/s asks for 423, 0.53 for 448)
        // never switches, however long.
        for ms in (2010..9000).step_by(10) {
            let rate = if ms < 4000 { 0.5e6 } else { 0.53e6 };
            assert_eq!(f.update(t(ms), rate), None, "at {ms} ms");
        }
        assert_eq!(f.current(), Some(444));
        // 0.6 Mbit/s (508) from 9 s: the mean leaves the band (> 488) once about two thirds
        // of the 3-s window are at the new rate (2.04 s); the 4 % left is inside the dead
        // band.
        let mut at = Vec::new();
        for ms in (9000..14_000).step_by(10) {
            if let Some(k) = f.update(t(ms), 0.6e6) {
                at.push((ms, k));
            }
        }
        assert_eq!(at, vec![(11_040, 489)]);
        assert_eq!(f.switches(), 3);
        // Driven every millisecond by a rate that swings, the switches stay 2 s apart; a
        // swing the mean averages out makes one switch (to the mean) and no more.
        for period_ms in [14u64, 4000] {
            let mut g = TargetFollower::new(1200, 1550);
            let mut last: Option<u64> = None;
            for ms in 0..20_000u64 {
                let rate = if (ms / (period_ms / 2)) % 2 == 0 {
                    1e6
                } else {
                    0.3e6
                };
                if g.update(t(ms), rate).is_some() {
                    if let Some(l) = last {
                        assert!(ms - l >= 2000, "switches at {l} and {ms} ms");
                    }
                    last = Some(ms);
                }
            }
            // 14 ms: the first setting, then one switch to the mean (650 kbit/s).
            // 4 s: each 3-s window holds a different mix of the two rates.
            if period_ms == 14 {
                assert_eq!(g.switches(), 2);
                let c = f64::from(g.current().unwrap());
                let want = f64::from(g.desired_kbps(0.65e6));
                assert!((c - want).abs() <= 0.01 * want, "{c} vs {want}");
            } else {
                assert!(g.switches() >= 5, "{} switches in 20 s", g.switches());
            }
        }
        // The history stays bounded when the rate changes on every packet.
        let mut h = TargetFollower::new(1200, 1550);
        for us in (0..10_000_000u64).step_by(100) {
            h.update(Time::from_micros(us), 1e6 + (us % 7) as f64);
        }
        assert!(h.history.len() <= 602, "{}", h.history.len());
    }

    /// Replays a rate trace (ms from the TCP start, kbit/s; `interpolate`: linear between
    /// the points, else each holds until the next) through a follower updated every 10 ms,
    /// as the sender's loop does, and returns E17's reaction: the time from the TCP start to
    /// the first switch whose target, as the wire rate it serves, lies within ±25 % of
    /// `with_tcp_kbps` (the player test's measure, player/tests/netns_tfmcc.rs).
    fn e17_reaction(trace: &[(i64, f64)], interpolate: bool, with_tcp_kbps: f64) -> Option<f64> {
        let rate_at = |ms: i64| -> f64 {
            let i = trace.partition_point(|p| p.0 <= ms);
            if i == 0 {
                return trace[0].1;
            }
            let (a, x) = trace[i - 1];
            match trace.get(i) {
                Some(&(b, y)) if interpolate => x + (y - x) * (ms - a) as f64 / (b - a) as f64,
                _ => x,
            }
        };
        let per_wire = media_share(1200) * TARGET_HEADROOM;
        let mut f = TargetFollower::new(1200, 1550);
        let start = trace[0].0;
        let t = |ms: i64| Time::from_millis((ms - start) as u64);
        let mut reaction = None;
        for ms in (start..=trace[trace.len() - 1].0).step_by(10) {
            if let Some(k) = f.update(t(ms), rate_at(ms) * 1e3) {
                let wire = f64::from(k) / per_wire;
                if ms >= 0
                    && reaction.is_none()
                    && (wire - with_tcp_kbps).abs() <= 0.25 * with_tcp_kbps
                {
                    reaction = Some(ms as f64 / 1e3);
                }
            }
        }
        reaction
    }

    #[test]
    fn target_follower_reaches_the_e17_band_within_5_s_on_recorded_traces() {
        // The failing E17 run (session 3, fresh clone, 2026-11-22: "followed within 9.3 s,
        // X itself 1.3 s"): min(X, ceiling) at each instant the follower switched, from the
        // server's switch log, ms from the TCP start. With TCP X swung between ~320 and
        // ~770 kbit/s (mean 590 over 10-30 s), and a target taken from X at the switch
        // instant hit 775, 330, 760, 424 (all outside 443-737) before 720 at 9.3 s. The
        // first point is a switch (the grid the old follower kept).
        let failing = [
            (-9363, 1052.0),
            (-7356, 1179.0),
            (-5355, 1014.0),
            (-3090, 898.0),
            (-697, 1006.0),
            (1309, 770.0),
            (3310, 320.0),
            (5316, 771.0),
            (7322, 414.0),
            (9332, 730.0),
            (11338, 554.0),
            (13716, 494.0),
            (16162, 434.0),
            (18163, 583.0),
            (20404, 657.0),
            (22405, 748.0),
            (24419, 529.0),
            (26423, 587.0),
            (28425, 646.0),
        ];
        let r = e17_reaction(&failing, true, 589.9);
        assert!(r.is_some_and(|r| r <= 5.0), "reaction {r:?} s");
        // A passing run (this session, 2026-11-22 20:40 UTC): the rate the E17 test polled
        // every 250 ms, -4..12 s around the TCP start (mean 672 kbit/s over 10-30 s). X
        // fell over ~2.5 s; the mean must not make the target slower than the spec's 5 s.
        let passing = [
            (-382, 975.0),
            (-356, 890.0),
            (-331, 870.0),
            (-305, 943.0),
            (-278, 1051.0),
            (-253, 1123.0),
            (-228, 1228.0),
            (-202, 929.0),
            (-177, 929.0),
            (-152, 976.0),
            (-127, 1026.0),
            (-102, 905.0),
            (-76, 954.0),
            (-50, 1049.0),
            (-25, 958.0),
            (0, 962.0),
            (26, 976.0),
            (51, 956.0),
            (77, 870.0),
            (103, 882.0),
            (128, 809.0),
            (154, 808.0),
            (179, 839.0),
            (204, 657.0),
            (229, 557.0),
            (254, 679.0),
            (279, 735.0),
            (304, 725.0),
            (329, 695.0),
            (354, 649.0),
            (380, 675.0),
            (405, 579.0),
            (430, 616.0),
            (455, 596.0),
            (481, 638.0),
            (507, 599.0),
            (533, 560.0),
            (558, 586.0),
            (584, 681.0),
            (609, 589.0),
            (634, 650.0),
            (659, 559.0),
            (684, 575.0),
            (709, 509.0),
            (734, 522.0),
            (760, 515.0),
            (787, 579.0),
            (812, 666.0),
            (837, 779.0),
            (863, 842.0),
            (888, 672.0),
            (913, 788.0),
            (938, 664.0),
            (964, 624.0),
            (989, 594.0),
            (1015, 655.0),
            (1040, 626.0),
            (1065, 792.0),
            (1090, 762.0),
            (1116, 724.0),
            (1142, 678.0),
            (1167, 579.0),
            (1193, 745.0),
        ]
        .map(|(cs, k): (i64, f64)| (cs * 10, k));
        let r = e17_reaction(&passing, false, 672.0);
        assert!(r.is_some_and(|r| r <= 5.0), "reaction {r:?} s");
        // An undershoot (this session, 21:02 UTC, failed at 7.6 s with a 2-s window): X fell
        // from 1199 to 305 kbit/s 1.4 s after the TCP start and climbed back at ~20 kbit/s
        // per second (mean 530 over 10-30 s, band 398-663 entered by X itself at 6 s).
        // Every 2-s mean after the drop lay under the band until 7.6 s; the 3-s mean still
        // holds some of the level before the drop.
        let undershoot = [
            (-387, 863.0),
            (-360, 896.0),
            (-334, 945.0),
            (-305, 977.0),
            (-278, 1026.0),
            (-250, 1076.0),
            (-222, 1109.0),
            (-193, 1160.0),
            (-167, 881.0),
            (-140, 775.0),
            (-111, 839.0),
            (-82, 901.0),
            (-54, 942.0),
            (-26, 1004.0),
            (0, 1055.0),
            (31, 1134.0),
            (58, 1199.0),
            (86, 1199.0),
            (113, 568.0),
            (143, 305.0),
            (171, 312.0),
            (198, 316.0),
            (226, 323.0),
            (255, 329.0),
            (282, 334.0),
            (312, 340.0),
            (340, 344.0),
            (368, 351.0),
            (394, 357.0),
            (420, 361.0),
            (447, 366.0),
            (472, 372.0),
            (500, 376.0),
            (525, 382.0),
            (550, 386.0),
            (575, 392.0),
            (600, 397.0),
            (627, 401.0),
            (653, 408.0),
            (679, 412.0),
            (705, 416.0),
            (730, 423.0),
            (757, 427.0),
            (782, 433.0),
            (809, 437.0),
            (835, 441.0),
            (860, 448.0),
            (887, 452.0),
            (912, 458.0),
            (937, 462.0),
            (963, 469.0),
            (991, 473.0),
            (1018, 479.0),
            (1045, 483.0),
            (1070, 488.0),
            (1096, 496.0),
            (1121, 501.0),
            (1146, 507.0),
            (1173, 514.0),
            (1199, 520.0),
        ]
        .map(|(cs, k): (i64, f64)| (cs * 10, k));
        let r = e17_reaction(&undershoot, false, 530.1);
        assert!(r.is_some_and(|r| r <= 5.0), "reaction {r:?} s");
        // A clean step 1000 -> 600 kbit/s: the 3-s mean crosses the dead band 0.75 s in,
        // and the next allowed switch (2 s later) carries mostly the new level.
        let step = [(-10_000, 1000.0), (0, 600.0), (20_000, 600.0)];
        let r = e17_reaction(&step, false, 600.0).unwrap();
        assert!((2.7..=2.8).contains(&r), "step reaction {r} s");
    }

    fn pkt(layer: usize, ts: u32, seq: u16) -> LayerPacket {
        LayerPacket {
            layer,
            header: RtpHeader {
                marker: false,
                payload_type: 96,
                sequence_number: seq,
                timestamp: ts,
                ssrc: 1000 + layer as u32,
                csrcs: Vec::new(),
                extensions: Vec::new(),
                padding: 0,
            },
            payload: vec![layer as u8; 10],
        }
    }

    #[test]
    fn pop_next_sends_pictures_in_order_and_layers_bottom_up() {
        let mut q = vec![VecDeque::new(); 4];
        // Picture at ts 100 on layers 0, 2 and 3 (two packets on 2); ts 200 on 0 and 1;
        // ts 300 on 0. The copy shifted by -250 puts the last picture past the wrap.
        q[0].extend([pkt(0, 100, 1), pkt(0, 200, 2), pkt(0, 300, 3)]);
        q[1].push_back(pkt(1, 200, 1));
        q[2].extend([pkt(2, 100, 1), pkt(2, 100, 2)]);
        q[3].push_back(pkt(3, 100, 1));
        let mut q2: Vec<VecDeque<LayerPacket>> = q.clone();
        for d in q2.iter_mut() {
            for p in d.iter_mut() {
                p.header.timestamp = p.header.timestamp.wrapping_sub(250);
            }
        }
        for queues in [&mut q, &mut q2] {
            let order: Vec<(usize, u16)> = std::iter::from_fn(|| pop_next(queues))
                .map(|p| (p.layer, p.header.sequence_number))
                .collect();
            assert_eq!(
                order,
                vec![(0, 1), (2, 1), (2, 2), (3, 1), (0, 2), (1, 1), (0, 3)]
            );
        }
        assert!(pop_next(&mut []).is_none());
    }

    #[test]
    fn trim_queues_drops_oldest_whole_pictures_and_keeps_the_newest() {
        let mut q = vec![VecDeque::new(); 3];
        // Three pictures (ts 10, 20, 30), each one packet on every layer: 74 bytes each.
        for ts in [10u32, 20, 30] {
            for (k, d) in q.iter_mut().enumerate() {
                d.push_back(pkt(k, ts, ts as u16));
            }
        }
        let one = 10 + HEADER_LEN;
        assert_eq!(trim_queues(&mut q, 9 * one), 0);
        // Room for two pictures minus a byte: the two oldest go, whole.
        assert_eq!(trim_queues(&mut q, 6 * one - 1), 6);
        assert!(q.iter().flatten().all(|p| p.header.timestamp == 30));
        // The newest picture stays, however small the cap.
        assert_eq!(trim_queues(&mut q, 0), 0);
        assert_eq!(q.iter().flatten().count(), 3);
    }

    /// The whole video path of a TFMCC session short of the sockets: the SVC encoder's
    /// packets (MTU reduced by [`VIDEO_PACKET_RESERVE`]), sent in [`pop_next`] order with
    /// [`write_media`] and padding between pictures, come out as packets of at most
    /// `packet_size` bytes (padding exactly that) of one SSRC and one sequence space carrying
    /// both extensions; demultiplexed by
    /// their payload descriptors they assemble and decode, every picture, at full size.
    #[test]
    fn video_packets_are_one_stream_that_decodes() {
        use codec::depay::{Assembler, AssemblerConfig};
        use codec::ladder::LayerLadder;
        use codec::vp9rtp::{LayerStreams, StreamConfig};
        use codec::vpx::{Decoder, SvcConfig, SvcEncoder};
        let size: u16 = 1200;
        let mut conf = SvcConfig::l3t3_720p();
        (conf.width, conf.height, conf.fps_num) = (320, 180, 15);
        let ladder = LayerLadder::spatial_major(&conf.cell_kbps).unwrap();
        let res = (0..3)
            .map(|s| {
                let (w, h) = conf.layer_size(s);
                (w as u16, h as u16)
            })
            .collect();
        let mut streams = LayerStreams::new(
            ladder.clone(),
            res,
            StreamConfig {
                ssrcs: (0..9).map(|k| 500 + k).collect(),
                mtu: (size - VIDEO_PACKET_RESERVE) as usize,
                ext_reserve: 16,
                ..Default::default()
            },
        )
        .unwrap();
        let mut enc = SvcEncoder::new(conf).unwrap();
        enc.set_total_kbps(400).unwrap();
        let r = TfmccRun {
            dest: "127.0.0.1:9".parse().unwrap(),
            packet_size: size,
            ssrc: 77,
            payload_type: 96,
            video: None,
        };
        let mut snd = TfmccSender::new(TfmccConfig::default());
        let mut queues = vec![VecDeque::new(); 9];
        let mut wire: Vec<Vec<u8>> = Vec::new();
        let (mut seq, mut last_ts) = (0u16, 0u32);
        let pictures = 30;
        for i in 0..pictures {
            let f = codec::synth::frame(320, 180, i);
            let pic = enc.encode(&f, i as i64 * 6000).unwrap().unwrap();
            for (k, pk) in streams.packets(&pic).unwrap().into_iter().enumerate() {
                queues[k].extend(pk);
            }
            // Drain, then two padding packets.
            loop {
                let media = pop_next(&mut queues);
                let more = media.is_some();
                if let Some(p) = &media {
                    last_ts = p.header.timestamp;
                }
                let cc = CcFields {
                    layer: 0,
                    bunch_pos: 0,
                    bunch_len: 1,
                    send_time_us: u64::from(i),
                };
                let ext = snd.data_header(Time::from_millis(i as u64)).to_bytes();
                let mut out = Vec::new();
                write_media(&mut out, &r, media, seq, &cc, &ext, last_ts);
                seq = seq.wrapping_add(1);
                wire.push(out);
                if !more {
                    break;
                }
            }
        }
        let mut asm = Assembler::new(ladder.clone(), Some(8), AssemblerConfig::default());
        let mut dec = Decoder::new(1).unwrap();
        let (mut decoded, mut padding) = (0, 0);
        let mut last_size = (0, 0);
        for (n, b) in wire.iter().enumerate() {
            let p = codec::rtp::RtpPacket::parse(b).unwrap();
            // Padding is exactly the packet size, media at most that.
            if p.payload().is_empty() {
                assert_eq!(b.len(), size as usize, "packet {n}");
            } else {
                assert!(b.len() <= size as usize, "packet {n}: {} bytes", b.len());
            }
            assert_eq!((p.ssrc(), p.sequence_number()), (77, n as u16));
            assert!(p.extension(cc_ext::DEFAULT_ID).is_some());
            assert!(p.extension(TFMCC_EXT_ID).is_some());
            if p.payload().is_empty() {
                padding += 1;
                continue;
            }
            let k = Assembler::layer_of_payload(&ladder, p.payload()).expect("layer");
            asm.push(k, &p).unwrap();
            while let Some(pic) = asm.pop() {
                if let Some(f) = dec.decode(&pic.access_unit().unwrap()).unwrap() {
                    decoded += 1;
                    last_size = (f.width, f.height);
                }
            }
        }
        asm.flush();
        while let Some(pic) = asm.pop() {
            if dec.decode(&pic.access_unit().unwrap()).unwrap().is_some() {
                decoded += 1;
            }
        }
        assert_eq!(padding, pictures as usize);
        assert_eq!(decoded, pictures as usize);
        assert_eq!(last_size, (320, 180));
        assert_eq!(asm.stats().pictures_skipped, 0);
    }
}
