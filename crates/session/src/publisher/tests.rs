use super::*;
use proto::rtp::{RtpHeader, RtpPacket};
use proto::wire::cc_ext;
use std::net::Ipv4Addr;

fn info(rates: &[u64], packet_size: u16, bunch_len: u8) -> SessionInfo {
    let mut i = SessionInfo::equal_layers(rates.len(), 1, Ipv4Addr::new(239, 1, 0, 0), 5000);
    for (l, r) in i.layers.iter_mut().zip(rates) {
        l.rate_bps = *r;
    }
    i.packet_size = packet_size;
    i.bunch_len = bunch_len;
    i
}

/// One spatial layer of 320x180 at 30 fps with `temporal` temporal layers.
fn vp9_320x180(temporal: u8) -> proto::Vp9Params {
    proto::Vp9Params {
        payload_type: 96,
        width: 320,
        height: 180,
        fps_num: 30,
        fps_den: 1,
        spatial: 1,
        temporal,
    }
}

fn config(info: SessionInfo) -> PublisherConfig {
    PublisherConfig {
        start: Time::from_millis(5),
        ..PublisherConfig::new(info, 1000)
    }
}

/// Runs the publisher in virtual time for `secs`, sending each bunch exactly when due;
/// returns (layer, bunch_pos, seq, ssrc, size) per packet in send order.
fn run(p: &mut Publisher, secs: f64) -> Vec<(u8, u8, u16, u32, usize)> {
    let end = Time::from_secs_f64(secs);
    let mut out = Vec::new();
    let mut now = Time::ZERO;
    loop {
        now = p.poll_timeout(now).max(now);
        if now >= end {
            return out;
        }
        if let Some(b) = p.poll_transmit(now) {
            assert_eq!(b.due, now, "sent when due");
            for pkt in b.packets {
                let r = RtpPacket::parse(pkt).unwrap();
                let cc = CcFields::parse(r.extension(cc_ext::DEFAULT_ID).unwrap()).unwrap();
                assert_eq!(cc.layer, b.layer);
                out.push((
                    cc.layer,
                    cc.bunch_pos,
                    r.sequence_number(),
                    r.ssrc(),
                    pkt.len(),
                ));
            }
        }
    }
}

/// A 4-layer session sends, per layer, the packet count its rate implies; every bunch is
/// whole (positions 0..len of one layer back to back); SSRCs and sequence numbers per layer.
#[test]
fn bunches_at_rate_never_interleaved() {
    let mut p =
        Publisher::new(config(info(&[200_000, 400_000, 400_000, 800_000], 200, 3))).unwrap();
    let got = run(&mut p, 10.0);
    for w in got.chunks(3) {
        assert!(w.iter().all(|x| x.0 == w[0].0), "interleaved bunch {w:?}");
        assert_eq!(w.iter().map(|x| x.1).collect::<Vec<_>>(), vec![0, 1, 2]);
        assert!(w.iter().all(|x| x.4 == 200));
    }
    for k in 0..4u8 {
        let mine: Vec<_> = got.iter().filter(|x| x.0 == k).collect();
        assert!(mine.iter().all(|x| x.3 == 1000 + k as u32));
        assert!(mine.windows(2).all(|w| w[1].2 == w[0].2.wrapping_add(1)));
        let rate = mine.len() as f64 * 200.0 * 8.0 / 10.0;
        let want = [200_000.0, 400_000.0, 400_000.0, 800_000.0][k as usize];
        assert!((rate / want - 1.0).abs() < 0.01, "layer {k}: {rate}");
    }
    assert_eq!(p.stats().packets as usize, got.len());
}

