//! The one network model, sans-IO: queue disciplines shared by the simulator
//! (`layercast-sim`), the link emulator (`layercast-linkemu`) and the session harness, so a
//! scenario's queue means the same thing in all three, and [`link::Link`], one direction of a
//! link (queue, serialisation, loss, delay and jitter) that the link emulator and the harness
//! both run.
//!
//! A queue holds opaque items of type `P` (a simulator packet, or a raw Ethernet frame in the
//! link emulator) together with the metadata the disciplines need. Time is passed in with
//! every call; random early drops come from a seeded [`rng::Rng`], so the same seed gives the
//! same drops.
//!
//! | discipline | module | scenario `queue:` |
//! |---|---|---|
//! | drop-tail FIFO (packets, bytes or ms at the link rate) | [`droptail`] | `{kind: droptail, limit_packets: 50}` |
//! | RED, optional gentle mode | [`red`] | `{kind: red, min_th: 5, max_th: 15, limit_packets: 30}` |
//! | REM | [`rem`] | `{kind: rem, limit_packets: 25}` |
//! | per-flow fair queue (DRR, one-packet quantum) | [`fq`] | `{kind: fq, per_flow_packets: 20}` |
//! | FQ-CoDel (RFC 8290; CoDel per flow, RFC 8289) | [`fq_codel`], [`codel`] | `{kind: fq_codel}` (Linux defaults) |

pub mod codel;
pub mod droptail;
pub mod fq;
pub mod fq_codel;
pub mod link;
pub mod loss;
pub mod red;
pub mod rem;
pub mod rng;
pub mod scfq;

pub use droptail::DropTail;
pub use fq::FairQueue;
pub use fq_codel::{FqCodel, FqCodelParams};
pub use link::{Link, LinkConfig, LinkCounters};
pub use loss::{LossModel, LossState};
pub use red::{Red, RedParams};
pub use rem::{Rem, RemParams};
pub use scfq::Scfq;

use proto::Time;
use serde::{Deserialize, Serialize};

/// What a discipline needs to know about one packet.
#[derive(Clone, Debug)]
pub struct Queued<P> {
    /// Size on the wire in bytes (what serialisation time and byte limits count).
    pub size: u32,
    /// Flow identifier for per-flow fair queuing. A layered session's groups share one flow.
    pub flow: u64,
    /// When it was enqueued (set by the queue).
    pub enqueued_at: Time,
    /// The item itself.
    pub item: P,
}

impl<P> Queued<P> {
    /// A packet of `size` bytes in `flow`, not yet enqueued.
    pub fn new(item: P, size: u32, flow: u64) -> Self {
        Queued {
            size,
            flow,
            enqueued_at: Time::ZERO,
            item,
        }
    }
}

/// Why a packet was not queued (or was pushed out).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropReason {
    /// The queue was full (tail drop, or push-out from the longest flow).
    Overflow,
    /// An active queue management decision (RED/REM early drop).
    Early,
}

/// A queue discipline.
pub trait QueueDiscipline<P>: Send {
    /// Offers a packet at time `now`. Returns the packets dropped as a result (the offered one
    /// on a tail drop; another flow's packet for disciplines that push out).
    fn enqueue(&mut self, now: Time, pkt: Queued<P>) -> Vec<(Queued<P>, DropReason)>;
    /// Takes the next packet to serialise, if any.
    fn dequeue(&mut self, now: Time) -> Option<Queued<P>>;
    /// The packets earlier [`dequeue`](Self::dequeue) calls dropped instead of sending (CoDel
    /// drops at the head), for the caller to count. Disciplines that drop only on enqueue
    /// have none.
    fn take_dropped(&mut self) -> Vec<(Queued<P>, DropReason)> {
        Vec::new()
    }
    /// Packets waiting.
    fn len_packets(&self) -> usize;
    /// Bytes waiting.
    fn len_bytes(&self) -> u64;
}

/// Errors in a queue configuration.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum Error {
    /// A parameter is out of range or inconsistent.
    #[error("invalid queue parameter {field}: {reason}")]
    Invalid { field: &'static str, reason: String },
}

