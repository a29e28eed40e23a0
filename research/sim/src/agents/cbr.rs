//! Constant-bit-rate and Pareto on/off datagram sources, and the datagram sink.

use crate::engine::{Agent, AgentId, Body, Command, Dest, Net, NodeId, Packet};
use crate::metrics::MonId;
use congestion::Time;
use netmodel::rng::Rng;

/// On/off behaviour: exponential-free heavy-tailed bursts (`plm.md` §6.3 uses Pareto objects;
/// this is the classic ns-2 `Application/Traffic/Pareto` source).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct OnOff {
    /// Mean on (burst) time, s.
    pub mean_on_s: f64,
    /// Mean off (idle) time, s.
    pub mean_off_s: f64,
    /// Pareto shape (> 1).
    pub shape: f64,
}

/// A datagram source: CBR at `rate_bps`, or Pareto on/off sending at `rate_bps` while on.
pub struct DatagramSource {
    node: NodeId,
    dst: Dest,
    flow: u32,
    size: u32,
    rate_bps: u64,
    onoff: Option<OnOff>,
    on_until: Time,
    seq: u64,
    epoch: u64,
    running: bool,
    rng: Rng,
}

impl DatagramSource {
    /// A source on `node` sending `size`-byte datagrams to `dst`.
    pub fn new(
        node: NodeId,
        dst: Dest,
        flow: u32,
        size: u32,
        rate_bps: u64,
        onoff: Option<OnOff>,
        rng: Rng,
    ) -> Self {
        DatagramSource {
            node,
            dst,
            flow,
            size: size.max(1),
            rate_bps,
            onoff,
            on_until: Time::NEVER,
            seq: 0,
            epoch: 0,
            running: false,
            rng,
        }
    }

    fn gap_ns(&self) -> u64 {
        (u64::from(self.size) * 8 * 1_000_000_000) / self.rate_bps.max(1)
    }

    fn arm(&mut self, net: &mut Net, me: AgentId, at: Time) {
        net.set_timer(me, at, self.epoch);
    }
}

impl Agent for DatagramSource {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                self.epoch += 1;
                if let Some(o) = self.onoff {
                    let on = self.rng.pareto(o.mean_on_s, o.shape);
                    self.on_until = net.now() + std::time::Duration::from_secs_f64(on);
                }
                self.arm(net, me, net.now());
            }
            Command::Stop => {
                self.running = false;
                self.epoch += 1;
            }
            Command::SetRate(r) => {
                self.rate_bps = r;
                if self.running {
                    // Re-pace from now at the new rate.
                    self.epoch += 1;
                    self.arm(net, me, net.now());
                }
            }
            Command::Start => {}
        }
    }

    fn on_packet(&mut self, _net: &mut Net, _me: AgentId, _pkt: &Packet) {}

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if !self.running || token != self.epoch || self.rate_bps == 0 {
            return;
        }
        let now = net.now();
        if let Some(o) = self.onoff {
            if now >= self.on_until {
                let off = self.rng.pareto(o.mean_off_s, o.shape);
                let on = self.rng.pareto(o.mean_on_s, o.shape);
                let start = now + std::time::Duration::from_secs_f64(off);
                self.on_until = start + std::time::Duration::from_secs_f64(on);
                self.arm(net, me, start);
                return;
            }
        }
        net.send(Packet {
            src: self.node,
            src_agent: me,
            dst: self.dst,
            size: self.size,
            flow: self.flow,
            sent_at: now,
            body: Body::Datagram { seq: self.seq },
        });
        self.seq += 1;
        self.arm(net, me, Time(now.0 + self.gap_ns()));
    }
}

/// Counts datagrams (and sequence gaps) into a monitor.
pub struct DatagramSink {
    mon: MonId,
    expected: u64,
}

impl DatagramSink {
    /// A sink recording into `mon`.
    pub fn new(mon: MonId) -> Self {
        DatagramSink { mon, expected: 0 }
    }
}

impl Agent for DatagramSink {
    fn command(&mut self, net: &mut Net, _me: AgentId, cmd: Command) {
        if cmd == Command::Start {
            net.monitors.started(self.mon, net.now());
        }
    }

    fn on_packet(&mut self, net: &mut Net, _me: AgentId, pkt: &Packet) {
        if let Body::Datagram { seq } = pkt.body {
            let now = net.now();
            if seq > self.expected {
                net.monitors.lost(self.mon, now, seq - self.expected);
            }
            self.expected = self.expected.max(seq + 1);
            net.monitors.packet(self.mon, now, pkt.size);
        }
    }

    fn on_timer(&mut self, _net: &mut Net, _me: AgentId, _token: u64) {}
}
