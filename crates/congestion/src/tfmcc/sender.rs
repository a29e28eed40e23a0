//! TFMCC sender (RFC 4654 §3, dissertation §7.2–7.4; spec §2.6–2.8, §2.12).

use super::{ts_diff_s, TfmccConfig};
use crate::error::Result;
use crate::time::Time;
use crate::wire::tfmcc::{Echo, TfmccDataFields, TfmccReport, RATE_INFINITE};
use crate::wire::tfrc::{decode_p, sat_u32};
use std::collections::VecDeque;
use std::time::Duration;

/// Per-round feedback statistics (the spec's "feedback messages per round").
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RoundSummary {
    /// Round number.
    pub round: u16,
    /// When it started and how long it lasted, seconds.
    pub start_s: f64,
    pub duration_s: f64,
    /// Reports for this round from receivers that were not the CLR.
    pub non_clr_reports: u32,
    /// Reports from the CLR during the round.
    pub clr_reports: u32,
    /// Lowest rate reported in the round, bytes/s.
    pub min_rate: f64,
}

/// A snapshot of the sender (feeds Prometheus and the dashboard).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TfmccSenderStats {
    /// Current rate, bit/s.
    pub rate_bps: f64,
    /// The CLR's ID.
    pub clr: Option<u32>,
    /// The CLR's last (corrected) rate, bit/s.
    pub clr_rate_bps: Option<f64>,
    /// Second-lowest rate reported in the last completed round, bit/s (spec §2.10).
    pub second_lowest_bps: Option<f64>,
    /// Current round and `R_max` (s).
    pub round: u16,
    pub r_max_s: f64,
    /// In slow start.
    pub slow_start: bool,
    /// Reports accepted since start, and in the last completed round (non-CLR / CLR).
    pub reports_total: u64,
    pub last_round: RoundSummary,
    /// Reports that failed to parse.
    pub malformed_reports: u64,
}

#[derive(Clone, Copy, Debug)]
struct Clr {
    id: u32,
    rate: f64,
    last_heard: Time,
    selected_at: Time,
    leaving: bool,
    have_rtt: bool,
    /// Feedback delay T when the CLR last reported (its timeout is 10 T from then; T must
    /// not stretch while the rate is being cut for the CLR's silence).
    t_at_heard: f64,
    /// The rate was already halved for the current silence (RFC 4654 §3.3: once).
    halved_for_silence: bool,
}

#[derive(Clone, Copy, Debug)]
struct PendingEcho {
    rid: u32,
    ts_us: u32,
    arrived: Time,
    /// 1 = new CLR or CLR without RTT, 2 = no RTT, 3 = non-CLR with RTT, 4 = CLR.
    class: u8,
    round: u16,
    rate: f64,
    have_rtt: bool,
}

/// The TFMCC sender.
#[derive(Clone, Debug)]
pub struct TfmccSender {
    cfg: TfmccConfig,
    s: f64,
    x: f64,
    /// Where X is heading (CLR's rate; slow-start target).
    x_target: f64,
    /// Outside slow start: the capped increase towards `x_target` has been accrued up to this
    /// time (see [`TfmccSender::advance`]).
    last_increase: Time,
    /// The last report came from the CLR (not leaving), which reports every RTT: silence
    /// then means the reports are not getting through (see `nofb_period`).
    last_fb_from_clr: bool,
    r_max: f64,
    r_peak: f64,
    saw_higher_rtt: bool,
    slow_start: bool,
    /// Slow-start ramp: X goes from `ramp_from` to `x_target` over one `R_max` from `ramp_at`.
    ramp_from: f64,
    ramp_at: Time,
    /// Last time the ramp was evaluated (its timer is relative to this).
    ramp_tick: Time,
    clr: Option<Clr>,
    /// No increase until this time (after a CLR left, RFC 4654 §3.3 case 3).
    hold_increase_until: Time,
    round: u16,
    round_start: Time,
    saw_non_clr: bool,
    x_supp: f64,
    supp_from_loss: bool,
    cur: RoundSummary,
    /// The two lowest rates reported in the current round (only the second lowest is used,
    /// so a flood of reports in one round costs no memory: F18).
    lowest_two: [f64; 2],
    second_lowest: Option<f64>,
    rounds: VecDeque<RoundSummary>,
    last_any_feedback: Time,
    nofb_halved_at: Time,
    pending: Vec<PendingEcho>,
    clr_echo: Option<(u32, u32, Time)>,
    clr_echoed_in_round: bool,
    seq: u32,
    started: bool,
    reports_total: u64,
    malformed: u64,
}

