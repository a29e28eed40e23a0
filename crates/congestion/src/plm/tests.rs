use super::*;
use std::net::Ipv4Addr;

fn info() -> SessionInfo {
    let mut s = SessionInfo::equal_layers(30, 10_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    s.packet_size = 500;
    s
}

fn pkt(layer: u8, seq: u64, pos: u8, t: Time) -> PacketArrival {
    PacketArrival {
        layer,
        seq,
        bunch_pos: pos,
        bunch_len: 2,
        size: 500,
        send_time_us: 0,
        recv_time: t,
    }
}

/// Feeds one pair on `layer` measuring `rate` bit/s, starting at `t`.
fn pair(p: &mut Plm, layer: u8, seq: &mut u64, t: Time, rate: f64) {
    p.handle_packet(t, &pkt(layer, *seq, 0, t));
    let t2 = t + Duration::from_secs_f64(8.0 * 500.0 / rate);
    p.handle_packet(t2, &pkt(layer, *seq + 1, 1, t2));
    *seq += 2;
}

fn drain(p: &mut Plm) -> Vec<Action> {
    std::iter::from_fn(|| p.poll_action()).collect()
}

/// A receiver of [`info`]'s session fed `n` pairs at `rate` on layer 0, one every 32 ms
/// from 0.1 s; returns it with the next sequence number.
fn steady(cfg: PlmConfig, n: u64, rate: f64) -> (Plm, u64) {
    let mut p = Plm::new(cfg);
    p.handle_announcement(Time::ZERO, &info());
    let mut s = 0;
    for i in 0..n {
        pair(&mut p, 0, &mut s, Time::from_millis(100 + 32 * i), rate);
    }
    (p, s)
}

/// Reliability review F6: a replayed pair whose two packets arrive 100 ms apart reads 40
/// kbit/s, and a duplicated first packet just before the genuine second one reads as fast
/// as the attacker likes. Duplicates must not reach the bunch sampler.
#[test]
fn duplicates_never_make_a_pair_sample() {
    let (mut p, s) = steady(PlmConfig::default(), 40, 95_000.0);
    let level = p.layers();
    assert!(level > 1, "{level}");
    let t = Time::from_millis(100 + 32 * 40);
    p.handle_packet(t, &pkt(0, s - 2, 0, t));
    let t2 = t + Duration::from_millis(100);
    p.handle_packet(t2, &pkt(0, s - 1, 1, t2));
    assert_eq!(p.layers(), level, "a replayed pair cut the level");
    // A genuine pair whose first packet is duplicated 0.1 ms before its second: the sample
    // must come from the genuine first packet (95 kbit/s), not from the copy.
    let t3 = t2 + Duration::from_millis(20);
    p.handle_packet(t3, &pkt(0, s, 0, t3));
    let gap = Duration::from_secs_f64(8.0 * 500.0 / 95_000.0);
    let dup = t3 + gap - Duration::from_micros(100);
    p.handle_packet(dup, &pkt(0, s, 0, dup));
    p.handle_packet(t3 + gap, &pkt(0, s + 1, 1, t3 + gap));
    let d: Vec<Decision> = std::iter::from_fn(|| p.poll_decision()).collect();
    let samples: Vec<f64> = d
        .iter()
        .flat_map(|d| d.inputs.iter())
        .filter(|(k, _)| *k == "pp_sample")
        .map(|(_, v)| *v)
        .collect();
    assert!(samples.iter().all(|&x| x < 200_000.0), "{samples:?}");
    assert_eq!(p.layers(), level);
}

#[test]
fn add_at_most_once_per_c_from_min_of_window() {
    let mut p = Plm::default();
    p.handle_announcement(Time::ZERO, &info());
    assert_eq!(drain(&mut p), vec![Action::Join(0)]);
    let mut s = 0;
    // Samples of 95 kbit/s every 100 ms on layer 0; the first sets T_c = 0.1 + 1.
    for i in 0..12u64 {
        pair(
            &mut p,
            0,
            &mut s,
            Time::from_millis(100 + 100 * i),
            95_000.0,
        );
    }
    // The add fires at the first sample after T_c = 1.1 s, i.e. at 1.2 s: strict → 9
    // layers (90k < 95k), not 10 (100k).
    assert_eq!(p.layers(), 9);
    let d: Vec<Decision> = std::iter::from_fn(|| p.poll_decision()).collect();
    let adds: Vec<&Decision> = d.iter().filter(|d| d.reason == "pp-add").collect();
    assert_eq!(adds.len(), 1);
    assert!(adds[0].at > Time::from_millis(1100) && adds[0].at < Time::from_millis(1300));
}

/// plm/E4 run 5: a third session starts and is backlogged only part of the time, so the
/// pairs alternate between the new share (200 kbit/s) and the old (300). The first low one
/// is set aside, the next low one within C is believed at once.
#[test]
fn confirm_drop_believes_lows_that_recur_within_c() {
    let mut i20 = SessionInfo::equal_layers(17, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    i20.packet_size = 500;
    let mut p = Plm::new(PlmConfig::confirming());
    p.handle_announcement(Time::ZERO, &i20);
    let mut s = 0;
    let mut drop_at = None;
    for i in 0..200u64 {
        let t = Time::from_millis(100 + 30 * i);
        // 14 layers (280k) on a 300k share; from 3.1 s every 4th pair reads 200k
        let rate = if i >= 100 && i % 4 == 0 {
            200_000.0
        } else {
            300_000.0
        };
        pair(&mut p, 0, &mut s, t, rate);
        if drop_at.is_none() && i >= 100 && p.layers() < 14 {
            drop_at = Some(t);
        }
    }
    assert_eq!(p.set_aside(), 1);
    assert_eq!(drop_at, Some(Time::from_millis(100 + 30 * 104)));
    assert_eq!(p.layers(), 9); // B[9] = 180k < 200k
}

/// plm/S3, plm/E4: the share rises just after a check (the CBR flows leave the fair
/// queue). The paper's rule restarts W at every check, so the next check's minimum still
/// holds a sample of the old share and the add waits one more C; the sliding rule adds C
/// after the last low sample.
#[test]
fn sliding_check_adds_one_c_after_the_share_rises() {
    let mut info = SessionInfo::equal_layers(17, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    info.packet_size = 500;
    // Samples every 50 ms: 100 kbit/s (4 layers) until `rise`, then 200 kbit/s.
    let run = |sliding_check: bool, rise_ms: u64| {
        let mut p = Plm::new(PlmConfig {
            sliding_check,
            ..PlmConfig::default()
        });
        p.handle_announcement(Time::ZERO, &info);
        let mut s = 0;
        let mut up_at = None;
        let mut checks = Vec::new();
        for i in 0..120u64 {
            let t = Time::from_millis(100 + 50 * i);
            let rate = if t.as_nanos() < rise_ms * 1_000_000 {
                100_000.0
            } else {
                200_000.0
            };
            // Hold every layer the controller wants, so each held layer's pairs count.
            pair(&mut p, 0, &mut s, t, rate);
            while let Some(d) = p.poll_decision() {
                if d.reason == "pp-add" {
                    checks.push(d.at);
                }
            }
            if up_at.is_none() && p.layers() >= 9 {
                up_at = Some(t);
            }
        }
        (up_at, checks)
    };
    // The first check (at the first sample after 0.15 + 1 s) adds 1 -> 4; the next check
    // comes at ~2.2 s. The share rises 0.05 s after it.
    let (_, checks) = run(false, 10_000);
    assert!(checks.len() >= 2, "{checks:?}");
    let rise = checks[1].as_nanos() / 1_000_000 + 50;
    let (paper, _) = run(false, rise);
    let (sliding, _) = run(true, rise);
    let rise_t = Time::from_millis(rise);
    let paper = paper.expect("paper rule adds eventually") - rise_t;
    let sliding = sliding.expect("sliding rule adds") - rise_t;
    // Paper: the check at rise + C - 0.05 s still sees the old share, the add comes 2C
    // after the previous check. Sliding: C after the last 100 kbit/s sample.
    assert!(paper > Duration::from_millis(1800), "paper rule {paper:?}");
    assert!(
        sliding <= Duration::from_millis(1050),
        "sliding rule {sliding:?}"
    );
    assert!(
        sliding >= Duration::from_millis(950),
        "sliding rule {sliding:?}"
    );
}

/// The sliding rule never adds on less than a full C of samples, nor twice within C, nor
/// while a sample of the last C is below the next cumulative rate.
#[test]
fn sliding_check_keeps_adds_c_apart_and_on_a_full_c() {
    let mut info = SessionInfo::equal_layers(30, 10_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    info.packet_size = 500;
    let mut p = Plm::new(PlmConfig {
        sliding_check: true,
        ..PlmConfig::default()
    });
    p.handle_announcement(Time::ZERO, &info);
    let mut s = 0;
    let mut adds = Vec::new();
    // 95 kbit/s with a 152 kbit/s sample every 0.3 s (9 layers; the minimum of any C is
    // 95k, so nothing is ever added after the first add).
    for i in 0..200u64 {
        let t = Time::from_millis(100 + 50 * i);
        let rate = if i % 6 == 0 { 152_000.0 } else { 95_000.0 };
        pair(&mut p, 0, &mut s, t, rate);
        while let Some(d) = p.poll_decision() {
            if d.reason == "pp-add" && d.to_layers > d.from_layers {
                adds.push(d.at);
            }
        }
    }
    assert_eq!(adds.len(), 1, "{adds:?}");
    assert_eq!(p.layers(), 9);
}

/// plm/E2 R1 on the testbed: 25 layers (250 kbit/s) behind a 256 kbit/s link, one pair in
/// a few hundred stretched by 0.4 ms (249.6 kbit/s), and now and then two in a row. The
/// paper's rule drops on each and re-adds one check later; the live rule sets them aside.
/// A real fall of the share (every following pair low) drops 200 ms after its first
/// sample, and a lone low sample with nothing after it is believed after 200 ms.
#[test]
fn confirm_drop_sets_a_lone_stretched_pair_aside() {
    let run = |cfg: PlmConfig| {
        let mut p = Plm::new(cfg);
        p.handle_announcement(Time::ZERO, &info());
        let mut s = 0;
        let mut changes = 0;
        // 256 kbit/s pairs every 32 ms for 30 s, one at 249.6k every 4 s after 5 s.
        for i in 0..940u64 {
            let t = Time::from_millis(100 + 32 * i);
            let rate = if i > 150 && (i % 125 == 0 || i % 250 == 1) {
                249_600.0
            } else {
                256_000.0
            };
            let before = p.layers();
            pair(&mut p, 0, &mut s, t, rate);
            if p.layers() != before && t > Time::from_millis(3000) {
                changes += 1;
            }
        }
        (p.layers(), changes, p.set_aside())
    };
    let (n, changes, aside) = run(PlmConfig::default());
    assert_eq!(n, 25);
    assert!(changes >= 10, "paper rule: {changes} changes");
    assert_eq!(aside, 0);
    let (n, changes, aside) = run(PlmConfig::confirming());
    assert_eq!((n, changes), (25, 0));
    assert_eq!(aside, 6); // 3 of the 6 runs are two pairs long

    // The share falls to 57 kbit/s at 10 s: the live rule drops at the second low pair.
    let mut p = Plm::new(PlmConfig::confirming());
    p.handle_announcement(Time::ZERO, &info());
    let mut s = 0;
    let mut dropped_at = None;
    for i in 0..400u64 {
        let t = Time::from_millis(100 + 32 * i);
        let rate = if t < Time::from_millis(10_000) {
            256_000.0
        } else {
            57_000.0
        };
        pair(&mut p, 0, &mut s, t, rate);
        if dropped_at.is_none() && t >= Time::from_millis(10_000) && p.layers() == 5 {
            dropped_at = Some(t);
        }
    }
    let first_low = Time::from_millis(100 + 32 * 310); // 10.02 s
    assert_eq!(dropped_at, Some(first_low + Duration::from_millis(7 * 32)));

    // A lone low sample and then silence: believed 200 ms later by the timer.
    let (mut p, mut s) = steady(PlmConfig::confirming(), 100, 256_000.0);
    assert_eq!(p.layers(), 25);
    let t = Time::from_millis(100 + 32 * 100);
    pair(&mut p, 0, &mut s, t, 200_000.0);
    assert_eq!(p.layers(), 25);
    let (at, _) = p.poll_timeout().unwrap();
    let sample_t = t + Duration::from_secs_f64(8.0 * 500.0 / 200_000.0);
    assert_eq!(at, sample_t + Duration::from_millis(200));
    p.handle_timeout(at - Duration::from_millis(1));
    assert_eq!(p.layers(), 25);
    p.handle_timeout(at);
    assert_eq!(p.layers(), 19); // B[19] = 190k < 200k

    // A loss confirms a held low sample as soon as it counts: when the third packet
    // after it arrives (`REORDER_THRESHOLD`; fewer could be reordering).
    let (mut p, mut s) = steady(PlmConfig::confirming(), 100, 256_000.0);
    let t = Time::from_millis(100 + 32 * 100);
    pair(&mut p, 0, &mut s, t, 200_000.0);
    assert_eq!(p.layers(), 25);
    s += 1; // one packet of layer 0 lost
    for k in 0..3 {
        let t2 = t + Duration::from_millis(30 + k);
        assert_eq!(p.layers(), 25);
        p.handle_packet(t2, &pkt(0, s + k, 0, t2));
    }
    assert_eq!(p.layers(), 19);

    // plm/E4: a share equal to B[15] (300 kbit/s, 20 kbit/s layers) read with timestamp
    // noise, 299.9 / 300.1 kbit/s alternating: samples within the tolerance of B[n] do not
    // set the low ones aside, so the strict rule still settles at 14.
    let mut i20 = SessionInfo::equal_layers(17, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    i20.packet_size = 500;
    let mut p = Plm::new(PlmConfig::confirming());
    p.handle_announcement(Time::ZERO, &i20);
    let mut s = 0;
    for i in 0..100u64 {
        let t = Time::from_millis(100 + 30 * i);
        let rate = if i < 40 {
            305_000.0
        } else if i % 2 == 0 {
            299_900.0
        } else {
            300_100.0
        };
        pair(&mut p, 0, &mut s, t, rate);
    }
    assert_eq!(p.layers(), 14);
    assert_eq!(p.set_aside(), 0);

    // Right after an add a low sample is the add overshooting: dropped at once.
    let mut p = Plm::new(PlmConfig::confirming());
    p.handle_announcement(Time::ZERO, &i20);
    let mut s = 0;
    let mut t = Time::ZERO;
    for i in 0..12u64 {
        t = Time::from_millis(100 + 100 * i);
        pair(&mut p, 0, &mut s, t, 600_000.0);
    }
    assert_eq!(p.layers(), 17); // 340 kbit/s on a 600-kbit/s reading
    pair(&mut p, 0, &mut s, t + Duration::from_millis(50), 300_000.0);
    assert_eq!(p.layers(), 14);
    // A drop does not restart that grace: 17 held for C, the share falls to 300 kbit/s
    // (a 200-ms run, then 14), and a lone stretched pair 0.3 s later is set aside (E4 run
    // 4: 15 -> 14 -> 12 on one 258-kbit/s pair 0.4 s after a drop, when a drop still
    // restarted the grace period).
    let mut p = Plm::new(PlmConfig::confirming());
    p.handle_announcement(Time::ZERO, &i20);
    let mut s = 0;
    let mut dropped = None;
    for i in 0..120u64 {
        let t = Time::from_millis(100 + 30 * i);
        let rate = match i {
            0..=79 => 600_000.0, // 17 layers from the first check (1.2 s)
            95 => 258_000.0,     // 0.3 s after the drop
            _ => 300_000.0,      // from 2.5 s
        };
        pair(&mut p, 0, &mut s, t, rate);
        if dropped.is_none() && i >= 80 && p.layers() < 17 {
            dropped = Some(t);
        }
    }
    assert!(
        dropped.is_some_and(|d| d >= Time::from_millis(2600)),
        "{dropped:?}"
    );
    assert_eq!(p.layers(), 14);
    assert_eq!(p.set_aside(), 1);
}

/// plm.md E2 measures convergence from the first PP: every add decision carries the age
/// of the first sample since the base join, and a re-join starts it afresh.
#[test]
fn add_decisions_carry_the_first_pp_age() {
    let mut p = Plm::default();
    p.handle_announcement(Time::ZERO, &info());
    let mut s = 0;
    let rate = 95_000.0;
    let gap = Duration::from_secs_f64(8.0 * 500.0 / rate);
    // The first pair starts at 0.3 s (a receiver waits for the layer's next pair).
    for i in 0..25u64 {
        pair(&mut p, 0, &mut s, Time::from_millis(300 + 100 * i), rate);
    }
    let d: Vec<Decision> = std::iter::from_fn(|| p.poll_decision()).collect();
    let adds: Vec<&Decision> = d.iter().filter(|d| d.reason == "pp-add").collect();
    assert_eq!(adds.len(), 2, "{d:?}");
    let first_sample = Time::from_millis(300) + gap;
    for a in &adds {
        let age = a
            .inputs
            .iter()
            .find(|(k, _)| *k == "first_pp_age_s")
            .map(|(_, v)| *v)
            .unwrap();
        let want = (a.at - first_sample).as_secs_f64();
        assert!((age - want).abs() < 1e-9, "{age} vs {want}");
    }
    // The first add comes one C after the first sample (1.1 s: the first sample after T_c).
    assert!((adds[0].at - first_sample) > Duration::from_secs(1));
    assert!((adds[0].at - first_sample) < Duration::from_millis(1150));
}

/// plm/E4 on the testbed: a 100 kbit/s share (20 kbit/s layers) measured with ±0.02 %
/// timestamp noise. The exact comparisons add the 5th layer (100 kbit/s) whenever a window's
/// minimum lands above 100 kbit/s and drop it at the next sample below; with the tolerance
/// the level stays at 4. And a drop loop on a sample just above a cumulative rate stops
/// below it, not at it.
#[test]
fn tolerance_keeps_strict_below_an_exact_share_under_timestamp_noise() {
    let mut info = SessionInfo::equal_layers(17, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    info.packet_size = 500;
    let run = |tolerance: f64| {
        let mut p = Plm::new(PlmConfig {
            tolerance,
            ..PlmConfig::default()
        });
        p.handle_announcement(Time::ZERO, &info);
        let mut s = 0;
        let mut x: u64 = 0x853c_49e6_748f_ea9b;
        let mut changes = 0;
        let mut last = 0;
        for i in 0..600u64 {
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            // Share 100 kbit/s; as on the testbed most samples read a little above it
            // (+0.002-0.02 %) and one in ten a little below (-0.01 %), so the minimum of a
            // window of 10 is above the share about a third of the time.
            let rate = if u < 0.1 {
                100_000.0 * (1.0 - 0.0001)
            } else {
                100_000.0 * (1.0 + 0.0002 * u)
            };
            pair(&mut p, 0, &mut s, Time::from_millis(100 + 100 * i), rate);
            if i > 20 && p.layers() != last {
                changes += 1;
            }
            last = p.layers();
        }
        (p.layers(), changes)
    };
    let (lvl0, ch0) = run(0.0);
    assert!(ch0 >= 4, "exact comparisons: {ch0} changes at level {lvl0}");
    let (lvl, ch) = run(0.005);
    assert_eq!((lvl, ch), (4, 0));
    // Drop loop: at 14 layers (280k) a sample of 200.67 kbit/s (share 200k + noise) must
    // leave 9 layers (180k), not 10 (= the share).
    let mut p = Plm::default();
    p.handle_announcement(Time::ZERO, &info);
    let mut s = 0;
    for i in 0..12u64 {
        pair(
            &mut p,
            0,
            &mut s,
            Time::from_millis(100 + 100 * i),
            290_000.0,
        );
    }
    assert_eq!(p.layers(), 14);
    let mut s1 = 0;
    pair(&mut p, 1, &mut s1, Time::from_millis(1300), 200_670.0);
    assert_eq!(p.layers(), 9);
}

#[test]
fn strict_vs_permissive_at_exact_share() {
    for (permissive, want) in [(false, 9u8), (true, 10)] {
        let mut p = Plm::new(PlmConfig {
            permissive,
            ..PlmConfig::default()
        });
        p.handle_announcement(Time::ZERO, &info());
        let mut s = 0;
        for i in 0..15u64 {
            // 8·500 / 40 ms = 100 kbit/s exactly = B[10].
            let t = Time::from_millis(100 + 100 * i);
            p.handle_packet(t, &pkt(0, s, 0, t));
            let t2 = t + Duration::from_millis(40);
            p.handle_packet(t2, &pkt(0, s + 1, 1, t2));
            s += 2;
        }
        assert_eq!(p.layers(), want, "permissive={permissive}");
    }
}

#[test]
fn single_low_sample_drops_until_below_it() {
    let mut p = Plm::default();
    p.handle_announcement(Time::ZERO, &info());
    let mut s = 0;
    for i in 0..12u64 {
        pair(
            &mut p,
            0,
            &mut s,
            Time::from_millis(100 + 100 * i),
            250_000.0,
        );
    }
    assert_eq!(p.layers(), 24); // 240k < 250k
    drain(&mut p);
    let mut s1 = 0;
    pair(&mut p, 3, &mut s1, Time::from_millis(1300), 57_000.0);
    assert_eq!(p.layers(), 5); // B[5] = 50k < 57k
    let acts = drain(&mut p);
    assert_eq!(acts.len(), 19);
    assert_eq!(acts[0], Action::Leave(23));
    assert_eq!(*acts.last().unwrap(), Action::Leave(5));
}

/// A pair below the base layer's rate: the paper's drop loop leaves every layer (and
/// re-joins 30 s later); the live configuration keeps the base layer.
#[test]
fn a_pair_below_the_base_drops_to_it_live_and_to_nothing_in_the_paper() {
    let after_low_pair = |cfg: PlmConfig| {
        let (mut p, s) = steady(cfg, 40, 95_000.0);
        assert!(p.layers() > 1, "{}", p.layers());
        let mut s = s;
        // 5 kbit/s: under B[1] = 10 kbit/s.
        pair(&mut p, 0, &mut s, Time::from_millis(100 + 32 * 40), 5_000.0);
        p.layers()
    };
    assert_eq!(after_low_pair(PlmConfig::default()), 0);
    assert_eq!(after_low_pair(PlmConfig::live()), 1);
}

#[test]
fn loss_fallback_with_blind_period() {
    // Every pair loses its second packet: no PP, 50% loss ⇒ one layer per ≥ 0.5 s.
    let mut p = Plm::default();
    p.handle_announcement(Time::ZERO, &info());
    let mut s = 0;
    for i in 0..12u64 {
        pair(
            &mut p,
            0,
            &mut s,
            Time::from_millis(100 + 100 * i),
            200_000.0,
        );
    }
    assert_eq!(p.layers(), 19);
    drain(&mut p);
    let mut seq = vec![0u64; 30];
    let mut drops = Vec::new();
    for i in 0..400u64 {
        let t = Time::from_millis(1300 + 10 * i);
        let l = (i % 5) as u8; // layers 0..4 stay held throughout
        let sq = &mut seq[l as usize];
        p.handle_packet(t, &pkt(l, *sq, 0, t));
        *sq += 2; // partner lost
        for a in drain(&mut p) {
            drops.push((t, a));
        }
    }
    assert!(drops.len() >= 4, "{drops:?}");
    for w in drops.windows(2) {
        assert!(w[1].0 - w[0].0 >= Duration::from_millis(500), "{drops:?}");
    }
    assert!(drops.iter().all(|(_, a)| matches!(a, Action::Leave(_))));
}

/// Loss-drops of a receiver held at 10 layers for 60 s: layer 0 carries a loss-free pair
/// every 100 ms measuring 105 kbit/s (so an add decision, which keeps the level and resets
/// the loss cycle as ns-2 does, comes once per C, as on the testbed), layer 1 single
/// packets at 100/s each lost with probability `p_loss` (a fixed LCG stream).
fn loss_drops_at(cfg: PlmConfig, p_loss: f64) -> Vec<Time> {
    let mut p = Plm::new(cfg);
    p.handle_announcement(Time::ZERO, &info());
    let mut s = 0;
    for i in 0..12u64 {
        pair(
            &mut p,
            0,
            &mut s,
            Time::from_millis(100 + 100 * i),
            105_000.0,
        );
    }
    assert_eq!(p.layers(), 10);
    drain(&mut p);
    let _ = std::iter::from_fn(|| p.poll_decision()).count();
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    let mut drops = Vec::new();
    for i in 0..6000u64 {
        let t = Time::from_millis(1300 + 10 * i);
        if i % 10 == 0 {
            pair(&mut p, 0, &mut s, t, 105_000.0);
        }
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        if u >= p_loss && p.layers() >= 2 {
            let t1 = t + Duration::from_millis(5);
            let mut a = pkt(1, i, 0, t1); // layer 1's sequence: one per slot
            a.bunch_len = 1;
            p.handle_packet(t1, &a);
        }
    }
    for d in std::iter::from_fn(|| p.poll_decision()) {
        if d.reason == "loss-drop" {
            drops.push(d.at);
        }
    }
    drops
}

#[test]
fn loss_rule_ignores_five_percent_and_acts_on_twenty() {
    // plm/E10 on the testbed: at 5 % random loss (< the 10 % threshold) the ns-2 cycle as
    // first built (the opening loss counted, point estimate) dropped a layer every few
    // seconds. The sensitivity check: that rule does fire here, so the stream can show it.
    let old = PlmConfig {
        loss_confidence_z: 0.0,
        ..PlmConfig::default()
    };
    let old_drops = loss_drops_at(old, 0.05);
    assert!(old_drops.len() >= 5, "{old_drops:?}");
    let drops = loss_drops_at(PlmConfig::default(), 0.05);
    assert!(drops.len() <= 1, "5 % loss: {drops:?}");
    // Above the threshold it still drops, one layer per >= 0.5 s.
    let d20 = loss_drops_at(PlmConfig::default(), 0.20);
    assert!(d20.len() >= 5, "20 % loss: {d20:?}");
    for w in d20.windows(2) {
        assert!(w[1] - w[0] >= Duration::from_millis(500), "{d20:?}");
    }
}

/// The plm/S8 lock-in in miniature: a share of 105 kbit/s (10 layers). For the first 1.5 s
/// the pairs read 200 kbit/s with no loss (the competing flow idle), so PLM climbs to 19.
/// From then on, while it holds more than 10 layers it overloads its own queue: single
/// packets on layer 1 are lost with probability `p_loss` and the pairs that survive read the
/// link rate (200 kbit/s, survivor bias); at 10 layers or fewer nothing is lost and the
/// pairs read the share. Returns the level after 20 s.
fn level_after_overload(cfg: PlmConfig, p_loss: f64) -> u8 {
    let mut p = Plm::new(cfg);
    p.handle_announcement(Time::ZERO, &info());
    let mut s = 0;
    for i in 0..12u64 {
        pair(
            &mut p,
            0,
            &mut s,
            Time::from_millis(100 + 100 * i),
            105_000.0,
        );
    }
    assert_eq!(p.layers(), 10);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for i in 0..2000u64 {
        let t = Time::from_millis(1300 + 10 * i);
        let over = i < 150 || p.layers() > 10;
        if i % 10 == 0 {
            pair(
                &mut p,
                0,
                &mut s,
                t,
                if over { 200_000.0 } else { 105_000.0 },
            );
        }
        if i == 150 {
            assert_eq!(p.layers(), 19);
        }
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        let u = (x >> 11) as f64 / (1u64 << 53) as f64;
        let lost = i >= 150 && p.layers() > 10 && u < p_loss;
        if !lost && p.layers() >= 2 {
            let t1 = t + Duration::from_millis(5);
            let mut a = pkt(1, i, 0, t1); // layer 1's sequence: one per slot
            a.bunch_len = 1;
            p.handle_packet(t1, &a);
        }
    }
    p.layers()
}

#[test]
fn no_add_while_the_loss_cycle_is_above_threshold() {
    // ns-2's rule: each add on the survivor-biased pairs undoes the loss-drops: locked in
    // above the share for the whole run.
    let ns2 = PlmConfig {
        no_add_while_lossy: false,
        ..PlmConfig::default()
    };
    let locked = level_after_overload(ns2, 0.4);
    assert!(locked >= 17, "ns-2 rule: level {locked}");
    // With the rule the loss-drops win, PLM gets back under its share and stays there.
    let lvl = level_after_overload(PlmConfig::default(), 0.4);
    assert_eq!(lvl, 10);
}

#[test]
fn silence_drops_one_layer_per_timeout_then_rejoins() {
    let mut p = Plm::default();
    p.handle_announcement(Time::ZERO, &info());
    let mut s = 0;
    for i in 0..12u64 {
        pair(
            &mut p,
            0,
            &mut s,
            Time::from_millis(100 + 100 * i),
            32_000.0,
        );
    }
    assert_eq!(p.layers(), 3);
    drain(&mut p);
    // Base layer 10 kbit/s, 500-B pairs: burst interval 0.8 s ⇒ T_nopkt = 3.2 s.
    assert_eq!(p.silence_timeout(), Duration::from_millis(3200));
    let mut now = Time::from_millis(1200);
    let mut seen = Vec::new();
    for _ in 0..4 {
        let (t, _) = p.poll_timeout().unwrap();
        assert!(t > now);
        now = t;
        p.handle_timeout(now);
        seen.extend(drain(&mut p));
    }
    assert_eq!(
        seen,
        vec![
            Action::Leave(2),
            Action::Leave(1),
            Action::Leave(0),
            Action::Join(0)
        ]
    );
    let d: Vec<Decision> = std::iter::from_fn(|| p.poll_decision()).collect();
    let last = d.last().unwrap();
    assert_eq!(last.reason, "rejoin");
    // 30 s after the base layer went.
    let gone = d.iter().rev().find(|d| d.to_layers == 0).unwrap().at;
    assert_eq!(last.at - gone, Duration::from_secs(30));
}

#[test]
fn start_timeout_and_exit_option() {
    let mut p = Plm::new(PlmConfig {
        exit_on_empty: true,
        ..PlmConfig::default()
    });
    p.handle_announcement(Time::from_secs_f64(2.0), &info());
    assert_eq!(
        p.poll_timeout(),
        Some((Time::from_secs_f64(7.0), TimerReason::Silence))
    );
    p.handle_timeout(Time::from_secs_f64(6.0)); // spurious
    assert_eq!(drain(&mut p), vec![Action::Join(0)]);
    p.handle_timeout(Time::from_secs_f64(7.0));
    assert_eq!(drain(&mut p), vec![Action::Leave(0), Action::Exit]);
    assert_eq!(p.poll_timeout(), None);
}

/// `climb_after_drop`: 30 layers of 10 kbit/s, pairs at 95 kbit/s (9 layers), one pair at
/// 35 kbit/s (a drop to 3), then 95 kbit/s again. The paper re-adds all six layers at the
/// next check; the live rule doubles per check (3 -> 6 -> 9), and a climb long after the
/// drop is not capped.
#[test]
fn the_live_climb_after_a_drop_at_most_doubles_per_check() {
    let levels = |cfg: PlmConfig, lull_s: u64| {
        let (mut p, mut s) = steady(cfg, 40, 95_000.0);
        assert_eq!(p.layers(), 9);
        let t0 = 100 + 32 * 40;
        pair(&mut p, 0, &mut s, Time::from_millis(t0), 35_000.0);
        assert_eq!(p.layers(), 3);
        let mut seen = vec![p.layers()];
        // A lull of `lull_s` with samples at the low share, then the share back.
        let lull = lull_s * 1000;
        for i in 1..(lull + 6000) / 100 {
            let rate = if i * 100 < lull { 35_000.0 } else { 95_000.0 };
            pair(&mut p, 0, &mut s, Time::from_millis(t0 + 100 * i), rate);
            if seen.last() != Some(&p.layers()) {
                seen.push(p.layers());
            }
        }
        let d: Vec<Decision> = std::iter::from_fn(|| p.poll_decision()).collect();
        (seen, d)
    };
    assert_eq!(levels(PlmConfig::default(), 0).0, vec![3, 9]);
    let (live, d) = levels(PlmConfig::live(), 0);
    assert_eq!(live, vec![3, 6, 9]);
    let caps: Vec<f64> = d
        .iter()
        .filter(|d| d.reason == "pp-add" && d.to_layers > d.from_layers)
        .map(|d| d.inputs.iter().find(|x| x.0 == "climb_cap").unwrap().1)
        .collect();
    // The start (1 -> 9) was not capped: no drop had happened.
    assert_eq!(caps, vec![-1.0, 60_000.0, 120_000.0]);
    // The share comes back 10 s after the drop: past `climb_memory`, one step.
    assert_eq!(levels(PlmConfig::live(), 10).0, vec![3, 9]);
}
