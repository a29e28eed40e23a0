//! Property and scenario tests of the assembler through its public API.

use super::*;
use crate::vp9rtp::{LayerStreams, StreamConfig};
use crate::vpx::{EncodedPicture, LayerFrame};
use proptest::prelude::*;

/// A synthetic L3T3 stream (no codec): picture n has TID from the 0212 pattern, a key
/// picture every 16, spatial syncs every 8; frame bytes encode (n, s) so integrity can be
/// checked.
/// Serialised packets per picture, per layer.
type Packets = Vec<Vec<Vec<Vec<u8>>>>;

/// Feeds every packet of layers 0..=`top`, picture by picture, but those `skip(picture,
/// layer, packet)` names, calling `before(picture, asm)` ahead of each picture; returns per
/// picture the picture whose packets let it out (`None`: never).
fn release_points(
    asm: &mut Assembler,
    packets: &Packets,
    top: usize,
    mut before: impl FnMut(usize, &mut Assembler),
    skip: impl Fn(usize, usize, usize) -> bool,
) -> Vec<Option<usize>> {
    let mut out_after = vec![None; packets.len()];
    for (i, per_layer) in packets.iter().enumerate() {
        before(i, asm);
        for (layer, v) in per_layer.iter().enumerate().take(top + 1) {
            for (j, p) in v.iter().enumerate() {
                if !skip(i, layer, j) {
                    asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                }
            }
        }
        while let Some(q) = asm.pop() {
            out_after[(q.picture_id % (1 << 15)) as usize] = Some(i);
        }
    }
    out_after
}

/// The player's assembler settings at 30 fps (0.5 s, 1.5 s and 3 s of pictures).
const PLAYER_CONF: AssemblerConfig = AssemblerConfig {
    reorder_pictures: 15,
    patience_pictures: 45,
    max_pending: 90,
};

fn stream(n: usize, size: usize) -> (LayerLadder, Packets, Vec<EncodedPicture>) {
    stream_marked(n, size, |_| None)
}

/// [`stream`], where `mark(n) = Some(bits)` sends picture n with the spatial layers of
/// `bits` only, every packet carrying the sent-frames mark (`proto::wire::frames_ext`) with
/// the count of pictures right before it sent with no frame.
fn stream_marked(
    n: usize,
    size: usize,
    mark: impl Fn(usize) -> Option<u8>,
) -> (LayerLadder, Packets, Vec<EncodedPicture>) {
    let ladder = LayerLadder::default_720p_l3t3();
    let mut ls = LayerStreams::new(
        ladder.clone(),
        vec![(320, 180), (640, 360), (1280, 720)],
        StreamConfig {
            mtu: 200,
            ..Default::default()
        },
    )
    .unwrap();
    let mut pics = Vec::new();
    let mut out = Vec::new();
    let mut unsent = 0u8;
    for i in 0..n {
        let t = [0u8, 2, 1, 2][i % 4];
        let key = i % 16 == 0;
        let sync = !key && i % 8 == 0;
        let frames = (0..3u8)
            .map(|s| LayerFrame {
                spatial: s,
                temporal: t,
                data: (0..size + 37 * s as usize)
                    .map(|j| (i * 7 + s as usize * 3 + j) as u8)
                    .collect(),
                inter_picture: !(key || (sync && s > 0)),
                inter_layer: s > 0,
                switch_up: t > 0,
                width: 0,
                height: 0,
            })
            .collect();
        let pic = EncodedPicture {
            pts: i as i64 * 3000,
            index: i as u64,
            temporal: t,
            key,
            sync_mask: if sync { 6 } else { 0 },
            dropped_mask: 0,
            frames,
        };
        let mut pk = ls.packets(&pic).unwrap();
        let bits = mark(i);
        for (k, cell) in pk.iter_mut().enumerate() {
            let b = bits.unwrap_or(0xff);
            if b >> ladder.cell(k).unwrap().spatial & 1 == 0 {
                cell.clear();
            }
            if bits.is_some() || unsent > 0 {
                for p in cell.iter_mut() {
                    p.header.extensions.push((frames_ext::ID, vec![b, unsent]));
                }
            }
        }
        unsent = if bits == Some(0) { unsent + 1 } else { 0 };
        out.push(
            pk.iter()
                .map(|v| v.iter().map(|p| p.to_bytes(&[]).unwrap()).collect())
                .collect(),
        );
        pics.push(pic);
    }
    (ladder, out, pics)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn assembler_invariants_under_loss_and_reordering(
        k in 0usize..9,
        seed in any::<u64>(),
        loss_pct in 0u64..30,
        size in 10usize..700,
    ) {
        let (ladder, packets, pics) = stream(48, size);
        let mut asm = Assembler::new(ladder.clone(), Some(k), AssemblerConfig::default());
        let mut x = seed | 1;
        let mut rnd = move || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x % 100 };
        let mut outs = Vec::new();
        for per_layer in &packets {
            let mut batch = Vec::new();
            for (layer, v) in per_layer.iter().enumerate() {
                for p in v {
                    if rnd() >= loss_pct {
                        batch.push((layer, p));
                    }
                }
            }
            for i in 1..batch.len() {
                if rnd() < 10 { batch.swap(i - 1, i); }
            }
            for (layer, p) in batch {
                asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
            }
            while let Some(p) = asm.pop() { outs.push(p); }
        }
        asm.flush();
        while let Some(p) = asm.pop() { outs.push(p); }
        let mut last = None;
        for p in &outs {
            // Increasing picture IDs, layers 0..=s contiguous, all kept by the subscription.
            prop_assert!(last.is_none_or(|l| p.picture_id > l));
            last = Some(p.picture_id);
            for (i, f) in p.frames.iter().enumerate() {
                prop_assert_eq!(f.spatial as usize, i);
                prop_assert!(ladder.keeps(k, f.spatial, f.temporal));
            }
            // Integrity: the frame bytes are exactly what was sent.
            let orig = pics.iter().find(|q| {
                q.frames[0].data == p.frames[0].data
            });
            let orig = orig.expect("frame 0 bytes match a sent picture");
            for f in &p.frames {
                prop_assert_eq!(&f.data, &orig.frames[f.spatial as usize].data);
            }
        }
        if loss_pct == 0 {
            let expected = pics.iter().filter(|q| ladder.keeps(k, 0, q.temporal)).count();
            prop_assert_eq!(outs.len(), expected);
        }
    }
}

