//! The TFMCC influence limiter: per-source token bucket, per-receiver replay check, and the
//! cap on how far one receiver id (and all together) can pull the rate down per window.

use proptest::prelude::*;
use proto::{Error, Time};
use security::auth::{InfluenceConfig, InfluenceLimiter};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

/// The default (and shortest) limiter window.
const W: Duration = Duration::from_secs(1);

fn ip(n: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(10, 0, 0, n))
}

fn t(ms: u64) -> Time {
    Time::from_millis(ms)
}

#[test]
fn one_receiver_halves_at_most_per_window() {
    let mut l = InfluenceLimiter::new(InfluenceConfig::default());
    let mut rate = 1_000_000.0;
    // A receiver asks for 1 kB/s over and over within one window: the rate stops at half.
    for i in 0..50 {
        rate = l.clamp(t(i), 7, rate, 1_000.0, W);
    }
    assert_eq!(rate, 500_000.0);
    // Next window: another halving, and so on; the target is reached in log2(1000) windows.
    let mut windows = 1;
    while rate > 1_000.0 {
        rate = l.clamp(t(1000 * windows), 7, rate, 1_000.0, W);
        windows += 1;
        assert!(windows < 20);
    }
    assert_eq!(rate, 1_000.0);
    assert_eq!(windows, 10); // 1e6 / 2^10 < 1e3 <= 1e6 / 2^9
                             // Requests at or above the current rate are never touched.
    assert_eq!(l.clamp(t(99_000), 7, rate, 5_000.0, W), 5_000.0);
    assert!(l.stats().clamped >= 10);
}

/// F8: the TFMCC sender passes its feedback round or R_max as the window, a few milliseconds
/// on a LAN. A persistent liar sending a report every millisecond for 10 s must not take the
/// rate below rid_floor per second (before the 1-s minimum window it reached 1/1000 of the
/// rate in about 2 s), nor below the configured floor ever.
#[test]
fn a_liar_is_limited_per_second_whatever_window_the_caller_passes() {
    let cfg = InfluenceConfig {
        min_rate: 20_000.0,
        ..InfluenceConfig::default()
    };
    let mut l = InfluenceLimiter::new(cfg);
    let mut rate = 1_000_000.0;
    for ms in 0..2_000u64 {
        rate = l.clamp(t(ms), 9, rate, 1.0, Duration::from_millis(1));
    }
    // Two seconds: at most two halvings.
    assert!(rate >= 250_000.0, "rate {rate} after 2 s");
    for ms in 2_000..10_000u64 {
        rate = l.clamp(t(ms), 9, rate, 1.0, Duration::from_millis(1));
    }
    assert!(rate >= 20_000.0, "rate {rate} under the floor after 10 s");
}

#[test]
fn a_modest_decrease_passes_unchanged() {
    let mut l = InfluenceLimiter::new(InfluenceConfig::default());
    // A decrease to 60 % is within the cap: the sender acts on it at once (TFMCC as specified).
    assert_eq!(l.clamp(t(0), 1, 100_000.0, 60_000.0, W), 60_000.0);
    assert_eq!(l.stats().clamped, 0);
}

#[test]
fn many_receivers_together_are_bounded_by_the_global_floor() {
    let mut l = InfluenceLimiter::new(InfluenceConfig::default());
    let mut rate = 1_000_000.0;
    // 100 distinct ids each ask for 1 B/s within one window.
    for rid in 0..100 {
        rate = l.clamp(t(rid as u64), rid, rate, 1.0, W);
    }
    assert_eq!(rate, 250_000.0);
}

#[test]
fn min_rate_is_a_hard_floor_but_never_raises_the_rate() {
    let cfg = InfluenceConfig {
        min_rate: 10_000.0,
        ..InfluenceConfig::default()
    };
    let mut l = InfluenceLimiter::new(cfg);
    assert_eq!(l.clamp(t(0), 1, 12_000.0, 1.0, W), 10_000.0);
    // Already below the floor (the sender's own timeout halving did that): no further cut,
    // and no raise either.
    assert_eq!(l.clamp(t(1000), 1, 8_000.0, 1.0, W), 8_000.0);
}

#[test]
fn per_source_token_bucket() {
    let cfg = InfluenceConfig {
        reports_per_sec: 10.0,
        burst: 5.0,
        ..InfluenceConfig::default()
    };
    let mut l = InfluenceLimiter::new(cfg);
    for _ in 0..5 {
        l.admit(t(0), ip(1)).unwrap();
    }
    assert!(matches!(
        l.admit(t(0), ip(1)),
        Err(Error::RateLimited { .. })
    ));
    // Another source is independent.
    l.admit(t(0), ip(2)).unwrap();
    // 100 ms later one token has come back, not two.
    l.admit(t(100), ip(1)).unwrap();
    assert!(l.admit(t(100), ip(1)).is_err());
    // A flood of 1000 reports in one second gets burst + rate through.
    let mut ok = 0;
    for i in 0..1000 {
        if l.admit(t(10_000 + i), ip(3)).is_ok() {
            ok += 1;
        }
    }
    assert_eq!(ok, 5 + 9); // 5 burst + 999 ms × 10/s (the 10th token lands at 1000 ms)
    let s = l.stats();
    assert_eq!(s.admitted, 5 + 1 + 1 + 14);
    assert_eq!(s.rate_limited, 2 + 986);
}

