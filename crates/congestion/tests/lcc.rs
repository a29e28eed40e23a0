//! LCC (`congestion::lcc`) on a small fluid model of one bottleneck, sans-IO: the controller's
//! layers (in pairs) and an optional competitor feed a queue of capacity `C`; each packet's
//! one-way delay is the base delay plus the queue it found, a pair leaves the queue back to back
//! (its dispersion measures `C`, as on a FIFO), and packets are lost when the buffer is full.
//! The simulator's RMCAT scenarios (`research/scenarios/rmcat-*.yaml`) test the same rules against real
//! TCP agents; these tests pin each rule down on its own.

use congestion::lcc::{Lcc, LccConfig};
use congestion::{Action, Decision, LayeredController, PacketArrival, SessionInfo, Time};
use std::net::Ipv4Addr;
use std::time::Duration;

/// The demo's ladder (kbit/s per layer).
const LADDER: [f64; 9] = [182.4, 88.8, 130.8, 416.4, 166.8, 208.8, 978.0, 354.0, 396.0];
const SIZE: u32 = 1400;

fn session() -> SessionInfo {
    let mut s = SessionInfo::equal_layers(9, 1, Ipv4Addr::new(239, 1, 0, 0), 5000);
    for (l, r) in s.layers.iter_mut().zip(LADDER) {
        l.rate_bps = (r * 1000.0) as u64;
    }
    s.packet_size = SIZE as u16;
    s
}

fn cum(n: usize) -> f64 {
    LADDER.iter().take(n).sum::<f64>() * 1000.0
}

/// One bottleneck in 1-ms steps.
struct Path {
    /// Capacity over time (bit/s).
    capacity: Box<dyn Fn(f64) -> f64>,
    /// A Reno-like competitor from this time on (s): +200 kbit/s each second, halved when it
    /// finds the buffer full (at most once per 300 ms).
    tcp_from: Option<f64>,
    tcp_rate: f64,
    tcp_cut: f64,
    buffer_s: f64,
    base_owd_ms: u64,
    /// Queue in bits.
    queue: f64,
    /// Per layer: sequence number and time of the next pair.
    next_pair: Vec<(u64, f64)>,
    /// (time s, layers held, queueing delay s) every 100 ms.
    trace: Vec<(f64, u8, f64)>,
    decisions: Vec<Decision>,
    lost: u64,
    /// Share of packets lost at random after the queue (a radio link), and its generator.
    random_loss: f64,
    lcg: u64,
    /// Packets in the queue and on the wire, in departure order (FIFO).
    in_flight: std::collections::VecDeque<PacketArrival>,
}

impl Path {
    fn new(capacity: impl Fn(f64) -> f64 + 'static, tcp_from: Option<f64>) -> Path {
        Path {
            capacity: Box::new(capacity),
            tcp_from,
            tcp_rate: 100_000.0,
            tcp_cut: 0.0,
            buffer_s: 0.3,
            base_owd_ms: 25,
            queue: 0.0,
            next_pair: vec![(0, 0.0); LADDER.len()],
            trace: Vec::new(),
            decisions: Vec::new(),
            lost: 0,
            random_loss: 0.0,
            lcg: 0x2545_f491_4f6c_dd1d,
            in_flight: std::collections::VecDeque::new(),
        }
    }

