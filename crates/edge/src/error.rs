//! The one error type of the edge core.
//!
//! Errors are for input the edge refuses (a browser's offer, an upstream packet, a request
//! beyond a limit); each variant says which, so the HTTP shell can map it to a status and the
//! counters can name the reason. Broken internal invariants are bugs, not errors.

use thiserror::Error;

/// What went wrong.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum Error {
    /// The SDP offer could not be parsed at all.
    #[error("malformed SDP offer: {0}")]
    MalformedOffer(String),
    /// The offer parses but asks for something the edge does not serve (no VP9, no receiving
    /// video section, a data channel only, ...).
    #[error("unsupported offer: {0}")]
    UnsupportedOffer(String),
    /// No session of that name at this edge.
    #[error("unknown session {0:?}")]
    UnknownSession(String),
    /// The session exists but carries no video the edge can forward (synthetic layers).
    #[error("session {0:?} has no VP9 video track")]
    NoVideo(String),
    /// No viewer with that id.
    #[error("unknown viewer {0}")]
    UnknownViewer(u64),
    /// The edge already serves its configured maximum of viewers.
    #[error("edge full: {current} of {max} viewers")]
    Full { current: usize, max: usize },
    /// An upstream packet that is not RTP or not the payload it should be.
    #[error("upstream packet: {0}")]
    Upstream(String),
    /// The WebRTC stack refused something.
    #[error("webrtc: {0}")]
    Rtc(#[from] str0m::RtcError),
    /// Invalid configuration.
    #[error("config: {0}")]
    Config(String),
}

impl Error {
    /// A short, stable name of the reason, for counters (`layercast_edge_refused_total{reason}`).
    pub fn reason(&self) -> &'static str {
        match self {
            Error::MalformedOffer(_) => "malformed_offer",
            Error::UnsupportedOffer(_) => "unsupported_offer",
            Error::UnknownSession(_) => "unknown_session",
            Error::NoVideo(_) => "no_video",
            Error::UnknownViewer(_) => "unknown_viewer",
            Error::Full { .. } => "full",
            Error::Upstream(_) => "upstream",
            Error::Rtc(_) => "rtc",
            Error::Config(_) => "config",
        }
    }
}

/// The edge's result type.
pub type Result<T> = std::result::Result<T, Error>;