/// A queue discipline as a scenario names it (the `queue:` field of a link), tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum QdiscConfig {
    /// Drop-tail FIFO. Give exactly one limit; `limit_ms` is converted to bytes at the link
    /// rate (2 × bandwidth-delay product = `limit_ms: 2 × base RTT in ms`).
    Droptail {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit_packets: Option<usize>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit_bytes: Option<u64>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        limit_ms: Option<f64>,
    },
    /// RED.
    Red(RedParams),
    /// REM.
    Rem(RemParams),
    /// Per-flow fair queue (DRR).
    Fq {
        /// Packets per flow (PLM: 20).
        #[serde(default = "default_per_flow")]
        per_flow_packets: usize,
        /// Optional shared buffer in bytes (longest-queue push-out when full).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        total_bytes: Option<u64>,
        /// Byte quantum; absent = one packet per visit.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        quantum_bytes: Option<u32>,
    },
    /// Self-clocked fair queueing (finish tags, byte-fair, packet by packet; `scfq.rs`).
    Scfq {
        /// Packets per flow (PLM: 20).
        #[serde(default = "default_per_flow")]
        per_flow_packets: usize,
    },
    /// FQ-CoDel (RFC 8290) with Linux's defaults unless given (`fq_codel.rs`).
    #[serde(rename = "fq_codel")]
    FqCodel(FqCodelParams),
}

fn default_per_flow() -> usize {
    20
}

impl Default for QdiscConfig {
    /// 100-packet drop-tail FIFO (used only where a scenario names no queue).
    fn default() -> Self {
        QdiscConfig::Droptail {
            limit_packets: Some(100),
            limit_bytes: None,
            limit_ms: None,
        }
    }
}

impl QdiscConfig {
    /// Checks the parameters without building anything.
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |field, reason: &str| {
            Err(Error::Invalid {
                field,
                reason: reason.to_string(),
            })
        };
        match self {
            QdiscConfig::Droptail {
                limit_packets,
                limit_bytes,
                limit_ms,
            } => {
                let n = limit_packets.is_some() as u8
                    + limit_bytes.is_some() as u8
                    + limit_ms.is_some() as u8;
                if n != 1 {
                    return bad(
                        "droptail",
                        "give exactly one of limit_packets, limit_bytes, limit_ms",
                    );
                }
                if limit_ms.is_some_and(|m| !(m.is_finite() && m > 0.0)) {
                    return bad("limit_ms", "must be a positive number");
                }
                if *limit_packets == Some(0) || *limit_bytes == Some(0) {
                    return bad("limit", "must be positive");
                }
            }
            QdiscConfig::Red(p) => {
                if !(p.min_th >= 0.0 && p.max_th > p.min_th) {
                    return bad("max_th", "need 0 <= min_th < max_th");
                }
                if !(p.max_p > 0.0 && p.max_p <= 1.0) {
                    return bad("max_p", "need 0 < max_p <= 1");
                }
                if !(p.wq > 0.0 && p.wq <= 1.0) {
                    return bad("wq", "need 0 < wq <= 1");
                }
                if p.limit_packets == 0 || p.mean_packet_size == 0 {
                    return bad("limit_packets", "must be positive");
                }
            }
            QdiscConfig::Rem(p) => {
                if p.phi.is_nan() || p.phi <= 1.0 {
                    return bad("phi", "must be > 1");
                }
                if !(p.gamma > 0.0 && p.update_s > 0.0 && p.inw > 0.0 && p.inw <= 1.0) {
                    return bad("rem", "need gamma > 0, update_s > 0, 0 < inw <= 1");
                }
                if p.limit_packets == 0 || p.mean_packet_size == 0 {
                    return bad("limit_packets", "must be positive");
                }
            }
            QdiscConfig::Fq {
                per_flow_packets,
                total_bytes,
                quantum_bytes,
            } => {
                if *per_flow_packets == 0 || *total_bytes == Some(0) || *quantum_bytes == Some(0) {
                    return bad("fq", "limits and quantum must be positive");
                }
            }
            QdiscConfig::Scfq { per_flow_packets } => {
                if *per_flow_packets == 0 {
                    return bad("scfq", "per_flow_packets must be positive");
                }
            }
            QdiscConfig::FqCodel(p) => {
                if let Err((field, reason)) = p.check() {
                    return bad(field, reason);
                }
            }
        }
        Ok(())
    }
}

/// Builds the discipline `config` describes for a link of `link_rate_bps`, with early drops
/// drawn from a generator seeded with 0. See [`build_seeded`].
pub fn build<P: Send + 'static>(
    config: &QdiscConfig,
    link_rate_bps: u64,
) -> Result<Box<dyn QueueDiscipline<P>>, Error> {
    build_seeded(config, link_rate_bps, 0)
}

