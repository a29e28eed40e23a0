//! Unicast TFRC (RFC 5348, dissertation ch. 3), the baseline the TFMCC checks compare with.
//! Sans-IO: [`sender::TfrcSender`] and [`receiver::TfrcReceiver`] take `now` with every input and
//! are polled for what to send and when to be woken. The equation and the loss history they use
//! are the product's (`congestion::tfrc`), shared with TFMCC; wire encodings are in
//! `proto::wire::tfrc`.

pub mod receiver;
pub mod sender;

pub use receiver::{TfrcReceiver, TfrcReceiverConfig};
pub use sender::{TfrcSender, TfrcSenderConfig};
