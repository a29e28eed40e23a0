//! Property tests: wire round trips, arbitrary bytes never panic, and the sender's rate never
//! rises faster than one packet per R_max per R_max once slow start is over.

use congestion::tfmcc::{TfmccConfig, TfmccReceiver, TfmccSender};
use congestion::wire::tfmcc::{
    find_extension_element, Echo, TfmccDataFields, TfmccReport, RATE_INFINITE,
};
use congestion::wire::tfrc::{AuthBlock, TfrcDataFields, TfrcFeedback};
use congestion::{LayeredController, PacketArrival, Time};
use proptest::prelude::*;

fn arb_data() -> impl Strategy<Value = TfmccDataFields> {
    (
        any::<(u32, u32, u16, bool, bool, u32, u32, u32)>(),
        proptest::option::of(any::<(u32, u32, bool)>()),
    )
        .prop_map(
            |((seq, ts, round, ss, sfl, mr, xs, xsend), e)| TfmccDataFields {
                seq,
                ts_us: ts,
                round,
                slow_start: ss,
                supp_from_loss: sfl,
                max_rtt_us: mr,
                x_supp: xs,
                x_send: xsend,
                echo: e.map(|(rid, ts_us, is_clr)| Echo { rid, ts_us, is_clr }),
            },
        )
}

fn arb_report() -> impl Strategy<Value = TfmccReport> {
    (
        any::<(u32, u16, bool, bool, bool, bool)>(),
        any::<(u32, u32, u32, u32, u32, u32)>(),
        any::<u8>(),
        proptest::collection::vec(any::<u8>(), 0..40),
    )
        .prop_map(
            |((rid, round, hr, hl, lv, ic), (ts, ets, xr, xv, rtt, p), kind, tag)| TfmccReport {
                rid,
                round,
                have_rtt: hr,
                have_loss: hl,
                leave: lv,
                is_clr: ic,
                ts_us: ts,
                echo_ts_us: ets,
                x_rate: xr,
                x_recv: xv,
                rtt_us: rtt,
                p_fixed: p,
                auth: AuthBlock { kind, tag },
            },
        )
}

