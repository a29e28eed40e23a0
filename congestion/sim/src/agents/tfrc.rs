//! TFRC (RFC 5348) in the simulator: the protocol crate's sans-IO `TfrcSender` paced packet by
//! packet at its allowed rate toward one `TfrcReceiver`, both exchanging their real wire
//! encodings (data fields and feedback travel as byte blobs), for the spec's TFRC experiments
//! (`tfrc-tfmcc-pcc.md` S8, S9).
//!
//! Scripted periodic loss (`periodic_loss: [[t, k], ...]`): from time t on, every k-th packet
//! the sender emits is dropped before the wire (k = 0: none), which is the loss pattern of the
//! dissertation's Fig. 3.4 and of S9; it is counted as sent and never delivered.

use crate::engine::{Agent, AgentId, Body, Command, Net, NodeId, Packet};
use crate::metrics::MonId;
use congestion::tfrc::{TfrcReceiver, TfrcReceiverConfig, TfrcSender, TfrcSenderConfig};
use congestion::wire::tfrc::{TfrcDataFields, TfrcFeedback};
use congestion::Time;

const TOKEN_SEND: u64 = 0;
const TOKEN_TIMER: u64 = 1;
/// IP + UDP header bytes added to a feedback payload on the wire.
const FEEDBACK_OVERHEAD: u32 = 28;

/// The TFRC sender.
pub struct TfrcSenderAgent {
    node: NodeId,
    flow: u32,
    dest: (NodeId, AgentId),
    size: u32,
    ctl: TfrcSender,
    running: bool,
    epoch: u64,
    armed: Option<Time>,
    mon: MonId,
    /// (from time s, drop every k-th packet; 0 = none), sorted by time.
    periodic: Vec<(f64, u64)>,
    since_drop: u64,
    /// Packets dropped by the loss script.
    pub scripted_drops: u64,
}

impl TfrcSenderAgent {
    /// A sender on `node` toward the receiver agent `dest`; its feedback log goes to `mon`.
    pub fn new(
        node: NodeId,
        flow: u32,
        dest: (NodeId, AgentId),
        size: u32,
        mon: MonId,
        periodic: Vec<(f64, u64)>,
    ) -> Self {
        TfrcSenderAgent {
            node,
            flow,
            dest,
            size: size.max(1),
            ctl: TfrcSender::new(TfrcSenderConfig {
                packet_size: size.max(1),
                ..TfrcSenderConfig::default()
            }),
            running: false,
            epoch: 0,
            armed: None,
            mon,
            periodic,
            since_drop: 0,
            scripted_drops: 0,
        }
    }

    fn every(&self, t: f64) -> u64 {
        self.periodic
            .iter()
            .rev()
            .find(|p| t >= p.0)
            .map_or(0, |p| p.1)
    }

    fn rearm(&mut self, net: &mut Net, me: AgentId) {
        if let Some(at) = self.ctl.poll_timeout() {
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
                net.set_timer(me, net.now(), TOKEN_SEND | (self.epoch << 1));
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
        let Some(fb) = net
            .blobs
            .get(idx as usize)
            .and_then(|b| TfrcFeedback::parse(b).ok())
        else {
            return;
        };
        let now = net.now();
        self.ctl.handle_feedback(now, &fb);
        let st = self.ctl.stats();
        net.monitors.list[self.mon].tfrc_log.push((
            now.as_secs_f64(),
            self.ctl.rate_bytes(),
            fb.p(),
            st.rtt_s.unwrap_or(f64::NAN),
        ));
        self.rearm(net, me);
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
        } else {
            let f: TfrcDataFields = self.ctl.data_header(now);
            let k = self.every(now.as_secs_f64());
            self.since_drop += 1;
            if k > 0 && self.since_drop >= k {
                self.since_drop = 0;
                self.scripted_drops += 1;
            } else {
                net.send_blob(
                    (self.node, me),
                    self.dest,
                    self.flow,
                    self.size,
                    f.to_bytes(),
                );
            }
            let rate = self.ctl.rate_bytes().max(1e-3);
            let gap = (f64::from(self.size) / rate * 1e9).min(64e9) as u64;
            net.set_timer(me, Time(now.0 + gap.max(1)), TOKEN_SEND | (self.epoch << 1));
        }
        self.rearm(net, me);
    }
}

/// The TFRC receiver: counts goodput in its monitor and sends feedback to the sender.
pub struct TfrcReceiverAgent {
    node: NodeId,
    flow: u32,
    sender: (NodeId, AgentId),
    ctl: TfrcReceiver,
    mon: MonId,
    armed: Option<Time>,
    running: bool,
}

impl TfrcReceiverAgent {
    /// A receiver on `node` reporting to `sender`; `discounting` switches the loss history's
    /// history discounting (RFC 5348 §5.5).
    pub fn new(
        node: NodeId,
        flow: u32,
        sender: (NodeId, AgentId),
        mon: MonId,
        discounting: bool,
    ) -> Self {
        let mut cfg = TfrcReceiverConfig::default();
        cfg.ali.discounting = discounting;
        TfrcReceiverAgent {
            node,
            flow,
            sender,
            ctl: TfrcReceiver::new(cfg),
            mon,
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
            let at = at.max(Time(net.now().0 + 1));
            if at != Time::NEVER && self.armed.is_none_or(|a| at < a) {
                self.armed = Some(at);
                net.set_timer(me, at, 0);
            }
        }
    }
}

impl Agent for TfrcReceiverAgent {
    fn command(&mut self, net: &mut Net, _me: AgentId, cmd: Command) {
        match cmd {
            Command::Start => {
                self.running = true;
                net.monitors.started(self.mon, net.now());
            }
            Command::Stop => self.running = false,
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        let Body::Blob { idx } = pkt.body else { return };
        if !self.running {
            return;
        }
        let Some(f) = net
            .blobs
            .get(idx as usize)
            .and_then(|b| TfrcDataFields::parse(b).ok())
        else {
            return;
        };
        let now = net.now();
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
