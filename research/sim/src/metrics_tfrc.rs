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

    /// S8: loss events the receiver reported from `after` until the allowed rate is at most
    /// half the rate in force at `after`, counted as the feedbacks whose p rose over the
    /// previous feedback's (after a step up in loss every new loss event raises p: the new
    /// interval is shorter than the one it pushes out; the open interval only lowers p).
    /// This is the unit of "3-8 RTTs to halve under persistent congestion", which assumes one
    /// loss event per RTT. NaN without a rate at `after`, infinite if the rate never halves.
    pub fn tfrc_halving_events(&self, after: f64) -> f64 {
        let Some(i0) = self.tfrc_log.iter().rposition(|e| e.0 <= after) else {
            return f64::NAN;
        };
        let x0 = self.tfrc_log[i0].1;
        let mut events = 0u32;
        for w in self.tfrc_log[i0..].windows(2) {
            if w[1].2 > w[0].2 {
                events += 1;
            }
            if w[1].1 <= x0 / 2.0 {
                return f64::from(events);
            }
        }
        f64::INFINITY
    }

    /// S8: RTTs (the sender's RTT at `after`) from `after` to the first feedback whose p
    /// rose: the loss-detection (3 later packets) plus reporting delay that the RTT count of
    /// `tfrc_halving_rtts` includes before the sender can react at all.
    pub fn tfrc_first_report_rtts(&self, after: f64) -> f64 {
        let Some(i0) = self.tfrc_log.iter().rposition(|e| e.0 <= after) else {
            return f64::NAN;
        };
        let rtt = self.tfrc_log[i0].3;
        self.tfrc_log[i0..]
            .windows(2)
            .find(|w| w[1].2 > w[0].2)
            .map_or(f64::INFINITY, |w| (w[1].0 - after) / rtt)
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

#[cfg(test)]
mod tests {
    use crate::metrics::{MonKind, Monitor, Monitors};

    fn mon(log: &[(f64, f64, f64)]) -> Monitor {
        let mut ms = Monitors::default();
        ms.add("tfrc".into(), "tfrc".into(), MonKind::Tfrc, Vec::new());
        let mut m = ms.list.remove(0);
        m.tfrc_log = log.iter().map(|&(t, x, p)| (t, x, p, 0.1)).collect();
        m
    }

    #[test]
    fn halving_counts_rtts_events_and_report_delay_from_the_step() {
        // Step at 10 s; the first higher p is reported at 10.13 s; p rises at 10.13, 10.3
        // and 10.5; the rate reaches half of 100 at 10.5 (a feedback with an unchanged p
        // at 10.4 is not an event).
        let m = mon(&[
            (9.9, 100.0, 0.01),
            (10.03, 100.0, 0.01),
            (10.13, 90.0, 0.012),
            (10.3, 70.0, 0.02),
            (10.4, 70.0, 0.02),
            (10.5, 50.0, 0.04),
            (10.6, 40.0, 0.05),
        ]);
        assert!((m.tfrc_halving_rtts(10.0) - 5.0).abs() < 1e-9);
        assert_eq!(m.tfrc_halving_events(10.0), 3.0);
        assert!((m.tfrc_first_report_rtts(10.0) - 1.3).abs() < 1e-9);
        // Never halved: infinite; nothing before the step: NaN.
        let m = mon(&[(9.9, 100.0, 0.01), (10.2, 60.0, 0.02)]);
        assert_eq!(m.tfrc_halving_events(10.0), f64::INFINITY);
        assert!(m.tfrc_halving_events(9.0).is_nan());
    }
}
