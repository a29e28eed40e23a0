//! Engine behaviour: determinism, serialisation, multicast timing, TCP and queue interplay.

use congestion::{SessionInfo, Time};
use netmodel::QdiscConfig;
use sim::agents::layered::LayeredSender;
use sim::engine::{Agent, AgentId, Body, Command, LinkSpec, Net, Packet, Sim};
use sim::scenario::Scenario;
use std::cell::RefCell;
use std::net::Ipv4Addr;
use std::rc::Rc;

fn dumbbell(bottleneck: &str, flows: &str, duration: u32) -> Scenario {
    let y = format!(
        r#"
name: t
duration_s: {duration}
topology:
  nodes: [s, r0, r1, d]
  multicast: {{fast_leave: true}}
  links:
    - {{from: s, to: r0, rate_kbps: 10000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 200}}}}
    - {{from: r0, to: r1, {bottleneck}}}
    - {{from: r1, to: d, rate_kbps: 10000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 200}}}}
flows:
{flows}
"#
    );
    Scenario::from_yaml(&y).expect("test scenario")
}

#[test]
fn same_seed_gives_identical_outputs_and_another_seed_differs() {
    let sc = dumbbell(
        "rate_kbps: 400, delay_ms: 20, queue: {kind: red, min_th: 5, max_th: 15, limit_packets: 30}",
        r#"  - {name: lay, type: layered, protocol: sim-aimd, from: s, layers: {count: 40, rate_kbps: 20}, receivers: [{name: r, at: d, start_s: 1, start_jitter_s: 2}]}
  - {name: tcp, type: tcp, from: s, to: d, start_s: 5, start_jitter_s: 3}
  - {name: web, type: onoff, from: s, to: d, rate_kbps: 200, mean_on_s: 0.5, mean_off_s: 1}"#,
        40,
    );
    let (a, sa) = sim::run(&sc, 7).unwrap();
    let (b, sb) = sim::run(&sc, 7).unwrap();
    let (c, sc2) = sim::run(&sc, 8).unwrap();
    let ja = serde_json::to_string(&sa).unwrap();
    assert_eq!(ja, serde_json::to_string(&sb).unwrap());
    assert_eq!(
        sim::output::timeseries_csv(&sc, &a),
        sim::output::timeseries_csv(&sc, &b)
    );
    assert_ne!(
        sim::output::timeseries_csv(&sc, &a),
        sim::output::timeseries_csv(&sc, &c)
    );
    assert_ne!(ja, serde_json::to_string(&sc2).unwrap());
    testkit::record(
        "issue4/determinism",
        &format!(
            "identical summary JSON and time series for seed 7 twice ({} events); seed 8 differs",
            sa.events
        ),
        Some(true),
        "cargo test --release -p layercast-sim --test engine same_seed",
    );
}

/// Records (time, layer, seq) of every packet it gets.
struct Recorder(Rc<RefCell<Vec<(Time, u8, u64)>>>);
impl Agent for Recorder {
    fn command(&mut self, _: &mut Net, _: AgentId, _: Command) {}
    fn on_packet(&mut self, net: &mut Net, _: AgentId, p: &Packet) {
        if let Body::Layer { layer, seq, .. } = p.body {
            self.0.borrow_mut().push((net.now(), layer, seq));
        }
    }
    fn on_timer(&mut self, _: &mut Net, _: AgentId, _: u64) {}
}

fn chain(bottleneck_bps: u64) -> Sim {
    let q = |n| {
        netmodel::build::<Packet>(
            &QdiscConfig::Droptail {
                limit_packets: Some(n),
                limit_bytes: None,
                limit_ms: None,
            },
            1,
        )
        .unwrap()
    };
    let link = |from, to, rate, ms| LinkSpec {
        name: format!("{from}-{to}"),
        from,
        to,
        rate_bps: rate,
        delay: Time::from_millis(ms),
        loss: 0.0,
        jitter: Time::ZERO,
        queue: q(100),
    };
    Sim::new(
        3,
        vec![link(0, 1, 10_000_000, 5), link(1, 2, bottleneck_bps, 20)],
        1,
    )
}

