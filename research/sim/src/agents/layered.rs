//! The layered session: a sender pacing constant-rate layers as back-to-back bunches onto one
//! multicast group per layer, and a receiver hosting any [`LayeredController`] unchanged.

use crate::engine::{Agent, AgentId, Body, Command, Dest, GroupId, Net, NodeId, Packet};
use crate::metrics::MonId;
use baselines::flid::DynamicLayerSchedule;
use baselines::rlc::SyncPoints;
use baselines::webrc::WaveSchedule;
use congestion::schedule::{Bunch, Schedule};
use congestion::{Action, LayeredController, PacketArrival, SessionInfo, Time};

/// What the sender puts on its groups, and how a receiver maps them to the controller's
/// cumulative layers. Chosen from the session's protocol, because the baselines need
/// sender-side behaviour the controllers cannot supply themselves:
///
/// * [`Layering::Bunches`] (ERA, PLM, RLM, DLM, test controllers): static layers, group `k` =
///   layer `k`, paced as back-to-back bunches by `congestion::schedule` (the server's pacer).
/// * [`Layering::Rlc`]: static layers paced packet by packet at each layer's rate, with the
///   synchronisation-point burst test: the `burst_packets` packets before each SP go at twice
///   the layer rate and the SP packet waits the saved time (`SyncPoints::spacing_factor`);
///   every layer numbered from 0 at the sender's start, so the SPs the receivers derive from
///   the announcement fall at common instants.
/// * [`Layering::Flid`]: FLID-DL dynamic layering: group 0 is the base, groups `1..=G` the
///   dynamic channels; in slot `s` (sender clock, `t / slot`) channel `g` carries logical layer
///   `logical_of(g, s)` at that layer's rate, or nothing while quiescent.
/// * [`Layering::Webrc`]: RFC 3738 waves: group 0 the base channel, groups `1..=T` the wave
///   channels; logical layer `j` runs at `BCR_P·P^(−j)·P^(τ/TSD)` packets/s on channel
///   `channel_for(j, s)`, quiescent channels send nothing.
///
/// For the dynamic kinds the receiver keeps the controller's logical level and, after every
/// batch of actions, reconciles its group memberships to the channels that carry logical
/// layers `0..level` in the current slot (the host contract in `docs/protocols/flid-dl.md`,
/// `webrc.md`).
#[derive(Clone, Debug)]
pub enum Layering {
    Bunches,
    Rlc(SyncPoints),
    Flid(DynamicLayerSchedule),
    Webrc(WaveSchedule),
}

impl Layering {
    /// The layering the controller named `protocol` expects for the session `info`, with the
    /// controllers' default parameters (the ones `baselines::controller_by_name` uses; a
    /// `flid-rttN` variant only changes the simulated RTT, and an `rlc-deafN` variant only
    /// the receiver's deaf period, not the channel schedule).
    pub fn for_protocol(protocol: &str, info: &SessionInfo) -> Layering {
        let p = protocol.to_ascii_lowercase();
        if p == "rlc" || p.starts_with("rlc-deaf") {
            let c = baselines::rlc::Config::default();
            Layering::Rlc(SyncPoints::new(info, c.sp_cycle, c.burst_packets))
        } else if p.starts_with("flid") {
            let c = baselines::flid::Config::default();
            Layering::Flid(DynamicLayerSchedule {
                layers: info.layers.len().min(255) as u8,
                quiescent_slots: c.quiescent_slots,
                slot: c.slot,
            })
        } else if p == "webrc" {
            let c = baselines::webrc::Config::default();
            let size = f64::from(info.packet_size.max(1));
            let bcr = info.layers.first().map_or(0.0, |l| l.rate_bps as f64) / (8.0 * size);
            let tsd = c.tsd.as_secs_f64().max(1e-3);
            Layering::Webrc(WaveSchedule {
                bcr_p: bcr.max(1e-3),
                p: c.p,
                tsd: c.tsd,
                n: info.layers.len().saturating_sub(1).min(254) as u32,
                q: (c.qd.as_secs_f64() / tsd).ceil().clamp(1.0, 1e6) as u32,
            })
        } else {
            Layering::Bunches
        }
    }

