//! Metrics for the delay-based scheme's acceptance checks (`delay-based.md` §10.A DS3, DS5,
//! DS6, DS9), computed from the per-epoch log of the `delay-trace` controller
//! (`agents::dlm_trace`) and from link probes' queueing-delay samples.
//!
//! All times are seconds of virtual time; delays are reported in milliseconds.

use crate::agents::dlm_trace::EPOCH;
use crate::metrics::Monitor;
use congestion::Decision;

/// One epoch as logged by `delay-trace`.
#[derive(Clone, Copy, Debug)]
pub struct Epoch {
    pub at: f64,
    pub level: u8,
    pub daowd: f64,
    pub d: [f64; 3],
    pub zone: u8,
    pub loss: f64,
    pub trend_d: f64,
    pub slow_start: bool,
}

fn input(d: &Decision, name: &str) -> f64 {
    d.inputs
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(f64::NAN, |x| x.1)
}

/// The `q`-quantile (nearest rank) of `v` (NaN if empty).
pub fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let i = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1;
    v[i]
}

impl Monitor {
    /// The epochs `delay-trace` logged in [t0, t1].
    pub fn dlm_epochs(&self, t0: f64, t1: f64) -> Vec<Epoch> {
        self.decisions
            .iter()
            .filter(|d| d.reason == EPOCH)
            .map(|d| Epoch {
                at: d.at.as_secs_f64(),
                level: d.to_layers,
                daowd: input(d, "daowd"),
                d: [input(d, "d1"), input(d, "d2"), input(d, "d3")],
                zone: input(d, "zone") as u8,
                loss: input(d, "loss"),
                trend_d: input(d, "trend_d"),
                slow_start: input(d, "slow_start") > 0.5,
            })
            .filter(|e| e.at >= t0 && e.at <= t1)
            .collect()
    }

    /// Mean of threshold `d_{k+1}` (k = 0, 1, 2) over the epochs in [t0, t1], ms.
    pub fn dlm_threshold_ms(&self, k: usize, t0: f64, t1: f64) -> f64 {
        let e = self.dlm_epochs(t0, t1);
        if e.is_empty() {
            return f64::NAN;
        }
        1e3 * e.iter().map(|x| x.d[k]).sum::<f64>() / e.len() as f64
    }

    /// Queueing-delay samples of a link probe in [t0, t1], ms.
    pub fn queue_delays_ms(&self, t0: f64, t1: f64) -> Vec<f64> {
        self.queue_delay_ms
            .iter()
            .filter(|(t, _)| *t >= t0 && *t <= t1)
            .map(|x| x.1)
            .collect()
    }

    /// DS5: epochs in [t0, t1] classified Zone 3 with loss while `daowd ≤ d1` and the delay
    /// trend not increasing, i.e. Zone 3 caused by loss alone (the scheme must never do this).
    pub fn dlm_loss_zone3(&self, t0: f64, t1: f64) -> f64 {
        self.dlm_epochs(t0, t1)
            .iter()
            .filter(|e| e.zone == 3 && e.loss > 0.0 && e.daowd <= e.d[0] && e.trend_d != 1.0)
            .count() as f64
    }

    /// DS5: level reductions in [t0, t1] taken while the logged `R_TCP` was at least the
    /// cumulative rate held before the reduction (a reduction not caused by the TCP cap).
    pub fn dlm_leaves_above_rtcp(&self, t0: f64, t1: f64) -> f64 {
        self.decisions
            .iter()
            .filter(|d| d.reason != EPOCH && d.to_layers < d.from_layers)
            .filter(|d| (t0..=t1).contains(&d.at.as_secs_f64()))
            .filter(|d| {
                let r_tcp = input(d, "r_tcp");
                // No epoch yet (no r_tcp input) or R_TCP still +inf: not caused by R_TCP.
                r_tcp.is_nan() || r_tcp >= 1e3 * self.rate_of(d.from_layers)
            })
            .count() as f64
    }

    /// The slow-start joins: the initial `start` join and every `slow-start-join`, as (time,
    /// level after, logged `deaf_until` of the previous join).
    fn ss_joins(&self) -> Vec<(f64, u8, f64)> {
        self.decisions
            .iter()
            .filter(|d| d.reason == "start" || d.reason == "slow-start-join")
            .map(|d| (d.at.as_secs_f64(), d.to_layers, input(d, "deaf_until")))
            .collect()
    }

    /// DS6: the largest relative deviation of the spacing of successive slow-start joins
    /// from the interval `i_s` (0 with fewer than two joins).
    pub fn dlm_ss_interval_dev(&self, i_s: f64) -> f64 {
        self.ss_joins()
            .windows(2)
            .map(|w| ((w[1].0 - w[0].0) - i_s).abs() / i_s)
            .fold(0.0, f64::max)
    }

    /// DS6: the largest relative deviation of a deaf period (the `deaf_until` the controller
    /// reports at the next join, minus the join's time) from `I·B_0/B_i` (eq. 6), over the
    /// slow-start joins after the first (the `start` join has no deaf period).
    pub fn dlm_ss_deaf_dev(&self, i_s: f64) -> f64 {
        let b0 = self.rate_of(1);
        let j = self.ss_joins();
        j.windows(2)
            .skip(1)
            .map(|w| {
                let expect = i_s * b0 / self.rate_of(w[0].1);
                ((w[1].2 - w[0].0) - expect).abs() / expect
            })
            .fold(0.0, f64::max)
    }

    /// DS6: epochs from the first slow-start epoch with a Zone-3 or loss verdict that ends
    /// after the current deaf period (`I·B_0/B_i` after the last slow-start join) to the
    /// slow-start exit (0 = the exit came in that same epoch; the check wants ≤ 1). 0 when slow
    /// start ended before any such event; infinite when it never ended after one.
    pub fn dlm_ss_exit_epochs(&self, i_s: f64) -> f64 {
        let b0 = self.rate_of(1);
        let joins = self.ss_joins();
        let exit = self
            .decisions
            .iter()
            .find(|d| d.reason.starts_with("slow-start-exit"))
            .map(|d| d.at.as_secs_f64());
        let epochs = self.dlm_epochs(0.0, f64::INFINITY);
        let deaf_end = |t: f64| {
            joins
                .iter()
                .rfind(|j| j.0 <= t)
                .map_or(0.0, |j| j.0 + i_s * b0 / self.rate_of(j.1))
        };
        let first = epochs
            .iter()
            .position(|e| e.slow_start && (e.zone == 3 || e.loss > 0.0) && e.at >= deaf_end(e.at));
        match (first, exit) {
            (None, _) => 0.0,
            (Some(i), Some(x)) if x < epochs[i].at => 0.0,
            (Some(i), Some(x)) => epochs[i..].iter().filter(|e| e.at <= x).count() as f64 - 1.0,
            (Some(_), None) => f64::INFINITY,
        }
    }
}
