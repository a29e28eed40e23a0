//! TFRC and PCC in the simulator.
//!
//! A unicast TFRC flow is the protocol crate's sans-IO `TfrcSender` paced packet by packet at
//! its allowed rate, and a `TfrcReceiver` whose feedback travels back as a unicast packet
//! carrying the real wire encoding (`TfrcFeedback::to_bytes`, parsed by the sender), as the
//! TFMCC agents do. The data fields ride in the packet (`Body::Tfrc`).
//!
//! A PCC flow (`pcc:` on a `tfrc-pcc` flow, dissertation ch. 4) is the same pair with the sender's
//! rate replaced by the application rate `R_NA` while `congestion::pcc::Pcc` says "on", and
//! nothing while it says "off". `R_TCP` is the TFRC sender's equation rate from the receiver's
//! loss event rate and the measured RTT (`x_calc`); the spec puts that logic at the receiver,
//! which only matters for multicast, so here the sender side runs it on each feedback packet.
//! Before the first loss `R_TCP` is unbounded (capped at 10^12 B/s) and the flow stays on.

use crate::engine::{Agent, AgentId, Body, Command, Dest, Net, NodeId, Packet};
use crate::metrics::MonId;
use congestion::pcc::{Pcc, PccConfig};
use congestion::tfrc::{TfrcReceiver, TfrcReceiverConfig, TfrcSender, TfrcSenderConfig};
use congestion::wire::tfrc::TfrcFeedback;
use congestion::Time;

/// IP + UDP header bytes added to a feedback payload on the wire.
const FEEDBACK_OVERHEAD: u32 = 28;
const TOKEN_SEND: u64 = 0;
const TOKEN_TIMER: u64 = 1;
/// Stand-in for "no loss yet" (an infinite equation rate), bytes/s.
const R_TCP_CAP: f64 = 1e12;

/// PCC mode of a TFRC sender.
pub struct PccMode {
    pub ctl: Pcc,
    /// Application rate `R_NA`, bytes/s.
    pub r_na: f64,
}

/// The TFRC (or PCC) sender.
pub struct TfrcSenderAgent {
    node: NodeId,
    dst: Dest,
    flow: u32,
    size: u32,
    ctl: TfrcSender,
    pcc: Option<PccMode>,
    running: bool,
    epoch: u64,
    armed: Option<Time>,
    mon: MonId,
    /// Feedback packets received, and those rejected as malformed.
    pub feedbacks: u64,
    pub bad_feedbacks: u64,
}

impl TfrcSenderAgent {
    /// A sender on `node` to the receiver agent at `dst`; its sent bytes go to monitor `mon`.
    pub fn new(
        node: NodeId,
        dst: Dest,
        flow: u32,
        size: u32,
        pcc: Option<(f64, PccConfig)>,
        mon: MonId,
    ) -> Self {
        let size = size.max(1);
        TfrcSenderAgent {
            node,
            dst,
            flow,
            size,
            ctl: TfrcSender::new(TfrcSenderConfig {
                packet_size: size,
                ..TfrcSenderConfig::default()
            }),
            pcc: pcc.map(|(r_na, cfg)| PccMode {
                ctl: Pcc::new(cfg),
                r_na,
            }),
            running: false,
            epoch: 0,
            armed: None,
            mon,
            feedbacks: 0,
            bad_feedbacks: 0,
        }
    }

    fn r_tcp(&self) -> f64 {
        self.ctl.stats().x_calc_bps.min(R_TCP_CAP)
    }

    fn next_timeout(&self) -> Option<Time> {
        let a = self.ctl.poll_timeout();
        let b = self.pcc.as_ref().and_then(|p| p.ctl.poll_timeout());
        match (a, b) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        }
    }

    fn rearm(&mut self, net: &mut Net, me: AgentId) {
        if let Some(at) = self.next_timeout() {
            if at == Time::NEVER {
                return;
            }
            // Never at or before now: a due deadline was just handled.
            let at = at.max(Time(net.now().0 + 1));
            if self.armed.is_none_or(|a| at < a) {
                self.armed = Some(at);
                net.set_timer(me, at, TOKEN_TIMER | (self.epoch << 1));
            }
        }
    }
}

