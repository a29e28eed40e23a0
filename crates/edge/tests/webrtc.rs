//! The edge core with str0m browsers in virtual time (see common/mod.rs): decodable VP9 at the
//! layer the path allows, layer changes with the path, repair by NACK/RTX, starts from the
//! key-picture cache, aggregated key requests, refusals, session restarts, audio.

mod common;

use common::{Bed, Path};
use edge::source::Source;
use edge::{EdgeEvent, Error};
use std::time::Duration;

fn s(x: f64) -> Duration {
    Duration::from_secs_f64(x)
}

fn src() -> Source {
    Source::small_l3t3(1000, 0).unwrap()
}

fn ms(x: u64) -> Duration {
    Duration::from_millis(x)
}

/// DESIGN.md's freeze: a gap between shown pictures above max(3 x mean, mean + 150 ms).
const FREEZE: Duration = Duration::from_millis(183);

#[test]
fn a_wide_path_gets_every_picture_at_the_top_layer() {
    let mut bed = Bed::new(|_| {}, src());
    bed.add_browser(Path::new(4_000_000, ms(10), 0.0, 1))
        .unwrap();
    bed.run(s(8.0));
    let b = &bed.browsers[0];
    assert!(b.connected);
    // From 2 s: the layers climb one candidate at a time (select.rs `up_dwell`), so the
    // first second and a half can be at 15 fps or a lower resolution.
    let sizes = b.sizes(s(2.0), s(8.0));
    let fps = b.fps(s(2.0), s(8.0));
    let (freezes, max_gap) = b.freezes(s(0.5), s(8.0), FREEZE);
    let r = bed.report(0);
    eprintln!("fps {fps:.1}, max gap {max_gap:?}, report {r:?}");
    assert!(fps > 29.0, "fps {fps}");
    assert!(sizes.iter().all(|&s| s == (640, 360)), "{sizes:?}");
    assert_eq!(freezes, 0, "max gap {max_gap:?}");
    assert_eq!(b.decode_errors, 0);
    // The first picture within 150 ms of the offer (a start from the key cache).
    assert!(
        b.shown[0].at < ms(150),
        "first picture at {:?}",
        b.shown[0].at
    );
    assert_eq!(r.forward.cache_starts, 1);
    assert!(r.stats.frame_latency_p50_us.is_some());
}

#[test]
fn a_narrow_path_gets_a_lower_spatial_layer() {
    let mut bed = Bed::new(|_| {}, src());
    bed.add_browser(Path::new(4_000_000, ms(10), 0.0, 1))
        .unwrap();
    bed.add_browser(Path::new(500_000, ms(10), 0.0, 2)).unwrap();
    bed.run(s(12.0));
    let wide = bed.browsers[0].sizes(s(6.0), s(12.0));
    let narrow = bed.browsers[1].sizes(s(6.0), s(12.0));
    let r = bed.report(1);
    eprintln!(
        "narrow: {:?} est {:?} fps {:.1}",
        r.current,
        r.stats.estimate_bps,
        bed.browsers[1].fps(s(6.0), s(12.0))
    );
    assert!(wide.iter().all(|&x| x == (640, 360)));
    assert!(
        !narrow.is_empty() && narrow.iter().all(|&x| x.0 < 640),
        "{narrow:?}"
    );
    assert!(bed.browsers[1].fps(s(6.0), s(12.0)) > 25.0);
    let (f, gap) = bed.browsers[1].freezes(s(6.0), s(12.0), FREEZE);
    assert_eq!(f, 0, "{gap:?}");
}

