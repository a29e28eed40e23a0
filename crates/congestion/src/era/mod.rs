//! ERA — Explicit Rate Adjustment (Puangpronpitag 2003; `era.md` §1.1).
//!
//! Every RAI the receiver computes an explicit target rate from the minimum packet-pair
//! sample of the interval and, when it has seen loss, the TCP-friendly rate of Eq. 5-6, then
//! joins or leaves as many cumulative layers as needed in one step (§1.1.13 steps 2–6).
//! Between RAIs a single pair sample below the subscribed rate cuts the subscription at once
//! (step 1). The RAI grid is phased to SAM arrivals so that receivers behind one bottleneck
//! decide together (§1.1.14).
//!
//! Choices where the thesis is silent (all documented in `docs/protocols/era.md`):
//! - **E1** (`l = 0`, fewer than `min_pp` samples): hold the level and carry the samples into
//!   the next RAI (at most [`EraConfig::pp_carry_rais`] RAIs), so that the base layer alone
//!   (2.44 pairs/s) still reaches 3 samples and can climb. Never a target of −1.
//! - **E2** (no packet at all in an RAI): drop one layer per empty RAI, floor at the base.
//! - **E3** (target below the base layer): stay on the base layer unless
//!   [`EraConfig::exit_below_base`].
//! - **E4** (step-1 target): [`Step1Target`], default the sample itself (thesis).
//! - **E5** (boundaries): a tolerance of [`EraConfig::tolerance`] × the layer's own rate. With
//!   it the level after a decision is the highest `i` with `R_i <= target + tol`, both when
//!   climbing and when descending. `choose(cur=6, 399999.99999999895) = 19`.
//! - **E6** the climb stops at the top layer; **E7** `min(1,·)` is applied above `l = 8/27`
//!   when [`EraConfig::tcp_min1`] (default on); **E8** RTT is [`RttMode`]; **E9/E10** are
//!   the sender's and the bunch sampler's job; **E11** a joined layer's sequence baseline is
//!   reset and a left layer stops counting at once; **E12** the RAI timer runs free and is
//!   re-phased by the next SAM. **E13** (the live player, [`EraConfig::live`]): neither step 1
//!   nor an RAI acts on a single pair sample; the simulator keeps the thesis' minimum.

mod check;
mod config;
mod layers;
mod rai;
mod samples;
#[cfg(test)]
mod tests;

use crate::controller::{Action, Decision, LayeredController, PacketArrival, Stats, TimerReason};
use crate::estimators::bunch::BunchSampler;
use crate::estimators::loss::{SeqTracker, WindowedLoss};
use crate::estimators::rtt::JoinLatencyProbe;
use crate::session::SessionInfo;
use crate::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

pub use check::{check_decision_log, DecisionLogCheck};
pub use config::{EraConfig, RttMode, Step1Target};
pub use layers::choose_layers;
use layers::cumulative;

/// RAIs whose `R_pp` make E16's reference (their minimum). More than one: an RAI in which no
/// pair showed a token bucket's shaped rate (all at the burst rate) would otherwise raise the
/// reference, and the next RAI's few shaped samples would look like a stall.
pub const STALL_REF_RAIS: usize = 3;

#[derive(Clone, Copy, Debug, PartialEq)]
enum Phase {
    /// No SAM yet.
    Waiting,
    Running,
    /// Left the session (E3 with `exit_below_base`).
    Exited,
}

/// The ERA receiver.
pub struct Era {
    cfg: EraConfig,
    phase: Phase,
    info: Option<SessionInfo>,
    cum: Vec<f64>,
    rai: Duration,
    /// Layers held (0 = none).
    held: usize,
    next_adapt: Option<Time>,
    seq: Vec<SeqTracker>,
    bunch: BunchSampler,
    loss: WindowedLoss,
    /// Samples of the current RAI.
    pp_now: Vec<f64>,
    /// Samples carried from earlier RAIs (E1).
    pp_carry: VecDeque<Vec<f64>>,
    /// Recent samples for [`Step1Target::KthLowest`].
    pp_recent: VecDeque<f64>,
    rai_packets: u64,
    /// Packets lost in this RAI and in the previous one (E15).
    rai_lost: u64,
    prev_rai_lost: u64,
    /// E17: RAIs since the last one with loss (`usize::MAX`: none seen).
    rais_since_loss: usize,
    rtt_probe: JoinLatencyProbe,
    /// Join-latency samples as (lower, upper) bounds on the RTT.
    rtt_samples: VecDeque<(f64, f64)>,
    actions: VecDeque<Action>,
    decisions: VecDeque<Decision>,
    decisions_dropped: u64,
    last_target: Option<f64>,
    /// The previous RAI's `R_pp` (E13's reference), `None` before the first or after a new session.
    last_r_pp: Option<f64>,
    /// E16: the last [`STALL_REF_RAIS`] RAIs' `R_pp` (the reference is their minimum).
    r_pp_hist: VecDeque<f64>,
    /// E16: the open episode of low samples (sample, layer), not yet believed.
    stall_pending: Vec<(f64, u8)>,
    /// E16: when the open episode began (its first low sample).
    stall_start: Option<Time>,
    /// E16: the open episode has lasted the horizon; its further low samples are believed.
    stall_believed: bool,
    /// E16: samples set aside in this RAI, and the lowest of them.
    rai_stalled: u64,
    rai_stalled_min: f64,
    last_plr: f64,
    received: u64,
    lost: u64,
    joins: u64,
    leaves: u64,
    last_announce: Option<(u32, u32)>,
}

