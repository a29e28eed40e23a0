//! TFRC receiver (RFC 5348 §5–6): loss events, ALI, receive rate, feedback schedule.
//!
//! Inputs: [`TfrcReceiver::handle_data`] for each data packet (its parsed
//! [`TfrcDataFields`] and size), [`TfrcReceiver::handle_timeout`] at
//! [`TfrcReceiver::poll_timeout`]. Output: [`TfrcReceiver::poll_feedback`].

use congestion::tfrc::equation::loss_rate_for_throughput;
use congestion::tfrc::loss_history::{extend_u32, AliConfig, LossHistory};
use proto::time::Time;
use proto::wire::tfrc::{encode_p, sat_u32, TfrcDataFields, TfrcFeedback};
use std::collections::VecDeque;
use std::time::Duration;

/// Receiver parameters.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TfrcReceiverConfig {
    /// ALI parameters (n = 8, discounting on, floor 0.5).
    pub ali: AliConfig,
    /// Reordering threshold, NDUPACK = 3.
    pub ndupack: usize,
}

impl Default for TfrcReceiverConfig {
    fn default() -> Self {
        TfrcReceiverConfig {
            ali: AliConfig::default(),
            ndupack: 3,
        }
    }
}

/// The TFRC receiver.
#[derive(Clone, Debug)]
pub struct TfrcReceiver {
    history: LossHistory,
    /// (arrival, bytes) within the receive-rate window.
    arrivals: VecDeque<(Time, u32)>,
    arrivals_bytes: u64,
    first_arrival: Option<Time>,
    /// Newest data packet: its timestamp, arrival time and the sender's RTT in it.
    last_ts_us: u32,
    last_arrival: Time,
    rtt: f64,
    mean_size: f64,
    x_recv_max: f64,
    data_since_feedback: bool,
    /// When the feedback timer last expired (on time, late, or early for a new loss): the
    /// receive rate reaches back to it when that is longer ago than one RTT.
    last_expiry: Option<Time>,
    sent_on_last_expiry: bool,
    p_prev: f64,
    timer: Time,
    out: VecDeque<TfrcFeedback>,
    feedbacks: u64,
}

impl TfrcReceiver {
    /// A receiver waiting for its first data packet.
    pub fn new(cfg: TfrcReceiverConfig) -> Self {
        TfrcReceiver {
            history: LossHistory::new(cfg.ali, cfg.ndupack),
            arrivals: VecDeque::new(),
            arrivals_bytes: 0,
            first_arrival: None,
            last_ts_us: 0,
            last_arrival: Time::ZERO,
            rtt: 0.0,
            mean_size: 0.0,
            x_recv_max: 0.0,
            data_since_feedback: false,
            last_expiry: None,
            sent_on_last_expiry: true,
            p_prev: 0.0,
            timer: Time::NEVER,
            out: VecDeque::new(),
            feedbacks: 0,
        }
    }

    /// Current loss event rate.
    pub fn loss_event_rate(&self) -> f64 {
        self.history.loss_event_rate()
    }

    /// The loss history (counters, intervals).
    pub fn history(&self) -> &LossHistory {
        &self.history
    }

    /// Feedback packets produced so far.
    pub fn feedbacks(&self) -> u64 {
        self.feedbacks
    }

    /// Receive rate, bytes/s, over the last RTT, or back to the feedback timer's last expiry
    /// when that was longer ago (RFC 5348 §6.2 step 2 allows the longer interval); since the
    /// first packet if that is shorter. Over one RTT alone, a timer that fires late (the
    /// receiver held off the CPU for longer than a loopback RTT of a millisecond) sees an
    /// empty window and reports 0, which limits the sender to its minimum.
    pub fn x_recv(&self, now: Time) -> f64 {
        let Some(first) = self.first_arrival else {
            return 0.0;
        };
        let span = (now - first).as_secs_f64().clamp(1e-3, self.window(now));
        self.arrivals_bytes as f64 / span
    }

