//! One direction of a link, sans-IO: packets go in with a time, come out with a release time.
//! The link emulator wraps it around raw frames between two veths, the session harness around
//! datagrams in virtual time; both get the same serialisation, queue, loss and delay.
//!
//! Signal flow per packet:
//!
//! ```text
//! arrive(now) -> queue discipline (may drop)
//!    -> serialiser: starts when the link is free, takes size·8/rate
//!    -> loss model (lost on the wire: the link time is still used)
//!    -> delay line: released at end_of_serialisation + delay ± jitter, in order
//! ```
//!
//! The serialiser's next start is the *scheduled* end of the previous packet, not the time the
//! caller happened to call [`Link::service`], so a late wake-up never turns into a rate error.

use crate::loss::{LossModel, LossState};
use crate::rng::Rng;
use crate::{build_seeded, DropReason, Error, QdiscConfig, QueueDiscipline, Queued};
use proto::Time;
use serde::Serialize;
use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

/// Packets waiting in the delay line beyond this are dropped (and counted): it bounds memory
/// when someone sets an absurd delay on an unlimited-rate link.
pub const MAX_IN_FLIGHT: usize = 200_000;

/// One direction's parameters.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkConfig {
    /// Rate in bit/s; 0 = unlimited (no serialisation delay).
    pub rate_bps: u64,
    /// One-way propagation delay, ns.
    pub delay_ns: u64,
    /// Jitter, ns: each packet's delay is `delay ± U(0, jitter)`, never below zero, and never
    /// released before the previous packet (a link does not reorder).
    pub jitter_ns: u64,
    /// Loss on the wire.
    pub loss: LossModel,
    /// Queue discipline in front of the serialiser; `None` = drop-tail of two
    /// bandwidth-delay products ([`default_limit_bytes`]).
    pub queue: Option<QdiscConfig>,
}

impl Default for LinkConfig {
    fn default() -> Self {
        LinkConfig {
            rate_bps: 0,
            delay_ns: 0,
            jitter_ns: 0,
            loss: LossModel::None,
            queue: None,
        }
    }
}

impl LinkConfig {
    /// A drop-tail link of `rate_bps` and one-way `delay` with the default queue.
    pub fn rate_delay(rate_bps: u64, delay: Duration) -> LinkConfig {
        LinkConfig {
            rate_bps,
            delay_ns: delay.as_nanos() as u64,
            ..LinkConfig::default()
        }
    }
}

/// The default byte limit: 2 × rate × RTT with RTT taken as twice the one-way delay
/// (DESIGN.md: "Default queue: drop-tail, 2 x bandwidth-delay product"), and never less than
/// 8 full-size frames so that a zero-delay link still absorbs a burst.
pub fn default_limit_bytes(rate_bps: u64, delay_ns: u64) -> u64 {
    let bdp = (rate_bps as u128 * 2 * delay_ns as u128 / 8 / 1_000_000_000) as u64;
    (2 * bdp).max(8 * 1514)
}

/// The queue in force: the named one, or drop-tail of [`default_limit_bytes`].
pub fn effective_queue(spec: Option<&QdiscConfig>, rate_bps: u64, delay_ns: u64) -> QdiscConfig {
    spec.cloned().unwrap_or(QdiscConfig::Droptail {
        limit_packets: None,
        limit_bytes: Some(default_limit_bytes(rate_bps, delay_ns)),
        limit_ms: None,
    })
}

/// Builds the discipline for a link of `rate_bps` and `delay_ns`; random early drops draw from
/// `seed`. (`limit_ms` is converted at the link rate; an unlimited link counts as 10 Gbit/s.)
pub fn build_queue<P: Send + 'static>(
    spec: Option<&QdiscConfig>,
    rate_bps: u64,
    delay_ns: u64,
    seed: u64,
) -> Result<Box<dyn QueueDiscipline<P>>, Error> {
    let rate = if rate_bps == 0 {
        10_000_000_000
    } else {
        rate_bps
    };
    build_seeded(&effective_queue(spec, rate_bps, delay_ns), rate, seed)
}

