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
use codec::vp9rtp::{LayerStreams, StreamConfig};
use codec::vpx::{SvcConfig, SvcEncoder};
use proto::{LayerInfo, Track, Vp9Params};
use session::publisher::{Burst, MediaPacket, Picture};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

/// The encoder's side of a video session: the flags the control plane and the media thread
/// set for it, and its counters. Pictures themselves go to the media thread over a lock-free
/// SPSC ring ([`start`]); the spacing of requested key pictures is the Publisher's
/// (`session::publisher::requests`).
#[derive(Default, Debug)]
pub struct LayerQueues {
    /// Pictures the ring was too full to take (the media thread fell far behind).
    pub dropped: AtomicU64,
    pub pictures: AtomicU64,
    pub encode_errors: AtomicU64,
    /// Layer frames the encoder's rate control dropped (`SvcConfig::drop_thresh`): a
    /// holder of that layer gets the picture without it, so a count that keeps rising is
    /// a layer coded over its budget.
    pub layer_frames_dropped: AtomicU64,
    /// Frames the QR stamper or the reference writer failed on.
    pub stamp_errors: AtomicU64,
    /// A client asked for a key picture over HTTP (`POST /api/sessions/ID/keyframe`); the
    /// media thread hands it to the Publisher, which aggregates it with the UDP requests.
    pub key_requested: AtomicBool,
    /// Spatial layers (bit s) a client asked to be re-synced over HTTP (`?spatial=s`).
    pub sync_requested: AtomicU8,
    /// The Publisher asks the encoder for a key picture / re-syncs of these spatial layers
    /// on its next picture.
    pub force_key: AtomicBool,
    pub force_sync: AtomicU8,
    /// Key-picture and re-sync requests received (HTTP and UDP), and key pictures / re-syncs
    /// forced for them.
    pub key_requests: AtomicU64,
    pub keys_forced: AtomicU64,
    pub syncs_forced: AtomicU64,
    /// Total encoder target asked for by a TFMCC sender, kbit/s (0: the configured ladder).
    /// The encoder thread applies a new value before its next picture
    /// (`SvcEncoder::set_total_kbps`, docs/protocols/tfmcc.md "Live video").
    pub target_kbps: AtomicU64,
    /// Capture to the encoded picture's packets handed to the media thread: what the
    /// source and the encoder add to glass-to-glass latency (the rest is the layers' send
    /// queues, the path and the player).
    pub encode_latency: std::sync::Mutex<crate::latency::LatencyHistogram>,
}

/// The media burst policy of a video encode (docs/server.md "Pacer burst"), `None` when
/// `pacer_peak` is 1 (strict pacing): the credit per layer is `pacer_credit_ms`, at most one
/// frame period of the layer's temporal layer.
pub fn burst_for_video(v: &ResolvedVideo) -> Option<Burst> {
    if v.pacer_peak <= 1.0 {
        return None;
    }
    let credit = v
        .cells()
        .into_iter()
        .map(|(_, t)| {
            let fps = crate::config::temporal_fps(v.fps, v.temporal, t);
            Duration::from_secs_f64(1.0 / fps).min(v.pacer_credit)
        })
        .collect();
    Some(Burst {
        peak: v.pacer_peak,
        credit,
    })
}

/// Pictures the ring from the encoder to the media thread holds.
pub const RING_PICTURES: usize = 64;

impl LayerQueues {
    /// Asks for a key picture (HTTP).
    pub fn request_key(&self) {
        self.key_requested.store(true, Ordering::Relaxed);
    }

    /// Asks to re-sync spatial layer `s` (1..=7; HTTP).
    pub fn request_sync(&self, s: u8) {
        if (1..8).contains(&s) {
            self.sync_requested.fetch_or(1 << s, Ordering::Relaxed);
        }
    }
}

/// Bytes the packetizer leaves free in every video packet: the cc extension block (16) and
/// the FEC header a repair packet adds ([`codec::fec::MAX_HEADER_LEN`]).
pub(crate) const VIDEO_EXT_RESERVE: usize = 16 + codec::fec::MAX_HEADER_LEN;

