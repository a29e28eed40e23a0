//! Round-trip-time estimators.

use crate::time::Time;

/// EWMA smoother: `R = q·R + (1−q)·sample`, the first sample taken as is (RFC 5348 §4.3,
/// `q = 0.9`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RttEstimator {
    srtt: Option<f64>,
    q: f64,
}

impl RttEstimator {
    /// A smoother keeping weight `q` (0..1) on the old value.
    pub fn new(q: f64) -> RttEstimator {
        RttEstimator {
            srtt: None,
            q: q.clamp(0.0, 1.0),
        }
    }

    /// Starts from a configured value (e.g. ERA's fixed 50 ms).
    pub fn with_initial(q: f64, rtt_s: f64) -> RttEstimator {
        let mut r = RttEstimator::new(q);
        r.srtt = (rtt_s > 0.0 && rtt_s.is_finite()).then_some(rtt_s);
        r
    }

    /// Feeds one sample in seconds; non-positive or non-finite samples are ignored.
    pub fn sample(&mut self, rtt_s: f64) {
        if rtt_s.is_nan() || rtt_s <= 0.0 || rtt_s.is_infinite() {
            return;
        }
        self.srtt = Some(match self.srtt {
            None => rtt_s,
            Some(r) => self.q * r + (1.0 - self.q) * rtt_s,
        });
    }

    /// Smoothed RTT in seconds.
    pub fn get(&self) -> Option<f64> {
        self.srtt
    }
}

/// Luby's join-to-first-packet RTT probe (`era.md` §1.1.11 option 3, E8): the time from
/// issuing a join for a layer to the first packet of that layer. Biased low when another
/// receiver already pulls the group (no graft delay).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct JoinLatencyProbe {
    pending: Vec<Option<Time>>,
}

impl JoinLatencyProbe {
    /// Records that a join for `layer` was issued at `now`.
    pub fn joined(&mut self, layer: u8, now: Time) {
        let i = layer as usize;
        if self.pending.len() <= i {
            self.pending.resize(i + 1, None);
        }
        self.pending[i] = Some(now);
    }

    /// Cancels a pending probe (the layer was left before anything arrived).
    pub fn left(&mut self, layer: u8) {
        if let Some(p) = self.pending.get_mut(layer as usize) {
            *p = None;
        }
    }

    /// A packet of `layer` arrived at `now`: returns the join latency in seconds if this is
    /// the first packet since the join.
    pub fn packet(&mut self, layer: u8, now: Time) -> Option<f64> {
        let p = self.pending.get_mut(layer as usize)?;
        let t = p.take()?;
        Some((now - t).as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ewma() {
        let mut r = RttEstimator::new(0.9);
        assert_eq!(r.get(), None);
        r.sample(0.1);
        assert_eq!(r.get(), Some(0.1));
        r.sample(0.2);
        assert!((r.get().unwrap() - 0.11).abs() < 1e-12);
        r.sample(-1.0);
        r.sample(f64::NAN);
        assert!((r.get().unwrap() - 0.11).abs() < 1e-12);
        assert_eq!(RttEstimator::with_initial(0.9, 0.05).get(), Some(0.05));
    }

    #[test]
    fn join_probe() {
        let mut p = JoinLatencyProbe::default();
        p.joined(3, Time::from_millis(100));
        assert_eq!(p.packet(2, Time::from_millis(120)), None);
        let s = p.packet(3, Time::from_millis(142)).unwrap();
        assert!((s - 0.042).abs() < 1e-12);
        assert_eq!(p.packet(3, Time::from_millis(150)), None);
        p.joined(4, Time::from_millis(200));
        p.left(4);
        assert_eq!(p.packet(4, Time::from_millis(210)), None);
    }
}
