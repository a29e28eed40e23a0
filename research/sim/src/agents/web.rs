//! Web-like background traffic (`plm.md` §6.3, after Feldmann et al.): HTTP/1.0 page fetches
//! over TCP Reno, each page one object from a random server.
//!
//! `sessions` sessions start with exponential gaps (mean `mean_session_gap_s`); each belongs to
//! a random client and fetches `pages` pages one after another, waiting an exponential think
//! time (mean `mean_think_s`) between the end of one object and the request of the next. The
//! object size is Pareto II (Lomax) with mean `mean_object_packets` and shape `shape`, i.e.
//! scale `mean·(shape − 1)`, rounded to whole packets (at least one). The request itself is
//! not modelled (a page starts with the first data segment), and there is no connection
//! set-up handshake.
//!
//! One [`TcpSender`]/[`TcpSink`] pair per (server, client) pair, created when first used, is one
//! fair-queueing flow (`plm.md` §6.2: "an FQ flow is one (source, receiver) pair for TCP"); an
//! object on an idle pair starts a fresh slow start (a new HTTP/1.0 connection). Virtual servers
//! and clients are spread round-robin over the scenario's server and client nodes, so a few
//! nodes carry many flows. All of it is one agent: the senders' RTO timers carry
//! `(pair + 1) << 32` in their tokens, session timers the session index.

use crate::agents::tcp::{TcpSender, TcpSink, Variant};
use crate::engine::{Agent, AgentId, Body, Command, Dest, Net, NodeId, Packet};
use crate::metrics::MonId;
use netmodel::rng::Rng;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Parameters of the generator.
#[derive(Clone, Debug)]
pub struct WebConfig {
    pub server_nodes: Vec<NodeId>,
    pub client_nodes: Vec<NodeId>,
    pub servers: u32,
    pub clients: u32,
    pub sessions: u32,
    pub pages: u32,
    pub mean_session_gap_s: f64,
    pub mean_think_s: f64,
    pub mean_object_packets: f64,
    pub shape: f64,
    pub packet_size: u32,
    pub max_cwnd: u32,
    /// First fair-queueing flow id; pair (s, c) is `flow_base + s·clients + c`.
    pub flow_base: u32,
}

struct Pair {
    sender: TcpSender,
    sink: TcpSink,
    /// Objects in flight on this pair: (end segment, session), in order.
    waiting: VecDeque<(u64, u32)>,
    sent_total: u64,
}

struct Session {
    client: u32,
    pages_left: u32,
}

/// The whole background as one agent.
pub struct WebBackground {
    cfg: WebConfig,
    rng: Rng,
    mon: MonId,
    pairs: Vec<Pair>,
    by_flow: BTreeMap<u32, usize>,
    sessions: Vec<Session>,
    running: bool,
    /// Objects started and completed, segments requested (for tests and reports).
    pub objects_started: u64,
    pub objects_done: u64,
    pub segments_requested: u64,
}

const SESSION_START: u64 = 1 << 31;

/// Lomax (Pareto II) object size in whole packets (at least one) for a uniform draw `u` in
/// [0, 1): inverse CDF `scale·((1 − u)^(−1/shape) − 1)` with `scale = mean·(shape − 1)`, so the
/// continuous mean is `mean` (plm.md §6.3: 12 packets, shape 1.2, scale 2.4).
pub fn lomax_packets(u: f64, mean: f64, shape: f64) -> u64 {
    let scale = mean * (shape - 1.0);
    let v = (1.0 - u).clamp(1e-300, 1.0);
    let x = scale * (v.powf(-1.0 / shape) - 1.0);
    // The clamp only bounds the astronomically unlikely tail, keeping u64 arithmetic sane.
    x.round().clamp(1.0, 1e9) as u64
}

impl WebBackground {
    /// A generator recording the goodput of all its transfers into `mon`.
    pub fn new(cfg: WebConfig, mon: MonId, rng: Rng) -> Self {
        WebBackground {
            cfg,
            rng,
            mon,
            pairs: Vec::new(),
            by_flow: BTreeMap::new(),
            sessions: Vec::new(),
            running: false,
            objects_started: 0,
            objects_done: 0,
            segments_requested: 0,
        }
    }

    fn object_packets(&mut self) -> u64 {
        let u = self.rng.f64();
        lomax_packets(u, self.cfg.mean_object_packets, self.cfg.shape)
    }

