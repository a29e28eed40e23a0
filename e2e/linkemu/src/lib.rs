//! `layercast-linkemu`: a transparent userspace wire between two network interfaces (normally
//! veth ends inside a namespace of their own) that emulates one link per direction: serialisation
//! at a configured rate behind a queue discipline from the shared `qdisc` crate, then a fixed
//! propagation delay with optional jitter, and random or bursty (Gilbert-Elliott) loss.
//!
//! The kernels we run on have no `netem`, so everything a scenario needs beyond a plain rate
//! limiter (delay, jitter, loss, RED/REM, per-flow fair queuing) comes from here.
//!
//! Layout (sans-IO core, thin I/O shell):
//! - [`link::Direction`]: the per-direction emulator in virtual time around the shared
//!   `netmodel::Link` (the session harness and the simulator's queues are the same code).
//! - [`config`]: parameters and the JSON run-time update format of the control socket.
//! - [`flow`]: frame parsing (flow id for fair queuing, multicast group and IGMP bookkeeping).
//! - [`sock`], [`ctl`], [`run`]: AF_PACKET sockets, the Unix control socket and the threads.
//! - [`mroute`]: a minimal IGMP multicast router with immediate leave (`mrouter` subcommand).

pub mod config;
pub mod ctl;
pub mod error;
pub mod flow;
pub mod hist;
pub mod link;
pub mod mroute;
pub mod run;
pub mod sock;

pub use error::Error;
