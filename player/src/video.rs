//! Video receive path: per-layer RTP packets -> `codec::depay::Assembler` (reorder, picture
//! assembly from the held layer prefix, switch points) -> `codec::vpx::Decoder`. Headless: a
//! per-frame JSON line in `DIR/frames.jsonl`.

use codec::depay::{Assembler, AssemblerConfig, AssemblerStats};
use codec::ladder::LayerLadder;
use codec::rtp::RtpPacket;
use codec::vpx::Decoder;
use congestion::SessionInfo;
use serde_json::json;
use std::io::Write;

/// Decoder-side state of one video session.
pub struct Video {
    asm: Assembler,
    dec: Decoder,
    top: Option<usize>,
    pub frames: u64,
    pub frames_1s: u64,
    pub decoder_errors: u64,
    pub push_errors: u64,
    pub width: u32,
    pub height: u32,
    pub freezes: u64,
    nominal_fps: f64,
    last_frame_ns: Option<u64>,
    log: Option<std::fs::File>,
}

/// `(spatial, temporal, fps)` from a codec string like `VP9 L3T3 640x360@15`.
pub fn parse_codec(codec: &str) -> Option<(usize, usize, f64)> {
    let mut it = codec.split_whitespace();
    if it.next()? != "VP9" {
        return None;
    }
    let lt = it.next()?.strip_prefix('L')?;
    let (s, t) = lt.split_once('T')?;
    let fps = it
        .next()
        .and_then(|r| r.split_once('@'))
        .and_then(|(_, f)| f.parse().ok())
        .unwrap_or(30.0);
    Some((s.parse().ok()?, t.parse().ok()?, fps))
}

impl Video {
    /// A video path for this session, or `None` if it carries no (known) video.
    pub fn new(info: &SessionInfo, out: Option<&std::path::Path>) -> Option<Video> {
        let (ns, nt, fps) = parse_codec(&info.codec)?;
        if ns * nt != info.layers.len() || ns == 0 || nt == 0 {
            return None;
        }
        // The ladder's order is what matters here; rates are informative (kbit/s, ≥ 1).
        let rows: Vec<Vec<u32>> = (0..ns)
            .map(|s| {
                (0..nt)
                    .map(|t| ((info.layers[s * nt + t].rate_bps / 1000) as u32).max(1))
                    .collect()
            })
            .collect();
        let ladder = LayerLadder::spatial_major(&rows).ok()?;
        let dec = Decoder::new(1).ok()?;
        let log = out.and_then(|d| std::fs::File::create(d.join("frames.jsonl")).ok());
        // Layers reach the receiver with different delays: each is paced at its own constant
        // rate, so a key picture waits in its layer's sender queue for up to ~0.5 s while
        // other layers' packets of later pictures go ahead. The assembler must therefore wait
        // about 1.5 s of pictures before giving one up (its default, 4 pictures, gave up on
        // nearly every picture: 164 of 170 skipped behind a 1 Mbit/s link).
        let conf = AssemblerConfig {
            reorder_pictures: (1.5 * fps).ceil().max(8.0) as u64,
            max_pending: ((3.0 * fps).ceil() as usize).max(32),
        };
        Some(Video {
            asm: Assembler::new(ladder, None, conf),
            dec,
            top: None,
            frames: 0,
            frames_1s: 0,
            decoder_errors: 0,
            push_errors: 0,
            width: 0,
            height: 0,
            freezes: 0,
            nominal_fps: fps,
            last_frame_ns: None,
            log,
        })
    }

    /// The number of layers held changed.
    pub fn set_layers(&mut self, held: usize) {
        let top = held.checked_sub(1);
        if top != self.top {
            self.top = top;
            self.asm.set_top_layer(top);
        }
    }

    /// One received packet of layer `k` (payload-less padding packets are skipped).
    pub fn push(&mut self, k: usize, data: &[u8], now_ns: u64) {
        let Ok(p) = RtpPacket::parse(data) else {
            self.push_errors += 1;
            return;
        };
        if p.payload().is_empty() {
            return;
        }
        if self.asm.push(k, &p).is_err() {
            self.push_errors += 1;
        }
        while let Some(pic) = self.asm.pop() {
            let au = match pic.access_unit() {
                Ok(a) => a,
                Err(_) => {
                    self.decoder_errors += 1;
                    continue;
                }
            };
            match self.dec.decode(&au) {
                Ok(Some(f)) => {
                    self.frames += 1;
                    self.frames_1s += 1;
                    self.width = f.width;
                    self.height = f.height;
                    // Freeze: a gap longer than max(3 frame intervals, interval + 150 ms)
                    // (DESIGN.md, with the nominal rate standing in for the mean).
                    let iv = 1.0 / self.nominal_fps.max(1.0);
                    if let Some(prev) = self.last_frame_ns {
                        let gap = now_ns.saturating_sub(prev) as f64 / 1e9;
                        if gap > (3.0 * iv).max(iv + 0.15) {
                            self.freezes += 1;
                        }
                    }
                    self.last_frame_ns = Some(now_ns);
                    if let Some(l) = self.log.as_mut() {
                        let _ = writeln!(
                            l,
                            "{}",
                            json!({"t": now_ns as f64 / 1e9, "picture_id": pic.picture_id,
                                "rtp_ts": pic.timestamp, "width": f.width, "height": f.height,
                                "top_spatial": pic.top_spatial(), "temporal": pic.temporal,
                                "key": pic.key, "complete": pic.complete})
                        );
                    }
                }
                Ok(None) => {}
                Err(_) => self.decoder_errors += 1,
            }
        }
    }

    pub fn stats(&self) -> AssemblerStats {
        self.asm.stats()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codec_string() {
        assert_eq!(parse_codec("VP9 L3T3 640x360@15"), Some((3, 3, 15.0)));
        assert_eq!(parse_codec("VP9 L1T2"), Some((1, 2, 30.0)));
        assert_eq!(parse_codec(""), None);
        assert_eq!(parse_codec("H264 L3T3"), None);
        assert_eq!(parse_codec("VP9 LxT3"), None);
    }
}
