//! The simulated TCP sender's window growth after a retransmission timeout
//! (`agents::tcp`). Why this test exists: after a timeout the sender goes back to the first
//! unacknowledged segment, and the receiver answers its retransmission with one cumulative
//! ACK that covers everything it had buffered behind the hole. Growing cwnd by every segment
//! that ACK covers sent a line-rate burst of that size (hundreds of packets in the TFRC
//! fairness sweep S10, `docs/protocols/tfrc.md`). ns-2's `TcpAgent::opencwnd` (the papers'
//! TCP) and RFC 5681 §3.1 grow cwnd by at most one segment per ACK in slow start.

use congestion::Time;
use netmodel::QdiscConfig;
use sim::agents::sack::RecvBuffer;
use sim::agents::tcp::{TcpSender, Variant};
use sim::engine::{Agent, AgentId, Body, Command, Dest, LinkSpec, Net, Packet, Sim};
use std::cell::RefCell;
use std::rc::Rc;

/// Runs `sender` (built with the destination of `sink`) on node 0 against `sink` on node 1
/// over [`link`]s both ways, for `secs` seconds; the tests read what the sink logged.
fn run_pair(sink: Box<dyn Agent>, sender: impl FnOnce(Dest) -> TcpSender, secs: f64) {
    let mut sim = Sim::new(2, vec![link(0, 1), link(1, 0)], 1);
    let sink = sim.add_agent(1, sink);
    let tcp = sim.add_agent(0, Box::new(sender(Dest::Agent(1, sink))));
    sim.net.schedule_command(Time::ZERO, tcp, Command::Start);
    sim.run_until(Time::from_secs_f64(secs));
}

/// A TCP receiver's in-order delivery: the next expected segment after `seq` arrives, with
/// out-of-order segments kept in `buffered` until the hole before them fills.
fn receive_in_order(
    mut next: u64,
    buffered: &mut std::collections::BTreeSet<u64>,
    seq: u64,
) -> u64 {
    if seq == next {
        next += 1;
        while buffered.remove(&next) {
            next += 1;
        }
    } else if seq > next {
        buffered.insert(seq);
    }
    next
}