/// Builds the discipline with its random early drops drawn from `seed`.
pub fn build_seeded<P: Send + 'static>(
    config: &QdiscConfig,
    link_rate_bps: u64,
    seed: u64,
) -> Result<Box<dyn QueueDiscipline<P>>, Error> {
    config.validate()?;
    Ok(match config {
        QdiscConfig::Droptail {
            limit_packets,
            limit_bytes,
            limit_ms,
        } => {
            let bytes = match limit_ms {
                // At least one full-size packet, or nothing would ever pass.
                Some(ms) => Some(((ms / 1000.0 * link_rate_bps as f64 / 8.0) as u64).max(1500)),
                None => *limit_bytes,
            };
            Box::new(DropTail::new(*limit_packets, bytes))
        }
        QdiscConfig::Red(p) => Box::new(Red::new(p.clone(), link_rate_bps, seed)),
        QdiscConfig::Rem(p) => Box::new(Rem::new(p.clone(), link_rate_bps, seed)),
        QdiscConfig::Fq {
            per_flow_packets,
            total_bytes,
            quantum_bytes,
        } => Box::new(FairQueue::new(
            *per_flow_packets,
            *total_bytes,
            *quantum_bytes,
        )),
        QdiscConfig::Scfq { per_flow_packets } => Box::new(Scfq::new(*per_flow_packets)),
        QdiscConfig::FqCodel(p) => Box::new(FqCodel::new(p.clone(), seed)),
    })
}

#[cfg(test)]
pub(crate) fn pkt(item: u32, size: u32, flow: u64) -> Queued<u32> {
    Queued::new(item, size, flow)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_parses_from_json_and_builds() {
        let c: QdiscConfig = serde_json::from_str(r#"{"kind":"droptail","limit_ms":100}"#).unwrap();
        // 100 ms at 1 Mb/s = 12 500 bytes: 25 packets of 500 B fit, the 26th does not.
        let mut q = build::<u32>(&c, 1_000_000).unwrap();
        let mut dropped = 0;
        for i in 0..30 {
            dropped += q.enqueue(Time::ZERO, pkt(i, 500, 0)).len();
        }
        assert_eq!(dropped, 5);
        let c: QdiscConfig = serde_json::from_str(
            r#"{"kind":"red","min_th":5,"max_th":15,"limit_packets":30,"gentle":true}"#,
        )
        .unwrap();
        assert!(build::<u32>(&c, 1_000_000).is_ok());
        let c: QdiscConfig = serde_json::from_str(r#"{"kind":"fq"}"#).unwrap();
        assert_eq!(
            c,
            QdiscConfig::Fq {
                per_flow_packets: 20,
                total_bytes: None,
                quantum_bytes: None
            }
        );
        let c: QdiscConfig = serde_json::from_str(r#"{"kind":"rem","limit_packets":25}"#).unwrap();
        assert!(build::<u32>(&c, 1_000_000).is_ok());
        let c: QdiscConfig = serde_json::from_str(r#"{"kind":"fq_codel"}"#).unwrap();
        assert_eq!(c, QdiscConfig::FqCodel(FqCodelParams::default()));
        let c: QdiscConfig =
            serde_json::from_str(r#"{"kind":"fq_codel","target_ms":10,"flows":1}"#).unwrap();
        let QdiscConfig::FqCodel(p) = &c else {
            panic!("{c:?}")
        };
        assert_eq!((p.target_ms, p.interval_ms, p.flows), (10.0, 100.0, 1));
        assert!(build::<u32>(&c, 1_000_000).is_ok());
    }

    #[test]
    fn bad_configs_are_errors_not_panics() {
        for s in [
            r#"{"kind":"droptail"}"#,
            r#"{"kind":"droptail","limit_packets":5,"limit_ms":3}"#,
            r#"{"kind":"droptail","limit_ms":-1}"#,
            r#"{"kind":"red","min_th":15,"max_th":5,"limit_packets":30}"#,
            r#"{"kind":"rem","phi":0.5,"limit_packets":25}"#,
            r#"{"kind":"fq","per_flow_packets":0}"#,
            r#"{"kind":"fq_codel","target_ms":0}"#,
            r#"{"kind":"fq_codel","target_ms":200}"#,
            r#"{"kind":"fq_codel","flows":0}"#,
            r#"{"kind":"fq_codel","limit_packets":0}"#,
        ] {
            let c: QdiscConfig = serde_json::from_str(s).unwrap();
            assert!(build::<u32>(&c, 1_000_000).is_err(), "{s}");
        }
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind":"codel"}"#).is_err());
        assert!(serde_json::from_str::<QdiscConfig>(r#"{"kind":"fq_codel","bogus":1}"#).is_err());
        assert!(
            serde_json::from_str::<QdiscConfig>(r#"{"kind":"fq","bogus":1}"#).is_err(),
            "unknown fields are rejected"
        );
    }
}
