//! TCP CUBIC's window rule (RFC 9438) as Linux's `tcp_cubic` runs it (the module the testbed's
//! iperf3 `-C cubic` flows use; its parameters on the test machine: `beta 717`,
//! `bic_scale 41`, `fast_convergence 1`, `tcp_friendliness 1`, `hystart 1`,
//! `hystart_detect 3`, `hystart_low_window 16`, `hystart_ack_delta_us 2000`).
//!
//! Only the window arithmetic lives here; loss detection, recovery and the clock belong to the
//! sender ([`crate::agents::linux_tcp`]). Windows are in segments (floating point).
//!
//! - Slow start: `cwnd += acked` up to `ssthresh`.
//! - HyStart (on by default, as Linux): per round, the delay test (the minimum RTT of the
//!   round's first 8 ACKs exceeds the path's minimum by `clamp(min/8, 4 ms, 16 ms)`) and the
//!   ACK-train test (ACKs no more than 2 ms apart for longer than half the minimum RTT, the
//!   unpaced threshold) end slow start at `cwnd ≥ 16`.
//! - Congestion avoidance: the cubic `W(t) = C·(t − K)³ + W_max` with `C = 0.4` and
//!   `K = ∛(W_max·(1 − β)/C)`, evaluated, as Linux does, one minimum RTT ahead (`t + min_rtt`);
//!   the window grows by `(W(t) − cwnd)/cwnd` per acked segment, at most half a segment per
//!   segment, and at most 1/20 per segment in the first epoch after slow start (no `W_max`
//!   yet). The Reno-friendly estimate `W_est` grows by `α = 3(1 − β)/(1 + β)` per window and
//!   takes over when it is larger (RFC 9438 §4.3).
//! - On a loss: `β = 0.7` (717/1024), fast convergence (`W_max = cwnd·(1 + β)/2` when the
//!   window did not regain the last `W_max`), a new epoch at the next ACK.

/// CUBIC's constants (Linux defaults).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CubicParams {
    /// Multiplicative decrease factor β.
    pub beta: f64,
    /// The cubic's aggressiveness C (segments/s³).
    pub c: f64,
    /// Fast convergence on.
    pub fast_convergence: bool,
    /// HyStart on (both tests).
    pub hystart: bool,
    /// HyStart only acts at or above this window, segments.
    pub hystart_low_window: f64,
}

impl Default for CubicParams {
    fn default() -> Self {
        CubicParams {
            beta: 717.0 / 1024.0,
            c: 410.0 / 1024.0,
            fast_convergence: true,
            hystart: true,
            hystart_low_window: 16.0,
        }
    }
}

/// HyStart's per-round state.
#[derive(Clone, Copy, Debug, Default)]
struct HyStart {
    /// Start of the current round (s) and of the current ACK train.
    round_start: f64,
    last_ack: f64,
    /// The round ends when this segment is acknowledged.
    end_seq: u64,
    /// Minimum RTT among the round's first samples, and how many were taken.
    curr_rtt: f64,
    samples: u32,
    /// Why slow start ended (None while it runs).
    found: Option<&'static str>,
}

/// The CUBIC window state of one connection.
#[derive(Clone, Debug)]
pub struct Cubic {
    p: CubicParams,
    /// Congestion window and slow-start threshold, segments.
    pub cwnd: f64,
    pub ssthresh: f64,
    /// `W_max` (0 = none yet), the epoch's start (s), its `K` (s) and origin point.
    w_max: f64,
    epoch_start: Option<f64>,
    k: f64,
    origin: f64,
    /// Reno-friendly estimate `W_est` (segments).
    w_est: f64,
    /// Smallest RTT seen (s), for `t + min_rtt` and HyStart.
    min_rtt: f64,
    hy: HyStart,
}

impl Cubic {
    /// A connection in slow start with the initial window `iw` (Linux: 10).
    pub fn new(p: CubicParams, iw: f64) -> Cubic {
        Cubic {
            p,
            cwnd: iw,
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            epoch_start: None,
            k: 0.0,
            origin: 0.0,
            w_est: 0.0,
            min_rtt: f64::INFINITY,
            hy: HyStart {
                curr_rtt: f64::INFINITY,
                ..HyStart::default()
            },
        }
    }

