//! ERA in virtual time over a scripted bottleneck (`era_netmodel`): convergence, holding,
//! shedding on a capacity step and on cross traffic, coordination of receivers, and the
//! decision-log conformance (AC-15) and cumulative-subscription properties on random runs.

mod era_netmodel;

use congestion::era::{Era, EraConfig, RttMode, Step1Target};
use congestion::{Action, Decision, LayeredController, SessionInfo, Time};
use era_netmodel::{check_cumulative, run, Cross, Qdisc, Scenario, Trace};
use proptest::prelude::*;
use std::net::Ipv4Addr;
use std::time::Duration;

fn thesis_session() -> SessionInfo {
    // era.md Table 6-1: 100 equal 20 kbit/s layers, 512-byte pairs, RAI 1 s.
    SessionInfo::equal_layers(100, 20_000, Ipv4Addr::new(239, 1, 0, 0), 5000)
}

fn era() -> Box<dyn LayeredController> {
    Box::new(Era::new(EraConfig::default()))
}

fn two_bdp(capacity: f64, rtt_s: f64) -> Qdisc {
    Qdisc::Fifo {
        limit_bytes: ((2.0 * capacity * rtt_s / 8.0) as u64).max(4 * 512),
    }
}

fn t(s: f64) -> Time {
    Time::from_secs_f64(s)
}

fn value(d: &Decision, key: &str) -> f64 {
    d.inputs
        .iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| *v)
        .unwrap_or_else(|| panic!("no {key} in {d:?}"))
}

/// AC-15 on a decision log (`congestion::era::check_decision_log`): R_pp = min(list) or −1
/// with < 3 entries; target per the §1.1.13 table; after the decision R_i ≤ R_T + tol and
/// R_{i+1} ≥ R_T except at bounds; step-1 drops carry their sample and end at or below it.
fn check_ac15(trace_decisions: &[Decision], info: &SessionInfo) -> Result<(), String> {
    congestion::era::check_decision_log(trace_decisions, info, 3).map(|_| ())
}

/// Joins happen only at RAI decisions (or the initial base join after a SAM).
fn check_joins_at_decisions(
    actions: &[(Time, Action)],
    decisions: &[Decision],
) -> Result<(), String> {
    for (at, a) in actions {
        if let Action::Join(_) = a {
            let ok = decisions.iter().any(|d| {
                d.at == *at
                    && d.to_layers > d.from_layers
                    && matches!(d.reason, "rai" | "join-base")
            });
            if !ok {
                return Err(format!("join at {at:?} without an RAI decision"));
            }
        }
    }
    Ok(())
}

#[test]
fn ac2_converges_to_15_layers_on_300k_without_loss_and_holds() {
    // ERA Exp. I analogue: 300 kbit/s bottleneck, 2 receivers start at 3 s.
    let mut s = Scenario::new(thesis_session(), 300_000.0, 40.0);
    s.qdisc = two_bdp(300_000.0, 0.06);
    s.prop_delay = Duration::from_millis(20);
    s.starts = vec![t(3.0), t(3.0)];
    let mut ctls = vec![era(), era()];
    let tr = run(&s, &mut ctls);
    for rx in &tr.rx {
        let reached = rx
            .first_time(t(3.0), |l| l == 15)
            .expect("never reached 15 layers");
        // Thesis: 2 s; pass bar ≤ 3 s (3 RAIs). The base layer alone gives ~2.4 pairs per
        // RAI, so the first decision with 3 samples comes at the second RAI (E1 carry).
        assert!(reached <= t(6.0), "15 layers at {reached:?}");
        // Holds: no change after convergence.
        assert_eq!(
            rx.changes_between(reached + Duration::from_millis(1), t(40.0)),
            0
        );
        assert_eq!(rx.level_at(t(39.0)), 15);
        check_cumulative(&rx.actions).unwrap();
        check_ac15(&rx.decisions, &s.info).unwrap();
        check_joins_at_decisions(&rx.actions, &rx.decisions).unwrap();
        // Mean throughput over the last 30 s ≥ 261 kbit/s (E ≥ 0.87).
        let bytes: u64 = rx.bytes_per_sec[10..40].iter().sum();
        let mean = bytes as f64 * 8.0 / 30.0;
        assert!(mean >= 261_000.0, "mean {mean}");
    }
    assert!(
        tr.session_drops.is_empty(),
        "{} drops",
        tr.session_drops.len()
    );
    // Coordination: both receivers decide on the same SAM-phased grid, to the same level.
    let a: Vec<_> = tr.rx[0]
        .decisions
        .iter()
        .map(|d| (d.at, d.to_layers))
        .collect();
    let b: Vec<_> = tr.rx[1]
        .decisions
        .iter()
        .map(|d| (d.at, d.to_layers))
        .collect();
    assert_eq!(a, b);
}

