//! The TFRC building blocks TFMCC reuses (RFC 5348, dissertation ch. 3): the TCP throughput
//! equation and the loss history. Unicast TFRC itself (sender and receiver) is a research
//! baseline in `research/baselines`.

pub mod equation;
pub mod loss_history;

pub use equation::{loss_rate_for_throughput, simplified_loss_interval, tcp_throughput};
pub use loss_history::{AliConfig, LossHistory, LossIntervals};

/// `t_mbi`: the maximum backoff interval, 64 s (RFC 3448/5348). The rate floor is `s / t_mbi`.
pub const T_MBI_S: f64 = 64.0;