/// Sends the cumulative ACK for `next` back to the sender of `p` (40-B ACK, echoing its send
/// time for the sender's RTT sample).
fn send_ack(net: &mut Net, me: AgentId, p: &Packet, next: u64) {
    let now = net.now();
    net.send(Packet {
        src: 1,
        src_agent: me,
        dst: Dest::Agent(p.src, p.src_agent),
        size: 40,
        flow: p.flow,
        sent_at: now,
        body: Body::Ack {
            ack: next,
            echo: p.sent_at,
        },
    });
}

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
        self.next = receive_in_order(self.next, &mut self.buffered, seq);
        self.log.borrow_mut().push((now, seq, self.next));
        send_ack(net, me, p, self.next);
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
        queue: netmodel::build::<Packet>(
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
    let log = Rc::new(RefCell::new(Vec::new()));
    let sink = HoleSink {
        hole: 40,
        heal_at: Time::from_secs_f64(2.0),
        next: 0,
        buffered: Default::default(),
        log: log.clone(),
    };
    run_pair(
        Box::new(sink),
        |to| TcpSender::new(0, to, 1, 1000, variant, 200),
        6.0,
    );
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

/// A receiver for Karn's rule: it loses the first `hole_copies` copies of segment `hole`,
/// then the first copy of the first new segment that arrives after the hole is repaired;
/// it ACKs every segment cumulatively and records (arrival time, segment, dropped).
struct KarnSink {
    hole: u64,
    hole_copies: u32,
    seen_hole: u32,
    healed: bool,
    dropped_fresh: Option<u64>,
    next: u64,
    buffered: std::collections::BTreeSet<u64>,
    log: Rc<RefCell<Vec<(Time, u64, bool)>>>,
}

impl Agent for KarnSink {
    fn command(&mut self, _: &mut Net, _: AgentId, _: Command) {}
    fn on_packet(&mut self, net: &mut Net, me: AgentId, p: &Packet) {
        let Body::Tcp { seq } = p.body else { return };
        let now = net.now();
        let drop = if seq == self.hole && !self.healed {
            self.seen_hole += 1;
            self.seen_hole <= self.hole_copies
        } else {
            self.healed && self.dropped_fresh.is_none() && seq >= self.next
        };
        if drop && seq != self.hole {
            self.dropped_fresh = Some(seq);
        }
        self.log.borrow_mut().push((now, seq, drop));
        if drop {
            return;
        }
        if seq == self.hole {
            self.healed = true;
        }
        self.next = receive_in_order(self.next, &mut self.buffered, seq);
        send_ack(net, me, p, self.next);
    }
    fn on_timer(&mut self, _: &mut Net, _: AgentId, _: u64) {}
}

/// Karn's rule (RFC 6298 §3 and §5; ns-2 clears `t_backoff_` only when a timed segment is
/// acknowledged): segment 40 is lost in its original transmission, its fast retransmit and
/// the retransmission of the first timeout, so the sender times out twice and its RTO doubles
/// from the 200 ms floor to 0.8 s. The retransmission of the second timeout gets through and
/// its cumulative ACK covers only segments sent before the timeout: that ACK must not reset
/// the RTO. The first new segment after it is lost (the window is 2: no fast retransmit), and
/// its retransmission must wait for the backed-off RTO, not the 200 ms an RTT sample from the
/// ambiguous ACK would give. Returns (arrival of its first copy, arrival of its second copy).
fn retry_after_backoff(variant: Variant, bug_fix: bool) -> (f64, f64) {
    let log = Rc::new(RefCell::new(Vec::new()));
    let sink = KarnSink {
        hole: 40,
        hole_copies: 3,
        seen_hole: 0,
        healed: false,
        dropped_fresh: None,
        next: 0,
        buffered: Default::default(),
        log: log.clone(),
    };
    run_pair(
        Box::new(sink),
        |to| TcpSender::new(0, to, 1, 1000, variant, 200).with_bug_fix(bug_fix),
        8.0,
    );
    let log = log.borrow();
    let holes: Vec<f64> = log
        .iter()
        .filter(|e| e.1 == 40)
        .map(|e| e.0.as_secs_f64())
        .collect();
    assert_eq!(
        holes.len(),
        4,
        "{variant:?}: copies of segment 40 at {holes:?}"
    );
    // The third and fourth copies are the retransmissions of two timeouts: the second
    // interval is the doubled RTO.
    let backoff = holes[3] - holes[2];
    assert!(
        (0.35..0.5).contains(&backoff),
        "{variant:?}: the second timeout came {backoff:.3} s after the first (RTO 0.4 s)"
    );
    let (fresh_seq, first) = log
        .iter()
        .find(|e| e.2 && e.1 != 40)
        .map(|e| (e.1, e.0.as_secs_f64()))
        .expect("a new segment after the repair was dropped");
    let second = log
        .iter()
        .find(|e| e.1 == fresh_seq && !e.2)
        .map(|e| e.0.as_secs_f64())
        .expect("the dropped new segment was retransmitted");
    (first, second)
}

#[test]
fn timeout_backoff_stays_until_a_new_segment_is_acked() {
    // Reno without ns-2's `bugFix_` fast-retransmits again on the duplicate ACKs still
    // arriving after the timeout, which is not the case under test.
    for variant in [Variant::Reno, Variant::NewReno] {
        let (first, second) = retry_after_backoff(variant, true);
        let wait = second - first;
        // RTO 0.8 s after two timeouts, armed when the ACK of the healed hole arrived (one
        // RTT before the new segment's first copy reached the receiver); with the RTO reset
        // by that ACK the retransmission came after about 0.2 s.
        assert!(
            wait > 0.7,
            "{variant:?}: the lost new segment was retransmitted {wait:.3} s after its first copy (backed-off RTO 0.8 s)"
        );
    }
}

/// A receiver for the SACK tests: it loses the first `copies` copies of each segment in
/// `drop` (`copies` per segment), delivers the rest in order with [`RecvBuffer`], ACKs
/// every segment (with SACK blocks when `sack`), and records (arrival time, segment,
/// dropped).
struct LossySink {
    drop: Vec<(u64, u32)>,
    seen: std::collections::HashMap<u64, u32>,
    sack: bool,
    next: u64,
    buf: RecvBuffer,
    log: Rc<RefCell<Vec<(Time, u64, bool)>>>,
}

impl Agent for LossySink {
    fn command(&mut self, _: &mut Net, _: AgentId, _: Command) {}
    fn on_packet(&mut self, net: &mut Net, me: AgentId, p: &Packet) {
        let Body::Tcp { seq } = p.body else { return };
        let now = net.now();
        let n = self.seen.entry(seq).or_insert(0);
        *n += 1;
        let dropped = self.drop.iter().any(|&(s, c)| s == seq && *n <= c);
        self.log.borrow_mut().push((now, seq, dropped));
        if dropped {
            return;
        }
        self.next = self.buf.receive(self.next, seq);
        let (ack, echo) = (self.next, p.sent_at);
        let body = if self.sack {
            Body::SackAck {
                ack,
                echo,
                blocks: self.buf.sack(ack, seq),
            }
        } else {
            Body::Ack { ack, echo }
        };
        net.send(Packet {
            src: 1,
            src_agent: me,
            dst: Dest::Agent(p.src, p.src_agent),
            size: 40,
            flow: p.flow,
            sent_at: now,
            body,
        });
    }
    fn on_timer(&mut self, _: &mut Net, _: AgentId, _: u64) {}
}

/// One bulk transfer over the 10 Mbit/s, 2 x 10 ms path with the losses `drop`
/// ((segment, copies lost)); returns the receiver's log.
fn lossy_run(variant: Variant, drop: &[(u64, u32)], secs: f64) -> Vec<(Time, u64, bool)> {
    lossy_run_with(variant, variant == Variant::Sack, drop, secs)
}

/// [`lossy_run`] with the receiver's SACK blocks on or off whatever the sender's variant.
fn lossy_run_with(
    variant: Variant,
    sack_sink: bool,
    drop: &[(u64, u32)],
    secs: f64,
) -> Vec<(Time, u64, bool)> {
    let log = Rc::new(RefCell::new(Vec::new()));
    let sink = LossySink {
        drop: drop.to_vec(),
        seen: Default::default(),
        sack: sack_sink,
        next: 0,
        buf: RecvBuffer::default(),
        log: log.clone(),
    };
    run_pair(
        Box::new(sink),
        |to| TcpSender::new(0, to, 1, 1000, variant, 200),
        secs,
    );
    let out = log.borrow().clone();
    out
}

/// Arrival times of every delivered (not dropped) copy of `seq`.
fn delivered(log: &[(Time, u64, bool)], seq: u64) -> Vec<f64> {
    log.iter()
        .filter(|e| e.1 == seq && !e.2)
        .map(|e| e.0.as_secs_f64())
        .collect()
}

/// Segments that reached the receiver more than once undropped: retransmissions of data it
/// already had.
fn needless_copies(log: &[(Time, u64, bool)]) -> Vec<u64> {
    let mut n = std::collections::BTreeMap::new();
    for e in log.iter().filter(|e| !e.2) {
        *n.entry(e.1).or_insert(0u32) += 1;
    }
    n.into_iter()
        .filter(|&(_, c)| c > 1)
        .map(|(s, _)| s)
        .collect()
}

/// Three losses in one window (segments 100, 105, 110, with cwnd about 40 in slow start):
/// SACK learns all three holes from the duplicate ACKs and retransmits them within the
/// first RTT of recovery; NewReno learns one hole per partial ACK, one RTT each. Returns
/// (time from the first to the last repaired hole's arrival, timeouts seen as a hole's
/// retransmission arriving >= 0.2 s after the loss).
fn three_losses(variant: Variant) -> (f64, Vec<u64>) {
    let holes = [100u64, 105, 110];
    let drop: Vec<(u64, u32)> = holes.iter().map(|&s| (s, 1)).collect();
    let log = lossy_run(variant, &drop, 3.0);
    let repaired: Vec<f64> = holes
        .iter()
        .map(|&s| {
            let d = delivered(&log, s);
            assert_eq!(d.len(), 1, "{variant:?}: segment {s} delivered at {d:?}");
            d[0]
        })
        .collect();
    let lost_at = log.iter().find(|e| e.2).map(|e| e.0.as_secs_f64()).unwrap();
    // No timeout: every hole is repaired well inside the 200-ms minimum RTO.
    for (&s, &t) in holes.iter().zip(&repaired) {
        assert!(
            t - lost_at < 0.2,
            "{variant:?}: segment {s} repaired {:.3} s after the loss",
            t - lost_at
        );
    }
    (repaired[2] - repaired[0], needless_copies(&log))
}

#[test]
fn sack_repairs_three_losses_in_one_rtt_newreno_in_three() {
    // RTT: 2 x 10 ms propagation plus serialisation and the standing queue of a growing
    // window; about 21 ms empty.
    let rtt = 0.021;
    let (sack, sack_dup) = three_losses(Variant::Sack);
    let (newreno, nr_dup) = three_losses(Variant::NewReno);
    assert!(
        sack < 0.5 * rtt,
        "SACK: the three holes were repaired over {sack:.4} s (RTT {rtt} s)"
    );
    assert!(
        newreno > 1.5 * rtt,
        "NewReno: the three holes were repaired over {newreno:.4} s (one per RTT expected)"
    );
    assert!(
        sack_dup.is_empty(),
        "SACK resent delivered data: {sack_dup:?}"
    );
    assert!(
        nr_dup.is_empty(),
        "NewReno resent delivered data: {nr_dup:?}"
    );
}

#[test]
fn sack_never_resends_sacked_segments_under_burst_loss() {
    // A burst of 6, two singles and a pair in one window: every lost segment is resent
    // exactly once and nothing the receiver SACKed is resent.
    let lost: Vec<u64> = (120..126).chain([130, 137, 150, 151]).collect();
    let drop: Vec<(u64, u32)> = lost.iter().map(|&s| (s, 1)).collect();
    let log = lossy_run(Variant::Sack, &drop, 3.0);
    for &s in &lost {
        assert_eq!(delivered(&log, s).len(), 1, "segment {s}");
    }
    assert_eq!(needless_copies(&log), Vec::<u64>::new());
    let first_loss = log.iter().find(|e| e.2).unwrap().0.as_secs_f64();
    let last_repair = lost
        .iter()
        .map(|&s| delivered(&log, s)[0])
        .fold(0.0, f64::max);
    assert!(
        last_repair - first_loss < 0.2,
        "repaired {:.3} s after the first loss: a timeout",
        last_repair - first_loss
    );
    // The transfer went on: far more than the window was delivered after the repair.
    let top = log.iter().filter(|e| !e.2).map(|e| e.1).max().unwrap();
    assert!(top > 1000, "only up to segment {top} in 3 s");
}

#[test]
fn sack_falls_back_to_the_timeout_when_a_retransmission_is_lost() {
    // Segment 100 loses its first copy and its SACK retransmission; 500 loses one copy
    // later on (500, once the window has regrown). Only the RTO can repair 100 (RFC 6675 does not detect a lost
    // retransmission); afterwards the sender recovers and SACK recovery works again.
    let log = lossy_run(Variant::Sack, &[(100, 2), (500, 1)], 4.0);
    let copies: Vec<f64> = log
        .iter()
        .filter(|e| e.1 == 100)
        .map(|e| e.0.as_secs_f64())
        .collect();
    assert_eq!(copies.len(), 3, "copies of segment 100 at {copies:?}");
    // The RTO (200-ms floor) was armed when the fast retransmission left, after the first
    // copy's loss showed in three duplicate ACKs: the third copy is the timeout's.
    let wait = copies[2] - copies[0];
    assert!(
        (0.2..1.0).contains(&wait),
        "the third copy came {wait:.3} s after the first: not the RTO"
    );
    let later = delivered(&log, 500);
    assert_eq!(later.len(), 1, "segment 500 delivered at {later:?}");
    let lost500 = log.iter().find(|e| e.1 == 500).unwrap().0.as_secs_f64();
    assert!(
        later[0] - lost500 < 0.2,
        "segment 500 repaired after {:.3} s: no fast recovery after the timeout",
        later[0] - lost500
    );
    let top = log.iter().filter(|e| !e.2).map(|e| e.1).max().unwrap();
    assert!(top > 1000, "only up to segment {top} in 4 s");
    // The scoreboard was cleared at the timeout, not the receiver's buffer: the RTO's
    // retransmission of 100 is answered by one ACK over everything buffered, and nothing
    // the receiver held is sent again.
    assert_eq!(needless_copies(&log), Vec::<u64>::new());
}

fn sack_dumbbell(variant: &str) -> sim::scenario::Scenario {
    let y = format!(
        r#"
name: t
duration_s: 40
topology:
  nodes: [s, r0, r1, d]
  links:
    - {{from: s, to: r0, rate_kbps: 10000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 200}}}}
    - {{from: r0, to: r1, rate_kbps: 1500, delay_ms: 20, queue: {{kind: droptail, limit_packets: 25}}}}
    - {{from: r1, to: d, rate_kbps: 10000, delay_ms: 5, queue: {{kind: droptail, limit_packets: 200}}}}
flows:
  - {{name: a, type: tcp, variant: {variant}, from: s, to: d, packet_size: 1000, header_bytes: 40}}
  - {{name: b, type: tcp, variant: {variant}, from: s, to: d, packet_size: 1000, header_bytes: 40, start_s: 0.3}}
  - {{name: c, type: tcp, variant: {variant}, from: s, to: d, packet_size: 1000, header_bytes: 40, start_s: 0.7}}
"#
    );
    sim::scenario::Scenario::from_yaml(&y).expect("test scenario")
}