    /// The receive-rate window at `now`, seconds: one RTT (at least 1 ms), or back to the
    /// timer's last expiry.
    fn window(&self, now: Time) -> f64 {
        let rtt = self.rtt.clamp(1e-3, 1e3);
        self.last_expiry
            .map_or(rtt, |t| rtt.max((now - t).as_secs_f64()))
    }

    fn prune(&mut self, now: Time) {
        let horizon = now - Duration::from_secs_f64(self.window(now));
        while let Some(&(t, b)) = self.arrivals.front() {
            // A packet that arrived at the last expiry counts in the next report.
            if t >= horizon {
                break;
            }
            self.arrivals.pop_front();
            self.arrivals_bytes -= b as u64;
        }
    }

    /// A data packet arrived.
    pub fn handle_data(&mut self, now: Time, f: &TfrcDataFields, size: u32) {
        let first = self.first_arrival.is_none();
        if first {
            self.first_arrival = Some(now);
        }
        if f.rtt_us > 0 {
            self.rtt = f.rtt_us as f64 / 1e6;
        }
        let seq = extend_u32(self.history.highest(), f.seq);
        let newest = self.history.highest().is_none_or(|h| seq > h);
        self.mean_size = if self.mean_size == 0.0 {
            size as f64
        } else {
            0.9 * self.mean_size + 0.1 * size as f64
        };
        self.arrivals.push_back((now, size));
        self.arrivals_bytes += size as u64;
        self.prune(now);
        let x_recv = self.x_recv(now);
        // X_recv measured over at least one RTT feeds the first-loss seed (RFC 5348 §6.3.1:
        // the maximum X_recv so far approximates half the sending rate at the loss).
        if self.rtt > 0.0 && (now - self.first_arrival.unwrap_or(now)).as_secs_f64() >= self.rtt {
            self.x_recv_max = self.x_recv_max.max(x_recv);
        }
        let rtt = self.rtt;
        let out = self.history.on_packet(seq, now, rtt);
        if out.first_event {
            let r = if rtt > 0.0 { rtt } else { 0.5 };
            let s = self.mean_size.max(1.0);
            // Minimum target: 0.5 packets per RTT.
            let target = self.x_recv_max.max(x_recv).max(0.5 * s / r);
            let p = loss_rate_for_throughput(s, r, target);
            let _ = self.history.seed_first_interval(1.0 / p);
        }
        if newest {
            self.last_ts_us = f.ts_us;
            self.last_arrival = now;
        }
        self.data_since_feedback = true;
        if first {
            self.send(now);
            self.timer = if self.rtt > 0.0 {
                now + Duration::from_secs_f64(self.rtt)
            } else {
                Time::NEVER
            };
            return;
        }
        if self.rtt <= 0.0 {
            // No RTT from the sender yet: feedback for every data packet (RFC 5348 §6.3).
            self.send(now);
            return;
        }
        if self.timer == Time::NEVER {
            self.timer = now + Duration::from_secs_f64(self.rtt);
        }
        let p = self.history.loss_event_rate();
        if p > self.p_prev || !self.sent_on_last_expiry {
            self.expire(now);
        }
    }

    /// Next feedback packet to send.
    pub fn poll_feedback(&mut self) -> Option<TfrcFeedback> {
        self.out.pop_front()
    }

    /// Deadline of the feedback timer.
    pub fn poll_timeout(&self) -> Option<Time> {
        (self.timer != Time::NEVER).then_some(self.timer)
    }

    /// The feedback timer may have expired.
    pub fn handle_timeout(&mut self, now: Time) {
        if self.timer != Time::NEVER && now >= self.timer {
            self.expire(now);
        }
    }

    fn expire(&mut self, now: Time) {
        if self.data_since_feedback {
            self.send(now);
            self.sent_on_last_expiry = true;
        } else {
            self.sent_on_last_expiry = false;
        }
        self.last_expiry = Some(now);
        self.timer = now + Duration::from_secs_f64(self.rtt.clamp(1e-3, 1e3));
    }

