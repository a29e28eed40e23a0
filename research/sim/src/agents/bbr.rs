//! BBR v1's model and control (Cardwell et al. 2016; draft-cardwell-iccrg-bbr-congestion-control
//! -00) as Linux's `tcp_bbr` runs it (the module the testbed's iperf3 `-C bbr` flows use; the
//! kernel here is 6.x, whose mainline BBR is v1).
//!
//! Only the model and the two control outputs live here: the pacing rate and the congestion
//! window, in segments. The sender ([`crate::agents::linux_tcp`]) measures delivery-rate
//! samples, detects losses and paces.
//!
//! - Model: `BtlBw` = windowed maximum of delivery-rate samples over 10 round trips (samples
//!   taken while application-limited only if they raise it); `RTprop` = minimum RTT over 10 s.
//! - States: Startup (pacing and window gain 2/ln 2 = 2.885) until the bandwidth grew less than
//!   25 % in three rounds; Drain (pacing gain 1/2.885) until the data in flight is one BDP;
//!   ProbeBW cycling the pacing gain through 5/4, 3/4, 1 × 6 (a phase lasts one `RTprop`;
//!   5/4 until the flight reaches 5/4 BDP or a loss, 3/4 ends early at one BDP), starting at a
//!   random phase other than 3/4; ProbeRTT (window 4 for 200 ms and one round) when `RTprop`
//!   is 10 s old.
//! - Window: `2·BDP` plus Linux's quantization budget (3 × 2 segments, rounded up to even, 2
//!   more in the 5/4 phase), grown by what each ACK delivers; at least 4.
//! - Losses: packet conservation for the first round of a recovery (`cwnd = in flight +
//!   delivered`), the window from before the recovery restored at its end; a timeout restarts
//!   from one segment with the same conservation.
//! - Pacing: `gain × BtlBw × 0.99` (Linux paces 1 % below the estimate), never lowered before
//!   the pipe is full.
//!
//! Not modelled (Linux has them): the long-term policer detector (`lt_bw`), the ACK
//! aggregation allowance (`extra_acked`, small without ACK thinning), TSO autosizing.

use netmodel::rng::Rng;

const HIGH_GAIN: f64 = 2885.0 / 1000.0;
const CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
const BW_ROUNDS: u64 = 10;
const MIN_RTT_WIN_S: f64 = 10.0;
const PROBE_RTT_S: f64 = 0.2;
const MIN_CWND: f64 = 4.0;

/// One delivery-rate sample (draft-cheng-iccrg-delivery-rate-estimation), built by the sender
/// for every ACK that delivered something.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RateSample {
    /// Segments delivered in the sample's interval, and its length (s).
    pub delivered: f64,
    pub interval_s: f64,
    /// `C.delivered` when the sample's newest packet was sent (round counting).
    pub prior_delivered: u64,
    /// The sample's newest packet was sent while the sender had nothing to send.
    pub app_limited: bool,
    /// RTT of the newest packet this ACK delivered, s.
    pub rtt_s: Option<f64>,
    /// Segments this ACK newly delivered (cumulatively or selectively), and newly marked lost.
    pub acked: f64,
    pub losses: f64,
    /// Segments in flight before this ACK.
    pub prior_in_flight: f64,
}

/// BBR's states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    Startup,
    Drain,
    ProbeBw,
    ProbeRtt,
}

/// One connection's BBR state.
#[derive(Clone, Debug)]
pub struct Bbr {
    mode: Mode,
    /// Congestion window, segments.
    pub cwnd: f64,
    /// Pacing rate, segments/s.
    pub pacing: f64,
    pacing_gain: f64,
    cwnd_gain: f64,
    /// (round, sample) pairs of the bandwidth window.
    bw: Vec<(u64, f64)>,
    round: u64,
    next_round_delivered: u64,
    round_start: bool,
    min_rtt: f64,
    min_rtt_at: f64,
    full_bw: f64,
    full_bw_count: u32,
    full_bw_reached: bool,
    cycle_idx: usize,
    cycle_at: f64,
    probe_rtt_done: Option<f64>,
    probe_rtt_round_done: bool,
    prior_cwnd: f64,
    in_recovery: bool,
    conservation: bool,
    init_cwnd: f64,
    has_seen_rtt: bool,
    rng: Rng,
}

