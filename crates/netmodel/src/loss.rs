//! Loss on the wire: independent (Bernoulli) or bursty (Gilbert-Elliott), drawn from the
//! crate's seeded [`Rng`].
//!
//! Loss is decided per packet after it has been serialised (it used the link, then got lost on
//! the wire), so a lossy link still paces what follows exactly as a clean one would.

use crate::rng::Rng;
use serde::{Deserialize, Serialize};

/// How packets get lost on the wire.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Default)]
#[serde(tag = "model", rename_all = "snake_case")]
pub enum LossModel {
    /// No loss.
    #[default]
    None,
    /// Independent loss with probability `p` per packet.
    Bernoulli {
        /// Loss probability in [0, 1].
        p: f64,
    },
    /// Gilbert-Elliott two-state Markov chain, stepped once per packet: from Good to Bad with
    /// probability `p`, from Bad to Good with probability `r`; a packet is lost with probability
    /// `loss_good` in Good and `loss_bad` in Bad. Mean loss =
    /// (r·loss_good + p·loss_bad) / (p + r); mean burst length (loss_bad = 1) = 1/r.
    Gilbert {
        /// P(Good -> Bad) per packet.
        p: f64,
        /// P(Bad -> Good) per packet.
        r: f64,
        /// Loss probability in the Good state.
        #[serde(default)]
        loss_good: f64,
        /// Loss probability in the Bad state.
        #[serde(default = "one")]
        loss_bad: f64,
    },
}

fn one() -> f64 {
    1.0
}

impl LossModel {
    /// Checks that every probability is in [0, 1].
    pub fn validate(&self) -> Result<(), String> {
        let ok = |x: f64| (0.0..=1.0).contains(&x);
        let good = match *self {
            LossModel::None => true,
            LossModel::Bernoulli { p } => ok(p),
            LossModel::Gilbert {
                p,
                r,
                loss_good,
                loss_bad,
            } => ok(p) && ok(r) && ok(loss_good) && ok(loss_bad),
        };
        if good {
            Ok(())
        } else {
            Err(format!("loss probabilities must be in [0, 1]: {self:?}"))
        }
    }

    /// The long-run mean loss probability.
    pub fn mean(&self) -> f64 {
        match *self {
            LossModel::None => 0.0,
            LossModel::Bernoulli { p } => p,
            LossModel::Gilbert {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                if p + r == 0.0 {
                    loss_good
                } else {
                    (r * loss_good + p * loss_bad) / (p + r)
                }
            }
        }
    }
}

/// The state of a loss process.
#[derive(Clone, Debug, Default)]
pub struct LossState {
    /// In the Gilbert Bad state.
    pub bad: bool,
}

impl LossState {
    /// Decides whether the next packet is lost, stepping the chain.
    pub fn lose(&mut self, model: &LossModel, rng: &mut Rng) -> bool {
        match *model {
            LossModel::None => false,
            LossModel::Bernoulli { p } => p > 0.0 && rng.f64() < p,
            LossModel::Gilbert {
                p,
                r,
                loss_good,
                loss_bad,
            } => {
                // Step first, then draw in the new state: the chain's stationary law then holds
                // for the packets themselves.
                let u = rng.f64();
                self.bad = if self.bad { u >= r } else { u < p };
                let pl = if self.bad { loss_bad } else { loss_good };
                pl > 0.0 && rng.f64() < pl
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(model: &LossModel, n: usize, seed: u64) -> (f64, f64) {
        let mut rng = Rng::new(seed);
        let mut st = LossState::default();
        let mut lost = 0usize;
        let mut bursts = 0usize;
        let mut prev = false;
        for _ in 0..n {
            let l = st.lose(model, &mut rng);
            if l {
                lost += 1;
                if !prev {
                    bursts += 1;
                }
            }
            prev = l;
        }
        let mean_burst = if bursts == 0 {
            0.0
        } else {
            lost as f64 / bursts as f64
        };
        (lost as f64 / n as f64, mean_burst)
    }

    #[test]
    fn bernoulli_rate_matches() {
        let (r, _) = rate(&LossModel::Bernoulli { p: 0.05 }, 200_000, 7);
        // sigma = sqrt(.05*.95/2e5) = 4.9e-4; 4 sigma
        assert!((r - 0.05).abs() < 0.002, "{r}");
        assert_eq!(rate(&LossModel::None, 1000, 1).0, 0.0);
        assert_eq!(rate(&LossModel::Bernoulli { p: 0.0 }, 1000, 1).0, 0.0);
        assert_eq!(rate(&LossModel::Bernoulli { p: 1.0 }, 1000, 1).0, 1.0);
    }

    #[test]
    fn gilbert_mean_and_burst_length() {
        let m = LossModel::Gilbert {
            p: 0.01,
            r: 0.25,
            loss_good: 0.0,
            loss_bad: 1.0,
        };
        let (r, burst) = rate(&m, 400_000, 3);
        let expect = 0.01 / 0.26;
        assert!((r - expect).abs() < 0.004, "{r} vs {expect}");
        assert!((burst - 4.0).abs() < 0.3, "mean burst {burst}");
        assert!((m.mean() - expect).abs() < 1e-12);
    }

    #[test]
    fn validation_rejects_out_of_range() {
        assert!(LossModel::Bernoulli { p: 1.5 }.validate().is_err());
        assert!(LossModel::Bernoulli { p: -0.1 }.validate().is_err());
        assert!(LossModel::Bernoulli { p: f64::NAN }.validate().is_err());
        assert!(LossModel::Bernoulli { p: 0.1 }.validate().is_ok());
    }
}
