//! The link probe (`monitor_queue: true`): mean queue, drop ratio and output rate of a link.

use sim::scenario::Scenario;

fn run(cbr_kbps: u32) -> Vec<f64> {
    let y = format!(
        r#"
name: t
duration_s: 20
topology:
  nodes: [s, r0, r1, d]
  links:
    - {{from: s, to: r0, rate_kbps: 100000, delay_ms: 1, queue: {{kind: droptail, limit_packets: 100}}}}
    - {{from: r0, to: r1, rate_kbps: 1000, delay_ms: 10, monitor_queue: true, queue: {{kind: droptail, limit_packets: 10}}}}
    - {{from: r1, to: d, rate_kbps: 100000, delay_ms: 1, queue: {{kind: droptail, limit_packets: 100}}}}
flows:
  - {{name: c, type: cbr, from: s, to: d, rate_kbps: {cbr_kbps}, packet_size: 500}}
measurements:
  - {{id: q, metric: mean_queue_packets, of: ["queue:r0-r1"], window: [5, 20]}}
  - {{id: drop, metric: loss_ratio, of: ["queue:r0-r1"], window: [5, 20]}}
  - {{id: out, metric: throughput_kbps, of: ["queue:r0-r1"], window: [5, 20]}}
"#
    );
    let sc = Scenario::from_yaml(&y).unwrap();
    let (_, s) = sim::run(&sc, 1).unwrap();
    s.measurements.iter().map(|m| m.value).collect()
}

#[test]
fn overloaded_link_shows_a_full_queue_half_dropped_at_its_rate() {
    // 2 Mbit/s into a 1 Mbit/s link with a 10-packet drop-tail queue: the queue stays full
    // (9-10 packets waiting, one in service), half the arrivals are dropped, and the link
    // sends exactly its rate.
    let v = run(2000);
    assert!(v[0] >= 9.0 && v[0] <= 10.0, "mean queue {}", v[0]);
    assert!((v[1] - 0.5).abs() < 0.01, "drop ratio {}", v[1]);
    assert!((v[2] - 1000.0).abs() < 5.0, "output {}", v[2]);
}

#[test]
fn underloaded_link_shows_an_empty_queue_and_no_drops() {
    // Evenly spaced CBR at half the link rate never waits behind another packet.
    let v = run(500);
    assert_eq!(v[0], 0.0, "mean queue {}", v[0]);
    assert_eq!(v[1], 0.0);
    assert!((v[2] - 500.0).abs() < 5.0, "output {}", v[2]);
}
