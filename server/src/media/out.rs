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

use super::audio::AudioQueue;
use proto::Time;
use std::net::UdpSocket;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Audio and RTCP of one session, driven by the pacer thread.
#[derive(Debug)]
pub struct SideStreams {
    /// The audio encoder's frames (a session with an audio track).
    pub audio: Option<Arc<AudioQueue>>,
    pub repairs_sent: u64,
    pub reports_sent: u64,
}

impl SideStreams {
    pub fn new(audio: Option<Arc<AudioQueue>>) -> SideStreams {
        SideStreams {
            audio,
            repairs_sent: 0,
            reports_sent: 0,
        }
    }

    /// Hands every ready audio frame to `publisher` and sends the datagrams it makes of them
    /// and the sender reports it has due (`session::publisher::reports`).
    pub fn poll(&mut self, now: Time, sock: &UdpSocket, publisher: &mut session::Publisher) {
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
                    (session::audio::DatagramKind::Report, true) => self.reports_sent += 1,
                    (_, false) => {
                        q.stats.send_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
        while let Some(d) = publisher.poll_report(now) {
            if sock.send_to(&d.bytes, d.to).is_ok() {
                self.reports_sent += 1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::media::audio::{AudioPacket, MediaClock};
    use std::net::Ipv4Addr;
    use std::time::Duration;

    /// Loopback sockets on ports p (audio RTP), p + 1 (its RTCP), p + 2 (its repair) and
    /// p + 4 (the RTCP of a video layer on p + 3).
    fn ports() -> (u16, [UdpSocket; 4]) {
        for p in (21_000..40_000u16).step_by(97) {
            let b = |o: u16| UdpSocket::bind(("127.0.0.1", p + o));
            if let (Ok(a), Ok(b1), Ok(b2), Ok(b4)) = (b(0), b(1), b(2), b(4)) {
                return (p, [a, b1, b2, b4]);
            }
        }
        panic!("no free loopback ports");
    }

    /// Audio frames become packets that leave as they are queued, one datagram each, with
    /// their copies 10 packets later on the repair port; every stream gets a sender report on
    /// its RTP port + 1 whose RTP time is the media clock's at the report's NTP time.
    #[test]
    fn audio_and_reports_go_out() {
        let (p, [rx, artcp, rep, vrtcp]) = ports();
        for s in [&rx, &artcp, &rep, &vrtcp] {
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
        }
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut info = proto::SessionInfo::equal_layers(1, 100_000, Ipv4Addr::LOCALHOST, p + 3);
        let settings = crate::media::audio::AudioSettings {
            channels: 2,
            bitrate: 64_000,
            inband_fec: true,
        };
        info.tracks.push(crate::media::audio_track(
            &settings,
            Ipv4Addr::LOCALHOST,
            p,
            9,
            settings.rate_bps(0),
        ));
        let clock = MediaClock {
            epoch_ns: 1_700_000_000_000_000_000,
        };
        let mut publisher = session::Publisher::new(session::publisher::PublisherConfig {
            reports: Some(session::publisher::ReportConfig {
                clock,
                cname: "layercast-test".into(),
                interval: session::publisher::REPORT_INTERVAL,
            }),
            clock_offset_us: 1_700_000_100_000_000,
            ..session::publisher::PublisherConfig::new(info, 1)
        })
        .unwrap();
        let q = Arc::new(AudioQueue::default());
        let mut side = SideStreams::new(Some(q.clone()));
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
        side.poll(Time::ZERO, &tx, &mut publisher);
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
        let sr = |s: &UdpSocket| {
            let mut buf = [0u8; 1500];
            let n = s.recv(&mut buf).unwrap();
            let r = codec::rtcp::parse_sender_reports(&buf[..n]).unwrap();
            assert_eq!(r.len(), 1);
            r[0].clone()
        };
        let (v, a) = (sr(&vrtcp), sr(&artcp));
        assert_eq!((v.ssrc, v.packets, v.octets), (1, 0, 0));
        assert_eq!((a.ssrc, a.packets, a.octets), (9, 16, 16 * 3));
        for (s, rate) in [(&v, 90_000), (&a, 48_000)] {
            let t = codec::rtcp::unix_ns_from_ntp(s.ntp);
            assert!(clock.rtp(t, rate).abs_diff(s.rtp_ts) <= 1);
        }
        // Not due again for a second.
        assert_eq!(side.reports_sent, 2);
        side.poll(Time::from_millis(500), &tx, &mut publisher);
        assert_eq!(side.reports_sent, 2);
        side.poll(Time::from_millis(1000), &tx, &mut publisher);
        assert_eq!(side.reports_sent, 4);
    }
}
