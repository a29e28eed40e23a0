use super::*;
use proto::rtp::RtpHeader;
use proto::wire::cc_ext::CcFields;
use stream::QUARANTINE;

const G0: Ipv4Addr = Ipv4Addr::new(239, 1, 0, 0);

fn info(n: usize, sid: u32) -> SessionInfo {
    let mut i = SessionInfo::equal_layers(n, 100_000, G0, 5000);
    i.session_id = sid;
    i.sender = Ipv4Addr::new(10, 0, 0, 1);
    i
}

fn with_video(mut i: SessionInfo, ssrc_base: u32) -> SessionInfo {
    let p = proto::Vp9Params {
        payload_type: 96,
        width: 320,
        height: 180,
        fps_num: 15,
        fps_den: 1,
        spatial: 1,
        temporal: i.layers.len() as u8,
    };
    i.tracks = vec![proto::Track::vp9_ladder(0, p, &i.layers, ssrc_base)];
    i
}

/// One data packet of layer `k` with SSRC `ssrc`, sequence `seq`, sent at `send_ms`.
fn pkt(k: u8, ssrc: u32, seq: u16, pos: u8, send_ms: u64, payload: &[u8]) -> Vec<u8> {
    let cc = CcFields {
        layer: k,
        bunch_pos: pos,
        bunch_len: 2,
        send_time_us: send_ms * 1000,
    };
    RtpHeader {
        payload_type: 96,
        sequence_number: seq,
        ssrc,
        extensions: vec![(cc_ext::DEFAULT_ID, cc.to_bytes().to_vec())],
        ..Default::default()
    }
    .to_vec(payload)
    .unwrap()
}

fn ms(x: u64) -> Time {
    Time::from_millis(x)
}

/// Drains the outputs up to the timeout.
fn drain(s: &mut Subscriber) -> Vec<Output> {
    let mut v = Vec::new();
    loop {
        match s.poll_output() {
            Output::Timeout(..) => return v,
            o => v.push(o),
        }
    }
}

fn joins(out: &[Output]) -> Vec<(u8, Ipv4Addr)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Join(e) => Some((e.layer, e.group)),
            _ => None,
        })
        .collect()
}

fn media(out: &[Output]) -> Vec<(u8, u32, Vec<u8>)> {
    out.iter()
        .filter_map(|o| match o {
            Output::Media(m) => Some((m.layer, m.ssrc, m.packet.clone())),
            _ => None,
        })
        .collect()
}

fn fixed(n: u8) -> Subscriber {
    Subscriber::new(Control::Fixed(n), SubscriberConfig::default())
}

/// Joins on the first announcement; a joined layer's first packets are held for the
/// quarantine, the stale ones among them dropped, the rest fed in order.
#[test]
fn join_quarantine_drops_what_sat_in_a_router_queue() {
    let mut s = fixed(2);
    s.handle_announcement(ms(0), Announcement::Info(with_video(info(2, 1), 100)));
    let out = drain(&mut s);
    assert_eq!(joins(&out), vec![(0, G0), (1, Ipv4Addr::new(239, 1, 0, 1))]);
    // Layer 0: three packets 2 s old (flushed from a router queue), then fresh ones.
    for i in 0..3u16 {
        let b = pkt(0, 100, i, 0, 0, b"old");
        s.handle_datagram(ms(2000), G0, 5000, ms(2000 + i as u64), &b);
    }
    for i in 3..10u16 {
        let b = pkt(0, 100, i, 0, 1990 + 10 * i as u64, b"new");
        s.handle_datagram(ms(2040), G0, 5000, ms(2000 + 10 * i as u64), &b);
    }
    assert!(
        media(&drain(&mut s)).is_empty(),
        "held during the quarantine"
    );
    s.handle_timeout(ms(2000 + QUARANTINE.as_millis() as u64));
    let m = media(&drain(&mut s));
    assert_eq!(m.len(), 7);
    assert!(m.iter().all(|x| x.2.ends_with(b"new")));
    assert_eq!(s.drops().stale, 3);
}

