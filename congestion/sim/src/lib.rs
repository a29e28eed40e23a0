//! Discrete-event network simulator in virtual time, driving the `congestion` crate's
//! controllers unchanged, and the catalogue of published experiments.
//!
//! Same scenario + same seed → identical output, bit for bit: all randomness comes from
//! [`qdisc::rng::Rng`] streams derived from the seed, events at the same instant run in the
//! order they were scheduled, and nothing reads a clock. See `docs/simulator.md`.

pub mod agents;
pub mod catalogue;
pub mod engine;
pub mod metrics;
pub mod metrics_dlm;
pub mod metrics_plm;
pub mod metrics_tfmcc;
pub mod metrics_tfrc;
pub mod output;
pub mod report;
pub mod scenario;
pub mod suppression;

use congestion::Time;

/// The crate's errors.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The YAML did not parse into a scenario.
    #[error("scenario parse error: {0}")]
    Parse(String),
    /// The scenario parsed but is inconsistent.
    #[error("invalid scenario: {0}")]
    Scenario(String),
    /// Reading or writing files.
    #[error("i/o: {0}")]
    Io(String),
}

/// Runs a scenario with one seed; returns the finished simulation and its summary.
pub fn run(sc: &scenario::Scenario, seed: u64) -> Result<(engine::Sim, report::RunSummary), Error> {
    let mut sim = sc.build(seed)?;
    sim.run_until(Time::from_secs_f64(sc.duration_s));
    let summary = report::summarise(sc, &sim)?;
    Ok((sim, summary))
}
