//! The audio track of a session (docs/protocols/audio.md), sans-IO on both sides: PCM with
//! capture times in, 20-ms frames with RTP times out for the host's encoder ([`timeline`]);
//! encoded frames in, RTP packets (RFC 7587) and their lagged one-packet repairs out
//! ([`send`]); datagrams and time in, frames to play out on the receive side ([`receive`],
//! with the jitter buffer and playout clock in [`playout`]). The codec (libopus) is the host's:
//! the publisher's host hands over encoded frames, the subscriber's host decodes what the
//! playout names (the frame's own packet, the next packet's in-band FEC, concealment or
//! silence).
//!
//! The track rides in transport layer 0 on a group of its own: a receiver of layer 0 joins its
//! RTP port and, when the announcement gives the stream repair parameters, the repair stream's
//! port (RTP port + [`REPAIR_PORT_OFFSET`]).

pub mod playout;
pub mod receive;
pub mod send;
pub mod stretch;
pub mod timeline;

pub use playout::{FrameSource, PlayFrame, Refusal};
pub use receive::{AudioOutput, AudioReceive, AudioStats};
pub use send::{AudioFrame, AudioSend, AudioSendStats, Datagram, DatagramKind};
pub use timeline::{MediaClock, PcmFrame, Timeline, TimelineStats};

use proto::{Codec, SessionInfo, TrackKind};
use std::net::Ipv4Addr;

/// The repair stream's port is the audio stream's RTP port plus this (RTCP takes + 1).
pub const REPAIR_PORT_OFFSET: u16 = 2;

/// What the announcement says of the audio track: its one stream and codec parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AudioLayout {
    pub layer: u8,
    pub group: Ipv4Addr,
    pub port: u16,
    pub ssrc: u32,
    pub payload_type: u8,
    pub channels: u8,
    /// The repair stream's payload type and announced parameters (`proto::fec`).
    pub repair: Option<(u8, Vec<u8>)>,
}

impl AudioLayout {
    /// The audio track of `info`, if it has an Opus one with a stream.
    pub fn of(info: &SessionInfo) -> Option<AudioLayout> {
        let t = info.track(TrackKind::Audio)?;
        let Codec::Opus(p) = &t.codec else {
            return None;
        };
        let s = t.streams.first()?;
        Some(AudioLayout {
            layer: s.layer,
            group: s.group,
            port: s.port,
            ssrc: s.ssrc,
            payload_type: p.payload_type,
            channels: p.channels,
            repair: s
                .repair
                .as_ref()
                .map(|r| (r.payload_type, r.params.clone())),
        })
    }

    /// The repair stream's port, when the stream has repair.
    pub fn repair_port(&self) -> Option<u16> {
        self.repair
            .as_ref()
            .map(|_| self.port.wrapping_add(REPAIR_PORT_OFFSET))
    }
}
