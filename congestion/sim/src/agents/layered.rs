//! The layered session: a sender pacing constant-rate layers as back-to-back bunches onto one
//! multicast group per layer, and a receiver hosting any [`LayeredController`] unchanged.

use crate::engine::{Agent, AgentId, Body, Command, Dest, GroupId, Net, NodeId, Packet};
use crate::metrics::MonId;
use congestion::{Action, LayeredController, PacketArrival, SessionInfo, Time};
use qdisc::rng::Rng;

/// Sends every layer of a session, always (the routers prune what nobody wants).
///
/// Each layer `k` sends a bunch of `bunch_len` equal-size packets every
/// `bunch_len · size · 8 / rate_k` seconds, all bunch packets at the same instant so the access
/// link serialises them back to back. Layers start at a random phase within their period (PLM's
/// "randomised pair send times"), drawn from the sender's own seeded generator.
pub struct LayeredSender {
    node: NodeId,
    flow: u32,
    groups: Vec<GroupId>,
    info: SessionInfo,
    seq: Vec<u64>,
    period_ns: Vec<u64>,
    epoch: u64,
    running: bool,
    rng: Rng,
    /// Packets sent, for tests.
    pub sent: u64,
}

impl LayeredSender {
    /// A sender on `node` for the session `info`, layer `k` on `groups[k]`.
    pub fn new(node: NodeId, flow: u32, groups: Vec<GroupId>, info: SessionInfo, rng: Rng) -> Self {
        let size = u64::from(info.packet_size.max(1));
        let bunch = u64::from(info.bunch_len.max(1));
        let period_ns = info
            .layers
            .iter()
            .map(|l| (bunch * size * 8 * 1_000_000_000) / l.rate_bps.max(1))
            .collect();
        LayeredSender {
            node,
            flow,
            seq: vec![0; groups.len()],
            groups,
            info,
            period_ns,
            epoch: 0,
            running: false,
            rng,
            sent: 0,
        }
    }
}

impl Agent for LayeredSender {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                self.epoch += 1;
                for k in 0..self.groups.len() {
                    let phase = (self.rng.f64() * self.period_ns[k] as f64) as u64;
                    net.set_timer(me, Time(net.now().0 + phase), (self.epoch << 8) | k as u64);
                }
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
        if !self.running || token >> 8 != self.epoch {
            return;
        }
        let k = (token & 0xff) as usize;
        let Some(&g) = self.groups.get(k) else { return };
        let n = self.info.bunch_len.max(1);
        for pos in 0..n {
            net.send(Packet {
                src: self.node,
                src_agent: me,
                dst: Dest::Group(g),
                size: u32::from(self.info.packet_size),
                flow: self.flow,
                sent_at: net.now(),
                body: Body::Layer {
                    layer: k as u8,
                    seq: self.seq[k],
                    bunch_pos: pos,
                    bunch_len: n,
                },
            });
            self.seq[k] += 1;
            self.sent += 1;
        }
        net.set_timer(me, Time(net.now().0 + self.period_ns[k]), token);
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
    /// Decisions the controller logged, and feedback messages it asked to send (ignored: the
    /// layered protocols here send none; counted to check AC-13).
    pub decisions: u64,
    pub feedback: u64,
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
            decisions: 0,
            feedback: 0,
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
        while let Some(a) = self.ctl.poll_action() {
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
                layer,
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
