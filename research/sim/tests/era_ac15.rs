//! `era.md` AC-15, decision-rule conformance: `congestion::era::check_decision_log` over
//! (1) every decision of the ERA receiver in simulator runs of ERA Exp. II
//! (`research/scenarios/era-exp2-bandwidth-change.yaml`: 1 Mbit/s, CBR 500 kbit/s at 20 s, 250 at
//! 40 s; FIFO, so it has pair drops, losses, climbs and falls) and Exp. I, and (2) a
//! unit-level synthetic trace that drives one ERA receiver through every kind of decision
//! (climb, R_TCP-bound fall, step-1 drop, E1 hold, E2 empty RAI). Tampered copies of the
//! logs must be rejected, so the check can fail. Recorded as `era/AC-15`.

use congestion::era::{check_decision_log, DecisionLogCheck, Era};
use congestion::{Decision, LayeredController, PacketArrival, SessionInfo, Time};
use sim::scenario::Scenario;
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// The session the monitor's ladder describes (cumulative kbit/s, `[0] = 0`).
fn session_of(ladder_kbps: &[f64]) -> SessionInfo {
    let n = ladder_kbps.len() - 1;
    let mut info = SessionInfo::equal_layers(n, 1, Ipv4Addr::new(239, 1, 0, 0), 5000);
    for (k, l) in info.layers.iter_mut().enumerate() {
        l.rate_bps = ((ladder_kbps[k + 1] - ladder_kbps[k]) * 1000.0).round() as u64;
    }
    info
}

fn add(a: &mut DecisionLogCheck, b: DecisionLogCheck) {
    a.rai += b.rai;
    a.holds += b.holds;
    a.pp_drops += b.pp_drops;
    a.exits += b.exits;
    a.other += b.other;
}

/// Copies of `log` with one rule broken each; every one must be rejected.
fn tampered(log: &[Decision]) -> Vec<Vec<Decision>> {
    let mut out = Vec::new();
    if let Some(i) = log
        .iter()
        .position(|d| d.reason == "rai" && d.to_layers > 2)
    {
        // R_pp no longer the minimum of its list.
        let mut a = log.to_vec();
        for (k, v) in a[i].inputs.iter_mut() {
            if *k == "r_pp" && *v > 0.0 {
                *v *= 1.5;
            }
        }
        out.push(a);
        // A level above the target.
        let mut b = log.to_vec();
        b[i].to_layers = b[i].to_layers.saturating_add(2);
        out.push(b);
        // A target that ignores R_TCP under loss / R_pp without loss.
        let mut c = log.to_vec();
        for (k, v) in c[i].inputs.iter_mut() {
            if *k == "r_target" {
                *v *= 2.0;
            }
        }
        out.push(c);
    }
    if let Some(i) = log.iter().position(|d| d.reason == "pp-drop") {
        // A step-1 drop that does not drop.
        let mut a = log.to_vec();
        a[i].to_layers = a[i].from_layers;
        out.push(a);
    }
    out
}

