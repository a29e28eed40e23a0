//! ALMA (Active Layered Multicast Adaptation, Yamamoto & Leduc 2000) as the thesis of seed 001
//! uses it (`active-networks.md` §1.8): every node is active, every outgoing interface publishes
//! a **price** that rises convexly with its average buffer occupancy, every data capsule carries
//! the **budget** of its layer, and a capsule whose budget is below the local price discards
//! itself. A layer discarded persistently on an interface is **pruned** there; receivers follow
//! what still arrives and probe upward with a subscribe (a join).
//!
//! Split, so that the engine needs no change:
//! * [`AlmaQueue`] wraps an interface's queue discipline and runs the per-node part (price,
//!   self-discard, prune). The scenario builder wraps every link's queue with it when a session
//!   runs `protocol: alma` (the thesis' "all nodes are active").
//! * [`AlmaReceiver`] is a [`LayeredController`]: subscribe = join, the cumulative level follows
//!   the layers that still arrive, upward probes only after a loss-free period.
//!
//! Constants the thesis does not give are [U] choices, listed in `docs/protocols/alma.md`.

use crate::engine::{Body, Packet};
use congestion::controller::TimerReason;
use congestion::{Action, Decision, LayeredController, PacketArrival, SessionInfo, Stats, Time};
use netmodel::{DropReason, QdiscConfig, QueueDiscipline, Queued};
use std::collections::VecDeque;

/// ALMA's standard price function (Eq. 3.5): `1000·√(1.01/(1.01 − load)) − 1000`, load in
/// [0, 1] (clamped).
pub fn price(load: f64) -> f64 {
    let l = load.clamp(0.0, 1.0);
    1000.0 * (1.01 / (1.01 - l)).sqrt() - 1000.0
}

/// The load at which [`price`] equals `budget`: `1.01·(1 − 1/(1 + B/1000)²)`.
pub fn load_at_price(budget: f64) -> f64 {
    let b = budget.max(0.0);
    1.01 * (1.0 - 1.0 / (1.0 + b / 1000.0).powi(2))
}

/// The spec's proposed scale of the budgets: `budget(1) = 3100`, so the base layer survives
/// until ≈ 95 % buffer occupancy ([U], spec §1.8). See [`DEFAULT_BUDGET_K`] for the one in use.
pub const BUDGET_K: f64 = 3100.0 / std::f64::consts::LN_2;

/// The budget scale `alma` sessions use: the spec's proposal [`BUDGET_K`]. The thesis never
/// gives its budgets, and no single scale reproduces all of M1-M4 here: with this one M1
/// converges loss-free-ish in < 3.6 s but ALMA yields to TCP and CBR (the price of a drop-tail
/// buffer that a loss-driven flow keeps full is above every budget but the first few);
/// `alma-k40000` reproduces M3 (a) and (b) and M4 K1 but overloads M1's links (the sweep is in
/// docs/protocols/alma.md).
pub const DEFAULT_BUDGET_K: f64 = BUDGET_K;

/// Budget of layer `l` (1 = base): proportional to the marginal utility of adding it, with
/// utility `ln(1 + k)` for `k` cumulative layers ([U], spec §1.8).
pub fn budget(l: u32) -> f64 {
    budget_scaled(l, BUDGET_K)
}

/// [`budget`] with another scale `k` (`budget_scaled(1, k) = k·ln 2`).
pub fn budget_scaled(l: u32, k: f64) -> f64 {
    let l = f64::from(l.max(1));
    k * ((1.0 + l) / l).ln()
}

/// Per-node parameters ([U] unless noted).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NodeConfig {
    /// Time constant of the average-occupancy filter, seconds.
    pub avg_tau_s: f64,
    /// Price recomputation period, seconds (spec: 100 ms).
    pub price_period_s: f64,
    /// Prune window, seconds (spec: 1 s).
    pub prune_window_s: f64,
    /// Fraction of a layer's capsules discarded over a window that prunes it (spec: 50 %).
    pub prune_fraction: f64,
    /// A layer that self-discarded in this many consecutive windows is pruned too, whatever
    /// the fraction (persistent partial filtering; [U]).
    pub prune_windows: u32,
    /// Soft state: a prune expires after this long, so a later subscribe can graft the layer
    /// back (spec: "expire after 3 refresh periods").
    pub prune_hold_s: f64,
}

