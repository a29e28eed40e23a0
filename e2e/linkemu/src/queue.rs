//! Queue disciplines: the scenario's queue spec and the factory that builds a shared
//! `qdisc::QueueDiscipline` from it.

use congestion::Time;
use qdisc::{DropReason, QueueDiscipline, Queued};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;

/// A queue as a scenario or the control socket names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum QueueSpec {
    /// FIFO with tail drop (`{"kind":"droptail", ...}`, the shared `qdisc` crate's spelling).
    /// Limits in packets, bytes, or milliseconds at the link rate; with none given, the default
    /// is two bandwidth-delay products (see [`default_limit_bytes`]).
    #[serde(rename = "droptail")]
    DropTail {
        /// Maximum packets waiting.
        #[serde(default)]
        limit_packets: Option<usize>,
        /// Maximum bytes waiting.
        #[serde(default)]
        limit_bytes: Option<u64>,
        /// Maximum queueing delay at the link rate, ms (converted to bytes).
        #[serde(default)]
        limit_ms: Option<f64>,
    },
}

impl Default for QueueSpec {
    fn default() -> Self {
        QueueSpec::DropTail {
            limit_packets: None,
            limit_bytes: None,
            limit_ms: None,
        }
    }
}

/// The default byte limit: 2 × rate × RTT with RTT taken as twice this link's one-way delay
/// (DESIGN.md: "Default queue: drop-tail, 2 x bandwidth-delay product"), and never less than
/// 8 full-size frames so that a zero-delay link still absorbs a burst.
pub fn default_limit_bytes(rate_bps: u64, delay_ns: u64) -> u64 {
    let bdp = (rate_bps as u128 * 2 * delay_ns as u128 / 8 / 1_000_000_000) as u64;
    (2 * bdp).max(8 * 1514)
}

/// Builds the discipline for a spec on a link of `rate_bps` and `delay_ns`.
pub fn build<P: Send + 'static>(
    spec: &QueueSpec,
    rate_bps: u64,
    delay_ns: u64,
) -> Box<dyn QueueDiscipline<P>> {
    match *spec {
        QueueSpec::DropTail {
            limit_packets,
            limit_bytes,
            limit_ms,
        } => {
            let bytes = match (limit_packets, limit_bytes, limit_ms) {
                // At least one full-size frame, or nothing would pass.
                (_, None, Some(ms)) if ms.is_finite() && ms > 0.0 => {
                    Some(((ms / 1000.0 * rate_bps as f64 / 8.0) as u64).max(1514))
                }
                (None, None, _) => Some(default_limit_bytes(rate_bps, delay_ns)),
                (_, b, _) => b,
            };
            Box::new(DropTail::new(limit_packets, bytes))
        }
    }
}

/// Tail-drop FIFO. A stand-in until the shared `qdisc` crate's drop-tail is on this branch: it
/// only implements the shared trait, so swapping it out changes nothing else here.
pub struct DropTail<P> {
    q: VecDeque<Queued<P>>,
    bytes: u64,
    limit_packets: Option<usize>,
    limit_bytes: Option<u64>,
}

impl<P> DropTail<P> {
    /// A FIFO with the given limits (None = unlimited).
    pub fn new(limit_packets: Option<usize>, limit_bytes: Option<u64>) -> Self {
        DropTail {
            q: VecDeque::new(),
            bytes: 0,
            limit_packets,
            limit_bytes,
        }
    }
}

impl<P: Send> QueueDiscipline<P> for DropTail<P> {
    fn enqueue(&mut self, now: Time, mut pkt: Queued<P>) -> Vec<(Queued<P>, DropReason)> {
        let over_p = self.limit_packets.is_some_and(|l| self.q.len() >= l);
        let over_b = self
            .limit_bytes
            .is_some_and(|l| self.bytes + pkt.size as u64 > l);
        if over_p || over_b {
            return vec![(pkt, DropReason::Overflow)];
        }
        pkt.enqueued_at = now;
        self.bytes += pkt.size as u64;
        self.q.push_back(pkt);
        Vec::new()
    }
    fn dequeue(&mut self, _now: Time) -> Option<Queued<P>> {
        let p = self.q.pop_front()?;
        self.bytes -= p.size as u64;
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

    #[test]
    fn default_limit_is_two_bdp() {
        // 1 Mbit/s, 20 ms one way: RTT 40 ms, BDP 5000 B, 2 BDP 10000 B -> floor 12112.
        assert_eq!(default_limit_bytes(1_000_000, 20_000_000), 8 * 1514);
        // 10 Mbit/s, 20 ms: BDP 50000 B.
        assert_eq!(default_limit_bytes(10_000_000, 20_000_000), 100_000);
    }

    #[test]
    fn spec_json_roundtrip() {
        let s: QueueSpec =
            serde_json::from_str(r#"{"kind":"droptail","limit_packets":20}"#).unwrap();
        assert_eq!(
            s,
            QueueSpec::DropTail {
                limit_packets: Some(20),
                limit_bytes: None,
                limit_ms: None
            }
        );
        assert!(serde_json::from_str::<QueueSpec>(r#"{"kind":"droptail","x":1}"#).is_err());
        // 100 ms at 1 Mbit/s = 12500 B: 25 packets of 500 B.
        let ms: QueueSpec = serde_json::from_str(r#"{"kind":"droptail","limit_ms":100}"#).unwrap();
        let mut q = build::<()>(&ms, 1_000_000, 0);
        let mut dropped = 0;
        for _ in 0..30 {
            dropped += q
                .enqueue(
                    Time::ZERO,
                    Queued {
                        size: 500,
                        flow: 0,
                        enqueued_at: Time::ZERO,
                        item: (),
                    },
                )
                .len();
        }
        assert_eq!(dropped, 5);
    }
}
