//! FLID-DL, Fair Layered Increase/Decrease with Dynamic Layering (Byers, Luby, Mitzenmacher,
//! et al., NGC 2000 / JSAC 2002), receiver side plus the sender-side helpers
//! [`DynamicLayerSchedule`] and [`IncreaseSignals`].
//!
//! ## Logical layers and the host contract
//! The controller works on *logical* cumulative layers: layer 0 is the static base, layer
//! `k ≥ 1` the dynamic layer that currently carries the k-th rate increment
//! (`B_k = B_0·C^k`). At every time-slot change each dynamic channel's rate steps down one
//! logical level (the channel that carried layer 1 goes quiescent), so a receiver that does
//! nothing loses one level per slot. The controller therefore emits at each slot change:
//!
//! * `Leave(top)` (reason `slot-decay`): the level decays by one;
//! * then `Join(top)` again to keep the level (`keep`), plus `Join(top+1)` on an increase
//!   signal (`increase-signal`), or nothing after a loss in the slot (`loss-drop`).
//!
//! The host reconciles its IGMP memberships after draining the actions to
//! [`DynamicLayerSchedule::channels_for_level`]`(layers(), current_slot())`: in practice one
//! join of the channel that now carries the top layer and one leave of the quiescent channel
//! per slot, never a leave of a channel that still carries data (the point of DL: IGMP leave
//! latency costs nothing).
//!
//! ## Slots, signals and sequence numbers
//! * Slot index = `send_time_us / slot_us` on the sender's clock (no header field needed).
//! * Increase signals are a pure function of `(session_id, slot, level)` hashed against the
//!   per-level probability ([`IncreaseSignals`]), so every receiver sees the same signals,
//!   which is the synchronisation FLID's sender-set signals provide.
//! * Channels change at a slot change, so by default sequence tracking restarts and only
//!   packets sent in the current slot feed loss detection. Sequence numbers run per physical
//!   channel (one RTP stream per group), so with [`Config::loss_per_channel`] loss is tracked
//!   per channel (`channel_for(layer, slot of the send time)`) across slot boundaries, and a
//!   channel's tracker restarts only when the receiver newly joins it.

use crate::baseline::{mix64, new_tracker, Core, Observed};
use congestion::controller::{
    Action, Decision, LayeredController, PacketArrival, Stats, TimerReason,
};
use congestion::estimators::SeqTracker;
use proto::session::SessionInfo;
use proto::time::Time;
use std::time::Duration;

/// Maps logical layers to physical dynamic channels per time slot (sender and host side).
///
/// With `n` logical layers (base + `n−1` dynamic) and `q` quiescent slots there are
/// `G = n − 1 + q` dynamic channels; channel `g` carries logical layer `(g − s) mod G` in slot
/// `s` when that is in `1..n`, and is quiescent otherwise. Each channel therefore steps down
/// one layer per slot, carries nothing for `q` slots, and is reused.
#[derive(Clone, Debug, PartialEq)]
pub struct DynamicLayerSchedule {
    /// Logical layers including the base.
    pub layers: u8,
    /// Quiescent slots per channel cycle.
    pub quiescent_slots: u32,
    /// Slot duration.
    pub slot: Duration,
}

impl DynamicLayerSchedule {
    /// Number of dynamic channels (the base channel is separate).
    pub fn channels(&self) -> u32 {
        (self.layers.max(1) as u32 - 1) + self.quiescent_slots.max(1)
    }
    /// Slot index of a sender timestamp.
    pub fn slot_at(&self, send_time_us: u64) -> u64 {
        send_time_us / (self.slot.as_micros().max(1) as u64)
    }
    /// Channel carrying logical layer `k ≥ 1` in `slot` (None for the base or out of range).
    pub fn channel_for(&self, k: u8, slot: u64) -> Option<u32> {
        if k == 0 || k >= self.layers {
            return None;
        }
        let g = self.channels() as u64;
        Some(((slot % g + k as u64) % g) as u32)
    }
    /// Logical layer carried by `channel` in `slot`, None while quiescent.
    pub fn logical_of(&self, channel: u32, slot: u64) -> Option<u8> {
        let g = self.channels() as u64;
        if channel as u64 >= g {
            return None;
        }
        let k = (channel as u64 + g - slot % g) % g;
        (k >= 1 && k < self.layers as u64).then_some(k as u8)
    }
    /// Dynamic channels a receiver at `level` (layers held, base included) must be joined to.
    pub fn channels_for_level(&self, level: u8, slot: u64) -> Vec<u32> {
        (1..level.min(self.layers))
            .filter_map(|k| self.channel_for(k, slot))
            .collect()
    }
}

