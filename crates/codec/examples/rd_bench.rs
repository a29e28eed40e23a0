//! Rate-quality of the layered stream against one plain stream, per ladder point (issue 19):
//!
//! `cargo run --release -p layercast-codec --example rd_bench` (behind `make bench-ladder`).
//! Source: the Big Buck Bunny clip as raw 720p I420 (`.cache/media/bbb-1280x720.yuv`, made by
//! scripts/setup.sh), `LOOPS` times at 30 fps.
//!
//! * Layered: the server's default ladder (720p30 L3T2, `SvcConfig::l3t2_720p`) scaled by each of [`SCALES`]; for each point (a prefix
//!   of layers whose shown pictures have one size and rate: 180p15, 180p30, 360p15, 360p30,
//!   720p15, 720p30) the rate of every frame the prefix holds and the PSNR / SSIM of its
//!   shown pictures at their size.
//! * Plain: libvpx VP9 realtime without SVC, at the point's size (the clip scaled by ffmpeg's
//!   Lanczos filter, close to libvpx's own down-scaler the layered encode uses) and frame
//!   rate, at four rates from 0.3x the layered prefix's lowest to its highest (so that the
//!   plain curve covers the layered stream's quality range), the speed the layered encode
//!   spends on that size, the same key period (2 s), error resilience and rate control.
//! * Bjøntegaard delta rate (cubic fit of log rate over quality, over the overlapping range)
//!   of layered against plain, per point, on PSNR and on SSIM: how much more rate the layered
//!   stream needs for the same quality. Target: at most 30 % at every point.
//! * Encode speed: the default ladder with packetization and FEC (`codec::fec`), 600-byte
//!   packets, by the thread's CPU time: target at least 1.2x real time (36 fps).
//!
//! The prefix of a point is the shortest one of the server's layer order (size-first,
//! `codec::ladder::LayerOrder`) that shows it; that order has no 180p30 point.
//!
//! Knobs for studies (no acceptance row then): `CELLS` ("s0t0,s0t1,s0t2;s1t0,...", kbit/s per
//! cell), `TEMPORAL=3` (the L3T3 ladder), `ORDER=spatial-major`, `TRACK=0` (`SvcConfig::track_cells` off), `LOWER_SPEED`,
//! `PLAIN_DROP`.
//!
//! Quality reference: the source box-scaled to the decoded size (docs/codec.md "PSNR
//! reference"), the same for both streams.
use codec::fec::{FecEncoder, FecParams};
use codec::ladder::{LayerLadder, LayerOrder};
use codec::synth;
use codec::vp9rtp::{LayerStreams, StreamConfig};
use codec::vpx::{Decoder, EncodedPicture, SvcConfig, SvcEncoder};

const SCALES: [f64; 4] = [0.6, 0.8, 1.0, 1.3];
/// Key picture period of both streams, seconds (the server's `video.keyframe_interval_s`).
const KEY_SECONDS: u32 = 2;
const COMMAND: &str =
    "cargo run --release -p layercast-codec --example rd_bench (make bench-ladder)";

/// A ladder point: the spatial layer its shown pictures reach and its frame-rate divisor
/// (shown pictures: every `step`-th). Its prefix is the shortest one that shows it
/// ([`prefix_of`]); an order may have none (size-first has no 180p30 point).
struct Point {
    spatial: usize,
    step: usize,
    name: &'static str,
}

const POINTS: [Point; 6] = [
    Point {
        spatial: 0,
        step: 2,
        name: "180p15",
    },
    Point {
        spatial: 0,
        step: 1,
        name: "180p30",
    },
    Point {
        spatial: 1,
        step: 2,
        name: "360p15",
    },
    Point {
        spatial: 1,
        step: 1,
        name: "360p30",
    },
    Point {
        spatial: 2,
        step: 2,
        name: "720p15",
    },
    Point {
        spatial: 2,
        step: 1,
        name: "720p30",
    },
];