impl Bbr {
    /// A connection in Startup with the initial window `iw` (Linux: 10); `seed` draws the
    /// first ProbeBW phase.
    pub fn new(iw: f64, seed: u64) -> Bbr {
        Bbr {
            mode: Mode::Startup,
            cwnd: iw,
            // Linux: high_gain × iw / RTT with RTT 1 ms until the first sample.
            pacing: HIGH_GAIN * iw / 0.001,
            pacing_gain: HIGH_GAIN,
            cwnd_gain: HIGH_GAIN,
            bw: Vec::new(),
            round: 0,
            next_round_delivered: 0,
            round_start: false,
            min_rtt: f64::INFINITY,
            min_rtt_at: 0.0,
            full_bw: 0.0,
            full_bw_count: 0,
            full_bw_reached: false,
            cycle_idx: 0,
            cycle_at: 0.0,
            probe_rtt_done: None,
            probe_rtt_round_done: false,
            prior_cwnd: iw,
            in_recovery: false,
            conservation: false,
            init_cwnd: iw,
            has_seen_rtt: false,
            rng: Rng::new(seed),
        }
    }

    /// The current state.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// `BtlBw`, segments/s (0 before the first sample).
    pub fn btl_bw(&self) -> f64 {
        self.bw.iter().map(|x| x.1).fold(0.0, f64::max)
    }

    /// `RTprop`, s (infinite before the first sample).
    pub fn min_rtt(&self) -> f64 {
        self.min_rtt
    }

    /// Whether Startup found the pipe full.
    pub fn full_bw_reached(&self) -> bool {
        self.full_bw_reached
    }

    fn bdp(&self, gain: f64) -> f64 {
        let bw = self.btl_bw();
        if !self.min_rtt.is_finite() || bw <= 0.0 {
            // No model yet: the initial window scaled by the gain (Linux `TCP_INIT_CWND`).
            return gain * self.init_cwnd;
        }
        gain * bw * self.min_rtt
    }

    fn target_cwnd(&self, gain: f64) -> f64 {
        // Quantization budget: 3 TSO bursts of 2 segments, rounded up to an even count.
        let mut w = (self.bdp(gain) + 6.0).ceil();
        if w % 2.0 != 0.0 {
            w += 1.0;
        }
        if self.mode == Mode::ProbeBw && self.cycle_idx == 0 {
            w += 2.0;
        }
        w
    }

    /// The sender entered loss recovery with `in_flight` segments outstanding.
    pub fn enter_recovery(&mut self, in_flight: f64, delivered_total: u64) {
        self.save_cwnd();
        self.in_recovery = true;
        self.conservation = true;
        self.next_round_delivered = delivered_total;
        self.cwnd = in_flight.max(1.0);
    }

    /// Recovery ended: the window from before it is restored (if larger).
    pub fn exit_recovery(&mut self) {
        self.in_recovery = false;
        self.conservation = false;
        self.cwnd = self.cwnd.max(self.prior_cwnd);
    }

    /// The retransmission timer fired: one segment, then conservation as in a recovery.
    pub fn on_rto(&mut self, delivered_total: u64) {
        self.save_cwnd();
        self.in_recovery = true;
        self.conservation = true;
        self.next_round_delivered = delivered_total;
        self.cwnd = 1.0;
        // Linux resets the full-bandwidth search only on an idle restart, not here.
    }

    fn save_cwnd(&mut self) {
        self.prior_cwnd = if !self.in_recovery && self.mode != Mode::ProbeRtt {
            self.cwnd
        } else {
            self.prior_cwnd.max(self.cwnd)
        };
    }

    /// An ACK at `now` (s): update the model with `rs`, then the pacing rate and window.
    /// `delivered_total` is the connection's `C.delivered`, `in_flight` the segments in flight
    /// after the ACK.
    pub fn on_ack(&mut self, now: f64, rs: &RateSample, delivered_total: u64, in_flight: f64) {
        self.update_bw(rs, delivered_total);
        self.update_cycle(now, rs);
        self.check_full_bw();
        self.check_drain(in_flight, now);
        self.update_min_rtt(now, rs, in_flight, delivered_total);
        // Gains by state.
        match self.mode {
            Mode::Startup => {
                self.pacing_gain = HIGH_GAIN;
                self.cwnd_gain = HIGH_GAIN;
            }
            Mode::Drain => {
                self.pacing_gain = 1.0 / HIGH_GAIN;
                self.cwnd_gain = HIGH_GAIN;
            }
            Mode::ProbeBw => {
                self.pacing_gain = CYCLE[self.cycle_idx];
                self.cwnd_gain = 2.0;
            }
            Mode::ProbeRtt => {
                self.pacing_gain = 1.0;
                self.cwnd_gain = 1.0;
            }
        }
        if !self.has_seen_rtt {
            if let Some(r) = rs.rtt_s.filter(|r| *r > 0.0) {
                // Linux `bbr_init_pacing_rate_from_rtt`: the first RTT replaces the 1-ms guess.
                self.has_seen_rtt = true;
                self.pacing = HIGH_GAIN * self.cwnd.max(self.init_cwnd) / r;
            }
        }
        self.set_pacing();
        self.set_cwnd(rs, in_flight);
    }

