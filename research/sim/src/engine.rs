//! The discrete-event core: virtual time, a deterministic event queue, nodes, links that
//! serialise at their rate, static unicast routing and source-rooted multicast trees with graft
//! and prune latencies.
//!
//! Determinism: events are ordered by (time, insertion sequence), so two events at the same
//! instant run in the order they were scheduled; every random draw comes from a generator
//! derived from the run's seed and the component's index. No hash-map iteration, no wall clock.

use crate::metrics::Monitors;
use congestion::Time;
use netmodel::rng::Rng;
use netmodel::{DropReason, QueueDiscipline, Queued};
use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Index of a node.
pub type NodeId = usize;
/// Index of a unidirectional link.
pub type LinkId = usize;
/// Index of an agent (a traffic source or sink attached to a node).
pub type AgentId = usize;
/// Index of a multicast group.
pub type GroupId = usize;

/// Where a packet goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dest {
    /// Unicast to one agent on one node.
    Agent(NodeId, AgentId),
    /// A multicast group (delivered along its source-rooted tree).
    Group(GroupId),
}

/// What a packet carries.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Body {
    /// A layered-session data packet.
    Layer {
        layer: u8,
        seq: u64,
        bunch_pos: u8,
        bunch_len: u8,
    },
    /// A TCP data segment (sequence number in segments).
    Tcp { seq: u64 },
    /// A TCP acknowledgement: next expected segment, and the echoed send time of the segment
    /// that triggered it (for RTT samples).
    Ack { ack: u64, echo: Time },
    /// A TCP acknowledgement with a SACK option (`agents::sack`, RFC 2018).
    SackAck {
        ack: u64,
        echo: Time,
        blocks: crate::agents::sack::SackBlocks,
    },
    /// A CBR / on-off datagram.
    Datagram { seq: u64 },
    /// A TFMCC data packet with its header-extension fields.
    Tfmcc(congestion::wire::tfmcc::TfmccDataFields),
    /// A TFRC (or PCC) data packet with its header fields (`agents::tfrc`).
    Tfrc(congestion::wire::tfrc::TfrcDataFields),
    /// Opaque bytes (a TFMCC receiver report), stored in [`Net::blobs`].
    Blob { idx: u32 },
    /// An ACC TCP data segment: the sequence number plus the sender's congestion state that
    /// an active router reads when it drops the segment (`agents::acc`).
    AccTcp {
        seq: u64,
        state: crate::agents::acc::AccState,
    },
    /// An active router's notification to an ACC TCP sender (`agents::acc`).
    AccNotify(crate::agents::acc::AccNotify),
    /// An AER/NCA or PGMCC capsule (`agents::aer`, `agents::pgmcc`).
    Capsule(crate::agents::aer::Capsule),
}

/// A simulated packet.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Packet {
    /// Sending node.
    pub src: NodeId,
    /// Sending agent (where ACKs go).
    pub src_agent: AgentId,
    /// Destination.
    pub dst: Dest,
    /// Size on the wire, bytes.
    pub size: u32,
    /// Flow id: the fair queue's flow and the metrics' flow (a layered session is one flow).
    pub flow: u32,
    /// When the sender sent it.
    pub sent_at: Time,
    /// Payload.
    pub body: Body,
}

/// What an agent is told to do by the schedule.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Command {
    Start,
    Stop,
    /// Change the sending rate (CBR, on/off), bit/s.
    SetRate(u64),
}

/// A change to a link from the schedule.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkChange {
    pub rate_bps: Option<u64>,
    pub delay: Option<Time>,
    pub loss: Option<f64>,
}

/// An event. Kept to 16 bytes so a heap entry is 32 (the heap holds one timer per receiver:
/// with 10,000 receivers its sift-down walked cold 120-byte entries on every pop); the
/// payloads of packet arrivals and of the rare schedule events wait in [`Net::slab`].
#[derive(Clone, Copy, Debug)]
enum Ev {
    /// A packet (in slab slot `slot`) reaches `node`.
    Arrive {
        node: u32,
        slot: u32,
    },
    TxDone {
        link: u32,
    },
    Timer {
        agent: u32,
        token: u64,
    },
    /// A command, membership change or link change (in slab slot `slot`).
    Other {
        slot: u32,
    },
}

