//! Metrics for PLM's simulator checks (`plm.md` §9.A S0, S0b, S2, S5, S6) that the generic
//! set does not cover: packet-pair samples logged by the `sim-pp-probe-N` controller
//! (`agents::local_controllers`), layer events against change events (`plm.md` §6.4), the
//! spread of a time-to-level across receivers, and the largest deviation from the mean.

use crate::metrics::Monitor;

/// Reason of the decision `sim-pp-probe-N` logs for every completed bunch sample; the
/// sample (bit/s) is its input `rate_bps`.
pub const PP_SAMPLE: &str = "pp-sample";

/// Bunch samples (kbit/s) logged in [t0, t1].
pub fn pp_samples_kbps(mon: &Monitor, t0: f64, t1: f64) -> Vec<f64> {
    mon.decisions
        .iter()
        .filter(|d| d.reason == PP_SAMPLE)
        .filter(|d| {
            let t = d.at.as_secs_f64();
            t >= t0 && t <= t1
        })
        .filter_map(|d| d.inputs.iter().find(|x| x.0 == "rate_bps"))
        .map(|x| x.1 / 1000.0)
        .collect()
}

/// Largest |x / expect − 1| over the samples (NaN if there are none).
pub fn max_rel_err(samples: &[f64], expect: f64) -> f64 {
    if samples.is_empty() || expect.is_nan() || expect <= 0.0 {
        return f64::NAN;
    }
    samples
        .iter()
        .map(|x| (x / expect - 1.0).abs())
        .fold(0.0, f64::max)
}

/// Share of the samples within 1% of `value` (NaN if there are none): S0b's "3/8 B" and "B".
pub fn fraction_near(samples: &[f64], value: f64) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    samples
        .iter()
        .filter(|x| (*x / value - 1.0).abs() <= 0.01)
        .count() as f64
        / samples.len() as f64
}

/// Share of consecutive sample pairs whose larger is more than twice the smaller (S0b: the
/// samples alternate between 3/8 B and B; NaN with fewer than two samples).
pub fn switch_fraction(samples: &[f64]) -> f64 {
    if samples.len() < 2 {
        return f64::NAN;
    }
    samples
        .windows(2)
        .filter(|w| w[0].max(w[1]) > 2.0 * w[0].min(w[1]))
        .count() as f64
        / (samples.len() - 1) as f64
}

/// Layer events (a 2 → 5 move counts 3) strictly inside (t0, t1], from the level trace.
pub fn layer_events_in(mon: &Monitor, t0: f64, t1: f64) -> u64 {
    let mut prev = mon.level_at(t0);
    let mut n = 0u64;
    for &(at, k) in &mon.levels {
        if at > t0 && at <= t1 && k != prev {
            n += u64::from(k.abs_diff(prev));
            prev = k;
        }
    }
    n
}

/// The largest number of layers moved by one change event inside (t0, t1] (0 if none).
pub fn max_layer_step(mon: &Monitor, t0: f64, t1: f64) -> u64 {
    let mut prev = mon.level_at(t0);
    let mut m = 0u64;
    for &(at, k) in &mon.levels {
        if at > t0 && at <= t1 && k != prev {
            m = m.max(u64::from(k.abs_diff(prev)));
            prev = k;
        }
    }
    m
}

/// max |x_i − mean| / mean (`plm.md` §6.4 inter-PLM fairness: "within ±5% of the mean").
pub fn max_rel_dev_from_mean(x: &[f64]) -> f64 {
    if x.is_empty() {
        return f64::NAN;
    }
    let mean = x.iter().sum::<f64>() / x.len() as f64;
    if mean <= 0.0 {
        return f64::NAN;
    }
    x.iter().map(|v| (v / mean - 1.0).abs()).fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pair_sample_shapes() {
        let s = [37.5, 100.0, 37.6, 99.5, 100.2];
        assert!((fraction_near(&s, 37.5) - 0.4).abs() < 1e-12);
        assert!((fraction_near(&s, 100.0) - 0.6).abs() < 1e-12);
        assert!((switch_fraction(&s) - 0.75).abs() < 1e-12);
        assert!((max_rel_err(&[99.0, 101.5], 100.0) - 0.015).abs() < 1e-12);
        assert!(max_rel_err(&[], 1.0).is_nan());
        assert!((max_rel_dev_from_mean(&[90.0, 100.0, 110.0]) - 0.1).abs() < 1e-12);
    }
}
