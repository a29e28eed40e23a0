//! The crate's one error type.

/// Everything that can go wrong in `codec`: malformed network input, bad configuration and
/// libvpx failures. Network parsers return these instead of panicking.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum Error {
    /// The buffer ended before the structure it should hold.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// A value does not fit its wire field.
    #[error("value out of range for {field}: {value}")]
    OutOfRange { field: &'static str, value: u64 },
    /// The VP9 payload descriptor is malformed.
    #[error("malformed VP9 payload descriptor: {0}")]
    BadDescriptor(&'static str),
    /// The VP9 bitstream (superframe index) is malformed.
    #[error("malformed VP9 bitstream: {0}")]
    BadBitstream(&'static str),
    /// Invalid encoder/decoder configuration given by the user.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// libvpx returned an error.
    #[error("libvpx {call} failed: {msg}")]
    Vpx { call: &'static str, msg: String },
    /// GStreamer failure (pipeline parse, state change, caps).
    #[error("gstreamer: {0}")]
    Gst(String),
    /// A malformed or unwritable RTP packet (`proto::rtp`).
    #[error("RTP: {0}")]
    Rtp(String),
    /// Socket or file I/O.
    #[error("i/o: {0}")]
    Io(String),
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e.to_string())
    }
}

impl From<proto::Error> for Error {
    fn from(e: proto::Error) -> Self {
        match e {
            proto::Error::Truncated { what, need, have } => Error::Truncated { what, need, have },
            other => Error::Rtp(other.to_string()),
        }
    }
}

/// Shorthand result type.
pub type Result<T> = std::result::Result<T, Error>;

pub(crate) fn need(what: &'static str, need: usize, have: usize) -> Result<()> {
    if have < need {
        Err(Error::Truncated { what, need, have })
    } else {
        Ok(())
    }
}