    fn update_bw(&mut self, rs: &RateSample, delivered_total: u64) {
        self.round_start = false;
        if rs.delivered <= 0.0 || rs.interval_s <= 0.0 {
            return;
        }
        if rs.prior_delivered >= self.next_round_delivered {
            self.next_round_delivered = delivered_total;
            self.round += 1;
            self.round_start = true;
            self.conservation = false;
        }
        let bw = rs.delivered / rs.interval_s;
        if !rs.app_limited || bw >= self.btl_bw() {
            self.bw.push((self.round, bw));
        }
        let r = self.round;
        self.bw.retain(|x| x.0 + BW_ROUNDS > r);
        // Keep only samples that can still be the maximum.
        let mut keep: Vec<(u64, f64)> = Vec::with_capacity(self.bw.len());
        for &(rr, b) in self.bw.iter().rev() {
            if keep.iter().all(|k| k.1 < b) {
                keep.push((rr, b));
            }
        }
        keep.reverse();
        self.bw = keep;
    }

    fn update_cycle(&mut self, now: f64, rs: &RateSample) {
        if self.mode != Mode::ProbeBw {
            return;
        }
        let full_length = now - self.cycle_at > self.min_rtt;
        let g = self.pacing_gain;
        let next = if g == 1.0 {
            full_length
        } else if g > 1.0 {
            full_length && (rs.losses > 0.0 || rs.prior_in_flight >= self.bdp(g))
        } else {
            full_length || rs.prior_in_flight <= self.bdp(1.0)
        };
        if next {
            self.cycle_idx = (self.cycle_idx + 1) % CYCLE.len();
            self.cycle_at = now;
        }
    }

    fn check_full_bw(&mut self) {
        if self.full_bw_reached || !self.round_start {
            return;
        }
        let bw = self.btl_bw();
        if bw >= self.full_bw * 1.25 {
            self.full_bw = bw;
            self.full_bw_count = 0;
            return;
        }
        self.full_bw_count += 1;
        if self.full_bw_count >= 3 {
            self.full_bw_reached = true;
        }
    }

    fn enter_probe_bw(&mut self, now: f64) {
        self.mode = Mode::ProbeBw;
        // Any phase but the 3/4 one (Linux: CYCLE_LEN - 1 - random(7)), then advance.
        let r = (self.rng.f64() * 7.0) as usize;
        self.cycle_idx = (CYCLE.len() - 1 - r.min(6) + 1) % CYCLE.len();
        self.cycle_at = now;
    }

    fn check_drain(&mut self, in_flight: f64, now: f64) {
        if self.mode == Mode::Startup && self.full_bw_reached {
            self.mode = Mode::Drain;
        }
        if self.mode == Mode::Drain && in_flight <= self.bdp(1.0) {
            self.enter_probe_bw(now);
        }
    }

    fn update_min_rtt(&mut self, now: f64, rs: &RateSample, in_flight: f64, delivered: u64) {
        let expired = now > self.min_rtt_at + MIN_RTT_WIN_S;
        if let Some(r) = rs.rtt_s.filter(|r| *r > 0.0) {
            if r <= self.min_rtt || expired {
                self.min_rtt = r;
                self.min_rtt_at = now;
            }
        }
        if expired && self.mode != Mode::ProbeRtt {
            self.mode = Mode::ProbeRtt;
            self.save_cwnd();
            self.probe_rtt_done = None;
        }
        if self.mode == Mode::ProbeRtt {
            match self.probe_rtt_done {
                None if in_flight <= MIN_CWND => {
                    self.probe_rtt_done = Some(now + PROBE_RTT_S);
                    self.probe_rtt_round_done = false;
                    self.next_round_delivered = delivered;
                }
                None => {}
                Some(done) => {
                    if self.round_start {
                        self.probe_rtt_round_done = true;
                    }
                    if self.probe_rtt_round_done && now > done {
                        self.min_rtt_at = now;
                        self.cwnd = self.cwnd.max(self.prior_cwnd);
                        if self.full_bw_reached {
                            self.enter_probe_bw(now);
                        } else {
                            self.mode = Mode::Startup;
                        }
                    }
                }
            }
        }
    }

    fn set_pacing(&mut self) {
        let bw = self.btl_bw();
        if bw <= 0.0 {
            if self.min_rtt.is_finite() {
                self.pacing = HIGH_GAIN * self.init_cwnd / self.min_rtt;
            }
            return;
        }
        let rate = self.pacing_gain * bw * 0.99;
        if self.full_bw_reached || rate > self.pacing {
            self.pacing = rate;
        }
    }

