//! The `delay-trace` controller is DLM unchanged plus a per-epoch log: the same scenario run
//! with `delay` and with `delay-trace` must give the same level trace for every receiver, and
//! the trace run must log epochs whose fields the DS3/DS5/DS6 metrics read.

use sim::scenario::Scenario;
use std::path::PathBuf;

fn scenario_text() -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios/delay-ds3-ds6-exp1-trace.yaml");
    std::fs::read_to_string(p).unwrap()
}

#[test]
fn trace_wrapper_changes_no_decision() {
    let text = scenario_text();
    assert!(text.contains("protocol: delay-trace"));
    let traced = Scenario::from_yaml(&text).unwrap();
    let plain =
        Scenario::from_yaml(&text.replace("protocol: delay-trace", "protocol: delay")).unwrap();
    for seed in [1, 2] {
        let (a, _) = sim::run(&traced, seed).unwrap();
        let (b, _) = sim::run(&plain, seed).unwrap();
        let mut compared = 0;
        for (ma, mb) in a.net.monitors.list.iter().zip(&b.net.monitors.list) {
            assert_eq!(ma.name, mb.name);
            assert_eq!(ma.levels, mb.levels, "{} seed {seed}", ma.name);
            assert_eq!(ma.bytes, mb.bytes, "{} seed {seed}", ma.name);
            if !ma.levels.is_empty() {
                compared += 1;
                let epochs = ma.dlm_epochs(0.0, f64::INFINITY);
                assert!(epochs.len() > 100, "{}: {} epochs", ma.name, epochs.len());
                assert!(mb.dlm_epochs(0.0, f64::INFINITY).is_empty());
                // Every epoch has thresholds d1 < d2 < d3 and a zone 1..=3.
                assert!(epochs
                    .iter()
                    .all(|e| e.d[0] < e.d[1] && e.d[1] < e.d[2] && (1..=3).contains(&e.zone)));
                // The non-epoch decisions are the same as the plain controller's.
                let da: Vec<_> = ma
                    .decisions
                    .iter()
                    .filter(|d| d.reason != "epoch")
                    .map(|d| (d.at, d.from_layers, d.to_layers, d.reason))
                    .collect();
                let db: Vec<_> = mb
                    .decisions
                    .iter()
                    .map(|d| (d.at, d.from_layers, d.to_layers, d.reason))
                    .collect();
                assert_eq!(da, db);
            }
        }
        assert_eq!(compared, 2);
    }
}

#[test]
fn quantile_is_nearest_rank() {
    use sim::metrics_dlm::quantile;
    assert!(quantile(vec![], 0.5).is_nan());
    assert_eq!(quantile(vec![3.0, 1.0, 2.0], 0.5), 2.0);
    assert_eq!(quantile(vec![4.0, 1.0, 3.0, 2.0], 0.5), 2.0);
    let v: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(quantile(v.clone(), 0.95), 95.0);
    assert_eq!(quantile(v, 1.0), 100.0);
}
