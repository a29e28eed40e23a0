//! RLC, Receiver-driven Layered Congestion control (Vicisano, Rizzo, Crowcroft, INFOCOM 1998),
//! receiver side plus the sender's synchronisation-point schedule ([`SyncPoints`]).
//!
//! * **Synchronisation points.** A receiver whose top layer is `i` may join layer `i+1` only
//!   right after a synchronisation point (SP) on layer `i`. SPs on layer `i` are spaced by
//!   `sp_cycle × min(B_i/B_0, 128 + i)` seconds (`B` cumulative rates), i.e. with frequency
//!   inversely proportional to the cumulative rate (`era.md` §1.3; the `min(…, 128+i)` cap is
//!   MCL's). Because every receiver behind a bottleneck sees the same SPs, their join
//!   experiments are synchronised.
//! * **How receivers learn SPs.** Our packets carry no SP flag, so the SP schedule is a pure
//!   function of the announcement: packet `seq` of layer `i` is an SP iff
//!   `seq % P_i == 0`, with `P_i` the SP spacing in packets of that layer
//!   ([`SyncPoints::period_packets`]). Sender and receivers compute the same `P_i` from the
//!   SAM (rates, packet size) and the sender numbers every layer from 0. The top layer never
//!   carries SPs.
//! * **Burst test.** The sender sends the `burst_packets` packets before each SP at twice the
//!   layer's rate, then pauses so the average rate is unchanged
//!   ([`SyncPoints::spacing_factor`]); the doubled aggregate mimics the next layer. A join at
//!   the SP is allowed only if no loss was seen since the previous SP, burst included.
//! * **Drop.** `loss_limit` losses within the last `loss_window` packets drop the top layer;
//!   then a **deaf period** ignores losses (the dropped layer keeps flowing until the IGMP
//!   leave takes effect and the queue drains), and the first SP after it is skipped.

use crate::baseline::{Core, Observed};
use congestion::controller::{
    Action, Decision, LayeredController, PacketArrival, Stats, TimerReason,
};
use proto::session::SessionInfo;
use proto::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// Sender-side synchronisation-point schedule, shared by sender and receivers.
#[derive(Clone, Debug, PartialEq)]
pub struct SyncPoints {
    periods: Vec<u64>,
    burst_packets: u64,
}

impl SyncPoints {
    /// Builds the schedule from the announcement. `sp_cycle` is the SP spacing of the base
    /// layer; `burst_packets` the length of the pre-SP burst per layer (0 = no burst test).
    pub fn new(info: &SessionInfo, sp_cycle: Duration, burst_packets: u64) -> SyncPoints {
        let size = info.packet_size.max(1) as f64;
        let b0 = info.cumulative_rate(0).max(1.0);
        let periods = (0..info.layers.len())
            .map(|i| {
                let ratio = (info.cumulative_rate(i) / b0).min(128.0 + i as f64);
                let t = sp_cycle.as_secs_f64() * ratio;
                let pps = info.layers[i].rate_bps as f64 / (8.0 * size);
                (t * pps).round().clamp(1.0, 1e12) as u64
            })
            .collect();
        SyncPoints {
            periods,
            burst_packets,
        }
    }

    /// SP spacing of `layer` in packets of that layer (`u64::MAX` for unknown layers).
    pub fn period_packets(&self, layer: u8) -> u64 {
        self.periods
            .get(layer as usize)
            .copied()
            .unwrap_or(u64::MAX)
    }

    /// Whether packet `seq` of `layer` is a synchronisation point (never on the top layer).
    #[allow(clippy::manual_is_multiple_of)] // workspace MSRV 1.80 predates is_multiple_of
    pub fn is_sync_point(&self, layer: u8, seq: u64) -> bool {
        if layer as usize + 1 >= self.periods.len() {
            return false;
        }
        seq % self.period_packets(layer) == 0
    }

    /// Whether packet `seq` of `layer` belongs to the burst that precedes an SP.
    pub fn in_burst(&self, layer: u8, seq: u64) -> bool {
        if layer as usize + 1 >= self.periods.len() || self.burst_packets == 0 {
            return false;
        }
        let p = self.period_packets(layer);
        let to_sp = (p - seq % p) % p;
        to_sp != 0 && to_sp <= self.burst_packets.min(p.saturating_sub(1) / 2)
    }

    /// Multiplier of the nominal inter-packet gap *before* packet `seq` of `layer`: 0.5
    /// inside the burst (twice the rate), the saved time added before the SP packet, 1
    /// otherwise. The layer's average rate is unchanged.
    pub fn spacing_factor(&self, layer: u8, seq: u64) -> f64 {
        if self.in_burst(layer, seq) {
            return 0.5;
        }
        if self.is_sync_point(layer, seq) && seq > 0 && self.burst_packets > 0 {
            let p = self.period_packets(layer);
            let b = self.burst_packets.min(p.saturating_sub(1) / 2);
            return 1.0 + 0.5 * b as f64;
        }
        1.0
    }
}

/// RLC receiver parameters.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// SP spacing of the base layer (MCL: 250 ms).
    pub sp_cycle: Duration,
    /// Pre-SP burst length in packets per layer (the sender's; 0 disables the burst test).
    pub burst_packets: u64,
    /// Losses that drop the top layer ... (MCL: 1)
    pub loss_limit: u32,
    /// ... within this many received packets (MCL: 20).
    pub loss_window: u32,
    /// Losses ignored after a drop (MCL: 10 s; MAD: 3.5 s; ours 2 s, see rlc.md).
    pub deaf_period: Duration,
    /// Never drop below this many layers.
    pub min_layers: u8,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            sp_cycle: Duration::from_millis(250),
            burst_packets: 4,
            loss_limit: 1,
            loss_window: 20,
            deaf_period: Duration::from_secs(2),
            min_layers: 1,
        }
    }
}

