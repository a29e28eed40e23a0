//! Estimators shared by the controllers: the TCP throughput equation, loss estimators, RTT,
//! packet-pair and packet-bunch bandwidth samples, one-way-delay trend detection.
//!
//! All are plain state machines fed with numbers and times; none reads a clock.
//!
//! - [`tcp`]: PFTK/Padhye equation in one general form ([`tcp::throughput`] with a
//!   [`tcp::TcpModel`]); the RFC 5348 (TFRC/TFMCC) form [`tcp::rfc5348`] and ERA's Eq. 5-6
//!   [`tcp::era_eq_5_6`] are presets; [`tcp::invert_for_p`] for loss-history seeding.
//! - [`loss`]: per-layer sequence tracking with a reorder window, windowed loss ratio.
//! - [`ali`]: RFC 5348 average loss interval with history discounting (general, for TFRC and
//!   TFMCC).
//! - [`rtt`]: EWMA smoother and the join-to-first-packet probe.
//! - [`bunch`]: packet-pair/bunch bandwidth sampler.
//! - [`owd`]: one-way-delay trend test (PCT/PDT).

pub mod ali;
pub mod bunch;
pub mod loss;
pub mod owd;
pub mod rtt;
pub mod tcp;

pub use ali::AverageLossInterval;
pub use bunch::{BunchSample, BunchSampler};
pub use loss::{loss_ratio, SeqEvent, SeqTracker, WindowedLoss};
pub use owd::{Trend, TrendDetector};
pub use rtt::{JoinLatencyProbe, RttEstimator};
pub use tcp::{era_eq_5_6, TcpModel};
