//! RED (Floyd & Jacobson 1993) as used by the thesis (`active-networks.md` §1.2), with the
//! optional "gentle" ramp from `max_p` to 1 between `max_th` and `2·max_th`.
//!
//! Queue sizes are counted in packets, as in ns-2's default (non byte-mode) RED. While the queue
//! is idle the average decays as if `m` small packets had arrived to an empty queue, with `m` =
//! idle time ÷ transmission time of a mean-size packet (ns-2's idle handling).

use crate::droptail::DropTail;
use crate::rng::Rng;
use crate::{DropReason, QueueDiscipline, Queued};
use proto::Time;

/// RED parameters (ns-2 names in brackets).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RedParams {
    /// Lower threshold on the average queue, packets (`thresh_`).
    pub min_th: f64,
    /// Upper threshold, packets (`maxthresh_`).
    pub max_th: f64,
    /// Drop probability at `max_th` (`1/linterm_`).
    #[serde(default = "default_max_p")]
    pub max_p: f64,
    /// EWMA weight of the average (`q_weight_`).
    #[serde(default = "default_wq")]
    pub wq: f64,
    /// Physical buffer, packets.
    pub limit_packets: usize,
    /// Gentle mode: ramp from max_p to 1 over [max_th, 2·max_th) instead of dropping all.
    #[serde(default)]
    pub gentle: bool,
    /// Mean packet size in bytes, for the idle-time decay of the average.
    #[serde(default = "default_mean_size")]
    pub mean_packet_size: u32,
    /// ns-2's `wait_` (default `true` in ns-2's `ns-default.tcl`, off here so that existing
    /// scenarios keep their results): no early drop until `count·p_b ≥ 1`, then
    /// `p_b / (2 − count·p_b)`, so the gaps between early drops are uniform on
    /// `[1/p_b, 2/p_b]` instead of `[1, 1/p_b]` (`REDQueue::modify_p`).
    #[serde(default)]
    pub wait: bool,
}

fn default_max_p() -> f64 {
    0.1
}
fn default_wq() -> f64 {
    0.002
}
fn default_mean_size() -> u32 {
    500
}

/// Drop probability before the count correction (`p_b`), for an average queue `avg`.
pub fn base_probability(p: &RedParams, avg: f64) -> f64 {
    if avg < p.min_th {
        0.0
    } else if avg < p.max_th {
        p.max_p * (avg - p.min_th) / (p.max_th - p.min_th)
    } else if p.gentle && avg < 2.0 * p.max_th {
        p.max_p + (1.0 - p.max_p) * (avg - p.max_th) / p.max_th
    } else {
        1.0
    }
}

/// Final drop probability `p_a = p_b / (1 − count·p_b)`, 1 when the denominator reaches 0;
/// with [`RedParams::wait`], 0 while `count·p_b < 1`, then `p_b / (2 − count·p_b)`.
pub fn drop_probability(p: &RedParams, avg: f64, count: u64) -> f64 {
    let pb = base_probability(p, avg);
    if pb >= 1.0 {
        return 1.0;
    }
    if p.wait {
        let c = count as f64 * pb;
        return if c < 1.0 {
            0.0
        } else if c < 2.0 {
            (pb / (2.0 - c)).min(1.0)
        } else {
            1.0
        };
    }
    let den = 1.0 - count as f64 * pb;
    if den <= 0.0 {
        1.0
    } else {
        (pb / den).min(1.0)
    }
}

/// A RED queue.
#[derive(Debug)]
pub struct Red<P> {
    fifo: DropTail<P>,
    params: RedParams,
    avg: f64,
    count: u64,
    idle_since: Option<Time>,
    /// Transmission time of a mean-size packet at the link rate, ns.
    pkt_time_ns: f64,
    rng: Rng,
}

impl<P> Red<P> {
    /// A RED queue on a link of `link_rate_bps`, drawing drops from `seed`.
    pub fn new(params: RedParams, link_rate_bps: u64, seed: u64) -> Self {
        let pkt_time_ns =
            f64::from(params.mean_packet_size) * 8.0 * 1e9 / (link_rate_bps.max(1) as f64);
        Red {
            fifo: DropTail::new(Some(params.limit_packets), None),
            params,
            avg: 0.0,
            count: 0,
            idle_since: Some(Time::ZERO),
            pkt_time_ns,
            rng: Rng::new(seed),
        }
    }

    /// The current average queue, packets.
    pub fn avg(&self) -> f64 {
        self.avg
    }
}

impl<P: Send> QueueDiscipline<P> for Red<P> {
    fn enqueue(&mut self, now: Time, pkt: Queued<P>) -> Vec<(Queued<P>, DropReason)> {
        let q = self.fifo.len_packets() as f64;
        let wq = self.params.wq;
        if let Some(since) = self.idle_since.take() {
            let m = (now.as_nanos().saturating_sub(since.as_nanos())) as f64 / self.pkt_time_ns;
            self.avg *= (1.0 - wq).powf(m);
        }
        self.avg = (1.0 - wq) * self.avg + wq * q;
        let pa = drop_probability(&self.params, self.avg, self.count);
        let early = if self.avg < self.params.min_th {
            self.count = 0;
            false
        } else if self.rng.chance(pa) {
            self.count = 0;
            true
        } else {
            self.count += 1;
            false
        };
        if early {
            return vec![(pkt, DropReason::Early)];
        }
        if self.fifo.would_overflow(pkt.size) {
            self.count = 0;
            return vec![(pkt, DropReason::Overflow)];
        }
        self.fifo.push(now, pkt);
        Vec::new()
    }

