//! REM, Random Exponential Marking (Athuraliya, Low et al.), the link law as run in ns-2
//! (`active-networks.md` §1.3): a price integrates rate mismatch and backlog mismatch every
//! `T_u`; arrivals are dropped (the thesis' TCPs are not ECN-capable) with probability
//! `1 − φ^(−price)`.
//!
//! Sans-IO: the periodic update runs lazily, catching up on every elapsed interval whenever a
//! packet arrives or leaves. Intervals with no arrivals still update the price (x̂ decays), as
//! the ns-2 timer would.

use crate::droptail::DropTail;
use crate::rng::Rng;
use crate::{DropReason, QueueDiscipline, Queued};
use proto::Time;

/// REM parameters. Defaults are the thesis' values (ns-2 defaults where it gives none).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RemParams {
    /// Price step size γ.
    #[serde(default = "d_gamma")]
    pub gamma: f64,
    /// Base of the exponential φ (> 1).
    #[serde(default = "d_phi")]
    pub phi: f64,
    /// Weight of the backlog mismatch α.
    #[serde(default = "d_alpha")]
    pub alpha: f64,
    /// Target backlog b*, packets.
    #[serde(default = "d_target")]
    pub target_packets: f64,
    /// Price update period T_u, seconds.
    #[serde(default = "d_update")]
    pub update_s: f64,
    /// EWMA weight δ of the input-rate estimate.
    #[serde(default = "d_inw")]
    pub inw: f64,
    /// Mean packet size S̄, bytes.
    #[serde(default = "d_size")]
    pub mean_packet_size: u32,
    /// Physical buffer, packets.
    pub limit_packets: usize,
}

fn d_gamma() -> f64 {
    0.001
}
fn d_phi() -> f64 {
    1.001
}
fn d_alpha() -> f64 {
    0.1
}
fn d_target() -> f64 {
    20.0
}
fn d_update() -> f64 {
    0.001
}
fn d_inw() -> f64 {
    0.02
}
fn d_size() -> u32 {
    1000
}

/// The price law, separated from the queue so it can be checked against the spec vectors.
#[derive(Clone)]
pub struct RemPrice {
    params: RemParams,
    /// Link capacity in packets per update interval.
    capacity: f64,
    /// Filtered input rate x̂, packets per interval.
    pub x_hat: f64,
    /// Price p ≥ 0.
    pub price: f64,
}

impl RemPrice {
    /// Price state for a link of `link_rate_bps`.
    pub fn new(params: RemParams, link_rate_bps: u64) -> Self {
        let capacity =
            link_rate_bps as f64 * params.update_s / (8.0 * f64::from(params.mean_packet_size));
        RemPrice {
            params,
            capacity,
            x_hat: 0.0,
            price: 0.0,
        }
    }

    /// Packets the link sends per interval (c).
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    /// One update with `arrivals` packets in the last interval and `backlog` packets queued.
    pub fn update(&mut self, arrivals: f64, backlog: f64) {
        let p = &self.params;
        self.x_hat = (1.0 - p.inw) * self.x_hat + p.inw * arrivals;
        let step = self.x_hat + p.alpha * (backlog - p.target_packets) - self.capacity;
        self.price = (self.price + p.gamma * step).max(0.0);
    }

    /// Marking (here: dropping) probability `1 − φ^(−p)`.
    pub fn probability(&self) -> f64 {
        mark_probability(self.params.phi, self.price)
    }
}

/// `1 − φ^(−price)`.
pub fn mark_probability(phi: f64, price: f64) -> f64 {
    1.0 - phi.powf(-price)
}

/// A REM queue.
#[derive(Debug)]
pub struct Rem<P> {
    fifo: DropTail<P>,
    law: RemPrice,
    period_ns: u64,
    next_update: u64,
    arrivals: u64,
    rng: Rng,
}

impl std::fmt::Debug for RemPrice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RemPrice(p={}, x̂={})", self.price, self.x_hat)
    }
}

impl<P: Send> Rem<P> {
    /// A REM queue on a link of `link_rate_bps`.
    pub fn new(params: RemParams, link_rate_bps: u64, seed: u64) -> Self {
        let period_ns = ((params.update_s * 1e9) as u64).max(1);
        Rem {
            fifo: DropTail::new(Some(params.limit_packets), None),
            law: RemPrice::new(params, link_rate_bps),
            period_ns,
            next_update: period_ns,
            arrivals: 0,
            rng: Rng::new(seed),
        }
    }

