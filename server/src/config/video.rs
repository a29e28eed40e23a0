//! The SVC encode of a video session and its defaults.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};
use std::time::Duration;

/// The SVC encode of a video source. Layers are the ladder's cells in `layer_order`
/// (`codec::ladder::LayerOrder`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct VideoConfig {
    /// Top spatial layer size (even). Default 1280x720 (docs/server.md "The default ladder").
    pub width: Option<u32>,
    pub height: Option<u32>,
    /// Frames per second. Default 30.
    pub fps: Option<u32>,
    /// Spatial and temporal layers, 1..=3 each. Default 3 and 2 (L3T2: the per-layer
    /// constant-rate queues hold a frame about one frame period of its temporal layer, and
    /// L3T3's TL0 is 7.5 fps at 30; docs/server.md "The default ladder").
    pub spatial: Option<usize>,
    pub temporal: Option<usize>,
    /// Multiplies the codec's default cell rates (`codec::ladder::default_cell_kbps`: 720p30
    /// L3T2, or L3T3 with three temporal layers). Default 1.
    pub kbps_scale: Option<f64>,
    /// How the cells stack into cumulative layers: `size-first` (below the top spatial layer,
    /// every size at half the frame rate before any at the full rate) or `spatial-major`.
    /// Default: size-first when half the frame rate is 15 fps or more (`fps` ≥ 30), else
    /// spatial-major (docs/server.md "The default ladder": a sharper picture is worth half the
    /// frame rate only while that is still 15 fps).
    pub layer_order: Option<String>,
    /// Stamp each source frame with a QR code of its frame number and capture time (unix ns),
    /// GStreamer `qroverlay` in-process, any video source (see docs/server.md). Default false.
    pub qroverlay: Option<bool>,
    /// Write the source frames (after the stamp, before the encoder) to `DIR/reference.y4m`
    /// at the top resolution; frame n of the file is frame number n. Default: none.
    pub reference_dir: Option<String>,
    /// Seconds between key pictures: the longest a receiver that joins mid-stream waits
    /// before it can decode the base layer (multicast receivers cannot ask for one). Default 2.
    pub keyframe_interval_s: Option<f64>,
    /// Announced layer rate over what the layer's frames occupy on the wire at the encoder's
    /// cell budget (`video_layer_rate`), 1.0..=5.0, for the layers above temporal layer 0; the
    /// slots media leaves free carry FEC repair (RTP/payload headers are in the occupancy;
    /// this covers encoder overshoot and the time a frame takes to drain). Default 1.1
    /// (`DEFAULT_RATE_HEADROOM`, docs/server.md "Layer rates": 1.15 put the small layers
    /// above 25 % repair, the issue-19 bound).
    pub rate_headroom: Option<f64>,
    /// The same for the temporal-layer-0 layers that carry the key pictures and the scene
    /// cuts' large frames: every TL0 layer but the base layer of a multi-spatial encode
    /// (`ResolvedVideo::headroom`; 1.0..=5.0, below `rate_headroom` it is raised to it).
    /// Default 1.2 (`DEFAULT_KEY_HEADROOM`): everything predicts from those frames, so their
    /// wait in the pacer is every viewer's latency and a late one a freeze (docs/server.md
    /// "Layer rates"); the slots they leave free carry repair for the frames a loss hurts most.
    /// 1.25 with L3T2's 15-fps TL0 frames put the 640x360 TL0 layer at 26 % repair, over the
    /// issue-19 bound of 25 (one packet of slot rounding per frame is a larger share of them).
    pub key_headroom: Option<f64>,
    /// Pacer burst (1.0..=16.0): a layer with queued media may send its bunches at up to this
    /// multiple of its announced rate, running ahead of its constant-rate schedule by at most
    /// the burst credit (`pacer_credit_ms`); the padding slots it ran ahead of are then
    /// skipped, so the mean rate stays the announced one. 1 = strict constant-rate pacing.
    /// Default 8 (`DEFAULT_PACER_PEAK`, docs/server.md "Pacer burst").
    pub pacer_peak: Option<f64>,
    /// Largest lead of a layer over its constant-rate schedule, ms (1..=1000), further capped
    /// at one frame period of the layer's temporal layer. A layer's rate over any window W
    /// deviates from its announced rate by at most credit / W. Default 120
    /// (`DEFAULT_PACER_CREDIT_MS`: 2 % over the 6-s window of the per-layer rate check).
    pub pacer_credit_ms: Option<u64>,
    /// A frame of the top temporal layer (no frame references it) is dropped before it is
    /// queued when its layer's queue would make it wait longer than this, ms (0 = never
    /// drop; at most 10000). Default 250 (`DEFAULT_MAX_DISCARDABLE_WAIT_MS`, docs/server.md
    /// "Discardable frames").
    pub max_discardable_wait_ms: Option<u64>,
    /// A frame of a middle temporal layer (TL1 of L?T3: only the layer above predicts from
    /// it) is dropped, with the frames that may predict from it, before it is queued when its
    /// layer's queue would make it wait longer than this, ms (0 = never; at most 10000). Every
    /// packet marks which spatial layers its picture was sent with, so viewers show the layer
    /// below at once instead of waiting. Default 500 (`DEFAULT_MAX_MIDDLE_WAIT_MS`,
    /// docs/server.md "Discardable frames").
    pub max_middle_wait_ms: Option<u64>,
    /// Lowest quantizer (0..=63) of the middle spatial layers' frames in a key picture or a
    /// re-sync (`codec::vpx::SvcConfig::key_mid_min_q`; 0 = libvpx's choice). Default 0:
    /// 40 takes the 320x180 layer's key frame from 4.8 to 3.0 packets and the clean path's
    /// glass-to-glass p50 from ~160 to ~135 ms, but with the player's default playout
    /// quantile more pictures then come from the layer below (docs/codec.md "Key pictures of
    /// the middle layers").
    pub key_mid_min_q: Option<u32>,
}

