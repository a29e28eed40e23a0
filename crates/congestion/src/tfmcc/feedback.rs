//! Exponential feedback timers (dissertation Algorithm 3, eq. 6.5) and class-based
//! cancellation (Algorithm 5 with q, run as a maximum search on 1/rate).

/// A small deterministic PRNG (SplitMix64): controllers are sans-IO and reproducible, so the
/// randomness is seeded, never read from the OS.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }
    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in (0, 1].
    pub fn unit_open0(&mut self) -> f64 {
        ((self.next_u64() >> 11) as f64 + 1.0) / (1u64 << 53) as f64
    }
}

/// The feedback delay `t = T max(0, 1 + ln x / ln N)` for `x` in (0, 1]; with the optional
/// additive bias (eq. 7.2) `t = gamma r T + (1-gamma) T max(0, 1 + log_N x)`, `r` the
/// receiver's rate over the sending rate clipped to [0, 1].
pub fn feedback_delay(t_round: f64, n_upper: f64, x: f64, bias: Option<(f64, f64)>) -> f64 {
    let n = n_upper.max(2.0);
    let x = x.clamp(f64::MIN_POSITIVE, 1.0);
    let expo = (1.0 + x.ln() / n.ln()).max(0.0);
    match bias {
        None => t_round * expo,
        Some((gamma, r)) => {
            let g = gamma.clamp(0.0, 1.0);
            g * r.clamp(0.0, 1.0) * t_round + (1.0 - g) * t_round * expo
        }
    }
}

/// Inputs of the cancellation rule, all from the receiver's point of view.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CancelInputs {
    /// Current calculated rate `R_calc`, bytes/s.
    pub r_calc: f64,
    /// Rate at the start of the round `R0` (`X_fbr`), bytes/s.
    pub r0: f64,
    /// Suppression rate in the newest data packet, bytes/s (infinite = none).
    pub x_supp: f64,
    /// Receiver's RTT, seconds.
    pub rtt: f64,
    /// `R_max` in the newest data packet, seconds.
    pub max_rtt: f64,
    /// Sender is in slow start.
    pub slow_start: bool,
    /// The receiver has seen a loss.
    pub have_loss: bool,
    /// `x_supp` came from a report with `have_loss`.
    pub supp_from_loss: bool,
}

/// True if a pending feedback timer must be cancelled:
/// `max(R_calc, R0) > (1-q) x_supp`, except that a receiver whose RTT exceeds `R_max` always
/// reports, and in slow start a receiver that has seen loss is only cancelled by a suppression
/// rate that came from a loss report.
pub fn cancel_feedback(i: &CancelInputs, q: f64) -> bool {
    cancel_feedback_lazy(i, q, || i.r_calc)
}

