//! Plumbing shared by the baseline controllers (RLM, RLC, FLID-DL, WEBRC, DLM): subscription
//! bookkeeping that enforces the cumulative-layer invariant, the action and decision queues,
//! per-layer sequence-gap loss detection, and small private estimators.
//!
//! [`tcp_rate_bps`] wraps the shared `estimators::tcp::rfc5348`, sequence tracking uses the
//! shared `estimators::SeqTracker`. [`LossIntervals`] (TFRC average loss interval with
//! event grouping by RTT, used by DLM) is a minimal private copy written before
//! `congestion::estimators` landed; candidate for de-duplication against `estimators::ali`.

use congestion::controller::{Action, Decision, Stats};
use proto::session::SessionInfo;
use proto::time::Time;
use std::collections::VecDeque;

/// A sequence jump larger than this is treated as a resynchronisation (sender restart,
/// corrupted extension), not as that many losses: one bogus packet must not fake a
/// catastrophe.
pub(crate) const MAX_SEQ_GAP: u64 = 10_000;

/// Per-layer sequence tracking is the shared [`congestion::estimators::SeqTracker`] (gap = loss at
/// once, a late packet un-counts one loss in the statistics, jumps above [`MAX_SEQ_GAP`] are a
/// restart). Threshold 1, not the product's reorder tolerance: the papers' receivers (ns-2, no
/// reordering) count a gap at once, and the baselines stay as published.
type SeqTracker = congestion::estimators::SeqTracker;

pub(crate) fn new_tracker() -> SeqTracker {
    SeqTracker::with_threshold(MAX_SEQ_GAP, 1)
}

/// What [`Core::observe`] concluded about one packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Observed {
    /// The packet belongs to a layer we do not hold (in flight after a leave, or before the
    /// announcement): ignored by the controllers.
    Stray,
    /// A packet of a held layer; `lost` packets were detected missing before it.
    Held { lost: u64 },
}

/// Subscription state and output queues common to every baseline controller.
#[derive(Debug)]
pub(crate) struct Core {
    pub name: &'static str,
    pub info: Option<SessionInfo>,
    /// Layers held (0 = none); layers `0..level` are held.
    pub level: u8,
    pub exited: bool,
    actions: VecDeque<Action>,
    decisions: VecDeque<Decision>,
    trackers: Vec<SeqTracker>,
    pub received: u64,
    pub lost: u64,
    pub stray: u64,
    pub joins: u64,
    pub leaves: u64,
}

/// Cap on queued actions/decisions a host never drains (a host bug must not grow memory
/// without bound).
const QUEUE_CAP: usize = 4096;

impl Core {
    pub(crate) fn new(name: &'static str) -> Core {
        Core {
            name,
            info: None,
            level: 0,
            exited: false,
            actions: VecDeque::new(),
            decisions: VecDeque::new(),
            trackers: Vec::new(),
            received: 0,
            lost: 0,
            stray: 0,
            joins: 0,
            leaves: 0,
        }
    }

    /// Accepts an announcement. Returns `true` if it is the first (or a new session), in
    /// which case the caller starts its protocol. Announcements that shrink the layer count
    /// below the held level make us leave the now-missing layers from the top.
    pub(crate) fn announce(&mut self, now: Time, info: &SessionInfo) -> bool {
        let first = self.info.is_none();
        let n = info.layers.len().min(u8::MAX as usize);
        if self.trackers.len() < n {
            self.trackers.resize(n, new_tracker());
        }
        self.info = Some(info.clone());
        while self.level as usize > n {
            self.leave_top(now, "sam-shrink", vec![("layers", n as f64)]);
        }
        first && !self.exited
    }

    /// Number of layers the session offers (0 before the announcement).
    pub(crate) fn max_layers(&self) -> u8 {
        self.info
            .as_ref()
            .map(|i| i.layers.len().min(u8::MAX as usize) as u8)
            .unwrap_or(0)
    }

    /// Cumulative nominal rate of `layers` layers (bit/s); 0 for 0 layers.
    pub(crate) fn cum_rate(&self, layers: u8) -> f64 {
        match (&self.info, layers) {
            (_, 0) | (None, _) => 0.0,
            (Some(i), l) => i.cumulative_rate(l as usize - 1),
        }
    }