/// FEC parameters of each layer of a video session (`codec::fec::FecParams::for_layer`): its
/// packet rate, and the share of its slots media is expected to fill (the announced rate at a
/// headroom of 1 and one packet per frame for the part-filled last packet, over the announced
/// rate).
pub fn fec_params(r: &crate::config::ResolvedSession) -> Vec<codec::fec::FecParams> {
    let Some(v) = &r.video else {
        return Vec::new();
    };
    v.cells()
        .into_iter()
        .enumerate()
        .map(|(k, (s, t))| {
            let rate = r.rates_bps.get(k).copied().unwrap_or(1).max(1) as f64;
            let fps = crate::config::temporal_fps(v.fps, v.temporal, t);
            let c = v.cell_kbps[s][t];
            let media = crate::config::video_layer_rate(c, fps, r.packet_size, 1, 1.0) as f64;
            codec::fec::FecParams::for_layer(rate / (8.0 * r.packet_size as f64), media / rate)
        })
        .collect()
}

/// The video track announced in the SAM (`proto::Track::vp9_ladder`: stream `k` in layer `k`
/// with SSRC `ssrc_base + k`, the SSRCs the pacer sends with).
pub fn video_track(v: &ResolvedVideo, layers: &[LayerInfo], ssrc_base: u32) -> Track {
    let p = Vp9Params {
        payload_type: 96,
        width: v.width as u16,
        height: v.height as u16,
        fps_num: v.fps,
        fps_den: 1,
        spatial: v.spatial as u8,
        temporal: v.temporal as u8,
    };
    let cells: Vec<(u8, u8)> = v
        .cells()
        .into_iter()
        .map(|(s, t)| (s as u8, t as u8))
        .collect();
    Track::vp9_cells(0, p, layers, &cells, ssrc_base)
}

/// Per-layer labels for the API (`S1T2 320x180@15`).
pub fn labels(v: &ResolvedVideo) -> Vec<String> {
    let conf = svc_config(v);
    v.cells()
        .into_iter()
        .map(|(s, t)| {
            let (w, h) = conf.layer_size(s);
            let fps = crate::config::temporal_fps(v.fps, v.temporal, 0)
                * match (v.temporal, t) {
                    (1, _) => 1.0,
                    (2, 0) => 1.0,
                    (2, _) => 2.0,
                    (_, 0) => 1.0,
                    (_, 1) => 2.0,
                    _ => 4.0,
                };
            format!("S{s}T{t} {w}x{h}@{fps:.3}")
                .trim_end_matches('0')
                .trim_end_matches('.')
                .to_string()
        })
        .collect()
}

pub(crate) fn svc_config(v: &ResolvedVideo) -> SvcConfig {
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
    // No periodic re-sync of the upper spatial layers between key pictures: each is an
    // upper-layer frame of ~2.7x its budget that holds the pictures behind it like a key
    // picture does (docs/server.md "Join-time key pictures"); with a 15-frame sync interval
    // and 2-s keys one came between every two keys, so the large frames came every ~1.07 s.
    // Upper layers re-sync at every key picture and on a joining player's request.
    c.spatial_sync_interval = 0;
    c.key_mid_min_q = v.key_mid_min_q;
    c
}

/// Where raw frames come from.
#[derive(Clone, Debug, PartialEq)]
pub enum FrameSource {
    /// `codec::synth` frames generated in-process (`testpattern`).
    Synthetic,
    /// An in-process GStreamer pipeline (`crate::media::source`): the test pattern with
    /// flash and beep, a URI of an allowed scheme, or a capture device.
    Gst(crate::media::source::SourceSpec),
}

impl FrameSource {
    /// Maps a session's `source` to frames, or `None` if the source is not video (or is
    /// refused: see [`crate::media::source::parse`]).
    pub fn from_source(source: &str) -> Option<FrameSource> {
        if source == "testpattern" {
            Some(FrameSource::Synthetic)
        } else {
            crate::media::source::parse(source)
                .ok()
                .map(FrameSource::Gst)
        }
    }
}

/// The audio track's encoder side, handed to [`start`]: the encoder the source's audio
/// callback feeds, and the queue the pacer drains.
pub struct AudioIo {
    pub encoder: Arc<Mutex<crate::media::audio::AudioEncoder>>,
    pub queue: Arc<crate::media::audio::AudioQueue>,
    pub channels: u8,
}