/// Outside slow start X climbs at `INCREASE_SLOPE` times the cap of one packet per `R_max`
/// per `R_max`, in steps at least every `R_max / INCREASE_TICKS`. A window of one `R_max`
/// that starts just after a step can hold the accrual of `R_max + R_max / INCREASE_TICKS`
/// of time; running at `INCREASE_TICKS / (INCREASE_TICKS + 1)` of the cap keeps every such
/// window within the cap (spec S27/S28/E15: "slope <= 1 packet / R_max per R_max").
const INCREASE_TICKS: f64 = 16.0;
const INCREASE_SLOPE: f64 = INCREASE_TICKS / (INCREASE_TICKS + 1.0);
/// Most reports waiting for an echo; beyond it the lowest-priority entry is dropped.
const MAX_PENDING_ECHOES: usize = 256;
/// Round summaries kept for [`TfmccSender::round_log`].
const ROUND_LOG: usize = 1024;

impl TfmccSender {
    /// A sender starting at one packet per initial `R_max`, in slow start.
    pub fn new(cfg: TfmccConfig) -> Self {
        let s = cfg.packet_size.max(1) as f64;
        let r_max = cfg.initial_rtt.max(1e-3);
        let x = s / r_max;
        TfmccSender {
            cfg,
            s,
            x,
            x_target: x,
            last_increase: Time::ZERO,
            last_fb_from_clr: false,
            r_max,
            r_peak: 0.0,
            saw_higher_rtt: false,
            slow_start: true,
            ramp_from: x,
            ramp_at: Time::ZERO,
            ramp_tick: Time::ZERO,
            clr: None,
            hold_increase_until: Time::ZERO,
            round: 0,
            round_start: Time::ZERO,
            saw_non_clr: false,
            x_supp: f64::INFINITY,
            supp_from_loss: false,
            cur: RoundSummary {
                min_rate: f64::INFINITY,
                ..Default::default()
            },
            lowest_two: [f64::INFINITY; 2],
            second_lowest: None,
            rounds: VecDeque::new(),
            last_any_feedback: Time::ZERO,
            nofb_halved_at: Time::ZERO,
            pending: Vec::new(),
            clr_echo: None,
            clr_echoed_in_round: false,
            seq: 0,
            started: false,
            reports_total: 0,
            malformed: 0,
        }
    }

    fn start(&mut self, now: Time) {
        if !self.started {
            self.started = true;
            self.round_start = now;
            self.last_any_feedback = now;
            self.nofb_halved_at = now;
            self.ramp_at = now;
            self.last_increase = now;
        }
    }

    fn min_rate(&self) -> f64 {
        self.s / self.cfg.min_rate_interval_s.max(1e-3)
    }

    fn secs(v: f64) -> Duration {
        Duration::from_secs_f64(if v.is_finite() {
            v.clamp(0.0, 1e7)
        } else {
            1e7
        })
    }

    /// Feedback round duration `T`, seconds.
    pub fn feedback_round_s(&self) -> f64 {
        self.cfg.feedback_round(self.r_max, self.x, self.s)
    }

    /// Brings X up to `now` (the slow-start ramp or the capped increase) without sending
    /// anything. Every input already does this; a host that reads [`TfmccSender::stats`] for
    /// a timed snapshot calls it first, so the rate it shows belongs to that instant (the
    /// testbed's E15 check times increases over one `R_max` from such snapshots).
    pub fn advance_to(&mut self, now: Time) {
        if self.started {
            self.advance(now);
        }
    }

