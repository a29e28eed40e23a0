//! TFMCC in the simulator: the protocol crate's sans-IO `TfmccSender` paced onto one multicast
//! group, and `TfmccReceiver`s fed the data fields directly (the simulator carries them in the
//! packet instead of an RTP header extension); receiver reports travel as unicast packets
//! whose bytes are the real wire encoding, so the sender parses exactly what it would parse
//! on a socket.

use crate::engine::{Agent, AgentId, Body, Command, Dest, GroupId, Net, NodeId, Packet};
use crate::metrics::MonId;
use congestion::tfmcc::{TfmccConfig, TfmccReceiver, TfmccSender};
use congestion::{Action, LayeredController, SessionInfo, Time};
use std::sync::Arc;

/// IP + UDP header bytes added to a report's payload on the wire.
const REPORT_OVERHEAD: u32 = 28;
const TOKEN_SEND: u64 = 0;
const TOKEN_TIMER: u64 = 1;

/// The TFMCC sender: sends at the rate its controller sets, one packet at a time.
pub struct TfmccSenderAgent {
    node: NodeId,
    flow: u32,
    group: GroupId,
    size: u32,
    ctl: TfmccSender,
    running: bool,
    epoch: u64,
    armed: Option<Time>,
    mon: MonId,
    /// Reports received and rejected as malformed.
    pub reports: u64,
    pub bad_reports: u64,
    /// Timer deadlines still due right after `handle_timeout` (pushed 1 ms on).
    pub stuck_timers: u64,
    fired_at: Option<Time>,
}

impl TfmccSenderAgent {
    /// A sender on `node` sending `size`-byte packets to `group`; its rate is recorded as
    /// "received" bytes in monitor `mon` (the sending rate time series).
    pub fn new(node: NodeId, flow: u32, group: GroupId, cfg: TfmccConfig, mon: MonId) -> Self {
        TfmccSenderAgent {
            node,
            flow,
            group,
            size: cfg.packet_size.max(1),
            ctl: TfmccSender::new(cfg),
            running: false,
            epoch: 0,
            armed: None,
            mon,
            reports: 0,
            bad_reports: 0,
            stuck_timers: 0,
            fired_at: None,
        }
    }

    /// Copies newly completed feedback rounds and a CLR change into the sender's monitor.
    fn log_rounds(&mut self, net: &mut Net) {
        let now = net.now().as_secs_f64();
        let m = &mut net.monitors.list[self.mon];
        let last = m.rounds.last().map(|r| r.0);
        for r in self.ctl.round_log() {
            if last.is_none_or(|l| r.start_s > l) {
                m.rounds
                    .push((r.start_s, r.duration_s, r.non_clr_reports, r.clr_reports));
            }
        }
        let st = self.ctl.stats();
        let clr = st.clr.unwrap_or(0);
        if m.clr.last().map_or(0, |c| c.1) != clr {
            m.clr.push((now, clr));
        }
        self.log_state(net);
    }

    /// Logs `R_max`, the slow-start flag and X into the sender's monitor when one changed.
    fn log_state(&self, net: &mut Net) {
        let now = net.now().as_secs_f64();
        let m = &mut net.monitors.list[self.mon];
        let (r_max, ss, kbps) = (
            self.ctl.r_max(),
            self.ctl.stats().slow_start,
            self.ctl.poll_rate() / 1000.0,
        );
        if m.tfmcc_state
            .last()
            .is_none_or(|x| x.1 != r_max || x.2 != ss || x.3 != kbps)
        {
            m.tfmcc_state.push((now, r_max, ss, kbps));
        }
    }

    fn rearm(&mut self, net: &mut Net, me: AgentId) {
        if let Some(mut at) = self.ctl.poll_timeout() {
            // A deadline that is already due after handle_timeout ran would spin the event
            // loop at one instant: wake up 1 ms later instead (counted).
            if at <= net.now() && self.armed.is_none() && self.fired_at == Some(net.now()) {
                self.stuck_timers += 1;
                at = net.now() + std::time::Duration::from_millis(1);
            }
            if self.armed.is_none_or(|a| at < a) {
                self.armed = Some(at);
                net.set_timer(me, at, TOKEN_TIMER | (self.epoch << 1));
            }
        }
    }
}