    /// Number of multicast groups the sender uses.
    pub fn groups(&self, layers: usize) -> usize {
        match self {
            Layering::Bunches | Layering::Rlc(_) => layers,
            Layering::Flid(d) => 1 + d.channels() as usize,
            Layering::Webrc(w) => 1 + w.channels() as usize,
        }
    }

    fn dynamic(&self) -> bool {
        matches!(self, Layering::Flid(_) | Layering::Webrc(_))
    }

    /// Slot of a sender timestamp (dynamic kinds).
    fn slot_at(&self, send_us: u64) -> u64 {
        match self {
            Layering::Flid(d) => d.slot_at(send_us),
            Layering::Webrc(w) => w.slot_at(send_us),
            _ => 0,
        }
    }

    /// Start of the slot after the one containing `t`.
    fn next_boundary(&self, t: Time) -> Time {
        let len = match self {
            Layering::Flid(d) => d.slot.as_nanos() as u64,
            Layering::Webrc(w) => w.tsd.as_nanos() as u64,
            _ => return Time::NEVER,
        }
        .max(1);
        Time((t.0 / len + 1) * len)
    }

    /// Logical layer group `g` carries at sender time `send_us` (None: quiescent).
    fn logical_of(&self, g: usize, send_us: u64) -> Option<u8> {
        if g == 0 {
            return Some(0);
        }
        let s = self.slot_at(send_us);
        match self {
            Layering::Bunches | Layering::Rlc(_) => u8::try_from(g).ok(),
            Layering::Flid(d) => d.logical_of(g as u32 - 1, s),
            Layering::Webrc(w) => {
                let t = u64::from(w.channels());
                let j = (g as u64 - 1 + t - s % t) % t + 1;
                (j <= u64::from(w.n)).then_some(j as u8)
            }
        }
    }

    /// Groups a receiver at logical `level` must hold in `slot` (dynamic kinds).
    fn groups_for_level(&self, level: u8, slot: u64) -> Vec<usize> {
        let mut v = Vec::new();
        if level == 0 {
            return v;
        }
        v.push(0);
        match self {
            Layering::Flid(d) => v.extend(
                d.channels_for_level(level, slot)
                    .into_iter()
                    .map(|c| c as usize + 1),
            ),
            Layering::Webrc(w) => v.extend(
                (1..u32::from(level))
                    .filter_map(|j| w.channel_for(j, slot).map(|c| c as usize + 1)),
            ),
            _ => v.extend(1..level as usize),
        }
        v
    }
}

/// Sends every layer of a session, always (the routers prune what nobody wants), paced by the
/// protocol crate's sender schedule (`congestion::schedule`, the same one the server uses):
/// layer `k` sends a bunch of `bunch_len` equal-size packets every
/// `bunch_len · size · 8 / rate_k` seconds at golden-ratio phases, one whole bunch at a time,
/// all packets of a bunch handed to the access link back to back.
pub struct LayeredSender {
    node: NodeId,
    flow: u32,
    groups: Vec<GroupId>,
    info: SessionInfo,
    link_bps: f64,
    sched: Option<Schedule>,
    pending: Option<Bunch>,
    seq: Vec<u64>,
    epoch: u64,
    running: bool,
    layering: Layering,
    /// Per-group next send time (packet-paced kinds, and jittered bunches).
    next: Vec<Time>,
    /// ns-2 `CBR_PP` `random_ 1`: each layer's gap to its next bunch is
    /// `I_k · (1 + U(−j, j))` with `j` = this (0 = the deterministic schedule).
    burst_jitter: f64,
    rng: Option<netmodel::rng::Rng>,
    /// Packets sent, for tests.
    pub sent: u64,
}