    /// Current rate in **bit/s**.
    pub fn poll_rate(&self) -> f64 {
        8.0 * self.x
    }

    /// Current rate in bytes/s.
    pub fn rate_bytes(&self) -> f64 {
        self.x
    }

    /// Current `R_max`, seconds.
    pub fn r_max(&self) -> f64 {
        self.r_max
    }

    /// Completed rounds, oldest first (bounded).
    pub fn round_log(&self) -> impl Iterator<Item = &RoundSummary> {
        self.rounds.iter()
    }

    /// Stats snapshot.
    pub fn stats(&self) -> TfmccSenderStats {
        TfmccSenderStats {
            rate_bps: 8.0 * self.x,
            clr: self.clr.map(|c| c.id),
            clr_rate_bps: self.clr.map(|c| 8.0 * c.rate),
            second_lowest_bps: self.second_lowest.map(|r| 8.0 * r),
            round: self.round,
            r_max_s: self.r_max,
            slow_start: self.slow_start,
            reports_total: self.reports_total,
            last_round: self.rounds.back().copied().unwrap_or_default(),
            malformed_reports: self.malformed,
        }
    }

    /// The fields for the next data packet, sent at `now`. Picks the echo (spec §2.8,
    /// RFC 4654 §3.5) and adds the hold time to the echoed timestamp.
    pub fn data_header(&mut self, now: Time) -> TfmccDataFields {
        self.start(now);
        self.advance(now);
        let echo = self.pick_echo(now);
        let f = TfmccDataFields {
            seq: self.seq,
            ts_us: now.as_micros() as u32,
            round: self.round,
            slow_start: self.slow_start,
            supp_from_loss: self.supp_from_loss,
            max_rtt_us: sat_u32(self.r_max * 1e6),
            x_supp: if self.x_supp.is_finite() {
                sat_u32(self.x_supp).min(RATE_INFINITE - 1)
            } else {
                RATE_INFINITE
            },
            x_send: sat_u32(self.x).max(1),
            echo,
        };
        self.seq = self.seq.wrapping_add(1);
        f
    }

    fn pick_echo(&mut self, now: Time) -> Option<Echo> {
        let clr_id = self.clr.map(|c| c.id);
        // The CLR must be echoed at least once per round even if others crowd it out.
        let force_clr = !self.clr_echoed_in_round
            && self.clr_echo.is_some()
            && now - self.round_start >= Self::secs(self.feedback_round_s() / 2.0);
        let best = if force_clr {
            None
        } else {
            self.pending
                .iter()
                .enumerate()
                .min_by(|(_, a), (_, b)| {
                    a.class
                        .cmp(&b.class)
                        .then_with(|| {
                            // Older round first (modular).
                            let da = self.round.wrapping_sub(a.round);
                            let db = self.round.wrapping_sub(b.round);
                            db.cmp(&da)
                        })
                        .then_with(|| a.rate.total_cmp(&b.rate))
                })
                .map(|(i, _)| i)
        };
        if let Some(i) = best {
            let e = self.pending.swap_remove(i);
            let hold = (now - e.arrived).as_micros() as u32;
            if Some(e.rid) == clr_id {
                self.clr_echoed_in_round = true;
            }
            return Some(Echo {
                rid: e.rid,
                ts_us: e.ts_us.wrapping_add(hold),
                is_clr: Some(e.rid) == clr_id,
            });
        }
        let (rid, ts, arrived) = self.clr_echo?;
        if Some(rid) != clr_id {
            return None;
        }
        self.clr_echoed_in_round = true;
        let hold = (now - arrived).as_micros() as u32;
        Some(Echo {
            rid,
            ts_us: ts.wrapping_add(hold),
            is_clr: true,
        })
    }

