//! What the media thread emits besides the layers' bunches: the audio track's datagrams and
//! the RTCP sender reports of every stream (docs/protocols/audio.md).
//!
//! The pacer calls [`SideStreams::poll`] between bunches, never inside one (a bunch is one
//! `sendmmsg`), so the equal-size back-to-back packets the controllers measure stay as they
//! are. The encoder's Opus frames go into the session's `Publisher`, which makes them RTP
//! packets and lagged repairs (`session::audio`); this shell sends each as its own small
//! datagram as soon as it is ready, which is the stream's natural constant rate (one
//! constant-bit-rate packet per 20 ms). Padding them to the video packet size instead would
//! cost several hundred kbit/s per session.

use super::audio::{AudioQueue, MediaClock};
use codec::rtcp::{ntp_from_unix_ns, SenderReport};
use std::net::{SocketAddrV4, UdpSocket};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Time between two sender reports of a stream.
pub const SR_INTERVAL: Duration = Duration::from_secs(1);

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
    /// The audio encoder's frames (a session with an audio track).
    pub audio: Option<Arc<AudioQueue>>,
    pub clock: MediaClock,
    /// Video streams in layer order, then the audio stream last if there is one.
    pub reports: Vec<SrStream>,
    pub cname: String,
    /// Video payload bytes per packet (the SR's octet count is estimated from it).
    pub video_payload: u64,
    next_sr: Option<Instant>,
    pub repairs_sent: u64,
    pub reports_sent: u64,
}

impl SideStreams {
    pub fn new(
        audio: Option<Arc<AudioQueue>>,
        clock: MediaClock,
        reports: Vec<SrStream>,
        cname: String,
        video_payload: u64,
    ) -> SideStreams {
        SideStreams {
            audio,
            clock,
            reports,
            cname,
            video_payload,
            next_sr: None,
            repairs_sent: 0,
            reports_sent: 0,
        }
    }

    /// Hands every ready audio frame to `publisher`, sends the datagrams it makes of them, and
    /// the sender reports when due. Returns when it next wants to run.
    pub fn poll(
        &mut self,
        now: Instant,
        sock: &UdpSocket,
        publisher: &mut session::Publisher,
    ) -> Instant {
        if let Some(q) = &self.audio {
            while let Some(p) = q.pop() {
                publisher.push_audio(p.frame);
            }
            while let Some(d) = publisher.poll_datagram() {
                let ok = sock.send_to(&d.bytes, d.to).is_ok();
                match (d.kind, ok) {
                    (session::audio::DatagramKind::Media, true) => {
                        q.stats.sent.fetch_add(1, Ordering::Relaxed);
                    }
                    (session::audio::DatagramKind::Repair, true) => self.repairs_sent += 1,
                    (_, false) => {
                        q.stats.send_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        let due = *self.next_sr.get_or_insert(now);
        if now >= due {
            let audio = publisher
                .audio_stats()
                .map_or((0, 0), |a| (a.packets, a.octets));
            self.send_reports(sock, &publisher.stats().per_layer_packets, audio);
            self.next_sr = Some(now + SR_INTERVAL);
        }
        let next = self.next_sr.unwrap_or(now + SR_INTERVAL);
        // Audio frames come every 20 ms: look again within a few ms.
        if self.audio.is_some() {
            next.min(now + Duration::from_millis(4))
        } else {
            next
        }
    }

    fn send_reports(&mut self, sock: &UdpSocket, video_packets: &[u64], audio: (u64, u64)) {
        let unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let n_video = self.reports.len() - usize::from(self.audio.is_some());
        for (k, s) in self.reports.iter().enumerate() {
            let (packets, octets) = if k < n_video {
                let p = video_packets.get(k).copied().unwrap_or(0);
                (p, p * self.video_payload)
            } else {
                audio
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
    use std::net::Ipv4Addr;

    /// An RTP socket and the repair socket 2 ports above it, on loopback.
    fn rtp_and_repair() -> (UdpSocket, UdpSocket) {
        for p in (21_000..40_000u16).step_by(97) {
            if let (Ok(a), Ok(b)) = (
                UdpSocket::bind(("127.0.0.1", p)),
                UdpSocket::bind(("127.0.0.1", p + 2)),
            ) {
                return (a, b);
            }
        }
        panic!("no two free loopback ports");
    }

    /// Audio frames become packets that leave as they are queued, one datagram each, with
    /// their copies 10 packets later on the repair port; every stream gets a sender report
    /// whose RTP time is the media clock's at the report's NTP time.
    #[test]
    fn audio_and_reports_go_out() {
        let (rx, rep) = rtp_and_repair();
        let rtcp = UdpSocket::bind("127.0.0.1:0").unwrap();
        for s in [&rx, &rep, &rtcp] {
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        }
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let v4 = |s: &UdpSocket| match s.local_addr().unwrap() {
            std::net::SocketAddr::V4(a) => a,
            _ => unreachable!(),
        };
        let mut info = proto::SessionInfo::equal_layers(1, 100_000, Ipv4Addr::LOCALHOST, 9);
        let settings = crate::media::audio::AudioSettings {
            channels: 2,
            bitrate: 64_000,
            inband_fec: true,
        };
        info.tracks.push(crate::media::audio_track(
            &settings,
            Ipv4Addr::LOCALHOST,
            v4(&rx).port(),
            9,
            settings.rate_bps(0),
        ));
        let mut publisher =
            session::Publisher::new(session::publisher::PublisherConfig::new(info, 1)).unwrap();
        let q = Arc::new(AudioQueue::default());
        let clock = MediaClock {
            epoch_ns: 1_700_000_000_000_000_000,
        };
        let mut side = SideStreams::new(
            Some(q.clone()),
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
        );
        for i in 0..16u32 {
            q.push(AudioPacket {
                frame: session::audio::AudioFrame {
                    opus: vec![0xfc, 1, 2],
                    rtp_ts: i * 960,
                    discontinuity: false,
                },
                capture_ns: 0,
            });
        }
        let now = Instant::now();
        let next = side.poll(now, &tx, &mut publisher);
        assert!(next <= now + Duration::from_millis(4));
        let mut buf = [0u8; 1500];
        for i in 0..16 {
            let n = rx.recv(&mut buf).unwrap();
            let p = codec::rtp::RtpPacket::parse(&buf[..n]).unwrap();
            assert_eq!((p.ssrc(), p.sequence_number(), p.marker()), (9, i, i == 0));
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
        assert_eq!(q.stats.sent.load(Ordering::Relaxed), 16);
        let mut srs = Vec::new();
        for _ in 0..2 {
            let n = rtcp.recv(&mut buf).unwrap();
            srs.extend(codec::rtcp::parse_sender_reports(&buf[..n]).unwrap());
        }
        srs.sort_by_key(|s| s.ssrc);
        assert_eq!((srs[0].packets, srs[0].octets), (0, 0));
        assert_eq!((srs[1].packets, srs[1].octets), (16, 16 * 3));
        for (s, rate) in [(&srs[0], 90_000), (&srs[1], 48_000)] {
            let t = codec::rtcp::unix_ns_from_ntp(s.ntp);
            assert!(clock.rtp(t, rate).abs_diff(s.rtp_ts) <= 1);
        }
        // Not due again for a second.
        assert_eq!(side.reports_sent, 2);
        side.poll(now + Duration::from_millis(500), &tx, &mut publisher);
        assert_eq!(side.reports_sent, 2);
    }
}