/// A restarted sender: its packets (new SSRC) come before its announcement; they are held,
/// then delivered right after `SessionChanged`; late packets of the old session are refused.
#[test]
fn a_restart_holds_the_new_senders_media_until_its_announcement() {
    let mut s = fixed(1);
    s.handle_announcement(ms(0), Announcement::Info(with_video(info(1, 1), 100)));
    drain(&mut s);
    for i in 0..5u16 {
        let b = pkt(0, 100, i, 0, 10 * i as u64, b"a");
        s.handle_datagram(ms(10 * i as u64), G0, 5000, ms(10 * i as u64), &b);
    }
    s.handle_timeout(ms(200));
    assert_eq!(media(&drain(&mut s)).len(), 5);
    // New SSRC 200 with sequence numbers far away: no loss, held.
    for i in 0..4u16 {
        let b = pkt(0, 200, 40_000 + i, 0, 300 + i as u64, b"key");
        s.handle_datagram(ms(300 + i as u64), G0, 5000, ms(300 + i as u64), &b);
    }
    let out = drain(&mut s);
    assert!(media(&out).is_empty());
    // The new announcement: SessionChanged, then the held media; the old SSRC is retired.
    s.handle_announcement(ms(400), Announcement::Info(with_video(info(1, 2), 200)));
    let b = pkt(0, 100, 5, 0, 50, b"a");
    s.handle_datagram(ms(401), G0, 5000, ms(401), &b);
    let out = drain(&mut s);
    let changed = out
        .iter()
        .position(|o| {
            matches!(
                o,
                Output::Event(Event::SessionChanged {
                    new_instance: true,
                    ..
                })
            )
        })
        .expect("session changed");
    let first_media = out
        .iter()
        .position(|o| matches!(o, Output::Media(_)))
        .unwrap();
    assert!(changed < first_media);
    let m = media(&out);
    assert_eq!(m.len(), 4);
    assert!(m.iter().all(|x| x.1 == 200));
    assert!(out
        .iter()
        .any(|o| matches!(o, Output::Event(Event::RefreshSecurity))));
    assert_eq!(s.drops().old_session, 1);
    assert_eq!(s.limbo.stats.replayed, 4);
    assert_eq!(s.tally.total.lost, 0);
}

/// Reliability review F6 at the receiver: a duplicate (a replayed authentic packet, or a
/// duplicating network) is dropped before the controller and the decoder.
#[test]
fn replayed_packets_reach_neither_controller_nor_media() {
    let ctl = congestion::live_controller_by_name("era").unwrap();
    let mut s = Subscriber::new(Control::Layered(ctl), SubscriberConfig::default());
    s.handle_announcement(ms(0), Announcement::Info(with_video(info(1, 1), 100)));
    drain(&mut s);
    let mut sent = Vec::new();
    for i in 0..20u16 {
        let b = pkt(0, 100, i, (i % 2) as u8, 10 * i as u64, b"x");
        s.handle_datagram(ms(10 * i as u64), G0, 5000, ms(10 * i as u64), &b);
        sent.push(b);
    }
    s.handle_timeout(ms(400));
    let before = s.controller_stats().unwrap().packets_received;
    let out = drain(&mut s);
    assert_eq!(media(&out).len(), 20, "{out:?} {:?}", s.drops());
    // The whole stream again, 50 ms later.
    for (i, b) in sent.iter().enumerate() {
        s.handle_datagram(ms(450), G0, 5000, ms(450 + i as u64), b);
    }
    s.handle_timeout(ms(500));
    assert!(media(&drain(&mut s)).is_empty());
    assert_eq!(s.controller_stats().unwrap().packets_received, before);
    assert_eq!(s.drops().duplicate, 20, "{:?}", s.drops());
}

/// The link emulator's reordering fault in virtual time: a stream in which one packet in
/// every ten is delivered after the next one. Neither the Subscriber's tally nor the product
/// controller counts a loss; one packet really missing is counted by both, once the third
/// packet after it has arrived.
#[test]
fn reordered_packets_are_not_losses_for_the_tally_or_the_controller() {
    let ctl = congestion::live_controller_by_name("lcc").unwrap();
    let mut s = Subscriber::new(Control::Layered(ctl), SubscriberConfig::default());
    s.handle_announcement(ms(0), Announcement::Info(with_video(info(1, 1), 100)));
    drain(&mut s);
    let mut order: Vec<u16> = (0..300).collect();
    for i in (5..299).step_by(10) {
        order.swap(i, i + 1);
    }
    let feed = |s: &mut Subscriber, n: usize, seq: u16| {
        let t = 5 * n as u64;
        let b = pkt(0, 100, seq, (seq % 2) as u8, t, b"x");
        s.handle_datagram(ms(t), G0, 5000, ms(t), &b);
    };
    for (n, seq) in order.iter().enumerate() {
        feed(&mut s, n, *seq);
    }
    s.handle_timeout(ms(1600));
    drain(&mut s);
    let lost = |s: &Subscriber| (s.totals().1, s.controller_stats().unwrap().packets_lost);
    assert_eq!(s.totals().0, 300);
    assert_eq!(lost(&s), (0, 0), "{:?}", s.drops());
    // 300 never arrives: not lost after 301 and 302, lost with 303.
    for (n, seq) in [(300, 301), (301, 302), (302, 303)] {
        assert_eq!(lost(&s), (0, 0));
        feed(&mut s, n, seq);
        s.handle_timeout(ms(5 * n as u64 + 1));
        drain(&mut s);
    }
    assert_eq!(lost(&s), (1, 1));
}

