//! Reads the server's QR stamp (frame number + capture time, `server/src/video.rs`) back from
//! decoded pictures with the GStreamer `zbar` element: `appsrc ! zbar ! appsink`, one picture
//! pushed and pulled at a time, the `barcode` element message matched to the picture by its
//! timestamp. It runs on the frame-log thread, never on the receive loop.

use gstreamer as gst;
use gstreamer::prelude::*;
use gstreamer_app as gst_app;

/// `(frame number, capture unix ns)` from a stamp payload: decimal digits, the last 19 of them
/// the capture time, the ones before (at least one) the frame number.
pub fn parse_payload(s: &str) -> Option<(u64, u64)> {
    let s = s.trim();
    if s.len() < 20 || s.len() > 19 + 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (n, t) = s.split_at(s.len() - 19);
    Some((n.parse().ok()?, t.parse().ok()?))
}

/// The region scanned: the left half of the picture (rounded up to a multiple of 8 so the
/// cropped I420 planes have GStreamer's default strides), full height. The stamp sits in the
/// top-left corner (x 1 %, y 2 %; 29 modules with its quiet zone, 2 px per module at the
/// lowest spatial layer), which this always contains.
pub fn scan_width(w: u32) -> u32 {
    (w.div_ceil(2).div_ceil(8) * 8).min(w & !7)
}

/// A zbar pipeline; the caps follow the picture size.
pub struct QrReader {
    pipeline: gst::Pipeline,
    src: gst_app::AppSrc,
    sink: gst_app::AppSink,
    bus: gst::Bus,
    size: Option<(u32, u32)>,
    n: u64,
}

impl QrReader {
    pub fn new() -> Result<QrReader, String> {
        gst::init().map_err(|e| e.to_string())?;
        let pipeline = gst::parse::launch(
            "appsrc name=src format=time ! zbar cache=false ! appsink name=sink sync=false",
        )
        .map_err(|e| format!("zbar pipeline (gstreamer1.0-plugins-bad): {e}"))?
        .downcast::<gst::Pipeline>()
        .map_err(|_| "not a pipeline".to_string())?;
        let src = pipeline
            .by_name("src")
            .and_then(|e| e.downcast::<gst_app::AppSrc>().ok())
            .ok_or("appsrc missing")?;
        let sink = pipeline
            .by_name("sink")
            .and_then(|e| e.downcast::<gst_app::AppSink>().ok())
            .ok_or("appsink missing")?;
        let bus = pipeline.bus().ok_or("no bus")?;
        pipeline
            .set_state(gst::State::Playing)
            .map_err(|e| e.to_string())?;
        Ok(QrReader {
            pipeline,
            src,
            sink,
            bus,
            size: None,
            n: 0,
        })
    }

    /// The stamp of a tightly packed I420 picture, or `None` if no readable stamp.
    pub fn read(&mut self, i420: &[u8], w: u32, h: u32) -> Option<(u64, u64)> {
        let cw = scan_width(w);
        if cw == 0 || h < 2 || i420.len() < (w * h) as usize {
            return None;
        }
        if self.size != Some((cw, h)) {
            self.src.set_caps(Some(&codec::gst::i420_caps(cw, h)));
            self.size = Some((cw, h));
        }
        // Luma of the left part, neutral chroma (zbar reads luma only).
        let (wu, cwu, hu) = (w as usize, cw as usize, h as usize);
        let chroma = (cwu / 2) * hu.div_ceil(2);
        let mut data = Vec::with_capacity(cwu * hu + 2 * chroma);
        for row in 0..hu {
            data.extend_from_slice(&i420[row * wu..row * wu + cwu]);
        }
        data.resize(cwu * hu + 2 * chroma, 128);
        let mut buf = gst::Buffer::from_mut_slice(data);
        self.n += 1;
        let pts = gst::ClockTime::from_mseconds(self.n);
        if let Some(b) = buf.get_mut() {
            b.set_pts(pts);
        }
        self.src.push_buffer(buf).ok()?;
        // zbar posts its message before it pushes the buffer on, so once the buffer is out
        // the message for it is on the bus.
        self.sink.try_pull_sample(gst::ClockTime::from_seconds(2))?;
        let mut found = None;
        while let Some(msg) = self.bus.pop() {
            if let gst::MessageView::Element(e) = msg.view() {
                let Some(s) = e.structure() else { continue };
                if s.name() != "barcode" {
                    continue;
                }
                let ts = s.get::<u64>("timestamp").ok();
                if ts == Some(pts.nseconds()) {
                    if let Ok(sym) = s.get::<String>("symbol") {
                        found = found.or_else(|| parse_payload(&sym));
                    }
                }
            }
        }
        found
    }
}

impl Drop for QrReader {
    fn drop(&mut self) {
        let _ = self.pipeline.set_state(gst::State::Null);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads() {
        assert_eq!(
            parse_payload("121763776000123456789"),
            Some((12, 1_763_776_000_123_456_789))
        );
        assert_eq!(
            parse_payload("01763776000123456789"),
            Some((0, 1_763_776_000_123_456_789))
        );
        assert_eq!(parse_payload("1763776000123456789"), None); // no frame number
        assert_eq!(parse_payload("12a763776000123456789"), None);
        assert_eq!(parse_payload(""), None);
        assert_eq!(parse_payload(&"9".repeat(60)), None);
    }

    #[test]
    fn scan_region() {
        assert_eq!(scan_width(640), 320);
        assert_eq!(scan_width(160), 80);
        assert_eq!(scan_width(1280), 640);
        assert_eq!(scan_width(84), 48);
        assert_eq!(scan_width(6), 0);
    }

    /// A picture without a code reads as `None`, and the reader keeps working across sizes.
    #[test]
    fn no_code_is_none() {
        let mut r = QrReader::new().expect("zbar element (gstreamer1.0-plugins-bad)");
        for (w, h) in [(160u32, 90u32), (320, 180), (160, 90)] {
            let f = codec::synth::frame(w, h, 3);
            assert_eq!(r.read(&f, w, h), None);
        }
    }

    /// A frame stamped the way the server stamps (qroverlay, top-left, 2 px per module at
    /// 160x90) reads back, at its own size and at the lowest spatial layer's size.
    #[test]
    fn stamped_picture_reads_back() {
        gst::init().unwrap();
        let payload = "421763776000123456789";
        let p = gst::parse::launch(&format!(
            "videotestsrc num-buffers=1 pattern=ball ! video/x-raw,format=I420,width=640,height=360 \
             ! qroverlay data={payload} pixel-size=8 x=1 y=2 ! videoconvert \
             ! video/x-raw,format=I420 ! appsink name=sink sync=false"
        ))
        .unwrap()
        .downcast::<gst::Pipeline>()
        .unwrap();
        let sink = p
            .by_name("sink")
            .unwrap()
            .downcast::<gst_app::AppSink>()
            .unwrap();
        p.set_state(gst::State::Playing).unwrap();
        let sample = sink.pull_sample().unwrap();
        let map = sample.buffer().unwrap().map_readable().unwrap();
        let f = map.as_slice().to_vec();
        p.set_state(gst::State::Null).unwrap();
        let mut r = QrReader::new().unwrap();
        assert_eq!(r.read(&f, 640, 360), parse_payload(payload));
        let small = codec::synth::scale_i420(&f, 640, 360, 160, 90);
        assert_eq!(
            r.read(&small, 160, 90),
            Some((42, 1_763_776_000_123_456_789))
        );
    }
}