impl Default for NodeConfig {
    fn default() -> Self {
        NodeConfig {
            avg_tau_s: 0.25,
            price_period_s: 0.1,
            prune_window_s: 1.0,
            prune_fraction: 0.5,
            prune_windows: 2,
            prune_hold_s: 3.0,
        }
    }
}

/// Per-session state on one interface.
#[derive(Clone, Debug, Default)]
struct FlowState {
    /// Layers (0-based index) at or above this are pruned on this interface.
    cap: Option<u8>,
    cap_until: Time,
    window_start: Option<Time>,
    /// (arrivals, discards) per layer in the current prune window.
    window: Vec<(u32, u32)>,
    /// Per layer: consecutive windows with at least one self-discard.
    streak: Vec<u32>,
}

/// An active interface: the wrapped queue plus ALMA's price, self-discard and prune.
pub struct AlmaQueue {
    inner: Box<dyn QueueDiscipline<Packet>>,
    cfg: NodeConfig,
    buffer_packets: f64,
    /// Per flow id: the budget scale if it is an ALMA session (others pass through untouched
    /// but count in the load).
    alma_flow: Vec<Option<f64>>,
    flows: Vec<FlowState>,
    avg: f64,
    last_avg: Time,
    price: f64,
    next_price: Time,
    /// Capsules discarded because their budget was below the price.
    pub self_discards: u64,
    /// Capsules of pruned layers dropped.
    pub pruned_drops: u64,
    /// Prune events.
    pub prunes: u64,
    /// The link's rate (bit/s) and, per flow id, the session's cumulative layer rates (bit/s):
    /// layers whose cumulative rate exceeds the link are never forwarded (see
    /// [`AlmaQueue::with_capacity`]). Empty: no capacity rule.
    link_bps: f64,
    cum_bps: Vec<Option<Vec<f64>>>,
    /// Capsules of layers above the link's capacity dropped (never forwarded).
    pub capacity_drops: u64,
}

/// The buffer size in packets of `cfg` at `rate_bps` (ALMA's load is occupancy / buffer).
/// Byte and time limits count 500-byte capsules (the thesis' capsule size).
pub fn buffer_packets(cfg: &QdiscConfig, rate_bps: u64) -> f64 {
    let p = match cfg {
        QdiscConfig::Droptail {
            limit_packets,
            limit_bytes,
            limit_ms,
        } => limit_packets
            .map(|p| p as f64)
            .or(limit_bytes.map(|b| b as f64 / 500.0))
            .or(limit_ms.map(|ms| (ms * rate_bps as f64 / 8000.0).max(1500.0) / 500.0)),
        _ => None,
    };
    p.unwrap_or(100.0).max(1.0)
}

impl AlmaQueue {
    /// Wraps `inner` (a buffer of `buffer_packets`); `alma_flow[f]` is flow `f`'s budget scale
    /// if it is an ALMA session ([`BUDGET_K`] by default, see [`budget_scale`]).
    pub fn new(
        inner: Box<dyn QueueDiscipline<Packet>>,
        buffer_packets: f64,
        alma_flow: Vec<Option<f64>>,
        cfg: NodeConfig,
    ) -> AlmaQueue {
        let n = alma_flow.len();
        AlmaQueue {
            inner,
            cfg,
            buffer_packets: buffer_packets.max(1.0),
            alma_flow,
            flows: vec![FlowState::default(); n],
            avg: 0.0,
            last_avg: Time::ZERO,
            price: 0.0,
            next_price: Time::ZERO,
            self_discards: 0,
            pruned_drops: 0,
            prunes: 0,
            link_bps: f64::INFINITY,
            cum_bps: Vec::new(),
            capacity_drops: 0,
        }
    }

