//! ACC TCP end to end (`agents::acc`, `docs/protocols/active-networks.md`): the active router
//! notifies and filters only ACC flows, the sender keeps going, and plain TCP on the same kind
//! of link sees none of it.

use sim::scenario::Scenario;

/// One flow of `variant` through a 1 Mbit/s, 10-packet drop-tail bottleneck (active when
/// `acc`) 40 ms downstream of the sender (so segments are in flight towards the router when
/// it cuts the window: what its filter is for), 30 s. Returns (router notifications, filter
/// drops, queue drops, goodput kbit/s, retransmitted / sent segments).
fn run(variant: &str, acc: bool) -> (u64, u64, u64, f64, f64) {
    let y = format!(
        r#"
name: t
duration_s: 30
topology:
  nodes: [s, r0, r1, d]
  links:
    - {{from: s, to: r0, rate_kbps: 100000, delay_ms: 40, queue: {{kind: droptail, limit_packets: 1000}}}}
    - {{from: r0, to: r1, rate_kbps: 1000, delay_ms: 1, acc: {acc}, queue: {{kind: droptail, limit_packets: 10}}}}
    - {{from: r1, to: d, rate_kbps: 100000, delay_ms: 1, queue: {{kind: droptail, limit_packets: 1000}}}}
flows:
  - {{name: f, type: tcp, variant: {variant}, from: s, to: d, packet_size: 1000, max_cwnd: 150}}
measurements:
  - {{id: g, metric: throughput_kbps, of: [f], window: [2, 30]}}
  - {{id: p, metric: retransmit_ratio, of: [f]}}
"#
    );
    let sc = Scenario::from_yaml(&y).unwrap();
    let (sim, s) = sim::run(&sc, 1).unwrap();
    // Link 2 is r0 -> r1 (links are listed forward, reverse per duplex line).
    let l = &sim.net.links[2];
    assert_eq!(l.name, "r0-r1");
    let notes = sim
        .net
        .acc
        .get(2)
        .and_then(Option::as_ref)
        .map_or(0, |r| r.notifications);
    (
        notes,
        l.drops_filter,
        l.drops_overflow + l.drops_early,
        s.measurements[0].value,
        s.measurements[1].value,
    )
}

#[test]
fn active_router_notifies_and_filters_acc_flows() {
    let (notes, filtered, drops, goodput, prr) = run("acc-reno", true);
    // Every queue drop and every filtered segment is sent again.
    assert!(prr > 0.0 && prr < 0.5, "PRR {prr}");
    // Every window overshoot of the 10-packet queue is a drop the router answers.
    assert!(notes > 5, "notifications {notes}");
    // At most one notification per queue drop (one cut per window).
    assert!(notes <= drops, "notifications {notes} > drops {drops}");
    // The filter removes the rest of the halved window's excess.
    assert!(filtered > 0, "filter drops {filtered}");
    // The sender adopts the windows and keeps the link busy.
    assert!(goodput > 800.0 && goodput <= 1000.0, "goodput {goodput}");
}

#[test]
fn plain_tcp_through_an_active_router_is_untouched() {
    let (notes, filtered, drops, goodput, prr) = run("reno", true);
    assert_eq!((notes, filtered), (0, 0));
    assert!(prr > 0.0 && prr < 0.5, "PRR {prr}");
    assert!(drops > 0);
    assert!(goodput > 500.0, "goodput {goodput}");
    // And an ACC sender behind a passive router is plain Reno.
    let (notes, filtered, _, _, _) = run("acc-reno", false);
    assert_eq!((notes, filtered), (0, 0));
}

#[test]
fn loss_free_flow_retransmits_nothing() {
    // A window of 5 never fills a 1000-packet queue: no drop, no retransmission, and the
    // ratio is exactly 0 (not NaN: segments were sent).
    let y = r#"
name: t
duration_s: 10
topology:
  nodes: [s, d]
  links:
    - {from: s, to: d, rate_kbps: 1000, delay_ms: 20, queue: {kind: droptail, limit_packets: 1000}}
flows:
  - {name: f, type: tcp, from: s, to: d, packet_size: 1000, max_cwnd: 5}
measurements:
  - {id: p, metric: retransmit_ratio, of: [f]}
"#;
    let sc = Scenario::from_yaml(y).unwrap();
    let (_, s) = sim::run(&sc, 1).unwrap();
    assert_eq!(s.measurements[0].value, 0.0);
}
