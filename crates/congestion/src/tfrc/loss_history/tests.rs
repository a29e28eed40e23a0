//! Tests of `loss_history`.

use super::*;

fn ali_with(closed: &[f64], open: f64, discounting: bool) -> LossIntervals {
    let mut a = LossIntervals::new(AliConfig {
        discounting,
        ..AliConfig::default()
    });
    for &c in closed.iter().rev() {
        a.close(c);
    }
    a.set_open(open);
    a
}

/// The inline weights equal the computed ones bit for bit.
#[test]
fn inline_weights_equal_computed_bit_for_bit() {
    for n in 2..=20 {
        let w = ali_weights(n);
        for (i, wi) in w.iter().enumerate() {
            assert_eq!(weight(n, i).to_bits(), wi.to_bits(), "n {n} i {i}");
        }
    }
}

/// n = 12 spills the closed list to the heap: same filter behaviour (oldest dropped).
#[test]
fn large_n_keeps_newest_n() {
    let mut a = LossIntervals::new(AliConfig {
        n: 12,
        discounting: false,
        discount_floor: 0.5,
    });
    for k in 1..=15 {
        a.close(k as f64 * 10.0);
    }
    let c: Vec<f64> = a.closed().map(|e| e.0).collect();
    let want: Vec<f64> = (4..=15).rev().map(|k| k as f64 * 10.0).collect();
    assert_eq!(c, want);
    // Uniform weights on the newest half, tapering after: the mean lies between.
    let m = a.mean_closed().unwrap();
    assert!(m > 40.0 && m < 150.0, "{m}");
}

/// U3: weights and the §1.4 test vectors.
#[test]
fn u3_weights_and_vectors() {
    let h = [100.0; 8];
    let m = |open, d| ali_with(&h, open, d).mean().unwrap();
    let got = [
        m(50.0, true),
        m(300.0, false),
        m(300.0, true),
        m(1000.0, false),
        m(1000.0, true),
    ];
    let want = [100.0, 400.0 / 3.0, 1900.0 / 13.0, 250.0, 2500.0 / 7.0];
    let worst = got
        .iter()
        .zip(want)
        .map(|(g, w)| (g - w).abs())
        .fold(0.0f64, f64::max);
    let w8 = ali_weights(8);
    let weights_ok = w8 == vec![1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2];
    testkit::record(
        "tfmcc/U3",
        &format!(
            "weights {w8:?}; vectors {:.4} / {:.4} / {:.4} / {:.4} / {:.4} \
             (spec 100 / 133.3 / 146.2 / 250 / 357.1; max error {worst:.1e})",
            got[0], got[1], got[2], got[3], got[4]
        ),
        Some(weights_ok && worst < 1e-9),
        "cargo test --release -p layercast-congestion --lib u3_weights_and_vectors",
    );
    assert_eq!(ali_weights(8), vec![1.0, 1.0, 1.0, 1.0, 0.8, 0.6, 0.4, 0.2]);
    assert!(worst < 1e-9, "{got:?}");
    assert!((m(50.0, true) - 100.0).abs() < 1e-9);
    assert!((m(300.0, false) - 133.333).abs() < 1e-3);
    assert!(
        (m(300.0, true) - 146.154).abs() < 1e-3,
        "{}",
        m(300.0, true)
    );
    assert!((m(1000.0, false) - 250.0).abs() < 1e-9);
    assert!((m(1000.0, true) - 357.143).abs() < 1e-3);
    assert!((ali_with(&h, 50.0, true).loss_event_rate() - 0.01).abs() < 1e-12);
}

