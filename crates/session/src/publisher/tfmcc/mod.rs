//! TFMCC sending (`protocol: tfmcc`): one group whose announced rate is the ceiling, packets
//! sent singly at `min(X, ceiling)` on the nominal schedule of RFC 4654 §3.7 (the next send
//! time is the previous *nominal* send time plus `s / X`, re-evaluated with the current X, so
//! a rate change takes effect on the next packet; video packets are paced by their bytes),
//! receiver reports vetted ([`gate`]) before the sender acts on them, and a video encoder
//! target that follows the rate ([`follower`]).
//!
//! Reports and media requests come to the sender's unicast address on the session's feedback
//! port ([`proto::SessionInfo::feedback_port_or_default`]: layer 0's port + 1 unless the SAM
//! announces another; RFC 3550 §11: data ports are `port + 2k`, so odd ports are free).

pub mod follower;
pub mod gate;
pub mod queue;

use crate::publisher::requests::EncoderControl;
use crate::publisher::MediaPacket;
use congestion::tfmcc::{TfmccConfig, TfmccSender};
use follower::TargetFollower;
use gate::{Refused, ReportGate};
use proto::rtp::RtpHeader;
use proto::wire::cc_ext::{self, CcFields};
use proto::wire::tfmcc::TFMCC_EXT_ID;
use proto::Time;
use security::auth::ReportMac;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::net::IpAddr;
use std::time::Duration;

/// Bytes of RTP header a TFMCC data packet needs: 12 fixed + 4 extension header + the
/// two-byte-form elements (2 + 11 cc, 2 + 32 TFMCC) padded to 48.
pub const HEADER_LEN: usize = 12 + 4 + 48;

/// Bytes a video TFMCC session's packetizer must leave free beyond what the layered sender
/// needs (RTP header + a 16-byte cc extension block): the TFMCC element and the two-byte
/// form make the header [`HEADER_LEN`] instead of 28. The session's encoder is started with
/// `packet_size - VIDEO_PACKET_RESERVE` as its MTU.
pub const VIDEO_PACKET_RESERVE: u16 = (HEADER_LEN - 28) as u16;

/// Reports per receiver kept for the CLR's RTT and rate (oldest forgotten beyond this).
const MAX_TRACKED: usize = 4096;

/// What a data packet is made of.
#[derive(Clone, Debug)]
pub struct Wire {
    pub packet_size: u16,
    pub ssrc: u32,
    pub payload_type: u8,
}

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

/// Report counters by outcome.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ReportCounters {
    pub accepted: u64,
    pub malformed: u64,
    pub forged: u64,
    pub auth: u64,
    pub replayed: u64,
    pub rate_limited: u64,
    /// Verified reports whose rate request the influence limiter raised.
    pub clamped: u64,
}

/// The TFMCC sending state of a session.
pub struct TfmccSend {
    sender: TfmccSender,
    gate: ReportGate,
    follower: Option<TargetFollower>,
    pub(crate) queues: Vec<VecDeque<MediaPacket>>,
    wire: Wire,
    ceiling_bps: f64,
    last_nominal: Option<Time>,
    /// Bits of the packet sent last: the next one is due that many bits later at the rate.
    last_bits: f64,
    seq: u16,
    /// RTP timestamp of the last media packet: padding packets carry it.
    last_ts90: u32,
    heard: BTreeMap<u32, (ReceiverView, Time)>,
    pub reports: ReportCounters,
    /// Media packets dropped from the send queue ([`queue::trim_queues`]).
    pub queue_dropped: u64,
    pub resyncs: u64,
    controls: VecDeque<EncoderControl>,
}

impl TfmccSend {
    /// `ceiling_bps`: the announced rate; `video_max_kbps`: the ladder's total for a video
    /// session (whose encoder target then follows the rate), `None` for synthetic data.
    pub fn new(
        wire: Wire,
        ceiling_bps: f64,
        mac: Option<ReportMac>,
        video_cells: Option<(usize, u32)>,
    ) -> TfmccSend {
        let cfg = TfmccConfig {
            packet_size: wire.packet_size as u32,
            ..Default::default()
        };
        let gate = ReportGate::new(
            mac,
            ceiling_bps / (8.0 * f64::from(wire.packet_size.max(1))),
        );
        TfmccSend {
            sender: TfmccSender::new(cfg),
            gate,
            follower: video_cells.map(|(_, max)| TargetFollower::new(wire.packet_size, max)),
            queues: video_cells.map_or(Vec::new(), |(n, _)| vec![VecDeque::new(); n]),
            last_bits: 8.0 * wire.packet_size as f64,
            wire,
            ceiling_bps,
            last_nominal: None,
            seq: 0,
            last_ts90: 0,
            heard: BTreeMap::new(),
            reports: ReportCounters::default(),
            queue_dropped: 0,
            resyncs: 0,
            controls: VecDeque::new(),
        }
    }

    /// The rate sent at, bit/s: `min(X, ceiling)`.
    pub fn rate(&self) -> f64 {
        self.sender.poll_rate().min(self.ceiling_bps).max(1.0)
    }

    fn due(&self, now: Time) -> Time {
        let interval = Duration::from_secs_f64((self.last_bits / self.rate()).min(64.0));
        self.last_nominal.map_or(now, |l| l + interval)
    }

    /// When the next packet or sender timer is due.
    pub fn poll_timeout(&self, now: Time) -> Time {
        let d = self.due(now);
        self.sender.poll_timeout().map_or(d, |t| t.min(d))
    }

    /// An encoder control (target switch) to hand out.
    pub fn poll_control(&mut self) -> Option<EncoderControl> {
        self.controls.pop_front()
    }

