//! ALMA end to end on a two-link chain (`agents::alma`): the active interface's link-capacity
//! rule keeps a receiver at the layers its tail carries, and the receiver's refused upward
//! probes (subscribes the network never grants) are not counted as levels.

use sim::scenario::Scenario;

/// s → n1 (1 Mbit/s) → r (`tail` kbit/s), 30 × 10 kbit/s ALMA layers, session at 1 s.
fn chain(tail: u32) -> Scenario {
    Scenario::from_yaml(&format!(
        "name: t\nduration_s: 60\ntopology:\n  nodes: [s, n1, r]\n  multicast: {{join_latency_ms: 10, fast_leave: true}}\n  links:\n\
         \x20   - {{from: s, to: n1, rate_kbps: 1000, delay_ms: 10, queue: {{kind: droptail, limit_packets: 20}}}}\n\
         \x20   - {{from: n1, to: r, rate_kbps: {tail}, delay_ms: 30, queue: {{kind: droptail, limit_packets: 20}}}}\n\
         flows:\n  - {{name: a, type: layered, protocol: alma, from: s, layers: {{count: 30, rate_kbps: 10}}, \
         packet_size: 500, bunch: 1, start_s: 1, receivers: [{{name: r, at: r, start_s: 1}}]}}\n\
         measurements:\n\
         \x20 - {{id: level, metric: mean_layers, of: [a/r], window: [10, 60]}}\n\
         \x20 - {{id: changes, metric: layer_changes, of: [a], window: [5, 60]}}\n\
         \x20 - {{id: loss, metric: loss_ratio, of: [a], window: [0, 60]}}\n"
    ))
    .unwrap()
}

fn value(sum: &sim::report::RunSummary, id: &str) -> f64 {
    sum.measurements.iter().find(|m| m.id == id).unwrap().value
}

#[test]
fn receiver_settles_at_the_layers_its_tail_carries_without_loss_or_level_changes() {
    // (tail kbit/s, layers that fit): 56 → 5 (6 would be 60), 128 → 12, 64 → 6, 250 → 25.
    for (tail, fit) in [(56, 5.0), (128, 12.0), (64, 6.0), (250, 25.0)] {
        let (sim, sum) = sim::run(&chain(tail), 1).unwrap();
        assert_eq!(value(&sum, "level"), fit, "tail {tail} kbit/s");
        assert_eq!(value(&sum, "changes"), 0.0, "tail {tail} kbit/s");
        assert!(value(&sum, "loss") < 1e-3, "tail {tail} kbit/s");
        let m = sum.monitors.iter().find(|m| m.name == "a/r").unwrap();
        assert_eq!(m.final_layers, fit as u8);
        // The receiver did probe upward (refused subscribes: joins and leaves of the host that
        // never deliver data, so the level traced from delivered data stays flat).
        let mon = sim
            .net
            .monitors
            .list
            .iter()
            .find(|m| m.name == "a/r")
            .unwrap();
        assert!(
            mon.decisions.iter().any(|d| d.reason == "probe"),
            "tail {tail} kbit/s: no probe"
        );
    }
}