/// Payload of an event whose data does not fit in [`Ev`].
#[derive(Clone, Debug)]
enum Payload {
    Packet(Packet),
    Command {
        agent: AgentId,
        cmd: Command,
    },
    Membership {
        group: GroupId,
        node: NodeId,
        agent: AgentId,
        delta: i32,
    },
    LinkChange {
        link: LinkId,
        change: LinkChange,
    },
}

/// Slots for event payloads, reused through a free list (no allocation per packet once the
/// run is warm; a slot is taken when its event is scheduled and freed when it runs).
#[derive(Default)]
struct Slab {
    slots: Vec<Option<Payload>>,
    free: Vec<u32>,
}

impl Slab {
    fn put(&mut self, p: Payload) -> u32 {
        if let Some(i) = self.free.pop() {
            self.slots[i as usize] = Some(p);
            i
        } else {
            self.slots.push(Some(p));
            u32::try_from(self.slots.len() - 1).expect("fewer than 2^32 pending events")
        }
    }

    fn take(&mut self, i: u32) -> Option<Payload> {
        let p = self.slots.get_mut(i as usize)?.take();
        if p.is_some() {
            self.free.push(i);
        }
        p
    }
}

struct Entry {
    at: Time,
    seq: u64,
    ev: Ev,
}

// A heap entry stays at 32 bytes (two per cache line).
const _: () = assert!(std::mem::size_of::<Entry>() == 32);

impl PartialEq for Entry {
    fn eq(&self, o: &Self) -> bool {
        self.at == o.at && self.seq == o.seq
    }
}
impl Eq for Entry {}
impl PartialOrd for Entry {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Entry {
    /// Reversed so the max-heap pops the earliest (time, seq).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.at, o.seq).cmp(&(self.at, self.seq))
    }
}

/// A unidirectional link.
pub struct Link {
    pub name: String,
    pub from: NodeId,
    pub to: NodeId,
    pub rate_bps: u64,
    pub delay: Time,
    /// Random (non-congestion) loss probability per packet.
    pub loss: f64,
    /// Extra propagation delay drawn uniformly in [0, jitter) per packet, never reordering
    /// (a packet arrives no earlier than the one before it on this link).
    pub jitter: Time,
    last_arrival: Time,
    queue: Box<dyn QueueDiscipline<Packet>>,
    busy: bool,
    /// When the packet being serialised finishes (valid while `busy`).
    tx_end: Time,
    /// The packet being serialised (kept here so TxDone events carry no payload).
    tx: Option<Packet>,
    rng: Rng,
    /// Packets and bytes that finished serialisation.
    pub sent_packets: u64,
    pub sent_bytes: u64,
    /// Drops: queue overflow, early (AQM), random wire loss.
    pub drops_overflow: u64,
    pub drops_early: u64,
    pub drops_wire: u64,
    /// Packets an ACC active router's per-flow filter discarded before the queue.
    pub drops_filter: u64,
    /// Packets that finished serialisation per flow id (sized by the scenario builder when a
    /// metric needs per-link shares, e.g. AER/NCA's bandwidth usage; empty otherwise).
    pub flow_sent: Vec<u64>,
}

impl Link {
    /// Packets waiting in the queue.
    pub fn queue_len(&self) -> usize {
        self.queue.len_packets()
    }
    /// The queueing delay a packet arriving at `now` would see before its own serialisation
    /// starts (virtual waiting time), seconds: the queued bytes at the link rate plus the rest
    /// of the packet in service.
    pub fn waiting_time_s(&self, now: Time) -> f64 {
        let residual = if self.busy {
            self.tx_end.0.saturating_sub(now.0) as f64 * 1e-9
        } else {
            0.0
        };
        self.queue.len_bytes() as f64 * 8.0 / (self.rate_bps.max(1) as f64) + residual
    }
}

/// Multicast router behaviour.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MulticastTiming {
    /// Time from a receiver's join until the tree forwards the group to it (IGMP report +
    /// graft).
    pub join_latency: Time,
    /// Time from a receiver's leave until the branch is pruned (IGMPv2: last-member queries).
    pub leave_latency: Time,
}

