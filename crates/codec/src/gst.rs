//! GStreamer glue: raw I420 frames from any source description into the encoder, decoded
//! frames out to any sink description. Feature `gst`.
//!
//! The source pipeline is `<description> ! videoconvert ! videoscale ! videorate !
//! video/x-raw,format=I420,width=W,height=H,framerate=N/D ! appsink`, so any source
//! (`videotestsrc`, `uridecodebin uri=…`, `v4l2src`, RTSP/SRT through `uridecodebin`) is
//! normalised to what the encoder was configured for. The sink pipeline is `appsrc !
//! videoconvert ! videoscale ! <description>`; caps follow each frame's size, since a partial
//! subscriber's decoded size changes with the layers it holds.

use crate::error::{Error, Result};
use crate::vpx::DecodedFrame;
use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;
use gstreamer_video as gst_video;
use gstreamer_video::prelude::*;

fn gerr(e: impl std::fmt::Display) -> Error {
    Error::Gst(e.to_string())
}

/// Caps of tightly packed I420 pictures of one size at a variable frame rate (`0/1`): what an
/// `appsrc` fed decoded pictures of a partial subscription announces, since the size follows the
/// layers held and pictures come when they are decoded.
pub fn i420_caps(width: u32, height: u32) -> gst::Caps {
    gst::Caps::builder("video/x-raw")
        .field("format", "I420")
        .field("width", width as i32)
        .field("height", height as i32)
        .field("framerate", gst::Fraction::new(0, 1))
        .build()
}

/// Initialise GStreamer once (idempotent).
pub fn init() -> Result<()> {
    gst::init().map_err(gerr)
}

/// One raw frame from a source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawFrame {
    /// Tightly packed I420.
    pub i420: Vec<u8>,
    /// Presentation time in 90 kHz units (from the buffer PTS; 0 if unset).
    pub pts_90k: i64,
}

/// A GStreamer source delivering I420 frames of a fixed size and rate.
pub struct GstSource {
    pipeline: gst::Pipeline,
    sink: gst_app::AppSink,
    width: u32,
    height: u32,
}

impl GstSource {
    /// Build and start `<description> ! … ! appsink` producing `width x height` I420 at
    /// `fps_num/fps_den`.
    pub fn new(
        description: &str,
        width: u32,
        height: u32,
        fps_num: u32,
        fps_den: u32,
    ) -> Result<Self> {
        init()?;
        let desc = format!(
            "{description} ! videoconvert ! videoscale ! videorate ! \
             video/x-raw,format=I420,width={width},height={height},framerate={fps_num}/{fps_den} ! \
             appsink name=lc_sink sync=false max-buffers=8"
        );
        let pipeline = gst::parse::launch(&desc)
            .map_err(gerr)?
            .downcast::<gst::Pipeline>()
            .map_err(|_| Error::Gst("description is not a pipeline".into()))?;
        let sink = pipeline
            .by_name("lc_sink")
            .ok_or_else(|| Error::Gst("appsink missing".into()))?
            .downcast::<gst_app::AppSink>()
            .map_err(|_| Error::Gst("lc_sink is not an appsink".into()))?;
        pipeline.set_state(gst::State::Playing).map_err(gerr)?;
        Ok(GstSource {
            pipeline,
            sink,
            width,
            height,
        })
    }

    /// Next frame; `None` at end of stream. Errors posted on the bus are returned.
    pub fn next_frame(&mut self) -> Result<Option<RawFrame>> {
        let sample = match self.sink.pull_sample() {
            Ok(s) => s,
            Err(_) => {
                self.check_bus()?;
                return Ok(None);
            }
        };
        let buffer = sample
            .buffer()
            .ok_or_else(|| Error::Gst("sample without buffer".into()))?;
        let caps = sample
            .caps()
            .ok_or_else(|| Error::Gst("sample without caps".into()))?;
        let info = gst_video::VideoInfo::from_caps(caps).map_err(gerr)?;
        if info.width() != self.width || info.height() != self.height {
            return Err(Error::Gst(format!(
                "source delivered {}x{}, expected {}x{}",
                info.width(),
                info.height(),
                self.width,
                self.height
            )));
        }
        let frame =
            gst_video::VideoFrameRef::from_buffer_ref_readable(buffer, &info).map_err(gerr)?;
        let (w, h) = (self.width as usize, self.height as usize);
        let mut out = Vec::with_capacity(crate::vpx::encoder_i420_len(self.width, self.height));
        for (plane, pw, ph) in [
            (0u32, w, h),
            (1, w.div_ceil(2), h.div_ceil(2)),
            (2, w.div_ceil(2), h.div_ceil(2)),
        ] {
            let data = frame.plane_data(plane).map_err(gerr)?;
            let stride = frame.plane_stride()[plane as usize] as usize;
            for row in 0..ph {
                let start = row * stride;
                let line = data
                    .get(start..start + pw)
                    .ok_or_else(|| Error::Gst("plane shorter than its stride says".into()))?;
                out.extend_from_slice(line);
            }
        }
        let pts_90k = buffer
            .pts()
            .map(|t| (t.nseconds() as u128 * 90_000 / 1_000_000_000) as i64)
            .unwrap_or(0);
        Ok(Some(RawFrame { i420: out, pts_90k }))
    }