/// FLID's probabilistic increase signals, derived from the session so sender and receivers
/// agree without a header field.
///
/// Probability for going from level `i` to `i+1` per slot: the TCP-like linear increase
/// `dR/dt = 8·s/RTT²` (one packet per RTT per RTT) at the *simulated* RTT makes the expected
/// climb time `(B_{i+1} − B_i)·RTT²/(8·s)`; with one signal chance per slot of length `T`,
/// `p_i = min(1, 8·s·T / ((B_{i+1} − B_i)·RTT²))`.
#[derive(Clone, Debug, PartialEq)]
pub struct IncreaseSignals {
    probs: Vec<f64>,
    seed: u64,
}

impl IncreaseSignals {
    pub fn new(info: &SessionInfo, slot: Duration, sim_rtt: Duration) -> IncreaseSignals {
        let s = info.packet_size.max(1) as f64;
        let rtt = sim_rtt.as_secs_f64().max(1e-3);
        let probs = (0..info.layers.len())
            .map(|i| {
                // Probability of the signal that lets a receiver holding i+1 layers join
                // layer i+1, indexed by the target layer i+1 (index 0 unused).
                let delta = info.layers[i].rate_bps as f64;
                if i == 0 || delta <= 0.0 {
                    1.0
                } else {
                    (8.0 * s * slot.as_secs_f64() / (delta * rtt * rtt)).min(1.0)
                }
            })
            .collect();
        IncreaseSignals {
            probs,
            seed: mix64(info.session_id as u64 ^ 0xF11D_0000_0000),
        }
    }
    /// Probability of the signal to join layer `k` (0 for layers the session lacks).
    pub fn probability(&self, k: u8) -> f64 {
        self.probs.get(k as usize).copied().unwrap_or(0.0)
    }
    /// Whether slot `slot` carries the increase signal for joining layer `k`.
    pub fn signal(&self, slot: u64, k: u8) -> bool {
        let h = mix64(self.seed ^ slot.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ ((k as u64) << 56));
        ((h >> 11) as f64 / (1u64 << 53) as f64) < self.probability(k)
    }
}

/// FLID-DL receiver parameters (thesis Table 4-6 where given).
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// Time slot T (0.5 s).
    pub slot: Duration,
    /// The fixed simulated RTT behind the increase probabilities (thesis: 2 × propagation
    /// delay; default 100 ms here, set it per scenario).
    pub sim_rtt: Duration,
    /// Quiescent slots per dynamic channel (unstated; 4 slots = 2 s covers IGMP fast leave).
    pub quiescent_slots: u32,
    /// Exit the session when a loss occurs while only the base layer is held (thesis rule).
    pub exit_on_base_loss: bool,
    /// A slot is declared over by timer if no packet of the next slot arrived this long after
    /// the boundary (estimated from the smallest one-way offset seen).
    pub slot_grace: Duration,
    /// Track sequence gaps per physical channel across slot boundaries (true) instead of per
    /// logical layer within the slot (false, the default). True sees every loss (the low
    /// layers carry < 1 packet per slot, so per-slot tracking misses most of theirs) but,
    /// with our increase probabilities p_k = 1, turns FLID into a multiplicative
    /// increase/decrease that is unfair between sessions (docs/protocols/flid-dl.md,
    /// "Per-channel loss tracking"); off until the increase signals are settled.
    pub loss_per_channel: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            slot: Duration::from_millis(500),
            sim_rtt: Duration::from_millis(100),
            quiescent_slots: 4,
            exit_on_base_loss: true,
            slot_grace: Duration::from_millis(200),
            loss_per_channel: false,
        }
    }
}

/// Largest slot jump handled one by one; larger jumps (sender restart, bogus timestamps)
/// resynchronise without replaying slots.
const MAX_SLOT_STEP: u64 = 8;

/// The FLID-DL receiver.
#[derive(Debug)]
pub struct Flid {
    cfg: Config,
    core: Core,
    signals: Option<IncreaseSignals>,
    schedule: Option<DynamicLayerSchedule>,
    slot: Option<u64>,
    loss_in_slot: u64,
    pkts_in_slot: u64,
    /// Smallest `recv − send` seen, microseconds (maps the sender's slot grid to our clock).
    offset_us: Option<i128>,
    /// Sequence trackers per physical channel: index 0 the base, `1 + g` dynamic channel `g`.
    chan_trackers: Vec<SeqTracker>,
    /// Dynamic channels held in the current slot (their trackers carry over to the next).
    held_chans: Vec<u32>,
}

