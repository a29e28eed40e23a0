//! The scenario file (YAML), shared with the e2e testbed: topology, flows, schedule and
//! measurements with pass bands. Format: `docs/scenarios.md`; JSON Schema:
//! `research/scenarios/scenario.schema.json`.

use crate::agents::cbr::{DatagramSink, DatagramSource, OnOff};
use crate::agents::layered::{LayeredReceiver, LayeredSender, Layering};
use crate::agents::linux_tcp::{LinuxCc, LinuxTcpSender, LINUX_HEADER};
use crate::agents::local_controllers::local_controller;
use crate::agents::probe::QueueProbe;
use crate::agents::tcp::{TcpSender, TcpSink, Variant};
use crate::agents::tfmcc::{TfmccReceiverAgent, TfmccSenderAgent};
use crate::agents::tfrc::{TfrcReceiverAgent, TfrcSenderAgent, TfrcSenderOptions};
use crate::engine::{Command, Dest, LinkChange, LinkSpec, MulticastTiming, Sim};
use crate::metrics::MonKind;
use crate::Error;
use congestion::{LayerInfo, SessionInfo, Time};
use netmodel::rng::Rng;
use netmodel::QdiscConfig;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::time::Duration;

/// A whole scenario.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short identifier (file stem by convention).
    pub name: String,
    /// One-line description.
    #[serde(default)]
    pub title: String,
    /// Where the experiment comes from (spec section, acceptance check ids).
    #[serde(default)]
    pub source: String,
    /// Simulated duration, s.
    pub duration_s: f64,
    /// Time-series interval, s.
    #[serde(default = "one")]
    pub interval_s: f64,
    /// Seeds the full catalogue runs, and seeds the fast subset runs.
    #[serde(default = "default_seeds")]
    pub seeds: u32,
    #[serde(default = "default_fast_seeds")]
    pub fast_seeds: u32,
    pub topology: Topology,
    pub flows: Vec<Flow>,
    #[serde(default)]
    pub schedule: Vec<ScheduleItem>,
    #[serde(default)]
    pub measurements: Vec<Measurement>,
}

fn one() -> f64 {
    1.0
}
fn default_seeds() -> u32 {
    20
}
fn default_fast_seeds() -> u32 {
    3
}

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

fn yes() -> bool {
    true
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

/// A timed change: a link's rate/delay/loss or a flow's rate.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleItem {
    pub at_s: f64,
    /// Link as `from-to` (one direction); with `flow` absent.
    #[serde(default)]
    pub link: Option<String>,
    /// CBR / on-off flow name; with `link` absent.
    #[serde(default)]
    pub flow: Option<String>,
    #[serde(default)]
    pub rate_kbps: Option<f64>,
    #[serde(default)]
    pub delay_ms: Option<f64>,
    #[serde(default)]
    pub loss: Option<f64>,
}

/// A measurement with its pass band.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Measurement {
    /// Identifier, e.g. `era/AC-2 time to 15 layers`.
    pub id: String,
    /// Metric name (see `docs/scenarios.md`).
    pub metric: String,
    /// Monitors: `flow` (all its receivers) or `flow/receiver`.
    pub of: Vec<String>,
    /// The other side of a ratio (tcp_friendliness).
    #[serde(default)]
    pub versus: Vec<String>,
    /// [t0, t1] in seconds; default: the monitor's start to the end of the run.
    #[serde(default)]
    pub window: Option<[f64; 2]>,
    /// Regions for `mean_queue_ratio` (last / first), `mean_queue_spread` (max − min) and
    /// `mean_queue_increasing` (1 if strictly increasing), e.g. the thesis' U1 load regions.
    #[serde(default)]
    pub windows: Vec<[f64; 2]>,
    /// Reference time for time_to_level / convergence_time; default: the receiver's start.
    #[serde(default)]
    pub after_s: Option<f64>,
    #[serde(default)]
    pub min_layers: Option<u8>,
    #[serde(default)]
    pub max_layers: Option<u8>,
    #[serde(default)]
    pub min_kbps: Option<f64>,
    #[serde(default)]
    pub max_kbps: Option<f64>,
    #[serde(default)]
    pub hold_s: Option<f64>,
    /// A metric's threshold where it needs one (e.g. `tfmcc_rounds_to_rmax_above`: R_max, s).
    #[serde(default)]
    pub threshold: Option<f64>,
    /// For efficiency: a constant, or pieces `[t0, t1, kbps]`.
    #[serde(default)]
    pub available_kbps: Option<Available>,
    /// Pass band.
    #[serde(default)]
    pub min: Option<f64>,
    #[serde(default)]
    pub max: Option<f64>,
    /// The published value, as text, for the report.
    #[serde(default)]
    pub published: String,
    /// A known, investigated miss (the verdict stays FAIL in the report; the fast test treats
    /// the row as an expected failure and says so).
    #[serde(default)]
    pub known_issue: Option<String>,
}

/// Available bandwidth for the efficiency metric.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Available {
    Constant(f64),
    Pieces(Vec<[f64; 3]>),
}

fn invalid(field: &str, reason: &str) -> Error {
    Error::Scenario(format!("{field}: {reason}"))
}

