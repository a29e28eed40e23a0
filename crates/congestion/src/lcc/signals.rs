//! The four signals LCC decides on (`docs/protocols/lcc.md` §2), each a small state machine fed
//! with numbers and times:
//!
//! - [`QueueDelay`]: queueing delay from one-way delays (receive time minus the sender's
//!   timestamp, offset unknown), against a base that is the minimum over a sliding minute;
//!   per-tick minima keep scheduling noise out.
//! - [`RecvRate`]: what arrived over a short and a longer window.
//! - [`Dispersion`]: the median of recent packet-bunch samples (the path's capacity on a FIFO,
//!   the session's share behind a per-flow fair queue).
//! - [`LossFloor`]: loss events (losses within one RTT of an event's start belong to it), their
//!   spacing averaged over the last eight as RFC 5348 does with loss intervals, and the rate a
//!   Linux TCP flow (CUBIC or its Reno-friendly region) reaches with that spacing.

use crate::time::Time;
use std::collections::VecDeque;

/// Queueing delay from one-way delays.
#[derive(Clone, Debug)]
pub struct QueueDelay {
    /// Minimum one-way delay (µs, sender clock offset included) per bucket, newest last.
    buckets: VecDeque<(Time, i64)>,
    bucket: std::time::Duration,
    keep: usize,
    /// Minimum one-way delay in the current tick.
    tick_min: Option<i64>,
    /// Per-tick minimum queueing delay (s), newest last.
    ticks: VecDeque<(Time, f64)>,
    keep_ticks: usize,
}

impl QueueDelay {
    /// A base over `keep` buckets of `bucket` (the minimum over `keep × bucket`), and a
    /// history of `keep_ticks` ticks.
    pub fn new(bucket: std::time::Duration, keep: usize, keep_ticks: usize) -> QueueDelay {
        QueueDelay {
            buckets: VecDeque::new(),
            bucket,
            keep: keep.max(1),
            tick_min: None,
            ticks: VecDeque::new(),
            keep_ticks: keep_ticks.max(2),
        }
    }

    /// Forgets everything (a new session).
    pub fn reset(&mut self) {
        self.buckets.clear();
        self.tick_min = None;
        self.ticks.clear();
    }

    /// One packet: received at `now`, sent at `send_us` on the sender's clock.
    pub fn on_packet(&mut self, now: Time, send_us: u64) {
        let owd = now.as_micros() as i64 - send_us as i64;
        self.tick_min = Some(self.tick_min.map_or(owd, |m| m.min(owd)));
        match self.buckets.back_mut() {
            Some((start, m)) if now.saturating_since(*start) < self.bucket => *m = (*m).min(owd),
            _ => {
                self.buckets.push_back((now, owd));
                while self.buckets.len() > self.keep {
                    self.buckets.pop_front();
                }
            }
        }
    }

    /// The base one-way delay (µs, the sender's clock offset included): the minimum over the
    /// kept buckets.
    pub fn base_us(&self) -> Option<i64> {
        self.buckets.iter().map(|b| b.1).min()
    }

    /// Closes a tick at `now`: its minimum queueing delay joins the history (nothing when the
    /// tick had no packet).
    pub fn tick(&mut self, now: Time) {
        let (Some(m), Some(base)) = (self.tick_min.take(), self.base_us()) else {
            return;
        };
        self.ticks.push_back((now, (m - base).max(0) as f64 * 1e-6));
        while self.ticks.len() > self.keep_ticks {
            self.ticks.pop_front();
        }
    }

    /// The least queueing delay (s) of the packets of the tick under way, None before its
    /// first packet or a base.
    pub fn tick_so_far_s(&self) -> Option<f64> {
        Some((self.tick_min? - self.base_us()?).max(0) as f64 * 1e-6)
    }

    /// The current queueing delay (s): the smaller of the last two ticks' minima, so one
    /// delayed packet (a stall of the host) does not count. None before two ticks with data.
    pub fn now_s(&self) -> Option<f64> {
        let n = self.ticks.len();
        (n >= 2).then(|| self.ticks[n - 1].1.min(self.ticks[n - 2].1))
    }

    /// The queueing delay `ago` before the newest tick (s), as [`Self::now_s`] computed then.
    pub fn ago_s(&self, ago: std::time::Duration) -> Option<f64> {
        let last = self.ticks.back()?.0;
        let t = last - ago;
        let i = self.ticks.iter().rposition(|x| x.0 <= t)?;
        (i >= 1).then(|| self.ticks[i].1.min(self.ticks[i - 1].1))
    }

