//! The PLM part of the full catalogue that the fast subset skips (`fast_seeds: 0`): the Top_5
//! web-background runs S9 and S9b (`plm.md` §7.8, 4500 s each) at their full `seeds`, recorded
//! for `docs/acceptance.md` as `plm/S9` and `plm/S9b`, plus the one S9 check that spans two
//! files: with C = 0.2 s and 100 kbit/s layers, PLM's mean is at least TCP_b's mean under the
//! same (light) background.
//!
//! Minutes of CPU on the shared machine, so it is `#[ignore]`d out of `cargo test`; run it with
//! `cargo test --release -p layercast-sim --test plm_full -- --ignored --nocapture`.
//! (S5 with M = 50 and 100 also has `fast_seeds: 0`; it runs in `layercast-sim catalogue`.)

use sim::catalogue::{run_scenario, scenario_files, table, Row};
use sim::scenario::Scenario;
use std::collections::BTreeMap;
use std::path::PathBuf;

const CMD: &str = "cargo test --release -p layercast-sim --test plm_full -- --ignored";

#[test]
#[ignore = "full PLM S9/S9b catalogue, minutes of CPU"]
fn plm_web_background_full_catalogue() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut all: Vec<Row> = Vec::new();
    for f in scenario_files(&dir).unwrap() {
        let sc = Scenario::load(&f).unwrap();
        if !(sc.name.starts_with("plm-s9-") || sc.name.starts_with("plm-s9b-")) {
            continue;
        }
        eprintln!("running {} ({} seeds)", sc.name, sc.seeds);
        all.extend(run_scenario(&sc, sc.seeds).unwrap());
    }
    eprintln!("{}", table(&all));
    let mean_of = |prefix: &str| {
        all.iter()
            .find(|r| r.id.starts_with(prefix))
            .map(|r| r.mean)
            .expect("row present")
    };
    let plm_02 = mean_of("plm/S9 C=0.2 PLM mean");
    let tcpb = mean_of("plm/S9b light TCP_b mean");
    let ratio = plm_02 / tcpb;
    eprintln!("S9 C = 0.2: PLM {plm_02:.1} / TCP_b {tcpb:.1} kbit/s = {ratio:.3} (band >= 1)");
    let mut by_check: BTreeMap<String, Vec<&Row>> = BTreeMap::new();
    for r in &all {
        let check = r.id.split_whitespace().next().unwrap_or("").to_string();
        by_check.entry(check).or_default().push(r);
    }
    for (check, rows) in &by_check {
        let mut value = rows
            .iter()
            .map(|r| {
                let verdict = match (r.min.is_some() || r.max.is_some(), r.pass) {
                    (false, _) => "",
                    (true, true) => " PASS",
                    (true, false) => " FAIL",
                };
                format!(
                    "{}: {:.4} ± {:.4}{verdict}",
                    r.id.trim_start_matches(check.as_str()).trim(),
                    r.mean,
                    r.ci95
                )
            })
            .collect::<Vec<_>>()
            .join("; ");
        let mut pass = rows
            .iter()
            .filter(|r| r.min.is_some() || r.max.is_some())
            .all(|r| r.pass);
        if check == "plm/S9" {
            value.push_str(&format!("; C=0.2 PLM / TCP_b (light) {ratio:.3} (>= 1)"));
            pass &= ratio >= 1.0;
        }
        let seeds = rows.first().map_or(0, |r| r.values.len());
        testkit::record(
            check,
            &format!("simulator, {seeds} seeds, mean ± 95% CI: {value}"),
            Some(pass),
            CMD,
        );
    }
}