impl Scenario {
    /// Parses YAML and validates.
    pub fn from_yaml(text: &str) -> Result<Scenario, Error> {
        let s: Scenario = serde_norway::from_str(text).map_err(|e| Error::Parse(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// Reads and parses a file.
    pub fn load(path: &std::path::Path) -> Result<Scenario, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::Io(format!("{}: {e}", path.display())))?;
        Scenario::from_yaml(&text).map_err(|e| match e {
            Error::Parse(m) => Error::Parse(format!("{}: {m}", path.display())),
            Error::Scenario(m) => Error::Scenario(format!("{}: {m}", path.display())),
            other => other,
        })
    }

    fn node_index(&self) -> HashMap<&str, usize> {
        self.topology
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| (n.as_str(), i))
            .collect()
    }

    /// Every monitor name the scenario's flows create.
    pub fn monitor_names(&self) -> Vec<String> {
        let mut v = Vec::new();
        for f in &self.flows {
            match f {
                Flow::Layered {
                    name, receivers, ..
                }
                | Flow::Aer {
                    name, receivers, ..
                } => {
                    for r in receivers {
                        for n in r.names() {
                            v.push(format!("{name}/{n}"));
                        }
                    }
                }
                Flow::Tfmcc {
                    name, receivers, ..
                } => {
                    v.push(format!("{name}/sender"));
                    for r in receivers {
                        for n in r.names() {
                            v.push(format!("{name}/{n}"));
                        }
                    }
                }
                Flow::TfrcPcc { name, .. } => {
                    v.push(format!("{name}/receiver"));
                    v.push(format!("{name}/sender"));
                }
                other => v.push(other.name().to_string()),
            }
        }
        for l in &self.topology.links {
            if l.monitor_queue {
                v.push(format!("queue:{}-{}", l.from, l.to));
            }
        }
        v
    }

