//! LCC — Layercast's receiver-driven layered congestion control, the product default
//! (`docs/protocols/lcc.md`). Built for the links viewers actually have: a drop-tail FIFO with a
//! deep buffer, FQ-CoDel, or a fair queue, shared with the household's own TCP (CUBIC or BBR)
//! and with other sessions.
//!
//! Every tick (100 ms) the receiver reads its signals ([`signals`]): the queueing delay its
//! packets saw and its trend, what it received, the median packet-bunch dispersion (a ceiling:
//! the capacity on a FIFO, the session's share behind a fair queue while it is backlogged), and
//! loss events. A queue that stands although we hold a minor share of the capacity is another
//! flow's (a loss-based TCP fills the buffer, BBR keeps a BDP standing): then half the
//! capacity is a floor, bounded by the rate a Linux TCP flow would get at the loss events'
//! spacing. Then:
//!
//! 1. **Decrease.** A queue above this receiver's yield threshold that is not draining, or a
//!    new loss event that is congestion (a loss with no queue, at a rate a TCP flow would
//!    bear, is the path's random loss: it bounds the climb by that TCP rate instead, see
//!    [`LccConfig::q_random`]): the level drops to what `0.85 × received rate` carries, at least one
//!    layer for a queue we can relieve, never below the floor or the base layer. The yield
//!    threshold is `q_high` for a receiver holding the whole capacity and higher for one
//!    holding little (lower again right after its own join): receivers behind one FIFO yield
//!    one at a time, the largest and the latest joiner first, not all at once.
//! 2. **Increase.** One layer when the queue is near empty and no loss came lately (or, with a
//!    foreign queue, towards the floor), within the dispersion ceiling, and no sooner than the
//!    additive-increase clock allows: the next layer's rate at 5 % of the capacity per second
//!    (20 % while the queue stays empty), the same pace for every session behind one link. A
//!    level left right after joining it is held down, longer after each repeat ([`hold`]).
//!
//! Decisions carry their reason and inputs (the [`Decision`] log).

pub mod config;
pub mod hold;
mod random_loss;
pub mod signals;

use crate::controller::{Action, Decision, LayeredController, PacketArrival, Stats, TimerReason};
use crate::estimators::bunch::BunchSampler;
use crate::estimators::loss::{SeqEvent, SeqTracker, WindowedLoss};
use crate::session::SessionInfo;
use crate::time::Time;
pub use config::LccConfig;
use hold::HoldDown;
use signals::{Dispersion, LossFloor, QueueDelay, RecvRate};
use std::collections::VecDeque;
use std::time::Duration;

/// What one tick measured (also the decision inputs).
#[derive(Clone, Copy, Debug, Default)]
struct Signals {
    q: Option<f64>,
    trend: f64,
    recv_short: Option<f64>,
    recv: Option<f64>,
    cap: Option<f64>,
    floor: Option<f64>,
    rtt: f64,
    spacing: Option<f64>,
    /// A Linux TCP flow's rate at the loss events' mean spacing (bit/s), while random loss
    /// is what the path shows lately (`LccConfig::q_random`).
    random_bound: Option<f64>,
    new_loss: bool,
}

/// The LCC receiver.
pub struct Lcc {
    cfg: LccConfig,
    cum: Vec<f64>,
    held: usize,
    running: bool,
    next_tick: Option<Time>,
    seq: Vec<SeqTracker>,
    bunch: BunchSampler,
    qd: QueueDelay,
    rate: RecvRate,
    disp: Dispersion,
    floor: LossFloor,
    loss: WindowedLoss,
    /// A loss event began since the last tick.
    loss_event: bool,
    /// Newest sender timestamp seen (µs), and the one before which losses are not news.
    max_send_us: u64,
    recover_send_us: u64,
    hold_until: Time,
    /// Levels left under congestion and not to be joined again yet.
    hold: HoldDown,
    /// This congestion episode's draw for the yield threshold (s).
    yield_jitter: f64,
    /// When the top layer held was joined (None after a decrease).
    joined_at: Option<Time>,
    /// The capacity estimate when it was joined.
    cap_at_join: Option<f64>,
    /// The queue went above `q_high` and has not been near empty since.
    in_episode: bool,