/// A resolved video encode.
#[derive(Clone, Debug, PartialEq)]
pub struct ResolvedVideo {
    pub width: u32,
    pub height: u32,
    pub fps: u32,
    pub spatial: usize,
    pub temporal: usize,
    /// `cell_kbps[s][t]`, the encoder's per-cell budget.
    pub cell_kbps: Vec<Vec<u32>>,
    /// The order of the cells in the cumulative layers.
    pub order: codec::ladder::LayerOrder,
    /// Frames between key pictures.
    pub keyframe_interval: u32,
    /// Stamp frame number and capture time with `qroverlay`.
    pub qroverlay: bool,
    /// Where to write `reference.y4m`, if anywhere.
    pub reference_dir: Option<std::path::PathBuf>,
    /// Announced rate / encoder budget of the layers above temporal layer 0.
    pub rate_headroom: f64,
    /// Announced rate / encoder budget of the temporal-layer-0 layers that carry the large
    /// frames (>= `rate_headroom`; see [`ResolvedVideo::headroom`]).
    pub key_headroom: f64,
    /// Peak rate / announced rate of a layer's media bunches (1 = constant-rate pacing).
    pub pacer_peak: f64,
    /// Largest lead over the constant-rate schedule (before the one-frame-period cap).
    pub pacer_credit: Duration,
    /// See `VideoConfig::max_discardable_wait_ms` (`None`: never drop).
    pub max_discardable_wait: Option<Duration>,
    /// See `VideoConfig::max_middle_wait_ms` (`None`: never drop).
    pub max_middle_wait: Option<Duration>,
    /// See `VideoConfig::key_mid_min_q`.
    pub key_mid_min_q: u32,
}

impl ResolvedVideo {
    /// Announced rate / encoder budget of cell (`spatial`, `temporal`): `key_headroom` on the
    /// temporal-layer-0 layers that carry the key pictures' and scene cuts' large frames, every
    /// TL0 layer but the lowest spatial one of a multi-spatial encode; `rate_headroom` on the
    /// rest. Everything predicts from TL0, so a TL0 frame's wait holds every picture behind it
    /// (docs/server.md "Layer rates"). The base layer's frames are one to three packets,
    /// where the whole-bunch slots already leave it about a fifth for repair (`make
    /// bench-ladder`), so more headroom there would be mostly repair, not sooner pictures.
    /// The (spatial, temporal) cell of each layer, layer 0 first.
    pub fn cells(&self) -> Vec<(usize, usize)> {
        self.order
            .cells(self.spatial as u8, self.temporal as u8)
            .iter()
            .map(|c| (c.spatial as usize, c.temporal as usize))
            .collect()
    }

    pub fn headroom(&self, spatial: usize, temporal: usize) -> f64 {
        if temporal == 0 && (spatial > 0 || self.spatial <= 1) {
            self.key_headroom
        } else {
            self.rate_headroom
        }
    }
}

