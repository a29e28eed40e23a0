//! The playout's schedule of frames over clean, lossy, jittery, stopping and re-anchored
//! streams (synthetic Opus packets: what plays is checked, not decoded; the player's tests
//! decode real ones).

use super::*;
use proto::opus::OpusPacketizer;

const MS: u64 = 1_000_000;

/// `n` RTP packets of 20-ms CELT frames from RTP time `ts0`.
fn packets(n: usize, ts0: u32) -> Vec<Vec<u8>> {
    let mut pk = OpusPacketizer::new(111, 42, 1000);
    (0..n)
        .map(|f| {
            pk.packetize(&[0xfc, f as u8, 7], ts0.wrapping_add(960 * f as u32))
                .unwrap()
        })
        .collect()
}

fn run(
    a: &mut Playout,
    pkts: &[Vec<u8>],
    arrive: impl Fn(usize) -> Option<u64>,
    end: u64,
) -> Vec<PlayFrame> {
    let mut order: Vec<(u64, usize)> = (0..pkts.len())
        .filter_map(|i| arrive(i).map(|t| (t, i)))
        .collect();
    order.sort();
    let mut played = Vec::new();
    for (t, i) in order {
        while let Some(f) = a.poll(t) {
            played.push(f);
        }
        let _ = a.push(t, &pkts[i]);
    }
    while let Some(f) = a.poll(end) {
        played.push(f);
    }
    played
}

/// Clean path with jitter (up to 30 ms) under a 60-ms delay: every frame from its packet,
/// none concealed, none late; frames play exactly 20 ms apart.
#[test]
fn clean_path_plays_every_frame() {
    let pkts = packets(100, u32::MAX - 10 * 960);
    let mut a = Playout::new(111, None, 60 * MS);
    let t0 = 1_000_000 * MS;
    let last = t0 + 60 * MS + 99 * 20 * MS;
    let played = run(
        &mut a,
        &pkts,
        |i| Some(t0 + i as u64 * 20 * MS + (i as u64 * 7919 % 31) * MS),
        last,
    );
    let s = &a.stats;
    assert_eq!(
        (s.decoded, s.concealed, s.fec, s.late, s.lost),
        (100, 0, 0, 0, 0),
        "{s:?}"
    );
    assert!(played
        .windows(2)
        .all(|w| w[1].at_ns - w[0].at_ns == FRAME_NS));
    assert_eq!(played[0].at_ns, t0 + 60 * MS);
}

/// Isolated losses are played from the next packet's FEC; a burst of three gets one from
/// FEC and two concealed (one concealment event); nothing is late.
#[test]
fn loss_is_recovered_by_fec_then_concealed() {
    let pkts = packets(100, 0);
    let mut a = Playout::new(111, None, 60 * MS);
    let t0 = 5_000 * MS;
    let lost = [10usize, 30, 50, 70, 71, 72];
    let played = run(
        &mut a,
        &pkts,
        |i| (!lost.contains(&i)).then_some(t0 + i as u64 * 20 * MS),
        t0 + 2040 * MS,
    );
    let s = &a.stats;
    assert_eq!(s.lost, 6, "{s:?}");
    assert_eq!(s.fec, 4, "{s:?}");
    assert_eq!((s.concealed, s.concealment_events), (2, 1), "{s:?}");
    assert_eq!(s.decoded, 94);
    // Frame 10 plays from packet 11's FEC.
    assert_eq!(
        played[10].source,
        FrameSource::Fec {
            next_payload: vec![0xfc, 11, 7]
        }
    );
}

/// Late, duplicate and malformed packets are refused and counted; the stream stopping
/// pauses the output (an underrun) instead of concealing forever; it starts again.
#[test]
fn bad_input_and_a_stopped_stream() {
    let pkts = packets(60, 0);
    let mut a = Playout::new(111, None, 60 * MS);
    let t0 = 9_000 * MS;
    for (i, p) in pkts.iter().take(20).enumerate() {
        let t = t0 + i as u64 * 20 * MS;
        while a.poll(t).is_some() {}
        assert_eq!(a.push(t, p), Ok(()));
        assert_eq!(a.push(t, p), Err(Refusal::Duplicate));
    }
    assert_eq!(
        a.push(t0 + 400 * MS, &[0x80, 111, 0, 1]),
        Err(Refusal::Malformed)
    );
    assert_eq!(a.push(t0 + 400 * MS, b"garbage"), Err(Refusal::Malformed));
    while a.poll(t0 + 500 * MS).is_some() {}
    assert_eq!(a.push(t0 + 500 * MS, &pkts[0]), Err(Refusal::Late));
    assert_eq!(
        (a.stats.duplicates, a.stats.malformed, a.stats.late),
        (20, 2, 1)
    );
    while a.poll(t0 + 2_000 * MS).is_some() {}
    assert_eq!(a.stats.underruns, 1);
    // The frames after the last packet are the stream's end, not concealed loss.
    assert_eq!(
        (a.stats.concealed, a.stats.concealment_events),
        (0, 0),
        "{:?}",
        a.stats
    );
    assert!(a.stats.trailing > 0 && a.stats.trailing <= IDLE_NS / FRAME_NS + 2);
    assert_eq!(a.next_due(), None);
    // The stream resumes (the sender's timeline moved on 2 s): played again.
    let decoded = a.stats.decoded;
    let later = packets(60, 2 * 48_000);
    for (i, p) in later.iter().enumerate().skip(40) {
        let t = t0 + 3_000 * MS + i as u64 * 20 * MS;
        while a.poll(t).is_some() {}
        let _ = a.push(t, p);
    }
    while a.poll(t0 + 5_000 * MS).is_some() {}
    assert_eq!(a.stats.decoded - decoded, 20);
}

