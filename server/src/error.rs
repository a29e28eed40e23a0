//! The server's one error type.

use std::io;

/// Everything that can go wrong in the server, each naming what it concerns.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration value is missing or invalid; `key` is the config key (file, env, flag).
    #[error("invalid config value for `{key}`: {reason}")]
    Config { key: String, reason: String },
    /// The command line does not parse (clap's message: the flag, what is wrong, the usage).
    #[error("{0}")]
    Cli(#[from] clap::Error),
    /// The config file could not be read or parsed.
    #[error("config file {path}: {reason}")]
    ConfigFile { path: String, reason: String },
    /// A request body or parameter was rejected.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// No such session.
    #[error("no session with id {0:?}")]
    NoSuchSession(String),
    /// A session with this id already exists.
    #[error("a session with id {0:?} already exists")]
    Duplicate(String),
    /// The caller may not do this (a report key bound to another client, keys over plain
    /// HTTP to a remote client).
    #[error("forbidden: {0}")]
    Forbidden(String),
    /// Too many requests from this client or viewer; try later.
    #[error("rate limited: {0}")]
    RateLimited(String),
    /// A bounded table or queue is full; try later.
    #[error("unavailable: {0}")]
    Unavailable(String),
    /// The request conflicts with an operation in progress (a pending key rotation).
    #[error("conflict: {0}")]
    Conflict(String),
    /// Something other than a session is missing (a viewer, a session's video or keys).
    #[error("not found: {0}")]
    NotFound(String),
    /// A socket or file operation failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: io::Error,
    },
    /// An error from the congestion crate (wire encodings).
    #[error(transparent)]
    Congestion(#[from] congestion::Error),
}

impl Error {
    /// Shorthand for a config error naming its key.
    pub fn config(key: &str, reason: impl Into<String>) -> Error {
        Error::Config {
            key: key.to_string(),
            reason: reason.into(),
        }
    }
    /// Wraps an I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

/// Shorthand for results of this crate.
pub type Result<T> = std::result::Result<T, Error>;
