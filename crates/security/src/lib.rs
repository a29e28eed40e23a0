//! Who may announce a session, send its media and steer its sender: Ed25519 announcement
//! signatures, ChaCha20-Poly1305 media sealing, HMAC receiver-report MACs and the TFMCC
//! influence limiter ([`auth`], threat model in `docs/security.md`).
//!
//! Sans-IO like the rest of the product core, with two exceptions kept at the edge: key
//! generation draws from the operating system's RNG and [`auth::SamSigner::from_file`]-style
//! loaders read key files.

pub mod auth;
#[doc(hidden)]
pub mod fuzz_entry;
pub mod request_mac;

pub use auth::*;
pub use proto::{Error, Result};
