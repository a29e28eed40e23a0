//! The crate's one error type.

/// Errors from parsing wire structures and building controllers.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    /// The buffer ended before the structure did.
    #[error("truncated {what}: need {need} bytes, have {have}")]
    Truncated {
        what: &'static str,
        need: usize,
        have: usize,
    },
    /// A magic number or version did not match.
    #[error("bad {what}: {detail}")]
    Malformed { what: &'static str, detail: String },
    /// A field is outside its allowed range.
    #[error("invalid {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
    /// The factory does not know this controller name.
    #[error("unknown controller {0:?}; known: {1}")]
    UnknownController(String, String),
    /// A message that must be authenticated carries no signature or MAC (`wire::auth`).
    #[error("unauthenticated {what}: no signature or MAC")]
    Unauthenticated { what: &'static str },
    /// A signature, MAC or AEAD tag did not verify, or names a key we do not hold.
    #[error("authentication of {what} failed: {reason}")]
    AuthFailed {
        what: &'static str,
        reason: &'static str,
    },
    /// An authentic message that was already seen, or is older than the newest one seen.
    #[error("replayed {what}: {detail}")]
    Replayed { what: &'static str, detail: String },
    /// An authentic message outside its freshness window.
    #[error("stale {what}: {detail}")]
    Stale { what: &'static str, detail: String },
    /// Dropped by a rate limit (per source address or table capacity).
    #[error("rate limited {what}: {detail}")]
    RateLimited { what: &'static str, detail: String },
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;