/// U6: discount factors move with their intervals and never rise.
#[test]
fn u6_discount_factors_stick() {
    let mut a = ali_with(&[100.0; 8], 0.0, true);
    a.set_open(1000.0);
    assert_eq!(a.discount(), 0.5);
    a.close(1000.0);
    let f: Vec<f64> = a.closed().map(|e| e.1).collect();
    assert_eq!(f[0], 1.0);
    assert!(f[1..].iter().all(|&x| x == 0.5), "{f:?}");
    // A short interval now: no new discount, old factors stay at 0.5.
    a.set_open(10.0);
    a.close(10.0);
    let g: Vec<f64> = a.closed().map(|e| e.1).collect();
    assert_eq!(g[0..2], [1.0, 1.0]);
    assert!(g[2..].iter().all(|&x| x == 0.5), "{g:?}");
    // Another long one: the already-discounted ones go further down, never up.
    a.set_open(5000.0);
    let d = a.discount();
    a.close(5000.0);
    let h: Vec<f64> = a.closed().map(|e| e.1).collect();
    let rose = h[1..].iter().zip(g.iter()).filter(|(n, o)| n > o).count();
    let moved = h[1..]
        .iter()
        .zip(g.iter())
        .all(|(&new, &old)| (new - old * d).abs() < 1e-12);
    testkit::record(
        "tfmcc/U6",
        &format!(
            "factors after a long interval {f:?}; after a short one {g:?} (shifted with \
             their intervals, none rose); after a second long one (discount {d:.4}) {h:?}: \
             {rose} rose, each = old x {d:.4}: {moved}"
        ),
        Some(rose == 0 && moved && f[0] == 1.0 && g[0..2] == [1.0, 1.0]),
        "cargo test --release -p layercast-congestion --lib u6_discount_factors_stick",
    );
    for (i, (&new, &old)) in h[1..].iter().zip(g.iter()).enumerate() {
        assert!(new <= old, "factor {i} rose: {old} -> {new}");
        assert!((new - old * d).abs() < 1e-12);
    }
}

/// Fewer than n intervals: averaged over what there is.
#[test]
fn short_history_uses_first_k_weights() {
    let a = ali_with(&[50.0, 150.0], 10.0, false);
    assert!((a.mean().unwrap() - 100.0).abs() < 1e-9);
    let b = ali_with(&[80.0], 200.0, false);
    assert!((b.mean().unwrap() - 200.0).abs() < 1e-9);
}

fn run_periodic(h: &mut LossHistory, from: u64, to: u64, period: u64, rtt: f64) -> Vec<f64> {
    let mut ps = Vec::new();
    for seq in from..to {
        if seq % period == period - 1 {
            continue; // lost
        }
        let out = h.on_packet(seq, Time::from_millis(seq), rtt);
        if out.first_event {
            h.seed_first_interval(period as f64);
        }
        ps.push(h.loss_event_rate());
    }
    ps
}

/// U4: periodic loss 1/100: after 9 loss events p is exactly 0.01 and stays there.
#[test]
fn u4_periodic_loss() {
    let mut h = LossHistory::new(AliConfig::default(), 3);
    let mut after = Vec::new();
    for seq in 0..5000u64 {
        if seq % 100 == 99 {
            continue;
        }
        let out = h.on_packet(seq, Time::from_millis(seq * 10), 0.05);
        if out.first_event {
            // Seed with something unrelated: it must be pushed out by 9 events.
            h.seed_first_interval(7.0);
        }
        if h.counters().2 >= 9 {
            after.push(h.loss_event_rate());
        }
    }
    let max_dev = after
        .iter()
        .map(|p| (p - 0.01).abs())
        .fold(0.0f64, f64::max);
    // Zero variance: every value after the 9th event is the same number, bit for bit.
    let mut distinct: Vec<u64> = after.iter().map(|p| p.to_bits()).collect();
    distinct.sort_unstable();
    distinct.dedup();
    let mean = after.first().copied().unwrap_or(f64::NAN);
    testkit::record(
        "tfmcc/U4",
        &format!(
            "1 loss per 100 packets, 5000 packets: after the 9th loss event p = {mean:.10} \
             over {} packets, max |p - 0.01| = {max_dev:.1e}, {} distinct value(s), i.e. \
             zero variance (seeded with 7 packets, pushed out)",
            after.len(),
            distinct.len()
        ),
        Some(!after.is_empty() && max_dev < 1e-9 && distinct.len() == 1),
        "cargo test --release -p layercast-congestion --lib u4_periodic_loss",
    );
    assert!(!after.is_empty());
    for p in &after {
        assert!((p - 0.01).abs() < 1e-9, "{p}");
    }
    assert_eq!(distinct.len(), 1);
    // The loss at 4999 has no later packets yet, so 49 are known.
    assert_eq!(h.counters().1, 49);
}

