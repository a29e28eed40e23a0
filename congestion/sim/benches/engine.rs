//! Engine throughput: events per second on one core for a dumbbell with a layered session,
//! a TCP flow and CBR cross traffic (the catalogue's typical mix).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sim::scenario::Scenario;

const SCENARIO: &str = r#"
name: bench
duration_s: 20
topology:
  nodes: [s, r0, r1, d]
  multicast: {fast_leave: true}
  links:
    - {from: s, to: r0, rate_kbps: 100000, delay_ms: 1, queue: {kind: droptail, limit_packets: 1000}}
    - {from: r0, to: r1, rate_kbps: 20000, delay_ms: 10, queue: {kind: droptail, limit_ms: 40}}
    - {from: r1, to: d, rate_kbps: 100000, delay_ms: 1, queue: {kind: droptail, limit_packets: 1000}}
flows:
  - {name: lay, type: layered, protocol: sim-fixed-40, from: s, layers: {count: 40, rate_kbps: 200}, receivers: [{name: r, at: d}]}
  - {name: tcp, type: tcp, from: s, to: d, packet_size: 1000}
  - {name: cbr, type: cbr, from: s, to: d, rate_kbps: 4000, packet_size: 500}
"#;

fn engine(c: &mut Criterion) {
    let sc = Scenario::from_yaml(SCENARIO).expect("bench scenario");
    let (_, s) = sim::run(&sc, 1).expect("run");
    let mut g = c.benchmark_group("engine");
    g.throughput(Throughput::Elements(s.events));
    g.sample_size(10);
    g.bench_function("dumbbell-20s", |b| {
        b.iter(|| sim::run(&sc, 1).expect("run").1.events)
    });
    g.finish();
    // One plain timed run for the acceptance table (criterion's own numbers are in its report).
    let t0 = std::time::Instant::now();
    let (_, s) = sim::run(&sc, 1).expect("run");
    let rate = s.events as f64 / t0.elapsed().as_secs_f64();
    testkit::record(
        "issue4/bench-events",
        &format!(
            "{:.2} M events/s (dumbbell: 40-layer session, TCP, CBR; 20 s)",
            rate / 1e6
        ),
        Some(rate >= 2e6),
        "cargo bench -p layercast-sim --bench engine",
    );
}

criterion_group!(benches, engine);
criterion_main!(benches);