impl LayeredSender {
    /// A sender on `node` for the session `info`, layer `k` on `groups[k]`, behind an access
    /// link of `link_bps` (0 = do not model the sender's own serialisation in the schedule).
    pub fn new(
        node: NodeId,
        flow: u32,
        groups: Vec<GroupId>,
        info: SessionInfo,
        link_bps: f64,
    ) -> Result<Self, crate::Error> {
        // Validate now so a bad ladder is a scenario error, not a silent non-start.
        Schedule::new(&info, Time::ZERO).map_err(|e| crate::Error::Scenario(e.to_string()))?;
        Ok(LayeredSender {
            node,
            flow,
            seq: vec![0; groups.len()],
            next: vec![Time::NEVER; groups.len()],
            groups,
            info,
            link_bps,
            sched: None,
            pending: None,
            epoch: 0,
            running: false,
            layering: Layering::Bunches,
            burst_jitter: 0.0,
            rng: None,
            sent: 0,
        })
    }

    /// Jitters every bunch gap by a uniform fraction in `[−jitter, jitter]` of the layer's
    /// bunch interval, drawing from `rng`, as Legout's ns-2 PLM sources do (`plm-topo.tcl`
    /// sets `random_ 1` on every layer's `CBR_PP` source, whose `next_interval` adds
    /// `interval · U(−0.5, 0.5)`). Layers then keep their mean rate but no fixed phase to one
    /// another or to other sessions. Why it matters: with a fixed schedule the same pairs of
    /// two sessions meet (or miss) each other at a fair queue period after period, so a pair
    /// sample's bias against the fair share is frozen per session (`docs/protocols/plm.md`
    /// §6). Only for bunch-paced kinds; `jitter` must be in `[0, 1)`.
    pub fn with_burst_jitter(
        mut self,
        jitter: f64,
        rng: netmodel::rng::Rng,
    ) -> Result<Self, crate::Error> {
        if !(0.0..1.0).contains(&jitter) {
            return Err(crate::Error::Scenario(format!(
                "burst_jitter must be in [0, 1), got {jitter}"
            )));
        }
        if jitter > 0.0 && !matches!(self.layering, Layering::Bunches) {
            return Err(crate::Error::Scenario(
                "burst_jitter needs a bunch-paced protocol (not rlc, flid, webrc)".into(),
            ));
        }
        self.burst_jitter = jitter;
        self.rng = Some(rng);
        Ok(self)
    }

    /// Bunch interval of layer `k` in seconds.
    fn bunch_interval(&self, k: usize) -> f64 {
        let rate = self.info.layers.get(k).map_or(0.0, |l| l.rate_bps as f64);
        if rate <= 0.0 {
            return f64::INFINITY;
        }
        f64::from(self.info.bunch_len.max(1)) * f64::from(self.info.packet_size) * 8.0 / rate
    }

    fn jittered_gap(&mut self, k: usize) -> std::time::Duration {
        let i = self.bunch_interval(k);
        let j = self.burst_jitter;
        let u = self.rng.as_mut().map_or(0.0, |r| r.uniform(-j, j));
        std::time::Duration::from_secs_f64((i * (1.0 + u)).clamp(1e-6, 1e6))
    }

    /// Jittered bunches: sends every bunch that is due, re-arms one timer at the earliest next.
    fn jittered_tick(&mut self, net: &mut Net, me: AgentId) {
        let now = net.now();
        for k in 0..self.groups.len() {
            while self.next[k] <= now {
                self.send_bunch(
                    net,
                    me,
                    Bunch {
                        at: self.next[k],
                        nominal: self.next[k],
                        layer: k as u8,
                        count: self.info.bunch_len.max(1),
                    },
                );
                let gap = self.jittered_gap(k);
                self.next[k] += gap;
            }
        }
        if let Some(&t) = self.next.iter().min() {
            if t != Time::NEVER {
                net.set_timer(me, t, self.epoch);
            }
        }
    }

    /// Uses `layering` instead of the bunch schedule (`groups` must have
    /// `layering.groups(layers)` entries).
    pub fn with_layering(mut self, layering: Layering) -> Result<Self, crate::Error> {
        let want = layering.groups(self.info.layers.len());
        if want != self.groups.len() || want > 256 {
            return Err(crate::Error::Scenario(format!(
                "layering needs {want} groups (at most 256), got {}",
                self.groups.len()
            )));
        }
        self.layering = layering;
        Ok(self)
    }

