//! Discrete-event network simulator in virtual time, driving the `congestion` crate's
//! controllers unchanged, and the catalogue of published experiments.
//!
//! Same scenario + same seed → identical output, bit for bit: all randomness comes from
//! [`netmodel::rng::Rng`] streams derived from the seed, events at the same instant run in the
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

/// Environment variable that turns off [`reexec_with_huge_pages`].
pub const NO_HUGE_PAGES_ENV: &str = "LAYERCAST_SIM_NO_HUGE_PAGES";

/// Re-executes the current program with glibc's malloc asked to back its heap with
/// transparent huge pages (`GLIBC_TUNABLES=glibc.malloc.hugetlb=1`), unless that variable is
/// already set or [`NO_HUGE_PAGES_ENV`] is. Returns only if it did not re-execute (or the
/// exec failed, which is harmless: the run continues with normal pages).
///
/// Why: a TFMCC scale run walks 10,000 receivers per packet, each with its own ~1 KB agent and
/// receive-rate ring; that is ~20,000 4-KiB pages per packet, far more than the TLB holds,
/// so every receiver's prefetches and loads paid page walks. With 2-MiB pages the same run
/// took ~11% less CPU (10,000 × 40 s, measured side by side). The kernel's THP mode on these
/// machines is `madvise`, hence the malloc tunable (glibc ≥ 2.35; other libcs ignore it).
/// Memory placement cannot change results: nothing in the simulator depends on addresses.
pub fn reexec_with_huge_pages() {
    #[cfg(target_os = "linux")]
    {
        use std::os::unix::process::CommandExt;
        if std::env::var_os("GLIBC_TUNABLES").is_some()
            || std::env::var_os(NO_HUGE_PAGES_ENV).is_some()
        {
            return;
        }
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        let mut args = std::env::args_os();
        let arg0 = args.next().unwrap_or_else(|| exe.clone().into_os_string());
        // `exec` only returns on failure; then carry on without huge pages.
        let _ = std::process::Command::new(&exe)
            .arg0(arg0)
            .args(args)
            .env("GLIBC_TUNABLES", "glibc.malloc.hugetlb=1")
            .exec();
    }
}

/// Runs a scenario with one seed; returns the finished simulation and its summary.
pub fn run(sc: &scenario::Scenario, seed: u64) -> Result<(engine::Sim, report::RunSummary), Error> {
    let mut sim = sc.build(seed)?;
    sim.run_until(Time::from_secs_f64(sc.duration_s));
    let summary = report::summarise(sc, &sim)?;
    Ok((sim, summary))
}