impl Default for MulticastTiming {
    /// IGMPv2-like: joins take effect after 10 ms, leaves after 2 s (last-member query
    /// interval 1 s × robustness 2).
    fn default() -> Self {
        MulticastTiming {
            join_latency: Time::from_millis(10),
            leave_latency: Time::from_millis(2000),
        }
    }
}

struct Group {
    source: NodeId,
    /// Per link: receivers downstream that hold the group (router state).
    link_count: Vec<u32>,
    /// Per node: (agent, count) the last-hop router delivers the group to.
    members: Vec<Vec<(AgentId, i32)>>,
}

/// Everything agents may touch: the network, the clock, the event queue and the monitors.
pub struct Net {
    now: Time,
    seq: u64,
    heap: BinaryHeap<Entry>,
    slab: Slab,
    pub links: Vec<Link>,
    /// Outgoing links per node.
    out_links: Vec<Vec<LinkId>>,
    /// `next_hop[from][to]`: the link to take from `from` toward `to`.
    next_hop: Vec<Vec<Option<LinkId>>>,
    groups: Vec<Group>,
    pub multicast: MulticastTiming,
    /// Node each agent sits on.
    pub agent_node: Vec<NodeId>,
    /// Metrics sink.
    pub monitors: Monitors,
    /// Events processed so far.
    pub events: u64,
    /// Packets that could not be routed (no path): counted, never a panic.
    pub unroutable: u64,
    /// Drops per flow id (any link, any reason).
    pub flow_drops: Vec<u64>,
    /// TCP segments sent and retransmitted per flow id (the specs' packet retransmission
    /// ratio, PRR); sized by the scenario builder.
    pub flow_sent: Vec<u64>,
    pub flow_retx: Vec<u64>,
    /// Payloads of [`Body::Blob`] packets (kept for the run; reports are few).
    pub blobs: Vec<Vec<u8>>,
    /// ACC active routers, by link (the queue they watch): empty unless a scenario asks.
    pub acc: Vec<Option<crate::agents::acc::AccRouter>>,
}

impl Net {
    /// Current virtual time.
    #[inline]
    pub fn now(&self) -> Time {
        self.now
    }

    fn push(&mut self, at: Time, ev: Ev) {
        self.seq += 1;
        self.heap.push(Entry {
            at,
            seq: self.seq,
            ev,
        });
    }

    /// Schedules an event whose payload waits in the slab.
    fn push_payload(&mut self, at: Time, p: Payload) {
        let slot = self.slab.put(p);
        self.push(at, Ev::Other { slot });
    }

    /// Asks for `on_timer(token)` on `agent` at `at` (never earlier than now).
    pub fn set_timer(&mut self, agent: AgentId, at: Time, token: u64) {
        let at = at.max(self.now);
        let agent = u32::try_from(agent).expect("fewer than 2^32 agents");
        self.push(at, Ev::Timer { agent, token });
    }

    /// Schedules a command for an agent (used by the scenario builder).
    pub fn schedule_command(&mut self, at: Time, agent: AgentId, cmd: Command) {
        self.push_payload(at, Payload::Command { agent, cmd });
    }

    /// Schedules a link change.
    pub fn schedule_link_change(&mut self, at: Time, link: LinkId, change: LinkChange) {
        self.push_payload(at, Payload::LinkChange { link, change });
    }

    /// Sends opaque bytes (a wire encoding: TFMCC report, TFRC data fields or feedback) from
    /// agent `src_agent` on `src` to agent `dst` now, as a packet of `size` bytes on the wire;
    /// the bytes are kept in [`Net::blobs`] and the packet carries their index.
    pub fn send_blob(
        &mut self,
        (src, src_agent): (NodeId, AgentId),
        dst: (NodeId, AgentId),
        flow: u32,
        size: u32,
        bytes: Vec<u8>,
    ) {
        self.blobs.push(bytes);
        let idx = (self.blobs.len() - 1) as u32;
        let sent_at = self.now();
        self.send(Packet {
            src,
            src_agent,
            dst: Dest::Agent(dst.0, dst.1),
            size,
            flow,
            sent_at,
            body: Body::Blob { idx },
        });
    }

    /// Sends a packet from its source node now.
    pub fn send(&mut self, pkt: Packet) {
        self.forward(pkt.src, pkt);
    }