#[test]
fn a_path_step_down_drops_layers_in_seconds_and_the_step_up_restores_them() {
    let mut bed = Bed::new(|_| {}, src());
    bed.add_browser(Path::new(4_000_000, ms(10), 0.0, 1))
        .unwrap();
    bed.run(s(6.0));
    assert_eq!(bed.report(0).current.spatial, 2);
    let t_down = bed.now;
    let at = proto::Time(t_down.as_nanos() as u64);
    bed.paths[0].set_rate(at, 500_000);
    let mut dropped = None;
    while bed.now < t_down + s(10.0) {
        let t = bed.now + ms(100);
        bed.run(t);
        if dropped.is_none() && bed.report(0).current.spatial < 2 {
            dropped = Some(bed.now - t_down);
        }
    }
    let dropped = dropped.expect("layers dropped");
    let (f, gap) = bed.browsers[0].freezes(t_down, t_down + s(10.0), ms(500));
    let t_up = bed.now;
    bed.paths[0].set_rate(proto::Time(t_up.as_nanos() as u64), 4_000_000);
    let mut restored = None;
    while bed.now < t_up + s(20.0) {
        let t = bed.now + ms(100);
        bed.run(t);
        if restored.is_none() && bed.report(0).current.spatial == 2 {
            restored = Some(bed.now - t_up);
        }
    }
    // The freeze criterion is the real browser's (e2e edge tests): this stand-in gives up on a
    // picture after 400 ms and then waits for a key picture, harsher than libwebrtc, which
    // keeps decoding what does not reference the lost frame.
    eprintln!(
        "dropped after {dropped:?}, gaps > 500 ms: {f} (max {gap:?}), restored after {restored:?}"
    );
    assert!(dropped < s(5.0), "{dropped:?}");
    assert!(restored.expect("restored") < s(15.0));
}

#[test]
fn two_percent_loss_is_repaired_by_nack_and_rtx() {
    let mut bed = Bed::new(|_| {}, src());
    bed.add_browser(Path::new(4_000_000, ms(20), 0.02, 7))
        .unwrap();
    bed.run(s(30.0));
    let b = &bed.browsers[0];
    let r = bed.report(0);
    let (f, gap) = b.freezes(s(2.0), s(30.0), FREEZE);
    let fps = b.fps(s(2.0), s(30.0));
    eprintln!(
        "2% loss: {f} freezes (max gap {gap:?}), fps {fps:.1}, nacks {}, rtx {}, plis {}, lost {}",
        r.stats.nacks, r.stats.rtx_packets, r.stats.plis, r.stats.remote_lost
    );
    assert!(r.stats.nacks > 10 && r.stats.rtx_packets > 10);
    assert!(f <= 1, "{f} freezes in 28 s");
    assert!(fps > 27.0);
}

