//! The crate's one error type.

use thiserror::Error;

/// Everything that can go wrong in the link emulator.
#[derive(Debug, Error)]
pub enum Error {
    /// A system call failed.
    #[error("{what}: {source}")]
    Sys {
        /// What we were doing.
        what: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// An interface name does not exist in this namespace.
    #[error("no interface named {0:?}")]
    NoInterface(String),
    /// A configuration value is out of range or malformed.
    #[error("bad configuration: {0}")]
    Config(String),
    /// A control-socket request could not be parsed.
    #[error("bad request: {0}")]
    Json(#[from] serde_json::Error),
    /// A worker thread has gone away.
    #[error("worker thread stopped")]
    WorkerGone,
}

impl Error {
    /// Wraps the current `errno` with a description of what failed.
    pub fn last_os(what: impl Into<String>) -> Error {
        Error::Sys {
            what: what.into(),
            source: std::io::Error::last_os_error(),
        }
    }
}
