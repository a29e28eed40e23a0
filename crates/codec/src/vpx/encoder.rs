#![allow(clippy::needless_range_loop)] // index loops mirror libvpx's fixed C arrays
//! `SvcEncoder`: libvpx VP9 spatial/temporal SVC, one superframe per picture.
//! (About 850 lines: one libvpx context, its configuration and its output mapping.)

use super::cell_rate::CellRateTracker;
use super::{sys, vpx_error};
use crate::error::{Error, Result};
use crate::superframe;
use std::os::raw::{c_int, c_uint};

/// Encoder configuration. Rates are per (spatial, temporal) *cell*, each cell's own increment
/// in kbit/s (not cumulative); the wrapper converts to libvpx's cumulative layout.
#[derive(Debug, Clone, PartialEq)]
pub struct SvcConfig {
    /// Full (top spatial layer) size; both must be even.
    pub width: u32,
    pub height: u32,
    /// Frame rate as a fraction `fps_num / fps_den`.
    pub fps_num: u32,
    pub fps_den: u32,
    /// Number of spatial layers, 1..=3.
    pub spatial_layers: usize,
    /// Number of temporal layers, 1..=3 (3 uses the 0212 pattern, 2 uses 0101).
    pub temporal_layers: usize,
    /// Scale factor (num, den) per spatial layer, lowest first. Empty = defaults
    /// (1/4, 1/2, 1 for three layers; 1/2, 1 for two; 1 for one).
    pub scales: Vec<(u32, u32)>,
    /// `cell_kbps[s][t]`: the increment of cell (s, t), kbit/s.
    pub cell_kbps: Vec<Vec<u32>>,
    /// libvpx `cpu-used` of the top spatial layer (and of a one-layer encode); 5..=9 sensible.
    /// Default 9: about 64 fps for 720p L3T3 on one thread here, 48 at 8 (docs/codec.md).
    pub speed: i32,
    /// `cpu-used` of every spatial layer below the top one (libvpx `speed_per_layer`). Default
    /// 9; 8 gains 0.5-0.8 dB at 180p/360p but lengthens the pacer queue (p95 266 -> 318 ms),
    /// docs/codec.md "Rate-quality against one plain stream".
    pub lower_speed: i32,
    /// Distance between periodic key pictures, in frames (placed on the next TL0 picture);
    /// 0 disables them. Default 300 (10 s at 30 fps).
    pub keyframe_interval: u32,
    /// Every this many frames (placed on the next TL0 picture), the upper spatial layers are
    /// re-synced (coded from the layer below only), so a receiver joining them can decode
    /// within this period. Default 28: with the 4-picture 0212 period the gap between syncs
    /// is then at most 28 frames, under 1 s at 30 fps. 0 disables.
    pub spatial_sync_interval: u32,
    /// Encoder threads. Default 1.
    pub threads: u32,
    /// Quantizer bounds applied to every layer (see DESIGN.md: every per-layer entry must be
    /// set or that layer is coded near-lossless). Defaults 2 and 63: with libvpx's usual 56,
    /// the 720p TL2 cell of hard content hits the quantizer ceiling and overshoots its budget
    /// (+86 % measured); the controllers need each layer at its announced rate.
    pub min_q: u32,
    pub max_q: u32,
    /// libvpx CBR rate-control buffer, in ms of the target rate: initial, optimal and full
    /// level (`rc_buf_initial_sz`, `rc_buf_optimal_sz`, `rc_buf_sz`). The buffer is how far the
    /// encoder may run ahead of its budget; every layer is then paced at its constant announced
    /// rate, so an overshoot the buffer allows becomes queueing delay in that layer's sender
    /// queue. Defaults 200/300/500 (docs/codec.md "Rate control": 300/400/600 and WebRTC's
    /// 500/600/1000 measured longer sender queues at the announced rates).
    pub rc_buf_initial_ms: u32,
    pub rc_buf_optimal_ms: u32,
    pub rc_buf_ms: u32,
    /// Largest key (intra) frame as a percentage of the layer's average frame budget
    /// (`VP8E_SET_MAX_INTRA_BITRATE_PCT`). A key frame of N times the budget waits about N
    /// frame periods of its layer in the sender queue. It caps the base layer's key frame
    /// only (the upper layers' frames of a key picture are inter-layer predicted). Default 150.
    pub max_intra_pct: u32,
    /// Lowest quantizer (0..=63) of the frames of the spatial layers between the base and the
    /// top in a key picture or a spatial re-sync (0 = the layer's `min_q`, libvpx's choice).
    /// Why: those frames are predicted from the layer below alone, so at the layer's usual
    /// quantizer they come out at 1.3-2 times its TL0 slots, wait in its sender queue (the
    /// pacer holds each layer at its announced rate) and hold every picture behind them; no
    /// layer below stands in for a late frame of these layers, so their worst lateness is the
    /// player's buffer. The top layer is left alone: the layer below stands in for its late
    /// frames, and flooring it moved the cost into the frames after the key picture (trace
    /// study, docs/codec.md "Key pictures of the middle layers"). Default 0: at 40 the
    /// player's buffer shrinks, but more pictures come from the layer below (same page).
    pub key_mid_min_q: u32,
    /// Frame dropping (`rc_dropframe_thresh` and `VP9E_SET_SVC_FRAME_DROP_LAYER`): a layer
    /// frame is dropped when its spatial layer's rate-control buffer is below this percentage
    /// of the optimal level, so an overshoot is paid back at once instead of over the buffer.
    /// 0 = never drop. Default 30 (docs/codec.md "Rate control").
    pub drop_thresh: u32,
    /// Which layers drop together (libvpx `SVC_LAYER_DROP_MODE`).
    pub drop_mode: DropMode,
    /// At most this many consecutive drops of any layer (libvpx `max_consec_drop`).
    pub max_consec_drop: u32,
    /// Hold every cell above TL0 at its own budget by lowering its libvpx target while it
    /// overshoots (libvpx holds only a spatial layer's cumulative rate; see `cell_rate`),
    /// measured over 1-s windows. Default true.
    pub track_cells: bool,
}

