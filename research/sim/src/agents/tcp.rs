//! A bulk TCP Reno / NewReno sender (infinite backlog, as the specs' FTP sources) and its sink.
//!
//! Segments are counted in packets. Textbook Reno (`active-networks.md` §1.1, RFC 5681):
//! slow start from one segment, +1/cwnd per ACK in congestion avoidance, fast retransmit after
//! three duplicate ACKs with ssthresh = max(flight/2, 2) and cwnd = ssthresh + 3, inflation by
//! one per further duplicate, deflation to ssthresh on the next new ACK. NewReno (RFC 6582)
//! stays in recovery on partial ACKs and retransmits the next hole. Timeout: ssthresh =
//! max(flight/2, 2), cwnd = 1, go-back-N from the first unacknowledged segment, RTO doubled.
//! RTO per RFC 6298 with a 200 ms floor (ns-2 of the papers' era used a coarser tick; the floor
//! is the choice recorded in docs/simulator.md). Karn's rule (RFC 6298 §3 and §5, ns-2's
//! `rtt_active_`/`t_backoff_`): after a timeout no RTT sample is taken, and the doubled RTO
//! stays, until an ACK covers a segment first sent after that timeout. The sink ACKs every
//! segment (no delayed ACK, as ns-2's `TCPSink`) and buffers out-of-order data.
//!
//! SACK (`Variant::Sack`, `agents::sack`): the sink adds RFC 2018 blocks to every ACK and the
//! sender runs RFC 6675 loss recovery over a scoreboard: recovery starts at DupThresh (3)
//! duplicate ACKs or when `IsLost(snd_una)`; ssthresh = cwnd = max(flight/2, 2); the sender
//! then keeps `pipe` (RFC 6675 `SetPipe`) below cwnd by sending, in `NextSeg` order, lost
//! segments, then new data, then unSACKed segments above the last retransmission; recovery
//! ends when the cumulative ACK passes the highest segment sent when it began. No cwnd
//! inflation. A timeout clears the scoreboard (RFC 2018 §8: the receiver may have reneged)
//! and goes back N from `snd_una`, skipping what SACKs received after the timeout cover.

use crate::agents::sack::{RecvBuffer, SackBlocks, Scoreboard, DUP_THRESH};
use crate::engine::{Agent, AgentId, Body, Command, Dest, Net, NodeId, Packet};
use crate::metrics::MonId;
use congestion::Time;

/// Reno, NewReno, or SACK (RFC 6675 recovery; its sink must send SACK blocks,
/// [`TcpSink::with_sack`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Variant {
    Reno,
    NewReno,
    Sack,
}

/// Size of a TCP ACK on the wire, bytes.
pub const ACK_SIZE: u32 = 40;

/// The bulk sender.
pub struct TcpSender {
    node: NodeId,
    dst: Dest,
    flow: u32,
    mss: u32,
    variant: Variant,
    max_cwnd: f64,
    cwnd: f64,
    ssthresh: f64,
    snd_una: u64,
    snd_nxt: u64,
    high_sent: u64,
    recover: u64,
    in_recovery: bool,
    dupacks: u32,
    srtt: Option<f64>,
    rttvar: f64,
    rto: f64,
    min_rto: f64,
    timer_epoch: u64,
    /// Karn's rule: one past the highest segment sent before the last timeout. ACKs that do
    /// not pass it may answer a retransmission of something sent before the timeout: they
    /// give no RTT sample and leave the backed-off RTO in force.
    karn_until: u64,
    running: bool,
    /// Segments sent (including retransmissions) and retransmitted, timeouts.
    pub sent: u64,
    pub retransmits: u64,
    pub timeouts: u64,
    /// ACC TCP (`agents::acc`): segments carry the congestion state, router notifications
    /// set the window.
    acc: bool,
    /// Window reductions so far (carried in ACC segments).
    acc_epoch: u32,
    /// After a router notification: one past the highest segment sent before it. Duplicate
    /// ACKs below it belong to the loss the router already answered: no second halving.
    acc_recover: u64,
    /// Router notifications adopted.
    pub acc_notifications: u64,
    /// Finite transfers (`agents::web`): no segment at or beyond this is sent (None = bulk).
    limit: Option<u64>,
    /// Added to the RTO timer tokens, so several senders can live inside one agent.
    token_base: u64,
    /// TCP/IP header bytes added to every data segment on the wire (`mss` is the payload).
    header: u32,
    /// ns-2's `bugFix_` for Reno: no fast retransmit for duplicate ACKs of data sent before
    /// the last window cut (only a timeout repairs a second loss of that window).
    bug_fix: bool,
    /// SACK: what the receiver reported above `snd_una` (`Variant::Sack` only).
    board: Scoreboard,
    /// SACK: highest segment retransmitted in the current recovery (RFC 6675 `HighRxt`).
    high_rxt: Option<u64>,
}

