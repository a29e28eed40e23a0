//! Trace-driven study of pacing policies (`cargo test --release -p layercast-server
//! latency_study -- --ignored --nocapture`): encodes the latency bench's source (QR-stamped
//! test pattern) with the real encoder and packetizer, then replays the per-layer packet
//! counts through the pacer's `next_bunch` in virtual time.

use super::*;
use congestion::Time;
use session::publisher::burst::next_bunch;
use std::collections::VecDeque;

struct Pic {
    key: bool,
    sync: u8,
    pkts: Vec<usize>,
}

fn trace(v: &ResolvedVideo, packet_size: u16, secs: u32, intra: u32) -> Vec<Pic> {
    let mut conf = svc_config(v);
    conf.max_intra_pct = intra;
    // S_KEYQ=q: the quantizer floor of the middle layers' frames of key pictures and re-syncs.
    conf.key_mid_min_q = env("S_KEYQ", conf.key_mid_min_q as f64) as u32;
    // S_BUF=initial:optimal:size (ms): the encoder's rate-control buffer.
    if let Ok(b) = std::env::var("S_BUF") {
        let v: Vec<u32> = b.split(':').map(|x| x.parse().unwrap()).collect();
        crate::fill_study::set_rc_buffers(&mut conf, &v);
    }
    // S_YUV=path: raw I420 frames of the video's size (looped) instead of the test pattern.
    let clip = std::env::var("S_YUV")
        .ok()
        .map(|p| std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}")));
    let fl = codec::vpx::encoder_i420_len(v.width, v.height);
    let mut streams = layer_streams(&conf, v.order, 0, packet_size, 16).unwrap();
    let mut enc = SvcEncoder::new(conf).unwrap();
    let mut st = Stamper::new(v.width, v.height, v.fps, qr_pixel_size(v.spatial)).unwrap();
    let mut out = Vec::new();
    // S_PSNR=1: every picture decoded with all its layers, Y PSNR against the encoder's input
    // (printed as a mean, and the mean of the key pictures and the 8 after them).
    let mut dec = std::env::var("S_PSNR")
        .is_ok()
        .then(|| codec::vpx::Decoder::new(1).unwrap());
    let (mut psnr_all, mut psnr_key, mut since_key) = (Vec::new(), Vec::new(), 99u32);
    // S_LOOPJIT=1: the capture-time pattern of the testbed's looped 25-fps clip at 30 fps (a
    // 24-ms gap at each loop point, a 67-ms gap two pictures later), else a regular clock.
    let loopjit = std::env::var("S_LOOPJIT").is_ok();
    let mut t_ms = 0.0f64;
    for i in 0..(secs * v.fps) as u64 {
        let pts_ms = t_ms;
        let p = i % 158;
        t_ms += match (loopjit, p) {
            (true, 0) if i > 0 => 24.0,
            (true, 2) if i > 2 => 67.0,
            _ => 1000.0 / v.fps as f64,
        };
        let synth_frame;
        let src = match &clip {
            Some(c) => {
                let n = c.len() / fl;
                &c[(i as usize % n) * fl..][..fl]
            }
            None => {
                synth_frame = synth::frame(v.width, v.height, i as u32);
                &synth_frame[..]
            }
        };
        let f = st
            .stamp(src, i, 1_700_000_000_000_000_000 + i * 66_666_666)
            .unwrap();
        let pic = enc.encode(&f, (pts_ms * 90.0) as i64).unwrap().unwrap();
        let key = pic.key;
        if let Some(d) = dec.as_mut() {
            let frames: Vec<&[u8]> = pic.frames.iter().map(|f| &f.data[..]).collect();
            if let Some(img) = d.decode_layers(&frames).unwrap() {
                let ylen = (v.width * v.height) as usize;
                if img.width == v.width {
                    let p = synth::psnr(&img.i420[..ylen], &f[..ylen]);
                    since_key = if key { 0 } else { since_key + 1 };
                    psnr_all.push(p);
                    if since_key <= 8 {
                        psnr_key.push(p);
                    }
                }
            }
        }
        let per = streams.packets(&pic).unwrap();
        out.push(Pic {
            key,
            sync: pic.sync_mask,
            pkts: per.iter().map(Vec::len).collect(),
        });
    }
    if !psnr_all.is_empty() {
        let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len().max(1) as f64;
        let min = psnr_all.iter().copied().fold(f64::MAX, f64::min);
        eprintln!(
            "    Y PSNR all layers: mean {:.2} dB, min {min:.2} dB; key pictures and the 8 after: {:.2} dB",
            mean(&psnr_all),
            mean(&psnr_key)
        );
    }
    out
}

