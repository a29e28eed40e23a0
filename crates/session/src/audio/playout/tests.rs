//! The playout's schedule of frames over clean, lossy, jittery, stopping and re-anchored
//! streams (synthetic Opus packets: what plays is checked, not decoded; the player's tests
//! decode real ones).

use super::*;
use crate::audio::stretch::MIN_CUT;
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

/// Plays `n` packets arriving every 20 ms (plus `jitter(i)`); at packet `raise_at` the delay
/// is raised by `raise`, at packet `grant_at` the host grants `grant` lower; the host cuts
/// what each frame allows. Returns the frames played, with what was cut from each.
fn play_with_cuts(
    a: &mut Playout,
    n: usize,
    jitter: impl Fn(usize) -> u64,
    (raise_at, raise): (usize, u64),
    (grant_at, grant): (usize, u64),
) -> Vec<(PlayFrame, usize)> {
    let pkts = packets(n, 5000);
    let t0 = 1_000_000 * MS;
    let mut order: Vec<(u64, usize)> = (0..n)
        .map(|i| (t0 + i as u64 * 20 * MS + jitter(i), i))
        .collect();
    order.sort();
    let mut played = Vec::new();
    let step = |a: &mut Playout, now: u64, played: &mut Vec<(PlayFrame, usize)>| {
        while let Some(f) = a.poll(now) {
            let cut = f.may_cut;
            a.shortened(cut);
            played.push((f, cut));
        }
    };
    for (t, i) in order {
        step(a, t, &mut played);
        if i == raise_at {
            a.delay_later(raise);
        }
        if i == grant_at {
            a.lower_delay(grant);
        }
        // Late packets are refused (counted): what the tests look at.
        let _ = a.push(t, &pkts[i]);
    }
    step(a, t0 + 100_000 * MS, &mut played);
    played
}

/// A delay raised for the video comes back down when the host grants it: every frame still
/// from its packet (none late, none concealed), the frames played back to back (no gap, no
/// overlap: each starts where the shortened one before it ends), never more than 10 % fast
/// over any second, and the delay back at the start's.
#[test]
fn a_granted_lower_delay_comes_down_without_a_gap() {
    let mut a = Playout::new(111, None, 100 * MS);
    let played = play_with_cuts(&mut a, 400, |_| 0, (50, 300 * MS), (150, 1_000 * MS));
    let s = a.stats;
    assert_eq!(
        (s.decoded, s.concealed, s.late, s.lost),
        (400, 0, 0, 0),
        "{s:?}"
    );
    assert!(s.shortened_frames >= 30, "{s:?}");
    // What is left is less than the shortest cut (2.5 ms).
    let left = a.delay_ns() - 100 * MS;
    assert!(
        left * 48 / MS < MIN_CUT as u64,
        "{} ns above the start",
        left
    );
    // Back to back: a frame cut by k samples is followed k samples early (to the ns).
    for w in played.windows(2).skip(52) {
        let ((f, cut), (g, _)) = (&w[0], &w[1]);
        let want = f.at_ns + FRAME_NS - *cut as u64 * 1_000_000_000 / 48_000;
        assert!(g.at_ns.abs_diff(want) <= 1, "{} vs {want}", g.at_ns);
    }
    for w in played.windows(50) {
        let cut: usize = w.iter().map(|(_, c)| c).sum();
        assert!(cut <= 4_800 + 480, "{cut} samples cut in one second");
    }
    // The last frame plays the delay after its packet.
    let last = &played.last().unwrap().0;
    assert_eq!(last.at_ns, 1_000_000 * MS + 399 * 20 * MS + a.delay_ns());
}