    /// Packet size in bytes announced by the sender (512 if unknown or zero).
    pub(crate) fn packet_size(&self) -> f64 {
        match &self.info {
            Some(i) if i.packet_size > 0 => i.packet_size as f64,
            _ => 512.0,
        }
    }

    /// Joins the next layer up. Returns `false` (and does nothing) at the top or after exit.
    pub(crate) fn join_next(
        &mut self,
        now: Time,
        reason: &'static str,
        inputs: Vec<(&'static str, f64)>,
    ) -> bool {
        if self.exited || self.level >= self.max_layers() {
            return false;
        }
        let k = self.level;
        if let Some(t) = self.trackers.get_mut(k as usize) {
            t.reset();
        }
        self.push_action(Action::Join(k));
        self.log(now, k + 1, reason, inputs);
        self.level = k + 1;
        self.joins += 1;
        true
    }

    /// Leaves the top layer held. Returns `false` if nothing is held.
    pub(crate) fn leave_top(
        &mut self,
        now: Time,
        reason: &'static str,
        inputs: Vec<(&'static str, f64)>,
    ) -> bool {
        if self.level == 0 {
            return false;
        }
        let k = self.level - 1;
        if let Some(t) = self.trackers.get_mut(k as usize) {
            t.reset();
        }
        self.push_action(Action::Leave(k));
        self.log(now, k, reason, inputs);
        self.level = k;
        self.leaves += 1;
        true
    }

    /// Leaves the session for good.
    pub(crate) fn exit(
        &mut self,
        now: Time,
        reason: &'static str,
        inputs: Vec<(&'static str, f64)>,
    ) {
        if self.exited {
            return;
        }
        self.push_action(Action::Exit);
        self.log(now, 0, reason, inputs);
        self.level = 0;
        self.exited = true;
    }

    /// Logs a decision that keeps the level (e.g. a back-off or a state change).
    pub(crate) fn note(
        &mut self,
        now: Time,
        reason: &'static str,
        inputs: Vec<(&'static str, f64)>,
    ) {
        let l = self.level;
        self.log(now, l, reason, inputs);
    }

    fn log(&mut self, now: Time, to: u8, reason: &'static str, inputs: Vec<(&'static str, f64)>) {
        if self.decisions.len() >= QUEUE_CAP {
            self.decisions.pop_front();
        }
        self.decisions.push_back(Decision {
            at: now,
            from_layers: self.level,
            to_layers: to,
            reason,
            inputs,
        });
    }

    fn push_action(&mut self, a: Action) {
        if self.actions.len() >= QUEUE_CAP {
            self.actions.pop_front();
        }
        self.actions.push_back(a);
    }

    /// Loss detection for one packet; counts it.
    pub(crate) fn observe(&mut self, layer: u8, seq: u64) -> Observed {
        self.observe_on(layer, seq, None)
    }

    /// [`Core::observe`] with the caller's sequence tracker instead of the per-layer one
    /// (FLID-DL tracks per physical channel: a logical layer changes channel every slot).
    pub(crate) fn observe_on(
        &mut self,
        layer: u8,
        seq: u64,
        tracker: Option<&mut SeqTracker>,
    ) -> Observed {
        if self.exited || layer >= self.level {
            self.stray += 1;
            return Observed::Stray;
        }
        use congestion::estimators::SeqEvent;
        let ev = match tracker {
            Some(t) => t.on_seq(seq),
            None => self
                .trackers
                .get_mut(layer as usize)
                .map_or(SeqEvent::Baseline, |t| t.on_seq(seq)),
        };
        let lost = match ev {
            SeqEvent::Advance { lost } => lost,
            SeqEvent::Recovered => {
                // Reordered, not lost: correct the statistics (controllers already reacted).
                self.lost = self.lost.saturating_sub(1);
                0
            }
            SeqEvent::Duplicate => return Observed::Held { lost: 0 },
            SeqEvent::Baseline | SeqEvent::Reordered | SeqEvent::TooOld | SeqEvent::Restart => 0,
        };
        self.received += 1;
        self.lost += lost;
        Observed::Held { lost }
    }

    /// Forgets the sequence state of every layer (dynamic layering re-maps channels at a slot
    /// change, so sequence spaces restart).
    pub(crate) fn reset_trackers(&mut self) {
        for t in &mut self.trackers {
            t.reset();
        }
    }

    pub(crate) fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }
    pub(crate) fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    /// Stats with the common fields filled.
    pub(crate) fn stats(&self) -> Stats {
        let total = self.received + self.lost;
        Stats {
            protocol: self.name,
            layers: self.level,
            subscribed_bps: self.cum_rate(self.level),
            estimate_bps: None,
            loss_ratio: if total == 0 {
                0.0
            } else {
                self.lost as f64 / total as f64
            },
            rtt_s: None,
            packets_received: self.received,
            packets_lost: self.lost,
            joins: self.joins,
            leaves: self.leaves,
        }
    }
}

/// The TCP throughput equation of TFRC (RFC 5348 §3.1, b = 1, t_RTO = 4·RTT), bit/s, via
/// the shared estimator. `p <= 0` (no loss yet) gives `+inf` (no cap).
pub(crate) fn tcp_rate_bps(packet_bytes: f64, rtt_s: f64, p: f64) -> f64 {
    if p <= 0.0 || !p.is_finite() {
        return f64::INFINITY;
    }
    congestion::estimators::tcp::rfc5348(packet_bytes, rtt_s.max(1e-4), p.min(1.0), 1.0)
        .map_or(f64::INFINITY, |bytes_per_s| 8.0 * bytes_per_s)
}

/// TFRC's average loss interval (RFC 5348 §5.4): loss events (losses within one RTT of the
/// event's first loss are one event), the last 8 intervals weighted 1,1,1,1,.8,.6,.4,.2.
#[derive(Clone, Debug, Default)]
pub(crate) struct LossIntervals {
    /// Closed intervals, newest first (packets between starts of loss events).
    intervals: VecDeque<f64>,
    /// Packets since the start of the current (open) interval.
    open: f64,
    last_event: Option<Time>,
    started: bool,
}

const WEIGHTS: [f64; 8] = [1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];

impl LossIntervals {
    /// `n` packets received.
    pub(crate) fn on_packets(&mut self, n: u64) {
        self.open += n as f64;
    }
    /// `n` packets lost at `now`; `rtt_s` groups losses into events.
    pub(crate) fn on_loss(&mut self, now: Time, n: u64, rtt_s: f64) {
        if n == 0 {
            return;
        }
        let rtt = std::time::Duration::from_secs_f64(rtt_s.clamp(1e-4, 60.0));
        let new_event = match self.last_event {
            None => true,
            Some(t) => now.saturating_since(t) > rtt,
        };
        if new_event {
            if self.started {
                self.intervals.push_front(self.open.max(1.0));
                self.intervals.truncate(WEIGHTS.len());
            }
            self.started = true;
            self.open = 0.0;
            self.last_event = Some(now);
        }
        self.open += n as f64;
    }
    /// Loss event rate, 0 until the first loss event.
    pub(crate) fn rate(&self) -> f64 {
        if !self.started {
            return 0.0;
        }
        if self.intervals.is_empty() {
            // Only the open interval: a single event, p = 1/open (bounded).
            return 1.0 / self.open.max(1.0);
        }
        let mean = |with_open: bool| {
            let mut s = 0.0;
            let mut w = 0.0;
            let it: Vec<f64> = if with_open {
                std::iter::once(self.open)
                    .chain(self.intervals.iter().copied())
                    .take(WEIGHTS.len())
                    .collect()
            } else {
                self.intervals.iter().copied().collect()
            };
            for (i, v) in it.iter().enumerate() {
                s += WEIGHTS[i] * v;
                w += WEIGHTS[i];
            }
            s / w
        };
        let m = mean(false).max(mean(true));
        1.0 / m.max(1.0)
    }
}

/// SplitMix64: a tiny deterministic generator so controllers need no clock or OS entropy;
/// the seed comes from the controller's `Config`.
#[derive(Clone, Debug)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Rng {
        Rng(seed)
    }
    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix64(self.0)
    }
    /// Uniform in [0, 1).
    pub(crate) fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The SplitMix64 finaliser, also used as a stateless hash (FLID-DL increase signals).
