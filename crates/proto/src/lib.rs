//! The vocabulary every Layercast sender and receiver shares: [`Time`], the session description
//! ([`SessionInfo`]: transport layers and the media tracks riding on them) and the wire formats
//! (`wire`: the per-packet congestion-control header extension, the Session Announcement
//! Message, TFMCC and TFRC fields, media requests) and [`fec`], the XOR-parity repair packets
//! (RFC 8627 header) each video layer carries in its spare slots, and [`opus`], the Opus RTP
//! payload format (RFC 7587).
//!
//! No I/O, no clocks, no randomness: every parser returns [`Error`] on malformed input and
//! never panics.

pub mod error;
pub mod fec;
pub mod media;
pub mod opus;
pub mod rtcp;
pub mod rtp;
pub mod session;
pub mod time;
pub mod wire;

pub use error::{Error, Result};
pub use media::{Codec, OpusParams, Repair, Stream, Track, TrackKind, Vp9Params};
pub use session::{LayerInfo, SessionInfo};
pub use time::Time;
