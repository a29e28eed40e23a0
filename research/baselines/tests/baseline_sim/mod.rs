//! A scripted single-bottleneck network in virtual time, shared by the baseline controllers'
//! scenario tests (rlm, rlc, flid, webrc, delay).
//!
//! Sender: every layer paced at its rate (evenly spaced packets, or a per-packet spacing
//! multiplier for RLC's bursts), sequence numbers per layer from 0. Router: a layer reaches
//! the bottleneck only while the receiver is a member (join effective after
//! `join_latency`, leave after `leave_latency`). Bottleneck: FIFO, drop-tail, byte buffer,
//! piecewise-constant capacity; packets of layers above capacity are therefore lost and
//! queueing delay grows while the offered load exceeds capacity. Then a fixed propagation
//! delay to the receiver, whose controller is driven through the `LayeredController` trait.
//!
//! The harness also checks, on every action, the cumulative-subscription contract: `Join(k)`
//! only for `k == layers held`, `Leave(k)` only for `k == layers held − 1`.
#![allow(dead_code)]

use congestion::{Action, Decision, LayeredController, PacketArrival, SessionInfo, Time};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

pub type RateFn = Box<dyn Fn(u8, Time) -> f64>;
pub type SpacingFn = Box<dyn Fn(u8, u64) -> f64>;

pub struct Scenario {
    pub session: SessionInfo,
    /// When the receiver gets the announcement (and starts).
    pub start: Time,
    pub end: Time,
    /// Piecewise-constant bottleneck capacity available to the session, bit/s, from time t.
    pub capacity: Vec<(Time, f64)>,
    pub buffer_bytes: f64,
    pub prop: Duration,
    pub join_latency: Duration,
    pub leave_latency: Duration,
    /// Rate of (logical) layer k at sender time t, bit/s. Default: the SAM's constant rate.
    pub rate: RateFn,
    /// Multiplier of the nominal inter-packet gap before packet `seq` of layer k.
    pub spacing: SpacingFn,
    /// Added to the sender timestamps (clock offset between sender and receiver).
    pub clock_offset_us: u64,
    /// Bernoulli loss on the bottleneck (wireless-like, not congestion), 0..1.
    pub random_loss: f64,
    /// Sequence space of a packet of logical layer k sent at sender timestamp `send_us`:
    /// None = one per layer. FLID-DL sets the physical channel (`DynamicLayerSchedule`):
    /// on the wire every group is one RTP stream, and a logical layer changes group per slot.
    pub seq_key: Option<Box<dyn Fn(u8, u64) -> usize>>,
}

impl Scenario {
    pub fn new(session: SessionInfo, capacity_bps: f64, end_s: f64) -> Scenario {
        let rates: Vec<f64> = session.layers.iter().map(|l| l.rate_bps as f64).collect();
        let bdp = capacity_bps / 8.0 * 0.06;
        let session_packet = session.packet_size.max(1) as f64;
        Scenario {
            session,
            start: Time::ZERO,
            end: Time::from_secs_f64(end_s),
            capacity: vec![(Time::ZERO, capacity_bps)],
            buffer_bytes: (2.0 * bdp).max(10.0 * session_packet),
            prop: Duration::from_millis(30),
            join_latency: Duration::from_millis(20),
            leave_latency: Duration::from_millis(20),
            rate: Box::new(move |k, _| rates.get(k as usize).copied().unwrap_or(0.0)),
            spacing: Box::new(|_, _| 1.0),
            seq_key: None,
            clock_offset_us: 0,
            random_loss: 0.0,
        }
    }
    /// Capacity becomes `bps` at `t_s`.
    pub fn capacity_at(mut self, t_s: f64, bps: f64) -> Scenario {
        self.capacity.push((Time::from_secs_f64(t_s), bps));
        self.capacity.sort_by_key(|c| c.0);
        self
    }
    fn cap(&self, t: Time) -> f64 {
        let mut c = self.capacity[0].1;
        for &(at, v) in &self.capacity {
            if at <= t {
                c = v;
            }
        }
        c.max(1.0)
    }
}