#[test]
fn reaches_capacity_level_for_several_capacities() {
    // Table-driven: the level held is the highest with R_i <= C (tolerance rule), reached
    // within 3 RAIs of the start and never left.
    for (cap, want) in [
        (100_000.0, 5u8),
        (250_000.0, 12),
        (400_000.0, 20),
        (1_000_000.0, 50),
    ] {
        let mut s = Scenario::new(thesis_session(), cap, 20.0);
        s.qdisc = two_bdp(cap, 0.06);
        s.starts = vec![t(1.0)];
        let mut ctls = vec![era()];
        let tr = run(&s, &mut ctls);
        let rx = &tr.rx[0];
        let reached = rx
            .first_time(t(1.0), |l| l == want)
            .unwrap_or_else(|| panic!("cap {cap}: never at {want}; levels {:?}", rx.levels));
        assert!(reached <= t(4.0), "cap {cap}: {reached:?}");
        assert_eq!(rx.level_at(t(19.9)), want, "cap {cap}: {:?}", rx.levels);
        assert_eq!(
            rx.changes_between(reached + Duration::from_millis(1), t(20.0)),
            0
        );
        assert!(tr.session_drops.is_empty(), "cap {cap}");
    }
}

#[test]
fn sheds_within_one_rai_when_capacity_halves() {
    // 1 Mbit/s → 500 kbit/s at 20 s: the first pair through the slower link carries the
    // signal and step 1 cuts at once (thesis: 1 s reaction).
    let mut s = Scenario::new(thesis_session(), 1_000_000.0, 30.0);
    s.qdisc = two_bdp(1_000_000.0, 0.04);
    s.capacity_steps = vec![(t(20.0), 500_000.0)];
    s.starts = vec![t(3.0)];
    let mut ctls = vec![era()];
    let tr = run(&s, &mut ctls);
    let rx = &tr.rx[0];
    assert!(rx.level_at(t(19.9)) >= 45, "{:?}", rx.levels);
    let shed = rx.first_time(t(20.0), |l| l <= 25).expect("never shed");
    assert!(shed <= t(21.0), "shed at {shed:?}");
    assert_eq!(rx.level_at(t(29.9)), 25);
    // The drop was a step-1 drop with its triggering sample logged (AC-15).
    let d = rx
        .decisions
        .iter()
        .find(|d| d.at >= t(20.0) && d.reason == "pp-drop")
        .expect("no step-1 drop");
    assert!((value(d, "pp_sample") - 500_000.0).abs() < 1_000.0, "{d:?}");
    check_ac15(&rx.decisions, &s.info).unwrap();
    check_cumulative(&rx.actions).unwrap();
}

#[test]
fn ac3_cbr_cross_traffic_sheds_within_one_second() {
    // Ch.4 Exp. I topology: 1 Mbit/s, receiver at 3 s, CBR 500 kbit/s from 20 s.
    let mut s = Scenario::new(thesis_session(), 1_000_000.0, 40.0);
    s.qdisc = two_bdp(1_000_000.0, 0.04);
    s.starts = vec![t(3.0)];
    s.cross = vec![Cross {
        start: t(20.0),
        stop: t(40.0),
        rate_bps: 500_000.0,
        size: 512,
        greedy: false,
        jitter: 0.2,
    }];
    let mut ctls = vec![era()];
    let tr = run(&s, &mut ctls);
    let rx = &tr.rx[0];
    let up = rx
        .first_time(t(3.0), |l| l >= 45)
        .expect("never reached 45 layers");
    assert!(up <= t(6.0), "45 layers at {up:?}");
    let shed = rx.first_time(t(20.0), |l| l <= 25).expect("never shed");
    assert!(shed <= t(21.0), "shed at {shed:?}");
    check_ac15(&rx.decisions, &s.info).unwrap();
}

