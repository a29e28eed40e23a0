//! Product behaviour in the in-process harness (`session::harness`): a Publisher, the sans-IO
//! link model and Subscribers in virtual time. Deterministic, no root, no sockets.
//!
//! `cargo test -p layercast-session --features harness --test harness`

use netmodel::{LinkConfig, QdiscConfig};
use proto::{SessionInfo, Time};
use session::harness::{Harness, WIRE_OVERHEAD};
use session::publisher::PublisherConfig;
use session::subscriber::{Control, SubscriberConfig};
use session::Subscriber;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

const PACKET: u64 = 512;
const LAYER_BPS: u64 = 196_000;
const LAYERS: usize = 8;

fn session() -> SessionInfo {
    let mut i = SessionInfo::equal_layers(LAYERS, LAYER_BPS, Ipv4Addr::new(239, 255, 1, 0), 5004);
    i.packet_size = PACKET as u16;
    i.bunch_len = 2;
    i.session_id = 7;
    i.sender = Ipv4Addr::new(10, 0, 0, 1);
    i
}

fn publisher(info: SessionInfo) -> PublisherConfig {
    PublisherConfig::new(info, 0x1000)
}

/// A drop-tail bottleneck of `bps` with a queue of `bps/8/20` bytes (the netns test's tbf).
fn bottleneck(bps: u64) -> LinkConfig {
    let mut l = LinkConfig::rate_delay(bps, Duration::from_millis(5));
    l.queue = Some(QdiscConfig::Droptail {
        limit_packets: None,
        limit_bytes: Some(bps / 8 / 20),
        limit_ms: None,
    });
    l
}

/// Highest number of layers whose payload rate fits a link of `link_bps` (the link also
/// carries the headers).
fn fitting_layers(link_bps: u64) -> u64 {
    let payload = link_bps as f64 * PACKET as f64 / (PACKET + WIRE_OVERHEAD as u64) as f64;
    ((payload / LAYER_BPS as f64).floor() as u64).min(LAYERS as u64)
}

/// The netns settle-and-shed check (`player/tests/netns_control.rs`) in virtual time: behind
/// a 1 Mbit/s bottleneck the controller reaches the highest layer that fits and holds it with
/// no loss for the 5 s before the step; when the bottleneck drops to 500 kbit/s it sheds to
/// what fits within 1 s (ERA AC-3; PLM one check period) and does not climb above it.
fn settle_and_shed(controller: &str) {
    let wall = Instant::now();
    let (hi, lo) = (1_000_000, 500_000);
    let (k_hi, k_lo) = (fitting_layers(hi), fitting_layers(lo));
    assert_eq!((k_hi, k_lo), (4, 2));
    let mut h = Harness::new(publisher(session())).unwrap();
    let ctl = congestion::live_controller_by_name(controller).unwrap();
    let sub = Subscriber::new(Control::Layered(ctl), SubscriberConfig::default());
    let v = h.add_viewer(sub, bottleneck(hi), 1).unwrap();
    let t_change = Time::from_secs_f64(12.0);
    h.run_until(t_change);
    h.viewers[v].set_link(t_change, bottleneck(lo)).unwrap();
    h.run_until(Time::from_secs_f64(20.0));
    let view = &h.viewers[v];
    let levels = view.levels();
    let reached = levels.iter().find(|l| l.1 as u64 == k_hi).map(|l| l.0);
    let hold: Vec<u32> = levels
        .iter()
        .filter(|l| l.0 > Time::from_secs_f64(7.0) && l.0 <= t_change)
        .map(|l| l.1)
        .collect();
    let lost_hold: u64 = view
        .snapshots
        .iter()
        .filter(|s| s.at > Time::from_secs_f64(7.0) && s.at <= t_change)
        .map(|s| s.lost_1s)
        .sum();
    let reaction = view
        .decisions
        .iter()
        .find(|d| d.at >= t_change && d.to_layers as u64 <= k_lo)
        .map(|d| d.at.saturating_since(t_change));
    let after: Vec<u32> = levels
        .iter()
        .filter(|l| l.0 > t_change + Duration::from_secs(1))
        .map(|l| l.1)
        .collect();
    let summary = format!(
        "{controller}: reached {k_hi} layers at {:?}; levels in the 5 s before the step {hold:?} \
         (lost {lost_hold}); shed to <= {k_lo} {reaction:?} after the step; afterwards \
         {after:?}; wall time {:?}",
        reached,
        wall.elapsed()
    );
    eprintln!("{summary}");
    assert!(reached.is_some(), "{summary}");
    assert!(
        !hold.is_empty() && hold.iter().all(|&k| k as u64 == k_hi),
        "{summary}"
    );
    assert_eq!(lost_hold, 0, "{summary}");
    assert!(
        reaction.is_some_and(|r| r <= Duration::from_secs(1)),
        "{summary}"
    );
    assert!(
        !after.is_empty() && after.iter().all(|&k| k as u64 <= k_lo),
        "{summary}"
    );
    testkit::record(
        &format!("issue18/{controller}-settle-harness"),
        &summary,
        Some(true),
        &format!("cargo test -p layercast-session --features harness --test harness {controller}"),
    );
}

