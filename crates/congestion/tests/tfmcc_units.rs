//! TFMCC component checks from spec §7.1 (U7, U11, U15, U16) and receiver/sender basics.

use congestion::tfmcc::{TfmccConfig, TfmccReceiver, TfmccSender};
use congestion::tfrc::equation::simplified_loss_interval;
use congestion::wire::tfmcc::{Echo, TfmccDataFields, TfmccReport, RATE_INFINITE};
use congestion::{Action, LayeredController, SessionInfo, Time};
use std::net::Ipv4Addr;

fn hdr(seq: u32, now: Time, round: u16, max_rtt_ms: u32, x_send: u32) -> TfmccDataFields {
    TfmccDataFields {
        seq,
        ts_us: now.as_micros() as u32,
        round,
        slow_start: false,
        supp_from_loss: false,
        max_rtt_us: max_rtt_ms * 1000,
        x_supp: RATE_INFINITE,
        x_send,
        echo: None,
    }
}

fn reports(rx: &mut TfmccReceiver) -> Vec<TfmccReport> {
    let mut v = Vec::new();
    while let Some(a) = rx.poll_action() {
        if let Action::SendFeedback(b) = a {
            v.push(TfmccReport::parse(&b).unwrap());
        }
    }
    v
}

#[test]
fn joins_layer_zero_on_first_announcement_only() {
    let mut rx = TfmccReceiver::new(TfmccConfig::default(), 1);
    assert_eq!(rx.layers(), 0);
    let info = SessionInfo::equal_layers(1, 1_000_000, Ipv4Addr::new(239, 1, 1, 1), 5000);
    rx.handle_announcement(Time::ZERO, &info);
    rx.handle_announcement(Time::from_millis(1000), &info);
    assert_eq!(rx.poll_action(), Some(Action::Join(0)));
    assert_eq!(rx.poll_action(), None);
    assert_eq!(rx.layers(), 1);
    assert_eq!(rx.name(), "tfmcc");
}

/// U7: first-loss seeding with the simplified inverse, computed with the initial RTT
/// (0.5 s -> about 2604 packets at 125 kB/s) and corrected by (R/R_init)^2 once the
/// first real RTT (0.1 s) is measured (-> about 104).
#[test]
fn u7_first_loss_seed_and_correction() {
    let cfg = TfmccConfig::default();
    let mut rx = TfmccReceiver::new(cfg, 7);
    // 125 packets/s of 1000 B = 125 kB/s, R_max 500 ms, for 3 s; packet 300 lost.
    let mut seq = 0u32;
    for _ in 0..375 {
        let t = Time::from_micros(seq as u64 * 8000);
        if seq != 300 {
            rx.handle_data(t, &hdr(seq, t, 0, 500, 125_000), 1000);
        }
        seq += 1;
    }
    assert!(rx.have_loss());
    let seeded: Vec<f64> = rx.history().intervals().closed().map(|e| e.0).collect();
    assert_eq!(seeded.len(), 1);
    let l0 = seeded[0];
    // The sender echoes our report: send one, then echo it 100 ms later.
    let _ = reports(&mut rx);
    // Start round 1: the new timer fires at the latest after T.
    let mut fired = None;
    for _ in 0..2000 {
        let t = Time::from_micros(seq as u64 * 8000);
        let mut h = hdr(seq, t, 1, 500, 125_000);
        if let Some(r) = fired {
            // Echo the report's timestamp as if 100 ms had passed in flight (hold time 0).
            h.echo = Some(Echo {
                rid: 7,
                ts_us: (r as u32).wrapping_add(0),
                is_clr: false,
            });
            let t_echo = Time::from_micros(r + 100_000);
            h.ts_us = t_echo.as_micros() as u32;
            rx.handle_data(t_echo, &h, 1000);
            break;
        }
        rx.handle_timeout(t);
        rx.handle_data(t, &h, 1000);
        if let Some(rep) = reports(&mut rx).first() {
            fired = Some(rep.ts_us as u64);
        }
        seq += 1;
    }
    let corrected: Vec<f64> = rx.history().intervals().closed().map(|e| e.0).collect();
    let direct = simplified_loss_interval(1000.0, 0.1, 125_000.0);
    let direct_init = simplified_loss_interval(1000.0, 0.5, 125_000.0);
    // The seed uses the receive rate measured over the last RTTs (~125 kB/s with one packet
    // missing), so it lands within 2% of the spec's figure; the direct formula is exact.
    let pass = (direct - 104.1667).abs() < 1e-3
        && (direct_init - 2604.1667).abs() < 1e-3
        && (l0 / 2604.17 - 1.0).abs() < 0.02
        && rx.have_rtt()
        && (rx.rtt() - 0.1).abs() < 1e-3
        && corrected
            .first()
            .is_some_and(|&c| (c - l0 * 0.04).abs() < 1e-6 && (c / 104.17 - 1.0).abs() < 0.02);
    testkit::record(
        "tfmcc/U7",
        &format!(
            "l_0(1000 B, 0.1 s, 125 kB/s) = {direct:.4}, with rtt_init 0.5 s {direct_init:.2}; \
             live receiver at 125 kB/s seeded with \
             rtt_init 0.5 s: l_0 = {l0:.1} (spec 2604.2), corrected by (0.1/0.5)^2 to {:.2} \
             (spec 104.17) once it measured rtt = {:.4} s",
            corrected.first().copied().unwrap_or(f64::NAN),
            rx.rtt()
        ),
        Some(pass),
        "cargo test --release -p layercast-congestion --test tfmcc_units u7_first_loss_seed_and_correction",
    );
    assert!((direct - 104.1667).abs() < 1e-3, "{direct}");
    assert!((l0 / 2604.17 - 1.0).abs() < 0.02, "seed {l0}");
    assert!(rx.have_rtt(), "no report was sent or echoed");
    assert!((rx.rtt() - 0.1).abs() < 1e-3, "rtt {}", rx.rtt());
    assert!(
        (corrected[0] - l0 * 0.04).abs() < 1e-6,
        "{corrected:?} vs {l0}"
    );
    assert!((corrected[0] / 104.17 - 1.0).abs() < 0.02);
}

