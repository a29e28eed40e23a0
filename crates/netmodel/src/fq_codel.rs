//! FQ-CoDel (RFC 8290), the default queue of Linux and OpenWrt home routers, which the
//! testbed's kernel lacks (DESIGN.md "Emulated network rules"): so the link emulator and the
//! simulator both run this one.
//!
//! - **Flows.** Packets are hashed into `flows` buckets (1024) by their flow id with a
//!   per-queue perturbation, so, as on a router, two flows may share a bucket. The caller
//!   chooses what a flow is (the link emulator: the 5-tuple, with a layered session's groups
//!   as one flow by default; the simulator: the scenario flow).
//! - **Scheduler.** Deficit round robin with a byte `quantum` (1514) over two lists: a flow that
//!   becomes active joins `new_flows` with one quantum of credit and is served before the
//!   `old_flows`, so sparse flows (a pair of a layered session, an ACK) go first; a flow that
//!   spends its credit moves to the tail of `old_flows`; an empty new flow is moved to
//!   `old_flows` once before it is forgotten, so a flow cannot stay "new" by emptying itself
//!   (RFC 8290 §4.2).
//! - **AQM.** Each flow queue runs CoDel ([`crate::codel`]; target 5 ms, interval 100 ms).
//! - **Overflow.** Above `limit_packets` (10240) or `memory_limit_bytes` (32 MiB) packets are
//!   dropped from the head of the flow with the largest backlog, Linux's batch drop: up to
//!   `drop_batch` (64) packets or half of that flow's bytes, whichever comes first.
//!
//! Not modelled: ECN marking (the testbed's flows do not negotiate ECN).

use crate::codel::{Codel, CodelParams};
use crate::{DropReason, QueueDiscipline, Queued};
use proto::Time;
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// FQ-CoDel's parameters (Linux `tc-fq_codel` names and defaults).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FqCodelParams {
    /// CoDel target, ms (`target`).
    #[serde(default = "d_target")]
    pub target_ms: f64,
    /// CoDel interval, ms (`interval`).
    #[serde(default = "d_interval")]
    pub interval_ms: f64,
    /// DRR quantum, bytes (`quantum`).
    #[serde(default = "d_quantum")]
    pub quantum_bytes: u32,
    /// Hash buckets (`flows`); 1 gives a single CoDel queue.
    #[serde(default = "d_flows")]
    pub flows: u32,
    /// Packets held in all (`limit`).
    #[serde(default = "d_limit")]
    pub limit_packets: usize,
    /// Bytes held in all (`memory_limit`).
    #[serde(default = "d_memory")]
    pub memory_limit_bytes: u64,
    /// Most packets one overflow drops from the fattest flow (`drop_batch`).
    #[serde(default = "d_batch")]
    pub drop_batch: usize,
    /// CoDel never drops from a queue left with at most this many bytes (the device MTU).
    #[serde(default = "d_quantum")]
    pub mtu_bytes: u32,
}

fn d_target() -> f64 {
    5.0
}
fn d_interval() -> f64 {
    100.0
}
fn d_quantum() -> u32 {
    1514
}
fn d_flows() -> u32 {
    1024
}
fn d_limit() -> usize {
    10240
}
fn d_memory() -> u64 {
    32 << 20
}
fn d_batch() -> usize {
    64
}

impl Default for FqCodelParams {
    fn default() -> Self {
        FqCodelParams {
            target_ms: d_target(),
            interval_ms: d_interval(),
            quantum_bytes: d_quantum(),
            flows: d_flows(),
            limit_packets: d_limit(),
            memory_limit_bytes: d_memory(),
            drop_batch: d_batch(),
            mtu_bytes: d_quantum(),
        }
    }
}

