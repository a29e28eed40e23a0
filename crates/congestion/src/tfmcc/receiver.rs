//! TFMCC receiver (RFC 4654 §4–5, dissertation §7.2–7.3; spec §2.2–2.5, §2.12).
//!
//! Measures the loss event rate (shared [`LossHistory`]), its RTT (initial value from the
//! header's `R_max`, echo-based samples, one-way-delay adjustments in between), the receive
//! rate, and computes `R_calc`. Non-CLR receivers report under exponential-timer suppression
//! with class-based cancellation; the CLR reports once per RTT and at once on a new loss
//! event.

use super::feedback::{cancel_feedback_lazy, feedback_delay, CancelInputs, SplitMix64};
use super::{ts_diff_s, TfmccConfig};
use crate::controller::{Action, Decision, LayeredController, PacketArrival, Stats, TimerReason};
use crate::session::SessionInfo;
use crate::tfrc::equation::{simplified_loss_interval, tcp_throughput};
use crate::tfrc::loss_history::{extend_u32, AliConfig, LossHistory};
use crate::time::Time;
use crate::wire::tfmcc::{TfmccDataFields, TfmccReport, RATE_INFINITE};
use crate::wire::tfrc::{encode_p, sat_u32};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// The TFMCC receiver.
///
/// `repr(C)` with the fields every data packet touches first and the rarely used ones last:
/// a host with thousands of receivers (the simulator's 10,000-receiver scale run) is bound by
/// the cache lines each packet touches per receiver, and can prefetch just
/// [`TfmccReceiver::HOT_BYTES`] ahead of the call. Field order changes no behaviour.
#[derive(Clone, Debug)]
#[repr(C)]
pub struct TfmccReceiver {
    // --- hot: read or written on every data packet (the loss history's hot prefix last) ---
    /// Shared by every receiver of a host's session (one cache line for all of them).
    cfg: Arc<TfmccConfig>,
    s: f64,
    rtt_adjusted: f64,
    last_arrival: Time,
    /// Bytes of every entry still in `arrivals`, the logically pruned ones included.
    arrivals_bytes: u64,
    /// Largest window horizon applied so far: entries with time <= this are pruned.
    pruned_to: Option<Time>,
    /// `Duration` of the receive-rate window and of the 10-RTT quiet limit, memoised: both
    /// are converted from seconds on every packet and their inputs rarely change.
    window_memo: SecsMemo,
    quiet_memo: SecsMemo,
    /// Receive-rate window: (arrival, bytes), oldest first. Entries at or before
    /// `pruned_to` are logically gone and dropped lazily (see [`TfmccReceiver::prune`]).
    arrivals: VecDeque<(Time, u32)>,
    actions: VecDeque<Action>,
    decisions: VecDeque<Decision>,
    last_hdr: Option<TfmccDataFields>,
    timer: Option<Time>,
    /// Read on every packet while a feedback timer is pending (a fifth of them at scale).
    timer_rmax: f64,
    r0: f64,
    last_seq: Option<u64>,
    gap_pushed: Duration,
    /// `D_r` = data ts - echoed report ts at the last real sample (mod 2^32 us).
    d_rs: Option<u32>,
    rid: u32,
    last_ts_us: u32,
    round: Option<u16>,
    joined: bool,
    initialized: bool,
    have_rtt: bool,
    is_clr: bool,
    data_since_report: bool,
    leaving: bool,
    /// Its first [`LossHistory::HOT_BYTES`] are hot; the closed intervals after them are
    /// read only on loss events and rate computations.
    history: LossHistory,
    // --- cold: rounds, echoes, reports, loss events ---
    first_arrival: Time,
    last_report: Option<Time>,
    rng: SplitMix64,
    /// RTT state: initial value, smoothed real samples (the adjusted one is above).
    rtt_init: f64,
    /// `R_max` of the first data packet: the initial RTT an unmeasured receiver computes its
    /// rate with (see [`TfmccReceiver::rate_rtt`]).
    rtt_first: f64,
    rtt_smoothed: f64,
    timer_round_start: Time,
    timer_delay: f64,
    /// The seeded first interval was computed with the initial RTT and is this many events old.
    seed_with_initial: Option<u32>,
    events_seen: u64,
    reports_sent: u64,
    packets_without_fields: u64,
}