    /// Earliest time [`handle_timeout`](Self::handle_timeout) is needed.
    pub fn poll_timeout(&self) -> Option<Time> {
        if !self.started {
            return None;
        }
        // Same arithmetic as check_round_end (Duration sums, not 2.0 * t in f64), so the
        // deadline never falls 1 ns short and spins the host.
        let td = Self::secs(self.feedback_round_s());
        let mut next = self.round_start + if self.saw_non_clr { td } else { td + td };
        next = next.min(self.nofb_halved_at.max(self.last_any_feedback) + self.nofb_period());
        if let Some(c) = self.clr {
            next = next.min(c.last_heard + Self::secs(self.cfg.clr_timeout_t * c.t_at_heard));
            if self.cfg.clr_silence_halving_rtts > 0.0 && !c.halved_for_silence && !c.leaving {
                next = next.min(self.clr_halving_due(&c));
            }
        }
        if self.slow_start && self.x < self.x_target {
            next = next.min(self.ramp_tick + Self::secs(self.r_max / 8.0));
        }
        if self.increasing() {
            next = next.min(self.ramp_tick + Self::secs(self.r_max / INCREASE_TICKS));
        }
        Some(next)
    }

    /// Halving period without any feedback: `no_feedback_rtts` R_max (dissertation §7.4,
    /// RFC 4654 §3.3: "for every 10 consecutive RTTs without feedback") when the last report
    /// came from a CLR that was not leaving: the CLR reports every RTT (<= R_max), so ten
    /// R_max of silence means the reports are not getting through (S27 / E15).
    ///
    /// Otherwise the next report can only come from a receiver's feedback timer, up to two
    /// rounds away, and the period is at least two feedback rounds. At low rates the
    /// dissertation's `T = b (c+1) s / X = 16 s/X` is longer than 10 R_max (R_max >= s/X +
    /// ts_gran), and a bare 10 R_max rule halves the rate before any timer can fire; each
    /// halving stretches T and the gap between packets, receivers push their timers back by
    /// the gap (RFC 4654 §4.5), and the rate spirals to the floor while receivers are alive:
    /// at the start (one packet per R_max: T = 16 R_max), and after a CLR's leave report at a
    /// low rate (S17 seed 3: the 12.5 %-loss CLR left at 30 kbit/s, nobody reported again
    /// and X fell to 1.8 kbit/s).
    fn nofb_period(&self) -> Duration {
        let rule = self.cfg.no_feedback_rtts * self.r_max;
        Self::secs(if self.last_fb_from_clr {
            rule
        } else {
            rule.max(2.0 * self.feedback_round_s())
        })
    }

    fn clr_halving_due(&self, c: &Clr) -> Time {
        c.last_heard + Self::secs(self.cfg.clr_silence_halving_rtts * self.r_max)
    }

    /// Timers: round end, no-feedback halving, CLR timeout, CLR-silence halving, ramp.
    pub fn handle_timeout(&mut self, now: Time) {
        if !self.started {
            return;
        }
        self.advance(now);
        self.check_round_end(now);
        // No feedback at all: halve per no_feedback_rtts R_max (floor 1 packet / 64 s).
        let period = self.nofb_period();
        if now >= self.nofb_halved_at.max(self.last_any_feedback) + period {
            self.x = (self.x / 2.0).max(self.min_rate());
            self.stop_ramp(now);
            self.nofb_halved_at = now;
            self.apply_rmax_floor();
        }
        if let Some(mut c) = self.clr {
            if now >= c.last_heard + Self::secs(self.cfg.clr_timeout_t * c.t_at_heard) {
                // The CLR crashed or left without saying so.
                self.clr = None;
                self.hold_increase_until = now + Self::secs(self.feedback_round_s());
            } else if self.cfg.clr_silence_halving_rtts > 0.0
                && !c.halved_for_silence
                // A CLR that said it leaves is silent by design: its limit is gone.
                && !c.leaving
                && now >= self.clr_halving_due(&c)
            {
                c.halved_for_silence = true;
                self.clr = Some(c);
                if now - c.selected_at >= Self::secs(10.0 * self.r_max) {
                    self.x = (self.x / 2.0).max(self.min_rate());
                    self.stop_ramp(now);
                }
            }
        }
    }

    fn stop_ramp(&mut self, now: Time) {
        self.x_target = self.x;
        self.ramp_from = self.x;
        self.ramp_at = now;
        self.last_increase = now;
    }