    /// Runs `c` from `t0` to `t1` seconds.
    fn run(&mut self, c: &mut Lcc, t0: f64, t1: f64) {
        let info = session();
        if t0 == 0.0 {
            c.handle_announcement(Time::ZERO, &info);
        }
        let mut t = t0;
        while t < t1 {
            let now = Time::from_secs_f64(t);
            let cap = (self.capacity)(t);
            let held = c.layers() as usize;
            // The competitor fills what the queue takes; our layers send pairs on schedule.
            let mut arrivals: Vec<(u8, u64, u8)> = Vec::new();
            for (k, np) in self.next_pair.iter_mut().enumerate().take(held) {
                if np.1 <= t {
                    arrivals.push((k as u8, np.0, 0));
                    arrivals.push((k as u8, np.0 + 1, 1));
                    np.0 += 2;
                    np.1 += 2.0 * f64::from(SIZE) * 8.0 / (LADDER[k] * 1000.0);
                }
            }
            for k in held..self.next_pair.len() {
                self.next_pair[k].1 = t;
            }
            let dt = 0.001;
            let limit = self.buffer_s * cap;
            if self.tcp_from.is_some_and(|t0| t >= t0) {
                self.tcp_rate += 200_000.0 * dt;
                let x = self.tcp_rate * dt;
                if self.queue + x > limit && t - self.tcp_cut > 0.3 {
                    self.tcp_rate *= 0.5;
                    self.tcp_cut = t;
                }
                self.queue += x;
            }
            self.queue = (self.queue - cap * dt).clamp(0.0, limit);
            for (layer, seq, pos) in arrivals {
                let bits = f64::from(SIZE) * 8.0;
                if self.queue + bits > limit {
                    self.lost += 1;
                    continue;
                }
                self.queue += bits;
                self.lcg = self
                    .lcg
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                if ((self.lcg >> 11) as f64 / (1u64 << 53) as f64) < self.random_loss {
                    self.lost += 1;
                    continue;
                }
                // Leaves the FIFO when the bits ahead of it (and its own) are served.
                let q_s = self.queue / cap;
                let recv =
                    now + Duration::from_millis(self.base_owd_ms) + Duration::from_secs_f64(q_s);
                self.in_flight.push_back(PacketArrival {
                    layer,
                    seq,
                    bunch_pos: pos,
                    bunch_len: 2,
                    size: SIZE,
                    send_time_us: now.as_micros() + 7_000_000,
                    recv_time: recv,
                });
            }
            while self.in_flight.front().is_some_and(|p| p.recv_time <= now) {
                let p = self.in_flight.pop_front().unwrap();
                c.handle_packet(p.recv_time, &p);
            }
            if let Some((at, _)) = c.poll_timeout() {
                if at <= now {
                    c.handle_timeout(now);
                }
            }
            while let Some(a) = c.poll_action() {
                assert!(matches!(a, Action::Join(_) | Action::Leave(_)), "{a:?}");
            }
            while let Some(d) = c.poll_decision() {
                self.decisions.push(d);
            }
            if ((t * 1000.0).round() as u64).is_multiple_of(100) {
                self.trace.push((t, c.layers(), self.queue / cap));
            }
            t += dt;
        }
    }

    fn layers_between(&self, a: f64, b: f64) -> Vec<u8> {
        self.trace
            .iter()
            .filter(|x| x.0 >= a && x.0 < b)
            .map(|x| x.1)
            .collect()
    }

    fn reasons(&self) -> Vec<&'static str> {
        self.decisions.iter().map(|d| d.reason).collect()
    }
}

#[test]
fn nothing_before_the_announcement_then_the_base_layer() {
    let mut c = Lcc::default();
    let p = PacketArrival {
        layer: 0,
        seq: 0,
        bunch_pos: 0,
        bunch_len: 2,
        size: SIZE,
        send_time_us: 0,
        recv_time: Time::ZERO,
    };
    c.handle_packet(Time::ZERO, &p);
    c.handle_timeout(Time::from_secs_f64(5.0));
    assert_eq!(c.layers(), 0);
    assert!(c.poll_action().is_none());
    c.handle_announcement(Time::from_secs_f64(1.0), &session());
    assert_eq!(c.poll_action(), Some(Action::Join(0)));
    let d = c.poll_decision().unwrap();
    assert_eq!((d.reason, d.from_layers, d.to_layers), ("join-base", 0, 1));
    // A repeated, older announcement changes nothing.
    let mut old = session();
    old.announce_seq = 0;
    c.handle_announcement(Time::from_secs_f64(2.0), &old);
    assert!(c.poll_action().is_none());
    assert_eq!(c.stats().protocol, "lcc");
}

