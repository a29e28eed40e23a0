//! VP9 SVC codec and RTP payload for Layercast.
//!
//! * [`rtp`]: RTP fixed header (RFC 3550) with RFC 8285 header extensions, zero-copy parse and
//!   serialise.
//! * [`vpx`]: libvpx VP9 SVC encoder ([`vpx::SvcEncoder`]) and decoder ([`vpx::Decoder`]).
//! * [`superframe`]: split / rebuild VP9 superframes.
//! * [`ladder`]: which (spatial, temporal) cell is cumulative layer k, nominal rates.
//! * [`vp9rtp`]: RFC 9628 payload descriptor, packetizer, per-layer RTP streams.
//! * [`depay`]: picture assembly from any prefix of layers, with loss and reordering.
//! * [`fec`] (`proto::fec`, re-exported): XOR parity repair packets per layer (RFC 8627
//!   header), sent where padding went; recovery before picture assembly.
//! * [`sdp`]: SDP for one layer stream (layer 0 plays in stock GStreamer and ffmpeg), with
//!   the session's Opus track.
//! * [`opus`]: Opus RTP payload (RFC 7587) packetizer and depacketizer; with feature `opus`
//!   (default) the libopus encoder and decoder.
//! * [`rtcp`]: RTCP sender reports (RFC 3550 §6.4.1), the NTP ↔ RTP mapping for lip sync.
//! * `gst` (feature `gst`, default): GStreamer source/sink glue.
//! * [`synth`]: generated test clip, scaling and PSNR helpers.
//!
//! See `docs/codec.md` for the signal flow and the choices made.

pub mod depay;
pub mod error;
#[cfg(feature = "gst")]
pub mod gst;
pub mod ladder;
pub mod opus;
/// FEC repair packets, which live in `proto` so that sans-IO hosts need no libvpx.
pub use proto::fec;
/// RTCP sender reports: a wire format, in `proto` (the Publisher sends them).
pub use proto::rtcp;
/// RTP (RFC 3550/8285), which lives in `proto` so that sans-IO hosts need no libvpx.
pub use proto::rtp;
pub mod sdp;
pub mod superframe;
pub mod synth;
pub mod vp9rtp;
pub mod vpx;

pub use error::{Error, Result};