/// The sender's frame discarding (`max_discardable_wait`) in the study: a top-temporal
/// (t = 2) frame whose wait, its own packets included, would exceed `tl2` is not queued; with
/// `tl1`, a TL1 frame past that wait is not queued either, nor are the frames that predict
/// from it (the same picture's higher spatial layers, the next picture's TL2 frames).
struct Discard {
    tl2: Option<Duration>,
    tl1: Option<Duration>,
    /// Per spatial layer: the TL1 frame of this picture index was dropped.
    dropped_tl1: std::cell::RefCell<Vec<Option<usize>>>,
    count: std::cell::Cell<usize>,
}

impl Discard {
    #[allow(clippy::too_many_arguments)]
    fn drops(
        &self,
        pic: usize,
        k: usize,
        key: bool,
        c: usize,
        queued: usize,
        bunch: usize,
        iv: Duration,
    ) -> bool {
        let (s, t) = (k / 3, k % 3);
        let wait = iv.saturating_mul((queued + c).div_ceil(bunch) as u32);
        let mut d1 = self.dropped_tl1.borrow_mut();
        let below = |d1: &[Option<usize>], p: usize| (0..=s).any(|x| d1[x] == Some(p));
        let drop = !key
            && match t {
                2 => {
                    self.tl2.is_some_and(|m| wait > m)
                        || (pic > 0 && below(&d1, pic - 1) && pic % 4 == 3)
                }
                1 => below(&d1, pic) || self.tl1.is_some_and(|m| wait > m),
                _ => false,
            };
        if drop {
            self.count.set(self.count.get() + 1);
            if t == 1 {
                d1[s] = Some(pic);
            }
        }
        drop
    }
}

struct Outcome {
    /// In-order delivery latency per picture (all layers), ms.
    lat: Vec<f64>,
    /// Worst |rate deviation| over 6-s windows (first-to-last bunch start), per layer.
    worst_dev: f64,
    /// Join (uniform instants) to a key picture fully delivered, ms.
    joins: Vec<f64>,
    max_queue_ms: f64,
}