/// U5: losses within one RTT of an event's first loss are one event; later ones new.
#[test]
fn u5_loss_event_aggregation() {
    let mut h = LossHistory::new(AliConfig::default(), 3);
    // 1 ms per packet, RTT 50 ms. Lose 10,11,12,20,40 (all within 50 ms of 10): 1 event.
    let lost = [10u64, 11, 12, 20, 40, 61, 200];
    for seq in 0..300u64 {
        if lost.contains(&seq) {
            continue;
        }
        let out = h.on_packet(seq, Time::from_millis(seq), 0.050);
        if out.first_event {
            h.seed_first_interval(100.0);
        }
    }
    // 61 is 51 ms after 10 -> new event; 200 -> new event.
    let closed: Vec<f64> = h.intervals().closed().map(|e| e.0).collect();
    testkit::record(
        "tfmcc/U5",
        &format!(
            "RTT 50 ms, 1 packet/ms, lost 10,11,12,20,40 (within 1 RTT of 10), 61 (51 ms \
             after 10), 200: {} losses -> {} loss events (want 7 -> 3); closed intervals \
             {closed:?}",
            h.counters().1,
            h.counters().2
        ),
        Some(h.counters().2 == 3 && h.counters().1 == 7 && closed == [139.0, 51.0, 100.0]),
        "cargo test --release -p layercast-congestion --lib u5_loss_event_aggregation",
    );
    assert_eq!(h.counters().2, 3);
    assert_eq!(h.counters().1, 7);
    assert_eq!(closed, vec![139.0, 51.0, 100.0]);
}

#[test]
fn reordering_below_ndupack_is_not_loss() {
    let mut h = LossHistory::new(AliConfig::default(), 3);
    for seq in [0u64, 1, 3, 4, 2, 5, 6, 8, 9, 7, 10] {
        let out = h.on_packet(seq, Time::from_millis(seq), 0.05);
        assert_eq!(out.lost, 0);
    }
    assert!(!h.has_loss());
    let _ = run_periodic(&mut h, 11, 12, 100, 0.05);
}

#[test]
fn interpolated_time_splits_a_long_hole_into_events() {
    let mut h = LossHistory::new(AliConfig::default(), 3);
    for seq in 0..10u64 {
        h.on_packet(seq, Time::from_millis(seq * 10), 0.05);
    }
    // 10..29 lost (200 ms of nominal time at 10 ms/packet), RTT 50 ms -> 4 events.
    for seq in 30..34u64 {
        let out = h.on_packet(seq, Time::from_millis(seq * 10), 0.05);
        if out.first_event {
            h.seed_first_interval(50.0);
        }
    }
    assert_eq!(h.counters().1, 20);
    assert_eq!(h.counters().2, 4);
}

#[test]
fn huge_jump_resyncs() {
    let mut h = LossHistory::new(AliConfig::default(), 3);
    h.on_packet(0, Time::ZERO, 0.1);
    let out = h.on_packet(u64::MAX / 2, Time::from_millis(1), 0.1);
    assert!(out.first_event);
    assert_eq!(h.counters().2, 1);
}

#[test]
fn extend_handles_wrap() {
    assert_eq!(extend_u32(None, 5), 5);
    assert_eq!(extend_u32(Some(0xffff_fff0), 3), 0x1_0000_0003);
    assert_eq!(extend_u32(Some(0x1_0000_0003), 0xffff_fff0), 0xffff_fff0);
    assert_eq!(extend_u32(Some(10), 8), 8);
}

