//! PLM — Packet-pair receiver-driven cumulative Layered Multicast (Legout & Biersack 2000;
//! `plm.md` §3).
//!
//! Under fair queueing a packet pair's spacing after the bottleneck gives this session's fair
//! share. The receiver drops layers at once when a single sample falls below its cumulative
//! rate, and adds layers at most once per check period C from the minimum sample seen since
//! the last decision (§3.3, strict `<` by default, permissive `<=` as an option). When pairs
//! stop getting through it falls back to a short-term loss rule (§3.5, ns-2 details) and to a
//! silence timeout.
//!
//! Choices where the paper is silent (`docs/protocols/plm.md`):
//! - C is the SAM's adaptation interval unless [`PlmConfig::check_period`] overrides it.
//! - Start-up timeout `T_start` = 5 s after the base-layer join with no packet at all.
//! - Silence timeout `T_nopkt` = max(1 s, 4 × the base layer's mean burst interval) after the
//!   last packet: one layer dropped per expiry.
//! - Dropping the last layer (by a sample, the loss rule, silence or start-up) re-joins the
//!   base layer after `T_rejoin` = 30 s (ns-2), or exits when [`PlmConfig::exit_on_empty`].
//! - Loss counts sum over the held layers; a joined layer's sequence baseline is reset and a
//!   left layer stops counting at once (as ERA's E11).

mod config;
mod loss_rule;
mod samples;
#[cfg(test)]
mod tests;

use crate::controller::{Action, Decision, LayeredController, PacketArrival, Stats, TimerReason};
use crate::estimators::bunch::BunchSampler;
use crate::estimators::loss::{SeqEvent, SeqTracker};
use crate::session::SessionInfo;
use crate::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

pub use config::PlmConfig;
use loss_rule::LossCycle;

/// The PLM receiver.
pub struct Plm {
    cfg: PlmConfig,
    info: Option<SessionInfo>,
    /// `B[1..=N]` as `cum[0..N]`.
    cum: Vec<f64>,
    c: Duration,
    t_nopkt: Duration,
    /// Layers held (n).
    n: usize,
    t_c: Option<Time>,
    /// The first PP sample since the base join (T_c's first setting). Logged with every add
    /// decision as `first_pp_age_s`: plm.md E2 bounds the convergence time from the first PP,
    /// which the host cannot see otherwise.
    first_pp: Option<Time>,
    w_min: f64,
    w_count: usize,
    /// Samples of the last C since the last drop or add (`sliding_check`): a deque of
    /// increasing values for the sliding minimum, and the sample times for the count.
    slide_min: VecDeque<(Time, f64)>,
    slide_times: VecDeque<Time>,
    /// Time of the last drop or add (or the first sample since the base join): the sliding
    /// rule needs samples over a full C after it.
    slide_since: Option<Time>,
    /// The last check added nothing: evaluate the sliding minimum at every sample.
    sliding: bool,
    /// A sample below `B[n]` waiting for confirmation (`confirm_drop`): (time, value).
    pending_low: Option<(Time, f64)>,
    /// Low samples set aside because the next sample was at or above `B[n]`.
    set_aside: u64,
    /// When a low run was last set aside: a new low sample within C of it is believed at once
    /// (stalls are rare and lone; lows that recur are a share that really changed, e.g. a
    /// starting session that is backlogged only part of the time, plm/E4 run 5).
    last_set_aside: Option<Time>,
    /// When layers were last added (or the base joined): `confirm_drop` holds low samples only
    /// at least C after that (right after an add, a low sample is the add overshooting, not a
    /// stall; after a drop the lower level needs no such grace).
    level_since: Time,
    /// When layers were last dropped, for [`PlmConfig::climb_after_drop`].
    last_drop: Option<Time>,
    seq: Vec<SeqTracker>,
    bunch: BunchSampler,
    cycle: Option<LossCycle>,
    blind_until: Time,
    /// A loss-drop happened since the last add decision (`no_add_while_lossy`).
    loss_dropped_in_period: bool,
    /// Time of the last packet, or of the base join before any packet.
    last_packet: Option<Time>,
    /// Whether any packet arrived since the last base join (selects T_start vs T_nopkt).
    got_packet: bool,
    rejoin_at: Option<Time>,
    exited: bool,
    actions: VecDeque<Action>,
    decisions: VecDeque<Decision>,
    decisions_dropped: u64,
    last_estimate: Option<f64>,
    last_loss_rate: f64,
    received: u64,
    lost: u64,
    joins: u64,
    leaves: u64,
}