    /// Quantile `p` of the tick minima over the last `span` (s): with a low `p`, the queue
    /// that stood through most of the span. None until the history covers `span`.
    pub fn quantile_s(&self, span: std::time::Duration, p: f64) -> Option<f64> {
        let last = self.ticks.back()?.0;
        let first = self.ticks.front()?.0;
        if last.saturating_since(first) < span {
            return None;
        }
        let mut v: Vec<f64> = self
            .ticks
            .iter()
            .filter(|x| last.saturating_since(x.0) <= span)
            .map(|x| x.1)
            .collect();
        v.sort_by(f64::total_cmp);
        let i = ((p.clamp(0.0, 1.0) * v.len() as f64) as usize).min(v.len() - 1);
        Some(v[i])
    }

    /// Quantile `p` of the tick minima of the last `span` (s), over whatever part of it the
    /// history covers. None without ticks.
    pub fn quantile_recent_s(&self, span: std::time::Duration, p: f64) -> Option<f64> {
        let last = self.ticks.back()?.0;
        let mut v: Vec<f64> = self
            .ticks
            .iter()
            .filter(|x| last.saturating_since(x.0) <= span)
            .map(|x| x.1)
            .collect();
        v.sort_by(f64::total_cmp);
        let i = ((p.clamp(0.0, 1.0) * v.len() as f64) as usize).min(v.len() - 1);
        Some(v[i])
    }

    /// Mean of the tick minima over the last `span` (s).
    pub fn mean_s(&self, span: std::time::Duration) -> Option<f64> {
        let last = self.ticks.back()?.0;
        let v: Vec<f64> = self
            .ticks
            .iter()
            .filter(|x| last.saturating_since(x.0) <= span)
            .map(|x| x.1)
            .collect();
        (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
    }
}

/// Time-stamped values of a sliding window.
#[derive(Clone, Debug)]
struct Recent<T> {
    items: VecDeque<(Time, T)>,
}

impl<T: Copy> Recent<T> {
    fn new() -> Self {
        Recent {
            items: VecDeque::new(),
        }
    }

    /// Adds `x` at `now` and forgets what is older than `keep`.
    fn push(&mut self, now: Time, x: T, keep: std::time::Duration) {
        self.items.push_back((now, x));
        while self
            .items
            .front()
            .is_some_and(|a| now.saturating_since(a.0) > keep)
        {
            self.items.pop_front();
        }
    }

    /// The values of the last `span` before `now`.
    fn within(&self, now: Time, span: std::time::Duration) -> impl Iterator<Item = T> + '_ {
        self.items
            .iter()
            .filter(move |a| now.saturating_since(a.0) <= span)
            .map(|a| a.1)
    }
}

/// Bytes received over sliding windows.
#[derive(Clone, Debug)]
pub struct RecvRate {
    arrivals: Recent<u32>,
}

impl Default for RecvRate {
    fn default() -> Self {
        RecvRate {
            arrivals: Recent::new(),
        }
    }
}

impl RecvRate {
    /// Keeps arrivals of the last `keep`.
    pub fn on_packet(&mut self, now: Time, size: u32, keep: std::time::Duration) {
        self.arrivals.push(now, size, keep);
    }

    /// Forgets everything.
    pub fn reset(&mut self) {
        self.arrivals.items.clear();
    }

    /// Bit/s over the last `span` before `now` (None when nothing arrived in it).
    pub fn rate_bps(&self, now: Time, span: std::time::Duration) -> Option<f64> {
        let bytes: u64 = self.arrivals.within(now, span).map(u64::from).sum();
        (bytes > 0).then(|| bytes as f64 * 8.0 / span.as_secs_f64())
    }
}

/// Median of recent packet-bunch samples.
#[derive(Clone, Debug)]
pub struct Dispersion {
    samples: Recent<f64>,
}

impl Default for Dispersion {
    fn default() -> Self {
        Dispersion {
            samples: Recent::new(),
        }
    }
}

impl Dispersion {
    /// A sample of `rate_bps` at `now`; samples older than `keep` are dropped.
    pub fn on_sample(&mut self, now: Time, rate_bps: f64, keep: std::time::Duration) {
        if rate_bps.is_finite() && rate_bps > 0.0 {
            self.samples.push(now, rate_bps, keep);
        }
    }

    /// Forgets everything.
    pub fn reset(&mut self) {
        self.samples.items.clear();
    }

    /// The median of the samples of the last `span` before `now`, if at least `min` exist.
    pub fn median_bps(&self, now: Time, span: std::time::Duration, min: usize) -> Option<f64> {
        let mut v: Vec<f64> = self.samples.within(now, span).collect();
        if v.len() < min.max(1) {
            return None;
        }
        v.sort_by(f64::total_cmp);
        Some(v[v.len() / 2])
    }
}

/// CUBIC's constants (RFC 9438, Linux): `C = 0.4`, `β = 0.7`.
const CUBIC_C: f64 = 0.4;
const CUBIC_BETA: f64 = 0.7;