#[test]
fn bottleneck_spaces_packet_pairs_by_its_serialisation_time() {
    let mut sim = chain(300_000);
    let g = sim.net.add_group(0);
    let info = SessionInfo::equal_layers(1, 20_000, Ipv4Addr::new(239, 1, 1, 1), 5000);
    let s = sim.add_agent(
        0,
        Box::new(LayeredSender::new(0, 0, vec![g], info, 10_000_000.0).unwrap()),
    );
    let log = Rc::new(RefCell::new(Vec::new()));
    let r = sim.add_agent(2, Box::new(Recorder(log.clone())));
    sim.net.join(g, 2, r);
    sim.net.schedule_command(Time::ZERO, s, Command::Start);
    sim.run_until(Time::from_millis(10_000));
    let v = log.borrow();
    assert!(v.len() > 40, "received {}", v.len());
    // 512 B at 300 kb/s = 13.653 ms between the two packets of each pair.
    let want = 512.0 * 8.0 / 300_000.0;
    for w in v.chunks(2).filter(|c| c.len() == 2) {
        let gap = (w[1].0 .0 - w[0].0 .0) as f64 / 1e9;
        assert!((gap - want).abs() < 1e-6, "gap {gap} want {want}");
        assert_eq!(w[1].2, w[0].2 + 1);
    }
}

#[test]
fn graft_and_prune_follow_the_configured_latencies() {
    let mut sim = chain(1_000_000);
    sim.net.multicast.join_latency = Time::from_millis(100);
    sim.net.multicast.leave_latency = Time::from_millis(700);
    let g = sim.net.add_group(0);
    let log = Rc::new(RefCell::new(Vec::new()));
    let r = sim.add_agent(2, Box::new(Recorder(log)));
    sim.net.set_timer(r, Time::ZERO, 0);
    sim.run_until(Time::from_millis(1_000));
    sim.net.join(g, 2, r);
    sim.run_until(Time::from_millis(1_099));
    assert!(!sim.net.forwards(g, 0) && !sim.net.forwards(g, 1));
    sim.run_until(Time::from_millis(1_100));
    assert!(sim.net.forwards(g, 0) && sim.net.forwards(g, 1));
    sim.net.leave(g, 2, r);
    sim.run_until(Time::from_millis(1_799));
    assert!(
        sim.net.forwards(g, 1),
        "still forwarded during the leave latency"
    );
    sim.run_until(Time::from_millis(1_800));
    assert!(!sim.net.forwards(g, 0) && !sim.net.forwards(g, 1), "pruned");
}

#[test]
fn tcp_alone_fills_the_bottleneck() {
    for variant in ["reno", "newreno"] {
        let sc = dumbbell(
            "rate_kbps: 1000, delay_ms: 20, queue: {kind: droptail, limit_ms: 120}",
            &format!("  - {{name: tcp, type: tcp, variant: {variant}, from: s, to: d}}"),
            60,
        );
        let (_, s) = sim::run(&sc, 1).unwrap();
        let t = &s.monitors[0];
        // Goodput of a lone Reno over a 2×BDP buffer: above 90% of 1 Mb/s.
        assert!(
            t.throughput_kbps > 900.0,
            "{variant}: {}",
            t.throughput_kbps
        );
        assert!(t.throughput_kbps <= 1000.0);
    }
}

#[test]
fn two_tcps_share_a_droptail_link_and_fq_protects_tcp_from_cbr() {
    let sc = dumbbell(
        "rate_kbps: 1000, delay_ms: 20, queue: {kind: droptail, limit_ms: 120}",
        "  - {name: a, type: tcp, from: s, to: d}\n  - {name: b, type: tcp, from: s, to: d, start_s: 5}",
        100,
    );
    let (sim_ab, _) = sim::run(&sc, 3).unwrap();
    let m = &sim_ab.net.monitors.list;
    let (a, b) = (
        m[0].throughput_kbps(1.0, 30.0, 100.0),
        m[1].throughput_kbps(1.0, 30.0, 100.0),
    );
    assert!(a + b > 900.0, "{a} + {b}");
    assert!(sim::metrics::jain(&[a, b]) > 0.9, "{a} vs {b}");

    let flows = "  - {name: tcp, type: tcp, from: s, to: d}\n  - {name: cbr, type: cbr, from: s, to: d, rate_kbps: 1500, start_s: 5}";
    let fifo = dumbbell(
        "rate_kbps: 1000, delay_ms: 20, queue: {kind: droptail, limit_ms: 120}",
        flows,
        60,
    );
    let fq = dumbbell(
        "rate_kbps: 1000, delay_ms: 20, queue: {kind: fq, per_flow_packets: 20}",
        flows,
        60,
    );
    let (s_fifo, _) = sim::run(&fifo, 1).unwrap();
    let (s_fq, _) = sim::run(&fq, 1).unwrap();
    let tcp_fifo = s_fifo.net.monitors.list[0].throughput_kbps(1.0, 20.0, 60.0);
    let tcp_fq = s_fq.net.monitors.list[0].throughput_kbps(1.0, 20.0, 60.0);
    assert!(
        tcp_fifo < 150.0,
        "unresponsive CBR starves TCP on FIFO: {tcp_fifo}"
    );
    assert!(tcp_fq > 400.0, "fair queuing gives TCP its half: {tcp_fq}");
}