    /// Expands `flow` and `flow/receiver` references into monitor names.
    pub fn expand(&self, refs: &[String]) -> Result<Vec<String>, Error> {
        let all = self.monitor_names();
        let mut out = Vec::new();
        for r in refs {
            let hits: Vec<&String> = all
                .iter()
                .filter(|m| {
                    *m == r
                        || m.starts_with(&format!("{r}/"))
                        || (r.contains('/')
                            && m.strip_prefix(&format!("{r}-")).is_some_and(|n| {
                                !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())
                            }))
                })
                .collect();
            if hits.is_empty() {
                return Err(invalid(
                    "measurement",
                    &format!("unknown flow or receiver {r:?}"),
                ));
            }
            out.extend(hits.into_iter().cloned());
        }
        Ok(out)
    }

    /// Checks names, references and ranges.
    pub fn validate(&self) -> Result<(), Error> {
        if !(self.duration_s.is_finite() && self.duration_s > 0.0 && self.duration_s <= 1e6) {
            return Err(invalid("duration_s", "must be in (0, 1e6]"));
        }
        if !(self.interval_s.is_finite() && self.interval_s >= 0.001) {
            return Err(invalid("interval_s", "must be >= 0.001"));
        }
        // `fast_seeds: 0` keeps a costly scenario (e.g. 10,000 receivers) out of the fast subset.
        if self.seeds == 0 {
            return Err(invalid("seeds", "must be positive"));
        }
        let nodes = self.node_index();
        if nodes.len() != self.topology.nodes.len() {
            return Err(invalid("nodes", "names must be unique"));
        }
        let node = |n: &str| {
            nodes
                .get(n)
                .copied()
                .ok_or_else(|| invalid("node", &format!("unknown node {n:?}")))
        };
        let mut link_names = Vec::new();
        for l in &self.topology.links {
            node(&l.from)?;
            node(&l.to)?;
            if !(l.rate_kbps.is_finite() && l.rate_kbps > 0.0) {
                return Err(invalid("rate_kbps", "must be positive"));
            }
            if !(l.delay_ms.is_finite() && l.delay_ms >= 0.0) {
                return Err(invalid("delay_ms", "must be >= 0"));
            }
            if !(l.jitter_ms.is_finite() && l.jitter_ms >= 0.0) {
                return Err(invalid("jitter_ms", "must be >= 0"));
            }
            if !(0.0..=1.0).contains(&l.loss) {
                return Err(invalid("loss", "must be in [0, 1]"));
            }
            for q in [&l.queue, &l.reverse_queue].into_iter().flatten() {
                q.validate().map_err(|e| Error::Scenario(e.to_string()))?;
            }
            link_names.push(format!("{}-{}", l.from, l.to));
            if l.duplex {
                link_names.push(format!("{}-{}", l.to, l.from));
            }
        }
        let mut flow_names = Vec::new();
        for f in &self.flows {
            if flow_names.contains(&f.name()) || f.name().contains('/') {
                return Err(invalid(
                    "flow",
                    &format!("duplicate or bad name {:?}", f.name()),
                ));
            }
            flow_names.push(f.name());
            match f {
                Flow::Layered {
                    protocol,
                    from,
                    layers,
                    packet_size,
                    bunch,
                    adapt_interval_s,
                    receivers,
                    ..
                } => {
                    node(from)?;
                    layers.rates()?;
                    if *packet_size == 0 || *packet_size > 65_535 || *bunch == 0 {
                        return Err(invalid("layered", "packet_size 1..65535, bunch >= 1"));
                    }
                    if !adapt_interval_s.is_finite() || *adapt_interval_s <= 0.0 {
                        return Err(invalid("adapt_interval_s", "must be positive"));
                    }
                    let _ = protocol;
                    let mut rn = Vec::new();
                    for r in receivers {
                        node(&r.at)?;
                        if rn.contains(&&r.name) {
                            return Err(invalid("receiver", "duplicate name"));
                        }
                        rn.push(&r.name);
                    }
                }
                Flow::Tfmcc {
                    from,
                    packet_size,
                    receivers,
                    ..
                } => {
                    node(from)?;
                    if *packet_size == 0 || *packet_size > 65_535 {
                        return Err(invalid("tfmcc", "packet_size 1..65535"));
                    }
                    let mut rn = Vec::new();
                    for r in receivers {
                        node(&r.at)?;
                        if r.protocol.is_some() {
                            return Err(invalid("tfmcc", "receivers take no protocol"));
                        }
                        if rn.contains(&&r.name) || r.name == "sender" {
                            return Err(invalid("receiver", "duplicate name or 'sender'"));
                        }
                        rn.push(&r.name);
                    }
                }
                Flow::Aer {
                    from,
                    protocol,
                    packet_size,
                    repair_servers,
                    receivers,
                    ..
                } => {
                    node(from)?;
                    for n in repair_servers {
                        node(n)?;
                    }
                    if !matches!(protocol.as_str(), "aer-nca" | "pgmcc") {
                        return Err(invalid("aer", "protocol aer-nca or pgmcc"));
                    }
                    if *packet_size == 0 || *packet_size > 65_535 || receivers.is_empty() {
                        return Err(invalid("aer", "packet_size 1..65535, receivers"));
                    }
                    let mut rn = Vec::new();
                    for r in receivers {
                        node(&r.at)?;
                        if rn.contains(&&r.name) {
                            return Err(invalid("receiver", "duplicate name"));
                        }
                        rn.push(&r.name);
                    }
                }
                Flow::Tfrc {
                    from,
                    to,
                    packet_size,
                    periodic_loss,
                    ..
                } => {
                    node(from)?;
                    node(to)?;
                    if *packet_size == 0 {
                        return Err(invalid("packet_size", "must be positive"));
                    }
                    if periodic_loss.windows(2).any(|w| w[1].0 < w[0].0) {
                        return Err(invalid("periodic_loss", "times must not decrease"));
                    }
                }
                Flow::Web {
                    servers,
                    clients,
                    virtual_servers,
                    virtual_clients,
                    sessions,
                    mean_session_gap_s,
                    mean_think_s,
                    mean_object_packets,
                    shape,
                    packet_size,
                    ..
                } => {
                    for n in servers.iter().chain(clients) {
                        node(n)?;
                    }
                    let ok = !servers.is_empty()
                        && !clients.is_empty()
                        && *virtual_servers > 0
                        && *virtual_clients > 0
                        && u64::from(*virtual_servers) * u64::from(*virtual_clients) < 1 << 24
                        && *sessions > 0
                        && *mean_session_gap_s > 0.0
                        && *mean_think_s > 0.0
                        && *mean_object_packets > 0.0
                        && *shape > 1.0
                        && *packet_size > 0;
                    if !ok {
                        return Err(invalid(
                            "web",
                            "server and client nodes, positive counts and means, shape > 1, \
                             virtual_servers x virtual_clients < 2^24",
                        ));
                    }
                }
                Flow::TfrcPcc {
                    from,
                    to,
                    packet_size,
                    pcc,
                    ..
                } => {
                    node(from)?;
                    node(to)?;
                    if *packet_size == 0 || *packet_size > 65_535 {
                        return Err(invalid("tfrc-pcc", "packet_size 1..65535"));
                    }
                    if let Some(p) = pcc {
                        let pos = |x: f64| x.is_finite() && x > 0.0;
                        if !pos(p.rate_kbps) || !pos(p.t_s) || !pos(p.protected_s) || p.ali_n == 0 {
                            return Err(invalid(
                                "pcc",
                                "rate_kbps, t_s, protected_s, ali_n positive",
                            ));
                        }
                    }
                }
                Flow::Tcp {
                    from,
                    to,
                    variant,
                    packet_size,
                    ..
                } => {
                    node(from)?;
                    node(to)?;
                    if !matches!(
                        variant.as_str(),
                        "reno" | "newreno" | "sack" | "acc-reno" | "cubic" | "bbr"
                    ) {
                        return Err(invalid(
                            "variant",
                            "reno, newreno, sack, acc-reno, cubic or bbr",
                        ));
                    }
                    if *packet_size == 0 {
                        return Err(invalid("packet_size", "must be positive"));
                    }
                }
                Flow::Cbr {
                    from,
                    to,
                    rate_kbps,
                    packet_size,
                    ..
                }
                | Flow::Onoff {
                    from,
                    to,
                    rate_kbps,
                    packet_size,
                    ..
                } => {
                    node(from)?;
                    node(to)?;
                    if !rate_kbps.is_finite() || *rate_kbps < 0.0 || *packet_size == 0 {
                        return Err(invalid("rate_kbps", "must be >= 0, packet_size > 0"));
                    }
                    if let Flow::Onoff {
                        mean_on_s,
                        mean_off_s,
                        shape,
                        ..
                    } = f
                    {
                        if !(*mean_on_s > 0.0 && *mean_off_s > 0.0 && *shape > 1.0) {
                            return Err(invalid("onoff", "means > 0, shape > 1"));
                        }
                    }
                }
            }
        }
        for s in &self.schedule {
            match (&s.link, &s.flow) {
                (Some(l), None) => {
                    if !link_names.contains(l) {
                        return Err(invalid("schedule", &format!("unknown link {l:?}")));
                    }
                }
                (None, Some(f)) => {
                    if !self.flows.iter().any(|x| {
                        x.name() == f && matches!(x, Flow::Cbr { .. } | Flow::Onoff { .. })
                    }) {
                        return Err(invalid("schedule", &format!("{f:?} is no CBR/on-off flow")));
                    }
                }
                _ => return Err(invalid("schedule", "give exactly one of link, flow")),
            }
        }
        for m in &self.measurements {
            if !crate::report::METRICS.contains(&m.metric.as_str()) {
                return Err(invalid("metric", &format!("unknown metric {:?}", m.metric)));
            }
            self.expand(&m.of)?;
            self.expand(&m.versus)?;
            if m.metric.starts_with("mean_queue_")
                && m.metric != "mean_queue_packets"
                && m.windows.len() < 2
            {
                return Err(invalid(&m.metric, "needs at least two windows"));
            }
            if m.metric == "tfmcc_time_to_clr_rise"
                && (m.windows.len() < 2 || m.windows.len() != self.expand(&m.of)?.len())
            {
                return Err(invalid(
                    &m.metric,
                    "needs one window per receiver, at least two",
                ));
            }
            if matches!(
                m.metric.as_str(),
                "tcp_friendliness" | "cov_ratio" | "an_share" | "rate_share"
            ) && m.versus.is_empty()
            {
                return Err(invalid(&m.metric, "needs versus"));
            }
            if m.metric == "efficiency" && m.available_kbps.is_none() {
                return Err(invalid("efficiency", "needs available_kbps"));
            }
        }
        Ok(())
    }

    /// Controller names the scenario uses that neither the protocol crate's factory nor the
    /// simulator's test controllers know (so the scenario cannot run yet).
    pub fn missing_protocols(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for f in &self.flows {
            if let Flow::Layered {
                protocol,
                receivers,
                ..
            } = f
            {
                let names = std::iter::once(protocol)
                    .chain(receivers.iter().filter_map(|r| r.protocol.as_ref()));
                for p in names {
                    if make_controller(p).is_err() && !v.contains(p) {
                        v.push(p.clone());
                    }
                }
            }
        }
        v
    }

    /// Builds the simulation for `seed`.
    pub fn build(&self, seed: u64) -> Result<Sim, Error> {
        if let Some(p) = self.missing_protocols().first() {
            return Err(make_controller(p)
                .err()
                .unwrap_or(Error::Scenario(p.clone())));
        }
        let nodes = self.node_index();
        // ALMA sessions make every interface active (agents::alma, the thesis' assumption).
        let alma_flows: Vec<Option<f64>> = self
            .flows
            .iter()
            .map(|f| match f {
                Flow::Layered { protocol, .. } => crate::agents::alma::budget_scale(protocol),
                _ => None,
            })
            .collect();
        // Their cumulative layer rates (bit/s): an active interface never forwards layers its
        // link cannot carry (agents::alma::AlmaQueue::with_capacity).
        let alma_cum_bps: Vec<Option<Vec<f64>>> = self
            .flows
            .iter()
            .zip(&alma_flows)
            .map(|(f, k)| match (f, k) {
                (Flow::Layered { layers, .. }, Some(_)) => layers.rates().ok().map(|r| {
                    r.iter()
                        .scan(0.0, |acc, x| {
                            *acc += x * 1000.0;
                            Some(*acc)
                        })
                        .collect()
                }),
                _ => None,
            })
            .collect();
        let mut specs = Vec::new();
        // Probed link directions: (link index, node, monitor name).
        let mut probes = Vec::new();
        // Links (from → to direction) with an ACC active router.
        let mut acc_links = Vec::new();
        for l in &self.topology.links {
            if l.acc {
                acc_links.push(specs.len());
            }
            if l.monitor_queue {
                probes.push((
                    specs.len(),
                    nodes[l.from.as_str()],
                    format!("queue:{}-{}", l.from, l.to),
                ));
            }
            let (a, b) = (nodes[l.from.as_str()], nodes[l.to.as_str()]);
            let rate = (l.rate_kbps * 1000.0).round() as u64;
            let dirs: &[(usize, usize, &Option<QdiscConfig>, &str, &str)] = if l.duplex {
                &[
                    (a, b, &l.queue, &l.from, &l.to),
                    (b, a, &l.reverse_queue, &l.to, &l.from),
                ]
            } else {
                &[(a, b, &l.queue, &l.from, &l.to)]
            };
            for (i, &(f, t, q, fname, tname)) in dirs.iter().enumerate() {
                let q = q.clone().or_else(|| l.queue.clone()).unwrap_or_default();
                let queue = netmodel::build_seeded(&q, rate, seed ^ (0x5100 + specs.len() as u64))
                    .map_err(|e| Error::Scenario(e.to_string()))?;
                let queue = if alma_flows.iter().any(Option::is_some) {
                    Box::new(
                        crate::agents::alma::AlmaQueue::new(
                            queue,
                            crate::agents::alma::buffer_packets(&q, rate),
                            alma_flows.clone(),
                            crate::agents::alma::NodeConfig::default(),
                        )
                        .with_capacity(rate as f64, alma_cum_bps.clone()),
                    )
                } else {
                    queue
                };
                let _ = i;
                specs.push(LinkSpec {
                    name: format!("{fname}-{tname}"),
                    from: f,
                    to: t,
                    rate_bps: rate,
                    delay: Time::from_secs_f64(l.delay_ms / 1000.0),
                    loss: l.loss,
                    jitter: Time::from_secs_f64(l.jitter_ms / 1000.0),
                    queue,
                });
            }
        }
        let mut sim = Sim::new(self.topology.nodes.len(), specs, seed);
        if !acc_links.is_empty() {
            sim.net.acc = vec![None; sim.net.links.len()];
            for l in acc_links {
                sim.net.acc[l] = Some(crate::agents::acc::AccRouter::new());
            }
        }
        let mc = &self.topology.multicast;
        let join = Time::from_secs_f64(mc.join_latency_ms / 1000.0);
        sim.net.multicast = MulticastTiming {
            join_latency: join,
            leave_latency: if mc.fast_leave {
                join
            } else {
                Time::from_secs_f64(mc.leave_latency_ms / 1000.0)
            },
        };
        sim.net.monitors.interval = self.interval_s;
        sim.net.flow_drops = vec![0; self.flows.len()];
        sim.net.flow_sent = vec![0; self.flows.len()];
        sim.net.flow_retx = vec![0; self.flows.len()];
        if self.flows.iter().any(|f| matches!(f, Flow::Aer { .. })) {
            // Per-link shares (AN bandwidth usage, trace-style loss ratio: agents::aer).
            for l in &mut sim.net.links {
                l.flow_sent = vec![0; self.flows.len()];
            }
        }
        let mut rng = Rng::derive(seed, 0x5ce7);
        let at = |s: f64| Time::from_secs_f64(s);
        for (fi, f) in self.flows.iter().enumerate() {
            let flow = fi as u32;
            let mut start_of =
                |s: f64, j: f64| at(s + if j > 0.0 { rng.uniform(0.0, j) } else { 0.0 });
            match f {
                Flow::Layered {
                    name,
                    protocol,
                    from,
                    layers,
                    packet_size,
                    bunch,
                    adapt_interval_s,
                    start_s,
                    start_jitter_s,
                    stop_s,
                    burst_jitter,
                    receivers,
                } => {
                    let src = nodes[from.as_str()];
                    let rates = layers.rates()?;
                    let info = SessionInfo {
                        session_id: fi as u32 + 1,
                        announce_seq: 0,
                        sender: Ipv4Addr::new(10, 0, 0, (fi % 250) as u8 + 1),
                        layers: rates
                            .iter()
                            .enumerate()
                            .map(|(k, r)| LayerInfo {
                                rate_bps: (r * 1000.0).round() as u64,
                                group: Ipv4Addr::new(239, 1, fi as u8, k as u8),
                                port: 5000 + k as u16,
                            })
                            .collect(),
                        packet_size: (*packet_size).min(65_535) as u16,
                        bunch_len: *bunch,
                        adapt_interval: Duration::from_secs_f64(*adapt_interval_s),
                        announce_interval: Duration::from_secs_f64(*adapt_interval_s),
                        tracks: Vec::new(),
                        feedback_port: None,
                    };
                    // RLC, FLID-DL and WEBRC need their own sender behaviour (agents::layered).
                    let layering = Layering::for_protocol(protocol, &info);
                    let groups: Vec<usize> = (0..layering.groups(rates.len()))
                        .map(|_| sim.net.add_group(src))
                        .collect();
                    // No link rate for the schedule: the simulated access link serialises what the
                    // tree actually forwards (pruned layers never occupy it).
                    let link_bps = 0.0;
                    let mut sender =
                        LayeredSender::new(src, flow, groups.clone(), info.clone(), link_bps)?
                            .with_layering(layering.clone())?;
                    if *burst_jitter != 0.0 {
                        // Its own stream: files without jitter draw exactly as before.
                        sender = sender.with_burst_jitter(
                            *burst_jitter,
                            Rng::derive(seed, 0xb_0000 + fi as u64),
                        )?;
                    }
                    let s_id = sim.add_agent(src, Box::new(sender));
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
                    let mut ladder = vec![0.0];
                    for r in &rates {
                        ladder.push(ladder.last().copied().unwrap_or(0.0) + r);
                    }
                    for (r, rname) in receivers
                        .iter()
                        .flat_map(|r| r.names().into_iter().map(move |n| (r, n)))
                    {
                        let proto = r.protocol.as_deref().unwrap_or(protocol);
                        let ctl = make_controller(proto)?;
                        let mon = sim.net.monitors.add(
                            format!("{name}/{rname}"),
                            name.clone(),
                            MonKind::Layered,
                            ladder.clone(),
                        );
                        let rn = nodes[r.at.as_str()];
                        let rcv =
                            LayeredReceiver::new(rn, ctl, info.clone(), groups.clone(), mon, t0)
                                .with_layering(layering.clone())
                                .with_delivered_level(
                                    crate::agents::alma::budget_scale(protocol).is_some(),
                                );
                        let id = sim.add_agent(rn, Box::new(rcv));
                        let t = start_of(r.start_s, r.start_jitter_s).max(t0);
                        sim.net.schedule_command(t, id, Command::Start);
                        if let Some(t) = r.stop_s {
                            sim.net.schedule_command(at(t), id, Command::Stop);
                        }
                    }
                }
                Flow::Tfmcc {
                    name,
                    from,
                    packet_size,
                    start_s,
                    start_jitter_s,
                    stop_s,
                    receivers,
                } => {
                    let src = nodes[from.as_str()];
                    let g = sim.net.add_group(src);
                    let cfg = congestion::tfmcc::TfmccConfig {
                        packet_size: *packet_size,
                        seed: seed ^ (0x7f3c + fi as u64),
                        ..Default::default()
                    };
                    let smon = sim.net.monitors.add(
                        format!("{name}/sender"),
                        name.clone(),
                        MonKind::Tfmcc,
                        Vec::new(),
                    );
                    let s_id = sim.agents.len();
                    let snd = TfmccSenderAgent::new(src, flow, g, cfg, smon);
                    sim.add_agent(src, Box::new(snd));
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    sim.net.monitors.started(smon, t0);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
                    let info = SessionInfo {
                        packet_size: (*packet_size).min(65_535) as u16,
                        ..SessionInfo::equal_layers(1, 1, Ipv4Addr::new(239, 2, fi as u8, 0), 6000)
                    };
                    let (cfg, info) = (std::sync::Arc::new(cfg), std::sync::Arc::new(info));
                    let mut rid = 0u32;
                    for (r, rname) in receivers
                        .iter()
                        .flat_map(|r| r.names().into_iter().map(move |n| (r, n)))
                    {
                        rid += 1;
                        let mon = sim.net.monitors.add(
                            format!("{name}/{rname}"),
                            name.clone(),
                            MonKind::Tfmcc,
                            vec![0.0, 0.0],
                        );
                        sim.net.monitors.list[mon].rid = Some(rid);
                        let rn = nodes[r.at.as_str()];
                        let agent = TfmccReceiverAgent::new(
                            rn,
                            cfg.clone(),
                            rid,
                            info.clone(),
                            g,
                            (src, s_id),
                            flow,
                            mon,
                        )
                        .crash_on_stop(r.crash);
                        let id = sim.add_agent(rn, Box::new(agent));
                        let t = start_of(r.start_s, r.start_jitter_s).max(t0);
                        sim.net.schedule_command(t, id, Command::Start);
                        if let Some(t) = r.stop_s {
                            sim.net.schedule_command(at(t), id, Command::Stop);
                        }
                    }
                }
                Flow::Aer {
                    name,
                    from,
                    protocol,
                    packet_size,
                    repair_servers,
                    start_s,
                    start_jitter_s,
                    stop_s,
                    receivers,
                } => {
                    let t0 = start_of(*start_s, *start_jitter_s);
                    let mut rcv = Vec::new();
                    for (r, rname) in receivers
                        .iter()
                        .flat_map(|r| r.names().into_iter().map(move |n| (r, n)))
                    {
                        rcv.push((
                            rname,
                            nodes[r.at.as_str()],
                            start_of(r.start_s, r.start_jitter_s),
                            r.stop_s.map(at),
                        ));
                    }
                    let spec = crate::agents::aer::SessionSpec {
                        name,
                        flow,
                        source: nodes[from.as_str()],
                        repair_servers: repair_servers.iter().map(|n| nodes[n.as_str()]).collect(),
                        receivers: rcv,
                        start: t0,
                        stop: stop_s.map(at),
                        cfg: crate::agents::aer::AerConfig {
                            packet_size: *packet_size,
                            ..Default::default()
                        },
                        seed,
                    };
                    if protocol == "pgmcc" {
                        crate::agents::pgmcc::install(&mut sim, &spec);
                    } else {
                        crate::agents::aer::install(&mut sim, &spec);
                    }
                }
                Flow::Tfrc {
                    name,
                    from,
                    to,
                    packet_size,
                    periodic_loss,
                    discounting,
                    start_s,
                    start_jitter_s,
                    stop_s,
                } => {
                    let (a, b) = (nodes[from.as_str()], nodes[to.as_str()]);
                    let mon =
                        sim.net
                            .monitors
                            .add(name.clone(), name.clone(), MonKind::Tfrc, Vec::new());
                    let s_id = sim.agents.len();
                    let r_id = s_id + 1;
                    let snd = TfrcSenderAgent::new(
                        a,
                        Dest::Agent(b, r_id),
                        flow,
                        *packet_size,
                        TfrcSenderOptions {
                            periodic_loss: periodic_loss.clone(),
                            log: Some(mon),
                            ..TfrcSenderOptions::default()
                        },
                    );
                    let s_got = sim.add_agent(a, Box::new(snd));
                    let mut cfg = baselines::tfrc::TfrcReceiverConfig::default();
                    cfg.ali.discounting = *discounting;
                    let r_got = sim.add_agent(
                        b,
                        Box::new(TfrcReceiverAgent::new(b, (a, s_id), flow, mon, cfg)),
                    );
                    debug_assert_eq!((s_got, r_got), (s_id, r_id));
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, r_id, Command::Start);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
                }
                Flow::Web {
                    name,
                    servers,
                    clients,
                    virtual_servers,
                    virtual_clients,
                    sessions,
                    pages,
                    mean_session_gap_s,
                    mean_think_s,
                    mean_object_packets,
                    shape,
                    packet_size,
                    max_cwnd,
                    start_s,
                    stop_s,
                } => {
                    let mon =
                        sim.net
                            .monitors
                            .add(name.clone(), name.clone(), MonKind::Tcp, Vec::new());
                    let cfg = crate::agents::web::WebConfig {
                        server_nodes: servers.iter().map(|n| nodes[n.as_str()]).collect(),
                        client_nodes: clients.iter().map(|n| nodes[n.as_str()]).collect(),
                        servers: *virtual_servers,
                        clients: *virtual_clients,
                        sessions: *sessions,
                        pages: *pages,
                        mean_session_gap_s: *mean_session_gap_s,
                        mean_think_s: *mean_think_s,
                        mean_object_packets: *mean_object_packets,
                        shape: *shape,
                        packet_size: *packet_size,
                        max_cwnd: *max_cwnd,
                        // Above every scenario flow index; one block of 2^24 ids per flow.
                        flow_base: 0x4000_0000u32.wrapping_add(flow << 24),
                    };
                    let node0 = cfg.server_nodes[0];
                    let agent = crate::agents::web::WebBackground::new(
                        cfg,
                        mon,
                        Rng::derive(seed, 0x5000 + fi as u64),
                    );
                    let id = sim.add_agent(node0, Box::new(agent));
                    sim.net.schedule_command(at(*start_s), id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), id, Command::Stop);
                    }
                }
                Flow::Tcp {
                    name,
                    from,
                    to,
                    variant,
                    packet_size,
                    max_cwnd,
                    header_bytes,
                    bug_fix,
                    ack_every_segment,
                    start_s,
                    start_jitter_s,
                    stop_s,
                } => {
                    let (a, b) = (nodes[from.as_str()], nodes[to.as_str()]);
                    let mon =
                        sim.net
                            .monitors
                            .add(name.clone(), name.clone(), MonKind::Tcp, Vec::new());
                    let sink_id = sim.agents.len() + 1;
                    if matches!(variant.as_str(), "cubic" | "bbr") {
                        let cc = if variant == "bbr" {
                            LinuxCc::bbr(Rng::derive(seed, 0xbb00 + fi as u64).next_u64())
                        } else {
                            LinuxCc::cubic(true)
                        };
                        let snd =
                            LinuxTcpSender::new(a, Dest::Agent(b, sink_id), flow, *packet_size, cc);
                        let s_id = sim.add_agent(a, Box::new(snd));
                        let sink = TcpSink::new(b, mon)
                            .with_header(LINUX_HEADER)
                            .with_sack(true)
                            .with_delayed_ack(!ack_every_segment);
                        let k_id = sim.add_agent(b, Box::new(sink));
                        debug_assert_eq!(k_id, sink_id);
                        let t0 = start_of(*start_s, *start_jitter_s);
                        sim.net.schedule_command(t0, k_id, Command::Start);
                        sim.net.schedule_command(t0, s_id, Command::Start);
                        if let Some(t) = stop_s {
                            sim.net.schedule_command(at(*t), s_id, Command::Stop);
                        }
                        continue;
                    }
                    let v = match variant.as_str() {
                        "newreno" => Variant::NewReno,
                        "sack" => Variant::Sack,
                        _ => Variant::Reno,
                    };
                    let snd = TcpSender::new(
                        a,
                        Dest::Agent(b, sink_id),
                        flow,
                        *packet_size,
                        v,
                        *max_cwnd,
                    )
                    .with_header(*header_bytes)
                    .with_bug_fix(*bug_fix);
                    // ACC TCP (agents::acc): a Reno sender whose segments carry its state.
                    let snd = if variant == "acc-reno" {
                        snd.with_acc()
                    } else {
                        snd
                    };
                    let s_id = sim.add_agent(a, Box::new(snd));
                    let k_id = sim.add_agent(
                        b,
                        Box::new(
                            TcpSink::new(b, mon)
                                .with_header(*header_bytes)
                                .with_sack(v == Variant::Sack),
                        ),
                    );
                    debug_assert_eq!(k_id, sink_id);
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, k_id, Command::Start);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
                }
                Flow::TfrcPcc {
                    name,
                    from,
                    to,
                    packet_size,
                    pcc,
                    start_s,
                    start_jitter_s,
                    stop_s,
                } => {
                    let (a, b) = (nodes[from.as_str()], nodes[to.as_str()]);
                    let mon = sim.net.monitors.add(
                        format!("{name}/receiver"),
                        name.clone(),
                        MonKind::Cbr,
                        Vec::new(),
                    );
                    let smon = sim.net.monitors.add(
                        format!("{name}/sender"),
                        name.clone(),
                        MonKind::Cbr,
                        Vec::new(),
                    );
                    let s_id = sim.agents.len();
                    let pcc_def = pcc;
                    let pcc = pcc.as_ref().map(|p| {
                        (
                            p.rate_kbps * 1000.0 / 8.0,
                            baselines::pcc::PccConfig {
                                t: Duration::from_secs_f64(p.t_s),
                                t_protected: Duration::from_secs_f64(p.protected_s),
                                seed: Rng::derive(seed, 0x9cc0 + fi as u64).next_u64(),
                                ..baselines::pcc::PccConfig::default()
                            },
                        )
                    });
                    let snd = TfrcSenderAgent::new(
                        a,
                        Dest::Agent(b, s_id + 1),
                        flow,
                        *packet_size,
                        TfrcSenderOptions {
                            pcc,
                            sent: Some(smon),
                            ..TfrcSenderOptions::default()
                        },
                    );
                    let id = sim.add_agent(a, Box::new(snd));
                    debug_assert_eq!(id, s_id);
                    let mut cfg = baselines::tfrc::TfrcReceiverConfig::default();
                    cfg.ali.n = pcc_def.as_ref().map_or(8, |p| p.ali_n).max(1);
                    let rcv = TfrcReceiverAgent::new(b, (a, s_id), flow, mon, cfg);
                    let k_id = sim.add_agent(b, Box::new(rcv));
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, k_id, Command::Start);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
                }
                Flow::Cbr {
                    name,
                    from,
                    to,
                    rate_kbps,
                    packet_size,
                    start_s,
                    start_jitter_s,
                    stop_s,
                }
                | Flow::Onoff {
                    name,
                    from,
                    to,
                    rate_kbps,
                    packet_size,
                    start_s,
                    start_jitter_s,
                    stop_s,
                    ..
                } => {
                    let onoff = match f {
                        Flow::Onoff {
                            mean_on_s,
                            mean_off_s,
                            shape,
                            ..
                        } => Some(OnOff {
                            mean_on_s: *mean_on_s,
                            mean_off_s: *mean_off_s,
                            shape: *shape,
                        }),
                        _ => None,
                    };
                    let kind = if onoff.is_some() {
                        MonKind::Onoff
                    } else {
                        MonKind::Cbr
                    };
                    let (a, b) = (nodes[from.as_str()], nodes[to.as_str()]);
                    let mon = sim
                        .net
                        .monitors
                        .add(name.clone(), name.clone(), kind, Vec::new());
                    let sink_id = sim.agents.len() + 1;
                    let src = DatagramSource::new(
                        a,
                        Dest::Agent(b, sink_id),
                        flow,
                        *packet_size,
                        (rate_kbps * 1000.0).round() as u64,
                        onoff,
                        Rng::derive(seed, 0x3000 + fi as u64),
                    );
                    let s_id = sim.add_agent(a, Box::new(src));
                    let k_id = sim.add_agent(b, Box::new(DatagramSink::new(mon)));
                    debug_assert_eq!(k_id, sink_id);
                    let t0 = start_of(*start_s, *start_jitter_s);
                    sim.net.schedule_command(t0, k_id, Command::Start);
                    sim.net.schedule_command(t0, s_id, Command::Start);
                    if let Some(t) = stop_s {
                        sim.net.schedule_command(at(*t), s_id, Command::Stop);
                    }
                }
            }
        }
        // Schedule: flows' sources are the first agent of each flow in build order.
        let count =
            |rs: &Vec<ReceiverDef>| rs.iter().map(|r| r.count.max(1) as usize).sum::<usize>();
        let mut first_agent = Vec::new();
        {
            let mut next = 0usize;
            for f in &self.flows {
                first_agent.push(next);
                next += match f {
                    Flow::Layered { receivers, .. } | Flow::Tfmcc { receivers, .. } => {
                        1 + count(receivers)
                    }
                    Flow::Web { .. } => 1,
                    Flow::Aer {
                        receivers,
                        repair_servers,
                        protocol,
                        ..
                    } => {
                        1 + count(receivers)
                            + if protocol == "pgmcc" {
                                0
                            } else {
                                repair_servers.len()
                            }
                    }
                    _ => 2,
                };
            }
        }
        for s in &self.schedule {
            let t = at(s.at_s);
            if let Some(l) = &s.link {
                let id = sim
                    .net
                    .links
                    .iter()
                    .position(|x| &x.name == l)
                    .ok_or_else(|| invalid("schedule", "unknown link"))?;
                sim.net.schedule_link_change(
                    t,
                    id,
                    LinkChange {
                        rate_bps: s.rate_kbps.map(|r| (r * 1000.0).round() as u64),
                        delay: s.delay_ms.map(|d| Time::from_secs_f64(d / 1000.0)),
                        loss: s.loss,
                    },
                );
            } else if let (Some(f), Some(r)) = (&s.flow, s.rate_kbps) {
                let fi = self
                    .flows
                    .iter()
                    .position(|x| x.name() == f)
                    .ok_or_else(|| invalid("schedule", "unknown flow"))?;
                sim.net.schedule_command(
                    t,
                    first_agent[fi],
                    Command::SetRate((r * 1000.0).round() as u64),
                );
            }
        }
        for (link, node, name) in probes {
            let mon = sim
                .net
                .monitors
                .add(name.clone(), name, MonKind::Queue, Vec::new());
            let id = sim.add_agent(
                node,
                Box::new(QueueProbe::new(link, mon, Time::from_millis(10))),
            );
            sim.net.schedule_command(Time::ZERO, id, Command::Start);
        }
        Ok(sim)
    }
}

/// The controller called `name`: the protocol crate's factory first, then the simulator's
/// own test controllers.
pub fn make_controller(name: &str) -> Result<Box<dyn congestion::LayeredController>, Error> {
    match baselines::controller_by_name(name) {
        Ok(c) => Ok(c),
        Err(e) => local_controller(name).ok_or_else(|| Error::Scenario(e.to_string())),
    }
}
