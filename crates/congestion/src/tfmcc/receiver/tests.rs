//! Tests of `receiver`.

use super::*;

/// The memo returns exactly `Duration::from_secs_f64` for repeated, changing and
/// out-of-range (not stored) inputs.
#[test]
fn secs_memo_equals_conversion() {
    let mut m = SecsMemo::ZERO;
    let xs = [
        0.0,
        0.0,
        1e-3,
        1e-3,
        0.3,
        0.30000000000000004,
        0.3,
        1e4,
        1e-9,
        5e-10,
        1e10,
        2e10,
        2e10,
        1.5,
        0.0,
    ];
    for (k, &x) in xs.iter().enumerate() {
        assert_eq!(m.get(x), Duration::from_secs_f64(x), "step {k}: {x}");
    }
    // 2^64 ns is ~584 years: beyond it the value is returned but not memoised.
    let big = 1e11;
    assert_eq!(m.get(big), Duration::from_secs_f64(big));
    assert_eq!(m.get(big), Duration::from_secs_f64(big));
    assert_eq!(m.get(0.5), Duration::from_millis(500));
}

/// The lazily pruned receive-rate window gives exactly the rate the eager one (pop the
/// front on every packet) gave, while the window shrinks and grows (R_max and X_send
/// change) and after losses (when the lazy path is taken).
#[test]
fn lazy_window_equals_eager_window() {
    let mut rx = TfmccReceiver::new(TfmccConfig::default(), 7);
    let info = SessionInfo::equal_layers(1, 1, std::net::Ipv4Addr::new(239, 2, 0, 0), 6000);
    rx.handle_announcement(Time::ZERO, &info);
    let mut eager: VecDeque<(Time, u32)> = VecDeque::new();
    let mut first = None;
    let mut t_us: u64 = 1_000;
    let mut seq: u32 = 0;
    let mut lazy_steps = 0;
    let mut max_live = 0;
    for i in 0..4000u64 {
        // Phases of R_max and rate: the window is 3 R_max or 4 packet gaps.
        let max_rtt_us = [40_000u32, 300_000, 5_000, 120_000][(i / 500 % 4) as usize];
        let x_send = [125_000u32, 20_000, 400_000][(i / 700 % 3) as usize];
        let size = 500 + (i % 7) as u32 * 100;
        t_us += 200 + (i * 7919 % 13) * 700;
        seq += if i % 97 == 50 { 5 } else { 1 }; // a hole now and then: losses
        let now = Time::from_micros(t_us);
        let f = TfmccDataFields {
            seq,
            ts_us: t_us as u32,
            round: (i / 300) as u16,
            slow_start: false,
            supp_from_loss: false,
            max_rtt_us,
            x_supp: RATE_INFINITE,
            x_send,
            echo: None,
        };
        rx.handle_data(now, &f, size);
        while rx.poll_action().is_some() {}
        // Reference: no echo for this receiver, so the RTT in use is R_max.
        first.get_or_insert(now);
        eager.push_back((now, size));
        let window = (3.0 * (max_rtt_us as f64 / 1e6).max(1e-3))
            .max(4.0 * rx.s / x_send as f64)
            .clamp(1e-3, 1e4);
        let horizon = now - Duration::from_secs_f64(window);
        while eager.front().is_some_and(|e| e.0 <= horizon) {
            eager.pop_front();
        }
        max_live = max_live.max(eager.len());
        let bytes: u64 = eager.iter().map(|e| u64::from(e.1)).sum();
        let span = (now - first.unwrap()).as_secs_f64().clamp(1e-3, window);
        let want = if eager.is_empty() {
            0.0
        } else {
            bytes as f64 / span
        };
        assert_eq!(rx.x_recv(now).to_bits(), want.to_bits(), "packet {i}");
        if rx.have_loss() && rx.arrivals.len() > eager.len() {
            lazy_steps += 1;
        }
    }
    assert!(rx.have_loss());
    assert!(lazy_steps > 100, "lazy path exercised {lazy_steps} times");
    // The ring only grows with the live window: at most four times its peak.
    assert!(
        rx.arrivals.capacity() <= 4 * max_live.max(8),
        "capacity {} for a peak window of {max_live}",
        rx.arrivals.capacity()
    );
}
