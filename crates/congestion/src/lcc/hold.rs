//! The hold-down after a decrease (`docs/protocols/lcc.md` §3.2): a level the receiver had to
//! leave under congestion is not joined again at once, and the longer the more often it had to
//! leave it lately, as RLM's join timers back off after a failed join experiment. Keyed on the
//! level left, not on who caused the congestion: behind one FIFO every receiver that yields
//! holds down what it left, whichever join tipped the queue over.
//!
//! The doubling stops sooner for a receiver holding a small share of the capacity: its
//! longest hold-down is `max` scaled by that share over `share_full`. Behind one FIFO the
//! receiver holding little is the latecomer, whose small joins can meet the others' big ones
//! and fail with them; doubled to `max` its hold-down kept it at a fraction of its share for
//! half a minute while the others held theirs. A failed small join costs the link little, so
//! it may be retried sooner; a receiver holding `share_full` or more backs off as before.

use crate::time::Time;
use std::time::Duration;

/// One level's record of decreases from it.
#[derive(Clone, Copy, Debug, Default)]
struct Left {
    /// Decreases from this level, each within `memory` of the one before.
    count: u32,
    /// The latest one.
    at: Option<Time>,
    /// The capacity estimate then (bit/s).
    cap: Option<f64>,
    /// The share of the capacity held while this level is held down (0..=1).
    share: f64,
    /// Not to be joined before this.
    until: Option<Time>,
}

/// Hold-down timers per level.
#[derive(Clone, Debug)]
pub struct HoldDown {
    levels: Vec<Left>,
    base: Duration,
    max: Duration,
    memory: Duration,
    release: f64,
    share_full: f64,
}

impl HoldDown {
    /// `base` after the first decrease from a level, doubled per repeat within `memory` of
    /// the previous one, at most `max`; a capacity estimate `release` times the one at the
    /// decrease lifts it (new evidence that the level fits). A receiver holding less than
    /// `share_full` of the capacity meanwhile doubles only up to `max` scaled by its share
    /// over `share_full` (never below `base`).
    pub fn new(
        base: Duration,
        max: Duration,
        memory: Duration,
        release: f64,
        share_full: f64,
    ) -> HoldDown {
        HoldDown {
            levels: Vec::new(),
            base,
            max: max.max(base),
            memory,
            release,
            share_full,
        }
    }

    /// Forgets everything (a new session).
    pub fn reset(&mut self) {
        self.levels.clear();
    }

    /// A decrease at `now` from `level` (1-based, the top level held before it); `cap` is the
    /// capacity estimate that a later one must exceed `release` times to lift the hold-down,
    /// `share` the rate held meanwhile over the capacity (1 if unknown).
    /// The hold-down is scaled by `jitter` (the receiver draws it from [0.75, 1.25)):
    /// receivers that left together must not come back together, or their joins meet again
    /// and fail again, in lockstep.
    pub fn on_decrease(
        &mut self,
        now: Time,
        level: usize,
        cap: Option<f64>,
        share: f64,
        jitter: f64,
    ) {
        if level == 0 {
            return;
        }
        if self.levels.len() < level {
            self.levels.resize(level, Left::default());
        }
        let l = &mut self.levels[level - 1];
        let repeat = l.at.is_some_and(|t| now.saturating_since(t) <= self.memory);
        l.count = if repeat { l.count.saturating_add(1) } else { 1 };
        l.at = Some(now);
        l.cap = cap;
        l.share = if share.is_finite() {
            share.clamp(0.0, 1.0)
        } else {
            1.0
        };
        let span = self.span(level).mul_f64(jitter.clamp(0.5, 2.0));
        self.levels[level - 1].until = Some(now + span);
    }

    /// How long `level` is held down after its latest decrease (zero if never left).
    pub fn span(&self, level: usize) -> Duration {
        let Some(l) = level.checked_sub(1).and_then(|i| self.levels.get(i)) else {
            return Duration::ZERO;
        };
        if l.count == 0 {
            return Duration::ZERO;
        }
        let doubling = 2u32.saturating_pow(l.count.saturating_sub(1).min(16));
        let by_share = if self.share_full > 0.0 {
            (l.share / self.share_full).min(1.0)
        } else {
            1.0
        };
        let max = self.max.mul_f64(by_share).max(self.base);
        self.base.saturating_mul(doubling).min(max)
    }