#[test]
fn base_layer_only_path_holds_base_and_never_exits() {
    // E1/E3: a 30 kbit/s path fits only the base layer. No exit, no empty target.
    let mut s = Scenario::new(thesis_session(), 30_000.0, 30.0);
    s.qdisc = two_bdp(30_000.0, 0.2);
    let mut ctls = vec![era()];
    let tr = run(&s, &mut ctls);
    let rx = &tr.rx[0];
    assert!(rx.actions.iter().all(|(_, a)| *a != Action::Exit));
    assert_eq!(rx.level_at(t(29.0)), 1);
    assert!(rx.decisions.iter().any(|d| d.reason == "rai-hold"));
    check_ac15(&rx.decisions, &s.info).unwrap();
}

#[test]
fn outage_drops_one_layer_per_empty_rai_and_stays_on_base() {
    // E2: capacity collapses to almost nothing: RAIs without a single packet drop one layer
    // each, never below the base layer.
    let mut s = Scenario::new(thesis_session(), 400_000.0, 40.0);
    s.qdisc = two_bdp(400_000.0, 0.06);
    s.capacity_steps = vec![(t(10.0), 1.0)];
    let mut ctls = vec![era()];
    let tr = run(&s, &mut ctls);
    let rx = &tr.rx[0];
    assert_eq!(rx.level_at(t(9.9)), 20);
    let empties: Vec<&Decision> = rx
        .decisions
        .iter()
        .filter(|d| d.reason == "rai-empty")
        .collect();
    assert!(!empties.is_empty());
    for d in &empties {
        assert_eq!(d.to_layers, d.from_layers.saturating_sub(1).max(1));
    }
    assert_eq!(rx.level_at(t(39.9)), 1);
    assert!(rx.actions.iter().all(|(_, a)| *a != Action::Exit));
}

#[test]
fn exit_only_when_configured() {
    // A target below the base layer: stays on base by default, exits when configured.
    let info = thesis_session();
    let mk = |exit: bool| -> Trace {
        let mut s = Scenario::new(info.clone(), 400_000.0, 15.0);
        s.capacity_steps = vec![(t(6.0), 10_000.0)];
        s.qdisc = two_bdp(400_000.0, 0.06);
        let cfg = EraConfig {
            exit_below_base: exit,
            ..EraConfig::default()
        };
        let mut ctls: Vec<Box<dyn LayeredController>> = vec![Box::new(Era::new(cfg))];
        run(&s, &mut ctls)
    };
    let stay = mk(false);
    assert!(stay.rx[0].actions.iter().all(|(_, a)| *a != Action::Exit));
    assert_eq!(stay.rx[0].level_at(t(14.9)), 1);
    let leave = mk(true);
    let exits = leave.rx[0]
        .actions
        .iter()
        .filter(|(_, a)| *a == Action::Exit)
        .count();
    assert_eq!(exits, 1, "{:?}", leave.rx[0].decisions.last());
    assert_eq!(leave.rx[0].level_at(t(14.9)), 0);
    check_cumulative(&leave.rx[0].actions).unwrap();
}

#[test]
fn join_latency_rtt_option_measures_graft_delay() {
    let mut s = Scenario::new(thesis_session(), 400_000.0, 20.0);
    s.qdisc = two_bdp(400_000.0, 0.06);
    s.join_latency = Duration::from_millis(30);
    s.prop_delay = Duration::from_millis(20);
    let cfg = EraConfig {
        rtt: RttMode::JoinLatency {
            initial: 0.5,
            window: 32,
        },
        ..EraConfig::default()
    };
    let mut ctls: Vec<Box<dyn LayeredController>> = vec![Box::new(Era::new(cfg))];
    let _ = run(&s, &mut ctls);
    let rtt = ctls[0].stats().rtt_s.unwrap();
    // True join-to-first-packet without the bunch wait: 30 ms graft + 20 ms propagation +
    // ~10 ms serialisation ≈ 60 ms. Each raw sample also waits up to 0.41 s for the layer's
    // next pair; the interval intersection removes most of that.
    assert!((0.04..0.12).contains(&rtt), "rtt {rtt}");
}

