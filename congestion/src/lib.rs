//! Sans-IO congestion control for layered and single-rate multicast.
//!
//! Nothing in this crate reads a clock, spawns a thread or touches a socket: inputs carry the
//! current [`Time`], outputs are polled. The simulator (`layercast-sim`) drives the controllers
//! in virtual time, the player drives them with kernel receive timestamps.

mod baseline;
pub mod controller;
pub mod error;
pub mod estimators;
pub mod factory;
pub mod session;
pub mod time;
pub mod wire;

pub mod delay;
pub mod era;
pub mod flid;
pub mod lcc;
pub mod pcc;
pub mod plm;
pub mod rlc;
pub mod rlm;
pub mod schedule;
pub mod tfmcc;
pub mod tfrc;
pub mod webrc;

pub use controller::{Action, Decision, LayeredController, PacketArrival, Stats, TimerReason};
pub use error::{Error, Result};
pub use factory::{controller_by_name, live_controller_by_name, CONTROLLERS};
pub use session::{LayerInfo, SessionInfo};
pub use time::Time;
