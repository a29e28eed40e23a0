//! A tiny seeded pseudo-random generator (wyrand), shared by the queue disciplines and the
//! simulator so that a scenario and a seed give the same drops bit for bit on every machine.
//!
//! Why our own: the disciplines must be sans-IO and deterministic, and a one-multiply
//! generator keeps the simulator's hot path cheap without pulling in `rand`.

/// wyrand: 64-bit state, one 128-bit multiply per output. Passes BigCrush/PractRand for
/// simulation purposes; not for cryptography.
#[derive(Clone, Debug)]
pub struct Rng {
    state: u64,
}

impl Rng {
    /// A generator from a seed. Different seeds give independent-looking streams.
    pub fn new(seed: u64) -> Rng {
        // Run the seed through splitmix64 once so that small seeds (0, 1, 2) differ at once.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Rng {
            state: z ^ (z >> 31),
        }
    }

    /// A child generator for a sub-component (a link, an agent), derived from this one's seed
    /// and a stream id, so adding a component does not shift every other stream.
    pub fn derive(seed: u64, stream: u64) -> Rng {
        Rng::new(seed ^ stream.wrapping_mul(0xD6E8_FEB8_6659_FD93))
    }

    /// Next 64 random bits.
    #[inline]
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0xA076_1D64_78BD_642F);
        let t = (self.state as u128).wrapping_mul((self.state ^ 0xE703_7ED1_A0B4_28DB) as u128);
        ((t >> 64) as u64) ^ (t as u64)
    }

    /// Uniform in [0, 1).
    #[inline]
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// True with probability `p` (p ≤ 0 never, p ≥ 1 always).
    #[inline]
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && (p >= 1.0 || self.f64() < p)
    }

    /// Uniform in [lo, hi).
    pub fn uniform(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }

    /// Exponential with the given mean.
    pub fn exp(&mut self, mean: f64) -> f64 {
        -mean * (1.0 - self.f64()).ln()
    }

    /// Pareto (type I) with the given mean and shape > 1: scale = mean·(shape−1)/shape.
    pub fn pareto(&mut self, mean: f64, shape: f64) -> f64 {
        let scale = mean * (shape - 1.0) / shape;
        scale / (1.0 - self.f64()).powf(1.0 / shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_different_seeds_differ() {
        let mut a = Rng::new(7);
        let mut b = Rng::new(7);
        let mut c = Rng::new(8);
        let va: Vec<u64> = (0..16).map(|_| a.next_u64()).collect();
        let vb: Vec<u64> = (0..16).map(|_| b.next_u64()).collect();
        let vc: Vec<u64> = (0..16).map(|_| c.next_u64()).collect();
        assert_eq!(va, vb);
        assert_ne!(va, vc);
    }

    #[test]
    fn uniform_and_exp_have_the_right_means() {
        let mut r = Rng::new(1);
        let n = 200_000;
        let m: f64 = (0..n).map(|_| r.f64()).sum::<f64>() / n as f64;
        assert!((m - 0.5).abs() < 0.005, "mean {m}");
        let e: f64 = (0..n).map(|_| r.exp(2.0)).sum::<f64>() / n as f64;
        assert!((e - 2.0).abs() < 0.03, "exp mean {e}");
        let p: f64 = (0..n).map(|_| r.pareto(1.0, 2.5)).sum::<f64>() / n as f64;
        assert!((p - 1.0).abs() < 0.05, "pareto mean {p}");
    }
}
