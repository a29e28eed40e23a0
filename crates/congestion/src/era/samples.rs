//! Pair samples between RAIs: E16's stall filter, E15's loss confirmation and step 1's
//! immediate cut.

use super::{choose_layers, Era, Step1Target};
use crate::controller::Decision;
use crate::time::Time;

impl Era {
    pub(super) fn step1_target(&mut self, sample: f64) -> Option<f64> {
        match self.cfg.step1 {
            Step1Target::Off => None,
            Step1Target::Sample => Some(sample),
            Step1Target::KthLowest { k, of_last } => {
                let k = k.max(1);
                self.pp_recent.push_back(sample);
                while self.pp_recent.len() > of_last.max(k) {
                    self.pp_recent.pop_front();
                }
                if self.pp_recent.len() < k {
                    return None;
                }
                let mut v: Vec<f64> = self.pp_recent.iter().copied().collect();
                v.sort_by(|a, b| a.total_cmp(b));
                Some(v[k - 1])
            }
        }
    }

    /// E16's reference: the lowest `R_pp` of the last [`STALL_REF_RAIS`] RAIs (none before the
    /// first `R_pp`, or when E16 is off).
    pub(super) fn stall_reference(&self) -> Option<f64> {
        if self.cfg.pp_stall_horizon <= 0.0 {
            return None;
        }
        self.r_pp_hist.iter().copied().reduce(f64::min)
    }

    /// E16: forgets the open episode (new session).
    pub(super) fn stall_reset(&mut self) {
        self.stall_pending.clear();
        self.stall_start = None;
        self.stall_believed = false;
        self.r_pp_hist.clear();
    }

    /// E16: the open episode's samples are believed (it lasted the horizon, or a loss
    /// confirmed it): step 1 and the RAI's list see them now, in arrival order.
    pub(super) fn stall_flush(&mut self, now: Time) {
        let pending = std::mem::take(&mut self.stall_pending);
        for &(s, layer) in &pending {
            self.believe_sample(now, layer, s);
        }
        self.stall_pending = pending;
        self.stall_pending.clear();
    }

    /// A new pair sample: E16's stall filter, then step 1 and the RAI's list.
    pub(super) fn on_sample(&mut self, now: Time, layer: u8, sample: f64) {
        if self.loss_confirmed() {
            // E15: a loss confirms the samples, held ones too.
            if !self.stall_pending.is_empty() {
                self.stall_flush(now);
            }
        } else if let Some(reference) = self.stall_reference() {
            if sample < reference {
                if !self.stall_believed {
                    // The episode's span runs from its first low sample: a host that received
                    // nothing for a while (a frozen VM) must not make its first late sample
                    // look like a long episode.
                    let start = *self.stall_start.get_or_insert(now);
                    self.stall_pending.push((sample, layer));
                    if now.saturating_since(start).as_secs_f64() >= self.cfg.pp_stall_horizon {
                        self.stall_believed = true;
                        self.stall_flush(now);
                    }
                    return;
                }
            } else {
                // A sample at the reference ends the episode; one shorter than the horizon
                // was a stall.
                if !self.stall_believed {
                    for &(s, _) in &self.stall_pending {
                        self.rai_stalled += 1;
                        self.rai_stalled_min = self.rai_stalled_min.min(s);
                    }
                }
                self.stall_pending.clear();
                self.stall_start = None;
                self.stall_believed = false;
            }
        }
        self.believe_sample(now, layer, sample);
    }

    /// Step 1: a sample below the subscribed rate cuts the subscription now (floor: base).
    pub(super) fn believe_sample(&mut self, now: Time, layer: u8, sample: f64) {
        self.pp_now.push(sample);
        let step1 = self.step1_target(sample);
        let Some(target) = (if self.loss_confirmed() && self.cfg.step1 != Step1Target::Off {
            Some(sample) // E15
        } else {
            step1
        }) else {
            return;
        };
        let r = self.rate_of(self.held);
        if self.held <= 1 || r <= target + self.cfg.tolerance * self.layer_rate(self.held - 1) {
            return;
        }
        let to = choose_layers(&self.cum, self.held, target, self.cfg.tolerance, false);
        if to >= self.held {
            return;
        }
        let from = self.held;
        self.leave_to(to);
        let inputs = vec![
            ("pp_sample", sample),
            ("pp_layer", layer as f64),
            ("step1_target", target),
            ("r_before", r),
            ("r_after", self.rate_of(to)),
        ];
        self.log(Decision {
            at: now,
            from_layers: from as u8,
            to_layers: to as u8,
            reason: "pp-drop",
            inputs,
        });
    }

    /// E15: packets were lost in this RAI or the previous one, and the config lets that
    /// confirm the pair samples.
    pub(super) fn loss_confirmed(&self) -> bool {
        self.cfg.loss_confirms_samples && self.rai_lost + self.prev_rai_lost > 0
    }
}