impl Agent for TfmccSenderAgent {
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
        if let Body::Blob { idx } = pkt.body {
            let now = net.now();
            let ok = net
                .blobs
                .get(idx as usize)
                .map(|b| self.ctl.handle_report(now, b).is_ok())
                .unwrap_or(false);
            self.reports += 1;
            if !ok {
                self.bad_reports += 1;
            } else if let Some(rep) = net
                .blobs
                .get(idx as usize)
                .and_then(|b| congestion::wire::tfmcc::TfmccReport::parse(b).ok())
            {
                // First report per receiver (S29 counts rounds from it), and the latest (S18).
                let m = &mut net.monitors.list[self.mon];
                m.first_report.entry(rep.rid).or_insert(now.as_secs_f64());
                m.last_report.insert(rep.rid, now.as_secs_f64());
            }
            self.log_rounds(net);
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
                self.fired_at = Some(now);
                self.log_rounds(net);
            }
        } else {
            let f = self.ctl.data_header(now);
            net.send(Packet {
                src: self.node,
                src_agent: me,
                dst: Dest::Group(self.group),
                size: self.size,
                flow: self.flow,
                sent_at: now,
                body: Body::Tfmcc(f),
            });
            net.monitors.packet(self.mon, now, self.size);
            self.log_state(net);
            let rate = self.ctl.rate_bytes().max(1e-3);
            let kbps = rate * 8.0 / 1000.0;
            let trace = &mut net.monitors.list[self.mon].rate_trace;
            if trace.last().is_none_or(|r| r.1 != kbps) {
                trace.push((now.as_secs_f64(), kbps));
            }
            let gap = (f64::from(self.size) / rate * 1e9).min(64e9) as u64;
            net.set_timer(me, Time(now.0 + gap.max(1)), TOKEN_SEND | (self.epoch << 1));
        }
        self.rearm(net, me);
    }
}

/// A TFMCC receiver.
///
/// `repr(C)`, hot fields first: a data packet touches this agent's first fields and the
/// controller's hot prefix ([`TfmccReceiver::HOT_BYTES`]), and [`Agent::prefetch`] loads just
/// that span (10,000 receivers per packet make the run bound by those cache lines).
#[repr(C)]
pub struct TfmccReceiverAgent {
    /// The current monitor interval accumulated here (index, end ns, bytes, packets) and
    /// handed to the monitor when a packet falls in a later interval and at the end of the run:
    /// with thousands of receivers, touching every monitor's vectors per packet cost a fifth
    /// of the run (cache misses); the binned result is identical.
    acc: Option<(usize, u64, u64, u64)>,
    armed: Option<Time>,
    fired_at: Option<Time>,
    expected: Option<u32>,
    joined: bool,
    running: bool,
    /// The first RTT measurement was logged (S19).
    rtt_logged: bool,
    ctl: TfmccReceiver,
    // --- cold ---
    node: NodeId,
    group: GroupId,
    sender: (NodeId, AgentId),
    flow: u32,
    mon: MonId,
    /// Shared by the session's receivers (used once, at start).
    info: Arc<SessionInfo>,
    /// Stop is a crash: the receiver falls silent without a leave report (S18).
    crash: bool,
}

