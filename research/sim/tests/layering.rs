//! The sender behaviours the layered baselines need (`agents::layered::Layering`): RLC's
//! packet pacing with synchronisation-point bursts, FLID-DL's dynamic channels and WEBRC's
//! waves, checked end to end through the protocol crate's unchanged controllers.

use sim::scenario::Scenario;

fn uncongested(flow: &str, duration: u32, bottleneck_kbps: u32) -> Scenario {
    let y = format!(
        r#"
name: t
duration_s: {duration}
topology:
  nodes: [s, r0, r1, d]
  multicast: {{fast_leave: true}}
  links:
    - {{from: s, to: r0, rate_kbps: 100000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 500}}}}
    - {{from: r0, to: r1, rate_kbps: {bottleneck_kbps}, delay_ms: 20, queue: {{kind: droptail, limit_packets: 500}}}}
    - {{from: r1, to: d, rate_kbps: 100000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 500}}}}
flows:
{flow}
measurements:
  - {{id: thr, metric: throughput_kbps, of: [x], window: [40, {duration}]}}
  - {{id: loss, metric: loss_ratio, of: [x], window: [0, {duration}]}}
  - {{id: top, metric: min_level, of: [x], window: [40, {duration}]}}
  - {{id: hi, metric: max_level, of: [x], window: [0, {duration}]}}
"#
    );
    Scenario::from_yaml(&y).expect("test scenario")
}

fn values(sc: &Scenario, seed: u64) -> Vec<f64> {
    let (_, s) = sim::run(sc, seed).unwrap();
    s.measurements.iter().map(|m| m.value).collect()
}

const FLID_LADDER: &str = "[12.0, 3.6, 4.68, 6.084, 7.909, 10.282, 13.367, 17.377, 22.589, 29.366]";

#[test]
fn flid_dynamic_channels_deliver_the_logical_rate_without_loss() {
    // 10 logical layers (cumulative 12·1.3^9 = 127.3 kbit/s) on a 100 Mbit/s path: the
    // receiver must climb to the top and then receive exactly the top cumulative rate, with
    // no sequence gap, although every dynamic channel changes its layer every 0.5-s slot and
    // the host re-joins one channel per slot. A wrong channel map shows as loss, as a wrong
    // rate, or as the controller's loss-drop pulling the level down.
    let flow = format!(
        "  - {{name: x, type: layered, protocol: flid-rtt10, from: s, layers: {{rates_kbps: {FLID_LADDER}}}, packet_size: 512, receivers: [{{name: r, at: d, start_s: 1}}]}}"
    );
    let sc = uncongested(&flow, 80, 100_000);
    let v = values(&sc, 1);
    let top = 12.0 * 1.3f64.powi(9);
    assert_eq!(v[1], 0.0, "loss ratio {}", v[1]);
    assert_eq!(v[2], 10.0, "level dropped below the top after 40 s");
    assert!(
        (v[0] - top).abs() / top < 0.02,
        "throughput {} vs {top}",
        v[0]
    );
}

#[test]
fn flid_decays_one_layer_per_slot_when_the_receiver_stops_rejoining() {
    // A bottleneck below the base + 1 layers: the level must fall back (through slot decay
    // and loss-drops) and never exceed what the controller joined; the sender keeps sending
    // every channel but quiescent ones carry nothing, so the link stays uncongested at level 1.
    let flow = format!(
        "  - {{name: x, type: layered, protocol: flid-rtt10, from: s, layers: {{rates_kbps: {FLID_LADDER}}}, packet_size: 512, receivers: [{{name: r, at: d, start_s: 1}}]}}"
    );
    let sc = uncongested(&flow, 80, 40);
    let v = values(&sc, 1);
    // 40 kbit/s holds 5 layers (cumulative 34.3) but not 6 (44.6).
    assert!(
        v[3] >= 6.0,
        "never probed above the bottleneck (max {})",
        v[3]
    );
    assert!(v[0] <= 40.5, "throughput {} above the bottleneck", v[0]);
    assert!(v[0] >= 25.0, "throughput {} far below 4-5 layers", v[0]);
}

#[test]
fn rlc_paced_layers_reach_the_top_without_loss_and_keep_their_rates() {
    // Doubling ladder, cumulative 32 ... 512 kbit/s, on 100 Mbit/s: RLC joins at every clean
    // SP; the SP bursts (twice the rate before each SP, then a pause) keep each layer's mean
    // rate, so at the top the receiver gets exactly 512 kbit/s.
    let flow = "  - {name: x, type: layered, protocol: rlc, from: s, layers: {rates_kbps: [32, 32, 64, 128, 256]}, packet_size: 500, receivers: [{name: r, at: d, start_s: 1}]}";
    let sc = uncongested(flow, 80, 100_000);
    let v = values(&sc, 1);
    assert_eq!(v[1], 0.0);
    assert_eq!(v[2], 5.0);
    assert!((v[0] - 512.0).abs() < 512.0 * 0.01, "throughput {}", v[0]);
}

#[test]
fn webrc_waves_are_followed_without_loss_on_an_open_path() {
    // BCR_P 4 packets/s of 500 B, 6 waves: on an open path the receiver joins waves and
    // receives them loss-free; the slot changes (every 10 s the lowest wave goes quiescent
    // and the host leaves its channel) must not show as loss.
    let flow = "  - {name: x, type: layered, protocol: webrc, from: s, layers: {rates_kbps: [16, 21.333, 28.444, 37.926, 50.568, 67.424, 89.899]}, packet_size: 500, receivers: [{name: r, at: d, start_s: 1}]}";
    let sc = uncongested(flow, 120, 100_000);
    let v = values(&sc, 1);
    assert_eq!(v[1], 0.0, "loss ratio {}", v[1]);
    assert!(v[3] >= 6.0, "max level {}", v[3]);
    // The base decays within a slot from 16 to 12 kbit/s; six waves at the top of the ladder
    // carry well over 100 kbit/s.
    assert!(v[0] > 100.0, "throughput {}", v[0]);
}
