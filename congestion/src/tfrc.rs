//! TFRC (RFC 5348, dissertation ch. 3): equation-based unicast congestion control, and the
//! building blocks TFMCC and PCC reuse (the throughput equation and the loss history).
//!
//! Sans-IO: the [`sender::TfrcSender`] and [`receiver::TfrcReceiver`] take `now` with every
//! input and are polled for what to send and when to be woken. Wire encodings are in
//! [`crate::wire::tfrc`].

pub mod equation;
pub mod loss_history;
pub mod receiver;
pub mod sender;

pub use equation::{loss_rate_for_throughput, simplified_loss_interval, tcp_throughput};
pub use loss_history::{AliConfig, LossHistory, LossIntervals};
pub use receiver::{TfrcReceiver, TfrcReceiverConfig};
pub use sender::{TfrcSender, TfrcSenderConfig};

/// `t_mbi`: the maximum backoff interval, 64 s (RFC 3448/5348). The rate floor is `s / t_mbi`.
pub const T_MBI_S: f64 = 64.0;
