//! A tiny discrete-event network model for controller tests (shared by the `era_*` and
//! `plm_*` test files): one layered sender, one bottleneck link that serialises packets
//! (drop-tail FIFO, or round-robin fair queueing with one-packet quantum and per-flow
//! buffers), cross-traffic flows (CBR or greedy), a router that forwards a layer while any
//! receiver subscribes to it (with join and leave latency), and receivers driven by their
//! controllers in virtual time.
//!
//! Deliberately small: it exists so that the controllers' unit tests can run scripted
//! bottlenecks (pairs spaced by 8M/C, cross traffic squeezing into pairs, capacity steps)
//! without the full simulator crate.
#![allow(dead_code)]

use congestion::schedule::Schedule;
use congestion::{Action, Decision, LayeredController, PacketArrival, SessionInfo, Time};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::time::Duration;

/// Queue discipline at the bottleneck.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Qdisc {
    /// Drop-tail FIFO with a byte limit.
    Fifo { limit_bytes: u64 },
    /// Round robin over flows, one packet per turn (equal sizes ⇒ fair queueing), with a
    /// per-flow packet limit. All layers of the session are one flow (flow 0).
    FairQueue { per_flow_pkts: usize },
}

/// A cross-traffic flow through the bottleneck only.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Cross {
    pub start: Time,
    pub stop: Time,
    /// CBR rate; ignored when greedy.
    pub rate_bps: f64,
    pub size: u32,
    /// Always backlogged (a greedy flow): only meaningful under fair queueing.
    pub greedy: bool,
    /// Uniform jitter on each CBR gap, as a fraction (0.2 = ±10%), so that the flow is not
    /// phase-locked to the session's bunch grid.
    pub jitter: f64,
}

/// The scenario.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub info: SessionInfo,
    pub capacity_bps: f64,
    /// The sender's access link: packets of a bunch enter the bottleneck spaced by
    /// 8·size/access_bps, so cross traffic can squeeze between them.
    pub access_bps: f64,
    /// Capacity steps (time, new capacity).
    pub capacity_steps: Vec<(Time, f64)>,
    pub qdisc: Qdisc,
    /// Bottleneck to receivers.
    pub prop_delay: Duration,
    pub join_latency: Duration,
    pub leave_latency: Duration,
    pub cross: Vec<Cross>,
    /// Receiver start times (one controller each, in order).
    pub starts: Vec<Time>,
    /// First SAM at this time, then every `info.announce_interval`.
    pub sam_start: Time,
    pub until: Time,
}

impl Scenario {
    pub fn new(info: SessionInfo, capacity_bps: f64, until_s: f64) -> Scenario {
        Scenario {
            info,
            capacity_bps,
            access_bps: 10e6,
            capacity_steps: Vec::new(),
            qdisc: Qdisc::Fifo {
                limit_bytes: 64 * 1024,
            },
            prop_delay: Duration::from_millis(10),
            join_latency: Duration::from_millis(10),
            leave_latency: Duration::from_millis(10),
            cross: Vec::new(),
            starts: vec![Time::ZERO],
            sam_start: Time::from_millis(0),
            until: Time::from_secs_f64(until_s),
        }
    }
}

/// What happened to one receiver.
#[derive(Clone, Debug, Default)]
pub struct RxTrace {
    pub actions: Vec<(Time, Action)>,
    pub decisions: Vec<Decision>,
    /// (time, layers held) after every change.
    pub levels: Vec<(Time, u8)>,
    pub delivered: u64,
    /// Delivered bytes per whole second of virtual time.
    pub bytes_per_sec: Vec<u64>,
}

impl RxTrace {
    /// Layers held at time `t`.
    pub fn level_at(&self, t: Time) -> u8 {
        self.levels
            .iter()
            .take_while(|(at, _)| *at <= t)
            .last()
            .map_or(0, |l| l.1)
    }
    /// First time at or after `from` when the level satisfies `f`.
    pub fn first_time(&self, from: Time, f: impl Fn(u8) -> bool) -> Option<Time> {
        if f(self.level_at(from)) {
            return Some(from);
        }
        self.levels
            .iter()
            .find(|(at, l)| *at >= from && f(*l))
            .map(|l| l.0)
    }
    /// Number of level changes in [a, b).
    pub fn changes_between(&self, a: Time, b: Time) -> usize {
        self.levels
            .iter()
            .filter(|(t, _)| *t >= a && *t < b)
            .count()
    }
}