/// libvpx's SVC frame-drop modes that keep the temporal pattern. (Its full-superframe mode
/// does not: after a dropped superframe libvpx 1.12 continues the 0212 pattern one picture
/// late, 142 of 264 pictures off the pattern on the Big Buck Bunny clip, which would put
/// forced key pictures off the TL0 positions. Not offered.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropMode {
    /// A dropped layer drops every layer above it in that picture.
    Constrained,
    /// Each spatial layer drops on its own buffer.
    Layer,
}

impl SvcConfig {
    /// 1280x720 at 30 fps, L3T2, with the default ladder rates: the server's default encode
    /// (`codec::ladder::DEFAULT_L3T2_CELL_KBPS`); otherwise as [`Self::l3t3_720p`].
    pub fn l3t2_720p() -> Self {
        SvcConfig {
            temporal_layers: 2,
            cell_kbps: crate::ladder::default_cell_kbps(3, 2, 1.0),
            ..Self::l3t3_720p()
        }
    }

    /// 1280x720 at 30 fps, L3T3, with the default ladder rates.
    pub fn l3t3_720p() -> Self {
        SvcConfig {
            width: 1280,
            height: 720,
            fps_num: 30,
            fps_den: 1,
            spatial_layers: 3,
            temporal_layers: 3,
            scales: Vec::new(),
            cell_kbps: crate::ladder::DEFAULT_L3T3_CELL_KBPS
                .iter()
                .map(|r| r.to_vec())
                .collect(),
            speed: 9,
            lower_speed: 9,
            keyframe_interval: 300,
            spatial_sync_interval: 28,
            threads: 1,
            min_q: 2,
            max_q: 63,
            rc_buf_initial_ms: 200,
            rc_buf_optimal_ms: 300,
            rc_buf_ms: 500,
            max_intra_pct: 150,
            key_mid_min_q: 0,
            drop_thresh: 30,
            drop_mode: DropMode::Layer,
            max_consec_drop: 4,
            track_cells: true,
        }
    }

    /// `cpu-used` of spatial layer `s`.
    pub fn layer_speed(&self, s: usize) -> i32 {
        if s + 1 < self.spatial_layers {
            self.lower_speed
        } else {
            self.speed
        }
    }

    /// Scale factors actually used per spatial layer.
    pub fn effective_scales(&self) -> Vec<(u32, u32)> {
        if !self.scales.is_empty() {
            return self.scales.clone();
        }
        match self.spatial_layers {
            1 => vec![(1, 1)],
            2 => vec![(1, 2), (1, 1)],
            _ => vec![(1, 4), (1, 2), (1, 1)],
        }
    }

    /// Resolution of spatial layer `s` (libvpx rounds the scaled size up).
    pub fn layer_size(&self, s: usize) -> (u32, u32) {
        let (n, d) = self.effective_scales()[s];
        ((self.width * n).div_ceil(d), (self.height * n).div_ceil(d))
    }

    fn validate(&self) -> Result<()> {
        let bad = |m: &str| Err(Error::Config(m.to_string()));
        if !(1..=3).contains(&self.spatial_layers) || !(1..=3).contains(&self.temporal_layers) {
            return bad("spatial and temporal layers must be 1..=3");
        }
        if self.width == 0
            || self.height == 0
            || !self.width.is_multiple_of(2)
            || !self.height.is_multiple_of(2)
        {
            return bad("width and height must be even and non-zero");
        }
        if self.fps_num == 0 || self.fps_den == 0 {
            return bad("frame rate must be non-zero");
        }
        if self.effective_scales().len() != self.spatial_layers {
            return bad("one scale factor per spatial layer");
        }
        if self
            .effective_scales()
            .iter()
            .any(|&(n, d)| n == 0 || d == 0 || n > d)
        {
            return bad("scale factors must be in (0, 1]");
        }
        self.check_rates(&self.cell_kbps)?;
        if self.min_q > self.max_q || self.max_q > 63 {
            return bad("need min_q <= max_q <= 63");
        }
        if !(50..=10_000).contains(&self.rc_buf_ms)
            || self.rc_buf_initial_ms > self.rc_buf_ms
            || self.rc_buf_optimal_ms > self.rc_buf_ms
        {
            return bad("need initial, optimal <= rc buffer, rc buffer 50..=10000 ms");
        }
        if self.max_intra_pct > 10_000 {
            return bad("max_intra_pct above 10000");
        }
        if self.key_mid_min_q > self.max_q {
            return bad("need key_mid_min_q <= max_q");
        }
        Ok(())
    }

