//! AER/NCA (Active Error Recovery / Nominee Congestion Avoidance, Kasera et al. 2000, as the
//! thesis of seed 001 uses it: `active-networks.md` §1.6): a reliable single-rate multicast
//! session whose repair servers (RS) on active nodes cache data, answer NACKs from their cache
//! with a repair multicast to their subtree, aggregate NACKs they cannot answer into one NACK
//! upstream, and filter congestion status messages (CSMs) so only the worst report of a subtree
//! travels on. The sender keeps a NewReno-like window clocked by the per-packet acknowledgements
//! (CCMs) of the **nominee**, the receiver with the largest `g = RTT·√p`.
//!
//! Agents: [`AerSender`], [`RepairServer`] (one per active node that runs an RS), and
//! [`AerReceiver`]. [`install`] wires a session into a [`Sim`]: the data group, one repair
//! group per RS (rooted at the RS node: the "subcast" of a repair reaches only that RS's
//! subtree) and one rooted at the sender (the repair server of last resort).
//!
//! Model choices (all listed with reasons in `docs/protocols/aer-nca.md`):
//! * The SPM's job of telling every node its nearest upstream RS is resolved when the session
//!   is built, from the same unicast routes the engine forwards on (the engine forwards group
//!   packets unchanged, so an RS cannot rewrite an SPM in flight). SPMs are still sent, every
//!   [`AerConfig::spm_period_s`], and carry the highest sequence sent (tail-loss detection).
//! * A receiver's RTT to the sender is twice its smoothed one-way delay of data packets (the
//!   simulator has one clock); its RTT to its RS, for the NACK timers, is the path's round-trip
//!   propagation delay.
//! * Every capsule (SPM, NACK, CSM, CCM) is 76 B ([E]); data and repairs carry the session's
//!   packet size. All of them carry the session's flow id, so per-link shares count them as AN
//!   traffic.

use crate::agents::nca::{Csm, NcaWindow, NomineeSelector};
use crate::engine::{Agent, AgentId, Body, Command, Dest, GroupId, Net, NodeId, Packet, Sim};
use crate::metrics::{MonId, MonKind};
use congestion::Time;
use netmodel::rng::Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::time::Duration;

/// Size of a control capsule on the wire, bytes ([E] thesis §5.2).
pub const CAPSULE_SIZE: u32 = 76;

/// What an AER/NCA (or PGMCC) packet carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Capsule {
    /// Original data, with the receiver id that must acknowledge it (NCA's nominee, PGMCC's
    /// acker; 0 = none yet).
    Data { seq: u64, acker: u32 },
    /// A retransmission (from an RS cache or the sender).
    Repair { seq: u64 },
    /// Source path message: the highest sequence sent so far.
    Spm { high: u64 },
    /// A negative acknowledgement for one packet (AER: to the upstream RS).
    Nack { seq: u64 },
    /// Congestion status: receiver id, loss estimate (negative = not valid yet), RTT (s).
    Csm { rcv: u32, p: f32, rtt_s: f32 },
    /// The nominee's acknowledgement of data packet `seq`, echoing its send time.
    Ccm { rcv: u32, seq: u64, echo: Time },
    /// PGMCC NACK: receiver id, missing packet, highest sequence seen, smoothed loss rate.
    PgmNack {
        rcv: u32,
        seq: u64,
        high: u64,
        loss: f32,
    },
    /// PGMCC ACK from the acker: highest sequence received, reception bitmap of the 32
    /// packets below it (bit i = `high − 1 − i` received), echoed send time, loss rate.
    PgmAck {
        rcv: u32,
        high: u64,
        bitmap: u32,
        echo: Time,
        loss: f32,
    },
}

/// Parameters ([E] where the thesis gives them, [X] PANAMA, [U] our choice; see the docs).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AerConfig {
    /// Data packet size, bytes.
    pub packet_size: u32,
    /// Receivers send a CSM, and RSs forward their subtree's worst, this often ([U] 1 s).
    pub csm_period_s: f64,
    /// SPM period ([U] 1 s).
    pub spm_period_s: f64,
    /// Loss-probability estimator: loss intervals in the window ([U] 8).
    pub lpe_intervals: usize,
    /// RS cache, packets, FIFO eviction ([U] 512).
    pub cache_packets: usize,
    /// NACKs a receiver sends for one packet before it gives the packet up ([U] 8).
    pub nack_tries: u32,
    /// Packets the sender may send per CCM (MAX_BURST [X] 4).
    pub max_burst: u32,
    /// RTO floor, seconds ([U] 0.2, as the TCP agents).
    pub min_rto_s: f64,
    /// Largest RTO back-off factor (MAX_BACKOFF [X] 64).
    pub max_backoff: u32,
}

