//! The flows a scenario starts: layered and TFMCC sessions, TCP, TFRC, CBR, web and on-off
//! traffic, with their receivers and defaults.

use super::{invalid, one, yes};
use crate::Error;
use serde::{Deserialize, Serialize};

/// The layer ladder: `count` equal layers of `rate_kbps`, or explicit per-layer rates.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ladder {
    #[serde(default)]
    pub count: Option<usize>,
    #[serde(default)]
    pub rate_kbps: Option<f64>,
    #[serde(default)]
    pub rates_kbps: Option<Vec<f64>>,
}

impl Ladder {
    /// Per-layer rates in kbit/s.
    pub fn rates(&self) -> Result<Vec<f64>, Error> {
        let v = match (&self.rates_kbps, self.count, self.rate_kbps) {
            (Some(r), None, None) => r.clone(),
            (None, Some(n), Some(r)) => vec![r; n],
            _ => return Err(invalid("layers", "give rates_kbps, or count and rate_kbps")),
        };
        if v.is_empty() || v.len() > 255 || v.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
            return Err(invalid("layers", "1 to 255 layers with positive rates"));
        }
        Ok(v)
    }
}

/// One receiver of a layered session.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReceiverDef {
    pub name: String,
    /// Node it runs on.
    pub at: String,
    #[serde(default)]
    pub start_s: f64,
    /// Extra start delay drawn uniformly in [0, start_jitter_s).
    #[serde(default)]
    pub start_jitter_s: f64,
    #[serde(default)]
    pub stop_s: Option<f64>,
    /// TFMCC: the stop at `stop_s` is a crash (no leave report), not an explicit leave.
    #[serde(default)]
    pub crash: bool,
    /// Overrides the session's protocol for this receiver.
    #[serde(default)]
    pub protocol: Option<String>,
    /// Replicate this receiver `count` times as `name-1` … `name-count` (each with its own
    /// start jitter draw).
    #[serde(default = "one_u32")]
    pub count: u32,
}

fn one_u32() -> u32 {
    1
}

impl ReceiverDef {
    /// The receiver names this entry expands to.
    pub fn names(&self) -> Vec<String> {
        if self.count <= 1 {
            vec![self.name.clone()]
        } else {
            (1..=self.count)
                .map(|i| format!("{}-{i}", self.name))
                .collect()
        }
    }
}

