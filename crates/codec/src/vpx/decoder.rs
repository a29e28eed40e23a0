//! `Decoder`: libvpx VP9 decoder fed one access unit (kept layer frames) per picture.

use super::{sys, vpx_error};
use crate::error::{Error, Result};
use crate::superframe;
use std::os::raw::c_int;

/// A decoded picture, copied out of libvpx into tightly packed I420.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodedFrame {
    pub width: u32,
    pub height: u32,
    /// Y plane (width x height) then U and V (ceil(w/2) x ceil(h/2) each).
    pub i420: Vec<u8>,
}

/// libvpx VP9 decoder.
pub struct Decoder {
    ctx: Box<sys::vpx_codec_ctx_t>,
    buf: Vec<u8>,
}

unsafe impl Send for Decoder {}

impl Decoder {
    /// New decoder with `threads` worker threads (0 or 1 = single-threaded).
    pub fn new(threads: u32) -> Result<Self> {
        unsafe {
            let mut ctx: Box<sys::vpx_codec_ctx_t> = Box::default();
            let cfg = sys::vpx_codec_dec_cfg_t {
                threads: threads.max(1),
                w: 0,
                h: 0,
            };
            let r = sys::vpx_codec_dec_init_ver(
                &mut *ctx,
                sys::vpx_codec_vp9_dx(),
                &cfg,
                0,
                sys::VPX_DECODER_ABI_VERSION as c_int,
            );
            if r != sys::vpx_codec_err_t_VPX_CODEC_OK {
                return Err(vpx_error(&mut *ctx, "vpx_codec_dec_init"));
            }
            Ok(Decoder {
                ctx,
                buf: Vec::new(),
            })
        }
    }

    /// Decode one picture given as its layer frames, lowest spatial layer first. They are
    /// wrapped in a rebuilt superframe index. Returns the last shown frame, if any.
    pub fn decode_layers(&mut self, frames: &[&[u8]]) -> Result<Option<DecodedFrame>> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        let r = superframe::build(frames, &mut buf).and_then(|_| self.decode(&buf));
        self.buf = buf;
        r
    }

    /// Decode one access unit (a frame or a superframe). Returns the last shown frame.
    pub fn decode(&mut self, data: &[u8]) -> Result<Option<DecodedFrame>> {
        if data.is_empty() || data.len() > u32::MAX as usize {
            return Err(Error::BadBitstream("access unit size"));
        }
        unsafe {
            let r = sys::vpx_codec_decode(
                &mut *self.ctx,
                data.as_ptr(),
                data.len() as _,
                std::ptr::null_mut(),
                0,
            );
            if r != sys::vpx_codec_err_t_VPX_CODEC_OK {
                return Err(vpx_error(&mut *self.ctx, "vpx_codec_decode"));
            }
            let mut iter: sys::vpx_codec_iter_t = std::ptr::null();
            let mut last = None;
            loop {
                let img = sys::vpx_codec_get_frame(&mut *self.ctx, &mut iter);
                if img.is_null() {
                    break;
                }
                last = Some(copy_image(&*img)?);
            }
            Ok(last)
        }
    }
}

unsafe fn copy_image(img: &sys::vpx_image_t) -> Result<DecodedFrame> {
    if img.fmt != sys::vpx_img_fmt_VPX_IMG_FMT_I420 {
        return Err(Error::BadBitstream("decoder output is not 8-bit I420"));
    }
    let (w, h) = (img.d_w as usize, img.d_h as usize);
    let (cw, ch) = (w.div_ceil(2), h.div_ceil(2));
    let mut out = Vec::with_capacity(w * h + 2 * cw * ch);
    for (plane, pw, ph) in [(0, w, h), (1, cw, ch), (2, cw, ch)] {
        let stride = img.stride[plane] as isize;
        let base = img.planes[plane];
        for row in 0..ph {
            let p = base.offset(stride * row as isize);
            out.extend_from_slice(std::slice::from_raw_parts(p, pw));
        }
    }
    Ok(DecodedFrame {
        width: w as u32,
        height: h as u32,
        i420: out,
    })
}

impl Drop for Decoder {
    fn drop(&mut self) {
        unsafe {
            sys::vpx_codec_destroy(&mut *self.ctx);
        }
    }
}