impl Default for AerConfig {
    fn default() -> Self {
        AerConfig {
            packet_size: 1000,
            csm_period_s: 1.0,
            spm_period_s: 1.0,
            lpe_intervals: 8,
            cache_packets: 512,
            nack_tries: 8,
            max_burst: 4,
            min_rto_s: 0.2,
            max_backoff: 64,
        }
    }
}

pub(crate) fn secs(s: f64) -> Duration {
    Duration::from_secs_f64(s.max(0.0))
}

pub(crate) fn capsule(
    from: (NodeId, AgentId),
    dst: Dest,
    flow: u32,
    size: u32,
    c: Capsule,
    now: Time,
) -> Packet {
    Packet {
        src: from.0,
        src_agent: from.1,
        dst,
        size,
        flow,
        sent_at: now,
        body: Body::Capsule(c),
    }
}

/// Whether CSM `a` is worse (more constrained) than `b` by the nominee rule's order: larger
/// g, or both without a valid p and a larger RTT.
pub fn worse(a: &Csm, b: &Csm) -> bool {
    a.g() > b.g() || (a.g() == 0.0 && b.g() == 0.0 && a.rtt_s > b.rtt_s)
}

/// The AER/NCA sender.
pub struct AerSender {
    node: NodeId,
    flow: u32,
    group: GroupId,
    repair_group: GroupId,
    cfg: AerConfig,
    window: NcaWindow,
    nominee: NomineeSelector,
    snd_nxt: u64,
    /// One past the highest sequence the nominee acknowledged (packets below count as out of
    /// the network for the window).
    acked_upto: u64,
    /// Losses at or below this were answered already (one halving per window).
    recover: u64,
    /// The first CCM after a nominee change never counts as a loss.
    fresh: bool,
    srtt: Option<f64>,
    rttvar: f64,
    backoff: u32,
    epoch: u64,
    running: bool,
    repairs_sent: RepairGate,
    /// Data packets, repairs, nominee changes, timeouts, window halvings.
    pub sent: u64,
    pub repairs: u64,
    pub nominee_changes: u64,
    pub timeouts: u64,
    pub halvings: u64,
}

const T_RTO: u64 = 1;
const T_SPM: u64 = 2;

impl AerSender {
    pub fn new(
        node: NodeId,
        flow: u32,
        group: GroupId,
        repair_group: GroupId,
        cfg: AerConfig,
    ) -> Self {
        AerSender {
            node,
            flow,
            group,
            repair_group,
            cfg,
            window: NcaWindow::default(),
            nominee: NomineeSelector::default(),
            snd_nxt: 0,
            acked_upto: 0,
            recover: 0,
            fresh: true,
            srtt: None,
            rttvar: 0.0,
            backoff: 1,
            epoch: 0,
            running: false,
            repairs_sent: RepairGate::default(),
            sent: 0,
            repairs: 0,
            nominee_changes: 0,
            timeouts: 0,
            halvings: 0,
        }
    }

    /// The current window, packets.
    pub fn cwnd(&self) -> f64 {
        self.window.cwnd
    }

    fn rto(&self) -> f64 {
        let base = match self.srtt {
            Some(s) => (s + 4.0 * self.rttvar).max(self.cfg.min_rto_s),
            None => 1.0,
        };
        base * f64::from(self.backoff)
    }

    fn arm(&mut self, net: &mut Net, me: AgentId) {
        self.epoch += 1;
        let at = net.now() + secs(self.rto());
        net.set_timer(me, at, T_RTO + 16 * self.epoch);
    }

    fn pump(&mut self, net: &mut Net, me: AgentId, burst: u32) {
        let mut n = 0;
        let acker = self.nominee.nominee().unwrap_or(0);
        while n < burst
            && ((self.snd_nxt - self.acked_upto) as f64) < self.window.cwnd.floor().max(1.0)
        {
            let now = net.now();
            let c = Capsule::Data {
                seq: self.snd_nxt,
                acker,
            };
            net.send(capsule(
                (self.node, me),
                Dest::Group(self.group),
                self.flow,
                self.cfg.packet_size,
                c,
                now,
            ));
            if let Some(s) = net.flow_sent.get_mut(self.flow as usize) {
                *s += 1;
            }
            self.snd_nxt += 1;
            self.sent += 1;
            n += 1;
        }
    }

