//! A session's media source: one in-process GStreamer pipeline, built element by element
//! (never from pipeline text), with an appsink for raw video (I420 at the encoder's size and
//! rate) and one for raw audio (S16LE, 48 kHz).
//!
//! Why elements and not a description: a description is a small language (`!`, extra
//! chains, properties), so a source string spliced into one could add elements that read or
//! write files or open connections (review finding F1). Here the user's string can only ever
//! be the `uri` property of `uridecodebin` (after an allow-list of schemes) or the device
//! property of a capture element (after a check of its characters).
//!
//! Time: both appsinks report each buffer's capture time as the pipeline clock's instant for
//! the buffer's running time, mapped to Unix time once per pipeline start. Audio and video of
//! one source are therefore on one clock, without the jitter of when the buffers were pulled.
//! Files play in real time (appsinks synchronise to the clock) and loop without a gap: the
//! pipeline plays them as a segment and seeks back to the start, without flushing, when the
//! segment is done, so running time (and the capture times) go on across the loop; rebuilding
//! the pipeline at the end instead left a 260-470 ms hole in the pictures at every loop (the
//! quality suite's 5.3-s clip: a freeze every loop for every viewer). Where the segment seek
//! is refused, the pipeline is rebuilt at end of stream. A watchdog rebuilds it too when no picture came for
//! [`STALL_FRAME_PERIODS`] frame periods (a stalled camera, a dead RTSP server: finding F12),
//! and counts it.

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video::prelude::*;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// URI schemes a session's `source` may use.
pub const URI_SCHEMES: &[&str] = &["file", "http", "https", "rtsp", "rtsps", "srt"];

/// Frame periods without a picture after which the pipeline is rebuilt.
pub const STALL_FRAME_PERIODS: u32 = 30;

/// Frame periods after its capture time from which a picture counts as late
/// ([`SourceStats::late`]).
pub const LATE_FRAME_PERIODS: u32 = 3;

/// How far ahead of the clock the decoding and scaling of a file may run: a queue of this
/// much raw media between them and each appsink. Why: the appsinks synchronise to the clock,
/// so without it the streaming thread decoded each picture just in time, and when it did not
/// run for a while (a busy core: on the quality suite's 2-core machine, the encoder and six
/// players) the pictures of that while reached the appsink at once and all but its newest two
/// were dropped: a hole of 200-450 ms in the picture sequence, a freeze for every viewer
/// (`a_decode_hiccup_does_not_make_pictures_late`). A live source fills no queue: no latency
/// is added. Memory: 300 ms of raw pictures (10 at 720p30: 14 MB).
pub const DECODE_AHEAD_MS: u64 = 300;

/// Longest source string accepted.
const MAX_SOURCE_LEN: usize = 2048;

/// The test pattern's flash period: one white picture and one beep per period.
pub const FLASH_PERIOD_NS: u64 = 1_000_000_000;
/// Length of the beep.
pub const BEEP_NS: u64 = 60_000_000;

/// What a session's `source` names, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SourceSpec {
    /// `gst-testpattern`: `videotestsrc` (moving ball) with a white flash every
    /// [`FLASH_PERIOD_NS`], and an `audiotestsrc` tone with a beep at every flash.
    TestPattern,
    /// A URI of an allowed scheme, decoded by `uridecodebin`.
    Uri(String),
    /// A V4L2 camera by device path (`v4l2:///dev/video0`), and optionally an ALSA capture
    /// device by name for its sound (`v4l2:///dev/video0?alsa=hw:1,0`).
    Capture { video: String, alsa: Option<String> },
}

