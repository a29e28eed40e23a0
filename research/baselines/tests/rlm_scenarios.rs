//! RLM: unit tests of each rule, virtual-time bottleneck scenarios, contract property test.

mod baseline_sim;

use baseline_sim::{check_contract, inputs, run, Scenario};
use baselines::rlm::{Config, Rlm, State};
use congestion::{Action, LayeredController, PacketArrival, SessionInfo, Time};
use proptest::prelude::*;
use std::net::Ipv4Addr;
use std::time::Duration;

fn session(rates_kbps: &[u64]) -> SessionInfo {
    let mut s = SessionInfo::equal_layers(rates_kbps.len(), 1, Ipv4Addr::new(239, 1, 0, 0), 5000);
    for (l, r) in s.layers.iter_mut().zip(rates_kbps) {
        l.rate_bps = r * 1000;
    }
    s.packet_size = 1000;
    s
}

fn pkt(layer: u8, seq: u64, t: Time) -> PacketArrival {
    PacketArrival {
        layer,
        seq,
        bunch_pos: 0,
        bunch_len: 1,
        size: 1000,
        send_time_us: t.as_micros(),
        recv_time: t,
    }
}

fn actions(c: &mut Rlm) -> Vec<Action> {
    std::iter::from_fn(|| c.poll_action()).collect()
}

fn exp_layers() -> SessionInfo {
    session(&[32, 64, 128, 256, 512, 1024])
}

#[test]
fn starts_with_base_layer_and_arms_join_timer() {
    let mut c = Rlm::default();
    assert!(c.poll_timeout().is_none());
    c.handle_announcement(Time::ZERO, &exp_layers());
    assert_eq!(actions(&mut c), vec![Action::Join(0)]);
    let (t, _) = c.poll_timeout().unwrap();
    // TJ/2 ≤ delay ≤ TJ/2 + 4·TJ with TJ = 5 s.
    assert!(
        t >= Time::from_secs_f64(2.5) && t <= Time::from_secs_f64(22.5),
        "{t:?}"
    );
}

/// Drives `c` with loss-free base packets until the join experiment for layer 1 happens.
fn run_until_join(c: &mut Rlm, seq: &mut [u64], t: &mut Time) {
    for _ in 0..10_000 {
        *t += Duration::from_millis(50);
        for k in 0..c.layers() {
            c.handle_packet(*t, &pkt(k, seq[k as usize], *t));
            seq[k as usize] += 1;
        }
        if c.poll_timeout().is_some_and(|(d, _)| d <= *t) {
            c.handle_timeout(*t);
        }
        if actions(c).iter().any(|a| matches!(a, Action::Join(_))) {
            return;
        }
    }
    panic!("no join experiment");
}

#[test]
fn failed_join_experiment_drops_and_backs_off_exponentially() {
    let mut c = Rlm::default();
    c.handle_announcement(Time::ZERO, &exp_layers());
    actions(&mut c);
    let (mut seq, mut t) = (vec![0u64; 6], Time::ZERO);
    run_until_join(&mut c, &mut seq, &mut t);
    assert_eq!(c.layers(), 2);
    assert_eq!(c.join_timer(2), 5.0);
    // Loss right after the join (within TD + 2 TDVAR): experiment failed.
    t += Duration::from_millis(300);
    c.handle_packet(t, &pkt(1, 0, t));
    c.handle_packet(t, &pkt(1, 3, t));
    assert_eq!(actions(&mut c), vec![Action::Leave(1)]);
    assert_eq!(c.state(), State::Drop);
    assert_eq!(c.join_timer(2), 10.0, "alpha = 2 back-off");
    assert!(c.join_timer(3) >= 10.0, "higher layers pegged");
    // Detection time moved towards the measured 0.3 s: TD = 0.75·5 + 0.25·0.3.
    let (td, _) = c.detection_time();
    assert!((td - (0.75 * 5.0 + 0.25 * 0.3)).abs() < 1e-9);
    let d: Vec<_> = std::iter::from_fn(|| c.poll_decision()).collect();
    assert!(d
        .iter()
        .any(|d| d.reason == "join-experiment-failed" && d.to_layers == 1));
    // Further loss in D is ignored.
    c.handle_packet(t, &pkt(0, 1000, t));
    assert!(actions(&mut c).is_empty());
}

