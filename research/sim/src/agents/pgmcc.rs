//! PGMCC (Pragmatic General Multicast Congestion Control, Rizzo 2000), the reference of the
//! thesis' S2 (`active-networks.md` §1.7; the thesis copied Seada & Helmy's numbers, we
//! simulate it). End to end: receivers NACK missing packets straight to the sender (no PGM
//! network elements), each NACK carrying the receiver's id, highest sequence seen and smoothed
//! loss rate; the sender picks the **acker** by the throughput equation and runs a TCP-like
//! token window on the acker's per-packet ACKs (highest sequence plus a 32-bit bitmap).
//!
//! Rules ([E] thesis, [X] Rizzo / draft-ietf-rmt-bb-pgmcc, [U] ours; docs/protocols/pgmcc.md):
//! * throughput of receiver i: `T(i) ∝ 1/(RTT_i·√p_i)`, RTT measured in packets at the sender
//!   (sequence sent now − highest sequence the receiver reported) [E];
//! * switch acker j → i when `T(i) < c·T(j)`, [`ACKER_C`] = 0.75 [X: "2/3 to 3/4"];
//! * window W and tokens T: each send consumes a token; each ACK adds `1 + 1/W` tokens and
//!   `W += 1/W` (slow start until the first loss: +1 and 2 tokens [U]); a loss seen in the
//!   bitmap halves W (tokens reduced by the same amount) and further losses are ignored until
//!   the packets sent at that moment are acknowledged (≈ 1 RTT) [X];
//! * no ACK for [`STALL_S`] (or 4·SRTT if larger): W = T = 1 [X stall timeout; its length is
//!   [U]]; the loss-rate filter gain is [`LOSS_GAIN`] [U];
//! * repairs are multicast by the sender on its repair group and, as in PGM, consume tokens.

use crate::agents::aer::{capsule, secs, AerConfig, AerReceiver, Capsule, RepairGate, SessionSpec};
use crate::engine::{Agent, AgentId, Body, Command, Dest, GroupId, Net, NodeId, Packet, Sim};
use crate::metrics::MonKind;
use congestion::Time;
use netmodel::rng::Rng;
use std::collections::{BTreeMap, VecDeque};

/// Acker switch threshold c ([X]).
pub const ACKER_C: f64 = 0.75;
/// Gain of the receivers' per-packet loss-indicator filter ([U]: about 1/64, a memory of a
/// few loss events at the loss rates of S2).
pub const LOSS_GAIN: f64 = 1.0 / 64.0;
/// Shortest stall timeout, seconds ([U]).
pub const STALL_S: f64 = 2.0;

/// What the sender knows about a receiver from its last report.
#[derive(Clone, Copy, Debug)]
struct Report {
    high: u64,
    loss: f64,
}

/// The PGMCC sender.
pub struct PgmSender {
    node: NodeId,
    flow: u32,
    group: GroupId,
    repair_group: GroupId,
    cfg: AerConfig,
    w: f64,
    tokens: f64,
    slow_start: bool,
    acker: Option<u32>,
    reports: BTreeMap<u32, Report>,
    snd_nxt: u64,
    /// Lowest sequence not yet judged received or lost from the acker's ACKs.
    next_check: u64,
    /// Losses below this are ignored (one reaction per window).
    recover: u64,
    srtt: Option<f64>,
    last_ack: Time,
    epoch: u64,
    running: bool,
    repairs: VecDeque<u64>,
    repairs_sent: RepairGate,
    /// Data packets, repairs, acker switches, stalls, halvings.
    pub sent: u64,
    pub repaired: u64,
    pub switches: u64,
    pub stalls: u64,
    pub halvings: u64,
}

const T_STALL: u64 = 1;