/// The RLC receiver.
#[derive(Debug)]
pub struct Rlc {
    cfg: Config,
    core: Core,
    sp: Option<SyncPoints>,
    deaf_until: Option<Time>,
    skip_next_sp: bool,
    /// No loss since the previous SP on the top layer.
    clean: bool,
    /// Packet index (count of received packets) at each recent loss.
    losses: VecDeque<u64>,
    deaf_end_pending: bool,
}

impl Rlc {
    pub fn new(cfg: Config) -> Rlc {
        Rlc {
            cfg,
            core: Core::new("rlc"),
            sp: None,
            deaf_until: None,
            skip_next_sp: false,
            clean: true,
            losses: VecDeque::new(),
            deaf_end_pending: false,
        }
    }

    /// The SP schedule learnt from the announcement.
    pub fn sync_points(&self) -> Option<&SyncPoints> {
        self.sp.as_ref()
    }

    fn deaf(&self, now: Time) -> bool {
        self.deaf_until.is_some_and(|t| now < t)
    }

    fn inputs(&self, now: Time) -> Vec<(&'static str, f64)> {
        vec![
            ("losses_in_window", self.losses.len() as f64),
            ("clean_since_sp", if self.clean { 1.0 } else { 0.0 }),
            ("deaf", if self.deaf(now) { 1.0 } else { 0.0 }),
        ]
    }

    fn on_loss(&mut self, now: Time, lost: u64) {
        self.clean = false;
        if self.deaf(now) {
            return;
        }
        let idx = self.core.received;
        for _ in 0..lost.min(self.cfg.loss_limit as u64 + 1) {
            self.losses.push_back(idx);
        }
        let window = self.cfg.loss_window as u64;
        while self
            .losses
            .front()
            .is_some_and(|&i| idx.saturating_sub(i) >= window)
        {
            self.losses.pop_front();
        }
        if self.losses.len() as u32 >= self.cfg.loss_limit.max(1) {
            let mut inp = self.inputs(now);
            inp.push(("lost", lost as f64));
            if self.core.level > self.cfg.min_layers.max(1) {
                self.core.leave_top(now, "loss-drop", inp);
            } else {
                self.core.note(now, "loss-at-min-level", inp);
            }
            self.losses.clear();
            self.deaf_until = Some(now + self.cfg.deaf_period);
            self.deaf_end_pending = true;
            self.skip_next_sp = true;
        }
    }

    fn on_sync_point(&mut self, now: Time, layer: u8) {
        if self.deaf(now) {
            self.clean = true;
            return;
        }
        let mut inp = self.inputs(now);
        inp.push(("sp_layer", layer as f64));
        if self.skip_next_sp {
            self.skip_next_sp = false;
            self.core.note(now, "sp-skipped-after-deaf", inp);
        } else if self.clean {
            self.core.join_next(now, "sp-join", inp);
        } else {
            self.core.note(now, "sp-no-join-loss", inp);
        }
        self.clean = true;
    }
}

impl Default for Rlc {
    fn default() -> Self {
        Rlc::new(Config::default())
    }
}

impl LayeredController for Rlc {
    fn name(&self) -> &'static str {
        "rlc"
    }

    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        let first = self.core.announce(now, info);
        self.sp = Some(SyncPoints::new(
            info,
            self.cfg.sp_cycle,
            self.cfg.burst_packets,
        ));
        if first {
            self.core.join_next(now, "start", vec![]);
        }
    }

    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        if let Observed::Held { lost } = self.core.observe(pkt.layer, pkt.seq) {
            if lost > 0 {
                self.on_loss(now, lost);
            }
            let top = self.core.level.saturating_sub(1);
            let is_sp = self
                .sp
                .as_ref()
                .is_some_and(|s| s.is_sync_point(pkt.layer, pkt.seq));
            if pkt.layer == top && is_sp && !self.core.exited {
                self.on_sync_point(now, pkt.layer);
            }
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.deaf_end_pending && !self.deaf(now) {
            self.deaf_end_pending = false;
            let inp = self.inputs(now);
            self.core.note(now, "deaf-end", inp);
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.core.poll_action()
    }

    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        match self.deaf_until {
            Some(t) if self.deaf_end_pending => Some((t, TimerReason::HoldOff)),
            _ => None,
        }
    }

    fn poll_decision(&mut self) -> Option<Decision> {
        self.core.poll_decision()
    }

    fn stats(&self) -> Stats {
        self.core.stats()
    }

    fn layers(&self) -> u8 {
        self.core.level
    }
}

/// Seconds between SPs of `layer` under `sp` for a session (for docs and tests).
pub fn sp_interval_secs(info: &SessionInfo, sp: &SyncPoints, layer: u8) -> f64 {
    let size = info.packet_size.max(1) as f64;
    let pps = info
        .layers
        .get(layer as usize)
        .map(|l| l.rate_bps as f64 / (8.0 * size))
        .unwrap_or(0.0);
    if pps <= 0.0 {
        return f64::INFINITY;
    }
    sp.period_packets(layer) as f64 / pps
}