/// [`cancel_feedback`] with `R_calc` (the equation: two square roots and a division) computed
/// only when the answer depends on it; `i.r_calc` is not read. Same result for every input:
/// the early returns do not read `R_calc`, and `R_calc > t || R0 > t` equals
/// `R0 > t || R_calc > t` (two side-effect-free comparisons). A simulated population of
/// 10,000 receivers holds a pending timer on a fifth of its packets, and the suppression
/// rate is "none" on nine tenths of those.
pub fn cancel_feedback_lazy(i: &CancelInputs, q: f64, r_calc: impl FnOnce() -> f64) -> bool {
    if !i.x_supp.is_finite() {
        return false;
    }
    if i.rtt > i.max_rtt {
        return false;
    }
    if i.slow_start && i.have_loss && !i.supp_from_loss {
        return false;
    }
    let threshold = (1.0 - q) * i.x_supp;
    i.r0 > threshold || r_calc() > threshold
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lazy rule gives the eager rule's answer on a grid of inputs (NaN and infinite
    /// rates included), and reads `R_calc` only when the answer depends on it.
    #[test]
    fn lazy_cancellation_equals_eager() {
        let rates = [
            0.0,
            50.0,
            89.0,
            90.0,
            91.0,
            100.0,
            1e9,
            f64::INFINITY,
            f64::NAN,
        ];
        let mut calls = 0;
        let mut cases = 0;
        for &r_calc in &rates {
            for &r0 in &rates {
                for &x_supp in &rates {
                    for (rtt, max_rtt) in [(0.0, 0.1), (0.2, 0.1), (0.1, 0.1)] {
                        for bits in 0..8u8 {
                            let i = CancelInputs {
                                r_calc,
                                r0,
                                x_supp,
                                rtt,
                                max_rtt,
                                slow_start: bits & 1 != 0,
                                have_loss: bits & 2 != 0,
                                supp_from_loss: bits & 4 != 0,
                            };
                            let mut called = false;
                            let lazy = cancel_feedback_lazy(&i, 0.1, || {
                                called = true;
                                r_calc
                            });
                            assert_eq!(lazy, cancel_feedback(&i, 0.1), "{i:?}");
                            // Not read when x_supp is none, R0 alone cancels, or an early
                            // rule decides.
                            if !x_supp.is_finite() || r0 > 0.9 * x_supp || rtt > max_rtt {
                                assert!(!called, "{i:?}");
                            }
                            calls += usize::from(called);
                            cases += 1;
                        }
                    }
                }
            }
        }
        assert!(calls > 0 && calls < cases, "{calls} of {cases}");
    }

    /// U9: 10^6 draws, N = 10^4, T = 1: point mass 1e-4 at 0 and a KS test against
    /// F(t) = N^(t/T - 1) on (0, T].
    #[test]
    fn u9_exponential_timer_distribution() {
        let mut rng = SplitMix64::new(42);
        let n = 1_000_000usize;
        let mut ts: Vec<f64> = (0..n)
            .map(|_| feedback_delay(1.0, 1e4, rng.unit_open0(), None))
            .collect();
        let zeros = ts.iter().filter(|&&t| t == 0.0).count() as f64 / n as f64;
        ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let mut d: f64 = 0.0;
        for (i, &t) in ts.iter().enumerate() {
            // F includes the point mass: F(t) = N^(t-1) for t in [0,1].
            let f = 1e4f64.powf(t - 1.0);
            let lo = i as f64 / n as f64;
            let hi = (i + 1) as f64 / n as f64;
            d = d.max((f - lo).abs()).max((hi - f).abs());
        }
        // Critical value at alpha = 0.01: 1.628 / sqrt(n).
        let crit = 1.628 / (n as f64).sqrt();
        let in_range = ts.iter().all(|&t| (0.0..=1.0).contains(&t));
        testkit::record(
            "tfmcc/U9",
            &format!(
                "10^6 draws, N = 10^4, T = 1: P(t=0) = {zeros:.2e} (want 1e-4 ± 3e-5); \
                 KS D = {d:.2e} < {crit:.2e} (alpha 0.01) against F(t) = N^(t/T-1); \
                 all draws in [0, T]: {in_range}"
            ),
            Some((zeros - 1e-4).abs() <= 3e-5 && d < crit && in_range),
            "cargo test --release -p layercast-congestion --lib u9_exponential_timer_distribution",
        );
        assert!((zeros - 1e-4).abs() <= 3e-5, "P(t=0) = {zeros}");
        assert!(d < crit, "KS D = {d}");
        assert!(in_range);
    }

    fn inputs(r_calc: f64, r0: f64, x_supp: f64) -> CancelInputs {
        CancelInputs {
            r_calc,
            r0,
            x_supp,
            rtt: 0.1,
            max_rtt: 0.2,
            slow_start: false,
            have_loss: true,
            supp_from_loss: true,
        }
    }

    /// U10: truth table of the cancellation predicate.
    #[test]
    fn u10_cancellation_truth_table() {
        let q = 0.1;
        // (r_calc, r0, x_supp) -> cancel?
        let rows = [
            (100.0, 100.0, f64::INFINITY, false),
            (95.0, 95.0, 100.0, true),  // 95 > 90
            (90.0, 90.0, 100.0, false), // not strictly above 0.9 x_supp
            (85.0, 85.0, 100.0, false),
            (85.0, 95.0, 100.0, true), // R0 rule: rate fell during the round
            (95.0, 85.0, 100.0, true),
            (200.0, 50.0, 100.0, true),
        ];
        let mut cases: Vec<(String, bool, bool)> = rows
            .iter()
            .map(|&(rc, r0, xs, want)| {
                (
                    format!("R_calc {rc}, R0 {r0}, X_supp {xs}"),
                    cancel_feedback(&inputs(rc, r0, xs), q),
                    want,
                )
            })
            .collect();
        // RTT above R_max: never cancelled.
        let mut i = inputs(500.0, 500.0, 100.0);
        i.rtt = 0.3;
        cases.push(("rtt > max_RTT".into(), cancel_feedback(&i, q), false));
        // Slow start: a loss-seeing receiver ignores suppression from loss-free reports...
        let mut i = inputs(500.0, 500.0, 100.0);
        i.slow_start = true;
        i.supp_from_loss = false;
        cases.push((
            "slow start, loss, X_supp not from loss".into(),
            cancel_feedback(&i, q),
            false,
        ));
        // ...but not from a loss report, and a loss-free receiver is cancelled by either.
        i.supp_from_loss = true;
        cases.push((
            "slow start, loss, X_supp from loss".into(),
            cancel_feedback(&i, q),
            true,
        ));
        i.supp_from_loss = false;
        i.have_loss = false;
        cases.push((
            "slow start, no loss, X_supp not from loss".into(),
            cancel_feedback(&i, q),
            true,
        ));
        let wrong: Vec<&String> = cases.iter().filter(|c| c.1 != c.2).map(|c| &c.0).collect();
        testkit::record(
            "tfmcc/U10",
            &format!(
                "{} of {} truth-table rows as specified (q = 0.1: cancel iff max(R_calc, R0) > \
                 0.9 X_supp; rtt > max_RTT never cancelled; slow-start loss rule); wrong: {wrong:?}",
                cases.len() - wrong.len(),
                cases.len()
            ),
            Some(wrong.is_empty()),
            "cargo test --release -p layercast-congestion --lib u10_cancellation_truth_table",
        );
        assert!(wrong.is_empty(), "{wrong:?}");
    }

    #[test]
    fn bias_moves_low_rates_earlier() {
        let t_lo = feedback_delay(1.0, 1e4, 0.5, Some((0.25, 0.1)));
        let t_hi = feedback_delay(1.0, 1e4, 0.5, Some((0.25, 0.9)));
        assert!(t_lo < t_hi);
        assert!((t_hi - t_lo - 0.25 * 0.8).abs() < 1e-12);
    }
}
