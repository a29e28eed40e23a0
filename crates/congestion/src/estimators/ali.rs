//! Average Loss Interval (ALI) estimator with optional history discounting
//! (RFC 5348 §5.4–5.5; TFMCC dissertation §1.4 of `tfrc-tfmcc-pcc.md`).
//!
//! General on purpose: it works on interval lengths (packets between the starts of
//! consecutive loss events) and knows nothing about how loss events are found (RTT
//! aggregation, NDUPACK) — the TFRC/TFMCC receivers own that. The history length `n`, the
//! weights and the discount floor are parameters:
//!
//! - RFC 5348: `n = 8`, discount floor (THRESHOLD) 0.25.
//! - TFMCC dissertation: `n = 8`, floor 0.5 (the vectors 146.2 and 357.1 of the spec use it).
//!
//! Notation as RFC 5348: `I_0` is the open interval (since the latest loss event), `I_1..I_n`
//! the closed ones, newest first; `DF_i` the sticky per-interval discount factors; `DF` the
//! general discount factor, a function of `I_0` and the history.

use std::collections::VecDeque;

/// The ALI estimator.
#[derive(Clone, Debug, PartialEq)]
pub struct AverageLossInterval {
    weights: Vec<f64>,
    /// Closed intervals, newest first, with their discount factors `DF_i`.
    hist: VecDeque<(f64, f64)>,
    open: f64,
    discount_floor: Option<f64>,
}

/// RFC 5348 §5.4 weights for history length `n`: `1` for `i < n/2`, else `2(n−i)/(n+2)`.
pub fn weights(n: usize) -> Vec<f64> {
    (0..n)
        .map(|i| {
            if 2 * i < n {
                1.0
            } else {
                2.0 * (n - i) as f64 / (n as f64 + 2.0)
            }
        })
        .collect()
}

impl AverageLossInterval {
    /// `n` intervals of history (≥ 1; RFC 5348 recommends 8). `discount_floor`: `None` turns
    /// history discounting off; `Some(t)` turns it on with floor `t` (0.25 RFC, 0.5 TFMCC).
    pub fn new(n: usize, discount_floor: Option<f64>) -> AverageLossInterval {
        let n = n.max(1);
        AverageLossInterval {
            weights: weights(n),
            hist: VecDeque::with_capacity(n + 1),
            open: 0.0,
            discount_floor,
        }
    }

    /// The weights `w_0..w_{n-1}`.
    pub fn weights(&self) -> &[f64] {
        &self.weights
    }