/// A stream whose first packet to arrive belongs to picture 1 (a higher layer, paced
/// separately, overtook the base layer's key picture 0): the assembler still starts at
/// picture 0 instead of dropping it as late and waiting for the next key picture, and
/// picture 1, held while nothing decodable had come, decodes after it.
#[test]
fn start_at_the_key_picture_when_a_later_picture_arrives_first() {
    let (ladder, packets, _) = stream(8, 300);
    let k = 2; // spatial 0, temporal 0..=2: every picture is kept
    let mut asm = Assembler::new(ladder, Some(k), AssemblerConfig::default());
    let mut push = |i: usize| {
        for (layer, v) in packets[i].iter().enumerate().take(k + 1) {
            for p in v {
                asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
    };
    push(1);
    for i in [0, 2, 3, 4, 5, 6, 7] {
        push(i);
    }
    asm.flush();
    let mut outs = Vec::new();
    while let Some(p) = asm.pop() {
        outs.push(p);
    }
    assert!(!outs.is_empty(), "nothing decodable: {:?}", asm.stats());
    assert!(outs[0].key, "first picture returned is not the key picture");
    let first = outs[0].picture_id;
    // Every picture decodes, in order.
    let ids: Vec<u64> = outs.iter().map(|p| p.picture_id - first).collect();
    assert_eq!(ids, (0..8).collect::<Vec<u64>>(), "{:?}", asm.stats());
    assert_eq!(asm.stats().late, 0);
}

/// The top spatial layer's packets lag the others by 10 pictures (its layers' sender
/// queues are behind, as after a key picture): every picture still comes out whole,
/// because the layers that lag are waited for, while a frame lost on a layer that has
/// moved on is given up after `reorder_pictures` of that layer, well before the
/// `patience_pictures` a lagging layer gets.
#[test]
fn lagging_layer_is_waited_for_and_a_lost_frame_is_not() {
    let (ladder, packets, _) = stream(40, 300);
    let conf = AssemblerConfig {
        reorder_pictures: 4,
        patience_pictures: 20,
        max_pending: 64,
    };
    let top = |k: usize| ladder.cell(k).unwrap().spatial == 2;
    let mut asm = Assembler::new(ladder.clone(), Some(8), conf);
    let mut outs = Vec::new();
    let lag = 10;
    for i in 0..packets.len() + lag {
        // Pictures i's lower layers, and picture i - lag's top spatial layer.
        let mut feed = |pic: usize, want_top: bool| {
            for (layer, v) in packets[pic].iter().enumerate() {
                if top(layer) != want_top {
                    continue;
                }
                for p in v {
                    asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                }
            }
        };
        if i < packets.len() {
            feed(i, false);
        }
        if i >= lag {
            feed(i - lag, true);
        }
        while let Some(p) = asm.pop() {
            outs.push(p);
        }
    }
    assert_eq!(outs.len(), 40);
    // Before the top layer delivered anything its frames are not waited for (pictures
    // 0..=7, as at a join); from its first switch point on (the re-sync at 8) every
    // picture comes out whole, each waiting for its lagging top layer.
    let partial: Vec<u64> = outs
        .iter()
        .filter(|p| !(p.complete && p.top_spatial() == 2))
        .map(|p| p.picture_id % (1 << 15))
        .collect();
    assert_eq!(partial, (0..8).collect::<Vec<u64>>());

    // In order, one frame lost: after which picture's packets does the picture that lost
    // it come out (incomplete)?
    let given_up_after = |pic: usize, lost_layer: usize| {
        let mut asm = Assembler::new(ladder.clone(), Some(8), conf);
        for (i, per_layer) in packets.iter().enumerate() {
            for (layer, v) in per_layer.iter().enumerate() {
                if i == pic && layer == lost_layer {
                    continue;
                }
                for p in v {
                    asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                }
            }
            while let Some(p) = asm.pop() {
                if p.picture_id % (1 << 15) == pic as u64 {
                    assert!(!p.complete);
                    return Some(i);
                }
            }
        }
        None
    };
    // The top-layer frame of picture 9 (TL2, referenced by no later picture): picture 9
    // comes out as soon as its layer has delivered the next TL2 picture (11), not at
    // 9 + 4 or 9 + 20.
    assert_eq!(given_up_after(9, ladder.layer_of(2, 2).unwrap()), Some(11));
    // A frame of a referenced layer (picture 8's top layer, TL0) waits for its repair
    // until its layer has moved `reorder_pictures` on (the TL0 layer's next picture, 12).
    assert_eq!(given_up_after(8, ladder.layer_of(2, 0).unwrap()), Some(12));
}

/// Every packet fed in order to a full-ladder assembler: per released picture ID, after which
/// picture's packets it came out, its top spatial layer, and whether it was complete.
fn released_after(
    ladder: &LayerLadder,
    packets: &Packets,
) -> std::collections::BTreeMap<u64, (usize, u8, bool)> {
    let mut asm = Assembler::new(ladder.clone(), Some(8), AssemblerConfig::default());
    let mut out = std::collections::BTreeMap::new();
    for (i, per_layer) in packets.iter().enumerate() {
        for (layer, v) in per_layer.iter().enumerate() {
            for p in v {
                asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
        while let Some(p) = asm.pop() {
            out.insert(p.picture_id % (1 << 15), (i, p.top_spatial(), p.complete));
        }
    }
    out
}

/// The sender left picture 10's top spatial frame out (TL1: too late in its queue) and
/// picture 11's (TL2, predicted from it) and marked both: each comes out as soon as its own
/// packets are in, at spatial layer 1, instead of after the TL1 layer moved on; picture 12
/// (TL0) is whole again.
#[test]
fn a_frame_marked_as_not_sent_is_not_waited_for() {
    let (ladder, packets, _) = stream_marked(20, 300, |i| (i == 10 || i == 11).then_some(0b011));
    let out_after = released_after(&ladder, &packets);
    assert_eq!(out_after[&10], (10, 1, true));
    assert_eq!(out_after[&11], (11, 1, true));
    assert_eq!(out_after[&12], (12, 2, true));
    // Unmarked, the same hole is waited for until the TL1 layer has moved on.
    let (_, plain, _) = stream(20, 300);
    let mut asm = Assembler::new(ladder.clone(), Some(8), AssemblerConfig::default());
    let s2t1 = ladder.layer_of(2, 1).unwrap();
    let mut at = None;
    for (i, per_layer) in plain.iter().enumerate() {
        for (layer, v) in per_layer.iter().enumerate() {
            if i == 10 && layer == s2t1 {
                continue;
            }
            for p in v {
                asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
        while let Some(p) = asm.pop() {
            if p.picture_id % (1 << 15) == 10 {
                at = Some(i);
            }
        }
    }
    assert!(at.is_none_or(|i| i > 11), "{at:?}");
}

/// The sender sent pictures 10 and 11 with no frame at all (every frame left out): picture
/// 12's mark says so, and it comes out with its own packets instead of after the reorder
/// window.
#[test]
fn pictures_marked_as_unsent_leave_no_hole_to_wait_for() {
    let (ladder, packets, _) = stream_marked(20, 300, |i| (i == 10 || i == 11).then_some(0));
    let out_after = released_after(&ladder, &packets);
    assert!(!out_after.contains_key(&10) && !out_after.contains_key(&11));
    assert_eq!(out_after[&12], (12, 2, true));
}

/// A player joins mid-stream: picture 10 arrives without its base-layer packets (they
/// went by before the join), 11..=15 whole (undecodable: their references are gone),
/// then the key picture 16. The key picture is returned as soon as it is complete, not
/// once the reorder window has given picture 10 up.
#[test]
fn key_picture_at_start_does_not_wait_for_older_partial_pictures() {
    let (ladder, packets, _) = stream(20, 300);
    let k = 8;
    let conf = AssemblerConfig {
        reorder_pictures: 23,
        patience_pictures: 23,
        max_pending: 45,
    };
    let mut asm = Assembler::new(ladder, Some(k), conf);
    let push = |asm: &mut Assembler, i: usize, from_layer: usize| {
        for (layer, v) in packets[i].iter().enumerate().skip(from_layer) {
            for p in v {
                asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
    };
    // Layers 3..=8 are spatial layers 1 and 2: picture 10 without its base-layer frame.
    push(&mut asm, 10, 3);
    for i in 11..16 {
        push(&mut asm, i, 0);
    }
    assert!(
        asm.pop().is_none(),
        "nothing decodable before the key picture"
    );
    push(&mut asm, 16, 0);
    let first = asm.pop().expect("key picture returned when complete");
    assert!(first.key && first.complete);
    assert_eq!(first.frames.len(), 3);
    // The older pictures were given up, not returned.
    assert!(asm.pop().is_none());
    assert_eq!(asm.stats().pictures, 1);
    assert_eq!(asm.stats().pictures_skipped, 6);
    // The pictures after it flow at once.
    push(&mut asm, 17, 0);
    assert_eq!(asm.pop().map(|p| p.frames.len()), Some(3));
}

/// A TL0 picture's base frame loses a packet after decoding began: the base chain is
/// broken (every picture until the next key is skipped) and stays so until a key picture
/// is returned. A lost TL2 base frame does not break it.
#[test]
fn a_lost_base_tl0_frame_breaks_the_chain_until_a_key_picture() {
    let (ladder, packets, _) = stream(20, 300);
    let mut asm = Assembler::new(ladder, Some(0), AssemblerConfig::default());
    let mut broken = Vec::new();
    for (i, pic) in packets.iter().enumerate() {
        for p in &pic[0] {
            // Picture 5 (TL2) and picture 8 (TL0) lose a packet of their base frame.
            if (i == 5 || i == 8) && std::ptr::eq(p, &pic[0][0]) {
                continue;
            }
            asm.push(0, &RtpPacket::parse(p).unwrap()).unwrap();
        }
        while asm.pop().is_some() {}
        broken.push(asm.base_broken());
    }
    asm.flush();
    // Picture 8 is given up once 4 newer pictures arrived (the default window), i.e. at
    // picture 12; the key picture 16 repairs it.
    let first = broken.iter().position(|&b| b).unwrap();
    assert_eq!(first, 12, "{broken:?}");
    assert!(broken[12..16].iter().all(|&b| b), "{broken:?}");
    assert!(!broken[16], "{broken:?}");
    assert!(asm.stats().pictures_skipped >= 2);
}

#[test]
fn end_of_picture_for_partial_subscriber() {
    let ladder = LayerLadder::default_720p_l3t3();
    let d = |sid, tid, end| PayloadDescriptor {
        end,
        layer: Some(LayerIndices {
            tid,
            switch_up: false,
            sid,
            inter_layer: sid > 0,
        }),
        ..Default::default()
    };
    // k = 3 holds (1,0): TL0 pictures end at spatial 1, TL2 pictures at spatial 0.
    assert!(Assembler::is_end_of_picture(&ladder, 3, &d(1, 0, true)));
    assert!(!Assembler::is_end_of_picture(&ladder, 3, &d(0, 0, true)));
    assert!(Assembler::is_end_of_picture(&ladder, 3, &d(0, 2, true)));
    assert!(!Assembler::is_end_of_picture(&ladder, 3, &d(1, 0, false)));
}

/// Feeds 40 pictures to an assembler holding layers 0..=`top`, which joins layers up to
/// `joined` at picture 20; the packets `withheld(picture, layer)` names never come (the
/// graft's delay). Returns the assembler and, per picture, the picture being fed when it
/// came out.
fn join_run(
    top: usize,
    joined: usize,
    withheld: impl Fn(usize, usize) -> bool,
) -> (LayerLadder, Assembler, Vec<Option<usize>>) {
    let (ladder, packets, _) = stream(40, 300);
    let conf = AssemblerConfig {
        reorder_pictures: 4,
        patience_pictures: 20,
        max_pending: 64,
    };
    let mut asm = Assembler::new(ladder.clone(), Some(top), conf);
    let mut out_after = vec![None; packets.len()];
    for (i, per_layer) in packets.iter().enumerate() {
        if i == 20 {
            asm.set_top_layer(Some(joined));
        }
        for (layer, v) in per_layer.iter().enumerate() {
            if withheld(i, layer) {
                continue;
            }
            for p in v {
                asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
        while let Some(p) = asm.pop() {
            out_after[(p.picture_id % (1 << 15)) as usize] = Some(i);
        }
    }
    (ladder, asm, out_after)
}

/// A viewer holding spatial layers 0-1 joins spatial layer 2 at picture 20; its first packets
/// come with picture 24 (the graft's delay). Pictures 20..=23 come out as soon as their lower
/// layers are whole, not `reorder_pictures` later, and so does every later picture that lost
/// nothing: the new layer is used from its first packet on.
#[test]
fn a_newly_joined_layer_is_not_waited_for_before_its_first_packet() {
    let ladder = LayerLadder::default_720p_l3t3();
    let s2 = |k: usize| ladder.cell(k).unwrap().spatial == 2;
    let (ladder, mut asm, out_after) = join_run(5, 8, |i, layer| s2(layer) && i < 24);
    for (pic, after) in out_after.iter().enumerate() {
        assert_eq!(*after, Some(pic), "picture {pic} came out after {after:?}");
    }
    // Dropping the layer again and re-joining: the same holds at the second join.
    asm.set_top_layer(Some(5));
    asm.set_top_layer(Some(8));
    assert_eq!(asm.joins[ladder.layer_of(2, 0).unwrap()], Join::Awaiting);
}

/// A viewer holding temporal layers 0-1 of spatial layer 0 joins its top temporal layer at
/// picture 20; the layer's first packets come with picture 25 (the graft's delay). Pictures
/// 21 and 23 carry only that layer, so nothing of them arrives: they are not awaited (the
/// join's rule), and the TL0/TL1 pictures behind them come out at once instead of
/// `reorder_pictures` later (a 0.5-s stall at every such join in the quality suite).
#[test]
fn pictures_only_on_a_newly_joined_layer_do_not_hold_the_others() {
    let s0t2 = LayerLadder::default_720p_l3t3().layer_of(0, 2).unwrap();
    let (_, _, out_after) = join_run(s0t2 - 1, s0t2, |i, layer| layer == s0t2 && i < 25);
    for (pic, after) in out_after.iter().enumerate() {
        // Before the join the TL2 pictures are not held; 21 and 23 never arrive.
        let expected = match pic {
            p if p % 2 == 1 && p < 20 => None,
            21 | 23 => None,
            p => Some(p),
        };
        assert_eq!(*after, expected, "picture {pic} came out after {after:?}");
    }
}

/// A packet of picture 8's spatial-layer-2 frame (temporal layer 0) is lost and no repair
/// comes. Once that layer has delivered a later picture the hole is a loss, not a frame still
/// arriving: the assembler names picture 8 as held only by it, and releasing it lets 8 out at
/// once with spatial layers 0-1 (the host asks for a re-sync of layer 2), the pictures behind
/// it right after, without their layer-2 frames (which predict from the lost one) until the
/// key picture at 16 brings layer 2 back. Before the hole is known as a loss, nothing is named.
#[test]
fn a_picture_held_by_a_lost_upper_frame_is_named_and_released_with_the_layers_below() {
    let (ladder, packets, _) = stream(24, 300);
    let conf = AssemblerConfig {
        reorder_pictures: 12,
        patience_pictures: 20,
        max_pending: 64,
    };
    let s2t0 = ladder.layer_of(2, 0).unwrap();
    assert!(packets[8][s2t0].len() >= 2);
    let mut asm = Assembler::new(ladder.clone(), Some(8), conf);
    let mut out = Vec::new();
    let mut named = None;
    for (i, per_layer) in packets.iter().enumerate() {
        for (layer, v) in per_layer.iter().enumerate() {
            for (j, p) in v.iter().enumerate() {
                if i == 8 && layer == s2t0 && j == 1 {
                    continue;
                }
                asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                if let Some(ts) = asm.oldest_awaiting_repair() {
                    named.get_or_insert((i, layer, ts));
                    assert_eq!(asm.release_oldest(), vec![2]);
                }
            }
        }
        while let Some(p) = asm.pop() {
            out.push((p.picture_id % (1 << 15), p.top_spatial(), i));
        }
    }
    let (i, layer, _) = named.expect("picture 8 was never named");
    // Named when the S2T0 layer delivered picture 12, its next frame: not on 8's own packets.
    assert_eq!((i, layer), (12, s2t0));
    let eight = out.iter().find(|x| x.0 == 8).unwrap();
    assert_eq!((eight.1, eight.2), (1, 12));
    for &(pid, top, _) in &out {
        let want = if (8..16).contains(&pid) { 1 } else { 2 };
        assert_eq!(top, want, "picture {pid}: top spatial {top}");
    }
    assert_eq!(out.len(), 24);
    assert_eq!(asm.stats().released_unrepaired, 1);
}

/// A viewer holding temporal layers 0-2 of spatial layer 0 leaves temporal layer 2 at
/// picture 20, while picture 19's TL2 frame is half in (the leave cut it) and picture 21's
/// packets are still on their way (they arrive after the leave and are ignored). Every
/// TL0/TL1 picture comes out as soon as it is whole: nothing waits for the TL2 pictures that
/// will not come.
#[test]
fn leaving_a_temporal_layer_holds_no_picture() {
    let (ladder, packets, _) = stream(40, 300);
    let s0t2 = ladder.layer_of(0, 2).unwrap();
    assert!(packets[19][s0t2].len() >= 2);
    let mut asm = Assembler::new(ladder.clone(), Some(s0t2), PLAYER_CONF);
    let out_after = release_points(
        &mut asm,
        &packets,
        s0t2,
        |i, asm| {
            if i == 20 {
                asm.set_top_layer(Some(s0t2 - 1));
            }
        },
        |i, layer, j| layer == s0t2 && (i == 19 && j > 0 || i > 21),
    );
    for (pic, after) in out_after.iter().enumerate() {
        let expected = match pic {
            19 => None,
            p if p >= 20 && p % 2 == 1 => None,
            p => Some(p),
        };
        assert_eq!(
            *after,
            expected,
            "picture {pic} came out after {after:?}: {:?}",
            asm.stats()
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    /// A viewer of spatial layer 0 at TL0-2 leaves TL2 at a random packet, with packets
    /// reordered across layers as 20 ms of jitter does, and the left layer's packets still
    /// arriving for a few pictures (the prune takes effect upstream): every TL0 and TL1
    /// picture still comes out, whole.
    #[test]
    fn leaving_a_temporal_layer_loses_no_lower_picture(
        seed in any::<u64>(),
        leave_at in 10usize..90,
        late_pictures in 0usize..4,
    ) {
        let (ladder, packets, pics) = stream(48, 300);
        let s0t2 = ladder.layer_of(0, 2).unwrap();
        let mut asm = Assembler::new(ladder.clone(), Some(s0t2), PLAYER_CONF);
        let mut x = seed | 1;
        let mut rnd = move || { x ^= x << 13; x ^= x >> 7; x ^= x << 17; x % 100 };
        // Every packet of layers 0..=2 with an arrival slot: its picture's plus up to 2 pictures
        // of jitter.
        let mut arrivals = Vec::new();
        for (i, per_layer) in packets.iter().enumerate() {
            for (layer, v) in per_layer.iter().enumerate().take(s0t2 + 1) {
                for p in v {
                    arrivals.push((i * 10 + (rnd() % 25) as usize, i, layer, p));
                }
            }
        }
        arrivals.sort_by_key(|a| a.0);
        let mut left: Option<usize> = None;
        let mut outs = Vec::new();
        for (n, &(_, i, layer, p)) in arrivals.iter().enumerate() {
            if n == leave_at {
                asm.set_top_layer(Some(s0t2 - 1));
                left = Some(i);
            }
            // After the leave, the left layer's packets stop a few pictures later.
            if layer == s0t2 && left.is_some_and(|l| i > l + late_pictures) {
                continue;
            }
            asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
            while let Some(q) = asm.pop() { outs.push(q); }
        }
        asm.flush();
        while let Some(q) = asm.pop() { outs.push(q); }
        let got: Vec<u64> = outs.iter().map(|q| q.picture_id % (1 << 15)).collect();
        for (i, q) in pics.iter().enumerate() {
            if q.temporal < 2 {
                prop_assert!(got.contains(&(i as u64)), "picture {} (TL{}) missing, left at picture {:?}: {:?}; {:?}", i, q.temporal, left, got, asm.stats());
            }
        }
    }
}

/// A break of the base layer's chain names the picture and why: a TL0 picture whose base
/// frame lost a packet is `incomplete`; one whose base frame never came leaves the next TL0
/// picture `unreferenceable`, naming the missing reference. Only the first skip of a break
/// is recorded (the pictures after it fail by consequence).
#[test]
fn a_base_break_names_its_picture_and_reason() {
    for (drop_all, reason, at, refs) in [
        (false, "incomplete", 4u64, vec![]),
        (true, "unreferenceable", 8, vec![4u64]),
    ] {
        let (ladder, packets, _) = stream(16, 300);
        let mut asm = Assembler::new(ladder, Some(2), AssemblerConfig::default());
        assert!(packets[4][0].len() >= 2);
        for (i, per_layer) in packets.iter().enumerate() {
            for (layer, v) in per_layer.iter().enumerate().take(3) {
                for (j, p) in v.iter().enumerate() {
                    if i == 4 && layer == 0 && (drop_all || j == 1) {
                        continue;
                    }
                    asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                }
            }
            while asm.pop().is_some() {}
        }
        let b = asm.last_base_break().expect("a break").clone();
        let first = b.picture_id - b.picture_id % (1 << 15);
        assert_eq!(
            (b.picture_id - first, b.reason, b.count),
            (at, reason, 1),
            "{b:?}"
        );
        assert_eq!(b.refs.iter().map(|r| r - first).collect::<Vec<_>>(), refs);
        assert!(asm.base_broken());
    }
}

/// The case the property above found: picture 31's TL2 frame is half in, picture 30 (TL1) is
/// reordered behind it, and the viewer leaves TL2 just then. The emptied TL2 picture has
/// nothing left to wait for, but picture 30, not seen yet, is not given up with it: it comes
/// out when its packets arrive, and no TL0 or TL1 picture is lost.
#[test]
fn a_picture_emptied_by_a_leave_does_not_give_up_an_older_one_still_arriving() {
    let (ladder, packets, _) = stream(40, 300);
    let s0t2 = ladder.layer_of(0, 2).unwrap();
    let mut asm = Assembler::new(ladder, Some(s0t2), PLAYER_CONF);
    let push = |asm: &mut Assembler, i: usize, only: Option<usize>| {
        for (layer, v) in packets[i].iter().enumerate().take(s0t2 + 1) {
            for (j, p) in v.iter().enumerate() {
                if only.is_none_or(|o| o == j) {
                    asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
                }
            }
        }
    };
    let mut out = Vec::new();
    let mut drain = |asm: &mut Assembler| {
        while let Some(q) = asm.pop() {
            out.push(q.picture_id % (1 << 15));
        }
    };
    for i in 0..30 {
        push(&mut asm, i, None);
    }
    push(&mut asm, 31, Some(1));
    asm.set_top_layer(Some(s0t2 - 1));
    push(&mut asm, 32, Some(0));
    drain(&mut asm);
    push(&mut asm, 30, None);
    push(&mut asm, 32, Some(1));
    for i in 33..40 {
        push(&mut asm, i, None);
    }
    drain(&mut asm);
    assert_eq!(asm.stats().late, 0, "{:?}", asm.stats());
    for i in [30u64, 32, 34, 36, 38] {
        assert!(
            out.contains(&i),
            "picture {i} missing: {out:?} {:?}",
            asm.stats()
        );
    }
    assert!(!asm.base_broken());
}

/// A viewer holding TL0-1 joins TL2 at picture 20, and the new layer's first packets (of
/// pictures 21-25) reach the assembler only after picture 26's (the receiver's join
/// quarantine held them 150 ms): no picture waits for them meanwhile, those pictures are
/// past when they come, and TL2 is used from the next picture on.
#[test]
fn a_joined_layers_late_first_packets_do_not_hold_newer_pictures() {
    let (ladder, packets, _) = stream(40, 300);
    let s0t2 = ladder.layer_of(0, 2).unwrap();
    let mut asm = Assembler::new(ladder, Some(s0t2 - 1), PLAYER_CONF);
    let mut out_after = vec![None; packets.len()];
    let mut held = Vec::new();
    for (i, per_layer) in packets.iter().enumerate() {
        if i == 20 {
            asm.set_top_layer(Some(s0t2));
        }
        for (layer, v) in per_layer.iter().enumerate().take(s0t2 + 1) {
            for p in v {
                if layer == s0t2 && (20..26).contains(&i) {
                    held.push(p);
                    continue;
                }
                if layer == s0t2 && i < 20 {
                    continue;
                }
                asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
        if i == 26 {
            // The quarantine releases the held packets after picture 26's base.
            for p in held.drain(..) {
                asm.push(s0t2, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
        while let Some(q) = asm.pop() {
            out_after[(q.picture_id % (1 << 15)) as usize] = Some(i);
        }
    }
    for (pic, after) in out_after.iter().enumerate() {
        let tl2 = pic % 2 == 1;
        let expected = match pic {
            _ if tl2 && pic < 27 => None,
            p => Some(p),
        };
        assert_eq!(*after, expected, "picture {pic} came out after {after:?}");
    }
}

/// A TL2 picture lost whole (its one packet, unrepaired) is lost as soon as its layer has
/// delivered a later picture: the pictures behind it come out with their own packets (the
/// TL1 picture after it once the next TL2 picture shows the loss), not `reorder_pictures`
/// later. With the next TL2 picture partly lost too, the same, one picture later for the
/// picture behind that one (the rule for a partly lost TL2 frame).
#[test]
fn a_tl2_picture_lost_whole_holds_nothing() {
    for partial_next in [false, true] {
        let (ladder, packets, _) = stream(40, 300);
        let s0t2 = ladder.layer_of(0, 2).unwrap();
        assert_eq!(packets[5][s0t2].len(), 2);
        let mut asm = Assembler::new(ladder, Some(s0t2), PLAYER_CONF);
        let out_after = release_points(
            &mut asm,
            &packets,
            s0t2,
            |_, _| {},
            |i, _, j| i == 5 || (partial_next && i == 7 && j == 0),
        );
        for (pic, after) in out_after.iter().enumerate() {
            let expected = match pic {
                5 => None,
                7 if partial_next => None,
                // Behind the partial TL2 picture, until its layer delivered the next one.
                8 if partial_next => Some(9),
                6 => Some(7),
                p => Some(p),
            };
            assert_eq!(
                *after, expected,
                "picture {pic} (next partial: {partial_next})"
            );
        }
    }
}

/// A TL1 picture (6) lost whole: the pictures behind it are held (its repair may come), and
/// the assembler names the oldest as held only by missing pictures above TL0; released, the
/// TL2 picture that predicts from the lost one is skipped and the TL0 picture after it
/// comes out, with nothing else lost.
#[test]
fn pictures_held_by_a_tl1_picture_lost_whole_are_named_and_released() {
    let (ladder, packets, _) = stream(16, 300);
    let s0t2 = ladder.layer_of(0, 2).unwrap();
    let mut asm = Assembler::new(ladder, Some(s0t2), PLAYER_CONF);
    let mut out = Vec::new();
    let push = |asm: &mut Assembler, i: usize| {
        for (layer, v) in packets[i].iter().enumerate().take(s0t2 + 1) {
            for p in v {
                asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
    };
    for i in [0, 1, 2, 3, 4, 5, 7, 8] {
        push(&mut asm, i);
        while let Some(q) = asm.pop() {
            out.push(q.picture_id % (1 << 15));
        }
    }
    assert_eq!(out, vec![0, 1, 2, 3, 4, 5], "held behind the lost picture");
    let seven = RtpPacket::parse(&packets[7][s0t2][0]).unwrap().timestamp();
    assert_eq!(asm.oldest_behind_missing(), Some(seven));
    asm.release_missing();
    while let Some(q) = asm.pop() {
        out.push(q.picture_id % (1 << 15));
    }
    assert_eq!(out, vec![0, 1, 2, 3, 4, 5, 8]);
    assert_eq!(asm.stats().pictures_skipped, 2, "6 lost, 7 unreferenceable");
    assert!(!asm.base_broken());
    assert_eq!(asm.oldest_behind_missing(), None);
}

/// A viewer holding spatial layers 0-1 joins spatial layer 2 at picture `join`; picture 28's
/// layer-2 TL0 frame is large: its first packet comes ahead of the picture's other layers,
/// the rest only with picture 31 (a re-sync or key frame queued at the sender). Returns, per picture, the picture being fed
/// when it came out.
fn late_upper_frame_run(join: usize) -> Vec<Option<usize>> {
    let (ladder, packets, _) = stream(40, 300);
    let s2t0 = ladder.layer_of(2, 0).unwrap();
    assert!(packets[28][s2t0].len() >= 2);
    let mut asm = Assembler::new(ladder.clone(), Some(s2t0 - 1), PLAYER_CONF);
    let mut out_after = vec![None; packets.len()];
    let mut held = Vec::new();
    for (i, per_layer) in packets.iter().enumerate() {
        if i == join {
            asm.set_top_layer(Some(ladder.len() - 1));
        }
        // The large frame's first packet comes first (the pacer's burst), the rest later.
        if i == 28 {
            asm.push(s2t0, &RtpPacket::parse(&per_layer[s2t0][0]).unwrap())
                .unwrap();
        }
        for (layer, v) in per_layer.iter().enumerate() {
            for (j, p) in v.iter().enumerate() {
                if i == 28 && layer == s2t0 {
                    if j >= 1 {
                        held.push(p);
                    }
                    continue;
                }
                asm.push(layer, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
        if i == 31 {
            for p in held.drain(..) {
                asm.push(s2t0, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
        while let Some(q) = asm.pop() {
            out_after[(q.picture_id % (1 << 15)) as usize] = Some(i);
        }
    }
    out_after
}

/// Joined at 25, the layer's next switch point is the key picture at 32: picture 28's
/// layer-2 frame predicts from picture 24's, which this viewer never had, so it cannot be
/// decoded and is not waited for (the picture comes out with layers 0-1 at once). Joined
/// at 20, the re-sync at 24 made it decodable, and the picture waits for it.
#[test]
fn an_upper_frame_that_cannot_be_decoded_is_not_waited_for() {
    let out = late_upper_frame_run(25);
    for (pic, after) in out.iter().enumerate() {
        assert_eq!(
            *after,
            Some(pic),
            "joined at 25: picture {pic} came out after {after:?}"
        );
    }
    let out = late_upper_frame_run(20);
    assert_eq!(out[28], Some(31), "joined at 20: {:?}", &out[26..34]);
}