/// `Duration::from_secs_f64(x)` for the last `x` (keyed by its bits, so the memoised value is
/// exactly what the conversion returns: results are unchanged). Starts as the true pair
/// (0.0, 0 ns), so it needs no "empty" sentinel; an `x` whose duration does not fit 2^64 ns
/// is converted every time and never stored.
#[derive(Clone, Copy, Debug)]
struct SecsMemo {
    bits: u64,
    nanos: u64,
}

impl SecsMemo {
    const ZERO: SecsMemo = SecsMemo { bits: 0, nanos: 0 };

    #[inline]
    fn get(&mut self, x: f64) -> Duration {
        if x.to_bits() != self.bits {
            let d = Duration::from_secs_f64(x);
            let Ok(nanos) = u64::try_from(d.as_nanos()) else {
                return d;
            };
            *self = SecsMemo {
                bits: x.to_bits(),
                nanos,
            };
        }
        Duration::from_nanos(self.nanos)
    }
}

impl TfmccReceiver {
    /// Bytes at the start of the struct that a data packet touches (the hot fields): what a
    /// host walking many receivers should prefetch.
    pub const HOT_BYTES: usize =
        std::mem::offset_of!(TfmccReceiver, history) + LossHistory::HOT_BYTES;

    /// A receiver with ID `rid` (unique in the session; e.g. derived from its address).
    pub fn new(cfg: TfmccConfig, rid: u32) -> Self {
        Self::with_shared_config(Arc::new(cfg), rid)
    }

