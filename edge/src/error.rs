//! The one error type of the edge binary.

use thiserror::Error;

#[derive(Debug, Error)]
pub enum Error {
    #[error("--{flag}: {reason}")]
    Arg { flag: &'static str, reason: String },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("server: {0}")]
    Server(String),
    #[error("session {0:?} not found on the server")]
    NoSession(String),
    #[error(transparent)]
    Edge(#[from] edge::Error),
    #[error("the media loop is gone")]
    MediaGone,
}

impl Error {
    pub fn arg(flag: &'static str, reason: impl Into<String>) -> Self {
        Error::Arg {
            flag,
            reason: reason.into(),
        }
    }

    pub fn io(what: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