    fn send(&mut self, now: Time) {
        self.prune(now);
        let p = self.history.loss_event_rate();
        self.p_prev = p;
        let hold = (now - self.last_arrival).as_micros().min(u32::MAX as u128) as u32;
        self.out.push_back(TfrcFeedback {
            ts_echo_us: self.last_ts_us,
            t_delay_us: hold,
            x_recv_bps: sat_u32(self.x_recv(now)),
            p_fixed: encode_p(p),
            auth: Default::default(),
        });
        self.data_since_feedback = false;
        self.feedbacks += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use congestion::tfrc::equation::tcp_throughput;

    fn data(seq: u32, t: Time, rtt_ms: u32) -> TfrcDataFields {
        TfrcDataFields {
            seq,
            ts_us: t.as_micros() as u32,
            rtt_us: rtt_ms * 1000,
        }
    }

    #[test]
    fn feedback_once_per_rtt_and_immediately_on_new_loss() {
        let mut r = TfrcReceiver::new(TfrcReceiverConfig::default());
        let mut fbs = Vec::new();
        // 1 packet per ms, RTT 100 ms, 1 s.
        for i in 0..1000u32 {
            let t = Time::from_millis(i as u64);
            if let Some(d) = r.poll_timeout() {
                if d <= t {
                    r.handle_timeout(t);
                }
            }
            if i == 500 {
                continue; // lost
            }
            r.handle_data(t, &data(i, t, 100), 1000);
            while let Some(f) = r.poll_feedback() {
                fbs.push((i, f));
            }
        }
        // 1 initial + ~10 periodic + 1 early on the loss.
        assert!((10..=13).contains(&fbs.len()), "{}", fbs.len());
        let loss_fb = fbs.iter().find(|(_, f)| f.p() > 0.0).unwrap();
        assert_eq!(loss_fb.0, 503, "reported when the 3rd later packet arrived");
        // Seeded from X_recv (1 MB/s at RTT 0.1) via the full equation: rate within 5%.
        let p = loss_fb.1.p();
        let x = tcp_throughput(1000.0, 0.1, p);
        assert!((x / 1_000_000.0 - 1.0).abs() < 0.05, "x={x}");
        // Hold time is the gap since the newest packet arrived.
        assert!(fbs.iter().all(|(_, f)| f.t_delay_us <= 1000));
    }

    /// A feedback timer that fires long after the RTT (the receiver was held off the CPU)
    /// still reports what arrived since its last expiry, not 0.
    #[test]
    fn a_late_timer_reports_the_rate_since_its_last_expiry() {
        let mut r = TfrcReceiver::new(TfrcReceiverConfig::default());
        // 2 packets of 1000 B per ms, RTT 1 ms, for 20 ms; the timer expires once a
        // millisecond, the last time at 19 ms.
        for i in 0..40u32 {
            let t = Time::from_micros(500 * i as u64);
            if r.poll_timeout().is_some_and(|d| d <= t) {
                r.handle_timeout(t);
            }
            r.handle_data(t, &data(i, t, 1), 1000);
        }
        while r.poll_feedback().is_some() {}
        // The timer was due at 20 ms; it runs at 30 ms, the last packet 10.5 ms old.
        let t = Time::from_millis(30);
        assert!(r.poll_timeout().is_some_and(|d| d <= t));
        r.handle_timeout(t);
        let f = r
            .poll_feedback()
            .expect("data arrived since the last feedback");
        // The 2 packets since the last expiry (19 ms) over the 11 ms since: 182 kB/s (the
        // field is X_recv in bytes/s, RFC 5348 §3.2.2).
        assert!(
            (150_000..=200_000).contains(&f.x_recv_bps),
            "{}",
            f.x_recv_bps
        );
    }

    #[test]
    fn no_feedback_without_data() {
        let mut r = TfrcReceiver::new(TfrcReceiverConfig::default());
        r.handle_data(Time::ZERO, &data(0, Time::ZERO, 100), 1000);
        assert!(r.poll_feedback().is_some());
        for k in 1..20 {
            r.handle_timeout(Time::from_millis(100 * k));
            assert!(r.poll_feedback().is_none());
        }
    }
}