#[test]
fn fixed_receiver_gets_its_layers_and_loses_nothing_below_capacity() {
    let sc = dumbbell(
        "rate_kbps: 300, delay_ms: 20, queue: {kind: droptail, limit_ms: 100}",
        "  - {name: l, type: layered, protocol: sim-fixed-10, from: s, layers: {count: 20, rate_kbps: 20}, receivers: [{name: r, at: d, start_s: 2}]}",
        30,
    );
    let (sim, s) = sim::run(&sc, 1).unwrap();
    let m = &sim.net.monitors.list[0];
    assert_eq!(m.level_at(29.0), 10);
    assert_eq!(s.monitors[0].lost, 0);
    let thr = m.throughput_kbps(1.0, 5.0, 30.0);
    assert!((thr - 200.0).abs() < 5.0, "{thr}");
    // The sender's other 10 layers never crossed the first link: pruned at the source.
    let sent = s
        .links
        .iter()
        .find(|l| l.name == "s-r0")
        .unwrap()
        .sent_packets as f64;
    assert!(
        sent < 1.05 * 200.0 * 30.0 / (512.0 * 8.0 / 1000.0),
        "sent {sent}"
    );
}

#[test]
fn bad_scenarios_are_errors() {
    for bad in [
        "name: x\nduration_s: 1\ntopology: {nodes: [a], links: [{from: a, to: b, rate_kbps: 1, delay_ms: 1}]}\nflows: []",
        "name: x\nduration_s: -1\ntopology: {nodes: [a], links: []}\nflows: []",
        "name: x\nduration_s: 1\ntopology: {nodes: [a], links: []}\nflows: [{name: c, type: cbr, from: a, to: a, rate_kbps: 1}]\nmeasurements: [{id: m, metric: nonsense, of: [c]}]",
        "name: x\nduration_s: 1\nbogus: 1\ntopology: {nodes: [a], links: []}\nflows: []",
        "name: x\nduration_s: 1\ntopology: {nodes: [a], links: []}\nflows: [{name: l, type: layered, protocol: nope, from: a, layers: {count: 2, rate_kbps: 1}, receivers: []}]",
    ] {
        let r = Scenario::from_yaml(bad).and_then(|s| s.build(1).map(|_| ()));
        assert!(r.is_err(), "accepted: {bad}");
    }
}

#[test]
fn receiver_references_expand_counts_but_not_similar_names() {
    let sc = Scenario::from_yaml(
        r#"
name: x
duration_s: 1
topology: {nodes: [a, b], links: [{from: a, to: b, rate_kbps: 1000, delay_ms: 1}]}
flows:
  - {name: l, type: layered, protocol: sim-fixed-1, from: a, layers: {count: 2, rate_kbps: 10},
     receivers: [{name: v, at: b}, {name: v-tcp, at: b}, {name: w, at: b, count: 3}]}
"#,
    )
    .unwrap();
    assert_eq!(sc.expand(&["l/v".into()]).unwrap(), vec!["l/v"]);
    assert_eq!(
        sc.expand(&["l/w".into()]).unwrap(),
        vec!["l/w-1", "l/w-2", "l/w-3"]
    );
    assert_eq!(sc.expand(&["l".into()]).unwrap().len(), 5);
}
