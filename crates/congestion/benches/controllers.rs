//! Per-packet cost of the ERA and PLM receivers' `handle_packet` (target ≥ 5 M packets/s per
//! core). The stream is the thesis ladder (100 × 20 kbit/s, 512-byte pairs) from the crate's
//! own sender schedule, every layer held, pairs spaced as by a 2.5 Mbit/s bottleneck, 0.1% of
//! packets lost (deterministic), with the controller's timeouts (RAIs) served in between as a
//! host would. Run: `cargo bench -p layercast-congestion --bench controllers`.

use congestion::era::Era;
use congestion::plm::Plm;
use congestion::schedule::Schedule;
use congestion::{LayeredController, PacketArrival, SessionInfo, Time};
use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use std::net::Ipv4Addr;
use std::time::Duration;

fn session() -> SessionInfo {
    SessionInfo::equal_layers(100, 20_000, Ipv4Addr::new(239, 1, 0, 0), 5000)
}

/// `secs` seconds of arrivals starting at `from`.
fn stream(info: &SessionInfo, from: Time, secs: f64) -> Vec<PacketArrival> {
    let mut s = Schedule::new(info, from).unwrap();
    let gap = Duration::from_secs_f64(8.0 * info.packet_size as f64 / 2.5e6);
    let end = from + Duration::from_secs_f64(secs);
    let mut seq = vec![0u64; info.layers.len()];
    let mut out = Vec::new();
    let mut lcg = 12345u64;
    loop {
        let b = s.next_bunch();
        if b.at >= end {
            break;
        }
        for pos in 0..b.count {
            lcg = lcg.wrapping_mul(6364136223846793005).wrapping_add(1);
            let sq = seq[b.layer as usize];
            seq[b.layer as usize] += 1;
            if (lcg >> 33) % 1000 < 1 {
                continue; // lost
            }
            let t = b.at + gap * (pos as u32 + 1);
            out.push(PacketArrival {
                layer: b.layer,
                seq: sq,
                bunch_pos: pos,
                bunch_len: b.count,
                size: info.packet_size as u32,
                send_time_us: b.at.as_micros(),
                recv_time: t,
            });
        }
    }
    out.sort_by_key(|p| p.recv_time);
    out
}

/// Feeds `pkts` like a host: deadlines first, actions and decisions drained.
fn drive(c: &mut dyn LayeredController, pkts: &[PacketArrival]) -> usize {
    let mut n = 0;
    for p in pkts {
        while let Some((t, _)) = c.poll_timeout() {
            if t > p.recv_time {
                break;
            }
            c.handle_timeout(t);
        }
        c.handle_packet(p.recv_time, p);
        while c.poll_action().is_some() {
            n += 1;
        }
        while c.poll_decision().is_some() {
            n += 1;
        }
    }
    n
}

fn warmed(
    mut c: Box<dyn LayeredController>,
    info: &SessionInfo,
    warm: &[PacketArrival],
) -> Box<dyn LayeredController> {
    c.handle_announcement(Time::ZERO, info);
    drive(c.as_mut(), warm);
    c
}

fn bench(cr: &mut Criterion) {
    let info = session();
    // Warm-up: long enough for either controller to climb to all 100 layers.
    let warm = stream(&info, Time::ZERO, 6.0);
    let meas = stream(&info, Time::from_secs_f64(6.0), 10.0);
    let mut g = cr.benchmark_group("handle_packet");
    g.throughput(Throughput::Elements(meas.len() as u64));
    for (name, mk) in [
        (
            "era",
            (|| Box::new(Era::default()) as Box<dyn LayeredController>)
                as fn() -> Box<dyn LayeredController>,
        ),
        ("plm", || {
            Box::new(Plm::default()) as Box<dyn LayeredController>
        }),
    ] {
        let probe = warmed(mk(), &info, &warm);
        assert_eq!(probe.layers(), 100, "{name} did not climb to all layers");
        g.bench_function(name, |b| {
            b.iter_batched(
                || warmed(mk(), &info, &warm),
                |mut c| drive(c.as_mut(), &meas),
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