    /// Packets per second group `g` sends at `t` (0 = quiescent now).
    fn rate_pps(&self, g: usize, t: Time) -> f64 {
        let size = f64::from(self.info.packet_size.max(1));
        let static_rate =
            |k: usize| self.info.layers.get(k).map_or(0.0, |l| l.rate_bps as f64) / (8.0 * size);
        match &self.layering {
            Layering::Webrc(w) => match self.layering.logical_of(g, t.as_micros()) {
                Some(j) => w.rate_pps(u32::from(j), t.as_micros()),
                None => 0.0,
            },
            _ => match self.layering.logical_of(g, t.as_micros()) {
                Some(k) => static_rate(k as usize),
                None => 0.0,
            },
        }
    }

    /// When group `g` sends next after a packet at `t` (or, quiescent, at the next slot).
    fn schedule_next(&mut self, g: usize, t: Time) {
        let r = self.rate_pps(g, t);
        self.next[g] = if r > 0.0 {
            let factor = match &self.layering {
                Layering::Rlc(sp) => sp.spacing_factor(g as u8, self.seq[g]),
                _ => 1.0,
            };
            t + std::time::Duration::from_secs_f64((factor / r).max(1e-6))
        } else {
            self.layering.next_boundary(t)
        };
    }

    fn send_one(&mut self, net: &mut Net, me: AgentId, g: usize) {
        net.send(Packet {
            src: self.node,
            src_agent: me,
            dst: Dest::Group(self.groups[g]),
            size: u32::from(self.info.packet_size),
            flow: self.flow,
            sent_at: net.now(),
            body: Body::Layer {
                layer: g as u8,
                seq: self.seq[g],
                bunch_pos: 0,
                bunch_len: 1,
            },
        });
        self.seq[g] += 1;
        self.sent += 1;
    }

    /// Packet-paced kinds: sends what is due, re-arms one timer at the earliest next send.
    fn paced_tick(&mut self, net: &mut Net, me: AgentId) {
        let now = net.now();
        for g in 0..self.groups.len() {
            while self.next[g] <= now {
                let t = self.next[g];
                if self.rate_pps(g, t) > 0.0 {
                    self.send_one(net, me, g);
                }
                self.schedule_next(g, t);
            }
        }
        if let Some(&t) = self.next.iter().min() {
            if t != Time::NEVER {
                net.set_timer(me, t, self.epoch);
            }
        }
    }

    fn send_bunch(&mut self, net: &mut Net, me: AgentId, b: Bunch) {
        let k = b.layer as usize;
        let Some(&g) = self.groups.get(k) else { return };
        for pos in 0..b.count {
            net.send(Packet {
                src: self.node,
                src_agent: me,
                dst: Dest::Group(g),
                size: u32::from(self.info.packet_size),
                flow: self.flow,
                sent_at: net.now(),
                body: Body::Layer {
                    layer: b.layer,
                    seq: self.seq[k],
                    bunch_pos: pos,
                    bunch_len: b.count,
                },
            });
            self.seq[k] += 1;
            self.sent += 1;
        }
    }
}