    /// The current price.
    pub fn price(&self) -> f64 {
        self.law.price
    }

    fn catch_up(&mut self, now: Time) {
        let now = now.as_nanos();
        let mut steps = 0u64;
        while self.next_update <= now {
            let b = self.fifo.len_packets() as f64;
            self.law.update(self.arrivals as f64, b);
            self.arrivals = 0;
            self.next_update += self.period_ns;
            steps += 1;
            // After a long idle spell the price has long reached 0 and x̂ ≈ 0: skip ahead
            // instead of looping over millions of empty intervals.
            if steps > 100_000 && self.law.price == 0.0 {
                let skip = (now - self.next_update) / self.period_ns + 1;
                self.next_update += skip * self.period_ns;
                self.law.x_hat = 0.0;
            }
        }
    }
}

impl<P: Send> QueueDiscipline<P> for Rem<P> {
    fn enqueue(&mut self, now: Time, pkt: Queued<P>) -> Vec<(Queued<P>, DropReason)> {
        self.catch_up(now);
        self.arrivals += 1;
        if self.fifo.would_overflow(pkt.size) {
            return vec![(pkt, DropReason::Overflow)];
        }
        if self.rng.chance(self.law.probability()) {
            return vec![(pkt, DropReason::Early)];
        }
        self.fifo.push(now, pkt);
        Vec::new()
    }

    fn dequeue(&mut self, now: Time) -> Option<Queued<P>> {
        self.catch_up(now);
        self.fifo.dequeue(now)
    }

    fn len_packets(&self) -> usize {
        self.fifo.len_packets()
    }

    fn len_bytes(&self) -> u64 {
        self.fifo.len_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pkt;

    fn params() -> RemParams {
        RemParams {
            gamma: 0.001,
            phi: 1.001,
            alpha: 0.1,
            target_packets: 20.0,
            update_s: 0.001,
            inw: 0.02,
            mean_packet_size: 1000,
            limit_packets: 120,
        }
    }

    #[test]
    fn price_law_matches_spec_vectors() {
        // active-networks.md §5.1 item 3.
        let mut law = RemPrice::new(params(), 10_000_000);
        let c = law.capacity();
        assert!((c - 1.25).abs() < 1e-12);
        law.x_hat = c;
        law.price = 5.0;
        for _ in 0..10_000 {
            law.update(c, 20.0);
        }
        assert!((law.price - 5.0).abs() < 1e-9, "{}", law.price);
        // Excess of +1 packet per interval for 1000 updates at γ = 0.001: +1.0.
        let mut law = RemPrice::new(params(), 10_000_000);
        law.x_hat = c + 1.0;
        for _ in 0..1000 {
            law.update(c + 1.0, 20.0);
        }
        assert!((law.price - 1.0).abs() < 1e-9, "{}", law.price);
        // Never negative.
        for _ in 0..10_000 {
            law.update(0.0, 0.0);
        }
        assert_eq!(law.price, 0.0);
        assert!((mark_probability(1.001, 105.0) - 0.0996).abs() < 0.0005);
        assert_eq!(mark_probability(1.001, 0.0), 0.0);
    }

    #[test]
    fn overload_raises_the_price_and_drops_early() {
        // 1.5 Mb/s link, 1000 B packets: 0.1875 pkt per ms; offer one packet per 4 ms
        // (2 Mb/s), serve at the link rate (one per 5.333 ms).
        let mut q: Rem<u32> = Rem::new(params(), 1_500_000, 3);
        let mut early = 0;
        let mut next_service = 0u64;
        for i in 0..30_000u32 {
            let t = u64::from(i) * 4_000_000;
            while next_service <= t {
                q.dequeue(Time(next_service));
                next_service += 5_333_333;
            }
            for (_, r) in q.enqueue(Time(t), pkt(i, 1000, 0)) {
                if r == DropReason::Early {
                    early += 1;
                }
            }
        }
        assert!(q.price() > 0.0);
        assert!(early > 1000, "early drops {early}");
        // The law parks the backlog near b* = 20 rather than at the 120-packet limit.
        assert!(q.len_packets() < 60, "backlog {}", q.len_packets());
    }
}
