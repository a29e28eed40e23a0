//! Frame dropping (`SvcConfig::drop_thresh`): a budget far below what the content needs makes
//! libvpx drop layer frames; each dropped frame is sent as a one-byte "show existing frame"
//! filler, so every prefix still decodes every picture with no decoder error, the 0212
//! temporal pattern (and with it the key-picture placement) holds, and a picture whose top
//! layer was dropped shows an earlier picture of that layer again, bit for bit, to a decoder
//! that gets the filler; Layercast's assembler leaves it out and the picture shows its top
//! coded layer.

use codec::depay::{Assembler, AssemblerConfig};
use codec::ladder::LayerLadder;
use codec::rtp::RtpPacket;
use codec::synth;
use codec::vp9rtp::{LayerStreams, StreamConfig};
use codec::vpx::{Decoder, SvcEncoder};

#[test]
fn dropped_layer_frames_keep_every_prefix_decodable() {
    let conf = synth::starved_l3t3();
    let (w, h) = (conf.width, conf.height);
    let ladder = LayerLadder::spatial_major(&conf.cell_kbps).unwrap();
    let sizes: Vec<(u32, u32)> = (0..3).map(|s| conf.layer_size(s)).collect();
    let conf_size = |s: u8| sizes[s as usize];
    let res = (0..3)
        .map(|s| {
            let (a, b) = conf.layer_size(s);
            (a as u16, b as u16)
        })
        .collect();
    let mut ls = LayerStreams::new(ladder.clone(), res, StreamConfig::default()).unwrap();
    let mut enc = SvcEncoder::new(conf).unwrap();
    let mut pics = Vec::new();
    for n in 0..96u32 {
        let p = enc
            .encode(&synth::frame(w, h, n * 3), n as i64 * 3000)
            .unwrap()
            .expect("a picture for every frame (drops are fillers)");
        assert_eq!(p.temporal, [0, 2, 1, 2][n as usize % 4], "picture {n}");
        assert_eq!(p.frames.len(), 3);
        let per_layer = ls.packets(&p).unwrap();
        pics.push((p, per_layer));
    }
    let dropped: Vec<u8> = pics.iter().map(|(p, _)| p.dropped_mask).collect();
    let n_dropped = dropped.iter().filter(|&&m| m != 0).count();
    assert!(n_dropped >= 5, "too few drops to test: {dropped:?}");
    assert!(pics.iter().filter(|(p, _)| p.key).count() >= 3);
    let mut all_shown: Vec<(u16, Vec<u8>)> = Vec::new();
    let mut all_trimmed = 0;
    for k in 0..ladder.len() {
        // What a stock decoder of the prefix gets: every frame, fillers included. A filler at
        // the top shows the layer's reference picture: output earlier by this prefix or, for a
        // lower layer, by a smaller prefix (iterated first).
        let mut dec = Decoder::new(1).unwrap();
        let mut shown: Vec<(u16, Vec<u8>)> = Vec::new();
        let mut repeats = 0;
        for (p, _) in &pics {
            let frames: Vec<&[u8]> = p
                .frames
                .iter()
                .filter(|f| ladder.keeps(k, f.spatial, p.temporal))
                .map(|f| &f.data[..])
                .collect();
            let Some(top) = p
                .frames
                .iter()
                .filter(|f| ladder.keeps(k, f.spatial, p.temporal))
                .map(|f| f.spatial)
                .max()
            else {
                continue;
            };
            let mut au = Vec::new();
            codec::superframe::build(&frames, &mut au).unwrap();
            let f = dec
                .decode(&au)
                .unwrap_or_else(|e| panic!("k {k}: decoder error: {e}"))
                .expect("a shown frame");
            if p.dropped_mask >> top & 1 == 1 {
                assert!(
                    shown
                        .iter()
                        .chain(&all_shown)
                        .any(|(s, y)| *s == top as u16 && *y == f.i420),
                    "k {k}: a dropped top layer shows an earlier picture again"
                );
                repeats += 1;
            }
            shown.push((top as u16, f.i420));
        }
        // What Layercast's receivers get: the assembler leaves the fillers at the top of a
        // picture out, so the decoder shows the picture's top coded layer, never an earlier
        // picture; a picture whose held frames were all dropped is not returned.
        let mut asm = Assembler::new(ladder.clone(), Some(k), AssemblerConfig::default());
        let mut dec = Decoder::new(1).unwrap();
        let (mut decoded, mut trimmed) = (0usize, 0usize);
        let mut base = None;
        for (_, per_layer) in &pics {
            for (layer, pkts) in per_layer.iter().enumerate().take(k + 1) {
                for lp in pkts {
                    let b = lp.to_bytes(&[]).unwrap();
                    asm.push(layer, &RtpPacket::parse(&b).unwrap()).unwrap();
                }
            }
            while let Some(a) = asm.pop() {
                let idx = (a.picture_id - *base.get_or_insert(a.picture_id)) as usize;
                let top = a.top_spatial();
                let (p, _) = &pics[idx];
                assert_eq!(
                    p.dropped_mask >> top & 1,
                    0,
                    "k {k}: picture {idx} ends at a filler"
                );
                let held = p
                    .frames
                    .iter()
                    .filter(|f| ladder.keeps(k, f.spatial, p.temporal))
                    .count();
                trimmed += (a.frames.len() < held) as usize;
                let f = dec
                    .decode(&a.access_unit().unwrap())
                    .unwrap_or_else(|e| panic!("k {k}: decoder error: {e}"))
                    .expect("a shown frame");
                let (lw, lh) = conf_size(top);
                assert_eq!((f.width, f.height), (lw, lh), "k {k}: picture {idx}");
                decoded += 1;
            }
        }
        let want = pics
            .iter()
            .filter(|(p, _)| {
                p.frames.iter().any(|f| {
                    ladder.keeps(k, f.spatial, p.temporal) && p.dropped_mask >> f.spatial & 1 == 0
                })
            })
            .count();
        assert_eq!(
            decoded, want,
            "k {k}: every picture not dropped whole decodes"
        );
        all_trimmed += trimmed;
        eprintln!(
            "k {k}: {} pictures, {repeats} repeats of a dropped top layer; assembled: {decoded}, {trimmed} without their top filler",
            shown.len()
        );
        all_shown.extend(shown);
    }
    assert!(all_trimmed > 0, "no picture lost a top filler: {dropped:?}");
    eprintln!("dropped masks: {dropped:?}");
}
