//! Timed changes of links and flows during a run.

use serde::{Deserialize, Serialize};

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
