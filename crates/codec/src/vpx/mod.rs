//! Safe wrappers over libvpx's VP9 SVC encoder and VP9 decoder.
//!
//! The encoder runs libvpx's own layering (`temporal_layering_mode` 0212/0101, inter-layer
//! prediction on every picture, error resilient, one-pass CBR). Each input picture yields one
//! superframe which is split by its index into [`LayerFrame`]s tagged with their (spatial,
//! temporal) cell. The decoder is fed, per picture, the frames a receiver kept.

pub mod sys;

mod cell_rate;
mod decoder;
mod encoder;

pub use decoder::{DecodedFrame, Decoder};
pub use encoder::i420_len as encoder_i420_len;
pub use encoder::{DropMode, EncodedPicture, LayerFrame, SvcConfig, SvcEncoder};

use crate::error::Error;
use std::ffi::CStr;

/// Build an [`Error::Vpx`] from the context's last error.
///
/// # Safety
/// `ctx` must point at an initialised (or failed-init) codec context.
unsafe fn vpx_error(ctx: *mut sys::vpx_codec_ctx_t, call: &'static str) -> Error {
    let mut msg = String::new();
    let e = sys::vpx_codec_error(ctx);
    if !e.is_null() {
        msg.push_str(&CStr::from_ptr(e).to_string_lossy());
    }
    let d = sys::vpx_codec_error_detail(ctx);
    if !d.is_null() {
        msg.push_str(": ");
        msg.push_str(&CStr::from_ptr(d).to_string_lossy());
    }
    Error::Vpx { call, msg }
}
