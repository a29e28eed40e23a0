//! The two ns-2 `Agent/TCP` traits the ACC TCP scenarios model (`docs/protocols/
//! active-networks.md`): `header_bytes` (`packetSize_` is the payload, the 40-B TCP/IP header
//! is added on the wire: segments occupy `packet_size + header_bytes` on the links, goodput
//! counts `packet_size` per new segment) and `bug_fix` (ns-2's `bugFix_`: Reno does not
//! fast-retransmit a second loss of a window it already cut, the timer repairs it).

use sim::scenario::Scenario;

/// One Reno flow through a 1 Mbit/s, 20-packet drop-tail bottleneck for 40 s. Returns
/// (goodput 5-40 s in kbit/s, bytes the bottleneck sent, packets the bottleneck sent).
fn run(header: u32) -> (f64, u64, u64) {
    let y = format!(
        r#"
name: t
duration_s: 40
topology:
  nodes: [s, r0, r1, d]
  links:
    - {{from: s, to: r0, rate_kbps: 100000, delay_ms: 20, queue: {{kind: droptail, limit_packets: 1000}}}}
    - {{from: r0, to: r1, rate_kbps: 1000, delay_ms: 10, queue: {{kind: droptail, limit_packets: 20}}}}
    - {{from: r1, to: d, rate_kbps: 100000, delay_ms: 1, queue: {{kind: droptail, limit_packets: 1000}}}}
flows:
  - {{name: f, type: tcp, variant: reno, from: s, to: d, packet_size: 1000, header_bytes: {header}, max_cwnd: 150}}
measurements:
  - {{id: g, metric: throughput_kbps, of: [f], window: [5, 40]}}
"#
    );
    let sc = Scenario::from_yaml(&y).unwrap();
    let (sim, s) = sim::run(&sc, 1).unwrap();
    let l = &sim.net.links[2];
    assert_eq!(l.name, "r0-r1");
    (s.measurements[0].value, l.sent_bytes, l.sent_packets)
}

#[test]
fn header_bytes_ride_on_the_wire_but_not_in_goodput() {
    let (g0, bytes0, pkts0) = run(0);
    let (g40, bytes40, pkts40) = run(40);
    // Without a header every packet is the 1000-B segment.
    assert_eq!(bytes0, pkts0 * 1000);
    // With it every data packet is 1040 B on the bottleneck (ACKs go the other way).
    assert_eq!(bytes40, pkts40 * 1040);
    // Both saturate the link, so the goodput falls by the header share, 1000/1040.
    assert!(g0 > 900.0 && g0 <= 1000.0, "goodput without header {g0}");
    let ratio = g40 / g0;
    assert!(
        (ratio - 1000.0 / 1040.0).abs() < 0.02,
        "goodput ratio {ratio} (header 40: {g40}, none: {g0})"
    );
}

/// One Reno flow of `bug_fix` through a 1 Mbit/s link with 2 % random loss and a queue that
/// never overflows, so two losses in one window are common, 30 s. Returns (goodput kbit/s,
/// PRR). (A slow-start overshoot no longer tells the two apart: since slow start grows one
/// segment per ACK (`tests/tcp.rs`), every overshoot ends in a timeout either way, because
/// after the first recovery no new data goes out to produce duplicate ACKs.)
fn lossy(bug_fix: bool) -> (f64, f64) {
    let y = format!(
        r#"
name: t
duration_s: 30
topology:
  nodes: [s, r0, r1, d]
  links:
    - {{from: s, to: r0, rate_kbps: 100000, delay_ms: 40, queue: {{kind: droptail, limit_packets: 1000}}}}
    - {{from: r0, to: r1, rate_kbps: 1000, delay_ms: 1, loss: 0.02, queue: {{kind: droptail, limit_packets: 100}}}}
    - {{from: r1, to: d, rate_kbps: 100000, delay_ms: 1, queue: {{kind: droptail, limit_packets: 1000}}}}
flows:
  - {{name: f, type: tcp, variant: reno, from: s, to: d, packet_size: 1000, bug_fix: {bug_fix}, max_cwnd: 150}}
measurements:
  - {{id: g, metric: throughput_kbps, of: [f], window: [0, 30]}}
  - {{id: p, metric: retransmit_ratio, of: [f]}}
"#
    );
    let sc = Scenario::from_yaml(&y).unwrap();
    let (_, s) = sim::run(&sc, 1).unwrap();
    (s.measurements[0].value, s.measurements[1].value)
}

#[test]
fn bug_fix_reno_leaves_second_losses_to_the_timer() {
    let (g_plain, prr_plain) = lossy(false);
    let (g_fix, prr_fix) = lossy(true);
    // Without bugFix_ every third duplicate ACK is a fast retransmit (and another halving);
    // with it the second loss of a window waits for the retransmission timer, during which
    // the link idles: less goodput, and fewer retransmissions (no repeated fast retransmits).
    eprintln!("plain: goodput {g_plain} PRR {prr_plain}; bug_fix: goodput {g_fix} PRR {prr_fix}");
    assert!(
        g_fix < g_plain,
        "goodput bug_fix {g_fix} vs plain {g_plain}"
    );
    assert!(
        prr_fix < prr_plain,
        "PRR bug_fix {prr_fix} vs plain {prr_plain}"
    );
    assert!(
        g_fix > 500.0,
        "the bug_fix sender still uses the link: {g_fix}"
    );
}
