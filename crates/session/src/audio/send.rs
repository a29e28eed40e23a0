//! The audio track's send side: one encoded Opus frame in, its RTP packet (RFC 7587: payload
//! type, SSRC, sequence number, 48-kHz timestamp, marker at a talkspurt's start) and, with
//! repair, the lagged one-packet repair of the packet [`proto::fec::LaggedRepair`] says is
//! due, both sealed in encrypted sessions, out as datagrams.
//!
//! The packets are not paced into bunches: the host sends each as soon as it is ready, between
//! two bunches (docs/protocols/audio.md "Sent between bunches, not padded"). One constant-bit-
//! rate packet every 20 ms is the stream's own constant rate.

use super::AudioLayout;
use proto::fec::{FecParams, LaggedRepair};
use proto::opus::OpusPacketizer;
use proto::rtp::{RtpHeader, RtpPacket};
use security::auth::MediaSealer;
use std::collections::VecDeque;
use std::net::SocketAddrV4;

/// Datagrams queued before the oldest are dropped (1 s of packets and their repairs).
pub const MAX_QUEUED: usize = 100;

/// One encoded frame from the host's encoder.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AudioFrame {
    /// The Opus packet.
    pub opus: Vec<u8>,
    /// RTP time of its first decoded sample (48 kHz, the session's media clock).
    pub rtp_ts: u32,
    /// The first frame after a discontinuity (source restart): its packet carries the marker.
    pub discontinuity: bool,
}

/// What a [`Datagram`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DatagramKind {
    Media,
    Repair,
    /// An RTCP sender report (`publisher::reports`).
    Report,
}

/// A datagram to send on its own, outside the bunches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Datagram {
    pub to: SocketAddrV4,
    pub bytes: Vec<u8>,
    pub kind: DatagramKind,
}

/// Counters of the send side.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AudioSendStats {
    /// Media packets built, and their payload octets (RFC 3550 §6.4.1, for the sender report).
    pub packets: u64,
    pub octets: u64,
    pub repairs: u64,
    /// Frames that were not valid Opus packets (not sent).
    pub refused: u64,
    /// Packets the sealer refused (not sent, never in the clear).
    pub seal_errors: u64,
    /// Datagrams dropped from a full queue (the host did not send them in time).
    pub dropped: u64,
}

/// The send side of the audio track.
#[derive(Debug)]
pub struct AudioSend {
    pkt: OpusPacketizer,
    dest: SocketAddrV4,
    repair: Option<(LaggedRepair, SocketAddrV4)>,
    /// Extended sequence number of the last media packet (the sealer's nonce counter).
    ext_seq: Option<u64>,
    /// Extended sequence number of the last repair: the repairs are numbered 1, 2, ... on
    /// their own SSRC, so it is their count.
    repair_ext_seq: u64,
    queue: VecDeque<Datagram>,
    stats: AudioSendStats,
}

impl AudioSend {
    /// The send side of the track `l`: repairs (when announced) on SSRC `l.ssrc + 1` to the
    /// repair port, with the lag the announced span gives (span = lag + 1).
    pub fn new(l: &AudioLayout) -> crate::Result<AudioSend> {
        let repair = match (&l.repair, l.repair_port()) {
            (Some((pt, params)), Some(port)) => {
                let p = FecParams::from_announced(*pt, params)?;
                let lag = p.span.saturating_sub(1);
                let enc = LaggedRepair::new(lag, *pt, l.ssrc.wrapping_add(1))?;
                Some((enc, SocketAddrV4::new(l.group, port)))
            }
            _ => None,
        };
        Ok(AudioSend {
            pkt: OpusPacketizer::new(l.payload_type, l.ssrc, (l.ssrc >> 16) as u16),
            dest: SocketAddrV4::new(l.group, l.port),
            repair,
            ext_seq: None,
            repair_ext_seq: 0,
            queue: VecDeque::new(),
            stats: AudioSendStats::default(),
        })
    }

    pub fn stats(&self) -> AudioSendStats {
        self.stats
    }

