//! Packet-loss estimators: per-layer sequence tracking, a windowed loss ratio (ERA's PLR,
//! PLM's loss fallback) and the plain ratio `nloss / (nrecv + nloss)`.

use std::collections::VecDeque;

/// ERA's packet loss ratio, `l = nloss / (nrecv + nloss)` (`era.md` §1.1.10; the trace's
/// `npkts=828, nloss=4` gives 4/832). Zero when nothing was expected.
pub fn loss_ratio(nrecv: u64, nloss: u64) -> f64 {
    let total = nrecv.saturating_add(nloss);
    if total == 0 {
        0.0
    } else {
        nloss as f64 / total as f64
    }
}

/// How far (in sequence numbers) a received number must be ahead of a missing one before the
/// missing one counts as lost: TCP's duplicate-ACK threshold (RFC 5681 §3.2, RFC 6675's
/// DupThresh). Reordering by fewer places is reordering, not loss; docs/protocols/reports.md,
/// "Loss and reordering", says why distance and not time.
pub const REORDER_THRESHOLD: u64 = 3;

/// What one arriving sequence number means for loss accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SeqEvent {
    /// The first packet after a (re)start: the baseline. Nothing lost.
    Baseline,
    /// A new highest number; `lost` numbers became lost with it: missing and now at least
    /// [`REORDER_THRESHOLD`] below the highest (0 when nothing did).
    Advance { lost: u64 },
    /// A late packet that arrived before its gap counted as lost: received, nothing lost.
    Reordered,
    /// A late packet that fills a gap already counted as lost: un-count one loss.
    Recovered,
    /// A number already seen (within the tracked window): ignore.
    Duplicate,
    /// Older than the tracked window: ignore (it stays counted as lost).
    TooOld,
    /// A jump forward larger than the configured maximum: treated as a sender restart, new
    /// baseline, no loss counted.
    Restart,
}

/// Per-layer sequence tracker: gap detection that tolerates reordering, with a 64-packet
/// window for late packets.
///
/// A missing number counts as lost once a number [`REORDER_THRESHOLD`] higher has arrived;
/// a late packet before that is only reordered ([`SeqEvent::Reordered`]), one after that
/// un-counts its loss ([`SeqEvent::Recovered`]). Why a bitmap: a late packet must un-count a
/// loss exactly once, and a duplicate must not, so the last 64 numbers below the highest are
/// remembered (bit `i` = `highest - i` received).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqTracker {
    highest: Option<u64>,
    seen: u64,
    /// The baseline: numbers below it were never expected.
    floor: u64,
    max_gap: u64,
    threshold: u64,
}

impl SeqTracker {
    /// A tracker that treats forward jumps above `max_gap` as a restart, with the product's
    /// reorder tolerance ([`REORDER_THRESHOLD`]).
    pub const fn new(max_gap: u64) -> SeqTracker {
        SeqTracker::with_threshold(max_gap, REORDER_THRESHOLD)
    }

    /// A tracker whose missing numbers count as lost once a number `threshold` higher arrived
    /// (at least 1: a gap counts at once, as the published receivers of the baselines do).
    pub const fn with_threshold(max_gap: u64, threshold: u64) -> SeqTracker {
        SeqTracker {
            highest: None,
            seen: 0,
            floor: 0,
            max_gap,
            threshold: if threshold == 0 { 1 } else { threshold },
        }
    }

    /// Forgets everything: the next packet is a new baseline (ERA: reset on join). Gaps not
    /// yet counted as lost are forgotten with it.
    pub fn reset(&mut self) {
        self.highest = None;
        self.seen = 0;
    }

    /// Whether a baseline exists.
    pub fn started(&self) -> bool {
        self.highest.is_some()
    }

    /// Highest number seen.
    pub fn highest(&self) -> Option<u64> {
        self.highest
    }

    fn baseline(&mut self, seq: u64) {
        self.highest = Some(seq);
        self.seen = 1;
        self.floor = seq;
    }

    /// Missing numbers in `[lo, hi]` (all at most `highest`, less than 64 below it).
    fn missing(&self, h: u64, lo: u64, hi: u64) -> u64 {
        (lo..=hi)
            .filter(|n| self.seen & (1u64 << (h - n)) == 0)
            .count() as u64
    }

