use super::layers::kth_lowest;
use super::*;
use std::net::Ipv4Addr;

fn cum20() -> Vec<f64> {
    cumulative(&SessionInfo::equal_layers(
        100,
        20_000,
        Ipv4Addr::new(239, 0, 0, 1),
        5000,
    ))
}

#[test]
fn choose_layer_ac0() {
    let c = cum20();
    // Counts are index + 1: index 18 → 19 layers, index 9 → 10 layers.
    assert_eq!(choose_layers(&c, 19, 200_000.0, 0.001, false), 10);
    // Documented tolerance rule: index 6 with 399999.99999999895 → index 19 (20 layers).
    assert_eq!(
        choose_layers(&c, 7, 399_999.999_999_998_95, 0.001, false),
        20
    );
    // Without a tolerance the literal strict climb gives index 18.
    let strict = choose_layers(&c, 7, 399_999.999_999_998_95 - 1e-9, 0.0, false);
    assert_eq!(strict, 19);
    // Top bound and floor.
    assert_eq!(choose_layers(&c, 50, 1e12, 0.001, false), 100);
    assert_eq!(choose_layers(&c, 50, 1.0, 0.001, false), 1);
    assert_eq!(choose_layers(&c, 50, 1.0, 0.001, true), 0);
    assert_eq!(choose_layers(&c, 5, 100_000.0, 0.001, false), 5);
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
fn no_exit_when_no_loss_and_too_few_pairs_ac0() {
    // l = 0 and R_pp = −1 must hold the level even with exit enabled (E1).
    let info = SessionInfo::equal_layers(10, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    let mut e = Era::new(EraConfig {
        exit_below_base: true,
        pp_carry_rais: 1,
        ..EraConfig::default()
    });
    e.handle_announcement(Time::ZERO, &info);
    assert_eq!(e.poll_action(), Some(Action::Join(0)));
    // Singles (bunch of 1): packets, no loss, no pairs.
    for s in 0..5u64 {
        e.handle_packet(
            Time::from_millis(100 + 100 * s),
            &pkt(0, s, 0, 1, Time::from_millis(100 + 100 * s)),
        );
    }
    let (due, why) = e.poll_timeout().unwrap();
    assert_eq!((due, why), (Time::from_millis(1000), TimerReason::Adapt));
    e.handle_timeout(due);
    assert_eq!(e.poll_action(), None);
    assert_eq!(e.layers(), 1);
    let d: Vec<Decision> = std::iter::from_fn(|| e.poll_decision()).collect();
    let last = d.last().unwrap();
    assert_eq!(last.reason, "rai-hold");
    assert!(last.inputs.contains(&("r_pp", -1.0)) && last.inputs.contains(&("plr", 0.0)));
}

/// Two pairs per RAI on the base layer of a 10 x 20 kbit/s session, each reading
/// 100 kbit/s, for two RAIs; returns the next sequence number and the last packet's time.
fn climb_on_base_pairs(e: &mut Era) -> (u64, Time) {
    let info = SessionInfo::equal_layers(10, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    e.handle_announcement(Time::ZERO, &info);
    let (mut seq, mut last) = (0, Time::ZERO);
    for rai in 0..2u64 {
        for p in 0..2u64 {
            let t0 = Time::from_millis(1000 * rai + 200 + 400 * p);
            // 8·512/gap = 100 kbit/s ⇒ gap 40.96 ms.
            e.handle_packet(t0, &pkt(0, seq, 0, 2, t0));
            let t1 = t0 + Duration::from_micros(40_960);
            e.handle_packet(t1, &pkt(0, seq + 1, 1, 2, t1));
            seq += 2;
            last = t1;
        }
        e.handle_timeout(Time::from_millis(1000 * (rai + 1)));
    }
    (seq, last)
}

#[test]
fn carried_pairs_let_the_base_layer_climb() {
    // 2 pairs per RAI on the base layer: first RAI holds, the second decides on 4.
    let mut e = Era::default();
    climb_on_base_pairs(&mut e);
    assert_eq!(e.layers(), 5);
    let d: Vec<Decision> = std::iter::from_fn(|| e.poll_decision()).collect();
    assert_eq!(
        d.iter().map(|d| d.reason).collect::<Vec<_>>(),
        ["join-base", "rai-hold", "rai"]
    );
}

/// Reliability review F6: a replayed pair (both packets again, 200 ms apart) reads 20
/// kbit/s and step 1 would cut to the base layer at once. Duplicates must not reach the
/// bunch sampler.
#[test]
fn a_replayed_pair_is_no_sample() {
    let mut e = Era::default();
    let (seq, last) = climb_on_base_pairs(&mut e);
    assert_eq!(e.layers(), 5);
    let t = last.max(Time::from_millis(2000)) + Duration::from_millis(10);
    e.handle_packet(t, &pkt(0, seq - 2, 0, 2, t));
    let t1 = t + Duration::from_millis(200);
    e.handle_packet(t1, &pkt(0, seq - 1, 1, 2, t1));
    assert_eq!(e.layers(), 5, "a replayed pair cut the level");
}

#[test]
fn sam_rephases_and_stale_sams_are_ignored() {
    let mut info = SessionInfo::equal_layers(10, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    info.announce_seq = 5;
    let mut e = Era::default();
    e.handle_announcement(Time::from_millis(100), &info);
    assert_eq!(e.poll_timeout().unwrap().0, Time::from_millis(1100));
    // A SAM 30 ms before the deadline runs the RAI now and re-phases.
    info.announce_seq = 6;
    e.handle_announcement(Time::from_millis(1070), &info);
    assert_eq!(e.poll_timeout().unwrap().0, Time::from_millis(2070));
    // A stale one does nothing.
    info.announce_seq = 4;
    e.handle_announcement(Time::from_millis(1500), &info);
    assert_eq!(e.poll_timeout().unwrap().0, Time::from_millis(2070));
    // Spurious early timeout is harmless.
    e.handle_timeout(Time::from_millis(1600));
    assert_eq!(e.poll_timeout().unwrap().0, Time::from_millis(2070));
}

/// An ERA that has taken the announcement of 10 layers of 100 kbit/s at t = 0 (the
/// session the E13-E16 tests below run), with that announcement.
fn ten_layers(cfg: EraConfig) -> (Era, SessionInfo) {
    let info = SessionInfo::equal_layers(10, 100_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
    let mut e = Era::new(cfg);
    e.handle_announcement(Time::ZERO, &info);
    (e, info)
}

/// Steady state at 5 of 10 layers (100 kbit/s each) behind 560 kbit/s: 30 pairs per RAI
/// on the held layers; `rate(rai, i)` gives the rate pair `i` of RAI `rai` (1..=3) shows.
/// Returns the layers held after each of the 3 RAIs.
fn steady(cfg: EraConfig, rate: impl Fn(u64, usize) -> f64) -> Vec<u8> {
    let (mut e, _) = ten_layers(cfg);
    let gap = |rate: f64| Duration::from_secs_f64(8.0 * 512.0 / rate);
    let mut seq = [0u64; 10];
    let mut feed = |e: &mut Era, t0: Time, layer: u8, rate: f64| {
        let s = &mut seq[layer as usize];
        e.handle_packet(t0, &pkt(layer, *s, 0, 2, t0));
        let t1 = t0 + gap(rate);
        e.handle_packet(t1, &pkt(layer, *s + 1, 1, 2, t1));
        *s += 2;
    };
    // Climb to 5 with one RAI of 560-kbit/s pairs on the base layer.
    for p in 0..4u64 {
        feed(&mut e, Time::from_millis(100 + 200 * p), 0, 560_000.0);
    }
    e.handle_timeout(Time::from_millis(1000));
    assert_eq!(e.layers(), 5, "the climb to the bottleneck's level");
    let mut held = Vec::new();
    for rai in 1..4u64 {
        for i in 0..30usize {
            let t0 = Time::from_millis(1000 * rai + 10 + 30 * i as u64);
            let layer = (i % usize::from(e.layers().max(1))) as u8;
            feed(&mut e, t0, layer, rate(rai, i));
        }
        e.handle_timeout(Time::from_millis(1000 * (rai + 1)));
        held.push(e.layers());
    }
    held
}

/// Pairs at the bottleneck's 560 kbit/s, except `stretched` ones of RAI 2 at 434 kbit/s (a
/// late timer upstream of the bottleneck).
fn stretched(which: &'static [usize]) -> impl Fn(u64, usize) -> f64 {
    move |rai, i| {
        if rai == 2 && which.contains(&i) {
            434_000.0
        } else {
            560_000.0
        }
    }
}

#[test]
fn one_stretched_pair_cuts_the_thesis_era_but_not_the_live_one() {
    // The thesis: one slow pair is a step-1 drop (and the RAI's minimum holds it).
    assert_eq!(steady(EraConfig::default(), stretched(&[7])), [5, 4, 5]);
    // Live (E13): one lone slow pair is ignored by both steps.
    assert_eq!(steady(EraConfig::live(), stretched(&[7])), [5, 5, 5]);
    // Two slow pairs within three samples: E13 alone takes them as a real change and
    // cuts; the live ERA (E16) sees them end 90 ms later, shorter than its 0.2-s stall
    // horizon, and holds.
    let e13_only = EraConfig {
        pp_stall_horizon: 0.0,
        ..EraConfig::live()
    };
    assert_eq!(steady(e13_only, stretched(&[7, 8])), [5, 4, 5]);
    assert_eq!(steady(EraConfig::live(), stretched(&[7, 8])), [5, 5, 5]);
    // A real capacity drop (every pair at 300 kbit/s from RAI 2 on) is followed at once.
    let drop = |rai: u64, _i: usize| if rai >= 2 { 300_000.0 } else { 560_000.0 };
    assert_eq!(steady(EraConfig::live(), drop), [5, 3, 3]);
    assert_eq!(steady(EraConfig::default(), drop), [5, 3, 3]);
}

/// `rais` RAIs of 30 pairs, 30 ms apart, round the held layers of a [`ten_layers`] ERA;
/// `pair(rai, i)` gives the rate pair `i` shows and how many sequence numbers of its layer go
/// missing just before it. Returns the layers held after each RAI.
fn pairs_per_rai(cfg: EraConfig, rais: u64, pair: impl Fn(u64, usize) -> (f64, u64)) -> Vec<u8> {
    let (mut e, _) = ten_layers(cfg);
    let mut seq = [0u64; 10];
    let mut held = Vec::new();
    for rai in 0..rais {
        for i in 0..30usize {
            let t0 = Time::from_millis(1000 * rai + 10 + 30 * i as u64);
            let layer = (i % usize::from(e.layers().max(1))) as u8;
            let (rate, lost) = pair(rai, i);
            let s = &mut seq[layer as usize];
            *s += lost;
            e.handle_packet(t0, &pkt(layer, *s, 0, 2, t0));
            let t1 = t0 + Duration::from_secs_f64(8.0 * 512.0 / rate);
            e.handle_packet(t1, &pkt(layer, *s + 1, 1, 2, t1));
            *s += 2;
        }
        e.handle_timeout(Time::from_millis(1000 * (rai + 1)));
        held.push(e.layers());
    }
    held
}

/// As [`steady`], but one packet of layer 0 is lost just before RAI 2's pairs (a
/// sequence gap), so RAI 2's samples come with a loss.
fn steady_with_loss(cfg: EraConfig, rate: impl Fn(u64, usize) -> f64) -> Vec<u8> {
    pairs_per_rai(cfg, 4, |rai, i| {
        let r = if rai == 0 { 560_000.0 } else { rate(rai, i) };
        (r, u64::from(rai == 2 && i == 0))
    })
}

#[test]
fn e15_a_loss_confirms_a_lone_low_sample() {
    // Without loss the live ERA ignores one low pair (E13) ...
    assert_eq!(steady(EraConfig::live(), stretched(&[7])), [5, 5, 5]);
    // ... with a loss in the same RAI it is congestion: cut at once, as the thesis does.
    let live = steady_with_loss(EraConfig::live(), stretched(&[7]));
    assert_eq!(live[..2], [5, 5], "live: {live:?}");
    assert!(live[2] <= 4, "live: {live:?}");
    let no_e15 = EraConfig {
        loss_confirms_samples: false,
        ..EraConfig::live()
    };
    let held = steady_with_loss(no_e15, stretched(&[7]));
    assert_eq!(held[2], 5, "E13 alone ignores it: {held:?}");
}

#[test]
fn live_era_does_not_overshoot_behind_a_token_bucket() {
    // Behind a shaper with a bucket most pairs cross at the burst rate; only a few show
    // the shaped 560 kbit/s, here one per RAI. A plain 2nd-lowest R_pp would climb to 10.
    let tbf = |_rai: u64, i: usize| if i == 4 { 560_000.0 } else { 1_390_000.0 };
    assert_eq!(steady(EraConfig::live(), tbf), [5, 5, 5]);
    assert_eq!(steady(EraConfig::default(), tbf), [5, 5, 5]);
}

/// 10 layers of 100 kbit/s behind a 560 kbit/s bottleneck (5 layers), 100 pairs per RAI
/// 10 ms apart (dense, as at video rates), pair `i` of RAI `rai` at `rate(rai, i)`; RAI 0
/// climbs on base-layer pairs. `lose_in` loses one packet of layer 0 at the start of that
/// RAI. Returns the layers held after each RAI 1..=3 and the times of step-1 drops (s).
fn dense(
    cfg: EraConfig,
    lose_in: Option<u64>,
    rate: impl Fn(u64, usize) -> f64,
) -> (Vec<u8>, Vec<f64>) {
    let (mut e, info) = ten_layers(cfg);
    let gap = |rate: f64| Duration::from_secs_f64(8.0 * 512.0 / rate);
    let mut seq = [0u64; 10];
    let mut drops = Vec::new();
    let feed = |e: &mut Era, seq: &mut [u64; 10], t0: Time, layer: u8, rate: f64| {
        let s = &mut seq[layer as usize];
        e.handle_packet(t0, &pkt(layer, *s, 0, 2, t0));
        let t1 = t0 + gap(rate);
        e.handle_packet(t1, &pkt(layer, *s + 1, 1, 2, t1));
        *s += 2;
    };
    for p in 0..4u64 {
        feed(
            &mut e,
            &mut seq,
            Time::from_millis(100 + 200 * p),
            0,
            560_000.0,
        );
    }
    e.handle_timeout(Time::from_millis(1000));
    assert_eq!(e.layers(), 5, "the climb to the bottleneck's level");
    let mut held = Vec::new();
    for rai in 1..4u64 {
        for i in 0..100usize {
            if lose_in == Some(rai) && i == 0 {
                seq[0] += 1; // one packet of layer 0 never arrives
            }
            let t0 = Time::from_millis(1000 * rai + 5 + 10 * i as u64);
            let layer = (i % usize::from(e.layers().max(1))) as u8;
            feed(&mut e, &mut seq, t0, layer, rate(rai, i));
        }
        e.handle_timeout(Time::from_millis(1000 * (rai + 1)));
        held.push(e.layers());
    }
    let mut log = Vec::new();
    while let Some(d) = e.poll_decision() {
        if d.reason == "pp-drop" {
            drops.push(d.at.as_secs_f64());
        }
        log.push(d);
    }
    // Every decision, E16's set-aside RAIs included, passes the AC-15 check.
    if let Err(v) = check_decision_log(&log, &info, 3) {
        panic!("decision log: {v}");
    }
    (held, drops)
}

/// Pairs at 560 kbit/s except pairs `from..to` of RAI 2 at `low`.
fn episode(from: usize, to: usize, low: f64) -> impl Fn(u64, usize) -> f64 {
    move |rai, i| {
        if rai == 2 && (from..to).contains(&i) {
            low
        } else {
            560_000.0
        }
    }
}

#[test]
fn e16_a_stall_episode_is_set_aside() {
    // 11 consecutive pairs (120 ms from the last normal one to the next) stretched to
    // 280 kbit/s, as a vCPU stall makes them: the thesis and E13 alone cut, the live ERA
    // holds, and its decision log counts the samples it set aside.
    let stall = || episode(40, 51, 280_000.0);
    assert_eq!(dense(EraConfig::default(), None, stall()).0, [5, 2, 5]);
    let e13_only = EraConfig {
        pp_stall_horizon: 0.0,
        ..EraConfig::live()
    };
    assert!(dense(e13_only, None, stall()).0[1] < 5);
    let (held, drops) = dense(EraConfig::live(), None, stall());
    assert_eq!(held, [5, 5, 5]);
    assert!(drops.is_empty(), "{drops:?}");
    assert_eq!(
        ten_layers(EraConfig::live()).0.config().pp_stall_horizon,
        0.2
    );
}

#[test]
fn e16_a_lasting_drop_is_followed_after_the_horizon() {
    // From pair 40 of RAI 2 on (t = 2.405 s) every pair shows 300 kbit/s: a real drop.
    // The live ERA cuts to 3 layers once the episode has lasted 0.2 s, within the RAI.
    let drop = |rai: u64, i: usize| {
        if rai > 2 || (rai == 2 && i >= 40) {
            300_000.0
        } else {
            560_000.0
        }
    };
    let (held, drops) = dense(EraConfig::live(), None, drop);
    assert_eq!(held, [5, 3, 3]);
    assert_eq!(drops.len(), 1, "{drops:?}");
    let t = drops[0];
    // The first low pair ended at 2.419 s; believed 0.2 s later.
    assert!((2.59..2.65).contains(&t), "step-1 drop at {t}");
    // An episode longer than the horizon (30 pairs, 0.3 s) is believed even though the
    // samples come back afterwards.
    let (held, drops) = dense(EraConfig::live(), None, episode(40, 70, 300_000.0));
    assert_eq!(held[1], 3, "{held:?}");
    assert_eq!(drops.len(), 1, "{drops:?}");
}

#[test]
fn e16_a_loss_confirms_a_short_episode() {
    // E15 before E16: with a loss in the RAI the short episode is congestion, cut at once.
    let (held, drops) = dense(EraConfig::live(), Some(2), episode(40, 51, 280_000.0));
    assert!(held[1] <= 3, "{held:?}");
    assert!(!drops.is_empty() && drops[0] < 2.43, "{drops:?}");
}

#[test]
fn e16_does_not_overshoot_behind_a_token_bucket() {
    // Behind a shaper most pairs cross at the burst rate; the shaped rate shows in a few
    // isolated pairs. Their episodes are short, but they are at the reference (the lowest
    // R_pp of the last 3 RAIs), so they are not low. An RAI with no shaped pair at all
    // (RAI 2) climbs, as the thesis' minimum does, but does not raise the reference: the
    // next RAI's shaped pairs bring the level back. (With the previous R_pp alone as the
    // reference they would look like stalls, and the level would stay at 10.)
    let tbf = |rai: u64, i: usize| {
        if rai != 2 && i % 37 == 4 {
            560_000.0
        } else {
            1_390_000.0
        }
    };
    assert_eq!(dense(EraConfig::live(), None, tbf).0, [5, 10, 5]);
    assert_eq!(dense(EraConfig::default(), None, tbf).0, [5, 10, 5]);
}

/// 10 layers of 100 kbit/s; pairs on the held layers, 30 per RAI, pair `i` of RAI `rai`
/// at `rate(rai, i)`; RAI 0 has only base-layer pairs. Layers held after each RAI.
fn held_over(cfg: EraConfig, rais: u64, rate: impl Fn(u64, usize) -> f64) -> Vec<u8> {
    let (mut e, _) = ten_layers(cfg);
    let mut seq = [0u64; 10];
    let mut held = Vec::new();
    for rai in 0..rais {
        for i in 0..30usize {
            let t0 = Time::from_millis(1000 * rai + 10 + 30 * i as u64);
            let layer = (i % usize::from(e.layers().max(1))) as u8;
            let s = &mut seq[layer as usize];
            e.handle_packet(t0, &pkt(layer, *s, 0, 2, t0));
            let t1 = t0 + Duration::from_secs_f64(8.0 * 512.0 / rate(rai, i));
            e.handle_packet(t1, &pkt(layer, *s + 1, 1, 2, t1));
            *s += 2;
        }
        e.handle_timeout(Time::from_millis(1000 * (rai + 1)));
        held.push(e.layers());
    }
    held
}

/// ±0.6% of timing noise, deterministic: the samples of a real receiver around `c`.
fn noisy(c: f64) -> impl Fn(u64, usize) -> f64 {
    move |rai, i| c * (1.0 + 0.006 * (((rai as usize * 7 + i * 13) % 11) as f64 / 5.0 - 1.0))
}

#[test]
fn e14_timing_noise_does_not_cost_the_layer_that_fills_the_link() {
    // The link is exactly 5 layers (500 kbit/s). The thesis' minimum of noisy samples is
    // ~0.6% low: the 5th layer never fits.
    let thesis = held_over(EraConfig::default(), 6, noisy(500_000.0));
    assert!(thesis[1..].iter().all(|&l| l == 4), "thesis: {thesis:?}");
    // Live (E14: samples taken 1% higher): the level that fills the link, held.
    let live = held_over(EraConfig::live(), 6, noisy(500_000.0));
    assert_eq!(&live[1..], &[5, 5, 5, 5, 5], "live: {live:?}");
    // No overshoot: a link 1.5% below the boundary (492.5 kbit/s) stays at 4 layers,
    // and one at 2% above it (510 kbit/s) at 5, never 6.
    let below = held_over(EraConfig::live(), 6, noisy(492_500.0));
    assert!(below[1..].iter().all(|&l| l == 4), "below: {below:?}");
    let above = held_over(EraConfig::live(), 6, noisy(510_000.0));
    assert!(above[1..].iter().all(|&l| l == 5), "above: {above:?}");
}

#[test]
fn kth_lowest_clamps() {
    let v = [5.0, 1.0, 3.0, 2.0];
    assert_eq!(kth_lowest(&v, 0), 1.0);
    assert_eq!(kth_lowest(&v, 1), 1.0);
    assert_eq!(kth_lowest(&v, 2), 2.0);
    assert_eq!(kth_lowest(&v, 9), 5.0);
}

proptest::proptest! {
    #[test]
    fn choose_layers_postcondition(rates in proptest::collection::vec(1_000u64..500_000, 1..40),
                                   held in 1usize..40, target in 0.0f64..5e6) {
        let mut info = SessionInfo::equal_layers(rates.len(), 1, Ipv4Addr::new(239, 0, 0, 1), 5000);
        for (l, r) in info.layers.iter_mut().zip(&rates) { l.rate_bps = *r; }
        let c = cumulative(&info);
        let k = choose_layers(&c, held, target, 0.001, false);
        proptest::prop_assert!(k >= 1 && k <= c.len());
        let tol = |j: usize| 0.001 * rates[j] as f64;
        if k > 1 { proptest::prop_assert!(c[k - 1] <= target + tol(k - 1)); }
        if k < c.len() { proptest::prop_assert!(c[k] > target + tol(k)); }
    }
}

/// E17: pairs that read 1 Mbit/s (all 10 layers of 100 kbit/s) for 20 RAIs, two thirds of RAI 1's
/// pairs lost. Returns the layers held after each RAI.
fn climb_after_a_lossy_rai(cfg: EraConfig) -> Vec<u8> {
    pairs_per_rai(cfg, 20, |rai, i| {
        (1_000_000.0, if rai == 1 && i % 3 != 0 { 2 } else { 0 })
    })
}

/// E17: a clean start climbs to the target in one step in both; after a lossy RAI the
/// thesis' ERA jumps back to every layer in one step once the loss has left its window,
/// the live one at most doubles its layers (equal layers: its rate) per RAI.
#[test]
fn e17_the_climb_after_loss_at_most_doubles_per_rai() {
    let thesis = climb_after_a_lossy_rai(EraConfig::default());
    let live = climb_after_a_lossy_rai(EraConfig::live());
    eprintln!("thesis {thesis:?}\nlive   {live:?}");
    for h in [&thesis, &live] {
        assert_eq!(h[0], 10, "one step at a clean start: {h:?}");
        assert!(h[1] < 10, "the loss cut: {h:?}");
        assert_eq!(*h.last().unwrap(), 10, "back at every layer: {h:?}");
    }
    let doubling = |h: &[u8]| h[1..].windows(2).all(|w| w[1] <= (2 * w[0]).max(w[0] + 1));
    assert!(!doubling(&thesis), "the thesis jumps: {thesis:?}");
    assert!(doubling(&live), "live climbs at most x2 per RAI: {live:?}");
}
