//! A bulk TCP sender that behaves like Linux's (the testbed's iperf3 flows), with CUBIC
//! ([`crate::agents::cubic`]) or BBR v1 ([`crate::agents::bbr`]) as its congestion control.
//! The sink is [`crate::agents::tcp::TcpSink`] with SACK blocks and, by default, Linux's
//! delayed ACKs.
//!
//! What it takes from Linux (6.x defaults), beyond the congestion control module:
//! - initial window 10 segments; RTT samples from every ACK (the timestamp option echoes the
//!   send time of the segment that triggered the ACK); RTO per RFC 6298 with a 200-ms floor,
//!   doubled per timeout;
//! - SACK loss recovery with RACK (RFC 8985, `net.ipv4.tcp_recovery = 1`): a segment is lost
//!   once a segment sent after it was delivered and one RACK RTT plus a reordering window has
//!   passed since it was sent; the window is `min_rtt/4` until three segments are SACKed, then
//!   0 (Linux `tcp_rack_reo_wnd`). A lost retransmission is detected the same way and sent again.
//!   Recovery starts when a segment is marked lost or three are SACKed, and ends when the
//!   cumulative ACK passes the highest segment sent when it began;
//! - CUBIC's window during recovery follows Proportional Rate Reduction (RFC 6937, PRR-SSRB,
//!   Linux `tcp_cwnd_reduction`); BBR sets its own window (packet conservation);
//! - delivery-rate samples (draft-cheng-iccrg-delivery-rate-estimation) for BBR;
//! - BBR paces (Linux's internal pacing, `sk_pacing_status`); CUBIC does not (the testbed's
//!   qdisc is not `fq`), so CUBIC sends ACK-clocked bursts.
//!
//! Segments on the wire are `packet_size` bytes, the IP packet size the testbed's iperf3 `-M`
//! produces; the goodput the sink counts excludes [`LINUX_HEADER`] bytes (IP, TCP and the
//! timestamp option), as iperf3 reports payload.
//!
//! Not modelled: tail loss probes (a bulk sender nearly always has new data to clock out),
//! F-RTO, ACK compression allowances, the receive window (the testbed raises buffer ceilings to
//! 16 MB so the window never limits, DESIGN.md).

use crate::agents::bbr::{Bbr, RateSample};
use crate::agents::cubic::{Cubic, CubicParams};
use crate::agents::sack::SackBlocks;
use crate::engine::{Agent, AgentId, Body, Command, Dest, Net, NodeId, Packet};
use congestion::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// IP (20) + TCP (20) + timestamp option (12) bytes of every data segment.
pub const LINUX_HEADER: u32 = 52;
/// Linux's initial window, segments.
pub const INITIAL_WINDOW: f64 = 10.0;

/// Which congestion control the sender runs.
#[derive(Clone, Debug)]
pub enum LinuxCc {
    Cubic(Cubic),
    Bbr(Bbr),
}

impl LinuxCc {
    /// CUBIC with Linux's defaults (`hystart` chooses HyStart on or off).
    pub fn cubic(hystart: bool) -> LinuxCc {
        LinuxCc::Cubic(Cubic::new(
            CubicParams {
                hystart,
                ..CubicParams::default()
            },
            INITIAL_WINDOW,
        ))
    }

    /// BBR v1; `seed` draws its first ProbeBW phase.
    pub fn bbr(seed: u64) -> LinuxCc {
        LinuxCc::Bbr(Bbr::new(INITIAL_WINDOW, seed))
    }

    fn cwnd(&self) -> f64 {
        match self {
            LinuxCc::Cubic(c) => c.cwnd,
            LinuxCc::Bbr(b) => b.cwnd,
        }
    }
}

/// What the sender keeps per segment in flight.
#[derive(Clone, Copy, Debug, Default)]
struct Seg {
    /// Last (re)transmission time, s.
    sent_at: f64,
    /// `C.delivered`, `C.delivered_time` and `C.first_sent_time` at that transmission.
    delivered: u64,
    delivered_time: f64,
    first_sent_time: f64,
    /// SACKed (or acknowledged).
    done: bool,
    /// Marked lost and not retransmitted since.
    lost: bool,
    /// Transmissions so far.
    xmits: u32,
}

