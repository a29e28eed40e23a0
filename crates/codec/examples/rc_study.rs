//! Rate-control study on natural content: per (spatial, temporal) cell, the measured rate
//! against its budget, the frame-size spread, the key-picture size and the drops, over a
//! looped 720p clip (docs/codec.md "Rate control").
//!
//! `cargo run --release -p layercast-codec --example rc_study -- [key=value ...]` with keys
//! `yuv` (raw I420 1280x720, default .cache/media/bbb-1280x720.yuv, made by scripts/setup.sh),
//! `loops` (3), `cells` ("s0t0,s0t1;s1t0,...", kbit/s increments; default the server's
//! 720p30 L3T2 ladder, `SvcConfig::l3t2_720p`; three per row for L3T3), `buf` (initial,optimal,size ms), `drop` (threshold %, 0 = off), `mode`
//! (layer|constrained), `intra` (max intra %), `speed`, `ki` (key interval, frames),
//! `payload` (bytes per packet for the packet counts, default 1156), `src=synth` (the
//! synthetic test pattern of `codec::synth` instead of the clip, the quality test's source) with
//! `size` (WxH of the clip or the pattern, default 1280x720), `fps` (default 30) and `scale`
//! (multiplies every cell, like
//! the server's `video.kbps_scale`), and `track=0` (no per-cell tracking,
//! `SvcConfig::track_cells`), and `jitter` (ms: each picture's timestamp moved by a
//! pseudo-random amount within +-jitter, as a live capture clock does).
use codec::vpx::{DropMode, SvcConfig, SvcEncoder};

