//! TFRC sender (RFC 5348 §4; dissertation §3.x for the equation and the rate rule).
//!
//! Inputs: [`TfrcSender::handle_feedback`] with each feedback packet, [`TfrcSender::handle_timeout`]
//! at the deadline of [`TfrcSender::poll_timeout`] (the nofeedback timer). Outputs: the allowed
//! rate ([`TfrcSender::poll_rate`]) and the fields to stamp on each data packet
//! ([`TfrcSender::data_header`]). Pacing at that rate is the host's job (§1.11 of the spec,
//! [`congestion::tfmcc::Pacer`] implements it).
//!
//! Simplification (documented in `docs/protocols/tfrc.md`): the sender is assumed never to be
//! data-limited or idle, so RFC 5348's data-limited branches and `recover_rate` exception are
//! not implemented.

use congestion::tfrc::equation::tcp_throughput;
use congestion::tfrc::T_MBI_S;
use proto::time::Time;
use proto::wire::tfrc::{TfrcDataFields, TfrcFeedback};
use std::time::Duration;

/// Sender parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TfrcSenderConfig {
    /// Packet size `s` in bytes.
    pub packet_size: u32,
    /// RTT EWMA filter constant `q` (`R = q R + (1-q) R_sample`), 0.9.
    pub rtt_filter: f64,
    /// RFC 5348 §4.5 oscillation reduction (`X_inst = X R_sqmean / sqrt(R_sample)`).
    pub oscillation_reduction: bool,
}

impl Default for TfrcSenderConfig {
    fn default() -> Self {
        TfrcSenderConfig {
            packet_size: 1000,
            rtt_filter: 0.9,
            oscillation_reduction: false,
        }
    }
}

/// A snapshot of the sender's state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TfrcSenderStats {
    /// Allowed rate X, bytes/s.
    pub x_bps: f64,
    /// Rate from the equation at the last feedback, bytes/s (infinite before any loss).
    pub x_calc_bps: f64,
    /// Smoothed RTT, seconds.
    pub rtt_s: Option<f64>,
    /// Last reported loss event rate.
    pub p: f64,
    /// Feedback packets used.
    pub feedbacks: u64,
    /// Nofeedback timer expiries.
    pub nofeedback_expiries: u64,
}

/// The TFRC sender.
#[derive(Clone, Debug)]
pub struct TfrcSender {
    cfg: TfrcSenderConfig,
    s: f64,
    x: f64,
    x_calc: f64,
    rtt: Option<f64>,
    r_sqmean: f64,
    last_sample: f64,
    p: f64,
    tld: Option<Time>,
    first_feedback_at: Option<Time>,
    /// `X_recv_set`: (time, value); starts as {Infinity}.
    x_recv_set: Vec<(Time, f64)>,
    nofeedback_at: Time,
    seq: u32,
    feedbacks: u64,
    expiries: u64,
    started: bool,
}

impl TfrcSender {
    /// A sender that will start at 1 packet/s with a 2 s nofeedback timer (RFC 5348 §4.2).
    pub fn new(cfg: TfrcSenderConfig) -> Self {
        let s = cfg.packet_size.max(1) as f64;
        TfrcSender {
            cfg,
            s,
            x: s,
            x_calc: f64::INFINITY,
            rtt: None,
            r_sqmean: 0.0,
            last_sample: 0.0,
            p: 0.0,
            tld: None,
            first_feedback_at: None,
            x_recv_set: vec![(Time::ZERO, f64::INFINITY)],
            nofeedback_at: Time::NEVER,
            seq: 0,
            feedbacks: 0,
            expiries: 0,
            started: false,
        }
    }

    fn floor(&self) -> f64 {
        self.s / T_MBI_S
    }

    /// `initial_rate = W_init / R`, `W_init = min(4 s, max(2 s, 4380))`.
    fn initial_rate(&self, r: f64) -> f64 {
        let w_init = (4.0 * self.s).min((2.0 * self.s).max(4380.0));
        w_init / r.max(1e-6)
    }