    /// Accounts one arriving number.
    pub fn on_seq(&mut self, seq: u64) -> SeqEvent {
        let k = self.threshold;
        let Some(h) = self.highest else {
            self.baseline(seq);
            return SeqEvent::Baseline;
        };
        if seq > h {
            let d = seq - h;
            if d > self.max_gap {
                self.baseline(seq);
                return SeqEvent::Restart;
            }
            // Newly lost: the numbers that cross `seq - k` with this advance. Those up to
            // `h` are in the bitmap (less than k below h); those above `h` were never seen.
            let lo = (h + 1).saturating_sub(k).max(self.floor);
            let hi = seq.saturating_sub(k).min(h);
            let mut lost = if lo <= hi { self.missing(h, lo, hi) } else { 0 };
            lost += seq.saturating_sub(k).saturating_sub(h);
            self.seen = if d >= 64 { 1 } else { (self.seen << d) | 1 };
            self.highest = Some(seq);
            SeqEvent::Advance { lost }
        } else {
            let back = h - seq;
            if back >= 64 {
                return SeqEvent::TooOld;
            }
            let bit = 1u64 << back;
            if self.seen & bit != 0 {
                SeqEvent::Duplicate
            } else {
                self.seen |= bit;
                if back >= k && seq >= self.floor {
                    SeqEvent::Recovered
                } else {
                    SeqEvent::Reordered
                }
            }
        }
    }
}

/// Loss ratio over a sliding window of the last `slots` intervals (ERA uses one slot per
/// RAI). Counts are signed within a slot because a late packet can un-count a loss recorded
/// in an earlier slot; the window's total loss is clamped at zero.
#[derive(Clone, Debug, PartialEq)]
pub struct WindowedLoss {
    slots: VecDeque<(u64, i64)>,
    cap: usize,
    recv: u64,
    lost: i64,
}

impl WindowedLoss {
    /// A window of `slots` intervals (at least 1).
    pub fn new(slots: usize) -> WindowedLoss {
        let cap = slots.max(1);
        let mut q = VecDeque::with_capacity(cap);
        q.push_back((0, 0));
        WindowedLoss {
            slots: q,
            cap,
            recv: 0,
            lost: 0,
        }
    }

    /// Applies one [`SeqEvent`] to the current slot.
    pub fn record(&mut self, ev: SeqEvent) {
        match ev {
            SeqEvent::Baseline | SeqEvent::Restart => self.add(1, 0),
            SeqEvent::Advance { lost } => self.add(1, lost.min(i64::MAX as u64) as i64),
            SeqEvent::Recovered => self.add(1, -1),
            SeqEvent::Reordered => self.add(1, 0),
            SeqEvent::Duplicate | SeqEvent::TooOld => {}
        }
    }

    /// Adds `recv` received and `lost` lost (negative to un-count) to the current slot.
    pub fn add(&mut self, recv: u64, lost: i64) {
        if let Some(s) = self.slots.back_mut() {
            s.0 = s.0.saturating_add(recv);
            s.1 = s.1.saturating_add(lost);
        }
        self.recv = self.recv.saturating_add(recv);
        self.lost = self.lost.saturating_add(lost);
    }

    /// Closes the current slot and opens a new one, dropping the oldest beyond the window.
    pub fn roll(&mut self) {
        self.slots.push_back((0, 0));
        while self.slots.len() > self.cap {
            if let Some((r, l)) = self.slots.pop_front() {
                self.recv = self.recv.saturating_sub(r);
                self.lost = self.lost.saturating_sub(l);
            }
        }
    }

    /// Forgets everything.
    pub fn clear(&mut self) {
        *self = WindowedLoss::new(self.cap);
    }

    /// Packets received in the window.
    pub fn received(&self) -> u64 {
        self.recv
    }

    /// Packets lost in the window (clamped at zero).
    pub fn lost(&self) -> u64 {
        self.lost.max(0) as u64
    }

    /// `lost / (received + lost)` over the window.
    pub fn ratio(&self) -> f64 {
        loss_ratio(self.received(), self.lost())
    }