impl VideoConfig {
    pub(super) fn resolve(&self, key: &dyn Fn(&str) -> String) -> Result<ResolvedVideo> {
        let (w, h) = (self.width.unwrap_or(1280), self.height.unwrap_or(720));
        if w < 64 || h < 64 || w > 1920 || h > 1088 || w % 2 == 1 || h % 2 == 1 {
            return Err(Error::config(
                &key("video.width"),
                format!("{w}x{h}: even, 64..=1920 x 64..=1088"),
            ));
        }
        let fps = self.fps.unwrap_or(30);
        if !(1..=60).contains(&fps) {
            return Err(Error::config(
                &key("video.fps"),
                format!("{fps} outside 1..=60"),
            ));
        }
        let (ns, nt) = (self.spatial.unwrap_or(3), self.temporal.unwrap_or(2));
        if !(1..=3).contains(&ns) || !(1..=3).contains(&nt) {
            return Err(Error::config(
                &key("video.spatial"),
                format!("L{ns}T{nt}: 1..=3 each"),
            ));
        }
        let scale = self.kbps_scale.unwrap_or(1.0);
        if !(0.01..=10.0).contains(&scale) {
            return Err(Error::config(
                &key("video.kbps_scale"),
                format!("{scale} outside 0.01..=10"),
            ));
        }
        let cell_kbps = codec::ladder::default_cell_kbps(ns, nt, scale);
        let order = match self.layer_order.as_deref() {
            None => default_order(fps),
            Some(name) => codec::ladder::LayerOrder::parse(name).ok_or_else(|| {
                Error::config(
                    &key("video.layer_order"),
                    format!("{name:?}: size-first or spatial-major"),
                )
            })?,
        };
        let ki = self.keyframe_interval_s.unwrap_or(2.0);
        if !(0.1..=60.0).contains(&ki) {
            return Err(Error::config(
                &key("video.keyframe_interval_s"),
                format!("{ki} outside 0.1..=60"),
            ));
        }
        let keyframe_interval = ((ki * fps as f64).round() as u32).max(1);
        let rate_headroom = self.rate_headroom.unwrap_or(DEFAULT_RATE_HEADROOM);
        if !(1.0..=5.0).contains(&rate_headroom) {
            return Err(Error::config(
                &key("video.rate_headroom"),
                format!("{rate_headroom} outside 1..=5"),
            ));
        }
        let pacer_peak = self.pacer_peak.unwrap_or(DEFAULT_PACER_PEAK);
        if !(1.0..=16.0).contains(&pacer_peak) {
            return Err(Error::config(
                &key("video.pacer_peak"),
                format!("{pacer_peak} outside 1..=16"),
            ));
        }
        let key_headroom = self.key_headroom.unwrap_or(DEFAULT_KEY_HEADROOM);
        if !(1.0..=5.0).contains(&key_headroom) {
            return Err(Error::config(
                &key("video.key_headroom"),
                format!("{key_headroom} outside 1..=5"),
            ));
        }
        let credit_ms = self.pacer_credit_ms.unwrap_or(DEFAULT_PACER_CREDIT_MS);
        if !(1..=1000).contains(&credit_ms) {
            return Err(Error::config(
                &key("video.pacer_credit_ms"),
                format!("{credit_ms} outside 1..=1000"),
            ));
        }
        let discard_ms = self
            .max_discardable_wait_ms
            .unwrap_or(DEFAULT_MAX_DISCARDABLE_WAIT_MS);
        if discard_ms > 10_000 {
            return Err(Error::config(
                &key("video.max_discardable_wait_ms"),
                format!("{discard_ms} above 10000"),
            ));
        }
        let middle_ms = self
            .max_middle_wait_ms
            .unwrap_or(DEFAULT_MAX_MIDDLE_WAIT_MS);
        if middle_ms > 10_000 {
            return Err(Error::config(
                &key("video.max_middle_wait_ms"),
                format!("{middle_ms} above 10000"),
            ));
        }
        let key_mid_min_q = self.key_mid_min_q.unwrap_or(0);
        if key_mid_min_q > 63 {
            return Err(Error::config(
                &key("video.key_mid_min_q"),
                format!("{key_mid_min_q} above 63"),
            ));
        }
        Ok(ResolvedVideo {
            width: w,
            height: h,
            fps,
            spatial: ns,
            temporal: nt,
            cell_kbps,
            order,
            keyframe_interval,
            qroverlay: self.qroverlay.unwrap_or(false),
            reference_dir: match self.reference_dir.as_deref() {
                None | Some("") => None,
                Some(d) => Some(std::path::PathBuf::from(d)),
            },
            rate_headroom,
            key_headroom: key_headroom.max(rate_headroom),
            pacer_peak,
            pacer_credit: Duration::from_millis(credit_ms),
            max_discardable_wait: (discard_ms > 0).then(|| Duration::from_millis(discard_ms)),
            max_middle_wait: (middle_ms > 0).then(|| Duration::from_millis(middle_ms)),
            key_mid_min_q,
        })
    }
}

