//! The lower path against one decoder, in virtual time: a clip of two spatial layers whose
//! top frame of one picture is 200 ms late (a scene cut's large frame in its layer's queue),
//! with the top frames of the pictures after it queued behind it; and the assembler rules the
//! player relies on (leaves, pictures lost whole) on real encodes.

use super::*;
use codec::vp9rtp::{LayerStreams, StreamConfig};
use codec::vpx::{SvcConfig, SvcEncoder};
use proto::{Codec, Stream, Track, TrackKind, Vp9Params};
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU64, Ordering};

pub(super) const PICTURES: u64 = 330;
pub(super) const PERIOD_NS: u64 = 33_333_333;
/// The picture whose top frame is late, and by how much.
const LATE: u64 = 300;
const LATE_NS: u64 = 200_000_000;
/// Key pictures: every 90 (none near LATE).
const KEY_EVERY: u32 = 90;

thread_local! {
    static NOW: AtomicU64 = const { AtomicU64::new(0) };
}
pub(super) fn now() -> u64 {
    NOW.with(|n| n.load(Ordering::Relaxed))
}
pub(super) fn set_now(t: u64) {
    NOW.with(|n| n.store(t, Ordering::Relaxed));
}

/// RTP packets per picture, per layer (k = spatial layer), of the two-spatial-layer clip.
pub(super) fn clip() -> Vec<Vec<Vec<Vec<u8>>>> {
    clip_of(&[vec![150], vec![450]])
}

/// RTP packets per picture, per layer, of a 320x180 clip whose ladder cells are `cells`
/// (spatial-major kbit/s: one row per spatial layer, one column per temporal layer).
fn clip_of(cells: &[Vec<u32>]) -> Vec<Vec<Vec<Vec<u8>>>> {
    clip_with(cells, SvcConfig::l3t3_720p().spatial_sync_interval)
}

/// [`clip_of`] with the upper spatial layers re-synced every `sync_every` pictures (0: only
/// at key pictures, as the server encodes).
fn clip_with(cells: &[Vec<u32>], sync_every: u32) -> Vec<Vec<Vec<Vec<u8>>>> {
    clip_ordered(cells, sync_every, codec::ladder::LayerOrder::SpatialMajor)
}

/// [`clip_with`], the cells stacked in `order`.
fn clip_ordered(
    cells: &[Vec<u32>],
    sync_every: u32,
    order: codec::ladder::LayerOrder,
) -> Vec<Vec<Vec<Vec<u8>>>> {
    let conf = SvcConfig {
        spatial_sync_interval: sync_every,
        width: 320,
        height: 180,
        spatial_layers: cells.len(),
        temporal_layers: cells[0].len(),
        cell_kbps: cells.to_vec(),
        keyframe_interval: KEY_EVERY,
        // These tests are about the network's losses and delays; the encoder's own drops (a
        // picture dropped whole is not shown, codec/tests/drops.rs) would add gaps of theirs.
        drop_thresh: 0,
        ..SvcConfig::l3t3_720p()
    };
    let ladder = LayerLadder::ordered(&conf.cell_kbps, order).unwrap();
    let res = (0..cells.len())
        .map(|s| {
            let (w, h) = conf.layer_size(s);
            (w as u16, h as u16)
        })
        .collect();
    let mut ls = LayerStreams::new(ladder, res, StreamConfig::default()).unwrap();
    let mut enc = SvcEncoder::new(conf).unwrap();
    (0..PICTURES)
        .map(|n| {
            let f = codec::synth::frame(320, 180, n as u32);
            let pic = enc.encode(&f, n as i64 * 3000).unwrap().unwrap();
            ls.packets(&pic)
                .unwrap()
                .iter()
                .map(|v| v.iter().map(|p| p.to_bytes(&[]).unwrap()).collect())
                .collect()
        })
        .collect()
}

pub(super) fn session() -> SessionInfo {
    session_of(2, 1)
}

/// The session of [`clip_of`] with `spatial` x `temporal` layers (spatial-major).
fn session_of(spatial: u8, temporal: u8) -> SessionInfo {
    session_ordered(spatial, temporal, codec::ladder::LayerOrder::SpatialMajor)
}