    /// The interface's "link characteristics" part of the price (thesis §3: "outgoing
    /// interfaces export a price as a function of link characteristics and load"): a layer
    /// whose cumulative session rate `cum_bps[f][ℓ]` exceeds the link rate `link_bps` has an
    /// infinite price here, so its capsules never enter the queue and a subscribe to it is never
    /// granted on this interface. Without it an occupancy-only price lets a layer that
    /// overloads the link by a few per cent (M1: 6 × 10 kbit/s on 56 kbit/s, 13 on 128) in for
    /// the 5–10 s the drop-tail queue takes to fill, so the receivers sat one layer too high.
    pub fn with_capacity(mut self, link_bps: f64, cum_bps: Vec<Option<Vec<f64>>>) -> AlmaQueue {
        self.link_bps = link_bps;
        self.cum_bps = cum_bps;
        self
    }

    /// Whether layer index `layer` of flow `flow` fits the link at all.
    fn fits(&self, flow: usize, layer: u8) -> bool {
        match self.cum_bps.get(flow).and_then(Option::as_ref) {
            Some(c) => c.get(layer as usize).is_none_or(|&r| r <= self.link_bps),
            None => true,
        }
    }

    /// The current price of this interface.
    pub fn price(&self) -> f64 {
        self.price
    }

    /// Time-weighted EWMA of the occupancy (the queue is constant between events).
    fn update_avg(&mut self, now: Time) {
        let dt = now.0.saturating_sub(self.last_avg.0) as f64 / 1e9;
        self.last_avg = now;
        let q = self.inner.len_packets() as f64 / self.buffer_packets;
        let a = 1.0 - (-dt / self.cfg.avg_tau_s).exp();
        self.avg += a * (q.min(1.0) - self.avg);
        if now >= self.next_price {
            self.price = price(self.avg);
            self.next_price = now + std::time::Duration::from_secs_f64(self.cfg.price_period_s);
        }
    }

    /// Whether this capsule of layer index `layer` (0-based) in flow `flow` may be enqueued.
    fn admit(&mut self, now: Time, flow: usize, layer: u8, k: f64) -> Result<(), ()> {
        if !self.fits(flow, layer) {
            self.capacity_drops += 1;
            return Err(());
        }
        let cfg = self.cfg;
        let price = self.price;
        let st = &mut self.flows[flow];
        if st.cap.is_some() && now >= st.cap_until {
            st.cap = None;
        }
        if st.cap.is_some_and(|c| layer >= c) {
            self.pruned_drops += 1;
            return Err(());
        }
        let ws = *st.window_start.get_or_insert(now);
        if now.0.saturating_sub(ws.0) as f64 / 1e9 >= cfg.prune_window_s {
            // End of a prune window: the lowest persistently self-discarded layer and all above
            // it are pruned on this interface.
            st.streak.resize(st.window.len(), 0);
            for (s, &(_, d)) in st.streak.iter_mut().zip(&st.window) {
                *s = if d > 0 { *s + 1 } else { 0 };
            }
            let worst = st.window.iter().zip(&st.streak).position(|(&(a, d), &k)| {
                (a >= 2 && f64::from(d) > cfg.prune_fraction * f64::from(a))
                    || k >= cfg.prune_windows
            });
            if let Some(l) = worst {
                st.streak.iter_mut().skip(l).for_each(|k| *k = 0);
                let l = l as u8;
                st.cap = Some(st.cap.map_or(l, |c| c.min(l)));
                st.cap_until = now + std::time::Duration::from_secs_f64(cfg.prune_hold_s);
                self.prunes += 1;
            }
            st.window.iter_mut().for_each(|w| *w = (0, 0));
            st.window_start = Some(now);
            if st.cap.is_some_and(|c| layer >= c) {
                self.pruned_drops += 1;
                return Err(());
            }
        }
        let li = layer as usize;
        if st.window.len() <= li {
            st.window.resize(li + 1, (0, 0));
        }
        st.window[li].0 += 1;
        if price > budget_scaled(u32::from(layer) + 1, k) {
            st.window[li].1 += 1;
            self.self_discards += 1;
            return Err(());
        }
        Ok(())
    }
}

