//! `layer_changes_after_level` (plm/S1 "0 layer changes afterwards"): change events after a
//! receiver first holds a given level.

use sim::scenario::Scenario;

fn run(protocol: &str, min_layers: u8, max_layers: u8) -> f64 {
    let y = format!(
        r#"
name: t
duration_s: 60
topology:
  nodes: [s, r0, d]
  multicast: {{fast_leave: true}}
  links:
    - {{from: s, to: r0, rate_kbps: 300, delay_ms: 10, queue: {{kind: droptail, limit_packets: 10}}}}
    - {{from: r0, to: d, rate_kbps: 10000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 100}}}}
flows:
  - {{name: x, type: layered, protocol: {protocol}, from: s, layers: {{count: 10, rate_kbps: 50}},
     packet_size: 500, receivers: [{{name: r, at: d, start_s: 1}}]}}
measurements:
  - {{id: c, metric: layer_changes_after_level, of: [x], after_s: 0, min_layers: {min_layers},
     max_layers: {max_layers}, window: [0, 60]}}
  - {{id: all, metric: layer_changes, of: [x], window: [0, 60]}}
"#
    );
    let sc = Scenario::from_yaml(&y).expect("test scenario");
    let (_, s) = sim::run(&sc, 1).unwrap();
    let v: Vec<f64> = s.measurements.iter().map(|m| m.value).collect();
    assert!(v[0].is_infinite() || v[0] <= v[1], "{v:?}");
    v[0]
}

#[test]
fn changes_after_level_counts_only_what_follows_the_first_visit() {
    // A fixed subscription joins its 4 layers once and keeps them: nothing after it first
    // holds 4, although the joins themselves are changes.
    assert_eq!(run("sim-fixed-4", 4, 4), 0.0);
    // A level it never holds: infinite (a FAIL against any finite band).
    assert!(run("sim-fixed-4", 5, 5).is_infinite());
    // The AIMD test controller probes past the 300-kbit/s link and backs off, again and
    // again: once it has first held 2 layers it keeps changing.
    assert!(run("sim-aimd", 2, 2) >= 5.0);
}
