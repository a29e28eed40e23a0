//! PLM — Packet-pair receiver-driven cumulative Layered Multicast (Legout & Biersack 2000;
//! `plm.md` §3).
//!
//! Under fair queueing a packet pair's spacing after the bottleneck gives this session's fair
//! share. The receiver drops layers at once when a single sample falls below its cumulative
//! rate, and adds layers at most once per check period C from the minimum sample seen since
//! the last decision (§3.3, strict `<` by default, permissive `<=` as an option). When pairs
//! stop getting through it falls back to a short-term loss rule (§3.5, ns-2 details) and to a
//! silence timeout.
//!
//! Choices where the paper is silent (`docs/protocols/plm.md`):
//! - C is the SAM's adaptation interval unless [`PlmConfig::check_period`] overrides it.
//! - Start-up timeout `T_start` = 5 s after the base-layer join with no packet at all.
//! - Silence timeout `T_nopkt` = max(1 s, 4 × the base layer's mean burst interval) after the
//!   last packet: one layer dropped per expiry.
//! - Dropping the last layer (by a sample, the loss rule, silence or start-up) re-joins the
//!   base layer after `T_rejoin` = 30 s (ns-2), or exits when [`PlmConfig::exit_on_empty`].
//! - Loss counts sum over the held layers; a joined layer's sequence baseline is reset and a
//!   left layer stops counting at once (as ERA's E11).

use crate::controller::{Action, Decision, LayeredController, PacketArrival, Stats, TimerReason};
use crate::estimators::bunch::BunchSampler;
use crate::estimators::loss::{SeqEvent, SeqTracker};
use crate::session::SessionInfo;
use crate::time::Time;
use std::collections::VecDeque;
use std::time::Duration;

/// PLM's parameters (`plm.md` §4).
#[derive(Clone, Debug, PartialEq)]
pub struct PlmConfig {
    /// Check period C; `None` = the SAM's adaptation interval (default 1 s in the SAM).
    pub check_period: Option<Duration>,
    /// Minimum samples in W before an add decision (ns-2: 3).
    pub min_pp: usize,
    /// Permissive comparisons (`<=` in the drop and add loops) instead of strict `<`.
    pub permissive: bool,
    /// Relative tolerance of the two comparison loops of §3.3 (ours; 0.005, 0 = the paper's
    /// exact comparisons). A PP sample at a share equal to a cumulative rate is exact in the
    /// simulator but scatters by ±0.01-0.1 % on the testbed (receive timestamps of a 40 ms gap),
    /// so the strict rule decided on noise: with a 100 kbit/s share and 20 kbit/s layers it
    /// added the 5th layer on a window minimum of 100.01 kbit/s and dropped it on the next
    /// 99.95 kbit/s sample, and a drop loop stopped at 10 layers (200 kbit/s) on a 200.67 kbit/s
    /// sample with the share at 200 kbit/s, holding exactly the share and losing packets
    /// (plm/E4). Strict: `B < x` reads `B < x·(1 − tol)`; permissive: `B <= x` reads
    /// `B <= x·(1 + tol)`. The drop trigger (`x < B[n]`) is unchanged.
    pub tolerance: f64,
    /// Loss-rate threshold of the no-PP fallback (10%).
    pub loss_threshold: f64,
    /// How sure the loss rule must be that the cycle's loss rate exceeds `loss_threshold`:
    /// it drops when the lower Wilson bound at this many standard deviations does (2.0, ours;
    /// 0 = the plain ns-2 point estimate). Why: a cycle opens at a loss and is judged from 10
    /// packets on, so at 5 % random loss two losses in the first dozen packets (a 1-in-3
    /// event per cycle) read 17 % and dropped a layer every ~2 s on the testbed (plm/E10).
    /// With z = 2 the rule still drops after the same 10 packets at 50-60 % loss (no-PP case).
    pub loss_confidence_z: f64,
    /// Skip an add decision while the current loss cycle is above `loss_threshold` (by the
    /// same confidence rule as the loss-drop). Ours, not in the paper or ns-2 (default on):
    /// when PLM overloads its own fair-queue buffer, the pairs that survive whole are the ones
    /// served back to back, every one reads the link rate, and each add undid the loss rule's
    /// drop for the rest of the run (simulator plm/S8, k = 1; `docs/protocols/plm.md` §6).
    pub no_add_while_lossy: bool,
    /// After a check that added nothing, keep checking at every sample on the minimum of the
    /// last C of samples instead of waiting for the next check (ours; default off = the
    /// paper's and ns-2's rule, where every check restarts W and T_c). W restarts at every
    /// check, so when the share rises just after a check, the next check's minimum still
    /// holds a sample of the old share and the add waits one more C: the add comes between C
    /// and 2C after the last low sample (plm/S3 2.2-2.6 s and plm/E4 1.93-2.01 s after the
    /// CBR left the bottleneck, bands 2 s and C + T_leave + 0.5 s). With this rule it comes C
    /// after the last low sample (S3 1.60-1.84 s); an add still needs every sample of a full
    /// C above the next cumulative rate, and adds stay at least C apart. Why it is off: it
    /// also adds during every lull of a competing flow that lasts C, e.g. a Reno flow sitting
    /// out a retransmission timeout after TCP2 starts in S4 (PLM 4 -> 7 -> 4 three times in
    /// 60-70 s, band 4 +- 1), which the check phase of the paper's rule mostly filters.
    /// `docs/protocols/plm.md` §9.
    pub sliding_check: bool,
    /// Hold PP samples below `B[n]` for this long before believing them (ours; `None` = the
    /// paper's drop on a single sample, what the simulator runs; [`PlmConfig::confirming`] uses
    /// 200 ms). A run of low samples that a sample above `B[n]` (by the comparisons'
    /// tolerance) ends within this time is set aside (decision `pp-set-aside`); one that
    /// lasts it drops, on the largest low sample of the run, and so does a loss during the
    /// run. Only from C after the last add (a low sample right after an add is the add
    /// overshooting) and not within C after a set-aside run (lows that recur are a real
    /// change of the share): there a low sample drops at once, as in the paper. Why: on the testbed the link emulator's
    /// wire thread is now and then descheduled by the hypervisor (release error p99 0.1-1.2
    /// ms, p99.9 0.4-4 ms, max 1.9-13 ms), which stretches a pair's gap, now and then two in
    /// a row; with B[25] = 250 kbit/s 2.4 % under R1's 256 kbit/s share, a second packet
    /// 0.4 ms late dropped 25 -> 24 and the next check re-added it (plm/E2: 2.7-5.3
    /// changes/min, band <= 2). A real fall of the share reads low in every following pair,
    /// so the cost is this much more reaction time (E4's CBR start -> 4 layers: band 1.7 s).
    pub confirm_drop: Option<Duration>,
    /// Blind period after a loss-triggered drop (500 ms).
    pub blind: Duration,
    /// Packets received in a loss cycle before its rate is evaluated (ns-2: 10).
    pub loss_min_pkts: u64,
    /// Maximum age of a loss cycle (ns-2: 5 s).
    pub loss_cycle_max: Duration,
    /// No packet at all this long after joining the base layer: give up (5 s, ours).
    pub t_start: Duration,
    /// Silence timeout; `None` = max(1 s, 4 × base-layer mean burst interval).
    pub t_nopkt: Option<Duration>,
    /// Re-join the base layer this long after holding nothing (ns-2: 30 s).
    pub t_rejoin: Duration,
    /// Exit the session instead of re-joining (the paper's wording).
    pub exit_on_empty: bool,
    /// Sequence jumps larger than this start a new baseline instead of counting as loss.
    pub max_seq_gap: u64,
    /// A missing number counts as lost once a number this much higher arrived
    /// (`estimators::loss::REORDER_THRESHOLD`, docs/protocols/lcc.md §2.1). Default 1 (the paper: a gap at once); `confirming()` 3.
    pub reorder_threshold: u64,
    /// Decision-log entries kept when the host does not poll them.
    pub max_pending_decisions: usize,
}