impl QueueDiscipline<Packet> for AlmaQueue {
    fn enqueue(&mut self, now: Time, pkt: Queued<Packet>) -> Vec<(Queued<Packet>, DropReason)> {
        self.update_avg(now);
        if let Body::Layer { layer, .. } = pkt.item.body {
            let f = pkt.item.flow as usize;
            if let Some(k) = self.alma_flow.get(f).copied().flatten() {
                if self.admit(now, f, layer, k).is_err() {
                    return vec![(pkt, DropReason::Early)];
                }
            }
        }
        self.inner.enqueue(now, pkt)
    }

    fn dequeue(&mut self, now: Time) -> Option<Queued<Packet>> {
        self.update_avg(now);
        self.inner.dequeue(now)
    }

    fn take_dropped(&mut self) -> Vec<(Queued<Packet>, netmodel::DropReason)> {
        self.inner.take_dropped()
    }

    fn len_packets(&self) -> usize {
        self.inner.len_packets()
    }

    fn len_bytes(&self) -> u64 {
        self.inner.len_bytes()
    }
}

/// Receiver parameters ([U]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ReceiverConfig {
    /// Layers subscribed at the start (0 = all the session has): `subscribe(s, max)`, the
    /// network's filtering and pruning bring each branch down to what it carries.
    pub start_level: u8,
    /// How often the receiver checks which layers still arrive, seconds.
    pub check_s: f64,
    /// A held layer that delivered nothing for max(this, 3 packet intervals) is gone (pruned).
    pub stall_s: f64,
    /// Extra wait for the first packet of a newly joined layer, seconds.
    pub first_packet_grace_s: f64,
    /// Upward probe after this long without loss, seconds (Table 6.6 "increments 2 s").
    pub probe_s: f64,
    /// Longest probe back-off after failed probes, seconds.
    pub probe_max_s: f64,
}

impl Default for ReceiverConfig {
    fn default() -> Self {
        ReceiverConfig {
            start_level: 0,
            check_s: 0.25,
            stall_s: 1.0,
            first_packet_grace_s: 2.0,
            probe_s: 2.0,
            probe_max_s: 64.0,
        }
    }
}

/// The ALMA receiver.
pub struct AlmaReceiver {
    cfg: ReceiverConfig,
    info: Option<SessionInfo>,
    level: u8,
    /// Per layer: when it was joined and its last packet.
    joined_at: Vec<Time>,
    last_rx: Vec<Option<Time>>,
    next_seq: Vec<Option<u64>>,
    /// Loss seen since the last probe decision.
    lost_since_probe: u64,
    next_check: Option<Time>,
    next_probe: Time,
    probe_interval: f64,
    /// The level a probe went to and when, to judge it.
    probed: Option<(u8, Time)>,
    received: u64,
    lost: u64,
    joins: u64,
    leaves: u64,
    actions: VecDeque<Action>,
    decisions: VecDeque<Decision>,
}

impl AlmaReceiver {
    /// A receiver with these parameters.
    pub fn new(cfg: ReceiverConfig) -> AlmaReceiver {
        AlmaReceiver {
            cfg,
            info: None,
            level: 0,
            joined_at: Vec::new(),
            last_rx: Vec::new(),
            next_seq: Vec::new(),
            lost_since_probe: 0,
            next_check: None,
            next_probe: Time::ZERO,
            probe_interval: cfg.probe_s,
            probed: None,
            received: 0,
            lost: 0,
            joins: 0,
            leaves: 0,
            actions: VecDeque::new(),
            decisions: VecDeque::new(),
        }
    }

    fn secs(d: f64) -> std::time::Duration {
        std::time::Duration::from_secs_f64(d.max(0.0))
    }

    fn join_up_to(&mut self, now: Time, to: u8) {
        while self.level < to {
            let l = self.level as usize;
            self.joined_at[l] = now;
            self.last_rx[l] = None;
            self.next_seq[l] = None;
            self.actions.push_back(Action::Join(self.level));
            self.joins += 1;
            self.level += 1;
        }
    }

    fn leave_down_to(&mut self, to: u8) {
        while self.level > to {
            self.level -= 1;
            self.actions.push_back(Action::Leave(self.level));
            self.leaves += 1;
        }
    }

