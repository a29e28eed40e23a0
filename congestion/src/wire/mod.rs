//! Wire structures the protocols exchange, with parse and serialise.
//!
//! - [`cc_ext`]: the per-packet congestion-control fields (RTP header extension element,
//!   RFC 8285) and the 16-bit → 64-bit sequence-number extender.
//! - [`sam`]: the binary Session Announcement Message.
//!
//! Byte layouts with offsets: `docs/protocols/wire.md`. Every parser here returns
//! [`crate::Error`] on malformed input and never panics; each has a cargo-fuzz target in
//! `congestion/fuzz` and a proptest "arbitrary bytes" test.

pub mod cc_ext;
pub mod sam;
pub mod tfmcc;
pub mod tfrc;

pub use cc_ext::{CcFields, SeqExtender};
pub use sam::{DecodedSam, SignatureTrailer};
