//! Rate accuracy: over 10 s of the generated 720p clip, every (spatial, temporal) cell of the
//! default L3T3 configuration lands within 10 % of its target. The congestion controllers
//! assume each layer runs at its announced rate, so this is a product requirement.

use codec::synth;
use codec::vpx::{SvcConfig, SvcEncoder};

#[test]
fn every_cell_within_ten_percent_of_target_over_ten_seconds() {
    let conf = SvcConfig::l3t3_720p();
    let frames: Vec<Vec<u8>> = (0..60).map(|i| synth::frame(1280, 720, i)).collect();
    let mut enc = SvcEncoder::new(conf.clone()).unwrap();
    let n = 300;
    let mut bytes = [[0u64; 3]; 3];
    for i in 0..n {
        let p = enc
            .encode(&frames[i % frames.len()], i as i64 * 3000)
            .unwrap()
            .unwrap();
        for f in &p.frames {
            bytes[f.spatial as usize][f.temporal as usize] += f.data.len() as u64;
        }
    }
    let mut report = Vec::new();
    let mut worst: f64 = 0.0;
    for (s, row) in bytes.iter().enumerate() {
        for (t, &b) in row.iter().enumerate() {
            let kbps = b as f64 * 8.0 / 10.0 / 1000.0;
            let target = conf.cell_kbps[s][t] as f64;
            let dev = kbps / target - 1.0;
            worst = worst.max(dev.abs());
            report.push(format!(
                "({s},{t}) {kbps:.1}/{target} ({:+.1} %)",
                dev * 100.0
            ));
        }
    }
    println!("{}", report.join("\n"));
    testkit::record(
        "issue5/layer-rates",
        &format!(
            "worst cell deviation {:.1} % over 10 s (720p L3T3)",
            worst * 100.0
        ),
        Some(worst <= 0.10),
        "cargo test --release -p layercast-codec --test rates",
    );
    assert!(
        worst <= 0.10,
        "a cell is off target by {:.1} %:\n{}",
        worst * 100.0,
        report.join("\n")
    );
}

#[test]
fn set_bitrates_takes_effect_without_a_key_frame() {
    let conf = SvcConfig::l3t3_720p();
    let frames: Vec<Vec<u8>> = (0..30).map(|i| synth::frame(1280, 720, i)).collect();
    let mut enc = SvcEncoder::new(conf.clone()).unwrap();
    let half: Vec<Vec<u32>> = conf
        .cell_kbps
        .iter()
        .map(|r| r.iter().map(|&x| x / 2).collect())
        .collect();
    let mut first = 0u64;
    let mut second = 0u64;
    for i in 0..180usize {
        if i == 90 {
            enc.set_bitrates(&half).unwrap();
        }
        let p = enc
            .encode(&frames[i % frames.len()], i as i64 * 3000)
            .unwrap()
            .unwrap();
        if i > 0 {
            assert!(!p.key, "picture {i} became a key picture");
        }
        let sz: u64 = p.frames.iter().map(|f| f.data.len() as u64).sum();
        // Skip the 1 s after start and after the change while the buffer settles.
        if (30..90).contains(&i) {
            first += sz;
        } else if i >= 120 {
            second += sz;
        }
    }
    let ratio = second as f64 / first as f64;
    println!("rate after halving / before: {ratio:.2}");
    assert!((0.4..0.65).contains(&ratio), "ratio {ratio:.2}");
    assert!(enc.set_bitrates(&[vec![1]]).is_err());
}