    fn check_rates(&self, cells: &[Vec<u32>]) -> Result<()> {
        if cells.len() != self.spatial_layers
            || cells.iter().any(|r| r.len() != self.temporal_layers)
        {
            return Err(Error::Config(format!(
                "cell_kbps must be {}x{}",
                self.spatial_layers, self.temporal_layers
            )));
        }
        if cells.iter().flatten().any(|&r| r == 0) {
            return Err(Error::Config("every cell rate must be > 0".into()));
        }
        Ok(())
    }
}

/// One spatial layer frame of one picture, with what the RTP payload descriptor needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerFrame {
    pub spatial: u8,
    pub temporal: u8,
    /// The coded VP9 frame (no superframe index).
    pub data: Vec<u8>,
    /// Inter-picture predicted (RFC 9628 P bit): false on key pictures and spatial syncs.
    pub inter_picture: bool,
    /// Depends on the lower spatial layer of this picture (RFC 9628 D bit).
    pub inter_layer: bool,
    /// Switching-up point (RFC 9628 U bit).
    pub switch_up: bool,
    /// Frame size of this layer.
    pub width: u32,
    pub height: u32,
}

/// All layer frames of one input picture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodedPicture {
    /// Presentation time in 90 kHz units, as given to `encode`.
    pub pts: i64,
    /// Running index of encoded pictures since start.
    pub index: u64,
    pub temporal: u8,
    /// Key picture: spatial layer 0 is a key frame.
    pub key: bool,
    /// Spatial layers re-synced in this picture (bit s set = layer s has P = 0).
    pub sync_mask: u8,
    /// Spatial layers libvpx dropped in this picture (rate control, `SvcConfig::drop_thresh`):
    /// their frame is a one-byte "show existing frame" header instead (see [`filler_frame`]).
    pub dropped_mask: u8,
    pub frames: Vec<LayerFrame>,
}

/// The stand-in for a layer frame libvpx dropped: a VP9 uncompressed header with
/// `show_existing_frame` = 1 (frame marker 2, profile 0, show existing, 3-bit buffer index),
/// which shows reference buffer `idx` again and refreshes nothing, exactly the decoder state
/// the encoder assumes after its drop. Every picture therefore keeps every layer's frame, so
/// the picture IDs, the picture group receivers index by and the assembler's expectations
/// hold whatever libvpx drops, and stock decoders of layer 0 see a repeated frame.
pub fn filler_frame(idx: u8) -> Vec<u8> {
    vec![0x88 | (idx & 7)]
}

/// libvpx VP9 SVC encoder.
pub struct SvcEncoder {
    ctx: Box<sys::vpx_codec_ctx_t>,
    cfg: Box<sys::vpx_codec_enc_cfg_t>,
    conf: SvcConfig,
    /// The per-cell rates the encoder was created with: [`SvcEncoder::set_total_kbps`]
    /// scales these (not the current ones, so repeated changes never drift by rounding).
    base_cells: Vec<Vec<u32>>,
    frame_no: u64,
    frames_since_sync: u32,
    frames_since_key: u32,
    force_key: bool,
    pending_sync: u8,
    /// Spatial layers whose TL0 quantizer floor is raised now ([`SvcConfig::key_mid_min_q`]).
    floored: u8,
    /// Per (spatial, temporal) layer: picture number and reference buffer of the latest frame
    /// that refreshed one.
    latest_slot: [[Option<(u64, u8)>; 3]; 3],
    /// Per-cell target gains (`SvcConfig::track_cells`, more than one temporal layer).
    tracker: Option<CellRateTracker>,
}

// The libvpx context is used only through &mut self; it holds no thread-affine state.
unsafe impl Send for SvcEncoder {}