/// The shortest prefix 0..=k of `ladder` whose viewer is shown `pt`: it holds `pt.spatial` at
/// the temporal layers of the point's rate, and that spatial layer is its steady one
/// ([`LayerLadder::steady_spatial`], what the player shows).
fn prefix_of(ladder: &LayerLadder, pt: &Point) -> Option<usize> {
    let nt = ladder.temporal_layers();
    let need = if pt.step == 1 {
        nt - 1
    } else {
        nt.saturating_sub(2)
    };
    let k = (0..ladder.len()).find(|&k| {
        ladder
            .max_temporal(k, pt.spatial as u8)
            .is_some_and(|t| t >= need)
    })?;
    (usize::from(ladder.steady_spatial(k)) == pt.spatial).then_some(k)
}

/// The clip scaled to `w`x`h` for the plain encoder, by ffmpeg's Lanczos scaler (sharp like
/// libvpx's own 8-tap down-scaler, which the layered encoder uses; neither is the box filter
/// of the quality reference). Cached beside the clip.
fn plain_input(clip: &str, w: u32, h: u32, _n: usize) -> Vec<u8> {
    if (w, h) == (1280, 720) {
        return std::fs::read(clip).unwrap();
    }
    let out = format!("{}-{w}x{h}-lanczos.yuv", clip.trim_end_matches(".yuv"));
    if !std::path::Path::new(&out).exists() {
        let st = std::process::Command::new("ffmpeg")
            .args([
                "-v", "error", "-y", "-f", "rawvideo", "-pix_fmt", "yuv420p", "-s", "1280x720",
                "-i", clip,
            ])
            .args([
                "-vf",
                &format!("scale={w}:{h}:flags=lanczos"),
                "-f",
                "rawvideo",
                &out,
            ])
            .status()
            .expect("ffmpeg");
        assert!(st.success(), "ffmpeg scaling to {w}x{h}");
    }
    std::fs::read(&out).unwrap()
}

fn cpu_ns() -> u64 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// (kbit/s, mean PSNR dB, mean SSIM) of decoded pictures against `refs` (per frame index).
fn quality(
    decoded: &[(usize, Vec<u8>)],
    refs: &dyn Fn(usize) -> Vec<u8>,
    w: u32,
    h: u32,
    bits: f64,
    secs: f64,
) -> (f64, f64, f64) {
    let (mut p, mut s) = (0.0, 0.0);
    for (i, y) in decoded {
        let r = refs(*i);
        p += synth::psnr(&r, y);
        s += synth::ssim_luma(&r, y, w, h);
    }
    let n = decoded.len().max(1) as f64;
    (bits / secs / 1e3, p / n, s / n)
}

/// Bjøntegaard delta rate (%) of curve `a` against `b`, points (kbit/s, quality).
fn bd_rate(a: &[(f64, f64)], b: &[(f64, f64)]) -> f64 {
    let fit = |c: &[(f64, f64)]| -> Option<[f64; 4]> {
        // log10(rate) = p0 + p1 q + p2 q^2 + p3 q^3 through the 4 points (Gaussian elimination).
        let mut m: Vec<[f64; 5]> = c
            .iter()
            .map(|&(r, q)| [1.0, q, q * q, q * q * q, r.log10()])
            .collect();
        for i in 0..4 {
            let piv = (i..4).max_by(|&x, &y| m[x][i].abs().total_cmp(&m[y][i].abs()))?;
            m.swap(i, piv);
            if m[i][i].abs() < 1e-12 {
                return None;
            }
            let pivot = m[i];
            for (j, row) in m.iter_mut().enumerate() {
                if j != i {
                    let f = row[i] / pivot[i];
                    for (v, p) in row.iter_mut().zip(pivot).skip(i) {
                        *v -= f * p;
                    }
                }
            }
        }
        Some([
            m[0][4] / m[0][0],
            m[1][4] / m[1][1],
            m[2][4] / m[2][2],
            m[3][4] / m[3][3],
        ])
    };
    let (Some(pa), Some(pb)) = (fit(a), fit(b)) else {
        return f64::NAN;
    };
    let (amin, amax) = a
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(x.1), h.max(x.1)));
    let (bmin, bmax) = b
        .iter()
        .fold((f64::MAX, f64::MIN), |(l, h), x| (l.min(x.1), h.max(x.1)));
    let (q0, q1) = (amin.max(bmin), amax.min(bmax));
    if q1 <= q0 {
        return f64::NAN;
    }
    let int = |p: &[f64; 4], q: f64| {
        p[0] * q + p[1] * q * q / 2.0 + p[2] * q.powi(3) / 3.0 + p[3] * q.powi(4) / 4.0
    };
    let avg = |p: &[f64; 4]| (int(p, q1) - int(p, q0)) / (q1 - q0);
    (10f64.powf(avg(&pa) - avg(&pb)) - 1.0) * 100.0
}