/// Whole-run results.
#[derive(Clone, Debug, Default)]
pub struct Trace {
    pub rx: Vec<RxTrace>,
    /// Session packets dropped at the bottleneck, with times.
    pub session_drops: Vec<Time>,
    pub cross_drops: u64,
    /// Session packets sent into the bottleneck per layer.
    pub sent_per_layer: Vec<u64>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Sam,
    Bunch,
    CrossPkt(usize),
    Departure,
    Deliver(usize, usize), // receiver, index into in-flight
    Arrive(usize),         // session packet reaches the bottleneck, index into in-flight
    SubChange(u8, bool),
    Capacity(usize),
    Start(usize),
}

#[derive(Clone, Copy, Debug)]
struct Pkt {
    flow: usize, // 0 = session, 1 + i = cross i
    layer: u8,
    seq: u64,
    pos: u8,
    len: u8,
    size: u32,
    sent: Time,
}

struct Queue {
    qdisc: Qdisc,
    fifo: VecDeque<Pkt>,
    fifo_bytes: u64,
    flows: Vec<VecDeque<Pkt>>,
    rr_next: usize,
    busy: bool,
}

impl Queue {
    fn enqueue(&mut self, p: Pkt) -> bool {
        match self.qdisc {
            Qdisc::Fifo { limit_bytes } => {
                if self.fifo_bytes + p.size as u64 > limit_bytes {
                    return false;
                }
                self.fifo_bytes += p.size as u64;
                self.fifo.push_back(p);
                true
            }
            Qdisc::FairQueue { per_flow_pkts } => {
                if self.flows.len() <= p.flow {
                    self.flows.resize_with(p.flow + 1, VecDeque::new);
                }
                if self.flows[p.flow].len() >= per_flow_pkts {
                    return false;
                }
                self.flows[p.flow].push_back(p);
                true
            }
        }
    }
    fn dequeue(&mut self, greedy: &[Option<u32>], now: Time) -> Option<Pkt> {
        match self.qdisc {
            Qdisc::Fifo { .. } => {
                let p = self.fifo.pop_front()?;
                self.fifo_bytes -= p.size as u64;
                Some(p)
            }
            Qdisc::FairQueue { .. } => {
                let n = self.flows.len().max(greedy.len() + 1);
                if self.flows.len() < n {
                    self.flows.resize_with(n, VecDeque::new);
                }
                for i in 0..n {
                    let f = (self.rr_next + i) % n;
                    if let Some(p) = self.flows[f].pop_front() {
                        self.rr_next = (f + 1) % n;
                        return Some(p);
                    }
                    if f >= 1 {
                        if let Some(Some(size)) = greedy.get(f - 1) {
                            self.rr_next = (f + 1) % n;
                            return Some(Pkt {
                                flow: f,
                                layer: 0,
                                seq: 0,
                                pos: 0,
                                len: 1,
                                size: *size,
                                sent: now,
                            });
                        }
                    }
                }
                None
            }
        }
    }
}

