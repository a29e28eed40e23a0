//! `era.md` AC-0 in one place: the Eq. 5-6 vectors, the PLR vector, the layer-choice vectors
//! (with the documented E5 tolerance rule) and "no exit when l = 0 and R_pp = −1", measured
//! through the public API and recorded for `docs/acceptance.md`.

use congestion::era::{choose_layers, Era, EraConfig};
use congestion::estimators::{era_eq_5_6, loss_ratio};
use congestion::{Action, LayeredController, PacketArrival, SessionInfo, Time};
use std::net::Ipv4Addr;

/// One single (no pair) base-layer packet.
fn single(seq: u64, at_ms: u64) -> PacketArrival {
    PacketArrival {
        layer: 0,
        seq,
        bunch_pos: 0,
        bunch_len: 1,
        size: 512,
        send_time_us: 0,
        recv_time: Time::from_millis(at_ms),
    }
}

#[test]
fn ac0_vectors() {
    // §1.1.12: eq(512 B, 0.05 s, 4/832) and eq(512, 0.05, 0.1), bit/s.
    let eq1 = era_eq_5_6(512.0, 0.05, 4.0 / 832.0, false).unwrap_or(f64::NAN);
    let eq2 = era_eq_5_6(512.0, 0.05, 0.1, false).unwrap_or(f64::NAN);
    // PLR(nrecv = 828, nloss = 4).
    let plr = loss_ratio(828, 4);
    // §1.1.17 layer choice on 100 equal 20 kbit/s layers. The spec's indices are 0-based
    // (index i = i + 1 layers): cur index 18 -> 9; cur index 6 with the trace's
    // 399,999.99999999895 -> 18 or 19 by the tolerance rule (ours: 19, E5 tolerance 0.001).
    let info = SessionInfo::equal_layers(100, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    let cum: Vec<f64> = (0..100).map(|i| info.cumulative_rate(i)).collect();
    let choose1 = choose_layers(&cum, 19, 200_000.0, 0.001, false) as i64 - 1;
    let choose2 = choose_layers(&cum, 7, 399_999.999_999_998_95, 0.001, false) as i64 - 1;
    // No exit when l = 0 and R_pp = −1, even with exit below the base layer enabled (E1).
    let small = SessionInfo::equal_layers(10, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    let mut e = Era::new(EraConfig {
        exit_below_base: true,
        pp_carry_rais: 1,
        ..EraConfig::default()
    });
    e.handle_announcement(Time::ZERO, &small);
    let mut actions = Vec::new();
    while let Some(a) = e.poll_action() {
        actions.push(a);
    }
    for rai in 0..5u64 {
        for k in 0..5u64 {
            let seq = rai * 5 + k;
            e.handle_packet(
                Time::from_millis(1000 * rai + 100 + 150 * k),
                &single(seq, 1000 * rai + 100 + 150 * k),
            );
        }
        e.handle_timeout(Time::from_millis(1000 * (rai + 1)));
        while let Some(a) = e.poll_action() {
            actions.push(a);
        }
    }
    let holds = std::iter::from_fn(|| e.poll_decision())
        .filter(|d| {
            d.reason == "rai-hold"
                && d.inputs.contains(&("r_pp", -1.0))
                && d.inputs.contains(&("plr", 0.0))
        })
        .count();
    let no_exit = actions == [Action::Join(0)] && e.layers() == 1 && holds == 5;

    let ok_eq1 = (eq1 - 1_386_939.5).abs() <= 1.0;
    let ok_eq2 = (eq2 - 145_006.8).abs() <= 1.0;
    let ok_plr = (plr - 0.0048077).abs() < 5e-8;
    let ok_c1 = choose1 == 9;
    let ok_c2 = choose2 == 18 || choose2 == 19;
    testkit::record(
        "era/AC-0",
        &format!(
            "eq(512 B, 0.05 s, 4/832) = {eq1:.4} bit/s; eq(512, 0.05, 0.1) = {eq2:.4}; \
             PLR(828, 4) = {plr:.7}; choose(cur=18, 200 000) -> {choose1}; choose(cur=6, \
             399 999.99999999895) -> {choose2} (E5 tolerance 0.001 of a layer); l = 0 and \
             R_pp = -1 with exit enabled: {holds} of 5 RAIs held, actions {actions:?}, no exit: \
             {no_exit}"
        ),
        Some(ok_eq1 && ok_eq2 && ok_plr && ok_c1 && ok_c2 && no_exit),
        "cargo test --release -p layercast-congestion --test era_acceptance",
    );
    assert!(ok_eq1, "{eq1}");
    assert!(ok_eq2, "{eq2}");
    assert!(ok_plr, "{plr}");
    assert!(ok_c1, "{choose1}");
    assert!(ok_c2, "{choose2}");
    assert!(no_exit, "{actions:?} {holds}");
}
