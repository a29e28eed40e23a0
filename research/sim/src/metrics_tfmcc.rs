//! Metrics for TFMCC checks S22, S27, S28 and S29 (`tfrc-tfmcc-pcc.md` §7.2), computed from
//! the sender monitor's state log (`Monitor::tfmcc_state`: R_max, slow start, X at every
//! change) and its completed feedback rounds.

use crate::metrics::Monitor;

impl Monitor {
    /// The sender's state (R_max s, slow start, X kbit/s) in force at `t` (the first logged
    /// state before the first entry).
    fn tfmcc_state_at(&self, t: f64) -> Option<(f64, bool, f64)> {
        let i = self.tfmcc_state.partition_point(|x| x.0 <= t);
        self.tfmcc_state
            .get(i.saturating_sub(1))
            .map(|x| (x.1, x.2, x.3))
    }

    /// End of the sender's first slow start: the first logged state without slow start after
    /// one with it (NaN if slow start never ended).
    pub fn tfmcc_ss_exit(&self) -> f64 {
        let first_ss = self.tfmcc_state.iter().position(|x| x.2);
        first_ss
            .and_then(|i| self.tfmcc_state[i..].iter().find(|x| !x.2))
            .map_or(f64::NAN, |x| x.0)
    }

    /// S18: seconds from receiver `rid`'s last report (sent before `crash`, when it fell
    /// silent) until this sender's CLR is no longer `rid`, in feedback rounds
    /// `T = b·max(R_max, (c+1)·s/X)` with the R_max and X in force as that report arrived
    /// (the sender times the CLR out after 10 T measured then; b and c of the default
    /// configuration, the scenario's `size`). NaN if `rid` was not the CLR at the crash or
    /// never reported; infinite if the sender never dropped it.
    pub fn tfmcc_clr_timeout_t(&self, rid: u32, crash: f64, size: f64) -> f64 {
        let Some(&last) = self.last_report.get(&rid) else {
            return f64::NAN;
        };
        // Reports sent before the crash may still arrive after it (one reverse trip).
        if self.clr_at(crash) != rid || last < crash - 60.0 {
            return f64::NAN;
        }
        // The sender takes T as it handles the report, before the report moves X: the state
        // in force just before `last`.
        let i = self.tfmcc_state.partition_point(|x| x.0 < last);
        let Some(&(_, r_max, _, kbps)) = self.tfmcc_state.get(i.saturating_sub(1)) else {
            return f64::NAN;
        };
        let t = congestion::tfmcc::TfmccConfig::default().feedback_round(
            r_max,
            kbps * 1000.0 / 8.0,
            size,
        );
        self.clr
            .iter()
            .find(|c| c.0 > crash && c.1 != rid)
            .map_or(f64::INFINITY, |c| (c.0 - last) / t)
    }

    /// S22: the rate X (kbit/s) the sender set when its slow start ended.
    pub fn tfmcc_ss_exit_kbps(&self) -> f64 {
        let t = self.tfmcc_ss_exit();
        if t.is_nan() {
            return f64::NAN;
        }
        self.tfmcc_state_at(t).map_or(f64::NAN, |s| s.2)
    }

    /// S22: seconds from `after` to the first time after the slow-start exit at which X is at
    /// least `kbps` (infinite if never).
    pub fn tfmcc_time_to_rate(&self, after: f64, kbps: f64) -> f64 {
        let t0 = self.tfmcc_ss_exit();
        if t0.is_nan() {
            return f64::INFINITY;
        }
        self.tfmcc_state
            .iter()
            .find(|x| x.0 >= t0 && x.3 >= kbps)
            .map_or(f64::INFINITY, |x| x.0 - after)
    }