/// Why a `source` string was refused.
pub fn parse(source: &str) -> Result<SourceSpec, String> {
    if source == "gst-testpattern" {
        return Ok(SourceSpec::TestPattern);
    }
    if source.len() > MAX_SOURCE_LEN {
        return Err(format!("longer than {MAX_SOURCE_LEN} bytes"));
    }
    if let Some(c) = source
        .chars()
        .find(|c| c.is_whitespace() || c.is_control() || matches!(c, '"' | '\'' | '\\' | '!'))
    {
        return Err(format!("contains {c:?}: a source is one URI"));
    }
    let (scheme, rest) = source
        .split_once("://")
        .ok_or_else(|| "not a URI (scheme://...)".to_string())?;
    let scheme = scheme.to_ascii_lowercase();
    if scheme == "v4l2" {
        let (dev, query) = match rest.split_once('?') {
            Some((d, q)) => (d, Some(q)),
            None => (rest, None),
        };
        let ok_dev = dev.strip_prefix("/dev/video").is_some_and(|n| {
            !n.is_empty() && n.len() <= 3 && n.bytes().all(|b| b.is_ascii_digit())
        });
        if !ok_dev {
            return Err(format!("{dev:?} is not a /dev/videoN device"));
        }
        let alsa = match query {
            None => None,
            Some(q) => {
                let name = q
                    .strip_prefix("alsa=")
                    .ok_or_else(|| format!("unknown parameter {q:?} (only alsa=NAME)"))?;
                if name.is_empty()
                    || name.len() > 64
                    || !name.bytes().all(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b':' | b',' | b'_' | b'-' | b'.')
                    })
                {
                    return Err(format!("{name:?} is not an ALSA device name"));
                }
                Some(name.to_string())
            }
        };
        return Ok(SourceSpec::Capture {
            video: dev.to_string(),
            alsa,
        });
    }
    if !URI_SCHEMES.contains(&scheme.as_str()) {
        return Err(format!(
            "scheme {scheme:?} not allowed (one of {}, v4l2)",
            URI_SCHEMES.join(", ")
        ));
    }
    if rest.is_empty() {
        return Err("URI without a location".into());
    }
    // RFC 3986 characters only (unreserved, reserved, percent escapes), less `!` and `'`.
    if !rest
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"-._~:/?#[]@$&()*+,;=%".contains(&b))
    {
        return Err("not a valid URI".into());
    }
    Ok(SourceSpec::Uri(source.to_string()))
}

/// What the source delivers: the encoder's picture format and the audio format.
#[derive(Clone, Debug, PartialEq)]
pub struct SourceFormat {
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    /// Audio channels (0: no audio branch).
    pub channels: u8,
}

/// One picture: tightly packed I420 and its capture time (Unix ns).
pub struct Picture {
    pub i420: Vec<u8>,
    pub capture_ns: u64,
}

/// Interleaved S16 samples at 48 kHz and the capture time of the first one (Unix ns).
pub type AudioSink = Box<dyn FnMut(&[i16], u64) + Send>;

/// Counters of the source (exported per session in the API and `/metrics`).
#[derive(Debug, Default)]
pub struct SourceStats {
    /// Pictures delivered to the encoder.
    pub pictures: AtomicU64,
    /// Audio buffers delivered.
    pub audio_buffers: AtomicU64,
    /// Pipeline (re)builds: the first start, end-of-stream loops, errors, stalls.
    pub starts: AtomicU64,
    pub eos: AtomicU64,
    /// Gapless loops of a file (segment seeks back to its start).
    pub loops: AtomicU64,
    /// Pictures dropped because their running time did not advance past the previous one's
    /// (at a loop of a file whose container ends one frame short, see [`MediaSource::pull`]).
    pub repeats: AtomicU64,
    pub errors: AtomicU64,
    /// Watchdog: times no picture came for [`STALL_FRAME_PERIODS`] frame periods.
    pub stalls: AtomicU64,
    /// Pictures handed to the encoder more than [`LATE_FRAME_PERIODS`] frame periods after
    /// their capture time: source-side latency every viewer sees (a loop seek issued late,
    /// a decoder that fell behind).
    pub late: AtomicU64,
    /// Pictures missing between two handed to the encoder from one pipeline run (capture
    /// times more than one frame period apart): dropped before the encoder saw them (a
    /// rebuild's gap is in `stalls`, `eos` or `errors`). One per loop of a file whose
    /// container ends a frame short (see [`MediaSource::pull`]); more is a hole every viewer
    /// sees as a freeze.
    pub skipped: AtomicU64,
    /// The last error message of the pipeline, for the API.
    pub last_error: Mutex<Option<String>>,
}

