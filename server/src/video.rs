//! Video source: generated test pattern -> `codec` SVC encoder (libvpx) -> RTP per cumulative
//! layer (`codec::vp9rtp::LayerStreams`) -> per-layer queues the pacer drains.
//!
//! The encoder runs on its own thread at the configured frame rate; the pacer takes packets
//! from a layer's queue when that layer's bunch is due and pads the bunch when the queue is
//! short, so every layer stays at its announced constant rate. Sequence numbers are assigned by
//! the pacer (media and padding share a layer's sequence space).

use crate::config::ResolvedVideo;
use crate::error::{Error, Result};
use crate::state::lock;
use codec::ladder::LayerLadder;
use codec::synth;
use codec::vp9rtp::{LayerPacket, LayerStreams};
use codec::vpx::{SvcConfig, SvcEncoder};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Packets waiting per layer. A layer whose queue exceeds `MAX_QUEUED` drops its oldest
/// packets (counted): the encoder overshot the layer's announced rate for too long.
#[derive(Default, Debug)]
pub struct LayerQueues {
    pub queues: Mutex<Vec<VecDeque<LayerPacket>>>,
    pub dropped: AtomicU64,
    pub pictures: AtomicU64,
    pub encode_errors: AtomicU64,
}

const MAX_QUEUED: usize = 400;

impl LayerQueues {
    /// Takes the next packet of layer `k`.
    pub fn pop(&self, k: usize) -> Option<LayerPacket> {
        lock(&self.queues).get_mut(k).and_then(VecDeque::pop_front)
    }
}

/// The codec description announced in the SAM, e.g. `VP9 L3T3 640x360@15`.
pub fn codec_string(v: &ResolvedVideo) -> String {
    format!(
        "VP9 L{}T{} {}x{}@{}",
        v.spatial, v.temporal, v.width, v.height, v.fps
    )
}

/// Per-layer labels for the API (`S1T2 320x180@15`).
pub fn labels(v: &ResolvedVideo) -> Vec<String> {
    let conf = svc_config(v);
    let mut out = Vec::new();
    for s in 0..v.spatial {
        let (w, h) = conf.layer_size(s);
        for t in 0..v.temporal {
            let fps = crate::config::temporal_fps(v.fps, v.temporal, 0)
                * match (v.temporal, t) {
                    (1, _) => 1.0,
                    (2, 0) => 1.0,
                    (2, _) => 2.0,
                    (_, 0) => 1.0,
                    (_, 1) => 2.0,
                    _ => 4.0,
                };
            out.push(
                format!("S{s}T{t} {w}x{h}@{fps:.3}")
                    .trim_end_matches('0')
                    .trim_end_matches('.')
                    .to_string(),
            );
        }
    }
    out
}

fn svc_config(v: &ResolvedVideo) -> SvcConfig {
    let mut c = SvcConfig::l3t3_720p();
    c.width = v.width;
    c.height = v.height;
    c.fps_num = v.fps;
    c.fps_den = 1;
    c.spatial_layers = v.spatial;
    c.temporal_layers = v.temporal;
    c.scales = Vec::new();
    c.cell_kbps = v.cell_kbps.clone();
    c.keyframe_interval = v.keyframe_interval;
    c.spatial_sync_interval = v.fps;
    c
}

/// Starts the encoder thread. `ssrc_base + k` is layer k's SSRC (the pacer uses the same).
pub fn start(
    v: &ResolvedVideo,
    packet_size: u16,
    ssrc_base: u32,
    queues: Arc<LayerQueues>,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>> {
    let conf = svc_config(v);
    let ladder = LayerLadder::spatial_major(&conf.cell_kbps)
        .map_err(|e| Error::BadRequest(format!("video ladder: {e}")))?;
    let n = ladder.len();
    let res = (0..v.spatial)
        .map(|s| {
            let (w, h) = conf.layer_size(s);
            (w as u16, h as u16)
        })
        .collect();
    let mut streams = LayerStreams::new(
        ladder,
        res,
        96,
        (0..n as u32).map(|k| ssrc_base.wrapping_add(k)).collect(),
        packet_size as usize,
        16, // the cc extension block: 4-byte header + 12 bytes
        0,
        0,
    )
    .map_err(|e| Error::BadRequest(format!("video packetizer: {e}")))?;
    let mut enc = SvcEncoder::new(conf.clone())
        .map_err(|e| Error::BadRequest(format!("video encoder: {e}")))?;
    *lock(&queues.queues) = vec![VecDeque::new(); n];
    let (w, h, fps) = (v.width, v.height, v.fps);
    std::thread::Builder::new()
        .name("video-encoder".into())
        .spawn(move || {
            let frame_time = Duration::from_secs_f64(1.0 / fps as f64);
            let t0 = Instant::now();
            let mut i: u64 = 0;
            while !stop.load(Ordering::Relaxed) {
                let due = t0 + frame_time * i as u32;
                let now = Instant::now();
                if due > now {
                    std::thread::sleep((due - now).min(Duration::from_millis(100)));
                    continue;
                }
                let f = synth::frame(w, h, i as u32);
                let pts = (i * 90_000 / fps as u64) as i64;
                i += 1;
                match enc.encode(&f, pts) {
                    Ok(Some(pic)) => match streams.packets(&pic) {
                        Ok(per_layer) => {
                            queues.pictures.fetch_add(1, Ordering::Relaxed);
                            let mut q = lock(&queues.queues);
                            for (k, pkts) in per_layer.into_iter().enumerate() {
                                q[k].extend(pkts);
                                while q[k].len() > MAX_QUEUED {
                                    q[k].pop_front();
                                    queues.dropped.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                        }
                        Err(_) => {
                            queues.encode_errors.fetch_add(1, Ordering::Relaxed);
                        }
                    },
                    Ok(None) => {}
                    Err(_) => {
                        queues.encode_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
        .map_err(|e| Error::io("spawning the encoder thread", e))
}
