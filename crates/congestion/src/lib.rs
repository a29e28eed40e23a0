//! Sans-IO congestion control for the product's layered and single-rate multicast sessions:
//! the receiver-driven controllers LCC (the default), ERA and PLM, TFMCC (sender and receiver)
//! with the TFRC building blocks it needs, the estimators they share, and the sender's bunch
//! schedule.
//!
//! Nothing in this crate reads a clock, spawns a thread or touches a socket: inputs carry the
//! current [`Time`], outputs are polled. The simulator (`layercast-sim`) drives the controllers
//! in virtual time, the player drives them with kernel receive timestamps. The papers'
//! baselines (RLM, RLC, FLID-DL, WEBRC, the delay-based scheme, PCC, unicast TFRC) live in
//! `research/baselines` and plug in through the same [`LayeredController`] trait.

pub mod controller;
pub mod estimators;
pub mod factory;

pub mod era;
pub mod lcc;
pub mod plm;
pub mod schedule;
pub mod tfmcc;
pub mod tfrc;

pub use controller::{Action, Decision, LayeredController, PacketArrival, Stats, TimerReason};
pub use factory::{live_controller_by_name, product_controller_by_name, LIVE_CONTROLLERS};
pub use proto::{error, session, time, wire};
pub use proto::{Error, LayerInfo, Result, SessionInfo, Time};
