//! The sender's layered packet schedule, sans-IO: which bunch goes out next and when.
//!
//! Every layer is paced at its announced rate as back-to-back bunches of `bunch_len`
//! equal-size packets (`DESIGN.md`, wire format rules; `era.md` §1.1.6): layer `j` starts a
//! bunch every `I_j = bunch_len · 8 · M / L_j` seconds. Two choices the papers leave open:
//!
//! - **Phases.** Layer `j`'s first bunch is offset by `frac(j·φ)·I_j` (φ the golden ratio).
//!   The golden-ratio sequence spreads *every prefix* of layers evenly over the cycle, so a
//!   receiver holding any number of cumulative layers sees a smooth aggregate and the
//!   bottleneck queue stays short (equal offsets `j/N` would bunch the low layers into the
//!   first part of the cycle). ns-2's PLM jitters each gap by ±50% instead; optional jitter
//!   is left to the host.
//! - **No interleaving.** The schedule hands out one whole bunch at a time, earliest first
//!   (ties to the lower layer); with [`Schedule::with_link_rate`] a bunch that is due while the
//!   previous one is still being serialised is pushed back to the end of it, so no packet of
//!   another layer can sit inside a bunch even on the sender's own link.
//!
//! Send times are computed as `start + (phase + k)·I_j` from a per-layer counter `k`, so
//! there is no accumulated rounding drift: each layer's long-run rate is its announced rate.

use crate::error::{Error, Result};
use crate::session::SessionInfo;
use crate::time::Time;
use std::time::Duration;

const PHI_FRAC: f64 = 0.618_033_988_749_894_8;

/// One bunch to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bunch {
    /// Layer index.
    pub layer: u8,
    /// Packets in the bunch (send them back to back, positions 0..count).
    pub count: u8,
    /// When to send the first packet.
    pub at: Time,
    /// When it was nominally due (later than `at` never; equal unless the link was busy).
    pub nominal: Time,
}

#[derive(Clone, Debug, PartialEq)]
struct Layer {
    interval_ns: f64,
    phase: f64,
    k: u64,
    next_ns: u64,
}

/// The schedule for one session.
#[derive(Clone, Debug, PartialEq)]
pub struct Schedule {
    start: Time,
    layers: Vec<Layer>,
    bunch_len: u8,
    bunch_bytes: u64,
    link_bps: Option<f64>,
    link_free: Time,
}

impl Schedule {
    /// A schedule for `info` whose first cycle starts at `start`.
    pub fn new(info: &SessionInfo, start: Time) -> Result<Schedule> {
        if info.layers.is_empty() || info.layers.len() > 256 {
            return Err(Error::Invalid {
                field: "layers",
                reason: format!("{} layers; need 1..=256", info.layers.len()),
            });
        }
        if info.packet_size == 0 || info.bunch_len == 0 {
            return Err(Error::Invalid {
                field: "packet_size/bunch_len",
                reason: "must be at least 1".into(),
            });
        }
        let bits = info.bunch_len as f64 * 8.0 * info.packet_size as f64;
        let mut layers = Vec::with_capacity(info.layers.len());
        for (j, l) in info.layers.iter().enumerate() {
            if l.rate_bps == 0 {
                return Err(Error::Invalid {
                    field: "rate_bps",
                    reason: format!("layer {j} has rate 0"),
                });
            }
            let interval_ns = bits * 1e9 / l.rate_bps as f64;
            let phase = (j as f64 * PHI_FRAC).fract();
            let mut layer = Layer {
                interval_ns,
                phase,
                k: 0,
                next_ns: 0,
            };
            layer.next_ns = Self::due(start, &layer);
            layers.push(layer);
        }
        Ok(Schedule {
            start,
            layers,
            bunch_len: info.bunch_len,
            bunch_bytes: info.bunch_len as u64 * info.packet_size as u64,
            link_bps: None,
            link_free: start,
        })
    }

    /// Also serialise bunches on a sender link of `bps`: a bunch never starts before the
    /// previous one has left.
    pub fn with_link_rate(mut self, bps: f64) -> Schedule {
        self.link_bps = (bps > 0.0 && bps.is_finite()).then_some(bps);
        self
    }

    fn due(start: Time, l: &Layer) -> u64 {
        let off = ((l.phase + l.k as f64) * l.interval_ns).round();
        start
            .as_nanos()
            .saturating_add(off.min(u64::MAX as f64) as u64)
    }

    /// The bunch interval `I_j` of layer `j`.
    pub fn interval(&self, j: usize) -> Option<Duration> {
        self.layers
            .get(j)
            .map(|l| Duration::from_nanos(l.interval_ns.round() as u64))
    }

    /// Nominal time of the next bunch (without link serialisation).
    pub fn peek(&self) -> Time {
        Time(
            self.layers
                .iter()
                .map(|l| l.next_ns)
                .min()
                .unwrap_or(u64::MAX),
        )
    }

    /// Number of layers.
    pub fn layer_count(&self) -> usize {
        self.layers.len()
    }