/// The running pipeline of a session and what rebuilds it.
pub struct MediaSource {
    spec: SourceSpec,
    fmt: SourceFormat,
    pipeline: Option<Running>,
    audio: Arc<Mutex<Option<AudioSink>>>,
    pub stats: Arc<SourceStats>,
    frame_len: usize,
    last_picture: Instant,
    /// Loops counted, and the picture count when the last one was seen (for the late log).
    seen_loops: u64,
    loop_picture: u64,
    /// The previous picture was late (one log line per run of late pictures).
    in_late_run: bool,
    /// Capture time of the last picture handed over (for [`SourceStats::skipped`]).
    last_capture_ns: Option<u64>,
}

struct Running {
    pipeline: gst::Pipeline,
    video: gst_app::AppSink,
    /// Unix ns of running time 0 (set at the first buffer of either sink).
    anchor: Arc<Mutex<Option<u64>>>,
    /// Running time of the last picture delivered.
    last_rt: Option<u64>,
}

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

fn unix_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

fn make(factory: &str, name: &str) -> Result<gst::Element, String> {
    gst::ElementFactory::make(factory)
        .name(name)
        .build()
        .map_err(|_| format!("GStreamer element {factory} missing (gstreamer1.0-plugins-*)"))
}

/// Capture time of a buffer: the anchor plus its running time.
fn capture_ns(
    anchor: &Mutex<Option<u64>>,
    pipeline: &gst::Pipeline,
    segment: Option<&gst::Segment>,
    pts: Option<gst::ClockTime>,
) -> Option<(u64, u64)> {
    let pts = pts?;
    let rt = segment
        .and_then(|s| s.downcast_ref::<gst::format::Time>())
        .and_then(|s| s.to_running_time(pts))
        .unwrap_or(pts)
        .nseconds();
    let mut a = anchor.lock().unwrap_or_else(|p| p.into_inner());
    let base = *a.get_or_insert_with(|| {
        // Running time 0 was `now - (clock - base_time)` ago.
        let now = unix_ns();
        match (pipeline.clock(), pipeline.base_time()) {
            (Some(c), Some(b)) => {
                now.saturating_sub(c.time().nseconds().saturating_sub(b.nseconds()))
            }
            _ => now.saturating_sub(rt),
        }
    });
    Some((base + rt, rt))
}

/// Seeks `pipeline` to its start as a segment (`SEGMENT_DONE` instead of end of stream at the
/// end); `extra` FLUSH for the first seek, nothing for the loops (a flush would reset running
/// time). Whether the pipeline took it.
fn segment_seek(pipeline: &gst::Pipeline, extra: gst::SeekFlags) -> bool {
    pipeline
        .seek(
            1.0,
            gst::SeekFlags::SEGMENT | extra,
            gst::SeekType::Set,
            gst::ClockTime::ZERO,
            gst::SeekType::None,
            gst::ClockTime::NONE,
        )
        .is_ok()
}

/// Whether running time `rt` falls in the first `len` ns of a flash period.
fn in_flash(rt: u64, len: u64) -> bool {
    rt % FLASH_PERIOD_NS < len
}

impl MediaSource {
    /// A source of `spec` delivering `fmt`; nothing runs until the first [`Self::next_picture`].
    /// `audio` receives the audio buffers (on a GStreamer thread).
    pub fn new(spec: SourceSpec, fmt: SourceFormat, audio: Option<AudioSink>) -> MediaSource {
        let frame_len = codec::synth::i420_len(fmt.width, fmt.height);
        MediaSource {
            spec,
            fmt,
            pipeline: None,
            audio: Arc::new(Mutex::new(audio)),
            stats: Arc::new(SourceStats::default()),
            frame_len,
            last_picture: Instant::now(),
            seen_loops: 0,
            loop_picture: 0,
            in_late_run: false,
            last_capture_ns: None,
        }
    }

    fn frame_period(&self) -> Duration {
        Duration::from_secs_f64(1.0 / self.fmt.fps.max(1) as f64)
    }