    /// One receiver report from `src`.
    pub fn handle_report(&mut self, now: Time, src: IpAddr, bytes: &[u8]) {
        let window = Duration::from_secs_f64(self.sender.r_max().clamp(1e-3, 60.0));
        let vetted = self
            .gate
            .vet(bytes, now, src, self.sender.rate_bytes(), window);
        self.reports.clamped = self.gate.clamped();
        match vetted {
            Ok(rep) => {
                self.reports.accepted += 1;
                self.sender.handle_parsed_report(now, &rep);
                if self.heard.len() >= MAX_TRACKED && !self.heard.contains_key(&rep.rid) {
                    if let Some(k) = self
                        .heard
                        .iter()
                        .min_by_key(|(_, (_, t))| *t)
                        .map(|(k, _)| *k)
                    {
                        self.heard.remove(&k);
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
                    self.heard.remove(&rep.rid);
                } else {
                    self.heard.insert(rep.rid, (view, now));
                }
            }
            Err(Refused::Malformed) => self.reports.malformed += 1,
            Err(Refused::Forged) => self.reports.forged += 1,
            Err(Refused::Auth) => self.reports.auth += 1,
            Err(Refused::Replayed) => self.reports.replayed += 1,
            Err(Refused::RateLimited) => self.reports.rate_limited += 1,
        }
    }

    /// The next data packet into `out` if one is due at `now`; returns when it was due.
    pub fn transmit(&mut self, now: Time, send_time_us: u64, out: &mut Vec<u8>) -> Option<Time> {
        if self.sender.poll_timeout().is_some_and(|t| now >= t) {
            self.sender.handle_timeout(now);
        }
        let rate = self.rate();
        if let Some(f) = self.follower.as_mut() {
            if let Some(kbps) = f.update(now, rate) {
                self.controls.push_back(EncoderControl::Target {
                    kbps,
                    rate_bps: f.mean_rate(now).unwrap_or(rate),
                    x_bps: rate,
                });
            }
        }
        let mut due = self.due(now);
        if now.saturating_since(due) > Duration::from_secs(1) {
            // Held off the CPU: re-anchor instead of bursting.
            self.resyncs += 1;
            due = now;
        }
        if now < due {
            return None;
        }
        self.last_nominal = Some(due);
        let fields = self.sender.data_header(now);
        let cc = CcFields {
            layer: 0,
            bunch_pos: 0,
            bunch_len: 1,
            send_time_us,
        };
        out.clear();
        if self.follower.is_some() {
            let s_bits = 8.0 * self.wire.packet_size as f64;
            let max_bytes = (rate * QUEUE_CAP_S / 8.0).max(s_bits);
            self.queue_dropped += queue::trim_queues(&mut self.queues, max_bytes as usize) as u64;
            let media = queue::pop_next(&mut self.queues);
            if let Some(p) = &media {
                self.last_ts90 = p.header.timestamp;
            }
            write_media(
                out,
                &self.wire,
                media,
                self.seq,
                &cc,
                &fields.to_bytes(),
                self.last_ts90,
            );
        } else {
            let ts90 = (send_time_us.wrapping_mul(9) / 100) as u32;
            write_packet(out, &self.wire, self.seq, &cc, &fields.to_bytes(), ts90);
        }
        self.seq = self.seq.wrapping_add(1);
        self.last_bits = 8.0 * out.len().max(1) as f64;
        Some(due)
    }

    /// The state as the API shows it (`at_unix_s` is the host's to fill).
    pub fn snapshot(&mut self, now: Time) -> Snapshot {
        // X as of this instant.
        self.sender.advance_to(now);
        let s = self.sender.stats();
        let rate = self.rate();
        let clr_report = s.clr.and_then(|id| self.heard.get(&id).map(|(v, _)| *v));
        Snapshot {
            at_unix_s: 0.0,
            rate_bps: self.sender.poll_rate().min(self.ceiling_bps),
            sender_rate_bps: s.rate_bps,
            ceiling_bps: self.ceiling_bps,
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
            receivers_heard: self.heard.len(),
            encoder_target_bps: self
                .follower
                .as_ref()
                .and_then(TargetFollower::current)
                .map(|k| f64::from(k) * 1e3),
            target_switches: self.follower.as_ref().map_or(0, TargetFollower::switches),
            queue_ms: self.follower.as_ref().map(|_| {
                let bytes: usize = self
                    .queues
                    .iter()
                    .flatten()
                    .map(|p| p.payload.len() + HEADER_LEN)
                    .sum();
                8e3 * bytes as f64 / rate
            }),
        }
    }
}

pub use queue::QUEUE_CAP_S;

/// Appends one data packet of exactly `size` bytes.
pub fn write_packet(out: &mut Vec<u8>, r: &Wire, seq: u16, cc: &CcFields, ext: &[u8], ts90: u32) {
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
pub fn write_media(
    out: &mut Vec<u8>,
    r: &Wire,
    p: Option<MediaPacket>,
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
        crate::publisher::packet::pad_to(out, start, r.packet_size as usize);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use congestion::tfmcc::TfmccReceiver;
    use congestion::wire::tfmcc::TfmccDataFields;
    use congestion::{Action, LayeredController, PacketArrival};

    #[test]
    fn data_packets_have_exact_size_and_both_extensions() {
        let r = Wire {
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
        let p = proto::rtp::RtpPacket::parse(&out).unwrap();
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
            rx.handle_packet_extended(t, &arr, block).unwrap();
            if rx.poll_timeout().is_some_and(|(d, _)| t >= d) {
                rx.handle_timeout(t);
            }
            while let Some(a) = rx.poll_action() {
                if let Action::SendFeedback(b) = a {
                    rep = Some(gate::vet_report(&b, t.as_micros() as u32).unwrap());
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
