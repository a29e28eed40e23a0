//! The product's sessions, sans-IO in the manner of str0m and quinn-proto: time and datagrams
//! in, `poll_*` out; no sockets, threads or clocks. The player, the server's media thread and
//! any later receiver (the WebRTC edge) are shells around them.
//!
//! - [`subscriber::Subscriber`]: the receive side of one viewer. Announcements, keys and
//!   datagrams in; joins and leaves, feedback datagrams (receiver reports, key-picture and
//!   re-sync requests), media packets per track and stream, events (decisions, session
//!   changes, the per-second snapshot) and the next timeout out.
//! - [`publisher::Publisher`]: the send side of one session. Encoded media per track and
//!   stream, feedback datagrams and time in; paced bunches (the congestion crate's bunch
//!   schedule, or TFMCC's rate), encoder control and the next timeout out.
//! - [`audio`]: the audio track of both (RTP packets and their lagged repairs out of encoded
//!   frames; repair, jitter buffer and playout of received ones), the codec being the host's.
//! - `harness` (feature `harness`): a Publisher, [`netmodel::Link`]s and N Subscribers in
//!   virtual time, in-process and deterministic.
//!
//! Signal flow and the choices made: `docs/ARCHITECTURE.md` ("Sessions").

pub mod audio;
pub mod error;
#[cfg(feature = "harness")]
pub mod harness;
pub mod publisher;
pub mod subscriber;

pub use error::{Error, Result};
pub use publisher::Publisher;
pub use subscriber::{Subscriber, SubscriberConfig};