    /// The next picture, waiting for it; `None` once `stop` is set. Rebuilds the pipeline at
    /// end of stream, on an error and when the watchdog fires.
    pub fn next_picture(&mut self, stop: &std::sync::atomic::AtomicBool) -> Option<Picture> {
        let stall = self.frame_period() * STALL_FRAME_PERIODS;
        while !stop.load(Ordering::Relaxed) {
            if self.pipeline.is_none() {
                if self.stats.starts.load(Ordering::Relaxed) > 0 {
                    std::thread::sleep(Duration::from_millis(200));
                }
                self.stats.starts.fetch_add(1, Ordering::Relaxed);
                match self.build() {
                    Ok(r) => self.pipeline = Some(r),
                    Err(e) => {
                        self.note_error(e);
                        std::thread::sleep(Duration::from_secs(1));
                        continue;
                    }
                }
                self.last_picture = Instant::now();
                // A rebuilt pipeline's gap is a stall or a restart, counted as such.
                self.last_capture_ns = None;
            }
            // The bus first, every time: a file's `SEGMENT_DONE` is posted when the demuxer
            // reaches the end, while the decoder's queue still holds pictures, and the loop
            // seek must go then. Looked at only after a pull had waited in vain, the seek
            // came when the appsink had run dry, and the loop's first pictures reached the
            // encoder 150-250 ms after their capture time (a freeze at every loop point).
            if !self.loop_if_done() {
                self.pipeline = None;
                continue;
            }
            if let Some(p) = self.pull(self.frame_period().min(Duration::from_millis(100))) {
                self.last_picture = Instant::now();
                self.stats.pictures.fetch_add(1, Ordering::Relaxed);
                self.note_timing(&p);
                return Some(p);
            }
            if self.check_bus() {
                self.pipeline = None;
                continue;
            }
            if self.last_picture.elapsed() >= stall {
                self.stats.stalls.fetch_add(1, Ordering::Relaxed);
                self.note_error(format!(
                    "no picture for {} ms: restarting the source",
                    stall.as_millis()
                ));
                self.pipeline = None;
            }
        }
        None
    }

    /// Counts a late picture and the pictures missing before it, and says on stderr where the
    /// first of a run of late pictures (or a hole of two or more) came: how late, how many
    /// missing, and how many pictures after the last loop seek (a late seek shows at 0-3).
    fn note_timing(&mut self, p: &Picture) {
        let n = self.stats.pictures.load(Ordering::Relaxed);
        let loops = self.stats.loops.load(Ordering::Relaxed);
        if loops != self.seen_loops {
            (self.seen_loops, self.loop_picture) = (loops, n);
        }
        let period = self.frame_period().as_nanos() as u64;
        let missing = match self.last_capture_ns.replace(p.capture_ns) {
            Some(last) => (p.capture_ns.saturating_sub(last) + period / 2) / period.max(1),
            None => 1,
        }
        .saturating_sub(1);
        self.stats.skipped.fetch_add(missing, Ordering::Relaxed);
        let behind = unix_ns().saturating_sub(p.capture_ns);
        let late = behind > period * LATE_FRAME_PERIODS as u64;
        if late {
            self.stats.late.fetch_add(1, Ordering::Relaxed);
        }
        if (late && !self.in_late_run) || missing >= 2 {
            let since = match loops {
                0 => "no loop yet".to_string(),
                _ => format!("{} after loop {loops}", n - self.loop_picture),
            };
            eprintln!(
                "layercast-server: source: picture {n} handed to the encoder {} ms after its capture time, {missing} missing before it ({since})",
                behind / 1_000_000
            );
        }
        self.in_late_run = late;
    }

    fn note_error(&self, e: String) {
        *self
            .stats
            .last_error
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(e);
    }

