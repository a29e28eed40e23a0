//! CoDel's per-queue state machine (RFC 8289), as FQ-CoDel runs it on every flow queue
//! (RFC 8290 §4.2): a packet's sojourn time is measured at dequeue; once it has stayed at or
//! above `target` for a whole `interval`, CoDel drops the packet at the head and then drops
//! again at `interval / sqrt(count)` spacings while the sojourn stays above `target`.
//!
//! This module only decides; the caller owns the packets. [`Codel::dequeue`] takes a closure
//! that pops the next packet of the queue with the queue's backlog left behind, so the same
//! code serves any queue type.

use proto::Time;

/// CoDel's parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CodelParams {
    /// Acceptable standing queue delay, ns (RFC 8289: 5 ms).
    pub target_ns: u64,
    /// Sliding window over which the minimum sojourn must exceed `target`, ns (100 ms).
    pub interval_ns: u64,
    /// A queue holding at most this many bytes after the dequeue is never dropped from
    /// (RFC 8289 §5.2 `MAXPACKET`; Linux uses the interface MTU).
    pub mtu_bytes: u64,
}

impl Default for CodelParams {
    fn default() -> Self {
        CodelParams {
            target_ns: 5_000_000,
            interval_ns: 100_000_000,
            mtu_bytes: 1514,
        }
    }
}

/// The state of one CoDel queue.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Codel {
    /// When the sojourn first stayed above target plus one interval (None = below target).
    first_above: Option<Time>,
    /// Next scheduled drop while dropping.
    drop_next: Time,
    /// Drops in the current dropping state (sets the drop spacing).
    count: u32,
    /// `count` when the last dropping state began.
    last_count: u32,
    dropping: bool,
}

/// What [`Codel::dequeue`] did.
#[derive(Debug)]
pub struct CodelOut<T> {
    /// The packet to send, if any.
    pub packet: Option<T>,
    /// Packets dropped at the head before it.
    pub dropped: Vec<T>,
}

/// The time `interval / sqrt(count)` after `t` (RFC 8289 `control_law`).
fn control_law(t: Time, interval_ns: u64, count: u32) -> Time {
    let step = interval_ns as f64 / f64::from(count.max(1)).sqrt();
    Time(t.0.saturating_add(step as u64))
}

impl Codel {
    /// Whether CoDel is in its dropping state.
    pub fn dropping(&self) -> bool {
        self.dropping
    }

    /// Drops in the current (or last) dropping state.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Pops one packet with RFC 8289's dequeue. `pop` yields the next packet of the queue as
    /// `(packet, enqueued_at, bytes left in the queue after it)`, or `None` when empty.
    pub fn dequeue<T>(
        &mut self,
        now: Time,
        p: &CodelParams,
        mut pop: impl FnMut() -> Option<(T, Time, u64)>,
    ) -> CodelOut<T> {
        let mut dropped = Vec::new();
        let (mut pkt, mut ok_to_drop) = self.do_dequeue(now, p, &mut pop);
        if self.dropping {
            if !ok_to_drop {
                // Sojourn fell below target: leave the dropping state.
                self.dropping = false;
            }
            while self.dropping && now >= self.drop_next {
                let Some(x) = pkt.take() else { break };
                dropped.push(x);
                self.count = self.count.saturating_add(1);
                (pkt, ok_to_drop) = self.do_dequeue(now, p, &mut pop);
                if ok_to_drop {
                    self.drop_next = control_law(self.drop_next, p.interval_ns, self.count);
                } else {
                    self.dropping = false;
                }
            }
        } else if ok_to_drop {
            if let Some(x) = pkt.take() {
                dropped.push(x);
            }
            (pkt, _) = self.do_dequeue(now, p, &mut pop);
            self.dropping = true;
            // Start from the drop rate that last controlled the queue if the last dropping
            // state ended recently (RFC 8289 §5.5: within 16 intervals).
            let delta = self.count.saturating_sub(self.last_count);
            self.count = if delta > 1 && now.0.saturating_sub(self.drop_next.0) < 16 * p.interval_ns
            {
                delta
            } else {
                1
            };
            self.drop_next = control_law(now, p.interval_ns, self.count);
            self.last_count = self.count;
        }
        CodelOut {
            packet: pkt,
            dropped,
        }
    }