    /// Whether joining `level` must still wait at `now`, given the capacity estimate `cap`.
    pub fn blocks(&self, now: Time, level: usize, cap: Option<f64>) -> bool {
        let Some(l) = level.checked_sub(1).and_then(|i| self.levels.get(i)) else {
            return false;
        };
        let Some(until) = l.until else {
            return false;
        };
        if let (Some(then), Some(c)) = (l.cap, cap) {
            if c >= self.release * then {
                return false;
            }
        }
        now < until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(x: f64) -> Time {
        Time::from_secs_f64(x)
    }

    #[test]
    fn backs_off_per_repeat_forgets_after_the_memory_and_yields_to_more_capacity() {
        let mut h = HoldDown::new(
            Duration::from_secs(4),
            Duration::from_secs(32),
            Duration::from_secs(64),
            1.2,
            1.0 / 3.0,
        );
        assert!(!h.blocks(s(0.0), 6, None));
        h.on_decrease(s(10.0), 6, Some(3.3e6), 1.0, 1.0);
        assert!(h.blocks(s(13.9), 6, Some(3.3e6)));
        assert!(!h.blocks(s(14.1), 6, Some(3.3e6)));
        // Other levels are free.
        assert!(!h.blocks(s(11.0), 5, Some(3.3e6)));
        assert!(!h.blocks(s(11.0), 7, Some(3.3e6)));
        // Repeats double it: 8, 16, 32, then no more.
        for (k, at) in [20.0, 40.0, 80.0, 140.0].iter().enumerate() {
            h.on_decrease(s(*at), 6, Some(3.3e6), 1.0, 1.0);
            let want = [8, 16, 32, 32][k];
            assert_eq!(h.span(6), Duration::from_secs(want));
        }
        // A capacity estimate 20 % above the one at the decrease lifts it.
        assert!(h.blocks(s(141.0), 6, Some(3.5e6)));
        assert!(!h.blocks(s(141.0), 6, Some(4.0e6)));
        // A decrease more than the memory after the last starts over.
        h.on_decrease(s(300.0), 6, Some(3.3e6), 1.0, 1.0);
        assert_eq!(h.span(6), Duration::from_secs(4));
        // The jitter scales the wait.
        h.on_decrease(s(400.0), 5, None, 1.0, 1.25);
        assert!(h.blocks(s(404.9), 5, None));
        assert!(!h.blocks(s(405.1), 5, None));
        h.reset();
        assert!(!h.blocks(s(301.0), 6, None));
    }

    #[test]
    fn a_small_share_stops_doubling_sooner() {
        let mut h = HoldDown::new(
            Duration::from_secs(4),
            Duration::from_secs(32),
            Duration::from_secs(64),
            1.2,
            0.25,
        );
        // Holding a tenth of the capacity meanwhile: at most 32 s x 0.1 / 0.25 = 12.8 s.
        let mut spans = Vec::new();
        for at in [0.0, 10.0, 30.0, 50.0, 70.0] {
            h.on_decrease(s(at), 4, Some(3.5e6), 0.1, 1.0);
            spans.push(h.span(4).as_secs_f64());
        }
        assert_eq!(&spans[..2], &[4.0, 8.0]);
        assert!(
            spans[2..].iter().all(|&x| (x - 12.8).abs() < 1e-6),
            "{spans:?}"
        );
        // Never below the first hold-down, however small the share.
        h.on_decrease(s(200.0), 2, Some(3.5e6), 0.0, 1.0);
        h.on_decrease(s(201.0), 2, Some(3.5e6), 0.0, 1.0);
        assert_eq!(h.span(2), Duration::from_secs(4));
        // A share of a quarter or more doubles up to the full 32 s.
        for at in [300.0, 310.0, 330.0, 360.0] {
            h.on_decrease(s(at), 6, Some(3.5e6), 0.25, 1.0);
        }
        assert_eq!(h.span(6), Duration::from_secs(32));
    }
}
