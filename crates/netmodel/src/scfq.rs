//! Self-clocked fair queueing (Golestani 1994), a finish-tag fair queue: each packet gets the
//! tag `F = max(F_last(flow), V) + size`, where `V` is the tag of the packet last sent, and the
//! queue sends the smallest tag first (ties: arrival order). Byte-fair like DRR, but it
//! interleaves flows packet by packet by their virtual finish times instead of serving rounds,
//! so flows with larger packets are spread over the others' packets rather than bunched into
//! one round. Used to separate the PLM catalogue's DRR effects (`plm.md` S7, S8) from what a
//! packet-by-packet fair queue like the papers' ns-2 FQ does.
//!
//! Buffer: `per_flow_packets` per flow, tail drop. When the queue empties, `V` and every
//! flow's last tag restart from 0 (the end of a busy period).

use crate::{DropReason, QueueDiscipline, Queued};
use proto::Time;
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

struct Entry<P> {
    tag: u64,
    seq: u64,
    pkt: Queued<P>,
}

impl<P> PartialEq for Entry<P> {
    fn eq(&self, o: &Self) -> bool {
        (self.tag, self.seq) == (o.tag, o.seq)
    }
}
impl<P> Eq for Entry<P> {}
impl<P> PartialOrd for Entry<P> {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl<P> Ord for Entry<P> {
    /// Reversed: the heap's maximum is the smallest (tag, seq).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.tag, o.seq).cmp(&(self.tag, self.seq))
    }
}

/// A self-clocked fair queue.
pub struct Scfq<P> {
    heap: BinaryHeap<Entry<P>>,
    last: HashMap<u64, u64>,
    count: HashMap<u64, usize>,
    v: u64,
    seq: u64,
    per_flow_packets: usize,
    bytes: u64,
}

impl<P> Scfq<P> {
    /// A queue holding at most `per_flow_packets` per flow.
    pub fn new(per_flow_packets: usize) -> Self {
        Scfq {
            heap: BinaryHeap::new(),
            last: HashMap::new(),
            count: HashMap::new(),
            v: 0,
            seq: 0,
            per_flow_packets,
            bytes: 0,
        }
    }
}

impl<P: Send> QueueDiscipline<P> for Scfq<P> {
    fn enqueue(&mut self, now: Time, mut pkt: Queued<P>) -> Vec<(Queued<P>, DropReason)> {
        let n = self.count.entry(pkt.flow).or_insert(0);
        if *n >= self.per_flow_packets {
            return vec![(pkt, DropReason::Overflow)];
        }
        *n += 1;
        let last = self.last.entry(pkt.flow).or_insert(0);
        let tag = (*last).max(self.v) + u64::from(pkt.size);
        *last = tag;
        pkt.enqueued_at = now;
        self.bytes += u64::from(pkt.size);
        self.seq += 1;
        self.heap.push(Entry {
            tag,
            seq: self.seq,
            pkt,
        });
        Vec::new()
    }

    fn dequeue(&mut self, _now: Time) -> Option<Queued<P>> {
        let e = self.heap.pop()?;
        self.v = e.tag;
        if let Some(n) = self.count.get_mut(&e.pkt.flow) {
            *n -= 1;
        }
        self.bytes -= u64::from(e.pkt.size);
        if self.heap.is_empty() {
            self.v = 0;
            self.last.clear();
            self.count.clear();
        }
        Some(e.pkt)
    }

    fn len_packets(&self) -> usize {
        self.heap.len()
    }

    fn len_bytes(&self) -> u64 {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(size: u32, flow: u64) -> Queued<u32> {
        Queued::new(0, size, flow)
    }

    #[test]
    fn interleaves_by_finish_tag_and_shares_bytes() {
        // Flow 1: 1000-B packets, flow 2: 500-B packets, both backlogged: in every 2000 bytes
        // of virtual time flow 1 sends 2 and flow 2 sends 4 packets (bytes shared equally),
        // and no two 1000-B packets leave back to back while flow 2 has packets.
        let mut s = Scfq::new(100);
        for _ in 0..20 {
            s.enqueue(Time::ZERO, q(1000, 1));
        }
        for _ in 0..40 {
            s.enqueue(Time::ZERO, q(500, 2));
        }
        let order: Vec<u64> = (0..60)
            .map(|_| s.dequeue(Time::ZERO).unwrap().flow)
            .collect();
        let b1: u64 = order[..30].iter().filter(|&&f| f == 1).count() as u64 * 1000;
        let b2: u64 = order[..30].iter().filter(|&&f| f == 2).count() as u64 * 500;
        assert!(b1.abs_diff(b2) <= 1000, "bytes {b1} vs {b2}");
        assert!(order[..40].windows(2).all(|w| !(w[0] == 1 && w[1] == 1)));
        assert_eq!(s.len_packets(), 0);
        assert_eq!(s.len_bytes(), 0);
    }

    #[test]
    fn per_flow_limit_and_reset_when_idle() {
        let mut s = Scfq::new(2);
        assert!(s.enqueue(Time::ZERO, q(500, 1)).is_empty());
        assert!(s.enqueue(Time::ZERO, q(500, 1)).is_empty());
        assert_eq!(s.enqueue(Time::ZERO, q(500, 1)).len(), 1);
        assert!(s.enqueue(Time::ZERO, q(500, 2)).is_empty());
        // Tags: flow 1 at 500, 1000; flow 2 at 500: order 1 (seq), 2, 1.
        let o: Vec<u64> = (0..3)
            .map(|_| s.dequeue(Time::ZERO).unwrap().flow)
            .collect();
        assert_eq!(o, vec![1, 2, 1]);
        assert!(s.dequeue(Time::ZERO).is_none());
        assert_eq!(s.v, 0);
    }
}