    /// Time after which a held layer with no packet is taken as pruned.
    fn stall(&self, layer: usize) -> f64 {
        let Some(info) = &self.info else {
            return self.cfg.stall_s;
        };
        let rate = info.layers.get(layer).map_or(0, |l| l.rate_bps).max(1) as f64;
        let bunch = f64::from(info.bunch_len.max(1));
        let gap = f64::from(info.packet_size.max(1)) * 8.0 * bunch / rate;
        self.cfg.stall_s.max(3.0 * gap)
    }
}

impl LayeredController for AlmaReceiver {
    fn name(&self) -> &'static str {
        "alma"
    }

    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        if self.info.is_none() {
            let n = info.layer_count().min(255);
            self.joined_at = vec![now; n];
            self.last_rx = vec![None; n];
            self.next_seq = vec![None; n];
            self.info = Some(info.clone());
            let start = if self.cfg.start_level == 0 {
                n as u8
            } else {
                self.cfg.start_level.min(n as u8)
            };
            self.join_up_to(now, start);
            self.decisions.push_back(Decision {
                at: now,
                from_layers: 0,
                to_layers: self.level,
                reason: "subscribe",
                inputs: vec![("start_level", f64::from(start))],
            });
            self.next_check = Some(now + Self::secs(self.cfg.check_s));
            self.next_probe = now + Self::secs(self.cfg.probe_s);
        } else {
            self.info = Some(info.clone());
        }
    }

    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        let l = pkt.layer as usize;
        if l >= self.level as usize {
            return;
        }
        self.received += 1;
        self.last_rx[l] = Some(now);
        if let Some(x) = self.next_seq[l] {
            if pkt.seq > x {
                self.lost += pkt.seq - x;
                self.lost_since_probe += pkt.seq - x;
            }
        }
        if self.next_seq[l].is_none_or(|x| pkt.seq >= x) {
            self.next_seq[l] = Some(pkt.seq + 1);
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        let Some(next) = self.next_check else {
            return;
        };
        if now < next {
            return;
        }
        self.next_check = Some(now + Self::secs(self.cfg.check_s));
        // Layers that stopped arriving were pruned upstream: follow the network down to the
        // highest layer below the lowest stalled one (cumulative layering).
        let from = self.level;
        let stalled = (0..self.level as usize).find(|&l| {
            // A layer not heard since its join gets a grace for the path's queues to drain
            // (subscribe-all at the start fills them: up to ≈ 1.5 s on M1's 56 kbit/s tail).
            let (since, grace) = match self.last_rx[l] {
                Some(t) => (t, 0.0),
                None => (self.joined_at[l], self.cfg.first_packet_grace_s),
            };
            now.0.saturating_sub(since.0) as f64 / 1e9 > self.stall(l) + grace
        });
        if let Some(l) = stalled {
            // Keep the base layer: a receiver never leaves the session on its own.
            let to = (l as u8).max(1);
            if to < from {
                self.leave_down_to(to);
                self.decisions.push_back(Decision {
                    at: now,
                    from_layers: from,
                    to_layers: to,
                    reason: "pruned",
                    inputs: vec![("stalled_layer", l as f64)],
                });
                if let Some((p, _)) = self.probed.take() {
                    if to < p {
                        self.probe_interval = (self.probe_interval * 2.0).min(self.cfg.probe_max_s);
                    }
                }
                self.lost_since_probe = 0;
                self.next_probe = now + Self::secs(self.probe_interval);
                return;
            }
        }
        if let Some((p, at)) = self.probed {
            if self.level >= p
                && now.0.saturating_sub(at.0) as f64 / 1e9 >= 2.0 * self.probe_interval
            {
                // The probed layer held: next probes at the base pace again.
                self.probed = None;
                self.probe_interval = self.cfg.probe_s;
            }
        }
        let n = self.info.as_ref().map_or(0, |i| i.layer_count().min(255)) as u8;
        if now >= self.next_probe {
            if self.lost_since_probe == 0 && self.level < n && self.probed.is_none() {
                let to = self.level + 1;
                self.join_up_to(now, to);
                self.probed = Some((to, now));
                self.decisions.push_back(Decision {
                    at: now,
                    from_layers: from,
                    to_layers: to,
                    reason: "probe",
                    inputs: vec![("probe_interval_s", self.probe_interval)],
                });
            }
            self.lost_since_probe = 0;
            self.next_probe = now + Self::secs(self.probe_interval);
        }
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        self.next_check.map(|t| (t, TimerReason::Adapt))
    }

    fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    fn stats(&self) -> Stats {
        let subscribed = self.info.as_ref().map_or(0.0, |i| {
            i.layers
                .iter()
                .take(self.level as usize)
                .map(|l| l.rate_bps as f64)
                .sum()
        });
        Stats {
            protocol: "alma",
            layers: self.level,
            subscribed_bps: subscribed,
            estimate_bps: None,
            loss_ratio: if self.received + self.lost > 0 {
                self.lost as f64 / (self.received + self.lost) as f64
            } else {
                0.0
            },
            rtt_s: None,
            packets_received: self.received,
            packets_lost: self.lost,
            joins: self.joins,
            leaves: self.leaves,
        }
    }

    fn layers(&self) -> u8 {
        self.level
    }
}

