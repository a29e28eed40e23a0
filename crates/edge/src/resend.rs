//! A second copy of every packet a browser NACKs, sent in its own stream a little after
//! str0m's RTX.
//!
//! libwebrtc asks for a lost packet once, at once, and asks again one RTT later only while the
//! packet is still in its NACK list; but it clears that list up to the last packet of every
//! frame that becomes continuous (all its references present). In a VP9 SVC stream the next
//! picture's lower spatial frames (and any frame not referencing the lost one) become
//! continuous a few milliseconds later, so a lost upper-layer packet whose one retransmission
//! is lost too is never asked for again: that layer, and the pictures, stall until the next
//! key picture (1-2 s, no PLI). With 2 % random loss that is 2 % of the repairs, several
//! freezes a minute (measured, docs/edge.md "Repair"). The edge cannot make the browser ask
//! again, so it sends the repair twice: str0m's RTX at once and this copy `COPY_DELAY` later
//! (apart, so a short burst does not take both), with the packet's own sequence number on the
//! media SSRC. The browser takes whichever arrives first and drops the other as a duplicate;
//! both lost is p², 0.04 % of repairs at 2 % loss.
//!
//! Copies are for random loss, not for congestion: a queue overflowing at the bottleneck
//! loses tens of packets at once, and copying all of those repairs doubles a burst that is
//! already too big for the queue (seen on a clean 4 Mbit/s path: 98 NACKed packets within
//! 0.5 s, the copies on top, 41 % loss in the next second and the estimate from 2.7 to
//! 0.64 Mbit/s). So copies spend a budget earned by the packets sent, `COPY_SHARE` of them,
//! at most `COPY_BURST` ahead: random loss stays well inside it, a burst gets a few copies
//! and then str0m's RTX alone.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long after the NACK the copy goes out.
pub const COPY_DELAY: Duration = Duration::from_millis(10);

/// Copies earned per packet sent (5 %: more than twice the repairs of 2 % random loss).
pub const COPY_SHARE: f64 = 0.05;

/// Copies that can be spent at once.
pub const COPY_BURST: f64 = 8.0;

/// A video packet as it was written to the browser's stream.
#[derive(Debug, Clone)]
pub struct Sent {
    pub seq: u64,
    pub payload: Arc<[u8]>,
    pub timestamp: u32,
    pub marker: bool,
    pub at: Instant,
}

/// The packets sent to one browser over `history`, and the copies due.
#[derive(Debug)]
pub struct Resender {
    history: Duration,
    /// Sent packets in sequence order, with when they were written.
    sent: VecDeque<(Instant, Sent)>,
    /// Copies to send: (due, sequence number).
    due: VecDeque<(Instant, u64)>,
    copies: u64,
    /// Copies that may still be scheduled (the budget).
    tokens: f64,
    /// NACKed packets refused a copy for want of budget.
    refused: u64,
}

/// At most this many packets are kept (a bound for a stream far above the edge's rates).
const MAX_SENT: usize = 8192;

impl Resender {
    pub fn new(history: Duration) -> Self {
        Resender {
            history,
            sent: VecDeque::new(),
            due: VecDeque::new(),
            copies: 0,
            tokens: COPY_BURST,
            refused: 0,
        }
    }

    pub fn set_history(&mut self, history: Duration) {
        self.history = history;
    }

    /// How long sent packets are kept.
    pub fn history(&self) -> Duration {
        self.history
    }

    /// Copies sent so far.
    pub fn copies(&self) -> u64 {
        self.copies
    }

    /// NACKed packets not copied because the budget was spent (a loss burst).
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// A packet written to the browser's stream (sequence numbers increase).
    pub fn on_sent(&mut self, now: Instant, p: Sent) {
        self.tokens = (self.tokens + COPY_SHARE).min(COPY_BURST);
        self.sent.push_back((now, p));
        while self.sent.len() > MAX_SENT
            || self
                .sent
                .front()
                .is_some_and(|(t, _)| now.saturating_duration_since(*t) > self.history)
        {
            self.sent.pop_front();
        }
    }

    /// The browser NACKed these sequence numbers: a copy of each one still held, once, while
    /// the budget lasts.
    pub fn on_nack(&mut self, now: Instant, seqs: impl IntoIterator<Item = u64>) {
        for seq in seqs {
            if self.find(seq).is_none() || self.due.iter().any(|&(_, s)| s == seq) {
                continue;
            }
            if self.tokens < 1.0 {
                self.refused += 1;
                continue;
            }
            self.tokens -= 1.0;
            self.due.push_back((now + COPY_DELAY, seq));
        }
    }