impl Default for PlmConfig {
    fn default() -> Self {
        PlmConfig {
            check_period: None,
            min_pp: 3,
            permissive: false,
            tolerance: 0.005,
            loss_threshold: 0.10,
            loss_confidence_z: 2.0,
            no_add_while_lossy: true,
            sliding_check: false,
            confirm_drop: None,
            blind: Duration::from_millis(500),
            loss_min_pkts: 10,
            loss_cycle_max: Duration::from_secs(5),
            t_start: Duration::from_secs(5),
            t_nopkt: None,
            t_rejoin: Duration::from_secs(30),
            exit_on_empty: false,
            max_seq_gap: 3000,
            reorder_threshold: 1,
            max_pending_decisions: 4096,
        }
    }
}

impl PlmConfig {
    /// The defaults plus [`PlmConfig::confirm_drop`] = 200 ms (a pair stretched by a
    /// descheduled vCPU does not drop layers). Opt-in (`layercast-player --controller
    /// plm-confirm`): on the testbed it cut the stall drops but not all of them (plm/E2), and
    /// in the one E9 run with it PLM's rate under the bursty background fell from 0.46 to
    /// 0.37 x TCP_b (`docs/protocols/plm.md` §9), so the player's `plm` is the paper's rule.
    pub fn confirming() -> PlmConfig {
        PlmConfig {
            confirm_drop: Some(Duration::from_millis(200)),
            reorder_threshold: crate::estimators::loss::REORDER_THRESHOLD,
            ..PlmConfig::default()
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
struct LossCycle {
    start: Time,
    recv: u64,
    lost: u64,
}

/// Lower Wilson score bound of a loss ratio from `lost` of `lost + recv` packets at `z`
/// standard deviations (`z = 0` gives the point estimate).
fn wilson_lower(lost: u64, recv: u64, z: f64) -> f64 {
    let n = (lost + recv) as f64;
    if n == 0.0 {
        return 0.0;
    }
    let p = lost as f64 / n;
    let z2 = z * z;
    let centre = p + z2 / (2.0 * n);
    let spread = z * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    (centre - spread) / (1.0 + z2 / n)
}

/// The PLM receiver.
pub struct Plm {
    cfg: PlmConfig,
    info: Option<SessionInfo>,
    /// `B[1..=N]` as `cum[0..N]`.
    cum: Vec<f64>,
    c: Duration,
    t_nopkt: Duration,
    /// Layers held (n).
    n: usize,
    t_c: Option<Time>,
    /// The first PP sample since the base join (T_c's first setting). Logged with every add
    /// decision as `first_pp_age_s`: plm.md E2 bounds the convergence time from the first PP,
    /// which the host cannot see otherwise.
    first_pp: Option<Time>,
    w_min: f64,
    w_count: usize,
    /// Samples of the last C since the last drop or add (`sliding_check`): a deque of
    /// increasing values for the sliding minimum, and the sample times for the count.
    slide_min: VecDeque<(Time, f64)>,
    slide_times: VecDeque<Time>,
    /// Time of the last drop or add (or the first sample since the base join): the sliding
    /// rule needs samples over a full C after it.
    slide_since: Option<Time>,
    /// The last check added nothing: evaluate the sliding minimum at every sample.
    sliding: bool,
    /// A sample below `B[n]` waiting for confirmation (`confirm_drop`): (time, value).
    pending_low: Option<(Time, f64)>,
    /// Low samples set aside because the next sample was at or above `B[n]`.
    set_aside: u64,
    /// When a low run was last set aside: a new low sample within C of it is believed at once
    /// (stalls are rare and lone; lows that recur are a share that really changed, e.g. a
    /// starting session that is backlogged only part of the time, plm/E4 run 5).
    last_set_aside: Option<Time>,
    /// When layers were last added (or the base joined): `confirm_drop` holds low samples only
    /// at least C after that (right after an add, a low sample is the add overshooting, not a
    /// stall; after a drop the lower level needs no such grace).
    level_since: Time,
    seq: Vec<SeqTracker>,
    bunch: BunchSampler,
    cycle: Option<LossCycle>,
    blind_until: Time,
    /// A loss-drop happened since the last add decision (`no_add_while_lossy`).
    loss_dropped_in_period: bool,
    /// Time of the last packet, or of the base join before any packet.
    last_packet: Option<Time>,
    /// Whether any packet arrived since the last base join (selects T_start vs T_nopkt).
    got_packet: bool,
    rejoin_at: Option<Time>,
    exited: bool,
    actions: VecDeque<Action>,
    decisions: VecDeque<Decision>,
    decisions_dropped: u64,
    last_estimate: Option<f64>,
    last_loss_rate: f64,
    received: u64,
    lost: u64,
    joins: u64,
    leaves: u64,
}

impl Plm {
    /// A receiver with `cfg`; it joins nothing before the first SAM.
    pub fn new(cfg: PlmConfig) -> Plm {
        Plm {
            cfg,
            info: None,
            cum: Vec::new(),
            c: Duration::from_secs(1),
            t_nopkt: Duration::from_secs(1),
            n: 0,
            t_c: None,
            first_pp: None,
            w_min: f64::INFINITY,
            w_count: 0,
            slide_min: VecDeque::new(),
            slide_times: VecDeque::new(),
            slide_since: None,
            sliding: false,
            pending_low: None,
            set_aside: 0,
            last_set_aside: None,
            level_since: Time::ZERO,
            seq: Vec::new(),
            bunch: BunchSampler::new(),
            cycle: None,
            blind_until: Time::ZERO,
            loss_dropped_in_period: false,
            last_packet: None,
            got_packet: false,
            rejoin_at: None,
            exited: false,
            actions: VecDeque::new(),
            decisions: VecDeque::new(),
            decisions_dropped: 0,
            last_estimate: None,
            last_loss_rate: 0.0,
            received: 0,
            lost: 0,
            joins: 0,
            leaves: 0,
        }
    }

    /// The configuration in use.
    pub fn config(&self) -> &PlmConfig {
        &self.cfg
    }

    /// The check period in use.
    pub fn check_period(&self) -> Duration {
        self.c
    }

    /// The silence timeout in use.
    pub fn silence_timeout(&self) -> Duration {
        self.t_nopkt
    }

    /// Low samples set aside by [`PlmConfig::confirm_drop`] so far.
    pub fn set_aside(&self) -> u64 {
        self.set_aside
    }

    /// `B[n]`, the cumulative rate of `n` layers (0 for none).
    fn b(&self, n: usize) -> f64 {
        if n == 0 {
            0.0
        } else {
            self.cum[(n - 1).min(self.cum.len() - 1)]
        }
    }

    fn log(
        &mut self,
        at: Time,
        from: usize,
        reason: &'static str,
        inputs: Vec<(&'static str, f64)>,
    ) {
        if self.n > from {
            self.level_since = at;
        }
        if self.decisions.len() >= self.cfg.max_pending_decisions {
            self.decisions.pop_front();
            self.decisions_dropped += 1;
        }
        self.decisions.push_back(Decision {
            at,
            from_layers: from as u8,
            to_layers: self.n as u8,
            reason,
            inputs,
        });
    }

    fn join_next(&mut self) {
        let k = self.n;
        if let Some(t) = self.seq.get_mut(k) {
            t.reset();
        }
        self.bunch.reset_layer(k as u8);
        self.actions.push_back(Action::Join(k as u8));
        self.joins += 1;
        self.n += 1;
    }

    fn leave_top(&mut self) {
        self.pending_low = None; // judged against a rate no longer held
        if self.n == 0 {
            return;
        }
        self.n -= 1;
        let k = self.n;
        self.bunch.reset_layer(k as u8);
        self.actions.push_back(Action::Leave(k as u8));
        self.leaves += 1;
    }

    fn join_base(&mut self, now: Time, reason: &'static str) {
        self.pending_low = None;
        self.join_next();
        self.t_c = None;
        self.first_pp = None;
        self.reset_window();
        self.reset_slide(None);
        self.cycle = None;
        self.last_packet = Some(now);
        self.got_packet = false;
        self.rejoin_at = None;
        let b1 = self.b(1);
        self.log(now, 0, reason, vec![("b_after", b1)]);
    }

    /// After the last layer went: re-join later, or exit.
    fn emptied(&mut self, now: Time) {
        if self.n > 0 {
            return;
        }
        self.t_c = None;
        self.reset_window();
        self.reset_slide(None);
        self.cycle = None;
        if self.cfg.exit_on_empty {
            self.actions.push_back(Action::Exit);
            self.exited = true;
            self.rejoin_at = None;
        } else {
            self.rejoin_at = Some(now + self.cfg.t_rejoin);
        }
    }

    fn reset_window(&mut self) {
        self.w_min = f64::INFINITY;
        self.w_count = 0;
    }

    /// Forgets the sliding window's samples; `since` = the decision that restarts it.
    fn reset_slide(&mut self, since: Option<Time>) {
        self.slide_min.clear();
        self.slide_times.clear();
        self.slide_since = since;
        self.sliding = false;
    }

    /// Adds sample `x` at `t` to the sliding window and forgets samples older than C.
    fn push_slide(&mut self, t: Time, x: f64) {
        self.slide_since.get_or_insert(t);
        while self.slide_min.back().is_some_and(|&(_, v)| v >= x) {
            self.slide_min.pop_back();
        }
        self.slide_min.push_back((t, x));
        self.slide_times.push_back(t);
        let keep_after = t - self.c;
        while self
            .slide_min
            .front()
            .is_some_and(|&(at, _)| at <= keep_after)
        {
            self.slide_min.pop_front();
        }
        while self.slide_times.front().is_some_and(|&at| at <= keep_after) {
            self.slide_times.pop_front();
        }
    }

    /// `a < b` (strict) or `a <= b` (permissive), for the two loops of §3.3, with `b` (the
    /// PP sample or estimate) read with [`PlmConfig::tolerance`] in the conservative direction
    /// for strict and the permissive one for permissive.
    #[inline]
    fn below(&self, a: f64, b: f64) -> bool {
        let tol = self.cfg.tolerance.clamp(0.0, 0.5);
        if self.cfg.permissive {
            a <= b * (1.0 + tol)
        } else {
            a < b * (1.0 - tol)
        }
    }

    /// §3.3, on a PP sample `x` at `t`.
    fn on_sample(&mut self, t: Time, x: f64) {
        if self.t_c.is_none() {
            self.t_c = Some(t + self.c);
        }
        let first_pp = *self.first_pp.get_or_insert(t);
        let bn = self.b(self.n);
        if x < bn {
            let recurring = self.last_set_aside.is_some_and(|a| t < a + self.c);
            let settled = t >= self.level_since + self.c && !recurring;
            match (
                self.cfg.confirm_drop.filter(|_| settled),
                self.pending_low.take(),
            ) {
                // Hold the first low sample: a stall ends with a normal sample within `h`.
                (Some(_), None) => self.pending_low = Some((t, x)),
                // Still low `h` after the first: believed, on the largest (the least
                // stretched) sample of the run.
                (Some(h), Some((t0, x0))) if t >= t0 + h => self.pp_drop(t, x.max(x0), true),
                (Some(_), Some((t0, x0))) => self.pending_low = Some((t0, x.max(x0))),
                // DROP on a single sample (the paper).
                (None, _) => self.pp_drop(t, x, false),
            }
            return;
        }
        // A sample within the tolerance of B[n] neither confirms nor ends a held run: at a
        // share equal to a cumulative rate the samples straddle B[n] (timestamp noise), and
        // the strict rule must still drop (plm/E4: 15 layers held at a 300 kbit/s share lost
        // packets when such samples set the low ones aside).
        if self.pending_low.is_some() && self.below(bn, x) {
            let (t0, x0) = self.pending_low.take().unwrap_or((t, x));
            self.set_aside += 1;
            self.last_set_aside = Some(t);
            self.log(
                t,
                self.n,
                "pp-set-aside",
                vec![
                    ("pp_sample", x0),
                    ("next_sample", x),
                    ("b_before", bn),
                    ("age_s", t.saturating_since(t0).as_secs_f64()),
                ],
            );
        }
        self.w_min = self.w_min.min(x);
        self.w_count += 1;
        if self.cfg.sliding_check {
            self.push_slide(t, x);
        }
        let due = self.t_c.is_some_and(|tc| t > tc);
        if due && self.w_count >= self.cfg.min_pp {
            // ADD, at most once per C.
            let (bhat, count) = (self.w_min, self.w_count);
            self.add_decision(t, bhat, count, first_pp, false);
        } else if self.sliding
            && self.slide_since.is_some_and(|s| t > s + self.c)
            && self.slide_times.len() >= self.cfg.min_pp
        {
            // The last check added nothing: add as soon as a full C of samples allows it.
            let bhat = self.slide_min.front().map_or(f64::INFINITY, |&(_, v)| v);
            let lossy =
                self.cfg.no_add_while_lossy && (self.loss_dropped_in_period || self.cycle_lossy());
            if !lossy
                && bhat >= bn
                && self.n < self.cum.len()
                && self.below(self.b(self.n + 1), bhat)
            {
                let count = self.slide_times.len();
                self.add_decision(t, bhat, count, first_pp, true);
            }
        }
    }

    /// §3.3 DROP on the sample `x` at `t`: leave layers while `!(B[n] < x)`.
    fn pp_drop(&mut self, t: Time, x: f64, confirmed: bool) {
        let from = self.n;
        let bn = self.b(self.n);
        self.pending_low = None;
        self.last_set_aside = None;
        self.t_c = Some(t + self.c);
        while self.n >= 1 && !self.below(self.b(self.n), x) {
            self.leave_top();
        }
        self.reset_window();
        self.reset_slide(Some(t));
        self.cycle = None; // a fresh PP beats stale loss history (ns-2)
        let b_after = self.b(self.n);
        let mut inputs = vec![("pp_sample", x), ("b_before", bn), ("b_after", b_after)];
        if self.cfg.confirm_drop.is_some() {
            inputs.push(("confirmed", if confirmed { 1.0 } else { 0.0 }));
        }
        self.log(t, from, "pp-drop", inputs);
        self.emptied(t);
    }

    /// An add decision on the estimate `bhat` from `count` samples (§3.3): the periodic check
    /// at the first sample after T_c, or (`sliding`) the sliding rule of
    /// [`PlmConfig::sliding_check`].
    fn add_decision(&mut self, t: Time, bhat: f64, count: usize, first_pp: Time, sliding: bool) {
        let bn = self.b(self.n);
        self.last_estimate = Some(bhat);
        self.t_c = Some(t + self.c);
        self.reset_window();
        let from = self.n;
        let lossy = self.cfg.no_add_while_lossy
            && (std::mem::take(&mut self.loss_dropped_in_period) || self.cycle_lossy());
        if !lossy {
            self.cycle = None; // the fresh estimate is trusted over loss history (ns-2)
        }
        if bhat >= bn && !lossy {
            while self.n < self.cum.len() && self.below(self.b(self.n + 1), bhat) {
                self.join_next();
            }
        }
        if self.n > from {
            self.pending_low = None;
            self.reset_slide(Some(t));
        } else {
            // Not after a check held back by the loss rule (`no_add_while_lossy`): the pairs
            // that survive an overloaded queue whole read high (plm/S8).
            self.sliding = self.cfg.sliding_check && !lossy;
        }
        let b_after = self.b(self.n);
        self.log(
            t,
            from,
            "pp-add",
            vec![
                ("bhat_e", bhat),
                ("pp_count", count as f64),
                ("b_before", bn),
                ("b_after", b_after),
                ("lossy", if lossy { 1.0 } else { 0.0 }),
                ("first_pp_age_s", t.saturating_since(first_pp).as_secs_f64()),
                ("sliding", if sliding { 1.0 } else { 0.0 }),
            ],
        );
    }

    /// Whether the current loss cycle is above the threshold by the loss rule's test (a cycle
    /// inside the blind period restarts at every loss, hence also `loss_dropped_in_period`).
    fn cycle_lossy(&self) -> bool {
        self.cycle.is_some_and(|c| {
            c.lost > 0
                && c.recv >= self.cfg.loss_min_pkts
                && wilson_lower(c.lost, c.recv, self.cfg.loss_confidence_z)
                    > self.cfg.loss_threshold
        })
    }

    /// §3.5 point 2 (ns-2 loss cycle), after accounting one packet's sequence event.
    fn on_loss_accounting(&mut self, now: Time, ev: SeqEvent) {
        let (recv, lost) = match ev {
            SeqEvent::Advance { lost } => (1, lost),
            SeqEvent::Baseline | SeqEvent::Restart | SeqEvent::Recovered | SeqEvent::Reordered => {
                (1, 0)
            }
            SeqEvent::Duplicate | SeqEvent::TooOld => (0, 0),
        };
        if let Some(c) = self.cycle {
            if now.saturating_since(c.start) > self.cfg.loss_cycle_max {
                self.cycle = None;
            }
        }
        if lost > 0 {
            let in_blind = now < self.blind_until;
            match (&mut self.cycle, in_blind) {
                (Some(c), false) => c.lost += lost,
                // ns-2 (`log-loss`) snapshots the counters *after* the loss that opens the cycle,
                // so that loss is not part of the cycle's rate: counting it biases every cycle
                // upwards (1 loss in 11 packets is already 9 %).
                _ => {
                    self.cycle = Some(LossCycle {
                        start: now,
                        recv: 0,
                        lost: 0,
                    })
                }
            }
        }
        let Some(c) = self.cycle.as_mut() else {
            return;
        };
        c.recv += recv;
        if c.recv < self.cfg.loss_min_pkts || now < self.blind_until {
            return;
        }
        let rate = c.lost as f64 / (c.lost + c.recv) as f64;
        self.last_loss_rate = rate;
        if c.lost > 0
            && wilson_lower(c.lost, c.recv, self.cfg.loss_confidence_z) > self.cfg.loss_threshold
        {
            let from = self.n;
            let bn = self.b(self.n);
            self.leave_top();
            self.cycle = None;
            self.blind_until = now + self.cfg.blind;
            self.loss_dropped_in_period = true;
            self.reset_slide(Some(now));
            let b_after = self.b(self.n);
            self.log(
                now,
                from,
                "loss-drop",
                vec![("loss_rate", rate), ("b_before", bn), ("b_after", b_after)],
            );
            self.emptied(now);
        }
    }

    /// When a held low sample is believed without confirmation (`confirm_drop`).
    fn pending_deadline(&self) -> Option<Time> {
        let (t0, _) = self.pending_low?;
        Some(t0 + self.cfg.confirm_drop?)
    }

    fn silence_deadline(&self) -> Option<Time> {
        if self.n == 0 || self.exited {
            return None;
        }
        let last = self.last_packet?;
        Some(
            last + if self.got_packet {
                self.t_nopkt
            } else {
                self.cfg.t_start
            },
        )
    }
}

impl Default for Plm {
    fn default() -> Self {
        Plm::new(PlmConfig::default())
    }
}

impl LayeredController for Plm {
    fn name(&self) -> &'static str {
        "plm"
    }

    fn handle_announcement(&mut self, now: Time, info: &SessionInfo) {
        if self.exited || info.layers.is_empty() {
            return;
        }
        let mut acc = 0.0;
        self.cum = info
            .layers
            .iter()
            .map(|l| {
                acc += l.rate_bps as f64;
                acc
            })
            .collect();
        self.c = self
            .cfg
            .check_period
            .unwrap_or(info.adapt_interval)
            .max(Duration::from_millis(1));
        self.t_nopkt = self.cfg.t_nopkt.unwrap_or_else(|| {
            let l0 = info.layers[0].rate_bps.max(1) as f64;
            let burst = info.bunch_len.max(1) as f64 * 8.0 * info.packet_size as f64 / l0;
            Duration::from_secs_f64((4.0 * burst).max(1.0))
        });
        if self.seq.len() < info.layers.len() {
            self.seq.resize(
                info.layers.len(),
                SeqTracker::with_threshold(self.cfg.max_seq_gap, self.cfg.reorder_threshold),
            );
        }
        while self.n > info.layers.len() {
            self.leave_top();
        }
        let first = self.info.is_none();
        self.info = Some(info.clone());
        if first {
            self.join_base(now, "join-base");
        }
    }

    #[inline]
    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        let k = pkt.layer as usize;
        if k >= self.n || self.exited {
            return; // not held (leave latency) or not joined
        }
        self.last_packet = Some(now);
        self.got_packet = true;
        self.received += 1;
        let ev = self.seq[k].on_seq(pkt.seq);
        match ev {
            SeqEvent::Advance { lost } => self.lost = self.lost.saturating_add(lost),
            SeqEvent::Recovered => self.lost = self.lost.saturating_sub(1),
            _ => {}
        }
        if matches!(ev, SeqEvent::Advance { lost } if lost > 0) {
            // A loss confirms a held low sample (`confirm_drop`): congestion, not a stall.
            if let Some((_, x0)) = self.pending_low {
                self.pp_drop(now, x0, true);
            }
        }
        self.on_loss_accounting(now, ev);
        // A duplicate is no bunch member (reliability review F6; see `Era::handle_packet`).
        if (pkt.layer as usize) < self.n && !matches!(ev, SeqEvent::Duplicate | SeqEvent::TooOld) {
            if let Some(s) = self.bunch.on_packet(pkt) {
                self.on_sample(now, s.rate_bps);
            }
        }
    }

    fn handle_timeout(&mut self, now: Time) {
        if self.exited {
            return;
        }
        if let Some(at) = self.rejoin_at {
            if now >= at && self.n == 0 {
                self.join_base(now, "rejoin");
                return;
            }
        }
        if let Some(at) = self.pending_deadline() {
            if now >= at {
                // No sample came to set the low one aside: believe it.
                if let Some((_, x0)) = self.pending_low {
                    self.pp_drop(now, x0, true);
                }
            }
        }
        let Some(dl) = self.silence_deadline() else {
            return;
        };
        if now < dl {
            return; // spurious
        }
        let from = self.n;
        let bn = self.b(self.n);
        let reason = if self.got_packet {
            "silence-drop"
        } else {
            "start-timeout"
        };
        if self.got_packet {
            self.leave_top();
        } else {
            while self.n > 0 {
                self.leave_top();
            }
        }
        self.last_packet = Some(now);
        let b_after = self.b(self.n);
        self.log(
            now,
            from,
            reason,
            vec![("b_before", bn), ("b_after", b_after)],
        );
        self.emptied(now);
    }

    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        if self.exited {
            return None;
        }
        if let Some(at) = self.rejoin_at {
            return Some((at, TimerReason::Rejoin));
        }
        let silence = self.silence_deadline().map(|t| (t, TimerReason::Silence));
        match (self.pending_deadline(), silence) {
            (Some(p), Some((s, _))) if p < s => Some((p, TimerReason::Other)),
            (Some(p), None) => Some((p, TimerReason::Other)),
            (_, silence) => silence,
        }
    }

    fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    fn stats(&self) -> Stats {
        Stats {
            protocol: "plm",
            layers: self.n as u8,
            subscribed_bps: if self.cum.is_empty() {
                0.0
            } else {
                self.b(self.n)
            },
            estimate_bps: self.last_estimate,
            loss_ratio: self.last_loss_rate,
            rtt_s: None,
            packets_received: self.received,
            packets_lost: self.lost,
            joins: self.joins,
            leaves: self.leaves,
        }
    }

    fn layers(&self) -> u8 {
        self.n as u8
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    fn info() -> SessionInfo {
        let mut s = SessionInfo::equal_layers(30, 10_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
        s.packet_size = 500;
        s
    }

    fn pkt(layer: u8, seq: u64, pos: u8, t: Time) -> PacketArrival {
        PacketArrival {
            layer,
            seq,
            bunch_pos: pos,
            bunch_len: 2,
            size: 500,
            send_time_us: 0,
            recv_time: t,
        }
    }

    /// Feeds one pair on `layer` measuring `rate` bit/s, starting at `t`.
    fn pair(p: &mut Plm, layer: u8, seq: &mut u64, t: Time, rate: f64) {
        p.handle_packet(t, &pkt(layer, *seq, 0, t));
        let t2 = t + Duration::from_secs_f64(8.0 * 500.0 / rate);
        p.handle_packet(t2, &pkt(layer, *seq + 1, 1, t2));
        *seq += 2;
    }

    fn drain(p: &mut Plm) -> Vec<Action> {
        std::iter::from_fn(|| p.poll_action()).collect()
    }

    /// A receiver of [`info`]'s session fed `n` pairs at `rate` on layer 0, one every 32 ms
    /// from 0.1 s; returns it with the next sequence number.
    fn steady(cfg: PlmConfig, n: u64, rate: f64) -> (Plm, u64) {
        let mut p = Plm::new(cfg);
        p.handle_announcement(Time::ZERO, &info());
        let mut s = 0;
        for i in 0..n {
            pair(&mut p, 0, &mut s, Time::from_millis(100 + 32 * i), rate);
        }
        (p, s)
    }

    /// Reliability review F6: a replayed pair whose two packets arrive 100 ms apart reads 40
    /// kbit/s, and a duplicated first packet just before the genuine second one reads as fast
    /// as the attacker likes. Duplicates must not reach the bunch sampler.
    #[test]
    fn duplicates_never_make_a_pair_sample() {
        let (mut p, s) = steady(PlmConfig::default(), 40, 95_000.0);
        let level = p.layers();
        assert!(level > 1, "{level}");
        let t = Time::from_millis(100 + 32 * 40);
        p.handle_packet(t, &pkt(0, s - 2, 0, t));
        let t2 = t + Duration::from_millis(100);
        p.handle_packet(t2, &pkt(0, s - 1, 1, t2));
        assert_eq!(p.layers(), level, "a replayed pair cut the level");
        // A genuine pair whose first packet is duplicated 0.1 ms before its second: the sample
        // must come from the genuine first packet (95 kbit/s), not from the copy.
        let t3 = t2 + Duration::from_millis(20);
        p.handle_packet(t3, &pkt(0, s, 0, t3));
        let gap = Duration::from_secs_f64(8.0 * 500.0 / 95_000.0);
        let dup = t3 + gap - Duration::from_micros(100);
        p.handle_packet(dup, &pkt(0, s, 0, dup));
        p.handle_packet(t3 + gap, &pkt(0, s + 1, 1, t3 + gap));
        let d: Vec<Decision> = std::iter::from_fn(|| p.poll_decision()).collect();
        let samples: Vec<f64> = d
            .iter()
            .flat_map(|d| d.inputs.iter())
            .filter(|(k, _)| *k == "pp_sample")
            .map(|(_, v)| *v)
            .collect();
        assert!(samples.iter().all(|&x| x < 200_000.0), "{samples:?}");
        assert_eq!(p.layers(), level);
    }

    #[test]
    fn add_at_most_once_per_c_from_min_of_window() {
        let mut p = Plm::default();
        p.handle_announcement(Time::ZERO, &info());
        assert_eq!(drain(&mut p), vec![Action::Join(0)]);
        let mut s = 0;
        // Samples of 95 kbit/s every 100 ms on layer 0; the first sets T_c = 0.1 + 1.
        for i in 0..12u64 {
            pair(
                &mut p,
                0,
                &mut s,
                Time::from_millis(100 + 100 * i),
                95_000.0,
            );
        }
        // The add fires at the first sample after T_c = 1.1 s, i.e. at 1.2 s: strict → 9
        // layers (90k < 95k), not 10 (100k).
        assert_eq!(p.layers(), 9);
        let d: Vec<Decision> = std::iter::from_fn(|| p.poll_decision()).collect();
        let adds: Vec<&Decision> = d.iter().filter(|d| d.reason == "pp-add").collect();
        assert_eq!(adds.len(), 1);
        assert!(adds[0].at > Time::from_millis(1100) && adds[0].at < Time::from_millis(1300));
    }

    /// plm/E4 run 5: a third session starts and is backlogged only part of the time, so the
    /// pairs alternate between the new share (200 kbit/s) and the old (300). The first low one
    /// is set aside, the next low one within C is believed at once.
    #[test]
    fn confirm_drop_believes_lows_that_recur_within_c() {
        let mut i20 = SessionInfo::equal_layers(17, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
        i20.packet_size = 500;
        let mut p = Plm::new(PlmConfig::confirming());
        p.handle_announcement(Time::ZERO, &i20);
        let mut s = 0;
        let mut drop_at = None;
        for i in 0..200u64 {
            let t = Time::from_millis(100 + 30 * i);
            // 14 layers (280k) on a 300k share; from 3.1 s every 4th pair reads 200k
            let rate = if i >= 100 && i % 4 == 0 {
                200_000.0
            } else {
                300_000.0
            };
            pair(&mut p, 0, &mut s, t, rate);
            if drop_at.is_none() && i >= 100 && p.layers() < 14 {
                drop_at = Some(t);
            }
        }
        assert_eq!(p.set_aside(), 1);
        assert_eq!(drop_at, Some(Time::from_millis(100 + 30 * 104)));
        assert_eq!(p.layers(), 9); // B[9] = 180k < 200k
    }

    /// plm/S3, plm/E4: the share rises just after a check (the CBR flows leave the fair
    /// queue). The paper's rule restarts W at every check, so the next check's minimum still
    /// holds a sample of the old share and the add waits one more C; the sliding rule adds C
    /// after the last low sample.
    #[test]
    fn sliding_check_adds_one_c_after_the_share_rises() {
        let mut info = SessionInfo::equal_layers(17, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
        info.packet_size = 500;
        // Samples every 50 ms: 100 kbit/s (4 layers) until `rise`, then 200 kbit/s.
        let run = |sliding_check: bool, rise_ms: u64| {
            let mut p = Plm::new(PlmConfig {
                sliding_check,
                ..PlmConfig::default()
            });
            p.handle_announcement(Time::ZERO, &info);
            let mut s = 0;
            let mut up_at = None;
            let mut checks = Vec::new();
            for i in 0..120u64 {
                let t = Time::from_millis(100 + 50 * i);
                let rate = if t.as_nanos() < rise_ms * 1_000_000 {
                    100_000.0
                } else {
                    200_000.0
                };
                // Hold every layer the controller wants, so each held layer's pairs count.
                pair(&mut p, 0, &mut s, t, rate);
                while let Some(d) = p.poll_decision() {
                    if d.reason == "pp-add" {
                        checks.push(d.at);
                    }
                }
                if up_at.is_none() && p.layers() >= 9 {
                    up_at = Some(t);
                }
            }
            (up_at, checks)
        };
        // The first check (at the first sample after 0.15 + 1 s) adds 1 -> 4; the next check
        // comes at ~2.2 s. The share rises 0.05 s after it.
        let (_, checks) = run(false, 10_000);
        assert!(checks.len() >= 2, "{checks:?}");
        let rise = checks[1].as_nanos() / 1_000_000 + 50;
        let (paper, _) = run(false, rise);
        let (sliding, _) = run(true, rise);
        let rise_t = Time::from_millis(rise);
        let paper = paper.expect("paper rule adds eventually") - rise_t;
        let sliding = sliding.expect("sliding rule adds") - rise_t;
        // Paper: the check at rise + C - 0.05 s still sees the old share, the add comes 2C
        // after the previous check. Sliding: C after the last 100 kbit/s sample.
        assert!(paper > Duration::from_millis(1800), "paper rule {paper:?}");
        assert!(
            sliding <= Duration::from_millis(1050),
            "sliding rule {sliding:?}"
        );
        assert!(
            sliding >= Duration::from_millis(950),
            "sliding rule {sliding:?}"
        );
    }

    /// The sliding rule never adds on less than a full C of samples, nor twice within C, nor
    /// while a sample of the last C is below the next cumulative rate.
    #[test]
    fn sliding_check_keeps_adds_c_apart_and_on_a_full_c() {
        let mut info = SessionInfo::equal_layers(30, 10_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
        info.packet_size = 500;
        let mut p = Plm::new(PlmConfig {
            sliding_check: true,
            ..PlmConfig::default()
        });
        p.handle_announcement(Time::ZERO, &info);
        let mut s = 0;
        let mut adds = Vec::new();
        // 95 kbit/s with a 152 kbit/s sample every 0.3 s (9 layers; the minimum of any C is
        // 95k, so nothing is ever added after the first add).
        for i in 0..200u64 {
            let t = Time::from_millis(100 + 50 * i);
            let rate = if i % 6 == 0 { 152_000.0 } else { 95_000.0 };
            pair(&mut p, 0, &mut s, t, rate);
            while let Some(d) = p.poll_decision() {
                if d.reason == "pp-add" && d.to_layers > d.from_layers {
                    adds.push(d.at);
                }
            }
        }
        assert_eq!(adds.len(), 1, "{adds:?}");
        assert_eq!(p.layers(), 9);
    }

    /// plm/E2 R1 on the testbed: 25 layers (250 kbit/s) behind a 256 kbit/s link, one pair in
    /// a few hundred stretched by 0.4 ms (249.6 kbit/s), and now and then two in a row. The
    /// paper's rule drops on each and re-adds one check later; the live rule sets them aside.
    /// A real fall of the share (every following pair low) drops 200 ms after its first
    /// sample, and a lone low sample with nothing after it is believed after 200 ms.
    #[test]
    fn confirm_drop_sets_a_lone_stretched_pair_aside() {
        let run = |cfg: PlmConfig| {
            let mut p = Plm::new(cfg);
            p.handle_announcement(Time::ZERO, &info());
            let mut s = 0;
            let mut changes = 0;
            // 256 kbit/s pairs every 32 ms for 30 s, one at 249.6k every 4 s after 5 s.
            for i in 0..940u64 {
                let t = Time::from_millis(100 + 32 * i);
                let rate = if i > 150 && (i % 125 == 0 || i % 250 == 1) {
                    249_600.0
                } else {
                    256_000.0
                };
                let before = p.layers();
                pair(&mut p, 0, &mut s, t, rate);
                if p.layers() != before && t > Time::from_millis(3000) {
                    changes += 1;
                }
            }
            (p.layers(), changes, p.set_aside())
        };
        let (n, changes, aside) = run(PlmConfig::default());
        assert_eq!(n, 25);
        assert!(changes >= 10, "paper rule: {changes} changes");
        assert_eq!(aside, 0);
        let (n, changes, aside) = run(PlmConfig::confirming());
        assert_eq!((n, changes), (25, 0));
        assert_eq!(aside, 6); // 3 of the 6 runs are two pairs long

        // The share falls to 57 kbit/s at 10 s: the live rule drops at the second low pair.
        let mut p = Plm::new(PlmConfig::confirming());
        p.handle_announcement(Time::ZERO, &info());
        let mut s = 0;
        let mut dropped_at = None;
        for i in 0..400u64 {
            let t = Time::from_millis(100 + 32 * i);
            let rate = if t < Time::from_millis(10_000) {
                256_000.0
            } else {
                57_000.0
            };
            pair(&mut p, 0, &mut s, t, rate);
            if dropped_at.is_none() && t >= Time::from_millis(10_000) && p.layers() == 5 {
                dropped_at = Some(t);
            }
        }
        let first_low = Time::from_millis(100 + 32 * 310); // 10.02 s
        assert_eq!(dropped_at, Some(first_low + Duration::from_millis(7 * 32)));

        // A lone low sample and then silence: believed 200 ms later by the timer.
        let (mut p, mut s) = steady(PlmConfig::confirming(), 100, 256_000.0);
        assert_eq!(p.layers(), 25);
        let t = Time::from_millis(100 + 32 * 100);
        pair(&mut p, 0, &mut s, t, 200_000.0);
        assert_eq!(p.layers(), 25);
        let (at, _) = p.poll_timeout().unwrap();
        let sample_t = t + Duration::from_secs_f64(8.0 * 500.0 / 200_000.0);
        assert_eq!(at, sample_t + Duration::from_millis(200));
        p.handle_timeout(at - Duration::from_millis(1));
        assert_eq!(p.layers(), 25);
        p.handle_timeout(at);
        assert_eq!(p.layers(), 19); // B[19] = 190k < 200k

        // A loss confirms a held low sample as soon as it counts: when the third packet
        // after it arrives (`REORDER_THRESHOLD`; fewer could be reordering).
        let (mut p, mut s) = steady(PlmConfig::confirming(), 100, 256_000.0);
        let t = Time::from_millis(100 + 32 * 100);
        pair(&mut p, 0, &mut s, t, 200_000.0);
        assert_eq!(p.layers(), 25);
        s += 1; // one packet of layer 0 lost
        for k in 0..3 {
            let t2 = t + Duration::from_millis(30 + k);
            assert_eq!(p.layers(), 25);
            p.handle_packet(t2, &pkt(0, s + k, 0, t2));
        }
        assert_eq!(p.layers(), 19);

        // plm/E4: a share equal to B[15] (300 kbit/s, 20 kbit/s layers) read with timestamp
        // noise, 299.9 / 300.1 kbit/s alternating: samples within the tolerance of B[n] do not
        // set the low ones aside, so the strict rule still settles at 14.
        let mut i20 = SessionInfo::equal_layers(17, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
        i20.packet_size = 500;
        let mut p = Plm::new(PlmConfig::confirming());
        p.handle_announcement(Time::ZERO, &i20);
        let mut s = 0;
        for i in 0..100u64 {
            let t = Time::from_millis(100 + 30 * i);
            let rate = if i < 40 {
                305_000.0
            } else if i % 2 == 0 {
                299_900.0
            } else {
                300_100.0
            };
            pair(&mut p, 0, &mut s, t, rate);
        }
        assert_eq!(p.layers(), 14);
        assert_eq!(p.set_aside(), 0);

        // Right after an add a low sample is the add overshooting: dropped at once.
        let mut p = Plm::new(PlmConfig::confirming());
        p.handle_announcement(Time::ZERO, &i20);
        let mut s = 0;
        let mut t = Time::ZERO;
        for i in 0..12u64 {
            t = Time::from_millis(100 + 100 * i);
            pair(&mut p, 0, &mut s, t, 600_000.0);
        }
        assert_eq!(p.layers(), 17); // 340 kbit/s on a 600-kbit/s reading
        pair(&mut p, 0, &mut s, t + Duration::from_millis(50), 300_000.0);
        assert_eq!(p.layers(), 14);
        // A drop does not restart that grace: 17 held for C, the share falls to 300 kbit/s
        // (a 200-ms run, then 14), and a lone stretched pair 0.3 s later is set aside (E4 run
        // 4: 15 -> 14 -> 12 on one 258-kbit/s pair 0.4 s after a drop, when a drop still
        // restarted the grace period).
        let mut p = Plm::new(PlmConfig::confirming());
        p.handle_announcement(Time::ZERO, &i20);
        let mut s = 0;
        let mut dropped = None;
        for i in 0..120u64 {
            let t = Time::from_millis(100 + 30 * i);
            let rate = match i {
                0..=79 => 600_000.0, // 17 layers from the first check (1.2 s)
                95 => 258_000.0,     // 0.3 s after the drop
                _ => 300_000.0,      // from 2.5 s
            };
            pair(&mut p, 0, &mut s, t, rate);
            if dropped.is_none() && i >= 80 && p.layers() < 17 {
                dropped = Some(t);
            }
        }
        assert!(
            dropped.is_some_and(|d| d >= Time::from_millis(2600)),
            "{dropped:?}"
        );
        assert_eq!(p.layers(), 14);
        assert_eq!(p.set_aside(), 1);
    }

    /// plm.md E2 measures convergence from the first PP: every add decision carries the age
    /// of the first sample since the base join, and a re-join starts it afresh.
    #[test]
    fn add_decisions_carry_the_first_pp_age() {
        let mut p = Plm::default();
        p.handle_announcement(Time::ZERO, &info());
        let mut s = 0;
        let rate = 95_000.0;
        let gap = Duration::from_secs_f64(8.0 * 500.0 / rate);
        // The first pair starts at 0.3 s (a receiver waits for the layer's next pair).
        for i in 0..25u64 {
            pair(&mut p, 0, &mut s, Time::from_millis(300 + 100 * i), rate);
        }
        let d: Vec<Decision> = std::iter::from_fn(|| p.poll_decision()).collect();
        let adds: Vec<&Decision> = d.iter().filter(|d| d.reason == "pp-add").collect();
        assert_eq!(adds.len(), 2, "{d:?}");
        let first_sample = Time::from_millis(300) + gap;
        for a in &adds {
            let age = a
                .inputs
                .iter()
                .find(|(k, _)| *k == "first_pp_age_s")
                .map(|(_, v)| *v)
                .unwrap();
            let want = (a.at - first_sample).as_secs_f64();
            assert!((age - want).abs() < 1e-9, "{age} vs {want}");
        }
        // The first add comes one C after the first sample (1.1 s: the first sample after T_c).
        assert!((adds[0].at - first_sample) > Duration::from_secs(1));
        assert!((adds[0].at - first_sample) < Duration::from_millis(1150));
    }

    /// plm/E4 on the testbed: a 100 kbit/s share (20 kbit/s layers) measured with ±0.02 %
    /// timestamp noise. The exact comparisons add the 5th layer (100 kbit/s) whenever a window's
    /// minimum lands above 100 kbit/s and drop it at the next sample below; with the tolerance
    /// the level stays at 4. And a drop loop on a sample just above a cumulative rate stops
    /// below it, not at it.
    #[test]
    fn tolerance_keeps_strict_below_an_exact_share_under_timestamp_noise() {
        let mut info = SessionInfo::equal_layers(17, 20_000, Ipv4Addr::new(239, 0, 0, 1), 5000);
        info.packet_size = 500;
        let run = |tolerance: f64| {
            let mut p = Plm::new(PlmConfig {
                tolerance,
                ..PlmConfig::default()
            });
            p.handle_announcement(Time::ZERO, &info);
            let mut s = 0;
            let mut x: u64 = 0x853c_49e6_748f_ea9b;
            let mut changes = 0;
            let mut last = 0;
            for i in 0..600u64 {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let u = (x >> 11) as f64 / (1u64 << 53) as f64;
                // Share 100 kbit/s; as on the testbed most samples read a little above it
                // (+0.002-0.02 %) and one in ten a little below (-0.01 %), so the minimum of a
                // window of 10 is above the share about a third of the time.
                let rate = if u < 0.1 {
                    100_000.0 * (1.0 - 0.0001)
                } else {
                    100_000.0 * (1.0 + 0.0002 * u)
                };
                pair(&mut p, 0, &mut s, Time::from_millis(100 + 100 * i), rate);
                if i > 20 && p.layers() != last {
                    changes += 1;
                }
                last = p.layers();
            }
            (p.layers(), changes)
        };
        let (lvl0, ch0) = run(0.0);
        assert!(ch0 >= 4, "exact comparisons: {ch0} changes at level {lvl0}");
        let (lvl, ch) = run(0.005);
        assert_eq!((lvl, ch), (4, 0));
        // Drop loop: at 14 layers (280k) a sample of 200.67 kbit/s (share 200k + noise) must
        // leave 9 layers (180k), not 10 (= the share).
        let mut p = Plm::default();
        p.handle_announcement(Time::ZERO, &info);
        let mut s = 0;
        for i in 0..12u64 {
            pair(
                &mut p,
                0,
                &mut s,
                Time::from_millis(100 + 100 * i),
                290_000.0,
            );
        }
        assert_eq!(p.layers(), 14);
        let mut s1 = 0;
        pair(&mut p, 1, &mut s1, Time::from_millis(1300), 200_670.0);
        assert_eq!(p.layers(), 9);
    }

    #[test]
    fn strict_vs_permissive_at_exact_share() {
        for (permissive, want) in [(false, 9u8), (true, 10)] {
            let mut p = Plm::new(PlmConfig {
                permissive,
                ..PlmConfig::default()
            });
            p.handle_announcement(Time::ZERO, &info());
            let mut s = 0;
            for i in 0..15u64 {
                // 8·500 / 40 ms = 100 kbit/s exactly = B[10].
                let t = Time::from_millis(100 + 100 * i);
                p.handle_packet(t, &pkt(0, s, 0, t));
                let t2 = t + Duration::from_millis(40);
                p.handle_packet(t2, &pkt(0, s + 1, 1, t2));
                s += 2;
            }
            assert_eq!(p.layers(), want, "permissive={permissive}");
        }
    }

    #[test]
    fn single_low_sample_drops_until_below_it() {
        let mut p = Plm::default();
        p.handle_announcement(Time::ZERO, &info());
        let mut s = 0;
        for i in 0..12u64 {
            pair(
                &mut p,
                0,
                &mut s,
                Time::from_millis(100 + 100 * i),
                250_000.0,
            );
        }
        assert_eq!(p.layers(), 24); // 240k < 250k
        drain(&mut p);
        let mut s1 = 0;
        pair(&mut p, 3, &mut s1, Time::from_millis(1300), 57_000.0);
        assert_eq!(p.layers(), 5); // B[5] = 50k < 57k
        let acts = drain(&mut p);
        assert_eq!(acts.len(), 19);
        assert_eq!(acts[0], Action::Leave(23));
        assert_eq!(*acts.last().unwrap(), Action::Leave(5));
    }

    #[test]
    fn loss_fallback_with_blind_period() {
        // Every pair loses its second packet: no PP, 50% loss ⇒ one layer per ≥ 0.5 s.
        let mut p = Plm::default();
        p.handle_announcement(Time::ZERO, &info());
        let mut s = 0;
        for i in 0..12u64 {
            pair(
                &mut p,
                0,
                &mut s,
                Time::from_millis(100 + 100 * i),
                200_000.0,
            );
        }
        assert_eq!(p.layers(), 19);
        drain(&mut p);
        let mut seq = vec![0u64; 30];
        let mut drops = Vec::new();
        for i in 0..400u64 {
            let t = Time::from_millis(1300 + 10 * i);
            let l = (i % 5) as u8; // layers 0..4 stay held throughout
            let sq = &mut seq[l as usize];
            p.handle_packet(t, &pkt(l, *sq, 0, t));
            *sq += 2; // partner lost
            for a in drain(&mut p) {
                drops.push((t, a));
            }
        }
        assert!(drops.len() >= 4, "{drops:?}");
        for w in drops.windows(2) {
            assert!(w[1].0 - w[0].0 >= Duration::from_millis(500), "{drops:?}");
        }
        assert!(drops.iter().all(|(_, a)| matches!(a, Action::Leave(_))));
    }

    /// Loss-drops of a receiver held at 10 layers for 60 s: layer 0 carries a loss-free pair
    /// every 100 ms measuring 105 kbit/s (so an add decision, which keeps the level and resets
    /// the loss cycle as ns-2 does, comes once per C, as on the testbed), layer 1 single
    /// packets at 100/s each lost with probability `p_loss` (a fixed LCG stream).
    fn loss_drops_at(cfg: PlmConfig, p_loss: f64) -> Vec<Time> {
        let mut p = Plm::new(cfg);
        p.handle_announcement(Time::ZERO, &info());
        let mut s = 0;
        for i in 0..12u64 {
            pair(
                &mut p,
                0,
                &mut s,
                Time::from_millis(100 + 100 * i),
                105_000.0,
            );
        }
        assert_eq!(p.layers(), 10);
        drain(&mut p);
        let _ = std::iter::from_fn(|| p.poll_decision()).count();
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let mut drops = Vec::new();
        for i in 0..6000u64 {
            let t = Time::from_millis(1300 + 10 * i);
            if i % 10 == 0 {
                pair(&mut p, 0, &mut s, t, 105_000.0);
            }
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            if u >= p_loss && p.layers() >= 2 {
                let t1 = t + Duration::from_millis(5);
                let mut a = pkt(1, i, 0, t1); // layer 1's sequence: one per slot
                a.bunch_len = 1;
                p.handle_packet(t1, &a);
            }
        }
        for d in std::iter::from_fn(|| p.poll_decision()) {
            if d.reason == "loss-drop" {
                drops.push(d.at);
            }
        }
        drops
    }

    #[test]
    fn loss_rule_ignores_five_percent_and_acts_on_twenty() {
        // plm/E10 on the testbed: at 5 % random loss (< the 10 % threshold) the ns-2 cycle as
        // first built (the opening loss counted, point estimate) dropped a layer every few
        // seconds. The sensitivity check: that rule does fire here, so the stream can show it.
        let old = PlmConfig {
            loss_confidence_z: 0.0,
            ..PlmConfig::default()
        };
        let old_drops = loss_drops_at(old, 0.05);
        assert!(old_drops.len() >= 5, "{old_drops:?}");
        let drops = loss_drops_at(PlmConfig::default(), 0.05);
        assert!(drops.len() <= 1, "5 % loss: {drops:?}");
        // Above the threshold it still drops, one layer per >= 0.5 s.
        let d20 = loss_drops_at(PlmConfig::default(), 0.20);
        assert!(d20.len() >= 5, "20 % loss: {d20:?}");
        for w in d20.windows(2) {
            assert!(w[1] - w[0] >= Duration::from_millis(500), "{d20:?}");
        }
    }

    /// The plm/S8 lock-in in miniature: a share of 105 kbit/s (10 layers). For the first 1.5 s
    /// the pairs read 200 kbit/s with no loss (the competing flow idle), so PLM climbs to 19.
    /// From then on, while it holds more than 10 layers it overloads its own queue: single
    /// packets on layer 1 are lost with probability `p_loss` and the pairs that survive read the
    /// link rate (200 kbit/s, survivor bias); at 10 layers or fewer nothing is lost and the
    /// pairs read the share. Returns the level after 20 s.
    fn level_after_overload(cfg: PlmConfig, p_loss: f64) -> u8 {
        let mut p = Plm::new(cfg);
        p.handle_announcement(Time::ZERO, &info());
        let mut s = 0;
        for i in 0..12u64 {
            pair(
                &mut p,
                0,
                &mut s,
                Time::from_millis(100 + 100 * i),
                105_000.0,
            );
        }
        assert_eq!(p.layers(), 10);
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        for i in 0..2000u64 {
            let t = Time::from_millis(1300 + 10 * i);
            let over = i < 150 || p.layers() > 10;
            if i % 10 == 0 {
                pair(
                    &mut p,
                    0,
                    &mut s,
                    t,
                    if over { 200_000.0 } else { 105_000.0 },
                );
            }
            if i == 150 {
                assert_eq!(p.layers(), 19);
            }
            x = x
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1_442_695_040_888_963_407);
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            let lost = i >= 150 && p.layers() > 10 && u < p_loss;
            if !lost && p.layers() >= 2 {
                let t1 = t + Duration::from_millis(5);
                let mut a = pkt(1, i, 0, t1); // layer 1's sequence: one per slot
                a.bunch_len = 1;
                p.handle_packet(t1, &a);
            }
        }
        p.layers()
    }

    #[test]
    fn no_add_while_the_loss_cycle_is_above_threshold() {
        // ns-2's rule: each add on the survivor-biased pairs undoes the loss-drops: locked in
        // above the share for the whole run.
        let ns2 = PlmConfig {
            no_add_while_lossy: false,
            ..PlmConfig::default()
        };
        let locked = level_after_overload(ns2, 0.4);
        assert!(locked >= 17, "ns-2 rule: level {locked}");
        // With the rule the loss-drops win, PLM gets back under its share and stays there.
        let lvl = level_after_overload(PlmConfig::default(), 0.4);
        assert_eq!(lvl, 10);
    }

    #[test]
    fn silence_drops_one_layer_per_timeout_then_rejoins() {
        let mut p = Plm::default();
        p.handle_announcement(Time::ZERO, &info());
        let mut s = 0;
        for i in 0..12u64 {
            pair(
                &mut p,
                0,
                &mut s,
                Time::from_millis(100 + 100 * i),
                32_000.0,
            );
        }
        assert_eq!(p.layers(), 3);
        drain(&mut p);
        // Base layer 10 kbit/s, 500-B pairs: burst interval 0.8 s ⇒ T_nopkt = 3.2 s.
        assert_eq!(p.silence_timeout(), Duration::from_millis(3200));
        let mut now = Time::from_millis(1200);
        let mut seen = Vec::new();
        for _ in 0..4 {
            let (t, _) = p.poll_timeout().unwrap();
            assert!(t > now);
            now = t;
            p.handle_timeout(now);
            seen.extend(drain(&mut p));
        }
        assert_eq!(
            seen,
            vec![
                Action::Leave(2),
                Action::Leave(1),
                Action::Leave(0),
                Action::Join(0)
            ]
        );
        let d: Vec<Decision> = std::iter::from_fn(|| p.poll_decision()).collect();
        let last = d.last().unwrap();
        assert_eq!(last.reason, "rejoin");
        // 30 s after the base layer went.
        let gone = d.iter().rev().find(|d| d.to_layers == 0).unwrap().at;
        assert_eq!(last.at - gone, Duration::from_secs(30));
    }

    #[test]
    fn start_timeout_and_exit_option() {
        let mut p = Plm::new(PlmConfig {
            exit_on_empty: true,
            ..PlmConfig::default()
        });
        p.handle_announcement(Time::from_secs_f64(2.0), &info());
        assert_eq!(
            p.poll_timeout(),
            Some((Time::from_secs_f64(7.0), TimerReason::Silence))
        );
        p.handle_timeout(Time::from_secs_f64(6.0)); // spurious
        assert_eq!(drain(&mut p), vec![Action::Join(0)]);
        p.handle_timeout(Time::from_secs_f64(7.0));
        assert_eq!(drain(&mut p), vec![Action::Leave(0), Action::Exit]);
        assert_eq!(p.poll_timeout(), None);
    }
}