/// What one direction did.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct LinkCounters {
    /// Packets offered to the queue.
    pub arrived: u64,
    /// Packets released at the far end.
    pub delivered: u64,
    /// Dropped by the queue because it was full.
    pub drop_overflow: u64,
    /// Dropped early by an AQM.
    pub drop_early: u64,
    /// Dropped by the loss model (or the caller's wire-drop rule).
    pub drop_loss: u64,
    /// Dropped because the delay line was full ([`MAX_IN_FLIGHT`]).
    pub drop_in_flight: u64,
    /// Packets waiting in the queue.
    pub queue_packets: u64,
    /// Bytes waiting in the queue.
    pub queue_bytes: u64,
    /// Highest queue length seen, packets.
    pub queue_max_packets: u64,
    /// Packets serialised and waiting in the delay line.
    pub in_flight: u64,
    /// Queueing delay of every packet that left the queue (arrival to the start of its
    /// serialisation), as a histogram: whole milliseconds (capped at [`SOJOURN_MAX_MS`]) to
    /// packets. Cumulative, so the difference of two snapshots is the histogram in between.
    pub sojourn_ms: BTreeMap<u32, u64>,
}

/// Queueing delays above this many milliseconds share the last histogram bucket.
pub const SOJOURN_MAX_MS: u64 = 5_000;

/// One direction of a link carrying items of type `P`.
pub struct Link<P> {
    cfg: LinkConfig,
    qdisc: Box<dyn QueueDiscipline<P>>,
    link_free_at: Time,
    line: VecDeque<(Time, P)>,
    last_release: Time,
    loss: LossState,
    rng: Rng,
    counters: LinkCounters,
    seed: u64,
}