impl PgmSender {
    pub fn new(
        node: NodeId,
        flow: u32,
        group: GroupId,
        repair_group: GroupId,
        cfg: AerConfig,
    ) -> Self {
        PgmSender {
            node,
            flow,
            group,
            repair_group,
            cfg,
            w: 1.0,
            tokens: 1.0,
            slow_start: true,
            acker: None,
            reports: BTreeMap::new(),
            snd_nxt: 0,
            next_check: 0,
            recover: 0,
            srtt: None,
            last_ack: Time::ZERO,
            epoch: 0,
            running: false,
            repairs: VecDeque::new(),
            repairs_sent: RepairGate::default(),
            sent: 0,
            repaired: 0,
            switches: 0,
            stalls: 0,
            halvings: 0,
        }
    }

    /// Relative throughput of a receiver by Eq. 1.5 with RTT in packets: `1/(RTT·√p)`
    /// (infinite while it has seen no loss).
    fn throughput(&self, r: &Report) -> f64 {
        let rtt = (self.snd_nxt.saturating_sub(r.high)).max(1) as f64;
        if r.loss <= 0.0 {
            f64::INFINITY
        } else {
            1.0 / (rtt * r.loss.sqrt())
        }
    }

    fn stall_timeout(&self) -> f64 {
        self.srtt.map_or(STALL_S, |s| (4.0 * s).max(STALL_S))
    }

    fn arm(&mut self, net: &mut Net, me: AgentId) {
        self.epoch += 1;
        let at = net.now() + secs(self.stall_timeout());
        net.set_timer(me, at, T_STALL + 16 * self.epoch);
    }

    fn pump(&mut self, net: &mut Net, me: AgentId) {
        let now = net.now();
        while self.tokens >= 1.0 {
            self.tokens -= 1.0;
            let (dst, c) = if let Some(seq) = self.repairs.pop_front() {
                self.repaired += 1;
                if let Some(s) = net.flow_retx.get_mut(self.flow as usize) {
                    *s += 1;
                }
                (self.repair_group, Capsule::Repair { seq })
            } else {
                let c = Capsule::Data {
                    seq: self.snd_nxt,
                    acker: self.acker.unwrap_or(0),
                };
                self.snd_nxt += 1;
                self.sent += 1;
                (self.group, c)
            };
            net.send(capsule(
                (self.node, me),
                Dest::Group(dst),
                self.flow,
                self.cfg.packet_size,
                c,
                now,
            ));
            if let Some(s) = net.flow_sent.get_mut(self.flow as usize) {
                *s += 1;
            }
        }
    }