impl Agent for LayeredSender {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running && !matches!(self.layering, Layering::Bunches) => {
                self.running = true;
                self.epoch += 1;
                let now = net.now();
                // Golden-ratio phases within one packet interval, so equal-rate groups do not
                // emit in lock step. RLC's layers all start at packet 0 together: the SP grid
                // is common to all layers by construction (seq % P_i == 0).
                for g in 0..self.groups.len() {
                    let r = self.rate_pps(g, now);
                    self.next[g] = if r <= 0.0 {
                        self.layering.next_boundary(now)
                    } else if matches!(self.layering, Layering::Rlc(_)) {
                        now
                    } else {
                        let frac = (g as f64 * 0.618_033_988_75).fract();
                        now + std::time::Duration::from_secs_f64((frac / r).min(1.0))
                    };
                }
                self.paced_tick(net, me);
            }
            Command::Start if !self.running && self.burst_jitter > 0.0 => {
                self.running = true;
                self.epoch += 1;
                let now = net.now();
                // First bunch at the schedule's golden-ratio phase of one interval.
                for k in 0..self.groups.len() {
                    let frac = (k as f64 * 0.618_033_988_75).fract();
                    let i = self.bunch_interval(k);
                    self.next[k] = if i.is_finite() {
                        now + std::time::Duration::from_secs_f64(frac * i)
                    } else {
                        Time::NEVER
                    };
                }
                self.jittered_tick(net, me);
            }
            Command::Start if !self.running => {
                let Ok(mut sched) = Schedule::new(&self.info, net.now()) else {
                    return;
                };
                if self.link_bps > 0.0 {
                    sched = sched.with_link_rate(self.link_bps);
                }
                self.running = true;
                self.epoch += 1;
                let b = sched.next_bunch();
                self.sched = Some(sched);
                self.pending = Some(b);
                net.set_timer(me, b.at, self.epoch);
            }
            Command::Stop => {
                self.running = false;
                self.epoch += 1;
            }
            _ => {}
        }
    }

    fn on_packet(&mut self, _net: &mut Net, _me: AgentId, _pkt: &Packet) {}

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if !self.running || token != self.epoch {
            return;
        }
        if !matches!(self.layering, Layering::Bunches) {
            self.paced_tick(net, me);
            return;
        }
        if self.burst_jitter > 0.0 {
            self.jittered_tick(net, me);
            return;
        }
        let now = net.now();
        while let Some(b) = self.pending.take() {
            if b.at > now {
                self.pending = Some(b);
                net.set_timer(me, b.at, self.epoch);
                return;
            }
            self.send_bunch(net, me, b);
            self.pending = self.sched.as_mut().map(Schedule::next_bunch);
        }
    }
}

const TOKEN_CTL: u64 = 0;
const TOKEN_SAM: u64 = 1;

/// A receiver: joins and leaves groups as its controller says, feeds it every packet of the
/// layers it holds, and records what it receives.
pub struct LayeredReceiver {
    node: NodeId,
    ctl: Box<dyn LayeredController>,
    info: SessionInfo,
    groups: Vec<GroupId>,
    held: Vec<bool>,
    expected: Vec<Option<u64>>,
    mon: MonId,
    /// Deadline of the controller timer currently in the event queue.
    armed: Option<Time>,
    /// When the sender started: announcements go out on its grid `t0 + k·interval`.
    sam_t0: Time,
    running: bool,
    layering: Layering,
    /// The controller's logical level (dynamic kinds; static kinds use `held`).
    logical: u8,
    /// Newest sender slot seen (dynamic kinds), and the smallest `recv − send` seen, which
    /// maps the sender's slot grid onto this receiver's clock when no packet arrives.
    slot: u64,
    min_owd: Option<u64>,
    /// Decisions the controller logged, and feedback messages it asked to send (ignored: the
    /// layered protocols here send none; counted to check AC-13).
    pub decisions: u64,
    pub feedback: u64,
    /// Record as the level only the held layers that have delivered a packet since their join
    /// (ALMA: the thesis traced its subscription level from the data packets reaching the
    /// receiver, so a subscribe the network never grants is not a level; `docs/protocols/alma.md`).
    delivered_level: bool,
}

impl LayeredReceiver {
    /// A receiver on `node` running `ctl`, recording into monitor `mon`.
    pub fn new(
        node: NodeId,
        ctl: Box<dyn LayeredController>,
        info: SessionInfo,
        groups: Vec<GroupId>,
        mon: MonId,
        sam_t0: Time,
    ) -> Self {
        let n = groups.len();
        LayeredReceiver {
            node,
            ctl,
            info,
            groups,
            held: vec![false; n],
            expected: vec![None; n],
            mon,
            armed: None,
            sam_t0,
            running: false,
            layering: Layering::Bunches,
            logical: 0,
            slot: 0,
            min_owd: None,
            decisions: 0,
            feedback: 0,
            delivered_level: false,
        }
    }

    /// Records as the level the held prefix whose layers have each delivered a packet since
    /// their join (static layerings only), instead of the held prefix.
    pub fn with_delivered_level(mut self, on: bool) -> Self {
        self.delivered_level = on;
        self
    }

