//! Per-report cost of the TFMCC sender and per-packet cost of the TFMCC receiver.
// `u32::is_multiple_of` needs Rust 1.87; the workspace promises 1.80.
#![allow(unknown_lints, clippy::manual_is_multiple_of)]

use congestion::tfmcc::{TfmccConfig, TfmccReceiver, TfmccSender};
use congestion::wire::tfmcc::{Echo, TfmccDataFields, TfmccReport};
use congestion::{LayeredController, Time};
use criterion::{black_box, criterion_group, criterion_main, Criterion};

fn report(rid: u32, round: u16, echo_ts: u32, rate: u32) -> Vec<u8> {
    TfmccReport {
        rid,
        round,
        have_rtt: rid % 3 != 0,
        have_loss: true,
        leave: false,
        is_clr: false,
        ts_us: rid,
        echo_ts_us: echo_ts,
        x_rate: rate,
        x_recv: rate,
        rtt_us: 100_000,
        p_fixed: 40_000_000,
        auth: Default::default(),
    }
    .to_bytes()
}

fn sender_per_report(c: &mut Criterion) {
    let mut s = TfmccSender::new(TfmccConfig::default());
    let mut t_us = 1_000_000u64;
    // Warm up: a CLR and some rounds.
    for i in 0..2000u32 {
        let h = s.data_header(Time::from_micros(t_us));
        let _ = s.handle_report(
            Time::from_micros(t_us + 100_000),
            &report(i % 50, h.round, h.ts_us, 100_000 + (i % 50) * 1000),
        );
        t_us += 10_000;
    }
    let mut i = 0u32;
    c.bench_function("tfmcc_sender_handle_report", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            t_us += 1_000;
            let now = Time::from_micros(t_us);
            let bytes = report(
                1000 + i % 1000,
                s.stats().round,
                (t_us - 100_000) as u32,
                150_000 + i % 7919,
            );
            let _ = black_box(s.handle_report(now, black_box(&bytes)));
            black_box(s.data_header(now));
        })
    });
}

fn receiver_per_packet(c: &mut Criterion) {
    let mut rx = TfmccReceiver::new(TfmccConfig::default(), 7);
    let mut seq = 0u32;
    let mut t_us = 0u64;
    c.bench_function("tfmcc_receiver_handle_data", |b| {
        b.iter(|| {
            seq = seq.wrapping_add(1);
            t_us += 1_000;
            if seq % 97 == 0 {
                seq = seq.wrapping_add(1); // a loss now and then
            }
            let now = Time::from_micros(t_us);
            let f = TfmccDataFields {
                seq,
                ts_us: (t_us as u32).wrapping_sub(50_000),
                round: (seq / 500) as u16,
                slow_start: false,
                supp_from_loss: true,
                max_rtt_us: 120_000,
                x_supp: 90_000,
                x_send: 100_000,
                echo: Some(Echo {
                    rid: if seq % 10 == 0 { 7 } else { 9 },
                    ts_us: (t_us as u32).wrapping_sub(100_000),
                    is_clr: false,
                }),
            };
            rx.handle_data(now, black_box(&f), 1000);
            rx.handle_timeout(now);
            while let Some(a) = rx.poll_action() {
                black_box(a);
            }
        })
    });
}

criterion_group!(benches, sender_per_report, receiver_per_packet);
criterion_main!(benches);
