//! What a [`super::Subscriber`] hands its host: [`Output`] from `poll_output`, and the
//! per-second [`Snapshot`].

use congestion::{Decision, TimerReason};
use proto::{SessionInfo, Time};
use serde::Serialize;
use std::net::{Ipv4Addr, SocketAddrV4};

use super::limbo::LimboStats;
use super::repair::FecStats;
use super::tfmcc::TfmccView;
use crate::audio::{AudioOutput, AudioStats};

/// One (group, port) a receiver joins: a transport layer's own, or a stream riding in it on a
/// group of its own (`SessionInfo::endpoints_of_layer`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Endpoint {
    /// The transport layer it belongs to.
    pub layer: u8,
    pub group: Ipv4Addr,
    pub port: u16,
    /// Join source-specifically (IGMPv3 INCLUDE {source}) when set.
    pub source: Option<Ipv4Addr>,
}

/// The next thing the host must do.
#[derive(Debug)]
pub enum Output {
    /// Join a group (open a socket bound to `group:port` with a membership).
    Join(Endpoint),
    /// Leave a group (close its socket: anything still queued on it is gone).
    Leave(Endpoint),
    /// Send a datagram to the sender.
    Transmit(Transmit),
    /// A media packet for the decoder (or the edge).
    Media(Media),
    /// The audio track: a frame to play now, or a packet it refused.
    Audio(AudioOutput),
    /// Something happened.
    Event(Event),
    /// Nothing more to do until this time (call `handle_timeout` then), and why.
    Timeout(Time, TimeoutReason),
}

/// A datagram for the sender's feedback port.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transmit {
    pub to: SocketAddrV4,
    pub payload: Vec<u8>,
    pub kind: TransmitKind,
}

/// What a [`Transmit`] carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransmitKind {
    /// A controller's receiver report (TFMCC).
    Report,
    /// A key-picture request (`proto::wire::request`).
    KeyRequest,
    /// A re-sync request for a spatial layer.
    Resync(u8),
    /// A request to send lost packets again.
    Retransmit,
}

/// One received media packet, in receive order within its stream, after the receive-side
/// checks (authentication, replay window, staleness, join quarantine, restart hold).
///
/// FEC: a stream with repair parameters is repaired here ([`super::repair`]): its repair
/// packets are never delivered, and the media packets they rebuild are, with `recovered` set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Media {
    /// The track and the index of the stream in it (`SessionInfo::tracks`), when the
    /// announcement names the packet's SSRC.
    pub track: Option<u8>,
    pub stream: Option<u8>,
    /// The transport layer it rode in.
    pub layer: u8,
    pub ssrc: u32,
    /// Kernel receive time (of the packet that completed the repair, for a recovered one).
    pub recv_time: Time,
    /// Rebuilt by FEC: the RTP packet as the packetizer built it (no header extensions).
    pub recovered: bool,
    /// The RTP packet (decrypted in encrypted sessions).
    pub packet: Vec<u8>,
}

/// Something the host may want to know.
#[derive(Debug)]
pub enum Event {
    /// A new session description took effect: a new sender instance (`new_instance`: its
    /// session id changed; its media keys changed with it) or a new layout. Media that follows
    /// belongs to it: a host with a decoder builds a new one.
    SessionChanged {
        info: Box<SessionInfo>,
        new_instance: bool,
    },
    /// A controller decision, with its inputs.
    Decision(Decision),
    /// The once-a-second summary.
    Stats(Box<Snapshot>),
    /// Fetch the session description (keys) again: announcements stopped verifying, packets
    /// stopped opening, or a new sender instance began.
    RefreshSecurity,
    /// The controller left the session for good.
    Exit,
}

/// Why the Subscriber wants to be called back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TimeoutReason {
    /// The controller's own timer.
    Controller(TimerReason),
    /// A newly joined layer's held packets are due to be checked and fed.
    Quarantine,
    /// The restart hold expires.
    Limbo,
    /// A key-picture request is due again.
    KeyRequest,
    /// A lost packet is due to be asked for (again).
    Retransmit,
    /// The per-second summary.
    Stats,
    /// The audio track's next frame is due.
    AudioPlayout,
}

