//! AER/NCA and PGMCC agents end to end on small topologies (`agents::aer`, `agents::pgmcc`):
//! reliable delivery with repair servers, NACK aggregation at the active nodes, and the
//! window loops using the capacity they are given and no more.

use sim::scenario::Scenario;

/// n0 → n1 → n2 (both active) → r1..r4, every link `rate` kbit/s / 20 ms, drop-tail 30, a
/// loss of `loss` on n0-n1 and n1-n2 from 1 s.
fn chain(protocol: &str, rs: bool, rate: u32, loss: f64, duration: u32) -> Scenario {
    let rsl = if rs { "[n1, n2]" } else { "[]" };
    let mut links = String::new();
    for (a, b) in [
        ("n0", "n1"),
        ("n1", "n2"),
        ("n2", "r1"),
        ("n2", "r2"),
        ("n2", "r3"),
        ("n2", "r4"),
    ] {
        links.push_str(&format!(
            "    - {{from: {a}, to: {b}, rate_kbps: {rate}, delay_ms: 20, queue: {{kind: droptail, limit_packets: 30}}}}\n"
        ));
    }
    let sched = if loss > 0.0 {
        format!(
            "schedule:\n  - {{at_s: 1, link: n0-n1, loss: {loss}}}\n  - {{at_s: 1, link: n1-n2, loss: {loss}}}\n"
        )
    } else {
        String::new()
    };
    Scenario::from_yaml(&format!(
        "name: t\nduration_s: {duration}\ntopology:\n  nodes: [n0, n1, n2, r1, r2, r3, r4]\n  links:\n{links}\
         flows:\n  - {{name: m, type: aer, protocol: {protocol}, from: n0, repair_servers: {rsl}, \
         receivers: [{{name: r1, at: r1}}, {{name: r2, at: r2}}, {{name: r3, at: r3}}, {{name: r4, at: r4}}]}}\n{sched}"
    ))
    .unwrap()
}

fn received(sim: &sim::engine::Sim, name: &str) -> u64 {
    let m = sim
        .net
        .monitors
        .list
        .iter()
        .find(|m| m.name == name)
        .unwrap();
    m.received.iter().sum()
}

fn lost(sim: &sim::engine::Sim, name: &str) -> u64 {
    let m = sim
        .net
        .monitors
        .list
        .iter()
        .find(|m| m.name == name)
        .unwrap();
    m.lost.iter().sum()
}

/// AN packets that crossed a link (by name).
fn on_link(sim: &sim::engine::Sim, link: &str) -> u64 {
    let l = sim.net.links.iter().find(|l| l.name == link).unwrap();
    l.flow_sent[0]
}

#[test]
fn repair_servers_deliver_every_packet_and_aggregate_nacks() {
    let mut with = chain("aer-nca", true, 1000, 0.05, 30).build(1).unwrap();
    with.run_until(congestion::Time::from_secs_f64(30.0));
    let mut without = chain("aer-nca", false, 1000, 0.05, 30).build(1).unwrap();
    without.run_until(congestion::Time::from_secs_f64(30.0));
    for sim in [&with, &without] {
        assert!(
            sim.net.flow_drops[0] > 50,
            "the lossy links drop AN packets"
        );
        let r: Vec<u64> = (1..=4).map(|i| received(sim, &format!("m/r{i}"))).collect();
        // Reliable: every receiver ends with the same packets (give or take the last
        // round trip still in repair), none given up.
        let (lo, hi) = (*r.iter().min().unwrap(), *r.iter().max().unwrap());
        assert!(lo > 500 && hi - lo <= 40, "received {r:?}");
        for i in 1..=4 {
            assert_eq!(lost(sim, &format!("m/r{i}")), 0);
        }
    }
    // Upstream control traffic (NACKs, CSMs) over the lossy links: each RS forwards one
    // aggregated NACK per packet and the subtree's worst CSM, instead of four receivers' own.
    let up_with = on_link(&with, "n2-n1");
    let up_without = on_link(&without, "n2-n1");
    assert!(
        (up_with as f64) < 0.7 * up_without as f64,
        "upstream AN packets with RS {up_with}, without {up_without}"
    );
    // Losses on n1-n2 are repaired from n1's cache, so their repairs never cross n0-n1:
    // fewer AN packets on n0-n1 per packet delivered than with repairs from the sender.
    let per = |s: &sim::engine::Sim| on_link(s, "n0-n1") as f64 / received(s, "m/r1") as f64;
    assert!(
        per(&with) < per(&without),
        "{} vs {}",
        per(&with),
        per(&without)
    );
}

#[test]
fn nca_window_fills_the_link_and_no_more() {
    for (rate, lo, hi) in [(1000u32, 0.6, 1.0), (300, 0.6, 1.0)] {
        let sc = chain("aer-nca", true, rate, 0.0, 60);
        let mut sim = sc.build(2).unwrap();
        sim.run_until(congestion::Time::from_secs_f64(60.0));
        let m = sim
            .net
            .monitors
            .list
            .iter()
            .find(|m| m.name == "m/r1")
            .unwrap();
        let kbps = m.throughput_kbps(1.0, 20.0, 60.0);
        let frac = kbps / f64::from(rate);
        assert!(
            frac > lo && frac <= hi,
            "{rate} kbit/s link: NCA at {kbps:.0} kbit/s"
        );
    }
}

#[test]
fn pgmcc_elects_an_acker_and_fills_the_link() {
    let sc = chain("pgmcc", false, 1000, 0.0, 60);
    let mut sim = sc.build(3).unwrap();
    sim.run_until(congestion::Time::from_secs_f64(60.0));
    let m = sim
        .net
        .monitors
        .list
        .iter()
        .find(|m| m.name == "m/r2")
        .unwrap();
    let kbps = m.throughput_kbps(1.0, 20.0, 60.0);
    assert!(kbps > 600.0 && kbps <= 1000.0, "PGMCC at {kbps:.0} kbit/s");
}