    /// Hosts the controller on `layering`'s groups (must match the sender's).
    pub fn with_layering(mut self, layering: Layering) -> Self {
        self.layering = layering;
        self
    }

    /// Dynamic kinds: joins/leaves groups so that exactly the channels carrying logical
    /// layers `0..logical` in the current slot are held.
    fn reconcile(&mut self, net: &mut Net, me: AgentId) {
        if !self.layering.dynamic() {
            return;
        }
        let want = self.layering.groups_for_level(self.logical, self.slot);
        for g in 0..self.held.len() {
            let w = want.contains(&g);
            if w != self.held[g] {
                self.held[g] = w;
                self.expected[g] = None;
                if w {
                    net.join(self.groups[g], self.node, me);
                } else {
                    net.leave(self.groups[g], self.node, me);
                }
            }
        }
    }
    /// The sender's next announcement strictly after `now`. A receiver learns the session at
    /// its start (the SAM is also served over HTTP), then hears the periodic SAM on the
    /// sender's grid, so all receivers of a session share one phase (`era.md` §1.1.14).
    fn next_sam(&self, now: Time) -> Time {
        let iv = (self.info.announce_interval.as_nanos() as u64).max(1);
        let since = now.0.saturating_sub(self.sam_t0.0);
        Time(self.sam_t0.0 + (since / iv + 1) * iv)
    }

    fn level(&self) -> u8 {
        if self.layering.dynamic() {
            return self.logical;
        }
        if self.delivered_level {
            return self
                .held
                .iter()
                .zip(&self.expected)
                .take_while(|(h, e)| **h && e.is_some())
                .count() as u8;
        }
        self.held.iter().take_while(|h| **h).count() as u8
    }

    fn leave_all(&mut self, net: &mut Net, me: AgentId) {
        for k in 0..self.held.len() {
            if self.held[k] {
                self.held[k] = false;
                self.expected[k] = None;
                net.leave(self.groups[k], self.node, me);
            }
        }
    }

    /// Carries out the controller's actions, then re-arms its timer.
    fn drain(&mut self, net: &mut Net, me: AgentId) {
        let dynamic = self.layering.dynamic();
        while let Some(a) = self.ctl.poll_action() {
            if dynamic {
                match a {
                    Action::Join(k) => self.logical = self.logical.max(k.saturating_add(1)),
                    Action::Leave(k) => self.logical = self.logical.min(k),
                    Action::Exit => {
                        self.logical = 0;
                        self.running = false;
                    }
                    Action::SendFeedback(_) => self.feedback += 1,
                }
                continue;
            }
            match a {
                Action::Join(k) => {
                    let k = k as usize;
                    if k < self.held.len() && !self.held[k] {
                        self.held[k] = true;
                        self.expected[k] = None;
                        net.join(self.groups[k], self.node, me);
                    }
                }
                Action::Leave(k) => {
                    let k = k as usize;
                    if k < self.held.len() && self.held[k] {
                        self.held[k] = false;
                        self.expected[k] = None;
                        net.leave(self.groups[k], self.node, me);
                    }
                }
                Action::Exit => {
                    self.leave_all(net, me);
                    self.running = false;
                }
                Action::SendFeedback(_) => self.feedback += 1,
            }
        }
        self.reconcile(net, me);
        while let Some(d) = self.ctl.poll_decision() {
            self.decisions += 1;
            net.monitors.list[self.mon].decisions.push(d);
        }
        let lvl = self.level();
        net.monitors.level(self.mon, net.now(), lvl);
        if !self.running {
            return;
        }
        if let Some((at, _)) = self.ctl.poll_timeout() {
            if at != Time::NEVER && self.armed.is_none_or(|a| at < a) {
                self.armed = Some(at);
                net.set_timer(me, at, TOKEN_CTL);
            }
        }
    }
}

