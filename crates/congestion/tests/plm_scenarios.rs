//! PLM in virtual time behind a fair-queueing bottleneck (`plm.md` §9.A checks that fit a
//! unit test: S0 estimator fidelity, S1-style convergence with no loss and no later changes,
//! S3/S4-style reaction to new flows, strict vs permissive), and invariants on random runs.

#[path = "era_netmodel/mod.rs"]
mod netmodel;

use congestion::estimators::BunchSampler;
use congestion::plm::{Plm, PlmConfig};
use congestion::{
    Action, Decision, LayeredController, PacketArrival, SessionInfo, Stats, Time, TimerReason,
};
use netmodel::{check_cumulative, run, Cross, Qdisc, Scenario};
use proptest::prelude::*;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn t(s: f64) -> Time {
    Time::from_secs_f64(s)
}

fn session(n: usize, rate: u64) -> SessionInfo {
    let mut s = SessionInfo::equal_layers(n, rate, Ipv4Addr::new(239, 2, 0, 0), 6000);
    s.packet_size = 500; // plm.md §6.1
    s
}

fn fq() -> Qdisc {
    Qdisc::FairQueue { per_flow_pkts: 20 }
}

fn plm() -> Box<dyn LayeredController> {
    Box::new(Plm::default())
}

fn greedy(start: f64, stop: f64) -> Cross {
    Cross {
        start: t(start),
        stop: t(stop),
        rate_bps: 0.0,
        size: 500,
        greedy: true,
        jitter: 0.0,
    }
}

/// Holds every layer from the first SAM and records every bunch sample (for S0).
struct Probe {
    n: u8,
    sent: bool,
    sampler: BunchSampler,
    samples: Arc<Mutex<Vec<f64>>>,
    actions: Vec<Action>,
}

impl LayeredController for Probe {
    fn name(&self) -> &'static str {
        "probe"
    }
    fn handle_announcement(&mut self, _now: Time, _info: &SessionInfo) {
        if !self.sent {
            self.sent = true;
            self.actions = (0..self.n).rev().map(Action::Join).collect();
        }
    }
    fn handle_packet(&mut self, _now: Time, pkt: &PacketArrival) {
        if let Some(s) = self.sampler.on_packet(pkt) {
            self.samples.lock().unwrap().push(s.rate_bps);
        }
    }
    fn handle_timeout(&mut self, _now: Time) {}
    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop()
    }
    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        None
    }
    fn poll_decision(&mut self) -> Option<Decision> {
        None
    }
    fn stats(&self) -> Stats {
        Stats::default()
    }
    fn layers(&self) -> u8 {
        if self.sent {
            self.n
        } else {
            0
        }
    }
}

#[test]
fn s0_pair_samples_measure_the_fair_share() {
    // One FQ link of rate R, k greedy equal-size flows plus the session: every sample is
    // R/(k+1) within 1%.
    for k in [1usize, 3, 9] {
        let r = 1_000_000.0;
        let mut s = Scenario::new(session(10, 20_000), r, 10.0);
        s.qdisc = fq();
        s.cross = (0..k).map(|_| greedy(0.0, 100.0)).collect();
        let want = r / (k as f64 + 1.0);
        // Hold the most layers that stay below the share, so pairs are not lost.
        let n = ((want / 20_000.0) as u8 - 1).min(10);
        let samples = Arc::new(Mutex::new(Vec::new()));
        let mut ctls: Vec<Box<dyn LayeredController>> = vec![Box::new(Probe {
            n,
            sent: false,
            sampler: BunchSampler::new(),
            samples: samples.clone(),
            actions: Vec::new(),
        })];
        let tr = run(&s, &mut ctls);
        assert!(tr.rx[0].delivered > 100);
        let samples = samples.lock().unwrap();
        assert!(samples.len() > 50, "k={k}: {} samples", samples.len());
        assert!(tr.session_drops.is_empty());
        for x in samples.iter() {
            assert!((x / want - 1.0).abs() < 0.01, "k={k}: sample {x} vs {want}");
        }
    }
}

#[test]
fn s1_converges_to_k_star_by_two_seconds_without_loss_or_later_changes() {
    // Top_1-like: one session alone on FQ links of 256, 128 and 64 kbit/s, 10 kbit/s layers.
    // k* = largest k with B_k < share: 25, 12, 6 (plm.md S1 with the ns-2 values).
    for (cap, kstar) in [(256_000.0, 25u8), (128_000.0, 12), (64_000.0, 6)] {
        let mut s = Scenario::new(session(30, 10_000), cap, 60.0);
        s.qdisc = fq();
        s.starts = vec![t(5.0)];
        s.sam_start = t(0.2);
        let mut ctls = vec![plm()];
        let tr = run(&s, &mut ctls);
        let rx = &tr.rx[0];
        let at = rx.first_time(t(5.0), |l| l == kstar).expect("never at k*");
        // The SAM arrives at 5.2 s (first after start); then C = 1 s plus one more sample.
        assert!(at <= t(7.5), "cap {cap}: k* at {at:?}; {:?}", rx.levels);
        assert_eq!(
            rx.changes_between(at + Duration::from_millis(1), t(60.0)),
            0,
            "cap {cap}: {:?}",
            rx.levels
        );
        assert!(
            tr.session_drops.is_empty(),
            "cap {cap}: {} drops",
            tr.session_drops.len()
        );
        check_cumulative(&rx.actions).unwrap();
    }
}