    /// Creates a multicast group rooted at `source`.
    pub fn add_group(&mut self, source: NodeId) -> GroupId {
        self.groups.push(Group {
            source,
            link_count: vec![0; self.links.len()],
            members: vec![Vec::new(); self.out_links.len()],
        });
        self.groups.len() - 1
    }

    /// The receiver `agent` on `node` joins `group`; the tree reaches it after the join latency.
    pub fn join(&mut self, group: GroupId, node: NodeId, agent: AgentId) {
        let at = self.now + duration(self.multicast.join_latency);
        self.push_payload(
            at,
            Payload::Membership {
                group,
                node,
                agent,
                delta: 1,
            },
        );
    }

    /// The receiver leaves `group`; the branch is pruned after the leave latency.
    pub fn leave(&mut self, group: GroupId, node: NodeId, agent: AgentId) {
        let at = self.now + duration(self.multicast.leave_latency);
        self.push_payload(
            at,
            Payload::Membership {
                group,
                node,
                agent,
                delta: -1,
            },
        );
    }

    /// The links of the unicast route from `from` to `to` (empty when equal; `None` when
    /// unreachable), e.g. for an agent that must know which active nodes its traffic crosses.
    pub fn route(&self, from: NodeId, to: NodeId) -> Option<Vec<LinkId>> {
        let mut v = Vec::new();
        let mut at = from;
        while at != to {
            let l = self.next_hop.get(at)?.get(to).copied().flatten()?;
            v.push(l);
            at = self.links[l].to;
            if v.len() > self.links.len() {
                return None;
            }
        }
        Some(v)
    }

    /// Whether the tree currently forwards `group` on `link` (for tests and leave-latency
    /// measurements).
    pub fn forwards(&self, group: GroupId, link: LinkId) -> bool {
        self.groups[group].link_count[link] > 0
    }

    fn apply_membership(&mut self, group: GroupId, node: NodeId, agent: AgentId, delta: i32) {
        let src = self.groups[group].source;
        // Walk the unicast path source → node: that is the tree branch.
        let mut at = src;
        let mut hops = 0;
        while at != node {
            let Some(l) = self.next_hop[at][node] else {
                self.unroutable += 1;
                return;
            };
            let c = &mut self.groups[group].link_count[l];
            *c = c.saturating_add_signed(delta);
            at = self.links[l].to;
            hops += 1;
            if hops > self.links.len() {
                return;
            }
        }
        let members = &mut self.groups[group].members[node];
        if let Some(m) = members.iter_mut().find(|m| m.0 == agent) {
            m.1 += delta;
        } else {
            members.push((agent, delta));
        }
    }

    fn forward(&mut self, node: NodeId, pkt: Packet) {
        match pkt.dst {
            Dest::Agent(n, _) => {
                if n == node {
                    return; // delivered by the caller
                }
                match self.next_hop[node][n] {
                    Some(l) => self.enqueue(l, pkt),
                    None => self.unroutable += 1,
                }
            }
            Dest::Group(g) => {
                for i in 0..self.out_links[node].len() {
                    let l = self.out_links[node][i];
                    if self.groups[g].link_count[l] > 0 {
                        self.enqueue(l, pkt);
                    }
                }
            }
        }
    }

    fn enqueue(&mut self, l: LinkId, pkt: Packet) {
        let now = self.now;
        let link = &mut self.links[l];
        let mut acc = self.acc.get_mut(l).and_then(Option::as_mut);
        if let Some(r) = acc.as_mut() {
            if !r.admit(&pkt) {
                link.drops_filter += 1;
                if let Some(c) = self.flow_drops.get_mut(pkt.flow as usize) {
                    *c += 1;
                }
                return;
            }
        }
        let dropped = link
            .queue
            .enqueue(now, Queued::new(pkt, pkt.size, u64::from(pkt.flow)));
        let mut notes = Vec::new();
        for (d, why) in dropped {
            match why {
                DropReason::Overflow => link.drops_overflow += 1,
                DropReason::Early => link.drops_early += 1,
            }
            if let Some(c) = self.flow_drops.get_mut(d.item.flow as usize) {
                *c += 1;
            }
            if let Some(r) = acc.as_mut() {
                notes.extend(r.on_drop(&d.item, link.from));
            }
        }
        let from = link.from;
        // The router's notifications leave from the congested router (the link's tail).
        for n in notes {
            self.forward(from, n);
        }
        if !self.links[l].busy {
            self.start_tx(l);
        }
    }

