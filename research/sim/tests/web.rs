//! The web-like background generator (`agents::web`, plm.md §6.3) end to end: sessions fetch
//! their pages and stop, the traffic crosses the bottleneck, runs are reproducible by seed.

use sim::scenario::Scenario;

const YAML: &str = r#"
name: web-test
duration_s: 600
topology:
  nodes: [s1, s2, a, b, c1, c2]
  links:
    - {from: s1, to: a, rate_kbps: 10000, delay_ms: 5}
    - {from: s2, to: a, rate_kbps: 10000, delay_ms: 5}
    - {from: a, to: b, rate_kbps: 3000, delay_ms: 20, queue: {kind: fq, per_flow_packets: 100, total_bytes: 100000}}
    - {from: b, to: c1, rate_kbps: 10000, delay_ms: 5}
    - {from: b, to: c2, rate_kbps: 10000, delay_ms: 5}
flows:
  - {name: web, type: web, servers: [s1, s2], clients: [c1, c2], sessions: 20, pages: 5,
     mean_think_s: 2, mean_session_gap_s: 1}
"#;

fn bytes(seed: u64) -> (Vec<u64>, u64, u64) {
    let sc = Scenario::from_yaml(YAML).unwrap();
    let (sim, _) = sim::run(&sc, seed).unwrap();
    let mon = sim
        .net
        .monitors
        .list
        .iter()
        .find(|m| m.name == "web")
        .unwrap();
    let link = sim.net.links.iter().find(|l| l.name == "a-b").unwrap();
    (mon.bytes.clone(), link.sent_packets, link.drops_overflow)
}

#[test]
fn sessions_fetch_their_pages_then_stop_and_runs_repeat_by_seed() {
    let (b1, sent, _) = bytes(1);
    let total: u64 = b1.iter().sum();
    // 20 sessions x 5 pages of at least one 1000-B packet each.
    assert!(total >= 20 * 5 * 1000, "delivered {total} B");
    assert_eq!(total % 1000, 0, "whole packets only");
    // Everything crossed the bottleneck (data) and nothing is left after the sessions end:
    // 5 pages with 2-s think times take well under 300 s.
    assert!(sent >= total / 1000);
    let late: u64 = b1.iter().skip(300).sum();
    assert_eq!(late, 0, "traffic after all sessions should have ended");
    let (again, _, _) = bytes(1);
    assert_eq!(b1, again, "same seed, same traffic");
    let (other, _, _) = bytes(2);
    assert_ne!(b1, other, "another seed draws other sessions");
}