#[test]
fn sack_scenario_is_deterministic_and_fills_the_link() {
    let sc = sack_dumbbell("sack");
    let (_, a) = sim::run(&sc, 7).unwrap();
    let (_, b) = sim::run(&sc, 7).unwrap();
    let ja = serde_json::to_string(&a).unwrap();
    assert_eq!(
        ja,
        serde_json::to_string(&b).unwrap(),
        "same seed, same run"
    );
    let total: f64 = a.monitors.iter().map(|m| m.throughput_kbps).sum();
    // Three SACK flows over 1.5 Mbit/s with a 25-packet buffer: goodput (payload, 1000 of
    // every 1040 B) above 90 % of the link.
    assert!(
        total > 0.9 * 1500.0 * 1000.0 / 1040.0,
        "goodput {total:.0} kbit/s"
    );
    // The same set-up with NewReno retransmits more and times out more: SACK's goodput
    // is not lower.
    let (_, n) = sim::run(&sack_dumbbell("newreno"), 7).unwrap();
    let total_nr: f64 = n.monitors.iter().map(|m| m.throughput_kbps).sum();
    assert!(
        total >= total_nr * 0.99,
        "SACK {total:.0} vs NewReno {total_nr:.0} kbit/s"
    );
    // An unknown variant is refused.
    let bad = std::panic::catch_unwind(|| sack_dumbbell("vegas"));
    assert!(bad.is_err(), "variant vegas was accepted");
}

#[test]
fn sack_blocks_change_nothing_for_reno_and_newreno_and_a_plain_sink_still_works_for_sack() {
    let drop = [(100, 1), (105, 1), (110, 1), (400, 1)];
    // Reno and NewReno read only the cumulative ACK of a SACK receiver's ACKs.
    for v in [Variant::Reno, Variant::NewReno] {
        assert_eq!(
            lossy_run_with(v, true, &drop, 3.0),
            lossy_run_with(v, false, &drop, 3.0),
            "{v:?}"
        );
    }
    // A SACK sender whose receiver sends no blocks: recovery starts on three duplicate ACKs
    // and the lost segments are still all repaired (by partial ACKs or the RTO); the transfer
    // goes on and nothing delivered is resent.
    let log = lossy_run_with(Variant::Sack, false, &drop, 3.0);
    for &(s, _) in &drop {
        assert_eq!(delivered(&log, s).len(), 1, "segment {s}");
    }
    let top = log.iter().filter(|e| !e.2).map(|e| e.1).max().unwrap();
    assert!(top > 1000, "only up to segment {top} in 3 s");
}