/// The sender.
pub struct LinuxTcpSender {
    node: NodeId,
    dst: Dest,
    flow: u32,
    size: u32,
    /// The congestion control (public for tests and traces).
    pub cc: LinuxCc,
    snd_una: u64,
    snd_nxt: u64,
    segs: VecDeque<Seg>,
    sacked: u64,
    lost: u64,
    in_recovery: bool,
    recover: u64,
    /// PRR (RFC 6937) for CUBIC.
    prr_delivered: f64,
    prr_out: f64,
    recover_fs: f64,
    /// RACK: send time and RTT of the most recently sent delivered segment; minimum RTT.
    rack_xmit: f64,
    rack_rtt: f64,
    min_rtt: f64,
    /// Delivery-rate estimation state (`C.*`).
    delivered: u64,
    delivered_time: f64,
    first_sent_time: f64,
    srtt: Option<f64>,
    rttvar: f64,
    rto: f64,
    rto_epoch: u64,
    rto_armed: bool,
    pace_next: f64,
    pace_timer: bool,
    rack_timer: Option<f64>,
    /// After a timeout: slow start from one segment until `recover` is acknowledged (Linux's
    /// Loss state; no PRR).
    in_loss: bool,
    running: bool,
    /// Segments sent (with retransmissions), retransmitted, and timeouts.
    pub sent: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    /// Recoveries entered.
    pub recoveries: u64,
}

/// Timer tokens: RTO epochs count up from 0; the pacing timer uses this one.
const PACE_TOKEN: u64 = u64::MAX;

impl LinuxTcpSender {
    /// A sender on `node` towards the sink `dst`, segments of `packet_size` bytes on the wire.
    pub fn new(node: NodeId, dst: Dest, flow: u32, packet_size: u32, cc: LinuxCc) -> Self {
        LinuxTcpSender {
            node,
            dst,
            flow,
            size: packet_size.max(LINUX_HEADER + 1),
            cc,
            snd_una: 0,
            snd_nxt: 0,
            segs: VecDeque::new(),
            sacked: 0,
            lost: 0,
            in_recovery: false,
            recover: 0,
            prr_delivered: 0.0,
            prr_out: 0.0,
            recover_fs: 0.0,
            rack_xmit: f64::NEG_INFINITY,
            rack_rtt: 0.0,
            min_rtt: f64::INFINITY,
            delivered: 0,
            delivered_time: 0.0,
            first_sent_time: 0.0,
            srtt: None,
            rttvar: 0.0,
            rto: 1.0,
            rto_epoch: 0,
            rto_armed: false,
            pace_next: 0.0,
            pace_timer: false,
            rack_timer: None,
            in_loss: false,
            running: false,
            sent: 0,
            retransmits: 0,
            timeouts: 0,
            recoveries: 0,
        }
    }

    /// Congestion window, segments.
    pub fn cwnd(&self) -> f64 {
        self.cc.cwnd()
    }

    /// Smoothed RTT, s.
    pub fn srtt(&self) -> Option<f64> {
        self.srtt
    }

    fn seg(&mut self, seq: u64) -> Option<&mut Seg> {
        let i = seq.checked_sub(self.snd_una)?;
        self.segs.get_mut(i as usize)
    }

    /// Segments in flight (RFC 6675 `pipe` with RACK's lost marks): sent, not delivered,
    /// not marked lost.
    fn pipe(&self) -> f64 {
        (self.segs.len() as u64 - self.sacked - self.lost) as f64
    }

    fn now_s(net: &Net) -> f64 {
        net.now().as_secs_f64()
    }

