//! TFMCC: TCP-friendly multicast congestion control (RFC 4654, dissertation ch. 6–7).
//!
//! * [`TfmccSender`]: a sans-IO sender. Feed it receiver reports
//!   ([`TfmccSender::handle_report`]), stamp every data packet with
//!   [`TfmccSender::data_header`], pace at [`TfmccSender::poll_rate`], call
//!   [`TfmccSender::handle_timeout`] at [`TfmccSender::poll_timeout`].
//! * [`TfmccReceiver`]: a [`crate::LayeredController`] with one layer. It joins layer 0 on the
//!   first announcement and emits [`crate::Action::SendFeedback`] with encoded
//!   [`crate::wire::tfmcc::TfmccReport`]s. Hosts that parse the RTP header extension call
//!   [`TfmccReceiver::handle_data`] (or [`TfmccReceiver::handle_packet_with_extension`]).
//! * [`feedback`]: the exponential feedback timer and the class-based cancellation rule.
//! * [`Pacer`]: the packet scheduler of RFC 4654 §3.7 / RFC 5348 §4.6.
//!
//! The signal flow, every parameter and every choice made where the dissertation and
//! RFC 4654 differ are in `docs/protocols/tfmcc.md`.

pub mod feedback;
pub mod pacer;
pub mod receiver;
pub mod sender;

pub use feedback::{cancel_feedback, feedback_delay, SplitMix64};
pub use pacer::Pacer;
pub use receiver::TfmccReceiver;
pub use sender::{RoundSummary, TfmccSender, TfmccSenderStats};

/// Parameters shared by the sender and the receivers (they must agree on `b`, `c`, `N`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TfmccConfig {
    /// Packet size `s`, bytes (receivers take it from the announcement when they have one).
    pub packet_size: u32,
    /// Feedback delay factor `b`: `T = b max(R_max, (c+1) s / X)`. Dissertation 4 (3..6);
    /// RFC 4654 uses 6 for unicast feedback, 4 for ASM.
    pub b: f64,
    /// Tolerated consecutive lost data packets `c` in the low-rate stretch of `T` (2..4).
    pub c: f64,
    /// Upper bound on the number of receivers `N` (10,000).
    pub n_upper: f64,
    /// Cancellation tolerance `q` (RFC 4654 `g`), 0.1.
    pub q: f64,
    /// Receiver RTT EWMA weight on a new sample when CLR (dissertation 0.05; RFC 4654 0.1).
    pub beta_clr: f64,
    /// ... when not CLR (0.5 in both).
    pub beta_non_clr: f64,
    /// EWMA weight of one-way-delay RTT adjustments between echoes (dissertation: "smaller",
    /// unspecified; RFC 4654: 1, i.e. use R' directly). 0.05.
    pub beta_one_way: f64,
    /// Initial RTT and initial `R_max`, seconds (0.5).
    pub initial_rtt: f64,
    /// `R_max` decay per round without a higher-RTT report (0.9).
    pub rmax_decay: f64,
    /// CLR timeout in units of the feedback delay `T` (10).
    pub clr_timeout_t: f64,
    /// RFC 4654 §3.3: halve the rate after this many `R_max` without a CLR report, unless
    /// the CLR was chosen less than 10 `R_max` ago. 0 disables. (4)
    pub clr_silence_halving_rtts: f64,
    /// Halve the rate for every this many `R_max` without any feedback (10).
    pub no_feedback_rtts: f64,
    /// The rate never goes below one packet per this many seconds (dissertation 64 s,
    /// RFC 4654 8 s).
    pub min_rate_interval_s: f64,
    /// Receive-rate window in RTTs (RFC 4654 `k`, 2..4). 3.
    pub recv_rate_rtts: f64,
    /// Sender's clock granularity for the `R_max` floor `s/X + ts_gran` (10 ms).
    pub ts_gran_s: f64,
    /// Optional additive timer bias `gamma` (eq. 7.2). None = unbiased (recommended).
    pub bias_gamma: Option<f64>,
    /// Arm a feedback timer only if `R_calc < X_send`, or the receiver's RTT exceeds
    /// `R_max`, or it has no RTT yet (spec §2.5.4 [I]). Off: every non-CLR receiver arms.
    pub arm_only_when_useful: bool,
    /// Seed for the receivers' timer randomness (mixed with the receiver ID).
    pub seed: u64,
}

impl Default for TfmccConfig {
    fn default() -> Self {
        TfmccConfig {
            packet_size: 1000,
            b: 4.0,
            c: 3.0,
            n_upper: 10_000.0,
            q: 0.1,
            beta_clr: 0.05,
            beta_non_clr: 0.5,
            beta_one_way: 0.05,
            initial_rtt: 0.5,
            rmax_decay: 0.9,
            clr_timeout_t: 10.0,
            clr_silence_halving_rtts: 4.0,
            no_feedback_rtts: 10.0,
            min_rate_interval_s: 64.0,
            recv_rate_rtts: 3.0,
            ts_gran_s: 0.010,
            bias_gamma: None,
            arm_only_when_useful: false,
            seed: 0x7f4a_7c15_9e37_79b9,
        }
    }
}

impl TfmccConfig {
    /// Feedback round duration `T = b max(R_max, (c+1) s / X)`, seconds.
    pub fn feedback_round(&self, r_max: f64, x_send: f64, s: f64) -> f64 {
        let low_rate = if x_send > 0.0 {
            (self.c + 1.0) * s / x_send
        } else {
            0.0
        };
        self.b * r_max.max(low_rate)
    }
}

/// Modular difference `a - b` of two 32-bit microsecond timestamps, in seconds, if it is
/// non-negative and below 2^31 us (about 35 minutes); `None` for "from the future".
pub fn ts_diff_s(a: u32, b: u32) -> Option<f64> {
    let d = a.wrapping_sub(b);
    (d < 1 << 31).then_some(d as f64 / 1e6)
}
