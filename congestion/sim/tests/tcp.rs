//! The simulated TCP sender's window growth after a retransmission timeout
//! (`agents::tcp`). Why this test exists: after a timeout the sender goes back to the first
//! unacknowledged segment, and the receiver answers its retransmission with one cumulative
//! ACK that covers everything it had buffered behind the hole. Growing cwnd by every segment
//! that ACK covers sent a line-rate burst of that size (hundreds of packets in the TFRC
//! fairness sweep S10, `docs/protocols/tfrc.md`). ns-2's `TcpAgent::opencwnd` (the papers'
//! TCP) and RFC 5681 §3.1 grow cwnd by at most one segment per ACK in slow start.

use congestion::Time;
use qdisc::QdiscConfig;
use sim::agents::tcp::{TcpSender, Variant};
use sim::engine::{Agent, AgentId, Body, Command, Dest, LinkSpec, Net, Packet, Sim};
use std::cell::RefCell;
use std::rc::Rc;

/// A TCP receiver that loses every copy of segment `hole` sent before `heal_at`, buffers
/// what comes after it, ACKs every segment cumulatively, and records (arrival time,
/// segment, cumulative ACK it sent).
struct HoleSink {
    hole: u64,
    heal_at: Time,
    next: u64,
    buffered: std::collections::BTreeSet<u64>,
    log: Rc<RefCell<Vec<(Time, u64, u64)>>>,
}

impl Agent for HoleSink {
    fn command(&mut self, _: &mut Net, _: AgentId, _: Command) {}
    fn on_packet(&mut self, net: &mut Net, me: AgentId, p: &Packet) {
        let Body::Tcp { seq } = p.body else { return };
        let now = net.now();
        if seq == self.hole && now < self.heal_at {
            return;
        }
        if seq == self.next {
            self.next += 1;
            while self.buffered.remove(&self.next) {
                self.next += 1;
            }
        } else if seq > self.next {
            self.buffered.insert(seq);
        }
        self.log.borrow_mut().push((now, seq, self.next));
        net.send(Packet {
            src: 1,
            src_agent: me,
            dst: Dest::Agent(p.src, p.src_agent),
            size: 40,
            flow: p.flow,
            sent_at: now,
            body: Body::Ack {
                ack: self.next,
                echo: p.sent_at,
            },
        });
    }
    fn on_timer(&mut self, _: &mut Net, _: AgentId, _: u64) {}
}

fn link(from: usize, to: usize) -> LinkSpec {
    LinkSpec {
        name: format!("{from}-{to}"),
        from,
        to,
        rate_bps: 10_000_000,
        delay: Time::from_millis(10),
        loss: 0.0,
        jitter: Time::ZERO,
        queue: qdisc::build::<Packet>(
            &QdiscConfig::Droptail {
                limit_packets: Some(1000),
                limit_bytes: None,
                limit_ms: None,
            },
            1,
        )
        .unwrap(),
    }
}

/// Segments that reach the receiver for the first time within one RTT after the cumulative
/// ACK that jumped over the healed hole, and how far that ACK jumped.
fn burst_after_timeout(variant: Variant) -> (usize, u64) {
    let mut sim = Sim::new(2, vec![link(0, 1), link(1, 0)], 1);
    let log = Rc::new(RefCell::new(Vec::new()));
    let sink = sim.add_agent(
        1,
        Box::new(HoleSink {
            hole: 40,
            heal_at: Time::from_secs_f64(2.0),
            next: 0,
            buffered: Default::default(),
            log: log.clone(),
        }),
    );
    let tcp = sim.add_agent(
        0,
        Box::new(TcpSender::new(
            0,
            Dest::Agent(1, sink),
            1,
            1000,
            variant,
            200,
        )),
    );
    sim.net.schedule_command(Time::ZERO, tcp, Command::Start);
    sim.run_until(Time::from_secs_f64(6.0));
    let log = log.borrow();
    // The jump: the first ACK past the hole, sent when the retransmission got through.
    let (i, &(t_jump, _, ack_jump)) = log
        .iter()
        .enumerate()
        .find(|(_, &(_, _, ack))| ack > 41)
        .expect("the hole is repaired after it heals");
    let highest_before = log[..i].iter().map(|&(_, s, _)| s).max().unwrap_or(0);
    let rtt = 0.020 + 0.001; // both propagation delays plus serialisation, about
    let new_in_rtt = log[i + 1..]
        .iter()
        .filter(|&&(t, s, _)| {
            s > highest_before && t.as_secs_f64() <= t_jump.as_secs_f64() + rtt + 0.005
        })
        .count();
    (new_in_rtt, ack_jump - 40)
}

#[test]
fn slow_start_after_a_timeout_grows_one_segment_per_ack() {
    for variant in [Variant::Reno, Variant::NewReno] {
        let (burst, jump) = burst_after_timeout(variant);
        // The setup must produce what the test is about: a timeout whose retransmission is
        // answered by an ACK covering many buffered segments.
        assert!(
            jump > 20,
            "{variant:?}: the ACK after the timeout covered only {jump}"
        );
        // cwnd was 1 at the timeout; one ACK may add one segment: 2 new segments go out
        // (one more than the ACK freed, one for the window growth).
        assert!(
            burst <= 2,
            "{variant:?}: {burst} new segments within one RTT of an ACK that covered {jump}"
        );
    }
}
