//! Generated test content and picture-quality helpers (I420 frames with motion, box
//! down-scaling, PSNR). Used by tests and benches so no media file has to be committed.

/// An L3T3 640x360 encode of [`frame`]'s clip at a budget far below what it needs, with
/// libvpx's per-layer frame dropping on and a short rate-control buffer, and a key picture
/// every 24: libvpx drops layer frames of every spatial layer, which go out as one-byte
/// fillers (docs/codec.md "Frame dropping on, with fillers"). For tests of what receivers make
/// of them.
pub fn starved_l3t3() -> crate::vpx::SvcConfig {
    let mut conf = crate::vpx::SvcConfig::l3t3_720p();
    (conf.width, conf.height) = (640, 360);
    conf.cell_kbps = vec![vec![20, 6, 6], vec![40, 12, 12], vec![80, 25, 25]];
    conf.drop_thresh = 80;
    conf.drop_mode = crate::vpx::DropMode::Layer;
    conf.rc_buf_initial_ms = 100;
    conf.rc_buf_optimal_ms = 200;
    conf.rc_buf_ms = 300;
    conf.keyframe_interval = 24;
    conf
}

/// A 4:2:0 frame with tight strides.
pub fn i420_len(w: u32, h: u32) -> usize {
    crate::vpx::encoder_i420_len(w, h)
}

/// Frame `n` of a synthetic clip: a diagonally scrolling colour gradient, a fine texture that
/// pans (so there is detail only the upper spatial layers can carry), a bouncing disc and a
/// sliding bar.
pub fn frame(w: u32, h: u32, n: u32) -> Vec<u8> {
    let (wu, hu) = (w as usize, h as usize);
    let (cw, ch) = (wu.div_ceil(2), hu.div_ceil(2));
    let mut f = vec![0u8; wu * hu + 2 * cw * ch];
    let t = n as f32;
    // Disc centre bounces inside the frame.
    let period_x = 2.0 * (w as f32 - 120.0);
    let period_y = 2.0 * (h as f32 - 120.0);
    let bx = 60.0 + tri((t * 9.0) % period_x, period_x);
    let by = 60.0 + tri((t * 6.0) % period_y, period_y);
    let r2 = (0.06 * h as f32).powi(2);
    let bar_x = ((n as usize) * 5) % wu;
    let (y, uv) = f.split_at_mut(wu * hu);
    for row in 0..hu {
        for col in 0..wu {
            let g = ((col + row + 2 * n as usize) % 256) as f32 * 0.5 + 40.0;
            let tex = if ((col + 3 * n as usize) / 2 + row / 2).is_multiple_of(2) {
                24.0
            } else {
                -24.0
            };
            let mut v = g + tex * 0.5;
            let dx = col as f32 - bx;
            let dy = row as f32 - by;
            if dx * dx + dy * dy < r2 {
                v = 230.0 - (dx.abs() + dy.abs()) * 0.3;
            }
            if col.abs_diff(bar_x) < 12 {
                v = 16.0;
            }
            y[row * wu + col] = v.clamp(0.0, 255.0) as u8;
        }
    }
    let (u, v) = uv.split_at_mut(cw * ch);
    for row in 0..ch {
        for col in 0..cw {
            u[row * cw + col] = (128 + ((col + n as usize) % 64) as i32 - 32) as u8;
            v[row * cw + col] = (128 + ((row * 2 + n as usize) % 64) as i32 - 32) as u8;
        }
    }
    f
}

fn tri(x: f32, period: f32) -> f32 {
    let half = period / 2.0;
    if x < half {
        x
    } else {
        period - x
    }
}