impl Era {
    /// A receiver with `cfg`; it joins nothing before the first SAM.
    pub fn new(cfg: EraConfig) -> Era {
        let plr_window = cfg.plr_window_rais;
        Era {
            cfg,
            phase: Phase::Waiting,
            info: None,
            cum: Vec::new(),
            rai: Duration::from_secs(1),
            held: 0,
            next_adapt: None,
            seq: Vec::new(),
            bunch: BunchSampler::new(),
            loss: WindowedLoss::new(plr_window),
            pp_now: Vec::with_capacity(256),
            pp_carry: VecDeque::new(),
            pp_recent: VecDeque::new(),
            rai_packets: 0,
            rai_lost: 0,
            prev_rai_lost: 0,
            rais_since_loss: usize::MAX,
            rtt_probe: JoinLatencyProbe::default(),
            rtt_samples: VecDeque::new(),
            actions: VecDeque::new(),
            decisions: VecDeque::new(),
            decisions_dropped: 0,
            last_target: None,
            last_r_pp: None,
            r_pp_hist: VecDeque::with_capacity(STALL_REF_RAIS),
            stall_pending: Vec::new(),
            stall_start: None,
            stall_believed: false,
            rai_stalled: 0,
            rai_stalled_min: f64::INFINITY,
            last_plr: 0.0,
            received: 0,
            lost: 0,
            joins: 0,
            leaves: 0,
            last_announce: None,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &EraConfig {
        &self.cfg
    }

    /// Decision-log entries dropped because the host did not poll them.
    pub fn decisions_dropped(&self) -> u64 {
        self.decisions_dropped
    }

    /// Cumulative rate of `n` layers (0 for none).
    fn rate_of(&self, n: usize) -> f64 {
        if n == 0 {
            0.0
        } else {
            self.cum[(n - 1).min(self.cum.len() - 1)]
        }
    }

    fn rtt(&self) -> f64 {
        match self.cfg.rtt {
            RttMode::Fixed(r) => r,
            RttMode::JoinLatency { initial, .. } => {
                if self.rtt_samples.is_empty() {
                    return initial;
                }
                let lo = self
                    .rtt_samples
                    .iter()
                    .map(|s| s.0)
                    .fold(f64::NEG_INFINITY, f64::max);
                let hi = self
                    .rtt_samples
                    .iter()
                    .map(|s| s.1)
                    .fold(f64::INFINITY, f64::min);
                if lo <= hi {
                    0.5 * (lo.max(0.0) + hi)
                } else {
                    hi
                }
            }
        }
    }

    fn log(&mut self, d: Decision) {
        if self.decisions.len() >= self.cfg.max_pending_decisions {
            self.decisions.pop_front();
            self.decisions_dropped += 1;
        }
        self.decisions.push_back(d);
    }

    fn join_to(&mut self, now: Time, n: usize) {
        while self.held < n {
            let k = self.held;
            if let Some(t) = self.seq.get_mut(k) {
                t.reset(); // E11: new PSN baseline
            }
            self.bunch.reset_layer(k as u8);
            self.rtt_probe.joined(k as u8, now);
            self.actions.push_back(Action::Join(k as u8));
            self.joins += 1;
            self.held += 1;
        }
    }

    fn leave_to(&mut self, n: usize) {
        while self.held > n {
            self.held -= 1;
            let k = self.held;
            self.bunch.reset_layer(k as u8);
            self.rtt_probe.left(k as u8);
            self.actions.push_back(Action::Leave(k as u8));
            self.leaves += 1;
        }
    }

    fn exit(&mut self, now: Time, reason: &'static str, inputs: Vec<(&'static str, f64)>) {
        let from = self.held;
        self.leave_to(0);
        self.actions.push_back(Action::Exit);
        self.phase = Phase::Exited;
        self.next_adapt = None;
        self.log(Decision {
            at: now,
            from_layers: from as u8,
            to_layers: 0,
            reason,
            inputs,
        });
    }

    fn layer_rate(&self, j: usize) -> f64 {
        if j == 0 {
            self.cum.first().copied().unwrap_or(0.0)
        } else {
            self.cum[j] - self.cum[j - 1]
        }
    }
}

impl Default for Era {
    fn default() -> Self {
        Era::new(EraConfig::default())
    }
}

impl LayeredController for Era {
    fn name(&self) -> &'static str {
        "era"
    }

    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        if self.phase == Phase::Exited || info.layers.is_empty() {
            return;
        }
        // Stale or replayed SAMs of the same session do not re-phase the grid.
        if let Some((sid, seq)) = self.last_announce {
            if sid == info.session_id && (info.announce_seq.wrapping_sub(seq) as i32) < 0 {
                return;
            }
        }
        let new_session = self.last_announce.map(|a| a.0) != Some(info.session_id);
        self.last_announce = Some((info.session_id, info.announce_seq));
        self.cum = cumulative(info);
        self.rai = info.adapt_interval.max(Duration::from_millis(1));
        if self.seq.len() < info.layers.len() {
            self.seq.resize(
                info.layers.len(),
                SeqTracker::with_threshold(self.cfg.max_seq_gap, self.cfg.reorder_threshold),
            );
        }
        if self.held > info.layers.len() {
            self.leave_to(info.layers.len());
        }
        if new_session {
            self.loss.clear();
            self.pp_now.clear();
            self.pp_carry.clear();
            self.last_r_pp = None;
            self.stall_reset();
            self.rai_lost = 0;
            self.prev_rai_lost = 0;
            self.rais_since_loss = usize::MAX;
            self.seq.iter_mut().for_each(|s| s.reset());
            self.bunch.reset();
        }
        self.info = Some(info.clone());
        if self.phase == Phase::Waiting {
            self.phase = Phase::Running;
            self.join_to(now, 1);
            self.log(Decision {
                at: now,
                from_layers: 0,
                to_layers: 1,
                reason: "join-base",
                inputs: vec![("r_after", self.rate_of(1))],
            });
        }
        // §1.1.14: re-phase the RAI grid to this SAM, keeping the grid point nearest to the
        // pending deadline (so a SAM arriving just before an RAI does not postpone it).
        let rai = self.rai.as_nanos() as u64;
        match self.next_adapt {
            None => self.next_adapt = Some(now + self.rai),
            Some(old) => {
                let ahead = old.as_nanos().saturating_sub(now.as_nanos());
                let k = ahead.saturating_add(rai / 2) / rai;
                if k == 0 {
                    self.next_adapt = Some(now + self.rai);
                    self.on_rai(now);
                } else {
                    self.next_adapt =
                        Some(Time(now.as_nanos().saturating_add(k.saturating_mul(rai))));
                }
            }
        }
    }

    #[inline]
    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        if self.phase != Phase::Running {
            return;
        }
        let k = pkt.layer as usize;
        // E11: packets of layers not held (leave latency) are not counted at all.
        if k >= self.held {
            return;
        }
        if let Some(s) = self.rtt_probe.packet(pkt.layer, now) {
            if let RttMode::JoinLatency { window, .. } = self.cfg.rtt {
                let bunch_interval = self.info.as_ref().map_or(0.0, |i| {
                    let l = self.layer_rate(k);
                    if l > 0.0 {
                        i.bunch_len.max(1) as f64 * 8.0 * i.packet_size as f64 / l
                    } else {
                        0.0
                    }
                });
                self.rtt_samples.push_back((s - bunch_interval, s));
                while self.rtt_samples.len() > window.max(1) {
                    self.rtt_samples.pop_front();
                }
            }
        }
        self.rai_packets += 1;
        let ev = self.seq[k].on_seq(pkt.seq);
        self.loss.record(ev);
        self.received += 1;
        if let crate::estimators::SeqEvent::Advance { lost } = ev {
            self.lost = self.lost.saturating_add(lost);
            self.rai_lost = self.rai_lost.saturating_add(lost);
        } else if ev == crate::estimators::SeqEvent::Recovered {
            self.lost = self.lost.saturating_sub(1);
            self.rai_lost = self.rai_lost.saturating_sub(1);
        }
        // A duplicate (a duplicating network, a replay) is no bunch member: a copy of a first
        // packet would restart the bunch just before its second, a replayed pair would be
        // timed by whoever replays it (reliability review F6).
        if matches!(
            ev,
            crate::estimators::SeqEvent::Duplicate | crate::estimators::SeqEvent::TooOld
        ) {
            return;
        }
        if let Some(s) = self.bunch.on_packet(pkt) {
            // E14: the highest rate the sample is consistent with, given the timing precision.
            let rate = s.rate_bps * (1.0 + self.cfg.pp_precision.max(0.0));
            self.on_sample(now, pkt.layer, rate);
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.phase != Phase::Running {
            return;
        }
        let Some(due) = self.next_adapt else {
            return;
        };
        if now < due {
            return; // spurious
        }
        // Keep the grid: the next deadline is the first grid point after `now`.
        self.next_adapt = Some(Time::next_on_grid(due, now, self.rai));
        self.on_rai(now);
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        self.next_adapt.map(|t| (t, TimerReason::Adapt))
    }

    fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    fn stats(&self) -> Stats {
        Stats {
            protocol: "era",
            layers: self.held as u8,
            subscribed_bps: if self.cum.is_empty() {
                0.0
            } else {
                self.rate_of(self.held)
            },
            estimate_bps: self.last_target,
            loss_ratio: self.last_plr,
            rtt_s: Some(self.rtt()),
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