    /// Received and lost in the current (newest) slot only.
    pub fn current(&self) -> (u64, u64) {
        self.slots
            .back()
            .map(|s| (s.0, s.1.max(0) as u64))
            .unwrap_or((0, 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plr_vector() {
        assert!((loss_ratio(828, 4) - 0.004_807_692_307_692_308).abs() < 1e-15);
        assert_eq!(loss_ratio(0, 0), 0.0);
    }

    #[test]
    fn tracker_events() {
        let mut t = SeqTracker::new(1000);
        assert_eq!(t.on_seq(10), SeqEvent::Baseline);
        assert_eq!(t.on_seq(11), SeqEvent::Advance { lost: 0 });
        // 12 and 13 missing, but 14 is only 2 and 1 ahead: pending, not lost.
        assert_eq!(t.on_seq(14), SeqEvent::Advance { lost: 0 });
        assert_eq!(t.on_seq(12), SeqEvent::Reordered);
        assert_eq!(t.on_seq(12), SeqEvent::Duplicate);
        assert_eq!(t.on_seq(15), SeqEvent::Advance { lost: 0 });
        // 16 is 3 ahead of 13: lost now; its late arrival un-counts it.
        assert_eq!(t.on_seq(16), SeqEvent::Advance { lost: 1 });
        assert_eq!(t.on_seq(13), SeqEvent::Recovered);
        assert_eq!(t.on_seq(14), SeqEvent::Duplicate);
        // 17..=197 lost at once; 198 and 199 pending.
        assert_eq!(t.on_seq(200), SeqEvent::Advance { lost: 181 });
        assert_eq!(t.on_seq(201), SeqEvent::Advance { lost: 1 });
        assert_eq!(t.on_seq(100), SeqEvent::TooOld);
        assert_eq!(t.on_seq(5000), SeqEvent::Restart);
        // Below the new baseline: never expected, so nothing to un-count.
        assert_eq!(t.on_seq(4990), SeqEvent::Reordered);
        t.reset();
        assert_eq!(t.on_seq(3), SeqEvent::Baseline);
    }

    /// Threshold 1: a gap counts at once and a late packet un-counts it (the baselines).
    #[test]
    fn threshold_one_counts_gaps_at_once() {
        let mut t = SeqTracker::with_threshold(1000, 1);
        assert_eq!(t.on_seq(10), SeqEvent::Baseline);
        assert_eq!(t.on_seq(13), SeqEvent::Advance { lost: 2 });
        assert_eq!(t.on_seq(12), SeqEvent::Recovered);
        assert_eq!(t.on_seq(14), SeqEvent::Advance { lost: 0 });
        assert_eq!(t.on_seq(11), SeqEvent::Recovered);
    }

    /// The link emulator's fault: each packet held back with some probability and delivered
    /// after the next one (adjacent swaps). No loss is ever counted, and a real loss in the
    /// same stream still is, once three later numbers arrived.
    #[test]
    fn adjacent_reordering_is_not_loss() {
        let mut order: Vec<u64> = (0..1000).collect();
        let mut i = 1;
        while i + 1 < order.len() {
            if i % 7 == 0 || i % 10 == 3 {
                order.swap(i, i + 1);
                i += 2;
            } else {
                i += 1;
            }
        }
        let mut t = SeqTracker::new(10_000);
        let mut w = WindowedLoss::new(4);
        let mut reordered = 0;
        for s in &order {
            let ev = t.on_seq(*s);
            reordered += (ev == SeqEvent::Reordered) as u32;
            assert!(
                !matches!(ev, SeqEvent::Advance { lost } if lost > 0),
                "{s}: {ev:?}"
            );
            w.record(ev);
        }
        assert!(reordered > 150, "{reordered}");
        assert_eq!((w.received(), w.lost()), (1000, 0));
        // 1001 lost: counted when the third number after it (1004) arrives, not before.
        let evs: Vec<_> = [1000, 1002, 1003].iter().map(|s| t.on_seq(*s)).collect();
        assert!(
            evs.iter().all(|e| *e == SeqEvent::Advance { lost: 0 }),
            "{evs:?}"
        );
        assert_eq!(t.on_seq(1004), SeqEvent::Advance { lost: 1 });
    }

    #[test]
    fn window_slides() {
        let mut w = WindowedLoss::new(2);
        w.add(100, 0);
        w.roll();
        w.add(90, 10);
        assert!((w.ratio() - 10.0 / 200.0).abs() < 1e-12);
        w.roll(); // the first slot leaves
        assert_eq!(w.received(), 90);
        assert_eq!(w.lost(), 10);
        w.roll();
        assert_eq!(w.received(), 0);
        assert_eq!(w.ratio(), 0.0);
    }

    proptest! {
        /// With any reordering inside the 64-packet window, the final loss count equals the
        /// numbers truly never delivered.
        #[test]
        fn counts_true_losses(n in 10u64..300, drop in proptest::collection::vec(any::<bool>(), 300),
                              swaps in proptest::collection::vec((0usize..300, 1usize..20), 0..40)) {
            let mut order: Vec<u64> = (0..n).filter(|&s| s == 0 || s == n - 1 || !drop[s as usize]).collect();
            for (i, d) in swaps {
                let len = order.len();
                let (a, b) = (i % len, (i + d) % len);
                if a.max(b) < len - 1 && a.min(b) > 0 { order.swap(a, b); }
            }
            // Within the tracker's 64-number reorder window only.
            let mut hi = 0u64;
            for s in &order { prop_assume!(hi < s + 64); hi = hi.max(*s); }
            // Then REORDER_THRESHOLD numbers in order: every gap below them has been decided.
            order.extend(n..n + REORDER_THRESHOLD);
            let delivered = order.len() as u64;
            let mut t = SeqTracker::new(10_000);
            let mut w = WindowedLoss::new(4);
            for s in &order { w.record(t.on_seq(*s)); }
            prop_assert_eq!(w.received(), delivered);
            prop_assert_eq!(w.lost(), n + REORDER_THRESHOLD - delivered);
        }
    }
}