    fn check_bus(&self) -> Result<()> {
        if let Some(bus) = self.pipeline.bus() {
            while let Some(msg) = bus.pop() {
                if let gst::MessageView::Error(e) = msg.view() {
                    return Err(Error::Gst(format!("{} ({:?})", e.error(), e.debug())));
                }
            }
        }
        Ok(())
    }
}

impl Drop for GstSource {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

/// A GStreamer sink fed decoded frames.
pub struct GstSink {
    pipeline: gst::Pipeline,
    src: gst_app::AppSrc,
    size: Option<(u32, u32)>,
    fps_num: i32,
    fps_den: i32,
}

impl GstSink {
    /// Build and start `appsrc ! videoconvert ! videoscale ! <description>`.
    pub fn new(description: &str, fps_num: u32, fps_den: u32) -> Result<Self> {
        init()?;
        let desc =
            format!("appsrc name=lc_src format=time ! videoconvert ! videoscale ! {description}");
        let pipeline = gst::parse::launch(&desc)
            .map_err(gerr)?
            .downcast::<gst::Pipeline>()
            .map_err(|_| Error::Gst("description is not a pipeline".into()))?;
        let src = pipeline
            .by_name("lc_src")
            .ok_or_else(|| Error::Gst("appsrc missing".into()))?
            .downcast::<gst_app::AppSrc>()
            .map_err(|_| Error::Gst("lc_src is not an appsrc".into()))?;
        pipeline.set_state(gst::State::Playing).map_err(gerr)?;
        Ok(GstSink {
            pipeline,
            src,
            size: None,
            fps_num: fps_num as i32,
            fps_den: fps_den as i32,
        })
    }

    /// Push one decoded frame with its 90 kHz timestamp.
    pub fn push(&mut self, frame: &DecodedFrame, pts_90k: i64) -> Result<()> {
        if self.size != Some((frame.width, frame.height)) {
            let info = gst_video::VideoInfo::builder(
                gst_video::VideoFormat::I420,
                frame.width,
                frame.height,
            )
            .fps(gst::Fraction::new(self.fps_num, self.fps_den))
            .build()
            .map_err(gerr)?;
            self.src.set_caps(Some(&info.to_caps().map_err(gerr)?));
            self.size = Some((frame.width, frame.height));
        }
        let info =
            gst_video::VideoInfo::builder(gst_video::VideoFormat::I420, frame.width, frame.height)
                .build()
                .map_err(gerr)?;
        // Copy into GStreamer's own plane layout (its strides may be padded).
        let mut buffer = gst::Buffer::with_size(info.size()).map_err(gerr)?;
        {
            let b = buffer
                .get_mut()
                .ok_or_else(|| Error::Gst("buffer not writable".into()))?;
            b.set_pts(gst::ClockTime::from_nseconds(
                (pts_90k.max(0) as u64).saturating_mul(1_000_000_000) / 90_000,
            ));
            let mut vf =
                gst_video::VideoFrameRef::from_buffer_ref_writable(b, &info).map_err(gerr)?;
            let (w, h) = (frame.width as usize, frame.height as usize);
            let mut off = 0;
            for (plane, pw, ph) in [
                (0u32, w, h),
                (1, w.div_ceil(2), h.div_ceil(2)),
                (2, w.div_ceil(2), h.div_ceil(2)),
            ] {
                let stride = vf.plane_stride()[plane as usize] as usize;
                let dst = vf.plane_data_mut(plane).map_err(gerr)?;
                for row in 0..ph {
                    let src = frame
                        .i420
                        .get(off..off + pw)
                        .ok_or_else(|| Error::Gst("decoded frame shorter than its size".into()))?;
                    dst[row * stride..row * stride + pw].copy_from_slice(src);
                    off += pw;
                }
            }
        }
        self.src.push_buffer(buffer).map_err(gerr)?;
        Ok(())
    }

    /// Send end-of-stream and wait (up to `timeout_ms`) for the sink to finish.
    pub fn finish(self, timeout_ms: u64) -> Result<()> {
        self.src.end_of_stream().map_err(gerr)?;
        let bus = self
            .pipeline
            .bus()
            .ok_or_else(|| Error::Gst("pipeline without bus".into()))?;
        let r = match bus.timed_pop_filtered(
            gst::ClockTime::from_mseconds(timeout_ms),
            &[gst::MessageType::Eos, gst::MessageType::Error],
        ) {
            Some(m) => match m.view() {
                gst::MessageView::Error(e) => {
                    Err(Error::Gst(format!("{} ({:?})", e.error(), e.debug())))
                }
                _ => Ok(()),
            },
            None => Err(Error::Gst(
                "sink did not reach end of stream in time".into(),
            )),
        };
        let _ = self.pipeline.set_state(gst::State::Null);
        r
    }
}
