//! The replay window (RFC 3711 §3.3.2 style, reliability review F6): a receiver accepts each
//! extended sequence number of a stream once. Duplicates, whether a duplicating network or a
//! replayed authentic packet, would otherwise reach the packet-pair estimator: a copy of a
//! bunch's first packet just before its second reads as any rate the attacker likes, and a
//! replayed pair spread apart reads arbitrarily low (a forced cut). Replays pass SSM and the
//! AEAD, so this check sits after both and before every estimator.

/// Sequence numbers this far behind the highest one are refused as too old (a reordering this
/// deep does not happen on the paths the product runs on; such a packet counts as lost).
pub const REPLAY_WINDOW: u64 = 128;

/// What the window says about one sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Seen for the first time.
    Fresh,
    /// Seen before.
    Duplicate,
    /// More than [`REPLAY_WINDOW`] behind the highest seen.
    TooOld,
}

/// One stream's window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReplayWindow {
    highest: Option<u64>,
    /// Bit i set: `highest - i` was seen.
    seen: u128,
}

impl ReplayWindow {
    /// Checks `seq` and, if fresh, records it.
    pub fn check(&mut self, seq: u64) -> Verdict {
        let Some(h) = self.highest else {
            self.highest = Some(seq);
            self.seen = 1;
            return Verdict::Fresh;
        };
        if seq > h {
            let d = seq - h;
            self.seen = if d >= REPLAY_WINDOW {
                1
            } else {
                (self.seen << d) | 1
            };
            self.highest = Some(seq);
            return Verdict::Fresh;
        }
        let back = h - seq;
        if back >= REPLAY_WINDOW {
            return Verdict::TooOld;
        }
        let bit = 1u128 << back;
        if self.seen & bit != 0 {
            return Verdict::Duplicate;
        }
        self.seen |= bit;
        Verdict::Fresh
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_number_once_reordering_inside_the_window() {
        let mut w = ReplayWindow::default();
        assert_eq!(w.check(1000), Verdict::Fresh);
        assert_eq!(w.check(1000), Verdict::Duplicate);
        assert_eq!(w.check(1003), Verdict::Fresh);
        assert_eq!(w.check(1001), Verdict::Fresh); // reordered
        assert_eq!(w.check(1001), Verdict::Duplicate);
        assert_eq!(w.check(1002), Verdict::Fresh);
        assert_eq!(w.check(1003), Verdict::Duplicate);
        // The window slides: 127 behind is still remembered, 128 behind is too old.
        assert_eq!(w.check(1003 + 127), Verdict::Fresh);
        assert_eq!(w.check(1003), Verdict::Duplicate);
        assert_eq!(w.check(1002), Verdict::TooOld);
        // A jump beyond the window forgets everything before it.
        assert_eq!(w.check(5000), Verdict::Fresh);
        assert_eq!(w.check(4999), Verdict::Fresh);
        assert_eq!(w.check(1003 + 127), Verdict::TooOld);
    }
}