    /// Why HyStart ended slow start (`delay`, `ack-train`), if it did.
    pub fn hystart_exit(&self) -> Option<&'static str> {
        self.hy.found
    }

    /// `W_max`, segments (0 before the first loss).
    pub fn w_max(&self) -> f64 {
        self.w_max
    }

    /// An ACK at `now` (s) newly acknowledged `acked` segments; `rtt` is its RTT sample (s), if
    /// any; `snd_una`/`snd_nxt` (segments) delimit HyStart's rounds. `cwnd_limited`: the sender
    /// was using its window (Linux grows the window only then).
    pub fn on_ack(
        &mut self,
        now: f64,
        acked: f64,
        rtt: Option<f64>,
        (snd_una, snd_nxt): (u64, u64),
        cwnd_limited: bool,
    ) {
        if let Some(r) = rtt.filter(|r| *r > 0.0) {
            self.min_rtt = self.min_rtt.min(r);
        }
        if self.cwnd < self.ssthresh {
            self.hystart_update(now, rtt, snd_una, snd_nxt);
        }
        if !cwnd_limited || acked <= 0.0 {
            return;
        }
        let mut acked = acked;
        if self.cwnd < self.ssthresh {
            let room = self.ssthresh - self.cwnd;
            let used = acked.min(room);
            self.cwnd += used;
            acked -= used;
            if acked <= 0.0 {
                return;
            }
        }
        self.congestion_avoidance(now, acked);
    }

    fn hystart_update(&mut self, now: f64, rtt: Option<f64>, snd_una: u64, snd_nxt: u64) {
        if !self.p.hystart || self.hy.found.is_some() {
            return;
        }
        if snd_una >= self.hy.end_seq {
            // A new round.
            self.hy.round_start = now;
            self.hy.last_ack = now;
            self.hy.end_seq = snd_nxt;
            self.hy.curr_rtt = f64::INFINITY;
            self.hy.samples = 0;
        }
        if self.cwnd < self.p.hystart_low_window || !self.min_rtt.is_finite() {
            return;
        }
        // ACK train: consecutive ACKs at most 2 ms apart for longer than half the minimum RTT
        // (Linux halves the threshold for an unpaced flow).
        if now - self.hy.last_ack <= 0.002 {
            self.hy.last_ack = now;
            if now - self.hy.round_start > self.min_rtt / 2.0 {
                self.exit_slow_start("ack-train");
                return;
            }
        }
        // Delay increase over the round's first 8 samples.
        if let Some(r) = rtt {
            if self.hy.samples < 8 {
                self.hy.curr_rtt = self.hy.curr_rtt.min(r);
                self.hy.samples += 1;
            } else {
                let eta = (self.min_rtt / 8.0).clamp(0.004, 0.016);
                if self.hy.curr_rtt > self.min_rtt + eta {
                    self.exit_slow_start("delay");
                }
            }
        }
    }

    fn exit_slow_start(&mut self, why: &'static str) {
        self.hy.found = Some(why);
        self.ssthresh = self.cwnd;
    }

    fn congestion_avoidance(&mut self, now: f64, acked: f64) {
        let beta = self.p.beta;
        let c = self.p.c;
        if self.epoch_start.is_none() {
            self.epoch_start = Some(now);
            self.w_est = self.cwnd;
            if self.w_max <= self.cwnd {
                self.k = 0.0;
                self.origin = self.cwnd;
            } else {
                self.k = ((self.w_max - self.cwnd) / c).cbrt();
                self.origin = self.w_max;
            }
        }
        let start = self.epoch_start.unwrap_or(now);
        let rtt = if self.min_rtt.is_finite() {
            self.min_rtt
        } else {
            0.0
        };
        let t = now - start + rtt;
        let target = self.origin + c * (t - self.k).powi(3);
        // Segments of ACK per one segment of growth (Linux's `cnt`).
        let mut cnt = if target > self.cwnd {
            self.cwnd / (target - self.cwnd)
        } else {
            100.0 * self.cwnd
        };
        if self.w_max == 0.0 && cnt > 20.0 {
            cnt = 20.0;
        }
        // Reno-friendly region: W_est grows by alpha per window of ACKs.
        let alpha = 3.0 * (1.0 - beta) / (1.0 + beta);
        self.w_est += alpha * acked / self.cwnd;
        if self.w_est > self.cwnd {
            cnt = cnt.min(self.cwnd / (self.w_est - self.cwnd));
        }
        let cnt = cnt.max(2.0);
        self.cwnd += acked / cnt;
    }

    /// A loss detected by duplicate ACKs / SACK (once per recovery): the new `ssthresh`
    /// (also the window the sender's recovery steers to), and the epoch restarts.
    pub fn on_loss(&mut self) -> f64 {
        self.epoch_start = None;
        let w = self.cwnd;
        self.w_max = if w < self.w_max && self.p.fast_convergence {
            w * (1.0 + self.p.beta) / 2.0
        } else {
            w
        };
        self.ssthresh = (w * self.p.beta).max(2.0);
        self.hy.found.get_or_insert("loss");
        self.ssthresh
    }

    /// The retransmission timer fired: the loss response, then one segment.
    pub fn on_rto(&mut self) {
        self.on_loss();
        self.cwnd = 1.0;
    }

    /// Recovery ended: the window is `ssthresh` (Linux `tcp_end_cwnd_reduction`).
    pub fn end_recovery(&mut self) {
        self.cwnd = self.ssthresh;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_hystart() -> CubicParams {
        CubicParams {
            hystart: false,
            ..CubicParams::default()
        }
    }

    #[test]
    fn slow_start_adds_what_is_acked_up_to_ssthresh() {
        let mut c = Cubic::new(no_hystart(), 10.0);
        c.ssthresh = 14.0;
        c.on_ack(0.0, 2.0, Some(0.04), (0, 10), true);
        assert_eq!(c.cwnd, 12.0);
        c.on_ack(0.01, 3.0, Some(0.04), (0, 10), true);
        // 2 to reach 14, the last one in congestion avoidance (less than one segment).
        assert!(c.cwnd > 14.0 && c.cwnd < 14.2, "{}", c.cwnd);
        // Not window-limited: no growth.
        let w = c.cwnd;
        c.on_ack(0.02, 5.0, Some(0.04), (0, 10), false);
        assert_eq!(c.cwnd, w);
    }

    #[test]
    fn loss_sets_beta_and_fast_convergence_lowers_w_max() {
        let mut c = Cubic::new(no_hystart(), 100.0);
        assert!((c.on_loss() - 70.0).abs() < 0.1);
        assert_eq!(c.w_max(), 100.0);
        // A second loss below the last W_max: fast convergence.
        c.cwnd = 80.0;
        c.on_loss();
        assert!((c.w_max() - 80.0 * (1.0 + 717.0 / 1024.0) / 2.0).abs() < 1e-9);
        c.cwnd = 2.0;
        assert_eq!(c.on_loss(), 2.0, "ssthresh floor");
    }

    /// Drives congestion avoidance with one window of ACKs per RTT for `secs` seconds.
    fn grow(c: &mut Cubic, t0: f64, rtt: f64, secs: f64) -> Vec<(f64, f64)> {
        let mut t = t0;
        let mut out = Vec::new();
        while t < t0 + secs {
            let w = c.cwnd;
            let n = w.floor().max(1.0) as usize;
            for i in 0..n {
                c.on_ack(t + rtt * i as f64 / n as f64, 1.0, Some(rtt), (0, 0), true);
            }
            t += rtt;
            out.push((t, c.cwnd));
        }
        out
    }

    #[test]
    fn window_follows_the_cubic_one_rtt_ahead() {
        // W_max 100, beta 0.7: K = cbrt(100 * 0.3 / 0.4) = 4.217 s. Each RTT the window moves
        // to W(t + RTT) (Linux looks one RTT ahead): concave up to W_max, a plateau around K,
        // convex after.
        let mut c = Cubic::new(no_hystart(), 100.0);
        c.on_loss();
        c.end_recovery();
        assert!((c.cwnd - 70.0).abs() < 0.1);
        let rtt = 0.1;
        let tr = grow(&mut c, 0.0, rtt, 9.0);
        let k = (100.0f64 * 0.3 / 0.4).cbrt();
        let w = |t: f64| 100.0 + 0.4 * (t - k).powi(3);
        for t in [0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0] {
            let got = tr.iter().find(|(x, _)| *x >= t - 1e-9).unwrap().1;
            // Within the growth of the last RTT (the window moves there ACK by ACK).
            assert!(
                (got - w(t + rtt)).abs() < 2.5,
                "t {t}: cwnd {got}, W(t+RTT) {}",
                w(t + rtt)
            );
        }
    }

    #[test]
    fn reno_friendly_region_wins_at_small_windows() {
        // W_max 10, RTT 10 ms: K = 1.9 s, the cubic is nearly flat for a long time, so the
        // Reno-friendly estimate (alpha = 0.53 per RTT) sets the pace: about 0.53 per RTT.
        let mut c = Cubic::new(no_hystart(), 10.0);
        c.on_loss();
        c.end_recovery();
        let tr = grow(&mut c, 0.0, 0.01, 0.5);
        let per_rtt = (tr.last().unwrap().1 - 7.0) / tr.len() as f64;
        assert!((per_rtt - 0.53).abs() < 0.12, "{per_rtt} segments per RTT");
    }

    #[test]
    fn hystart_delay_test_ends_slow_start() {
        let mut c = Cubic::new(CubicParams::default(), 10.0);
        // Round 1: min RTT 40 ms, window grows to 20.
        let mut una = 0;
        for i in 0..10 {
            c.on_ack(i as f64 * 0.004, 1.0, Some(0.040), (una, 10), true);
            una += 1;
        }
        assert!(c.cwnd >= 16.0);
        assert_eq!(c.hystart_exit(), None);
        // Round 2: RTTs 46 ms (> 40 + max(5, 4) ms): after 8 samples, slow start ends.
        for i in 0..12 {
            c.on_ack(0.1 + i as f64 * 0.004, 1.0, Some(0.046), (una, 40), true);
            una += 1;
        }
        assert_eq!(c.hystart_exit(), Some("delay"));
        // ssthresh is the window at the exit; the window only creeps on from there.
        assert!(c.ssthresh.is_finite() && c.ssthresh <= c.cwnd && c.cwnd < c.ssthresh + 1.0);
    }

    #[test]
    fn hystart_ack_train_ends_slow_start() {
        let mut c = Cubic::new(CubicParams::default(), 20.0);
        c.min_rtt = 0.040;
        // ACKs 1 ms apart, no RTT increase: the train passes 20 ms (half the RTT).
        for i in 0..30 {
            c.on_ack(1.0 + i as f64 * 0.001, 1.0, Some(0.040), (i, 100), true);
            if c.hystart_exit().is_some() {
                assert!(i >= 20);
                break;
            }
        }
        assert_eq!(c.hystart_exit(), Some("ack-train"));
    }
}