    /// Seeks back to the start when the bus says the file's segment is done; `false` when the
    /// seek was refused (the pipeline must be rebuilt). End of stream and errors stay on the
    /// bus for [`Self::check_bus`], after the appsink's last pictures.
    fn loop_if_done(&self) -> bool {
        let Some(r) = &self.pipeline else { return true };
        let Some(bus) = r.pipeline.bus() else {
            return true;
        };
        while bus.pop_filtered(&[gst::MessageType::SegmentDone]).is_some() {
            if !segment_seek(&r.pipeline, gst::SeekFlags::empty()) {
                self.stats.eos.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            self.stats.loops.fetch_add(1, Ordering::Relaxed);
        }
        true
    }

    /// End of stream or an error on the bus (the pipeline must be rebuilt).
    fn check_bus(&self) -> bool {
        let Some(r) = &self.pipeline else { return true };
        let Some(bus) = r.pipeline.bus() else {
            return true;
        };
        while let Some(msg) = bus.pop_filtered(&[
            gst::MessageType::Eos,
            gst::MessageType::Error,
            gst::MessageType::SegmentDone,
        ]) {
            match msg.view() {
                gst::MessageView::SegmentDone(_) => {
                    if segment_seek(&r.pipeline, gst::SeekFlags::empty()) {
                        self.stats.loops.fetch_add(1, Ordering::Relaxed);
                    } else {
                        self.stats.eos.fetch_add(1, Ordering::Relaxed);
                        return true;
                    }
                }
                gst::MessageView::Eos(_) => {
                    self.stats.eos.fetch_add(1, Ordering::Relaxed);
                    return true;
                }
                gst::MessageView::Error(e) => {
                    self.stats.errors.fetch_add(1, Ordering::Relaxed);
                    self.note_error(format!("{} ({:?})", e.error(), e.debug()));
                    return true;
                }
                _ => {}
            }
        }
        false
    }

    /// The next picture of the video appsink, `None` after `timeout`.
    ///
    /// Capture times strictly increase: a picture whose running time is not after the last
    /// one's is dropped and counted (`repeats`). A non-flushing loop seek starts the next
    /// segment at the demuxer's last position, which for a video-only Matroska file is the
    /// last picture's time, not its end, so the first picture of a loop lands on the last
    /// picture's running time; two pictures with one capture (RTP) time are one too many.
    fn pull(&mut self, timeout: Duration) -> Option<Picture> {
        let r = self.pipeline.as_mut()?;
        let sample = r
            .video
            .try_pull_sample(gst::ClockTime::from_nseconds(timeout.as_nanos() as u64))?;
        let buffer = sample.buffer()?;
        let (cap, rt) = match capture_ns(&r.anchor, &r.pipeline, sample.segment(), buffer.pts()) {
            Some((cap, rt)) => {
                if r.last_rt.is_some_and(|last| rt <= last) {
                    self.stats.repeats.fetch_add(1, Ordering::Relaxed);
                    return None;
                }
                r.last_rt = Some(rt);
                (cap, rt)
            }
            None => (unix_ns(), 0),
        };
        let info = gstreamer_video::VideoInfo::from_caps(sample.caps()?).ok()?;
        if info.width() != self.fmt.width || info.height() != self.fmt.height {
            return None;
        }
        let frame = gstreamer_video::VideoFrameRef::from_buffer_ref_readable(buffer, &info).ok()?;
        let (w, h) = (self.fmt.width as usize, self.fmt.height as usize);
        let mut out = Vec::with_capacity(self.frame_len);
        for (plane, pw, ph) in [
            (0u32, w, h),
            (1, w.div_ceil(2), h.div_ceil(2)),
            (2, w.div_ceil(2), h.div_ceil(2)),
        ] {
            let data = frame.plane_data(plane).ok()?;
            let stride = frame.plane_stride()[plane as usize] as usize;
            for row in 0..ph {
                out.extend_from_slice(data.get(row * stride..row * stride + pw)?);
            }
        }
        let flash = self.spec == SourceSpec::TestPattern
            && in_flash(rt, 1_000_000_000 / self.fmt.fps.max(1) as u64);
        if flash {
            paint_white(&mut out, w * h);
        }
        Some(Picture {
            i420: out,
            capture_ns: cap,
        })
    }

    fn build(&self) -> Result<Running, String> {
        gst::init().map_err(|e| e.to_string())?;
        let pipeline = gst::Pipeline::with_name("layercast-source");
        let anchor = Arc::new(Mutex::new(None));
        let video = self.video_branch(&pipeline)?;
        let audio_in = if self.fmt.channels > 0 {
            Some(self.audio_branch(&pipeline, &anchor)?)
        } else {
            None
        };
        let video_in = video.0.clone();
        match &self.spec {
            SourceSpec::TestPattern => {
                let v = make("videotestsrc", "vsrc")?;
                v.set_property("is-live", true);
                v.set_property_from_str("pattern", "ball");
                pipeline.add(&v).map_err(|e| e.to_string())?;
                v.link(&video_in).map_err(|e| e.to_string())?;
                if let Some(a_in) = &audio_in {
                    let a = make("audiotestsrc", "asrc")?;
                    a.set_property("is-live", true);
                    a.set_property("freq", 440.0f64);
                    a.set_property("volume", 0.05f64);
                    // 20-ms buffers keep the beep's start on a buffer boundary of the encoder.
                    a.set_property("samplesperbuffer", 960i32);
                    pipeline.add(&a).map_err(|e| e.to_string())?;
                    a.link(a_in).map_err(|e| e.to_string())?;
                }
            }
            SourceSpec::Uri(uri) => {
                let d = make("uridecodebin", "dec")?;
                d.set_property("uri", uri);
                pipeline.add(&d).map_err(|e| e.to_string())?;
                let (v_in, a_in) = (video_in.clone(), audio_in.clone());
                d.connect_pad_added(move |_, pad| {
                    let caps = pad.current_caps().or_else(|| Some(pad.query_caps(None)));
                    let name = caps
                        .as_ref()
                        .and_then(|c| c.structure(0))
                        .map(|s| s.name().to_string())
                        .unwrap_or_default();
                    let target = if name.starts_with("video/") {
                        Some(&v_in)
                    } else if name.starts_with("audio/") {
                        a_in.as_ref()
                    } else {
                        None
                    };
                    if let Some(sink) = target.and_then(|e| e.static_pad("sink")) {
                        if !sink.is_linked() {
                            let _ = pad.link(&sink);
                        }
                    }
                });
            }
            SourceSpec::Capture { video: dev, alsa } => {
                let v = make("v4l2src", "vsrc")?;
                v.set_property("device", dev);
                pipeline.add(&v).map_err(|e| e.to_string())?;
                v.link(&video_in).map_err(|e| e.to_string())?;
                if let (Some(a_in), Some(name)) = (&audio_in, alsa) {
                    let a = make("alsasrc", "asrc")?;
                    a.set_property("device", name);
                    pipeline.add(&a).map_err(|e| e.to_string())?;
                    a.link(a_in).map_err(|e| e.to_string())?;
                }
            }
        }
        if matches!(&self.spec, SourceSpec::Uri(u) if u.starts_with("file://")) {
            // Prerolled, a file can be played as a segment (see the module doc); if it cannot,
            // it plays to its end and the pipeline is rebuilt there.
            let _ = pipeline.set_state(gst::State::Paused);
            let (res, _, _) = pipeline.state(gst::ClockTime::from_seconds(5));
            if res.is_ok() {
                segment_seek(&pipeline, gst::SeekFlags::FLUSH);
            }
        }
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| format!("starting the source pipeline: {e}"))?;
        Ok(Running {
            pipeline,
            video: video.1,
            anchor,
            last_rt: None,
        })
    }