    /// RFC 8289 `dodequeue`: pops the head and says whether it may be dropped.
    fn do_dequeue<T>(
        &mut self,
        now: Time,
        p: &CodelParams,
        pop: &mut impl FnMut() -> Option<(T, Time, u64)>,
    ) -> (Option<T>, bool) {
        let Some((pkt, enq, left)) = pop() else {
            self.first_above = None;
            return (None, false);
        };
        let sojourn = now.0.saturating_sub(enq.0);
        if sojourn < p.target_ns || left <= p.mtu_bytes {
            self.first_above = None;
            return (Some(pkt), false);
        }
        match self.first_above {
            None => {
                self.first_above = Some(Time(now.0.saturating_add(p.interval_ns)));
                (Some(pkt), false)
            }
            Some(t) => (Some(pkt), now >= t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::VecDeque;

    /// A queue of (id, enqueued_at) with 1000-byte packets.
    fn pop_from(q: &mut VecDeque<(u32, Time)>) -> impl FnMut() -> Option<(u32, Time, u64)> + '_ {
        move || {
            let (id, t) = q.pop_front()?;
            Some((id, t, q.len() as u64 * 1000))
        }
    }

    #[test]
    fn no_drop_below_target_or_with_one_mtu_left() {
        let p = CodelParams::default();
        let mut c = Codel::default();
        let mut q: VecDeque<_> = (0..100).map(|i| (i, Time::ZERO)).collect();
        // Sojourn 4 ms < 5 ms target, for a long time: never a drop.
        for k in 0..50 {
            let now = Time::from_millis(4);
            let out = c.dequeue(now, &p, pop_from(&mut q));
            assert!(out.dropped.is_empty(), "drop at {k}");
        }
        // Above target but only one packet (<= MTU) left behind: no drop either.
        let mut q: VecDeque<_> = [(1, Time::ZERO), (2, Time::ZERO)].into();
        let mut c = Codel::default();
        for ms in [10, 200, 400] {
            let out = c.dequeue(Time::from_millis(ms), &p, pop_from(&mut q));
            assert!(out.dropped.is_empty());
        }
    }

    #[test]
    fn first_drop_after_one_interval_above_target_then_sqrt_spacing() {
        let p = CodelParams::default();
        let mut c = Codel::default();
        // A standing queue: every packet has waited 20 ms when dequeued, one dequeue per ms.
        let mut q: VecDeque<(u32, Time)> = VecDeque::new();
        let mut drops = Vec::new();
        for ms in 20u64..1000 {
            while q.len() < 50 {
                q.push_back((ms as u32, Time::from_millis(ms.saturating_sub(20))));
            }
            let now = Time::from_millis(ms);
            // Re-stamp so that the head always waited 20 ms.
            q.iter_mut()
                .for_each(|x| x.1 = Time::from_millis(ms.saturating_sub(20)));
            let out = c.dequeue(now, &p, pop_from(&mut q));
            for _ in out.dropped {
                drops.push(ms);
            }
        }
        // Above target from the first dequeue (t = 20 ms): first drop one interval later; the
        // dropping state then drops at interval/sqrt(count): +100, +100/sqrt(2) = 70.7,
        // +100/sqrt(3) = 57.7, +50 ms (RFC 8289 control law; whole-ms dequeues round up).
        assert_eq!(&drops[..5], &[120, 220, 291, 349, 399]);
        assert!(c.dropping());
        // The spacing keeps shrinking as 1/sqrt(count).
        let gaps: Vec<u64> = drops.windows(2).map(|w| w[1] - w[0]).collect();
        assert!(gaps.windows(2).all(|g| g[1] <= g[0]), "{gaps:?}");
    }

    #[test]
    fn leaves_dropping_when_sojourn_falls_and_reenters_with_remembered_count() {
        let p = CodelParams::default();
        let mut c = Codel::default();
        let mut q: VecDeque<(u32, Time)> = VecDeque::new();
        let mut run = |c: &mut Codel, from: u64, to: u64, wait_ms: u64| {
            let mut n = 0;
            for ms in from..to {
                q.clear();
                for i in 0..10 {
                    q.push_back((i, Time::from_millis(ms.saturating_sub(wait_ms))));
                }
                n += c
                    .dequeue(Time::from_millis(ms), &p, pop_from(&mut q))
                    .dropped
                    .len();
            }
            n
        };
        assert!(run(&mut c, 0, 500, 20) >= 5);
        let count = c.count();
        assert!(count >= 5);
        // Below target: dropping ends, no drops.
        assert_eq!(run(&mut c, 500, 600, 1), 0);
        assert!(!c.dropping());
        // Above target again soon after: the first drop comes after one interval and the
        // count resumes near where it was (delta = count - last_count), not at 1.
        assert!(run(&mut c, 600, 701, 20) >= 1);
        assert!(c.count() > 1, "count {}", c.count());
    }
}