fn main() {
    let args: Vec<(String, String)> = std::env::args()
        .skip(1)
        .filter_map(|a| {
            a.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    let get = |k: &str| args.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
    let mut conf = SvcConfig::l3t2_720p();
    if let Some(c) = get("cells") {
        conf.cell_kbps = c
            .split(';')
            .map(|r| r.split(',').map(|x| x.trim().parse().unwrap()).collect())
            .collect();
        conf.temporal_layers = conf.cell_kbps[0].len();
    }
    if let Some(b) = get("buf") {
        let v: Vec<u32> = b.split(',').map(|x| x.parse().unwrap()).collect();
        (
            conf.rc_buf_initial_ms,
            conf.rc_buf_optimal_ms,
            conf.rc_buf_ms,
        ) = (v[0], v[1], v[2]);
    }
    if let Some(d) = get("drop") {
        conf.drop_thresh = d.parse().unwrap();
    }
    conf.drop_mode = match get("mode").unwrap_or("layer") {
        "constrained" => DropMode::Constrained,
        _ => DropMode::Layer,
    };
    if let Some(i) = get("intra") {
        conf.max_intra_pct = i.parse().unwrap();
    }
    if let Some(sz) = get("size") {
        let (w, h) = sz.split_once('x').unwrap();
        (conf.width, conf.height) = (w.parse().unwrap(), h.parse().unwrap());
    }
    let fps: usize = get("fps").map_or(30, |f| f.parse().unwrap());
    conf.fps_num = fps as u32;
    if let Some(k) = get("scale") {
        let k: f64 = k.parse().unwrap();
        for c in conf.cell_kbps.iter_mut().flatten() {
            *c = ((*c as f64 * k).round() as u32).max(1);
        }
    }
    let jitter_ms: f64 = get("jitter").map_or(0.0, |j| j.parse().unwrap());
    let synth = get("src") == Some("synth");
    conf.track_cells = get("track") != Some("0");
    if let Some(s) = get("speed") {
        conf.speed = s.parse().unwrap();
    }
    // The server's default: a key picture every 2 s.
    conf.keyframe_interval = get("ki").map_or(2 * fps as u32, |k| k.parse().unwrap());
    conf.spatial_sync_interval = 0;
    let payload: f64 = get("payload").map_or(1156.0, |p| p.parse().unwrap());
    let loops: usize = get("loops").map_or(3, |l| l.parse().unwrap());
    let path = get("yuv")
        .unwrap_or(".cache/media/bbb-1280x720.yuv")
        .to_string();
    let raw = if synth {
        Vec::new()
    } else {
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    };
    let fl = codec::vpx::encoder_i420_len(conf.width, conf.height);
    assert!(
        synth || (!raw.is_empty() && raw.len() % fl == 0),
        "{path} is not raw I420 frames of {}x{} (`size`)",
        conf.width,
        conf.height
    );
    let frames: Vec<&[u8]> = raw.chunks_exact(fl).collect();
    let n = if synth {
        132 * loops
    } else {
        frames.len() * loops
    };
    let mut lcg: u64 = 0x9e37_79b9_7f4a_7c15;
    let (ns, nt) = (conf.spatial_layers, conf.temporal_layers);
    let mut sizes = vec![vec![Vec::<usize>::new(); nt]; ns];
    let mut keys = vec![Vec::<usize>::new(); ns];
    let mut dropped = vec![vec![0u32; nt]; ns];
    let mut none = 0;
    let mut off_pattern = 0;
    let mut per_sec = vec![vec![vec![0u64; n / fps + 1]; nt]; ns];
    let mut enc = SvcEncoder::new(conf.clone()).unwrap();
    let cpu = || -> u64 {
        std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    let c0 = cpu();
    for i in 0..n {
        lcg = lcg
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let dj = ((lcg >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0) * jitter_ms * 90.0;
        let pts = (i * 90_000 / fps) as i64 + dj as i64;
        let sf;
        let src = if synth {
            sf = codec::synth::frame(conf.width, conf.height, i as u32);
            &sf[..]
        } else {
            frames[i % frames.len()]
        };
        let Some(p) = enc.encode(src, pts).unwrap() else {
            none += 1;
            continue;
        };
        let t = p.temporal as usize;
        if nt == 3 && t != [0, 2, 1, 2][i % 4] {
            off_pattern += 1;
        }
        for s in 0..ns {
            match p.frames.iter().find(|f| f.spatial as usize == s) {
                Some(f) if p.dropped_mask >> s & 1 == 0 => {
                    if p.key {
                        keys[s].push(f.data.len());
                    } else {
                        sizes[s][t].push(f.data.len());
                    }
                    per_sec[s][t][i / fps] += f.data.len() as u64;
                }
                _ => dropped[s][t] += 1,
            }
        }
    }
    let cpu_s = (cpu() - c0) as f64 / 1e9;
    println!(
        "{path}: {n} frames ({loops} loops), {:.1} fps by CPU time; buf {}/{}/{} ms, drop {} ({:?}), intra {} %, key every {} frames; {none} pictures with no output, {off_pattern} off the 0212 pattern",
        n as f64 / cpu_s,
        conf.rc_buf_initial_ms,
        conf.rc_buf_optimal_ms,
        conf.rc_buf_ms,
        conf.drop_thresh,
        conf.drop_mode,
        conf.max_intra_pct,
        conf.keyframe_interval
    );
    let secs = n as f64 / fps as f64;
    let mut rows = Vec::new();
    let q = |v: &mut Vec<usize>, p: f64| {
        v.sort_unstable();
        v.get(((v.len().max(1) - 1) as f64 * p) as usize)
            .copied()
            .unwrap_or(0)
    };
    for s in 0..ns {
        for t in 0..nt {
            let tot: usize =
                sizes[s][t].iter().sum::<usize>() + if t == 0 { keys[s].iter().sum() } else { 0 };
            let kbps = tot as f64 * 8.0 / secs / 1000.0;
            let target = conf.cell_kbps[s][t] as f64;
            let full: Vec<u64> = per_sec[s][t][..(n / fps).max(1)].to_vec();
            let worst = full
                .iter()
                .map(|&b| b as f64 * 8.0 / 1000.0 / target)
                .fold(0.0, f64::max);
            let v = &mut sizes[s][t];
            let mean = v.iter().sum::<usize>() as f64 / v.len().max(1) as f64;
            rows.push(format!(
                "({s},{t}) {:.0} % (worst 1 s {:.0} %, {} dropped)",
                100.0 * kbps / target,
                100.0 * worst,
                dropped[s][t]
            ));
            println!(
                "({s},{t}) {kbps:7.1}/{target:5.0} kbit/s = {:5.1} % | worst 1-s {:5.1} % | frame mean {:6.0} B = {:4.1} pkts, p95 {:6} max {:6} | keys {:?} B | dropped {}",
                100.0 * kbps / target,
                100.0 * worst,
                mean,
                mean / payload,
                q(v, 0.95),
                q(v, 1.0),
                if t == 0 { keys[s].clone() } else { vec![] },
                dropped[s][t]
            );
        }
    }
    // The default configuration only (no key=value other than loops): the acceptance row.
    if args.iter().all(|(k, _)| k == "loops") {
        testkit::record(
            "issue19/layer-overshoot",
            &format!(
                "BBB 720p30 looped {secs:.0} s, default ladder and rate control, key every {} frames; per cell rate / budget: {}",
                conf.keyframe_interval,
                rows.join(", ")
            ),
            None,
            "make bench-ladder (cargo run --release -p layercast-codec --example rc_study loops=7)",
        );
    }
}