impl Plm {
    /// A receiver with `cfg`; it joins nothing before the first SAM.
    pub fn new(cfg: PlmConfig) -> Plm {
        Plm {
            cfg,
            info: None,
            cum: Vec::new(),
            c: Duration::from_secs(1),
            t_nopkt: Duration::from_secs(1),
            n: 0,
            t_c: None,
            first_pp: None,
            w_min: f64::INFINITY,
            w_count: 0,
            slide_min: VecDeque::new(),
            slide_times: VecDeque::new(),
            slide_since: None,
            sliding: false,
            pending_low: None,
            set_aside: 0,
            last_set_aside: None,
            level_since: Time::ZERO,
            last_drop: None,
            seq: Vec::new(),
            bunch: BunchSampler::new(),
            cycle: None,
            blind_until: Time::ZERO,
            loss_dropped_in_period: false,
            last_packet: None,
            got_packet: false,
            rejoin_at: None,
            exited: false,
            actions: VecDeque::new(),
            decisions: VecDeque::new(),
            decisions_dropped: 0,
            last_estimate: None,
            last_loss_rate: 0.0,
            received: 0,
            lost: 0,
            joins: 0,
            leaves: 0,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &PlmConfig {
        &self.cfg
    }

    /// The check period in use.
    pub fn check_period(&self) -> Duration {
        self.c
    }

    /// The silence timeout in use.
    pub fn silence_timeout(&self) -> Duration {
        self.t_nopkt
    }

    /// Low samples set aside by [`PlmConfig::confirm_drop`] so far.
    pub fn set_aside(&self) -> u64 {
        self.set_aside
    }

    /// `B[n]`, the cumulative rate of `n` layers (0 for none).
    fn b(&self, n: usize) -> f64 {
        if n == 0 {
            0.0
        } else {
            self.cum[(n - 1).min(self.cum.len() - 1)]
        }
    }

    fn log(
        &mut self,
        at: Time,
        from: usize,
        reason: &'static str,
        inputs: Vec<(&'static str, f64)>,
    ) {
        if self.n > from {
            self.level_since = at;
        }
        if self.n < from {
            self.last_drop = Some(at);
        }
        if self.decisions.len() >= self.cfg.max_pending_decisions {
            self.decisions.pop_front();
            self.decisions_dropped += 1;
        }
        self.decisions.push_back(Decision {
            at,
            from_layers: from as u8,
            to_layers: self.n as u8,
            reason,
            inputs,
        });
    }

    fn join_next(&mut self) {
        let k = self.n;
        if let Some(t) = self.seq.get_mut(k) {
            t.reset();
        }
        self.bunch.reset_layer(k as u8);
        self.actions.push_back(Action::Join(k as u8));
        self.joins += 1;
        self.n += 1;
    }

    fn leave_top(&mut self) {
        self.pending_low = None; // judged against a rate no longer held
        if self.n == 0 {
            return;
        }
        self.n -= 1;
        let k = self.n;
        self.bunch.reset_layer(k as u8);
        self.actions.push_back(Action::Leave(k as u8));
        self.leaves += 1;
    }

    fn join_base(&mut self, now: Time, reason: &'static str) {
        self.pending_low = None;
        self.join_next();
        self.t_c = None;
        self.first_pp = None;
        self.reset_window();
        self.reset_slide(None);
        self.cycle = None;
        self.last_packet = Some(now);
        self.got_packet = false;
        self.rejoin_at = None;
        let b1 = self.b(1);
        self.log(now, 0, reason, vec![("b_after", b1)]);
    }

    /// After the last layer went: re-join later, or exit.
    fn emptied(&mut self, now: Time) {
        if self.n > 0 {
            return;
        }
        self.t_c = None;
        self.reset_window();
        self.reset_slide(None);
        self.cycle = None;
        if self.cfg.exit_on_empty {
            self.actions.push_back(Action::Exit);
            self.exited = true;
            self.rejoin_at = None;
        } else {
            self.rejoin_at = Some(now + self.cfg.t_rejoin);
        }
    }

    fn silence_deadline(&self) -> Option<Time> {
        if self.n == 0 || self.exited {
            return None;
        }
        let last = self.last_packet?;
        Some(
            last + if self.got_packet {
                self.t_nopkt
            } else {
                self.cfg.t_start
            },
        )
    }
}

impl Default for Plm {
    fn default() -> Self {
        Plm::new(PlmConfig::default())
    }
}

impl LayeredController for Plm {
    fn name(&self) -> &'static str {
        "plm"
    }

    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        if self.exited || info.layers.is_empty() {
            return;
        }
        let mut acc = 0.0;
        self.cum = info
            .layers
            .iter()
            .map(|l| {
                acc += l.rate_bps as f64;
                acc
            })
            .collect();
        self.c = self
            .cfg
            .check_period
            .unwrap_or(info.adapt_interval)
            .max(Duration::from_millis(1));
        self.t_nopkt = self.cfg.t_nopkt.unwrap_or_else(|| {
            let l0 = info.layers[0].rate_bps.max(1) as f64;
            let burst = info.bunch_len.max(1) as f64 * 8.0 * info.packet_size as f64 / l0;
            Duration::from_secs_f64((4.0 * burst).max(1.0))
        });
        if self.seq.len() < info.layers.len() {
            self.seq.resize(
                info.layers.len(),
                SeqTracker::with_threshold(self.cfg.max_seq_gap, self.cfg.reorder_threshold),
            );
        }
        while self.n > info.layers.len() {
            self.leave_top();
        }
        let first = self.info.is_none();
        self.info = Some(info.clone());
        if first {
            self.join_base(now, "join-base");
        }
    }

    #[inline]
    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        let k = pkt.layer as usize;
        if k >= self.n || self.exited {
            return; // not held (leave latency) or not joined
        }
        self.last_packet = Some(now);
        self.got_packet = true;
        self.received += 1;
        let ev = self.seq[k].on_seq(pkt.seq);
        match ev {
            SeqEvent::Advance { lost } => self.lost = self.lost.saturating_add(lost),
            SeqEvent::Recovered => self.lost = self.lost.saturating_sub(1),
            _ => {}
        }
        if matches!(ev, SeqEvent::Advance { lost } if lost > 0) {
            // A loss confirms a held low sample (`confirm_drop`): congestion, not a stall.
            if let Some((_, x0)) = self.pending_low {
                self.pp_drop(now, x0, true);
            }
        }
        self.on_loss_accounting(now, ev);
        // A duplicate is no bunch member (reliability review F6; see `Era::handle_packet`).
        if (pkt.layer as usize) < self.n && !matches!(ev, SeqEvent::Duplicate | SeqEvent::TooOld) {
            if let Some(s) = self.bunch.on_packet(pkt) {
                self.on_sample(now, s.rate_bps);
            }
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.exited {
            return;
        }
        if let Some(at) = self.rejoin_at {
            if now >= at && self.n == 0 {
                self.join_base(now, "rejoin");
                return;
            }
        }
        if let Some(at) = self.pending_deadline() {
            if now >= at {
                // No sample came to set the low one aside: believe it.
                if let Some((_, x0)) = self.pending_low {
                    self.pp_drop(now, x0, true);
                }
            }
        }
        let Some(dl) = self.silence_deadline() else {
            return;
        };
        if now < dl {
            return; // spurious
        }
        let from = self.n;
        let bn = self.b(self.n);
        let reason = if self.got_packet {
            "silence-drop"
        } else {
            "start-timeout"
        };
        if self.got_packet {
            self.leave_top();
        } else {
            while self.n > 0 {
                self.leave_top();
            }
        }
        self.last_packet = Some(now);
        let b_after = self.b(self.n);
        self.log(
            now,
            from,
            reason,
            vec![("b_before", bn), ("b_after", b_after)],
        );
        self.emptied(now);
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        if self.exited {
            return None;
        }
        if let Some(at) = self.rejoin_at {
            return Some((at, TimerReason::Rejoin));
        }
        let silence = self.silence_deadline().map(|t| (t, TimerReason::Silence));
        match (self.pending_deadline(), silence) {
            (Some(p), Some((s, _))) if p < s => Some((p, TimerReason::Other)),
            (Some(p), None) => Some((p, TimerReason::Other)),
            (_, silence) => silence,
        }
    }

    fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    fn stats(&self) -> Stats {
        Stats {
            protocol: "plm",
            layers: self.n as u8,
            subscribed_bps: if self.cum.is_empty() {
                0.0
            } else {
                self.b(self.n)
            },
            estimate_bps: self.last_estimate,
            loss_ratio: self.last_loss_rate,
            rtt_s: None,
            packets_received: self.received,
            packets_lost: self.lost,
            joins: self.joins,
            leaves: self.leaves,
        }
    }

    fn layers(&self) -> u8 {
        self.n as u8
    }
}