#[test]
fn alone_it_climbs_within_the_dispersion_ceiling_and_keeps_the_queue_short() {
    // 2 Mbit/s: 0.95 × 2000 = 1900 kbit/s allows 6 layers (1194); 7 (2172) never.
    let mut path = Path::new(|_| 2_000_000.0, None);
    let mut c = Lcc::default();
    path.run(&mut c, 0.0, 40.0);
    let late = path.layers_between(20.0, 40.0);
    assert!(late.iter().all(|&l| l == 6), "{late:?}");
    // The harness sends every layer's pairs on aligned clocks, so now and then all six
    // pairs meet (12 packets, 67 ms at 2 Mbit/s); the real sender staggers them.
    let mut qs: Vec<f64> = path.trace.iter().map(|x| x.2).collect();
    qs.sort_by(f64::total_cmp);
    let p95 = qs[qs.len() * 95 / 100];
    assert!(
        p95 < 0.05 && qs[qs.len() - 1] < 0.1,
        "queue p95 {p95}, max {}",
        qs[qs.len() - 1]
    );
    assert_eq!(path.lost, 0);
    // One layer per join, each after the additive-increase wait: never two joins within
    // 0.5 s x 0.75.
    let joins: Vec<f64> = path
        .decisions
        .iter()
        .filter(|d| d.reason == "probe")
        .map(|d| d.at.as_secs_f64())
        .collect();
    assert_eq!(joins.len(), 5);
    assert!(joins.windows(2).all(|w| w[1] - w[0] >= 0.375), "{joins:?}");
    let d = path.decisions.iter().find(|d| d.reason == "probe").unwrap();
    let names: Vec<&str> = d.inputs.iter().map(|x| x.0).collect();
    for n in ["q_ms", "cap_kbps", "r_recv_kbps", "r_after_kbps"] {
        assert!(names.contains(&n), "{names:?}");
    }
}

#[test]
fn a_capacity_drop_is_answered_within_a_second_without_going_below_the_base() {
    // 2 Mbit/s, then 0.6 from 20 s: at or below 600 kbit/s (3 layers, 402) quickly; never 0.
    let mut path = Path::new(|t| if t < 20.0 { 2_000_000.0 } else { 600_000.0 }, None);
    let mut c = Lcc::default();
    path.run(&mut c, 0.0, 40.0);
    let after = path.layers_between(21.0, 40.0);
    assert!(after.iter().all(|&l| (1..=3).contains(&l)), "{after:?}");
    let first = path
        .decisions
        .iter()
        .find(|d| d.at.as_secs_f64() >= 20.0)
        .unwrap();
    assert!(
        matches!(first.reason, "delay-drop" | "loss-drop"),
        "{}",
        first.reason
    );
    assert!(first.at.as_secs_f64() < 21.0);
    assert!(cum(first.to_layers as usize) <= 600_000.0);
    // After the drop the queue drains; one decrease answered it (no cascade to the base).
    assert!(path.layers_between(25.0, 40.0).iter().all(|&l| l >= 2));
}

#[test]
fn a_competitor_that_fills_the_buffer_meets_a_floor_of_half_the_capacity() {
    // A loss-based (Reno-like) competitor from 5 s on fills the 300-ms buffer, halves, fills
    // it again. Yielding would leave LCC on the base layer; the floor (half of 2 Mbit/s,
    // nearest level on a log scale: 985) holds it at about 5 layers.
    let mut path = Path::new(|_| 2_000_000.0, Some(5.0));
    let mut c = Lcc::default();
    path.run(&mut c, 0.0, 60.0);
    let late = path.layers_between(30.0, 60.0);
    let mean = late.iter().map(|&l| f64::from(l)).sum::<f64>() / late.len() as f64;
    assert!(mean >= 4.0, "mean layers {mean}: {late:?}");
    assert!(late.iter().all(|&l| l >= 1));
    assert!(
        path.reasons().contains(&"floor-join"),
        "{:?}",
        path.reasons()
    );
    let j = path
        .decisions
        .iter()
        .find(|d| d.reason == "floor-join")
        .unwrap();
    // At most half the capacity (the dispersion median); the loss events' TCP rate may bound
    // it lower.
    let floor = j.inputs.iter().find(|x| x.0 == "floor_kbps").unwrap().1;
    assert!((400.0..=1000.0).contains(&floor), "floor {floor}");
}

#[test]
fn silence_falls_back_to_the_base_layer() {
    let mut path = Path::new(|_| 2_000_000.0, None);
    let mut c = Lcc::default();
    path.run(&mut c, 0.0, 15.0);
    assert!(c.layers() > 1);
    // No packet at all for 3 s.
    for ms in 0..3000u64 {
        c.handle_timeout(Time::from_secs_f64(15.0) + Duration::from_millis(ms));
    }
    assert_eq!(c.layers(), 1);
    let mut last = None;
    while let Some(d) = c.poll_decision() {
        last = Some(d);
    }
    assert_eq!(last.unwrap().reason, "silence");
}

