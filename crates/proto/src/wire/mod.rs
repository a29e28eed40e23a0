//! Wire structures the protocols exchange, with parse and serialise.
//!
//! - [`cc_ext`]: the per-packet congestion-control fields (RTP header extension element,
//!   RFC 8285) and the 16-bit → 64-bit sequence-number extender.
//! - [`frames_ext`]: which spatial layers a picture was sent with (RTP header extension
//!   element on every media packet).
//! - [`sam`]: the binary Session Announcement Message.
//! - [`tfmcc`], [`tfrc`]: the single-rate protocols' data-packet fields and reports.
//! - [`request`]: a receiver's key-picture and re-sync requests to the sender.
//!
//! Byte layouts with offsets: `docs/protocols/wire.md`. Every parser here returns
//! [`crate::Error`] on malformed input and never panics; each has a cargo-fuzz target in
//! `crates/security/fuzz` (with the authenticated formats) and a proptest "arbitrary bytes"
//! test.

pub mod cc_ext;
pub mod frames_ext;
pub mod request;
pub mod sam;
pub mod tfmcc;
pub mod tfrc;

pub use cc_ext::{CcFields, SeqExtender};
pub use sam::{DecodedSam, SignatureTrailer};