/// An encrypted session: every datagram is exactly the packet size, opens with the group key
/// to a packet whose cc extension is intact, and does not open with another key.
#[test]
fn sealed_packets_have_the_announced_size_and_open() {
    use security::auth::{GroupKey, MediaOpener};
    let key = GroupKey::generate(0);
    let mut c = config(info(&[400_000, 400_000], 300, 2));
    c.sealer = Some(MediaSealer::new(key.clone()));
    let mut p = Publisher::new(c).unwrap();
    let mut opener = MediaOpener::new(key);
    let mut wrong = MediaOpener::new(GroupKey::generate(0));
    let mut now = Time::ZERO;
    let mut n = 0;
    while n < 20 {
        now = p.poll_timeout(now);
        let b = p.poll_transmit(now).unwrap();
        for pkt in b.packets {
            assert_eq!(pkt.len(), 300);
            let o = opener.open(pkt).expect("opens with the group key");
            assert_eq!(o.packet.len(), 300 - security::auth::MEDIA_OVERHEAD);
            assert!(packet::parse_cc(&o.packet).is_some());
            assert!(wrong.open(pkt).is_err());
            n += 1;
        }
    }
    assert_eq!(p.stats().seal_errors, 0);
}

/// Media fills the slots of its layer in order; padding (payload-less, exactly the packet
/// size) fills the rest; with a burst policy a queued picture leaves ahead of its slots.
#[test]
fn media_fills_slots_and_bursts_ahead_of_the_schedule() {
    let mut c = config(info(&[100_000, 100_000], 500, 2));
    c.media = true;
    c.burst = Some(Burst {
        peak: 4.0,
        credit: vec![Duration::from_millis(200); 2],
    });
    let mut p = Publisher::new(c).unwrap();
    // Layer interval: 2 * 500 * 8 / 100k = 80 ms. Let the schedule start, then a picture of
    // 6 packets on layer 1 arrives at 1 s.
    let mut now = Time::ZERO;
    let mut sent: Vec<(Time, u8, bool)> = Vec::new();
    let mut pushed = false;
    while now < Time::from_millis(1600) {
        if !pushed && now >= Time::from_millis(1000) {
            let pkt = |i: u8| MediaPacket {
                header: RtpHeader {
                    payload_type: 96,
                    timestamp: 9000,
                    ..Default::default()
                },
                payload: vec![i; 100],
            };
            p.push_picture(
                now,
                Picture {
                    key: true,
                    sync: false,
                    cells: vec![vec![], (0..6).map(pkt).collect()],
                },
            );
            pushed = true;
        }
        let t = p.poll_timeout(now).max(now);
        now = if !pushed {
            t.min(Time::from_millis(1000))
        } else {
            t
        };
        if let Some(b) = p.poll_transmit(now) {
            // Sent when it could go: a burst ahead of the slots is due when the picture came,
            // not at the burst time the credit allows (up to 200 ms before it).
            assert_eq!(b.due, now, "bunch of layer {}", b.layer);
            for pkt in b.packets {
                let r = RtpPacket::parse(pkt).unwrap();
                if r.payload().is_empty() {
                    assert_eq!(pkt.len(), 500);
                }
                sent.push((now, b.layer, !r.payload().is_empty()));
            }
        }
    }
    let media: Vec<Time> = sent.iter().filter(|s| s.2).map(|s| s.0).collect();
    assert_eq!(media.len(), 6);
    assert!(sent.iter().filter(|s| s.2).all(|s| s.1 == 1));
    // Three bunches at the peak gap (20 ms) instead of three slots (160 ms).
    let span = media[5].saturating_since(media[0]);
    assert!(span <= Duration::from_millis(41), "{span:?}");
}

