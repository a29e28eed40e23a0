//! One-way-delay trend detection (`delay-based.md` §3.4, profile B): a Pathload-style
//! robust test on a window of raw one-way delays.
//!
//! The window of K ≥ 16 samples is split into Γ = ⌊√K⌋ consecutive groups (⌊K/Γ⌋ samples
//! each; the remainder goes to the last group) and the median of each group taken,
//! `m_1..m_Γ`. Then
//!
//! - `PCT = Σ_{k=2..Γ} I(m_k > m_{k−1}) / (Γ − 1)`
//! - `PDT = (m_Γ − m_1) / Σ_{k=2..Γ} |m_k − m_{k−1}|` (0 when the denominator is 0)
//!
//! Increasing if `PCT > 0.66` or `PDT > 0.55`; non-increasing if `PCT < 0.54` and
//! `PDT < 0.45`; otherwise ambiguous. [`TrendDetector`] keeps the previous verdict on an
//! ambiguous window (hysteresis). A constant clock offset between sender and receiver cancels.

/// A trend verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trend {
    /// Delays grow: the path is fed above its capacity.
    Increasing,
    /// No growth.
    NonIncreasing,
    /// Neither test is conclusive.
    Ambiguous,
}

/// Minimum window size for a verdict.
pub const MIN_SAMPLES: usize = 16;

/// The PCT and PDT metrics of a window, `None` if it has fewer than [`MIN_SAMPLES`] samples
/// or any sample is not finite.
pub fn pct_pdt(samples: &[f64]) -> Option<(f64, f64)> {
    let k = samples.len();
    if k < MIN_SAMPLES || samples.iter().any(|x| !x.is_finite()) {
        return None;
    }
    let g = (k as f64).sqrt().floor() as usize;
    let size = k / g;
    let mut medians = Vec::with_capacity(g);
    let mut buf = Vec::with_capacity(size * 2);
    for j in 0..g {
        let end = if j + 1 == g { k } else { (j + 1) * size };
        buf.clear();
        buf.extend_from_slice(&samples[j * size..end]);
        buf.sort_by(|a, b| a.total_cmp(b));
        let n = buf.len();
        let m = if n % 2 == 1 {
            buf[n / 2]
        } else {
            0.5 * (buf[n / 2 - 1] + buf[n / 2])
        };
        medians.push(m);
    }
    let mut inc = 0usize;
    let mut absum = 0.0;
    for w in medians.windows(2) {
        if w[1] > w[0] {
            inc += 1;
        }
        absum += (w[1] - w[0]).abs();
    }
    let pct = inc as f64 / (g - 1) as f64;
    let pdt = if absum > 0.0 {
        (medians[g - 1] - medians[0]) / absum
    } else {
        0.0
    };
    Some((pct, pdt))
}

/// Verdict of one window (no hysteresis); `Ambiguous` if the window is too short.
pub fn trend(samples: &[f64]) -> Trend {
    match pct_pdt(samples) {
        None => Trend::Ambiguous,
        Some((pct, pdt)) if pct > 0.66 || pdt > 0.55 => Trend::Increasing,
        Some((pct, pdt)) if pct < 0.54 && pdt < 0.45 => Trend::NonIncreasing,
        Some(_) => Trend::Ambiguous,
    }
}

/// Trend test with hysteresis: an ambiguous window keeps the previous verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrendDetector {
    last: Trend,
}

impl Default for TrendDetector {
    fn default() -> Self {
        TrendDetector {
            last: Trend::Ambiguous,
        }
    }
}

impl TrendDetector {
    /// Evaluates a window and returns the (possibly held) verdict.
    pub fn evaluate(&mut self, samples: &[f64]) -> Trend {
        let t = trend(samples);
        if t != Trend::Ambiguous {
            self.last = t;
        }
        self.last
    }

    /// The current verdict.
    pub fn verdict(&self) -> Trend {
        self.last
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-noise in [-0.5, 0.5).
    fn noise(i: usize) -> f64 {
        let x = (i as u64)
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((x >> 33) as f64 / (1u64 << 31) as f64) - 0.5
    }

    #[test]
    fn ramps_and_flat() {
        let up: Vec<f64> = (0..64).map(|i| 10.0 + 0.5 * i as f64 + noise(i)).collect();
        assert_eq!(trend(&up), Trend::Increasing);
        let down: Vec<f64> = (0..64).map(|i| 50.0 - 0.5 * i as f64 + noise(i)).collect();
        assert_eq!(trend(&down), Trend::NonIncreasing);
        let flat = vec![5.0; 64];
        assert_eq!(pct_pdt(&flat), Some((0.0, 0.0)));
        assert_eq!(trend(&flat), Trend::NonIncreasing);
        assert_eq!(trend(&up[..15]), Trend::Ambiguous);
        let (pct, pdt) = pct_pdt(&(0..16).map(|i| i as f64).collect::<Vec<_>>()).unwrap();
        assert_eq!((pct, pdt), (1.0, 1.0));
    }

    #[test]
    fn hysteresis_holds_verdict() {
        let mut d = TrendDetector::default();
        let up: Vec<f64> = (0..25).map(|i| i as f64).collect();
        assert_eq!(d.evaluate(&up), Trend::Increasing);
        // Γ = 5 groups with medians 0, 2, 1, 3, 2.5: PCT = 0.5, PDT = 2.5/5.5 = 0.4545,
        // neither increasing nor non-increasing.
        let meds = [0.0, 2.0, 1.0, 3.0, 2.5];
        let amb: Vec<f64> = meds.iter().flat_map(|m| [*m; 5]).collect();
        assert_eq!(trend(&amb), Trend::Ambiguous);
        assert_eq!(d.evaluate(&amb), Trend::Increasing);
        assert_eq!(d.evaluate(&[1.0; 3]), Trend::Increasing);
    }
}