#[test]
fn backoff_is_capped_at_max() {
    let mut c = Rlm::new(Config {
        init_tj: Duration::from_secs(40),
        ..Config::default()
    });
    c.handle_announcement(Time::ZERO, &exp_layers());
    actions(&mut c);
    let (mut seq, mut t) = (vec![0u64; 6], Time::ZERO);
    run_until_join(&mut c, &mut seq, &mut t);
    t += Duration::from_millis(100);
    c.handle_packet(t, &pkt(1, 0, t));
    c.handle_packet(t, &pkt(1, 5, t));
    assert_eq!(c.join_timer(2), 60.0);
}

#[test]
fn loss_without_recent_join_goes_to_hysteresis_then_measurement() {
    let mut c = Rlm::default();
    c.handle_announcement(Time::ZERO, &exp_layers());
    actions(&mut c);
    let mut t = Time::from_secs_f64(30.0); // the initial join is no longer recent
    c.handle_packet(t, &pkt(0, 0, t));
    c.handle_packet(t, &pkt(0, 2, t));
    assert_eq!(c.state(), State::Hysteresis);
    // Loss in H is ignored.
    c.handle_packet(t, &pkt(0, 9, t));
    assert_eq!(c.state(), State::Hysteresis);
    // TD conservative (5 + 1.5·2 = 8 s) later: M.
    t += Duration::from_secs(8);
    c.handle_timeout(t);
    assert_eq!(c.state(), State::Measurement);
    // In M with only the base layer the threshold cannot drop below min_layers.
    assert_eq!(c.layers(), 1);
}

#[test]
fn measurement_drops_only_above_threshold() {
    let mut c = Rlm::default();
    c.handle_announcement(Time::ZERO, &exp_layers());
    actions(&mut c);
    let (mut seq, mut t) = (vec![0u64; 6], Time::ZERO);
    run_until_join(&mut c, &mut seq, &mut t);
    run_until_join(&mut c, &mut seq, &mut t); // 3 layers, if no loss
    assert_eq!(c.layers(), 3);
    // Long after the joins: loss sends us to H, then M.
    t += Duration::from_secs(30);
    c.handle_packet(t, &pkt(0, seq[0] + 1, t));
    seq[0] += 2;
    assert_eq!(c.state(), State::Hysteresis);
    t += Duration::from_secs(9);
    c.handle_timeout(t);
    assert_eq!(c.state(), State::Measurement);
    // 20 % loss over 40 packets: below 25 %, kept.
    let mut s = seq[0] - 1; // last sequence number delivered
    for i in 0..40 {
        s += if i % 4 == 0 { 2 } else { 1 };
        c.handle_packet(t, &pkt(0, s, t));
    }
    assert_eq!(c.layers(), 3);
    // Heavy loss: dropped.
    for _ in 0..10 {
        s += 3;
        c.handle_packet(t, &pkt(0, s, t));
    }
    assert_eq!(c.layers(), 2);
    assert_eq!(c.state(), State::Drop);
}

#[test]
fn steady_period_relaxes_join_timer_to_floor() {
    let mut c = Rlm::new(Config {
        init_tj: Duration::from_secs(2),
        ..Config::default()
    });
    c.handle_announcement(Time::ZERO, &exp_layers());
    actions(&mut c);
    let (mut seq, mut t) = (vec![0u64; 6], Time::ZERO);
    run_until_join(&mut c, &mut seq, &mut t);
    t += Duration::from_millis(100);
    c.handle_packet(t, &pkt(1, 0, t));
    c.handle_packet(t, &pkt(1, 4, t)); // failed: TJ(2) = 4, back to level 1
    assert_eq!(c.join_timer(2), 4.0);
    assert_eq!(c.layers(), 1);
}