proptest! {
    #[test]
    fn data_fields_round_trip(f in arb_data()) {
        prop_assert_eq!(TfmccDataFields::parse(&f.to_bytes()).unwrap(), f);
        prop_assert_eq!(TfmccDataFields::from_extension_block(&f.to_extension_block()).unwrap(), Some(f));
    }

    #[test]
    fn report_round_trip(r in arb_report()) {
        prop_assert_eq!(TfmccReport::parse(&r.to_bytes()).unwrap(), r);
    }

    #[test]
    fn tfrc_round_trip(a in any::<(u32, u32, u32)>(), b in any::<(u32, u32, u32, u32)>()) {
        let d = TfrcDataFields { seq: a.0, ts_us: a.1, rtt_us: a.2 };
        prop_assert_eq!(TfrcDataFields::parse(&d.to_bytes()).unwrap(), d);
        let f = TfrcFeedback { ts_echo_us: b.0, t_delay_us: b.1, x_recv_bps: b.2, p_fixed: b.3, auth: AuthBlock::default() };
        prop_assert_eq!(TfrcFeedback::parse(&f.to_bytes()).unwrap(), f);
    }

    /// Arbitrary bytes: every parser returns (Ok or Err) without panicking, and the sender
    /// and receiver survive them.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
        let _ = TfmccDataFields::parse(&bytes);
        let _ = TfmccReport::parse(&bytes);
        let _ = TfrcDataFields::parse(&bytes);
        let _ = TfrcFeedback::parse(&bytes);
        let _ = find_extension_element(&bytes, 2);
        let mut s = TfmccSender::new(TfmccConfig::default());
        let _ = s.handle_report(Time::from_millis(5), &bytes);
        let mut rx = TfmccReceiver::new(TfmccConfig::default(), 1);
        let pkt = PacketArrival { layer: 0, seq: 1, bunch_pos: 0, bunch_len: 1, size: 1000,
            send_time_us: 0, recv_time: Time::ZERO };
        let _ = rx.handle_packet_with_extension(Time::ZERO, &pkt, &bytes);
    }

    /// Random but well-formed fields (any values at all) never panic the receiver.
    #[test]
    fn receiver_survives_any_fields(fs in proptest::collection::vec((arb_data(), 0u64..2_000_000), 1..60)) {
        let mut rx = TfmccReceiver::new(TfmccConfig::default(), 1);
        let mut t = 0u64;
        for (f, dt) in fs {
            t += dt;
            rx.handle_data(Time::from_micros(t), &f, 1000);
            rx.handle_timeout(Time::from_micros(t));
            while rx.poll_action().is_some() {}
            let st = rx.stats();
            prop_assert!(st.loss_ratio >= 0.0 && st.loss_ratio <= 1.0);
        }
    }

    /// After slow start, between any two observations the rate rises by at most
    /// s * dt / R_max^2 (one packet per R_max per R_max), whatever the reports say.
    #[test]
    fn increase_never_exceeds_one_packet_per_rmax_per_rmax(
        reps in proptest::collection::vec(
            (1u64..400, 0u32..6, 500u32..2_000_000, any::<bool>(), any::<bool>(), 1u64..300, any::<bool>()),
            5..120)
    ) {
        let mut s = TfmccSender::new(TfmccConfig::default());
        let mut t = 1_000u64;
        let h = s.data_header(Time::from_millis(t));
        // End slow start with a loss report.
        s.handle_parsed_report(Time::from_millis(t + 100), &TfmccReport {
            rid: 0, round: h.round, have_rtt: true, have_loss: true, leave: false, is_clr: false,
            ts_us: 0, echo_ts_us: h.ts_us, x_rate: 5_000, x_recv: 5_000, rtt_us: 100_000,
            p_fixed: 1_000_000, auth: AuthBlock::default(),
        });
        t += 100;
        // Observations (t ms, rate, R_max); every stretch is checked against the bound.
        let mut obs = vec![(t, s.rate_bytes(), s.r_max())];
        for (dt, rid, rate, have_rtt, leave, rtt_ms, timeout) in reps {
            t += dt;
            let now = Time::from_millis(t);
            if timeout {
                s.handle_timeout(now);
            } else {
                let h = s.data_header(Time::from_millis(t.saturating_sub(rtt_ms)));
                s.handle_parsed_report(now, &TfmccReport {
                    rid, round: h.round, have_rtt, have_loss: true, leave, is_clr: false,
                    ts_us: t as u32, echo_ts_us: h.ts_us, x_rate: rate, x_recv: rate,
                    rtt_us: (rtt_ms * 1000) as u32, p_fixed: 1000, auth: AuthBlock::default(),
                });
            }
            let x = s.rate_bytes();
            prop_assert!(x >= 1000.0 / 64.0 - 1e-9);
            obs.push((t, x, s.r_max()));
        }
        // One packet per R_max per R_max between any two observations: the sender accrues
        // the increase continuously (every call brings X up to date), so there is no step to
        // allow for, not even one packet per R_max at a CLR report.
        for i in 0..obs.len() {
            let mut r = obs[i].2;
            for j in i + 1..obs.len() {
                r = r.min(obs[j].2);
                let dts = (obs[j].0 - obs[i].0) as f64 / 1000.0;
                let allowed = 1000.0 * dts / (r * r) + 1e-6;
                prop_assert!(obs[j].1 - obs[i].1 <= allowed,
                    "rate {} -> {} in {} s with R_max {}", obs[i].1, obs[j].1, dts, r);
            }
        }
    }
}

#[test]
fn infinite_suppression_encodes_as_all_ones() {
    let mut s = TfmccSender::new(TfmccConfig::default());
    assert_eq!(s.data_header(Time::ZERO).x_supp, RATE_INFINITE);
}
