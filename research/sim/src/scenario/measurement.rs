//! Measurements and their pass bands.

use serde::{Deserialize, Serialize};

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