impl SvcEncoder {
    /// Create and configure the encoder.
    pub fn new(conf: SvcConfig) -> Result<Self> {
        conf.validate()?;
        let ns = conf.spatial_layers;
        let nt = conf.temporal_layers;
        unsafe {
            let iface = sys::vpx_codec_vp9_cx();
            let mut cfg: Box<sys::vpx_codec_enc_cfg_t> = Box::default();
            let r = sys::vpx_codec_enc_config_default(iface, &mut *cfg, 0);
            if r != sys::vpx_codec_err_t_VPX_CODEC_OK {
                return Err(Error::Vpx {
                    call: "vpx_codec_enc_config_default",
                    msg: format!("code {r}"),
                });
            }
            cfg.g_w = conf.width;
            cfg.g_h = conf.height;
            // 90 kHz timebase, as RTP video; libvpx gets a regular clock in it (see `encode`).
            cfg.g_timebase.num = 1;
            cfg.g_timebase.den = 90_000;
            cfg.g_threads = conf.threads;
            cfg.g_lag_in_frames = 0;
            cfg.g_error_resilient = sys::VPX_ERROR_RESILIENT_DEFAULT;
            cfg.g_pass = sys::vpx_enc_pass_VPX_RC_ONE_PASS;
            cfg.rc_end_usage = sys::vpx_rc_mode_VPX_CBR;
            cfg.rc_dropframe_thresh = conf.drop_thresh;
            cfg.rc_resize_allowed = 0;
            cfg.rc_min_quantizer = conf.min_q;
            cfg.rc_max_quantizer = conf.max_q;
            cfg.rc_undershoot_pct = 50;
            cfg.rc_overshoot_pct = 50;
            cfg.rc_buf_initial_sz = conf.rc_buf_initial_ms;
            cfg.rc_buf_optimal_sz = conf.rc_buf_optimal_ms;
            cfg.rc_buf_sz = conf.rc_buf_ms;
            // Periodic keys are ours (`encode` forces them on TL0 pictures); libvpx's own are
            // off. With `VPX_KF_AUTO` and `kf_max_dist` = interval + 8 (meant to push its key
            // past ours), libvpx 1.12 in SVC mode still put a key on every multiple of
            // `kf_max_dist` frames, whatever keys were forced in between: at a 15-frame
            // interval keys came at 0, 16, 23, 40, 46, 64, 69, ... (twice the configured
            // rate, and off the TL0 grid our sync prediction assumes). Forced keys
            // (`VPX_EFLAG_FORCE_KF`) and the first frame are keys with auto keys disabled.
            cfg.kf_mode = sys::vpx_kf_mode_VPX_KF_DISABLED;
            cfg.kf_min_dist = 0;
            cfg.kf_max_dist = u32::MAX / 2;
            cfg.ss_number_layers = ns as c_uint;
            cfg.ts_number_layers = nt as c_uint;
            let (ids, mode): (&[u32], c_int) = match nt {
                1 => (
                    &[0],
                    sys::vp9e_temporal_layering_mode_VP9E_TEMPORAL_LAYERING_MODE_NOLAYERING
                        as c_int,
                ),
                2 => (
                    &[0, 1],
                    sys::vp9e_temporal_layering_mode_VP9E_TEMPORAL_LAYERING_MODE_0101 as c_int,
                ),
                _ => (
                    &[0, 2, 1, 2],
                    sys::vp9e_temporal_layering_mode_VP9E_TEMPORAL_LAYERING_MODE_0212 as c_int,
                ),
            };
            cfg.ts_periodicity = ids.len() as c_uint;
            cfg.ts_layer_id[..ids.len()].copy_from_slice(ids);
            for t in 0..nt {
                cfg.ts_rate_decimator[t] = 1 << (nt - 1 - t);
            }
            cfg.temporal_layering_mode = mode;
            fill_rates(&mut cfg, &conf.cell_kbps, ns, nt);

            let mut ctx: Box<sys::vpx_codec_ctx_t> = Box::default();
            let r = sys::vpx_codec_enc_init_ver(
                &mut *ctx,
                iface,
                &*cfg,
                0,
                sys::VPX_ENCODER_ABI_VERSION as c_int,
            );
            if r != sys::vpx_codec_err_t_VPX_CODEC_OK {
                let e = vpx_error(&mut *ctx, "vpx_codec_enc_init");
                return Err(e);
            }
            let mut enc = SvcEncoder {
                ctx,
                cfg,
                base_cells: conf.cell_kbps.clone(),
                conf,
                frame_no: 0,
                frames_since_sync: 0,
                frames_since_key: 0,
                force_key: false,
                pending_sync: 0,
                floored: 0,
                latest_slot: [[None; 3]; 3],
                tracker: None,
            };
            if enc.conf.track_cells && nt > 1 {
                // 1-s windows: 2-s ones let the test pattern's overshoot at the start queue
                // longer (fill study: S2T2 wait p95 1144 against 592 ms).
                let window =
                    ((enc.conf.fps_num as f64 / enc.conf.fps_den as f64).round() as u32).max(1);
                let window_s = window as f64 * enc.conf.fps_den as f64 / enc.conf.fps_num as f64;
                enc.tracker = Some(CellRateTracker::new(ns, nt, window, window_s));
            }
            enc.configure_controls()?;
            Ok(enc)
        }
    }

