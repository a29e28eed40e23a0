//! §3.5's loss rule (the ns-2 loss cycle) for when pairs stop getting through.

use super::Plm;
use crate::estimators::loss::SeqEvent;
use crate::time::Time;

/// The current ns-2 loss cycle: packets received and lost since `start`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct LossCycle {
    pub(super) start: Time,
    pub(super) recv: u64,
    pub(super) lost: u64,
}

/// Lower Wilson score bound of a loss ratio from `lost` of `lost + recv` packets at `z`
/// standard deviations (`z = 0` gives the point estimate).
fn wilson_lower(lost: u64, recv: u64, z: f64) -> f64 {
    let n = (lost + recv) as f64;
    if n == 0.0 {
        return 0.0;
    }
    let p = lost as f64 / n;
    let z2 = z * z;
    let centre = p + z2 / (2.0 * n);
    let spread = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    (centre - spread) / (1.0 + z2 / n)
}

impl Plm {
    /// Whether the current loss cycle is above the threshold by the loss rule's test (a cycle
    /// inside the blind period restarts at every loss, hence also `loss_dropped_in_period`).
    pub(super) fn cycle_lossy(&self) -> bool {
        self.cycle.is_some_and(|c| {
            c.lost > 0
                && c.recv >= self.cfg.loss_min_pkts
                && wilson_lower(c.lost, c.recv, self.cfg.loss_confidence_z)
                    > self.cfg.loss_threshold
        })
    }

    /// §3.5 point 2 (ns-2 loss cycle), after accounting one packet's sequence event.
    pub(super) fn on_loss_accounting(&mut self, now: Time, ev: SeqEvent) {
        let (recv, lost) = match ev {
            SeqEvent::Advance { lost } => (1, lost),
            SeqEvent::Baseline | SeqEvent::Restart | SeqEvent::Recovered | SeqEvent::Reordered => {
                (1, 0)
            }
            SeqEvent::Duplicate | SeqEvent::TooOld => (0, 0),
        };
        if let Some(c) = self.cycle {
            if now.saturating_since(c.start) > self.cfg.loss_cycle_max {
                self.cycle = None;
            }
        }
        if lost > 0 {
            let in_blind = now < self.blind_until;
            match (&mut self.cycle, in_blind) {
                (Some(c), false) => c.lost += lost,
                // ns-2 (`log-loss`) snapshots the counters *after* the loss that opens the cycle,
                // so that loss is not part of the cycle's rate: counting it biases every cycle
                // upwards (1 loss in 11 packets is already 9 %).
                _ => {
                    self.cycle = Some(LossCycle {
                        start: now,
                        recv: 0,
                        lost: 0,
                    })
                }
            }
        }
        let Some(c) = self.cycle.as_mut() else {
            return;
        };
        c.recv += recv;
        if c.recv < self.cfg.loss_min_pkts || now < self.blind_until {
            return;
        }
        let rate = c.lost as f64 / (c.lost + c.recv) as f64;
        self.last_loss_rate = rate;
        if c.lost > 0
            && wilson_lower(c.lost, c.recv, self.cfg.loss_confidence_z) > self.cfg.loss_threshold
        {
            let from = self.n;
            let bn = self.b(self.n);
            self.leave_top();
            self.cycle = None;
            self.blind_until = now + self.cfg.blind;
            self.loss_dropped_in_period = true;
            self.reset_slide(Some(now));
            let b_after = self.b(self.n);
            self.log(
                now,
                from,
                "loss-drop",
                vec![("loss_rate", rate), ("b_before", bn), ("b_after", b_after)],
            );
            self.emptied(now);
        }
    }
}