    /// The fields for the next data packet, stamped at `now`. Starts the nofeedback timer on
    /// the first call.
    pub fn data_header(&mut self, now: Time) -> TfrcDataFields {
        if !self.started {
            self.started = true;
            self.nofeedback_at = now + Duration::from_secs(2);
        }
        let f = TfrcDataFields {
            seq: self.seq,
            ts_us: now.as_micros() as u32,
            rtt_us: self.rtt.map(|r| (r * 1e6).round() as u32).unwrap_or(0),
        };
        self.seq = self.seq.wrapping_add(1);
        f
    }

    /// The allowed sending rate in **bit/s** (`X_inst` if oscillation reduction is on).
    pub fn poll_rate(&self) -> f64 {
        8.0 * self.rate_bytes()
    }

    /// The allowed sending rate in bytes/s.
    pub fn rate_bytes(&self) -> f64 {
        if self.cfg.oscillation_reduction && self.last_sample > 0.0 && self.r_sqmean > 0.0 {
            (self.x * self.r_sqmean / self.last_sample.sqrt()).max(self.floor())
        } else {
            self.x
        }
    }

    /// When [`handle_timeout`](Self::handle_timeout) is needed (the nofeedback timer).
    pub fn poll_timeout(&self) -> Option<Time> {
        (self.nofeedback_at != Time::NEVER).then_some(self.nofeedback_at)
    }

    /// Statistics.
    pub fn stats(&self) -> TfrcSenderStats {
        TfrcSenderStats {
            x_bps: self.x,
            x_calc_bps: self.x_calc,
            rtt_s: self.rtt,
            p: self.p,
            feedbacks: self.feedbacks,
            nofeedback_expiries: self.expiries,
        }
    }

    fn rto(&self) -> Duration {
        match self.rtt {
            Some(r) => Duration::from_secs_f64((4.0 * r).max(2.0 * self.s / self.x).min(1e6)),
            None => Duration::from_secs(2),
        }
    }

    fn recv_limit(&self) -> f64 {
        2.0 * self
            .x_recv_set
            .iter()
            .map(|e| e.1)
            .fold(0.0f64, |a, b| a.max(b))
    }

    /// A feedback packet arrived. Malformed timing (an echo from the future) is ignored
    /// for the RTT but the rest is used.
    pub fn handle_feedback(&mut self, now: Time, fb: &TfrcFeedback) {
        self.feedbacks += 1;
        // 1) RTT sample: now - ts_echo - t_delay, all modulo 2^32 us.
        let now32 = now.as_micros() as u32;
        let elapsed = now32.wrapping_sub(fb.ts_echo_us);
        let sample_us = elapsed.wrapping_sub(fb.t_delay_us);
        let sample_ok = elapsed < (1 << 31) && sample_us < (1 << 31) && elapsed >= fb.t_delay_us;
        let first = self.rtt.is_none();
        if sample_ok {
            let sample = (sample_us as f64 / 1e6).max(1e-6);
            self.last_sample = sample;
            match self.rtt {
                None => {
                    self.rtt = Some(sample);
                    self.r_sqmean = sample.sqrt();
                }
                Some(r) => {
                    let q = self.cfg.rtt_filter;
                    self.rtt = Some(q * r + (1.0 - q) * sample);
                    self.r_sqmean = q * self.r_sqmean + (1.0 - q) * sample.sqrt();
                }
            }
        }
        let Some(r) = self.rtt else {
            // No usable RTT yet: nothing else can be computed.
            return;
        };
        // 4) X_recv_set: Update (keep values from the last two RTTs). The initial Infinity
        // ages out after 2 RTTs, as the RFC intends.
        let x_recv = fb.x_recv_bps as f64;
        self.x_recv_set.push((now, x_recv));
        let horizon = now - Duration::from_secs_f64(2.0 * r);
        self.x_recv_set
            .retain(|e| e.0 >= horizon || e.1.is_infinite());
        if self.x_recv_set.iter().any(|e| e.1.is_infinite())
            && self
                .first_feedback_at
                .is_some_and(|t| now - t >= Duration::from_secs_f64(2.0 * r))
        {
            self.x_recv_set.retain(|e| e.1.is_finite());
        }
        self.p = fb.p();
        if first {
            // RFC 5348 §4.2: the first feedback sets X = initial_rate, tld = now.
            self.x = self.initial_rate(r);
            self.tld = Some(now);
            self.first_feedback_at = Some(now);
            if self.p > 0.0 {
                self.update_from_equation(r);
            }
        } else if self.p > 0.0 {
            self.update_from_equation(r);
        } else if self
            .tld
            .is_none_or(|t| now - t >= Duration::from_secs_f64(r))
        {
            // Slow start: X = max(min(2X, recv_limit), initial_rate), once per RTT.
            self.x = (2.0 * self.x)
                .min(self.recv_limit())
                .max(self.initial_rate(r));
            self.tld = Some(now);
        }
        // 6) restart the nofeedback timer.
        self.nofeedback_at = now + self.rto();
    }