    fn start_tx(&mut self, l: LinkId) {
        let now = self.now;
        let link = &mut self.links[l];
        let next = link.queue.dequeue(now);
        // An AQM that drops at dequeue (CoDel) hands its drops over here.
        for (d, why) in link.queue.take_dropped() {
            match why {
                DropReason::Overflow => link.drops_overflow += 1,
                DropReason::Early => link.drops_early += 1,
            }
            if let Some(c) = self.flow_drops.get_mut(d.item.flow as usize) {
                *c += 1;
            }
        }
        if let Some(p) = next {
            link.busy = true;
            let tx = tx_time(p.size, link.rate_bps);
            // Serialisation ends at now + tx; the packet rides with the TxDone event.
            link.tx = Some(p.item);
            let at = Time(now.0 + tx);
            link.tx_end = at;
            let link = u32::try_from(l).expect("fewer than 2^32 links");
            self.push(at, Ev::TxDone { link });
        } else {
            link.busy = false;
        }
    }
}

/// Serialisation time of `size` bytes at `rate_bps`, nanoseconds, rounded up (so a link never
/// runs faster than its nominal rate), at least 1 ns.
#[inline]
pub fn tx_time(size: u32, rate_bps: u64) -> u64 {
    let r = rate_bps.max(1);
    (u64::from(size) * 8 * 1_000_000_000).div_ceil(r).max(1)
}

fn duration(t: Time) -> std::time::Duration {
    std::time::Duration::from_nanos(t.0)
}

/// A traffic source or sink.
pub trait Agent {
    /// The schedule starts, stops or re-rates the agent.
    fn command(&mut self, net: &mut Net, me: AgentId, cmd: Command);
    /// A packet addressed to this agent (or a group it is a member of) arrived.
    fn on_packet(&mut self, net: &mut Net, me: AgentId, pkt: &Packet);
    /// A timer set with [`Net::set_timer`] fired.
    fn on_timer(&mut self, net: &mut Net, me: AgentId, token: u64);
    /// The run ended at `now`: flush whatever the monitors need.
    fn finish(&mut self, _net: &mut Net, _me: AgentId) {}
    /// A group packet will reach this agent shortly: load its state into the cache (a hint;
    /// big receiver populations are memory-bound). Default: the agent's own struct.
    fn prefetch(&self) {
        prefetch(
            self as *const Self as *const u8,
            std::mem::size_of_val(self),
        );
    }
    /// Second stage of [`Agent::prefetch`], a little later: the heap memory the agent's
    /// struct points to (reading the struct, which the first stage brought in). Default:
    /// nothing.
    fn prefetch_deep(&self) {}
}

/// Builder input for one link.
pub struct LinkSpec {
    pub name: String,
    pub from: NodeId,
    pub to: NodeId,
    pub rate_bps: u64,
    pub delay: Time,
    pub loss: f64,
    pub jitter: Time,
    pub queue: Box<dyn QueueDiscipline<Packet>>,
}

/// A simulation: the network plus its agents.
pub struct Sim {
    pub net: Net,
    pub agents: Vec<Box<dyn Agent>>,
    seed: u64,
}

impl Sim {
    /// A network of `nodes` nodes and these links, seeded with `seed`.
    pub fn new(nodes: usize, links: Vec<LinkSpec>, seed: u64) -> Sim {
        let mut out_links = vec![Vec::new(); nodes];
        let links: Vec<Link> = links
            .into_iter()
            .enumerate()
            .map(|(i, s)| {
                out_links[s.from].push(i);
                Link {
                    name: s.name,
                    from: s.from,
                    to: s.to,
                    rate_bps: s.rate_bps,
                    delay: s.delay,
                    loss: s.loss,
                    jitter: s.jitter,
                    last_arrival: Time::ZERO,
                    queue: s.queue,
                    busy: false,
                    tx_end: Time::ZERO,
                    tx: None,
                    rng: Rng::derive(seed, 0x1000 + i as u64),
                    sent_packets: 0,
                    sent_bytes: 0,
                    drops_overflow: 0,
                    drops_early: 0,
                    drops_wire: 0,
                    drops_filter: 0,
                    flow_sent: Vec::new(),
                }
            })
            .collect();
        let next_hop = routes(nodes, &links);
        Sim {
            net: Net {
                now: Time::ZERO,
                seq: 0,
                heap: BinaryHeap::with_capacity(1024),
                slab: Slab::default(),
                links,
                out_links,
                next_hop,
                groups: Vec::new(),
                multicast: MulticastTiming::default(),
                agent_node: Vec::new(),
                monitors: Monitors::default(),
                events: 0,
                unroutable: 0,
                flow_drops: Vec::new(),
                flow_sent: Vec::new(),
                flow_retx: Vec::new(),
                blobs: Vec::new(),
                acc: Vec::new(),
            },
            agents: Vec::new(),
            seed,
        }
    }