    /// True while X climbs towards the CLR's rate under the increase cap (a timer ticks
    /// every `R_max / INCREASE_TICKS` then, so the climb is a fine staircase).
    fn increasing(&self) -> bool {
        !self.slow_start
            && self.x < self.x_target
            && self
                .clr
                .is_some_and(|c| !c.leaving && self.ramp_tick < self.increase_horizon(&c))
    }

    /// The capped increase runs at most one `R_max` past the CLR's last report: without news
    /// the sender does not keep climbing (and does not bank the silent time for later).
    fn increase_horizon(&self, c: &Clr) -> Time {
        c.last_heard + Self::secs(self.r_max)
    }

    /// Moves X along the slow-start ramp (towards the target over one `R_max`), or, outside
    /// slow start, along the capped increase: `INCREASE_SLOPE · s / R_max²` per second of
    /// time accrued since `last_increase`, accrued only while the increase is allowed (up to
    /// one `R_max` after the CLR's last report, not during a hold). Every caller runs this
    /// before it changes X, the target or `R_max`, so each stretch of time is charged at the
    /// `R_max` in force during it.
    ///
    /// Why continuous and not a step per CLR report (RFC 4654 §3.3 case 4): a step per report
    /// that makes up for the time since the last one makes the rate jump by up to a whole
    /// packet per `R_max` at once after a gap (the first report after a feedback blackout,
    /// E15: 2.07 x the cap over one `R_max`), and any window of one `R_max` that holds such a
    /// step and the following climb sees up to twice the cap.
    fn advance(&mut self, now: Time) {
        // A host that hands in an older instant (out-of-order calls) must not make time
        // already accrued count twice.
        let now = now.max(self.ramp_tick);
        self.ramp_tick = now;
        if self.slow_start {
            if self.x < self.x_target {
                let frac = ((now - self.ramp_at).as_secs_f64() / self.r_max).min(1.0);
                let x = self.ramp_from + (self.x_target - self.ramp_from) * frac;
                self.x = self.x.max(x.min(self.x_target));
            }
            self.last_increase = now;
            return;
        }
        let horizon = match self.clr {
            Some(c) if !c.leaving && self.x < self.x_target => self.increase_horizon(&c),
            _ => {
                self.last_increase = now;
                return;
            }
        };
        let start = self.last_increase.max(self.hold_increase_until);
        let until = now.min(horizon);
        if until > start {
            let slope = INCREASE_SLOPE * self.s / (self.r_max * self.r_max);
            self.x = (self.x + slope * (until - start).as_secs_f64()).min(self.x_target);
        }
        // Time past the horizon or inside a hold is never accrued later.
        self.last_increase = now;
    }

    fn apply_rmax_floor(&mut self) {
        // RFC 4654 §3.2: R_max >= max inter-packet gap (s/X + ts_gran).
        let floor = self.s / self.x.max(1e-9) + self.cfg.ts_gran_s;
        self.r_max = self.r_max.max(floor.min(1e4));
    }

    /// Parses and handles one report (bytes from the feedback socket). Malformed reports are
    /// counted and returned as errors; they change nothing else.
    pub fn handle_report(&mut self, now: Time, bytes: &[u8]) -> Result<()> {
        match TfmccReport::parse(bytes) {
            Ok(rep) => {
                self.handle_parsed_report(now, &rep);
                Ok(())
            }
            Err(e) => {
                self.malformed += 1;
                Err(e)
            }
        }
    }