#[test]
fn era_settles_and_sheds_in_the_harness() {
    settle_and_shed("era");
}

#[test]
fn plm_settles_and_sheds_in_the_harness() {
    settle_and_shed("plm");
}

/// Several players joining at once ask for key pictures; the publisher asks the encoder for
/// one per 500 ms, however many ask.
#[test]
fn key_requests_from_many_viewers_are_aggregated() {
    let mut info = session();
    let p = proto::Vp9Params {
        payload_type: 96,
        width: 320,
        height: 180,
        fps_num: 15,
        fps_den: 1,
        spatial: 2,
        temporal: 4,
    };
    info.tracks = vec![proto::Track::vp9_ladder(0, p, &info.layers, 0x1000)];
    let mut cfg = publisher(info);
    cfg.media = true;
    let mut h = Harness::new(cfg).unwrap();
    for i in 0..20 {
        let mut sub = Subscriber::new(Control::Fixed(2), SubscriberConfig::default());
        sub.set_awaiting_key(true);
        h.add_viewer(
            sub,
            LinkConfig::rate_delay(10_000_000, Duration::from_millis(3)),
            i,
        )
        .unwrap();
    }
    let mut asked = Vec::new();
    let mut t = Time::ZERO;
    while t < Time::from_secs_f64(4.0) {
        t += Duration::from_millis(20);
        h.run_until(t);
        while let Some(c) = h.publisher.poll_encoder_control(t) {
            asked.push((t, c));
        }
    }
    let (received, keys, _) = h.publisher.requests();
    // 20 viewers ask at once and again every 1.5 s (nothing decodes here): ~60 requests,
    // and the encoder is asked at most twice a second.
    assert!(received >= 40, "{received}");
    assert!(
        (2..=8).contains(&keys),
        "{keys} key pictures for {received} requests"
    );
    assert!(asked
        .windows(2)
        .all(|w| w[1].0.saturating_since(w[0].0) >= Duration::from_millis(500)));
}

/// A TFMCC session: receivers' reports pass the publisher's vetting and steer its rate down
/// to what the slowest receiver's bottleneck carries.
#[test]
fn tfmcc_reports_reach_the_sender_through_its_vetting() {
    let mut info = SessionInfo::equal_layers(1, 2_000_000, Ipv4Addr::new(239, 255, 2, 0), 6004);
    info.packet_size = 1000;
    info.bunch_len = 1;
    info.sender = Ipv4Addr::new(10, 0, 0, 1);
    let mut cfg = publisher(info);
    cfg.tfmcc = Some(None);
    let mut h = Harness::new(cfg).unwrap();
    for (i, bps) in [(1u32, 4_000_000u64), (2, 600_000)] {
        let sub = Subscriber::new(Control::Tfmcc { rid: i }, SubscriberConfig::default());
        let mut l = LinkConfig::rate_delay(bps, Duration::from_millis(20));
        l.queue = Some(QdiscConfig::Droptail {
            limit_packets: Some(20),
            limit_bytes: None,
            limit_ms: None,
        });
        h.add_viewer(sub, l, i as u64).unwrap();
    }
    h.run_until(Time::from_secs_f64(30.0));
    let t = h.publisher.tfmcc().unwrap();
    let accepted = t.reports.accepted;
    let refused = t.reports.malformed + t.reports.forged + t.reports.auth;
    let snap = t.snapshot(Time::from_secs_f64(30.0));
    eprintln!(
        "tfmcc: {accepted} reports accepted, {refused} refused; rate {:.0} kbit/s, CLR {:?}",
        snap.rate_bps / 1e3,
        snap.clr
    );
    assert!(accepted > 10, "{accepted}");
    assert_eq!(refused, 0);
    assert_eq!(snap.clr, Some(2));
    assert!(
        snap.rate_bps < 900_000.0 && snap.rate_bps > 200_000.0,
        "{}",
        snap.rate_bps
    );
}