#[test]
fn scenario_exponential_layers_settle_near_capacity_and_follow_a_drop() {
    // PLM §7.9 Top_1 with exponential layers: 32..1024 kbit/s. Capacity 600 kbit/s holds
    // 4 layers (480 kbit/s); at 400 s capacity falls to 300 kbit/s (3 layers, 224 kbit/s).
    let sc = Scenario::new(exp_layers(), 600_000.0, 700.0).capacity_at(400.0, 300_000.0);
    let mut c = Rlm::default();
    let tr = run(&mut c, &sc);
    assert!(tr.violations.is_empty(), "{:?}", tr.violations);
    let reach = tr.first_reach(4, 0.0).expect("never reached 4 layers");
    assert!(reach < 200.0, "RLM took {reach} s to reach 4 layers");
    // Near capacity: mostly 4 layers in 200-400 s, never more than one experiment above.
    let m = tr.mean_level(200.0, 400.0);
    assert!(m > 3.7 && m < 4.6, "mean level {m}");
    assert!(tr.max_level(200.0, 400.0) <= 5);
    // After the drop: back to 3 layers on average, with the failed experiments costing loss.
    let m2 = tr.mean_level(450.0, 700.0);
    assert!(m2 > 2.6 && m2 < 3.6, "mean level after drop {m2}");
    let plr = tr.loss_ratio(200.0, 700.0);
    assert!(plr < 0.08, "loss {plr}");
    assert!(
        tr.drops(200.0, 700.0) > 0,
        "join experiments must cost some loss (FM-1)"
    );
    testkit::record(
        "plm/S10-exp",
        &format!("single-bottleneck analogue (not Top_1), 32..1024 kbit/s layers: loss {:.2} % (200-700 s)", 100.0 * plr),
        Some((0.011..=0.021).contains(&plr)),
        "cargo test -p layercast-congestion --test rlm_scenarios scenario_exponential",
    );
    println!(
        "rlm: reach4={reach:.1}s mean(200-400)={m:.2} mean(450-700)={m2:.2} plr={plr:.4} joins={}",
        tr.joins()
    );
}

#[test]
fn scenario_small_layers_converge_slowly() {
    // 10 kbit/s layers (PLM §7.9 / S10): RLM's 5 s minimum join timer plus TD makes
    // convergence to ~25 layers take minutes (FM-3).
    let s = session(&[10; 40]);
    let sc = Scenario::new(s, 255_000.0, 600.0);
    let mut c = Rlm::default();
    let tr = run(&mut c, &sc);
    assert!(tr.violations.is_empty(), "{:?}", tr.violations);
    let reach = tr.first_reach(20, 0.0);
    assert!(
        reach.is_none_or(|t| t > 100.0),
        "too fast for RLM: {reach:?}"
    );
    let m = tr.mean_level(500.0, 600.0);
    assert!(m > 14.0 && m < 27.0, "mean level {m}");
    // The 25 % threshold keeps a slightly-too-high top layer: its loss never reaches 25 %
    // (PLM §7.9: 3.2 % mean loss with 10 kbit/s layers).
    let plr = tr.loss_ratio(0.0, 600.0);
    let reach25 = tr.first_reach(25, 0.0);
    assert!(plr > 0.002 && plr < 0.06, "plr {plr}");
    testkit::record(
        "plm/S10",
        &format!(
            "single-bottleneck analogue (not Top_1), 40 x 10 kbit/s, 255 kbit/s: k*=25 first reached at {:.0} s, mean loss {:.2} %",
            reach25.unwrap_or(f64::NAN),
            100.0 * plr
        ),
        Some(reach25.is_none_or(|t| t > 400.0) && (0.022..=0.042).contains(&plr)),
        "cargo test -p layercast-congestion --test rlm_scenarios scenario_small_layers",
    );
    println!(
        "rlm small layers: reach20={reach:?} reach25={reach25:?} mean(500-600)={m:.1} plr={plr:.4}"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn contract_holds_for_arbitrary_inputs(seq in inputs()) {
        let mut c = Rlm::default();
        prop_assert_eq!(check_contract(&mut c, &seq), Ok(()));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(60))]
    /// Degenerate configurations (zero durations and factors) must not panic or spin.
    #[test]
    fn degenerate_config_is_harmless(seq in inputs()) {
        let mut c = Rlm::new(Config { alpha: 0.0, beta: 0.0, init_tj: std::time::Duration::ZERO, max_tj: std::time::Duration::ZERO, init_td: std::time::Duration::ZERO, init_td_var: std::time::Duration::ZERO, g1: 1.0, g2: 1.0, loss_threshold: 0.0, loss_min_packets: 0, min_layers: 0, seed: 0 });
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
        let sc = Scenario::new(exp_layers(), cap, 120.0).capacity_at(at, cap2);
        let mut c = Rlm::default();
        let tr = run(&mut c, &sc);
        prop_assert!(tr.violations.is_empty(), "{:?}", tr.violations);
        prop_assert!(tr.max_level(0.0, 1e6) as usize <= sc.session.layers.len());
    }
}
