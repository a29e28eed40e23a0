//! The Linux TCP agents (`agents::linux_tcp` with CUBIC or BBR v1) on the model-check scenarios
//! of issue 24 (`research/scenarios/tcp-model-*.yaml`: 10 Mbit/s, 300-ms drop-tail buffer, 40-ms RTT),
//! and CUBIC through FQ-CoDel. The bands are what the two algorithms are known to do on such a
//! path, and what the testbed's kernel flows did on the same files (docs/simulator.md, "Linux
//! TCP agents"): CUBIC fills the buffer, BBR keeps it nearly empty, two BBR flows share
//! equally, CoDel holds a responsive flow's queue near its 5-ms target.

use sim::scenario::Scenario;
use std::path::PathBuf;

fn scenario(file: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../scenarios")
        .join(file);
    std::fs::read_to_string(p).unwrap()
}

/// Runs `yaml` with seed 1 and returns the measurements' values by id prefix order.
fn run(yaml: &str) -> Vec<(String, f64)> {
    let sc = Scenario::from_yaml(yaml).unwrap();
    let (_, s) = sim::run(&sc, 1).unwrap();
    s.measurements
        .iter()
        .map(|m| (m.id.clone(), m.value))
        .collect()
}

fn get(v: &[(String, f64)], part: &str) -> f64 {
    v.iter()
        .find(|(id, _)| id.contains(part))
        .unwrap_or_else(|| panic!("no measurement {part}"))
        .1
}

#[test]
fn cubic_fills_a_deep_drop_tail_buffer() {
    let v = run(&scenario("tcp-model-cubic-1.yaml"));
    // Goodput: the whole link less 52 header bytes per 1500-byte packet (9653 kbit/s).
    assert!(get(&v, "throughput") > 9_400.0, "{v:?}");
    // W_max sits at the buffer's end; beta 0.7 keeps the queue above 200 ms (7.5 BDPs).
    let med = get(&v, "median");
    assert!((200.0..300.0).contains(&med), "median queue {med} ms");
    assert!(get(&v, "p95") > 280.0);
    let drops = get(&v, "drop ratio");
    assert!(drops > 0.0 && drops < 0.005, "drop ratio {drops}");
}

#[test]
fn bbr_keeps_the_buffer_nearly_empty() {
    let v = run(&scenario("tcp-model-bbr-1.yaml"));
    assert!(get(&v, "throughput") > 9_200.0, "{v:?}");
    assert!(get(&v, "p95") < 40.0, "{v:?}");
    assert_eq!(get(&v, "drop ratio"), 0.0);
}

#[test]
fn two_bbr_flows_share_equally_and_build_a_standing_queue() {
    let v = run(&scenario("tcp-model-bbr-2.yaml"));
    assert!(get(&v, "Jain") > 0.98, "{v:?}");
    // Two BBR v1 flows each keep 2 x their BDP estimate in flight: about one BDP (40 ms) of
    // queue more than one flow.
    let med = get(&v, "median");
    assert!((30.0..120.0).contains(&med), "median queue {med} ms");
}

#[test]
fn a_late_cubic_flow_gets_a_share() {
    let v = run(&scenario("tcp-model-cubic-2.yaml"));
    // CUBIC's convergence against an incumbent is slow (the testbed: Jain 0.93 over the same
    // window); neither flow may starve.
    assert!(get(&v, "Jain") > 0.8, "{v:?}");
    assert!(get(&v, "throughput") > 4_500.0, "mean per flow: {v:?}");
}

#[test]
fn fq_codel_holds_cubic_near_the_codel_target() {
    let yaml = scenario("tcp-model-cubic-1.yaml")
        .replace("{kind: droptail, limit_ms: 300}", "{kind: fq_codel}")
        .replace("name: tcp-model-cubic-1", "name: tcp-model-cubic-1-fqcodel");
    let v = run(&yaml);
    let med = get(&v, "median");
    let p95 = get(&v, "p95");
    assert!(
        med < 10.0 && p95 < 30.0,
        "queue median {med} ms, p95 {p95} ms"
    );
    // A responsive flow keeps most of the link while CoDel drops a little.
    assert!(get(&v, "throughput") > 8_500.0, "{v:?}");
    assert!(get(&v, "drop ratio") > 0.0);
}
