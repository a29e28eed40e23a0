//! A fixed-bucket histogram of microsecond values, for release-timing error (how late a frame
//! left compared with its scheduled release time).

use serde::Serialize;

const BUCKETS: usize = 10_000;

/// 1 µs buckets up to 10 ms, then one overflow bucket (and the exact maximum).
#[derive(Clone, Debug)]
pub struct Histogram {
    counts: Vec<u64>,
    overflow: u64,
    n: u64,
    max_us: u64,
    sum_us: u64,
}

/// Percentiles of a histogram.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Summary {
    /// Samples.
    pub n: u64,
    /// Median, µs.
    pub p50_us: u64,
    /// 99th percentile, µs (10000 means "10 ms or more").
    pub p99_us: u64,
    /// 99.9th percentile, µs.
    pub p999_us: u64,
    /// Mean, µs.
    pub mean_us: f64,
    /// Maximum, µs.
    pub max_us: u64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            counts: vec![0; BUCKETS],
            overflow: 0,
            n: 0,
            max_us: 0,
            sum_us: 0,
        }
    }
}

impl Histogram {
    /// Adds one sample.
    pub fn record(&mut self, us: u64) {
        match self.counts.get_mut(us as usize) {
            Some(c) => *c += 1,
            None => self.overflow += 1,
        }
        self.n += 1;
        self.max_us = self.max_us.max(us);
        self.sum_us = self.sum_us.saturating_add(us);
    }

    fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (i, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= rank {
                return i as u64;
            }
        }
        BUCKETS as u64
    }

    /// The summary.
    pub fn summary(&self) -> Summary {
        Summary {
            n: self.n,
            p50_us: self.quantile(0.5),
            p99_us: self.quantile(0.99),
            p999_us: self.quantile(0.999),
            mean_us: if self.n == 0 {
                0.0
            } else {
                self.sum_us as f64 / self.n as f64
            },
            max_us: self.max_us,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles() {
        let mut h = Histogram::default();
        for v in 1..=100 {
            h.record(v);
        }
        let s = h.summary();
        assert_eq!(s.p50_us, 50);
        assert_eq!(s.p99_us, 99);
        assert_eq!(s.max_us, 100);
        h.record(50_000);
        assert_eq!(h.summary().max_us, 50_000);
        assert_eq!(Histogram::default().summary().p50_us, 0);
    }
}
