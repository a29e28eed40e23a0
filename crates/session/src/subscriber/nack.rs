//! Asking for lost packets again (docs/protocols/retransmission.md): when the sender's
//! announcement offers retransmission, a sequence-number gap in a media stream becomes a
//! retransmission request after [`REORDER_WAIT`] (a packet only reordered arrives within it and
//! costs nothing), asked again every [`RETRY_INTERVAL`] up to [`MAX_TRIES`] times while the
//! packet stays missing and younger than [`GIVE_UP`]. The retransmitted packet goes through the
//! same checks as any other (authentication, replay window, FEC) and then to the host, but it
//! never reaches the controller or the loss tally: the loss was real, and the congestion
//! signal stays what the network said.
//!
//! A gap revealed by a packet that waited [`CONGESTED_QUEUE`] or more above the path's delay
//! floor is congestion, and is not asked for: a retransmission into a full queue adds to it
//! (a viewer behind a 600-kbit/s link with a 50-ms queue lost four times as many packets when
//! it asked for them, docs/protocols/retransmission.md "Congestion"), except in layer 0, which
//! every picture predicts from (the caller decides, `packets.rs`).

use proto::Time;
use serde::Serialize;
use std::collections::VecDeque;
use std::time::Duration;

/// A gap is asked for after this long, unless it fills by itself.
pub const REORDER_WAIT: Duration = Duration::from_millis(20);
/// A packet still missing is asked for again after this long (a lost request or a lost
/// retransmission; longer than the round trips of the paths the product serves).
pub const RETRY_INTERVAL: Duration = Duration::from_millis(150);
/// Requests per missing packet at most.
pub const MAX_TRIES: u8 = 3;
/// A packet missing this long is not asked for any more: the host's playout has passed it.
pub const GIVE_UP: Duration = Duration::from_millis(700);
/// A gap is not asked for when the packet that revealed it was queued this much longer than
/// the path's delay floor (the stale filter's windowed minimum).
pub const CONGESTED_QUEUE: Duration = Duration::from_millis(25);
/// Missing packets remembered per stream at most (the oldest are forgotten first): a burst
/// longer than this is past what retransmission within budget repairs anyway.
pub const MAX_MISSING: usize = 128;

/// Retransmission counters.
#[derive(Default, Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct RtxStats {
    /// Retransmission requests sent, and the sequence numbers they asked for.
    pub requests: u64,
    pub asked: u64,
    /// Retransmitted packets received that filled a gap.
    pub received: u64,
    /// Retransmitted packets that came after the packet itself (or a FEC rebuild of it), or
    /// for no stream held.
    pub useless: u64,
    /// Missing packets given up on (never arrived within [`GIVE_UP`] or [`MAX_TRIES`]).
    pub given_up: u64,
    /// Missing packets not asked for: the gap came with a queue ([`CONGESTED_QUEUE`]).
    pub congested: u64,
}

#[derive(Clone, Copy, Debug)]
struct Missing {
    seq: u64,
    since: Time,
    due: Time,
    tries: u8,
}

/// One stream's missing packets.
#[derive(Debug, Default)]
pub struct MissingList {
    missing: VecDeque<Missing>,
    highest: Option<u64>,
}

impl MissingList {
    /// Forgets everything (a new sequence space).
    pub fn reset(&mut self) {
        self.missing.clear();
        self.highest = None;
    }

    /// Extended sequence number `seq` arrived at `at` (from the network or retransmitted); a
    /// gap it reveals is asked for only when `ask` (no queue said congestion).
    pub fn arrived(&mut self, seq: u64, at: Time, ask: bool, stats: &mut RtxStats) {
        match self.highest {
            Some(h) if seq > h + 1 && !ask => stats.congested += seq - h - 1,
            Some(h) if seq > h + 1 => {
                let from = (h + 1).max(seq.saturating_sub(MAX_MISSING as u64));
                for s in from..seq {
                    if self.missing.len() == MAX_MISSING {
                        self.missing.pop_front();
                        stats.given_up += 1;
                    }
                    self.missing.push_back(Missing {
                        seq: s,
                        since: at,
                        due: at + REORDER_WAIT,
                        tries: 0,
                    });
                }
            }
            Some(h) if seq <= h => self.missing.retain(|m| m.seq != seq),
            _ => {}
        }
        self.highest = Some(self.highest.map_or(seq, |h| h.max(seq)));
    }

    /// The missing packets to ask for at `now` (each marked asked); forgets those past their
    /// last try or [`GIVE_UP`].
    pub fn due(&mut self, now: Time, stats: &mut RtxStats) -> Vec<u64> {
        let before = self.missing.len();
        self.missing.retain(|m| {
            m.tries < MAX_TRIES && now.saturating_since(m.since) < GIVE_UP || m.due > now
        });
        stats.given_up += (before - self.missing.len()) as u64;
        let mut out = Vec::new();
        for m in self.missing.iter_mut().filter(|m| m.due <= now) {
            m.tries += 1;
            m.due = now + RETRY_INTERVAL;
            out.push(m.seq);
        }
        out
    }

    /// When the next request is due.
    pub fn next_due(&self) -> Option<Time> {
        self.missing.iter().map(|m| m.due).min()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Time {
        Time::from_millis(n)
    }

    #[test]
    fn a_gap_is_asked_for_after_the_reorder_wait_and_again_until_given_up() {
        let mut l = MissingList::default();
        let mut st = RtxStats::default();
        l.arrived(100, ms(0), true, &mut st);
        l.arrived(103, ms(10), true, &mut st); // 101 and 102 missing
        assert_eq!(l.next_due(), Some(ms(30)));
        assert!(l.due(ms(29), &mut st).is_empty());
        l.arrived(101, ms(15), true, &mut st); // only reordered
        assert_eq!(l.due(ms(30), &mut st), vec![102]);
        assert_eq!(l.next_due(), Some(ms(180)));
        assert_eq!(l.due(ms(180), &mut st), vec![102]);
        assert_eq!(l.due(ms(330), &mut st), vec![102]);
        // Three tries: the fourth is not made, and the packet is given up.
        assert!(l.due(ms(480), &mut st).is_empty());
        assert_eq!(st.given_up, 1);
        assert_eq!(l.next_due(), None);
    }

    #[test]
    fn a_retransmission_ends_the_asking_and_a_long_burst_is_bounded() {
        let mut l = MissingList::default();
        let mut st = RtxStats::default();
        l.arrived(1, ms(0), true, &mut st);
        l.arrived(5, ms(0), true, &mut st);
        assert_eq!(l.due(ms(20), &mut st), vec![2, 3, 4]);
        l.arrived(3, ms(60), true, &mut st);
        assert_eq!(l.due(ms(170), &mut st), vec![2, 4]);
        // A gap of 10 000 packets: only the last MAX_MISSING are remembered.
        l.arrived(10_005, ms(200), true, &mut st);
        assert_eq!(l.due(ms(400), &mut st).len(), MAX_MISSING);
        // A gap that came with a queue is counted, never asked for.
        let mut l = MissingList::default();
        l.arrived(1, ms(0), true, &mut st);
        l.arrived(4, ms(10), false, &mut st);
        assert_eq!(st.congested, 2);
        assert!(l.due(ms(100), &mut st).is_empty());
    }
}