    /// Handles one parsed report.
    pub fn handle_parsed_report(&mut self, now: Time, rep: &TfmccReport) {
        self.start(now);
        self.advance(now);
        self.reports_total += 1;
        self.last_any_feedback = now;
        self.nofb_halved_at = now;
        // Sender-side RTT from the echoed (hold-adjusted) data timestamp.
        let rtt_s = ts_diff_s(now.as_micros() as u32, rep.echo_ts_us)
            .filter(|&r| r < 3600.0)
            .map(|r| r.max(1e-3));
        if let Some(r) = rtt_s {
            if r > self.r_max {
                self.r_max = r;
                self.saw_higher_rtt = true;
            }
            self.r_peak = self.r_peak.max(r);
        }
        let reported = rep.x_rate as f64;
        // Rate for CLR selection: a receiver that has loss but no RTT computed it with the
        // RTT it reports; rescale by that RTT over our measurement (X is exactly 1/R).
        let mut rate = reported;
        if !rep.have_rtt && rep.have_loss {
            if let Some(r) = rtt_s {
                if rep.rtt_us > 0 {
                    rate = reported * (rep.rtt_us as f64 / 1e6) / r;
                }
            }
        }
        let rate = rate.max(self.min_rate());
        let is_clr = self.clr.is_some_and(|c| c.id == rep.rid);
        let current_round = rep.round == self.round;
        if is_clr {
            self.cur.clr_reports += 1;
        } else if current_round {
            self.cur.non_clr_reports += 1;
            self.saw_non_clr = true;
        }
        if current_round {
            self.cur.min_rate = self.cur.min_rate.min(rate);
            if rate < self.lowest_two[0] {
                self.lowest_two = [rate, self.lowest_two[0]];
            } else if rate < self.lowest_two[1] {
                self.lowest_two[1] = rate;
            }
        }
        // Suppression uses the uncorrected rate (RFC 4654 §3.4: otherwise implosion).
        if self.slow_start && rep.have_loss {
            // The first loss anywhere ends slow start. Receive-rate suppression values are
            // not comparable with loss-based rates, so suppression restarts from this report
            // (if it counts for suppression: the CLR's reports never do).
            self.slow_start = false;
            if is_clr {
                self.x_supp = f64::INFINITY;
                self.supp_from_loss = false;
            } else {
                self.x_supp = reported;
                self.supp_from_loss = true;
            }
        } else if !is_clr && current_round && reported < self.x_supp {
            self.x_supp = reported;
            self.supp_from_loss = rep.have_loss;
        }
        self.update_rate(now, rep, rate);
        self.last_fb_from_clr =
            !rep.leave && self.clr.is_some_and(|c| c.id == rep.rid && !c.leaving);
        self.queue_echo(now, rep, rate);
        self.check_round_end(now);
        self.apply_rmax_floor();
    }

    fn update_rate(&mut self, now: Time, rep: &TfmccReport, rate: f64) {
        let t = self.feedback_round_s();
        match self.clr {
            Some(mut c) if c.id == rep.rid => {
                c.last_heard = now;
                c.t_at_heard = t;
                c.halved_for_silence = false;
                c.rate = rate;
                c.leaving = rep.leave;
                c.have_rtt = rep.have_rtt;
                self.clr = Some(c);
                if rep.leave {
                    // Keep it until someone else reports; it must not limit increases then.
                    self.hold_increase_until = now + Self::secs(t);
                }
                self.set_target(now, rate);
            }
            Some(c) if !c.leaving => {
                if rate < self.x && !rep.leave {
                    self.switch_clr(now, rep, rate);
                    self.x = rate;
                    self.x_target = rate;
                    self.last_increase = now;
                }
            }
            _ => {
                // No CLR, or the CLR announced its leave: this receiver becomes CLR
                // (RFC 4654 §3.3 cases 1 and 3).
                if rep.leave {
                    return;
                }
                let had_leaving = self.clr.is_some();
                self.switch_clr(now, rep, rate);
                if had_leaving {
                    self.hold_increase_until = now + Self::secs(t);
                }
                self.set_target(now, rate);
            }
        }
    }

    fn switch_clr(&mut self, now: Time, rep: &TfmccReport, rate: f64) {
        self.clr = Some(Clr {
            id: rep.rid,
            rate,
            last_heard: now,
            selected_at: now,
            leaving: false,
            have_rtt: rep.have_rtt,
            t_at_heard: self.feedback_round_s(),
            halved_for_silence: false,
        });
        self.clr_echo = Some((rep.rid, rep.ts_us, now));
        // Echo the new CLR first; a previous "new CLR" entry is now an ordinary receiver.
        self.pending.retain(|e| e.rid != rep.rid);
        for e in self.pending.iter_mut().filter(|e| e.class == 1) {
            e.class = if e.have_rtt { 3 } else { 2 };
        }
    }