/// One run of [`fec_repairs_lost_media_end_to_end`]: a one-layer video session (600-B packets,
/// 200 kbit/s, one 300-500-byte media packet per 30-fps frame, so about a quarter of the slots
/// are free), with or without repair announced, to one viewer behind a link losing `loss` of
/// its packets (seeded: both runs lose the same slots). Returns the media payloads pushed and
/// the viewer.
fn fec_run(repair: bool, loss: f64) -> (Vec<Vec<u8>>, session::harness::Viewer, String) {
    let (pushed, v, line, _) = media_run(repair, false, loss);
    (pushed, v, line)
}

/// [`fec_run`] with retransmission offered or not; also returns the publisher's counters.
fn media_run(
    repair: bool,
    retransmit: bool,
    loss: f64,
) -> (
    Vec<Vec<u8>>,
    session::harness::Viewer,
    String,
    session::publisher::PublisherStats,
) {
    let mut info = SessionInfo::equal_layers(1, 200_000, Ipv4Addr::new(239, 255, 3, 0), 7004);
    info.retransmission = retransmit;
    info.packet_size = 600;
    info.bunch_len = 2;
    info.session_id = 9;
    info.sender = Ipv4Addr::new(10, 0, 0, 1);
    let vp9 = proto::Vp9Params {
        payload_type: 96,
        width: 320,
        height: 180,
        fps_num: 30,
        fps_den: 1,
        spatial: 1,
        temporal: 1,
    };
    let mut track = proto::Track::vp9_ladder(0, vp9, &info.layers, 0x1000);
    // What the server announces (`video::fec_params`): parameters for the layer's packet rate
    // and media share.
    let fec = proto::fec::FecParams::for_layer(200_000.0 / 4800.0, 30.0 / (200_000.0 / 4800.0));
    if repair {
        track.streams[0].repair = Some(proto::Repair {
            payload_type: fec.payload_type,
            params: fec.announced_params(),
        });
    }
    info.tracks = vec![track];
    let mut cfg = publisher(info);
    cfg.media = true;
    let mut h = Harness::new(cfg).unwrap();
    let mut l = LinkConfig::rate_delay(10_000_000, Duration::from_millis(5));
    l.loss = netmodel::LossModel::Bernoulli { p: loss };
    let v = h
        .add_viewer(
            Subscriber::new(Control::Fixed(1), SubscriberConfig::default()),
            l,
            17,
        )
        .unwrap();
    h.viewers[v].keep_media = true;
    let mut pushed = Vec::new();
    for i in 0..300u32 {
        let t = Time::from_secs_f64(0.5 + i as f64 / 30.0);
        h.run_until(t);
        let payload: Vec<u8> = (0..300 + (i * 37) % 200)
            .map(|j| (j.wrapping_mul(31) ^ i.wrapping_mul(7)) as u8)
            .collect();
        pushed.push(payload.clone());
        let p = proto::rtp::MediaPacket {
            header: proto::rtp::RtpHeader {
                marker: true,
                payload_type: 96,
                timestamp: i * 3000,
                ssrc: 0x1000,
                ..Default::default()
            },
            payload,
        };
        h.publisher.push_picture(
            t,
            session::publisher::Picture {
                key: i % 60 == 0,
                sync: false,
                cells: vec![vec![p]],
            },
        );
    }
    h.run_until(Time::from_secs_f64(12.0));
    let st = h.publisher.stats().clone();
    let line = format!(
        "sender: {} packets, {} repair, {} padding, {} media dropped",
        st.packets, st.repair_packets, st.padding_packets, st.dropped
    );
    (pushed, h.viewers.swap_remove(v), line, st)
}

