//! TFMCC component checks from spec §7.1 (U7, U11, U15, U16) and receiver/sender basics.

use congestion::tfmcc::{TfmccConfig, TfmccReceiver, TfmccSender};
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
    assert!((l0 / 2604.17 - 1.0).abs() < 0.02, "seed {l0}");
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
    assert!(rx.have_rtt(), "no report was sent or echoed");
    assert!((rx.rtt() - 0.1).abs() < 1e-3, "rtt {}", rx.rtt());
    let corrected: Vec<f64> = rx.history().intervals().closed().map(|e| e.0).collect();
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
    assert!(
        (s.r_max() - 0.9).abs() < 1e-3,
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
        assert!((d2 - 2.0 * delay).abs() < 1e-6, "{d2} vs {delay}");
        // No data for long: at the deadline the timer moves by the gap beyond R_max (1 s).
        assert!(d2 > 1.0, "seeded draw gives a delay above R_max");
        {
            rx.handle_timeout(fire2);
            let pushed = rx.timer_pending().expect("pushed, not fired");
            let gap = (fire2 - t1).as_secs_f64();
            assert!(((pushed - fire2).as_secs_f64() - (gap - 1.0)).abs() < 1e-6);
            assert_eq!(reports(&mut rx).len(), 0);
        }
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