/// Media requests: many receivers' key requests become one key picture per interval; a
/// request for another session, a garbled one and a tagged one without a key are refused.
#[test]
fn key_requests_are_aggregated_and_vetted() {
    let mut i = info(&[100_000], 500, 2);
    i.session_id = 77;
    let mut p = Publisher::new(config(i)).unwrap();
    let src: std::net::SocketAddr = "10.0.0.9:4000".parse().unwrap();
    let req = |sid: u32| MediaRequest::new(RequestKind::KeyPicture, sid, 0, 1).to_bytes();
    for n in 0..30u64 {
        p.handle_feedback(Time::from_millis(1000 + n), src, &req(77));
    }
    p.handle_feedback(Time::from_millis(1100), src, &req(78));
    p.handle_feedback(Time::from_millis(1100), src, b"LRgarbage");
    let mut tagged = MediaRequest::new(RequestKind::KeyPicture, 77, 3, 1);
    tagged.auth = 1;
    tagged.tag = vec![0; 16];
    p.handle_feedback(Time::from_millis(1100), src, &tagged.to_bytes());
    assert_eq!(p.stats().requests_refused, 3);
    assert_eq!(
        p.poll_encoder_control(Time::from_millis(1100)),
        Some(EncoderControl::KeyPicture)
    );
    assert_eq!(p.poll_encoder_control(Time::from_millis(1200)), None);
    p.handle_feedback(Time::from_millis(1300), src, &req(77));
    assert_eq!(p.poll_encoder_control(Time::from_millis(1400)), None);
    assert_eq!(
        p.poll_timeout(Time::from_millis(1400))
            .min(Time::from_millis(1600)),
        Time::from_millis(1600).min(p.poll_timeout(Time::from_millis(1400)))
    );
    assert_eq!(
        p.poll_encoder_control(Time::from_millis(1600)),
        Some(EncoderControl::KeyPicture)
    );
    assert_eq!(p.requests(), (31, 2, 0));
}

/// The slots media leaves free carry repair packets of the layer's stream (payload type 97,
/// the layer's SSRC and sequence space, exactly the packet size) when the announcement gives
/// the layer's video stream repair parameters, padding when there is nothing left to repair;
/// parameters the FEC code refuses make the Publisher refuse the session.
#[test]
fn free_slots_carry_repair_with_the_announced_parameters() {
    let mut i = info(&[200_000], 600, 2);
    let vp9 = vp9_320x180(1);
    let mut t = proto::Track::vp9_ladder(0, vp9, &i.layers, 0x5000);
    t.streams[0].repair = Some(proto::Repair {
        payload_type: 97,
        params: vec![2, 8],
    });
    i.tracks = vec![t];
    let mut c = config(i.clone());
    c.ssrc_base = 0x5000;
    c.media = true;
    let mut p = Publisher::new(c).unwrap();
    let pkt = |n: u8| MediaPacket {
        header: RtpHeader {
            payload_type: 96,
            timestamp: 3000,
            ssrc: 0x5000,
            marker: n == 3,
            ..Default::default()
        },
        payload: vec![n; 200],
    };
    p.push_picture(
        Time::ZERO,
        Picture {
            key: true,
            sync: false,
            cells: vec![(0..4).map(pkt).collect()],
        },
    );
    let mut now = Time::ZERO;
    let mut kinds = Vec::new();
    let mut seqs = Vec::new();
    while kinds.len() < 20 {
        now = p.poll_timeout(now).max(now);
        if let Some(b) = p.poll_transmit(now) {
            for pkt in b.packets {
                assert_eq!(pkt.len(), 600);
                let r = RtpPacket::parse(pkt).unwrap();
                assert_eq!(r.ssrc(), 0x5000);
                seqs.push(r.sequence_number());
                kinds.push(match (r.payload_type(), r.payload().is_empty()) {
                    (96, false) => 'm',
                    (97, false) => 'r',
                    (96, true) => 'p',
                    other => panic!("unexpected packet {other:?}"),
                });
            }
        }
    }
    let k: String = kinds.iter().collect();
    // 4 media, then first-pass repairs (rows of 2) and second-pass ones, then padding.
    assert!(k.starts_with("mmmmrr"), "{k}");
    assert!(k.ends_with('p'), "{k}");
    assert!(seqs.windows(2).all(|w| w[1] == w[0].wrapping_add(1)));
    let (r, pad) = (k.matches('r').count() as u64, k.matches('p').count() as u64);
    assert_eq!(
        (p.stats().repair_packets, p.stats().padding_packets),
        (r, pad)
    );
    assert_eq!(p.fec_stats(0).unwrap().protected, 4);
    // A row longer than the span: refused, not sent with other parameters.
    i.tracks[0].streams[0].repair = Some(proto::Repair {
        payload_type: 97,
        params: vec![9, 4],
    });
    let mut c = config(i);
    c.media = true;
    assert!(Publisher::new(c).is_err());
}

