//! VP9 SVC codec and RTP payload for Layercast.
//!
//! * [`rtp`]: RTP fixed header (RFC 3550) with RFC 8285 header extensions, zero-copy parse and
//!   serialise.
//!
//! See `docs/codec.md` for the signal flow and the choices made.

pub mod depay;
pub mod error;
#[cfg(feature = "gst")]
pub mod gst;
pub mod ladder;
pub mod rtp;
pub mod sdp;
pub mod superframe;
pub mod synth;
pub mod vp9rtp;
pub mod vpx;

pub use error::{Error, Result};