/// While the base layer is held and nothing is decoded, key pictures are requested every
/// 1.5 s to the sender's feedback port; re-syncs go at once.
#[test]
fn key_requests_while_nothing_is_decoded() {
    let mut s = fixed(1);
    s.set_awaiting_key(true);
    s.handle_announcement(ms(0), Announcement::Info(with_video(info(1, 9), 100)));
    let reqs = |out: &[Output]| -> Vec<Transmit> {
        out.iter()
            .filter_map(|o| match o {
                Output::Transmit(t) => Some(t.clone()),
                _ => None,
            })
            .collect()
    };
    let t = reqs(&drain(&mut s));
    assert_eq!(t.len(), 1);
    assert_eq!(t[0].to, "10.0.0.1:5001".parse().unwrap());
    let r = MediaRequest::parse(&t[0].payload).unwrap();
    assert_eq!((r.kind, r.session_id), (RequestKind::KeyPicture, 9));
    s.handle_timeout(ms(1000));
    assert!(reqs(&drain(&mut s)).is_empty());
    s.handle_timeout(ms(1500));
    assert_eq!(reqs(&drain(&mut s)).len(), 1);
    s.set_awaiting_key(false);
    s.handle_timeout(ms(3100));
    assert!(reqs(&drain(&mut s)).is_empty());
    s.request_resync(ms(3200), 1);
    let t = reqs(&drain(&mut s));
    assert_eq!(t[0].kind, TransmitKind::Resync(1));
}

/// Hostile input: garbage, truncated RTP, a packet naming another layer and one on a group
/// not held are counted, never fed; the Subscriber keeps working.
#[test]
fn bad_datagrams_are_counted_drops() {
    let mut s = fixed(1);
    s.handle_announcement(ms(0), Announcement::Info(info(2, 1)));
    s.handle_announcement(ms(0), Announcement::Json(b"{not json"));
    s.handle_announcement(ms(0), Announcement::Sam(b"LCSA\x01"));
    drain(&mut s);
    s.handle_datagram(ms(1), G0, 5000, ms(1), b"\x00\x01");
    let mut no_cc = pkt(0, 1, 1, 0, 1, b"x");
    no_cc[0] &= !0x10;
    s.handle_datagram(ms(1), G0, 5000, ms(1), &no_cc[..12]);
    s.handle_datagram(ms(1), G0, 5000, ms(1), &pkt(1, 1, 1, 0, 1, b"x"));
    s.handle_datagram(
        ms(1),
        Ipv4Addr::new(239, 1, 0, 1),
        5001,
        ms(1),
        &pkt(1, 1, 1, 0, 1, b"x"),
    );
    for n in 0..29 {
        s.handle_datagram(ms(2), G0, 5000, ms(2), &pkt(0, 1, 2, 0, 2, b"y")[..n]);
    }
    drain(&mut s);
    let d = s.drops();
    assert_eq!(d.malformed_announcement, 1);
    assert_eq!(d.malformed_sam, 1);
    assert_eq!(d.wrong_layer, 2);
    assert_eq!(d.missing_cc, 1);
    assert!(d.malformed_rtp >= 2);
}