impl TcpSender {
    /// A sender on `node` towards the sink `dst`.
    pub fn new(
        node: NodeId,
        dst: Dest,
        flow: u32,
        mss: u32,
        variant: Variant,
        max_cwnd: u32,
    ) -> Self {
        TcpSender {
            node,
            dst,
            flow,
            mss: mss.max(1),
            variant,
            max_cwnd: f64::from(max_cwnd.max(1)),
            cwnd: 1.0,
            ssthresh: f64::from(max_cwnd.max(2)),
            snd_una: 0,
            snd_nxt: 0,
            high_sent: 0,
            recover: 0,
            in_recovery: false,
            dupacks: 0,
            srtt: None,
            rttvar: 0.0,
            rto: 1.0,
            min_rto: 0.2,
            timer_epoch: 0,
            karn_until: 0,
            running: false,
            sent: 0,
            retransmits: 0,
            timeouts: 0,
            acc: false,
            acc_epoch: 0,
            acc_recover: 0,
            acc_notifications: 0,
            limit: None,
            token_base: 0,
            header: 0,
            bug_fix: false,
            board: Scoreboard::default(),
            high_rxt: None,
        }
    }

    /// Reno as ns-2's `Agent/TCP/Reno` runs it with its default `bugFix_ true`
    /// (`RenoTcpAgent::dupack_action`): three duplicate ACKs trigger a fast retransmit only
    /// once the cumulative ACK has passed `recover` (the highest segment sent at the last
    /// fast retransmit or timeout); otherwise the sender waits for its retransmission timer
    /// (then go-back-N). This is the "Reno times out on multiple losses in a window" of Fall
    /// and Floyd (1996, the thesis' ref. [50]). Without it (default) Reno fast-retransmits and
    /// halves again on every third duplicate ACK. NewReno always checks `recover`.
    pub fn with_bug_fix(mut self, on: bool) -> Self {
        self.bug_fix = on;
        self
    }

    /// Data segments carry `mss` payload bytes plus `header` bytes of TCP/IP header on the
    /// wire, as ns-2's `Agent/TCP`: `packetSize_` is the payload and `TcpAgent::output` adds
    /// `tcpip_base_hdr_size_` (40 B), so a 1000-B ns-2 segment is a 1040-B packet on the link.
    /// The papers' scenarios give ns-2's `packetSize_`; without the header a 1.5 Mbit/s link
    /// carries 3.8 % more 1000-B segments than in their runs. ACKs stay [`ACK_SIZE`].
    pub fn with_header(mut self, header: u32) -> Self {
        self.header = header;
        self
    }

    /// A sender of finite objects (`agents::web`): nothing to send until
    /// [`TcpSender::push_object`]; RTO timers carry `token_base + epoch`.
    pub fn for_objects(mut self, token_base: u64) -> Self {
        self.limit = Some(0);
        self.token_base = token_base;
        self.running = true;
        self
    }

    /// Queues `segments` more for sending. If the sender was idle, this is a new HTTP/1.0
    /// connection: slow start from one segment with the initial RTO of 1 s (RFC 6298) and
    /// no RTT history.
    pub fn push_object(&mut self, net: &mut Net, me: AgentId, segments: u64) {
        let l = self.limit.get_or_insert(0);
        let idle = self.snd_una >= *l;
        *l += segments;
        if idle {
            self.cwnd = 1.0;
            self.ssthresh = self.max_cwnd.max(2.0);
            self.srtt = None;
            self.rttvar = 0.0;
            self.rto = 1.0;
            self.in_recovery = false;
            self.dupacks = 0;
            self.recover = self.snd_una;
        }
        self.send_allowed(net, me);
    }

    /// Segments acknowledged so far (the next one the receiver expects).
    pub fn acked(&self) -> u64 {
        self.snd_una
    }