#[test]
fn source_table_is_bounded_and_idle_entries_make_room() {
    let cfg = InfluenceConfig {
        max_entries: 2,
        idle: Duration::from_secs(10),
        ..InfluenceConfig::default()
    };
    let mut l = InfluenceLimiter::new(cfg);
    l.admit(t(0), ip(1)).unwrap();
    l.admit(t(0), ip(2)).unwrap();
    assert!(matches!(
        l.admit(t(5_000), ip(3)),
        Err(Error::RateLimited { .. })
    ));
    // Known sources still pass while the table is full.
    l.admit(t(5_000), ip(1)).unwrap();
    // ip(2) has been idle 10 s: it is forgotten to make room.
    l.admit(t(10_000), ip(3)).unwrap();
}

#[test]
fn a_full_table_is_scanned_at_most_once_per_second() {
    let cfg = InfluenceConfig {
        max_entries: 2,
        idle: Duration::from_secs(10),
        ..InfluenceConfig::default()
    };
    let mut l = InfluenceLimiter::new(cfg);
    l.admit(t(0), ip(1)).unwrap();
    l.admit(t(0), ip(2)).unwrap();
    // Scan at 9.5 s: nothing idle yet, refused.
    assert!(l.admit(t(9_500), ip(3)).is_err());
    // At 10 s both entries are idle, but the last scan was 0.5 s ago: still refused (a flood
    // of new addresses against a full table costs a lookup, not a scan, per report).
    assert!(l.admit(t(10_000), ip(4)).is_err());
    // At 10.5 s a scan is due again and makes room.
    l.admit(t(10_500), ip(5)).unwrap();
}

#[test]
fn report_timestamps_must_advance_per_receiver() {
    let mut l = InfluenceLimiter::new(InfluenceConfig::default());
    l.check_fresh(t(0), 5, 1_000).unwrap();
    assert!(matches!(
        l.check_fresh(t(1), 5, 1_000),
        Err(Error::Replayed { .. })
    ));
    assert!(l.check_fresh(t(1), 5, 999).is_err());
    l.check_fresh(t(2), 5, 1_001).unwrap();
    // Other receivers are independent; the 32-bit clock may wrap.
    l.check_fresh(t(3), 6, u32::MAX - 10).unwrap();
    // F9: a receiver silent for 40 minutes (more than 2^31 µs of its clock) is heard again.
    let later = 1_000u32.wrapping_add(2_400_000_000);
    l.check_fresh(t(40 * 60 * 1000), 5, later).unwrap();
    // ... and its sequence continues from there.
    assert!(l.check_fresh(t(40 * 60 * 1000 + 1), 5, later).is_err());
    l.check_fresh(t(4), 6, 5).unwrap();
    assert!(l.check_fresh(t(5), 6, u32::MAX - 5).is_err());
    assert_eq!(l.stats().replayed, 4);
}

proptest! {
    /// Within one window, no sequence of reports from one receiver id takes the rate below
    /// rid_floor × the rate at the window's start, and no sequence from any set of ids below
    /// global_floor × that rate; a decrease request never raises the rate.
    #[test]
    fn floors_hold_within_a_window(
        start in 1.0f64..1e9,
        reqs in proptest::collection::vec((0u32..8, 0.0f64..2.0), 1..100),
        rid_floor in 0.05f64..1.0,
        global_floor in 0.0f64..1.0,
    ) {
        let cfg = InfluenceConfig { rid_floor, global_floor, ..InfluenceConfig::default() };
        let mut l = InfluenceLimiter::new(cfg);
        let mut rate = start;
        let mut g_start: Option<f64> = None;
        let mut r_start = std::collections::HashMap::new();
        for (i, (rid, frac)) in reqs.into_iter().enumerate() {
            let asked = rate * frac;
            // All within one window of 1 s.
            let got = l.clamp(Time::from_micros(i as u64), rid, rate, asked, Duration::from_secs(1));
            if asked >= rate {
                prop_assert_eq!(got, asked);
            } else {
                let g = *g_start.get_or_insert(rate);
                let r0 = *r_start.entry(rid).or_insert(rate);
                prop_assert!(got <= rate, "decrease request raised the rate");
                prop_assert!(got >= asked);
                // This receiver's own cap.
                prop_assert!(got >= f64::min(rate, r0 * rid_floor) * (1.0 - 1e-12));
                // All receivers together.
                prop_assert!(got >= g * global_floor * (1.0 - 1e-12));
            }
            rate = got;
        }
        // With one receiver id only, the rid floor holds against the start rate.
        let mut l = InfluenceLimiter::new(InfluenceConfig { rid_floor, global_floor: 0.0, ..InfluenceConfig::default() });
        let mut r = start;
        for i in 0..50u64 {
            r = l.clamp(Time::from_micros(i), 1, r, 0.0, Duration::from_secs(1));
            prop_assert!(r >= start * rid_floor * (1.0 - 1e-12));
        }
    }

    /// A receiver that keeps asking for a lower rate gets there: after k windows the rate is
    /// at most max(target, start × rid_floor^k) (the cap slows a decrease, never stops it).
    #[test]
    fn persistent_requests_converge(start in 1e3f64..1e9, target_frac in 0.0f64..1.0, k in 1u32..12) {
        let mut l = InfluenceLimiter::new(InfluenceConfig { global_floor: 0.0, ..InfluenceConfig::default() });
        let target = start * target_frac;
        let mut r = start;
        for w in 0..k {
            r = l.clamp(Time::from_millis(w as u64 * 1000), 3, r, target, W);
        }
        let bound = f64::max(target, start * 0.5f64.powi(k as i32));
        prop_assert!(r <= bound * (1.0 + 1e-12), "rate {} above {}", r, bound);
        prop_assert!(r >= target);
    }
}