    last_decrease: Option<Time>,
    /// While the queue drains after a decrease: when it was, and the highest delay since.
    q_at_decrease: Option<(Time, f64)>,
    /// When the level last changed, and the measured-over-announced rate factor.
    last_change: Time,
    scale: f64,
    last_packet: Option<Time>,
    rng: u64,
    actions: VecDeque<Action>,
    decisions: VecDeque<Decision>,
    decisions_dropped: u64,
    last_estimate: Option<f64>,
    /// The latest dispersion median, bit/s.
    last_cap: Option<f64>,
    /// A standing queue that is not ours is there (the share floor holds).
    foreign: bool,
    /// Loss events while we held at most `foreign_loss_share` of the capacity.
    minor_losses: VecDeque<Time>,
    /// The newest loss event that was congestion, and the newest that was random loss
    /// (`LccConfig::q_random`).
    last_congestion_loss: Option<Time>,
    last_random_loss: Option<Time>,
    received: u64,
    lost: u64,
    joins: u64,
    leaves: u64,
    last_announce: Option<(u32, u32)>,
}

impl Default for Lcc {
    fn default() -> Self {
        Lcc::new(LccConfig::default())
    }
}

impl Lcc {
    /// A receiver with `cfg`; it joins nothing before the first announcement.
    pub fn new(cfg: LccConfig) -> Lcc {
        let hold = HoldDown::new(
            cfg.hold_down,
            cfg.hold_down_max,
            cfg.hold_memory,
            cfg.hold_release,
            cfg.hold_full_share,
        );
        Lcc {
            hold,
            yield_jitter: 0.0,
            joined_at: None,
            cap_at_join: None,
            in_episode: false,
            qd: QueueDelay::new(Duration::from_secs(2), 30, 100),
            cfg,
            cum: Vec::new(),
            held: 0,
            running: false,
            next_tick: None,
            seq: Vec::new(),
            bunch: BunchSampler::new(),
            rate: RecvRate::default(),
            disp: Dispersion::default(),
            floor: LossFloor::new(8),
            loss: WindowedLoss::new(10),
            loss_event: false,
            max_send_us: 0,
            recover_send_us: 0,
            hold_until: Time::ZERO,
            last_decrease: None,
            q_at_decrease: None,
            last_change: Time::ZERO,
            scale: 1.0,
            last_packet: None,
            rng: 0x9E37_79B9_7F4A_7C15,
            actions: VecDeque::new(),
            decisions: VecDeque::new(),
            decisions_dropped: 0,
            last_estimate: None,
            last_cap: None,
            foreign: false,
            minor_losses: VecDeque::new(),
            last_congestion_loss: None,
            last_random_loss: None,
            received: 0,
            lost: 0,
            joins: 0,
            leaves: 0,
            last_announce: None,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &LccConfig {
        &self.cfg
    }

    /// Decision-log entries dropped because the host did not poll them.
    pub fn decisions_dropped(&self) -> u64 {
        self.decisions_dropped
    }

    /// Cumulative rate of `n` layers (0 for none), bit/s: the announced rate times what the
    /// layers held were seen to carry over it ([`Self::update_scale`]).
    fn rate_of(&self, n: usize) -> f64 {
        if n == 0 || self.cum.is_empty() {
            0.0
        } else {
            self.cum[(n - 1).min(self.cum.len() - 1)] * self.scale
        }
    }

    /// The share of the capacity estimate that `n` layers take (1 without an estimate).
    fn share_of(&self, n: usize) -> f64 {
        self.last_cap
            .filter(|&c| c > 0.0)
            .map_or(1.0, |c| (self.rate_of(n) / c).min(1.0))
    }

    /// The highest level (at least 1) whose cumulative rate is at most `r`.
    fn level_for(&self, r: f64) -> usize {
        let n = self
            .cum
            .iter()
            .take_while(|&&c| c * self.scale <= r)
            .count();
        n.max(1)
    }

    /// An encoder can send more than the rates it announces (a natural clip over the budgets
    /// of its cells): the decisions then under-rate every layer. While the level held has not
    /// changed for `scale_settle` and nothing was lost, the ratio of the received rate to the
    /// announced one is followed (EWMA, never below 1: a layer that carries less still may
    /// carry its announced rate at any time, and never above 3).
    fn update_scale(&mut self, now: Time, s: &Signals) {
        let (Some(recv), true) = (s.recv, self.held > 0) else {
            return;
        };
        let announced = self.cum[(self.held - 1).min(self.cum.len() - 1)];
        if now.saturating_since(self.last_change) < self.cfg.scale_settle
            || self.loss.ratio() > 0.01
            || announced <= 0.0
        {
            return;
        }
        let sample = (recv / announced).clamp(1.0, 3.0);
        self.scale += 0.1 * (sample - self.scale);
    }

    /// The level whose cumulative rate is nearest to `r` on a log scale (at least 1): the loss
    /// and share floors are rates a TCP flow would get, and a coarse ladder rounded down would
    /// always give less.
    fn level_near(&self, r: f64) -> usize {
        let n = self.level_for(r);
        if n < self.cum.len() && r >= (self.rate_of(n) * self.rate_of(n + 1)).sqrt() {
            n + 1
        } else {
            n
        }
    }

    /// A uniform draw in [0, 1) (xorshift; seeded from the first packet's arrival time, so
    /// receivers behind one bottleneck do not probe in lockstep).
    fn uniform(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    fn log(&mut self, d: Decision) {
        if self.decisions.len() >= self.cfg.max_pending_decisions {
            self.decisions.pop_front();
            self.decisions_dropped += 1;
        }
        self.decisions.push_back(d);
    }

    fn set_level(&mut self, now: Time, n: usize, reason: &'static str, s: &Signals) {
        let n = n.clamp(1, self.cum.len().max(1));
        let from = self.held;
        if n == from {
            return;
        }
        while self.held < n {
            let k = self.held;
            if let Some(t) = self.seq.get_mut(k) {
                t.reset();
            }
            self.bunch.reset_layer(k as u8);
            self.actions.push_back(Action::Join(k as u8));
            self.joins += 1;
            self.held += 1;
        }
        while self.held > n {
            self.held -= 1;
            let k = self.held;
            self.bunch.reset_layer(k as u8);
            self.actions.push_back(Action::Leave(k as u8));
            self.leaves += 1;
        }
        self.last_change = now;
        self.joined_at = (n > from).then_some(now);
        if n > from {
            self.cap_at_join = self.last_cap;
        }
        let opt = |x: Option<f64>, k: f64| x.map_or(f64::NAN, |v| v * k);
        let inputs = vec![
            ("q_ms", opt(s.q, 1e3)),
            ("trend_ms_per_s", s.trend * 1e3),
            ("r_recv_kbps", opt(s.recv, 1e-3)),
            ("cap_kbps", opt(s.cap, 1e-3)),
            ("floor_kbps", opt(s.floor, 1e-3)),
            ("loss_spacing_s", opt(s.spacing, 1.0)),
            ("rtt_ms", s.rtt * 1e3),
            ("rate_scale", self.scale),
            ("r_before_kbps", self.rate_of(from) * 1e-3),
            ("r_after_kbps", self.rate_of(n) * 1e-3),
        ];
        self.log(Decision {
            at: now,
            from_layers: from as u8,
            to_layers: n as u8,
            reason,
            inputs,
        });
    }

    /// After a decrease at `now`: losses of packets the sender sent before it took effect are
    /// not news. The sender's clock reads about `now − base one-way delay` now; the leave takes
    /// about half a base RTT to reach the router.
    fn mark_recovery(&mut self, now: Time) {
        let sender_now = match self.qd.base_us() {
            Some(b) => (now.as_micros() as i64 - b).max(0) as u64,
            None => self.max_send_us,
        };
        self.recover_send_us = sender_now + (self.cfg.base_rtt * 0.5e6) as u64;
    }

    /// Arms the wait before the next join, the additive increase: the next layer's own rate
    /// at `ai_fraction` of the capacity estimate per second (at least `probe_hold`), ±25 %.
    /// Sessions behind one FIFO measure the same capacity, so they add rate at the same pace
    /// whatever they hold, and the common decreases (a fraction of each one's rate) pull them
    /// together (AIMD). While the queue has stayed near empty for `idle_span` the pace is
    /// `ai_idle_fraction` (the link has room: a competitor left, the capacity rose); it is the
    /// same for every session, so still additive.
    fn arm_next_join(&mut self, now: Time, s: &Signals) {
        let n = self.held;
        let step = self.rate_of(n + 1) - self.rate_of(n);
        // At the start the history is shorter than `idle_span`: what there is counts (a viewer
        // starting on an empty path climbs at the idle pace). Only on a calm path: behind a
        // fair queue our own queue is empty whenever we are under our share, and a fast pace
        // would only make the joins above it come more often.
        let calm = [self.last_decrease, self.last_congestion_loss]
            .into_iter()
            .flatten()
            .all(|t| now.saturating_since(t) >= self.cfg.calm_span);
        let idle = calm
            && self
                .qd
                .quantile_recent_s(self.cfg.idle_span, 0.9)
                .is_none_or(|q| q <= self.cfg.q_low / 2.0);
        let fraction = if idle {
            self.cfg.ai_idle_fraction
        } else {
            self.cfg.ai_fraction
        };
        let cap = s
            .cap
            .or(self.last_cap)
            .unwrap_or(self.cfg.ai_min_bps)
            .max(self.cfg.ai_min_bps);
        let base = (step / (fraction * cap)).max(self.cfg.probe_hold.as_secs_f64());
        let j = 0.75 + 0.5 * self.uniform();
        let wait = (base * j).min(self.cfg.probe_hold_max.as_secs_f64());
        self.hold_until = now + Duration::from_secs_f64(wait);
    }

    /// The queueing delay above which this receiver decreases (s), given the current `q`:
    /// `q_high` for one holding the whole capacity, up to `q_yield` more for one holding
    /// little, plus this episode's draw (made afresh while the queue is near empty).
    /// Receivers behind one FIFO see the same queue; this orders them, the largest first,
    /// and once it yields the queue drains before the others' thresholds are reached, so
    /// one overload costs one receiver one layer instead of every receiver one
    /// (`docs/protocols/lcc.md` §3.1). Alone on a link the share is about 1: `q_high`.
    fn yield_threshold(&mut self, now: Time, q: f64, trend: f64) -> f64 {
        if q <= self.cfg.q_low {
            self.yield_jitter = self.cfg.q_yield_jitter * self.uniform();
        }
        if self.steep_after_join(now, trend) {
            return self.cfg.q_low;
        }
        let share = self
            .last_cap
            .filter(|c| *c > 0.0)
            .map_or(1.0, |c| (self.rate_of(self.held) / c).clamp(0.0, 1.0));
        let recent = if self.recently_joined(now) && !self.minor() {
            self.cfg.q_recent
        } else {
            0.0
        };
        (self.cfg.q_high + self.cfg.q_yield * (1.0 - share) + self.yield_jitter - recent)
            .max(self.cfg.q_low)
    }

    /// A queue rising steeply right after our join: the join was bigger than the room there
    /// was. It is undone (one layer) before the queue reaches the others' thresholds.
    /// Only a join big enough to raise the queue that fast by itself counts: a small step
    /// (a latecomer's) does not take the blame for someone else's big one.
    fn steep_after_join(&self, now: Time, trend: f64) -> bool {
        let step = self.rate_of(self.held) - self.rate_of(self.held.saturating_sub(1));
        let big = self
            .last_cap
            .is_some_and(|c| step >= self.cfg.steep_trend * c);
        big && !self.minor()
            && trend >= self.cfg.steep_trend
            && self
                .joined_at
                .is_some_and(|t| now.saturating_since(t) < self.cfg.join_steep)
    }

    /// Whether we hold less than `hold_full_share` of the capacity: a latecomer's join does
    /// not take the blame for a full link (`docs/protocols/lcc.md` §3.1).
    fn minor(&self) -> bool {
        self.share_of(self.held) < self.cfg.hold_full_share
    }

    /// Whether the top layer held was joined less than `join_recent` ago: a decrease now is
    /// a failed join experiment.
    fn recently_joined(&self, now: Time) -> bool {
        self.joined_at
            .is_some_and(|t| now.saturating_since(t) < self.cfg.join_recent)
    }

    fn measure(&mut self, now: Time) -> Signals {
        self.qd.tick(now);
        let q = self.qd.now_s();
        let trend = match (q, self.qd.ago_s(Duration::from_millis(300))) {
            (Some(a), Some(b)) => (a - b) / 0.3,
            _ => 0.0,
        };
        let rtt = self.cfg.base_rtt + self.qd.mean_s(Duration::from_secs(5)).unwrap_or(0.0);
        let new_loss = std::mem::take(&mut self.loss_event);
        let spacing = self.floor.mean_spacing(now);
        let loss_floor = self.loss_tcp_bps(now, spacing, rtt, self.floor.last_event());
        // While the newest loss event was random loss, the loss rate's TCP rate bounds the
        // climb.
        let random_bound = self
            .last_random_loss
            .filter(|&r| self.last_congestion_loss.is_none_or(|c| c < r))
            .and_then(|r| self.loss_tcp_bps(now, spacing, rtt, Some(r)));
        let raw_cap = self
            .disp
            .median_bps(now, self.cfg.dispersion_span, self.cfg.dispersion_min);
        if raw_cap.is_some() {
            self.last_cap = raw_cap;
        }
        let cap = raw_cap.map(|c| c * self.cfg.cap_margin);
        if cap.is_some() {
            self.last_estimate = cap;
        }
        // Another flow's queue: one that stood above `q_high` through half of `foreign_span`
        // while we held well under the capacity (CUBIC fills a deep buffer, Reno's sawtooth
        // fills a short one, BBR keeps about one BDP standing; LCC sessions keep it under
        // `q_high` most of the time). Yielding to it only hands the capacity over: hold at
        // least a share of it. It stays foreign until the queue is low through most of the
        // span (BBR drains it for 200 ms every 10 s, TCP after each loss: no reason to yield).
        // A short buffer (Linux CUBIC in a 100-ms FIFO) never holds `q_high` for long, but it
        // overflows while we hold a small fraction of the capacity and a queue stands: behind
        // FQ-CoDel a loss needs our own queue, which needs us above our share. Two such loss
        // events within `foreign_span` make the queue foreign, too.
        if let (true, Some(c), Some(qn)) = (new_loss, self.last_cap, q) {
            if self.rate_of(self.held) <= self.cfg.foreign_loss_share * c && qn > self.cfg.q_low {
                self.minor_losses.push_back(now);
            }
        }
        while self
            .minor_losses
            .front()
            .is_some_and(|t| now.saturating_since(*t) > self.cfg.foreign_span)
        {
            self.minor_losses.pop_front();
        }
        if let Some(c) = self.last_cap {
            let minor = self.rate_of(self.held) <= self.cfg.foreign_max_share * c;
            let stood = self
                .qd
                .quantile_s(self.cfg.foreign_span, self.cfg.foreign_quantile)
                .is_some_and(|q| q > self.cfg.q_high)
                || self.minor_losses.len() >= 2;
            if minor && stood {
                self.foreign = true;
            } else if self
                .qd
                .quantile_s(self.cfg.foreign_span, 0.8)
                .is_some_and(|q| q < self.cfg.q_low)
            {
                self.foreign = false;
            }
        }
        let share_floor = if self.foreign {
            self.last_cap.map(|c| c * self.cfg.share)
        } else {
            None
        };
        // The floor only stands against a foreign queue: behind FQ-CoDel or alone, a loss is
        // our own excess and no reason to hold on. The loss rate's TCP rate bounds it (several
        // bulk flows lose more often than one), scaled by `loss_floor_gain`: our smooth stream
        // meets each overflow of the buffer as more loss events than a TCP flow, whose window
        // cut covers a whole round trip (docs/protocols/lcc.md §3.3).
        let floor = match (loss_floor, share_floor) {
            (Some(l), Some(sh)) => Some(sh.min(self.cfg.loss_floor_gain * l)),
            (_, sh) => sh,
        };
        Signals {
            q,
            trend,
            recv_short: self.rate.rate_bps(now, Duration::from_millis(300)),
            recv: self.rate.rate_bps(now, Duration::from_secs(1)),
            cap,
            floor,
            rtt,
            spacing,
            random_bound,
            new_loss,
        }
    }

    fn on_tick(&mut self, now: Time) {
        let s = self.measure(now);
        self.update_scale(now, &s);
        self.loss.roll();
        if self.held == 0 {
            return;
        }
        // No packet for a while: the path is gone or the sender paused; keep the base only.
        if self
            .last_packet
            .is_none_or(|t| now.saturating_since(t) > self.cfg.silence)
        {
            if self.held > 1 {
                self.set_level(now, 1, "silence", &s);
            }
            return;
        }
        // 1. Decrease.
        let drained = self
            .last_decrease
            .is_none_or(|t| now.saturating_since(t) >= self.cfg.drain_hold);
        // A packet shows the queue it waited in only when it leaves it: after a decrease the
        // delays still rise for about one queueing delay although the queue already drains. So
        // after a decrease the delay rule waits until the delays fell from their peak (at most
        // `drain_max`).
        if let (Some((t, peak)), Some(q)) = (self.q_at_decrease, s.q) {
            if q < peak - self.cfg.q_step || now.saturating_since(t) > self.cfg.drain_max {
                self.q_at_decrease = None;
            } else if q > peak {
                self.q_at_decrease = Some((t, q));
            }
        }
        let draining = self.q_at_decrease.is_some();
        // Shared learning: a congestion episode this receiver did not start (no join of its
        // own lately) is someone's join failing on a full link. A big step of ours would
        // fail the same way and cost every session behind the link a queue spike, so it is
        // held down as if we had tried it; small steps keep their pace (a latecomer climbs).
        match s.q {
            Some(q) if q > self.cfg.q_high && !self.in_episode => {
                self.in_episode = true;
                let step = self.rate_of(self.held + 1) - self.rate_of(self.held);
                let big = self.last_cap.is_some_and(|c| step > self.cfg.big_step * c);
                if big && !self.recently_joined(now) && self.held < self.cum.len() {
                    let j = 0.75 + 0.5 * self.uniform();
                    let x = self.share_of(self.held);
                    self.hold
                        .on_decrease(now, self.held + 1, self.last_cap, x, j);
                }
            }
            Some(q) if q <= self.cfg.q_low => self.in_episode = false,
            _ => {}
        }
        let delay_over = !draining
            && s.q
                .is_some_and(|q| q > self.yield_threshold(now, q, s.trend) && s.trend >= 0.0);

        // Losses while the queue drains are the congestion already answered, too.
        let loss_news = s.new_loss && !draining;
        if drained && (delay_over || loss_news) {
            // A growing queue: the last 300 ms show the new capacity first (a capacity drop);
            // a loss alone: the last second is the steadier measure.
            let recv = match (s.recv_short, s.recv) {
                (Some(a), Some(b)) if delay_over => a.min(b),
                (a, b) => b.or(a).unwrap_or(0.0),
            };
            let by_rate = self.level_for(self.cfg.decrease_factor * recv);
            let by_floor = s.floor.map_or(1, |f| self.level_near(f));
            let mut n = by_rate.max(by_floor);
            if delay_over && by_floor <= self.held.saturating_sub(1) {
                // A queue we can relieve: at least one layer.
                n = n.min(self.held - 1);
                if !loss_news && s.floor.is_none() && self.steep_after_join(now, s.trend) {
                    // Our join did it: undo that, not more (the received rate of a queue
                    // growing this fast under-states what the other layers fit).
                    n = self.held - 1;
                }
            }
            if n < self.held && n >= 1 {
                let reason = if loss_news { "loss-drop" } else { "delay-drop" };
                if self.recently_joined(now) || loss_news {
                    let j = 0.75 + 0.5 * self.uniform();
                    let x = self.share_of(n);
                    // The hold-down lifts for a capacity estimate above the one the join was
                    // made on, not merely above the one at its failure: behind a fair queue
                    // the estimate is our share while we exceed it and the capacity once we
                    // are back under it, and that swing is no news.
                    let cap = if self.recently_joined(now) {
                        match (self.last_cap, self.cap_at_join) {
                            (Some(a), Some(b)) => Some(a.max(b)),
                            (a, b) => a.or(b),
                        }
                    } else {
                        self.last_cap
                    };
                    self.hold.on_decrease(now, self.held, cap, x, j);
                }
                self.set_level(now, n, reason, &s);
                self.last_decrease = Some(now);
                self.q_at_decrease = s.q.map(|q| (now, q));
                self.mark_recovery(now);
                self.arm_next_join(now, &s);
                return;
            }
        }
        // 2. Increase, one layer at a time, no sooner than the additive-increase clock allows.
        if now < self.hold_until || self.held >= self.cum.len() {
            return;
        }
        let since_loss = self
            .last_congestion_loss
            .map_or(Duration::MAX, |t| now.saturating_since(t));
        let next = self.rate_of(self.held + 1);
        let under_cap = s.cap.is_none_or(|c| next <= c) && s.random_bound.is_none_or(|b| next <= b);
        // A probe waits out the hold-down of the level it would join; a climb towards the floor
        // does not (the floor is what a competing TCP flow leaves us, not a guess).
        let quiet = s.q.is_some_and(|q| q <= self.cfg.q_low)
            && since_loss >= self.cfg.loss_quiet
            && !self.hold.blocks(now, self.held + 1, self.last_cap);
        // A foreign queue stands and we hold less than the floor: climb towards it (the queue
        // will not empty for us, so the quiet rule never would).
        let towards_floor = s.floor.is_some_and(|f| self.level_near(f) > self.held)
            && s.q.is_some_and(|q| q > self.cfg.q_low)
            && since_loss >= self.cfg.drain_hold;
        if under_cap && (quiet || towards_floor) {
            let to = self.held + 1;
            self.set_level(now, to, if quiet { "probe" } else { "floor-join" }, &s);
            self.arm_next_join(now, &s);
        }
    }
}

impl LayeredController for Lcc {
    fn name(&self) -> &'static str {
        "lcc"
    }

    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        if info.layers.is_empty() {
            return;
        }
        if let Some((sid, seq)) = self.last_announce {
            if sid == info.session_id && (info.announce_seq.wrapping_sub(seq) as i32) < 0 {
                return;
            }
        }
        let new_session = self.last_announce.map(|a| a.0) != Some(info.session_id);
        self.last_announce = Some((info.session_id, info.announce_seq));
        self.cum = info
            .layers
            .iter()
            .scan(0.0, |acc, l| {
                *acc += l.rate_bps as f64;
                Some(*acc)
            })
            .collect();
        if self.seq.len() < info.layers.len() {
            self.seq.resize(
                info.layers.len(),
                SeqTracker::with_threshold(self.cfg.max_seq_gap, self.cfg.reorder_threshold),
            );
        }
        let s = Signals::default();
        if self.held > info.layers.len() {
            self.set_level(now, info.layers.len(), "session-shrunk", &s);
        }
        if new_session {
            self.seq.iter_mut().for_each(|t| t.reset());
            self.bunch.reset();
            self.qd.reset();
            self.rate.reset();
            self.disp.reset();
            self.floor.reset();
            self.loss.clear();
            self.scale = 1.0;
            self.minor_losses.clear();
            self.last_congestion_loss = None;
            self.last_random_loss = None;
            self.foreign = false;
            self.hold.reset();
        }
        if !self.running {
            self.running = true;
            self.set_level(now, 1, "join-base", &s);
            self.arm_next_join(now, &s);
            self.next_tick = Some(now + self.cfg.tick);
        }
    }

    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        if !self.running {
            return;
        }
        let k = pkt.layer as usize;
        // Packets of layers not held (still arriving after a leave) are not counted.
        if k >= self.held {
            return;
        }
        if self.last_packet.is_none() {
            self.rng ^= now.as_nanos() | 1;
        }
        self.last_packet = Some(now);
        self.received += 1;
        self.qd.on_packet(now, pkt.send_time_us);
        self.rate.on_packet(now, pkt.size, Duration::from_secs(2));
        let ev = self.seq[k].on_seq(pkt.seq);
        self.loss.record(ev);
        let lost = match ev {
            SeqEvent::Advance { lost } => lost,
            _ => 0,
        };
        if ev == SeqEvent::Recovered {
            self.lost = self.lost.saturating_sub(1);
        }
        if lost > 0 {
            self.lost = self.lost.saturating_add(lost);
            let rtt = self.cfg.base_rtt + self.qd.mean_s(Duration::from_secs(5)).unwrap_or(0.0);
            // The first event: as if a TCP flow at half our rate had seen it (TCP halves at
            // its first loss; RFC 5348 §6.3.1 seeds TFRC's history from the receive rate).
            let seed = 0.5
                * self
                    .rate
                    .rate_bps(now, Duration::from_secs(1))
                    .unwrap_or(self.rate_of(self.held))
                / (8.0 * self.cfg.tcp_mss);
            // Every event counts for the floor; only one revealed by a packet sent after our
            // last decrease took effect is news for the decision rules (losses of packets sent
            // before it belong to the congestion already answered, as TCP's recovery point).
            if self.floor.on_loss(now, rtt, seed) {
                if self.random_loss(now, rtt) {
                    self.last_random_loss = Some(now);
                } else {
                    self.last_congestion_loss = Some(now);
                    if pkt.send_time_us > self.recover_send_us {
                        self.loss_event = true;
                    }
                }
            }
        }
        self.max_send_us = self.max_send_us.max(pkt.send_time_us);
        if let Some(b) = self.bunch.on_packet(pkt) {
            self.disp
                .on_sample(now, b.rate_bps, self.cfg.dispersion_span);
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        let Some(due) = self.next_tick else {
            return;
        };
        if now < due {
            return;
        }
        self.next_tick = Some(Time::next_on_grid(due, now, self.cfg.tick));
        self.on_tick(now);
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        self.next_tick.map(|t| (t, TimerReason::Adapt))
    }

    fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    fn stats(&self) -> Stats {
        Stats {
            protocol: "lcc",
            layers: self.held as u8,
            subscribed_bps: if self.held == 0 {
                0.0
            } else {
                self.cum[(self.held - 1).min(self.cum.len() - 1)]
            },
            estimate_bps: self.last_estimate,
            loss_ratio: self.loss.ratio(),
            rtt_s: Some(self.cfg.base_rtt + self.qd.now_s().unwrap_or(0.0)),
            packets_received: self.received,
            packets_lost: self.lost,
            joins: self.joins,
            leaves: self.leaves,
        }
    }

    fn layers(&self) -> u8 {
        self.held as u8
    }
}