    /// A control whose argument is a libvpx struct (`id`'s own type, which the caller names).
    unsafe fn control_ptr<T>(&mut self, id: u32, v: &mut T, name: &'static str) -> Result<()> {
        let r = sys::vpx_codec_control_(&mut *self.ctx, id as c_int, v as *mut T);
        if r != sys::vpx_codec_err_t_VPX_CODEC_OK {
            return Err(vpx_error(&mut *self.ctx, name));
        }
        Ok(())
    }

    unsafe fn control_int(&mut self, id: u32, v: c_int, name: &'static str) -> Result<()> {
        let r = sys::vpx_codec_control_(&mut *self.ctx, id as c_int, v);
        if r != sys::vpx_codec_err_t_VPX_CODEC_OK {
            return Err(vpx_error(&mut *self.ctx, name));
        }
        Ok(())
    }

    /// One spatial and one temporal layer at full size: encoded as a plain VP9 stream (no SVC
    /// controls), e.g. the single-layer reference of the rate-quality benchmark.
    fn plain(&self) -> bool {
        self.conf.spatial_layers == 1
            && self.conf.temporal_layers == 1
            && self.conf.effective_scales() == [(1, 1)]
    }

    unsafe fn configure_svc(&mut self) -> Result<()> {
        self.control_int(sys::vp8e_enc_control_id_VP9E_SET_SVC, 1, "SET_SVC")?;
        self.set_svc_parameters(0)?;
        // Full inter-layer prediction (mode 0): cumulative subscription always has the lower
        // layer of the same picture, so this is the most efficient choice.
        self.control_int(
            sys::vp8e_enc_control_id_VP9E_SET_SVC_INTER_LAYER_PRED,
            0,
            "INTER_LAYER_PRED",
        )?;
        let mut fd: sys::vpx_svc_frame_drop_t = Default::default();
        for s in 0..self.conf.spatial_layers {
            fd.framedrop_thresh[s] = self.conf.drop_thresh as c_int;
        }
        fd.framedrop_mode = match self.conf.drop_mode {
            DropMode::Constrained => sys::SVC_LAYER_DROP_MODE_CONSTRAINED_LAYER_DROP,
            DropMode::Layer => sys::SVC_LAYER_DROP_MODE_LAYER_DROP,
        };
        fd.max_consec_drop = self.conf.max_consec_drop as c_int;
        self.control_ptr(
            sys::vp8e_enc_control_id_VP9E_SET_SVC_FRAME_DROP_LAYER,
            &mut fd,
            "SVC_FRAME_DROP_LAYER",
        )?;
        Ok(())
    }

    /// libvpx's per-layer parameters; the TL0 cells of the spatial layers in `floor_mask`
    /// get [`SvcConfig::key_mid_min_q`] as their lowest quantizer. libvpx reads a layer's
    /// quantizer bounds from these at the start of each of its frames, so setting them around
    /// one picture bounds that picture only.
    unsafe fn set_svc_parameters(&mut self, floor_mask: u8) -> Result<()> {
        let ns = self.conf.spatial_layers;
        let nt = self.conf.temporal_layers;
        let mut p: sys::vpx_svc_extra_cfg_t = Default::default();
        let scales = self.conf.effective_scales();
        for s in 0..ns {
            p.scaling_factor_num[s] = scales[s].0 as c_int;
            p.scaling_factor_den[s] = scales[s].1 as c_int;
            p.speed_per_layer[s] = self.conf.layer_speed(s);
            p.loopfilter_ctrl[s] = 0;
        }
        // Per (spatial x temporal) layer: leaving any at zero codes that layer near-lossless.
        for i in 0..ns * nt {
            p.max_quantizers[i] = self.conf.max_q as c_int;
            p.min_quantizers[i] = self.conf.min_q as c_int;
        }
        for s in (1..ns).filter(|s| floor_mask >> s & 1 == 1) {
            p.min_quantizers[s * nt] = self.conf.min_q.max(self.conf.key_mid_min_q) as c_int;
        }
        p.temporal_layering_mode = self.cfg.temporal_layering_mode;
        self.control_ptr(
            sys::vp8e_enc_control_id_VP9E_SET_SVC_PARAMETERS,
            &mut p,
            "SET_SVC_PARAMETERS",
        )?;
        Ok(())
    }