    /// Makes this an ACC TCP sender (`active-networks.md` §1.4, `agents::acc`).
    pub fn with_acc(mut self) -> Self {
        self.acc = true;
        self
    }

    /// A router notification: adopt its window as if this sender had detected the loss now,
    /// retransmit the lost segment, and resend what the router's filter discards.
    fn on_acc_notify(&mut self, net: &mut Net, me: AgentId, n: crate::agents::acc::AccNotify) {
        // Stale (the sender already reacted to this window by itself) or already repaired.
        if !self.acc || n.epoch != self.acc_epoch || n.seq < self.snd_una {
            return;
        }
        self.acc_notifications += 1;
        self.acc_epoch += 1;
        self.acc_recover = self.high_sent;
        let w = f64::from(n.wnd);
        self.ssthresh = w;
        self.cwnd = w;
        self.in_recovery = false;
        self.dupacks = 0;
        self.send_seg(net, me, n.seq);
        self.snd_nxt = self.snd_nxt.min(n.filter_from).max(self.snd_una);
        self.arm_rto(net, me);
        self.send_allowed(net, me);
    }

    /// Current congestion window, segments.
    pub fn cwnd(&self) -> f64 {
        self.cwnd
    }

    fn send_seg(&mut self, net: &mut Net, me: AgentId, seq: u64) {
        let retx = seq < self.high_sent;
        if retx {
            self.retransmits += 1;
        }
        let f = self.flow as usize;
        if let Some(c) = net.flow_sent.get_mut(f) {
            *c += 1;
        }
        if let (true, Some(c)) = (retx, net.flow_retx.get_mut(f)) {
            *c += 1;
        }
        self.high_sent = self.high_sent.max(seq + 1);
        self.sent += 1;
        net.send(Packet {
            src: self.node,
            src_agent: me,
            dst: self.dst,
            size: self.mss.saturating_add(self.header),
            flow: self.flow,
            sent_at: net.now(),
            body: if self.acc {
                Body::AccTcp {
                    seq,
                    state: crate::agents::acc::AccState {
                        cwnd: self.cwnd.min(self.max_cwnd) as u32,
                        epoch: self.acc_epoch,
                    },
                }
            } else {
                Body::Tcp { seq }
            },
        });
    }

    fn arm_rto(&mut self, net: &mut Net, me: AgentId) {
        self.timer_epoch += 1;
        let at = net.now() + std::time::Duration::from_secs_f64(self.rto);
        net.set_timer(me, at, self.token_base + self.timer_epoch);
    }

    fn flight(&self) -> f64 {
        (self.snd_nxt - self.snd_una) as f64
    }

    fn send_allowed(&mut self, net: &mut Net, me: AgentId) {
        let wnd = self.cwnd.min(self.max_cwnd).floor().max(1.0) as u64;
        let was_idle = self.snd_nxt == self.snd_una;
        while self.snd_nxt < self.snd_una + wnd && self.limit.is_none_or(|l| self.snd_nxt < l) {
            let s = self.snd_nxt;
            // SACK after a timeout's go-back-N: what the receiver SACKed since is not resent.
            if !(self.variant == Variant::Sack && self.board.is_sacked(s)) {
                self.send_seg(net, me, s);
            }
            self.snd_nxt += 1;
        }
        if was_idle && self.snd_nxt > self.snd_una {
            self.arm_rto(net, me);
        }
    }

    fn rtt_sample(&mut self, r: f64) {
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
        self.rto = (s + 4.0 * self.rttvar).clamp(self.min_rto, 60.0);
    }