    fn on_ccm(&mut self, net: &mut Net, me: AgentId, rcv: u32, seq: u64, echo: Time) {
        if self.nominee.nominee() != Some(rcv) || seq >= self.snd_nxt {
            return;
        }
        let now = net.now();
        let r = now.0.saturating_sub(echo.0) as f64 * 1e-9;
        match self.srtt {
            None => {
                self.srtt = Some(r);
                self.rttvar = r / 2.0;
            }
            Some(s) => {
                self.rttvar = 0.75 * self.rttvar + 0.25 * (s - r).abs();
                self.srtt = Some(0.875 * s + 0.125 * r);
            }
        }
        self.backoff = 1;
        if seq < self.acked_upto {
            return; // an old acknowledgement (e.g. of a packet sent before a nominee change)
        }
        let gap = seq > self.acked_upto && !self.fresh;
        self.fresh = false;
        self.acked_upto = seq + 1;
        if gap && seq >= self.recover {
            self.window.on_loss();
            self.halvings += 1;
            self.recover = self.snd_nxt;
        } else if !gap {
            self.window.on_ack();
        }
        self.arm(net, me);
        self.pump(net, me, self.cfg.max_burst);
    }

    fn on_nack(&mut self, net: &mut Net, me: AgentId, seq: u64) {
        let now = net.now();
        if seq >= self.snd_nxt {
            return;
        }
        if !self
            .repairs_sent
            .admit(seq, now, secs(self.srtt.unwrap_or(0.1)))
        {
            return;
        }
        net.send(capsule(
            (self.node, me),
            Dest::Group(self.repair_group),
            self.flow,
            self.cfg.packet_size,
            Capsule::Repair { seq },
            now,
        ));
        if let Some(s) = net.flow_sent.get_mut(self.flow as usize) {
            *s += 1;
        }
        if let Some(s) = net.flow_retx.get_mut(self.flow as usize) {
            *s += 1;
        }
        self.repairs += 1;
    }
}

impl Agent for AerSender {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                self.pump(net, me, 1);
                self.arm(net, me);
                net.set_timer(me, net.now(), T_SPM);
            }
            Command::Stop => self.running = false,
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        if !self.running {
            return;
        }
        let Body::Capsule(c) = pkt.body else { return };
        match c {
            Capsule::Ccm { rcv, seq, echo } => self.on_ccm(net, me, rcv, seq, echo),
            Capsule::Nack { seq } => self.on_nack(net, me, seq),
            Capsule::Csm { rcv, p, rtt_s } => {
                let csm = Csm {
                    receiver: rcv,
                    p: (p >= 0.0).then_some(f64::from(p)),
                    rtt_s: f64::from(rtt_s),
                };
                if self.nominee.offer(net.now(), csm) {
                    // A new nominee: its CCMs start with the packets sent from now on.
                    self.nominee_changes += 1;
                    self.acked_upto = self.snd_nxt;
                    self.fresh = true;
                    self.backoff = 1;
                    self.arm(net, me);
                    self.pump(net, me, self.cfg.max_burst);
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if !self.running {
            return;
        }
        if token == T_SPM {
            if self.snd_nxt > 0 {
                let now = net.now();
                net.send(capsule(
                    (self.node, me),
                    Dest::Group(self.group),
                    self.flow,
                    CAPSULE_SIZE,
                    Capsule::Spm {
                        high: self.snd_nxt - 1,
                    },
                    now,
                ));
            }
            let at = net.now() + secs(self.cfg.spm_period_s);
            net.set_timer(me, at, T_SPM);
        } else if token == T_RTO + 16 * self.epoch {
            // No CCM for an RTO: slow start from one packet, everything outstanding is
            // considered gone (its repair is the receivers' business, by NACK).
            self.timeouts += 1;
            self.window.on_timeout();
            self.acked_upto = self.snd_nxt;
            self.fresh = true;
            if self.nominee.nominee().is_some() {
                self.backoff = (self.backoff * 2).min(self.cfg.max_backoff);
            }
            self.pump(net, me, 1);
            self.arm(net, me);
        }
    }
}

/// One repair per packet per hold time (about an RTT): NACKs for the same packet inside that
/// time are answered by the repair already on its way. Shared by the AER/NCA sender, the
/// repair servers and the PGMCC sender; remembers the last 4096 packets repaired.
#[derive(Default)]
pub struct RepairGate {
    last: BTreeMap<u64, Time>,
}

impl RepairGate {
    const KEEP: usize = 4096;

    /// Whether a repair of `seq` may go out now; if so, it is recorded as sent.
    pub fn admit(&mut self, seq: u64, now: Time, hold: Duration) -> bool {
        if self.last.get(&seq).is_some_and(|&t| now < t + hold) {
            return false;
        }
        self.last.insert(seq, now);
        if self.last.len() > Self::KEEP {
            self.last.pop_first();
        }
        true
    }
}

/// A repair server on an active node.
pub struct RepairServer {
    node: NodeId,
    flow: u32,
    /// The data group (cached) and the upstream repair group it joins.
    group: GroupId,
    up_repair: GroupId,
    /// Its own repair group (rooted here, joined by its subtree).
    own: GroupId,
    upstream: (NodeId, AgentId),
    cfg: AerConfig,
    /// Round-trip propagation time to the upstream RS/sender and to its farthest downstream
    /// member, seconds.
    rtt_up: f64,
    rtt_down: f64,
    cache: VecDeque<u64>,
    cached: BTreeSet<u64>,
    /// Packets a downstream node asked for that are not cached: (asked at upstream at).
    waiting: BTreeMap<u64, Time>,
    repairs_sent: RepairGate,
    worst: Option<Csm>,
    running: bool,
    /// Repairs sent from the cache, NACKs forwarded upstream, NACKs absorbed.
    pub local_repairs: u64,
    pub nacks_up: u64,
    pub nacks_absorbed: u64,
}

impl RepairServer {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        node: NodeId,
        flow: u32,
        group: GroupId,
        up_repair: GroupId,
        own: GroupId,
        upstream: (NodeId, AgentId),
        cfg: AerConfig,
        rtt_up: f64,
        rtt_down: f64,
    ) -> Self {
        RepairServer {
            node,
            flow,
            group,
            up_repair,
            own,
            upstream,
            cfg,
            rtt_up,
            rtt_down,
            cache: VecDeque::new(),
            cached: BTreeSet::new(),
            waiting: BTreeMap::new(),
            repairs_sent: RepairGate::default(),
            worst: None,
            running: false,
            local_repairs: 0,
            nacks_up: 0,
            nacks_absorbed: 0,
        }
    }

    fn store(&mut self, seq: u64) {
        if self.cached.insert(seq) {
            self.cache.push_back(seq);
            while self.cache.len() > self.cfg.cache_packets {
                if let Some(old) = self.cache.pop_front() {
                    self.cached.remove(&old);
                }
            }
        }
    }

    fn repair(&mut self, net: &mut Net, me: AgentId, seq: u64) {
        let now = net.now();
        if !self
            .repairs_sent
            .admit(seq, now, secs(self.rtt_down.max(0.01)))
        {
            self.nacks_absorbed += 1;
            return;
        }
        self.local_repairs += 1;
        net.send(capsule(
            (self.node, me),
            Dest::Group(self.own),
            self.flow,
            self.cfg.packet_size,
            Capsule::Repair { seq },
            now,
        ));
    }
}