    unsafe fn configure_controls(&mut self) -> Result<()> {
        self.control_int(
            sys::vp8e_enc_control_id_VP8E_SET_CPUUSED,
            self.conf.speed,
            "CPUUSED",
        )?;
        if self.plain() {
            // One layer, no SVC: libvpx's SVC rate control ignored the target of a one-layer
            // SVC encode (measured: the same ~50 kbit/s for 100 and 400 kbit/s targets).
        } else {
            self.configure_svc()?;
        }
        self.control_int(sys::vp8e_enc_control_id_VP9E_SET_AQ_MODE, 3, "AQ_MODE")?;
        self.control_int(
            sys::vp8e_enc_control_id_VP8E_SET_STATIC_THRESHOLD,
            1,
            "STATIC_THRESHOLD",
        )?;
        self.control_int(
            sys::vp8e_enc_control_id_VP8E_SET_MAX_INTRA_BITRATE_PCT,
            self.conf.max_intra_pct as c_int,
            "MAX_INTRA_BITRATE_PCT",
        )?;
        self.control_int(
            sys::vp8e_enc_control_id_VP9E_SET_NOISE_SENSITIVITY,
            0,
            "NOISE_SENSITIVITY",
        )?;
        let tiles = if self.conf.threads > 1 { 1 } else { 0 };
        self.control_int(
            sys::vp8e_enc_control_id_VP9E_SET_TILE_COLUMNS,
            tiles,
            "TILE_COLUMNS",
        )?;
        self.control_int(
            sys::vp8e_enc_control_id_VP9E_SET_ROW_MT,
            (self.conf.threads > 1) as c_int,
            "ROW_MT",
        )?;
        Ok(())
    }

    /// The configuration in force.
    pub fn config(&self) -> &SvcConfig {
        &self.conf
    }

    /// Change per-cell target rates at run time. No key frame is forced: libvpx updates the
    /// layer rate-control contexts in place.
    pub fn set_bitrates(&mut self, cell_kbps: &[Vec<u32>]) -> Result<()> {
        self.conf.check_rates(cell_kbps)?;
        self.conf.cell_kbps = cell_kbps.to_vec();
        self.apply_targets()
    }

    /// Hands libvpx the configured cell budgets, times the tracker's gains.
    fn apply_targets(&mut self) -> Result<()> {
        let targets = match &self.tracker {
            Some(t) => t.targets(&self.conf.cell_kbps),
            None => self.conf.cell_kbps.clone(),
        };
        fill_rates(
            &mut self.cfg,
            &targets,
            self.conf.spatial_layers,
            self.conf.temporal_layers,
        );
        unsafe {
            let r = sys::vpx_codec_enc_config_set(&mut *self.ctx, &*self.cfg);
            if r != sys::vpx_codec_err_t_VPX_CODEC_OK {
                return Err(vpx_error(&mut *self.ctx, "vpx_codec_enc_config_set"));
            }
        }
        Ok(())
    }

    /// One total target (kbit/s) for the whole encode: the configured per-cell rates scaled
    /// to sum to `total_kbps` ([`crate::ladder::scale_cells`], each cell at least 1 kbit/s),
    /// applied with [`SvcEncoder::set_bitrates`]. For senders that adapt one rate (TFMCC).
    pub fn set_total_kbps(&mut self, total_kbps: u32) -> Result<()> {
        let cells = crate::ladder::scale_cells(&self.base_cells, total_kbps);
        self.set_bitrates(&cells)
    }

    /// Sum of the per-cell targets in force, kbit/s.
    pub fn total_kbps(&self) -> u32 {
        self.conf.cell_kbps.iter().flatten().sum()
    }

    /// Make the next TL0 picture a key picture.
    pub fn request_keyframe(&mut self) {
        self.force_key = true;
    }

    /// Re-sync spatial layer `s` (>0) on the next TL0 picture (a layer refresh, RFC 9627).
    pub fn request_spatial_sync(&mut self, s: usize) {
        if s > 0 && s < self.conf.spatial_layers {
            self.pending_sync |= 1 << s;
        }
    }

    /// Bytes of one I420 input picture at the configured size.
    pub fn frame_bytes(&self) -> usize {
        i420_len(self.conf.width, self.conf.height)
    }