    fn on_ack(&mut self, net: &mut Net, me: AgentId, ack: u64, echo: Time) {
        if self.variant == Variant::Sack {
            return self.on_sack_ack(net, me, ack, echo, &SackBlocks::default());
        }
        let r = net.now().saturating_since(echo).as_secs_f64();
        if ack > self.snd_una {
            // Karn (RFC 6298 §3, §5; ns-2 `newack` resets `t_backoff_` only when the timed
            // segment is acked): until the cumulative ACK passes what was sent before the last
            // timeout, it may be the answer to a go-back-N retransmission. Sampling it reset
            // the RTO to srtt + 4 rttvar at once, so a sender that timed out repeatedly
            // retried every 200 ms instead of backing off (tests/tcp.rs).
            if ack > self.karn_until {
                self.rtt_sample(r);
            }
            let newly = (ack - self.snd_una) as f64;
            if self.in_recovery {
                if ack > self.recover {
                    self.in_recovery = false;
                    self.cwnd = self.ssthresh;
                } else if self.variant == Variant::NewReno {
                    // Partial ACK: retransmit the next hole, deflate by what was acked.
                    self.send_seg(net, me, ack);
                    self.cwnd = (self.cwnd - newly + 1.0).max(1.0);
                } else {
                    self.in_recovery = false;
                    self.cwnd = self.ssthresh;
                }
            } else if self.cwnd < self.ssthresh {
                // One segment per ACK, however many segments it covers: ns-2's
                // `TcpAgent::opencwnd` (the papers' TCP) and RFC 5681 §3.1. After a timeout's
                // go-back-N, one cumulative ACK covers everything the receiver had buffered
                // behind the hole; growing cwnd by all of it sent a line-rate burst of
                // hundreds of packets (tests/tcp.rs).
                self.cwnd += newly.min(1.0);
            } else {
                self.cwnd += newly / self.cwnd;
            }
            self.cwnd = self.cwnd.min(self.max_cwnd);
            self.snd_una = ack;
            self.snd_nxt = self.snd_nxt.max(ack);
            if !self.in_recovery {
                self.dupacks = 0;
            }
            if self.snd_nxt > self.snd_una {
                self.arm_rto(net, me);
            } else {
                self.timer_epoch += 1;
            }
        } else if ack == self.snd_una && self.snd_nxt > self.snd_una {
            self.dupacks += 1;
            if self.acc && ack < self.acc_recover {
                // The router already halved this window: repair further holes of it
                // without a second cut.
                if self.dupacks == 3 {
                    self.send_seg(net, me, ack);
                }
            } else if self.in_recovery {
                self.cwnd += 1.0;
            } else if self.dupacks == 3
                && ((self.variant == Variant::Reno && !self.bug_fix)
                    || ack > self.recover
                    || self.recover == 0)
            {
                self.ssthresh = (self.flight() / 2.0).max(2.0);
                self.acc_epoch += 1;
                self.send_seg(net, me, ack);
                self.cwnd = self.ssthresh + 3.0;
                self.in_recovery = true;
                self.recover = self.snd_nxt.saturating_sub(1);
                self.arm_rto(net, me);
            }
        }
        self.send_allowed(net, me);
    }

    /// An ACK for `Variant::Sack` (RFC 6675). `blocks` is empty for a plain ACK.
    fn on_sack_ack(
        &mut self,
        net: &mut Net,
        me: AgentId,
        ack: u64,
        echo: Time,
        blocks: &SackBlocks,
    ) {
        let r = net.now().saturating_since(echo).as_secs_f64();
        if ack > self.high_sent {
            // Acknowledges what was never sent: not from our receiver.
            return;
        }
        if ack > self.snd_una {
            if ack > self.karn_until {
                self.rtt_sample(r);
            }
            let newly = (ack - self.snd_una) as f64;
            self.board.advance(ack);
            self.snd_una = ack;
            self.snd_nxt = self.snd_nxt.max(ack);
            if self.in_recovery {
                // Recovery ends once everything outstanding at its start is acknowledged
                // (RFC 6675 `RecoveryPoint`); a partial ACK keeps it going, cwnd unchanged.
                if ack > self.recover {
                    self.in_recovery = false;
                    self.high_rxt = None;
                    self.dupacks = 0;
                }
            } else {
                // The same growth as Reno (one segment per ACK in slow start).
                if self.cwnd < self.ssthresh {
                    self.cwnd += newly.min(1.0);
                } else {
                    self.cwnd += newly / self.cwnd;
                }
                self.cwnd = self.cwnd.min(self.max_cwnd);
                self.dupacks = 0;
            }
            if self.snd_nxt > self.snd_una {
                self.arm_rto(net, me);
            } else {
                self.timer_epoch += 1;
            }
        }
        let newly_sacked = self.board.mark(ack, blocks, self.high_sent);
        // RFC 6675 §2: a duplicate ACK is one at `snd_una` whose SACK blocks say something
        // new (a plain duplicate ACK, without SACK, counts too: the sink may not send SACK).
        if ack == self.snd_una
            && self.snd_nxt > self.snd_una
            && !self.in_recovery
            && (newly_sacked > 0 || blocks.is_empty())
        {
            self.dupacks += 1;
        }
        if !self.in_recovery
            && self.snd_nxt > self.snd_una
            && (ack > self.recover || self.recover == 0)
            && (self.dupacks >= DUP_THRESH || self.board.is_lost(self.snd_una))
        {
            // RFC 6675 §5 step (4): RecoveryPoint = HighData, halve, retransmit the first hole.
            self.in_recovery = true;
            self.recover = self.snd_nxt - 1;
            self.ssthresh = (self.flight() / 2.0).max(2.0);
            self.cwnd = self.ssthresh;
            let s = self.snd_una;
            self.send_seg(net, me, s);
            self.high_rxt = Some(s);
            self.arm_rto(net, me);
        }
        if self.in_recovery {
            self.send_in_recovery(net, me);
        } else {
            self.send_allowed(net, me);
        }
    }

