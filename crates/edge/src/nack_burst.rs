//! A loss burst read from the browser's NACKs, a round trip after it happens.
//!
//! The loss figure str0m gives (transport-wide feedback over the last second, in its stats
//! event) comes once per stats interval and averages over a second: when a path steps from
//! 4 to 1 Mbit/s, its queue overflows at once and most of what is sent is lost, but that
//! figure reads 10-30 % only 0.5-1 s later, and meanwhile the old layers keep filling the
//! queue (docs/edge.md "Heavy loss at a down-switch"). The browser NACKs each lost packet as
//! soon as a later one arrives, so the packets NACKed in the last `WINDOW` show the burst
//! within a round trip. Its depth is the share NACKed of the sequence-number span they cover
//! (first to last NACKed): packets sent before the queue overflowed, or still in flight, are
//! outside the span, so the share is the overflow's loss from the first NACKs on, where a share
//! of everything sent in the window would start near zero and lag the way str0m's figure
//! does. It is only taken as a congestion signal from `MIN_NACKED` distinct packets on:
//! random loss of a few percent NACKs one or two packets in such a window, a queue overflow
//! tens.

use std::collections::{BTreeSet, VecDeque};
use std::time::{Duration, Instant};

/// The span over which NACKed packets are set against packets sent.
pub const WINDOW: Duration = Duration::from_millis(300);

/// Distinct NACKed packets in `WINDOW` from which the share counts.
pub const MIN_NACKED: usize = 8;

/// Entries kept at most, whatever the rate (a bound on memory per browser).
const MAX_ENTRIES: usize = 4096;

/// See the module documentation.
#[derive(Debug, Default)]
pub struct NackBurst {
    /// (first NACK, sequence number) of the packets NACKed in the window, oldest first.
    nacked: VecDeque<(Instant, u64)>,
    /// The same sequence numbers, for a lookup per NACKed packet and the span's ends (a
    /// browser's NACK may name thousands).
    seqs: BTreeSet<u64>,
    /// Packets numbered below this are not counted: they were sent before the last
    /// down-switch, and the burst they tell of has been acted on.
    floor: u64,
}

impl NackBurst {
    /// Counts the packets of one NACK that were not NACKed within the window already (the
    /// browser asks again a round trip later while a packet is missing).
    pub fn on_nack(&mut self, now: Instant, seqs: impl IntoIterator<Item = u64>) {
        self.expire(now);
        for s in seqs {
            if s < self.floor || !self.seqs.insert(s) {
                continue;
            }
            if self.nacked.len() == MAX_ENTRIES {
                if let Some((_, old)) = self.nacked.pop_front() {
                    self.seqs.remove(&old);
                }
            }
            self.nacked.push_back((now, s));
        }
    }

    /// Counts only packets numbered `next` and on from now: the layers went down, and the
    /// NACKs still to come for what was sent before (a queue's worth, a round trip long) tell
    /// of the burst already acted on; counted again, they took a browser a second step down
    /// 70 ms after the first, for one overload.
    pub fn restart_at(&mut self, next: u64) {
        self.floor = next;
        self.nacked.clear();
        self.seqs.clear();
    }

    /// The share NACKed of the span of sequence numbers the window's NACKs cover, when at
    /// least `MIN_NACKED` distinct packets were NACKed (None otherwise: too few to tell a
    /// burst from random loss).
    pub fn loss(&mut self, now: Instant) -> Option<f32> {
        self.expire(now);
        let n = self.nacked.len();
        if n < MIN_NACKED {
            return None;
        }
        let (&lo, &hi) = (self.seqs.first()?, self.seqs.last()?);
        let span = (hi - lo + 1).max(n as u64);
        Some(n as f32 / span as f32)
    }

    fn expire(&mut self, now: Instant) {
        let Some(start) = now.checked_sub(WINDOW) else {
            return;
        };
        while let Some(&(t, s)) = self.nacked.front() {
            if t >= start {
                break;
            }
            self.nacked.pop_front();
            self.seqs.remove(&s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    /// 300 packets a second; `lost(i)` says which are NACKed, 40 ms after they were sent.
    fn run(lost: impl Fn(u64) -> bool, secs: u64) -> Vec<Option<f32>> {
        let t0 = Instant::now();
        let mut b = NackBurst::default();
        let mut out = Vec::new();
        let n = secs * 300;
        for i in 0..n {
            let now = t0 + Duration::from_micros(i * 3333);
            if i >= 12 && lost(i - 12) {
                b.on_nack(now, [i - 12]);
                // The browser asks again a round trip later: counted once.
                if i >= 30 && lost(i - 30) {
                    b.on_nack(now, [i - 30]);
                }
            }
            if i % 30 == 0 {
                out.push(b.loss(now));
            }
        }
        out
    }

    #[test]
    fn random_loss_of_a_few_percent_is_no_burst() {
        // 3 % loss, spread evenly: 2-3 packets of the 90 in a window.
        let r = run(|i| i % 33 == 0, 5);
        assert!(r.iter().all(|x| x.is_none()), "{r:?}");
    }

    #[test]
    fn a_queue_overflow_shows_within_a_round_trip() {
        // Clean for 2 s, then 60 % of every packet lost (a 2.5x overload of the path).
        let r = run(|i| i >= 600 && i % 5 < 3, 4);
        // Every sample before the step: nothing.
        assert!(r[..20].iter().all(|x| x.is_none()), "{r:?}");
        // 100 ms after the step (a sample every 30 packets = 100 ms): the burst, at its
        // depth from the first NACKs on.
        for x in &r[21..] {
            let l = x.expect("burst seen from 100 ms after the step");
            assert!((0.5..=0.7).contains(&l), "{r:?}");
        }
    }

    #[test]
    fn repeated_nacks_count_once_and_the_burst_ends() {
        let now = Instant::now();
        let mut b = NackBurst::default();
        // Every other packet of 40..60 NACKed, five times over.
        for _ in 0..5 {
            b.on_nack(now, (40..60u64).step_by(2));
        }
        assert_eq!(b.loss(now), Some(10.0 / 19.0));
        // Another window later, with nothing NACKed: no burst.
        assert_eq!(b.loss(now + WINDOW + MS), None);
    }

    #[test]
    fn after_a_down_switch_only_what_is_sent_since_counts() {
        let now = Instant::now();
        let mut b = NackBurst::default();
        b.on_nack(now, 0..10u64);
        assert_eq!(b.loss(now), Some(1.0));
        b.restart_at(100);
        assert_eq!(b.loss(now), None);
        // The rest of the old burst's NACKs come in: not counted.
        b.on_nack(now, 10..60u64);
        assert_eq!(b.loss(now), None);
        // A new burst of packets sent after the switch is.
        b.on_nack(now, (100..120u64).step_by(2));
        assert_eq!(b.loss(now), Some(10.0 / 19.0));
    }
}
