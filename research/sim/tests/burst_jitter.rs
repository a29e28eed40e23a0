//! The layered sender's `burst_jitter` (ns-2 `CBR_PP` `random_ 1`, the sources of Legout's PLM
//! scripts): every bunch gap is the layer's interval times `1 + U(−j, j)`.

use sim::scenario::Scenario;

fn values(sc: &Scenario, seed: u64) -> Vec<f64> {
    let (_, s) = sim::run(sc, seed).unwrap();
    s.measurements.iter().map(|m| m.value).collect()
}

#[test]
fn jittered_layers_keep_their_rate_without_loss() {
    // Four 20 kbit/s layers held by a fixed receiver on an open path: jitter moves packets in
    // time but must neither add nor lose any. The send times are a renewal process (each gap
    // I·U[0.5, 1.5]), so the n-th pair drifts by I·sqrt(n/12): about 1.6 s after the 200
    // pairs of 80 s, i.e. a window count within ±2 % per layer at one sigma; 3 % over four
    // independent layers is several sigma.
    let y = r#"
name: t
duration_s: 100
topology:
  nodes: [s, r0, d]
  multicast: {fast_leave: true}
  links:
    - {from: s, to: r0, rate_kbps: 10000, delay_ms: 5, queue: {kind: fq, per_flow_packets: 20}}
    - {from: r0, to: d, rate_kbps: 10000, delay_ms: 5, queue: {kind: fq, per_flow_packets: 20}}
flows:
  - {name: x, type: layered, protocol: sim-fixed-4, from: s, layers: {count: 4, rate_kbps: 20},
     packet_size: 500, burst_jitter: 0.5, receivers: [{name: r, at: d, start_s: 1}]}
measurements:
  - {id: thr, metric: throughput_kbps, of: [x], window: [20, 100]}
  - {id: lost, metric: lost_packets, of: [x], window: [0, 100]}
"#;
    let sc = Scenario::from_yaml(y).expect("test scenario");
    for seed in 1..=3 {
        let v = values(&sc, seed);
        assert!((v[0] - 80.0).abs() <= 2.4, "seed {seed}: {} kbit/s", v[0]);
        assert_eq!(v[1], 0.0, "seed {seed}: lost");
        assert_eq!(v, values(&sc, seed), "seed {seed} not reproducible");
    }
}

/// plm.md §7.3 in miniature: 3 PLM sessions and 3 greedy CBR flows on a 600 kbit/s FQ link.
/// The share is 100 kbit/s = B[5]; a pair reads exactly the share only when every other flow
/// has a packet queued, and more otherwise (up to 150 kbit/s), so the strict rule holds 4
/// layers only if some pair in every check period meets all five other flows.
fn cbr_top4(jitter: f64) -> Scenario {
    let mut y = String::from(
        "name: t\nduration_s: 60\ntopology:\n  nodes: [ax, bx, p0, p1, p2, c0, c1, c2, q0, q1, q2, d0, d1, d2]\n  multicast: {join_latency_ms: 10, fast_leave: true}\n  links:\n",
    );
    let fq = "queue: {kind: fq, per_flow_packets: 20}";
    for n in ["p0", "p1", "p2", "c0", "c1", "c2"] {
        y += &format!("    - {{from: {n}, to: ax, rate_kbps: 10000, delay_ms: 5, {fq}}}\n");
    }
    y += &format!("    - {{from: ax, to: bx, rate_kbps: 600, delay_ms: 20, {fq}}}\n");
    for n in ["q0", "q1", "q2", "d0", "d1", "d2"] {
        y += &format!("    - {{from: bx, to: {n}, rate_kbps: 10000, delay_ms: 5, {fq}}}\n");
    }
    y += "flows:\n";
    for i in 0..3 {
        y += &format!(
            "  - {{name: plm{i}, type: layered, protocol: plm, from: p{i}, layers: {{count: 17, rate_kbps: 20}}, packet_size: 500, start_jitter_s: 1, burst_jitter: {jitter}, receivers: [{{name: r, at: q{i}, start_s: {}}}]}}\n",
            10 + 5 * i
        );
        y += &format!(
            "  - {{name: cbr{i}, type: cbr, from: c{i}, to: d{i}, rate_kbps: 500, packet_size: 500, start_s: 30}}\n"
        );
    }
    y += "measurements:\n  - {id: lo, metric: min_level, of: [plm0, plm1, plm2], window: [32, 60]}\n  - {id: hi, metric: max_level, of: [plm0, plm1, plm2], window: [32, 60]}\n  - {id: mean, metric: mean_layers, of: [plm0, plm1, plm2], window: [32, 60]}\n  - {id: lost, metric: lost_packets, of: [plm0, plm1, plm2], window: [0, 60]}\n";
    Scenario::from_yaml(&y).expect("test scenario")
}

#[test]
fn jittered_pairs_hold_the_paper_level_under_cbr_where_a_fixed_schedule_locks_one_above() {
    // With ns-2's jitter the pairs of the three sessions meet in ever new combinations, so
    // every check period's minimum reads the 100 kbit/s share and each session holds 4
    // layers (80 kbit/s), as the paper reports; 0 loss.
    // Values: lowest level, highest level (mean over sessions of each one's highest), mean
    // level, PLM packets lost. A one-period excursion to 5 is possible (seed 3: one session
    // for one period, mean level 4.003) but no session stays above 4.
    let jittered = cbr_top4(0.5);
    for seed in 1..=8 {
        let v = values(&jittered, seed);
        assert_eq!(v[0], 4.0, "seed {seed}: lowest level {v:?}");
        assert!(v[2] <= 4.01, "seed {seed}: mean level {v:?}");
        assert_eq!(v[3], 0.0, "seed {seed}: lost {v:?}");
    }
    // The deterministic schedule with independent start phases: in seed 1 one session's
    // pairs miss another session's packets period after period and it sits at 5 layers for
    // the whole window (mean level 4.33 = one of three sessions at 5).
    let v = values(&cbr_top4(0.0), 1);
    assert!(v[2] > 4.3, "fixed schedule, seed 1: {v:?}");
}
