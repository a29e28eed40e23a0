//! Per-flow fair queuing by deficit round robin (Shreedhar & Varghese), the "Fair Scheduler"
//! PLM assumes (`plm.md` §1.1): every flow has its own FIFO; the scheduler visits the active
//! flows in turn.
//!
//! Quantum: by default one packet per visit (packet round robin), which with equal packet
//! sizes is exactly the fair scheduler of the PLM paper and spaces a packet pair by one packet
//! of every other active flow — the property PLM's estimator relies on. With
//! `quantum_bytes = Some(q)` it is classic byte-fair DRR; keep `q` at or below the smallest
//! packet size so that no flow sends two packets in one visit (which would let a pair through
//! back to back).
//!
//! Buffer: `per_flow_packets` per flow (PLM's 20-packet queue per flow) and optionally a shared
//! byte limit; when the shared buffer is full the tail packet of the longest flow (in bytes) is
//! pushed out (longest-queue drop), so a greedy flow cannot lock the others out.

use crate::{DropReason, QueueDiscipline, Queued};
use proto::Time;
use std::collections::{HashMap, VecDeque};

#[derive(Debug)]
struct Flow<P> {
    q: VecDeque<Queued<P>>,
    deficit: u64,
    active: bool,
}

/// A DRR fair queue.
#[derive(Debug)]
pub struct FairQueue<P> {
    flows: HashMap<u64, Flow<P>>,
    order: VecDeque<u64>,
    per_flow_packets: usize,
    total_bytes_limit: Option<u64>,
    quantum: Option<u64>,
    packets: usize,
    bytes: u64,
}

impl<P> FairQueue<P> {
    /// A fair queue with `per_flow_packets` per flow, an optional shared byte limit and an
    /// optional byte quantum (None = one packet per visit).
    pub fn new(
        per_flow_packets: usize,
        total_bytes_limit: Option<u64>,
        quantum: Option<u32>,
    ) -> Self {
        FairQueue {
            flows: HashMap::new(),
            order: VecDeque::new(),
            per_flow_packets,
            total_bytes_limit,
            quantum: quantum.map(|q| u64::from(q.max(1))),
            packets: 0,
            bytes: 0,
        }
    }

    /// Packets queued for `flow`.
    pub fn flow_len(&self, flow: u64) -> usize {
        self.flows.get(&flow).map_or(0, |f| f.q.len())
    }

    fn longest_flow(&self) -> Option<u64> {
        // Ties broken by flow id so the choice is deterministic.
        self.flows
            .iter()
            .filter(|(_, f)| !f.q.is_empty())
            .max_by_key(|(id, f)| (f.q.iter().map(|p| u64::from(p.size)).sum::<u64>(), **id))
            .map(|(id, _)| *id)
    }
}

impl<P: Send> QueueDiscipline<P> for FairQueue<P> {
    fn enqueue(&mut self, now: Time, mut pkt: Queued<P>) -> Vec<(Queued<P>, DropReason)> {
        let flow_len = self.flow_len(pkt.flow);
        if flow_len >= self.per_flow_packets {
            return vec![(pkt, DropReason::Overflow)];
        }
        let mut dropped = Vec::new();
        if let Some(limit) = self.total_bytes_limit {
            while self.bytes + u64::from(pkt.size) > limit {
                match self.longest_flow() {
                    Some(id) if id != pkt.flow || flow_len > 0 => {
                        let f = self.flows.get_mut(&id).expect("longest flow exists");
                        let victim = f.q.pop_back().expect("non-empty");
                        self.bytes -= u64::from(victim.size);
                        self.packets -= 1;
                        dropped.push((victim, DropReason::Overflow));
                    }
                    _ => {
                        dropped.push((pkt, DropReason::Overflow));
                        return dropped;
                    }
                }
            }
        }
        pkt.enqueued_at = now;
        self.bytes += u64::from(pkt.size);
        self.packets += 1;
        let id = pkt.flow;
        let f = self.flows.entry(id).or_insert_with(|| Flow {
            q: VecDeque::new(),
            deficit: 0,
            active: false,
        });
        f.q.push_back(pkt);
        if !f.active {
            f.active = true;
            f.deficit = 0;
            self.order.push_back(id);
        }
        dropped
    }