fn simulate(
    pics: &[Pic],
    fps: u32,
    rates: &[u64],
    packet_size: u16,
    peak: f64,
    credit: &[Duration],
    discard: &Discard,
) -> Outcome {
    let n = rates.len();
    let t0 = Time::from_secs_f64(1.0);
    let bunch = 2usize;
    let iv: Vec<Duration> = rates
        .iter()
        .map(|&r| Duration::from_secs_f64(8.0 * packet_size as f64 * bunch as f64 / r as f64))
        .collect();
    // S_PEAKFLOOR=kbit/s: a layer bursts at its peak multiple or at least this absolute rate.
    let floor = env("S_PEAKFLOOR", 0.0);
    let peak2 = env("S_PEAK2", peak);
    let gap: Vec<Duration> = iv
        .iter()
        .enumerate()
        .map(|(k, i)| {
            // S_PEAK2=P: the top spatial layer's cells burst at P instead.
            let g = i.div_f64(if k >= 6 { peak2 } else { peak });
            if floor > 0.0 {
                g.min(Duration::from_secs_f64(
                    8.0 * packet_size as f64 * bunch as f64 / (floor * 1e3),
                ))
            } else {
                g
            }
        })
        .collect();
    // S_LINK=kbit/s: the packets then cross a FIFO link of that rate (a viewer holding every
    // layer behind it); a frame is done when its last packet is across.
    let link = env("S_LINK", 0.0);
    let mut link_free = t0;
    let mut next = crate::fill_study::first_bunches(rates, packet_size, bunch, t0);
    let mut last: Vec<Option<Time>> = vec![None; n];
    // queue entries: picture index per packet
    let mut q: Vec<VecDeque<usize>> = vec![VecDeque::new(); n];
    let cap = |i: usize| t0 + Duration::from_secs_f64(i as f64 / fps as f64);
    // Encode time: 10 ms plus, with S_JIT=J (ms), a pseudo-random stall of up to J ms (a
    // CPU-starved encoder), never queueing a picture before the one ahead of it.
    let jit = env("S_JIT", 0.0);
    let mut ready: Vec<Time> = Vec::new();
    for p in 0..pics.len() {
        let r = ((p as u64).wrapping_mul(2_654_435_761) % 1000) as f64 / 1000.0;
        let t = cap(p) + Duration::from_secs_f64((10.0 + jit * r) / 1e3);
        let prev = ready.last().copied().unwrap_or(t);
        ready.push(t.max(prev));
    }
    let mut done: Vec<Vec<Option<Time>>> = vec![vec![None; n]; pics.len()];
    let mut starts: Vec<Vec<Time>> = vec![Vec::new(); n];
    let mut i = 0;
    let end = cap(pics.len()) + Duration::from_secs(3);
    let mut max_queue = Duration::ZERO;
    let mut layer_max = vec![Duration::ZERO; n];
    loop {
        let (k, due) = next_bunch(&next, &last, |k| !q[k].is_empty(), &gap, credit).unwrap();
        if i < pics.len() && ready[i] <= due {
            for (k, &c) in pics[i].pkts.iter().enumerate() {
                if c == 0 || discard.drops(i, k, pics[i].key, c, q[k].len(), bunch, iv[k]) {
                    done[i][k] = Some(ready[i]);
                    continue;
                }
                q[k].extend(std::iter::repeat_n(i, c));
            }
            i += 1;
            continue;
        }
        if due > end {
            break;
        }
        starts[k].push(due);
        last[k] = Some(due);
        next[k] += iv[k];
        for _ in 0..bunch {
            let at = if link > 0.0 {
                link_free = link_free.max(due)
                    + Duration::from_secs_f64(8.0 * packet_size as f64 / (link * 1e3));
                link_free
            } else {
                due
            };
            if let Some(p) = q[k].pop_front() {
                if q[k].front() != Some(&p) {
                    done[p][k] = Some(at);
                    max_queue = max_queue.max(due.saturating_since(cap(p)));
                    layer_max[k] = layer_max[k].max(due.saturating_since(cap(p)));
                }
            }
        }
    }
    if std::env::var("S_DBG").is_ok() {
        eprintln!(
            "    max queue per layer (ms): {:?}",
            layer_max.iter().map(|d| d.as_millis()).collect::<Vec<_>>()
        );
    }
    // In-order delivery: picture i is usable when all its layers arrived and i-1 was.
    let mut lat = Vec::new();
    // S_SLOW=ms: print each picture whose own layers arrived later than this after capture.
    let slow: Option<f64> = std::env::var("S_SLOW")
        .ok()
        .map(|v| v.parse().unwrap_or(200.0));
    let mut prev = t0;
    let mut usable = Vec::new();
    for (i, d) in done.iter().enumerate() {
        let all = d.iter().map(|x| x.unwrap_or(end)).max().unwrap();
        prev = prev.max(all);
        usable.push(prev);
        if i as u32 >= 2 * fps {
            lat.push(prev.saturating_since(cap(i)).as_secs_f64() * 1e3);
            let own = all.saturating_since(cap(i)).as_secs_f64() * 1e3;
            if slow.is_some_and(|t| own > t) {
                let w: Vec<u128> = d
                    .iter()
                    .map(|x| x.unwrap_or(end).saturating_since(cap(i)).as_millis())
                    .collect();
                eprintln!(
                    "      slow picture {i} ({}, key {}, sync {}): {own:.0} ms, per layer {w:?}, packets {:?}",
                    i % 4,
                    pics[i].key,
                    pics[i].sync,
                    pics[i].pkts
                );
            }
        }
    }
    // S_TWO=1: a player with a second decoder for the layers below the top spatial layer
    // (cells with s < 2): its playout buffer is the worst lateness of those layers over 8 s,
    // and a picture whose top frame is not in by its slot is shown from them.
    if std::env::var("S_TWO").is_ok() {
        let mut low_prev = t0;
        let mut low = Vec::new();
        for d in &done {
            let all = d[..6].iter().map(|x| x.unwrap_or(end)).max().unwrap();
            low_prev = low_prev.max(all);
            low.push(low_prev);
        }
        let from = 2 * fps as usize;
        let lat_of = |v: &[Time], i: usize| v[i].saturating_since(cap(i)).as_secs_f64() * 1e3;
        for (name, base) in [("full", &usable), ("low", &low)] {
            let mut offs = Vec::new();
            let mut below = 0usize;
            let mut runs = Vec::new();
            let mut run = 0usize;
            for i in from..done.len() {
                let lo = i.saturating_sub(8 * fps as usize).max(from);
                let off = (lo..=i).map(|j| lat_of(base, j)).fold(0.0f64, f64::max);
                offs.push(off);
                if lat_of(&usable, i) > off {
                    below += 1;
                    run += 1;
                } else if run > 0 {
                    runs.push(run as f64);
                    run = 0;
                }
            }
            eprintln!(
                "    two decoders, buffer from {name}: buffer p50 {:.0} p95 {:.0} ms; {below} of {} pictures shown from the layers below, {} runs, longest {:.0}",
                crate::fill_study::quantile(&offs, 0.5),
                crate::fill_study::quantile(&offs, 0.95),
                offs.len(),
                runs.len(),
                crate::fill_study::quantile(&runs, 1.0)
            );
        }
        // The player's buffer: the larger of the lower path's worst lateness over 8 s and
        // the S_TOPQ (default 0.85, `--playout-top-quantile`) quantile of the top path's.
        let topq = env("S_TOPQ", 0.85);
        let (mut offs, mut lows, mut tops, mut below) = (Vec::new(), Vec::new(), Vec::new(), 0);
        for i in from..done.len() {
            let lo = i.saturating_sub(8 * fps as usize).max(from);
            let low_t = (lo..=i).map(|j| lat_of(&low, j)).fold(0.0f64, f64::max);
            let w: Vec<f64> = (lo..=i).map(|j| lat_of(&usable, j)).collect();
            let top_t = crate::fill_study::quantile(&w, topq);
            let off = low_t.max(top_t);
            below += (lat_of(&usable, i) > off) as usize;
            offs.push(off);
            lows.push(low_t);
            tops.push(top_t);
        }
        eprintln!(
            "    player buffer (lower path's worst, top's {topq} quantile): p50 {:.0} p95 {:.0} ms (lower term p50 {:.0}, top term p50 {:.0}); {below} of {} pictures from the layers below",
            crate::fill_study::quantile(&offs, 0.5),
            crate::fill_study::quantile(&offs, 0.95),
            crate::fill_study::quantile(&lows, 0.5),
            crate::fill_study::quantile(&tops, 0.5),
            offs.len()
        );
        // S_LOWQ=q: the lower path's term is its q quantile over 8 s instead of its worst,
        // and a lower picture later than the buffer is shown late and raises the buffer to
        // its own lateness at once, which then drains by 10 % of the elapsed time: a hold of
        // that one picture in place of a buffer that keeps its lateness for 8 s.
        if let Ok(lowq) = std::env::var("S_LOWQ") {
            let lowq: f64 = lowq.parse().unwrap_or(0.9);
            let period = 1000.0 / fps as f64;
            let q = crate::fill_study::quantile;
            let (mut offs, mut holds, mut below) = (Vec::new(), Vec::new(), 0usize);
            let mut prev: Option<f64> = None;
            for i in from..done.len() {
                let lo = i.saturating_sub(8 * fps as usize).max(from);
                let wl: Vec<f64> = (lo..=i).map(|j| lat_of(&low, j)).collect();
                let wt: Vec<f64> = (lo..=i).map(|j| lat_of(&usable, j)).collect();
                let target = q(&wl, lowq).max(q(&wt, topq));
                let drained = prev.map_or(target, |o| target.max(o - 0.1 * period));
                let own = lat_of(&low, i);
                let off = if own > drained {
                    holds.push(own - drained);
                    own
                } else {
                    drained
                };
                below += (lat_of(&usable, i) > off) as usize;
                offs.push(off);
                prev = Some(off);
            }
            let secs = offs.len() as f64 / fps as f64;
            eprintln!(
                "    drain player (lower term {lowq} quantile, late lower pictures held): buffer p50 {:.0} p95 {:.0} ms; {} holds per minute (p50 {:.0}, max {:.0} ms, {} over 150 ms); {below} of {} pictures from the layers below",
                q(&offs, 0.5),
                q(&offs, 0.95),
                holds.len() as f64 * 60.0 / secs,
                q(&holds, 0.5),
                q(&holds, 1.0),
                holds.iter().filter(|&&h| h > 150.0).count(),
                offs.len()
            );
        }
    }
    // Joins every 50 ms after the first 2 s: first key picture captured after the join.
    let mut joins = Vec::new();
    let mut j = cap(2 * fps as usize);
    while j + Duration::from_secs(3) < cap(pics.len()) {
        if let Some(kp) = (0..pics.len()).find(|&p| pics[p].key && cap(p) >= j) {
            joins.push(usable[kp].saturating_since(j).as_secs_f64() * 1e3);
        }
        j += Duration::from_millis(50);
    }
    // Rate check: 6-s windows every 100 ms.
    let worst = crate::fill_study::worst_rate_deviation(
        &starts,
        &iv,
        cap(2 * fps as usize),
        cap(pics.len()),
        100,
    );
    Outcome {
        lat,
        worst_dev: worst,
        joins,
        max_queue_ms: max_queue.as_secs_f64() * 1e3,
    }
}