/// The layer order of an encode at `fps` that sets none: size-first while half the frame rate
/// (what a size-first middle layer shows) is still 15 fps, spatial-major below (at 15 fps,
/// size-first gave the scripted test's 600 kbit/s viewer 320x180 at 7.5 fps instead of 160x90
/// at 15 fps).
pub fn default_order(fps: u32) -> codec::ladder::LayerOrder {
    if fps >= 30 {
        codec::ladder::LayerOrder::SizeFirst
    } else {
        codec::ladder::LayerOrder::SpatialMajor
    }
}

/// Default `packet_size` of video sessions: small enough that the smallest cells of the default
/// ladder fill about two packets per frame (docs/server.md "The default ladder": at 1200 bytes
/// the 180p and 360p TL1/TL2 layers were 26-36 % repair and padding).
pub const DEFAULT_VIDEO_PACKET: u16 = 600;

/// Default `video.pacer_peak`.
pub const DEFAULT_PACER_PEAK: f64 = 8.0;

/// Default `video.max_discardable_wait_ms`.
pub const DEFAULT_MAX_DISCARDABLE_WAIT_MS: u64 = 250;

/// Default `video.max_middle_wait_ms`: about the longest wait of the temporal-layer-0 frames
/// at the default headroom (the trace study `video::latency_study::clip_study`, docs/server.md
/// "Discardable frames"), so a middle frame never holds a picture longer than they do.
pub const DEFAULT_MAX_MIDDLE_WAIT_MS: u64 = 500;

/// Default `video.pacer_credit_ms`.
pub const DEFAULT_PACER_CREDIT_MS: u64 = 120;

/// Default `video.key_headroom`.
pub const DEFAULT_KEY_HEADROOM: f64 = 1.2;

/// Default `video.rate_headroom`.
pub const DEFAULT_RATE_HEADROOM: f64 = 1.1;

#[cfg(test)]
mod tests {
    use super::super::SessionConfig;
    use super::*;
    use std::net::Ipv4Addr;

