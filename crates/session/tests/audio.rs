//! The audio track in the in-process harness (`session::harness`): a Publisher with an Opus
//! track (frames in every 20 ms of virtual time), a lossy link and a Subscriber holding layer
//! 0, which joins the audio stream and its repair stream with it. What the link dropped is
//! either rebuilt from the lagged repair stream or counted lost at playout; the playout plays
//! every frame (its packet, the next packet's FEC, or concealment).
//!
//! `cargo test -p layercast-session --features harness --test audio`

use netmodel::{LinkConfig, LossModel};
use proto::{Codec, OpusParams, Repair, SessionInfo, Stream, Time, Track, TrackKind};
use session::audio::{AudioFrame, FrameSource};
use session::harness::Harness;
use session::publisher::PublisherConfig;
use session::subscriber::{Control, SubscriberConfig};
use session::Subscriber;
use std::net::Ipv4Addr;
use std::time::Duration;

const AUDIO_GROUP: Ipv4Addr = Ipv4Addr::new(239, 255, 1, 9);
const AUDIO_PORT: u16 = 5020;
const FRAMES: u32 = 3000;

/// Two 200-kbit/s layers and an Opus track riding in layer 0, with or without its repair
/// stream (lag 10: span 11).
fn session(repair: bool) -> SessionInfo {
    let mut i = SessionInfo::equal_layers(2, 200_000, Ipv4Addr::new(239, 255, 1, 0), 5004);
    i.session_id = 11;
    i.sender = Ipv4Addr::new(10, 0, 0, 1);
    i.tracks.push(Track {
        id: 1,
        kind: TrackKind::Audio,
        codec: Codec::Opus(OpusParams {
            payload_type: 111,
            channels: 2,
            frame_ms: 20,
            inband_fec: true,
        }),
        streams: vec![Stream {
            layer: 0,
            spatial: 0,
            temporal: 0,
            group: AUDIO_GROUP,
            port: AUDIO_PORT,
            ssrc: 0x1100,
            rate_bps: 137_600,
            repair: repair.then(|| Repair {
                payload_type: 97,
                params: vec![1, 11],
            }),
        }],
    });
    i
}

/// What one run gave.
#[derive(Debug)]
struct Outcome {
    sent: u64,
    /// Audio packets the link dropped (sent minus delivered).
    dropped: u64,
    repairs_delivered: u64,
    repaired: u64,
    lost: u64,
    played: usize,
    from_packet: usize,
    from_fec: usize,
    concealed: usize,
    concealment_events: u64,
    /// Frames concealed after the last packet (the stream's end, not loss).
    trailing: u64,
}

/// 60 s of audio over a 2 Mbit/s, 20-ms link with `loss`; a fixed-layer subscriber with a
/// 400-ms playout delay (a copy comes 200 ms + the path's delay after its packet: a delay
/// below that plays the frame before its copy arrives, and the copy is refused as late).
fn run(repair: bool, loss: LossModel, seed: u64) -> Outcome {
    let mut h = Harness::new(PublisherConfig::new(session(repair), 0x1000)).unwrap();
    let mut link = LinkConfig::rate_delay(2_000_000, Duration::from_millis(20));
    link.loss = loss;
    let cfg = SubscriberConfig {
        audio_delay: Duration::from_millis(400),
        ..SubscriberConfig::default()
    };
    let v = h
        .add_viewer(Subscriber::new(Control::Fixed(1), cfg), link, seed)
        .unwrap();
    for i in 0..FRAMES {
        h.run_until(Time::from_millis(500 + 20 * i as u64));
        let mut opus = vec![0xfc];
        opus.extend((0..159).map(|k| (i as usize + k) as u8));
        h.publisher.push_audio(AudioFrame {
            opus,
            rtp_ts: 960 * i,
            discontinuity: false,
        });
    }
    h.run_until(Time::from_secs_f64(62.0));
    let view = &h.viewers[v];
    let sent = h.publisher.audio_stats().unwrap().packets;
    let delivered = |port: u16| {
        view.delivered
            .get(&(AUDIO_GROUP, port))
            .copied()
            .unwrap_or(0)
    };
    let st = view.sub.audio_stats().unwrap();
    let count =
        |f: fn(&FrameSource) -> bool| view.audio_frames.iter().filter(|p| f(&p.source)).count();
    // The per-second snapshot carries the same counters.
    assert_eq!(
        view.snapshots.last().unwrap().audio.unwrap().repairs,
        st.repairs
    );
    assert_eq!(view.audio_refused, st.playout.late + st.playout.duplicates);
    Outcome {
        sent,
        dropped: sent - delivered(AUDIO_PORT),
        repairs_delivered: delivered(AUDIO_PORT + 2),
        repaired: st.repaired,
        lost: st.playout.lost,
        played: view.audio_frames.len(),
        from_packet: count(|s| matches!(s, FrameSource::Packet { .. })),
        from_fec: count(|s| matches!(s, FrameSource::Fec { .. })),
        concealed: count(|s| *s == FrameSource::Conceal),
        concealment_events: st.playout.concealment_events,
        trailing: st.playout.trailing,
    }
}

