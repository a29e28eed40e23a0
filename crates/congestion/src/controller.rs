//! The one interface every receiver-driven controller implements, in the manner of
//! `quinn-proto`: inputs carry `now`, outputs are polled. No sockets, threads or clocks.
//!
//! A host (the simulator's receiver agent, the player) does this loop:
//!
//! ```text
//! on SAM:        ctl.handle_announcement(now, &info)
//! on packet:     ctl.handle_packet_extended(now, &arrival, ext_block)   (or handle_packet)
//! at deadline:   ctl.handle_timeout(now)            (deadline from ctl.poll_timeout())
//! after each:    while let Some(a) = ctl.poll_action() { join / leave / exit / send }
//!                while let Some(d) = ctl.poll_decision() { log it }
//! ```

use crate::session::SessionInfo;
use crate::time::Time;
use crate::Result;
use serde::{Deserialize, Serialize};

/// Everything a controller may learn from one received data packet (protocol-specific header
/// extensions come beside it, [`LayeredController::handle_packet_extended`]).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct PacketArrival {
    /// Cumulative layer index the packet belongs to (0 = base).
    pub layer: u8,
    /// Per-layer sequence number, already extended to 64 bits by the host (RTP's 16-bit
    /// sequence numbers wrap every few seconds at high rates).
    pub seq: u64,
    /// Position of this packet in its bunch, 0 = first (ERA's FPF flag is `bunch_pos == 0`).
    pub bunch_pos: u8,
    /// Number of packets in the bunch this packet belongs to.
    pub bunch_len: u8,
    /// Size in bytes (UDP payload) used for bandwidth samples.
    pub size: u32,
    /// Sender's timestamp, microseconds on the sender's clock (one-way-delay trend, RTT option).
    pub send_time_us: u64,
    /// Receive time (kernel timestamp on real sockets, virtual time in the simulator).
    pub recv_time: Time,
}

/// What the controller asks the host to do.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum Action {
    /// Join layer `k` (the host issues an IGMP join for its group).
    Join(u8),
    /// Leave layer `k`.
    Leave(u8),
    /// Leave every layer and end the session (only where a protocol and its configuration say so).
    Exit,
    /// Send these bytes to the sender's feedback port (TFMCC receiver reports).
    SendFeedback(Vec<u8>),
}

/// Why the controller wants to be woken up.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TimerReason {
    /// Periodic adaptation (ERA's RAI, RLM's join timer, ...).
    Adapt,
    /// No packet for too long.
    Silence,
    /// A deaf, blind or hold-off period ends.
    HoldOff,
    /// Re-join the base layer after having left everything.
    Rejoin,
    /// A feedback timer fires (TFMCC).
    Feedback,
    /// A protocol-specific timer.
    Other,
}

/// One decision, with what it was based on: the decision log the dashboard and the
/// acceptance checks read (e.g. `era.md` AC-15).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Decision {
    /// When it was taken.
    pub at: Time,
    /// Subscription level before (number of layers held).
    pub from_layers: u8,
    /// Subscription level after.
    pub to_layers: u8,
    /// Short machine-readable reason, e.g. `rai`, `pp-drop`, `loss-drop`, `silence`.
    pub reason: &'static str,
    /// The inputs that led to it, by name (e.g. `r_pp`, `plr`, `r_tcp`, `r_target`).
    pub inputs: Vec<(&'static str, f64)>,
}

/// A point-in-time summary that feeds Prometheus, the dashboard and the player overlay alike.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// Controller name (`era`, `plm`, ...).
    pub protocol: &'static str,
    /// Layers currently held (0 = none).
    pub layers: u8,
    /// Cumulative nominal rate of the layers held, bit/s.
    pub subscribed_bps: f64,
    /// The controller's current estimate of what the path carries, bit/s (if it has one).
    pub estimate_bps: Option<f64>,
    /// Loss ratio as the controller measures it (0..1).
    pub loss_ratio: f64,
    /// Round-trip time in use, seconds (if the protocol uses one).
    pub rtt_s: Option<f64>,
    /// Packets received and detected lost since start.
    pub packets_received: u64,
    pub packets_lost: u64,
    /// Joins and leaves issued since start.
    pub joins: u64,
    pub leaves: u64,
}

/// A receiver-side congestion controller for a cumulative layered session.
pub trait LayeredController: Send {
    /// Name used by the factory and in logs.
    fn name(&self) -> &'static str;

    /// A (new or repeated) session announcement arrived. Controllers join nothing before the
    /// first one.
    fn handle_announcement(&mut self, now: Time, info: &SessionInfo);

    /// A data packet arrived.
    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival);

    /// A data packet arrived with its RTP header-extension block (the 4-byte block header and
    /// the elements, as on the wire; empty when the packet has none). Protocols whose sender
    /// puts more than the cc fields into each packet (TFMCC: round, timestamps, echo) read
    /// theirs here; the others ignore the block, and so does this default. An error says the
    /// protocol's own element was malformed: the packet still counted (the host counts it).
    fn handle_packet_extended(
        &mut self,
        now: Time,
        pkt: &PacketArrival,
        block: &[u8],
    ) -> Result<()> {
        let _ = block;
        self.handle_packet(now, pkt);
        Ok(())
    }

    /// The host leaves the session for good (the player exits). Protocols with receiver
    /// feedback say goodbye (TFMCC's leave report, RFC 4654 §3.3) through
    /// [`poll_action`](Self::poll_action); the default does nothing.
    fn handle_close(&mut self, now: Time) {
        let _ = now;
    }

    /// The deadline returned by [`poll_timeout`](Self::poll_timeout) has passed. Spurious
    /// calls (early or repeated) must be harmless.
    fn handle_timeout(&mut self, now: Time);

    /// Next action for the host, if any.
    fn poll_action(&mut self) -> Option<Action>;

    /// Earliest time the controller needs [`handle_timeout`](Self::handle_timeout), and why.
    fn poll_timeout(&self) -> Option<(Time, TimerReason)>;

    /// Next decision-log entry, if any.
    fn poll_decision(&mut self) -> Option<Decision>;

    /// Current statistics.
    fn stats(&self) -> Stats;

    /// Number of layers currently held (0 = none).
    fn layers(&self) -> u8;
}