/// After a sender discontinuity (a looping file) the timestamps are re-anchored on the
/// capture clock, off the old 960-sample grid: the playout follows the new grid, plays every
/// packet, and the gap (no sequence gap) is the sender's silence, not concealment.
#[test]
fn misaligned_timestamps_after_a_discontinuity_are_played() {
    let mut pkts = packets(50, 0);
    // The second half: 200 ms later plus 333 samples, sequence numbers continuing.
    let mut pk = OpusPacketizer::new(111, 42, 1000 + 50);
    pk.discontinuity();
    for f in 0..50u32 {
        let ts = 50 * 960 + 9600 + 333 + f * 960;
        pkts.push(pk.packetize(&[0xfc, 0], ts).unwrap());
    }
    let mut a = Playout::new(111, None, 300 * MS);
    let t0 = 7_000 * MS;
    let at = |i: usize| Some(t0 + i as u64 * 20 * MS + if i >= 50 { 200 * MS } else { 0 });
    run(&mut a, &pkts, at, t0 + 300 * MS + 109 * 20 * MS);
    let s = &a.stats;
    assert_eq!((s.decoded, s.concealed, s.lost), (100, 0, 0), "{s:?}");
    assert_eq!(s.silence, 10, "{s:?}");
    assert_eq!(a.buffered(), 0);
}

/// The path's delay rises to 1.5 s and stays (a queue filling at 15 ms per packet while
/// packets keep coming): after 200 ms of late packets each time, the playout restarts behind
/// the new delay instead of concealing for as long as the delay stays up; once the delay is
/// steady every packet plays.
#[test]
fn a_rising_delay_restarts_the_playout() {
    let pkts = packets(400, 0);
    let mut a = Playout::new(111, None, 100 * MS);
    let t0 = 3_000 * MS;
    let lag = |i: usize| (i.saturating_sub(100) as u64 * 15).min(1_500) * MS;
    run(
        &mut a,
        &pkts,
        |i| Some(t0 + i as u64 * 20 * MS + lag(i)),
        t0 + 1_600 * MS + 399 * 20 * MS,
    );
    let s = &a.stats;
    assert!((1..=20).contains(&s.resyncs), "{s:?}");
    assert_eq!(s.late, 10 * s.resyncs, "{s:?}");
    // Everything after the last restart played: the last 200 packets at least.
    assert!(s.decoded >= 300, "{s:?}");
    assert_eq!(s.underruns, 0, "{s:?}");
}

/// A new sender instance (another SSRC) while playing restarts the playout on its timeline.
#[test]
fn a_new_sender_instance_restarts() {
    let mut a = Playout::new(111, Some(42), 60 * MS);
    let t0 = 1_000 * MS;
    for (i, p) in packets(5, 0).iter().enumerate() {
        a.push(t0 + i as u64 * 20 * MS, p).unwrap();
    }
    assert!(!a.take_new_instance());
    let mut other = OpusPacketizer::new(111, 43, 7);
    a.push(t0 + 100 * MS, &other.packetize(&[0xfc], 5_000_000).unwrap())
        .unwrap();
    assert!(a.take_new_instance());
    assert_eq!(a.stats.resyncs, 1);
    assert_eq!(a.anchor(), Some((t0 + 160 * MS, 5_000_000)));
}

/// A delay raised mid-stream (the video needed more): one pause of exactly the raise, every
/// frame still played from its packet, none concealed or late, and the later packets keep the
/// new delay.
#[test]
fn a_raised_delay_pauses_once_and_loses_nothing() {
    let pkts = packets(100, 5000);
    let mut a = Playout::new(111, None, 100 * MS);
    let t0 = 1_000_000 * MS;
    let arrive = |i: usize| t0 + i as u64 * 20 * MS;
    let mut played = Vec::new();
    for (i, p) in pkts.iter().enumerate() {
        while let Some(f) = a.poll(arrive(i)) {
            played.push(f);
        }
        if i == 50 {
            a.delay_later(70 * MS);
        }
        a.push(arrive(i), p).unwrap();
    }
    while let Some(f) = a.poll(t0 + 10_000 * MS) {
        played.push(f);
    }
    let s = &a.stats;
    assert_eq!(
        (
            s.decoded,
            s.concealed,
            s.late,
            s.delay_raises,
            s.delay_raised_ms
        ),
        (100, 0, 0, 1, 70),
        "{s:?}"
    );
    assert_eq!(a.delay_ns(), 170 * MS);
    let gaps: Vec<u64> = played
        .windows(2)
        .map(|w| w[1].at_ns - w[0].at_ns)
        .filter(|&g| g != FRAME_NS)
        .collect();
    assert_eq!(gaps, vec![FRAME_NS + 70 * MS]);
    assert_eq!(played.last().unwrap().at_ns, arrive(99) + 170 * MS);
}
