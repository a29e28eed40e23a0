//! Drop-tail FIFO with a limit in packets or bytes (a limit in milliseconds is turned into
//! bytes at the link rate by [`crate::build`]).

use crate::{DropReason, QueueDiscipline, Queued};
use proto::Time;
use std::collections::VecDeque;

/// A FIFO that refuses a packet when it would exceed either limit.
#[derive(Debug)]
pub struct DropTail<P> {
    q: VecDeque<Queued<P>>,
    bytes: u64,
    limit_packets: Option<usize>,
    limit_bytes: Option<u64>,
}

impl<P> DropTail<P> {
    /// A FIFO holding at most `limit_packets` packets and `limit_bytes` bytes (None = no limit).
    pub fn new(limit_packets: Option<usize>, limit_bytes: Option<u64>) -> Self {
        DropTail {
            q: VecDeque::new(),
            bytes: 0,
            limit_packets,
            limit_bytes,
        }
    }

    /// Whether `size` more bytes would overflow.
    pub(crate) fn would_overflow(&self, size: u32) -> bool {
        self.limit_packets.is_some_and(|l| self.q.len() >= l)
            || self
                .limit_bytes
                .is_some_and(|l| self.bytes + u64::from(size) > l)
    }

    pub(crate) fn push(&mut self, now: Time, mut pkt: Queued<P>) {
        pkt.enqueued_at = now;
        self.bytes += u64::from(pkt.size);
        self.q.push_back(pkt);
    }
}

impl<P: Send> QueueDiscipline<P> for DropTail<P> {
    fn enqueue(&mut self, now: Time, pkt: Queued<P>) -> Vec<(Queued<P>, DropReason)> {
        if self.would_overflow(pkt.size) {
            return vec![(pkt, DropReason::Overflow)];
        }
        self.push(now, pkt);
        Vec::new()
    }

    fn dequeue(&mut self, _now: Time) -> Option<Queued<P>> {
        let p = self.q.pop_front()?;
        self.bytes -= u64::from(p.size);
        Some(p)
    }

    fn len_packets(&self) -> usize {
        self.q.len()
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
    fn packet_limit_drops_the_arriving_packet_and_keeps_fifo_order() {
        let mut q = DropTail::new(Some(2), None);
        assert!(q.enqueue(Time::ZERO, pkt(1, 100, 0)).is_empty());
        assert!(q.enqueue(Time::ZERO, pkt(2, 100, 0)).is_empty());
        let d = q.enqueue(Time::ZERO, pkt(3, 100, 0));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].0.item, 3);
        assert_eq!(d[0].1, DropReason::Overflow);
        assert_eq!(q.len_bytes(), 200);
        assert_eq!(q.dequeue(Time::ZERO).unwrap().item, 1);
        assert_eq!(q.dequeue(Time::ZERO).unwrap().item, 2);
        assert!(q.dequeue(Time::ZERO).is_none());
        assert_eq!(q.len_bytes(), 0);
    }

    #[test]
    fn byte_limit_counts_sizes() {
        let mut q = DropTail::new(None, Some(1000));
        assert!(q.enqueue(Time::ZERO, pkt(1, 600, 0)).is_empty());
        // 600 + 500 > 1000: dropped, although the queue holds one packet only.
        assert_eq!(q.enqueue(Time::ZERO, pkt(2, 500, 0)).len(), 1);
        assert!(q.enqueue(Time::ZERO, pkt(3, 400, 0)).is_empty());
        assert_eq!(q.len_packets(), 2);
    }
}
