//! Configuration: a file (TOML), environment variables (`LAYERCAST_*`) and command-line flags,
//! in increasing precedence. Every server-level key can be given in all three places under the
//! same name (`http_addr` in the file, `LAYERCAST_HTTP_ADDR` in the environment,
//! `--http-addr` on the command line). Sessions come from `[[session]]` tables in the file,
//! from `--session JSON` flags (repeatable) and from `POST /api/sessions`; they share one
//! schema, [`SessionConfig`].

mod audio;
mod layer_rate;
mod load;
mod protocol;
mod server;
mod session;
mod source;
mod video;

pub use audio::AudioConfig;
pub use layer_rate::{temporal_fps, video_layer_rate, VIDEO_PACKET_OVERHEAD};
pub use load::{load, load_file_text, state_dir, Cli};
pub use protocol::check_protocol;
pub use server::{ServerConfig, DEFAULT_ANNOUNCE, KEYS};
pub use session::{ResolvedSession, SessionConfig, MAX_PACKET, MIN_PACKET};
pub use source::check_source;
pub use video::{
    ResolvedVideo, VideoConfig, DEFAULT_KEY_HEADROOM, DEFAULT_PACER_CREDIT_MS, DEFAULT_PACER_PEAK,
    DEFAULT_RATE_HEADROOM, DEFAULT_VIDEO_PACKET,
};
