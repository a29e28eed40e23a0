//! Single-rate TFMCC sessions (`protocol: tfmcc`): what the API, the WebSocket and `/metrics`
//! show of them, and the session checks. The sending itself (pacing, report vetting, the
//! encoder target) is `session::publisher::tfmcc`, run by the media thread (`crate::pacer`).
//!
//! Signal flow (the session's media thread):
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

use crate::config::ResolvedSession;
use crate::pacer::unix_micros;
use crate::state::lock;
use crate::state::Session;
use serde::Serialize;
use serde_json::{json, Value};
pub use session::publisher::tfmcc::{ReportCounters, Snapshot, HEADER_LEN, VIDEO_PACKET_RESERVE};
use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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

/// Shared between the session thread and the HTTP side.
#[derive(Debug)]
pub struct TfmccState {
    pub feedback_addr: SocketAddrV4,
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

    /// The media thread's latest snapshot and report counters.
    pub fn update(&self, snap: Snapshot, r: ReportCounters, queue_dropped: u64) {
        *lock(&self.snap) = snap;
        self.reports.store(r.accepted, Ordering::Relaxed);
        self.dropped_malformed.store(r.malformed, Ordering::Relaxed);
        self.dropped_forged.store(r.forged, Ordering::Relaxed);
        self.dropped_auth.store(r.auth, Ordering::Relaxed);
        self.dropped_replayed.store(r.replayed, Ordering::Relaxed);
        self.dropped_rate_limited
            .store(r.rate_limited, Ordering::Relaxed);
        self.clamped.store(r.clamped, Ordering::Relaxed);
        self.queue_dropped.store(queue_dropped, Ordering::Relaxed);
    }

    /// The encoder target switched (video sessions).
    pub fn log_switch(&self, kbps: u32, rate_bps: f64, x_bps: f64) {
        let mut log = lock(&self.target_log);
        if log.len() >= MAX_SWITCH_LOG {
            log.pop_front();
        }
        log.push_back(TargetSwitch {
            unix_s: unix_micros() as f64 / 1e6,
            target_bps: f64::from(kbps) * 1e3,
            rate_bps,
            x_bps,
        });
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
    use congestion::tfmcc::{TfmccConfig, TfmccSender};
    use congestion::wire::cc_ext::{self, CcFields};
    use congestion::wire::tfmcc::TFMCC_EXT_ID;
    use congestion::Time;
    use session::publisher::tfmcc::queue::pop_next;
    use session::publisher::tfmcc::{write_media, Wire};

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
        let r = Wire {
            packet_size: size,
            ssrc: 77,
            payload_type: 96,
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
                queues[k].extend(pk.into_iter().map(|lp| session::publisher::MediaPacket {
                    header: lp.header,
                    payload: lp.payload,
                }));
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