#[test]
fn s3_reacts_to_new_flows_within_one_sample_and_recovers() {
    // 600 kbit/s FQ, 20 kbit/s layers: alone 29 layers (580k < 600k); two greedy flows from
    // 20 s to 40 s leave a 200k share → 9 layers (180k); back to 29 after they stop.
    let mut s = Scenario::new(session(40, 20_000), 600_000.0, 60.0);
    s.qdisc = fq();
    s.cross = vec![greedy(20.0, 40.0), greedy(20.0, 40.0)];
    let mut ctls = vec![plm()];
    let tr = run(&s, &mut ctls);
    let rx = &tr.rx[0];
    assert_eq!(rx.level_at(t(19.9)), 29, "{:?}", rx.levels);
    let down = rx.first_time(t(20.0), |l| l == 9).expect("never at 9");
    assert!(down <= t(20.5), "drop at {down:?}");
    assert_eq!(
        rx.changes_between(down + Duration::from_millis(1), t(40.0)),
        0,
        "{:?}",
        rx.levels
    );
    let up = rx.first_time(t(40.0), |l| l == 29).expect("never back");
    assert!(up <= t(42.0), "recovered at {up:?}");
    // Drops are ≥ 1 layer in one event and joins happen at most once per C.
    let adds: Vec<Time> = rx
        .decisions
        .iter()
        .filter(|d| d.reason == "pp-add" && d.to_layers > d.from_layers)
        .map(|d| d.at)
        .collect();
    for w in adds.windows(2) {
        assert!(w[1] - w[0] >= Duration::from_secs(1), "{adds:?}");
    }
    assert!(
        tr.session_drops.len() <= 20,
        "{} drops",
        tr.session_drops.len()
    );
}

#[test]
fn fifo_diagnostic_takes_more_than_the_fair_share() {
    // S12-style diagnostic: without FQ a pair sees the link capacity unless cross traffic
    // squeezes into it, so PLM sits above its fair share and the CBR flow loses packets.
    let mut s = Scenario::new(session(40, 20_000), 600_000.0, 60.0);
    s.qdisc = Qdisc::Fifo {
        limit_bytes: 15_000,
    };
    s.cross = vec![Cross {
        start: t(10.0),
        stop: t(60.0),
        rate_bps: 300_000.0,
        size: 500,
        greedy: false,
        jitter: 0.2,
    }];
    let mut ctls = vec![plm()];
    let tr = run(&s, &mut ctls);
    let rx = &tr.rx[0];
    let bytes: u64 = rx.bytes_per_sec[20..60].iter().sum();
    let mean = bytes as f64 * 8.0 / 40.0;
    println!(
        "PLM on FIFO with 300k CBR on 600k: PLM mean {mean:.0} bit/s, CBR drops {}",
        tr.cross_drops
    );
    assert!(mean > 300_000.0, "mean {mean}");
    assert!(tr.cross_drops > 0);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 16, ..ProptestConfig::default() })]

    #[test]
    fn invariants_hold_on_random_fq_scripts(
        cap0 in 100_000.0f64..1_500_000.0,
        steps in proptest::collection::vec((1.0f64..25.0, 20_000.0f64..1_500_000.0), 0..3),
        flows in proptest::collection::vec((1.0f64..20.0, 1.0f64..10.0), 0..3),
        permissive: bool,
    ) {
        let mut s = Scenario::new(session(40, 20_000), cap0, 25.0);
        s.qdisc = fq();
        let mut st: Vec<(Time, f64)> = steps.iter().map(|(a, c)| (t(*a), *c)).collect();
        st.sort_by_key(|x| x.0);
        s.capacity_steps = st;
        s.cross = flows.iter().map(|(a, d)| greedy(*a, a + d)).collect();
        let cfg = PlmConfig { permissive, ..PlmConfig::default() };
        let mut ctls: Vec<Box<dyn LayeredController>> = vec![Box::new(Plm::new(cfg))];
        let tr = run(&s, &mut ctls);
        let rx = &tr.rx[0];
        let c = check_cumulative(&rx.actions);
        prop_assert!(c.is_ok(), "{:?}", c);
        // Joins only at add decisions (or the base join), adds at most once per C.
        for (at, a) in &rx.actions {
            if let Action::Join(_) = a {
                prop_assert!(rx.decisions.iter().any(|d| d.at == *at && matches!(d.reason, "pp-add" | "join-base" | "rejoin")));
            }
        }
        let adds: Vec<Time> = rx.decisions.iter().filter(|d| d.reason == "pp-add").map(|d| d.at).collect();
        for w in adds.windows(2) {
            prop_assert!(w[1] - w[0] >= Duration::from_secs(1));
        }
        // After every add decision the level is the largest k with B_k below the estimate.
        for d in rx.decisions.iter().filter(|d| d.reason == "pp-add") {
            let bhat = d.inputs.iter().find(|x| x.0 == "bhat_e").unwrap().1;
            let b = |k: u8| k as f64 * 20_000.0;
            // The comparisons of §3.3 with the controller's relative tolerance (PlmConfig).
            let tol = PlmConfig::default().tolerance;
            let below = |a: f64, e: f64| if permissive { a <= e * (1.0 + tol) } else { a < e * (1.0 - tol) };
            if d.to_layers > d.from_layers {
                prop_assert!(below(b(d.to_layers), bhat));
                prop_assert!(d.to_layers == 40 || !below(b(d.to_layers + 1), bhat));
            }
        }
    }
}