    /// The CLR's rate changed: decreases are immediate; increases are capped at one packet
    /// per `R_max` per `R_max` (outside slow start) and held after a CLR left.
    fn set_target(&mut self, now: Time, rate: f64) {
        if self.slow_start {
            if rate < self.x {
                self.x = rate;
                self.x_target = rate;
            } else if rate > self.x_target || self.x >= self.x_target {
                // New ramp towards the reported (2 x receive) rate, at least 1 packet/R_max.
                self.ramp_from = self.x;
                self.ramp_at = now;
                self.x_target = rate.max(self.x + self.s / self.r_max);
            }
            return;
        }
        // `advance(now)` already ran: X holds what was accrued up to this report, and the
        // climb towards a higher rate continues from here (see `advance`).
        self.x_target = rate;
        if rate <= self.x {
            self.x = rate;
        }
        self.last_increase = now;
    }

    fn queue_echo(&mut self, now: Time, rep: &TfmccReport, rate: f64) {
        let clr_id = self.clr.map(|c| c.id);
        if Some(rep.rid) == clr_id {
            self.clr_echo = Some((rep.rid, rep.ts_us, now));
        }
        let class = match (Some(rep.rid) == clr_id, rep.have_rtt) {
            (true, _) if self.clr.is_some_and(|c| c.selected_at == now) => 1,
            (true, false) => 1,
            (true, true) => 4,
            (false, false) => 2,
            (false, true) => 3,
        };
        if class == 4 {
            return; // the CLR is echoed from clr_echo on every otherwise unused packet
        }
        self.pending.retain(|e| e.rid != rep.rid);
        self.pending.push(PendingEcho {
            rid: rep.rid,
            ts_us: rep.ts_us,
            arrived: now,
            class,
            round: rep.round,
            rate,
            have_rtt: rep.have_rtt,
        });
        if self.pending.len() > MAX_PENDING_ECHOES {
            // Drop the least useful: highest class, newest round, highest rate.
            if let Some((i, _)) = self.pending.iter().enumerate().max_by(|(_, a), (_, b)| {
                a.class
                    .cmp(&b.class)
                    .then_with(|| a.rate.total_cmp(&b.rate))
            }) {
                self.pending.swap_remove(i);
            }
        }
    }

    fn check_round_end(&mut self, now: Time) {
        let t = Self::secs(self.feedback_round_s());
        let elapsed = now - self.round_start;
        if !((elapsed >= t && self.saw_non_clr) || elapsed >= t + t) {
            return;
        }
        // Close the round.
        self.cur.round = self.round;
        self.cur.start_s = self.round_start.as_secs_f64();
        self.cur.duration_s = elapsed.as_secs_f64();
        self.rounds.push_back(self.cur);
        if self.rounds.len() > ROUND_LOG {
            self.rounds.pop_front();
        }
        let second = std::mem::replace(&mut self.lowest_two, [f64::INFINITY; 2])[1];
        if second.is_finite() {
            self.second_lowest = Some(second);
        }
        self.round = self.round.wrapping_add(1);
        self.round_start = now;
        self.saw_non_clr = false;
        self.x_supp = f64::INFINITY;
        self.supp_from_loss = false;
        self.clr_echoed_in_round = false;
        if !self.saw_higher_rtt {
            self.r_max = (self.r_max * self.cfg.rmax_decay).max(self.r_peak);
        }
        self.apply_rmax_floor();
        self.saw_higher_rtt = false;
        self.r_peak = 0.0;
        self.cur = RoundSummary {
            min_rate: f64::INFINITY,
            ..Default::default()
        };
        // Drop echoes that are more than a round old: their RTT samples would be stale.
        let round = self.round;
        self.pending.retain(|e| round.wrapping_sub(e.round) <= 2);
    }

    /// Loss event rate reported in a report (for applications that want it).
    pub fn report_p(rep: &TfmccReport) -> f64 {
        decode_p(rep.p_fixed)
    }
}