    fn set_cwnd(&mut self, rs: &RateSample, in_flight: f64) {
        if rs.acked > 0.0 || rs.losses > 0.0 {
            if rs.losses > 0.0 {
                self.cwnd = (self.cwnd - rs.losses).max(1.0);
            }
            if self.conservation {
                self.cwnd = self.cwnd.max(in_flight + rs.acked);
            } else {
                let target = self.target_cwnd(self.cwnd_gain);
                if self.full_bw_reached {
                    self.cwnd = (self.cwnd + rs.acked).min(target);
                } else if self.cwnd < target || rs.prior_delivered < self.init_cwnd as u64 {
                    self.cwnd += rs.acked;
                }
                self.cwnd = self.cwnd.max(MIN_CWND);
            }
        }
        if self.mode == Mode::ProbeRtt {
            self.cwnd = self.cwnd.min(MIN_CWND);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds a steady pipe: `bw` segments/s, RTT `rtt`, one ACK per segment, for `secs`.
    fn run(b: &mut Bbr, t0: f64, bw: f64, rtt: f64, secs: f64, delivered: &mut u64) -> f64 {
        let mut t = t0;
        let dt = 1.0 / bw;
        while t < t0 + secs {
            *delivered += 1;
            let rs = RateSample {
                delivered: bw * rtt,
                interval_s: rtt,
                prior_delivered: delivered.saturating_sub((bw * rtt) as u64),
                app_limited: false,
                rtt_s: Some(rtt),
                acked: 1.0,
                losses: 0.0,
                prior_in_flight: b.cwnd.min(b.pacing * rtt * (b.pacing / bw).max(1.0)),
            };
            // In flight: what the window and the pacing rate allow over one RTT, the RTT
            // stretched by the queue a pacing rate above the bottleneck builds.
            let inflight = b.cwnd.min(b.pacing * rtt * (b.pacing / bw).max(1.0));
            b.on_ack(t, &rs, *delivered, inflight);
            t += dt;
        }
        t
    }

    #[test]
    fn startup_finds_the_pipe_then_probe_bw_at_two_bdp() {
        let mut b = Bbr::new(10.0, 1);
        let mut d = 0;
        // 1000 segments/s, 40 ms: BDP 40 segments.
        let t = run(&mut b, 0.0, 1000.0, 0.04, 2.0, &mut d);
        assert!(b.full_bw_reached());
        assert_eq!(b.mode(), Mode::ProbeBw);
        assert!((b.btl_bw() - 1000.0).abs() < 1.0);
        assert!((b.min_rtt() - 0.04).abs() < 1e-9);
        // Window: 2 BDP + quantization budget.
        assert!(b.cwnd >= 86.0 && b.cwnd <= 90.0, "cwnd {}", b.cwnd);
        // Pacing cycles through 1.25 and 0.75 of 0.99 x BtlBw.
        let mut seen = Vec::new();
        let mut t2 = t;
        for _ in 0..800 {
            t2 = run(&mut b, t2, 1000.0, 0.04, 0.001, &mut d);
            seen.push((b.pacing / 990.0 * 100.0).round() as i64);
        }
        assert!(
            seen.contains(&125) && seen.contains(&75) && seen.contains(&100),
            "{seen:?}"
        );
    }

    #[test]
    fn probe_rtt_every_ten_seconds_caps_the_window_at_four() {
        let mut b = Bbr::new(10.0, 2);
        let mut d = 0;
        let mut t = run(&mut b, 0.0, 1000.0, 0.04, 9.0, &mut d);
        assert_ne!(b.mode(), Mode::ProbeRtt);
        // RTT samples above the minimum from now on: 10 s after the last 40-ms sample the
        // minimum expires.
        let mut entered = None;
        while t < 20.0 {
            t = run(&mut b, t, 1000.0, 0.05, 0.01, &mut d);
            if b.mode() == Mode::ProbeRtt && entered.is_none() {
                entered = Some(t);
                assert_eq!(b.cwnd, 4.0);
            }
        }
        let e = entered.expect("ProbeRTT entered");
        assert!((e - 19.0).abs() < 0.1, "entered at {e}");
        // It left after 200 ms and restored the window.
        assert_ne!(b.mode(), Mode::ProbeRtt);
        assert!(b.cwnd > 50.0);
    }

    #[test]
    fn recovery_conserves_packets_and_restores_the_window() {
        let mut b = Bbr::new(10.0, 3);
        let mut d = 0;
        let t = run(&mut b, 0.0, 1000.0, 0.04, 2.0, &mut d);
        let before = b.cwnd;
        b.enter_recovery(60.0, d);
        assert_eq!(b.cwnd, 60.0);
        let rs = RateSample {
            delivered: 40.0,
            interval_s: 0.04,
            prior_delivered: d - 40,
            acked: 1.0,
            losses: 2.0,
            rtt_s: Some(0.04),
            prior_in_flight: 60.0,
            app_limited: false,
        };
        b.on_ack(t, &rs, d + 1, 57.0);
        // cwnd = max(60 - 2 losses, in flight + acked) = 58.
        assert_eq!(b.cwnd, 58.0);
        b.exit_recovery();
        assert_eq!(b.cwnd, before);
    }
}