impl TfmccReceiverAgent {
    /// Receiver `rid` on `node`, reporting to the sender agent at `sender`. `cfg` and `info`
    /// may be shared by all receivers of the session (pass `Arc`s).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        node: NodeId,
        cfg: impl Into<Arc<TfmccConfig>>,
        rid: u32,
        info: impl Into<Arc<SessionInfo>>,
        group: GroupId,
        sender: (NodeId, AgentId),
        flow: u32,
        mon: MonId,
    ) -> Self {
        TfmccReceiverAgent {
            node,
            ctl: TfmccReceiver::with_shared_config(cfg.into(), rid),
            info: info.into(),
            group,
            sender,
            flow,
            mon,
            joined: false,
            expected: None,
            armed: None,
            fired_at: None,
            running: false,
            acc: None,
            rtt_logged: false,
            crash: false,
        }
    }

    /// Makes the scheduled stop a crash (no leave report; spec S18, testbed E13 `kill -9`).
    pub fn crash_on_stop(mut self, crash: bool) -> Self {
        self.crash = crash;
        self
    }

    /// Bytes from the start of the agent that a data packet touches.
    const HOT_BYTES: usize =
        std::mem::offset_of!(TfmccReceiverAgent, ctl) + TfmccReceiver::HOT_BYTES;

    /// Counts a received packet in the local interval accumulator.
    #[inline]
    fn count_packet(&mut self, net: &mut Net, now: Time, size: u32) {
        match &mut self.acc {
            Some((_, end, bytes, pkts)) if now.as_nanos() < *end => {
                *bytes += u64::from(size);
                *pkts += 1;
            }
            _ => {
                self.flush(net);
                let (i, end) = net.monitors.bin_of(now);
                self.acc = Some((i, end, u64::from(size), 1));
            }
        }
    }

    fn flush(&mut self, net: &mut Net) {
        if let Some((i, _, bytes, pkts)) = self.acc.take() {
            net.monitors.add_bin(self.mon, i, bytes, pkts);
        }
    }

    fn drain(&mut self, net: &mut Net, me: AgentId) {
        while let Some(a) = self.ctl.poll_action() {
            match a {
                Action::Join(0) if !self.joined => {
                    self.joined = true;
                    net.join(self.group, self.node, me);
                    net.monitors.level(self.mon, net.now(), 1);
                }
                Action::Leave(0) | Action::Exit if self.joined => {
                    self.joined = false;
                    net.leave(self.group, self.node, me);
                    net.monitors.level(self.mon, net.now(), 0);
                }
                Action::SendFeedback(bytes) => {
                    let size = bytes.len() as u32 + REPORT_OVERHEAD;
                    net.send_blob((self.node, me), self.sender, self.flow, size, bytes);
                }
                _ => {}
            }
        }
        while self.ctl.poll_decision().is_some() {}
        if let Some((mut at, _)) = self.ctl.poll_timeout() {
            if at <= net.now() && self.armed.is_none() && self.fired_at == Some(net.now()) {
                at = net.now() + std::time::Duration::from_millis(1);
            }
            if at != Time::NEVER && self.armed.is_none_or(|a| at < a) {
                self.armed = Some(at);
                net.set_timer(me, at, 0);
            }
        }
    }
}

impl Agent for TfmccReceiverAgent {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                net.monitors.started(self.mon, net.now());
                self.ctl.handle_announcement(net.now(), &self.info);
                self.drain(net, me);
            }
            Command::Stop => {
                // An explicit leave (RFC 4654 §4.5: a report with the leave flag), so the
                // sender can drop a leaving CLR at once; then the group leave. A crash says
                // nothing (the kernel of a killed process still drops the membership).
                if self.running && !self.crash {
                    self.ctl.leave(net.now());
                    self.drain(net, me);
                }
                self.running = false;
                if self.joined {
                    self.joined = false;
                    net.leave(self.group, self.node, me);
                }
            }
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        let Body::Tfmcc(f) = pkt.body else { return };
        if !self.running || !self.joined {
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
        self.count_packet(net, now, pkt.size);
        self.ctl.handle_data(now, &f, pkt.size);
        if !self.rtt_logged && self.ctl.have_rtt() {
            self.rtt_logged = true;
            net.monitors.list[self.mon].first_rtt_at = Some(now.as_secs_f64());
        }
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
        if self.ctl.poll_timeout().is_some_and(|(at, _)| at <= now) {
            self.ctl.handle_timeout(now);
            self.fired_at = Some(now);
        }
        self.drain(net, me);
    }

    fn finish(&mut self, net: &mut Net, _me: AgentId) {
        self.flush(net);
    }

    fn prefetch(&self) {
        crate::engine::prefetch(self as *const Self as *const u8, Self::HOT_BYTES);
    }

    fn prefetch_deep(&self) {
        for p in self.ctl.hot_memory() {
            crate::engine::prefetch(p, 1);
        }
    }
}
