//! WEBRC (RFC 3738): wave schedule, equation and filters, slot changes, MRTT, bottleneck
//! scenarios, contract property test.

mod baseline_sim;

use baseline_sim::{check_contract, inputs, run, Scenario};
use baselines::webrc::{lossp_for, reqn, WaveSchedule, Webrc};
use congestion::{Action, LayeredController, PacketArrival, SessionInfo, Time};
use proptest::prelude::*;
use std::net::Ipv4Addr;
use std::time::Duration;

const LENP: u16 = 500;

/// A WEBRC session: base channel BCR_P packets/s, `n` waves; layer rates are slot-start
/// rates (for stats only; the harness uses the wave law).
fn session(bcr_p: f64, n: usize) -> SessionInfo {
    let mut s = SessionInfo::equal_layers(n + 1, 1, Ipv4Addr::new(239, 4, 0, 0), 5000);
    for (j, l) in s.layers.iter_mut().enumerate() {
        l.rate_bps = (bcr_p * 0.75f64.powi(-(j as i32)) * 8.0 * LENP as f64) as u64;
    }
    s.packet_size = LENP;
    s
}

fn sched(bcr_p: f64, n: u32) -> WaveSchedule {
    WaveSchedule {
        bcr_p,
        p: 0.75,
        tsd: Duration::from_secs(10),
        n,
        q: 30,
    }
}

fn pkt(layer: u8, seq: u64, send: Time, t: Time) -> PacketArrival {
    PacketArrival {
        layer,
        seq,
        bunch_pos: 0,
        bunch_len: 1,
        size: LENP as u32,
        send_time_us: send.as_micros(),
        recv_time: t,
    }
}

#[test]
fn wave_rates_decay_by_p_per_slot_and_hand_over_continuously() {
    let w = sched(2.0, 10);
    assert!((w.rate_pps(0, 0) - 2.0).abs() < 1e-12);
    assert!(
        (w.rate_pps(0, 9_999_999) - 1.5).abs() < 1e-5,
        "base decays to P·BCR"
    );
    for j in 1..10 {
        let end = w.rate_pps(j, 9_999_999);
        let next = w.rate_pps(j - 1, 10_000_000);
        assert!(
            (end - next).abs() / next < 1e-5,
            "layer {j} hands over to {}",
            j - 1
        );
    }
    assert_eq!(w.rate_pps(11, 0), 0.0);
    // Channel numbering: the k-th lowest wave of slot s is the (k−1)-th of slot s+1.
    for s in 0..50u64 {
        for j in 2..=10 {
            assert_eq!(w.channel_for(j, s), w.channel_for(j - 1, s + 1));
        }
    }
    assert_eq!(w.channels(), 40);
}

#[test]
fn reqn_matches_tfrc_and_inverts() {
    // p = 1 %, ARTT = 0.1 s: 1/(0.1·0.1·(0.816 + 7.35·0.01·1.0032)) ≈ 112 packets/s.
    let r = reqn(0.1, 0.01);
    assert!((r - 112.4).abs() < 0.5, "{r}");
    let l = lossp_for(0.1, 50.0);
    assert!((reqn(0.1, l) - 50.0).abs() < 1e-6);
    assert!(reqn(0.2, 0.01) < r);
}

#[test]
fn first_base_packet_measures_artt_and_slot_change_leaves_a_wave() {
    let mut c = Webrc::default();
    c.handle_announcement(Time::ZERO, &session(2.0, 12));
    assert_eq!(
        std::iter::from_fn(|| c.poll_action()).collect::<Vec<_>>(),
        vec![Action::Join(0)]
    );
    let t = Time::from_millis(80);
    c.handle_packet(t, &pkt(0, 7, Time::from_millis(40), t));
    assert!(
        (c.artt() - 0.08).abs() < 1e-9,
        "ARTT = FirstTime − JoinTime"
    );
    assert!(c.in_slow_start());
    // Drive epochs with a steady base stream until a wave is joined.
    let mut now = t;
    let mut seq = 8;
    let mut joined = false;
    for _ in 0..200 {
        now += Duration::from_millis(100);
        c.handle_packet(now, &pkt(0, seq, now - Duration::from_millis(40), now));
        seq += 1;
        if c.layers() > 1 {
            c.handle_packet(now, &pkt(1, seq, now - Duration::from_millis(40), now));
        }
        if c.poll_timeout().is_some_and(|(d, _)| d <= now) {
            c.handle_timeout(now);
        }
        if c.layers() >= 2 {
            joined = true;
            break;
        }
    }
    assert!(joined, "slow start never joined a wave");
    let acts: Vec<_> = std::iter::from_fn(|| c.poll_action()).collect();
    assert_eq!(acts, vec![Action::Join(1)]);
    // A packet from the next time slot: the lowest wave goes quiescent and is left.
    let next_slot = Time::from_secs_f64(10.0);
    c.handle_packet(now, &pkt(0, seq, next_slot, now));
    let acts: Vec<_> = std::iter::from_fn(|| c.poll_action()).collect();
    assert_eq!(acts, vec![Action::Leave(1)]);
    let d: Vec<_> = std::iter::from_fn(|| c.poll_decision()).collect();
    assert!(d.iter().any(|d| d.reason == "slot-change-quiescent"));
}

