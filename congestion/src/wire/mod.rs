//! Wire structures the protocols exchange, with parse and serialise.
//!
//! - [`cc_ext`]: the per-packet congestion-control fields (RTP header extension element,
//!   RFC 8285) and the 16-bit → 64-bit sequence-number extender.
//! - [`sam`]: the binary Session Announcement Message.
//! - [`auth`]: SAM signatures, media AEAD, report MACs and the TFMCC influence limiter
//!   (`docs/security.md`).
//!
//! Byte layouts with offsets: `docs/protocols/wire.md`. Every parser here returns
//! [`crate::Error`] on malformed input and never panics; each has a cargo-fuzz target in
//! `congestion/fuzz` and a proptest "arbitrary bytes" test.

pub mod auth;
pub mod cc_ext;
#[doc(hidden)]
pub mod fuzz_entry;
pub mod sam;
pub mod tfmcc;
pub mod tfrc;

pub use cc_ext::{CcFields, SeqExtender};
pub use sam::{DecodedSam, SignatureTrailer};