/// Area-average (box) down-scale of a tightly packed I420 frame to `dw x dh`.
pub fn scale_i420(src: &[u8], w: u32, h: u32, dw: u32, dh: u32) -> Vec<u8> {
    let (w, h, dw, dh) = (w as usize, h as usize, dw as usize, dh as usize);
    let (cw, ch, dcw, dch) = (w.div_ceil(2), h.div_ceil(2), dw.div_ceil(2), dh.div_ceil(2));
    let mut out = Vec::with_capacity(dw * dh + 2 * dcw * dch);
    let planes = [
        (0, w, h, dw, dh),
        (w * h, cw, ch, dcw, dch),
        (w * h + cw * ch, cw, ch, dcw, dch),
    ];
    for (off, pw, ph, qw, qh) in planes {
        for r in 0..qh {
            let (y0, y1) = (r * ph / qh, ((r + 1) * ph / qh).max(r * ph / qh + 1));
            for c in 0..qw {
                let (x0, x1) = (c * pw / qw, ((c + 1) * pw / qw).max(c * pw / qw + 1));
                let mut sum = 0u32;
                for yy in y0..y1.min(ph) {
                    for xx in x0..x1.min(pw) {
                        sum += src.get(off + yy * pw + xx).copied().unwrap_or(0) as u32;
                    }
                }
                let n = ((y1.min(ph) - y0) * (x1.min(pw) - x0)).max(1) as u32;
                out.push(((sum + n / 2) / n) as u8);
            }
        }
    }
    out
}

/// PSNR (dB) over all I420 samples of two equal-size frames; 100 for identical frames.
pub fn psnr(a: &[u8], b: &[u8]) -> f64 {
    let n = a.len().min(b.len()).max(1);
    let sse: u64 = a
        .iter()
        .zip(b)
        .map(|(&x, &y)| {
            let d = x as i64 - y as i64;
            (d * d) as u64
        })
        .sum();
    if sse == 0 {
        return 100.0;
    }
    10.0 * (255.0f64 * 255.0 * n as f64 / sse as f64).log10()
}

/// Mean SSIM of the luma planes (`w` x `h`, the first `w * h` bytes) of two equal-size
/// frames, over non-overlapping 8x8 windows with the usual constants (K1 0.01, K2 0.03, L 255).
pub fn ssim_luma(a: &[u8], b: &[u8], w: u32, h: u32) -> f64 {
    let (w, h) = (w as usize, h as usize);
    if a.len() < w * h || b.len() < w * h || w < 8 || h < 8 {
        return 0.0;
    }
    let (c1, c2) = ((0.01 * 255.0f64).powi(2), (0.03 * 255.0f64).powi(2));
    let (mut sum, mut n) = (0.0, 0u32);
    for y0 in (0..=h - 8).step_by(8) {
        for x0 in (0..=w - 8).step_by(8) {
            let (mut sa, mut sb, mut saa, mut sbb, mut sab) = (0.0, 0.0, 0.0, 0.0, 0.0);
            for y in y0..y0 + 8 {
                for x in x0..x0 + 8 {
                    let (p, q) = (a[y * w + x] as f64, b[y * w + x] as f64);
                    sa += p;
                    sb += q;
                    saa += p * p;
                    sbb += q * q;
                    sab += p * q;
                }
            }
            let (ma, mb) = (sa / 64.0, sb / 64.0);
            let (va, vb) = (saa / 64.0 - ma * ma, sbb / 64.0 - mb * mb);
            let cov = sab / 64.0 - ma * mb;
            sum += ((2.0 * ma * mb + c1) * (2.0 * cov + c2))
                / ((ma * ma + mb * mb + c1) * (va + vb + c2));
            n += 1;
        }
    }
    sum / n.max(1) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_move_and_scale() {
        let a = frame(64, 36, 0);
        let b = frame(64, 36, 5);
        assert_eq!(a.len(), i420_len(64, 36));
        assert!(psnr(&a, &b) < 30.0, "consecutive frames should differ");
        let s = scale_i420(&a, 64, 36, 32, 18);
        assert_eq!(s.len(), i420_len(32, 18));
        assert_eq!(psnr(&a, &a), 100.0);
        assert!((ssim_luma(&a, &a, 64, 36) - 1.0).abs() < 1e-12);
        let worse = ssim_luma(&a, &b, 64, 36);
        assert!(worse < 0.95 && worse > -1.0, "{worse}");
    }
}
