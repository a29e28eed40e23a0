//! Arbitrary inputs never panic the receivers (ERA and PLM): random session announcements
//! (including degenerate ones: zero rates, zero intervals, one layer), packets with random
//! layers, sequence numbers, bunch fields and times (also going backwards), and early,
//! late or repeated timeouts. The cumulative-subscription invariant must still hold.

use congestion::era::{Era, EraConfig, RttMode, Step1Target};
use congestion::plm::{Plm, PlmConfig};
use congestion::{Action, LayerInfo, LayeredController, PacketArrival, SessionInfo, Time};
use proptest::prelude::*;
use std::net::Ipv4Addr;
use std::time::Duration;

#[derive(Clone, Debug)]
enum Input {
    Sam {
        n: u8,
        rate: u64,
        adapt_us: u64,
        size: u16,
        bunch: u8,
        seq: u32,
        sid: u32,
    },
    Pkt {
        layer: u8,
        seq: u64,
        pos: u8,
        len: u8,
        size: u32,
        dt_us: i64,
    },
    Timeout {
        dt_us: i64,
    },
    Deadline,
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        1 => (0u8..6, prop_oneof![Just(0u64), 1u64..10_000_000], prop_oneof![Just(0u64), 1u64..3_000_000],
              0u16..1500, 0u8..5, 0u32..5, 0u32..3)
            .prop_map(|(n, rate, adapt_us, size, bunch, seq, sid)| Input::Sam { n, rate, adapt_us, size, bunch, seq, sid }),
        12 => (0u8..8, prop_oneof![0u64..50, any::<u64>()], 0u8..4, 0u8..4, 0u32..2000, -2_000i64..200_000)
            .prop_map(|(layer, seq, pos, len, size, dt_us)| Input::Pkt { layer, seq, pos, len, size, dt_us }),
        2 => (-1_000i64..3_000_000).prop_map(|dt_us| Input::Timeout { dt_us }),
        2 => Just(Input::Deadline),
    ]
}

fn drive(mut c: Box<dyn LayeredController>, inputs: &[Input]) -> Result<(), TestCaseError> {
    let mut now: i64 = 1_000_000;
    let mut held: u8 = 0;
    let mut exited = false;
    for i in inputs {
        match i {
            Input::Sam {
                n,
                rate,
                adapt_us,
                size,
                bunch,
                seq,
                sid,
            } => {
                let layers = (0..*n)
                    .map(|k| LayerInfo {
                        rate_bps: *rate,
                        group: Ipv4Addr::new(239, 9, 0, k),
                        port: 7000,
                    })
                    .collect();
                let info = SessionInfo {
                    session_id: *sid,
                    announce_seq: *seq,
                    sender: Ipv4Addr::LOCALHOST,
                    layers,
                    packet_size: *size,
                    bunch_len: *bunch,
                    adapt_interval: Duration::from_micros(*adapt_us),
                    announce_interval: Duration::from_secs(1),
                    tracks: Vec::new(),
                    feedback_port: None,
                    retransmission: false,
                };
                c.handle_announcement(Time::from_micros(now.max(0) as u64), &info);
            }
            Input::Pkt {
                layer,
                seq,
                pos,
                len,
                size,
                dt_us,
            } => {
                now = (now + dt_us).max(0);
                let t = Time::from_micros(now as u64);
                let p = PacketArrival {
                    layer: *layer,
                    seq: *seq,
                    bunch_pos: *pos,
                    bunch_len: *len,
                    size: *size,
                    send_time_us: 0,
                    recv_time: t,
                };
                c.handle_packet(t, &p);
            }
            Input::Timeout { dt_us } => {
                now = (now + dt_us).max(0);
                c.handle_timeout(Time::from_micros(now as u64));
            }
            Input::Deadline => {
                if let Some((t, _)) = c.poll_timeout() {
                    if t != Time::NEVER {
                        now = now.max(t.as_micros() as i64 + 1);
                        c.handle_timeout(t);
                    }
                }
            }
        }
        while let Some(a) = c.poll_action() {
            match a {
                Action::Join(k) => {
                    prop_assert!(!exited);
                    prop_assert_eq!(k, held);
                    held += 1;
                }
                Action::Leave(k) => {
                    prop_assert!(held > 0 && k == held - 1);
                    held -= 1;
                }
                Action::Exit => {
                    prop_assert_eq!(held, 0);
                    exited = true;
                }
                Action::SendFeedback(_) => prop_assert!(false, "receiver sent feedback"),
            }
        }
        while c.poll_decision().is_some() {}
        prop_assert_eq!(c.layers(), held);
        let _ = c.stats();
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

    #[test]
    fn era_never_panics(inputs in proptest::collection::vec(input(), 1..400), exit: bool, kth: bool, join_rtt: bool) {
        let cfg = EraConfig {
            exit_below_base: exit,
            step1: if kth { Step1Target::KthLowest { k: 2, of_last: 8 } } else { Step1Target::Sample },
            rtt: if join_rtt { RttMode::JoinLatency { initial: 0.05, window: 32 } } else { RttMode::Fixed(0.05) },
            ..EraConfig::default()
        };
        drive(Box::new(Era::new(cfg)), &inputs)?;
    }

    #[test]
    fn plm_never_panics(inputs in proptest::collection::vec(input(), 1..400), exit: bool, permissive: bool) {
        let cfg = PlmConfig { exit_on_empty: exit, permissive, ..PlmConfig::default() };
        drive(Box::new(Plm::new(cfg)), &inputs)?;
    }
}