    fn dequeue(&mut self, _now: Time) -> Option<Queued<P>> {
        loop {
            let id = *self.order.front()?;
            let f = self.flows.get_mut(&id).expect("active flow exists");
            let Some(head) = f.q.front() else {
                // Emptied by push-out while waiting for its turn.
                f.active = false;
                self.order.pop_front();
                continue;
            };
            let send = match self.quantum {
                None => true,
                Some(q) => {
                    f.deficit += q;
                    f.deficit >= u64::from(head.size)
                }
            };
            self.order.pop_front();
            if !send {
                self.order.push_back(id);
                continue;
            }
            let p = f.q.pop_front().expect("head exists");
            if self.quantum.is_some() {
                f.deficit -= u64::from(p.size);
            }
            if f.q.is_empty() {
                f.active = false;
                f.deficit = 0;
            } else {
                self.order.push_back(id);
            }
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pkt;

    #[test]
    fn round_robin_interleaves_flows_one_packet_at_a_time() {
        let mut q = FairQueue::new(20, None, None);
        // Flow 1 (a layered session) queues a pair; flows 2 and 3 are greedy.
        for i in 0..5 {
            q.enqueue(Time::ZERO, pkt(200 + i, 500, 2));
            q.enqueue(Time::ZERO, pkt(300 + i, 500, 3));
        }
        q.enqueue(Time::ZERO, pkt(100, 500, 1));
        q.enqueue(Time::ZERO, pkt(101, 500, 1));
        let out: Vec<u32> = std::iter::from_fn(|| q.dequeue(Time::ZERO).map(|p| p.item)).collect();
        assert_eq!(
            out,
            vec![200, 300, 100, 201, 301, 101, 202, 302, 203, 303, 204, 304]
        );
        // The pair left 3 packets apart: k + 1 = 3 flows share the link, so a packet-pair
        // receiver measures exactly R / 3 (plm.md 9.A S0).
        let a = out.iter().position(|&x| x == 100).unwrap();
        let b = out.iter().position(|&x| x == 101).unwrap();
        assert_eq!(b - a, 3);
    }

    #[test]
    fn per_flow_limit_isolates_flows() {
        let mut q = FairQueue::new(3, None, None);
        let mut drops = 0;
        for i in 0..10 {
            drops += q.enqueue(Time::ZERO, pkt(i, 500, 7)).len();
        }
        assert_eq!(drops, 7);
        assert!(q.enqueue(Time::ZERO, pkt(99, 500, 8)).is_empty());
        assert_eq!(q.flow_len(7), 3);
        assert_eq!(q.flow_len(8), 1);
    }

    #[test]
    fn shared_buffer_pushes_out_the_longest_flow() {
        let mut q = FairQueue::new(100, Some(2000), None);
        for i in 0..4 {
            assert!(q.enqueue(Time::ZERO, pkt(i, 500, 1)).is_empty());
        }
        let d = q.enqueue(Time::ZERO, pkt(50, 500, 2));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0.flow, 1);
        assert_eq!(d[0].0.item, 3, "the tail of the longest flow goes");
        assert_eq!(q.flow_len(2), 1);
        assert_eq!(q.len_bytes(), 2000);
    }

    #[test]
    fn byte_quantum_shares_bytes_not_packets() {
        // Flow 1 sends 1000-B packets, flow 2 sends 500-B packets, quantum 500 B: over a long
        // backlog both get the same number of bytes.
        let mut q = FairQueue::new(10_000, None, Some(500));
        for i in 0..1000 {
            q.enqueue(Time::ZERO, pkt(i, 1000, 1));
            q.enqueue(Time::ZERO, pkt(i, 500, 2));
            q.enqueue(Time::ZERO, pkt(i, 500, 2));
        }
        let mut bytes = [0u64; 3];
        for _ in 0..1200 {
            let p = q.dequeue(Time::ZERO).unwrap();
            bytes[p.flow as usize] += u64::from(p.size);
        }
        let ratio = bytes[1] as f64 / bytes[2] as f64;
        assert!((ratio - 1.0).abs() < 0.01, "ratio {ratio}");
    }
}