/// A stream with announced repair: a lost media packet is rebuilt from the repair packet and
/// delivered (marked recovered, bit-exact); repair packets, a garbled one included, never
/// reach the host; the counters say so.
#[test]
fn repair_rebuilds_a_lost_packet_and_keeps_repair_packets_in() {
    use proto::fec::{FecEncoder, FecParams};
    let mut i = with_video(info(1, 1), 100);
    let fp = FecParams::default();
    i.tracks[0].streams[0].repair = Some(proto::Repair {
        payload_type: fp.payload_type,
        params: fp.announced_params(),
    });
    let mut s = fixed(1);
    s.handle_announcement(ms(0), Announcement::Info(i));
    drain(&mut s);
    let mut enc = FecEncoder::new(fp, 400).unwrap();
    let wire = |pt: u8, seq: u16, ts: u32, payload: &[u8]| {
        let cc = CcFields {
            layer: 0,
            bunch_pos: 0,
            bunch_len: 1,
            send_time_us: 1_000_000,
        };
        RtpHeader {
            payload_type: pt,
            sequence_number: seq,
            timestamp: ts,
            ssrc: 100,
            extensions: vec![(cc_ext::DEFAULT_ID, cc.to_bytes().to_vec())],
            ..Default::default()
        }
        .to_vec(payload)
        .unwrap()
    };
    let mut sent = Vec::new();
    for seq in 0..3u16 {
        let h = RtpHeader {
            payload_type: 96,
            timestamp: 90 * seq as u32,
            ssrc: 100,
            ..Default::default()
        };
        let payload = vec![seq as u8 + 1; 50 + seq as usize];
        enc.push_media(seq, &h, &payload);
        sent.push(wire(96, seq, h.timestamp, &payload));
    }
    let r = enc.repair().unwrap();
    sent.push(wire(97, 3, r.header.timestamp, &r.payload));
    sent.push(wire(97, 4, 0, b"not a repair header"));
    for (n, b) in sent.iter().enumerate() {
        if n != 1 {
            s.handle_datagram(ms(1000), G0, 5000, ms(1000 + n as u64), b);
        }
    }
    s.handle_timeout(ms(1000 + QUARANTINE.as_millis() as u64));
    let out = drain(&mut s);
    let got: Vec<(bool, Vec<u8>)> = out
        .iter()
        .filter_map(|o| match o {
            Output::Media(m) => {
                let p = RtpPacket::parse(&m.packet).unwrap();
                assert_eq!(p.payload_type(), 96);
                Some((m.recovered, p.payload().to_vec()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        got,
        vec![
            (false, vec![1; 50]),
            (false, vec![3; 52]),
            (true, vec![2; 51])
        ]
    );
    let f = s.fec_stats();
    assert_eq!((f.repairs, f.recovered, f.malformed), (2, 1, 1), "{f:?}");
    assert_eq!((f.lost, f.unrepaired), (1, 0), "{f:?}");
}

/// Retransmission at the receiver: a gap in a stream of a sender that offers it becomes one
/// request naming the missing numbers after the reorder wait (none for a sender that does not
/// offer it); the packet sent again is delivered once, counted as received, and reaches
/// neither the controller nor the loss tally; a copy of it, one for a stream not held and a
/// garbled one are counted, never delivered.
#[test]
fn gaps_are_asked_for_and_retransmissions_delivered_once() {
    let run = |offered: bool| {
        let ctl = congestion::live_controller_by_name("era").unwrap();
        let mut s = Subscriber::new(Control::Layered(ctl), SubscriberConfig::default());
        let mut i = with_video(info(1, 4), 100);
        i.retransmission = offered;
        s.handle_announcement(ms(0), Announcement::Info(i));
        drain(&mut s);
        let mut sent = Vec::new();
        for seq in 0..40u16 {
            let t = 10 * u64::from(seq);
            let b = pkt(0, 100, seq, (seq % 2) as u8, t, &[seq as u8; 20]);
            if !(seq == 20 || seq == 21) {
                s.handle_datagram(ms(t), G0, 5000, ms(t), &b);
            }
            sent.push(b);
        }
        s.handle_timeout(ms(400));
        let requests = retransmit_requests(&drain(&mut s));
        (s, sent, requests)
    };
    let (s0, _, r0) = run(false);
    assert!(r0.is_empty());
    assert_eq!(s0.rtx_stats().requests, 0);
    let (mut s, sent, r) = run(true);
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].kind, r[0].session_id), (RequestKind::Retransmit, 4));
    assert_eq!(
        (r[0].nack.ssrc, r[0].nack.seqs.clone()),
        (100, vec![20, 21])
    );
    let lost_before = (s.totals().1, s.controller_stats().unwrap().packets_lost);
    let received_before = s.controller_stats().unwrap().packets_received;
    s.handle_retransmission(ms(430), ms(430), &sent[20]);
    s.handle_retransmission(ms(431), ms(431), &sent[20]);
    s.handle_retransmission(ms(432), ms(432), &pkt(0, 555, 21, 0, 210, b"forged"));
    s.handle_retransmission(ms(433), ms(433), b"garbage");
    s.handle_timeout(ms(440));
    let m = media(&drain(&mut s));
    assert_eq!(m, vec![(0, 100, sent[20].clone())]);
    let st = s.rtx_stats();
    assert_eq!((st.received, st.useless), (1, 2), "{st:?}");
    assert_eq!(s.drops().malformed_rtp, 1);
    assert_eq!(
        (s.totals().1, s.controller_stats().unwrap().packets_lost),
        lost_before
    );
    assert_eq!(
        s.controller_stats().unwrap().packets_received,
        received_before
    );
    // 21 is still missing: asked again after the retry interval, alone.
    s.handle_timeout(ms(400 + nack::RETRY_INTERVAL.as_millis() as u64));
    let again = retransmit_requests(&drain(&mut s));
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].nack.seqs, vec![21]);
}

