//! One direction of the emulated link: the shared sans-IO [`netmodel::Link`] (queue,
//! serialisation, loss, delay, jitter) around raw Ethernet frames, plus what only an emulator
//! between two veths needs: frame sizes and flows read from the IP header, per-group delivery
//! and IGMP bookkeeping (join and leave latency), and the test-only frame rules of
//! [`LinkParams`]. The shell (see [`crate::run`]) reads the clock, the sockets and sleeps.

use crate::config::{LinkParams, LinkUpdate};
use crate::flow::{inspect, ip_string, Igmp};
use crate::Error;
use netmodel::{Link, LinkConfig};
use proto::Time;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};

pub use netmodel::link::{MAX_IN_FLIGHT, SOJOURN_MAX_MS};

/// Longest a frame held back for reordering waits for the next one to overtake it.
pub const REORDER_HOLD_NS: u64 = 10_000_000;

/// Per multicast group facts, as seen leaving the link (delivered to the far end).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct GroupStats {
    /// Data packets delivered.
    pub packets: u64,
    /// Data bytes (IP) delivered.
    pub bytes: u64,
    /// Time of the first data packet delivered (shell clock, ns; 0 = never).
    pub first_ns: u64,
    /// Time of the last data packet delivered (ns; 0 = never).
    pub last_ns: u64,
    /// IGMP reports for this group delivered.
    pub reports: u64,
    /// IGMP leaves for this group delivered.
    pub leaves: u64,
    /// Time of the last report delivered (ns; 0 = never).
    pub last_report_ns: u64,
    /// Time of the last leave delivered (ns; 0 = never).
    pub last_leave_ns: u64,
}

/// Counters of one direction.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Counters {
    /// Frames received from the ingress interface.
    pub rx_packets: u64,
    /// Their bytes (whole frames).
    pub rx_bytes: u64,
    /// Frames delivered to the egress interface.
    pub tx_packets: u64,
    /// Their bytes (whole frames).
    pub tx_bytes: u64,
    /// Dropped by the queue because it was full.
    pub drop_overflow: u64,
    /// Dropped early by an AQM.
    pub drop_early: u64,
    /// Dropped by the loss model.
    pub drop_loss: u64,
    /// Dropped because the delay line was full ([`MAX_IN_FLIGHT`]).
    pub drop_in_flight: u64,
    /// Frames the kernel refused to send (counted by the shell).
    pub drop_send: u64,
    /// Frames the kernel dropped before we read them (counted by the shell).
    pub drop_kernel: u64,
    /// Frames delivered twice ([`LinkParams::duplicate`]); the copies count in `tx_packets`.
    pub duplicated: u64,
    /// Frames held back and delivered after their successor ([`LinkParams::reorder`]).
    pub reordered: u64,
    /// Packets waiting in the queue.
    pub queue_packets: u64,
    /// Bytes waiting in the queue (serialisation sizes).
    pub queue_bytes: u64,
    /// Highest queue length seen, packets.
    pub queue_max_packets: u64,
    /// Frames serialised and waiting in the delay line.
    pub in_flight: u64,
    /// Queueing delay of every frame that left the queue (arrival to the start of its
    /// serialisation), as a histogram: whole milliseconds (capped at [`SOJOURN_MAX_MS`]) to
    /// frames. Cumulative, so the difference of two snapshots is the histogram in between.
    pub sojourn_ms: BTreeMap<u32, u64>,
}

/// One direction of the link.
pub struct Direction {
    params: LinkParams,
    link: Link<Vec<u8>>,
    rx: (u64, u64),
    tx_bytes: u64,
    shell: (u64, u64),
    groups: BTreeMap<u32, GroupStats>,
    /// Duplication and reordering: frames ready to go out in this order, the one held back
    /// (with the time it goes anyway), their counters and their random stream.
    ready: VecDeque<(Time, Vec<u8>)>,
    held: Option<(Time, Time, Vec<u8>)>,
    dup_reorder: (u64, u64),
    rng: netmodel::rng::Rng,
}