    /// Like [`TfmccReceiver::new`], sharing one configuration among many receivers.
    pub fn with_shared_config(cfg: Arc<TfmccConfig>, rid: u32) -> Self {
        let seed = cfg.seed ^ (rid as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        TfmccReceiver {
            rid,
            rng: SplitMix64::new(seed),
            s: cfg.packet_size.max(1) as f64,
            joined: false,
            initialized: false,
            history: LossHistory::new(AliConfig::default(), 3),
            rtt_init: cfg.initial_rtt,
            rtt_first: cfg.initial_rtt,
            have_rtt: false,
            rtt_smoothed: cfg.initial_rtt,
            rtt_adjusted: cfg.initial_rtt,
            d_rs: None,
            seed_with_initial: None,
            events_seen: 0,
            arrivals: VecDeque::new(),
            arrivals_bytes: 0,
            pruned_to: None,
            first_arrival: Time::ZERO,
            last_arrival: Time::ZERO,
            last_ts_us: 0,
            last_seq: None,
            last_hdr: None,
            is_clr: false,
            round: None,
            r0: 0.0,
            timer: None,
            timer_round_start: Time::ZERO,
            timer_delay: 0.0,
            timer_rmax: cfg.initial_rtt,
            gap_pushed: Duration::ZERO,
            last_report: None,
            data_since_report: false,
            leaving: false,
            window_memo: SecsMemo::ZERO,
            quiet_memo: SecsMemo::ZERO,
            actions: VecDeque::new(),
            decisions: VecDeque::new(),
            reports_sent: 0,
            packets_without_fields: 0,
            cfg,
        }
    }

    /// Receiver ID.
    pub fn rid(&self) -> u32 {
        self.rid
    }

    /// RTT in use (seconds): the one-way-adjusted estimate once measured, else the current
    /// `R_max` from the data header (RFC 4654 §4.4: "the maximum RTT is used instead").
    #[inline]
    pub fn rtt(&self) -> f64 {
        if self.have_rtt {
            self.rtt_adjusted
        } else {
            self.last_hdr
                .map_or(self.rtt_init, |h| (h.max_rtt_us as f64 / 1e6).max(1e-3))
        }
    }

    /// RTT the desired rate is computed with: the measured one once there is one; before,
    /// the initial RTT, i.e. the `R_max` of the first data packet (dissertation §7.3.1: "the
    /// RTT is set to the maximum RTT value contained in the data packet ... used as the
    /// receiver's RTT until the first real RTT measurement"), or the current `R_max` if that
    /// has grown since (RFC 4654 §4.4 uses the current one; the larger stays conservative).
    ///
    /// Why not the current `R_max` alone: it decays towards the largest *measured* RTT, so an
    /// unmeasured receiver's rate ends up barely below its measured peers' and they suppress
    /// it; with correlated loss whole feedback rounds then pass without a first RTT
    /// measurement (S19: 10 % of the rounds). With the initial RTT the unmeasured receivers'
    /// rates stay clearly lower, one of them reports in every round and is echoed first (the
    /// dissertation's argument for "at least one new measurement per round", §7.6.3). The
    /// sender rescales such a report by `rtt_used / rtt_S` before it uses it for the rate.
    /// Loss-event aggregation keeps using [`TfmccReceiver::rtt`].
    pub fn rate_rtt(&self) -> f64 {
        if self.have_rtt {
            self.rtt_adjusted
        } else {
            self.rtt_first.max(self.rtt())
        }
    }

    /// True once an echo-based RTT sample was taken.
    #[inline]
    pub fn have_rtt(&self) -> bool {
        self.have_rtt
    }

    /// True while the sender's echoes say this receiver is the CLR.
    pub fn is_clr(&self) -> bool {
        self.is_clr
    }

    /// Loss event rate.
    pub fn loss_event_rate(&self) -> f64 {
        self.history.loss_event_rate()
    }

    /// True once a loss event was seen.
    pub fn have_loss(&self) -> bool {
        self.history.has_loss()
    }

    /// The loss history.
    pub fn history(&self) -> &LossHistory {
        &self.history
    }

    /// Reports produced.
    pub fn reports_sent(&self) -> u64 {
        self.reports_sent
    }

    /// Whether a feedback timer is pending.
    pub fn timer_pending(&self) -> Option<Time> {
        self.timer
    }

    /// Addresses the next data packet will touch outside this struct: the slot after the
    /// newest receive-rate entry (written), and the oldest entry when the window is full
    /// (the lazy prune then reads from there). Only for hosts that prefetch them (the
    /// simulator walks 10,000 receivers per packet and is bound by these cache misses); the
    /// pointers are never dereferenced here.
    #[inline]
    pub fn hot_memory(&self) -> [*const u8; 2] {
        let (a, b) = self.arrivals.as_slices();
        let back = b.last().or(a.last());
        let front = if self.arrivals.len() == self.arrivals.capacity() {
            a.first().or(b.first())
        } else {
            None
        };
        let addr = |p: Option<&(Time, u32)>, ahead: usize| {
            p.map_or(std::ptr::null(), |p| {
                (p as *const (Time, u32)).wrapping_add(ahead) as *const u8
            })
        };
        [addr(back, 1), addr(front, 0)]
    }

    /// Sender's packet spacing `s / X_send` from the last data header, seconds (0 before
    /// any header).
    fn packet_gap(&self) -> f64 {
        self.last_hdr
            .map_or(0.0, |h| self.s / (h.x_send.max(1) as f64))
    }

    /// The receive-rate window: `k` RTTs, but at least four of the sender's packet gaps.
    /// On a LAN the RTT (about 1 ms) is shorter than the gap between packets at a few
    /// hundred kbit/s; a bare `k` RTT window is then often empty, the receiver reports a
    /// rate of ~0 before its first loss (2 x 0), becomes CLR and the sender collapses to
    /// its floor (seen in the live netns test, docs/protocols/tfmcc.md "Live system").
    fn recv_window(&self) -> f64 {
        (self.cfg.recv_rate_rtts * self.rtt())
            .max(4.0 * self.packet_gap())
            .clamp(1e-3, 1e4)
    }

    /// Receive rate over the last `k` RTTs (at least four packet gaps), bytes/s.
    pub fn x_recv(&self, now: Time) -> f64 {
        let Some(bytes) = self.live_bytes() else {
            return 0.0;
        };
        let window = self.recv_window();
        let span = (now - self.first_arrival).as_secs_f64().clamp(1e-3, window);
        bytes as f64 / span
    }

    /// Bytes of the receive-rate entries not yet pruned, `None` if there are none.
    fn live_bytes(&self) -> Option<u64> {
        let mut bytes = self.arrivals_bytes;
        let mut live = self.arrivals.len();
        if let Some(h) = self.pruned_to {
            for &(t, b) in self.arrivals.iter() {
                if t > h {
                    break;
                }
                bytes -= u64::from(b);
                live -= 1;
            }
        }
        (live > 0).then_some(bytes)
    }

    /// The desired rate `R_calc`, bytes/s: the equation rate once a loss was seen, else twice
    /// the receive rate (RFC 4654 §4.3.4, lets the sender slow-start).
    pub fn r_calc(&self, now: Time) -> f64 {
        if self.history.has_loss() {
            tcp_throughput(self.s, self.rate_rtt(), self.history.loss_event_rate())
        } else {
            2.0 * self.x_recv(now)
        }
    }

    /// Drops receive-rate entries older than the window, `k` RTTs back from `now`.
    ///
    /// Lazily: the window's horizon only moves the mark `pruned_to` (the entries are in time
    /// order and every entry is pushed before the prune of its own arrival, so "at or before
    /// the largest horizon so far" is exactly the set the eager front-popping removed); the
    /// entries themselves go when the ring is full ([`TfmccReceiver::push_arrival`]) or when
    /// the rate is wanted before a loss (every packet then). After a loss the rate is needed
    /// only for reports, and a population of receivers no longer reads the oldest entry of
    /// every receiver's ring on every packet.
    fn prune(&mut self, now: Time) {
        let window = self.recv_window();
        let horizon = now - self.window_memo.get(window);
        if self.pruned_to.is_none_or(|h| horizon > h) {
            self.pruned_to = Some(horizon);
        }
        if !self.history.has_loss() {
            self.compact();
        }
    }

    /// Physically drops the entries at or before `pruned_to`.
    fn compact(&mut self) {
        let Some(h) = self.pruned_to else { return };
        while let Some(&(t, b)) = self.arrivals.front() {
            if t > h {
                break;
            }
            self.arrivals.pop_front();
            self.arrivals_bytes -= u64::from(b);
        }
    }

    /// Appends an arrival to the receive-rate window, first dropping pruned entries if the
    /// ring is full. The ring then keeps at least as much room as the live window, so the
    /// (cache-missing) walk from the oldest entry happens at most once per half a ring of
    /// packets, and the memory stays within four times the live window.
    fn push_arrival(&mut self, now: Time, size: u32) {
        if self.arrivals.len() == self.arrivals.capacity() {
            self.compact();
            let live = self.arrivals.len();
            if 2 * live > self.arrivals.capacity() {
                self.arrivals.reserve(live + 1);
            }
        }
        self.arrivals.push_back((now, size));
        self.arrivals_bytes += u64::from(size);
    }

    /// Parses the RTP header extension block of a data packet and handles the packet. A
    /// packet without a (valid) TFMCC element still counts for loss and receive rate;
    /// a malformed element is returned as an error after that.
    pub fn handle_packet_with_extension(
        &mut self,
        now: Time,
        pkt: &PacketArrival,
        ext_block: &[u8],
    ) -> crate::Result<()> {
        match TfmccDataFields::from_extension_block(ext_block) {
            Ok(Some(f)) => {
                self.handle_data(now, &f, pkt.size);
                Ok(())
            }
            Ok(None) => {
                self.handle_packet(now, pkt);
                Ok(())
            }
            Err(e) => {
                self.handle_packet(now, pkt);
                Err(e)
            }
        }
    }

    /// A data packet with its TFMCC fields arrived.
    pub fn handle_data(&mut self, now: Time, f: &TfmccDataFields, size: u32) {
        if self.leaving {
            return;
        }
        let max_rtt = (f.max_rtt_us as f64 / 1e6).max(1e-3);
        if !self.initialized {
            // RFC 4654 §4.1: RTT := R_max from the first packet; p = 0.
            self.initialized = true;
            self.rtt_init = max_rtt;
            self.rtt_first = max_rtt;
            self.rtt_smoothed = max_rtt;
            self.rtt_adjusted = max_rtt;
            self.first_arrival = now;
            self.timer_rmax = max_rtt;
        }
        self.last_hdr = Some(*f);
        // have_loss is cleared after 10 RTTs without data so the sender may slow-start.
        if self.history.has_loss()
            && now - self.last_arrival
                > self
                    .quiet_memo
                    .get(10.0 * self.rtt().max(self.packet_gap()).min(1e6))
        {
            self.history.reset();
            self.last_seq = None;
        }
        self.last_arrival = now;
        self.gap_pushed = Duration::ZERO;
        self.data_since_report = true;
        self.push_arrival(now, size);
        self.prune(now);

        // RTT: own echo -> real sample; otherwise one-way adjustment.
        let now32 = now.as_micros() as u32;
        let mut became_clr = false;
        match f.echo {
            Some(e) if e.rid == self.rid => {
                if let Some(sample) = ts_diff_s(now32, e.ts_us).filter(|&s| s < 3600.0) {
                    let sample = sample.max(1e-3);
                    self.real_rtt_sample(sample, e.is_clr || self.is_clr);
                    self.d_rs = Some(f.ts_us.wrapping_sub(e.ts_us));
                }
                if e.is_clr && !self.is_clr {
                    became_clr = true;
                }
                self.is_clr = e.is_clr;
            }
            Some(e) => {
                if e.is_clr && self.is_clr {
                    self.is_clr = false;
                    self.log(now, "tfmcc-not-clr");
                }
                self.one_way_adjust(now32, f.ts_us);
            }
            None => self.one_way_adjust(now32, f.ts_us),
        }
        if became_clr {
            self.timer = None;
            self.log(now, "tfmcc-clr");
        }

        // Loss history, with the RTT in use for loss-event aggregation.
        let seq = extend_u32(self.last_seq, f.seq);
        self.last_seq = Some(self.last_seq.map_or(seq, |h| h.max(seq)));
        if self.last_seq == Some(seq) {
            self.last_ts_us = f.ts_us;
        }
        let out = self.history.on_packet(seq, now, self.rtt());
        if out.first_event {
            // Seed from the receive rate at the time of the loss (spec Appendix B.5).
            // With the RTT the rate is computed with, so the seeded rate is X_recv.
            let rtt = self.rate_rtt();
            let x_ref = self.x_recv(now).max(self.s / rtt);
            let l0 = simplified_loss_interval(self.s, rtt, x_ref);
            let idx = self.history.seed_first_interval(l0);
            if !self.have_rtt {
                self.seed_with_initial = idx.map(|i| i as u32);
                self.rtt_init = rtt;
            }
            self.log(now, "tfmcc-first-loss");
        }
        if out.new_events > 0 {
            self.events_seen += out.new_events as u64;
            if !out.first_event {
                if let Some(k) = self.seed_with_initial.as_mut() {
                    *k += out.new_events;
                }
            }
        }

        // Rounds. `R_calc` is computed only when a branch below needs it (a new round or a
        // pending timer): nothing between here and its uses changes its inputs, and most
        // packets need neither (a large receiver set spends its time here).
        let mut r_calc_cache: Option<f64> = None;
        let new_round = match self.round {
            None => true,
            Some(r) => {
                let d = f.round.wrapping_sub(r);
                d != 0 && d < 0x8000
            }
        };
        if new_round {
            let r_calc = *r_calc_cache.get_or_insert_with(|| self.r_calc(now));
            self.round = Some(f.round);
            self.timer = None;
            self.r0 = r_calc;
            if !self.is_clr {
                self.arm_timer(now, f, r_calc);
            }
        } else if self.timer.is_some() {
            // R_max changed: rescale the delay (t_new = t_old R_max_new / R_max_old).
            if (max_rtt - self.timer_rmax).abs() > 1e-6 * self.timer_rmax {
                self.timer_delay *= max_rtt / self.timer_rmax;
                self.timer_rmax = max_rtt;
                self.timer =
                    Some(self.timer_round_start + Duration::from_secs_f64(self.timer_delay));
            }
        }

        // Cancellation. `R_calc` only if the rule needs it (see `cancel_feedback_lazy`).
        if self.timer.is_some() {
            let inp = CancelInputs {
                r_calc: f64::NAN, // not read: the closure below supplies it
                r0: self.r0,
                x_supp: if f.x_supp == RATE_INFINITE {
                    f64::INFINITY
                } else {
                    f.x_supp as f64
                },
                // Only a measured RTT can be "higher than R_max"; an unmeasured receiver uses
                // R_max itself.
                rtt: if self.have_rtt { self.rtt() } else { 0.0 },
                max_rtt,
                slow_start: f.slow_start,
                have_loss: self.history.has_loss(),
                supp_from_loss: f.supp_from_loss,
            };
            let cancel = cancel_feedback_lazy(&inp, self.cfg.q, || {
                r_calc_cache.unwrap_or_else(|| self.r_calc(now))
            });
            if cancel {
                self.timer = None;
            }
        }

        // CLR: report once per RTT, at once on a new loss event.
        if self.is_clr {
            let due = self
                .last_report
                .is_none_or(|t| now - t >= Duration::from_secs_f64(self.rtt()));
            if due || out.new_events > 0 || became_clr {
                self.send_report(now, false);
            }
        } else if let Some(fire) = self.timer {
            if now >= fire {
                self.timer = None;
                self.send_report(now, false);
            }
        }
    }

    fn real_rtt_sample(&mut self, sample: f64, clr: bool) {
        if !self.have_rtt {
            self.have_rtt = true;
            self.rtt_smoothed = sample;
            // The seeded interval was computed with the initial RTT: l0 *= (R / R_init)^2
            // while it is still in the history.
            if let Some(age) = self.seed_with_initial.take() {
                if (age as usize) < 8 {
                    let f = (sample / self.rtt_init).powi(2);
                    self.history.intervals_mut().rescale_nth(age as usize, f);
                }
            }
        } else {
            let beta = if clr {
                self.cfg.beta_clr
            } else {
                self.cfg.beta_non_clr
            };
            // Interim one-way adjustments are discarded: smooth from the last real value.
            self.rtt_smoothed = beta * sample + (1.0 - beta) * self.rtt_smoothed;
        }
        self.rtt_adjusted = self.rtt_smoothed;
    }

    fn one_way_adjust(&mut self, now32: u32, ts_us: u32) {
        if !self.have_rtt {
            return;
        }
        let Some(d_rs) = self.d_rs else { return };
        // R' = D_r + (now - ts_j), all modulo 2^32 (clock offsets cancel).
        let r = now32.wrapping_sub(ts_us).wrapping_add(d_rs);
        if r >= 1 << 31 {
            return; // inconsistent (clock stepped); ignore
        }
        let r = (r as f64 / 1e6).max(1e-3);
        let b = self.cfg.beta_one_way;
        self.rtt_adjusted = b * r + (1.0 - b) * self.rtt_adjusted;
    }

    fn arm_timer(&mut self, now: Time, f: &TfmccDataFields, r_calc: f64) {
        let max_rtt = (f.max_rtt_us as f64 / 1e6).max(1e-3);
        let x_send = (f.x_send as f64).max(1.0);
        if self.cfg.arm_only_when_useful
            && self.have_rtt
            && r_calc >= x_send
            && self.rtt() <= max_rtt
        {
            return;
        }
        let t_round = self.cfg.feedback_round(max_rtt, x_send, self.s);
        let bias = match self.cfg.bias_gamma {
            Some(g) if !f.slow_start => Some((g, r_calc / x_send)),
            _ => None,
        };
        let x = self.rng.unit_open0();
        let delay = feedback_delay(t_round, self.cfg.n_upper, x, bias);
        self.timer_round_start = now;
        self.timer_delay = delay;
        self.timer_rmax = max_rtt;
        self.timer = Some(now + Duration::from_secs_f64(delay));
    }

    /// Announce a leave: sends a report with the leave flag and leaves layer 0.
    pub fn leave(&mut self, now: Time) {
        if !self.joined {
            return;
        }
        self.send_report(now, true);
        self.leaving = true;
        self.timer = None;
        self.joined = false;
        self.actions.push_back(Action::Leave(0));
    }

    fn send_report(&mut self, now: Time, leave: bool) {
        self.prune(now);
        let hold = (now - self.last_arrival).as_micros().min(u32::MAX as u128) as u32;
        let rep = TfmccReport {
            rid: self.rid,
            round: self.round.unwrap_or(0),
            have_rtt: self.have_rtt,
            have_loss: self.history.has_loss(),
            leave,
            is_clr: self.is_clr,
            ts_us: now.as_micros() as u32,
            echo_ts_us: self.last_ts_us.wrapping_add(hold),
            x_rate: sat_u32(self.r_calc(now)).max(1),
            x_recv: sat_u32(self.x_recv(now)),
            rtt_us: sat_u32(self.rate_rtt() * 1e6),
            p_fixed: encode_p(self.history.loss_event_rate()),
            auth: Default::default(),
        };
        self.actions.push_back(Action::SendFeedback(rep.to_bytes()));
        self.last_report = Some(now);
        self.data_since_report = false;
        self.reports_sent += 1;
    }

    fn log(&mut self, now: Time, reason: &'static str) {
        let l = u8::from(self.joined);
        self.decisions.push_back(Decision {
            at: now,
            from_layers: l,
            to_layers: l,
            reason,
            inputs: vec![
                ("rtt", self.rtt()),
                ("p", self.history.loss_event_rate()),
                ("r_calc", self.r_calc(now) * 8.0),
            ],
        });
        if self.decisions.len() > 256 {
            self.decisions.pop_front();
        }
    }
}

impl LayeredController for TfmccReceiver {
    fn name(&self) -> &'static str {
        "tfmcc"
    }