/// Under a standing queue (the packets that reveal a gap waited 60 ms above the path's
/// delay floor) a gap in an upper layer is congestion and is not asked for; the same gap in
/// layer 0, which every picture predicts from, still is.
#[test]
fn under_a_queue_only_the_base_layer_is_asked_for() {
    let mut s = Subscriber::new(Control::Fixed(2), SubscriberConfig::default());
    let mut i = with_video(info(2, 4), 100);
    i.retransmission = true;
    s.handle_announcement(ms(0), Announcement::Info(i.clone()));
    drain(&mut s);
    for seq in 0..60u16 {
        let t = 10 * u64::from(seq);
        let queued = if seq >= 30 { 60 } else { 0 };
        for k in 0..2u8 {
            if seq == 45 {
                continue;
            }
            let b = pkt(
                k,
                100 + u32::from(k),
                seq,
                (seq % 2) as u8,
                t,
                &[seq as u8; 20],
            );
            let l = &i.layers[k as usize];
            s.handle_datagram(ms(t + queued), l.group, l.port, ms(t + queued), &b);
        }
    }
    s.handle_timeout(ms(700));
    let r = retransmit_requests(&drain(&mut s));
    assert_eq!(r.len(), 1, "{r:?}");
    assert_eq!((r[0].nack.ssrc, r[0].nack.seqs.clone()), (100, vec![45]));
    assert_eq!(s.rtx_stats().congested, 1);
}

fn retransmit_requests(out: &[Output]) -> Vec<MediaRequest> {
    out.iter()
        .filter_map(|o| match o {
            Output::Transmit(t) if t.kind == TransmitKind::Retransmit => {
                Some(MediaRequest::parse(&t.payload).unwrap())
            }
            _ => None,
        })
        .collect()
}

/// Sender reports: in a clear session a datagram passes as it is; in an encrypted one only a
/// report sealed under the media key passes (stripped of its seal), and a clear, forged or
/// replayed one is a counted drop that does not reach the player's clocks.
#[test]
fn an_encrypted_session_takes_only_sealed_sender_reports() {
    use security::auth::{GroupKey, MediaOpener, MediaSealer};
    let mut sr = vec![0x80, 200, 0, 6, 0, 0, 0x03, 0xe8];
    sr.extend_from_slice(&[7u8; 20]);
    let mut clear = fixed(1);
    assert_eq!(clear.handle_sender_report(&sr).as_deref(), Some(&sr[..]));
    assert_eq!(clear.drops().report_auth_failed, 0);

    let key = GroupKey::generate(0);
    let mut sealer = MediaSealer::new(key.clone());
    let mut s = fixed(1);
    s.handle_security(
        Time::ZERO,
        Security {
            sam: None,
            opener: Some(MediaOpener::new(key)),
            ssm: None,
            report_key: None,
        },
    );
    let sealed = sealer.seal_rtcp(&sr).unwrap();
    let forged = MediaSealer::new(GroupKey::generate(0))
        .seal_rtcp(&sr)
        .unwrap();
    assert!(s.handle_sender_report(&sr).is_none(), "clear");
    assert!(s.handle_sender_report(&forged).is_none(), "forged");
    assert_eq!(s.handle_sender_report(&sealed).as_deref(), Some(&sr[..]));
    assert!(s.handle_sender_report(&sealed).is_none(), "replayed");
    assert_eq!(s.drops().report_auth_failed, 3);
    // Reports are not media: nothing counts as a media authentication failure.
    assert_eq!(s.drops().media_auth_failed, 0);
}