pub(crate) fn mix64(x: u64) -> u64 {
    let mut z = x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Seconds as a `Duration`, saturating for negative, NaN or huge inputs.
pub(crate) fn secs(s: f64) -> std::time::Duration {
    if s.is_finite() && s > 0.0 {
        std::time::Duration::from_secs_f64(s.min(1e9))
    } else {
        std::time::Duration::ZERO
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    #[test]
    fn seq_gaps_are_loss_and_late_packets_correct_the_count() {
        let mut c = Core::new("t");
        let info = SessionInfo::equal_layers(2, 10_000, Ipv4Addr::new(239, 1, 1, 1), 5000);
        c.announce(Time::ZERO, &info);
        c.join_next(Time::ZERO, "a", vec![]);
        assert_eq!(c.observe(0, 10), Observed::Held { lost: 0 });
        assert_eq!(c.observe(0, 11), Observed::Held { lost: 0 });
        assert_eq!(c.observe(0, 14), Observed::Held { lost: 2 });
        assert_eq!(c.lost, 2);
        assert_eq!(c.observe(0, 12), Observed::Held { lost: 0 }); // late
        assert_eq!(c.lost, 1);
        assert_eq!(c.observe(0, 12), Observed::Held { lost: 0 }); // duplicate
        assert_eq!(c.received, 4);
        assert_eq!(
            c.observe(0, 15 + MAX_SEQ_GAP + 2),
            Observed::Held { lost: 0 }
        ); // restart
    }

    #[test]
    fn core_enforces_cumulative_order() {
        let mut c = Core::new("t");
        let info = SessionInfo::equal_layers(3, 10_000, Ipv4Addr::new(239, 1, 1, 1), 5000);
        assert!(c.announce(Time::ZERO, &info));
        assert!(c.join_next(Time::ZERO, "a", vec![]));
        assert!(c.join_next(Time::ZERO, "a", vec![]));
        assert!(c.join_next(Time::ZERO, "a", vec![]));
        assert!(!c.join_next(Time::ZERO, "a", vec![]));
        assert_eq!(c.poll_action(), Some(Action::Join(0)));
        assert_eq!(c.poll_action(), Some(Action::Join(1)));
        assert_eq!(c.poll_action(), Some(Action::Join(2)));
        assert!(c.leave_top(Time::ZERO, "b", vec![]));
        assert_eq!(c.poll_action(), Some(Action::Leave(2)));
        assert_eq!(c.observe(2, 5), Observed::Stray);
        assert_eq!(c.observe(1, 5), Observed::Held { lost: 0 });
        assert_eq!(c.observe(1, 8), Observed::Held { lost: 2 });
        assert_eq!(c.cum_rate(2), 20_000.0);
    }

    #[test]
    fn tcp_equation_matches_rfc5348_reference_point() {
        // s = 1000 B, RTT = 100 ms, p = 1%: X ≈ 1.1e5 B/s (≈ 0.9 Mbit/s, delay-based.md DS5).
        let r = tcp_rate_bps(1000.0, 0.1, 0.01);
        assert!((r - 0.9e6).abs() < 0.05e6, "{r}");
        assert!(tcp_rate_bps(1000.0, 0.1, 0.0).is_infinite());
    }

    #[test]
    fn loss_intervals_average() {
        let mut l = LossIntervals::default();
        let mut t = Time::ZERO;
        for _ in 0..10 {
            l.on_packets(99);
            t += std::time::Duration::from_secs(1);
            l.on_loss(t, 1, 0.1);
        }
        let p = l.rate();
        assert!((p - 0.01).abs() < 0.001, "{p}");
        // Losses within one RTT are one event.
        l.on_loss(t + std::time::Duration::from_millis(10), 5, 0.1);
        assert!((l.rate() - p).abs() < 0.002);
    }
}