use crate::fill_study::quantile as q;

/// A ladder with every cell times `scale` (as `video.kbps_scale`), at least 1 kbit/s.
fn scaled(ladder: &[[u32; 3]; 3], scale: f64) -> Vec<Vec<u32>> {
    ladder
        .iter()
        .map(|r| {
            r.iter()
                .map(|&c| ((c as f64 * scale).round() as u32).max(1))
                .collect()
        })
        .collect()
}

fn env(name: &str, d: f64) -> f64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(d)
}

#[test]
#[ignore]
fn latency_study() {
    let scale = env("S_SCALE", 1.0);
    let w = env("S_W", 640.0) as u32;
    let ki = env("S_KI", 1.0);
    let m = env("S_PKT", 1200.0) as u16;
    let secs = env("S_SECS", 30.0) as u32;
    let mut v = ResolvedVideo {
        width: w,
        height: w * 9 / 16,
        fps: 15,
        spatial: 3,
        temporal: 3,
        cell_kbps: scaled(&L3T3, scale),
        // The study indexes layers spatial-major (k / 3, k % 3).
        order: codec::ladder::LayerOrder::SpatialMajor,
        keyframe_interval: (ki * 15.0).round() as u32,
        qroverlay: true,
        reference_dir: None,
        rate_headroom: 1.3,
        key_headroom: 1.3,
        pacer_peak: 1.0,
        pacer_credit: Duration::from_millis(120),
        max_discardable_wait: None,
        max_middle_wait: None,
        key_mid_min_q: 0,
    };
    let intras: Vec<u32> = std::env::var("S_INTRA")
        .unwrap_or_else(|_| "300".into())
        .split(',')
        .map(|s| s.parse().unwrap())
        .collect();
    let policies = std::env::var("S_POL")
        .unwrap_or_else(|_| "1.3:1:0:0,1.3:8:1:0,1.3:8:1:150,2:8:1:0,2:1:0:0".into());
    for intra in intras {
        let pics = trace(&v, m, secs, intra);
        let nk = pics.iter().filter(|p| p.key).count();
        let kidx: Vec<usize> = (0..pics.len()).filter(|&i| pics[i].key).collect();
        eprintln!("key pictures at {kidx:?}");
        let tot: Vec<usize> = (0..9)
            .map(|k| pics.iter().map(|p| p.pkts[k]).sum())
            .collect();
        let key0: Vec<usize> = pics.iter().filter(|p| p.key).map(|p| p.pkts[0]).collect();
        eprintln!("intra {intra}: {nk} keys; packets per layer {tot:?}; L0 key sizes {key0:?}");
        for (k, _) in tot.iter().enumerate() {
            let ks: Vec<usize> = pics.iter().filter(|p| p.key).map(|p| p.pkts[k]).collect();
            let others: Vec<usize> = pics
                .iter()
                .filter(|p| !p.key && p.pkts[k] > 0)
                .map(|p| p.pkts[k])
                .collect();
            eprintln!(
                "  L{k}: key mean {:.1} pkts, non-key mean {:.1} pkts",
                ks.iter().sum::<usize>() as f64 / ks.len().max(1) as f64,
                others.iter().sum::<usize>() as f64 / others.len().max(1) as f64
            );
        }
        // policy = headroom:peak:credit_periods:cap_ms[:slot packets per frame[:key_headroom[:key_cap_ms]]]
        for pol in policies.split(',') {
            let f: Vec<f64> = pol.split(':').map(|s| s.parse().unwrap()).collect();
            v.rate_headroom = f[0];
            let slots = f.get(4).copied().unwrap_or(1.0);
            let mut rates = Vec::new();
            let mut credit = Vec::new();
            for s in 0..3 {
                for t in 0..3 {
                    let fps_t = crate::config::temporal_fps(15, 3, t);
                    // `slots` packets per frame (1 = the old rule, 2 = one bunch).
                    rates.push(
                        crate::config::video_layer_rate(
                            v.cell_kbps[s][t],
                            fps_t,
                            m,
                            1,
                            if t == 0 {
                                f.get(5).copied().unwrap_or(f[0])
                            } else {
                                f[0]
                            },
                        ) + ((slots - 1.0) * fps_t * m as f64 * 8.0) as u64,
                    );
                    let mut c = Duration::from_secs_f64(f[2] / fps_t);
                    if f[3] > 0.0 {
                        c = c.min(Duration::from_secs_f64(f[3] / 1e3));
                    }
                    // `key_cap_ms`: the credit of the temporal-layer-0 layers (the key
                    // pictures' layers), not capped at one frame period.
                    if let (0, Some(&k)) = (t, f.get(6)) {
                        c = Duration::from_secs_f64(k / 1e3);
                    }
                    credit.push(if f[1] <= 1.0 { Duration::ZERO } else { c });
                }
            }
            let none = Discard {
                tl2: None,
                tl1: None,
                dropped_tl1: Default::default(),
                count: Default::default(),
            };
            let o = simulate(&pics, 15, &rates, m, f[1].max(1.0), &credit, &none);
            eprintln!(
                "  {pol:>18}: lat p50 {:>5.0} p95 {:>5.0} | join p50 {:>5.0} max {:>5.0} | worst 6-s rate dev {:.2}% | max queue {:.0} ms | total {:.0} kbit/s",
                q(&o.lat, 0.5),
                q(&o.lat, 0.95),
                q(&o.joins, 0.5),
                q(&o.joins, 1.0),
                o.worst_dev * 100.0,
                o.max_queue_ms,
                rates.iter().sum::<u64>() as f64 / 1e3
            );
        }
    }
}