impl Flid {
    pub fn new(cfg: Config) -> Flid {
        Flid {
            cfg,
            core: Core::new("flid"),
            signals: None,
            schedule: None,
            slot: None,
            loss_in_slot: 0,
            pkts_in_slot: 0,
            offset_us: None,
            chan_trackers: Vec::new(),
            held_chans: Vec::new(),
        }
    }

    /// Tracker index of logical `layer` in a packet sent in `slot`.
    fn channel_key(&self, layer: u8, slot: u64) -> usize {
        if layer == 0 {
            return 0;
        }
        match self
            .schedule
            .as_ref()
            .and_then(|d| d.channel_for(layer, slot))
        {
            Some(g) => 1 + g as usize,
            None => 1 + usize::from(layer),
        }
    }

    /// After a slot change or level change: channels held now that were not held before get a
    /// fresh tracker (their sequence moved on while we were away).
    fn sync_channels(&mut self) {
        let (Some(d), Some(s)) = (self.schedule.as_ref(), self.slot) else {
            return;
        };
        let now_held = d.channels_for_level(self.core.level, s);
        let need = 1 + d.channels() as usize;
        if self.chan_trackers.len() < need {
            self.chan_trackers.resize_with(need, new_tracker);
        }
        for &g in &now_held {
            if !self.held_chans.contains(&g) {
                if let Some(t) = self.chan_trackers.get_mut(1 + g as usize) {
                    t.reset();
                }
            }
        }
        self.held_chans = now_held;
    }
    /// Current slot index (None before the first packet).
    pub fn current_slot(&self) -> Option<u64> {
        self.slot
    }
    /// The channel schedule learnt from the announcement.
    pub fn schedule(&self) -> Option<&DynamicLayerSchedule> {
        self.schedule.as_ref()
    }
    /// The increase signals learnt from the announcement.
    pub fn signals(&self) -> Option<&IncreaseSignals> {
        self.signals.as_ref()
    }

    fn slot_us(&self) -> u64 {
        self.cfg.slot.as_micros().clamp(1, u64::MAX as u128) as u64
    }

    fn slot_end_deadline(&self) -> Option<Time> {
        let (s, off) = (self.slot?, self.offset_us?);
        let end_send = (s as i128 + 1) * self.slot_us() as i128;
        let recv_us = end_send + off + self.cfg.slot_grace.as_micros() as i128;
        Some(Time::from_micros(
            recv_us.clamp(0, u64::MAX as i128 / 1000) as u64
        ))
    }

    /// End-of-slot processing for the slot that just ended.
    fn end_slot(&mut self, now: Time) {
        let Some(s) = self.slot else { return };
        let level = self.core.level;
        let mut inputs = vec![
            ("slot", s as f64),
            ("loss_in_slot", self.loss_in_slot as f64),
            ("pkts_in_slot", self.pkts_in_slot as f64),
        ];
        if level == 0 || self.core.exited {
            return;
        }
        if self.loss_in_slot > 0 {
            if level == 1 {
                if self.cfg.exit_on_base_loss {
                    self.core.exit(now, "loss-at-base-exit", inputs);
                } else {
                    self.core.note(now, "loss-at-base", inputs);
                }
            } else {
                self.core.leave_top(now, "loss-drop", inputs);
            }
            return;
        }
        if level == 1 {
            // Only the static base layer: no decay; an increase signal joins layer 1.
            let sig = self.signal_for(s, 1);
            inputs.push(("p_signal", self.prob(1)));
            if sig && self.pkts_in_slot > 0 {
                self.core.join_next(now, "increase-signal", inputs);
            }
            return;
        }
        self.core.leave_top(now, "slot-decay", inputs.clone());
        self.core.join_next(now, "keep", inputs.clone());
        let next = level; // index of the next layer up
        inputs.push(("p_signal", self.prob(next)));
        if self.pkts_in_slot > 0 && self.signal_for(s, next) {
            self.core.join_next(now, "increase-signal", inputs);
        }
    }

    fn prob(&self, k: u8) -> f64 {
        self.signals.as_ref().map_or(0.0, |g| g.probability(k))
    }
    fn signal_for(&self, slot: u64, k: u8) -> bool {
        self.signals.as_ref().is_some_and(|g| g.signal(slot, k))
    }