/// With a wait bound, a frame of the top temporal layer (L1T2: layer 1) is dropped whole
/// before it is queued when the layer's queue would hold it longer than the bound at the
/// layer's rate; frames of the referenced layer (layer 0) and key pictures are always queued,
/// and what is queued is sent without a gap in the layer's sequence numbers.
#[test]
fn discardable_frames_past_the_wait_bound_are_dropped_whole() {
    let mut i = info(&[100_000, 100_000], 500, 2);
    let vp9 = vp9_320x180(2);
    i.tracks = vec![proto::Track::vp9_ladder(0, vp9, &i.layers, 1000)];
    let mut c = config(i);
    c.media = true;
    // Layer interval: 2 * 500 * 8 / 100k = 80 ms per bunch of 2 packets: 250 ms holds 6.
    c.max_discardable_wait = Some(Duration::from_millis(250));
    let mut p = Publisher::new(c).unwrap();
    let pkt = |ts: u32| MediaPacket {
        header: RtpHeader {
            payload_type: 96,
            timestamp: ts,
            ..Default::default()
        },
        payload: vec![1; 100],
    };
    let frame = |ts: u32, n: usize| (0..n).map(|_| pkt(ts)).collect::<Vec<_>>();
    // Four pictures at once, 3 packets per cell: layer 1's third frame would be the 7th to
    // 9th packets (5 bunches = 400 ms): dropped; layer 0 keeps all four frames.
    let layer1 = [3, 6, 6, 6];
    for (n, ts) in [0u32, 3000, 6000, 9000].into_iter().enumerate() {
        p.push_picture(
            Time::ZERO,
            Picture {
                key: false,
                sync: false,
                cells: vec![frame(ts, 3), frame(ts, 3)],
            },
        );
        assert_eq!(p.queued_packets(), vec![3 * (n + 1), layer1[n]]);
    }
    assert_eq!(p.stats().discarded_frames, vec![0, 2]);
    // A key picture's frames are queued whatever the wait.
    p.push_picture(
        Time::ZERO,
        Picture {
            key: true,
            sync: false,
            cells: vec![frame(12000, 3), frame(12000, 3)],
        },
    );
    assert_eq!(p.queued_packets(), vec![15, 9]);
    assert_eq!(p.stats().discarded_frames, vec![0, 2]);
    // Layer 1 sends its 9 media packets with consecutive sequence numbers.
    let sent = run(&mut p, 1.0);
    let l1: Vec<u16> = sent.iter().filter(|s| s.0 == 1).map(|s| s.2).collect();
    assert!(
        l1.windows(2).all(|w| w[1] == w[0].wrapping_add(1)),
        "{l1:?}"
    );
    // Without a bound nothing is dropped.
    let mut c = config(info(&[100_000, 100_000], 500, 2));
    c.media = true;
    c.max_discardable_wait = Some(Duration::from_millis(1));
    let mut p = Publisher::new(c).unwrap();
    p.push_picture(
        Time::ZERO,
        Picture {
            key: false,
            sync: false,
            cells: vec![frame(0, 3), frame(0, 3)],
        },
    );
    assert_eq!(
        p.stats().discarded_frames,
        vec![0, 0],
        "no video track: nothing is discardable"
    );
}

