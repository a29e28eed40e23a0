//! `layercast-sim`: run a scenario, the catalogue, or print the report.
//!
//! ```text
//! layercast-sim run <scenario.yaml> [--seed N] [--out DIR]
//! layercast-sim catalogue [--fast] [--seeds N] [--dir scenarios] [--out FILE] [--no-montecarlo]
//! layercast-sim report [--in FILE]
//! ```

use sim::catalogue::{run_scenario, scenario_files, table, Row};
use sim::scenario::Scenario;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage:
  layercast-sim run <scenario.yaml> [--seed N] [--out DIR]
  layercast-sim catalogue [--fast] [--seeds N] [--dir DIR] [--out FILE] [--no-montecarlo]
  layercast-sim report [--in FILE]";

fn default_results() -> PathBuf {
    PathBuf::from("target/catalogue/results.json")
}

fn main() -> ExitCode {
    // Big receiver populations are TLB-bound: ask malloc for huge pages (see the function).
    sim::reexec_with_huge_pages();
    let args: Vec<String> = std::env::args().skip(1).collect();
    match real_main(&args) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("layercast-sim: {e}");
            ExitCode::from(2)
        }
    }
}

fn opt<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn real_main(args: &[String]) -> Result<ExitCode, String> {
    let Some(cmd) = args.first() else {
        return Err(USAGE.into());
    };
    match cmd.as_str() {
        "run" => {
            let path = args.get(1).ok_or(USAGE)?;
            let seed: u64 = opt(args, "--seed")
                .unwrap_or("1")
                .parse()
                .map_err(|_| "--seed needs a number")?;
            let sc = Scenario::load(path.as_ref()).map_err(|e| e.to_string())?;
            let out = opt(args, "--out").map(PathBuf::from).unwrap_or_else(|| {
                PathBuf::from(format!("target/sim-runs/{}-seed{seed}", sc.name))
            });
            let t0 = std::time::Instant::now();
            let (sim, summary) = sim::run(&sc, seed).map_err(|e| e.to_string())?;
            let wall = t0.elapsed().as_secs_f64();
            sim::output::write_run(&out, &sc, &sim, &summary).map_err(|e| e.to_string())?;
            eprintln!(
                "{}: {} events in {:.2} s ({:.2} M events/s); outputs in {}",
                sc.name,
                summary.events,
                wall,
                summary.events as f64 / wall / 1e6,
                out.display()
            );
            let mut ok = true;
            for m in &summary.measurements {
                println!(
                    "{:<5} {:<40} {:>12.4}  band {:?}..{:?}  published {}",
                    if m.pass { "PASS" } else { "FAIL" },
                    m.id,
                    m.value,
                    m.min,
                    m.max,
                    m.published
                );
                ok &= m.pass;
            }
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        "catalogue" => {
            let fast = args.iter().any(|a| a == "--fast");
            let seeds: Option<u32> = match opt(args, "--seeds") {
                Some(s) => Some(s.parse().map_err(|_| "--seeds needs a number")?),
                None => None,
            };
            let dir = PathBuf::from(opt(args, "--dir").unwrap_or("research/scenarios"));
            let out = opt(args, "--out")
                .map(PathBuf::from)
                .unwrap_or_else(default_results);
            let mut rows: Vec<Row> = Vec::new();
            for f in scenario_files(&dir).map_err(|e| e.to_string())? {
                let sc = Scenario::load(&f).map_err(|e| e.to_string())?;
                if sc.measurements.is_empty() {
                    continue;
                }
                let missing = sc.missing_protocols();
                if !missing.is_empty() {
                    let why = format!("needs controller {}", missing.join(", "));
                    eprintln!("catalogue: {}: not run, {why}", sc.name);
                    rows.extend(sim::catalogue::not_run_rows(&sc, &why));
                    continue;
                }
                let n = seeds.unwrap_or(if fast { sc.fast_seeds } else { sc.seeds });
                if n == 0 {
                    let why = "full catalogue only (fast_seeds: 0)";
                    eprintln!("catalogue: {}: not run, {why}", sc.name);
                    rows.extend(sim::catalogue::not_run_rows(&sc, why));
                    continue;
                }
                eprintln!("catalogue: {} × {n} seeds ...", sc.name);
                let t0 = std::time::Instant::now();
                let r = run_scenario(&sc, n).map_err(|e| e.to_string())?;
                eprintln!(
                    "catalogue: {} done in {:.1} s",
                    sc.name,
                    t0.elapsed().as_secs_f64()
                );
                rows.extend(r);
            }
            // The feedback-suppression analysis (S1-S7) is a Monte Carlo without a network:
            // no scenario file, same rows (`sim::suppression`), all runs even with --fast.
            if !args.iter().any(|a| a == "--no-montecarlo") {
                eprintln!("catalogue: feedback-suppression Monte Carlo (S1-S7) ...");
                let t0 = std::time::Instant::now();
                rows.extend(sim::suppression::catalogue_rows());
                eprintln!(
                    "catalogue: Monte Carlo done in {:.1} s",
                    t0.elapsed().as_secs_f64()
                );
            }
            if let Some(p) = out.parent() {
                std::fs::create_dir_all(p).map_err(|e| e.to_string())?;
            }
            let json = serde_json::to_string_pretty(&rows).map_err(|e| e.to_string())?;
            std::fs::write(&out, json).map_err(|e| format!("{}: {e}", out.display()))?;
            print!("{}", table(&rows));
            let failed = rows
                .iter()
                .filter(|r| (r.min.is_some() || r.max.is_some()) && !r.pass && !r.values.is_empty())
                .count();
            eprintln!(
                "catalogue: {} rows, {failed} failed; results in {}",
                rows.len(),
                out.display()
            );
            Ok(if failed == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        "report" => {
            let p = opt(args, "--in")
                .map(PathBuf::from)
                .unwrap_or_else(default_results);
            let text = std::fs::read_to_string(&p).map_err(|e| {
                format!("{}: {e} (run `layercast-sim catalogue` first)", p.display())
            })?;
            let rows: Vec<Row> = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            print!("{}", table(&rows));
            Ok(ExitCode::SUCCESS)
        }
        _ => Err(USAGE.into()),
    }
}