const T_CSM: u64 = 1;

impl Agent for RepairServer {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                net.join(self.group, self.node, me);
                net.join(self.up_repair, self.node, me);
                let at = net.now() + secs(self.cfg.csm_period_s);
                net.set_timer(me, at, T_CSM);
            }
            Command::Stop => self.running = false,
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        if !self.running {
            return;
        }
        let Body::Capsule(c) = pkt.body else { return };
        let now = net.now();
        match c {
            Capsule::Data { seq, .. } => self.store(seq),
            Capsule::Repair { seq } => {
                self.store(seq);
                if self.waiting.remove(&seq).is_some() {
                    self.repair(net, me, seq);
                }
            }
            Capsule::Nack { seq } => {
                if self.cached.contains(&seq) {
                    self.repair(net, me, seq);
                    return;
                }
                // Aggregate: one NACK upstream per packet per upstream round trip.
                let ask = match self.waiting.get(&seq) {
                    Some(&t) => now >= t + secs(2.0 * self.rtt_up.max(0.005)),
                    None => true,
                };
                if ask {
                    self.waiting.insert(seq, now);
                    self.nacks_up += 1;
                    net.send(capsule(
                        (self.node, me),
                        Dest::Agent(self.upstream.0, self.upstream.1),
                        self.flow,
                        CAPSULE_SIZE,
                        Capsule::Nack { seq },
                        now,
                    ));
                } else {
                    self.nacks_absorbed += 1;
                }
                if self.waiting.len() > 4096 {
                    let first = *self.waiting.keys().next().unwrap_or(&0);
                    self.waiting.remove(&first);
                }
            }
            Capsule::Csm { rcv, p, rtt_s } => {
                let csm = Csm {
                    receiver: rcv,
                    p: (p >= 0.0).then_some(f64::from(p)),
                    rtt_s: f64::from(rtt_s),
                };
                if self
                    .worst
                    .is_none_or(|w| worse(&csm, &w) || w.receiver == rcv)
                {
                    self.worst = Some(csm);
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if !self.running || token != T_CSM {
            return;
        }
        if let Some(w) = self.worst.take() {
            let now = net.now();
            net.send(capsule(
                (self.node, me),
                Dest::Agent(self.upstream.0, self.upstream.1),
                self.flow,
                CAPSULE_SIZE,
                Capsule::Csm {
                    rcv: w.receiver,
                    p: w.p.map_or(-1.0, |p| p as f32),
                    rtt_s: w.rtt_s as f32,
                },
                now,
            ));
        }
        let at = net.now() + secs(self.cfg.csm_period_s);
        net.set_timer(me, at, T_CSM);
    }
}

/// NCA's loss probability estimator: the fraction of loss events over the packets of the last
/// `n` loss intervals plus the open one ([U] window, spec §1.6 proposes 8 loss intervals).
#[derive(Clone, Debug, Default)]
pub struct Lpe {
    n: usize,
    closed: VecDeque<u64>,
    open: u64,
}

impl Lpe {
    pub fn new(n: usize) -> Lpe {
        Lpe {
            n: n.max(1),
            ..Lpe::default()
        }
    }
    /// A packet arrived.
    pub fn packet(&mut self) {
        self.open += 1;
    }
    /// A loss event (a burst of consecutive losses counts once).
    pub fn loss(&mut self) {
        self.closed.push_back(self.open + 1);
        self.open = 0;
        while self.closed.len() > self.n {
            self.closed.pop_front();
        }
    }
    /// Loss events per packet; `None` before the first loss.
    pub fn p(&self) -> Option<f64> {
        if self.closed.is_empty() {
            return None;
        }
        let pk: u64 = self.closed.iter().sum::<u64>() + self.open;
        Some(self.closed.len() as f64 / pk.max(1) as f64)
    }
}

/// An AER/NCA receiver.
pub struct AerReceiver {
    node: NodeId,
    rid: u32,
    flow: u32,
    group: GroupId,
    repair_group: GroupId,
    upstream: (NodeId, AgentId),
    sender: (NodeId, AgentId),
    cfg: AerConfig,
    rtt_up: f64,
    mon: MonId,
    rng: Rng,
    /// Next sequence not yet received (all below are in), and those received above it.
    cum: Option<u64>,
    above: BTreeSet<u64>,
    max_seen: Option<u64>,
    /// Missing packets and NACKs sent for each.
    missing: BTreeMap<u64, u32>,
    lpe: Lpe,
    /// PGMCC mode (`agents::pgmcc`): the smoothed per-packet loss indicator, reported in NACKs
    /// and ACKs instead of CSMs and CCMs.
    pgm: Option<f64>,
    /// PGMCC: the acker named by the latest data packet (it acknowledges repairs too).
    last_acker: u32,
    owd: Option<f64>,
    running: bool,
    /// Duplicates, NACKs sent, packets given up.
    pub duplicates: u64,
    pub nacks: u64,
    pub given_up: u64,
}

impl AerReceiver {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        node: NodeId,
        rid: u32,
        flow: u32,
        groups: (GroupId, GroupId),
        upstream: (NodeId, AgentId),
        sender: (NodeId, AgentId),
        cfg: AerConfig,
        rtt_up: f64,
        mon: MonId,
        rng: Rng,
    ) -> Self {
        AerReceiver {
            node,
            rid,
            flow,
            group: groups.0,
            repair_group: groups.1,
            upstream,
            sender,
            cfg,
            rtt_up,
            mon,
            rng,
            cum: None,
            above: BTreeSet::new(),
            max_seen: None,
            missing: BTreeMap::new(),
            lpe: Lpe::new(cfg.lpe_intervals),
            pgm: None,
            last_acker: 0,
            owd: None,
            running: false,
            duplicates: 0,
            nacks: 0,
            given_up: 0,
        }
    }

    /// Makes this a PGMCC receiver (`agents::pgmcc`).
    pub fn pgmcc(mut self) -> Self {
        self.pgm = Some(0.0);
        self
    }

    fn pgm_loss_sample(&mut self, lost: bool) {
        if let Some(l) = self.pgm.as_mut() {
            let x = if lost { 1.0 } else { 0.0 };
            *l += crate::agents::pgmcc::LOSS_GAIN * (x - *l);
        }
    }

    /// A PGMCC ACK: highest sequence received and the bitmap of the 32 below it (`just`
    /// counts as received: it is being processed).
    fn pgm_ack(&mut self, net: &mut Net, me: AgentId, high: u64, just: u64, echo: Time) {
        let mut bitmap = 0u32;
        for i in 0..32u64 {
            if high > i && (self.have(high - 1 - i) || high - 1 - i == just) {
                bitmap |= 1 << i;
            }
        }
        let now = net.now();
        net.send(capsule(
            (self.node, me),
            Dest::Agent(self.sender.0, self.sender.1),
            self.flow,
            CAPSULE_SIZE,
            Capsule::PgmAck {
                rcv: self.rid,
                high,
                bitmap,
                echo,
                loss: self.pgm.unwrap_or(0.0) as f32,
            },
            now,
        ));
    }

    fn have(&self, seq: u64) -> bool {
        self.cum.is_some_and(|c| seq < c) || self.above.contains(&seq)
    }

    /// Marks `seq` received; returns false for a duplicate.
    fn receive(&mut self, net: &mut Net, seq: u64) -> bool {
        if self.have(seq) {
            self.duplicates += 1;
            return false;
        }
        // A packet below the first one seen (joined mid-stream) is not ours to track.
        if self.cum.is_some_and(|c| seq < c) {
            return false;
        }
        self.missing.remove(&seq);
        let c = self.cum.get_or_insert(seq);
        if seq == *c {
            *c += 1;
            while self.above.remove(c) {
                *c += 1;
            }
        } else {
            self.above.insert(seq);
        }
        net.monitors
            .packet(self.mon, net.now(), self.cfg.packet_size);
        true
    }

    /// Packets `from..=to` are missing: NACK each after a random back-off in [0, RTT to RS].
    fn gap(&mut self, net: &mut Net, me: AgentId, from: u64, to: u64) {
        for s in from..=to {
            if self.have(s) || self.missing.contains_key(&s) {
                continue;
            }
            self.missing.insert(s, 0);
            let at = net.now() + secs(self.rng.uniform(0.0, self.rtt_up.max(0.001)));
            net.set_timer(me, at, 16 + s);
        }
    }

    fn send_csm(&mut self, net: &mut Net, me: AgentId) {
        let now = net.now();
        let rtt = self.owd.map_or(0.0, |d| 2.0 * d);
        net.send(capsule(
            (self.node, me),
            Dest::Agent(self.upstream.0, self.upstream.1),
            self.flow,
            CAPSULE_SIZE,
            Capsule::Csm {
                rcv: self.rid,
                p: self.lpe.p().map_or(-1.0, |p| p as f32),
                rtt_s: rtt as f32,
            },
            now,
        ));
    }
}