impl Agent for LayeredReceiver {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                net.monitors.started(self.mon, net.now());
                self.ctl.handle_announcement(net.now(), &self.info);
                let next = self.next_sam(net.now());
                net.set_timer(me, next, TOKEN_SAM);
                self.drain(net, me);
            }
            Command::Stop => {
                self.running = false;
                self.logical = 0;
                self.leave_all(net, me);
                net.monitors.level(self.mon, net.now(), 0);
            }
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        let Body::Layer {
            layer,
            seq,
            bunch_pos,
            bunch_len,
        } = pkt.body
        else {
            return;
        };
        let k = layer as usize;
        // The host has left this group (the router may still forward it during the prune
        // latency): the socket no longer delivers it.
        if !self.running || !self.held.get(k).copied().unwrap_or(false) {
            return;
        }
        let now = net.now();
        // Dynamic kinds: the logical layer this channel carries in the packet's slot.
        let send_us = pkt.sent_at.as_micros();
        let logical = if self.layering.dynamic() {
            let owd = now.0.saturating_sub(pkt.sent_at.0);
            self.min_owd = Some(self.min_owd.map_or(owd, |m| m.min(owd)));
            self.slot = self.slot.max(self.layering.slot_at(send_us));
            match self.layering.logical_of(k, send_us) {
                Some(j) => j,
                None => return, // a quiescent channel carries nothing; never sent
            }
        } else {
            layer
        };
        if let Some(e) = self.expected[k] {
            if seq > e {
                net.monitors.lost(self.mon, now, seq - e);
            }
            if seq >= e {
                self.expected[k] = Some(seq + 1);
            }
        } else {
            self.expected[k] = Some(seq + 1);
        }
        net.monitors.packet(self.mon, now, pkt.size);
        self.ctl.handle_packet(
            now,
            &PacketArrival {
                layer: logical,
                seq,
                bunch_pos,
                bunch_len,
                size: pkt.size,
                send_time_us: pkt.sent_at.as_micros(),
                recv_time: now,
            },
        );
        self.drain(net, me);
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if !self.running {
            return;
        }
        let now = net.now();
        match token {
            TOKEN_SAM => {
                self.info.announce_seq = self.info.announce_seq.wrapping_add(1);
                self.ctl.handle_announcement(now, &self.info);
                let next = self.next_sam(now);
                net.set_timer(me, next, TOKEN_SAM);
            }
            _ => {
                if self.armed.is_some_and(|a| a <= now) {
                    self.armed = None;
                }
                if self.ctl.poll_timeout().is_some_and(|(at, _)| at <= now) {
                    if let Some(owd) = self.min_owd {
                        // No packet of the new slot yet: follow the sender's grid.
                        let send = Time(now.0.saturating_sub(owd));
                        self.slot = self.slot.max(self.layering.slot_at(send.as_micros()));
                    }
                    self.ctl.handle_timeout(now);
                }
            }
        }
        self.drain(net, me);
    }

    fn finish(&mut self, net: &mut Net, _me: AgentId) {
        let lvl = self.level();
        net.monitors.level(self.mon, net.now(), lvl);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session(n: usize, base_kbps: u64) -> SessionInfo {
        let mut s = SessionInfo::equal_layers(n, 1, std::net::Ipv4Addr::new(239, 9, 0, 0), 5000);
        for l in &mut s.layers {
            l.rate_bps = base_kbps * 1000;
        }
        s.packet_size = 500;
        s
    }

    /// For every slot and level, the groups the host holds carry exactly logical layers
    /// `0..level` (each once), which is what the receive path hands to the controller.
    fn check_map(lay: &Layering, layers: u8, slot_us: u64) {
        for slot in 0..200u64 {
            let t = slot * slot_us + slot_us / 2;
            for level in 0..=layers {
                let held = lay.groups_for_level(level, slot);
                let mut got: Vec<u8> = held
                    .iter()
                    .map(|&g| lay.logical_of(g, t).expect("held group is quiescent"))
                    .collect();
                got.sort_unstable();
                let want: Vec<u8> = (0..level).collect();
                assert_eq!(got, want, "slot {slot} level {level} groups {held:?}");
            }
        }
    }

    fn sender(info: SessionInfo) -> LayeredSender {
        let groups = (0..info.layers.len()).collect();
        LayeredSender::new(0, 0, groups, info, 0.0).expect("valid session")
    }

    #[test]
    fn burst_jitter_gaps_stay_within_the_band_and_keep_the_mean_interval() {
        // 20 kbit/s layers of 500-B pairs: I = 0.4 s. ns-2 `random_ 1` draws every gap in
        // I·[0.5, 1.5] with mean I; the same seed gives the same gaps.
        let mk = |seed| {
            sender(session(3, 20))
                .with_burst_jitter(0.5, netmodel::rng::Rng::new(seed))
                .expect("jitter 0.5 is valid")
        };
        let (mut a, mut b) = (mk(7), mk(7));
        let i = a.bunch_interval(1);
        assert!((i - 0.4).abs() < 1e-12, "interval {i}");
        let n = 20_000;
        let mut sum = 0.0;
        let (mut lo, mut hi) = (f64::MAX, 0.0f64);
        for _ in 0..n {
            let g = a.jittered_gap(1).as_secs_f64();
            assert_eq!(g, b.jittered_gap(1).as_secs_f64(), "same seed, same gaps");
            sum += g;
            lo = lo.min(g);
            hi = hi.max(g);
        }
        let mean = sum / n as f64;
        assert!((mean / i - 1.0).abs() < 0.01, "mean gap {mean} vs {i}");
        assert!(
            lo >= 0.5 * i - 1e-9 && hi <= 1.5 * i + 1e-9,
            "gaps {lo}..{hi}"
        );
        // The gaps really vary (not the deterministic schedule).
        assert!(lo < 0.55 * i && hi > 1.45 * i, "gaps {lo}..{hi}");
        // Without jitter the gap is the interval itself.
        let mut d = sender(session(3, 20));
        assert_eq!(d.jittered_gap(0).as_secs_f64(), 0.4);
    }

    #[test]
    fn burst_jitter_is_rejected_outside_0_1_and_for_packet_paced_kinds() {
        let rng = || netmodel::rng::Rng::new(1);
        assert!(sender(session(3, 20))
            .with_burst_jitter(1.0, rng())
            .is_err());
        assert!(sender(session(3, 20))
            .with_burst_jitter(-0.1, rng())
            .is_err());
        assert!(sender(session(3, 20))
            .with_burst_jitter(f64::NAN, rng())
            .is_err());
        let info = session(4, 20);
        let lay = Layering::for_protocol("rlc", &info);
        let groups = (0..lay.groups(4)).collect();
        let rlc = LayeredSender::new(0, 0, groups, info, 0.0)
            .and_then(|s| s.with_layering(lay))
            .expect("rlc sender");
        assert!(rlc.with_burst_jitter(0.5, rng()).is_err());
    }

    #[test]
    fn flid_host_holds_exactly_the_channels_of_its_logical_layers() {
        let info = session(10, 20);
        let lay = Layering::for_protocol("flid", &info);
        assert_eq!(lay.groups(10), 1 + 9 + 4);
        check_map(&lay, 10, 500_000);
    }

    #[test]
    fn webrc_host_holds_exactly_the_waves_of_its_logical_layers() {
        let info = session(8, 16);
        let lay = Layering::for_protocol("webrc", &info);
        assert_eq!(lay.groups(8), 1 + 7 + 30);
        check_map(&lay, 8, 10_000_000);
        // The wave law: within a slot logical layer j decays by P; at the slot end layer j
        // hands over to j − 1 of the next slot at the same rate (continuity per channel).
        if let Layering::Webrc(w) = &lay {
            let end = 10_000_000 - 1;
            let r_end = w.rate_pps(3, end);
            let r_next = w.rate_pps(2, end + 1);
            assert!(
                (r_end - r_next).abs() / r_next < 1e-5,
                "{r_end} vs {r_next}"
            );
        }
    }

    #[test]
    fn static_kinds_map_group_k_to_layer_k() {
        let info = session(5, 32);
        for p in ["rlc", "era", "plm"] {
            let lay = Layering::for_protocol(p, &info);
            assert_eq!(lay.groups(5), 5);
            for g in 0..5 {
                assert_eq!(lay.logical_of(g, 123_456), Some(g as u8));
            }
        }
    }
}