    fn handle_announcement(&mut self, _now: Time, info: &SessionInfo) {
        if info.packet_size > 0 {
            self.s = info.packet_size as f64;
        }
        if !self.joined && !self.leaving {
            self.joined = true;
            self.actions.push_back(Action::Join(0));
        }
    }

    /// A packet without TFMCC fields (the host did not parse the extension): it counts for
    /// loss (by the host's sequence number, only if no TFMCC sequence was ever seen) and for
    /// the receive rate, but cannot drive rounds or RTT.
    fn handle_packet(&mut self, now: Time, pkt: &PacketArrival) {
        self.packets_without_fields += 1;
        self.push_arrival(now, pkt.size);
        self.prune(now);
        if self.last_hdr.is_none() {
            self.history.on_packet(pkt.seq, now, self.rtt());
        }
    }

    fn handle_packet_extended(
        &mut self,
        now: Time,
        pkt: &PacketArrival,
        block: &[u8],
    ) -> crate::Result<()> {
        self.handle_packet_with_extension(now, pkt, block)
    }

    fn handle_close(&mut self, now: Time) {
        self.leave(now);
    }

    fn handle_timeout(&mut self, now: Time) {
        if let Some(fire) = self.timer {
            if now >= fire {
                // Sender stalled: push the timer back by the gap beyond R_max.
                let excess = (now - self.last_arrival)
                    .saturating_sub(Duration::from_secs_f64(self.timer_rmax));
                if excess > self.gap_pushed {
                    let extra = excess - self.gap_pushed;
                    self.gap_pushed = excess;
                    self.timer = Some(fire + extra);
                    return;
                }
                self.timer = None;
                self.send_report(now, false);
            }
        }
        if self.is_clr && self.data_since_report {
            if let Some(t) = self.last_report {
                if now - t >= Duration::from_secs_f64(self.rtt()) {
                    self.send_report(now, false);
                }
            }
        }
    }