/// Every packet the link dropped is rebuilt or counted lost, except at most the last lag + 1
/// at the stream's end (their copies were never sent, and no later packet shows the gap);
/// every other frame plays, from its packet when it arrived or was rebuilt.
fn accounted(o: &Outcome) {
    assert_eq!(o.sent, FRAMES as u64, "{o:?}");
    assert!(o.repaired + o.lost <= o.dropped, "{o:?}");
    let unseen = o.dropped - (o.repaired + o.lost);
    assert!(unseen <= 11, "{o:?}");
    assert_eq!(
        o.played as u64,
        FRAMES as u64 - unseen + o.trailing,
        "{o:?}"
    );
    assert_eq!(o.from_packet as u64, o.sent - o.lost - unseen, "{o:?}");
    assert_eq!(
        (o.from_fec + o.concealed) as u64 - o.trailing,
        o.lost,
        "{o:?}"
    );
}

/// 5 % random loss on every packet: about 150 audio packets dropped; the repair stream
/// rebuilds all but those whose copy was dropped too (p² ≈ 0.25 %: about 7); without the
/// repair stream every drop is a loss.
#[test]
fn random_loss_is_repaired() {
    let loss = || LossModel::Bernoulli { p: 0.05 };
    let with = run(true, loss(), 7);
    eprintln!("with repair: {with:?}");
    accounted(&with);
    assert!((100..=200).contains(&with.dropped), "{with:?}");
    assert!(
        with.repairs_delivered >= (FRAMES as u64 - 10) * 9 / 10,
        "{with:?}"
    );
    assert!(with.lost <= 20, "{with:?}");
    assert!(with.repaired >= with.dropped * 85 / 100, "{with:?}");
    let without = run(false, loss(), 7);
    eprintln!("without repair: {without:?}");
    accounted(&without);
    assert_eq!((without.repaired, without.repairs_delivered), (0, 0));
    assert!(without.lost + 1 >= without.dropped, "{without:?}");
    assert!(without.lost >= 5 * with.lost.max(1), "{with:?} {without:?}");
}

/// Loss in bursts (Gilbert-Elliott, mean burst 5 packets of the link's, about 3 % loss):
/// runs far shorter than the 200-ms lag come back whole, so few frames are concealed.
#[test]
fn burst_loss_is_repaired() {
    let loss = || LossModel::Gilbert {
        p: 0.006,
        r: 0.2,
        loss_good: 0.0,
        loss_bad: 1.0,
    };
    let with = run(true, loss(), 3);
    eprintln!("with repair: {with:?}");
    accounted(&with);
    assert!(with.dropped >= 50, "{with:?}");
    assert!(with.repaired >= with.dropped * 85 / 100, "{with:?}");
    let without = run(false, loss(), 3);
    eprintln!("without repair: {without:?}");
    accounted(&without);
    // Bursts defeat in-band FEC (one packet back): concealment events without the repair
    // stream, (almost) none with it.
    assert!(
        without.concealment_events >= 5 * with.concealment_events.max(1),
        "{with:?} {without:?}"
    );
}