    /// `videoconvert ! videoscale ! videorate ! I420 WxH@F ! appsink`; returns the first
    /// element (to link the source to) and the sink.
    fn video_branch(&self, p: &gst::Pipeline) -> Result<(gst::Element, gst_app::AppSink), String> {
        let conv = make("videoconvert", "vconv")?;
        let scale = make("videoscale", "vscale")?;
        let rate = make("videorate", "vrate")?;
        let caps = gst::Caps::builder("video/x-raw")
            .field("format", "I420")
            .field("width", self.fmt.width as i32)
            .field("height", self.fmt.height as i32)
            .field("framerate", gst::Fraction::new(self.fmt.fps as i32, 1))
            .field("pixel-aspect-ratio", gst::Fraction::new(1, 1))
            .build();
        let sink = appsink("video", 2);
        chain(p, &[&conv, &scale, &rate], &caps, &sink, "vcaps")?;
        Ok((conv, sink))
    }

    /// `audioconvert ! audioresample ! S16LE 48 kHz ! appsink` with a callback that hands
    /// each buffer (with its capture time) to the audio sink, adding the test pattern's beep.
    fn audio_branch(
        &self,
        p: &gst::Pipeline,
        anchor: &Arc<Mutex<Option<u64>>>,
    ) -> Result<gst::Element, String> {
        let conv = make("audioconvert", "aconv")?;
        let res = make("audioresample", "ares")?;
        let caps = gst::Caps::builder("audio/x-raw")
            .field("format", "S16LE")
            .field("rate", 48_000i32)
            .field("channels", self.fmt.channels as i32)
            .field("layout", "interleaved")
            .build();
        let sink = appsink("audio", 200);
        chain(p, &[&conv, &res], &caps, &sink, "acaps")?;
        let out = self.audio.clone();
        let stats = self.stats.clone();
        let anchor = anchor.clone();
        let weak = p.downgrade();
        let beep = self.spec == SourceSpec::TestPattern;
        let channels = self.fmt.channels as usize;
        sink.set_callbacks(
            gst_app::AppSinkCallbacks::builder()
                .new_sample(move |s| {
                    let sample = s.pull_sample().map_err(|_| gst::FlowError::Eos)?;
                    let (Some(buffer), Some(pipeline)) = (sample.buffer(), weak.upgrade()) else {
                        return Ok(gst::FlowSuccess::Ok);
                    };
                    let Some((cap, rt)) =
                        capture_ns(&anchor, &pipeline, sample.segment(), buffer.pts())
                    else {
                        return Ok(gst::FlowSuccess::Ok);
                    };
                    let map = buffer.map_readable().map_err(|_| gst::FlowError::Error)?;
                    let mut pcm: Vec<i16> = map
                        .chunks_exact(2)
                        .map(|b| i16::from_le_bytes([b[0], b[1]]))
                        .collect();
                    if beep {
                        add_beeps(&mut pcm, channels, rt);
                    }
                    stats.audio_buffers.fetch_add(1, Ordering::Relaxed);
                    if let Some(f) = out.lock().unwrap_or_else(|p| p.into_inner()).as_mut() {
                        f(&pcm, cap);
                    }
                    Ok(gst::FlowSuccess::Ok)
                })
                .build(),
        );
        Ok(conv)
    }
}

