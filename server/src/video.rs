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
use codec::vp9rtp::{LayerPacket, LayerStreams, StreamConfig};
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

/// Where raw frames come from.
#[derive(Clone, Debug, PartialEq)]
pub enum FrameSource {
    /// `codec::synth` frames generated in-process (`testpattern`).
    Synthetic,
    /// A `gst-launch-1.0` child writing raw I420 frames of the encoder's size to its stdout,
    /// restarted when it ends (so files loop). The string is the pipeline's source part.
    Gst(String),
}

impl FrameSource {
    /// Maps a session's `source` to frames, or `None` if the source is not video.
    pub fn from_source(source: &str, qr: bool) -> Option<FrameSource> {
        let qr = if qr {
            " ! debugqroverlay pixel-size=2"
        } else {
            ""
        };
        if source == "testpattern" {
            Some(FrameSource::Synthetic)
        } else if source == "gst-testpattern" {
            Some(FrameSource::Gst(format!(
                "videotestsrc is-live=true pattern=ball{qr}"
            )))
        } else if source.starts_with("file://")
            || source.starts_with("http://")
            || source.starts_with("rtsp://")
            || source.starts_with("srt://")
        {
            Some(FrameSource::Gst(format!("uridecodebin uri={source}{qr}")))
        } else {
            source
                .strip_prefix("v4l2://")
                .map(|dev| FrameSource::Gst(format!("v4l2src device={dev}{qr}")))
        }
    }

    fn pipeline(src: &str, w: u32, h: u32, fps: u32) -> Vec<String> {
        let desc = format!(
            "{src} ! videoconvert ! videoscale ! videorate ! video/x-raw,format=I420,width={w},height={h},framerate={fps}/1,pixel-aspect-ratio=1/1 ! fdsink fd=1 sync=false"
        );
        let mut v = vec!["-q".to_string()];
        v.extend(desc.split_whitespace().map(str::to_string));
        v
    }
}

/// The running `gst-launch-1.0` child of a session, so shutdown can stop it.
#[derive(Default, Debug)]
pub struct ChildSlot(pub Mutex<Option<std::process::Child>>);

impl ChildSlot {
    /// Kills and reaps the child, if any.
    pub fn stop(&self) {
        if let Some(mut c) = lock(&self.0).take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Reads frames from a GStreamer child, restarting it when it ends.
struct GstReader {
    args: Vec<String>,
    frame_len: usize,
    slot: Arc<ChildSlot>,
    out: Option<std::process::ChildStdout>,
    restarts: u64,
}

impl GstReader {
    fn next_frame(&mut self, buf: &mut [u8], stop: &AtomicBool) -> bool {
        use std::io::Read;
        while !stop.load(Ordering::Relaxed) {
            if self.out.is_none() {
                if self.restarts > 0 {
                    std::thread::sleep(Duration::from_millis(200));
                }
                self.restarts += 1;
                let child = std::process::Command::new("gst-launch-1.0")
                    .args(&self.args)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::null())
                    .spawn();
                match child {
                    Ok(mut c) => {
                        self.out = c.stdout.take();
                        self.slot.stop();
                        *lock(&self.slot.0) = Some(c);
                    }
                    Err(_) => {
                        std::thread::sleep(Duration::from_secs(1));
                        continue;
                    }
                }
            }
            let Some(o) = self.out.as_mut() else { continue };
            if o.read_exact(&mut buf[..self.frame_len]).is_ok() {
                return true;
            }
            // EOF (end of file: loop) or the child died: restart it.
            self.out = None;
            self.slot.stop();
        }
        false
    }
}

/// Starts the encoder thread. `ssrc_base + k` is layer k's SSRC (the pacer uses the same).
#[allow(clippy::too_many_arguments)]
pub fn start(
    v: &ResolvedVideo,
    source: FrameSource,
    child: Arc<ChildSlot>,
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
        StreamConfig {
            payload_type: 96,
            ssrcs: (0..n as u32).map(|k| ssrc_base.wrapping_add(k)).collect(),
            mtu: packet_size as usize,
            ext_reserve: 16, // the cc extension block: 4-byte header + 12 bytes
            ..Default::default()
        },
    )
    .map_err(|e| Error::BadRequest(format!("video packetizer: {e}")))?;
    let mut enc = SvcEncoder::new(conf.clone())
        .map_err(|e| Error::BadRequest(format!("video encoder: {e}")))?;
    *lock(&queues.queues) = vec![VecDeque::new(); n];
    let (w, h, fps) = (v.width, v.height, v.fps);
    let mut reader = match &source {
        FrameSource::Synthetic => None,
        FrameSource::Gst(src) => Some(GstReader {
            args: FrameSource::pipeline(src, w, h, fps),
            frame_len: synth::i420_len(w, h),
            slot: child,
            out: None,
            restarts: 0,
        }),
    };
    let mut frame = vec![0u8; synth::i420_len(w, h)];
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
                let f = match reader.as_mut() {
                    None => synth::frame(w, h, i as u32),
                    Some(r) => {
                        // A live or file source paces itself through the pipe; frames that
                        // arrive late are encoded at once (the schedule re-anchors below).
                        if !r.next_frame(&mut frame, &stop) {
                            break;
                        }
                        frame.clone()
                    }
                };
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