fn link_config(p: &LinkParams) -> LinkConfig {
    LinkConfig {
        rate_bps: p.rate_bps,
        delay_ns: p.delay_ns,
        jitter_ns: p.jitter_ns,
        loss: p.loss.clone(),
        queue: p.queue.clone(),
    }
}

impl Direction {
    /// A direction with the given parameters and random seed.
    pub fn new(params: LinkParams, seed: u64) -> Result<Direction, Error> {
        let link =
            Link::new(link_config(&params), seed).map_err(|e| Error::Config(e.to_string()))?;
        Ok(Direction {
            params,
            link,
            rx: (0, 0),
            tx_bytes: 0,
            shell: (0, 0),
            groups: BTreeMap::new(),
            ready: VecDeque::new(),
            held: None,
            dup_reorder: (0, 0),
            rng: netmodel::rng::Rng::derive(seed, 0xD0_0B1E),
        })
    }

    /// The current parameters.
    pub fn params(&self) -> &LinkParams {
        &self.params
    }

    /// Applies a run-time change. A new queue discipline takes over the waiting packets in
    /// order (those it refuses are counted as overflow drops).
    pub fn update(&mut self, now: Time, u: &LinkUpdate) -> Result<(), Error> {
        let mut next = self.params.clone();
        u.apply(&mut next)?;
        // Build before committing, so a bad combination changes nothing.
        self.link
            .reconfigure(now, link_config(&next))
            .map_err(|e| Error::Config(e.to_string()))?;
        self.params = next;
        Ok(())
    }

    /// A frame arrived at `now`.
    pub fn arrive(&mut self, now: Time, mut frame: Vec<u8>) {
        if self.params.cc_time_shift_us != 0 {
            crate::flow::shift_cc_send_time(&mut frame, self.params.cc_time_shift_us);
        }
        self.rx.0 += 1;
        self.rx.1 += frame.len() as u64;
        let info = inspect(&frame, &self.params.flow);
        let size = (info.l3_len as i64 + self.params.overhead_bytes as i64).max(1) as u32;
        self.link.arrive(now, frame, size, info.flow);
        self.service(now);
    }

    /// Moves packets from the queue through the serialiser while the link is free at `now`.
    pub fn service(&mut self, now: Time) {
        match self.params.drop_bunch_pos {
            None => self.link.service(now),
            Some(pos) => self.link.service_with(now, |f: &Vec<u8>| {
                crate::flow::cc_bunch_pos(f.as_ref()) == Some(pos)
            }),
        }
    }

    /// The next frame due at `now`, with its scheduled release time.
    pub fn poll_release(&mut self, now: Time) -> Option<(Time, Vec<u8>)> {
        let (at, frame) = self.next_frame(now)?;
        self.tx_bytes += frame.len() as u64;
        self.note_delivery(at, &frame);
        Some((at, frame))
    }

    /// The link's releases after duplication and reordering: a frame picked for reordering
    /// waits for the next release (then goes right after it) or [`REORDER_HOLD_NS`]; a frame
    /// picked for duplication goes twice in a row. One frame is held at a time.
    fn next_frame(&mut self, now: Time) -> Option<(Time, Vec<u8>)> {
        loop {
            if let Some(f) = self.ready.pop_front() {
                return Some(f);
            }
            match self.link.poll_release(now) {
                Some((at, frame)) => {
                    if self.held.is_none() && self.rng.chance(self.params.reorder) {
                        self.dup_reorder.1 += 1;
                        self.held = Some((at, Time(at.as_nanos() + REORDER_HOLD_NS), frame));
                        continue;
                    }
                    if self.rng.chance(self.params.duplicate) {
                        self.dup_reorder.0 += 1;
                        self.ready.push_back((at, frame.clone()));
                    }
                    self.ready.push_front((at, frame));
                    if let Some((t, _, h)) = self.held.take() {
                        self.ready.push_back((t, h));
                    }
                }
                None => match self.held.take() {
                    Some((t, until, h)) if now >= until => return Some((t, h)),
                    h => {
                        self.held = h;
                        return None;
                    }
                },
            }
        }
    }