/// Retransmission end to end in virtual time: the same 5 % losses as the FEC test, no FEC,
/// retransmission offered or not. With it, the viewer asks for every gap, the sender sends the
/// kept media packets again to it alone, and every picture arrives bit-exact; without it, the
/// lost ones are missing. The loss the controller and the snapshot count is the network's in
/// both runs: a retransmission repairs the picture, not the congestion signal. (The link draws
/// its losses per packet, so the retransmissions shift which packets the first run loses.)
#[test]
fn retransmission_repairs_lost_media_end_to_end() {
    let wall = Instant::now();
    let (pushed, with, _, st) = media_run(false, true, 0.05);
    let (_, without, _, st0) = media_run(false, false, 0.05);
    let pictures = |v: &session::harness::Viewer| -> Vec<u32> {
        let mut ts: Vec<u32> = v
            .media_packets
            .iter()
            .map(|m| {
                let p = proto::rtp::RtpPacket::parse(&m.packet).unwrap();
                assert_eq!(
                    &pushed[(p.timestamp() / 3000) as usize],
                    p.payload(),
                    "picture {}",
                    p.timestamp() / 3000
                );
                p.timestamp() / 3000
            })
            .collect();
        ts.sort_unstable();
        ts.dedup();
        ts
    };
    let (got, got0) = (pictures(&with), pictures(&without));
    let rx = with.sub.rtx_stats();
    eprintln!(
        "with retransmission: {} of {} pictures, requests {} for {} packets, {} retransmitted \
         ({} useless), sender sent {} ({} not kept, {} over budget); without: {} pictures; \
         loss counted {} / {}; {:?} wall",
        got.len(),
        pushed.len(),
        rx.requests,
        rx.asked,
        rx.received,
        rx.useless,
        st.rtx.sent,
        st.rtx.not_kept,
        st.rtx.over_budget,
        got0.len(),
        with.sub.totals().1,
        without.sub.totals().1,
        wall.elapsed()
    );
    assert_eq!(
        got.len(),
        pushed.len(),
        "a picture missing with retransmission"
    );
    let missing = pushed.len() - got0.len();
    assert!(missing >= 5, "only {missing} pictures lost without it");
    assert_eq!(rx.received, with.retransmitted - rx.useless);
    assert!(rx.received as usize >= missing);
    assert_eq!(st0.rtx.sent, 0);
    assert_eq!(without.sub.rtx_stats().requests, 0);
    // Every gap a retransmission filled still counts as lost for the congestion signal (were
    // the tally undone, it would be below what was retransmitted).
    assert!(with.sub.totals().1 >= rx.received);
}

/// FEC end to end in virtual time: the Publisher sends repair packets in the layer's free
/// slots with the announced parameters, the link loses 5 % of the packets, and the Subscriber
/// rebuilds lost media bit-exactly before it hands media out (never a repair packet); against
/// the same losses without repair announced, the viewer misses fewer media packets, and the
/// snapshot's FEC counters agree with what came out.
#[test]
fn fec_repairs_lost_media_end_to_end() {
    let wall = Instant::now();
    let (pushed, with, sent) = fec_run(true, 0.05);
    let (_, without, sent_plain) = fec_run(false, 0.05);
    let got = |v: &session::harness::Viewer| -> Vec<(u32, bool, Vec<u8>)> {
        v.media_packets
            .iter()
            .map(|m| {
                let p = proto::rtp::RtpPacket::parse(&m.packet).unwrap();
                assert_eq!(p.payload_type(), 96, "a repair packet was delivered");
                (p.timestamp(), m.recovered, p.payload().to_vec())
            })
            .collect()
    };
    let (g, g0) = (got(&with), got(&without));
    // Everything delivered is what was pushed, bit for bit (a recovered packet too).
    for (ts, _, payload) in g.iter().chain(&g0) {
        assert_eq!(
            &pushed[(*ts / 3000) as usize],
            payload,
            "picture {}",
            ts / 3000
        );
    }
    let recovered = g.iter().filter(|x| x.1).count() as u64;
    let fec = with.sub.fec_stats();
    let missing = |g: &[(u32, bool, Vec<u8>)]| {
        let mut ts: Vec<u32> = g.iter().map(|x| x.0).collect();
        ts.sort_unstable();
        ts.dedup();
        assert_eq!(ts.len(), g.len(), "a media packet was delivered twice");
        pushed.len() - ts.len()
    };
    let (miss, miss0) = (missing(&g), missing(&g0));
    let summary = format!(
        "5 % loss, 300 media packets: {miss} missing with FEC ({recovered} recovered; {fec:?}; \
         {sent}), {miss0} without ({sent_plain}); wall time {:?}",
        wall.elapsed()
    );
    eprintln!("{summary}");
    assert!(recovered > 0, "{summary}");
    assert_eq!(fec.recovered, recovered, "{summary}");
    assert_eq!(without.sub.fec_stats().recovered, 0);
    assert!(miss0 > 0, "the seeded link lost no media: {summary}");
    assert!(miss < miss0, "{summary}");
    assert_eq!(miss0 - miss, recovered as usize, "{summary}");
    testkit::record(
        "issue18/fec-harness",
        &summary,
        Some(true),
        "cargo test -p layercast-session --features harness --test harness fec",
    );
}