    /// S27: halvings of X in [t0, t1] (entries where X fell to exactly half of the previous
    /// value, within 1e-9), as (time, R_max in force just before).
    fn tfmcc_halvings(&self, t0: f64, t1: f64) -> Vec<(f64, f64)> {
        self.tfmcc_state
            .windows(2)
            .filter(|w| w[1].0 >= t0 && w[1].0 <= t1)
            .filter(|w| (w[1].3 - 0.5 * w[0].3).abs() <= 1e-9 * w[0].3)
            .map(|w| (w[1].0, w[0].1))
            .collect()
    }

    /// S27: intervals between successive no-feedback halvings in [t0, t1], in units of the
    /// R_max in force before each halving. The first halving after the reports stop is
    /// skipped: it is RFC 4654 §3.3's one-off halving for a silent CLR, timed from the CLR's
    /// last report (`clr_silence_halving_rtts` = 4 R_max: seed 1, 0.74 s after the last
    /// report), not a no-feedback halving (the first of those follows 1.85 s = 10 R_max after
    /// the last report).
    fn tfmcc_nofb_intervals(&self, t0: f64, t1: f64) -> Vec<f64> {
        let h = self.tfmcc_halvings(t0, t1);
        h.windows(2)
            .skip(1)
            .map(|w| (w[1].0 - w[0].0) / w[1].1)
            .collect()
    }

    /// S27: mean no-feedback halving interval in [t0, t1] (R_max units; NaN if none).
    pub fn tfmcc_halving_interval_rmax(&self, t0: f64, t1: f64) -> f64 {
        let v = self.tfmcc_nofb_intervals(t0, t1);
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    }

    /// S27: the first no-feedback halving interval in [t0, t1] (R_max units; NaN if none):
    /// the one at the highest rate.
    pub fn tfmcc_first_halving_interval_rmax(&self, t0: f64, t1: f64) -> f64 {
        self.tfmcc_nofb_intervals(t0, t1)
            .first()
            .copied()
            .unwrap_or(f64::NAN)
    }

    /// Number of halvings in [t0, t1].
    pub fn tfmcc_halving_count(&self, t0: f64, t1: f64) -> f64 {
        self.tfmcc_halvings(t0, t1).len() as f64
    }

    /// Lowest X (kbit/s) in force during [t0, t1].
    pub fn tfmcc_min_rate_kbps(&self, t0: f64, t1: f64) -> f64 {
        self.tfmcc_state_at(t0)
            .map(|s| s.2)
            .into_iter()
            .chain(
                self.tfmcc_state
                    .iter()
                    .filter(|x| x.0 > t0 && x.0 <= t1)
                    .map(|x| x.3),
            )
            .fold(f64::NAN, f64::min)
    }

    /// S27/S28: the largest increase of X relative to the spec's bound "s/R_max per R_max",
    /// over windows of one R_max starting at every logged state in [t0, t1]: the increase
    /// `X(t+R) − X(t)` (R = R_max in force at t) divided by the increase the bound allows in
    /// that window, `∫ s/R_max(u)² du` with the R_max in force at each instant (R_max shrinks
    /// by 0.9 per round without a higher RTT report, and a smaller R_max allows a steeper
    /// slope). s = packet size in bytes. The check wants ≤ 1.
    pub fn tfmcc_max_increase(&self, t0: f64, t1: f64, size: f64) -> f64 {
        let st = &self.tfmcc_state;
        let mut worst: f64 = 0.0;
        for (i, x) in st.iter().enumerate() {
            if x.0 < t0 || x.0 > t1 {
                continue;
            }
            let end = x.0 + x.1;
            let later = self.tfmcc_state_at(end).map_or(x.3, |s| s.2);
            // Allowed increase (bytes/s): piecewise-constant R_max over [x.0, end].
            let mut allowed = 0.0;
            let mut t = x.0;
            let mut r = x.1;
            for y in &st[i + 1..] {
                if y.0 >= end {
                    break;
                }
                allowed += (y.0 - t) * size / (r * r);
                t = y.0;
                r = y.1;
            }
            allowed += (end - t) * size / (r * r);
            let inc = (later - x.3) * 1000.0 / 8.0;
            if allowed > 0.0 {
                worst = worst.max(inc / allowed);
            }
        }
        // The sender's own steps meet the bound exactly (ratio 1 up to float rounding in the
        // integral above): report 9 significant decimals.
        (worst * 1e9).round() / 1e9
    }

