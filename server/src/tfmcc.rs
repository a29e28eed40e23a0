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
use codec::rtp::RtpHeader;
use congestion::tfmcc::{TfmccConfig, TfmccSender};
use congestion::wire::auth::{InfluenceConfig, InfluenceLimiter, ReportMac};
use congestion::wire::cc_ext::{self, CcFields};
use congestion::wire::tfmcc::{TfmccReport, TFMCC_EXT_ID};
use congestion::{LayerInfo, Time};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes of RTP header a TFMCC data packet needs: 12 fixed + 4 extension header + the
/// two-byte-form elements (2 + 11 cc, 2 + 32 TFMCC) padded to 48.
pub const HEADER_LEN: usize = 12 + 4 + 48;

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
    pub receivers_heard: usize,
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
            "round": s.round,
            "r_max_s": s.r_max_s,
            "slow_start": s.slow_start,
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
    let mut first = true;
    let mut seq: u16 = 0;
    let mut buf = Vec::with_capacity(r.packet_size as usize);
    let mut rbuf = [0u8; 2048];
    let mut heard: BTreeMap<u32, (ReceiverView, Instant)> = BTreeMap::new();
    let mut last_snap = t0;
    let fd = fb.as_raw_fd();
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
        let interval = Duration::from_secs_f64((s_bits / rate).min(64.0));
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
            let ts90 = (send_us.wrapping_mul(9) / 100) as u32;
            write_packet(&mut buf, &r, seq, &cc, &fields.to_bytes(), ts90);
            seq = seq.wrapping_add(1);
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
            let s = sender.stats();
            let clr_report = s.clr.and_then(|id| heard.get(&id).map(|(v, _)| *v));
            *lock(&st.snap) = Snapshot {
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
                receivers_heard: heard.len(),
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
    if r.video.is_some() {
        return Err(crate::error::Error::config(
            &format!("{ctx}.source"),
            "TFMCC sessions run the synthetic source only (video: see docs/server.md)",
        ));
    }
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
    let gauges: [(&str, &str, G); 6] = [
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
}
