//! The crate's one error type.

/// What can go wrong when building or driving a session.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    /// A wire structure, a session description or a controller name was refused.
    #[error(transparent)]
    Proto(#[from] proto::Error),
    /// The session cannot be sent as configured.
    #[error("invalid session: {0}")]
    Config(String),
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;
