//! The player's window: `appsrc ! videoconvert ! videoscale ! video/x-raw,width=W,height=H !
//! textoverlay ! autovideosink`. Pictures are pushed at their display time (the playout buffer
//! already paced them), so the sink does not sync to a clock; every picture is scaled to the
//! session's top resolution, so the window keeps its size when layers come and go. The overlay
//! text (layers, resolution, frame rate, receive rate, loss, the controller's estimate) is
//! replaced once a second.

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

pub struct Window {
    pipeline: gst::Pipeline,
    src: gst_app::AppSrc,
    text: gst::Element,
    size: Option<(u32, u32)>,
    fps: f64,
    n: u64,
    /// Pictures the pipeline refused (it stopped, e.g. the window was closed).
    pub errors: u64,
}

impl Window {
    /// Opens a window of the session's top size `w x h`.
    pub fn open(w: u32, h: u32, fps: f64) -> Result<Window, String> {
        gst::init().map_err(|e| e.to_string())?;
        let desc = format!(
            "appsrc name=src format=time is-live=true max-buffers=4 leaky-type=downstream \
             ! videoconvert ! videoscale ! video/x-raw,width={w},height={h} \
             ! textoverlay name=text valignment=top halignment=right font-desc=\"Sans 12\" \
             shaded-background=true ! videoconvert ! autovideosink name=sink sync=false"
        );
        let pipeline = gst::parse::launch(&desc)
            .map_err(|e| e.to_string())?
            .downcast::<gst::Pipeline>()
            .map_err(|_| "not a pipeline".to_string())?;
        let src = pipeline
            .by_name("src")
            .and_then(|e| e.downcast::<gst_app::AppSrc>().ok())
            .ok_or("appsrc missing")?;
        let text = pipeline.by_name("text").ok_or("textoverlay missing")?;
        text.set_property("text", "layercast: waiting for video");
        if let Err(e) = pipeline.set_state(gst::State::Playing) {
            // The state change says only that it failed; the element that failed posts why.
            let why = pipeline
                .bus()
                .and_then(|bus| bus.pop_filtered(&[gst::MessageType::Error]))
                .and_then(|m| match m.view() {
                    gst::MessageView::Error(err) => Some(format!(
                        "{} ({})",
                        err.error(),
                        err.debug().map(|d| d.to_string()).unwrap_or_default()
                    )),
                    _ => None,
                })
                .unwrap_or_default();
            let _ = pipeline.set_state(gst::State::Null);
            return Err(format!("starting the window pipeline: {e}: {why}"));
        }
        Ok(Window {
            pipeline,
            src,
            text,
            size: None,
            fps: fps.max(1.0),
            n: 0,
            errors: 0,
        })
    }

    /// Shows one tightly packed I420 picture.
    pub fn show(&mut self, i420: &[u8], w: u32, h: u32) {
        if self.size != Some((w, h)) {
            self.src.set_caps(Some(&codec::gst::i420_caps(w, h)));
            self.size = Some((w, h));
        }
        let len = codec::synth::i420_len(w, h);
        let Some(p) = i420.get(..len) else {
            self.errors += 1;
            return;
        };
        // Tightly packed I420 equals GStreamer's layout when the chroma width is a multiple of
        // 4; otherwise copy row by row into GStreamer's strides.
        let data = if w.is_multiple_of(8) {
            p.to_vec()
        } else {
            restride(p, w, h)
        };
        let mut buf = gst::Buffer::from_mut_slice(data);
        if let Some(b) = buf.get_mut() {
            b.set_pts(gst::ClockTime::from_nseconds(
                (self.n as f64 * 1e9 / self.fps) as u64,
            ));
        }
        self.n += 1;
        if self.src.push_buffer(buf).is_err() {
            self.errors += 1;
        }
    }

    pub fn set_text(&mut self, text: &str) {
        self.text.set_property("text", text);
    }
}

/// Tight I420 to GStreamer's default strides (rows rounded up to 4 bytes).
fn restride(p: &[u8], w: u32, h: u32) -> Vec<u8> {
    let (w, h) = (w as usize, h as usize);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let (ys, cs) = (w.div_ceil(4) * 4, cw.div_ceil(4) * 4);
    let mut out = vec![0u8; ys * h + 2 * cs * ch];
    let mut off = 0;
    let mut dst = 0;
    for (pw, ph, stride) in [(w, h, ys), (cw, ch, cs), (cw, ch, cs)] {
        for row in 0..ph {
            out[dst + row * stride..dst + row * stride + pw].copy_from_slice(&p[off..off + pw]);
            off += pw;
        }
        dst += stride * ph;
    }
    out
}

impl Drop for Window {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}