    fn dequeue(&mut self, now: Time) -> Option<Queued<P>> {
        let p = self.fifo.dequeue(now);
        if self.fifo.len_packets() == 0 && self.idle_since.is_none() {
            self.idle_since = Some(now);
        }
        p
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

    fn params(gentle: bool) -> RedParams {
        RedParams {
            min_th: 5.0,
            max_th: 15.0,
            max_p: 0.1,
            wq: 0.002,
            limit_packets: 30,
            gentle,
            mean_packet_size: 500,
            wait: false,
        }
    }

    /// Gaps (packets between early drops) at a held average queue with base probability
    /// `pb = 0.05` (avg 10 between 5 and 15, max_p 0.1), drawn as `Red::enqueue` does.
    fn gaps(wait: bool) -> Vec<u64> {
        let p = RedParams {
            wait,
            ..params(false)
        };
        let mut rng = Rng::new(7);
        let (mut count, mut gap, mut out) = (0u64, 0u64, Vec::new());
        while out.len() < 20_000 {
            gap += 1;
            if rng.chance(drop_probability(&p, 10.0, count)) {
                count = 0;
                out.push(gap);
                gap = 0;
            } else {
                count += 1;
            }
        }
        out
    }

    /// ns-2's `wait_` (its default): no early drop until count·pb reaches 1, so the gaps
    /// between drops lie in [1/pb, 2/pb] (20..=40 packets at pb = 0.05, mean 1.5/pb),
    /// against [1, 1/pb] (mean about 1/(2 pb)) without it.
    #[test]
    fn wait_mode_spaces_early_drops_as_ns2() {
        let p = RedParams {
            wait: true,
            ..params(false)
        };
        assert_eq!(drop_probability(&p, 10.0, 19), 0.0);
        assert!((drop_probability(&p, 10.0, 20) - 0.05).abs() < 1e-12);
        assert!((drop_probability(&p, 10.0, 30) - 0.1).abs() < 1e-12);
        assert_eq!(drop_probability(&p, 10.0, 40), 1.0);
        assert_eq!(drop_probability(&p, 15.0, 0), 1.0);
        let mean = |g: &[u64]| g.iter().sum::<u64>() as f64 / g.len() as f64;
        let w = gaps(true);
        assert!(
            w.iter().all(|&g| (21..=41).contains(&g)),
            "{:?}",
            w.iter().min()
        );
        assert!((mean(&w) - 30.0).abs() < 1.0, "wait: mean gap {}", mean(&w));
        let u = gaps(false);
        assert!(u.iter().all(|&g| g <= 21));
        assert!(mean(&u) < 15.0, "no wait: mean gap {}", mean(&u));
    }

    #[test]
    fn probabilities_follow_the_spec_vectors() {
        // active-networks.md §5.1 item 4.
        let p = params(false);
        assert!((drop_probability(&p, 10.0, 0) - 0.05).abs() < 1e-12);
        assert_eq!(drop_probability(&p, 15.0, 0), 1.0);
        assert_eq!(drop_probability(&p, 4.9, 3), 0.0);
        // count correction: pb = 0.05, count 10 → 0.05 / 0.5 = 0.1
        assert!((drop_probability(&p, 10.0, 10) - 0.1).abs() < 1e-12);
        // count·pb ≥ 1 → certain drop
        assert_eq!(drop_probability(&p, 10.0, 20), 1.0);
        // gentle: halfway between max_th and 2·max_th → 0.1 + 0.9·0.5
        let g = params(true);
        assert!((drop_probability(&g, 22.5, 0) - 0.55).abs() < 1e-12);
        assert_eq!(drop_probability(&g, 30.0, 0), 1.0);
    }

    #[test]
    fn persistent_overload_drops_early_and_holds_avg_near_thresholds() {
        // Offer 2 packets per service: the queue must keep drops going, the average must
        // climb past min_th and early drops must appear before the buffer overflows.
        let mut q: Red<u32> = Red::new(params(false), 1_000_000, 1);
        let mut early = 0;
        let mut overflow = 0;
        let mut t = 0u64;
        for i in 0..20_000u32 {
            for j in 0..2 {
                for (_, r) in q.enqueue(Time(t), pkt(i * 2 + j, 500, 0)) {
                    match r {
                        DropReason::Early => early += 1,
                        DropReason::Overflow => overflow += 1,
                    }
                }
            }
            q.dequeue(Time(t));
            t += 4_000_000;
        }
        assert!(early > 5_000, "early drops {early}");
        assert!(q.avg() > 5.0 && q.avg() < 16.0, "avg {}", q.avg());
        assert!(overflow < early, "overflow {overflow} early {early}");
    }

    #[test]
    fn idle_time_decays_the_average() {
        let mut q: Red<u32> = Red::new(params(false), 1_000_000, 1);
        for i in 0..2000 {
            q.enqueue(Time(0), pkt(i, 500, 0));
            if q.len_packets() > 20 {
                q.dequeue(Time(0));
            }
        }
        let before = q.avg();
        assert!(before > 5.0);
        while q.dequeue(Time(0)).is_some() {}
        // 10 s idle = 2500 packet times at 1 Mb/s, 500 B: (0.998)^2500 ≈ 0.0067.
        q.enqueue(Time::from_millis(10_000), pkt(0, 500, 0));
        assert!(q.avg() < before * 0.01, "avg {} before {before}", q.avg());
    }
}