    fn transmit(&mut self, net: &mut Net, me: AgentId, seq: u64) {
        let now = Self::now_s(net);
        if self.pipe() == 0.0 {
            // Nothing in flight: a new delivery-rate interval starts (draft §3.2).
            self.first_sent_time = now;
            self.delivered_time = now;
        }
        let (delivered, dt, fst) = (self.delivered, self.delivered_time, self.first_sent_time);
        let (retx, was_lost);
        {
            let Some(s) = self.seg(seq) else { return };
            retx = s.xmits > 0;
            was_lost = s.lost;
            s.lost = false;
            s.xmits += 1;
            s.sent_at = now;
            s.delivered = delivered;
            s.delivered_time = dt;
            s.first_sent_time = fst;
        }
        if was_lost {
            self.lost -= 1;
        }
        if retx {
            self.retransmits += 1;
            if let Some(c) = net.flow_retx.get_mut(self.flow as usize) {
                *c += 1;
            }
        }
        if let Some(c) = net.flow_sent.get_mut(self.flow as usize) {
            *c += 1;
        }
        self.sent += 1;
        if self.in_recovery {
            self.prr_out += 1.0;
        }
        net.send(Packet {
            src: self.node,
            src_agent: me,
            dst: self.dst,
            size: self.size,
            flow: self.flow,
            sent_at: net.now(),
            body: Body::Tcp { seq },
        });
        if let LinuxCc::Bbr(b) = &self.cc {
            let gap = 1.0 / b.pacing.max(1e-3);
            self.pace_next = self.pace_next.max(now) + gap;
        }
        if !self.rto_armed {
            self.arm_rto(net, me);
        }
    }

    fn arm_rto(&mut self, net: &mut Net, me: AgentId) {
        self.rto_epoch += 1;
        self.rto_armed = true;
        let at = net.now() + Duration::from_secs_f64(self.rto);
        net.set_timer(me, at, self.rto_epoch);
    }

    /// Sends what the window (and, for BBR, the pacing) allows: lost segments first, then
    /// new data.
    fn send_allowed(&mut self, net: &mut Net, me: AgentId) {
        if !self.running {
            return;
        }
        loop {
            let cwnd = self.cc.cwnd().max(1.0);
            if cwnd - self.pipe() < 1.0 {
                break;
            }
            if matches!(self.cc, LinuxCc::Bbr(_)) {
                let now = Self::now_s(net);
                if now + 1e-6 < self.pace_next {
                    if !self.pace_timer {
                        self.pace_timer = true;
                        net.set_timer(me, Time::from_secs_f64(self.pace_next + 1e-6), PACE_TOKEN);
                    }
                    break;
                }
            }
            let lost = self.segs.iter().position(|s| s.lost);
            match lost {
                Some(i) => {
                    let seq = self.snd_una + i as u64;
                    self.transmit(net, me, seq);
                }
                None => {
                    let seq = self.snd_nxt;
                    self.segs.push_back(Seg::default());
                    self.snd_nxt += 1;
                    self.transmit(net, me, seq);
                }
            }
        }
    }

    fn rtt_sample(&mut self, r: f64) {
        if r <= 0.0 {
            return;
        }
        self.min_rtt = self.min_rtt.min(r);
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
        let s = self.srtt.unwrap_or(r);
        self.rto = (s + (4.0 * self.rttvar).max(0.2)).clamp(0.2, 120.0);
    }