fn main() {
    let loops: usize = std::env::var("LOOPS")
        .ok()
        .and_then(|l| l.parse().ok())
        .unwrap_or(2);
    let path = std::env::var("YUV").unwrap_or_else(|_| ".cache/media/bbb-1280x720.yuv".into());
    let Ok(raw) = std::fs::read(&path) else {
        eprintln!("SKIPPED: {path} missing (scripts/setup.sh makes it from the clip)");
        return;
    };
    let fl = synth::i420_len(1280, 720);
    let clip: Vec<&[u8]> = raw.chunks_exact(fl).collect();
    let n = clip.len() * loops;
    let frame = |i: usize| clip[i % clip.len()];
    let secs = n as f64 / 30.0;
    // What the server sends (server/src/video.rs `svc_config`, docs/server.md): a key picture
    // every 2 s and no periodic spatial re-sync. Both streams key every 2 s of their own frame
    // rate, same speed, error resilience, aq-mode and rate-control buffer (docs/codec.md
    // "Rate-quality against one plain stream", "Fairness").
    let mut base = SvcConfig::l3t2_720p();
    base.keyframe_interval = KEY_SECONDS * 30;
    base.spatial_sync_interval = 0;
    // CELLS="s0t0,s0t1,s0t2;s1t0,...": another ladder (kbit/s per cell) to measure.
    if let Ok(c) = std::env::var("CELLS") {
        base.cell_kbps = c
            .split(';')
            .map(|r| r.split(',').map(|x| x.trim().parse().unwrap()).collect())
            .collect();
    }
    // TEMPORAL=3 (or 1): another temporal layer count with its default cells
    // (`codec::ladder::default_cell_kbps`), unless CELLS sets the cells.
    if let Some(nt) = std::env::var("TEMPORAL").ok().and_then(|v| v.parse().ok()) {
        base.temporal_layers = nt;
        if std::env::var("CELLS").is_err() {
            base.cell_kbps = codec::ladder::default_cell_kbps(3, nt, 1.0);
        }
    }
    // ORDER=spatial-major: the other layer order (default: the server's, size-first).
    let order = match std::env::var("ORDER") {
        Ok(o) => LayerOrder::parse(&o).expect("ORDER: size-first or spatial-major"),
        Err(_) => LayerOrder::default(),
    };
    // TRACK=0: without the per-cell target tracking (`SvcConfig::track_cells`).
    base.track_cells = std::env::var("TRACK").as_deref() != Ok("0");
    // The acceptance rows are the defaults' only.
    let defaults = std::env::var("CELLS").is_err()
        && std::env::var("ORDER").is_err()
        && std::env::var("TEMPORAL").is_err()
        && base.track_cells;
    if let Some(v) = std::env::var("LOWER_SPEED")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        base.lower_speed = v;
    }
    let sizes: Vec<(u32, u32)> = (0..3).map(|s| base.layer_size(s)).collect();
    let refs = |s: usize| {
        let (w, h) = sizes[s];
        move |i: usize| synth::scale_i420(frame(i), 1280, 720, w, h)
    };
    // Layered: per scale, per point, (kbit/s, PSNR, SSIM).
    let mut layered = vec![vec![(0.0, 0.0, 0.0); POINTS.len()]; SCALES.len()];
    let mut speed = None;
    for (si, &scale) in SCALES.iter().enumerate() {
        let mut conf = base.clone();
        conf.cell_kbps = base
            .cell_kbps
            .iter()
            .map(|r| {
                r.iter()
                    .map(|&c| (c as f64 * scale).round() as u32)
                    .collect()
            })
            .collect();
        let mut enc = SvcEncoder::new(conf.clone()).unwrap();
        // At the default ladder: the sender's per-picture work (encode, RTP, FEC) timed.
        let timed = scale == 1.0;
        let ladder = LayerLadder::ordered(&conf.cell_kbps, order).unwrap();
        let prefixes: Vec<Option<usize>> = POINTS.iter().map(|pt| prefix_of(&ladder, pt)).collect();
        let res = sizes.iter().map(|&(w, h)| (w as u16, h as u16)).collect();
        let mut ls = LayerStreams::new(
            ladder.clone(),
            res,
            StreamConfig {
                mtu: 600,
                ext_reserve: 32,
                ..Default::default()
            },
        )
        .unwrap();
        let mut fec: Vec<FecEncoder> = (0..9)
            .map(|_| FecEncoder::new(FecParams::default(), 600 - 28).unwrap())
            .collect();
        let mut seqs = [0u16; 9];
        let mut pics: Vec<EncodedPicture> = Vec::with_capacity(n);
        let c0 = cpu_ns();
        for i in 0..n {
            let p = enc.encode(frame(i), i as i64 * 3000).unwrap().unwrap();
            if timed {
                for (k, pkts) in ls.packets(&p).unwrap().iter().enumerate() {
                    for (j, lp) in pkts.iter().enumerate() {
                        fec[k].push_media(seqs[k], &lp.header, &lp.payload);
                        seqs[k] = seqs[k].wrapping_add(1);
                        if j % 4 == 3 {
                            std::hint::black_box(fec[k].repair());
                            seqs[k] = seqs[k].wrapping_add(1);
                        }
                    }
                }
            }
            pics.push(p);
        }
        if timed {
            speed = Some(n as f64 / ((cpu_ns() - c0) as f64 / 1e9));
        }
        for (pi, pt) in POINTS.iter().enumerate() {
            let Some(k) = prefixes[pi] else {
                continue;
            };
            let mut dec = Decoder::new(1).unwrap();
            let mut bits = 0.0;
            let mut shown = Vec::new();
            for (i, p) in pics.iter().enumerate() {
                let kept: Vec<&[u8]> = p
                    .frames
                    .iter()
                    .filter(|f| ladder.keeps(k, f.spatial, f.temporal))
                    .map(|f| f.data.as_slice())
                    .collect();
                if kept.is_empty() {
                    continue;
                }
                bits += 8.0 * kept.iter().map(|f| f.len()).sum::<usize>() as f64;
                let d = dec.decode_layers(&kept).unwrap().unwrap();
                if i % pt.step == 0 && d.width == sizes[pt.spatial].0 {
                    shown.push((i, d.i420));
                }
            }
            let (w, h) = sizes[pt.spatial];
            layered[si][pi] = quality(&shown, &refs(pt.spatial), w, h, bits, secs);
        }
    }
    println!("BBB 720p30, {n} frames ({loops} loops); layered ladder scales {SCALES:?}");
    let mut worst: f64 = f64::MIN;
    let mut rows = Vec::new();
    let ladder = LayerLadder::ordered(&base.cell_kbps, order).unwrap();
    println!("layer order: {}", order.name());
    for (pi, pt) in POINTS.iter().enumerate() {
        let Some(k) = prefix_of(&ladder, pt) else {
            println!(
                "{}: no prefix of the {} ladder shows it",
                pt.name,
                order.name()
            );
            continue;
        };
        let (w, h) = sizes[pt.spatial];
        let small = plain_input(&path, w, h, n);
        // Plain rates from 0.3x the layered stream's lowest to its highest, geometrically: the
        // plain curve must reach down to the layered stream's quality for the BD integral.
        let (lo, hi) = (0.3 * layered[0][pi].0, layered[SCALES.len() - 1][pi].0);
        let mut plain = Vec::new();
        for j in 0..4 {
            let kbps = lo * (hi / lo).powf(j as f64 / 3.0);
            let mut conf = base.clone();
            (conf.width, conf.height) = (w, h);
            conf.spatial_layers = 1;
            conf.temporal_layers = 1;
            conf.scales = vec![(1, 1)];
            // The speed the layered encode spends on pictures of this size.
            conf.speed = base.layer_speed(pt.spatial);
            conf.fps_num = 30 / pt.step as u32;
            conf.keyframe_interval = KEY_SECONDS * conf.fps_num;
            conf.cell_kbps = vec![vec![kbps.round().max(1.0) as u32]];
            // libvpx's SVC frame dropping misjudges a single-layer stream (it dropped most
            // frames at every rate); one plain stream needs none at its own rate.
            conf.drop_thresh = std::env::var("PLAIN_DROP")
                .ok()
                .and_then(|d| d.parse().ok())
                .unwrap_or(0);
            let mut enc = SvcEncoder::new(conf).unwrap();
            let mut dec = Decoder::new(1).unwrap();
            let (mut bits, mut shown) = (0.0, Vec::new());
            for (j, i) in (0..n).step_by(pt.step).enumerate() {
                let sl = synth::i420_len(w, h);
                let src = &small[(i % (small.len() / sl)) * sl..][..sl];
                let p = enc
                    .encode(src, j as i64 * 3000 * pt.step as i64)
                    .unwrap()
                    .unwrap();
                let f: Vec<&[u8]> = p.frames.iter().map(|f| f.data.as_slice()).collect();
                bits += 8.0 * f.iter().map(|x| x.len()).sum::<usize>() as f64;
                shown.push((i, dec.decode_layers(&f).unwrap().unwrap().i420));
            }
            plain.push(quality(&shown, &refs(pt.spatial), w, h, bits, secs));
        }
        let curve = |v: &[(f64, f64, f64)], ssim: bool| -> Vec<(f64, f64)> {
            v.iter()
                .map(|x| (x.0, if ssim { x.2 } else { x.1 }))
                .collect()
        };
        let lay: Vec<(f64, f64, f64)> = layered.iter().map(|r| r[pi]).collect();
        let bd_psnr = bd_rate(&curve(&lay, false), &curve(&plain, false));
        let bd_ssim = bd_rate(&curve(&lay, true), &curve(&plain, true));
        worst = worst.max(bd_psnr.max(bd_ssim));
        let fmt = |v: &[(f64, f64, f64)]| {
            v.iter()
                .map(|x| format!("{:.0} kbit/s {:.2} dB {:.4}", x.0, x.1, x.2))
                .collect::<Vec<_>>()
                .join("; ")
        };
        println!(
            "{} (k={k}) {w}x{h}: BD-rate PSNR {bd_psnr:+.1} %, SSIM {bd_ssim:+.1} %",
            pt.name
        );
        println!("   layered: {}", fmt(&lay));
        println!("   plain:   {}", fmt(&plain));
        rows.push(format!(
            "{} (k={k}) {bd_psnr:+.0} % / {bd_ssim:+.0} % (default ladder: {:.0} kbit/s, {:.1} dB)",
            pt.name, lay[2].0, lay[2].1
        ));
    }
    let fps = speed.unwrap_or(0.0);
    println!(
        "encode + RTP + FEC, 720p30 L3T{}, one thread: {fps:.1} fps by CPU time = {:.2}x real time",
        base.temporal_layers,
        fps / 30.0
    );
    if !defaults {
        return;
    }
    testkit::record(
        "issue19/bd-rate",
        &format!(
            "layered ({} order) vs one plain VP9 stream at the same rate, BD-rate PSNR / SSIM, BBB 720p30 {secs:.1} s: {}",
            order.name(),
            rows.join("; ")
        ),
        Some(worst.is_finite() && worst <= 30.0),
        COMMAND,
    );
    testkit::record(
        "issue19/encode-fec-speed",
        &format!(
            "{fps:.1} fps = {:.2}x real time: encode 720p30 L3T{} (cpu-used {:?}, one thread) + RTP + FEC, BBB, thread CPU time",
            fps / 30.0,
            base.temporal_layers,
            (0..3).map(|s| base.layer_speed(s)).collect::<Vec<_>>()
        ),
        Some(fps >= 36.0),
        COMMAND,
    );
}