/// Inputs dropped, by reason (the player exports them as
/// `layercast_player_dropped_total{reason}`).
#[derive(Default, Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Drops {
    pub malformed_rtp: u64,
    pub missing_cc: u64,
    pub bad_cc: u64,
    /// A packet on a group the receiver does not hold, or whose cc fields name another layer.
    pub wrong_layer: u64,
    pub truncated: u64,
    pub malformed_sam: u64,
    pub malformed_announcement: u64,
    pub stale: u64,
    /// Data packets that failed authentication (encrypted sessions): wrong key, forged,
    /// altered, or not sealed at all.
    pub media_auth_failed: u64,
    /// RTCP sender reports refused in an encrypted session: in the clear, forged, altered,
    /// under a key not held, or replayed ([`crate::Subscriber::handle_sender_report`]).
    pub report_auth_failed: u64,
    /// SAMs from the group ignored because the session description had not arrived yet.
    pub sam_before_description: u64,
    /// Packets of the previous session (its SSRCs) that arrived after a new session was
    /// accepted.
    pub old_session: u64,
    /// A sequence number seen before on its stream (a duplicating network or a replay).
    pub duplicate: u64,
    /// A sequence number more than the replay window behind the stream's newest.
    pub too_old: u64,
}

/// The SAM verifier's counters.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SamStats {
    pub accepted: u64,
    pub malformed: u64,
    pub unsigned: u64,
    pub bad_signature: u64,
    pub stale: u64,
    pub replayed: u64,
    /// Refused before verification: not newer than the newest verified SAM (replays, stale
    /// sequence numbers).
    pub not_newer: u64,
    /// Refused by the verification budget.
    pub over_budget: u64,
}

/// The once-a-second summary of the receive side.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Snapshot {
    pub at: Time,
    /// Time since the previous snapshot, s.
    pub interval_s: f64,
    pub session_id: Option<u32>,
    /// Layers held (the controller's count; with fixed layers, the layers joined).
    pub layers: u32,
    pub max_layers: u32,
    /// Cumulative announced rate of the layers held, bit/s.
    pub subscribed_bps: f64,
    /// Received over the interval, bit/s (wire bytes).
    pub rate_bps: f64,
    pub estimate_bps: Option<f64>,
    /// The controller's loss ratio (the interval's, without a controller).
    pub loss_ratio: f64,
    pub loss_ratio_1s: f64,
    pub rtt_s: Option<f64>,
    pub packets_received: u64,
    pub bytes_received: u64,
    pub packets_lost: u64,
    pub packets_1s: u64,
    pub lost_1s: u64,
    /// Complete bunches seen in the interval and the median spacing of their packets.
    pub pp_samples: usize,
    pub pp_gap_us_median: Option<f64>,
    pub pp_bps_median_payload: Option<f64>,
    pub join_to_first_packet_ms: Option<f64>,
    /// Longest gap between two packets in the interval, ms.
    pub max_gap_ms: f64,
    pub stale_resets: u64,
    pub restart: LimboStats,
    pub drops: Drops,
    pub sam: Option<SamStats>,
    pub encrypted: bool,
    pub ssm_source: Option<Ipv4Addr>,
    /// Packets opened (encrypted sessions).
    pub opened: u64,
    /// Reports and requests that had nowhere to go (no sender address) or failed to seal.
    pub feedback_no_address: u64,
    pub feedback_seal_errors: u64,
    pub tfmcc: Option<TfmccView>,
    /// FEC repair of the streams with repair parameters.
    pub fec: FecStats,
    /// Retransmission of lost packets (sessions that offer it).
    pub rtx: super::nack::RtxStats,
    /// The audio track (a session with one, media delivered).
    pub audio: Option<AudioStats>,
}