/// An appsink that synchronises to the pipeline clock and keeps at most `max` buffers (the
/// oldest dropped when its reader falls behind).
fn appsink(name: &str, max: u32) -> gst_app::AppSink {
    gst_app::AppSink::builder()
        .name(name)
        .sync(true)
        .max_buffers(max)
        .drop(true)
        .build()
}

/// Adds `elems ! capsfilter(caps) ! queue ! sink` to `p` and links them in that order; the
/// queue holds [`DECODE_AHEAD_MS`] of media.
fn chain(
    p: &gst::Pipeline,
    elems: &[&gst::Element],
    caps: &gst::Caps,
    sink: &gst_app::AppSink,
    filter_name: &str,
) -> Result<(), String> {
    let filter = make("capsfilter", filter_name)?;
    filter.set_property("caps", caps);
    let ahead = make("queue", &format!("{filter_name}-ahead"))?;
    ahead.set_property("max-size-buffers", 0u32);
    ahead.set_property("max-size-bytes", 0u32);
    ahead.set_property("max-size-time", DECODE_AHEAD_MS * 1_000_000);
    let mut all: Vec<&gst::Element> = elems.to_vec();
    all.push(&filter);
    all.push(&ahead);
    all.push(sink.upcast_ref());
    p.add_many(all.iter().copied()).map_err(|e| e.to_string())?;
    gst::Element::link_many(all.iter().copied()).map_err(|e| e.to_string())
}

/// Paints the luma of a picture white (235) and its chroma neutral: the test pattern's flash.
fn paint_white(i420: &mut [u8], luma: usize) {
    let (y, c) = i420.split_at_mut(luma.min(i420.len()));
    y.fill(235);
    c.fill(128);
}

/// Replaces the samples in the first [`BEEP_NS`] of every flash period by a loud 2-kHz tone
/// (`rt` = running time of the first sample).
fn add_beeps(pcm: &mut [i16], channels: usize, rt: u64) {
    let ch = channels.max(1);
    for (i, frame) in pcm.chunks_mut(ch).enumerate() {
        let t = rt + i as u64 * 1_000_000_000 / 48_000;
        if in_flash(t, BEEP_NS) {
            let phase = (t % FLASH_PERIOD_NS) as f64 / 1e9;
            let v = (16_000.0 * (2.0 * std::f64::consts::PI * 2000.0 * phase).sin()) as i16;
            frame.fill(v);
        }
    }
}

#[cfg(test)]
mod tests;