/// Rate (segments/s) of a Linux TCP flow whose losses come `t` seconds apart at round-trip
/// time `rtt`: CUBIC's window climbs back to `W_max` in `K = t`, so `W_max = C·t³/(1 − β)` and
/// its mean window is `W_max·(3 + β)/4`; in the Reno-friendly region an AIMD flow with the same
/// spacing averages `1.5·t/rtt` segments per RTT (both as RFC 9438 §4.3 compares them). The
/// larger one, divided by `rtt`.
pub fn tcp_rate_for_spacing(t: f64, rtt: f64) -> f64 {
    if !(t > 0.0 && rtt > 0.0) {
        return 0.0;
    }
    let cubic = CUBIC_C * t.powi(3) * (3.0 + CUBIC_BETA) / (4.0 * (1.0 - CUBIC_BETA)) / rtt;
    let reno = 1.5 * t / (rtt * rtt);
    cubic.max(reno)
}

/// The spacing `t` at which [`tcp_rate_for_spacing`] gives `rate` (segments/s): the inverse,
/// to seed the history at the first loss event (RFC 5348 §6.3.1 seeds TFRC's the same way).
pub fn spacing_for_tcp_rate(rate: f64, rtt: f64) -> f64 {
    if !(rate > 0.0 && rtt > 0.0) {
        return 0.0;
    }
    let k = CUBIC_C * (3.0 + CUBIC_BETA) / (4.0 * (1.0 - CUBIC_BETA));
    let t_cubic = (rate * rtt / k).cbrt();
    let t_reno = rate * rtt * rtt / 1.5;
    t_cubic.min(t_reno)
}

/// Loss events and the competitive floor they imply.
#[derive(Clone, Debug)]
pub struct LossFloor {
    /// Start of the latest loss event.
    last: Option<Time>,
    /// Closed intervals between event starts (s), newest first.
    intervals: VecDeque<f64>,
    n: usize,
    /// Events so far.
    pub events: u64,
}

impl LossFloor {
    /// History of `n` intervals (RFC 5348: 8).
    pub fn new(n: usize) -> LossFloor {
        LossFloor {
            last: None,
            intervals: VecDeque::new(),
            n: n.max(1),
            events: 0,
        }
    }

    /// Forgets everything.
    pub fn reset(&mut self) {
        self.last = None;
        self.intervals.clear();
    }

    /// Time of the latest event's start.
    pub fn last_event(&self) -> Option<Time> {
        self.last
    }

    /// A packet loss detected at `now`. It starts a new event unless it is within `rtt` of the
    /// current one's start. On the first event the history is seeded with the spacing at which
    /// a TCP flow would have `seed_rate` (segments/s) at `rtt`. Returns whether an event began.
    pub fn on_loss(&mut self, now: Time, rtt: f64, seed_rate: f64) -> bool {
        match self.last {
            Some(t) if now.saturating_since(t).as_secs_f64() < rtt => false,
            Some(t) => {
                self.intervals
                    .push_front(now.saturating_since(t).as_secs_f64());
                self.intervals.truncate(self.n);
                self.last = Some(now);
                self.events += 1;
                true
            }
            None => {
                let seed = spacing_for_tcp_rate(seed_rate, rtt);
                if seed > 0.0 {
                    self.intervals.push_front(seed);
                }
                self.last = Some(now);
                self.events += 1;
                true
            }
        }
    }

    /// Weighted mean of the closed intervals only (s): how often events came while they came.
    pub fn closed_spacing(&self) -> Option<f64> {
        if self.intervals.is_empty() {
            return None;
        }
        let w = crate::estimators::ali::weights(self.n);
        let (mut s, mut ws) = (0.0, 0.0);
        for (x, wi) in self.intervals.iter().zip(&w) {
            s += x * wi;
            ws += wi;
        }
        Some(s / ws)
    }