    fn note_delivery(&mut self, at: Time, frame: &[u8]) {
        let info = inspect(frame, &self.params.flow);
        let t = at.as_nanos().max(1);
        if let Some(g) = info.mcast_dst {
            let s = self.groups.entry(g).or_default();
            s.packets += 1;
            s.bytes += info.l3_len as u64;
            if s.first_ns == 0 {
                s.first_ns = t;
            }
            s.last_ns = t;
        }
        for m in info.igmp {
            match m {
                Igmp::Report(g) => {
                    let s = self.groups.entry(g).or_default();
                    s.reports += 1;
                    s.last_report_ns = t;
                }
                Igmp::Leave(g) => {
                    let s = self.groups.entry(g).or_default();
                    s.leaves += 1;
                    s.last_leave_ns = t;
                }
                Igmp::Query(_) => {}
            }
        }
    }

    /// When the shell must call [`Direction::service`] / [`Direction::poll_release`] next.
    pub fn next_wakeup(&self) -> Time {
        let l = self.link.next_wakeup();
        match (&self.held, self.ready.is_empty()) {
            (_, false) => Time::ZERO,
            (Some((_, until, _)), true) => l.min(*until),
            (None, true) => l,
        }
    }

    /// Counters, with queue occupancy filled in.
    pub fn counters(&self) -> Counters {
        let l = self.link.counters();
        Counters {
            rx_packets: self.rx.0,
            rx_bytes: self.rx.1,
            tx_packets: l.delivered + self.dup_reorder.0,
            tx_bytes: self.tx_bytes,
            drop_overflow: l.drop_overflow,
            drop_early: l.drop_early,
            drop_loss: l.drop_loss,
            drop_in_flight: l.drop_in_flight,
            drop_send: self.shell.0,
            drop_kernel: self.shell.1,
            duplicated: self.dup_reorder.0,
            reordered: self.dup_reorder.1,
            queue_packets: l.queue_packets,
            queue_bytes: l.queue_bytes,
            queue_max_packets: l.queue_max_packets,
            in_flight: l.in_flight,
            sojourn_ms: l.sojourn_ms,
        }
    }

    /// Adds to the shell-side counters.
    pub fn add_shell_drops(&mut self, send: u64, kernel: u64) {
        self.shell.0 += send;
        self.shell.1 += kernel;
    }