impl Agent for TfrcSenderAgent {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                self.epoch += 1;
                self.armed = None;
                let now = net.now();
                if let Some(p) = &mut self.pcc {
                    let r_tcp = self.ctl.stats().x_calc_bps.min(R_TCP_CAP);
                    p.ctl.update(now, p.r_na, r_tcp);
                }
                net.set_timer(me, now, TOKEN_SEND | (self.epoch << 1));
                self.rearm(net, me);
            }
            Command::Stop => {
                self.running = false;
                self.epoch += 1;
            }
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        let Body::Blob { idx } = pkt.body else { return };
        let now = net.now();
        self.feedbacks += 1;
        match net.blobs.get(idx as usize).map(|b| TfrcFeedback::parse(b)) {
            Some(Ok(fb)) => {
                self.ctl.handle_feedback(now, &fb);
                let r_tcp = self.r_tcp();
                if let Some(p) = &mut self.pcc {
                    p.ctl.update(now, p.r_na, r_tcp);
                }
            }
            _ => self.bad_feedbacks += 1,
        }
        if self.running {
            self.rearm(net, me);
        }
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if !self.running || token >> 1 != self.epoch {
            return;
        }
        let now = net.now();
        if token & 1 == TOKEN_TIMER {
            if self.armed.is_some_and(|a| a <= now) {
                self.armed = None;
            }
            if self.ctl.poll_timeout().is_some_and(|t| t <= now) {
                self.ctl.handle_timeout(now);
            }
            if let Some(p) = &mut self.pcc {
                if p.ctl.poll_timeout().is_some_and(|t| t <= now) {
                    p.ctl.handle_timeout(now);
                }
            }
        } else {
            let (send, rate) = match &self.pcc {
                Some(p) => (p.ctl.is_on(), p.r_na),
                None => (true, self.ctl.rate_bytes()),
            };
            if send {
                let f = self.ctl.data_header(now);
                net.send(Packet {
                    src: self.node,
                    src_agent: me,
                    dst: self.dst,
                    size: self.size,
                    flow: self.flow,
                    sent_at: now,
                    body: Body::Tfrc(f),
                });
                net.monitors.packet(self.mon, now, self.size);
            }
            // While a PCC flow is off it keeps its pacing grid (cheap) and sends nothing.
            let gap = (f64::from(self.size) / rate.max(1e-3) * 1e9).min(64e9) as u64;
            net.set_timer(me, Time(now.0 + gap.max(1)), TOKEN_SEND | (self.epoch << 1));
        }
        self.rearm(net, me);
    }
}

/// The TFRC receiver (also PCC's): loss events, receive rate, feedback once per RTT.
pub struct TfrcReceiverAgent {
    node: NodeId,
    sender: (NodeId, AgentId),
    flow: u32,
    mon: MonId,
    ctl: TfrcReceiver,
    expected: Option<u32>,
    armed: Option<Time>,
    running: bool,
}

impl TfrcReceiverAgent {
    /// A receiver on `node` reporting to the sender agent at `sender`; `ali_n` closed loss
    /// intervals in the average (8 in the dissertation and the RFCs).
    pub fn new(
        node: NodeId,
        sender: (NodeId, AgentId),
        flow: u32,
        mon: MonId,
        ali_n: usize,
    ) -> Self {
        let mut cfg = TfrcReceiverConfig::default();
        cfg.ali.n = ali_n.max(1);
        TfrcReceiverAgent {
            node,
            sender,
            flow,
            mon,
            ctl: TfrcReceiver::new(cfg),
            expected: None,
            armed: None,
            running: false,
        }
    }

    fn drain(&mut self, net: &mut Net, me: AgentId) {
        while let Some(fb) = self.ctl.poll_feedback() {
            let bytes = fb.to_bytes();
            let size = bytes.len() as u32 + FEEDBACK_OVERHEAD;
            net.send_blob((self.node, me), self.sender, self.flow, size, bytes);
        }
        if let Some(at) = self.ctl.poll_timeout() {
            if at != Time::NEVER {
                let at = at.max(Time(net.now().0 + 1));
                if self.armed.is_none_or(|a| at < a) {
                    self.armed = Some(at);
                    net.set_timer(me, at, 0);
                }
            }
        }
    }
}

impl Agent for TfrcReceiverAgent {
    fn command(&mut self, net: &mut Net, _me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                net.monitors.started(self.mon, net.now());
            }
            Command::Stop => self.running = false,
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        let Body::Tfrc(f) = pkt.body else { return };
        if !self.running {
            return;
        }
        let now = net.now();
        if let Some(e) = self.expected {
            let gap = f.seq.wrapping_sub(e);
            if gap > 0 && gap < 1 << 31 {
                net.monitors.lost(self.mon, now, u64::from(gap));
            }
        }
        self.expected = Some(f.seq.wrapping_add(1));
        net.monitors.packet(self.mon, now, pkt.size);
        self.ctl.handle_data(now, &f, pkt.size);
        self.drain(net, me);
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, _token: u64) {
        if !self.running {
            return;
        }
        let now = net.now();
        if self.armed.is_some_and(|a| a <= now) {
            self.armed = None;
        }
        if self.ctl.poll_timeout().is_some_and(|t| t <= now) {
            self.ctl.handle_timeout(now);
        }
        self.drain(net, me);
    }
}