/// Sender reports: every layer's stream gets one per interval, to its group on RTP port + 1,
/// with the wall-clock time of `now` (the clock offset), the media clock's RTP time at that
/// instant and the packets sent so far; none before they are due, none in a session without.
#[test]
fn sender_reports_map_now_to_the_media_clock_per_stream() {
    let i = info(&[100_000, 200_000], 500, 2);
    let mut c = config(i.clone());
    c.clock_offset_us = 1_700_000_000_000_000;
    c.reports = Some(ReportConfig {
        clock: crate::audio::MediaClock {
            epoch_ns: 1_699_999_999_000_000_000,
        },
        cname: "layercast-test@10.0.0.1".into(),
        interval: REPORT_INTERVAL,
    });
    let mut p = Publisher::new(c).unwrap();
    let mut got = Vec::new();
    while let Some(d) = p.poll_report(Time::ZERO) {
        got.push(d);
    }
    assert_eq!(got.len(), 2);
    for (k, d) in got.iter().enumerate() {
        assert_eq!(d.kind, crate::audio::DatagramKind::Report);
        assert_eq!(
            d.to,
            SocketAddrV4::new(i.layers[k].group, i.layers[k].port + 1)
        );
        let sr = proto::rtcp::parse_sender_reports(&d.bytes).unwrap();
        assert_eq!(sr.len(), 1);
        assert_eq!(sr[0].ssrc, 1000 + k as u32);
        // 1 s after the epoch on a 90-kHz clock.
        assert_eq!(sr[0].rtp_ts, 90_000);
        assert_eq!(
            proto::rtcp::unix_ns_from_ntp(sr[0].ntp) / 1_000_000,
            1_700_000_000_000
        );
    }
    // Nothing until the interval has passed; then the counts of what was sent.
    let sent = run(&mut p, 1.5);
    assert!(p.poll_report(Time::from_millis(999)).is_none());
    let d = p.poll_report(Time::from_millis(1000)).unwrap();
    let sr = proto::rtcp::parse_sender_reports(&d.bytes).unwrap();
    assert_eq!(
        sr[0].packets as usize,
        sent.iter().filter(|s| s.0 == 0).count()
    );
    assert_eq!(sr[0].rtp_ts, 180_000);
    assert_eq!(p.reports_sent(), 3);
    let mut none = Publisher::new(config(i)).unwrap();
    assert!(none.poll_report(Time::ZERO).is_none());
}

/// An encrypted session's sender reports are sealed: they open with the group key to the
/// report a clear session sends, and not with another key.
#[test]
fn encrypted_sessions_seal_their_sender_reports() {
    use security::auth::{GroupKey, MediaOpener};
    let i = info(&[100_000, 200_000], 500, 2);
    let reports = ReportConfig {
        clock: crate::audio::MediaClock {
            epoch_ns: 1_699_999_999_000_000_000,
        },
        cname: "layercast-test@10.0.0.1".into(),
        interval: REPORT_INTERVAL,
    };
    let key = GroupKey::generate(2);
    let mut clear = config(i.clone());
    clear.reports = Some(reports.clone());
    let mut sealed = config(i);
    sealed.reports = Some(reports);
    sealed.sealer = Some(MediaSealer::new(key.clone()));
    let (mut clear, mut sealed) = (
        Publisher::new(clear).unwrap(),
        Publisher::new(sealed).unwrap(),
    );
    let mut opener = MediaOpener::new(key);
    let mut wrong = MediaOpener::new(GroupKey::generate(2));
    let mut n = 0;
    while let Some(s) = sealed.poll_report(Time::ZERO) {
        let c = clear.poll_report(Time::ZERO).unwrap();
        assert_eq!(s.to, c.to);
        assert!(wrong.open_rtcp(&s.bytes).is_err());
        assert!(
            opener.open_rtcp(&c.bytes).is_err(),
            "a clear report is refused"
        );
        assert_eq!(opener.open_rtcp(&s.bytes).unwrap().compound, c.bytes);
        n += 1;
    }
    assert_eq!(n, 2);
    assert_eq!(opener.stats().reports_opened, 2);
    assert_eq!(sealed.stats().seal_errors, 0);
}