#[test]
fn hostile_input_never_panics_nor_leaves_the_base() {
    // Garbage: layers past the ladder, sequence jumps, times going backwards, zero sizes.
    let mut c = Lcc::new(LccConfig::default());
    c.handle_announcement(Time::from_secs_f64(1.0), &session());
    let mut x: u64 = 12345;
    let mut held_seen = Vec::new();
    for i in 0..200_000u64 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let t = Time::from_micros(1_000_000 + i * 50 - (x % 3000));
        let p = PacketArrival {
            layer: (x % 12) as u8,
            seq: x % 100_000,
            bunch_pos: (x % 3) as u8,
            bunch_len: (x % 4) as u8,
            size: (x % 1500) as u32,
            send_time_us: x % 5_000_000,
            recv_time: t,
        };
        c.handle_packet(t, &p);
        if i % 100 == 0 {
            c.handle_timeout(t);
        }
        while c.poll_action().is_some() {}
        while c.poll_decision().is_some() {}
        held_seen.push(c.layers());
    }
    assert!(held_seen.iter().all(|&l| (1..=9).contains(&l)));
}

/// Layer `k`'s next pair, sent at `now`: its first packet arrives at `first`, the second
/// `spacing` seconds later; `np` (sequence number, time of the next pair) moves on.
fn send_pair(c: &mut Lcc, k: usize, np: &mut (u64, f64), now: Time, first: Time, spacing: f64) {
    for pos in 0..2u8 {
        let p = PacketArrival {
            layer: k as u8,
            seq: np.0 + u64::from(pos),
            bunch_pos: pos,
            bunch_len: 2,
            size: SIZE,
            send_time_us: now.as_micros() + 3_000_000,
            recv_time: first + Duration::from_secs_f64(f64::from(pos) * spacing),
        };
        c.handle_packet(p.recv_time, &p);
    }
    np.0 += 2;
    np.1 += 2.0 * f64::from(SIZE) * 8.0 / (LADDER[k] * 1000.0);
}

/// Several receivers behind one FIFO of capacity `cap` (bit/s), in 1-ms steps: each receiver's
/// held layers send pairs on schedule; the queue (s) grows by what exceeds the capacity; every
/// packet's one-way delay is 25 ms plus the queue it found, and a pair leaves back to back.
fn shared_fifo(
    rx: &mut [(Lcc, SessionInfo)],
    cap: f64,
    t0: f64,
    t1: f64,
    queue: &mut f64,
) -> Vec<(f64, usize, Decision)> {
    let mut out = Vec::new();
    let mut next: Vec<Vec<(u64, f64)>> = rx.iter().map(|_| vec![(0, t0); LADDER.len()]).collect();
    let mut t = t0;
    while t < t1 {
        let now = Time::from_secs_f64(t);
        let mut offered = 0.0;
        for (i, (c, info)) in rx.iter_mut().enumerate() {
            if t == t0 && t0 == 0.0 {
                c.handle_announcement(now, info);
            }
            let held = c.layers() as usize;
            offered += cum(held);
            for (k, np) in next[i].iter_mut().enumerate() {
                if k >= held {
                    np.1 = t;
                    continue;
                }
                if np.1 <= t {
                    let first = now + Duration::from_millis(25) + Duration::from_secs_f64(*queue);
                    send_pair(c, k, np, now, first, f64::from(SIZE) * 8.0 / cap);
                }
            }
            if c.poll_timeout().is_some_and(|(at, _)| at <= now) {
                c.handle_timeout(now);
            }
            while c.poll_action().is_some() {}
            while let Some(d) = c.poll_decision() {
                out.push((t, i, d));
            }
        }
        *queue = (*queue + (offered - cap) / cap * 0.001).clamp(0.0, 0.3);
        t += 0.001;
    }
    out
}

#[test]
fn behind_one_fifo_the_largest_subscriber_yields_and_the_small_one_holds() {
    // A holds all nine layers (2922 kbit/s), B a four-layer session (818): on 3.5 Mbit/s they
    // fit together; from 30 s the link carries 3.6 Mbit/s and the queue grows. A, holding
    // most of the capacity, has the lower yield threshold and decreases; once the queue
    // drains, B never had to: one change instead of two (before the yield order both
    // decreased at `q_high`, every time).
    let mut small = session();
    small.layers.truncate(4);
    small.session_id = 2;
    let mut rx = vec![(Lcc::default(), session()), (Lcc::default(), small)];
    let mut q = 0.0;
    let warm = shared_fifo(&mut rx, 3_750_000.0, 0.0, 30.0, &mut q);
    assert_eq!(rx[0].0.layers(), 9, "{warm:?}");
    assert_eq!(rx[1].0.layers(), 4, "{warm:?}");
    let after = shared_fifo(&mut rx, 3_600_000.0, 30.0, 60.0, &mut q);
    let drops = |i: usize| {
        after
            .iter()
            .filter(|(_, r, d)| *r == i && d.to_layers < d.from_layers)
            .count()
    };
    assert!(drops(0) >= 1, "{after:?}");
    assert_eq!(drops(1), 0, "{after:?}");
    assert_eq!(rx[1].0.layers(), 4);
    assert!(q < 0.05, "queue {q}");
}