/// 1-s coefficient of variation of `sqrt(s_hat)` (X ∝ p^-1/2 at low loss) and of `p`,
/// with the filter driven packet by packet at `pps` packets/s for `secs` seconds through
/// loss "episodes" `episode_len` packets apart, each of which starts one loss event plus,
/// with probabilities `extra`, further events a few tens of packets later.
fn ali_cov(
    seed: u64,
    episode_len: impl Fn(f64) -> f64,
    extra: &[f64],
    pps: usize,
    secs: usize,
) -> (f64, f64) {
    // A fixed 64-bit LCG: the test must be deterministic and the crate has no RNG.
    let mut state = seed;
    let mut uniform = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut a = LossIntervals::new(AliConfig::default());
    for _ in 0..8 {
        a.close(2000.0);
    }
    let mut schedule: Vec<f64> = Vec::new();
    let (mut open, mut next) = (0.0, episode_len(uniform()));
    let (mut xs, mut ps) = (Vec::new(), Vec::new());
    let (mut sx, mut sp) = (0.0, 0.0);
    for i in 0..pps * secs {
        open += 1.0;
        if open >= next {
            a.close(open);
            open = 0.0;
            if schedule.is_empty() {
                // Next episode: its later events first (popped from the back), then
                // the gap to the episode after it.
                schedule.push(episode_len(uniform()));
                for &q in extra {
                    if uniform() < q {
                        schedule.push(10.0 + 50.0 * uniform());
                    }
                }
            }
            next = schedule.pop().unwrap_or(2000.0);
        }
        a.set_open(open);
        let m = a.mean().unwrap();
        sx += m.sqrt();
        sp += 1.0 / m;
        if (i + 1) % pps == 0 {
            xs.push(sx / pps as f64);
            ps.push(sp / pps as f64);
            sx = 0.0;
            sp = 0.0;
        }
    }
    let cov = |v: &[f64]| {
        let n = v.len() as f64;
        let m = v.iter().sum::<f64>() / n;
        (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / n).sqrt() / m
    };
    (cov(&xs), cov(&ps))
}

/// tfmcc/E3 (docs/protocols/tfrc.md, "E3"): how much 1-s variation the RFC 5348 filter
/// itself leaves. In the testbed's E1 TFRC lost 75 packets in 120 s as 62 loss events,
/// in ~37 TCP overflow episodes about 2000 packets apart (interval CoV ~0.5): an episode
/// often held two or three events more than R apart (RFC 5348 §5.2 counts each), with
/// a few tens of packets between them. Those short intervals in the n = 8 average about
/// double the 1-s variation of p and of X here (0.19 -> 0.37 and 0.09 -> 0.16; E1
/// measured 0.27 and 0.13); and even one event per episode leaves X's 1-s CoV near 0.09,
/// above half of the single Linux TCP's 0.137, so E1's factor 0.5 is out of reach of
/// the RFC's filter on that path.
#[test]
fn e3_split_loss_events_raise_the_variation_of_p() {
    // Episodes uniform in 2000 x [0.15, 1.85] packets (CoV 0.49); 617 packets/s as E1.
    let ep = |u: f64| 2000.0 * (0.15 + 1.7 * u);
    let (x1, p1) = ali_cov(7, ep, &[], 617, 1500);
    let (x2, p2) = ali_cov(7, ep, &[0.5, 0.15], 617, 1500);
    eprintln!("1-s CoV of X / p: one event per episode {x1:.3} / {p1:.3}, split {x2:.3} / {p2:.3}");
    assert!(
        (0.06..0.12).contains(&x1),
        "one event per episode: CoV X {x1}"
    );
    assert!(x1 > 0.5 * 0.137, "{x1}");
    assert!(
        x2 > 1.3 * x1 && p2 > 1.3 * p1,
        "split: X {x2} vs {x1}, p {p2} vs {p1}"
    );
    // What the E1 record measured: CoV X 0.131, p 0.268.
    assert!(
        (0.10..0.18).contains(&x2) && (0.2..0.4).contains(&p2),
        "{x2} {p2}"
    );
}
