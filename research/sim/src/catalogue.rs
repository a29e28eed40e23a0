//! The catalogue: every scenario in a folder, several seeds each, aggregated into one table
//! (experiment, published value, ours as mean ± 95% CI over seeds, verdict).
//!
//! Verdict: PASS when the mean over seeds lies in the measurement's band (the thesis reports
//! means over seeds; a band is never widened to make a verdict pass). The table also shows how
//! many single seeds were in the band.

use crate::metrics::mean_ci95;
use crate::scenario::Scenario;
use crate::Error;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// One row of the report.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Row {
    pub scenario: String,
    pub id: String,
    pub metric: String,
    pub published: String,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub values: Vec<f64>,
    /// Per-monitor means over seeds (per-monitor metrics): the verdict needs every one in band.
    #[serde(default)]
    pub per_monitor: Vec<(String, f64, f64)>,
    pub mean: f64,
    pub ci95: f64,
    pub seeds_in_band: usize,
    pub pass: bool,
    /// Why the row has no value (e.g. the controller has not landed), or a known issue.
    #[serde(default)]
    pub note: String,
}

/// Rows for a scenario that cannot run (a controller it names is missing).
pub fn not_run_rows(sc: &Scenario, why: &str) -> Vec<Row> {
    sc.measurements
        .iter()
        .map(|m| Row {
            scenario: sc.name.clone(),
            id: m.id.clone(),
            metric: m.metric.clone(),
            published: m.published.clone(),
            min: m.min,
            max: m.max,
            values: Vec::new(),
            per_monitor: Vec::new(),
            mean: f64::NAN,
            ci95: f64::NAN,
            seeds_in_band: 0,
            pass: false,
            note: why.to_string(),
        })
        .collect()
}

/// The scenario files of a folder, sorted by name.
pub fn scenario_files(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let rd = std::fs::read_dir(dir).map_err(|e| Error::Io(format!("{}: {e}", dir.display())))?;
    let mut v: Vec<PathBuf> = rd
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    v.sort();
    Ok(v)
}

/// Runs one scenario over `seeds` seeds (1..=seeds) and aggregates its measurements.
pub fn run_scenario(sc: &Scenario, seeds: u32) -> Result<Vec<Row>, Error> {
    let mut per_seed = Vec::new();
    for seed in 1..=u64::from(seeds) {
        let (_, s) = crate::run(sc, seed)?;
        per_seed.push(s);
    }
    let mut rows = Vec::new();
    for (i, m) in sc.measurements.iter().enumerate() {
        let values: Vec<f64> = per_seed.iter().map(|s| s.measurements[i].value).collect();
        let (mean, ci) = mean_ci95(&values);
        let inb =
            |v: f64| !v.is_nan() && m.min.is_none_or(|x| v >= x) && m.max.is_none_or(|x| v <= x);
        let n_mon = per_seed
            .first()
            .map_or(0, |s| s.measurements[i].values.len());
        let per_monitor: Vec<(String, f64, f64)> = (0..n_mon)
            .map(|j| {
                let v: Vec<f64> = per_seed
                    .iter()
                    .map(|s| s.measurements[i].values[j].1)
                    .collect();
                let (mm, cc) = mean_ci95(&v);
                (per_seed[0].measurements[i].values[j].0.clone(), mm, cc)
            })
            .collect();
        let pass = if per_monitor.is_empty() {
            inb(mean)
        } else {
            per_monitor.iter().all(|p| inb(p.1))
        };
        rows.push(Row {
            scenario: sc.name.clone(),
            id: m.id.clone(),
            metric: m.metric.clone(),
            published: m.published.clone(),
            min: m.min,
            max: m.max,
            seeds_in_band: per_seed.iter().filter(|s| s.measurements[i].pass).count(),
            pass,
            per_monitor,
            note: m.known_issue.clone().unwrap_or_default(),
            values,
            mean,
            ci95: ci,
        });
    }
    Ok(rows)
}

fn band(min: Option<f64>, max: Option<f64>) -> String {
    match (min, max) {
        (Some(a), Some(b)) => format!("[{a}, {b}]"),
        (Some(a), None) => format!(">= {a}"),
        (None, Some(b)) => format!("<= {b}"),
        (None, None) => "report".into(),
    }
}

fn num(v: f64) -> String {
    if v.is_infinite() {
        "never".into()
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.3}")
    }
}

/// The report table as markdown.
pub fn table(rows: &[Row]) -> String {
    let mut s = String::from(
        "| experiment | measurement | published | band | ours (mean ± 95% CI) | seeds in band | verdict |\n|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        if r.values.is_empty() {
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | — | — | NOT RUN ({}) |",
                r.scenario,
                r.id,
                r.published,
                band(r.min, r.max),
                r.note
            );
            continue;
        }
        let verdict = if r.min.is_none() && r.max.is_none() {
            "report"
        } else if r.pass {
            "PASS"
        } else {
            "FAIL"
        };
        let ours = if r.per_monitor.len() > 1 {
            r.per_monitor
                .iter()
                .map(|(n, m, c)| format!("{n}: {} ± {}", num(*m), num(*c)))
                .collect::<Vec<_>>()
                .join("; ")
        } else {
            format!("{} ± {}", num(r.mean), num(r.ci95))
        };
        let verdict = if r.note.is_empty() || r.pass {
            verdict.to_string()
        } else {
            format!("{verdict} (known: {})", r.note)
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} (n={}) | {}/{} | {} |",
            r.scenario,
            r.id,
            r.published,
            band(r.min, r.max),
            ours,
            r.values.len(),
            r.seeds_in_band,
            r.values.len(),
            verdict
        );
    }
    s
}