/// libwebrtc asks for a lost packet again only while no later frame is continuous, which in
/// an SVC stream is almost never: a repair that is lost too must not be the only one. Here
/// 2 % of the media packets are dropped (their first transmission) and so is every RTX that
/// could answer one (the size of a dropped packet plus the 2 bytes of its sequence number,
/// sent a round trip or more after the drop; the headers are clear in SRTP) until the packet
/// arrived otherwise, as if every retry were lost too: each is repaired by the edge's second
/// copy in the media stream alone (`resend.rs`); without it the browser waits for key
/// pictures.
///
/// Which packets are dropped follows from the edge's random first sequence number (and
/// str0m's random choices), so the thread's generator is seeded (`LC_EDGE_SEED` picks
/// another). Before the round-trip rule, one start in 30-60 failed (seed 57, and a CI run on
/// 2 Dec): the test also dropped str0m's probe padding, which resends a key picture's
/// equal-size packets on the RTX stream milliseconds after they were sent (docs/edge.md
/// "Limits and choices").
#[test]
fn a_lost_retransmission_is_covered_by_the_second_copy() {
    // Seeded, so a failure reproduces; `LC_EDGE_SEED` runs another seed.
    fastrand::seed(
        std::env::var("LC_EDGE_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(1),
    );
    let mut bed = Bed::new(|_| {}, src());
    bed.add_browser(Path::new(4_000_000, ms(20), 0.0, 3))
        .unwrap();
    let dropped = std::rc::Rc::new(std::cell::RefCell::new((0u64, 0u64)));
    let d = dropped.clone();
    let mut seen = std::collections::HashSet::new();
    // Dropped first transmissions not yet delivered: sequence number -> (the length an RTX of
    // it has, when it was dropped). SRTP hides an RTX's original sequence number, so an RTX
    // is known by its length; str0m's probe padding also resends cached packets on the RTX
    // stream, often right after they were sent (a key picture's equal-size packets), and the
    // browser's NACK comes a round trip (40 ms) after the loss at the earliest: what leaves
    // sooner is padding, and is let through.
    let mut owed: std::collections::HashMap<u16, (usize, Duration)> =
        std::collections::HashMap::new();
    bed.down_drop = Box::new(move |now, _, b| {
        // RTP only (RTCP has payload types 192-223 in the second byte).
        if b.len() < 12 || b[0] >> 6 != 2 || (192..=223).contains(&b[1]) {
            return false;
        }
        let (pt, seq) = (b[1] & 0x7f, u16::from_be_bytes([b[2], b[3]]));
        let mut d = d.borrow_mut();
        match pt {
            98 if seq % 50 == 7 && seen.insert(seq) => {
                d.0 += 1;
                owed.insert(seq, (b.len() + 2, now));
                true
            }
            98 => {
                owed.remove(&seq);
                false
            }
            99 if owed
                .values()
                .any(|&(n, at)| n == b.len() && now >= at + ms(30)) =>
            {
                d.1 += 1;
                true
            }
            _ => false,
        }
    });
    bed.run(s(20.0));
    let b = &bed.browsers[0];
    let r = bed.report(0);
    let (f, gap) = b.freezes(s(2.0), s(20.0), FREEZE);
    let fps = b.fps(s(2.0), s(20.0));
    let (media, rtx) = *dropped.borrow();
    eprintln!(
        "first RTX lost: {f} freezes (max gap {gap:?}), fps {fps:.1}, {media} media and {rtx} RTX dropped, copies {} (refused {}, skipped for loss {}, for backlog {}), nacks {}, plis {}",
        r.stats.repair_copies,
        r.stats.repair_copies_refused,
        r.stats.repair_copies_skipped_loss,
        r.stats.repair_copies_skipped_backlog,
        r.stats.nacks,
        r.stats.plis
    );
    assert!(
        media >= 15 && rtx >= media - 2,
        "the drops happened: {media} media, {rtx} RTX"
    );
    assert_eq!(r.stats.plis, 0);
    assert!(f <= 1, "{f} freezes in 18 s");
    assert!(fps > 27.0);
    assert!(
        r.stats.repair_copies >= media - 2,
        "{} copies",
        r.stats.repair_copies
    );
}

#[test]
fn a_late_joiner_starts_from_the_cache_without_a_key_request() {
    let mut bed = Bed::new(|_| {}, src());
    bed.add_browser(Path::new(4_000_000, ms(10), 0.0, 1))
        .unwrap();
    bed.run(s(5.0));
    let before = bed.key_requests.len();
    let t = bed.now;
    bed.add_browser(Path::new(4_000_000, ms(10), 0.0, 2))
        .unwrap();
    bed.run(s(8.0));
    let b = &bed.browsers[1];
    let first = b.shown[0].at - t;
    eprintln!(
        "late joiner: first picture {first:?} after its offer, {} key requests",
        bed.key_requests.len() - before
    );
    assert!(first < ms(200), "{first:?}");
    assert_eq!(bed.key_requests.len(), before);
    assert_eq!(bed.report(1).forward.cache_starts, 1);
    assert!(b.fps(t + s(2.0), s(8.0)) > 29.0);
}

#[test]
fn key_requests_from_many_browsers_collapse_into_one_per_second() {
    // No cache (it is disabled) and a source without periodic keys: every browser needs a key.
    let mut bed = Bed::new(
        |c| c.relay.key_cache_bytes = 0,
        Source::small_l3t3(600, 0).unwrap(),
    );
    for i in 0..5 {
        bed.add_browser(Path::new(4_000_000, ms(10), 0.0, i))
            .unwrap();
    }
    bed.run(s(3.0));
    eprintln!("key requests at {:?}", bed.key_requests);
    // One at start (t = 0) for the whole session, then at most one per second.
    for w in bed.key_requests.windows(2) {
        assert!(w[1] - w[0] >= s(1.0), "{:?}", bed.key_requests);
    }
    assert!(!bed.key_requests.is_empty() && bed.key_requests.len() <= 4);
    for b in &bed.browsers {
        assert!(
            b.fps(s(2.0), s(3.0)) > 25.0,
            "every browser plays after the key"
        );
    }
}

#[test]
fn refusals_say_why() {
    let mut bed = Bed::new(|c| c.max_viewers = 1, src());
    bed.add_browser(Path::new(4_000_000, ms(10), 0.0, 1))
        .unwrap();
    match bed.add_browser(Path::new(4_000_000, ms(10), 0.0, 2)) {
        Err(Error::Full { current: 1, max: 1 }) => {}
        other => panic!("{:?}", other.map(|_| ())),
    }
    let now = bed.at();
    assert!(matches!(
        bed.edge.add_viewer(now, "nope", "v=0"),
        Err(Error::UnknownSession(_))
    ));
    let mut bed = Bed::new(|_| {}, src());
    let now = bed.at();
    let e = bed
        .edge
        .add_viewer(now, "live", "v=0\r\ns=-\r\n")
        .unwrap_err();
    assert_eq!(e.reason(), "unsupported_offer");
}

#[test]
fn a_session_restart_keeps_the_browser_stream_continuous() {
    let mut bed = Bed::new(|_| {}, src());
    bed.add_browser(Path::new(4_000_000, ms(10), 0.0, 1))
        .unwrap();
    bed.run(s(4.0));
    // The sender restarts: new session id, a new encoder whose picture IDs start elsewhere.
    let mut info = bed.src.session().clone();
    info.session_id += 1;
    bed.src = Source::small_l3t3(1000, 0).unwrap();
    bed.edge.set_session("live", info).unwrap();
    let t = bed.now;
    bed.run(s(8.0));
    let b = &bed.browsers[0];
    let after: Vec<_> = b.shown.iter().filter(|x| x.at > t).collect();
    eprintln!(
        "after restart: {} pictures, first at {:?}",
        after.len(),
        after.first().map(|x| x.at - t)
    );
    assert!(after.len() > 100);
    assert_eq!(b.decode_errors, 0);
    // Picture IDs keep increasing across the restart (15-bit wrap aside).
    let pids: Vec<u16> = b.shown.iter().map(|x| x.pid).collect();
    for w in pids.windows(2) {
        assert!(
            w[1].wrapping_sub(w[0]) & 0x7fff < 0x4000,
            "{} -> {}",
            w[0],
            w[1]
        );
    }
}

#[test]
fn events_report_connection_and_layer_choices() {
    let mut bed = Bed::new(|_| {}, src());
    bed.add_browser(Path::new(4_000_000, ms(10), 0.0, 1))
        .unwrap();
    bed.run(s(2.0));
    let id = bed.browsers[0].id;
    assert!(bed
        .events
        .iter()
        .any(|(_, e)| *e == EdgeEvent::Connected { viewer: id }));
    assert!(bed
        .events
        .iter()
        .any(|(_, e)| matches!(e, EdgeEvent::Target { viewer, .. } if *viewer == id)));
    let now = bed.at();
    bed.edge.remove_viewer(now, id).unwrap();
    assert!(matches!(
        bed.edge.remove_viewer(now, id),
        Err(Error::UnknownViewer(_))
    ));
    assert_eq!(bed.edge.viewer_count(), 0);
}

/// A picture the pacer lets through leaves for every browser in the call that completed it:
/// str0m's pacer releases one packet per timeout and asks for the next 1 µs later, and left
/// to the shell each further packet waited for a pass over every browser (docs/edge.md,
/// "Benchmark").
#[test]
fn a_complete_picture_leaves_for_every_browser_at_once() {
    let mut bed = Bed::new(|_| {}, src());
    for i in 0..3 {
        bed.add_browser(Path::new(4_000_000, ms(10), 0.0, i + 1))
            .unwrap();
    }
    // Picture 90 is all in, picture 91 not yet due (each layer is spread over 0.8 frame).
    bed.run(common::FRAME * 90 + common::FRAME.mul_f64(0.9));
    for i in 0..3 {
        let r = bed.report(i);
        assert!(r.connected && r.current.spatial == 2, "{r:?}");
    }
    let p = bed.src.next_picture().unwrap();
    let packets: usize = p.layers.iter().map(Vec::len).sum();
    let at = bed.at();
    for (k, pkts) in p.layers.iter().enumerate() {
        for b in pkts {
            bed.edge.handle_upstream(
                at,
                "live",
                edge::UpstreamPacket {
                    track: 0,
                    stream: k as u8,
                    rtp: b,
                    at,
                },
            );
        }
    }
    let mut rtp = std::collections::HashMap::new();
    while let Some(t) = bed.edge.poll_transmit() {
        let b = &t.contents;
        if b.len() >= 12 && b[0] >> 6 == 2 && !(192..=223).contains(&b[1]) {
            *rtp.entry(t.destination).or_insert(0usize) += 1;
        }
    }
    for b in &bed.browsers {
        let n = rtp.get(&b.addr).copied().unwrap_or(0);
        assert!(n >= packets, "{} sent {n} of {packets} packets", b.addr);
    }
}