#[derive(Default)]
pub struct Trace {
    /// (time, layers held) after every change.
    pub levels: Vec<(Time, u8)>,
    pub actions: Vec<(Time, Action)>,
    pub decisions: Vec<Decision>,
    /// (receive time, layer, bytes) of every packet delivered to the controller.
    pub delivered: Vec<(Time, u8, u32)>,
    /// (emission time, layer) of packets dropped at the bottleneck.
    pub dropped: Vec<(Time, u8)>,
    /// Queueing delay (waiting time before service) of each delivered packet.
    pub qdelay: Vec<(Time, Duration)>,
    /// Contract violations found (wrong Join/Leave index, timeout storms).
    pub violations: Vec<String>,
    pub exited: bool,
}

impl Trace {
    pub fn level_at(&self, t: Time) -> u8 {
        let mut l = 0;
        for &(at, v) in &self.levels {
            if at <= t {
                l = v;
            } else {
                break;
            }
        }
        l
    }
    pub fn final_level(&self) -> u8 {
        self.levels.last().map(|l| l.1).unwrap_or(0)
    }
    /// Delivered throughput over [from, to), bit/s.
    pub fn goodput_bps(&self, from: f64, to: f64) -> f64 {
        let (a, b) = (Time::from_secs_f64(from), Time::from_secs_f64(to));
        let bytes: u64 = self
            .delivered
            .iter()
            .filter(|d| d.0 >= a && d.0 < b)
            .map(|d| d.2 as u64)
            .sum();
        bytes as f64 * 8.0 / (to - from)
    }
    /// Packets dropped at the bottleneck over [from, to).
    pub fn drops(&self, from: f64, to: f64) -> usize {
        let (a, b) = (Time::from_secs_f64(from), Time::from_secs_f64(to));
        self.dropped.iter().filter(|d| d.0 >= a && d.0 < b).count()
    }
    /// Drop ratio at the bottleneck over [from, to).
    pub fn loss_ratio(&self, from: f64, to: f64) -> f64 {
        let (a, b) = (Time::from_secs_f64(from), Time::from_secs_f64(to));
        let got = self
            .delivered
            .iter()
            .filter(|d| d.0 >= a && d.0 < b)
            .count();
        let lost = self.drops(from, to);
        if got + lost == 0 {
            0.0
        } else {
            lost as f64 / (got + lost) as f64
        }
    }
    /// Time-weighted mean level over [from, to).
    pub fn mean_level(&self, from: f64, to: f64) -> f64 {
        let n = 1000;
        let mut s = 0.0;
        for i in 0..n {
            let t = from + (to - from) * (i as f64 + 0.5) / n as f64;
            s += self.level_at(Time::from_secs_f64(t)) as f64;
        }
        s / n as f64
    }
    pub fn max_level(&self, from: f64, to: f64) -> u8 {
        let (a, b) = (Time::from_secs_f64(from), Time::from_secs_f64(to));
        let mut m = self.level_at(a);
        for &(at, v) in &self.levels {
            if at >= a && at < b {
                m = m.max(v);
            }
        }
        m
    }
    /// First time at or after `from` with level ≥ `l`.
    pub fn first_reach(&self, l: u8, from: f64) -> Option<f64> {
        let a = Time::from_secs_f64(from);
        if self.level_at(a) >= l {
            return Some(from);
        }
        self.levels
            .iter()
            .find(|(t, v)| *t >= a && *v >= l)
            .map(|(t, _)| t.as_secs_f64())
    }
    pub fn joins(&self) -> usize {
        self.actions
            .iter()
            .filter(|a| matches!(a.1, Action::Join(_)))
            .count()
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Ev {
    Start,
    Emit(u8),
    Arrive {
        layer: u8,
        seq: u64,
        sent: u64,
        qdelay_ns: u64,
    },
    JoinEff(u8, u64),
    LeaveEff(u8, u64),
    Timeout,
}

type Heap = BinaryHeap<Reverse<(Time, u64, usize, Ev)>>;

/// Per-session state of the engine.
struct Flow {
    start: Time,
    started: bool,
    seq: Vec<u64>,
    want: Vec<bool>,
    gen: Vec<u64>,
    fwd: Vec<bool>,
    held: u8,
    scheduled: Option<Time>,
    storm: u32,
    last_timeout_at: Time,
    tr: Trace,
}

/// Runs the scenario to its end and returns what happened.
pub fn run(ctl: &mut dyn LayeredController, sc: &Scenario) -> Trace {
    let mut ctls: Vec<&mut dyn LayeredController> = vec![ctl];
    run_many(&mut ctls, sc, &[sc.start.as_secs_f64()])
        .pop()
        .unwrap_or_default()
}

/// Runs one independent session per controller (same layers and pacing, own source, own
/// receiver starting at `starts[i]` seconds) through the shared bottleneck.
pub fn run_many(
    ctls: &mut [&mut dyn LayeredController],
    sc: &Scenario,
    starts: &[f64],
) -> Vec<Trace> {
    let n = sc.session.layers.len();
    let size = sc.session.packet_size.max(1) as u32;
    let mut heap: Heap = BinaryHeap::new();
    let mut ctr = 0u64;
    let mut push = |heap: &mut Heap, t: Time, f: usize, e: Ev| {
        ctr += 1;
        heap.push(Reverse((t, ctr, f, e)));
    };
    let mut flows: Vec<Flow> = (0..ctls.len())
        .map(|i| Flow {
            start: Time::from_secs_f64(starts.get(i).copied().unwrap_or(0.0)),
            started: false,
            seq: vec![0; n],
            want: vec![false; n],
            gen: vec![0; n],
            fwd: vec![false; n],
            held: 0,
            scheduled: None,
            storm: 0,
            last_timeout_at: Time::NEVER,
            tr: Trace::default(),
        })
        .collect();
    let mut free_at = Time::ZERO;
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut bernoulli = move |p: f64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        ((rng >> 11) as f64 / (1u64 << 53) as f64) < p
    };

    // Spread the layers' phases (golden-ratio offsets within one packet interval) so that
    // equal-rate layers, and sessions, do not emit in lock-step bursts.
    for (f, flow) in flows.iter().enumerate() {
        for k in 0..n {
            let r = (sc.rate)(k as u8, Time::ZERO).max(1.0);
            let frac = ((k + 7 * f) as f64 * 0.618_033_988_75).fract();
            let off = Duration::from_secs_f64(frac * size as f64 * 8.0 / r);
            push(
                &mut heap,
                Time::ZERO + off.min(Duration::from_secs(1)),
                f,
                Ev::Emit(k as u8),
            );
        }
        push(&mut heap, flow.start, f, Ev::Start);
    }

    while let Some(Reverse((now, _, f, ev))) = heap.pop() {
        if now > sc.end {
            break;
        }
        let ctl = &mut *ctls[f];
        let mut fed = false;
        match ev {
            Ev::Start => {
                let fl = &mut flows[f];
                fl.started = true;
                ctl.handle_announcement(now, &sc.session);
                fed = true;
            }
            Ev::Emit(k) => {
                let ku = k as usize;
                let r = (sc.rate)(k, now);
                if r <= 0.0 {
                    push(&mut heap, now + Duration::from_millis(10), f, Ev::Emit(k));
                    continue;
                }
                let fl = &mut flows[f];
                let sk = sc
                    .seq_key
                    .as_ref()
                    .map_or(ku, |key| key(k, now.as_micros() + sc.clock_offset_us));
                if fl.seq.len() <= sk {
                    fl.seq.resize(sk + 1, 0);
                }
                let s = fl.seq[sk];
                fl.seq[sk] += 1;
                if fl.fwd[ku] {
                    let cap = sc.cap(now);
                    let backlog = free_at.saturating_since(now).as_secs_f64() * cap / 8.0;
                    if backlog + size as f64 > sc.buffer_bytes
                        || (sc.random_loss > 0.0 && bernoulli(sc.random_loss))
                    {
                        fl.tr.dropped.push((now, k));
                    } else {
                        let start = free_at.max(now);
                        free_at = start + Duration::from_secs_f64(size as f64 * 8.0 / cap);
                        // Waiting time in the queue, excluding the packet's own service.
                        let q = start.saturating_since(now);
                        push(
                            &mut heap,
                            free_at + sc.prop,
                            f,
                            Ev::Arrive {
                                layer: k,
                                seq: s,
                                sent: now.as_micros() + sc.clock_offset_us,
                                qdelay_ns: q.as_nanos() as u64,
                            },
                        );
                    }
                }
                let gap = size as f64 * 8.0 / r * (sc.spacing)(k, s + 1).max(0.0);
                push(
                    &mut heap,
                    now + Duration::from_secs_f64(gap.max(1e-6)),
                    f,
                    Ev::Emit(k),
                );
            }
            Ev::JoinEff(k, g) => {
                let fl = &mut flows[f];
                if fl.gen[k as usize] == g && fl.want[k as usize] {
                    fl.fwd[k as usize] = true;
                }
            }
            Ev::LeaveEff(k, g) => {
                let fl = &mut flows[f];
                if fl.gen[k as usize] == g && !fl.want[k as usize] {
                    fl.fwd[k as usize] = false;
                }
            }
            Ev::Arrive {
                layer,
                seq,
                sent,
                qdelay_ns,
            } => {
                let fl = &mut flows[f];
                if fl.started && !fl.tr.exited {
                    let pkt = PacketArrival {
                        layer,
                        seq,
                        bunch_pos: 0,
                        bunch_len: 1,
                        size,
                        send_time_us: sent,
                        recv_time: now,
                    };
                    fl.tr.delivered.push((now, layer, size));
                    fl.tr.qdelay.push((now, Duration::from_nanos(qdelay_ns)));
                    ctl.handle_packet(now, &pkt);
                    fed = true;
                }
            }
            Ev::Timeout => {
                let fl = &mut flows[f];
                if fl.started && !fl.tr.exited && fl.scheduled.is_some_and(|t| t <= now) {
                    fl.scheduled = None;
                    if now == fl.last_timeout_at {
                        fl.storm += 1;
                        if fl.storm > 1000 {
                            fl.tr.violations.push(format!("timeout storm at {now:?}"));
                            break;
                        }
                    } else {
                        fl.storm = 0;
                        fl.last_timeout_at = now;
                    }
                    ctl.handle_timeout(now);
                    fed = true;
                }
            }
        }
        if fed {
            drain(ctl, now, &mut flows[f], f, &mut heap, &mut push, sc);
            let fl = &mut flows[f];
            if let Some((t, _)) = ctl.poll_timeout() {
                if fl.scheduled != Some(t) && t != Time::NEVER {
                    fl.scheduled = Some(t);
                    push(&mut heap, t, f, Ev::Timeout);
                }
            }
        }
    }
    flows.into_iter().map(|f| f.tr).collect()
}

fn drain<P: FnMut(&mut Heap, Time, usize, Ev)>(
    ctl: &mut dyn LayeredController,
    now: Time,
    fl: &mut Flow,
    f: usize,
    heap: &mut Heap,
    push: &mut P,
    sc: &Scenario,
) {
    let tr = &mut fl.tr;
    while let Some(a) = ctl.poll_action() {
        match a {
            Action::Join(k) => {
                if k != fl.held || k as usize >= fl.want.len() {
                    tr.violations
                        .push(format!("{now:?}: Join({k}) while holding {}", fl.held));
                    continue;
                }
                fl.held += 1;
                fl.want[k as usize] = true;
                fl.gen[k as usize] += 1;
                push(
                    heap,
                    now + sc.join_latency,
                    f,
                    Ev::JoinEff(k, fl.gen[k as usize]),
                );
            }
            Action::Leave(k) => {
                if fl.held == 0 || k != fl.held - 1 {
                    tr.violations
                        .push(format!("{now:?}: Leave({k}) while holding {}", fl.held));
                    continue;
                }
                fl.held -= 1;
                fl.want[k as usize] = false;
                fl.gen[k as usize] += 1;
                push(
                    heap,
                    now + sc.leave_latency,
                    f,
                    Ev::LeaveEff(k, fl.gen[k as usize]),
                );
            }
            Action::Exit => {
                for k in 0..(fl.held as usize) {
                    fl.want[k] = false;
                    fl.gen[k] += 1;
                    push(
                        heap,
                        now + sc.leave_latency,
                        f,
                        Ev::LeaveEff(k as u8, fl.gen[k]),
                    );
                }
                fl.held = 0;
                tr.exited = true;
            }
            Action::SendFeedback(_) => {}
        }
        tr.actions.push((now, a));
    }
    while let Some(d) = ctl.poll_decision() {
        tr.decisions.push(d);
    }
    if ctl.layers() != fl.held {
        tr.violations.push(format!(
            "{now:?}: layers() = {} but actions say {}",
            ctl.layers(),
            fl.held
        ));
    }
    if tr.levels.last().map(|l| l.1) != Some(fl.held) {
        tr.levels.push((now, fl.held));
    }
}

/// Jain's fairness index of `x`.
pub fn jain(x: &[f64]) -> f64 {
    let s: f64 = x.iter().sum();
    let q: f64 = x.iter().map(|v| v * v).sum();
    if q == 0.0 {
        1.0
    } else {
        s * s / (x.len() as f64 * q)
    }
}

/// One step of an arbitrary input sequence for the property tests.
#[derive(Clone, Debug)]
pub enum Input {
    Packet {
        layer: u8,
        seq: u64,
        dt_us: u64,
        send_us: u64,
        size: u32,
    },
    Timeout {
        dt_us: u64,
    },
    Announce {
        layers: u8,
    },
}

/// Feeds arbitrary inputs; returns the first contract violation, if any. Time only moves
/// forward (by `dt_us`); packets may carry any layer, sequence, timestamp and size.
pub fn check_contract(ctl: &mut dyn LayeredController, inputs: &[Input]) -> Result<(), String> {
    let mut now = Time::from_millis(1);
    let mut held = 0u8;
    let base = SessionInfo::equal_layers(8, 50_000, std::net::Ipv4Addr::new(239, 9, 0, 0), 6000);
    ctl.handle_announcement(now, &base);
    let mut n_layers = 8u8;
    for inp in inputs {
        match *inp {
            Input::Packet {
                layer,
                seq,
                dt_us,
                send_us,
                size,
            } => {
                now += Duration::from_micros(dt_us);
                let p = PacketArrival {
                    layer,
                    seq,
                    bunch_pos: 0,
                    bunch_len: 1,
                    size,
                    send_time_us: send_us,
                    recv_time: now,
                };
                ctl.handle_packet(now, &p);
            }
            Input::Timeout { dt_us } => {
                now += Duration::from_micros(dt_us);
                if let Some((t, _)) = ctl.poll_timeout() {
                    if t <= now {
                        ctl.handle_timeout(now);
                    } else {
                        ctl.handle_timeout(now); // spurious early call must be harmless
                    }
                }
            }
            Input::Announce { layers } => {
                let l = layers.clamp(1, 12);
                n_layers = l;
                let mut s = base.clone();
                s.layers = SessionInfo::equal_layers(
                    l as usize,
                    50_000,
                    std::net::Ipv4Addr::new(239, 9, 0, 0),
                    6000,
                )
                .layers;
                ctl.handle_announcement(now, &s);
            }
        }
        while let Some(a) = ctl.poll_action() {
            match a {
                Action::Join(k) => {
                    if k != held {
                        return Err(format!("Join({k}) while holding {held}"));
                    }
                    if k >= n_layers {
                        return Err(format!("Join({k}) beyond {n_layers} layers"));
                    }
                    held += 1;
                }
                Action::Leave(k) => {
                    if held == 0 || k != held - 1 {
                        return Err(format!("Leave({k}) while holding {held}"));
                    }
                    held -= 1;
                }
                Action::Exit => held = 0,
                Action::SendFeedback(_) => {}
            }
        }
        while ctl.poll_decision().is_some() {}
        if ctl.layers() != held {
            return Err(format!("layers() {} != held {}", ctl.layers(), held));
        }
        let _ = ctl.stats();
    }
    Ok(())
}

/// proptest strategy for [`Input`] sequences.
pub fn inputs() -> impl proptest::strategy::Strategy<Value = Vec<Input>> {
    use proptest::prelude::*;
    let pkt = (
        0u8..12,
        0u64..400,
        0u64..50_000,
        0u64..200_000_000,
        0u32..2000,
    )
        .prop_map(|(layer, seq, dt_us, send_us, size)| Input::Packet {
            layer,
            seq,
            dt_us,
            send_us,
            size,
        });
    let big = (any::<u8>(), any::<u64>(), any::<u64>(), any::<u32>()).prop_map(
        |(layer, seq, send_us, size)| Input::Packet {
            layer,
            seq,
            dt_us: 1,
            send_us,
            size,
        },
    );
    let to = (0u64..3_000_000).prop_map(|dt_us| Input::Timeout { dt_us });
    let ann = (0u8..14).prop_map(|layers| Input::Announce { layers });
    proptest::collection::vec(prop_oneof![6 => pkt, 1 => big, 4 => to, 1 => ann], 0..400)
}
