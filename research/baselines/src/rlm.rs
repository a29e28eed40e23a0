//! RLM, Receiver-driven Layered Multicast (McCanne, Jacobson, Vetterli, SIGCOMM 1996), as a
//! single receiver with shared learning off.
//!
//! The receiver probes by *join experiments*: when its join timer for the next layer fires it
//! adds that layer; if loss follows within the *detection time* it drops the layer again and
//! backs the layer's join timer off exponentially. Join timers relax slowly while the level is
//! stable. States (named as in the ns-2 model `tcl/rlm/rlm.tcl`):
//!
//! * `S` steady: join timer running; loss moves to `M` (own layer recently added) or `H`;
//! * `H` hysteresis: loss ignored until the detection timer fires, then `M`;
//! * `M` measurement: loss above the threshold (25 % over ≥ 10 packets) drops a layer;
//! * `D` drop: loss ignored for one conservative detection time, then `S`.
//!
//! Shared learning (the `add L` control messages among receivers) is off: a receiver only
//! knows about its own experiments, so no receiver-originated traffic exists (FM-12).
//! Parameters are the *effective* ns-2 values (the last of several assignments in rlm.tcl),
//! see `docs/protocols/rlm.md`.

use crate::baseline::{secs, Core, Observed, Rng};
use congestion::controller::{
    Action, Decision, LayeredController, PacketArrival, Stats, TimerReason,
};
use proto::session::SessionInfo;
use proto::time::Time;
use std::time::Duration;

/// RLM parameters. Defaults are the effective values of the ns-2 model.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Join-timer back-off multiplier after a failed experiment (2).
    pub alpha: f64,
    /// Join-timer relaxation factor per quiet detection period (0.75).
    pub beta: f64,
    /// Initial join timer, also the floor of relaxation (5 s).
    pub init_tj: Duration,
    /// Join-timer ceiling (60 s).
    pub max_tj: Duration,
    /// Initial detection-time estimate TD (5 s) and its deviation TDVAR (2 s).
    pub init_td: Duration,
    pub init_td_var: Duration,
    /// EWMA gains for TD and TDVAR (0.25, 0.25).
    pub g1: f64,
    pub g2: f64,
    /// Loss ratio above which `M` drops a layer (0.25) ...
    pub loss_threshold: f64,
    /// ... evaluated once at least this many packets arrived since entering `M` (10).
    pub loss_min_packets: u64,
    /// RLM never gives up the base layer here (ns-2 would drop to 0 and never come back).
    pub min_layers: u8,
    /// Seed of the join-timer randomisation.
    pub seed: u64,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            alpha: 2.0,
            beta: 0.75,
            init_tj: Duration::from_secs(5),
            max_tj: Duration::from_secs(60),
            init_td: Duration::from_secs(5),
            init_td_var: Duration::from_secs(2),
            g1: 0.25,
            g2: 0.25,
            loss_threshold: 0.25,
            loss_min_packets: 10,
            min_layers: 1,
            seed: 0x524c_4d00,
        }
    }
}

/// RLM receiver state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Steady,
    Hysteresis,
    Measurement,
    Drop,
}

impl State {
    fn code(self) -> f64 {
        match self {
            State::Steady => 0.0,
            State::Hysteresis => 1.0,
            State::Measurement => 2.0,
            State::Drop => 3.0,
        }
    }
}

/// The RLM receiver.
#[derive(Debug)]
pub struct Rlm {
    cfg: Config,
    core: Core,
    rng: Rng,
    state: State,
    /// Join timer per level n (index n = the level reached by the join), seconds.
    tj: Vec<f64>,
    /// Time of our join experiment that reached level n.
    join_ts: Vec<Option<Time>>,
    /// Packets received on the top layer since it was added.
    top_pkts: u64,
    td: f64,
    td_var: f64,
    tj_deadline: Option<Time>,
    td_deadline: Option<Time>,
    /// Packet and loss counters at entry to `M`.
    m_pkts: u64,
    m_lost: u64,
}

impl Rlm {
    pub fn new(cfg: Config) -> Rlm {
        let rng = Rng::new(cfg.seed);
        Rlm {
            td: cfg.init_td.as_secs_f64(),
            td_var: cfg.init_td_var.as_secs_f64(),
            cfg,
            core: Core::new("rlm"),
            rng,
            state: State::Steady,
            tj: Vec::new(),
            join_ts: Vec::new(),
            top_pkts: 0,
            tj_deadline: None,
            td_deadline: None,
            m_pkts: 0,
            m_lost: 0,
        }
    }