/// The ALMA receiver for a controller name: `alma` (start subscribed to every layer),
/// `alma-startN` (start at N layers) or `alma-kN` (every layer; the nodes use budget scale N).
pub fn controller(name: &str) -> Option<Box<dyn LayeredController>> {
    if name == "alma" || budget_scale(name).is_some() {
        return Some(Box::new(AlmaReceiver::new(ReceiverConfig::default())));
    }
    let n: u8 = name.strip_prefix("alma-start")?.parse().ok()?;
    Some(Box::new(AlmaReceiver::new(ReceiverConfig {
        start_level: n.max(1),
        ..ReceiverConfig::default()
    })))
}

/// The budget scale of a session protocol name, if it is ALMA (its links need active
/// interfaces): `alma`, `alma-startN` → [`DEFAULT_BUDGET_K`]; `alma-kN` → N (a sensitivity knob: the
/// thesis never gives its budgets).
pub fn budget_scale(protocol: &str) -> Option<f64> {
    if protocol == "alma" || protocol.starts_with("alma-start") {
        return Some(DEFAULT_BUDGET_K);
    }
    let k: f64 = protocol.strip_prefix("alma-k")?.parse().ok()?;
    (k.is_finite() && k > 0.0).then_some(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn price_matches_the_spec_vectors() {
        // active-networks.md §5.1 item 5.
        assert_eq!(price(0.0), 0.0);
        assert!((price(0.5) - 407.3).abs() < 0.1, "{}", price(0.5));
        assert!((price(0.9) - 2030.2).abs() < 0.1, "{}", price(0.9));
        assert!((price(1.0) - 9049.9).abs() < 0.1, "{}", price(1.0));
        for l in [0.0, 0.1, 0.35, 0.5, 0.77, 0.9, 1.0] {
            assert!((load_at_price(price(l)) - l).abs() < 1e-9);
        }
    }

    #[test]
    fn budgets_follow_the_marginal_utility_proposal() {
        // Spec §1.8 [U]: budget(1) = 3100, budget(2) ≈ 1813, budget(10) ≈ 426, budget(17) ≈ 256.
        assert!((budget(1) - 3100.0).abs() < 1e-9);
        assert!((budget(2) - 1813.0).abs() < 1.0);
        assert!((budget(10) - 426.0).abs() < 1.0);
        assert!((budget(17) - 256.0).abs() < 1.0);
        for l in 1..40 {
            assert!(budget(l) > budget(l + 1));
        }
    }

    #[test]
    fn buffer_size_counts_capsules() {
        let d = |p: Option<usize>, b: Option<u64>, ms: Option<f64>| QdiscConfig::Droptail {
            limit_packets: p,
            limit_bytes: b,
            limit_ms: ms,
        };
        assert_eq!(buffer_packets(&d(Some(20), None, None), 1), 20.0);
        assert_eq!(buffer_packets(&d(None, Some(10_000), None), 1), 20.0);
        // 100 ms at 400 kbit/s = 5000 B = 10 capsules.
        assert_eq!(buffer_packets(&d(None, None, Some(100.0)), 400_000), 10.0);
    }

    fn capsule(layer: u8, flow: u32) -> Queued<Packet> {
        let p = Packet {
            src: 0,
            src_agent: 0,
            dst: crate::engine::Dest::Group(0),
            size: 500,
            flow,
            sent_at: Time::ZERO,
            body: Body::Layer {
                layer,
                seq: 0,
                bunch_pos: 0,
                bunch_len: 1,
            },
        };
        Queued::new(p, 500, u64::from(flow))
    }

    fn droptail(n: usize) -> Box<dyn QueueDiscipline<Packet>> {
        netmodel::build(
            &QdiscConfig::Droptail {
                limit_packets: Some(n),
                limit_bytes: None,
                limit_ms: None,
            },
            1_000_000,
        )
        .unwrap()
    }

    #[test]
    fn overload_discards_the_top_layer_then_prunes_it_and_keeps_the_base() {
        let mut q = AlmaQueue::new(
            droptail(20),
            20.0,
            vec![Some(BUDGET_K)],
            NodeConfig::default(),
        );
        let ms = |m: u64| Time::from_millis(m);
        // Every 10 ms one capsule leaves and a base capsule arrives, every 50 ms a layer-10
        // capsule too (20 % overload): the queue
        // grows until the price passes budget(10) (load ≈ 0.34, ≈ 7 capsules), then layer 10
        // discards itself, the queue stops growing, and after a prune window layer 10 is pruned.
        let mut t = 0;
        let mut base_drops = 0;
        let mut top_in = 0;
        while t < 4000 {
            t += 10;
            q.dequeue(ms(t));
            base_drops += q.enqueue(ms(t), capsule(0, 0)).len();
            if t % 50 == 0 && q.enqueue(ms(t), capsule(9, 0)).is_empty() {
                top_in += 1;
            }
        }
        assert_eq!(base_drops, 0, "base budget 3100 is far above the price");
        assert!(top_in > 0 && top_in < 40, "{top_in} of 80");
        assert!(q.self_discards > 0);
        assert!(
            q.prunes >= 1,
            "layer 10 discarded > 50 % for 1 s must be pruned"
        );
        assert!(q.pruned_drops > 0);
        assert_eq!(q.flows[0].cap, Some(9));
    }

    #[test]
    fn layers_above_the_link_capacity_never_enter_the_queue() {
        // M1's 56 kbit/s tail with 10 kbit/s layers: 5 layers (50 kbit/s) fit, the 6th (60)
        // does not. Without the capacity rule the 6th passes while the queue is short.
        let cum: Vec<f64> = (1..=30).map(|k| f64::from(k) * 10_000.0).collect();
        let mut q = AlmaQueue::new(
            droptail(20),
            20.0,
            vec![Some(BUDGET_K), None],
            NodeConfig::default(),
        )
        .with_capacity(56_000.0, vec![Some(cum), None]);
        let t = Time::from_millis(100);
        for l in 0..5 {
            assert!(q.enqueue(t, capsule(l, 0)).is_empty(), "layer {l} fits");
        }
        for l in 5..30 {
            let d = q.enqueue(t, capsule(l, 0));
            assert_eq!(d.len(), 1, "layer {l} exceeds 56 kbit/s");
            assert!(matches!(d[0].1, DropReason::Early));
        }
        assert_eq!(q.capacity_drops, 25);
        assert_eq!(q.self_discards, 0, "an empty queue has price 0");
        // Another flow's packets are not subject to the rule.
        assert!(q.enqueue(t, capsule(29, 1)).is_empty());
        // The boundary is inclusive: 25 layers on 250 kbit/s fit exactly.
        let cum: Vec<f64> = (1..=30).map(|k| f64::from(k) * 10_000.0).collect();
        let mut q = AlmaQueue::new(
            droptail(20),
            20.0,
            vec![Some(BUDGET_K)],
            NodeConfig::default(),
        )
        .with_capacity(250_000.0, vec![Some(cum)]);
        assert!(q.enqueue(t, capsule(24, 0)).is_empty());
        assert_eq!(q.enqueue(t, capsule(25, 0)).len(), 1);
    }

    #[test]
    fn other_flows_pass_untouched() {
        let mut q = AlmaQueue::new(
            droptail(5),
            5.0,
            vec![None, Some(BUDGET_K)],
            NodeConfig::default(),
        );
        for _ in 0..5 {
            q.enqueue(Time::ZERO, capsule(3, 1));
        }
        // Buffer full for a long time: flow 0 (not ALMA) is only tail-dropped, never self-discarded.
        let d = q.enqueue(Time::from_millis(10_000), capsule(30, 0));
        assert_eq!(d.len(), 1);
        assert_eq!(q.self_discards, 0);
        q.dequeue(Time::from_millis(10_000));
        assert!(q
            .enqueue(Time::from_millis(10_000), capsule(30, 0))
            .is_empty());
    }

    fn info(n: usize) -> SessionInfo {
        let mut i =
            SessionInfo::equal_layers(n, 10_000, std::net::Ipv4Addr::new(239, 1, 0, 0), 5000);
        i.packet_size = 500;
        i.bunch_len = 1;
        i
    }

    fn drain(r: &mut AlmaReceiver) -> Vec<Action> {
        std::iter::from_fn(|| r.poll_action()).collect()
    }

    fn arrival(layer: u8, seq: u64, at: Time) -> PacketArrival {
        PacketArrival {
            layer,
            seq,
            bunch_pos: 0,
            bunch_len: 1,
            size: 500,
            send_time_us: 0,
            recv_time: at,
        }
    }

    #[test]
    fn receiver_subscribes_all_then_follows_pruned_layers_down_and_probes_after_quiet() {
        let mut r = AlmaReceiver::new(ReceiverConfig::default());
        r.handle_announcement(Time::ZERO, &info(10));
        assert_eq!(drain(&mut r).len(), 10);
        assert_eq!(r.layers(), 10);
        // Layers 0..4 keep arriving (one packet per 0.4 s each, no gap); 4..10 never arrive.
        let mut seq = 0;
        let mut t = Time::ZERO;
        while t < Time::from_millis(3_600) {
            t += std::time::Duration::from_millis(400);
            for l in 0..4 {
                r.handle_packet(t, &arrival(l, seq, t));
            }
            seq += 1;
            r.handle_timeout(t);
        }
        assert_eq!(
            r.layers(),
            4,
            "layers 4.. silent since their join for more than 1.2 + 2 s"
        );
        let a = drain(&mut r);
        assert_eq!(a.len(), 6);
        assert!(a.iter().all(|x| matches!(x, Action::Leave(l) if *l >= 4)));
        // Loss-free from here: one probe per probe interval, never more than one layer at a time.
        let mut probes = 0;
        while t < Time::from_millis(7_000) {
            t += std::time::Duration::from_millis(250);
            for l in 0..r.layers() {
                r.handle_packet(t, &arrival(l, seq, t));
            }
            seq += 1;
            r.handle_timeout(t);
            for x in drain(&mut r) {
                assert!(matches!(x, Action::Join(l) if l == r.layers() - 1));
                probes += 1;
            }
        }
        assert_eq!(probes, 1, "one probe in 3.4 s at a 2 s probe interval");
        assert_eq!(r.layers(), 5);
    }

    #[test]
    fn receiver_with_loss_does_not_probe() {
        let mut r = AlmaReceiver::new(ReceiverConfig {
            start_level: 2,
            ..ReceiverConfig::default()
        });
        r.handle_announcement(Time::ZERO, &info(10));
        drain(&mut r);
        let mut t = Time::ZERO;
        let mut seq = 0;
        while t < Time::from_millis(10_000) {
            t += std::time::Duration::from_millis(250);
            // every other packet of layer 1 lost
            r.handle_packet(t, &arrival(0, seq, t));
            r.handle_packet(t, &arrival(1, 2 * seq, t));
            seq += 1;
            r.handle_timeout(t);
        }
        assert_eq!(r.layers(), 2);
        assert!(r.stats().packets_lost > 0);
    }
}