#[test]
fn loss_ends_slow_start_and_resets_lossp_to_match_trr() {
    let mut c = Webrc::default();
    c.handle_announcement(Time::ZERO, &session(4.0, 12));
    let mut now = Time::from_millis(50);
    c.handle_packet(now, &pkt(0, 0, Time::ZERO, now));
    for s in 1..4u64 {
        now += Duration::from_millis(100);
        c.handle_packet(now, &pkt(0, s, now, now));
    }
    assert!(c.in_slow_start());
    now += Duration::from_millis(100); // still inside the first epoch
    c.handle_packet(now, &pkt(0, 9, now, now)); // 5 lost
    assert!(!c.in_slow_start());
    let (trr, _, _) = c.rates();
    assert!((reqn(c.artt(), c.lossp()) - trr).abs() / trr < 1e-6);
    let d: Vec<_> = std::iter::from_fn(|| c.poll_decision()).collect();
    assert!(d.iter().any(|d| d.reason == "ss-end-loss"));
}

#[test]
fn silence_triggers_exceptional_exit() {
    let mut c = Webrc::default();
    c.handle_announcement(Time::ZERO, &session(2.0, 8));
    let t = Time::from_millis(60);
    c.handle_packet(t, &pkt(0, 0, Time::ZERO, t));
    let mut now = t;
    while let Some((d, _)) = c.poll_timeout() {
        now = d.max(now);
        c.handle_timeout(now);
        if now > Time::from_secs_f64(30.0) {
            break;
        }
    }
    assert!(std::iter::from_fn(|| c.poll_action()).any(|a| a == Action::Exit));
    assert!(now <= Time::from_secs_f64(10.2), "exit at {now:?}");
}

fn scenario(cap: f64, end: f64) -> Scenario {
    let (bcr, n) = (4.0, 14u32);
    let w = sched(bcr, n);
    let mut sc = Scenario::new(session(bcr, n as usize), cap, end);
    sc.rate = Box::new(move |k, t| w.rate_pps(k as u32, t.as_micros()) * 8.0 * LENP as f64);
    sc.prop = Duration::from_millis(30);
    sc
}

#[test]
fn scenario_tracks_capacity_with_waves() {
    // ERA-vs-WEBRC set-up (era.md §3.10): 320 kbit/s, 30 ms; at 200 s capacity halves.
    let sc = scenario(320_000.0, 400.0).capacity_at(200.0, 160_000.0);
    let mut c = Webrc::default();
    let tr = run(&mut c, &sc);
    assert!(tr.violations.is_empty(), "{:?}", tr.violations);
    assert!(!tr.exited);
    let g1 = tr.goodput_bps(60.0, 200.0);
    let g2 = tr.goodput_bps(260.0, 400.0);
    let plr1 = tr.loss_ratio(60.0, 200.0);
    let plr2 = tr.loss_ratio(260.0, 400.0);
    let leaves = tr
        .decisions
        .iter()
        .filter(|d| d.reason == "slot-change-quiescent")
        .count();
    println!(
        "webrc: goodput60-200={:.0}kbps plr={plr1:.4} goodput260-400={:.0}kbps plr={plr2:.4} joins={} quiescent-leaves={leaves} artt={:.3}",
        g1 / 1000.0,
        g2 / 1000.0,
        tr.joins(),
        c.artt()
    );
    assert!(g1 > 0.6 * 320_000.0 && g1 <= 320_000.0, "goodput {g1}");
    assert!(
        g2 > 0.6 * 160_000.0 && g2 <= 160_000.0,
        "goodput after drop {g2}"
    );
    assert!(plr1 < 0.08 && plr2 < 0.08, "plr {plr1} {plr2}");
    // Dynamic layering: a wave is left at (nearly) every slot change and re-joined.
    assert!(leaves >= 30, "{leaves}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn contract_holds_for_arbitrary_inputs(seq in inputs()) {
        let mut c = Webrc::default();
        prop_assert_eq!(check_contract(&mut c, &seq), Ok(()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]
    /// Degenerate configurations (zero durations and factors) must not panic or spin.
    #[test]
    fn degenerate_config_is_harmless(seq in inputs()) {
        let mut c = Webrc::new(baselines::webrc::Config { p: 0.0, tsd: std::time::Duration::ZERO, qd: std::time::Duration::ZERO, el: std::time::Duration::ZERO, nu: 0.0, delta: 0.0, alpha: 0.0, max_rate_bps: Some(0.0), ss_epoch_rule: true, rr_check: true });
        prop_assert_eq!(check_contract(&mut c, &seq), Ok(()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(8))]
    /// Random capacity steps through the scripted bottleneck: the cumulative-subscription
    /// contract holds on every action and the level never exceeds the session's layers.
    #[test]
    fn bottleneck_runs_keep_the_contract(
        cap in 40_000f64..1_500_000.0,
        at in 5f64..50.0,
        cap2 in 20_000f64..1_500_000.0,
    ) {
        let sc = scenario(cap, 120.0).capacity_at(at, cap2);
        let mut c = Webrc::default();
        let tr = run(&mut c, &sc);
        prop_assert!(tr.violations.is_empty(), "{:?}", tr.violations);
        prop_assert!(tr.max_level(0.0, 1e6) as usize <= sc.session.layers.len());
    }
}
