//! The WebRTC edge's core: one layered multicast session in, one continuous VP9 SVC stream per
//! browser out, over WebRTC ([`str0m`]: ICE-lite, DTLS-SRTP, RTCP, transport-wide congestion
//! control). Sans-IO in the manner of str0m and quinn-proto: upstream packets, datagrams from
//! browsers and time go in; datagrams to browsers, upstream key requests, events and the next
//! deadline come out. No sockets, threads or clocks: `layercast-edge` is the shell.
//!
//! See docs/edge.md for the architecture, the layer selection and the repair.

pub mod edge;
pub mod error;
pub mod forward;
pub mod gate;
pub mod keycache;
pub mod layout;
pub mod nack_burst;
pub mod relay;
pub mod repair;
pub mod resend;
pub mod select;
pub mod source;
#[cfg(test)]
mod testutil;
pub mod viewer;
pub mod vp9;
pub mod whep;

pub use edge::{Edge, EdgeConfig, EdgeEvent, ViewerReport};
pub use error::{Error, Result};
pub use relay::UpstreamPacket;