/// A flow, tagged by `type`.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "lowercase", deny_unknown_fields)]
pub enum Flow {
    /// A layered multicast session.
    Layered {
        name: String,
        /// Receiver controller (`era`, `plm`, ...; `sim-fixed-N` and `sim-aimd` are the
        /// simulator's own test controllers).
        protocol: String,
        from: String,
        layers: Ladder,
        #[serde(default = "d_size")]
        packet_size: u32,
        #[serde(default = "d_bunch")]
        bunch: u8,
        #[serde(default = "one")]
        adapt_interval_s: f64,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        start_jitter_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
        /// Each bunch gap is `interval · (1 + U(−j, j))` (ns-2 `CBR_PP` `random_ 1` is
        /// j = 0.5; 0 = the deterministic schedule of `congestion::schedule`).
        #[serde(default)]
        burst_jitter: f64,
        receivers: Vec<ReceiverDef>,
    },
    /// A bulk TCP transfer.
    Tcp {
        name: String,
        from: String,
        to: String,
        /// `reno` (default), `newreno`, `sack` (RFC 6675 recovery with an RFC 2018 SACK
        /// sink, `agents::sack`), `acc-reno` (`agents::acc`), or Linux's `cubic` / `bbr`
        /// (`agents::linux_tcp`: `packet_size` is then the IP packet size, as the testbed's
        /// iperf3 `-M`, and goodput excludes its 52 header bytes).
        #[serde(default = "d_variant")]
        variant: String,
        #[serde(default = "d_size")]
        packet_size: u32,
        #[serde(default = "d_cwnd")]
        max_cwnd: u32,
        /// TCP/IP header bytes on top of `packet_size` on the wire (ns-2 `Agent/TCP`: 40;
        /// default 0, the packet is `packet_size`). Goodput counts `packet_size` per segment.
        #[serde(default)]
        header_bytes: u32,
        /// ns-2's `bugFix_` (Reno: no second fast retransmit for one window; `TcpSender::
        /// with_bug_fix`). Default false.
        #[serde(default)]
        bug_fix: bool,
        /// `cubic` and `bbr` sinks delay their ACKs as Linux does unless this is set (the
        /// testbed sets `quickack` on the sink's routes for it). The ns-2 variants' sinks always
        /// ACK every segment.
        #[serde(default)]
        ack_every_segment: bool,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        start_jitter_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
    },
    /// Constant bit rate datagrams.
    Cbr {
        name: String,
        from: String,
        to: String,
        rate_kbps: f64,
        #[serde(default = "d_size")]
        packet_size: u32,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        start_jitter_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
    },
    /// A single-rate TFMCC session (one group; the sender adapts to the slowest receiver).
    Tfmcc {
        name: String,
        from: String,
        #[serde(default = "d_tfmcc_size")]
        packet_size: u32,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        start_jitter_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
        receivers: Vec<ReceiverDef>,
    },
    /// A unicast TFRC flow (RFC 5348) with an optional scripted periodic loss.
    Tfrc {
        name: String,
        from: String,
        to: String,
        #[serde(default = "d_tfmcc_size")]
        packet_size: u32,
        /// `[[t_s, k], ...]`: from t_s on the sender drops every k-th packet (0 = none).
        #[serde(default)]
        periodic_loss: Vec<(f64, u64)>,
        /// Loss-history discounting at the receiver (RFC 5348 §5.5).
        #[serde(default = "yes")]
        discounting: bool,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        start_jitter_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
    },
    /// Web-like background (`agents::web`, plm.md §6.3): HTTP/1.0 page fetches over TCP
    /// Reno from `virtual_servers` servers (spread over the `servers` nodes) to
    /// `virtual_clients` clients (over the `clients` nodes); one monitor for all its goodput.
    Web {
        name: String,
        servers: Vec<String>,
        clients: Vec<String>,
        #[serde(default = "d_web_servers")]
        virtual_servers: u32,
        #[serde(default = "d_web_clients")]
        virtual_clients: u32,
        sessions: u32,
        #[serde(default = "d_web_pages")]
        pages: u32,
        #[serde(default = "one")]
        mean_session_gap_s: f64,
        #[serde(default = "d_web_think")]
        mean_think_s: f64,
        #[serde(default = "d_web_object")]
        mean_object_packets: f64,
        #[serde(default = "d_web_shape")]
        shape: f64,
        #[serde(default = "d_web_size")]
        packet_size: u32,
        #[serde(default = "d_cwnd")]
        max_cwnd: u32,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
    },
    /// A unicast TFRC flow; with `pcc` a PCC on/off flow at its application rate that takes
    /// `R_TCP` from TFRC's estimators (`agents::tfrc`). Monitors: `NAME/receiver` and
    /// `NAME/sender` (bytes sent: a PCC flow's on-time share is its sending rate / `R_NA`).
    /// The same agents as a `tfrc` flow; the two kinds differ in their options and monitors.
    #[serde(rename = "tfrc-pcc")]
    TfrcPcc {
        name: String,
        from: String,
        to: String,
        #[serde(default = "d_tfmcc_size")]
        packet_size: u32,
        #[serde(default)]
        pcc: Option<PccDef>,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        start_jitter_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
    },
    /// A reliable single-rate multicast session of the active-network study
    /// (`active-networks.md` §1.6-1.7): `protocol` `aer-nca` (`agents::aer`; repair servers on
    /// the `repair_servers` nodes, none = global recovery) or `pgmcc` (`agents::pgmcc`).
    /// Monitors: `NAME/RECEIVER` (goodput: each packet counted once, original or repair).
    Aer {
        name: String,
        from: String,
        #[serde(default = "d_aer_protocol")]
        protocol: String,
        #[serde(default = "d_tfmcc_size")]
        packet_size: u32,
        #[serde(default)]
        repair_servers: Vec<String>,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        start_jitter_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
        receivers: Vec<ReceiverDef>,
    },
    /// Pareto on/off datagrams (rate while on).
    Onoff {
        name: String,
        from: String,
        to: String,
        rate_kbps: f64,
        mean_on_s: f64,
        mean_off_s: f64,
        #[serde(default = "d_shape")]
        shape: f64,
        #[serde(default = "d_size")]
        packet_size: u32,
        #[serde(default)]
        start_s: f64,
        #[serde(default)]
        start_jitter_s: f64,
        #[serde(default)]
        stop_s: Option<f64>,
    },
}

/// PCC parameters of a `tfrc` flow (dissertation ch. 4).
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PccDef {
    /// Application rate `R_NA` while on.
    pub rate_kbps: f64,
    /// Experiment horizon `T` (randomised ±10 % per flow by the controller).
    #[serde(default = "d_pcc_t")]
    pub t_s: f64,
    /// Protected time `T'` after every (re)start.
    #[serde(default = "d_pcc_protected")]
    pub protected_s: f64,
    /// Closed loss intervals in the receiver's average loss interval (8 in the dissertation;
    /// larger values are a diagnostic, see `docs/simulator.md`, S11).
    #[serde(default = "d_ali_n")]
    pub ali_n: usize,
}

fn d_ali_n() -> usize {
    8
}

fn d_aer_protocol() -> String {
    "aer-nca".into()
}
fn d_pcc_t() -> f64 {
    60.0
}
fn d_pcc_protected() -> f64 {
    10.0
}
fn d_size() -> u32 {
    512
}
fn d_tfmcc_size() -> u32 {
    1000
}
fn d_bunch() -> u8 {
    2
}
fn d_variant() -> String {
    "reno".into()
}
fn d_cwnd() -> u32 {
    2000
}
fn d_shape() -> f64 {
    1.5
}
fn d_web_servers() -> u32 {
    40
}
fn d_web_clients() -> u32 {
    420
}
fn d_web_pages() -> u32 {
    300
}
fn d_web_think() -> f64 {
    15.0
}
fn d_web_object() -> f64 {
    12.0
}
fn d_web_shape() -> f64 {
    1.2
}
fn d_web_size() -> u32 {
    1000
}

impl Flow {
    /// The flow's name.
    pub fn name(&self) -> &str {
        match self {
            Flow::Layered { name, .. }
            | Flow::Tcp { name, .. }
            | Flow::Cbr { name, .. }
            | Flow::Tfmcc { name, .. }
            | Flow::Tfrc { name, .. }
            | Flow::TfrcPcc { name, .. }
            | Flow::Web { name, .. }
            | Flow::Aer { name, .. }
            | Flow::Onoff { name, .. } => name,
        }
    }
}