/// [`session_of`], its streams announcing the cells in `order`.
fn session_ordered(spatial: u8, temporal: u8, order: codec::ladder::LayerOrder) -> SessionInfo {
    let n = spatial * temporal;
    let cells = order.cells(spatial, temporal);
    let mut s = SessionInfo::equal_layers(n as usize, 300_000, Ipv4Addr::new(239, 1, 2, 3), 5000);
    s.tracks = vec![Track {
        id: 0,
        kind: TrackKind::Video,
        codec: Codec::Vp9(Vp9Params {
            payload_type: 96,
            width: 320,
            height: 180,
            fps_num: 30,
            fps_den: 1,
            spatial,
            temporal,
        }),
        streams: (0..n)
            .map(|k| Stream {
                layer: k,
                spatial: cells[k as usize].spatial,
                temporal: cells[k as usize].temporal,
                group: Ipv4Addr::new(239, 1, 2, 3 + k),
                port: 5000 + k as u16,
                ssrc: 0x4C43_0000 + k as u32,
                rate_bps: 300_000,
                repair: None,
            })
            .collect(),
    }];
    s
}

/// What reaches the player: the frames of the `late` layers are late from picture LATE
/// on (`queued`: the frames after it wait behind it, a sender queue; else only its own,
/// a retransmitted packet); from picture n of each `held` entry (n, h) on, the viewer
/// holds h layers (the packets of the others no longer come).
struct Feed<'a> {
    late: &'a [usize],
    queued: bool,
    held: &'a [(u64, usize)],
}

const TOP_LATE: Feed = Feed {
    late: &[1],
    queued: true,
    held: &[],
};

/// (pictures shown, of them from the lower path, freezes, longest gap between two shown
/// pictures in ms) with [`TOP_LATE`].
fn play(extra: &[&str]) -> (u64, u64, u64, f64) {
    play_feed(extra, &TOP_LATE)
}