/// A synthetic trace: 100 × 20 kbit/s, pairs at a scripted bottleneck per RAI, some RAIs
/// with a lost packet, two with a slow pair, two with singles only, one empty.
fn synthetic() -> (SessionInfo, Vec<Decision>) {
    let info = SessionInfo::equal_layers(100, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    let mut e = Era::default();
    e.handle_announcement(Time::ZERO, &info);
    let mut seq = vec![0u64; 100];
    let mut log = Vec::new();
    // (capacity bit/s, pairs, lose one packet, one slow pair at this rate, singles only)
    // Singles first: E1 holds need a loss-free PLR window (8 RAIs), so they come before
    // the first loss.
    let plan: &[(f64, u64, bool, Option<f64>, bool)] = &[
        (0.0, 0, false, None, true),
        (0.0, 0, false, None, true),
        (300_000.0, 6, false, None, false),
        (300_000.0, 8, false, None, false),
        (1_000_000.0, 10, false, None, false),
        (1_000_000.0, 20, true, None, false),
        (1_000_000.0, 20, false, Some(250_000.0), false),
        (600_000.0, 20, true, None, false),
        (600_000.0, 20, false, None, false),
        (0.0, 0, false, None, false),
        (150_000.0, 10, true, None, false),
        (150_000.0, 10, false, None, false),
        (2_000_000.0, 30, false, None, false),
        (2_000_000.0, 30, true, None, false),
        (400_000.0, 12, false, Some(120_000.0), false),
        (400_000.0, 12, false, None, false),
    ];
    for (rai, &(cap, pairs, lose, slow, singles)) in plan.iter().enumerate() {
        let base = 1000 * rai as u64;
        let held = usize::from(e.layers().max(1));
        let mut lost_one = !lose;
        if singles {
            for k in 0..6u64 {
                let t = Time::from_millis(base + 50 + 150 * k);
                let s = &mut seq[0];
                e.handle_packet(t, &pkt(0, *s, 0, 1, t));
                *s += 1;
            }
        }
        for i in 0..pairs {
            let layer = (i as usize % held) as u8;
            let c = match slow {
                Some(r) if i == pairs / 2 => r,
                // Spread the samples a little (FIFO jitter): +0..8 %.
                _ => cap * (1.0 + 0.02 * ((i * 7) % 5) as f64),
            };
            let t0 = Time::from_millis(base + 20 + 900 * i / pairs.max(1));
            let gap = std::time::Duration::from_secs_f64(8.0 * 512.0 / c);
            let s = &mut seq[layer as usize];
            if !lost_one && i == pairs / 3 {
                *s += 1; // one packet of this layer never arrives
                lost_one = true;
            }
            e.handle_packet(t0, &pkt(layer, *s, 0, 2, t0));
            e.handle_packet(t0 + gap, &pkt(layer, *s + 1, 1, 2, t0 + gap));
            *s += 2;
        }
        e.handle_timeout(Time::from_millis(base + 1000));
        while e.poll_action().is_some() {}
        log.extend(std::iter::from_fn(|| e.poll_decision()));
    }
    (info, log)
}

fn pkt(layer: u8, seq: u64, pos: u8, len: u8, t: Time) -> PacketArrival {
    PacketArrival {
        layer,
        seq,
        bunch_pos: pos,
        bunch_len: len,
        size: 512,
        send_time_us: 0,
        recv_time: t,
    }
}

#[test]
fn ac15_decision_logs_conform() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../scenarios");
    let mut sim_total = DecisionLogCheck::default();
    let mut rejected = 0;
    let mut tampers = 0;
    let mut errors = Vec::new();
    let mut runs = Vec::new();
    for (file, seeds) in [
        ("era-exp2-bandwidth-change.yaml", 1..=3u64),
        ("era-exp1-convergence.yaml", 1..=1),
    ] {
        let sc = Scenario::load(&dir.join(file)).unwrap();
        for seed in seeds {
            let (sim, _) = sim::run(&sc, seed).unwrap();
            for m in &sim.net.monitors.list {
                if m.decisions.is_empty() {
                    continue;
                }
                let info = session_of(&m.ladder_kbps);
                match check_decision_log(&m.decisions, &info, 3) {
                    Ok(c) => {
                        add(&mut sim_total, c);
                        runs.push(format!("{} seed {seed} {}", sc.name, m.name));
                    }
                    Err(e) => errors.push(format!("{} seed {seed} {}: {e}", sc.name, m.name)),
                }
                for t in tampered(&m.decisions) {
                    tampers += 1;
                    rejected += usize::from(check_decision_log(&t, &info, 3).is_err());
                }
            }
        }
    }
    let (info, log) = synthetic();
    let synth = check_decision_log(&log, &info, 3);
    if let Err(e) = &synth {
        errors.push(format!("synthetic: {e}"));
    }
    for t in tampered(&log) {
        tampers += 1;
        rejected += usize::from(check_decision_log(&t, &info, 3).is_err());
    }
    let synth = synth.unwrap_or_default();
    let pass = errors.is_empty()
        && sim_total.rai > 0
        && sim_total.pp_drops > 0
        && synth.rai > 0
        && synth.holds > 0
        && synth.pp_drops > 0
        && synth.other > 0
        && tampers > 0
        && rejected == tampers;
    testkit::record(
        "era/AC-15",
        &format!(
            "simulator (ERA Exp. II seeds 1-3, Exp. I seed 1; {} receivers): {} decisions \
             ({} RAI, {} holds, {} step-1 drops, {} exits, {} base/empty) all conform; \
             synthetic trace: {} decisions ({} RAI, {} holds, {} step-1 drops, {} base/empty) \
             conform; {rejected}/{tampers} tampered logs rejected; violations: {}",
            runs.len(),
            sim_total.total(),
            sim_total.rai,
            sim_total.holds,
            sim_total.pp_drops,
            sim_total.exits,
            sim_total.other,
            synth.total(),
            synth.rai,
            synth.holds,
            synth.pp_drops,
            synth.other,
            if errors.is_empty() {
                "none".to_string()
            } else {
                errors.join("; ")
            }
        ),
        Some(pass),
        "cargo test --release -p layercast-sim --test era_ac15",
    );
    assert!(errors.is_empty(), "{errors:#?}");
    assert!(sim_total.rai > 0 && sim_total.pp_drops > 0, "{sim_total:?}");
    assert!(
        synth.rai > 0 && synth.holds > 0 && synth.pp_drops > 0 && synth.other > 0,
        "synthetic trace misses a kind of decision: {synth:?}"
    );
    assert_eq!(rejected, tampers, "a tampered log passed the check");
}