    /// RFC 6675 §5 step (C): while `cwnd - pipe >= 1`, send `NextSeg`: (1) the lowest lost
    /// segment not yet retransmitted, (2) new data (within the receiver window `max_cwnd`),
    /// (3) the lowest unSACKed segment above the last retransmission. Rule (4), the rescue
    /// retransmission, is left out: it only matters when the application runs out of data,
    /// and a bulk sender never does.
    fn send_in_recovery(&mut self, net: &mut Net, me: AgentId) {
        let mut pipe = self.board.pipe(self.snd_nxt, self.high_rxt) as f64;
        while self.cwnd - pipe >= 1.0 {
            let high = self.snd_nxt;
            let new_ok = self.snd_nxt < self.snd_una + self.max_cwnd as u64
                && self.limit.is_none_or(|l| self.snd_nxt < l);
            let seg = match self.board.next_lost(high, self.high_rxt) {
                Some(s) => Some(s),
                None if new_ok => None,
                None => match self.board.next_unsacked(high, self.high_rxt) {
                    Some(s) => Some(s),
                    None => break,
                },
            };
            match seg {
                Some(s) => {
                    self.send_seg(net, me, s);
                    self.high_rxt = Some(s);
                }
                None => {
                    let s = self.snd_nxt;
                    self.send_seg(net, me, s);
                    self.snd_nxt += 1;
                }
            }
            pipe += 1.0;
        }
    }

    fn on_rto(&mut self, net: &mut Net, me: AgentId) {
        if self.snd_nxt == self.snd_una {
            return;
        }
        // RFC 2018 §8 / RFC 6675 §5.1: a timeout may mean the receiver reneged; forget
        // what it SACKed and end recovery (RecoveryPoint = HighData, below).
        self.board.clear();
        self.high_rxt = None;
        self.timeouts += 1;
        self.acc_epoch += 1;
        self.ssthresh = (self.flight() / 2.0).max(2.0);
        self.cwnd = 1.0;
        self.in_recovery = false;
        self.dupacks = 0;
        self.recover = self.snd_nxt.saturating_sub(1);
        self.karn_until = self.high_sent;
        self.snd_nxt = self.snd_una;
        self.rto = (self.rto * 2.0).min(60.0);
        let s = self.snd_nxt;
        self.send_seg(net, me, s);
        self.snd_nxt += 1;
        self.arm_rto(net, me);
    }
}

impl Agent for TcpSender {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                self.send_allowed(net, me);
            }
            Command::Stop => {
                self.running = false;
                self.timer_epoch += 1;
            }
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        match pkt.body {
            Body::Ack { ack, echo } if self.running => self.on_ack(net, me, ack, echo),
            Body::SackAck { ack, echo, blocks } if self.running => {
                if self.variant == Variant::Sack {
                    self.on_sack_ack(net, me, ack, echo, &blocks);
                } else {
                    self.on_ack(net, me, ack, echo);
                }
            }
            Body::AccNotify(n) if self.running => self.on_acc_notify(net, me, n),
            _ => {}
        }
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if self.running && token == self.token_base + self.timer_epoch {
            self.on_rto(net, me);
        }
    }
}

/// The sink: cumulative ACK per segment (or, with [`TcpSink::with_delayed_ack`], Linux's
/// delayed ACKs), goodput (new in-order or buffered data, no duplicates, payload bytes only)
/// into a monitor.
pub struct TcpSink {
    node: NodeId,
    mon: MonId,
    next: u64,
    ooo: RecvBuffer,
    header: u32,
    sack: bool,
    delayed: bool,
    /// In-order segments received since the last ACK (delayed ACKs).
    unacked: u32,
    /// Segments still ACKed at once at the start (Linux's quick-ACK mode).
    quick: u32,
    delack_epoch: u64,
    /// The sender and the echo of the segment the pending delayed ACK answers.
    pending: Option<(NodeId, AgentId, u32, Time, u64)>,
}