/// One receiver alone on a link of capacity `cap` (bit/s): pairs back to back at `cap` (at
/// `fair` from four layers on, as a fair queue spaces a backlogged flow's pairs by its share),
/// and every join to four layers or more fails `fail_after` seconds later (one packet of each
/// layer lost). Below four layers there is no queue; from four on, the packets meet the 10-ms
/// queue such an excess stands in before it is dropped (a full buffer, or CoDel past its 5-ms
/// target), which makes the losses congestion, not random loss. Returns the waits (s) from
/// each loss-drop below four layers to the next join of the fourth.
fn waits_after_failed_joins_of_layer_4(
    cap: f64,
    fair: Option<f64>,
    fail_after: f64,
    until: f64,
) -> Vec<f64> {
    let mut c = Lcc::default();
    c.handle_announcement(Time::ZERO, &session());
    let mut next = vec![(0u64, 0.0f64); LADDER.len()];
    let mut joined: Option<f64> = None;
    let mut dropped_at: Option<f64> = None;
    let mut waits = Vec::new();
    let mut t = 0.0;
    while t < until {
        let now = Time::from_secs_f64(t);
        let held = c.layers() as usize;
        let spacing = f64::from(SIZE) * 8.0 / fair.filter(|_| held >= 4).unwrap_or(cap);
        if held >= 4 && joined.is_some_and(|j| t - j >= fail_after) {
            // One number of each layer never arrives: a loss once three higher ones have.
            for np in next.iter_mut().take(held) {
                np.0 += 1;
            }
            joined = None;
        }
        for (k, np) in next.iter_mut().enumerate() {
            if k >= held {
                np.1 = t;
                continue;
            }
            if np.1 <= t {
                let queue = if held >= 4 { 10 } else { 0 };
                let at = now + Duration::from_millis(25 + queue);
                send_pair(&mut c, k, np, now, at, spacing);
            }
        }
        if c.poll_timeout().is_some_and(|(at, _)| at <= now) {
            c.handle_timeout(now);
        }
        while c.poll_action().is_some() {}
        while let Some(d) = c.poll_decision() {
            if d.to_layers > d.from_layers {
                joined = Some(t);
            }
            if d.to_layers == 4 && d.from_layers == 3 {
                if let Some(at) = dropped_at.take() {
                    waits.push(t - at);
                }
            }
            if d.from_layers >= 4 && d.to_layers < 4 {
                assert_eq!(d.reason, "loss-drop", "{d:?}");
                dropped_at = Some(t);
            }
        }
        t += 0.001;
    }
    waits
}

#[test]
fn a_receiver_holding_a_small_share_retries_a_failed_join_sooner() {
    // Holding most of the link while the fourth layer is held down (402 kbit/s or less of 1000),
    // the hold-down doubles to its maximum: 4, 8, 16, 32 s (±25 %).
    let large = waits_after_failed_joins_of_layer_4(1_000_000.0, None, 0.1, 240.0);
    assert!(large.len() >= 4, "{large:?}");
    assert!(large[3..].iter().all(|&w| w >= 24.0), "{large:?}");
    // Holding 402 of 3500 kbit/s or less (a latecomer beside two incumbents), the same
    // failures hold it down at most 32 s x 0.115 / 0.25 = 14.7 s (±25 %, so at most 18.4 s,
    // where it was 24-40 s): it keeps trying for its share.
    let small = waits_after_failed_joins_of_layer_4(3_500_000.0, None, 0.1, 240.0);
    assert!(small.len() >= 8, "{small:?}");
    assert!(small.iter().all(|&w| w <= 20.0), "{small:?}");
}