    /// Encode one I420 picture (planes packed, strides = width, width/2). `pts` in 90 kHz.
    /// Returns `None` if libvpx produced no output for it.
    pub fn encode(&mut self, i420: &[u8], pts: i64) -> Result<Option<EncodedPicture>> {
        let (w, h) = (self.conf.width, self.conf.height);
        if i420.len() != i420_len(w, h) {
            return Err(Error::Config(format!(
                "I420 frame of {} bytes, expected {} for {w}x{h}",
                i420.len(),
                i420_len(w, h)
            )));
        }
        let ns = self.conf.spatial_layers;
        let nt = self.conf.temporal_layers as u64;
        let period: u64 = match nt {
            1 => 1,
            2 => 2,
            _ => 4,
        };
        // Position in the temporal pattern. libvpx restarts the pattern on key pictures; we
        // track our own count since the last key picture to predict the TL0 pictures where a
        // spatial sync is placed. The temporal id reported comes from libvpx itself.
        let tl0_next = self.frame_no.is_multiple_of(period);
        let mut sync_mask = 0u8;
        let auto_sync = self.conf.spatial_sync_interval > 0
            && self.frames_since_sync + 1 >= self.conf.spatial_sync_interval;
        if tl0_next && ns > 1 && (auto_sync || self.pending_sync != 0) && !self.force_key {
            sync_mask = if auto_sync {
                ((1u8 << ns) - 1) & !1
            } else {
                self.pending_sync
            };
        }
        // Key pictures only at TL0 positions, so the temporal pattern (and the SS picture
        // group receivers index by) stays aligned; periodic keys are ours, not libvpx's.
        if self.conf.keyframe_interval > 0
            && self.frames_since_key + 1 >= self.conf.keyframe_interval
        {
            self.force_key = true;
        }
        let key_flag = self.force_key && tl0_next;
        // The middle layers' frames predicted from the layer below alone get the quantizer
        // floor; every other picture the layers' own bounds.
        let mid = ((1u8 << ns) - 1) & !1 & !(1 << (ns - 1));
        let floor_mask = if self.conf.key_mid_min_q > self.conf.min_q {
            mid & if key_flag { 0xff } else { sync_mask }
        } else {
            0
        };
        unsafe {
            if floor_mask != self.floored {
                self.set_svc_parameters(floor_mask)?;
                self.floored = floor_mask;
            }
            if sync_mask != 0 {
                let mut sc: sys::vpx_svc_spatial_layer_sync_t = Default::default();
                for s in 1..ns {
                    sc.spatial_layer_sync[s] = ((sync_mask >> s) & 1) as c_int;
                }
                self.control_ptr(
                    sys::vp8e_enc_control_id_VP9E_SET_SVC_SPATIAL_LAYER_SYNC,
                    &mut sc,
                    "SPATIAL_LAYER_SYNC",
                )?;
            }
            let mut img: sys::vpx_image_t = Default::default();
            let p = sys::vpx_img_wrap(
                &mut img,
                sys::vpx_img_fmt_VPX_IMG_FMT_I420,
                w,
                h,
                1,
                i420.as_ptr() as *mut u8,
            );
            if p.is_null() {
                return Err(Error::Vpx {
                    call: "vpx_img_wrap",
                    msg: "failed".into(),
                });
            }
            let duration = (90_000u64 * self.conf.fps_den as u64 / self.conf.fps_num as u64).max(1);
            let flags = if key_flag {
                sys::VPX_EFLAG_FORCE_KF as sys::vpx_enc_frame_flags_t
            } else {
                0
            };
            // libvpx sees a regular clock, one frame duration per picture: it re-derives the
            // frame rate, and with it every layer's frame budget, from the gaps between
            // timestamps, and a source's capture jitter (a looped clip's 24- and 67-ms gaps at
            // 30 fps) made it code the pictures after a gap over their budgets. The caller's
            // `pts` (capture time, the RTP clock) goes back out unchanged: no lag in realtime
            // mode, so the output is this picture.
            let r = sys::vpx_codec_encode(
                &mut *self.ctx,
                &img,
                (self.frame_no * duration) as i64,
                duration as _,
                flags,
                sys::VPX_DL_REALTIME as _,
            );
            if r != sys::vpx_codec_err_t_VPX_CODEC_OK {
                return Err(vpx_error(&mut *self.ctx, "vpx_codec_encode"));
            }
            let mut lid: sys::vpx_svc_layer_id_t = Default::default();
            self.control_ptr(
                sys::vp8e_enc_control_id_VP9E_GET_SVC_LAYER_ID,
                &mut lid,
                "GET_SVC_LAYER_ID",
            )?;
            // Which buffers each encoded layer refreshed (for drop fillers).
            let mut rc: sys::vpx_svc_ref_frame_config_t = Default::default();
            let have_rc = sys::vpx_codec_control_(
                &mut *self.ctx,
                sys::vp8e_enc_control_id_VP9E_GET_SVC_REF_FRAME_CONFIG as c_int,
                &mut rc as *mut sys::vpx_svc_ref_frame_config_t,
            ) == sys::vpx_codec_err_t_VPX_CODEC_OK;
            let mut out = None;
            let mut iter: sys::vpx_codec_iter_t = std::ptr::null();
            loop {
                let pkt = sys::vpx_codec_get_cx_data(&mut *self.ctx, &mut iter);
                if pkt.is_null() {
                    break;
                }
                if (*pkt).kind != sys::vpx_codec_cx_pkt_kind_VPX_CODEC_CX_FRAME_PKT {
                    continue;
                }
                let f = &(*pkt).data.frame;
                let data = std::slice::from_raw_parts(f.buf as *const u8, f.sz);
                let key = f.flags & sys::VPX_FRAME_IS_KEY != 0;
                let encoded: Vec<usize> = match self.plain() {
                    true => vec![0],
                    false => (0..ns)
                        .filter(|&s| f.spatial_layer_encoded[s] != 0)
                        .collect(),
                };
                let parts = superframe::split(data)?;
                if parts.len() != encoded.len() {
                    return Err(Error::Vpx {
                        call: "vpx_codec_get_cx_data",
                        msg: format!(
                            "superframe has {} frames but {} spatial layers encoded",
                            parts.len(),
                            encoded.len()
                        ),
                    });
                }
                let temporal = lid.temporal_layer_id.clamp(0, 7) as u8;
                let mut frames: Vec<Option<&[u8]>> = vec![None; ns];
                for (d, &s) in parts.iter().zip(&encoded) {
                    frames[s] = Some(d);
                }
                out = Some((
                    pts,
                    key,
                    temporal,
                    frames
                        .iter()
                        .map(|d| d.map(<[u8]>::to_vec))
                        .collect::<Vec<_>>(),
                ));
            }
            // A picture libvpx dropped whole: every layer is a filler, at the temporal layer
            // of its position in the pattern (libvpx advances the pattern over drops).
            let (pts, key, temporal, datas) = match out {
                Some(o) => o,
                None if self.conf.drop_thresh > 0 => {
                    let ids: &[u8] = match nt {
                        1 => &[0],
                        2 => &[0, 1],
                        _ => &[0, 2, 1, 2],
                    };
                    (
                        pts,
                        false,
                        ids[(self.frame_no % period) as usize],
                        vec![None; ns],
                    )
                }
                None => {
                    self.frame_no += 1;
                    return Ok(None);
                }
            };
            // The buffer a filler shows: the latest reference buffer its layer refreshed (the
            // configuration libvpx reports is only valid for the layers it encoded).
            // A filler at temporal layer t shows the newest buffer a frame of its spatial layer
            // at temporal layer <= t refreshed: one every holder of the filler has decoded.
            for (s, d) in datas.iter().enumerate() {
                let slots = rc.update_buffer_slot[s];
                if d.is_some() && have_rc && slots & 0xff != 0 {
                    self.latest_slot[s][temporal as usize % 3] =
                        Some((self.frame_no, slots.trailing_zeros() as u8));
                }
            }
            let latest: Vec<u8> = (0..ns)
                .map(|s| {
                    self.latest_slot[s][..=(temporal as usize).min(2)]
                        .iter()
                        .flatten()
                        .max()
                        .map_or(s as u8, |&(_, slot)| slot)
                })
                .collect();
            let mut dropped_mask = 0u8;
            let frames = datas
                .into_iter()
                .enumerate()
                .map(|(s, d)| {
                    let (lw, lh) = self.conf.layer_size(s);
                    let synced = key || (sync_mask >> s) & 1 == 1;
                    let data = d.unwrap_or_else(|| {
                        dropped_mask |= 1 << s;
                        filler_frame(latest[s])
                    });
                    LayerFrame {
                        spatial: s as u8,
                        temporal,
                        data,
                        inter_picture: !synced || dropped_mask >> s & 1 == 1,
                        inter_layer: s > 0,
                        // libvpx's 0212/0101 modes predict TL>0 frames only from lower
                        // temporal layers (TL2 from TL0/TL1, TL1 from TL0), so every
                        // frame is a switching-up point; docs/codec.md records the check.
                        switch_up: temporal > 0,
                        width: lw,
                        height: lh,
                    }
                })
                .collect();
            let sync_done = if key { 0 } else { sync_mask & !dropped_mask };
            let out = Some(EncodedPicture {
                pts,
                index: self.frame_no,
                temporal,
                key,
                sync_mask: sync_done,
                dropped_mask,
                frames,
            });
            self.frame_no += 1;
            let retarget = match (self.tracker.as_mut(), &out) {
                (Some(t), Some(p)) => {
                    for f in &p.frames {
                        t.push(f.spatial as usize, f.temporal as usize, f.data.len());
                    }
                    t.end_picture(&self.conf.cell_kbps)
                }
                _ => false,
            };
            if retarget {
                self.apply_targets()?;
            }
            if let Some(p) = &out {
                self.frames_since_key = if p.key { 0 } else { self.frames_since_key + 1 };
                if p.key {
                    self.force_key = false;
                    self.frames_since_sync = 0;
                    self.pending_sync = 0;
                } else if p.sync_mask != 0 {
                    self.frames_since_sync = 0;
                    self.pending_sync &= !p.sync_mask;
                } else {
                    self.frames_since_sync += 1;
                }
            }
            Ok(out)
        }
    }
}

impl Drop for SvcEncoder {
    fn drop(&mut self) {
        unsafe {
            sys::vpx_codec_destroy(&mut *self.ctx);
        }
    }
}

/// Bytes of an I420 picture with tight strides.
pub fn i420_len(w: u32, h: u32) -> usize {
    let (w, h) = (w as usize, h as usize);
    w * h + 2 * (w.div_ceil(2) * h.div_ceil(2))
}

fn fill_rates(cfg: &mut sys::vpx_codec_enc_cfg_t, cells: &[Vec<u32>], ns: usize, nt: usize) {
    let mut total = 0;
    for s in 0..ns {
        let mut cum = 0;
        for t in 0..nt {
            cum += cells[s][t];
            cfg.layer_target_bitrate[s * nt + t] = cum;
        }
        cfg.ss_target_bitrate[s] = cum;
        total += cum;
    }
    cfg.rc_target_bitrate = total;
}