    fn on_ack(&mut self, net: &mut Net, me: AgentId, ack: u64, echo: Time, blocks: &SackBlocks) {
        let now = Self::now_s(net);
        if ack > self.snd_nxt || ack < self.snd_una {
            return;
        }
        let prior_in_flight = self.pipe();
        let prior_delivered = self.delivered;
        // The sample's newest delivered segment: (its send time, its `delivered` record).
        let mut newest: Option<Seg> = None;
        let mut note = |s: &Seg, this: &mut LinuxTcpSender| {
            this.delivered += 1;
            this.delivered_time = now;
            // The sample follows the most recently sent delivered packet (largest
            // `P.delivered`, draft §3.3 UpdateRateSample).
            if newest.is_none_or(|n| (s.delivered, s.sent_at) >= (n.delivered, n.sent_at)) {
                newest = Some(*s);
            }
            if s.sent_at >= this.rack_xmit {
                this.rack_xmit = s.sent_at;
                this.rack_rtt = now - s.sent_at;
            }
        };
        // Selectively acknowledged segments above the cumulative ACK.
        for (s, e) in blocks.iter(ack) {
            for seq in s.max(ack)..e.min(self.snd_nxt) {
                let i = (seq - self.snd_una) as usize;
                let Some(seg) = self.segs.get(i).copied() else {
                    continue;
                };
                if !seg.done {
                    if seg.lost {
                        self.lost -= 1;
                    }
                    let x = &mut self.segs[i];
                    x.done = true;
                    x.lost = false;
                    self.sacked += 1;
                    note(&seg, self);
                }
            }
        }
        // Cumulatively acknowledged ones.
        let newly_acked = ack - self.snd_una;
        for _ in 0..newly_acked {
            let seg = self.segs.pop_front().unwrap_or_default();
            if seg.done {
                self.sacked -= 1;
            } else {
                if seg.lost {
                    self.lost -= 1;
                }
                note(&seg, self);
            }
        }
        self.snd_una = ack;
        if let Some(n) = newest {
            self.first_sent_time = n.sent_at;
        }
        let acked = (self.delivered - prior_delivered) as f64;
        let rtt = Some(now - echo.as_secs_f64()).filter(|_| acked > 0.0);
        if let Some(r) = rtt {
            self.rtt_sample(r);
        }
        if (self.in_recovery || self.in_loss) && self.snd_una > self.recover {
            match &mut self.cc {
                LinuxCc::Cubic(c) if self.in_recovery => c.end_recovery(),
                LinuxCc::Cubic(_) => {}
                LinuxCc::Bbr(b) => b.exit_recovery(),
            }
            self.in_recovery = false;
            self.in_loss = false;
        }
        let lost_before = self.lost;
        self.rack_detect(net, me, now);
        let newly_lost = (self.lost - lost_before) as f64;
        if !self.in_recovery && !self.in_loss && (self.lost > 0 || self.sacked >= 3) {
            self.enter_recovery(prior_in_flight);
        }
        // The congestion control.
        match &mut self.cc {
            LinuxCc::Cubic(c) => {
                if self.in_recovery {
                    self.prr_delivered += acked;
                    let pipe = (self.segs.len() as u64 - self.sacked - self.lost) as f64;
                    let ss = c.ssthresh;
                    let sndcnt = if pipe > ss {
                        (self.prr_delivered * ss / self.recover_fs.max(1.0)).ceil() - self.prr_out
                    } else {
                        (ss - pipe).min((self.prr_delivered - self.prr_out).max(acked) + 1.0)
                    };
                    // At least one (re)transmission at the start of recovery (Linux).
                    let sndcnt = sndcnt.max(if self.prr_out == 0.0 { 1.0 } else { 0.0 });
                    c.cwnd = pipe + sndcnt;
                } else {
                    c.on_ack(now, acked, rtt, (self.snd_una, self.snd_nxt), true);
                }
            }
            LinuxCc::Bbr(b) => {
                if let Some(n) = newest.filter(|_| acked > 0.0) {
                    let send_elapsed = n.sent_at - n.first_sent_time;
                    let ack_elapsed = now - n.delivered_time;
                    let rs = RateSample {
                        delivered: (self.delivered - n.delivered) as f64,
                        interval_s: send_elapsed.max(ack_elapsed),
                        prior_delivered: n.delivered,
                        app_limited: false,
                        rtt_s: rtt,
                        acked,
                        losses: newly_lost,
                        prior_in_flight,
                    };
                    // Intervals shorter than the minimum RTT are not to be trusted (draft §3.3).
                    let rs = if rs.interval_s < self.min_rtt {
                        RateSample {
                            delivered: 0.0,
                            ..rs
                        }
                    } else {
                        rs
                    };
                    let inflight = (self.segs.len() as u64 - self.sacked - self.lost) as f64;
                    b.on_ack(now, &rs, self.delivered, inflight);
                }
            }
        }
        // RTO: restart on forward progress, stop when nothing is outstanding.
        if self.segs.is_empty() {
            self.rto_armed = false;
            self.rto_epoch += 1;
        } else if newly_acked > 0 {
            self.arm_rto(net, me);
        }
        self.send_allowed(net, me);
    }

