//! The assembler on a stream of two spatial layers and one temporal layer (every frame TL0,
//! referenced by the next picture): a late base frame is waited for, and the encoder's
//! fillers at the top of a picture are left out.

use super::*;
use crate::vp9rtp::{LayerStreams, StreamConfig};
use crate::vpx::{EncodedPicture, LayerFrame};

/// The ladder and packetizer of a two-spatial-layer, one-temporal-layer stream.
fn l2t1() -> (LayerLadder, LayerStreams) {
    let ladder = LayerLadder::spatial_major(&[vec![150], vec![450]]).unwrap();
    let ls = LayerStreams::new(
        ladder.clone(),
        vec![(160, 90), (320, 180)],
        StreamConfig::default(),
    )
    .unwrap();
    (ladder, ls)
}

/// Packets per layer of picture `i` of a two-spatial-layer, one-temporal-layer stream (a key
/// picture first), each layer frame `data(i, s)`.
fn l2t1_packets(
    ls: &mut LayerStreams,
    i: usize,
    data: impl Fn(usize, u8) -> Vec<u8>,
) -> Vec<Vec<Vec<u8>>> {
    let frames = (0..2u8)
        .map(|s| LayerFrame {
            spatial: s,
            temporal: 0,
            data: data(i, s),
            inter_picture: i > 0,
            inter_layer: s > 0,
            switch_up: false,
            width: 0,
            height: 0,
        })
        .collect();
    let pic = EncodedPicture {
        pts: i as i64 * 3000,
        index: i as u64,
        temporal: 0,
        key: i == 0,
        sync_mask: 0,
        dropped_mask: 0,
        frames,
    };
    ls.packets(&pic)
        .unwrap()
        .iter()
        .map(|v| v.iter().map(|p| p.to_bytes(&[]).unwrap()).collect())
        .collect()
}

/// With one temporal layer every frame is TL0, referenced by the next picture: a base frame
/// whose packets come after those of the three pictures behind it (a retransmission) is
/// waited for, not given up as the top temporal layer's frames are once their layer moved on
/// (that broke the chain of every picture after it until the next key picture).
#[test]
fn a_late_frame_of_a_single_temporal_layer_is_waited_for() {
    let (ladder, mut ls) = l2t1();
    let packets: Vec<Vec<Vec<Vec<u8>>>> = (0..12usize)
        .map(|i| l2t1_packets(&mut ls, i, |i, s| vec![(i * 7 + s as usize) as u8; 500]))
        .collect();
    let mut asm = Assembler::new(ladder, Some(1), AssemblerConfig::default());
    let push = |asm: &mut Assembler, i: usize, layers: &[usize]| {
        for &k in layers {
            for p in &packets[i][k] {
                asm.push(k, &RtpPacket::parse(p).unwrap()).unwrap();
            }
        }
    };
    let mut out = Vec::new();
    for i in 0..12 {
        push(&mut asm, i, if i == 5 { &[1] } else { &[0, 1] });
        if i == 8 {
            // Picture 5's base frame, after picture 8's.
            push(&mut asm, 5, &[0]);
        }
        while let Some(p) = asm.pop() {
            out.push((p.picture_id, p.frames.len()));
        }
    }
    let first = out[0].0;
    let want: Vec<(u64, usize)> = (0..12).map(|i| (first + i, 2)).collect();
    assert_eq!(out, want, "{:?}", asm.stats());
    assert_eq!(asm.stats().pictures_skipped, 0, "{:?}", asm.stats());
    assert_eq!(asm.stats().late, 0, "{:?}", asm.stats());
    assert_eq!(asm.stats().pictures, 12, "{:?}", asm.stats());
}

/// A layer frame the encoder dropped arrives as a one-byte `show_existing_frame` filler
/// (`vpx::filler_frame`). At the top of a picture it would make the decoder show that
/// layer's last reference frame, older than the picture shown before it: it is left out,
/// and a picture dropped whole is not returned.
#[test]
fn fillers_at_the_top_of_a_picture_are_left_out() {
    let (ladder, mut ls) = l2t1();
    // Picture 3 lost its top frame to the encoder, picture 5 both; picture 7's base frame
    // was dropped under a coded top frame (kept: the top decides what is shown).
    let filler = |i: usize, s: u8| matches!((i, s), (3, 1) | (5, _) | (7, 0));
    let mut asm = Assembler::new(ladder, Some(1), AssemblerConfig::default());
    let mut out = Vec::new();
    for i in 0..10usize {
        let pkts = l2t1_packets(&mut ls, i, |i, s| {
            if filler(i, s) {
                vec![0x88 | (s & 7)]
            } else {
                vec![(i * 7 + s as usize) as u8; 500]
            }
        });
        for (k, cell) in pkts.iter().enumerate() {
            for b in cell {
                asm.push(k, &RtpPacket::parse(b).unwrap()).unwrap();
            }
        }
        while let Some(p) = asm.pop() {
            out.push((p.picture_id, p.top_spatial(), p.frames.len()));
        }
    }
    let first = out[0].0;
    let got: Vec<(u64, u8, usize)> = out.iter().map(|&(id, s, n)| (id - first, s, n)).collect();
    let want: Vec<(u64, u8, usize)> = (0..10u64)
        .filter(|&i| i != 5)
        .map(|i| (i, if i == 3 { 0 } else { 1 }, if i == 3 { 1 } else { 2 }))
        .collect();
    assert_eq!(got, want, "{:?}", asm.stats());
    assert_eq!(asm.stats().filler_frames, 3, "{:?}", asm.stats());
    assert_eq!(asm.stats().filler_pictures, 1, "{:?}", asm.stats());
    assert!(is_filler(&[0x8D]), "the encoder's filler of buffer 5");
    assert!(!is_filler(&[0x82, 0x49, 0x83]), "a coded frame's header");
}