/// The packets limit what is lowered: with packets up to 150 ms late on a 100-ms start and a
/// 300-ms raise, a grant of 1 s lowers the delay only as far as the latest packet of the
/// last 2 s allows (the start's margin kept for it); nothing arrives late afterwards.
#[test]
fn the_latest_packet_limits_what_is_lowered() {
    let mut a = Playout::new(111, None, 100 * MS);
    let jitter = |i: usize| if i > 50 && i % 37 == 5 { 150 * MS } else { 0 };
    let played = play_with_cuts(&mut a, 400, jitter, (50, 300 * MS), (150, 1_000 * MS));
    let s = a.stats;
    assert_eq!((s.decoded, s.late, s.concealed), (400, 0, 0), "{s:?}");
    assert!(
        (149..=151).contains(&s.delay_lowered_ms),
        "lowered {} ms",
        s.delay_lowered_ms
    );
    assert!(played
        .iter()
        .all(|(f, _)| matches!(f.source, FrameSource::Packet { .. })));
}

/// Without a grant nothing is cut; a grant before the playout has 0.5 s of packets, or one
/// at the start's delay, lowers nothing; a raise cancels a grant in progress.
#[test]
fn nothing_is_cut_without_a_grant_and_room() {
    let mut a = Playout::new(111, None, 100 * MS);
    let played = play_with_cuts(&mut a, 200, |_| 0, (1000, 0), (10, 1_000 * MS));
    assert!(played.iter().all(|(f, _)| f.may_cut == 0));
    let mut b = Playout::new(111, None, 100 * MS);
    let played = play_with_cuts(&mut b, 200, |_| 0, (1000, 0), (150, 1_000 * MS));
    assert!(played.iter().all(|(f, _)| f.may_cut == 0));
    assert_eq!(b.lower_delay(1_000 * MS), 0);
    let mut c = Playout::new(111, None, 100 * MS);
    let pkts = packets(100, 0);
    let t0 = 7_000 * MS;
    for (i, p) in pkts.iter().enumerate() {
        while let Some(f) = c.poll(t0 + i as u64 * 20 * MS) {
            c.shortened(f.may_cut);
        }
        if i == 30 {
            c.delay_later(200 * MS);
        }
        if i == 70 {
            assert!(c.lower_delay(150 * MS) >= 149 * MS);
        }
        if i == 72 {
            c.delay_later(50 * MS);
        }
        c.push(t0 + i as u64 * 20 * MS, p).unwrap();
    }
    assert!(c.stats.delay_lowered_ms <= 10, "{:?}", c.stats);
}

/// The delay never comes down below where it started: a first packet 15 ms slower than the
/// rest gives them more margin than the start asked, but without a raise nothing is cut.
#[test]
fn the_start_is_the_floor() {
    let mut a = Playout::new(111, None, 100 * MS);
    let jitter = |i: usize| if i == 0 { 15 * MS } else { 0 };
    let played = play_with_cuts(&mut a, 300, jitter, (1000, 0), (150, 1_000 * MS));
    assert!(played.iter().all(|(f, _)| f.may_cut == 0));
    assert_eq!(a.stats.delay_lowered_ms, 0);
}

/// A queue fills (300 ms) and the playout restarts behind it; when the queue drains, the
/// time the restart added comes back off (to within one cut), without a late packet after
/// the drain.
#[test]
fn a_restart_behind_a_queue_comes_back_down_when_it_drains() {
    let mut a = Playout::new(111, None, 100 * MS);
    let queue = |i: usize| match i {
        50..100 => 300 * MS,
        100..150 => (300 - 6 * (i as u64 - 100)) * MS,
        _ => 0,
    };
    let played = play_with_cuts(&mut a, 600, queue, (1000, 0), (350, 1_000 * MS));
    let s = a.stats;
    assert_eq!(s.resyncs, 1, "{s:?}");
    // The restart came 300 ms behind the old timeline.
    assert!(
        (297..=300).contains(&s.delay_lowered_ms),
        "lowered {} ms: {s:?}",
        s.delay_lowered_ms
    );
    let late_after = played
        .iter()
        .skip(150)
        .filter(|(f, _)| !matches!(f.source, FrameSource::Packet { .. }))
        .count();
    assert_eq!(late_after, 0);
}