    /// Forgets the copies not sent yet (a key picture replaces what they would repair).
    pub fn clear_due(&mut self) {
        self.due.clear();
    }

    /// When the next copy is due.
    pub fn next_due(&self) -> Option<Instant> {
        self.due.front().map(|&(t, _)| t)
    }

    /// The next copy due at `now`, if its packet is still held.
    pub fn poll_copy(&mut self, now: Instant) -> Option<Sent> {
        while let Some(&(t, seq)) = self.due.front() {
            if t > now {
                return None;
            }
            self.due.pop_front();
            if let Some(p) = self.find(seq) {
                let p = p.clone();
                self.copies += 1;
                return Some(p);
            }
        }
        None
    }

    fn find(&self, seq: u64) -> Option<&Sent> {
        let first = self.sent.front()?.1.seq;
        let i = usize::try_from(seq.checked_sub(first)?).ok()?;
        self.sent.get(i).map(|(_, p)| p).filter(|p| p.seq == seq)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sent(seq: u64, at: Instant) -> Sent {
        Sent {
            seq,
            payload: Arc::from(vec![seq as u8; 10]),
            timestamp: seq as u32 * 3000,
            marker: seq % 3 == 2,
            at,
        }
    }

    /// A resender that was sent `seqs` at `t0`.
    fn after_sending(t0: Instant, seqs: std::ops::Range<u64>) -> Resender {
        let mut r = Resender::new(Duration::from_millis(1500));
        for s in seqs {
            r.on_sent(t0, sent(s, t0));
        }
        r
    }

    #[test]
    fn a_nacked_packet_is_copied_once_after_the_delay() {
        let t0 = Instant::now();
        let mut r = after_sending(t0, 100..110);
        let t1 = t0 + Duration::from_millis(30);
        r.on_nack(t1, [104, 105, 104]);
        assert_eq!(r.next_due(), Some(t1 + COPY_DELAY));
        assert!(r.poll_copy(t1).is_none(), "not before the delay");
        let c = r.poll_copy(t1 + COPY_DELAY).expect("first copy");
        assert_eq!((c.seq, c.timestamp, c.marker), (104, 104 * 3000, true));
        assert_eq!(&c.payload[..], &[104u8; 10][..]);
        let c = r.poll_copy(t1 + COPY_DELAY).expect("second copy");
        assert_eq!((c.seq, c.marker), (105, false));
        assert!(r.poll_copy(t1 + COPY_DELAY).is_none(), "104 only once");
        assert_eq!(r.copies(), 2);
    }

    #[test]
    fn a_loss_burst_gets_a_few_copies_random_loss_all() {
        let t0 = Instant::now();
        let mut r = after_sending(t0, 0..1000);
        // A burst: 60 packets NACKed at once, only the budget's worth is copied.
        r.on_nack(t0, 900..960);
        assert_eq!(r.due.len(), COPY_BURST as usize);
        assert_eq!(r.refused(), 60 - COPY_BURST as u64);
        while r.poll_copy(t0 + COPY_DELAY).is_some() {}
        // Random loss, 2 % of the packets sent after it: every one is copied.
        let mut nacked = 0;
        for s in 1000..3000 {
            r.on_sent(t0, sent(s, t0));
            if s % 50 == 49 {
                r.on_nack(t0, [s]);
                nacked += 1;
            }
        }
        assert_eq!(r.due.len(), nacked);
        assert_eq!(r.refused(), 60 - COPY_BURST as u64);
    }

    #[test]
    fn unknown_and_expired_packets_are_not_copied() {
        let t0 = Instant::now();
        let mut r = Resender::new(Duration::from_millis(1000));
        r.on_sent(t0, sent(1, t0));
        let t1 = t0 + Duration::from_millis(1200);
        r.on_sent(t1, sent(2, t1));
        r.on_nack(t1, [1, 3, 0, u64::MAX]);
        assert!(r.next_due().is_none());
        r.on_nack(t1, [2]);
        r.clear_due();
        assert!(r.poll_copy(t1 + COPY_DELAY).is_none());
    }
}
