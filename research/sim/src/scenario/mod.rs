//! The scenario file (YAML), shared with the e2e testbed: topology, flows, schedule and
//! measurements with pass bands. Format: `docs/scenarios.md`; JSON Schema:
//! `research/scenarios/scenario.schema.json`.

mod build;
mod flow;
mod measurement;
mod schedule;
mod topology;
mod validate;

pub use build::make_controller;
pub use flow::{Flow, Ladder, PccDef, ReceiverDef};
pub use measurement::{Available, Measurement};
pub use schedule::ScheduleItem;
pub use topology::{LinkDef, MulticastDef, Topology};

use crate::Error;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

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

fn yes() -> bool {
    true
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
}