fn rep(
    rid: u32,
    round: u16,
    rate: u32,
    have_rtt: bool,
    have_loss: bool,
    echo_ts: u32,
) -> TfmccReport {
    TfmccReport {
        rid,
        round,
        have_rtt,
        have_loss,
        leave: false,
        is_clr: false,
        ts_us: rid * 1000,
        echo_ts_us: echo_ts,
        x_rate: rate,
        x_recv: rate,
        rtt_us: 100_000,
        p_fixed: 1000,
        auth: Default::default(),
    }
}

/// U11: echo order new CLR > no RTT > non-CLR with RTT > CLR, ties to the lowest rate.
#[test]
fn u11_echo_priority() {
    let mut s = TfmccSender::new(TfmccConfig::default());
    let t0 = Time::from_millis(1000);
    let h = s.data_header(t0);
    let now = Time::from_millis(1100);
    let ts = h.ts_us;
    // D becomes CLR (first report), with loss: slow start ends.
    s.handle_parsed_report(now, &rep(4, 0, 1500, true, true, ts));
    assert_eq!(s.stats().clr, Some(4));
    // Non-CLR reports above the current rate, then C below it (new CLR).
    s.handle_parsed_report(now, &rep(2, 0, 90_000, true, true, ts)); // B: has RTT
    s.handle_parsed_report(now, &rep(11, 0, 80_000, false, true, ts)); // A1: no RTT
    s.handle_parsed_report(now, &rep(12, 0, 70_000, false, true, ts)); // A2: no RTT, lower
    s.handle_parsed_report(now, &rep(3, 0, 1000, true, true, ts)); // C: new CLR
    assert_eq!(s.stats().clr, Some(3));
    let order: Vec<(u32, bool)> = (0..6)
        .map(|i| {
            let e = s
                .data_header(now + std::time::Duration::from_millis(i))
                .echo
                .unwrap();
            (e.rid, e.is_clr)
        })
        .collect();
    let want = vec![
        (3, true),
        (12, false),
        (11, false),
        (4, false),
        (2, false),
        (3, true),
    ];
    testkit::record(
        "tfmcc/U11",
        &format!(
            "echo order {:?} (receiver, as CLR); want new CLR 3 > no-RTT 12 (70 kB/s), 11 \
             (80 kB/s) > with-RTT non-CLR 4 (old CLR), 2 > CLR 3",
            order
        ),
        Some(order == want),
        "cargo test --release -p layercast-congestion --test tfmcc_units u11_echo_priority",
    );
    assert_eq!(
        order,
        vec![
            (3, true),
            (12, false),
            (11, false),
            (4, false),
            (2, false),
            (3, true)
        ]
    );
}

/// The echoed timestamp carries the sender's hold time.
#[test]
fn echo_adds_hold_time() {
    let mut s = TfmccSender::new(TfmccConfig::default());
    let h = s.data_header(Time::from_millis(0));
    s.handle_parsed_report(
        Time::from_millis(200),
        &rep(5, 0, 1000, true, true, h.ts_us),
    );
    let e = s.data_header(Time::from_millis(230)).echo.unwrap();
    assert_eq!(e.rid, 5);
    assert_eq!(e.ts_us, 5000 + 30_000);
}

fn ramp_up(s: &mut TfmccSender, until_ms: u64) -> Time {
    // A loss-free CLR reporting a high receive rate every 100 ms drives slow start.
    let mut t = 0u64;
    while t < until_ms {
        let h = s.data_header(Time::from_millis(t));
        s.handle_parsed_report(
            Time::from_millis(t + 100),
            &rep(1, h.round, 50_000_000, true, false, h.ts_us),
        );
        s.handle_timeout(Time::from_millis(t + 100));
        t += 100;
    }
    Time::from_millis(t)
}

