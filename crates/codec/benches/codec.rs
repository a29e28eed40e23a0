//! Encoder/decoder speed and per-layer rate accuracy.
//!
//! * `encode_720p30_l3t3_1thread`: one picture (all 3 spatial layers) per iteration, speed 8.
//! * `decode_720p_full`: one full access unit per iteration (all 9 layers kept).
//! * Rate accuracy (printed, not timed): 10 s of the synthetic clip, measured bytes per cell
//!   against the configured per-cell target.
#![allow(clippy::needless_range_loop)] // (s, t) grid indexing
use codec::synth;
use codec::vpx::{Decoder, EncodedPicture, SvcConfig, SvcEncoder};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn clip(n: u32) -> Vec<Vec<u8>> {
    (0..n).map(|i| synth::frame(1280, 720, i)).collect()
}

fn encode_all(conf: &SvcConfig, frames: &[Vec<u8>], count: usize) -> Vec<EncodedPicture> {
    let mut enc = SvcEncoder::new(conf.clone()).unwrap();
    (0..count)
        .map(|i| {
            enc.encode(&frames[i % frames.len()], i as i64 * 3000)
                .unwrap()
                .unwrap()
        })
        .collect()
}

fn bench_encode(c: &mut Criterion) {
    let frames = clip(60);
    let mut g = c.benchmark_group("encode");
    g.throughput(Throughput::Elements(1));
    g.sample_size(20);
    for speed in [8, 9] {
        let mut conf = SvcConfig::l3t3_720p();
        conf.speed = speed;
        let mut enc = SvcEncoder::new(conf).unwrap();
        let mut i = 0usize;
        g.bench_function(format!("720p30_l3t3_1thread_speed{speed}"), |b| {
            b.iter(|| {
                let p = enc
                    .encode(&frames[i % frames.len()], i as i64 * 3000)
                    .unwrap();
                i += 1;
                p
            })
        });
    }
    g.finish();
}

fn bench_decode(c: &mut Criterion) {
    let frames = clip(60);
    let pics = encode_all(&SvcConfig::l3t3_720p(), &frames, 60);
    let aus: Vec<Vec<u8>> = pics
        .iter()
        .map(|p| {
            let refs: Vec<&[u8]> = p.frames.iter().map(|f| &f.data[..]).collect();
            let mut v = Vec::new();
            codec::superframe::build(&refs, &mut v).unwrap();
            v
        })
        .collect();
    let mut g = c.benchmark_group("decode");
    g.throughput(Throughput::Elements(aus.len() as u64));
    g.sample_size(10);
    g.bench_function("720p_full_60_pictures_1thread", |b| {
        b.iter(|| {
            let mut d = Decoder::new(1).unwrap();
            for au in &aus {
                d.decode(au).unwrap();
            }
        })
    });
    g.finish();
}

/// CPU time of this thread in ns (Linux `schedstat`), so speed can be read even on a loaded
/// machine where wall-clock criterion figures understate it.
fn thread_cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// Not a timing: measured rate per cell over 10 s against the configured target, plus encode
/// and decode speed by thread CPU time.
fn rate_report(_c: &mut Criterion) {
    let conf = SvcConfig::l3t3_720p();
    let frames = clip(90);
    let c0 = thread_cpu_ns();
    let pics = encode_all(&conf, &frames, 300);
    let c1 = thread_cpu_ns();
    let mut d = Decoder::new(1).unwrap();
    for p in &pics {
        let refs: Vec<&[u8]> = p.frames.iter().map(|f| &f.data[..]).collect();
        d.decode_layers(&refs).unwrap();
    }
    let c2 = thread_cpu_ns();
    if let (Some(a), Some(b), Some(e)) = (c0, c1, c2) {
        println!(
            "by thread CPU time: encode {:.1} fps, decode (all layers) {:.1} fps (720p L3T3, 1 thread)",
            300.0 / ((b - a) as f64 / 1e9),
            300.0 / ((e - b) as f64 / 1e9)
        );
    }
    let mut bytes = [[0u64; 3]; 3];
    for p in &pics {
        for f in &p.frames {
            bytes[f.spatial as usize][f.temporal as usize] += f.data.len() as u64;
        }
    }
    let secs = pics.len() as f64 / 30.0;
    println!("per-cell rate over {secs:.0} s (kbit/s measured / target):");
    for s in 0..3 {
        for t in 0..3 {
            let kbps = bytes[s][t] as f64 * 8.0 / secs / 1000.0;
            let target = conf.cell_kbps[s][t] as f64;
            println!(
                "  cell ({s},{t}): {kbps:7.1} / {target:6.1}  ({:+.1} %)",
                (kbps / target - 1.0) * 100.0
            );
        }
        let sl: f64 = (0..3).map(|t| bytes[s][t] as f64).sum::<f64>() * 8.0 / secs / 1000.0;
        let target: f64 = conf.cell_kbps[s].iter().map(|&r| r as f64).sum();
        println!(
            "  spatial {s}: {sl:7.1} / {target:6.1}  ({:+.1} %)",
            (sl / target - 1.0) * 100.0
        );
    }
}

criterion_group!(benches, bench_encode, bench_decode, rate_report);
criterion_main!(benches);
