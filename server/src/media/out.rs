//! What the sender emits besides the layers' bunches: the audio track's packets and the RTCP
//! sender reports of every stream (docs/protocols/audio.md).
//!
//! The pacer calls [`SideStreams::poll`] between bunches, never inside one (a bunch is one
//! `sendmmsg`), so the equal-size back-to-back packets the controllers measure stay as they
//! are; audio packets go out as their own small packets as soon as they are ready, which is
//! their natural constant rate (one constant-bit-rate packet per 20 ms). Padding them to the
//! video packet size instead would cost several hundred kbit/s per session.

use super::audio::{AudioQueue, MediaClock};
use codec::rtcp::{ntp_from_unix_ns, SenderReport};
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time between two sender reports of a stream.
pub const SR_INTERVAL: Duration = Duration::from_secs(1);

/// The audio track as the sender sees it.
#[derive(Clone, Debug)]
pub struct AudioSide {
    pub queue: Arc<AudioQueue>,
    pub dest: SocketAddrV4,
    /// Its burst repair (lagged copies) and where the repair stream goes.
    pub repair: Option<(codec::fec::LaggedRepair, SocketAddrV4)>,
}

/// A stream that gets sender reports: its SSRC, RTP clock rate and RTCP destination (its
/// group, RTP port + 1).
#[derive(Clone, Debug)]
pub struct SrStream {
    pub ssrc: u32,
    pub rate: u32,
    pub rtcp: SocketAddrV4,
}

/// Audio and RTCP of one session, driven by the pacer thread (not `Clone`: its sealer's key
/// queue has one consumer).
#[derive(Debug)]
pub struct SideStreams {
    pub audio: Option<AudioSide>,
    pub clock: MediaClock,
    /// Video streams in layer order, then the audio stream last if there is one.
    pub reports: Vec<SrStream>,
    pub cname: String,
    /// Video payload bytes per packet (the SR's octet count is estimated from it).
    pub video_payload: u64,
    pub sealer: Option<security::auth::MediaSealer>,
    next_sr: Option<Instant>,
    audio_ext_seq: Option<u64>,
    /// Extended sequence number of the last repair sealed (its own SSRC, its own nonces).
    repair_ext_seq: u64,
    pub repairs_sent: u64,
    audio_octets: u64,
    audio_packets: u64,
    pub reports_sent: u64,
}

impl SideStreams {
    pub fn new(
        audio: Option<AudioSide>,
        clock: MediaClock,
        reports: Vec<SrStream>,
        cname: String,
        video_payload: u64,
        sealer: Option<security::auth::MediaSealer>,
    ) -> SideStreams {
        SideStreams {
            audio,
            clock,
            reports,
            cname,
            video_payload,
            sealer,
            next_sr: None,
            audio_ext_seq: None,
            repair_ext_seq: 0,
            repairs_sent: 0,
            audio_octets: 0,
            audio_packets: 0,
            reports_sent: 0,
        }
    }