    /// Current state (for tests and the overlay).
    pub fn state(&self) -> State {
        self.state
    }
    /// Join timer (seconds) for reaching level `n`.
    pub fn join_timer(&self, n: u8) -> f64 {
        self.tj
            .get(n as usize)
            .copied()
            .unwrap_or(self.cfg.init_tj.as_secs_f64())
    }
    /// Detection-time estimate and its deviation, seconds.
    pub fn detection_time(&self) -> (f64, f64) {
        (self.td, self.td_var)
    }

    fn inputs(&self) -> Vec<(&'static str, f64)> {
        vec![
            ("state", self.state.code()),
            ("td", self.td),
            ("td_var", self.td_var),
            (
                "tj_next",
                self.join_timer(self.core.level.saturating_add(1)),
            ),
        ]
    }

    fn is_recent(&self, ts: Time, now: Time) -> bool {
        ts + secs(self.td + 2.0 * self.td_var) > now
    }

    fn set_tj_timer(&mut self, now: Time) {
        let n = self.core.level as usize + 1;
        if n > self.core.max_layers() as usize {
            self.tj_deadline = None;
            return;
        }
        let i = self.join_timer(n as u8);
        // TJ/2 + an exponential of mean TJ truncated at 4·TJ (ns-2's trunc_exponential).
        let mut e = 4.0 * i;
        for _ in 0..8 {
            let u = self.rng.uniform();
            let x = -(1.0 - u).ln() * i;
            if x < 4.0 * i {
                e = x;
                break;
            }
        }
        self.tj_deadline = Some(now + secs(i / 2.0 + e).max(Duration::from_millis(1)));
    }

    fn set_td_conservative(&mut self, now: Time) {
        self.td_deadline = Some(now + secs(self.td + 1.5 * self.td_var));
    }

    fn set_td_wait(&mut self, now: Time) {
        let k = self.core.level as f64 / 2.0 + 1.5;
        self.td_deadline = Some(now + secs(self.td + k * self.td_var));
    }

    fn enter(&mut self, now: Time, s: State, reason: &'static str) {
        self.state = s;
        match s {
            State::Measurement => {
                self.set_td_wait(now);
                self.m_pkts = self.core.received;
                self.m_lost = self.core.lost;
            }
            State::Drop | State::Hysteresis => self.set_td_conservative(now),
            State::Steady => {}
        }
        let inp = self.inputs();
        self.core.note(now, reason, inp);
    }

    fn backoff(&mut self, n: usize) {
        let max = self.cfg.max_tj.as_secs_f64();
        if n >= self.tj.len() {
            return;
        }
        self.tj[n] = (self.tj[n] * self.cfg.alpha).min(max);
        let v = self.tj[n];
        for t in self.tj.iter_mut().skip(n + 1) {
            if *t < v {
                *t = v;
            }
        }
    }

    fn update_td(&mut self, d: f64) {
        let v = (d - self.td).abs();
        self.td = self.td * (1.0 - self.cfg.g1) + self.cfg.g1 * d;
        self.td_var = self.td_var * (1.0 - self.cfg.g2) + self.cfg.g2 * v;
    }

    fn highest_pending(&self, now: Time) -> Option<usize> {
        (1..self.join_ts.len())
            .rev()
            .find(|&n| self.join_ts[n].is_some_and(|t| self.is_recent(t, now)))
    }

    fn on_loss(&mut self, now: Time, lost: u64) {
        match self.state {
            State::Measurement => {
                let npkts = self.core.received - self.m_pkts;
                let nlost = self.core.lost - self.m_lost;
                if npkts >= self.cfg.loss_min_packets {
                    let ratio = nlost as f64 / (nlost + npkts) as f64;
                    if ratio > self.cfg.loss_threshold {
                        self.td_deadline = None;
                        let mut inp = self.inputs();
                        inp.push(("loss_ratio", ratio));
                        inp.push(("packets", npkts as f64));
                        if self.core.level > self.cfg.min_layers.max(1) {
                            self.core.leave_top(now, "loss-threshold", inp);
                            self.top_pkts = 1;
                        }
                        self.enter(now, State::Drop, "enter-d");
                    }
                }
            }
            State::Steady => {
                self.td_deadline = None;
                let level = self.core.level as usize;
                if let Some(n) = self.highest_pending(now) {
                    // A join experiment is in progress: it failed. Back off its layer.
                    self.backoff(n);
                    if n == level {
                        let ts = self.join_ts[n].unwrap_or(now);
                        self.update_td(now.saturating_since(ts).as_secs_f64());
                        let mut inp = self.inputs();
                        inp.push(("lost", lost as f64));
                        inp.push(("tj_backed_off", self.join_timer(n as u8)));
                        if self.core.level > self.cfg.min_layers.max(1) {
                            self.core.leave_top(now, "join-experiment-failed", inp);
                            self.top_pkts = 1;
                        }
                        self.enter(now, State::Drop, "enter-d");
                        self.set_tj_timer(now);
                        return;
                    }
                    if n == level + 1 {
                        self.set_tj_timer(now);
                    }
                }
                let recently_added = self
                    .join_ts
                    .get(level)
                    .copied()
                    .flatten()
                    .is_some_and(|t| self.is_recent(t, now));
                if recently_added {
                    self.enter(now, State::Measurement, "enter-m");
                } else {
                    self.enter(now, State::Hysteresis, "enter-h");
                }
            }
            State::Hysteresis | State::Drop => {}
        }
    }