    /// Default video layer rates at 640x360@15 L3T3 (kbps_scale 0.5, 1200-B pairs): the
    /// budget times 2, plus one bunch (2 x 1200 B) per frame of the layer; the TL0 layers
    /// follow `key_headroom`; and the new keys' errors name them.
    #[test]
    fn video_layer_rates_and_pacing_keys() {
        // The test pattern's session with `video` (the defaults when `None`).
        let resolve = |video: Option<VideoConfig>| {
            SessionConfig {
                source: Some("testpattern".into()),
                video,
                ..Default::default()
            }
            .resolve("s", "s1", Ipv4Addr::new(239, 255, 77, 0), 5004)
        };
        let v = resolve(None).unwrap();
        // The default ladder (docs/server.md "The default ladder"): 720p30 L3T2 in size-first
        // order (S0T0, S1T0, S0T1, S1T1, S2T0, S2T1), 600-byte pairs, headroom x (budget in
        // packets of 556 payload bytes + one packet per frame); TL0 and TL1 at 15 fps. The
        // headroom is 1.2 on S1T0 and S2T0 (layers 1 and 4), 1.1 on the others, the base
        // layer included.
        assert_eq!(v.packet_size, 600);
        assert_eq!(
            v.rates_bps,
            vec![245_387, 494_314, 269_128, 239_452, 1_342_515, 791_430]
        );
        let rule = |c: f64, fps: f64, h: f64| {
            (h * fps * (c / fps / (8.0 * 556.0) + 1.0) * 4800.0).round() as u64
        };
        assert_eq!(v.rates_bps[0], rule(140_000.0, 15.0, 1.1));
        assert_eq!(v.rates_bps[1], rule(315_000.0, 15.0, 1.2));
        assert_eq!(v.rates_bps[4], rule(970_000.0, 15.0, 1.2));
        assert_eq!(v.rates_bps[5], rule(600_000.0, 15.0, 1.1));
        // What a viewer holds below 1 and 3 Mbit/s (LCC's cap: 0.95 of the pair dispersion,
        // 600 of 628 bytes on the wire): 180p15 (1 layer) behind 300 kbit/s, 360p15 (2 layers)
        // behind 1 Mbit/s and 720p15 (5 layers) behind 3 Mbit/s.
        let cum = |k: usize| v.rates_bps[..=k].iter().sum::<u64>();
        let cap = |link: f64| (link * 600.0 / 628.0 * 0.95) as u64;
        assert!(cum(0) < cap(0.3e6), "180p15 behind 300 kbit/s: {}", cum(0));
        assert!(cum(1) < cap(1e6) && cum(2) > cap(1e6), "{}", cum(1));
        assert!(cum(4) < cap(3e6) && cum(5) > cap(3e6), "{}", cum(4));
        assert!(cum(5) < cap(4e6), "720p30 behind 4 Mbit/s: {}", cum(5));
        // The layers' labels follow the order.
        let labels = crate::video::labels(v.video.as_ref().unwrap());
        assert_eq!(labels[1], "S1T0 640x360@15");
        assert_eq!(labels[2], "S0T1 320x180@30");
        // rate_headroom 1.3 raises the TL0 layers' key_headroom (1.2) to it too.
        let v13 = resolve(Some(VideoConfig {
            rate_headroom: Some(1.3),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            &v13.rates_bps[..3],
            &[
                rule(140_000.0, 15.0, 1.3),
                rule(315_000.0, 15.0, 1.3),
                rule(160_000.0, 15.0, 1.3)
            ]
        );
        let v_sum: u64 = v.rates_bps.iter().sum();
        let rv_order = v.video.as_ref().unwrap().order;
        let rv = v.video.unwrap();
        assert_eq!((rv.pacer_peak, rv.pacer_credit.as_millis()), (8.0, 120));
        assert_eq!((rv.rate_headroom, rv.key_headroom), (1.1, 1.2));
        assert_eq!((rv.width, rv.height, rv.fps), (1280, 720, 30));
        // One spatial layer: its TL0 layer carries the key pictures and takes key_headroom.
        let one = resolve(Some(VideoConfig {
            spatial: Some(1),
            ..Default::default()
        }))
        .unwrap();
        let ov = one.video.clone().unwrap();
        assert_eq!((ov.headroom(0, 0), ov.headroom(0, 1)), (1.2, 1.1));
        // (one spatial layer is the top row of the ladder: 720p)
        assert_eq!(one.rates_bps[0], rule(970_000.0, 15.0, 1.2));
        // Three temporal layers on request: the L3T3 cells, TL0 and TL1 at 7.5 fps (with the
        // key headroom of that ladder's days, its announced rates as they were).
        let t3 = resolve(Some(VideoConfig {
            temporal: Some(3),
            key_headroom: Some(1.25),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            t3.rates_bps,
            vec![146_435, 134_564, 348_507, 146_435, 269_128, 239_452, 1_070_180, 312_622, 791_430]
        );
        assert_eq!(t3.rates_bps[6], rule(760_000.0, 7.5, 1.25));
        // Below 30 fps (half the rate under 15 fps) the default order is spatial-major.
        let at15 = resolve(Some(VideoConfig {
            fps: Some(15),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(
            at15.video.unwrap().order,
            codec::ladder::LayerOrder::SpatialMajor
        );
        assert_eq!(rv_order, codec::ladder::LayerOrder::SizeFirst);
        // spatial-major on request: the same cells, S0T1 second.
        let sm = resolve(Some(VideoConfig {
            layer_order: Some("spatial-major".into()),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(sm.rates_bps[1], rule(160_000.0, 15.0, 1.1));
        assert_eq!(sm.rates_bps.iter().sum::<u64>(), v_sum);
        // key_headroom below rate_headroom is raised to it.
        let v = resolve(Some(VideoConfig {
            rate_headroom: Some(2.5),
            ..Default::default()
        }))
        .unwrap();
        assert_eq!(v.video.unwrap().key_headroom, 2.5);
        for (vc, k) in [
            (
                VideoConfig {
                    key_headroom: Some(0.5),
                    ..Default::default()
                },
                "s.video.key_headroom",
            ),
            (
                VideoConfig {
                    pacer_credit_ms: Some(0),
                    ..Default::default()
                },
                "s.video.pacer_credit_ms",
            ),
            (
                VideoConfig {
                    key_mid_min_q: Some(64),
                    ..Default::default()
                },
                "s.video.key_mid_min_q",
            ),
            (
                VideoConfig {
                    layer_order: Some("temporal-major".into()),
                    ..Default::default()
                },
                "s.video.layer_order",
            ),
        ] {
            let e = resolve(Some(vc)).unwrap_err().to_string();
            assert!(e.contains(k), "{e}");
        }
    }
}
