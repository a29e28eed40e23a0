//! The TFRC and PCC agents (`agents::tfrc`, flow `type: tfrc-pcc`) end to end on small paths.

use sim::scenario::Scenario;

fn run(flows: &str, bottleneck_kbps: u32, measurements: &str) -> Vec<f64> {
    let y = format!(
        r#"
name: t
duration_s: 120
topology:
  nodes: [s, r0, r1, d]
  links:
    - {{from: s, to: r0, rate_kbps: 100000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 100}}}}
    - {{from: r0, to: r1, rate_kbps: {bottleneck_kbps}, delay_ms: 20, queue: {{kind: droptail, limit_ms: 120}}}}
    - {{from: r1, to: d, rate_kbps: 100000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 100}}}}
flows:
{flows}
measurements:
{measurements}
"#
    );
    let sc = Scenario::from_yaml(&y).unwrap();
    let (_, s) = sim::run(&sc, 1).unwrap();
    s.measurements.iter().map(|m| m.value).collect()
}

#[test]
fn tfrc_alone_fills_its_bottleneck_and_sees_few_losses() {
    // One TFRC flow on 1 Mbit/s (RTT 60 ms, 2 x BDP drop-tail): after slow start the
    // equation rate settles around the link rate with a small loss rate.
    let v = run(
        "  - {name: f, type: tfrc-pcc, from: s, to: d}",
        1000,
        "  - {id: thr, metric: throughput_kbps, of: [f/receiver], window: [30, 120]}\n  - {id: loss, metric: loss_ratio, of: [f/receiver], window: [30, 120]}",
    );
    assert!(v[0] > 800.0 && v[0] <= 1000.0, "TFRC goodput {}", v[0]);
    assert!(v[1] > 0.0 && v[1] < 0.05, "loss ratio {}", v[1]);
}

#[test]
fn pcc_stays_on_at_its_rate_when_the_path_has_room_and_goes_off_when_it_has_not() {
    // 500 kbit/s application rate: on a 10 Mbit/s path nothing is ever lost, R_TCP stays
    // unbounded and the flow is on all the time (sending rate = receive rate = 500).
    let v = run(
        "  - {name: p, type: tfrc-pcc, from: s, to: d, pcc: {rate_kbps: 500}}",
        10_000,
        "  - {id: snd, metric: throughput_kbps, of: [p/sender], window: [10, 120]}\n  - {id: rcv, metric: throughput_kbps, of: [p/receiver], window: [10, 120]}",
    );
    assert!((v[0] - 500.0).abs() < 5.0, "sending {}", v[0]);
    assert!((v[1] - 500.0).abs() < 5.0, "receiving {}", v[1]);
    // 1500 kbit/s on a 1 Mbit/s path: the equation rate is well below R_NA, so after the
    // protected time experiments switch the flow off for T at a time (never on throughout).
    let v = run(
        "  - {name: p, type: tfrc-pcc, from: s, to: d, pcc: {rate_kbps: 1500, t_s: 20, protected_s: 5}}",
        1000,
        "  - {id: snd, metric: throughput_kbps, of: [p/sender], window: [10, 120]}",
    );
    assert!(v[0] > 0.0 && v[0] < 0.8 * 1500.0, "sending {}", v[0]);
}

/// `cov_ratio` (S10): a flow that delivered nothing in the window has no CoV (0/0) and is left
/// out of its side's mean instead of turning the whole ratio into NaN (1.5 Mbit/s, 32 + 32
/// flows: a TCP can spend the whole minute in RTO backoff). Flow `a` runs for 15 of the 20
/// 1-s bins (CoV sqrt(0.25 / 0.75) = 0.577), `c` for 10 (CoV 1), `b` starts after the window.
#[test]
fn cov_ratio_leaves_out_flows_without_data() {
    let y = r#"
name: t
duration_s: 40
topology:
  nodes: [s, d]
  links:
    - {from: s, to: d, rate_kbps: 10000, delay_ms: 5, queue: {kind: droptail, limit_packets: 100}}
flows:
  - {name: a, type: cbr, from: s, to: d, rate_kbps: 100, packet_size: 500, stop_s: 15}
  - {name: b, type: cbr, from: s, to: d, rate_kbps: 100, packet_size: 500, start_s: 30}
  - {name: c, type: cbr, from: s, to: d, rate_kbps: 100, packet_size: 500, stop_s: 10}
measurements:
  - {id: r, metric: cov_ratio, of: [a], versus: [b, c], window: [0, 20]}
  - {id: only, metric: cov_ratio, of: [a], versus: [c], window: [0, 20]}
"#;
    let sc = Scenario::from_yaml(y).expect("test scenario");
    let (_, s) = sim::run(&sc, 1).unwrap();
    let (r, only) = (s.measurements[0].value, s.measurements[1].value);
    assert!(r.is_finite(), "ratio with an empty flow: {r}");
    assert!(
        (r - only).abs() < 1e-12,
        "{r} vs {only} without the empty flow"
    );
    assert!(
        (r - 0.577).abs() < 0.06,
        "CoV(a)/CoV(c) = {r}, want about 0.577"
    );
}