#[test]
fn kth_lowest_step1_ignores_a_single_squeezed_sample() {
    // With the E4 option, one low sample does not cut; the thesis default does.
    let run_with = |step1: Step1Target| {
        let mut s = Scenario::new(thesis_session(), 1_000_000.0, 12.0);
        s.qdisc = two_bdp(1_000_000.0, 0.04);
        // One single cross packet at 8 s lands inside some pair with high probability only
        // if timed; use a short burst of three packets 10 ms apart.
        s.cross = vec![Cross {
            start: t(8.0),
            stop: t(8.03),
            rate_bps: 409_600.0,
            size: 512,
            greedy: false,
            jitter: 0.2,
        }];
        let cfg = EraConfig {
            step1,
            ..EraConfig::default()
        };
        let mut ctls: Vec<Box<dyn LayeredController>> = vec![Box::new(Era::new(cfg))];
        run(&s, &mut ctls)
    };
    let literal = run_with(Step1Target::Sample);
    let soft = run_with(Step1Target::KthLowest { k: 3, of_last: 16 });
    let drops = |tr: &Trace| {
        tr.rx[0]
            .decisions
            .iter()
            .filter(|d| d.reason == "pp-drop")
            .count()
    };
    // Whether the burst squeezes into a pair depends on phases; the literal mode drops iff
    // some sample was low, the soft one needs three low samples among the last 16.
    assert!(drops(&soft) <= drops(&literal));
    assert_eq!(
        drops(&soft),
        0,
        "{:?}",
        soft.rx[0]
            .decisions
            .iter()
            .filter(|d| d.reason == "pp-drop")
            .collect::<Vec<_>>()
    );
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    /// Random capacity steps and CBR bursts: the cumulative-subscription invariant, joins only
    /// at RAI decisions, and AC-15 decision conformance hold on every run.
    #[test]
    fn invariants_hold_on_random_scripts(
        cap0 in 50_000.0f64..1_500_000.0,
        steps in proptest::collection::vec((1.0f64..25.0, 20_000.0f64..1_500_000.0), 0..4),
        cross in proptest::collection::vec((1.0f64..25.0, 0.5f64..5.0, 50_000.0f64..800_000.0), 0..3),
        start in 0.0f64..3.0,
        loss_rtt in 0.01f64..0.3,
    ) {
        let mut s = Scenario::new(thesis_session(), cap0, 25.0);
        s.qdisc = two_bdp(cap0, 0.06);
        let mut st: Vec<(Time, f64)> = steps.iter().map(|(a, c)| (t(*a), *c)).collect();
        st.sort_by_key(|x| x.0);
        s.capacity_steps = st;
        s.cross = cross.iter().map(|(a, d, r)| Cross { start: t(*a), stop: t(a + d), rate_bps: *r, size: 512, greedy: false, jitter: 0.2 }).collect();
        s.starts = vec![t(start)];
        let cfg = EraConfig { rtt: RttMode::Fixed(loss_rtt), ..EraConfig::default() };
        let mut ctls: Vec<Box<dyn LayeredController>> = vec![Box::new(Era::new(cfg))];
        let tr = run(&s, &mut ctls);
        let rx = &tr.rx[0];
        prop_assert!(check_cumulative(&rx.actions).is_ok(), "{:?}", check_cumulative(&rx.actions));
        let j = check_joins_at_decisions(&rx.actions, &rx.decisions);
        prop_assert!(j.is_ok(), "{:?}", j);
        let a = check_ac15(&rx.decisions, &s.info);
        prop_assert!(a.is_ok(), "{:?}", a);
        prop_assert!(rx.actions.iter().all(|(_, a)| *a != Action::Exit));
        // Once joined, never below the base layer (no exit by default).
        prop_assert!(rx.levels.iter().skip_while(|(_, l)| *l == 0).all(|(_, l)| *l >= 1));
    }
}