/// Linux's delayed-ACK timer (`TCP_DELACK_MIN`).
pub const DELACK_S: f64 = 0.04;
/// Segments ACKed one by one at the start of a connection (Linux quick-ACK mode, for a
/// receive window of at least 16 segments).
pub const QUICK_ACKS: u32 = 16;

impl TcpSink {
    /// A sink on `node` recording into `mon`.
    pub fn new(node: NodeId, mon: MonId) -> Self {
        TcpSink {
            node,
            mon,
            next: 0,
            ooo: RecvBuffer::default(),
            header: 0,
            sack: false,
            delayed: false,
            unacked: 0,
            quick: QUICK_ACKS,
            delack_epoch: 0,
            pending: None,
        }
    }

    /// ACKs carry SACK blocks (RFC 2018), for a `Variant::Sack` sender.
    pub fn with_sack(mut self, on: bool) -> Self {
        self.sack = on;
        self
    }

    /// Goodput counts the payload: `header` bytes of every segment are not data
    /// ([`TcpSender::with_header`]).
    pub fn with_header(mut self, header: u32) -> Self {
        self.header = header;
        self
    }

    /// Linux's delayed ACKs: after the first [`QUICK_ACKS`] segments, one ACK for every second
    /// in-order segment or [`DELACK_S`] after the first unacknowledged one; an out-of-order
    /// segment, or one that fills a hole, is ACKed at once (RFC 5681 §4.2). The ACK echoes the
    /// send time of the oldest segment it acknowledges (RFC 7323's TS.Recent).
    pub fn with_delayed_ack(mut self, on: bool) -> Self {
        self.delayed = on;
        self
    }

    fn send_ack(
        &mut self,
        net: &mut Net,
        me: AgentId,
        to: (NodeId, AgentId, u32),
        echo: Time,
        trigger: u64,
    ) {
        let ack = self.next;
        let body = if self.sack {
            Body::SackAck {
                ack,
                echo,
                blocks: self.ooo.sack(ack, trigger),
            }
        } else {
            Body::Ack { ack, echo }
        };
        self.unacked = 0;
        self.pending = None;
        self.delack_epoch += 1;
        net.send(Packet {
            src: self.node,
            src_agent: me,
            dst: Dest::Agent(to.0, to.1),
            size: ACK_SIZE,
            flow: to.2,
            sent_at: net.now(),
            body,
        });
    }
}

impl Agent for TcpSink {
    fn command(&mut self, net: &mut Net, _me: AgentId, cmd: Command) {
        if cmd == Command::Start {
            net.monitors.started(self.mon, net.now());
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        let (Body::Tcp { seq } | Body::AccTcp { seq, .. }) = pkt.body else {
            return;
        };
        let now = net.now();
        let had_holes = self.ooo.block_count() > 0;
        let in_order = seq == self.next;
        let new = seq >= self.next && !self.ooo.contains(seq);
        if new {
            net.monitors
                .packet(self.mon, now, pkt.size.saturating_sub(self.header).max(1));
            self.next = self.ooo.receive(self.next, seq);
        }
        let to = (pkt.src, pkt.src_agent, pkt.flow);
        if !self.delayed {
            return self.send_ack(net, me, to, pkt.sent_at, seq);
        }
        let echo = self.pending.map_or(pkt.sent_at, |p| p.3);
        if !in_order || had_holes || !new || self.quick > 0 || self.unacked >= 1 {
            self.quick = self.quick.saturating_sub(1);
            return self.send_ack(net, me, to, echo, seq);
        }
        self.unacked += 1;
        self.pending = Some((to.0, to.1, to.2, echo, seq));
        self.delack_epoch += 1;
        net.set_timer(
            me,
            now + std::time::Duration::from_secs_f64(DELACK_S),
            self.delack_epoch,
        );
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        if token != self.delack_epoch {
            return;
        }
        if let Some((n, a, f, echo, seq)) = self.pending {
            self.send_ack(net, me, (n, a, f), echo, seq);
        }
    }
}