    fn enter_recovery(&mut self, prior_in_flight: f64) {
        self.in_recovery = true;
        self.recoveries += 1;
        self.recover = self.snd_nxt.saturating_sub(1);
        self.prr_delivered = 0.0;
        self.prr_out = 0.0;
        self.recover_fs = prior_in_flight;
        match &mut self.cc {
            LinuxCc::Cubic(c) => {
                c.on_loss();
            }
            LinuxCc::Bbr(b) => {
                let inflight = (self.segs.len() as u64 - self.sacked - self.lost) as f64;
                b.enter_recovery(inflight, self.delivered);
            }
        }
    }

    /// RACK (RFC 8985 §6.2): marks lost every segment sent before the most recently sent
    /// delivered one once RACK's RTT plus the reordering window has passed since it was sent.
    fn rack_detect(&mut self, net: &mut Net, me: AgentId, now: f64) {
        if !self.rack_xmit.is_finite() {
            return;
        }
        let reo_wnd = if self.in_recovery || self.sacked >= 3 || !self.min_rtt.is_finite() {
            0.0
        } else {
            self.min_rtt / 4.0
        };
        let mut wait: Option<f64> = None;
        let mut marked = 0;
        for s in self.segs.iter_mut() {
            // Only segments sent before the newest delivered one can be judged.
            if s.done || s.lost || s.sent_at >= self.rack_xmit {
                continue;
            }
            let due = s.sent_at + self.rack_rtt + reo_wnd;
            // 1-µs tolerance: the timer below fires on whole nanoseconds.
            if now + 1e-6 >= due {
                s.lost = true;
                marked += 1;
            } else {
                wait = Some(wait.map_or(due, |w: f64| w.min(due)));
            }
        }
        self.lost += marked;
        if let Some(w) = wait {
            // The reordering timer: check again when the earliest candidate is due.
            if self.rack_timer.is_none_or(|t| w < t) {
                self.rack_timer = Some(w);
                net.set_timer(me, Time::from_secs_f64(w + 2e-6), PACE_TOKEN - 1);
            }
        }
    }

    fn on_rto(&mut self, net: &mut Net, me: AgentId) {
        if self.segs.is_empty() {
            self.rto_armed = false;
            return;
        }
        self.timeouts += 1;
        // Everything outstanding is lost (Linux `tcp_enter_loss`); recovery lasts until
        // what was sent before the timeout is acknowledged.
        for s in self.segs.iter_mut() {
            if !s.done {
                s.lost = true;
            }
        }
        self.lost = self.segs.iter().filter(|s| s.lost).count() as u64;
        self.in_recovery = false;
        self.in_loss = true;
        self.recover = self.snd_nxt.saturating_sub(1);
        match &mut self.cc {
            LinuxCc::Cubic(c) => c.on_rto(),
            LinuxCc::Bbr(b) => b.on_rto(self.delivered),
        }
        self.rto = (self.rto * 2.0).min(120.0);
        self.rto_armed = false;
        self.pace_next = 0.0;
        self.send_allowed(net, me);
        if !self.rto_armed {
            self.arm_rto(net, me);
        }
    }
}

impl Agent for LinuxTcpSender {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                self.send_allowed(net, me);
            }
            Command::Stop => {
                self.running = false;
                self.rto_epoch += 1;
            }
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        if !self.running {
            return;
        }
        match pkt.body {
            Body::SackAck { ack, echo, blocks } => self.on_ack(net, me, ack, echo, &blocks),
            Body::Ack { ack, echo } => self.on_ack(net, me, ack, echo, &SackBlocks::default()),
            _ => {}
        }
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if !self.running {
            return;
        }
        match token {
            PACE_TOKEN => {
                self.pace_timer = false;
                self.send_allowed(net, me);
            }
            t if t == PACE_TOKEN - 1 => {
                self.rack_timer = None;
                let before = self.lost;
                let now = Self::now_s(net);
                self.rack_detect(net, me, now);
                if self.lost > before {
                    if !self.in_recovery && !self.in_loss {
                        self.enter_recovery(self.pipe() + (self.lost - before) as f64);
                    }
                    self.send_allowed(net, me);
                }
            }
            t if self.rto_armed && t == self.rto_epoch => self.on_rto(net, me),
            _ => {}
        }
    }
}