    /// Nominal time of layer `j`'s next bunch.
    pub fn next_of(&self, j: usize) -> Option<Time> {
        self.layers.get(j).map(|l| Time(l.next_ns))
    }

    /// The next bunch, earliest first (ties to the lower layer).
    pub fn next_bunch(&mut self) -> Bunch {
        let (j, _) = self
            .layers
            .iter()
            .enumerate()
            .min_by_key(|(_, l)| l.next_ns)
            .expect("at least one layer (checked in new)");
        self.take(j)
    }

    /// Layer `j`'s next bunch, whichever layer is due first: for a host that sends some
    /// layers ahead of their slots (a media burst policy), every bunch still advances its
    /// layer by one interval, so each layer's long-run rate stays the announced one.
    /// `j` past the last layer takes the last.
    pub fn take(&mut self, j: usize) -> Bunch {
        let j = j.min(self.layers.len() - 1);
        let l = &mut self.layers[j];
        let nominal = Time(l.next_ns);
        l.k += 1;
        l.next_ns = Self::due(self.start, l);
        let mut at = nominal;
        if let Some(bps) = self.link_bps {
            if self.link_free > at {
                at = self.link_free;
            }
            self.link_free = at + Duration::from_secs_f64(self.bunch_bytes as f64 * 8.0 / bps);
        }
        Bunch {
            layer: j as u8,
            count: self.bunch_len,
            at,
            nominal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn measure(info: &SessionInfo, secs: f64, link: Option<f64>) -> Vec<f64> {
        let mut s = Schedule::new(info, Time::ZERO).unwrap();
        if let Some(b) = link {
            s = s.with_link_rate(b);
        }
        let end = Time::from_secs_f64(secs);
        let mut pkts = vec![0u64; info.layers.len()];
        let mut last_end = Time::ZERO;
        loop {
            let b = s.next_bunch();
            if b.at >= end {
                break;
            }
            assert!(b.at >= b.nominal);
            if let Some(bps) = link {
                // Never interleaved: each bunch starts after the previous one left the link.
                assert!(b.at >= last_end, "{b:?} before {last_end:?}");
                last_end = b.at
                    + Duration::from_secs_f64(b.count as f64 * info.packet_size as f64 * 8.0 / bps);
            }
            pkts[b.layer as usize] += b.count as u64;
        }
        pkts.iter()
            .map(|p| *p as f64 * info.packet_size as f64 * 8.0 / secs)
            .collect()
    }

    #[test]
    fn long_run_rates_match_announced_thesis_ladder() {
        let info = SessionInfo::equal_layers(100, 20_000, Ipv4Addr::new(239, 1, 0, 0), 5000);
        // 20 kbit/s pairs of 512 B: one bunch per 0.4096 s; 600 s ⇒ ~1465 bunches per layer.
        let rates = measure(&info, 600.0, Some(10e6));
        for (j, r) in rates.iter().enumerate() {
            assert!((r / 20_000.0 - 1.0).abs() < 0.005, "layer {j}: {r}");
        }
    }

    #[test]
    fn long_run_rates_match_announced_uneven_ladder() {
        let mut info = SessionInfo::equal_layers(5, 1, Ipv4Addr::new(239, 1, 0, 0), 5000);
        for (l, r) in info
            .layers
            .iter_mut()
            .zip([150_000u64, 350_000, 1_000_000, 2_500_000, 37_777])
        {
            l.rate_bps = r;
        }
        info.packet_size = 1200;
        info.bunch_len = 3;
        let rates = measure(&info, 120.0, None);
        for (l, r) in info.layers.iter().zip(&rates) {
            assert!(
                (r / l.rate_bps as f64 - 1.0).abs() < 0.005,
                "{} vs {r}",
                l.rate_bps
            );
        }
    }

    #[test]
    fn phases_spread_every_prefix() {
        // For any prefix of k equal layers, the largest gap between consecutive bunch starts
        // in one cycle is at most 3/k of the cycle (golden-ratio three-gap theorem bound).
        let info = SessionInfo::equal_layers(100, 20_000, Ipv4Addr::new(239, 1, 0, 0), 5000);
        let s = Schedule::new(&info, Time::ZERO).unwrap();
        let cycle = s.interval(0).unwrap().as_nanos() as f64;
        for k in 2..=100usize {
            let mut starts: Vec<f64> = s.layers[..k].iter().map(|l| l.next_ns as f64).collect();
            starts.sort_by(|a, b| a.total_cmp(b));
            starts.push(starts[0] + cycle);
            let max_gap = starts.windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
            assert!(
                max_gap <= 3.0 * cycle / k as f64,
                "k={k}: {}",
                max_gap / cycle
            );
        }
    }

    #[test]
    fn rejects_bad_sessions() {
        let mut info = SessionInfo::equal_layers(2, 20_000, Ipv4Addr::new(239, 1, 0, 0), 5000);
        info.layers[1].rate_bps = 0;
        assert!(Schedule::new(&info, Time::ZERO).is_err());
        info.layers.clear();
        assert!(Schedule::new(&info, Time::ZERO).is_err());
    }
}