    #[inline]
    fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    #[inline]
    fn poll_timeout(&self) -> Option<(Time, TimerReason)> {
        let mut best = self.timer.map(|t| (t, TimerReason::Feedback));
        if self.is_clr && self.data_since_report {
            if let Some(t) = self.last_report {
                let due = t + Duration::from_secs_f64(self.rtt());
                if best.is_none_or(|b| due < b.0) {
                    best = Some((due, TimerReason::Feedback));
                }
            }
        }
        best
    }

    #[inline]
    fn poll_decision(&mut self) -> Option<Decision> {
        self.decisions.pop_front()
    }

    fn stats(&self) -> Stats {
        let (received, lost, _) = self.history.counters();
        let now = self.last_arrival;
        Stats {
            protocol: "tfmcc",
            layers: u8::from(self.joined),
            subscribed_bps: self.last_hdr.map_or(0.0, |h| 8.0 * h.x_send as f64),
            estimate_bps: self
                .initialized
                .then(|| 8.0 * self.r_calc(now))
                .filter(|v| v.is_finite()),
            loss_ratio: self.history.loss_event_rate(),
            rtt_s: self.initialized.then(|| self.rtt()),
            packets_received: received,
            packets_lost: lost,
            joins: u64::from(self.joined || self.leaving),
            leaves: u64::from(self.leaving),
        }
    }

    fn layers(&self) -> u8 {
        u8::from(self.joined)
    }
}

#[cfg(test)]
mod tests;
