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
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;
