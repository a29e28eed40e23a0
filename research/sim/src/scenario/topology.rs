//! The network: nodes, links and the multicast router's timing.

use super::yes;
use netmodel::QdiscConfig;
use serde::{Deserialize, Serialize};

/// Nodes, links and the multicast router's timing.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Topology {
    pub nodes: Vec<String>,
    pub links: Vec<LinkDef>,
    #[serde(default)]
    pub multicast: MulticastDef,
}

/// One link; duplex by default (the reverse direction gets the same rate, delay, queue and
/// loss unless `reverse` overrides them).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkDef {
    pub from: String,
    pub to: String,
    pub rate_kbps: f64,
    pub delay_ms: f64,
    #[serde(default)]
    pub queue: Option<QdiscConfig>,
    #[serde(default)]
    pub loss: f64,
    /// Per-packet extra delay, uniform in [0, jitter_ms), order-preserving.
    #[serde(default)]
    pub jitter_ms: f64,
    /// Probe the `from → to` direction (`agents::probe`): monitor `queue:FROM-TO`.
    #[serde(default)]
    pub monitor_queue: bool,
    /// ACC TCP active router on the `from → to` queue (`agents::acc`).
    #[serde(default)]
    pub acc: bool,
    #[serde(default = "yes")]
    pub duplex: bool,
    /// Queue of the reverse direction, if different.
    #[serde(default)]
    pub reverse_queue: Option<QdiscConfig>,
}

/// Multicast router timing (IGMPv2-like defaults).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MulticastDef {
    #[serde(default = "d_join")]
    pub join_latency_ms: f64,
    #[serde(default = "d_leave")]
    pub leave_latency_ms: f64,
    /// IGMP fast leave (igmpproxy quickleave): prune as fast as a graft.
    #[serde(default)]
    pub fast_leave: bool,
}

fn d_join() -> f64 {
    10.0
}
fn d_leave() -> f64 {
    2000.0
}

impl Default for MulticastDef {
    fn default() -> Self {
        MulticastDef {
            join_latency_ms: d_join(),
            leave_latency_ms: d_leave(),
            fast_leave: false,
        }
    }
}