fn play_feed(extra: &[&str], feed: &Feed) -> (u64, u64, u64, f64) {
    let packets = clip();
    let mut args: Vec<String> = vec!["--announce".into(), "239.255.76.1:5000".into()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let a = crate::parse_args(&args).unwrap().unwrap();
    let mut v = Video::new(&session(), &a, None).unwrap();
    v.now = now;
    v.set_layers(2);
    // (arrival, layer, packet): every layer 10 ms after capture, but the late layers'
    // frame of picture LATE comes 200 ms late.
    let t0 = 1_000_000_000u64;
    let mut events = Vec::new();
    let mut held = 2;
    for (n, layers) in packets.iter().enumerate() {
        let n = n as u64;
        let cap = t0 + n * PERIOD_NS;
        if let Some(&(_, h)) = feed.held.iter().find(|x| x.0 == n) {
            held = h;
            events.push((cap, h, None));
        }
        for (k, pkts) in layers.iter().enumerate().take(held) {
            let mut at = cap + 10_000_000;
            if feed.late.contains(&k) && (n == LATE || feed.queued && n > LATE) {
                at = at.max(t0 + LATE * PERIOD_NS + LATE_NS);
            }
            events.extend(pkts.iter().map(|p| (at, k, Some(p.clone()))));
        }
    }
    let gap = run(&mut v, events, t0);
    (v.frames, v.shown_lower, v.freezes, gap)
}

/// An arrival (ns, layer, packet) or a change of the layers held (ns, layers, None).
type Event = (u64, usize, Option<Vec<u8>>);

/// Plays `events` into `v` in virtual time from `t0` (1-ms ticks) until 30 frame periods
/// after the clip; returns the longest gap between two shown pictures, ms.
fn run(v: &mut Video, mut events: Vec<Event>, t0: u64) -> f64 {
    events.sort_by_key(|e| e.0);
    let mut shown = Vec::new();
    let mut t = t0;
    let end = t0 + (PICTURES + 30) * PERIOD_NS;
    let mut i = 0;
    while t < end {
        set_now(t);
        while i < events.len() && events[i].0 <= t {
            match &events[i].2 {
                Some(p) => v.push(events[i].1, p, t),
                None => v.set_layers(events[i].1),
            }
            i += 1;
        }
        let before = v.frames;
        v.tick(t);
        shown.extend(std::iter::repeat_n(t, (v.frames - before) as usize));
        t += 1_000_000;
    }
    shown
        .windows(2)
        .map(|w| (w[1] - w[0]) as f64 / 1e6)
        .fold(0.0, f64::max)
}

#[test]
fn a_late_top_frame_is_shown_from_the_layers_below_without_a_freeze() {
    let (frames, lower, freezes, gap) = play(&[]);
    assert_eq!(frames, PICTURES, "every picture shown");
    assert_eq!(freezes, 0, "longest gap {gap} ms");
    // The late picture and those queued behind it (200 ms = 6 pictures) are shown from
    // the layer below; the pictures after are the top layer's again.
    assert!(
        (5..=7).contains(&lower),
        "{lower} shown from the layer below"
    );
    assert!(gap < 45.0, "longest gap {gap} ms");
}

/// A buffer that holds the late top frame (a fixed 300-ms delay): the lower path's
/// pictures wait for their slots, and the top path's, in by then, are the ones shown.
#[test]
fn a_stand_in_waits_for_its_slot() {
    let (frames, lower, freezes, gap) = play(&["--playout-delay-ms", "300"]);
    assert_eq!(frames, PICTURES);
    assert_eq!(lower, 0);
    assert_eq!(freezes, 0, "longest gap {gap} ms");
}

/// A clip of one spatial layer at TL0-2 and a player holding all three.
fn l1t3() -> (Vec<Vec<Vec<Vec<u8>>>>, Video) {
    let a = crate::parse_args(&["--announce".into(), "239.255.76.1:5000".into()])
        .unwrap()
        .unwrap();
    let mut v = Video::new(&session_of(1, 3), &a, None).unwrap();
    v.now = now;
    v.set_layers(3);
    (clip_of(&[vec![150, 75, 75]]), v)
}

/// One spatial layer at TL0-2 through 20 ms of jitter (packets reordered), the viewer
/// leaving TL2 and joining it again every 0.5-1.5 s, as PLM did on the quality suite's
/// jittery path (where some leaves froze the picture until the next key picture): no
/// TL0 or TL1 picture is lost and nothing freezes.
#[test]
fn temporal_leaves_under_jitter_lose_no_picture() {
    let (packets, mut v) = l1t3();
    let t0 = 1_000_000_000u64;
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    // Layer changes: (time, layers held); the left layer's packets stop 20 ms after a
    // leave and come again 20 ms after a join (the prune and the graft upstream).
    let mut changes = Vec::new();
    let mut t = t0 + 1_500_000_000;
    let mut held = 3;
    let end = t0 + PICTURES * PERIOD_NS;
    while t < end {
        held = 5 - held;
        changes.push((t, held));
        t += 500_000_000 + rnd(1_000) * 1_000_000;
    }
    let held_at = |at: u64| {
        changes
            .iter()
            .rev()
            .find(|c| c.0 + 20_000_000 <= at)
            .map_or(3, |c| c.1)
    };
    let mut events: Vec<Event> = changes.iter().map(|&(t, h)| (t, h, None)).collect();
    for (n, layers) in packets.iter().enumerate() {
        let cap = t0 + n as u64 * PERIOD_NS;
        for (k, pkts) in layers.iter().enumerate() {
            for p in pkts {
                let at = cap + 10_000_000 + rnd(40) * 1_000_000;
                if k < held_at(at) {
                    events.push((at, k, Some(p.clone())));
                }
            }
        }
    }
    run(&mut v, events, t0);
    let st = v.stats();
    assert_eq!(v.freezes, 0, "{st:?}");
    // Only TL2 pictures in flight at a leave may be given up.
    assert!(
        st.pictures_skipped <= 2 * changes.len() as u64,
        "{} changes: {st:?}",
        changes.len()
    );
}

/// One spatial layer at TL0-2; TL1 picture 102 and TL2 picture 201 are lost whole (no
/// repair comes). The pictures behind each are released when due instead of waiting the
/// reorder window (0.5 s) for a repair: no freeze, and only the lost pictures and the TL2
/// picture predicting from the lost TL1 one are missing.
#[test]
fn pictures_lost_whole_above_tl0_do_not_freeze_the_picture() {
    let (packets, mut v) = l1t3();
    let t0 = 1_000_000_000u64;
    let mut events = Vec::new();
    for (n, layers) in packets.iter().enumerate() {
        if n == 102 || n == 201 {
            continue;
        }
        let cap = t0 + n as u64 * PERIOD_NS;
        for (k, pkts) in layers.iter().enumerate() {
            events.extend(pkts.iter().map(|p| (cap + 10_000_000, k, Some(p.clone()))));
        }
    }
    let gap = run(&mut v, events, t0);
    assert_eq!(v.freezes, 0, "longest gap {gap} ms: {:?}", v.stats());
    assert_eq!(v.frames, PICTURES - 3, "{:?}", v.stats());
}

/// A late base frame (a retransmission: the top layer's frames are in) holds both paths,
/// and its packet completes the picture on both at once: the buffer rises once, at that
/// picture, and the pictures behind it follow on their slots (one freeze, not a burst of
/// late pictures and then a second freeze when the lower path's lateness reached the
/// buffer a few pictures later).
#[test]
fn a_late_base_frame_raises_the_buffer_once() {
    let feed = Feed {
        late: &[0],
        queued: false,
        held: &[],
    };
    let (frames, lower, freezes, gap) = play_feed(&[], &feed);
    assert_eq!(frames, PICTURES);
    assert_eq!(lower, 0);
    assert_eq!(freezes, 1, "longest gap {gap} ms");
    assert!(gap > 190.0, "longest gap {gap} ms");
}

/// The viewer drops to the base layer at picture 100 and holds both layers again from
/// picture 175, five pictures before a key picture (at a re-join the player asks for
/// one): the lower path starts afresh at that key picture. Kept as it was, its assembler
/// waited `reorder_pictures` for the pictures it missed before letting the key picture
/// out, and that lateness raised the buffer (a freeze at every such re-join).
#[test]
fn a_rejoin_above_the_base_does_not_raise_the_buffer() {
    let feed = Feed {
        late: &[],
        queued: false,
        held: &[(100, 1), (175, 2)],
    };
    let (frames, _, freezes, gap) = play_feed(&[], &feed);
    assert_eq!(frames, PICTURES);
    assert_eq!(freezes, 0, "longest gap {gap} ms");
    assert!(gap < 45.0, "longest gap {gap} ms");
}

#[test]
fn with_one_decoder_the_late_top_frame_freezes_the_picture() {
    let (frames, lower, freezes, gap) = play(&["--single-decoder"]);
    assert_eq!(frames, PICTURES);
    assert_eq!(lower, 0);
    assert_eq!(freezes, 1, "longest gap {gap} ms");
    assert!(gap > 190.0, "longest gap {gap} ms");
}

/// The re-sync requests, from picture `join` on, of a viewer that holds the base layer of a
/// two-spatial-layer clip (key pictures every 3 s, no other switch point) and joins the upper
/// layer at picture `join` (and leaves it again at `leave`), with
/// `--resync-delay-ms delay`: (ms after the join, spatial layers) of each request.
/// With `climbed_before`, the viewer held the upper layer until picture 95 (decoding it from
/// the key picture at 90), so the join at `join` is not its first climb.
fn resyncs_after(
    climbed_before: bool,
    join: u64,
    leave: Option<u64>,
    delay: &str,
) -> Vec<(f64, u8)> {
    let packets = clip_with(&[vec![150], vec![450]], 0);
    let a = crate::parse_args(&[
        "--announce".into(),
        "239.255.76.1:5000".into(),
        "--resync-delay-ms".into(),
        delay.into(),
    ])
    .unwrap()
    .unwrap();
    let mut v = Video::new(&session(), &a, None).unwrap();
    v.now = now;
    let t0 = 1_000_000_000u64;
    set_now(t0);
    let held = |n: u64| match leave {
        _ if climbed_before && n < 95 => 2,
        Some(l) if n >= l => 1,
        _ if n >= join => 2,
        _ => 1,
    };
    v.set_layers(held(0));
    let mut out = Vec::new();
    for (n, layers) in packets.iter().enumerate() {
        let n = n as u64;
        let cap = t0 + n * PERIOD_NS;
        set_now(cap);
        v.set_layers(held(n));
        for (k, pkts) in layers.iter().enumerate().take(held(n)) {
            for p in pkts {
                v.push(k, p, cap + 10_000_000);
            }
        }
        v.tick(cap);
        let m = v.take_sync_requests();
        if m != 0 && n >= join {
            out.push(((cap - (t0 + join * PERIOD_NS)) as f64 / 1e6, m));
        }
    }
    out
}

/// A joined upper layer is re-synced on request only after it has been held for the delay
/// without a switch point: at once with no delay; 1.5 s later with the default; not at all
/// when a key picture comes first (1 s after the join) or the layer is left within the delay
/// (a controller's failed join: it must not cost every viewer of the layer a re-sync). The
/// viewer's first climb above the base layer (its join) asks at once whatever the delay.
#[test]
fn a_joined_layer_asks_for_a_resync_only_after_the_delay() {
    let first = resyncs_after(false, 100, None, "1500");
    assert_eq!(first.len(), 1, "{first:?}");
    assert!(first[0].0 < 40.0 && first[0].1 == 0b10, "{first:?}");
    let resyncs = |join, leave, delay| resyncs_after(true, join, leave, delay);
    // Key pictures at 0, 90, 180: a join at 100 waits 2.7 s for the next one.
    let now_ = resyncs(100, None, "0");
    assert_eq!(now_.len(), 1, "{now_:?}");
    assert!(now_[0].0 < 1.0 && now_[0].1 == 0b10, "{now_:?}");
    let late = resyncs(100, None, "1500");
    assert_eq!(late.len(), 1, "{late:?}");
    assert!(
        (1500.0..1540.0).contains(&late[0].0) && late[0].1 == 0b10,
        "{late:?}"
    );
    // A join at 150: the key picture at 180 comes 1 s later.
    assert_eq!(resyncs(150, None, "0").len(), 1);
    assert_eq!(resyncs(150, None, "1500"), vec![]);
    // Joined at 100, left at 120 (0.67 s).
    assert_eq!(resyncs(100, Some(120), "0").len(), 1);
    assert_eq!(resyncs(100, Some(120), "1500"), vec![]);
}

/// The size-first order of L3T3 ((0,0), (0,1), (1,0), (1,1), (0,2), …), as the server
/// announces it: a viewer holding 4 layers gets the 160x90 layer (of this 320x180 clip) at
/// half the frame rate and nothing of the 80x45 layer's TL2, so every picture it shows is
/// 160x90 and none is decoded only to be hidden; with 6 it shows every picture at 160x90.
#[test]
fn a_size_first_ladder_shows_the_larger_picture_at_half_the_rate() {
    let order = codec::ladder::LayerOrder::SizeFirst;
    let packets = clip_ordered(
        &[vec![45, 15, 15], vec![120, 40, 40], vec![300, 100, 100]],
        0,
        order,
    );
    let a = crate::parse_args(&["--announce".to_string(), "239.255.76.1:5000".into()])
        .unwrap()
        .unwrap();
    for (held, want_frames) in [(4usize, PICTURES / 2), (6, PICTURES)] {
        let mut v = Video::new(&session_ordered(3, 3, order), &a, None).unwrap();
        v.now = now;
        v.set_layers(held);
        let t0 = 1_000_000_000u64;
        let mut events = Vec::new();
        for (n, layers) in packets.iter().enumerate() {
            let at = t0 + n as u64 * PERIOD_NS + 10_000_000;
            for (k, pkts) in layers.iter().enumerate().take(held) {
                events.extend(pkts.iter().map(|p| (at, k, Some(p.clone()))));
            }
        }
        run(&mut v, events, t0);
        let st = v.stats();
        assert_eq!(v.frames, want_frames, "{held} layers: {st:?}");
        assert_eq!(v.hidden, 0, "{held} layers: {st:?}");
        assert_eq!((v.width, v.height), (160, 90), "{held} layers");
        assert_eq!(v.freezes, 0, "{held} layers: {st:?}");
    }
}