impl FqCodelParams {
    /// Checks ranges; the reason names the field.
    pub fn check(&self) -> Result<(), (&'static str, &'static str)> {
        let pos = |x: f64| x.is_finite() && x > 0.0;
        if !pos(self.target_ms) || !pos(self.interval_ms) || self.target_ms > self.interval_ms {
            return Err(("target_ms", "need 0 < target_ms <= interval_ms"));
        }
        if self.quantum_bytes == 0 || self.flows == 0 || self.flows > 65_536 {
            return Err(("flows", "quantum_bytes > 0 and 1 <= flows <= 65536"));
        }
        if self.limit_packets == 0 || self.memory_limit_bytes == 0 || self.drop_batch == 0 {
            return Err(("limit_packets", "limits and drop_batch must be positive"));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum List {
    New,
    Old,
}

#[derive(Debug)]
struct Bucket<P> {
    q: VecDeque<Queued<P>>,
    bytes: u64,
    deficit: i64,
    list: Option<List>,
    codel: Codel,
}

/// An FQ-CoDel queue.
#[derive(Debug)]
pub struct FqCodel<P> {
    params: FqCodelParams,
    codel: CodelParams,
    perturbation: u64,
    buckets: Vec<Bucket<P>>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    packets: usize,
    bytes: u64,
    dropped: Vec<(Queued<P>, DropReason)>,
    /// Packets CoDel dropped and packets the overflow rule dropped, since creation.
    pub codel_drops: u64,
    pub overflow_drops: u64,
}

/// Spreads a flow id over the buckets (splitmix64 finaliser).
fn mix(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl<P> FqCodel<P> {
    /// A queue with `params`; `perturbation` seeds the flow hash (as Linux picks one at
    /// random per qdisc), so which flows share a bucket depends on it.
    pub fn new(params: FqCodelParams, perturbation: u64) -> Self {
        let n = params.flows.max(1) as usize;
        let codel = CodelParams {
            target_ns: (params.target_ms * 1e6) as u64,
            interval_ns: (params.interval_ms * 1e6) as u64,
            mtu_bytes: u64::from(params.mtu_bytes),
        };
        FqCodel {
            params,
            codel,
            perturbation,
            buckets: (0..n)
                .map(|_| Bucket {
                    q: VecDeque::new(),
                    bytes: 0,
                    deficit: 0,
                    list: None,
                    codel: Codel::default(),
                })
                .collect(),
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            packets: 0,
            bytes: 0,
            dropped: Vec::new(),
            codel_drops: 0,
            overflow_drops: 0,
        }
    }

    /// The bucket `flow` hashes to.
    pub fn bucket_of(&self, flow: u64) -> usize {
        (mix(flow ^ self.perturbation) % self.buckets.len() as u64) as usize
    }

    /// Packets queued in `flow`'s bucket.
    pub fn flow_len(&self, flow: u64) -> usize {
        self.buckets[self.bucket_of(flow)].q.len()
    }

    /// Bytes queued in `flow`'s bucket.
    pub fn flow_bytes(&self, flow: u64) -> u64 {
        self.buckets[self.bucket_of(flow)].bytes
    }

    /// Drops from the head of the bucket with the largest backlog: up to `drop_batch` packets
    /// or half of its bytes (Linux `fq_codel_drop`). Returns that bucket.
    fn drop_from_fattest(&mut self) -> Option<usize> {
        let (idx, fat) = self
            .buckets
            .iter()
            .enumerate()
            .filter(|(_, b)| !b.q.is_empty())
            .max_by_key(|(i, b)| (b.bytes, std::cmp::Reverse(*i)))
            .map(|(i, b)| (i, b.bytes))?;
        let goal = fat / 2;
        let b = &mut self.buckets[idx];
        let mut freed = 0;
        let mut n = 0;
        while n < self.params.drop_batch && freed < goal.max(1) {
            let Some(p) = b.q.pop_front() else { break };
            let sz = u64::from(p.size);
            b.bytes -= sz;
            freed += sz;
            n += 1;
            self.dropped.push((p, DropReason::Overflow));
        }
        self.packets -= n;
        self.bytes -= freed;
        self.overflow_drops += n as u64;
        Some(idx)
    }
}

impl<P: Send> QueueDiscipline<P> for FqCodel<P> {
    fn enqueue(&mut self, now: Time, mut pkt: Queued<P>) -> Vec<(Queued<P>, DropReason)> {
        let idx = self.bucket_of(pkt.flow);
        pkt.enqueued_at = now;
        let sz = u64::from(pkt.size);
        let b = &mut self.buckets[idx];
        b.bytes += sz;
        b.q.push_back(pkt);
        if b.list.is_none() {
            b.list = Some(List::New);
            b.deficit = i64::from(self.params.quantum_bytes);
            self.new_flows.push_back(idx as u32);
        }
        self.packets += 1;
        self.bytes += sz;
        while self.packets > self.params.limit_packets
            || self.bytes > self.params.memory_limit_bytes
        {
            if self.drop_from_fattest().is_none() {
                break;
            }
        }
        std::mem::take(&mut self.dropped)
    }

    fn dequeue(&mut self, now: Time) -> Option<Queued<P>> {
        loop {
            let (idx, from_new) = match self.new_flows.front() {
                Some(&i) => (i as usize, true),
                None => (*self.old_flows.front()? as usize, false),
            };
            let quantum = i64::from(self.params.quantum_bytes);
            let b = &mut self.buckets[idx];
            if b.deficit <= 0 {
                b.deficit += quantum;
                b.list = Some(List::Old);
                if from_new {
                    self.new_flows.pop_front();
                } else {
                    self.old_flows.pop_front();
                }
                self.old_flows.push_back(idx as u32);
                continue;
            }
            let Bucket {
                q, bytes, codel, ..
            } = b;
            let out = codel.dequeue(now, &self.codel, || {
                let p = q.pop_front()?;
                *bytes -= u64::from(p.size);
                let at = p.enqueued_at;
                Some((p, at, *bytes))
            });
            for d in out.dropped {
                self.packets -= 1;
                self.bytes -= u64::from(d.size);
                self.codel_drops += 1;
                self.dropped.push((d, DropReason::Early));
            }
            let Some(p) = out.packet else {
                // Empty: a new flow gets one more turn at the tail of the old list (when
                // there is one) before it is forgotten.
                if from_new {
                    self.new_flows.pop_front();
                } else {
                    self.old_flows.pop_front();
                }
                if from_new && !self.old_flows.is_empty() {
                    b.list = Some(List::Old);
                    self.old_flows.push_back(idx as u32);
                } else {
                    b.list = None;
                }
                continue;
            };
            b.deficit -= i64::from(p.size);
            self.packets -= 1;
            self.bytes -= u64::from(p.size);
            return Some(p);
        }
    }

    fn len_packets(&self) -> usize {
        self.packets
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }

    fn take_dropped(&mut self) -> Vec<(Queued<P>, DropReason)> {
        std::mem::take(&mut self.dropped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pkt;

    fn q(params: FqCodelParams) -> FqCodel<u32> {
        FqCodel::new(params, 0)
    }

    /// Serialises at `rate_bps` from `t0` while anything is queued; returns (item, flow, time)
    /// and accumulates every dequeue-time drop.
    fn drain(
        q: &mut FqCodel<u32>,
        t0: Time,
        rate_bps: u64,
        drops: &mut Vec<u64>,
    ) -> Vec<(u32, u64, Time)> {
        let mut t = t0;
        let mut out = Vec::new();
        while let Some(p) = q.dequeue(t) {
            drops.extend(q.take_dropped().into_iter().map(|d| d.0.flow));
            t += std::time::Duration::from_nanos(u64::from(p.size) * 8 * 1_000_000_000 / rate_bps);
            out.push((p.item, p.flow, t));
        }
        drops.extend(q.take_dropped().into_iter().map(|d| d.0.flow));
        out
    }

    #[test]
    fn a_sparse_flow_goes_before_a_backlogged_one() {
        let mut f = q(FqCodelParams::default());
        // A bulk flow with 20 packets queued: as a new flow it may send its first quantum
        // (1514 B: two 1500-B packets, the credit going negative on the second), then it is an
        // old flow.
        for i in 0..20 {
            f.enqueue(Time::ZERO, pkt(i, 1500, 1));
        }
        for i in 0..3 {
            assert_eq!(f.dequeue(Time::ZERO).unwrap().item, i);
        }
        // A new flow's single packet (an ACK, the first packet of a pair) goes next.
        f.enqueue(Time::ZERO, pkt(100, 64, 2));
        let next = f.dequeue(Time::ZERO).unwrap();
        assert_eq!(next.flow, 2);
        // And the bulk flow carries on.
        assert_eq!(f.dequeue(Time::ZERO).unwrap().item, 3);
    }

    #[test]
    fn drr_shares_bytes_equally_between_backlogged_flows() {
        // 1514-B quantum; flow 1 sends 1500-B packets, flow 2 300-B packets: byte-fair.
        let mut f = q(FqCodelParams::default());
        for i in 0..2000 {
            f.enqueue(Time::ZERO, pkt(i, 1500, 1));
            for _ in 0..5 {
                f.enqueue(Time::ZERO, pkt(i, 300, 2));
            }
        }
        let mut bytes = [0u64; 3];
        // Dequeue at time 0 so CoDel sees no sojourn and drops nothing.
        for _ in 0..3000 {
            let p = f.dequeue(Time::ZERO).unwrap();
            bytes[p.flow as usize] += u64::from(p.size);
        }
        let r = bytes[1] as f64 / bytes[2] as f64;
        assert!((r - 1.0).abs() < 0.02, "byte ratio {r}");
    }

    #[test]
    fn codel_bounds_the_queue_of_an_unresponsive_overload() {
        // A flow offering 12 Mbit/s into a 10 Mbit/s link for 30 s (1500-B packets every
        // 1 ms, 1.2 ms on the wire). Drop-tail would grow the queue by 1/6 s a second (5 s
        // by the end). CoDel's drop rate rises with sqrt(count) until it takes the excess
        // (one packet in six), and then cycles: the sojourn stays bounded, far above the 5-ms
        // target, because CoDel is built for flows that respond to drops (RFC 8289 §4.4).
        let mut f = q(FqCodelParams::default());
        let ser = std::time::Duration::from_micros(1200);
        let gap = std::time::Duration::from_micros(1000);
        let mut t_link = Time::ZERO;
        let mut sojourn_ms = Vec::new();
        let mut drops = 0u64;
        let mut next_arrival = Time::ZERO;
        let mut i = 0;
        while next_arrival < Time::from_millis(30_000) {
            f.enqueue(next_arrival, pkt(i, 1500, 7));
            i += 1;
            next_arrival += gap;
            t_link = t_link.max(next_arrival - gap);
            while t_link <= next_arrival {
                let Some(p) = f.dequeue(t_link) else { break };
                drops += f.take_dropped().len() as u64;
                sojourn_ms.push((t_link.0 - p.enqueued_at.0) as f64 / 1e6);
                t_link += ser;
            }
        }
        let share = drops as f64 / i as f64;
        assert!((0.15..0.18).contains(&share), "dropped {share}");
        assert_eq!(drops, f.codel_drops);
        let late = &sojourn_ms[sojourn_ms.len() / 6..];
        let mean = late.iter().sum::<f64>() / late.len() as f64;
        let max = late.iter().cloned().fold(0.0, f64::max);
        assert!(
            mean < 120.0 && max < 300.0,
            "sojourn after 5 s: mean {mean} ms, max {max} ms"
        );
    }

    #[test]
    fn codel_is_per_flow_a_light_flow_is_not_dropped() {
        // Flow 1 overloads the link; flow 2 sends one small packet every 50 ms. Only flow 1
        // loses packets, and flow 2's packets wait at most what the bulk flow may send in one
        // turn (its credit can be one byte short of a quantum, so two 1500-B packets: 24 ms),
        // against seconds behind a drop-tail queue.
        let mut f = q(FqCodelParams::default());
        let mut drops = Vec::new();
        let mut t = Time::ZERO;
        let mut light_wait = Vec::new();
        for ms in 0..5000u64 {
            let now = Time::from_millis(ms);
            // An idle link starts serving when a packet arrives.
            t = t.max(now);
            f.enqueue(now, pkt(0, 1500, 1));
            if ms % 50 == 0 {
                f.enqueue(now, pkt(1, 200, 2));
            }
            // 1 Mbit/s: 12 ms per 1500-B packet, so the bulk flow offers 12x the link.
            while t <= now {
                let Some(p) = f.dequeue(t) else { break };
                drops.extend(f.take_dropped().into_iter().map(|d| d.0.flow));
                if p.flow == 2 {
                    light_wait.push(t.0 - p.enqueued_at.0);
                }
                t += std::time::Duration::from_micros(u64::from(p.size) * 8);
            }
        }
        assert!(drops.iter().all(|&fl| fl == 1));
        assert!(!drops.is_empty());
        assert_eq!(light_wait.len(), 100);
        assert!(
            light_wait.iter().all(|&w| w <= 24_100_000),
            "{:?}",
            light_wait.iter().max()
        );
    }

    #[test]
    fn overflow_drops_from_the_head_of_the_fattest_flow_in_a_batch() {
        let p = FqCodelParams {
            limit_packets: 100,
            ..FqCodelParams::default()
        };
        let mut f = q(p);
        for i in 0..90 {
            assert!(f.enqueue(Time::ZERO, pkt(i, 1000, 1)).is_empty());
        }
        for i in 0..10 {
            assert!(f.enqueue(Time::ZERO, pkt(500 + i, 1000, 2)).is_empty());
        }
        // The 101st packet (flow 2's) overflows: flow 1, the fattest, loses half its bytes
        // from the head (45 packets; fewer than the 64-packet batch).
        let d = f.enqueue(Time::ZERO, pkt(999, 1000, 2));
        assert_eq!(d.len(), 45);
        assert!(d
            .iter()
            .all(|(x, why)| x.flow == 1 && *why == DropReason::Overflow));
        assert_eq!(d[0].0.item, 0, "head drop");
        assert_eq!(f.flow_len(1), 45);
        assert_eq!(f.flow_len(2), 11);
        assert_eq!(f.len_packets(), 56);
        assert_eq!(f.overflow_drops, 45);
    }

    #[test]
    fn empty_new_flow_gets_one_turn_in_old_flows_then_is_forgotten() {
        let mut f = q(FqCodelParams::default());
        let mut drops = Vec::new();
        for i in 0..3 {
            f.enqueue(Time::ZERO, pkt(i, 1000, 1));
        }
        f.enqueue(Time::ZERO, pkt(10, 1000, 2));
        let out = drain(&mut f, Time::ZERO, 1_000_000, &mut drops);
        let flows: Vec<u64> = out.iter().map(|x| x.1).collect();
        // Flow 1 (new) sends 1000 B (credit 1514 - 1000 = 514 left), sends again (credit now
        // -486), moves to old; flow 2 (new) sends; flow 1 gets a quantum and sends its last.
        assert_eq!(flows, vec![1, 1, 2, 1]);
        assert_eq!(f.len_packets(), 0);
        assert!(f.new_flows.is_empty() && f.old_flows.is_empty());
        assert!(drops.is_empty());
    }

    #[test]
    fn hash_perturbation_decides_collisions_deterministically() {
        let a: FqCodel<u32> = FqCodel::new(FqCodelParams::default(), 1);
        let b: FqCodel<u32> = FqCodel::new(FqCodelParams::default(), 1);
        let c: FqCodel<u32> = FqCodel::new(FqCodelParams::default(), 2);
        let ba: Vec<usize> = (0..50).map(|f| a.bucket_of(f)).collect();
        let bb: Vec<usize> = (0..50).map(|f| b.bucket_of(f)).collect();
        let bc: Vec<usize> = (0..50).map(|f| c.bucket_of(f)).collect();
        assert_eq!(ba, bb);
        assert_ne!(ba, bc);
        assert!(ba.iter().all(|&x| x < 1024));
        // One bucket: every flow shares one CoDel queue.
        let one: FqCodel<u32> = FqCodel::new(
            FqCodelParams {
                flows: 1,
                ..FqCodelParams::default()
            },
            9,
        );
        assert!((0..50).all(|f| one.bucket_of(f) == 0));
    }
}