    /// Whether datagrams wait to be sent.
    pub fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }

    /// One encoded frame: its packet and the repair due with it are queued.
    pub fn push(&mut self, f: AudioFrame, mut sealer: Option<&mut MediaSealer>) {
        if f.discontinuity {
            self.pkt.discontinuity();
        }
        let Ok(rtp) = self.pkt.packetize(&f.opus, f.rtp_ts) else {
            self.stats.refused += 1;
            return;
        };
        let seq = u16::from_be_bytes([rtp[2], rtp[3]]);
        let ext = match self.ext_seq {
            None => seq as u64,
            Some(l) => l + seq.wrapping_sub(l as u16) as u64,
        };
        self.ext_seq = Some(ext);
        let repair = match (&mut self.repair, RtpPacket::parse(&rtp)) {
            (Some((enc, _)), Ok(p)) => {
                let h = RtpHeader {
                    marker: p.marker(),
                    payload_type: p.payload_type(),
                    timestamp: p.timestamp(),
                    ..Default::default()
                };
                enc.push_media(seq, &h, p.payload())
            }
            _ => None,
        };
        let octets = (rtp.len() - proto::rtp::FIXED_HEADER_LEN) as u64;
        match seal(sealer.as_deref_mut(), rtp, ext) {
            Some(bytes) => {
                self.stats.packets += 1;
                self.stats.octets += octets;
                self.enqueue(self.dest, bytes, DatagramKind::Media);
            }
            None => self.stats.seal_errors += 1,
        }
        let (Some((_, dest)), Some(r)) = (&self.repair, repair) else {
            return;
        };
        let dest = *dest;
        let Ok(plain) = r.header.to_vec(&r.payload) else {
            return;
        };
        self.repair_ext_seq += 1;
        match seal(sealer, plain, self.repair_ext_seq) {
            Some(bytes) => {
                self.stats.repairs += 1;
                self.enqueue(dest, bytes, DatagramKind::Repair);
            }
            None => self.stats.seal_errors += 1,
        }
    }

    fn enqueue(&mut self, to: SocketAddrV4, bytes: Vec<u8>, kind: DatagramKind) {
        self.queue.push_back(Datagram { to, bytes, kind });
        while self.queue.len() > MAX_QUEUED {
            self.queue.pop_front();
            self.stats.dropped += 1;
        }
    }

    /// The next datagram to send.
    pub fn poll_datagram(&mut self) -> Option<Datagram> {
        self.queue.pop_front()
    }
}

/// `packet` sealed as `ext` (encrypted sessions) or as it is; `None` if the sealer refuses.
fn seal(sealer: Option<&mut MediaSealer>, packet: Vec<u8>, ext: u64) -> Option<Vec<u8>> {
    match sealer {
        Some(s) => s.seal(&packet, ext).ok(),
        None => Some(packet),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    pub(crate) fn layout(repair: bool) -> AudioLayout {
        AudioLayout {
            layer: 0,
            group: Ipv4Addr::new(239, 9, 9, 9),
            port: 5100,
            ssrc: 9,
            payload_type: 111,
            channels: 2,
            repair: repair.then(|| (97, vec![1, 11])),
        }
    }

    /// Packets in order with the marker on the first and after a discontinuity; each packet's
    /// copy 10 packets later on the repair stream's SSRC and port; invalid Opus refused.
    #[test]
    fn packets_and_lagged_repairs() {
        let mut s = AudioSend::new(&layout(true)).unwrap();
        for i in 0..16u32 {
            s.push(
                AudioFrame {
                    opus: vec![0xfc, 1, 2],
                    rtp_ts: i * 960,
                    discontinuity: i == 12,
                },
                None,
            );
        }
        s.push(
            AudioFrame {
                opus: vec![],
                rtp_ts: 0,
                discontinuity: false,
            },
            None,
        );
        let mut media = Vec::new();
        let mut repairs = Vec::new();
        while let Some(d) = s.poll_datagram() {
            let p = RtpPacket::parse(&d.bytes).unwrap();
            let row = (p.ssrc(), p.payload_type(), p.sequence_number(), p.marker());
            match d.kind {
                DatagramKind::Media => {
                    assert_eq!(d.to.port(), 5100);
                    media.push(row)
                }
                DatagramKind::Repair => {
                    assert_eq!(d.to.port(), 5102);
                    repairs.push(row)
                }
                DatagramKind::Report => panic!("the audio send side makes no reports"),
            }
        }
        assert_eq!(media.len(), 16);
        assert!(media
            .iter()
            .enumerate()
            .all(|(i, m)| m.0 == 9 && m.2 == i as u16 && m.3 == (i == 0 || i == 12)));
        assert_eq!(repairs.len(), 6);
        assert!(repairs
            .iter()
            .enumerate()
            .all(|(i, r)| (r.0, r.1, r.2) == (10, 97, 1 + i as u16)));
        let st = s.stats();
        assert_eq!((st.packets, st.repairs, st.refused), (16, 6, 1));
        assert_eq!(st.octets, 16 * 3);
    }
}