    /// The run's seed.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// Attaches an agent to `node`; returns its id.
    pub fn add_agent(&mut self, node: NodeId, agent: Box<dyn Agent>) -> AgentId {
        self.agents.push(agent);
        self.net.agent_node.push(node);
        self.agents.len() - 1
    }

    /// Whether `to` is reachable from `from`.
    pub fn reachable(&self, from: NodeId, to: NodeId) -> bool {
        from == to || self.net.next_hop[from][to].is_some()
    }

    /// Runs until the event queue is empty or virtual time passes `until`.
    pub fn run_until(&mut self, until: Time) {
        while let Some(top) = self.net.heap.peek() {
            if top.at > until {
                break;
            }
            let e = self.net.heap.pop().expect("peeked");
            self.net.now = e.at;
            self.net.events += 1;
            self.dispatch(e.ev);
        }
        self.net.now = self.net.now.max(until);
        for i in 0..self.agents.len() {
            self.agents[i].finish(&mut self.net, i);
        }
    }

    fn deliver(&mut self, node: NodeId, pkt: &Packet) {
        match pkt.dst {
            Dest::Agent(n, a) if n == node => {
                if let Some(agent) = self.agents.get_mut(a) {
                    agent.on_packet(&mut self.net, a, pkt);
                }
            }
            Dest::Agent(..) => {}
            Dest::Group(g) => {
                let n = self.net.groups[g].members[node].len();
                for i in 0..n {
                    // A large group is memory-bound (one agent's state per member, spread over
                    // the heap): fetch the next members' state while this one runs.
                    // Two stages: the struct 4 members ahead, then (once it is in the cache)
                    // what it points to 2 members ahead.
                    let m = &self.net.groups[g].members[node];
                    // Stage 0, far ahead: the member list and the agents' (data, vtable)
                    // pointers. Both are walked in order, but the members' state evicts them
                    // between packets, and the hardware streamer does not keep up: without
                    // this, the load of the next agent's vtable pointer was the run's
                    // largest single stall.
                    prefetch(m.as_ptr().wrapping_add(i + 4 * LIST_AHEAD) as *const u8, 16);
                    if let Some(&(b, _)) = m.get(i + LIST_AHEAD) {
                        prefetch(self.agents.as_ptr().wrapping_add(b) as *const u8, 16);
                    }
                    if let Some(&(b, _)) = m.get(i + 2 * PREFETCH_AHEAD) {
                        self.agents[b].prefetch();
                    }
                    if let Some(&(b, _)) = m.get(i + PREFETCH_AHEAD) {
                        self.agents[b].prefetch_deep();
                    }
                    let (a, c) = self.net.groups[g].members[node][i];
                    if c > 0 {
                        self.agents[a].on_packet(&mut self.net, a, pkt);
                    }
                }
            }
        }
    }