/// The per-layer RTP streams of an encode: the ladder of `conf`'s cells in `order`, SSRC
/// `ssrc_base + k` for layer k, packets of at most `mtu` bytes with `ext_reserve` left free.
pub(crate) fn layer_streams(
    conf: &SvcConfig,
    order: codec::ladder::LayerOrder,
    ssrc_base: u32,
    mtu: u16,
    ext_reserve: usize,
) -> Result<LayerStreams> {
    let ladder = LayerLadder::ordered(&conf.cell_kbps, order)
        .map_err(|e| Error::BadRequest(format!("video ladder: {e}")))?;
    let n = ladder.len() as u32;
    let res = (0..conf.spatial_layers)
        .map(|s| {
            let (w, h) = conf.layer_size(s);
            (w as u16, h as u16)
        })
        .collect();
    LayerStreams::new(
        ladder,
        res,
        StreamConfig {
            payload_type: 96,
            ssrcs: (0..n).map(|k| ssrc_base.wrapping_add(k)).collect(),
            mtu: mtu as usize,
            ext_reserve,
            ..Default::default()
        },
    )
    .map_err(|e| Error::BadRequest(format!("video packetizer: {e}")))
}

/// Starts the encoder thread. `ssrc_base + k` is layer k's SSRC (the pacer uses the same).
#[allow(clippy::too_many_arguments)]
pub fn start(
    v: &ResolvedVideo,
    source: FrameSource,
    source_stats: Arc<Mutex<Option<Arc<crate::media::source::SourceStats>>>>,
    clock: crate::media::audio::MediaClock,
    audio: Option<AudioIo>,
    packet_size: u16,
    ssrc_base: u32,
    queues: Arc<LayerQueues>,
    mut ring: rtrb::Producer<Picture>,
    stop: Arc<AtomicBool>,
) -> Result<std::thread::JoinHandle<()>> {
    let conf = svc_config(v);
    let mut streams = layer_streams(&conf, v.order, ssrc_base, packet_size, VIDEO_EXT_RESERVE)?;
    let mut enc = SvcEncoder::new(conf.clone())
        .map_err(|e| Error::BadRequest(format!("video encoder: {e}")))?;
    let (w, h, fps) = (v.width, v.height, v.fps);
    let v_spatial = v.spatial;
    // The audio callback runs on a GStreamer thread: it encodes and queues 20-ms packets.
    let audio_sink = audio.as_ref().map(|a| {
        let (enc, q) = (a.encoder.clone(), a.queue.clone());
        Box::new(move |pcm: &[i16], cap: u64| {
            let mut e = lock(&enc);
            e.push_pcm(pcm, cap, &q.stats, &mut |p| q.push(p));
        }) as crate::media::source::AudioSink
    });
    let mut reader = match source {
        FrameSource::Synthetic => None,
        FrameSource::Gst(spec) => {
            let fmt = crate::media::source::SourceFormat {
                width: w,
                height: h,
                fps,
                channels: audio.as_ref().map_or(0, |a| a.channels),
            };
            let m = crate::media::source::MediaSource::new(spec, fmt, audio_sink);
            *lock(&source_stats) = Some(m.stats.clone());
            Some(m)
        }
    };
    let mut stamper = if v.qroverlay {
        Some(Stamper::new(w, h, fps, qr_pixel_size(v.spatial))?)
    } else {
        None
    };
    let mut reference = match &v.reference_dir {
        Some(d) => Some(ReferenceWriter::create(
            &d.join("reference.y4m"),
            w,
            h,
            fps,
        )?),
        None => None,
    };
    std::thread::Builder::new()
        .name("video-encoder".into())
        .spawn(move || {
            let frame_time = Duration::from_secs_f64(1.0 / fps as f64);
            let t0 = Instant::now();
            // The synthetic source's capture clock: the wall clock read once, then advanced by
            // the monotonic clock, as the GStreamer sources' (anchor + running time). RTP time
            // comes from it and must advance linearly (RFC 3550 §5.1): read per picture, a step
            // of the server's wall clock jumped it by the step (docs/reliability.md "Server
            // clock step").
            let anchor_ns = unix_ns();
            let mut i: u64 = 0;
            let mut applied_kbps = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let due = t0 + frame_time * i as u32;
                let now = Instant::now();
                if due > now {
                    std::thread::sleep((due - now).min(Duration::from_millis(100)));
                    continue;
                }
                // Capture time: when the source captured the frame (the pipeline clock at its
                // running time; for the synthetic source, now), the clock players compare
                // their display time with (glass-to-glass latency) and the RTP time base.
                let (mut f, capture_ns) = match reader.as_mut() {
                    None => (
                        synth::frame(w, h, i as u32),
                        anchor_ns + now.saturating_duration_since(t0).as_nanos() as u64,
                    ),
                    Some(r) => {
                        // A live or file source paces itself (the appsink synchronises to the
                        // pipeline clock); late frames are encoded at once.
                        match r.next_picture(&stop) {
                            Some(p) => (p.i420, p.capture_ns),
                            None => break,
                        }
                    }
                };
                if let Some(a) = audio.as_ref() {
                    let q = &a.queue;
                    lock(&a.encoder).keep_up_with(capture_ns, &q.stats, &mut |p| q.push(p));
                }
                if let Some(s) = stamper.as_mut() {
                    match s.stamp(&f, i, capture_ns) {
                        Ok(g) => f = g,
                        Err(_) => {
                            queues.stamp_errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
                if let Some(r) = reference.as_mut() {
                    if r.write(&f).is_err() {
                        // Disk full or gone: stop writing, keep streaming.
                        reference = None;
                        queues.stamp_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                let want = queues.target_kbps.load(Ordering::Relaxed);
                if want != 0 && want != applied_kbps {
                    applied_kbps = want;
                    if enc
                        .set_total_kbps(want.min(u32::MAX as u64) as u32)
                        .is_err()
                    {
                        queues.encode_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
                if queues.force_key.swap(false, Ordering::Relaxed) {
                    queues.keys_forced.fetch_add(1, Ordering::Relaxed);
                    enc.request_keyframe();
                }
                let sync = queues.force_sync.swap(0, Ordering::Relaxed);
                if sync != 0 {
                    queues.syncs_forced.fetch_add(1, Ordering::Relaxed);
                    for sl in 1..v_spatial {
                        if sync & (1 << sl) != 0 {
                            enc.request_spatial_sync(sl);
                        }
                    }
                }
                // RTP time from the capture time on the session's media clock (the audio track
                // uses the same epoch at 48 kHz; docs/protocols/audio.md).
                let pts = (capture_ns.saturating_sub(clock.epoch_ns) as u128 * 90_000
                    / 1_000_000_000) as i64;
                i += 1;
                match enc.encode(&f, pts) {
                    Ok(Some(pic)) => {
                        queue_picture(&queues, &mut streams, &pic, capture_ns, &mut ring)
                    }
                    Ok(None) => {}
                    Err(_) => {
                        queues.encode_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        })
        .map_err(|e| Error::io("spawning the encoder thread", e))
}

/// Packetizes one encoded picture and hands it to the media thread.
fn queue_picture(
    queues: &LayerQueues,
    streams: &mut LayerStreams,
    pic: &codec::vpx::EncodedPicture,
    capture_ns: u64,
    ring: &mut rtrb::Producer<Picture>,
) {
    match streams.packets(pic) {
        Ok(per_layer) => {
            // Before the count: a reader that sees the picture counted sees its latency.
            let s = unix_ns().saturating_sub(capture_ns) as f64 / 1e9;
            if let Ok(mut h) = queues.encode_latency.lock() {
                h.record(s);
            }
            queues.pictures.fetch_add(1, Ordering::Relaxed);
            queues
                .layer_frames_dropped
                .fetch_add(u64::from(pic.dropped_mask.count_ones()), Ordering::Relaxed);
            let p = Picture {
                key: pic.key,
                sync: pic.sync_mask != 0,
                cells: per_layer
                    .into_iter()
                    .map(|pk| {
                        pk.into_iter()
                            .map(|lp| MediaPacket {
                                header: lp.header,
                                payload: lp.payload,
                            })
                            .collect()
                    })
                    .collect(),
            };
            if ring.push(p).is_err() {
                queues.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
        Err(_) => {
            queues.encode_errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// The QR payload of frame `n` captured at `capture_ns`: the frame number in decimal followed
/// by the capture time as exactly 19 decimal digits (unix ns). All digits, so QR numeric mode
/// keeps the code at version 1 (21 x 21 modules) for frame numbers up to 15 digits.
pub fn qr_payload(n: u64, capture_ns: u64) -> String {
    format!("{n}{capture_ns:019}")
}

/// `qroverlay` module size in top-layer pixels: 2 pixels per module at the lowest spatial
/// layer (each spatial layer halves the size), i.e. 8 for three spatial layers. Measured with
/// libvpx at 30 kbit/s for 160x90: 1.75 px/module still read on 60 of 60 frames, 1.5 on none.
pub fn qr_pixel_size(spatial: usize) -> f64 {
    (2.0 * (1u32 << spatial.saturating_sub(1)) as f64).max(3.0)
}

/// Stamps frames in-process: `appsrc ! qroverlay ! appsink`, the `data` property set to the
/// frame's payload before each push. The code sits in the top-left corner (x = 1 %, y = 2 % of
/// the frame, plus qroverlay's own 4-module white quiet zone), so a reader scans only the left
/// half of the picture.
pub struct Stamper {
    pipeline: gst::Pipeline,
    src: gst_app::AppSrc,
    sink: gst_app::AppSink,
    info: gst_video::VideoInfo,
    fps: u32,
}

fn gerr(what: &str, e: impl std::fmt::Display) -> Error {
    Error::BadRequest(format!("qroverlay stamper: {what}: {e}"))
}

impl Stamper {
    pub fn new(w: u32, h: u32, fps: u32, pixel_size: f64) -> Result<Stamper> {
        gst::init().map_err(|e| gerr("init", e))?;
        let caps = format!("video/x-raw,format=I420,width={w},height={h},framerate={fps}/1");
        let desc = format!(
            "appsrc name=src format=time caps={caps} ! qroverlay name=qr pixel-size={pixel_size} \
             x=1 y=2 qrcode-error-correction=1 ! {caps} ! appsink name=sink sync=false"
        );
        let pipeline = gst::parse::launch(&desc)
            .map_err(|e| gerr("pipeline (is gstreamer1.0-plugins-bad installed?)", e))?
            .downcast::<gst::Pipeline>()
            .map_err(|_| gerr("pipeline", "not a pipeline"))?;
        let get = |n: &str| {
            pipeline
                .by_name(n)
                .ok_or_else(|| gerr("pipeline", format!("{n} missing")))
        };
        let src = get("src")?
            .downcast::<gst_app::AppSrc>()
            .map_err(|_| gerr("pipeline", "src"))?;
        let sink = get("sink")?
            .downcast::<gst_app::AppSink>()
            .map_err(|_| gerr("pipeline", "sink"))?;
        let info = gst_video::VideoInfo::builder(gst_video::VideoFormat::I420, w, h)
            .build()
            .map_err(|e| gerr("caps", e))?;
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| gerr("start", e))?;
        Ok(Stamper {
            pipeline,
            src,
            sink,
            info,
            fps,
        })
    }

    /// Returns frame `n` (tightly packed I420) with its QR stamp.
    pub fn stamp(&mut self, frame: &[u8], n: u64, capture_ns: u64) -> Result<Vec<u8>> {
        let mut buffer = gst::Buffer::with_size(self.info.size()).map_err(|e| gerr("buffer", e))?;
        {
            let b = buffer.get_mut().ok_or_else(|| gerr("buffer", "shared"))?;
            b.set_pts(gst::ClockTime::from_nseconds(
                n * 1_000_000_000 / self.fps.max(1) as u64,
            ));
            // Per-buffer payload through the element's custom meta: qroverlay 1.22 never
            // re-renders after a change of its `data` property (it keeps reusing the first
            // code), the meta path always renders.
            let mut meta =
                gst::meta::CustomMeta::add(b, "GstQROverlayMeta").map_err(|e| gerr("meta", e))?;
            meta.mut_structure().set("data", qr_payload(n, capture_ns));
            let mut vf = gst_video::VideoFrameRef::from_buffer_ref_writable(b, &self.info)
                .map_err(|e| gerr("map", e))?;
            copy_planes(frame, &mut vf, self.info.width(), self.info.height())?;
        }
        self.src.push_buffer(buffer).map_err(|e| gerr("push", e))?;
        let sample = self
            .sink
            .try_pull_sample(gst::ClockTime::from_seconds(2))
            .ok_or_else(|| gerr("pull", "no frame out of qroverlay within 2 s"))?;
        let out = sample.buffer().ok_or_else(|| gerr("pull", "no buffer"))?;
        let vf = gst_video::VideoFrameRef::from_buffer_ref_readable(out, &self.info)
            .map_err(|e| gerr("map", e))?;
        let (w, h) = (self.info.width() as usize, self.info.height() as usize);
        let mut res = Vec::with_capacity(frame.len());
        for (p, pw, ph) in [
            (0u32, w, h),
            (1, w.div_ceil(2), h.div_ceil(2)),
            (2, w.div_ceil(2), h.div_ceil(2)),
        ] {
            let data = vf.plane_data(p).map_err(|e| gerr("plane", e))?;
            let stride = vf.plane_stride()[p as usize] as usize;
            for row in 0..ph {
                let line = data
                    .get(row * stride..row * stride + pw)
                    .ok_or_else(|| gerr("plane", "short"))?;
                res.extend_from_slice(line);
            }
        }
        Ok(res)
    }
}

fn copy_planes(
    frame: &[u8],
    vf: &mut gst_video::VideoFrameRef<&mut gst::BufferRef>,
    w: u32,
    h: u32,
) -> Result<()> {
    let (w, h) = (w as usize, h as usize);
    let mut off = 0;
    for (p, pw, ph) in [
        (0u32, w, h),
        (1, w.div_ceil(2), h.div_ceil(2)),
        (2, w.div_ceil(2), h.div_ceil(2)),
    ] {
        let stride = vf.plane_stride()[p as usize] as usize;
        let dst = vf.plane_data_mut(p).map_err(|e| gerr("plane", e))?;
        for row in 0..ph {
            let src = frame
                .get(off..off + pw)
                .ok_or_else(|| gerr("frame", "shorter than its size"))?;
            dst[row * stride..row * stride + pw].copy_from_slice(src);
            off += pw;
        }
    }
    Ok(())
}

impl Drop for Stamper {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// A YUV4MPEG2 (`.y4m`) writer of tightly packed I420 frames: header
/// `YUV4MPEG2 W<w> H<h> F<fps>:1 Ip A1:1 C420jpeg`, then `FRAME\n` + the planes per frame.
pub struct Y4mWriter {
    out: std::io::BufWriter<std::fs::File>,
    len: usize,
}

impl Y4mWriter {
    pub fn create(path: &std::path::Path, w: u32, h: u32, fps: u32) -> Result<Y4mWriter> {
        use std::io::Write;
        let what = || format!("creating {}", path.display());
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d).map_err(|e| Error::io(what(), e))?;
        }
        let f = std::fs::File::create(path).map_err(|e| Error::io(what(), e))?;
        let mut out = std::io::BufWriter::with_capacity(1 << 20, f);
        writeln!(out, "YUV4MPEG2 W{w} H{h} F{fps}:1 Ip A1:1 C420jpeg")
            .map_err(|e| Error::io(what(), e))?;
        Ok(Y4mWriter {
            out,
            len: synth::i420_len(w, h),
        })
    }

    pub fn write(&mut self, frame: &[u8]) -> std::io::Result<()> {
        use std::io::Write;
        let f = frame
            .get(..self.len)
            .ok_or(std::io::ErrorKind::InvalidInput)?;
        self.out.write_all(b"FRAME\n")?;
        self.out.write_all(f)?;
        // Flushed per frame: the file is read while the session still runs.
        self.out.flush()
    }
}

/// The reference writer of `reference_dir`: a [`Y4mWriter`] on a thread of its own, fed
/// through a queue of up to 2 s of frames, so that the encoder thread never waits for the
/// disk. Why: written on the encoder thread, each frame waited for the write; when the
/// kernel's writeback of a test run's other outputs began (about 28 s into every quality
/// suite run, when the players' decoded pictures, 60-70 MB/s, reached the dirty-page
/// threshold), the encoder stalled 0.2-0.4 s and every viewer froze at once. No frame is
/// dropped (the analysis aligns the file by frame number): a writer 2 s behind blocks.
pub struct ReferenceWriter {
    tx: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    failed: Arc<std::sync::atomic::AtomicBool>,
}

impl ReferenceWriter {
    pub fn create(path: &std::path::Path, w: u32, h: u32, fps: u32) -> Result<ReferenceWriter> {
        let mut y = Y4mWriter::create(path, w, h, fps)?;
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>((2 * fps).max(2) as usize);
        let failed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let f = failed.clone();
        let thread = std::thread::Builder::new()
            .name("reference-y4m".into())
            .spawn(move || {
                for frame in rx {
                    if y.write(&frame).is_err() {
                        f.store(true, Ordering::Relaxed);
                        return;
                    }
                }
            })
            .map_err(|e| Error::io("spawning the reference writer", e))?;
        Ok(ReferenceWriter {
            tx: Some(tx),
            thread: Some(thread),
            failed,
        })
    }

    /// Queues one frame; an error once the writer has failed (disk full or gone).
    pub fn write(&mut self, frame: &[u8]) -> Result<()> {
        let stopped = || {
            Error::io(
                "writing the reference pictures",
                std::io::Error::other("the writer stopped"),
            )
        };
        if self.failed.load(Ordering::Relaxed) {
            return Err(stopped());
        }
        match &self.tx {
            Some(tx) => tx.send(frame.to_vec()).map_err(|_| stopped()),
            None => Err(stopped()),
        }
    }
}

impl Drop for ReferenceWriter {
    /// Writes what is queued, then joins the thread.
    fn drop(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod stamp_tests {
    use super::*;

    /// Reads the QR code of the luma plane with `zbarimg` (zbar-tools, scripts/setup.sh).
    pub(super) fn zbar_luma(y: &[u8], w: u32, h: u32, name: &str) -> String {
        // Under the build's own directory, not /tmp, where nothing would clean it up.
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join(format!("../target/tmp/lc-stamp-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("{name}.pgm"));
        let mut pgm = format!("P5\n{w} {h}\n255\n").into_bytes();
        pgm.extend_from_slice(&y[..(w * h) as usize]);
        std::fs::write(&p, pgm).unwrap();
        let out = std::process::Command::new("zbarimg")
            .args(["-q", "--raw"])
            .arg(&p)
            .output()
            .expect("zbarimg (apt zbar-tools)");
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn stamp_reads_back_at_top_and_lowest_layer_size() {
        let (w, h) = (640, 360);
        let mut s = Stamper::new(w, h, 15, qr_pixel_size(3)).unwrap();
        for n in [0u64, 7, 123_456] {
            let cap = 1_763_776_000_123_456_789 + n;
            let f = s.stamp(&synth::frame(w, h, n as u32), n, cap).unwrap();
            assert_eq!(f.len(), synth::i420_len(w, h));
            let want = qr_payload(n, cap);
            assert_eq!(zbar_luma(&f, w, h, "top"), want);
            // The lowest spatial layer of L3 is a quarter of the size in each direction.
            let small = synth::scale_i420(&f, w, h, w / 4, h / 4);
            assert_eq!(zbar_luma(&small, w / 4, h / 4, "low"), want);
        }
        assert_eq!(qr_payload(12, 5), "120000000000000000005");
    }

    /// The burst credit is `pacer_credit_ms`, capped at one frame period of each layer's
    /// temporal layer (spatial-major order); `pacer_peak` 1 means strict pacing.
    #[test]
    fn burst_credit_is_the_credit_capped_at_one_frame_period() {
        let mut v = ResolvedVideo {
            width: 640,
            height: 360,
            fps: 15,
            spatial: 2,
            temporal: 3,
            cell_kbps: vec![vec![10, 10, 10], vec![20, 20, 20]],
            order: codec::ladder::LayerOrder::SpatialMajor,
            keyframe_interval: 30,
            qroverlay: false,
            reference_dir: None,
            rate_headroom: 1.3,
            key_headroom: 2.0,
            pacer_peak: 8.0,
            pacer_credit: Duration::from_millis(120),
            max_discardable_wait: None,
            max_middle_wait: None,
            key_mid_min_q: 0,
        };
        let b = burst_for_video(&v).unwrap();
        assert_eq!(b.peak, 8.0);
        let ms = |b: &Burst| -> Vec<u128> { b.credit.iter().map(|d| d.as_millis()).collect() };
        assert_eq!(ms(&b), vec![120; 6]);
        // A credit longer than a frame period: TL0 and TL1 at 15/4 fps, TL2 at 15/2 fps.
        v.pacer_credit = Duration::from_millis(500);
        let b = burst_for_video(&v).unwrap();
        assert_eq!(ms(&b), vec![266, 266, 133, 266, 266, 133]);
        v.pacer_peak = 1.0;
        assert_eq!(burst_for_video(&v), None);
    }

    #[test]
    fn reference_file_has_one_frame_per_write() {
        let dir = std::env::temp_dir().join(format!("lc-y4m-{}", std::process::id()));
        let p = dir.join("reference.y4m");
        let mut y = Y4mWriter::create(&p, 64, 64, 15).unwrap();
        for n in 0..3 {
            y.write(&synth::frame(64, 64, n)).unwrap();
        }
        drop(y);
        let data = std::fs::read(&p).unwrap();
        let header = b"YUV4MPEG2 W64 H64 F15:1 Ip A1:1 C420jpeg\n";
        assert!(data.starts_with(header));
        assert_eq!(data.len(), header.len() + 3 * (6 + synth::i420_len(64, 64)));
        // The threaded writer: every frame queued is in the file, in order, once dropped
        // (more frames than its queue holds).
        let mut r = ReferenceWriter::create(&p, 64, 64, 15).unwrap();
        let frames: Vec<Vec<u8>> = (0..40).map(|n| synth::frame(64, 64, n)).collect();
        for f in &frames {
            r.write(f).unwrap();
        }
        drop(r);
        let data = std::fs::read(&p).unwrap();
        let size = 6 + synth::i420_len(64, 64);
        assert_eq!(data.len(), header.len() + 40 * size);
        for (n, f) in frames.iter().enumerate() {
            let at = header.len() + n * size + 6;
            assert_eq!(&data[at..at + f.len()], &f[..], "frame {n}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

#[cfg(test)]
mod stamp_probe {
    use super::*;
    use codec::vpx::{Decoder, SvcConfig, SvcEncoder};

    /// Measurement: how many spatial-layer-0 pictures of an encoded L3T3 640x360@15 stream
    /// (the server's default ladder) zbar reads, per stamp pixel size (docs/player.md, "QR
    /// read-back at the lowest layer"): `cargo test --release -p layercast-server --bin
    /// layercast-server stamp_probe -- --ignored --nocapture`.
    #[test]
    #[ignore = "measurement"]
    fn stamp_read_rate_at_lowest_layer() {
        let (w, h) = (640u32, 360u32);
        for px in [8.0, 9.0, 10.0] {
            let mut conf = SvcConfig::l3t3_720p();
            conf.width = w;
            conf.height = h;
            conf.fps_num = 15;
            conf.keyframe_interval = 30;
            conf.cell_kbps = vec![vec![45, 15, 15], vec![120, 40, 40], vec![300, 100, 100]];
            let mut enc = SvcEncoder::new(conf).unwrap();
            let mut dec = Decoder::new(1).unwrap();
            let mut s = Stamper::new(w, h, 15, px).unwrap();
            let (mut n, mut ok, mut by_t) = (0, 0, [[0u32; 2]; 3]);
            // The decoded lowest layer, for the player's reader: LC_QR_PROBE=<this file>.
            let out = std::env::temp_dir().join(format!("qrprobe-{px}.y4m"));
            let mut y4m = Y4mWriter::create(&out, 160, 90, 15).unwrap();
            for i in 0..90u64 {
                let f = s
                    .stamp(
                        &synth::frame(w, h, i as u32),
                        i,
                        1_763_776_000_000_000_000 + i,
                    )
                    .unwrap();
                let Some(p) = enc.encode(&f, i as i64 * 6000).unwrap() else {
                    continue;
                };
                let l0: Vec<&[u8]> = p
                    .frames
                    .iter()
                    .filter(|f| f.spatial == 0)
                    .map(|f| f.data.as_slice())
                    .collect();
                let Some(d) = dec.decode_layers(&l0).unwrap() else {
                    continue;
                };
                n += 1;
                y4m.write(&d.i420).unwrap();
                let got = super::stamp_tests::zbar_luma(&d.i420, d.width, d.height, "probe");
                let good = got == qr_payload(i, 1_763_776_000_000_000_000 + i);
                by_t[p.temporal as usize][0] += 1;
                if good {
                    ok += 1;
                    by_t[p.temporal as usize][1] += 1;
                }
            }
            println!("pixel-size {px}: read {ok} of {n} at layer 0; by temporal layer (n, read) {by_t:?}");
        }
    }
}

/// The pacing-policy study (docs/server.md "Layer rates and latency").
#[cfg(test)]
mod latency_study;

#[cfg(test)]
mod source_injection {
    use super::FrameSource;

    /// Review finding F1: a `source` carrying pipeline text (extra elements that read a
    /// file and write it elsewhere) must be refused where the session config is resolved.
    #[test]
    fn source_with_pipeline_text_is_refused() {
        for a in [
            "file:///x filesrc location=/etc/hostname ! filesink location=/tmp/lc-pwn",
            "file:///x!filesink location=/tmp/lc-pwn",
            "v4l2:///dev/video0 ! filesink location=/tmp/lc-pwn",
        ] {
            assert!(FrameSource::from_source(a).is_none(), "accepted {a:?}");
        }
    }
}