    fn trigger_td(&mut self, now: Time) {
        self.td_deadline = None;
        match self.state {
            State::Hysteresis => self.enter(now, State::Measurement, "enter-m"),
            State::Drop | State::Measurement => {
                self.set_td_conservative(now);
                self.enter(now, State::Steady, "enter-s");
            }
            State::Steady => {
                // Quiet for a detection period: relax the current layer's join timer.
                let n = self.core.level as usize;
                if n > 0 && n < self.tj.len() {
                    let floor = self.cfg.init_tj.as_secs_f64();
                    self.tj[n] = (self.tj[n] * self.cfg.beta).max(floor);
                }
                self.set_td_conservative(now);
            }
        }
    }

    fn trigger_tj(&mut self, now: Time) {
        self.tj_deadline = None;
        let level = self.core.level as usize;
        let inferior_pending = (0..=level.min(self.join_ts.len().saturating_sub(1)))
            .any(|n| self.join_ts[n].is_some_and(|t| self.is_recent(t, now)));
        let getting = if self.top_pkts > 0 {
            true
        } else {
            // ns-2 hack: a slow first packet inflates TD to 1.2 × the wait.
            if let Some(ts) = self.join_ts.get(level).copied().flatten() {
                let d = now.saturating_since(ts).as_secs_f64();
                if d > self.td {
                    self.td = 1.2 * d;
                }
            }
            false
        };
        if self.state == State::Steady && !inferior_pending && getting {
            let inp = self.inputs();
            if self.core.join_next(now, "join-experiment", inp) {
                let n = self.core.level as usize;
                self.join_ts[n] = Some(now);
                self.top_pkts = 0;
            }
        }
        self.set_tj_timer(now);
    }
}

impl Default for Rlm {
    fn default() -> Self {
        Rlm::new(Config::default())
    }
}

impl LayeredController for Rlm {
    fn name(&self) -> &'static str {
        "rlm"
    }

    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        let first = self.core.announce(now, info);
        let n = self.core.max_layers() as usize;
        let init = self.cfg.init_tj.as_secs_f64();
        if self.tj.len() < n + 1 {
            self.tj.resize(n + 1, init);
            self.join_ts.resize(n + 1, None);
        }
        if first {
            let inp = self.inputs();
            self.core.join_next(now, "start", inp);
            self.join_ts[1] = Some(now);
            self.top_pkts = 0;
            self.state = State::Steady;
            self.set_tj_timer(now);
        }
    }

    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        if let Observed::Held { lost } = self.core.observe(pkt.layer, pkt.seq) {
            if pkt.layer + 1 == self.core.level {
                self.top_pkts += 1;
            }
            if lost > 0 {
                self.on_loss(now, lost);
            }
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.core.exited || self.core.info.is_none() {
            return;
        }
        // Fire due timers in deadline order (bounded: zero-length timers from a degenerate
        // configuration must not spin).
        for _ in 0..64 {
            let td = self.td_deadline.filter(|&t| t <= now);
            let tj = self.tj_deadline.filter(|&t| t <= now);
            match (td, tj) {
                (Some(a), Some(b)) if a <= b => self.trigger_td(now),
                (Some(_), None) => self.trigger_td(now),
                (_, Some(_)) => self.trigger_tj(now),
                (None, None) => break,
            }
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.core.poll_action()
    }

    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        if self.core.exited {
            return None;
        }
        match (self.tj_deadline, self.td_deadline) {
            (Some(a), Some(b)) if b < a => Some((b, TimerReason::Other)),
            (Some(a), _) => Some((a, TimerReason::Adapt)),
            (None, Some(b)) => Some((b, TimerReason::Other)),
            (None, None) => None,
        }
    }

    fn poll_decision(&mut self) -> Option<Decision> {
        self.core.poll_decision()
    }

    fn stats(&self) -> Stats {
        let mut s = self.core.stats();
        s.protocol = "rlm";
        s
    }

    fn layers(&self) -> u8 {
        self.core.level
    }
}
