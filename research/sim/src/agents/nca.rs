//! NCA (Nominee Congestion Avoidance, the congestion-control half of AER/NCA,
//! `active-networks.md` §1.6): the sans-IO pieces the simulator's AER/NCA agents
//! (`agents::aer`) use — nominee selection from congestion status messages (CSMs) and the
//! sender's window driven by the nominee's per-packet acknowledgements (CCMs); tested against
//! the spec's unit vectors (§5.1 items 6 and 7).

use congestion::Time;

/// A congestion status message: a receiver's loss estimate and RTT.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Csm {
    /// Receiver id.
    pub receiver: u32,
    /// Loss probability estimate; `None` while the receiver has no valid estimate.
    pub p: Option<f64>,
    /// Round-trip time to the sender, seconds.
    pub rtt_s: f64,
}

impl Csm {
    /// `g = RTT·√p`, the quantity the most constrained receiver maximises (Eq. 1.5); 0 when p
    /// is invalid (PANAMA use case [X]).
    pub fn g(&self) -> f64 {
        self.p
            .filter(|p| p.is_finite() && *p > 0.0)
            .map_or(0.0, |p| self.rtt_s.max(0.0) * p.sqrt())
    }
}

/// The nominee rule of the PANAMA NCA use case ([X], spec §1.6).
#[derive(Clone, Debug)]
pub struct NomineeSelector {
    /// A nominee silent for longer than this is replaced by any report (17 s).
    pub timeout: std::time::Duration,
    current: Option<(Csm, Time)>,
}

impl Default for NomineeSelector {
    fn default() -> Self {
        NomineeSelector {
            timeout: std::time::Duration::from_secs(17),
            current: None,
        }
    }
}

impl NomineeSelector {
    /// The current nominee's receiver id.
    pub fn nominee(&self) -> Option<u32> {
        self.current.map(|(c, _)| c.receiver)
    }

    /// Offers a CSM received at `now`; returns whether the nominee changed.
    pub fn offer(&mut self, now: Time, csm: Csm) -> bool {
        let accept = match self.current {
            None => true,
            Some((cur, at)) => {
                let stale = now.0.saturating_sub(at.0) > self.timeout.as_nanos() as u64;
                csm.receiver == cur.receiver
                    || (csm.g() > 0.0 && cur.g() == 0.0)
                    || csm.g() > cur.g()
                    || (csm.g() == 0.0 && cur.g() == 0.0 && csm.rtt_s > cur.rtt_s)
                    || stale
            }
        };
        if !accept {
            return false;
        }
        let changed = self.nominee() != Some(csm.receiver);
        self.current = Some((csm, now));
        changed
    }
}

/// The sender's window (packets), NewReno-like, with the PANAMA constants ([X]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NcaWindow {
    pub cwnd: f64,
    pub thresh: f64,
    pub max_window: f64,
    pub min_thresh: f64,
}

impl Default for NcaWindow {
    /// Initial cwnd 1, ssthresh 64, MAX_WINDOW 256, MIN_SS_THRESH 2.
    fn default() -> Self {
        NcaWindow {
            cwnd: 1.0,
            thresh: 64.0,
            max_window: 256.0,
            min_thresh: 2.0,
        }
    }
}

impl NcaWindow {
    /// A CCM for new data: slow start below the threshold, else +1/cwnd.
    pub fn on_ack(&mut self) {
        if self.cwnd < self.thresh {
            self.cwnd += 1.0;
        } else {
            self.cwnd += 1.0 / self.cwnd;
        }
        self.cwnd = self.cwnd.min(self.max_window);
    }

    /// A loss seen through duplicate CCMs: halve (fast-recovery style).
    pub fn on_loss(&mut self) {
        self.thresh = (self.cwnd / 2.0).max(self.min_thresh);
        self.cwnd = self.thresh;
    }

    /// No CCM within the timeout: threshold to half, back to one packet.
    pub fn on_timeout(&mut self) {
        self.thresh = (self.cwnd / 2.0).max(self.min_thresh);
        self.cwnd = 1.0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nominee_is_the_largest_rtt_sqrt_p() {
        // Spec §5.1 item 6: A (1 %, 100 ms) g = 10, B (4 %, 60 ms) g = 12, C invalid → B.
        let mut s = NomineeSelector::default();
        let a = Csm {
            receiver: 1,
            p: Some(0.01),
            rtt_s: 0.1,
        };
        let b = Csm {
            receiver: 2,
            p: Some(0.04),
            rtt_s: 0.06,
        };
        let c = Csm {
            receiver: 3,
            p: None,
            rtt_s: 0.3,
        };
        let t = Time::from_millis(1000);
        for order in [[a, b, c], [c, b, a], [b, c, a], [c, a, b]] {
            let mut s = NomineeSelector::default();
            for m in order {
                s.offer(t, m);
            }
            assert_eq!(s.nominee(), Some(2), "{order:?}");
        }
        // A silent nominee older than 17 s is replaced by any CSM, even a weaker one.
        s.offer(t, b);
        assert!(!s.offer(Time::from_millis(17_000), a), "16 s old: kept");
        assert!(s.offer(Time::from_millis(18_001), a), "17+ s old: replaced");
        assert_eq!(s.nominee(), Some(1));
        // The nominee's own report refreshes it even if its g fell.
        let weaker_a = Csm {
            p: Some(0.0001),
            ..a
        };
        assert!(!s.offer(Time::from_millis(18_100), weaker_a));
        assert_eq!(s.nominee(), Some(1));
    }

    #[test]
    fn window_follows_the_spec_vector() {
        // Spec §5.1 item 7: cwnd 1, thresh 64; 6 loss-free RTTs with one CCM per packet → 64.
        let mut w = NcaWindow::default();
        for _ in 0..6 {
            let in_flight = w.cwnd as usize;
            for _ in 0..in_flight {
                w.on_ack();
            }
        }
        assert_eq!(w.cwnd, 64.0);
        w.on_loss();
        assert_eq!((w.cwnd, w.thresh), (32.0, 32.0));
        let before = w.cwnd;
        w.on_timeout();
        assert_eq!((w.cwnd, w.thresh), (1.0, before / 2.0));
        // Never above MAX_WINDOW.
        let mut w = NcaWindow::default();
        for _ in 0..100_000 {
            w.on_ack();
        }
        assert!(w.cwnd <= 256.0);
    }
}