/// Runs the scenario with one controller per entry of `scn.starts`.
pub fn run(scn: &Scenario, ctls: &mut [Box<dyn LayeredController>]) -> Trace {
    assert_eq!(ctls.len(), scn.starts.len());
    let info = &scn.info;
    let n_layers = info.layers.len();
    let m = info.packet_size as u32;
    let b = info.bunch_len.max(1);
    let mut heap: BinaryHeap<Reverse<(Time, u64, Ev)>> = BinaryHeap::new();
    let mut tie = 0u64;
    let mut push = |heap: &mut BinaryHeap<Reverse<(Time, u64, Ev)>>, t: Time, e: Ev| {
        tie += 1;
        heap.push(Reverse((t, tie, e)));
    };
    let mut trace = Trace {
        rx: vec![RxTrace::default(); ctls.len()],
        sent_per_layer: vec![0; n_layers],
        ..Default::default()
    };
    // The sender is the crate's own schedule (golden-ratio phases, whole bunches).
    let mut sched = Schedule::new(info, Time::ZERO).expect("valid session");
    push(&mut heap, sched.peek(), Ev::Bunch);
    for (i, c) in scn.cross.iter().enumerate() {
        if !c.greedy {
            push(&mut heap, c.start, Ev::CrossPkt(i));
        }
    }
    push(&mut heap, scn.sam_start, Ev::Sam);
    for (i, t) in scn.capacity_steps.iter().enumerate() {
        push(&mut heap, t.0, Ev::Capacity(i));
    }
    for (i, t) in scn.starts.iter().enumerate() {
        push(&mut heap, *t, Ev::Start(i));
    }
    let mut started = vec![false; ctls.len()];
    let mut host_sub = vec![vec![false; n_layers]; ctls.len()];
    let mut router_sub = vec![false; n_layers];
    let mut router_want = vec![0usize; n_layers];
    let mut seqs = vec![0u64; n_layers];
    let mut capacity = scn.capacity_bps;
    let mut q = Queue {
        qdisc: scn.qdisc,
        fifo: VecDeque::new(),
        fifo_bytes: 0,
        flows: Vec::new(),
        rr_next: 0,
        busy: false,
    };
    let mut in_service: Option<Pkt> = None;
    let mut in_flight: Vec<Option<Pkt>> = Vec::new();
    let mut access_busy = Time::ZERO;
    let mut jit_state = 0x9E37_79B9_7F4A_7C15u64;
    let mut rng = move || {
        jit_state ^= jit_state << 13;
        jit_state ^= jit_state >> 7;
        jit_state ^= jit_state << 17;
        (jit_state >> 11) as f64 / (1u64 << 53) as f64
    };

    loop {
        let next_ev_t = heap
            .peek()
            .map(|Reverse((t, _, _))| *t)
            .unwrap_or(Time::NEVER);
        // Controller deadlines first.
        let mut due: Option<(usize, Time)> = None;
        for (i, c) in ctls.iter().enumerate() {
            if !started[i] {
                continue;
            }
            if let Some((t, _)) = c.poll_timeout() {
                let earlier = match due {
                    None => true,
                    Some(d) => t < d.1,
                };
                if t <= next_ev_t && earlier {
                    due = Some((i, t));
                }
            }
        }
        let now = if let Some((i, t)) = due {
            if t > scn.until {
                break;
            }
            ctls[i].handle_timeout(t);
            t
        } else {
            let Some(Reverse((t, _, ev))) = heap.pop() else {
                break;
            };
            if t > scn.until {
                break;
            }
            match ev {
                Ev::Start(i) => {
                    started[i] = true;
                }
                Ev::Sam => {
                    for (i, c) in ctls.iter_mut().enumerate() {
                        if started[i] {
                            c.handle_announcement(t, info);
                        }
                    }
                    push(&mut heap, t + info.announce_interval, Ev::Sam);
                }
                Ev::Capacity(i) => capacity = scn.capacity_steps[i].1,
                Ev::SubChange(j, on) => {
                    // Apply only if it still matches what receivers want (a join and a leave
                    // can race when their latencies differ).
                    if on == (router_want[j as usize] > 0) {
                        router_sub[j as usize] = on;
                    }
                }
                Ev::Bunch => {
                    let bunch = sched.next_bunch();
                    let j = bunch.layer;
                    let ju = j as usize;
                    if router_sub[ju] {
                        for pos in 0..b {
                            let p = Pkt {
                                flow: 0,
                                layer: j,
                                seq: seqs[ju],
                                pos,
                                len: b,
                                size: m,
                                sent: t,
                            };
                            trace.sent_per_layer[ju] += 1;
                            let start = if access_busy > t { access_busy } else { t };
                            access_busy =
                                start + Duration::from_secs_f64(8.0 * m as f64 / scn.access_bps);
                            in_flight.push(Some(p));
                            push(&mut heap, access_busy, Ev::Arrive(in_flight.len() - 1));
                            seqs[ju] += 1;
                        }
                    } else {
                        seqs[ju] += b as u64; // the sender sends regardless
                    }
                    push(&mut heap, sched.peek(), Ev::Bunch);
                }
                Ev::CrossPkt(i) => {
                    let c = scn.cross[i];
                    if t < c.stop {
                        let p = Pkt {
                            flow: 1 + i,
                            layer: 0,
                            seq: 0,
                            pos: 0,
                            len: 1,
                            size: c.size,
                            sent: t,
                        };
                        if !q.enqueue(p) {
                            trace.cross_drops += 1;
                        }
                        let mut gap = Duration::from_secs_f64(8.0 * c.size as f64 / c.rate_bps);
                        if c.jitter > 0.0 {
                            gap = gap.mul_f64(1.0 + c.jitter * (rng() - 0.5));
                        }
                        push(&mut heap, t + gap, Ev::CrossPkt(i));
                    }
                }
                Ev::Departure => {
                    q.busy = false;
                    if let Some(p) = in_service.take() {
                        if p.flow == 0 {
                            for (r, subs) in host_sub.iter().enumerate() {
                                if subs[p.layer as usize] {
                                    in_flight.push(Some(p));
                                    let idx = in_flight.len() - 1;
                                    push(&mut heap, t + scn.prop_delay, Ev::Deliver(r, idx));
                                }
                            }
                        }
                    }
                }
                Ev::Arrive(idx) => {
                    if let Some(p) = in_flight[idx].take() {
                        if !q.enqueue(p) {
                            trace.session_drops.push(t);
                        }
                    }
                }
                Ev::Deliver(r, idx) => {
                    if let Some(p) = in_flight[idx].take() {
                        if host_sub[r][p.layer as usize] {
                            let a = PacketArrival {
                                layer: p.layer,
                                seq: p.seq,
                                bunch_pos: p.pos,
                                bunch_len: p.len,
                                size: p.size,
                                send_time_us: p.sent.as_micros(),
                                recv_time: t,
                            };
                            ctls[r].handle_packet(t, &a);
                            let tr = &mut trace.rx[r];
                            tr.delivered += 1;
                            let sec = (t.as_nanos() / 1_000_000_000) as usize;
                            if tr.bytes_per_sec.len() <= sec {
                                tr.bytes_per_sec.resize(sec + 1, 0);
                            }
                            tr.bytes_per_sec[sec] += p.size as u64;
                        }
                    }
                }
            }
            t
        };
        // Greedy cross flows are active in [start, stop).
        let greedy: Vec<Option<u32>> = scn
            .cross
            .iter()
            .map(|c| (c.greedy && now >= c.start && now < c.stop).then_some(c.size))
            .collect();
        // Start service if idle.
        if !q.busy {
            if let Some(p) = q.dequeue(&greedy, now) {
                q.busy = true;
                let tx = Duration::from_secs_f64(8.0 * p.size as f64 / capacity);
                in_service = Some(p);
                push(&mut heap, now + tx, Ev::Departure);
            }
        }
        // Drain controller outputs.
        for (r, c) in ctls.iter_mut().enumerate() {
            while let Some(a) = c.poll_action() {
                match a {
                    Action::Join(k) => {
                        let ku = k as usize;
                        if ku < n_layers && !host_sub[r][ku] {
                            host_sub[r][ku] = true;
                            router_want[ku] += 1;
                            if router_want[ku] == 1 {
                                push(&mut heap, now + scn.join_latency, Ev::SubChange(k, true));
                            }
                        }
                    }
                    Action::Leave(k) => {
                        let ku = k as usize;
                        if ku < n_layers && host_sub[r][ku] {
                            host_sub[r][ku] = false;
                            router_want[ku] -= 1;
                            if router_want[ku] == 0 {
                                push(&mut heap, now + scn.leave_latency, Ev::SubChange(k, false));
                            }
                        }
                    }
                    _ => {}
                }
                trace.rx[r].actions.push((now, a));
            }
            while let Some(d) = c.poll_decision() {
                trace.rx[r].decisions.push(d);
            }
            let lv = c.layers();
            if trace.rx[r].levels.last().map(|l| l.1) != Some(lv) {
                trace.rx[r].levels.push((now, lv));
            }
        }
    }
    trace
}

/// Checks the cumulative-subscription invariant on an action list: `Join(k)` only when
/// holding exactly `k` layers, `Leave(k)` only of the top layer.
pub fn check_cumulative(actions: &[(Time, Action)]) -> Result<(), String> {
    let mut held = 0u8;
    for (t, a) in actions {
        match a {
            Action::Join(k) => {
                if *k != held {
                    return Err(format!("{t:?}: Join({k}) while holding {held}"));
                }
                held += 1;
            }
            Action::Leave(k) => {
                if held == 0 || *k != held - 1 {
                    return Err(format!("{t:?}: Leave({k}) while holding {held}"));
                }
                held -= 1;
            }
            Action::Exit => {
                if held != 0 {
                    return Err(format!("{t:?}: Exit while holding {held}"));
                }
            }
            Action::SendFeedback(_) => return Err("receiver sent feedback".into()),
        }
    }
    Ok(())
}
