//! RTCP sender reports of every stream a session sends (RFC 3550 §6.4.1, SR + SDES CNAME):
//! each stream's NTP ↔ RTP time mapping, which is how a receiver puts the audio and the video
//! of a session on one clock (docs/protocols/audio.md "Lip sync").
//!
//! One report per stream every [`ReportConfig::interval`], to the stream's group on its RTP
//! port + 1: each video layer (SSRC `ssrc_base + k`, 90 kHz) and the audio stream (48 kHz).
//! The report's NTP time is the Publisher's `now` on the wall clock (`now +
//! clock_offset_us`), its RTP time the session's media clock at that instant, and its packet
//! and octet counts what the Publisher has sent of the stream (video octets estimated at the
//! packet's payload size: a layer's packets all have the same size). In an encrypted session
//! each report is sealed (`MediaSealer::seal_rtcp`: authenticated under a key derived from the
//! media key), since a forged mapping would move every player's clock.

use super::Publisher;
use crate::audio::{AudioLayout, Datagram, DatagramKind, MediaClock};
use proto::rtcp::{ntp_from_unix_ns, SenderReport};
use proto::{SessionInfo, Time};
use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::time::Duration;

/// Default time between two reports of a stream.
pub const REPORT_INTERVAL: Duration = Duration::from_secs(1);

/// What the sender reports need besides the announcement.
#[derive(Clone, Debug)]
pub struct ReportConfig {
    /// The session's media clock (RTP time 0 of every stream).
    pub clock: MediaClock,
    /// The CNAME every report carries (one per session: receivers group streams by it).
    pub cname: String,
    pub interval: Duration,
}

/// One reported stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Target {
    ssrc: u32,
    rate: u32,
    rtcp: SocketAddrV4,
    /// The video layer whose packets it counts; `None`: the audio stream.
    layer: Option<usize>,
}

pub(super) struct Reports {
    cfg: ReportConfig,
    targets: Vec<Target>,
    next: Option<Time>,
    queue: VecDeque<Datagram>,
    pub(super) sent: u64,
}

impl Reports {
    pub(super) fn new(cfg: ReportConfig, info: &SessionInfo, ssrc_base: u32) -> Reports {
        let mut targets: Vec<Target> = info
            .layers
            .iter()
            .enumerate()
            .map(|(k, l)| Target {
                ssrc: ssrc_base.wrapping_add(k as u32),
                rate: 90_000,
                rtcp: SocketAddrV4::new(l.group, l.port.wrapping_add(1)),
                layer: Some(k),
            })
            .collect();
        if let Some(a) = AudioLayout::of(info) {
            targets.push(Target {
                ssrc: a.ssrc,
                rate: 48_000,
                rtcp: SocketAddrV4::new(a.group, a.port.wrapping_add(1)),
                layer: None,
            });
        }
        Reports {
            cfg,
            targets,
            next: None,
            queue: VecDeque::new(),
            sent: 0,
        }
    }
}

impl Publisher {
    /// The next sender report to send on its own, between bunches: every stream's report
    /// is queued when the reports are due (the first at the first call), then handed out one
    /// at a time. `None` in a session without reports.
    #[must_use]
    pub fn poll_report(&mut self, now: Time) -> Option<Datagram> {
        let r = self.reports.as_mut()?;
        if r.queue.is_empty() && now >= *r.next.get_or_insert(now) {
            r.next = Some(now + r.cfg.interval);
            let unix_ns = now
                .as_micros()
                .saturating_add(self.clock_offset_us)
                .saturating_mul(1000);
            let payload = self.plain_size.saturating_sub(super::DATA_HEADER_LEN) as u64;
            let audio = self.audio.as_ref().map_or((0, 0), |a| {
                let s = a.stats();
                (s.packets, s.octets)
            });
            for t in &r.targets {
                let (packets, octets) = match t.layer {
                    Some(k) => {
                        let p = self.stats.per_layer_packets.get(k).copied().unwrap_or(0);
                        (p, p * payload)
                    }
                    None => audio,
                };
                let sr = SenderReport {
                    ssrc: t.ssrc,
                    ntp: ntp_from_unix_ns(unix_ns),
                    rtp_ts: r.cfg.clock.rtp(unix_ns, t.rate),
                    packets: packets as u32,
                    octets: octets as u32,
                };
                // An encrypted session's reports are sealed (security::auth, "Sender
                // reports"): in the clear anyone could move its players' lip sync. One
                // the sealer refuses is not sent at all.
                let plain = sr.to_bytes(&r.cfg.cname);
                let bytes = match self.sealer.as_mut() {
                    None => plain,
                    Some(s) => match s.seal_rtcp(&plain) {
                        Ok(b) => b,
                        Err(_) => {
                            self.stats.seal_errors += 1;
                            continue;
                        }
                    },
                };
                r.queue.push_back(Datagram {
                    to: t.rtcp,
                    bytes,
                    kind: DatagramKind::Report,
                });
            }
        }
        let d = r.queue.pop_front()?;
        r.sent += 1;
        Some(d)
    }

    /// When the next sender reports are due (`None`: no reports, or none sent yet).
    pub fn next_report(&self) -> Option<Time> {
        self.reports.as_ref().and_then(|r| r.next)
    }

    /// Sender reports handed out.
    pub fn reports_sent(&self) -> u64 {
        self.reports.as_ref().map_or(0, |r| r.sent)
    }
}
