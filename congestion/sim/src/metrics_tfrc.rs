//! Metrics for the TFRC checks S8 and S9 (`tfrc-tfmcc-pcc.md` §7.2), computed from a TFRC
//! flow's feedback log (`Monitor::tfrc_log`: time, allowed rate X, reported p and the
//! sender's RTT at every feedback the sender handled).

use crate::metrics::Monitor;

impl Monitor {
    fn tfrc_in(&self, t0: f64, t1: f64) -> Vec<(f64, f64, f64, f64)> {
        self.tfrc_log
            .iter()
            .filter(|e| e.0 >= t0 && e.0 <= t1)
            .copied()
            .collect()
    }

    /// S8: coefficient of variation (population sd / mean) of the reported loss event rate p
    /// over the feedbacks in [t0, t1] (NaN without feedback or with p = 0).
    pub fn tfrc_p_cov(&self, t0: f64, t1: f64) -> f64 {
        let p: Vec<f64> = self.tfrc_in(t0, t1).iter().map(|e| e.2).collect();
        if p.is_empty() {
            return f64::NAN;
        }
        let mean = p.iter().sum::<f64>() / p.len() as f64;
        let var = p.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / p.len() as f64;
        var.sqrt() / mean
    }

    /// S8: RTTs (the sender's RTT at `after`) from `after` until the allowed rate is at most
    /// half the rate in force at `after` (infinite if never).
    pub fn tfrc_halving_rtts(&self, after: f64) -> f64 {
        let Some(&(_, x0, _, rtt)) = self.tfrc_log.iter().rev().find(|e| e.0 <= after) else {
            return f64::NAN;
        };
        self.tfrc_log
            .iter()
            .find(|e| e.0 > after && e.1 <= x0 / 2.0)
            .map_or(f64::INFINITY, |e| (e.0 - after) / rtt)
    }

    /// S8: the largest rise of the allowed rate between consecutive feedbacks in [t0, t1], in
    /// packets per RTT (`ΔX·R/s`, R the sender's RTT at the later feedback).
    pub fn tfrc_max_rise_pkts(&self, t0: f64, t1: f64, size: f64) -> f64 {
        self.tfrc_in(t0, t1)
            .windows(2)
            .map(|w| (w[1].1 - w[0].1) * w[1].3 / size)
            .fold(f64::NAN, f64::max)
    }

    /// S9: the steepest increase between consecutive feedbacks in [t0, t1], in packets per RTT
    /// gained per RTT elapsed (`ΔX·R/s / (Δt/R)`).
    pub fn tfrc_max_slope(&self, t0: f64, t1: f64, size: f64) -> f64 {
        self.tfrc_in(t0, t1)
            .windows(2)
            .filter(|w| w[1].0 > w[0].0)
            .map(|w| {
                let r = w[1].3;
                (w[1].1 - w[0].1) * r / size / ((w[1].0 - w[0].0) / r)
            })
            .fold(f64::NAN, f64::max)
    }
}