    /// Mean spacing of loss events (s) at `now`: RFC 5348's weighted average over the closed
    /// intervals, or over the open one and all but the oldest when that is larger (a quiet
    /// spell lengthens it). None before the first event.
    pub fn mean_spacing(&self, now: Time) -> Option<f64> {
        let last = self.last?;
        if self.intervals.is_empty() {
            return None;
        }
        let w = crate::estimators::ali::weights(self.n);
        let avg = |v: &mut dyn Iterator<Item = f64>| {
            let (mut s, mut ws) = (0.0, 0.0);
            for (x, wi) in v.zip(&w) {
                s += x * wi;
                ws += wi;
            }
            s / ws
        };
        let closed = avg(&mut self.intervals.iter().copied());
        let open = now.saturating_since(last).as_secs_f64();
        let with_open = avg(&mut std::iter::once(open).chain(self.intervals.iter().copied()));
        Some(closed.max(with_open))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn queue_delay_is_owd_over_the_minute_minimum_with_tick_minima() {
        let mut q = QueueDelay::new(Duration::from_secs(2), 30, 50);
        // Sender clock 5 s ahead of ours: only differences matter.
        let send =
            |t_ms: u64, owd_ms: u64| (Time::from_millis(t_ms), (t_ms + 5000 - owd_ms) * 1000);
        // Base 20 ms one way for a second.
        for i in 0..10 {
            let (t, s) = send(i * 100, 20);
            q.on_packet(t, s);
            q.tick(t);
        }
        assert_eq!(q.now_s(), Some(0.0));
        // Queue builds to 60 ms; one packet delayed by a stall (200 ms) inside it.
        for i in 10..20 {
            let (t, s) = send(i * 100, 80);
            q.on_packet(t, s);
            if i == 15 {
                let (t2, s2) = send(i * 100 + 50, 280);
                q.on_packet(t2, s2);
            }
            q.tick(t + Duration::from_millis(99));
        }
        assert!((q.now_s().unwrap() - 0.060).abs() < 1e-9);
        assert!((q.ago_s(Duration::from_millis(1500)).unwrap() - 0.0).abs() < 1e-9);
        let m = q.mean_s(Duration::from_millis(450)).unwrap();
        assert!((m - 0.060).abs() < 1e-9, "{m}");
    }

    #[test]
    fn recv_rate_and_dispersion_median() {
        let mut r = RecvRate::default();
        for i in 0..100 {
            // 1250 B every 10 ms = 1 Mbit/s.
            r.on_packet(Time::from_millis(i * 10), 1250, Duration::from_secs(2));
        }
        let x = r
            .rate_bps(Time::from_millis(990), Duration::from_millis(500))
            .unwrap();
        assert!((x - 1_020_000.0).abs() < 25_000.0, "{x}");
        let mut d = Dispersion::default();
        for (i, v) in [4e6, 2e6, 4e6, 4e6, 1e6].iter().enumerate() {
            d.on_sample(
                Time::from_millis(i as u64 * 100),
                *v,
                Duration::from_secs(2),
            );
        }
        assert_eq!(
            d.median_bps(Time::from_millis(400), Duration::from_secs(2), 3),
            Some(4e6)
        );
        assert_eq!(
            d.median_bps(Time::from_millis(400), Duration::from_secs(2), 6),
            None
        );
    }

    #[test]
    fn tcp_rate_and_its_inverse() {
        // RTT 0.3 s, events 6 s apart: CUBIC's region (W_max = 0.4·216/0.3 = 288 segments).
        let x = tcp_rate_for_spacing(6.0, 0.3);
        assert!((x - 0.4 * 216.0 * 3.7 / 1.2 / 0.3).abs() < 1e-9);
        // RTT 20 ms, 1 s apart: Reno-friendly (1.5/0.0004 = 3750/s > CUBIC's 61.7/s).
        assert!((tcp_rate_for_spacing(1.0, 0.02) - 3750.0).abs() < 1e-9);
        for (t, rtt) in [(6.0, 0.3), (1.0, 0.02), (0.3, 0.1)] {
            let back = spacing_for_tcp_rate(tcp_rate_for_spacing(t, rtt), rtt);
            assert!((back - t).abs() < 1e-6, "{t} {rtt} -> {back}");
        }
        assert_eq!(tcp_rate_for_spacing(0.0, 0.1), 0.0);
    }

    #[test]
    fn loss_events_group_within_an_rtt_and_average_their_spacing() {
        let mut f = LossFloor::new(8);
        assert!(f.mean_spacing(Time::ZERO).is_none());
        // First event seeded at the spacing giving 100 segments/s at 100 ms.
        assert!(f.on_loss(Time::from_secs_f64(10.0), 0.1, 100.0));
        let seed = spacing_for_tcp_rate(100.0, 0.1);
        assert!((f.mean_spacing(Time::from_secs_f64(10.0)).unwrap() - seed).abs() < 1e-9);
        // A second loss 50 ms later is the same event.
        assert!(!f.on_loss(Time::from_secs_f64(10.05), 0.1, 100.0));
        // Events every 5 s.
        for k in 1..=8 {
            assert!(f.on_loss(Time::from_secs_f64(10.0 + 5.0 * k as f64), 0.1, 100.0));
        }
        let m = f.mean_spacing(Time::from_secs_f64(50.0)).unwrap();
        assert!((m - 5.0).abs() < 1e-9, "{m}");
        // A quiet minute lengthens it (the open interval counts).
        assert!(f.mean_spacing(Time::from_secs_f64(110.0)).unwrap() > 10.0);
        assert_eq!(f.events, 9);
    }
}