impl Agent for AerReceiver {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                net.join(self.group, self.node, me);
                net.join(self.repair_group, self.node, me);
                net.monitors.started(self.mon, net.now());
                net.set_timer(me, net.now(), T_CSM);
            }
            Command::Stop if self.running => {
                self.running = false;
                net.leave(self.group, self.node, me);
                net.leave(self.repair_group, self.node, me);
            }
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        if !self.running {
            return;
        }
        let Body::Capsule(c) = pkt.body else { return };
        let now = net.now();
        match c {
            Capsule::Data { seq, acker } => {
                let d = now.0.saturating_sub(pkt.sent_at.0) as f64 * 1e-9;
                self.owd = Some(self.owd.map_or(d, |o| 0.875 * o + 0.125 * d));
                if self.pgm.is_some() {
                    if let Some(m) = self.max_seen {
                        for _ in m + 1..seq.max(m + 1) {
                            self.pgm_loss_sample(true);
                        }
                    }
                    self.pgm_loss_sample(false);
                }
                self.last_acker = acker;
                if acker == self.rid && self.pgm.is_some() {
                    let high = self.max_seen.map_or(seq, |m| m.max(seq));
                    self.pgm_ack(net, me, high, seq, pkt.sent_at);
                } else if acker == 0 && self.pgm.is_some() {
                    // PGMCC without an acker yet: every receiver reports, so the sender can
                    // elect one (seq u64::MAX = a report, no packet missing).
                    net.send(capsule(
                        (self.node, me),
                        Dest::Agent(self.upstream.0, self.upstream.1),
                        self.flow,
                        CAPSULE_SIZE,
                        Capsule::PgmNack {
                            rcv: self.rid,
                            seq: u64::MAX,
                            high: self.max_seen.map_or(seq, |m| m.max(seq)),
                            loss: self.pgm.unwrap_or(0.0) as f32,
                        },
                        now,
                    ));
                } else if acker == self.rid {
                    net.send(capsule(
                        (self.node, me),
                        Dest::Agent(self.sender.0, self.sender.1),
                        self.flow,
                        CAPSULE_SIZE,
                        Capsule::Ccm {
                            rcv: self.rid,
                            seq,
                            echo: pkt.sent_at,
                        },
                        now,
                    ));
                }
                let first = self.max_seen.is_none();
                if let Some(m) = self.max_seen {
                    if seq > m + 1 {
                        self.lpe.loss();
                        self.gap(net, me, m + 1, seq - 1);
                    }
                }
                if first || self.max_seen.is_some_and(|m| seq > m) {
                    self.max_seen = Some(seq);
                }
                self.lpe.packet();
                self.receive(net, seq);
            }
            Capsule::Repair { seq } if self.max_seen.is_some() => {
                let fresh = self.receive(net, seq);
                if self.pgm.is_some() && self.last_acker == self.rid {
                    // PGMCC: the acker acknowledges every repair as well, duplicates included
                    // (each used a token; RDATA is acknowledged like ODATA).
                    let _ = fresh;
                    let high = self.max_seen.unwrap_or(seq);
                    self.pgm_ack(net, me, high, seq, pkt.sent_at);
                }
            }
            Capsule::Spm { high } => {
                if let Some(m) = self.max_seen {
                    if high > m {
                        self.lpe.loss();
                        self.gap(net, me, m + 1, high);
                        self.max_seen = Some(high);
                    }
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if !self.running {
            return;
        }
        if token == T_CSM {
            if self.pgm.is_some() {
                return; // PGMCC has no CSMs: the loss rate rides in NACKs and ACKs
            }
            self.send_csm(net, me);
            let at = net.now() + secs(self.cfg.csm_period_s);
            net.set_timer(me, at, T_CSM);
            return;
        }
        let Some(seq) = token.checked_sub(16) else {
            return;
        };
        let Some(tries) = self.missing.get(&seq).copied() else {
            return;
        };
        if tries >= self.cfg.nack_tries {
            self.missing.remove(&seq);
            self.given_up += 1;
            net.monitors.lost(self.mon, net.now(), 1);
            return;
        }
        self.missing.insert(seq, tries + 1);
        self.nacks += 1;
        let now = net.now();
        let c = match self.pgm {
            Some(loss) => Capsule::PgmNack {
                rcv: self.rid,
                seq,
                high: self.max_seen.unwrap_or(seq),
                loss: loss as f32,
            },
            None => Capsule::Nack { seq },
        };
        net.send(capsule(
            (self.node, me),
            Dest::Agent(self.upstream.0, self.upstream.1),
            self.flow,
            CAPSULE_SIZE,
            c,
            now,
        ));
        // Re-arm: no repair within two round trips to the RS → ask again.
        let at = now + secs(2.0 * self.rtt_up.max(0.005));
        net.set_timer(me, at, 16 + seq);
    }
}

/// One AER/NCA session to install.
pub struct SessionSpec<'a> {
    pub name: &'a str,
    pub flow: u32,
    pub source: NodeId,
    /// Nodes running a repair server (empty: global recovery from the sender).
    pub repair_servers: Vec<NodeId>,
    /// (monitor name suffix, node, start, stop).
    pub receivers: Vec<(String, NodeId, Time, Option<Time>)>,
    pub start: Time,
    pub stop: Option<Time>,
    pub cfg: AerConfig,
    pub seed: u64,
}

