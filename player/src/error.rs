//! The player's one error type.

/// Everything that can go wrong in the player.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A command-line value is missing or invalid.
    #[error("invalid value for `--{key}`: {reason}")]
    Arg { key: String, reason: String },
    /// The command line does not parse (unknown flag, missing or bad value): clap's error,
    /// which names the flag and carries the usage line (`cli::parse_args`).
    #[error("{0}")]
    Cli(clap::Error),
    /// A socket, file or HTTP operation failed.
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    /// The server answered with something unusable.
    #[error("{0}")]
    Protocol(String),
    /// From the congestion crate (unknown controller, bad SAM).
    #[error(transparent)]
    Congestion(#[from] congestion::Error),
}

impl Error {
    pub fn arg(key: &str, reason: impl Into<String>) -> Error {
        Error::Arg {
            key: key.to_string(),
            reason: reason.into(),
        }
    }
    pub fn io(what: impl Into<String>, source: std::io::Error) -> Error {
        Error::Io {
            what: what.into(),
            source,
        }
    }
}

pub type Result<T> = std::result::Result<T, Error>;