    /// Per-group facts keyed by dotted quad; times shifted by `offset_ns` (0 stays 0), so the
    /// shell can report wall-clock times.
    pub fn groups(&self, offset_ns: i128) -> BTreeMap<String, GroupStats> {
        let sh = |t: u64| {
            if t == 0 {
                0
            } else {
                (t as i128 + offset_ns).max(0) as u64
            }
        };
        self.groups
            .iter()
            .map(|(g, s)| {
                let mut s = s.clone();
                s.first_ns = sh(s.first_ns);
                s.last_ns = sh(s.last_ns);
                s.last_report_ns = sh(s.last_report_ns);
                s.last_leave_ns = sh(s.last_leave_ns);
                (ip_string(*g), s)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flow::tests::udp_frame;
    use netmodel::LossModel;
    use netmodel::QdiscConfig;
    use std::time::Duration;

    fn frame(ip_len: usize) -> Vec<u8> {
        udp_frame([10, 0, 0, 1], [10, 0, 1, 1], 1, 2, ip_len - 28)
    }

    fn params(rate: u64, delay_ms: u64) -> LinkParams {
        LinkParams {
            rate_bps: rate,
            delay_ns: delay_ms * 1_000_000,
            ..LinkParams::default()
        }
    }

    /// Runs the direction until empty, returning release times in ns.
    fn drain(d: &mut Direction) -> Vec<u64> {
        let mut out = Vec::new();
        loop {
            let t = d.next_wakeup();
            if t == Time::NEVER {
                return out;
            }
            d.service(t);
            while let Some((at, _)) = d.poll_release(t) {
                assert_eq!(at, t.min(at));
                out.push(at.as_nanos());
            }
        }
    }

    /// Duplication delivers a frame twice in a row; reordering swaps a frame with its
    /// successor, or releases it after the hold when none comes; both are counted, and a bad
    /// probability is refused.
    #[test]
    fn duplication_and_reordering() {
        let sizes = |d: &mut Direction, n: usize| -> Vec<usize> {
            let mut out = Vec::new();
            for i in 0..n {
                d.arrive(Time::from_millis(10 * i as u64), frame(100 + i));
            }
            loop {
                let t = d.next_wakeup();
                if t == Time::NEVER {
                    return out;
                }
                d.service(t);
                while let Some((_, f)) = d.poll_release(t) {
                    out.push(f.len() - 14 - 100);
                }
            }
        };
        let mut dup = Direction::new(params(0, 1), 1).unwrap();
        dup.update(
            Time::ZERO,
            &LinkUpdate::from_json(r#"{"duplicate":1}"#).unwrap(),
        )
        .unwrap();
        assert_eq!(sizes(&mut dup, 3), vec![0, 0, 1, 1, 2, 2]);
        let c = dup.counters();
        assert_eq!((c.duplicated, c.tx_packets, c.rx_packets), (3, 6, 3));
        let mut re = Direction::new(params(0, 1), 1).unwrap();
        re.update(
            Time::ZERO,
            &LinkUpdate::from_json(r#"{"reorder":1}"#).unwrap(),
        )
        .unwrap();
        // Pairs swap; the last, odd one goes after the hold.
        assert_eq!(sizes(&mut re, 5), vec![1, 0, 3, 2, 4]);
        assert_eq!(re.counters().reordered, 3);
        assert_eq!(re.counters().tx_packets, 5);
        // Half and half: every frame still arrives, at least once.
        let mut both = Direction::new(params(0, 1), 7).unwrap();
        both.update(
            Time::ZERO,
            &LinkUpdate::from_json(r#"{"duplicate":0.5,"reorder":0.5}"#).unwrap(),
        )
        .unwrap();
        let got = sizes(&mut both, 200);
        let mut uniq = got.clone();
        uniq.sort_unstable();
        uniq.dedup();
        assert_eq!(uniq, (0..200).collect::<Vec<_>>());
        let c = both.counters();
        assert_eq!(got.len() as u64, 200 + c.duplicated);
        assert!(c.duplicated > 50 && c.reordered > 30, "{c:?}");
    }

    #[test]
    fn back_to_back_packets_are_serialised_at_the_rate() {
        // 1 Mbit/s, 10 ms: a 1000-byte packet takes 8 ms.
        let mut d = Direction::new(params(1_000_000, 10), 1).unwrap();
        for _ in 0..3 {
            d.arrive(Time::from_millis(100), frame(1000));
        }
        let r = drain(&mut d);
        assert_eq!(r, vec![118_000_000, 126_000_000, 134_000_000]);
        let c = d.counters();
        assert_eq!((c.rx_packets, c.tx_packets, c.queue_packets), (3, 3, 0));
    }

    #[test]
    fn idle_link_starts_at_arrival_and_overhead_counts() {
        let mut p = params(8_000_000, 0);
        p.overhead_bytes = 14;
        let mut d = Direction::new(p, 1).unwrap();
        d.arrive(Time::from_millis(5), frame(986)); // 1000 B on the wire: 1 ms
        assert_eq!(drain(&mut d), vec![6_000_000]);
        d.arrive(Time::from_millis(50), frame(986));
        assert_eq!(drain(&mut d), vec![51_000_000]);
    }

    #[test]
    fn late_service_does_not_drift() {
        // Service called 0.3 ms late every time: releases still follow the exact schedule.
        let mut d = Direction::new(params(1_000_000, 0), 1).unwrap();
        for _ in 0..10 {
            d.arrive(Time::ZERO, frame(125)); // 1 ms each
        }
        let mut out = Vec::new();
        while d.next_wakeup() != Time::NEVER {
            let t = d.next_wakeup() + Duration::from_micros(300);
            d.service(t);
            while let Some((at, _)) = d.poll_release(t) {
                out.push(at.as_nanos() / 1000);
            }
        }
        assert_eq!(out, (1..=10).map(|i| i * 1000).collect::<Vec<_>>());
    }

    #[test]
    fn queue_overflow_drops_the_tail() {
        let mut p = params(1_000_000, 0);
        p.queue = Some(QdiscConfig::Droptail {
            limit_packets: Some(5),
            limit_bytes: None,
            limit_ms: None,
        });
        let mut d = Direction::new(p, 1).unwrap();
        for _ in 0..20 {
            d.arrive(Time::ZERO, frame(500));
        }
        // one on the wire, five waiting, fourteen dropped
        let c = d.counters();
        assert_eq!((c.queue_packets, c.drop_overflow), (5, 14));
        assert_eq!(drain(&mut d).len(), 6);
    }

    #[test]
    fn jitter_never_reorders_and_stays_in_band() {
        let mut p = params(0, 20);
        p.jitter_ns = 5_000_000;
        let mut d = Direction::new(p, 9).unwrap();
        for i in 0..2000u64 {
            d.arrive(Time::from_micros(i * 100), frame(100));
        }
        let r = drain(&mut d);
        assert_eq!(r.len(), 2000);
        assert!(r.windows(2).all(|w| w[0] <= w[1]));
        // every packet: delay in [15, 25] ms after arrival, except held back by order
        for (i, t) in r.iter().enumerate() {
            let sent = i as u64 * 100_000;
            let delay = t - sent;
            assert!(delay >= 15_000_000, "{delay}");
            assert!(delay <= 25_000_000 + 100_000, "{delay}");
        }
        let mean: f64 = r
            .iter()
            .enumerate()
            .map(|(i, t)| (*t - i as u64 * 100_000) as f64)
            .sum::<f64>()
            / 2000.0;
        assert!(
            mean > 20_000_000.0,
            "order-keeping biases the mean up: {mean}"
        );
    }

    #[test]
    fn bernoulli_loss_rate_end_to_end() {
        let mut p = params(0, 1);
        p.loss = LossModel::Bernoulli { p: 0.1 };
        let mut d = Direction::new(p, 42).unwrap();
        for i in 0..50_000u64 {
            d.arrive(Time::from_micros(i), frame(100));
        }
        let got = drain(&mut d).len();
        let c = d.counters();
        assert_eq!(c.drop_loss as usize + got, 50_000);
        let rate = c.drop_loss as f64 / 50_000.0;
        assert!((rate - 0.1).abs() < 0.006, "{rate}"); // ~4.5 sigma
    }

    #[test]
    fn rate_change_applies_to_later_packets_and_queue_swap_keeps_packets() {
        let mut d = Direction::new(params(1_000_000, 0), 1).unwrap();
        for _ in 0..4 {
            d.arrive(Time::ZERO, frame(125)); // 1 ms each at 1 Mbit/s
        }
        let u = LinkUpdate::from_json(
            r#"{"rate_bps":2000000,"queue":{"kind":"droptail","limit_packets":2}}"#,
        )
        .unwrap();
        d.update(Time::ZERO, &u).unwrap();
        // first one already on the wire at 1 Mbit/s; of the 3 waiting, 2 fit the new queue
        assert_eq!(d.counters().drop_overflow, 1);
        assert_eq!(drain(&mut d), vec![1_000_000, 1_500_000, 2_000_000]);
        assert!(d
            .update(Time::ZERO, &LinkUpdate::from_json(r#"{"loss":3}"#).unwrap())
            .is_err());
    }

    #[test]
    fn fair_queue_serves_a_layered_session_as_one_flow() {
        // 1 Mbit/s DRR with a one-packet quantum: a greedy unicast flow with 10 packets waiting
        // and a session whose layers use two groups of one /24 — the session's packets come
        // out one per round, interleaved with the unicast flow, not two in a row.
        let mut p = params(1_000_000, 0);
        p.queue = Some(QdiscConfig::Fq {
            per_flow_packets: 20,
            total_bytes: None,
            quantum_bytes: None,
        });
        let mut d = Direction::new(p, 1).unwrap();
        for _ in 0..10 {
            d.arrive(Time::ZERO, frame(500));
        }
        let l0 = udp_frame([10, 0, 0, 9], [239, 1, 1, 0], 1, 5000, 472);
        let l1 = udp_frame([10, 0, 0, 9], [239, 1, 1, 1], 1, 5002, 472);
        d.arrive(Time::ZERO, l0.clone());
        d.arrive(Time::ZERO, l1.clone());
        let mut order = Vec::new();
        loop {
            let t = d.next_wakeup();
            if t == Time::NEVER {
                break;
            }
            d.service(t);
            while let Some((_, f)) = d.poll_release(t) {
                order.push(if f == l0 || f == l1 { 'S' } else { 'u' });
            }
        }
        let s: String = order.into_iter().collect();
        // first unicast packet was already on the wire; then round robin u/S
        assert_eq!(s, "uuSuSuuuuuuu", "{s}");
    }

    #[test]
    fn fq_codel_drops_at_dequeue_are_counted_and_sojourn_is_recorded() {
        // 10 Mbit/s FQ-CoDel; one unicast flow offers 12 Mbit/s for 20 s (1000-B frames every
        // 2/3 ms, 0.8 ms on the wire): CoDel drops the excess (one frame in six) at dequeue,
        // and the waits stay bounded where a drop-tail queue would grow to 3 s.
        let mut p = params(10_000_000, 0);
        p.queue = Some(serde_json::from_str(r#"{"kind":"fq_codel"}"#).unwrap());
        let mut d = Direction::new(p, 1).unwrap();
        let mut delivered = 0;
        let n = 30_000u64;
        for i in 0..n {
            let t = Time(i * 2_000_000 / 3);
            d.service(t);
            while d.poll_release(t).is_some() {
                delivered += 1;
            }
            d.arrive(t, frame(1000));
        }
        delivered += drain(&mut d).len();
        let c = d.counters();
        assert_eq!(c.drop_overflow, 0);
        let share = c.drop_early as f64 / n as f64;
        assert!((0.15..0.18).contains(&share), "codel dropped {share}");
        assert_eq!(delivered as u64 + c.drop_early, n);
        let total: u64 = c.sojourn_ms.values().sum();
        assert_eq!(total, delivered as u64);
        // 95 % of the frames waited less than a quarter of the 3.3 s an unbounded FIFO would
        // reach (CoDel needs a few seconds to ramp its drop rate up to an unresponsive
        // flow's excess: crates/netmodel/src/fq_codel.rs).
        let mut acc = 0;
        let p95 = c
            .sojourn_ms
            .iter()
            .find(|(_, n)| {
                acc += **n;
                acc * 100 >= total * 95
            })
            .map(|(ms, _)| *ms)
            .unwrap();
        assert!(p95 < 800, "p95 sojourn {p95} ms");
    }

    #[test]
    fn multicast_and_igmp_delivery_is_recorded() {
        let mut d = Direction::new(params(0, 5), 1).unwrap();
        let g = udp_frame([10, 0, 0, 1], [239, 1, 1, 1], 1, 5000, 100);
        d.arrive(Time::from_millis(1), g.clone());
        d.arrive(Time::from_millis(2), g);
        drain(&mut d);
        let gs = d.groups(1_000);
        let s = &gs["239.1.1.1"];
        assert_eq!(
            (s.packets, s.first_ns, s.last_ns),
            (2, 6_001_000, 7_001_000)
        );
    }
}
