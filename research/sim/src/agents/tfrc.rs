//! TFRC (RFC 5348) and PCC in the simulator: one sender agent and one receiver agent serve both
//! flow kinds of a scenario (`type: tfrc` for the spec's TFRC experiments S8, S9, and
//! `type: tfrc-pcc` for S10–S14).
//!
//! The sender is the protocol crate's sans-IO `TfrcSender`, paced packet by packet at its
//! allowed rate. The data fields ride in the packet (`Body::Tfrc`): they are fixed-size and
//! sent at full rate, so carrying them typed costs no allocation, and their wire encoding is
//! covered by the wire module's own tests. The receiver's feedback travels back as a unicast
//! packet carrying its real wire encoding (`TfrcFeedback::to_bytes`, parsed by the sender),
//! as the TFMCC agents do; a report that does not parse is counted and ignored.
//!
//! Options of the sender ([`TfrcSenderOptions`]):
//! - PCC mode (dissertation ch. 4): the sender's rate is replaced by the application rate `R_NA`
//!   while `baselines::pcc::Pcc` says "on", and nothing while it says "off". `R_TCP` is the
//!   TFRC sender's equation rate from the receiver's loss event rate and the measured RTT
//!   (`x_calc`); the spec puts that logic at the receiver, which only matters for multicast, so
//!   here the sender side runs it on each feedback packet. Before the first loss `R_TCP` is
//!   unbounded (capped at 10^12 B/s) and the flow stays on.
//! - Scripted periodic loss (`[[t, k], ...]`): from time t on, every k-th packet the sender
//!   emits is dropped before the wire (k = 0: none), the loss pattern of the dissertation's
//!   Fig. 3.4 and of S9; it takes a sequence number and is never delivered.
//! - Monitors: a feedback log (time, X, p, RTT on each report, `Monitor::tfrc_log`) and a count
//!   of the bytes sent (a PCC flow's on-time share is its sending rate / `R_NA`).

use crate::engine::{Agent, AgentId, Body, Command, Dest, Net, NodeId, Packet};
use crate::metrics::MonId;
use baselines::pcc::{Pcc, PccConfig};
use baselines::tfrc::{TfrcReceiver, TfrcReceiverConfig, TfrcSender, TfrcSenderConfig};
use congestion::wire::tfrc::TfrcFeedback;
use congestion::Time;

/// IP + UDP header bytes added to a feedback payload on the wire.
const FEEDBACK_OVERHEAD: u32 = 28;
const TOKEN_SEND: u64 = 0;
const TOKEN_TIMER: u64 = 1;
/// Stand-in for "no loss yet" (an infinite equation rate), bytes/s.
const R_TCP_CAP: f64 = 1e12;

/// PCC mode of a TFRC sender.
struct PccMode {
    ctl: Pcc,
    /// Application rate `R_NA`, bytes/s.
    r_na: f64,
}

/// What a sender does besides plain TFRC; the default is plain TFRC with no monitor.
#[derive(Default)]
pub struct TfrcSenderOptions {
    /// PCC: the application rate `R_NA` (bytes/s) and the controller's configuration.
    pub pcc: Option<(f64, PccConfig)>,
    /// `(from time s, drop every k-th packet; 0 = none)`, sorted by time.
    pub periodic_loss: Vec<(f64, u64)>,
    /// Monitor whose `tfrc_log` gets one entry per feedback report.
    pub log: Option<MonId>,
    /// Monitor that counts the bytes the sender puts on the wire.
    pub sent: Option<MonId>,
}

/// The TFRC (or PCC) sender.
pub struct TfrcSenderAgent {
    node: NodeId,
    dst: Dest,
    flow: u32,
    size: u32,
    ctl: TfrcSender,
    pcc: Option<PccMode>,
    periodic: Vec<(f64, u64)>,
    since_drop: u64,
    log: Option<MonId>,
    sent: Option<MonId>,
    running: bool,
    epoch: u64,
    armed: Option<Time>,
    /// Feedback packets received, and those rejected as malformed.
    pub feedbacks: u64,
    pub bad_feedbacks: u64,
    /// Packets dropped by the loss script.
    pub scripted_drops: u64,
}

impl TfrcSenderAgent {
    /// A sender on `node` to the receiver agent at `dst`, sending `size`-byte packets.
    pub fn new(node: NodeId, dst: Dest, flow: u32, size: u32, opts: TfrcSenderOptions) -> Self {
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
            pcc: opts.pcc.map(|(r_na, cfg)| PccMode {
                ctl: Pcc::new(cfg),
                r_na,
            }),
            periodic: opts.periodic_loss,
            since_drop: 0,
            log: opts.log,
            sent: opts.sent,
            running: false,
            epoch: 0,
            armed: None,
            feedbacks: 0,
            bad_feedbacks: 0,
            scripted_drops: 0,
        }
    }

    fn r_tcp(&self) -> f64 {
        self.ctl.stats().x_calc_bps.min(R_TCP_CAP)
    }

    /// The loss script's k at time `t` (0: no scripted loss).
    fn every(&self, t: f64) -> u64 {
        self.periodic
            .iter()
            .rev()
            .find(|p| t >= p.0)
            .map_or(0, |p| p.1)
    }

    /// Whether the packet about to be sent is one the loss script drops.
    fn scripted_drop(&mut self, now: Time) -> bool {
        let k = self.every(now.as_secs_f64());
        self.since_drop += 1;
        if k > 0 && self.since_drop >= k {
            self.since_drop = 0;
            self.scripted_drops += 1;
            true
        } else {
            false
        }
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

    fn send_one(&mut self, net: &mut Net, me: AgentId, now: Time) {
        let (send, rate) = match &self.pcc {
            Some(p) => (p.ctl.is_on(), p.r_na),
            None => (true, self.ctl.rate_bytes()),
        };
        if send {
            let f = self.ctl.data_header(now);
            if !self.scripted_drop(now) {
                net.send(Packet {
                    src: self.node,
                    src_agent: me,
                    dst: self.dst,
                    size: self.size,
                    flow: self.flow,
                    sent_at: now,
                    body: Body::Tfrc(f),
                });
                if let Some(m) = self.sent {
                    net.monitors.packet(m, now, self.size);
                }
            }
        }
        // While a PCC flow is off it keeps its pacing grid (cheap) and sends nothing.
        let gap = (f64::from(self.size) / rate.max(1e-3) * 1e9).min(64e9) as u64;
        net.set_timer(me, Time(now.0 + gap.max(1)), TOKEN_SEND | (self.epoch << 1));
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
                let r_tcp = self.r_tcp();
                if let Some(p) = &mut self.pcc {
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
                if let Some(m) = self.log {
                    let rtt = self.ctl.stats().rtt_s.unwrap_or(f64::NAN);
                    net.monitors.list[m].tfrc_log.push((
                        now.as_secs_f64(),
                        self.ctl.rate_bytes(),
                        fb.p(),
                        rtt,
                    ));
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
            self.send_one(net, me, now);
        }
        self.rearm(net, me);
    }
}

/// The TFRC receiver (also PCC's): loss events, receive rate, feedback once per RTT; its
/// monitor counts goodput and the packets missing from the sequence.
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
    /// A receiver on `node` reporting to the sender agent at `sender`.
    pub fn new(
        node: NodeId,
        sender: (NodeId, AgentId),
        flow: u32,
        mon: MonId,
        cfg: TfrcReceiverConfig,
    ) -> Self {
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
