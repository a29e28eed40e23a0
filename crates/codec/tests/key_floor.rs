//! `SvcConfig::key_mid_min_q` reaches libvpx on key pictures, for the middle spatial layer:
//! its key-picture frames shrink, and nothing is coded differently before the first floored
//! frame.

use codec::synth;
use codec::vpx::{SvcConfig, SvcEncoder};

/// Per picture, per spatial layer, the frame bytes of a 640x360 L3T1 encode whose key pictures
/// come every 8 pictures.
fn encode(floor: u32) -> Vec<Vec<Vec<u8>>> {
    let mut conf = SvcConfig::l3t3_720p();
    (conf.width, conf.height, conf.temporal_layers) = (640, 360, 1);
    conf.cell_kbps = vec![vec![60], vec![150], vec![500]];
    conf.keyframe_interval = 8;
    conf.key_mid_min_q = floor;
    let mut enc = SvcEncoder::new(conf).unwrap();
    (0..17u32)
        .map(|i| {
            let p = enc
                .encode(&synth::frame(640, 360, i), i as i64 * 3000)
                .unwrap()
                .unwrap();
            assert_eq!(p.key, i % 8 == 0, "picture {i}");
            p.frames.into_iter().map(|f| f.data).collect()
        })
        .collect()
}

#[test]
fn the_floor_shrinks_the_middle_layers_key_frames_only() {
    let (off, on) = (encode(0), encode(50));
    // The first picture's quantizer is libvpx's start-up choice, above the floor either way.
    assert_eq!(on[0], off[0]);
    for k in [8, 16] {
        assert!(
            on[k][1].len() < off[k][1].len(),
            "key picture {k}: middle layer {} bytes with the floor, {} without",
            on[k][1].len(),
            off[k][1].len()
        );
    }
    // Everything before the first floored frame (the second key picture's middle layer) is
    // coded as without the floor, that key picture's base layer included.
    for i in 0..8 {
        assert_eq!(on[i], off[i], "picture {i}");
    }
    assert_eq!(on[8][0], off[8][0], "base layer of the second key picture");
}