/// Round-trip propagation delay between two nodes along the unicast routes, seconds.
pub fn path_rtt(net: &Net, a: NodeId, b: NodeId) -> f64 {
    let one = |x: NodeId, y: NodeId| {
        net.route(x, y).map_or(0.0, |ls| {
            ls.iter()
                .map(|&l| net.links[l].delay.as_secs_f64())
                .sum::<f64>()
        })
    };
    one(a, b) + one(b, a)
}

/// The nearest node of `rs` strictly between `src` and `node` on the route, if any.
fn nearest_rs(net: &Net, src: NodeId, node: NodeId, rs: &[NodeId]) -> Option<NodeId> {
    let links = net.route(src, node)?;
    links
        .iter()
        .map(|&l| net.links[l].to)
        .rfind(|&n| n != node && rs.contains(&n))
}

/// Adds the session's agents (sender first, then the repair servers, then the receivers; the
/// receivers' monitors are `NAME/RECEIVER`) and schedules their start and stop.
pub fn install(sim: &mut Sim, s: &SessionSpec) {
    let net = &mut sim.net;
    let group = net.add_group(s.source);
    let sender_repair = net.add_group(s.source);
    let s_id = sim.agents.len();
    let rs_ids: Vec<AgentId> = (0..s.repair_servers.len()).map(|i| s_id + 1 + i).collect();
    let rs_groups: Vec<GroupId> = s
        .repair_servers
        .iter()
        .map(|&n| sim.net.add_group(n))
        .collect();
    let up_of = |net: &Net, node: NodeId| -> ((NodeId, AgentId), GroupId) {
        match nearest_rs(net, s.source, node, &s.repair_servers) {
            Some(r) => {
                let i = s.repair_servers.iter().position(|&x| x == r).unwrap_or(0);
                ((r, rs_ids[i]), rs_groups[i])
            }
            None => ((s.source, s_id), sender_repair),
        }
    };
    let snd = AerSender::new(s.source, s.flow, group, sender_repair, s.cfg);
    sim.add_agent(s.source, Box::new(snd));
    sim.net.schedule_command(s.start, s_id, Command::Start);
    if let Some(t) = s.stop {
        sim.net.schedule_command(t, s_id, Command::Stop);
    }
    for (i, &n) in s.repair_servers.iter().enumerate() {
        let (up, up_group) = up_of(&sim.net, n);
        let rtt_up = path_rtt(&sim.net, n, up.0);
        let rtt_down = s
            .receivers
            .iter()
            .filter(|r| nearest_rs(&sim.net, s.source, r.1, &s.repair_servers) == Some(n))
            .map(|r| path_rtt(&sim.net, n, r.1))
            .fold(0.0, f64::max);
        let rs = RepairServer::new(
            n,
            s.flow,
            group,
            up_group,
            rs_groups[i],
            up,
            s.cfg,
            rtt_up,
            rtt_down,
        );
        let id = sim.add_agent(n, Box::new(rs));
        debug_assert_eq!(id, rs_ids[i]);
        // Repair servers are on before the session starts (the thesis activates them at 0.4 s).
        sim.net.schedule_command(Time::ZERO, id, Command::Start);
    }
    for (k, (rname, node, start, stop)) in s.receivers.iter().enumerate() {
        let mon = sim.net.monitors.add(
            format!("{}/{rname}", s.name),
            s.name.to_string(),
            MonKind::Cbr,
            Vec::new(),
        );
        let (up, rg) = up_of(&sim.net, *node);
        let rtt_up = path_rtt(&sim.net, *node, up.0);
        let r = AerReceiver::new(
            *node,
            k as u32 + 1,
            s.flow,
            (group, rg),
            up,
            (s.source, s_id),
            s.cfg,
            rtt_up,
            mon,
            Rng::derive(s.seed, 0xae00 + u64::from(s.flow) * 4096 + k as u64),
        );
        let id = sim.add_agent(*node, Box::new(r));
        sim.net.schedule_command(*start, id, Command::Start);
        if let Some(t) = stop {
            sim.net.schedule_command(*t, id, Command::Stop);
        }
    }
}