    /// Sends every ready audio packet and the sender reports when due. `video_packets[k]` is
    /// the count of packets layer k has sent. Returns when it next wants to run.
    pub fn poll(&mut self, now: Instant, sock: &UdpSocket, video_packets: &[u64]) -> Instant {
        if let Some(a) = &mut self.audio {
            while let Some(p) = a.queue.pop() {
                let seq = u16::from_be_bytes([p.rtp[2], p.rtp[3]]);
                let ext = match self.audio_ext_seq {
                    None => seq as u64,
                    Some(l) => l + seq.wrapping_sub(l as u16) as u64,
                };
                self.audio_ext_seq = Some(ext);
                let repair = match (&mut a.repair, codec::rtp::RtpPacket::parse(&p.rtp)) {
                    (Some((enc, _)), Ok(rp)) => {
                        let h = codec::rtp::RtpHeader {
                            marker: rp.marker(),
                            payload_type: rp.payload_type(),
                            timestamp: rp.timestamp(),
                            ..Default::default()
                        };
                        enc.push_media(seq, &h, rp.payload())
                    }
                    _ => None,
                };
                let bytes = match self.sealer.as_mut() {
                    Some(s) => match s.seal(&p.rtp, ext) {
                        Ok(b) => b,
                        Err(_) => {
                            a.queue.stats.send_errors.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    },
                    None => p.rtp,
                };
                match sock.send_to(&bytes, a.dest) {
                    Ok(_) => {
                        a.queue.stats.sent.fetch_add(1, Ordering::Relaxed);
                        self.audio_packets += 1;
                        self.audio_octets += bytes.len().saturating_sub(12) as u64;
                    }
                    Err(_) => {
                        a.queue.stats.send_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let (Some((_, dest)), Some(r)) = (&a.repair, repair) else {
                    continue;
                };
                let Ok(plain) = r.header.to_vec(&r.payload) else {
                    continue;
                };
                // The encoder numbers its repairs 1, 2, ...: the extended number is the count.
                self.repair_ext_seq += 1;
                let bytes = match self.sealer.as_mut() {
                    Some(s) => match s.seal(&plain, self.repair_ext_seq) {
                        Ok(b) => b,
                        Err(_) => continue,
                    },
                    None => plain,
                };
                if sock.send_to(&bytes, *dest).is_ok() {
                    self.repairs_sent += 1;
                }
            }
        }
        let due = *self.next_sr.get_or_insert(now);
        if now >= due {
            self.send_reports(sock, video_packets);
            self.next_sr = Some(now + SR_INTERVAL);
        }
        let next = self.next_sr.unwrap_or(now + SR_INTERVAL);
        // Audio packets come every 20 ms: look again within a few ms.
        if self.audio.is_some() {
            next.min(now + Duration::from_millis(4))
        } else {
            next
        }
    }

    fn send_reports(&mut self, sock: &UdpSocket, video_packets: &[u64]) {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let n_video = self.reports.len() - usize::from(self.audio.is_some());
        for (k, s) in self.reports.iter().enumerate() {
            let (packets, octets) = if k < n_video {
                let p = video_packets.get(k).copied().unwrap_or(0);
                (p, p * self.video_payload)
            } else {
                (self.audio_packets, self.audio_octets)
            };
            let sr = SenderReport {
                ssrc: s.ssrc,
                ntp: ntp_from_unix_ns(unix),
                rtp_ts: self.clock.rtp(unix, s.rate),
                packets: packets as u32,
                octets: octets as u32,
            };
            if sock.send_to(&sr.to_bytes(&self.cname), s.rtcp).is_ok() {
                self.reports_sent += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::audio::AudioPacket;

    /// Audio packets leave as they are queued, one datagram each; every stream gets a sender
    /// report whose RTP time is the media clock's at the report's NTP time.
    #[test]
    fn audio_and_reports_go_out() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rtcp = UdpSocket::bind("127.0.0.1:0").unwrap();
        let rep = UdpSocket::bind("127.0.0.1:0").unwrap();
        rep.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        rx.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        rtcp.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let v4 = |s: &UdpSocket| match s.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        let q = Arc::new(AudioQueue::default());
        let clock = MediaClock {
            epoch_ns: 1_700_000_000_000_000_000,
        };
        let mut side = SideStreams::new(
            Some(AudioSide {
                queue: q.clone(),
                dest: v4(&rx),
                repair: crate::media::audio_repair(9).map(|e| (e, v4(&rep))),
            }),
            clock,
            vec![
                SrStream {
                    ssrc: 1,
                    rate: 90_000,
                    rtcp: v4(&rtcp),
                },
                SrStream {
                    ssrc: 9,
                    rate: 48_000,
                    rtcp: v4(&rtcp),
                },
            ],
            "layercast-test".into(),
            1188,
            None,
        );
        let mut pk = codec::opus::OpusPacketizer::new(111, 9, 100);
        for i in 0..16u32 {
            q.push(AudioPacket {
                rtp: pk.packetize(&[0xfc, 1, 2], i * 960).unwrap(),
                capture_ns: 0,
                rtp_ts: i * 960,
            });
        }
        let now = Instant::now();
        let next = side.poll(now, &tx, &[10]);
        assert!(next <= now + Duration::from_millis(4));
        let mut buf = [0u8; 1500];
        for i in 0..16 {
            let n = rx.recv(&mut buf).unwrap();
            let p = codec::rtp::RtpPacket::parse(&buf[..n]).unwrap();
            assert_eq!(p.sequence_number(), 100 + i);
        }
        // The copies of the first 6 came with the last 6, on the repair stream's own SSRC.
        for i in 0..6 {
            let n = rep.recv(&mut buf).unwrap();
            let p = codec::rtp::RtpPacket::parse(&buf[..n]).unwrap();
            assert_eq!(
                (p.ssrc(), p.payload_type(), p.sequence_number()),
                (10, 97, 1 + i)
            );
        }
        assert_eq!(side.repairs_sent, 6);
        let mut srs = Vec::new();
        for _ in 0..2 {
            let n = rtcp.recv(&mut buf).unwrap();
            srs.extend(codec::rtcp::parse_sender_reports(&buf[..n]).unwrap());
        }
        srs.sort_by_key(|s| s.ssrc);
        assert_eq!((srs[0].packets, srs[0].octets), (10, 11_880));
        assert_eq!(srs[1].packets, 16);
        for (s, rate) in [(&srs[0], 90_000), (&srs[1], 48_000)] {
            let t = codec::rtcp::unix_ns_from_ntp(s.ntp);
            assert!(clock.rtp(t, rate).abs_diff(s.rtp_ts) <= 1);
        }
        // Not due again for a second.
        assert_eq!(side.reports_sent, 2);
        side.poll(now + Duration::from_millis(500), &tx, &[10]);
        assert_eq!(side.reports_sent, 2);
    }
}
