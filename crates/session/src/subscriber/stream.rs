//! Receive state of one joined endpoint (a group and port): its current SSRC, the
//! sequence-number extension and loss tally, the replay window, the bunch-spacing diagnostic,
//! and the join quarantine.
//!
//! Join quarantine: a newly joined layer's first packets are held for [`QUARANTINE`] so that
//! stale ones (queued in the router before the join, see `stale`) can be told apart by their
//! delay before anything is fed; then the held packets more delayed than the least delayed one
//! by [`HELD_SLACK_US`] are dropped as stale and the rest fed in order.

use super::nack::MissingList;
use super::replay::ReplayWindow;
use congestion::estimators::SeqTracker;
use proto::wire::cc_ext::{CcFields, SeqExtender};
use proto::Time;
use std::net::Ipv4Addr;
use std::time::Duration;

/// How long a newly joined layer's first packets are held.
pub const QUARANTINE: Duration = Duration::from_millis(150);
/// Held packets more delayed than the least delayed one by this much are dropped as stale.
pub const HELD_SLACK_US: i64 = 100_000;

/// One received, parsed data packet.
#[derive(Clone, Debug)]
pub struct Pkt {
    pub recv_time: Time,
    pub group: Ipv4Addr,
    pub port: u16,
    pub cc: CcFields,
    pub seq: u16,
    pub ssrc: u32,
    /// Wire size (what rates count).
    pub size: u32,
    /// Whether the RTP payload is empty (padding).
    pub padding: bool,
    /// The (opened) RTP packet, when media is delivered.
    pub data: Vec<u8>,
    /// Sent again by the sender on request (`super::nack`): media only, never the
    /// controller's.
    pub rtx: bool,
    /// The header-extension block, for controllers that read theirs (TFMCC).
    pub ext: Vec<u8>,
}

impl Pkt {
    /// Receive time minus send time, µs.
    pub fn offset_us(&self) -> i64 {
        super::stale::offset_us(self.recv_time, self.cc.send_time_us)
    }
}

/// Receive state of one endpoint.
#[derive(Debug)]
pub struct Stream {
    pub layer: u8,
    pub group: Ipv4Addr,
    pub port: u16,
    pub ssrc: Option<u32>,
    /// The SSRC before the last change (a restarted sender's predecessor).
    pub prev_ssrc: Option<u32>,
    pub ext: SeqExtender,
    /// Loss tally with the controllers' reorder tolerance (`congestion::estimators::loss`).
    pub loss: SeqTracker,
    pub replay: ReplayWindow,
    /// First packet of the bunch in progress: (extended seq, receive time).
    pub bunch_start: Option<(u64, Time)>,
    /// Newly joined: packets are held until [`QUARANTINE`] after the first one arrived.
    pub quarantine: bool,
    pub held: Vec<Pkt>,
    pub first_held: Option<Time>,
    /// Sequence numbers missing, to ask for again (sessions that offer retransmission).
    pub missing: MissingList,
}

impl Stream {
    /// A newly joined endpoint (quarantined).
    pub fn joined(layer: u8, group: Ipv4Addr, port: u16) -> Stream {
        Stream {
            layer,
            group,
            port,
            ssrc: None,
            prev_ssrc: None,
            ext: SeqExtender::new(),
            loss: SeqTracker::new(u64::MAX),
            replay: ReplayWindow::default(),
            bunch_start: None,
            quarantine: true,
            held: Vec::new(),
            first_held: None,
            missing: MissingList::default(),
        }
    }

    /// Forgets the sequence space (a new session on the same groups).
    pub fn reset_sequence(&mut self) {
        self.ext.reset();
        self.loss.reset();
        self.replay = ReplayWindow::default();
        self.missing.reset();
        self.ssrc = None;
        self.prev_ssrc = None;
        self.bunch_start = None;
    }

    /// When the quarantine's held packets are due.
    pub fn quarantine_due(&self) -> Option<Time> {
        match (self.quarantine, self.first_held) {
            (true, Some(f)) => Some(f + QUARANTINE),
            _ => None,
        }
    }
}