    /// A report (NACK or ACK) from receiver `rcv`: maybe a new acker.
    fn report(&mut self, rcv: u32, r: Report) {
        self.reports.insert(rcv, r);
        match self.acker {
            None => {
                self.acker = Some(rcv);
                self.switches += 1;
            }
            Some(j) if j != rcv => {
                let tj = self
                    .reports
                    .get(&j)
                    .map_or(f64::INFINITY, |x| self.throughput(x));
                if self.throughput(&r) < ACKER_C * tj {
                    // The acker moves; the window loop carries on (no reset).
                    self.acker = Some(rcv);
                    self.switches += 1;
                    self.next_check = self.snd_nxt;
                    self.recover = self.snd_nxt;
                }
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn on_ack(
        &mut self,
        net: &mut Net,
        me: AgentId,
        rcv: u32,
        high: u64,
        bitmap: u32,
        echo: Time,
        loss: f64,
    ) {
        let now = net.now();
        self.report(rcv, Report { high, loss });
        if self.acker != Some(rcv) {
            return;
        }
        let r = now.0.saturating_sub(echo.0) as f64 * 1e-9;
        self.srtt = Some(self.srtt.map_or(r, |s| 0.875 * s + 0.125 * r));
        self.last_ack = now;
        // Packets between the last judged one and `high` that the bitmap shows missing.
        let mut lost = false;
        if high >= self.next_check {
            lost = (self.next_check..high).any(|seq| {
                let i = high - 1 - seq;
                i < 32 && bitmap & (1 << i) == 0
            });
            self.next_check = high + 1;
        }
        if lost && high >= self.recover {
            let before = self.w;
            self.w = (self.w / 2.0).max(1.0);
            self.tokens -= before - self.w;
            self.slow_start = false;
            self.halvings += 1;
            self.recover = self.snd_nxt;
        } else if self.slow_start {
            self.w += 1.0;
            self.tokens += 2.0;
        } else {
            self.w += 1.0 / self.w;
            self.tokens += 1.0 + 1.0 / self.w;
        }
        self.w = self.w.min(256.0);
        self.tokens = self.tokens.min(self.w);
        self.arm(net, me);
        self.pump(net, me);
    }

    fn on_nack(&mut self, net: &mut Net, me: AgentId, rcv: u32, seq: u64, high: u64, loss: f64) {
        let had = self.acker.is_some();
        self.report(rcv, Report { high, loss });
        let now = net.now();
        if !had && self.acker.is_some() {
            // The first acker: start the window loop now rather than at the next stall.
            self.next_check = self.snd_nxt;
            self.arm(net, me);
        }
        if seq >= self.snd_nxt {
            return;
        }
        if !self
            .repairs_sent
            .admit(seq, now, secs(self.srtt.unwrap_or(0.1)))
        {
            return;
        }
        self.repairs.push_back(seq);
        self.pump(net, me);
    }
}

impl Agent for PgmSender {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                self.last_ack = net.now();
                self.pump(net, me);
                self.arm(net, me);
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
            Capsule::PgmAck {
                rcv,
                high,
                bitmap,
                echo,
                loss,
            } => self.on_ack(net, me, rcv, high, bitmap, echo, f64::from(loss)),
            Capsule::PgmNack {
                rcv,
                seq,
                high,
                loss,
            } => self.on_nack(net, me, rcv, seq, high, f64::from(loss)),
            _ => {}
        }
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if !self.running || token != T_STALL + 16 * self.epoch {
            return;
        }
        // Stall: no ACK for the timeout. Restart from one packet.
        self.stalls += 1;
        self.w = 1.0;
        self.tokens = 1.0;
        self.next_check = self.snd_nxt;
        self.recover = self.snd_nxt;
        self.pump(net, me);
        self.arm(net, me);
    }
}

/// Adds a PGMCC session (sender, then the receivers; monitors `NAME/RECEIVER`); repair servers
/// in the spec are ignored (PGMCC here runs without network elements).
pub fn install(sim: &mut Sim, s: &SessionSpec) {
    let group = sim.net.add_group(s.source);
    let repair_group = sim.net.add_group(s.source);
    let s_id = sim.agents.len();
    sim.add_agent(
        s.source,
        Box::new(PgmSender::new(s.source, s.flow, group, repair_group, s.cfg)),
    );
    sim.net.schedule_command(s.start, s_id, Command::Start);
    if let Some(t) = s.stop {
        sim.net.schedule_command(t, s_id, Command::Stop);
    }
    for (k, (rname, node, start, stop)) in s.receivers.iter().enumerate() {
        let mon = sim.net.monitors.add(
            format!("{}/{rname}", s.name),
            s.name.to_string(),
            MonKind::Cbr,
            Vec::new(),
        );
        let rtt = crate::agents::aer::path_rtt(&sim.net, *node, s.source);
        let r = AerReceiver::new(
            *node,
            k as u32 + 1,
            s.flow,
            (group, repair_group),
            (s.source, s_id),
            (s.source, s_id),
            s.cfg,
            rtt,
            mon,
            Rng::derive(s.seed, 0x9600 + u64::from(s.flow) * 4096 + k as u64),
        )
        .pgmcc();
        let id = sim.add_agent(*node, Box::new(r));
        sim.net.schedule_command(*start, id, Command::Start);
        if let Some(t) = stop {
            sim.net.schedule_command(*t, id, Command::Stop);
        }
    }
}