#[test]
fn behind_a_fair_queue_the_swing_of_the_capacity_estimate_does_not_lift_a_hold_down() {
    // A fair queue spaces our pairs by our share (600 of 1000 kbit/s) while we exceed it and by
    // the capacity once we are back under it: the estimate at each failure is 0.6 of the one
    // the join was made on (CoDel drops our excess after a few seconds). That is no evidence that the level fits; the hold-down still
    // doubles to its maximum (before, every one lifted at once and the join failed every few
    // seconds: 20 layer changes a minute behind FQ-CoDel).
    let w = waits_after_failed_joins_of_layer_4(1_000_000.0, Some(600_000.0), 3.0, 240.0);
    assert!(w.len() >= 4, "{w:?}");
    assert!(w[3..].iter().all(|&x| x >= 24.0), "{w:?}");
}

#[test]
fn a_latecomer_holding_little_takes_no_blame_and_the_incumbent_yields() {
    // A alone on 3.5 Mbit/s for 20 s climbs to eight or nine layers; B joins then, and its
    // joins on the full link raise the queue. Before, B's own join took the blame (a steep
    // rise right after it, or the joined-lately discount of its threshold) and B undid it
    // (4 -> 3 layers at 23 s here; on the testbed, again and again while A held 7 layers: Jain
    // 0.71). A receiver under a quarter of the capacity now takes no blame: A, holding most,
    // yields, and B leaves no level below a quarter of the link.
    let mut rx = vec![(Lcc::default(), session())];
    let mut q = 0.0;
    shared_fifo(&mut rx, 3_500_000.0, 0.0, 20.0, &mut q);
    assert!(rx[0].0.layers() >= 8, "{}", rx[0].0.layers());
    let mut b = (Lcc::default(), session());
    b.1.session_id = 2;
    b.0.handle_announcement(Time::from_secs_f64(20.0), &b.1);
    rx.push(b);
    let log = shared_fifo(&mut rx, 3_500_000.0, 20.0, 80.0, &mut q);
    let drops: Vec<_> = log
        .iter()
        .filter(|(_, _, d)| d.to_layers < d.from_layers)
        .map(|(t, i, d)| (*t as u32, *i, d.from_layers, d.to_layers))
        .collect();
    assert!(
        drops
            .iter()
            .all(|&(_, i, from, _)| i == 0 || cum(from as usize) >= 0.25 * 3_500_000.0),
        "{drops:?}"
    );
    assert!(drops.iter().any(|&(_, i, _, _)| i == 0), "{drops:?}");
    let (a, b) = (rx[0].0.layers() as usize, rx[1].0.layers() as usize);
    assert!(
        cum(b) >= 985_000.0 && cum(a) + cum(b) <= 3_500_000.0,
        "A {a} B {b}"
    );
}

/// Mean layers over 20-60 s on a 4 Mbit/s path that loses `p` of the packets at random after
/// its (empty) queue, with `cfg`.
fn layers_under_random_loss(cfg: LccConfig, p: f64) -> (f64, Vec<&'static str>) {
    let mut path = Path::new(|_| 4_000_000.0, None);
    path.random_loss = p;
    let mut c = Lcc::new(cfg);
    path.run(&mut c, 0.0, 60.0);
    let l = path.layers_between(20.0, 60.0);
    let mean = l.iter().map(|&x| f64::from(x)).sum::<f64>() / l.len() as f64;
    (mean, path.reasons())
}

#[test]
fn random_loss_with_no_queue_is_borne_up_to_what_a_tcp_flow_would_carry() {
    // 1 % random loss, RTT ~50 ms: a Reno flow's rate at that loss-event spacing is ~2.6
    // Mbit/s, so 7-8 layers (2172 / 2526 kbit/s). Treated as congestion (q_random 0, every loss
    // event a decrease and a hold-down) the same path kept a few layers.
    let (mean, reasons) = layers_under_random_loss(LccConfig::default(), 0.01);
    let (old, _) = layers_under_random_loss(
        LccConfig {
            q_random: 0.0,
            ..LccConfig::default()
        },
        0.01,
    );
    assert!(
        mean >= 6.5,
        "mean layers {mean:.2} (as congestion: {old:.2}); {reasons:?}"
    );
    assert!(
        old < mean - 2.0,
        "as congestion {old:.2}, as random loss {mean:.2}"
    );
    eprintln!("1 %: mean layers {mean:.2} (as congestion: {old:.2})");
    // 5 %: the TCP rate falls to ~1.2 Mbit/s, and so does the level.
    let (m5, _) = layers_under_random_loss(LccConfig::default(), 0.05);
    eprintln!("5 %: mean layers {m5:.2}");
    assert!((3.0..=6.5).contains(&m5), "5 %: mean layers {m5:.2}");
}