/// AN bandwidth usage (thesis Table 5.7): packets of `flows` over all packets that crossed
/// `links` (serialised), whole run.
pub fn an_share(net: &Net, links: &[usize], flows: &[usize]) -> f64 {
    let (mut an, mut all) = (0u64, 0u64);
    for &l in links {
        let c = &net.links[l].flow_sent;
        all += c.iter().sum::<u64>();
        an += flows
            .iter()
            .map(|&f| c.get(f).copied().unwrap_or(0))
            .sum::<u64>();
    }
    if all == 0 {
        f64::NAN
    } else {
        an as f64 / all as f64
    }
}

/// Packet loss ratio of `flows` as an ns-2 trace gives it (spec §2.1 "packets dropped /
/// packets transmitted, whole run"): drops on any link over packet transmissions on every
/// link, so a repair served from a cache near the receivers (short, clean hops) lowers it.
pub fn an_plr(net: &Net, flows: &[usize]) -> f64 {
    let drops: u64 = flows
        .iter()
        .map(|&f| net.flow_drops.get(f).copied().unwrap_or(0))
        .sum();
    let sent: u64 = net
        .links
        .iter()
        .map(|l| {
            flows
                .iter()
                .map(|&f| l.flow_sent.get(f).copied().unwrap_or(0))
                .sum::<u64>()
        })
        .sum();
    if sent == 0 {
        f64::NAN
    } else {
        drops as f64 / sent as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lpe_counts_loss_events_over_the_window() {
        let mut l = Lpe::new(2);
        assert_eq!(l.p(), None);
        for _ in 0..99 {
            l.packet();
        }
        l.loss();
        assert!((l.p().unwrap() - 0.01).abs() < 1e-12);
        for _ in 0..49 {
            l.packet();
        }
        l.loss();
        // Two intervals of 100 and 50 packets, nothing open: 2/150.
        assert!((l.p().unwrap() - 2.0 / 150.0).abs() < 1e-12);
        for _ in 0..9 {
            l.packet();
        }
        l.loss();
        // The window keeps the last two: 50 and 10.
        assert!((l.p().unwrap() - 2.0 / 60.0).abs() < 1e-12);
    }

    #[test]
    fn worse_orders_by_g_then_rtt() {
        let a = Csm {
            receiver: 1,
            p: Some(0.04),
            rtt_s: 0.06,
        };
        let b = Csm {
            receiver: 2,
            p: Some(0.01),
            rtt_s: 0.1,
        };
        let c = Csm {
            receiver: 3,
            p: None,
            rtt_s: 0.3,
        };
        let d = Csm {
            receiver: 4,
            p: None,
            rtt_s: 0.1,
        };
        assert!(worse(&a, &b) && !worse(&b, &a));
        assert!(worse(&b, &c));
        assert!(worse(&c, &d) && !worse(&d, &c));
    }
}
