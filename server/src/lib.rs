//! layercast-server as a library: everything but the process shell in `main.rs` (signals,
//! heap trimming, the runtime), so that the fuzz targets (`server/fuzz`) and the corpus replay
//! (`tests/fuzz_corpus.rs`) reach the same parsers the server runs.

pub mod api;
pub mod auth;
pub mod config;
pub mod error;
mod fill_study;
pub mod fuzz_entry;
pub mod keyreq;
pub mod latency;
pub mod media;
pub mod media_keys;
pub mod pacer;
pub mod provision;
pub mod render;
pub mod reports;
pub mod sock;
pub mod state;
pub mod tfmcc;
#[cfg(feature = "research")]
pub mod tfrc;
pub mod tls;
pub mod token;
pub mod video;
pub mod viewers;

/// Set by SIGINT/SIGTERM (`main.rs`); long-running subcommands poll it.
pub static SIGNALLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