    fn pair_for(&mut self, me: AgentId, server: u32, client: u32) -> usize {
        let flow = self.cfg.flow_base + server * self.cfg.clients + client;
        if let Some(&i) = self.by_flow.get(&flow) {
            return i;
        }
        let i = self.pairs.len();
        let s_node = self.cfg.server_nodes[server as usize % self.cfg.server_nodes.len()];
        let c_node = self.cfg.client_nodes[client as usize % self.cfg.client_nodes.len()];
        self.pairs.push(Pair {
            sender: TcpSender::new(
                s_node,
                Dest::Agent(c_node, me),
                flow,
                self.cfg.packet_size,
                Variant::Reno,
                self.cfg.max_cwnd,
            )
            .for_objects((i as u64 + 1) << 32),
            sink: TcpSink::new(c_node, self.mon),
            waiting: VecDeque::new(),
            sent_total: 0,
        });
        self.by_flow.insert(flow, i);
        i
    }

    fn fetch(&mut self, net: &mut Net, me: AgentId, session: u32) {
        let server = (self.rng.f64() * f64::from(self.cfg.servers)) as u32 % self.cfg.servers;
        let client = self.sessions[session as usize].client;
        let i = self.pair_for(me, server, client);
        let n = self.object_packets();
        self.objects_started += 1;
        self.segments_requested += n;
        let p = &mut self.pairs[i];
        p.sent_total += n;
        p.waiting.push_back((p.sent_total, session));
        p.sender.push_object(net, me, n);
    }

    fn page_done(&mut self, net: &mut Net, me: AgentId, session: u32) {
        self.objects_done += 1;
        let s = &mut self.sessions[session as usize];
        if s.pages_left == 0 {
            return;
        }
        let think = self.rng.exp(self.cfg.mean_think_s);
        net.set_timer(
            me,
            net.now() + Duration::from_secs_f64(think),
            u64::from(session),
        );
    }
}

impl Agent for WebBackground {
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command) {
        match cmd {
            Command::Start if !self.running => {
                self.running = true;
                net.monitors.started(self.mon, net.now());
                let mut t = net.now();
                for k in 0..self.cfg.sessions {
                    if k > 0 {
                        t += Duration::from_secs_f64(self.rng.exp(self.cfg.mean_session_gap_s));
                    }
                    let client =
                        (self.rng.f64() * f64::from(self.cfg.clients)) as u32 % self.cfg.clients;
                    self.sessions.push(Session {
                        client,
                        pages_left: self.cfg.pages,
                    });
                    net.set_timer(me, t, SESSION_START | u64::from(k));
                }
            }
            Command::Stop => self.running = false,
            _ => {}
        }
    }

    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet) {
        let Some(&i) = self.by_flow.get(&pkt.flow) else {
            return;
        };
        match pkt.body {
            Body::Tcp { .. } => self.pairs[i].sink.on_packet(net, me, pkt),
            Body::Ack { .. } => {
                self.pairs[i].sender.on_packet(net, me, pkt);
                let acked = self.pairs[i].sender.acked();
                while let Some(&(end, session)) = self.pairs[i].waiting.front() {
                    if acked < end {
                        break;
                    }
                    self.pairs[i].waiting.pop_front();
                    if self.running {
                        self.page_done(net, me, session);
                    }
                }
            }
            _ => {}
        }
    }

    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64) {
        let pair = token >> 32;
        if pair > 0 {
            if let Some(p) = self.pairs.get_mut(pair as usize - 1) {
                p.sender.on_timer(net, me, token);
            }
            return;
        }
        if !self.running {
            return;
        }
        let session = (token & !SESSION_START & 0xffff_ffff) as u32;
        let Some(s) = self.sessions.get_mut(session as usize) else {
            return;
        };
        if s.pages_left == 0 {
            return;
        }
        s.pages_left -= 1;
        self.fetch(net, me, session);
    }
}

#[cfg(test)]
mod tests {
    use super::lomax_packets;

    #[test]
    fn lomax_sizes_follow_the_inverse_cdf() {
        // Median of Lomax(scale 2.4, shape 1.2) = 2.4·(2^(1/1.2) − 1) = 1.874 → 2 packets.
        assert_eq!(lomax_packets(0.5, 12.0, 1.2), 2);
        assert_eq!(lomax_packets(0.0, 12.0, 1.2), 1);
        // 99th percentile: 2.4·(100^(1/1.2) − 1) = 109.0.
        assert_eq!(lomax_packets(0.99, 12.0, 1.2), 109);
        // A light tail (shape 3) so the sample mean converges: ≈ 12 (+ rounding, − the floor
        // of 1 packet that lifts small draws).
        let n = 200_000;
        let m: f64 = (0..n)
            .map(|i| lomax_packets((i as f64 + 0.5) / n as f64, 12.0, 3.0) as f64)
            .sum::<f64>()
            / n as f64;
        assert!((m - 12.0).abs() < 0.3, "mean {m}");
        assert_eq!(lomax_packets(1.0, 12.0, 1.2), 1_000_000_000);
    }
}