    fn dispatch(&mut self, ev: Ev) {
        match ev {
            Ev::Arrive { node, slot } => {
                if let Some(Payload::Packet(pkt)) = self.net.slab.take(slot) {
                    let node = node as NodeId;
                    self.deliver(node, &pkt);
                    self.net.forward(node, pkt);
                }
            }
            Ev::TxDone { link } => {
                let link = link as LinkId;
                let net = &mut self.net;
                let pkt = net.links[link].tx.take();
                if let Some(pkt) = pkt {
                    let l = &mut net.links[link];
                    l.sent_packets += 1;
                    l.sent_bytes += u64::from(pkt.size);
                    if let Some(c) = l.flow_sent.get_mut(pkt.flow as usize) {
                        *c += 1;
                    }
                    if l.loss > 0.0 && l.rng.chance(l.loss) {
                        l.drops_wire += 1;
                        if let Some(c) = net.flow_drops.get_mut(pkt.flow as usize) {
                            *c += 1;
                        }
                    } else {
                        let mut at = Time(net.now.0 + l.delay.0);
                        if l.jitter.0 > 0 {
                            at = Time(at.0 + (l.rng.f64() * l.jitter.0 as f64) as u64);
                            at = at.max(l.last_arrival);
                            l.last_arrival = at;
                        }
                        let node = u32::try_from(l.to).expect("fewer than 2^32 nodes");
                        let slot = net.slab.put(Payload::Packet(pkt));
                        net.push(at, Ev::Arrive { node, slot });
                    }
                }
                net.start_tx(link);
            }
            Ev::Timer { agent, token } => {
                let agent = agent as AgentId;
                if let Some(a) = self.agents.get_mut(agent) {
                    a.on_timer(&mut self.net, agent, token);
                }
            }
            Ev::Other { slot } => match self.net.slab.take(slot) {
                Some(Payload::Command { agent, cmd }) => {
                    if let Some(a) = self.agents.get_mut(agent) {
                        a.command(&mut self.net, agent, cmd);
                    }
                }
                Some(Payload::Membership {
                    group,
                    node,
                    agent,
                    delta,
                }) => self.net.apply_membership(group, node, agent, delta),
                Some(Payload::LinkChange { link, change }) => {
                    let l = &mut self.net.links[link];
                    if let Some(r) = change.rate_bps {
                        l.rate_bps = r.max(1);
                    }
                    if let Some(d) = change.delay {
                        l.delay = d;
                    }
                    if let Some(p) = change.loss {
                        l.loss = p;
                    }
                }
                Some(Payload::Packet(_)) | None => {}
            },
        }
    }
}

/// How many members ahead [`Sim::deliver`] prefetches.
const PREFETCH_AHEAD: usize = 2;
/// How far ahead it prefetches the agent table entries (the member list: 4 times as far).
const LIST_AHEAD: usize = 8;

/// Hints the CPU to load `len` bytes (at most 1 KiB) from `p` into the cache. Only a hint:
/// a prefetch never faults and reads nothing architecturally, so results cannot change.
#[inline]
pub fn prefetch(p: *const u8, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        if p.is_null() {
            return;
        }
        // Every line the span touches: from the line holding `p` to the one holding its last
        // byte (a struct is rarely line-aligned, so stepping 64 from `p` misses the last line).
        let len = len.min(1024);
        let mut off = 0;
        let end = (p as usize % 64) + len;
        let p = p.wrapping_sub(p as usize % 64);
        while off < end {
            // SAFETY: `_mm_prefetch` is a hint that cannot fault, whatever the address
            // (`wrapping_add` keeps the pointer arithmetic defined).
            #[allow(unused_unsafe)]
            unsafe {
                std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
                    p.wrapping_add(off) as *const i8,
                );
            }
            off += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (p, len);
}

/// Shortest paths by propagation delay plus 1 µs per hop (so zero-delay links still prefer
/// fewer hops); ties broken by link index, so routes are deterministic.
fn routes(n: usize, links: &[Link]) -> Vec<Vec<Option<LinkId>>> {
    let mut next = vec![vec![None; n]; n];
    for src in 0..n {
        // Dijkstra from src; record the first link on the path to every node.
        let mut dist = vec![u64::MAX; n];
        let mut first: Vec<Option<LinkId>> = vec![None; n];
        let mut done = vec![false; n];
        dist[src] = 0;
        for _ in 0..n {
            let Some(u) = (0..n)
                .filter(|&v| !done[v] && dist[v] != u64::MAX)
                .min_by_key(|&v| (dist[v], v))
            else {
                break;
            };
            done[u] = true;
            for (i, l) in links.iter().enumerate() {
                if l.from != u {
                    continue;
                }
                let d = dist[u] + l.delay.0 + 1_000;
                if d < dist[l.to] {
                    dist[l.to] = d;
                    first[l.to] = if u == src { Some(i) } else { first[u] };
                }
            }
        }
        next[src] = first;
    }
    next
}