const L3T3: [[u32; 3]; 3] = [[90, 30, 30], [240, 80, 80], [600, 200, 200]];

/// The player's playout buffer over a picture-lateness trace (docs/player.md "Adaptive playout
/// buffer"): the buffer holds the worst lateness of its `window_s` window, rises at once and
/// drains by 10 % of the elapsed time. Returns the rises a viewer sees as freezes (a picture
/// later than the buffer by more than 150 ms) and the mean buffer, ms (its latency cost).
fn playout(lat: &[f64], fps: u32, window_s: f64) -> (usize, f64) {
    let w = (window_s * fps as f64) as usize;
    let dt = 1000.0 / fps as f64;
    let mut offset: Option<f64> = None;
    let (mut rises, mut sum) = (0, 0.0);
    for i in 0..lat.len() {
        if offset.is_some_and(|o| lat[i] > o + 150.0) {
            rises += 1;
        }
        let target = lat[i.saturating_sub(w)..=i]
            .iter()
            .copied()
            .fold(0.0, f64::max);
        let o = match offset {
            Some(o) if target < o => target.max(o - 0.1 * dt),
            _ => target,
        };
        offset = Some(o);
        sum += o;
    }
    (rises, sum / lat.len().max(1) as f64)
}

/// The quality suite's encode (docs/testbed.md "Quality suite": 640x360@15 L3T3, `kbps_scale`
/// 0.6, 1200-B pairs, key picture every 2 s) with the server's pacing defaults, replayed with
/// and without the sender's discarding rules: `S_YUV=clip.yuv cargo test --release -p
/// layercast-server --features research clip_study -- --ignored --nocapture`. `S_TWO=1` adds
/// the player's two decoders (docs/player.md "The lower path"): the buffer sized from the
/// lower layers alone, and how many pictures would be shown from them.
#[test]
#[ignore]
fn clip_study() {
    let secs = env("S_SECS", 60.0) as u32;
    let m = 1200u16;
    let scale = env("S_SCALE", 0.6);
    let fps = env("S_FPS", 15.0) as u32;
    let v = ResolvedVideo {
        width: 640,
        height: 360,
        fps,
        spatial: 3,
        temporal: 3,
        cell_kbps: scaled(&codec::ladder::DEFAULT_L3T3_CELL_KBPS, scale),
        // The study indexes layers spatial-major (k / 3, k % 3).
        order: codec::ladder::LayerOrder::SpatialMajor,
        keyframe_interval: (env("S_KEY", 2.0) * fps as f64) as u32,
        qroverlay: true,
        reference_dir: None,
        rate_headroom: env("S_HEAD", crate::config::DEFAULT_RATE_HEADROOM),
        key_headroom: env("S_KEYHEAD", crate::config::DEFAULT_KEY_HEADROOM),
        pacer_peak: crate::config::DEFAULT_PACER_PEAK,
        pacer_credit: Duration::from_millis(env(
            "S_CREDIT",
            crate::config::DEFAULT_PACER_CREDIT_MS as f64,
        ) as u64),
        max_discardable_wait: None,
        max_middle_wait: None,
        key_mid_min_q: 0,
    };
    let pics = trace(&v, m, secs, env("S_INTRA", 150.0) as u32);
    let bunch = 2u8;
    let mut rates = Vec::new();
    let mut credit = Vec::new();
    // S_KEYCREDIT=ms: the credit of the TL0 layers, not capped at a frame period.
    let kc = env("S_KEYCREDIT", 0.0);
    for s in 0..3 {
        for t in 0..3 {
            let fps_t = crate::config::temporal_fps(fps, 3, t);
            let h = v.headroom(s, t);
            rates.push(crate::config::video_layer_rate(
                v.cell_kbps[s][t],
                fps_t,
                m,
                bunch,
                h,
            ));
            credit.push(if t == 0 && kc > 0.0 {
                Duration::from_secs_f64(kc / 1e3)
            } else {
                v.pacer_credit.min(Duration::from_secs_f64(1.0 / fps_t))
            });
        }
    }
    // S_SIZES=1: each layer's frames in packets, key pictures against the rest, and its
    // slots per frame at the announced rate.
    if std::env::var("S_SIZES").is_ok() {
        for (k, r) in rates.iter().enumerate() {
            let fps_t = crate::config::temporal_fps(fps, 3, k % 3);
            let mean = |key: bool| {
                let x: Vec<usize> = pics
                    .iter()
                    .filter(|p| p.key == key && p.pkts[k] > 0)
                    .map(|p| p.pkts[k])
                    .collect();
                (
                    x.iter().sum::<usize>() as f64 / x.len().max(1) as f64,
                    x.iter().copied().max().unwrap_or(0),
                )
            };
            let ((km, kx), (om, ox)) = (mean(true), mean(false));
            eprintln!(
                "    L{k}: key frames mean {km:.1} max {kx} pkts, others mean {om:.1} max {ox}; slots {:.1} pkts per frame",
                *r as f64 / fps_t / (m as f64 * 8.0)
            );
        }
    }
    let ms = |x: f64| (x > 0.0).then(|| Duration::from_secs_f64(x / 1e3));
    for pol in std::env::var("S_DISC")
        .unwrap_or_else(|_| "0:0,250:0,250:250,250:400,250:600".into())
        .split(',')
    {
        let (a, b) = pol.split_once(':').unwrap();
        let d = Discard {
            tl2: ms(a.parse().unwrap()),
            tl1: ms(b.parse().unwrap()),
            dropped_tl1: std::cell::RefCell::new(vec![None; 3]),
            count: Default::default(),
        };
        std::env::set_var("S_DBG", "1");
        let o = simulate(&pics, fps, &rates, m, v.pacer_peak, &credit, &d);
        eprintln!(
            "  discard tl2:tl1 {pol:>8} ms: lat p50 {:>5.0} p95 {:>5.0} max {:>5.0} | rises {} | {} frames dropped | worst 6-s rate dev {:.2}% | total {:.0} kbit/s",
            q(&o.lat, 0.5),
            q(&o.lat, 0.95),
            q(&o.lat, 1.0),
            playout(&o.lat, fps, 8.0).0,
            d.count.get(),
            o.worst_dev * 100.0,
            rates.iter().sum::<u64>() as f64 / 1e3
        );
        for w in [8.0, 15.0, 30.0, 60.0] {
            let (r, b) = playout(&o.lat, fps, w);
            eprintln!("      playout window {w:>3} s: {r} rises, mean buffer {b:.0} ms");
        }
    }
}