    fn update_from_equation(&mut self, r: f64) {
        self.x_calc = tcp_throughput(self.s, r, self.p);
        self.x = self.x_calc.min(self.recv_limit()).max(self.floor());
    }

    /// The nofeedback timer may have expired (RFC 5348 §4.4, without the idle exception).
    pub fn handle_timeout(&mut self, now: Time) {
        if now < self.nofeedback_at || self.nofeedback_at == Time::NEVER {
            return;
        }
        self.expiries += 1;
        let x_recv = self
            .x_recv_set
            .iter()
            .map(|e| e.1)
            .filter(|v| v.is_finite())
            .fold(0.0f64, f64::max);
        match self.rtt {
            Some(r) if self.p > 0.0 => {
                let limit = if self.x_calc > 2.0 * x_recv {
                    x_recv
                } else {
                    self.x_calc / 2.0
                };
                // Update_Limits(limit).
                let limit = limit.max(self.floor());
                self.x_recv_set = vec![(now, limit / 2.0)];
                self.update_from_equation(r);
            }
            _ => {
                self.x = (self.x / 2.0).max(self.floor());
                if self.rtt.is_some() {
                    // Keep slow start from jumping straight back: limit by what was received.
                    self.x_recv_set = vec![(now, self.x / 2.0)];
                }
            }
        }
        self.nofeedback_at = now + self.rto();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proto::wire::tfrc::encode_p;

    fn fb(ts: u32, delay: u32, x_recv: u32, p: f64) -> TfrcFeedback {
        TfrcFeedback {
            ts_echo_us: ts,
            t_delay_us: delay,
            x_recv_bps: x_recv,
            p_fixed: encode_p(p),
            auth: Default::default(),
        }
    }

    #[test]
    fn rtt_sample_subtracts_hold_time_and_smooths() {
        let mut s = TfrcSender::new(TfrcSenderConfig::default());
        let h = s.data_header(Time::from_millis(1000));
        s.handle_feedback(Time::from_millis(1110), &fb(h.ts_us, 10_000, 0, 0.0));
        assert!((s.stats().rtt_s.unwrap() - 0.1).abs() < 1e-9);
        let h = s.data_header(Time::from_millis(2000));
        s.handle_feedback(Time::from_millis(2200), &fb(h.ts_us, 0, 10_000, 0.0));
        assert!((s.stats().rtt_s.unwrap() - 0.11).abs() < 1e-9);
    }

    #[test]
    fn first_feedback_sets_initial_rate_and_equation_limits() {
        let mut s = TfrcSender::new(TfrcSenderConfig::default());
        assert_eq!(s.rate_bytes(), 1000.0);
        let h = s.data_header(Time::ZERO);
        s.handle_feedback(Time::from_millis(100), &fb(h.ts_us, 0, 0, 0.0));
        // W_init = min(4000, max(2000, 4380)) = 4000 B per 100 ms.
        assert!((s.rate_bytes() - 40_000.0).abs() < 1e-6);
        let h = s.data_header(Time::from_millis(150));
        s.handle_feedback(Time::from_millis(250), &fb(h.ts_us, 0, 40_000, 0.01));
        // recv_limit is still Infinity during the first two RTTs (RFC 5348 §4.3).
        let want = tcp_throughput(1000.0, 0.1, 0.01);
        assert!((s.rate_bytes() - want).abs() < 1.0, "{}", s.rate_bytes());
    }

    /// Slow start doubles at most once per RTT and never above 2 X_recv.
    #[test]
    fn slow_start_doubles_per_rtt_limited_by_receive_rate() {
        let mut s = TfrcSender::new(TfrcSenderConfig::default());
        let mut t = 0u64;
        let h = s.data_header(Time::from_millis(t));
        s.handle_feedback(Time::from_millis(t + 100), &fb(h.ts_us, 0, 0, 0.0));
        let x0 = s.rate_bytes();
        // Feedback every 50 ms: only every second one may double.
        let mut xs = vec![x0];
        for _ in 0..8 {
            t += 50;
            let h = s.data_header(Time::from_millis(t));
            s.handle_feedback(Time::from_millis(t + 100), &fb(h.ts_us, 0, 1_000_000, 0.0));
            xs.push(s.rate_bytes());
        }
        for w in xs.windows(2) {
            assert!(w[1] <= 2.0 * w[0] + 1e-9);
        }
        assert!(xs[8] >= 8.0 * x0 && xs[8] <= 16.0 * x0, "{xs:?}");
        // Receive rate of 50 kB/s caps slow start at 100 kB/s once the Infinity aged out.
        for _ in 0..10 {
            t += 100;
            let h = s.data_header(Time::from_millis(t));
            s.handle_feedback(Time::from_millis(t + 100), &fb(h.ts_us, 0, 50_000, 0.0));
        }
        assert!(s.rate_bytes() <= 100_000.0 + 1e-6, "{}", s.rate_bytes());
    }

    /// E5 in miniature: every nofeedback expiry halves X, down to s / 64 s.
    #[test]
    fn nofeedback_halves_down_to_floor() {
        let mut s = TfrcSender::new(TfrcSenderConfig::default());
        let h = s.data_header(Time::ZERO);
        s.handle_feedback(Time::from_millis(100), &fb(h.ts_us, 0, 0, 0.0));
        let h = s.data_header(Time::from_millis(200));
        s.handle_feedback(Time::from_millis(300), &fb(h.ts_us, 0, 200_000, 0.001));
        let mut prev = s.rate_bytes();
        let mut n = 0;
        while let Some(t) = s.poll_timeout() {
            s.handle_timeout(t);
            let x = s.rate_bytes();
            assert!(x <= prev / 2.0 + 1e-9 || (x - 1000.0 / 64.0).abs() < 1e-9);
            assert!(x >= 1000.0 / 64.0 - 1e-9);
            prev = x;
            n += 1;
            if n > 40 {
                break;
            }
        }
        assert!((prev - 1000.0 / 64.0).abs() < 1e-9, "{prev}");
    }

    #[test]
    fn echo_from_the_future_is_ignored() {
        let mut s = TfrcSender::new(TfrcSenderConfig::default());
        s.data_header(Time::ZERO);
        s.handle_feedback(
            Time::from_millis(100),
            &fb((Time::from_millis(500).as_micros()) as u32, 0, 0, 0.0),
        );
        assert!(s.stats().rtt_s.is_none());
    }
}