    /// Closed intervals, newest first.
    pub fn intervals(&self) -> impl Iterator<Item = f64> + '_ {
        self.hist.iter().map(|h| h.0)
    }

    /// Sticky discount factors `DF_1..`, newest first.
    pub fn discount_factors(&self) -> impl Iterator<Item = f64> + '_ {
        self.hist.iter().map(|h| h.1)
    }

    /// Sets the open interval `I_0` (packets since the latest loss event started).
    pub fn set_open(&mut self, i0: f64) {
        self.open = i0.max(0.0);
    }

    /// The open interval `I_0`.
    pub fn open(&self) -> f64 {
        self.open
    }

    /// Whether any loss interval exists (RFC 5348: no average before the first loss).
    pub fn has_history(&self) -> bool {
        !self.hist.is_empty()
    }

    /// Seeds or extends the history with a closed interval without touching `I_0` or the
    /// discount factors (e.g. the synthetic first interval of RFC 5348 §6.3.1).
    pub fn push_interval(&mut self, len: f64) {
        self.hist.push_front((len.max(0.0), 1.0));
        self.hist.truncate(self.weights.len());
    }

    /// A new loss event closed the open interval at length `i0_final`: the general discount
    /// factor at that moment is folded into the sticky factors (never raising one), the
    /// history shifts, `I_0` restarts at 0.
    pub fn on_loss_event(&mut self, i0_final: f64) {
        self.set_open(i0_final);
        let df = self.general_discount();
        for h in self.hist.iter_mut() {
            h.1 *= df;
        }
        self.hist.push_front((self.open, 1.0));
        self.hist.truncate(self.weights.len());
        self.open = 0.0;
    }

    /// Weighted mean of the closed intervals with their sticky factors (`I_mean` of §5.5).
    fn closed_mean(&self) -> Option<f64> {
        let (mut it, mut wt) = (0.0, 0.0);
        for (i, (len, df)) in self.hist.iter().enumerate() {
            let w = self.weights[i] * df;
            it += len * w;
            wt += w;
        }
        (wt > 0.0).then(|| it / wt)
    }

    /// The general discount factor `DF` for the current `I_0` (1 without discounting).
    pub fn general_discount(&self) -> f64 {
        let Some(floor) = self.discount_floor else {
            return 1.0;
        };
        match self.closed_mean() {
            Some(m) if self.open > 2.0 * m && self.open > 0.0 => (2.0 * m / self.open).max(floor),
            _ => 1.0,
        }
    }

    /// The average loss interval `I_mean`, `None` before the first loss interval.
    pub fn mean(&self) -> Option<f64> {
        let k = self.hist.len();
        if k == 0 {
            return None;
        }
        let df = self.general_discount();
        let w = &self.weights;
        // With the open interval: I_0..I_{k-1} with w_0..w_{k-1}; older ones discounted by DF.
        let (mut i0, mut w0) = (self.open * w[0], w[0]);
        for (wi, (len, dfi)) in w.iter().skip(1).zip(self.hist.iter()).take(k - 1) {
            i0 += len * wi * dfi * df;
            w0 += wi * dfi * df;
        }
        // Without it: I_1..I_k with w_0..w_{k-1}.
        let (mut i1, mut w1) = (0.0, 0.0);
        for (wi, (len, dfi)) in w.iter().zip(self.hist.iter()) {
            i1 += len * wi * dfi;
            w1 += wi * dfi;
        }
        let a = if w0 > 0.0 { i0 / w0 } else { 0.0 };
        let b = if w1 > 0.0 { i1 / w1 } else { 0.0 };
        Some(a.max(b))
    }

    /// The loss event rate `p = 1 / I_mean`, `None` before the first loss interval.
    pub fn loss_event_rate(&self) -> Option<f64> {
        self.mean().filter(|m| *m > 0.0).map(|m| 1.0 / m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist100(floor: Option<f64>) -> AverageLossInterval {
        let mut a = AverageLossInterval::new(8, floor);
        for _ in 0..8 {
            a.push_interval(100.0);
        }
        a
    }

    #[test]
    fn rfc_weights() {
        assert_eq!(weights(8), vec![1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2]);
    }

    #[test]
    fn spec_vectors_u3() {
        // tfrc-tfmcc-pcc.md §1.4: 100 / 133.3 / 146.2 / 250 / 357.1.
        let mut a = hist100(None);
        a.set_open(50.0);
        assert!((a.mean().unwrap() - 100.0).abs() < 1e-9);
        assert!((a.loss_event_rate().unwrap() - 0.01).abs() < 1e-12);
        a.set_open(300.0);
        assert!((a.mean().unwrap() - 800.0 / 6.0).abs() < 1e-9);
        a.set_open(1000.0);
        assert!((a.mean().unwrap() - 250.0).abs() < 1e-9);
        let mut d = hist100(Some(0.5));
        d.set_open(300.0);
        assert!((d.mean().unwrap() - 146.153_846).abs() < 1e-3);
        d.set_open(1000.0);
        assert!((d.mean().unwrap() - 1250.0 / 3.5).abs() < 1e-9);
        // RFC 5348's floor of 0.25: (1000 + 0.25*500)/(1 + 0.25*5) = 500.
        let mut r = hist100(Some(0.25));
        r.set_open(1000.0);
        assert!((r.mean().unwrap() - 500.0).abs() < 1e-9);
    }

    #[test]
    fn periodic_loss_u4() {
        let mut a = AverageLossInterval::new(8, Some(0.5));
        for _ in 0..20 {
            for k in 1..=100 {
                a.set_open(k as f64);
                let _ = a.mean();
            }
            a.on_loss_event(100.0);
        }
        assert!((a.loss_event_rate().unwrap() - 0.01).abs() < 1e-9);
    }

    #[test]
    fn discount_factors_stick_u6() {
        let mut a = hist100(Some(0.5));
        a.on_loss_event(1000.0); // DF = 0.5 folded into the old intervals
        let dfs: Vec<f64> = a.discount_factors().collect();
        assert_eq!(dfs[0], 1.0);
        assert!(dfs[1..].iter().all(|d| (*d - 0.5).abs() < 1e-12));
        // A short next interval (DF = 1) never raises them again.
        a.on_loss_event(10.0);
        let dfs2: Vec<f64> = a.discount_factors().collect();
        assert_eq!(&dfs2[0..2], &[1.0, 1.0]);
        assert!(dfs2[2..].iter().all(|d| *d <= 0.5 + 1e-12));
        assert_eq!(a.intervals().count(), 8);
    }

    #[test]
    fn fewer_intervals_use_first_weights() {
        let mut a = AverageLossInterval::new(8, None);
        assert_eq!(a.mean(), None);
        a.push_interval(40.0);
        a.set_open(10.0);
        assert!((a.mean().unwrap() - 40.0).abs() < 1e-12);
        a.set_open(60.0);
        assert!((a.mean().unwrap() - 60.0).abs() < 1e-12);
    }
}