impl<P: Send + 'static> Link<P> {
    /// A link with the given parameters and random seed.
    pub fn new(cfg: LinkConfig, seed: u64) -> Result<Link<P>, Error> {
        cfg.loss.validate().map_err(|reason| Error::Invalid {
            field: "loss",
            reason,
        })?;
        let qdisc = build_queue(
            cfg.queue.as_ref(),
            cfg.rate_bps,
            cfg.delay_ns,
            seed ^ 0x5EED,
        )?;
        Ok(Link {
            cfg,
            qdisc,
            link_free_at: Time::ZERO,
            line: VecDeque::new(),
            last_release: Time::ZERO,
            loss: LossState::default(),
            rng: Rng::new(seed),
            counters: LinkCounters::default(),
            seed,
        })
    }

    /// The parameters in force.
    pub fn config(&self) -> &LinkConfig {
        &self.cfg
    }

    /// Applies new parameters at `now`. When the queue, rate or delay change, a new discipline
    /// takes over the waiting packets in order (those it refuses count as overflow drops); a
    /// configuration that does not build changes nothing.
    pub fn reconfigure(&mut self, now: Time, cfg: LinkConfig) -> Result<(), Error> {
        cfg.loss.validate().map_err(|reason| Error::Invalid {
            field: "loss",
            reason,
        })?;
        let rebuild = cfg.queue != self.cfg.queue
            || cfg.rate_bps != self.cfg.rate_bps
            || cfg.delay_ns != self.cfg.delay_ns;
        if rebuild {
            let mut q = build_queue(
                cfg.queue.as_ref(),
                cfg.rate_bps,
                cfg.delay_ns,
                self.seed ^ 0x5EED,
            )?;
            while let Some(p) = self.qdisc.dequeue(now) {
                for (_, why) in q.enqueue(now, p) {
                    self.count_drop(why);
                }
            }
            for (_, why) in self.qdisc.take_dropped() {
                self.count_drop(why);
            }
            self.qdisc = q;
        }
        self.cfg = cfg;
        Ok(())
    }

    fn count_drop(&mut self, why: DropReason) {
        match why {
            DropReason::Overflow => self.counters.drop_overflow += 1,
            DropReason::Early => self.counters.drop_early += 1,
        }
    }

    /// Serialisation time of a packet of `size` bytes.
    fn ser(&self, size: u32) -> Duration {
        if self.cfg.rate_bps == 0 {
            return Duration::ZERO;
        }
        let ns = (size as u128 * 8 * 1_000_000_000 + self.cfg.rate_bps as u128 / 2)
            / self.cfg.rate_bps as u128;
        Duration::from_nanos(ns as u64)
    }

    /// A packet of `size` bytes (what serialisation and byte limits count) in `flow` (what
    /// fair queuing keys on) arrived at `now`.
    pub fn arrive(&mut self, now: Time, item: P, size: u32, flow: u64) {
        self.counters.arrived += 1;
        let dropped = self
            .qdisc
            .enqueue(now, Queued::new(item, size.max(1), flow));
        for (_, why) in dropped {
            self.count_drop(why);
        }
        let ql = self.qdisc.len_packets() as u64;
        self.counters.queue_max_packets = self.counters.queue_max_packets.max(ql);
        self.service(now);
    }

    /// Moves packets from the queue through the serialiser while the link is free at `now`.
    pub fn service(&mut self, now: Time) {
        self.service_with(now, |_| false);
    }

    /// [`Link::service`], with an extra rule that drops a serialised packet on the wire when
    /// `wire_drop` says so (counted as loss), for tests that need a deterministic pattern.
    pub fn service_with(&mut self, now: Time, mut wire_drop: impl FnMut(&P) -> bool) {
        while self.link_free_at <= now {
            let next = self.qdisc.dequeue(self.link_free_at);
            // CoDel drops at dequeue: count them like the drops at enqueue.
            for (_, why) in self.qdisc.take_dropped() {
                self.count_drop(why);
            }
            let Some(pkt) = next else {
                break;
            };
            // Busy link: start exactly when the previous one ended; idle link: when it arrived.
            let start = self.link_free_at.max(pkt.enqueued_at);
            let wait_ms = start.saturating_since(pkt.enqueued_at).as_millis() as u64;
            *self
                .counters
                .sojourn_ms
                .entry(wait_ms.min(SOJOURN_MAX_MS) as u32)
                .or_default() += 1;
            let end = start + self.ser(pkt.size);
            self.link_free_at = end;
            if self.loss.lose(&self.cfg.loss, &mut self.rng) || wire_drop(&pkt.item) {
                self.counters.drop_loss += 1;
                continue;
            }
            if self.line.len() >= MAX_IN_FLIGHT {
                self.counters.drop_in_flight += 1;
                continue;
            }
            let mut release = end + Duration::from_nanos(self.cfg.delay_ns);
            if self.cfg.jitter_ns > 0 {
                let j = self.cfg.jitter_ns as f64 * (2.0 * self.rng.f64() - 1.0);
                let r = release.as_nanos() as f64 + j;
                release = Time(r.max(end.as_nanos() as f64) as u64);
            }
            release = release.max(self.last_release);
            self.last_release = release;
            self.line.push_back((release, pkt.item));
        }
    }

    /// The next packet due at `now`, with its scheduled release time.
    pub fn poll_release(&mut self, now: Time) -> Option<(Time, P)> {
        if self.line.front()?.0 > now {
            return None;
        }
        let out = self.line.pop_front()?;
        self.counters.delivered += 1;
        Some(out)
    }

    /// When the caller must call [`Link::service`] / [`Link::poll_release`] next
    /// ([`Time::NEVER`] when idle).
    pub fn next_wakeup(&self) -> Time {
        let line = self.line.front().map_or(Time::NEVER, |(t, _)| *t);
        let ser = if self.qdisc.len_packets() > 0 {
            self.link_free_at
        } else {
            Time::NEVER
        };
        line.min(ser)
    }

    /// Counters, with queue occupancy filled in.
    pub fn counters(&self) -> LinkCounters {
        let mut c = self.counters.clone();
        c.queue_packets = self.qdisc.len_packets() as u64;
        c.queue_bytes = self.qdisc.len_bytes();
        c.in_flight = self.line.len() as u64;
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn link(rate: u64, delay_ms: u64) -> Link<u32> {
        Link::new(
            LinkConfig::rate_delay(rate, Duration::from_millis(delay_ms)),
            1,
        )
        .unwrap()
    }

    /// Runs the link until empty, returning release times in ns.
    fn drain(l: &mut Link<u32>) -> Vec<u64> {
        let mut out = Vec::new();
        loop {
            let t = l.next_wakeup();
            if t == Time::NEVER {
                return out;
            }
            l.service(t);
            while let Some((at, _)) = l.poll_release(t) {
                out.push(at.as_nanos());
            }
        }
    }

    #[test]
    fn back_to_back_packets_are_serialised_at_the_rate() {
        // 1 Mbit/s, 10 ms: a 1000-byte packet takes 8 ms.
        let mut l = link(1_000_000, 10);
        for i in 0..3 {
            l.arrive(Time::from_millis(100), i, 1000, 0);
        }
        assert_eq!(drain(&mut l), vec![118_000_000, 126_000_000, 134_000_000]);
        let c = l.counters();
        assert_eq!((c.arrived, c.delivered, c.queue_packets), (3, 3, 0));
    }

    #[test]
    fn late_service_does_not_drift() {
        let mut l = link(1_000_000, 0);
        for i in 0..10 {
            l.arrive(Time::ZERO, i, 125, 0); // 1 ms each
        }
        let mut out = Vec::new();
        while l.next_wakeup() != Time::NEVER {
            let t = l.next_wakeup() + Duration::from_micros(300);
            l.service(t);
            while let Some((at, _)) = l.poll_release(t) {
                out.push(at.as_nanos() / 1000);
            }
        }
        assert_eq!(out, (1..=10).map(|i| i * 1000).collect::<Vec<_>>());
    }

    #[test]
    fn overflow_drops_the_tail_and_reconfigure_keeps_the_queue() {
        let mut cfg = LinkConfig::rate_delay(1_000_000, Duration::ZERO);
        cfg.queue = Some(QdiscConfig::Droptail {
            limit_packets: Some(5),
            limit_bytes: None,
            limit_ms: None,
        });
        let mut l: Link<u32> = Link::new(cfg.clone(), 1).unwrap();
        for i in 0..20 {
            l.arrive(Time::ZERO, i, 500, 0);
        }
        let c = l.counters();
        assert_eq!((c.queue_packets, c.drop_overflow), (5, 14));
        // Halving the rate keeps the five waiting packets, in order.
        cfg.rate_bps = 500_000;
        l.reconfigure(Time::ZERO, cfg).unwrap();
        let mut got = Vec::new();
        while l.next_wakeup() != Time::NEVER {
            let t = l.next_wakeup();
            l.service(t);
            while let Some((_, i)) = l.poll_release(t) {
                got.push(i);
            }
        }
        assert_eq!(got, vec![0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn jitter_never_reorders() {
        let mut cfg = LinkConfig::rate_delay(0, Duration::from_millis(20));
        cfg.jitter_ns = 5_000_000;
        let mut l: Link<u32> = Link::new(cfg, 9).unwrap();
        for i in 0..2000u32 {
            l.arrive(Time::from_micros(i as u64 * 100), i, 100, 0);
        }
        let r = drain(&mut l);
        assert_eq!(r.len(), 2000);
        assert!(r.windows(2).all(|w| w[0] <= w[1]));
        for (i, t) in r.iter().enumerate() {
            let delay = t - i as u64 * 100_000;
            assert!((15_000_000..=25_100_000).contains(&delay), "{delay}");
        }
    }

    #[test]
    fn loss_and_wire_drops_are_counted_and_bad_loss_refused() {
        let mut cfg = LinkConfig::rate_delay(0, Duration::from_millis(1));
        cfg.loss = LossModel::Bernoulli { p: 0.1 };
        let mut l: Link<u32> = Link::new(cfg.clone(), 42).unwrap();
        for i in 0..50_000u32 {
            l.arrive(Time::from_micros(i as u64), i, 100, 0);
        }
        let lost = l.counters().drop_loss as f64 / 50_000.0;
        assert!((lost - 0.1).abs() < 0.006, "{lost}");
        // Every odd packet dropped by the caller's rule.
        let mut l: Link<u32> = Link::new(LinkConfig::default(), 1).unwrap();
        for i in 0..10u32 {
            l.qdisc.enqueue(Time::ZERO, Queued::new(i, 100, 0));
        }
        l.service_with(Time::ZERO, |i| i % 2 == 1);
        assert_eq!(l.counters().drop_loss, 5);
        cfg.loss = LossModel::Bernoulli { p: 2.0 };
        assert!(Link::<u32>::new(cfg, 1).is_err());
    }
}
