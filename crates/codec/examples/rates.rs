//! Per-cell rate of the encoder over N seconds of the synthetic clip.
//! `cargo run --release -p layercast-codec --example rates -- [seconds] [speed] [max_q]`
use codec::synth;
use codec::vpx::{SvcConfig, SvcEncoder};

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let secs: u32 = a.get(1).and_then(|s| s.parse().ok()).unwrap_or(10);
    let mut conf = SvcConfig::l3t3_720p();
    if let Some(s) = a.get(2).and_then(|s| s.parse().ok()) {
        conf.speed = s;
    }
    if let Some(q) = a.get(3).and_then(|s| s.parse().ok()) {
        conf.max_q = q;
    }
    let frames: Vec<Vec<u8>> = (0..90).map(|i| synth::frame(1280, 720, i)).collect();
    let mut enc = SvcEncoder::new(conf.clone()).unwrap();
    let n = secs * 30;
    let mut bytes = [[0u64; 3]; 3];
    let cpu = || -> u64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let c0 = cpu();
    for i in 0..n {
        let p = enc
            .encode(&frames[i as usize % frames.len()], i as i64 * 3000)
            .unwrap()
            .unwrap();
        for f in &p.frames {
            bytes[f.spatial as usize][f.temporal as usize] += f.data.len() as u64;
        }
    }
    let c1 = cpu();
    println!(
        "speed {} max_q {}: encode {:.1} fps by thread CPU time",
        conf.speed,
        conf.max_q,
        n as f64 / ((c1 - c0) as f64 / 1e9)
    );
    for (s, row) in bytes.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(t, b)| {
                let kbps = *b as f64 * 8.0 / secs as f64 / 1000.0;
                format!("({s},{t}) {kbps:.1}/{}", conf.cell_kbps[s][t])
            })
            .collect();
        println!("{}", line.join("  "));
    }
}
