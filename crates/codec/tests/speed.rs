//! `SvcConfig::lower_speed` reaches libvpx: the layers below the top are coded at their own
//! `cpu-used`, the top layer at `speed`.

use codec::synth;
use codec::vpx::{SvcConfig, SvcEncoder};

fn encode(lower_speed: i32) -> Vec<Vec<Vec<u8>>> {
    let mut conf = SvcConfig::l3t3_720p();
    (conf.width, conf.height, conf.temporal_layers) = (640, 360, 1);
    conf.cell_kbps = vec![vec![100], vec![200], vec![500]];
    conf.lower_speed = lower_speed;
    assert_eq!(
        (0..3).map(|s| conf.layer_speed(s)).collect::<Vec<_>>(),
        [lower_speed, lower_speed, 9]
    );
    let mut enc = SvcEncoder::new(conf).unwrap();
    (0..6u32)
        .map(|i| {
            let p = enc
                .encode(&synth::frame(640, 360, i), i as i64 * 3000)
                .unwrap()
                .unwrap();
            p.frames.into_iter().map(|f| f.data).collect()
        })
        .collect()
}

#[test]
fn lower_layers_are_coded_at_lower_speed() {
    let (fast, slow) = (encode(9), encode(5));
    // Key picture aside, the base layer's inter frames differ when only its speed does.
    assert!(
        (1..6).any(|i| fast[i][0] != slow[i][0]),
        "base layer ignores lower_speed"
    );
    let mut one = SvcConfig::l3t3_720p();
    one.spatial_layers = 1;
    assert_eq!(
        one.layer_speed(0),
        one.speed,
        "a one-layer encode runs at `speed`"
    );
}