    /// S29: feedback rounds that started in (after, t] where t is the first time ≥ `after`
    /// with R_max ≥ `at_least` s (`rising`) or ≤ `at_most` s (falling); infinite if never.
    pub fn tfmcc_rounds_until_rmax(&self, after: f64, bound: f64, rising: bool) -> f64 {
        let hit = self
            .tfmcc_state_at(after)
            .filter(|s| if rising { s.0 >= bound } else { s.0 <= bound })
            .map(|_| after)
            .or_else(|| {
                self.tfmcc_state
                    .iter()
                    .find(|x| x.0 > after && if rising { x.1 >= bound } else { x.1 <= bound })
                    .map(|x| x.0)
            });
        match hit {
            None => f64::INFINITY,
            Some(t) => self
                .rounds
                .iter()
                .filter(|r| r.0 > after && r.0 <= t)
                .count() as f64,
        }
    }

    /// Mean feedback-round duration (s) over rounds that started in [t0, t1) and ended by t1.
    pub fn tfmcc_mean_round_s(&self, t0: f64, t1: f64) -> f64 {
        let v: Vec<f64> = self
            .rounds
            .iter()
            .filter(|r| r.0 >= t0 && r.0 + r.1 <= t1)
            .map(|r| r.1)
            .collect();
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    }

    /// S26: mean feedback-round duration in units of the packet interval `s/X` at the round's
    /// start (X from the state log, s the packet size in bytes), over rounds that started in
    /// [t0, t1) and ended by t1: the round length T expressed as `k·s/X` (the spec's low-rate
    /// guard stretches T to 4·4·s/X, k = 16).
    pub fn tfmcc_round_in_packet_intervals(&self, t0: f64, t1: f64, size: f64) -> f64 {
        let v: Vec<f64> = self
            .rounds
            .iter()
            .filter(|r| r.0 >= t0 && r.0 + r.1 <= t1)
            .filter_map(|r| {
                let x = self.tfmcc_state_at(r.0)?.2 * 1000.0 / 8.0;
                Some(r.1 * x / size)
            })
            .collect();
        if v.is_empty() {
            f64::NAN
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    }

    /// S19: fraction of the completed rounds in [t0, t1) (of this sender) with at least one
    /// new first RTT measurement at a receiver (`times`, sorted), counting only rounds that
    /// started before all `n` receivers were measured.
    pub fn tfmcc_rounds_with_new_rtt(&self, t0: f64, t1: f64, times: &[f64], n: usize) -> f64 {
        let all_at = if times.len() >= n && n > 0 {
            times[n - 1]
        } else {
            f64::INFINITY
        };
        let rounds: Vec<_> = self
            .rounds
            .iter()
            .filter(|r| r.0 >= t0 && r.0 + r.1 <= t1 && r.0 < all_at)
            .collect();
        if rounds.is_empty() {
            return f64::NAN;
        }
        let with = rounds
            .iter()
            .filter(|r| {
                let i = times.partition_point(|&x| x < r.0);
                times.get(i).is_some_and(|&x| x < r.0 + r.1)
            })
            .count();
        with as f64 / rounds.len() as f64
    }
}

/// S19: seconds from `after` until `count` receivers have measured their RTT (`times`,
/// sorted; infinite if never).
pub fn time_to_rtt_count(times: &[f64], after: f64, count: usize) -> f64 {
    match count.checked_sub(1).and_then(|i| times.get(i)) {
        Some(x) => x - after,
        None => f64::INFINITY,
    }
}
