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

/// Pictures narrower than this get the second, sharpened read.
const SHARPEN_BELOW_WIDTH: u32 = 320;

/// The further reads of a small picture, in order, as `(scale, radius)` for [`sharpen`].
/// Measured on the lowest layer (160x90, 45/15/15 kbit/s) of the server's default L3T3
/// 640x360@15 ladder: zbar alone reads 52 of 90 pictures (11 of 45 TL2 pictures), with these
/// passes 78 of 90; on the 47-picture 160x90 run of a fresh-clone CI failure, 24 alone and 41
/// with them (docs/player.md, "QR read-back").
const SHARPEN_PASSES: &[(usize, Option<usize>)] = &[(2, None), (3, Some(4)), (4, Some(6))];

/// A luma plane upscaled `scale` times (bilinear) and, with a `radius` (in source pixels),
/// binarised against its local mean, for a further read of a small picture. At 2 px per
/// module the coding blur of a TL2 picture (about 250 bytes at the lowest layer) leaves
/// modules at mid grey; zbar's scanner looks for edges along scan lines and loses them there.
/// Upscaling gives it more samples per edge, and a threshold against the mean of the
/// surrounding area (radius 4-6 px, 2-3 modules) restores black and white modules. The
/// result's width is a multiple of 8 (GStreamer's default I420 strides).
pub fn sharpen(
    luma: &[u8],
    w: u32,
    h: u32,
    scale: usize,
    radius: Option<usize>,
) -> (Vec<u8>, u32, u32) {
    let (w, h) = (w as usize, h as usize);
    let k = scale;
    let (bw, bh) = ((w * k) & !7, h * k);
    let at = |x: usize, y: usize| luma[y.min(h - 1) * w + x.min(w - 1)] as f32;
    let mut up = vec![0f32; bw * bh];
    for y in 0..bh {
        let sy = ((y as f32 + 0.5) / k as f32 - 0.5).max(0.0);
        let (y0, fy) = (sy as usize, sy.fract());
        for x in 0..bw {
            let sx = ((x as f32 + 0.5) / k as f32 - 0.5).max(0.0);
            let (x0, fx) = (sx as usize, sx.fract());
            let top = at(x0, y0) * (1.0 - fx) + at(x0 + 1, y0) * fx;
            let bot = at(x0, y0 + 1) * (1.0 - fx) + at(x0 + 1, y0 + 1) * fx;
            up[y * bw + x] = top * (1.0 - fy) + bot * fy;
        }
    }
    // Local mean over a (2r+1)^2 window from a summed-area table.
    let Some(r) = radius else {
        return (
            up.iter().map(|v| v.round() as u8).collect(),
            bw as u32,
            bh as u32,
        );
    };
    let r = r * k;
    let mut sat = vec![0f64; (bw + 1) * (bh + 1)];
    for y in 0..bh {
        let mut row = 0f64;
        for x in 0..bw {
            row += up[y * bw + x] as f64;
            sat[(y + 1) * (bw + 1) + x + 1] = sat[y * (bw + 1) + x + 1] + row;
        }
    }
    let mut out = vec![0u8; bw * bh];
    for y in 0..bh {
        let (y0, y1) = (y.saturating_sub(r), (y + r + 1).min(bh));
        for x in 0..bw {
            let (x0, x1) = (x.saturating_sub(r), (x + r + 1).min(bw));
            let sum = sat[y1 * (bw + 1) + x1] - sat[y0 * (bw + 1) + x1] - sat[y1 * (bw + 1) + x0]
                + sat[y0 * (bw + 1) + x0];
            let mean = sum / ((y1 - y0) * (x1 - x0)) as f64;
            out[y * bw + x] = if (up[y * bw + x] as f64) < mean {
                0
            } else {
                255
            };
        }
    }
    (out, bw as u32, bh as u32)
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
    ///
    /// Small pictures (the lowest spatial layer) carry the code at about 2 px per module, where
    /// zbar misses the blurrier pictures of the upper temporal layers; when the plain read
    /// fails there, the crop is read again upscaled and binarised (see [`sharpen`]).
    pub fn read(&mut self, i420: &[u8], w: u32, h: u32) -> Option<(u64, u64)> {
        let cw = scan_width(w);
        if cw == 0 || h < 2 || i420.len() < (w * h) as usize {
            return None;
        }
        // Luma of the left part (zbar reads luma only).
        let (wu, cwu, hu) = (w as usize, cw as usize, h as usize);
        let mut luma = Vec::with_capacity(cwu * hu);
        for row in 0..hu {
            luma.extend_from_slice(&i420[row * wu..row * wu + cwu]);
        }
        if let Some(found) = self.scan(luma.clone(), cw, h) {
            return Some(found);
        }
        if w >= SHARPEN_BELOW_WIDTH {
            return None;
        }
        for &(scale, radius) in SHARPEN_PASSES {
            let (big, bw, bh) = sharpen(&luma, cw, h, scale, radius);
            if let Some(found) = self.scan(big, bw, bh) {
                return Some(found);
            }
        }
        None
    }

    /// One zbar pass over a `w` x `h` luma plane.
    fn scan(&mut self, mut data: Vec<u8>, w: u32, h: u32) -> Option<(u64, u64)> {
        if self.size != Some((w, h)) {
            self.src.set_caps(Some(&codec::gst::i420_caps(w, h)));
            self.size = Some((w, h));
        }
        // Neutral chroma.
        let (wu, hu) = (w as usize, h as usize);
        let chroma = (wu / 2) * hu.div_ceil(2);
        data.resize(wu * hu + 2 * chroma, 128);
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

    /// Frames of a y4m file: `(width, height, tightly packed I420 frames)`.
    fn y4m_frames(data: &[u8]) -> (u32, u32, Vec<&[u8]>) {
        let nl = data.iter().position(|&b| b == b'\n').unwrap();
        let hdr = std::str::from_utf8(&data[..nl]).unwrap();
        let num = |c: char| -> u32 {
            hdr.split_whitespace()
                .find_map(|t| t.strip_prefix(c)?.parse().ok())
                .unwrap()
        };
        let (w, h) = (num('W'), num('H'));
        let len = codec::synth::i420_len(w, h);
        let frames = data[nl + 1..]
            .chunks_exact(6 + len)
            .map(|c| &c[6..])
            .collect();
        (w, h, frames)
    }

    /// Reads every picture of the y4m file named by `LC_QR_PROBE` and prints how many read,
    /// plainly and with the sharpened passes (the numbers in `SHARPEN_PASSES`' doc).
    #[test]
    #[ignore = "measurement: LC_QR_PROBE=<file.y4m>"]
    fn probe_file() {
        let Ok(p) = std::env::var("LC_QR_PROBE") else {
            return;
        };
        let data = std::fs::read(&p).unwrap();
        let (w, h, frames) = y4m_frames(&data);
        let mut r = QrReader::new().unwrap();
        let (mut plain, mut all, mut fixed) = (0, 0, Vec::new());
        for (i, f) in frames.iter().enumerate() {
            let cw = scan_width(w);
            let luma: Vec<u8> = (0..h as usize)
                .flat_map(|y| f[y * w as usize..y * w as usize + cw as usize].to_vec())
                .collect();
            let p0 = r.scan(luma, cw, h).is_some();
            let p1 = r.read(f, w, h).is_some();
            plain += p0 as usize;
            all += p1 as usize;
            if p1 && !p0 {
                fixed.push(i);
            }
        }
        println!(
            "{p}: {} pictures, zbar alone reads {plain}, with the sharpened passes {all} \
             (gained: {fixed:?})",
            frames.len()
        );
    }

    /// Four 160x90 TL2 pictures from a fresh-clone CI run (ERA behind 1 Mbit/s, lowest layer
    /// at 45/15/15 kbit/s) that zbar alone does not read: the sharpened passes read them all.
    #[test]
    fn blurred_lowest_layer_pictures_read_when_sharpened() {
        let data = include_bytes!("testdata/qr-tl2-160x90.y4m");
        let (w, h, frames) = y4m_frames(data);
        assert_eq!((w, h, frames.len()), (160, 90, 4));
        let mut r = QrReader::new().expect("zbar element (gstreamer1.0-plugins-bad)");
        let cw = scan_width(w);
        for (i, f) in frames.iter().enumerate() {
            let luma: Vec<u8> = (0..h as usize)
                .flat_map(|y| f[y * w as usize..y * w as usize + cw as usize].to_vec())
                .collect();
            assert_eq!(
                r.scan(luma, cw, h),
                None,
                "picture {i} read without sharpening"
            );
            let got = r.read(f, w, h);
            assert!(got.is_some(), "picture {i} not read");
        }
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
