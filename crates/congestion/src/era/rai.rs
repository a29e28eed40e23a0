//! Steps 2–6 at an RAI boundary: `R_pp`, `R_TCP`, the target and the one-step move to it.

use super::layers::kth_lowest;
use super::{choose_layers, Era, STALL_REF_RAIS};
use crate::controller::Decision;
use crate::estimators::tcp::era_eq_5_6;
use crate::time::Time;

impl Era {
    /// Steps 2–6 at an RAI boundary.
    pub(super) fn on_rai(&mut self, now: Time) {
        // E16: an open episode that has lasted the horizon by now is believed.
        if !self.stall_pending.is_empty() {
            if let Some(start) = self.stall_start {
                if now.saturating_since(start).as_secs_f64() >= self.cfg.pp_stall_horizon {
                    self.stall_believed = true;
                    self.stall_flush(now);
                }
            }
        }
        let stalled = std::mem::take(&mut self.rai_stalled);
        let stall_ref = self.stall_reference();
        let stalled_min = std::mem::replace(&mut self.rai_stalled_min, f64::INFINITY);
        let from = self.held;
        let r_before = self.rate_of(from);
        let plr = self.loss.ratio();
        self.last_plr = plr;
        self.loss.roll();
        let packets = std::mem::take(&mut self.rai_packets);
        let confirmed = self.loss_confirmed();
        self.prev_rai_lost = std::mem::take(&mut self.rai_lost);
        self.rais_since_loss = if self.prev_rai_lost > 0 {
            0
        } else {
            self.rais_since_loss.saturating_add(1)
        };

        if packets == 0 {
            // E2: nothing at all arrived: one layer per empty RAI, never below the base.
            self.pp_now.clear();
            self.pp_carry.clear();
            let to = from.saturating_sub(1).max(1);
            self.leave_to(to);
            self.log(Decision {
                at: now,
                from_layers: from as u8,
                to_layers: self.held as u8,
                reason: "rai-empty",
                inputs: vec![("packets", 0.0), ("r_before", r_before)],
            });
            return;
        }

        // Step 2: R_pp over this RAI's samples plus any carried ones (E1).
        // Sized once: growing these by doubling every RAI (hundreds of samples at high rates)
        // left a trail of freed blocks of every size in the host's heap (the player's slow
        // RssAnon climb, docs/reliability.md "Soak").
        let carried: usize = self.pp_carry.iter().map(Vec::len).sum();
        let mut list: Vec<f64> = Vec::with_capacity(carried + self.pp_now.len());
        list.extend(self.pp_carry.iter().flatten().copied());
        list.extend_from_slice(&self.pp_now);
        let list_min = list.iter().copied().fold(f64::INFINITY, f64::min);
        let mut outlier = -1.0;
        let r_pp = if list.len() >= self.cfg.min_pp {
            let second = kth_lowest(&list, 2);
            match self.last_r_pp {
                Some(prev)
                    if !confirmed
                        && list_min < self.cfg.pp_outlier_ratio * second
                        && list_min < self.cfg.pp_outlier_ratio * prev =>
                {
                    outlier = list_min; // E13: a lone stretched pair
                    second.min(prev)
                }
                _ => list_min,
            }
        } else {
            -1.0
        };
        if r_pp >= 0.0 {
            self.last_r_pp = Some(r_pp);
            if self.r_pp_hist.len() >= STALL_REF_RAIS {
                self.r_pp_hist.pop_front();
            }
            self.r_pp_hist.push_back(r_pp);
        }
        // Step 3.
        let rtt = self.rtt();
        let r_tcp = if plr > 0.0 {
            era_eq_5_6(
                self.info.as_ref().map_or(512.0, |i| i.packet_size as f64),
                rtt,
                plr,
                self.cfg.tcp_min1,
            )
        } else {
            None
        };
        // Step 5.
        let target = match (plr > 0.0, r_pp >= 0.0, r_tcp) {
            (true, true, Some(t)) => Some(t.min(r_pp)),
            (true, false, Some(t)) => Some(t),
            (true, true, None) => Some(r_pp), // RTT unusable: pairs only
            (true, false, None) => None,
            (false, true, _) => Some(r_pp),
            (false, false, _) => None, // E1: hold
        };
        let mut inputs = Vec::with_capacity(13 + list.len());
        inputs.extend([
            (
                "r_pp_list_min",
                if list.is_empty() { -1.0 } else { list_min },
            ),
            ("pp_count", list.len() as f64),
            ("r_pp", r_pp),
            ("pp_outlier", outlier),
            ("pp_stalled", stalled as f64),
            ("pp_stall_ref", stall_ref.unwrap_or(-1.0)),
            (
                "pp_stalled_min",
                if stalled > 0 { stalled_min } else { -1.0 },
            ),
            ("plr", plr),
            ("rtt", rtt),
            ("r_tcp", r_tcp.unwrap_or(-1.0)),
            ("r_target", target.unwrap_or(-1.0)),
            ("r_before", r_before),
            ("tolerance", self.cfg.tolerance),
        ]);
        inputs.extend(list.iter().map(|s| ("pp_sample", *s)));

        let Some(target) = target else {
            // Hold; carry the samples (bounded) so a slow base layer can reach min_pp.
            let cur = std::mem::take(&mut self.pp_now);
            self.pp_carry.push_back(cur);
            while self.pp_carry.len() >= self.cfg.pp_carry_rais.max(1) {
                self.pp_carry.pop_front();
            }
            inputs.push(("r_after", r_before));
            self.log(Decision {
                at: now,
                from_layers: from as u8,
                to_layers: from as u8,
                reason: "rai-hold",
                inputs,
            });
            return;
        };
        self.pp_now.clear();
        self.pp_carry.clear();
        self.last_target = Some(target);

        // Step 6.
        let to = choose_layers(
            &self.cum,
            from,
            target,
            self.cfg.tolerance,
            self.cfg.exit_below_base,
        );
        if to == 0 {
            inputs.push(("r_after", 0.0));
            self.exit(now, "rai-exit", inputs);
            return;
        }
        let (to, cap) = self.cap_climb(from, to);
        inputs.push(("climb_cap", cap));
        if to > from {
            self.join_to(now, to);
        } else {
            self.leave_to(to);
        }
        inputs.push(("r_after", self.rate_of(to)));
        self.log(Decision {
            at: now,
            from_layers: from as u8,
            to_layers: to as u8,
            reason: "rai",
            inputs,
        });
    }

    /// E17 ([`super::EraConfig::climb_after_loss`]): the layers a climb from `from` to `to`
    /// may reach, and the rate it was capped at (-1 when not capped).
    fn cap_climb(&self, from: usize, to: usize) -> (usize, f64) {
        let Some(ratio) = self.cfg.climb_after_loss else {
            return (to, -1.0);
        };
        let memory = self.cfg.plr_window_rais.max(1).saturating_mul(2);
        if to <= from + 1 || self.rais_since_loss >= memory {
            return (to, -1.0);
        }
        let limit = (self.rate_of(from) * ratio).max(self.rate_of(from + 1));
        let k = choose_layers(&self.cum, from, limit, self.cfg.tolerance, false);
        (k.clamp(from + 1, to), limit)
    }
}