    fn advance_to(&mut self, now: Time, new_slot: u64) {
        let Some(cur) = self.slot else {
            self.slot = Some(new_slot);
            return;
        };
        if new_slot <= cur {
            return;
        }
        if new_slot - cur > MAX_SLOT_STEP {
            self.core.note(
                now,
                "slot-resync",
                vec![("from", cur as f64), ("to", new_slot as f64)],
            );
            self.end_slot(now);
        } else {
            for s in cur..new_slot {
                self.slot = Some(s);
                self.end_slot(now);
                self.loss_in_slot = 0;
                self.pkts_in_slot = 0;
            }
        }
        self.slot = Some(new_slot);
        self.loss_in_slot = 0;
        self.pkts_in_slot = 0;
        if self.cfg.loss_per_channel {
            self.sync_channels();
        } else {
            self.core.reset_trackers();
        }
    }
}

impl Default for Flid {
    fn default() -> Self {
        Flid::new(Config::default())
    }
}

impl LayeredController for Flid {
    fn name(&self) -> &'static str {
        "flid"
    }

    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        let first = self.core.announce(now, info);
        self.signals = Some(IncreaseSignals::new(info, self.cfg.slot, self.cfg.sim_rtt));
        self.schedule = Some(DynamicLayerSchedule {
            layers: self.core.max_layers(),
            quiescent_slots: self.cfg.quiescent_slots,
            slot: self.cfg.slot,
        });
        if first {
            self.core.join_next(now, "start", vec![]);
        }
    }

    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        if self.core.exited || self.core.info.is_none() {
            return;
        }
        let off = now.as_micros() as i128 - pkt.send_time_us as i128;
        self.offset_us = Some(self.offset_us.map_or(off, |o| o.min(off)));
        let pslot = pkt.send_time_us / self.slot_us();
        if !self.cfg.loss_per_channel {
            match self.slot {
                Some(s) if pslot < s => {
                    // Sent in an earlier slot: the channel mapping differs; count, don't track.
                    if pkt.layer < self.core.level {
                        self.core.received += 1;
                    }
                    return;
                }
                Some(s) if pslot > s => self.advance_to(now, pslot),
                None => self.slot = Some(pslot),
                _ => {}
            }
            if let Observed::Held { lost } = self.core.observe(pkt.layer, pkt.seq) {
                self.pkts_in_slot += 1;
                self.loss_in_slot += lost;
            }
            return;
        }
        let late = match self.slot {
            Some(s) if pslot < s => true,
            Some(s) if pslot > s => {
                self.advance_to(now, pslot);
                false
            }
            None => {
                self.slot = Some(pslot);
                self.sync_channels();
                false
            }
            _ => false,
        };
        // Track on the packet's physical channel (its send slot maps it), also for a packet
        // sent in an earlier slot: a gap it reveals is a loss detected now.
        let key = self.channel_key(pkt.layer, pslot);
        if self.chan_trackers.len() <= key {
            self.chan_trackers.resize_with(key + 1, new_tracker);
        }
        let tracker = &mut self.chan_trackers[key];
        if let Observed::Held { lost } = self.core.observe_on(pkt.layer, pkt.seq, Some(tracker)) {
            if !late {
                self.pkts_in_slot += 1;
            }
            self.loss_in_slot += lost;
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.core.exited {
            return;
        }
        if let (Some(d), Some(s)) = (self.slot_end_deadline(), self.slot) {
            if now >= d {
                // No packet of the next slot arrived: the slot is over all the same.
                self.advance_to(now, s + 1);
            }
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.core.poll_action()
    }

    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        if self.core.exited || self.core.level == 0 {
            return None;
        }
        self.slot_end_deadline().map(|t| (t, TimerReason::Adapt))
    }

    fn poll_decision(&mut self) -> Option<Decision> {
        self.core.poll_decision()
    }

    fn stats(&self) -> Stats {
        let mut s = self.core.stats();
        s.rtt_s = Some(self.cfg.sim_rtt.as_secs_f64());
        s
    }

    fn layers(&self) -> u8 {
        self.core.level
    }
}

/// FLID's multiplicative ladder: `n` layers with cumulative rates `base·c^k` (the thesis uses
/// `c = 1.3`, base 12 kbit/s, 512-byte packets).
pub fn multiplicative_session(n: usize, base_bps: f64, c: f64, packet_size: u16) -> SessionInfo {
    let mut s = SessionInfo::equal_layers(n, 1, std::net::Ipv4Addr::new(239, 3, 0, 0), 5000);
    let mut prev = 0.0;
    for (k, l) in s.layers.iter_mut().enumerate() {
        let cum = base_bps * c.powi(k as i32);
        l.rate_bps = (cum - prev).round().max(1.0) as u64;
        prev = cum;
    }
    s.packet_size = packet_size;
    s
}
