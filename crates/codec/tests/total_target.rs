//! `SvcEncoder::set_total_kbps`: one total target for the whole SVC encode (the hook a TFMCC
//! sender drives from its X_send). The encoder's output must follow the total, every cell
//! must keep its share of the ladder, and no key picture may be forced by a change.

use codec::synth;
use codec::vpx::{SvcConfig, SvcEncoder};

#[test]
fn total_target_moves_the_output_and_keeps_the_ladder_shape() {
    let mut conf = SvcConfig::l3t3_720p();
    conf.width = 640;
    conf.height = 360;
    conf.fps_num = 15;
    conf.keyframe_interval = 0;
    let base_total: u32 = conf.cell_kbps.iter().flatten().sum();
    let frames: Vec<Vec<u8>> = (0..30).map(|i| synth::frame(640, 360, i)).collect();
    let mut enc = SvcEncoder::new(conf).unwrap();
    assert_eq!(enc.total_kbps(), base_total);
    // 1000 kbit/s for 6 s, then 500 kbit/s for 6 s; the first 2 s of each are the rate
    // buffer settling and are not measured.
    let mut bytes = [0u64; 2];
    let mut top_share = [0u64; 2];
    for i in 0..180usize {
        if i == 0 {
            enc.set_total_kbps(1000).unwrap();
            assert_eq!(enc.total_kbps(), 1000);
        }
        if i == 90 {
            enc.set_total_kbps(500).unwrap();
            assert_eq!(enc.total_kbps(), 500);
        }
        let p = enc
            .encode(&frames[i % frames.len()], i as i64 * 6000)
            .unwrap()
            .unwrap();
        if i > 0 {
            assert!(!p.key, "picture {i} became a key picture");
        }
        let phase = i / 90;
        if i % 90 >= 30 {
            for f in &p.frames {
                bytes[phase] += f.data.len() as u64;
                if f.spatial == 2 {
                    top_share[phase] += f.data.len() as u64;
                }
            }
        }
    }
    let kbps: Vec<f64> = bytes.iter().map(|&b| b as f64 * 8.0 / 4.0 / 1e3).collect();
    let share: Vec<f64> = (0..2)
        .map(|i| top_share[i] as f64 / bytes[i] as f64)
        .collect();
    println!("output {kbps:?} kbit/s for targets 1000, 500; top spatial share {share:?}");
    assert!(
        (800.0..=1150.0).contains(&kbps[0]),
        "1000 kbit/s target gave {:.0}",
        kbps[0]
    );
    assert!(
        (400.0..=575.0).contains(&kbps[1]),
        "500 kbit/s target gave {:.0}",
        kbps[1]
    );
    // The ladder gives the top spatial layer 1590 of 2370: about 67 % at either total.
    for s in &share {
        assert!((0.5..=0.8).contains(s), "top spatial share {s:.2}");
    }
}