/// U15: a report with a higher sender-side RTT raises R_max at once; a round without one
/// multiplies it by 0.9 (not below the round's peak RTT).
#[test]
fn u15_r_max_dynamics() {
    let mut s = TfmccSender::new(TfmccConfig::default());
    let now = ramp_up(&mut s, 20_000);
    assert!(s.rate_bytes() > 1e6, "{}", s.rate_bytes());
    let r_before = s.r_max();
    // Echo a data timestamp from 900 ms ago.
    let h = s.data_header(now);
    let later = now + std::time::Duration::from_millis(900);
    s.handle_parsed_report(later, &rep(9, h.round, 60_000_000, true, false, h.ts_us));
    let raised = s.r_max();
    assert!(
        (raised - 0.9).abs() < 1e-3,
        "{} (was {r_before})",
        s.r_max()
    );
    // Next round(s): the CLR keeps reporting with a 100 ms RTT; R_max decays by 0.9 per
    // round. Watch consecutive rounds.
    let mut t = later;
    let mut seen = vec![(s.stats().round, s.r_max())];
    while seen.len() < 5 {
        t += std::time::Duration::from_millis(100);
        let h = s.data_header(t);
        s.handle_parsed_report(
            t + std::time::Duration::from_millis(100),
            &rep(1, h.round, 50_000_000, true, false, h.ts_us),
        );
        // A non-CLR report per round ends each round after T.
        s.handle_parsed_report(
            t + std::time::Duration::from_millis(100),
            &rep(2, h.round, 90_000_000, true, false, h.ts_us),
        );
        s.handle_timeout(t + std::time::Duration::from_millis(100));
        if s.stats().round != seen.last().unwrap().0 {
            seen.push((s.stats().round, s.r_max()));
        }
    }
    let ratios: Vec<f64> = seen[1..].windows(2).map(|w| w[1].1 / w[0].1).collect();
    let worst = ratios
        .iter()
        .map(|r| (r - 0.9).abs())
        .fold(0.0f64, f64::max);
    testkit::record(
        "tfmcc/U15",
        &format!(
            "R_max {r_before:.3} s -> {raised:.4} s on the report with rtt_S = 0.9 s (same \
             instant); then per round without a higher report: ratios {} (want 0.9, max \
             error {worst:.1e})",
            ratios
                .iter()
                .map(|r| format!("{r:.6}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        Some((raised - 0.9).abs() < 1e-3 && ratios.len() >= 3 && worst < 1e-9),
        "cargo test --release -p layercast-congestion --test tfmcc_units u15_r_max_dynamics",
    );
    for w in seen[1..].windows(2) {
        assert!((w[1].1 / w[0].1 - 0.9).abs() < 1e-9, "{seen:?}");
    }
}

/// U16: the pending timer is rescaled when R_max changes; a data gap longer than R_max
/// pushes it back by the excess.
#[test]
fn u16_timer_rescale_and_gap() {
    let mut rx = TfmccReceiver::new(TfmccConfig::default(), 3);
    let t0 = Time::from_millis(10_000);
    rx.handle_data(t0, &hdr(0, t0, 5, 500, 1_000_000), 1000);
    let fire = rx.timer_pending().expect("non-CLR arms at round start");
    let delay = (fire - t0).as_secs_f64();
    // Same round, R_max doubles.
    let t1 = t0 + std::time::Duration::from_micros(10);
    rx.handle_data(t1, &hdr(1, t1, 5, 1000, 1_000_000), 1000);
    if let Some(fire2) = rx.timer_pending() {
        let d2 = (fire2 - t0).as_secs_f64();
        // No data for long: at the deadline the timer moves by the gap beyond R_max (1 s).
        rx.handle_timeout(fire2);
        let pushed = rx.timer_pending();
        let gap = (fire2 - t1).as_secs_f64();
        let push = pushed.map_or(f64::NAN, |p| (p - fire2).as_secs_f64());
        let sent = reports(&mut rx).len();
        testkit::record(
            "tfmcc/U16",
            &format!(
                "R_max 0.5 -> 1.0 s mid-round: timer {delay:.4} s -> {d2:.4} s (ratio {:.6}, \
                 want 2); no data for {gap:.4} s at the deadline: pushed back by {push:.4} s \
                 (want gap - R_max = {:.4} s), reports sent {sent}",
                d2 / delay,
                gap - 1.0
            ),
            Some(
                (d2 - 2.0 * delay).abs() < 1e-6
                    && d2 > 1.0
                    && (push - (gap - 1.0)).abs() < 1e-6
                    && sent == 0,
            ),
            "cargo test --release -p layercast-congestion --test tfmcc_units u16_timer_rescale_and_gap",
        );
        assert!((d2 - 2.0 * delay).abs() < 1e-6, "{d2} vs {delay}");
        assert!(d2 > 1.0, "seeded draw gives a delay above R_max");
        assert!(pushed.is_some(), "pushed, not fired");
        assert!((push - (gap - 1.0)).abs() < 1e-6);
        assert_eq!(sent, 0);
    } else {
        // x = 1e-4 draws a zero delay and fired at once; vanishingly rare with this seed.
        panic!("timer fired at once");
    }
}

/// The CLR reports once per RTT without a timer; a receiver echoed with IC for someone else
/// stops being CLR.
#[test]
fn clr_reports_every_rtt_and_loses_the_role() {
    let mut rx = TfmccReceiver::new(TfmccConfig::default(), 8);
    let mut t = Time::ZERO;
    let mut h = hdr(0, t, 0, 200, 100_000);
    h.echo = Some(Echo {
        rid: 8,
        ts_us: 0,
        is_clr: true,
    });
    rx.handle_data(t, &h, 1000);
    let _ = reports(&mut rx);
    assert!(rx.is_clr());
    let mut n = 0;
    for seq in 1..1000u32 {
        t = Time::from_millis(seq as u64);
        let mut h = hdr(seq, t, 0, 200, 100_000);
        h.echo = Some(Echo {
            rid: 8,
            ts_us: (t.as_micros() as u32).wrapping_sub(100_000),
            is_clr: true,
        });
        rx.handle_data(t, &h, 1000);
        n += reports(&mut rx).len();
    }
    // RTT converges on 100 ms: ~10 reports per second.
    assert!((8..=12).contains(&n), "{n}");
    let mut h = hdr(1000, t, 0, 200, 100_000);
    h.echo = Some(Echo {
        rid: 99,
        ts_us: 0,
        is_clr: true,
    });
    rx.handle_data(t, &h, 1000);
    assert!(!rx.is_clr());
}

#[test]
fn malformed_reports_are_counted_not_fatal() {
    let mut s = TfmccSender::new(TfmccConfig::default());
    assert!(s.handle_report(Time::ZERO, b"garbage").is_err());
    assert!(s.handle_report(Time::ZERO, &[]).is_err());
    assert_eq!(s.stats().malformed_reports, 2);
    assert_eq!(s.stats().reports_total, 0);
}

#[test]
fn explicit_leave_sends_flagged_report() {
    let mut rx = TfmccReceiver::new(TfmccConfig::default(), 4);
    let info = SessionInfo::equal_layers(1, 1_000_000, Ipv4Addr::new(239, 1, 1, 1), 5000);
    rx.handle_announcement(Time::ZERO, &info);
    rx.handle_data(Time::ZERO, &hdr(0, Time::ZERO, 0, 500, 2000), 1000);
    let _ = rx.poll_action();
    let _ = reports(&mut rx);
    rx.leave(Time::from_millis(5));
    let mut acts = Vec::new();
    while let Some(a) = rx.poll_action() {
        acts.push(a);
    }
    assert_eq!(acts.len(), 2);
    match &acts[0] {
        Action::SendFeedback(b) => assert!(TfmccReport::parse(b).unwrap().leave),
        a => panic!("{a:?}"),
    }
    assert_eq!(acts[1], Action::Leave(0));
    assert_eq!(rx.layers(), 0);
}

/// Spec §7.4: with the one-way-delay weight 0.05, a 100 ms step in forward delay reaches
/// at least 63% of its size in a non-CLR receiver's RTT within 2 s (here at 25 packets/s;
/// the weight is per packet, so at 10 packets/s it takes the full 2 s).
#[test]
fn one_way_delay_step_reaches_63_percent_within_2_s() {
    let mut rx = TfmccReceiver::new(TfmccConfig::default(), 5);
    // Sender clock = receiver clock + 7 s offset; forward delay 50 ms, reverse 50 ms.
    let offset_us = 7_000_000u64;
    let mut fwd_us = 50_000u64;
    let mut report_ts = None;
    let mut t_us = 1_000_000u64;
    let mut seq = 0u32;
    let send = |rx: &mut TfmccReceiver, t_us: u64, seq: u32, fwd: u64, echo: Option<Echo>| {
        let now = Time::from_micros(t_us);
        let mut h = hdr(seq, now, 0, 500, 25_000);
        h.ts_us = (t_us - fwd + offset_us) as u32;
        h.echo = echo;
        rx.handle_data(now, &h, 1000);
    };
    // Run until a report goes out, then echo it (RTT 100 ms, no hold time).
    while report_ts.is_none() {
        send(&mut rx, t_us, seq, fwd_us, None);
        rx.handle_timeout(Time::from_micros(t_us));
        if let Some(r) = reports(&mut rx).first() {
            report_ts = Some((r.ts_us, t_us));
        }
        t_us += 40_000;
        seq += 1;
    }
    let (rts, sent_at) = report_ts.unwrap();
    // The echo rides on a data packet sent 50 ms after the report left (it took 50 ms to
    // reach the sender), arriving 50 ms later: RTT sample 100 ms.
    let arrive = sent_at + 100_000;
    send(
        &mut rx,
        arrive,
        seq,
        fwd_us,
        Some(Echo {
            rid: 5,
            ts_us: rts.wrapping_add(50_000),
            is_clr: false,
        }),
    );
    seq += 1;
    assert!(rx.have_rtt());
    assert!((rx.rtt() - 0.05).abs() < 1e-3, "{}", rx.rtt());
    // rts + hold(50 ms at the sender): the echo says the report left 50 ms "later", so the
    // sample is 50 ms; what matters here is the reaction to the step, measured from there.
    let base = rx.rtt();
    t_us = arrive + 40_000;
    for _ in 0..5 {
        send(&mut rx, t_us, seq, fwd_us, None);
        t_us += 40_000;
        seq += 1;
    }
    assert!((rx.rtt() - base).abs() < 1e-3, "steady before the step");
    fwd_us += 100_000;
    let step_at = t_us;
    let mut reached = None;
    while t_us < step_at + 3_000_000 {
        send(&mut rx, t_us, seq, fwd_us, None);
        if reached.is_none() && rx.rtt() - base >= 0.063 {
            reached = Some((t_us - step_at) as f64 / 1e6);
        }
        t_us += 40_000;
        seq += 1;
    }
    let reached = reached.expect("never reached 63% of the step");
    eprintln!("63% of a 100 ms forward-delay step after {reached:.2} s");
    assert!(reached <= 2.0, "{reached}");
    assert!(
        (rx.rtt() - base - 0.1).abs() < 0.01,
        "converges to the step"
    );
}

/// U14 (adapted to our 32-bit microsecond timestamps, which wrap every 71.6 minutes): RTT
/// samples stay right across the wrap, on the receiver and on the sender side.
#[test]
fn u14_rtt_across_timestamp_wrap() {
    let wrap_us = 1u64 << 32;
    // Receiver: report just before the wrap, echo arrives just after it.
    let mut rx = TfmccReceiver::new(TfmccConfig::default(), 6);
    let t0 = Time::from_micros(wrap_us - 30_000);
    rx.handle_data(t0, &hdr(0, t0, 0, 500, 50_000), 1000);
    let t1 = Time::from_micros(wrap_us + 70_000);
    let mut h = hdr(1, t1, 0, 500, 50_000);
    h.echo = Some(Echo {
        rid: 6,
        ts_us: t0.as_micros() as u32,
        is_clr: false,
    });
    rx.handle_data(t1, &h, 1000);
    assert!(rx.have_rtt());
    assert!((rx.rtt() - 0.1).abs() < 1e-6, "{}", rx.rtt());
    // Sender: data stamped before the wrap, report after it.
    let mut s = TfmccSender::new(TfmccConfig::default());
    let d = s.data_header(Time::from_micros(wrap_us - 400_000));
    s.handle_parsed_report(
        Time::from_micros(wrap_us + 500_000),
        &rep(2, d.round, 100_000, true, true, d.ts_us),
    );
    // (A high reported rate keeps the R_max floor s/X + t_gran below the sample.)
    assert!((s.r_max() - 0.9).abs() < 1e-6, "{}", s.r_max());
}

/// LAN conditions (live netns test): an RTT of 1 ms, shorter than the 13.5 ms between
/// packets at 592 kbit/s. The receive rate must still see the packets (window of at least
/// four packet gaps), and the loss history must survive ordinary packet gaps (idle reset
/// after 10 x max(RTT, packet gap)). Before both floors the receiver reported ~0 B/s,
/// became CLR and the sender collapsed to its 1-packet-per-64-s floor.
#[test]
fn lan_rtt_below_packet_gap_keeps_rate_and_loss() {
    let cfg = TfmccConfig {
        packet_size: 1000,
        ..Default::default()
    };
    let mut rx = TfmccReceiver::new(cfg, 9);
    let x_send = 74_000u32; // B/s
    let gap_us = 13_500u64;
    let mut now = Time::ZERO;
    for seq in 0..80u32 {
        now = Time::from_micros(1_000_000 + seq as u64 * gap_us);
        if seq == 20 {
            continue; // one loss
        }
        rx.handle_data(now, &hdr(seq, now, 1, 1, x_send), 1000);
    }
    assert!(rx.have_loss(), "loss history reset by ordinary packet gaps");
    let mid = now + std::time::Duration::from_micros(gap_us / 2);
    let x = rx.x_recv(mid);
    assert!(
        x > 0.5 * x_send as f64 && x < 1.5 * x_send as f64,
        "receive rate {x} B/s for a {x_send} B/s stream"
    );
}

#[derive(Debug)]
enum LoopEv {
    Data(TfmccDataFields),
    Report(Vec<u8>),
}

/// One report's effect, seen at the sender: (time since start s, receiver RTT s, sender
/// R_max s, sender rate B/s).
type LoopPoint = (f64, f64, f64, f64);

/// Sender and one receiver in a closed loop from `t0` for `secs`: forward delay 30 ms,
/// reverse delay `rtt_ms(t) - 30` ms (t = seconds since the start), every 100th data packet
/// lost. Returns one point per report the sender handled.
fn closed_loop(t0: Time, secs: f64, rtt_ms: &dyn Fn(f64) -> u64) -> Vec<LoopPoint> {
    use std::cmp::Reverse;
    use std::collections::{BinaryHeap, HashMap};
    use std::time::Duration;
    let cfg = TfmccConfig::default();
    let mut tx = TfmccSender::new(cfg);
    let mut rx = TfmccReceiver::new(cfg, 6);
    let info = SessionInfo::equal_layers(1, 1_000_000, Ipv4Addr::new(239, 1, 1, 1), 5000);
    rx.handle_announcement(t0, &info);
    assert_eq!(rx.poll_action(), Some(Action::Join(0)));
    let fwd = Duration::from_millis(30);
    let mut heap: BinaryHeap<Reverse<(Time, u64)>> = BinaryHeap::new();
    let mut evs: HashMap<u64, LoopEv> = HashMap::new();
    let mut n_ev = 0u64;
    let mut push = |heap: &mut BinaryHeap<Reverse<(Time, u64)>>,
                    evs: &mut HashMap<u64, LoopEv>,
                    at: Time,
                    ev: LoopEv| {
        n_ev += 1;
        heap.push(Reverse((at, n_ev)));
        evs.insert(n_ev, ev);
    };
    let rel = |t: Time| (t - t0).as_secs_f64();
    let end = t0 + Duration::from_secs_f64(secs);
    let mut next_send = t0;
    let mut sent = 0u64;
    // A timer that is still due right after it ran waits 1 us (no spinning at one instant).
    let mut tx_floor = t0;
    let mut rx_floor = t0;
    let mut out = Vec::new();
    loop {
        let t_heap = heap.peek().map(|r| r.0 .0);
        let t_tx = tx.poll_timeout().map(|t| t.max(tx_floor));
        let t_rx = rx
            .poll_timeout()
            .map(|t| t.0)
            .filter(|&t| t != Time::NEVER)
            .map(|t| t.max(rx_floor));
        let now = [Some(next_send), t_heap, t_tx, t_rx]
            .into_iter()
            .flatten()
            .min()
            .unwrap();
        if now >= end {
            break;
        }
        let mut rx_acted = false;
        if now == next_send {
            let h = tx.data_header(now);
            sent += 1;
            if sent % 100 != 50 {
                push(&mut heap, &mut evs, now + fwd, LoopEv::Data(h));
            }
            next_send = now + Duration::from_secs_f64(1000.0 / tx.rate_bytes().max(1e-3));
        } else if t_heap == Some(now) {
            let Reverse((_, id)) = heap.pop().unwrap();
            match evs.remove(&id).unwrap() {
                LoopEv::Data(h) => {
                    rx.handle_data(now, &h, 1000);
                    rx_acted = true;
                }
                LoopEv::Report(b) => {
                    tx.handle_report(now, &b).unwrap();
                    out.push((rel(now), rx.rtt(), tx.r_max(), tx.rate_bytes()));
                }
            }
        } else if t_tx == Some(now) {
            tx.handle_timeout(now);
            tx_floor = now + Duration::from_micros(1);
        } else {
            rx.handle_timeout(now);
            rx_floor = now + Duration::from_micros(1);
            rx_acted = true;
        }
        if rx_acted {
            while let Some(a) = rx.poll_action() {
                if let Action::SendFeedback(b) = a {
                    let back = Duration::from_millis(rtt_ms(rel(now)) - 30);
                    push(&mut heap, &mut evs, now + back, LoopEv::Report(b));
                }
            }
        }
    }
    out
}

/// U14 over 12 minutes of virtual time: our timestamps are 32-bit microseconds (they wrap
/// every 71.6 min, not every 65.5 s as the dissertation's 16-bit milliseconds), so the loop
/// starts 5 minutes before the wrap and runs 12 minutes with a changing path RTT (one change
/// 0.5 s after the wrap). The run across the wrap must equal, report for report, the same
/// run started far from it, and the receiver's RTT and the sender's R_max must follow the
/// path at the end of every phase.
#[test]
fn u14_rtt_across_timestamp_wrap_over_12_minutes() {
    let phases = [
        (0.0, 100u64),
        (150.0, 60),
        (300.5, 140),
        (450.0, 100),
        (600.0, 60),
    ];
    let secs = 720.0;
    let rtt_ms = |t: f64| phases.iter().rev().find(|p| t >= p.0).map_or(100, |p| p.1);
    let wrap_us = 1u64 << 32;
    let far = closed_loop(Time::from_secs_f64(1000.0), secs, &rtt_ms);
    let wrapped = closed_loop(Time::from_micros(wrap_us - 300_000_000), secs, &rtt_ms);
    // Report for report the same (times are relative to each run's start).
    let mut max_diff: f64 = 0.0;
    for (a, b) in far.iter().zip(&wrapped) {
        max_diff = max_diff
            .max((a.0 - b.0).abs())
            .max((a.1 - b.1).abs())
            .max((a.2 - b.2).abs())
            .max((a.3 - b.3).abs() / a.3.max(1.0));
    }
    let same = far.len() == wrapped.len() && max_diff < 1e-6;
    // The reports around the wrap (295-305 s) and the phase ends.
    let near_wrap = wrapped
        .iter()
        .filter(|p| (295.0..305.0).contains(&p.0))
        .count();
    let mut phase_rows = Vec::new();
    let mut phases_ok = true;
    for (i, &(start, rtt)) in phases.iter().enumerate() {
        let stop = phases.get(i + 1).map_or(secs, |p| p.0);
        let rtt = rtt as f64 / 1000.0;
        let last = wrapped.iter().rev().find(|p| p.0 < stop && p.0 > start);
        let Some(&(_, rx_rtt, r_max, _)) = last else {
            phases_ok = false;
            continue;
        };
        let ok = (rx_rtt / rtt - 1.0).abs() < 0.02 && r_max >= 0.99 * rtt && r_max <= 1.15 * rtt;
        phases_ok &= ok;
        phase_rows.push(format!(
            "{start}-{stop} s path {:.0} ms: receiver {:.1} ms, R_max {:.1} ms",
            rtt * 1000.0,
            rx_rtt * 1000.0,
            r_max * 1000.0
        ));
    }
    let pass = same && phases_ok && near_wrap >= 50;
    testkit::record(
        "tfmcc/U14",
        &format!(
            "32-bit us timestamps (wrap every 71.6 min): 12-min closed loop starting 5 min \
             before the wrap, {} reports ({near_wrap} within 5 s of the wrap), identical to \
             the same run far from the wrap (max difference {max_diff:.1e}); {}",
            wrapped.len(),
            phase_rows.join("; ")
        ),
        Some(pass),
        "cargo test --release -p layercast-congestion --test tfmcc_units u14_rtt_across_timestamp_wrap_over_12_minutes",
    );
    eprintln!("{phase_rows:#?} {} {max_diff}", wrapped.len());
    assert_eq!(far.len(), wrapped.len());
    assert!(max_diff < 1e-6, "{max_diff}");
    assert!(near_wrap >= 50, "{near_wrap}");
    assert!(phases_ok, "{phase_rows:#?}");
}

/// S19 (dissertation §7.3.1, §7.6.3): a receiver without an RTT measurement computes its
/// rate with the initial RTT (the `R_max` of its first data packet), not with the current
/// `R_max` after it decayed, and says so in the report (`rtt_us`), so the sender can rescale
/// it. Its loss events are still aggregated over the current `R_max`. Once echoed, it uses
/// the measured RTT.
#[test]
fn unmeasured_receiver_rates_with_the_initial_rtt() {
    use congestion::tfrc::equation::tcp_throughput;
    let mut rx = TfmccReceiver::new(TfmccConfig::default(), 9);
    // First packet: R_max 500 ms; then the sender's R_max decays to 150 ms.
    let mut seq = 0u32;
    let mut last = Vec::new();
    for i in 0..3000u32 {
        let t = Time::from_micros(i as u64 * 10_000);
        let rmax = if i == 0 { 500 } else { 150 };
        // One loss every 50 packets, far apart in time (0.5 s > any RTT here).
        if i % 50 != 25 {
            rx.handle_data(t, &hdr(seq, t, (i / 200) as u16, rmax, 100_000), 1000);
        }
        seq += 1;
        rx.handle_timeout(t);
        last.extend(reports(&mut rx));
    }
    assert!(rx.have_loss() && !rx.have_rtt());
    assert!(
        (rx.rtt() - 0.150).abs() < 1e-9,
        "aggregation RTT {}",
        rx.rtt()
    );
    assert!(
        (rx.rate_rtt() - 0.5).abs() < 1e-9,
        "rate RTT {}",
        rx.rate_rtt()
    );
    let rep = last.last().expect("timer reports were sent");
    assert_eq!(rep.rtt_us, 500_000);
    let p = rx.loss_event_rate();
    let want = tcp_throughput(1000.0, 0.5, p);
    assert!(
        (rep.x_rate as f64 / want - 1.0).abs() < 0.01,
        "reported {} vs X(0.5 s, p = {p}) = {want}",
        rep.x_rate
    );
    // With the decayed R_max the rate would be 3.3 x higher: the gap to measured peers that
    // lets unmeasured receivers win suppression.
    assert!(tcp_throughput(1000.0, 0.15, p) > 3.0 * rep.x_rate as f64);
    // An echo 80 ms after the report: from then on the measured RTT rates the receiver.
    let t = Time::from_micros(3000 * 10_000);
    let mut h = hdr(seq, t, 20, 150, 100_000);
    h.echo = Some(Echo {
        rid: 9,
        ts_us: (t.as_micros() as u32).wrapping_sub(80_000),
        is_clr: false,
    });
    rx.handle_data(t, &h, 1000);
    assert!(rx.have_rtt());
    assert!((rx.rate_rtt() - 0.080).abs() < 1e-6, "{}", rx.rate_rtt());
}

/// Halvings of the sender's rate over `secs` of silence after `last` (no report at all),
/// with data packets paced at the rate and timers served: (time after the silence began,
/// R_max before).
fn halvings_in_silence(s: &mut TfmccSender, from: Time, secs: f64) -> Vec<(f64, f64)> {
    let mut out = Vec::new();
    let mut next_send = from;
    let mut t = from;
    let end = from + std::time::Duration::from_secs_f64(secs);
    while t < end {
        let before = (s.rate_bytes(), s.r_max());
        if t >= next_send {
            let _ = s.data_header(t);
            next_send = t + std::time::Duration::from_secs_f64(1000.0 / s.rate_bytes());
        }
        if s.poll_timeout().is_some_and(|d| d <= t) {
            s.handle_timeout(t);
        }
        if (s.rate_bytes() - before.0 / 2.0).abs() < 1e-6 * before.0 {
            out.push(((t - from).as_secs_f64(), before.1));
        }
        t += std::time::Duration::from_millis(1);
    }
    out
}

/// A low-rate sender (4 kB/s, so `T = 4 x 4 s/X = 4 s` against `10 R_max = 2.6 s`) whose
/// last report came from its CLR halves after 10 R_max of silence (S27/E15: the CLR reports
/// every RTT, silence means the reports are lost; the first cut is the RFC's one-off
/// CLR-silence halving after 4 R_max). If the last report was the CLR's *leave* report, the
/// next report can only come from another receiver's feedback timer: no halving for two
/// feedback rounds (a 10 R_max rule there spiralled the rate to the floor in S17 seed 3), and
/// no CLR-silence halving for a CLR that left.
#[test]
fn no_feedback_period_depends_on_who_reported_last() {
    let run = |leave_last: bool| {
        let mut s = TfmccSender::new(TfmccConfig::default());
        let mut t = 0u64;
        for _ in 0..200 {
            let h = s.data_header(Time::from_millis(t));
            let mut r = rep(1, h.round, 4000, true, true, h.ts_us);
            r.rtt_us = 60_000;
            s.handle_parsed_report(Time::from_millis(t + 60), &r);
            s.handle_timeout(Time::from_millis(t + 60));
            t += 250;
        }
        assert_eq!(s.stats().clr, Some(1));
        assert!((s.rate_bytes() - 4000.0).abs() < 1.0, "{}", s.rate_bytes());
        let h = s.data_header(Time::from_millis(t));
        let mut r = rep(1, h.round, 4000, true, true, h.ts_us);
        r.leave = leave_last;
        let last = Time::from_millis(t + 60);
        s.handle_parsed_report(last, &r);
        let (t_round, r_max) = (s.feedback_round_s(), s.r_max());
        (halvings_in_silence(&mut s, last, 30.0), t_round, r_max)
    };
    let (clr_last, _, _) = run(false);
    assert!(clr_last.len() >= 3, "{clr_last:?}");
    // CLR silence after 4 R_max; the no-feedback halvings 10 R_max after the last report,
    // then every 10 R_max of the R_max in force (+-1 R_max).
    assert!(
        (clr_last[0].0 / clr_last[0].1 - 4.0).abs() < 0.1,
        "{clr_last:?}"
    );
    assert!(
        (clr_last[1].0 / clr_last[1].1 - 10.0).abs() < 0.1,
        "{clr_last:?}"
    );
    for w in clr_last[1..].windows(2).take(3) {
        let gap = (w[1].0 - w[0].0) / w[1].1;
        assert!((gap - 10.0).abs() <= 1.0, "gap {gap} R_max: {clr_last:?}");
    }
    let (leave_last, t_round, r_max) = run(true);
    assert!(
        2.0 * t_round > 10.0 * r_max + 1.0,
        "T {t_round}, R_max {r_max}"
    );
    assert!(
        leave_last
            .first()
            .is_some_and(|h| h.0 >= 2.0 * t_round - 0.01),
        "halved before two rounds ({t_round} s) after the leave: {leave_last:?}"
    );
}

/// Outside slow start X climbs towards the CLR's higher rate continuously in time at 16/17 of
/// one packet per R_max per R_max (docs/protocols/tfmcc.md, choice 6), whenever it is brought
/// up to date (`advance_to`, any input), and not at all later than one R_max after the CLR's
/// last report.
#[test]
fn increase_is_accrued_in_time_at_16_17_of_the_cap() {
    let mut s = TfmccSender::new(TfmccConfig::default());
    let mut t = 0u64;
    // A CLR at 20 kB/s, 100 ms RTT, for 20 s (ends slow start, R_max settles).
    for _ in 0..200 {
        let h = s.data_header(Time::from_millis(t));
        s.handle_parsed_report(
            Time::from_millis(t + 100),
            &rep(1, h.round, 20_000, true, true, h.ts_us),
        );
        t += 100;
    }
    let h = s.data_header(Time::from_millis(t));
    let at = Time::from_millis(t + 100);
    s.handle_parsed_report(at, &rep(1, h.round, 200_000, true, true, h.ts_us));
    let (x0, r) = (s.rate_bytes(), s.r_max());
    assert!((x0 - 20_000.0).abs() < 1e-6, "no jump at the report: {x0}");
    let slope = 16.0 / 17.0 * 1000.0 / (r * r);
    let dt = r / 3.0;
    s.advance_to(at + std::time::Duration::from_secs_f64(dt));
    assert!(
        (s.rate_bytes() - (x0 + slope * dt)).abs() < 1e-6 * x0,
        "{} vs {}",
        s.rate_bytes(),
        x0 + slope * dt
    );
    // No report for 3 R_max: the climb stops one R_max after the CLR's last report.
    s.advance_to(at + std::time::Duration::from_secs_f64(3.0 * r));
    assert!(
        (s.rate_bytes() - (x0 + slope * r)).abs() < 1e-6 * x0,
        "{} vs {}",
        s.rate_bytes(),
        x0 + slope * r
    );
}
